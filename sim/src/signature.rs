//! Signatures: the events a saved run must still reach when it is
//! replayed, so that a change in how the simulator reads choices (which
//! silently turns a saved run into another run) is seen as *drift*.
//!
//! A signature is a list of steps, each matched in order against the
//! trace (a subsequence, each step after the one before). Steps:
//!
//! | step | matches |
//! | --- | --- |
//! | `send M` | a client sends a request of method M |
//! | `replay M` | a host receives a command of method M whose id a host received before |
//! | `dup-replay M` | such a replay that is the network's duplicate of a line (the next command received on a link after the network duplicated a line on it) |
//! | `answer M ok` / `answer M R` | a host answers a request of method M with a result / an error of reason R (`data.reason`; without one its `data.kind`, else its message) |
//! | `event M` | a host sends a notification M |
//! | `append R` | a host appends a log record of kind R (`created`, `loaded`, `received`, `settled`, `event`, `closed`, `snapshot`) |
//! | `crash` / `crash at P` | a host crashes (at crash point P) |
//! | `power-loss`, `restart`, `tear`, `truncate`, `fsync-fail`, `disk-full` | as named |
//! | `drop`, `dup`, `reorder`, `cut`, `reconnect`, `lease-denied` | as named |
//! | `shutdown-reading` | a graceful shutdown begins while a read of session files its host asked for is still delayed on the disk (`slow-io`) |
//! | `rot`, `compact` | a byte of a synced record flips (`bitrot`); a host's compaction of a log completes |
//! | `effect P` | a host asks provider P to perform an effect |
//! | `load-unsynced` | a host takes the lease of (loads) a session whose log holds bytes no fsync covered (a killed process left them in the page cache) |
//! | `intake-lost M` | a crash kept a session's log (its `created` record survives) but not the intake (`received`) record of a command of method M |
//! | `abandoned M` | a host appends a `settled` record with outcome `abandoned` for a command of method M (recovery found its intake unsettled) |
//! | `storage-fail-streaming` | an append or fsync of a session fails within [`STREAMING_WINDOW_MS`] of a host sending a notification of that session (view frames of it may be on their way out) |
//!
//! Fault model: none; a signature only reads a trace.

use std::collections::{BTreeMap, BTreeSet};

use msp::core::record::{decode_log, Outcome, Record};
use serde_json::Value;

use crate::trace::{Actor, Entry, Trace, What};

/// One step of a signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A client sends a request of this method.
    Send(String),
    /// A host receives a command of this method whose id it saw before.
    Replay(String),
    /// Such a replay, the network's duplicate of a line.
    DupReplay(String),
    /// A host answers a request of this method: `None` a result, else the
    /// error's reason (or kind, or message).
    Answer(String, Option<String>),
    /// A host sends this notification.
    Event(String),
    /// A host appends a record of this kind.
    Append(String),
    /// A host crashes, at this crash point if given.
    Crash(Option<String>),
    /// A fault or lifecycle event named by one word (`power-loss`,
    /// `restart`, `tear`, ...).
    Word(&'static str),
    /// A host asks this provider to perform an effect.
    Effect(String),
    /// A crash kept a session's log but not the intake record of a
    /// command of this method.
    IntakeLost(String),
    /// A host settles a command of this method `abandoned`.
    Abandoned(String),
}

/// How close (ms) a storage failure must follow a notification of its
/// session to count as `storage-fail-streaming` (the scripted agent
/// streams a delta every 10 ms).
pub const STREAMING_WINDOW_MS: u64 = 20;

const WORDS: [&str; 20] = [
    "load-unsynced",
    "storage-fail-streaming",
    "power-loss",
    "restart",
    "tear",
    "truncate",
    "fsync-fail",
    "disk-full",
    "read-fail",
    "drop",
    "dup",
    "reorder",
    "cut",
    "reconnect",
    "lease-denied",
    "rot",
    "compact",
    "shutdown",
    "shutdown-reading",
    "solo-sync",
];

impl Step {
    /// Parses one step; says what is wrong.
    pub fn parse(text: &str) -> Result<Step, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let arg = |n: usize| -> Result<String, String> {
            if words.len() == n + 1 {
                Ok(words[n].to_string())
            } else {
                Err(format!("signature step {text:?} wants {n} argument(s)"))
            }
        };
        match words.first().copied() {
            Some("send") => Ok(Step::Send(arg(1)?)),
            Some("replay") => Ok(Step::Replay(arg(1)?)),
            Some("dup-replay") => Ok(Step::DupReplay(arg(1)?)),
            Some("event") => Ok(Step::Event(arg(1)?)),
            Some("append") => Ok(Step::Append(arg(1)?)),
            Some("effect") => Ok(Step::Effect(arg(1)?)),
            Some("intake-lost") => Ok(Step::IntakeLost(arg(1)?)),
            Some("abandoned") => Ok(Step::Abandoned(arg(1)?)),
            Some("answer") => {
                let how = arg(2)?;
                Ok(Step::Answer(
                    words[1].to_string(),
                    (how != "ok").then_some(how),
                ))
            }
            Some("crash") if words.len() == 1 => Ok(Step::Crash(None)),
            Some("crash") if words.len() == 3 && words[1] == "at" => {
                Ok(Step::Crash(Some(words[2].to_string())))
            }
            Some(w) if words.len() == 1 => WORDS
                .iter()
                .find(|x| **x == w)
                .map(|x| Step::Word(x))
                .ok_or_else(|| format!("unknown signature step {text:?}")),
            _ => Err(format!("unknown signature step {text:?}")),
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Send(m) => write!(f, "send {m}"),
            Step::Replay(m) => write!(f, "replay {m}"),
            Step::DupReplay(m) => write!(f, "dup-replay {m}"),
            Step::Answer(m, None) => write!(f, "answer {m} ok"),
            Step::Answer(m, Some(r)) => write!(f, "answer {m} {r}"),
            Step::Event(m) => write!(f, "event {m}"),
            Step::Append(r) => write!(f, "append {r}"),
            Step::Crash(None) => write!(f, "crash"),
            Step::Crash(Some(p)) => write!(f, "crash at {p}"),
            Step::Word(w) => write!(f, "{w}"),
            Step::Effect(p) => write!(f, "effect {p}"),
            Step::IntakeLost(m) => write!(f, "intake-lost {m}"),
            Step::Abandoned(m) => write!(f, "abandoned {m}"),
        }
    }
}

/// What each trace entry is, in signature terms (one entry may be several
/// steps: an append of two records).
struct Reader {
    /// (link, rpc id) -> method, of requests hosts received.
    requests: BTreeMap<(u64, String), String>,
    /// Command ids hosts received.
    seen_cids: BTreeSet<String>,
    /// What each session's log holds, as the trace tells it.
    logs: BTreeMap<String, LogState>,
    /// Session -> the last time a host sent a notification of it.
    notified_at_ms: BTreeMap<String, u64>,
    /// Links on which the network duplicated a line not received yet.
    duplicated: BTreeSet<u64>,
    /// Command id (lower case) -> the method of its intake record.
    intake_methods: BTreeMap<String, String>,
    /// (host, incarnation) -> when the last read of session files it
    /// asked for that `slow-io` delayed completes.
    reads_due_ms: BTreeMap<(usize, u64), u64>,
}

/// A session log as the trace tells it: its length, how much of it an
/// fsync covered, and where its records end.
#[derive(Debug, Default)]
struct LogState {
    len_bytes: u64,
    durable_bytes: u64,
    /// (end offset, the method of an intake record, a `created` record).
    records: Vec<(u64, Option<String>, bool)>,
}

impl Reader {
    fn new() -> Reader {
        Reader {
            requests: BTreeMap::new(),
            seen_cids: BTreeSet::new(),
            logs: BTreeMap::new(),
            notified_at_ms: BTreeMap::new(),
            duplicated: BTreeSet::new(),
            intake_methods: BTreeMap::new(),
            reads_due_ms: BTreeMap::new(),
        }
    }

    /// Follows the logs' lengths and records; the steps only they show.
    fn log_steps(&mut self, e: &Entry) -> Vec<Step> {
        match &e.what {
            What::Append { session, bytes, .. } => {
                let log = self.logs.entry(session.clone()).or_default();
                let start = log.len_bytes;
                log.len_bytes += bytes.len() as u64;
                let mut out = Vec::new();
                if let Ok(d) = decode_log(bytes) {
                    for (r, end) in &d.records {
                        let method = match r {
                            Record::Received {
                                command_id, method, ..
                            } => {
                                self.intake_methods
                                    .insert(command_id.to_ascii_lowercase(), method.clone());
                                Some(method.clone())
                            }
                            Record::Settled {
                                command_id,
                                outcome: Outcome::Abandoned,
                            } => {
                                let m = self.intake_methods.get(&command_id.to_ascii_lowercase());
                                out.push(Step::Abandoned(m.cloned().unwrap_or_default()));
                                None
                            }
                            _ => None,
                        };
                        let created = matches!(r, Record::Created { .. });
                        log.records.push((start + end, method, created));
                    }
                }
                out
            }
            What::Synced {
                session,
                upto_bytes,
                ..
            } => {
                let log = self.logs.entry(session.clone()).or_default();
                log.durable_bytes = log.durable_bytes.max(*upto_bytes);
                Vec::new()
            }
            What::Truncate {
                session, len_bytes, ..
            } => {
                self.cut(session, *len_bytes);
                Vec::new()
            }
            What::SyncFailed {
                session,
                kept_bytes,
                ..
            } => {
                let out = self.streaming(session, e.at_ms);
                self.cut(session, *kept_bytes);
                out
            }
            What::AppendFailed { session, .. } => self.streaming(session, e.at_ms),
            What::CrashKeep {
                session,
                kept_bytes,
                ..
            } => {
                let lost = self.cut(session, *kept_bytes);
                let log = &self.logs[session];
                let created_kept = log.records.iter().any(|(_, _, c)| *c);
                if created_kept {
                    lost.into_iter().map(Step::IntakeLost).collect()
                } else {
                    Vec::new()
                }
            }
            What::Compact {
                session, new_bytes, ..
            } => {
                let log = self.logs.entry(session.clone()).or_default();
                log.len_bytes = new_bytes.len() as u64;
                log.durable_bytes = log.len_bytes;
                // A snapshot stands for the created record and every
                // settled intake before it.
                log.records = vec![(log.len_bytes, None, true)];
                Vec::new()
            }
            What::LeaseGrant { session, .. } => match self.logs.get(session) {
                Some(log) if log.len_bytes > log.durable_bytes => {
                    vec![Step::Word("load-unsynced")]
                }
                _ => Vec::new(),
            },
            What::HostSend { line, .. } => {
                if let Ok(v) = serde_json::from_str::<Value>(line) {
                    if v.get("id").is_none() {
                        if let Some(sid) = v["params"]["sessionId"].as_str() {
                            self.notified_at_ms.insert(sid.to_string(), e.at_ms);
                        }
                    }
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// Cuts `session`'s log to `len`: returns the methods of the intake
    /// records it lost.
    fn cut(&mut self, session: &str, len: u64) -> Vec<String> {
        let log = self.logs.entry(session.to_string()).or_default();
        log.len_bytes = log.len_bytes.min(len);
        log.durable_bytes = log.durable_bytes.min(log.len_bytes);
        let keep = log
            .records
            .iter()
            .take_while(|(end, _, _)| *end <= len)
            .count();
        log.records
            .split_off(keep)
            .into_iter()
            .filter_map(|(_, m, _)| m)
            .collect()
    }

    /// `storage-fail-streaming`, if a notification of `session` went out
    /// within the window before `at_ms`.
    fn streaming(&self, session: &str, at_ms: u64) -> Vec<Step> {
        match self.notified_at_ms.get(session) {
            Some(t) if at_ms.saturating_sub(*t) <= STREAMING_WINDOW_MS => {
                vec![Step::Word("storage-fail-streaming")]
            }
            _ => Vec::new(),
        }
    }
}

impl Reader {
    fn steps(&mut self, e: &Entry) -> Vec<Step> {
        let mut out = self.entry_steps(e);
        out.extend(self.log_steps(e));
        out
    }

    fn entry_steps(&mut self, e: &Entry) -> Vec<Step> {
        let json = |line: &str| serde_json::from_str::<Value>(line).ok();
        match &e.what {
            What::ClientSend { line, .. } => json(line)
                .and_then(|v| {
                    (v.get("id").is_some())
                        .then(|| v["method"].as_str().map(|m| Step::Send(m.to_string())))
                        .flatten()
                })
                .into_iter()
                .collect(),
            What::HostRecv { link, line, .. } => {
                let Some(v) = json(line) else {
                    return Vec::new();
                };
                let Some(m) = v["method"].as_str() else {
                    return Vec::new();
                };
                let mut out = Vec::new();
                if let Some(id) = v.get("id") {
                    self.requests.insert((*link, id.to_string()), m.to_string());
                }
                if let Some(cid) = v["params"]["commandId"].as_str() {
                    if !self.seen_cids.insert(cid.to_ascii_lowercase()) {
                        out.push(Step::Replay(m.to_string()));
                        if self.duplicated.remove(link) {
                            out.push(Step::DupReplay(m.to_string()));
                        }
                    }
                }
                out
            }
            What::HostSend { link, line, .. } => {
                let Some(v) = json(line) else {
                    return Vec::new();
                };
                if let Some(m) = v["method"].as_str() {
                    if v.get("id").is_none() {
                        return vec![Step::Event(m.to_string())];
                    }
                    return Vec::new();
                }
                let Some(id) = v.get("id") else {
                    return Vec::new();
                };
                let Some(m) = self.requests.get(&(*link, id.to_string())) else {
                    return Vec::new();
                };
                let how = if v.get("result").is_some() {
                    None
                } else {
                    let e = &v["error"];
                    Some(
                        e["data"]["reason"]
                            .as_str()
                            .or(e["data"]["kind"].as_str())
                            .or(e["message"].as_str())
                            .unwrap_or("error")
                            .to_string(),
                    )
                };
                vec![Step::Answer(m.clone(), how)]
            }
            What::Append { bytes, .. } => decode_log(bytes)
                .map(|d| {
                    d.records
                        .iter()
                        .map(|(r, _)| {
                            Step::Append(
                                match r {
                                    Record::Created { .. } => "created",
                                    Record::Loaded { .. } => "loaded",
                                    Record::Received { .. } => "received",
                                    Record::Settled { .. } => "settled",
                                    Record::Event { .. } => "event",
                                    Record::Closed { .. } => "closed",
                                    Record::Snapshot(_) => "snapshot",
                                }
                                .to_string(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
            What::HostCrash { point, .. } => vec![Step::Crash(point.map(str::to_string))],
            What::PowerLoss => vec![Step::Word("power-loss")],
            What::HostShutdown { inc } => {
                let reading = match e.actor {
                    Actor::Host(h) => self
                        .reads_due_ms
                        .get(&(h, *inc))
                        .is_some_and(|due| *due > e.at_ms),
                    _ => false,
                };
                let mut out = vec![Step::Word("shutdown")];
                if reading {
                    out.push(Step::Word("shutdown-reading"));
                }
                out
            }
            What::IoDelayed { inc, what, ms, .. } if *what != "open" => {
                if let Actor::Host(h) = e.actor {
                    let due = self.reads_due_ms.entry((h, *inc)).or_default();
                    *due = (*due).max(e.at_ms + ms);
                }
                Vec::new()
            }
            What::HostStart {
                inc, solo_syncs, ..
            } => {
                // A restart, and (apart) a start without group commit.
                let restart = (*inc > 1).then_some(Step::Word("restart"));
                let solo = solo_syncs.then_some(Step::Word("solo-sync"));
                restart.into_iter().chain(solo).collect()
            }
            What::CrashKeep { torn: true, .. } => vec![Step::Word("tear")],
            What::Truncate { .. } => vec![Step::Word("truncate")],
            What::SyncFailed { .. } => vec![Step::Word("fsync-fail")],
            What::AppendFailed { .. } => vec![Step::Word("disk-full")],
            What::ReadFailed { .. } => vec![Step::Word("read-fail")],
            What::NetDrop { .. } => vec![Step::Word("drop")],
            What::NetDup { link } => {
                self.duplicated.insert(*link);
                vec![Step::Word("dup")]
            }
            What::NetReorder { .. } => vec![Step::Word("reorder")],
            What::LinkClosed { why: "cut", .. } => vec![Step::Word("cut")],
            What::Note(n) if n.starts_with("reconnect:") => vec![Step::Word("reconnect")],
            What::LeaseDenied { .. } => vec![Step::Word("lease-denied")],
            What::BitRot { .. } => vec![Step::Word("rot")],
            What::Compact { .. } => vec![Step::Word("compact")],
            What::Effect {
                provider,
                perform: true,
                ..
            } => vec![Step::Effect(provider.clone())],
            _ => Vec::new(),
        }
    }
}

/// Whether `found` satisfies `want` (`crash` matches a crash anywhere).
fn satisfies(want: &Step, found: &Step) -> bool {
    match (want, found) {
        (Step::Crash(None), Step::Crash(_)) => true,
        _ => want == found,
    }
}

/// Matches `signature` against `trace` in order. `Ok` with the entry
/// index of each step, or `Err` with the first step not reached (and the
/// entry after which it was looked for).
pub fn reach(trace: &Trace, signature: &[Step]) -> Result<Vec<usize>, (usize, Option<usize>)> {
    let mut r = Reader::new();
    let mut at = Vec::new();
    let mut k = 0;
    for (i, e) in trace.entries.iter().enumerate() {
        if k == signature.len() {
            break;
        }
        for s in r.steps(e) {
            if k < signature.len() && satisfies(&signature[k], &s) {
                at.push(i);
                k += 1;
            }
        }
    }
    if k == signature.len() {
        Ok(at)
    } else {
        Err((k, at.last().copied()))
    }
}

/// A signature for a shrunk run, derived from its trace: every fault,
/// crash (with its point), power loss and restart in order, each
/// preceded by the request sent last before it, and the first replay of
/// a command after the last of them. A run without any fault or crash
/// (a planted bug that needs none) gets the commands its clients sent
/// and the replays hosts received, in order (at most
/// [`DERIVED_STEPS_MAX`]).
pub fn derive(trace: &Trace) -> Vec<Step> {
    let mut r = Reader::new();
    let mut out: Vec<Step> = Vec::new();
    let mut plain: Vec<Step> = Vec::new();
    let mut last_send: Option<Step> = None;
    let mut replay: Option<Step> = None;
    for e in &trace.entries {
        let command = match &e.what {
            What::ClientSend { line, .. } => serde_json::from_str::<Value>(line)
                .is_ok_and(|v| v["params"]["commandId"].is_string()),
            _ => false,
        };
        for s in r.steps(e) {
            match &s {
                Step::Send(_) => {
                    if command {
                        plain.push(s.clone());
                    }
                    last_send = Some(s);
                }
                Step::Crash(_) | Step::Word(_) => {
                    if let Some(send) = last_send.take() {
                        out.push(send);
                    }
                    out.push(s);
                    replay = None;
                }
                Step::Replay(_) => {
                    plain.push(s.clone());
                    if replay.is_none() && !out.is_empty() {
                        replay = Some(s);
                    }
                }
                _ => {}
            }
        }
    }
    if out.is_empty() {
        plain.truncate(DERIVED_STEPS_MAX);
        return plain;
    }
    out.extend(replay);
    out
}

/// The most steps [`derive()`] gives a run without faults.
pub const DERIVED_STEPS_MAX: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_parse_and_print_back() {
        for s in [
            "send turn/start",
            "replay turn/start",
            "dup-replay session/resume",
            "answer session/start ok",
            "answer session/start session_id_conflict",
            "event item/delta",
            "append received",
            "crash",
            "crash at after-intake-before-ack",
            "power-loss",
            "restart",
            "effect keyed",
            "intake-lost session/start",
            "abandoned turn/unqueue",
            "load-unsynced",
            "storage-fail-streaming",
        ] {
            assert_eq!(Step::parse(s).unwrap().to_string(), s);
        }
        // Every word a trace entry turns into parses back (a shrunk run
        // with a read fault could not be saved before "read-fail" was
        // listed).
        for what in [
            What::ReadFailed {
                inc: 1,
                session: "s".into(),
            },
            What::AppendFailed {
                inc: 1,
                session: "s".into(),
            },
            What::LeaseDenied {
                inc: 1,
                session: "s".into(),
            },
            What::NetReorder { link: 1 },
            What::HostStart {
                inc: 1,
                durable: true,
                solo_syncs: true,
            },
        ] {
            let mut t = Trace::new();
            t.push(1, Actor::Host(0), what);
            let steps = derive(&t);
            assert_eq!(steps.len(), 1, "{steps:?}");
            let text = steps[0].to_string();
            assert_eq!(Step::parse(&text).map(|s| s.to_string()), Ok(text));
        }
        assert!(Step::parse("explode").is_err());
        assert!(Step::parse("send").is_err());
        assert!(Step::parse("crash near x").is_err());
    }

    #[test]
    fn a_signature_matches_in_order_or_says_where_it_stopped() {
        let mut t = Trace::new();
        let req = |id: u64| {
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"turn/start\",\"params\":{{\"commandId\":\"c\"}}}}")
        };
        t.push(
            0,
            Actor::Host(0),
            What::HostRecv {
                inc: 1,
                link: 1,
                line: req(1),
            },
        );
        t.push(
            1,
            Actor::Host(0),
            What::HostCrash {
                inc: 1,
                point: Some("after-intake-before-ack"),
            },
        );
        t.push(
            2,
            Actor::Host(0),
            What::HostStart {
                inc: 2,
                durable: true,
                solo_syncs: false,
            },
        );
        t.push(
            3,
            Actor::Host(0),
            What::HostRecv {
                inc: 2,
                link: 2,
                line: req(1),
            },
        );
        t.push(
            4,
            Actor::Host(0),
            What::HostSend {
                inc: 2,
                link: 2,
                line: "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}".into(),
            },
        );
        let sig: Vec<Step> = [
            "crash at after-intake-before-ack",
            "restart",
            "replay turn/start",
            "answer turn/start ok",
        ]
        .iter()
        .map(|s| Step::parse(s).unwrap())
        .collect();
        assert_eq!(reach(&t, &sig), Ok(vec![1, 2, 3, 4]));
        let wrong: Vec<Step> = ["restart", "crash"]
            .iter()
            .map(|s| Step::parse(s).unwrap())
            .collect();
        assert_eq!(reach(&t, &wrong), Err((1, Some(2))));
        assert_eq!(
            derive(&t),
            vec![
                Step::Crash(Some("after-intake-before-ack".into())),
                Step::Word("restart"),
                Step::Replay("turn/start".into())
            ]
        );
    }

    #[test]
    fn an_abandoned_settlement_names_its_intakes_method() {
        let frame = |r: Record| r.encode();
        let received = Record::Received {
            command_id: "C1".into(),
            method: "turn/unqueue".into(),
            params: serde_json::json!({"sessionId": "s", "turnId": "t"}),
            signature: "sig".into(),
            answer: msp::core::record::StoredAnswer::new_result(&serde_json::json!({})),
            at_ms: 0,
        };
        let settled = |outcome| Record::Settled {
            command_id: "c1".into(),
            outcome,
        };
        let mut t = Trace::new();
        let append = |bytes: Vec<u8>| What::Append {
            inc: 1,
            session: "s".into(),
            bytes,
        };
        t.push(0, Actor::Host(0), append(frame(received)));
        t.push(1, Actor::Host(0), append(frame(settled(Outcome::Applied))));
        let sig = vec![Step::parse("abandoned turn/unqueue").unwrap()];
        assert_eq!(reach(&t, &sig), Err((0, None)));
        t.push(
            2,
            Actor::Host(0),
            append(frame(settled(Outcome::Abandoned))),
        );
        assert_eq!(reach(&t, &sig), Ok(vec![2]));
    }

    #[test]
    fn a_shutdown_reads_as_reading_only_while_its_hosts_delayed_read_is_due() {
        let delayed = |inc, what, ms| What::IoDelayed {
            inc,
            session: "s".into(),
            what,
            ms,
        };
        let words =
            |t: &Trace| -> Vec<String> { derive(t).iter().map(|s| s.to_string()).collect() };
        // Host 0's archive read is due at 40; its shutdown at 30 is early.
        let mut t = Trace::new();
        t.push(10, Actor::Host(0), delayed(1, "archive read", 30));
        t.push(30, Actor::Host(0), What::HostShutdown { inc: 1 });
        assert_eq!(words(&t), ["shutdown", "shutdown-reading"]);
        // The same read done by then, another host's, another
        // incarnation's, or an open: a plain shutdown.
        for (at, actor, inc, what) in [
            (40, Actor::Host(0), 1, "read"),
            (30, Actor::Host(1), 1, "read"),
            (30, Actor::Host(0), 2, "read"),
            (30, Actor::Host(0), 1, "open"),
        ] {
            let mut t = Trace::new();
            t.push(10, Actor::Host(0), delayed(1, what, 30));
            t.push(at, actor, What::HostShutdown { inc });
            assert_eq!(words(&t), ["shutdown"], "{at} {actor:?} {inc} {what}");
        }
        assert_eq!(
            Step::parse("shutdown-reading").unwrap(),
            Step::Word("shutdown-reading")
        );
    }

    #[test]
    fn an_error_answer_reads_as_its_reason_else_its_kind() {
        let mut t = Trace::new();
        let recv = |id: u64| {
            What::HostRecv {
            inc: 1,
            link: 1,
            line: format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"session/resume\",\"params\":{{\"commandId\":\"c{id}\"}}}}"),
        }
        };
        let send = |line: &str| What::HostSend {
            inc: 1,
            link: 1,
            line: line.into(),
        };
        t.push(0, Actor::Host(0), recv(1));
        t.push(1, Actor::Host(0), send(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m","data":{"kind":"internal","reason":"storageUnavailable"}}}"#));
        t.push(2, Actor::Host(0), recv(2));
        t.push(3, Actor::Host(0), send(r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32001,"message":"overloaded: the host is shutting down","data":{"kind":"overloaded"}}}"#));
        let sig: Vec<Step> = [
            "answer session/resume storageUnavailable",
            "answer session/resume overloaded",
        ]
        .iter()
        .map(|s| Step::parse(s).unwrap())
        .collect();
        assert_eq!(reach(&t, &sig), Ok(vec![1, 3]));
    }
}
