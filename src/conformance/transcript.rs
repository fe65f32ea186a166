//! Public MSP golden transcripts (`corpus/msp/<scenario>/{manifest.json,
//! transcript.ndjson}`): replay them against our host, and serve them to
//! clients.
//!
//! - `msp conformance replay --transcript DIR [--transcript DIR ...]`:
//!   starts an in-process host ([`Harness`]) with the manifest's
//!   `serverConfig.frameLimitBytes`, `seeds.idSeed` (the host's RNG seed)
//!   and `seeds.clockStartMs` (its clock), plays the recorded agent output
//!   through a [`agent::TranscriptAgent`], sends every client line as
//!   recorded (raw bytes plus `\n`; `\r` and unknown members included; only
//!   server-minted values the client echoes are substituted by the ones our
//!   host minted), and compares every server frame in order ([`replay`]).
//! - `msp conformance serve-fixture --transcript DIR`: the canned host: reads
//!   client frames on stdin, matches each against the next recorded client
//!   line, and writes the recorded server lines under the client's own ids
//!   ([`fixture`]).
//!
//! Exit codes: 0 every transcript passed; 1 a mismatch; 2 usage (bad
//! arguments); 3 infrastructure (a transcript that cannot be read or is
//! ill-formed, or a host that could not be driven).
//!
//! # What the replay compares
//!
//! Frames are compared as JSON values with [`compare`](super::compare),
//! exactly, except:
//!
//! - the manifest's `normalize` paths, unified one-to-one;
//! - server-minted values, unified one-to-one across the whole run:
//!   `sessionId`, `itemId`, `approvalId`, `taskId`, `toolCallId`,
//!   `sourceRange` record ids and stream ids; view cursors (`viewCursor`,
//!   `cursor`, `after`, `next`, `nextCursor`, `earliestCursor`) likewise and
//!   order-preserving; `sourceRange` sequences one-to-one per stream and in
//!   order ([`SequenceCheck`]); server request ids in an id space of their
//!   own (each direction owns its id space);
//! - timestamps (`emittedAtMs`, `createdAt`, `updatedAt`, `recordedAt`), the
//!   host identity in the `initialize` result (`serverInfo`, `userAgent`,
//!   `museHome`, `schema`, `platformFamily`, `platformOs`), `Session.path`,
//!   `providerId` and `modelId`: type only;
//! - `error.message`: free text, never compared (PROTOCOL.md section 3).
//!
//! A value the client sent is a fixed point of the unification: when the
//! recording says the host echoes it, our host must echo the same value.
//!
//! Determinism: the host runs on the manifest's seed and a manual clock that
//! moves by 1 ms steps after each client line until the host is quiet, so a
//! replay is a pure function of the transcript.

#[path = "transcript_agent.rs"]
pub mod agent;
#[path = "transcript_fixture.rs"]
pub mod fixture;
#[path = "transcript_raw.rs"]
pub mod raw;

use std::collections::BTreeMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::compare::{Comparator, Diff, DiffKind, Rules};
use crate::core::agent::Step;
use crate::core::bugs::BugSet;
use crate::core::{Durability, HostConfig};
use crate::harness::Harness;
use crate::proto::ids::is_hyphenated_uuid;

/// Every transcript passed.
pub const EXIT_PASS: i32 = 0;
/// A frame differs, is missing or is extra.
pub const EXIT_MISMATCH: i32 = 1;
/// Bad arguments.
pub const EXIT_USAGE: i32 = 2;
/// A transcript that cannot be used, or a host that could not be driven.
pub const EXIT_INFRA: i32 = 3;

const USAGE: &str = "usage: msp conformance replay --transcript DIR [--transcript DIR ...]\n       msp conformance serve-fixture --transcript DIR\nDIR holds manifest.json and transcript.ndjson.";

/// The data directory of the replay host (`museHome`).
pub const REPLAY_DATA_DIR: &str = "/msp-home";

/// Whether a client line's method is one PROTOCOL.md defines (the
/// handshake included), i.e. a transcript using only such lines is in
/// scope. Responses to server requests and unparsable lines carry the
/// pseudo-methods `(response)` and `(not JSON)`. The method list itself is
/// [`crate::proto::params::is_known_method`]'s.
pub fn is_protocol_client_method(method: &str) -> bool {
    matches!(method, "initialized" | "(response)" | "(not JSON)")
        || crate::proto::params::is_known_method(method)
}

/// The server notifications and requests PROTOCOL.md section 4.5 defines.
pub const PROTOCOL_SERVER_METHODS: [&str; 13] = [
    "session/started",
    "session/closed",
    "turn/started",
    "turn/completed",
    "turn/unqueued",
    "turn/retryScheduled",
    "item/started",
    "item/completed",
    "item/delta",
    "approval/requested",
    "approval/request",
    "approval/resolved",
    "state/updated",
];

// ---------------------------------------------------------------------------
// Loading

/// A transcript that cannot be used: which file, which line, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for TranscriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.path.display(), self.reason)
        } else {
            write!(f, "{}:{}: {}", self.path.display(), self.line, self.reason)
        }
    }
}

impl std::error::Error for TranscriptError {}

/// The members of `manifest.json` the runner uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// `scenario`.
    pub scenario: String,
    /// `provenance` (`hand-authored`, `host-generated`, `sdk-tolerance`).
    pub provenance: String,
    /// `serverConfig.frameLimitBytes`.
    pub frame_limit_bytes: usize,
    /// `seeds.idSeed`: the host's RNG seed.
    pub id_seed: u64,
    /// `seeds.clockStartMs`: the host clock's start.
    pub clock_start_ms: u64,
    /// `normalize`: paths that may legitimately differ.
    pub normalize: Vec<String>,
}

impl Manifest {
    /// `sdk-tolerance` fixtures test clients only: their server lines are
    /// not a host's output (they may name methods that do not exist).
    pub fn client_only(&self) -> bool {
        self.provenance == "sdk-tolerance"
    }

    fn parse(path: &Path, text: &str) -> Result<Manifest, TranscriptError> {
        let err = |reason: String| TranscriptError {
            path: path.to_path_buf(),
            line: 0,
            reason,
        };
        let v: Value = serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
        let str_of = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let scenario = str_of("scenario").ok_or_else(|| err("no `scenario`".into()))?;
        let provenance = str_of("provenance").unwrap_or_default();
        let frame_limit_bytes = v
            .pointer("/serverConfig/frameLimitBytes")
            .and_then(Value::as_u64)
            .map(|n| n as usize)
            .unwrap_or(crate::proto::framing::DEFAULT_FRAME_LIMIT_BYTES);
        if frame_limit_bytes == 0 {
            return Err(err("serverConfig.frameLimitBytes must be positive".into()));
        }
        let id_seed = v
            .pointer("/seeds/idSeed")
            .and_then(Value::as_u64)
            .ok_or_else(|| err("no `seeds.idSeed`".into()))?;
        let clock_start_ms = v
            .pointer("/seeds/clockStartMs")
            .and_then(Value::as_u64)
            .ok_or_else(|| err("no `seeds.clockStartMs`".into()))?;
        let normalize = match v.get("normalize") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|p| {
                    p.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| err("`normalize` holds a non-string".into()))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(err("`normalize` is not an array".into())),
        };
        Ok(Manifest {
            scenario,
            provenance,
            frame_limit_bytes,
            id_seed,
            clock_start_ms,
            normalize,
        })
    }
}

/// Who wrote a transcript line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// The client.
    Client,
    /// The server.
    Server,
}

/// One line of `transcript.ndjson`.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// 1-based line number.
    pub number: usize,
    /// Who sent it.
    pub dir: Dir,
    /// The exact frame, as recorded (a client's trailing `\r` included).
    pub raw: String,
    /// The frame parsed (`None` when the raw text is not JSON).
    pub frame: Option<Value>,
}

impl Line {
    /// The frame's `method`, `(response)` for a response, `(not JSON)`.
    pub fn method(&self) -> &str {
        match &self.frame {
            None => "(not JSON)",
            Some(f) => f
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("(response)"),
        }
    }

    /// A short label for reports: `server turn/started` or `client
    /// response id 3`.
    pub fn label(&self) -> String {
        let who = match self.dir {
            Dir::Client => "client",
            Dir::Server => "server",
        };
        match self.frame.as_ref().and_then(|f| f.get("id")) {
            Some(id) if self.method() == "(response)" => format!("{who} response id {id}"),
            Some(id) => format!("{who} {} id {id}", self.method()),
            None => format!("{who} {}", self.method()),
        }
    }
}

/// A loaded transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// The directory it was read from.
    pub dir: PathBuf,
    /// The manifest.
    pub manifest: Manifest,
    /// The lines, in wire order.
    pub lines: Vec<Line>,
}

impl Transcript {
    /// Reads `DIR/manifest.json` and `DIR/transcript.ndjson`.
    pub fn load(dir: &Path) -> Result<Transcript, TranscriptError> {
        let read = |name: &str| {
            let p = dir.join(name);
            std::fs::read_to_string(&p).map_err(|e| TranscriptError {
                path: p.clone(),
                line: 0,
                reason: format!("cannot read: {e}"),
            })
        };
        let manifest = Manifest::parse(&dir.join("manifest.json"), &read("manifest.json")?)?;
        let path = dir.join("transcript.ndjson");
        let lines = Transcript::parse_lines(&path, &read("transcript.ndjson")?)?;
        Ok(Transcript {
            dir: dir.to_path_buf(),
            manifest,
            lines,
        })
    }

    /// Parses transcript lines (`{"dir":"client"|"server","raw":...}`).
    pub fn parse_lines(path: &Path, text: &str) -> Result<Vec<Line>, TranscriptError> {
        let mut lines = Vec::new();
        for (i, l) in text.lines().enumerate() {
            let number = i + 1;
            if l.trim().is_empty() {
                continue;
            }
            let err = |reason: String| TranscriptError {
                path: path.to_path_buf(),
                line: number,
                reason,
            };
            let v: Value = serde_json::from_str(l).map_err(|e| err(format!("not JSON: {e}")))?;
            let dir = match v.get("dir").and_then(Value::as_str) {
                Some("client") => Dir::Client,
                Some("server") => Dir::Server,
                other => return Err(err(format!("unknown dir {other:?}"))),
            };
            let raw = v
                .get("raw")
                .and_then(Value::as_str)
                .ok_or_else(|| err("no string `raw`".into()))?
                .to_string();
            let frame = serde_json::from_str::<Value>(raw.trim_end_matches('\r')).ok();
            if dir == Dir::Server && !frame.as_ref().is_some_and(Value::is_object) {
                return Err(err("a server line must be a JSON object".into()));
            }
            lines.push(Line {
                number,
                dir,
                raw,
                frame,
            });
        }
        Ok(lines)
    }

    /// The scenario name.
    pub fn name(&self) -> &str {
        &self.manifest.scenario
    }

    /// Client methods this transcript uses that PROTOCOL.md does not define,
    /// and server methods it expects that our host never sends, in order of
    /// first use (`client session/compact`, `server view/gap`).
    pub fn methods_out_of_protocol(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for l in &self.lines {
            let m = l.method();
            let known = match l.dir {
                Dir::Client => is_protocol_client_method(m),
                Dir::Server => m == "(response)" || PROTOCOL_SERVER_METHODS.contains(&m),
            };
            let who = if l.dir == Dir::Client {
                "client"
            } else {
                "server"
            };
            let entry = format!("{who} {m}");
            if !known && !out.contains(&entry) {
                out.push(entry);
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------
// Replay

/// One difference between the recording and our host.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// The transcript line of the expected frame, or, for a frame the
    /// recording does not have, of the client line after which it came.
    pub line: usize,
    /// What the line is (`server turn/started`).
    pub label: String,
    /// What differs.
    pub kind: MismatchKind,
}

/// What differs.
#[derive(Debug, Clone, PartialEq)]
pub enum MismatchKind {
    /// Both frames exist; these paths differ.
    Frame(Vec<Diff>),
    /// Our host sent no frame where the recording has this one.
    Missing(Value),
    /// Our host sent a frame the recording does not have here.
    Unexpected(Value),
    /// Our host sent bytes that are not one JSON object per `\n` line.
    Malformed(String),
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = format!("line {} ({})", self.line, self.label);
        match &self.kind {
            MismatchKind::Frame(diffs) => {
                for (i, d) in diffs.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{at}: {d}")?;
                }
                Ok(())
            }
            MismatchKind::Missing(v) => {
                write!(f, "{at}: missing frame: expected {v}, received nothing")
            }
            MismatchKind::Unexpected(v) => write!(f, "{at}: unexpected frame: received {v}"),
            MismatchKind::Malformed(raw) => write!(f, "{at}: malformed output line {raw:?}"),
        }
    }
}

impl Mismatch {
    /// Every difference as `(line, JSON path)`, for tests that pin a known
    /// divergence exactly; a missing or unexpected frame is `(line, "$")`.
    pub fn paths(&self) -> Vec<(usize, String)> {
        match &self.kind {
            MismatchKind::Frame(d) => d.iter().map(|d| (self.line, d.path.clone())).collect(),
            _ => vec![(self.line, "$".to_string())],
        }
    }
}

/// The outcome of one replay.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayReport {
    /// The scenario.
    pub scenario: String,
    /// Server frames compared (pairs, missing and unexpected included).
    pub frames_compared: usize,
    /// Every difference, in order.
    pub mismatches: Vec<Mismatch>,
    /// Agent output the agent seam cannot play (see [`agent::Script`]).
    pub unsupported: Vec<agent::Unsupported>,
    /// How the session history the transcript assumes was built, if any.
    pub history: Option<String>,
    /// Every line exchanged with the host, in wire order, as sent (before
    /// any tamper): `(connection, direction, line)`, connection 0 for the
    /// history connection and 1 for the transcript's. The schema test
    /// validates every server line of it.
    pub wire: Vec<(u64, Dir, String)>,
}

impl ReplayReport {
    /// No difference.
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty()
    }

    /// Every difference as `(line, JSON path)`.
    pub fn diff_paths(&self) -> Vec<(usize, String)> {
        self.mismatches.iter().flat_map(Mismatch::paths).collect()
    }
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.passed() {
            write!(
                f,
                "PASS {} ({} frames)",
                self.scenario, self.frames_compared
            )?;
        } else {
            write!(
                f,
                "FAIL {}: {} mismatch(es) in {} frames",
                self.scenario,
                self.mismatches.len(),
                self.frames_compared
            )?;
        }
        if let Some(h) = &self.history {
            write!(f, "\n  history: {h}")?;
        }
        for u in &self.unsupported {
            write!(
                f,
                "\n  line {}: agent output the agent seam cannot play: {}",
                u.line, u.why
            )?;
        }
        for m in &self.mismatches {
            for l in m.to_string().lines() {
                write!(f, "\n  {}: {l}", self.scenario)?;
            }
        }
        Ok(())
    }
}

/// A replay that could not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayError {
    /// The transcript is client-only (`sdk-tolerance`) or assumes history
    /// that cannot be built from its own material.
    NotReplayable(String),
    /// The host panicked.
    Infra(String),
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::NotReplayable(why) => write!(f, "not replayable: {why}"),
            ReplayError::Infra(why) => write!(f, "the host could not be driven: {why}"),
        }
    }
}

impl std::error::Error for ReplayError {}

/// A frame hook for tests: sees every frame our host sent, parsed, before
/// comparison, and may change it (a deliberately wrong host).
pub type Tamper = Box<dyn FnMut(&mut Value)>;

/// A script hook for tests: edits the agent script before the run (a
/// deliberately wrong agent).
pub type ScriptEdit = Box<dyn FnOnce(&mut agent::Script)>;

/// Replay options.
#[derive(Default)]
pub struct ReplayOptions {
    /// Planted bugs for the host.
    pub bugs: BugSet,
    /// A frame hook (see [`Tamper`]).
    pub tamper: Option<Tamper>,
    /// Wraps the agent script before the run (a deliberately wrong agent).
    pub edit_script: Option<ScriptEdit>,
}

impl fmt::Debug for ReplayOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayOptions")
            .field("bugs", &self.bugs)
            .field("tamper", &self.tamper.is_some())
            .field("edit_script", &self.edit_script.is_some())
            .finish()
    }
}

/// Member name used to pin a client-sent value as a fixed point of the
/// unification (never appears in a frame).
const PIN: &str = "\u{1}pin";

/// The comparison rules of a replay (see the module docs).
pub fn replay_rules(manifest: &Manifest) -> Rules {
    let minted = [
        "**.sessionId",
        "**.itemId",
        "**.approvalId",
        "**.taskId",
        "**.toolCallId",
        "**.sourceRange.first.id",
        "**.sourceRange.last.id",
        "**.sourceRange.stream.id",
        PIN,
    ];
    let cursors = [
        "**.viewCursor",
        "**.cursor",
        "**.after",
        "**.next",
        "**.nextCursor",
        "**.earliestCursor",
    ];
    let identity = [
        "result.serverInfo",
        "result.userAgent",
        "result.museHome",
        "result.schema",
        "result.platformFamily",
        "result.platformOs",
        "**.session.path",
        "**.providerId",
        "**.modelId",
    ];
    let sequences = [
        "**.sourceRange.first.sequence",
        "**.sourceRange.last.sequence",
    ];
    Rules::conformance_defaults()
        .with_ignore(sequences)
        .and_then(|r| r.with_type_only(identity))
        .and_then(|r| r.with_normalize_ordered(cursors))
        .and_then(|r| r.with_normalize(minted))
        .and_then(|r| r.with_normalize(manifest.normalize.iter().map(String::as_str)))
        .unwrap_or_else(|e| {
            // Built-in patterns always parse; a manifest pattern that does
            // not is ignored rather than taking the run down.
            debug_assert!(!e.pattern.is_empty());
            Rules::conformance_defaults()
        })
}

/// One-to-one, per-stream, order-preserving unification of `sourceRange`
/// sequences: the recorded `(stream, sequence)` pairs must map to ours
/// injectively in both directions, and two sequences of one stream must
/// keep their order. (Separate from the comparator because sequences are
/// small integers that repeat across streams and would collide with other
/// unified numbers such as request ids.)
#[derive(Debug, Default, Clone)]
pub struct SequenceCheck {
    forward: BTreeMap<(String, u64), (String, u64)>,
    backward: BTreeMap<(String, u64), (String, u64)>,
}

impl SequenceCheck {
    /// Checks every `sourceRange` found at the same path in both frames.
    pub fn check(&mut self, expected: &Value, received: &Value, out: &mut Vec<Diff>) {
        self.walk("$", expected, received, out);
    }

    fn walk(&mut self, path: &str, e: &Value, r: &Value, out: &mut Vec<Diff>) {
        match (e, r) {
            (Value::Object(eo), Value::Object(ro)) => {
                for (k, ev) in eo {
                    let Some(rv) = ro.get(k) else { continue };
                    let p = format!("{path}.{k}");
                    if k == "sourceRange" {
                        self.range(&p, ev, rv, out);
                    } else {
                        self.walk(&p, ev, rv, out);
                    }
                }
            }
            (Value::Array(ea), Value::Array(ra)) => {
                for (i, (ev, rv)) in ea.iter().zip(ra).enumerate() {
                    self.walk(&format!("{path}[{i}]"), ev, rv, out);
                }
            }
            _ => {}
        }
    }

    fn range(&mut self, path: &str, e: &Value, r: &Value, out: &mut Vec<Diff>) {
        let stream = |v: &Value| {
            v.pointer("/stream/id")
                .map(Value::to_string)
                .unwrap_or_default()
        };
        let (es, rs) = (stream(e), stream(r));
        for end in ["first", "last"] {
            let p = format!("{path}.{end}.sequence");
            let (ev, rv) = (
                e.get(end).and_then(|x| x.get("sequence")),
                r.get(end).and_then(|x| x.get("sequence")),
            );
            let (en, rn) = match (ev, rv) {
                (None, None) => continue,
                (Some(ev), None) => {
                    out.push(mk_diff(&p, DiffKind::Missing, Some(ev), None));
                    continue;
                }
                (None, Some(rv)) => {
                    out.push(mk_diff(&p, DiffKind::Unexpected, None, Some(rv)));
                    continue;
                }
                (Some(ev), Some(rv)) => match (ev.as_u64(), rv.as_u64()) {
                    (Some(en), Some(rn)) => (en, rn),
                    _ => {
                        if ev != rv {
                            out.push(mk_diff(&p, DiffKind::Type, Some(ev), Some(rv)));
                        }
                        continue;
                    }
                },
            };
            let (ek, rk) = ((es.clone(), en), (rs.clone(), rn));
            match (self.forward.get(&ek), self.backward.get(&rk)) {
                (Some(img), _) if *img != rk => {
                    out.push(mk_diff(
                        &p,
                        DiffKind::NotOneToOne {
                            other: json!(img.1),
                        },
                        Some(&json!(en)),
                        Some(&json!(rn)),
                    ));
                    continue;
                }
                (_, Some(pre)) if *pre != ek => {
                    out.push(mk_diff(
                        &p,
                        DiffKind::NotOneToOne {
                            other: json!(pre.1),
                        },
                        Some(&json!(en)),
                        Some(&json!(rn)),
                    ));
                    continue;
                }
                (Some(_), Some(_)) => continue,
                _ => {}
            }
            let reversed = self.forward.iter().find(|((s, n), (s2, n2))| {
                *s == es && *s2 == rs && (*n).cmp(&en) != (*n2).cmp(&rn)
            });
            if let Some(((_, n), (_, n2))) = reversed {
                out.push(mk_diff(
                    &p,
                    DiffKind::OrderReversed {
                        other_expected: json!(n),
                        other_received: json!(n2),
                    },
                    Some(&json!(en)),
                    Some(&json!(rn)),
                ));
                continue;
            }
            self.forward.insert(ek.clone(), rk.clone());
            self.backward.insert(rk, ek);
        }
    }
}

pub(crate) fn mk_diff(path: &str, kind: DiffKind, e: Option<&Value>, r: Option<&Value>) -> Diff {
    Diff {
        path: path.to_string(),
        kind,
        expected: e.cloned(),
        received: r.cloned(),
    }
}

/// A bijection between recorded and received request ids (of one
/// direction), of any JSON type: `1` may pair with `"c-1"`.
#[derive(Debug, Default, Clone)]
pub(crate) struct IdSpace {
    forward: BTreeMap<String, Value>,
    backward: BTreeMap<String, Value>,
}

impl IdSpace {
    pub(crate) fn unify(&mut self, e: &Value, r: &Value) -> Option<DiffKind> {
        let (ek, rk) = (e.to_string(), r.to_string());
        match (self.forward.get(&ek), self.backward.get(&rk)) {
            (Some(img), _) if img != r => Some(DiffKind::NotOneToOne { other: img.clone() }),
            (_, Some(pre)) if pre != e => Some(DiffKind::NotOneToOne { other: pre.clone() }),
            _ => {
                self.forward.insert(ek, r.clone());
                self.backward.insert(rk, e.clone());
                None
            }
        }
    }

    pub(crate) fn mapped(&self, e: &Value) -> Option<&Value> {
        self.forward.get(&e.to_string())
    }
}

/// Whether a frame is a server-to-client request (it has both `method` and
/// `id`).
fn is_request(v: &Value) -> bool {
    v.get("method").is_some() && v.get("id").is_some()
}

/// The comparison state of one run.
struct Checker {
    cmp: Comparator,
    seqs: SequenceCheck,
    server_ids: IdSpace,
    pin_ids: bool,
    frames: usize,
    mismatches: Vec<Mismatch>,
}

impl Checker {
    fn new(manifest: &Manifest) -> Checker {
        Checker {
            cmp: Comparator::new(replay_rules(manifest)),
            seqs: SequenceCheck::default(),
            server_ids: IdSpace::default(),
            pin_ids: manifest.normalize.iter().any(|p| p == "id"),
            frames: 0,
            mismatches: Vec::new(),
        }
    }

    /// Makes the id-like values of a client line fixed points.
    fn pin_client(&mut self, frame: &Value) {
        let mut strings = Vec::new();
        raw::string_values(frame, &mut strings);
        for s in strings {
            let v = Value::String(s.clone());
            if (is_hyphenated_uuid(&s) || s.starts_with("v:")) && self.cmp.mapped(&v).is_none() {
                let pin = json!({ PIN: v });
                let _ = self.cmp.compare_frame(&pin, &pin);
            }
        }
        if self.pin_ids && frame.get("method").is_some() {
            if let Some(id) = frame.get("id") {
                let pin = json!({ "id": id });
                let _ = self.cmp.compare_frame(&pin, &pin);
            }
        }
    }

    /// The raw client line with the server-minted values it echoes replaced
    /// by ours.
    fn rewrite_client(&self, line: &Line) -> String {
        let is_response = line
            .frame
            .as_ref()
            .is_some_and(|f| f.get("method").is_none());
        let string = |s: &str| match self.cmp.mapped(&Value::String(s.to_string())) {
            Some(Value::String(n)) if n != s => Some(n.clone()),
            _ => None,
        };
        let top_id = |v: &Value| {
            if is_response {
                self.server_ids.mapped(v).cloned()
            } else {
                None
            }
        };
        raw::rewrite_raw(&line.raw, &string, &top_id)
    }

    fn compare(&mut self, expected: &Line, received: &Value) {
        let e_frame = expected.frame.clone().unwrap_or(Value::Null);
        let (mut e, mut r) = (e_frame, received.clone());
        let mut diffs = Vec::new();
        if is_request(&e) && is_request(&r) {
            let (ei, ri) = (e["id"].take(), r["id"].take());
            if let Some(kind) = self.server_ids.unify(&ei, &ri) {
                diffs.push(mk_diff("$.id", kind, Some(&ei), Some(&ri)));
            }
            if let (Some(eo), Some(ro)) = (e.as_object_mut(), r.as_object_mut()) {
                eo.remove("id");
                ro.remove("id");
            }
        }
        diffs.extend(self.cmp.compare_frame(&e, &r));
        // PROTOCOL.md's extensions are additive members a public recording
        // cannot have: one the recording lacks is not a difference.
        diffs.retain(|d| {
            !(d.kind == DiffKind::Unexpected
                && super::schema::extension_member_at_path(&d.path).is_some())
        });
        self.seqs.check(&e, &r, &mut diffs);
        if !diffs.is_empty() {
            self.mismatches.push(Mismatch {
                line: expected.number,
                label: expected.label(),
                kind: MismatchKind::Frame(diffs),
            });
        }
    }

    /// Compares one segment: the frames recorded between two client lines
    /// against the frames our host sent after the first of them.
    fn segment(
        &mut self,
        after_line: usize,
        expected: &[&Line],
        received: Vec<Result<Value, String>>,
    ) {
        let e_keys: Vec<String> = expected
            .iter()
            .map(|l| frame_key(l.frame.as_ref()))
            .collect();
        let r_keys: Vec<String> = received
            .iter()
            .map(|r| frame_key(r.as_ref().ok()))
            .collect();
        let mut received: Vec<Option<Result<Value, String>>> =
            received.into_iter().map(Some).collect();
        for (ei, ri) in align(&e_keys, &r_keys) {
            self.frames += 1;
            let r = ri.and_then(|j| received[j].take());
            match (ei.map(|i| expected[i]), r) {
                (Some(e), Some(Ok(r))) => self.compare(e, &r),
                (Some(e), Some(Err(raw))) => self.mismatches.push(Mismatch {
                    line: e.number,
                    label: e.label(),
                    kind: MismatchKind::Malformed(raw),
                }),
                (Some(e), None) => self.mismatches.push(Mismatch {
                    line: e.number,
                    label: e.label(),
                    kind: MismatchKind::Missing(e.frame.clone().unwrap_or(Value::Null)),
                }),
                (None, Some(r)) => self.mismatches.push(Mismatch {
                    line: after_line,
                    label: "a frame after this client line".to_string(),
                    kind: match r {
                        Ok(v) => MismatchKind::Unexpected(v),
                        Err(raw) => MismatchKind::Malformed(raw),
                    },
                }),
                (None, None) => debug_assert!(false, "alignment yields at least one side"),
            }
        }
    }
}

/// What a frame is, for alignment: its method (and item kind), or the id it
/// answers.
fn frame_key(v: Option<&Value>) -> String {
    let Some(v) = v else {
        return "\u{0}malformed".to_string();
    };
    match v.get("method").and_then(Value::as_str) {
        Some(m) => {
            let kind = v
                .pointer("/params/item/kind")
                .and_then(Value::as_str)
                .unwrap_or("");
            format!("{m} {kind}")
        }
        None => format!("response {}", v.get("id").unwrap_or(&Value::Null)),
    }
}

/// Aligns two frame sequences by a longest common subsequence of their
/// keys; between two matched frames, the unmatched ones are paired in order
/// (so a changed frame is reported path by path) and the rest stand alone
/// (a missing or an unexpected frame). Returns `(expected index, received
/// index)` pairs in order.
fn align(e: &[String], r: &[String]) -> Vec<(Option<usize>, Option<usize>)> {
    let (n, m) = (e.len(), r.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if e[i] == r[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = Vec::new();
    let (mut i, mut j) = (0usize, 0usize);
    let (mut gap_e, mut gap_r): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    let flush = |out: &mut Vec<(Option<usize>, Option<usize>)>,
                 ge: &mut Vec<usize>,
                 gr: &mut Vec<usize>| {
        for k in 0..ge.len().max(gr.len()) {
            out.push((ge.get(k).copied(), gr.get(k).copied()));
        }
        ge.clear();
        gr.clear();
    };
    while i < n || j < m {
        if i < n && j < m && e[i] == r[j] && lcs[i][j] == lcs[i + 1][j + 1] + 1 {
            flush(&mut out, &mut gap_e, &mut gap_r);
            out.push((Some(i), Some(j)));
            i += 1;
            j += 1;
        } else if i < n && (j >= m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            gap_e.push(i);
            i += 1;
        } else {
            gap_r.push(j);
            j += 1;
        }
    }
    flush(&mut out, &mut gap_e, &mut gap_r);
    out
}

/// The session history a transcript assumes, built with our own host from
/// the transcript's material (see [`plan_history`]).
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPlan {
    /// What is built, for the report.
    pub description: String,
    /// Client frames sent on a connection of their own before the
    /// transcript starts (their answers are checked to be successes, not
    /// compared).
    pub requests: Vec<Value>,
    /// Agent steps of turns that began before the transcript, prepended to
    /// those turns' scripts (gate 0).
    pub prior_steps: Vec<(String, Step)>,
}

/// Decides whether a transcript needs history, and if so whether it can be
/// built honestly from the transcript's own material:
///
/// - `Ok(None)`: the transcript starts its own session (or uses none);
/// - `Ok(Some(plan))`: it resumes a session, and the plan builds exactly
///   the state the transcript shows (the session by its id; a running turn
///   from a resume snapshot's `activeTurn`, its `userMessage` item, its
///   in-progress `toolCall` item and the re-issued `approval/request`);
/// - `Err(why)`: the history needs material the transcript does not carry.
pub fn plan_history(t: &Transcript) -> Result<Option<HistoryPlan>, String> {
    let mut first: Option<(&Line, &Value)> = None;
    for l in &t.lines {
        let Some(f) = &l.frame else { continue };
        let m = l.method();
        if l.dir == Dir::Client && f.pointer("/params/sessionId").is_some() && m != "initialize" {
            first = Some((l, f));
            break;
        }
        if l.dir == Dir::Client && m == "session/start" {
            return Ok(None);
        }
    }
    let Some((line, frame)) = first else {
        return Ok(None);
    };
    let method = line.method();
    if method == "session/start" || !is_protocol_client_method(method) {
        // A method outside PROTOCOL.md is answered `methodNotFound` before
        // any session is looked at (error precedence, section 1).
        return Ok(None);
    }
    let sid = frame
        .pointer("/params/sessionId")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !is_hyphenated_uuid(&sid) {
        return Err(format!(
            "the session id {sid:?} is not a UUID, so no host can start it"
        ));
    }
    let answer = t.lines.iter().find(|l| {
        l.dir == Dir::Server
            && l.frame
                .as_ref()
                .is_some_and(|f| f.get("method").is_none() && f.get("id") == frame.get("id"))
    });
    let answer = answer.and_then(|l| l.frame.clone()).unwrap_or(Value::Null);
    let start = json!({"jsonrpc": "2.0", "id": "history-1", "method": "session/start",
        "params": {"commandId": HISTORY_COMMAND_IDS[0], "sessionId": sid}});
    if method != "session/resume" {
        return Err(format!(
            "line {}: {method} of a session with earlier events that the transcript does not carry",
            line.number
        ));
    }
    if answer.get("error").is_some() {
        return Ok(Some(HistoryPlan {
            description: format!(
                "session {sid} started by its id (the transcript only needs it to exist)"
            ),
            requests: vec![start],
            prior_steps: Vec::new(),
        }));
    }
    let result = answer.get("result").cloned().unwrap_or(Value::Null);
    let Some(state) = result.pointer("/history/snapshot/state") else {
        return Err(format!(
            "line {}: resume after cursor {} needs the session's earlier events up to it, which the transcript does not carry",
            line.number,
            frame.pointer("/params/cursor").unwrap_or(&Value::Null)
        ));
    };
    snapshot_plan(t, &sid, &result, state)
}

/// Command ids of the history requests (UUIDv7, fixed so runs repeat).
const HISTORY_COMMAND_IDS: [&str; 2] = [
    "0198f0ab-0000-7000-8000-00000000a001",
    "0198f0ab-0000-7000-8000-00000000a002",
];

fn snapshot_plan(
    t: &Transcript,
    sid: &str,
    result: &Value,
    state: &Value,
) -> Result<Option<HistoryPlan>, String> {
    let items = state
        .get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let active = state.get("activeTurn").cloned().unwrap_or(Value::Null);
    let Some(turn_id) = active.get("turnId").and_then(Value::as_str) else {
        return Err(
            "a snapshot without an active turn: its turns' agent output is not in the transcript"
                .into(),
        );
    };
    let command_id = active
        .get("commandId")
        .and_then(Value::as_str)
        .unwrap_or("");
    if command_id != turn_id {
        return Err(
            "the active turn's id is not its commandId, so no turn/start can reproduce it".into(),
        );
    }
    if items
        .iter()
        .any(|i| i.get("turnId").and_then(Value::as_str) != Some(turn_id))
    {
        return Err("the snapshot holds items of turns other than the active one; their output is not in the transcript".into());
    }
    let user = items
        .iter()
        .find(|i| i["kind"] == "userMessage")
        .and_then(|i| i.get("text"))
        .and_then(Value::as_str)
        .ok_or("the active turn's userMessage is not in the snapshot")?;
    let mut start_params = json!({"commandId": HISTORY_COMMAND_IDS[0], "sessionId": sid});
    if let Some(root) = result
        .pointer("/session/workspaceRoot")
        .filter(|v| v.is_string())
    {
        start_params["workspaceRoot"] = root.clone();
    }
    let requests = vec![
        json!({"jsonrpc": "2.0", "id": "history-1", "method": "session/start", "params": start_params}),
        json!({"jsonrpc": "2.0", "id": "history-2", "method": "turn/start",
            "params": {"commandId": command_id, "sessionId": sid, "input": [{"type": "text", "text": user}]}}),
    ];
    let mut prior_steps = Vec::new();
    for item in items.iter().filter(|i| i["kind"] != "userMessage") {
        match (item["kind"].as_str(), item["status"].as_str()) {
            (Some("toolCall"), Some("inProgress")) => {
                let item_id = item.get("itemId").cloned().unwrap_or(Value::Null);
                let request = t.lines.iter().filter_map(|l| l.frame.as_ref()).find(|f| {
                    f.get("method").and_then(Value::as_str) == Some("approval/request")
                        && f.pointer("/params/itemId") == Some(&item_id)
                });
                let frames = [
                    (
                        1usize,
                        false,
                        Some(json!({"method": "turn/started", "params": {"turnId": turn_id}})),
                    ),
                    (
                        2,
                        false,
                        Some(json!({"method": "item/started", "params": {"item": item}})),
                    ),
                    (
                        3,
                        false,
                        request.map(
                            |r| json!({"method": "approval/requested", "params": r["params"]}),
                        ),
                    ),
                ];
                let script = agent::compile(&frames);
                if !script.unsupported.is_empty() {
                    return Err(format!(
                        "the snapshot's tool call cannot be played: {:?}",
                        script.unsupported
                    ));
                }
                let steps = script
                    .turns
                    .get(turn_id)
                    .map(|s| s.steps.clone())
                    .unwrap_or_default();
                prior_steps.extend(steps.into_iter().map(|g| (turn_id.to_string(), g.step)));
            }
            (kind, status) => {
                return Err(format!("a snapshot item {kind:?} with status {status:?} has no recorded agent output to replay"));
            }
        }
    }
    Ok(Some(HistoryPlan {
        description: format!(
            "session {sid} started by its id; turn {turn_id} started with the snapshot's userMessage; {} earlier agent step(s) from the snapshot and the re-issued approval/request",
            prior_steps.len()
        ),
        requests,
        prior_steps,
    }))
}

/// Replays a transcript against our host (see the module docs).
pub fn replay(t: &Transcript, mut opts: ReplayOptions) -> Result<ReplayReport, ReplayError> {
    if t.manifest.client_only() {
        return Err(ReplayError::NotReplayable(format!(
            "provenance {:?}: a client-only fixture",
            t.manifest.provenance
        )));
    }
    let history = plan_history(t).map_err(ReplayError::NotReplayable)?;
    let frames: Vec<(usize, bool, Option<Value>)> = t
        .lines
        .iter()
        .map(|l| (l.number, l.dir == Dir::Client, l.frame.clone()))
        .collect();
    let mut script = agent::compile(&frames);
    if let Some(h) = &history {
        for (turn, step) in h.prior_steps.iter().rev() {
            let entry = script.turns.entry(turn.clone()).or_default();
            entry.steps.push_front(agent::Gated {
                gate_line: 0,
                source_line: 0,
                step: step.clone(),
            });
        }
    }
    if let Some(edit) = opts.edit_script.take() {
        edit(&mut script);
    }
    let unsupported = script.unsupported.clone();
    let run = catch_unwind(AssertUnwindSafe(|| {
        run_replay(t, script, history.as_ref(), &mut opts)
    }));
    match run {
        Ok(Ok((frames_compared, mismatches, wire))) => Ok(ReplayReport {
            scenario: t.name().to_string(),
            frames_compared,
            mismatches,
            unsupported,
            history: history.map(|h| h.description),
            wire,
        }),
        Ok(Err(e)) => Err(e),
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".to_string());
            Err(ReplayError::Infra(format!(
                "{why}; reproduce with: msp conformance replay --transcript {}",
                t.dir.display()
            )))
        }
    }
}

/// The host configuration a transcript's manifest asks for.
pub fn host_config(m: &Manifest) -> HostConfig {
    let mut cfg = HostConfig::new(REPLAY_DATA_DIR, Durability::Durable, m.id_seed);
    cfg.frame_limit_bytes = m.frame_limit_bytes;
    cfg
}

/// Rounds of 1 ms the driver advances after a client line, at most, while
/// frames keep coming.
const SETTLE_ROUNDS_MAX: usize = 10_000;

fn settle(h: &mut Harness, conn: u64) -> Vec<Vec<u8>> {
    let mut out = h.take_raw(conn);
    for _ in 0..SETTLE_ROUNDS_MAX {
        h.advance(1);
        let more = h.take_raw(conn);
        if more.is_empty() {
            return out;
        }
        out.extend(more);
    }
    out
}

fn parse_output(lines: Vec<Vec<u8>>, tamper: &mut Option<Tamper>) -> Vec<Result<Value, String>> {
    lines
        .into_iter()
        .map(|bytes| {
            let text = String::from_utf8_lossy(&bytes).to_string();
            let Some(body) = text.strip_suffix('\n') else {
                return Err(text);
            };
            if body.contains('\n') || body.contains('\r') {
                return Err(text);
            }
            match serde_json::from_str::<Value>(body) {
                Ok(mut v) if v.is_object() => {
                    if let Some(t) = tamper.as_mut() {
                        t(&mut v);
                    }
                    Ok(v)
                }
                _ => Err(text),
            }
        })
        .collect()
}

/// What [`run_replay`] hands back: frames compared, mismatches, the wire.
type ReplayRun = (usize, Vec<Mismatch>, Vec<(u64, Dir, String)>);

fn lines_of(conn: u64, dir: Dir, raw: &[Vec<u8>]) -> impl Iterator<Item = (u64, Dir, String)> + '_ {
    raw.iter().map(move |b| {
        let text = String::from_utf8_lossy(b);
        (
            conn,
            dir,
            text.strip_suffix('\n').unwrap_or(&text).to_string(),
        )
    })
}

fn run_replay(
    t: &Transcript,
    script: agent::Script,
    history: Option<&HistoryPlan>,
    opts: &mut ReplayOptions,
) -> Result<ReplayRun, ReplayError> {
    let mut wire: Vec<(u64, Dir, String)> = Vec::new();
    let progress = agent::Progress::default();
    let factory = agent::factory(script, progress.clone());
    let mut h = Harness::with_agent(
        host_config(&t.manifest),
        t.manifest.clock_start_ms,
        factory,
        opts.bugs,
    );
    if let Some(plan) = history {
        let c = h.connect();
        let hello = [
            json!({"jsonrpc": "2.0", "id": "history-0", "method": "initialize", "params": {"clientInfo": {"name": "history", "version": "0"}}}),
            json!({"jsonrpc": "2.0", "method": "initialized"}),
        ];
        for f in &hello {
            h.send(c, f);
            wire.push((0, Dir::Client, f.to_string()));
        }
        for r in &plan.requests {
            h.send(c, r);
            wire.push((0, Dir::Client, r.to_string()));
            let answers = settle(&mut h, c);
            wire.extend(lines_of(0, Dir::Server, &answers));
            let failed = answers
                .iter()
                .filter_map(|a| serde_json::from_slice::<Value>(a).ok())
                .find(|a| a.get("error").is_some());
            if let Some(e) = failed {
                return Err(ReplayError::NotReplayable(format!(
                    "building the history failed: {r} was answered {e}"
                )));
            }
        }
        let rest = settle(&mut h, c);
        wire.extend(lines_of(0, Dir::Server, &rest));
        h.disconnect(c);
    }
    let mut checker = Checker::new(&t.manifest);
    let conn = h.connect();
    let mut after = 0usize;
    let mut pending: Vec<&Line> = Vec::new();
    let first = settle(&mut h, conn);
    wire.extend(lines_of(1, Dir::Server, &first));
    let mut received = parse_output(first, &mut opts.tamper);
    for line in &t.lines {
        match line.dir {
            Dir::Server => pending.push(line),
            Dir::Client => {
                checker.segment(after, &pending, std::mem::take(&mut received));
                pending.clear();
                after = line.number;
                progress.reach(line.number);
                let mut bytes = checker.rewrite_client(line).into_bytes();
                bytes.push(b'\n');
                if let Some(f) = &line.frame {
                    checker.pin_client(f);
                }
                h.send_raw(conn, &bytes);
                wire.push((
                    1,
                    Dir::Client,
                    String::from_utf8_lossy(&bytes).trim_end().to_string(),
                ));
                let raw = settle(&mut h, conn);
                wire.extend(lines_of(1, Dir::Server, &raw));
                received = parse_output(raw, &mut opts.tamper);
            }
        }
    }
    checker.segment(after, &pending, received);
    Ok((checker.frames, checker.mismatches, wire))
}

// ---------------------------------------------------------------------------
// CLI

fn parse_dirs(args: &[String]) -> Result<Vec<PathBuf>, String> {
    let mut dirs = Vec::new();
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--transcript" => match it.next() {
                Some(d) => dirs.push(PathBuf::from(d)),
                None => return Err("--transcript needs a directory".into()),
            },
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if dirs.is_empty() {
        return Err("no --transcript given".into());
    }
    Ok(dirs)
}

/// `msp conformance replay|serve-fixture ...` (`args[0]` is the
/// subcommand); returns the exit code.
pub fn main(args: Vec<String>) -> i32 {
    let sub = args.first().map(String::as_str).unwrap_or("");
    let dirs = match parse_dirs(&args) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("msp conformance {sub}: {e}\n{USAGE}");
            return EXIT_USAGE;
        }
    };
    match sub {
        "replay" => main_replay(&dirs),
        "serve-fixture" if dirs.len() == 1 => fixture::main(&dirs[0]),
        "serve-fixture" => {
            eprintln!("msp conformance serve-fixture: exactly one --transcript\n{USAGE}");
            EXIT_USAGE
        }
        _ => {
            eprintln!("{USAGE}");
            EXIT_USAGE
        }
    }
}

/// `msp conformance replay --transcript DIR...`: replays each transcript,
/// prints its report and a summary; returns the exit code (0 all pass, 1
/// a mismatch or a transcript that cannot be replayed, 3 infrastructure).
pub fn main_replay(dirs: &[PathBuf]) -> i32 {
    let mut code = EXIT_PASS;
    let (mut passed, total) = (0usize, dirs.len());
    for d in dirs {
        let t = match Transcript::load(d) {
            Ok(t) => t,
            Err(e) => {
                println!("ERROR {e}");
                code = EXIT_INFRA;
                continue;
            }
        };
        let outside = t.methods_out_of_protocol();
        if !outside.is_empty() {
            println!(
                "NOTE {}: uses methods outside PROTOCOL.md: {}",
                t.name(),
                outside.join(", ")
            );
        }
        match replay(&t, ReplayOptions::default()) {
            Ok(r) => {
                println!("{r}");
                if r.passed() {
                    passed += 1;
                } else if code == EXIT_PASS {
                    code = EXIT_MISMATCH;
                }
            }
            Err(ReplayError::NotReplayable(why)) => {
                println!("FAIL {}: not replayable: {why}", t.name());
                if code == EXIT_PASS {
                    code = EXIT_MISMATCH;
                }
            }
            Err(e) => {
                println!("ERROR {}: {e}", t.name());
                code = EXIT_INFRA;
            }
        }
    }
    println!("{passed}/{total} transcripts passed");
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_are_one_to_one_per_stream_and_ordered() {
        let mut s = SequenceCheck::default();
        let f = |stream: &str, n: u64| json!({"params": {"sourceRange": {"stream": {"id": stream}, "first": {"sequence": n}, "last": {"sequence": n}}}});
        let mut out = Vec::new();
        s.check(&f("a", 1), &f("x", 1), &mut out);
        s.check(&f("a", 108), &f("x", 3), &mut out);
        s.check(&f("b", 1), &f("y", 1), &mut out);
        assert!(out.is_empty(), "{out:?}");
        s.check(&f("a", 1), &f("x", 2), &mut out);
        assert!(matches!(out[0].kind, DiffKind::NotOneToOne { .. }));
        assert_eq!(out[0].path, "$.params.sourceRange.first.sequence");
        out.clear();
        s.check(&f("a", 50), &f("x", 9), &mut out);
        assert!(
            matches!(out[0].kind, DiffKind::OrderReversed { .. }),
            "{out:?}"
        );
        out.clear();
        s.check(
            &json!({"sourceRange": {"first": {"sequence": 1}}}),
            &json!({"sourceRange": {"first": {}}}),
            &mut out,
        );
        assert_eq!(out[0].kind, DiffKind::Missing);
    }

    #[test]
    fn alignment_reports_a_missing_frame_alone_and_pairs_a_changed_one() {
        let k = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let a = align(&k(&["a", "r", "b", "c"]), &k(&["a", "b", "c"]));
        assert_eq!(
            a,
            vec![
                (Some(0), Some(0)),
                (Some(1), None),
                (Some(2), Some(1)),
                (Some(3), Some(2))
            ]
        );
        let a = align(&k(&["a", "x", "c"]), &k(&["a", "y", "c", "z"]));
        assert_eq!(
            a,
            vec![
                (Some(0), Some(0)),
                (Some(1), Some(1)),
                (Some(2), Some(2)),
                (None, Some(3))
            ]
        );
        assert!(align(&[], &[]).is_empty());
    }

    #[test]
    fn manifests_need_their_seeds() {
        let p = Path::new("m.json");
        let ok = Manifest::parse(p, r#"{"scenario":"s","provenance":"hand-authored","serverConfig":{"frameLimitBytes":1024},"seeds":{"idSeed":7,"clockStartMs":5},"normalize":["id"]}"#).unwrap();
        assert_eq!(ok.frame_limit_bytes, 1024);
        assert_eq!((ok.id_seed, ok.clock_start_ms), (7, 5));
        assert!(!ok.client_only());
        let e = Manifest::parse(p, r#"{"scenario":"s","seeds":{"idSeed":7}}"#).unwrap_err();
        assert!(e.reason.contains("clockStartMs"), "{e}");
        assert!(Manifest::parse(p, "nope").is_err());
    }

    #[test]
    fn transcript_lines_are_validated() {
        let p = Path::new("t.ndjson");
        let lines = Transcript::parse_lines(p, "{\"dir\":\"client\",\"raw\":\"{\\\"id\\\":1}\\r\"}\n\n{\"dir\":\"server\",\"raw\":\"{}\"}\n").unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].raw, "{\"id\":1}\r");
        assert!(lines[0].frame.is_some());
        assert_eq!(lines[1].number, 3);
        let e = Transcript::parse_lines(p, "{\"dir\":\"server\",\"raw\":\"nope\"}").unwrap_err();
        assert_eq!(e.line, 1);
        let e = Transcript::parse_lines(p, "{\"dir\":\"meta\"}").unwrap_err();
        assert!(e.reason.contains("unknown dir"));
    }
}
