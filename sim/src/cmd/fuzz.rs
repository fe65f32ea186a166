//! `msp-sim fuzz`: the coverage-guided search for a while, then plain
//! random seeds for as long, and their coverage growth side by side.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use msp::core::bugs::Bug;
use msp_sim::fuzz::Search;
use msp_sim::plan::Plan;
use msp_sim::run::{run_with, RunConfig};
use msp_sim::runfile::RunFile;
use msp_sim::workload::Scenario;

use super::{usage, EXIT_VIOLATION};

/// Checkpoints at which coverage is reported, per search.
const CHECKPOINTS: u32 = 10;

/// Parses `60s`, `2m`, `90` (seconds).
pub fn duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (n, unit) = match t.strip_suffix('m') {
        Some(n) => (n, 60),
        None => (t.strip_suffix('s').unwrap_or(t), 1),
    };
    n.parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .map(|n| Duration::from_secs(n * unit))
        .ok_or_else(|| format!("--for wants a duration like 60s or 2m, not {text:?}"))
}

struct Found {
    values: Vec<u64>,
    seed: Option<u64>,
    property: &'static str,
    detail: String,
}

/// Runs `s` for `d`; returns coverage at each checkpoint and the first
/// failure.
fn drive(s: &mut Search, d: Duration, found: &mut Option<Found>) -> Vec<(usize, u64)> {
    let started = Instant::now();
    let mut marks = Vec::new();
    let mut next = 1;
    while next <= CHECKPOINTS {
        let step = s.step();
        if found.is_none() {
            if let Some(v) = step.violations.first() {
                *found = Some(Found {
                    values: step.values.clone(),
                    seed: step.seed,
                    property: v.property,
                    detail: v.detail.clone(),
                });
            }
        }
        while next <= CHECKPOINTS && started.elapsed() >= d * next / CHECKPOINTS {
            marks.push((s.coverage.len(), s.runs_count));
            next += 1;
        }
    }
    marks
}

/// Runs the subcommand; its exit code.
pub fn main(
    scenario: Scenario,
    for_text: &str,
    bug: Option<Bug>,
    seed: u64,
    out: Option<&str>,
) -> ExitCode {
    let d = match duration(for_text) {
        Ok(d) => d,
        Err(e) => return usage(&e),
    };
    println!(
        "fuzz {} for {}s (coverage-guided), then random seeds from {seed} for {}s",
        scenario.name(),
        d.as_secs(),
        d.as_secs()
    );
    let mut found = None;
    let mut guided = Search::guided(scenario, bug, seed, seed);
    let g = drive(&mut guided, d, &mut found);
    let mut random = Search::random(scenario, bug, seed);
    let r = drive(&mut random, d, &mut found);
    println!(
        "{:>8}  {:>18}  {:>18}",
        "time", "fuzz features/runs", "random features/runs"
    );
    for (k, ((gf, gr), (rf, rr))) in g.iter().zip(&r).enumerate() {
        let t = d.as_secs_f64() * (k + 1) as f64 / CHECKPOINTS as f64;
        println!("{t:>7.0}s  {:>11} /{:>5}  {:>11} /{:>5}", gf, gr, rf, rr);
    }
    let only_fuzz: Vec<&String> = guided.coverage.difference(&random.coverage).collect();
    let only_random: Vec<&String> = random.coverage.difference(&guided.coverage).collect();
    println!(
        "fuzz kept {} sequences; features only fuzz reached: {}, only random: {}",
        guided.kept_count(),
        only_fuzz.len(),
        only_random.len()
    );
    for f in only_fuzz.iter().take(12) {
        println!("  fuzz only: {f}");
    }
    for f in only_random.iter().take(6) {
        println!("  random only: {f}");
    }
    println!(
        "coverage: fuzz {} features in {} runs, random {} features in {} runs",
        guided.coverage.len(),
        guided.runs_count,
        random.coverage.len(),
        random.runs_count
    );
    let Some(f) = found else {
        return ExitCode::SUCCESS;
    };
    println!("VIOLATED {}: {}", f.property, f.detail);
    let cfg = RunConfig {
        scenario,
        seed: f.seed.unwrap_or(0),
        bug,
        client: Default::default(),
    };
    let plan = Plan::recorded(f.values.clone());
    if let Some(path) = out {
        let r = run_with(&cfg, &plan, None);
        let file = RunFile::of(&cfg, &plan, &r, f.seed, Some(f.property));
        if let Err(e) = file.save(path) {
            return usage(&e.to_string());
        }
        println!("wrote {path}; shrink with: msp-sim shrink --file {path}");
    } else if let Some(s) = f.seed {
        println!(
            "shrink with: msp-sim shrink --scenario {} --seed {s}{}",
            scenario.name(),
            bug.map(|b| format!(" --bug {}", b.name()))
                .unwrap_or_default()
        );
    } else {
        println!("(a mutant: --out F saves it as a run file to replay or shrink)");
    }
    ExitCode::from(EXIT_VIOLATION)
}
