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
        answer: Answer,
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
        /// The notification params (`viewCursor` included).
        params: Value,
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
        let r: Record = serde_json::from_slice(payload).ok()?;
        (r.type_byte() == record_type).then_some(r)
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

impl DecodedLog {
    /// Logical offset of physical offset `phys` (at or past the snapshot).
    pub fn logical(&self, phys: u64) -> u64 {
        debug_assert!(phys >= self.snapshot_bytes);
        phys - self.snapshot_bytes + self.archive_len
    }
}

/// Decodes a whole session log, applying the torn-tail rule. A snapshot is
/// accepted only as the first record, and is checked
/// ([`super::session::Session::check_snapshot`]) before anything trusts
/// it.
pub fn decode_log(bytes: &[u8]) -> Result<DecodedLog, LogCorrupt> {
    let scan = log::scan(bytes);
    // A snapshot is never torn (it is written and synced under another
    // name, then renamed): a bad first frame that says it is one is
    // damage, not a torn append, and cutting it would lose the session.
    if let log::Tail::Torn { offset: 0, reason } = scan.tail {
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
    let mut records = Vec::with_capacity(frames.len());
    let (mut snapshot_bytes, mut archive_len) = (0, 0);
    let mut frames = frames.into_iter().enumerate();
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
                records.push((Record::Snapshot(s), archive_len));
            }
            Some(r) => {
                let end = f.end_offset() - snapshot_bytes + archive_len;
                records.push((r, end));
            }
            None => {
                return Err(corrupt(format!(
                    "undecodable record of type {}",
                    f.record_type
                )))
            }
        }
    }
    Ok(DecodedLog {
        records,
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
                answer: Answer::Result(json!({"ok": true})),
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

    #[test]
    fn payload_not_matching_type_is_corrupt() {
        let f = log::encode_frame(6, br#"{"record":"loaded","atMs":1}"#);
        assert!(decode_log(&f).is_err());
    }
}
