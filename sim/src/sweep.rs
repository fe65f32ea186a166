//! Sweeps: many seeds, on N threads, merged in seed order; shards;
//! determinism double-runs; summaries (text and JSON) and their merge
//! (which refuses shards that overlap or repeat); the coverage shortfall
//! (a named crash point never reached or never crashed at), which is not a
//! violation.
//!
//! Fault model: none; a sweep only runs [`crate::run::run`] per seed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use msp::core::bugs::Bug;
use serde_json::{json, Value};

use crate::plan::{Plan, Workload};
use crate::readable::{self, Legend};
use crate::run::{run_with, ClientKind, RunConfig, RunResult};
use crate::workload::Scenario;

/// How many trace entries a failing seed's report shows at most.
pub const REPORT_LINES: usize = 24;

/// One seed's outcome, small enough to keep for every seed.
#[derive(Debug, Clone)]
pub struct SeedOutcome {
    /// The seed.
    pub seed: u64,
    /// The trace hash.
    pub hash: u64,
    /// World events processed.
    pub events_count: u64,
    /// Bytes sent on links ([`crate::run::RunResult::wire_bytes`]).
    pub wire_bytes: u64,
    /// Simulated ms.
    pub simulated_ms: u64,
    /// Fault counts.
    pub faults: BTreeMap<&'static str, u64>,
    /// Crash points reached.
    pub cp_hits: BTreeMap<&'static str, u64>,
    /// Crash points crashed at.
    pub cp_crashes: BTreeMap<&'static str, u64>,
    /// Rules of PROTOCOL.md exercised.
    pub rules: BTreeMap<&'static str, u64>,
    /// The first violation: property, explanation, the trace entries that
    /// matter to it (from the earliest about its ids, numbered, ids named)
    /// and the names they use.
    pub failure: Option<(String, String, Vec<String>)>,
    /// Every violated property (deduplicated, in order).
    pub properties: Vec<String>,
    /// Determinism check: first divergent event, if the rerun differed.
    pub divergence: Option<String>,
    /// The fault mix.
    pub mix: String,
}

/// Renders the trace lines that lead to a violation.
pub fn context_lines(r: &RunResult, at: Option<usize>, count: usize) -> Vec<String> {
    let end = at.map_or(r.trace.entries.len(), |i| i + 1);
    let start = end.saturating_sub(count);
    r.trace.entries[start..end]
        .iter()
        .map(|e| e.to_string())
        .collect()
}

/// Runs one seed (twice when `double`), reducing it to an outcome.
pub fn run_seed(scenario: Scenario, seed: u64, bug: Option<Bug>, double: bool) -> SeedOutcome {
    run_seed_with(scenario, seed, bug, double, &Plan::seeded())
}

/// A seeded plan whose clients each issue exactly `commands` commands
/// (the scenario's other actors unchanged), or [`Plan::seeded`] (the
/// scenario's own workload) for `None`: how `msp-sim bench` measures the
/// cost per event as the workload grows, and what `run --commands`
/// sweeps. A fixed workload draws no "stop early" decisions, so its runs
/// are not those of `run` for the same seed.
pub fn commands_plan(scenario: Scenario, commands: Option<u32>) -> Plan {
    Plan {
        workload: commands.map(|n| Workload {
            commands_per_client: n,
            ..Workload::of(scenario)
        }),
        ..Plan::seeded()
    }
}

/// As [`run_seed`], drawing as `plan` says (e.g. [`commands_plan`]).
pub fn run_seed_with(
    scenario: Scenario,
    seed: u64,
    bug: Option<Bug>,
    double: bool,
    plan: &Plan,
) -> SeedOutcome {
    run_seed_client(scenario, seed, bug, ClientKind::Sdk, double, plan)
}

/// As [`run_seed_with`], with the clients of `client`.
pub fn run_seed_client(
    scenario: Scenario,
    seed: u64,
    bug: Option<Bug>,
    client: ClientKind,
    double: bool,
    plan: &Plan,
) -> SeedOutcome {
    let cfg = RunConfig {
        scenario,
        seed,
        bug,
        client,
    };
    let r = run_with(&cfg, plan, None);
    let divergence = if double {
        let again = run_with(&cfg, plan, None);
        r.trace.first_divergence(&again.trace).map(|i| {
            let a = r
                .trace
                .entries
                .get(i)
                .map_or("<end>".to_string(), |e| e.to_string());
            let b = again
                .trace
                .entries
                .get(i)
                .map_or("<end>".to_string(), |e| e.to_string());
            format!("event {i}: first run `{a}`, second run `{b}`")
        })
    } else {
        None
    };
    let failure = r.violations.first().map(|v| {
        let legend = Legend::of(&r.trace);
        let mut lines = readable::report(&r.trace, &legend, v, REPORT_LINES);
        lines.extend(legend.used_in(&lines));
        (v.property.to_string(), v.detail.clone(), lines)
    });
    let mut properties: Vec<String> = Vec::new();
    for v in &r.violations {
        if !properties.iter().any(|p| p == v.property) {
            properties.push(v.property.to_string());
        }
    }
    SeedOutcome {
        seed,
        hash: r.trace.hash(),
        events_count: r.events_count,
        wire_bytes: r.wire_bytes,
        simulated_ms: r.simulated_ms,
        faults: r.faults,
        cp_hits: r.crash_point_hits,
        cp_crashes: r.crash_point_crashes,
        rules: r.rules,
        failure,
        properties,
        divergence,
        mix: r.mix,
    }
}

/// The seeds of `range` that shard `k` of `n` (1-based) runs: every
/// n-th seed starting at the k-th. Shards never overlap and cover the range.
pub fn shard_seeds(range: std::ops::Range<u64>, k: u64, n: u64) -> Vec<u64> {
    assert!(n >= 1 && k >= 1 && k <= n, "shard K/N needs 1 <= K <= N");
    range.filter(|s| s % n == k - 1).collect()
}

/// Runs `seeds` on `jobs` threads; `on_done` is called after each seed
/// (progress). Results come back in seed order whatever the threads did.
pub fn sweep(
    scenario: Scenario,
    seeds: &[u64],
    bug: Option<Bug>,
    jobs: usize,
    double_all: bool,
    on_done: &(dyn Fn() + Sync),
) -> Vec<SeedOutcome> {
    sweep_client(
        scenario,
        seeds,
        bug,
        ClientKind::Sdk,
        &Plan::seeded(),
        jobs,
        double_all,
        on_done,
    )
}

/// As [`sweep`], with the clients of `client`, each seed drawn as `plan`
/// says ([`Plan::seeded`], or [`commands_plan`] for a fixed workload).
#[allow(clippy::too_many_arguments)]
pub fn sweep_client(
    scenario: Scenario,
    seeds: &[u64],
    bug: Option<Bug>,
    client: ClientKind,
    plan: &Plan,
    jobs: usize,
    double_all: bool,
    on_done: &(dyn Fn() + Sync),
) -> Vec<SeedOutcome> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<SeedOutcome>>> = Mutex::new(vec![None; seeds.len()]);
    std::thread::scope(|sc| {
        for _ in 0..jobs.max(1) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= seeds.len() {
                    break;
                }
                // A sample of seeds is always run twice.
                let double = double_all || i.is_multiple_of(64);
                let o = run_seed_client(scenario, seeds[i], bug, client, double, plan);
                out.lock().expect("no poisoned lock")[i] = Some(o);
                on_done();
            });
        }
    });
    out.into_inner()
        .expect("no poisoned lock")
        .into_iter()
        .map(|o| o.expect("every seed ran"))
        .collect()
}

/// The seeds one summary covers: shard `k` of `n` of `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedPart {
    /// First seed of the range.
    pub start: u64,
    /// End of the range (exclusive).
    pub end: u64,
    /// The shard (1-based).
    pub shard_k: u64,
    /// Of this many.
    pub shard_n: u64,
}

impl SeedPart {
    /// Whether `seed` is one of this part's.
    pub fn contains(&self, seed: u64) -> bool {
        (self.start..self.end).contains(&seed) && seed % self.shard_n == self.shard_k - 1
    }

    /// A seed both parts hold, if any.
    pub fn overlap(&self, o: &SeedPart) -> Option<u64> {
        (self.start.max(o.start)..self.end.min(o.end)).find(|s| self.contains(*s) && o.contains(*s))
    }
}

impl std::fmt::Display for SeedPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seeds {}..{} shard {}/{}",
            self.start, self.end, self.shard_k, self.shard_n
        )
    }
}

/// How many missing shards [`Incomplete::MissingShards`] names at most.
pub const MISSING_SHARDS_NAMED: usize = 20;

/// Why merged shards do not cover their seeds exactly once
/// ([`Summary::check_complete`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incomplete {
    /// The summary does not record which seeds it covers.
    NoParts,
    /// Shards of one range A..B into N: these (1-based) are missing.
    MissingShards {
        /// First seed of the range.
        start: u64,
        /// End of the range (exclusive).
        end: u64,
        /// The shard count.
        n: u64,
        /// How many shards are missing.
        count: u64,
        /// The missing shards, ascending (the first
        /// [`MISSING_SHARDS_NAMED`]).
        missing: Vec<u64>,
    },
    /// One shard is given more than once.
    Repeated {
        /// The repeated shard.
        part: SeedPart,
    },
    /// Parts of different ranges or shard counts leave seeds of their span
    /// uncovered.
    MissingSeeds {
        /// The lowest start of a part.
        start: u64,
        /// The highest end of a part.
        end: u64,
        /// How many seeds of `start..end` no part covers.
        count: u64,
        /// The first of them.
        first: u64,
    },
    /// Parts of different ranges or shard counts cover a seed twice.
    RepeatedSeed {
        /// The first such seed.
        seed: u64,
    },
}

impl std::fmt::Display for Incomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Incomplete::NoParts => write!(
                f,
                "a summary does not record its seed range and shard (written by an older msp-sim?)"
            ),
            Incomplete::MissingShards {
                start,
                end,
                n,
                count,
                missing,
            } => {
                let names: Vec<String> = missing.iter().map(|k| format!("{k}/{n}")).collect();
                write!(
                    f,
                    "seeds {start}..{end} in {n} shards: missing shard{} {}{}",
                    if *count == 1 { "" } else { "s" },
                    names.join(", "),
                    if *count > missing.len() as u64 {
                        format!(" (first {} of {count})", missing.len())
                    } else {
                        String::new()
                    }
                )
            }
            Incomplete::Repeated { part } => write!(f, "{part} is given twice"),
            Incomplete::MissingSeeds {
                start,
                end,
                count,
                first,
            } => write!(
                f,
                "the parts leave {count} seed(s) of {start}..{end} uncovered (the first is {first})"
            ),
            Incomplete::RepeatedSeed { seed } => {
                write!(f, "seed {seed} is in two parts")
            }
        }
    }
}

impl std::error::Error for Incomplete {}

/// How a set of parts covers the span from their lowest start to their
/// highest end.
struct Coverage {
    start: u64,
    end: u64,
    first_missing: Option<u64>,
    missing_count: u64,
    first_repeated: Option<u64>,
}

/// Counts, without visiting every seed of a large span, how `parts` cover
/// it: between two consecutive part boundaries the same parts are active
/// and their coverage repeats with the lcm of their shard counts, so one
/// period (or the whole stretch, if shorter) is enough.
fn coverage(parts: &[SeedPart]) -> Coverage {
    let start = parts.iter().map(|p| p.start).min().unwrap_or(0);
    let end = parts.iter().map(|p| p.end).max().unwrap_or(0);
    let mut bounds: Vec<u64> = parts.iter().flat_map(|p| [p.start, p.end]).collect();
    bounds.sort_unstable();
    bounds.dedup();
    let mut c = Coverage {
        start,
        end,
        first_missing: None,
        missing_count: 0,
        first_repeated: None,
    };
    for w in bounds.windows(2) {
        let (a, b) = (w[0], w[1]);
        let len = b - a;
        let active: Vec<&SeedPart> = parts
            .iter()
            .filter(|p| p.start <= a && b <= p.end)
            .collect();
        // The period of the stretch's coverage, capped at its length.
        let period = active
            .iter()
            .try_fold(1u64, |l, p| {
                let g = gcd(l, p.shard_n);
                (l / g).checked_mul(p.shard_n).filter(|x| *x < len)
            })
            .unwrap_or(len);
        for r in 0..period.min(len) {
            let seed = a + r;
            let times = (len - r).div_ceil(period);
            match active.iter().filter(|p| p.contains(seed)).count() {
                0 => {
                    c.first_missing = c.first_missing.or(Some(seed));
                    c.missing_count += times;
                }
                1 => {}
                _ => c.first_repeated = c.first_repeated.or(Some(seed)),
            }
        }
    }
    c
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// How many failing seeds a human summary lists.
pub const FAILING_SEEDS_SHOWN: usize = 20;

/// A sweep summary (mergeable across shards).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// The seeds it covers (one part per shard merged in).
    pub parts: Vec<SeedPart>,
    /// Scenario name.
    pub scenario: String,
    /// Planted bug, if any.
    pub bug: Option<String>,
    /// The client kind's name (`sdk`, `sim`), or empty when the summary
    /// does not say (written by an older msp-sim, or by a library caller).
    pub client: String,
    /// Logical commands per client, when the sweep fixed them
    /// (`run --commands N`); `None`: each scenario's own workload.
    pub commands: Option<u32>,
    /// Seeds run.
    pub seeds_count: u64,
    /// Failing seeds with property and explanation.
    pub failures: Vec<(u64, String, String)>,
    /// Seeds whose two runs diverged.
    pub divergences: Vec<(u64, String)>,
    /// Seeds double-run.
    pub double_run_count: u64,
    /// World events.
    pub events_count: u64,
    /// Simulated ms.
    pub simulated_ms: u64,
    /// Wall ms (filled by the caller).
    pub wall_ms: u64,
    /// Fault counts.
    pub faults: BTreeMap<String, u64>,
    /// Crash points reached.
    pub cp_hits: BTreeMap<String, u64>,
    /// Crash points crashed at.
    pub cp_crashes: BTreeMap<String, u64>,
    /// Rules of PROTOCOL.md exercised, by rule.
    pub rules: BTreeMap<String, u64>,
}

impl Summary {
    /// Folds seed outcomes.
    pub fn of(
        scenario: Scenario,
        bug: Option<Bug>,
        outcomes: &[SeedOutcome],
        double_all: bool,
    ) -> Summary {
        let mut s = Summary {
            scenario: scenario.name().to_string(),
            bug: bug.map(|b| b.name().to_string()),
            ..Summary::default()
        };
        for (i, o) in outcomes.iter().enumerate() {
            s.seeds_count += 1;
            s.events_count += o.events_count;
            s.simulated_ms += o.simulated_ms;
            if double_all || i % 64 == 0 {
                s.double_run_count += 1;
            }
            for (k, v) in &o.faults {
                *s.faults.entry(k.to_string()).or_insert(0) += v;
            }
            for (k, v) in &o.cp_hits {
                *s.cp_hits.entry(k.to_string()).or_insert(0) += v;
            }
            for (k, v) in &o.cp_crashes {
                *s.cp_crashes.entry(k.to_string()).or_insert(0) += v;
            }
            for (k, v) in &o.rules {
                *s.rules.entry(k.to_string()).or_insert(0) += v;
            }
            if let Some((p, d, _)) = &o.failure {
                s.failures.push((o.seed, p.clone(), d.clone()));
            }
            if let Some(d) = &o.divergence {
                s.divergences.push((o.seed, d.clone()));
            }
        }
        s
    }

    /// Crash points never hit, when the sweep is large enough to expect
    /// every one (a "sometimes" assertion).
    pub fn missed_crash_points(&self) -> Vec<&'static str> {
        self.never(&self.cp_hits)
    }

    /// Crash points never crashed at, when the sweep is large enough to
    /// expect every one.
    pub fn uncrashed_crash_points(&self) -> Vec<&'static str> {
        self.never(&self.cp_crashes)
    }

    fn never(&self, counts: &BTreeMap<String, u64>) -> Vec<&'static str> {
        let enabled = Scenario::from_name(&self.scenario).is_some_and(|s| s.crash_points_enabled());
        if !enabled || self.seeds_count < 100 {
            return Vec::new();
        }
        msp::core::CrashPoint::ALL
            .iter()
            .map(|p| p.name())
            .filter(|n| counts.get(*n).copied().unwrap_or(0) == 0)
            .collect()
    }

    /// The coverage shortfall: one line per crash point a sweep of 100
    /// seeds or more never reached or never crashed at (not a violation:
    /// the sweep did not test what it should have).
    pub fn shortfall(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .missed_crash_points()
            .into_iter()
            .map(|n| {
                format!(
                    "crash point {n} was never reached in {} seeds",
                    self.seeds_count
                )
            })
            .collect();
        for r in self.missed_rules() {
            out.push(format!(
                "rule \"{r}\" was never exercised in {} seeds",
                self.seeds_count
            ));
        }
        for n in self.uncrashed_crash_points() {
            if !self.missed_crash_points().contains(&n) {
                out.push(format!(
                    "crash point {n} was reached but never crashed at in {} seeds",
                    self.seeds_count
                ));
            }
        }
        out
    }

    /// Whether a property was violated or a seed ran two ways.
    pub fn violated(&self) -> bool {
        !self.failures.is_empty() || !self.divergences.is_empty()
    }

    /// Refuses to merge `o` into this summary if a seed would count twice
    /// (a repeated or overlapping shard) or if either does not say which
    /// seeds it covers.
    pub fn check_disjoint(&self, o: &Summary) -> Result<(), String> {
        if self.parts.is_empty() || o.parts.is_empty() {
            return Err(
                "a summary does not record its seed range and shard (written by an older msp-sim?)"
                    .into(),
            );
        }
        for a in &self.parts {
            for b in &o.parts {
                if a == b {
                    return Err(format!("{a} is given twice"));
                }
                if let Some(s) = a.overlap(b) {
                    return Err(format!("{a} and {b} overlap (seed {s} is in both)"));
                }
            }
        }
        Ok(())
    }

    /// Refuses a merged summary whose parts do not cover their seeds
    /// exactly once: when every part shards the same range A..B into the
    /// same N, each shard 1..N must be present once (the error names the
    /// missing ones); otherwise every seed from the lowest start to the
    /// highest end must be in exactly one part (ranges of their own, such
    /// as 0..100 and 100..200 unsharded, merge too). Call it once every
    /// shard is merged in; [`Summary::check_disjoint`] already refused
    /// overlaps along the way.
    pub fn check_complete(&self) -> Result<(), Incomplete> {
        let Some(first) = self.parts.first() else {
            return Err(Incomplete::NoParts);
        };
        if self
            .parts
            .iter()
            .all(|p| (p.start, p.end, p.shard_n) == (first.start, first.end, first.shard_n))
        {
            let n = first.shard_n;
            let mut seen: BTreeMap<u64, u32> = BTreeMap::new();
            for p in &self.parts {
                let times = seen.entry(p.shard_k).or_insert(0);
                *times += 1;
                if *times > 1 {
                    return Err(Incomplete::Repeated { part: *p });
                }
            }
            let present = seen.keys().filter(|k| (1..=n).contains(*k)).count() as u64;
            // Name at most MISSING_SHARDS_NAMED (a crafted N could be huge).
            let missing: Vec<u64> = (1..=n)
                .filter(|k| !seen.contains_key(k))
                .take(MISSING_SHARDS_NAMED)
                .collect();
            return if missing.is_empty() {
                Ok(())
            } else {
                Err(Incomplete::MissingShards {
                    start: first.start,
                    end: first.end,
                    n,
                    count: n - present,
                    missing,
                })
            };
        }
        let c = coverage(&self.parts);
        if let Some(seed) = c.first_repeated {
            return Err(Incomplete::RepeatedSeed { seed });
        }
        match c.first_missing {
            None => Ok(()),
            Some(first) => Err(Incomplete::MissingSeeds {
                start: c.start,
                end: c.end,
                count: c.missing_count,
                first,
            }),
        }
    }

    /// Rules of PROTOCOL.md 3-4.4 a large `mixed` sweep never exercised
    /// (a coverage shortfall: the workload does not reach them).
    pub fn missed_rules(&self) -> Vec<&'static str> {
        if self.seeds_count < 100 {
            return Vec::new();
        }
        let rules: Vec<&'static str> = if self.scenario == Scenario::Mixed.name() {
            let mut rules = crate::model::report::RULES.to_vec();
            if self.client == crate::run::ClientKind::Sdk.name() {
                rules.extend(crate::model::report::PAGE_RULES);
            }
            if self.client == crate::run::ClientKind::Sim.name() {
                rules.retain(|r| !crate::model::report::SIM_CLIENT_EXEMPT.contains(r));
            }
            rules
        } else if self.scenario == Scenario::BitRot.name() {
            crate::model::report::BITROT_RULES.to_vec()
        } else {
            return Vec::new();
        };
        rules
            .into_iter()
            .filter(|r| self.rules.get(*r).copied().unwrap_or(0) == 0)
            .collect()
    }

    /// The machine-readable form.
    pub fn to_json(&self) -> Value {
        json!({
            "parts": self.parts.iter().map(|p| json!({"seeds": [p.start, p.end], "shard": [p.shard_k, p.shard_n]})).collect::<Vec<_>>(),
            "scenario": self.scenario,
            "bug": self.bug,
            "client": (!self.client.is_empty()).then_some(&self.client),
            "commandsPerClient": self.commands,
            "seeds": self.seeds_count,
            "failures": self.failures.iter().map(|(s, p, d)| json!({"seed": s, "property": p, "detail": d})).collect::<Vec<_>>(),
            "divergences": self.divergences.iter().map(|(s, d)| json!({"seed": s, "detail": d})).collect::<Vec<_>>(),
            "doubleRuns": self.double_run_count,
            "events": self.events_count,
            "simulatedMs": self.simulated_ms,
            "wallMs": self.wall_ms,
            "faults": self.faults,
            "crashPointHits": self.cp_hits,
            "crashPointCrashes": self.cp_crashes,
            "rules": self.rules,
        })
    }

    /// Parses [`Summary::to_json`] output.
    pub fn from_json(v: &Value) -> Option<Summary> {
        let map = |x: &Value| -> BTreeMap<String, u64> {
            x.as_object()
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default()
        };
        let parts = match v.get("parts") {
            None => Vec::new(),
            Some(p) => p
                .as_array()?
                .iter()
                .map(|x| {
                    let pair = |k: &str| -> Option<(u64, u64)> {
                        let a = x[k].as_array()?;
                        Some((a.first()?.as_u64()?, a.get(1)?.as_u64()?))
                    };
                    let (start, end) = pair("seeds")?;
                    let (shard_k, shard_n) = pair("shard")?;
                    (shard_k >= 1 && shard_k <= shard_n).then_some(SeedPart {
                        start,
                        end,
                        shard_k,
                        shard_n,
                    })
                })
                .collect::<Option<Vec<SeedPart>>>()?,
        };
        Some(Summary {
            parts,
            scenario: v["scenario"].as_str()?.to_string(),
            bug: v["bug"].as_str().map(str::to_string),
            client: v["client"].as_str().unwrap_or_default().to_string(),
            commands: v["commandsPerClient"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok()),
            seeds_count: v["seeds"].as_u64()?,
            failures: v["failures"]
                .as_array()?
                .iter()
                .map(|f| {
                    (
                        f["seed"].as_u64().unwrap_or(0),
                        f["property"].as_str().unwrap_or("").to_string(),
                        f["detail"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect(),
            divergences: v["divergences"]
                .as_array()?
                .iter()
                .map(|f| {
                    (
                        f["seed"].as_u64().unwrap_or(0),
                        f["detail"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect(),
            double_run_count: v["doubleRuns"].as_u64()?,
            events_count: v["events"].as_u64()?,
            simulated_ms: v["simulatedMs"].as_u64()?,
            wall_ms: v["wallMs"].as_u64()?,
            faults: map(&v["faults"]),
            cp_hits: map(&v["crashPointHits"]),
            cp_crashes: map(&v["crashPointCrashes"]),
            rules: map(&v["rules"]),
        })
    }

    /// Adds another shard's summary (same scenario and bug; see
    /// [`Summary::check_disjoint`] first).
    pub fn merge(&mut self, o: &Summary) {
        self.parts.extend(o.parts.iter().copied());
        self.seeds_count += o.seeds_count;
        self.failures.extend(o.failures.iter().cloned());
        self.failures.sort_by_key(|f| f.0);
        self.divergences.extend(o.divergences.iter().cloned());
        self.double_run_count += o.double_run_count;
        self.events_count += o.events_count;
        self.simulated_ms += o.simulated_ms;
        // Shards run side by side: the merged wall time is the longest.
        self.wall_ms = self.wall_ms.max(o.wall_ms);
        for (k, v) in &o.faults {
            *self.faults.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &o.cp_hits {
            *self.cp_hits.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &o.cp_crashes {
            *self.cp_crashes.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &o.rules {
            *self.rules.entry(k.clone()).or_insert(0) += v;
        }
    }

    /// The human-readable form.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let wall_s = self.wall_ms as f64 / 1000.0;
        s.push_str(&format!(
            "scenario {}{}: {} seeds, {} failures, {} determinism double-runs ({} divergent)\n",
            self.scenario,
            self.bug
                .as_deref()
                .map(|b| format!(" (bug {b})"))
                .unwrap_or_default()
                + &if self.client.is_empty() {
                    String::new()
                } else {
                    format!(" (client {})", self.client)
                }
                + &self
                    .commands
                    .map(|n| format!(" ({n} commands per client)"))
                    .unwrap_or_default(),
            self.seeds_count,
            self.failures.len(),
            self.double_run_count,
            self.divergences.len()
        ));
        s.push_str(&format!(
            "events {} in {:.1}s wall: {:.0} events/s; simulated {:.0}s: {:.0}x wall\n",
            self.events_count,
            wall_s,
            self.events_count as f64 / wall_s.max(1e-9),
            self.simulated_ms as f64 / 1000.0,
            self.simulated_ms as f64 / (self.wall_ms.max(1) as f64)
        ));
        if !self.failures.is_empty() {
            let mut by: BTreeMap<&str, u64> = BTreeMap::new();
            for (_, p, _) in &self.failures {
                *by.entry(p.as_str()).or_insert(0) += 1;
            }
            let counts: Vec<String> = by.iter().map(|(p, n)| format!("{p} {n}")).collect();
            s.push_str(&format!(
                "failing seeds by property: {}\n",
                counts.join(", ")
            ));
            let shown: Vec<String> = self
                .failures
                .iter()
                .take(FAILING_SEEDS_SHOWN)
                .map(|(seed, p, _)| format!("{seed} ({p})"))
                .collect();
            s.push_str(&format!(
                "failing seeds{}: {}\n",
                if self.failures.len() > FAILING_SEEDS_SHOWN {
                    format!(" (first {FAILING_SEEDS_SHOWN} of {})", self.failures.len())
                } else {
                    String::new()
                },
                shown.join(", ")
            ));
        }
        let faults: Vec<String> = crate::faults::FAULT_NAMES
            .iter()
            .map(|f| format!("{f}={}", self.faults.get(*f).copied().unwrap_or(0)))
            .collect();
        s.push_str(&format!("faults: {}\n", faults.join(" ")));
        for p in msp::core::CrashPoint::ALL {
            let n = p.name();
            s.push_str(&format!(
                "crash point {n}: reached {}, crashed {}\n",
                self.cp_hits.get(n).copied().unwrap_or(0),
                self.cp_crashes.get(n).copied().unwrap_or(0)
            ));
        }
        let mut rules: Vec<&str> = crate::model::report::RULES.to_vec();
        rules.extend(crate::model::report::PAGE_RULES);
        if self.scenario == Scenario::BitRot.name() {
            rules.extend(crate::model::report::BITROT_RULES);
        }
        let seen = rules
            .iter()
            .filter(|r| self.rules.get(**r).copied().unwrap_or(0) > 0)
            .count();
        s.push_str(&format!(
            "rules of PROTOCOL.md exercised: {seen} of {}\n",
            rules.len()
        ));
        for r in &rules {
            s.push_str(&format!(
                "  {:>8}  {r}\n",
                self.rules.get(*r).copied().unwrap_or(0)
            ));
        }
        for r in crate::model::report::OBSERVED_RULES {
            s.push_str(&format!(
                "  {:>8}  {r} (counted, not owed)\n",
                self.rules.get(*r).copied().unwrap_or(0)
            ));
        }
        for n in self.shortfall() {
            s.push_str(&format!("COVERAGE SHORTFALL: {n}\n"));
        }
        s
    }

    /// Whether the sweep passed: nothing violated, no coverage shortfall.
    pub fn passed(&self) -> bool {
        !self.violated() && self.shortfall().is_empty()
    }
}

/// The one line that reproduces a seed (with the SDK client).
pub fn repro_line(scenario: Scenario, seed: u64, bug: Option<Bug>) -> String {
    repro_line_client(scenario, seed, bug, ClientKind::Sdk, None)
}

/// The one line that reproduces a seed run with `client`'s clients.
pub fn repro_line_client(
    scenario: Scenario,
    seed: u64,
    bug: Option<Bug>,
    client: ClientKind,
    commands: Option<u32>,
) -> String {
    format!(
        "cargo run --release -p msp-sim -- replay --scenario {} --seed {seed}{} --client {}{}",
        scenario.name(),
        bug.map(|b| format!(" --bug {}", b.name()))
            .unwrap_or_default(),
        client.name(),
        commands
            .map(|n| format!(" --commands {n}"))
            .unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(start: u64, end: u64, shard_k: u64, shard_n: u64) -> SeedPart {
        SeedPart {
            start,
            end,
            shard_k,
            shard_n,
        }
    }

    fn merged(parts: &[SeedPart]) -> Summary {
        Summary {
            parts: parts.to_vec(),
            ..Summary::default()
        }
    }

    #[test]
    fn every_shard_of_one_range_is_complete() {
        let all: Vec<SeedPart> = (1..=3).map(|k| part(0, 100, k, 3)).collect();
        assert_eq!(merged(&all).check_complete(), Ok(()));
        assert_eq!(merged(&[part(0, 10, 1, 1)]).check_complete(), Ok(()));
        // Order does not matter.
        assert_eq!(
            merged(&[part(0, 9, 2, 2), part(0, 9, 1, 2)]).check_complete(),
            Ok(())
        );
    }

    #[test]
    fn a_missing_shard_is_named() {
        let e = merged(&[part(0, 100, 1, 3), part(0, 100, 3, 3)])
            .check_complete()
            .unwrap_err();
        assert_eq!(
            e,
            Incomplete::MissingShards {
                start: 0,
                end: 100,
                n: 3,
                count: 1,
                missing: vec![2]
            }
        );
        assert_eq!(e.to_string(), "seeds 0..100 in 3 shards: missing shard 2/3");
        let e = merged(&[part(0, 100, 2, 4)]).check_complete().unwrap_err();
        assert_eq!(
            e.to_string(),
            "seeds 0..100 in 4 shards: missing shards 1/4, 3/4, 4/4"
        );
    }

    #[test]
    fn a_huge_shard_count_names_only_the_first_missing_shards() {
        let e = merged(&[part(0, 10, 1, u64::MAX)])
            .check_complete()
            .unwrap_err();
        let Incomplete::MissingShards { count, missing, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(*count, u64::MAX - 1);
        assert_eq!(missing.len(), MISSING_SHARDS_NAMED);
        assert!(e.to_string().contains("(first 20 of"), "{e}");
    }

    #[test]
    fn a_repeated_shard_is_refused() {
        assert_eq!(
            merged(&[part(0, 10, 1, 2), part(0, 10, 1, 2), part(0, 10, 2, 2)]).check_complete(),
            Err(Incomplete::Repeated {
                part: part(0, 10, 1, 2)
            })
        );
    }

    #[test]
    fn no_parts_is_refused() {
        assert_eq!(merged(&[]).check_complete(), Err(Incomplete::NoParts));
    }

    #[test]
    fn adjacent_ranges_and_mixed_shard_counts_merge_when_they_cover_once() {
        // 0..100 unsharded, then 100..200 in two shards.
        let ok = [
            part(0, 100, 1, 1),
            part(100, 200, 1, 2),
            part(100, 200, 2, 2),
        ];
        assert_eq!(merged(&ok).check_complete(), Ok(()));
        // A gap: 100..200 is missing its second shard (the odd seeds).
        let e = merged(&ok[..2]).check_complete().unwrap_err();
        assert_eq!(
            e,
            Incomplete::MissingSeeds {
                start: 0,
                end: 200,
                count: 50,
                first: 101
            }
        );
        // A hole between ranges.
        assert_eq!(
            merged(&[part(0, 10, 1, 1), part(20, 30, 1, 1)]).check_complete(),
            Err(Incomplete::MissingSeeds {
                start: 0,
                end: 30,
                count: 10,
                first: 10
            })
        );
        // Shards of 2 and of 3 over one range cover some seeds twice.
        assert_eq!(
            merged(&[part(0, 12, 1, 2), part(0, 12, 2, 2), part(0, 12, 1, 3)]).check_complete(),
            Err(Incomplete::RepeatedSeed { seed: 0 })
        );
    }

    #[test]
    fn coverage_counts_a_large_span_by_its_period() {
        // 10^12 seeds, shards of 3 and 4 mixed over two halves: only a
        // period of each stretch is visited.
        let half = 500_000_000_000;
        let mut parts: Vec<SeedPart> = (1..=3).map(|k| part(0, half, k, 3)).collect();
        parts.extend(
            (1..=4)
                .filter(|k| *k != 2)
                .map(|k| part(half, 2 * half, k, 4)),
        );
        let e = merged(&parts).check_complete().unwrap_err();
        assert_eq!(
            e,
            Incomplete::MissingSeeds {
                start: 0,
                end: 2 * half,
                count: half / 4,
                first: half + 1
            }
        );
    }

    #[test]
    fn page_rules_are_owed_by_the_sdk_client_only() {
        use crate::model::report::{PAGE_RULES, RULES};
        let mut s = Summary {
            scenario: Scenario::Mixed.name().to_string(),
            seeds_count: 100,
            ..Summary::default()
        };
        for r in RULES {
            s.rules.insert(r.to_string(), 1);
        }
        for (client, owed) in [
            ("sdk", PAGE_RULES.to_vec()),
            ("sim", vec![]),
            ("sdk-v1", vec![]),
        ] {
            s.client = client.to_string();
            assert_eq!(s.missed_rules(), owed, "{client}");
        }
        s.client = "sdk".into();
        for r in PAGE_RULES {
            s.rules.insert(r.to_string(), 1);
        }
        assert!(s.missed_rules().is_empty());
        // The simulator's own client is not owed its exempt rules; the
        // SDK clients are.
        for r in crate::model::report::SIM_CLIENT_EXEMPT {
            s.rules.remove(*r);
        }
        for (client, owed) in [
            ("sim", vec![]),
            ("sdk-v1", crate::model::report::SIM_CLIENT_EXEMPT.to_vec()),
            ("sdk", crate::model::report::SIM_CLIENT_EXEMPT.to_vec()),
        ] {
            s.client = client.to_string();
            assert_eq!(s.missed_rules(), owed, "{client}");
        }
    }
}
