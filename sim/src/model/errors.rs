//! The error table of PROTOCOL.md 3 (the public schema's `errors`
//! table, narrowed to the codes this host uses): which `data.kind` each
//! code carries, and whether the error is retryable. Every error a host
//! answers is judged against it, whatever request it answers.
//!
//! `retryable` follows the public `ErrorData` rule: absent means the
//! code's default, present overrides it. This host overrides it only for
//! `storageUnavailable` (`-32603`, `retryable: true`); so for every error
//! the effective value must be the default, except that one.

use serde_json::Value;

/// `(code, kinds, retryable by default)`: the codes PROTOCOL.md 3 lists,
/// each with the kinds it may carry (the first is its own; the others are
/// the schema's override kinds this host uses).
const TABLE: [(i64, &[&str], bool); 16] = [
    (-32700, &["parseError"], false),
    (
        -32600,
        &["invalidRequest", "notInitialized", "alreadyInitialized"],
        false,
    ),
    (-32601, &["methodNotFound"], false),
    (-32602, &["invalidParams"], false),
    (-32603, &["internal"], false),
    (-32001, &["overloaded"], true),
    (-32002, &["inputTooLarge"], false),
    (-32011, &["notFound"], false),
    (-32020, &["sessionNotFound"], false),
    (-32021, &["sessionInUse"], false),
    (-32024, &["sessionNotLoaded"], false),
    (-32030, &["commandRejected"], false),
    (-32050, &["approvalNotFound"], false),
    (-32051, &["approvalAlreadyResolved"], false),
    (-32052, &["approvalChoiceInvalid"], false),
    (-32053, &["approvalRequirementStale"], false),
];

/// What is wrong with error object `e` by the table, if anything: an
/// unknown code, a kind the code does not carry, a `message` that is not
/// text, an `internal` error that is not one of the two this host names
/// (`storageUnavailable`, `logCorrupt`: any other is a bug), or a
/// `retryable` other than the code's (`storageUnavailable`: true).
pub fn defect(e: &Value) -> Option<String> {
    let code = e["code"].as_i64()?;
    let Some((_, kinds, default)) = TABLE.iter().find(|(c, _, _)| *c == code) else {
        return Some(format!("code {code} is none of PROTOCOL.md 3's"));
    };
    let kind = e["data"]["kind"].as_str();
    if !kind.is_some_and(|k| kinds.contains(&k)) {
        return Some(format!(
            "code {code} with data.kind {:?}",
            e["data"]["kind"]
        ));
    }
    if !e["message"].is_string() {
        return Some("a message that is not text".into());
    }
    let reason = e["data"]["reason"].as_str();
    if code == -32603 && !matches!(reason, Some("storageUnavailable" | "logCorrupt")) {
        return Some(format!("an internal error (a bug) with reason {reason:?}"));
    }
    let want = *default || (code == -32603 && reason == Some("storageUnavailable"));
    let got = match &e["data"]["retryable"] {
        Value::Null => *default,
        Value::Bool(b) => *b,
        other => return Some(format!("data.retryable {other}")),
    };
    (got != want).then(|| format!("retryable {got} where the table says {want}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(code: i64, data: Value) -> Value {
        json!({"code": code, "message": "m", "data": data})
    }

    #[test]
    fn the_table_judges_kind_retryable_and_reason() {
        for ok in [
            err(-32600, json!({"kind": "notInitialized"})),
            err(-32001, json!({"kind": "overloaded"})),
            err(-32001, json!({"kind": "overloaded", "retryable": true})),
            err(
                -32030,
                json!({"kind": "commandRejected", "retryable": false}),
            ),
            err(
                -32603,
                json!({"kind": "internal", "reason": "storageUnavailable", "retryable": true}),
            ),
            err(-32603, json!({"kind": "internal", "reason": "logCorrupt"})),
        ] {
            assert_eq!(defect(&ok), None, "{ok}");
        }
        for bad in [
            err(-32021, json!({"kind": "sessionNotLoaded"})),
            err(-32099, json!({"kind": "x"})),
            err(
                -32030,
                json!({"kind": "commandRejected", "retryable": true}),
            ),
            err(-32001, json!({"kind": "overloaded", "retryable": false})),
            err(
                -32603,
                json!({"kind": "internal", "reason": "storageUnavailable"}),
            ),
            err(-32603, json!({"kind": "internal"})),
            err(-32602, json!({})),
            json!({"code": -32602, "data": {"kind": "invalidParams"}}),
        ] {
            assert!(defect(&bad).is_some(), "{bad}");
        }
    }
}
