//! What a command comes to: accepted (with its ack fields), rejected (with
//! its reason), or an error (with its kind).
//!
//! Rejections are terminal, and so is every rejection reason this SDK does
//! not know ([`RejectReason::Other`]): MSP says an unknown reason must be
//! treated as a terminal refusal. `abandoned` is a rejection the host
//! reports for an intake that never settled before its host died; the SDK
//! surfaces it and never invents one.

use serde_json::{json, Value};

use super::ids::{ApprovalId, CommandId, SessionId, TaskId, TurnId};

/// The terminal outcome of one command.
#[derive(Debug, Clone, PartialEq)]
pub enum CommandOutcome {
    /// Admitted: the host acked it (a replay gets a value-identical ack).
    Accepted(Ack),
    /// Refused by the host, durably for durable commands (`commandRejected`).
    Rejected(Rejection),
    /// Any other error, or a client-side end ([`ErrorKind::HostLost`]).
    Error(ErrorInfo),
}

impl CommandOutcome {
    /// The ack, if accepted.
    pub fn ack(&self) -> Option<&Ack> {
        match self {
            CommandOutcome::Accepted(a) => Some(a),
            _ => None,
        }
    }

    /// The rejection, if rejected.
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            CommandOutcome::Rejected(r) => Some(r),
            _ => None,
        }
    }

    /// The answer as the host sent it: `{"result": ...}` or `{"error":
    /// {code, data}}` (the free-text `message` left out). Two answers to
    /// one command id are value-identical exactly when these are equal.
    /// Client-side outcomes ([`ErrorKind::HostLost`]) have none.
    pub fn answer_value(&self) -> Option<Value> {
        match self {
            CommandOutcome::Accepted(a) => Some(json!({"result": a.raw})),
            CommandOutcome::Rejected(r) => Some(json!({"error": {"code": -32030, "data": r.data}})),
            CommandOutcome::Error(e) if e.code != 0 => {
                Some(json!({"error": {"code": e.code, "data": e.data}}))
            }
            CommandOutcome::Error(_) => None,
        }
    }

    /// Whether the request gate may persist this outcome as the request's
    /// final answer. Acks and rejections are what the host itself records
    /// and replays; other errors record nothing at the host (PROTOCOL.md
    /// section 3), so the same command may still succeed when re-sent.
    pub fn is_recorded_by_host(&self) -> bool {
        matches!(
            self,
            CommandOutcome::Accepted(_) | CommandOutcome::Rejected(_)
        )
    }

    /// Rebuilds an outcome from an answer value ([`CommandOutcome::answer_value`]
    /// or a response's `result`/`error`). `None` when the value is neither.
    pub fn from_answer_value(v: &Value) -> Option<CommandOutcome> {
        if let Some(r) = v.get("result") {
            return Some(CommandOutcome::Accepted(Ack::from_result(r.clone())));
        }
        let e = v.get("error")?;
        Some(classify_error(e))
    }
}

/// An accepted command's ack: the fields every ack has, the method's own
/// fields typed, and the raw value (for value-identity checks).
#[derive(Debug, Clone, PartialEq)]
pub struct Ack {
    /// The echoed `commandId` (absent in `session/start` and
    /// `session/resume` acks, whose shape is `{session, viewCursor, ...}`).
    pub command_id: Option<CommandId>,
    /// The method-specific fields.
    pub fields: AckFields,
    /// The `result` object exactly as received.
    pub raw: Value,
}

/// The method-specific part of an ack (PROTOCOL.md 4.1).
#[derive(Debug, Clone, PartialEq)]
pub enum AckFields {
    /// `session/start` or `session/resume`: the session and the cursor the
    /// subscription starts after.
    Session {
        /// The session id.
        session_id: Option<SessionId>,
        /// The view cursor of the ack.
        view_cursor: Option<String>,
    },
    /// `turn/start`: the turn that will run the input.
    TurnStart {
        /// The turn (a fresh or queued submit's own command id; a steered
        /// submit's running turn).
        turn_id: TurnId,
        /// True iff a new turn started now.
        started_new_turn: bool,
        /// `started`, `queued` or `steered` (an open vocabulary).
        disposition: String,
    },
    /// `turn/steer`, `turn/unqueue`, `turn/interrupt`, `turn/cancel`.
    Turn {
        /// The targeted turn.
        turn_id: TurnId,
    },
    /// `task/stop`.
    Task {
        /// The targeted task.
        task_id: TaskId,
    },
    /// `approval/decide`.
    Approval {
        /// The decided approval.
        approval_id: ApprovalId,
    },
    /// `state/update`: the revision the write produced.
    StateUpdate {
        /// The new revision.
        revision: u64,
    },
    /// An ack with no method-specific fields (`task/stopAll`) or fields
    /// this SDK does not type.
    Plain,
}

impl Ack {
    /// Types a `result` object.
    pub fn from_result(raw: Value) -> Ack {
        let s = |k: &str| raw.get(k).and_then(Value::as_str).map(str::to_string);
        let command_id = s("commandId").and_then(|c| CommandId::parse(&c).ok());
        let fields = if raw.get("session").is_some() {
            AckFields::Session {
                session_id: raw["session"]["sessionId"]
                    .as_str()
                    .and_then(|x| SessionId::parse(x).ok()),
                view_cursor: s("viewCursor"),
            }
        } else if let (Some(t), Some(d)) = (s("turnId"), s("disposition")) {
            match TurnId::new(t) {
                Ok(turn_id) => AckFields::TurnStart {
                    turn_id,
                    started_new_turn: raw["startedNewTurn"].as_bool().unwrap_or(false),
                    disposition: d,
                },
                Err(_) => AckFields::Plain,
            }
        } else if let Some(t) = s("turnId").and_then(|t| TurnId::new(t).ok()) {
            AckFields::Turn { turn_id: t }
        } else if let Some(t) = s("taskId").and_then(|t| TaskId::new(t).ok()) {
            AckFields::Task { task_id: t }
        } else if let Some(a) = s("approvalId").and_then(|a| ApprovalId::new(a).ok()) {
            AckFields::Approval { approval_id: a }
        } else if let Some(r) = raw.get("revision").and_then(Value::as_u64) {
            AckFields::StateUpdate { revision: r }
        } else {
            AckFields::Plain
        };
        Ack {
            command_id,
            fields,
            raw,
        }
    }

    /// The turn this ack names, for `turn/*` acks.
    pub fn turn_id(&self) -> Option<&TurnId> {
        match &self.fields {
            AckFields::TurnStart { turn_id, .. } | AckFields::Turn { turn_id } => Some(turn_id),
            _ => None,
        }
    }

    /// The session of a `session/start` or `session/resume` ack.
    pub fn session_id(&self) -> Option<&SessionId> {
        match &self.fields {
            AckFields::Session { session_id, .. } => session_id.as_ref(),
            _ => None,
        }
    }
}

/// A `commandRejected` refusal.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// The stable reason.
    pub reason: RejectReason,
    /// `data.currentRevision` of a `stale_revision` rejection: the revision
    /// a reconciling writer should read and decide against.
    pub current_revision: Option<u64>,
    /// The host's free text (for logs; never compared).
    pub message: String,
    /// `error.data` as received.
    pub data: Value,
}

/// The `commandRejected` reasons of PROTOCOL.md section 3. Every reason is
/// terminal; one this SDK does not know is [`RejectReason::Other`], also
/// terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RejectReason {
    /// The same command id arrived with another payload: a client bug.
    CommandIdConflict,
    /// The intake never settled before its host died. Observed from the
    /// host (a replay answers it), never invented by the client.
    Abandoned,
    /// `session/start` named an existing session.
    SessionIdConflict,
    /// A fresh turn's launch failed.
    LaunchFailed,
    /// A queued turn's launch failed.
    DeferredStartFailed,
    /// The target turn already launched (unqueue).
    AlreadyLaunched,
    /// The target already ended.
    AlreadyTerminal,
    /// No such turn.
    MissingRun,
    /// No such task.
    MissingTask,
    /// The target turn is queued or not running.
    NotRunning,
    /// Too many queued turns.
    QueueFull,
    /// `expectedRevision` is not the current revision; the write was not
    /// applied. Fetch, reconcile and decide anew (a new command).
    StaleRevision,
    /// A reason this SDK does not know: terminal all the same.
    Other(String),
}

impl RejectReason {
    /// Types a wire reason.
    pub fn parse(s: &str) -> RejectReason {
        match s {
            "command_id_conflict" => RejectReason::CommandIdConflict,
            "abandoned" => RejectReason::Abandoned,
            "session_id_conflict" => RejectReason::SessionIdConflict,
            "launch_failed" => RejectReason::LaunchFailed,
            "deferred_start_failed" => RejectReason::DeferredStartFailed,
            "already_launched" => RejectReason::AlreadyLaunched,
            "already_terminal" => RejectReason::AlreadyTerminal,
            "missing_run" => RejectReason::MissingRun,
            "missing_task" => RejectReason::MissingTask,
            "not_running" => RejectReason::NotRunning,
            "queue_full" => RejectReason::QueueFull,
            "stale_revision" => RejectReason::StaleRevision,
            other => RejectReason::Other(other.to_string()),
        }
    }

    /// The wire spelling.
    pub fn as_str(&self) -> &str {
        match self {
            RejectReason::CommandIdConflict => "command_id_conflict",
            RejectReason::Abandoned => "abandoned",
            RejectReason::SessionIdConflict => "session_id_conflict",
            RejectReason::LaunchFailed => "launch_failed",
            RejectReason::DeferredStartFailed => "deferred_start_failed",
            RejectReason::AlreadyLaunched => "already_launched",
            RejectReason::AlreadyTerminal => "already_terminal",
            RejectReason::MissingRun => "missing_run",
            RejectReason::MissingTask => "missing_task",
            RejectReason::NotRunning => "not_running",
            RejectReason::QueueFull => "queue_full",
            RejectReason::StaleRevision => "stale_revision",
            RejectReason::Other(s) => s,
        }
    }
}

/// A non-rejection error, typed by `error.data.kind`.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorInfo {
    /// The kind.
    pub kind: ErrorKind,
    /// The JSON-RPC code (0 for client-side errors).
    pub code: i64,
    /// The host's free text, or the client's explanation.
    pub message: String,
    /// `error.data` as received (`null` for client-side errors).
    pub data: Value,
}

/// Error kinds the SDK distinguishes. The ones it handles by itself
/// (`overloaded`, retryable `storageUnavailable`, `sessionNotLoaded` and
/// `sessionInUse` by reloading the session, `notInitialized` by a new
/// handshake) are retried with the same id and reach the application only
/// when it gives up (`sessionInUse` past its limit). An error outcome ends
/// this core's attempts; the host records none of them, so re-submitting
/// the same command id later is safe and may still succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// `-32602 invalidParams`; `field` names the member.
    InvalidParams {
        /// `data.field` (ext).
        field: Option<String>,
    },
    /// `-32601 methodNotFound`.
    MethodNotFound,
    /// `-32600 invalidRequest` (including `notInitialized`).
    InvalidRequest,
    /// `-32020 sessionNotFound`.
    SessionNotFound,
    /// `-32021 sessionInUse`: another process holds the lease.
    SessionInUse,
    /// `-32024 sessionNotLoaded`.
    SessionNotLoaded,
    /// `-32011 notFound` (`missingAnchor`: a cursor never issued).
    NotFound,
    /// `-32001 overloaded`.
    Overloaded,
    /// `-32603` with `storageUnavailable`: nothing was acked or applied.
    StorageUnavailable,
    /// `-32603` otherwise (`logCorrupt` included).
    Internal,
    /// `-32050..-32053`: the approval errors, by kind.
    Approval(String),
    /// The command was sent to an ephemeral host that is gone: its outcome
    /// is unknown and its id is never replayed at another host
    /// (PROTOCOL.md 4.4). Client-side; `code` is 0.
    HostLost {
        /// Whether the command ever left the client (if not, it certainly
        /// had no effect).
        ever_sent: bool,
    },
    /// The application stopped waiting ([`super::core::ClientCore::forget`]);
    /// the outcome is unknown. Client-side; `code` is 0.
    Forgotten,
    /// Any other kind.
    Other(String),
}

impl ErrorKind {
    /// True for the errors worth re-sending with the same id: the error
    /// table's retryable default for the code, overridden by
    /// `data.retryable` when present (PROTOCOL.md section 3).
    pub fn retryable_by_table(code: i64, data: &Value) -> bool {
        match data.get("retryable").and_then(Value::as_bool) {
            Some(b) => b,
            None => matches!(code, -32001 | -32031),
        }
    }
}

/// Types an `error` object: a `commandRejected` becomes a [`Rejection`],
/// anything else an [`ErrorInfo`].
pub fn classify_error(e: &Value) -> CommandOutcome {
    let code = e.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let data = e.get("data").cloned().unwrap_or(Value::Null);
    let kind_s = data.get("kind").and_then(Value::as_str).unwrap_or_default();
    let reason = data.get("reason").and_then(Value::as_str);
    if code == -32030 || kind_s == "commandRejected" {
        return CommandOutcome::Rejected(Rejection {
            reason: RejectReason::parse(reason.unwrap_or("")),
            current_revision: data.get("currentRevision").and_then(Value::as_u64),
            message,
            data,
        });
    }
    let kind = match (code, kind_s) {
        (-32602, _) => ErrorKind::InvalidParams {
            field: data
                .get("field")
                .and_then(Value::as_str)
                .map(str::to_string),
        },
        (-32601, _) => ErrorKind::MethodNotFound,
        (-32600, _) => ErrorKind::InvalidRequest,
        (-32020, _) => ErrorKind::SessionNotFound,
        (-32021, _) => ErrorKind::SessionInUse,
        (-32024, _) => ErrorKind::SessionNotLoaded,
        (-32011, _) => ErrorKind::NotFound,
        (-32001, _) => ErrorKind::Overloaded,
        (-32603, _) if reason == Some("storageUnavailable") => ErrorKind::StorageUnavailable,
        (-32603, _) => ErrorKind::Internal,
        (-32053..=-32050, k) => ErrorKind::Approval(k.to_string()),
        (_, k) => ErrorKind::Other(k.to_string()),
    };
    CommandOutcome::Error(ErrorInfo {
        kind,
        code,
        message,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_reasons_are_terminal_rejections_and_abandoned_is_typed() {
        let e = json!({"code": -32030, "message": "m", "data": {"kind": "commandRejected", "commandId": "c", "reason": "brand_new_reason"}});
        let CommandOutcome::Rejected(r) = classify_error(&e) else {
            panic!("a rejection")
        };
        assert_eq!(r.reason, RejectReason::Other("brand_new_reason".into()));
        let e = json!({"code": -32030, "message": "m", "data": {"kind": "commandRejected", "reason": "abandoned"}});
        assert_eq!(
            classify_error(&e).rejection().map(|r| r.reason.clone()),
            Some(RejectReason::Abandoned)
        );
    }

    #[test]
    fn stale_revision_carries_the_current_revision() {
        let e = json!({"code": -32030, "message": "m", "data": {"kind": "commandRejected", "reason": "stale_revision", "currentRevision": 4}});
        let r = classify_error(&e).rejection().cloned().expect("rejected");
        assert_eq!(r.reason, RejectReason::StaleRevision);
        assert_eq!(r.current_revision, Some(4));
    }

    #[test]
    fn acks_are_typed_per_method() {
        let a = Ack::from_result(
            json!({"commandId": "018f6a1e-9b3c-7c21-a54a-2f30bd3c9f10", "status": "accepted", "turnId": "018f6a1e-9b3c-7c21-a54a-2f30bd3c9f10", "startedNewTurn": false, "disposition": "queued"}),
        );
        assert!(
            matches!(&a.fields, AckFields::TurnStart { started_new_turn: false, disposition, .. } if disposition == "queued")
        );
        assert!(a.command_id.is_some());
        let a = Ack::from_result(json!({"commandId": "x", "status": "accepted", "revision": 2}));
        assert_eq!(a.fields, AckFields::StateUpdate { revision: 2 });
        let a = Ack::from_result(json!({"commandId": "x", "status": "accepted"}));
        assert_eq!(a.fields, AckFields::Plain);
    }

    #[test]
    fn retryable_follows_the_table_and_the_override() {
        assert!(ErrorKind::retryable_by_table(-32001, &json!({})));
        assert!(!ErrorKind::retryable_by_table(-32030, &json!({})));
        assert!(ErrorKind::retryable_by_table(
            -32603,
            &json!({"retryable": true})
        ));
        assert!(!ErrorKind::retryable_by_table(
            -32001,
            &json!({"retryable": false})
        ));
    }

    #[test]
    fn answer_values_round_trip() {
        for v in [
            json!({"result": {"commandId": "x", "status": "accepted", "revision": 1}}),
            json!({"error": {"code": -32030, "data": {"kind": "commandRejected", "reason": "missing_run"}}}),
            json!({"error": {"code": -32024, "data": {"kind": "sessionNotLoaded"}}}),
        ] {
            let o = CommandOutcome::from_answer_value(&v).expect("an answer");
            assert_eq!(o.answer_value(), Some(v));
        }
        assert_eq!(CommandOutcome::from_answer_value(&json!({"x": 1})), None);
    }
}
