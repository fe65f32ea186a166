//! One line into a JSON-RPC 2.0 message, and messages back into lines.
//!
//! Parse rules (PROTOCOL.md section 1): not UTF-8 or not JSON is `-32700`
//! with `id: null`; a batch (array) or a non-object is `-32600`; an `id` that
//! is neither an integer nor a string is `-32600` with `id: null`; `params`,
//! when present, must be an object.

use serde_json::{Map, Value};

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
        /// The params object (empty when absent), or the `invalidParams`
        /// a non-object earns: answered only after the handshake and the
        /// method are checked (PROTOCOL.md 1: the error precedence is
        /// parse, initialization, method, params).
        params: Result<Map<String, Value>, RpcError>,
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
///
/// A line that is a JSON object is read member by member (`Envelope`):
/// the members the envelope looks at as values, the others parsed and
/// dropped, with no tree of the whole line built and taken apart again
/// (issue 10). Any line that reading does not take (not an object, not
/// JSON, a member serde_json's `Value` reads specially) goes the way every
/// line went before, through a `Value`: the same answers and the same
/// typed errors either way.
pub fn parse_line(line: &[u8]) -> Result<Incoming, EnvelopeError> {
    let fast = std::str::from_utf8(line)
        .ok()
        .and_then(|text| serde_json::from_str::<Envelope>(text).ok());
    match fast {
        Some(env) => env.into_incoming(),
        None => parse_line_as_value(line),
    }
}

/// The members of a JSON-object line the envelope reads (a later member
/// of the same name replaces an earlier one, as in a `Value` object).
#[derive(Default)]
struct Envelope {
    id: Option<Value>,
    jsonrpc: Option<Value>,
    method: Option<Value>,
    params: Option<Value>,
    result_or_error: bool,
}

/// A member name of the top-level object.
enum Key {
    Id,
    Jsonrpc,
    Method,
    Params,
    ResultOrError,
    Other,
    /// A name serde_json's `Value` reads as a marker (raw value, number):
    /// such a line is left to [`parse_line_as_value`].
    Marker,
}

impl Key {
    fn of(name: &str) -> Key {
        match name {
            "id" => Key::Id,
            "jsonrpc" => Key::Jsonrpc,
            "method" => Key::Method,
            "params" => Key::Params,
            "result" | "error" => Key::ResultOrError,
            n if n.starts_with("$serde_json::private::") => Key::Marker,
            _ => Key::Other,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Key, E> {
                Ok(Key::of(name))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> serde::Deserialize<'de> for Envelope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Envelope, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Envelope;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Envelope, A::Error> {
                use serde::de::Error;
                let mut env = Envelope::default();
                while let Some(key) = m.next_key::<Key>()? {
                    // Every member is read as a `Value`, as a `Value`
                    // object's would be (the same nesting limit).
                    let value: Value = m.next_value()?;
                    match key {
                        Key::Id => env.id = Some(value),
                        Key::Jsonrpc => env.jsonrpc = Some(value),
                        Key::Method => env.method = Some(value),
                        Key::Params => env.params = Some(value),
                        Key::ResultOrError => env.result_or_error = true,
                        Key::Other => {}
                        Key::Marker => return Err(A::Error::custom("a marker member")),
                    }
                }
                Ok(env)
            }
        }
        // Anything but an object is a type error here (then read as a `Value`).
        d.deserialize_any(V)
    }
}

impl Envelope {
    /// What a line with these members is: a request, a notification, a
    /// response, or the envelope error (both readings end here).
    fn into_incoming(self) -> Result<Incoming, EnvelopeError> {
        let fail = |id: Value, error: RpcError| Err(EnvelopeError { id, error });
        let id = self.id;
        if let Some(id) = &id {
            if !valid_id(id) {
                return fail(
                    Value::Null,
                    RpcError::invalid_request("request id must be a string or integer"),
                );
            }
        }
        let reply_id = id.clone().unwrap_or(Value::Null);
        if !matches!(&self.jsonrpc, Some(Value::String(v)) if v == "2.0") {
            return fail(
                reply_id,
                RpcError::invalid_request("jsonrpc must be \"2.0\""),
            );
        }
        match self.method {
            Some(Value::String(method)) => {
                let params = match self.params {
                    None => Ok(Map::new()),
                    Some(Value::Object(p)) => Ok(p),
                    Some(_) => Err(RpcError::invalid_params(
                        "params",
                        "params must be an object",
                    )),
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
                Some(id) if self.result_or_error => Ok(Incoming::Response { id }),
                _ => fail(reply_id, RpcError::invalid_request("not a request")),
            },
        }
    }
}

/// [`parse_line`] through a `Value` of the whole line: the reference, and
/// the way of every line the member-by-member reading does not take.
fn parse_line_as_value(line: &[u8]) -> Result<Incoming, EnvelopeError> {
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
    let envelope = Envelope {
        id: obj.remove("id"),
        jsonrpc: obj.remove("jsonrpc"),
        method: obj.remove("method"),
        params: obj.remove("params"),
        result_or_error: obj.contains_key("result") || obj.contains_key("error"),
    };
    envelope.into_incoming()
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
    response_line_j(id, &J::Raw(result))
}

/// An error response line (with `\n`).
pub fn error_line(id: &RequestId, error: &RpcError) -> Vec<u8> {
    error_line_j(id, &J::Val(error.to_value()))
}

/// As [`error_line`], with the error object already written in today's
/// shape (by [`RpcError::into_value`], then serialised): copied as it is.
pub fn error_line_raw(id: &RequestId, error: &serde_json::value::RawValue) -> Vec<u8> {
    error_line_j(id, &J::Raw(error))
}

fn error_line_j(id: &RequestId, error: &J<'_>) -> Vec<u8> {
    line(&[
        ("error", error),
        ("id", &J::V(id)),
        ("jsonrpc", &J::S("2.0")),
    ])
}

/// A notification line (with `\n`) carrying `emittedAtMs`.
pub fn notification_line(method: &str, params: &Value, emitted_at_ms: u64) -> Vec<u8> {
    notification_line_j(method, &J::V(params), emitted_at_ms)
}

/// As [`notification_line`], with params already serialised (an event
/// kept as text): the same bytes as the tree they were written from.
pub fn notification_line_raw(
    method: &str,
    params: &serde_json::value::RawValue,
    emitted_at_ms: u64,
) -> Vec<u8> {
    notification_line_j(method, &J::Raw(params), emitted_at_ms)
}

fn notification_line_j(method: &str, params: &J<'_>, emitted_at_ms: u64) -> Vec<u8> {
    line(&[
        ("emittedAtMs", &J::U(emitted_at_ms)),
        ("jsonrpc", &J::S("2.0")),
        ("method", &J::S(method)),
        ("params", params),
    ])
}

/// A server-to-client request line (with `\n`).
pub fn server_request_line(id: u64, method: &str, params: &Value) -> Vec<u8> {
    server_request_line_j(id, method, &J::V(params))
}

/// As [`server_request_line`], with params already serialised: the same
/// bytes as the tree they were written from.
pub fn server_request_line_raw(
    id: u64,
    method: &str,
    params: &serde_json::value::RawValue,
) -> Vec<u8> {
    server_request_line_j(id, method, &J::Raw(params))
}

fn server_request_line_j(id: u64, method: &str, params: &J<'_>) -> Vec<u8> {
    line(&[
        ("id", &J::U(id)),
        ("jsonrpc", &J::S("2.0")),
        ("method", &J::S(method)),
        ("params", params),
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
    super::jwrite::write_object(&mut out, members.iter().map(|(k, v)| (*k, *v)));
    debug_assert!(!out.contains(&b'\n'));
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        // Params that are not an object are a request's params error, not
        // an envelope error: the host answers it after the handshake and
        // method checks.
        match parse_line(br#"{"jsonrpc":"2.0","id":"a","method":"x","params":[1]}"#) {
            Ok(Incoming::Request { id, params, .. }) => {
                assert_eq!(id, json!("a"));
                assert_eq!(params.unwrap_err().code, -32602);
            }
            other => panic!("{other:?}"),
        }
    }

    /// Lines read member by member get what the reading through a `Value`
    /// gives them, answers and errors alike.
    #[test]
    fn member_reading_is_the_value_reading() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let mut lines: Vec<String> = [
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1}}"#,
            r#"{"jsonrpc":"2.0","method":"initialized"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"r","error":{"code":1}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":-5,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#,
            r#"{"jsonrpc":2.0,"id":1,"method":"x"}"#,
            r#"{"jsonrpc":"2.0 ","id":1,"method":"x"}"#,
            r#"{"id":1,"method":"x"}"#,
            r#"{}"#,
            r#"  { "jsonrpc" : "2.0" , "id" : 1 , "method" : "x" }  "#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","id":2}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","id":null}"#,
            r#"{"jsonrpc":"1.0","jsonrpc":"2.0","id":1,"method":"y","method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1},"params":{"b":2}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","extra":{"deep":[1,2,{"z":null}]}}"#,
            r#"{"jsonrpc":"2.0","\u0069d":1,"m\u0065thod":"x\n\u2028"}"#,
            r#"{"$serde_json::private::RawValue":"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}"}"#,
            r#"{"$serde_json::private::RawValue":"3"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","$serde_json::private::RawValue":"3"}"#,
            r#"{"$serde_json::private::Number":"3"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","f":1e400}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x"} x"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x""#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x",}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"\ud800"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a	b"}"#,
            "[]",
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}]",
            "3",
            "\"s\"",
            "null",
            "",
            "not json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for n in [126, 127, 128, 129, 100_000] {
            lines.push(deep(n));
            lines.push(format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"x","extra":{}}}"#,
                deep(n)
            ));
            lines.push(format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"a":{}}}}}"#,
                deep(n)
            ));
        }
        let mut bytes: Vec<Vec<u8>> = lines.into_iter().map(String::into_bytes).collect();
        bytes.push(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}".to_vec());
        bytes.push(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}\xff".to_vec());
        for line in bytes {
            assert_eq!(
                parse_line(&line),
                parse_line_as_value(&line),
                "{}",
                String::from_utf8_lossy(&line)
            );
        }
    }

    proptest::proptest! {
        /// Objects of any members named like the envelope's (and others),
        /// in any order, repeated, of any JSON type.
        #[test]
        fn any_object_line_reads_as_its_value(
            members in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "id", "jsonrpc", "method", "params", "result", "error", "x", "",
                    ]),
                    proptest::prop_oneof![
                        proptest::strategy::Just(json!(null)),
                        proptest::strategy::Just(json!("2.0")),
                        proptest::strategy::Just(json!("x/y")),
                        proptest::strategy::Just(json!(7)),
                        proptest::strategy::Just(json!(-7)),
                        proptest::strategy::Just(json!(7.5)),
                        proptest::strategy::Just(json!(true)),
                        proptest::strategy::Just(json!([1, "a"])),
                        proptest::strategy::Just(json!({"sessionId": "s", "n": 1})),
                        proptest::strategy::Just(json!({})),
                    ],
                ),
                0..8,
            )
        ) {
            let body: Vec<String> = members
                .iter()
                .map(|(k, v)| format!("{}:{}", json!(k), v))
                .collect();
            let line = format!("{{{}}}", body.join(","));
            proptest::prop_assert_eq!(
                parse_line(line.as_bytes()),
                parse_line_as_value(line.as_bytes())
            );
        }
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
            // An error written in today's shape, spliced as text: the same
            // line, retryable at its default or not.
            for err in [
                err,
                RpcError::command_rejected("m", "c\u{1}", "stale_revision")
                    .with("currentRevision", json!(7)),
                RpcError::storage_unavailable("disk \"full\""),
                RpcError::overloaded("x").with("retryable", json!(true)),
            ] {
                let raw = serde_json::value::to_raw_value(&err.clone().into_value()).unwrap();
                assert_eq!(error_line_raw(&id, &raw), error_line(&id, &err), "{err}");
            }
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
