//! The trace, indexed for the oracles: links, requests and their answers,
//! notifications, and a model of the disk rebuilt from the write trace.

use std::collections::{BTreeMap, BTreeSet};

use msp::core::record::Record;
use serde_json::Value;

use crate::trace::{Trace, What};

/// Commands whose ledger row is durable.
pub const DURABLE_METHODS: [&str; 7] = [
    "session/start",
    "session/resume",
    "turn/start",
    "turn/steer",
    "turn/unqueue",
    "approval/decide",
    "state/update",
];

/// Carrier-less rows: host-lifetime dedupe only.
pub const CARRIERLESS_METHODS: [&str; 4] =
    ["turn/interrupt", "turn/cancel", "task/stop", "task/stopAll"];

/// One session log as the disk holds it, rebuilt from the trace.
#[derive(Debug, Clone, Default)]
pub struct FileModel {
    /// All bytes.
    pub bytes: Vec<u8>,
    /// The durable prefix.
    pub durable_len: usize,
}

/// The disk, rebuilt event by event from the trace (the same rules as
/// [`crate::disk`]).
#[derive(Debug, Clone, Default)]
pub struct DiskModel {
    /// Files by session.
    pub files: BTreeMap<String, FileModel>,
}

impl DiskModel {
    /// Applies one trace event; returns the session it touched.
    pub fn apply(&mut self, what: &What) -> Option<String> {
        match what {
            What::Append { session, bytes, .. } => {
                self.files
                    .entry(session.clone())
                    .or_default()
                    .bytes
                    .extend_from_slice(bytes);
                Some(session.clone())
            }
            What::Truncate {
                session, len_bytes, ..
            } => {
                let f = self.files.entry(session.clone()).or_default();
                f.bytes.truncate(*len_bytes as usize);
                f.durable_len = f.bytes.len();
                Some(session.clone())
            }
            What::Synced {
                session,
                upto_bytes,
                ..
            } => {
                let f = self.files.entry(session.clone()).or_default();
                f.durable_len = f.durable_len.max((*upto_bytes as usize).min(f.bytes.len()));
                Some(session.clone())
            }
            What::SyncFailed {
                session,
                kept_bytes,
                ..
            } => {
                let f = self.files.entry(session.clone()).or_default();
                f.bytes.truncate(*kept_bytes as usize);
                f.durable_len = f.durable_len.min(f.bytes.len());
                Some(session.clone())
            }
            What::CrashKeep {
                session,
                kept_bytes,
                ..
            } => {
                let f = self.files.entry(session.clone()).or_default();
                f.bytes.truncate(*kept_bytes as usize);
                f.durable_len = f.bytes.len();
                Some(session.clone())
            }
            _ => None,
        }
    }
}

/// What an indexed record says about the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// A `received` record of this (lowercase) command id.
    Received(String),
    /// A `settled` record of this (lowercase) command id.
    Settled(String),
    /// Anything else.
    Other,
}

/// The disk model plus, per file, an index of its complete records by end
/// offset, maintained incrementally (each record is decoded once).
#[derive(Debug, Clone, Default)]
pub struct IndexedDisk {
    /// The files.
    pub disk: DiskModel,
    /// Per session: (end offset, mark), in file order.
    pub index: BTreeMap<String, Vec<(usize, Mark)>>,
}

impl IndexedDisk {
    /// Applies one trace event and refreshes the touched file's index.
    pub fn apply(&mut self, what: &What) -> Option<String> {
        let s = self.disk.apply(what)?;
        let f = &self.disk.files[&s];
        let idx = self.index.entry(s.clone()).or_default();
        while idx.last().is_some_and(|(end, _)| *end > f.bytes.len()) {
            idx.pop();
        }
        let from = idx.last().map_or(0, |(end, _)| *end);
        let scan = msp::log::scan(&f.bytes[from..]);
        for fr in &scan.frames {
            let end = from + fr.end_offset() as usize;
            let mark = match Record::decode(fr.record_type, fr.payload) {
                Some(Record::Received { command_id, .. }) => {
                    Mark::Received(command_id.to_ascii_lowercase())
                }
                Some(Record::Settled { command_id, .. }) => {
                    Mark::Settled(command_id.to_ascii_lowercase())
                }
                _ => Mark::Other,
            };
            idx.push((end, mark));
        }
        Some(s)
    }

    /// Received and settled ids among records ending at or before `upto`.
    pub fn ledger(&self, session: &str, upto: usize) -> (BTreeSet<String>, BTreeSet<String>) {
        let mut r = BTreeSet::new();
        let mut st = BTreeSet::new();
        for (end, m) in self.index.get(session).map(Vec::as_slice).unwrap_or(&[]) {
            if *end > upto {
                break;
            }
            match m {
                Mark::Received(c) => {
                    r.insert(c.clone());
                }
                Mark::Settled(c) => {
                    st.insert(c.clone());
                }
                Mark::Other => {}
            }
        }
        (r, st)
    }
}

/// Decodes the valid frames of a log prefix (stops at the first bad one).
pub fn records(bytes: &[u8]) -> Vec<Record> {
    msp::log::scan(bytes)
        .frames
        .iter()
        .filter_map(|f| Record::decode(f.record_type, f.payload))
        .collect()
}

/// A request a client sent.
#[derive(Debug, Clone)]
pub struct Req {
    /// Trace index of the send.
    pub idx: usize,
    /// The link.
    pub link: u64,
    /// The method.
    pub method: String,
    /// The params.
    pub params: Value,
    /// Its `commandId`, if any.
    pub cid: Option<String>,
    /// Method plus params without `commandId`: what payload identity
    /// compares.
    pub payload: Value,
}

/// An answer a client received.
#[derive(Debug, Clone)]
pub struct Ans {
    /// Trace index of the receipt.
    pub idx: usize,
    /// The request it answers (index into `History::reqs`).
    pub req: usize,
    /// `{"result": ..}` or `{"error": ..}`.
    pub value: Value,
    /// The answering host and incarnation.
    pub host: (usize, u64),
}

impl Ans {
    /// The `commandRejected` reason, if this is one.
    pub fn reason(&self) -> Option<&str> {
        (self.value["error"]["code"] == -32030)
            .then(|| self.value["error"]["data"]["reason"].as_str())
            .flatten()
    }
    /// A `result`.
    pub fn is_result(&self) -> bool {
        self.value.get("result").is_some()
    }
}

/// A notification a client received.
#[derive(Debug, Clone)]
pub struct Note {
    /// Trace index.
    pub idx: usize,
    /// The link.
    pub link: u64,
    /// The method.
    pub method: String,
    /// The params.
    pub params: Value,
}

/// Durable events of one session keyed by cursor order.
type EventsByCursor = BTreeMap<(u64, u64), (String, Value)>;

/// The indexed trace.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// link -> (client, host, incarnation).
    pub links: BTreeMap<u64, (usize, usize, u64)>,
    /// Durable incarnations: (host, inc).
    pub durable_incs: BTreeSet<(usize, u64)>,
    /// Requests in send order.
    pub reqs: Vec<Req>,
    /// (link, rpc id) -> request index.
    pub req_by_key: BTreeMap<(u64, u64), usize>,
    /// Answers in receipt order.
    pub answers: Vec<Ans>,
    /// Notifications in receipt order.
    pub notes: Vec<Note>,
    /// Trace indices of host crashes.
    pub crashes: Vec<usize>,
    /// The disk at the end of the run.
    pub final_disk: DiskModel,
    /// Sessions whose last holder died and that no host loaded since
    /// (recovery has not run, so pending intakes may remain).
    pub unrecovered: BTreeSet<String>,
    /// Any host was durable.
    pub durable: bool,
}

impl History {
    /// Indexes a trace.
    pub fn build(trace: &Trace) -> History {
        let mut h = History::default();
        let mut holder: BTreeMap<String, usize> = BTreeMap::new();
        for (i, e) in trace.entries.iter().enumerate() {
            h.final_disk.apply(&e.what);
            match &e.what {
                What::HostStart { inc, durable } => {
                    if let crate::trace::Actor::Host(n) = e.actor {
                        if *durable {
                            h.durable_incs.insert((n, *inc));
                            h.durable = true;
                        }
                    }
                }
                What::Connect { link, host, inc } => {
                    if let crate::trace::Actor::Client(c) = e.actor {
                        h.links.insert(*link, (c, *host, *inc));
                    }
                }
                What::HostCrash { .. } => {
                    h.crashes.push(i);
                    if let crate::trace::Actor::Host(n) = e.actor {
                        for (s, hh) in &holder {
                            if *hh == n {
                                h.unrecovered.insert(s.clone());
                            }
                        }
                        holder.retain(|_, hh| *hh != n);
                    }
                }
                What::LeaseGrant { session, .. } => {
                    if let crate::trace::Actor::Host(n) = e.actor {
                        holder.insert(session.clone(), n);
                    }
                    h.unrecovered.remove(session);
                }
                What::LeaseRelease { session, .. } => {
                    holder.remove(session);
                }
                What::SyncFailed { session, .. } | What::AppendFailed { session, .. } => {
                    // The host drops the session from memory; recovery runs
                    // at the next load, as after a crash.
                    h.unrecovered.insert(session.clone());
                }
                What::ClientSend { link, line } => {
                    let Ok(v) = serde_json::from_str::<Value>(line) else {
                        continue;
                    };
                    let (Some(id), Some(method)) = (v["id"].as_u64(), v["method"].as_str()) else {
                        continue;
                    };
                    let params = v["params"].clone();
                    let cid = params["commandId"].as_str().map(str::to_string);
                    let mut p = params.clone();
                    if let Some(o) = p.as_object_mut() {
                        o.remove("commandId");
                    }
                    let payload = serde_json::json!({"method": method, "params": p});
                    h.req_by_key.insert((*link, id), h.reqs.len());
                    h.reqs.push(Req {
                        idx: i,
                        link: *link,
                        method: method.to_string(),
                        params,
                        cid,
                        payload,
                    });
                }
                What::ClientRecv { link, line } => {
                    let Ok(v) = serde_json::from_str::<Value>(line) else {
                        continue;
                    };
                    if let Some(m) = v["method"].as_str() {
                        if v.get("id").is_some() {
                            continue; // a server request, not a view event
                        }
                        h.notes.push(Note {
                            idx: i,
                            link: *link,
                            method: m.to_string(),
                            params: v["params"].clone(),
                        });
                        continue;
                    }
                    let Some(id) = v["id"].as_u64() else { continue };
                    let Some(&req) = h.req_by_key.get(&(*link, id)) else {
                        continue;
                    };
                    let value = match v.get("result") {
                        Some(r) => serde_json::json!({"result": r}),
                        None => serde_json::json!({"error": v["error"]}),
                    };
                    let (_, host, inc) = h.links.get(link).copied().unwrap_or((0, 0, 0));
                    h.answers.push(Ans {
                        idx: i,
                        req,
                        value,
                        host: (host, inc),
                    });
                }
                _ => {}
            }
        }
        h
    }

    /// Durable events of a session's final log: (method, params, cause).
    pub fn final_events(&self, session: &str) -> Vec<(String, Value, Option<String>)> {
        let Some(f) = self.final_disk.files.get(session) else {
            return Vec::new();
        };
        records(&f.bytes)
            .into_iter()
            .filter_map(|r| match r {
                Record::Event {
                    method,
                    params,
                    cause,
                    ..
                } => Some((method, params, cause)),
                _ => None,
            })
            .collect()
    }

    /// Durable events clients saw, per session, one per cursor, in cursor
    /// order.
    pub fn observed_events(&self) -> BTreeMap<String, Vec<(String, Value)>> {
        let mut by: BTreeMap<String, EventsByCursor> = BTreeMap::new();
        for n in &self.notes {
            let (Some(s), Some(c)) = (
                n.params["sessionId"].as_str(),
                n.params["viewCursor"].as_str(),
            ) else {
                continue;
            };
            if c.contains('.') || n.method == "session/closed" {
                continue;
            }
            by.entry(s.to_string())
                .or_default()
                .entry(msp::core::session::cursor_order(c))
                .or_insert((n.method.clone(), n.params.clone()));
        }
        by.into_iter()
            .map(|(s, m)| (s, m.into_values().collect()))
            .collect()
    }

    /// Whether a host crash happened between two trace indices.
    pub fn crash_between(&self, a: usize, b: usize) -> bool {
        self.crashes.iter().any(|c| *c > a && *c < b)
    }
}
