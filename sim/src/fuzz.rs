//! Coverage-guided search over choice sequences: keep every sequence whose
//! run reached a feature no earlier run did ([`crate::coverage`]), and
//! make new candidates by mutating kept ones: a neighbouring fault mix
//! (one or two of the mix's choices redrawn) and a fresh run under it; the
//! same run up to a point, then fresh choices (the same fault mix and
//! history up to there); splice two; insert a fault at an opportunity
//! where none struck; perturb a few choices; cut a sequence short.
//! Later-kept sequences are picked more often. One candidate in
//! `FRESH_EVERY` is a fresh seed. (Swarm testing makes the fault mix
//! the strongest lever: mixes that paid off get more runs.) Beside it, the plain
//! random baseline runs fresh seeds only, so the two can be compared over
//! the same wall time (the CLI keeps the time; this module counts runs
//! and is deterministic given its seed).
//!
//! Fault model: none of its own; it only chooses which choice sequences
//! the simulator runs.

use std::collections::BTreeSet;

use msp::core::bugs::Bug;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::choice::{self, Choice};
use crate::coverage;
use crate::oracle::Violation;
use crate::plan::Plan;
use crate::run::{run_with, RunConfig, RunResult};
use crate::workload::Scenario;
use crate::world::Decision;

/// One in this many candidates is a fresh seed rather than a mutant.
const FRESH_EVERY: u64 = 3;

/// What one run of the search found.
#[derive(Debug, Clone)]
pub struct Step {
    /// Features this run reached first.
    pub new_features: usize,
    /// Its violations, if any.
    pub violations: Vec<Violation>,
    /// Its choices (trailing simplest left out).
    pub values: Vec<u64>,
    /// The seed it was drawn from, if it was a fresh seed.
    pub seed: Option<u64>,
}

/// A kept sequence.
#[derive(Debug, Clone)]
struct Kept {
    values: Vec<u64>,
    choices: Vec<Choice>,
}

/// A search: kept sequences, the coverage so far, its own RNG.
pub struct Search {
    scenario: Scenario,
    bug: Option<Bug>,
    guided: bool,
    kept: Vec<Kept>,
    /// Every feature reached so far.
    pub coverage: BTreeSet<String>,
    rng: ChaCha8Rng,
    next_seed: u64,
    /// Runs so far.
    pub runs_count: u64,
}

impl Search {
    /// A coverage-guided search of `scenario` whose fresh seeds start at
    /// `first_seed` and whose mutations are drawn from `rng_seed`.
    pub fn guided(scenario: Scenario, bug: Option<Bug>, first_seed: u64, rng_seed: u64) -> Search {
        Search {
            scenario,
            bug,
            guided: true,
            kept: Vec::new(),
            coverage: BTreeSet::new(),
            rng: ChaCha8Rng::seed_from_u64(rng_seed),
            next_seed: first_seed,
            runs_count: 0,
        }
    }

    /// The baseline: fresh seeds only, from `first_seed` on.
    pub fn random(scenario: Scenario, bug: Option<Bug>, first_seed: u64) -> Search {
        Search {
            guided: false,
            ..Search::guided(scenario, bug, first_seed, 0)
        }
    }

    /// Sequences kept for reaching new coverage.
    pub fn kept_count(&self) -> usize {
        self.kept.len()
    }

    fn cfg(&self, seed: u64) -> RunConfig {
        RunConfig {
            scenario: self.scenario,
            seed,
            bug: self.bug,
            client: Default::default(),
        }
    }

    /// Runs one more candidate.
    pub fn step(&mut self) -> Step {
        self.runs_count += 1;
        let fresh =
            !self.guided || self.kept.is_empty() || self.runs_count.is_multiple_of(FRESH_EVERY);
        let (r, seed) = if fresh {
            let seed = self.next_seed;
            self.next_seed += 1;
            (run_with(&self.cfg(seed), &Plan::seeded(), None), Some(seed))
        } else {
            let (values, then_seed) = self.mutant();
            let plan = Plan {
                then_seed,
                ..Plan::recorded(values)
            };
            (run_with(&self.cfg(0), &plan, None), None)
        };
        self.absorb(r, seed)
    }

    fn absorb(&mut self, r: RunResult, seed: Option<u64>) -> Step {
        let f = coverage::features(&r);
        let before = self.coverage.len();
        self.coverage.extend(f);
        let new_features = self.coverage.len() - before;
        let values = choice::values(&r.choices);
        if self.guided && new_features > 0 {
            self.kept.push(Kept {
                values: values.clone(),
                choices: r.choices,
            });
        }
        Step {
            new_features,
            violations: r.violations,
            values,
            seed,
        }
    }

    /// A mutant of a kept sequence, and the seed of the stream that goes
    /// on past its end (else the simplest choices do). Sequences kept
    /// later (they reached what earlier ones did not) are picked more.
    fn mutant(&mut self) -> (Vec<u64>, Option<u64>) {
        let n = self.kept.len();
        let a = n - 1 - self.rng.gen_range(0..n).min(self.rng.gen_range(0..n));
        let k = self.kept[a].clone();
        let mut v = k.values.clone();
        if v.is_empty() {
            return (v, None);
        }
        // Where the fault mix's decisions end (the first other choice).
        let mix_end = k
            .choices
            .iter()
            .position(|c| c.kind != Decision::FaultMix)
            .unwrap_or(0)
            .min(v.len());
        match self.rng.gen_range(0..10) {
            4..=6 => {
                // Go on another way: the same run up to a point (past its
                // fault mix), then fresh choices from a new stream. Early
                // cuts (a new run under a fault mix that paid off) more
                // often than late ones (a new ending).
                let u: f64 = self.rng.gen();
                let cut = mix_end + ((v.len() - mix_end) as f64 * u * u) as usize;
                v.truncate(cut);
                return (v, Some(self.rng.gen()));
            }
            7..=9 => {
                // A neighbouring fault mix (one or two of its on/off or
                // level choices redrawn), then a fresh run under it.
                v.resize(mix_end, 0);
                for _ in 0..self.rng.gen_range(1..=2) {
                    if mix_end == 0 {
                        break;
                    }
                    let i = self.rng.gen_range(0..mix_end);
                    v[i] = self.rng.gen_range(0..k.choices[i].options);
                }
                return (v, Some(self.rng.gen()));
            }
            0 => {
                // Splice: a prefix of this one, the rest of another.
                let b = self.rng.gen_range(0..self.kept.len());
                let other = &self.kept[b].values;
                let cut = self.rng.gen_range(0..v.len());
                let from = cut.min(other.len());
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            1 => {
                // Insert a fault where an opportunity passed without one.
                let spots: Vec<usize> = k
                    .choices
                    .iter()
                    .enumerate()
                    .take(v.len())
                    .filter(|(i, c)| {
                        c.options == 2
                            && v[*i] == 0
                            && matches!(
                                c.kind,
                                Decision::Net | Decision::Crash | Decision::Disk | Decision::Effect
                            )
                    })
                    .map(|(i, _)| i)
                    .collect();
                if let Some(&i) = spots.get(self.rng.gen_range(0..spots.len().max(1))) {
                    v[i] = 1;
                }
            }
            2 => {
                // Perturb a few choices within their options.
                for _ in 0..self.rng.gen_range(1..4) {
                    let i = self.rng.gen_range(0..v.len());
                    let options = k.choices.get(i).map_or(2, |c| c.options);
                    v[i] = self.rng.gen_range(0..options);
                }
            }
            _ => {
                // Cut short: everything after a point at its simplest.
                let cut = self.rng.gen_range(0..v.len());
                v.truncate(cut);
            }
        }
        (v, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_keeps_what_reached_new_coverage_and_is_deterministic() {
        let go = || {
            let mut s = Search::guided(Scenario::CrashStorm, None, 0, 7);
            let news: Vec<usize> = (0..12).map(|_| s.step().new_features).collect();
            (news, s.coverage.len(), s.kept_count())
        };
        let (news, total, kept) = go();
        assert!(news[0] > 0, "the first run covers something");
        assert_eq!(kept, news.iter().filter(|n| **n > 0).count());
        assert_eq!(total, news.iter().sum::<usize>());
        assert_eq!(go(), (news, total, kept), "same seed, same search");
    }
}
