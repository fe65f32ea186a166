//! The subcommands of `msp-sim`, one module each, and what they share:
//! naming a run (a seed or a run file) and exit codes.

pub mod app;
pub mod bench;
pub mod check;
pub mod corpus;
pub mod fuzz;
pub mod merge;
pub mod replay;
pub mod run;
pub mod shrink;

use std::process::ExitCode;

use msp::core::bugs::Bug;
use msp_sim::plan::Plan;
use msp_sim::run::{ClientKind, RunConfig};
use msp_sim::runfile::RunFile;
use msp_sim::workload::Scenario;

use crate::Which;

/// Exit code: a property was violated (or a corpus entry failed).
pub const EXIT_VIOLATION: u8 = 1;
/// Exit code: usage error or unreadable file.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: a coverage shortfall, nothing violated.
pub const EXIT_SHORTFALL: u8 = 3;

/// Prints `msg` and exits with the usage code.
pub fn usage(msg: &str) -> ExitCode {
    eprintln!("msp-sim: {msg}");
    ExitCode::from(EXIT_USAGE)
}

/// Parses a `--seeds A..B` range (B exclusive, A < B).
pub fn seed_range(text: &str) -> Option<std::ops::Range<u64>> {
    let (a, b) = text.split_once("..")?;
    let (a, b) = (a.parse::<u64>().ok()?, b.parse::<u64>().ok()?);
    (a < b).then_some(a..b)
}

/// A scenario name clap already validated.
pub fn scenario(name: &str) -> Scenario {
    Scenario::from_name(name).expect("clap checks scenario names")
}

/// The client of runs named by a seed when `--client` is not given.
pub const DEFAULT_CLIENT: &str = "sdk";

/// A client name clap already validated.
pub fn client(name: &str) -> ClientKind {
    ClientKind::from_name(name).expect("clap checks client names")
}

/// A bug name clap already validated.
pub fn bug(name: &Option<String>) -> Option<Bug> {
    name.as_deref()
        .map(|n| Bug::from_name(n).expect("clap checks bug names"))
}

/// A run to replay: its config, its plan, and the run file it came from.
pub struct Named {
    /// The config.
    pub cfg: RunConfig,
    /// The plan (seeded, or the file's choices).
    pub plan: Plan,
    /// The file, if the run came from one.
    pub file: Option<RunFile>,
}

/// Resolves `--seed`/`--file`.
pub fn named(w: &Which) -> Result<Named, String> {
    match (&w.file, w.seed) {
        (Some(f), None) => {
            let file = RunFile::load(f).map_err(|e| e.to_string())?;
            Ok(Named {
                cfg: file.config(),
                plan: file.plan(),
                file: Some(file),
            })
        }
        (None, Some(seed)) => Ok(Named {
            cfg: RunConfig {
                scenario: scenario(&w.scenario),
                seed,
                bug: bug(&w.bug),
                client: client(&w.client),
            },
            plan: msp_sim::sweep::commands_plan(scenario(&w.scenario), w.commands),
            file: None,
        }),
        _ => Err("name a run with --seed N (and --scenario, --bug) or --file F".into()),
    }
}
