//! `MSP_CRASH_AT`: a real-process failpoint, in the manner of sled's.
//!
//! **Test hook only.** `MSP_CRASH_AT=<crash-point-name>[:N]` makes the
//! driver call [`std::process::abort`] when it carries out the N-th
//! (default: first) [`Output::CrashPoint`](crate::core::Output::CrashPoint)
//! with that name. It is the only way to stop a real process exactly
//! between two steps of the intake pair: the core emits
//! `after-intake-before-ack` right before the sends of answers whose intake
//! just became durable, so aborting there leaves a synced intake and no
//! ack. The names are those of [`CrashPoint::name`], and those of
//! [`CompactStep::name`]: the N-th compaction aborts right after that
//! step (see `io::storage`).

use crate::core::{CompactStep, CrashPoint};

/// The environment variable read at startup.
pub const ENV_VAR: &str = "MSP_CRASH_AT";

/// Why an `MSP_CRASH_AT` value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailpointError {
    /// The name is not one of [`CrashPoint::ALL`] or [`CompactStep::ALL`].
    UnknownPoint(String),
    /// The count after `:` is not a positive integer.
    BadCount(String),
}

impl std::fmt::Display for FailpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FailpointError::UnknownPoint(n) => {
                let names: Vec<&str> = CrashPoint::ALL
                    .iter()
                    .map(|p| p.name())
                    .chain(CompactStep::ALL.iter().map(|s| s.name()))
                    .collect();
                write!(f, "unknown crash point {n:?} (known: {})", names.join(", "))
            }
            FailpointError::BadCount(c) => {
                write!(f, "crash point count {c:?} is not a positive integer")
            }
        }
    }
}

impl std::error::Error for FailpointError {}

/// Where a failpoint fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Point {
    /// A crash point output.
    Crash(CrashPoint),
    /// A step of a compaction.
    Compact(CompactStep),
}

/// An armed failpoint: abort at the `nth` hit of `point`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failpoint {
    point: Point,
    nth: u64,
    hits: u64,
}

impl Failpoint {
    /// Parses `<name>[:N]`.
    pub fn parse(spec: &str) -> Result<Failpoint, FailpointError> {
        let (name, count) = match spec.split_once(':') {
            Some((n, c)) => (n, Some(c)),
            None => (spec, None),
        };
        let point = CrashPoint::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .map(Point::Crash)
            .or_else(|| {
                CompactStep::ALL
                    .into_iter()
                    .find(|s| s.name() == name)
                    .map(Point::Compact)
            })
            .ok_or_else(|| FailpointError::UnknownPoint(name.to_string()))?;
        let nth = match count {
            None => 1,
            Some(c) => match c.parse::<u64>() {
                Ok(n) if n >= 1 => n,
                _ => return Err(FailpointError::BadCount(c.to_string())),
            },
        };
        Ok(Failpoint {
            point,
            nth,
            hits: 0,
        })
    }

    /// Reads [`ENV_VAR`]; `Ok(None)` when unset or empty.
    pub fn from_env() -> Result<Option<Failpoint>, FailpointError> {
        match std::env::var(ENV_VAR) {
            Ok(v) if !v.is_empty() => Failpoint::parse(&v).map(Some),
            _ => Ok(None),
        }
    }

    /// Counts a crash point the driver reached; true when the process must
    /// die now.
    pub fn hit(&mut self, p: CrashPoint) -> bool {
        if Point::Crash(p) != self.point {
            return false;
        }
        self.hits += 1;
        self.hits == self.nth
    }

    /// Counts a compaction about to run; the step it must abort at, if it
    /// is the one the failpoint names.
    pub fn hit_compaction(&mut self) -> Option<CompactStep> {
        let Point::Compact(step) = self.point else {
            return None;
        };
        self.hits += 1;
        (self.hits == self.nth).then_some(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_name_and_count() {
        let mut f = Failpoint::parse("after-intake-before-ack:2").expect("valid");
        assert!(!f.hit(CrashPoint::AfterIntakeBeforeAck));
        assert!(
            !f.hit(CrashPoint::MidGroupCommit),
            "other points do not count"
        );
        assert!(f.hit(CrashPoint::AfterIntakeBeforeAck));
        assert!(!f.hit(CrashPoint::AfterIntakeBeforeAck), "fires once");
    }

    #[test]
    fn compaction_steps_fire_on_the_nth_compaction() {
        let mut f = Failpoint::parse("compact-renamed:2").expect("valid");
        assert!(!f.hit(CrashPoint::MidGroupCommit));
        assert_eq!(f.hit_compaction(), None);
        assert_eq!(f.hit_compaction(), Some(CompactStep::Renamed));
        assert_eq!(f.hit_compaction(), None, "fires once");
        let mut g = Failpoint::parse("mid-group-commit").expect("valid");
        assert_eq!(g.hit_compaction(), None, "not a compaction step");
    }

    #[test]
    fn default_count_is_one() {
        let mut f = Failpoint::parse("mid-group-commit").expect("valid");
        assert!(f.hit(CrashPoint::MidGroupCommit));
    }

    #[test]
    fn refuses_bad_specs() {
        assert!(matches!(
            Failpoint::parse("nope"),
            Err(FailpointError::UnknownPoint(_))
        ));
        assert!(matches!(
            Failpoint::parse("mid-group-commit:0"),
            Err(FailpointError::BadCount(_))
        ));
        assert!(matches!(
            Failpoint::parse("mid-group-commit:x"),
            Err(FailpointError::BadCount(_))
        ));
    }
}
