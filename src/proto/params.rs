//! Typed params of every method, validated field by field.
//!
//! Each command's params are also *normalised*: defaults applied, unknown
//! members dropped, `commandId` removed. The normalised value is what the
//! payload signature is computed over (PROTOCOL.md 4.4), and what the log
//! stores, so a replayed command can be re-read from its intake record.

use serde_json::{json, Map, Value};

use super::ids::{is_hyphenated_uuid, is_uuid_v7};
use super::RpcError;

/// How a busy session takes a new `turn/start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfBusy {
    /// Queue behind the running turn (the default).
    Queue,
    /// Add the input to the running turn.
    Steer,
    /// Cancel the running turn and start this one ahead of the queue.
    Replace,
}

impl IfBusy {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            IfBusy::Queue => "queue",
            IfBusy::Steer => "steer",
            IfBusy::Replace => "replace",
        }
    }
}

/// A validated command: its method-specific params.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `session/start`.
    SessionStart {
        /// Requested session id (lowercase), if any.
        session_id: Option<String>,
        /// The workspace root, if any.
        workspace_root: Option<String>,
    },
    /// `session/resume`.
    SessionResume {
        /// The session.
        session_id: String,
        /// Resume after this cursor, if given.
        cursor: Option<String>,
        /// `excludeItems: true`: serve no history (`mode: "none"`,
        /// `noneReason: "excluded"`) unless a cursor makes it moot.
        exclude_items: bool,
    },
    /// `turn/start`.
    TurnStart {
        /// The session.
        session_id: String,
        /// The input text (text parts joined by `\n`).
        text: String,
        /// Busy policy.
        if_busy: IfBusy,
    },
    /// `turn/steer`.
    TurnSteer {
        /// The session.
        session_id: String,
        /// The turn the client believes is running.
        expected_turn_id: String,
        /// The input text.
        text: String,
    },
    /// `turn/unqueue`.
    TurnUnqueue {
        /// The session.
        session_id: String,
        /// The queued turn to reclaim.
        turn_id: String,
    },
    /// `turn/interrupt` or `turn/cancel`.
    TurnStop {
        /// The session.
        session_id: String,
        /// The target turn; `None` means the turn running at admission.
        turn_id: Option<String>,
    },
    /// `task/stop`.
    TaskStop {
        /// The session.
        session_id: String,
        /// The task (its toolCall item id).
        task_id: String,
    },
    /// `task/stopAll`.
    TaskStopAll {
        /// The session.
        session_id: String,
    },
    /// `approval/decide`.
    ApprovalDecide {
        /// The session.
        session_id: String,
        /// The approval.
        approval_id: String,
        /// `requirementId.approvalId`.
        requirement_approval_id: String,
        /// `requirementId.sourceIndex`.
        requirement_source_index: u64,
        /// The chosen choice.
        choice_id: String,
    },
    /// `state/update` (ext).
    StateUpdate {
        /// The session.
        session_id: String,
        /// The revision the writer believed current.
        expected_revision: u64,
        /// Shallow merge into `kv`; `null` deletes.
        set: Map<String, Value>,
    },
}

impl Command {
    /// The session the command targets (`None` for a `session/start`
    /// without `sessionId`).
    pub fn session_id(&self) -> Option<&str> {
        match self {
            Command::SessionStart { session_id, .. } => session_id.as_deref(),
            Command::SessionResume { session_id, .. }
            | Command::TurnStart { session_id, .. }
            | Command::TurnSteer { session_id, .. }
            | Command::TurnUnqueue { session_id, .. }
            | Command::TurnStop { session_id, .. }
            | Command::TaskStop { session_id, .. }
            | Command::TaskStopAll { session_id }
            | Command::ApprovalDecide { session_id, .. }
            | Command::StateUpdate { session_id, .. } => Some(session_id),
        }
    }

    /// Whether the command's outcome is recorded in the session log
    /// (PROTOCOL.md 4.1 "ledger" column). Carrier-less rows are not.
    pub fn is_durable(&self) -> bool {
        !matches!(
            self,
            Command::TurnStop { .. } | Command::TaskStop { .. } | Command::TaskStopAll { .. }
        )
    }
}

/// A validated command with its id and normalised params.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandRequest {
    /// The method name.
    pub method: String,
    /// `commandId` exactly as sent.
    pub command_id: String,
    /// The normalised params (no `commandId`, defaults applied).
    pub normalized: Value,
    /// The typed params.
    pub command: Command,
}

/// A validated read.
#[derive(Debug, Clone, PartialEq)]
pub enum Read {
    /// `view/subscribe`.
    Subscribe {
        /// The session.
        session_id: String,
        /// Replay events after this cursor.
        after: Option<String>,
    },
    /// `view/unsubscribe`.
    Unsubscribe {
        /// The session.
        session_id: String,
    },
    /// `view/page`.
    Page {
        /// The session.
        session_id: String,
        /// 1..=1000.
        limit: usize,
        /// Exclusive cursor.
        cursor: Option<String>,
        /// Backward when true.
        backward: bool,
    },
    /// `session/read`.
    SessionRead {
        /// The session.
        session_id: String,
        /// `excludeItems: true`: metadata only, no snapshot. Absent or
        /// `false`: the snapshot (PROTOCOL.md 4.2; the public schema's
        /// default for an absent member is `true`, see docs/COVERAGE.md).
        exclude_items: bool,
    },
    /// `approval/listPending`.
    ListPending {
        /// The session.
        session_id: String,
    },
}

impl Read {
    /// The target session.
    pub fn session_id(&self) -> &str {
        match self {
            Read::Subscribe { session_id, .. }
            | Read::Unsubscribe { session_id }
            | Read::Page { session_id, .. }
            | Read::SessionRead { session_id, .. }
            | Read::ListPending { session_id } => session_id,
        }
    }
}

/// What a request is, once its method is known and params validated.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// `initialize`.
    Initialize,
    /// A state-changing command.
    Command(CommandRequest),
    /// A read.
    Read(Read),
}

/// Every command method this host implements.
pub const COMMAND_METHODS: &[&str] = &[
    "session/start",
    "session/resume",
    "turn/start",
    "turn/steer",
    "turn/unqueue",
    "turn/interrupt",
    "turn/cancel",
    "task/stop",
    "task/stopAll",
    "approval/decide",
    "state/update",
];

/// Every read method this host implements.
pub const READ_METHODS: &[&str] = &[
    "view/subscribe",
    "view/unsubscribe",
    "view/page",
    "session/read",
    "approval/listPending",
];

/// True when `method` is implemented (the method check of the error
/// precedence comes before the params check).
pub fn is_known_method(method: &str) -> bool {
    method == "initialize" || COMMAND_METHODS.contains(&method) || READ_METHODS.contains(&method)
}

struct P<'a> {
    m: &'a Map<String, Value>,
}

impl<'a> P<'a> {
    fn opt(&self, f: &str) -> Option<&'a Value> {
        match self.m.get(f) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }
    fn opt_str(&self, f: &str) -> Result<Option<&'a str>, RpcError> {
        match self.opt(f) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(RpcError::invalid_params(f, format!("{f} must be a string"))),
        }
    }
    fn opt_bool(&self, f: &str) -> Result<Option<bool>, RpcError> {
        match self.opt(f) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(RpcError::invalid_params(
                f,
                format!("{f} must be a boolean"),
            )),
        }
    }
    fn str(&self, f: &str) -> Result<&'a str, RpcError> {
        self.opt_str(f)?
            .ok_or_else(|| RpcError::invalid_params(f, format!("{f} is required")))
    }
    fn uuid(&self, f: &str) -> Result<String, RpcError> {
        let s = self.str(f)?;
        check_uuid(f, s)
    }
    fn opt_uuid(&self, f: &str) -> Result<Option<String>, RpcError> {
        self.opt_str(f)?.map(|s| check_uuid(f, s)).transpose()
    }
    fn session(&self) -> Result<String, RpcError> {
        self.uuid("sessionId")
    }
}

fn check_uuid(f: &str, s: &str) -> Result<String, RpcError> {
    if is_hyphenated_uuid(s) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err(RpcError::invalid_params(f, format!("{f} must be a UUID")))
    }
}

fn turn_id(p: &P, f: &str) -> Result<String, RpcError> {
    // Turn ids of this host are command ids: UUIDv7. Anything else cannot
    // name a turn and is malformed (PROTOCOL.md section 2).
    let s = p.str(f)?;
    if is_uuid_v7(s) {
        Ok(s.to_string())
    } else {
        Err(RpcError::invalid_params(
            f,
            format!("{f} must be a UUIDv7 turn id"),
        ))
    }
}

fn input_text(p: &P) -> Result<(String, Value), RpcError> {
    let arr = match p.opt("input") {
        Some(Value::Array(a)) => a,
        Some(_) => return Err(RpcError::invalid_params("input", "input must be an array")),
        None => return Err(RpcError::invalid_params("input", "input is required")),
    };
    if arr.is_empty() {
        return Err(RpcError::invalid_params("input", "input must not be empty"));
    }
    let mut texts = Vec::new();
    let mut norm = Vec::new();
    for part in arr {
        let obj = part
            .as_object()
            .ok_or_else(|| RpcError::invalid_params("input", "input parts must be objects"))?;
        match obj.get("type") {
            Some(Value::String(t)) if t == "text" => {}
            Some(Value::String(_)) => {
                return Err(RpcError::invalid_params(
                    "input.type",
                    "only text input parts are supported",
                ))
            }
            _ => return Err(RpcError::invalid_params("input.type", "type is required")),
        }
        let text = match obj.get("text") {
            Some(Value::String(s)) => s,
            _ => {
                return Err(RpcError::invalid_params(
                    "input.text",
                    "text must be a string",
                ))
            }
        };
        texts.push(text.as_str());
        norm.push(json!({"type": "text", "text": text}));
    }
    Ok((texts.join("\n"), Value::Array(norm)))
}

/// Validates a request of a known method.
pub fn parse_request(method: &str, params: &Map<String, Value>) -> Result<Parsed, RpcError> {
    let p = P { m: params };
    if method == "initialize" {
        let ci = match p.opt("clientInfo") {
            Some(Value::Object(o)) => o,
            _ => {
                return Err(RpcError::invalid_params(
                    "clientInfo",
                    "clientInfo is required",
                ))
            }
        };
        let name = match ci.get("name") {
            Some(Value::String(s)) => s,
            _ => {
                return Err(RpcError::invalid_params(
                    "clientInfo.name",
                    "name is required",
                ))
            }
        };
        let ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !ok {
            return Err(RpcError::invalid_params(
                "clientInfo.name",
                "clientInfo.name must match [a-z0-9_]+",
            ));
        }
        if !matches!(ci.get("version"), Some(Value::String(_))) {
            return Err(RpcError::invalid_params(
                "clientInfo.version",
                "version is required",
            ));
        }
        return Ok(Parsed::Initialize);
    }
    if READ_METHODS.contains(&method) {
        return parse_read(method, &p).map(Parsed::Read);
    }
    let command_id = match p.opt("commandId") {
        Some(Value::String(s)) if is_uuid_v7(s) => s.clone(),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "commandId",
                "commandId must be a UUIDv7",
            ))
        }
        None => {
            return Err(RpcError::invalid_params(
                "commandId",
                "commandId is required",
            ))
        }
    };
    let (command, normalized) = parse_command(method, &p)?;
    Ok(Parsed::Command(CommandRequest {
        method: method.to_string(),
        command_id,
        normalized,
        command,
    }))
}

fn parse_read(method: &str, p: &P) -> Result<Read, RpcError> {
    let session_id = p.session()?;
    Ok(match method {
        "view/subscribe" => Read::Subscribe {
            session_id,
            after: p.opt_str("after")?.map(str::to_string),
        },
        "view/unsubscribe" => Read::Unsubscribe { session_id },
        "view/page" => {
            let limit = match p.opt("limit") {
                Some(Value::Number(n)) => n.as_u64().filter(|l| (1..=1000).contains(l)),
                _ => None,
            }
            .ok_or_else(|| {
                RpcError::invalid_params("limit", "limit must be an integer in 1..=1000")
            })?;
            let backward = match p.opt_str("direction")? {
                None | Some("forward") => false,
                Some("backward") => true,
                Some(_) => {
                    return Err(RpcError::invalid_params(
                        "direction",
                        "direction must be forward or backward",
                    ))
                }
            };
            Read::Page {
                session_id,
                limit: limit as usize,
                cursor: p.opt_str("cursor")?.map(str::to_string),
                backward,
            }
        }
        "session/read" => Read::SessionRead {
            session_id,
            exclude_items: p.opt_bool("excludeItems")?.unwrap_or(false),
        },
        "approval/listPending" => Read::ListPending { session_id },
        _ => unreachable!("parse_read called with a read method"),
    })
}

fn parse_command(method: &str, p: &P) -> Result<(Command, Value), RpcError> {
    Ok(match method {
        "session/start" => {
            let session_id = p.opt_uuid("sessionId")?;
            let workspace_root = p.opt_str("workspaceRoot")?.map(str::to_string);
            let norm = json!({"sessionId": session_id, "workspaceRoot": workspace_root});
            (
                Command::SessionStart {
                    session_id,
                    workspace_root,
                },
                norm,
            )
        }
        "session/resume" => {
            let session_id = p.session()?;
            let cursor = p.opt_str("cursor")?.map(str::to_string);
            let exclude_items = p.opt_bool("excludeItems")?.unwrap_or(false);
            let mut norm = json!({"sessionId": session_id, "cursor": cursor});
            // Only when set: the signatures of resumes without it (every
            // log written before it was read) stay what they were.
            if exclude_items {
                norm["excludeItems"] = json!(true);
            }
            (
                Command::SessionResume {
                    session_id,
                    cursor,
                    exclude_items,
                },
                norm,
            )
        }
        "turn/start" => {
            let session_id = p.session()?;
            let (text, input) = input_text(p)?;
            let if_busy = match p.opt_str("ifBusy")? {
                None | Some("queue") => IfBusy::Queue,
                Some("steer") => IfBusy::Steer,
                Some("replace") => IfBusy::Replace,
                Some(_) => {
                    return Err(RpcError::invalid_params(
                        "ifBusy",
                        "ifBusy must be queue, steer or replace",
                    ))
                }
            };
            let norm = json!({"sessionId": session_id, "input": input, "ifBusy": if_busy.as_str()});
            (
                Command::TurnStart {
                    session_id,
                    text,
                    if_busy,
                },
                norm,
            )
        }
        "turn/steer" => {
            let session_id = p.session()?;
            let expected_turn_id = turn_id(p, "expectedTurnId")?;
            let (text, input) = input_text(p)?;
            let norm = json!({"sessionId": session_id, "expectedTurnId": expected_turn_id, "input": input});
            (
                Command::TurnSteer {
                    session_id,
                    expected_turn_id,
                    text,
                },
                norm,
            )
        }
        "turn/unqueue" => {
            let session_id = p.session()?;
            let turn_id = turn_id(p, "turnId")?;
            let norm = json!({"sessionId": session_id, "turnId": turn_id});
            (
                Command::TurnUnqueue {
                    session_id,
                    turn_id,
                },
                norm,
            )
        }
        "turn/interrupt" | "turn/cancel" => {
            let session_id = p.session()?;
            let turn_id = match p.opt("turnId") {
                None => None,
                Some(_) => Some(turn_id(p, "turnId")?),
            };
            match p.opt("retract") {
                None | Some(Value::Bool(false)) => {}
                Some(Value::Bool(true)) => {
                    return Err(RpcError::invalid_params(
                        "retract",
                        "retract is not supported",
                    ))
                }
                Some(_) => {
                    return Err(RpcError::invalid_params(
                        "retract",
                        "retract must be a boolean",
                    ))
                }
            }
            let norm = json!({"sessionId": session_id, "turnId": turn_id});
            (
                Command::TurnStop {
                    session_id,
                    turn_id,
                },
                norm,
            )
        }
        "task/stop" => {
            let session_id = p.session()?;
            let task_id = p.str("taskId")?.to_string();
            let norm = json!({"sessionId": session_id, "taskId": task_id});
            (
                Command::TaskStop {
                    session_id,
                    task_id,
                },
                norm,
            )
        }
        "task/stopAll" => {
            let session_id = p.session()?;
            let norm = json!({"sessionId": session_id});
            (Command::TaskStopAll { session_id }, norm)
        }
        "approval/decide" => {
            let session_id = p.session()?;
            let approval_id = p.str("approvalId")?.to_string();
            let req = match p.opt("requirementId") {
                Some(Value::Object(o)) => o,
                _ => {
                    return Err(RpcError::invalid_params(
                        "requirementId",
                        "requirementId is required",
                    ))
                }
            };
            let requirement_approval_id = match req.get("approvalId") {
                Some(Value::String(s)) => s.clone(),
                _ => {
                    return Err(RpcError::invalid_params(
                        "requirementId.approvalId",
                        "requirementId.approvalId must be a string",
                    ))
                }
            };
            let requirement_source_index = match req.get("sourceIndex").and_then(Value::as_u64) {
                Some(i) => i,
                None => {
                    return Err(RpcError::invalid_params(
                        "requirementId.sourceIndex",
                        "requirementId.sourceIndex must be a non-negative integer",
                    ))
                }
            };
            let choice_id = p.str("choiceId")?.to_string();
            let norm = json!({
                "sessionId": session_id,
                "approvalId": approval_id,
                "requirementId": {"approvalId": requirement_approval_id, "sourceIndex": requirement_source_index},
                "choiceId": choice_id,
            });
            (
                Command::ApprovalDecide {
                    session_id,
                    approval_id,
                    requirement_approval_id,
                    requirement_source_index,
                    choice_id,
                },
                norm,
            )
        }
        "state/update" => {
            let session_id = p.session()?;
            let expected_revision = match p.opt("expectedRevision") {
                Some(Value::Number(n)) => n.as_u64(),
                _ => None,
            }
            .ok_or_else(|| {
                RpcError::invalid_params(
                    "expectedRevision",
                    "expectedRevision must be a non-negative integer",
                )
            })?;
            let set = match p.opt("set") {
                Some(Value::Object(o)) => o.clone(),
                _ => return Err(RpcError::invalid_params("set", "set must be an object")),
            };
            let norm =
                json!({"sessionId": session_id, "expectedRevision": expected_revision, "set": set});
            (
                Command::StateUpdate {
                    session_id,
                    expected_revision,
                    set,
                },
                norm,
            )
        }
        _ => unreachable!("parse_command called with a command method"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }
    const CID: &str = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f";
    const SID: &str = "0198f0aa-1111-7000-8000-0000000000aa";

    fn field(method: &str, v: Value) -> String {
        let e = parse_request(method, &params(v)).unwrap_err();
        assert_eq!(e.code, -32602);
        e.data["field"].as_str().unwrap().to_string()
    }

    #[test]
    fn command_id_required_and_v7() {
        assert_eq!(field("turn/cancel", json!({"sessionId": SID})), "commandId");
        assert_eq!(
            field(
                "turn/cancel",
                json!({"sessionId": SID, "commandId": "017f22e2-79b0-4cc3-98c4-dc0c0c07398f"})
            ),
            "commandId"
        );
    }

    #[test]
    fn defaults_applied_and_unknown_members_dropped() {
        let a = parse_request(
            "turn/start",
            &params(json!({"sessionId": SID, "commandId": CID, "input": [{"type":"text","text":"hi"}], "futureOptionalField": 1})),
        )
        .unwrap();
        let b = parse_request(
            "turn/start",
            &params(json!({"sessionId": SID, "commandId": CID, "input": [{"type":"text","text":"hi","x":2}], "ifBusy": "queue"})),
        )
        .unwrap();
        let (Parsed::Command(a), Parsed::Command(b)) = (a, b) else {
            panic!("commands expected")
        };
        assert_eq!(a.normalized, b.normalized);
        assert!(a.normalized.get("commandId").is_none());
    }

    #[test]
    fn field_errors() {
        assert_eq!(
            field(
                "turn/start",
                json!({"sessionId": SID, "commandId": CID, "input": []})
            ),
            "input"
        );
        assert_eq!(
            field(
                "turn/start",
                json!({"sessionId": "nope", "commandId": CID, "input": [{"type":"text","text":"x"}]})
            ),
            "sessionId"
        );
        assert_eq!(
            field(
                "turn/cancel",
                json!({"sessionId": SID, "commandId": CID, "retract": true})
            ),
            "retract"
        );
        assert_eq!(
            field(
                "turn/steer",
                json!({"sessionId": SID, "commandId": CID, "expectedTurnId": "x", "input": [{"type":"text","text":"x"}]})
            ),
            "expectedTurnId"
        );
        assert_eq!(
            field(
                "state/update",
                json!({"sessionId": SID, "commandId": CID, "expectedRevision": -1, "set": {}})
            ),
            "expectedRevision"
        );
        assert_eq!(
            field(
                "state/update",
                json!({"sessionId": SID, "commandId": CID, "expectedRevision": 1e300, "set": {}})
            ),
            "expectedRevision"
        );
        assert_eq!(
            field("view/page", json!({"sessionId": SID, "limit": 0})),
            "limit"
        );
        assert_eq!(
            field(
                "initialize",
                json!({"clientInfo": {"name": "bad-name", "version": "1"}})
            ),
            "clientInfo.name"
        );
    }
}
