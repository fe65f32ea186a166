//! Byte-faithful rewriting of a raw JSON line.
//!
//! Transcript lines must reach the other side as recorded: member order,
//! spacing, unknown members and a trailing `\r` included. Only the values
//! that another party minted are substituted (a server-minted `sessionId`
//! the client echoes, a client's request id in a recorded response), so the
//! rewrite works on tokens of the raw text instead of re-serialising a
//! parsed value: every string literal that is a member *value* may be
//! replaced, and the scalar value of the top-level `id` member may be
//! replaced; every other byte is copied unchanged.
//!
//! Fault model: the input may be any text, including text that is not JSON
//! (a transcript may record a malformed frame on purpose). The scanner never
//! panics on such input: an unterminated string or an undecodable literal is
//! copied as is.

use serde_json::Value;

/// Rewrites `raw`: `string(s)` may replace a string member value `s` (any
/// depth, array elements included, member names never); `top_id(v)` may
/// replace the value of the top-level `id` member (number or string). A
/// `None` answer keeps the original token.
pub fn rewrite_raw(
    raw: &str,
    string: &dyn Fn(&str) -> Option<String>,
    top_id: &dyn Fn(&Value) -> Option<Value>,
) -> String {
    let b = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let mut i = 0usize;
    let mut depth = 0usize;
    // The name of the member whose value comes next, at depth 1.
    let mut top_key: Option<String> = None;
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' => {
                let Some(end) = string_end(b, i) else {
                    out.push_str(&raw[i..]);
                    return out;
                };
                let literal = &raw[i..=end];
                let decoded = serde_json::from_str::<String>(literal).ok();
                if is_member_name(b, end + 1) {
                    if depth == 1 {
                        top_key = decoded;
                    }
                    out.push_str(literal);
                } else {
                    let is_top_id = depth == 1 && top_key.as_deref() == Some("id");
                    let replaced = match &decoded {
                        Some(s) if is_top_id => {
                            top_id(&Value::String(s.clone())).map(|v| v.to_string())
                        }
                        Some(s) => string(s).map(|n| Value::String(n).to_string()),
                        None => None,
                    };
                    out.push_str(replaced.as_deref().unwrap_or(literal));
                    if depth == 1 {
                        top_key = None;
                    }
                }
                i = end + 1;
            }
            b'-' | b'0'..=b'9' if depth == 1 && top_key.as_deref() == Some("id") => {
                let start = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let token = &raw[start..i];
                let replaced = serde_json::from_str::<Value>(token)
                    .ok()
                    .and_then(|v| top_id(&v));
                match replaced {
                    Some(v) => out.push_str(&v.to_string()),
                    None => out.push_str(token),
                }
                top_key = None;
            }
            _ => {
                match c {
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => depth = depth.saturating_sub(1),
                    b',' if depth == 1 => top_key = None,
                    _ => {}
                }
                // Copy one whole UTF-8 character.
                let len = utf8_len(c);
                let end = (i + len).min(b.len());
                out.push_str(&raw[i..end]);
                i = end;
            }
        }
    }
    out
}

/// Index of the closing quote of the string literal opening at `start`.
fn string_end(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Whether the next non-blank byte from `from` is `:` (the literal before
/// it is a member name).
fn is_member_name(b: &[u8], from: usize) -> bool {
    b[from.min(b.len())..]
        .iter()
        .find(|c| !matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
        .is_some_and(|c| *c == b':')
}

fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

/// Every string member value of a JSON value (depth first), member names
/// excluded.
pub fn string_values(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| string_values(x, out)),
        Value::Object(o) => o.values().for_each(|x| string_values(x, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn none_s(_: &str) -> Option<String> {
        None
    }
    fn none_v(_: &Value) -> Option<Value> {
        None
    }

    #[test]
    fn untouched_lines_are_copied_byte_for_byte() {
        let raw = "{\"id\": 1 ,\"method\":\"x\",\"params\":{\"a\":\"é\\\"q\",\"b\":[1,\"z\"]}}\r";
        assert_eq!(rewrite_raw(raw, &none_s, &none_v), raw);
        let broken = "{\"id\":1,\"params\":{\"a\":\"unterminated";
        assert_eq!(rewrite_raw(broken, &none_s, &none_v), broken);
        assert_eq!(
            rewrite_raw("not json at all", &none_s, &none_v),
            "not json at all"
        );
    }

    #[test]
    fn string_values_are_replaced_but_member_names_are_not() {
        let raw = r#"{"sessionId":"S","params":{"S":"S","list":["S","T"]}}"#;
        let map = |s: &str| (s == "S").then(|| "N".to_string());
        assert_eq!(
            rewrite_raw(raw, &map, &none_v),
            r#"{"sessionId":"N","params":{"S":"N","list":["N","T"]}}"#
        );
    }

    #[test]
    fn only_the_top_level_id_is_replaced() {
        let raw = r#"{"jsonrpc":"2.0","id":17,"result":{"id":17,"n":17}}"#;
        let map = |v: &Value| (v == &json!(17)).then(|| json!("c-1"));
        assert_eq!(
            rewrite_raw(raw, &none_s, &map),
            r#"{"jsonrpc":"2.0","id":"c-1","result":{"id":17,"n":17}}"#
        );
        let raw = r#"{"id":"b9","method":"m"}"#;
        let map = |v: &Value| (v == &json!("b9")).then(|| json!(4));
        assert_eq!(rewrite_raw(raw, &none_s, &map), r#"{"id":4,"method":"m"}"#);
    }

    #[test]
    fn string_values_are_collected_without_member_names() {
        let mut out = Vec::new();
        string_values(&json!({"a": "x", "b": ["y", 1, {"c": "z"}]}), &mut out);
        out.sort();
        assert_eq!(out, vec!["x", "y", "z"]);
    }
}
