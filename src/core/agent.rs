//! The agent seam: what produces a turn's output.
//!
//! The core owns everything the runtime decides (acks, turn ids, items'
//! ids, cursors, approvals' lifecycle); an [`Agent`] only says what the
//! turn does next. [`ScriptedAgent`] is the deterministic one of
//! PROTOCOL.md section 5; a model-backed or transcript-playing agent plugs in
//! the same way.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

/// The approval an agent's tool call needs before it may run.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalSpec {
    /// `subject` of the approval request.
    pub subject: Value,
    /// `toolName`.
    pub tool_name: String,
    /// `rawArgs`.
    pub raw_args: String,
    /// `availableChoices`.
    pub choices: Vec<Value>,
    /// Extra members of `approval/requested` (e.g. `toolCallId`).
    pub extra: Map<String, Value>,
}

/// An external effect performed once the tool call is approved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectSpec {
    /// `keyed` or `unkeyed`.
    pub provider: String,
    /// The action text.
    pub action: String,
}

/// What a turn does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing until this time (host clock, ms).
    SleepUntil(u64),
    /// Waiting for an approval or effect the core is handling.
    Blocked,
    /// Append to the turn's agent message (opening it if needed).
    Delta(String),
    /// Complete the agent message. With no open message, `text` becomes a
    /// single-shot completed item.
    CompleteMessage {
        /// Text of a single-shot message (ignored when deltas opened one).
        text: String,
        /// Extra item members.
        extra: Map<String, Value>,
    },
    /// Start a tool call item.
    ToolCall {
        /// `tool`.
        tool: String,
        /// Extra item members (`callId`, `args`, ...).
        extra: Map<String, Value>,
        /// Needs an approval first.
        approval: Option<ApprovalSpec>,
        /// Performed after approval.
        effect: Option<EffectSpec>,
        /// A background task running this long (ms); the turn goes on.
        background_ms: Option<u64>,
    },
    /// Complete the most recent tool call that has no effect of the core's
    /// to wait for, with these extra members and status.
    CompleteTool {
        /// Final status (`completed`, `failed`, ...).
        status: String,
        /// Extra item members.
        extra: Map<String, Value>,
    },
    /// A model attempt failed retryably and its retry is scheduled: the
    /// core emits a durable `turn/retryScheduled` (non-terminal). The agent
    /// itself waits out the delay (it answers `SleepUntil` meanwhile).
    RetryScheduled(RetrySchedule),
    /// End the turn.
    Finish(Finish),
}

/// The members of `turn/retryScheduled` (public `TurnRetryScheduledParams`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule {
    /// The attempt that failed (from 1).
    pub attempt: u64,
    /// The attempt about to run (`attempt < next_attempt <= max_attempts`).
    pub next_attempt: u64,
    /// The turn's bound on model attempts.
    pub max_attempts: u64,
    /// The backoff before the next attempt, ms.
    pub retry_delay_ms: u64,
    /// Why the attempt failed (non-empty, at most 160 characters).
    pub reason: String,
}

/// How a turn ended, as the agent reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// `completed` or `failed`.
    pub terminal: String,
    /// Extra members of `turn/completed` (`durationMs`, `usage`, `error`,
    /// `reason`, ...). When `durationMs` is absent the core fills it in; a
    /// member set to `null` is left out.
    pub extra: Map<String, Value>,
}

/// What the core tells an agent about a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnInput {
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// The input text.
    pub text: String,
}

/// Produces turns' output. Implementations must be deterministic functions
/// of their inputs and the times passed in.
pub trait Agent: std::fmt::Debug {
    /// A turn launches at `now_ms`. `Err(message)` is a failed launch.
    fn launch(&mut self, turn: &TurnInput, now_ms: u64) -> Result<(), String>;
    /// Steered input joins the running turn.
    fn steer(&mut self, turn_id: &str, text: &str, now_ms: u64);
    /// The next step of a running turn at `now_ms`.
    fn poll(&mut self, turn_id: &str, now_ms: u64) -> Step;
    /// An approval the turn asked for was decided (`approved`, `denied`,
    /// `abort`, ...); `effect_outcome` is set when the core ran an effect.
    fn resolved(
        &mut self,
        turn_id: &str,
        decision: &str,
        effect_outcome: Option<&str>,
        now_ms: u64,
    );
    /// The turn ended for a reason of the core's (cancel, crash); forget it.
    fn end(&mut self, turn_id: &str);
}

/// Builds a fresh agent for each host incarnation (restart = new agent).
pub type AgentFactory = std::sync::Arc<dyn Fn() -> Box<dyn Agent> + Send + Sync>;

/// The default agent factory: [`ScriptedAgent`].
pub fn scripted_factory() -> AgentFactory {
    std::sync::Arc::new(|| Box::new(ScriptedAgent::default()) as Box<dyn Agent>)
}

/// Delta size and pace of the scripted agent.
pub const DELTA_CHARS_MAX: usize = 16;
/// One delta per this many ms of host clock.
pub const DELTA_INTERVAL_MS: u64 = 10;
/// `!retry N`: the scripted turn's bound on model attempts.
pub const RETRY_ATTEMPTS_MAX: u64 = 3;
/// `!retry N`: the backoff before each retried attempt, ms of host clock.
pub const RETRY_DELAY_MS: u64 = 2000;
/// `!retry N`: the provider failure each failed attempt reports.
pub const RETRY_REASON: &str = "provider stream disconnected";

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Sleeping {
        until_ms: u64,
    },
    /// `!retry N`: `failed` of the `fail_count` failing attempts happened;
    /// the next attempt runs at `resume_at_ms`.
    Retrying {
        fail_count: u64,
        failed: u64,
        resume_at_ms: Option<u64>,
    },
    Tool {
        started: bool,
        resolved: bool,
    },
    Streaming,
    Done,
}

#[derive(Debug, Clone)]
struct ScriptedTurn {
    phases: Vec<Phase>,
    target: String,
    emitted_chars: usize,
    next_delta_ms: u64,
    effect: Option<(String, String)>,
    task_ms: Option<u64>,
    started_ms: u64,
}

/// The deterministic agent of PROTOCOL.md section 5: echoes its input in
/// deltas of at most 16 characters, one per 10 ms, obeying directives at
/// the start of the input:
///
/// | directive | behaviour |
/// | --- | --- |
/// | `!sleep N` | wait N ms before the message |
/// | `!fail-launch` | the launch fails |
/// | `!effect PROVIDER ACTION` | an approval-gated tool call whose effect the core performs |
/// | `!task N` | a background task of N ms |
/// | `!retry N` | the first N model attempts fail with a retryable provider error ([`RETRY_REASON`]); each failure below [`RETRY_ATTEMPTS_MAX`] is a [`Step::RetryScheduled`] and a wait of [`RETRY_DELAY_MS`]; the failure at the bound finishes the turn `failed` with a `modelError` |
#[derive(Debug, Default)]
pub struct ScriptedAgent {
    turns: BTreeMap<String, ScriptedTurn>,
}

/// Directives parsed from the start of an input text.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Directives {
    /// `!sleep N`.
    pub sleep_ms: u64,
    /// `!fail-launch`.
    pub fail_launch: bool,
    /// `!effect PROVIDER ACTION`.
    pub effect: Option<(String, String)>,
    /// `!task N`.
    pub task_ms: Option<u64>,
    /// `!retry N`: the first N model attempts fail (provider error) and
    /// are retried; N >= [`RETRY_ATTEMPTS_MAX`] fails the turn.
    pub retry_failures: u64,
}

/// Parses the directives at the start of `text` (each a `!word` and its
/// arguments, separated by whitespace); stops at the first other word.
pub fn parse_directives(text: &str) -> Directives {
    let mut d = Directives::default();
    let mut words = text.split_whitespace().peekable();
    while let Some(w) = words.next() {
        match w {
            "!sleep" => match words.next().and_then(|n| n.parse::<u64>().ok()) {
                Some(n) => d.sleep_ms = d.sleep_ms.saturating_add(n),
                None => break,
            },
            "!fail-launch" => d.fail_launch = true,
            "!effect" => match (words.next(), words.next()) {
                (Some(p), Some(a)) => d.effect = Some((p.to_string(), a.to_string())),
                _ => break,
            },
            "!task" => match words.next().and_then(|n| n.parse::<u64>().ok()) {
                Some(n) => d.task_ms = Some(n),
                None => break,
            },
            "!retry" => match words.next().and_then(|n| n.parse::<u64>().ok()) {
                Some(n) => d.retry_failures = n,
                None => break,
            },
            _ => break,
        }
    }
    d
}

impl Agent for ScriptedAgent {
    fn launch(&mut self, turn: &TurnInput, now_ms: u64) -> Result<(), String> {
        let d = parse_directives(&turn.text);
        if d.fail_launch {
            return Err("scripted launch failure (!fail-launch)".to_string());
        }
        let mut phases = Vec::new();
        if d.sleep_ms > 0 {
            phases.push(Phase::Sleeping {
                until_ms: now_ms.saturating_add(d.sleep_ms),
            });
        }
        if d.retry_failures > 0 {
            phases.push(Phase::Retrying {
                fail_count: d.retry_failures,
                failed: 0,
                resume_at_ms: None,
            });
        }
        if d.effect.is_some() || d.task_ms.is_some() {
            phases.push(Phase::Tool {
                started: false,
                resolved: d.effect.is_none(),
            });
        }
        phases.push(Phase::Streaming);
        phases.push(Phase::Done);
        phases.reverse();
        let prev = self.turns.insert(
            turn.turn_id.clone(),
            ScriptedTurn {
                phases,
                target: format!("echo: {}", turn.text),
                emitted_chars: 0,
                next_delta_ms: now_ms,
                effect: d.effect,
                task_ms: d.task_ms,
                started_ms: now_ms,
            },
        );
        debug_assert!(prev.is_none());
        Ok(())
    }

    fn steer(&mut self, turn_id: &str, text: &str, _now_ms: u64) {
        if let Some(t) = self.turns.get_mut(turn_id) {
            t.target.push_str(" | ");
            t.target.push_str(text);
        }
    }

    fn poll(&mut self, turn_id: &str, now_ms: u64) -> Step {
        let Some(t) = self.turns.get_mut(turn_id) else {
            return Step::Blocked;
        };
        loop {
            let Some(phase) = t.phases.last_mut() else {
                return Step::Blocked;
            };
            match phase {
                Phase::Sleeping { until_ms } => {
                    if now_ms < *until_ms {
                        return Step::SleepUntil(*until_ms);
                    }
                    t.phases.pop();
                    t.next_delta_ms = now_ms;
                }
                Phase::Retrying {
                    fail_count,
                    failed,
                    resume_at_ms,
                } => {
                    if let Some(at) = *resume_at_ms {
                        if now_ms < at {
                            return Step::SleepUntil(at);
                        }
                        *resume_at_ms = None;
                    }
                    if *failed >= *fail_count {
                        t.phases.pop();
                        t.next_delta_ms = now_ms;
                        continue;
                    }
                    *failed += 1;
                    let attempt = *failed;
                    if attempt >= RETRY_ATTEMPTS_MAX {
                        let text = format!("model failed after {attempt} attempts: {RETRY_REASON}");
                        let mut extra = Map::new();
                        extra.insert("durationMs".into(), json!(now_ms - t.started_ms));
                        extra.insert("reason".into(), json!(text));
                        extra.insert(
                            "error".into(),
                            json!({"kind": "modelError", "message": text, "retryable": true}),
                        );
                        self.turns.remove(turn_id);
                        return Step::Finish(Finish {
                            terminal: "failed".to_string(),
                            extra,
                        });
                    }
                    *resume_at_ms = Some(now_ms.saturating_add(RETRY_DELAY_MS));
                    return Step::RetryScheduled(RetrySchedule {
                        attempt,
                        next_attempt: attempt + 1,
                        max_attempts: RETRY_ATTEMPTS_MAX,
                        retry_delay_ms: RETRY_DELAY_MS,
                        reason: RETRY_REASON.to_string(),
                    });
                }
                Phase::Tool { started, resolved } => {
                    if !*started {
                        *started = true;
                        let (tool, approval, effect) = match &t.effect {
                            Some((provider, action)) => (
                                provider.clone(),
                                Some(effect_approval(provider, action)),
                                Some(EffectSpec {
                                    provider: provider.clone(),
                                    action: action.clone(),
                                }),
                            ),
                            None => ("background".to_string(), None, None),
                        };
                        let mut extra = Map::new();
                        if let Some((_, action)) = &t.effect {
                            extra.insert("args".into(), json!(action));
                        }
                        return Step::ToolCall {
                            tool,
                            extra,
                            approval,
                            effect,
                            background_ms: if t.effect.is_some() { None } else { t.task_ms },
                        };
                    }
                    if !*resolved {
                        return Step::Blocked;
                    }
                    t.phases.pop();
                    t.next_delta_ms = now_ms;
                }
                Phase::Streaming => {
                    let total = t.target.chars().count();
                    if t.emitted_chars >= total {
                        t.phases.pop();
                        return Step::CompleteMessage {
                            text: t.target.clone(),
                            extra: Map::new(),
                        };
                    }
                    if now_ms < t.next_delta_ms {
                        return Step::SleepUntil(t.next_delta_ms);
                    }
                    let chunk: String = t
                        .target
                        .chars()
                        .skip(t.emitted_chars)
                        .take(DELTA_CHARS_MAX)
                        .collect();
                    t.emitted_chars += chunk.chars().count();
                    t.next_delta_ms = now_ms + DELTA_INTERVAL_MS;
                    return Step::Delta(chunk);
                }
                Phase::Done => {
                    let mut extra = Map::new();
                    extra.insert("durationMs".into(), json!(now_ms - t.started_ms));
                    let _ = t;
                    self.turns.remove(turn_id);
                    return Step::Finish(Finish {
                        terminal: "completed".to_string(),
                        extra,
                    });
                }
            }
        }
    }

    fn resolved(&mut self, turn_id: &str, _decision: &str, _effect: Option<&str>, _now_ms: u64) {
        if let Some(t) = self.turns.get_mut(turn_id) {
            for p in t.phases.iter_mut() {
                if let Phase::Tool { resolved, .. } = p {
                    *resolved = true;
                }
            }
        }
    }

    fn end(&mut self, turn_id: &str) {
        self.turns.remove(turn_id);
    }
}

fn effect_approval(provider: &str, action: &str) -> ApprovalSpec {
    ApprovalSpec {
        subject: json!({"kind": "tool", "toolName": provider}),
        tool_name: provider.to_string(),
        raw_args: action.to_string(),
        choices: vec![
            json!({"choiceId": "approve", "label": "Approve", "decision": "approved", "scope": "once"}),
            json!({"choiceId": "deny", "label": "Deny", "decision": "denied", "scope": "once"}),
        ],
        extra: Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> (Vec<Step>, u64) {
        let mut a = ScriptedAgent::default();
        let turn = TurnInput {
            session_id: "s".into(),
            turn_id: "t".into(),
            text: text.into(),
        };
        a.launch(&turn, 1000).unwrap();
        let mut now = 1000;
        let mut steps = Vec::new();
        for _ in 0..10_000 {
            let s = a.poll("t", now);
            match &s {
                Step::SleepUntil(t) => now = *t,
                Step::Blocked => a.resolved("t", "approved", Some("committed"), now),
                Step::Finish(_) => {
                    steps.push(s);
                    return (steps, now);
                }
                _ => steps.push(s),
            }
        }
        panic!("agent did not finish");
    }

    #[test]
    fn echo_in_deltas_of_sixteen_every_ten_ms() {
        let (steps, end) = run("hello world, this is a long input");
        let deltas: Vec<String> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Delta(d) => Some(d.clone()),
                _ => None,
            })
            .collect();
        assert!(deltas.iter().all(|d| d.chars().count() <= 16));
        assert_eq!(deltas.concat(), "echo: hello world, this is a long input");
        assert_eq!(end, 1000 + 10 * (deltas.len() as u64 - 1));
    }

    #[test]
    fn directives() {
        assert!(parse_directives("!fail-launch x").fail_launch);
        assert_eq!(parse_directives("!sleep 250 hi").sleep_ms, 250);
        assert_eq!(
            parse_directives("!effect keyed write-x").effect,
            Some(("keyed".into(), "write-x".into()))
        );
        assert_eq!(parse_directives("!task 40").task_ms, Some(40));
        assert_eq!(parse_directives("!retry 2 hi").retry_failures, 2);
        assert_eq!(parse_directives("hi !sleep 5"), Directives::default());
        let mut a = ScriptedAgent::default();
        let t = TurnInput {
            session_id: "s".into(),
            turn_id: "t".into(),
            text: "!fail-launch".into(),
        };
        assert!(a.launch(&t, 0).is_err());
    }

    #[test]
    fn sleep_delays_first_delta() {
        let mut a = ScriptedAgent::default();
        let t = TurnInput {
            session_id: "s".into(),
            turn_id: "t".into(),
            text: "!sleep 100 x".into(),
        };
        a.launch(&t, 0).unwrap();
        assert_eq!(a.poll("t", 0), Step::SleepUntil(100));
        assert!(matches!(a.poll("t", 100), Step::Delta(_)));
    }

    #[test]
    fn retry_schedules_each_failed_attempt_then_streams() {
        let mut a = ScriptedAgent::default();
        let t = TurnInput {
            session_id: "s".into(),
            turn_id: "t".into(),
            text: "!retry 2 x".into(),
        };
        a.launch(&t, 0).unwrap();
        let first = a.poll("t", 0);
        assert_eq!(
            first,
            Step::RetryScheduled(RetrySchedule {
                attempt: 1,
                next_attempt: 2,
                max_attempts: RETRY_ATTEMPTS_MAX,
                retry_delay_ms: RETRY_DELAY_MS,
                reason: RETRY_REASON.into(),
            })
        );
        assert_eq!(a.poll("t", 5), Step::SleepUntil(RETRY_DELAY_MS));
        assert!(matches!(
            a.poll("t", RETRY_DELAY_MS),
            Step::RetryScheduled(RetrySchedule {
                attempt: 2,
                next_attempt: 3,
                ..
            })
        ));
        assert!(matches!(a.poll("t", 2 * RETRY_DELAY_MS), Step::Delta(_)));
    }

    #[test]
    fn retry_past_the_bound_fails_the_turn_with_a_model_error() {
        let (steps, end) = run("!retry 3 x");
        let retries = steps
            .iter()
            .filter(|s| matches!(s, Step::RetryScheduled(_)))
            .count();
        assert_eq!(retries as u64, RETRY_ATTEMPTS_MAX - 1);
        assert_eq!(end, 1000 + 2 * RETRY_DELAY_MS);
        let Some(Step::Finish(f)) = steps.last() else {
            panic!("{steps:?}")
        };
        assert_eq!(f.terminal, "failed");
        assert_eq!(f.extra["error"]["kind"], json!("modelError"));
        assert_eq!(f.extra["reason"], f.extra["error"]["message"]);
        assert!(!steps.iter().any(|s| matches!(s, Step::Delta(_))));
    }

    #[test]
    fn effect_asks_for_approval_then_streams() {
        let (steps, _) = run("!effect keyed k1");
        assert!(matches!(
            &steps[0],
            Step::ToolCall {
                approval: Some(_),
                effect: Some(_),
                ..
            }
        ));
        assert!(steps.iter().any(|s| matches!(s, Step::Delta(_))));
    }
}
