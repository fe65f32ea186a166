//! Admission of commands: session and lease checks, the ledger (replay,
//! payload identity), then each method's own rules (PROTOCOL.md 4.1-4.4).

use serde_json::{json, Value};

use super::bugs::Bug;
use super::host::{Flow, Host, IoAnswer, Slot, Wait};
use super::record::{decode_archived, Answer, Outcome, Record, StoredAnswer};
use super::session::{Replay, TurnStatus};
use super::view::Served;
use super::{ConnId, Durability, HistoryResult, OpenMode, OpenResult, ReadResult};
use crate::proto::canonical::signature;
use crate::proto::envelope::{self, RequestId};
use crate::proto::ids::{id_key, mint_uuid_v7, CmdKey};
use crate::proto::params::{Command, CommandRequest, IfBusy, Parsed};
use crate::proto::RpcError;

/// At most this many queued turns per session.
pub const QUEUE_MAX: usize = 16;

/// The session id a `session/start` without `sessionId` gets: a UUIDv7
/// derived from the command id (its timestamp, and its random bits mixed),
/// so that a replay at any host, after any crash, names the same session.
pub fn derived_session_id(command_id: &str) -> String {
    let u = uuid::Uuid::parse_str(command_id)
        .map(|u| u.as_u128())
        .unwrap_or(0);
    let ms = (u >> 80) as u64;
    let mut x = u ^ 0x6d73_705f_7365_7373_696f_6e5f_6964_2121;
    // splitmix-style finaliser over both halves.
    let mix = |v: u64| {
        let mut z = v.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let hi = mix(x as u64 ^ (x >> 64) as u64);
    x = ((hi as u128) << 64) | mix(hi ^ (u as u64)) as u128;
    mint_uuid_v7(ms, x)
}

enum Ledger {
    Replay(Replay, u64),
    Conflict,
    New,
}

/// Why a replay's answer is not at hand yet.
enum NotYet {
    /// Its archived record is being read: park on this.
    Park(Wait),
    /// It cannot be read: answer this error.
    Failed(RpcError),
}

impl Host {
    pub(crate) fn command(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        c: CommandRequest,
        io: Option<IoAnswer>,
    ) -> Flow {
        let sig = signature(&c.method, &c.normalized);
        match &c.command {
            Command::SessionStart { .. } => return self.session_start(conn, id, c, sig, io),
            Command::SessionResume { .. } => return self.session_resume(conn, id, c, sig, io),
            _ => {}
        }
        let sid = c
            .command
            .session_id()
            .expect("commands name their session")
            .to_string();
        match self.sessions.get(&sid) {
            Some(Slot::Loading) => return Flow::Park(Wait::Session(sid), Parsed::Command(c)),
            Some(Slot::Loaded(l)) if l.unloading => {
                return Flow::Park(Wait::Session(sid), Parsed::Command(c))
            }
            Some(Slot::Loaded(_)) => {}
            None => {
                let err = match io {
                    Some(IoAnswer::Read(ReadResult::NotFound)) => RpcError::session_not_found(&sid),
                    Some(IoAnswer::Read(ReadResult::Found {
                        held_elsewhere: true,
                        ..
                    })) => RpcError::session_in_use(&sid),
                    Some(IoAnswer::Read(ReadResult::Found { .. })) => {
                        RpcError::session_not_loaded(&sid)
                    }
                    Some(IoAnswer::Read(ReadResult::Failed(e))) => RpcError::storage_unavailable(e),
                    _ if self.refused_while_stopping(conn, id) => return Flow::Done,
                    _ => {
                        let w = self.request_read(conn, &sid, false);
                        return Flow::Park(w, Parsed::Command(c));
                    }
                };
                self.respond_err(conn, id, err);
                return Flow::Done;
            }
        }
        if self.must_wait_for_sync(&sid, &c) {
            return Flow::Park(Wait::SyncIdle(sid), Parsed::Command(c));
        }
        let key = id_key(&c.command_id);
        if !c.command.is_durable() {
            self.carrierless(conn, id, &sid, &c, sig, key);
            return Flow::Done;
        }
        match self.ledger_check(&sid, &key, &sig) {
            Ledger::Replay(replay, at) => {
                if self.bugs.has(Bug::ReplayMintsNewTurn) && c.method == "turn/start" {
                    self.replay_as_new_turn(conn, id, &sid, &c);
                    return Flow::Done;
                }
                let answer = match self.replayed(conn, &sid, replay, &io) {
                    Ok(a) => a,
                    Err(NotYet::Park(w)) => return Flow::Park(w, Parsed::Command(c)),
                    Err(NotYet::Failed(e)) => {
                        self.respond_err(conn, id, e);
                        return Flow::Done;
                    }
                };
                let l = self.loaded(&sid).expect("loaded");
                let gate = self.gate_at(l, at);
                self.respond(conn, id, &answer, gate);
                return Flow::Done;
            }
            Ledger::Conflict => {
                self.respond_err(conn, id, conflict(&c));
                return Flow::Done;
            }
            Ledger::New => {}
        }
        match &c.command {
            Command::TurnStart { .. } => self.turn_start(conn, id, &sid, &c, sig),
            Command::TurnSteer { .. } => self.turn_steer(conn, id, &sid, &c, sig),
            Command::TurnUnqueue { .. } => self.turn_unqueue(conn, id, &sid, &c, sig),
            Command::ApprovalDecide { .. } => self.approval_decide(conn, id, &sid, &c, sig),
            Command::StateUpdate { .. } => self.state_update(conn, id, &sid, &c, sig),
            _ => unreachable!("every durable command is handled"),
        }
        self.note_activity(&sid);
        Flow::Done
    }

    /// Without group commit a durable intake waits until the session has
    /// nothing unsynced, so that it gets a sync of its own.
    fn must_wait_for_sync(&self, sid: &str, c: &CommandRequest) -> bool {
        if self.cfg.group_commit
            || self.cfg.durability != Durability::Durable
            || !c.command.is_durable()
        {
            return false;
        }
        let l = self.loaded(sid).expect("loaded");
        l.sync_in_flight.is_some() || !l.unflushed.is_empty() || l.appended_bytes != l.synced_bytes
    }

    fn ledger_check(&self, sid: &str, key: &str, sig: &str) -> Ledger {
        let l = self.loaded(sid).expect("loaded");
        if let Some((id, e)) = l.s.ledger.get_key_value(&CmdKey::of(key)) {
            if e.same_payload(sig) || self.bugs.has(Bug::SkipPayloadCheck) {
                assert!(
                    !self.bugs.has(Bug::PanicOnReplay),
                    "planted bug panic-on-replay: a replay of {key}"
                );
                return Ledger::Replay(e.replay_answer(id), e.durable_at);
            }
            return Ledger::Conflict;
        }
        if self.lifetime_ledger.contains_key(key) {
            return Ledger::Conflict;
        }
        Ledger::New
    }

    /// The answer a replay gives: in memory, or read back from the record
    /// in the archive that holds it (the request parks on the read and is
    /// dispatched again with its bytes in `io`).
    fn replayed(
        &mut self,
        conn: ConnId,
        sid: &str,
        replay: Replay,
        io: &Option<IoAnswer>,
    ) -> Result<Answer, NotYet> {
        let (at, len, settled) = match replay {
            Replay::Now(a) => return Ok(a),
            Replay::Unreadable { at, why } => {
                let l = self.loaded(sid).expect("loaded");
                let (file, offset) = if at >= l.tail_from {
                    (self.log_path(sid), l.phys(at))
                } else {
                    (self.archive_path(sid), at)
                };
                return Err(NotYet::Failed(RpcError::log_corrupt(&file, offset, why)));
            }
            Replay::Archived { at, len, settled } => (at, len, settled),
        };
        let to = at + u64::from(len);
        let bytes = match io {
            Some(IoAnswer::History {
                from,
                to: t,
                result,
            }) if *from == at && *t == to => match result {
                HistoryResult::Found(b) => b,
                HistoryResult::Failed(e) => {
                    return Err(NotYet::Failed(RpcError::storage_unavailable(e)))
                }
            },
            _ => return Err(NotYet::Park(self.request_history(conn, sid, at, to))),
        };
        let file = self.archive_path(sid);
        let recs = decode_archived(bytes, at)
            .map_err(|c| NotYet::Failed(RpcError::log_corrupt(&file, c.offset, &c.detail)))?;
        match recs.first().map(|(r, _)| r) {
            Some(Record::Received { answer, .. }) if !settled => answer
                .to_answer()
                .map_err(|why| NotYet::Failed(RpcError::log_corrupt(&file, at, why))),
            Some(Record::Settled {
                outcome: Outcome::Rejected { error },
                ..
            }) if settled => Ok(Answer::Error(error.clone())),
            _ => Err(NotYet::Failed(RpcError::log_corrupt(
                &file,
                at,
                "the ledger's record is not at its offset",
            ))),
        }
    }

    /// Records a durable admission: `received`, and `settled` when the
    /// command settles with its ack. Returns the gate offset.
    fn intake(
        &mut self,
        sid: &str,
        c: &CommandRequest,
        sig: String,
        answer: StoredAnswer,
        settle: Option<Outcome>,
    ) -> u64 {
        let now = self.now_ms;
        let mut end = self.commit(
            sid,
            Record::Received {
                command_id: c.command_id.clone(),
                method: c.method.clone(),
                params: c.normalized.clone(),
                signature: sig,
                answer,
                at_ms: now,
            },
        );
        if let Some(outcome) = settle {
            end = self.settle(sid, &c.command_id, outcome);
        }
        end
    }

    /// Records a command's settlement.
    pub(crate) fn settle(&mut self, sid: &str, command_id: &str, outcome: Outcome) -> u64 {
        self.commit(
            sid,
            Record::Settled {
                command_id: command_id.to_string(),
                outcome,
            },
        )
    }

    /// A durable rejection: recorded, replayed identically.
    fn reject(
        &mut self,
        to: (ConnId, &RequestId),
        sid: &str,
        c: &CommandRequest,
        sig: String,
        reason: &str,
        extra: Option<(&str, Value)>,
    ) {
        let (conn, id) = to;
        let mut err = RpcError::command_rejected(&c.method, &c.command_id, reason);
        if let Some((k, v)) = extra {
            err = err.with(k, v);
        }
        let error = err.into_value();
        // Written once: the `received` record and the response line hold
        // the same text (made just now in today's shape, so the line needs
        // none of the normalising a recorded error gets on a replay).
        let stored = StoredAnswer::new_error(&error);
        let at = self.intake(
            sid,
            c,
            sig,
            stored.clone(),
            Some(Outcome::Rejected { error }),
        );
        let gate = self.loaded(sid).and_then(|l| self.gate_at(l, at));
        let line = envelope::error_line_raw(id, stored.raw());
        self.enqueue(conn, line, gate, Some(id.clone()));
    }

    fn ack(
        &mut self,
        sid: &str,
        c: &CommandRequest,
        sig: String,
        result: &Value,
        settle: Option<Outcome>,
    ) -> (u64, StoredAnswer) {
        // Written once: the `received` record and the response line hold
        // the same text.
        let stored = StoredAnswer::new_result(result);
        let at = self.intake(sid, c, sig, stored.clone(), settle);
        (at, stored)
    }

    fn respond_stored_at(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        sid: &str,
        answer: &StoredAnswer,
        at: u64,
    ) {
        let gate = self.loaded(sid).and_then(|l| self.gate_at(l, at));
        self.respond_stored(conn, id, answer, gate);
    }

    /// For `session/start` and `session/resume`: `None` once the session
    /// is loaded here; otherwise the flow to return (park on a load in
    /// progress or just requested, or the open's error already answered).
    fn ensure_loaded(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        sid: &str,
        mode: OpenMode,
        c: &CommandRequest,
        io: Option<IoAnswer>,
    ) -> Option<Flow> {
        let park = |w: Wait| Some(Flow::Park(w, Parsed::Command(c.clone())));
        match self.sessions.get(sid) {
            Some(Slot::Loading) => park(Wait::Session(sid.to_string())),
            Some(Slot::Loaded(l)) if l.unloading => park(Wait::Session(sid.to_string())),
            Some(Slot::Loaded(_)) => None,
            None => match io {
                Some(IoAnswer::Open(r)) => {
                    self.respond_err(conn, id, open_error(sid, r));
                    Some(Flow::Done)
                }
                _ if self.refused_while_stopping(conn, id) => Some(Flow::Done),
                _ => {
                    let w = self.request_open(sid, mode);
                    park(w)
                }
            },
        }
    }

    // ----- session/start, session/resume -------------------------------

    fn session_start(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        c: CommandRequest,
        sig: String,
        io: Option<IoAnswer>,
    ) -> Flow {
        let Command::SessionStart {
            session_id,
            workspace_root,
        } = &c.command
        else {
            unreachable!()
        };
        let sid = session_id
            .clone()
            .unwrap_or_else(|| derived_session_id(&c.command_id));
        let workspace_root = workspace_root.clone();
        if let Some(flow) = self.ensure_loaded(conn, id, &sid, OpenMode::Create, &c, io.clone()) {
            return flow;
        }
        let key = id_key(&c.command_id);
        let (fresh, creator) = {
            let s = &self.loaded(&sid).expect("loaded").s;
            let same = id_key(&s.start_command_id) == key && s.workspace_root == workspace_root;
            (s.record_count == 0, same)
        };
        // The session exists because this very command created it, but its
        // intake did not survive (a power loss tore the log after the
        // `created` record): the command is admitted now, as it would have
        // been, never refused as a conflict with itself.
        let lost_own_intake = !fresh
            && creator
            && !self
                .loaded(&sid)
                .expect("loaded")
                .s
                .ledger
                .contains_key(&CmdKey::of(&key));
        if !fresh && !lost_own_intake {
            match self.ledger_check(&sid, &key, &sig) {
                Ledger::Replay(replay, at) => {
                    let answer = match self.replayed(conn, &sid, replay, &io) {
                        Ok(a) => a,
                        Err(NotYet::Park(w)) => return Flow::Park(w, Parsed::Command(c)),
                        Err(NotYet::Failed(e)) => {
                            self.respond_err(conn, id, e);
                            return Flow::Done;
                        }
                    };
                    let l = self.loaded(&sid).expect("loaded");
                    let gate = self.gate_at(l, at);
                    self.respond(conn, id, &answer, gate);
                    if let Answer::Result(r) = &answer {
                        let after = r["viewCursor"].as_str().unwrap_or_default().to_string();
                        self.subscribe_after(conn, &sid, &after);
                    }
                }
                Ledger::Conflict => self.respond_err(conn, id, conflict(&c)),
                Ledger::New => {
                    let err =
                        RpcError::command_rejected(&c.method, &c.command_id, "session_id_conflict");
                    self.respond_err(conn, id, err);
                }
            }
            self.note_activity(&sid);
            return Flow::Done;
        }
        let now = self.now_ms;
        if fresh {
            self.commit(
                &sid,
                Record::Created {
                    session_id: sid.clone(),
                    created_at_ms: now,
                    workspace_root,
                    start_command_id: c.command_id.clone(),
                },
            );
            self.commit(&sid, Record::Loaded { at_ms: now });
        }
        let session = self.session_json(&sid);
        let result = json!({"session": session, "viewCursor": format!("v:{sid}:0")});
        let (at, stored) = self.ack(&sid, &c, sig, &result, Some(Outcome::Applied));
        let gate = self.loaded(&sid).and_then(|l| self.gate_at(l, at));
        let started = crate::proto::envelope::notification_line(
            "session/started",
            &json!({"session": session}),
            now,
        );
        for target in self.ready_conns() {
            self.enqueue(target, started.clone(), gate, None);
        }
        self.respond_stored_at(conn, id, &sid, &stored, at);
        self.subscribe_after(conn, &sid, &format!("v:{sid}:0"));
        self.note_activity(&sid);
        Flow::Done
    }

    fn session_resume(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        c: CommandRequest,
        sig: String,
        io: Option<IoAnswer>,
    ) -> Flow {
        let Command::SessionResume {
            session_id,
            cursor,
            exclude_items,
        } = &c.command
        else {
            unreachable!()
        };
        let sid = session_id.clone();
        let cursor = cursor.clone();
        let exclude_items = *exclude_items;
        if let Some(flow) = self.ensure_loaded(conn, id, &sid, OpenMode::Existing, &c, io.clone()) {
            return flow;
        }
        if self.loaded(&sid).expect("loaded").s.record_count == 0 {
            // An empty log: a start that never became durable.
            self.sessions.remove(&sid);
            if self.cfg.durability == Durability::Durable {
                self.push_output(super::Output::Release {
                    session: sid.clone(),
                });
            }
            self.respond_err(conn, id, RpcError::session_not_found(&sid));
            return Flow::Done;
        }
        let key = id_key(&c.command_id);
        match self.ledger_check(&sid, &key, &sig) {
            Ledger::Replay(replay, at) => {
                let answer = match self.replayed(conn, &sid, replay, &io) {
                    Ok(a) => a,
                    Err(NotYet::Park(w)) => return Flow::Park(w, Parsed::Command(c)),
                    Err(NotYet::Failed(e)) => {
                        self.respond_err(conn, id, e);
                        return Flow::Done;
                    }
                };
                let l = self.loaded(&sid).expect("loaded");
                let gate = self.gate_at(l, at);
                self.respond(conn, id, &answer, gate);
                if let Answer::Result(r) = &answer {
                    // A snapshot answer covers the view up to its cursor; a
                    // cursor-suffix answer promised the events after the
                    // request's cursor, which a replay must still stream.
                    let after = match &cursor {
                        Some(cur) if r["history"]["mode"] == "none" => cur.clone(),
                        _ => r["viewCursor"].as_str().unwrap_or_default().to_string(),
                    };
                    self.subscribe_after(conn, &sid, &after);
                    self.reissue_approvals(conn, &sid);
                }
                self.note_activity(&sid);
                return Flow::Done;
            }
            Ledger::Conflict => {
                self.respond_err(conn, id, conflict(&c));
                return Flow::Done;
            }
            Ledger::New => {}
        }
        let head = {
            let l = self.loaded(&sid).expect("loaded");
            l.s.cursor(l.s.head_n())
        };
        // A cursor makes `excludeItems` moot (public `SessionResumeParams`):
        // the suffix streams either way.
        let (served, after) = match &cursor {
            Some(cur) => {
                if self
                    .loaded(&sid)
                    .expect("loaded")
                    .s
                    .parse_cursor(cur)
                    .is_none()
                {
                    self.respond_err(conn, id, RpcError::missing_anchor(&sid));
                    return Flow::Done;
                }
                (Served::CursorSuffix, cur.clone())
            }
            None if exclude_items => (Served::Excluded, head.clone()),
            None => (Served::Snapshot, head.clone()),
        };
        let stored = self.resume_answer(&sid, served);
        let at = self.intake(&sid, &c, sig, stored.clone(), Some(Outcome::Applied));
        self.respond_stored_at(conn, id, &sid, &stored, at);
        self.subscribe_after(conn, &sid, &after);
        self.reissue_approvals(conn, &sid);
        self.note_activity(&sid);
        Flow::Done
    }

    // ----- carrier-less rows --------------------------------------------

    fn carrierless(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        sid: &str,
        c: &CommandRequest,
        sig: String,
        key: String,
    ) {
        // No intake record, but the answer reads the session's state: it
        // waits for what the session wrote so far to be durable, so it
        // never reveals a state a storage failure then takes back (it
        // becomes `storageUnavailable` instead).
        let gate = self.gate_now(sid);

        if let Some((s, answer)) = self.lifetime_ledger.get(&key) {
            let answer = if *s == sig || self.bugs.has(Bug::SkipPayloadCheck) {
                answer.clone()
            } else {
                Answer::Error(conflict(c).to_value())
            };
            self.respond(conn, id, &answer, gate);
            return;
        }
        if self
            .loaded(sid)
            .expect("loaded")
            .s
            .ledger
            .contains_key(&CmdKey::of(&key))
        {
            self.respond_err(conn, id, conflict(c));
            return;
        }
        let reject = |reason: &str| {
            Answer::Error(RpcError::command_rejected(&c.method, &c.command_id, reason).to_value())
        };
        let answer = match &c.command {
            Command::TurnStop { turn_id, .. } => {
                let l = self.loaded(sid).expect("loaded");
                let target = turn_id.clone().or_else(|| l.s.running.clone());
                match target {
                    None => reject("missing_run"),
                    Some(t) => match l.s.turns.get(&t).map(|r| r.status.clone()) {
                        None => reject("missing_run"),
                        Some(TurnStatus::Queued) => reject("not_running"),
                        Some(TurnStatus::Ended(_)) | Some(TurnStatus::Unqueued) => {
                            reject("already_terminal")
                        }
                        Some(TurnStatus::Running) => {
                            let ack = json!({"commandId": c.command_id, "status": "accepted", "turnId": t});
                            self.respond(conn, id, &Answer::Result(ack.clone()), gate);
                            self.end_running_turn(sid, "cancelled", None, None);
                            self.launch_next(sid);
                            self.lifetime_ledger.insert(key, (sig, Answer::Result(ack)));
                            self.note_activity(sid);
                            return;
                        }
                    },
                }
            }
            Command::TaskStop { task_id, .. } => {
                let l = self.loaded(sid).expect("loaded");
                match l.s.tasks.get(task_id).map(|t| t.running) {
                    None => reject("missing_task"),
                    Some(false) => reject("already_terminal"),
                    Some(true) => {
                        let ack = json!({"commandId": c.command_id, "status": "accepted", "taskId": task_id});
                        self.respond(conn, id, &Answer::Result(ack.clone()), gate);
                        self.stop_task(sid, task_id, "cancelled");
                        self.lifetime_ledger.insert(key, (sig, Answer::Result(ack)));
                        self.note_activity(sid);
                        return;
                    }
                }
            }
            Command::TaskStopAll { .. } => {
                let ack = json!({"commandId": c.command_id, "status": "accepted"});
                self.respond(conn, id, &Answer::Result(ack.clone()), gate);
                for t in self.running_tasks(sid) {
                    self.stop_task(sid, &t, "cancelled");
                }
                self.lifetime_ledger.insert(key, (sig, Answer::Result(ack)));
                self.note_activity(sid);
                return;
            }
            _ => unreachable!("only carrier-less rows here"),
        };
        self.respond(conn, id, &answer, gate);
        self.lifetime_ledger.insert(key, (sig, answer));
    }

    // ----- turns --------------------------------------------------------

    fn turn_start(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        sid: &str,
        c: &CommandRequest,
        sig: String,
    ) {
        let Command::TurnStart { text, if_busy, .. } = &c.command else {
            unreachable!()
        };
        let (busy, running, queued) = {
            let s = &self.loaded(sid).expect("loaded").s;
            (s.is_busy(), s.running.clone(), s.queue.len())
        };
        let cid = c.command_id.clone();
        let ack = |turn_id: &str, started: bool, disposition: &str| json!({"commandId": cid, "status": "accepted", "turnId": turn_id, "startedNewTurn": started, "disposition": disposition});
        match (busy, if_busy, running) {
            (true, IfBusy::Steer, Some(run)) => {
                let (_, stored) = self.ack(sid, c, sig, &ack(&run, false, "steered"), None);
                self.steer_into(sid, &run, text, &c.command_id);
                let at = self.settle(sid, &c.command_id, Outcome::Applied);
                self.respond_stored_at(conn, id, sid, &stored, at);
            }
            (true, IfBusy::Replace, _) => {
                let result = ack(&c.command_id, true, "started");
                let (at, stored) = self.ack(sid, c, sig, &result, None);
                self.respond_stored_at(conn, id, sid, &stored, at);
                if self.loaded(sid).expect("loaded").s.running.is_some() {
                    self.end_running_turn(sid, "cancelled", Some("replaced"), None);
                }
                self.launch(sid, &c.command_id, &c.command_id, text, false);
                self.launch_next(sid);
            }
            (true, _, _) => {
                if queued >= QUEUE_MAX {
                    self.reject((conn, id), sid, c, sig, "queue_full", None);
                    return;
                }
                let result = ack(&c.command_id, false, "queued");
                let (at, stored) = self.ack(sid, c, sig, &result, None);
                self.respond_stored_at(conn, id, sid, &stored, at);
            }
            (false, _, _) => {
                let result = ack(&c.command_id, true, "started");
                let (at, stored) = self.ack(sid, c, sig, &result, None);
                self.respond_stored_at(conn, id, sid, &stored, at);
                self.launch(sid, &c.command_id, &c.command_id, text, false);
                self.launch_next(sid);
            }
        }
    }

    fn replay_as_new_turn(&mut self, conn: ConnId, id: &RequestId, sid: &str, c: &CommandRequest) {
        // Planted bug: the replay is admitted again under a fresh turn id.
        let Command::TurnStart { text, .. } = &c.command else {
            unreachable!()
        };
        let turn_id = self.mint_id();
        let result = json!({"commandId": c.command_id, "status": "accepted", "turnId": turn_id, "startedNewTurn": true, "disposition": "started"});
        self.respond(conn, id, &Answer::Result(result), None);
        if self.loaded(sid).expect("loaded").s.running.is_some() {
            self.end_running_turn(sid, "cancelled", Some("replaced"), None);
        }
        let text = text.clone();
        self.launch(sid, &turn_id, &c.command_id, &text, false);
    }

    fn turn_steer(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        sid: &str,
        c: &CommandRequest,
        sig: String,
    ) {
        let Command::TurnSteer {
            expected_turn_id,
            text,
            ..
        } = &c.command
        else {
            unreachable!()
        };
        let status = self
            .loaded(sid)
            .expect("loaded")
            .s
            .turns
            .get(expected_turn_id)
            .map(|t| t.status.clone());
        let reason = match status {
            None => Some("missing_run"),
            Some(TurnStatus::Ended(_)) | Some(TurnStatus::Unqueued) => Some("already_terminal"),
            Some(TurnStatus::Queued) => Some("not_running"),
            Some(TurnStatus::Running) => None,
        };
        if let Some(reason) = reason {
            self.reject((conn, id), sid, c, sig, reason, None);
            return;
        }
        let result =
            json!({"commandId": c.command_id, "status": "accepted", "turnId": expected_turn_id});
        let (_, stored) = self.ack(sid, c, sig, &result, None);
        self.steer_into(sid, expected_turn_id, text, &c.command_id);
        let at = self.settle(sid, &c.command_id, Outcome::Applied);
        self.respond_stored_at(conn, id, sid, &stored, at);
    }

    fn turn_unqueue(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        sid: &str,
        c: &CommandRequest,
        sig: String,
    ) {
        let Command::TurnUnqueue { turn_id, .. } = &c.command else {
            unreachable!()
        };
        let rec = self
            .loaded(sid)
            .expect("loaded")
            .s
            .turns
            .get(turn_id)
            .cloned();
        let reason = match rec.as_ref().map(|r| &r.status) {
            None => Some("missing_run"),
            Some(TurnStatus::Running) => Some("already_launched"),
            Some(TurnStatus::Ended(_)) | Some(TurnStatus::Unqueued) => Some("already_terminal"),
            Some(TurnStatus::Queued) => None,
        };
        if let Some(reason) = reason {
            self.reject((conn, id), sid, c, sig, reason, None);
            return;
        }
        let queued_by = rec.expect("queued turn").command_id;
        let result = json!({"commandId": c.command_id, "status": "accepted", "turnId": turn_id});
        let (_, stored) = self.ack(sid, c, sig, &result, None);
        // The effect before the settlement, as for every command: a torn
        // write that keeps `settled applied` must keep the effect too
        // (recovery settles an intake `applied` only if its event survived).
        let mut params = serde_json::Map::new();
        params.insert("turnId".into(), json!(turn_id));
        params.insert("commandId".into(), json!(queued_by));
        self.emit(
            sid,
            "turn/unqueued",
            params,
            ("session", sid),
            Some(&c.command_id),
        );
        let at_settle = self.settle(sid, &c.command_id, Outcome::Applied);
        self.respond_stored_at(conn, id, sid, &stored, at_settle);
        self.settle(sid, &queued_by, Outcome::Applied);
    }

    // ----- approvals and state -------------------------------------------

    fn approval_decide(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        sid: &str,
        c: &CommandRequest,
        sig: String,
    ) {
        let Command::ApprovalDecide {
            approval_id,
            requirement_approval_id,
            requirement_source_index,
            choice_id,
            ..
        } = &c.command
        else {
            unreachable!()
        };
        let Some(a) = self
            .loaded(sid)
            .expect("loaded")
            .s
            .approvals
            .get(approval_id)
            .cloned()
        else {
            self.respond_err(conn, id, RpcError::approval_not_found(approval_id));
            return;
        };
        // The approval's state may be a record not synced yet (resolved by
        // an interrupt or a recovery a moment ago): its refusals wait for
        // that sync.
        if let Some(resolution) = &a.resolution {
            self.respond_err_after_appended(
                conn,
                id,
                sid,
                RpcError::approval_already_resolved(approval_id, resolution.clone()),
            );
            return;
        }
        let current = a.params["currentRequirementId"].clone();
        if current["approvalId"].as_str() != Some(requirement_approval_id.as_str())
            || current["sourceIndex"].as_u64() != Some(*requirement_source_index)
        {
            self.respond_err_after_appended(
                conn,
                id,
                sid,
                RpcError::approval_requirement_stale(approval_id, current),
            );
            return;
        }
        let Some(choice) = a.params["availableChoices"]
            .as_array()
            .and_then(|cs| {
                cs.iter()
                    .find(|ch| ch["choiceId"].as_str() == Some(choice_id.as_str()))
            })
            .cloned()
        else {
            self.respond_err_after_appended(
                conn,
                id,
                sid,
                RpcError::approval_choice_invalid(approval_id, choice_id),
            );
            return;
        };
        let decision = choice["decision"].as_str().unwrap_or("denied").to_string();
        let result = json!({"commandId": c.command_id, "status": "accepted", "approvalId": approval_id, "terminal": true});
        let (_, stored) = self.ack(sid, c, sig, &result, None);
        let mut params = serde_json::Map::new();
        params.insert("approvalId".into(), json!(approval_id));
        params.insert("itemId".into(), json!(a.item_id));
        params.insert("turnId".into(), json!(a.turn_id));
        params.insert("decision".into(), json!(decision));
        let allow = decision.starts_with("approved");
        params.insert(
            "policyResult".into(),
            json!(if allow { "allow" } else { "deny" }),
        );
        if let Some(preview) = choice.get("rulePreview") {
            params.insert(
                "amendment".into(),
                json!({"durability": choice["scope"], "rulePreview": preview}),
            );
        }
        params.insert("resolvedBy".into(), json!("user"));
        params.insert("decidedByCommandId".into(), json!(c.command_id));
        params.insert("stageEvidence".into(), json!([]));
        let review_id = super::turns::review_stream_id(&a.params);
        self.emit(
            sid,
            "approval/resolved",
            params,
            (super::turns::APPROVAL_STREAM, &review_id),
            Some(&c.command_id),
        );
        let at = self.settle(sid, &c.command_id, Outcome::Applied);
        self.respond_stored_at(conn, id, sid, &stored, at);
        self.after_decision(sid, &a.item_id, &a.turn_id, &decision);
    }

    fn state_update(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        sid: &str,
        c: &CommandRequest,
        sig: String,
    ) {
        let Command::StateUpdate {
            expected_revision,
            set,
            ..
        } = &c.command
        else {
            unreachable!()
        };
        let current = self.loaded(sid).expect("loaded").s.revision;
        if *expected_revision != current {
            self.reject(
                (conn, id),
                sid,
                c,
                sig,
                "stale_revision",
                Some(("currentRevision", json!(current))),
            );
            return;
        }
        let revision = current + 1;
        let result = json!({"commandId": c.command_id, "status": "accepted", "revision": revision});
        let (_, stored) = self.ack(sid, c, sig, &result, None);
        let mut params = serde_json::Map::new();
        params.insert("revision".into(), json!(revision));
        params.insert("set".into(), Value::Object(set.clone()));
        params.insert("commandId".into(), json!(c.command_id));
        self.emit(
            sid,
            "state/updated",
            params,
            ("session", sid),
            Some(&c.command_id),
        );
        let at = self.settle(sid, &c.command_id, Outcome::Applied);
        self.respond_stored_at(conn, id, sid, &stored, at);
    }
}

fn conflict(c: &CommandRequest) -> RpcError {
    RpcError::command_rejected(&c.method, &c.command_id, "command_id_conflict")
}

fn open_error(sid: &str, r: OpenResult) -> RpcError {
    match r {
        OpenResult::NotFound => RpcError::session_not_found(sid),
        OpenResult::InUse { .. } => RpcError::session_in_use(sid),
        OpenResult::Failed(e) => match serde_json::from_str::<Value>(&e)
            .ok()
            .as_ref()
            .and_then(RpcError::from_value)
        {
            Some(err) => err,
            None => RpcError::storage_unavailable(e),
        },
        OpenResult::Opened { .. } => RpcError::internal("opened session reported as an error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::ids::is_uuid_v7;

    #[test]
    fn derived_session_ids_are_v7_stable_and_distinct() {
        let a = derived_session_id("0198f0ab-9999-7000-8000-0000000000c1");
        let b = derived_session_id("0198f0ab-9999-7000-8000-0000000000c2");
        assert!(is_uuid_v7(&a));
        assert_eq!(
            a,
            derived_session_id("0198f0ab-9999-7000-8000-0000000000c1")
        );
        assert_ne!(a, b);
        assert_ne!(a, "0198f0ab-9999-7000-8000-0000000000c1");
    }
}
