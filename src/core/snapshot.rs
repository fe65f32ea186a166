//! Snapshot records: the fold of a session written as one log record, so
//! that a load reads the live state instead of the whole history.
//!
//! # The compacted log (log format 2)
//!
//! A session's *logical log* is every record it ever appended, in order,
//! as bytes: exactly what a log never compacted holds (log format 1:
//! `created` first, then records of types 1-6). Compaction moves a prefix
//! of it into the session's *archive* and rewrites the log:
//!
//! - `DIR/sessions/<id>/history.log` (the archive) holds the logical log's
//!   bytes `0..archive_len` verbatim; it only ever grows (an interrupted
//!   compaction may leave bytes past `archive_len`, which the next one cuts
//!   off before appending);
//! - `DIR/sessions/<id>/session.log` holds one [`Snapshot`] record (type 7)
//!   folding the logical log up to `archive_len`, then the logical log's
//!   bytes from `archive_len` on (the tail). A byte at physical offset `p
//!   >= S` of the file (`S` the snapshot frame's length) is logical byte
//!   `p - S + archive_len`.
//!
//! So the archive followed by the log's records after its snapshot is the
//! logical log, record for record: nothing is rewritten but the snapshot.
//! Loading reads the snapshot and folds the tail; events and answers of
//! archived records are read back from the archive by offset (the
//! snapshot's event index and the ledger's record offsets) when a page, a
//! subscription's backlog or a replay needs them.
//!
//! A snapshot may span several frames: the head (type 7) and then `parts`
//! snapshot-part records (type 8, `record: "snapshotPart"`), each carrying
//! a run of the ledger and of the event index, so that no frame passes the
//! 64 MiB payload limit however long the ledger grows. The log's tail
//! begins after the last part; nothing else may come between them.
//!
//! The snapshot's JSON (`record: "snapshot"`, `format: 2`) lists the live
//! state: the session's own fields, the ledger as a compact index (per
//! command: id as sent, method, SHA-256 of the payload signature, intake
//! order, the offset and length of its `received` and `settled` records,
//! its outcome; the answer only while it is pending), turns, queue,
//! items, approvals, tasks, stream sequences, and the logical offset of
//! every durable event's record (delta-encoded).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::record::StoredAnswer;
use super::session::{ApprovalRec, JsonText, LedgerEntry, Session, TaskRec, TurnRec, TurnStatus};
use crate::proto::ids::CmdKey;

/// The log format a snapshot record declares: format 1 is a log of record
/// types 1-6 with `created` first; format 2 may begin with a snapshot
/// (type 7) and continue in an archive file.
pub const LOG_FORMAT_VERSION: u32 = 2;

/// The frame type byte of a snapshot record.
pub const SNAPSHOT_TYPE: u8 = 7;

/// The frame type byte of a snapshot part (only ever right after its
/// snapshot head).
pub const SNAPSHOT_PART_TYPE: u8 = 8;

/// Ledger entries per snapshot part (about 13 MB of JSON).
pub const PART_LEDGER_ENTRIES: usize = 50_000;

/// Event offsets per snapshot part.
pub const PART_EVENT_STARTS: usize = 1_000_000;

/// The `record` tag of a snapshot part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PartTag {
    /// The only value.
    SnapshotPart,
}

/// A run of a snapshot's ledger and event index, in order after its head
/// and the parts before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapshotPart {
    /// Always `"snapshotPart"`.
    pub record: PartTag,
    /// Ledger entries continuing the head's.
    pub ledger: Vec<SnapLedger>,
    /// Event offset deltas continuing the head's.
    pub event_starts: Vec<u64>,
}

/// Encodes a snapshot as its frames (head, then parts); `None` when a
/// frame would still pass the payload limit (the compaction is skipped).
pub fn encode(mut snap: Snapshot) -> Option<Vec<u8>> {
    let ledger = std::mem::take(&mut snap.ledger);
    let starts = std::mem::take(&mut snap.event_starts);
    let mut parts = Vec::new();
    let (mut l, mut e) = (ledger.as_slice(), starts.as_slice());
    while !l.is_empty() || !e.is_empty() {
        let (lh, lt) = l.split_at(l.len().min(PART_LEDGER_ENTRIES));
        let (eh, et) = e.split_at(e.len().min(PART_EVENT_STARTS));
        parts.push((lh, eh));
        (l, e) = (lt, et);
    }
    snap.parts = parts.len() as u32;
    let max = crate::log::MAX_PAYLOAD_BYTES as usize;
    let head = serde_json::to_vec(&snap).expect("snapshots serialise");
    if head.len() > max {
        return None;
    }
    let mut out = crate::log::encode_frame(SNAPSHOT_TYPE, &head);
    for (lh, eh) in parts {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct PartRef<'a> {
            record: PartTag,
            ledger: &'a [SnapLedger],
            event_starts: &'a [u64],
        }
        let payload = serde_json::to_vec(&PartRef {
            record: PartTag::SnapshotPart,
            ledger: lh,
            event_starts: eh,
        })
        .expect("snapshot parts serialise");
        if payload.len() > max {
            return None;
        }
        out.extend(crate::log::encode_frame(SNAPSHOT_PART_TYPE, &payload));
    }
    Some(out)
}

/// The `record` tag of a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SnapshotTag {
    /// The only value.
    Snapshot,
}

/// A snapshot record: the fold of a session's logical log up to
/// `archive_len`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Snapshot {
    /// Always `"snapshot"`.
    pub record: SnapshotTag,
    /// [`LOG_FORMAT_VERSION`].
    pub format: u32,
    /// Logical length of the archive (where the log's tail begins).
    pub archive_len: u64,
    /// Records of the logical log folded into this snapshot.
    pub record_count: u64,
    /// The session id.
    pub session_id: String,
    /// Creation time.
    pub created_at_ms: u64,
    /// Time of the last record.
    pub updated_at_ms: u64,
    /// `workspaceRoot`.
    pub workspace_root: Option<String>,
    /// The command that created the session.
    pub start_command_id: String,
    /// A `session/resume` was admitted.
    pub resumed: bool,
    /// The last lifecycle record was `loaded`.
    pub lifecycle_open: bool,
    /// Completed turns.
    pub turn_count: u64,
    /// `state/update` revision.
    pub revision: u64,
    /// `state/update` key-value state.
    pub kv: Map<String, Value>,
    /// Intakes so far (the next one's order is this plus one).
    pub intake_count: u64,
    /// The ledger, in intake order.
    pub ledger: Vec<SnapLedger>,
    /// Pending commands whose effect has a durable record.
    pub effect_seen: Vec<String>,
    /// Every turn.
    pub turns: Vec<SnapTurn>,
    /// Queued turns in launch order.
    pub queue: Vec<String>,
    /// The running turn.
    pub running: Option<String>,
    /// Items in first-seen order, latest revision, as the session keeps
    /// them (their text, copied into the record as it is).
    pub items: Vec<JsonText>,
    /// Every approval.
    pub approvals: Vec<SnapApproval>,
    /// Every background task.
    pub tasks: Vec<SnapTask>,
    /// Last sequence number per source stream (`kind:id`).
    pub streams: BTreeMap<String, u64>,
    /// Logical offset of event `n`'s record at index `n - 1`, each as the
    /// difference from the previous one (the first from 0).
    pub event_starts: Vec<u64>,
    /// Snapshot-part records that follow this head (their ledger entries
    /// and event offsets continue the head's).
    #[serde(default)]
    pub parts: u32,
}

/// A ledger entry in a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapLedger {
    /// `commandId` as first sent.
    pub id: String,
    /// The method.
    pub method: String,
    /// SHA-256 of the payload signature, lowercase hex.
    pub sha256: String,
    /// Intake order.
    pub seq: u64,
    /// `[logical offset, length]` of the `received` record.
    pub received: (u64, u32),
    /// The admission answer, present while the command is pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<StoredAnswer>,
    /// `applied`, `rejected` or `abandoned`; absent while pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// `[logical offset, length]` of the `settled` record, once settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<(u64, u32)>,
}

/// A turn in a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapTurn {
    /// The turn id.
    pub turn_id: String,
    /// The command that minted it.
    pub command_id: String,
    /// `queued`, `running`, `unqueued` or `ended`.
    pub status: String,
    /// The `turn/completed` terminal of an ended turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<String>,
    /// Input text (kept for turns that have not ended).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// A `turn/started` was recorded.
    pub started: bool,
    /// The failure text of a failed launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// An approval in a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapApproval {
    /// `approval/requested` params.
    pub params: Value,
    /// Its cursor.
    pub cursor: String,
    /// The turn.
    pub turn_id: String,
    /// The tool call item.
    pub item_id: String,
    /// `{decision, resolvedBy, viewCursor}` once resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Value>,
    /// The decision, once resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
}

/// A background task in a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapTask {
    /// The task id (its toolCall item id).
    pub task_id: String,
    /// The turn that started it.
    pub turn_id: String,
    /// Still running.
    pub running: bool,
}

/// Why a snapshot could not be restored (a bug or a foreign file; the load
/// fails with `logCorrupt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSnapshot(pub String);

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

fn unhex32(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (digit(b[2 * i])? << 4) | digit(b[2 * i + 1])?;
    }
    Some(out)
}

/// A map of `entries` (in any order; of equal keys the last one wins, as
/// inserting them in order would give) whose leaves are full.
///
/// Why: the B-tree splits a full leaf in halves, so keys inserted in
/// ascending order (a restored ledger: UUIDv7 ids in intake order, nearly
/// ascending) leave every leaf half empty, and a leaf has room for 16
/// entries whether it holds 8 or 16. Inserting every other key first
/// (leaves of 8) and then the rest (each falls into the leaf of its
/// neighbours, filling it to 16 without a split) halves the nodes. The
/// map is the same map either way; only its memory differs.
fn dense_map<K: Ord + Clone, V: Clone>(mut entries: Vec<(K, V)>) -> imbl::OrdMap<K, V> {
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    // Of a run of equal keys keep the last (`dedup_by` keeps the first:
    // move each later one into it).
    entries.dedup_by(|later, first| {
        if later.0 == first.0 {
            std::mem::swap(later, first);
            true
        } else {
            false
        }
    });
    let mut map = imbl::OrdMap::new();
    let (mut odd, mut i) = (Vec::with_capacity(entries.len() / 2), 0usize);
    for kv in entries {
        if i % 2 == 0 {
            map.insert(kv.0, kv.1);
        } else {
            odd.push(kv);
        }
        i += 1;
    }
    for (k, v) in odd {
        map.insert(k, v);
    }
    map
}

impl Session {
    /// The snapshot of this session, folded up to its current end (which
    /// becomes the archive's length once the compaction that writes it is
    /// done).
    pub fn to_snapshot(&self) -> Snapshot {
        let mut ledger: Vec<(&CmdKey, &LedgerEntry)> = self.ledger.iter().collect();
        ledger.sort_by_key(|(_, e)| e.seq);
        let ledger = ledger
            .into_iter()
            .map(|(k, e)| SnapLedger {
                id: k.as_sent(),
                method: e.method().to_string(),
                sha256: hex(&e.sig_sha256()),
                seq: e.seq,
                received: e.received_at(),
                answer: if e.is_pending() {
                    e.answer().cloned()
                } else {
                    None
                },
                outcome: e.outcome_name().map(str::to_string),
                settled: e.outcome_name().map(|_| e.settled_at()),
            })
            .collect();
        let turns = self
            .turns
            .iter()
            .map(|(id, t)| {
                let (status, terminal) = match &t.status {
                    TurnStatus::Queued => ("queued", None),
                    TurnStatus::Running => ("running", None),
                    TurnStatus::Unqueued => ("unqueued", None),
                    TurnStatus::Ended(term) => ("ended", Some(term.clone())),
                };
                let live = matches!(t.status, TurnStatus::Queued | TurnStatus::Running);
                SnapTurn {
                    turn_id: id.clone(),
                    command_id: t.command_id.clone(),
                    status: status.to_string(),
                    terminal,
                    text: if live { t.text.clone() } else { String::new() },
                    started: t.started,
                    failure: t.failure.clone(),
                }
            })
            .collect();
        let mut prev = 0u64;
        let event_starts = self
            .event_starts
            .iter()
            .map(|s| {
                debug_assert!(*s >= prev, "events are in log order");
                let d = s - prev;
                prev = *s;
                d
            })
            .collect();
        Snapshot {
            record: SnapshotTag::Snapshot,
            format: LOG_FORMAT_VERSION,
            archive_len: self.end_bytes,
            record_count: self.record_count,
            session_id: self.id.clone(),
            created_at_ms: self.created_at_ms,
            updated_at_ms: self.updated_at_ms,
            workspace_root: self.workspace_root.clone(),
            start_command_id: self.start_command_id.clone(),
            resumed: self.resumed,
            lifecycle_open: self.lifecycle_open,
            turn_count: self.turn_count,
            revision: self.revision,
            kv: self.kv.clone(),
            intake_count: self.next_seq,
            ledger,
            effect_seen: self
                .effect_seen
                .iter()
                .filter(|k| self.ledger.get(*k).is_some_and(LedgerEntry::is_pending))
                .map(CmdKey::lower)
                .collect(),
            turns,
            queue: self.queue.iter().cloned().collect(),
            running: self.running.clone(),
            items: self.items.iter().cloned().collect(),
            approvals: self
                .approvals
                .values()
                .map(|a| SnapApproval {
                    params: a.params.clone(),
                    cursor: a.cursor.clone(),
                    turn_id: a.turn_id.clone(),
                    item_id: a.item_id.clone(),
                    resolution: a.resolution.clone(),
                    decision: a.decision.clone(),
                })
                .collect(),
            tasks: self
                .tasks
                .iter()
                .map(|(id, t)| SnapTask {
                    task_id: id.clone(),
                    turn_id: t.turn_id.clone(),
                    running: t.running,
                })
                .collect(),
            streams: self.stream_seq.clone(),
            event_starts,
            parts: 0,
        }
    }

    /// Checks a snapshot before it is restored: everything
    /// [`Session::from_snapshot`] relies on.
    pub fn check_snapshot(snap: &Snapshot) -> Result<(), BadSnapshot> {
        let bad = |m: String| Err(BadSnapshot(m));
        if snap.format != LOG_FORMAT_VERSION {
            return bad(format!("unsupported log format {}", snap.format));
        }
        let mut at = 0u64;
        for d in &snap.event_starts {
            at = match at.checked_add(*d) {
                Some(a) if a < snap.archive_len => a,
                _ => return bad("an event offset lies past the archive".into()),
            };
        }
        let mut seqs = BTreeSet::new();
        for e in &snap.ledger {
            if unhex32(&e.sha256).is_none() {
                return bad(format!(
                    "ledger entry {}: sha256 is not 64 hex digits",
                    e.id
                ));
            }
            if !seqs.insert(e.seq) || e.seq > snap.intake_count {
                return bad(format!("ledger entry {}: bad intake order {}", e.id, e.seq));
            }
            let end = |(at, len): (u64, u32)| at.checked_add(u64::from(len));
            if end(e.received).is_none_or(|x| x > snap.archive_len) {
                return bad(format!(
                    "ledger entry {}: received record past the archive",
                    e.id
                ));
            }
            match (e.outcome.as_deref(), e.settled, &e.answer) {
                (None, None, Some(_)) => {}
                (Some("applied" | "rejected" | "abandoned"), Some(s), _)
                    if end(s).is_some_and(|x| x <= snap.archive_len) => {}
                _ => return bad(format!("ledger entry {}: bad outcome", e.id)),
            }
        }
        for t in &snap.turns {
            let ok = matches!(t.status.as_str(), "queued" | "running" | "unqueued")
                || (t.status == "ended" && t.terminal.is_some());
            if !ok {
                return bad(format!("turn {}: bad status {:?}", t.turn_id, t.status));
            }
        }
        let turn_ids: BTreeSet<&str> = snap.turns.iter().map(|t| t.turn_id.as_str()).collect();
        for q in snap.queue.iter().chain(snap.running.iter()) {
            if !turn_ids.contains(q.as_str()) {
                return bad(format!("turn {q} is queued or running but unknown"));
            }
        }
        for item in &snap.items {
            if item.str_members(["itemId"])[0].is_none() {
                return bad("an item without itemId".into());
            }
        }
        Ok(())
    }

    /// Restores a session from a checked snapshot (see
    /// [`Session::check_snapshot`]). Everything archived stays on disk: no
    /// event is in memory, settled answers are read back when replayed.
    pub fn from_snapshot(snap: &Snapshot) -> Session {
        Session::from_snapshot_owned(snap.clone())
    }

    /// [`Session::from_snapshot`] consuming the snapshot (a load: its
    /// strings move into the session instead of being copied).
    pub fn from_snapshot_owned(mut snap: Snapshot) -> Session {
        let mut s = Session {
            id: std::mem::take(&mut snap.session_id),
            created_at_ms: snap.created_at_ms,
            updated_at_ms: snap.updated_at_ms,
            workspace_root: snap.workspace_root.take(),
            start_command_id: std::mem::take(&mut snap.start_command_id),
            next_seq: snap.intake_count,
            turn_count: snap.turn_count,
            resumed: snap.resumed,
            revision: snap.revision,
            kv: std::mem::take(&mut snap.kv),
            stream_seq: std::mem::take(&mut snap.streams),
            lifecycle_open: snap.lifecycle_open,
            record_count: snap.record_count,
            archive_len: snap.archive_len,
            end_bytes: snap.archive_len,
            running: snap.running.take(),
            queue: std::mem::take(&mut snap.queue)
                .into_iter()
                .collect::<VecDeque<_>>(),
            ..Session::default()
        };
        let archive_len = snap.archive_len;
        let entries = std::mem::take(&mut snap.ledger).into_iter().map(|e| {
            let entry = LedgerEntry::restored(
                &e.method,
                unhex32(&e.sha256).unwrap_or([0; 32]),
                e.answer,
                e.outcome.as_deref(),
                e.received,
                e.settled.unwrap_or((0, 0)),
                archive_len,
                e.seq,
            );
            (CmdKey::of(&e.id), entry)
        });
        s.ledger = dense_map(entries.collect());
        s.pending = s
            .ledger
            .iter()
            .filter(|(_, e)| e.is_pending())
            .map(|(k, e)| (e.seq, k.clone()))
            .collect();
        s.effect_seen = std::mem::take(&mut snap.effect_seen)
            .iter()
            .map(|k| CmdKey::of(k))
            .collect();
        for t in &snap.turns {
            let status = match t.status.as_str() {
                "queued" => TurnStatus::Queued,
                "running" => TurnStatus::Running,
                "unqueued" => TurnStatus::Unqueued,
                _ => TurnStatus::Ended(t.terminal.clone().unwrap_or_default()),
            };
            s.turns.insert(
                t.turn_id.clone(),
                TurnRec {
                    command_id: t.command_id.clone(),
                    status,
                    text: t.text.clone(),
                    started: t.started,
                    failure: t.failure.clone(),
                },
            );
        }
        for item in std::mem::take(&mut snap.items) {
            let [id, status] = item.str_members(["itemId", "status"]);
            let in_progress = status.as_deref() == Some("inProgress");
            s.upsert_item(id.unwrap_or_default(), item, in_progress);
        }
        for a in &snap.approvals {
            let id = a.params["approvalId"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            s.approvals.insert(
                id,
                ApprovalRec {
                    params: a.params.clone(),
                    cursor: a.cursor.clone(),
                    turn_id: a.turn_id.clone(),
                    item_id: a.item_id.clone(),
                    resolution: a.resolution.clone(),
                    decision: a.decision.clone(),
                },
            );
        }
        for t in &snap.tasks {
            s.tasks.insert(
                t.task_id.clone(),
                TaskRec {
                    turn_id: t.turn_id.clone(),
                    running: t.running,
                },
            );
        }
        let mut at = 0u64;
        s.event_starts = snap
            .event_starts
            .iter()
            .map(|d| {
                at += d;
                at
            })
            .collect();
        s
    }

    /// Forgets what a compaction moved into the archive, which now ends at
    /// `archive_len`: events before it leave memory (their index stays),
    /// settled answers and rejections whose records are archived are read
    /// back when replayed, and effects of settled commands are no longer
    /// tracked.
    pub fn archive_upto(&mut self, archive_len: u64) {
        debug_assert!(archive_len >= self.archive_len, "the archive only grows");
        debug_assert!(
            archive_len <= self.end_bytes,
            "nothing past the fold is archived"
        );
        self.archive_len = archive_len;
        let keep_from = self
            .events
            .iter()
            .position(|e| self.event_starts[(e.n - 1) as usize] >= archive_len)
            .unwrap_or(self.events.len());
        self.events = self.events.skip(keep_from);
        // The ledger is a persistent map (no mutable iteration): the
        // entries whose answers moved to the archive, then each changed.
        let moved: Vec<CmdKey> = self
            .ledger
            .iter()
            .filter(|(_, e)| e.holds_archived(archive_len))
            .map(|(k, _)| k.clone())
            .collect();
        for k in moved {
            let e = self.ledger.get_mut(&k).expect("an entry just seen");
            e.archive_upto(archive_len);
        }
        let ledger = &self.ledger;
        self.effect_seen = self
            .effect_seen
            .iter()
            .filter(|k| ledger.get(*k).is_some_and(LedgerEntry::is_pending))
            .cloned()
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::record::{decode_log, Answer, Outcome, Record, StoredAnswer};
    use serde_json::json;

    /// A session of `n` settled `state/update`s and their events.
    fn big_session(n: u32) -> (Session, Vec<u8>) {
        let mut log = Vec::new();
        let mut s = Session::default();
        let mut push = |s: &mut Session, r: Record| {
            let b = r.encode();
            let end = s.end_bytes + b.len() as u64;
            s.apply(&r, end);
            log.extend(b);
        };
        push(
            &mut s,
            Record::Created {
                session_id: "0198f0aa-3333-7000-8000-0000000000cc".into(),
                created_at_ms: 1,
                workspace_root: None,
                start_command_id: "c".into(),
            },
        );
        for i in 0..n {
            let id = format!("018f6a1e-9b3c-7c21-a54a-{i:012x}");
            push(
                &mut s,
                Record::Received {
                    command_id: id.clone(),
                    method: "state/update".into(),
                    params: json!({"k": i}),
                    signature: format!("sig{i}"),
                    answer: StoredAnswer::new(&Answer::Result(json!({"revision": i + 1}))),
                    at_ms: 2,
                },
            );
            push(
                &mut s,
                Record::Event {
                    n: u64::from(i) + 1,
                    method: "state/updated".into(),
                    params: crate::core::session::EventParams::of(&json!({"revision": i + 1})),
                    emitted_at_ms: 2,
                    cause: Some(id.clone()),
                },
            );
            push(
                &mut s,
                Record::Settled {
                    command_id: id,
                    outcome: Outcome::Applied,
                },
            );
        }
        (s, log)
    }

    #[test]
    fn a_snapshot_that_breaks_what_restoring_relies_on_is_refused() {
        // A CRC-valid snapshot that a correct host never writes (a foreign
        // or hand-made file): each defect is refused with its reason, never
        // restored.
        let (s, log) = big_session(3);
        let good = s.to_snapshot();
        assert_eq!(good.archive_len, log.len() as u64);
        assert_eq!(Session::check_snapshot(&good), Ok(()));
        let mut with_turn = good.clone();
        with_turn.turns.push(SnapTurn {
            turn_id: "t1".into(),
            command_id: "c".into(),
            status: "ended".into(),
            terminal: Some("completed".into()),
            text: String::new(),
            started: true,
            failure: None,
        });
        with_turn.queue.clear();
        assert_eq!(Session::check_snapshot(&with_turn), Ok(()));
        type Defect = (&'static str, fn(&mut Snapshot));
        let defects: [Defect; 12] = [
            ("unsupported log format", |x| x.format += 1),
            ("an event offset lies past the archive", |x| {
                // The last event starting exactly at the archive's end.
                let before: u64 = x.event_starts.iter().rev().skip(1).sum();
                *x.event_starts.last_mut().unwrap() = x.archive_len - before;
            }),
            ("an event offset lies past the archive", |x| {
                x.event_starts[0] = u64::MAX;
            }),
            ("sha256 is not 64 hex digits", |x| {
                x.ledger[0].sha256.pop();
            }),
            ("bad intake order", |x| x.ledger[1].seq = x.ledger[0].seq),
            ("bad intake order", |x| x.ledger[0].seq = x.intake_count + 1),
            ("received record past the archive", |x| {
                x.ledger[0].received.0 = x.archive_len - u64::from(x.ledger[0].received.1) + 1;
            }),
            ("bad outcome", |x| x.ledger[0].outcome = Some("done".into())),
            ("bad outcome", |x| {
                let s = x.ledger[0].settled.as_mut().unwrap();
                s.0 = x.archive_len - u64::from(s.1) + 1;
            }),
            ("bad status", |x| x.turns[0].terminal = None),
            ("is queued or running but unknown", |x| {
                x.running = Some("t9".into())
            }),
            ("an item without itemId", |x| {
                x.items.push(crate::core::session::EventParams::of(
                    &json!({"kind": "userMessage"}),
                ));
            }),
        ];
        for (reason, defect) in defects {
            let mut bad = with_turn.clone();
            defect(&mut bad);
            match Session::check_snapshot(&bad) {
                Err(BadSnapshot(m)) => assert!(m.contains(reason), "{m:?} is not {reason:?}"),
                Ok(()) => panic!("a snapshot with {reason:?} was accepted"),
            }
        }
    }

    #[test]
    fn a_dense_map_is_the_map_of_its_entries_inserted_in_order() {
        // Keys in a scrambled order with repeats that differ in case: the
        // last of equal keys wins, key (its spelling) and value.
        let ids: Vec<String> = (0..1000u32)
            .map(|i| {
                let n = (i * 7919) % 613;
                let id = format!("018f6a1e-9b3c-7c21-a54a-{n:012x}");
                if i % 3 == 0 {
                    id.to_uppercase()
                } else {
                    id
                }
            })
            .collect();
        let entries: Vec<(CmdKey, u32)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (CmdKey::of(id), i as u32))
            .collect();
        let mut want = imbl::OrdMap::new();
        for (k, v) in entries.clone() {
            want.insert(k, v);
        }
        let got = dense_map(entries);
        let spelt = |m: &imbl::OrdMap<CmdKey, u32>| -> Vec<(String, u32)> {
            m.iter().map(|(k, v)| (k.as_sent(), *v)).collect()
        };
        assert_eq!(spelt(&got), spelt(&want));
    }

    #[test]
    fn a_long_ledger_spans_snapshot_parts_and_restores_whole() {
        let n = PART_LEDGER_ENTRIES as u32 * 2 + 7;
        let (s, log) = big_session(n);
        let frames = encode(s.to_snapshot()).expect("within the limit");
        let scan = crate::log::scan(&frames);
        let types: Vec<u8> = scan.frames.iter().map(|f| f.record_type).collect();
        assert_eq!(
            types,
            vec![SNAPSHOT_TYPE, 8, 8, 8],
            "a head and three parts"
        );
        let d = decode_log(&frames).expect("decodes");
        assert_eq!(d.snapshot_bytes, frames.len() as u64);
        assert_eq!(d.archive_len, log.len() as u64);
        let Some((Record::Snapshot(snap), _)) = d.records.first() else {
            panic!("no snapshot first");
        };
        assert_eq!(snap.ledger.len(), n as usize);
        let r = Session::from_snapshot(snap);
        assert_eq!(r.head_n(), s.head_n());
        assert_eq!(r.event_starts, s.event_starts);
        assert_eq!(r.ledger.len(), s.ledger.len());
        for (k, e) in &s.ledger {
            let got = &r.ledger[k];
            assert_eq!(
                (got.sig_sha256(), got.received_at(), got.settled_at()),
                (e.sig_sha256(), e.received_at(), e.settled_at())
            );
            assert!(
                got.answer().is_none(),
                "settled answers stay in the archive"
            );
        }
        // A part missing (the log cut after the head) is damage, not a tail.
        let head_end = scan.frames[1].offset as usize;
        let mut cut = frames[..head_end].to_vec();
        cut.extend(Record::Loaded { at_ms: 3 }.encode());
        assert!(decode_log(&cut).is_err());
    }
}
