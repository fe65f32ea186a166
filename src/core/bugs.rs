//! Planted bugs: deliberate defects the simulator can switch on, one at a
//! time, to prove that its oracles catch them. `msp serve` never sets any;
//! there is no flag for them outside `msp-sim`.

/// One planted defect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bug {
    /// Answers leave before the intake record is synced.
    AckBeforeSync,
    /// The ledger lives in memory only: intake records are not written.
    DedupeInMemoryOnly,
    /// A reused command id is not checked against its payload signature.
    SkipPayloadCheck,
    /// A replayed `turn/start` is admitted again as a new turn.
    ReplayMintsNewTurn,
    /// Recovery leaves unsettled intakes pending instead of `abandoned`.
    NoAbandonOnRecovery,
    /// A session whose lease another process holds is loaded anyway.
    LeaseNotChecked,
    /// A torn log tail is kept instead of truncated.
    TornTailAccepted,
    /// An effect in flight at a crash is performed again at a provider that
    /// does not honour keys, instead of being reported `unknown`.
    RetryUnkeyedEffect,
    /// The host panics when a command's replay reaches the ledger (an
    /// `unwrap` on a path only duplicates take): the simulator must turn
    /// a crash of the code under test into a failing seed like any other.
    PanicOnReplay,
}

impl Bug {
    /// Every planted bug.
    pub const ALL: [Bug; 9] = [
        Bug::AckBeforeSync,
        Bug::DedupeInMemoryOnly,
        Bug::SkipPayloadCheck,
        Bug::ReplayMintsNewTurn,
        Bug::NoAbandonOnRecovery,
        Bug::LeaseNotChecked,
        Bug::TornTailAccepted,
        Bug::RetryUnkeyedEffect,
        Bug::PanicOnReplay,
    ];

    /// The `--bug` name.
    pub fn name(self) -> &'static str {
        match self {
            Bug::AckBeforeSync => "ack-before-sync",
            Bug::DedupeInMemoryOnly => "dedupe-in-memory-only",
            Bug::SkipPayloadCheck => "skip-payload-check",
            Bug::ReplayMintsNewTurn => "replay-mints-new-turn",
            Bug::NoAbandonOnRecovery => "no-abandon-on-recovery",
            Bug::LeaseNotChecked => "lease-not-checked",
            Bug::TornTailAccepted => "torn-tail-accepted",
            Bug::RetryUnkeyedEffect => "retry-unkeyed-effect",
            Bug::PanicOnReplay => "panic-on-replay",
        }
    }

    /// Parses a `--bug` name.
    pub fn from_name(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|b| b.name() == name)
    }
}

/// A set of planted bugs (empty by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BugSet(u32);

impl BugSet {
    /// The set holding one bug.
    pub fn one(b: Bug) -> BugSet {
        BugSet(1 << b as u32)
    }
    /// Whether `b` is planted.
    pub fn has(self, b: Bug) -> bool {
        self.0 & (1 << b as u32) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sets_hold_one() {
        for b in Bug::ALL {
            assert_eq!(Bug::from_name(b.name()), Some(b));
            let s = BugSet::one(b);
            assert!(Bug::ALL.iter().all(|o| s.has(*o) == (*o == b)));
        }
        assert!(!BugSet::default().has(Bug::AckBeforeSync));
    }
}
