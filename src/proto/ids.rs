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
    fn minted_ids_are_v7_and_ordered_by_time() {
        let a = mint_uuid_v7(1_754_590_931_000, u128::MAX);
        let b = mint_uuid_v7(1_754_590_931_001, 0);
        assert!(is_uuid_v7(&a));
        assert!(is_uuid_v7(&b));
        assert!(a < b);
    }
}
