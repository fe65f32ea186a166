//! The run file: one run as data (JSON, versioned), enough to replay it
//! bit for bit without its seed: the scenario, the planted bug, the seed
//! it came from (if any), a fixed workload or fault mix (if the run had
//! one), the compact choice sequence, the property it violated, and the
//! trace hash a replay must give.
//!
//! ```json
//! {"format": "msp-sim run", "version": 1, "scenario": "crash-storm",
//!  "bug": "torn-tail-accepted", "seed": 12, "workload": null,
//!  "faultMix": null, "drawsVersion": 2, "choices": "1 0*3 2 0*40 1",
//!  "choicesCount": 48,
//!  "property": "log-integrity", "traceHash": "5f0c...",
//!  "traceHashVersion": 2, "steps": 7, "events": 812}
//! ```
//!
//! `traceHashVersion` names the algorithm of `traceHash`
//! ([`crate::trace::TRACE_HASH_VERSION`]; a file without it is of version
//! 1): a hash of another version than this build's cannot be compared.
//!
//! `drawsVersion` names the simulator's draw order the choices were
//! recorded with ([`crate::plan::Draws`]; a file without it is of version
//! 1, before sync stalls): a replay draws what the recording drew, so a
//! kept run still means the run it was.
//!
//! `steps` and `events` are informative; `choices` (see
//! [`crate::choice::encode`]) is what the replay reads.
//!
//! Fault model: none; a run file only records.

use std::fmt;

use msp::core::bugs::Bug;
use serde_json::{json, Map, Value};

use crate::choice;
use crate::faults::FaultMix;
use crate::plan::{Draws, Plan, Workload};
use crate::run::{run_with, ClientKind, RunConfig, RunResult};
use crate::tally::Tally;
use crate::trace::TRACE_HASH_VERSION;
use crate::workload::Scenario;

/// The `format` member of every run file.
pub const FORMAT: &str = "msp-sim run";
/// The version this build writes and reads.
pub const VERSION: u64 = 1;

/// A run, as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFile {
    /// The scenario.
    pub scenario: Scenario,
    /// The planted bug, if any.
    pub bug: Option<Bug>,
    /// Which client drove the hosts (the `client` member; absent means
    /// the simulator's own client, so older files replay as they did).
    pub client: ClientKind,
    /// The seed the run was first drawn from, if it was (informative: the
    /// replay reads only the choices).
    pub seed: Option<u64>,
    /// A fixed workload instead of the scenario's.
    pub workload: Option<Workload>,
    /// A fixed fault mix instead of one drawn from the choices.
    pub mix: Option<FaultMix>,
    /// The draw order the choices were recorded with (`drawsVersion`;
    /// absent: [`Draws::BeforeStalls`], the order of every file before it).
    pub draws: Draws,
    /// The choice sequence (trailing simplest choices left out).
    pub choices: Vec<u64>,
    /// The property the run violated, if it did.
    pub property: Option<String>,
    /// The trace hash of the run.
    pub trace_hash: u64,
    /// The algorithm version of `trace_hash` (1 when the file has none).
    pub trace_hash_version: u64,
    /// Its steps (informative).
    pub steps: u64,
    /// Its world events (informative).
    pub events_count: u64,
}

/// A run file that could not be read: the file and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunFileError {
    /// The file could not be read or written.
    Io {
        /// The file.
        path: String,
        /// The OS error.
        error: String,
    },
    /// The file is not a run file this build reads.
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        what: String,
    },
}

impl fmt::Display for RunFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunFileError::Io { path, error } => write!(f, "{path}: {error}"),
            RunFileError::Invalid { path, what } => write!(f, "{path}: {what}"),
        }
    }
}

impl std::error::Error for RunFileError {}

impl RunFile {
    /// The run file of `r`, a run of `cfg` under `plan`; `seed` says
    /// whether it was drawn from the config's seed.
    pub fn of(
        cfg: &RunConfig,
        plan: &Plan,
        r: &RunResult,
        seed: Option<u64>,
        property: Option<&str>,
    ) -> RunFile {
        let t = Tally::of(r);
        RunFile {
            scenario: cfg.scenario,
            bug: cfg.bug,
            client: cfg.client,
            seed,
            workload: plan.workload,
            mix: plan.mix.clone(),
            draws: plan.draws,
            choices: choice::values(&r.choices),
            property: property.map(str::to_string),
            trace_hash: r.trace.hash(),
            trace_hash_version: TRACE_HASH_VERSION,
            steps: t.steps(),
            events_count: r.events_count,
        }
    }

    /// Whether its trace hash is of this build's algorithm
    /// ([`TRACE_HASH_VERSION`]), so a replay's hash can be compared to it.
    pub fn hash_comparable(&self) -> bool {
        self.trace_hash_version == TRACE_HASH_VERSION
    }

    /// The config to replay it with.
    pub fn config(&self) -> RunConfig {
        RunConfig {
            scenario: self.scenario,
            seed: self.seed.unwrap_or(0),
            bug: self.bug,
            client: self.client,
        }
    }

    /// The plan to replay it with (its choices, workload and mix).
    pub fn plan(&self) -> Plan {
        Plan {
            choices: Some(self.choices.clone()),
            workload: self.workload,
            mix: self.mix.clone(),
            then_seed: None,
            draws: self.draws,
        }
    }

    /// Replays it.
    pub fn replay(&self) -> RunResult {
        run_with(&self.config(), &self.plan(), None)
    }

    /// The JSON form (`client` only when it is not the default, so a
    /// legacy run's file is what it always was; `observerPages: true` for
    /// [`ClientKind::Sdk`], whose files before it are [`ClientKind::SdkV1`]'s).
    pub fn to_json(&self) -> Value {
        let mut v = self.to_json_legacy();
        if self.client != ClientKind::Sim {
            v["client"] = json!(self.client.name());
        }
        if self.client == ClientKind::Sdk {
            v["observerPages"] = json!(true);
        }
        v
    }

    fn to_json_legacy(&self) -> Value {
        json!({
            "format": FORMAT,
            "version": VERSION,
            "scenario": self.scenario.name(),
            "bug": self.bug.map(|b| b.name()),
            "seed": self.seed,
            "workload": self.workload.map(|w| json!({
                "clients": w.clients_count,
                "commandsPerClient": w.commands_per_client,
                "observer": w.observer,
            })),
            "faultMix": self.mix.as_ref().map(mix_to_json),
            "drawsVersion": self.draws.version(),
            "choices": choice::encode(&self.choices),
            "choicesCount": self.choices.len(),
            "property": self.property,
            "traceHash": format!("{:016x}", self.trace_hash),
            "traceHashVersion": self.trace_hash_version,
            "steps": self.steps,
            "events": self.events_count,
        })
    }

    /// Parses [`RunFile::to_json`]'s form; says what is wrong.
    pub fn from_json(v: &Value) -> Result<RunFile, String> {
        let o = v.as_object().ok_or("not a JSON object")?;
        if o.get("format").and_then(Value::as_str) != Some(FORMAT) {
            return Err(format!("\"format\" is not {FORMAT:?}"));
        }
        match o.get("version").and_then(Value::as_u64) {
            Some(VERSION) => {}
            Some(n) => return Err(format!("version {n}; this build reads version {VERSION}")),
            None => return Err("no \"version\"".into()),
        }
        let scenario = str_member(o, "scenario")?;
        let scenario = Scenario::from_name(scenario)
            .ok_or_else(|| format!("unknown scenario {scenario:?}"))?;
        let bug = match o.get("bug") {
            None | Some(Value::Null) => None,
            Some(b) => {
                let n = b.as_str().ok_or("\"bug\" is not a string")?;
                Some(Bug::from_name(n).ok_or_else(|| format!("unknown bug {n:?}"))?)
            }
        };
        let client = match o.get("client") {
            None | Some(Value::Null) => ClientKind::Sim,
            Some(c) => {
                let n = c.as_str().ok_or("\"client\" is not a string")?;
                match ClientKind::from_name(n).ok_or_else(|| format!("unknown client {n:?}"))? {
                    // Recorded before observers paged.
                    ClientKind::Sdk if o.get("observerPages") != Some(&Value::Bool(true)) => {
                        ClientKind::SdkV1
                    }
                    k => k,
                }
            }
        };
        let seed = opt_u64(o, "seed")?;
        let workload = match o.get("workload") {
            None | Some(Value::Null) => None,
            Some(Value::Object(w)) => Some(Workload {
                clients_count: u64_member(w, "clients")? as usize,
                commands_per_client: u32::try_from(u64_member(w, "commandsPerClient")?)
                    .map_err(|_| "\"commandsPerClient\" is too large")?,
                observer: w
                    .get("observer")
                    .and_then(Value::as_bool)
                    .ok_or("\"workload\" has no boolean \"observer\"")?,
            }),
            Some(_) => return Err("\"workload\" is not an object".into()),
        };
        let mix = match o.get("faultMix") {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(mix_from_json(m)?),
            Some(_) => return Err("\"faultMix\" is not an object".into()),
        };
        let draws = match opt_u64(o, "drawsVersion")? {
            None => Draws::BeforeStalls,
            Some(n) => Draws::from_version(n).ok_or_else(|| {
                format!(
                    "\"drawsVersion\" {n}; this build reads 1 to {}",
                    Draws::CURRENT.version()
                )
            })?,
        };
        let choices =
            choice::decode(str_member(o, "choices")?).map_err(|e| format!("\"choices\": {e}"))?;
        if let Some(n) = opt_u64(o, "choicesCount")? {
            if n != choices.len() as u64 {
                return Err(format!(
                    "\"choicesCount\" says {n} but \"choices\" holds {}",
                    choices.len()
                ));
            }
        }
        let property = match o.get("property") {
            None | Some(Value::Null) => None,
            Some(p) => Some(
                p.as_str()
                    .ok_or("\"property\" is not a string")?
                    .to_string(),
            ),
        };
        let hash = str_member(o, "traceHash")?;
        let trace_hash = u64::from_str_radix(hash, 16)
            .map_err(|_| format!("\"traceHash\" {hash:?} is not 16 hex digits"))?;
        let trace_hash_version = opt_u64(o, "traceHashVersion")?.unwrap_or(1);
        Ok(RunFile {
            scenario,
            bug,
            client,
            seed,
            workload,
            mix,
            draws,
            choices,
            property,
            trace_hash,
            trace_hash_version,
            steps: opt_u64(o, "steps")?.unwrap_or(0),
            events_count: opt_u64(o, "events")?.unwrap_or(0),
        })
    }

    /// Reads a run file.
    pub fn load(path: &str) -> Result<RunFile, RunFileError> {
        read_json(path, RunFile::from_json)
    }

    /// Writes it (pretty JSON, one trailing newline).
    pub fn save(&self, path: &str) -> Result<(), RunFileError> {
        write_json(path, &self.to_json())
    }
}

/// Reads the JSON file at `path` and parses it with `parse`; every error
/// names the file.
pub fn read_json<T>(
    path: &str,
    parse: impl FnOnce(&Value) -> Result<T, String>,
) -> Result<T, RunFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| RunFileError::Io {
        path: path.to_string(),
        error: e.to_string(),
    })?;
    let invalid = |what: String| RunFileError::Invalid {
        path: path.to_string(),
        what,
    };
    let v: Value = serde_json::from_str(&text).map_err(|e| invalid(format!("not JSON: {e}")))?;
    parse(&v).map_err(invalid)
}

/// Writes `v` as pretty JSON with a trailing newline.
pub fn write_json(path: &str, v: &Value) -> Result<(), RunFileError> {
    let mut text = serde_json::to_string_pretty(v).expect("a JSON value serialises");
    text.push('\n');
    std::fs::write(path, text).map_err(|e| RunFileError::Io {
        path: path.to_string(),
        error: e.to_string(),
    })
}

/// The fault mix's members, in the order [`FaultMix::describe`] prints.
fn mix_fields(m: &mut FaultMix) -> [(&'static str, &mut u64); 22] {
    [
        ("drop", &mut m.drop_permille),
        ("dup", &mut m.dup_permille),
        ("delay", &mut m.delay_permille),
        ("delayMaxMs", &mut m.delay_max_ms),
        ("reorder", &mut m.reorder_permille),
        ("cut", &mut m.cut_permille),
        ("reconnect", &mut m.reconnect_permille),
        ("tear", &mut m.tear_permille),
        ("fsyncFail", &mut m.fsync_fail_permille),
        ("stall", &mut m.stall_permille),
        ("shutdown", &mut m.shutdown_permille),
        ("diskFull", &mut m.disk_full_permille),
        ("crash", &mut m.crash_step_permille),
        ("crashPoint", &mut m.crash_point_permille),
        ("power", &mut m.power_permille),
        ("effectLost", &mut m.effect_lost_permille),
        ("rot", &mut m.rot_permille),
        ("readFail", &mut m.read_fail_permille),
        ("soloSync", &mut m.solo_sync_permille),
        ("slowIo", &mut m.slow_io_permille),
        ("lateTimer", &mut m.late_timer_permille),
        ("compactRecords", &mut m.compact_records),
    ]
}

/// A fault mix as JSON (permille per fault, `delayMaxMs`).
pub fn mix_to_json(m: &FaultMix) -> Value {
    let mut copy = m.clone();
    let o: Map<String, Value> = mix_fields(&mut copy)
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!(*v)))
        .collect();
    Value::Object(o)
}

/// Parses [`mix_to_json`]'s form (every member required but `stall`,
/// `shutdown`, `readFail`, `soloSync`, `slowIo` and `lateTimer`, which mixes
/// written before them do not have: 0).
pub fn mix_from_json(o: &Map<String, Value>) -> Result<FaultMix, String> {
    let mut m = FaultMix::default();
    for (k, v) in mix_fields(&mut m) {
        if matches!(
            k,
            "stall" | "shutdown" | "readFail" | "soloSync" | "slowIo" | "lateTimer"
        ) && !o.contains_key(k)
        {
            continue;
        }
        *v = u64_member(o, k).map_err(|e| format!("\"faultMix\": {e}"))?;
    }
    Ok(m)
}

fn str_member<'a>(o: &'a Map<String, Value>, k: &str) -> Result<&'a str, String> {
    o.get(k)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("no string {k:?}"))
}

fn u64_member(o: &Map<String, Value>, k: &str) -> Result<u64, String> {
    o.get(k)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("no unsigned integer {k:?}"))
}

fn opt_u64(o: &Map<String, Value>, k: &str) -> Result<Option<u64>, String> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{k:?} is not an unsigned integer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RunFile {
        RunFile {
            scenario: Scenario::CrashStorm,
            bug: Some(Bug::TornTailAccepted),
            client: ClientKind::Sdk,
            seed: Some(12),
            workload: Some(Workload {
                clients_count: 2,
                commands_per_client: 3,
                observer: false,
            }),
            mix: Some(FaultMix {
                drop_permille: 5,
                power_permille: 1000,
                stall_permille: 150,
                shutdown_permille: 200,
                ..FaultMix::default()
            }),
            draws: Draws::CURRENT,
            choices: vec![1, 0, 0, 0, 7],
            property: Some("log-integrity".into()),
            trace_hash: 0x0123_4567_89ab_cdef,
            trace_hash_version: TRACE_HASH_VERSION,
            steps: 7,
            events_count: 812,
        }
    }

    #[test]
    fn json_round_trips() {
        let f = sample();
        assert_eq!(f.to_json()["client"], json!("sdk"));
        assert_eq!(RunFile::from_json(&f.to_json()), Ok(f));
        let bare = RunFile {
            bug: None,
            client: ClientKind::Sim,
            seed: None,
            workload: None,
            mix: None,
            property: None,
            ..sample()
        };
        assert!(
            bare.to_json().get("client").is_none(),
            "a legacy run's file has no client member"
        );
        assert_eq!(RunFile::from_json(&bare.to_json()), Ok(bare));
    }

    #[test]
    fn an_sdk_file_from_before_observer_pages_replays_with_the_old_observer() {
        let f = sample();
        assert_eq!(f.to_json()["observerPages"], json!(true));
        let mut v = f.to_json();
        v.as_object_mut().unwrap().remove("observerPages");
        let old = RunFile::from_json(&v).unwrap();
        assert_eq!(old.client, ClientKind::SdkV1);
        // Written again, it says so, and reads back the same.
        assert_eq!(old.to_json()["client"], json!("sdk-v1"));
        assert!(old.to_json().get("observerPages").is_none());
        assert_eq!(RunFile::from_json(&old.to_json()), Ok(old));
    }

    #[test]
    fn a_file_without_a_hash_version_has_a_version_1_hash() {
        let mut v = sample().to_json();
        v.as_object_mut().unwrap().remove("traceHashVersion");
        let f = RunFile::from_json(&v).unwrap();
        assert_eq!(f.trace_hash_version, 1);
        assert!(!f.hash_comparable());
        assert!(sample().hash_comparable());
    }

    #[test]
    fn a_file_without_a_draws_version_replays_with_the_draws_before_stalls() {
        let f = sample();
        assert_eq!(f.draws, Draws::CURRENT);
        assert_eq!(f.to_json()["drawsVersion"], json!(15));
        let mut v = f.to_json();
        v.as_object_mut().unwrap().remove("drawsVersion");
        v["faultMix"].as_object_mut().unwrap().remove("stall");
        v["faultMix"].as_object_mut().unwrap().remove("shutdown");
        v["faultMix"].as_object_mut().unwrap().remove("readFail");
        v["faultMix"].as_object_mut().unwrap().remove("soloSync");
        v["faultMix"].as_object_mut().unwrap().remove("slowIo");
        v["faultMix"].as_object_mut().unwrap().remove("lateTimer");
        let old = RunFile::from_json(&v).unwrap();
        assert_eq!(old.draws, Draws::BeforeStalls);
        assert_eq!(old.plan().draws, Draws::BeforeStalls);
        assert_eq!(old.mix.as_ref().unwrap().stall_permille, 0);
        assert_eq!(old.mix.as_ref().unwrap().shutdown_permille, 0);
        // Written again, it says so, and reads back the same.
        assert_eq!(old.to_json()["drawsVersion"], json!(1));
        assert_eq!(RunFile::from_json(&old.to_json()), Ok(old));
        let mut v = f.to_json();
        v["drawsVersion"] = json!(16);
        let e = RunFile::from_json(&v).unwrap_err();
        assert!(e.contains("\"drawsVersion\" 16"), "{e}");
    }

    #[test]
    fn a_malformed_file_says_what_is_wrong() {
        let mut v = sample().to_json();
        v["version"] = json!(2);
        assert!(RunFile::from_json(&v).unwrap_err().contains("version 2"));
        let mut v = sample().to_json();
        v["choices"] = json!("1 two");
        assert!(RunFile::from_json(&v).unwrap_err().contains("\"two\""));
        let mut v = sample().to_json();
        v["choicesCount"] = json!(4);
        assert!(RunFile::from_json(&v).unwrap_err().contains("choicesCount"));
        let mut v = sample().to_json();
        v["scenario"] = json!("nope");
        assert!(RunFile::from_json(&v).unwrap_err().contains("nope"));
        let mut v = sample().to_json();
        v["faultMix"].as_object_mut().unwrap().remove("tear");
        assert!(RunFile::from_json(&v).unwrap_err().contains("tear"));
        assert!(RunFile::from_json(&json!([1])).is_err());
        let e = RunFile::load("/nonexistent/run.json").unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/run.json: "), "{e}");
    }
}
