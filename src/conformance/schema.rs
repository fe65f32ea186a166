//! Validates the frames our host sends against the public MSP v1 JSON
//! Schema (`schema/msp.schema.json`, see `schema/PROVENANCE.md`), with a
//! real JSON Schema validator (the `jsonschema` crate, draft 2020-12).
//!
//! PROTOCOL.md section 7: "every server frame the host emits is checked
//! against the public schema". A [`FrameChecker`] is fed the lines of one
//! or more connections in wire order: client lines only teach it which
//! method each request id names; every server line is checked:
//!
//! | frame | checked against |
//! | --- | --- |
//! | success response | `$defs/SuccessResponse`, and `result` against `methods/<method>/result` of the request it answers |
//! | error response | `$defs/ErrorResponse`; `code` in the `errors` table, `data.kind` its kind or one of its `overrideKinds`, `data.retryable` (when present) not the code's default |
//! | notification | `$defs/Notification`, and `params` against `notifications/<method>/params` |
//! | server request | `$defs/Request`, and `params` against `requests/<method>/params` |
//!
//! Extensions (PROTOCOL.md's **(ext)**) are additive: a method the schema
//! does not have, or a member a public type does not define. Every one the
//! host may send is listed in [`EXTENSIONS`] with its PROTOCOL.md
//! reference; [`check_extensions_are_additive`] proves each listed one
//! really is new to the schema, and the checker reports any member outside
//! the schema that is *not* listed as an invalid frame, so an extension
//! cannot slip in unannounced.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

/// The public MSP v1 schema, byte for byte (see `schema/PROVENANCE.md`).
pub const PUBLIC_SCHEMA: &str = include_str!("../../schema/msp.schema.json");

/// One extension of PROTOCOL.md: a method the public schema does not
/// define, or a member a public type does not define.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extension {
    /// `$defs` type the member is added to, or `method` / `notification`
    /// for a whole method.
    pub at: &'static str,
    /// The member (or method) name.
    pub name: &'static str,
    /// Where PROTOCOL.md defines it.
    pub reference: &'static str,
}

/// The listed member extension a frame path ends in (`….state.kv`,
/// `….item.effectOutcome`, `….error.data.field`, ...), if any: the JSON
/// key under which its public type appears, then the member.
pub fn extension_member_at_path(path: &str) -> Option<&'static Extension> {
    EXTENSIONS.iter().find(|e| {
        let parent = match e.at {
            "SnapshotState" => ".state.",
            "Item" => ".item.",
            "ErrorData" => ".error.data.",
            _ => return false,
        };
        path.ends_with(&format!("{parent}{}", e.name))
    })
}

/// Every extension the host may send. A member of a public type that is
/// not in the schema and not in this list makes a frame invalid.
pub const EXTENSIONS: &[Extension] = &[
    Extension {
        at: "method",
        name: "state/update",
        reference: "PROTOCOL.md 4.1, state/update (ext)",
    },
    Extension {
        at: "notification",
        name: "state/updated",
        reference: "PROTOCOL.md 4.5, state/updated {revision, set} (ext)",
    },
    Extension {
        at: "SnapshotState",
        name: "pendingCommands",
        reference: "PROTOCOL.md 4.4 (pendingCommands) and 4.5 (ViewSnapshot)",
    },
    Extension {
        at: "SnapshotState",
        name: "revision",
        reference: "PROTOCOL.md 4.5 ViewSnapshot revision (ext), 4.1 state/update",
    },
    Extension {
        at: "SnapshotState",
        name: "kv",
        reference: "PROTOCOL.md 4.5 ViewSnapshot kv (ext), 4.1 state/update",
    },
    Extension {
        at: "Item",
        name: "effectOutcome",
        reference: "PROTOCOL.md 4.5 Item toolCall effectOutcome (ext), section 5 !effect",
    },
    Extension {
        at: "ErrorData",
        name: "currentRevision",
        reference: "PROTOCOL.md 3, stale_revision carries data.currentRevision (ext)",
    },
    Extension {
        at: "ErrorData",
        name: "field",
        reference: "PROTOCOL.md 3, -32602 invalidParams data.field (ext)",
    },
    Extension {
        at: "ErrorData",
        name: "offset",
        reference: "PROTOCOL.md 3 and 4.4, logCorrupt names the offset (ext)",
    },
    Extension {
        at: "ErrorData",
        name: "file",
        reference: "PROTOCOL.md 3 and 4.4, logCorrupt names the session log (ext)",
    },
    Extension {
        at: "ErrorData",
        name: "method",
        reference: "PROTOCOL.md 3, -32601 methodNotFound names the method (ext)",
    },
];

/// Why the schema could not be used (it does not parse, or a pointer into
/// it names nothing or does not compile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError(pub String);

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "public schema: {}", self.0)
    }
}

impl std::error::Error for SchemaError {}

/// One server frame that does not conform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Where the frame came from (the caller's label: file and line).
    pub origin: String,
    /// The frame as sent.
    pub frame: String,
    /// Every reason, one per violated rule.
    pub reasons: Vec<String>,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}: {}", self.origin, self.frame)?;
        for r in &self.reasons {
            writeln!(f, "    {r}")?;
        }
        Ok(())
    }
}

/// What a checker has seen so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Server frames checked.
    pub validated: usize,
    /// Those that failed a rule.
    pub invalid: Vec<Invalid>,
    /// Frames checked per target (`result turn/start`, `notification
    /// turn/completed`, `error -32030`, ...).
    pub by_target: BTreeMap<String, usize>,
    /// Listed extensions that actually occurred (`at.name`).
    pub extensions_seen: BTreeSet<String>,
}

impl Tally {
    /// Adds another tally.
    pub fn absorb(&mut self, other: Tally) {
        self.validated += other.validated;
        self.invalid.extend(other.invalid);
        for (k, v) in other.by_target {
            *self.by_target.entry(k).or_default() += v;
        }
        self.extensions_seen.extend(other.extensions_seen);
    }
}

/// One row of the public `errors` table.
#[derive(Debug, Clone)]
struct ErrorRow {
    kinds: Vec<String>,
    retryable: Option<bool>,
}

/// Checks server frames against the public schema (see the module docs).
pub struct FrameChecker {
    root: Value,
    compiled: BTreeMap<String, jsonschema::Validator>,
    errors: BTreeMap<i64, ErrorRow>,
    /// `(connection, request id as JSON)` -> method.
    requests: BTreeMap<(u64, String), String>,
    tally: Tally,
}

impl fmt::Debug for FrameChecker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrameChecker")
            .field("compiled", &self.compiled.keys().collect::<Vec<_>>())
            .field("tally", &self.tally)
            .finish()
    }
}

/// Escapes one JSON Pointer token (RFC 6901).
fn token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

impl FrameChecker {
    /// A checker over [`PUBLIC_SCHEMA`].
    pub fn public() -> Result<FrameChecker, SchemaError> {
        FrameChecker::new(PUBLIC_SCHEMA)
    }

    /// A checker over a schema bundle of the public one's layout.
    pub fn new(schema_json: &str) -> Result<FrameChecker, SchemaError> {
        let root: Value = serde_json::from_str(schema_json)
            .map_err(|e| SchemaError(format!("does not parse: {e}")))?;
        let table = root
            .get("errors")
            .and_then(Value::as_array)
            .ok_or_else(|| SchemaError("no `errors` table".into()))?;
        let mut errors = BTreeMap::new();
        for row in table {
            let code = row["code"]
                .as_i64()
                .ok_or_else(|| SchemaError(format!("error row without a code: {row}")))?;
            let mut kinds = vec![row["kind"].as_str().unwrap_or_default().to_string()];
            if let Some(o) = row["overrideKinds"].as_array() {
                kinds.extend(o.iter().filter_map(Value::as_str).map(str::to_string));
            }
            errors.insert(
                code,
                ErrorRow {
                    kinds,
                    retryable: row["retryable"].as_bool(),
                },
            );
        }
        for key in ["$defs", "methods", "notifications", "requests"] {
            if !root.get(key).is_some_and(Value::is_object) {
                return Err(SchemaError(format!("no `{key}` object")));
            }
        }
        Ok(FrameChecker {
            root,
            compiled: BTreeMap::new(),
            errors,
            requests: BTreeMap::new(),
            tally: Tally::default(),
        })
    }

    /// The schema document.
    pub fn root(&self) -> &Value {
        &self.root
    }

    /// The `retryable` default of `code` in the public table (`None`: the
    /// row has none, or there is no row).
    pub fn default_retryable(&self, code: i64) -> Option<bool> {
        self.errors.get(&code).and_then(|r| r.retryable)
    }

    /// What was checked so far.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Hands the tally over, leaving an empty one.
    pub fn take_tally(&mut self) -> Tally {
        std::mem::take(&mut self.tally)
    }

    /// Validates `instance` against the schema at JSON Pointer `pointer`
    /// (e.g. `/methods/turn~1start/result`): every violation, as text.
    pub fn validate_at(
        &mut self,
        pointer: &str,
        instance: &Value,
    ) -> Result<Vec<String>, SchemaError> {
        if !self.compiled.contains_key(pointer) {
            if self.root.pointer(pointer).is_none() {
                return Err(SchemaError(format!("{pointer} names nothing")));
            }
            // The whole bundle with a root `$ref`: every `#/$defs/...`
            // inside resolves against the document as published. The
            // bundle's own top-level members are not validation keywords.
            let mut wrapper = self.root.clone();
            if let Some(o) = wrapper.as_object_mut() {
                o.insert("$ref".into(), Value::String(format!("#{pointer}")));
            }
            let v = jsonschema::validator_for(&wrapper)
                .map_err(|e| SchemaError(format!("{pointer} does not compile: {e}")))?;
            self.compiled.insert(pointer.to_string(), v);
        }
        let v = &self.compiled[pointer];
        Ok(v.iter_errors(instance)
            .map(|e| format!("{pointer}: at {:?}: {e}", e.instance_path().to_string()))
            .collect())
    }

    /// A client line on connection `conn`: a request teaches the checker
    /// its method (so the response can be checked against its result).
    /// Anything else (a notification, a response, a line that is not
    /// JSON) is ignored.
    pub fn client_line(&mut self, conn: u64, line: &str) {
        let Ok(v) = serde_json::from_str::<Value>(line.trim_end_matches(['\r', '\n'])) else {
            return;
        };
        if let (Some(id), Some(m)) = (v.get("id"), v.get("method").and_then(Value::as_str)) {
            self.requests.insert((conn, id.to_string()), m.to_string());
        }
    }

    /// A server line on connection `conn`, checked and counted; `origin`
    /// labels it in reports. Returns the reasons it is invalid (empty:
    /// valid).
    pub fn server_line(&mut self, conn: u64, line: &str, origin: &str) -> Vec<String> {
        let (target, reasons) = match self.check(conn, line) {
            Ok(r) => r,
            Err(e) => ("(schema)".to_string(), vec![e.to_string()]),
        };
        self.tally.validated += 1;
        *self.tally.by_target.entry(target).or_default() += 1;
        if !reasons.is_empty() {
            self.tally.invalid.push(Invalid {
                origin: origin.to_string(),
                frame: line.trim_end().to_string(),
                reasons: reasons.clone(),
            });
        }
        reasons
    }

    fn check(&mut self, conn: u64, line: &str) -> Result<(String, Vec<String>), SchemaError> {
        let mut reasons = Vec::new();
        if line.ends_with("\r\n") || line.trim_end_matches('\n').contains(['\n', '\r']) {
            reasons.push("a server line carries \\r or an inner newline".to_string());
        }
        let v: Value = match serde_json::from_str(line.trim_end_matches('\n')) {
            Ok(v @ Value::Object(_)) => v,
            _ => return Ok(("(not JSON)".into(), vec!["not a JSON object".into()])),
        };
        let method = v.get("method").and_then(Value::as_str).map(str::to_string);
        let has_id = v.get("id").is_some();
        let target;
        match (method, has_id) {
            (Some(m), false) => {
                target = format!("notification {m}");
                reasons.extend(self.validate_at("/$defs/Notification", &v)?);
                self.envelope_extras("Notification", &v, &mut reasons);
                let params = v
                    .get("params")
                    .cloned()
                    .unwrap_or(Value::Object(Map::new()));
                let at = format!("/notifications/{}/params", token(&m));
                if self.root.pointer(&at).is_some() {
                    reasons.extend(self.validate_at(&at, &params)?);
                    self.member_extras(&at, &params, &mut reasons);
                } else {
                    self.whole_extension("notification", &m, &mut reasons);
                }
            }
            (Some(m), true) => {
                target = format!("request {m}");
                reasons.extend(self.validate_at("/$defs/Request", &v)?);
                self.envelope_extras("Request", &v, &mut reasons);
                let params = v
                    .get("params")
                    .cloned()
                    .unwrap_or(Value::Object(Map::new()));
                let at = format!("/requests/{}/params", token(&m));
                if self.root.pointer(&at).is_some() {
                    reasons.extend(self.validate_at(&at, &params)?);
                    self.member_extras(&at, &params, &mut reasons);
                } else {
                    reasons.push(format!("server request {m} is not in the schema"));
                }
            }
            (None, true) if v.get("error").is_some() => {
                let code = v
                    .pointer("/error/code")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                target = format!("error {code}");
                reasons.extend(self.validate_at("/$defs/ErrorResponse", &v)?);
                self.envelope_extras("ErrorResponse", &v, &mut reasons);
                if let Some(e) = v.get("error") {
                    self.member_extras("/$defs/ErrorObject", e, &mut reasons);
                }
                self.error_table(&v, &mut reasons);
            }
            (None, true) => {
                let id = v["id"].to_string();
                let m = self.requests.get(&(conn, id.clone())).cloned();
                target = format!("result {}", m.as_deref().unwrap_or("?"));
                reasons.extend(self.validate_at("/$defs/SuccessResponse", &v)?);
                self.envelope_extras("SuccessResponse", &v, &mut reasons);
                let result = v.get("result").cloned().unwrap_or(Value::Null);
                match m {
                    None => {
                        reasons.push(format!("a response to id {id}, which no request carried"))
                    }
                    Some(m) => {
                        let at = format!("/methods/{}/result", token(&m));
                        if self.root.pointer(&at).is_some() {
                            reasons.extend(self.validate_at(&at, &result)?);
                            self.member_extras(&at, &result, &mut reasons);
                            if m == "view/page" {
                                self.page_events(&result, &mut reasons)?;
                            }
                        } else {
                            self.whole_extension("method", &m, &mut reasons);
                        }
                    }
                }
            }
            (None, false) => {
                target = "(no method, no id)".into();
                reasons.push("neither a response nor a notification nor a request".into());
            }
        }
        Ok((target, reasons))
    }

    /// A page event's params are open in `UnframedViewNotificationParams`
    /// (the schema cannot correlate them with `method`): each is checked
    /// against the params of the notification it is.
    fn page_events(
        &mut self,
        result: &Value,
        reasons: &mut Vec<String>,
    ) -> Result<(), SchemaError> {
        let events = result["events"].as_array().cloned().unwrap_or_default();
        for (i, e) in events.iter().enumerate() {
            let m = e["method"].as_str().unwrap_or_default();
            let at = format!("/notifications/{}/params", token(m));
            if self.root.pointer(&at).is_some() {
                let found = self.validate_at(&at, &e["params"])?;
                reasons.extend(found.into_iter().map(|r| format!("events[{i}]: {r}")));
                self.member_extras(&at, &e["params"], reasons);
            } else {
                self.whole_extension("notification", m, reasons);
            }
        }
        Ok(())
    }

    fn error_table(&self, v: &Value, reasons: &mut Vec<String>) {
        let code = v
            .pointer("/error/code")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let Some(row) = self.errors.get(&code) else {
            reasons.push(format!("error code {code} is not in the errors table"));
            return;
        };
        let kind = v.pointer("/error/data/kind").and_then(Value::as_str);
        match kind {
            Some(k) if row.kinds.iter().any(|x| x == k) => {}
            Some(k) => reasons.push(format!(
                "error {code}: kind {k:?} is neither its kind nor an override kind ({:?})",
                row.kinds
            )),
            None => reasons.push(format!("error {code}: no data.kind")),
        }
        if let Some(r) = v.pointer("/error/data/retryable").and_then(Value::as_bool) {
            if Some(r) == row.retryable {
                reasons.push(format!(
                    "error {code}: data.retryable {r} equals the table's default (PROTOCOL.md 3: written only where it differs)"
                ));
            }
        }
    }

    fn whole_extension(&mut self, at: &str, name: &str, reasons: &mut Vec<String>) {
        if EXTENSIONS.iter().any(|e| e.at == at && e.name == name) {
            self.tally.extensions_seen.insert(format!("{at}.{name}"));
        } else {
            reasons.push(format!(
                "{at} {name} is neither in the public schema nor a listed extension"
            ));
        }
    }

    /// Top-level members of a frame must be the envelope's.
    fn envelope_extras(&self, def: &str, v: &Value, reasons: &mut Vec<String>) {
        let props = self.root.pointer(&format!("/$defs/{def}/properties"));
        for k in v.as_object().into_iter().flat_map(|o| o.keys()) {
            if props.is_none_or(|p| p.get(k).is_none()) {
                reasons.push(format!("envelope member {k:?} is not in $defs/{def}"));
            }
        }
    }

    /// Members outside the schema, below `at`: each must be a listed
    /// extension of the type it appears in.
    fn member_extras(&mut self, at: &str, instance: &Value, reasons: &mut Vec<String>) {
        let Some(schema) = self.root.pointer(at).cloned() else {
            return;
        };
        let mut found = Vec::new();
        self.walk(&schema, instance, "(root)", "$", &mut found, 0);
        for (ty, member, path) in found {
            if EXTENSIONS.iter().any(|e| e.at == ty && e.name == member) {
                self.tally.extensions_seen.insert(format!("{ty}.{member}"));
            } else {
                reasons.push(format!(
                    "{path}.{member}: not a member of {ty} in the public schema, and not a listed extension"
                ));
            }
        }
    }

    /// Walks `instance` along `schema`, collecting `(type, member, path)`
    /// for object members the schema does not define.
    fn walk(
        &self,
        schema: &Value,
        instance: &Value,
        ty: &str,
        path: &str,
        found: &mut Vec<(String, String, String)>,
        depth: usize,
    ) {
        if depth > 64 {
            return;
        }
        let Some(s) = schema.as_object() else { return };
        if ty == "UnframedViewNotificationParams" {
            return; // open by design; see `page_events`
        }
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            let name = r.rsplit('/').next().unwrap_or(ty);
            if let Some(target) = r.strip_prefix('#').and_then(|p| self.root.pointer(p)) {
                self.walk(target, instance, name, path, found, depth + 1);
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = s.get(key).and_then(Value::as_array) {
                // Follow the one branch that is not `null` when the
                // instance is not null; with several candidates the
                // member check cannot tell which applies and skips.
                let candidates: Vec<&Value> = branches
                    .iter()
                    .filter(|b| b.get("type") != Some(&Value::String("null".into())))
                    .collect();
                if !instance.is_null() && candidates.len() == 1 {
                    self.walk(candidates[0], instance, ty, path, found, depth + 1);
                }
            }
        }
        if let Some(all) = s.get("allOf").and_then(Value::as_array) {
            for b in all {
                self.walk(b, instance, ty, path, found, depth + 1);
            }
        }
        match instance {
            Value::Object(o) => {
                let props = s.get("properties").and_then(Value::as_object);
                let Some(props) = props else { return };
                for (k, v) in o {
                    match props.get(k) {
                        Some(p) => self.walk(p, v, ty, &format!("{path}.{k}"), found, depth + 1),
                        None => match s.get("additionalProperties") {
                            Some(a) if a.is_object() => {
                                self.walk(a, v, ty, &format!("{path}.{k}"), found, depth + 1)
                            }
                            _ => found.push((ty.to_string(), k.clone(), path.to_string())),
                        },
                    }
                }
            }
            Value::Array(a) => {
                if let Some(items) = s.get("items") {
                    for (i, v) in a.iter().enumerate() {
                        self.walk(items, v, ty, &format!("{path}[{i}]"), found, depth + 1);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Checks that every listed extension is additive: a member is not defined
/// by its public type (and the type does not forbid extra members); a
/// method is not in the schema. Returns the problems (empty: all additive).
pub fn check_extensions_are_additive(root: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for e in EXTENSIONS {
        match e.at {
            "method" => {
                if root
                    .pointer(&format!("/methods/{}", token(e.name)))
                    .is_some()
                {
                    problems.push(format!("method {} is public: not an extension", e.name));
                }
            }
            "notification" => {
                if root
                    .pointer(&format!("/notifications/{}", token(e.name)))
                    .is_some()
                {
                    problems.push(format!("notification {} is public", e.name));
                }
            }
            ty => match root.pointer(&format!("/$defs/{}", token(ty))) {
                None => problems.push(format!("{ty} is not a public type")),
                Some(def) => {
                    if def
                        .pointer(&format!("/properties/{}", token(e.name)))
                        .is_some()
                    {
                        problems.push(format!("{ty}.{} is a public member", e.name));
                    }
                    if def.get("additionalProperties") == Some(&Value::Bool(false)) {
                        problems.push(format!("{ty} forbids additional members"));
                    }
                    if e.reference.is_empty() {
                        problems.push(format!("{ty}.{} has no PROTOCOL.md reference", e.name));
                    }
                }
            },
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn checker() -> FrameChecker {
        FrameChecker::public().expect("the public schema loads")
    }

    #[test]
    fn the_bundle_has_its_parts_and_the_extensions_are_additive() {
        let c = checker();
        assert_eq!(c.root()["$defs"].as_object().map(|d| d.len()), Some(301));
        assert_eq!(
            check_extensions_are_additive(c.root()),
            Vec::<String>::new()
        );
        // The error table agrees with ours.
        for code in [-32700, -32600, -32001, -32030, -32603, -32011] {
            assert_eq!(
                c.default_retryable(code),
                crate::proto::error::default_retryable(code),
                "{code}"
            );
        }
    }

    #[test]
    fn extension_paths() {
        let kv = extension_member_at_path("$.result.history.snapshot.state.kv");
        assert_eq!(kv.map(|e| e.name), Some("kv"));
        assert!(extension_member_at_path("$.result.history.snapshot.state.items").is_none());
        assert!(extension_member_at_path("$.params.kv").is_none());
        assert!(extension_member_at_path("$.error.data.field").is_some());
        assert!(extension_member_at_path("$.params.item.effectOutcome").is_some());
    }

    #[test]
    fn an_extension_that_shadows_a_public_member_is_caught() {
        let mut root = checker().root().clone();
        root["$defs"]["SnapshotState"]["properties"]["kv"] = json!({"type": "string"});
        assert_eq!(
            check_extensions_are_additive(&root),
            vec!["SnapshotState.kv is a public member".to_string()]
        );
    }

    #[test]
    fn a_result_is_checked_against_its_method() {
        let mut c = checker();
        c.client_line(
            1,
            r#"{"jsonrpc":"2.0","id":7,"method":"turn/start","params":{}}"#,
        );
        let ok = r#"{"jsonrpc":"2.0","id":7,"result":{"commandId":"c","status":"accepted","turnId":"c","startedNewTurn":true,"disposition":"started"}}"#;
        assert_eq!(c.server_line(1, ok, "t"), Vec::<String>::new());
        let missing = r#"{"jsonrpc":"2.0","id":7,"result":{"commandId":"c","status":"accepted","startedNewTurn":true,"disposition":"started"}}"#;
        let r = c.server_line(1, missing, "t");
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].contains("turnId"), "{r:?}");
        // The same id on another connection names no request.
        assert!(c.server_line(2, ok, "t")[0].contains("no request"));
        assert_eq!(c.tally().validated, 3);
        assert_eq!(c.tally().invalid.len(), 2);
    }

    #[test]
    fn the_snapshot_token_usage_defect_is_caught() {
        let mut c = checker();
        let usage =
            json!({"inputTokens": 0, "outputTokens": 0, "cachedTokens": 0, "reasoningTokens": 0});
        let r = c
            .validate_at("/$defs/CumulativeTokenUsage", &usage)
            .unwrap();
        assert!(!r.is_empty());
        let ok = json!({"promptTokens": 0, "outputTokens": 0, "totalTokens": 0});
        assert!(c
            .validate_at("/$defs/CumulativeTokenUsage", &ok)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn errors_are_checked_against_the_table() {
        let mut c = checker();
        let good = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m","data":{"kind":"parseError"}}}"#;
        assert_eq!(c.server_line(1, good, "t"), Vec::<String>::new());
        let override_kind = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"m","data":{"kind":"notInitialized"}}}"#;
        assert_eq!(c.server_line(1, override_kind, "t"), Vec::<String>::new());
        let wrong_kind = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32030,"message":"m","data":{"kind":"sessionNotFound"}}}"#;
        assert!(c.server_line(1, wrong_kind, "t")[0].contains("neither its kind"));
        let default_written = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32030,"message":"m","data":{"kind":"commandRejected","retryable":false}}}"#;
        assert!(c.server_line(1, default_written, "t")[0].contains("default"));
        let unknown =
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32099,"message":"m","data":{"kind":"x"}}}"#;
        let r = c.server_line(1, unknown, "t");
        assert!(
            r.iter().any(|x| x.contains("not in the errors table")),
            "{r:?}"
        );
    }

    #[test]
    fn notifications_and_unlisted_members() {
        let mut c = checker();
        let sr = json!({"stream": {"kind": "approval.review", "id": "r"}, "first": {"id": "x", "sequence": 1}, "last": {"id": "x", "sequence": 1}});
        let resolved = json!({"jsonrpc": "2.0", "method": "approval/resolved", "emittedAtMs": 1, "params": {
            "sessionId": "s", "viewCursor": "v:s:1", "sourceRange": sr, "approvalId": "a", "itemId": "i",
            "turnId": "t", "decision": "abort", "policyResult": "deny", "resolvedBy": "policy", "stageEvidence": []}});
        assert_eq!(
            c.server_line(1, &resolved.to_string(), "t"),
            Vec::<String>::new()
        );
        let mut system = resolved.clone();
        system["params"]["resolvedBy"] = json!("system");
        assert!(!c.server_line(1, &system.to_string(), "t").is_empty());
        let mut extra = resolved.clone();
        extra["params"]["surprise"] = json!(1);
        let r = c.server_line(1, &extra.to_string(), "t");
        assert!(r[0].contains("surprise"), "{r:?}");
        let ext =
            json!({"jsonrpc": "2.0", "method": "state/updated", "params": {"sessionId": "s"}});
        assert_eq!(
            c.server_line(1, &ext.to_string(), "t"),
            Vec::<String>::new()
        );
        assert!(c
            .tally()
            .extensions_seen
            .contains("notification.state/updated"));
        let unknown = json!({"jsonrpc": "2.0", "method": "made/up", "params": {}});
        assert!(!c.server_line(1, &unknown.to_string(), "t").is_empty());
    }
}
