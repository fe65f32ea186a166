//! Exactly-once effect: no command id's effect appears twice in any
//! session's history, across restarts and hosts: one `turn/started` per
//! turn id and per command id, one userMessage per command id, one
//! `state/updated` per command id, one `approval/resolved` per approval;
//! the keyed provider mutates at most once per key and no effect key is
//! performed twice at the unkeyed provider.

use std::collections::BTreeMap;

use serde_json::Value;

use super::history::History;
use super::Violation;
use crate::trace::{Trace, What};

/// Counts effects in one session's durable events.
pub fn count_effects(session: &str, events: &[(String, Value)], where_: &str) -> Vec<Violation> {
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    let mut v = Vec::new();
    let mut bump = |k: String, v: &mut Vec<Violation>| {
        let n = seen.entry(k.clone()).or_insert(0);
        *n += 1;
        if *n == 2 {
            v.push(Violation::new(
                "exactly-once-effect",
                None,
                format!("session {session} ({where_}): {k} appears twice"),
            ));
        }
    };
    for (m, p) in events {
        match m.as_str() {
            "turn/started" => {
                bump(
                    format!(
                        "turn/started of turn {}",
                        p["turnId"].as_str().unwrap_or("?")
                    ),
                    &mut v,
                );
                bump(
                    format!(
                        "turn/started of command {}",
                        p["commandId"].as_str().unwrap_or("?")
                    ),
                    &mut v,
                );
            }
            "item/completed" if p["item"]["kind"] == "userMessage" => {
                if let Some(c) = p["item"]["commandId"].as_str() {
                    bump(format!("userMessage of command {c}"), &mut v);
                }
            }
            "state/updated" => {
                if let Some(c) = p["commandId"].as_str() {
                    bump(format!("state/updated of command {c}"), &mut v);
                }
            }
            "approval/resolved" => bump(
                format!(
                    "approval/resolved of {}",
                    p["approvalId"].as_str().unwrap_or("?")
                ),
                &mut v,
            ),
            _ => {}
        }
    }
    v
}

/// Checks the property.
pub fn check(trace: &Trace, h: &History) -> Vec<Violation> {
    let mut v = Vec::new();
    for s in h.final_disk.files.keys() {
        let ev: Vec<(String, Value)> = h
            .final_events(s)
            .into_iter()
            .map(|(m, p, _)| (m, p))
            .collect();
        v.extend(count_effects(s, &ev, "durable log"));
    }
    for (s, ev) in h.observed_events() {
        v.extend(count_effects(&s, &ev, "events clients saw"));
    }
    let mut keyed: BTreeMap<&str, u32> = BTreeMap::new();
    let mut unkeyed: BTreeMap<&str, u32> = BTreeMap::new();
    for (i, e) in trace.entries.iter().enumerate() {
        if let What::Effect {
            provider,
            key,
            perform,
            mutated,
            ..
        } = &e.what
        {
            let (map, counts) = match provider.as_str() {
                "keyed" => (&mut keyed, *mutated),
                _ => (&mut unkeyed, *perform),
            };
            if counts {
                let n = map.entry(key.as_str()).or_insert(0);
                *n += 1;
                if *n == 2 {
                    v.push(Violation::new(
                        "exactly-once-effect",
                        Some(i),
                        format!("provider {provider} mutated twice for effect key {key}"),
                    ));
                }
            }
        }
    }
    v
}
