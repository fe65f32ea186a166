//! `msp-sim corpus`: list, replay and add regression corpus entries.

use std::process::ExitCode;

use msp_sim::corpus::{self, Entry};
use msp_sim::readable::{self, Legend};
use msp_sim::run::RunResult;
use msp_sim::runfile::RunFile;
use msp_sim::signature::{self, Step};
use msp_sim::tally::Tally;

use super::{usage, EXIT_VIOLATION};

/// What `shrink --save` and `corpus add` need to make an entry.
pub struct Save {
    /// One line: what the entry pins.
    pub postmortem: String,
    /// The signature, ';'-separated (default: derived).
    pub signature: Option<String>,
    /// Where the entry came from.
    pub origin: String,
    /// The corpus directory.
    pub corpus: String,
}

/// Makes an entry of `file` (whose replay is `r`) and writes it into the
/// corpus; returns its path.
pub fn save_entry(file: RunFile, r: &RunResult, save: &Save) -> Result<String, String> {
    let Some(property) = file.property.clone() else {
        return Err("the run violates nothing: a corpus entry keeps a failure".into());
    };
    let sig: Vec<Step> = match &save.signature {
        Some(s) => s
            .split(';')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(Step::parse)
            .collect::<Result<_, _>>()?,
        None => signature::derive(&r.trace),
    };
    if sig.is_empty() {
        return Err(
            "no signature: give --signature (the run has no fault or crash to derive one from)"
                .into(),
        );
    }
    if let Err((k, _)) = signature::reach(&r.trace, &sig) {
        return Err(format!(
            "the run does not reach signature step {:?}",
            sig[k].to_string()
        ));
    }
    let entry = Entry {
        property,
        origin: save.origin.clone(),
        postmortem: save.postmortem.trim().to_string(),
        signature: sig,
        run: file,
    };
    let e = Entry::from_json(&entry.to_json())?;
    std::fs::create_dir_all(&save.corpus).map_err(|x| format!("{}: {x}", save.corpus))?;
    let path = format!("{}/{}", save.corpus, e.file_name());
    if std::path::Path::new(&path).exists() {
        return Err(format!("{path} exists already"));
    }
    e.save(&path).map_err(|x| x.to_string())?;
    Ok(path)
}

/// `corpus add`: a run file as a new entry.
pub fn add(path: &str, save: Save) -> ExitCode {
    let file = match RunFile::load(path) {
        Ok(f) => f,
        Err(e) => return usage(&e.to_string()),
    };
    let r = file.replay();
    if file.hash_comparable() && r.trace.hash() != file.trace_hash {
        eprintln!(
            "msp-sim: note: {path} replays with trace hash {:016x}, not its {:016x}",
            r.trace.hash(),
            file.trace_hash
        );
    }
    match save_entry(file, &r, &save) {
        Ok(p) => {
            println!("added {p}");
            ExitCode::SUCCESS
        }
        Err(e) => usage(&e),
    }
}

fn entries(files: &[String], dir: &str) -> Result<Vec<String>, String> {
    if !files.is_empty() {
        return Ok(files.to_vec());
    }
    corpus::files(dir).map_err(|e| e.to_string())
}

/// `corpus list`: every entry, one paragraph each.
pub fn list(dir: &str) -> ExitCode {
    let files = match entries(&[], dir) {
        Ok(f) => f,
        Err(e) => return usage(&e),
    };
    let mut bad = false;
    for f in files {
        match Entry::load(&f) {
            Ok(e) => println!(
                "{f}\n  {} {}, {} steps, {} choices: {}\n  signature: {}",
                e.property,
                e.run
                    .bug
                    .map_or("(a real bug, fixed)".to_string(), |b| format!(
                        "(planted bug {})",
                        b.name()
                    )),
                e.run.steps,
                e.run.choices.len(),
                e.postmortem,
                e.signature
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Err(e) => {
                bad = true;
                println!("{e}");
            }
        }
    }
    if bad {
        ExitCode::from(super::EXIT_USAGE)
    } else {
        ExitCode::SUCCESS
    }
}

/// `corpus replay`: every entry (or the given ones) replayed and judged.
pub fn replay(files: &[String], dir: &str) -> ExitCode {
    let files = match entries(files, dir) {
        Ok(f) => f,
        Err(e) => return usage(&e),
    };
    let mut failed = 0;
    for f in &files {
        let e = match Entry::load(f) {
            Ok(e) => e,
            Err(x) => {
                failed += 1;
                println!("FAILED {x}");
                continue;
            }
        };
        let (v, r) = e.check();
        let same = if !e.run.hash_comparable() {
            "hash of an older version: signature compared only"
        } else if r.trace.hash() == e.run.trace_hash {
            "same trace"
        } else {
            "trace changed"
        };
        println!(
            "{} {f}: {v} [{}; {same}]",
            if v.passed() { "ok" } else { "FAILED" },
            Tally::of(&r)
        );
        if !v.passed() {
            failed += 1;
            let legend = Legend::of(&r.trace);
            for l in readable::timeline(&r.trace, &legend, &r.violations) {
                println!("    {l}");
            }
        }
    }
    println!("{} entries, {} failed", files.len(), failed);
    if failed > 0 {
        ExitCode::from(EXIT_VIOLATION)
    } else {
        ExitCode::SUCCESS
    }
}
