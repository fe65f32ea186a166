//! `msp-sim run`: a sweep of seeds, a summary, the first failure's report.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use msp::core::bugs::Bug;
use msp_sim::run::ClientKind;
use msp_sim::shard;
use msp_sim::sweep::{
    commands_plan, repro_line_client, shard_seeds, sweep_client, SeedPart, Summary,
};
use msp_sim::workload::Scenario;

use super::{usage, EXIT_SHORTFALL, EXIT_VIOLATION};

/// How often a sweep whose stderr is not a terminal prints progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// `run`'s arguments.
pub struct Args {
    /// The scenario.
    pub scenario: Scenario,
    /// A seed range A..B.
    pub seeds: Option<String>,
    /// One seed.
    pub seed: Option<u64>,
    /// Worker threads.
    pub jobs: usize,
    /// Shard K/N (1-based), or `auto`: from a cluster engine's
    /// environment ([`msp_sim::shard`]).
    pub shard: Option<String>,
    /// Print the JSON summary.
    pub json: bool,
    /// The planted bug, if any.
    pub bug: Option<Bug>,
    /// Run every seed twice.
    pub check_determinism: bool,
    /// Which client drives the hosts.
    pub client: ClientKind,
    /// Logical commands per client, fixed for every seed (`None`: each
    /// scenario's own workload).
    pub commands: Option<u32>,
}

/// Runs the subcommand; its exit code.
pub fn main(a: Args) -> ExitCode {
    let range = match (a.seeds.as_deref(), a.seed) {
        (Some(_), Some(_)) => return usage("give --seeds or --seed, not both"),
        (None, Some(n)) => n..n + 1,
        (None, None) => 0..100,
        (Some(r), None) => match super::seed_range(r) {
            Some(r) => r,
            None => return usage("--seeds wants A..B with A < B"),
        },
    };
    let (k, n) = match a.shard.as_deref() {
        None => (1, 1),
        Some("auto") => match shard::detect(|k| std::env::var(k).ok()) {
            Ok(s) => {
                eprintln!("msp-sim: --shard auto: {s}");
                (s.k, s.n)
            }
            Err(e) => return usage(&e.to_string()),
        },
        Some(s) => match shard::parse_shard(s) {
            Ok(kn) => kn,
            Err(e) => return usage(&e.to_string()),
        },
    };
    let part = SeedPart {
        start: range.start,
        end: range.end,
        shard_k: k,
        shard_n: n,
    };
    let seeds = shard_seeds(range, k, n);
    sweep_cmd(&a, seeds, part)
}

fn sweep_cmd(a: &Args, seeds: Vec<u64>, part: SeedPart) -> ExitCode {
    let (scenario, bug, client) = (a.scenario, a.bug, a.client);
    let (jobs, json, check) = (a.jobs, a.json, a.check_determinism);
    let started = Instant::now();
    let total = seeds.len();
    let bar = if std::io::stderr().is_terminal() {
        let b = indicatif::ProgressBar::new(total as u64);
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
    // Without a terminal (CI, a pipe): one plain line every 10 s.
    let plain = Mutex::new((0usize, Instant::now()));
    let tick = || {
        if let Some(b) = &bar {
            b.inc(1);
            return;
        }
        let mut p = plain.lock().expect("no poisoned lock");
        p.0 += 1;
        if p.1.elapsed() >= PROGRESS_EVERY {
            p.1 = Instant::now();
            let secs = started.elapsed().as_secs_f64();
            eprintln!(
                "progress: {}/{total} seeds in {secs:.0}s ({:.1} seeds/s)",
                p.0,
                p.0 as f64 / secs.max(1e-9)
            );
        }
    };
    let plan = commands_plan(scenario, a.commands);
    let outcomes = sweep_client(scenario, &seeds, bug, client, &plan, jobs, check, &tick);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let mut summary = Summary::of(scenario, bug, &outcomes, check);
    summary.parts.push(part);
    summary.client = client.name().to_string();
    summary.commands = a.commands;
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
            println!("  the trace entries that matter (from the earliest about its ids):");
            for l in lines {
                println!("    {l}");
            }
            let repro = repro_line_client(scenario, o.seed, bug, client, a.commands);
            println!(
                "  reproduce with:\n    {repro}\n  shrink with:\n    {}",
                repro.replace(" replay ", " shrink ")
            );
        }
        for (s, d) in &summary.divergences {
            println!(
                "NONDETERMINISM seed {s}: {d}\n  reproduce with:\n    {} --trace",
                repro_line_client(scenario, *s, bug, client, a.commands)
            );
        }
    }
    exit_of(&summary)
}

/// The exit code a summary calls for.
pub fn exit_of(s: &Summary) -> ExitCode {
    if s.violated() {
        ExitCode::from(EXIT_VIOLATION)
    } else if !s.shortfall().is_empty() {
        eprintln!(
            "msp-sim: coverage shortfall (nothing was violated, but the sweep did not test what it must): {}",
            s.shortfall().join("; ")
        );
        ExitCode::from(EXIT_SHORTFALL)
    } else {
        ExitCode::SUCCESS
    }
}
