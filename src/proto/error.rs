//! The error table of PROTOCOL.md section 3 as one typed value.
//!
//! Every `error.data` carries `kind`. `retryable` follows the public
//! `ErrorData` rule (PROTOCOL.md v4 section 3): absent means the error
//! table's default for the code, so this host writes it only where it
//! differs from that default. `message` is free text that clients never
//! compare.

use serde_json::{json, Map, Value};

/// A JSON-RPC error object ready to be sent: `{code, message, data}`.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC error code.
    pub code: i64,
    /// Free text for humans.
    pub message: String,
    /// `error.data`, always an object with `kind`; `retryable` only where
    /// it differs from [`default_retryable`] of the code.
    pub data: Map<String, Value>,
}

impl RpcError {
    fn new(code: i64, kind: &str, retryable: bool, message: impl Into<String>) -> Self {
        let mut data = Map::new();
        data.insert("kind".into(), json!(kind));
        if default_retryable(code) != Some(retryable) {
            data.insert("retryable".into(), json!(retryable));
        }
        RpcError {
            code,
            message: message.into(),
            data,
        }
    }

    /// Adds one member to `data`.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.data.insert(key.to_string(), value);
        self
    }

    /// Replaces the free-text message (a launch failure's text, say).
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// The `kind` member of `data`.
    pub fn kind(&self) -> &str {
        self.data.get("kind").and_then(Value::as_str).unwrap_or("")
    }

    /// -32700: the line is not JSON (or not UTF-8, or nested too deep).
    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self::new(
            -32700,
            "parseError",
            false,
            format!("parse error: {detail}"),
        )
    }
    /// -32600: not a request object, a bad `id`, or a batch.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(-32600, "invalidRequest", false, message)
    }
    /// -32600 `notInitialized`: a request before the handshake completed.
    pub fn not_initialized() -> Self {
        Self::new(-32600, "notInitialized", false, "Not initialized")
    }
    /// -32600 `alreadyInitialized`: a second `initialize`.
    pub fn already_initialized() -> Self {
        Self::new(-32600, "alreadyInitialized", false, "already initialized")
    }
    /// -32601: no such method.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            -32601,
            "methodNotFound",
            false,
            format!("unknown method {method}"),
        )
        .with("method", json!(method))
    }
    /// -32602: missing or ill-typed params; `field` names the member.
    pub fn invalid_params(field: &str, message: impl Into<String>) -> Self {
        Self::new(-32602, "invalidParams", false, message).with("field", json!(field))
    }
    /// -32603: a bug.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(-32603, "internal", false, message)
    }
    /// -32603 `storageUnavailable`: the intake could not be made durable.
    pub fn storage_unavailable(detail: impl std::fmt::Display) -> Self {
        Self::new(
            -32603,
            "internal",
            true,
            format!("storage unavailable: {detail}"),
        )
        .with("reason", json!("storageUnavailable"))
    }
    /// -32603 `logCorrupt`: a session log has a bad record before its tail.
    pub fn log_corrupt(file: &str, offset: u64, detail: impl std::fmt::Display) -> Self {
        Self::new(
            -32603,
            "internal",
            false,
            format!("session log {file} is corrupt at offset {offset}: {detail}"),
        )
        .with("reason", json!("logCorrupt"))
        .with("file", json!(file))
        .with("offset", json!(offset))
    }
    /// -32001: a limit of PROTOCOL.md section 1.
    pub fn overloaded(what: &str) -> Self {
        Self::new(-32001, "overloaded", true, format!("overloaded: {what}"))
    }
    /// -32002: a frame over the limit.
    pub fn input_too_large(limit_bytes: usize) -> Self {
        Self::new(
            -32002,
            "inputTooLarge",
            false,
            "frame exceeds the inbound limit",
        )
        .with("limitBytes", json!(limit_bytes))
    }
    /// -32011 `missingAnchor`: a cursor this session never issued.
    pub fn missing_anchor(session_id: &str) -> Self {
        Self::new(-32011, "notFound", false, "unknown cursor anchor")
            .with("reason", json!("missingAnchor"))
            .with("sessionId", json!(session_id))
    }
    /// -32020: no such session here.
    pub fn session_not_found(session_id: &str) -> Self {
        Self::new(
            -32020,
            "sessionNotFound",
            false,
            format!("session {session_id} not found"),
        )
        .with("sessionId", json!(session_id))
    }
    /// -32021: another process holds the session's lease.
    pub fn session_in_use(session_id: &str) -> Self {
        Self::new(
            -32021,
            "sessionInUse",
            false,
            format!("session {session_id} is already in use"),
        )
        .with("sessionId", json!(session_id))
    }
    /// -32024: the session is not loaded on this host.
    pub fn session_not_loaded(session_id: &str) -> Self {
        Self::new(
            -32024,
            "sessionNotLoaded",
            false,
            format!("session {session_id} is not loaded on this host"),
        )
        .with("sessionId", json!(session_id))
    }
    /// -32030: a durable refusal with a snake_case `reason`.
    pub fn command_rejected(method: &str, command_id: &str, reason: &str) -> Self {
        Self::new(
            -32030,
            "commandRejected",
            false,
            format!("{method} command {command_id} rejected: {reason}"),
        )
        .with("commandId", json!(command_id))
        .with("reason", json!(reason))
    }
    /// -32050: no such approval.
    pub fn approval_not_found(approval_id: &str) -> Self {
        Self::new(-32050, "approvalNotFound", false, "approval not found")
            .with("approvalId", json!(approval_id))
    }
    /// -32051: decided by another command.
    pub fn approval_already_resolved(approval_id: &str, resolution: Value) -> Self {
        Self::new(
            -32051,
            "approvalAlreadyResolved",
            false,
            "approval already resolved",
        )
        .with("approvalId", json!(approval_id))
        .with("resolution", resolution)
    }
    /// -32052: `choiceId` not offered.
    pub fn approval_choice_invalid(approval_id: &str, choice_id: &str) -> Self {
        Self::new(-32052, "approvalChoiceInvalid", false, "choice not offered")
            .with("approvalId", json!(approval_id))
            .with("choiceId", json!(choice_id))
    }
    /// -32053: `requirementId` not current.
    pub fn approval_requirement_stale(approval_id: &str, current: Value) -> Self {
        Self::new(
            -32053,
            "approvalRequirementStale",
            false,
            "requirement is not current",
        )
        .with("approvalId", json!(approval_id))
        .with("currentRequirementId", current)
    }

    /// Whether a client may retry: `data.retryable` when present, else the
    /// code's default (false for a code outside the table).
    pub fn retryable(&self) -> bool {
        self.data
            .get("retryable")
            .and_then(Value::as_bool)
            .or(default_retryable(self.code))
            .unwrap_or(false)
    }

    /// The `error` member of a response. A `retryable` equal to the code's
    /// default is left out, so an answer recorded by an earlier version
    /// (which always wrote it) is sent in today's shape.
    pub fn to_value(&self) -> Value {
        self.clone().into_value()
    }

    /// [`RpcError::to_value`], taking the error apart instead of copying
    /// its members (a rejection builds its error only to record and send
    /// it).
    pub fn into_value(self) -> Value {
        let mut data = self.data;
        if data.get("retryable").and_then(Value::as_bool).is_some()
            && data.get("retryable").and_then(Value::as_bool) == default_retryable(self.code)
        {
            data.remove("retryable");
        }
        let mut m = serde_json::Map::new();
        m.insert("code".into(), Value::from(self.code));
        m.insert("message".into(), Value::String(self.message));
        m.insert("data".into(), Value::Object(data));
        Value::Object(m)
    }

    /// Parses an `error` member back (used for answers stored in the log).
    pub fn from_value(v: &Value) -> Option<Self> {
        Some(RpcError {
            code: v.get("code")?.as_i64()?,
            message: v.get("message")?.as_str()?.to_string(),
            data: v.get("data")?.as_object()?.clone(),
        })
    }
}

/// The `retryable` default of an error code: the `errors` table of the
/// public schema (`schema/msp.schema.json`) for the codes this host sends.
/// `None` for a code outside that table.
pub fn default_retryable(code: i64) -> Option<bool> {
    match code {
        -32001 | -32031 => Some(true),
        -32700 | -32600 | -32601 | -32602 | -32603 | -32002 | -32010 | -32011 | -32020 | -32021
        | -32022 | -32023 | -32024 | -32025 | -32030 | -32032 | -32033 | -32038 | -32040
        | -32041 | -32042 | -32050 | -32051 | -32052 | -32053 | -32054 | -32055 | -32056
        | -32057 => Some(false),
        _ => None,
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.kind(), self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_kind_and_retryable_only_off_default() {
        let all = [
            RpcError::parse_error("x"),
            RpcError::invalid_request("x"),
            RpcError::not_initialized(),
            RpcError::already_initialized(),
            RpcError::method_not_found("m"),
            RpcError::invalid_params("f", "x"),
            RpcError::internal("x"),
            RpcError::storage_unavailable("x"),
            RpcError::log_corrupt("f", 1, "x"),
            RpcError::overloaded("x"),
            RpcError::input_too_large(1),
            RpcError::missing_anchor("s"),
            RpcError::session_not_found("s"),
            RpcError::session_in_use("s"),
            RpcError::session_not_loaded("s"),
            RpcError::command_rejected("m", "c", "r"),
            RpcError::approval_not_found("a"),
            RpcError::approval_already_resolved("a", json!({})),
            RpcError::approval_choice_invalid("a", "c"),
            RpcError::approval_requirement_stale("a", json!({})),
        ];
        for e in all {
            assert!(e.data.get("kind").is_some_and(Value::is_string), "{e}");
            let written = e.data.get("retryable").and_then(Value::as_bool);
            assert_ne!(written, default_retryable(e.code), "{e}");
            assert!(
                default_retryable(e.code).is_some(),
                "{e}: code in the table"
            );
            assert_eq!(RpcError::from_value(&e.to_value()), Some(e.clone()));
            assert_eq!(e.to_value(), e.clone().into_value());
        }
    }

    #[test]
    fn retryable_rows() {
        // overloaded is retryable by default: nothing written.
        assert!(RpcError::overloaded("x").data.get("retryable").is_none());
        assert!(RpcError::overloaded("x").retryable());
        // internal is not: storageUnavailable overrides it.
        assert_eq!(
            RpcError::storage_unavailable("x").data["retryable"],
            json!(true)
        );
        assert!(RpcError::storage_unavailable("x").retryable());
        // commandRejected data is exactly {kind, commandId, reason}.
        let r = RpcError::command_rejected("m", "c", "r");
        let keys: Vec<&str> = r.data.keys().map(String::as_str).collect();
        assert_eq!(keys, ["commandId", "kind", "reason"]);
        assert!(!r.retryable());
    }

    #[test]
    fn a_recorded_default_retryable_is_not_sent() {
        // An answer recorded before v4 carries `retryable: false`.
        let old = json!({"code": -32030, "message": "m", "data": {"kind": "commandRejected", "commandId": "c", "reason": "r", "retryable": false}});
        let e = RpcError::from_value(&old).unwrap();
        assert_eq!(
            e.to_value()["data"],
            json!({"kind": "commandRejected", "commandId": "c", "reason": "r"})
        );
        // An override is kept.
        let over = json!({"code": -32603, "message": "m", "data": {"kind": "internal", "retryable": true}});
        assert_eq!(
            RpcError::from_value(&over).unwrap().to_value()["data"]["retryable"],
            json!(true)
        );
    }
}
