//! The regression corpus: `corpus/regressions/<property>-<short-hash>.json`,
//! one shrunk run per file, with where it came from, the property it
//! violated, a one-line postmortem and its signature (the events its
//! replay must still reach). `cargo test` replays every entry:
//!
//! - an entry made with a planted bug must still be caught (violate its
//!   property);
//! - an entry without one is a real bug, fixed: it must hold every
//!   property on today's runtime;
//! - an entry whose replay no longer reaches its signature has *drifted*
//!   (the simulator reads its choices otherwise now): it fails, it never
//!   passes silently;
//! - a file that does not parse fails with its name.
//!
//! ```json
//! {"format": "msp-sim corpus entry", "version": 1,
//!  "property": "durable-dedupe", "origin": "msp-sim shrink ...",
//!  "postmortem": "one line", "signature": ["crash", "restart", "replay turn/start"],
//!  "run": { ...a run file... }}
//! ```
//!
//! Fault model: none; the corpus only replays.

use std::fmt;

use serde_json::{json, Value};

use crate::run::RunResult;
use crate::runfile::{read_json, write_json, RunFile, RunFileError};
use crate::signature::{self, Step};

/// The `format` member of every entry.
pub const FORMAT: &str = "msp-sim corpus entry";
/// The version this build writes and reads.
pub const VERSION: u64 = 1;
/// The corpus directory, relative to the repository root.
pub const DIR: &str = "corpus/regressions";

/// One corpus entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The property the run violated when it was saved.
    pub property: String,
    /// Where it came from (a command line, a seed, a commit).
    pub origin: String,
    /// What it pins, in one line.
    pub postmortem: String,
    /// The events its replay must reach, in order.
    pub signature: Vec<Step>,
    /// The run.
    pub run: RunFile,
}

/// What replaying an entry showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A planted bug's entry: still caught by its property.
    Caught,
    /// A real bug's entry: every property holds on today's runtime.
    Holds,
    /// The replay no longer reaches its signature.
    Drifted {
        /// The first step not reached.
        step: String,
        /// The trace entry after which it was looked for.
        after: Option<usize>,
    },
    /// A planted bug's entry that is not caught any more.
    NotCaught {
        /// What the run violated instead.
        violated: Vec<String>,
    },
    /// A real bug's entry that fails again.
    Regressed {
        /// The violations, one line each.
        violations: Vec<String>,
    },
}

impl Verdict {
    /// Whether the entry passes.
    pub fn passed(&self) -> bool {
        matches!(self, Verdict::Caught | Verdict::Holds)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Caught => write!(f, "caught (the planted bug is still found)"),
            Verdict::Holds => write!(f, "holds (the bug stays fixed)"),
            Verdict::Drifted { step, after } => write!(
                f,
                "DRIFTED: the replay no longer reaches signature step {step:?}{} (the simulator reads these choices otherwise now; shrink the origin again)",
                after.map(|i| format!(" after #{i}")).unwrap_or_default()
            ),
            Verdict::NotCaught { violated } => write!(
                f,
                "NOT CAUGHT: the planted bug's run violates {} now",
                if violated.is_empty() { "nothing".to_string() } else { violated.join(", ") }
            ),
            Verdict::Regressed { violations } => {
                write!(f, "REGRESSED: {}", violations.join("; "))
            }
        }
    }
}

impl Entry {
    /// The JSON form.
    pub fn to_json(&self) -> Value {
        json!({
            "format": FORMAT,
            "version": VERSION,
            "property": self.property,
            "origin": self.origin,
            "postmortem": self.postmortem,
            "signature": self.signature.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "run": self.run.to_json(),
        })
    }

    /// Parses [`Entry::to_json`]'s form; says what is wrong.
    pub fn from_json(v: &Value) -> Result<Entry, String> {
        if v["format"].as_str() != Some(FORMAT) {
            return Err(format!("\"format\" is not {FORMAT:?}"));
        }
        match v["version"].as_u64() {
            Some(VERSION) => {}
            Some(n) => return Err(format!("version {n}; this build reads version {VERSION}")),
            None => return Err("no \"version\"".into()),
        }
        let text = |k: &str| -> Result<String, String> {
            v[k].as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("no string {k:?}"))
        };
        let postmortem = text("postmortem")?;
        if postmortem.trim().is_empty() || postmortem.contains('\n') {
            return Err("\"postmortem\" must be one non-empty line".into());
        }
        let signature = v["signature"]
            .as_array()
            .ok_or("no \"signature\" list")?
            .iter()
            .map(|s| {
                s.as_str()
                    .ok_or_else(|| "a signature step is not a string".to_string())
                    .and_then(Step::parse)
            })
            .collect::<Result<Vec<Step>, String>>()?;
        if signature.is_empty() {
            return Err("the signature is empty (it must name what the run reaches)".into());
        }
        let run = RunFile::from_json(&v["run"]).map_err(|e| format!("\"run\": {e}"))?;
        let property = text("property")?;
        if run.property.as_deref() != Some(property.as_str()) {
            return Err(format!(
                "\"property\" {property:?} is not the run's {:?}",
                run.property
            ));
        }
        Ok(Entry {
            property,
            origin: text("origin")?,
            postmortem,
            signature,
            run,
        })
    }

    /// Reads an entry; errors name the file.
    pub fn load(path: &str) -> Result<Entry, RunFileError> {
        read_json(path, Entry::from_json)
    }

    /// Writes it.
    pub fn save(&self, path: &str) -> Result<(), RunFileError> {
        write_json(path, &self.to_json())
    }

    /// Its file name: `<property>-<first 8 hex digits of its trace hash>.json`.
    pub fn file_name(&self) -> String {
        format!(
            "{}-{}.json",
            self.property,
            &format!("{:016x}", self.run.trace_hash)[..8]
        )
    }

    /// Replays it and judges the replay.
    pub fn check(&self) -> (Verdict, RunResult) {
        let r = self.run.replay();
        (self.judge(&r), r)
    }

    /// Judges a replay of it.
    pub fn judge(&self, r: &RunResult) -> Verdict {
        if let Err((k, after)) = signature::reach(&r.trace, &self.signature) {
            return Verdict::Drifted {
                step: self.signature[k].to_string(),
                after,
            };
        }
        if self.run.bug.is_some() {
            if r.violations.iter().any(|v| v.property == self.property) {
                Verdict::Caught
            } else {
                let mut violated: Vec<String> = r
                    .violations
                    .iter()
                    .map(|v| v.property.to_string())
                    .collect();
                violated.dedup();
                Verdict::NotCaught { violated }
            }
        } else if r.violations.is_empty() {
            Verdict::Holds
        } else {
            Verdict::Regressed {
                violations: r
                    .violations
                    .iter()
                    .map(|v| format!("{}: {}", v.property, v.detail))
                    .collect(),
            }
        }
    }
}

/// The entry files of a corpus directory, sorted by name.
pub fn files(dir: &str) -> Result<Vec<String>, RunFileError> {
    let rd = std::fs::read_dir(dir).map_err(|e| RunFileError::Io {
        path: dir.to_string(),
        error: e.to_string(),
    })?;
    let mut out: Vec<String> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Scenario;

    fn entry() -> Entry {
        Entry {
            property: "durable-dedupe".into(),
            origin: "a test".into(),
            postmortem: "pins nothing".into(),
            signature: vec![Step::parse("restart").unwrap()],
            run: RunFile {
                scenario: Scenario::Mixed,
                bug: None,
                client: Default::default(),
                seed: None,
                workload: None,
                mix: None,
                draws: Default::default(),
                choices: vec![1, 0, 2],
                property: Some("durable-dedupe".into()),
                trace_hash: 0xabcdef01_23456789,
                trace_hash_version: crate::trace::TRACE_HASH_VERSION,
                steps: 3,
                events_count: 10,
            },
        }
    }

    #[test]
    fn entries_round_trip_and_are_named_by_property_and_hash() {
        let e = entry();
        assert_eq!(Entry::from_json(&e.to_json()), Ok(e.clone()));
        assert_eq!(e.file_name(), "durable-dedupe-abcdef01.json");
    }

    #[test]
    fn a_malformed_entry_says_what_is_wrong() {
        let mut v = entry().to_json();
        v["signature"] = json!([]);
        assert!(Entry::from_json(&v).unwrap_err().contains("empty"));
        let mut v = entry().to_json();
        v["signature"] = json!(["explode"]);
        assert!(Entry::from_json(&v).unwrap_err().contains("explode"));
        let mut v = entry().to_json();
        v["postmortem"] = json!("two\nlines");
        assert!(Entry::from_json(&v).unwrap_err().contains("one"));
        let mut v = entry().to_json();
        v["property"] = json!("liveness");
        assert!(Entry::from_json(&v).unwrap_err().contains("liveness"));
        let mut v = entry().to_json();
        v["run"]["choices"] = json!("x");
        assert!(Entry::from_json(&v).unwrap_err().starts_with("\"run\""));
    }
}
