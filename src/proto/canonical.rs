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
    let v = serde_json::json!({ "method": method, "params": params });
    // JCS serialisation of a serde_json::Value cannot fail: every number a
    // Value holds is finite.
    serde_jcs::to_string(&v).expect("canonical JSON of a Value")
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
}
