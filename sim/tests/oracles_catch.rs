//! Every oracle catches the defect it exists for. Each test takes the
//! recorded trace of a real passing seed, doctors a copy minimally so that
//! it holds exactly one such defect (a duplicated effect, a changed replayed
//! rejection, a terminal after `turn/unqueued`, two swapped events, one
//! cursor on two events, a pending command left out of a read, a command
//! left unanswered), runs the oracle over it, and asserts the violation is
//! reported under that oracle's property name. As a control, the
//! undoctored trace passes the same oracle (and every other).
//!
//! Seeds are not pinned: each test takes the first seed of a small range
//! whose trace has what the doctoring needs, so a change to the workload
//! moves the test to another seed rather than breaking it.

use std::collections::{BTreeMap, BTreeSet};

use msp::core::record::Record;
use msp::core::session::cursor_order;
use msp_sim::client::Role;
use msp_sim::disk::Disk;
use msp_sim::oracle::history::{IndexedDisk, CARRIERLESS_METHODS};
use msp_sim::oracle::{
    self, exactly_once, liveness, pending_visible, replay_identity, turn_lifecycle, view_cursor,
    History, Violation,
};
use msp_sim::run::{run, RunConfig, RunResult};
use msp_sim::trace::{Actor, Entry, Trace, What};
use msp_sim::workload::Scenario;
use serde_json::Value;

const SEEDS: std::ops::Range<u64> = 0..24;

/// A run of a seed that holds every property.
fn passing(scenario: Scenario, seed: u64) -> RunResult {
    let r = run(&RunConfig {
        scenario,
        seed,
        bug: None,
    });
    assert!(
        r.violations.is_empty(),
        "{scenario} seed {seed} is meant to pass: {:#?}",
        r.violations
    );
    r
}

/// The first passing run (over `scenarios` x `SEEDS`) for which `doctor`
/// finds something to doctor; returns the run and the doctored trace.
fn doctored<T>(
    scenarios: &[Scenario],
    mut doctor: impl FnMut(&RunResult) -> Option<T>,
) -> (RunResult, T) {
    for &scenario in scenarios {
        for seed in SEEDS {
            let r = passing(scenario, seed);
            if let Some(t) = doctor(&r) {
                eprintln!("doctored {scenario} seed {seed}");
                return (r, t);
            }
        }
    }
    panic!("no seed of {scenarios:?} has what this test doctors");
}

/// Property names reported.
fn props(v: &[Violation]) -> BTreeSet<&'static str> {
    v.iter().map(|x| x.property).collect()
}

/// Asserts `property` is among `v`, and that every oracle run together
/// ([`oracle::check_all`]) reports it too.
fn assert_caught(
    property: &str,
    v: &[Violation],
    r: &RunResult,
    trace: &Trace,
    clients: &[msp_sim::client::Client],
) {
    assert!(
        v.iter().any(|x| x.property == property),
        "{property} missed the planted defect; oracle said {v:#?}"
    );
    let all = oracle::check_all(trace, clients, r.config.scenario, &Disk::default());
    assert!(
        props(&all).contains(property),
        "check_all missed {property}; said {:?}",
        props(&all)
    );
}

/// Asserts the undoctored trace passes `property`'s oracle.
fn assert_clean(property: &str, v: &[Violation]) {
    assert!(
        v.iter().all(|x| x.property != property),
        "control: the undoctored trace already fails {property}: {v:#?}"
    );
}

/// A trace rebuilt from entries (so its hash chain is consistent).
fn retrace(entries: Vec<Entry>) -> Trace {
    let mut t = Trace::new();
    for e in entries {
        t.push(e.at_ms, e.actor, e.what);
    }
    t
}

fn json(line: &str) -> Option<Value> {
    serde_json::from_str(line).ok()
}

/// A line as the run wrote it (keeping its trailing newline, if any).
fn line_of(v: &Value, like: &str) -> String {
    let nl = if like.ends_with('\n') { "\n" } else { "" };
    format!("{v}{nl}")
}

/// A durable event record: (n, method, params, emitted at, cause).
type DurableEvent = (u64, String, Value, u64, Option<String>);

/// The durable event records of one session's final log.
fn durable_events(trace: &Trace, session: &str) -> Vec<DurableEvent> {
    let h = History::build(trace);
    let Some(f) = h.final_disk.files.get(session) else {
        return Vec::new();
    };
    oracle::history::records(&f.bytes)
        .into_iter()
        .filter_map(|r| match r {
            Record::Event {
                n,
                method,
                params,
                emitted_at_ms,
                cause,
            } => Some((n, method, params, emitted_at_ms, cause)),
            _ => None,
        })
        .collect()
}

/// The trace plus one more durable event at the end of `session`'s log,
/// written and synced by the host that last wrote that log (as a host that
/// applied something a second time would). `None` if the log's tail does
/// not decode (a torn tail), so the record would not count.
fn with_durable_event(
    trace: &Trace,
    session: &str,
    method: &str,
    mut params: Value,
    cause: Option<String>,
) -> Option<Trace> {
    let events = durable_events(trace, session);
    let n = events.iter().map(|e| e.0).max()? + 1;
    params["viewCursor"] = Value::String(format!("v:{session}:{n}"));
    let rec = Record::Event {
        n,
        method: method.to_string(),
        params,
        emitted_at_ms: events.last()?.3 + 1,
        cause,
    };
    let (at_ms, actor, inc) = trace.entries.iter().rev().find_map(|e| match &e.what {
        What::Append {
            inc, session: s, ..
        } if s == session => Some((e.at_ms, e.actor, *inc)),
        _ => None,
    })?;
    let h = History::build(trace);
    let len = h.final_disk.files.get(session)?.bytes.len() as u64;
    let bytes = rec.encode();
    let upto = len + bytes.len() as u64;
    let mut entries = trace.entries.clone();
    let end = entries.last().map_or(at_ms, |e| e.at_ms);
    entries.push(Entry {
        at_ms: end,
        actor,
        what: What::Append {
            inc,
            session: session.to_string(),
            bytes,
        },
    });
    entries.push(Entry {
        at_ms: end,
        actor,
        what: What::Synced {
            inc,
            session: session.to_string(),
            upto_bytes: upto,
        },
    });
    let t = retrace(entries);
    (durable_events(&t, session).len() == events.len() + 1).then_some(t)
}

/// Sessions with a log at the end of the run.
fn logged_sessions(trace: &Trace) -> Vec<String> {
    History::build(trace)
        .final_disk
        .files
        .keys()
        .cloned()
        .collect()
}

// ---------------------------------------------------------------------
// exactly-once-effect
// ---------------------------------------------------------------------

/// A host that started one turn twice: a second `turn/started` of the same
/// turn (same turn id, same command id) at the end of its durable log.
#[test]
fn exactly_once_catches_a_turn_started_twice_in_a_durable_log() {
    let (r, t) = doctored(&[Scenario::Turns, Scenario::Mixed], |r| {
        logged_sessions(&r.trace).into_iter().find_map(|s| {
            let ev = durable_events(&r.trace, &s);
            let (_, m, p, _, cause) = ev.iter().find(|e| e.1 == "turn/started")?;
            with_durable_event(&r.trace, &s, m, p.clone(), cause.clone())
        })
    });
    let h = History::build(&r.trace);
    assert_clean("exactly-once-effect", &exactly_once::check(&r.trace, &h));
    let v = exactly_once::check(&t, &History::build(&t));
    assert!(
        v.iter()
            .any(|x| x.detail.contains("durable log") && x.detail.contains("turn/started of turn")),
        "{v:#?}"
    );
    assert_caught("exactly-once-effect", &v, &r, &t, &r.clients);
}

/// A client that was shown one turn's `turn/started` under two durable
/// cursors: a copy of a `turn/started` it received, under the next cursor
/// of that session nobody saw, right after the original.
#[test]
fn exactly_once_catches_a_turn_started_a_client_saw_twice() {
    let (r, t) = doctored(&[Scenario::Turns, Scenario::Mixed], |r| {
        let h = History::build(&r.trace);
        let n = h.notes.iter().find(|n| {
            n.method == "turn/started"
                && n.params["viewCursor"]
                    .as_str()
                    .is_some_and(|c| cursor_order(c).1 == 0)
        })?;
        let s = n.params["sessionId"].as_str()?.to_string();
        let max = h
            .notes
            .iter()
            .filter(|m| m.params["sessionId"] == s.as_str())
            .filter_map(|m| m.params["viewCursor"].as_str())
            .map(|c| cursor_order(c).0)
            .max()?;
        let What::ClientRecv { link, line } = &r.trace.entries[n.idx].what else {
            return None;
        };
        let mut v = json(line)?;
        v["params"]["viewCursor"] = Value::String(format!("v:{s}:{}", max + 1));
        let mut entries = r.trace.entries.clone();
        let copy = Entry {
            what: What::ClientRecv {
                link: *link,
                line: line_of(&v, line),
            },
            ..entries[n.idx].clone()
        };
        entries.insert(n.idx + 1, copy);
        Some(retrace(entries))
    });
    let h = History::build(&r.trace);
    assert_clean("exactly-once-effect", &exactly_once::check(&r.trace, &h));
    let v = exactly_once::check(&t, &History::build(&t));
    assert!(
        v.iter().any(|x| x.detail.contains("events clients saw")
            && x.detail.contains("turn/started of turn")),
        "{v:#?}"
    );
    assert_caught("exactly-once-effect", &v, &r, &t, &r.clients);
}

/// The keyed provider mutated twice for one effect key: a copy of a
/// mutating effect call, right after it.
#[test]
fn exactly_once_catches_a_keyed_effect_mutated_twice() {
    let (r, t) = doctored(&[Scenario::Mixed, Scenario::Turns], |r| {
        let i = r.trace.entries.iter().position(|e| {
            matches!(&e.what, What::Effect { provider, mutated: true, .. } if provider == "keyed")
        })?;
        let mut entries = r.trace.entries.clone();
        entries.insert(i + 1, entries[i].clone());
        Some(retrace(entries))
    });
    let h = History::build(&r.trace);
    assert_clean("exactly-once-effect", &exactly_once::check(&r.trace, &h));
    let v = exactly_once::check(&t, &History::build(&t));
    assert!(
        v.iter().any(|x| x.detail.contains("provider keyed")),
        "{v:#?}"
    );
    assert_caught("exactly-once-effect", &v, &r, &t, &r.clients);
}

// ---------------------------------------------------------------------
// rejection-idempotency
// ---------------------------------------------------------------------

/// What the oracle keys replays by: (command id, payload, host scope for
/// carrier-less rows).
type RefKey = (String, String, Option<(usize, u64)>);

/// A replayed rejection that names another reason than the first: the
/// second `commandRejected` answer to one command id (same payload) gets a
/// different `data.reason`.
#[test]
fn rejection_idempotency_catches_a_replay_with_another_reason() {
    let (r, t) = doctored(
        &[Scenario::Turns, Scenario::Ephemeral, Scenario::CrashStorm],
        |r| {
            let h = History::build(&r.trace);
            let mut first: BTreeMap<RefKey, Value> = BTreeMap::new();
            for a in &h.answers {
                let rq = &h.reqs[a.req];
                let Some(cid) = &rq.cid else { continue };
                if !replay_identity::is_recorded(a) {
                    continue;
                }
                let scope = CARRIERLESS_METHODS
                    .contains(&rq.method.as_str())
                    .then_some(a.host);
                let key = (cid.to_ascii_lowercase(), rq.payload.to_string(), scope);
                match first.get(&key) {
                    None => {
                        first.insert(key, a.value.clone());
                    }
                    Some(f) if f.get("error").is_some() && *f == a.value => {
                        // A replay of a recorded rejection: change its reason.
                        let What::ClientRecv { link, line } = &r.trace.entries[a.idx].what else {
                            return None;
                        };
                        let mut v = json(line)?;
                        let was = v["error"]["data"]["reason"].as_str()?.to_string();
                        let other = if was == "already_terminal" {
                            "not_running"
                        } else {
                            "already_terminal"
                        };
                        v["error"]["data"]["reason"] = Value::String(other.into());
                        let mut entries = r.trace.entries.clone();
                        entries[a.idx].what = What::ClientRecv {
                            link: *link,
                            line: line_of(&v, line),
                        };
                        return Some(retrace(entries));
                    }
                    Some(_) => {}
                }
            }
            None
        },
    );
    let h = History::build(&r.trace);
    assert_clean(
        "rejection-idempotency",
        &replay_identity::check(&r.trace, &h),
    );
    let v = replay_identity::check(&t, &History::build(&t));
    assert_caught("rejection-idempotency", &v, &r, &t, &r.clients);
}

// ---------------------------------------------------------------------
// turn-lifecycle
// ---------------------------------------------------------------------

/// A turn that was unqueued and then ended: a `turn/completed` of an
/// unqueued turn at the end of its session's durable log.
#[test]
fn turn_lifecycle_catches_a_terminal_after_unqueued_in_a_durable_log() {
    let (r, t) = doctored(
        &[Scenario::Turns, Scenario::Mixed, Scenario::LeaseHandover],
        |r| {
            logged_sessions(&r.trace).into_iter().find_map(|s| {
                let ev = durable_events(&r.trace, &s);
                let (_, _, p, _, cause) = ev.iter().find(|e| e.1 == "turn/unqueued")?;
                let params = serde_json::json!({
                    "sessionId": s,
                    "turnId": p["turnId"],
                    "terminal": "interrupted",
                });
                with_durable_event(&r.trace, &s, "turn/completed", params, cause.clone())
            })
        },
    );
    let h = History::build(&r.trace);
    assert_clean("turn-lifecycle", &turn_lifecycle::check(&r.trace, &h));
    let v = turn_lifecycle::check(&t, &History::build(&t));
    assert!(
        v.iter().any(|x| x.detail.contains("durable log")
            && x.detail.contains("a terminal after turn/unqueued")),
        "{v:#?}"
    );
    assert_caught("turn-lifecycle", &v, &r, &t, &r.clients);
}

/// A client shown a terminal for a turn it was told was unqueued: a
/// `turn/completed` right after a `turn/unqueued` it received.
#[test]
fn turn_lifecycle_catches_a_terminal_after_unqueued_a_client_saw() {
    let (r, t) = doctored(&[Scenario::Ephemeral, Scenario::Turns], |r| {
        let h = History::build(&r.trace);
        let n = h.notes.iter().find(|n| n.method == "turn/unqueued")?;
        let s = n.params["sessionId"].as_str()?.to_string();
        let max = h
            .notes
            .iter()
            .filter(|m| m.params["sessionId"] == s.as_str())
            .filter_map(|m| m.params["viewCursor"].as_str())
            .map(|c| cursor_order(c).0)
            .max()?;
        let What::ClientRecv { link, line } = &r.trace.entries[n.idx].what else {
            return None;
        };
        let mut v = json(line)?;
        v["method"] = Value::String("turn/completed".into());
        v["params"]["terminal"] = Value::String("interrupted".into());
        v["params"]["viewCursor"] = Value::String(format!("v:{s}:{}", max + 1));
        let mut entries = r.trace.entries.clone();
        let copy = Entry {
            what: What::ClientRecv {
                link: *link,
                line: line_of(&v, line),
            },
            ..entries[n.idx].clone()
        };
        entries.insert(n.idx + 1, copy);
        Some(retrace(entries))
    });
    let h = History::build(&r.trace);
    assert_clean("turn-lifecycle", &turn_lifecycle::check(&r.trace, &h));
    let v = turn_lifecycle::check(&t, &History::build(&t));
    assert!(
        v.iter().any(|x| x.detail.contains("events clients saw")
            && x.detail.contains("a terminal after turn/unqueued")),
        "{v:#?}"
    );
    assert_caught("turn-lifecycle", &v, &r, &t, &r.clients);
}

/// A turn started twice in a durable log (the lifecycle's own check, apart
/// from exactly-once).
#[test]
fn turn_lifecycle_catches_a_turn_started_twice() {
    let (r, t) = doctored(&[Scenario::Turns, Scenario::Mixed], |r| {
        logged_sessions(&r.trace).into_iter().find_map(|s| {
            let ev = durable_events(&r.trace, &s);
            let (_, m, p, _, cause) = ev.iter().find(|e| e.1 == "turn/started")?;
            with_durable_event(&r.trace, &s, m, p.clone(), cause.clone())
        })
    });
    let h = History::build(&r.trace);
    assert_clean("turn-lifecycle", &turn_lifecycle::check(&r.trace, &h));
    let v = turn_lifecycle::check(&t, &History::build(&t));
    assert!(
        v.iter().any(|x| x.detail.contains("started twice")),
        "{v:#?}"
    );
    assert_caught("turn-lifecycle", &v, &r, &t, &r.clients);
}

// ---------------------------------------------------------------------
// view-cursor-order and cursor-uniqueness
// ---------------------------------------------------------------------

/// Durable notes (trace index, link, session, cursor) in receipt order.
fn durable_notes(h: &History) -> Vec<(usize, u64, String, String)> {
    h.notes
        .iter()
        .filter(|n| n.method != "session/closed")
        .filter_map(|n| {
            let s = n.params["sessionId"].as_str()?;
            let c = n.params["viewCursor"].as_str()?;
            (cursor_order(c).1 == 0).then(|| (n.idx, n.link, s.to_string(), c.to_string()))
        })
        .collect()
}

/// Two durable events delivered on one link in the wrong order: the lines
/// of two consecutive durable events (cursors n, n+1, nothing else on that
/// link between them, an earlier event of that session on the link before
/// them) trade places. The oracle sees a gap at the first (n+1 after
/// n-1) or, on a link exempt from gap checks, a cursor going back at the
/// second; either is `view-cursor-order`.
#[test]
fn view_cursor_order_catches_two_swapped_durable_events() {
    let (r, t) = doctored(&[Scenario::Mixed, Scenario::Turns], |r| {
        let h = History::build(&r.trace);
        let dn = durable_notes(&h);
        let on_link = |link: u64, a: usize, b: usize| {
            r.trace.entries[a + 1..b].iter().any(|e| {
                matches!(&e.what, What::ClientRecv { link: l, .. } | What::NetDrop { link: l, .. } if *l == link)
            })
        };
        for w in 0..dn.len() {
            let (i, link, s, c) = &dn[w];
            let Some(j) = dn[w + 1..]
                .iter()
                .find(|x| x.1 == *link && x.2 == *s)
                .filter(|x| cursor_order(&x.3).0 == cursor_order(c).0 + 1)
                .map(|x| x.0)
            else {
                continue;
            };
            let earlier = dn[..w].iter().any(|x| x.1 == *link && x.2 == *s);
            if !earlier || on_link(*link, *i, j) {
                continue;
            }
            let mut entries = r.trace.entries.clone();
            let a = entries[*i].what.clone();
            entries[*i].what = entries[j].what.clone();
            entries[j].what = a;
            return Some(retrace(entries));
        }
        None
    });
    let h = History::build(&r.trace);
    assert_clean("view-cursor-order", &view_cursor::check(&r.trace, &h));
    let v = view_cursor::check(&t, &History::build(&t));
    assert_caught("view-cursor-order", &v, &r, &t, &r.clients);
}

/// A durable event delivered twice on one link: a copy of a durable
/// event's line right after it (a repeat, not a different event).
#[test]
fn view_cursor_order_catches_a_repeated_durable_event() {
    let (r, t) = doctored(&[Scenario::Mixed, Scenario::Turns], |r| {
        let h = History::build(&r.trace);
        let (i, ..) = durable_notes(&h).into_iter().next()?;
        let mut entries = r.trace.entries.clone();
        entries.insert(i + 1, entries[i].clone());
        Some(retrace(entries))
    });
    let h = History::build(&r.trace);
    assert_clean("view-cursor-order", &view_cursor::check(&r.trace, &h));
    let v = view_cursor::check(&t, &History::build(&t));
    assert!(
        v.iter()
            .any(|x| x.property == "view-cursor-order" && x.detail.contains("repeat")),
        "{v:#?}"
    );
    assert_caught("view-cursor-order", &v, &r, &t, &r.clients);
}

/// One durable cursor naming two different events: a later durable event
/// of a session gets the cursor of an earlier, different one.
#[test]
fn cursor_uniqueness_catches_one_cursor_on_two_events() {
    let (r, t) = doctored(&[Scenario::Mixed, Scenario::Turns], |r| {
        let h = History::build(&r.trace);
        let dn = durable_notes(&h);
        let method = |i: usize| match &r.trace.entries[i].what {
            What::ClientRecv { line, .. } => json(line).map(|v| v["method"].clone()),
            _ => None,
        };
        for (a, (i, _, s, c)) in dn.iter().enumerate() {
            let Some((j, _, _, _)) = dn[a + 1..]
                .iter()
                .find(|x| x.2 == *s && x.3 != *c && method(x.0) != method(*i))
            else {
                continue;
            };
            let What::ClientRecv { link, line } = &r.trace.entries[*j].what else {
                continue;
            };
            let mut v = json(line)?;
            v["params"]["viewCursor"] = Value::String(c.clone());
            let mut entries = r.trace.entries.clone();
            entries[*j].what = What::ClientRecv {
                link: *link,
                line: line_of(&v, line),
            };
            return Some(retrace(entries));
        }
        None
    });
    let h = History::build(&r.trace);
    assert_clean("cursor-uniqueness", &view_cursor::check(&r.trace, &h));
    let v = view_cursor::check(&t, &History::build(&t));
    assert_caught("cursor-uniqueness", &v, &r, &t, &r.clients);
}

// ---------------------------------------------------------------------
// pending-visible
// ---------------------------------------------------------------------

/// `session/read` answers whose snapshot lists pending commands:
/// (trace index of the answer, pending ids the oracle requires listed).
fn reads_with_required_pending(trace: &Trace) -> Vec<(usize, BTreeSet<String>)> {
    let mut disk = IndexedDisk::default();
    let mut expect: BTreeMap<(u64, u64), (String, BTreeSet<String>)> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in trace.entries.iter().enumerate() {
        disk.apply(&e.what);
        match &e.what {
            What::ClientSend { link, line } => {
                let Some(fr) = json(line) else { continue };
                if fr["method"] != "session/read" {
                    continue;
                }
                let s = fr["params"]["sessionId"].as_str().unwrap_or("").to_string();
                let Some(f) = disk.disk.files.get(&s) else {
                    continue;
                };
                let (recv, settled) = disk.ledger(&s, f.durable_len);
                let want = recv.difference(&settled).cloned().collect();
                if let Some(id) = fr["id"].as_u64() {
                    expect.insert((*link, id), (s, want));
                }
            }
            What::ClientRecv { link, line } => {
                let Some(fr) = json(line) else { continue };
                let Some(id) = fr["id"].as_u64() else {
                    continue;
                };
                let Some((s, want)) = expect.remove(&(*link, id)) else {
                    continue;
                };
                let Some(listed) =
                    fr["result"]["history"]["snapshot"]["state"]["pendingCommands"].as_array()
                else {
                    continue;
                };
                let now_settled = disk.ledger(&s, usize::MAX).1;
                let required: BTreeSet<String> = listed
                    .iter()
                    .filter_map(|p| p["commandId"].as_str().map(|c| c.to_ascii_lowercase()))
                    .filter(|c| want.contains(c) && !now_settled.contains(c))
                    .collect();
                out.push((i, required));
            }
            _ => {}
        }
    }
    out
}

/// A snapshot that hides a pending command: one durable, unsettled intake
/// dropped from a `session/read` answer's `pendingCommands`.
#[test]
fn pending_visible_catches_a_pending_command_dropped_from_a_read() {
    let (r, t) = doctored(
        &[Scenario::Turns, Scenario::LeaseHandover, Scenario::Mixed],
        |r| {
            let (i, required) = reads_with_required_pending(&r.trace)
                .into_iter()
                .find(|(_, req)| !req.is_empty())?;
            let drop = required.into_iter().next()?;
            let What::ClientRecv { link, line } = &r.trace.entries[i].what else {
                return None;
            };
            let mut v = json(line)?;
            let pending =
                v["result"]["history"]["snapshot"]["state"]["pendingCommands"].as_array_mut()?;
            pending.retain(|p| {
                p["commandId"]
                    .as_str()
                    .is_none_or(|c| !c.eq_ignore_ascii_case(&drop))
            });
            let mut entries = r.trace.entries.clone();
            entries[i].what = What::ClientRecv {
                link: *link,
                line: line_of(&v, line),
            };
            Some(retrace(entries))
        },
    );
    let h = History::build(&r.trace);
    assert_clean("pending-visible", &pending_visible::check(&r.trace, &h));
    let v = pending_visible::check(&t, &History::build(&t));
    assert!(
        v.iter()
            .any(|x| x.detail.contains("missing from pendingCommands")),
        "{v:#?}"
    );
    assert_caught("pending-visible", &v, &r, &t, &r.clients);
}

/// A snapshot that lists a carrier-less row as pending: a `turn/interrupt`
/// row added to a `session/read` answer's `pendingCommands`.
#[test]
fn pending_visible_catches_a_carrierless_row_listed() {
    let (r, t) = doctored(&[Scenario::Turns, Scenario::LeaseHandover], |r| {
        let (i, _) = reads_with_required_pending(&r.trace).into_iter().next()?;
        let What::ClientRecv { link, line } = &r.trace.entries[i].what else {
            return None;
        };
        let mut v = json(line)?;
        let pending =
            v["result"]["history"]["snapshot"]["state"]["pendingCommands"].as_array_mut()?;
        pending.push(serde_json::json!({
            "commandId": "0198a2c1-0000-7000-8000-000000000000",
            "method": "turn/interrupt",
        }));
        let mut entries = r.trace.entries.clone();
        entries[i].what = What::ClientRecv {
            link: *link,
            line: line_of(&v, line),
        };
        Some(retrace(entries))
    });
    let h = History::build(&r.trace);
    assert_clean("pending-visible", &pending_visible::check(&r.trace, &h));
    let v = pending_visible::check(&t, &History::build(&t));
    assert!(
        v.iter().any(|x| x.detail.contains("carrier-less row")),
        "{v:#?}"
    );
    assert_caught("pending-visible", &v, &r, &t, &r.clients);
}

// ---------------------------------------------------------------------
// liveness
// ---------------------------------------------------------------------

/// A logical command that never got its final answer: one driver's
/// answered command loses its answer, in the client's record (what the
/// oracle reads) and in the trace (every line answering it is removed).
#[test]
fn liveness_catches_a_command_left_without_a_final_answer() {
    let (r, (t, clients)) = doctored(&[Scenario::Mixed, Scenario::Turns], |r| {
        let mut clients = r.clients.clone();
        let c = clients.iter_mut().find(|c| c.role == Role::Driver)?;
        let cmd = c.cmds.iter_mut().find(|m| m.done && !m.lost)?;
        cmd.done = false;
        cmd.answer = None;
        let cid = cmd.cid.clone();
        let h = History::build(&r.trace);
        let answered: BTreeSet<usize> = h
            .answers
            .iter()
            .filter(|a| h.reqs[a.req].cid.as_deref() == Some(cid.as_str()))
            .map(|a| a.idx)
            .collect();
        let entries = r
            .trace
            .entries
            .iter()
            .enumerate()
            .filter(|(i, _)| !answered.contains(i))
            .map(|(_, e)| e.clone())
            .collect();
        Some((retrace(entries), clients))
    });
    assert_clean(
        "liveness",
        &liveness::check(&r.trace, &r.clients, r.config.scenario),
    );
    let v = liveness::check(&t, &clients, r.config.scenario);
    assert!(
        v.iter()
            .any(|x| x.detail.contains("never got a final answer")),
        "{v:#?}"
    );
    assert_caught("liveness", &v, &r, &t, &clients);
}

/// A durable session lost: a driver's note that the host did not find its
/// durable session, in a durable scenario.
#[test]
fn liveness_catches_a_lost_durable_session() {
    let (r, t) = doctored(&[Scenario::Mixed], |r| {
        let mut entries = r.trace.entries.clone();
        let at_ms = entries.last()?.at_ms;
        entries.push(Entry {
            at_ms,
            actor: Actor::Client(0),
            what: What::Note(
                "durable session not found on resume: gives up its commands, starts a new session"
                    .into(),
            ),
        });
        Some(retrace(entries))
    });
    assert_clean(
        "liveness",
        &liveness::check(&r.trace, &r.clients, r.config.scenario),
    );
    let v = liveness::check(&t, &r.clients, r.config.scenario);
    assert_caught("liveness", &v, &r, &t, &r.clients);
}
