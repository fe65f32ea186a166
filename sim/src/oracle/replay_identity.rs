//! Value-identical replays and rejection idempotency: every answer to one
//! command id (and one payload) equals the first, recursively, except the
//! documented transitions: pending -> `abandoned` after a crash, and a
//! `turn/start` ack -> `launch_failed` / `deferred_start_failed` once its
//! launch failed. Carrier-less rows are compared within one host
//! incarnation only (their dedupe is host-lifetime).

use std::collections::BTreeMap;

use serde_json::Value;

use super::history::{History, CARRIERLESS_METHODS};
use super::Violation;
use crate::trace::Trace;

/// Answers that are recorded outcomes (what replays must repeat).
pub fn is_recorded(a: &super::history::Ans) -> bool {
    a.is_result()
        || a.reason()
            .is_some_and(|r| r != "command_id_conflict" && r != "session_id_conflict")
}

/// (command id, payload, host scope for carrier-less rows).
type RefKey = (String, String, Option<(usize, u64)>);

/// Checks the property.
pub fn check(_trace: &Trace, h: &History) -> Vec<Violation> {
    let mut v = Vec::new();
    // (cid, payload, host scope) -> (reference answer, its index)
    let mut refs: BTreeMap<RefKey, (Value, usize)> = BTreeMap::new();
    for a in &h.answers {
        let r = &h.reqs[a.req];
        let Some(cid) = &r.cid else { continue };
        if !is_recorded(a) {
            continue;
        }
        let scope = CARRIERLESS_METHODS
            .contains(&r.method.as_str())
            .then_some(a.host);
        let key = (cid.to_ascii_lowercase(), r.payload.to_string(), scope);
        let Some((first, at)) = refs.get(&key).cloned() else {
            refs.insert(key, (a.value.clone(), a.idx));
            continue;
        };
        if first == a.value {
            continue;
        }
        let first_is_result = first.get("result").is_some();
        let reason = a.reason();
        let abandoned =
            first_is_result && reason == Some("abandoned") && h.crash_between(at, a.idx);
        let launch = first_is_result
            && r.method == "turn/start"
            && matches!(
                reason,
                Some("launch_failed") | Some("deferred_start_failed")
            );
        if abandoned || launch {
            refs.insert(key, (a.value.clone(), a.idx));
            continue;
        }
        let property = if first_is_result {
            "value-identical-replays"
        } else {
            "rejection-idempotency"
        };
        v.push(Violation::new(
            property,
            Some(a.idx),
            format!("{} {cid} answered {} after {}", r.method, a.value, first),
        ));
        refs.insert(key, (a.value.clone(), a.idx));
    }
    v
}
