//! Members of a JSON object read from its text, without building its tree:
//! each as the text it is spelled with, or as the string or integer a
//! `Value` would give. The host keeps event params, items and answers as
//! text ([`super::session::JsonText`]); what it reads of them, it reads
//! here.
//!
//! Reading follows `Value` indexing: a member that is absent, or of
//! another type, reads as absent; the last of a repeated member wins;
//! text that is not an object has no members.

use serde::de::{DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The members `keys` of the JSON object `text`, each as its text; `None`
/// for each that is absent, all `None` when `text` is no object.
pub(crate) fn members_raw<'a, const N: usize>(
    text: &'a str,
    keys: [&str; N],
) -> [Option<&'a RawValue>; N] {
    struct Find<'k, const N: usize>(&'k [&'k str; N]);
    impl<'de, const N: usize> Visitor<'de> for Find<'_, N> {
        type Value = [Option<&'de RawValue>; N];
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut found = [None; N];
            while let Some(i) = m.next_key_seed(KeyIn(self.0))? {
                match i {
                    Some(i) => found[i] = Some(m.next_value()?),
                    None => {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(found)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_map(Find(&keys)).unwrap_or([None; N])
}

/// The string members `keys` of the JSON object `text` (see the module);
/// `None` for each that is absent or no string.
pub(crate) fn members_str<const N: usize>(text: &str, keys: [&str; N]) -> [Option<String>; N] {
    members_raw(text, keys).map(|m| m.and_then(as_str))
}

/// The string a member's text spells, when it is a string.
pub(crate) fn as_str(raw: &RawValue) -> Option<String> {
    let t = raw.get();
    if t.starts_with('"') {
        serde_json::from_str(t).ok()
    } else {
        None
    }
}

/// The integer a member's text spells, when `Value::as_u64` would read
/// one: a non-negative integer within `u64`.
pub(crate) fn as_u64(raw: &RawValue) -> Option<u64> {
    serde_json::from_str(raw.get()).ok()
}

/// Whether JSON text that serde_json already read as one raw value (so
/// well-formed) is also text a `Value` holds: nested no deeper than
/// serde_json lets a `Value` nest, every number within `f64`, every `\u`
/// escape a character. Text kept as read (an event's params, an answer,
/// an item) must be, or a later read of it as a tree would fail where
/// decoding the record as a tree refuses it. A plain scan decides for the
/// text the host writes (shallow, no exponents, no escapes of the `D`
/// range); anything else is parsed as a `Value` to decide.
pub(crate) fn value_readable(text: &str) -> bool {
    plainly_readable(text) || serde_json::from_str::<serde_json::Value>(text).is_ok()
}

/// [`value_readable`] for plain reasons, seen in one pass; `false` says
/// nothing.
fn plainly_readable(text: &str) -> bool {
    let b = text.as_bytes();
    let (mut i, mut depth) = (0, 0u32);
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                loop {
                    let Some(j) = memchr::memchr2(b'"', b'\\', &b[i..]) else {
                        return false;
                    };
                    i += j;
                    if b[i] == b'"' {
                        break;
                    }
                    if b.get(i + 1) == Some(&b'u') && matches!(b.get(i + 2), Some(b'd' | b'D')) {
                        return false;
                    }
                    i += 2;
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > 64 {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'-' | b'0'..=b'9' => {
                let start = i;
                while b
                    .get(i + 1)
                    .is_some_and(|c| matches!(c, b'0'..=b'9' | b'.' | b'-' | b'+' | b'e' | b'E'))
                {
                    i += 1;
                }
                let number = &b[start..=i];
                if number.len() > 300 || number.iter().any(|c| matches!(c, b'e' | b'E')) {
                    return false;
                }
            }
            _ => {}
        }
        i += 1;
    }
    true
}

/// A member name matched against the keys sought, as read (escapes
/// resolved), without keeping it: its index among them, if any.
struct KeyIn<'k, const N: usize>(&'k [&'k str; N]);

impl<'de, const N: usize> DeserializeSeed<'de> for KeyIn<'_, N> {
    type Value = Option<usize>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<const N: usize> Visitor<'_> for KeyIn<'_, N> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a member name")
    }
    fn visit_str<E: serde::de::Error>(self, k: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|key| *key == k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn members_read_from_text_are_what_value_indexing_reads() {
        let keys = ["a", "b", "n", "t\"q"];
        let texts = [
            r#"{"a":"x","b":1,"n":7,"t\"q":"quoted name"}"#,
            r#"{"a":"first","a":"last","b":{"c":[1,"s"]},"n":-1}"#,
            r#"{"\u0061":"escaped name","n":1.0,"b":null}"#,
            r#"{"n":18446744073709551615,"b":"\ud83d\ude00 \n"}"#,
            r#"{"n":18446744073709551616,"a":true}"#,
            r#"{}"#,
            r#"[1,2]"#,
            "3",
            "null",
            r#""s""#,
        ];
        for t in texts {
            let v: Value = serde_json::from_str(t).unwrap();
            let raw = members_raw(t, keys);
            for (k, r) in keys.iter().zip(raw) {
                let want = v.get(k);
                let got: Option<Value> = r.map(|r| serde_json::from_str(r.get()).unwrap());
                assert_eq!(got.as_ref(), want, "{t} {k}");
                assert_eq!(
                    r.and_then(as_str).as_deref(),
                    want.and_then(Value::as_str),
                    "{t} {k}"
                );
                assert_eq!(r.and_then(as_u64), want.and_then(Value::as_u64), "{t} {k}");
            }
            let strs = members_str(t, keys);
            for (k, s) in keys.iter().zip(strs) {
                assert_eq!(s.as_deref(), v.get(k).and_then(Value::as_str), "{t} {k}");
            }
        }
    }

    #[test]
    fn text_is_value_readable_exactly_when_a_value_reads_it() {
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let texts = [
            r#"{"a":[1,-2.5,true,false,null],"s":"x\\\"y\\u00e9"}"#.to_string(),
            r#"{"n":1e300,"m":-1.5E-7}"#.to_string(),
            "1e999".to_string(),
            "-1e400".to_string(),
            format!("1{}", "0".repeat(400)),
            format!("1{}", "0".repeat(200)),
            r#""\ud83d\ude00""#.to_string(),
            r#""\ud83d""#.to_string(),
            r#""\ude00""#.to_string(),
            r#""\ud7ff""#.to_string(),
            deep(60),
            deep(100),
            deep(200),
            r#"{"e":"1e999 [[[["}"#.to_string(),
        ];
        for t in &texts {
            let raw: Box<RawValue> = serde_json::from_str(t).unwrap();
            let by_value = serde_json::from_str::<serde_json::Value>(raw.get()).is_ok();
            assert_eq!(value_readable(raw.get()), by_value, "{t}");
        }
        assert!(!value_readable("1e999") && !value_readable(&deep(200)));
    }

    #[test]
    fn a_member_is_its_text_as_written() {
        let v = serde_json::json!({"item": {"itemId": "i", "text": "q\"\u{1}"}, "turnId": "t"});
        let text = serde_json::to_string(&v).unwrap();
        let [item] = members_raw(&text, ["item"]);
        assert_eq!(
            item.unwrap().get(),
            serde_json::to_string(&v["item"]).unwrap()
        );
    }
}
