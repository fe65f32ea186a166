//! `msp-sim`: run, replay and merge simulator sweeps.
//!
//! Exit codes: 0 every seed passed, 1 a property was violated (or a
//! determinism check or a "sometimes" crash-point assertion failed), 2 a
//! usage error. Only this binary reads wall time, for progress and
//! throughput.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use msp::core::bugs::Bug;
use msp_sim::run::{run, RunConfig};
use msp_sim::sweep::{repro_line, shard_seeds, sweep, Summary};
use msp_sim::workload::Scenario;

#[derive(Parser)]
#[command(
    name = "msp-sim",
    about = "Deterministic simulator for the msp runtime"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a sweep of seeds and check every property.
    Run {
        /// mixed | turns | crash-storm | lease-handover | ephemeral
        #[arg(long, default_value = "mixed")]
        scenario: String,
        /// A seed range A..B (B exclusive).
        #[arg(long)]
        seeds: Option<String>,
        /// One seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Worker threads.
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// Run only shard K of N (K/N, 1-based).
        #[arg(long)]
        shard: Option<String>,
        /// Print a machine-readable summary.
        #[arg(long)]
        json: bool,
        /// Plant a bug in every host.
        #[arg(long)]
        bug: Option<String>,
        /// Run every seed twice and compare traces.
        #[arg(long)]
        check_determinism: bool,
    },
    /// Reproduce one seed bit for bit.
    Replay {
        /// The scenario.
        #[arg(long, default_value = "mixed")]
        scenario: String,
        /// The seed.
        #[arg(long)]
        seed: u64,
        /// A planted bug.
        #[arg(long)]
        bug: Option<String>,
        /// Print the whole trace as a timeline.
        #[arg(long)]
        trace: bool,
    },
    /// Merge shard summaries written with `run --json`.
    Merge {
        /// Summary files.
        files: Vec<String>,
    },
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("msp-sim: {msg}");
    ExitCode::from(2)
}

fn parse_bug(b: &Option<String>) -> Result<Option<Bug>, String> {
    match b {
        None => Ok(None),
        Some(n) => Bug::from_name(n).map(Some).ok_or_else(|| {
            let names: Vec<&str> = Bug::ALL.iter().map(|b| b.name()).collect();
            format!("unknown bug {n:?}; known: {}", names.join(", "))
        }),
    }
}

fn parse_scenario(s: &str) -> Result<Scenario, String> {
    Scenario::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
        format!("unknown scenario {s:?}; known: {}", names.join(", "))
    })
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match cli.cmd {
        Cmd::Run {
            scenario,
            seeds,
            seed,
            jobs,
            shard,
            json,
            bug,
            check_determinism,
        } => {
            let scenario = match parse_scenario(&scenario) {
                Ok(s) => s,
                Err(e) => return usage(&e),
            };
            let bug = match parse_bug(&bug) {
                Ok(b) => b,
                Err(e) => return usage(&e),
            };
            let range = match (seeds, seed) {
                (Some(_), Some(_)) => return usage("give --seeds or --seed, not both"),
                (None, Some(n)) => n..n + 1,
                (None, None) => 0..100,
                (Some(r), None) => match r
                    .split_once("..")
                    .map(|(a, b)| (a.parse::<u64>(), b.parse::<u64>()))
                {
                    Some((Ok(a), Ok(b))) if a < b => a..b,
                    _ => return usage("--seeds wants A..B with A < B"),
                },
            };
            let (k, n) = match shard.as_deref().map(|s| {
                s.split_once('/')
                    .map(|(k, n)| (k.parse::<u64>(), n.parse::<u64>()))
            }) {
                None => (1, 1),
                Some(Some((Ok(k), Ok(n)))) if n >= 1 && k >= 1 && k <= n => (k, n),
                _ => return usage("--shard wants K/N with 1 <= K <= N"),
            };
            run_cmd(
                scenario,
                shard_seeds(range, k, n),
                bug,
                jobs,
                json,
                check_determinism,
            )
        }
        Cmd::Replay {
            scenario,
            seed,
            bug,
            trace,
        } => {
            let scenario = match parse_scenario(&scenario) {
                Ok(s) => s,
                Err(e) => return usage(&e),
            };
            let bug = match parse_bug(&bug) {
                Ok(b) => b,
                Err(e) => return usage(&e),
            };
            replay_cmd(scenario, seed, bug, trace)
        }
        Cmd::Merge { files } => merge_cmd(&files),
    }
}

fn run_cmd(
    scenario: Scenario,
    seeds: Vec<u64>,
    bug: Option<Bug>,
    jobs: usize,
    json: bool,
    check: bool,
) -> ExitCode {
    let started = Instant::now();
    let bar = if std::io::stderr().is_terminal() {
        let b = indicatif::ProgressBar::new(seeds.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} seeds {per_sec} eta {eta}",
            )
            .expect("valid template"),
        );
        Some(b)
    } else {
        None
    };
    let tick = || {
        if let Some(b) = &bar {
            b.inc(1);
        }
    };
    let outcomes = sweep(scenario, &seeds, bug, jobs, check, &tick);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let mut summary = Summary::of(scenario, bug, &outcomes, check);
    summary.wall_ms = started.elapsed().as_millis() as u64;
    if json {
        println!("{}", summary.to_json());
    } else {
        print!("{}", summary.render());
        if let Some(o) = outcomes.iter().find(|o| o.failure.is_some()) {
            let (p, d, lines) = o.failure.clone().expect("failure");
            println!(
                "\nFAILED seed {} scenario {}: property {p} violated",
                o.seed,
                scenario.name()
            );
            println!("  {d}");
            println!("  fault mix: {}", o.mix);
            println!("  all properties violated: {}", o.properties.join(", "));
            println!("  last trace events:");
            for l in lines {
                println!("    {l}");
            }
            println!(
                "  reproduce with:\n    {}",
                repro_line(scenario, o.seed, bug)
            );
        }
        for (s, d) in &summary.divergences {
            println!(
                "NONDETERMINISM seed {s}: {d}\n  reproduce with:\n    {} --trace",
                repro_line(scenario, *s, bug)
            );
        }
    }
    if summary.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn replay_cmd(scenario: Scenario, seed: u64, bug: Option<Bug>, trace: bool) -> ExitCode {
    let r = run(&RunConfig {
        scenario,
        seed,
        bug,
    });
    if trace {
        for e in &r.trace.entries {
            println!("{e}");
        }
    }
    println!(
        "seed {seed} scenario {}: {} events, {} trace entries, simulated {:.1}s, trace hash {:016x}",
        scenario.name(),
        r.events_count,
        r.trace.entries.len(),
        r.simulated_ms as f64 / 1000.0,
        r.trace.hash()
    );
    println!("fault mix: {}", r.mix);
    if r.violations.is_empty() {
        println!("every property holds");
        return ExitCode::SUCCESS;
    }
    for v in &r.violations {
        println!(
            "VIOLATED {} at {}: {}",
            v.property,
            v.at_index
                .map_or("end".to_string(), |i| format!("trace entry {i}")),
            v.detail
        );
    }
    let v = &r.violations[0];
    println!("last trace events before the first violation:");
    for l in msp_sim::sweep::context_lines(&r, v.at_index, 20) {
        println!("  {l}");
    }
    ExitCode::from(1)
}

fn merge_cmd(files: &[String]) -> ExitCode {
    if files.is_empty() {
        return usage("merge wants summary files");
    }
    let mut total: Option<Summary> = None;
    for f in files {
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => return usage(&format!("{f}: {e}")),
        };
        let Some(s) = serde_json::from_str(&text)
            .ok()
            .as_ref()
            .and_then(Summary::from_json)
        else {
            return usage(&format!("{f}: not a msp-sim --json summary"));
        };
        match &mut total {
            None => total = Some(s),
            Some(t) => {
                if t.scenario != s.scenario || t.bug != s.bug {
                    return usage("merge wants shards of one scenario and bug");
                }
                t.merge(&s);
            }
        }
    }
    let t = total.expect("at least one file");
    print!("{}", t.render());
    if t.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
