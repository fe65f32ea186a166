//! `msp-sim replay`: one run bit for bit, from a seed or a run file; its
//! trace numbered with ids named, or only what concerns one id.

use std::process::ExitCode;

use msp_sim::readable::{self, Legend};
use msp_sim::run::run_with;
use msp_sim::runfile::RunFile;
use msp_sim::tally::Tally;

use super::{named, usage, EXIT_VIOLATION};
use crate::Which;

/// How many entries a violation's report shows at most.
pub const REPORT_LINES: usize = 40;

/// Runs the subcommand; its exit code.
pub fn main(
    which: &Which,
    trace: bool,
    focus: Option<&str>,
    out: Option<&str>,
    choices: bool,
) -> ExitCode {
    let n = match named(which) {
        Ok(n) => n,
        Err(e) => return usage(&e),
    };
    let r = run_with(&n.cfg, &n.plan, None);
    let legend = Legend::of(&r.trace);
    if trace {
        let idx: Vec<usize> = match focus {
            None => (0..r.trace.entries.len()).collect(),
            Some(id) => match readable::focus(&r.trace, &legend, id) {
                Some(v) => v,
                None => return usage(&format!("--focus {id}: no session or command of this run has that id (names: see the legend of `replay --trace`)")),
            },
        };
        println!("ids:");
        for l in legend.lines() {
            println!("  {l}");
        }
        for i in idx {
            println!("{}", readable::line(&r.trace, i, &legend));
        }
    }
    let source = match &n.file {
        Some(f) => format!(
            "file {} ({} scenario {}{})",
            which.file.as_deref().unwrap_or(""),
            f.seed
                .map_or("recorded choices".to_string(), |s| format!("from seed {s}")),
            n.cfg.scenario.name(),
            n.cfg
                .bug
                .map(|b| format!(" bug {}", b.name()))
                .unwrap_or_default()
        ),
        None => format!(
            "seed {} scenario {}{}",
            n.cfg.seed,
            n.cfg.scenario.name(),
            n.cfg
                .bug
                .map(|b| format!(" bug {}", b.name()))
                .unwrap_or_default()
        ),
    };
    println!(
        "{source}: {} events, {} trace entries, simulated {:.1}s, trace hash {:016x}",
        r.events_count,
        r.trace.entries.len(),
        r.simulated_ms as f64 / 1000.0,
        r.trace.hash()
    );
    if let Some(f) = &n.file {
        if !f.hash_comparable() {
            println!(
                "the file's trace hash is of an older hash version ({}; this build's is {}): not compared",
                f.trace_hash_version,
                msp_sim::trace::TRACE_HASH_VERSION
            );
        } else if f.trace_hash == r.trace.hash() {
            println!("replays bit for bit (the file's trace hash)");
        } else {
            println!(
                "the file recorded trace hash {:016x}: this build runs its choices otherwise (the runtime or the simulator changed)",
                f.trace_hash
            );
        }
    }
    println!("{}", Tally::of(&r));
    if choices {
        println!("choices that are not the simplest (index kind options=value at time):");
        for (i, c) in r.choices.iter().enumerate().filter(|(_, c)| c.value != 0) {
            println!(
                "  {i:>6} {:<9} {}={} at {}.{:03}s",
                format!("{:?}", c.kind),
                c.options,
                c.value,
                c.at_ms / 1000,
                c.at_ms % 1000
            );
        }
    }
    println!("fault mix: {}", r.mix);
    if let Some(path) = out {
        let property = r.violations.first().map(|v| v.property);
        let seed = n.file.as_ref().map_or(Some(n.cfg.seed), |f| f.seed);
        if let Err(e) = RunFile::of(&n.cfg, &n.plan, &r, seed, property).save(path) {
            return usage(&e.to_string());
        }
        println!("wrote {path}");
    }
    if r.violations.is_empty() {
        println!("every property holds");
        return ExitCode::SUCCESS;
    }
    for l in readable::violation_lines(&legend, &r.violations) {
        println!("{l}");
    }
    let v = &r.violations[0];
    println!("what led to the first violation (from the earliest entry about its ids):");
    let lines = readable::report(&r.trace, &legend, v, REPORT_LINES);
    for l in &lines {
        println!("  {l}");
    }
    for l in legend.used_in(&lines) {
        println!("  {l}");
    }
    ExitCode::from(EXIT_VIOLATION)
}
