//! The members of an event's params that a session's fold reads, taken
//! from the params' text without building its tree.
//!
//! An event record keeps its params as the text the host wrote
//! ([`super::session::EventParams`]). A load folds every event of a log's
//! tail; building each params tree only to read a turn id or an item's
//! status, then writing the item back out as text, was most of what a load
//! spent on events (issue 10). Members are read as [`super::members`]
//! reads them, which is as `Value` indexing does.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::members::{as_str, as_u64, members_raw};
use super::session::JsonText;

/// The members of `params` the fold reads, by index.
const KEYS: [&str; 8] = [
    "turnId",
    "commandId",
    "terminal",
    "reason",
    "item",
    "sourceRange",
    "revision",
    "set",
];

/// What the fold reads of one event's params: read from their text (a
/// load), or from the tree the host has just written them from (a
/// commit); both read what `Value` indexing reads (a test holds them to
/// it).
#[derive(Debug)]
pub(crate) enum EventFields<'a> {
    /// Each member of [`KEYS`] as its text.
    Text([Option<&'a RawValue>; KEYS.len()]),
    /// The params tree.
    Tree(&'a Value),
}

impl<'a> EventFields<'a> {
    /// The fields of the params `text` (all absent when it is no object).
    pub(crate) fn read(text: &'a str) -> EventFields<'a> {
        EventFields::Text(members_raw(text, KEYS))
    }

    fn string(&self, i: usize) -> Option<String> {
        match self {
            EventFields::Text(m) => m[i].and_then(as_str),
            EventFields::Tree(v) => v[KEYS[i]].as_str().map(str::to_string),
        }
    }

    /// `turnId`, when a string.
    pub(crate) fn turn_id(&self) -> Option<String> {
        self.string(0)
    }

    /// `commandId`, when a string.
    pub(crate) fn command_id(&self) -> Option<String> {
        self.string(1)
    }

    /// `terminal`, when a string.
    pub(crate) fn terminal(&self) -> Option<String> {
        self.string(2)
    }

    /// `reason`, when a string.
    pub(crate) fn reason(&self) -> Option<String> {
        self.string(3)
    }

    /// `item` as text (`null` when absent, as `params["item"]` reads).
    pub(crate) fn item(&self) -> JsonText {
        match self {
            EventFields::Text([.., Some(item), _, _, _]) => JsonText::of_raw(item),
            EventFields::Text(_) => JsonText::of(&Value::Null),
            EventFields::Tree(v) => JsonText::of(&v["item"]),
        }
    }

    /// `sourceRange`, when present: its stream's key
    /// (`"<stream.kind>:<stream.id>"`, each empty when no string) and
    /// `last.sequence` (0 when no integer).
    pub(crate) fn source_range(&self) -> Option<(String, u64)> {
        let (kind, id, seq) = match self {
            EventFields::Text(m) => {
                let range = m[5]?.get();
                let [stream, last] = members_raw(range, ["stream", "last"]);
                let [kind, id] = stream.map_or([None, None], |s| {
                    members_raw(s.get(), ["kind", "id"]).map(|m| m.and_then(as_str))
                });
                let [seq] = last.map_or([None], |l| members_raw(l.get(), ["sequence"]));
                (kind, id, seq.and_then(as_u64))
            }
            EventFields::Tree(v) => {
                let range = v.get(KEYS[5])?;
                let s = |v: &Value| v.as_str().map(str::to_string);
                (
                    s(&range["stream"]["kind"]),
                    s(&range["stream"]["id"]),
                    range["last"]["sequence"].as_u64(),
                )
            }
        };
        Some((
            super::session::stream_key_of(kind.as_deref(), id.as_deref()),
            seq.unwrap_or(0),
        ))
    }

    /// `revision`, when a non-negative integer.
    pub(crate) fn revision(&self) -> Option<u64> {
        match self {
            EventFields::Text(m) => m[6].and_then(as_u64),
            EventFields::Tree(v) => v[KEYS[6]].as_u64(),
        }
    }

    /// `set`, when an object.
    pub(crate) fn set(&self) -> Option<Map<String, Value>> {
        match self {
            EventFields::Text(m) => serde_json::from_str(m[7]?.get()).ok(),
            EventFields::Tree(v) => v[KEYS[7]].as_object().cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the fold reads: strings, item, source range, revision, set.
    type Fields = (
        Vec<Option<String>>,
        Option<Value>,
        Option<(String, u64)>,
        Option<u64>,
        Option<Map<String, Value>>,
    );

    /// What the fold read of `v` when it indexed the tree.
    fn by_value(v: &Value) -> Fields {
        let s = |k: &str| v[k].as_str().map(str::to_string);
        let range = v.get("sourceRange").map(|r| {
            let stream = &r["stream"];
            (
                format!(
                    "{}:{}",
                    stream["kind"].as_str().unwrap_or_default(),
                    stream["id"].as_str().unwrap_or_default()
                ),
                r["last"]["sequence"].as_u64().unwrap_or(0),
            )
        });
        (
            vec![s("turnId"), s("commandId"), s("terminal"), s("reason")],
            v.get("item").filter(|i| !i.is_null()).cloned(),
            range,
            v["revision"].as_u64(),
            v["set"].as_object().cloned(),
        )
    }

    fn read(f: &EventFields) -> Fields {
        let item = f.item().to_value();
        (
            vec![f.turn_id(), f.command_id(), f.terminal(), f.reason()],
            (!item.is_null()).then_some(item),
            f.source_range(),
            f.revision(),
            f.set(),
        )
    }

    #[test]
    fn fields_read_from_text_are_what_value_indexing_reads() {
        let texts = [
            r#"{"turnId":"t1","commandId":"c","terminal":"completed","reason":"crash"}"#,
            r#"{"turnId":7,"reason":null,"terminal":["x"],"commandId":{"a":"b"}}"#,
            r#"{"item":{"itemId":"i\"1","status":"inProgress","text":"a\nb"},"sourceRange":{"stream":{"kind":"run","id":"t"},"last":{"sequence":3}}}"#,
            r#"{"sourceRange":{"stream":{"kind":1,"id":"s","id":"s2"},"last":{"sequence":-3}}}"#,
            r#"{"sourceRange":null}"#,
            r#"{"sourceRange":{"stream":"x","last":{"sequence":2.0}}}"#,
            r#"{"revision":4,"set":{"k":null,"j":[1,2]},"viewCursor":"v:s:1"}"#,
            r#"{"revision":-4,"set":[1]}"#,
            r#"{"turnId":"a","turnId":"b","item":1,"item":{"z":true}}"#,
            r#"{"item":null,"item":"s"}"#,
            r#"{"t\u0075rnId":"escaped name","reason":"tab\there"}"#,
            r#"{}"#,
            r#"[1,2]"#,
            "null",
        ];
        for t in texts {
            let v: Value = serde_json::from_str(t).unwrap();
            assert_eq!(read(&EventFields::read(t)), by_value(&v), "text {t}");
            assert_eq!(read(&EventFields::Tree(&v)), by_value(&v), "tree {t}");
        }
    }
}
