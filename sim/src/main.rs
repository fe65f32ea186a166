//! `msp-sim`: run, replay, shrink, search and check simulator runs; keep
//! failures as a regression corpus; merge sweep shards.
//!
//! Exit codes: 0 every run passed, 1 a property was violated (or a
//! determinism check failed, or a corpus entry failed or drifted), 2 a
//! usage error or an unreadable file, 3 a coverage shortfall (a sweep of
//! 100 seeds or more never reached or never crashed at a named crash
//! point; nothing was violated). Only this binary reads wall time, for
//! progress, budgets and throughput, and CPU time and allocation counts
//! (its global allocator, [`alloc`]) for `bench`.

mod alloc;
mod cmd;

use std::process::ExitCode;

use clap::builder::PossibleValuesParser;
use clap::{Parser, Subcommand};
use msp::core::bugs::Bug;
use msp_sim::workload::Scenario;

/// Every scenario's name, for `--help` and validation.
fn scenarios() -> PossibleValuesParser {
    PossibleValuesParser::new(Scenario::ALL.map(|s| s.name()))
}

/// Every client kind's name, for `--help` and validation.
fn clients() -> PossibleValuesParser {
    PossibleValuesParser::new(msp_sim::run::ClientKind::ALL.map(|c| c.name()))
}

/// Every planted bug's name, for `--help` and validation.
fn bugs() -> PossibleValuesParser {
    PossibleValuesParser::new(Bug::ALL.map(|b| b.name()))
}

#[derive(Parser)]
#[command(
    name = "msp-sim",
    about = "Deterministic simulator for the msp runtime",
    after_help = "Exit codes: 0 passed, 1 a violation (or nondeterminism, or a corpus entry failed or drifted), 2 usage or an unreadable file, 3 a coverage shortfall."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// A run named by a seed or by a run file.
#[derive(clap::Args, Debug, Clone)]
struct Which {
    /// The scenario (with --seed).
    #[arg(long, default_value = "mixed", value_parser = scenarios())]
    scenario: String,
    /// The seed.
    #[arg(long, conflicts_with = "file")]
    seed: Option<u64>,
    /// Plant this bug in every host (with --seed).
    #[arg(long, value_parser = bugs())]
    bug: Option<String>,
    /// A run file (from `shrink --out`, a corpus entry's run, `check`).
    #[arg(long)]
    file: Option<String>,
    /// The clients (with --seed): `sdk`, the real SDK core under the
    /// simulator's workloads, or `sim`, the simulator's own client (what
    /// run files without a `client` member replay with).
    #[arg(long, default_value = cmd::DEFAULT_CLIENT, value_parser = clients(), conflicts_with = "file")]
    client: String,
    /// With --seed: this many logical commands per client instead of the
    /// scenario's own workload (as `run --commands` drew the run).
    #[arg(long, conflicts_with = "file", value_parser = clap::value_parser!(u32).range(1..))]
    commands: Option<u32>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a sweep of seeds and check every property.
    Run {
        /// The scenario.
        #[arg(long, default_value = "mixed", value_parser = scenarios())]
        scenario: String,
        /// A seed range A..B (B exclusive); default 0..100.
        #[arg(long)]
        seeds: Option<String>,
        /// One seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Worker threads [default: the cores this process may use]. The
        /// verdicts, summary and trace hashes do not depend on it.
        #[arg(long)]
        jobs: Option<usize>,
        /// Run only shard K of N (K/N, 1-based), or `auto`: K and N from a
        /// Kubernetes Indexed Job (JOB_COMPLETION_INDEX, with
        /// MSP_SIM_SHARD_COUNT), a Slurm array (SLURM_ARRAY_TASK_ID,
        /// _COUNT, _MIN) or a CI matrix (MSP_SIM_SHARD_INDEX, 0-based, and
        /// MSP_SIM_SHARD_COUNT).
        #[arg(long)]
        shard: Option<String>,
        /// Print a machine-readable summary (it records its seed range and
        /// shard, for `merge`).
        #[arg(long)]
        json: bool,
        /// Plant a bug in every host.
        #[arg(long, value_parser = bugs())]
        bug: Option<String>,
        /// Run every seed twice and compare traces.
        #[arg(long)]
        check_determinism: bool,
        /// The clients: `sdk`, the real SDK core (msp::client::ClientCore)
        /// under the simulator's workloads, or `sim`, the simulator's own
        /// client.
        #[arg(long, default_value = cmd::DEFAULT_CLIENT, value_parser = clients())]
        client: String,
        /// Logical commands per client for every seed, instead of each
        /// scenario's own workload: longer sessions (compaction, archived
        /// history, loads of large logs). A failure's printed replay and
        /// shrink commands carry it.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        commands: Option<u32>,
    },
    /// Reproduce one run bit for bit (a seed, or a run file).
    Replay {
        #[command(flatten)]
        which: Which,
        /// Print the whole trace, numbered, ids named (s1, c7...).
        #[arg(long)]
        trace: bool,
        /// With --trace: only the entries about this session or command
        /// (a name from the legend, a full id or its last 8 characters).
        #[arg(long, requires = "trace")]
        focus: Option<String>,
        /// Write the run as a run file.
        #[arg(long)]
        out: Option<String>,
        /// List the run's choices that are not the simplest (index, kind,
        /// options, value, time).
        #[arg(long)]
        choices: bool,
    },
    /// Minimise a failing run's choice sequence while it still violates
    /// the same property.
    Shrink {
        #[command(flatten)]
        which: Which,
        /// The property to keep violating (default: the run's first);
        /// with --reach, the property the entry's bug once violated.
        #[arg(long)]
        property: Option<String>,
        /// Instead of a violation, keep reaching these events
        /// (';'-separated signature steps) while every property holds: a
        /// fixed bug's triggering events, for a regression entry.
        #[arg(long)]
        reach: Option<String>,
        /// Replay at most this many candidates.
        #[arg(long, default_value_t = 4000)]
        max_runs: u64,
        /// Write the shrunk run file here.
        #[arg(long)]
        out: Option<String>,
        /// Add the shrunk run to the corpus (corpus/regressions); needs
        /// --postmortem.
        #[arg(long, requires = "postmortem")]
        save: bool,
        /// One line: what the saved entry pins.
        #[arg(long)]
        postmortem: Option<String>,
        /// The events the entry must reach, ';'-separated (default:
        /// derived from the shrunk run).
        #[arg(long)]
        signature: Option<String>,
        /// Where it came from (default: the command line).
        #[arg(long)]
        origin: Option<String>,
        /// The corpus directory.
        #[arg(long, default_value = msp_sim::corpus::DIR)]
        corpus: String,
    },
    /// Coverage-guided search: keep choice sequences that reached new
    /// coverage and mutate them; then plain random seeds for the same
    /// time, to compare.
    Fuzz {
        /// The scenario.
        #[arg(long, default_value = "mixed", value_parser = scenarios())]
        scenario: String,
        /// How long each of the two searches runs (e.g. 60s, 2m).
        #[arg(long = "for", default_value = "60s")]
        duration: String,
        /// Plant a bug in every host.
        #[arg(long, value_parser = bugs())]
        bug: Option<String>,
        /// First fresh seed (the random baseline starts there too) and
        /// seed of the mutations.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Write the first failing run found as a run file.
        #[arg(long)]
        out: Option<String>,
    },
    /// Bounded exhaustive check: every schedule of a small workload with
    /// at most K deviations from the simplest, every oracle on each.
    Check {
        /// The scenario (hosts, durability).
        #[arg(long, default_value = "mixed", value_parser = scenarios())]
        scenario: String,
        /// At most this many deviations (faults, other client choices)
        /// per schedule [default: 1; 2 with --bug].
        #[arg(long)]
        max_faults: Option<usize>,
        /// Plant a bug; the check stops at the first schedule that catches
        /// it, trying 0, 1, ... deviations in turn.
        #[arg(long, value_parser = bugs())]
        bug: Option<String>,
        /// Clients of the workload.
        #[arg(long, default_value_t = msp_sim::check::DEFAULT_WORKLOAD.clients_count)]
        clients: usize,
        /// Commands each client issues.
        #[arg(long, default_value_t = msp_sim::check::DEFAULT_WORKLOAD.commands_per_client)]
        commands: u32,
        /// Write the first failing schedule as a run file.
        #[arg(long)]
        out: Option<String>,
    },
    /// Find seeds whose runs reach a signature (';'-separated steps, as
    /// in a corpus entry), e.g. the triggering events of a fixed bug.
    Find {
        /// The scenario.
        #[arg(long, default_value = "mixed", value_parser = scenarios())]
        scenario: String,
        /// A seed range A..B (B exclusive).
        #[arg(long, default_value = "0..1000")]
        seeds: String,
        /// Plant a bug in every host.
        #[arg(long, value_parser = bugs())]
        bug: Option<String>,
        /// The signature to reach.
        #[arg(long)]
        reach: String,
        /// Stop after this many seeds found.
        #[arg(long, default_value_t = 5)]
        count: usize,
        /// The clients (`sdk` or `sim`, as for `run`).
        #[arg(long, default_value = cmd::DEFAULT_CLIENT, value_parser = clients())]
        client: String,
    },
    /// The regression corpus: list, replay or add entries.
    Corpus {
        #[command(subcommand)]
        cmd: CorpusCmd,
    },
    /// Measure the simulator: events/s per core, seeds/s, simulated/wall
    /// time and allocations per event for each scenario on one thread,
    /// then the cost per event of one scenario at N, 4N and 16N commands
    /// per client against the target "<= 1.5x (linear growth)". Reports;
    /// never fails on timing.
    Bench {
        /// Only this scenario (and the growth runs of it; default: every
        /// scenario, growth runs of mixed).
        #[arg(long, value_parser = scenarios())]
        scenario: Option<String>,
        /// The base N of the growth runs (N, 4N, 16N commands per client).
        #[arg(long, default_value_t = cmd::bench::DEFAULT_COMMANDS)]
        commands: u32,
        /// The seed range A..B of each scenario's run; the growth runs take
        /// its first seeds (see the module docs of sim/src/cmd/bench.rs).
        #[arg(long, default_value = cmd::bench::DEFAULT_SEEDS)]
        seeds: String,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sweep an application-level scenario: application instances (the
    /// real SDK core behind the request gate) against the real host core,
    /// with lost lines, host and instance crashes, lost provider
    /// responses.
    App {
        /// app-double-click, two-writers, effects or mixed-app.
        #[arg(long, default_value = "mixed-app", value_parser = PossibleValuesParser::new(msp_sim::app::AppScenario::ALL.map(|s| s.name())))]
        scenario: String,
        /// A seed range A..B (B exclusive).
        #[arg(long, default_value = "0..200")]
        seeds: String,
        /// Plant an application-level bug.
        #[arg(long, value_parser = PossibleValuesParser::new(msp_sim::app::AppBug::ALL.map(|b| b.name())))]
        bug: Option<String>,
    },
    /// Merge shard summaries written with `run --json` (refuses shards
    /// that overlap or repeat, and a missing shard: exit 2).
    Merge {
        /// Summary files.
        files: Vec<String>,
    },
}

#[derive(Subcommand)]
enum CorpusCmd {
    /// List the entries.
    List {
        /// The corpus directory.
        #[arg(long, default_value = msp_sim::corpus::DIR)]
        corpus: String,
    },
    /// Replay every entry (or the given files) and judge each.
    Replay {
        /// Entry files (default: every entry of the corpus).
        files: Vec<String>,
        /// The corpus directory.
        #[arg(long, default_value = msp_sim::corpus::DIR)]
        corpus: String,
    },
    /// Add a run file as an entry.
    Add {
        /// The run file.
        file: String,
        /// One line: what the entry pins.
        #[arg(long)]
        postmortem: String,
        /// The events the entry must reach, ';'-separated (default:
        /// derived from the run).
        #[arg(long)]
        signature: Option<String>,
        /// Where it came from.
        #[arg(long)]
        origin: Option<String>,
        /// The corpus directory.
        #[arg(long, default_value = msp_sim::corpus::DIR)]
        corpus: String,
    },
}

/// Where a saved entry came from, by default: this command line as
/// `msp-sim ...`, without what only says how to save it.
fn origin(args: impl Iterator<Item = String>) -> String {
    let mut out = vec!["msp-sim".to_string()];
    let mut skip_value = false;
    for a in args {
        if skip_value {
            skip_value = false;
            continue;
        }
        let flag = a.split('=').next().unwrap_or("");
        match flag {
            "--postmortem" | "--signature" | "--origin" | "--corpus" | "--out" => {
                skip_value = !a.contains('=');
            }
            "--save" => {}
            _ => out.push(a),
        }
    }
    out.join(" ")
}

fn main() -> ExitCode {
    // A closed stdout (`msp-sim ... | head`) ends the process quietly, as
    // for any Unix filter, instead of a panic on the next print.
    #[cfg(unix)]
    // SAFETY: restores the default action of one signal before any thread
    // starts; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let origin_line = origin(std::env::args().skip(1));
    match cli.cmd {
        Cmd::App {
            scenario,
            seeds,
            bug,
        } => cmd::app::main(&scenario, &seeds, bug.as_deref()),
        Cmd::Run {
            scenario,
            seeds,
            seed,
            jobs,
            shard,
            json,
            bug,
            check_determinism,
            client,
            commands,
        } => cmd::run::main(cmd::run::Args {
            scenario: cmd::scenario(&scenario),
            seeds,
            seed,
            jobs: jobs.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
            }),
            shard,
            json,
            bug: cmd::bug(&bug),
            check_determinism,
            client: cmd::client(&client),
            commands,
        }),
        Cmd::Replay {
            which,
            trace,
            focus,
            out,
            choices,
        } => cmd::replay::main(&which, trace, focus.as_deref(), out.as_deref(), choices),
        Cmd::Shrink {
            which,
            property,
            reach,
            max_runs,
            out,
            save,
            postmortem,
            signature,
            origin,
            corpus,
        } => cmd::shrink::main(cmd::shrink::Args {
            which,
            property,
            reach,
            max_runs,
            out,
            save: save.then_some(cmd::corpus::Save {
                postmortem: postmortem.unwrap_or_default(),
                signature,
                origin: origin.unwrap_or(origin_line),
                corpus,
            }),
        }),
        Cmd::Corpus { cmd: c } => match c {
            CorpusCmd::List { corpus } => cmd::corpus::list(&corpus),
            CorpusCmd::Replay { files, corpus } => cmd::corpus::replay(&files, &corpus),
            CorpusCmd::Add {
                file,
                postmortem,
                signature,
                origin,
                corpus,
            } => cmd::corpus::add(
                &file,
                cmd::corpus::Save {
                    postmortem,
                    signature,
                    origin: origin.unwrap_or(origin_line),
                    corpus,
                },
            ),
        },
        Cmd::Fuzz {
            scenario,
            duration,
            bug,
            seed,
            out,
        } => cmd::fuzz::main(
            cmd::scenario(&scenario),
            &duration,
            cmd::bug(&bug),
            seed,
            out.as_deref(),
        ),
        Cmd::Check {
            scenario,
            max_faults,
            bug,
            clients,
            commands,
            out,
        } => cmd::check::main(cmd::check::Args {
            scenario: cmd::scenario(&scenario),
            max_faults,
            bug: cmd::bug(&bug),
            clients,
            commands,
            out,
        }),
        Cmd::Merge { files } => cmd::merge::main(&files),
        Cmd::Bench {
            scenario,
            commands,
            seeds,
            json,
        } => cmd::bench::main(cmd::bench::Args {
            scenario: scenario.as_deref().map(cmd::scenario),
            commands,
            seeds,
            json,
        }),
        Cmd::Find {
            scenario,
            seeds,
            bug,
            reach,
            count,
            client,
        } => cmd::shrink::find(
            cmd::scenario(&scenario),
            &seeds,
            cmd::bug(&bug),
            cmd::client(&client),
            &reach,
            count,
        ),
    }
}
