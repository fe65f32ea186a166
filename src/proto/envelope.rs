//! One line into a JSON-RPC 2.0 message, and messages back into lines.
//!
//! Parse rules (PROTOCOL.md section 1): not UTF-8 or not JSON is `-32700`
//! with `id: null`; a batch (array) or a non-object is `-32600`; an `id` that
//! is neither an integer nor a string is `-32600` with `id: null`; `params`,
//! when present, must be an object.

use serde_json::{json, Map, Value};

use super::jwrite::J;
use super::RpcError;

/// A JSON-RPC request id: an integer or a string, kept as sent.
pub type RequestId = Value;

/// One parsed inbound message.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it must be answered.
    Request {
        /// The request id (integer or string).
        id: RequestId,
        /// The method name.
        method: String,
        /// The params object (empty when absent).
        params: Map<String, Value>,
    },
    /// A notification (no id): never answered.
    Notification {
        /// The method name.
        method: String,
    },
    /// A response to a request this host sent (e.g. `approval/request`).
    Response {
        /// The id of the host's request.
        id: RequestId,
    },
}

/// An envelope error: what to answer, under which id.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvelopeError {
    /// The id to answer under (`null` when it could not be recovered).
    pub id: RequestId,
    /// The error.
    pub error: RpcError,
}

fn valid_id(v: &Value) -> bool {
    match v {
        Value::String(_) => true,
        Value::Number(n) => n.is_i64() || n.is_u64(),
        _ => false,
    }
}

/// Parses one line (without its `\n`).
pub fn parse_line(line: &[u8]) -> Result<Incoming, EnvelopeError> {
    let fail = |id: Value, error: RpcError| Err(EnvelopeError { id, error });
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(e) => {
            return fail(
                Value::Null,
                RpcError::parse_error(format!("invalid UTF-8: {e}")),
            )
        }
    };
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return fail(Value::Null, RpcError::parse_error(e)),
    };
    let mut obj = match value {
        Value::Object(o) => o,
        Value::Array(_) => {
            return fail(
                Value::Null,
                RpcError::invalid_request("batches are not supported"),
            )
        }
        _ => {
            return fail(
                Value::Null,
                RpcError::invalid_request("a frame must be a JSON object"),
            )
        }
    };
    let id = obj.remove("id");
    if let Some(id) = &id {
        if !valid_id(id) {
            return fail(
                Value::Null,
                RpcError::invalid_request("request id must be a string or integer"),
            );
        }
    }
    let reply_id = id.clone().unwrap_or(Value::Null);
    if obj.get("jsonrpc") != Some(&json!("2.0")) {
        return fail(
            reply_id,
            RpcError::invalid_request("jsonrpc must be \"2.0\""),
        );
    }
    match obj.remove("method") {
        Some(Value::String(method)) => {
            let params = match obj.remove("params") {
                None => Map::new(),
                Some(Value::Object(p)) => p,
                Some(_) => {
                    return fail(
                        reply_id,
                        RpcError::invalid_params("params", "params must be an object"),
                    )
                }
            };
            match id {
                Some(id) => Ok(Incoming::Request { id, method, params }),
                None => Ok(Incoming::Notification { method }),
            }
        }
        Some(_) => fail(
            reply_id,
            RpcError::invalid_request("method must be a string"),
        ),
        None => match id {
            Some(id) if obj.contains_key("result") || obj.contains_key("error") => {
                Ok(Incoming::Response { id })
            }
            _ => fail(reply_id, RpcError::invalid_request("not a request")),
        },
    }
}

/// A success response line (with `\n`).
pub fn response_line(id: &RequestId, result: &Value) -> Vec<u8> {
    debug_assert!(result.is_object());
    response_line_j(id, &J::V(result))
}

/// As [`response_line`], with the result a borrowed tree ([`J`]) written
/// in place: an answer built from a session's state without copying it.
pub fn response_line_j(id: &RequestId, result: &J<'_>) -> Vec<u8> {
    line(&[
        ("id", &J::V(id)),
        ("jsonrpc", &J::S("2.0")),
        ("result", result),
    ])
}

/// As [`response_line`], with the result already serialised: the same
/// bytes as the tree it was written from.
pub fn response_line_raw(id: &RequestId, result: &serde_json::value::RawValue) -> Vec<u8> {
    line(&[
        ("id", &J::V(id)),
        ("jsonrpc", &J::S("2.0")),
        ("result", &J::Raw(result)),
    ])
}

/// An error response line (with `\n`).
pub fn error_line(id: &RequestId, error: &RpcError) -> Vec<u8> {
    let error = error.to_value();
    line(&[
        ("error", &J::V(&error)),
        ("id", &J::V(id)),
        ("jsonrpc", &J::S("2.0")),
    ])
}

/// A notification line (with `\n`) carrying `emittedAtMs`.
pub fn notification_line(method: &str, params: &Value, emitted_at_ms: u64) -> Vec<u8> {
    line(&[
        ("emittedAtMs", &J::U(emitted_at_ms)),
        ("jsonrpc", &J::S("2.0")),
        ("method", &J::S(method)),
        ("params", &J::V(params)),
    ])
}

/// As [`notification_line`], with params already serialised (an event
/// kept as text): the same bytes as the tree they were written from.
pub fn notification_line_raw(
    method: &str,
    params: &serde_json::value::RawValue,
    emitted_at_ms: u64,
) -> Vec<u8> {
    line(&[
        ("emittedAtMs", &J::U(emitted_at_ms)),
        ("jsonrpc", &J::S("2.0")),
        ("method", &J::S(method)),
        ("params", &J::Raw(params)),
    ])
}

/// A server-to-client request line (with `\n`).
pub fn server_request_line(id: u64, method: &str, params: &Value) -> Vec<u8> {
    line(&[
        ("id", &J::U(id)),
        ("jsonrpc", &J::S("2.0")),
        ("method", &J::S(method)),
        ("params", &J::V(params)),
    ])
}

/// As [`server_request_line`], with params already serialised: the same
/// bytes as the tree they were written from.
pub fn server_request_line_raw(
    id: u64,
    method: &str,
    params: &serde_json::value::RawValue,
) -> Vec<u8> {
    line(&[
        ("id", &J::U(id)),
        ("jsonrpc", &J::S("2.0")),
        ("method", &J::S(method)),
        ("params", &J::Raw(params)),
    ])
}

/// Whether `line` is a notification or server request about session
/// `sid` (its `params.sessionId`): a view frame the host may still drop.
pub fn is_view_frame_of(line: &[u8], sid: &str) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return false;
    };
    v.get("method").is_some() && v["params"]["sessionId"].as_str() == Some(sid)
}

/// A frame's members written in place (see [`super::jwrite`]): the bytes
/// `json!` then `to_vec` wrote, without first copying every member into
/// a `Value` tree (a deep copy of each result and event, made and dropped
/// per frame: issue 10). Members are listed in key order, a `Value`
/// object's order (serde_json's map is sorted); the unit tests pin the
/// bytes.
fn line(members: &[(&str, &J<'_>)]) -> Vec<u8> {
    debug_assert!(members.windows(2).all(|w| w[0].0 < w[1].0), "sorted keys");
    let mut out = Vec::with_capacity(128);
    out.push(b'{');
    for (i, (k, v)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        super::jwrite::write_str(&mut out, k);
        out.push(b':');
        v.write(&mut out);
    }
    out.push(b'}');
    debug_assert!(!out.contains(&b'\n'));
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(line: &str) -> EnvelopeError {
        parse_line(line.as_bytes()).unwrap_err()
    }

    #[test]
    fn request_notification_response() {
        assert!(matches!(
            parse_line(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1}}"#),
            Ok(Incoming::Request { .. })
        ));
        assert!(matches!(
            parse_line(br#"{"jsonrpc":"2.0","method":"initialized"}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert!(matches!(
            parse_line(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Ok(Incoming::Response { .. })
        ));
    }

    #[test]
    fn envelope_errors() {
        assert_eq!(err("not json").error.code, -32700);
        assert_eq!(err("not json").id, Value::Null);
        assert_eq!(parse_line(&[0xff, 0xfe]).unwrap_err().error.code, -32700);
        assert_eq!(err("[]").error.code, -32600);
        assert_eq!(err("3").error.code, -32600);
        let e = err(r#"{"jsonrpc":"2.0","id":3.5,"method":"x"}"#);
        assert_eq!((e.error.code, e.id), (-32600, Value::Null));
        let e = err(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#);
        assert_eq!((e.error.code, e.id), (-32600, Value::Null));
        let e = err(r#"{"jsonrpc":"1.0","id":7,"method":"x"}"#);
        assert_eq!((e.error.code, e.id), (-32600, json!(7)));
        let e = err(r#"{"jsonrpc":"2.0","id":"a","method":"x","params":[1]}"#);
        assert_eq!((e.error.code, e.id), (-32602, json!("a")));
    }

    #[test]
    fn deep_nesting_is_a_parse_error_not_a_panic() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(err(&deep).error.code, -32700);
    }

    #[test]
    fn lines_have_one_newline() {
        let l = response_line(&json!(1), &json!({}));
        assert_eq!(l.iter().filter(|b| **b == b'\n').count(), 1);
        assert_eq!(*l.last().unwrap(), b'\n');
    }

    /// The lines written in place are byte for byte what serialising the
    /// `json!` object wrote (trace hashes and pinned corpora depend on it).
    #[test]
    fn lines_are_the_json_objects_bytes() {
        fn old(v: Value) -> Vec<u8> {
            let mut out = serde_json::to_vec(&v).unwrap();
            out.push(b'\n');
            out
        }
        let params = json!({"z": [1, {"b": "\u{1}\"\n", "a": null}], "sessionId": "s", "x": 1.5});
        for id in [json!(7), json!("req-\u{e9}\"1"), json!(-3)] {
            assert_eq!(
                response_line(&id, &params),
                old(json!({ "jsonrpc": "2.0", "id": id, "result": params }))
            );
            let raw = serde_json::value::to_raw_value(&params).unwrap();
            assert_eq!(response_line_raw(&id, &raw), response_line(&id, &params));
            let tree = J::Obj(vec![
                ("a", J::S("x\"\u{2028}\n")),
                ("b", J::Raw(&raw)),
                ("c", J::Arr(vec![J::U(3), J::Null, J::V(&params)])),
            ]);
            assert_eq!(
                response_line_j(&id, &tree),
                old(
                    json!({ "jsonrpc": "2.0", "id": id, "result": {"a": "x\"\u{2028}\n", "b": params, "c": [3, null, params]} })
                )
            );
            let err = RpcError::invalid_request("bad \"thing\"");
            assert_eq!(
                error_line(&id, &err),
                old(json!({ "jsonrpc": "2.0", "id": id, "error": err.to_value() }))
            );
        }
        assert_eq!(
            notification_line("item/\"x", &params, 1_700_000_000_123),
            old(
                json!({ "jsonrpc": "2.0", "method": "item/\"x", "params": params, "emittedAtMs": 1_700_000_000_123u64 })
            )
        );
        // An event kept as text writes the same bytes as its tree.
        let raw = serde_json::value::to_raw_value(&params).unwrap();
        assert_eq!(
            notification_line_raw("item/\"x", &raw, 1_700_000_000_123),
            notification_line("item/\"x", &params, 1_700_000_000_123)
        );
        assert_eq!(
            server_request_line_raw(u64::MAX, "approval/request", &raw),
            server_request_line(u64::MAX, "approval/request", &params)
        );
        assert_eq!(
            server_request_line(u64::MAX, "approval/request", &params),
            old(
                json!({ "jsonrpc": "2.0", "id": u64::MAX, "method": "approval/request", "params": params })
            )
        );
    }
}
