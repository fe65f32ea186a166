//! `msp-sim bench`: the simulator's own throughput, and how its cost per
//! event grows with the workload.
//!
//! A measurement runs a fixed seed range of one scenario on one thread and
//! reads a [`Meter`] before and after: CPU time, wall time, and the global
//! allocator's counters. The library never reads a clock or an allocator
//! itself (only the binary does, see `sim/src/main.rs`), so this module
//! stays allocator-agnostic and its arithmetic is tested with made-up
//! readings.
//!
//! Cost per event is reported two ways: CPU ns/event (what a sweep costs,
//! noisy on a shared machine) and allocations/event (deterministic: the
//! same seeds allocate the same, so it is the stable measure of growth).
//! The growth check compares the cost per event at N, 4N and 16N commands
//! per client against the target [`GROWTH_TARGET`]: a simulator whose
//! work per event is constant grows linearly with the workload. It is a
//! report, never a failure.

use std::fmt;

use serde_json::{json, Value};

use crate::sweep::{commands_plan, run_seed_with};
use crate::workload::Scenario;

/// The growth target: cost per event at 4N and 16N commands per client at
/// most this many times the cost at N (linear growth of the total).
pub const GROWTH_TARGET: f64 = 1.5;

/// The multiples of the base N the growth check runs (N, 4N, 16N: 16, 64,
/// 256 by default).
pub const GROWTH_MULTIPLES: [u32; 3] = [1, 4, 16];

/// The growth runs take this fraction of the scenario runs' seeds (`1/`
/// this), the same seeds at every N, so that the largest N costs about
/// as much as a scenario run and the comparison is seed for seed.
pub const GROWTH_SEEDS_DIVISOR: u64 = 8;

/// The seeds of the growth runs: the first `len / GROWTH_SEEDS_DIVISOR`
/// of `range` (at least one; none of an empty range).
pub fn growth_seeds(range: std::ops::Range<u64>) -> std::ops::Range<u64> {
    let len = range.end.saturating_sub(range.start);
    let take = (len / GROWTH_SEEDS_DIVISOR).max(1).min(len);
    range.start..range.start + take
}

/// What a [`Meter`] reads at one instant; the bench subtracts two.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    /// CPU time of the process, ns (wall time where the platform has no
    /// process CPU clock; see [`Meter::cpu_source`]).
    pub cpu_ns: u64,
    /// Wall time, ns since any fixed origin.
    pub wall_ns: u64,
    /// Allocations so far (alloc, alloc_zeroed and realloc calls).
    pub allocations: u64,
    /// Bytes requested by those allocations.
    pub bytes: u64,
}

/// Reads clocks and allocation counters: the binary's implementation reads
/// the process CPU clock and its counting global allocator. A trait so
/// the library bench needs neither.
pub trait Meter {
    /// The current reading.
    fn read(&self) -> Reading;
    /// What [`Reading::cpu_ns`] measures, for the report (e.g. "process
    /// CPU time (clock_gettime CLOCK_PROCESS_CPUTIME_ID)").
    fn cpu_source(&self) -> &str;
}

/// One measurement: a seed range of one scenario, on one thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The scenario.
    pub scenario: Scenario,
    /// Commands per client, if fixed (`None`: the scenario's own workload,
    /// as `msp-sim run` draws it).
    pub commands: Option<u32>,
    /// Seeds run.
    pub seeds_count: u64,
    /// The seed range.
    pub seeds: (u64, u64),
    /// World events processed ([`crate::sweep::SeedOutcome::events_count`]).
    pub events: u64,
    /// Simulated ms.
    pub simulated_ms: u64,
    /// CPU ns spent (see [`Meter::cpu_source`]).
    pub cpu_ns: u64,
    /// Wall ns spent.
    pub wall_ns: u64,
    /// Allocations made.
    pub allocations: u64,
    /// Bytes allocated.
    pub bytes: u64,
    /// Bytes sent on links ([`crate::sweep::SeedOutcome::wire_bytes`]):
    /// what the workload moved, whose size per event grows with N where
    /// answers carry a session's whole view (`session/read` snapshots).
    pub wire_bytes: u64,
}

/// Why a cost per event cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BenchError {
    /// The measurement processed no events.
    NoEvents {
        /// The scenario.
        scenario: Scenario,
        /// Its commands per client, if fixed.
        commands: Option<u32>,
    },
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::NoEvents { scenario, commands } => write!(
                f,
                "{scenario}{}: no events, no cost per event",
                commands.map(|n| format!(" N={n}")).unwrap_or_default()
            ),
        }
    }
}

impl std::error::Error for BenchError {}

/// The cost of one world event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// CPU ns per event.
    pub cpu_ns: f64,
    /// Allocations per event.
    pub allocations: f64,
    /// Bytes allocated per event.
    pub bytes: f64,
    /// Wire bytes per event.
    pub wire_bytes: f64,
    /// CPU ns per wire byte (`None`: nothing was sent).
    pub cpu_ns_per_wire_byte: Option<f64>,
}

/// `a / b`, or `None` when `b` is zero (a ratio with nothing to compare
/// against is "n/a", not infinity).
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b != 0.0 && a.is_finite() && b.is_finite()).then(|| a / b)
}

impl Measured {
    /// The cost per event; an error if there were no events.
    pub fn cost(&self) -> Result<Cost, BenchError> {
        if self.events == 0 {
            return Err(BenchError::NoEvents {
                scenario: self.scenario,
                commands: self.commands,
            });
        }
        let e = self.events as f64;
        Ok(Cost {
            cpu_ns: self.cpu_ns as f64 / e,
            allocations: self.allocations as f64 / e,
            bytes: self.bytes as f64 / e,
            wire_bytes: self.wire_bytes as f64 / e,
            cpu_ns_per_wire_byte: ratio(self.cpu_ns as f64, self.wire_bytes as f64),
        })
    }

    /// Events per CPU second (per core: the bench runs one thread).
    pub fn events_per_cpu_s(&self) -> Option<f64> {
        ratio(self.events as f64 * 1e9, self.cpu_ns as f64)
    }

    /// Seeds per CPU second.
    pub fn seeds_per_cpu_s(&self) -> Option<f64> {
        ratio(self.seeds_count as f64 * 1e9, self.cpu_ns as f64)
    }

    /// Simulated time over wall time.
    pub fn sim_per_wall(&self) -> Option<f64> {
        ratio(self.simulated_ms as f64 * 1e6, self.wall_ns as f64)
    }

    /// The machine-readable form.
    pub fn to_json(&self) -> Value {
        let cost = self.cost().ok();
        json!({
            "scenario": self.scenario.name(),
            "commandsPerClient": self.commands,
            "seeds": [self.seeds.0, self.seeds.1],
            "seedsCount": self.seeds_count,
            "events": self.events,
            "simulatedMs": self.simulated_ms,
            "cpuNs": self.cpu_ns,
            "wallNs": self.wall_ns,
            "allocations": self.allocations,
            "bytes": self.bytes,
            "eventsPerCpuS": self.events_per_cpu_s(),
            "seedsPerCpuS": self.seeds_per_cpu_s(),
            "simPerWall": self.sim_per_wall(),
            "cpuNsPerEvent": cost.map(|c| c.cpu_ns),
            "allocationsPerEvent": cost.map(|c| c.allocations),
            "bytesPerEvent": cost.map(|c| c.bytes),
            "wireBytes": self.wire_bytes,
            "wireBytesPerEvent": cost.map(|c| c.wire_bytes),
            "cpuNsPerWireByte": cost.and_then(|c| c.cpu_ns_per_wire_byte),
        })
    }
}

/// Runs `seeds` of `scenario` on this thread, each once (no determinism
/// double-runs: they would count events once and cost twice), with
/// `commands` per client if given, and measures them with `meter`.
pub fn measure(
    scenario: Scenario,
    seeds: std::ops::Range<u64>,
    commands: Option<u32>,
    meter: &dyn Meter,
) -> Measured {
    let plan = commands_plan(scenario, commands);
    let mut m = Measured {
        scenario,
        commands,
        seeds_count: 0,
        seeds: (seeds.start, seeds.end),
        events: 0,
        simulated_ms: 0,
        cpu_ns: 0,
        wall_ns: 0,
        allocations: 0,
        bytes: 0,
        wire_bytes: 0,
    };
    let before = meter.read();
    for seed in seeds {
        let o = run_seed_with(scenario, seed, None, false, &plan);
        m.seeds_count += 1;
        m.events += o.events_count;
        m.wire_bytes += o.wire_bytes;
        m.simulated_ms += o.simulated_ms;
    }
    let after = meter.read();
    m.cpu_ns = after.cpu_ns.saturating_sub(before.cpu_ns);
    m.wall_ns = after.wall_ns.saturating_sub(before.wall_ns);
    m.allocations = after.allocations.saturating_sub(before.allocations);
    m.bytes = after.bytes.saturating_sub(before.bytes);
    m
}

/// How the cost per event at N commands per client compares with the base
/// N's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Growth {
    /// The base commands per client.
    pub base_n: u32,
    /// The compared commands per client.
    pub n: u32,
    /// CPU ns/event at `n` over CPU ns/event at `base_n` (`None`: the base
    /// measured no CPU time).
    pub cpu: Option<f64>,
    /// Allocations/event at `n` over allocations/event at `base_n`
    /// (`None`: the base allocated nothing, e.g. no counting allocator).
    pub allocations: Option<f64>,
    /// Events per seed at `n` over events per seed at `base_n`: about
    /// `n / base_n` when the commands drive the run, less when something
    /// else ends it first (see [`Growth::saturated`]).
    pub events: Option<f64>,
    /// Wire bytes per event at `n` over the base's: how much bigger the
    /// workload's lines got (reads answer with the whole view).
    pub wire: Option<f64>,
    /// CPU ns per wire byte at `n` over the base's: the cost growth that
    /// is not explained by bigger lines.
    pub cpu_per_wire_byte: Option<f64>,
}

impl Growth {
    /// Compares `other`'s cost per event with `base`'s; an error if either
    /// processed no events.
    pub fn of(base: &Measured, other: &Measured) -> Result<Growth, BenchError> {
        let (b, o) = (base.cost()?, other.cost()?);
        Ok(Growth {
            base_n: base.commands.unwrap_or(0),
            n: other.commands.unwrap_or(0),
            cpu: ratio(o.cpu_ns, b.cpu_ns),
            allocations: ratio(o.allocations, b.allocations),
            events: ratio(
                other.events as f64 / other.seeds_count.max(1) as f64,
                base.events as f64 / base.seeds_count.max(1) as f64,
            ),
            wire: ratio(o.wire_bytes, b.wire_bytes),
            cpu_per_wire_byte: o
                .cpu_ns_per_wire_byte
                .zip(b.cpu_ns_per_wire_byte)
                .and_then(|(o, b)| ratio(o, b)),
        })
    }

    /// Whether the runs at `n` grew less than half as much as their
    /// commands (events per seed below `n / base_n / 2`): the workload
    /// saturated, e.g. the safety phase's simulated-time cap
    /// ([`crate::run::SAFETY_MAX_MS`]) ended the runs before the clients'
    /// budgets did, so `cost(n)` is not the cost of `n` commands.
    pub fn saturated(&self) -> bool {
        let multiple = f64::from(self.n) / f64::from(self.base_n.max(1));
        self.events.is_some_and(|e| e < multiple / 2.0)
    }

    /// The note [`Report::render`] prints under a saturated growth line.
    pub fn saturation_note(&self) -> Option<String> {
        self.saturated().then(|| {
            format!(
                "  note: events per seed grew {} for {}x the commands per client: the runs saturate (something other than the clients' budgets ended them: the safety phase's cap, stretched in proportion from {} s simulated, or lost sessions), so cost({}) is not the cost of {} commands",
                times(self.events),
                self.n / self.base_n.max(1),
                crate::run::SAFETY_MAX_MS / 1000,
                self.n,
                self.n
            )
        })
    }

    /// Whether the target holds: both ratios known and at most
    /// [`GROWTH_TARGET`]; `None` if a ratio is unknown.
    pub fn holds(&self) -> Option<bool> {
        Some(self.cpu? <= GROWTH_TARGET && self.allocations? <= GROWTH_TARGET)
    }

    /// The report line, e.g. `growth cost(256)/cost(16): 1.10x CPU
    /// ns/event, 1.02x allocations/event; target <= 1.5x (linear growth):
    /// holds`, and the wire line under it ([`Growth::wire_line`]).
    pub fn line(&self) -> String {
        let verdict = match self.holds() {
            Some(true) => "holds".to_string(),
            Some(false) => {
                let over: Vec<String> = [("CPU", self.cpu), ("allocations", self.allocations)]
                    .iter()
                    .filter_map(|(what, r)| r.filter(|r| *r > GROWTH_TARGET).map(|r| (what, r)))
                    .map(|(what, r)| format!("{what} {r:.2}x"))
                    .collect();
                format!("does not hold ({})", over.join(", "))
            }
            None => "n/a".to_string(),
        };
        format!(
            "growth cost({})/cost({}): {} CPU ns/event, {} allocations/event; target <= {GROWTH_TARGET}x (linear growth): {verdict}",
            self.n,
            self.base_n,
            times(self.cpu),
            times(self.allocations),
        )
    }

    /// How much of the growth the workload's bigger lines explain, e.g.
    /// `  wire bytes/event 2.80x; CPU ns per wire byte 1.12x`.
    pub fn wire_line(&self) -> String {
        format!(
            "  wire bytes/event {}; CPU ns per wire byte {}",
            times(self.wire),
            times(self.cpu_per_wire_byte)
        )
    }

    /// The machine-readable form.
    pub fn to_json(&self) -> Value {
        json!({
            "baseN": self.base_n,
            "n": self.n,
            "cpuRatio": self.cpu,
            "allocationsRatio": self.allocations,
            "eventsPerSeedRatio": self.events,
            "wireBytesPerEventRatio": self.wire,
            "cpuPerWireByteRatio": self.cpu_per_wire_byte,
            "saturated": self.saturated(),
            "target": GROWTH_TARGET,
            "holds": self.holds(),
        })
    }
}

/// `1.23x`, or `n/a`.
fn times(r: Option<f64>) -> String {
    r.map_or("n/a".to_string(), |r| format!("{r:.2}x"))
}

/// A number with `digits` decimals, or `n/a`.
fn num(x: Option<f64>, digits: usize) -> String {
    x.map_or("n/a".to_string(), |x| format!("{x:.digits$}"))
}

/// A whole bench: one measurement per scenario, then the growth runs of
/// one scenario at N, 4N, 16N commands per client.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// What the CPU times measure ([`Meter::cpu_source`]).
    pub cpu_source: String,
    /// One measurement per scenario, the scenario's own workload.
    pub scenarios: Vec<Measured>,
    /// The growth runs, base N first.
    pub growth: Vec<Measured>,
}

impl Report {
    /// Each growth run after the first compared with the first; an error
    /// where a cost is undefined.
    pub fn growths(&self) -> Vec<Result<Growth, BenchError>> {
        match self.growth.split_first() {
            None => Vec::new(),
            Some((base, rest)) => rest.iter().map(|m| Growth::of(base, m)).collect(),
        }
    }

    /// The human-readable form.
    pub fn render(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "msp-sim bench: one thread; CPU = {}; allocations counted by the global allocator\n",
            self.cpu_source
        ));
        s.push_str(&format!(
            "{:<15} {:>9} {:>6} {:>10} {:>14} {:>9} {:>9} {:>10} {:>13} {:>12} {:>12}\n",
            "scenario",
            "seeds",
            "N",
            "events",
            "events/s/core",
            "seeds/s",
            "sim/wall",
            "ns/event",
            "allocs/event",
            "bytes/event",
            "wire B/event"
        ));
        let row = |m: &Measured| -> String {
            let cost = m.cost().ok();
            format!(
                "{:<15} {:>9} {:>6} {:>10} {:>14} {:>9} {:>9} {:>10} {:>13} {:>12} {:>12}\n",
                m.scenario.name(),
                format!("{}..{}", m.seeds.0, m.seeds.1),
                m.commands.map_or("own".to_string(), |n| n.to_string()),
                m.events,
                num(m.events_per_cpu_s(), 0),
                num(m.seeds_per_cpu_s(), 1),
                num(m.sim_per_wall(), 0),
                num(cost.map(|c| c.cpu_ns), 0),
                num(cost.map(|c| c.allocations), 2),
                num(cost.map(|c| c.bytes), 0),
                num(cost.map(|c| c.wire_bytes), 0),
            )
        };
        for m in &self.scenarios {
            s.push_str(&row(m));
        }
        if let Some(base) = self.growth.first() {
            s.push_str(&format!(
                "cost per event of {} at N commands per client (fixed workload):\n",
                base.scenario.name()
            ));
            for m in &self.growth {
                s.push_str(&row(m));
            }
        }
        for g in self.growths() {
            match g {
                Ok(g) => {
                    s.push_str(&g.line());
                    s.push('\n');
                    s.push_str(&g.wire_line());
                    if let Some(n) = g.saturation_note() {
                        s.push('\n');
                        s.push_str(&n);
                    }
                }
                Err(e) => s.push_str(&format!("growth: n/a ({e})")),
            }
            s.push('\n');
        }
        s
    }

    /// The machine-readable form.
    pub fn to_json(&self) -> Value {
        json!({
            "cpuSource": self.cpu_source,
            "scenarios": self.scenarios.iter().map(Measured::to_json).collect::<Vec<_>>(),
            "growthRuns": self.growth.iter().map(Measured::to_json).collect::<Vec<_>>(),
            "growth": self.growths().iter().map(|g| match g {
                Ok(g) => g.to_json(),
                Err(e) => json!({"error": e.to_string()}),
            }).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(commands: u32, events: u64, cpu_ns: u64, allocations: u64) -> Measured {
        Measured {
            scenario: Scenario::Mixed,
            commands: Some(commands),
            seeds_count: 10,
            seeds: (0, 10),
            events,
            simulated_ms: 5_000,
            cpu_ns,
            wall_ns: cpu_ns,
            allocations,
            bytes: allocations * 64,
            wire_bytes: events * 100,
        }
    }

    #[test]
    fn the_growth_ratio_is_the_cost_per_event_at_n_over_the_cost_at_the_base() {
        // 1000 ns and 10 allocations per event at 16; 1500 ns and 12 at 256.
        let base = m(16, 1_000, 1_000_000, 10_000);
        let big = m(256, 16_000, 24_000_000, 192_000);
        let g = Growth::of(&base, &big).unwrap();
        assert_eq!((g.base_n, g.n), (16, 256));
        assert!((g.cpu.unwrap() - 1.5).abs() < 1e-12, "{g:?}");
        assert!((g.allocations.unwrap() - 1.2).abs() < 1e-12, "{g:?}");
        assert_eq!(g.holds(), Some(true));
        assert_eq!(g.events, Some(16.0));
        assert!(!g.saturated());
        // 1.6x CPU breaks the target; the line says which.
        let slower = m(256, 16_000, 25_600_000, 192_000);
        let g = Growth::of(&base, &slower).unwrap();
        assert_eq!(g.holds(), Some(false));
        assert!(
            g.line().contains("does not hold (CPU 1.60x)"),
            "{}",
            g.line()
        );
    }

    #[test]
    fn the_rendered_report_includes_the_growth_lines() {
        let r = Report {
            cpu_source: "test".into(),
            scenarios: vec![Measured {
                commands: None,
                ..m(16, 1_000, 2_000_000, 5_000)
            }],
            growth: vec![
                m(16, 1_000, 1_000_000, 10_000),
                m(64, 4_000, 4_400_000, 40_000),
                m(256, 16_000, 20_800_000, 176_000),
            ],
        };
        let text = r.render();
        assert!(
            text.contains(
                "growth cost(64)/cost(16): 1.10x CPU ns/event, 1.00x allocations/event; target <= 1.5x (linear growth): holds"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "growth cost(256)/cost(16): 1.30x CPU ns/event, 1.10x allocations/event; target <= 1.5x (linear growth): holds"
            ),
            "{text}"
        );
        // events/s per core: 1000 events in 2 ms of CPU.
        assert!(text.contains(" 500000 "), "{text}");
        let j = r.to_json();
        assert_eq!(j["growth"][1]["n"], 256);
        assert_eq!(j["growth"][1]["holds"], true);
    }

    #[test]
    fn the_wire_ratios_separate_bigger_lines_from_dearer_bytes() {
        // 100 wire bytes and 1000 ns per event at 16; at 256 the lines are
        // 3x bigger and an event costs 3.3x: 1.1x per wire byte.
        let base = m(16, 1_000, 1_000_000, 10_000);
        let big = Measured {
            wire_bytes: 16_000 * 300,
            ..m(256, 16_000, 52_800_000, 192_000)
        };
        let g = Growth::of(&base, &big).unwrap();
        assert!((g.wire.unwrap() - 3.0).abs() < 1e-12, "{g:?}");
        assert!((g.cpu_per_wire_byte.unwrap() - 1.1).abs() < 1e-12, "{g:?}");
        assert_eq!(g.holds(), Some(false), "the per-event target is unchanged");
        assert_eq!(
            g.wire_line(),
            "  wire bytes/event 3.00x; CPU ns per wire byte 1.10x"
        );
        let r = Report {
            cpu_source: "test".into(),
            scenarios: Vec::new(),
            growth: vec![base, big],
        };
        assert!(r.render().contains(&g.wire_line()), "{}", r.render());
        assert_eq!(r.to_json()["growth"][0]["wireBytesPerEventRatio"], 3.0);
        // Nothing sent: n/a, not a division by zero.
        let silent = Measured {
            wire_bytes: 0,
            ..m(16, 1_000, 1_000_000, 10_000)
        };
        let g = Growth::of(&silent, &m(256, 16_000, 1, 1)).unwrap();
        assert_eq!((g.wire, g.cpu_per_wire_byte), (None, None));
        assert!(g.wire_line().contains("n/a"), "{}", g.wire_line());
    }

    #[test]
    fn runs_that_stop_growing_with_n_are_flagged_as_saturated() {
        // 16x the commands, 1.3x the events: something else ends the runs.
        let base = m(16, 1_000, 1_000_000, 10_000);
        let capped = m(256, 1_300, 2_600_000, 26_000);
        let g = Growth::of(&base, &capped).unwrap();
        assert!(g.saturated());
        let r = Report {
            cpu_source: "test".into(),
            scenarios: Vec::new(),
            growth: vec![base, capped],
        };
        let text = r.render();
        assert!(
            text.contains("note: events per seed grew 1.30x for 16x the commands per client"),
            "{text}"
        );
        assert_eq!(r.to_json()["growth"][0]["saturated"], true);
    }

    #[test]
    fn no_events_is_an_error_not_a_panic_and_renders_as_n_a() {
        let empty = m(16, 0, 0, 0);
        assert_eq!(
            empty.cost(),
            Err(BenchError::NoEvents {
                scenario: Scenario::Mixed,
                commands: Some(16)
            })
        );
        assert!(Growth::of(&empty, &m(256, 10, 10, 10)).is_err());
        assert!(Growth::of(&m(256, 10, 10, 10), &empty).is_err());
        assert_eq!(empty.events_per_cpu_s(), None);
        let r = Report {
            cpu_source: "test".into(),
            scenarios: vec![empty.clone()],
            growth: vec![empty, m(64, 10, 10, 10)],
        };
        let text = r.render();
        assert!(
            text.contains("growth: n/a (mixed N=16: no events"),
            "{text}"
        );
        assert!(text.contains("n/a"), "{text}");
        assert!(r.to_json()["growth"][0]["error"].is_string());
    }

    #[test]
    fn growth_runs_take_the_first_eighth_of_the_seeds_at_least_one() {
        assert_eq!(growth_seeds(0..64), 0..8);
        assert_eq!(growth_seeds(10..12), 10..11);
        assert_eq!(growth_seeds(5..5), 5..5);
    }

    #[test]
    fn a_zero_base_cost_gives_an_unknown_ratio() {
        // Events but no allocations counted (no counting allocator).
        let g = Growth::of(&m(16, 100, 1_000, 0), &m(256, 100, 1_000, 0)).unwrap();
        assert_eq!(g.allocations, None);
        assert_eq!(g.cpu, Some(1.0));
        assert_eq!(g.holds(), None);
        assert!(g
            .line()
            .ends_with("n/a allocations/event; target <= 1.5x (linear growth): n/a"));
        assert_eq!(ratio(1.0, 0.0), None);
    }

    /// A meter that advances by fixed steps: the bench subtracts readings.
    struct Steps(std::cell::Cell<u64>);

    impl Meter for Steps {
        fn read(&self) -> Reading {
            let i = self.0.get();
            self.0.set(i + 1);
            Reading {
                cpu_ns: i * 1_000,
                wall_ns: i * 2_000,
                allocations: i * 10,
                bytes: i * 100,
            }
        }
        fn cpu_source(&self) -> &str {
            "steps"
        }
    }

    #[test]
    fn measure_counts_events_and_subtracts_readings() {
        let meter = Steps(std::cell::Cell::new(5));
        let got = measure(Scenario::Turns, 0..1, Some(2), &meter);
        assert_eq!(got.seeds_count, 1);
        assert!(got.events > 0);
        assert_eq!(
            (got.cpu_ns, got.wall_ns, got.allocations, got.bytes),
            (1_000, 2_000, 10, 100)
        );
    }
}
