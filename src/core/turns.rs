//! The turn engine: launching, steering, driving the agent, ending turns,
//! background tasks, approvals' effects, and recovery after a crash
//! (PROTOCOL.md 4.3, 4.4 and section 5).

use serde_json::{json, Map, Value};

use super::agent::{Step, TurnInput};
use super::bugs::Bug;
use super::host::{EffectWait, Host, Run, Staged};
use super::record::{Outcome, Record};
use super::session::{EventParams, LedgerEntry, TurnStatus};
use super::{CrashPoint, Durability, EffectMode, EffectOutcome, Output};
use crate::proto::ids::CmdKey;

/// The stream kind of an approval's review records (PROTOCOL.md 4.5).
pub(crate) const APPROVAL_STREAM: &str = "approval.review";

/// The review stream id an `approval/requested` was recorded on; its
/// `approval/resolved` goes on the same stream.
pub(crate) fn review_stream_id(requested: &Value) -> String {
    requested
        .pointer("/sourceRange/stream/id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The text a failed launch recorded as its `turn/completed.reason` (the
/// turn id of a fresh or queued turn is its command id).
fn launch_failure_text(s: &super::session::Session, turn_id: &str) -> Option<String> {
    s.turns.get(turn_id).and_then(|t| t.failure.clone())
}

impl Host {
    /// Emits a durable view event: numbered, recorded, staged for
    /// subscribers. `stream` is the source stream `(kind, id)`.
    pub(crate) fn emit(
        &mut self,
        sid: &str,
        method: &str,
        mut params: Map<String, Value>,
        stream: (&str, &str),
        cause: Option<&str>,
    ) {
        let record_id = self.mint_id();
        let now = self.now_ms;
        let l = self.loaded_mut(sid).expect("emit on a loaded session");
        let stream = json!({"kind": stream.0, "id": stream.1});
        let seq = l.s.next_stream_seq(&stream);
        let n = l.s.head_n() + 1;
        params.insert("sessionId".into(), json!(sid));
        params.insert("viewCursor".into(), json!(l.s.cursor(n)));
        params.insert(
            "sourceRange".into(),
            json!({"stream": stream, "first": {"id": record_id, "sequence": seq}, "last": {"id": record_id, "sequence": seq}}),
        );
        let params = Value::Object(params);
        // Written once: the log record, the fold and every subscriber's
        // notification line hold this text.
        let raw = EventParams::of(&params);
        let end = self.commit_with(
            sid,
            Record::Event {
                n,
                method: method.to_string(),
                params: raw.clone(),
                emitted_at_ms: now,
                cause: cause.map(str::to_string),
            },
            Some(&params),
        );
        let l = self.loaded_mut(sid).expect("loaded");
        l.ephemeral_k = 0;
        l.staged.push(Staged::Note {
            method: method.to_string(),
            params: raw,
            emitted_at_ms: now,
            durable_at: Some(end),
            n,
        });
    }

    /// Emits an ephemeral view event (`n.k` cursor, never recorded).
    pub(crate) fn emit_ephemeral(
        &mut self,
        sid: &str,
        method: &str,
        mut params: Map<String, Value>,
    ) {
        let now = self.now_ms;
        let l = self.loaded_mut(sid).expect("loaded");
        l.ephemeral_k += 1;
        let cursor = format!("{}.{}", l.s.cursor(l.s.head_n()), l.ephemeral_k);
        params.insert("sessionId".into(), json!(sid));
        params.insert("viewCursor".into(), json!(cursor));
        l.staged.push(Staged::Note {
            method: method.to_string(),
            params: EventParams::of(&Value::Object(params)),
            emitted_at_ms: now,
            durable_at: None,
            n: 0,
        });
    }

    /// Emits an item event. Messages are run records (`{kind: "run", id:
    /// turnId}`); a `toolCall` item is the session stream's mirror of the
    /// task record (`{kind: "session", id: sessionId}`), where the golden
    /// transcripts put it (PROTOCOL.md 4.5).
    fn emit_item(
        &mut self,
        sid: &str,
        method: &str,
        item: Value,
        turn_id: &str,
        cause: Option<&str>,
    ) {
        let on_session = item["kind"] == "toolCall";
        let mut p = Map::new();
        p.insert("item".into(), item);
        if on_session {
            self.emit(sid, method, p, ("session", sid), cause);
        } else {
            self.emit(sid, method, p, ("run", turn_id), cause);
        }
    }

    /// An item skeleton with the host's timestamp.
    pub(crate) fn item(
        &self,
        item_id: &str,
        kind: &str,
        turn_id: &str,
        revision: u64,
        status: &str,
    ) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("itemId".into(), json!(item_id));
        m.insert("kind".into(), json!(kind));
        m.insert("turnId".into(), json!(turn_id));
        m.insert("revision".into(), json!(revision));
        m.insert("status".into(), json!(status));
        m.insert(
            "recordedAt".into(),
            json!(super::view::iso8601(self.now_ms)),
        );
        m
    }

    /// Launches a turn. `queued` selects the failure reason
    /// (`deferred_start_failed` vs `launch_failed`). A failed launch's
    /// `turn/completed.reason` is the failure's text, and so is the
    /// message of the rejection every replay answers (PROTOCOL.md 4.3).
    pub(crate) fn launch(
        &mut self,
        sid: &str,
        turn_id: &str,
        command_id: &str,
        text: &str,
        queued: bool,
    ) {
        let now = self.now_ms;
        let input = TurnInput {
            session_id: sid.to_string(),
            turn_id: turn_id.to_string(),
            text: text.to_string(),
        };
        match self.agent.launch(&input, now) {
            Err(message) => {
                let reason = if queued {
                    "deferred_start_failed"
                } else {
                    "launch_failed"
                };
                let mut p = Map::new();
                p.insert("turnId".into(), json!(turn_id));
                p.insert("terminal".into(), json!("failed"));
                p.insert("reason".into(), json!(message));
                p.insert(
                    "error".into(),
                    json!({"kind": "launchError", "message": message, "retryable": true}),
                );
                self.emit(sid, "turn/completed", p, ("run", turn_id), Some(command_id));
                let error =
                    crate::proto::RpcError::command_rejected("turn/start", command_id, reason)
                        .with_message(message)
                        .to_value();
                self.settle_if_pending(sid, command_id, Outcome::Rejected { error });
            }
            Ok(()) => {
                let mut p = Map::new();
                p.insert("turnId".into(), json!(turn_id));
                p.insert("commandId".into(), json!(command_id));
                self.emit(sid, "turn/started", p, ("run", turn_id), Some(command_id));
                let item_id = self.mint_id();
                let mut item = self.item(&item_id, "userMessage", turn_id, 1, "completed");
                item.insert("text".into(), json!(text));
                item.insert("commandId".into(), json!(command_id));
                self.emit_item(
                    sid,
                    "item/completed",
                    Value::Object(item),
                    turn_id,
                    Some(command_id),
                );
                self.settle_if_pending(sid, command_id, Outcome::Applied);
                let l = self.loaded_mut(sid).expect("loaded");
                l.run = Some(Run {
                    turn_id: turn_id.to_string(),
                    wake_ms: now,
                    blocked: false,
                    started_ms: now,
                    message: None,
                    open_tool: None,
                });
                self.drive(sid);
            }
        }
    }

    fn settle_if_pending(&mut self, sid: &str, command_id: &str, outcome: Outcome) {
        let pending = self
            .loaded(sid)
            .and_then(|l| l.s.ledger.get(&CmdKey::of(command_id)))
            .is_some_and(LedgerEntry::is_pending);
        if pending {
            self.settle(sid, command_id, outcome);
        }
    }

    /// Launches queued turns while nothing runs.
    pub(crate) fn launch_next(&mut self, sid: &str) {
        for _ in 0..super::commands::QUEUE_MAX * 4 {
            let next = {
                let Some(l) = self.loaded(sid) else { return };
                if l.s.running.is_some() || l.unloading {
                    return;
                }
                match l.s.queue.front() {
                    Some(t) => {
                        let rec = &l.s.turns[t];
                        (t.clone(), rec.command_id.clone(), rec.text.clone())
                    }
                    None => return,
                }
            };
            self.launch(sid, &next.0, &next.1, &next.2, true);
        }
    }

    /// Steered input joins the running turn.
    pub(crate) fn steer_into(&mut self, sid: &str, turn_id: &str, text: &str, command_id: &str) {
        let item_id = self.mint_id();
        let mut item = self.item(&item_id, "userMessage", turn_id, 1, "completed");
        item.insert("text".into(), json!(text));
        item.insert("commandId".into(), json!(command_id));
        item.insert("steered".into(), json!(true));
        self.emit_item(
            sid,
            "item/completed",
            Value::Object(item),
            turn_id,
            Some(command_id),
        );
        let now = self.now_ms;
        self.agent.steer(turn_id, text, now);
        self.drive(sid);
    }

    /// Runs the agent of the session's running turn until it sleeps or
    /// blocks.
    pub(crate) fn drive(&mut self, sid: &str) {
        for _ in 0..Host::agent_steps_max() {
            let now = self.now_ms;
            let Some(run) = self.loaded(sid).and_then(|l| l.run.clone()) else {
                return;
            };
            if run.blocked || run.wake_ms > now {
                return;
            }
            let step = self.agent.poll(&run.turn_id, now);
            let turn_id = run.turn_id.clone();
            match step {
                Step::SleepUntil(t) => {
                    self.run_mut(sid).wake_ms = t.max(now);
                    if t > now {
                        return;
                    }
                }
                Step::Blocked => {
                    self.run_mut(sid).blocked = true;
                    return;
                }
                Step::Delta(text) => {
                    if run.message.is_none() {
                        let item_id = self.mint_id();
                        let mut item =
                            self.item(&item_id, "agentMessage", &turn_id, 1, "inProgress");
                        item.remove("recordedAt");
                        item.insert("text".into(), json!(""));
                        let mut p = Map::new();
                        p.insert("item".into(), Value::Object(item));
                        self.emit_ephemeral(sid, "item/started", p);
                        self.run_mut(sid).message = Some((item_id, String::new()));
                    }
                    let r = self.run_mut(sid);
                    let (item_id, acc) = r.message.as_mut().expect("message open");
                    acc.push_str(&text);
                    let item_id = item_id.clone();
                    let mut p = Map::new();
                    p.insert("itemId".into(), json!(item_id));
                    p.insert("field".into(), json!("text"));
                    p.insert("delta".into(), json!(text));
                    self.emit_ephemeral(sid, "item/delta", p);
                }
                Step::CompleteMessage { text, extra } => {
                    let (item_id, text, revision) = match self.run_mut(sid).message.take() {
                        Some((id, acc)) => (id, acc, 2),
                        None => (self.mint_id(), text, 1),
                    };
                    let mut item =
                        self.item(&item_id, "agentMessage", &turn_id, revision, "completed");
                    item.insert("text".into(), json!(text));
                    item.extend(extra);
                    self.emit_item(sid, "item/completed", Value::Object(item), &turn_id, None);
                }
                Step::ToolCall {
                    tool,
                    extra,
                    approval,
                    effect,
                    background_ms,
                } => {
                    let item_id = self.mint_id();
                    let mut item = self.item(&item_id, "toolCall", &turn_id, 1, "inProgress");
                    item.insert("tool".into(), json!(tool));
                    item.extend(extra);
                    let approval_id = approval.as_ref().map(|_| self.mint_id());
                    // An approval's review records live on a stream of their
                    // own, and it names the task that asked; both ids are
                    // minted here, distinct from the item's (the golden
                    // transcripts' shape, PROTOCOL.md 4.5).
                    let review = approval.as_ref().map(|_| (self.mint_id(), self.mint_id()));
                    if let Some(a) = &approval_id {
                        item.insert("approvalId".into(), json!(a));
                    }
                    self.emit_item(sid, "item/started", Value::Object(item), &turn_id, None);
                    if let Some(ms) = background_ms {
                        let end = now.saturating_add(ms);
                        self.loaded_mut(sid)
                            .expect("loaded")
                            .task_ends
                            .insert(item_id.clone(), end);
                    }
                    match (approval, approval_id, review) {
                        (Some(spec), Some(approval_id), Some((review_id, task_id))) => {
                            let mut p = Map::new();
                            p.insert("approvalId".into(), json!(approval_id));
                            p.insert("turnId".into(), json!(turn_id));
                            p.insert("taskId".into(), json!(task_id));
                            p.insert("itemId".into(), json!(item_id));
                            p.insert("toolCallId".into(), json!(item_id));
                            p.insert("toolName".into(), json!(spec.tool_name));
                            p.insert("rawArgs".into(), json!(spec.raw_args));
                            p.insert("subject".into(), spec.subject);
                            p.insert(
                                "currentRequirementId".into(),
                                json!({"approvalId": approval_id, "sourceIndex": 0}),
                            );
                            p.insert("availableChoices".into(), Value::Array(spec.choices));
                            p.insert("protectedWrite".into(), json!(false));
                            p.insert("judgeEscalated".into(), json!(false));
                            p.extend(spec.extra);
                            self.emit(
                                sid,
                                "approval/requested",
                                p,
                                (APPROVAL_STREAM, &review_id),
                                None,
                            );
                            let l = self.loaded_mut(sid).expect("loaded");
                            let last = l.staged.last().cloned();
                            if let Some(Staged::Note {
                                params, durable_at, ..
                            }) = last
                            {
                                l.staged.push(Staged::Request {
                                    method: "approval/request".into(),
                                    params,
                                    durable_at,
                                });
                            }
                            // A call with no effect of the core's is the
                            // agent's to complete once the decision is in.
                            if effect.is_none() && background_ms.is_none() {
                                self.run_mut(sid).open_tool = Some(item_id);
                            }
                            self.run_mut(sid).blocked = true;
                            return;
                        }
                        _ if background_ms.is_none() => self.run_mut(sid).open_tool = Some(item_id),
                        _ => {}
                    }
                }
                Step::RetryScheduled(r) => {
                    // Durable and non-terminal; the session stream's mirror
                    // of the task record, as the public transcript has it.
                    let mut p = Map::new();
                    p.insert("turnId".into(), json!(turn_id));
                    p.insert("attempt".into(), json!(r.attempt));
                    p.insert("nextAttempt".into(), json!(r.next_attempt));
                    p.insert("maxAttempts".into(), json!(r.max_attempts));
                    p.insert("retryDelayMs".into(), json!(r.retry_delay_ms));
                    p.insert("reason".into(), json!(r.reason));
                    self.emit(sid, "turn/retryScheduled", p, ("session", sid), None);
                }
                Step::CompleteTool { status, extra } => {
                    if let Some(item_id) = self.run_mut(sid).open_tool.take() {
                        self.complete_item(sid, &item_id, &status, extra, None);
                    }
                }
                Step::Finish(f) => {
                    let mut p = Map::new();
                    p.insert("turnId".into(), json!(turn_id));
                    p.insert("terminal".into(), json!(f.terminal));
                    if !f.extra.contains_key("durationMs") {
                        p.insert(
                            "durationMs".into(),
                            json!(now.saturating_sub(run.started_ms)),
                        );
                    }
                    // A null member is the agent's way to leave an optional
                    // member out (e.g. `durationMs`).
                    p.extend(f.extra.into_iter().filter(|(_, v)| !v.is_null()));
                    self.emit(sid, "turn/completed", p, ("run", &turn_id), None);
                    self.loaded_mut(sid).expect("loaded").run = None;
                    self.launch_next(sid);
                    self.note_activity(sid);
                    return;
                }
            }
        }
        debug_assert!(false, "agent exceeded its step budget");
    }

    fn run_mut(&mut self, sid: &str) -> &mut Run {
        self.loaded_mut(sid)
            .and_then(|l| l.run.as_mut())
            .expect("running turn")
    }

    /// Completes an item with a new revision and status.
    fn complete_item(
        &mut self,
        sid: &str,
        item_id: &str,
        status: &str,
        extra: Map<String, Value>,
        cause: Option<&str>,
    ) {
        let Some(old) = self.loaded(sid).and_then(|l| l.s.item(item_id)) else {
            return;
        };
        let mut item = old.as_object().cloned().unwrap_or_default();
        let revision = old["revision"].as_u64().unwrap_or(1) + 1;
        item.insert("revision".into(), json!(revision));
        item.insert("status".into(), json!(status));
        item.insert(
            "recordedAt".into(),
            json!(super::view::iso8601(self.now_ms)),
        );
        item.extend(extra);
        let turn_id = old["turnId"].as_str().unwrap_or_default().to_string();
        self.emit_item(sid, "item/completed", Value::Object(item), &turn_id, cause);
    }

    /// Ends the running turn for a reason of the host's (cancel, replace,
    /// shutdown, crash). Does not launch the next one.
    pub(crate) fn end_running_turn(
        &mut self,
        sid: &str,
        terminal: &str,
        reason: Option<&str>,
        error: Option<Value>,
    ) {
        let Some(turn_id) = self.loaded(sid).and_then(|l| l.s.running.clone()) else {
            return;
        };
        let run = self.loaded_mut(sid).and_then(|l| l.run.take());
        self.agent.end(&turn_id);
        let item_status = if terminal == "cancelled" {
            "cancelled"
        } else {
            "failed"
        };
        if let Some(run) = &run {
            if let Some((item_id, text)) = &run.message {
                let mut item = self.item(item_id, "agentMessage", &turn_id, 2, item_status);
                item.insert("text".into(), json!(text));
                self.emit_item(sid, "item/completed", Value::Object(item), &turn_id, None);
            }
            if let Some(item_id) = &run.open_tool {
                self.complete_item(sid, item_id, item_status, Map::new(), None);
            }
        }
        self.abort_approvals(sid, Some(&turn_id));
        let mut p = Map::new();
        p.insert("turnId".into(), json!(turn_id));
        p.insert("terminal".into(), json!(terminal));
        if let Some(run) = &run {
            p.insert(
                "durationMs".into(),
                json!(self.now_ms.saturating_sub(run.started_ms)),
            );
        }
        if let Some(r) = reason {
            p.insert("reason".into(), json!(r));
        }
        if let Some(e) = error {
            p.insert("error".into(), e);
        }
        self.emit(sid, "turn/completed", p, ("run", &turn_id), None);
    }

    /// Resolves pending approvals (of one turn, or all) as `abort`, decided
    /// by the host's policy (`resolvedBy: "policy"`: the public enum is
    /// `user|policy|llmJudge`).
    fn abort_approvals(&mut self, sid: &str, turn: Option<&str>) {
        let pending: Vec<(String, String, String, String)> = self
            .loaded(sid)
            .map(|l| {
                l.s.pending_approvals()
                    .into_iter()
                    .filter(|a| turn.is_none_or(|t| a.turn_id == t))
                    .map(|a| {
                        (
                            a.params["approvalId"]
                                .as_str()
                                .unwrap_or_default()
                                .to_string(),
                            a.item_id.clone(),
                            a.turn_id.clone(),
                            review_stream_id(&a.params),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        for (approval_id, item_id, turn_id, review_id) in pending {
            let mut p = Map::new();
            p.insert("approvalId".into(), json!(approval_id));
            p.insert("itemId".into(), json!(item_id));
            p.insert("turnId".into(), json!(turn_id));
            p.insert("decision".into(), json!("abort"));
            p.insert("policyResult".into(), json!("deny"));
            p.insert("resolvedBy".into(), json!("policy"));
            p.insert("stageEvidence".into(), json!([]));
            self.emit(
                sid,
                "approval/resolved",
                p,
                (APPROVAL_STREAM, &review_id),
                None,
            );
            let still_open = self
                .loaded(sid)
                .is_some_and(|l| l.s.item_in_progress(&item_id));
            if still_open {
                self.complete_not_started(sid, &item_id, "cancelled");
            }
        }
    }

    /// Ends a background task.
    pub(crate) fn stop_task(&mut self, sid: &str, task_id: &str, status: &str) {
        if let Some(l) = self.loaded_mut(sid) {
            l.task_ends.remove(task_id);
        }
        let running = self
            .loaded(sid)
            .and_then(|l| l.s.tasks.get(task_id))
            .is_some_and(|t| t.running);
        if running {
            self.complete_item(sid, task_id, status, Map::new(), None);
        }
    }

    /// Completes tasks whose time is up.
    pub(crate) fn end_due_tasks(&mut self, sid: &str) {
        let now = self.now_ms;
        let due: Vec<String> = self
            .loaded(sid)
            .map(|l| {
                l.task_ends
                    .iter()
                    .filter(|(_, e)| **e <= now)
                    .map(|(t, _)| t.clone())
                    .collect()
            })
            .unwrap_or_default();
        for t in &due {
            self.stop_task(sid, t, "completed");
        }
        if !due.is_empty() {
            self.note_activity(sid);
        }
    }

    /// After an approval was decided: run the effect (once the decision is
    /// durable) or let the agent go on.
    pub(crate) fn after_decision(
        &mut self,
        sid: &str,
        item_id: &str,
        turn_id: &str,
        decision: &str,
    ) {
        let item = self
            .loaded(sid)
            .and_then(|l| l.s.item(item_id))
            .unwrap_or(Value::Null);
        let provider = item["tool"].as_str().unwrap_or_default().to_string();
        let has_effect = self.cfg.effect_providers.contains_key(&provider);
        let approved = decision.starts_with("approved");
        if has_effect && approved {
            let token = self.token();
            let action = item["args"].as_str().unwrap_or_default().to_string();
            let approval_id = item["approvalId"].as_str().unwrap_or_default().to_string();
            let out = Output::Effect {
                token,
                provider,
                key: format!("{sid}:{approval_id}"),
                action,
                mode: EffectMode::Perform,
            };
            let slot = self.loaded(sid).expect("loaded").slot;
            let wait = EffectWait {
                session: sid.to_string(),
                slot,
                item_id: item_id.to_string(),
                turn_id: turn_id.to_string(),
                deadline_ms: u64::MAX,
                query: false,
            };
            let l = self.loaded_mut(sid).expect("loaded");
            let upto = l.end_offset();
            l.pending_effects.push((upto, token, wait, out));
            return;
        }
        if has_effect {
            self.complete_not_started(sid, item_id, "rejected");
        }
        self.resume_turn(sid, turn_id, decision, None);
    }

    fn resume_turn(&mut self, sid: &str, turn_id: &str, decision: &str, outcome: Option<&str>) {
        let now = self.now_ms;
        let running = self
            .loaded(sid)
            .and_then(|l| l.run.as_ref())
            .is_some_and(|r| r.turn_id == turn_id);
        if running {
            self.agent.resolved(turn_id, decision, outcome, now);
            let r = self.run_mut(sid);
            r.blocked = false;
            r.wake_ms = now;
            self.drive(sid);
        }
        self.note_activity(sid);
    }

    /// Releases effects whose decision records are durable (called at the
    /// end of every input, after the answers were released). Only a session
    /// this input touched can have a new effect or a newly synced offset.
    pub(crate) fn release_effects(&mut self) {
        let durable = self.cfg.durability == Durability::Durable;
        let now = self.now_ms;
        let sids = self.touched_sessions();
        for sid in sids {
            let ready: Vec<(u64, EffectWait, Output)> = match self.loaded_mut(&sid) {
                Some(l) => {
                    let synced = l.synced_bytes;
                    let (ready, keep): (Vec<_>, Vec<_>) = l
                        .pending_effects
                        .drain(..)
                        .partition(|(upto, ..)| !durable || *upto <= synced);
                    l.pending_effects = keep;
                    ready.into_iter().map(|(_, t, w, o)| (t, w, o)).collect()
                }
                None => continue,
            };
            for (token, mut wait, out) in ready {
                wait.deadline_ms = now.saturating_add(super::host::EFFECT_TIMEOUT_MS);
                self.effects.insert(token, wait);
                self.push_output(Output::CrashPoint(CrashPoint::AfterAckBeforeEffect));
                self.push_output(out);
            }
        }
    }

    /// An effect came back (or timed out): complete its tool call.
    pub(crate) fn complete_effect(&mut self, w: EffectWait, outcome: EffectOutcome) {
        // Nothing is recorded after an unload's `closed` record.
        if self
            .loaded(&w.session)
            .is_none_or(|l| l.slot != w.slot || l.unloading)
        {
            return;
        }
        let status = if outcome == EffectOutcome::Committed {
            "completed"
        } else {
            "failed"
        };
        let mut extra = Map::new();
        extra.insert("effectOutcome".into(), json!(outcome.as_str()));
        self.complete_item(&w.session, &w.item_id, status, extra, None);
        if !w.query {
            self.resume_turn(&w.session, &w.turn_id, "approved", Some(outcome.as_str()));
        }
        // The session may be idle now (it waited for this effect).
        self.note_activity(&w.session);
    }

    /// Host shutdown: the session's approved effects end with its load,
    /// so that no tool call is left open in a log that is closed (a closed
    /// log is not recovered at its next load). An effect not issued yet
    /// (its decision was not durable) never will be: its tool call
    /// completes `cancelled`, `notStarted`. One issued and not answered is
    /// no longer waited for: `failed`, `unknown`, as at its timeout; its
    /// answer, if it comes, finds no wait.
    fn end_effects(&mut self, sid: &str) {
        let Some(l) = self.loaded_mut(sid) else {
            return;
        };
        let slot = l.slot;
        let pending = std::mem::take(&mut l.pending_effects);
        for (_, _, w, _) in pending {
            self.complete_not_started(sid, &w.item_id, "cancelled");
        }
        let issued: Vec<u64> = self
            .effects
            .iter()
            .filter(|(_, w)| w.session == sid && w.slot == slot)
            .map(|(t, _)| *t)
            .collect();
        for t in issued {
            let w = self.effects.remove(&t).expect("listed");
            let mut extra = Map::new();
            extra.insert(
                "effectOutcome".into(),
                json!(EffectOutcome::Unknown.as_str()),
            );
            self.complete_item(sid, &w.item_id, "failed", extra, None);
        }
    }

    /// Ids of the session's running background tasks.
    pub(crate) fn running_tasks(&self, sid: &str) -> Vec<String> {
        self.loaded(sid)
            .map(|l| {
                l.s.tasks
                    .iter()
                    .filter(|(_, t)| t.running)
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Host shutdown: ends live work so that the log is left closed.
    pub(crate) fn stop_everything(&mut self, sid: &str, terminal: &str, reason: Option<&str>) {
        self.end_effects(sid);
        self.end_running_turn(sid, terminal, reason, None);
        let tasks = self.running_tasks(sid);
        for t in tasks {
            self.stop_task(sid, &t, "cancelled");
        }
        self.abort_approvals(sid, None);
    }

    /// Recovery when a session whose holder died is loaded (PROTOCOL.md
    /// 4.4): settle intakes, end the dead turn, tasks and approvals,
    /// reconcile in-flight effects.
    pub(crate) fn recover(&mut self, sid: &str, _running: Option<String>) {
        let entries: Vec<(CmdKey, String)> = {
            let l = self.loaded(sid).expect("loaded");
            l.s.pending_entries()
                .map(|(k, e)| (k.clone(), e.method().to_string()))
                .collect()
        };
        for (key, method) in entries {
            let command_id = key.as_sent();
            let l = self.loaded(sid).expect("loaded");
            let steered = l.s.ledger[&key].answer_disposition().as_deref() == Some("steered");
            let turn = if method == "turn/start" && !steered {
                l.s.ledger[&key]
                    .answer_turn_id()
                    .and_then(|t| l.s.turns.get(&t).cloned())
            } else {
                None
            };
            let outcome = match turn.as_ref().map(|t| (&t.status, t.started)) {
                Some((TurnStatus::Queued, _)) => continue,
                Some((TurnStatus::Unqueued, _)) | Some((_, true)) => Outcome::Applied,
                Some((TurnStatus::Ended(_), false)) => {
                    let reason =
                        if l.s.ledger[&key].answer_disposition().as_deref() == Some("queued") {
                            "deferred_start_failed"
                        } else {
                            "launch_failed"
                        };
                    let mut error =
                        crate::proto::RpcError::command_rejected(&method, &command_id, reason);
                    if let Some(text) = launch_failure_text(&l.s, &command_id) {
                        error = error.with_message(text);
                    }
                    Outcome::Rejected {
                        error: error.to_value(),
                    }
                }
                _ if l.s.effect_seen.contains(&key) => Outcome::Applied,
                _ => {
                    if self.bugs.has(Bug::NoAbandonOnRecovery) {
                        continue;
                    }
                    Outcome::Abandoned
                }
            };
            self.settle(sid, &command_id, outcome);
        }
        self.complete_refused_tool_calls(sid);
        if let Some(turn_id) = self.loaded(sid).and_then(|l| l.s.running.clone()) {
            self.abort_approvals(sid, Some(&turn_id));
            let mut p = Map::new();
            p.insert("turnId".into(), json!(turn_id));
            p.insert("terminal".into(), json!("failed"));
            p.insert("reason".into(), json!("crash"));
            self.emit(sid, "turn/completed", p, ("run", &turn_id), None);
        }
        let tasks = self.running_tasks(sid);
        for t in tasks {
            self.complete_item(sid, &t, "failed", Map::new(), None);
        }
        self.abort_approvals(sid, None);
        self.reconcile_effects(sid);
    }

    /// Tool calls whose approval was denied or aborted but that never
    /// completed: the crash tore the completion off the batch that
    /// resolved the approval (recovery would otherwise leave them
    /// `inProgress` for ever: `abort_approvals` only sees unresolved
    /// approvals). They complete as the decision would have: no effect
    /// ran (PROTOCOL.md 5), `rejected` when denied, `cancelled` when
    /// aborted.
    fn complete_refused_tool_calls(&mut self, sid: &str) {
        let open: Vec<(String, &'static str)> = self
            .loaded(sid)
            .map(|l| {
                l.s.approvals
                    .values()
                    .filter_map(|a| {
                        let d = a.decision.as_deref()?;
                        let status = match d {
                            d if d.starts_with("approved") => return None,
                            "abort" => "cancelled",
                            _ => "rejected",
                        };
                        l.s.item_in_progress(&a.item_id)
                            .then(|| (a.item_id.clone(), status))
                    })
                    .collect()
            })
            .unwrap_or_default();
        for (item_id, status) in open {
            self.complete_not_started(sid, &item_id, status);
        }
    }

    /// Completes a tool call whose effect never ran (refused, or its
    /// approval aborted): `effectOutcome: notStarted` (PROTOCOL.md 5).
    fn complete_not_started(&mut self, sid: &str, item_id: &str, status: &str) {
        let mut extra = Map::new();
        extra.insert("effectOutcome".into(), json!("notStarted"));
        self.complete_item(sid, item_id, status, extra, None);
    }

    /// Tool calls approved but never completed: the effect was in flight at
    /// the crash. A keyed provider is asked; an unkeyed one cannot tell.
    fn reconcile_effects(&mut self, sid: &str) {
        let open: Vec<(String, String, String, String)> = self
            .loaded(sid)
            .map(|l| {
                l.s.approvals
                    .values()
                    .filter(|a| {
                        a.decision
                            .as_deref()
                            .is_some_and(|d| d.starts_with("approved"))
                    })
                    .filter_map(|a| {
                        if !l.s.item_in_progress(&a.item_id) {
                            return None;
                        }
                        let item = l.s.item(&a.item_id)?;
                        Some((
                            a.item_id.clone(),
                            item["tool"].as_str().unwrap_or_default().to_string(),
                            item["args"].as_str().unwrap_or_default().to_string(),
                            item["approvalId"].as_str().unwrap_or_default().to_string(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        for (item_id, provider, action, approval_id) in open {
            let keyed = self.cfg.effect_providers.get(&provider) == Some(&true);
            if keyed || self.bugs.has(Bug::RetryUnkeyedEffect) {
                // (The planted bug "reconciles" an unkeyed effect by doing
                // it again.)
                let mode = if keyed {
                    EffectMode::Query
                } else {
                    EffectMode::Perform
                };
                let token = self.token();
                let now = self.now_ms;
                let slot = self.loaded(sid).expect("loaded").slot;
                self.effects.insert(
                    token,
                    EffectWait {
                        session: sid.to_string(),
                        slot,
                        item_id,
                        turn_id: String::new(),
                        deadline_ms: now.saturating_add(super::host::EFFECT_TIMEOUT_MS),
                        query: keyed,
                    },
                );
                self.push_output(Output::Effect {
                    token,
                    provider,
                    key: format!("{sid}:{approval_id}"),
                    action,
                    mode,
                });
            } else {
                let mut extra = Map::new();
                extra.insert("effectOutcome".into(), json!("unknown"));
                self.complete_item(sid, &item_id, "failed", extra, None);
            }
        }
    }
}
