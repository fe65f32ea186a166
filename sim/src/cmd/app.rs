//! `msp-sim app`: a sweep of an application-level scenario (the real SDK
//! core and request gate against the real host core; see `msp_sim::app`).

use std::process::ExitCode;
use std::time::Instant;

use msp_sim::app::{run_app, AppBug, AppScenario};

use super::{usage, EXIT_VIOLATION};

/// Runs the subcommand; its exit code.
pub fn main(scenario: &str, seeds: &str, bug: Option<&str>) -> ExitCode {
    let Some(s) = AppScenario::from_name(scenario) else {
        return usage(&format!("unknown app scenario {scenario}"));
    };
    let bug = match bug.map(|b| (b, AppBug::from_name(b))) {
        None => None,
        Some((_, Some(b))) => Some(b),
        Some((b, None)) => return usage(&format!("unknown app bug {b}")),
    };
    let Some(range) = super::seed_range(seeds) else {
        return usage("--seeds wants A..B with A < B");
    };
    let started = Instant::now();
    let mut faults = std::collections::BTreeMap::new();
    let (mut answered, mut requests, mut failed) = (0usize, 0usize, 0u64);
    let mut first = None;
    for seed in range.clone() {
        let r = run_app(s, seed, bug);
        answered += r.answered_count;
        requests += r.requests_count;
        for (k, v) in r.faults {
            *faults.entry(k).or_insert(0u64) += v;
        }
        if !r.violations.is_empty() {
            failed += 1;
            if first.is_none() {
                first = Some((seed, r.violations, started.elapsed()));
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let n = range.end - range.start;
    println!(
        "app scenario {} seeds {}..{}{}: {n} runs in {secs:.2}s ({:.0} seeds/s), {failed} failed",
        s.name(),
        range.start,
        range.end,
        bug.map(|b| format!(" bug {}", b.name()))
            .unwrap_or_default(),
        n as f64 / secs.max(1e-9)
    );
    println!("requests answered: {answered}/{requests}");
    for (k, v) in &faults {
        println!("  fault {k}: {v}");
    }
    match first {
        None => ExitCode::SUCCESS,
        Some((seed, violations, after)) => {
            println!(
                "\nFAILED seed {seed} (found after {:.3}s):",
                after.as_secs_f64()
            );
            for v in &violations {
                println!("  {}: {}", v.property, v.detail);
            }
            println!(
                "  reproduce with:\n    msp-sim app --scenario {} --seeds {seed}..{}{}",
                s.name(),
                seed + 1,
                bug.map(|b| format!(" --bug {}", b.name()))
                    .unwrap_or_default()
            );
            ExitCode::from(EXIT_VIOLATION)
        }
    }
}
