//! The view: reads (`view/*`, `session/read`, `approval/listPending`),
//! subscriptions with cursors, and the wire shapes of `Session`,
//! `ViewSnapshot` and `pendingRequests` (PROTOCOL.md 4.2 and 4.5).

use serde_json::{json, Value};

use super::host::{Flow, Host, IoAnswer, Slot, Wait};
use super::record::decode_log;
use super::session::Session;
use super::{ConnId, ReadResult};
use crate::proto::envelope::{self, RequestId};
use crate::proto::params::{Parsed, Read};
use crate::proto::RpcError;

/// Formats Unix milliseconds as RFC 3339 UTC (`2026-08-07T18:02:11.412Z`).
pub fn iso8601(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let ms = unix_ms % 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// The effective approval mode (public `EffectiveApprovalModeState`). No
/// command sets it; its `source` is `startup` until the session is
/// resumed, `replay` from then on (the public transcripts' vocabulary:
/// every `session/start` answer says `startup`, every `session/resume`
/// answer `replay`).
pub fn approval_mode(s: &Session) -> Value {
    let source = if s.resumed { "replay" } else { "startup" };
    json!({"mode": "promptUnmatched", "source": source, "lastCommandId": null})
}

/// Marks a `session/resume` answer built before its own intake was folded:
/// the mode it reports is the replayed one.
pub fn as_resumed(result: &mut Value) {
    for p in [
        "/session/approvalMode/source",
        "/history/snapshot/state/approvalMode/source",
    ] {
        if let Some(v) = result.pointer_mut(p) {
            *v = json!("replay");
        }
    }
}

/// The `Session` object.
pub fn session_value(s: &Session, status: &str, path: &str) -> Value {
    json!({
        "sessionId": s.id,
        "status": status,
        "turnCount": s.turn_count,
        "path": path,
        "createdAt": iso8601(s.created_at_ms),
        "updatedAt": iso8601(s.updated_at_ms),
        "workspaceRoot": s.workspace_root,
        "providerId": "msp",
        "modelId": "scripted",
        "approvalMode": approval_mode(s),
        "forkedFrom": null,
        "activeTurnId": s.running,
    })
}

fn turn_ref(s: &Session, turn_id: &str) -> Value {
    let command_id = s
        .turns
        .get(turn_id)
        .map(|t| t.command_id.clone())
        .unwrap_or_default();
    json!({"turnId": turn_id, "commandId": command_id})
}

/// The `ViewSnapshot` at the session's durable head.
pub fn snapshot_value(s: &Session) -> Value {
    json!({
        "schemaVersion": 1,
        "viewCursor": s.cursor(s.head_n()),
        "state": {
            "items": s.items,
            "activeTurn": s.running.as_deref().map(|t| turn_ref(s, t)),
            "queuedTurns": s.queue.iter().map(|t| turn_ref(s, t)).collect::<Vec<_>>(),
            "pendingApprovals": s.pending_approvals().iter().map(|a| json!({
                "approvalId": a.params["approvalId"], "itemId": a.item_id, "viewCursor": a.cursor,
            })).collect::<Vec<_>>(),
            "pendingUserInputs": [],
            "approvalMode": approval_mode(s),
            "effectiveModel": {"modelId": "scripted", "providerId": "msp", "source": "default"},
            "goal": null,
            "todoList": null,
            "branch": null,
            // Public `CumulativeTokenUsage`; the scripted agent counts none.
            "tokenUsage": {"promptTokens": 0, "outputTokens": 0, "totalTokens": 0},
            "turnCount": s.turn_count,
            "pendingCommands": s.pending_commands(),
            "revision": s.revision,
            "kv": s.kv,
        }
    })
}

/// `pendingRequests`: pending approvals as pointers.
pub fn pending_requests_value(s: &Session) -> Value {
    Value::Array(
        s.pending_approvals()
            .iter()
            .map(|a| json!({"kind": "approval", "approvalId": a.params["approvalId"], "viewCursor": a.cursor}))
            .collect(),
    )
}

/// Unframed page events (`{method, params}`), ascending by cursor in both
/// directions (public `ViewPageResult`): backward takes the `limit` events
/// just before `after` and returns them oldest first. `nextCursor` is the
/// anchor of the next page in the same direction (forward the last
/// event's cursor, backward the first's), `null` at the end.
fn page(s: &Session, synced_bytes: u64, limit: usize, after: Option<u64>, backward: bool) -> Value {
    let durable: Vec<_> = s
        .events
        .iter()
        .filter(|e| e.durable_at <= synced_bytes)
        .collect();
    let picked: Vec<_> = if backward {
        let below = after.unwrap_or(u64::MAX);
        durable
            .iter()
            .rev()
            .filter(|e| e.n < below)
            .take(limit + 1)
            .collect()
    } else {
        let above = after.unwrap_or(0);
        durable
            .iter()
            .filter(|e| e.n > above)
            .take(limit + 1)
            .collect()
    };
    let more = picked.len() > limit;
    let mut taken: Vec<_> = picked.iter().take(limit).collect();
    // The far end of the page in the walking direction anchors the next.
    let next = match taken.last() {
        Some(e) if more => json!(s.cursor(e.n)),
        _ => Value::Null,
    };
    if backward {
        taken.reverse();
    }
    debug_assert!(taken.windows(2).all(|w| w[0].n < w[1].n), "ascending");
    let events: Vec<Value> = taken
        .iter()
        .map(|e| json!({"method": e.method, "params": e.params}))
        .collect();
    json!({"events": events, "nextCursor": next})
}

impl Host {
    pub(crate) fn session_json(&self, sid: &str) -> Value {
        let l = self.loaded(sid).expect("loaded");
        let status = if l.s.running.is_some() {
            "running"
        } else {
            "idle"
        };
        session_value(&l.s, status, &self.log_path(sid))
    }

    pub(crate) fn snapshot_json(&self, sid: &str) -> Value {
        snapshot_value(&self.loaded(sid).expect("loaded").s)
    }

    pub(crate) fn pending_requests_json(&self, sid: &str) -> Value {
        pending_requests_value(&self.loaded(sid).expect("loaded").s)
    }

    /// Subscribes `conn` and sends the durable events after `after`
    /// (each behind its own sync gate); live events follow.
    pub(crate) fn subscribe_after(&mut self, conn: ConnId, sid: &str, after: &str) {
        // Staged events go to the current subscribers first; the backlog
        // below then covers them exactly once for the new one.
        self.flush(sid);
        let Some(l) = self.loaded(sid) else { return };
        // A connection already subscribed has been sent every event up to
        // the head (its backlog, then live ones): a second subscription on
        // it (a duplicated resume line, say) must not repeat them.
        let after_n = if l.subscribers.contains(&conn) {
            l.s.head_n()
        } else {
            // Never repeat what this connection was already sent, even by
            // an earlier incarnation of the session (storage failure, then
            // a duplicated resume line).
            let asked = l.s.parse_cursor(after).unwrap_or(l.s.head_n());
            asked.max(self.delivered_upto(conn, sid))
        };
        let backlog: Vec<(Vec<u8>, u64, u64)> =
            l.s.events
                .iter()
                .filter(|e| e.n > after_n)
                .map(|e| {
                    (
                        envelope::notification_line(&e.method, &e.params, e.emitted_at_ms),
                        e.durable_at,
                        e.n,
                    )
                })
                .collect();
        let slot = l.slot;
        for (line, at, n) in backlog {
            let gate = self.loaded(sid).and_then(|l| self.gate_at(l, at));
            self.enqueue_view(conn, line, gate, slot, Some((sid.to_string(), n)));
        }
        if let Some(l) = self.loaded_mut(sid) {
            l.subscribers.insert(conn);
        }
        self.note_activity(sid);
    }

    /// Re-issues pending approvals to `conn` as `approval/request`.
    pub(crate) fn reissue_approvals(&mut self, conn: ConnId, sid: &str) {
        let Some(l) = self.loaded(sid) else { return };
        let pending: Vec<Value> =
            l.s.pending_approvals()
                .iter()
                .map(|a| a.params.clone())
                .collect();
        let gate = self.gate_now(sid);
        let slot = l.slot;
        for params in pending {
            let id = self.next_server_request_id(conn);
            let line = envelope::server_request_line(id, "approval/request", &params);
            self.enqueue_view(conn, line, gate, slot, None);
        }
    }

    pub(crate) fn read(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        r: Read,
        io: Option<IoAnswer>,
    ) -> Flow {
        let sid = r.session_id().to_string();
        if let Read::Unsubscribe { .. } = r {
            if let Some(l) = self.loaded_mut(&sid) {
                l.subscribers.remove(&conn);
            }
            self.note_activity(&sid);
            self.respond(conn, id, &super::record::Answer::Result(json!({})), None);
            return Flow::Done;
        }
        match self.sessions.get(&sid) {
            Some(Slot::Loading) => return Flow::Park(Wait::Session(sid), Parsed::Read(r)),
            Some(Slot::Loaded(_)) => {
                self.read_loaded(conn, id, &sid, r);
                return Flow::Done;
            }
            None => {}
        }
        let log = match io {
            Some(IoAnswer::Read(ReadResult::Found { log, .. })) => log,
            Some(IoAnswer::Read(ReadResult::NotFound)) => {
                self.respond_err(conn, id, RpcError::session_not_found(&sid));
                return Flow::Done;
            }
            Some(IoAnswer::Read(ReadResult::Failed(e))) => {
                self.respond_err(conn, id, RpcError::storage_unavailable(e));
                return Flow::Done;
            }
            _ => {
                let w = self.request_read(conn, &sid);
                return Flow::Park(w, Parsed::Read(r));
            }
        };
        let s = match decode_log(&log) {
            Ok(d) => {
                let mut s = Session::default();
                for (rec, end) in &d.records {
                    s.apply(rec, *end);
                }
                s
            }
            Err(c) => {
                let file = self.log_path(&sid);
                self.respond_err(conn, id, RpcError::log_corrupt(&file, c.offset, &c.detail));
                return Flow::Done;
            }
        };
        if s.record_count == 0 {
            self.respond_err(conn, id, RpcError::session_not_found(&sid));
            return Flow::Done;
        }
        let path = self.log_path(&sid);
        let result = match r {
            Read::Subscribe { after, .. } => {
                let after_n = match after.as_deref().map(|a| s.parse_cursor(a)) {
                    Some(None) => {
                        self.respond_err(conn, id, RpcError::missing_anchor(&sid));
                        return Flow::Done;
                    }
                    Some(Some(n)) => n,
                    None => s.head_n(),
                };
                let head = s.cursor(s.head_n());
                self.respond(
                    conn,
                    id,
                    &super::record::Answer::Result(json!({"viewCursor": head})),
                    None,
                );
                for e in s.events.iter().filter(|e| e.n > after_n) {
                    let line = envelope::notification_line(&e.method, &e.params, e.emitted_at_ms);
                    self.enqueue(conn, line, None, None);
                }
                return Flow::Done;
            }
            Read::Page {
                limit,
                cursor,
                backward,
                ..
            } => {
                let after = match cursor.as_deref().map(|c| s.parse_cursor(c)) {
                    Some(None) => {
                        self.respond_err(conn, id, RpcError::missing_anchor(&sid));
                        return Flow::Done;
                    }
                    other => other.flatten(),
                };
                page(&s, u64::MAX, limit, after, backward)
            }
            Read::SessionRead { .. } => json!({
                "session": session_value(&s, "notLoaded", &path),
                "viewCursor": s.cursor(s.head_n()),
                "history": {"mode": "snapshot", "items": null, "snapshot": snapshot_value(&s)},
                "pendingRequests": pending_requests_value(&s),
            }),
            Read::ListPending { .. } => json!({
                "approvals": s.pending_approvals().iter().map(|a| a.params.clone()).collect::<Vec<_>>(),
                "userInputs": [],
            }),
            Read::Unsubscribe { .. } => unreachable!("handled above"),
        };
        self.respond(conn, id, &super::record::Answer::Result(result), None);
        Flow::Done
    }

    fn read_loaded(&mut self, conn: ConnId, id: &RequestId, sid: &str, r: Read) {
        let l = self.loaded(sid).expect("loaded");
        let answer = |v: Value| super::record::Answer::Result(v);
        match r {
            Read::Subscribe { after, .. } => {
                let after = match after {
                    Some(a) => {
                        if l.s.parse_cursor(&a).is_none() {
                            self.respond_err(conn, id, RpcError::missing_anchor(sid));
                            return;
                        }
                        a
                    }
                    None => l.s.cursor(l.s.head_n()),
                };
                let head = l.s.cursor(l.s.head_n());
                self.respond(conn, id, &answer(json!({"viewCursor": head})), None);
                self.subscribe_after(conn, sid, &after);
            }
            Read::Page {
                limit,
                cursor,
                backward,
                ..
            } => {
                let after = match cursor.as_deref().map(|c| l.s.parse_cursor(c)) {
                    Some(None) => {
                        self.respond_err(conn, id, RpcError::missing_anchor(sid));
                        return;
                    }
                    other => other.flatten(),
                };
                let v = page(&l.s, l.synced_bytes, limit, after, backward);
                self.respond(conn, id, &answer(v), None);
            }
            Read::SessionRead { .. } => {
                let v = json!({
                    "session": self.session_json(sid),
                    "viewCursor": l.s.cursor(l.s.head_n()),
                    "history": {"mode": "snapshot", "items": null, "snapshot": snapshot_value(&l.s)},
                    "pendingRequests": pending_requests_value(&l.s),
                });
                let gate = self.gate_now(sid);
                self.respond(conn, id, &answer(v), gate);
            }
            Read::ListPending { .. } => {
                let v = json!({
                    "approvals": l.s.pending_approvals().iter().map(|a| a.params.clone()).collect::<Vec<_>>(),
                    "userInputs": [],
                });
                let gate = self.gate_now(sid);
                self.respond(conn, id, &answer(v), gate);
            }
            Read::Unsubscribe { .. } => unreachable!("handled by the caller"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_known_instants() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_754_590_931_412), "2025-08-07T18:22:11.412Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
