//! The wall clock: the only place `msp serve` reads time for the core.
//!
//! The core takes time as an input on every `handle_*` call and never runs
//! it backwards (it keeps the maximum it has seen), so a wall clock that
//! steps back is harmless to it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 if the system clock is before it).
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// How long to wait from `now_ms` until the absolute deadline `at_ms`
/// (zero when it is due).
pub fn until(at_ms: u64, now_ms: u64) -> Duration {
    Duration::from_millis(at_ms.saturating_sub(now_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_is_after_2024() {
        // 2024-01-01T00:00:00Z; a clock before it means the epoch math broke.
        assert!(wall_ms() > 1_704_067_200_000);
    }

    #[test]
    fn until_is_zero_when_due() {
        assert_eq!(until(10, 20), Duration::ZERO);
        assert_eq!(until(25, 20), Duration::from_millis(5));
    }
}
