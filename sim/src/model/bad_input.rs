//! Lines a host must refuse before reading them as a command or a read
//! (PROTOCOL.md 1 and 3), and the refusal each one earns, in the error
//! precedence of section 1: the frame limit, parse, then the request's
//! envelope, then initialization, method, params.
//!
//! Written from the spec: the JSON-RPC envelope (a request is an object
//! with `jsonrpc: "2.0"`, a string `method` and an `id` that is a string
//! or an integer; a batch is refused), the method table of section 4, and
//! the params each method requires. It judges only the defects it can
//! name for certain: a line it does not classify goes the ordinary way
//! (and a well-formed line always does).

use serde_json::Value;

use super::wire::{CARRIERLESS_METHODS, DURABLE_METHODS};
use crate::moves::FRAME_LIMIT_BYTES;

/// Every method PROTOCOL.md 4 defines a host answers.
const METHODS: [&str; 17] = [
    "initialize",
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
    "view/subscribe",
    "view/unsubscribe",
    "view/page",
    "session/read",
    "approval/listPending",
];

/// The refusal a line must get.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// `error.code`.
    pub code: i64,
    /// `error.data.kind`.
    pub kind: &'static str,
    /// `error.data.field` (PROTOCOL.md 3, ext), for `invalidParams`: the
    /// field, or one of its members (`input` covers `input.type`).
    pub field: Option<&'static str>,
    /// `error.data.limitBytes`, for `inputTooLarge`.
    pub limit: Option<u64>,
    /// The `id` of the answer: the request's, or `null` when the line has
    /// none the host could read.
    pub id: Value,
    /// The `commandId` string in the line's params, if it has one.
    pub cid: Option<String>,
}

impl Refusal {
    fn new(code: i64, kind: &'static str, id: Value) -> Refusal {
        Refusal {
            code,
            kind,
            field: None,
            limit: None,
            id,
            cid: None,
        }
    }

    fn too_large() -> Refusal {
        Refusal {
            limit: Some(FRAME_LIMIT_BYTES as u64),
            ..Refusal::new(-32002, "inputTooLarge", Value::Null)
        }
    }

    fn params(field: &'static str, id: Value) -> Refusal {
        Refusal {
            field: Some(field),
            ..Refusal::new(-32602, "invalidParams", id)
        }
    }

    /// The rule a sweep counts for this refusal.
    pub fn rule(&self) -> &'static str {
        match self.code {
            -32002 => "1 inputTooLarge",
            -32602 if self.field == Some("clientInfo") => "2 initialize refused invalidParams",
            -32700 => "3 parseError",
            -32601 => "3 methodNotFound",
            -32602 => "3 invalidParams",
            _ => "3 invalidRequest",
        }
    }

    /// Whether error `e` (an `error` member) is this refusal.
    pub fn is(&self, e: &Value) -> bool {
        e["code"].as_i64() == Some(self.code)
            && e["data"]["kind"] == self.kind
            && self
                .field
                .is_none_or(|f| e["data"]["field"].as_str().is_some_and(|g| names(g, f)))
            && self
                .limit
                .is_none_or(|l| e["data"]["limitBytes"].as_u64() == Some(l))
    }
}

/// Whether `data.field` value `g` names field `f` or one of its members
/// (`f.x`, `f[0]`).
fn names(g: &str, f: &str) -> bool {
    g.strip_prefix(f)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// The refusal of a line over the simulated hosts' frame limit
/// (PROTOCOL.md 1: `-32002 inputTooLarge`, `data.limitBytes`, id `null`),
/// counted without its `\n` and a tolerated `\r`; `None` for any other.
pub fn over_limit(line: &str) -> Option<Refusal> {
    if line.len() <= FRAME_LIMIT_BYTES {
        return None;
    }
    let body = line.strip_suffix('\n').unwrap_or(line);
    let body = body.strip_suffix('\r').unwrap_or(body);
    (body.len() > FRAME_LIMIT_BYTES).then(Refusal::too_large)
}

/// The refusal `line` must get from a host that had read its link's
/// handshake up to `handshake` (as `LinkSt::handshake`: 2 once
/// `initialize` and `initialized` were read), or `None` when the line is
/// not one this module judges (a well-formed request, a notification, a
/// response, a request before the handshake: the handshake's own judge
/// takes those).
pub fn refusal(line: &str, handshake: u8) -> Option<Refusal> {
    if let Some(r) = over_limit(line) {
        return Some(r);
    }
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        return Some(Refusal::new(-32700, "parseError", Value::Null));
    };
    let Value::Object(frame) = v else {
        // A batch, or not an object at all.
        return Some(Refusal::new(-32600, "invalidRequest", Value::Null));
    };
    let id = frame.get("id");
    if id.is_some_and(|i| !is_id(i)) {
        return Some(Refusal::new(-32600, "invalidRequest", Value::Null));
    }
    let reply = id.cloned().unwrap_or(Value::Null);
    if frame.get("jsonrpc") != Some(&Value::from("2.0")) {
        return Some(Refusal::new(-32600, "invalidRequest", reply));
    }
    let method = match frame.get("method") {
        // A response (the client's answer to a server request).
        None if id.is_some() && (frame.contains_key("result") || frame.contains_key("error")) => {
            return None
        }
        Some(Value::String(m)) => m.as_str(),
        _ => return Some(Refusal::new(-32600, "invalidRequest", reply)),
    };
    // A notification is never answered.
    let id = id?;
    let empty = Value::Object(serde_json::Map::new());
    request_refusal(id, method, frame.get("params").unwrap_or(&empty), handshake)
}

/// [`refusal`] of a line already read as a request (`params` an empty
/// object when it had none) whose `jsonrpc` is `"2.0"`: the same answer
/// without reading the line again.
pub fn request_refusal(id: &Value, method: &str, params: &Value, handshake: u8) -> Option<Refusal> {
    if !is_id(id) {
        return Some(Refusal::new(-32600, "invalidRequest", Value::Null));
    }
    let cid = params
        .get("commandId")
        .and_then(Value::as_str)
        .map(str::to_string);
    checked(id, method, params, handshake).map(|r| Refusal { cid, ..r })
}

/// A request `id` is a string or an integer (PROTOCOL.md 1).
fn is_id(id: &Value) -> bool {
    match id {
        Value::String(_) => true,
        Value::Number(n) => n.is_i64() || n.is_u64(),
        _ => false,
    }
}

/// The method, then the params (PROTOCOL.md 1's precedence), of a
/// request with a valid envelope.
fn checked(id: &Value, method: &str, params: &Value, handshake: u8) -> Option<Refusal> {
    let reply = id.clone();
    // The first `initialize` with bad params is refused, and the link
    // stays uninitialized (msp/REFERENCE.md: "a hyphenated
    // `clientInfo.name` gets `invalidParams`"); a later one is the
    // handshake judge's (`alreadyInitialized` is the initialization
    // check, before the params).
    if method == "initialize" {
        return match (handshake, params) {
            (0, Value::Object(_)) if !client_info_ok(params) => {
                Some(Refusal::params("clientInfo", reply))
            }
            (0, Value::Object(_)) | (1.., _) => None,
            (0, _) => Some(Refusal::params("params", reply)),
        };
    }
    // Before the handshake the handshake's judge decides
    // (`notInitialized` comes before the method and the params).
    if handshake != 2 {
        return None;
    }
    if !METHODS.contains(&method) {
        return Some(Refusal::new(-32601, "methodNotFound", reply));
    }
    let Value::Object(params) = params else {
        return Some(Refusal::params("params", reply));
    };
    let get = |f: &str| params.get(f).filter(|v| !v.is_null());
    let is_command = DURABLE_METHODS.contains(&method) || CARRIERLESS_METHODS.contains(&method);
    if is_command
        && !get("commandId")
            .and_then(Value::as_str)
            .is_some_and(is_uuid_v7)
    {
        return Some(Refusal::params("commandId", reply));
    }
    let session_required = method != "session/start";
    match get("sessionId") {
        None if session_required => return Some(Refusal::params("sessionId", reply)),
        Some(s) if !s.as_str().is_some_and(is_uuid) => {
            return Some(Refusal::params("sessionId", reply))
        }
        _ => {}
    }
    // Each method's own params (PROTOCOL.md 4.1, 4.2); `null` is absent.
    let text = |f: &str| get(f).is_none_or(Value::is_string);
    let flag = |f: &str| get(f).is_none_or(Value::is_boolean);
    let one_of = |f: &str, options: &[&str]| {
        get(f).is_none_or(|v| v.as_str().is_some_and(|s| options.contains(&s)))
    };
    let bad = |f: &'static str| Some(Refusal::params(f, reply.clone()));
    match method {
        "turn/steer"
            if !get("expectedTurnId")
                .and_then(Value::as_str)
                .is_some_and(is_uuid_v7) =>
        {
            bad("expectedTurnId")
        }
        // PROTOCOL.md 4.1: `input: [{type: "text", text}]`, non-empty.
        "turn/start" | "turn/steer" => match get("input") {
            Some(Value::Array(parts)) if !parts.is_empty() && parts.iter().all(text_part) => {
                if one_of("ifBusy", &["queue", "steer", "replace"]) {
                    None
                } else {
                    bad("ifBusy")
                }
            }
            _ => bad("input"),
        },
        // PROTOCOL.md 2: a turn id is its command id, a UUIDv7.
        "turn/unqueue"
            if !get("turnId")
                .and_then(Value::as_str)
                .is_some_and(is_uuid_v7) =>
        {
            bad("turnId")
        }
        "turn/interrupt" | "turn/cancel"
            if get("turnId").is_some_and(|t| !t.as_str().is_some_and(is_uuid_v7)) =>
        {
            bad("turnId")
        }
        "session/resume" if !text("cursor") => bad("cursor"),
        "session/resume" | "session/read" if !flag("excludeItems") => bad("excludeItems"),
        "approval/decide" => {
            let req = get("requirementId");
            if !get("approvalId").is_some_and(Value::is_string) {
                bad("approvalId")
            } else if !req.is_some_and(|r| r["approvalId"].is_string() && r["sourceIndex"].is_u64())
            {
                bad("requirementId")
            } else if !get("choiceId").is_some_and(Value::is_string) {
                bad("choiceId")
            } else {
                None
            }
        }
        "view/page" => {
            if !get("limit")
                .and_then(Value::as_u64)
                .is_some_and(|l| (1..=1000).contains(&l))
            {
                bad("limit")
            } else if !one_of("direction", &["forward", "backward"]) {
                bad("direction")
            } else if !text("cursor") {
                bad("cursor")
            } else {
                None
            }
        }
        "view/subscribe" if !text("after") => bad("after"),
        "turn/interrupt" | "turn/cancel" if get("retract") == Some(&Value::Bool(true)) => {
            bad("retract")
        }
        "state/update" if !get("expectedRevision").is_some_and(Value::is_u64) => {
            bad("expectedRevision")
        }
        "state/update" if !get("set").is_some_and(Value::is_object) => bad("set"),
        _ => None,
    }
}

/// An input part this host takes: `{type: "text", text}` (PROTOCOL.md
/// 4.1).
fn text_part(p: &Value) -> bool {
    p["type"] == "text" && p["text"].is_string()
}

/// `initialize`'s `clientInfo` (public schema `ClientInfo`): a `name`
/// matching `^[a-z0-9_]+$` and a string `version`.
fn client_info_ok(params: &Value) -> bool {
    let ci = &params["clientInfo"];
    ci["name"].as_str().is_some_and(|n| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    }) && ci["version"].is_string()
}

/// A UUID in its hyphenated form (8-4-4-4-12 hexadecimal digits, either
/// case).
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// A UUIDv7 (RFC 9562): version nibble 7, variant bits `10`.
pub fn is_uuid_v7(s: &str) -> bool {
    let b = s.as_bytes();
    is_uuid(s) && b[14] == b'7' && matches!(b[19].to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::moves::{uuid_v4, Malformed};
    use serde_json::json;

    const SID: &str = "0190b6a4-7c3e-7a11-8f00-000000000001";
    const CID: &str = "0190b6a4-7c3e-7a11-8f00-0000000000c1";

    /// What every defect of the simulator's `Move::Malformed` must earn.
    #[test]
    fn each_defect_of_the_malformed_move_earns_its_refusal() {
        let id = json!("bad-1");
        let v4 = uuid_v4(7);
        assert!(is_uuid(&v4) && !is_uuid_v7(&v4));
        for kind in Malformed::ALL {
            let (method, mut params) = kind.command(SID, 3, 1);
            params["commandId"] = json!(CID);
            // The command it is made from is well-formed.
            let good = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            assert_eq!(refusal(&good.to_string(), 2), None, "{kind:?}");
            let line = kind.line(&id, method, &params, &v4);
            let line = std::str::from_utf8(&line).unwrap();
            let Some(r) = refusal(line, 2) else {
                // Never answered; and a trailing `\r` is no defect.
                assert!(
                    matches!(
                        kind,
                        Malformed::UnknownNotification
                            | Malformed::TrailingCr
                            | Malformed::AtLimit
                            | Malformed::PageLimitMax
                    ),
                    "{kind:?}: {line}"
                );
                continue;
            };
            let want = match kind {
                Malformed::NotJson => (-32700, None, Value::Null),
                Malformed::Batch | Malformed::BoolId => (-32600, None, Value::Null),
                Malformed::OldJsonrpc | Malformed::NoMethod => (-32600, None, id.clone()),
                Malformed::UnknownMethod | Malformed::UnknownMethodArrayParams => {
                    (-32601, None, id.clone())
                }
                Malformed::ArrayParams => (-32602, Some("params"), id.clone()),
                Malformed::NoCommandId
                | Malformed::V4CommandId
                | Malformed::CommandIdUnhyphenated => (-32602, Some("commandId"), id.clone()),
                Malformed::NoSessionId | Malformed::NumericSessionId => {
                    (-32602, Some("sessionId"), id.clone())
                }
                Malformed::EmptyInput | Malformed::ImagePart | Malformed::TextNotString => {
                    (-32602, Some("input"), id.clone())
                }
                Malformed::OverLimit => (-32002, None, Value::Null),
                Malformed::IfBusyUnknown => (-32602, Some("ifBusy"), id.clone()),
                Malformed::SetNotObject => (-32602, Some("set"), id.clone()),
                Malformed::RevisionFraction => (-32602, Some("expectedRevision"), id.clone()),
                Malformed::ResumeCursorNumber => (-32602, Some("cursor"), id.clone()),
                Malformed::DecideNoChoice => (-32602, Some("choiceId"), id.clone()),
                Malformed::PageLimitZero | Malformed::PageLimitOver => {
                    (-32602, Some("limit"), id.clone())
                }
                Malformed::PageDirection => (-32602, Some("direction"), id.clone()),
                Malformed::ReadExcludeItemsText => (-32602, Some("excludeItems"), id.clone()),
                Malformed::InterruptTurnIdMalformed => (-32602, Some("turnId"), id.clone()),
                Malformed::Retract => (-32602, Some("retract"), id.clone()),
                Malformed::RevisionAsText => (-32602, Some("expectedRevision"), id.clone()),
                Malformed::UnknownNotification
                | Malformed::TrailingCr
                | Malformed::AtLimit
                | Malformed::PageLimitMax => {
                    panic!("{kind:?} refused: {r:?}")
                }
            };
            assert_eq!((r.code, r.field, r.id.clone()), want, "{kind:?}: {line}");
            // Read first as a frame (the model's way for most lines), the
            // same refusal.
            if kind == Malformed::OverLimit {
                assert_eq!(line.len(), FRAME_LIMIT_BYTES + 2, "{line}");
                assert_eq!(r.limit, Some(FRAME_LIMIT_BYTES as u64));
                continue;
            }
            if let Some(crate::model::wire::Frame::Request { id, method, params }) =
                crate::model::wire::parse_str(line)
            {
                assert_eq!(
                    request_refusal(&id, &method, &params, 2),
                    (kind != Malformed::OldJsonrpc).then_some(r),
                    "{kind:?}"
                );
            }
        }
    }

    #[test]
    fn well_formed_lines_and_the_handshake_are_left_alone() {
        for (line, hs) in [
            (r#"{"jsonrpc":"2.0","method":"initialized"}"#, 2),
            (r#"{"jsonrpc":"2.0","id":3,"result":{}}"#, 2),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
                2,
            ),
            // Before the handshake, `notInitialized` comes first.
            (r#"{"jsonrpc":"2.0","id":1,"method":"nope","params":[]}"#, 1),
            (
                r#"{"jsonrpc":"2.0","id":"s","method":"session/read","params":{"sessionId":"0190B6A4-7C3E-7A11-8F00-000000000001"}}"#,
                2,
            ),
        ] {
            assert_eq!(refusal(line, hs), None, "{line}");
        }
        // Parse errors and envelopes come before the handshake.
        assert_eq!(refusal("{", 0).map(|r| r.code), Some(-32700));
        assert_eq!(refusal("[]", 0).map(|r| r.code), Some(-32600));
        assert_eq!(
            refusal(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#, 0).map(|r| r.id),
            Some(Value::Null)
        );
    }

    #[test]
    fn a_line_at_the_frame_limit_is_read_and_one_byte_more_is_not() {
        let id = json!("bad-1");
        let (method, mut params) = Malformed::AtLimit.command(SID, 3, 1);
        params["commandId"] = json!(CID);
        let at = Malformed::AtLimit.line(&id, method, &params, "");
        assert_eq!(at.len(), FRAME_LIMIT_BYTES + 1);
        let at = std::str::from_utf8(&at).unwrap();
        assert_eq!(refusal(at, 2), None);
        // A tolerated `\r` is not counted.
        assert_eq!(over_limit(&format!("{}\r\n", at.trim_end())), None);
        let over = format!(" {at}");
        assert_eq!(refusal(&over, 2).map(|r| r.code), Some(-32002));
    }

    #[test]
    fn the_first_initialize_needs_a_schema_client_name() {
        let init = |name: Value| {
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"clientInfo": {"name": name, "version": "1"}}})
            .to_string()
        };
        for bad in [json!("sim-client"), json!("Sim"), json!(""), json!(7)] {
            let r = refusal(&init(bad.clone()), 0).expect("refused");
            assert_eq!(
                (r.code, r.field, r.id.clone()),
                (-32602, Some("clientInfo"), json!(1))
            );
            assert_eq!(r.rule(), "2 initialize refused invalidParams");
            // A later one is `alreadyInitialized` (the handshake judge's).
            assert_eq!(refusal(&init(bad), 1), None);
        }
        assert_eq!(refusal(&init(json!("sim_client_2")), 0), None);
        let no_version = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"a"}}}"#;
        assert!(refusal(no_version, 0).is_some());
    }

    #[test]
    fn a_refusal_is_judged_by_code_kind_and_field() {
        let r = Refusal::params("input", json!(1));
        assert!(r.is(&json!({"code": -32602, "message": "m", "data": {"kind": "invalidParams", "field": "input"}})));
        assert!(!r.is(&json!({"code": -32602, "message": "m", "data": {"kind": "invalidParams", "field": "sessionId"}})));
        assert!(!r.is(&json!({"code": -32602, "message": "m", "data": {"kind": "invalidParams"}})));
        assert!(!r.is(&json!({"code": -32600, "message": "m", "data": {"kind": "invalidParams", "field": "input"}})));
        // A member of the field names it too; another field does not.
        assert!(r.is(&json!({"code": -32602, "message": "m", "data": {"kind": "invalidParams", "field": "input.type"}})));
        assert!(r.is(&json!({"code": -32602, "message": "m", "data": {"kind": "invalidParams", "field": "input[0]"}})));
        assert!(!r.is(&json!({"code": -32602, "message": "m", "data": {"kind": "invalidParams", "field": "inputs"}})));
        let big = Refusal::too_large();
        let e = |l: u64| json!({"code": -32002, "message": "m", "data": {"kind": "inputTooLarge", "limitBytes": l}});
        assert!(big.is(&e(FRAME_LIMIT_BYTES as u64)));
        assert!(!big.is(&e(FRAME_LIMIT_BYTES as u64 + 1)));
        let m = Refusal::new(-32601, "methodNotFound", json!(1));
        assert!(m.is(&json!({"code": -32601, "message": "m", "data": {"kind": "methodNotFound"}})));
        assert!(!m.is(&json!({"code": -32601, "message": "m", "data": {"kind": "invalidRequest"}})));
    }
}
