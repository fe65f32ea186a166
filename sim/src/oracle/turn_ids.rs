//! Turn ids derived as the protocol says: a fresh, queued or replacing
//! `turn/start` answers `turnId == commandId`; a steered one names a turn
//! that was started in that session; `startedNewTurn` matches the
//! disposition.

use std::collections::BTreeSet;

use super::history::History;
use super::Violation;
use crate::trace::Trace;

/// Checks the property.
pub fn check(_trace: &Trace, h: &History) -> Vec<Violation> {
    let mut v = Vec::new();
    let mut started: BTreeSet<String> = BTreeSet::new();
    for n in &h.notes {
        if n.method == "turn/started" {
            if let Some(t) = n.params["turnId"].as_str() {
                started.insert(t.to_ascii_lowercase());
            }
        }
    }
    for s in h.final_disk.files.keys() {
        for (m, p, _) in h.final_events(s) {
            if m == "turn/started" {
                if let Some(t) = p["turnId"].as_str() {
                    started.insert(t.to_ascii_lowercase());
                }
            }
        }
    }
    for a in &h.answers {
        let r = &h.reqs[a.req];
        // Ephemeral hosts leave no log: a turn started before a client
        // subscribed cannot be known, so the steered check needs a disk.
        let durable_host = h.durable_incs.contains(&a.host);
        if r.method != "turn/start" || !a.is_result() {
            continue;
        }
        let res = &a.value["result"];
        let cid = r.cid.clone().unwrap_or_default().to_ascii_lowercase();
        let turn = res["turnId"].as_str().unwrap_or("").to_ascii_lowercase();
        let disp = res["disposition"].as_str().unwrap_or("");
        let fresh = res["startedNewTurn"].as_bool();
        let bad = match disp {
            "started" => (turn != cid)
                .then_some("a started turn's id is not its commandId")
                .or((fresh != Some(true)).then_some("started without startedNewTurn")),
            "queued" => (turn != cid)
                .then_some("a queued turn's id is not its commandId")
                .or((fresh != Some(false)).then_some("queued with startedNewTurn")),
            "steered" => (turn == cid)
                .then_some("a steered ack names a new turn")
                .or((durable_host && !started.contains(&turn))
                    .then_some("a steered ack names a turn never started")),
            _ => Some("unknown disposition"),
        };
        if let Some(why) = bad {
            v.push(Violation::new(
                "turn-id-derivation",
                Some(a.idx),
                format!("turn/start {cid}: {why}: {res}"),
            ));
        }
    }
    v
}
