//! The transcript agent: plays, turn by turn, the agent-produced output a
//! golden transcript recorded, so that everything else (acks, turn ids,
//! dispositions, `turn/started`, the `userMessage` item, queueing, replay
//! answers, rejections, cursors, approvals' lifecycle) is produced by our
//! runtime and can be compared with the recording.
//!
//! What counts as agent output, per server frame of the transcript:
//!
//! | frame | [`Step`] |
//! | --- | --- |
//! | `item/delta` (`field` `text`) of an `agentMessage` | `Delta` (the first one opens the message: the core emits its `item/started`) |
//! | `item/completed` of an `agentMessage`, status `completed` | `CompleteMessage` (members the core does not set go in `extra`) |
//! | `item/started` of a `toolCall` | `ToolCall` (`tool`; `callId`, `args`, ... in `extra`) |
//! | `approval/requested` | the `ApprovalSpec` of the tool call it names (`subject`, `toolName`, `rawArgs`, `availableChoices`; `toolCallId` when it is the call's `callId`) |
//! | `item/completed` of a `toolCall`, status `completed` or `failed` | `CompleteTool` (members that changed since `item/started`) |
//! | `turn/completed` of a launched turn, terminal `completed` or `failed` and not `reason: "crash"` | `Finish` (`durationMs`, `usage`, `error`, `reason`, ... in `extra`) |
//! | `turn/completed` with `error.kind` `launchError` and no `turn/started` | `launch` fails with `error.message` |
//! | `turn/retryScheduled` | `RetryScheduled` (the recorded attempt, bound, delay and reason) |
//!
//! Everything else is the runtime's. Frames that are agent output but that
//! the agent seam cannot express (a tool's `output` delta, an
//! `item/started` with no delta) are listed in
//! [`Script::unsupported`] and not played: the replay then reports them as
//! missing frames, which is the honest outcome.
//!
//! Ordering: a step is *gated* on the transcript line number of the last
//! client line recorded before its frame. The replay driver publishes the
//! line it has reached in [`Progress`]; until the gate is reached the agent
//! answers `SleepUntil(now + 1)`, and the driver advances the clock after
//! each client line, so a running turn's output lands after the client
//! lines the recording puts before it (a queued `turn/start` and its ack,
//! say), never before. The agent never answers a request and never writes
//! an ack: it only returns [`Step`]s.
//!
//! Determinism: the script is a pure function of the transcript; the agent
//! reads only the script, the progress counter and the times the core
//! passes in.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use crate::core::agent::{
    Agent, AgentFactory, ApprovalSpec, Finish, RetrySchedule, Step, TurnInput,
};

/// One scripted step and the transcript line it waits for.
#[derive(Debug, Clone, PartialEq)]
pub struct Gated {
    /// The step may run once the driver has reached this transcript line
    /// (1-based; 0 means at once).
    pub gate_line: usize,
    /// The transcript line of the frame this step reproduces.
    pub source_line: usize,
    /// The step.
    pub step: Step,
}

/// What the agent plays for one turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnScript {
    /// `Some(message)`: the launch fails with this message.
    pub launch_error: Option<String>,
    /// The steps, in order.
    pub steps: VecDeque<Gated>,
}

/// A frame that is agent output but cannot be played through the agent
/// seam.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// Transcript line (1-based).
    pub line: usize,
    /// Why it cannot be played.
    pub why: String,
}

/// The agent output of a whole transcript, by turn id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    /// Scripts by `turnId` (turn ids are client-derived, so they are the
    /// same in the recording and in the replay).
    pub turns: BTreeMap<String, TurnScript>,
    /// Agent output the seam cannot express.
    pub unsupported: Vec<Unsupported>,
}

/// Item members the core sets itself; never passed as `extra`.
const CORE_ITEM_KEYS: [&str; 7] = [
    "itemId",
    "kind",
    "turnId",
    "revision",
    "status",
    "recordedAt",
    "approvalId",
];

/// `approval/requested` members the core sets itself.
const CORE_APPROVAL_KEYS: [&str; 15] = [
    "sessionId",
    "viewCursor",
    "sourceRange",
    "approvalId",
    "turnId",
    "taskId",
    "itemId",
    "toolCallId",
    "toolName",
    "rawArgs",
    "subject",
    "currentRequirementId",
    "availableChoices",
    "protectedWrite",
    "judgeEscalated",
];

/// `turn/completed` members the core sets itself.
const CORE_TERMINAL_KEYS: [&str; 5] = [
    "sessionId",
    "viewCursor",
    "sourceRange",
    "turnId",
    "terminal",
];

fn without(obj: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    obj.iter()
        .filter(|(k, _)| !keys.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Builds the [`Script`] of a transcript. `lines` are `(line number,
/// is_client, parsed frame)` in transcript order; unparsable lines are
/// passed as `None` and ignored.
pub fn compile(lines: &[(usize, bool, Option<Value>)]) -> Script {
    let mut b = Builder::default();
    for (number, is_client, frame) in lines {
        if *is_client {
            b.last_client = *number;
            continue;
        }
        if let Some(frame) = frame {
            b.server_frame(*number, frame);
        }
    }
    b.script
}

#[derive(Default)]
struct Builder {
    script: Script,
    last_client: usize,
    /// Turns that emitted `turn/started` in the recording.
    started: std::collections::BTreeSet<String>,
    /// Open agent messages: itemId -> (turnId, saw a delta).
    messages: BTreeMap<String, (String, bool)>,
    /// Tool call items as started: itemId -> item.
    tools: BTreeMap<String, Map<String, Value>>,
}

impl Builder {
    fn push(&mut self, turn: &str, line: usize, step: Step) {
        let gate_line = self.last_client;
        self.script
            .turns
            .entry(turn.to_string())
            .or_default()
            .steps
            .push_back(Gated {
                gate_line,
                source_line: line,
                step,
            });
    }

    fn unsupported(&mut self, line: usize, why: impl Into<String>) {
        self.script.unsupported.push(Unsupported {
            line,
            why: why.into(),
        });
    }

    fn server_frame(&mut self, line: usize, frame: &Value) {
        let Some(method) = frame.get("method").and_then(Value::as_str) else {
            return; // a response: the runtime's
        };
        if frame.get("id").is_some() {
            return; // a server request (`approval/request`): the runtime's
        }
        let empty = Map::new();
        let p = frame
            .get("params")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let item = p.get("item").and_then(Value::as_object);
        let kind = item
            .and_then(|i| i.get("kind"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let item_id = item
            .and_then(|i| i.get("itemId"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let turn = item
            .and_then(|i| i.get("turnId"))
            .or_else(|| p.get("turnId"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match (method, kind) {
            ("turn/started", _) => {
                self.started.insert(turn);
            }
            ("item/started", "agentMessage") => {
                self.messages.insert(item_id, (turn, false));
            }
            ("item/delta", _) => self.delta(line, p),
            ("item/completed", "agentMessage") => {
                self.message_completed(line, &turn, &item_id, item.unwrap_or(&empty))
            }
            ("item/started", "toolCall") => {
                let item = item.unwrap_or(&empty);
                let tool = item
                    .get("tool")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let extra = without(item, &CORE_ITEM_KEYS);
                let extra = without(&extra, &["tool"]);
                self.tools.insert(item_id, item.clone());
                self.push(
                    &turn,
                    line,
                    Step::ToolCall {
                        tool,
                        extra,
                        approval: None,
                        effect: None,
                        background_ms: None,
                    },
                );
            }
            ("approval/requested", _) => self.approval(line, &turn, p),
            ("item/completed", "toolCall") => {
                self.tool_completed(line, &turn, &item_id, item.unwrap_or(&empty))
            }
            ("turn/completed", _) => self.turn_completed(line, &turn, p),
            ("turn/retryScheduled", _) => self.retry(line, &turn, p),
            _ => {}
        }
    }

    fn retry(&mut self, line: usize, turn: &str, p: &Map<String, Value>) {
        let n = |k: &str| p.get(k).and_then(Value::as_u64);
        let reason = p.get("reason").and_then(Value::as_str);
        match (
            n("attempt"),
            n("nextAttempt"),
            n("maxAttempts"),
            n("retryDelayMs"),
            reason,
        ) {
            (
                Some(attempt),
                Some(next_attempt),
                Some(max_attempts),
                Some(retry_delay_ms),
                Some(r),
            ) => self.push(
                turn,
                line,
                Step::RetryScheduled(RetrySchedule {
                    attempt,
                    next_attempt,
                    max_attempts,
                    retry_delay_ms,
                    reason: r.to_string(),
                }),
            ),
            _ => self.unsupported(
                line,
                "turn/retryScheduled without its integer members and reason",
            ),
        }
    }

    fn delta(&mut self, line: usize, p: &Map<String, Value>) {
        let item_id = p.get("itemId").and_then(Value::as_str).unwrap_or("");
        let field = p.get("field").and_then(Value::as_str).unwrap_or("text");
        let text = p
            .get("delta")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match self.messages.get_mut(item_id) {
            Some((turn, seen)) if field == "text" => {
                *seen = true;
                let turn = turn.clone();
                self.push(&turn, line, Step::Delta(text));
            }
            Some(_) => self.unsupported(line, format!("item/delta of field {field:?} on an agentMessage")),
            None if self.tools.contains_key(item_id) => {
                self.unsupported(line, format!("item/delta of field {field:?} on a toolCall: the agent seam streams message text only"))
            }
            None => self.unsupported(line, "item/delta of an item this transcript never started"),
        }
    }

    fn message_completed(
        &mut self,
        line: usize,
        turn: &str,
        item_id: &str,
        item: &Map<String, Value>,
    ) {
        if item.get("status").and_then(Value::as_str) != Some("completed") {
            return; // cancelled or failed with its turn: the runtime's
        }
        if let Some((_, false)) = self.messages.get(item_id) {
            self.unsupported(
                line,
                "an agentMessage opened by item/started without any delta",
            );
        }
        self.messages.remove(item_id);
        let text = item
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let extra = without(item, &CORE_ITEM_KEYS);
        let extra = without(&extra, &["text"]);
        self.push(turn, line, Step::CompleteMessage { text, extra });
    }

    fn approval(&mut self, line: usize, turn: &str, p: &Map<String, Value>) {
        let item_id = p.get("itemId").and_then(Value::as_str).unwrap_or("");
        let call_id = self
            .tools
            .get(item_id)
            .and_then(|i| i.get("callId"))
            .cloned();
        let mut extra = without(p, &CORE_APPROVAL_KEYS);
        if let (Some(tc), Some(call)) = (p.get("toolCallId"), call_id) {
            if *tc == call {
                extra.insert("toolCallId".into(), tc.clone());
            }
        }
        let spec = ApprovalSpec {
            subject: p.get("subject").cloned().unwrap_or(Value::Null),
            tool_name: p
                .get("toolName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            raw_args: p
                .get("rawArgs")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            choices: p
                .get("availableChoices")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            extra,
        };
        let steps = self.script.turns.get_mut(turn).map(|t| &mut t.steps);
        let target = steps.and_then(|s| {
            s.iter_mut()
                .rev()
                .find(|g| matches!(&g.step, Step::ToolCall { approval: None, .. }))
        });
        match target {
            Some(Gated {
                step: Step::ToolCall { approval, .. },
                ..
            }) => *approval = Some(spec),
            _ => self.unsupported(
                line,
                "approval/requested with no tool call of this turn before it",
            ),
        }
    }

    fn tool_completed(
        &mut self,
        line: usize,
        turn: &str,
        item_id: &str,
        item: &Map<String, Value>,
    ) {
        let status = item
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !matches!(status.as_str(), "completed" | "failed") || item.contains_key("effectOutcome")
        {
            return; // cancelled, rejected or an effect's outcome: the runtime's
        }
        let started = self.tools.get(item_id).cloned().unwrap_or_default();
        let extra: Map<String, Value> = without(item, &CORE_ITEM_KEYS)
            .into_iter()
            .filter(|(k, v)| started.get(k) != Some(v))
            .collect();
        self.push(turn, line, Step::CompleteTool { status, extra });
    }

    fn turn_completed(&mut self, line: usize, turn: &str, p: &Map<String, Value>) {
        let terminal = p
            .get("terminal")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let error_kind = p
            .get("error")
            .and_then(|e| e.get("kind"))
            .and_then(Value::as_str);
        if !self.started.contains(turn) && error_kind == Some("launchError") {
            let message = p
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("launch failed");
            self.script
                .turns
                .entry(turn.to_string())
                .or_default()
                .launch_error = Some(message.to_string());
            return;
        }
        let crashed = p.get("reason").and_then(Value::as_str) == Some("crash");
        if !matches!(terminal.as_str(), "completed" | "failed") || crashed {
            return; // cancelled, or ended by recovery: the runtime's
        }
        let mut extra = without(p, &CORE_TERMINAL_KEYS);
        // `durationMs` is optional: where the recording has none, ask the
        // core to leave it out rather than measure one.
        extra.entry("durationMs").or_insert(Value::Null);
        self.push(turn, line, Step::Finish(Finish { terminal, extra }));
    }
}

/// How far the replay driver has got: the transcript line (1-based) of the
/// last client line it delivered. Shared between the driver and every agent
/// incarnation.
#[derive(Debug, Clone, Default)]
pub struct Progress(Arc<Mutex<usize>>);

impl Progress {
    /// Records that the driver is delivering transcript line `line`.
    pub fn reach(&self, line: usize) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        debug_assert!(line >= *g, "progress never goes back");
        *g = line;
    }

    /// The line reached.
    pub fn reached(&self) -> usize {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An [`Agent`] that plays a [`Script`].
#[derive(Debug)]
pub struct TranscriptAgent {
    script: Arc<Mutex<Script>>,
    progress: Progress,
    running: BTreeMap<String, VecDeque<Gated>>,
}

impl TranscriptAgent {
    /// An agent playing `script` (shared, so that a restarted host's agent
    /// does not replay turns already played), gated on `progress`.
    pub fn new(script: Arc<Mutex<Script>>, progress: Progress) -> TranscriptAgent {
        TranscriptAgent {
            script,
            progress,
            running: BTreeMap::new(),
        }
    }
}

/// A factory building [`TranscriptAgent`]s over one shared script.
pub fn factory(script: Script, progress: Progress) -> AgentFactory {
    let script = Arc::new(Mutex::new(script));
    Arc::new(move || {
        Box::new(TranscriptAgent::new(script.clone(), progress.clone())) as Box<dyn Agent>
    })
}

impl Agent for TranscriptAgent {
    fn launch(&mut self, turn: &TurnInput, _now_ms: u64) -> Result<(), String> {
        let taken = {
            let mut s = self.script.lock().unwrap_or_else(|e| e.into_inner());
            s.turns.remove(&turn.turn_id).unwrap_or_default()
        };
        if let Some(message) = taken.launch_error {
            return Err(message);
        }
        self.running.insert(turn.turn_id.clone(), taken.steps);
        Ok(())
    }

    fn steer(&mut self, _turn_id: &str, _text: &str, _now_ms: u64) {
        // Steered input is the runtime's (a userMessage item); what the
        // agent says afterwards is already in the script.
    }

    fn poll(&mut self, turn_id: &str, now_ms: u64) -> Step {
        let reached = self.progress.reached();
        let Some(steps) = self.running.get_mut(turn_id) else {
            return Step::Blocked;
        };
        match steps.front() {
            // Nothing more was recorded for this turn: it stays running.
            None => Step::Blocked,
            Some(g) if g.gate_line > reached => Step::SleepUntil(now_ms.saturating_add(1)),
            Some(_) => {
                let g = steps.pop_front().expect("front exists");
                if matches!(g.step, Step::Finish(_)) {
                    self.running.remove(turn_id);
                }
                g.step
            }
        }
    }

    fn resolved(
        &mut self,
        _turn_id: &str,
        _decision: &str,
        _effect_outcome: Option<&str>,
        _now_ms: u64,
    ) {
        // The recording already says what the turn did after the decision.
    }

    fn end(&mut self, turn_id: &str) {
        self.running.remove(turn_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(n: usize, client: bool, v: Value) -> (usize, bool, Option<Value>) {
        (n, client, Some(v))
    }

    #[test]
    fn deltas_message_and_finish_are_gated_on_the_preceding_client_line() {
        let lines = vec![
            line(1, true, json!({"id": 1, "method": "turn/start"})),
            line(
                2,
                false,
                json!({"method": "turn/started", "params": {"turnId": "t"}}),
            ),
            line(
                3,
                false,
                json!({"method": "item/started", "params": {"item": {"itemId": "m", "kind": "agentMessage", "turnId": "t"}}}),
            ),
            line(
                4,
                false,
                json!({"method": "item/delta", "params": {"itemId": "m", "field": "text", "delta": "he"}}),
            ),
            line(5, true, json!({"id": 2, "method": "turn/start"})),
            line(
                6,
                false,
                json!({"method": "item/completed", "params": {"item": {"itemId": "m", "kind": "agentMessage", "turnId": "t", "status": "completed", "text": "he", "revision": 2}}}),
            ),
            line(
                7,
                false,
                json!({"method": "turn/completed", "params": {"turnId": "t", "terminal": "completed", "durationMs": 5, "usage": {"inputTokens": 1}}}),
            ),
        ];
        let s = compile(&lines);
        assert!(s.unsupported.is_empty(), "{:?}", s.unsupported);
        let steps: Vec<_> = s.turns["t"]
            .steps
            .iter()
            .map(|g| (g.gate_line, g.step.clone()))
            .collect();
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[0], (1, Step::Delta("he".into())));
        assert!(matches!(&steps[1], (5, Step::CompleteMessage { extra, .. }) if extra.is_empty()));
        match &steps[2] {
            (5, Step::Finish(f)) => {
                assert_eq!(f.terminal, "completed");
                assert_eq!(
                    Value::Object(f.extra.clone()),
                    json!({"durationMs": 5, "usage": {"inputTokens": 1}})
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn the_agent_sleeps_until_its_gate_is_reached() {
        let lines = vec![
            line(1, true, json!({"id": 1})),
            line(
                2,
                false,
                json!({"method": "turn/started", "params": {"turnId": "t"}}),
            ),
            line(3, true, json!({"id": 2})),
            line(
                4,
                false,
                json!({"method": "item/completed", "params": {"item": {"itemId": "m", "kind": "agentMessage", "turnId": "t", "status": "completed", "text": "x"}}}),
            ),
        ];
        let progress = Progress::default();
        let mut a = TranscriptAgent::new(Arc::new(Mutex::new(compile(&lines))), progress.clone());
        let t = TurnInput {
            session_id: "s".into(),
            turn_id: "t".into(),
            text: "hi".into(),
        };
        progress.reach(1);
        a.launch(&t, 100).unwrap();
        assert_eq!(a.poll("t", 100), Step::SleepUntil(101));
        progress.reach(3);
        assert!(matches!(a.poll("t", 101), Step::CompleteMessage { .. }));
        assert_eq!(a.poll("t", 101), Step::Blocked);
    }

    #[test]
    fn tool_calls_carry_their_approval_and_complete_with_what_changed() {
        let tool = json!({"itemId": "i", "kind": "toolCall", "turnId": "t", "revision": 1, "status": "inProgress", "tool": "write_file", "callId": "c1", "args": "{}", "approvalId": "a"});
        let mut done = tool.clone();
        done["revision"] = json!(2);
        done["status"] = json!("completed");
        done["visibleOutput"] = json!("ok");
        let lines = vec![
            line(
                1,
                false,
                json!({"method": "turn/started", "params": {"turnId": "t"}}),
            ),
            line(
                2,
                false,
                json!({"method": "item/started", "params": {"item": tool}}),
            ),
            line(
                3,
                false,
                json!({"method": "approval/requested", "params": {"approvalId": "a", "turnId": "t", "itemId": "i", "toolCallId": "c1", "toolName": "write_file", "rawArgs": "{}", "subject": {"kind": "tool"}, "availableChoices": [{"choiceId": "ok"}], "protectedWrite": false, "judgeEscalated": false}}),
            ),
            line(
                4,
                false,
                json!({"id": 1, "method": "approval/request", "params": {}}),
            ),
            line(
                5,
                false,
                json!({"method": "item/completed", "params": {"item": done}}),
            ),
        ];
        let s = compile(&lines);
        let steps = &s.turns["t"].steps;
        assert_eq!(steps.len(), 2);
        match &steps[0].step {
            Step::ToolCall {
                tool,
                extra,
                approval: Some(a),
                ..
            } => {
                assert_eq!(tool, "write_file");
                assert_eq!(
                    Value::Object(extra.clone()),
                    json!({"callId": "c1", "args": "{}"})
                );
                assert_eq!(a.tool_name, "write_file");
                assert_eq!(Value::Object(a.extra.clone()), json!({"toolCallId": "c1"}));
            }
            other => panic!("unexpected {other:?}"),
        }
        match &steps[1].step {
            Step::CompleteTool { status, extra } => {
                assert_eq!(status, "completed");
                assert_eq!(Value::Object(extra.clone()), json!({"visibleOutput": "ok"}));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn launch_failures_and_unplayable_frames_are_recognised() {
        let lines = vec![
            line(
                1,
                false,
                json!({"method": "turn/completed", "params": {"turnId": "q", "terminal": "failed", "reason": "deferred_start_failed", "error": {"kind": "launchError", "message": "no provider", "retryable": true}}}),
            ),
            line(
                2,
                false,
                json!({"method": "turn/retryScheduled", "params": {"turnId": "t"}}),
            ),
            line(
                3,
                false,
                json!({"method": "turn/completed", "params": {"turnId": "c", "terminal": "cancelled"}}),
            ),
        ];
        let s = compile(&lines);
        assert_eq!(s.turns["q"].launch_error.as_deref(), Some("no provider"));
        assert!(s.turns["q"].steps.is_empty());
        assert!(
            !s.turns.contains_key("c"),
            "a cancellation is the runtime's"
        );
        assert_eq!(s.unsupported.len(), 1);
        assert_eq!(s.unsupported[0].line, 2);
    }
}
