//! Pending commands are visible from another connection: a
//! `session/read` answer lists in `pendingCommands` every intake that was
//! durable and unsettled when the read was sent and is still unsettled in
//! the log when the answer arrives; it never lists a carrier-less row.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::history::{History, IndexedDisk, CARRIERLESS_METHODS};
use super::Violation;
use crate::trace::{Trace, What};

/// Checks the property.
pub fn check(trace: &Trace, h: &History) -> Vec<Violation> {
    let mut v = Vec::new();
    let mut disk = IndexedDisk::default();
    // (link, rpc id) -> expected pending ids at send time.
    let mut expect: BTreeMap<(u64, u64), (String, BTreeSet<String>)> = BTreeMap::new();
    for (i, e) in trace.entries.iter().enumerate() {
        disk.apply(&e.what);
        match &e.what {
            What::ClientSend { link, line } => {
                let Ok(fr) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                if fr["method"] != "session/read" {
                    continue;
                }
                let s = fr["params"]["sessionId"].as_str().unwrap_or("").to_string();
                let Some(f) = disk.disk.files.get(&s) else {
                    continue;
                };
                let (recv, settled) = disk.ledger(&s, f.durable_len);
                let want: BTreeSet<String> = recv.difference(&settled).cloned().collect();
                if let Some(id) = fr["id"].as_u64() {
                    expect.insert((*link, id), (s, want));
                }
            }
            What::ClientRecv { link, line } => {
                let Ok(fr) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                let Some(id) = fr["id"].as_u64() else {
                    continue;
                };
                let Some((s, want)) = expect.remove(&(*link, id)) else {
                    continue;
                };
                let Some(state) = fr["result"]["history"]["snapshot"].get("state") else {
                    continue;
                };
                let listed: BTreeSet<String> = state["pendingCommands"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|p| p["commandId"].as_str().map(|c| c.to_ascii_lowercase()))
                            .collect()
                    })
                    .unwrap_or_default();
                if let Some(p) = state["pendingCommands"].as_array().and_then(|a| {
                    a.iter()
                        .find(|p| CARRIERLESS_METHODS.contains(&p["method"].as_str().unwrap_or("")))
                }) {
                    v.push(Violation::new(
                        "pending-visible",
                        Some(i),
                        format!("session {s}: carrier-less row listed as pending: {p}"),
                    ));
                }
                let now_settled = disk.ledger(&s, usize::MAX).1;
                for c in want
                    .iter()
                    .filter(|c| !now_settled.contains(*c) && !listed.contains(*c))
                {
                    v.push(Violation::new(
                        "pending-visible",
                        Some(i),
                        format!("session {s}: durable unsettled intake {c} missing from pendingCommands"),
                    ));
                }
            }
            _ => {}
        }
    }
    let _ = h;
    v
}
