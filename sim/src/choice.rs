//! Runs as data: where a run's decisions come from (a seeded ChaCha stream
//! or a recorded sequence of choices), the record of what each decision
//! drew, and the compact text form of a choice sequence.
//!
//! Fault model: none; this module only makes choices replayable. A choice
//! is a number in `0..options` of one decision; 0 is always the simplest
//! option (no fault, first option, shortest delay, fewest actions), so a
//! recorded sequence that runs out yields the simplest run from there on,
//! and lowering a choice never makes a run more complicated (the idea of
//! Hypothesis's choice sequences, which shrinking and the corpus build on).

use rand::RngCore;
use rand_chacha::ChaCha8Rng;

use crate::world::Decision;

/// One decision as a run drew it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// The decision point.
    pub kind: Decision,
    /// How many options it had (>= 2; one-option decisions draw nothing).
    pub options: u64,
    /// The option taken, `0..options`.
    pub value: u64,
    /// The simulated time it was drawn at (ms since the run began).
    pub at_ms: u64,
    /// Trace entries recorded before it was drawn (the last of them is
    /// what the decision follows).
    pub after_entries: usize,
}

/// Where decisions come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// The seeded stream: each decision samples its options with the
    /// weights its call site gives.
    Seeded(Box<ChaCha8Rng>),
    /// A recorded sequence, read in order; a value too large for its
    /// decision is clamped to the last option; past the end every
    /// decision takes option 0.
    Recorded {
        /// The choices.
        values: Vec<u64>,
        /// The next one to read.
        pos: usize,
    },
    /// A recorded prefix, then the seeded stream (the coverage-guided
    /// search's "go on from here another way").
    Prefixed {
        /// The prefix.
        values: Vec<u64>,
        /// The next one to read.
        pos: usize,
        /// The stream after the prefix.
        rng: Box<ChaCha8Rng>,
    },
}

impl Source {
    /// A recorded source over `values`.
    pub fn recorded(values: Vec<u64>) -> Source {
        Source::Recorded { values, pos: 0 }
    }

    /// The next recorded value for a decision of `options` options, or
    /// `None` for a seeded source.
    pub fn next_recorded(&mut self, options: u64) -> Option<u64> {
        match self {
            Source::Seeded(_) => None,
            Source::Recorded { values, pos } => {
                let v = values.get(*pos).copied().unwrap_or(0);
                *pos += 1;
                Some(v.min(options - 1))
            }
            Source::Prefixed { values, pos, .. } => {
                let v = values.get(*pos).copied()?;
                *pos += 1;
                Some(v.min(options - 1))
            }
        }
    }

    /// The seeded stream, if this source is one.
    pub fn rng(&mut self) -> Option<&mut ChaCha8Rng> {
        match self {
            Source::Seeded(r) | Source::Prefixed { rng: r, .. } => Some(r),
            Source::Recorded { .. } => None,
        }
    }
}

/// A uniform pick in `0..options` from `rng` (rejection sampling keeps
/// every option equally likely).
pub fn uniform(rng: &mut ChaCha8Rng, options: u64) -> u64 {
    debug_assert!(options >= 2);
    let zone = u64::MAX - (u64::MAX % options);
    loop {
        let v = rng.next_u64();
        if v < zone {
            return v % options;
        }
    }
}

/// The values of `choices`, without the trailing zeros (a recorded source
/// yields zeros past its end anyway).
pub fn values(choices: &[Choice]) -> Vec<u64> {
    let mut v: Vec<u64> = choices.iter().map(|c| c.value).collect();
    trim(&mut v);
    v
}

/// Drops trailing zeros.
pub fn trim(v: &mut Vec<u64>) {
    while v.last() == Some(&0) {
        v.pop();
    }
}

/// Number of choices that are not the simplest.
pub fn nonzero_count(v: &[u64]) -> usize {
    v.iter().filter(|x| **x != 0).count()
}

/// The compact text form: values separated by spaces, a run of `n >= 2`
/// zeros written `0*n` (e.g. `3 0*12 1`). The empty sequence is `""`.
pub fn encode(values: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < values.len() {
        if values[i] == 0 {
            let run = values[i..].iter().take_while(|v| **v == 0).count();
            out.push(if run == 1 {
                "0".to_string()
            } else {
                format!("0*{run}")
            });
            i += run;
        } else {
            out.push(values[i].to_string());
            i += 1;
        }
    }
    out.join(" ")
}

/// Parses [`encode`]'s form; says which token is wrong.
pub fn decode(text: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for tok in text.split_whitespace() {
        if let Some(n) = tok.strip_prefix("0*") {
            let n: usize = n
                .parse()
                .map_err(|_| format!("bad zero run {tok:?} (want 0*N)"))?;
            if n > 100_000_000 {
                return Err(format!("zero run {tok:?} is implausibly long"));
            }
            out.extend(std::iter::repeat_n(0, n));
        } else {
            out.push(
                tok.parse::<u64>()
                    .map_err(|_| format!("bad choice {tok:?} (want a number or 0*N)"))?,
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn compact_form_round_trips_and_compresses_zero_runs() {
        let v = vec![3, 0, 0, 0, 7, 0, 1, 0, 0, u64::MAX];
        let s = encode(&v);
        assert_eq!(s, format!("3 0*3 7 0 1 0*2 {}", u64::MAX));
        assert_eq!(decode(&s).unwrap(), v);
        assert_eq!(decode("").unwrap(), Vec::<u64>::new());
        assert!(decode("1 x 2").unwrap_err().contains("\"x\""));
        assert!(decode("0*y").is_err());
    }

    #[test]
    fn recorded_source_clamps_and_runs_out_into_zeros() {
        let mut s = Source::recorded(vec![5, 1]);
        assert_eq!(s.next_recorded(3), Some(2));
        assert_eq!(s.next_recorded(3), Some(1));
        assert_eq!(s.next_recorded(3), Some(0));
        let mut seeded = Source::Seeded(Box::new(ChaCha8Rng::seed_from_u64(1)));
        assert_eq!(seeded.next_recorded(3), None);
        let mut p = Source::Prefixed {
            values: vec![2],
            pos: 0,
            rng: Box::new(ChaCha8Rng::seed_from_u64(1)),
        };
        assert_eq!(p.next_recorded(3), Some(2));
        assert_eq!(p.next_recorded(3), None, "then the stream");
        assert!(p.rng().is_some());
    }

    #[test]
    fn trailing_zeros_are_trimmed() {
        let c = |value| Choice {
            kind: Decision::Net,
            options: 2,
            value,
            at_ms: 0,
            after_entries: 0,
        };
        assert_eq!(values(&[c(1), c(0), c(1), c(0), c(0)]), vec![1, 0, 1]);
        assert_eq!(nonzero_count(&[1, 0, 1]), 2);
    }
}
