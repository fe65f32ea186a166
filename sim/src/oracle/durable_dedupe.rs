//! Durable dedupe: no ack and no durable rejection leaves a durable host
//! before the intake record that justifies it is synced (checked against
//! the host write/sync trace), so a replay after a crash deduplicates.

use std::collections::BTreeSet;

use serde_json::Value;

use super::history::{History, IndexedDisk, Mark, DURABLE_METHODS};
use super::Violation;
use crate::trace::{Trace, What};

/// Checks the property.
pub fn check(trace: &Trace, h: &History) -> Vec<Violation> {
    let mut v = Vec::new();
    let mut disk = IndexedDisk::default();
    let mut durable_ids: BTreeSet<String> = BTreeSet::new();
    for (i, e) in trace.entries.iter().enumerate() {
        if let Some(s) = disk.apply(&e.what) {
            let f = &disk.disk.files[&s];
            for (end, m) in disk.index.get(&s).map(Vec::as_slice).unwrap_or(&[]) {
                if *end > f.durable_len {
                    break;
                }
                if let Mark::Received(c) = m {
                    durable_ids.insert(c.clone());
                }
            }
        }
        let What::HostSend { inc, link, line } = &e.what else {
            continue;
        };
        let crate::trace::Actor::Host(host) = e.actor else {
            continue;
        };
        if !h.durable_incs.contains(&(host, *inc)) {
            continue;
        }
        let Ok(fr) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if fr.get("method").is_some() {
            continue;
        }
        let Some(id) = fr["id"].as_u64() else {
            continue;
        };
        let Some(&ri) = h.req_by_key.get(&(*link, id)) else {
            continue;
        };
        let req = &h.reqs[ri];
        if !DURABLE_METHODS.contains(&req.method.as_str()) {
            continue;
        }
        let recorded = fr.get("result").is_some()
            || (fr["error"]["code"] == -32030
                && !matches!(
                    fr["error"]["data"]["reason"].as_str(),
                    Some("command_id_conflict") | Some("session_id_conflict")
                ));
        let Some(cid) = &req.cid else { continue };
        if recorded && !durable_ids.contains(&cid.to_ascii_lowercase()) {
            v.push(Violation::new(
                "durable-dedupe",
                Some(i),
                format!(
                    "host{host} answered {} {cid} before its intake record was synced",
                    req.method
                ),
            ));
        }
    }
    v
}
