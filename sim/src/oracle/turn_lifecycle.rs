//! Turn lifecycle: one `turn/started` and at most one terminal
//! `turn/completed` per turn; `turn/unqueued` is never followed by a
//! terminal; a failed launch (`error.kind == launchError`) has no
//! `turn/started`; and once healed, every started turn of a recovered
//! session has ended.

use std::collections::BTreeMap;

use serde_json::Value;

use super::history::History;
use super::Violation;
use crate::trace::Trace;

#[derive(Default)]
struct Life {
    started: u32,
    completed: u32,
    unqueued: bool,
    launch_failed: bool,
    completed_after_unqueue: bool,
}

/// Checks one session's events in order.
pub fn check_events(
    session: &str,
    events: &[(String, Value)],
    require_ended: bool,
    where_: &str,
) -> Vec<Violation> {
    let mut lives: BTreeMap<String, Life> = BTreeMap::new();
    for (m, p) in events {
        let Some(t) = p["turnId"].as_str() else {
            continue;
        };
        let l = lives.entry(t.to_string()).or_default();
        match m.as_str() {
            "turn/started" => l.started += 1,
            "turn/completed" => {
                l.completed += 1;
                l.completed_after_unqueue |= l.unqueued;
                l.launch_failed |= p["error"]["kind"] == "launchError";
            }
            "turn/unqueued" => l.unqueued = true,
            _ => {}
        }
    }
    let mut v = Vec::new();
    for (t, l) in &lives {
        let mut bad = |why: &str| {
            v.push(Violation::new(
                "turn-lifecycle",
                None,
                format!("session {session} ({where_}) turn {t}: {why}"),
            ))
        };
        if l.started > 1 {
            bad("started twice");
        }
        if l.completed > 1 {
            bad("more than one terminal");
        }
        if l.completed_after_unqueue {
            bad("a terminal after turn/unqueued");
        }
        if l.launch_failed && l.started > 0 {
            bad("a failed launch has a turn/started");
        }
        if require_ended && l.started == 1 && l.completed == 0 {
            bad("started but never ended after the run healed");
        }
    }
    v
}

/// Checks the property.
pub fn check(_trace: &Trace, h: &History) -> Vec<Violation> {
    let mut v = Vec::new();
    for s in h.final_disk.files.keys() {
        let ev: Vec<(String, Value)> = h
            .final_events(s)
            .into_iter()
            .map(|(m, p, _)| (m, p))
            .collect();
        v.extend(check_events(
            s,
            &ev,
            !h.unrecovered.contains(s),
            "durable log",
        ));
    }
    for (s, ev) in h.observed_events() {
        v.extend(check_events(&s, &ev, false, "events clients saw"));
    }
    v
}
