//! A session's state as a fold of its log records.
//!
//! [`Session::apply`] is the only way state changes, for records read from
//! disk at load and for records the live core has just produced alike.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{json, Map, Value};

use super::record::{Answer, Outcome, Record, StoredAnswer};
use crate::proto::ids::id_key;

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
/// identity need forever, in a compact form.
///
/// The payload signature is kept as its SHA-256 (32 bytes, whatever the
/// payload's size): two payloads are the same exactly when their canonical
/// bytes are, and a SHA-256 collision is not a practical concern. The
/// answer is kept in memory while the command is pending and until its
/// record is compacted into the session's archive; after that a replay
/// reads it back from the archive at `received_at` (or the rejection from
/// the `settled` record at `settled_at`).
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerEntry {
    /// `commandId` as first sent.
    pub command_id: String,
    /// The method.
    pub method: String,
    /// The payload signature (RFC 8785 bytes), or its SHA-256.
    pub sig: Sig,
    /// The admission answer, while it is in memory (`None`: archived).
    pub answer: Option<StoredAnswer>,
    /// Logical offset and length of the `received` record.
    pub received_at: (u64, u32),
    /// The terminal outcome, once settled. A rejection whose `settled`
    /// record was archived keeps `error: null` here (read it back from
    /// `settled_at`).
    pub outcome: Option<Outcome>,
    /// Logical offset and length of the `settled` record (when settled).
    pub settled_at: (u64, u32),
    /// Log offset just after the record that justifies the current answer
    /// (the `received`, then the `settled`): a replay waits for it.
    pub durable_at: u64,
    /// Intake order within the session.
    pub seq: u64,
}

/// Where a replay's answer comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Replay {
    /// In memory.
    Now(Answer),
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

/// A ledger entry's payload signature: the text its `received` record
/// carries (a fold of the log keeps it, and hashes it only when a snapshot
/// is written: a load folds every record, and hashing each was a tenth of
/// it), or the SHA-256 a snapshot restored. Two are equal when their
/// SHA-256 is.
#[derive(Debug, Clone)]
pub enum Sig {
    /// The signature itself.
    Text(String),
    /// Its SHA-256.
    Sha256([u8; 32]),
}

impl Sig {
    /// The SHA-256 of the signature.
    pub fn sha256(&self) -> [u8; 32] {
        match self {
            Sig::Text(t) => sig_hash(t),
            Sig::Sha256(h) => *h,
        }
    }

    /// Whether `signature` is this one.
    pub fn matches(&self, signature: &str) -> bool {
        match self {
            Sig::Text(t) => t == signature,
            Sig::Sha256(h) => *h == sig_hash(signature),
        }
    }
}

impl PartialEq for Sig {
    fn eq(&self, other: &Sig) -> bool {
        match (self, other) {
            (Sig::Text(a), Sig::Text(b)) => a == b,
            _ => self.sha256() == other.sha256(),
        }
    }
}

impl LedgerEntry {
    /// `turnId` of the admission ack, if any (pending entries keep their
    /// answer in memory).
    pub fn answer_turn_id(&self) -> Option<String> {
        self.answer.as_ref()?.result_str("turnId")
    }

    /// `disposition` of a `turn/start` ack, if any.
    pub fn answer_disposition(&self) -> Option<String> {
        self.answer.as_ref()?.result_str("disposition")
    }

    /// Whether `signature` is this entry's payload.
    pub fn same_payload(&self, signature: &str) -> bool {
        self.sig.matches(signature)
    }

    /// What a replay of this command answers now.
    pub fn replay_answer(&self) -> Replay {
        match &self.outcome {
            Some(Outcome::Rejected { error }) if error.is_null() => Replay::Archived {
                at: self.settled_at.0,
                len: self.settled_at.1,
                settled: true,
            },
            Some(Outcome::Rejected { error }) => Replay::Now(Answer::Error(error.clone())),
            Some(Outcome::Abandoned) => Replay::Now(Answer::Error(abandoned_error(
                &self.method,
                &self.command_id,
            ))),
            Some(Outcome::Applied) | None => match &self.answer {
                Some(a) => Replay::Now(a.to_answer()),
                None => Replay::Archived {
                    at: self.received_at.0,
                    len: self.received_at.1,
                    settled: false,
                },
            },
        }
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

/// An event's params kept as their compact JSON text. As a tree of
/// `Value`s an event costs about 2 KB in memory (BTreeMap nodes, measured
/// with massif on a resumed host), as text a fraction of that; the params
/// are only written out again (a notification line) or, rarely, read
/// back (a `view/page`).
///
/// Clones share the text (see [`super::record::StoredAnswer`]).
#[derive(Debug, Clone)]
pub struct EventParams(std::sync::Arc<serde_json::value::RawValue>);

impl EventParams {
    /// The text of `v`, as serde_json writes it (what the log holds).
    pub fn of(v: &Value) -> EventParams {
        EventParams(
            serde_json::value::to_raw_value(v)
                .expect("a Value always serialises")
                .into(),
        )
    }

    /// The text, to write into a frame as it is.
    pub fn raw(&self) -> &serde_json::value::RawValue {
        &self.0
    }

    /// The params as a tree again.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.0.get()).expect("the text was written from a Value")
    }
}

impl PartialEq for EventParams {
    fn eq(&self, other: &EventParams) -> bool {
        self.0.get() == other.0.get()
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
    /// The durable ledger, keyed by lowercase command id.
    pub ledger: imbl::OrdMap<String, LedgerEntry>,
    pub(crate) next_seq: u64,
    /// Commands whose effect has a durable record.
    pub effect_seen: imbl::OrdSet<String>,
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
    /// Items in first-seen order (latest revision).
    pub items: imbl::Vector<Value>,
    pub(crate) item_index: imbl::OrdMap<String, usize>,
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
                let key = id_key(&command_id);
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
                let prev = self.ledger.insert(
                    key,
                    LedgerEntry {
                        command_id,
                        method,
                        sig: Sig::Text(signature),
                        answer: Some(answer),
                        received_at: span,
                        outcome: None,
                        settled_at: (0, 0),
                        durable_at: end_offset,
                        seq: self.next_seq,
                    },
                );
                debug_assert!(prev.is_none(), "a command id is received once");
            }
            Record::Settled {
                command_id,
                outcome,
            } => {
                if let Some(e) = self.ledger.get_mut(&id_key(&command_id)) {
                    debug_assert!(e.outcome.is_none(), "a command settles once");
                    e.outcome = Some(outcome);
                    e.settled_at = span;
                    e.durable_at = end_offset;
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
                    self.effect_seen.insert(id_key(&c));
                }
                if let Some(stream) = params.get("sourceRange") {
                    let key = stream_key(&stream["stream"]);
                    let seq = stream["last"]["sequence"].as_u64().unwrap_or(0);
                    let s = self.stream_seq.entry(key).or_default();
                    *s = (*s).max(seq);
                }
                self.apply_event(&method, &params);
                self.event_starts.push_back(start);
                self.events.push_back(StoredEvent {
                    n,
                    method,
                    params: EventParams::of(&params),
                    emitted_at_ms,
                    durable_at: end_offset,
                });
            }
        }
    }

    fn apply_event(&mut self, method: &str, p: &Value) {
        let s = |k: &str| p[k].as_str().unwrap_or_default().to_string();
        match method {
            "turn/started" => {
                let turn_id = s("turnId");
                self.queue.retain(|t| *t != turn_id);
                let text = self
                    .turns
                    .get(&turn_id)
                    .map(|t| t.text.clone())
                    .unwrap_or_default();
                self.turns.insert(
                    turn_id.clone(),
                    TurnRec {
                        command_id: s("commandId"),
                        status: TurnStatus::Running,
                        text,
                        started: true,
                        failure: None,
                    },
                );
                self.running = Some(turn_id);
            }
            "turn/completed" => {
                let turn_id = s("turnId");
                self.queue.retain(|t| *t != turn_id);
                if self.running.as_deref() == Some(turn_id.as_str()) {
                    self.running = None;
                }
                let terminal = s("terminal");
                // `turnCount` counts completed turns (public `Session`):
                // turns that ran and ended, whatever their terminal; a
                // failed launch never ran.
                if self.turns.get(&turn_id).is_some_and(|t| t.started) {
                    self.turn_count += 1;
                }
                // A launch that failed never started: its reason is the
                // failure text a recovered rejection carries.
                let failure = p["reason"].as_str().map(str::to_string);
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
                let turn_id = s("turnId");
                self.queue.retain(|t| *t != turn_id);
                if let Some(t) = self.turns.get_mut(&turn_id) {
                    t.status = TurnStatus::Unqueued;
                }
            }
            "item/started" | "item/completed" | "item/updated" => {
                let item = &p["item"];
                let item_id = item["itemId"].as_str().unwrap_or_default().to_string();
                if item["kind"] == "toolCall" && item["tool"] == "background" {
                    let running = item["status"] == "inProgress";
                    self.tasks.insert(
                        item_id.clone(),
                        TaskRec {
                            turn_id: item["turnId"].as_str().unwrap_or_default().to_string(),
                            running,
                        },
                    );
                }
                self.upsert_item(item_id, item.clone());
            }
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
            "state/updated" => {
                if let Some(r) = p["revision"].as_u64() {
                    self.revision = r;
                }
                if let Some(set) = p["set"].as_object() {
                    merge_kv(&mut self.kv, set);
                }
            }
            _ => {}
        }
    }

    fn upsert_item(&mut self, item_id: String, item: Value) {
        match self.item_index.get(&item_id) {
            Some(i) => self.items[*i] = item,
            None => {
                self.item_index.insert(item_id, self.items.len());
                self.items.push_back(item);
            }
        }
    }

    /// The item with this id, latest revision.
    pub fn item(&self, item_id: &str) -> Option<&Value> {
        self.item_index.get(item_id).map(|i| &self.items[*i])
    }

    /// Unsettled intakes in intake order (`pendingCommands`).
    pub fn pending_commands(&self) -> Vec<Value> {
        let mut v: Vec<&LedgerEntry> = self
            .ledger
            .values()
            .filter(|e| e.outcome.is_none())
            .collect();
        v.sort_by_key(|e| e.seq);
        v.iter()
            .map(|e| json!({"commandId": e.command_id, "method": e.method}))
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
    format!(
        "{}:{}",
        stream["kind"].as_str().unwrap_or_default(),
        stream["id"].as_str().unwrap_or_default()
    )
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
                params: json!({}),
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
        assert_eq!(s.ledger["c1"].durable_at, 40);
        assert_eq!(
            s.ledger["c1"].replay_answer(),
            Replay::Now(Answer::Error(abandoned_error("turn/start", "C1")))
        );
    }

    #[test]
    fn kv_merge_deletes_on_null() {
        let mut kv = Map::new();
        merge_kv(&mut kv, json!({"a": 1, "b": 2}).as_object().unwrap());
        merge_kv(&mut kv, json!({"a": null, "c": 3}).as_object().unwrap());
        assert_eq!(Value::Object(kv), json!({"b": 2, "c": 3}));
    }
}
