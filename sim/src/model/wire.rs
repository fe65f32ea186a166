//! What the model reads off the wire: one JSON-RPC frame per line, and the
//! payload signature of a command as PROTOCOL.md 4.4 defines it, computed
//! here from the method table of PROTOCOL.md 4.1 (not by the host's code).

use serde_json::{Map, Value};

/// One frame, as the model needs it.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A request (client to host, or a server request host to client).
    Request {
        /// The JSON-RPC id.
        id: Value,
        /// The method.
        method: String,
        /// The params (an empty object when absent).
        params: Value,
    },
    /// A notification.
    Notification {
        /// The method.
        method: String,
        /// The params.
        params: Value,
        /// `emittedAtMs` (host clock), 0 when absent.
        emitted_ms: u64,
    },
    /// A response: `Ok(result)` or `Err(error object)`.
    Response {
        /// The JSON-RPC id (`null` for envelope errors).
        id: Value,
        /// The outcome.
        outcome: Result<Value, Value>,
    },
}

/// Parses JSON from bytes: from a `str` when they are UTF-8 (checked once,
/// whole; serde_json then does not check each string again), else as bytes
/// (which then fails as before). Either way the same value or an error.
pub fn json_of(b: &[u8]) -> serde_json::Result<Value> {
    match std::str::from_utf8(b) {
        Ok(s) => serde_json::from_str(s),
        Err(_) => serde_json::from_slice(b),
    }
}

/// Parses one line; `None` for anything that is not a JSON-RPC object.
pub fn parse(line: &[u8]) -> Option<Frame> {
    parse_with(line, &|_| true)
}

/// [`parse`] of a line known to be UTF-8 (a trace's lines are `String`s):
/// the same answer, without checking the bytes for UTF-8 again.
pub fn parse_str(line: &str) -> Option<Frame> {
    parse_frame_str(line, &|_| Keep::Whole).map(|(f, _)| f)
}

/// [`parse`], but a response's `result` may be only checked (as strictly
/// as [`parse`] reads it, and then not kept: `Value::Null` stands in for
/// it) when `want_result(id)` is false for the response's id. The model asks
/// for the results it reads and skips the rest (an `initialize` answer, a
/// read it does not judge, an answer to nothing it saw asked); whether a
/// line is a frame at all is decided as [`parse`] decides it.
pub fn parse_with(line: &[u8], want_result: &dyn Fn(&Value) -> bool) -> Option<Frame> {
    let keep = |id: &Value| {
        if want_result(id) {
            Keep::Whole
        } else {
            Keep::Nothing
        }
    };
    parse_frame(line, &keep).map(|(f, _)| f)
}

/// What [`parse_frame`] keeps of a response's `result`, chosen by the
/// response's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep<'k> {
    /// Nothing: the result is only checked; `null` stands in for it.
    Nothing,
    /// The whole result, as a `Value`.
    Whole,
    /// A read's result: all of it as a `Value` except the snapshot's items
    /// (`history.snapshot.state.items`, the bulk of a read, growing with
    /// its session), which are checked as strictly and kept as their JSON
    /// text, a `null` standing in for them in the `Value`. The model
    /// compares them as text with its own items written out, and parses
    /// them only when the texts differ. With the model's items written out
    /// ([`canonical`] texts of values [`round_trips`] holds for), items
    /// that are exactly those texts are not checked again: such text is
    /// valid JSON that parses back to exactly those values, and shallow
    /// enough in any line.
    ItemsAsText(Option<&'k [String]>),
}

/// How deep the values [`round_trips`] vouches for may nest.
pub const KNOWN_DEPTH: usize = 32;

/// Whether `v`'s [`canonical`] text parses back to exactly `v`, in any
/// place of a line: it nests at most [`KNOWN_DEPTH`] levels, holds no
/// float (serde_json reads floats back to the nearest value only on a
/// best effort) and no member named as serde_json's raw-value token (which,
/// sorted first, would make a `Value` read its object as raw JSON text).
pub fn round_trips(v: &Value) -> bool {
    fn walk(v: &Value, left: usize) -> bool {
        match v {
            Value::Number(n) => !n.is_f64(),
            Value::Array(a) => left > 0 && a.iter().all(|x| walk(x, left - 1)),
            Value::Object(o) => {
                left > 0
                    && o.iter()
                        .all(|(k, x)| k != RAW_VALUE_TOKEN && walk(x, left - 1))
            }
            _ => true,
        }
    }
    walk(v, KNOWN_DEPTH)
}

/// Whether `text` is exactly a JSON array of `parts` (no spaces).
pub fn is_array_of(text: &str, parts: &[String]) -> bool {
    array_prefix(text, parts) == Some(text.len())
}

/// The length of the start of `text` that is exactly a JSON array of
/// `parts` (no spaces), if it starts so.
fn array_prefix(text: &str, parts: &[String]) -> Option<usize> {
    let mut rest = text.strip_prefix('[')?;
    for (i, x) in parts.iter().enumerate() {
        let sep = if i > 0 {
            rest.strip_prefix(',')
        } else {
            Some(rest)
        };
        rest = sep?.strip_prefix(x.as_str())?;
    }
    rest.strip_prefix(']')?;
    Some(text.len() - rest.len() + 1)
}

/// A line with a read's items cut out: `null` in their place.
struct Spliced<'a> {
    /// The line with `null` in place of the items.
    line: String,
    /// Where the `null` starts.
    at: usize,
    /// The items' text in the original line.
    items: &'a str,
}

/// The line with the value of the first `"items":` member that is exactly
/// one of the `known` arrays (written out as [`Keep::ItemsAsText`] trusts)
/// replaced by `null`.
fn splice_items<'a>(s: &'a str, known: &[&[String]]) -> Option<Spliced<'a>> {
    let (at, len) = s.match_indices("\"items\":[").find_map(|(i, _)| {
        let at = i + "\"items\":".len();
        known
            .iter()
            .find_map(|k| array_prefix(&s[at..], k))
            .map(|len| (at, len))
    })?;
    // `at` follows an ASCII match and `at + len` an ASCII `]`: both are
    // character boundaries.
    let mut cut = String::with_capacity(s.len() - len + 4);
    cut.push_str(&s[..at]);
    cut.push_str("null");
    cut.push_str(&s[at + len..]);
    Some(Spliced {
        line: cut,
        at,
        items: &s[at..at + len],
    })
}

/// [`parse_frame`], for a line that may be a read's answer whose items are
/// exactly one of the `known` arrays of texts (each trusted, as
/// [`Keep::ItemsAsText`] trusts them): those items are cut out of the line
/// unread, by text, and the rest is parsed. The cut is taken only when the
/// parse of the rest read the `null` in their place, exactly there, as the
/// items of a read's result: the line is then the valid line with a valid
/// value (those items, valid JSON shallow enough anywhere) in that value's
/// place, so it is a frame exactly when the rest is, and its items are
/// that text (the second member of the answer). Any other line is read by [`parse_frame`].
pub fn parse_read_frame<'a, 'k>(
    line: &'a [u8],
    known: &[&[String]],
    keep: &dyn Fn(&Value) -> Keep<'k>,
) -> Option<(Frame, Option<&'a str>)> {
    match std::str::from_utf8(line) {
        Ok(s) => parse_read_frame_str(s, known, keep),
        Err(_) => parse_frame(line, keep),
    }
}

/// [`parse_read_frame`] of a line known to be UTF-8 (a trace's lines are
/// `String`s): the same answer, without checking the bytes for UTF-8
/// again.
pub fn parse_read_frame_str<'a, 'k>(
    line: &'a str,
    known: &[&[String]],
    keep: &dyn Fn(&Value) -> Keep<'k>,
) -> Option<(Frame, Option<&'a str>)> {
    if let Some(cut) = splice_items(line, known) {
        if let Some((f, Some(raw))) = parse_frame_str(&cut.line, keep) {
            let offset = (raw.as_ptr() as usize).checked_sub(cut.line.as_ptr() as usize);
            if raw == "null" && offset == Some(cut.at) {
                return Some((f, Some(cut.items)));
            }
        }
    }
    parse_frame_str(line, keep)
}

/// A line of exactly the shape `{"id":N,"jsonrpc":"2.0","result":R}`
/// (what a host writes for a response), with `N` a plain non-negative
/// integer, and a newline or nothing after it: `N` and the text `R`
/// (unchecked: anything between the `"result":` and the line's last `}`).
pub fn plain_response(line: &str) -> Option<(u64, &str)> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let rest = line.strip_prefix("{\"id\":")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (num, rest) = rest.split_at(digits);
    if num.is_empty() || num.len() > 20 || (num.len() > 1 && num.starts_with('0')) {
        return None;
    }
    let n = num.parse().ok()?;
    let r = rest
        .strip_prefix(",\"jsonrpc\":\"2.0\",\"result\":")?
        .strip_suffix('}')?;
    Some((n, r))
}

/// A read's answer as [`parse_frame`] (or [`parse_read_frame`]) read it
/// with [`Keep::ItemsAsText`], remembered by its result's text `R` from a
/// [`plain_response`] line whose `R` is exactly one JSON value. Any other
/// plain line with the same `R` differs from it only in its id's digits,
/// so it is the same frame with that id, read the same way when its id
/// also asks for the items as text (whatever the known texts: text that is
/// one of them passes `check_bounded` too); its items are the same slice
/// of its own `R`. A client polls a session with such reads, so most are
/// not read again.
#[derive(Debug, Clone)]
pub struct ReadMemo {
    /// `R`.
    result: String,
    /// The result as read (`null` in place of items kept as text).
    value: Value,
    /// Where the items kept as text are in `R` (start, length).
    items: Option<(usize, usize)>,
}

impl ReadMemo {
    /// The memo of the plain line with id `n` and result text `r` that was
    /// read (with [`Keep::ItemsAsText`] for `n`) as `frame` and `items`;
    /// `None` unless that is an answer with id `n`, `items` (if any) lies
    /// in `r`, and `r` is exactly one JSON value.
    pub fn of(n: u64, r: &str, frame: &Frame, items: Option<&str>) -> Option<ReadMemo> {
        let Frame::Response { id, outcome: Ok(v) } = frame else {
            return None;
        };
        if id.as_u64() != Some(n) {
            return None;
        }
        let items = match items {
            None => None,
            Some(t) => {
                let at = (t.as_ptr() as usize).checked_sub(r.as_ptr() as usize)?;
                (at + t.len() <= r.len()).then_some((at, t.len()))?;
                Some((at, t.len()))
            }
        };
        serde_json::from_str::<&serde_json::value::RawValue>(r).ok()?;
        Some(ReadMemo {
            result: r.to_string(),
            value: v.clone(),
            items,
        })
    }

    /// `R`.
    pub fn result(&self) -> &str {
        &self.result
    }

    /// The frame of the plain line with id `n` and this result text `r`,
    /// as [`parse_frame`] reads it with [`Keep::ItemsAsText`] for `n`.
    pub fn frame<'a>(&self, n: u64, r: &'a str) -> (Frame, Option<&'a str>) {
        let f = Frame::Response {
            id: Value::from(n),
            outcome: Ok(self.value.clone()),
        };
        (f, self.items.map(|(at, len)| &r[at..at + len]))
    }
}

/// Where [`Keep::ItemsAsText`] finds the items in a read's result.
const ITEMS_PATH: [&str; 4] = ["history", "snapshot", "state", "items"];

/// [`parse_with`], choosing per response id what to keep of its result
/// ([`Keep`]); with [`Keep::ItemsAsText`], the items' text when they were
/// kept as text (`None` when the line was read any other way: then the
/// frame holds the whole result, items included). Whether a line is a frame
/// at all is decided as [`parse`] decides it, and putting the parsed text
/// back in place of its `null` gives what [`parse`] gives.
pub fn parse_frame<'a, 'k>(
    line: &'a [u8],
    keep: &dyn Fn(&Value) -> Keep<'k>,
) -> Option<(Frame, Option<&'a str>)> {
    match std::str::from_utf8(line) {
        Ok(s) => parse_frame_str(s, keep),
        Err(_) => parse_whole(line).map(|f| (f, None)),
    }
}

/// [`parse_frame`] of a line known to be UTF-8 (a trace's lines are
/// `String`s): the same answer, without checking the bytes for UTF-8
/// again.
pub fn parse_frame_str<'a, 'k>(
    s: &'a str,
    keep: &dyn Fn(&Value) -> Keep<'k>,
) -> Option<(Frame, Option<&'a str>)> {
    let line = s.as_bytes();
    let mut de = serde_json::Deserializer::from_str(s);
    let parts = serde::de::DeserializeSeed::deserialize(FrameSeed { keep }, &mut de)
        .and_then(|p| de.end().map(|()| p));
    // Anything unusual (not an object, not JSON, a member spelled as
    // serde_json's raw-value token, a result read for an id that a later
    // duplicate `id` replaced, a read's result not shaped as a read) is
    // read the whole-value way.
    let Ok(p) = parts else {
        return parse_whole(line).map(|f| (f, None));
    };
    if let Some(Value::String(method)) = p.method {
        let params = p.params.unwrap_or_else(|| Value::Object(Map::new()));
        let emitted_ms = p.emitted.as_ref().and_then(Value::as_u64).unwrap_or(0);
        let f = match p.id {
            Some(id) => Frame::Request { id, method, params },
            None => Frame::Notification {
                method,
                params,
                emitted_ms,
            },
        };
        return Some((f, None));
    }
    let id = p.id.unwrap_or(Value::Null);
    if let Some(r) = p.result {
        let (r, items) = match r {
            Res::Kept(v) => (v, None),
            Res::Skipped(for_id) if for_id == id => (Value::Null, None),
            Res::Items(v, items, for_id) if for_id == id => (v, items),
            Res::Skipped(_) | Res::Items(..) => return parse_whole(line).map(|f| (f, None)),
        };
        return Some((Frame::Response { id, outcome: Ok(r) }, items));
    }
    let e = p.error?;
    let f = Frame::Response {
        id,
        outcome: Err(e),
    };
    Some((f, None))
}

/// serde_json's private member name that makes a `Value` parse its string
/// as JSON; such a line is left to [`parse_whole`].
pub(super) const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// A line's members as [`parse_frame`] reads them (the last of a repeated
/// member wins, as in a `Value`).
#[derive(Default)]
struct Parts<'de> {
    method: Option<Value>,
    params: Option<Value>,
    id: Option<Value>,
    emitted: Option<Value>,
    result: Option<Res<'de>>,
    error: Option<Value>,
}

/// A `result` member: kept, only checked (for this id), or kept with its
/// items as text (for this id).
enum Res<'de> {
    Kept(Value),
    Skipped(Value),
    Items(Value, Option<&'de str>, Value),
}

/// The members of a frame [`parse_frame`] tells apart.
enum Member {
    Method,
    Params,
    Id,
    Emitted,
    Result,
    Error,
    Other,
}

impl<'de> serde::Deserialize<'de> for Member {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Member, D::Error> {
        member_name(d, |k| match k {
            "method" => Ok(Member::Method),
            "params" => Ok(Member::Params),
            "id" => Ok(Member::Id),
            "emittedAtMs" => Ok(Member::Emitted),
            "result" => Ok(Member::Result),
            "error" => Ok(Member::Error),
            RAW_VALUE_TOKEN => Err("raw value token"),
            _ => Ok(Member::Other),
        })
    }
}

/// Reads an object member's name through `name` (the visitor every member
/// enum of the model needs, once); `Err` fails the read with its message.
pub(super) fn member_name<'de, D: serde::Deserializer<'de>, T>(
    d: D,
    name: fn(&str) -> Result<T, &'static str>,
) -> Result<T, D::Error> {
    struct V<T>(fn(&str) -> Result<T, &'static str>);
    impl<T> serde::de::Visitor<'_> for V<T> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a member name")
        }
        fn visit_str<E: serde::de::Error>(self, k: &str) -> Result<T, E> {
            (self.0)(k).map_err(E::custom)
        }
    }
    d.deserialize_any(V(name))
}

/// Reads a frame's members; `keep` decides what is kept of a `result`
/// that follows its `id`.
struct FrameSeed<'a, 'k> {
    keep: &'a dyn Fn(&Value) -> Keep<'k>,
}

impl<'de> serde::de::DeserializeSeed<'de> for FrameSeed<'_, '_> {
    type Value = Parts<'de>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Parts<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for FrameSeed<'_, '_> {
    type Value = Parts<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON-RPC object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Parts<'de>, A::Error> {
        let mut p = Parts::default();
        while let Some(k) = m.next_key::<Member>()? {
            match k {
                Member::Method => p.method = Some(m.next_value()?),
                Member::Params => p.params = Some(m.next_value()?),
                Member::Id => p.id = Some(m.next_value()?),
                Member::Emitted => p.emitted = Some(m.next_value()?),
                Member::Error => p.error = Some(m.next_value()?),
                Member::Result => {
                    let keep = p.id.as_ref().map_or(Keep::Whole, |id| (self.keep)(id));
                    p.result = Some(match (keep, &p.id) {
                        (Keep::Nothing, Some(id)) => {
                            m.next_value::<Checked>()?;
                            Res::Skipped(id.clone())
                        }
                        (Keep::ItemsAsText(known), Some(id)) => {
                            let seed = PathSeed {
                                path: &ITEMS_PATH,
                                known,
                            };
                            let (v, items) = m.next_value_seed(seed)?;
                            Res::Items(v, items, id.clone())
                        }
                        _ => Res::Kept(m.next_value()?),
                    })
                }
                Member::Other => {
                    m.next_value::<Checked>()?;
                }
            }
        }
        Ok(p)
    }
}

/// An object read as a `Value` is, except the member at the end of `path`
/// (through objects named by the path's members), which is kept as its
/// text (checked by [`Bounded`]) with `null` in its place. A `null` on the
/// path is read as itself (no text); anything else but an object on the
/// path (and any raw-value token as a member name) is an error: the line
/// is then read the whole-value way. Text that is exactly an array of the
/// `known` texts is not checked again (see [`Keep::ItemsAsText`]).
pub(super) struct PathSeed<'p, 'k> {
    path: &'p [&'static str],
    known: Option<&'k [String]>,
}

impl<'de> serde::de::DeserializeSeed<'de> for PathSeed<'_, '_> {
    type Value = (Value, Option<&'de str>);
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'p> PathSeed<'p, '_> {
    /// The seed of a recorded answer (`{"result": R}` or `{"error": E}`)
    /// that keeps a resume snapshot's items (`R`'s
    /// `history.snapshot.state.items`) as text.
    pub(super) fn answer_items() -> PathSeed<'static, 'static> {
        PathSeed {
            path: &ANSWER_ITEMS_PATH,
            known: None,
        }
    }
}

/// Puts a snapshot's items, kept as `text` (checked when read), back in
/// their place (`history.snapshot.state.items`) in a resume's `result`.
pub(super) fn put_snapshot_items(result: &mut Value, text: &str) {
    result["history"]["snapshot"]["state"]["items"] =
        serde_json::from_str(text).expect("checked when read");
}

/// Where [`PathSeed::answer_items`] finds the items in a recorded answer.
const ANSWER_ITEMS_PATH: [&str; 5] = ["result", "history", "snapshot", "state", "items"];

impl<'de> serde::de::Visitor<'de> for PathSeed<'_, '_> {
    type Value = (Value, Option<&'de str>);
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        // A `null` on the path (a resume's `history.snapshot` without
        // history) is read as itself.
        Ok((Value::Null, None))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let mut o = Map::new();
        let mut text = None;
        while let Some(Key(k)) = m.next_key::<Key>()? {
            match self.path {
                [last] if k == *last => {
                    let raw: &'de serde_json::value::RawValue = m.next_value()?;
                    if !self.known.is_some_and(|k| is_array_of(raw.get(), k))
                        && !plainly_bounded(raw.get())
                    {
                        check_bounded(raw.get()).map_err(A::Error::custom)?;
                    }
                    text = Some(raw.get());
                    o.insert(k, Value::Null);
                }
                [first, rest @ ..] if k == *first => {
                    let seed = PathSeed {
                        path: rest,
                        known: self.known,
                    };
                    let (v, t) = m.next_value_seed(seed)?;
                    text = t;
                    o.insert(k, v);
                }
                _ => {
                    let v: Value = m.next_value()?;
                    o.insert(k, v);
                }
            }
        }
        Ok((Value::Object(o), text))
    }
}

/// A member name, as a `Value` reads it; the raw-value token is an error.
struct Key(String);

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: serde::de::Error>(self, k: &str) -> Result<Key, E> {
                if k == RAW_VALUE_TOKEN {
                    return Err(E::custom("raw value token"));
                }
                Ok(Key(k.to_string()))
            }
        }
        d.deserialize_str(V)
    }
}

/// How deep [`Bounded`] lets JSON text nest: far less than serde_json's
/// limit (128 levels for a whole line), so that text kept apart from its
/// line is never accepted where the line, read whole, is too deep.
const BOUNDED_DEPTH: u8 = 64;

/// Whether JSON text that serde_json already read as one raw value (so
/// well-formed: its syntax, escapes and strings are checked) passes
/// [`check_bounded`] for plain reasons, seen in one pass over its bytes:
/// every `\u` escape names a character (no lone surrogate), no number has
/// an exponent or more than 300 digits (so none is out of range), it nests
/// at most 32 levels, and the raw-value token is nowhere in it. `false`
/// says nothing: [`check_bounded`] then decides. A resume's snapshot items
/// (the whole view) are checked this way, a string at a time.
fn plainly_bounded(text: &str) -> bool {
    if text.contains(RAW_VALUE_TOKEN) {
        return false;
    }
    let b = text.as_bytes();
    let hex4 = |at: usize| -> Option<u32> {
        let h = std::str::from_utf8(b.get(at..at + 4)?).ok()?;
        u32::from_str_radix(h, 16).ok()
    };
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
                    if b.get(i + 1) != Some(&b'u') {
                        i += 2;
                        continue;
                    }
                    let Some(c) = hex4(i + 2) else { return false };
                    i += 6;
                    if (0xDC00..0xE000).contains(&c) {
                        return false;
                    }
                    if (0xD800..0xDC00).contains(&c) {
                        // A leading surrogate: a trailing one must follow.
                        let low = (b.get(i..i + 2) == Some(b"\\u"))
                            .then(|| hex4(i + 2))
                            .flatten();
                        if !low.is_some_and(|l| (0xDC00..0xE000).contains(&l)) {
                            return false;
                        }
                        i += 6;
                    }
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > 32 {
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

/// Checks JSON text kept apart from its line as [`Checked`] checks a value
/// in place (the same parser paths), nesting at most [`BOUNDED_DEPTH`]
/// levels, and nothing after it.
fn check_bounded(text: &str) -> serde_json::Result<()> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde::de::DeserializeSeed::deserialize(Bounded(BOUNDED_DEPTH), &mut de)?;
    de.end()
}

/// [`Checked`], with a nesting budget.
struct Bounded(u8);

impl Bounded {
    /// The budget one level down; an error past the bottom.
    fn down<E: serde::de::Error>(&self) -> Result<Bounded, E> {
        match self.0 {
            0 => Err(E::custom("nested too deep to check apart")),
            n => Ok(Bounded(n - 1)),
        }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Bounded {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Bounded {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_i128<E>(self, _: i128) -> Result<(), E> {
        Ok(())
    }
    fn visit_u128<E>(self, _: u128) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        let down = self.down()?;
        while s.next_element_seed(Bounded(down.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        let down = self.down()?;
        while m.next_key::<Member>()?.is_some() {
            m.next_value_seed(Bounded(down.0))?;
        }
        Ok(())
    }
}

/// Any JSON value, read through the same parser paths a `Value` is read
/// through (so with the same checks: string escapes and surrogates, number
/// range, nesting depth), and kept nowhere.
pub(super) struct Checked;

impl<'de> serde::Deserialize<'de> for Checked {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Checked, D::Error> {
        d.deserialize_any(Checked)
    }
}

impl<'de> serde::de::Visitor<'de> for Checked {
    type Value = Checked;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i128<E>(self, _: i128) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u128<E>(self, _: u128) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_none<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Checked, D::Error> {
        d.deserialize_any(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Checked, A::Error> {
        while s.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Checked, A::Error> {
        while m.next_key::<Member>()?.is_some() {
            m.next_value::<Checked>()?;
        }
        Ok(Checked)
    }
}

/// The whole-value reading of a line that [`parse_with`] must agree with
/// (and falls back to for anything unusual).
fn parse_whole(line: &[u8]) -> Option<Frame> {
    let v: Value = json_of(line).ok()?;
    let mut o = match v {
        Value::Object(o) => o,
        _ => return None,
    };
    if let Some(Value::String(method)) = o.remove("method") {
        let params = o
            .remove("params")
            .unwrap_or_else(|| Value::Object(Map::new()));
        let emitted_ms = o.get("emittedAtMs").and_then(Value::as_u64).unwrap_or(0);
        return Some(match o.remove("id") {
            Some(id) => Frame::Request { id, method, params },
            None => Frame::Notification {
                method,
                params,
                emitted_ms,
            },
        });
    }
    let id = o.remove("id").unwrap_or(Value::Null);
    if let Some(r) = o.remove("result") {
        return Some(Frame::Response { id, outcome: Ok(r) });
    }
    let e = o.remove("error")?;
    Some(Frame::Response {
        id,
        outcome: Err(e),
    })
}

/// Commands whose ledger row is durable (PROTOCOL.md 4.1).
pub const DURABLE_METHODS: [&str; 7] = [
    "session/start",
    "session/resume",
    "turn/start",
    "turn/steer",
    "turn/unqueue",
    "approval/decide",
    "state/update",
];

/// Carrier-less rows: host-lifetime dedupe only (PROTOCOL.md 4.4).
pub const CARRIERLESS_METHODS: [&str; 4] =
    ["turn/interrupt", "turn/cancel", "task/stop", "task/stopAll"];

/// Whether `method` is a command (carries a `commandId`).
pub fn is_command(method: &str) -> bool {
    DURABLE_METHODS.contains(&method) || CARRIERLESS_METHODS.contains(&method)
}

/// The ledger key of a command id (UUIDs compare without case).
pub fn key(cid: &str) -> String {
    cid.to_ascii_lowercase()
}

/// `null`, for a member a payload lacks.
static NULL: Value = Value::Null;

/// A normalised param, borrowed from the params it is read from: what
/// [`normalise`] makes of them, without copying any of it (the payload
/// signature writes it out directly).
enum Norm<'a> {
    /// A member as it is (`null` when absent).
    Of(&'a Value),
    /// A string, ASCII-lowercased.
    Lower(&'a str),
    /// A fixed string (a default).
    Str(&'static str),
    /// The `input` parts of these params: `[{type, text}]`.
    Input(&'a Value),
    /// An object of these members.
    Obj(Vec<(&'static str, Norm<'a>)>),
}

/// `true`, for a flag a payload carries.
static TRUE: Value = Value::Bool(true);

/// Whether a `session/resume` or `session/read` asks `excludeItems: true`
/// (absent, `null` and `false` all mean the history is wanted).
pub fn asks_exclude_items(p: &Value) -> bool {
    p.get("excludeItems") == Some(&TRUE)
}

/// The `history` of an answer that serves none, and why (`cursorSuffix`,
/// `excluded`).
pub fn no_history(reason: &str) -> Value {
    serde_json::json!({"mode": "none", "items": null, "snapshot": null, "noneReason": reason})
}

/// Member `f` of `p`; `null` when absent (an absent optional and `null`
/// are the same).
fn opt<'a>(p: &'a Value, f: &str) -> Norm<'a> {
    Norm::Of(p.get(f).unwrap_or(&NULL))
}

/// A session id: compared without case.
fn lower<'a>(p: &'a Value, f: &str) -> Norm<'a> {
    match p.get(f) {
        Some(Value::String(s)) => Norm::Lower(s),
        other => Norm::Of(other.unwrap_or(&NULL)),
    }
}

impl Norm<'_> {
    /// The value it stands for.
    fn to_value(&self) -> Value {
        match self {
            Norm::Of(v) => (*v).clone(),
            Norm::Lower(s) => Value::String(s.to_ascii_lowercase()),
            Norm::Str(s) => Value::String((*s).to_string()),
            Norm::Input(p) => {
                let parts = p["input"].as_array().map(Vec::as_slice).unwrap_or(&[]);
                Value::Array(
                    parts
                        .iter()
                        .map(|x| serde_json::json!({"type": x["type"], "text": x["text"]}))
                        .collect(),
                )
            }
            Norm::Obj(members) => Value::Object(
                members
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), v.to_value()))
                    .collect(),
            ),
        }
    }

    /// Writes it as [`canonical_into`] writes the value it stands for.
    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Norm::Of(v) => canonical_into(v, out),
            Norm::Lower(s) => write_str(out, &s.to_ascii_lowercase()),
            Norm::Str(s) => write_str(out, s),
            Norm::Input(p) => {
                let parts = p["input"].as_array().map(Vec::as_slice).unwrap_or(&[]);
                out.push(b'[');
                for (i, x) in parts.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    // The two members in sorted order.
                    out.extend_from_slice(b"{\"text\":");
                    canonical_into(&x["text"], out);
                    out.extend_from_slice(b",\"type\":");
                    canonical_into(&x["type"], out);
                    out.push(b'}');
                }
                out.push(b']');
            }
            Norm::Obj(members) => {
                let mut sorted: Vec<&(&str, Norm)> = members.iter().collect();
                sorted.sort_by_key(|(k, _)| *k);
                out.push(b'{');
                for (i, (k, v)) in sorted.into_iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_str(out, k);
                    out.push(b':');
                    v.write(out);
                }
                out.push(b'}');
            }
        }
    }
}

/// The params a method defines, as [`Norm`]: PROTOCOL.md 4.1's table.
fn norm_of<'a>(method: &str, p: &'a Value) -> Option<Norm<'a>> {
    let sid = || ("sessionId", lower(p, "sessionId"));
    Some(Norm::Obj(match method {
        "session/start" => vec![sid(), ("workspaceRoot", opt(p, "workspaceRoot"))],
        "session/resume" => {
            let mut m = vec![sid(), ("cursor", opt(p, "cursor"))];
            // Part of the payload only when set (a resume without it
            // keeps the signature it always had).
            if asks_exclude_items(p) {
                m.push(("excludeItems", Norm::Of(&TRUE)));
            }
            m
        }
        "turn/start" => {
            let if_busy = match opt(p, "ifBusy") {
                Norm::Of(Value::Null) => Norm::Str("queue"),
                v => v,
            };
            vec![sid(), ("input", Norm::Input(p)), ("ifBusy", if_busy)]
        }
        "turn/steer" => vec![
            sid(),
            ("expectedTurnId", opt(p, "expectedTurnId")),
            ("input", Norm::Input(p)),
        ],
        "turn/unqueue" | "turn/interrupt" | "turn/cancel" => {
            vec![sid(), ("turnId", opt(p, "turnId"))]
        }
        "task/stop" => vec![sid(), ("taskId", opt(p, "taskId"))],
        "task/stopAll" => vec![sid()],
        "approval/decide" => {
            let r = &p["requirementId"];
            let req = vec![
                ("approvalId", opt(r, "approvalId")),
                ("sourceIndex", opt(r, "sourceIndex")),
            ];
            vec![
                sid(),
                ("approvalId", opt(p, "approvalId")),
                ("requirementId", Norm::Obj(req)),
                ("choiceId", opt(p, "choiceId")),
            ]
        }
        "state/update" => vec![
            sid(),
            ("expectedRevision", opt(p, "expectedRevision")),
            ("set", opt(p, "set")),
        ],
        _ => return None,
    }))
}

/// The params a method defines, defaults applied, unknown members and
/// `commandId` dropped (PROTOCOL.md 4.1's table; an absent optional and
/// `null` are the same). `None` for a method that is not a command.
pub fn normalise(method: &str, p: &Value) -> Option<Value> {
    norm_of(method, p).map(|n| n.to_value())
}

/// The payload signature: canonical JSON (sorted members, no spaces) of
/// `{method, params}` with `params` normalised. Written straight from the
/// params (no normalised copy is built).
pub fn signature(method: &str, params: &Value) -> Option<String> {
    let norm = norm_of(method, params)?;
    // `{"method":..,"params":..}`: the two members in sorted order.
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"{\"method\":");
    write_str(&mut out, method);
    out.extend_from_slice(b",\"params\":");
    norm.write(&mut out);
    out.push(b'}');
    Some(String::from_utf8(out).expect("serde_json writes UTF-8"))
}

/// Writes `v` with object members sorted by key, recursively, scalars as
/// serde_json writes them (so `1` and `1.0` differ, as their values do).
pub fn canonical(v: &Value, out: &mut String) {
    let mut buf = Vec::new();
    sorted_into(v, &mut buf, false);
    out.push_str(std::str::from_utf8(&buf).expect("serde_json writes UTF-8"));
}

/// Writes a string (a key) as serde_json writes it.
fn write_str(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(out, s).expect("writing to a Vec cannot fail");
}

/// Writes a scalar as serde_json writes it.
fn write_value(out: &mut Vec<u8>, v: &Value) {
    serde_json::to_writer(out, v).expect("writing to a Vec cannot fail");
}

/// Writes `v` as RFC 8785 (JCS) does, for a payload signature: members
/// sorted by the UTF-16 code units of their names, numbers in
/// ECMAScript's form (`12.0` is `12`), strings with JSON's short escapes
/// and other controls as lowercase `\u00xx` (as serde_json writes them).
fn canonical_into(v: &Value, out: &mut Vec<u8>) {
    sorted_into(v, out, true)
}

/// Members sorted, recursively; numbers as JCS writes them (`jcs`) or as
/// serde_json does.
fn sorted_into(v: &Value, out: &mut Vec<u8>, jcs: bool) {
    match v {
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            if keys.iter().all(|k| k.is_ascii()) {
                keys.sort();
            } else {
                keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            }
            out.push(b'{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, k.as_str());
                out.push(b':');
                sorted_into(&o[*k], out, jcs);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                sorted_into(x, out, jcs);
            }
            out.push(b']');
        }
        Value::Number(n) if jcs => write_number(out, n),
        other => write_value(out, other),
    }
}

/// A number as ECMAScript's `Number.prototype.toString` writes the IEEE
/// double it reads as (RFC 8785 3.2.2.3): `12.0` and `1.2e1` are `12`.
fn write_number(out: &mut Vec<u8>, n: &serde_json::Number) {
    // Every number serde_json holds is finite.
    let f = n.as_f64().unwrap_or_default();
    out.extend_from_slice(ryu_js::Buffer::new().format_finite(f).as_bytes());
}

/// The `commandRejected` reason of an error object, if it is one.
pub fn rejection(e: &Value) -> Option<&str> {
    (e["code"] == -32030)
        .then(|| e["data"]["reason"].as_str())
        .flatten()
}

/// Whether an answer is a recorded ledger outcome (what replays repeat):
/// a result, or a `commandRejected` other than the two computed afresh on
/// each arrival.
pub fn is_recorded(outcome: &Result<Value, Value>) -> bool {
    match outcome {
        Ok(_) => true,
        Err(e) => {
            rejection(e).is_some_and(|r| r != "command_id_conflict" && r != "session_id_conflict")
        }
    }
}

/// The durable ordinal and ephemeral index of a cursor `v:<sid>:<n>[.<k>]`
/// of session `sid`; `None` when it is not that session's cursor form.
pub fn cursor_of(sid: &str, cursor: &str) -> Option<(u64, u64)> {
    let rest = cursor
        .strip_prefix("v:")?
        .strip_prefix(sid)?
        .strip_prefix(':')?;
    let (n, k) = match rest.split_once('.') {
        Some((n, k)) => (n, Some(k)),
        None => (rest, None),
    };
    let n: u64 = n.parse().ok()?;
    let k: u64 = match k {
        Some(k) => k.parse().ok().filter(|k| *k > 0)?,
        None => 0,
    };
    Some((n, k))
}

/// [`cursor_of`], only for the canonical spelling (`v:<sid>:<n>` or
/// `v:<sid>:<n>.<k>`, decimal without leading zeros, `k` from 1): the
/// only cursors a host ever issues, so the only ones it may accept.
pub fn canonical_cursor_of(sid: &str, cursor: &str) -> Option<(u64, u64)> {
    let (n, k) = cursor_of(sid, cursor)?;
    let spelled = if k == 0 {
        format!("v:{sid}:{n}")
    } else {
        format!("v:{sid}:{n}.{k}")
    };
    (spelled == cursor).then_some((n, k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_cursor_spelled_as_hosts_spell_it_is_canonical() {
        let s = "s1";
        assert_eq!(canonical_cursor_of(s, "v:s1:0"), Some((0, 0)));
        assert_eq!(canonical_cursor_of(s, "v:s1:12.3"), Some((12, 3)));
        for bad in [
            "v:s1:01",
            "v:s1:1.01",
            "v:s1:1.0",
            "v:s1:+1",
            "v:s2:1",
            "v:s1:",
        ] {
            assert_eq!(canonical_cursor_of(s, bad), None, "{bad}");
        }
        // The lenient reading takes a leading zero.
        assert_eq!(cursor_of(s, "v:s1:01"), Some((1, 0)));
    }

    /// Each item's canonical text (how the model keeps known items).
    fn texts(items: &[Value]) -> Vec<String> {
        items
            .iter()
            .map(|v| {
                let mut t = String::new();
                canonical(v, &mut t);
                t
            })
            .collect()
    }

    #[test]
    fn defaults_and_unknown_members_do_not_change_the_signature() {
        let a = json!({"sessionId": "0198F0AA-1111-7000-8000-0000000000AA", "commandId": "x", "input": [{"type": "text", "text": "hi", "extra": 1}], "junk": true});
        let b = json!({"sessionId": "0198f0aa-1111-7000-8000-0000000000aa", "ifBusy": "queue", "input": [{"text": "hi", "type": "text"}]});
        assert_eq!(signature("turn/start", &a), signature("turn/start", &b));
        let c = json!({"sessionId": "0198f0aa-1111-7000-8000-0000000000aa", "ifBusy": "steer", "input": [{"text": "hi", "type": "text"}]});
        assert_ne!(signature("turn/start", &b), signature("turn/start", &c));
        assert_ne!(signature("turn/start", &b), signature("turn/steer", &b));
        assert_eq!(signature("view/page", &b), None);
    }

    /// The old, copying definition of the canonical form.
    fn canonical_by_copies(v: &Value, out: &mut String) {
        by_copies(v, out, false)
    }

    /// The copying definition of RFC 8785's form (signatures).
    fn jcs_by_copies(v: &Value, out: &mut String) {
        by_copies(v, out, true)
    }

    fn by_copies(v: &Value, out: &mut String, jcs: bool) {
        match v {
            Value::Object(o) => {
                let mut keys: Vec<&String> = o.keys().collect();
                keys.sort_by_key(|k| k.encode_utf16().collect::<Vec<u16>>());
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    by_copies(&o[*k], out, jcs);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    by_copies(x, out, jcs);
                }
                out.push(']');
            }
            Value::Number(n) if jcs => {
                out.push_str(ryu_js::Buffer::new().format_finite(n.as_f64().unwrap()))
            }
            other => out.push_str(&other.to_string()),
        }
    }

    /// RFC 8785's own examples: numbers (3.2.2.3, appendix B) and the
    /// member order by UTF-16 code units (3.2.3), and a payload whose
    /// integers are spelled as decimals signs as the integers do.
    #[test]
    fn signatures_are_rfc_8785() {
        let mut out = Vec::new();
        let v: Value = serde_json::from_str(
            "[1e30, 4.50, 2e-3, 0.000001, 1e-7, -0.0, 12.0, 333333333.33333329, \
             9007199254740993, 295147905179352830000.0]",
        )
        .unwrap();
        canonical_into(&v, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[1e+30,4.5,0.002,0.000001,1e-7,0,12,333333333.3333333,9007199254740992,295147905179352830000]"
        );
        let keys = [
            "\u{20ac}",
            "\r",
            "\u{fb33}",
            "1",
            "\u{1f600}",
            "\u{80}",
            "\u{f6}",
        ];
        let v = Value::Object(keys.iter().map(|k| (k.to_string(), json!(0))).collect());
        let mut out = Vec::new();
        canonical_into(&v, &mut out);
        let text = String::from_utf8(out).unwrap();
        let at = |k: &str| text.find(&serde_json::to_string(k).unwrap()).unwrap();
        let mut want: Vec<&str> = keys.to_vec();
        want.sort_by_key(|k| at(k));
        assert_eq!(
            want,
            [
                "\r",
                "1",
                "\u{80}",
                "\u{f6}",
                "\u{20ac}",
                "\u{1f600}",
                "\u{fb33}"
            ],
            "{text}"
        );
        let p = |set: Value| json!({"sessionId": "s1", "expectedRevision": 2, "set": set});
        assert_eq!(
            signature("state/update", &p(json!({"b0": 12, "b1": 7}))),
            signature("state/update", &p(json!({"b0": 12.0, "b1": 7.0})))
        );
        assert_ne!(
            signature("state/update", &p(json!({"b0": 12}))),
            signature("state/update", &p(json!({"b0": 12.5})))
        );
    }

    #[test]
    fn canonical_form_is_the_copying_one() {
        let cases = [
            json!({"z": 1, "a": [true, null, -2, 2.5, 1e300, "x\"y\\\u{1}\u{e9}\u{1F600}"], "\u{7}k\"": {"b": {}, "a": []}}),
            json!("plain"),
            json!([{"sessionId": "S", "input": [{"type": "text", "text": "hi\n"}]}, 18446744073709551615u64, -9223372036854775808i64]),
        ];
        for v in &cases {
            let mut want = String::new();
            canonical_by_copies(v, &mut want);
            let mut got = String::new();
            canonical(v, &mut got);
            assert_eq!(got, want);
        }
        let p = json!({"sessionId": "0198F0AA-1111-7000-8000-0000000000AA", "approvalId": "a\"1", "requirementId": {"approvalId": "r", "sourceIndex": 3}, "choiceId": "ok", "set": {"k\u{e9}": [1, {"x": null}]}, "expectedRevision": 4, "input": [{"type": "text", "text": "\u{2028}"}]});
        for m in DURABLE_METHODS.iter().chain(CARRIERLESS_METHODS.iter()) {
            let mut want = String::new();
            canonical_by_copies(
                &json!({"method": m, "params": normalise_by_copies(m, &p).unwrap()}),
                &mut want,
            );
            assert_eq!(signature(m, &p), Some(want), "{m}");
        }
    }

    /// The old definition of the normalised params: built as a `Value`.
    fn normalise_by_copies(method: &str, p: &Value) -> Option<Value> {
        fn opt(p: &Value, f: &str) -> Value {
            match p.get(f) {
                None | Some(Value::Null) => Value::Null,
                Some(v) => v.clone(),
            }
        }
        fn lower(v: Value) -> Value {
            match v {
                Value::String(s) => Value::String(s.to_ascii_lowercase()),
                other => other,
            }
        }
        fn input(p: &Value) -> Value {
            let parts = p["input"].as_array().cloned().unwrap_or_default();
            Value::Array(
                parts
                    .iter()
                    .map(|x| json!({"type": x["type"], "text": x["text"]}))
                    .collect(),
            )
        }
        let sid = || lower(opt(p, "sessionId"));
        Some(match method {
            "session/start" => {
                json!({"sessionId": sid(), "workspaceRoot": opt(p, "workspaceRoot")})
            }
            "session/resume" => json!({"sessionId": sid(), "cursor": opt(p, "cursor")}),
            "turn/start" => {
                let if_busy = match opt(p, "ifBusy") {
                    Value::Null => Value::String("queue".into()),
                    v => v,
                };
                json!({"sessionId": sid(), "input": input(p), "ifBusy": if_busy})
            }
            "turn/steer" => {
                json!({"sessionId": sid(), "expectedTurnId": opt(p, "expectedTurnId"), "input": input(p)})
            }
            "turn/unqueue" => json!({"sessionId": sid(), "turnId": opt(p, "turnId")}),
            "turn/interrupt" | "turn/cancel" => {
                json!({"sessionId": sid(), "turnId": opt(p, "turnId")})
            }
            "task/stop" => json!({"sessionId": sid(), "taskId": opt(p, "taskId")}),
            "task/stopAll" => json!({"sessionId": sid()}),
            "approval/decide" => {
                let r = &p["requirementId"];
                json!({
                    "sessionId": sid(),
                    "approvalId": opt(p, "approvalId"),
                    "requirementId": {"approvalId": opt(r, "approvalId"), "sourceIndex": opt(r, "sourceIndex")},
                    "choiceId": opt(p, "choiceId"),
                })
            }
            "state/update" => {
                json!({"sessionId": sid(), "expectedRevision": opt(p, "expectedRevision"), "set": opt(p, "set")})
            }
            _ => return None,
        })
    }

    /// The signature written straight from the params, and `normalise`,
    /// are the old copying definitions' on every method (and non-command
    /// methods) and on params of every odd shape: members absent, `null`,
    /// of other types, nested, upper case, unknown, and params that are no
    /// object at all.
    #[test]
    fn signatures_written_in_place_are_the_copying_ones() {
        let mut params = vec![
            json!(null),
            json!(1),
            json!("S"),
            json!([]),
            json!([{"sessionId": "S"}]),
            json!({}),
        ];
        let values = [
            json!(null),
            json!(true),
            json!(0),
            json!(-0.0),
            json!(2.5),
            json!(18446744073709551615u64),
            json!("A\"b\\\u{1}\u{e9}\u{1F600}"),
            json!("0198F0AA-1111-7000-8000-0000000000AA"),
            json!([]),
            json!({}),
            json!([{"type": "text", "text": "hi", "x": 1}, {"text": null}, 3, "s", [], {"type": {"z": 1, "a": [null]}}]),
            json!({"approvalId": "r", "sourceIndex": 0, "extra": [1]}),
            json!({"approvalId": null}),
            json!({"k\u{e9}": [1, {"x": null, "b": 2}], "a": {}}),
        ];
        let members = [
            "sessionId",
            "workspaceRoot",
            "cursor",
            "input",
            "ifBusy",
            "expectedTurnId",
            "turnId",
            "taskId",
            "approvalId",
            "requirementId",
            "choiceId",
            "expectedRevision",
            "set",
            "commandId",
            "junk",
        ];
        for k in members {
            for v in &values {
                params.push(json!({ k: v }));
                let mut full = serde_json::Map::new();
                for m in members {
                    full.insert(m.to_string(), v.clone());
                }
                full.insert(k.to_string(), json!("Upper-Case"));
                params.push(Value::Object(full));
            }
        }
        params.push(json!({"sessionId": "0198F0AA-1111-7000-8000-0000000000AA", "approvalId": "a\"1", "requirementId": {"approvalId": "r", "sourceIndex": 3}, "choiceId": "ok", "set": {"k\u{e9}": [1, {"x": null}]}, "expectedRevision": 4, "input": [{"type": "text", "text": "\u{2028}"}], "ifBusy": "steer", "turnId": "T", "taskId": 7, "cursor": "v:s:1", "workspaceRoot": "/w"}));
        let methods = DURABLE_METHODS
            .iter()
            .chain(CARRIERLESS_METHODS.iter())
            .chain(["view/page", "session/read", ""].iter());
        for m in methods {
            for p in &params {
                let old = normalise_by_copies(m, p);
                assert_eq!(normalise(m, p), old, "{m} {p}");
                let want = old.map(|n| {
                    let mut want = String::new();
                    jcs_by_copies(&json!({"method": m, "params": n}), &mut want);
                    want
                });
                assert_eq!(signature(m, p), want, "{m} {p}");
            }
        }
    }

    #[test]
    fn json_of_reads_bytes_as_serde_json_does() {
        let cases: [&[u8]; 6] = [
            br#"{"a":"\u00e9t\u00e9","b":[1,2.5,null]}"#,
            "{\"a\":\"\u{e9}t\u{e9}\"}".as_bytes(),
            b"{\"a\":\"\xff\"}",
            b"\xff",
            br#"{"a":"\ud800"}"#,
            b"[1,",
        ];
        for b in cases {
            let want = serde_json::from_slice::<Value>(b).ok();
            assert_eq!(json_of(b).ok(), want, "{b:?}");
        }
    }

    /// `parse_with` reads every line as the whole-value parse does; a
    /// skipped result is `null` and nothing else differs.
    #[test]
    fn parse_with_agrees_with_the_whole_value_parse() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{}1{}}}"#,
            "[".repeat(126),
            "]".repeat(126)
        );
        let deeper = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{}1{}}}"#,
            "[".repeat(127),
            "]".repeat(127)
        );
        let lines: Vec<&[u8]> = vec![
            br#"{"jsonrpc":"2.0","id":3,"result":{"a":[1,2.5,"x\u00e9",null,true]}}"#,
            br#"{"result":{"a":1},"id":3}"#,
            br#"{"id":3,"result":{"a":1},"id":4}"#,
            br#"{"id":3,"result":{"a":1},"id":3}"#,
            br#"{"id":3,"result":1,"result":2}"#,
            br#"{"id":3,"error":{"code":-32030,"data":{"reason":"x"}}}"#,
            br#"{"id":3,"result":{"a":"\ud800"}}"#,
            br#"{"id":3,"result":{"a":"\ud83d\ude00"}}"#,
            br#"{"id":3,"result":{"a":1e400}}"#,
            br#"{"id":3,"result":{"a":1e300,"b":-0,"c":18446744073709551616}}"#,
            br#"{"id":3,"result":{"a":"\x"}}"#,
            br#"{"id":3,"result":{"a":1}} x"#,
            br#"{"id":3,"result":{"a":1},}"#,
            br#"{"id":3,"result":{"$serde_json::private::RawValue":"{\"k\":1}"}}"#,
            br#"{"$serde_json::private::RawValue":"{\"id\":3,\"result\":1}"}"#,
            br#"{"id":3,"junk":{"$serde_json::private::RawValue":"[1"},"result":1}"#,
            br#"{"id":3,"junk":"a\u0000b","result":1}"#,
            br#"{"method":"x","params":{"p":1},"emittedAtMs":5,"emittedAtMs":7}"#,
            br#"{"method":"x","id":null}"#,
            br#"{"method":7,"id":1,"result":2}"#,
            br#"{"method":"x","params":[1],"result":{"big":1}}"#,
            br#"{"jsonrpc":"2.0"}"#,
            br#"{}"#,
            br#"[1]"#,
            br#""s""#,
            b"\xff",
            b"{\"id\":1,\"result\":\"\xff\"}",
            b"",
            deep.as_bytes(),
            deeper.as_bytes(),
        ];
        for line in lines {
            let whole = parse_whole(line);
            assert_eq!(parse(line), whole, "{}", String::from_utf8_lossy(line));
            for skip in [json!(3), json!(1), json!(4), Value::Null] {
                let want = |id: &Value| *id != skip;
                let want_whole = match whole.clone() {
                    Some(Frame::Response { id, outcome: Ok(_) }) if id == skip => {
                        Some(Frame::Response {
                            id,
                            outcome: Ok(Value::Null),
                        })
                    }
                    other => other,
                };
                let got = parse_with(line, &want);
                assert!(
                    got == whole || got == want_whole,
                    "{} skipping {skip}: {got:?}",
                    String::from_utf8_lossy(line)
                );
            }
        }
    }

    /// A frame from [`parse_frame`] with its items text parsed and put
    /// back in place of its `null`.
    fn restored(f: Frame, items: Option<&str>) -> Frame {
        match (f, items) {
            (
                Frame::Response {
                    id,
                    outcome: Ok(mut r),
                },
                Some(t),
            ) => {
                let st = &mut r["history"]["snapshot"]["state"];
                assert_eq!(st["items"], Value::Null, "a null stands in");
                st["items"] = serde_json::from_str(t).expect("checked text parses");
                Frame::Response { id, outcome: Ok(r) }
            }
            (f, None) => f,
            (f, Some(t)) => panic!("items text {t} for {f:?}"),
        }
    }

    /// Read-shaped lines, and odd ones, read with their items as text:
    /// the same frames (or none) as the whole-value parse, whatever the
    /// model knows of the items.
    /// A remembered read answers any plain line with the same result text
    /// as reading that line would: the same frame, the same items text,
    /// whatever its id and the known texts; and a result text that is not
    /// exactly one value is not remembered.
    #[test]
    fn a_remembered_read_answers_as_reading_the_line() {
        let results = [
            r#"{"history":{"items":null,"mode":"snapshot","snapshot":{"schemaVersion":1,"state":{"activeTurn":null,"items":[{"a":1}],"kv":{"a":1}},"viewCursor":"v:s:2"}},"pendingRequests":[],"viewCursor":"v:s:2"}"#,
            r#"{"history":{"snapshot":{"state":{"items":[{"a":1,"b":"x\u00e9"},{"c":[1,2,{"d":null}]}]}}},"id":9}"#,
            r#"{"history":{"snapshot":{"state":{"items":[{"a":"\ud800"}]}}}}"#,
            r#"{"history":{"snapshot":{"state":{"items":[1],"items":[2]}}}}"#,
            r#"{"history":{"mode":"none","snapshot":null},"viewCursor":"v:s:1"}"#,
            r#"{"history":{"snapshot":{"state":{"items":[1]}}}},"id":7"#,
            r#"{"history":{"snapshot":{"state":{"items":[1]}}}},"error":{"code":1}"#,
            r#"{"history":{"snapshot":{"state":{"items":[1]}}}} "#,
            r#"{"history":{"snapshot":{"state":{"items":[1]}}}}}"#,
            r#"{"$serde_json::private::RawValue":"{\"history\":1}"}"#,
            r#"[1]"#,
            r#"null"#,
            r#"1e400"#,
        ];
        let known = [
            texts(&[json!({"a": 1})]),
            texts(&[json!(1)]),
            texts(&[
                json!({"a": 1, "b": "x\u{e9}"}),
                json!({"c": [1, 2, {"d": null}]}),
            ]),
        ];
        let lists: Vec<Vec<&[String]>> = vec![
            vec![],
            vec![known[0].as_slice()],
            vec![known[1].as_slice(), known[2].as_slice()],
        ];
        fn read<'a>(line: &'a str, n: u64, list: &[&[String]]) -> Option<(Frame, Option<&'a str>)> {
            let keep = |x: &Value| {
                if x.as_u64() == Some(n) {
                    Keep::ItemsAsText(list.first().copied())
                } else {
                    Keep::Whole
                }
            };
            if list.is_empty() {
                parse_frame_str(line, &keep)
            } else {
                parse_read_frame_str(line, list, &keep)
            }
        }
        let mut remembered = 0;
        for r in results {
            for tail in ["", "\n"] {
                let line = |n: u64| format!(r#"{{"id":{n},"jsonrpc":"2.0","result":{r}}}{tail}"#);
                for n in [0, 2, 31, u64::MAX] {
                    let first = line(n);
                    let (got_n, got_r) = plain_response(&first).expect("plain");
                    assert_eq!((got_n, got_r), (n, r));
                    for list in &lists {
                        let Some((f, items)) = read(&first, n, list) else {
                            continue;
                        };
                        let Some(m) = ReadMemo::of(n, got_r, &f, items) else {
                            continue;
                        };
                        remembered += 1;
                        assert_eq!(m.result(), r);
                        for other in [0, 2, 31, u64::MAX] {
                            let again = line(other);
                            let (_, r2) = plain_response(&again).expect("plain");
                            for list2 in &lists {
                                assert_eq!(
                                    Some(m.frame(other, r2)),
                                    read(&again, other, list2),
                                    "{again}"
                                );
                            }
                        }
                    }
                }
            }
        }
        assert!(remembered > 20, "{remembered}");
        for odd in [
            r#"{"id":02,"jsonrpc":"2.0","result":1}"#,
            r#"{"id":-1,"jsonrpc":"2.0","result":1}"#,
            r#"{"id":"2","jsonrpc":"2.0","result":1}"#,
            r#"{"id":18446744073709551616,"jsonrpc":"2.0","result":1}"#,
            r#"{"id":2,"result":1}"#,
            r#"{"id":2,"jsonrpc":"2.0","result":1} "#,
            r#"{"id":2,"jsonrpc":"2.0","result":1}\n\n"#,
            r#" {"id":2,"jsonrpc":"2.0","result":1}"#,
        ] {
            assert_eq!(plain_response(odd), None, "{odd}");
        }
    }

    #[test]
    fn parse_frame_with_items_as_text_agrees_with_the_whole_value_parse() {
        let read = |items: &str| {
            format!(
                r#"{{"id":3,"jsonrpc":"2.0","result":{{"history":{{"items":null,"mode":"snapshot","snapshot":{{"schemaVersion":1,"state":{{"activeTurn":null,"items":{items},"kv":{{"a":1}}}},"viewCursor":"v:s:2"}}}},"pendingRequests":[],"viewCursor":"v:s:2"}}}}"#
            )
        };
        let nest = |n: usize| format!("[{}1{}]", "[".repeat(n), "]".repeat(n));
        let mut lines: Vec<String> = [
            r#"[{"a":1,"b":"x\u00e9"},{"c":[1,2,{"d":null}]}]"#,
            r#"[]"#,
            r#"[{"a":1}]"#,
            r#"[{"a":1,"b":"xé"},{"c":[1,2,{"d":null}]}]"#,
            r#" [ {"a" : 1} ] "#,
            r#"[{"a":"\x"}]"#,
            r#"[{"a":"\ud800"}]"#,
            r#"[{"a":"\ud83d\ude00"}]"#,
            r#"[{"a":1e400}]"#,
            r#"[{"a":1e300,"b":-0,"c":18446744073709551616,"d":2.5}]"#,
            r#"[{"a":1},]"#,
            r#"[{"a":1}"#,
            r#"{"not":"an array"}"#,
            r#"null"#,
            r#"[{"$serde_json::private::RawValue":"{\"k\":1}"}]"#,
            r#"[{"a":1,"$serde_json::private::RawValue":"2"}]"#,
            r#"[{"a":"a\u0000b"}]"#,
        ]
        .iter()
        .map(|i| read(i))
        .collect();
        // Nesting: the line read whole takes at most 127 levels; the items
        // sit 6 deep.
        for n in [20, 31, 40, 62, 63, 64, 100, 119, 120, 121, 122, 130] {
            lines.push(read(&nest(n)));
        }
        let odd = [
            r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1]}}},"history":{"snapshot":{"state":{"items":[2]}}}}}"#,
            r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1],"items":[2]}}}}}"#,
            r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1]}}},"history":{"snapshot":null}}}"#,
            r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1]},"state":{"x":1}}}}}"#,
            r#"{"id":3,"result":{"history":null}}"#,
            r#"{"id":3,"result":{"history":[1]}}"#,
            r#"{"id":3,"result":[1]}"#,
            r#"{"id":3,"result":null}"#,
            r#"{"id":3,"result":{}}"#,
            r#"{"id":3,"result":{"history":{"snapshot":{"state":{"$serde_json::private::RawValue":"{}"}}}}}"#,
            r#"{"id":3,"result":{"$serde_json::private::RawValue":"{\"history\":1}"}}"#,
            r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1]}}}},"id":4}"#,
            r#"{"result":{"history":{"snapshot":{"state":{"items":[1]}}}},"id":3}"#,
            r#"{"id":3,"error":{"code":1}}"#,
            r#"{"id":3,"method":"x","result":{"history":{"snapshot":{"state":{"items":[1]}}}}}"#,
            r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1]}}}}} x"#,
            r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1]}}}},}"#,
        ];
        lines.extend(odd.iter().map(|l| l.to_string()));
        let known = [
            texts(&[
                json!({"a": 1, "b": "x\u{e9}"}),
                json!({"c": [1, 2, {"d": null}]}),
            ]),
            texts(&[json!({"a": 1})]),
            texts(&[json!(1)]),
            texts(&[]),
        ];
        let mut taken = 0;
        for line in &lines {
            let line = line.as_bytes();
            let whole = parse_whole(line);
            let mut modes = vec![Keep::ItemsAsText(None), Keep::Whole];
            modes.extend(known.iter().map(|k| Keep::ItemsAsText(Some(k.as_slice()))));
            for mode in modes {
                for id in [json!(3), json!(4)] {
                    let keep = |x: &Value| if *x == id { mode } else { Keep::Whole };
                    let got = parse_frame(line, &keep);
                    let text = got.as_ref().and_then(|(_, t)| *t);
                    taken += usize::from(text.is_some());
                    let got = got.map(|(f, t)| restored(f, t));
                    assert_eq!(
                        got,
                        whole,
                        "{} with {mode:?} for {id}",
                        String::from_utf8_lossy(line)
                    );
                }
            }
        }
        assert!(taken > 40, "the text path is taken ({taken})");
        // Items cut out by text: the same frames again, whether the cut is
        // taken or not.
        let mut cut_lines = lines.clone();
        cut_lines.extend(
            [
                // The known text elsewhere than the state's items.
                r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[2]}}},"x":{"items":[1]}}}"#,
                r#"{"id":3,"result":{"history":{"items":[1],"snapshot":{"state":{"items":[2]}}}}}"#,
                r#"{"id":3,"result":{"a":"\"items\":[1]","history":{"snapshot":{"state":{"items":[1]}}}}}"#,
                // A later member of the same name wins.
                r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1],"items":[2]}}}}}"#,
                r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[2],"items":[1]}}}}}"#,
                // Bytes after the known text that no valid line has.
                r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1]]}}}}}"#,
                r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1] x}}}}}"#,
                r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1],"k":1e400}}}}}"#,
                r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1]}}}},"id":4}"#,
                r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1,2]}}}}}"#,
                r#"{"id":3,"result":{"history":{"snapshot":{"state":{"items":[1]}}}}}"#,
                r#"{"id":3,"method":"m","params":{"items":[1]}}"#,
                r#"{"id":3,"result":{"items":[1]}}"#,
            ]
            .iter()
            .map(|l| l.to_string()),
        );
        let lists: Vec<&[String]> = known.iter().map(Vec::as_slice).collect();
        let mut cut = 0;
        for line in &cut_lines {
            let line = line.as_bytes();
            let whole = parse_whole(line);
            for n in 1..=lists.len() {
                for id in [json!(3), json!(4)] {
                    let keep = |x: &Value| {
                        if *x == id {
                            Keep::ItemsAsText(Some(lists[0]))
                        } else {
                            Keep::Whole
                        }
                    };
                    let got = parse_read_frame(line, &lists[..n], &keep);
                    let text = got.as_ref().and_then(|(_, t)| *t);
                    cut += usize::from(
                        text.is_some_and(|t| lists[..n].iter().any(|k| is_array_of(t, k))),
                    );
                    let got = got.map(|(f, t)| restored(f, t));
                    assert_eq!(
                        got,
                        whole,
                        "{} with {n} lists for {id}",
                        String::from_utf8_lossy(line)
                    );
                }
            }
        }
        assert!(cut > 10, "the cut is taken ({cut})");
        // The model's own items, written out as a host writes them, are
        // known text (and are not when they would not read back the same).
        let items = [
            json!({"itemId": "i1", "kind": "userMessage", "text": "hi \"x\"\n", "revision": 2, "nested": {"z": [1, -2, 18446744073709551615u64], "a": null}}),
        ];
        let host = serde_json::to_string(&items).unwrap();
        assert!(is_array_of(&host, &texts(&items)));
        assert!(items.iter().all(round_trips));
        assert!(!round_trips(&json!({"a": 2.5})));
        assert!(!round_trips(&serde_json::from_str(&nest(40)).unwrap()));
        let mut o = Map::new();
        o.insert("a".into(), json!(1));
        o.insert(RAW_VALUE_TOKEN.into(), json!("2"));
        assert!(!round_trips(&Value::Object(o)));
    }

    #[test]
    fn frames_and_cursors() {
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Some(Frame::Response { outcome: Ok(_), .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"x"}"#),
            Some(Frame::Notification { .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"x"}"#),
            Some(Frame::Request { .. })
        ));
        assert_eq!(parse(b"[1]"), None);
        assert_eq!(cursor_of("s", "v:s:12"), Some((12, 0)));
        assert_eq!(cursor_of("s", "v:s:12.3"), Some((12, 3)));
        assert_eq!(cursor_of("s", "v:t:12"), None);
        assert_eq!(cursor_of("s", "v:s:1.0"), None);
    }

    /// Text [`plainly_bounded`] passes is text [`check_bounded`] passes,
    /// on pieces chosen to hit each reason it declines (escapes naming
    /// surrogates, exponents, long numbers, depth, the raw-value token),
    /// and it does pass plain item arrays.
    #[test]
    fn plainly_bounded_text_is_bounded() {
        let pieces = [
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "\"a\"",
            "\"b\\\"c\"",
            "\"\\\\u\"",
            "\"\\ud800\"",
            "\"\\ud83d\\ude00\"",
            "\"\\u0041\"",
            "\"\\ud83d\\u0041\"",
            "\"\\ude00\"",
            "\"x\\ud83d\"",
            "\"\\n\"",
            "1",
            "-0",
            "2.5",
            "1e400",
            "1E5",
            "-1e-400",
            "123456789012345678901234567890",
            "true",
            "false",
            "null",
            "\"$serde_json::private::RawValue\"",
            " ",
        ];
        let mut next = {
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            move |n: usize| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % n as u64) as usize
            }
        };
        let mut texts: Vec<String> = vec![
            format!("{}1{}", "[".repeat(32), "]".repeat(32)),
            format!("{}1{}", "[".repeat(33), "]".repeat(33)),
            format!("{}1{}", "[".repeat(70), "]".repeat(70)),
            format!("[{}]", "9".repeat(301)),
            format!("[{}]", "9".repeat(300)),
            format!("[1{}]", "0".repeat(400)),
            r#"[{"itemId":"i1","kind":"agentMessage","revision":2,"text":"echo: \"q\" \\ \n","ok":true,"x":null,"n":-1.25}]"#.to_string(),
        ];
        for _ in 0..20_000 {
            let n = 1 + next(12);
            texts.push((0..n).map(|_| pieces[next(pieces.len())]).collect());
        }
        let (mut plain, mut valid) = (0, 0);
        for t in &texts {
            if serde_json::from_str::<&serde_json::value::RawValue>(t).is_err() {
                continue;
            }
            valid += 1;
            if plainly_bounded(t) {
                plain += 1;
                assert!(check_bounded(t).is_ok(), "{t}");
            }
        }
        assert!(plainly_bounded(&texts[0]) && !plainly_bounded(&texts[1]));
        assert!(!plainly_bounded(&texts[3]) && plainly_bounded(&texts[4]));
        assert!(plainly_bounded(&texts[6]));
        assert!(plainly_bounded(r#"["\u0041 \ud83d\ude00 \u00e9"]"#));
        assert!(!plainly_bounded(r#"["\ud83d\u0041"]"#) && !plainly_bounded(r#"["\ude00"]"#));
        assert!(plain > 100 && valid > plain, "{plain} of {valid}");
    }
}
