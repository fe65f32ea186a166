//! The model's own reading of a session log: the frame layout of
//! PROTOCOL's storage (magic `MSPL`, version 1, type, two reserved zero
//! bytes, little-endian length, CRC32C over header bytes 4..12 and the
//! payload) and the record payloads as JSON. Written apart from `src/log`
//! and `src/core/record.rs`, so a mistake there is judged, not shared.
//!
//! A file here is the simulated disk as the trace reports it: bytes,
//! the durable prefix, and which host incarnation appended which bytes.
//! Records are handed to the model once, when they become durable.

use serde_json::Value;

const MAGIC: &[u8; 4] = b"MSPL";
pub const HEADER_BYTES: usize = 16;
const PAYLOAD_MAX_BYTES: usize = 64 * 1024 * 1024;

/// What the bytes at an offset are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// A whole valid frame ending at `end`, of record type `rtype`.
    Valid {
        /// End offset.
        end: usize,
        /// Record type byte.
        rtype: u8,
    },
    /// A frame that may still be completed by more bytes.
    Incomplete,
    /// Not a frame.
    Bad(&'static str),
}

/// Checks the frame starting at `at` in `b`.
pub fn check(b: &[u8], at: usize) -> Check {
    let rest = &b[at.min(b.len())..];
    let prefix = rest.len().min(4);
    if rest[..prefix] != MAGIC[..prefix] {
        return Check::Bad("bad magic");
    }
    if rest.len() < HEADER_BYTES {
        return Check::Incomplete;
    }
    if rest[4] != 1 {
        return Check::Bad("bad version");
    }
    if rest[5] == 0 {
        return Check::Bad("record type 0");
    }
    if rest[6] != 0 || rest[7] != 0 {
        return Check::Bad("reserved bytes set");
    }
    let len = u32::from_le_bytes([rest[8], rest[9], rest[10], rest[11]]) as usize;
    if len > PAYLOAD_MAX_BYTES {
        return Check::Bad("payload too long");
    }
    if rest.len() < HEADER_BYTES + len {
        return Check::Incomplete;
    }
    let want = u32::from_le_bytes([rest[12], rest[13], rest[14], rest[15]]);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&rest[4..12]), &rest[16..16 + len]);
    if crc != want {
        return Check::Bad("CRC mismatch");
    }
    Check::Valid {
        end: at + HEADER_BYTES + len,
        rtype: rest[5],
    }
}

/// The record tag each type byte must carry.
fn tag_of(rtype: u8) -> Option<&'static str> {
    Some(match rtype {
        1 => "created",
        2 => "loaded",
        3 => "received",
        4 => "settled",
        5 => "event",
        6 => "closed",
        _ => return None,
    })
}

/// How a buffer ends after its run of valid frames from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Every byte is in a valid frame.
    Clean,
    /// Invalid bytes from `at` on, and no valid frame after them.
    Torn {
        /// Where the valid frames end.
        at: usize,
    },
    /// Invalid bytes at `at` with a valid frame somewhere after them.
    Corrupt {
        /// Where the valid frames end.
        at: usize,
    },
}

/// Walks `b` from `from` (a frame boundary) and classifies how it ends.
pub fn shape(b: &[u8], from: usize) -> Shape {
    let mut at = from;
    loop {
        if at >= b.len() {
            return Shape::Clean;
        }
        match check(b, at) {
            Check::Valid { end, rtype } if decodes(b, at, end, rtype) => at = end,
            _ => {
                let later = (at + 1..b.len()).any(|i| {
                    matches!(check(b, i), Check::Valid { end, rtype } if decodes(b, i, end, rtype))
                });
                return if later {
                    Shape::Corrupt { at }
                } else {
                    Shape::Torn { at }
                };
            }
        }
    }
}

fn decodes(b: &[u8], at: usize, end: usize, rtype: u8) -> bool {
    body(b, at, end, rtype).is_some()
}

/// The JSON body of a valid frame whose tag matches its type byte.
fn body(b: &[u8], at: usize, end: usize, rtype: u8) -> Option<Body> {
    body_of(&b[at + HEADER_BYTES..end], rtype)
}

/// [`body`] of a frame's payload: read by [`Body::read`], and the
/// whole-value way ([`body_whole`]) whenever that declines; either way the
/// same answer.
fn body_of(payload: &[u8], rtype: u8) -> Option<Body> {
    let tag = tag_of(rtype)?;
    match Body::read(payload) {
        Some(body) if body.kind() != Some("created") => (body.kind()? == tag).then_some(body),
        // A `created` record is kept whole (its failure message shows it).
        _ => body_whole(payload, tag),
    }
}

/// [`body_of`] the whole-value way: the payload read as one `Value`, the
/// members the model reads taken from it.
fn body_whole(payload: &[u8], tag: &str) -> Option<Body> {
    let v: Value = super::wire::json_of(payload).ok()?;
    (v["record"].as_str()? == tag).then(|| Body::of_value(v))
}

/// The end and body of the valid, decodable frame at `at` of `b`.
fn frame_at(b: &[u8], at: usize) -> Option<(usize, Body)> {
    let Check::Valid { end, rtype } = check(b, at) else {
        return None;
    };
    body(b, at, end, rtype).map(|v| (end, v))
}

/// Whether `bytes`, whole frames as one append wrote them, hold a
/// `closed` record whose reason is `idle` (an idle unload's last record).
pub fn holds_idle_close(bytes: &[u8]) -> bool {
    let mut at = 0;
    while at < bytes.len() {
        let Some((end, body)) = frame_at(bytes, at) else {
            return false;
        };
        if body.kind() == Some("closed") && body.get("reason") == "idle" {
            return true;
        }
        at = end;
    }
    false
}

/// The index of `answer` in `MEMBERS` (asserted by a test).
const ANSWER: usize = 9;

/// The members of a record the model reads ([`Body`]).
const MEMBERS: [&str; 14] = [
    "record",
    "sessionId",
    "startCommandId",
    "createdAtMs",
    "workspaceRoot",
    "reason",
    "commandId",
    "method",
    "params",
    "answer",
    "outcome",
    "error",
    "n",
    "emittedAtMs",
];

/// `null`, for a member a record lacks.
static NULL: Value = Value::Null;

/// A record's body as the model reads it: the members it reads
/// (`MEMBERS`), each as a `Value` would hold it (the last of a repeated
/// name); every other member only checked, as strictly as a `Value` reads
/// it, and dropped. Reading these few members instead of the whole record
/// as a `Value` spares building (and tearing down) the record's object and
/// the members nobody reads (a command's `signature`, `atMs`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Body {
    /// The members of `MEMBERS`, by index; `None` when absent.
    members: [Option<Value>; MEMBERS.len()],
    /// The rest of the record, when it was read whole (a `created` record,
    /// whose failure message shows it, or one [`Body::read`] declined).
    whole: Option<Value>,
    /// A resume snapshot's items in the `answer` member
    /// (`result.history.snapshot.state.items`), kept as their JSON text
    /// (checked as strictly as a `Value` reads them) with `null` in their
    /// place in `answer`: they are the bulk of a resume's record, and the
    /// model compares them as text (with its own items, and with the
    /// answer the host sends), parsing them only when the texts differ.
    answer_items: Option<String>,
}

impl Body {
    /// Reads a record's payload member by member; `None` when it is not
    /// plainly a JSON object (not UTF-8, not JSON, not an object, a member
    /// spelled as serde_json's raw-value token): the caller then reads it
    /// the whole-value way, which gives the same answer for anything this
    /// reads.
    fn read(payload: &[u8]) -> Option<Body> {
        let text = std::str::from_utf8(payload).ok()?;
        let mut de = serde_json::Deserializer::from_str(text);
        let body = serde::de::Deserializer::deserialize_any(&mut de, BodyVisitor).ok()?;
        de.end().ok()?;
        Some(body)
    }

    /// The body of a record read as one `Value` (an object).
    fn of_value(mut v: Value) -> Body {
        let mut body = Body::default();
        // The members read move to `members`; the rest stays for messages.
        if let Some(o) = v.as_object_mut() {
            for (slot, k) in body.members.iter_mut().zip(MEMBERS) {
                *slot = o.remove(k);
            }
        }
        body.whole = Some(v);
        body
    }

    /// The record's kind (its `record` member), when a string.
    pub fn kind(&self) -> Option<&str> {
        self.get("record").as_str()
    }

    /// Member `k` (one of `MEMBERS`); `null` when absent, as `v[k]`
    /// reads a `Value`.
    pub fn get(&self, k: &str) -> &Value {
        MEMBERS
            .iter()
            .position(|m| *m == k)
            .and_then(|i| self.members[i].as_ref())
            .unwrap_or(&NULL)
    }

    /// Moves the `answer` member's snapshot items text out (a resume's
    /// `result.history.snapshot.state.items`, kept as checked text with
    /// `null` in their place); `None` when they were read in place.
    pub fn take_answer_items(&mut self) -> Option<String> {
        self.answer_items.take()
    }

    /// Moves member `k` (one of `MEMBERS`) out; `null` when absent.
    pub fn take(&mut self, k: &str) -> Value {
        MEMBERS
            .iter()
            .position(|m| *m == k)
            .and_then(|i| self.members[i].take())
            .unwrap_or(Value::Null)
    }

    /// The whole record as a `Value` (for a message): as read, when it
    /// was read whole (less any member taken out); else the members the
    /// model reads.
    pub fn to_value(&self) -> Value {
        let mut o = match &self.whole {
            Some(Value::Object(o)) => o.clone(),
            _ => serde_json::Map::new(),
        };
        for (k, v) in MEMBERS.iter().zip(&self.members) {
            if let Some(v) = v {
                o.insert((*k).to_string(), v.clone());
            }
        }
        if let (Some(t), Some(a)) = (&self.answer_items, o.get_mut("answer")) {
            super::wire::put_snapshot_items(&mut a["result"], t);
        }
        Value::Object(o)
    }
}

/// A member name of a record: one of `MEMBERS` (its index) or another;
/// the raw-value token is an error (the record is then read whole).
enum Member {
    Read(usize),
    Other,
}

impl<'de> serde::Deserialize<'de> for Member {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Member, D::Error> {
        super::wire::member_name(d, |k| {
            if k == super::wire::RAW_VALUE_TOKEN {
                return Err("raw value token");
            }
            Ok(MEMBERS
                .iter()
                .position(|m| *m == k)
                .map_or(Member::Other, Member::Read))
        })
    }
}

/// Reads a record object into a [`Body`].
struct BodyVisitor;

impl<'de> serde::de::Visitor<'de> for BodyVisitor {
    type Value = Body;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a record object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Body, A::Error> {
        let mut body = Body::default();
        while let Some(k) = m.next_key::<Member>()? {
            match k {
                Member::Read(ANSWER) => {
                    let (v, items) = m.next_value_seed(super::wire::PathSeed::answer_items())?;
                    body.members[ANSWER] = Some(v);
                    body.answer_items = items.map(str::to_string);
                }
                Member::Read(i) => body.members[i] = Some(m.next_value()?),
                Member::Other => {
                    m.next_value::<super::wire::Checked>()?;
                }
            }
        }
        Ok(body)
    }
}

/// One durable record handed to the model.
#[derive(Debug, Clone)]
pub struct Rec {
    /// Start offset.
    pub start: usize,
    /// End offset.
    pub end: usize,
    /// The record's members the model reads (`record` names its kind).
    pub body: Body,
    /// The host incarnation that appended it.
    pub writer: (usize, u64),
}

/// A frame known to be valid and to decode, at a place in the known run
/// of such frames from offset 0.
#[derive(Debug, Clone)]
struct Known {
    /// Start offset.
    start: usize,
    /// End offset.
    end: usize,
    /// Its body, until it is handed out (decoded once, when first seen).
    body: Option<Body>,
}

/// One session log as the trace reports it.
///
/// Besides the bytes it remembers the run of valid, decoding frames from
/// offset 0 that it has already walked (`Known`): a frame's validity and
/// body depend only on its own bytes, so a walk that starts at one of their
/// boundaries need not decode them again. Any change to bytes below the
/// end of that run (a cut, a rotted byte) forgets the frames it touches.
#[derive(Debug, Clone, Default)]
pub struct LogFile {
    /// Every byte any reader sees.
    bytes: Vec<u8>,
    /// Bytes `..durable_len` survive any crash.
    pub durable_len: usize,
    /// End of the last record handed to the model.
    pub consumed: usize,
    /// `(start offset, host, incarnation)` of each append, in file order.
    writers: Vec<(usize, usize, u64)>,
    /// Records of a damaged file are no longer handed out.
    pub damaged: bool,
    /// The frames from offset 0 already found valid and decoding, in order,
    /// contiguous.
    known: Vec<Known>,
}

impl LogFile {
    /// The file's bytes (what any reader sees).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The file's length.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Appends bytes written by `writer`.
    pub fn append(&mut self, bytes: &[u8], writer: (usize, u64)) {
        self.writers.push((self.bytes.len(), writer.0, writer.1));
        self.bytes.extend_from_slice(bytes);
    }

    /// Forgets the known frames that reach beyond `offset` (their bytes
    /// changed or are gone).
    fn forget_from(&mut self, offset: usize) {
        while self.known.last().is_some_and(|k| k.end > offset) {
            self.known.pop();
        }
    }

    /// Cuts the file to `len`; the cut length is durable (the io layer
    /// fsyncs after truncating).
    pub fn truncate(&mut self, len: usize) {
        self.bytes.truncate(len);
        self.forget_from(self.bytes.len());
        self.writers.retain(|(s, ..)| *s < len);
        self.durable_len = self.bytes.len();
    }

    /// A sync covered the file up to `upto`.
    pub fn synced(&mut self, upto: usize) {
        self.durable_len = self.durable_len.max(upto.min(self.bytes.len()));
    }

    /// The unsynced bytes beyond `kept` are gone (failed fsync, or a power
    /// loss that kept `kept` bytes, a torn prefix included).
    pub fn keep(&mut self, kept: usize, durable: bool) {
        self.bytes.truncate(kept);
        self.forget_from(self.bytes.len());
        self.writers.retain(|(s, ..)| *s < kept);
        if durable {
            self.durable_len = self.bytes.len();
        } else {
            self.durable_len = self.durable_len.min(self.bytes.len());
        }
    }

    /// The byte at `offset` rots (bit 5 flips), if the file has it.
    pub fn rot(&mut self, offset: usize) {
        if let Some(b) = self.bytes.get_mut(offset) {
            *b ^= 0x20;
            self.forget_from(offset);
        }
    }

    /// The one writer of every byte from `offset` to the end, if one
    /// host incarnation wrote them all.
    pub fn writer_from(&self, offset: usize) -> Option<(usize, u64)> {
        let first = self.writer_at(offset);
        let same = self
            .writers
            .iter()
            .filter(|(s, ..)| *s > offset)
            .all(|(_, h, i)| (*h, *i) == first);
        (first.0 != usize::MAX && same).then_some(first)
    }

    fn writer_at(&self, offset: usize) -> (usize, u64) {
        self.writers
            .iter()
            .rev()
            .find(|(s, ..)| *s <= offset)
            .map(|(_, h, i)| (*h, *i))
            .unwrap_or((usize::MAX, 0))
    }

    /// End of the known run of frames.
    fn known_end(&self) -> usize {
        self.known.last().map_or(0, |k| k.end)
    }

    /// The index of the known frame starting at `at` (`known.len()` when
    /// `at` is the end of the known run); `None` when `at` is no boundary.
    fn known_index(&self, at: usize) -> Option<usize> {
        if at == self.known_end() {
            return Some(self.known.len());
        }
        self.known.binary_search_by_key(&at, |k| k.start).ok()
    }

    /// [`shape`] of the first `limit` bytes walked from `from`, the same
    /// answer, decoding only frames not walked before.
    pub fn shape(&mut self, limit: usize, from: usize) -> Shape {
        let limit = limit.min(self.bytes.len());
        let Some(i) = self.known_index(from) else {
            return shape(&self.bytes[..limit], from);
        };
        let mut at = from;
        for k in &self.known[i..] {
            if k.end > limit {
                break;
            }
            at = k.end;
        }
        // Frames past the known run extend it as they are found valid.
        while at == self.known_end() && at < limit {
            let Some((end, v)) = frame_at(&self.bytes[..limit], at) else {
                break;
            };
            self.known.push(Known {
                start: at,
                end,
                body: Some(v),
            });
            at = end;
        }
        shape(&self.bytes[..limit], at)
    }

    /// Hands out the records that became durable since the last call, in
    /// file order; stops at bytes that are not (yet) a durable valid frame.
    pub fn take_durable(&mut self) -> Vec<Rec> {
        let mut out = Vec::new();
        if self.damaged {
            return out;
        }
        let limit = self.durable_len;
        while self.consumed < limit {
            let at = self.consumed;
            let (end, body) = match self.known_index(at) {
                // A frame walked before: its body is kept until now.
                Some(i) if i < self.known.len() && self.known[i].end <= limit => {
                    let k = &mut self.known[i];
                    let v = match k.body.take() {
                        Some(v) => v,
                        None => match frame_at(&self.bytes[..limit], at) {
                            Some((_, v)) => v,
                            None => break,
                        },
                    };
                    (k.end, v)
                }
                i => {
                    let Some((end, v)) = frame_at(&self.bytes[..limit], at) else {
                        break;
                    };
                    if i == Some(self.known.len()) {
                        self.known.push(Known {
                            start: at,
                            end,
                            body: None,
                        });
                    }
                    (end, v)
                }
            };
            out.push(Rec {
                start: at,
                end,
                body,
                writer: self.writer_at(at),
            });
            self.consumed = end;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed xorshift stream: `next(n)` is below `n`.
    fn xorshift(mut rng: u64) -> impl FnMut(usize) -> usize {
        move |n| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n as u64) as usize
        }
    }

    fn frame(rtype: u8, payload: &[u8]) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(MAGIC);
        h.extend_from_slice(&[1, rtype, 0, 0]);
        h.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&h[4..12]), payload);
        h.extend_from_slice(&crc.to_le_bytes());
        h.extend_from_slice(payload);
        h
    }

    #[test]
    fn frames_agree_with_the_writer_and_damage_is_classified() {
        let a = frame(2, br#"{"record":"loaded","atMs":1}"#);
        let b = frame(6, br#"{"record":"closed","reason":"idle","atMs":2}"#);
        let mut all = a.clone();
        all.extend(&b);
        assert_eq!(shape(&all, 0), Shape::Clean);
        assert_eq!(shape(&all[..all.len() - 3], 0), Shape::Torn { at: a.len() });
        let mut bad = all.clone();
        bad[20] ^= 1;
        assert_eq!(shape(&bad, 0), Shape::Corrupt { at: 0 });
        // A record whose tag disagrees with its type byte is not a record.
        let wrong = frame(6, br#"{"record":"loaded","atMs":1}"#);
        assert_eq!(shape(&wrong, 0), Shape::Torn { at: 0 });
        // The same layout as the host's writer.
        let mine = msp::log::encode_frame(2, br#"{"record":"loaded","atMs":1}"#);
        assert_eq!(mine, a);
        let mut f = LogFile::default();
        f.append(&all, (0, 1));
        assert!(f.take_durable().is_empty(), "nothing durable yet");
        f.synced(a.len() + 5);
        let r = f.take_durable();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].body.get("record"), "loaded");
        f.synced(all.len());
        assert_eq!(f.take_durable().len(), 1);
    }

    /// The body of a record the way the model read it before [`Body`]:
    /// the whole payload as one `Value`.
    fn whole_value(payload: &[u8], rtype: u8) -> Option<Value> {
        let v: Value = crate::model::wire::json_of(payload).ok()?;
        (v["record"].as_str()? == tag_of(rtype)?).then_some(v)
    }

    /// Reading a record member by member gives what reading it whole gave:
    /// the same verdict (a record or not) and the same members, on odd
    /// records (escapes, reordered, repeated and extra members, the
    /// raw-value token, too deep, not UTF-8, lone surrogates) and on every
    /// cut and many damaged copies of them.
    #[test]
    fn bodies_read_by_member_agree_with_whole_values() {
        let nest = |n: usize| {
            format!(
                r#"{{"record":"loaded","x":{}1{}}}"#,
                "[".repeat(n),
                "]".repeat(n)
            )
        };
        let mut cases: Vec<Vec<u8>> = [
            r#"{"record":"created","sessionId":"s","startCommandId":"c","createdAtMs":5,"workspaceRoot":null,"extra":[1,{"a":"b"}]}"#,
            r#"{"record":"loaded","atMs":1}"#,
            r#"{"atMs":1,"record":"loaded"}"#,
            r#"{"record":"closed","reason":"idle","atMs":2}"#,
            r#"{"record":"received","commandId":"c\u0041\n","method":"turn/start","params":{"b":[1,2.5,-3,1e3,18446744073709551615,-9223372036854775808],"a":"\ud83d\ude00 \\ \" \/"},"signature":"s","answer":{"result":{"ok":true}},"atMs":1}"#,
            r#"{"record":"received","commandId":"c","method":"m","params":{},"answer":{"error":{"code":-32030}},"atMs":1,"answer":{"result":1}}"#,
            r#"{"record":"settled","commandId":"c","outcome":"rejected","error":{"code":1}}"#,
            r#"{"record":"settled","commandId":"c","outcome":"applied","error":null,"error":2}"#,
            r#"{"record":"event","n":3,"method":"item/completed","emittedAtMs":7,"params":{"item":{"kind":"toolCall","text":"\t\u00e9"}},"atMs":1}"#,
            r#"{"record":"event","record":"closed","reason":"x"}"#,
            r#"{"record":"closed","record":"event","n":1}"#,
            r#"{"record":5,"n":1}"#,
            r#"{"n":1}"#,
            r#"{"$serde_json::private::RawValue":"{\"record\":\"loaded\"}"}"#,
            r#"{"record":"loaded","$serde_json::private::RawValue":"1"}"#,
            r#"{"record":"loaded","x":{"$serde_json::private::RawValue":"1"}}"#,
            r#"{"record":"event","n":1,"params":{"$serde_json::private::RawValue":"{\"a\":1}"}}"#,
            r#"{"record":"loaded","x":"\ud800"}"#,
            r#"{"record":"event","n":1,"params":{"t":"\udc00x"}}"#,
            r#"{"record":"loaded","x":1e400}"#,
            r#"{"record":"event","n":1e400}"#,
            r#"{"record":"loaded"} "#,
            r#" {"record":"loaded"}"#,
            r#"{"record":"loaded"}x"#,
            r#"{"record":"loaded",}"#,
            r#"["record","loaded"]"#,
            r#""loaded""#,
            r#"null"#,
            r#"{}"#,
            r#"{"record":"event","n":-1,"emittedAtMs":1.5,"method":null}"#,
            // Resume answers, whose snapshot items are read as text.
            r#"{"record":"received","commandId":"c","method":"session/resume","params":{},"answer":{"result":{"history":{"items":null,"mode":"snapshot","snapshot":{"schemaVersion":1,"state":{"items":[{"itemId":"i1","text":"\u00e9"},{"itemId":"i2"}],"revision":0},"viewCursor":"v:s:2"}},"viewCursor":"v:s:2"}},"atMs":1}"#,
            r#"{"record":"received","commandId":"c","method":"session/resume","params":{},"answer":{"result":{"history":{"items":null,"mode":"none","snapshot":null,"noneReason":"cursorSuffix"},"viewCursor":"v:s:2"}},"atMs":1}"#,
            r#"{"record":"received","method":"session/resume","answer":{"result":{"history":{"snapshot":{"state":{"items":[],"items":[{"a":1}]}}}}}}"#,
            r#"{"record":"received","method":"session/resume","answer":{"result":{"history":{"snapshot":{"state":{"items":{"a":[1]}}}}}}}"#,
            r#"{"record":"received","method":"session/resume","answer":{"result":{"history":{"snapshot":{"state":{"items":["\ud800"]}}}}}}"#,
            r#"{"record":"received","method":"session/resume","answer":{"result":{"history":{"snapshot":{"state":{"items":[1e400]}}}}}}"#,
            r#"{"record":"received","method":"session/resume","answer":{"result":{"history":{"snapshot":{"state":{"items":[{"$serde_json::private::RawValue":"1"}]}}}}}}"#,
            r#"{"record":"received","method":"session/resume","answer":{"result":{"history":{"snapshot":5}}}}"#,
            r#"{"record":"received","method":"session/resume","answer":{"result":"x"}}"#,
            r#"{"record":"received","method":"session/resume","answer":[1]}"#,
            r#"{"record":"received","method":"session/resume","answer":{"result":{"history":{"snapshot":{"state":{"items":[1]}}}}},"answer":{"error":{"code":1}}}"#,
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        cases.push(nest(120).into_bytes());
        cases.push(nest(126).into_bytes());
        cases.push(nest(127).into_bytes());
        cases.push(nest(130).into_bytes());
        let deep_items = |n: usize| {
            format!(
                r#"{{"record":"received","answer":{{"result":{{"history":{{"snapshot":{{"state":{{"items":{}1{}}}}}}}}}}}}}"#,
                "[".repeat(n),
                "]".repeat(n)
            )
        };
        for n in [1, 100, 121, 122, 123, 130] {
            cases.push(deep_items(n).into_bytes());
        }
        cases.push(b"{\"record\":\"loaded\",\"x\":\"\xff\"}".to_vec());
        cases.push(b"{\"record\":\"event\",\"n\":1,\"params\":{\"a\":\"\xc3\xa9\"}}".to_vec());
        let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
        let mut all = Vec::new();
        for c in &cases {
            all.push(c.clone());
            for cut in 0..c.len() {
                all.push(c[..cut].to_vec());
            }
            for _ in 0..200 {
                let mut d = c.clone();
                let at = next(d.len());
                d[at] = match next(4) {
                    0 => d[at] ^ 0x20,
                    1 => b"{}[]\",:\\u0"[next(10)],
                    _ => next(256) as u8,
                };
                all.push(d);
            }
        }
        let mut agreed = 0;
        let mut items_as_text = 0;
        for payload in &all {
            for rtype in 0..=7 {
                let fast = body_of(payload, rtype);
                let slow = whole_value(payload, rtype);
                let text = String::from_utf8_lossy(payload);
                assert_eq!(fast.is_some(), slow.is_some(), "{text}");
                if let (Some(f), Some(s)) = (&fast, &slow) {
                    for k in MEMBERS {
                        // The answer with its items put back in place.
                        let mut got = f.get(k).clone();
                        if let (true, Some(t)) = (k == "answer", &f.answer_items) {
                            got["result"]["history"]["snapshot"]["state"]["items"] =
                                serde_json::from_str(t).unwrap();
                        }
                        assert_eq!(&got, &s[k], "{k} of {text}");
                    }
                    if f.answer_items.is_some() {
                        items_as_text += 1;
                    }
                    // A `created` record is kept whole, for its message.
                    if f.kind() == Some("created") {
                        assert_eq!(&f.to_value(), s, "{text}");
                    }
                    agreed += 1;
                }
            }
        }
        assert!(agreed > 100, "{agreed}");
        assert!(items_as_text > 20, "{items_as_text}");
        assert_eq!(MEMBERS[ANSWER], "answer");
    }

    /// The remembered frames change no answer: every walk and every hand-out
    /// agrees with a fresh decoding of the same bytes, through appends,
    /// syncs, cuts, lost tails and rot.
    #[test]
    fn known_frames_answer_as_a_fresh_walk() {
        let recs: Vec<Vec<u8>> = (0..6)
            .map(|i| frame(5, format!(r#"{{"record":"event","n":{i}}}"#).as_bytes()))
            .collect();
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
        for _ in 0..300 {
            let mut f = LogFile::default();
            let mut fresh = LogFile::default();
            let mut handed = Vec::new();
            let mut fresh_handed = Vec::new();
            for _ in 0..12 {
                match next(6) {
                    0 | 1 => {
                        let r = &recs[next(recs.len())];
                        let cut = if next(4) == 0 { next(r.len()) } else { r.len() };
                        f.append(&r[..cut], (0, 1));
                        fresh.append(&r[..cut], (0, 1));
                    }
                    2 => {
                        let upto = next(f.len() + 1);
                        f.synced(upto);
                        fresh.synced(upto);
                    }
                    3 => {
                        let kept = next(f.len() + 1);
                        let durable = next(2) == 0;
                        f.keep(kept, durable);
                        fresh.keep(kept, durable);
                    }
                    4 => {
                        let len = next(f.len() + 1);
                        f.truncate(len);
                        fresh.truncate(len);
                    }
                    _ => {
                        if !f.is_empty() && next(3) == 0 {
                            let at = next(f.len());
                            f.rot(at);
                            fresh.rot(at);
                        }
                    }
                }
                fresh.known.clear();
                let limit = next(f.len() + 1);
                for from in [0, f.consumed, next(f.len() + 1)] {
                    assert_eq!(
                        f.shape(limit, from),
                        shape(&f.bytes()[..limit], from),
                        "{limit} {from}"
                    );
                }
                assert_eq!(f.bytes(), fresh.bytes());
                handed.extend(
                    f.take_durable()
                        .into_iter()
                        .map(|r| (r.start, r.end, r.body)),
                );
                fresh.known.clear();
                fresh_handed.extend(
                    fresh
                        .take_durable()
                        .into_iter()
                        .map(|r| (r.start, r.end, r.body)),
                );
                fresh.known.clear();
                assert_eq!(handed, fresh_handed);
            }
        }
    }
}
