//! The view: reads (`view/*`, `session/read`, `approval/listPending`),
//! subscriptions with cursors, and the wire shapes of `Session`,
//! `ViewSnapshot` and `pendingRequests` (PROTOCOL.md 4.2 and 4.5).

use serde_json::{json, Value};

use super::host::{Flow, Host, IoAnswer, Slot, Wait};
use super::log_fold::fold_log;
use super::record::{decode_archived, LogCorrupt, Record, StoredAnswer};
use super::session::{Session, StoredEvent};
use super::{ConnId, HistoryResult, LogBytes, ReadResult};
use crate::proto::envelope::{self, RequestId};
use crate::proto::jwrite::{opt_str, J};
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
/// answer `replay`). Written in place into the `Session` object and the
/// snapshot.
fn approval_mode_j(s: &Session) -> J<'static> {
    let source = if s.resumed { "replay" } else { "startup" };
    J::Obj(vec![
        ("lastCommandId", J::Null),
        ("mode", J::S("promptUnmatched")),
        ("source", J::S(source)),
    ])
}

/// The `Session` object.
pub fn session_value(s: &Session, status: &str, path: &str) -> Value {
    session_j(s, status, path).into_value()
}

/// [`session_value`] as a borrowed tree, written in place into an answer
/// (issue 10). Members in serde_json's (sorted) key order.
fn session_j<'a>(s: &'a Session, status: &'a str, path: &'a str) -> J<'a> {
    J::Obj(vec![
        ("activeTurnId", opt_str(s.running.as_deref())),
        ("approvalMode", approval_mode_j(s)),
        ("createdAt", J::Str(iso8601(s.created_at_ms))),
        ("forkedFrom", J::Null),
        ("modelId", J::S("scripted")),
        ("path", J::S(path)),
        ("providerId", J::S("msp")),
        ("sessionId", J::S(&s.id)),
        ("status", J::S(status)),
        ("turnCount", J::U(s.turn_count)),
        ("updatedAt", J::Str(iso8601(s.updated_at_ms))),
        ("workspaceRoot", opt_str(s.workspace_root.as_deref())),
    ])
}

fn turn_ref<'a>(s: &'a Session, turn_id: &'a str) -> J<'a> {
    let command_id = s.turns.get(turn_id).map_or("", |t| t.command_id.as_str());
    J::Obj(vec![
        ("commandId", J::S(command_id)),
        ("turnId", J::S(turn_id)),
    ])
}

/// The `ViewSnapshot` at the session's durable head.
pub fn snapshot_value(s: &Session) -> Value {
    snapshot_j(s).into_value()
}

/// [`snapshot_value`] as a borrowed tree: the session's items and `kv`
/// are written from where they are, not deep-copied into an answer tree
/// then dropped (issue 10). Members in serde_json's (sorted) key order.
fn snapshot_j(s: &Session) -> J<'_> {
    let pending_approvals = s
        .pending_approvals()
        .into_iter()
        .map(|a| {
            J::Obj(vec![
                ("approvalId", J::V(&a.params["approvalId"])),
                ("itemId", J::S(&a.item_id)),
                ("viewCursor", J::S(&a.cursor)),
            ])
        })
        .collect();
    let state = J::Obj(vec![
        (
            "activeTurn",
            s.running.as_deref().map_or(J::Null, |t| turn_ref(s, t)),
        ),
        ("approvalMode", approval_mode_j(s)),
        ("branch", J::Null),
        (
            "effectiveModel",
            J::Obj(vec![
                ("modelId", J::S("scripted")),
                ("providerId", J::S("msp")),
                ("source", J::S("default")),
            ]),
        ),
        ("goal", J::Null),
        (
            "items",
            J::Arr(s.items.iter().map(|i| J::Raw(i.raw())).collect()),
        ),
        ("kv", J::Map(&s.kv)),
        ("pendingApprovals", J::Arr(pending_approvals)),
        (
            "pendingCommands",
            J::Arr(s.pending_commands().into_iter().map(J::Val).collect()),
        ),
        ("pendingUserInputs", J::Arr(Vec::new())),
        (
            "queuedTurns",
            J::Arr(s.queue.iter().map(|t| turn_ref(s, t)).collect()),
        ),
        ("revision", J::U(s.revision)),
        ("todoList", J::Null),
        // Public `CumulativeTokenUsage`; the scripted agent counts none.
        (
            "tokenUsage",
            J::Obj(vec![
                ("outputTokens", J::U(0)),
                ("promptTokens", J::U(0)),
                ("totalTokens", J::U(0)),
            ]),
        ),
        ("turnCount", J::U(s.turn_count)),
    ]);
    J::Obj(vec![
        ("schemaVersion", J::U(1)),
        ("state", state),
        ("viewCursor", J::Str(s.cursor(s.head_n()))),
    ])
}

/// `pendingRequests`: pending approvals as pointers.
pub fn pending_requests_value(s: &Session) -> Value {
    pending_requests_j(s).into_value()
}

fn pending_requests_j(s: &Session) -> J<'_> {
    J::Arr(
        s.pending_approvals()
            .into_iter()
            .map(|a| {
                J::Obj(vec![
                    ("approvalId", J::V(&a.params["approvalId"])),
                    ("kind", J::S("approval")),
                    ("viewCursor", J::S(&a.cursor)),
                ])
            })
            .collect(),
    )
}

/// The history a `session/read` or `session/resume` answer serves (the
/// public `SessionHistory`): the snapshot, or none and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Served {
    /// `mode: "snapshot"`: the folded view.
    Snapshot,
    /// `mode: "none"`, `noneReason: "cursorSuffix"`: a resume from a
    /// cursor; the events after it stream instead.
    CursorSuffix,
    /// `mode: "none"`, `noneReason: "excluded"`: the request asked
    /// `excludeItems: true` (metadata only; page with `view/page`).
    Excluded,
}

impl Served {
    /// What a `session/read` serves: the snapshot unless it asked
    /// `excludeItems: true`.
    pub(crate) fn read(exclude_items: bool) -> Served {
        if exclude_items {
            Served::Excluded
        } else {
            Served::Snapshot
        }
    }
}

/// The `history` member of an answer serving `served`.
fn history_j(s: &Session, served: Served) -> J<'_> {
    let none = |reason| {
        J::Obj(vec![
            ("items", J::Null),
            ("mode", J::S("none")),
            ("noneReason", J::S(reason)),
            ("snapshot", J::Null),
        ])
    };
    match served {
        Served::Snapshot => J::Obj(vec![
            ("items", J::Null),
            ("mode", J::S("snapshot")),
            ("snapshot", snapshot_j(s)),
        ]),
        Served::CursorSuffix => none("cursorSuffix"),
        Served::Excluded => none("excluded"),
    }
}

/// A `session/read` answer: the session, its snapshot (unless `served`
/// excludes it) and pending requests, borrowed from the session.
fn session_read_j<'a>(s: &'a Session, status: &'a str, path: &'a str, served: Served) -> J<'a> {
    J::Obj(vec![
        ("history", history_j(s, served)),
        ("pendingRequests", pending_requests_j(s)),
        ("session", session_j(s, status, path)),
        ("viewCursor", J::Str(s.cursor(s.head_n()))),
    ])
}

/// An `approval/listPending` answer.
fn list_pending_j(s: &Session) -> J<'_> {
    J::Obj(vec![
        (
            "approvals",
            J::Arr(
                s.pending_approvals()
                    .into_iter()
                    .map(|a| J::V(&a.params))
                    .collect(),
            ),
        ),
        ("userInputs", J::Arr(Vec::new())),
    ])
}

/// The logical archive range holding archived events `from_n..=to_n`.
pub(crate) fn archived_range(s: &Session, from_n: u64, to_n: u64) -> (u64, u64) {
    debug_assert!(1 <= from_n && from_n <= to_n && to_n < s.first_in_memory_n());
    let from = s.event_starts[(from_n - 1) as usize];
    let to = match s.event_starts.get(to_n as usize) {
        Some(next) => (*next).min(s.archive_len),
        None => s.archive_len,
    };
    (from, to)
}

/// Archived events `from_n..=to_n` out of archive bytes read at logical
/// offset `from`; every one must be there, in order.
pub(crate) fn archived_events(
    bytes: &[u8],
    from: u64,
    from_n: u64,
    to_n: u64,
) -> Result<Vec<StoredEvent>, LogCorrupt> {
    let mut out = Vec::new();
    for (rec, end) in decode_archived(bytes, from)? {
        if let Record::Event {
            n,
            method,
            params,
            emitted_at_ms,
            ..
        } = rec
        {
            if (from_n..=to_n).contains(&n) {
                out.push(StoredEvent {
                    n,
                    method,
                    params,
                    emitted_at_ms,
                    durable_at: end,
                });
            }
        }
    }
    let dense =
        out.len() as u64 == to_n + 1 - from_n && out.iter().zip(from_n..).all(|(e, n)| e.n == n);
    if !dense {
        return Err(LogCorrupt {
            offset: from,
            detail: format!("archived events {from_n}..={to_n} are not where the index says"),
        });
    }
    Ok(out)
}

/// The highest durable ordinal whose record a sync up to `synced_bytes`
/// covers (archived events are durable once the archive's end is).
fn durable_head(s: &Session, synced_bytes: u64) -> u64 {
    let durable_mem = s
        .events
        .iter()
        .rev()
        .find(|e| e.durable_at <= synced_bytes)
        .map(|e| e.n);
    durable_mem.unwrap_or_else(|| {
        // The archive lies before the log as loaded, which the caller
        // waited to see synced, and before anything compacted since (a
        // compaction is answered like the sync that makes it durable).
        debug_assert!(s.archive_len <= synced_bytes, "archived events are durable");
        s.first_in_memory_n() - 1
    })
}

/// The ordinals of a page (ascending) and the ordinal that anchors the next
/// page, in both directions (public `ViewPageResult`): backward takes the
/// `limit` events just before `after`. `nextCursor` is the anchor of the
/// next page in the same direction (forward the last event's cursor,
/// backward the first's), `null` at the end.
fn page_plan(
    head: u64,
    limit: usize,
    after: Option<u64>,
    backward: bool,
) -> (Vec<u64>, Option<u64>) {
    let limit = limit as u64;
    let mut ns: Vec<u64> = if backward {
        let below = after.unwrap_or(u64::MAX).min(head + 1);
        let low = below.saturating_sub(limit + 1).max(1);
        (low..below).rev().collect()
    } else {
        let above = after.unwrap_or(0);
        let high = head.min(above.saturating_add(limit + 1));
        (above + 1..=high).collect()
    };
    let more = ns.len() as u64 > limit;
    ns.truncate(limit as usize);
    // The far end of the page in the walking direction anchors the next.
    let next = if more { ns.last().copied() } else { None };
    if backward {
        ns.reverse();
    }
    debug_assert!(ns.windows(2).all(|w| w[0] < w[1]), "ascending");
    (ns, next)
}

/// Unframed page events (`{method, params}`) of a session whose events
/// are all in memory, or in memory and in `archived` (read for the page).
/// Each event's params are written from the text they are kept as (the
/// bytes of the tree they were written from), not parsed back into a
/// tree and written again (issue 10).
fn page_j<'a>(s: &'a Session, ns: &[u64], next: Option<u64>, archived: &'a [StoredEvent]) -> J<'a> {
    let events: Vec<J<'a>> = ns
        .iter()
        .filter_map(|n| {
            s.event(*n)
                .or_else(|| archived.iter().find(|e| e.n == *n))
                .map(|e| {
                    J::Obj(vec![
                        ("method", J::S(&e.method)),
                        ("params", J::Raw(e.params.raw())),
                    ])
                })
        })
        .collect();
    debug_assert_eq!(events.len(), ns.len(), "every event of the page is at hand");
    J::Obj(vec![
        ("events", J::Arr(events)),
        ("nextCursor", next.map_or(J::Null, |n| J::Str(s.cursor(n)))),
    ])
}

/// Folds a log read without the lease (its last snapshot and the tail, as
/// a load does), checking that the archive read with it, if any, reaches
/// the end the log says it has. The archived events a read needs are then
/// decoded from `history` by [`archived_from`], only those: a page or a
/// view of a long compacted session costs what it sends, not the whole
/// archive (issue 10's linear growth; issue 11's O(live state)).
fn fold_read(sid: &str, log: &LogBytes, history: &[u8]) -> Result<Session, (bool, LogCorrupt)> {
    let s = fold_log(sid, log).map(|f| f.s).map_err(|c| (false, c))?;
    if !history.is_empty() && (history.len() as u64) < s.archive_len {
        return Err((
            true,
            LogCorrupt {
                offset: history.len() as u64,
                detail: format!("the archive ends before byte {}", s.archive_len),
            },
        ));
    }
    Ok(s)
}

/// The archived events `from_n..=to_n` of `s`, out of its whole archive
/// `history` (read with the log), found through the session's index; a
/// damaged archive is refused `logCorrupt` naming `archive_file`.
fn archived_from(
    s: &Session,
    history: &[u8],
    archive_file: &str,
    from_n: u64,
    to_n: u64,
) -> Result<Vec<StoredEvent>, RpcError> {
    if from_n > to_n {
        return Ok(Vec::new());
    }
    let (from, to) = archived_range(s, from_n, to_n);
    let events = match history.get(from as usize..to as usize) {
        Some(bytes) => archived_events(bytes, from, from_n, to_n),
        None => Err(LogCorrupt {
            offset: history.len() as u64,
            detail: format!("the archive ends before byte {to}"),
        }),
    };
    events.map_err(|c| RpcError::log_corrupt(archive_file, c.offset, &c.detail))
}

/// A `session/resume` answer: the `session/read` answer of the session,
/// its history as `served` (none when the request's cursor is followed by
/// a suffix or it asked `excludeItems`), and both approval modes `replay` (the answer is built before
/// the resume's own intake is folded). Written as text in place: the log
/// and the line hold the text, and building then serialising a tree of
/// the whole view was most of a resume's cost (issue 10). A test compares
/// it with the tree.
fn resume_j<'a>(s: &'a Session, status: &'a str, path: &'a str, served: Served) -> J<'a> {
    let mut j = session_read_j(s, status, path, served);
    for p in [
        &["session", "approvalMode", "source"][..],
        &["history", "snapshot", "state", "approvalMode", "source"],
    ] {
        if let Some(v) = j.member_mut(p) {
            *v = J::S("replay");
        }
    }
    j
}

/// A loaded session's `status`.
fn loaded_status(s: &Session) -> &'static str {
    if s.running.is_some() {
        "running"
    } else {
        "idle"
    }
}

impl Host {
    /// [`resume_j`] of a loaded session, as the text an ack stores.
    pub(crate) fn resume_answer(&self, sid: &str, served: Served) -> StoredAnswer {
        let s = &self.loaded(sid).expect("loaded").s;
        let path = self.log_path(sid);
        StoredAnswer::result_j(&resume_j(s, loaded_status(s), &path, served))
    }

    pub(crate) fn session_json(&self, sid: &str) -> Value {
        let s = &self.loaded(sid).expect("loaded").s;
        session_value(s, loaded_status(s), &self.log_path(sid))
    }

    /// Subscribes `conn` and sends the durable events after `after`
    /// (each behind its own sync gate); live events follow.
    pub(crate) fn subscribe_after(&mut self, conn: ConnId, sid: &str, after: &str) {
        // Staged events go to the current subscribers first; the backlog
        // below then covers them exactly once for the new one.
        self.flush(sid);
        let Some(l) = self.loaded(sid) else { return };
        // Never repeat what this connection was sent or has queued, even
        // by an earlier view or incarnation of the session (a duplicated
        // resume line, a storage failure, then a duplicated line), and
        // send the rest of what was asked: a connection already
        // subscribed from the head was sent nothing before it, so a second
        // `view/subscribe` with an earlier `after` still gets its events
        // (bitrot seed 6804: a dropped `view/unsubscribe` between two
        // subscribes, the second after an old cursor, answered with no
        // backlog).
        let asked = l.s.parse_cursor(after).unwrap_or(l.s.head_n());
        let after_n = asked.max(self.sent_or_queued_upto(conn, sid));
        // Archived events come first, read in chunks into holes of the
        // connection's queue; what follows waits behind them.
        let last_archived = l.s.first_in_memory_n() - 1;
        if after_n < last_archived {
            let gate = self.gate_at(l, l.s.archive_len);
            self.enqueue_backlog_hole(conn, sid, after_n + 1, last_archived, gate);
        }
        let Some(l) = self.loaded(sid) else { return };
        let backlog: Vec<(Vec<u8>, u64, u64)> =
            l.s.events_after(after_n)
                .map(|e| {
                    (
                        envelope::notification_line_raw(&e.method, e.params.raw(), e.emitted_at_ms),
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
            // A view opened on a session whose `session/closed` is already
            // sent would never be told it ended (bitrot seed 359: a link
            // initialized during a shutdown subscribed while the unload's
            // record synced): it waits for the unload, as commands do, and
            // is then answered from the file.
            Some(Slot::Loaded(l)) if l.unloading && matches!(r, Read::Subscribe { .. }) => {
                return Flow::Park(Wait::Session(sid), Parsed::Read(r))
            }
            Some(Slot::Loaded(_)) => return self.read_loaded(conn, id, &sid, r, io),
            None => {}
        }
        let (log, history) = match io {
            Some(IoAnswer::Read(ReadResult::Found { log, history, .. })) => (log, history),
            Some(IoAnswer::Read(ReadResult::NotFound)) => {
                self.respond_err(conn, id, RpcError::session_not_found(&sid));
                return Flow::Done;
            }
            Some(IoAnswer::Read(ReadResult::Failed(e))) => {
                self.respond_err(conn, id, RpcError::storage_unavailable(e));
                return Flow::Done;
            }
            _ if self.refused_while_stopping(conn, id) => return Flow::Done,
            _ => {
                let history = matches!(r, Read::Subscribe { .. } | Read::Page { .. });
                let w = self.request_read(conn, &sid, history);
                return Flow::Park(w, Parsed::Read(r));
            }
        };
        let s = match fold_read(&sid, &log, &history) {
            Ok(s) => s,
            Err((in_archive, c)) => {
                let file = if in_archive {
                    self.archive_path(&sid)
                } else {
                    self.log_path(&sid)
                };
                self.respond_err(conn, id, RpcError::log_corrupt(&file, c.offset, &c.detail));
                return Flow::Done;
            }
        };
        let needs_history = matches!(r, Read::Subscribe { .. } | Read::Page { .. });
        if needs_history && s.first_in_memory_n() > 1 && history.is_empty() {
            let file = self.archive_path(&sid);
            let err = RpcError::log_corrupt(&file, 0, "the session's archive is missing");
            self.respond_err(conn, id, err);
            return Flow::Done;
        }
        if s.record_count == 0 {
            self.respond_err(conn, id, RpcError::session_not_found(&sid));
            return Flow::Done;
        }
        let path = self.log_path(&sid);
        let line = match r {
            Read::Subscribe { after, .. } => {
                let after_n = match after.as_deref().map(|a| s.parse_cursor(a)) {
                    Some(None) => {
                        self.respond_err(conn, id, RpcError::missing_anchor(&sid));
                        return Flow::Done;
                    }
                    Some(Some(n)) => n,
                    None => s.head_n(),
                };
                // As for a loaded session: never repeat on a connection
                // what it was already sent (a duplicated line, a second
                // view), and remember what this backlog sends.
                let after_n = after_n.max(self.sent_or_queued_upto(conn, &sid));
                let last_archived = s.first_in_memory_n() - 1;
                let archive = self.archive_path(&sid);
                let archived =
                    match archived_from(&s, &history, &archive, after_n + 1, last_archived) {
                        Ok(a) => a,
                        Err(e) => {
                            self.respond_err(conn, id, e);
                            return Flow::Done;
                        }
                    };
                let head = s.cursor(s.head_n());
                self.respond(
                    conn,
                    id,
                    &super::record::Answer::Result(json!({"viewCursor": head})),
                    None,
                );
                let mut sent = after_n;
                for e in archived.iter().chain(s.events_after(after_n)) {
                    let line =
                        envelope::notification_line_raw(&e.method, e.params.raw(), e.emitted_at_ms);
                    self.enqueue(conn, line, None, None);
                    sent = e.n;
                }
                if sent > after_n {
                    self.mark_delivered(conn, &sid, sent);
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
                let (ns, next) = page_plan(s.head_n(), limit, after, backward);
                let first_in_memory = s.first_in_memory_n();
                let old = ns.iter().copied().filter(|n| *n < first_in_memory);
                let (lo, hi) = (old.clone().min().unwrap_or(1), old.max().unwrap_or(0));
                let archive = self.archive_path(&sid);
                let archived = match archived_from(&s, &history, &archive, lo, hi) {
                    Ok(a) => a,
                    Err(e) => {
                        self.respond_err(conn, id, e);
                        return Flow::Done;
                    }
                };
                envelope::response_line_j(id, &page_j(&s, &ns, next, &archived))
            }
            Read::SessionRead { exclude_items, .. } => envelope::response_line_j(
                id,
                &session_read_j(&s, "notLoaded", &path, Served::read(exclude_items)),
            ),
            Read::ListPending { .. } => envelope::response_line_j(id, &list_pending_j(&s)),
            Read::Unsubscribe { .. } => unreachable!("handled above"),
        };
        // What `respond` does with an answer tree, the line written in place.
        self.enqueue(conn, line, None, Some(id.clone()));
        Flow::Done
    }

    fn read_loaded(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        sid: &str,
        r: Read,
        io: Option<IoAnswer>,
    ) -> Flow {
        let l = self.loaded(sid).expect("loaded");
        let answer = |v: Value| super::record::Answer::Result(v);
        match r.clone() {
            Read::Subscribe { after, .. } => {
                let after = match after {
                    Some(a) => {
                        if l.s.parse_cursor(&a).is_none() {
                            self.respond_err(conn, id, RpcError::missing_anchor(sid));
                            return Flow::Done;
                        }
                        a
                    }
                    None => l.s.cursor(l.s.head_n()),
                };
                // The head may name events not yet durable: the answer
                // waits for them, and becomes `storageUnavailable` if
                // their sync fails (the reload's next events reuse those
                // ordinals; a client that kept this head would skip them).
                let head = l.s.cursor(l.s.head_n());
                let gate = self.gate_now(sid);
                self.respond(conn, id, &answer(json!({"viewCursor": head})), gate);
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
                        return Flow::Done;
                    }
                    other => other.flatten(),
                };
                // The log as loaded is not yet known durable here: the
                // page waits for this host's first sync rather than say
                // the history ends before it (`nextCursor: null` on a
                // short page is a claim about the head).
                if l.synced_bytes < l.loaded_bytes {
                    return Flow::Park(Wait::SyncIdle(sid.to_string()), Parsed::Read(r));
                }
                let (ns, next) =
                    page_plan(durable_head(&l.s, l.synced_bytes), limit, after, backward);
                // Archived events of the page are read first (the request
                // parks); the archive below its length never changes.
                let archived: Vec<u64> = ns
                    .iter()
                    .copied()
                    .filter(|n| *n < l.s.first_in_memory_n())
                    .collect();
                let mut got = Vec::new();
                if let (Some(lo), Some(hi)) = (archived.first(), archived.last()) {
                    let (from, to) = archived_range(&l.s, *lo, *hi);
                    match io {
                        Some(IoAnswer::History {
                            from: f,
                            to: t,
                            result,
                        }) if f == from && t == to => {
                            let ev = match result {
                                HistoryResult::Found(bytes) => {
                                    archived_events(&bytes, from, *lo, *hi).map_err(|c| {
                                        RpcError::log_corrupt(
                                            &self.archive_path(sid),
                                            c.offset,
                                            &c.detail,
                                        )
                                    })
                                }
                                HistoryResult::Failed(e) => Err(RpcError::storage_unavailable(e)),
                            };
                            match ev {
                                Ok(ev) => got = ev,
                                Err(e) => {
                                    self.respond_err(conn, id, e);
                                    return Flow::Done;
                                }
                            }
                        }
                        _ => {
                            let w = self.request_history(conn, sid, from, to);
                            return Flow::Park(w, Parsed::Read(r));
                        }
                    }
                }
                let l = self.loaded(sid).expect("loaded");
                let line = envelope::response_line_j(id, &page_j(&l.s, &ns, next, &got));
                self.enqueue(conn, line, None, Some(id.clone()));
            }
            Read::SessionRead { exclude_items, .. } => {
                let path = self.log_path(sid);
                let status = loaded_status(&l.s);
                let served = Served::read(exclude_items);
                let line =
                    envelope::response_line_j(id, &session_read_j(&l.s, status, &path, served));
                let gate = self.gate_now(sid);
                self.enqueue(conn, line, gate, Some(id.clone()));
            }
            Read::ListPending { .. } => {
                let line = envelope::response_line_j(id, &list_pending_j(&l.s));
                let gate = self.gate_now(sid);
                self.enqueue(conn, line, gate, Some(id.clone()));
            }
            Read::Unsubscribe { .. } => unreachable!("handled by the caller"),
        }
        Flow::Done
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

    /// The answers as they were built before they were written in place:
    /// `json!` trees, serialised by serde_json (the reference bytes).
    mod reference {
        use super::super::*;

        pub fn approval_mode(s: &Session) -> Value {
            let source = if s.resumed { "replay" } else { "startup" };
            json!({"mode": "promptUnmatched", "source": source, "lastCommandId": null})
        }

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

        pub fn snapshot_value(s: &Session) -> Value {
            json!({
                "schemaVersion": 1,
                "viewCursor": s.cursor(s.head_n()),
                "state": {
                    "items": s.items.iter().map(|i| i.to_value()).collect::<Vec<_>>(),
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
                    "tokenUsage": {"promptTokens": 0, "outputTokens": 0, "totalTokens": 0},
                    "turnCount": s.turn_count,
                    "pendingCommands": s.pending_commands(),
                    "revision": s.revision,
                    "kv": s.kv,
                }
            })
        }

        pub fn pending_requests_value(s: &Session) -> Value {
            Value::Array(
                s.pending_approvals()
                    .iter()
                    .map(|a| json!({"kind": "approval", "approvalId": a.params["approvalId"], "viewCursor": a.cursor}))
                    .collect(),
            )
        }

        fn history(s: &Session, served: Served) -> Value {
            match served {
                Served::Snapshot => {
                    json!({"mode": "snapshot", "items": null, "snapshot": snapshot_value(s)})
                }
                Served::CursorSuffix => {
                    json!({"mode": "none", "items": null, "snapshot": null, "noneReason": "cursorSuffix"})
                }
                Served::Excluded => {
                    json!({"mode": "none", "items": null, "snapshot": null, "noneReason": "excluded"})
                }
            }
        }

        pub fn session_read(s: &Session, status: &str, path: &str, served: Served) -> Value {
            json!({
                "session": session_value(s, status, path),
                "viewCursor": s.cursor(s.head_n()),
                "history": history(s, served),
                "pendingRequests": pending_requests_value(s),
            })
        }

        /// The answer of a `session/resume`, built as a tree and marked
        /// as resumed member by member (how the host built it before
        /// it was written in place).
        pub fn resume(s: &Session, status: &str, path: &str, head: &str, served: Served) -> Value {
            let mut result = json!({
                "session": session_value(s, status, path),
                "viewCursor": head,
                "history": history(s, served),
                "pendingRequests": pending_requests_value(s),
            });
            for p in [
                "/session/approvalMode/source",
                "/history/snapshot/state/approvalMode/source",
            ] {
                if let Some(v) = result.pointer_mut(p) {
                    *v = json!("replay");
                }
            }
            result
        }

        pub fn list_pending(s: &Session) -> Value {
            json!({
                "approvals": s.pending_approvals().iter().map(|a| a.params.clone()).collect::<Vec<_>>(),
                "userInputs": [],
            })
        }

        pub fn page(s: &Session, ns: &[u64], next: Option<u64>, archived: &[StoredEvent]) -> Value {
            let events: Vec<Value> = ns
                .iter()
                .filter_map(|n| {
                    s.event(*n)
                        .or_else(|| archived.iter().find(|e| e.n == *n))
                        .map(|e| json!({"method": e.method, "params": e.params.to_value()}))
                })
                .collect();
            json!({"events": events, "nextCursor": next.map(|n| s.cursor(n))})
        }
    }

    const AWKWARD: [&str; 6] = [
        "plain",
        "q\"uote",
        "back\\slash",
        "ctl\u{0}\u{1f}\n\t\r\u{8}\u{c}",
        "uni caf\u{e9} \u{1f600} \u{2028}\u{2029}",
        "",
    ];

    /// Sessions with every member of a snapshot filled, strings needing
    /// every kind of escape, numbers of every kind, nesting and emptiness.
    fn sessions() -> Vec<Session> {
        let mut out = vec![Session::default()];
        for (i, w) in AWKWARD.iter().enumerate() {
            let mut s = Session {
                id: format!("sess-{w}"),
                created_at_ms: 1_754_590_931_412 + i as u64,
                updated_at_ms: 1_754_590_999_000 * i as u64,
                workspace_root: (i % 2 == 0).then(|| format!("/w/{w}")),
                turn_count: i as u64 * 7,
                resumed: i % 2 == 1,
                revision: u64::MAX - i as u64,
                running: (i % 3 != 0).then(|| format!("t-run-{w}")),
                ..Session::default()
            };
            s.queue.push_back(format!("t-q-{w}"));
            s.queue.push_back("t-unknown".into());
            for t in [format!("t-run-{w}"), format!("t-q-{w}")] {
                s.turns.insert(
                    t.clone(),
                    super::super::session::TurnRec {
                        command_id: format!("cmd-{t}-{w}"),
                        status: super::super::session::TurnStatus::Queued,
                        text: w.to_string(),
                        started: false,
                        failure: None,
                    },
                );
            }
            for item in [
                json!({"id": w, "n": [1, -2, 2.5, 1e300, u64::MAX, i64::MIN]}),
                json!({"nested": {"z": {}, "a": [], "m": [[{}]]}, "t": w}),
                json!(null),
            ] {
                s.items
                    .push_back(super::super::session::JsonText::of(&item));
            }
            s.kv.insert(w.to_string(), json!({"v": w, "f": -0.0, "b": true}));
            s.kv.insert("empty".into(), json!({}));
            for (k, cursor) in [(0, "v:x:10.2"), (1, "v:x:3"), (2, "v:x:10")] {
                s.approvals.insert(
                    format!("ap-{k}"),
                    super::super::session::ApprovalRec {
                        params: json!({"approvalId": format!("ap-{k}{w}"), "sessionId": s.id, "x": {"y": w}}),
                        cursor: cursor.into(),
                        turn_id: "t".into(),
                        item_id: format!("it-{w}"),
                        resolution: (k == 1 && i == 2).then(|| json!({})),
                        decision: None,
                    },
                );
            }
            out.push(s);
        }
        out
    }

    fn bytes(v: &Value) -> Vec<u8> {
        serde_json::to_vec(v).unwrap()
    }

    #[test]
    fn answers_written_in_place_are_the_trees_bytes() {
        for s in sessions() {
            for status in ["idle", "running", "notLoaded"] {
                let path = "/data/sessions/x\"y.log";
                let want = reference::session_value(&s, status, path);
                assert_eq!(session_j(&s, status, path).to_vec(), bytes(&want));
                assert_eq!(session_value(&s, status, path), want);
                for served in [Served::Snapshot, Served::CursorSuffix, Served::Excluded] {
                    let want = reference::session_read(&s, status, path, served);
                    let got = session_read_j(&s, status, path, served).to_vec();
                    assert_eq!(got, bytes(&want), "read, {served:?}");
                    let head = s.cursor(s.head_n());
                    let want = reference::resume(&s, status, path, &head, served);
                    let got = resume_j(&s, status, path, served).to_vec();
                    assert_eq!(got, bytes(&want), "resume, {served:?}");
                    assert!(
                        String::from_utf8(got)
                            .unwrap()
                            .matches("\"source\":\"replay\"")
                            .count()
                            == if served == Served::Snapshot { 2 } else { 1 },
                        "both modes marked"
                    );
                }
            }
            let want = reference::snapshot_value(&s);
            assert_eq!(snapshot_j(&s).to_vec(), bytes(&want));
            assert_eq!(snapshot_value(&s), want);
            let want = reference::pending_requests_value(&s);
            assert_eq!(pending_requests_j(&s).to_vec(), bytes(&want));
            assert_eq!(pending_requests_value(&s), want);
            assert_eq!(
                approval_mode_j(&s).into_value(),
                reference::approval_mode(&s)
            );
            let want = reference::list_pending(&s);
            assert_eq!(list_pending_j(&s).to_vec(), bytes(&want));
        }
    }

    #[test]
    fn pages_written_in_place_are_the_trees_bytes() {
        let mut s = Session {
            id: "p\"age".into(),
            ..Session::default()
        };
        let mut archived = Vec::new();
        for n in 1..=6u64 {
            let w = AWKWARD[n as usize % AWKWARD.len()];
            let e = StoredEvent {
                n,
                method: format!("item/{w}"),
                params: super::super::session::EventParams::of(
                    &json!({"sessionId": s.id, "n": n, "f": 0.1 * n as f64, "w": w, "o": {}}),
                ),
                emitted_at_ms: n,
                durable_at: n * 10,
            };
            s.event_starts.push_back(n * 10);
            if n <= 2 {
                archived.push(e);
            } else {
                s.events.push_back(e);
            }
        }
        for (ns, next) in [
            (vec![], None),
            (vec![1, 2, 3], Some(3)),
            (vec![3, 4, 5, 6], None),
            (vec![2, 6], Some(1)),
        ] {
            let want = reference::page(&s, &ns, next, &archived);
            assert_eq!(page_j(&s, &ns, next, &archived).to_vec(), bytes(&want));
        }
    }
}
