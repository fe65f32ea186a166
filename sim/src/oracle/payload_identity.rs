//! Payload identity: reusing a command id with another payload is rejected
//! `command_id_conflict`, never applied, and leaves the original's answer
//! intact (the latter is the replay oracle's business); the same payload
//! never gets `command_id_conflict`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::history::History;
use super::Violation;
use crate::trace::Trace;

/// Checks the property.
pub fn check(_trace: &Trace, h: &History) -> Vec<Violation> {
    let mut v = Vec::new();
    // The payload of the first request per command id whose answer was a
    // recorded outcome.
    let mut first: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for a in &h.answers {
        let r = &h.reqs[a.req];
        let Some(cid) = &r.cid else { continue };
        let key = cid.to_ascii_lowercase();
        let payload = r.payload.to_string();
        match first.get(&key) {
            None => {
                if super::replay_identity::is_recorded(a) {
                    first.insert(key, (payload, a.req));
                }
            }
            Some((p, _)) if *p == payload => {
                if a.reason() == Some("command_id_conflict") {
                    v.push(Violation::new(
                        "payload-identity",
                        Some(a.idx),
                        format!(
                            "{} {cid} with its original payload answered command_id_conflict",
                            r.method
                        ),
                    ));
                }
            }
            Some(_) => {
                let ok = a.reason() == Some("command_id_conflict")
                    || !super::replay_identity::is_recorded(a);
                if !ok {
                    v.push(Violation::new(
                        "payload-identity",
                        Some(a.idx),
                        format!(
                            "{} {cid} reused with another payload was answered {}",
                            r.method, a.value
                        ),
                    ));
                }
            }
        }
    }
    // Never applied: the probe's text never reaches a durable log.
    for (s, f) in &h.final_disk.files {
        let _ = f;
        for (m, p, _) in h.final_events(s) {
            let text = p["item"]["text"].as_str().unwrap_or("");
            if m == "item/completed" && text.starts_with("conflict-probe") {
                v.push(Violation::new(
                    "payload-identity",
                    None,
                    format!("session {s}: a conflicting reuse was applied ({text:?})"),
                ));
            }
        }
    }
    let _ = Value::Null;
    v
}
