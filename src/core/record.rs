//! Session log records: what one frame of the session log means.
//!
//! Records are the log's on-disk format (a deliberate, versioned format:
//! the frame's type byte plus a JSON payload). The session state is a fold
//! of these records ([`super::session::Session::apply`]); the live core
//! produces records and applies them through the same fold, so recovery
//! after a restart is the same code as normal operation.
//!
//! Types 1-6 are log format 1; type 7, the snapshot that heads a
//! compacted log, is log format 2 (see [`super::snapshot`] for the
//! compacted layout and its logical offsets).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::snapshot::{Snapshot, SnapshotPart, SNAPSHOT_PART_TYPE, SNAPSHOT_TYPE};
use crate::log;

/// The answer a command got at admission: a `result` or an `error` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Answer {
    /// The ack.
    Result(Value),
    /// The rejection (a `commandRejected` error object).
    Error(Value),
}

/// An admission answer as a `received` record and the ledger keep it: the
/// JSON text of its `result` or `error` object, parsed only when a replay
/// or a turn rule reads it.
///
/// A load folds every `received` record and keeps its answer, but reads
/// almost none of them: as a `serde_json::Value` tree each answer cost an
/// allocation per node to decode and again to drop, and `session/resume`
/// answers carry whole view snapshots, so that cost grew with the session
/// times its resumes (most of a long run's load time, issue 10). Serialised,
/// it is byte for byte the [`Answer`] it was made from.
///
/// The text is shared, not copied, between clones: a load starting from a
/// memoised fold ([`super::log_fold`]) copies every ledger entry.
#[derive(Clone)]
pub struct StoredAnswer {
    error: bool,
    json: std::sync::Arc<serde_json::value::RawValue>,
}

impl StoredAnswer {
    /// The stored form of `answer`.
    pub fn new(answer: &Answer) -> StoredAnswer {
        match answer {
            Answer::Result(v) => StoredAnswer::written(false, v),
            Answer::Error(v) => StoredAnswer::new_error(v),
        }
    }

    /// The stored form of the ack `Answer::Result(result)`.
    pub fn new_result(result: &Value) -> StoredAnswer {
        StoredAnswer::written(false, result)
    }

    /// The stored form of the rejection `Answer::Error(error)`.
    pub fn new_error(error: &Value) -> StoredAnswer {
        StoredAnswer::written(true, error)
    }

    fn written(error: bool, v: &Value) -> StoredAnswer {
        StoredAnswer {
            error,
            json: serde_json::value::to_raw_value(v)
                .expect("a Value always serialises")
                .into(),
        }
    }

    /// The stored form of the ack whose `result` is `j` (written once,
    /// through serde_json, and not parsed back: a resume's answer is the
    /// whole view).
    pub fn result_j(j: &crate::proto::jwrite::J<'_>) -> StoredAnswer {
        StoredAnswer {
            error: false,
            json: serde_json::value::to_raw_value(j)
                .expect("a J always serialises")
                .into(),
        }
    }

    /// The `result` or `error` object's text, as serde_json wrote it.
    pub fn raw(&self) -> &serde_json::value::RawValue {
        &self.json
    }

    /// The answer, parsed. An error's text was checked when it was read
    /// (or written from a `Value`), so only an ack's can fail: its text is
    /// kept as read, well-formed JSON but not checked to be text a `Value`
    /// holds (a resume's ack is the whole view, and checking every one
    /// costs every load; the host writes none that fails). A replay that
    /// needs it as a tree then answers `logCorrupt` (see
    /// [`Unreadable`]); a replay that only copies the text never parses it.
    pub fn to_answer(&self) -> Result<Answer, Unreadable> {
        let v: Value =
            serde_json::from_str(self.json.get()).map_err(|e| Unreadable(e.to_string()))?;
        Ok(if self.error {
            Answer::Error(v)
        } else {
            Answer::Result(v)
        })
    }

    /// Whether the answer is an ack (`result`), not a rejection.
    pub fn is_result(&self) -> bool {
        !self.error
    }

    /// A top-level string member of an ack (`turnId`, `disposition`),
    /// read without building the whole tree.
    pub fn result_str(&self, member: &str) -> Option<String> {
        if self.error {
            return None;
        }
        let [found] = super::members::members_str(self.json.get(), [member]);
        found
    }
}

/// A stored ack whose text, well-formed JSON, is not text a `Value` holds
/// (nested deeper than serde_json allows, a number out of `f64` range, a
/// lone surrogate escape): only a hand-made or damaged-then-rechecksummed
/// log holds one. The detail is serde_json's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable(pub String);

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a stored answer no JSON value holds: {}", self.0)
    }
}

impl std::fmt::Debug for StoredAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tag = if self.error { "Error" } else { "Result" };
        write!(f, "{tag}({})", self.json.get())
    }
}

impl PartialEq for StoredAnswer {
    /// Equal JSON values (the text of one written by another writer may
    /// differ in spacing or member order).
    fn eq(&self, other: &StoredAnswer) -> bool {
        // Text no `Value` holds equals only itself (as `JsonText`'s).
        self.error == other.error
            && (self.json.get() == other.json.get()
                || matches!((self.to_answer(), other.to_answer()), (Ok(a), Ok(b)) if a == b))
    }
}

impl Serialize for StoredAnswer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry(if self.error { "error" } else { "result" }, &*self.json)?;
        m.end()
    }
}

impl<'de> Deserialize<'de> for StoredAnswer {
    /// Through [`Answer`], so any deserializer can read it (the general
    /// record path buffers, and a raw JSON value cannot be read from a
    /// buffer); the fast record path reads the text directly.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<StoredAnswer, D::Error> {
        Answer::deserialize(d).map(|a| StoredAnswer::new(&a))
    }
}

/// A command's terminal outcome (the `settled` half of the intake pair).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum Outcome {
    /// The command took effect.
    Applied,
    /// Rejected; `error` is the rejection replays answer.
    Rejected {
        /// The `commandRejected` error object.
        error: Value,
    },
    /// The intake never settled before its host died.
    Abandoned,
}

/// One session log record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "record")]
pub enum Record {
    /// First record of every log: the session exists.
    #[serde(rename_all = "camelCase")]
    Created {
        /// The session id.
        session_id: String,
        /// Creation time (host clock).
        created_at_ms: u64,
        /// `workspaceRoot`.
        workspace_root: Option<String>,
        /// The `session/start` command that created it.
        start_command_id: String,
    },
    /// A host took the lease and loaded the session.
    #[serde(rename_all = "camelCase")]
    Loaded {
        /// Load time.
        at_ms: u64,
    },
    /// The `received` half of the intake pair: signature and admission
    /// decision.
    #[serde(rename_all = "camelCase")]
    Received {
        /// `commandId` as sent.
        command_id: String,
        /// The method.
        method: String,
        /// Normalised params.
        params: Value,
        /// The payload signature (RFC 8785).
        signature: String,
        /// The admission decision.
        answer: StoredAnswer,
        /// Admission time.
        at_ms: u64,
    },
    /// The `settled` half of the intake pair.
    #[serde(rename_all = "camelCase")]
    Settled {
        /// `commandId` as sent.
        command_id: String,
        /// The outcome.
        #[serde(flatten)]
        outcome: Outcome,
    },
    /// A durable view event, numbered `n` from 1.
    #[serde(rename_all = "camelCase")]
    Event {
        /// The durable ordinal (`v:<sessionId>:<n>`).
        n: u64,
        /// The notification method.
        method: String,
        /// The notification params (`viewCursor` included), as the text
        /// the log holds: written once by the host, sent to subscribers and
        /// kept by the fold as it is, never parsed into a tree on a load
        /// (the fold reads the few members it needs from the text).
        #[serde(deserialize_with = "super::session::JsonText::via_value")]
        params: super::session::EventParams,
        /// Emission time.
        emitted_at_ms: u64,
        /// The command whose effect this event records, if any.
        cause: Option<String>,
    },
    /// Orderly unload (`idle` or `hostShutdown`).
    #[serde(rename_all = "camelCase")]
    Closed {
        /// The reason.
        reason: String,
        /// Unload time.
        at_ms: u64,
    },
    /// The fold of the logical log up to the snapshot's `archiveLen`: the
    /// first record of a compacted log (type 7). Encoded and decoded on its
    /// own (its JSON is [`Snapshot`]'s), never through this enum's tag.
    #[serde(skip)]
    Snapshot(Box<Snapshot>),
}

/// The derived serialisation of `Record::Settled` (the tag, the command
/// id, then the flattened outcome's tag and `error`), written without
/// serde's flatten, which buffers the outcome through a map serialiser of
/// its own: a twentieth of the host's instructions on a rejection-heavy
/// load (issue 11). A test compares the bytes with the derived ones.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SettledOut<'a> {
    record: &'static str,
    command_id: &'a str,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a Value>,
}

impl<'a> SettledOut<'a> {
    fn of(command_id: &'a str, outcome: &'a Outcome) -> SettledOut<'a> {
        let (tag, error) = match outcome {
            Outcome::Applied => ("applied", None),
            Outcome::Rejected { error } => ("rejected", Some(error)),
            Outcome::Abandoned => ("abandoned", None),
        };
        SettledOut {
            record: "settled",
            command_id,
            outcome: tag,
            error,
        }
    }
}

impl Record {
    /// The frame type byte of this record.
    pub fn type_byte(&self) -> u8 {
        match self {
            Record::Created { .. } => 1,
            Record::Loaded { .. } => 2,
            Record::Received { .. } => 3,
            Record::Settled { .. } => 4,
            Record::Event { .. } => 5,
            Record::Closed { .. } => 6,
            Record::Snapshot(_) => SNAPSHOT_TYPE,
        }
    }

    /// Encodes the record as one log frame (a snapshot as its head and
    /// parts; see [`super::snapshot::encode`]).
    pub fn encode(&self) -> Vec<u8> {
        if let Record::Snapshot(s) = self {
            return super::snapshot::encode((**s).clone())
                .expect("a snapshot within the frame limit");
        }
        let payload = match self {
            Record::Snapshot(s) => serde_json::to_vec(s),
            Record::Settled {
                command_id,
                outcome,
            } => serde_json::to_vec(&SettledOut::of(command_id, outcome)),
            other => serde_json::to_vec(other),
        }
        .expect("records always serialise");
        log::encode_frame(self.type_byte(), &payload)
    }

    /// Decodes a frame's payload; `None` when the payload does not match its
    /// type byte (a bug or a foreign file: the load fails, see
    /// [`decode_log`]).
    pub fn decode(record_type: u8, payload: &[u8]) -> Option<Record> {
        if record_type == SNAPSHOT_TYPE {
            let s: Snapshot = serde_json::from_slice(payload).ok()?;
            return Some(Record::Snapshot(Box::new(s)));
        }
        if let Some(r) = memo::get(record_type, payload) {
            return Some(r);
        }
        let r = match fast::decode(record_type, payload) {
            Some(r) => r,
            None => {
                let r: Record = serde_json::from_slice(payload).ok()?;
                (r.type_byte() == record_type).then_some(r)?
            }
        };
        memo::put(record_type, payload, &r);
        Some(r)
    }
}

/// A memo of decoded record payloads, for the simulator only (off unless
/// [`DecodeMemo::install`]ed on the thread; `msp serve` never does).
///
/// A simulated run loads the same sessions over and over (every restart,
/// handover and idle unload reloads, every lease-free read folds the log
/// again), and each load decoded every record of the log from JSON: most
/// of a run's load time, and it grows with the log (issue 10). Decoding is
/// a pure function of (type byte, payload bytes), so a payload seen before
/// is answered with a clone of what it decoded to, looked up by its exact
/// bytes: whatever the disk holds is still what is decoded (a flipped bit
/// is another key), so the result, and every trace, is unchanged. The
/// table is a plain hash map with a fixed-key hasher (no OS randomness;
/// it is never iterated) and is emptied when it holds too many bytes.
pub mod memo {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::hash::{BuildHasherDefault, Hasher};

    use super::Record;

    /// Payload bytes kept before the memo starts afresh.
    const MAX_BYTES: usize = 16 << 20;

    type Table = HashMap<Box<[u8]>, Record, BuildHasherDefault<WordHasher>>;

    /// A fixed-key multiply-rotate hash over 8-byte words (the Fx hash's
    /// step): SipHash over every payload cost more than a tenth of what
    /// the memo saved. Keys are compared exactly on a hit, so collisions
    /// cost time, never a wrong record; the keys are our own log's bytes.
    #[derive(Default)]
    struct WordHasher(u64);

    impl WordHasher {
        fn add(&mut self, word: u64) {
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    impl Hasher for WordHasher {
        fn write(&mut self, bytes: &[u8]) {
            let mut words = bytes.chunks_exact(8);
            for w in &mut words {
                self.add(u64::from_le_bytes(w.try_into().expect("8 bytes")));
            }
            let mut last = [0u8; 8];
            let rest = words.remainder();
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }

        fn write_usize(&mut self, n: usize) {
            self.add(n as u64);
        }

        fn finish(&self) -> u64 {
            self.0
        }
    }

    #[derive(Default)]
    struct Memo {
        /// One table per record type 1..=6.
        tables: [Table; 6],
        bytes: usize,
    }

    thread_local! {
        static MEMO: RefCell<Option<Memo>> = const { RefCell::new(None) };
    }

    /// Record decoding on this thread is memoised while this lives.
    #[must_use = "the memo is removed when the guard drops"]
    pub struct DecodeMemo(());

    impl DecodeMemo {
        /// Installs an empty memo on this thread (replacing any).
        pub fn install() -> DecodeMemo {
            MEMO.with(|m| *m.borrow_mut() = Some(Memo::default()));
            DecodeMemo(())
        }
    }

    impl Drop for DecodeMemo {
        fn drop(&mut self) {
            MEMO.with(|m| *m.borrow_mut() = None);
        }
    }

    fn slot(record_type: u8) -> Option<usize> {
        (1..=6)
            .contains(&record_type)
            .then(|| usize::from(record_type - 1))
    }

    pub(super) fn get(record_type: u8, payload: &[u8]) -> Option<Record> {
        let i = slot(record_type)?;
        MEMO.with(|m| m.borrow().as_ref()?.tables[i].get(payload).cloned())
    }

    pub(super) fn put(record_type: u8, payload: &[u8], r: &Record) {
        let Some(i) = slot(record_type) else { return };
        MEMO.with(|m| {
            let mut m = m.borrow_mut();
            let Some(memo) = m.as_mut() else { return };
            if memo.bytes + payload.len() > MAX_BYTES {
                *memo = Memo::default();
            }
            memo.bytes += payload.len();
            memo.tables[i].insert(payload.into(), r.clone());
        });
    }
}

pub use memo::DecodeMemo;

/// The fast path of [`Record::decode`]: the type byte names the variant,
/// so its payload is read straight into that variant's fields (serde's
/// internally tagged enum buffers every payload into an intermediate tree
/// first, and a flattened field once more: most of a log load's time).
/// It accepts only payloads the tagged enum reads the same way (the tag a
/// plain string naming the type byte's variant; a `settled` outcome one
/// of its three names with `error` present exactly when `rejected`) and
/// gives up on anything else, which then takes the general path: what a
/// malformed record decodes to (nothing) is the general path's answer.
mod fast {
    use serde::Deserialize;
    use serde_json::Value;

    use super::{Outcome, Record, StoredAnswer};

    /// An answer read as text (see [`StoredAnswer`]).
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    enum RawAnswer {
        Result(Box<serde_json::value::RawValue>),
        Error(Box<serde_json::value::RawValue>),
    }

    impl From<RawAnswer> for StoredAnswer {
        fn from(a: RawAnswer) -> StoredAnswer {
            match a {
                RawAnswer::Result(json) => StoredAnswer {
                    error: false,
                    json: json.into(),
                },
                RawAnswer::Error(json) => StoredAnswer {
                    error: true,
                    json: json.into(),
                },
            }
        }
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Created {
        record: String,
        session_id: String,
        created_at_ms: u64,
        workspace_root: Option<String>,
        start_command_id: String,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct AtMs {
        record: String,
        at_ms: u64,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Received {
        record: String,
        command_id: String,
        method: String,
        params: Value,
        signature: String,
        answer: RawAnswer,
        at_ms: u64,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Settled {
        record: String,
        command_id: String,
        outcome: String,
        error: Option<Value>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Event {
        record: String,
        n: u64,
        method: String,
        params: crate::core::session::EventParams,
        emitted_at_ms: u64,
        cause: Option<String>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Closed {
        record: String,
        reason: String,
        at_ms: u64,
    }

    /// The record of type `record_type` in `payload`, when the fast path
    /// can read it (see the module).
    pub(super) fn decode(record_type: u8, payload: &[u8]) -> Option<Record> {
        // The payload checked as UTF-8 once, whole: read from a `str`,
        // serde_json does not check each string again (it did, string by
        // string). Not UTF-8: the general path says what it is.
        let payload = std::str::from_utf8(payload).ok()?;
        match record_type {
            1 => {
                let r: Created = serde_json::from_str(payload).ok()?;
                (r.record == "created").then_some(Record::Created {
                    session_id: r.session_id,
                    created_at_ms: r.created_at_ms,
                    workspace_root: r.workspace_root,
                    start_command_id: r.start_command_id,
                })
            }
            2 => {
                let r: AtMs = serde_json::from_str(payload).ok()?;
                (r.record == "loaded").then_some(Record::Loaded { at_ms: r.at_ms })
            }
            3 => {
                let r: Received = serde_json::from_str(payload).ok()?;
                // A rejection is parsed whenever it is answered: its text
                // must be one a `Value` holds, as the general path reads
                // it. (An ack's is checked only when a replay parses it:
                // see `StoredAnswer::to_answer`.)
                if let RawAnswer::Error(e) = &r.answer {
                    if !crate::core::members::value_readable(e.get()) {
                        return None;
                    }
                }
                (r.record == "received").then_some(Record::Received {
                    command_id: r.command_id,
                    method: r.method,
                    params: r.params,
                    signature: r.signature,
                    answer: r.answer.into(),
                    at_ms: r.at_ms,
                })
            }
            4 => {
                let r: Settled = serde_json::from_str(payload).ok()?;
                if r.record != "settled" {
                    return None;
                }
                let outcome = match (r.outcome.as_str(), r.error) {
                    ("applied", None) => Outcome::Applied,
                    ("abandoned", None) => Outcome::Abandoned,
                    ("rejected", Some(error)) => Outcome::Rejected { error },
                    _ => return None,
                };
                Some(Record::Settled {
                    command_id: r.command_id,
                    outcome,
                })
            }
            5 => {
                let r: Event = serde_json::from_str(payload).ok()?;
                (r.record == "event").then_some(Record::Event {
                    n: r.n,
                    method: r.method,
                    params: r.params,
                    emitted_at_ms: r.emitted_at_ms,
                    cause: r.cause,
                })
            }
            6 => {
                let r: Closed = serde_json::from_str(payload).ok()?;
                (r.record == "closed").then_some(Record::Closed {
                    reason: r.reason,
                    at_ms: r.at_ms,
                })
            }
            _ => None,
        }
    }
}

/// Why a log could not be loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct LogCorrupt {
    /// Byte offset of the first bad frame.
    pub offset: u64,
    /// What is wrong there.
    pub detail: String,
}

/// A decoded log: its records, the length of the valid prefix, and whether
/// a torn tail follows it (to be truncated before the next append).
///
/// Offsets are *logical* (see [`super::snapshot`]): in a compacted log, the
/// snapshot's own offset is its `archiveLen`, and a record after it ends at
/// its physical end minus `snapshot_bytes` plus `archive_len`. In a log of
/// format 1 both are 0 and logical offsets are physical.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedLog {
    /// Records with the logical end offset of each.
    pub records: Vec<(Record, u64)>,
    /// Length of the valid prefix (physical).
    pub valid_len: u64,
    /// A torn tail follows `valid_len`.
    pub torn: bool,
    /// Physical length of the head snapshot frame (0: none).
    pub snapshot_bytes: u64,
    /// The archive's logical length (0: no snapshot).
    pub archive_len: u64,
}

/// Decodes a whole session log, applying the torn-tail rule. A snapshot is
/// accepted only as the first record, and is checked
/// ([`super::session::Session::check_snapshot`]) before anything trusts
/// it.
pub fn decode_log(bytes: &[u8]) -> Result<DecodedLog, LogCorrupt> {
    let mut records = Vec::new();
    let shape = decode_log_each(bytes, |r, end| records.push((r, end)))?;
    Ok(DecodedLog {
        records,
        valid_len: shape.valid_len,
        torn: shape.torn,
        snapshot_bytes: shape.snapshot_bytes,
        archive_len: shape.archive_len,
    })
}

/// What [`decode_log_each`] found besides the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogShape {
    /// Length of the valid prefix (physical).
    pub valid_len: u64,
    /// A torn tail follows `valid_len`.
    pub torn: bool,
    /// Physical length of the head snapshot frame (0: none).
    pub snapshot_bytes: u64,
    /// The archive's logical length (0: no snapshot).
    pub archive_len: u64,
}

/// As [`decode_log`], handing each record (with its logical end offset)
/// to `each` as soon as it is decoded instead of collecting them: a load
/// folds one record at a time, so it never holds every decoded record of
/// a long log at once. On `Err` some records may already have been
/// handed over: the caller drops what it folded.
pub fn decode_log_each(
    bytes: &[u8],
    each: impl FnMut(Record, u64),
) -> Result<LogShape, LogCorrupt> {
    decode_log_each_from(bytes, None, each)
}

/// As [`decode_log_each`], going on after a prefix of `bytes` already
/// decoded: `prior` is what decoding `bytes[..prior.valid_len]` found (a
/// prefix of whole valid frames, no torn tail), and only the records after
/// it are handed to `each`. The shape returned is the whole log's, as
/// [`decode_log_each`] would find it.
pub fn decode_log_each_from(
    bytes: &[u8],
    prior: Option<LogShape>,
    mut each: impl FnMut(Record, u64),
) -> Result<LogShape, LogCorrupt> {
    let prior = prior.filter(|p| p.valid_len > 0);
    if let Some(p) = prior {
        assert!(!p.torn, "a prior prefix is whole frames");
        assert!(
            p.valid_len <= bytes.len() as u64,
            "a prior prefix of these bytes"
        );
    }
    let start = prior.map_or(0, |p| p.valid_len as usize);
    let scan = log::scan_from(bytes, start);
    // A snapshot is never torn (it is written and synced under another
    // name, then renamed): a bad first frame that says it is one is
    // damage, not a torn append, and cutting it would lose the session.
    if let (None, log::Tail::Torn { offset: 0, reason }) = (prior, scan.tail) {
        let says_snapshot =
            bytes.len() > 5 && bytes[..4] == log::FRAME_MAGIC && bytes[5] == SNAPSHOT_TYPE;
        if says_snapshot {
            return Err(LogCorrupt {
                offset: 0,
                detail: format!("damaged snapshot: {reason}"),
            });
        }
    }
    let (frames, valid_len, torn) = scan.into_result().map_err(|e| LogCorrupt {
        offset: e.offset,
        detail: e.reason.to_string(),
    })?;
    let (mut snapshot_bytes, mut archive_len) =
        prior.map_or((0, 0), |p| (p.snapshot_bytes, p.archive_len));
    let first = usize::from(prior.is_some());
    let mut frames = frames.into_iter().enumerate().map(|(i, f)| (i + first, f));
    while let Some((i, f)) = frames.next() {
        let corrupt = |detail: String| LogCorrupt {
            offset: f.offset,
            detail,
        };
        match Record::decode(f.record_type, f.payload) {
            Some(Record::Snapshot(mut s)) => {
                if i != 0 {
                    return Err(corrupt("a snapshot record after the first record".into()));
                }
                let mut end = f.end_offset();
                for _ in 0..s.parts {
                    let part = frames
                        .next()
                        .map(|(_, p)| p)
                        .filter(|p| p.record_type == SNAPSHOT_PART_TYPE);
                    let Some(p) = part else {
                        return Err(corrupt("a snapshot without all its parts".into()));
                    };
                    let part: SnapshotPart =
                        serde_json::from_slice(p.payload).map_err(|e| LogCorrupt {
                            offset: p.offset,
                            detail: format!("undecodable snapshot part: {e}"),
                        })?;
                    s.ledger.extend(part.ledger);
                    s.event_starts.extend(part.event_starts);
                    end = p.end_offset();
                }
                s.parts = 0;
                super::session::Session::check_snapshot(&s)
                    .map_err(|b| corrupt(format!("bad snapshot: {}", b.0)))?;
                snapshot_bytes = end;
                archive_len = s.archive_len;
                each(Record::Snapshot(s), archive_len);
            }
            Some(r) => {
                let end = f.end_offset() - snapshot_bytes + archive_len;
                each(r, end);
            }
            None => {
                return Err(corrupt(format!(
                    "undecodable record of type {}",
                    f.record_type
                )))
            }
        }
    }
    Ok(LogShape {
        valid_len,
        torn,
        snapshot_bytes,
        archive_len,
    })
}

/// Decodes a run of whole records read from the archive at logical offset
/// `from` (a page, a backlog, a replayed answer). Anything but whole valid
/// records is corruption at the logical offset where it begins.
pub fn decode_archived(bytes: &[u8], from: u64) -> Result<Vec<(Record, u64)>, LogCorrupt> {
    let scan = log::scan(bytes);
    if let log::Tail::Torn { offset, reason } | log::Tail::Corrupt { offset, reason } = scan.tail {
        return Err(LogCorrupt {
            offset: from + offset,
            detail: reason.to_string(),
        });
    }
    let mut out = Vec::with_capacity(scan.frames.len());
    for f in scan.frames {
        match Record::decode(f.record_type, f.payload) {
            Some(Record::Snapshot(_)) | None => {
                return Err(LogCorrupt {
                    offset: from + f.offset,
                    detail: format!("undecodable archived record of type {}", f.record_type),
                })
            }
            Some(r) => out.push((r, from + f.end_offset())),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::session::EventParams;
    use serde_json::json;

    fn sample() -> Vec<Record> {
        vec![
            Record::Created {
                session_id: "s".into(),
                created_at_ms: 1,
                workspace_root: None,
                start_command_id: "c".into(),
            },
            Record::Received {
                command_id: "c".into(),
                method: "turn/start".into(),
                params: json!({"a": 1}),
                signature: "sig".into(),
                answer: StoredAnswer::new(&Answer::Result(json!({"ok": true}))),
                at_ms: 2,
            },
            Record::Settled {
                command_id: "c".into(),
                outcome: Outcome::Rejected {
                    error: json!({"code": -32030}),
                },
            },
            Record::Settled {
                command_id: "d".into(),
                outcome: Outcome::Abandoned,
            },
        ]
    }

    #[test]
    fn records_round_trip_through_frames() {
        let mut bytes = Vec::new();
        for r in sample() {
            bytes.extend(r.encode());
        }
        let d = decode_log(&bytes).unwrap();
        let got: Vec<Record> = d.records.into_iter().map(|(r, _)| r).collect();
        assert_eq!(got, sample());
        assert!(!d.torn);
    }

    #[test]
    fn torn_tail_reported_and_mid_log_damage_is_corrupt() {
        let mut bytes = Vec::new();
        for r in sample() {
            bytes.extend(r.encode());
        }
        let cut = &bytes[..bytes.len() - 3];
        let d = decode_log(cut).unwrap();
        assert!(d.torn);
        assert_eq!(d.records.len(), 3);
        let mut bad = bytes.clone();
        bad[20] ^= 0xff;
        assert_eq!(decode_log(&bad).unwrap_err().offset, 0);
    }

    /// Every kind of record, each outcome and answer.
    fn every_kind() -> Vec<Record> {
        let mut v = sample();
        v.extend([
            Record::Created {
                session_id: "s\u{e9}\"q".into(),
                created_at_ms: 7,
                workspace_root: Some("/w".into()),
                start_command_id: "c".into(),
            },
            Record::Loaded { at_ms: 3 },
            Record::Received {
                command_id: "e".into(),
                method: "turn/steer".into(),
                params: json!({"x": [1, 2.5, null, "t"], "y": {"z": false}}),
                signature: "sig2".into(),
                answer: StoredAnswer::new(&Answer::Error(
                    json!({"code": -32030, "data": {"reason": "r"}}),
                )),
                at_ms: 4,
            },
            Record::Settled {
                command_id: "e".into(),
                outcome: Outcome::Applied,
            },
            Record::Settled {
                command_id: "f".into(),
                outcome: Outcome::Rejected { error: Value::Null },
            },
            Record::Event {
                n: 9,
                method: "turn/started".into(),
                params: EventParams::of(&json!({"turnId": "t"})),
                emitted_at_ms: 5,
                cause: Some("c".into()),
            },
            Record::Event {
                n: 10,
                method: "turn/completed".into(),
                params: EventParams::of(&json!({})),
                emitted_at_ms: 6,
                cause: None,
            },
            Record::Closed {
                reason: "idle".into(),
                at_ms: 8,
            },
        ]);
        v
    }

    /// The general (tagged enum) path alone.
    fn general(record_type: u8, payload: &[u8]) -> Option<Record> {
        let r: Record = serde_json::from_slice(payload).ok()?;
        (r.type_byte() == record_type).then_some(r)
    }

    #[test]
    fn the_fast_path_reads_every_kind_as_the_general_path_does() {
        for r in every_kind() {
            let payload = serde_json::to_vec(&r).unwrap();
            let t = r.type_byte();
            // A rejection with a null error is left to the general path.
            let null_error = matches!(
                &r,
                Record::Settled {
                    outcome: Outcome::Rejected { error: Value::Null },
                    ..
                }
            );
            let want = (!null_error).then_some(&r);
            assert_eq!(fast::decode(t, &payload).as_ref(), want, "{r:?}");
            assert_eq!(Record::decode(t, &payload).as_ref(), Some(&r), "{r:?}");
            assert_eq!(general(t, &payload).as_ref(), Some(&r), "{r:?}");
        }
    }

    /// With the memo installed, every payload decodes as without it: the
    /// first time, again (from the memo), and with a byte changed (another
    /// key: decoded afresh, or refused as before); a wrong type byte for a
    /// memoised payload is still refused.
    #[test]
    fn the_memo_answers_what_decoding_would() {
        let _memo = DecodeMemo::install();
        for r in every_kind() {
            let payload = serde_json::to_vec(&r).unwrap();
            let t = r.type_byte();
            let want = general(t, &payload);
            for _ in 0..2 {
                assert_eq!(Record::decode(t, &payload), want, "{r:?}");
            }
            let other = if t == 2 { 6 } else { 2 };
            assert_eq!(Record::decode(other, &payload), general(other, &payload));
            let mut flipped = payload.clone();
            let at = flipped.len() / 2;
            flipped[at] ^= 0x01;
            for _ in 0..2 {
                assert_eq!(Record::decode(t, &flipped), general(t, &flipped), "{r:?}");
            }
        }
    }

    #[test]
    fn payloads_the_fast_path_refuses_decode_as_the_general_path_says() {
        let cases: [(u8, &str); 14] = [
            // Members in any order, unknown members ignored.
            (2, r#"{"atMs":1,"extra":[1],"record":"loaded"}"#),
            // A tag of another kind, or none.
            (2, r#"{"record":"closed","atMs":1}"#),
            (2, r#"{"atMs":1}"#),
            // A duplicate member.
            (2, r#"{"record":"loaded","atMs":1,"atMs":2}"#),
            (2, r#"{"record":"loaded","record":"loaded","atMs":1}"#),
            // A wrong type, a missing member.
            (6, r#"{"record":"closed","reason":3,"atMs":1}"#),
            (6, r#"{"record":"closed","atMs":1}"#),
            // Outcomes: an error where none belongs, none where one must be.
            (
                4,
                r#"{"record":"settled","commandId":"c","outcome":"applied","error":1}"#,
            ),
            (
                4,
                r#"{"record":"settled","commandId":"c","outcome":"rejected"}"#,
            ),
            (
                4,
                r#"{"record":"settled","commandId":"c","outcome":"rejected","error":null}"#,
            ),
            (
                4,
                r#"{"record":"settled","commandId":"c","outcome":"nope"}"#,
            ),
            (4, r#"{"record":"settled","commandId":"c"}"#),
            // Not JSON, not an object.
            (5, r#"{"record":"event","n":1,"#),
            (3, r#"[1,2]"#),
        ];
        for (t, p) in cases {
            assert_eq!(
                Record::decode(t, p.as_bytes()),
                general(t, p.as_bytes()),
                "{p}"
            );
        }
        // Event params kept as read that no `Value` holds (too deep, a
        // number out of range, a lone surrogate): refused by both paths.
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        for bad in [deep.as_str(), "1e999", r#""\ud83d""#] {
            let event = format!(
                r#"{{"record":"event","n":1,"method":"m","params":{bad},"emittedAtMs":1,"cause":null}}"#
            );
            let received = format!(
                r#"{{"record":"received","commandId":"c","method":"m","params":{{}},"signature":"s","answer":{{"result":{bad}}},"atMs":1}}"#
            );
            assert_eq!(Record::decode(5, event.as_bytes()), None, "{event}");
            assert_eq!(general(5, event.as_bytes()), None, "{event}");
            // A rejection kept as read: refused by both paths.
            let rejected = received.replace(r#""result":"#, r#""error":"#);
            assert_eq!(Record::decode(3, rejected.as_bytes()), None, "{rejected}");
            assert_eq!(general(3, rejected.as_bytes()), None, "{rejected}");
            // An ack kept as read is not checked so (a resume's is the
            // whole view): the general path refuses it, the fast path
            // keeps it, and a parse of it is a typed error, never a panic.
            assert_eq!(general(3, received.as_bytes()), None, "{received}");
            let Some(Record::Received { answer, .. }) = Record::decode(3, received.as_bytes())
            else {
                panic!("the fast path keeps {received}")
            };
            assert!(answer.is_result());
            let why = answer.to_answer().expect_err(&received);
            assert!(why
                .to_string()
                .starts_with("a stored answer no JSON value holds"));
            // It equals only itself.
            assert_eq!(answer, answer.clone());
            assert_ne!(answer, StoredAnswer::new_result(&json!(1)));
            assert_ne!(StoredAnswer::new_result(&json!(1)), answer);
        }
        // A foreign type byte.
        assert_eq!(Record::decode(9, br#"{"record":"loaded","atMs":1}"#), None);
    }

    #[test]
    fn a_stored_answer_is_the_answer_it_was_made_from() {
        let ack = json!({"disposition": "queued", "turnId": "t\"1", "n": [1, {"a": null}]});
        let rej = json!({"code": -32030, "message": "m", "data": {"reason": "abandoned"}});
        for a in [Answer::Result(ack.clone()), Answer::Error(rej)] {
            let stored = StoredAnswer::new(&a);
            // Byte for byte what the answer serialises to.
            assert_eq!(
                serde_json::to_string(&stored).unwrap(),
                serde_json::to_string(&a).unwrap()
            );
            assert_eq!(stored.to_answer(), Ok(a.clone()));
            assert_eq!(stored.is_result(), matches!(a, Answer::Result(_)));
            // Read back through any deserializer.
            let back: StoredAnswer =
                serde_json::from_value(serde_json::to_value(&a).unwrap()).unwrap();
            assert_eq!(back, stored);
        }
        let stored = StoredAnswer::new(&Answer::Result(ack));
        assert_eq!(stored.result_str("turnId").as_deref(), Some("t\"1"));
        assert_eq!(stored.result_str("disposition").as_deref(), Some("queued"));
        assert_eq!(stored.result_str("n"), None, "not a string");
        assert_eq!(stored.result_str("missing"), None);
        let rejected = StoredAnswer::new(&Answer::Error(json!({"turnId": "t"})));
        assert_eq!(
            rejected.result_str("turnId"),
            None,
            "a rejection has no ack members"
        );
    }

    #[test]
    fn stored_answers_compare_as_json_values_not_as_text() {
        let spaced = br#"{"record":"received","commandId":"c","method":"m","params":{},"signature":"s","answer":{"result": {"b": 1, "a": 2}},"atMs":1}"#;
        let Some(Record::Received { answer, .. }) = Record::decode(3, spaced) else {
            panic!("decodes")
        };
        assert_eq!(
            answer,
            StoredAnswer::new(&Answer::Result(json!({"a": 2, "b": 1})))
        );
        assert_ne!(
            answer,
            StoredAnswer::new(&Answer::Result(json!({"a": 2, "b": 2})))
        );
        assert_ne!(
            answer,
            StoredAnswer::new(&Answer::Error(json!({"a": 2, "b": 1})))
        );
        // Two members in the answer object: neither path reads it.
        let two = br#"{"record":"received","commandId":"c","method":"m","params":{},"signature":"s","answer":{"result":1,"error":2},"atMs":1}"#;
        assert_eq!(Record::decode(3, two), None);
    }

    /// A log of one frame whose payload fails its CRC, of type `t`.
    fn one_damaged_frame(t: u8) -> Vec<u8> {
        let mut bytes = crate::log::encode_frame(t, br#"{"record":"x","atMs":1}"#);
        let last = bytes.len() - 2;
        bytes[last] ^= 0x20;
        bytes
    }

    #[test]
    fn a_damaged_sole_snapshot_is_corrupt_and_a_damaged_sole_record_torn() {
        // An ordinary record that fails its CRC at the log's end is a
        // torn append, cut before the next one. A snapshot is never
        // appended (written under another name, synced, renamed): a bad
        // one is damage, and cutting it would lose the whole session.
        for t in [1, 3, 4, 5] {
            let d = decode_log(&one_damaged_frame(t)).expect("a torn tail");
            assert!(d.torn && d.valid_len == 0, "type {t}");
        }
        let e = decode_log(&one_damaged_frame(SNAPSHOT_TYPE)).unwrap_err();
        assert_eq!(e.offset, 0);
        assert!(e.detail.starts_with("damaged snapshot"), "{}", e.detail);
        // Too short to say what it is: a torn header, whatever it began as.
        let cut = &one_damaged_frame(SNAPSHOT_TYPE)[..5];
        assert!(decode_log(cut).expect("torn").torn);
    }

    #[test]
    fn an_empty_prior_prefix_is_no_prefix() {
        // The fold memo keeps the fold of an empty log too; going on from
        // it must judge the first frame as the first frame.
        let empty = LogShape {
            valid_len: 0,
            torn: false,
            snapshot_bytes: 0,
            archive_len: 0,
        };
        let bytes = one_damaged_frame(SNAPSHOT_TYPE);
        let e = decode_log_each_from(&bytes, Some(empty), |_, _| {}).unwrap_err();
        assert!(e.detail.starts_with("damaged snapshot"), "{}", e.detail);
    }

    #[test]
    fn payload_not_matching_type_is_corrupt() {
        let f = log::encode_frame(6, br#"{"record":"loaded","atMs":1}"#);
        assert!(decode_log(&f).is_err());
    }

    /// A settled record is written byte for byte as the derived
    /// serialisation writes it, whatever its outcome.
    #[test]
    fn a_settled_record_is_written_as_derived() {
        let errors = [
            json!({"code": -32001, "message": "x\"\u{1}", "data": {"reason": "stale_revision", "z": [1, null]}}),
            json!({}),
        ];
        let mut outcomes = vec![Outcome::Applied, Outcome::Abandoned];
        outcomes.extend(
            errors
                .iter()
                .map(|e| Outcome::Rejected { error: e.clone() }),
        );
        for outcome in outcomes {
            for command_id in ["018f6a1e-9b3c-7c21-a54a-000000000001", "c-\"\u{7f}\u{2028}"] {
                let rec = Record::Settled {
                    command_id: command_id.into(),
                    outcome: outcome.clone(),
                };
                let derived = log::encode_frame(4, &serde_json::to_vec(&rec).unwrap());
                assert_eq!(rec.encode(), derived, "{outcome:?}");
                let back = Record::decode(4, &serde_json::to_vec(&rec).unwrap());
                assert_eq!(back, Some(rec));
            }
        }
    }

    /// An event record whose params are text is written byte for byte as
    /// the record of the params tree was (the log format is unchanged:
    /// escapes, nesting, big and odd numbers, with and without a cause),
    /// and reads back with the same text, by both paths.
    #[test]
    fn event_params_as_text_keep_the_log_format() {
        /// `Record::Event` as it was, params as a tree.
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase", tag = "record", rename = "event")]
        struct TreeEvent<'a> {
            n: u64,
            method: &'a str,
            params: &'a Value,
            emitted_at_ms: u64,
            cause: Option<&'a str>,
        }
        let deep = (0..100).fold(json!(1), |v, _| json!([v]));
        let params = [
            json!({}),
            json!({"z": [1, {"b": "\u{1}\"\n\\", "a": null}], "sessionId": "s\u{e9}", "x": 1.5}),
            json!({"n": u64::MAX, "m": i64::MIN, "f": 1e300, "g": -0.0, "deep": deep}),
            serde_json::from_str(r#"{"a":1,"a":2,"u":"\ud83d\ude00"}"#).unwrap(),
        ];
        for p in params {
            for cause in [None, Some("c-\"1\u{7f}")] {
                let rec = Record::Event {
                    n: 42,
                    method: "item/\"x\u{2028}".into(),
                    params: EventParams::of(&p),
                    emitted_at_ms: u64::MAX,
                    cause: cause.map(str::to_string),
                };
                let tree = TreeEvent {
                    n: 42,
                    method: "item/\"x\u{2028}",
                    params: &p,
                    emitted_at_ms: u64::MAX,
                    cause,
                };
                let payload = serde_json::to_vec(&tree).unwrap();
                assert_eq!(rec.encode(), log::encode_frame(5, &payload));
                let Some(Record::Event { params: back, .. }) = fast::decode(5, &payload) else {
                    panic!("decodes")
                };
                assert_eq!(back.raw().get(), serde_json::to_string(&p).unwrap());
                assert_eq!(general(5, &payload), Some(rec));
            }
        }
    }
}
