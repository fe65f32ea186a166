//! The client side of the wire: what an application asks for
//! ([`CommandSpec`], [`ReadSpec`]) turned into MSP params, client frames
//! built, and server lines classified.
//!
//! This is the client's counterpart of [`crate::proto`]: that module parses
//! what a host receives; this one builds what a client sends and reads what
//! a host answers. Both use [`crate::proto::params`] as the one definition
//! of valid params: a [`WireCommand`] is validated by the same function the
//! host uses, so the SDK never sends a command the host would refuse as
//! malformed.

use serde_json::{json, Map, Value};

use super::ids::{ApprovalId, CommandId, SessionId, TaskId, TurnId};
use crate::proto::params::{self, IfBusy, Parsed};
use crate::proto::RpcError;

/// A state-changing command as the application asks for it. Every variant
/// becomes one MSP command; the SDK adds the `commandId`.
#[derive(Debug, Clone, PartialEq)]
pub enum CommandSpec {
    /// `session/start`: a new session loaded here. Pass a `session_id` to
    /// name it yourself; otherwise the host derives one from the command id.
    SessionStart {
        /// The session id to create, if the application chose one.
        session_id: Option<SessionId>,
        /// The workspace root, if any.
        workspace_root: Option<String>,
    },
    /// `session/resume`: load a stored session here and subscribe. After a
    /// reconnect the SDK resumes its sessions by itself; this is for an
    /// application that opens an existing session.
    SessionResume {
        /// The session.
        session_id: SessionId,
        /// Resume the view after this cursor (a suffix streams), or from a
        /// snapshot when absent.
        cursor: Option<String>,
        /// Without a cursor: ask no history (`excludeItems`), only the
        /// session's metadata; the view then follows from the head. For
        /// an application that sends commands and does not render.
        exclude_items: bool,
    },
    /// `turn/start`: submit text input.
    TurnStart {
        /// The session.
        session_id: SessionId,
        /// The input text (one text part).
        text: String,
        /// What a busy session does with it; absent means the host default
        /// (`queue`).
        if_busy: Option<IfBusy>,
    },
    /// `turn/steer`: add input to the running turn the caller believes runs.
    TurnSteer {
        /// The session.
        session_id: SessionId,
        /// The turn the caller believes is running.
        expected_turn_id: TurnId,
        /// The input text.
        text: String,
    },
    /// `turn/unqueue`: reclaim a queued turn.
    TurnUnqueue {
        /// The session.
        session_id: SessionId,
        /// The queued turn.
        turn_id: TurnId,
    },
    /// `turn/interrupt`. Without a turn id the SDK fills in the turn it
    /// knows is running, so that a replay is target-anchored.
    TurnInterrupt {
        /// The session.
        session_id: SessionId,
        /// The turn to stop.
        turn_id: Option<TurnId>,
    },
    /// `turn/cancel`; as [`CommandSpec::TurnInterrupt`].
    TurnCancel {
        /// The session.
        session_id: SessionId,
        /// The turn to stop.
        turn_id: Option<TurnId>,
    },
    /// `task/stop`.
    TaskStop {
        /// The session.
        session_id: SessionId,
        /// The task.
        task_id: TaskId,
    },
    /// `task/stopAll`: target-less, so after a host restart a replay is
    /// resolved afresh (PROTOCOL.md 4.4); prefer `TaskStop` per task.
    TaskStopAll {
        /// The session.
        session_id: SessionId,
    },
    /// `approval/decide`.
    ApprovalDecide {
        /// The session.
        session_id: SessionId,
        /// The approval.
        approval_id: ApprovalId,
        /// `requirementId.sourceIndex` of the requirement being answered.
        source_index: u64,
        /// The chosen `choiceId` (`"approve"`, `"deny"`).
        choice_id: String,
    },
    /// `state/update` (ext): an optimistic write. Rejected `stale_revision`
    /// (with the current revision) when `expected_revision` is not current.
    StateUpdate {
        /// The session.
        session_id: SessionId,
        /// The revision the writer's decision was based on.
        expected_revision: u64,
        /// Shallow merge into the session's `kv`; `null` deletes a key.
        set: Map<String, Value>,
    },
}

impl CommandSpec {
    /// The method and params (without `commandId`) of this command.
    pub fn to_wire(&self) -> WireCommand {
        let (method, params) = match self {
            CommandSpec::SessionStart {
                session_id,
                workspace_root,
            } => {
                let mut p = Map::new();
                if let Some(s) = session_id {
                    p.insert("sessionId".into(), json!(s.as_str()));
                }
                if let Some(w) = workspace_root {
                    p.insert("workspaceRoot".into(), json!(w));
                }
                ("session/start", p)
            }
            CommandSpec::SessionResume {
                session_id,
                cursor,
                exclude_items,
            } => {
                let mut p = session(session_id);
                if let Some(c) = cursor {
                    p.insert("cursor".into(), json!(c));
                }
                if *exclude_items {
                    p.insert("excludeItems".into(), json!(true));
                }
                ("session/resume", p)
            }
            CommandSpec::TurnStart {
                session_id,
                text,
                if_busy,
            } => {
                let mut p = session(session_id);
                p.insert("input".into(), text_input(text));
                if let Some(b) = if_busy {
                    p.insert("ifBusy".into(), json!(b.as_str()));
                }
                ("turn/start", p)
            }
            CommandSpec::TurnSteer {
                session_id,
                expected_turn_id,
                text,
            } => {
                let mut p = session(session_id);
                p.insert("expectedTurnId".into(), json!(expected_turn_id.as_str()));
                p.insert("input".into(), text_input(text));
                ("turn/steer", p)
            }
            CommandSpec::TurnUnqueue {
                session_id,
                turn_id,
            } => {
                let mut p = session(session_id);
                p.insert("turnId".into(), json!(turn_id.as_str()));
                ("turn/unqueue", p)
            }
            CommandSpec::TurnInterrupt {
                session_id,
                turn_id,
            }
            | CommandSpec::TurnCancel {
                session_id,
                turn_id,
            } => {
                let mut p = session(session_id);
                if let Some(t) = turn_id {
                    p.insert("turnId".into(), json!(t.as_str()));
                }
                let m = if matches!(self, CommandSpec::TurnInterrupt { .. }) {
                    "turn/interrupt"
                } else {
                    "turn/cancel"
                };
                (m, p)
            }
            CommandSpec::TaskStop {
                session_id,
                task_id,
            } => {
                let mut p = session(session_id);
                p.insert("taskId".into(), json!(task_id.as_str()));
                ("task/stop", p)
            }
            CommandSpec::TaskStopAll { session_id } => ("task/stopAll", session(session_id)),
            CommandSpec::ApprovalDecide {
                session_id,
                approval_id,
                source_index,
                choice_id,
            } => {
                let mut p = session(session_id);
                p.insert("approvalId".into(), json!(approval_id.as_str()));
                p.insert(
                    "requirementId".into(),
                    json!({"approvalId": approval_id.as_str(), "sourceIndex": source_index}),
                );
                p.insert("choiceId".into(), json!(choice_id));
                ("approval/decide", p)
            }
            CommandSpec::StateUpdate {
                session_id,
                expected_revision,
                set,
            } => {
                let mut p = session(session_id);
                p.insert("expectedRevision".into(), json!(expected_revision));
                p.insert("set".into(), Value::Object(set.clone()));
                ("state/update", p)
            }
        };
        WireCommand {
            method: method.to_string(),
            params,
        }
    }
}

fn session(s: &SessionId) -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("sessionId".into(), json!(s.as_str()));
    p
}

fn text_input(text: &str) -> Value {
    json!([{"type": "text", "text": text}])
}

/// A command as it goes on the wire: the method and its params without
/// `commandId`. This is what the request gate persists, so that a restarted
/// or racing application instance re-sends exactly the same payload under
/// the same command id (the host compares payload signatures).
#[derive(Debug, Clone, PartialEq)]
pub struct WireCommand {
    /// The MSP method.
    pub method: String,
    /// The params, `commandId` excluded.
    pub params: Map<String, Value>,
}

impl WireCommand {
    /// Validates a stored method and params with the host's own params
    /// rules ([`crate::proto::params::parse_request`]).
    pub fn parse(method: &str, params: Map<String, Value>) -> Result<WireCommand, RpcError> {
        if !params::COMMAND_METHODS.contains(&method) {
            return Err(RpcError::method_not_found(method));
        }
        if params.contains_key("commandId") {
            return Err(RpcError::invalid_params(
                "commandId",
                "a stored command carries no commandId",
            ));
        }
        let mut probe = params.clone();
        // Any valid UUIDv7 lets the params rules run; it is never sent.
        probe.insert(
            "commandId".into(),
            json!("017f22e2-79b0-7cc3-98c4-dc0c0c07398f"),
        );
        match params::parse_request(method, &probe)? {
            Parsed::Command(_) => Ok(WireCommand {
                method: method.to_string(),
                params,
            }),
            _ => Err(RpcError::method_not_found(method)),
        }
    }

    /// The session the command targets, if it names one.
    pub fn session_id(&self) -> Option<SessionId> {
        self.params
            .get("sessionId")
            .and_then(Value::as_str)
            .and_then(|s| SessionId::parse(s).ok())
    }

    /// The params with `commandId` added, as sent.
    pub fn params_with_id(&self, id: &CommandId) -> Map<String, Value> {
        let mut p = self.params.clone();
        p.insert("commandId".into(), json!(id.as_str()));
        p
    }

    /// Whether the host dedupes this command only for its own lifetime
    /// (the carrier-less rows of PROTOCOL.md 4.4).
    pub fn is_carrier_less(&self) -> bool {
        matches!(
            self.method.as_str(),
            "turn/interrupt" | "turn/cancel" | "task/stop" | "task/stopAll"
        )
    }

    /// The RFC 8785 canonical form of method and params: two commands with
    /// the same signature are the same payload.
    pub fn signature(&self) -> String {
        crate::proto::canonical::signature(&self.method, &Value::Object(self.params.clone()))
    }
}

impl From<&CommandSpec> for WireCommand {
    fn from(s: &CommandSpec) -> WireCommand {
        s.to_wire()
    }
}

impl From<CommandSpec> for WireCommand {
    fn from(s: CommandSpec) -> WireCommand {
        s.to_wire()
    }
}

/// A read (no `commandId`, never recorded): safe to re-send after a
/// reconnect.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadSpec {
    /// `session/read`: the session and a snapshot of its view (revision and
    /// `kv` included), folded from the log; no lease taken.
    SessionRead {
        /// The session.
        session_id: SessionId,
    },
    /// `session/read` with `excludeItems: true`: the session object, its
    /// head cursor and pending requests, no snapshot (cheap on a long
    /// session; page its history with [`ReadSpec::ViewPage`]).
    SessionMeta {
        /// The session.
        session_id: SessionId,
    },
    /// `view/page`: durable events, oldest first.
    ViewPage {
        /// The session.
        session_id: SessionId,
        /// 1..=1000.
        limit: u32,
        /// Exclusive cursor.
        cursor: Option<String>,
        /// Page backward from `cursor` (or the head).
        backward: bool,
    },
    /// `view/subscribe`: stream events after `after`.
    Subscribe {
        /// The session.
        session_id: SessionId,
        /// Replay events after this cursor.
        after: Option<String>,
    },
    /// `approval/listPending`.
    ListPending {
        /// The session.
        session_id: SessionId,
    },
}

impl ReadSpec {
    /// Method and params.
    pub fn to_wire(&self) -> (&'static str, Map<String, Value>) {
        match self {
            ReadSpec::SessionRead { session_id } => ("session/read", session(session_id)),
            ReadSpec::SessionMeta { session_id } => {
                let mut p = session(session_id);
                p.insert("excludeItems".into(), json!(true));
                ("session/read", p)
            }
            ReadSpec::ViewPage {
                session_id,
                limit,
                cursor,
                backward,
            } => {
                let mut p = session(session_id);
                p.insert("limit".into(), json!(limit));
                if let Some(c) = cursor {
                    p.insert("cursor".into(), json!(c));
                }
                if *backward {
                    p.insert("direction".into(), json!("backward"));
                }
                ("view/page", p)
            }
            ReadSpec::Subscribe { session_id, after } => {
                let mut p = session(session_id);
                if let Some(a) = after {
                    p.insert("after".into(), json!(a));
                }
                ("view/subscribe", p)
            }
            ReadSpec::ListPending { session_id } => ("approval/listPending", session(session_id)),
        }
    }

    /// The target session.
    pub fn session_id(&self) -> &SessionId {
        match self {
            ReadSpec::SessionRead { session_id }
            | ReadSpec::SessionMeta { session_id }
            | ReadSpec::ViewPage { session_id, .. }
            | ReadSpec::Subscribe { session_id, .. }
            | ReadSpec::ListPending { session_id } => session_id,
        }
    }
}

/// A client request line (with `\n`).
pub(crate) fn request_line(id: u64, method: &str, params: &Map<String, Value>) -> Vec<u8> {
    request_line_of(id, method, params)
}

/// A command's request line (with `\n`): `params` with `commandId` set to
/// `command_id`, written without copying the params first (the bytes of
/// [`WireCommand::params_with_id`] as [`request_line`] writes them).
pub(crate) fn command_line(
    id: u64,
    method: &str,
    params: &Map<String, Value>,
    command_id: &CommandId,
) -> Vec<u8> {
    request_line_of(
        id,
        method,
        &WithCommandId {
            params,
            command_id: command_id.as_str(),
        },
    )
}

/// A request line written straight from its parts: the members in the
/// order a `Value` object (sorted keys) writes them, so the bytes are
/// those of the tree `json!` would build, without building it.
fn request_line_of<P: serde::Serialize + ?Sized>(id: u64, method: &str, params: &P) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Request<'a, P: ?Sized> {
        id: u64,
        jsonrpc: &'static str,
        method: &'a str,
        params: &'a P,
    }
    let mut out = serde_json::to_vec(&Request {
        id,
        jsonrpc: "2.0",
        method,
        params,
    })
    .expect("a request always serialises");
    debug_assert!(!out.contains(&b'\n'));
    out.push(b'\n');
    out
}

/// `params` with `commandId` set, written as the sorted map
/// [`WireCommand::params_with_id`] returns (a `commandId` already in
/// `params` is replaced, as an insert would).
struct WithCommandId<'a> {
    params: &'a Map<String, Value>,
    command_id: &'a str,
}

impl serde::Serialize for WithCommandId<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        const KEY: &str = "commandId";
        let mut m = s.serialize_map(None)?;
        let mut written = false;
        for (k, v) in self.params {
            if !written && k.as_str() >= KEY {
                m.serialize_entry(KEY, self.command_id)?;
                written = true;
            }
            if k != KEY {
                m.serialize_entry(k, v)?;
            }
        }
        if !written {
            m.serialize_entry(KEY, self.command_id)?;
        }
        m.end()
    }
}

/// The `initialized` notification line.
pub(crate) fn initialized_line() -> Vec<u8> {
    line(&json!({"jsonrpc": "2.0", "method": "initialized"}))
}

/// The `{}` answer to a server request (`approval/request`).
pub(crate) fn receipt_line(id: &Value) -> Vec<u8> {
    crate::proto::envelope::response_line(id, &json!({}))
}

fn line(v: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec(v).expect("a Value always serialises");
    debug_assert!(!out.contains(&b'\n'));
    out.push(b'\n');
    out
}

/// One line from the host, classified.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ServerFrame {
    /// An answer to one of our requests: `result` or `error`.
    Response {
        /// Our request id as echoed.
        id: Value,
        /// `Ok(result)` or `Err(error object)`.
        answer: Result<Value, Value>,
    },
    /// A request from the host (`approval/request`): answered `{}`.
    Request {
        /// The host's request id.
        id: Value,
        /// The method.
        method: String,
        /// The params.
        params: Value,
    },
    /// A notification.
    Notification {
        /// The method.
        method: String,
        /// The params.
        params: Value,
    },
}

/// Why a server line could not be classified. The client skips such a line
/// (and reports it as an event); it never panics on host input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadFrame {
    /// What was wrong.
    pub detail: String,
}

/// Classifies one server line (without its `\n`).
pub(crate) fn parse_server_line(line: &[u8]) -> Result<ServerFrame, BadFrame> {
    let bad = |d: String| Err(BadFrame { detail: d });
    // Checked as UTF-8 once, whole, then read from a `str`: from bytes,
    // serde_json checks each string again as it reads it (issue 10). Not
    // UTF-8: the bytes' own error, as before.
    let parsed = match std::str::from_utf8(line) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(line),
    };
    let v: Value = match parsed {
        Ok(v) => v,
        Err(e) => return bad(format!("not JSON: {e}")),
    };
    let Value::Object(mut o) = v else {
        return bad("a frame must be a JSON object".into());
    };
    classify(
        o.remove("id"),
        o.remove("method"),
        o.remove("params"),
        o.remove("result"),
        o.remove("error"),
    )
}

/// Classifies a frame by its members (each `None` when absent): the one
/// definition both line readers share ([`parse_server_line`] and the fast
/// path in `frame`).
pub(crate) fn classify(
    id: Option<Value>,
    method: Option<Value>,
    params: Option<Value>,
    result: Option<Value>,
    error: Option<Value>,
) -> Result<ServerFrame, BadFrame> {
    let bad = |d: String| Err(BadFrame { detail: d });
    match (method, id) {
        (Some(Value::String(method)), Some(id)) => Ok(ServerFrame::Request {
            id,
            method,
            params: params.unwrap_or(Value::Null),
        }),
        (Some(Value::String(method)), None) => Ok(ServerFrame::Notification {
            method,
            params: params.unwrap_or(Value::Null),
        }),
        (Some(_), _) => bad("method must be a string".into()),
        (None, Some(id)) => match (result, error) {
            (Some(r), None) => Ok(ServerFrame::Response { id, answer: Ok(r) }),
            (None, Some(e)) => Ok(ServerFrame::Response { id, answer: Err(e) }),
            _ => bad("a response needs exactly one of result and error".into()),
        },
        (None, None) => bad("neither a request, a response nor a notification".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SID: &str = "0198f0aa-1111-7000-8000-0000000000aa";

    #[test]
    fn every_spec_passes_the_hosts_params_rules() {
        let sid = SessionId::parse(SID).expect("sid");
        let t = TurnId::new("018f6a1e-9b3c-7c21-a54a-2f30bd3c9f10").expect("t");
        let specs = [
            CommandSpec::SessionStart {
                session_id: None,
                workspace_root: Some("/w".into()),
            },
            CommandSpec::SessionResume {
                session_id: sid.clone(),
                cursor: Some("v:x:1".into()),
                exclude_items: false,
            },
            CommandSpec::SessionResume {
                session_id: sid.clone(),
                cursor: None,
                exclude_items: true,
            },
            CommandSpec::TurnStart {
                session_id: sid.clone(),
                text: "hi".into(),
                if_busy: Some(IfBusy::Steer),
            },
            CommandSpec::TurnSteer {
                session_id: sid.clone(),
                expected_turn_id: t.clone(),
                text: "more".into(),
            },
            CommandSpec::TurnUnqueue {
                session_id: sid.clone(),
                turn_id: t.clone(),
            },
            CommandSpec::TurnInterrupt {
                session_id: sid.clone(),
                turn_id: Some(t.clone()),
            },
            CommandSpec::TurnCancel {
                session_id: sid.clone(),
                turn_id: None,
            },
            CommandSpec::TaskStop {
                session_id: sid.clone(),
                task_id: TaskId::new("task").expect("task"),
            },
            CommandSpec::TaskStopAll {
                session_id: sid.clone(),
            },
            CommandSpec::ApprovalDecide {
                session_id: sid.clone(),
                approval_id: ApprovalId::new("a").expect("a"),
                source_index: 0,
                choice_id: "approve".into(),
            },
            CommandSpec::StateUpdate {
                session_id: sid,
                expected_revision: 3,
                set: Map::new(),
            },
        ];
        for s in specs {
            let w = s.to_wire();
            let back = WireCommand::parse(&w.method, w.params.clone());
            assert_eq!(back, Ok(w.clone()), "{s:?}");
        }
    }

    #[test]
    fn a_resume_asks_exclude_items_only_when_told() {
        let sid = SessionId::parse(SID).expect("sid");
        let resume = |exclude_items| CommandSpec::SessionResume {
            session_id: sid.clone(),
            cursor: None,
            exclude_items,
        };
        let w = resume(true).to_wire();
        assert_eq!(w.method, "session/resume");
        assert_eq!(
            Value::Object(w.params),
            json!({"sessionId": SID, "excludeItems": true})
        );
        let w = resume(false).to_wire();
        assert_eq!(Value::Object(w.params), json!({"sessionId": SID}));
    }

    #[test]
    fn a_metadata_read_is_a_session_read_asking_exclude_items() {
        let sid = SessionId::parse(SID).expect("sid");
        let meta = ReadSpec::SessionMeta {
            session_id: sid.clone(),
        };
        let (method, p) = meta.to_wire();
        assert_eq!(method, "session/read");
        assert_eq!(
            Value::Object(p),
            json!({"sessionId": SID, "excludeItems": true})
        );
        assert_eq!(meta.session_id(), &sid);
        let (_, p) = ReadSpec::SessionRead { session_id: sid }.to_wire();
        assert!(
            !p.contains_key("excludeItems"),
            "the snapshot read asks none"
        );
    }

    #[test]
    fn bad_stored_commands_are_typed_errors() {
        let e = WireCommand::parse("turn/start", Map::new()).unwrap_err();
        assert_eq!(e.code, -32602);
        let e = WireCommand::parse("view/page", Map::new()).unwrap_err();
        assert_eq!(e.code, -32601);
        let mut p = Map::new();
        p.insert("commandId".into(), json!("x"));
        assert_eq!(
            WireCommand::parse("task/stopAll", p).unwrap_err().data["field"],
            json!("commandId")
        );
    }

    #[test]
    fn request_lines_are_the_bytes_of_the_tree_they_replace() {
        let cid = CommandId::parse("017f22e2-79b0-7cc3-98c4-dc0c0c07398f").expect("id");
        let tree = |id: u64, method: &str, params: &Map<String, Value>| {
            line(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        };
        let mut cases: Vec<Map<String, Value>> = vec![Map::new()];
        for keys in [
            &["sessionId"][..],
            &["approvalId", "choiceId", "requirementId", "sessionId"],
            &["a", "commandI", "commandIdx", "cursor", "\u{e9}", "Z"],
            &["commandId", "sessionId"],
            &["b", "commandId"],
            &["commandId"],
            &["aaa"],
        ] {
            let mut p = Map::new();
            for (n, k) in keys.iter().enumerate() {
                let v = match n % 3 {
                    0 => json!(format!("v\"{n}\n\u{1F600}")),
                    1 => json!({"x": [1, -2, 2.5, null, true], "y": {}}),
                    _ => json!(u64::MAX),
                };
                p.insert((*k).to_string(), v);
            }
            cases.push(p);
        }
        for p in cases {
            for (id, method) in [(0, "turn/start"), (u64::MAX, "m\u{e9}\"")] {
                assert_eq!(request_line(id, method, &p), tree(id, method, &p));
                let w = WireCommand {
                    method: method.to_string(),
                    params: p.clone(),
                };
                assert_eq!(
                    command_line(id, method, &p, &cid),
                    tree(id, method, &w.params_with_id(&cid)),
                    "{p:?}"
                );
            }
        }
    }

    #[test]
    fn server_lines_classified_and_garbage_refused() {
        assert!(matches!(
            parse_server_line(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Ok(ServerFrame::Response { answer: Ok(_), .. })
        ));
        assert!(matches!(
            parse_server_line(br#"{"jsonrpc":"2.0","id":"b9","error":{"code":-32030}}"#),
            Ok(ServerFrame::Response { answer: Err(_), .. })
        ));
        assert!(matches!(
            parse_server_line(
                br#"{"jsonrpc":"2.0","id":7,"method":"approval/request","params":{}}"#
            ),
            Ok(ServerFrame::Request { .. })
        ));
        assert!(matches!(
            parse_server_line(br#"{"jsonrpc":"2.0","method":"turn/started","params":{}}"#),
            Ok(ServerFrame::Notification { .. })
        ));
        for bad in [
            &b"nope"[..],
            b"[]",
            b"{}",
            br#"{"id":1}"#,
            br#"{"method":3}"#,
        ] {
            assert!(parse_server_line(bad).is_err(), "{:?}", bad);
        }
    }
}
