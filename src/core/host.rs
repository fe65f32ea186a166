//! [`Host`]: connections, request dispatch, parking on IO, and the gate
//! that holds every answer and durable event until the log record that
//! justifies it is synced.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Map, Value};

use super::agent::{Agent, AgentFactory};
use super::bugs::{Bug, BugSet};
use super::log_fold::{fold_log, Folded};
use super::record::{Answer, Record};
use super::session::{EventParams, Session};
use super::{
    ConnId, CrashPoint, Durability, EffectOutcome, HistoryResult, HostConfig, LogBytes, OpenMode,
    OpenResult, Output, ReadResult,
};
use crate::proto::envelope::{self, Incoming, RequestId};
use crate::proto::framing::{Line, LineSplitter};
use crate::proto::params::{self, Parsed};
use crate::proto::RpcError;

/// At most this many connections (PROTOCOL.md section 1).
pub const CONNECTIONS_MAX: usize = 256;
/// At most this many unanswered requests per connection.
pub const UNANSWERED_MAX: usize = 1024;
/// An effect whose answer has not come back after this long is `unknown`.
pub const EFFECT_TIMEOUT_MS: u64 = 30_000;
/// A bound on agent steps per drive, so a broken agent cannot spin the host.
const AGENT_STEPS_MAX: usize = 100_000;
/// The default of [`HostConfig::backlog_chunk_events`].
pub const BACKLOG_CHUNK_EVENTS: u64 = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handshake {
    New,
    Initialized,
    Ready,
}

/// Why an outbound frame may not leave yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gate {
    /// The session incarnation whose log must be synced.
    pub slot: u64,
    /// Up to this offset.
    pub upto: u64,
}

#[derive(Debug)]
struct OutFrame {
    line: Vec<u8>,
    gate: Option<Gate>,
    /// A response under this id (replaced by `storageUnavailable` if its
    /// gate can never open).
    response_to: Option<RequestId>,
    /// A view frame of this session incarnation (dropped with it when its
    /// storage fails: the subscription it belonged to is gone).
    view_of: Option<u64>,
    /// The session and durable ordinal of a view event (for the per-
    /// connection delivery mark).
    event: Option<(String, u64)>,
    /// A hole for archived events being read (the history read's token):
    /// nothing behind it leaves until the read fills it.
    hole: Option<u64>,
}

/// What a parked request waits for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Wait {
    /// A session being loaded or unloaded.
    Session(String),
    /// A log read (token).
    Read(u64),
    /// The session's next sync to complete (re-checked then): an intake
    /// without group commit waits for the pipeline to drain, a page for
    /// the log as loaded to be synced.
    SyncIdle(String),
    /// A read of the session's archive (token).
    History(u64),
}

/// The answer an IO wait brought back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum IoAnswer {
    Open(OpenResult),
    Read(ReadResult),
    /// Archive bytes `from..to` (logical offsets).
    History {
        from: u64,
        to: u64,
        result: HistoryResult,
    },
}

/// What an archive read is for.
#[derive(Debug, Clone)]
pub(crate) enum HistoryJob {
    /// A parked request (a replay, a page) resumes with the bytes.
    Parked { conn: ConnId, from: u64, to: u64 },
    /// A subscription's backlog of archived events `from_n..=to_n` fills
    /// the hole of this token in the connection's queue (each frame behind
    /// `gate`); archived events after `to_n` up to `last_n` follow in
    /// another read.
    Backlog {
        conn: ConnId,
        sid: String,
        slot: u64,
        from_n: u64,
        to_n: u64,
        last_n: u64,
        gate: Option<Gate>,
    },
}

/// A completion the core delivers to itself (the ephemeral host's
/// in-memory storage answers synchronously, after the request parked).
#[derive(Debug)]
enum Internal {
    Opened(u64, OpenResult),
    Read(u64, ReadResult),
}

#[derive(Debug)]
struct Parked {
    /// Park order: waiters wake first-parked first, so no connection
    /// starves behind lower-numbered ones.
    seq: u64,
    id: RequestId,
    parsed: Parsed,
    wait: Wait,
    io: Option<IoAnswer>,
}

#[derive(Debug)]
struct Conn {
    splitter: LineSplitter,
    handshake: Handshake,
    inbox: VecDeque<Line>,
    parked: Option<Parked>,
    outq: VecDeque<OutFrame>,
    next_server_request_id: u64,
    /// Highest durable ordinal sent per session.
    delivered: BTreeMap<String, u64>,
    /// Per session, the first durable ordinal of the latest send batch and
    /// the `delivered` mark before it: what the mark goes back to if that
    /// frame is dropped (a subscription that began after the head, say
    /// with `excludeItems`, was sent nothing below its first frame).
    batch_first: BTreeMap<String, (u64, u64)>,
}

/// The durable ordinal of a view frame (`params.viewCursor` is
/// `v:<session>:<n>`; a staged event's `n.k` is not durable).
fn durable_ordinal(line: &[u8]) -> Option<u64> {
    let v: Value = serde_json::from_slice(line).ok()?;
    let cursor = v["params"]["viewCursor"].as_str()?;
    let n: u64 = cursor.rsplit(':').next()?.parse().ok()?;
    (n > 0).then_some(n)
}

/// The outcome of dispatching a request. (It lives for one call, so the
/// size of `Park` does not matter.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum Flow {
    /// Answered (or answer queued behind a gate).
    Done,
    /// Waiting; re-dispatched when the wait ends.
    Park(Wait, Parsed),
}

/// A staged outbound frame of a session, sent to its subscribers after the
/// response of the command that caused it.
#[derive(Debug, Clone)]
pub(crate) enum Staged {
    /// A notification (durable when `durable_at` is set).
    /// The params are kept as the text every subscriber's line holds
    /// (written once, not once per subscriber, and cloned by reference).
    Note {
        method: String,
        params: EventParams,
        emitted_at_ms: u64,
        /// Where a durable event's record ends, and its ordinal `n`.
        durable_at: Option<u64>,
        n: u64,
    },
    /// A server request (`approval/request`).
    Request {
        method: String,
        params: EventParams,
        durable_at: Option<u64>,
    },
}

/// The live state of a running turn (not folded: a crash ends the turn).
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub turn_id: String,
    pub wake_ms: u64,
    pub blocked: bool,
    pub started_ms: u64,
    /// The open agent message: item id and text so far.
    pub message: Option<(String, String)>,
    /// The tool call item awaiting completion by the agent.
    pub open_tool: Option<String>,
}

/// An effect in flight.
#[derive(Debug, Clone)]
pub(crate) struct EffectWait {
    pub session: String,
    /// The loaded incarnation of the session that asked (its `slot`): an
    /// answer or a timeout that outlives it (the session unloaded, perhaps
    /// loaded again after another host recorded the outcome) is not its
    /// to record.
    pub slot: u64,
    pub item_id: String,
    pub turn_id: String,
    pub deadline_ms: u64,
    pub query: bool,
}

/// A loaded session: folded state plus the live machinery around it.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub s: Session,
    pub slot: u64,
    pub appended_bytes: u64,
    pub synced_bytes: u64,
    /// The log's length when it was loaded. A predecessor wrote those
    /// bytes and may not have synced them (a process crash keeps written
    /// bytes that a power loss then drops): they are durable for this
    /// host only once a sync of its own covers them.
    pub loaded_bytes: u64,
    pub sync_in_flight: Option<u64>,
    pub unflushed: Vec<u8>,
    pub unflushed_intakes: usize,
    pub staged: Vec<Staged>,
    pub subscribers: BTreeSet<ConnId>,
    pub run: Option<Run>,
    pub task_ends: BTreeMap<String, u64>,
    pub ephemeral_k: u64,
    pub idle_deadline_ms: Option<u64>,
    pub unloading: bool,
    /// Effects waiting for their decision record to be durable:
    /// `(offset, token, wait, output)`.
    pub pending_effects: Vec<(u64, u64, EffectWait, Output)>,
    /// Physical length of the log file's head snapshot (0: none). Every
    /// offset above is logical; the log file's byte `p >= snap_bytes` is
    /// logical byte `p - snap_bytes + tail_from`.
    pub snap_bytes: u64,
    /// Logical offset of the log file's first byte after its snapshot.
    pub tail_from: u64,
    /// Records appended since the log's last compaction (or since a log
    /// never compacted began).
    pub tail_records: u64,
    /// A compaction is in flight: the archive's length once it is done.
    pub compacting: Option<u64>,
}

impl Loaded {
    /// Offset at which everything committed so far will be durable.
    pub fn end_offset(&self) -> u64 {
        self.appended_bytes + self.unflushed.len() as u64
    }

    /// The log file offset of logical offset `logical`.
    pub fn phys(&self, logical: u64) -> u64 {
        debug_assert!(logical >= self.tail_from, "an offset of the archive");
        logical - self.tail_from + self.snap_bytes
    }

    /// The logical offset of log file offset `phys` (`None` inside the
    /// snapshot: no sync or cut of this session names one).
    pub fn logical(&self, phys: u64) -> Option<u64> {
        phys.checked_sub(self.snap_bytes)
            .map(|p| p + self.tail_from)
    }
}

#[derive(Debug)]
pub(crate) enum Slot {
    Loading,
    Loaded(Box<Loaded>),
}

/// The sans-IO host: see the module docs of [`crate::core`] for the call
/// order.
pub struct Host {
    pub(crate) cfg: HostConfig,
    pub(crate) bugs: BugSet,
    pub(crate) now_ms: u64,
    rng: ChaCha8Rng,
    conns: BTreeMap<ConnId, Conn>,
    pub(crate) sessions: BTreeMap<String, Slot>,
    out: VecDeque<Output>,
    next_token: u64,
    next_slot: u64,
    next_park: u64,
    opens: BTreeMap<u64, String>,
    reads: BTreeMap<u64, ConnId>,
    /// Archive reads in flight.
    history_jobs: BTreeMap<u64, HistoryJob>,
    pub(crate) effects: BTreeMap<u64, EffectWait>,
    /// Synced offsets of session incarnations (`u64::MAX` once unloaded).
    synced: BTreeMap<u64, u64>,
    /// Host-lifetime ledger of the carrier-less rows: signature and answer.
    pub(crate) lifetime_ledger: BTreeMap<String, (String, Answer)>,
    /// The ephemeral host's in-memory logs.
    mem_logs: BTreeMap<String, LogBytes>,
    internal: VecDeque<Internal>,
    pub(crate) agent: Box<dyn Agent>,
    shutting_down: bool,
    /// What the current input touched, so that the end of an input costs
    /// what the input did, not the number of loaded sessions.
    work: Dirty,
}

/// The bookkeeping that keeps [`Host::finish`] proportional to what an input
/// touched. Every set is ordered, so anything iterated from it comes out in
/// the same order as a walk over every session or connection would: the
/// simulator's traces stay bit for bit what they were.
#[derive(Debug, Default)]
struct Dirty {
    /// Sessions handed out by [`Host::loaded_mut`] (or loaded, unloaded or
    /// dropped) since the end of the last input.
    sessions: BTreeSet<String>,
    /// Connections whose queue changed since the end of the last input.
    conns: BTreeSet<ConnId>,
    /// Session incarnations whose synced offset changed since then.
    synced: BTreeSet<u64>,
    /// Connections whose front frame waits for a sync of this incarnation
    /// (may hold stale entries; a woken connection is simply re-examined).
    blocked_on: BTreeMap<u64, BTreeSet<ConnId>>,
    /// Every loaded session's earliest deadline, as `(at_ms, session)`.
    timers: BTreeSet<(u64, String)>,
    /// The deadline each session has in `timers`.
    timer_of: BTreeMap<String, u64>,
    /// Parked connections by park order (first-parked first).
    parked: BTreeMap<u64, ConnId>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("now_ms", &self.now_ms)
            .field("conns", &self.conns.len())
            .field("sessions", &self.sessions.len())
            .finish()
    }
}

impl Host {
    /// A host with the scripted agent.
    pub fn new(cfg: HostConfig, now_ms: u64) -> Host {
        Host::with_agent(
            cfg,
            now_ms,
            super::agent::scripted_factory(),
            BugSet::default(),
        )
    }

    /// A host with a given agent and planted bugs (the simulator's entry).
    pub fn with_agent(cfg: HostConfig, now_ms: u64, agent: AgentFactory, bugs: BugSet) -> Host {
        Host {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            cfg,
            bugs,
            now_ms,
            conns: BTreeMap::new(),
            sessions: BTreeMap::new(),
            out: VecDeque::new(),
            next_token: 1,
            next_slot: 1,
            next_park: 0,
            opens: BTreeMap::new(),
            reads: BTreeMap::new(),
            history_jobs: BTreeMap::new(),
            effects: BTreeMap::new(),
            synced: BTreeMap::new(),
            lifetime_ledger: BTreeMap::new(),
            mem_logs: BTreeMap::new(),
            internal: VecDeque::new(),
            agent: agent(),
            shutting_down: false,
            work: Dirty::default(),
        }
    }

    // ----- inputs -------------------------------------------------------

    /// A connection opened.
    pub fn handle_connect(&mut self, conn: ConnId, now_ms: u64) {
        self.tick(now_ms);
        debug_assert!(
            !self.conns.contains_key(&conn),
            "connection ids are not reused"
        );
        if self.conns.len() >= CONNECTIONS_MAX || self.shutting_down {
            let line =
                envelope::error_line(&Value::Null, &RpcError::overloaded("too many connections"));
            self.out.push_back(Output::Send { conn, line });
            self.out.push_back(Output::Close { conn });
            return;
        }
        self.conns.insert(
            conn,
            Conn {
                splitter: LineSplitter::new(self.cfg.frame_limit_bytes),
                handshake: Handshake::New,
                inbox: VecDeque::new(),
                parked: None,
                outq: VecDeque::new(),
                next_server_request_id: 1,
                delivered: BTreeMap::new(),
                batch_first: BTreeMap::new(),
            },
        );
    }

    /// Bytes arrived on a connection.
    pub fn handle_bytes(&mut self, conn: ConnId, bytes: &[u8], now_ms: u64) {
        self.tick(now_ms);
        let mut lines = Vec::new();
        match self.conns.get_mut(&conn) {
            Some(c) => c.splitter.feed(bytes, &mut lines),
            None => return,
        }
        for line in lines {
            let c = self.conns.get_mut(&conn).expect("connection present");
            if c.parked.is_some() || !c.inbox.is_empty() {
                if c.inbox.len() >= UNANSWERED_MAX {
                    let id = match &line {
                        Line::Frame(b) => match envelope::parse_line(b) {
                            Ok(Incoming::Request { id, .. }) => Some(id),
                            _ => None,
                        },
                        Line::TooLarge => None,
                    };
                    if let Some(id) = id {
                        let l = envelope::error_line(
                            &id,
                            &RpcError::overloaded("too many unanswered requests"),
                        );
                        self.enqueue(conn, l, None, None);
                    }
                    continue;
                }
                c.inbox.push_back(line);
                continue;
            }
            self.process_line(conn, line);
        }
        self.finish();
    }

    /// A connection closed (either side). Its pending frames are dropped.
    pub fn handle_disconnect(&mut self, conn: ConnId, now_ms: u64) {
        self.tick(now_ms);
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        if let Some(p) = &c.parked {
            self.work.parked.remove(&p.seq);
        }
        // Only the sessions it subscribed to are touched.
        let sids: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, slot)| matches!(slot, Slot::Loaded(l) if l.subscribers.contains(&conn)))
            .map(|(sid, _)| sid.clone())
            .collect();
        for sid in sids {
            if let Some(l) = self.loaded_mut(&sid) {
                if l.subscribers.remove(&conn) {
                    self.note_activity(&sid);
                }
            }
        }
        self.reads.retain(|_, c| *c != conn);
        self.finish();
    }

    /// The answer to an [`Output::Open`].
    pub fn handle_opened(&mut self, token: u64, result: OpenResult, now_ms: u64) {
        self.tick(now_ms);
        self.opened(token, result);
        self.finish();
    }

    /// The answer to an [`Output::Read`].
    pub fn handle_read(&mut self, token: u64, result: ReadResult, now_ms: u64) {
        self.tick(now_ms);
        self.read_done(token, result);
        self.finish();
    }

    /// The answer to an [`Output::ReadHistory`].
    pub fn handle_history(&mut self, token: u64, result: HistoryResult, now_ms: u64) {
        self.tick(now_ms);
        match self.history_jobs.remove(&token) {
            Some(HistoryJob::Parked { conn, from, to }) => {
                if let Some(p) = self.conns.get_mut(&conn).and_then(|c| c.parked.as_mut()) {
                    if p.wait == Wait::History(token) {
                        p.io = Some(IoAnswer::History { from, to, result });
                        self.resume_conn(conn);
                    }
                }
            }
            Some(job @ HistoryJob::Backlog { .. }) => self.fill_backlog(token, job, result),
            None => {}
        }
        self.finish();
    }

    fn read_done(&mut self, token: u64, result: ReadResult) {
        if let Some(conn) = self.reads.remove(&token) {
            if let Some(p) = self.conns.get_mut(&conn).and_then(|c| c.parked.as_mut()) {
                if p.wait == Wait::Read(token) {
                    p.io = Some(IoAnswer::Read(result));
                    self.resume_conn(conn);
                }
            }
        }
    }

    /// A sync covering the log file up to `upto_bytes` completed (or the
    /// compaction in flight did: then `upto_bytes` is the new log's
    /// length).
    pub fn handle_synced(&mut self, session: &str, upto_bytes: u64, now_ms: u64) {
        self.tick(now_ms);
        let mut release = false;
        if let Some(l) = self
            .loaded_mut(session)
            .filter(|l| l.sync_in_flight.is_some() && l.logical(upto_bytes) == l.sync_in_flight)
        {
            let upto = l.sync_in_flight.take().expect("checked above");
            debug_assert!(upto >= l.synced_bytes, "synced offsets only grow");
            l.synced_bytes = upto;
            if let Some(archived) = l.compacting.take() {
                // The archive holds everything before the snapshot, synced:
                // those events and answers leave memory.
                debug_assert_eq!(archived, upto, "a compaction covers what it archived");
                l.s.archive_upto(archived);
            }
            let slot = l.slot;
            release = l.unloading && l.synced_bytes == l.appended_bytes && l.unflushed.is_empty();
            self.set_synced(slot, upto);
        }
        if release {
            self.finish_unload(session);
        } else {
            self.maybe_sync(session);
            self.wake_waiters(&Wait::SyncIdle(session.to_string()));
        }
        self.finish();
    }

    /// An append or sync of the session's log failed (disk full, fsync
    /// error). Nothing it covered may be acknowledged: pending answers get
    /// `storageUnavailable`, and the session is dropped from memory so the
    /// next access reloads what the disk really holds.
    pub fn handle_storage_failed(&mut self, session: &str, error: &str, now_ms: u64) {
        self.tick(now_ms);
        if let Some(Slot::Loaded(l)) = self.sessions.remove(session) {
            let slot = l.slot;
            let synced = l.synced_bytes;
            self.agent_forget(&l);
            // View frames of this session already handed to the driver in
            // this drain (the failure is reported while it carries out
            // our outputs) go the way of the queued ones: like a crash, a
            // dropped session says nothing more.
            // Those durable events were counted as delivered when they
            // were popped: they were not, so the connection's mark goes
            // back to just before the first of them (a reload over the
            // same connection would skip them otherwise): to the mark
            // before its batch when it was the batch's first (the one
            // before it was not sent either if the link subscribed after
            // it), else to the ordinal before it (sent in this batch).
            let mut unsent: Vec<(ConnId, u64)> = Vec::new();
            self.out.retain(|o| match o {
                Output::Send { conn, line } => {
                    let view = envelope::is_view_frame_of(line, session);
                    if let Some(n) = view.then(|| durable_ordinal(line)).flatten() {
                        unsent.push((*conn, n));
                    }
                    !view
                }
                _ => true,
            });
            for (conn, n) in unsent {
                let Some(c) = self.conns.get_mut(&conn) else {
                    continue;
                };
                let back = match c.batch_first.get(session) {
                    Some(&(first, before)) if first == n => before,
                    _ => n - 1,
                };
                if let Some(d) = c.delivered.get_mut(session) {
                    *d = (*d).min(back);
                }
            }
            self.work.sessions.insert(session.to_string());
            // Rare: every queue may change, so every connection is looked at.
            self.work.conns.extend(self.conns.keys().copied());
            for c in self.conns.values_mut() {
                let mut kept = VecDeque::new();
                for f in c.outq.drain(..) {
                    if f.view_of == Some(slot) {
                        continue;
                    }
                    match f.gate {
                        Some(g) if g.slot == slot && g.upto > synced => {
                            if let Some(id) = f.response_to {
                                kept.push_back(OutFrame {
                                    line: envelope::error_line(
                                        &id,
                                        &RpcError::storage_unavailable(error),
                                    ),
                                    gate: None,
                                    response_to: None,
                                    view_of: None,
                                    event: None,
                                    hole: None,
                                });
                            }
                        }
                        _ => kept.push_back(f),
                    }
                }
                c.outq = kept;
            }
            self.set_synced(slot, u64::MAX);
            self.effects.retain(|_, e| e.session != session);
            if self.cfg.durability == Durability::Durable {
                self.out.push_back(Output::Release {
                    session: session.to_string(),
                });
            }
            self.wake_waiters(&Wait::Session(session.to_string()));
            self.wake_waiters(&Wait::SyncIdle(session.to_string()));
        }
        self.finish();
    }

    /// An effect finished at its provider.
    pub fn handle_effect_done(&mut self, token: u64, outcome: EffectOutcome, now_ms: u64) {
        self.tick(now_ms);
        if let Some(w) = self.effects.remove(&token) {
            if !w.query {
                self.out
                    .push_back(Output::CrashPoint(CrashPoint::AfterEffectBeforeSettle));
            }
            self.complete_effect(w, outcome);
        }
        self.finish();
    }

    /// Time passed; fire due timers.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        self.tick(now_ms);
        self.fire_timers();
        self.finish();
    }

    /// Orderly shutdown: unload every session (`session/closed`,
    /// `hostShutdown`). Keep driving IO until [`Host::is_quiescent`].
    pub fn shutdown(&mut self, now_ms: u64) {
        self.tick(now_ms);
        self.shutting_down = true;
        let sids: Vec<String> = self.sessions.keys().cloned().collect();
        for sid in sids {
            self.unload(&sid, "hostShutdown");
        }
        self.finish();
    }

    /// No session is loaded or loading and no IO is outstanding: no open,
    /// and no read of a session's files either. A read in flight decides
    /// what its connection is owed (a parked request's answer, or a
    /// backlog whose end, behind a hole, holds that connection's
    /// `session/closed`), so a shutdown waits for it rather than exit with
    /// the connection's fate undecided.
    pub fn is_quiescent(&self) -> bool {
        self.sessions.is_empty()
            && self.out.is_empty()
            && self.opens.is_empty()
            && self.reads.is_empty()
            && self.history_jobs.is_empty()
    }

    /// The next output to carry out.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When [`Host::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<u64> {
        let mut t: Option<u64> = self.work.timers.first().map(|(at, _)| *at);
        let mut min = |v: u64| t = Some(t.map_or(v, |x| x.min(v)));
        for e in self.effects.values() {
            min(e.deadline_ms);
        }
        t
    }

    /// The configuration.
    pub fn config(&self) -> &HostConfig {
        &self.cfg
    }

    // ----- plumbing -----------------------------------------------------

    fn tick(&mut self, now_ms: u64) {
        // The injected clock may stall but never runs backwards for the core.
        self.now_ms = self.now_ms.max(now_ms);
    }

    pub(crate) fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }

    /// A UUIDv7 from the host clock and RNG.
    pub(crate) fn mint_id(&mut self) -> String {
        let hi = self.rng.next_u64() as u128;
        let lo = self.rng.next_u64() as u128;
        crate::proto::ids::mint_uuid_v7(self.now_ms, (hi << 64) | lo)
    }

    /// A loaded session, for changing it. Marks it touched by this input:
    /// the end of the input flushes it, looks at its effects and refreshes
    /// its deadline.
    pub(crate) fn loaded_mut(&mut self, sid: &str) -> Option<&mut Loaded> {
        match self.sessions.get_mut(sid) {
            Some(Slot::Loaded(l)) => {
                if !self.work.sessions.contains(sid) {
                    self.work.sessions.insert(sid.to_string());
                }
                Some(l)
            }
            _ => None,
        }
    }

    /// Records a new synced offset of a session incarnation; connections
    /// waiting on it are looked at by the end of the input.
    fn set_synced(&mut self, slot: u64, upto: u64) {
        self.synced.insert(slot, upto);
        self.work.synced.insert(slot);
    }

    pub(crate) fn loaded(&self, sid: &str) -> Option<&Loaded> {
        match self.sessions.get(sid) {
            Some(Slot::Loaded(l)) => Some(l),
            _ => None,
        }
    }

    pub(crate) fn push_output(&mut self, o: Output) {
        self.out.push_back(o);
    }

    /// Queues a frame for a connection behind everything queued before it.
    pub(crate) fn enqueue(
        &mut self,
        conn: ConnId,
        line: Vec<u8>,
        gate: Option<Gate>,
        response_to: Option<RequestId>,
    ) {
        if let Some(c) = self.conns.get_mut(&conn) {
            let gate = if self.bugs.has(Bug::AckBeforeSync) && response_to.is_some() {
                None
            } else {
                gate
            };
            c.outq.push_back(OutFrame {
                line,
                gate,
                response_to,
                view_of: None,
                event: None,
                hole: None,
            });
            self.work.conns.insert(conn);
        }
    }

    /// Queues a view frame (event or server request) of a loaded session.
    /// `event` is `(session, n)` for a durable event.
    pub(crate) fn enqueue_view(
        &mut self,
        conn: ConnId,
        line: Vec<u8>,
        gate: Option<Gate>,
        slot: u64,
        event: Option<(String, u64)>,
    ) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.outq.push_back(OutFrame {
                line,
                gate,
                response_to: None,
                view_of: Some(slot),
                event,
                hole: None,
            });
            self.work.conns.insert(conn);
        }
    }

    /// The highest durable ordinal of `sid` actually sent on `conn` (by any
    /// incarnation of the session): a new subscription never repeats it.
    pub(crate) fn delivered_upto(&self, conn: ConnId, sid: &str) -> u64 {
        self.conns
            .get(&conn)
            .and_then(|c| c.delivered.get(sid).copied())
            .unwrap_or(0)
    }

    /// The highest durable ordinal of `sid` sent on `conn` or already
    /// queued for it (a frame not yet released, an archived backlog still
    /// being read): a new subscription starts after it. A subscription
    /// ended before its queued frames left (a shutdown's `session/closed`
    /// in the same drain) must not have them sent twice by the next one
    /// (a duplicated resume line answered after it, mixed seed 7086).
    pub(crate) fn sent_or_queued_upto(&self, conn: ConnId, sid: &str) -> u64 {
        let Some(c) = self.conns.get(&conn) else {
            return 0;
        };
        let queued = c
            .outq
            .iter()
            .filter_map(|f| f.event.as_ref())
            .filter(|(s, _)| s == sid)
            .map(|&(_, n)| n);
        let reading = self.history_jobs.values().filter_map(|j| match j {
            HistoryJob::Backlog {
                conn: jc,
                sid: js,
                last_n,
                ..
            } if *jc == conn && js == sid => Some(*last_n),
            _ => None,
        });
        queued
            .chain(reading)
            .fold(self.delivered_upto(conn, sid), u64::max)
    }

    /// Counts `sid`'s durable events up to `n` as sent on `conn` (a
    /// backlog queued ungated, read from the log of a session not loaded
    /// here).
    pub(crate) fn mark_delivered(&mut self, conn: ConnId, sid: &str, n: u64) {
        if let Some(c) = self.conns.get_mut(&conn) {
            let d = c.delivered.entry(sid.to_string()).or_default();
            *d = (*d).max(n);
        }
    }

    /// Queues a response.
    pub(crate) fn respond(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        answer: &Answer,
        gate: Option<Gate>,
    ) {
        let line = match answer {
            Answer::Result(r) => envelope::response_line(id, r),
            Answer::Error(e) => {
                let err = RpcError::from_value(e)
                    .unwrap_or_else(|| RpcError::internal("bad stored error"));
                envelope::error_line(id, &err)
            }
        };
        self.enqueue(conn, line, gate, Some(id.clone()));
    }

    /// [`Host::respond`] with an answer kept as text: an ack's line holds
    /// the text as it is (the same bytes as the tree it was written from);
    /// a rejection goes through [`Host::respond`] like any other.
    pub(crate) fn respond_stored(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        answer: &super::record::StoredAnswer,
        gate: Option<Gate>,
    ) {
        if !answer.is_result() {
            // A rejection's text was checked when read: it parses.
            let answer = answer.to_answer().unwrap_or_else(|why| {
                Answer::Error(RpcError::internal(why.to_string()).to_value())
            });
            return self.respond(conn, id, &answer, gate);
        }
        let line = envelope::response_line_raw(id, answer.raw());
        self.enqueue(conn, line, gate, Some(id.clone()));
    }

    pub(crate) fn respond_err(&mut self, conn: ConnId, id: &RequestId, err: RpcError) {
        let line = envelope::error_line(id, &err);
        self.enqueue(conn, line, None, Some(id.clone()));
    }

    /// An error read off session `sid`'s state in memory, which may hold
    /// records not synced yet (an approval resolved by an interrupt a
    /// moment ago): it goes out once everything appended so far is synced,
    /// and becomes `storageUnavailable` if that sync fails, so a refusal
    /// never reveals state the log may still lose.
    pub(crate) fn respond_err_after_appended(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        sid: &str,
        err: RpcError,
    ) {
        let gate = self
            .loaded(sid)
            .and_then(|l| self.gate_at(l, l.end_offset()));
        let line = envelope::error_line(id, &err);
        self.enqueue(conn, line, gate, Some(id.clone()));
    }

    /// Initialized connections (for broadcasts).
    pub(crate) fn ready_conns(&self) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, c)| c.handshake == Handshake::Ready)
            .map(|(id, _)| *id)
            .collect()
    }

    pub(crate) fn next_server_request_id(&mut self, conn: ConnId) -> u64 {
        let c = self.conns.get_mut(&conn).expect("connection present");
        let id = c.next_server_request_id;
        c.next_server_request_id += 1;
        id
    }

    /// The gate for everything the session has committed so far.
    pub(crate) fn gate_now(&self, sid: &str) -> Option<Gate> {
        let l = self.loaded(sid)?;
        self.gate_at(l, l.end_offset())
    }

    pub(crate) fn gate_at(&self, l: &Loaded, upto: u64) -> Option<Gate> {
        if self.cfg.durability == Durability::Ephemeral || upto <= l.synced_bytes {
            None
        } else {
            Some(Gate { slot: l.slot, upto })
        }
    }

    fn gate_open(&self, g: &Gate) -> bool {
        self.synced.get(&g.slot).is_some_and(|s| *s >= g.upto)
    }

    /// The end of every input: run internal completions, flush sessions,
    /// release frames whose gates opened.
    fn finish(&mut self) {
        for _ in 0..1_000_000 {
            match self.internal.pop_front() {
                Some(Internal::Opened(token, result)) => self.opened(token, result),
                Some(Internal::Read(token, result)) => self.read_done(token, result),
                None => break,
            }
        }
        if self.shutting_down {
            // A session whose load completed after shutdown began (its
            // open was in flight) is unloaded as soon as it is loaded.
            let late: Vec<String> = self
                .sessions
                .iter()
                .filter(|(_, slot)| matches!(slot, Slot::Loaded(l) if !l.unloading))
                .map(|(sid, _)| sid.clone())
                .collect();
            for sid in late {
                self.unload(&sid, "hostShutdown");
            }
        }
        // Only a touched session can have records or frames to flush or a
        // sync to start (a sync completion touches its session too).
        let sids: Vec<String> = self.work.sessions.iter().cloned().collect();
        for sid in &sids {
            self.flush(sid);
        }
        // Only a connection whose queue changed, or whose front frame
        // waited on an incarnation whose synced offset moved, can send.
        for slot in std::mem::take(&mut self.work.synced) {
            if let Some(waiting) = self.work.blocked_on.remove(&slot) {
                self.work.conns.extend(waiting);
            }
        }
        let conn_ids: Vec<ConnId> = std::mem::take(&mut self.work.conns).into_iter().collect();
        let mut sends = Vec::new();
        let mut gated_answer = false;
        for conn in conn_ids {
            let Some(c) = self.conns.get_mut(&conn) else {
                continue;
            };
            c.batch_first.clear();
            loop {
                let (ready, blocked) = match self.conns[&conn].outq.front() {
                    // A hole is looked at again when its read fills it.
                    Some(f) if f.hole.is_some() => (false, None),
                    Some(f) => match f.gate {
                        Some(g) if !self.gate_open(&g) => (false, Some(g.slot)),
                        _ => (true, None),
                    },
                    None => (false, None),
                };
                if let Some(slot) = blocked {
                    self.work.blocked_on.entry(slot).or_default().insert(conn);
                }
                if !ready {
                    break;
                }
                let f = self
                    .conns
                    .get_mut(&conn)
                    .expect("connection present")
                    .outq
                    .pop_front()
                    .expect("front present");
                if let Some((sid, n)) = f.event {
                    let c = self.conns.get_mut(&conn).expect("connection present");
                    let d = c.delivered.entry(sid.clone()).or_default();
                    let before = *d;
                    *d = (*d).max(n);
                    c.batch_first.entry(sid).or_insert((n, before));
                }
                gated_answer |= f.gate.is_some() && f.response_to.is_some();
                sends.push(Output::Send { conn, line: f.line });
            }
        }
        if gated_answer {
            // Intakes are durable; their answers have not left yet.
            self.out
                .push_back(Output::CrashPoint(CrashPoint::AfterIntakeBeforeAck));
        }
        self.out.extend(sends);
        self.release_effects();
        self.refresh_timers();
        self.work.sessions.clear();
        #[cfg(any(test, debug_assertions))]
        self.audit_work();
    }

    /// The sessions touched by this input (in session order), for the end
    /// of the input.
    pub(crate) fn touched_sessions(&self) -> Vec<String> {
        self.work.sessions.iter().cloned().collect()
    }

    /// The earliest deadline of a loaded session: its running turn's wake
    /// time (unless blocked), its tasks' ends, its idle unload.
    fn deadline_of(l: &Loaded) -> Option<u64> {
        let run = l.run.as_ref().filter(|r| !r.blocked).map(|r| r.wake_ms);
        let tasks = l.task_ends.values().copied().min();
        [run, tasks, l.idle_deadline_ms].into_iter().flatten().min()
    }

    /// Re-indexes the deadlines of the sessions this input touched.
    fn refresh_timers(&mut self) {
        let sids: Vec<String> = self.work.sessions.iter().cloned().collect();
        for sid in sids {
            let at = self.loaded(&sid).and_then(Host::deadline_of);
            let old = self.work.timer_of.get(&sid).copied();
            if old == at {
                continue;
            }
            if let Some(old) = old {
                self.work.timers.remove(&(old, sid.clone()));
                self.work.timer_of.remove(&sid);
            }
            if let Some(at) = at {
                self.work.timers.insert((at, sid.clone()));
                self.work.timer_of.insert(sid, at);
            }
        }
    }

    /// Checks the dirty-set bookkeeping against a walk over everything
    /// (tests and debug builds only): no untouched session has anything to
    /// flush, every deadline is indexed, no connection has a sendable
    /// front frame left behind.
    #[cfg(any(test, debug_assertions))]
    fn audit_work(&self) {
        for (sid, slot) in &self.sessions {
            if let Slot::Loaded(l) = slot {
                assert!(l.staged.is_empty(), "{sid}: staged frames left unflushed");
                assert!(l.unflushed.is_empty(), "{sid}: records left unflushed");
                assert_eq!(
                    self.work.timer_of.get(sid).copied(),
                    Host::deadline_of(l),
                    "{sid}: deadline index is stale"
                );
            }
        }
        assert_eq!(self.work.timers.len(), self.work.timer_of.len());
        for sid in self.work.timer_of.keys() {
            assert!(
                matches!(self.sessions.get(sid), Some(Slot::Loaded(_))),
                "{sid}: a deadline indexed for a session that is not loaded"
            );
        }
        for (id, c) in &self.conns {
            if let Some(f) = c.outq.front() {
                assert!(
                    f.hole.is_some() || f.gate.is_some_and(|g| !self.gate_open(&g)),
                    "connection {id} has a sendable frame left in its queue"
                );
            }
        }
    }

    /// Appends the session's unflushed records and sends staged frames to
    /// subscribers behind the right gates; starts a sync if needed.
    pub(crate) fn flush(&mut self, sid: &str) {
        let durable = self.cfg.durability == Durability::Durable;
        let Some(l) = self.loaded_mut(sid) else {
            return;
        };
        let staged = std::mem::take(&mut l.staged);
        let subscribers: Vec<ConnId> = l.subscribers.iter().copied().collect();
        let slot = l.slot;
        let synced_bytes = l.synced_bytes;
        if !l.unflushed.is_empty() {
            let bytes = std::mem::take(&mut l.unflushed);
            l.appended_bytes += bytes.len() as u64;
            if durable {
                self.out.push_back(Output::Append {
                    session: sid.to_string(),
                    bytes,
                });
            } else {
                self.mem_logs
                    .entry(sid.to_string())
                    .or_default()
                    .append(&bytes);
                let l = self.loaded_mut(sid).expect("loaded");
                l.synced_bytes = l.appended_bytes;
                let (slot, s) = (l.slot, l.synced_bytes);
                self.set_synced(slot, s);
            }
        }
        for st in staged {
            let (durable_at, frame) = match &st {
                Staged::Note { durable_at, .. } | Staged::Request { durable_at, .. } => {
                    (*durable_at, st.clone())
                }
            };
            let gate = durable_at
                .filter(|at| durable && *at > synced_bytes)
                .map(|upto| Gate { slot, upto });
            // A durable event's `viewCursor` is `v:<sid>:<n>`.
            let event = match &frame {
                Staged::Note {
                    n,
                    durable_at: Some(_),
                    ..
                } => Some((sid.to_string(), *n)),
                _ => None,
            };
            for conn in &subscribers {
                let line = match &frame {
                    Staged::Note {
                        method,
                        params,
                        emitted_at_ms,
                        ..
                    } => envelope::notification_line_raw(method, params.raw(), *emitted_at_ms),
                    Staged::Request { method, params, .. } => {
                        if !self.conns.contains_key(conn) {
                            continue;
                        }
                        let id = self.next_server_request_id(*conn);
                        envelope::server_request_line_raw(id, method, params.raw())
                    }
                };
                self.enqueue_view(*conn, line, gate, slot, event.clone());
            }
        }
        self.maybe_sync(sid);
    }

    pub(crate) fn maybe_sync(&mut self, sid: &str) {
        if self.cfg.durability != Durability::Durable {
            return;
        }
        let group = self.cfg.group_commit;
        let Some(l) = self.loaded_mut(sid) else {
            return;
        };
        if l.sync_in_flight.is_some() || l.appended_bytes == l.synced_bytes {
            return;
        }
        let intakes = std::mem::take(&mut l.unflushed_intakes);
        l.sync_in_flight = Some(l.appended_bytes);
        let upto = l.appended_bytes;
        debug_assert!(
            group || intakes <= 1,
            "without group commit each intake syncs alone"
        );
        if intakes >= 2 {
            self.out
                .push_back(Output::CrashPoint(CrashPoint::MidGroupCommit));
        }
        let compact_records = self.cfg.compact_records;
        let l = self.loaded_mut(sid).expect("loaded");
        let wants_compaction = compact_records > 0
            && l.tail_records >= compact_records
            && l.appended_bytes - l.tail_from >= l.snap_bytes
            && l.unflushed.is_empty()
            && !l.unloading;
        if wants_compaction {
            // The compaction is this sync: it makes everything appended so
            // far durable (in the archive and the snapshot) and is answered
            // like one.
            debug_assert_eq!(l.s.end_bytes, upto, "the fold covers what was appended");
            let Some(snapshot) = super::snapshot::encode(l.s.to_snapshot()) else {
                // A part of the live state passes the frame limit (a huge
                // item or kv): this log is not compacted; try again after
                // as many records.
                l.tail_records = 0;
                let upto_bytes = l.phys(upto);
                self.out.push_back(Output::Sync {
                    session: sid.to_string(),
                    upto_bytes,
                });
                return;
            };
            let out = Output::Compact {
                session: sid.to_string(),
                log_from_bytes: l.snap_bytes,
                log_len_bytes: l.phys(upto),
                archive_len_bytes: l.tail_from,
                snapshot,
            };
            if let Output::Compact { snapshot, .. } = &out {
                l.snap_bytes = snapshot.len() as u64;
            }
            l.tail_from = upto;
            l.tail_records = 0;
            l.compacting = Some(upto);
            self.out.push_back(out);
            return;
        }
        let upto_bytes = l.phys(upto);
        self.out.push_back(Output::Sync {
            session: sid.to_string(),
            upto_bytes,
        });
    }

    /// Commits a record: folds it into the session and queues its bytes.
    /// Returns the offset at which it will be durable.
    pub(crate) fn commit(&mut self, sid: &str, rec: Record) -> u64 {
        self.commit_with(sid, rec, None)
    }

    /// [`Host::commit`] of an event record, with the `tree` its params
    /// text was written from (the fold reads it instead of the text).
    pub(crate) fn commit_with(&mut self, sid: &str, rec: Record, tree: Option<&Value>) -> u64 {
        let in_memory_only = self.bugs.has(Bug::DedupeInMemoryOnly)
            && matches!(rec, Record::Received { .. } | Record::Settled { .. });
        let l = self.loaded_mut(sid).expect("commit to a loaded session");
        if in_memory_only {
            let end = l.end_offset();
            l.s.apply_with(rec, end, tree);
            return end;
        }
        let bytes = rec.encode();
        let end = l.end_offset() + bytes.len() as u64;
        debug_assert_eq!(
            l.s.end_bytes,
            l.end_offset(),
            "the fold is at the log's end"
        );
        if matches!(rec, Record::Received { .. }) {
            l.unflushed_intakes += 1;
        }
        l.s.apply_with(rec, end, tree);
        l.unflushed.extend_from_slice(&bytes);
        l.tail_records += 1;
        end
    }

    /// Connections parked on `wait`, first-parked first.
    fn waiting_on(&self, wait: &Wait) -> Vec<ConnId> {
        self.work
            .parked
            .values()
            .copied()
            .filter(|id| {
                self.conns
                    .get(id)
                    .and_then(|c| c.parked.as_ref())
                    .is_some_and(|p| &p.wait == wait)
            })
            .collect()
    }

    fn wake_waiters(&mut self, wait: &Wait) {
        for conn in self.waiting_on(wait) {
            self.resume_conn(conn);
        }
    }

    fn wake_waiters_with(&mut self, wait: &Wait, io: IoAnswer) {
        let waiters = self.waiting_on(wait);
        // The last waiter takes the answer itself: it may hold a whole log.
        let last = waiters.len().saturating_sub(1);
        let mut io = Some(io);
        for (i, conn) in waiters.into_iter().enumerate() {
            let answer = if i == last { io.take() } else { io.clone() };
            if let Some(p) = self.conns.get_mut(&conn).and_then(|c| c.parked.as_mut()) {
                p.io = answer;
            }
            self.resume_conn(conn);
        }
    }

    /// Re-dispatches a parked request, then drains the connection's inbox
    /// while nothing parks.
    fn resume_conn(&mut self, conn: ConnId) {
        let Some(p) = self.conns.get_mut(&conn).and_then(|c| c.parked.take()) else {
            return;
        };
        self.work.parked.remove(&p.seq);
        match self.dispatch(conn, &p.id, p.parsed, p.io) {
            Flow::Done => {}
            Flow::Park(wait, parsed) => {
                self.park(conn, p.id, wait, parsed);
                return;
            }
        }
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if c.parked.is_some() {
                return;
            }
            let Some(line) = c.inbox.pop_front() else {
                return;
            };
            self.process_line(conn, line);
        }
    }

    fn park(&mut self, conn: ConnId, id: RequestId, wait: Wait, parsed: Parsed) {
        self.next_park += 1;
        let seq = self.next_park;
        if let Some(c) = self.conns.get_mut(&conn) {
            self.work.parked.insert(seq, conn);
            c.parked = Some(Parked {
                seq,
                id,
                parsed,
                wait,
                io: None,
            });
        }
    }

    // ----- requests -----------------------------------------------------

    fn process_line(&mut self, conn: ConnId, line: Line) {
        let bytes = match line {
            Line::TooLarge => {
                let l = envelope::error_line(
                    &Value::Null,
                    &RpcError::input_too_large(self.cfg.frame_limit_bytes),
                );
                self.enqueue(conn, l, None, None);
                return;
            }
            Line::Frame(b) => b,
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match envelope::parse_line(&bytes) {
            Err(e) => {
                let l = envelope::error_line(&e.id, &e.error);
                self.enqueue(conn, l, None, None);
            }
            Ok(Incoming::Notification { method }) => {
                let c = self.conns.get_mut(&conn).expect("connection present");
                if method == "initialized" && c.handshake == Handshake::Initialized {
                    c.handshake = Handshake::Ready;
                }
            }
            Ok(Incoming::Response { .. }) => {}
            Ok(Incoming::Request { id, method, params }) => {
                self.request(conn, id, &method, &params)
            }
        }
    }

    /// A request, refused in PROTOCOL.md 1's precedence (initialization,
    /// method, params, then the rest in [`Host::dispatch`]).
    fn request(
        &mut self,
        conn: ConnId,
        id: RequestId,
        method: &str,
        params: &Result<Map<String, Value>, RpcError>,
    ) {
        let handshake = self.conns[&conn].handshake;
        if method == "initialize" {
            if handshake != Handshake::New {
                return self.respond_err(conn, &id, RpcError::already_initialized());
            }
            let parsed = params
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|p| params::parse_request(method, p));
            match parsed {
                Ok(_) => {
                    let result = self.initialize_result();
                    self.conns.get_mut(&conn).expect("present").handshake = Handshake::Initialized;
                    self.respond(conn, &id, &Answer::Result(result), None);
                }
                Err(e) => self.respond_err(conn, &id, e),
            }
            return;
        }
        if handshake != Handshake::Ready {
            return self.respond_err(conn, &id, RpcError::not_initialized());
        }
        if !params::is_known_method(method) {
            return self.respond_err(conn, &id, RpcError::method_not_found(method));
        }
        let params = match params {
            Ok(p) => p,
            Err(e) => return self.respond_err(conn, &id, e.clone()),
        };
        let parsed = match params::parse_request(method, params) {
            Ok(p) => p,
            Err(e) => return self.respond_err(conn, &id, e),
        };
        match self.dispatch(conn, &id, parsed, None) {
            Flow::Done => {}
            Flow::Park(wait, parsed) => self.park(conn, id, wait, parsed),
        }
    }

    fn initialize_result(&self) -> Value {
        let version = env!("CARGO_PKG_VERSION");
        json!({
            "serverInfo": {"name": "msp", "version": version},
            "userAgent": format!("msp/{version} ({}; {})", std::env::consts::OS, std::env::consts::ARCH),
            "museHome": self.cfg.data_dir,
            "platformFamily": if cfg!(windows) { "windows" } else { "unix" },
            "platformOs": if cfg!(target_os = "macos") { "macos" } else if cfg!(windows) { "windows" } else { "linux" },
            "schema": {"version": 1, "fingerprint": super::SCHEMA_FINGERPRINT},
            "grantedCapabilities": [],
            "experimentalApi": false,
            "sessionDurability": self.cfg.durability.as_str(),
        })
    }

    fn dispatch(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        parsed: Parsed,
        io: Option<IoAnswer>,
    ) -> Flow {
        match parsed {
            Parsed::Initialize => unreachable!("initialize is handled before dispatch"),
            Parsed::Read(r) => self.read(conn, id, r, io),
            Parsed::Command(c) => self.command(conn, id, c, io),
        }
    }

    // ----- sessions: open, load, unload ------------------------------------

    /// Whether a request that needs a session not loaded here (an open,
    /// or a read of its files) must be refused because a shutdown began;
    /// if so it is answered `-32001 overloaded` (retryable: nothing was
    /// recorded, and the next host serves it). A stopping host starts no
    /// new IO for a request, so its shutdown ends once the IO already in
    /// flight does, whatever its clients send: a client that resumes on
    /// every `session/closed` would otherwise have each session loaded
    /// and unloaded again for ever.
    pub(crate) fn refused_while_stopping(&mut self, conn: ConnId, id: &RequestId) -> bool {
        if self.shutting_down {
            self.respond_err(conn, id, RpcError::overloaded("the host is shutting down"));
        }
        self.shutting_down
    }

    /// Starts loading a session (or waits for a load in progress).
    pub(crate) fn request_open(&mut self, sid: &str, mode: OpenMode) -> Wait {
        debug_assert!(!self.shutting_down, "a stopping host loads nothing new");
        if !self.sessions.contains_key(sid) {
            self.sessions.insert(sid.to_string(), Slot::Loading);
            let token = self.token();
            self.opens.insert(token, sid.to_string());
            match self.cfg.durability {
                Durability::Durable => self.out.push_back(Output::Open {
                    session: sid.to_string(),
                    mode,
                    token,
                }),
                Durability::Ephemeral => {
                    let result = match (self.mem_logs.get(sid), mode) {
                        (Some(log), _) => OpenResult::Opened { log: log.clone() },
                        (None, OpenMode::Create) => OpenResult::Opened {
                            log: LogBytes::default(),
                        },
                        (None, OpenMode::Existing) => OpenResult::NotFound,
                    };
                    self.internal.push_back(Internal::Opened(token, result));
                }
            }
        }
        Wait::Session(sid.to_string())
    }

    /// Starts a lock-free log read for a parked request.
    /// `history`: also read the session's archive (a page or subscription
    /// of a session loaded nowhere folds its whole history).
    pub(crate) fn request_read(&mut self, conn: ConnId, sid: &str, history: bool) -> Wait {
        debug_assert!(!self.shutting_down, "a stopping host reads nothing new");
        let token = self.token();
        match self.cfg.durability {
            Durability::Durable => {
                self.reads.insert(token, conn);
                self.out.push_back(Output::Read {
                    session: sid.to_string(),
                    token,
                    history,
                });
            }
            Durability::Ephemeral => {
                // Answered synchronously through the same path. An
                // ephemeral host never compacts: there is no archive.
                let result = match self.mem_logs.get(sid) {
                    Some(log) => ReadResult::Found {
                        log: log.clone(),
                        history: LogBytes::default(),
                        held_elsewhere: false,
                    },
                    None => ReadResult::NotFound,
                };
                self.reads.insert(token, conn);
                self.internal.push_back(Internal::Read(token, result));
            }
        }
        Wait::Read(token)
    }

    /// Starts a read of archive bytes `from..to` for a parked request.
    pub(crate) fn request_history(&mut self, conn: ConnId, sid: &str, from: u64, to: u64) -> Wait {
        let token = self.token();
        self.history_jobs
            .insert(token, HistoryJob::Parked { conn, from, to });
        self.push_history_read(sid, token, from, to);
        Wait::History(token)
    }

    fn push_history_read(&mut self, sid: &str, token: u64, from: u64, to: u64) {
        debug_assert!(from < to, "an archive read reads something");
        debug_assert!(
            self.cfg.durability == Durability::Durable,
            "only durable sessions have archives"
        );
        self.out.push_back(Output::ReadHistory {
            session: sid.to_string(),
            token,
            from_bytes: from,
            to_bytes: to,
        });
    }

    /// The absolute path of a session's archive.
    pub(crate) fn archive_path(&self, sid: &str) -> String {
        format!(
            "{}/sessions/{}/history.log",
            self.cfg.data_dir.trim_end_matches('/'),
            sid
        )
    }

    /// Queues a hole for archived events `from_n..=last_n` of a loaded
    /// session on `conn` and reads the first chunk of them; live frames
    /// queued behind the hole wait for it.
    pub(crate) fn enqueue_backlog_hole(
        &mut self,
        conn: ConnId,
        sid: &str,
        from_n: u64,
        last_n: u64,
        gate: Option<Gate>,
    ) {
        let Some(l) = self.loaded(sid) else { return };
        let slot = l.slot;
        let chunk = self.cfg.backlog_chunk_events.max(1);
        let to_n = last_n.min(from_n + chunk - 1);
        let (from, to) = super::view::archived_range(&l.s, from_n, to_n);
        let token = self.token();
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.outq.push_back(OutFrame {
            line: Vec::new(),
            gate: None,
            response_to: None,
            view_of: Some(slot),
            event: None,
            hole: Some(token),
        });
        self.work.conns.insert(conn);
        self.history_jobs.insert(
            token,
            HistoryJob::Backlog {
                conn,
                sid: sid.to_string(),
                slot,
                from_n,
                to_n,
                last_n,
                gate,
            },
        );
        self.push_history_read(sid, token, from, to);
    }

    /// A backlog read came back: its events take the hole's place (and the
    /// next chunk's hole follows them). A backlog that cannot be read ends
    /// the connection: the client resumes from the last cursor it got.
    fn fill_backlog(&mut self, token: u64, job: HistoryJob, result: HistoryResult) {
        let HistoryJob::Backlog {
            conn,
            sid,
            slot,
            from_n,
            to_n,
            last_n,
            gate,
        } = job
        else {
            return;
        };
        let Some(pos) = self
            .conns
            .get(&conn)
            .and_then(|c| c.outq.iter().position(|f| f.hole == Some(token)))
        else {
            return;
        };
        // The session left memory (shutdown) with its backlog half sent:
        // the connection ends like a failed read, and the client resumes.
        let from = match self.loaded(&sid) {
            Some(l) if l.slot == slot => Some(super::view::archived_range(&l.s, from_n, to_n).0),
            _ => None,
        };
        let events = match (result, from) {
            (HistoryResult::Found(bytes), Some(from)) => {
                super::view::archived_events(&bytes, from, from_n, to_n).map_err(|c| c.detail)
            }
            (HistoryResult::Failed(e), _) => Err(e),
            (_, None) => Err("the session was unloaded".into()),
        };
        let events = match events {
            Ok(ev) => ev,
            Err(_) => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.outq.truncate(pos);
                }
                self.out.push_back(Output::Close { conn });
                return;
            }
        };
        let mut frames: Vec<OutFrame> = events
            .into_iter()
            .map(|e| OutFrame {
                line: envelope::notification_line_raw(&e.method, e.params.raw(), e.emitted_at_ms),
                gate,
                response_to: None,
                view_of: Some(slot),
                event: Some((sid.clone(), e.n)),
                hole: None,
            })
            .collect();
        let more = to_n < last_n;
        let c = self.conns.get_mut(&conn).expect("connection present");
        let rest = c.outq.split_off(pos + 1);
        c.outq.pop_back();
        c.outq.extend(frames.drain(..));
        let hole_at = c.outq.len();
        c.outq.extend(rest);
        self.work.conns.insert(conn);
        if more {
            // The next chunk's hole goes where this one was filled up to.
            let rest = self
                .conns
                .get_mut(&conn)
                .expect("connection present")
                .outq
                .split_off(hole_at);
            self.enqueue_backlog_hole(conn, &sid, to_n + 1, last_n, gate);
            self.conns
                .get_mut(&conn)
                .expect("connection present")
                .outq
                .extend(rest);
        }
    }

    fn opened(&mut self, token: u64, result: OpenResult) {
        let Some(sid) = self.opens.remove(&token) else {
            return;
        };
        debug_assert!(matches!(self.sessions.get(&sid), Some(Slot::Loading)));
        let result = match result {
            OpenResult::InUse { log } if self.bugs.has(Bug::LeaseNotChecked) => {
                OpenResult::Opened { log }
            }
            r => r,
        };
        match result {
            OpenResult::Opened { log } => match self.load(&sid, &log) {
                Ok(()) => self.wake_waiters(&Wait::Session(sid)),
                Err(e) => {
                    self.sessions.remove(&sid);
                    if self.cfg.durability == Durability::Durable {
                        self.out.push_back(Output::Release {
                            session: sid.clone(),
                        });
                    }
                    self.wake_waiters_with(
                        &Wait::Session(sid),
                        IoAnswer::Open(OpenResult::Failed(e)),
                    );
                }
            },
            other => {
                self.sessions.remove(&sid);
                self.wake_waiters_with(&Wait::Session(sid), IoAnswer::Open(other));
            }
        }
    }

    /// Folds a log into a loaded session; runs recovery when the last
    /// holder died. `Err` carries a `logCorrupt` error (as JSON text).
    fn load(&mut self, sid: &str, log: &LogBytes) -> Result<(), String> {
        // Each record is folded as soon as it is decoded (a long log's
        // decoded records are never all in memory at once); a simulation
        // folds only what was appended since its last load of this log.
        let folded = fold_log(sid, log).map_err(|c| {
            let file = self.log_path(sid);
            RpcError::log_corrupt(&file, c.offset, &c.detail)
                .to_value()
                .to_string()
        })?;
        let Folded {
            mut s,
            shape,
            tail_records,
        } = folded;
        let (snapshot_bytes, archive_len) = (shape.snapshot_bytes, shape.archive_len);
        let logical = |phys: u64| phys - snapshot_bytes + archive_len;
        let (decoded_valid_len, decoded_torn) = (shape.valid_len, shape.torn);
        let mut valid_len = decoded_valid_len;
        if decoded_torn && self.cfg.durability == Durability::Durable {
            if self.bugs.has(Bug::TornTailAccepted) {
                valid_len = log.len() as u64;
                // The fold must stay at the log's end: the torn bytes
                // count as appended.
                s.end_bytes = logical(valid_len.max(snapshot_bytes));
            } else {
                self.out.push_back(Output::Truncate {
                    session: sid.to_string(),
                    len_bytes: valid_len,
                });
            }
        }
        let slot = self.next_slot;
        self.next_slot += 1;
        // Nothing read from the log is known to be durable: a process that
        // died may have written it without an fsync (it sits in the page
        // cache and a power loss would still erase it). Everything loaded
        // waits behind a first sync of the whole log, like fresh records.
        let appended_bytes = if valid_len == 0 {
            0
        } else {
            logical(valid_len)
        };
        debug_assert!(
            self.bugs.has(Bug::TornTailAccepted) || s.end_bytes == appended_bytes,
            "the fold ends where the valid log does"
        );
        let synced_bytes = match self.cfg.durability {
            Durability::Durable => 0,
            Durability::Ephemeral => appended_bytes,
        };
        self.set_synced(slot, synced_bytes);
        self.work.sessions.insert(sid.to_string());
        let needs_recovery = s.lifecycle_open;
        let fresh = s.record_count == 0;
        let run_started = s.running.clone();
        self.sessions.insert(
            sid.to_string(),
            Slot::Loaded(Box::new(Loaded {
                s,
                slot,
                appended_bytes,
                synced_bytes,
                loaded_bytes: appended_bytes,
                sync_in_flight: None,
                unflushed: Vec::new(),
                unflushed_intakes: 0,
                staged: Vec::new(),
                subscribers: BTreeSet::new(),
                run: None,
                task_ends: BTreeMap::new(),
                ephemeral_k: 0,
                idle_deadline_ms: None,
                unloading: false,
                pending_effects: Vec::new(),
                snap_bytes: snapshot_bytes,
                tail_from: archive_len,
                tail_records,
                compacting: None,
            })),
        );
        if !fresh {
            let now = self.now_ms;
            if needs_recovery {
                self.recover(sid, run_started);
            }
            self.commit(sid, Record::Loaded { at_ms: now });
            self.launch_next(sid);
            self.note_activity(sid);
        }
        Ok(())
    }

    /// The absolute path of a session's log (`""` on an ephemeral host).
    pub(crate) fn log_path(&self, sid: &str) -> String {
        match self.cfg.durability {
            Durability::Durable => format!(
                "{}/sessions/{}/session.log",
                self.cfg.data_dir.trim_end_matches('/'),
                sid
            ),
            Durability::Ephemeral => String::new(),
        }
    }

    /// Recomputes the idle deadline after anything that may change it.
    pub(crate) fn note_activity(&mut self, sid: &str) {
        let idle_ms = self.cfg.idle_unload_ms;
        let now = self.now_ms;
        // An effect awaiting its provider's answer (or its timeout) is live
        // work: unloading would drop the wait, and a clean close is not
        // recovered, so its tool call would stay `inProgress` for ever.
        let effect_open = self.effects.values().any(|w| w.session == sid);
        if let Some(l) = self.loaded_mut(sid) {
            let idle = l.s.running.is_none()
                && l.s.queue.is_empty()
                && l.task_ends.is_empty()
                && l.pending_effects.is_empty()
                && !effect_open
                && l.s.pending_approvals().is_empty()
                && l.subscribers.is_empty()
                && !l.unloading;
            l.idle_deadline_ms = if idle && idle_ms > 0 {
                Some(l.idle_deadline_ms.unwrap_or(now + idle_ms))
            } else {
                None
            };
        }
    }

    /// Unloads a session: ends live work (shutdown), writes `Closed`,
    /// notifies `session/closed`, releases the lease once synced.
    pub(crate) fn unload(&mut self, sid: &str, reason: &str) {
        let Some(l) = self.loaded(sid) else {
            return;
        };
        if l.unloading {
            return;
        }
        if reason == "hostShutdown" {
            self.stop_everything(sid, "cancelled", Some("hostShutdown"));
        }
        // What ending the live work emitted goes to the subscribers first:
        // `session/closed` is always the session's last event.
        self.flush(sid);
        let now = self.now_ms;
        self.commit(
            sid,
            Record::Closed {
                reason: reason.to_string(),
                at_ms: now,
            },
        );
        let l = self.loaded_mut(sid).expect("loaded");
        l.unloading = true;
        l.idle_deadline_ms = None;
        let head = l.s.cursor(l.s.head_n());
        let gate = self.gate_now(sid);
        let params = json!({"sessionId": sid, "reason": reason, "viewCursor": head});
        let line = envelope::notification_line("session/closed", &params, now);
        let mut targets: BTreeSet<ConnId> = self.loaded(sid).expect("loaded").subscribers.clone();
        targets.extend(self.ready_conns());
        for conn in targets {
            self.enqueue(conn, line.clone(), gate, None);
        }
        self.flush(sid);
        if self.cfg.durability == Durability::Ephemeral {
            self.finish_unload(sid);
        }
    }

    fn finish_unload(&mut self, sid: &str) {
        if let Some(Slot::Loaded(l)) = self.sessions.remove(sid) {
            debug_assert!(l.unflushed.is_empty());
            self.work.sessions.insert(sid.to_string());
            self.set_synced(l.slot, u64::MAX);
            self.agent_forget(&l);
            if self.cfg.durability == Durability::Durable {
                self.out.push_back(Output::Release {
                    session: sid.to_string(),
                });
            }
        }
        self.wake_waiters(&Wait::Session(sid.to_string()));
    }

    fn agent_forget(&mut self, l: &Loaded) {
        if let Some(r) = &l.run {
            self.agent.end(&r.turn_id);
        }
    }

    // ----- timers -------------------------------------------------------

    fn fire_timers(&mut self) {
        let now = self.now_ms;
        let due: Vec<u64> = self
            .effects
            .iter()
            .filter(|(_, e)| e.deadline_ms <= now)
            .map(|(t, _)| *t)
            .collect();
        for t in due {
            if let Some(w) = self.effects.remove(&t) {
                self.complete_effect(w, EffectOutcome::Unknown);
            }
        }
        // Only sessions with a deadline due by the index, or touched by this
        // input (whose index entry may be stale), can have work; visited in
        // session order, as a walk over every session would.
        let mut sids: BTreeSet<String> = self.work.sessions.clone();
        for (at, sid) in &self.work.timers {
            if *at > now {
                break;
            }
            sids.insert(sid.clone());
        }
        // Re-indexed at the end of this input whatever happens to them.
        self.work.sessions.extend(sids.iter().cloned());
        for sid in sids {
            self.end_due_tasks(&sid);
            self.drive(&sid);
            let due_idle = self
                .loaded(&sid)
                .and_then(|l| l.idle_deadline_ms)
                .is_some_and(|d| d <= now);
            if due_idle {
                self.unload(&sid, "idle");
            }
        }
    }

    /// Bound on agent steps per drive.
    pub(crate) fn agent_steps_max() -> usize {
        AGENT_STEPS_MAX
    }
}
