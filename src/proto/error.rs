//! The error table of PROTOCOL.md section 3 as one typed value.
//!
//! Every `error.data` carries `kind` and `retryable`. `message` is free text
//! that clients never compare.

use serde_json::{json, Map, Value};

/// A JSON-RPC error object ready to be sent: `{code, message, data}`.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC error code.
    pub code: i64,
    /// Free text for humans.
    pub message: String,
    /// `error.data`, always an object with `kind` and `retryable`.
    pub data: Map<String, Value>,
}

impl RpcError {
    fn new(code: i64, kind: &str, retryable: bool, message: impl Into<String>) -> Self {
        let mut data = Map::new();
        data.insert("kind".into(), json!(kind));
        data.insert("retryable".into(), json!(retryable));
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

    /// The `error` member of a response.
    pub fn to_value(&self) -> Value {
        json!({ "code": self.code, "message": self.message, "data": Value::Object(self.data.clone()) })
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

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.kind(), self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_kind_and_retryable() {
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
            assert!(
                e.data.get("retryable").is_some_and(Value::is_boolean),
                "{e}"
            );
            assert_eq!(RpcError::from_value(&e.to_value()), Some(e.clone()));
        }
    }

    #[test]
    fn retryable_rows() {
        assert_eq!(RpcError::overloaded("x").data["retryable"], json!(true));
        assert_eq!(
            RpcError::storage_unavailable("x").data["retryable"],
            json!(true)
        );
        assert_eq!(
            RpcError::command_rejected("m", "c", "r").data["retryable"],
            json!(false)
        );
    }
}
