//! JSON written straight into a frame's bytes, the bytes serde_json writes.
//!
//! The host's answers (`session/read`'s snapshot above all) were built as
//! a `serde_json::Value` tree, deep-copying the session's items and `kv`
//! into it, then serialised and dropped: a copy, a walk and a free of
//! every node per answer (issue 10). [`J`] is the same tree with its
//! large members *borrowed* from the session (or kept as the JSON text
//! they already are), written once, in place.
//!
//! The bytes are serde_json's (`to_vec` of the equivalent `Value`): keys
//! in the order a `Value` object keeps them (serde_json's map is sorted,
//! this crate does not enable `preserve_order`), numbers through serde_json,
//! strings escaped as serde_json escapes them (`"`, `\`, and control
//! characters below U+0020; nothing else). A string with nothing to escape
//! is copied as it is; any other goes through serde_json's own writer. The
//! unit tests compare every shape against serde_json.

use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

/// A JSON value to write: a `Value` tree whose leaves and large members
/// are borrowed, so building one copies nothing big.
#[derive(Debug, Clone)]
pub enum J<'a> {
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// An unsigned integer.
    U(u64),
    /// A borrowed string.
    S(&'a str),
    /// An owned string (a cursor or a timestamp made for this answer).
    Str(String),
    /// A borrowed value, written as serde_json writes it.
    V(&'a Value),
    /// An owned value (a small one made for this answer).
    Val(Value),
    /// A borrowed object.
    Map(&'a Map<String, Value>),
    /// JSON text already written by serde_json, copied as it is.
    Raw(&'a RawValue),
    /// An object; members listed in serde_json's key order (sorted).
    Obj(Vec<(&'a str, J<'a>)>),
    /// An array.
    Arr(Vec<J<'a>>),
}

impl<'a> J<'a> {
    /// Appends the JSON text to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            J::Null => out.extend_from_slice(b"null"),
            J::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            J::U(n) => write_u64(out, *n),
            J::S(s) => write_str(out, s),
            J::Str(s) => write_str(out, s),
            J::V(v) => write_value(out, v),
            J::Val(v) => write_value(out, v),
            J::Map(m) => write_map(out, m),
            J::Raw(r) => out.extend_from_slice(r.get().as_bytes()),
            J::Obj(members) => {
                debug_assert!(
                    members.windows(2).all(|w| w[0].0 < w[1].0),
                    "keys in serde_json's order"
                );
                write_object(out, members.iter().map(|(k, v)| (*k, v)));
            }
            J::Arr(items) => write_seq(out, b"[]", items, |out, v| v.write(out)),
        }
    }

    /// The member at `path` (object keys), to change in place; `None` when
    /// the tree has no such member.
    pub fn member_mut(&mut self, path: &[&str]) -> Option<&mut J<'a>> {
        let Some((first, rest)) = path.split_first() else {
            return Some(self);
        };
        match self {
            J::Obj(members) => members
                .iter_mut()
                .find(|(k, _)| k == first)
                .and_then(|(_, v)| v.member_mut(rest)),
            _ => None,
        }
    }

    /// The JSON text as a `Vec`.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }

    /// The same value as a `Value` tree (borrowed members cloned): for the
    /// answers that are also kept (a `session/resume` ack is logged).
    pub fn into_value(self) -> Value {
        match self {
            J::Null => Value::Null,
            J::Bool(b) => Value::Bool(b),
            J::U(n) => Value::Number(n.into()),
            J::S(s) => Value::String(s.to_string()),
            J::Str(s) => Value::String(s),
            J::V(v) => v.clone(),
            J::Val(v) => v,
            J::Map(m) => Value::Object(m.clone()),
            J::Raw(r) => serde_json::from_str(r.get()).expect("serde_json wrote the text"),
            J::Obj(members) => Value::Object(
                members
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.into_value()))
                    .collect(),
            ),
            J::Arr(items) => Value::Array(items.into_iter().map(J::into_value).collect()),
        }
    }
}

/// The same JSON through any serde serializer. Through serde_json's
/// (`serde_json::value::to_raw_value`) the text is exactly [`J::write`]'s,
/// and a `RawValue` is made of it without parsing it back (as
/// `RawValue::from_string` of [`J::write`]'s text would).
impl serde::Serialize for J<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            J::Null => s.serialize_unit(),
            J::Bool(b) => s.serialize_bool(*b),
            J::U(n) => s.serialize_u64(*n),
            J::S(t) => s.serialize_str(t),
            J::Str(t) => s.serialize_str(t),
            J::V(v) => v.serialize(s),
            J::Val(v) => v.serialize(s),
            J::Map(m) => m.serialize(s),
            J::Raw(r) => r.serialize(s),
            J::Obj(members) => {
                let mut m = s.serialize_map(Some(members.len()))?;
                for (k, v) in members {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
            J::Arr(items) => {
                let mut q = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    q.serialize_element(v)?;
                }
                q.end()
            }
        }
    }
}

/// An optional string: the string or `null`.
pub fn opt_str(s: Option<&str>) -> J<'_> {
    s.map_or(J::Null, J::S)
}

/// Appends `n` in decimal (what serde_json writes for an integer).
pub fn write_u64(out: &mut Vec<u8>, n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends a number as serde_json writes it.
fn write_number(out: &mut Vec<u8>, n: &Number) {
    match n.as_u64() {
        Some(u) => write_u64(out, u),
        None => serde_json::to_writer(&mut *out, n).expect("a Vec never fails"),
    }
}

/// Appends `s` as a JSON string, escaped as serde_json escapes it.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    if !needs_escape(s.as_bytes()) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, s).expect("a Vec never fails");
    }
}

/// Whether serde_json escapes any byte of `b`: `"`, `\` or a byte below
/// 0x20 (nothing else). Eight bytes at a time: a word has a byte below
/// `n` (`n` <= 0x80) exactly when `(w - n * L) & !w & H` is non-zero
/// (the "has less" test); a byte equal to `c` is a byte of `w ^ c * L`
/// below 1.
fn needs_escape(b: &[u8]) -> bool {
    const L: u64 = u64::from_ne_bytes([0x01; 8]);
    const H: u64 = u64::from_ne_bytes([0x80; 8]);
    let less = |w: u64, n: u64| w.wrapping_sub(n * L) & !w & H;
    let mut chunks = b.chunks_exact(8);
    let mut any = 0;
    for c in &mut chunks {
        let w = u64::from_ne_bytes(c.try_into().expect("eight bytes"));
        any |= less(w, 0x20) | less(w ^ (b'"' as u64 * L), 1) | less(w ^ (b'\\' as u64 * L), 1);
    }
    any != 0
        || chunks
            .remainder()
            .iter()
            .any(|&c| c < 0x20 || c == b'"' || c == b'\\')
}

/// `brackets[0]`, each item written by `each` with commas between,
/// `brackets[1]`: the shape of every array and object.
fn write_seq<T>(
    out: &mut Vec<u8>,
    brackets: &[u8; 2],
    items: impl IntoIterator<Item = T>,
    mut each: impl FnMut(&mut Vec<u8>, T),
) {
    out.push(brackets[0]);
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        each(out, item);
    }
    out.push(brackets[1]);
}

/// An object of `members`, each a name and a value written in place
/// (the caller lists them in serde_json's key order).
pub(crate) fn write_object<'m, 'j: 'm>(
    out: &mut Vec<u8>,
    members: impl IntoIterator<Item = (&'m str, &'m J<'j>)>,
) {
    write_seq(out, b"{}", members, |out, (k, v)| {
        write_str(out, k);
        out.push(b':');
        v.write(out);
    });
}

fn write_map(out: &mut Vec<u8>, m: &Map<String, Value>) {
    write_seq(out, b"{}", m, |out, (k, v)| {
        write_str(out, k);
        out.push(b':');
        write_value(out, v);
    });
}

/// Appends `v` as serde_json writes it (`serde_json::to_writer`).
pub fn write_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_str(out, s),
        Value::Array(a) => write_seq(out, b"[]", a, write_value),
        Value::Object(m) => write_map(out, m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn strings() -> Vec<String> {
        let mut v: Vec<String> = [
            "",
            "plain",
            "quote \" here",
            "back\\slash",
            "\u{0}\u{1}\u{7}\u{8}\u{9}\u{a}\u{b}\u{c}\u{d}\u{1f}",
            "line\nbreak\r\ttab",
            "del \u{7f} stays",
            "e\u{301} caf\u{e9} \u{4e2d}\u{6587} \u{1f600}",
            "sep \u{2028} \u{2029} para",
            "</script>",
            "long plain string of more than thirty-two bytes, to cross a chunk",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend((0u8..0x80).map(|b| format!("a{}b", b as char)));
        v
    }

    /// Every byte value, alone and at every offset of strings longer than
    /// a word or two (the scan reads eight bytes at a time), next to bytes
    /// that may carry or borrow (0x00, 0x7f, 0x80+, 0xff in UTF-8).
    #[test]
    fn the_escape_scan_finds_every_escaped_byte() {
        for c in 0u8..=0x7f {
            let want = c < 0x20 || c == b'"' || c == b'\\';
            for len in 1..=24 {
                for fill in [
                    "a",
                    "\u{0}",
                    "\u{7f}",
                    "\u{e9}",
                    "\u{10ffff}",
                    "!",
                    "#",
                    "]",
                ] {
                    for at in 0..len {
                        let mut s: Vec<String> = vec![fill.to_string(); len];
                        s[at] = (c as char).to_string();
                        let s = s.concat();
                        let fill_escaped = fill == "\u{0}";
                        assert_eq!(
                            needs_escape(s.as_bytes()),
                            want || fill_escaped && len > 1,
                            "{s:?}"
                        );
                        let mut out = Vec::new();
                        write_str(&mut out, &s);
                        assert_eq!(out, serde_json::to_vec(&s).unwrap(), "{s:?}");
                    }
                }
            }
        }
        for s in ["", "a", "abcdefgh", "abcdefghi"] {
            assert!(!needs_escape(s.as_bytes()));
        }
    }

    #[test]
    fn strings_escape_as_serde_json() {
        for s in strings() {
            let mut out = Vec::new();
            write_str(&mut out, &s);
            assert_eq!(out, serde_json::to_vec(&s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn values_write_as_serde_json() {
        let vals = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(-1),
            json!(1.5),
            json!(-0.0),
            json!(1e300),
            json!(0.1),
            json!([]),
            json!({}),
            json!([[], {}, [[]], {"a": {}}]),
            json!({"z": 1, "a": [1, "x\"y", null], "M": {"\u{2028}": "\n"}, "": ""}),
        ];
        for v in vals {
            let mut out = Vec::new();
            write_value(&mut out, &v);
            assert_eq!(out, serde_json::to_vec(&v).unwrap(), "{v}");
            assert_eq!(J::V(&v).to_vec(), serde_json::to_vec(&v).unwrap());
        }
        for n in [0u64, 9, 10, 99, 100, 12345, u64::MAX] {
            let mut out = Vec::new();
            write_u64(&mut out, n);
            assert_eq!(out, n.to_string().into_bytes());
        }
    }

    #[test]
    fn trees_write_as_their_values() {
        let kv = json!({"k\"": [1, 2.5, "x"], "a": null});
        let item = json!({"id": "i\u{1}", "n": -4});
        let raw = serde_json::value::to_raw_value(&item).unwrap();
        let j = J::Obj(vec![
            ("", J::Arr(vec![])),
            ("a", J::Obj(vec![])),
            ("b", J::Bool(true)),
            ("c", J::Map(kv.as_object().unwrap())),
            ("d", J::Raw(&raw)),
            ("e", J::S("s\\")),
            ("f", J::Str("t\u{2028}".into())),
            ("g", J::U(7)),
            (
                "h",
                J::Arr(vec![
                    J::V(&item),
                    J::Null,
                    opt_str(None),
                    opt_str(Some("x")),
                ]),
            ),
            ("i", J::Val(json!({"b": [1], "a": "\\"}))),
        ]);
        let bytes = j.to_vec();
        // Through serde, the same text.
        let raw = serde_json::value::to_raw_value(&j).unwrap();
        assert_eq!(raw.get().as_bytes(), &bytes[..]);
        let v = j.into_value();
        assert_eq!(bytes, serde_json::to_vec(&v).unwrap());
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<u64>().prop_map(|n| json!(n)),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            any::<String>().prop_map(Value::String),
            "[\\x00-\\x7f\u{2028}\u{e9}]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[\\x00-\\x7f\u{2028}]{0,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_value_writes_as_serde_json(v in arb_value()) {
            let mut out = Vec::new();
            write_value(&mut out, &v);
            prop_assert_eq!(out, serde_json::to_vec(&v).unwrap());
        }

        #[test]
        fn any_string_writes_as_serde_json(s in any::<String>()) {
            let mut out = Vec::new();
            write_str(&mut out, &s);
            prop_assert_eq!(out, serde_json::to_vec(&s).unwrap());
        }
    }
}
