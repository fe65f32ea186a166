//! Path-level comparison of JSON frames, shared by the scenario runner and
//! the transcript replayer.
//!
//! A [`Comparator`] compares an expected frame with a received one and
//! reports every difference as a [`Diff`] naming a JSON path
//! (`$.params.item.text`, `$.result.events[2].method`) with both values.
//! Comparison is exact by default; [`Rules`] relax it per path:
//!
//! - **ignore**: the member is not compared at all, present or not
//!   (`error.message` by default: PROTOCOL.md section 3 says it is free
//!   text).
//! - **type-only**: the member must be present on both sides with the same
//!   JSON type (timestamps by default).
//! - **normalize**: string and number values are *unified*: the first time
//!   an expected value `e` meets a received value `r`, the pair `e <-> r` is
//!   recorded, and from then on `e` must always meet `r` and `r` must
//!   always meet `e` (a bijection, built in order of first appearance, kept
//!   across every frame given to the same comparator). This is how
//!   server-minted ids are compared: their spelling is free, their identity
//!   is not.
//! - **normalize ordered**: as normalize, and the bijection must also
//!   preserve order among every value unified through an ordered path: if
//!   `a < b` then `mapped(a) < mapped(b)`, in *natural order* (runs of
//!   digits compare as numbers, so `v:s:9 < v:s:10 < v:s:10.1`). This is
//!   the order of this host's view cursors.
//!
//! # Path patterns
//!
//! A pattern is a dotted list of member names relative to the frame, with
//! an optional leading `$.`: `params.turnId`, `result.session.sessionId`,
//! `id`. Array indices are transparent, so `result.events.params.itemId`
//! covers every element of `events`. `*` matches any one member name and
//! `**` any run of zero or more member names, so `**.itemId` is "a member
//! named `itemId` anywhere".
//!
//! The rules are checked in the order ignore, type-only, normalize; the
//! first that matches a path decides. A normalize rule on an object or
//! array has no effect: its members are compared as usual.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// One segment of a concrete JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// A member-path pattern (see the module docs for the syntax).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern {
    text: String,
    segs: Vec<PatSeg>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PatSeg {
    Name(String),
    AnyOne,
    AnyRun,
}

/// Why a pattern could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    /// The pattern as given.
    pub pattern: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad path pattern {:?}: {}", self.pattern, self.reason)
    }
}

impl std::error::Error for PatternError {}

impl PathPattern {
    /// Parses a pattern such as `params.item.itemId` or `**.createdAt`.
    pub fn parse(text: &str) -> Result<PathPattern, PatternError> {
        let err = |reason| PatternError {
            pattern: text.to_string(),
            reason,
        };
        let body = text.strip_prefix("$.").unwrap_or(text);
        if body.is_empty() {
            return Err(err("empty pattern"));
        }
        let mut segs = Vec::new();
        for part in body.split('.') {
            let seg = match part {
                "" => {
                    return Err(err(
                        "empty member name (two dots in a row, or a leading or trailing dot)",
                    ))
                }
                "*" => PatSeg::AnyOne,
                "**" => PatSeg::AnyRun,
                name if name.contains('[') || name.contains(']') => {
                    return Err(err(
                        "brackets are not supported: array indices are transparent",
                    ))
                }
                name => PatSeg::Name(name.to_string()),
            };
            segs.push(seg);
        }
        Ok(PathPattern {
            text: text.to_string(),
            segs,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn matches(&self, path: &[Seg]) -> bool {
        let keys: Vec<&str> = path
            .iter()
            .filter_map(|s| match s {
                Seg::Key(k) => Some(k.as_str()),
                Seg::Index(_) => None,
            })
            .collect();
        glob(&self.segs, &keys)
    }
}

/// Glob matching of pattern segments against member names, iterative over
/// `**` with backtracking to the last star (linear in practice).
fn glob(pat: &[PatSeg], keys: &[&str]) -> bool {
    let (mut p, mut k) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while k < keys.len() {
        match pat.get(p) {
            Some(PatSeg::AnyRun) => {
                star = Some((p, k));
                p += 1;
            }
            Some(PatSeg::AnyOne) => {
                p += 1;
                k += 1;
            }
            Some(PatSeg::Name(n)) if n == keys[k] => {
                p += 1;
                k += 1;
            }
            _ => match star {
                Some((sp, sk)) => {
                    p = sp + 1;
                    k = sk + 1;
                    star = Some((sp, sk + 1));
                }
                None => return false,
            },
        }
    }
    pat[p..].iter().all(|s| *s == PatSeg::AnyRun)
}

/// How a comparator treats paths: see the module docs.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Not compared at all.
    pub ignore: Vec<PathPattern>,
    /// Compared by JSON type only.
    pub type_only: Vec<PathPattern>,
    /// Unified one-to-one.
    pub normalize: Vec<PathPattern>,
    /// Unified one-to-one, order-preserving.
    pub normalize_ordered: Vec<PathPattern>,
}

/// The timestamps PROTOCOL.md lets vary between runs: type-only by default.
pub const DEFAULT_TYPE_ONLY: [&str; 4] = [
    "**.emittedAtMs",
    "**.createdAt",
    "**.updatedAt",
    "**.recordedAt",
];

/// Free text that is never compared (PROTOCOL.md section 3).
pub const DEFAULT_IGNORE: [&str; 1] = ["error.message"];

impl Rules {
    /// Exact comparison everywhere.
    pub fn exact() -> Rules {
        Rules::default()
    }

    /// The conformance defaults: `error.message` ignored, the timestamps of
    /// [`DEFAULT_TYPE_ONLY`] type-only, nothing normalized.
    pub fn conformance_defaults() -> Rules {
        let parse = |p: &&str| PathPattern::parse(p).expect("built-in patterns parse");
        Rules {
            ignore: DEFAULT_IGNORE.iter().map(parse).collect(),
            type_only: DEFAULT_TYPE_ONLY.iter().map(parse).collect(),
            normalize: Vec::new(),
            normalize_ordered: Vec::new(),
        }
    }

    /// Adds normalize patterns given as text.
    pub fn with_normalize<'a>(
        mut self,
        patterns: impl IntoIterator<Item = &'a str>,
    ) -> Result<Rules, PatternError> {
        for p in patterns {
            self.normalize.push(PathPattern::parse(p)?);
        }
        Ok(self)
    }

    /// Adds order-preserving normalize patterns given as text.
    pub fn with_normalize_ordered<'a>(
        mut self,
        patterns: impl IntoIterator<Item = &'a str>,
    ) -> Result<Rules, PatternError> {
        for p in patterns {
            self.normalize_ordered.push(PathPattern::parse(p)?);
        }
        Ok(self)
    }

    /// Adds type-only patterns given as text.
    pub fn with_type_only<'a>(
        mut self,
        patterns: impl IntoIterator<Item = &'a str>,
    ) -> Result<Rules, PatternError> {
        for p in patterns {
            self.type_only.push(PathPattern::parse(p)?);
        }
        Ok(self)
    }

    /// Adds ignore patterns given as text.
    pub fn with_ignore<'a>(
        mut self,
        patterns: impl IntoIterator<Item = &'a str>,
    ) -> Result<Rules, PatternError> {
        for p in patterns {
            self.ignore.push(PathPattern::parse(p)?);
        }
        Ok(self)
    }

    fn rule_for(&self, path: &[Seg]) -> Rule {
        if self.ignore.iter().any(|p| p.matches(path)) {
            Rule::Ignore
        } else if self.type_only.iter().any(|p| p.matches(path)) {
            Rule::TypeOnly
        } else if self.normalize_ordered.iter().any(|p| p.matches(path)) {
            Rule::Normalize { ordered: true }
        } else if self.normalize.iter().any(|p| p.matches(path)) {
            Rule::Normalize { ordered: false }
        } else {
            Rule::Exact
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Exact,
    Ignore,
    TypeOnly,
    Normalize { ordered: bool },
}

/// What kind of difference a [`Diff`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffKind {
    /// Both present, values differ.
    Value,
    /// Both present, JSON types differ (type-only and normalized paths).
    Type,
    /// Expected a member or element that was not received.
    Missing,
    /// Received a member or element that was not expected.
    Unexpected,
    /// A normalized expected value already maps to another received value
    /// (`other` is that received value), or the received value is already
    /// the image of another expected value (`other` is that expected
    /// value).
    NotOneToOne {
        /// The value the bijection already pairs with one side.
        other: Value,
    },
    /// An ordered normalization would reverse the order of two values:
    /// `other_expected` was mapped to `other_received` and the new pair
    /// orders the other way round.
    OrderReversed {
        /// The earlier expected value.
        other_expected: Value,
        /// Its image.
        other_received: Value,
    },
}

/// One difference between an expected and a received frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diff {
    /// JSON path from the frame root, e.g. `$.params.item.text`.
    pub path: String,
    /// The kind of difference.
    pub kind: DiffKind,
    /// The expected value (`None` when it was not expected).
    pub expected: Option<Value>,
    /// The received value (`None` when it was not received).
    pub received: Option<Value>,
}

fn show(v: &Option<Value>) -> String {
    match v {
        Some(v) => v.to_string(),
        None => "(absent)".to_string(),
    }
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (e, r) = (show(&self.expected), show(&self.received));
        match &self.kind {
            DiffKind::Value => write!(f, "{}: expected {e}, received {r}", self.path),
            DiffKind::Type => write!(f, "{}: expected a value of the type of {e}, received {r}", self.path),
            DiffKind::Missing => write!(f, "{}: expected {e}, received nothing", self.path),
            DiffKind::Unexpected => write!(f, "{}: expected nothing, received {r}", self.path),
            DiffKind::NotOneToOne { other } => write!(
                f,
                "{}: normalized values are not one-to-one: expected {e}, received {r}, but one of them is already paired with {other}",
                self.path
            ),
            DiffKind::OrderReversed {
                other_expected,
                other_received,
            } => write!(
                f,
                "{}: ordered normalization reversed: expected {e} maps to {r}, but {other_expected} maps to {other_received}",
                self.path
            ),
        }
    }
}

/// A comparator: [`Rules`] plus the unification state of one run. Feed it
/// the frames of one run in order; a new run needs a new comparator.
#[derive(Debug, Clone)]
pub struct Comparator {
    rules: Rules,
    forward: BTreeMap<String, Value>,
    backward: BTreeMap<String, Value>,
    ordered: Vec<(Value, Value)>,
}

impl Comparator {
    /// A comparator with no pairs unified yet.
    pub fn new(rules: Rules) -> Comparator {
        Comparator {
            rules,
            forward: BTreeMap::new(),
            backward: BTreeMap::new(),
            ordered: Vec::new(),
        }
    }

    /// The rules in force.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The received value an expected normalized value was unified with,
    /// if any. The scenario runner uses it to rewrite server-minted ids in
    /// later client lines.
    pub fn mapped(&self, expected: &Value) -> Option<&Value> {
        self.forward.get(&key(expected))
    }

    /// Rewrites every string or number in `v` that is a unified expected
    /// value into its received image (the identity when nothing was
    /// unified, as in a run of a deterministic host).
    pub fn rewrite(&self, v: &Value) -> Value {
        match v {
            Value::String(_) | Value::Number(_) => {
                self.mapped(v).cloned().unwrap_or_else(|| v.clone())
            }
            Value::Array(a) => Value::Array(a.iter().map(|x| self.rewrite(x)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, x)| (k.clone(), self.rewrite(x)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// Compares one frame; returns every difference, depth first: within an
    /// object, the expected members in the order of the parsed value, then
    /// the members only received.
    ///
    /// An `error.data.retryable` equal to the code's default counts as
    /// absent on both sides (PROTOCOL.md section 3: public transcripts both
    /// write and omit it).
    pub fn compare_frame(&mut self, expected: &Value, received: &Value) -> Vec<Diff> {
        let mut diffs = Vec::new();
        let mut path = Vec::new();
        let expected = without_default_retryable(expected);
        let received = without_default_retryable(received);
        self.walk(&mut path, &expected, &received, &mut diffs);
        diffs
    }

    fn walk(&mut self, path: &mut Vec<Seg>, e: &Value, r: &Value, out: &mut Vec<Diff>) {
        let rule = if path.is_empty() {
            Rule::Exact
        } else {
            self.rules.rule_for(path)
        };
        match rule {
            Rule::Ignore => {}
            Rule::TypeOnly => {
                if type_name(e) != type_name(r) {
                    out.push(diff(path, DiffKind::Type, Some(e), Some(r)));
                }
            }
            Rule::Normalize { ordered } if is_unifiable(e) || is_unifiable(r) => {
                if type_name(e) != type_name(r) {
                    out.push(diff(path, DiffKind::Type, Some(e), Some(r)));
                } else if let Some(kind) = self.unify(e, r, ordered) {
                    out.push(diff(path, kind, Some(e), Some(r)));
                }
            }
            _ => self.structural(path, e, r, out),
        }
    }

    fn structural(&mut self, path: &mut Vec<Seg>, e: &Value, r: &Value, out: &mut Vec<Diff>) {
        match (e, r) {
            (Value::Object(eo), Value::Object(ro)) => {
                for (k, ev) in eo {
                    path.push(Seg::Key(k.clone()));
                    match ro.get(k) {
                        Some(rv) => self.walk(path, ev, rv, out),
                        None => {
                            if self.rules.rule_for(path) != Rule::Ignore {
                                out.push(diff(path, DiffKind::Missing, Some(ev), None));
                            }
                        }
                    }
                    path.pop();
                }
                for (k, rv) in ro {
                    if eo.contains_key(k) {
                        continue;
                    }
                    path.push(Seg::Key(k.clone()));
                    if self.rules.rule_for(path) != Rule::Ignore {
                        out.push(diff(path, DiffKind::Unexpected, None, Some(rv)));
                    }
                    path.pop();
                }
            }
            (Value::Array(ea), Value::Array(ra)) => {
                for i in 0..ea.len().max(ra.len()) {
                    path.push(Seg::Index(i));
                    match (ea.get(i), ra.get(i)) {
                        (Some(ev), Some(rv)) => self.walk(path, ev, rv, out),
                        (Some(ev), None) => out.push(diff(path, DiffKind::Missing, Some(ev), None)),
                        (None, Some(rv)) => {
                            out.push(diff(path, DiffKind::Unexpected, None, Some(rv)))
                        }
                        (None, None) => unreachable!("index below the longer length"),
                    }
                    path.pop();
                }
            }
            _ if e == r => {}
            _ if type_name(e) != type_name(r) => {
                out.push(diff(path, DiffKind::Type, Some(e), Some(r)))
            }
            _ => out.push(diff(path, DiffKind::Value, Some(e), Some(r))),
        }
    }

    /// Pairs `e` with `r`, or says why it cannot.
    fn unify(&mut self, e: &Value, r: &Value, ordered: bool) -> Option<DiffKind> {
        let (ek, rk) = (key(e), key(r));
        match (self.forward.get(&ek), self.backward.get(&rk)) {
            (Some(img), _) if img != r => {
                return Some(DiffKind::NotOneToOne { other: img.clone() })
            }
            (_, Some(pre)) if pre != e => {
                return Some(DiffKind::NotOneToOne { other: pre.clone() })
            }
            (Some(_), Some(_)) => return None,
            _ => {}
        }
        if ordered {
            for (oe, or) in &self.ordered {
                let ord_e = natural_cmp(&ek, &key(oe));
                let ord_r = natural_cmp(&rk, &key(or));
                if ord_e != ord_r {
                    return Some(DiffKind::OrderReversed {
                        other_expected: oe.clone(),
                        other_received: or.clone(),
                    });
                }
            }
            self.ordered.push((e.clone(), r.clone()));
        }
        self.forward.insert(ek, r.clone());
        self.backward.insert(rk, e.clone());
        None
    }
}

fn is_unifiable(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_))
}

/// The bijection key of a scalar: strings by their text, numbers by their
/// JSON spelling with a prefix so `"1"` and `1` stay distinct.
fn key(v: &Value) -> String {
    match v {
        Value::String(s) => format!("s{s}"),
        other => format!("n{other}"),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn diff(path: &[Seg], kind: DiffKind, e: Option<&Value>, r: Option<&Value>) -> Diff {
    Diff {
        path: render_path(path),
        kind,
        expected: e.cloned(),
        received: r.cloned(),
    }
}

/// Renders a concrete path as `$.a.b[2].c` (members that are not plain
/// identifiers are quoted: `$["a b"]`).
fn render_path(path: &[Seg]) -> String {
    let mut s = String::from("$");
    for seg in path {
        match seg {
            Seg::Key(k)
                if !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/') =>
            {
                s.push('.');
                s.push_str(k);
            }
            Seg::Key(k) => {
                s.push('[');
                s.push_str(&Value::String(k.clone()).to_string());
                s.push(']');
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// Natural order: runs of ASCII digits compare as numbers (leading zeros
/// ignored, then by length), everything else byte by byte.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0usize, 0usize);
    while i < ab.len() && j < bb.len() {
        if ab[i].is_ascii_digit() && bb[j].is_ascii_digit() {
            let si = i;
            while i < ab.len() && ab[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < bb.len() && bb[j].is_ascii_digit() {
                j += 1;
            }
            let da = trim_zeros(&ab[si..i]);
            let db = trim_zeros(&bb[sj..j]);
            let o = da
                .len()
                .cmp(&db.len())
                .then_with(|| da.cmp(db))
                .then_with(|| (i - si).cmp(&(j - sj)));
            if o != Ordering::Equal {
                return o;
            }
        } else {
            let o = ab[i].cmp(&bb[j]);
            if o != Ordering::Equal {
                return o;
            }
            i += 1;
            j += 1;
        }
    }
    (ab.len() - i).cmp(&(bb.len() - j))
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let n = d.iter().take_while(|c| **c == b'0').count();
    &d[n..]
}

/// `frame` with `error.data.retryable` removed when it equals the error
/// table's default for `error.code` (an absent member means the default).
pub fn without_default_retryable(frame: &Value) -> Value {
    let mut v = frame.clone();
    let code = v.pointer("/error/code").and_then(Value::as_i64);
    let default = code.and_then(crate::proto::error::default_retryable);
    if let (Some(d), Some(data)) = (
        default,
        v.pointer_mut("/error/data").and_then(Value::as_object_mut),
    ) {
        if data.get("retryable").and_then(Value::as_bool) == Some(d) {
            data.remove("retryable");
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(norm: &[&str], ordered: &[&str]) -> Rules {
        Rules::conformance_defaults()
            .with_normalize(norm.iter().copied())
            .unwrap()
            .with_normalize_ordered(ordered.iter().copied())
            .unwrap()
    }

    #[test]
    fn exact_reports_every_path_with_both_values() {
        let mut c = Comparator::new(Rules::exact());
        let e = json!({"params": {"item": {"text": "a", "n": 1}, "xs": [1, 2]}});
        let r = json!({"params": {"item": {"text": "b", "extra": true}, "xs": [1]}});
        let d = c.compare_frame(&e, &r);
        let paths: Vec<&str> = d.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "$.params.item.n",
                "$.params.item.text",
                "$.params.item.extra",
                "$.params.xs[1]"
            ]
        );
        assert_eq!(d[0].kind, DiffKind::Missing);
        assert_eq!(d[1].kind, DiffKind::Value);
        assert_eq!(d[1].expected, Some(json!("a")));
        assert_eq!(d[1].received, Some(json!("b")));
        assert_eq!(d[2].kind, DiffKind::Unexpected);
        assert_eq!(d[3].kind, DiffKind::Missing);
    }

    #[test]
    fn error_message_is_ignored_even_when_absent() {
        let mut c = Comparator::new(Rules::conformance_defaults());
        let e = json!({"error": {"code": 1, "message": "x"}});
        assert!(c
            .compare_frame(&e, &json!({"error": {"code": 1, "message": "y"}}))
            .is_empty());
        assert!(c
            .compare_frame(&e, &json!({"error": {"code": 1}}))
            .is_empty());
        let d = c.compare_frame(&e, &json!({"error": {"code": 2}}));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].path, "$.error.code");
    }

    #[test]
    fn type_only_accepts_any_value_of_the_type() {
        let mut c = Comparator::new(Rules::conformance_defaults());
        let e = json!({"params": {"emittedAtMs": 5, "item": {"recordedAt": "2025"}}});
        assert!(c
            .compare_frame(
                &e,
                &json!({"params": {"emittedAtMs": 9, "item": {"recordedAt": "2026"}}})
            )
            .is_empty());
        let d = c.compare_frame(&e, &json!({"params": {"emittedAtMs": "9", "item": {}}}));
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].kind, DiffKind::Type);
        assert_eq!(d[1].kind, DiffKind::Missing);
        assert_eq!(d[1].path, "$.params.item.recordedAt");
    }

    #[test]
    fn normalization_is_a_bijection_across_frames() {
        let mut c = Comparator::new(rules(&["**.itemId"], &[]));
        assert!(c
            .compare_frame(&json!({"itemId": "a"}), &json!({"itemId": "X"}))
            .is_empty());
        assert!(c
            .compare_frame(
                &json!({"p": {"itemId": "a"}}),
                &json!({"p": {"itemId": "X"}})
            )
            .is_empty());
        // Same expected value, other received value.
        let d = c.compare_frame(&json!({"itemId": "a"}), &json!({"itemId": "Y"}));
        assert_eq!(d[0].kind, DiffKind::NotOneToOne { other: json!("X") });
        // Other expected value, same received value.
        let d = c.compare_frame(&json!({"itemId": "b"}), &json!({"itemId": "X"}));
        assert_eq!(d[0].kind, DiffKind::NotOneToOne { other: json!("a") });
        assert_eq!(d[0].path, "$.itemId");
        assert_eq!(c.mapped(&json!("a")), Some(&json!("X")));
        assert_eq!(
            c.rewrite(&json!({"q": ["a", "b"]})),
            json!({"q": ["X", "b"]})
        );
    }

    #[test]
    fn ordered_normalization_keeps_natural_order() {
        let mut c = Comparator::new(rules(&[], &["**.viewCursor"]));
        assert!(c
            .compare_frame(
                &json!({"viewCursor": "v:s:9"}),
                &json!({"viewCursor": "c2"})
            )
            .is_empty());
        assert!(c
            .compare_frame(
                &json!({"viewCursor": "v:s:10"}),
                &json!({"viewCursor": "c10"})
            )
            .is_empty());
        let d = c.compare_frame(
            &json!({"viewCursor": "v:s:10.1"}),
            &json!({"viewCursor": "c1"}),
        );
        assert!(matches!(d[0].kind, DiffKind::OrderReversed { .. }), "{d:?}");
    }

    #[test]
    fn patterns_match_as_documented() {
        let p = |s| PathPattern::parse(s).unwrap();
        let path = |ks: &[&str]| {
            ks.iter()
                .map(|k| Seg::Key(k.to_string()))
                .collect::<Vec<_>>()
        };
        assert!(p("params.turnId").matches(&path(&["params", "turnId"])));
        assert!(!p("params.turnId").matches(&path(&["params", "item", "turnId"])));
        assert!(p("**.turnId").matches(&path(&["params", "item", "turnId"])));
        assert!(p("**.turnId").matches(&path(&["turnId"])));
        assert!(p("params.*.turnId").matches(&path(&["params", "item", "turnId"])));
        assert!(p("$.result.**.id").matches(&path(&["result", "a", "b", "id"])));
        let mut with_index = path(&["result", "events"]);
        with_index.push(Seg::Index(3));
        with_index.extend(path(&["params", "itemId"]));
        assert!(p("result.events.params.itemId").matches(&with_index));
        assert!(PathPattern::parse("a..b").is_err());
        assert!(PathPattern::parse("a[0]").is_err());
        assert!(PathPattern::parse("").is_err());
    }

    #[test]
    fn natural_order_compares_digit_runs_as_numbers() {
        assert_eq!(natural_cmp("v:s:9", "v:s:10"), Ordering::Less);
        assert_eq!(natural_cmp("v:s:10", "v:s:10.1"), Ordering::Less);
        assert_eq!(natural_cmp("v:s:10.2", "v:s:11"), Ordering::Less);
        assert_eq!(natural_cmp("a", "a"), Ordering::Equal);
        assert_eq!(natural_cmp("b", "a10"), Ordering::Greater);
    }

    #[test]
    fn paths_with_odd_member_names_are_quoted() {
        assert_eq!(
            render_path(&[Seg::Key("a b".into()), Seg::Index(0)]),
            "$[\"a b\"][0]"
        );
    }
}
