//! Typed public MSP notifications, and the client's own events.
//!
//! Every notification the host may send is typed here as far as the SDK
//! relies on it; the params are kept raw too, so nothing the host says is
//! lost, and a method this SDK does not know arrives as
//! [`Notification::Other`] (MSP's tolerance rule: unknown methods are
//! ignored, never fatal).
//!
//! A `toolCall` item's `effectOutcome` (PROTOCOL.md section 5) is typed as
//! [`EffectOutcome`], and `unknown` stays unknown: the SDK never maps it to
//! success or failure. What an application can do about an unknown effect
//! is in [`EffectOutcome::Unknown`]'s documentation.

use serde_json::Value;

use super::ids::{ApprovalId, CommandId, EffectKey, SessionId, TurnId};

/// What a `toolCall`'s external effect came to, as the host reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectOutcome {
    /// The provider performed the mutation (exactly once: a keyed provider
    /// returns the earlier result on a retry).
    Committed,
    /// The mutation did not happen (denied, aborted, or the provider said
    /// so).
    NotStarted,
    /// Nobody can tell: the provider's answer was lost, or the effect was in
    /// flight when the host died and the provider cannot be asked by key.
    ///
    /// This is neither success nor failure, and must not be treated as
    /// either. The reconcile paths an application has:
    /// 1. **Ask the provider** with the effect's key
    ///    ([`ToolCall::effect_key`]): a provider that honours keys answers
    ///    whether that key was committed, without mutating.
    /// 2. **Ask an operator**: present the tool call (its `rawArgs`, the
    ///    approval) and let a person check the external system and decide.
    ///
    /// Never re-issue the action to a provider that does not support keys:
    /// that can perform the mutation twice.
    Unknown,
}

impl EffectOutcome {
    /// Types the wire spelling. A spelling this SDK does not know is
    /// [`EffectOutcome::Unknown`]: claiming more than "unknown" about an
    /// outcome we cannot read would be a guess.
    pub fn parse(s: &str) -> EffectOutcome {
        match s {
            "committed" => EffectOutcome::Committed,
            "notStarted" => EffectOutcome::NotStarted,
            _ => EffectOutcome::Unknown,
        }
    }

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EffectOutcome::Committed => "committed",
            EffectOutcome::NotStarted => "notStarted",
            EffectOutcome::Unknown => "unknown",
        }
    }
}

/// The external-effect part of a `toolCall` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// `tool`: the provider (`keyed`, `unkeyed`, `background`, ...).
    pub tool: String,
    /// `effectOutcome`, once the effect has one.
    pub effect_outcome: Option<EffectOutcome>,
    /// The key the host used at the provider, when it can be named:
    /// `<sessionId>:<approvalId>` (PROTOCOL.md section 5) for a tool call
    /// that went through an approval.
    pub effect_key: Option<EffectKey>,
}

/// A view item (`item/started`, `item/completed`).
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// `itemId`.
    pub item_id: String,
    /// `kind`: `userMessage`, `agentMessage`, `toolCall`, ... (open).
    pub kind: String,
    /// `turnId`.
    pub turn_id: Option<TurnId>,
    /// `status`: `inProgress`, `completed`, `failed`, ... (open).
    pub status: String,
    /// `text`, if any.
    pub text: Option<String>,
    /// The tool-call fields, for `toolCall` items.
    pub tool_call: Option<ToolCall>,
    /// The item as received.
    pub raw: Value,
}

impl Item {
    fn parse(session: Option<&SessionId>, v: &Value) -> Item {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let tool_call = (s("kind").as_deref() == Some("toolCall")).then(|| ToolCall {
            tool: s("tool").unwrap_or_default(),
            effect_outcome: s("effectOutcome").map(|o| EffectOutcome::parse(&o)),
            effect_key: match (session, s("approvalId")) {
                (Some(sid), Some(a)) => EffectKey::new(format!("{sid}:{a}")).ok(),
                _ => None,
            },
        });
        Item {
            item_id: s("itemId").unwrap_or_default(),
            kind: s("kind").unwrap_or_default(),
            turn_id: s("turnId").and_then(|t| TurnId::new(t).ok()),
            status: s("status").unwrap_or_default(),
            text: s("text"),
            tool_call,
            raw: v.clone(),
        }
    }
}

/// How a turn ended (`turn/completed.terminal`, an open vocabulary).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnTerminal {
    /// `completed`.
    Completed,
    /// `failed` (a launch failure, a crash, a model error, ...).
    Failed,
    /// `cancelled`.
    Cancelled,
    /// A terminal this SDK does not know.
    Other(String),
}

impl TurnTerminal {
    fn parse(s: &str) -> TurnTerminal {
        match s {
            "completed" => TurnTerminal::Completed,
            "failed" => TurnTerminal::Failed,
            "cancelled" => TurnTerminal::Cancelled,
            o => TurnTerminal::Other(o.to_string()),
        }
    }
}

/// How a turn left the session for good: the terminal event a turn-wait
/// resolves on. A queued turn can end without ever running (unqueued), and a
/// failed launch ends with no `turn/started`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    /// `turn/completed`.
    Completed {
        /// The terminal.
        terminal: TurnTerminal,
        /// `reason`, if any (`crash`, a launch failure's text, ...).
        reason: Option<String>,
    },
    /// `turn/unqueued`: reclaimed before it ran; no completion follows.
    Unqueued,
}

/// A public MSP notification (or server request), typed.
#[derive(Debug, Clone, PartialEq)]
pub enum Notification {
    /// `session/started`.
    SessionStarted {
        /// The session.
        session_id: Option<SessionId>,
        /// The `Session` object.
        session: Value,
    },
    /// `turn/started`.
    TurnStarted {
        /// The session.
        session_id: SessionId,
        /// The turn.
        turn_id: TurnId,
        /// The command that submitted it.
        command_id: Option<CommandId>,
    },
    /// `turn/completed` or `turn/unqueued`: the turn is over.
    TurnEnded {
        /// The session.
        session_id: SessionId,
        /// The turn.
        turn_id: TurnId,
        /// How it ended.
        end: TurnEnd,
    },
    /// `item/started`.
    ItemStarted {
        /// The session.
        session_id: SessionId,
        /// The item.
        item: Item,
    },
    /// `item/completed`.
    ItemCompleted {
        /// The session.
        session_id: SessionId,
        /// The item.
        item: Item,
    },
    /// `item/delta` (ephemeral).
    ItemDelta {
        /// The session.
        session_id: SessionId,
        /// The item.
        item_id: String,
        /// The appended text.
        delta: String,
    },
    /// `approval/requested`, or the server request `approval/request` (the
    /// SDK answers the request `{}` by itself; deciding is a command).
    ApprovalRequested {
        /// The session.
        session_id: SessionId,
        /// The approval.
        approval_id: ApprovalId,
        /// True for the server request, false for the view notification.
        is_request: bool,
    },
    /// `approval/resolved`.
    ApprovalResolved {
        /// The session.
        session_id: SessionId,
        /// The approval.
        approval_id: ApprovalId,
        /// `decision`.
        decision: String,
    },
    /// `state/updated` (ext).
    StateUpdated {
        /// The session.
        session_id: SessionId,
        /// The new revision.
        revision: u64,
    },
    /// `session/closed`: the host unloaded the session (idle or shutdown).
    SessionClosed {
        /// The session.
        session_id: SessionId,
        /// `idle` or `hostShutdown` (open).
        reason: String,
    },
    /// Any other method, or a known one whose params are malformed.
    Other,
}

impl Notification {
    /// Types the params of `method`.
    fn parse(method: &str, params: &Value) -> Notification {
        let s = |k: &str| params.get(k).and_then(Value::as_str);
        let sid = s("sessionId").and_then(|x| SessionId::parse(x).ok());
        let turn = s("turnId").and_then(|x| TurnId::new(x).ok());
        match (method, sid, turn) {
            ("session/started", _, _) => Notification::SessionStarted {
                session_id: params["session"]["sessionId"]
                    .as_str()
                    .and_then(|x| SessionId::parse(x).ok()),
                session: params.get("session").cloned().unwrap_or(Value::Null),
            },
            ("turn/started", Some(session_id), Some(turn_id)) => Notification::TurnStarted {
                session_id,
                turn_id,
                command_id: s("commandId").and_then(|c| CommandId::parse(c).ok()),
            },
            ("turn/completed", Some(session_id), Some(turn_id)) => Notification::TurnEnded {
                session_id,
                turn_id,
                end: TurnEnd::Completed {
                    terminal: TurnTerminal::parse(s("terminal").unwrap_or_default()),
                    reason: s("reason").map(str::to_string),
                },
            },
            ("turn/unqueued", Some(session_id), Some(turn_id)) => Notification::TurnEnded {
                session_id,
                turn_id,
                end: TurnEnd::Unqueued,
            },
            ("item/started" | "item/completed", Some(session_id), _)
                if params.get("item").is_some_and(Value::is_object) =>
            {
                let item = Item::parse(Some(&session_id), &params["item"]);
                if method == "item/started" {
                    Notification::ItemStarted { session_id, item }
                } else {
                    Notification::ItemCompleted { session_id, item }
                }
            }
            ("item/delta", Some(session_id), _) => Notification::ItemDelta {
                session_id,
                item_id: s("itemId").unwrap_or_default().to_string(),
                delta: s("delta").unwrap_or_default().to_string(),
            },
            ("approval/requested" | "approval/request", Some(session_id), _) => {
                match s("approvalId").and_then(|a| ApprovalId::new(a).ok()) {
                    Some(approval_id) => Notification::ApprovalRequested {
                        session_id,
                        approval_id,
                        is_request: method == "approval/request",
                    },
                    None => Notification::Other,
                }
            }
            ("approval/resolved", Some(session_id), _) => {
                match s("approvalId").and_then(|a| ApprovalId::new(a).ok()) {
                    Some(approval_id) => Notification::ApprovalResolved {
                        session_id,
                        approval_id,
                        decision: s("decision").unwrap_or_default().to_string(),
                    },
                    None => Notification::Other,
                }
            }
            ("state/updated", Some(session_id), _) => {
                match params.get("revision").and_then(Value::as_u64) {
                    Some(revision) => Notification::StateUpdated {
                        session_id,
                        revision,
                    },
                    None => Notification::Other,
                }
            }
            ("session/closed", Some(session_id), _) => Notification::SessionClosed {
                session_id,
                reason: s("reason").unwrap_or_default().to_string(),
            },
            _ => Notification::Other,
        }
    }
}

/// One notification as received: typed, with its cursor and raw params.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewEvent {
    /// The method.
    pub method: String,
    /// The typed form.
    pub notification: Notification,
    /// `viewCursor`, if any.
    pub view_cursor: Option<String>,
    /// Whether the event is durable (it carries a `sourceRange`): only a
    /// durable event's cursor is a place to resume from.
    pub durable: bool,
    /// The params as received.
    pub params: Value,
}

impl ViewEvent {
    /// Types one notification.
    pub fn parse(method: &str, params: &Value) -> ViewEvent {
        ViewEvent::from_parts(method.to_string(), params.clone())
    }

    /// Types one notification, taking its method and params as they are
    /// (the core's way: the frame it parsed becomes the event, uncopied).
    pub(crate) fn from_parts(method: String, params: Value) -> ViewEvent {
        let notification = Notification::parse(&method, &params);
        ViewEvent {
            view_cursor: params
                .get("viewCursor")
                .and_then(Value::as_str)
                .map(str::to_string),
            durable: params.get("sourceRange").is_some() || method == "session/closed",
            method,
            notification,
            params,
        }
    }

    /// The session this event belongs to, if it names one.
    pub fn session_id(&self) -> Option<SessionId> {
        self.params
            .get("sessionId")
            .or_else(|| self.params.get("session").and_then(|s| s.get("sessionId")))
            .and_then(Value::as_str)
            .and_then(|s| SessionId::parse(s).ok())
    }
}

/// What the host says about its durability in the handshake
/// (`sessionDurability`; absent reads as durable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Sessions survive the host: ids may be replayed at a restarted host.
    Durable,
    /// Nothing survives the host: its sessions' command ids are never
    /// replayed at another host.
    Ephemeral,
}

/// Something the client core reports to the application.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// The handshake on a new link completed.
    Connected {
        /// The host's `sessionDurability`.
        durability: Durability,
    },
    /// The link closed; the SDK reconnects and heals by itself.
    Disconnected,
    /// A view notification or server request, typed.
    View(Box<ViewEvent>),
    /// The SDK resumed a session after a reconnect. `snapshot` is the
    /// `ViewSnapshot` when the host could not stream the suffix after the
    /// client's cursor (the application should rebuild its view from it);
    /// `None` when the suffix streams.
    Resumed {
        /// The session.
        session_id: SessionId,
        /// The snapshot, when one replaced the suffix.
        snapshot: Option<Value>,
    },
    /// A session the SDK followed is gone (its ephemeral host died, or a
    /// durable host no longer has it). Its pending commands end with
    /// [`super::outcome::ErrorKind::HostLost`].
    SessionLost {
        /// The session.
        session_id: SessionId,
    },
    /// The SDK stopped following a session because reloading it failed
    /// for good (another process keeps it, or the host refuses its log:
    /// `logCorrupt`). Commands waiting on it ended with `outcome`; this
    /// event says so even when none was waiting, so the application knows
    /// its view of the session no longer heals by itself.
    FollowEnded {
        /// The session.
        session_id: SessionId,
        /// The error the reload ended with.
        outcome: super::outcome::CommandOutcome,
    },
    /// The host refused the handshake (`error` is its error object); the
    /// link is replaced and the handshake tried again.
    HandshakeFailed {
        /// The `error` object.
        error: Value,
    },
    /// The host sent a line the SDK could not classify; it was skipped.
    BadFrame {
        /// Why.
        detail: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SID: &str = "0198f0aa-1111-7000-8000-0000000000aa";

    #[test]
    fn effect_outcomes_stay_what_they_are() {
        for (wire, want) in [
            ("committed", EffectOutcome::Committed),
            ("notStarted", EffectOutcome::NotStarted),
            ("unknown", EffectOutcome::Unknown),
            ("somethingNew", EffectOutcome::Unknown),
        ] {
            let e = ViewEvent::parse(
                "item/completed",
                &json!({"sessionId": SID, "viewCursor": "v:1", "sourceRange": {}, "item": {"itemId": "i", "kind": "toolCall", "tool": "unkeyed", "status": "failed", "effectOutcome": wire, "approvalId": "a1"}}),
            );
            let Notification::ItemCompleted { item, .. } = e.notification else {
                panic!("an item")
            };
            let tc = item.tool_call.expect("a tool call");
            assert_eq!(tc.effect_outcome, Some(want));
            assert_eq!(
                tc.effect_key.as_ref().map(EffectKey::as_str),
                Some(format!("{SID}:a1").as_str())
            );
        }
    }

    #[test]
    fn turn_ends_and_durability() {
        let e = ViewEvent::parse(
            "turn/completed",
            &json!({"sessionId": SID, "viewCursor": "v:s:4", "sourceRange": {}, "turnId": "t", "terminal": "failed", "reason": "crash"}),
        );
        assert!(e.durable);
        assert!(matches!(
            e.notification,
            Notification::TurnEnded { end: TurnEnd::Completed { terminal: TurnTerminal::Failed, ref reason }, .. } if reason.as_deref() == Some("crash")
        ));
        let d = ViewEvent::parse(
            "item/delta",
            &json!({"sessionId": SID, "viewCursor": "v:s:4.1", "itemId": "i", "delta": "x"}),
        );
        assert!(!d.durable);
        let u = ViewEvent::parse("turn/unqueued", &json!({"sessionId": SID, "turnId": "t"}));
        assert!(matches!(
            u.notification,
            Notification::TurnEnded {
                end: TurnEnd::Unqueued,
                ..
            }
        ));
        let o = ViewEvent::parse("future/thing", &json!({"sessionId": SID}));
        assert_eq!(o.notification, Notification::Other);
        let bad = ViewEvent::parse("turn/started", &json!({"sessionId": 3}));
        assert_eq!(bad.notification, Notification::Other);
    }
}
