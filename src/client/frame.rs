//! Reading a server line member by member: the fast path of
//! [`wire::parse_server_line`].
//!
//! The reference reader builds the whole line as one `serde_json::Value`
//! tree and takes the envelope apart afterwards. This one walks the
//! envelope's members as they come and builds a tree only for the members
//! the core hands on (`id`, `method`, `params`, `result`, `error`); every
//! other member (`jsonrpc`, `emittedAtMs`, ...) is only checked, and so is
//! a `result` the caller says it does not want (a read whose answer is
//! thrown away).
//!
//! "Checked" means: read by the same deserializer through the same
//! `deserialize_any` calls a `Value` is read with (the same number parsing,
//! `1e400` out of range included; the same string and escape checks; the
//! same nesting limit), with nothing allocated. So a member is accepted
//! here exactly when the reference reader accepts it.
//!
//! The contract is narrow on purpose: [`parse_server_line_fast`] either
//! returns what the reference reader returns for the line, or `None`, and
//! then the caller asks the reference reader. Every odd case (not UTF-8, not
//! an object, a badly typed member, a misclassified frame, serde_json's
//! private raw-value token as a first key, a skipped `result` whose final
//! `id` no longer qualifies) takes that way, so errors and their texts stay
//! the reference reader's own.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::wire::{self, BadFrame, ServerFrame};

/// The key `serde_json::Value` treats specially when it is an object's
/// first member (with the `raw_value` feature: the member's string is
/// parsed as the object's whole value). The fast path never mimics that;
/// it leaves such a line to the reference reader.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Classifies one server line like [`wire::parse_server_line`], cheaper.
///
/// `skip_result` is asked, for a response whose `id` precedes its
/// `result`, whether the caller wants the result at all; when it says no,
/// the result is checked but not built, and the frame carries
/// `Ok(Value::Null)` as its answer. The caller must then treat a response
/// to that id as result-less whichever reader classified it.
///
/// `None` means "ask the reference reader": the line is odd in some way
/// this reader does not reproduce exactly (see the module docs).
pub(crate) fn parse_server_line_fast(
    line: &[u8],
    skip_result: &dyn Fn(&Value) -> bool,
) -> Option<Result<ServerFrame, BadFrame>> {
    let text = std::str::from_utf8(line).ok()?;
    let mut de = serde_json::Deserializer::from_str(text);
    let m = Envelope { skip_result }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    if m.result_skipped && !m.id.as_ref().is_some_and(skip_result) {
        // A later `id` replaced the one the skip was decided on.
        return None;
    }
    let frame = wire::classify(m.id, m.method, m.params, m.result, m.error);
    // A refused frame's text is the reference reader's business.
    frame.is_ok().then_some(frame)
}

/// The envelope's members as read (last one wins, as in a `Value` map).
#[derive(Default)]
struct Members {
    id: Option<Value>,
    method: Option<Value>,
    params: Option<Value>,
    result: Option<Value>,
    /// `result` was checked, not built (it reads `Null`).
    result_skipped: bool,
    error: Option<Value>,
}

/// Reads the top-level object into [`Members`].
struct Envelope<'a> {
    skip_result: &'a dyn Fn(&Value) -> bool,
}

impl<'de> DeserializeSeed<'de> for Envelope<'_> {
    type Value = Members;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Members, D::Error> {
        // `deserialize_any`, as a `Value` is read: the same recursion
        // accounting; anything but an object is refused (and left to the
        // reference reader).
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Envelope<'_> {
    type Value = Members;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
        let mut m = Members::default();
        let mut first = true;
        while let Some(key) = map.next_key::<Key>()? {
            if first && key == Key::RawValueToken {
                return Err(de::Error::custom("the raw-value token"));
            }
            first = false;
            match key {
                Key::Id => m.id = Some(map.next_value()?),
                Key::Method => m.method = Some(map.next_value()?),
                Key::Params => m.params = Some(map.next_value()?),
                Key::Error => m.error = Some(map.next_value()?),
                Key::Result => {
                    if m.id.as_ref().is_some_and(self.skip_result) {
                        map.next_value::<Checked>()?;
                        m.result = Some(Value::Null);
                        m.result_skipped = true;
                    } else {
                        m.result = Some(map.next_value()?);
                        m.result_skipped = false;
                    }
                }
                Key::Other | Key::RawValueToken => {
                    map.next_value::<Checked>()?;
                }
            }
        }
        Ok(m)
    }
}

/// An envelope member's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Id,
    Method,
    Params,
    Result,
    Error,
    RawValueToken,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        // `deserialize_str`, as `Value` reads its keys.
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Key, E> {
        Ok(match s {
            "id" => Key::Id,
            "method" => Key::Method,
            "params" => Key::Params,
            "result" => Key::Result,
            "error" => Key::Error,
            RAW_VALUE_TOKEN => Key::RawValueToken,
            _ => Key::Other,
        })
    }
}

/// Any JSON value, checked as `Value` would read it and then forgotten.
struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Checked, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Checked, E> {
        // `Value` may refuse one out of range; serde_json never produces
        // one without `arbitrary_precision`. Left to the reference reader.
        Err(de::Error::custom("a 128-bit integer"))
    }

    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Checked, E> {
        Err(de::Error::custom("a 128-bit integer"))
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

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Checked, D::Error> {
        Checked::deserialize(d)
    }

    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        // Only the first key can make `Value` read the object otherwise;
        // the others are read (as strings, as `Value` reads them) and not
        // looked at.
        match map.next_key::<FirstKey>()? {
            None => return Ok(Checked),
            Some(FirstKey::RawValueToken) => {
                return Err(de::Error::custom("the raw-value token"));
            }
            Some(FirstKey::Other) => map.next_value::<Checked>()?,
        };
        while map.next_key::<Checked>()?.is_some() {
            map.next_value::<Checked>()?;
        }
        Ok(Checked)
    }
}

/// A checked object's first key: only whether it is the raw-value token.
enum FirstKey {
    RawValueToken,
    Other,
}

impl<'de> Deserialize<'de> for FirstKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<FirstKey, D::Error> {
        d.deserialize_str(FirstKeyVisitor)
    }
}

struct FirstKeyVisitor;

impl Visitor<'_> for FirstKeyVisitor {
    type Value = FirstKey;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<FirstKey, E> {
        Ok(if s == RAW_VALUE_TOKEN {
            FirstKey::RawValueToken
        } else {
            FirstKey::Other
        })
    }
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
