//! A session's state as a fold of its log records.
//!
//! [`Session::apply`] is the only way state changes, for records read from
//! disk at load and for records the live core has just produced alike.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{json, Map, Value};

use super::event_fields::EventFields;
use super::record::{Answer, Outcome, Record, StoredAnswer};
use crate::proto::ids::CmdKey;

/// Where a turn stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnStatus {
    /// Admitted, waiting behind the running turn.
    Queued,
    /// Launched, not ended.
    Running,
    /// Ended with a `turn/completed` (`terminal` inside).
    Ended(String),
    /// Reclaimed by `turn/unqueue`.
    Unqueued,
}

/// One turn of the session.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnRec {
    /// The `commandId` of the `turn/start` that minted it.
    pub command_id: String,
    /// Where it stands.
    pub status: TurnStatus,
    /// Input text (for launching a queued turn).
    pub text: String,
    /// A `turn/started` was recorded for it.
    pub started: bool,
    /// The failure text of a launch that failed (its `turn/completed`
    /// `reason`), which recovery puts in the rejection it settles.
    pub failure: Option<String>,
}

/// One entry of the command ledger: what durable dedupe and payload
/// identity need forever, in a compact form. The command id is the
/// ledger's key ([`CmdKey`]: the id as first sent).
///
/// The payload signature is kept as its SHA-256 (32 bytes, whatever the
/// payload's size): two payloads are the same exactly when their canonical
/// bytes are, and a SHA-256 collision is not a practical concern. The
/// answer is kept in memory while the command is pending and until its
/// record is compacted into the session's archive; after that a replay
/// reads it back from the archive at `received_at` (or the rejection from
/// the `settled` record at `settled_at`).
///
/// Why this shape: a ledger holds an entry per command ever admitted (a
/// third of a million for a log of a million records), and almost all of
/// them are settled and archived. Those need only fixed-size fields (88
/// bytes here, no heap); what only recent entries hold (the answer, a
/// rejection, the signature's text before it is hashed, a method outside
/// the known ones) sits in one boxed `Recent` part that archived entries
/// do without.
#[derive(Clone)]
pub struct LedgerEntry {
    received_at: u64,
    settled_at: u64,
    /// Log offset just after the record that justifies the current answer
    /// (the `received`, then the `settled`): a replay waits for it.
    pub durable_at: u64,
    /// Intake order within the session.
    pub seq: u64,
    received_len: u32,
    settled_len: u32,
    /// The signature's SHA-256 (unused while `recent` holds the text).
    sha256: [u8; 32],
    method: u8,
    outcome: Settled,
    recent: Option<Box<Recent>>,
}

/// What a ledger entry holds only while it is recent (see
/// [`LedgerEntry`]).
#[derive(Debug, Clone, Default, PartialEq)]
struct Recent {
    /// The admission answer, while it is in memory.
    answer: Option<StoredAnswer>,
    /// The rejection of a `Rejected` entry, while it is in memory.
    error: Option<Value>,
    /// The payload signature's text, not hashed yet.
    sig: Option<String>,
    /// The method, when it is none of [`METHODS`].
    method: Option<Box<str>>,
}

/// An entry's outcome, without the rejection's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    Pending,
    Applied,
    Rejected,
    Abandoned,
}

/// The methods a ledger entry names by index (every method with a
/// ledger row); any other (a foreign log) is kept as text.
const METHODS: [&str; 7] = [
    "session/start",
    "session/resume",
    "turn/start",
    "turn/steer",
    "turn/unqueue",
    "approval/decide",
    "state/update",
];

/// The index of a method kept as text.
const OTHER_METHOD: u8 = u8::MAX;

/// Where a replay's answer comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Replay {
    /// In memory.
    Now(Answer),
    /// In memory, but its text is not JSON a `Value` holds (see
    /// [`super::record::StoredAnswer::to_answer`]): the `received` record at
    /// this logical offset holds a damaged answer, which the replay reports
    /// as `logCorrupt`.
    Unreadable {
        /// Logical offset of the `received` record.
        at: u64,
        /// What the parse said.
        why: super::record::Unreadable,
    },
    /// In the archive: the record at this logical offset and length holds
    /// it (`settled`: the rejection of a `settled` record, else the answer
    /// of a `received` record).
    Archived {
        /// Logical offset of the record.
        at: u64,
        /// Its length in bytes.
        len: u32,
        /// A `settled` record (rejection) rather than a `received` one.
        settled: bool,
    },
}

/// SHA-256 of a payload signature.
pub fn sig_hash(signature: &str) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(signature.as_bytes()).into()
}

impl LedgerEntry {
    /// A new entry: a `received` record at `received_at`, whose payload
    /// signature is `sig` (its text as the record carries it: a fold of
    /// the log hashes it only when a snapshot is written, as a load folds
    /// every record and hashing each was a tenth of it).
    pub fn received(
        method: &str,
        sig: String,
        answer: StoredAnswer,
        received_at: (u64, u32),
        durable_at: u64,
        seq: u64,
    ) -> LedgerEntry {
        let mut e = LedgerEntry::blank(method, received_at, durable_at, seq);
        let r = e.recent_mut();
        r.sig = Some(sig);
        r.answer = Some(answer);
        e
    }

    /// An entry restored from a snapshot: the signature's SHA-256, and the
    /// answer while the command is pending. A settled entry's answer and
    /// rejection stay in the archive.
    #[allow(clippy::too_many_arguments)]
    pub fn restored(
        method: &str,
        sha256: [u8; 32],
        answer: Option<StoredAnswer>,
        outcome: Option<&str>,
        received_at: (u64, u32),
        settled_at: (u64, u32),
        durable_at: u64,
        seq: u64,
    ) -> LedgerEntry {
        let mut e = LedgerEntry::blank(method, received_at, durable_at, seq);
        e.sha256 = sha256;
        if answer.is_some() {
            e.recent_mut().answer = answer;
        }
        e.outcome = match outcome {
            None => Settled::Pending,
            Some("applied") => Settled::Applied,
            Some("abandoned") => Settled::Abandoned,
            Some(_) => Settled::Rejected,
        };
        (e.settled_at, e.settled_len) = settled_at;
        e
    }

    fn blank(method: &str, received_at: (u64, u32), durable_at: u64, seq: u64) -> LedgerEntry {
        let index = METHODS.iter().position(|m| *m == method);
        let mut e = LedgerEntry {
            received_at: received_at.0,
            settled_at: 0,
            durable_at,
            seq,
            received_len: received_at.1,
            settled_len: 0,
            sha256: [0; 32],
            method: index.map_or(OTHER_METHOD, |i| i as u8),
            outcome: Settled::Pending,
            recent: None,
        };
        if index.is_none() {
            e.recent_mut().method = Some(method.into());
        }
        e
    }

    fn recent_mut(&mut self) -> &mut Recent {
        self.recent.get_or_insert_with(Box::default)
    }

    /// Drops the recent part when nothing is left in it.
    fn tidy(&mut self) {
        if self.recent.as_deref() == Some(&Recent::default()) {
            self.recent = None;
        }
    }

    /// The method.
    pub fn method(&self) -> &str {
        match METHODS.get(usize::from(self.method)) {
            Some(m) => m,
            None => self
                .recent
                .as_ref()
                .and_then(|r| r.method.as_deref())
                .unwrap_or_default(),
        }
    }

    /// The admission answer, while it is in memory (`None`: archived).
    pub fn answer(&self) -> Option<&StoredAnswer> {
        self.recent.as_ref()?.answer.as_ref()
    }

    /// Logical offset and length of the `received` record.
    pub fn received_at(&self) -> (u64, u32) {
        (self.received_at, self.received_len)
    }

    /// Logical offset and length of the `settled` record (when settled).
    pub fn settled_at(&self) -> (u64, u32) {
        (self.settled_at, self.settled_len)
    }

    /// Not settled yet.
    pub fn is_pending(&self) -> bool {
        self.outcome == Settled::Pending
    }

    /// The outcome's name (`applied`, `rejected`, `abandoned`), once
    /// settled.
    pub fn outcome_name(&self) -> Option<&'static str> {
        match self.outcome {
            Settled::Pending => None,
            Settled::Applied => Some("applied"),
            Settled::Rejected => Some("rejected"),
            Settled::Abandoned => Some("abandoned"),
        }
    }

    /// The terminal outcome, once settled. A rejection whose `settled`
    /// record was archived has `error: null` (read it back from
    /// `settled_at`).
    pub fn outcome(&self) -> Option<Outcome> {
        Some(match self.outcome {
            Settled::Pending => return None,
            Settled::Applied => Outcome::Applied,
            Settled::Abandoned => Outcome::Abandoned,
            Settled::Rejected => Outcome::Rejected {
                error: self
                    .recent
                    .as_ref()
                    .and_then(|r| r.error.clone())
                    .unwrap_or(Value::Null),
            },
        })
    }

    /// Settles the entry by the `settled` record at `settled_at`.
    pub fn settle(&mut self, outcome: Outcome, settled_at: (u64, u32), durable_at: u64) {
        self.outcome = match outcome {
            Outcome::Applied => Settled::Applied,
            Outcome::Abandoned => Settled::Abandoned,
            Outcome::Rejected { error } => {
                if !error.is_null() {
                    self.recent_mut().error = Some(error);
                }
                Settled::Rejected
            }
        };
        (self.settled_at, self.settled_len) = settled_at;
        self.durable_at = durable_at;
    }

    /// Whether [`LedgerEntry::archive_upto`] would change anything.
    pub(crate) fn holds_archived(&self, archive_len: u64) -> bool {
        let Some(r) = &self.recent else { return false };
        if self.outcome == Settled::Pending {
            return false;
        }
        let answer = self.received_at < archive_len && r.answer.is_some();
        let rejection = r.error.is_some() && self.settled_at < archive_len;
        answer || rejection
    }

    /// Forgets what the archive (now `archive_len` long) holds of a settled
    /// entry: its answer and rejection are read back from there. The
    /// signature is hashed once its answer leaves memory.
    pub(crate) fn archive_upto(&mut self, archive_len: u64) {
        let (received_at, settled_at) = (self.received_at, self.settled_at);
        let mut sha = None;
        if let Some(r) = &mut self.recent {
            if received_at < archive_len {
                r.answer = None;
                if let Some(sig) = r.sig.take() {
                    sha = Some(sig_hash(&sig));
                }
            }
            if settled_at < archive_len {
                r.error = None;
            }
        }
        if let Some(h) = sha {
            self.sha256 = h;
        }
        self.tidy();
    }

    /// The SHA-256 of the payload signature.
    pub fn sig_sha256(&self) -> [u8; 32] {
        match self.recent.as_ref().and_then(|r| r.sig.as_deref()) {
            Some(t) => sig_hash(t),
            None => self.sha256,
        }
    }

    /// `turnId` of the admission ack, if any (pending entries keep their
    /// answer in memory).
    pub fn answer_turn_id(&self) -> Option<String> {
        self.answer()?.result_str("turnId")
    }

    /// `disposition` of a `turn/start` ack, if any.
    pub fn answer_disposition(&self) -> Option<String> {
        self.answer()?.result_str("disposition")
    }

    /// Whether `signature` is this entry's payload.
    pub fn same_payload(&self, signature: &str) -> bool {
        match self.recent.as_ref().and_then(|r| r.sig.as_deref()) {
            Some(t) => t == signature,
            None => self.sha256 == sig_hash(signature),
        }
    }

    /// What a replay of this command (`command_id`: its key) answers now.
    pub fn replay_answer(&self, command_id: &CmdKey) -> Replay {
        let error = self.recent.as_ref().and_then(|r| r.error.as_ref());
        match self.outcome {
            Settled::Rejected => match error {
                None => Replay::Archived {
                    at: self.settled_at,
                    len: self.settled_len,
                    settled: true,
                },
                Some(error) => Replay::Now(Answer::Error(error.clone())),
            },
            Settled::Abandoned => Replay::Now(Answer::Error(abandoned_error(
                self.method(),
                &command_id.as_sent(),
            ))),
            Settled::Applied | Settled::Pending => match self.answer() {
                Some(a) => match a.to_answer() {
                    Ok(a) => Replay::Now(a),
                    Err(why) => Replay::Unreadable {
                        at: self.received_at,
                        why,
                    },
                },
                None => Replay::Archived {
                    at: self.received_at,
                    len: self.received_len,
                    settled: false,
                },
            },
        }
    }
}

impl std::fmt::Debug for LedgerEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerEntry")
            .field("method", &self.method())
            .field("sig_sha256", &self.sig_sha256())
            .field("answer", &self.answer())
            .field("received_at", &self.received_at())
            .field("outcome", &self.outcome())
            .field("settled_at", &self.settled_at())
            .field("durable_at", &self.durable_at)
            .field("seq", &self.seq)
            .finish()
    }
}

impl PartialEq for LedgerEntry {
    /// The same command state (payloads compared by their SHA-256).
    fn eq(&self, other: &LedgerEntry) -> bool {
        self.method() == other.method()
            && self.answer() == other.answer()
            && self.received_at() == other.received_at()
            && self.outcome() == other.outcome()
            && self.settled_at() == other.settled_at()
            && self.durable_at == other.durable_at
            && self.seq == other.seq
            && self.sig_sha256() == other.sig_sha256()
    }
}

/// The `abandoned` rejection of a command.
pub fn abandoned_error(method: &str, command_id: &str) -> Value {
    crate::proto::RpcError::command_rejected(method, command_id, "abandoned").to_value()
}

/// An approval's state.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRec {
    /// The `approval/requested` params (as sent).
    pub params: Value,
    /// Its cursor.
    pub cursor: String,
    /// The turn.
    pub turn_id: String,
    /// The tool call item.
    pub item_id: String,
    /// `{decision, resolvedBy, viewCursor}` once resolved.
    pub resolution: Option<Value>,
    /// The decision, once resolved.
    pub decision: Option<String>,
}

/// A background task (a `toolCall` item with `tool: "background"`).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRec {
    /// The turn that started it.
    pub turn_id: String,
    /// Still running.
    pub running: bool,
}

/// A JSON value kept as its compact text, as serde_json writes it: an
/// event's params, a view item. As a tree of `Value`s an event costs about
/// 2 KB in memory (BTreeMap nodes, measured with massif on a resumed
/// host), as text a fraction of that; and these values are mostly written
/// out again (a notification line, every `session/resume` and
/// `session/read` snapshot, a snapshot record) and only rarely read back
/// (a `view/page`, an item a turn completes).
///
/// The host writes the text from a `Value` with serde_json; text read
/// back from a log is kept as spelled, and compares equal to text of the
/// same value. Clones share the text (see [`super::record::StoredAnswer`]).
#[derive(Debug, Clone)]
pub struct JsonText(std::sync::Arc<serde_json::value::RawValue>);

/// An event's params (cursor included) as [`JsonText`].
pub type EventParams = JsonText;

impl JsonText {
    /// The text of `v`, as serde_json writes it (what the log holds).
    pub fn of(v: &Value) -> JsonText {
        JsonText(
            serde_json::value::to_raw_value(v)
                .expect("a Value always serialises")
                .into(),
        )
    }

    /// The text, to write into a frame as it is.
    pub fn raw(&self) -> &serde_json::value::RawValue {
        &self.0
    }

    /// The value as a tree again.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.0.get()).expect("the text was written from a Value")
    }

    /// The string members `keys` of an object, read without building the
    /// tree; `None` for each that is absent or no string, all `None` when
    /// the text is no object.
    pub fn str_members<const N: usize>(&self, keys: [&str; N]) -> [Option<String>; N] {
        super::members::members_str(self.0.get(), keys)
    }

    /// Reads a [`JsonText`] through a `Value`, so any deserializer can
    /// (the general record path buffers, and a raw JSON value cannot be
    /// read from a buffer); the fast record path reads the text directly.
    pub(crate) fn via_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<JsonText, D::Error> {
        use serde::Deserialize as _;
        Value::deserialize(d).map(|v| JsonText::of(&v))
    }

    /// The text of a JSON value read from a longer text, as it is spelled.
    pub(crate) fn of_raw(raw: &serde_json::value::RawValue) -> JsonText {
        JsonText(raw.to_owned().into())
    }
}

impl PartialEq for JsonText {
    /// Equal JSON values (the same text, or texts another writer spelled
    /// differently: a record read by the general path is written anew).
    fn eq(&self, other: &JsonText) -> bool {
        // Text a `Value` cannot hold (read by the fast path) equals only
        // itself.
        let value = |t: &JsonText| serde_json::from_str::<Value>(t.0.get()).ok();
        self.0.get() == other.0.get()
            || matches!((value(self), value(other)), (Some(a), Some(b)) if a == b)
    }
}

impl serde::Serialize for JsonText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for JsonText {
    /// Any JSON value a `Value` can hold, its text kept as it is spelled
    /// (text no `Value` holds is refused, as reading it as a tree would
    /// refuse it: a load then reports the record undecodable). Only the
    /// host's own writing is read back this way (a snapshot record it wrote from
    /// [`JsonText`]s, under its CRC), so the text is serde_json's.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<JsonText, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        if !super::members::value_readable(raw.get()) {
            return Err(serde::de::Error::custom("JSON text no Value can hold"));
        }
        Ok(JsonText(raw.into()))
    }
}

/// A durable event kept in memory for subscriptions and paging.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// Its ordinal.
    pub n: u64,
    /// Method.
    pub method: String,
    /// Params (cursor included).
    pub params: EventParams,
    /// Emission time.
    pub emitted_at_ms: u64,
    /// Log offset just after its record (sent only once synced).
    pub durable_at: u64,
}

/// The folded state of one session.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// The session id.
    pub id: String,
    /// Creation time.
    pub created_at_ms: u64,
    /// Time of the last record.
    pub updated_at_ms: u64,
    /// `workspaceRoot`.
    pub workspace_root: Option<String>,
    /// The command that created it.
    pub start_command_id: String,
    /// The durable ledger, keyed by command id (compared without case).
    pub ledger: imbl::OrdMap<CmdKey, LedgerEntry>,
    pub(crate) next_seq: u64,
    /// The unsettled intakes by intake order (`seq`): what a load's
    /// recovery settles and every snapshot's `pendingCommands` lists,
    /// without a walk of the whole ledger.
    pub(crate) pending: imbl::OrdMap<u64, CmdKey>,
    /// Commands whose effect has a durable record.
    pub effect_seen: imbl::OrdSet<CmdKey>,
    /// Turns by id.
    pub turns: imbl::OrdMap<String, TurnRec>,
    /// Queued turns in launch order.
    pub queue: VecDeque<String>,
    /// The running turn.
    pub running: Option<String>,
    /// Turns that ran and ended (public `Session.turnCount`: the
    /// completed-turn count).
    pub turn_count: u64,
    /// A `session/resume` was admitted: the session's approval mode is
    /// reported as replayed from its log (`approvalMode.source:
    /// "replay"`, as every public resume transcript shows).
    pub resumed: bool,
    /// Items in first-seen order (latest revision), as text: every
    /// snapshot a `session/resume` or `session/read` answers copies them
    /// all, so each is written once, when it changes.
    pub items: imbl::Vector<JsonText>,
    pub(crate) item_index: imbl::OrdMap<String, usize>,
    /// Items whose latest revision is `inProgress` (what recovery and
    /// approvals ask of every approval's item, without reading its text).
    pub(crate) items_in_progress: imbl::OrdSet<String>,
    /// Approvals by id.
    pub approvals: imbl::OrdMap<String, ApprovalRec>,
    /// Tasks by id.
    pub tasks: imbl::OrdMap<String, TaskRec>,
    /// `state/update` revision.
    pub revision: u64,
    /// `state/update` key-value state.
    pub kv: Map<String, Value>,
    /// Durable events still in memory: the last `events.len()` ordinals
    /// (those in the log's tail). Older ones are in the archive; see
    /// `event_starts`.
    pub events: imbl::Vector<StoredEvent>,
    /// Logical log offset of every durable event's record, by ordinal
    /// (`event_starts[n - 1]`): the index a read of archived events uses.
    pub event_starts: imbl::Vector<u64>,
    /// Logical length of the archive: records before this offset were
    /// compacted into the session's archive file (0: none).
    pub archive_len: u64,
    /// Logical offset just past the last folded record.
    pub end_bytes: u64,
    /// Sequence numbers per source stream.
    pub stream_seq: BTreeMap<String, u64>,
    /// The last lifecycle record is `Loaded` (a holder may have died).
    pub lifecycle_open: bool,
    /// Number of records folded.
    pub record_count: u64,
}

impl Session {
    /// Durable head ordinal (0 = empty view).
    pub fn head_n(&self) -> u64 {
        self.event_starts.len() as u64
    }

    /// The first durable ordinal still in memory (`head_n() + 1` when
    /// none is).
    pub fn first_in_memory_n(&self) -> u64 {
        self.head_n() + 1 - self.events.len() as u64
    }

    /// Durable event `n` if it is in memory.
    pub fn event(&self, n: u64) -> Option<&StoredEvent> {
        let first = self.first_in_memory_n();
        if n < first || n > self.head_n() {
            return None;
        }
        let e = &self.events[(n - first) as usize];
        debug_assert_eq!(e.n, n);
        Some(e)
    }

    /// The durable events in memory after ordinal `n`, in order: found by
    /// position (ordinals in memory are dense), not by a walk of all of
    /// them (a resume's suffix, a subscribe's backlog).
    pub fn events_after(&self, n: u64) -> impl Iterator<Item = &StoredEvent> {
        let len = self.events.len();
        let from = usize::try_from((n + 1).saturating_sub(self.first_in_memory_n()))
            .map_or(len, |i| i.min(len));
        (from..len).map(move |i| {
            let e = &self.events[i];
            debug_assert!(e.n > n && (i == from || e.n == self.events[i - 1].n + 1));
            e
        })
    }

    /// The cursor of durable ordinal `n`.
    pub fn cursor(&self, n: u64) -> String {
        format!("v:{}:{}", self.id, n)
    }

    /// Folds one record whose frame ends at logical offset `end_offset`
    /// (it starts where the previous record ended). A snapshot must be the
    /// first record folded; it restores the whole state.
    pub fn apply(&mut self, rec: &Record, end_offset: u64) {
        self.apply_owned(rec.clone(), end_offset);
    }

    /// [`Session::apply`] of a record the caller is done with: its strings
    /// and values move into the fold instead of being copied (a load folds
    /// every record of the log).
    pub fn apply_owned(&mut self, rec: Record, end_offset: u64) {
        self.apply_with(rec, end_offset, None);
    }

    /// [`Session::apply_owned`]; an event record's params come also as
    /// the `tree` they were written from, when the caller has it (a
    /// commit): the fold reads them there instead of from their text.
    pub(crate) fn apply_with(&mut self, rec: Record, end_offset: u64, tree: Option<&Value>) {
        if let Record::Snapshot(snap) = rec {
            assert_eq!(self.record_count, 0, "a snapshot is the first record");
            *self = Session::from_snapshot_owned(*snap);
            return;
        }
        let start = self.end_bytes;
        debug_assert!(end_offset >= start, "records are folded in log order");
        self.end_bytes = end_offset;
        let span = (start, u32::try_from(end_offset - start).unwrap_or(u32::MAX));
        self.record_count += 1;
        match rec {
            Record::Snapshot(_) => unreachable!("handled above"),
            Record::Created {
                session_id,
                created_at_ms,
                workspace_root,
                start_command_id,
            } => {
                assert_eq!(self.record_count, 1, "Created must be the first record");
                self.id = session_id;
                self.created_at_ms = created_at_ms;
                self.updated_at_ms = created_at_ms;
                self.workspace_root = workspace_root;
                self.start_command_id = start_command_id;
            }
            Record::Loaded { at_ms } => {
                self.lifecycle_open = true;
                self.updated_at_ms = self.updated_at_ms.max(at_ms);
            }
            Record::Closed { at_ms, .. } => {
                self.lifecycle_open = false;
                self.updated_at_ms = self.updated_at_ms.max(at_ms);
            }
            Record::Received {
                command_id,
                method,
                params,
                signature,
                answer,
                at_ms,
            } => {
                let key = CmdKey::of(&command_id);
                self.next_seq += 1;
                if method == "session/resume" && answer.is_result() {
                    self.resumed = true;
                }
                self.updated_at_ms = self.updated_at_ms.max(at_ms);
                if method == "turn/start"
                    && answer.result_str("disposition").as_deref() == Some("queued")
                {
                    let turn_id = answer.result_str("turnId").unwrap_or_default();
                    self.turns.insert(
                        turn_id.clone(),
                        TurnRec {
                            command_id: command_id.clone(),
                            status: TurnStatus::Queued,
                            text: input_text(&params),
                            started: false,
                            failure: None,
                        },
                    );
                    self.queue.push_back(turn_id);
                }
                self.pending.insert(self.next_seq, key.clone());
                let prev = self.ledger.insert(
                    key,
                    LedgerEntry::received(
                        &method,
                        signature,
                        answer,
                        span,
                        end_offset,
                        self.next_seq,
                    ),
                );
                debug_assert!(prev.is_none(), "a command id is received once");
            }
            Record::Settled {
                command_id,
                outcome,
            } => {
                if let Some(e) = self.ledger.get_mut(&CmdKey::of(&command_id)) {
                    debug_assert!(e.is_pending(), "a command settles once");
                    self.pending.remove(&e.seq);
                    e.settle(outcome, span, end_offset);
                }
            }
            Record::Event {
                n,
                method,
                params,
                emitted_at_ms,
                cause,
            } => {
                debug_assert_eq!(n, self.head_n() + 1, "durable ordinals are dense");
                self.updated_at_ms = self.updated_at_ms.max(emitted_at_ms);
                if let Some(c) = cause {
                    self.effect_seen.insert(CmdKey::of(&c));
                }
                let fields = match tree {
                    Some(v) => EventFields::Tree(v),
                    None => EventFields::read(params.raw().get()),
                };
                if let Some((key, seq)) = fields.source_range() {
                    let s = self.stream_seq.entry(key).or_default();
                    *s = (*s).max(seq);
                }
                self.apply_event(&method, &params, fields);
                self.event_starts.push_back(start);
                self.events.push_back(StoredEvent {
                    n,
                    method,
                    params,
                    emitted_at_ms,
                    durable_at: end_offset,
                });
            }
        }
    }

    /// Folds one event: `f` holds what the fold reads of `params` (read
    /// from their text); an approval event, rare, is read as a tree.
    fn apply_event(&mut self, method: &str, params: &EventParams, f: EventFields<'_>) {
        let or_empty = |s: Option<String>| s.unwrap_or_default();
        match method {
            "turn/started" => {
                let turn_id = or_empty(f.turn_id());
                self.queue.retain(|t| *t != turn_id);
                let text = self
                    .turns
                    .get(&turn_id)
                    .map(|t| t.text.clone())
                    .unwrap_or_default();
                self.turns.insert(
                    turn_id.clone(),
                    TurnRec {
                        command_id: or_empty(f.command_id()),
                        status: TurnStatus::Running,
                        text,
                        started: true,
                        failure: None,
                    },
                );
                self.running = Some(turn_id);
            }
            "turn/completed" => {
                let turn_id = or_empty(f.turn_id());
                self.queue.retain(|t| *t != turn_id);
                if self.running.as_deref() == Some(turn_id.as_str()) {
                    self.running = None;
                }
                let terminal = or_empty(f.terminal());
                // `turnCount` counts completed turns (public `Session`):
                // turns that ran and ended, whatever their terminal; a
                // failed launch never ran.
                if self.turns.get(&turn_id).is_some_and(|t| t.started) {
                    self.turn_count += 1;
                }
                // A launch that failed never started: its reason is the
                // failure text a recovered rejection carries.
                let failure = f.reason();
                match self.turns.get_mut(&turn_id) {
                    Some(t) => {
                        t.status = TurnStatus::Ended(terminal);
                        if !t.started {
                            t.failure = failure;
                        }
                    }
                    None => {
                        self.turns.insert(
                            turn_id.clone(),
                            TurnRec {
                                command_id: turn_id,
                                status: TurnStatus::Ended(terminal),
                                text: String::new(),
                                started: false,
                                failure,
                            },
                        );
                    }
                }
            }
            "turn/unqueued" => {
                let turn_id = or_empty(f.turn_id());
                self.queue.retain(|t| *t != turn_id);
                if let Some(t) = self.turns.get_mut(&turn_id) {
                    t.status = TurnStatus::Unqueued;
                }
            }
            "item/started" | "item/completed" | "item/updated" => {
                // An absent item reads as `null`, as `params["item"]` does.
                let item = f.item();
                let [item_id, kind, tool, status, turn_id] =
                    item.str_members(["itemId", "kind", "tool", "status", "turnId"]);
                let item_id = or_empty(item_id);
                let in_progress = status.as_deref() == Some("inProgress");
                if kind.as_deref() == Some("toolCall") && tool.as_deref() == Some("background") {
                    self.tasks.insert(
                        item_id.clone(),
                        TaskRec {
                            turn_id: or_empty(turn_id),
                            running: in_progress,
                        },
                    );
                }
                self.upsert_item(item_id, item, in_progress);
            }
            "approval/requested" | "approval/resolved" => {
                self.apply_approval(method, &params.to_value())
            }
            "state/updated" => {
                if let Some(r) = f.revision() {
                    self.revision = r;
                }
                if let Some(set) = f.set() {
                    merge_kv(&mut self.kv, &set);
                }
            }
            _ => {}
        }
    }

    /// Folds an approval event, read as a tree.
    fn apply_approval(&mut self, method: &str, p: &Value) {
        let s = |k: &str| p[k].as_str().unwrap_or_default().to_string();
        match method {
            "approval/requested" => {
                let approval_id = s("approvalId");
                self.approvals.insert(
                    approval_id,
                    ApprovalRec {
                        params: p.clone(),
                        cursor: s("viewCursor"),
                        turn_id: s("turnId"),
                        item_id: s("itemId"),
                        resolution: None,
                        decision: None,
                    },
                );
            }
            "approval/resolved" => {
                if let Some(a) = self.approvals.get_mut(&s("approvalId")) {
                    a.decision = Some(s("decision"));
                    a.resolution = Some(json!({
                        "decision": p["decision"],
                        "resolvedBy": p["resolvedBy"],
                        "viewCursor": p["viewCursor"],
                    }));
                }
            }
            _ => {}
        }
    }

    pub(crate) fn upsert_item(&mut self, item_id: String, item: JsonText, in_progress: bool) {
        if in_progress {
            self.items_in_progress.insert(item_id.clone());
        } else {
            self.items_in_progress.remove(&item_id);
        }
        match self.item_index.get(&item_id) {
            Some(i) => self.items[*i] = item,
            None => {
                self.item_index.insert(item_id, self.items.len());
                self.items.push_back(item);
            }
        }
    }

    /// The item with this id exists and its latest revision is
    /// `inProgress`.
    pub fn item_in_progress(&self, item_id: &str) -> bool {
        self.items_in_progress.contains(item_id)
    }

    /// The item with this id, latest revision, as a tree.
    pub fn item(&self, item_id: &str) -> Option<Value> {
        self.item_index
            .get(item_id)
            .map(|i| self.items[*i].to_value())
    }

    /// Unsettled intakes in intake order: their keys and entries.
    pub fn pending_entries(&self) -> impl Iterator<Item = (&CmdKey, &LedgerEntry)> {
        debug_assert_eq!(
            self.pending.len(),
            self.ledger.values().filter(|e| e.is_pending()).count(),
            "the pending index lists every unsettled intake"
        );
        self.pending.values().map(|k| (k, &self.ledger[k]))
    }

    /// Unsettled intakes in intake order (`pendingCommands`).
    pub fn pending_commands(&self) -> Vec<Value> {
        self.pending_entries()
            .map(|(k, e)| json!({"commandId": k.as_sent(), "method": e.method()}))
            .collect()
    }

    /// Pending approvals ordered by cursor.
    pub fn pending_approvals(&self) -> Vec<&ApprovalRec> {
        let mut v: Vec<&ApprovalRec> = self
            .approvals
            .values()
            .filter(|a| a.resolution.is_none())
            .collect();
        v.sort_by_key(|a| cursor_order(&a.cursor));
        v
    }

    /// Busy: a turn runs or is queued.
    pub fn is_busy(&self) -> bool {
        self.running.is_some() || !self.queue.is_empty()
    }

    /// Next sequence number on a source stream.
    pub fn next_stream_seq(&mut self, stream: &Value) -> u64 {
        let s = self.stream_seq.entry(stream_key(stream)).or_default();
        *s += 1;
        *s
    }

    /// Whether `cursor` was issued by this session (durable or ephemeral
    /// form, up to the head). Returns the durable ordinal it follows.
    pub fn parse_cursor(&self, cursor: &str) -> Option<u64> {
        let rest = cursor
            .strip_prefix("v:")?
            .strip_prefix(self.id.as_str())?
            .strip_prefix(':')?;
        let (n_part, k_part) = match rest.split_once('.') {
            Some((n, k)) => (n, Some(k)),
            None => (rest, None),
        };
        let n: u64 = n_part.parse().ok()?;
        if n.to_string() != n_part {
            return None;
        }
        if let Some(k_part) = k_part {
            let k: u64 = k_part.parse().ok()?;
            if k == 0 || k.to_string() != k_part {
                return None;
            }
        }
        (n <= self.head_n()).then_some(n)
    }
}

/// Orders cursors of one session: `(n, k)`.
pub fn cursor_order(cursor: &str) -> (u64, u64) {
    let tail = cursor.rsplit(':').next().unwrap_or("0");
    match tail.split_once('.') {
        Some((n, k)) => (n.parse().unwrap_or(0), k.parse().unwrap_or(0)),
        None => (tail.parse().unwrap_or(0), 0),
    }
}

fn stream_key(stream: &Value) -> String {
    stream_key_of(stream["kind"].as_str(), stream["id"].as_str())
}

/// The key a source stream's sequence is kept under (`"<kind>:<id>"`, each
/// empty when no string): the same for the stream the host emits on and
/// for the `sourceRange` a fold reads back.
pub(crate) fn stream_key_of(kind: Option<&str>, id: Option<&str>) -> String {
    format!("{}:{}", kind.unwrap_or_default(), id.unwrap_or_default())
}

/// Shallow merge: `null` deletes a key.
pub fn merge_kv(kv: &mut Map<String, Value>, set: &Map<String, Value>) {
    for (k, v) in set {
        if v.is_null() {
            kv.remove(k);
        } else {
            kv.insert(k.clone(), v.clone());
        }
    }
}

/// The input text of normalised `turn/start`/`turn/steer` params.
pub fn input_text(params: &Value) -> String {
    params["input"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        let mut s = Session::default();
        s.apply(
            &Record::Created {
                session_id: "0198f0aa-1111-7000-8000-0000000000aa".into(),
                created_at_ms: 5,
                workspace_root: None,
                start_command_id: "c".into(),
            },
            10,
        );
        s
    }

    #[test]
    fn cursor_parsing_accepts_only_issued_cursors() {
        let mut s = session();
        assert_eq!(s.parse_cursor(&s.cursor(0)), Some(0));
        assert_eq!(s.parse_cursor(&s.cursor(1)), None);
        s.apply(
            &Record::Event {
                n: 1,
                method: "x".into(),
                params: EventParams::of(&json!({})),
                emitted_at_ms: 1,
                cause: None,
            },
            20,
        );
        assert_eq!(s.parse_cursor(&s.cursor(1)), Some(1));
        assert_eq!(s.parse_cursor(&format!("{}.2", s.cursor(1))), Some(1));
        assert_eq!(s.parse_cursor(&format!("{}.0", s.cursor(1))), None);
        assert_eq!(s.parse_cursor("v:other:1"), None);
        assert_eq!(s.parse_cursor(&format!("v:{}:01", s.id)), None);
        assert_eq!(s.parse_cursor(&format!("v:{}:+1", s.id)), None);
    }

    #[test]
    fn queued_turn_start_is_pending_until_settled() {
        let mut s = session();
        s.apply(
            &Record::Received {
                command_id: "C1".into(),
                method: "turn/start".into(),
                params: json!({"input": [{"type": "text", "text": "hi"}]}),
                signature: "x".into(),
                answer: StoredAnswer::new(&Answer::Result(
                    json!({"disposition": "queued", "turnId": "C1"}),
                )),
                at_ms: 7,
            },
            30,
        );
        assert_eq!(s.queue, vec!["C1".to_string()]);
        assert_eq!(s.pending_commands().len(), 1);
        assert_eq!(s.turns["C1"].text, "hi");
        s.apply(
            &Record::Settled {
                command_id: "C1".into(),
                outcome: Outcome::Abandoned,
            },
            40,
        );
        assert!(s.pending_commands().is_empty());
        let (id, e) = s.ledger.get_key_value(&CmdKey::of("c1")).expect("kept");
        assert_eq!(id.as_sent(), "C1", "the id as sent");
        assert_eq!(e.durable_at, 40);
        assert_eq!(
            e.replay_answer(id),
            Replay::Now(Answer::Error(abandoned_error("turn/start", "C1")))
        );
    }

    #[test]
    fn items_as_text_and_pending_intakes_survive_a_snapshot() {
        let mut s = session();
        let item = |id: &str, status: &str, revision: u64| {
            json!({"itemId": id, "kind": "toolCall", "status": status,
                   "revision": revision, "text": "a \"quoted\"\n line \u{1}"})
        };
        let events = [
            ("item/started", item("i1", "inProgress", 1)),
            ("item/started", item("i2", "inProgress", 1)),
            ("item/completed", item("i1", "completed", 2)),
        ];
        let mut end = 10;
        for (n, (method, it)) in events.iter().enumerate() {
            end += 10;
            let params = EventParams::of(&json!({"item": it}));
            let n = n as u64 + 1;
            s.apply(
                &Record::Event {
                    n,
                    method: (*method).into(),
                    params,
                    emitted_at_ms: n,
                    cause: None,
                },
                end,
            );
        }
        for id in ["C1", "C2", "C3"] {
            end += 10;
            s.apply(
                &Record::Received {
                    command_id: id.into(),
                    method: "state/update".into(),
                    params: json!({}),
                    signature: id.into(),
                    answer: StoredAnswer::new(&Answer::Result(json!({"revision": 1}))),
                    at_ms: 9,
                },
                end,
            );
        }
        s.apply(
            &Record::Settled {
                command_id: "C2".into(),
                outcome: Outcome::Applied,
            },
            end + 10,
        );
        // The latest revision, in first-seen order, as serde_json writes it.
        assert_eq!(s.items.len(), 2);
        assert_eq!(s.item("i1"), Some(item("i1", "completed", 2)));
        assert_eq!(
            s.items[0].raw().get(),
            serde_json::to_string(&item("i1", "completed", 2)).unwrap()
        );
        assert_eq!(s.item("i3"), None);
        assert!(!s.item_in_progress("i1"));
        assert!(s.item_in_progress("i2"));
        assert!(!s.item_in_progress("i3"));
        let pending = |s: &Session| -> Vec<Value> { s.pending_commands() };
        assert_eq!(
            pending(&s),
            vec![
                json!({"commandId": "C1", "method": "state/update"}),
                json!({"commandId": "C3", "method": "state/update"}),
            ],
            "unsettled intakes in intake order"
        );
        // Through a snapshot record's bytes and back.
        let bytes = serde_json::to_vec(&s.to_snapshot()).unwrap();
        let snap: super::super::snapshot::Snapshot = serde_json::from_slice(&bytes).unwrap();
        let r = Session::from_snapshot(&snap);
        assert_eq!(r.items, s.items);
        assert_eq!(r.item("i2"), Some(item("i2", "inProgress", 1)));
        assert!(r.item_in_progress("i2") && !r.item_in_progress("i1"));
        assert_eq!(pending(&r), pending(&s));
    }

    /// A [`JsonText`] of exactly this text.
    fn raw(s: &str) -> JsonText {
        JsonText::of_raw(&serde_json::value::RawValue::from_string(s.into()).unwrap())
    }

    #[test]
    fn string_members_are_read_from_text_as_a_value_reads_them() {
        let t = |v: Value| JsonText::of(&v);
        let doc = t(json!({"a": "x", "b": 1, "c": {"a": "inner"}, "d": "\u{e9}\n"}));
        assert_eq!(
            doc.str_members(["a", "b", "d", "zz"]),
            [Some("x".into()), None, Some("\u{e9}\n".into()), None]
        );
        assert_eq!(t(json!([1, 2])).str_members(["a"]), [None]);
        assert_eq!(t(json!("a")).str_members(["a"]), [None]);
        // Escaped member names, and the last of a repeated member wins.
        assert_eq!(
            raw(r#"{"\u0061":"1","a":"2"}"#).str_members(["a"]),
            [Some("2".into())]
        );
        assert_eq!(raw(r#"{"a":"1","a":3}"#).str_members(["a"]), [None]);
    }

    #[test]
    fn json_texts_compare_as_values_and_text_no_value_holds_equals_only_itself() {
        assert_eq!(
            raw(r#"{"b": 1, "a": [2]}"#),
            JsonText::of(&json!({"a": [2], "b": 1}))
        );
        assert_ne!(raw(r#"{"b":1}"#), JsonText::of(&json!({"b": 2})));
        // Too deep for a `Value`, out of its number range: no panic.
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(raw(&deep), raw(&deep));
        assert_ne!(
            raw(&deep),
            raw(&format!("{}2{}", "[".repeat(200), "]".repeat(200)))
        );
        assert_ne!(raw("1e999"), raw("2e999"));
    }

    #[test]
    fn a_ledger_row_is_small_and_keeps_what_it_was_given() {
        // The key and entry of an archived command: no heap at all.
        if cfg!(target_pointer_width = "64") {
            assert_eq!(std::mem::size_of::<CmdKey>(), 24);
            assert_eq!(std::mem::size_of::<LedgerEntry>(), 88);
        }
        let answer = StoredAnswer::new(&Answer::Result(json!({"revision": 1})));
        let mut e = LedgerEntry::received("x/y", "sig".into(), answer.clone(), (5, 6), 11, 1);
        assert_eq!(e.method(), "x/y", "a method outside the known ones");
        assert!(e.same_payload("sig") && !e.same_payload("gis"));
        let error = json!({"code": 1});
        e.settle(
            Outcome::Rejected {
                error: error.clone(),
            },
            (11, 4),
            15,
        );
        assert_eq!(
            e.replay_answer(&CmdKey::of("c")),
            Replay::Now(Answer::Error(error))
        );
        let before = e.clone();
        e.archive_upto(16);
        assert_eq!(e.method(), "x/y");
        assert!(e.same_payload("sig") && !e.same_payload("gis"));
        assert_eq!(e.sig_sha256(), before.sig_sha256());
        assert_eq!(e.answer(), None);
        assert_eq!(
            e.replay_answer(&CmdKey::of("c")),
            Replay::Archived {
                at: 11,
                len: 4,
                settled: true
            }
        );
        let mut e = LedgerEntry::received("state/update", "s".into(), answer, (5, 6), 11, 2);
        e.settle(Outcome::Applied, (11, 4), 15);
        e.archive_upto(16);
        assert!(e.recent.is_none(), "an archived entry keeps nothing boxed");
        assert!(e.same_payload("s"));
        assert_eq!(e.method(), "state/update");
    }

    #[test]
    fn kv_merge_deletes_on_null() {
        let mut kv = Map::new();
        merge_kv(&mut kv, json!({"a": 1, "b": 2}).as_object().unwrap());
        merge_kv(&mut kv, json!({"a": null, "c": 3}).as_object().unwrap());
        assert_eq!(Value::Object(kv), json!({"b": 2, "c": 3}));
    }
}
