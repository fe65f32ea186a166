//! `msp conformance`: replays recorded scenarios against a host on a
//! deterministic clock and id source.
//!
//! - `msp conformance PATH...`: runs every scenario file (a directory
//!   stands for its `*.ndjson` files, in name order) and compares the
//!   host's frames with the recorded ones ([`scenario`], [`compare`]).
//! - `msp conformance record PATH...` (or `--record PATH...`): runs each
//!   scenario's client and control lines and writes the file back with the
//!   frames the host actually sent. This is how scenarios are authored;
//!   the result must then be read against PROTOCOL.md.
//! - `msp conformance replay|serve-fixture ...`: public transcripts
//!   ([`transcript`]).
//!
//! Exit codes: 0 every scenario passed (or was recorded); 1 a mismatch;
//! 2 usage: bad arguments, or a scenario file that cannot be read or is
//! ill-formed (the report names the line and why); 3 infrastructure: the
//! host could not be driven (it panicked). With several files the most
//! severe outcome wins, in the order 2, 3, 1, 0.

pub mod compare;
pub mod scenario;
pub mod schema;
pub mod transcript;

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use scenario::{InfraError, RunReport, Scenario, ScenarioError};

/// Every scenario passed.
pub const EXIT_PASS: i32 = 0;
/// A scenario's frames differ from the host's.
pub const EXIT_MISMATCH: i32 = 1;
/// Bad arguments or an unusable scenario file.
pub const EXIT_USAGE: i32 = 2;
/// The host could not be driven.
pub const EXIT_INFRA: i32 = 3;

const USAGE: &str = "usage: msp conformance [--record] PATH...\n       msp conformance record PATH...\n       msp conformance replay|serve-fixture ...\nPATH is a scenario file (*.ndjson) or a directory of them.";

/// The outcome of one scenario file.
#[derive(Debug, Clone)]
pub enum FileOutcome {
    /// The host sent exactly the expected frames.
    Passed(RunReport),
    /// Some frame differs, is missing or is extra.
    Failed(RunReport),
    /// The file could not be read or is ill-formed.
    Unusable(ScenarioError),
    /// The host could not be driven.
    Infra(InfraError),
}

impl FileOutcome {
    /// The exit code this outcome alone calls for.
    pub fn exit_code(&self) -> i32 {
        match self {
            FileOutcome::Passed(_) => EXIT_PASS,
            FileOutcome::Failed(_) => EXIT_MISMATCH,
            FileOutcome::Unusable(_) => EXIT_USAGE,
            FileOutcome::Infra(_) => EXIT_INFRA,
        }
    }
}

/// Combines exit codes: the most severe wins (2, then 3, then 1, then 0).
pub fn worst_exit(a: i32, b: i32) -> i32 {
    let rank = |c: i32| match c {
        EXIT_USAGE => 3,
        EXIT_INFRA => 2,
        EXIT_MISMATCH => 1,
        _ => 0,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// One file's outcome, printable as the CLI prints it.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// The scenario file.
    pub path: PathBuf,
    /// What happened.
    pub outcome: FileOutcome,
}

impl fmt::Display for FileReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.path.display();
        match &self.outcome {
            FileOutcome::Passed(r) => write!(f, "PASS {p} ({} frames)", r.frames_compared),
            FileOutcome::Failed(r) => {
                write!(f, "FAIL {p}: {} mismatch(es)", r.mismatches.len())?;
                for m in &r.mismatches {
                    write!(f, "\n  {p}:{m}")?;
                }
                Ok(())
            }
            FileOutcome::Unusable(e) => write!(f, "ERROR {p}: unusable scenario: {e}"),
            FileOutcome::Infra(e) => write!(f, "ERROR {p}: {e}"),
        }
    }
}

/// Reads and parses a scenario file.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        line: 0,
        reason: format!("cannot read: {e}"),
    })?;
    Scenario::parse(&text)
}

/// Runs a parsed scenario and classifies the result.
pub fn check_scenario(s: &Scenario) -> FileOutcome {
    match scenario::run(s) {
        Ok(r) if r.passed() => FileOutcome::Passed(r),
        Ok(r) => FileOutcome::Failed(r),
        Err(e) => FileOutcome::Infra(e),
    }
}

/// Runs one scenario file.
pub fn check_file(path: &Path) -> FileReport {
    let outcome = match load(path) {
        Ok(s) => check_scenario(&s),
        Err(e) => FileOutcome::Unusable(e),
    };
    FileReport {
        path: path.to_path_buf(),
        outcome,
    }
}

/// Expands the arguments: files as given, directories to their `*.ndjson`
/// files in name order. A path that does not exist is an error.
pub fn expand_paths(args: &[String]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for a in args {
        let p = PathBuf::from(a);
        if p.is_dir() {
            let rd = std::fs::read_dir(&p).map_err(|e| format!("{a}: cannot list: {e}"))?;
            let mut files: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "ndjson"))
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(format!("{a}: no *.ndjson files"));
            }
            out.extend(files);
        } else if p.exists() {
            out.push(p);
        } else {
            return Err(format!("{a}: no such file or directory"));
        }
    }
    Ok(out)
}

/// Records one file in place; returns the outcome for the report.
pub fn record_file(path: &Path) -> (i32, String) {
    let s = match load(path) {
        Ok(s) => s,
        Err(e) => {
            return (
                EXIT_USAGE,
                format!("ERROR {}: unusable scenario: {e}", path.display()),
            )
        }
    };
    let text = match scenario::record(&s) {
        Ok(t) => t,
        Err(e) => return (EXIT_INFRA, format!("ERROR {}: {e}", path.display())),
    };
    let frames = text
        .lines()
        .filter(|l| l.starts_with("{\"dir\":\"server\""))
        .count();
    match std::fs::write(path, text) {
        Ok(()) => (
            EXIT_PASS,
            format!("RECORDED {} ({frames} server frames)", path.display()),
        ),
        Err(e) => (
            EXIT_INFRA,
            format!("ERROR {}: cannot write: {e}", path.display()),
        ),
    }
}

/// Entry point of `msp conformance ARGS...`; returns the exit code.
pub fn main(args: Vec<String>) -> i32 {
    match args.first().map(String::as_str) {
        Some("replay") | Some("serve-fixture") => return transcript::main(args),
        Some("-h") | Some("--help") => {
            println!("{USAGE}");
            return EXIT_PASS;
        }
        _ => {}
    }
    let mut record = false;
    let mut paths = Vec::new();
    for (i, a) in args.iter().enumerate() {
        match a.as_str() {
            "record" if i == 0 => record = true,
            "--record" => record = true,
            "--" => {}
            flag if flag.starts_with('-') => {
                eprintln!("msp conformance: unknown option {flag}\n{USAGE}");
                return EXIT_USAGE;
            }
            p => paths.push(p.to_string()),
        }
    }
    if paths.is_empty() {
        eprintln!("msp conformance: no scenario given\n{USAGE}");
        return EXIT_USAGE;
    }
    run_files(&paths, record)
}

/// Checks (or, with `record`, records) the scenario files and directories
/// `paths`, printing one report per file and a summary; returns the exit
/// code (see the module docs).
pub fn run_files(paths: &[String], record: bool) -> i32 {
    if paths.is_empty() {
        eprintln!("msp conformance: no scenario given\n{USAGE}");
        return EXIT_USAGE;
    }
    let files = match expand_paths(paths) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("msp conformance: {e}");
            return EXIT_USAGE;
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut code = EXIT_PASS;
    let (mut passed, mut total) = (0usize, 0usize);
    for f in &files {
        total += 1;
        let (c, text) = if record {
            record_file(f)
        } else {
            let r = check_file(f);
            (r.outcome.exit_code(), r.to_string())
        };
        if c == EXIT_PASS {
            passed += 1;
        }
        let _ = writeln!(out, "{text}");
        code = worst_exit(code, c);
    }
    let verb = if record { "recorded" } else { "passed" };
    let _ = writeln!(out, "{passed}/{total} scenarios {verb}");
    code
}
