//! The identities an application meets, kept apart in types, and the
//! minting of command ids.
//!
//! Seed 002 names four identities that must never be collapsed into one
//! "idempotency id": the application's **request** (one logical intent), the
//! protocol's **command** (one submission), the **run** (one execution
//! attempt: MSP's turn) and the **external-effect key** (one mutation at the
//! system that owns it). A **correlation id** travels along for tracing and
//! is never used to suppress anything. Each is its own newtype so that a
//! function taking a [`CommandId`] cannot be handed a [`RequestId`].
//!
//! Command ids are UUIDv7 (RFC 9562) minted by [`CommandIdMinter`] from an
//! injected clock and injected random bits ([`Entropy`]), with a 12-bit
//! counter in `rand_a` (RFC 9562 section 6.2, method 1, "fixed bit-length
//! dedicated counter") so that ids minted by one client are strictly
//! increasing even within one millisecond or when the clock steps back.

use std::fmt;

use crate::proto::ids::{is_hyphenated_uuid, is_uuid_v7, mint_uuid_v7};

/// Why a string was refused as an identifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdError {
    /// Which identity was being parsed (`"commandId"`, `"sessionId"`, ...).
    pub what: &'static str,
    /// The refused text.
    pub text: String,
}

impl fmt::Display for IdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not a valid {}", self.text, self.what)
    }
}

impl std::error::Error for IdError {}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// The identifier as sent on the wire.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

string_id!(
    /// One protocol submission: the UUIDv7 `commandId` a client mints once
    /// per logical command and sends unchanged on every retry and replay.
    CommandId
);
string_id!(
    /// A session (`sessionId`): any hyphenated UUID, kept lowercase.
    SessionId
);
string_id!(
    /// One run (execution attempt): MSP's `turnId`. Opaque: for a fresh turn
    /// it equals the submitting command's id, but that is a correlation
    /// guarantee, not something to parse.
    TurnId
);
string_id!(
    /// A background task: the `itemId` of its `toolCall` item.
    TaskId
);
string_id!(
    /// A pending approval (`approvalId`).
    ApprovalId
);
string_id!(
    /// The application's identity for one logical request (a double click
    /// and a proxy retry carry the same one). The request gate maps it to
    /// exactly one command.
    RequestId
);
string_id!(
    /// The key of one mutation at the external system that owns it
    /// (PROTOCOL.md section 5: `<sessionId>:<approvalId>` for `msp serve`'s
    /// providers). Only a provider that honours keys can use it to dedupe.
    EffectKey
);
string_id!(
    /// A tracing tag carried alongside a request. Never used for dedupe:
    /// two requests with one correlation id are still two requests.
    CorrelationId
);

impl CommandId {
    /// Parses a command id: it must be a UUIDv7 (version 7, RFC 9562
    /// variant), as the host requires.
    pub fn parse(text: &str) -> Result<CommandId, IdError> {
        if is_uuid_v7(text) {
            Ok(CommandId(text.to_string()))
        } else {
            Err(IdError {
                what: "commandId (UUIDv7)",
                text: text.to_string(),
            })
        }
    }
}

impl SessionId {
    /// Parses a session id: any hyphenated UUID; stored lowercase, the
    /// host's spelling.
    pub fn parse(text: &str) -> Result<SessionId, IdError> {
        if is_hyphenated_uuid(text) {
            Ok(SessionId(text.to_ascii_lowercase()))
        } else {
            Err(IdError {
                what: "sessionId (UUID)",
                text: text.to_string(),
            })
        }
    }
}

macro_rules! free_id {
    ($name:ident, $what:literal) => {
        impl $name {
            /// Wraps a non-empty identifier (the host decides what else it
            /// accepts; the SDK only refuses the empty string).
            pub fn new(text: impl Into<String>) -> Result<$name, IdError> {
                let text = text.into();
                if text.is_empty() {
                    Err(IdError { what: $what, text })
                } else {
                    Ok($name(text))
                }
            }
        }
    };
}

free_id!(TurnId, "turnId");
free_id!(TaskId, "taskId");
free_id!(ApprovalId, "approvalId");
free_id!(RequestId, "request id");
free_id!(EffectKey, "effect key");
free_id!(CorrelationId, "correlation id");

impl From<&CommandId> for TurnId {
    /// The turn a fresh or queued `turn/start` will run is named by its
    /// command id (PROTOCOL.md section 2); the SDK still reads the turn id
    /// from the ack rather than assuming it.
    fn from(c: &CommandId) -> TurnId {
        TurnId(c.0.clone())
    }
}

/// A source of random bits, injected so that the client core never reads
/// OS randomness: the tokio driver passes OS randomness, the simulator
/// passes draws from its seeded RNG. Any `FnMut() -> u128` is one.
pub trait Entropy {
    /// 128 fresh random bits.
    fn next_u128(&mut self) -> u128;
}

impl<F: FnMut() -> u128> Entropy for F {
    fn next_u128(&mut self) -> u128 {
        self()
    }
}

/// A deterministic [`Entropy`]: ChaCha8 seeded with 128 bits. A simulator
/// seeds one per client from its own seeded RNG (one draw), so a seed
/// replays every command id and retry jitter bit for bit.
#[derive(Debug, Clone)]
pub struct SeededEntropy(rand_chacha::ChaCha8Rng);

impl SeededEntropy {
    /// A source determined by `seed`.
    pub fn new(seed: u128) -> SeededEntropy {
        use rand::SeedableRng;
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(&seed.to_le_bytes());
        SeededEntropy(rand_chacha::ChaCha8Rng::from_seed(key))
    }
}

impl Entropy for SeededEntropy {
    fn next_u128(&mut self) -> u128 {
        use rand::Rng;
        self.0.gen()
    }
}

/// Bits of the `rand_a` counter (RFC 9562 method 1).
const COUNTER_BITS: u32 = 12;
/// The largest counter value.
const COUNTER_MAX: u64 = (1 << COUNTER_BITS) - 1;
/// A fresh millisecond seeds the counter with random bits below this, so
/// that at least 2^11 more ids fit in that millisecond (the guard bit of
/// RFC 9562 section 6.2).
const COUNTER_SEED_MASK: u64 = (1 << (COUNTER_BITS - 1)) - 1;

/// Mints UUIDv7 command ids that strictly increase: within one millisecond
/// the 12-bit `rand_a` counter is incremented; when it would overflow, or
/// when the injected clock steps back, the timestamp is advanced by one
/// millisecond instead (RFC 9562 section 6.2 allows both).
#[derive(Debug, Clone, Default)]
pub struct CommandIdMinter {
    last_ms: u64,
    counter: u64,
    minted_count: u64,
}

impl CommandIdMinter {
    /// A minter that has minted nothing yet.
    pub fn new() -> CommandIdMinter {
        CommandIdMinter::default()
    }

    /// A new command id for `now_ms` (Unix milliseconds from the injected
    /// clock), with random bits from `entropy`.
    pub fn mint(&mut self, now_ms: u64, entropy: &mut dyn Entropy) -> CommandId {
        let bits = entropy.next_u128();
        let now_ms = now_ms & 0xFFFF_FFFF_FFFF;
        if self.minted_count == 0 || now_ms > self.last_ms {
            self.last_ms = now_ms;
            self.counter = (bits >> 64) as u64 & COUNTER_SEED_MASK;
        } else if self.counter < COUNTER_MAX {
            self.counter += 1;
        } else {
            self.last_ms += 1;
            self.counter = (bits >> 64) as u64 & COUNTER_SEED_MASK;
        }
        self.minted_count += 1;
        let rand_b = bits & 0xFFFF_FFFF_FFFF_FFFF;
        let id = mint_uuid_v7(self.last_ms, (u128::from(self.counter) << 64) | rand_b);
        debug_assert!(is_uuid_v7(&id));
        CommandId(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter_rng() -> impl FnMut() -> u128 {
        let mut x: u128 = 0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C834;
        move || {
            // xorshift-style scrambler; deterministic, good enough for ids.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn minted_ids_are_uuid_v7() {
        let mut m = CommandIdMinter::new();
        let mut r = counter_rng();
        let id = m.mint(1_754_590_931_000, &mut r);
        assert!(is_uuid_v7(id.as_str()), "{id}");
        assert!(CommandId::parse(id.as_str()).is_ok());
        assert_eq!(&id.as_str()[..13], "019885c4-e838");
    }

    #[test]
    fn ids_strictly_increase_within_one_millisecond_and_past_counter_overflow() {
        let mut m = CommandIdMinter::new();
        let mut r = counter_rng();
        let mut last = m.mint(1_000, &mut r);
        for _ in 0..10_000 {
            let next = m.mint(1_000, &mut r);
            assert!(next > last, "{next} after {last}");
            last = next;
        }
    }

    #[test]
    fn ids_increase_when_the_clock_steps_back() {
        let mut m = CommandIdMinter::new();
        let mut r = counter_rng();
        let a = m.mint(5_000, &mut r);
        let b = m.mint(4_000, &mut r);
        let c = m.mint(5_001, &mut r);
        assert!(b > a);
        assert!(c > b);
    }

    #[test]
    fn the_same_clock_and_bits_mint_the_same_ids() {
        let (mut m1, mut m2) = (CommandIdMinter::new(), CommandIdMinter::new());
        let (mut r1, mut r2) = (counter_rng(), counter_rng());
        for t in [7, 7, 8, 3] {
            assert_eq!(m1.mint(t, &mut r1), m2.mint(t, &mut r2));
        }
    }

    #[test]
    fn seeded_entropy_is_deterministic_per_seed() {
        let draw = |seed| {
            let mut e = SeededEntropy::new(seed);
            [e.next_u128(), e.next_u128()]
        };
        assert_eq!(draw(42), draw(42));
        assert_ne!(draw(42), draw(43));
        assert_ne!(draw(42)[0], draw(42)[1]);
    }

    #[test]
    fn bad_ids_are_typed_errors() {
        assert!(CommandId::parse("017f22e2-79b0-4cc3-98c4-dc0c0c07398f").is_err());
        assert!(CommandId::parse("").is_err());
        assert!(SessionId::parse("nope").is_err());
        assert_eq!(
            SessionId::parse("0198F0AA-1111-7000-8000-0000000000AA")
                .expect("a UUID")
                .as_str(),
            "0198f0aa-1111-7000-8000-0000000000aa"
        );
        assert!(RequestId::new("").is_err());
        assert!(TurnId::new("t").is_ok());
    }
}
