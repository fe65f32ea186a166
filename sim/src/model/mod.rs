//! The reference model: an executable specification of the MSP command
//! plane (PROTOCOL.md sections 3-5), written from the spec and not from
//! `src/core` (it reads the wire through its own parser and the session
//! log through its own frame reader). It consumes the observable history
//! of a run, one trace entry at a time:
//!
//! - every line each client sent and every line each host received and
//!   sent, on every link, delivered or not;
//! - what each host appended, truncated and synced, what a crash kept;
//! - every provider call and its answer; crashes, power losses, restarts.
//!
//! and decides whether that history is allowed. On a durable host the
//! session log is the host's claim of what it decided, in order: every
//! record is judged against the model's own state when it becomes durable
//! (an intake's answer against the admission rules of PROTOCOL.md 4.1-4.3
//! in the state just before it, an event against the turn, approval and
//! revision rules, a settlement against 4.4). What the host sends is then
//! judged against what is durable. On an ephemeral host, the events and
//! answers it sends are the claims.
//!
//! Sections, one per part of the spec:
//! - [`wire`]: frames and the payload signature (4.4);
//! - [`logfile`]: the log's frames (storage, torn tails);
//! - [`session`]: a session's state and the rules of 4.3 and 4.4;
//! - [`agent`]: the scripted agent (section 5);
//! - this module: links, answers and replays (3, 4.4), views and cursors
//!   (4.2, 4.5), leases (4.1), effects (4.4, 5).
//!
//! Failures name the promise they break ([`crate::oracle::PROPERTIES`]).

pub mod agent;
pub mod bad_input;
pub mod errors;
pub mod logfile;
pub mod page;
pub mod report;
pub mod session;
pub mod wire;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::client::REQUEST_TIMEOUT_MS;
use crate::faults::LATE_TIMER_MAX_MS;
use crate::run::{SHUTDOWN_GRACE_MS, START_MS};
use crate::trace::{Actor, Entry, Trace, What};
use crate::workload::Scenario;
use logfile::{LogFile, Shape};
pub use report::Report;
use session::{Expected, Intake, Origin, Sess, Settle, TaskSt, TurnSt};
use wire::Frame;

/// (host, incarnation, session, command id key).
type EphKey = (usize, u64, String, String);

/// A host process slot.
#[derive(Debug, Clone, Default)]
struct HostSt {
    inc: u64,
    alive: bool,
    durable: bool,
}

/// A request a host received on a link, until answered.
#[derive(Debug, Clone, Default)]
struct Req {
    method: String,
    params: Value,
    cid: Option<String>,
    sid: Option<String>,
    sig: Option<String>,
    /// Trace index of the host's receipt.
    recv_at: usize,
    /// Host-clock time of the host's receipt.
    recv_ms: u64,
    /// The session's durable head in the model at the host's receipt (a
    /// `view/page` must reach at least this far).
    floor: u64,
    /// Each distinct decision the spec allowed since receipt.
    window: Vec<Expected>,
    /// Lease holders of the session seen since receipt.
    holders: BTreeSet<Option<(usize, u64)>>,
    /// The session existed on disk at some point since receipt.
    existed: bool,
    /// It existed (durably created) already when the request arrived.
    existed_at_recv: bool,
    /// The intake of its command was settled rejected/abandoned (durably)
    /// already when it arrived.
    terminal_at_recv: bool,
    /// A storage failure of its session happened since receipt.
    storage_failed: bool,
    /// One happened while its command's intake was not yet durable in
    /// the failing host's load of the session: only then may the command
    /// be refused `storageUnavailable` ("nothing was acked or applied",
    /// PROTOCOL.md 3). Requests without a command id count any failure.
    failed_before_intake_durable: bool,
    /// The failure was a read of the session's files (an open or a read
    /// without the lease), for counting.
    read_failed: bool,
    /// For `approval/listPending`: the session's durable approvals when it
    /// arrived, each with whether it was pending.
    approvals_at_recv: Option<BTreeMap<String, bool>>,
    /// How far the host had read the link's handshake when it read this
    /// request (as [`LinkSt::handshake`]; 2: `initialize`, then the
    /// `initialized` notification, so it may not be refused
    /// `notInitialized`, PROTOCOL.md 2); `None` for a link the model never
    /// saw open.
    handshake_at_recv: Option<u8>,
    /// It arrived at the host that kept its session in memory when the
    /// log rotted: the session's load count then. That host may answer it
    /// from memory, even after it dropped the session (a queued replay of
    /// a durable record), as long as it did not load the session again.
    rot_memory_loads: Option<u64>,
    /// A line refused before it is read as a request: the refusal it
    /// must get ([`bad_input`]); nothing else about it is judged.
    refusal: Option<bad_input::Refusal>,
}

impl Req {
    /// Host `h`'s incarnation `inc` held the session's lease throughout:
    /// it answered from its memory, where only what it synced is durable.
    fn held_throughout_by(&self, h: usize, inc: u64) -> bool {
        self.holders.len() == 1 && self.holders.contains(&Some((h, inc)))
    }

    /// A `notInitialized` refusal, right only before the link's handshake
    /// was read (PROTOCOL.md 2).
    fn refused_before_handshake(&self, e: &Value) -> bool {
        self.handshake_at_recv != Some(2) && e["data"]["kind"] == "notInitialized"
    }
}

/// A link's view of one session.
#[derive(Debug, Clone, Default)]
struct Sub {
    active: bool,
    /// The next durable ordinal may be any of `lo..=hi`.
    lo: u64,
    hi: u64,
    /// The last durable ordinal sent on this link (never repeated).
    last: u64,
    /// The last cursor (n, k) sent on this link, ephemeral ones included.
    last_nk: (u64, u64),
    /// What this subscription carried of agent messages (PROTOCOL.md 5);
    /// a new subscription starts it again.
    stream: MsgStream,
    /// The head a `view/subscribe` answered: the events up to it are sent
    /// with the answer, so the link's next response comes after them.
    due: Option<u64>,
    /// That head, when the answering host did not hold the session: its
    /// backlog was read from the log file, not from a holder's memory.
    from_file: Option<u64>,
}

impl Sub {
    /// The view ends (unsubscribed, closed, dropped): what it streamed is
    /// forgotten with it.
    fn end(&mut self) {
        self.active = false;
        self.stream = MsgStream::default();
        self.due = None;
        self.from_file = None;
    }
}

/// One subscription's share of the ephemeral stream: enough to judge an
/// agent message's deltas against its durable completion.
#[derive(Debug, Clone, Default)]
struct MsgStream {
    /// The lowest durable ordinal `n` of an ephemeral cursor `n.k` this
    /// subscription carried: it was subscribed when that frame went out,
    /// so it was for everything emitted after it.
    live_since: Option<u64>,
    /// It began with the answer of the start that created the session.
    from_creation: bool,
    /// `turn/started` ordinals it carried, by turn.
    turns: BTreeMap<String, u64>,
    /// Agent messages it saw open (`item/started`), by item: their turn
    /// and their deltas so far.
    open: BTreeMap<String, (String, String)>,
}

/// A link between a client and a host incarnation.
#[derive(Debug, Clone, Default)]
struct LinkSt {
    host: usize,
    inc: u64,
    /// The link closed: what the host still owes on it never arrives.
    closed: bool,
    /// The requests pending, by id and arrival. The network may duplicate
    /// a request line: both copies arrive with one id, and the host answers
    /// each, in the order it read them (a connection's lines are handled
    /// and answered in order), so an answer is the earliest pending copy's.
    reqs: BTreeMap<(String, u64), Req>,
    /// Requests read on this link so far (the second half of `reqs`' keys).
    arrivals: u64,
    /// How far the host read the handshake on this link: 0 nothing, 1 an
    /// `initialize`, 2 then `initialized` (a link's lines are handled in
    /// order, so every request read after that finds it ready).
    handshake: u8,
    /// Trace index at which the host read this link's `initialized`: from
    /// then on it is an initialized connection, owed every later
    /// `session/started` broadcast (PROTOCOL.md 4.1).
    ready_at: Option<usize>,
    subs: BTreeMap<String, Sub>,
    /// The id of the last server request sent on this link (0: none).
    last_server_id: u64,
    /// Per session resumed on this link whose resume owed any: the
    /// approvals still owed an `approval/request` before the link's next
    /// answer.
    reissues_owed: BTreeMap<String, BTreeSet<String>>,
}

impl LinkSt {
    /// The key of the earliest pending request with JSON-RPC id `id`.
    fn first_req(&self, id: &str) -> Option<(String, u64)> {
        let id = id.to_string();
        self.reqs
            .range((id.clone(), 0)..=(id, u64::MAX))
            .next()
            .map(|(k, _)| k.clone())
    }
}

/// A session its holder must unload: idle since `since_ms`, nothing
/// since.
#[derive(Debug, Clone)]
struct IdleWatch {
    holder: (usize, u64),
    since_ms: u64,
    /// When the subscribed link whose end began this idle spell left; `None`
    /// when the watch began otherwise (an unsubscribe of a link that was
    /// not subscribed restarts `since_ms`, not the host's idle timer, which
    /// may have started at a moment the model did not watch).
    first_since_ms: Option<u64>,
    /// By when its holder must have written to its log (its `closed`
    /// record): idle-unload-ms after `since_ms`, and the slack
    /// ([`IDLE_SLACK_MS`], more under `late-timer`).
    due_ms: u64,
}

/// How late after its idle deadline an unload may be written: the host's
/// timer fires at the deadline, but what made the session idle (a link's
/// close, an unsubscribe) reaches the host a network delay after the
/// model sees it, and a stalled disk may hold the write.
const IDLE_SLACK_MS: u64 = 100;

/// What the holder of a session at its damage (bit rot) had in memory.
#[derive(Debug)]
struct RotMemory {
    /// The holder's incarnation.
    holder: (usize, u64),
    /// The last event ordinal it had: durable at the damage, or written
    /// by it (before or after the damage) since.
    head: u64,
    /// The commands (`wire::key`) whose intake it wrote but the model
    /// never read (not durable at the damage, or written after it): their
    /// answers were decided from its memory, not from the damaged log.
    intakes: BTreeSet<String>,
}

impl RotMemory {
    /// Takes in the event ordinals and intakes of `bytes`, whole frames
    /// from its start (appends), read with the model's own frame reader.
    fn remember(&mut self, bytes: &[u8]) {
        let mut at = 0;
        while let logfile::Check::Valid { end, rtype } = logfile::check(bytes, at) {
            let payload = &bytes[at + logfile::HEADER_BYTES..end];
            at = end;
            // An event record's ordinal `n` and an intake's `commandId`,
            // as the model reads the records it consumes.
            if rtype != 5 && rtype != 3 {
                continue;
            }
            let Ok(v) = serde_json::from_slice::<Value>(payload) else {
                continue;
            };
            if let Some(n) = v["n"].as_u64().filter(|_| rtype == 5) {
                self.head = self.head.max(n);
            }
            if let Some(cid) = v["commandId"].as_str().filter(|_| rtype == 3) {
                self.intakes.insert(wire::key(cid));
            }
        }
    }
}

/// The `jsonrpc` member of a request as clients write it.
const JSONRPC_2: &str = "\"jsonrpc\":\"2.0\"";

/// Requests that read a session without changing anything the host
/// weighs for idleness (PROTOCOL.md 4.1: turns, tasks, approvals,
/// subscribed connections).
const PURE_READS: [&str; 4] = [
    "session/read",
    "view/page",
    "approval/listPending",
    "view/unsubscribe",
];

/// What the trace says of one effect key.
#[derive(Debug, Clone, Default)]
struct EffectTruth {
    performs: u32,
    committed: bool,
    /// Some call's answer was lost, or a call was in flight when its host
    /// died: the host cannot know the outcome.
    uncertain: bool,
    /// Calls in flight: (host, inc).
    inflight: Vec<(usize, u64)>,
    /// Every host incarnation that called the provider for this key.
    callers: Vec<(usize, u64)>,
    /// The last definite answer delivered.
    answered: Option<&'static str>,
    /// Some call's response never reached its host (lost, or the host
    /// timed it out): the only way a keyed provider's outcome stays
    /// unknown, since recovery asks a keyed provider by key.
    response_lost: bool,
    /// A call was in flight when its host was asked to stop gracefully
    /// (or a stopping host made it): the shutdown stops waiting for it,
    /// so its outcome stays unknown to that host (PROTOCOL.md 4.1: the
    /// unload ends the session's live work).
    cut_by_shutdown: bool,
}

/// How long after its due time a background task may still run at the end
/// of a healed run (the host ends due tasks on its next timer).
const TASK_SLACK_MS: u64 = 1_000;

/// One life of a session: a host incarnation holding its lease.
#[derive(Debug, Clone)]
struct Life {
    /// Its records start at this file offset.
    from: usize,
    /// Its holder's predecessor died (or dropped the session): its first
    /// records must be recovery.
    recovery_due: bool,
    /// Its first record was consumed.
    begun: bool,
}

/// The decisions a command could get on one host since it first arrived.
#[derive(Debug, Clone)]
struct Adm {
    sid: String,
    cid: String,
    method: String,
    params: Value,
    window: Vec<Expected>,
}

/// A carrier-less answer, per host incarnation.
#[derive(Debug, Clone)]
struct Lifetime {
    /// The session it was sent for.
    sid: String,
    sig: String,
    answer: Result<Value, Value>,
    /// The session's lease grants so far when it was first answered.
    loads: u64,
}

/// The bytes a `session/resume` record of a log carries (its method).
const RESUME: &[u8] = b"session/resume";

/// The reference model of one run.
#[derive(Debug, Default)]
pub struct Model {
    rep: Report,
    durable_run: bool,
    hosts: BTreeMap<usize, HostSt>,
    links: BTreeMap<u64, LinkSt>,
    /// The links with requests pending (`reqs` not empty): links are never
    /// forgotten (a closed link's host may still answer on it), so the
    /// walks over pending requests go by this set, not over every link the
    /// run ever opened (thousands in a long run).
    req_links: BTreeSet<u64>,
    files: BTreeMap<String, LogFile>,
    sessions: BTreeMap<String, Sess>,
    leases: BTreeMap<String, (usize, u64)>,
    /// Per session, the trace index of its latest lease grant: what a
    /// holder made durable since is known durable to that load (a new
    /// load trusts nothing it read until its first sync).
    granted_at: BTreeMap<String, usize>,
    /// Sessions each host incarnation dropped (storage failure) or died
    /// holding: recovery is due at their next load.
    dead_holder: BTreeSet<String>,
    /// Host incarnations asked to stop gracefully (`HostShutdown`), with
    /// the time they were asked.
    stopping: BTreeMap<(usize, u64), u64>,
    /// The sessions each stopping incarnation closed for `hostShutdown`
    /// (its `closed` records).
    shutdown_closed: BTreeMap<(usize, u64), BTreeSet<String>>,
    /// Sessions a host incarnation dropped on a storage failure: like a
    /// crash, it says nothing more of them (no `session/closed`).
    dropped: BTreeSet<(usize, u64, String)>,
    /// The last holder of each session's lease, until the next grant.
    released_by: BTreeMap<String, (usize, u64)>,
    /// The lives of each session (one per lease grant), in file order.
    lives: BTreeMap<String, Vec<Life>>,
    /// Payload signatures of every command request any host received,
    /// by command id key.
    recv_sigs: BTreeMap<String, BTreeSet<String>>,
    /// Every spelling of a command id any host received, by its key.
    recv_spellings: BTreeMap<String, BTreeSet<String>>,
    /// Keys of command ids new to every ledger when a line naming them
    /// was refused ([`Model::refused`]), until a command of that id is
    /// answered.
    refused_cids: BTreeSet<String>,
    /// Sessions whose log some host appended a `session/resume` record to
    /// ([`Sess::resume_appended`]).
    resume_appended: BTreeSet<String>,
    /// Carrier-less answers by (host, inc, cid key).
    lifetime: BTreeMap<(usize, u64, String), Lifetime>,
    /// Ephemeral hosts' first recorded answers: (host, inc, sid, cid key).
    eph_answers: BTreeMap<EphKey, (String, Result<Value, Value>)>,
    effects: BTreeMap<String, EffectTruth>,
    /// Admission windows: for each (host, incarnation, command id key,
    /// signature), every decision the spec allowed since the first copy
    /// reached that host (an earlier copy's answer may have gone to a link
    /// that closed before the host wrote it).
    adm: BTreeMap<(usize, u64, String, String), Adm>,
    /// Lease grants per session (a reload counts).
    loads: BTreeMap<String, u64>,
    /// The session each `session/start` without a session id was first
    /// answered with, by command id key.
    start_sids: BTreeMap<String, String>,
    /// Ephemeral sessions by the host incarnation that holds them.
    eph_owner: BTreeMap<String, (usize, u64)>,
    /// Faults healed: the run must converge by its end.
    healed: bool,
    /// Host-clock time the faults healed at.
    healed_at_ms: Option<u64>,
    /// Host-clock time of the last entry observed.
    last_ms: u64,
    /// The run's `--idle-unload-ms` (from its fault-mix line; 0: never).
    idle_unload_ms: u64,
    /// How late after its deadline an idle unload may be written:
    /// [`IDLE_SLACK_MS`], and [`LATE_TIMER_MAX_MS`] more when the run's
    /// timers may fire late (`late-timer` in its fault-mix line).
    idle_slack_ms: u64,
    /// Sessions left idle on their holder, which must unload them in time
    /// ([`Model::watch_idle`]).
    idle_watch: BTreeMap<String, IdleWatch>,
    /// Per host incarnation, until when it may still wait for a provider
    /// answer that was lost (the call's time and `EFFECT_TIMEOUT_MS`).
    effect_waits: BTreeMap<(usize, u64), u64>,
    /// Idle `session/closed` notifications seen, by (session, host, inc,
    /// viewCursor): an unload's broadcast is judged once, at its first.
    idle_closes: BTreeSet<(String, usize, u64, String)>,
    /// `task/stopAll` receipt times of sessions the model had not met yet.
    stop_all_early: BTreeMap<String, Vec<u64>>,
    /// Deliberately damaged sessions (bit rot): trace index of the damage.
    rotten: BTreeMap<String, usize>,
    /// Per rotten session: what the host incarnation that held it (or
    /// had just released it) at the damage had in memory, and may still
    /// send or answer from, even after a later load of the damaged log
    /// failed.
    rot_memory: BTreeMap<String, RotMemory>,
    /// The holder of a rotten session at the moment of the damage: it may
    /// go on from memory until it lets go; nobody may load the damaged log.
    rot_holder: BTreeMap<String, (usize, u64)>,
    /// The last few reads' answers, as `wire::ReadMemo`s: a client polls a
    /// session with reads whose answers differ only in their ids.
    read_memo: Vec<wire::ReadMemo>,
    /// Per link, the sessions whose `session/started` it was sent.
    started_sent: BTreeMap<u64, BTreeSet<String>>,
    /// Per link, the sessions whose `session/started` broadcast it is owed
    /// (an initialized connection of the host that created the session,
    /// open when the creating start was answered): discharged when sent,
    /// dropped when the link closes; any left at the end is a violation.
    started_owed: BTreeMap<u64, BTreeSet<String>>,
    /// Sessions whose creating `session/start` answer was judged.
    started_judged: BTreeSet<String>,
    /// Per session, the trace index of the first append to its log.
    first_append: BTreeMap<String, usize>,
}

/// How many read answers [`Model`] remembers.
const READ_MEMO_LEN: usize = 4;

fn host_of(e: &Entry) -> usize {
    match e.actor {
        Actor::Host(h) => h,
        _ => usize::MAX,
    }
}

fn sid_of(p: &Value) -> Option<String> {
    p["sessionId"].as_str().map(|s| s.to_ascii_lowercase())
}

impl Model {
    /// A model for a run of `scenario`.
    pub fn new(scenario: Scenario) -> Model {
        Model {
            durable_run: scenario.durable(),
            idle_slack_ms: IDLE_SLACK_MS,
            ..Model::default()
        }
    }

    /// Judges a whole trace.
    pub fn check(trace: &Trace, scenario: Scenario) -> Report {
        let mut m = Model::new(scenario);
        for (i, e) in trace.entries.iter().enumerate() {
            m.observe(i, e);
        }
        m.finish()
    }

    /// Judges one more trace entry.
    pub fn observe(&mut self, idx: usize, e: &Entry) {
        self.rep.at = idx;
        let h = host_of(e);
        let now_ms = START_MS + e.at_ms;
        self.last_ms = now_ms;
        if !self.idle_watch.is_empty() {
            self.idle_overdue(now_ms);
        }
        match &e.what {
            What::FaultMix(mix) => {
                // "... idle-unload=4000ms" (see `run.rs`).
                self.idle_unload_ms = mix
                    .rsplit("idle-unload=")
                    .next()
                    .and_then(|x| x.strip_suffix("ms"))
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(0);
                self.idle_slack_ms = IDLE_SLACK_MS
                    + if mix.contains("late-timer=") {
                        LATE_TIMER_MAX_MS
                    } else {
                        0
                    };
            }
            What::HostStart { inc, durable, .. } => {
                let st = self.hosts.entry(h).or_default();
                st.inc = *inc;
                st.alive = true;
                st.durable = *durable;
            }
            What::HostCrash { inc, .. } => {
                // A host asked to stop has SHUTDOWN_GRACE_MS to unload its
                // sessions and exit (the simulator then kills it): the
                // shutdown's syncs, stalls included, take far less.
                if let Some(at) = self.stopping.get(&(h, *inc)) {
                    let late = now_ms >= at + SHUTDOWN_GRACE_MS;
                    self.rep.check(!late, "lease-unload", &format!("shutdown-hung {h}.{inc}"), || {
                        format!("host{h} (incarnation {inc}) was asked to stop at {at} and still had sessions loaded or IO outstanding {SHUTDOWN_GRACE_MS} ms later")
                    });
                }
                self.host_died(h, *inc)
            }
            What::HostShutdown { inc } => {
                self.stopping.insert((h, *inc), now_ms);
                self.idle_watch.retain(|_, w| w.holder != (h, *inc));
                for t in self.effects.values_mut() {
                    if t.inflight.contains(&(h, *inc)) {
                        t.cut_by_shutdown = true;
                        t.uncertain = true;
                    }
                }
            }
            What::HostExit { inc } => {
                self.host_exited(h, *inc);
                self.host_died(h, *inc);
            }
            What::Connect { link, host, inc } => {
                self.req_links.remove(link);
                self.links.insert(
                    *link,
                    LinkSt {
                        host: *host,
                        inc: *inc,
                        ..LinkSt::default()
                    },
                );
            }
            What::LinkClosed { link, why } => {
                self.started_owed.remove(link);
                // A cut reaches the host at once (a client's own close only
                // after its lines in flight): what it watched may be idle now.
                // (With whether the host kept a subscription for it: not
                // for a view read from the file.)
                let watched: Vec<(String, bool)> = match self.links.get(link) {
                    Some(l) if *why == "cut" => l
                        .subs
                        .iter()
                        .filter(|(_, x)| x.active)
                        .map(|(s, x)| (s.clone(), x.from_file.is_none()))
                        .collect(),
                    _ => Vec::new(),
                };
                self.hung_requests(*link, now_ms);
                if let Some(l) = self.links.get_mut(link) {
                    l.closed = true;
                    // Events held for an answer owed on this link go on.
                    let (host, waiting): (usize, Vec<String>) = (
                        l.host,
                        self.sessions
                            .iter()
                            .filter(|(_, x)| !x.durable && !x.ahead.is_empty())
                            .map(|(k, _)| k.clone())
                            .collect(),
                    );
                    for sid in waiting {
                        self.judge_ahead(host, &sid);
                    }
                }
                if let Some((h, inc)) = self.links.get(link).map(|l| (l.host, l.inc)) {
                    for (sid, held) in watched {
                        self.watch_idle(h, inc, &sid, held);
                    }
                }
            }
            What::HostRecv { inc, link, line } => self.host_recv(h, *inc, *link, line),
            What::HostSend { inc, link, line } => self.host_send(h, *inc, *link, line, now_ms),
            What::LeaseGrant { inc, session } => self.lease_grant(h, *inc, session),
            What::LeaseRelease { inc, session } => self.lease_release(h, *inc, session),
            What::Append {
                inc,
                session,
                bytes,
            } => {
                let at = self.rep.at;
                self.first_append
                    .entry(session.to_ascii_lowercase())
                    .or_insert(at);
                // Its holder wrote to the log: the unload's `closed`
                // record, or something that was not idle after all.
                if let Some(w) = self.idle_watch.remove(session) {
                    if w.holder == (h, *inc) && now_ms >= w.since_ms + self.idle_unload_ms {
                        self.rep.hit("4.1 idle unload on time");
                    } else if w.holder == (h, *inc) && logfile::holds_idle_close(bytes) {
                        self.idle_early(session, &w, now_ms);
                    }
                }
                self.append(h, *inc, session, bytes)
            }
            What::Truncate {
                inc,
                session,
                len_bytes,
            } => self.truncate(h, *inc, session, *len_bytes as usize),
            What::Synced {
                session,
                upto_bytes,
                ..
            } => {
                self.files
                    .entry(session.clone())
                    .or_default()
                    .synced(*upto_bytes as usize);
                self.consume(session);
            }
            What::SyncFailed {
                session,
                kept_bytes,
                inc,
            } => {
                self.files
                    .entry(session.clone())
                    .or_default()
                    .keep(*kept_bytes as usize, false);
                self.storage_failed(h, *inc, session);
            }
            What::AppendFailed { inc, session } => self.storage_failed(h, *inc, session),
            What::ReadFailed { inc, session } => self.read_failed(h, *inc, session),
            // What a page or replay read there is judged in its answer.
            What::ArchiveRead { found: true, .. } => self.rep.hit("4.2 archived history read"),
            What::Phase(p) if p == "liveness" => {
                self.healed = true;
                self.healed_at_ms = Some(now_ms);
            }
            What::BitRot { session, offset } => {
                // The holder, or the last one if none took the lease since
                // it released it (its unload's frames may still go out).
                let holder = self
                    .leases
                    .get(session)
                    .or_else(|| self.released_by.get(session))
                    .copied();
                let head = self
                    .sessions
                    .get(session)
                    .and_then(|x| x.events.keys().next_back().copied())
                    .unwrap_or(0);
                let f = self.files.entry(session.clone()).or_default();
                let memory = holder.map(|holder| {
                    let mut m = RotMemory {
                        holder,
                        head,
                        intakes: BTreeSet::new(),
                    };
                    // Records the holder wrote before the damage but had
                    // not synced (the model has not read them): it decided
                    // them from memory (bitrot seed 117 of a
                    // cut-before-newline variant: a queued start's intake
                    // written just before the rot, synced and answered
                    // just after).
                    if f.writer_from(f.consumed) == Some(holder) {
                        m.remember(&f.bytes()[f.consumed..]);
                    }
                    m
                });
                f.rot(*offset as usize);
                f.damaged = true;
                self.rotten.insert(session.clone(), idx);
                if let Some(memory) = memory {
                    let holder = memory.holder;
                    self.rot_holder.insert(session.clone(), holder);
                    self.rot_memory.insert(session.clone(), memory);
                    // What the holder already received it may still
                    // answer from memory.
                    let loads = self.loads.get(session).copied().unwrap_or(0);
                    for k in &self.req_links {
                        let Some(l) = self.links.get_mut(k) else {
                            continue;
                        };
                        if (l.host, l.inc) != holder {
                            continue;
                        }
                        for r in l.reqs.values_mut() {
                            if r.sid.as_deref() == Some(session.as_str()) {
                                r.rot_memory_loads = Some(loads);
                            }
                        }
                    }
                }
            }
            What::CrashKeep {
                session,
                kept_bytes,
                ..
            } => {
                let f = self.files.entry(session.clone()).or_default();
                if (*kept_bytes as usize) < f.consumed {
                    self.rep.fail("log-integrity", &format!("lost {session}"), format!("session {session}: a power loss kept {kept_bytes} bytes, fewer than the {} bytes that were synced", f.consumed));
                }
                f.keep(*kept_bytes as usize, true);
                self.consume(session);
            }
            What::Effect {
                inc,
                provider,
                key,
                action,
                perform,
                mutated,
                lost,
            } => self.effect_call(h, *inc, provider, key, action, *perform, *mutated, *lost),
            What::EffectDone { key, outcome, inc } => {
                let t = self.effects.entry(key.clone()).or_default();
                if let Some(pos) = t.inflight.iter().position(|x| *x == (h, *inc)) {
                    t.inflight.remove(pos);
                }
                if *outcome == "unknown" {
                    t.uncertain = true;
                    t.response_lost = true;
                } else {
                    t.answered = Some(outcome);
                }
            }
            _ => {}
        }
    }

    /// Ends the run: what must have happened by now.
    pub fn finish(mut self) -> Report {
        // Links still open at the end that were never sent a broadcast
        // they were owed (every line the host queued has left by now).
        for (link, sids) in std::mem::take(&mut self.started_owed) {
            for sid in sids {
                self.rep.fail_at_end(
                    "view-cursor-order",
                    &format!("started-owed {link} {sid}"),
                    format!("link{link} was an initialized connection of the host that created session {sid}, and was never sent its session/started (PROTOCOL.md 4.1: broadcast to every initialized connection)"),
                );
            }
        }
        // Every request a live host read on a link still open was
        // answered (JSON-RPC 2.0: a request gets a response; a bad line
        // with an id its refusal): the run ends quiescent, every line
        // queued delivered.
        let mut unanswered = Vec::new();
        for (link, l) in &self.links {
            if !self.open_to_live_host(l) {
                continue;
            }
            for ((id, _), r) in &l.reqs {
                unanswered.push((*link, l.host, id.clone(), r.method.clone()));
            }
        }
        for (link, h, id, method) in unanswered {
            self.rep.fail_at_end(
                "liveness",
                &format!("unanswered {link} {id}"),
                format!("host{h} read request {id} ({method:?}) on link{link}, which stayed open, and never answered it"),
            );
        }
        let sids: Vec<String> = self.sessions.keys().cloned().collect();
        for sid in sids {
            if self.rotten.contains_key(&sid) {
                continue;
            }
            let s = &self.sessions[&sid];
            // An ephemeral session is known only by what its host sent:
            // an effect nobody was subscribed to see is not missing.
            if s.durable {
                s.check_owed(&mut self.rep, true);
            }
            // A durable session whose last holder is alive (or that was
            // unloaded in order) has converged once healed: every intake
            // settled, nothing running, queued or pending. One whose
            // holder died and that nobody loaded since is exempt (its
            // recovery has not run); so is a log with unsynced bytes.
            let settled_file = self
                .files
                .get(&sid)
                .is_some_and(|f| f.durable_len == f.len() && f.consumed == f.len());
            if !self.healed || !s.durable || self.dead_holder.contains(&sid) || !settled_file {
                continue;
            }
            for i in s.ledger.values().filter(|i| i.settled.is_none()) {
                self.rep.fail_at_end(
                    "intake-settled",
                    &format!("end {}", i.cid),
                    format!("session {sid}: {} {} never settled", i.method, i.cid),
                );
            }
            if let Some(t) = &s.running {
                self.rep.fail_at_end(
                    "turn-lifecycle",
                    &format!("end-run {t}"),
                    format!("session {sid}: turn {t} never ended"),
                );
            }
            if let Some(t) = s.queue.first() {
                self.rep.fail_at_end(
                    "turn-lifecycle",
                    &format!("end-queue {t}"),
                    format!("session {sid}: turn {t} is still queued at the end"),
                );
            }
            // A decided tool call completes: its effect's answer (or the
            // host's timeout of it, 30 s) or, after a crash, the keyed
            // provider's answer by key or `unknown` (PROTOCOL.md 5). The
            // liveness phase (90 s, no faults) leaves time for each.
            for a in s.approvals.values().filter(|a| a.resolved.is_some()) {
                let open = s.item(&a.item).is_some_and(|i| i["status"] == "inProgress");
                let approval = a.params["approvalId"].as_str().unwrap_or_default();
                let key = format!("{sid}:{approval}");
                let in_flight = self
                    .effects
                    .get(&key)
                    .is_some_and(|t| !t.inflight.is_empty());
                if open && !in_flight {
                    self.rep.fail_at_end(
                        "effect-durability",
                        &format!("end-tool {}", a.item),
                        format!("session {sid}: tool call {} (approval {approval}, decided) never completed", a.item),
                    );
                }
            }
            // A background task ends when due (or stopped, or failed by a
            // crash).
            for (task, st) in &s.tasks {
                if let TaskSt::Running { due_ms } = st {
                    if *due_ms + TASK_SLACK_MS < self.last_ms {
                        self.rep.fail_at_end(
                            "turn-lifecycle",
                            &format!("end-task {task}"),
                            format!("session {sid}: background task {task}, due at {due_ms}, still runs at {}", self.last_ms),
                        );
                    }
                }
            }
        }
        self.rep
    }

    // ----- hosts, leases ------------------------------------------------

    /// Host `h`'s incarnation `inc` finished a graceful shutdown and
    /// exited (PROTOCOL.md 4.1): it unloaded every session it held, so it
    /// holds no lease, and every link still open that was subscribed to a
    /// session it closed got that session's `session/closed` (which ends
    /// the subscription), the session's last event.
    /// (A view answered from the log file by a host that did not hold
    /// the session gets no live events, nor their end.)
    fn host_exited(&mut self, h: usize, inc: u64) {
        for (sid, holder) in &self.leases {
            if *holder == (h, inc) {
                self.rep.fail(
                    "lease-unload",
                    &format!("exit-holding {sid} {h}.{inc}"),
                    format!("host{h} (incarnation {inc}) finished its shutdown still holding the lease of session {sid}: it never unloaded it"),
                );
            }
        }
        let closed = self.shutdown_closed.remove(&(h, inc)).unwrap_or_default();
        for (link, l) in &self.links {
            if (l.host, l.inc) != (h, inc) || l.closed {
                continue;
            }
            for (sid, sub) in &l.subs {
                let dropped = self.dropped.contains(&(h, inc, sid.clone()));
                if sub.active && sub.from_file.is_none() && closed.contains(sid) && !dropped {
                    self.rep.fail(
                        "lease-unload",
                        &format!("exit-unclosed {link} {sid}"),
                        format!("host{h} (incarnation {inc}) closed session {sid} for its shutdown and exited without sending session/closed on link{link}, which was subscribed to it"),
                    );
                }
            }
        }
    }

    fn host_died(&mut self, h: usize, inc: u64) {
        if let Some(st) = self.hosts.get_mut(&h) {
            st.alive = false;
        }
        self.idle_watch.retain(|_, w| w.holder != (h, inc));
        let held: Vec<String> = self
            .leases
            .iter()
            .filter(|(_, x)| **x == (h, inc))
            .map(|(s, _)| s.clone())
            .collect();
        for s in &held {
            self.dead_holder.insert(s.clone());
            self.leases.remove(s);
        }
        // From now on nobody holds those leases: a request pending
        // elsewhere may be told the session is not loaded.
        for s in &held {
            self.holder_seen(s, None);
        }
        self.rot_holder.retain(|_, x| *x != (h, inc));
        // A dead incarnation answers nothing more: its admission windows
        // are never read again (and refreshing them was a walk per record).
        self.adm.retain(|(hh, ii, _, _), _| (*hh, *ii) != (h, inc));
        // A host that dies before recording an effect's outcome leaves
        // its successor unable to know it (unless a keyed query tells).
        for t in self.effects.values_mut() {
            if t.callers.contains(&(h, inc)) {
                t.uncertain = true;
                t.inflight.retain(|x| *x != (h, inc));
            }
        }
        // An ephemeral host takes its sessions with it.
        let gone: Vec<String> = self
            .eph_owner
            .iter()
            .filter(|(_, o)| **o == (h, inc))
            .map(|(s, _)| s.clone())
            .collect();
        for g in gone {
            self.sessions.remove(&g);
            self.eph_owner.remove(&g);
        }
        for (id, l) in self.links.iter_mut() {
            if l.host == h && l.inc == inc {
                l.reqs.clear();
                l.subs.clear();
                self.req_links.remove(id);
            }
        }
    }

    fn lease_grant(&mut self, h: usize, inc: u64, sid: &str) {
        if let Some(o) = self.leases.get(sid) {
            if *o != (h, inc) {
                self.rep.fail(
                    "one-lease-holder",
                    &format!("grant {sid}"),
                    format!(
                        "session {sid}: lease granted to host{h} while host{} holds it",
                        o.0
                    ),
                );
            }
        }
        if self.leases.get(sid) != Some(&(h, inc)) {
            // A new load reads the log as it is now (see lease_release).
            self.rot_holder.remove(sid);
        }
        self.released_by.remove(sid);
        self.leases.insert(sid.to_string(), (h, inc));
        self.granted_at.insert(sid.to_string(), self.rep.at);
        *self.loads.entry(sid.to_string()).or_insert(0) += 1;
        let len = self.files.get(sid).map_or(0, |f| f.len());
        let recovery = self.dead_holder.remove(sid);
        self.lives.entry(sid.to_string()).or_default().push(Life {
            from: len,
            recovery_due: recovery,
            begun: false,
        });
        self.holder_seen(sid, Some((h, inc)));
    }

    /// Every request pending on session `sid` saw `holder` hold its lease
    /// (`None`: nobody) while it was handled.
    fn holder_seen(&mut self, sid: &str, holder: Option<(usize, u64)>) {
        for k in &self.req_links {
            let Some(l) = self.links.get_mut(k) else {
                continue;
            };
            for r in l.reqs.values_mut() {
                if r.sid.as_deref() == Some(sid) {
                    r.holders.insert(holder);
                }
            }
        }
    }

    fn lease_release(&mut self, h: usize, inc: u64, sid: &str) {
        self.idle_watch.remove(sid);
        let alive = self.hosts.get(&h).is_some_and(|x| x.alive && x.inc == inc);
        if alive && self.leases.get(sid) == Some(&(h, inc)) {
            // An orderly release (unload): the life must be closed and
            // durable first, unless the session was dropped (storage
            // failure) or never loaded (a failed load).
            let wrote = self
                .lives
                .get(sid)
                .and_then(|l| l.last())
                .zip(self.files.get(sid))
                .is_some_and(|(life, f)| f.len() > life.from);
            if wrote && !self.dead_holder.contains(sid) {
                let f = &self.files[sid];
                let closed = self.sessions.get(sid).is_some_and(|s| !s.open);
                // A holder that kept a session in memory while its synced
                // bytes rotted writes records the model cannot read past
                // the rot: only their durability is judged.
                let from_memory = self.rot_holder.get(sid) == Some(&(h, inc));
                let read_closed = closed && f.consumed == f.len();
                let ok = f.durable_len == f.len() && (read_closed || from_memory);
                self.rep.check(ok, "lease-unload", &format!("release {sid} {}", f.len()), || {
                    format!("session {sid}: host{h} released the lease before its closed record was durable ({} of {} bytes synced)", f.durable_len, f.len())
                });
            }
        }
        if self.leases.get(sid) == Some(&(h, inc)) {
            self.leases.remove(sid);
        }
        // A released holder may still send what its load wrote (frames
        // gated on the syncs of its unload go out after the release): it
        // stays the rot's holder until the session's next lease grant, and
        // a rot before that grant is its too.
        self.released_by.insert(sid.to_string(), (h, inc));
        self.holder_seen(sid, None);
    }

    /// Whether link `l` is open and its host incarnation alive: what the
    /// host read there it still owes an answer.
    fn open_to_live_host(&self, l: &LinkSt) -> bool {
        !l.closed
            && self
                .hosts
                .get(&l.host)
                .is_some_and(|x| x.alive && x.inc == l.inc)
    }

    /// Link `link` closes at `now_ms`. Once the faults have healed, a
    /// live host has nothing slow left: no stalled or failed sync, no full
    /// disk, no crash, every load at once. So every request it owes is
    /// answered before the client's request timeout, counted from when
    /// the host read it or, for one read earlier, from the heal (what
    /// slowed it then has ended); one still waiting when its link closes
    /// later than that was lost by the host (a wake-up that never came, a
    /// load that never ended). The clients give up on such a link after
    /// their timeouts, so this is where a request that hangs for ever
    /// shows, as the end of the run is for one whose link stays open.
    fn hung_requests(&mut self, link: u64, now_ms: u64) {
        let Some(healed) = self.healed_at_ms else {
            return;
        };
        let Some(l) = self.links.get(&link) else {
            return;
        };
        if !self.open_to_live_host(l) {
            return;
        }
        let hung: Vec<(String, String, u64)> = l
            .reqs
            .iter()
            .filter(|(_, r)| now_ms >= r.recv_ms.max(healed) + REQUEST_TIMEOUT_MS)
            .map(|((id, _), r)| (id.clone(), r.method.clone(), now_ms - r.recv_ms))
            .collect();
        let h = l.host;
        for (id, method, waited) in hung {
            let since_heal = now_ms - healed.min(now_ms);
            self.rep.fail(
                "liveness",
                &format!("hung {link} {id}"),
                format!("host{h} read request {id} ({method:?}) on link{link} and had not answered it {waited} ms later ({since_heal} ms after the faults healed), when the link closed (a healed host answers within the client's {REQUEST_TIMEOUT_MS} ms timeout)"),
            );
        }
    }

    fn storage_failed(&mut self, h: usize, inc: u64, sid: &str) {
        self.idle_watch.remove(sid);
        self.dead_holder.insert(sid.to_string());
        self.dropped.insert((h, inc, sid.to_string()));
        let prefix = format!("{sid}:");
        for (k, t) in self.effects.iter_mut() {
            if k.starts_with(&prefix) && t.callers.contains(&(h, inc)) {
                t.uncertain = true;
            }
        }
        self.consume(sid);
        // Intakes this holder wrote and synced in its current load: the
        // host knows them durable, so their commands were applied.
        let since = self.granted_at.get(sid).copied().unwrap_or(0);
        let ledger = self.sessions.get(sid).map(|s| &s.ledger);
        let durable_here = |cid: &str| {
            ledger
                .and_then(|l| l.get(&wire::key(cid)))
                .is_some_and(|i| i.writer == Some((h, inc)) && i.at > since)
        };
        for l in self.links.values_mut() {
            if l.host == h && l.inc == inc {
                if let Some(sub) = l.subs.get_mut(sid) {
                    sub.end();
                }
                for r in l.reqs.values_mut() {
                    if r.sid.as_deref() == Some(sid) {
                        r.storage_failed = true;
                        if !r.cid.as_deref().is_some_and(durable_here) {
                            r.failed_before_intake_durable = true;
                        }
                    }
                }
            }
        }
    }

    /// Host `h` could not open or read `sid`'s files. It holds no load
    /// of the session (a holder serves reads from memory and opens only
    /// what it does not hold), so nothing of it was applied there: what
    /// waited on that read may be refused `storageUnavailable`, and
    /// nothing else changes. Requests of the session pending there count
    /// it, as for a failed append: the model does not know which of them
    /// waited on this read.
    fn read_failed(&mut self, h: usize, inc: u64, sid: &str) {
        for l in self.links.values_mut() {
            if l.host == h && l.inc == inc {
                for r in l.reqs.values_mut() {
                    if r.sid.as_deref() == Some(sid) {
                        r.storage_failed = true;
                        r.failed_before_intake_durable = true;
                        r.read_failed = true;
                    }
                }
            }
        }
    }

    // ----- the disk -----------------------------------------------------

    fn append(&mut self, h: usize, inc: u64, sid: &str, bytes: &[u8]) {
        if self.leases.get(sid) != Some(&(h, inc)) {
            self.rep.fail(
                "one-lease-holder",
                &format!("write {sid} {h}.{inc}"),
                format!("session {sid}: host{h} appended without holding the lease"),
            );
        }
        let f = self.files.entry(sid.to_string()).or_default();
        if !self.rotten.contains_key(sid) {
            let (len, from) = (f.len(), f.consumed);
            match f.shape(len, from) {
                Shape::Clean => {}
                Shape::Torn { at } | Shape::Corrupt { at } => {
                    self.rep.fail("log-integrity", &format!("append-after-damage {sid} {at}"), format!("session {sid}: host{h} appended after invalid bytes at offset {at} (a torn tail must be cut first)"));
                }
            }
        }
        f.append(bytes, (h, inc));
        // A resume written here, durable or not, may be read from the file
        // (`Sess::resume_appended`).
        if bytes.windows(RESUME.len()).any(|w| w == RESUME) {
            self.resume_appended.insert(sid.to_string());
            if let Some(s) = self.sessions.get_mut(sid) {
                s.resume_appended = true;
            }
        }
        // The holder at a rot goes on from memory: the events it writes
        // after the damage (past it, so the model never reads them from
        // the file) are its memory's, and it may still send them after a
        // later load of the damaged log failed (bitrot seed 604: a
        // shutdown's `turn/completed`, written after the rot, sent after
        // a queued resume's reload found the damage).
        if self.rot_holder.get(sid) == Some(&(h, inc)) {
            if let Some(m) = self
                .rot_memory
                .get_mut(sid)
                .filter(|m| m.holder == (h, inc))
            {
                m.remember(bytes);
            }
        }
    }

    fn truncate(&mut self, h: usize, inc: u64, sid: &str, len: usize) {
        if self.leases.get(sid) != Some(&(h, inc)) {
            self.rep.fail(
                "one-lease-holder",
                &format!("trunc {sid} {h}.{inc}"),
                format!("session {sid}: host{h} truncated without holding the lease"),
            );
        }
        let f = self.files.entry(sid.to_string()).or_default();
        if !self.rotten.contains_key(sid) {
            let before = f.shape(len, 0);
            let after = f.shape(f.len(), 0);
            let ok = before == Shape::Clean && after == Shape::Torn { at: len };
            self.rep.check(ok, "log-integrity", &format!("trunc {sid} {len}"), || {
                format!("session {sid}: host{h} cut the log to {len} bytes, which is not the end of its valid records before a torn tail ({after:?})")
            });
        }
        f.truncate(len);
        for life in self.lives.entry(sid.to_string()).or_default() {
            life.from = life.from.min(len);
        }
        self.consume(sid);
    }

    /// Hands the newly durable records of `sid` to its session.
    fn consume(&mut self, sid: &str) {
        let Some(f) = self.files.get_mut(sid) else {
            return;
        };
        let recs = f.take_durable();
        if recs.is_empty() {
            return;
        }
        let durable = true;
        for (i, r) in recs.into_iter().enumerate() {
            // A carrier-less command's admission window holds the state
            // after *every* durable record, not only at sync points: a
            // turn that starts and is interrupted within one synced batch
            // was running in between, where the host admitted the
            // interrupt (mixed seed 3496 of 0..10000).
            if i > 0 {
                self.refresh_windows(sid);
            }
            let sess = self
                .sessions
                .entry(sid.to_string())
                .or_insert_with(|| Sess::new(sid, durable));
            if self.resume_appended.contains(sid) {
                sess.resume_appended = true;
            }
            if !self.stop_all_early.is_empty() {
                if let Some(t) = self.stop_all_early.remove(sid) {
                    sess.stop_all_ms.extend(t);
                }
            }
            // The first record of a life after a dead holder starts
            // recovery (when the log's lifecycle was left open).
            if let Some(life) = self
                .lives
                .get_mut(sid)
                .and_then(|ls| ls.iter_mut().rev().find(|l| l.from <= r.start))
            {
                if !life.begun {
                    life.begun = true;
                    if life.recovery_due && sess.open {
                        sess.begin_recovery();
                    }
                }
            }
            // The record is owned here: what the session keeps of it
            // (params, answers) is moved out, not copied.
            let mut body = r.body;
            let b = &body;
            let origin = Origin {
                writer: r.writer,
                at_ms: 0,
                stopping: self.stopping.contains_key(&r.writer),
            };
            match b.kind().unwrap_or_default() {
                "created" => {
                    let ok = r.start == 0 && *b.get("sessionId") == json!(sid);
                    self.rep
                        .check(ok, "log-integrity", &format!("created {sid}"), || {
                            format!(
                                "session {sid}: created record {} not first or of another session",
                                b.to_value()
                            )
                        });
                    sess.created = true;
                    sess.start_cid = b.get("startCommandId").as_str().map(str::to_string);
                    sess.created_at_ms = b.get("createdAtMs").as_u64();
                    sess.workspace_root = b.get("workspaceRoot").clone();
                }
                "loaded" => {
                    if !sess.recovering {
                        sess.open = true;
                    } else {
                        sess.end_recovery(&mut self.rep);
                        sess.open = true;
                    }
                }
                "closed" => {
                    let reason = b.get("reason").as_str().unwrap_or_default().to_string();
                    if reason == "hostShutdown" {
                        // PROTOCOL.md 4.1: an unload is `idle` unless the
                        // host is shutting down.
                        let (w, wi) = r.writer;
                        let asked = self.stopping.contains_key(&r.writer);
                        self.rep.check(asked, "lease-unload", &format!("shutdown-close {sid} {w}.{wi}"), || {
                            format!("session {sid}: host{w} (incarnation {wi}) closed its log for hostShutdown without being asked to stop")
                        });
                        self.shutdown_closed
                            .entry(r.writer)
                            .or_default()
                            .insert(sid.to_string());
                        self.rep.hit("4.1 shutdown unload");
                    }
                    sess.close(&mut self.rep, &reason);
                }
                "received" => {
                    sess.end_recovery(&mut self.rep);
                    let cid = b.get("commandId").as_str().unwrap_or_default().to_string();
                    let method = b.get("method").as_str().unwrap_or_default().to_string();
                    let params = body.take("params");
                    let mut answer = body.take("answer");
                    let mut items = body.take_answer_items();
                    let mut answer = match answer.as_object_mut() {
                        Some(a) if a.contains_key("result") => Ok(take_member_of(a, "result")),
                        Some(a) if a.contains_key("error") => Err(take_member_of(a, "error")),
                        _ => Err(Value::Null),
                    };
                    // A resume's snapshot items stay text when they are an
                    // array (the only shape the wire side compares as
                    // text); any other are put back in place.
                    let array = |t: &String| t.starts_with('[') && t.ends_with(']');
                    if method != "session/resume" || !items.as_ref().is_some_and(array) {
                        if let Some(t) = items.take() {
                            put_items(&mut answer, &t);
                        }
                    }
                    // The recorded payload must be one a request carried.
                    let sig = wire::signature(&method, &params).unwrap_or_default();
                    let carried = self
                        .recv_sigs
                        .get(&wire::key(&cid))
                        .is_some_and(|s| s.contains(&sig));
                    self.rep.check(carried, "payload-identity", &format!("recorded-payload {cid}"), || {
                        format!("session {sid}: the intake of {method} {cid} records payload {params}, which no request with that id carried")
                    });
                    // And the id as a request spelled it: answers and
                    // events echo it exactly as sent (PROTOCOL.md 2).
                    let spelled = self
                        .recv_spellings
                        .get(&wire::key(&cid))
                        .is_some_and(|s| s.contains(&cid));
                    self.rep.check(spelled, "payload-identity", &format!("recorded-id {cid}"), || {
                        format!("session {sid}: the intake of {method} records command id {cid}, which no request spelled so")
                    });
                    // A carrier-less row's answer dedupes for its host's
                    // lifetime (PROTOCOL.md 4.4): in that lifetime its id
                    // is taken, and a durable command of the same id (another
                    // payload) is refused `command_id_conflict`, never
                    // recorded. A row itself refused so took nothing.
                    let (wh, winc) = r.writer;
                    let taken = self
                        .lifetime
                        .get(&(wh, winc, wire::key(&cid)))
                        .filter(|l| l.sid == sid)
                        .is_some_and(|l| !matches!(&l.answer, Err(e) if wire::rejection(e) == Some("command_id_conflict")));
                    self.rep.check(!taken, "payload-identity", &format!("cl-taken {cid}"), || {
                        format!("session {sid}: host{wh} recorded an intake of {method} {cid}, an id a carrier-less row of that session took earlier in the same host lifetime (it must be refused command_id_conflict)")
                    });
                    // Every earlier admission's promised effect was
                    // recorded with it (or its intake settled abandoned).
                    sess.check_owed(&mut self.rep, false);
                    let decided = !matches!(method.as_str(), "session/start" | "session/resume");
                    sess.admit(
                        &mut self.rep,
                        &cid,
                        &method,
                        &params,
                        sig,
                        (answer, items),
                        decided,
                    );
                    if let Some(i) = sess.ledger.get_mut(&wire::key(&cid)) {
                        i.writer = Some(r.writer);
                    }
                }
                "settled" => {
                    let cid = b.get("commandId").as_str().unwrap_or_default().to_string();
                    let outcome = match b.get("outcome").as_str() {
                        Some("applied") => Settle::Applied,
                        Some("rejected") => Settle::Rejected(b.get("error").clone()),
                        _ => Settle::Abandoned,
                    };
                    sess.settle(&mut self.rep, &cid, outcome);
                }
                "event" => {
                    let n = b.get("n").as_u64().unwrap_or(0);
                    let method = b.get("method").as_str().unwrap_or_default().to_string();
                    let at_ms = b.get("emittedAtMs").as_u64().unwrap_or(0);
                    let p = body.take("params");
                    let origin = Origin { at_ms, ..origin };
                    // A tool call's completion is judged against the
                    // effects after the session applied it.
                    let effect_item = (method == "item/completed"
                        && p["item"]["kind"] == "toolCall"
                        && p["item"]["tool"] != "background")
                        .then(|| p.clone());
                    sess.event(&mut self.rep, n, &method, p, at_ms, origin);
                    if let Some(p) = effect_item {
                        let sess_id = sid.to_string();
                        Self::judge_effect_item(
                            &mut self.rep,
                            &self.effects,
                            &self.sessions[&sess_id],
                            &p,
                        );
                    }
                }
                other => {
                    self.rep.fail(
                        "log-integrity",
                        &format!("kind {sid} {other}"),
                        format!("session {sid}: unknown record kind {other:?}"),
                    );
                }
            }
        }
        // A watch started while records its holder had written were not
        // yet durable (a turn's start, say) ends when they show the
        // session was not idle after all (lease-handover seed 32 of the
        // `sim` client: a link cut between a turn's append and its sync).
        if self.idle_watch.contains_key(sid)
            && !self.sessions.get(sid).is_some_and(|x| x.open && x.idle())
        {
            self.idle_watch.remove(sid);
        }
        self.refresh_windows(sid);
    }

    // ----- effects ------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    fn effect_call(
        &mut self,
        h: usize,
        inc: u64,
        provider: &str,
        key: &str,
        action: &str,
        perform: bool,
        mutated: bool,
        lost: bool,
    ) {
        let (sid, approval) = key.split_once(':').unwrap_or((key, ""));
        let durable = self.hosts.get(&h).is_some_and(|x| x.durable);
        if perform {
            // The decision that allows it is durable, and approved.
            let ap = self
                .sessions
                .get(sid)
                .and_then(|s| s.approvals.get(approval))
                .cloned();
            let ok = match &ap {
                Some(a) => {
                    a.resolved
                        .as_ref()
                        .is_some_and(|r| r["decision"] == "approved")
                        && a.effect
                            .as_ref()
                            .is_some_and(|(p, act)| p == provider && act == action)
                }
                None => false,
            };
            // An ephemeral host's decision may have reached no subscriber:
            // only a durable one is judged here; and a host that kept a
            // rotten session in memory has decisions the model cannot read.
            let from_memory = self.rot_holder.get(sid) == Some(&(h, inc));
            let ok = ok || !durable || from_memory;
            self.rep.check(ok, "effect-durability", &format!("perform {key}"), || {
                format!("host{h} performed {action:?} at {provider} for {key} without a durable approval of exactly that ({ap:?})")
            });
            if provider == "unkeyed" && durable && !from_memory {
                // Only the process that resolved the approval may perform
                // at an unkeyed provider: any other found the decision on
                // disk, the effect perhaps in flight at a crash, and must
                // report it `unknown` (PROTOCOL.md 5), whether or not the
                // first attempt ever reached the provider.
                let by = ap.as_ref().and_then(|a| a.resolved_by);
                self.rep.check(by.is_none_or(|w| w == (h, inc)), "effect-durability", &format!("reissue {key}"), || {
                    format!("host{h} (incarnation {inc}) performed {key} at the unkeyed provider, but its approval was resolved by {by:?}: an unkeyed effect found on disk is reported unknown, never re-issued")
                });
            }
            let t = self.effects.entry(key.to_string()).or_default();
            t.performs += 1;
            if provider == "unkeyed" {
                self.rep.hit("4.4 unkeyed effect");
                if t.performs > 1 {
                    self.rep.fail("effect-durability", &format!("again {key}"), format!("host{h} performed {key} again at the unkeyed provider (it cannot deduplicate: the outcome must be reported unknown, never re-issued)"));
                }
            } else {
                self.rep.hit("4.4 keyed effect");
            }
        }
        let t = self.effects.entry(key.to_string()).or_default();
        t.callers.push((h, inc));
        if mutated {
            t.committed = true;
        }
        if provider == "unkeyed" && perform {
            t.committed = true;
        }
        if lost {
            t.uncertain = true;
            t.response_lost = true;
            // The host still waits for the answer, up to its timeout.
            let until = self.last_ms + msp::core::EFFECT_TIMEOUT_MS;
            let w = self.effect_waits.entry((h, inc)).or_default();
            *w = (*w).max(until);
        } else {
            t.inflight.push((h, inc));
            if self.stopping.contains_key(&(h, inc)) {
                t.cut_by_shutdown = true;
                t.uncertain = true;
            }
        }
    }

    fn judge_effect_item(
        rep: &mut Report,
        effects: &BTreeMap<String, EffectTruth>,
        s: &Sess,
        p: &Value,
    ) {
        let item = &p["item"];
        let item_id = item["itemId"].as_str().unwrap_or_default();
        let Some(ap) = s.approvals.values().find(|a| a.item == item_id) else {
            rep.fail(
                "effect-durability",
                &format!("tool-approval {item_id}"),
                format!(
                    "session {}: tool call {item_id} completed but had no approval",
                    s.id
                ),
            );
            return;
        };
        let approval = ap.params["approvalId"].as_str().unwrap_or_default();
        let key = format!("{}:{approval}", s.id);
        let truth = effects.get(&key).cloned().unwrap_or_default();
        let outcome = item["effectOutcome"].as_str().unwrap_or_default();
        let decision = ap
            .resolved
            .as_ref()
            .map(|r| r["decision"].as_str().unwrap_or_default().to_string());
        // PROTOCOL.md 5: `unknown` is a lost response, or an effect in
        // flight at a crash "and not reconciled by key": recovery asks a
        // keyed provider, so only a lost response (or a graceful shutdown
        // that stopped waiting for it) leaves it unknown.
        let keyed = item["tool"] == "keyed";
        let ok = match (decision.as_deref(), outcome) {
            (Some("approved"), "committed") => truth.committed,
            (Some("approved"), "notStarted") => !truth.committed,
            (Some("approved"), "unknown") if keyed => truth.response_lost || truth.cut_by_shutdown,
            (Some("approved"), "unknown") => {
                truth.uncertain || truth.performs == 0 || truth.answered.is_none()
            }
            (Some(_), "notStarted") | (None, "notStarted") => truth.performs == 0,
            _ => false,
        };
        if outcome == "unknown" {
            rep.hit("4.4 effect outcome unknown");
        }
        rep.check(ok, "effect-durability", &format!("outcome {key}"), || {
            format!("session {}: tool call {item_id} reports effectOutcome {outcome:?} after decision {decision:?}, but the provider says {truth:?}", s.id)
        });
        if outcome == "committed" {
            rep.check(
                item["status"] == "completed",
                "effect-durability",
                &format!("status {key}"),
                || {
                    format!(
                        "session {}: tool call {item_id} committed but its status is {}",
                        s.id, item["status"]
                    )
                },
            );
        }
    }

    // ----- requests and answers ----------------------------------------

    fn host_recv(&mut self, h: usize, inc: u64, link: u64, line: &str) {
        let handshake = self.links.get(&link).map(|l| l.handshake);
        let hs = handshake.unwrap_or(0);
        if let Some(x) = bad_input::over_limit(line) {
            return self.refusal_owed(link, handshake, x);
        }
        let frame = wire::parse_str(line);
        // A request read as one, with its envelope's `jsonrpc` spelled as
        // a client writes it, is judged from what was read; anything
        // else is read again as a whole (rare: bad lines).
        let refusal = match &frame {
            Some(Frame::Request { id, method, params }) if line.contains(JSONRPC_2) => {
                bad_input::request_refusal(id, method, params, hs)
            }
            Some(Frame::Response { .. }) if line.contains(JSONRPC_2) => None,
            _ => bad_input::refusal(line, hs),
        };
        if let Some(x) = refusal {
            return self.refusal_owed(link, handshake, x);
        }
        let (id, method, params) = match frame {
            Some(Frame::Request { id, method, params }) => (id, method, params),
            Some(Frame::Notification { method, .. }) => {
                let at = self.rep.at;
                if let Some(l) = self.links.get_mut(&link) {
                    if method == "initialized" && l.handshake == 1 {
                        l.handshake = 2;
                        l.ready_at = Some(at);
                    } else if method == "initialized" && l.handshake == 0 {
                        // Ahead of `initialize`: it initializes nothing.
                        self.rep.hit("2 initialized before initialize");
                    }
                }
                return;
            }
            _ => return,
        };
        let cid = params["commandId"].as_str().map(str::to_string);
        let sig = if wire::is_command(&method) {
            wire::signature(&method, &params)
        } else {
            None
        };
        if let (Some(c), Some(sg)) = (&cid, &sig) {
            let k = wire::key(c);
            let spellings = self.recv_spellings.entry(k.clone()).or_default();
            if !spellings.contains(c) {
                spellings.insert(c.clone());
            }
            self.recv_sigs.entry(k).or_default().insert(sg.clone());
        }
        let sid = sid_of(&params);
        if let Some(s) = &sid {
            if !PURE_READS.contains(&method.as_str()) {
                self.idle_watch.remove(s);
            }
        }
        // A `session/start` naming no session touches the one its command
        // id started, if any: its replay subscribes the link there
        // (lease-handover seed 6850).
        if let (None, "session/start", Some(c)) = (&sid, method.as_str(), &cid) {
            let k = wire::key(c);
            let started: Vec<String> = self
                .sessions
                .iter()
                .filter(|(_, x)| x.start_cid.as_deref().is_some_and(|s| wire::key(s) == k))
                .map(|(id, _)| id.clone())
                .collect();
            for s in started {
                self.idle_watch.remove(&s);
            }
        }
        let mut r = Req {
            method: method.clone(),
            params,
            cid,
            sid: sid.clone(),
            sig,
            recv_at: self.rep.at,
            recv_ms: self.last_ms,
            floor: sid
                .as_ref()
                .and_then(|s| self.sessions.get(s))
                .map_or(0, |s| s.head),
            window: Vec::new(),
            holders: BTreeSet::new(),
            existed: false,
            existed_at_recv: false,
            terminal_at_recv: false,
            storage_failed: false,
            failed_before_intake_durable: false,
            read_failed: false,
            handshake_at_recv: self.links.get(&link).map(|l| l.handshake),
            approvals_at_recv: None,
            rot_memory_loads: sid
                .as_ref()
                .filter(|s| self.rot_holder.get(*s) == Some(&(h, inc)))
                .map(|s| self.loads.get(s).copied().unwrap_or(0)),
            refusal: None,
        };
        if let Some(s) = &sid {
            let now = self.last_ms;
            match (r.method.as_str(), self.sessions.get_mut(s)) {
                ("task/stop", Some(sess)) => sess.stop_asked(&r.params),
                ("task/stopAll", Some(sess)) => sess.stop_all_ms.push(now),
                // Not consumed yet (its records are not synced): kept
                // until the model meets the session.
                ("task/stopAll", None) => {
                    self.stop_all_early.entry(s.clone()).or_default().push(now);
                }
                _ => {}
            }
            if r.method == "approval/listPending" {
                r.approvals_at_recv = self.sessions.get(s).map(|x| {
                    x.approvals
                        .iter()
                        .map(|(k, a)| (k.clone(), a.resolved.is_none()))
                        .collect()
                });
            }
            r.holders.insert(self.leases.get(s).copied());
            r.existed = self.sessions.get(s).is_some_and(|x| x.created);
            r.existed_at_recv = r.existed;
            if let (Some(sess), Some(c)) = (self.sessions.get(s), &r.cid) {
                r.window.push(sess.expected(c, &r.method, &r.params));
                r.terminal_at_recv = sess.ledger.get(&wire::key(c)).is_some_and(|i| {
                    matches!(
                        i.settled,
                        Some(Settle::Rejected(_)) | Some(Settle::Abandoned)
                    )
                });
            }
        }
        // Only carrier-less commands and an ephemeral host's commands are
        // judged against the window since their first copy (see
        // `adm_window`); a durable intake is judged by the ledger.
        let windowed = wire::CARRIERLESS_METHODS.contains(&method.as_str())
            || !self.hosts.get(&h).is_some_and(|x| x.durable);
        if let (true, Some(c), Some(sg), Some(sd)) = (windowed, &r.cid, &r.sig, &r.sid) {
            self.adm
                .entry((h, inc, wire::key(c), sg.clone()))
                .or_insert_with(|| Adm {
                    sid: sd.clone(),
                    cid: c.clone(),
                    method: r.method.clone(),
                    params: r.params.clone(),
                    window: r.window.clone(),
                });
        }
        if let Some(l) = self.links.get_mut(&link) {
            if method == "initialize" && l.handshake == 0 {
                l.handshake = 1;
            }
            l.arrivals += 1;
            l.reqs.insert((id.to_string(), l.arrivals), r);
            self.req_links.insert(link);
        }
    }

    /// A line the host must refuse `x` (PROTOCOL.md 1, 3): its answer,
    /// matched by the reply id (`null`: in arrival order), is judged by
    /// [`Model::refused`]. A refusal records nothing, so the command
    /// inside, if any, is not received: sent again well-formed, it is
    /// new to the ledger.
    fn refusal_owed(&mut self, link: u64, handshake: Option<u8>, x: bad_input::Refusal) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        let key = x.id.to_string();
        let r = Req {
            recv_at: self.rep.at,
            recv_ms: self.last_ms,
            handshake_at_recv: handshake,
            refusal: Some(x),
            ..Req::default()
        };
        l.arrivals += 1;
        l.reqs.insert((key, l.arrivals), r);
        self.req_links.insert(link);
    }

    /// The answer to a line owed refusal `x`: exactly that error (code,
    /// kind and, for bad params, the field), never a result.
    fn refused(
        &mut self,
        h: usize,
        link: u64,
        x: &bad_input::Refusal,
        outcome: &Result<Value, Value>,
    ) {
        self.rep.hit(x.rule());
        let ok = matches!(outcome, Err(e) if x.is(e));
        if let Some(k) = x.cid.as_deref().map(wire::key) {
            if !self.sessions.values().any(|s| s.ledger.contains_key(&k)) {
                self.refused_cids.insert(k);
            }
        }
        let at = self.rep.at;
        self.rep.check_lazy(
            ok,
            "admission-decision",
            || format!("refusal link{link} {at}"),
            || {
                format!(
                    "host{h} answered a line owed {} {} (field {:?}) on link{link} with {}",
                    x.code,
                    x.kind,
                    x.field,
                    match outcome {
                        Ok(r) => format!("the result {r}"),
                        Err(e) => format!("the error {e}"),
                    }
                )
            },
        );
    }

    fn refresh_windows(&mut self, sid: &str) {
        let Some(sess) = self.sessions.get(sid) else {
            return;
        };
        for a in self.adm.values_mut().filter(|a| a.sid == sid) {
            let e = sess.expected(&a.cid, &a.method, &a.params);
            if a.window.last() != Some(&e) {
                a.window.push(e);
            }
        }
        for k in &self.req_links {
            let Some(l) = self.links.get_mut(k) else {
                continue;
            };
            for r in l.reqs.values_mut() {
                if r.sid.as_deref() != Some(sid) {
                    continue;
                }
                if sess.created {
                    r.existed = true;
                }
                if let Some(c) = &r.cid {
                    let e = sess.expected(c, &r.method, &r.params);
                    if r.window.last() != Some(&e) {
                        r.window.push(e);
                    }
                }
            }
        }
    }

    fn host_send(&mut self, h: usize, inc: u64, link: u64, line: &str, now_ms: u64) {
        // A result is read only for a request this link has open whose
        // answer the model reads: a command's, a page's, a pending list's,
        // a `view/subscribe`'s, or a `session/read`'s (see
        // `answered` and `read_answered`; a read's snapshot items as text,
        // see `Sess::judge_snapshot`); any other is only checked.
        let link_st = self.links.get(&link);
        let reqs = link_st.map(|l| &l.reqs);
        let sessions = &self.sessions;
        let first = |id: &Value| {
            let l = link_st?;
            l.reqs.get(&l.first_req(&id.to_string())?)
        };
        // A resume's answer on a durable host whose intake recorded its
        // snapshot items as text: those items, compared as text with the
        // answer's (see `same_recorded`).
        let durable = self.hosts.get(&h).is_some_and(|x| x.durable);
        let rotten = &self.rotten;
        let recorded_items = |r: &Req| -> Option<&[String]> {
            if r.method != "session/resume" || !durable {
                return None;
            }
            let sid = r.sid.as_ref().filter(|s| !rotten.contains_key(*s))?;
            let i = sessions.get(sid)?.ledger.get(&wire::key(r.cid.as_ref()?))?;
            i.answer_items.as_ref().map(std::slice::from_ref)
        };
        let keep = |id: &Value| match first(id) {
            Some(r) if r.method == "session/read" => wire::Keep::ItemsAsText(
                r.sid
                    .as_ref()
                    .and_then(|s| sessions.get(s))
                    .and_then(Sess::items_texts),
            ),
            Some(r) if r.method == "session/resume" && recorded_items(r).is_some() => {
                wire::Keep::ItemsAsText(recorded_items(r))
            }
            Some(r)
                if wire::is_command(&r.method)
                    || r.method == "initialize"
                    || r.method == "view/page"
                    || r.method == "view/subscribe"
                    || r.method == "approval/listPending" =>
            {
                wire::Keep::Whole
            }
            _ => wire::Keep::Nothing,
        };
        // A read's items that are exactly the model's are cut out unread.
        let known: Vec<&[String]> = reqs
            .into_iter()
            .flat_map(|r| r.values())
            .filter_map(|r| match r.method.as_str() {
                "session/read" => r.sid.as_ref().and_then(|s| sessions.get(s))?.items_texts(),
                _ => recorded_items(r),
            })
            .collect();
        // A read's answer as one remembered is not read again (see
        // `wire::ReadMemo`); one not remembered is, and is remembered.
        let plain = wire::plain_response(line);
        let reads_items =
            |n: u64| first(&Value::from(n)).is_some_and(|r| r.method == "session/read");
        let memo = plain.filter(|(n, _)| reads_items(*n)).and_then(|(n, r)| {
            let m = self.read_memo.iter().find(|m| m.result() == r)?;
            Some(m.frame(n, r))
        });
        let hit = memo.is_some();
        let parsed = if hit {
            memo
        } else if known.is_empty() {
            wire::parse_frame_str(line, &keep)
        } else {
            wire::parse_read_frame_str(line, &known, &keep)
        };
        if let (Some((n, r)), false) = (plain, hit) {
            if reads_items(n) {
                let m = parsed
                    .as_ref()
                    .and_then(|(f, items)| wire::ReadMemo::of(n, r, f, *items));
                if let Some(m) = m {
                    if self.read_memo.len() == READ_MEMO_LEN {
                        self.read_memo.remove(0);
                    }
                    self.read_memo.push(m);
                }
            }
        }
        let Some((frame, items)) = parsed else {
            self.rep.fail(
                "view-cursor-order",
                &format!("garbage {link}"),
                format!("host{h} sent a line that is not a JSON-RPC frame on link{link}"),
            );
            return;
        };
        match frame {
            Frame::Response { id, outcome } => {
                if let Err(e) = &outcome {
                    self.error_shape(h, link, e);
                }
                let Some(l) = self.links.get_mut(&link) else {
                    return;
                };
                let Some(req) = l.first_req(&id.to_string()).and_then(|k| l.reqs.remove(&k)) else {
                    // Every request line the host read on this link is
                    // pending until answered: an answer to none is an
                    // answer to a request nobody sent, or a second answer.
                    // Except the refusal of a connection past the limit,
                    // sent as it opens (PROTOCOL.md 1: `-32001`, id null).
                    let limit = id.is_null()
                        && matches!(&outcome, Err(e) if e["code"] == -32001 && e["data"]["kind"] == "overloaded");
                    if limit {
                        return;
                    }
                    self.rep.fail(
                        "admission-decision",
                        &format!("unasked {link} {id}"),
                        format!("host{h} sent an answer with id {id} on link{link}, where no request of that id awaits an answer"),
                    );
                    return;
                };
                if l.reqs.is_empty() {
                    self.req_links.remove(&link);
                }
                self.answered(h, inc, link, req, outcome, items);
            }
            Frame::Notification {
                method,
                params,
                emitted_ms,
            } => {
                // PROTOCOL.md 4.5: frames carry `emittedAtMs` from the
                // host clock (the simulated clock, from START_MS): never
                // absent, never ahead of the send.
                let at = self.rep.at;
                self.rep.check_lazy(
                    (START_MS..=now_ms).contains(&emitted_ms),
                    "admission-decision",
                    || format!("emittedAtMs link{link} {at}"),
                    || format!("host{h} sent {method} on link{link} at {now_ms} ms with emittedAtMs {emitted_ms} (0: absent)"),
                );
                self.notified(h, inc, link, &method, &params, emitted_ms)
            }
            Frame::Request { id, method, params } => {
                self.server_request(h, inc, link, &id, &method, &params)
            }
        }
    }

    /// Every error a host answers, against PROTOCOL.md 3's table (see
    /// `errors`): its kind, its `retryable`, no `internal` error but the
    /// two this host names.
    fn error_shape(&mut self, h: usize, link: u64, e: &Value) {
        self.rep.hit("3 error code, kind and retryable judged");
        if let Some(d) = errors::defect(e) {
            let at = self.rep.at;
            self.rep.fail(
                "admission-decision",
                &format!("error shape link{link} {at}"),
                format!("host{h} answered on link{link} with the error {e}: {d} (PROTOCOL.md 3)"),
            );
        }
    }

    /// PROTOCOL.md 4.1: a `session/resume`'s pending approvals "are
    /// re-issued as `approval/request` right after the response". Owed:
    /// every approval requested at or before the answer's `viewCursor`
    /// and still pending in the durable log as the answer goes out (the
    /// host's memory at the resume held at least those pending).
    fn owe_reissues(&mut self, link: u64, sid: &str, result: &Value) {
        let head = result["viewCursor"]
            .as_str()
            .and_then(|c| wire::cursor_of(sid, c))
            .map_or(0, |(n, _)| n);
        let owed: BTreeSet<String> = self
            .sessions
            .get(sid)
            .map(|x| {
                x.approvals
                    .iter()
                    .filter(|(_, a)| a.resolved.is_none())
                    .filter(|(_, a)| {
                        a.params["viewCursor"]
                            .as_str()
                            .and_then(|c| wire::cursor_of(sid, c))
                            .is_some_and(|(n, _)| n <= head)
                    })
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default();
        if let Some(l) = self.links.get_mut(&link).filter(|_| !owed.is_empty()) {
            l.reissues_owed.insert(sid.to_string(), owed);
        }
    }

    /// The next answer on a link after a resume's: each approval the
    /// resume owed went out before it (a connection's frames leave in
    /// order), unless the session left its holder since (an unload, a
    /// storage failure that dropped its queued frames, a shutdown).
    fn reissues_sent(&mut self, h: usize, inc: u64, link: u64) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        let owed = std::mem::take(&mut l.reissues_owed);
        for (sid, aids) in owed {
            // A rotten log's records past the damage are not read here
            // (bitrot seed 2956: the approval's resolution came after it).
            let excused = self.leases.get(&sid) != Some(&(h, inc))
                || self.dropped.contains(&(h, inc, sid.clone()))
                || self.stopping.contains_key(&(h, inc))
                || self.rotten.contains_key(&sid);
            if excused {
                continue;
            }
            if aids.is_empty() {
                self.rep.hit("4.1 pending approvals re-issued");
            }
            self.rep.check_lazy(aids.is_empty(), "pending-visible", || format!("reissue {link} {sid}"), || {
                format!("session {sid}: the resume answered on link {link} left approvals {aids:?} pending, and the link's next answer came before their approval/request (PROTOCOL.md 4.1: re-issued right after the response)")
            });
        }
    }

    /// A request the host sent on a link. The only one this host sends is
    /// `approval/request`, with the params of the durable
    /// `approval/requested` it follows or re-issues (PROTOCOL.md 4.1, 5);
    /// its ids are integers per connection, from 1 (PROTOCOL.md 2), so
    /// never repeated on a link (JSON-RPC: the client answers by id).
    fn server_request(
        &mut self,
        h: usize,
        inc: u64,
        link: u64,
        id: &Value,
        method: &str,
        params: &Value,
    ) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        let last = l.last_server_id;
        let n = id.as_u64().filter(|&n| n > last);
        self.rep.check(n.is_some(), "pending-visible", &format!("server-id {link} {id}"), || {
            format!("host{h} (incarnation {inc}) sent server request {method} with id {id} on link {link} after id {last}: server request ids are integers per connection, from 1, never repeated")
        });
        if let Some(n) = n {
            l.last_server_id = n;
        }
        if method != "approval/request" {
            self.rep.fail("pending-visible", &format!("server-method {link} {method}"), format!("host{h} sent server request {method} on link {link}: this host's only server request is approval/request"));
            return;
        }
        let sid = params["sessionId"].as_str().unwrap_or_default();
        let aid = params["approvalId"].as_str().unwrap_or_default();
        if let Some(owed) = l.reissues_owed.get_mut(sid) {
            owed.remove(aid);
        }
        let Some(a) = self.sessions.get(sid).and_then(|x| x.approvals.get(aid)) else {
            return;
        };
        let same = a.params == *params;
        if same {
            self.rep.hit("4.1 approval/request judged");
        }
        self.rep.check(same, "pending-visible", &format!("server-params {link} {aid}"), || {
            format!("host{h} sent approval/request {params} on link {link}, not the params of its durable approval/requested {}", a.params)
        });
    }
    /// PROTOCOL.md 4.1: "the host unloads it after `--idle-unload-ms` of
    /// idleness". Called when a link of host `h`'s incarnation `inc`
    /// stopped watching session `sid` (its `view/unsubscribe` answered,
    /// or the link cut): if that host holds it and it is now
    /// idle (no turn running or queued, no task, no approval pending in
    /// its durable log; no other open link of that host subscribed; no
    /// request for it outstanding there; no provider call in flight, nor
    /// one whose answer was lost and which the host may still await), the
    /// holder must write its `closed` record within idle-unload-ms and
    /// its slack ([`IDLE_SLACK_MS`], more under `late-timer`), unless something touches the session first (a
    /// request that is not a pure read, any write to its log, a storage
    /// failure, the holder's death or shutdown). `subscribed`: the link
    /// that stopped watching had a subscription the host kept (not a view
    /// read from the file), so the host saw the session watched until
    /// then, and the idle spell starts no earlier.
    fn watch_idle(&mut self, h: usize, inc: u64, sid: &str, subscribed: bool) {
        if self.idle_unload_ms == 0
            || self.leases.get(sid) != Some(&(h, inc))
            || !self.hosts.get(&h).is_some_and(|x| x.durable && x.alive)
            || self.rotten.contains_key(sid)
            || self.stopping.contains_key(&(h, inc))
            || !self.sessions.get(sid).is_some_and(|x| x.open && x.idle())
        {
            return;
        }
        let watched = self.links.values().any(|l| {
            l.host == h
                && l.inc == inc
                && !l.closed
                && (l.subs.get(sid).is_some_and(|x| x.active)
                    || l.reqs.values().any(|r| {
                        r.sid.as_deref() == Some(sid) && !PURE_READS.contains(&r.method.as_str())
                    }))
        });
        let now = self.last_ms;
        let calling = self
            .effects
            .values()
            .any(|t| t.inflight.contains(&(h, inc)))
            || self.effect_waits.get(&(h, inc)).is_some_and(|t| *t > now);
        if watched || calling {
            return;
        }
        let first_since_ms = match self.idle_watch.get(sid) {
            Some(w) if w.holder == (h, inc) => w.first_since_ms,
            _ => subscribed.then_some(now),
        };
        self.idle_watch.insert(
            sid.to_string(),
            IdleWatch {
                holder: (h, inc),
                since_ms: now,
                first_since_ms,
                due_ms: now + self.idle_unload_ms + self.idle_slack_ms,
            },
        );
    }

    /// PROTOCOL.md 4.1, the other side of [`Model::idle_overdue`]: an
    /// idle unload comes *after* idle-unload-ms of idleness. The holder
    /// wrote its `idle` close `now_ms`, before the watch `w`'s deadline.
    /// The host learns what made the session idle no earlier than the
    /// model does, but an answer the model took as the moment may have
    /// waited on a sync; so only a close in the first half of the period
    /// is surely early.
    fn idle_early(&mut self, sid: &str, w: &IdleWatch, now_ms: u64) {
        let idle_ms = self.idle_unload_ms;
        let Some(since) = w.first_since_ms else {
            return;
        };
        if now_ms >= since + idle_ms / 2 {
            return;
        }
        let (h, inc) = w.holder;
        self.rep.fail(
            "lease-unload",
            &format!("idle-early {sid} {since}"),
            format!("session {sid} became idle on its holder host{h} (incarnation {inc}) no earlier than {since} ms, when a subscribed link left it, and was unloaded as idle at {now_ms} ms (PROTOCOL.md 4.1: unloaded after --idle-unload-ms {idle_ms} of idleness)"),
        );
    }

    /// Fails every watched session whose holder let its idle deadline
    /// pass (alive, and nothing touched the session).
    fn idle_overdue(&mut self, now_ms: u64) {
        let late: Vec<(String, IdleWatch)> = self
            .idle_watch
            .iter()
            .filter(|(_, w)| w.due_ms <= now_ms)
            .map(|(s, w)| (s.clone(), w.clone()))
            .collect();
        for (sid, w) in late {
            self.idle_watch.remove(&sid);
            let (h, inc) = w.holder;
            let idle_ms = self.idle_unload_ms;
            self.rep.fail(
                "lease-unload",
                &format!("idle-kept {sid} {}", w.since_ms),
                format!("session {sid} was idle on its holder host{h} (incarnation {inc}) from {} ms on, with nothing touching it, and was still not unloaded at {now_ms} ms (PROTOCOL.md 4.1: unloaded after --idle-unload-ms {idle_ms} of idleness)", w.since_ms),
            );
        }
    }

    /// PROTOCOL.md 2, the handshake: the first `initialize` a link's host
    /// reads succeeds and a later one is refused `alreadyInitialized`;
    /// any other request the host read before both `initialize` and
    /// `initialized` is refused `notInitialized` (or, for a line it could
    /// not read as a request, `-32600`/`-32700`, which come first in the
    /// error precedence). The host reads a link's lines in order, so the
    /// model's count of the handshake at the request's arrival is the
    /// host's when it handled it.
    fn handshake_kept(&mut self, link: u64, req: &Req, outcome: &Result<Value, Value>) {
        let Some(hs) = req.handshake_at_recv else {
            return;
        };
        let kind = match outcome {
            Ok(_) => None,
            Err(e) => Some((e["code"].as_i64().unwrap_or(0), e["data"]["kind"].as_str())),
        };
        let (ok, rule) = match (req.method.as_str(), hs) {
            ("initialize", 0) => (kind.is_none(), "2 initialize"),
            ("initialize", _) => (
                kind == Some((-32600, Some("alreadyInitialized"))),
                "2 initialize again",
            ),
            (_, 2) => return,
            _ => (
                matches!(kind, Some((-32600, k)) if k != Some("alreadyInitialized"))
                    || matches!(kind, Some((-32700, _))),
                "2 request before the handshake",
            ),
        };
        self.rep.hit(rule);
        let at = self.rep.at;
        self.rep.check_lazy(
            ok,
            "admission-decision",
            || format!("handshake link{link} {at}"),
            || {
                format!(
                    "link{link}: {} read at handshake stage {hs} (0 none, 1 initialize, 2 initialized) answered {}",
                    req.method,
                    match outcome {
                        Ok(_) => "with a result".to_string(),
                        Err(e) => e.to_string(),
                    }
                )
            },
        );
    }

    /// PROTOCOL.md 1 and the public `InitializeResult`
    /// (msp/REFERENCE.md): the host grants no capability whatever is
    /// requested, `experimentalApi` is false, `museHome` is the absolute
    /// data directory (the simulator's `process::DATA_DIR`),
    /// `sessionDurability` is the host's own (fixed at its construction),
    /// `schema` is version 1 with a `sha256:<64 hex>` fingerprint, and the
    /// platform is one the schema names, family and OS agreeing.
    fn initialize_answered(&mut self, h: usize, link: u64, r: &Value) {
        let durable = self.hosts.get(&h).is_some_and(|x| x.durable);
        let durability = if durable { "durable" } else { "ephemeral" };
        let fp = r["schema"]["fingerprint"].as_str().unwrap_or("");
        let fp_ok = fp.strip_prefix("sha256:").is_some_and(|x| {
            x.len() == 64
                && x.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        let platform_ok = matches!(
            (r["platformFamily"].as_str(), r["platformOs"].as_str()),
            (Some("unix"), Some("linux" | "macos")) | (Some("windows"), Some("windows"))
        );
        let ok = r["grantedCapabilities"] == json!([])
            && r["experimentalApi"] == json!(false)
            && r["museHome"] == crate::process::DATA_DIR
            && r["sessionDurability"] == durability
            && r["schema"]["version"] == json!(1)
            && fp_ok
            && platform_ok
            && r["serverInfo"]["name"].is_string()
            && r["serverInfo"]["version"].is_string()
            && r["userAgent"].is_string();
        self.rep.hit("2 initialize result judged");
        let at = self.rep.at;
        self.rep.check_lazy(
            ok,
            "admission-decision",
            || format!("initialize result link{link} {at}"),
            || format!("host{h} ({durability}) answered initialize on link{link} with {r}"),
        );
    }

    /// An answer to `req`; `items`: a read's snapshot items, when they were
    /// kept as text (see `wire::Keep::ItemsAsText`).
    fn answered(
        &mut self,
        h: usize,
        inc: u64,
        link: u64,
        req: Req,
        outcome: Result<Value, Value>,
        items: Option<&str>,
    ) {
        let durable_host = self.hosts.get(&h).is_some_and(|x| x.durable);
        let method = req.method.clone();
        self.reissues_sent(h, inc, link);
        if let Some(x) = &req.refusal {
            return self.refused(h, link, x, &outcome);
        }
        // The command of a refused line, sent again well-formed and
        // admitted: the refusal recorded nothing (PROTOCOL.md 3); the
        // answer itself is judged as any other.
        if let (Some(c), Ok(_)) = (&req.cid, &outcome) {
            if self.refused_cids.remove(&wire::key(c)) {
                self.rep.hit("3 a refused line records nothing");
            }
        }
        if let (Ok(r), "session/resume", Some(s)) = (&outcome, method.as_str(), &req.sid) {
            self.owe_reissues(link, s, r);
        }
        self.backlogs_sent(h, link, &method);
        self.handshake_kept(link, &req, &outcome);
        if let (Ok(r), "initialize") = (&outcome, method.as_str()) {
            self.initialize_answered(h, link, r);
        }
        if let (Err(e), Some(s)) = (&outcome, &req.sid) {
            if e["data"]["reason"] == "logCorrupt" {
                self.log_corrupt_named(h, s, e);
            }
        }
        if let (Ok(r), "view/subscribe", Some(s)) = (&outcome, method.as_str(), &req.sid) {
            self.view_subscribed(h, inc, link, &req, r, s);
        }
        if let (Ok(_), "view/unsubscribe", Some(s)) = (&outcome, method.as_str(), &req.sid) {
            // The host dropped the link from the view when it answered
            // (a link's lines leave in order: what it had queued for the
            // view went before the answer): nothing of the session may
            // follow on this link until it subscribes again.
            let mut was_active = false;
            if let Some(sub) = self.links.get_mut(&link).and_then(|l| l.subs.get_mut(s)) {
                if sub.active {
                    self.rep.hit("4.2 view/unsubscribe ends the view");
                    was_active = sub.from_file.is_none();
                }
                sub.end();
            }
            self.watch_idle(h, inc, s, was_active);
        }
        if !wire::is_command(&method) {
            self.read_answered(h, inc, &req, &outcome, items);
            return;
        }
        let Some(cid) = req.cid.clone() else { return };
        let k = wire::key(&cid);
        let mut sid = req.sid.clone();
        if method == "session/start" && sid.is_none() {
            sid = outcome.as_ref().ok().and_then(|r| sid_of(&r["session"]));
            if let Some(s) = &sid {
                // PROTOCOL.md 2: the host mints a UUIDv7 (from its clock,
                // or derived from the command id, itself a UUIDv7 of the
                // simulated clock).
                let now = self.last_ms;
                self.rep.check(session::minted_by_clock(s, now), "id-minting", &format!("minted-sid {k}"), || {
                    format!("session/start {cid} without a sessionId was answered with session {s}, not a UUIDv7 minted by the clock by {now} ms")
                });
                self.start_sids
                    .entry(k.clone())
                    .or_insert_with(|| s.clone());
            }
        }
        // Subscriptions begin with a start or resume answer.
        if let (Ok(r), Some(s)) = (&outcome, &sid) {
            let floor = match method.as_str() {
                "session/start" => Some(0),
                "session/resume" => {
                    // A suffix streams after the request's cursor; a
                    // snapshot, or no history at all (`excludeItems`),
                    // leaves the link subscribed at the answer's head.
                    let c = match req.params["cursor"].as_str() {
                        Some(c) if r["history"]["mode"] == "none" => Some(c),
                        _ => r["viewCursor"].as_str(),
                    };
                    c.and_then(|c| wire::cursor_of(s, c)).map(|x| x.0)
                }
                _ => None,
            };
            if let Some(f) = floor {
                self.subscribe(link, s, f);
                // The answer of the start that created the session (its
                // intake durable only after the request arrived, nothing
                // of the session durable yet): the link was subscribed
                // before any of its events.
                let created_here = method == "session/start"
                    && self.sessions.get(s).is_some_and(|x| {
                        x.head == 0 && x.ledger.get(&k).is_some_and(|i| i.at >= req.recv_at)
                    });
                if let Some(sub) = self.links.get_mut(&link).and_then(|l| l.subs.get_mut(s)) {
                    sub.stream.from_creation = created_here;
                }
                // The start that created the session is one that reached
                // its host before any byte of the log was written, and
                // whose intake that host incarnation wrote (a successor
                // that loaded a dead creator's unsynced log, or a resent
                // start answered after the first copy created it, is a
                // replay: no broadcast then).
                let by_this_host = self
                    .sessions
                    .get(s)
                    .and_then(|x| x.ledger.get(&k))
                    .is_some_and(|i| i.writer == Some((h, inc)));
                let fresh_file = self.first_append.get(s).is_some_and(|t| *t > req.recv_at);
                if created_here
                    && by_this_host
                    && fresh_file
                    && durable_host
                    && self.started_judged.insert(s.clone())
                {
                    self.started_broadcast(h, inc, link, &req, s);
                }
            }
        }
        // An ephemeral host's session is known by the events it sent; a
        // snapshot resume past what was sent means events nobody saw: the
        // model cannot judge that session's admissions any more.
        if let (Ok(r), Some(s), false) = (&outcome, &sid, durable_host) {
            if method == "session/resume" {
                let head = r["viewCursor"].as_str().and_then(|c| wire::cursor_of(s, c));
                if let (Some((n, _)), Some(sess)) = (head, self.sessions.get_mut(s)) {
                    if n > sess.head {
                        sess.blind = true;
                    }
                }
            }
        }
        let recorded = wire::is_recorded(&outcome);
        let reason = outcome
            .as_ref()
            .err()
            .and_then(wire::rejection)
            .map(str::to_string);
        if reason.as_deref() == Some("command_id_conflict") {
            self.rep.hit("3 reject command_id_conflict");
            let recorded = sid
                .as_ref()
                .and_then(|s| self.sessions.get(s))
                .and_then(|s| s.ledger.get(&k))
                .filter(|i| i.method == method)
                .map(|i| i.params.clone());
            if let (Some(orig), Some(mine)) = (recorded, wire::normalise(&method, &req.params)) {
                if changed_params(&orig, &mine) == 1 {
                    self.rep.hit("4.4 conflicting reuse, one param changed");
                }
            }
            let other = self
                .recv_sigs
                .get(&k)
                .is_some_and(|s| s.iter().any(|x| Some(x) != req.sig.as_ref()));
            self.rep.check(other, "payload-identity", &format!("conflict {k} {}", self.rep.at), || {
                format!("{method} {cid} answered command_id_conflict, but no other payload with that id ever reached a host")
            });
            return;
        }
        if reason.as_deref() == Some("session_id_conflict") {
            self.rep.hit("3 reject session_id_conflict");
            // A start without a session id names the session an earlier
            // answer to the same command id gave it (a host may derive the
            // id from the command's, so that a replay anywhere names the
            // same session); if that session now exists under another
            // start, the conflict is right.
            let (sid, existed) = match (&sid, self.start_sids.get(&k)) {
                (None, Some(minted)) => {
                    let now = self.sessions.get(minted).is_some_and(|x| x.created);
                    (Some(minted.clone()), now)
                }
                _ => (sid.clone(), req.existed),
            };
            let ok = existed
                && sid
                    .as_ref()
                    .and_then(|s| self.sessions.get(s))
                    .is_none_or(|s| s.start_cid.as_deref().map(wire::key) != Some(k.clone()));
            self.rep.check(ok, "admission-decision", &format!("sidconflict {k}"), || {
                format!("session/start {cid} answered session_id_conflict, but its session did not exist under another start")
            });
            return;
        }
        let Some(sid) = sid else { return };
        if self.rotten.contains_key(&sid) {
            self.rotten_answer(h, inc, &sid, &req, &cid, &outcome);
            return;
        }
        if !recorded {
            self.judge_error(h, inc, &sid, &req, &outcome);
            return;
        }
        if wire::CARRIERLESS_METHODS.contains(&method.as_str()) {
            self.carrierless_answered(h, inc, &sid, &req, &cid, outcome);
            return;
        }
        if durable_host {
            // The intake is read in place (it holds the recorded answer,
            // which may be a whole snapshot): no copy of it is made.
            let sess = self.sessions.get(&sid);
            let intake = sess.and_then(|s| s.ledger.get(&k));
            let Some(i) = intake else {
                self.rep.fail(
                    "durable-dedupe",
                    &format!("unsynced {k} {}", self.rep.at),
                    format!("host{h} answered {method} {cid} before its intake record was synced"),
                );
                return;
            };
            if req.sig.as_deref() != Some(i.sig.as_str()) {
                self.rep.fail("payload-identity", &format!("replayed-conflict {k}"), format!("{method} {cid} with another payload than its intake's got a recorded answer instead of command_id_conflict"));
                return;
            }
            let fresh = i.at >= req.recv_at;
            // A durable rejection is final at once; an ack holds until its
            // intake settles otherwise (a failed launch, or abandoned).
            // The allowed answers: the recorded one, and a settlement's
            // rejection after an ack (compared in place; `allowed` is
            // written out only for a failure's message).
            let recorded_allowed = i.answer.is_err() || !req.terminal_at_recv;
            let rejected_later = match (&i.settled, i.answer.is_ok()) {
                (Some(Settle::Rejected(e)), true) => Some(e),
                _ => None,
            };
            let allowed = || {
                let mut allowed: Vec<Value> = Vec::new();
                if recorded_allowed {
                    let whole = whole_answer(&i.answer, i.answer_items_text().as_deref());
                    allowed.push(answer_value(&whole));
                }
                if let Some(e) = rejected_later {
                    allowed.push(json!({"error": e}));
                }
                allowed
            };
            let abandoned = reason.as_deref() == Some("abandoned");
            let ok = if abandoned {
                let want_abandoned = matches!(i.settled, Some(Settle::Abandoned));
                // Naming the command as this request spelled it (echoed
                // as sent) or as its intake did (the answer every replay
                // of it gets): the same UUID either way.
                want_abandoned
                    && outcome
                        .as_ref()
                        .err()
                        .is_some_and(|e| names_command(&e["data"]["commandId"], &cid))
            } else {
                (recorded_allowed && same_recorded(&outcome, items, i))
                    || rejected_later.is_some_and(|e| outcome.as_ref().err() == Some(e))
            };
            let prop = if i.answer.is_err() {
                "rejection-idempotency"
            } else {
                "value-identical-replays"
            };
            let at = self.rep.at;
            self.rep.check_lazy(ok, prop, || format!("replay {k} {at}"), || {
                let got = answer_value(&whole_answer(&outcome, items));
                format!("host{h} answered {method} {cid} with {got}; the ledger allows {:?} (settled {:?})", allowed(), i.settled)
            });
            if !fresh && i.writer.is_some_and(|w| w != (h, inc)) {
                self.rep.hit("4.4 replay after a restart");
            }
            let other_spelling = || {
                let mut raw = req.params.clone();
                if let Some(o) = raw.as_object_mut() {
                    o.remove("commandId");
                }
                raw != i.params
            };
            if !fresh && ok && other_spelling() {
                self.rep.hit("4.4 same payload, other spelling");
            }
            if !fresh {
                self.rep.hit(match (&i.settled, abandoned) {
                    (_, true) => "4.4 replay of an abandoned command",
                    (Some(Settle::Rejected(_)), _) => "4.4 replay of a rejected command",
                    _ => "4.4 replay of an applied command",
                });
            }
            match method.as_str() {
                "session/start" => self.rep.hit(if fresh {
                    "4.1 session/start fresh"
                } else {
                    "4.1 session/start replay"
                }),
                "session/resume" if !fresh => self.rep.hit("4.1 session/resume replay"),
                "session/resume" => self.rep.hit(if req.params["cursor"].is_string() {
                    "4.1 session/resume cursor suffix"
                } else if wire::asks_exclude_items(&req.params) {
                    "4.1 session/resume excludeItems"
                } else {
                    "4.1 session/resume snapshot"
                }),
                _ => {}
            }
            if abandoned {
                self.rep.hit("3 reject abandoned");
            }
            match reason.as_deref() {
                Some("launch_failed") => self.rep.hit("3 reject launch_failed"),
                Some("deferred_start_failed") => self.rep.hit("3 reject deferred_start_failed"),
                _ => {}
            }
        } else {
            // Ephemeral: the first recorded answer is the intake.
            let ek = (h, inc, sid.clone(), k.clone());
            match self.eph_answers.get(&ek).cloned() {
                None => {
                    let sig = req.sig.clone().unwrap_or_default();
                    self.eph_answers.insert(ek, (sig, outcome.clone()));
                    let eph_sid = sid.clone();
                    // Before this command's own effect is owed.
                    let lagged = self.sessions.get(&sid).is_some_and(|s| s.lags());
                    self.eph_owner.entry(eph_sid.clone()).or_insert((h, inc));
                    let sess = self
                        .sessions
                        .entry(eph_sid.clone())
                        .or_insert_with(|| Sess::new(&eph_sid, false));
                    if method == "session/start" {
                        sess.created = true;
                        sess.start_cid = Some(cid.clone());
                    }
                    let norm = wire::normalise(&method, &req.params).unwrap_or_default();
                    let norm_sig = wire::signature(&method, &norm).unwrap_or_default();
                    let decided = false;
                    sess.admit(
                        &mut self.rep,
                        &cid,
                        &method,
                        &norm,
                        norm_sig,
                        (outcome.clone(), None),
                        decided,
                    );
                    let window = self.adm_window(h, inc, &k, &req);
                    let blind = lagged || self.sessions.get(&sid).is_some_and(|s| s.blind);
                    let ok = blind
                        || window.is_empty()
                        || window.iter().any(|e| expected_matches(e, &cid, &outcome));
                    self.rep.check(ok, "admission-decision", &format!("eph {k}"), || {
                        format!("{method} {cid} answered {outcome:?}; the spec allowed {window:?} while it was admitted")
                    });
                    // Its events another link carried first are judged now.
                    self.judge_ahead(h, &sid);
                }
                Some((sig, first)) => {
                    if req.sig.as_deref() != Some(sig.as_str()) {
                        self.rep.fail("payload-identity", &format!("replayed-conflict {k}"), format!("{method} {cid} with another payload got a recorded answer instead of command_id_conflict"));
                    } else {
                        // After an ack, a turn whose input asks for a failed
                        // launch answers that failure (launch_failed when it
                        // started fresh, deferred_start_failed when queued).
                        let disposition = first.as_ref().ok().map(|r| r["disposition"].clone());
                        let failing = self
                            .sessions
                            .get(&sid)
                            .and_then(|s| {
                                s.turns
                                    .iter()
                                    .find(|(t, _)| wire::key(t) == k)
                                    .map(|(_, t)| t)
                            })
                            .is_some_and(|t| t.script.fail_launch || t.st == TurnSt::LaunchFailed);
                        let want = match disposition.as_ref().and_then(Value::as_str) {
                            Some("queued") => Some("deferred_start_failed"),
                            Some("started") => Some("launch_failed"),
                            _ => None,
                        };
                        let ok = outcome == first
                            || (failing && reason.is_some() && reason.as_deref() == want);
                        let prop = if first.is_err() {
                            "rejection-idempotency"
                        } else {
                            "value-identical-replays"
                        };
                        let at = self.rep.at;
                        self.rep.check_lazy(ok, prop, || format!("replay {k} {at}"), || {
                            format!("host{h} answered {method} {cid} with {outcome:?}, first {first:?}")
                        });
                        self.rep.hit("4.4 replay of an applied command");
                    }
                }
            }
        }
    }

    fn carrierless_answered(
        &mut self,
        h: usize,
        inc: u64,
        sid: &str,
        req: &Req,
        cid: &str,
        outcome: Result<Value, Value>,
    ) {
        let k = wire::key(cid);
        let lk = (h, inc, k.clone());
        let sig = req.sig.clone().unwrap_or_default();
        match self.lifetime.get(&lk).cloned() {
            Some(first) => {
                if first.sig != sig {
                    self.rep.fail("payload-identity", &format!("cl-conflict {k}"), format!("{} {cid} with another payload got a recorded answer instead of command_id_conflict", req.method));
                    return;
                }
                self.rep.check(first.answer == outcome, "value-identical-replays", &format!("cl {k} {}", self.rep.at), || {
                    format!("host{h} answered carrier-less {} {cid} with {outcome:?}, earlier {:?} in the same host lifetime", req.method, first.answer)
                });
                self.rep.hit("4.4 carrier-less replay, same host");
                if self.loads.get(sid).copied().unwrap_or(0) > first.loads {
                    self.rep.hit("4.4 carrier-less replay, after reload");
                }
            }
            None => {
                let earlier = self
                    .lifetime
                    .keys()
                    .any(|(hh, ii, kk)| *kk == k && (*hh, *ii) != (h, inc));
                if earlier {
                    self.rep.hit("4.4 carrier-less replay, after restart");
                }
                let durable_intake = self
                    .sessions
                    .get(sid)
                    .and_then(|s| s.ledger.get(&k))
                    .is_some();
                self.rep.check(!durable_intake, "payload-identity", &format!("cl-durable {k}"), || {
                    format!("carrier-less {} {cid} reuses the id of a durable intake and was not refused command_id_conflict", req.method)
                });
                let window = self.adm_window(h, inc, &k, req);
                let ok =
                    window.is_empty() || window.iter().any(|e| expected_matches(e, cid, &outcome));
                let judged = self.sessions.get(sid).is_some_and(|s| !s.blind);
                self.rep.check(!judged || ok, "admission-decision", &format!("cl-decide {k} {h}.{inc}"), || {
                    format!("{} {cid} answered {outcome:?}; the spec allowed {window:?} while it was admitted", req.method)
                });
                if let Ok(r) = &outcome {
                    match req.method.as_str() {
                        "turn/interrupt" => self.rep.hit("4.3 turn/interrupt accepted"),
                        "turn/cancel" => self.rep.hit("4.3 turn/cancel accepted"),
                        "task/stop" => self.rep.hit("4.1 task/stop accepted"),
                        _ => self.rep.hit("4.1 task/stopAll"),
                    }
                    let _ = r;
                }
                if let Some(reason) = outcome.as_ref().err().and_then(wire::rejection) {
                    match reason {
                        "already_terminal" => self.rep.hit("3 reject already_terminal"),
                        "missing_run" => self.rep.hit("3 reject missing_run"),
                        "missing_task" => self.rep.hit("3 reject missing_task"),
                        "not_running" => self.rep.hit("3 reject not_running"),
                        _ => {}
                    }
                }
                let loads = self.loads.get(sid).copied().unwrap_or(0);
                self.lifetime.insert(
                    lk,
                    Lifetime {
                        sid: sid.to_string(),
                        sig,
                        answer: outcome,
                        loads,
                    },
                );
            }
        }
    }

    /// A `logCorrupt` refusal names the damaged file of the session asked
    /// about (its log, or the archive a compaction moved its history to)
    /// and the offset of the bad record (PROTOCOL.md 4.4: "naming the
    /// offset"; `file`, `offset`: the error's data, ext).
    fn log_corrupt_named(&mut self, h: usize, sid: &str, e: &Value) {
        let file = e["data"]["file"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let ours = ["session.log", "history.log"]
            .iter()
            .any(|f| file.ends_with(&format!("/sessions/{sid}/{f}")));
        let ok = ours && e["data"]["offset"].is_u64();
        self.rep.check(ok, "log-integrity", &format!("corrupt-named {sid} {h}"), || {
            format!("host{h} refused session {sid} as logCorrupt naming file {:?} at offset {}, not a file of that session and a byte offset", e["data"]["file"], e["data"]["offset"])
        });
        if ours && file.ends_with("/history.log") {
            self.rep.hit("4.4 corrupt archive named");
        }
    }

    /// An answer about a session whose log rotted: only the host that had
    /// it loaded at the damage (and kept it) may answer from memory; any
    /// other must refuse it (`logCorrupt`, PROTOCOL.md 4.4), never answer
    /// from the damaged log.
    fn rotten_answer(
        &mut self,
        h: usize,
        inc: u64,
        sid: &str,
        req: &Req,
        cid: &str,
        outcome: &Result<Value, Value>,
    ) {
        let method = &req.method;
        let kept_memory = req.rot_memory_loads.is_some()
            && req.rot_memory_loads == Some(self.loads.get(sid).copied().unwrap_or(0));
        // It arrived before the damage and its intake, this host's, was
        // durable before it: the answer was decided then (the recorded
        // one, judged as any replay), whatever loads came after (bitrot
        // seed 1077: the answer waited behind another session's sync
        // while a duplicate copy reloaded the session and found the rot).
        // A copy that arrives after the damage is answered from a load.
        let rot_at = self.rotten.get(sid).copied().unwrap_or(usize::MAX);
        let decided_before = req.recv_at < rot_at
            && self
                .sessions
                .get(sid)
                .and_then(|x| x.ledger.get(&wire::key(cid)))
                .is_some_and(|i| i.writer == Some((h, inc)) && i.at < rot_at);
        // Or its intake is one the holder wrote from memory, never read
        // by the model (not durable at the damage, or written after it).
        let written_from_memory = self
            .rot_memory
            .get(sid)
            .is_some_and(|m| m.holder == (h, inc) && m.intakes.contains(&wire::key(cid)));
        if kept_memory
            || decided_before
            || written_from_memory
            || self.rot_holder.get(sid) == Some(&(h, inc))
        {
            return;
        }
        let refused = outcome.as_ref().err().is_some_and(|e| e["code"] != -32030);
        self.rep.check(refused, "log-integrity", &format!("rot-answer {sid} {h}.{inc}"), || {
            format!("host{h} answered {method} {cid} of session {sid} with {outcome:?} after its log rotted (must refuse: logCorrupt)")
        });
        if outcome
            .as_ref()
            .err()
            .is_some_and(|e| e["data"]["reason"] == "logCorrupt")
        {
            self.rep.hit("4.4 corrupt log refused");
        }
    }

    /// Every decision the spec allowed for a command on host `h` since its
    /// first copy (with the same payload) arrived there.
    fn adm_window(&self, h: usize, inc: u64, k: &str, req: &Req) -> Vec<Expected> {
        let sig = req.sig.clone().unwrap_or_default();
        self.adm
            .get(&(h, inc, k.to_string(), sig))
            .map(|a| a.window.clone())
            .unwrap_or_else(|| req.window.clone())
    }

    /// A non-recorded error: only when its condition held while the
    /// request was handled (PROTOCOL.md 1's precedence and section 3).
    fn judge_error(
        &mut self,
        h: usize,
        inc: u64,
        sid: &str,
        req: &Req,
        outcome: &Result<Value, Value>,
    ) {
        let Err(e) = outcome else { return };
        let code = e["code"].as_i64().unwrap_or(0);
        let k = req.cid.clone().map(|c| wire::key(&c)).unwrap_or_default();
        let me = Some((h, inc));
        let ok = match code {
            -32021 => req.holders.iter().any(|x| x.is_some() && *x != me),
            // Not loaded here and nobody else holding it (else it is
            // `sessionInUse`), at some moment while it was handled.
            -32024 => req.holders.iter().any(|x| x.is_none()),
            -32020 => !req.existed || !self.durable_run,
            -32053..=-32050 => {
                req.window.contains(&Expected::Error(code))
                    || req.window.is_empty()
                    || self.sessions.get(sid).is_some_and(|s| s.blind)
            }
            // The simulated disk fails appends, syncs and reads, and a
            // rotten log's answers are judged before this: an internal
            // error (`storageUnavailable`, `logCorrupt` or none) is right
            // only after a storage failure of this session on this host,
            // one that came before this holder had made the command's
            // intake durable (after, the command was applied), or a
            // failed read of its files there (nothing was loaded).
            -32603 => req.failed_before_intake_durable,
            -32600 => req.refused_before_handshake(e),
            // A resume from a cursor the host does not know: an ephemeral
            // host forgets its sessions' events when it dies; a durable
            // one knows every event that was durable when the request
            // arrived (PROTOCOL.md 4.1).
            -32011 => {
                let n = req.params["cursor"]
                    .as_str()
                    .and_then(|c| wire::cursor_of(sid, c))
                    .map(|(n, _)| n);
                e["data"]["reason"] == "missingAnchor"
                    && req.method == "session/resume"
                    && (!self.hosts.get(&h).is_some_and(|x| x.durable)
                        || n.is_none_or(|n| n > req.floor))
            }
            -32001 => self.stopping_refusal(h, inc),
            // Bad params, unknown method and the rest: no simulated
            // client sends what earns them.
            _ => false,
        };
        if ok && code == -32053 {
            self.rep.hit("4.1 approval/decide requirement stale");
        }
        if ok && code == -32603 && req.cid.is_some() {
            self.rep
                .hit("3 storageUnavailable before the intake was durable");
        }
        if ok && code == -32603 && req.read_failed {
            self.rep.hit("3 storageUnavailable after a failed read");
        }
        self.rep.check(ok, "admission-decision", &format!("err {k} {}", self.rep.at), || {
            format!("host{h} answered {} {} in session {sid} with error {e}, whose condition never held while it was handled (holders {:?}, existed {}, spec {:?})", req.method, k, req.holders, req.existed, req.window)
        });
    }

    // ----- views --------------------------------------------------------

    /// A `view/subscribe` answered (PROTOCOL.md 4.2): `{viewCursor}`, the
    /// session's head; the events after `after` (absent: after the head)
    /// are sent with the answer, with no gap and no repeat, then live ones
    /// while the session is loaded there. `after` is a cursor the session
    /// issued, spelled as the host spells it, never past the head the
    /// answer names; a durable host's head is at least what was durable
    /// when the request arrived.
    fn view_subscribed(&mut self, h: usize, inc: u64, link: u64, req: &Req, r: &Value, sid: &str) {
        let subject = || format!("subscribe {sid} {link}");
        let Some((head, 0)) = r["viewCursor"]
            .as_str()
            .and_then(|c| wire::canonical_cursor_of(sid, c))
        else {
            self.rep.fail("read-consistency", &subject(), format!(
                "host{h} answered view/subscribe of session {sid} with viewCursor {}, not a durable cursor of it", r["viewCursor"]
            ));
            return;
        };
        let after = req.params.get("after").filter(|a| !a.is_null());
        let floor = match after {
            None => head,
            Some(a) => match a.as_str().and_then(|c| wire::canonical_cursor_of(sid, c)) {
                Some((n, _)) if n <= head => n,
                _ => {
                    self.rep.fail("read-consistency", &subject(), format!(
                        "host{h} accepted view/subscribe of session {sid} after {a}, a cursor it never issued (its head #{head}): missingAnchor was due"
                    ));
                    return;
                }
            },
        };
        let durable_host = self.hosts.get(&h).is_some_and(|x| x.durable);
        if durable_host && !self.rotten.contains_key(sid) && head < req.floor {
            self.rep.fail("read-consistency", &subject(), format!(
                "host{h} (incarnation {inc}) answered view/subscribe of session {sid} at head #{head}, behind #{} that was durable when it arrived", req.floor
            ));
        }
        self.rep.hit(if after.is_some() {
            "4.2 view/subscribe after a cursor"
        } else {
            "4.2 view/subscribe from the head"
        });
        // A link never gets an event twice (as after a resume), even in a
        // new view after an unsubscribe: the host skips what it sent. A
        // view read from the file had only its backlog (its host keeps no
        // subscription): a new one starts afresh.
        if let Some(sub) = self.links.get_mut(&link).and_then(|l| l.subs.get_mut(sid)) {
            if sub.from_file.is_some() {
                sub.end();
            }
        }
        self.subscribe(link, sid, floor);
        // Nothing is due from the head, nor what the link already had.
        let holds = self.leases.get(sid) == Some(&(h, inc));
        if let Some(sub) = self.links.get_mut(&link).and_then(|l| l.subs.get_mut(sid)) {
            if head > floor.max(sub.last) {
                sub.due = Some(head);
            }
            sub.from_file = (!holds).then_some(head);
        }
    }

    /// A response on `link`: every `view/subscribe` answered on it before
    /// has had its backlog sent (the host queues it with the answer, and
    /// a link's lines leave in order).
    /// (A rotted session's events are not followed link by link: see
    /// `notified`.)
    fn backlogs_sent(&mut self, h: usize, link: u64, method: &str) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        for (sid, sub) in l.subs.iter_mut() {
            let Some(due) = sub.due.take() else { continue };
            if !sub.active || sub.last >= due || self.rotten.contains_key(sid) {
                continue;
            }
            let last = sub.last;
            self.rep.fail(
                "view-cursor-order",
                &format!("backlog {link} {sid}"),
                format!("link{link}: host{h} answered view/subscribe of session {sid} at head #{due}, but its answer to a later {method} came when the link had the events up to #{last} only"),
            );
        }
    }

    fn subscribe(&mut self, link: u64, sid: &str, floor: u64) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        let sub = l.subs.entry(sid.to_string()).or_default();
        // Whatever the host does with a link it already counts subscribed,
        // the stream is judged afresh from here.
        sub.stream = MsgStream::default();
        if sub.active {
            // A resume on a link the model still counts subscribed (the
            // client may have sent `view/unsubscribe`, which the host
            // honours at once): the view may go on where it was, or
            // start again after the resume's floor (never repeating what
            // the link had: a view from the head had none of the events
            // before it, which a `view/subscribe` after an older cursor
            // asks for).
            let next = floor.max(sub.last) + 1;
            sub.hi = sub.hi.max(next);
            sub.lo = sub.lo.min(next);
            return;
        }
        sub.active = true;
        sub.lo = floor + 1;
        sub.hi = floor.max(sub.last) + 1;
        // A new view orders its frames after the durable events this link
        // had, not after the live frames an ended view carried past them
        // (staged `n.k` cursors of an item the new view's backlog now sends
        // whole, as durable event #n; mixed seed 1892 of 0..10000).
        sub.last_nk = (sub.last, 0);
    }

    /// The answer of the `session/start` that created `sid` left on `link`
    /// of host `h` (incarnation `inc`): PROTOCOL.md 4.1 broadcasts
    /// `session/started` to every initialized connection before the
    /// response. This link had it first; every other link of that host
    /// incarnation initialized before the request arrived (so before the
    /// host handled it) and still open is owed it.
    fn started_broadcast(&mut self, h: usize, inc: u64, link: u64, req: &Req, sid: &str) {
        let sent = |l: &u64| self.started_sent.get(l).is_some_and(|x| x.contains(sid));
        let ready = self.links.get(&link).is_some_and(|l| l.ready_at.is_some());
        self.rep.check(!ready || sent(&link), "view-cursor-order", &format!("started-first {sid}"), || {
            format!("host{h} answered the session/start that created session {sid} on link{link} before sending it session/started (PROTOCOL.md 4.1: broadcast before the response)")
        });
        let owed: Vec<u64> = self
            .links
            .iter()
            .filter(|(id, l)| {
                **id != link
                    && (l.host, l.inc) == (h, inc)
                    && !l.closed
                    && l.ready_at.is_some_and(|t| t < req.recv_at)
            })
            .map(|(id, _)| *id)
            .filter(|id| !sent(id))
            .collect();
        for o in owed {
            self.started_owed
                .entry(o)
                .or_default()
                .insert(sid.to_string());
        }
    }

    fn notified(
        &mut self,
        h: usize,
        inc: u64,
        link: u64,
        method: &str,
        p: &Value,
        emitted_ms: u64,
    ) {
        if method == "session/started" {
            if let Some(sid) = sid_of(&p["session"]) {
                if self
                    .started_owed
                    .get_mut(&link)
                    .is_some_and(|o| o.remove(&sid))
                {
                    self.rep.hit("4.1 session/started broadcast");
                }
                self.started_sent.entry(link).or_default().insert(sid);
            }
            return;
        }
        let Some(sid) = sid_of(p) else { return };
        if method == "session/closed" {
            let reason = p["reason"].as_str().unwrap_or_default();
            let ok = match reason {
                "hostShutdown" => self.stopping.contains_key(&(h, inc)),
                "idle" => true,
                _ => false,
            };
            self.rep.check_lazy(ok, "lease-unload", || format!("closed-reason {sid} {h}.{inc}"), || {
                format!("host{h} (incarnation {inc}) sent session/closed of session {sid} with reason {reason:?}, but it {}", if reason == "hostShutdown" { "was not asked to stop" } else { "is neither idle nor hostShutdown" })
            });
            // An idle unload tells its links after its `closed` record:
            // a session this host holds again, whose log shows it loaded
            // again, is a later load, and this notification waited on its
            // link behind other frames (it says nothing of who subscribes
            // now; lease-handover seed 3550: sent behind another session's
            // gated answer, after a resume on another link had reloaded
            // the session).
            let stale = self.leases.get(&sid) == Some(&(h, inc))
                && self.sessions.get(&sid).is_some_and(|x| x.open);
            if reason == "idle"
                && !stale
                && self.idle_closes.insert((
                    sid.clone(),
                    h,
                    inc,
                    p["viewCursor"].as_str().unwrap_or_default().to_string(),
                ))
            {
                // PROTOCOL.md 4.1: idle means, among the rest, no
                // connection subscribed. A link of this host whose view the
                // host opened (a start, a resume, a subscribe answered) and
                // never ended (no unsubscribe answered, no `session/closed`
                // sent there, the link not closed) is subscribed; a view
                // opened while this host did not hold the session is read
                // from the file and gets no live events (as for a shutdown
                // below), so it holds nothing loaded. Judged
                // at the unload's first notification: the broadcast may
                // reach a slow link after a reload subscribed others.
                let viewer = self.links.iter().find(|(k, l)| {
                    **k != link
                        && l.host == h
                        && l.inc == inc
                        && !l.closed
                        && l.subs
                            .get(&sid)
                            .is_some_and(|x| x.active && x.from_file.is_none())
                });
                if let Some((v, _)) = viewer {
                    let v = *v;
                    self.rep.fail("lease-unload", &format!("idle-subscribed {sid} {h}.{inc}"), format!("host{h} (incarnation {inc}) unloaded session {sid} as idle while link{v} was subscribed to it (PROTOCOL.md 4.1: idle means no connection subscribed)"));
                }
            }
            if let Some(sub) = self.links.get_mut(&link).and_then(|l| l.subs.get_mut(&sid)) {
                sub.end();
            }
            return;
        }
        let Some((n, k)) = p["viewCursor"]
            .as_str()
            .and_then(|c| wire::cursor_of(&sid, c))
        else {
            self.rep.fail(
                "view-cursor-order",
                &format!("nocursor {link} {method}"),
                format!("host{h} sent {method} without a cursor of session {sid}"),
            );
            return;
        };
        let durable_host = self.hosts.get(&h).is_some_and(|x| x.durable);
        if self.rotten.contains_key(&sid) {
            // (bitrot seed 4531: a shutdown's `turn/completed`, queued on
            // a slow link, went out after a duplicate start's load had
            // found the damage.)
            let ok = self.rot_holder.get(&sid) == Some(&(h, inc))
                || self
                    .rot_memory
                    .get(&sid)
                    .is_some_and(|m| m.holder == (h, inc) && n <= m.head);
            self.rep.check(ok, "log-integrity", &format!("rot-event {sid} {h}.{inc}"), || {
                format!("host{h} sent {method} #{n} of session {sid} after its log rotted, from a load of the damaged log")
            });
            return;
        }
        self.link_order(h, link, &sid, method, n, k);
        self.link_stream(link, &sid, method, p, n, k);
        if k > 0 {
            return;
        }
        if durable_host {
            let known = self.sessions.get(&sid).and_then(|s| s.events.get(&n));
            // The backlog of a `view/subscribe` answered by a host that did
            // not hold the session: read from the log file, which another
            // host may have written past its last sync (PROTOCOL.md 4.2:
            // reads fold the log up to its last complete record, as
            // `view/page` and `session/read` do).
            let from_file = self
                .links
                .get(&link)
                .and_then(|l| l.subs.get(&sid))
                .and_then(|sub| sub.from_file)
                .is_some_and(|due| n <= due);
            match known {
                None if from_file => self
                    .rep
                    .hit("4.2 view/subscribe backlog read from the file"),
                None => self.rep.fail(
                    "cursor-uniqueness",
                    &format!("unsynced {sid} {n}"),
                    format!(
                        "host{h} sent {method} #{n} of session {sid} before its record was synced"
                    ),
                ),
                Some((m, q)) => {
                    self.rep.check_lazy(m == method && *q == *p, "cursor-uniqueness", || format!("names {sid} {n}"), || {
                        format!("cursor #{n} of session {sid} names {m} {q} on disk but {method} {p} on link{link}")
                    });
                }
            }
        } else {
            self.eph_owner.entry(sid.clone()).or_insert((h, inc));
            let sess = self
                .sessions
                .entry(sid.clone())
                .or_insert_with(|| Sess::new(&sid, false));
            match sess.events.get(&n).cloned() {
                Some((m, q)) => {
                    self.rep.check_lazy(m == method && q == *p, "cursor-uniqueness", || format!("names {sid} {n}"), || {
                        format!("cursor #{n} of session {sid} named {m} {q} before, now {method} {p}")
                    });
                }
                None => {
                    sess.ahead
                        .insert(n, (method.to_string(), p.clone(), emitted_ms));
                    self.judge_ahead(h, &sid);
                }
            }
        }
    }

    /// Judges an ephemeral session's events in cursor order, as far as they
    /// go without a gap, and without one that names a command its host
    /// received and has not answered yet. The response precedes a
    /// command's events only on the submitter's link (PROTOCOL.md 4.5):
    /// another subscriber's link may carry them first, and on an
    /// ephemeral host the answer is the intake, so the event waits for it.
    /// (It waits only while the submitter's link is open.)
    fn judge_ahead(&mut self, h: usize, sid: &str) {
        loop {
            let Some(sess) = self.sessions.get(sid) else {
                return;
            };
            let n2 = sess.head + 1;
            let Some((m, q, _)) = sess.ahead.get(&n2) else {
                break;
            };
            if self.awaits_answer(sid, m, q) {
                break;
            }
            let sess = self.sessions.get_mut(sid).expect("session");
            let (m, q, t) = sess.ahead.remove(&n2).expect("event");
            let stopping = self
                .hosts
                .get(&h)
                .is_some_and(|x| self.stopping.contains_key(&(h, x.inc)));
            let origin = Origin {
                writer: (h, 0),
                at_ms: t,
                stopping,
            };
            sess.event(&mut self.rep, n2, &m, q, t, origin);
        }
        self.refresh_windows(sid);
    }

    /// Whether event `method` with params `q` of ephemeral session `sid`
    /// names a command its holder received on a link still open, did not
    /// answer yet, and the model has not admitted; or is the `turn/unqueued`
    /// of a turn such a `turn/unqueue` names (the event names the unqueued
    /// submit, not the unqueue).
    fn awaits_answer(&self, sid: &str, method: &str, q: &Value) -> bool {
        let Some(owner) = self.eph_owner.get(sid).copied() else {
            return false;
        };
        let Some(sess) = self.sessions.get(sid) else {
            return false;
        };
        let names = [
            &q["commandId"],
            &q["turnId"],
            &q["decidedByCommandId"],
            &q["item"]["commandId"],
            &q["item"]["turnId"],
        ];
        let unqueued = q["turnId"].as_str().filter(|_| method == "turn/unqueued");
        let pending = |r: &Req| {
            let Some(k) = r.cid.as_deref().map(wire::key) else {
                return false;
            };
            r.sid.as_deref() == Some(sid)
                && !sess.ledger.contains_key(&k)
                && (names
                    .iter()
                    .filter_map(|v| v.as_str())
                    .any(|c| wire::key(c) == k)
                    || (r.method == "turn/unqueue"
                        && unqueued.is_some_and(|t| r.params["turnId"] == t)))
        };
        self.req_links
            .iter()
            .filter_map(|k| self.links.get(k))
            .any(|l| !l.closed && (l.host, l.inc) == owner && l.reqs.values().any(pending))
    }

    /// An agent message as one subscription saw it (PROTOCOL.md 5): deltas
    /// of at most 16 characters that concatenate to its text, opened by an
    /// `item/started` that a link subscribed since before the turn's
    /// message began cannot have missed (a link's frames are sent in the
    /// order they were emitted, to every subscriber).
    fn link_stream(&mut self, link: u64, sid: &str, method: &str, p: &Value, n: u64, k: u64) {
        let Some(sub) = self.links.get_mut(&link).and_then(|l| l.subs.get_mut(sid)) else {
            return;
        };
        if !sub.active {
            return;
        }
        let st = &mut sub.stream;
        let item = &p["item"];
        let item_id = item["itemId"].as_str().unwrap_or_default();
        let is_msg = item["kind"] == "agentMessage";
        let subject = || format!("stream {link} {sid} {n}.{k}");
        if k > 0 {
            st.live_since = Some(st.live_since.map_or(n, |x| x.min(n)));
            match method {
                "item/started" if is_msg => {
                    let ok = item["status"] == "inProgress"
                        && item["revision"] == 1
                        && item["text"] == "";
                    self.rep.check_lazy(ok, "scripted-agent", subject, || {
                        format!("link{link}: agent message {item} opens as other than an empty inProgress revision 1")
                    });
                    let turn = item["turnId"].as_str().unwrap_or_default();
                    st.open
                        .insert(item_id.to_string(), (turn.to_string(), String::new()));
                }
                "item/delta" => {
                    let delta = p["delta"].as_str().unwrap_or_default();
                    let ok = p["field"] == "text"
                        && !delta.is_empty()
                        && delta.chars().count() <= agent::DELTA_CHARS_MAX;
                    self.rep.check_lazy(ok, "scripted-agent", subject, || {
                        format!(
                            "link{link}: item/delta {p} is not 1..={} characters of field text",
                            agent::DELTA_CHARS_MAX
                        )
                    });
                    if let Some((_, acc)) = p["itemId"].as_str().and_then(|i| st.open.get_mut(i)) {
                        acc.push_str(delta);
                    }
                }
                _ => {}
            }
            return;
        }
        match method {
            "turn/started" => {
                let turn = p["turnId"].as_str().unwrap_or_default();
                st.turns.insert(turn.to_string(), n);
            }
            "turn/completed" => {
                let turn = p["turnId"].as_str().unwrap_or_default();
                st.turns.remove(turn);
                // A message this link saw open completes (durably, so on
                // this link) before its turn ends, however the turn ends.
                let open = st.open.iter().find(|(_, (t, _))| t == turn);
                if let Some((item_id, _)) = open {
                    self.rep.fail(
                        "turn-lifecycle",
                        &subject(),
                        format!("link{link}: turn {turn} of session {sid} ended {} while its agent message {item_id}, open on this link, never completed", p["terminal"]),
                    );
                }
            }
            "item/completed" if is_msg && item["revision"] == 2 => {
                let turn = item["turnId"].as_str().unwrap_or_default();
                // Its `item/started` went out after the turn's
                // `turn/started` (#t) and userMessage (#t + 1): a link
                // subscribed since before #t + 1 carried it.
                let live = st.turns.get(turn).is_some_and(|t| {
                    st.from_creation || st.live_since.is_some_and(|live| live <= *t)
                });
                if live {
                    self.rep.hit("5 agent message opened on a live link");
                }
                match st.open.remove(item_id).map(|(_, text)| text) {
                    Some(text) => {
                        self.rep.hit("5 agent message deltas judged");
                        self.rep.check_lazy(item["text"] == text.as_str(), "scripted-agent", subject, || {
                            format!("link{link}: agent message {item_id} completes with text {} but its deltas on this link made {text:?}", item["text"])
                        });
                    }
                    None => {
                        self.rep.check_lazy(!live, "view-cursor-order", subject, || {
                            format!("link{link}: streamed agent message {item_id} of turn {turn} completes, but the link, subscribed since before the turn began, never carried its item/started")
                        });
                    }
                }
            }
            _ => {}
        }
    }

    /// The order rules of one link's view of one session (PROTOCOL.md 4.2,
    /// 4.5): events only while subscribed, cursors strictly increasing, and
    /// durable ones gapless from the subscription point.
    fn link_order(&mut self, h: usize, link: u64, sid: &str, method: &str, n: u64, k: u64) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        let sub = l.subs.entry(sid.to_string()).or_default();
        if !sub.active {
            self.rep.fail(
                "view-cursor-order",
                &format!("unsub {link} {sid}"),
                format!("host{h} sent {method} #{n} of session {sid} on link{link}, which is not subscribed to it"),
            );
            return;
        }
        if (n, k) <= sub.last_nk {
            let last = sub.last_nk;
            self.rep.fail(
                "view-cursor-order",
                &format!("order {link} {sid}"),
                format!("link{link}: {method} at cursor {n}.{k} of session {sid} after {last:?}"),
            );
            return;
        }
        sub.last_nk = (n, k);
        if k > 0 {
            return;
        }
        let ok = n >= sub.lo && n <= sub.hi;
        let (lo, hi) = (sub.lo, sub.hi);
        sub.last = n;
        sub.lo = n + 1;
        sub.hi = n + 1;
        self.rep.check_lazy(ok, "view-cursor-order", || format!("gap {link} {sid}"), || {
            format!("link{link}: durable event #{n} of session {sid} where #{lo}..=#{hi} was due (a gap or a repeat)")
        });
    }

    /// An `approval/listPending` answer of a host that held the session
    /// throughout: it answers from memory, gated on the sync of what it
    /// shows, so it lists an approval only as the log has it (params
    /// value-identical), never one resolved before the request arrived,
    /// and every one pending from arrival to answer, in cursor order.
    fn list_pending_answered(&mut self, h: usize, inc: u64, sid: &str, req: &Req, r: &Value) {
        let (Some(sess), Some(at_recv), true) = (
            self.sessions.get(sid),
            &req.approvals_at_recv,
            req.held_throughout_by(h, inc),
        ) else {
            return;
        };
        self.rep.hit("4.2 approval/listPending judged");
        let listed: Vec<&Value> = r["approvals"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let mut seen = BTreeSet::new();
        let mut last = None;
        let mut why = None;
        for p in &listed {
            let id = p["approvalId"].as_str().unwrap_or_default().to_string();
            let n = p["viewCursor"]
                .as_str()
                .and_then(|c| wire::cursor_of(sid, c));
            match sess.approvals.get(&id) {
                None => why = Some(format!("{id}, which the log never requested")),
                Some(a) if a.params != **p => {
                    why = Some(format!(
                        "{id} as {p}, which the log requested as {}",
                        a.params
                    ))
                }
                Some(_) if at_recv.get(&id) == Some(&false) => {
                    why = Some(format!("{id}, resolved before the request arrived"))
                }
                Some(_) if n <= last => why = Some(format!("{id} out of cursor order")),
                Some(_) => {}
            }
            last = n;
            seen.insert(id);
        }
        if why.is_none() {
            if let Some(id) = sess
                .pending_approvals()
                .iter()
                .map(|a| a.params["approvalId"].as_str().unwrap_or_default())
                .find(|id| at_recv.get(*id) == Some(&true) && !seen.contains(*id))
            {
                why = Some(format!(
                    "not {id}, pending from the request's arrival to its answer"
                ));
            }
        }
        self.rep.check(
            why.is_none(),
            "read-consistency",
            &format!("list-pending {sid} {}", self.rep.at),
            || {
                format!(
                    "host{h} listed the pending approvals of session {sid}: {}",
                    why.clone().unwrap_or_default()
                )
            },
        );
    }

    /// A read refused: only for a condition that held while it was
    /// handled. Reads need no lease (PROTOCOL.md 4.1), so `sessionInUse`
    /// and `sessionNotLoaded` are never right; an internal error needs a
    /// failed append, sync or read of the session there, or a rotten log; `sessionNotFound` needs a session that did not
    /// exist (or a host that forgets, ephemeral); `missingAnchor` is a
    /// page's (judged by [`Model::page_refused`]).
    fn read_refused(&mut self, h: usize, inc: u64, sid: &str, req: &Req, e: &Value) {
        let ok = match e["code"].as_i64().unwrap_or(0) {
            -32001 => self.stopping_refusal(h, inc),
            -32603 => {
                if req.read_failed {
                    self.rep.hit("3 storageUnavailable after a failed read");
                }
                req.storage_failed
                    || (self.rotten.contains_key(sid) && e["data"]["reason"] == "logCorrupt")
            }
            -32600 => req.refused_before_handshake(e),
            -32020 => !req.existed || !self.durable_run,
            -32011 => {
                req.method == "view/page"
                    || (req.method == "view/subscribe" && self.anchor_missing(sid, req))
            }
            _ => false,
        };
        self.rep.check(ok, "read-consistency", &format!("read-refused {sid} {}", self.rep.at), || {
            format!(
                "{} of session {sid} refused with {e}, whose condition never held while it was handled (existed {}, storage failed {})",
                req.method, req.existed, req.storage_failed
            )
        });
    }

    /// Whether host `h` (incarnation `inc`) may answer a request of a
    /// session `-32001 overloaded`: only once its shutdown began. A
    /// stopping host starts no new open or read for a request (PROTOCOL.md
    /// 1: an orderly shutdown unloads and exits; a host that loaded again
    /// whatever its clients resumed might never exit), and the refusal
    /// records nothing. The simulated clients send no more requests at a
    /// time than section 1's limits allow, so no other overload is right.
    fn stopping_refusal(&mut self, h: usize, inc: u64) -> bool {
        let stopping = self.stopping.contains_key(&(h, inc));
        if stopping {
            self.rep.hit("1 overloaded while shutting down");
        }
        stopping
    }

    /// Whether a `view/subscribe` may be refused `missingAnchor`: its
    /// `after` is not a cursor of the session as a host spells one, or
    /// names an event past what was durable when it arrived (a power loss
    /// may have taken it), or the log rotted.
    fn anchor_missing(&mut self, sid: &str, req: &Req) -> bool {
        let after = req.params["after"].as_str();
        let ok = match after.map(|a| wire::canonical_cursor_of(sid, a)) {
            Some(None) => true,
            Some(Some((n, _))) => n > req.floor || self.rotten.contains_key(sid),
            None => false,
        };
        if ok {
            self.rep.hit("4.2 view/subscribe refused missingAnchor");
        }
        ok
    }

    /// A `view/page` refused for what it read. Of a session that existed
    /// when the request arrived and whose log is sound (the simulated disk
    /// never fails a read), a page is never `sessionNotFound` nor
    /// `logCorrupt` (its archive included), and `missingAnchor` only for a
    /// cursor past what was durable then: every durable host can page from
    /// a durable event. (Refusals of the request itself, such as
    /// `notInitialized` on a link whose `initialized` was lost, say
    /// nothing of the log.)
    fn page_refused(&mut self, durable_host: bool, sid: &str, req: &Req, e: &Value) {
        if !durable_host || self.rotten.contains_key(sid) || !req.existed_at_recv {
            return;
        }
        if e["code"] == -32020 || e["data"]["reason"] == "logCorrupt" {
            self.rep.fail(
                "read-consistency",
                &format!("page-refused {sid} {}", self.rep.at),
                format!("session {sid}: view/page of a sound log refused: {e}"),
            );
            return;
        }
        if e["data"]["reason"] != "missingAnchor" {
            return;
        }
        let Some((n, 0)) = req.params["cursor"]
            .as_str()
            .and_then(|c| wire::cursor_of(sid, c))
        else {
            return;
        };
        if n > req.floor {
            // Past what was durable: a power loss may have taken it.
            self.rep.hit("4.2 view/page refused a cursor past the head");
            return;
        }
        self.rep.fail(
            "read-consistency",
            &format!("page-anchor {sid} {}", self.rep.at),
            format!(
                "session {sid}: view/page from cursor #{n} refused missingAnchor, though #{} was durable when it arrived",
                req.floor
            ),
        );
    }

    /// A read (PROTOCOL.md 4.2). A read is not recorded, so the point it
    /// shows is known by its cursor only: it is judged when the model
    /// stands at that cursor (the usual case on a durable host, whose
    /// loaded reads wait for every record they fold to be synced).
    fn read_answered(
        &mut self,
        h: usize,
        inc: u64,
        req: &Req,
        outcome: &Result<Value, Value>,
        items: Option<&str>,
    ) {
        let Some(sid) = req.sid.clone() else { return };
        let durable_host = self.hosts.get(&h).is_some_and(|x| x.durable);
        let r = match outcome {
            Ok(r) => r,
            Err(e) => {
                self.read_refused(h, inc, &sid, req, e);
                if req.method == "view/page" {
                    self.page_refused(durable_host, &sid, req, e);
                }
                return;
            }
        };
        // `view/unsubscribe` answers `{}` whatever the session's state
        // (PROTOCOL.md 4.2: idempotent): it reads nothing, so a damaged
        // log does not bar it.
        if req.method == "view/unsubscribe" {
            return;
        }
        // A durable host answers only for a session that is on its disk:
        // one nobody ever leased nor wrote is `sessionNotFound`.
        let unheard = !self.files.contains_key(&sid)
            && !self.sessions.contains_key(&sid)
            && !self.loads.contains_key(&sid);
        if durable_host && unheard {
            self.rep.fail(
                "read-consistency",
                &format!("read-unknown {sid} {}", self.rep.at),
                format!(
                    "host{h} answered {} of session {sid}, which no host ever leased or wrote",
                    req.method
                ),
            );
            return;
        }
        // A read the holder at the damage had received and not answered
        // then may have been answered from its memory before the damage
        // and sent after it (bitrot seed 727: a page parked behind the
        // holder's sync was answered as the sync ended, then waited on its
        // link behind another session's `session/closed` while the
        // session unloaded, rotted and was reloaded): its answer must then
        // be the history as it was, which the page judge below checks.
        let pending_at_rot = req.rot_memory_loads.is_some()
            && self.rotten.get(&sid).is_some_and(|rot| req.recv_at < *rot);
        if self.rotten.contains_key(&sid)
            && self.rot_holder.get(&sid) != Some(&(h, inc))
            && !pending_at_rot
        {
            self.rep.fail(
                "log-integrity",
                &format!("rot-read {sid} {h}.{inc}"),
                format!(
                    "host{h} answered {} of session {sid} from its damaged log",
                    req.method
                ),
            );
            return;
        }
        if !durable_host
            || (self.rotten.contains_key(&sid) && !(pending_at_rot && req.method == "view/page"))
        {
            return;
        }
        if req.method == "approval/listPending" {
            self.list_pending_answered(h, inc, &sid, req, r);
            return;
        }
        if req.method == "view/page" {
            let (Some(sess), Some(ask)) =
                (self.sessions.get(&sid), page::Ask::of(&sid, &req.params))
            else {
                return;
            };
            let subject = format!("page {sid} {}", self.rep.at);
            // Held by the answering host throughout: served from its
            // memory, where only what it synced is durable.
            let held = req.held_throughout_by(h, inc);
            page::judge(&mut self.rep, &subject, sess, ask, req.floor, held, r);
            return;
        }
        if req.method != "session/read" {
            return;
        }
        let Some(sess) = self.sessions.get(&sid) else {
            return;
        };
        let at = r["viewCursor"]
            .as_str()
            .and_then(|c| wire::cursor_of(&sid, c));
        let subject = format!("read {sid} {}", self.rep.at);
        // Loaded here, or not, at some point while the read was handled.
        let loaded = r["session"]["status"] != "notLoaded";
        // A holder answers from memory, where only what it synced is
        // durable: its read waits for what it shows (a state a storage
        // failure or a power loss could still take back is never shown).
        // A read of the file (not loaded) may show what the file holds.
        if let (Some((n, _)), true) = (at, loaded) {
            let head = sess.head;
            self.rep.check(n <= head, "read-consistency", &subject, || {
                format!("session {sid}: host{h} answered a read of it at cursor {n} from memory while only {head} was durable")
            });
        }
        if at != Some((sess.head, 0)) {
            return;
        }
        let me = Some((h, inc));
        let possible = if loaded {
            req.holders.contains(&me)
        } else {
            req.holders.iter().any(|x| *x != me)
        };
        self.rep.check(possible, "read-consistency", &subject, || {
            format!(
                "session {sid}: host{h} read it as {} though it was {} throughout",
                r["session"]["status"],
                if loaded {
                    "not loaded there"
                } else {
                    "loaded there"
                }
            )
        });
        sess.judge_session_since(&mut self.rep, &subject, &r["session"], loaded, req.recv_at);
        if wire::asks_exclude_items(&req.params) {
            // Metadata only: no snapshot, so nothing of the view to judge.
            let want = wire::no_history("excluded");
            self.rep
                .check(r["history"] == want, "read-consistency", &subject, || {
                    format!(
                        "session {sid}: a read with excludeItems answered history {}",
                        r["history"]
                    )
                });
            sess.judge_pending_requests(&mut self.rep, &subject, &r["pendingRequests"]);
            self.rep.hit("4.2 read excludeItems");
            return;
        }
        let snapshot = &r["history"]["snapshot"];
        sess.judge_snapshot(&mut self.rep, &subject, snapshot, items, false);
        sess.judge_pending_requests(&mut self.rep, &subject, &r["pendingRequests"]);
        // pendingCommands: a log read, identical from every connection:
        // every queued submit durable before the read arrived is listed,
        // nothing listed is settled-before-the-read or carrier-less, in
        // intake order.
        let listed = r["history"]["snapshot"]["state"]["pendingCommands"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut last_seq = 0;
        for c in &listed {
            let cid = c["commandId"].as_str().unwrap_or_default();
            let m = c["method"].as_str().unwrap_or_default();
            let i = sess.ledger.get(&wire::key(cid));
            // An intake the model has not seen yet is one the host wrote
            // and has not synced (a read folds what the file holds).
            let unsynced = self.files.get(&sid).is_some_and(|f| f.consumed < f.len());
            let ok = !wire::CARRIERLESS_METHODS.contains(&m)
                && match i {
                    // Listed as recorded, letter for letter: the key
                    // only found the intake.
                    Some(i) => i.cid == cid && i.method == m && i.seq > last_seq,
                    None => unsynced,
                };
            self.rep.check(ok, "pending-visible", &format!("listed {cid}"), || {
                format!("session {sid}: pendingCommands lists {m} {cid}, which is not a pending intake of it (in intake order)")
            });
            if let Some(i) = i {
                last_seq = i.seq;
            }
        }
        for t in &sess.queue {
            let Some(i) = sess
                .turns
                .get(t)
                .and_then(|x| sess.ledger.get(&wire::key(&x.cid)))
            else {
                continue;
            };
            if i.at < req.recv_at && i.settled.is_none() {
                let shown = listed
                    .iter()
                    .any(|c| c["commandId"].as_str().map(wire::key) == Some(wire::key(&i.cid)));
                self.rep.check(shown, "pending-visible", &format!("unlisted {}", i.cid), || {
                    format!("session {sid}: queued turn/start {} was pending before the read and is missing from pendingCommands {listed:?}", i.cid)
                });
            }
        }
        self.rep.hit("4.4 pendingCommands read");
    }
}

/// How many defined params differ between two normalised payloads (the
/// members of `requirementId` count one each).
fn changed_params(a: &Value, b: &Value) -> usize {
    let keys: BTreeSet<&String> = a
        .as_object()
        .into_iter()
        .chain(b.as_object())
        .flat_map(|o| o.keys())
        .collect();
    keys.into_iter()
        .map(|k| match (&a[k], &b[k]) {
            (x, y) if x == y => 0,
            (x @ Value::Object(_), y @ Value::Object(_)) if k == "requirementId" => {
                changed_params(x, y)
            }
            _ => 1,
        })
        .sum()
}

/// Moves member `k` out of an object, `null` when absent.
fn take_member_of(o: &mut serde_json::Map<String, Value>, k: &str) -> Value {
    o.remove(k).unwrap_or(Value::Null)
}

/// Puts a resume snapshot's items, read as `text` (checked when read),
/// back in their place (`history.snapshot.state.items`) in answer `a`.
fn put_items(a: &mut Result<Value, Value>, text: &str) {
    if let Ok(r) = a {
        wire::put_snapshot_items(r, text);
    }
}

/// Answer `a` whole: its snapshot items, if kept as `text` (`null` in
/// their place), put back.
fn whole_answer(a: &Result<Value, Value>, text: Option<&str>) -> Result<Value, Value> {
    let mut a = a.clone();
    if let Some(t) = text {
        put_items(&mut a, t);
    }
    a
}

/// Whether a command's answer on the wire (`outcome`, its snapshot items
/// as text `items` when they were read so) is the one recorded with
/// intake `i`. Items that are exactly the recorded items' text are the
/// same value (one text reads as one value), so only the rest is compared;
/// any other pair is compared whole, as values.
fn same_recorded(outcome: &Result<Value, Value>, items: Option<&str>, i: &Intake) -> bool {
    let recorded = i.answer_items.as_ref().map(std::slice::from_ref);
    match (items, recorded) {
        (None, None) => *outcome == i.answer,
        (Some(w), Some(r)) if wire::is_array_of(w, r) => *outcome == i.answer,
        _ => {
            whole_answer(outcome, items)
                == whole_answer(&i.answer, i.answer_items_text().as_deref())
        }
    }
}

/// `{"result": ..}` or `{"error": ..}`.
fn answer_value(o: &Result<Value, Value>) -> Value {
    match o {
        Ok(r) => json!({"result": r}),
        Err(e) => json!({"error": e}),
    }
}

/// Whether `echo` names command `cid`: the same UUID, in the spelling of
/// the request or of the first copy (a replay's answer is the first
/// one's), since the ledger compares ids without case.
fn names_command(echo: &Value, cid: &str) -> bool {
    echo.as_str()
        .is_some_and(|e| wire::key(e) == wire::key(cid))
}

/// Whether an answer is what `e` prescribes.
fn expected_matches(e: &Expected, cid: &str, outcome: &Result<Value, Value>) -> bool {
    match (e, outcome) {
        (Expected::Any, _) => true,
        (Expected::Ack(want), Ok(got)) => {
            want == got
                || (names_command(&got["commandId"], cid) && {
                    let mut want = want.clone();
                    want["commandId"] = got["commandId"].clone();
                    &want == got
                })
        }
        (Expected::Reject(reason, extra), Err(err)) => {
            wire::rejection(err) == Some(*reason)
                && names_command(&err["data"]["commandId"], cid)
                && extra.as_ref().is_none_or(|(k, v)| err["data"][k] == *v)
        }
        (Expected::Error(code), Err(err)) => err["code"] == json!(code),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resume's intake whose snapshot items were recorded as `items`
    /// (text, `null` in their place in the answer).
    fn intake(items: &str) -> Intake {
        let answer = json!({"history": {"mode": "snapshot", "snapshot": {"state": {"items": null, "revision": 1}}}, "viewCursor": "v:s:3"});
        let mut i = Intake {
            cid: "c".into(),
            method: "session/resume".into(),
            params: json!({}),
            sig: String::new(),
            answer: Ok(answer),
            answer_items: None,
            settled: None,
            effect: false,
            owed: None,
            seq: 1,
            at: 0,
            writer: None,
        };
        i.answer_items = Some(items[1..items.len() - 1].to_string());
        i
    }

    /// An answer on the wire: the intake's, with items `items` put in
    /// place when `whole`, else `null` there (read as text).
    fn wire_answer(revision: u64, items: &str, whole: bool) -> Result<Value, Value> {
        let mut a = json!({"history": {"mode": "snapshot", "snapshot": {"state": {"items": null, "revision": revision}}}, "viewCursor": "v:s:3"});
        if whole {
            a["history"]["snapshot"]["state"]["items"] = serde_json::from_str(items).unwrap();
        }
        Ok(a)
    }

    /// A wire answer is the recorded one exactly when the two are equal
    /// values, however each side's items were read.
    #[test]
    fn recorded_answers_compare_as_values_with_items_read_as_text() {
        let rec = r#"[{"itemId":"i1","text":"a"},{"itemId":"i2"}]"#;
        let spaced = r#"[ {"text":"a","itemId":"i1"}, {"itemId":"i2"}]"#;
        let other = r#"[{"itemId":"i1","text":"b"},{"itemId":"i2"}]"#;
        let i = intake(rec);
        // The same text: only the rest is compared.
        assert!(same_recorded(&wire_answer(1, rec, false), Some(rec), &i));
        assert!(!same_recorded(&wire_answer(2, rec, false), Some(rec), &i));
        // Other text, the same value: equal; another value: not.
        assert!(same_recorded(
            &wire_answer(1, spaced, false),
            Some(spaced),
            &i
        ));
        assert!(!same_recorded(
            &wire_answer(1, other, false),
            Some(other),
            &i
        ));
        // Items read in place on the wire.
        assert!(same_recorded(&wire_answer(1, rec, true), None, &i));
        assert!(!same_recorded(&wire_answer(1, other, true), None, &i));
        assert!(!same_recorded(&wire_answer(2, rec, true), None, &i));
        // Items recorded in place.
        let mut whole = intake(rec);
        whole.answer_items = None;
        whole.answer = wire_answer(1, rec, true);
        assert!(same_recorded(
            &wire_answer(1, rec, false),
            Some(rec),
            &whole
        ));
        assert!(!same_recorded(
            &wire_answer(1, other, false),
            Some(other),
            &whole
        ));
        assert!(same_recorded(&wire_answer(1, rec, true), None, &whole));
    }
}
