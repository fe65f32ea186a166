//! Scenario files (PROTOCOL.md section 6): parse, run against an
//! in-process host, compare, and record.
//!
//! A scenario is an NDJSON file. Every line is an object with a `dir`:
//!
//! - `{"dir":"meta", ...}`, optional and first: `description`, `notes`,
//!   `normalize`, `normalizeOrdered`, `typeOnly`, `ignore` (path patterns,
//!   see [`compare`](super::compare)), `durability` (`durable` default,
//!   `ephemeral`), `seed` (default [`DEFAULT_SEED`]), `clockStartMs`
//!   (default [`DEFAULT_CLOCK_START_MS`]), `dataDir` (default
//!   [`DEFAULT_DATA_DIR`]), `idleUnloadMs`, `frameLimitBytes`.
//! - `{"dir":"client","raw":"<frame>"}`: bytes a client sends (plus `\n`).
//! - `{"dir":"server","raw":"<frame>"}`: a frame the host must send next.
//! - `{"dir":"control","op":...}`: `crash` (the host dies without notice;
//!   unsynced bytes are lost; a new incarnation starts on the same disk),
//!   or with `keepRecords: N` the first N whole records of each unsynced
//!   log tail survive too; `restart` (orderly shutdown, whose `session/closed` frames are
//!   compared, then a new incarnation), `reconnect` (the connection closes;
//!   the next client line opens a new one), `advance` with `ms` (the clock
//!   moves on, firing timers in order), and (ext) `hold` / `release` with
//!   `sessionId` (another process takes or drops the session's lease) and
//!   `holdSyncs` (syncs stop completing until the next crash, so intakes
//!   are written but not durable and their answers are held back).
//!
//! Client and server lines, and `reconnect`, may carry (ext) `conn`, a
//! positive integer naming a client connection (default 1), for scenarios
//! with several clients. Frames of different connections are compared per
//! connection, in order; a recording lists them by ascending `conn`.
//!
//! Determinism: the host is a [`Harness`] with the meta's seed and clock;
//! nothing depends on wall time or entropy, so a recording reproduces
//! exactly. Fault model: only the faults the control lines name; the
//! memory disk never fails, so every sync succeeds.

use std::collections::BTreeMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use serde_json::{Map, Value};

use super::compare::{Comparator, Diff, PatternError, Rules};
use crate::core::{ConnId, Durability, HostConfig};
use crate::harness::Harness;

/// The host's RNG seed when the meta names none.
pub const DEFAULT_SEED: u64 = 7;
/// The clock's start when the meta names none (2025-08-07T18:22:11Z, the
/// public transcripts' `clockStartMs`).
pub const DEFAULT_CLOCK_START_MS: u64 = 1_754_590_931_000;
/// The data directory when the meta names none.
pub const DEFAULT_DATA_DIR: &str = "/data";
/// An upper bound on one `advance`, so a typo cannot spin the runner for
/// hours (one simulated day).
pub const ADVANCE_MS_MAX: u64 = 86_400_000;

/// A scenario file that cannot be used: the 1-based line and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// 1-based line number (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "line {}: {}", self.line, self.reason)
        }
    }
}

impl std::error::Error for ScenarioError {}

/// The meta line, with defaults applied.
#[derive(Debug, Clone)]
pub struct Meta {
    /// What the scenario shows.
    pub description: Option<String>,
    /// Comparison rules: the conformance defaults plus the declared paths.
    pub rules: Rules,
    /// Durable or ephemeral host.
    pub durability: Durability,
    /// The host's RNG seed.
    pub seed: u64,
    /// The clock's start.
    pub clock_start_ms: u64,
    /// The host's data directory.
    pub data_dir: String,
    /// `--idle-unload-ms` (`None`: the host default).
    pub idle_unload_ms: Option<u64>,
    /// `--frame-limit-bytes` (`None`: the host default).
    pub frame_limit_bytes: Option<usize>,
}

impl Default for Meta {
    fn default() -> Meta {
        Meta {
            description: None,
            rules: Rules::conformance_defaults(),
            durability: Durability::Durable,
            seed: DEFAULT_SEED,
            clock_start_ms: DEFAULT_CLOCK_START_MS,
            data_dir: DEFAULT_DATA_DIR.to_string(),
            idle_unload_ms: None,
            frame_limit_bytes: None,
        }
    }
}

impl Meta {
    /// The host configuration this meta asks for.
    pub fn host_config(&self) -> HostConfig {
        let mut cfg = HostConfig::new(self.data_dir.clone(), self.durability, self.seed);
        if let Some(ms) = self.idle_unload_ms {
            cfg.idle_unload_ms = ms;
        }
        if let Some(n) = self.frame_limit_bytes {
            cfg.frame_limit_bytes = n;
        }
        cfg
    }
}

/// A control line's operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// Kill the host; a new incarnation starts on the surviving disk.
    /// With `keep_records`, that many whole log records of each session's
    /// unsynced tail survive too (a crash between write and fsync that
    /// the disk happened to persist partly).
    Crash {
        /// Unsynced records that survive (`None`: none).
        keep_records: Option<u64>,
    },
    /// (ext) Syncs stop completing until the next crash: intakes are
    /// written but not durable, so their answers are held back.
    HoldSyncs,
    /// Orderly shutdown, then a new incarnation.
    Restart,
    /// Close connection `conn`; its next client line opens a new one.
    Reconnect {
        /// The connection label.
        conn: u32,
    },
    /// Move the clock on by `ms`.
    Advance {
        /// Milliseconds.
        ms: u64,
    },
    /// Another process takes the session's lease.
    Hold {
        /// The session id.
        session_id: String,
    },
    /// Another process drops the session's lease.
    Release {
        /// The session id.
        session_id: String,
    },
}

/// One line of a scenario.
#[derive(Debug, Clone, PartialEq)]
pub enum LineKind {
    /// The meta line (already folded into [`Scenario::meta`]).
    Meta,
    /// A client frame.
    Client {
        /// Connection label.
        conn: u32,
        /// The bytes, without the newline.
        raw: String,
    },
    /// An expected server frame.
    Server {
        /// Connection label.
        conn: u32,
        /// The frame as recorded.
        raw: String,
        /// The frame parsed.
        value: Value,
    },
    /// A control line.
    Control(Control),
}

/// A line with its position and text.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// 1-based line number.
    pub number: usize,
    /// The line as written (kept verbatim by `record`).
    pub text: String,
    /// What it says.
    pub kind: LineKind,
}

/// A parsed scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The meta line with defaults.
    pub meta: Meta,
    /// Every line, in order.
    pub lines: Vec<Line>,
}

fn bad(line: usize, reason: impl Into<String>) -> ScenarioError {
    ScenarioError {
        line,
        reason: reason.into(),
    }
}

fn check_members(n: usize, o: &Map<String, Value>, allowed: &[&str]) -> Result<(), ScenarioError> {
    for k in o.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(bad(
                n,
                format!("unknown member {k:?} (allowed: {})", allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

fn get_u64(n: usize, o: &Map<String, Value>, k: &str) -> Result<Option<u64>, ScenarioError> {
    match o.get(k) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad(n, format!("{k:?} must be a non-negative integer"))),
    }
}

fn get_str<'a>(
    n: usize,
    o: &'a Map<String, Value>,
    k: &str,
) -> Result<Option<&'a str>, ScenarioError> {
    match o.get(k) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(bad(n, format!("{k:?} must be a string"))),
    }
}

fn get_conn(n: usize, o: &Map<String, Value>) -> Result<u32, ScenarioError> {
    match get_u64(n, o, "conn")? {
        None => Ok(1),
        Some(c) if (1..=u32::MAX as u64).contains(&c) => Ok(c as u32),
        Some(_) => Err(bad(n, "\"conn\" must be a positive integer")),
    }
}

fn get_patterns(n: usize, o: &Map<String, Value>, k: &str) -> Result<Vec<String>, ScenarioError> {
    match o.get(k) {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|p| {
                p.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad(n, format!("{k:?} must be an array of strings")))
            })
            .collect(),
        Some(_) => Err(bad(n, format!("{k:?} must be an array of strings"))),
    }
}

fn parse_meta(n: usize, o: &Map<String, Value>) -> Result<Meta, ScenarioError> {
    check_members(
        n,
        o,
        &[
            "dir",
            "description",
            "notes",
            "normalize",
            "normalizeOrdered",
            "typeOnly",
            "ignore",
            "durability",
            "seed",
            "clockStartMs",
            "dataDir",
            "idleUnloadMs",
            "frameLimitBytes",
        ],
    )?;
    let pat = |e: PatternError| bad(n, e.to_string());
    let mut meta = Meta {
        description: get_str(n, o, "description")?.map(str::to_string),
        ..Meta::default()
    };
    get_str(n, o, "notes")?;
    let normalize = get_patterns(n, o, "normalize")?;
    let ordered = get_patterns(n, o, "normalizeOrdered")?;
    let type_only = get_patterns(n, o, "typeOnly")?;
    let ignore = get_patterns(n, o, "ignore")?;
    meta.rules = Rules::conformance_defaults()
        .with_normalize(normalize.iter().map(String::as_str))
        .map_err(pat)?
        .with_normalize_ordered(ordered.iter().map(String::as_str))
        .map_err(pat)?
        .with_type_only(type_only.iter().map(String::as_str))
        .map_err(pat)?
        .with_ignore(ignore.iter().map(String::as_str))
        .map_err(pat)?;
    meta.durability = match get_str(n, o, "durability")? {
        None | Some("durable") => Durability::Durable,
        Some("ephemeral") => Durability::Ephemeral,
        Some(other) => {
            return Err(bad(
                n,
                format!("\"durability\" must be \"durable\" or \"ephemeral\", not {other:?}"),
            ))
        }
    };
    if let Some(s) = get_u64(n, o, "seed")? {
        meta.seed = s;
    }
    if let Some(t) = get_u64(n, o, "clockStartMs")? {
        meta.clock_start_ms = t;
    }
    if let Some(d) = get_str(n, o, "dataDir")? {
        if !d.starts_with('/') {
            return Err(bad(n, "\"dataDir\" must be an absolute path"));
        }
        meta.data_dir = d.to_string();
    }
    meta.idle_unload_ms = get_u64(n, o, "idleUnloadMs")?;
    meta.frame_limit_bytes = match get_u64(n, o, "frameLimitBytes")? {
        None => None,
        Some(0) => return Err(bad(n, "\"frameLimitBytes\" must be positive")),
        Some(b) => {
            Some(usize::try_from(b).map_err(|_| bad(n, "\"frameLimitBytes\" is too large"))?)
        }
    };
    Ok(meta)
}

fn parse_control(n: usize, o: &Map<String, Value>) -> Result<Control, ScenarioError> {
    let op = get_str(n, o, "op")?.ok_or_else(|| bad(n, "a control line needs \"op\""))?;
    let session = |o: &Map<String, Value>| -> Result<String, ScenarioError> {
        check_members(n, o, &["dir", "op", "sessionId"])?;
        get_str(n, o, "sessionId")?
            .map(str::to_string)
            .ok_or_else(|| bad(n, format!("{op:?} needs \"sessionId\"")))
    };
    match op {
        "crash" => {
            check_members(n, o, &["dir", "op", "keepRecords"])?;
            Ok(Control::Crash {
                keep_records: get_u64(n, o, "keepRecords")?,
            })
        }
        "restart" => {
            check_members(n, o, &["dir", "op"])?;
            Ok(Control::Restart)
        }
        "holdSyncs" => {
            check_members(n, o, &["dir", "op"])?;
            Ok(Control::HoldSyncs)
        }
        "reconnect" => {
            check_members(n, o, &["dir", "op", "conn"])?;
            Ok(Control::Reconnect { conn: get_conn(n, o)? })
        }
        "advance" => {
            check_members(n, o, &["dir", "op", "ms"])?;
            let ms = get_u64(n, o, "ms")?.ok_or_else(|| bad(n, "\"advance\" needs \"ms\""))?;
            if ms > ADVANCE_MS_MAX {
                return Err(bad(n, format!("\"ms\" is over the limit of {ADVANCE_MS_MAX}")));
            }
            Ok(Control::Advance { ms })
        }
        "hold" => Ok(Control::Hold {
            session_id: session(o)?,
        }),
        "release" => Ok(Control::Release {
            session_id: session(o)?,
        }),
        other => Err(bad(
            n,
            format!("unknown control op {other:?} (crash, restart, reconnect, advance, hold, release, holdSyncs)"),
        )),
    }
}

impl Scenario {
    /// Parses a scenario file's text.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let mut meta = Meta::default();
        let mut lines = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            if line.trim().is_empty() {
                return Err(bad(n, "blank line"));
            }
            let v: Value =
                serde_json::from_str(line).map_err(|e| bad(n, format!("not JSON: {e}")))?;
            let Value::Object(o) = v else {
                return Err(bad(n, "not a JSON object"));
            };
            let dir = get_str(n, &o, "dir")?.ok_or_else(|| bad(n, "no \"dir\" member"))?;
            let kind = match dir {
                "meta" => {
                    if !lines.is_empty() {
                        return Err(bad(n, "the meta line must be the first line"));
                    }
                    meta = parse_meta(n, &o)?;
                    LineKind::Meta
                }
                "client" => {
                    check_members(n, &o, &["dir", "raw", "conn"])?;
                    let raw = get_str(n, &o, "raw")?
                        .ok_or_else(|| bad(n, "a client line needs \"raw\""))?;
                    if raw.contains('\n') {
                        return Err(bad(n, "\"raw\" must be one line (no newline)"));
                    }
                    LineKind::Client {
                        conn: get_conn(n, &o)?,
                        raw: raw.to_string(),
                    }
                }
                "server" => {
                    check_members(n, &o, &["dir", "raw", "conn"])?;
                    let raw = get_str(n, &o, "raw")?
                        .ok_or_else(|| bad(n, "a server line needs \"raw\""))?;
                    let value = serde_json::from_str(raw).map_err(|e| {
                        bad(n, format!("the expected server frame is not JSON: {e}"))
                    })?;
                    LineKind::Server {
                        conn: get_conn(n, &o)?,
                        raw: raw.to_string(),
                        value,
                    }
                }
                "control" => LineKind::Control(parse_control(n, &o)?),
                other => {
                    return Err(bad(
                        n,
                        format!("unknown dir {other:?} (meta, client, server, control)"),
                    ))
                }
            };
            lines.push(Line {
                number: n,
                text: line.to_string(),
                kind,
            });
        }
        if lines.iter().all(|l| matches!(l.kind, LineKind::Meta)) {
            return Err(bad(0, "the scenario has no client or control lines"));
        }
        Ok(Scenario { meta, lines })
    }
}

/// What went wrong at one place of a run.
#[derive(Debug, Clone, PartialEq)]
pub enum MismatchKind {
    /// A received frame differs from the expected one.
    Frame {
        /// Every difference.
        diffs: Vec<Diff>,
    },
    /// An expected frame was not received.
    Missing {
        /// The expected frame.
        expected: Value,
    },
    /// A frame was received that the scenario does not expect.
    Extra {
        /// The received frame, as sent.
        received: String,
    },
    /// The host sent a line that is not JSON.
    NotJson {
        /// The line as sent.
        received: String,
    },
}

/// One mismatch: where and what.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// The line of the expected frame, or for an extra frame the client
    /// or control line after which it arrived.
    pub line: usize,
    /// The connection label.
    pub conn: u32,
    /// What differs.
    pub kind: MismatchKind,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let conn = if self.conn == 1 {
            String::new()
        } else {
            format!(" (conn {})", self.conn)
        };
        match &self.kind {
            MismatchKind::Frame { diffs } => {
                write!(f, "line {}{conn}: the received frame differs", self.line)?;
                for d in diffs {
                    write!(f, "\n    {d}")?;
                }
                Ok(())
            }
            MismatchKind::Missing { expected } => {
                write!(
                    f,
                    "line {}{conn}: expected frame not received: {expected}",
                    self.line
                )
            }
            MismatchKind::Extra { received } => write!(
                f,
                "line {}{conn}: unexpected frame received after this line: {received}",
                self.line
            ),
            MismatchKind::NotJson { received } => write!(
                f,
                "line {}{conn}: the host sent a line that is not JSON: {received:?}",
                self.line
            ),
        }
    }
}

/// A server frame the host produced, and the step it followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The index in [`Scenario::lines`] of the client or control line
    /// after which it was produced (`None`: before the first).
    pub after_line_index: Option<usize>,
    /// The connection label.
    pub conn: u32,
    /// The frame without its newline.
    pub raw: String,
}

/// The result of running a scenario.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    /// Every mismatch, in scenario order.
    pub mismatches: Vec<Mismatch>,
    /// Every frame the host sent.
    pub received: Vec<Received>,
    /// How many frames were compared.
    pub frames_compared: usize,
}

impl RunReport {
    /// True when the host produced exactly the expected frames.
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty()
    }
}

/// The host could not be driven (it panicked): an infrastructure failure,
/// not a verdict on the scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfraError {
    /// The line being executed.
    pub line: usize,
    /// The panic message.
    pub reason: String,
}

impl fmt::Display for InfraError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}: the host could not be driven: {}",
            self.line, self.reason
        )
    }
}

impl std::error::Error for InfraError {}

/// Drives one harness on behalf of a scenario.
struct Driver {
    h: Harness,
    conns: BTreeMap<u32, ConnId>,
    /// Frames taken early (before a restart dropped their connections).
    stash: Vec<(u32, String)>,
}

impl Driver {
    fn conn(&mut self, label: u32) -> ConnId {
        if let Some(c) = self.conns.get(&label) {
            return *c;
        }
        let c = self.h.connect();
        self.conns.insert(label, c);
        c
    }

    fn step(&mut self, kind: &LineKind, comparator: &Comparator) {
        match kind {
            LineKind::Client { conn, raw } => {
                let c = self.conn(*conn);
                let mut bytes = rewrite_client(raw, comparator).into_bytes();
                bytes.push(b'\n');
                self.h.send_raw(c, &bytes);
            }
            LineKind::Control(Control::Crash { keep_records }) => {
                if let Some(n) = keep_records {
                    keep_unsynced_records(&mut self.h, *n);
                }
                self.h.crash();
                self.h.hold_syncs = false;
                self.conns.clear();
            }
            LineKind::Control(Control::HoldSyncs) => self.h.hold_syncs = true,
            LineKind::Control(Control::Restart) => {
                // The orderly shutdown's frames belong to this step: keep
                // them before the connections go.
                self.h.shutdown();
                let frames = self.take_all();
                self.stash.extend(frames);
                self.h.restart();
                self.conns.clear();
            }
            LineKind::Control(Control::Reconnect { conn }) => {
                if let Some(c) = self.conns.remove(conn) {
                    self.h.disconnect(c);
                }
            }
            LineKind::Control(Control::Advance { ms }) => self.h.advance(*ms),
            LineKind::Control(Control::Hold { session_id }) => {
                if !self.h.foreign_leases.contains(session_id) {
                    self.h.foreign_leases.push(session_id.clone());
                }
            }
            LineKind::Control(Control::Release { session_id }) => {
                self.h.foreign_leases.retain(|s| s != session_id);
            }
            LineKind::Meta | LineKind::Server { .. } => {}
        }
    }

    /// Frames received since the last call, by ascending connection label.
    fn collect(&mut self) -> Vec<(u32, String)> {
        let mut out = std::mem::take(&mut self.stash);
        out.extend(self.take_all());
        out
    }

    fn take_all(&mut self) -> Vec<(u32, String)> {
        let mut out = Vec::new();
        for (label, c) in &self.conns {
            for line in self.h.take_raw(*c) {
                let text = String::from_utf8_lossy(&line);
                let text = text.strip_suffix('\n').unwrap_or(&text).to_string();
                out.push((*label, text));
            }
        }
        out
    }
}

/// Makes the first `n` whole records of every session log's unsynced tail
/// durable (the rest is lost by the crash that follows). A torn record is
/// never kept: the tail is cut at a record boundary.
fn keep_unsynced_records(h: &mut Harness, n: u64) {
    for f in h.disk.files.values_mut() {
        let mut end = 0usize;
        for _ in 0..n {
            match crate::log::decode_frame(&f.volatile, end) {
                Ok(frame) => end = frame.end_offset() as usize,
                Err(_) => break,
            }
        }
        let kept: Vec<u8> = f.volatile.drain(..end).collect();
        f.durable.extend(kept);
    }
}

/// Client lines are sent verbatim unless they mention an expected
/// server-minted value the comparator has unified with another spelling;
/// then that value is replaced by its image.
fn rewrite_client(raw: &str, comparator: &Comparator) -> String {
    match serde_json::from_str::<Value>(raw) {
        Ok(v) => {
            let r = comparator.rewrite(&v);
            if r == v {
                raw.to_string()
            } else {
                r.to_string()
            }
        }
        Err(_) => raw.to_string(),
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-text payload".to_string()
    }
}

/// Runs a scenario and compares every frame; a panic of the host is an
/// [`InfraError`].
pub fn run(s: &Scenario) -> Result<RunReport, InfraError> {
    let mut current_line = 0usize;
    let result = catch_unwind(AssertUnwindSafe(|| run_inner(s, &mut current_line)));
    result.map_err(|p| InfraError {
        line: current_line,
        reason: panic_text(p.as_ref()),
    })
}

fn run_inner(s: &Scenario, current_line: &mut usize) -> RunReport {
    let mut d = Driver {
        h: Harness::new(s.meta.host_config(), s.meta.clock_start_ms),
        conns: BTreeMap::new(),
        stash: Vec::new(),
    };
    let mut cmp = Comparator::new(s.meta.rules.clone());
    let mut report = RunReport::default();
    // Each step (a client or control line) is followed by the server lines
    // it must produce; `step` is the index of the last step run.
    let mut i = 0usize;
    let mut step: Option<usize> = None;
    loop {
        let mut expected: Vec<&Line> = Vec::new();
        while i < s.lines.len() {
            match &s.lines[i].kind {
                LineKind::Server { .. } => expected.push(&s.lines[i]),
                LineKind::Meta => {}
                _ => break,
            }
            i += 1;
        }
        let received = d.collect();
        let after_line = step.map(|k| s.lines[k].number).unwrap_or(0);
        compare_group(&mut cmp, &expected, &received, after_line, &mut report);
        for (conn, raw) in received {
            report.received.push(Received {
                after_line_index: step,
                conn,
                raw,
            });
        }
        if i >= s.lines.len() {
            break;
        }
        *current_line = s.lines[i].number;
        d.step(&s.lines[i].kind, &cmp);
        step = Some(i);
        i += 1;
    }
    report
}

/// Compares the received frames of one step with the expected ones, per
/// connection label, in order.
fn compare_group(
    cmp: &mut Comparator,
    expected: &[&Line],
    received: &[(u32, String)],
    after_line: usize,
    report: &mut RunReport,
) {
    let mut labels: Vec<u32> = expected
        .iter()
        .filter_map(|l| match l.kind {
            LineKind::Server { conn, .. } => Some(conn),
            _ => None,
        })
        .chain(received.iter().map(|(c, _)| *c))
        .collect();
    labels.sort_unstable();
    labels.dedup();
    for label in labels {
        let exp: Vec<(&Line, &Value)> = expected
            .iter()
            .filter_map(|l| match &l.kind {
                LineKind::Server { conn, value, .. } if *conn == label => Some((*l, value)),
                _ => None,
            })
            .collect();
        let rec: Vec<&String> = received
            .iter()
            .filter(|(c, _)| *c == label)
            .map(|(_, r)| r)
            .collect();
        for k in 0..exp.len().max(rec.len()) {
            match (exp.get(k), rec.get(k)) {
                (Some((line, ev)), Some(raw)) => {
                    report.frames_compared += 1;
                    match serde_json::from_str::<Value>(raw) {
                        Ok(rv) => {
                            let diffs = cmp.compare_frame(ev, &rv);
                            if !diffs.is_empty() {
                                report.mismatches.push(Mismatch {
                                    line: line.number,
                                    conn: label,
                                    kind: MismatchKind::Frame { diffs },
                                });
                            }
                        }
                        Err(_) => report.mismatches.push(Mismatch {
                            line: line.number,
                            conn: label,
                            kind: MismatchKind::NotJson {
                                received: (*raw).clone(),
                            },
                        }),
                    }
                }
                (Some((line, ev)), None) => report.mismatches.push(Mismatch {
                    line: line.number,
                    conn: label,
                    kind: MismatchKind::Missing {
                        expected: (*ev).clone(),
                    },
                }),
                (None, Some(raw)) => report.mismatches.push(Mismatch {
                    line: after_line,
                    conn: label,
                    kind: MismatchKind::Extra {
                        received: (*raw).clone(),
                    },
                }),
                (None, None) => unreachable!("k is below the longer length"),
            }
        }
    }
    report.mismatches.sort_by_key(|m| m.line);
}

/// Records a scenario: runs its client and control lines and returns the
/// file text with the server lines replaced by what the host sent. Meta,
/// client and control lines are kept verbatim, and so is an existing
/// server line whose frame equals (as a JSON value) the one received in
/// its place, so re-recording an unchanged scenario changes nothing and
/// hand-kept spellings (such as a seed document's exact bytes) survive.
pub fn record(s: &Scenario) -> Result<String, InfraError> {
    let report = run(s)?;
    // The expected server lines of each (step, connection), in order.
    let mut kept: BTreeMap<(Option<usize>, u32), Vec<&Line>> = BTreeMap::new();
    let mut step: Option<usize> = None;
    for (idx, l) in s.lines.iter().enumerate() {
        match &l.kind {
            LineKind::Server { conn, .. } => kept.entry((step, *conn)).or_default().push(l),
            LineKind::Meta => {}
            _ => step = Some(idx),
        }
    }
    let mut used: BTreeMap<(Option<usize>, u32), usize> = BTreeMap::new();
    let mut server_line = |r: &Received| -> String {
        let key = (r.after_line_index, r.conn);
        let k = used.entry(key).or_insert(0);
        let old = kept.get(&key).and_then(|v| v.get(*k));
        *k += 1;
        if let Some(Line {
            text,
            kind: LineKind::Server { value, .. },
            ..
        }) = old
        {
            if serde_json::from_str::<Value>(&r.raw).ok().as_ref() == Some(value) {
                return text.clone();
            }
        }
        // Key order: dir, [conn], raw.
        let mut line = String::from("{\"dir\":\"server\",");
        if r.conn != 1 {
            line.push_str(&format!("\"conn\":{},", r.conn));
        }
        line.push_str(&format!("\"raw\":{}}}", Value::String(r.raw.clone())));
        line
    };
    let mut out = String::new();
    let mut push_received = |out: &mut String, at: Option<usize>| {
        for r in report.received.iter().filter(|r| r.after_line_index == at) {
            out.push_str(&server_line(r));
            out.push('\n');
        }
    };
    let mut before_first_step = true;
    for (idx, l) in s.lines.iter().enumerate() {
        if matches!(l.kind, LineKind::Server { .. }) {
            continue;
        }
        if before_first_step && !matches!(l.kind, LineKind::Meta) {
            // Frames before any step (none in practice: nothing is
            // connected yet), after the meta line.
            push_received(&mut out, None);
            before_first_step = false;
        }
        out.push_str(&l.text);
        out.push('\n');
        if !matches!(l.kind, LineKind::Meta) {
            push_received(&mut out, Some(idx));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rejects_ill_formed_lines_with_their_number() {
        let cases = [
            ("{\"dir\":\"client\",\"raw\":\"{}\"}\nnot json\n", 2),
            (
                "{\"dir\":\"client\",\"raw\":\"{}\"}\n{\"dir\":\"meta\"}\n",
                2,
            ),
            ("{\"dir\":\"control\",\"op\":\"explode\"}\n", 1),
            ("{\"dir\":\"control\",\"op\":\"advance\"}\n", 1),
            ("{\"dir\":\"server\",\"raw\":\"{oops\"}\n", 1),
            (
                "{\"dir\":\"meta\",\"normalise\":[]}\n{\"dir\":\"client\",\"raw\":\"x\"}\n",
                1,
            ),
            (
                "{\"dir\":\"client\",\"raw\":\"x\"}\n\n{\"dir\":\"client\",\"raw\":\"x\"}\n",
                2,
            ),
            ("{\"dir\":\"client\",\"raw\":\"x\",\"conn\":0}\n", 1),
            ("[1]\n", 1),
        ];
        for (text, line) in cases {
            let e = Scenario::parse(text).expect_err(text);
            assert_eq!(e.line, line, "{text}: {e}");
        }
    }

    #[test]
    fn parse_accepts_a_final_newline_and_applies_meta_defaults() {
        let s = Scenario::parse(
            "{\"dir\":\"meta\",\"seed\":3}\n{\"dir\":\"control\",\"op\":\"advance\",\"ms\":5}\n",
        )
        .unwrap();
        assert_eq!(s.meta.seed, 3);
        assert_eq!(s.meta.clock_start_ms, DEFAULT_CLOCK_START_MS);
        assert_eq!(s.lines.len(), 2);
        assert_eq!(
            s.lines[1].kind,
            LineKind::Control(Control::Advance { ms: 5 })
        );
    }
}
