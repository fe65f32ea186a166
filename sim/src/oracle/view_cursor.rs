//! View cursors: strictly increasing per subscription (one link, one
//! session); durable events arrive with no gap and no repeat after the
//! point the subscription started (`v:<s>:0` for a start, the resume's
//! `cursor` for a suffix resume, its `viewCursor` for a snapshot resume);
//! and one durable cursor never names two different events.
//! A link on which the network dropped a line towards the client is
//! exempt from the gap check after the drop (a stream with a hole).

use std::collections::{BTreeMap, BTreeSet};

use msp::core::session::cursor_order;
use serde_json::Value;

use super::history::{History, IndexedDisk};
use super::Violation;
use crate::trace::{Trace, What};

/// Checks the property.
pub fn check(trace: &Trace, h: &History) -> Vec<Violation> {
    let mut v = Vec::new();
    let mut holed: BTreeMap<u64, usize> = BTreeMap::new();
    for (i, e) in trace.entries.iter().enumerate() {
        if let What::NetDrop {
            link,
            to_host: false,
        } = &e.what
        {
            holed.entry(*link).or_insert(i);
        }
    }
    // Resumes that reached a host whose disk already held their intake:
    // those were answered as replays. (link, rpc id) -> replayed.
    let mut replayed: BTreeMap<(u64, u64), std::collections::VecDeque<bool>> = BTreeMap::new();
    let mut disk = IndexedDisk::default();
    // Ephemeral hosts keep their ledger in memory: a command id an
    // incarnation already read is a replay there.
    let mut seen_by_inc: BTreeSet<(usize, u64, String)> = BTreeSet::new();
    for e in &trace.entries {
        disk.apply(&e.what);
        let What::HostRecv { link, line, inc } = &e.what else {
            continue;
        };
        let Ok(fr) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if fr["method"] != "session/resume" {
            continue;
        }
        let (Some(id), Some(s), Some(c)) = (
            fr["id"].as_u64(),
            fr["params"]["sessionId"].as_str(),
            fr["params"]["commandId"].as_str(),
        ) else {
            continue;
        };
        let host = match e.actor {
            crate::trace::Actor::Host(n) => n,
            _ => 0,
        };
        let first_here = seen_by_inc.insert((host, *inc, c.to_ascii_lowercase()));
        let known = disk
            .ledger(s, usize::MAX)
            .0
            .contains(&c.to_ascii_lowercase())
            || (!h.durable_incs.contains(&(host, *inc)) && !first_here);
        replayed.entry((*link, id)).or_default().push_back(known);
    }
    // Subscription starts: (link, session) -> (trace idx, durable n).
    let mut starts: BTreeMap<(u64, String), Vec<(usize, u64)>> = BTreeMap::new();
    for a in &h.answers {
        let r = &h.reqs[a.req];
        let rpc_id = trace_rpc_id(&trace.entries[r.idx].what);
        // Answers on one link come back in the order the host read the
        // copies of the request.
        let maybe_replay = rpc_id
            .and_then(|id| replayed.get_mut(&(r.link, id)))
            .and_then(|q| q.pop_front())
            .unwrap_or(false);
        let Some(res) = a.value.get("result") else {
            continue;
        };
        let sid = match r.method.as_str() {
            "session/start" => res["session"]["sessionId"].as_str(),
            "session/resume" => r.params["sessionId"].as_str(),
            _ => None,
        };
        let Some(sid) = sid else { continue };
        // KNOWN CORE ISSUE (reported to the lead): a *replayed*
        // `session/resume` whose original answer was a cursor suffix
        // (`mode: none`) subscribes after the original `viewCursor` (the
        // head at that time), not after the request's `cursor`, so the
        // events between the two are never streamed. Until the core is
        // fixed, a resume sent more than once is checked from its
        // `viewCursor`; set this to false to see the gaps.
        const EXCUSE_RESUME_REPLAY_GAP: bool = false;

        let suffix =
            res["history"]["mode"] == "none" && !(EXCUSE_RESUME_REPLAY_GAP && maybe_replay);
        let from = if r.method == "session/resume" && suffix {
            r.params["cursor"].as_str().unwrap_or("")
        } else {
            res["viewCursor"].as_str().unwrap_or("")
        };
        let link_starts = starts.entry((r.link, sid.to_string())).or_default();
        // A second copy of one resume on a link that is already subscribed
        // (a duplicated line) does not restart the subscription: the host
        // has sent that link everything up to its head already.
        if maybe_replay && !link_starts.is_empty() {
            continue;
        }
        link_starts.push((a.idx, cursor_order(from).0));
    }
    let mut last: BTreeMap<(u64, String), ((u64, u64), usize)> = BTreeMap::new();
    let mut names: BTreeMap<String, (String, Value)> = BTreeMap::new();
    let mut reported: BTreeSet<(u64, String)> = BTreeSet::new();
    for n in &h.notes {
        if n.method == "session/closed" {
            continue;
        }
        let (Some(s), Some(c)) = (
            n.params["sessionId"].as_str(),
            n.params["viewCursor"].as_str(),
        ) else {
            continue;
        };
        let key = (n.link, s.to_string());
        let order = cursor_order(c);
        if order.1 == 0 {
            match names.get(c) {
                None => {
                    names.insert(c.to_string(), (n.method.clone(), n.params.clone()));
                }
                Some((m, p)) if m != &n.method || p != &n.params => v.push(Violation::new(
                    "cursor-uniqueness",
                    Some(n.idx),
                    format!("cursor {c} names {m} and {}", n.method),
                )),
                _ => {}
            }
        }
        // The subscription's starting point: the latest start at or before.
        let start = starts
            .get(&key)
            .and_then(|v| v.iter().rev().find(|(i, _)| *i < n.idx).copied());
        let prev = match last.get(&key) {
            Some((o, i)) if start.is_none_or(|(si, _)| *i > si) => Some(*o),
            _ => start.map(|(_, n0)| (n0, u64::MAX)),
        };
        if let Some(p) = prev {
            let increasing = p.1 == u64::MAX && order.0 > p.0 || p.1 != u64::MAX && order > p;
            let increasing = increasing || (p.1 == u64::MAX && order.0 == p.0 && order.1 > 0);
            if !increasing && !reported.contains(&key) {
                reported.insert(key.clone());
                v.push(Violation::new(
                    "view-cursor-order",
                    Some(n.idx),
                    format!(
                        "link{} {s}: cursor {c} after {:?} (repeat or out of order)",
                        n.link, p
                    ),
                ));
            }
            let gap_exempt = holed.get(&n.link).is_some_and(|d| *d < n.idx);
            if order.1 == 0 && order.0 > p.0 + 1 && !gap_exempt && !reported.contains(&key) {
                reported.insert(key.clone());
                v.push(Violation::new(
                    "view-cursor-order",
                    Some(n.idx),
                    format!("link{} {s}: gap: durable cursor {c} after #{}", n.link, p.0),
                ));
            }
        }
        last.insert(key, (order, n.idx));
    }
    v
}

fn trace_rpc_id(w: &What) -> Option<u64> {
    match w {
        What::ClientSend { line, .. } => serde_json::from_str::<Value>(line).ok()?["id"].as_u64(),
        _ => None,
    }
}
