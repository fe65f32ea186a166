//! Identifiers: UUIDv7 validation (RFC 9562) and minting from an injected
//! clock and random bits, so that every minted id is reproducible.

/// True when `s` is a hyphenated UUID with version 7 and the RFC 9562
/// variant (`10`). Case is not significant.
pub fn is_uuid_v7(s: &str) -> bool {
    if !is_hyphenated_uuid(s) {
        return false;
    }
    match uuid::Uuid::try_parse(s) {
        Ok(u) => u.get_version_num() == 7 && u.get_variant() == uuid::Variant::RFC4122,
        Err(_) => false,
    }
}

/// True when `s` is any hyphenated UUID (8-4-4-4-12 hex digits).
pub fn is_hyphenated_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 36 {
        return false;
    }
    b.iter().enumerate().all(|(i, c)| match i {
        8 | 13 | 18 | 23 => *c == b'-',
        _ => c.is_ascii_hexdigit(),
    })
}

/// The ledger key of a command id: its lowercase form, so that two
/// spellings of one UUID name one command.
pub fn id_key(s: &str) -> String {
    s.to_ascii_lowercase()
}

/// [`HEX`]'s flag of a byte that is no hex digit.
const NOT_HEX: u8 = 0x80;
/// [`HEX`]'s flag of a lowercase hex letter.
const LOWER: u8 = 0x40;
/// [`HEX`]'s flag of an uppercase hex letter.
const UPPER: u8 = 0x20;

/// Per byte: a hex digit's value (low nibble) and its case flag, or
/// [`NOT_HEX`].
const HEX: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = LOWER | (10 + i as u8);
        t[b'A' as usize + i] = UPPER | (10 + i as u8);
        i += 1;
    }
    t
};

/// A command id as a map key (the session ledger's): the id as first
/// sent, compared and ordered exactly as its [`id_key`] (lowercase) form
/// is, so that two spellings of one UUID name one command and a map keyed
/// by it iterates in the order a map keyed by [`id_key`] strings would.
///
/// Why not the string: a ledger holds one entry per command forever, and
/// a canonical UUID (what clients send: `commandId` must be a UUIDv7)
/// spelt in one case is 16 bytes inline here instead of two 36-byte
/// strings on the heap (the key and the id as sent). Anything else (mixed
/// case, or a foreign id read from a log) keeps its text.
#[derive(Clone)]
pub enum CmdKey {
    /// A hyphenated UUID in lowercase (digits only counts as lowercase):
    /// its 128 bits, high word first.
    Lower([u64; 2]),
    /// A hyphenated UUID in uppercase.
    Upper([u64; 2]),
    /// Any other id, as sent.
    Text(Box<str>),
}

impl CmdKey {
    /// The key of `id` (as sent). One pass over the bytes through a
    /// table: the form checked, the letters' case seen and the digits read
    /// together (a command's id is keyed at its intake, its settlement and
    /// every record a load folds).
    pub fn of(id: &str) -> CmdKey {
        let b = id.as_bytes();
        if b.len() == 36 && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-') {
            let mut seen = 0u8;
            let mut read = |digits: &[&[u8]]| {
                let mut w = 0u64;
                for &c in digits.iter().flat_map(|d| d.iter()) {
                    let t = HEX[usize::from(c)];
                    seen |= t;
                    w = (w << 4) | u64::from(t & 0x0F);
                }
                w
            };
            let hi = read(&[&b[0..8], &b[9..13], &b[14..18]]);
            let lo = read(&[&b[19..23], &b[24..36]]);
            debug_assert_eq!(seen & NOT_HEX == 0, is_hyphenated_uuid(id));
            let (lower, upper) = (seen & LOWER != 0, seen & UPPER != 0);
            if seen & NOT_HEX == 0 && !(lower && upper) {
                // Digits only count as lowercase.
                return if upper {
                    CmdKey::Upper([hi, lo])
                } else {
                    CmdKey::Lower([hi, lo])
                };
            }
        }
        CmdKey::Text(id.into())
    }

    fn uuid(&self) -> Option<u128> {
        match self {
            CmdKey::Lower([h, l]) | CmdKey::Upper([h, l]) => {
                Some((u128::from(*h) << 64) | u128::from(*l))
            }
            CmdKey::Text(_) => None,
        }
    }

    /// The UUID's text in `case` (`b'a'` or `b'A'` for the letters).
    fn uuid_text(v: u128, letters: u8) -> [u8; 36] {
        let mut out = [b'-'; 36];
        let mut i = 0;
        for (pos, c) in out.iter_mut().enumerate() {
            if matches!(pos, 8 | 13 | 18 | 23) {
                continue;
            }
            let d = ((v >> (124 - 4 * i)) & 0xF) as u8;
            *c = if d < 10 { b'0' + d } else { letters + d - 10 };
            i += 1;
        }
        out
    }

    /// The id as sent.
    pub fn as_sent(&self) -> String {
        match self {
            CmdKey::Text(t) => t.to_string(),
            CmdKey::Lower(_) | CmdKey::Upper(_) => {
                let letters = if matches!(self, CmdKey::Lower(_)) {
                    b'a'
                } else {
                    b'A'
                };
                let v = self.uuid().expect("a UUID key");
                String::from_utf8(Self::uuid_text(v, letters).to_vec()).expect("ASCII")
            }
        }
    }

    /// Its [`id_key`]: the lowercase form.
    pub fn lower(&self) -> String {
        match self {
            CmdKey::Text(t) => id_key(t),
            _ => {
                let v = self.uuid().expect("a UUID key");
                String::from_utf8(Self::uuid_text(v, b'a').to_vec()).expect("ASCII")
            }
        }
    }
}

impl Ord for CmdKey {
    /// As the [`id_key`] strings compare: two UUIDs by value (the same
    /// order as their lowercase text), anything else byte by byte in
    /// lowercase.
    fn cmp(&self, other: &CmdKey) -> std::cmp::Ordering {
        if let (Some(a), Some(b)) = (self.uuid(), other.uuid()) {
            return a.cmp(&b);
        }
        let text = |k: &CmdKey| -> Vec<u8> {
            match k {
                CmdKey::Text(t) => t.bytes().map(|c| c.to_ascii_lowercase()).collect(),
                _ => CmdKey::uuid_text(k.uuid().expect("a UUID key"), b'a').to_vec(),
            }
        };
        text(self).cmp(&text(other))
    }
}

impl PartialOrd for CmdKey {
    fn partial_cmp(&self, other: &CmdKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for CmdKey {
    /// Equal [`id_key`]s.
    fn eq(&self, other: &CmdKey) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for CmdKey {}

impl std::fmt::Debug for CmdKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_sent())
    }
}

impl std::fmt::Display for CmdKey {
    /// The id as sent.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.as_sent())
    }
}

/// Mints a lowercase hyphenated UUIDv7 from a millisecond timestamp and 74
/// random bits taken from `random`.
pub fn mint_uuid_v7(unix_ms: u64, random: u128) -> String {
    let ms = unix_ms & 0xFFFF_FFFF_FFFF;
    let rand_a = (random >> 64) as u64 & 0x0FFF;
    let rand_b = random as u64 & 0x3FFF_FFFF_FFFF_FFFF;
    let hi: u64 = (ms << 16) | (0x7 << 12) | rand_a;
    let lo: u64 = (0b10 << 62) | rand_b;
    let v = ((hi as u128) << 64) | lo as u128;
    let s = uuid::Uuid::from_u128(v).hyphenated().to_string();
    debug_assert!(is_uuid_v7(&s));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9562_example_is_valid() {
        assert!(is_uuid_v7("017F22E2-79B0-7CC3-98C4-DC0C0C07398F"));
        assert!(is_uuid_v7("017f22e2-79b0-7cc3-98c4-dc0c0c07398f"));
    }

    #[test]
    fn wrong_version_variant_or_form_rejected() {
        // version 4
        assert!(!is_uuid_v7("017f22e2-79b0-4cc3-98c4-dc0c0c07398f"));
        // variant 0b11 (Microsoft)
        assert!(!is_uuid_v7("017f22e2-79b0-7cc3-c8c4-dc0c0c07398f"));
        // variant 0b0x (NCS)
        assert!(!is_uuid_v7("017f22e2-79b0-7cc3-08c4-dc0c0c07398f"));
        // unhyphenated, braced, urn, empty, garbage
        assert!(!is_uuid_v7("017f22e279b07cc398c4dc0c0c07398f"));
        assert!(!is_uuid_v7("{017f22e2-79b0-7cc3-98c4-dc0c0c07398f}"));
        assert!(!is_uuid_v7("urn:uuid:017f22e2-79b0-7cc3-98c4-dc0c0c07398f"));
        assert!(!is_uuid_v7(""));
        assert!(!is_uuid_v7("017f22e2-79b0-7cc3-98c4-dc0c0c07398g"));
    }

    #[test]
    fn command_keys_keep_the_spelling_and_compare_as_id_keys() {
        let ids = [
            "017f22e2-79b0-7cc3-98c4-dc0c0c07398f",
            "017F22E2-79B0-7CC3-98C4-DC0C0C07398F",
            "017f22E2-79b0-7cc3-98c4-dc0c0c07398f",
            "01234567-0123-0123-0123-012345678901",
            "ffffffff-ffff-ffff-ffff-ffffffffffff",
            "00000000-0000-0000-0000-000000000000",
            "C1",
            "c",
            "",
            "017f22e2-79b0-7cc3-98c4-dc0c0c07398",
            "017f22e2-79b0-7cc3-98c4-dc0c0c07398fz",
            "017f22e2-79b0-7cc3-98c4-dc0c0c07398g",
            "017f22e2-79b0-7cc3-98c4-dc0c0c0739-f",
            "017f22e2x79b0-7cc3-98c4-dc0c0c07398f",
            "017f22e2-79b0-7cc3-98c4-dc0c0c0739\u{e9}",
            "zzz",
            "-",
            "0",
            "G",
        ];
        assert!(matches!(CmdKey::of(ids[0]), CmdKey::Lower(_)));
        assert!(matches!(CmdKey::of(ids[1]), CmdKey::Upper(_)));
        assert!(matches!(CmdKey::of(ids[2]), CmdKey::Text(_)));
        assert!(matches!(CmdKey::of(ids[3]), CmdKey::Lower(_)));
        for a in ids {
            let ka = CmdKey::of(a);
            assert_eq!(ka.as_sent(), a);
            assert_eq!(ka.to_string(), a);
            assert_eq!(ka.lower(), id_key(a));
            for b in ids {
                let kb = CmdKey::of(b);
                assert_eq!(ka.cmp(&kb), id_key(a).cmp(&id_key(b)), "{a} vs {b}");
                assert_eq!(ka == kb, id_key(a) == id_key(b), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn minted_ids_are_v7_and_ordered_by_time() {
        let a = mint_uuid_v7(1_754_590_931_000, u128::MAX);
        let b = mint_uuid_v7(1_754_590_931_001, 0);
        assert!(is_uuid_v7(&a));
        assert!(is_uuid_v7(&b));
        assert!(a < b);
    }
}
