//! The payload signature of a command (PROTOCOL.md 4.4): the method plus the
//! params the method defines, defaults applied, unknown members and
//! `commandId` dropped, serialised by RFC 8785 (JSON Canonicalization
//! Scheme) and compared byte for byte.

use serde_json::Value;

/// The canonical signature of `method` with normalised `params`.
///
/// `params` must already have defaults applied and unknown members removed
/// (see [`crate::proto::params`]).
pub fn signature(method: &str, params: &Value) -> String {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(b"{\"method\":");
    write_str(&mut out, method);
    out.extend_from_slice(b",\"params\":");
    if write_plain(&mut out, params) {
        out.push(b'}');
        // Only whole `str`s and ASCII were written.
        return String::from_utf8(out).expect("UTF-8 in, UTF-8 out");
    }
    jcs(method, params)
}

/// The general RFC 8785 serialisation, through `serde_jcs`: a deep copy
/// of `params` and about 20k instructions a command, which is why
/// [`signature`] takes it only for values [`write_plain`] declines.
fn jcs(method: &str, params: &Value) -> String {
    let v = serde_json::json!({ "method": method, "params": params });
    // JCS serialisation of a serde_json::Value cannot fail: every number a
    // Value holds is finite.
    serde_jcs::to_string(&v).expect("canonical JSON of a Value")
}

/// The largest integer every JSON number reader (an IEEE double) holds
/// exactly; JCS prints integers up to it as their digits.
const EXACT_INT: u64 = 1 << 53;

/// Writes `v` as RFC 8785 would when that is plain serde_json output with
/// members in map order, and returns `false` (leaving `out` unspecified)
/// when it might not be: a number that is not an integer of magnitude at
/// most 2^53 (JCS prints every number as the shortest double, e.g. `1.0`
/// as `1`), or a member name holding a character at or above U+E000,
/// where UTF-16 order (JCS's) and code point order (the map's) can differ.
/// String escapes are the same in both: `\"`, `\\`, the short escapes
/// `\b \f \n \r \t`, other controls as lowercase `\u00xx`.
fn write_plain(out: &mut Vec<u8>, v: &Value) -> bool {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => {
            let digits = match (n.as_u64(), n.as_i64()) {
                (Some(u), _) if u <= EXACT_INT => u.to_string(),
                (None, Some(i)) if i.unsigned_abs() <= EXACT_INT => i.to_string(),
                _ => return false,
            };
            out.extend_from_slice(digits.as_bytes());
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if !write_plain(out, item) {
                    return false;
                }
            }
            out.push(b']');
        }
        Value::Object(members) => {
            out.push(b'{');
            for (i, (k, item)) in members.iter().enumerate() {
                // UTF-8 lead bytes of U+E000 and above are 0xEE..; no
                // other byte of a UTF-8 string reaches 0xEE.
                if k.bytes().any(|b| b >= 0xEE) {
                    return false;
                }
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, k);
                out.push(b':');
                if !write_plain(out, item) {
                    return false;
                }
            }
            out.push(b'}');
        }
    }
    true
}

/// A JSON string as serde_json writes it (JCS's escapes).
fn write_str(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("writing to a Vec cannot fail");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn member_order_and_whitespace_do_not_matter() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":[1, 2]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{ "a" : [1,2], "b" : 1 }"#).unwrap();
        assert_eq!(signature("m", &a), signature("m", &b));
    }

    #[test]
    fn different_values_or_methods_differ() {
        assert_ne!(
            signature("m", &json!({"a":1})),
            signature("m", &json!({"a":2}))
        );
        assert_ne!(
            signature("m", &json!({"a":1})),
            signature("n", &json!({"a":1}))
        );
    }

    #[test]
    fn numbers_are_canonical() {
        let a: Value = serde_json::from_str(r#"{"x":1.0}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"x":1}"#).unwrap();
        assert_eq!(signature("m", &a), signature("m", &b));
    }
    /// Values drawn to cover both paths: integers around 2^53, floats,
    /// escapes and control characters, member names with characters on
    /// both sides of U+E000 (where UTF-16 and code point order differ).
    fn value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let text = prop::sample::select(vec![
            "",
            "a",
            "b",
            "\"",
            "\\",
            "\n\t\r\u{8}\u{c}",
            "\u{1}\u{1f}\u{7f}",
            "/",
            "é",
            "\u{2028}",
            "\u{e000}",
            "\u{ffff}",
            "\u{10000}",
            "\u{1f600}",
            "z\u{fffd}",
        ])
        .prop_map(str::to_string);
        let key = prop::collection::vec(text.clone(), 1..3).prop_map(|p| p.concat());
        let number = prop_oneof![
            (-(1i64 << 54)..(1i64 << 54)).prop_map(Value::from),
            prop::sample::select(vec![(1u64 << 53) - 1, 1 << 53, (1 << 53) + 1, u64::MAX, 0])
                .prop_map(Value::from),
            prop::sample::select(vec![0.5, 1.0, -0.0, 1e21, 1e-7, 123.456, 5e-324])
                .prop_map(Value::from),
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            number,
            text.prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(key.clone(), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// The fast path writes what serde_jcs writes, or declines.
        #[test]
        fn the_signature_is_serde_jcs_output(params in value()) {
            proptest::prop_assert_eq!(signature("m/x", &params), jcs("m/x", &params));
        }
    }

    #[test]
    fn typical_params_take_the_fast_path_and_odd_ones_do_not() {
        let mut out = Vec::new();
        let typical = json!({"sessionId": "s-1", "expectedRevision": 3,
            "input": [{"type": "text", "text": "hi \"there\"\n"}], "set": {"k": null}});
        assert!(write_plain(&mut out, &typical));
        for odd in [
            json!({"x": 1.5}),
            json!({"x": 1u64 << 60}),
            json!({"\u{e000}": 1}),
        ] {
            assert!(!write_plain(&mut Vec::new(), &odd), "{odd}");
            assert_eq!(signature("m", &odd), jcs("m", &odd));
        }
        // Supplementary and U+E000.. names: UTF-16 order puts the former first.
        let v: Value = serde_json::from_str(r#"{"\ue000":1,"\ud83d\ude00":2}"#).unwrap();
        assert_eq!(
            signature("m", &v),
            "{\"method\":\"m\",\"params\":{\"\u{1f600}\":2,\"\u{e000}\":1}}"
        );
    }
}
