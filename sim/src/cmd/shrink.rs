//! `msp-sim shrink`: minimise a failing run, print before and after and
//! the shrunk timeline; optionally save it as a run file or a corpus
//! entry. The last line is `shrunk: S steps, C choices, E events`.

use std::process::ExitCode;
use std::time::Instant;

use msp_sim::choice;
use msp_sim::readable::{self, Legend};
use msp_sim::run::run_with;
use msp_sim::runfile::RunFile;
use msp_sim::shrink::shrink;
use msp_sim::tally::Tally;

use super::corpus::{save_entry, Save};
use super::{named, usage};
use crate::Which;

/// `shrink`'s arguments.
pub struct Args {
    pub which: Which,
    pub property: Option<String>,
    pub max_runs: u64,
    pub out: Option<String>,
    pub save: Option<Save>,
}

pub fn main(a: Args) -> ExitCode {
    let n = match named(&a.which) {
        Ok(n) => n,
        Err(e) => return usage(&e),
    };
    let started = Instant::now();
    let first = run_with(&n.cfg, &n.plan, None);
    let Some(property) = a
        .property
        .clone()
        .or_else(|| first.violations.first().map(|v| v.property.to_string()))
    else {
        return usage("this run holds every property: nothing to shrink");
    };
    let start = choice::values(&first.choices);
    let seed = n.file.as_ref().map_or(Some(n.cfg.seed), |f| f.seed);
    println!(
        "shrinking {} scenario {}{}: property {property}",
        seed.map_or("a recorded run".to_string(), |s| format!("seed {s}")),
        n.cfg.scenario.name(),
        n.cfg
            .bug
            .map(|b| format!(" bug {}", b.name()))
            .unwrap_or_default()
    );
    let mut progress = |runs: u64, t: &Tally| {
        eprintln!(
            "  {:>5} runs {:>5.1}s: {} steps, {} choices, {} events",
            runs,
            started.elapsed().as_secs_f64(),
            t.steps(),
            t.choices_count,
            t.events_count
        );
    };
    let s = match shrink(&n.cfg, &n.plan, &property, start, a.max_runs, &mut progress) {
        Ok(s) => s,
        Err(e) => return usage(&e),
    };
    let secs = started.elapsed().as_secs_f64();
    let legend = Legend::of(&s.result.trace);
    println!("before: {}", s.before);
    println!("after:  {}", s.after);
    println!(
        "{} candidate runs in {secs:.1}s{}",
        s.runs_count,
        if s.budget_exhausted {
            " (the run budget ran out: --max-runs to go further)"
        } else {
            ""
        }
    );
    println!("choices: {}", choice::encode(&s.values));
    println!("shrunk timeline:");
    let mut lines = readable::timeline(&s.result.trace, &legend, &s.result.violations);
    lines.extend(readable::violation_lines(&legend, &s.result.violations));
    for l in &lines {
        println!("  {l}");
    }
    println!("ids:");
    for l in legend.used_in(&lines) {
        println!("  {l}");
    }
    let shrunk_plan = msp_sim::plan::Plan {
        choices: Some(s.values.clone()),
        ..n.plan.clone()
    };
    let file = RunFile::of(&n.cfg, &shrunk_plan, &s.result, seed, Some(&property));
    if let Some(path) = &a.out {
        if let Err(e) = file.save(path) {
            return usage(&e.to_string());
        }
        println!("wrote {path}");
    }
    if let Some(save) = &a.save {
        match save_entry(file, &s.result, save) {
            Ok(path) => println!("added {path}"),
            Err(e) => return usage(&e),
        }
    }
    println!(
        "shrunk: {} steps, {} choices, {} events",
        s.after.steps(),
        s.after.choices_count,
        s.after.events_count
    );
    ExitCode::SUCCESS
}
