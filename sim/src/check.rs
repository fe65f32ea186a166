//! The bounded exhaustive check: every choice sequence of a small, fixed
//! workload in which at most K decisions deviate from their simplest
//! option, explored depth first, every oracle judging every schedule.
//!
//! What is enumerated: the fault mix is fixed with every fault on (so a
//! fault is one deviation: a network verb on one line, a crash at one
//! step or crash point, a failed fsync, a full disk, a lost provider
//! answer, a client leaving its host), in two passes: crashes are process
//! crashes in one and power losses in the other; the workload is fixed
//! (each client issues exactly its commands), and each decision's
//! alternatives are: the other option of a yes/no decision, and every
//! option of a client's or placement's choice among at most
//! [`MAX_WIDTH`] (which command, which host, which turn...). Wider
//! decisions (delays, ids, timer jitter) stay at their simplest.
//!
//! State hashing prunes repeats: once a deviation is drawn, the run hashes
//! its whole state at the end of that world event (history, clock,
//! pending events, clients, links, hosts, disk); a state already explored
//! with at least as many deviations left has the same future, so the run
//! stops there and only the deviations still open within that event are
//! explored from it.
//!
//! Fault model: [`check_mixes`]; the check adds none of its own.

use std::collections::BTreeMap;

use crate::choice::Choice;
use crate::faults::FaultMix;
use crate::oracle::Violation;
use crate::plan::{Draws, Plan, Probe, Workload};
use crate::run::{run_with, RunConfig};
use crate::world::Decision;

/// The widest client or placement decision whose every option is explored.
/// The workload's move draw (`moves::next_move`, 101 options in `mixed`)
/// must fit: which command a client issues is the check's main branching.
pub const MAX_WIDTH: u64 = 128;

/// The default small workload: 2 clients x 3 commands, no observer.
pub const DEFAULT_WORKLOAD: Workload = Workload {
    clients_count: 2,
    commands_per_client: 3,
    observer: false,
};

/// The fault mixes of the check, one pass each: every fault on, so each
/// opportunity is a yes/no decision (a level matters to a recorded run
/// only as on or off, or certain); a crash is a process crash (kill -9,
/// written bytes survive) in the first pass and a power loss (unsynced
/// bytes lost, the last write torn) in the second; a delay is at most
/// 20 ms.
pub fn check_mixes() -> [(&'static str, FaultMix); 2] {
    let on = FaultMix {
        drop_permille: 20,
        dup_permille: 20,
        delay_permille: 20,
        delay_max_ms: 20,
        reorder_permille: 20,
        cut_permille: 10,
        reconnect_permille: 10,
        tear_permille: 0,
        fsync_fail_permille: 10,
        // Off: a stall is one more yes/no at every sync, which would
        // double the schedules per sync; the exhaustive check's orders of
        // events come from its delays already.
        stall_permille: 0,
        // Off: the check's crashes are kill -9 and power losses.
        shutdown_permille: 0,
        disk_full_permille: 10,
        crash_step_permille: 5,
        crash_point_permille: 100,
        power_permille: 0,
        effect_lost_permille: 100,
        rot_permille: 0,
        // Off: the check's disk faults are failed syncs and a full disk.
        read_fail_permille: 0,
        solo_sync_permille: 0,
        // Off: the check's orders of events come from its delays.
        slow_io_permille: 0,
        late_timer_permille: 0,
        compact_records: 0,
    };
    [
        ("process crashes", on.clone()),
        (
            "power losses",
            FaultMix {
                power_permille: 1000,
                tear_permille: 1000,
                ..on
            },
        ),
    ]
}

/// What to check.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    /// The run's scenario, bug and (unused) seed.
    pub run: RunConfig,
    /// The fault mix (one of [`check_mixes`]).
    pub mix: FaultMix,
    /// The fixed workload.
    pub workload: Workload,
    /// At most this many deviations per schedule.
    pub max_faults: usize,
    /// Stop at the first violation.
    pub stop_at_first: bool,
}

/// What a check explored and found.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// Distinct states hashed (one per deviation explored).
    pub states_count: u64,
    /// Schedules run to the end and judged.
    pub schedules_count: u64,
    /// Schedules stopped at a state explored before.
    pub pruned_count: u64,
    /// Decisions of the schedule without any deviation.
    pub base_decisions_count: usize,
    /// Failing schedules: their choices and first violation (at most one
    /// when stopping at the first).
    pub failures: Vec<(Vec<u64>, Violation)>,
}

/// The alternatives to the simplest option explored for decision `c`.
pub fn alternatives(c: &Choice) -> std::ops::Range<u64> {
    if c.options == 2 {
        return 1..2;
    }
    match c.kind {
        Decision::Client | Decision::Placement if c.options <= MAX_WIDTH => 1..c.options,
        _ => 1..1,
    }
}

/// The plan of a schedule.
pub fn plan(cfg: &CheckConfig, values: Vec<u64>) -> Plan {
    Plan {
        choices: Some(values),
        workload: Some(cfg.workload),
        mix: Some(cfg.mix.clone()),
        then_seed: None,
        draws: Draws::CURRENT,
    }
}

struct Explorer<'a> {
    cfg: &'a CheckConfig,
    /// State hash -> the most deviations left with which it was explored.
    visited: BTreeMap<u64, usize>,
    report: CheckReport,
    progress: &'a mut dyn FnMut(&CheckReport),
}

/// Runs the check; `progress` hears after every schedule.
pub fn check(cfg: &CheckConfig, progress: &mut dyn FnMut(&CheckReport)) -> CheckReport {
    let mut e = Explorer {
        cfg,
        visited: BTreeMap::new(),
        report: CheckReport::default(),
        progress,
    };
    e.explore(Vec::new(), None, cfg.max_faults);
    e.report
}

impl Explorer<'_> {
    fn done(&self) -> bool {
        self.cfg.stop_at_first && !self.report.failures.is_empty()
    }

    /// Runs the schedule `values` (whose last deviation is at `at`, with
    /// `left` deviations left), then every schedule with one more
    /// deviation after it.
    fn explore(&mut self, values: Vec<u64>, at: Option<usize>, left: usize) {
        if self.done() {
            return;
        }
        let visited = &mut self.visited;
        let mut prune = |h: u64| -> bool {
            match visited.get(&h) {
                Some(l) if *l >= left => true,
                _ => {
                    visited.insert(h, left);
                    false
                }
            }
        };
        let probe = at.map(|a| Probe {
            at_decision: a,
            prune: &mut prune,
        });
        let r = run_with(&self.cfg.run, &plan(self.cfg, values.clone()), probe);
        let seen = r.probe;
        let end = match seen {
            Some(p) if p.pruned => {
                self.report.pruned_count += 1;
                // Only the decisions still open within the probed event.
                p.decisions_count
            }
            _ => {
                if seen.is_some() {
                    self.report.states_count += 1;
                } else {
                    self.report.base_decisions_count = r.choices.len();
                }
                self.report.schedules_count += 1;
                if let Some(v) = r.violations.first() {
                    self.report.failures.push((values.clone(), v.clone()));
                }
                r.choices.len()
            }
        };
        (self.progress)(&self.report);
        if left == 0 || self.done() {
            return;
        }
        let from = at.map_or(0, |a| a + 1);
        for j in from..end.min(r.choices.len()) {
            for alt in alternatives(&r.choices[j]) {
                if self.done() {
                    return;
                }
                let mut child = values.clone();
                child.resize(j, 0);
                child.push(alt);
                self.explore(child, Some(j), left - 1);
            }
        }
    }
}

/// Checks every mix of [`check_mixes`] in turn; with `stop_at_first`,
/// deeper bounds one after another (0, 1, ..., `max_faults`) until the
/// first violation. Returns the totals, and the mix and bound of the
/// failure if there is one.
pub fn check_all_mixes(
    run: &RunConfig,
    workload: Workload,
    max_faults: usize,
    stop_at_first: bool,
    progress: &mut dyn FnMut(&CheckReport),
) -> (CheckReport, Option<(FaultMix, usize)>) {
    let mut total = CheckReport::default();
    let bounds: Vec<usize> = if stop_at_first {
        (0..=max_faults).collect()
    } else {
        vec![max_faults]
    };
    for k in bounds {
        for (_, mix) in check_mixes() {
            let cfg = CheckConfig {
                run: run.clone(),
                mix: mix.clone(),
                workload,
                max_faults: k,
                stop_at_first,
            };
            let r = check(&cfg, progress);
            total.states_count += r.states_count;
            total.schedules_count += r.schedules_count;
            total.pruned_count += r.pruned_count;
            total.base_decisions_count = total.base_decisions_count.max(r.base_decisions_count);
            let failed = !r.failures.is_empty();
            total.failures.extend(r.failures);
            if failed && stop_at_first {
                return (total, Some((mix, k)));
            }
        }
    }
    (total, None)
}
