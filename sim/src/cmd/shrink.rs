//! `msp-sim shrink`: minimise a failing run, print before and after and
//! the shrunk timeline; optionally save it as a run file or a corpus
//! entry. The last line is `shrunk: S steps, C choices, E events`.

use std::process::ExitCode;
use std::time::Instant;

use msp::core::bugs::Bug;
use msp_sim::choice;
use msp_sim::plan::Plan;
use msp_sim::readable::{self, Legend};
use msp_sim::run::run_with;
use msp_sim::run::RunConfig;
use msp_sim::runfile::RunFile;
use msp_sim::shrink::{shrink_to, Goal};
use msp_sim::signature::{self, Step};
use msp_sim::tally::Tally;
use msp_sim::workload::Scenario;

use super::corpus::{save_entry, Save};
use super::{named, usage};
use crate::Which;

/// `shrink`'s arguments.
pub struct Args {
    /// The run (a seed or a run file).
    pub which: Which,
    /// The property (to keep violating, or the fixed bug's).
    pub property: Option<String>,
    /// A signature to keep reaching instead.
    pub reach: Option<String>,
    /// The budget of candidate runs.
    pub max_runs: u64,
    /// Where to write a run file.
    pub out: Option<String>,
    /// Save the result into the corpus.
    pub save: Option<Save>,
}

/// Runs the subcommand; its exit code.
pub fn main(a: Args) -> ExitCode {
    let n = match named(&a.which) {
        Ok(n) => n,
        Err(e) => return usage(&e),
    };
    let started = Instant::now();
    let first = run_with(&n.cfg, &n.plan, None);
    let (goal, property) = match &a.reach {
        Some(sig) => {
            let sig = match parse_signature(sig) {
                Ok(s) => s,
                Err(e) => return usage(&e),
            };
            let Some(p) = a.property.clone() else {
                return usage("--reach needs --property: the property the fixed bug violated");
            };
            (Goal::Reaches(sig), p)
        }
        None => {
            let Some(p) = a
                .property
                .clone()
                .or_else(|| first.violations.first().map(|v| v.property.to_string()))
            else {
                return usage("this run holds every property: nothing to shrink");
            };
            (Goal::Violates(p.clone()), p)
        }
    };
    let start = choice::values(&first.choices);
    let seed = n.file.as_ref().map_or(Some(n.cfg.seed), |f| f.seed);
    println!(
        "shrinking {} scenario {}{}: it must {goal}",
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
    let s = match shrink_to(&n.cfg, &n.plan, &goal, start, a.max_runs, &mut progress) {
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

/// Parses a `;`-separated signature.
pub fn parse_signature(text: &str) -> Result<Vec<Step>, String> {
    let sig: Vec<Step> = text
        .split(';')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(Step::parse)
        .collect::<Result<_, _>>()?;
    if sig.is_empty() {
        return Err("an empty signature".into());
    }
    Ok(sig)
}

/// `msp-sim find`: the first `count` seeds of `seeds` whose runs reach
/// `reach`, with what they violate.
pub fn find(
    scenario: Scenario,
    seeds: &str,
    bug: Option<Bug>,
    client: msp_sim::run::ClientKind,
    reach: &str,
    count: usize,
) -> ExitCode {
    let sig = match parse_signature(reach) {
        Ok(s) => s,
        Err(e) => return usage(&e),
    };
    let Some(range) = super::seed_range(seeds) else {
        return usage("--seeds wants A..B with A < B");
    };
    let mut found = 0;
    let mut tried = 0;
    for seed in range {
        tried += 1;
        let cfg = RunConfig {
            scenario,
            seed,
            bug,
            client,
        };
        let r = run_with(&cfg, &Plan::seeded(), None);
        if let Ok(at) = signature::reach(&r.trace, &sig) {
            let mut props: Vec<&str> = r.violations.iter().map(|v| v.property).collect();
            props.dedup();
            println!(
                "seed {seed}: reaches it at {} ({}; violates: {})",
                at.iter()
                    .map(|i| format!("#{i}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                Tally::of(&r),
                if props.is_empty() {
                    "nothing".to_string()
                } else {
                    props.join(", ")
                }
            );
            found += 1;
            if found >= count {
                break;
            }
        }
    }
    println!("{found} of {tried} seeds reach it");
    if found == 0 {
        ExitCode::from(super::EXIT_VIOLATION)
    } else {
        ExitCode::SUCCESS
    }
}
