//! `msp-sim check`: the bounded exhaustive check of a small workload.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use msp::core::bugs::Bug;
use msp_sim::check::{self, CheckConfig, CheckReport};
use msp_sim::plan::Workload;
use msp_sim::readable::{self, Legend};
use msp_sim::run::{run_with, RunConfig};
use msp_sim::runfile::RunFile;
use msp_sim::workload::Scenario;

use super::{usage, EXIT_VIOLATION};

/// How often progress is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// `check`'s arguments.
pub struct Args {
    /// The scenario.
    pub scenario: Scenario,
    /// At most this many deviations (default per --bug).
    pub max_faults: Option<usize>,
    /// The planted bug, if any.
    pub bug: Option<Bug>,
    /// Clients of the workload.
    pub clients: usize,
    /// Commands each client issues.
    pub commands: u32,
    /// Where to write a run file.
    pub out: Option<String>,
}

/// Runs the subcommand; its exit code.
pub fn main(a: Args) -> ExitCode {
    if a.clients == 0 || a.commands == 0 {
        return usage("the workload needs at least one client and one command");
    }
    let workload = Workload {
        clients_count: a.clients,
        commands_per_client: a.commands,
        observer: false,
    };
    let k = a.max_faults.unwrap_or(if a.bug.is_some() { 2 } else { 1 });
    let started = Instant::now();
    let mut last = Instant::now();
    let mut progress = |r: &CheckReport| {
        if last.elapsed() >= PROGRESS_EVERY {
            last = Instant::now();
            eprintln!(
                "progress: {} states, {} schedules judged, {} pruned, {:.0}s",
                r.states_count,
                r.schedules_count,
                r.pruned_count,
                started.elapsed().as_secs_f64()
            );
        }
    };
    let run = RunConfig {
        scenario: a.scenario,
        seed: 0,
        bug: a.bug,
        client: Default::default(),
    };
    let (report, failed_in) =
        check::check_all_mixes(&run, workload, k, a.bug.is_some(), &mut progress);
    let secs = started.elapsed().as_secs_f64();
    println!(
        "checked scenario {}{}: {} clients x {} commands, every fault on (crashes as process crashes, then as power losses), at most {} deviation(s) from the simplest schedule ({} decisions)",
        a.scenario.name(),
        a.bug.map(|b| format!(" bug {}", b.name())).unwrap_or_default(),
        a.clients,
        a.commands,
        failed_in.as_ref().map_or(k, |(_, d)| *d),
        report.base_decisions_count
    );
    println!(
        "{} states, {} schedules judged by every oracle, {} pruned as repeats, in {secs:.1}s",
        report.states_count, report.schedules_count, report.pruned_count
    );
    let Some((values, v)) = report.failures.first() else {
        println!("every property holds on every schedule");
        return ExitCode::SUCCESS;
    };
    println!(
        "{} failing schedule(s); the first, with {} deviation(s):",
        report.failures.len(),
        values.iter().filter(|x| **x != 0).count()
    );
    // Failures of a full check come from either mix: find the one that
    // reproduces this schedule.
    let mixes: Vec<_> = match failed_in {
        Some((m, _)) => vec![m],
        None => check::check_mixes().into_iter().map(|(_, m)| m).collect(),
    };
    let Some(cfg) = mixes
        .into_iter()
        .map(|mix| CheckConfig {
            run: run.clone(),
            mix,
            workload,
            max_faults: k,
            stop_at_first: true,
        })
        .find(|c| {
            !run_with(&c.run, &check::plan(c, values.clone()), None)
                .violations
                .is_empty()
        })
    else {
        return usage("internal: a failing schedule did not fail again");
    };
    let plan = check::plan(&cfg, values.clone());
    let r = run_with(&cfg.run, &plan, None);
    for (i, c) in r.choices.iter().enumerate().filter(|(_, c)| c.value != 0) {
        println!(
            "  deviation at decision {i}: {:?} option {} of {} at {}.{:03}s",
            c.kind,
            c.value,
            c.options,
            c.at_ms / 1000,
            c.at_ms % 1000
        );
    }
    let legend = Legend::of(&r.trace);
    let mut lines = readable::timeline(&r.trace, &legend, &r.violations);
    lines.extend(readable::violation_lines(&legend, &r.violations));
    for l in &lines {
        println!("  {l}");
    }
    for l in legend.used_in(&lines) {
        println!("  {l}");
    }
    println!("VIOLATED {}: {}", v.property, v.detail);
    if let Some(path) = &a.out {
        let file = RunFile::of(&cfg.run, &plan, &r, None, Some(v.property));
        if let Err(e) = file.save(path) {
            return usage(&e.to_string());
        }
        println!("wrote {path}");
    }
    ExitCode::from(EXIT_VIOLATION)
}
