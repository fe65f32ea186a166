//! SDK-like clients: one `commandId` per logical command, retried with the
//! same id after a timeout, a reconnect or a retryable error; after a host
//! died, the session is reloaded (possibly elsewhere) with `session/resume`
//! from the last durable cursor. Clients never invent terminals; they learn
//! outcomes from answers and the view.
//!
//! Fault model: clients inject the application-level faults of the
//! workload: double clicks (one logical command sent twice), deliberate
//! conflicts (an id reused with another payload), stale `expectedRevision`,
//! commands aimed at turns, tasks and approvals that are gone. Every random
//! choice goes through [`World::decide`].

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::sdk_client::SdkClient;
use crate::workload::Scenario;
use crate::world::{Decision, World};

/// A request not answered after this long is sent again (same command id).
pub const REQUEST_TIMEOUT_MS: u64 = 3_000;
/// How often a healing client re-reads pending approvals.
const LIST_PENDING_EVERY_MS: u64 = 2_000;
/// An unanswered handshake after this long drops the link.
pub const HANDSHAKE_TIMEOUT_MS: u64 = 3_000;

/// What a client asks the world to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Open a link to this host.
    Connect(usize),
    /// Put a line on the current link.
    Send(Vec<u8>),
    /// Close the current link.
    Close,
    /// Wake me at this time.
    WakeAt(u64),
    /// A note for the trace.
    Note(String),
    /// Put a line on another client's link to the same host, ready for
    /// requests (a twin process of the app sending a command it also
    /// sent): its answer is a replay on a connection where nothing of the
    /// original's queues ahead of it. On the current link when no other
    /// qualifies.
    Twin(Vec<u8>),
}

/// Why a logical command exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `session/start`.
    Start,
    /// `session/resume` (a reload after a reconnect or a host death).
    Resume,
    /// A workload command.
    Normal,
    /// A deliberate reuse of an answered command's id with another payload
    /// (exactly one defined param changed): must be refused.
    Conflict,
    /// An answered command sent again under its id, spelled differently
    /// (an unknown member, a default made explicit) or unchanged after the
    /// state moved on: the same payload, so a replay.
    Resend,
}

/// One logical command.
#[derive(Debug, Clone)]
pub struct Cmd {
    /// The command id (minted once).
    pub cid: String,
    /// The method.
    pub method: String,
    /// Params, `commandId` included.
    pub params: Value,
    /// Why it exists.
    pub purpose: Purpose,
    /// A final answer arrived.
    pub done: bool,
    /// Given up without an answer (its host died and ids must not be
    /// replayed elsewhere, or its session is gone).
    pub lost: bool,
    /// Sends so far.
    pub sent_count: u32,
    /// Time of the last send (None: must be sent).
    pub last_sent_ms: Option<u64>,
    /// Retry after a retryable error no earlier than this.
    pub retry_at_ms: Option<u64>,
    /// The first final answer (`result` or `error` object).
    pub answer: Option<Value>,
    /// Issued in the liveness phase or before.
    pub issued_ms: u64,
}

/// The client's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Owns one session and drives it.
    Driver,
    /// Reads other clients' sessions from its own connections.
    Observer,
}

/// Context the world hands a client.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Hosts that are up.
    pub live_hosts: Vec<usize>,
    /// In the liveness phase (faults healed, no new work).
    pub healing: bool,
    /// The scenario.
    pub scenario: Scenario,
    /// Sessions other clients hold (for the observer).
    pub sessions: Vec<String>,
    /// For each of `sessions`, the logical commands its driver issued so
    /// far (how large its view has grown, for the observer).
    pub session_issued: Vec<u64>,
    /// The hosts' idle-unload delay (0: never), so a client can let its
    /// session be unloaded on purpose.
    pub idle_unload_ms: u64,
    /// An SDK observer subscribes (`view/subscribe`) as well as reads
    /// ([`crate::plan::Draws::WithSubscriptions`] and later).
    pub subscribes: bool,
    /// Texts and written values carry characters to escape
    /// ([`crate::plan::Draws::WithEscapes`] and later).
    pub escapes: bool,
    /// One fresh command in five goes out with its id in uppercase
    /// ([`crate::plan::Draws::WithUpperIds`] and later; SDK clients).
    pub upper_ids: bool,
    /// A conflict probe may reuse a carrier-less row's id for a durable
    /// command ([`crate::plan::Draws::WithSoloSyncs`] and later; see
    /// [`crate::moves::respell`]).
    pub crossing: bool,
    /// One double click in two goes out on another client's link
    /// ([`Action::Twin`]; [`crate::plan::Draws::WithTwins`] and later; SDK
    /// clients).
    pub twins: bool,
    /// Pending approvals are decided promptly, and one approved may be
    /// chased by an interrupt ([`crate::plan::Draws::WithPromptApprovals`]
    /// and later; SDK clients).
    pub prompt_approvals: bool,
}

/// An SDK-like client.
#[derive(Debug, Clone)]
pub struct Client {
    /// Index.
    pub idx: usize,
    /// Role.
    pub role: Role,
    /// Current link, if any.
    pub link: Option<u64>,
    host: usize,
    ready: bool,
    init_sent_ms: u64,
    next_rpc: u64,
    inflight: BTreeMap<u64, usize>,
    /// Every logical command, in issue order.
    pub cmds: Vec<Cmd>,
    start: Option<usize>,
    resume: Option<usize>,
    active: Option<usize>,
    burst: Vec<usize>,
    /// The session this client drives.
    pub session: Option<String>,
    loaded: bool,
    last_cursor: Option<String>,
    known: crate::known::Known,
    budget: u32,
    timeouts_in_row: u32,
    in_use_count: u32,
    counter: u64,
    idle_until_ms: u64,
    /// When this client last asked `approval/listPending` (healing phase).
    last_list_ms: u64,
    /// Queued submits sent together to fill the queue (`queue_full`).
    flood: Vec<usize>,
    /// After the next reload, send an answered carrier-less row again.
    resend_after_reload: bool,
    /// The SDK client driving this record instead of the logic below
    /// (`--client sdk`), if any.
    sdk: SdkSlot,
}

/// The SDK client of a [`Client`] record. A clone of the record is the
/// record alone (the live core is not cloned): what oracles read.
#[derive(Default)]
struct SdkSlot(Option<Box<SdkClient>>);

impl Clone for SdkSlot {
    fn clone(&self) -> Self {
        SdkSlot(None)
    }
}

impl std::fmt::Debug for SdkSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(s) => s.fmt(f),
            None => f.write_str("-"),
        }
    }
}

/// Runs `$body` with the record's SDK client taken out (`$s`), if it has
/// one, and returns its value.
macro_rules! with_sdk {
    ($self:ident, $s:ident => $body:expr) => {
        if let Some(mut $s) = $self.sdk.0.take() {
            let r = $body;
            $self.sdk.0 = Some($s);
            return r;
        }
    };
}

impl Client {
    /// A client with `budget` logical commands to issue.
    pub fn new(idx: usize, role: Role, budget: u32) -> Client {
        Client {
            idx,
            role,
            link: None,
            host: 0,
            ready: false,
            init_sent_ms: 0,
            next_rpc: 1,
            inflight: BTreeMap::new(),
            cmds: Vec::new(),
            start: None,
            resume: None,
            active: None,
            burst: Vec::new(),
            session: None,
            loaded: false,
            last_cursor: None,
            known: crate::known::Known::default(),
            budget,
            timeouts_in_row: 0,
            in_use_count: 0,
            counter: 0,
            idle_until_ms: 0,
            last_list_ms: 0,
            flood: Vec::new(),
            resend_after_reload: false,
            sdk: SdkSlot(None),
        }
    }

    /// A client whose protocol logic is the real SDK core
    /// ([`crate::sdk_client`]); this record is what it reports (its
    /// logical commands, its session, its link).
    pub fn new_sdk(
        w: &mut World,
        idx: usize,
        role: Role,
        budget: u32,
        durable: bool,
        pages: bool,
    ) -> Client {
        let mut c = Client::new(idx, role, budget);
        c.sdk = SdkSlot(Some(Box::new(SdkClient::new(w, budget, durable, pages))));
        c
    }

    /// Whether the SDK core drives this client.
    pub fn is_sdk(&self) -> bool {
        self.sdk.0.is_some()
    }

    /// The current link, if an SDK core drives this client and its
    /// handshake on the link is done (requests sent there are served).
    pub fn ready_link(&self) -> Option<u64> {
        let s = self.sdk.0.as_ref()?;
        if s.is_ready() {
            self.link
        } else {
            None
        }
    }

    /// Logical commands an SDK client issued so far (what its session's
    /// observers thin their whole-view reads by); `0` for the simulator's
    /// own client, whose observing reads are as they were.
    pub fn issued(&self) -> u64 {
        self.sdk.0.as_ref().map_or(0, |s| s.issued())
    }

    /// Logical commands this client may still issue in the safety phase.
    pub fn budget_left(&self) -> u32 {
        if let Some(s) = &self.sdk.0 {
            return s.budget_left();
        }
        self.budget
    }

    /// No logical command is outstanding.
    pub fn settled(&self) -> bool {
        self.cmds.iter().all(|c| c.done || c.lost)
    }

    fn mint(&mut self, w: &mut World) -> String {
        let bits = w.bits128(Decision::Ids);
        msp::proto::ids::mint_uuid_v7(w.now_ms, bits)
    }

    fn frame(&mut self, method: &str, params: Value) -> (u64, Vec<u8>) {
        let id = self.next_rpc;
        self.next_rpc += 1;
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .expect("serialise");
        line.push(b'\n');
        (id, line)
    }

    fn new_cmd(
        &mut self,
        w: &mut World,
        method: &str,
        mut params: Value,
        purpose: Purpose,
    ) -> usize {
        let cid = self.mint(w);
        params["commandId"] = json!(cid);
        self.push_cmd(w, cid, method, params, purpose)
    }

    fn push_cmd(
        &mut self,
        w: &World,
        cid: String,
        method: &str,
        params: Value,
        purpose: Purpose,
    ) -> usize {
        self.cmds.push(Cmd {
            cid,
            method: method.to_string(),
            params,
            purpose,
            done: false,
            lost: false,
            sent_count: 0,
            last_sent_ms: None,
            retry_at_ms: None,
            answer: None,
            issued_ms: w.now_ms,
        });
        self.cmds.len() - 1
    }

    /// Sends (or re-sends) command `i`; a double click sends it twice.
    fn send_cmd(&mut self, w: &mut World, i: usize, out: &mut Vec<Action>, double_click: bool) {
        let copies = if double_click { 2 } else { 1 };
        for _ in 0..copies {
            let (id, line) = self.frame(&self.cmds[i].method.clone(), self.cmds[i].params.clone());
            self.inflight.insert(id, i);
            out.push(Action::Send(line));
        }
        let c = &mut self.cmds[i];
        c.sent_count += 1;
        c.last_sent_ms = Some(w.now_ms);
        c.retry_at_ms = None;
    }

    /// Drives command `i`: sends it when due. Returns true when it is still
    /// outstanding (the caller waits for it).
    fn drive(&mut self, w: &mut World, i: usize, out: &mut Vec<Action>) -> bool {
        if self.cmds[i].done || self.cmds[i].lost {
            return false;
        }
        let now = w.now_ms;
        let due = match (self.cmds[i].last_sent_ms, self.cmds[i].retry_at_ms) {
            (_, Some(r)) => r <= now,
            (None, None) => true,
            (Some(t), None) => {
                if now >= t + REQUEST_TIMEOUT_MS {
                    self.timeouts_in_row += 1;
                    true
                } else {
                    false
                }
            }
        };
        if self.timeouts_in_row >= 2 {
            // The link looks dead: leave it; the command is retried on the
            // next one.
            self.timeouts_in_row = 0;
            out.push(Action::Close);
            self.on_closed();
            return true;
        }
        if due {
            let dbl = self.cmds[i].sent_count == 0 && w.chance(Decision::Client, 80);
            self.send_cmd(w, i, out, dbl);
        }
        true
    }

    /// The world opened `link` for this client; `slips`: an SDK client
    /// may break the handshake's order on it
    /// ([`crate::plan::Draws::WithHandshakeSlips`] and later).
    pub fn on_connected(
        &mut self,
        w: &mut World,
        link: u64,
        host: usize,
        slips: bool,
    ) -> Vec<Action> {
        with_sdk!(self, s => s.on_connected(self, w, link, host, slips));
        self.link = Some(link);
        self.host = host;
        self.ready = false;
        self.init_sent_ms = w.now_ms;
        let (_, line) = self.frame(
            "initialize",
            json!({"clientInfo": {"name": "msp_sim", "version": "1"}}),
        );
        let mut l2 = serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": "initialized"}))
            .expect("serialise");
        l2.push(b'\n');
        vec![Action::Send(line), Action::Send(l2)]
    }

    /// The current link closed (cut, host death, or our own close).
    pub fn on_closed(&mut self) {
        with_sdk!(self, s => s.on_closed(self));
        self.link = None;
        self.ready = false;
        self.loaded = false;
        self.inflight.clear();
        for c in self.cmds.iter_mut().filter(|c| !c.done && !c.lost) {
            c.last_sent_ms = None;
        }
    }

    /// A timer fired.
    pub fn on_wake(&mut self, w: &mut World, ctx: &Ctx) -> Vec<Action> {
        with_sdk!(self, s => s.on_wake(self, w, ctx));
        let mut out = Vec::new();
        self.step(w, ctx, &mut out);
        let next = w.now_ms
            + if ctx.healing {
                250
            } else {
                w.range(Decision::Client, 20, 400)
            };
        out.push(Action::WakeAt(next));
        out
    }

    fn step(&mut self, w: &mut World, ctx: &Ctx, out: &mut Vec<Action>) {
        let now = w.now_ms;
        if self.link.is_none() {
            if ctx.live_hosts.is_empty() {
                return;
            }
            // Option 0: the next live host after the one it last used
            // (host 0 at first), so a client that leaves goes elsewhere.
            let n = ctx.live_hosts.len();
            let after = if self.next_rpc > 1 { self.host + 1 } else { 0 };
            let first = ctx.live_hosts.iter().position(|h| *h >= after).unwrap_or(0);
            let h = ctx.live_hosts[(first + w.decide(Decision::Placement, n as u64) as usize) % n];
            out.push(Action::Connect(h));
            return;
        }
        if !self.ready {
            if now >= self.init_sent_ms + HANDSHAKE_TIMEOUT_MS {
                out.push(Action::Close);
                self.on_closed();
            }
            return;
        }
        if !ctx.healing && w.chance(Decision::Client, self.reconnect_permille(ctx)) {
            out.push(Action::Close);
            self.on_closed();
            out.push(Action::Note("reconnect: leaves its host".into()));
            return;
        }
        if self.role == Role::Observer {
            self.observe(w, ctx, out);
            return;
        }
        // 1. A session to drive.
        if self.session.is_none() {
            let i = match self.start {
                Some(i) if !self.cmds[i].done && !self.cmds[i].lost => i,
                _ => {
                    // A client without a session always gets one, healing or
                    // not: a session that died with its ephemeral host is
                    // replaced, never replayed.
                    let explicit = w.chance(Decision::Client, 500);
                    let params = if explicit {
                        let sid = self.mint(w);
                        json!({"sessionId": sid})
                    } else {
                        json!({})
                    };
                    let i = self.new_cmd(w, "session/start", params, Purpose::Start);
                    self.start = Some(i);
                    i
                }
            };
            self.drive(w, i, out);
            return;
        }
        // 2. The session loaded on this link.
        if !self.loaded {
            let i = match self.resume {
                Some(i) if !self.cmds[i].done && !self.cmds[i].lost => i,
                _ => {
                    let mut p = json!({"sessionId": self.session.clone().expect("session")});
                    // Mostly from the last cursor; sometimes from a
                    // snapshot (the other shape of a resume).
                    if let Some(c) = &self.last_cursor {
                        if !w.chance(Decision::Client, 100) {
                            p["cursor"] = json!(c);
                        }
                    }
                    // Every third resume without a cursor asks metadata
                    // only (`excludeItems`), with no draw of its own.
                    if p.get("cursor").is_none() && self.cmds.len() % 3 == 2 {
                        p["excludeItems"] = json!(true);
                    }
                    let i = self.new_cmd(w, "session/resume", p, Purpose::Resume);
                    self.resume = Some(i);
                    i
                }
            };
            self.drive(w, i, out);
            return;
        }
        // 3. The commands in flight (a burst rides along the active one).
        // A resend after a pause waits for the active command (a stop-all
        // sent right before the pause), which it would replace.
        if self.resend_after_reload && !ctx.healing && self.active.is_none() {
            self.resend_after_reload = false;
            if self.resend(w, out, true) {
                return;
            }
        }
        let flood = std::mem::take(&mut self.flood);
        for f in flood {
            if self.drive(w, f, out) {
                self.flood.push(f);
            }
        }
        for b in std::mem::take(&mut self.burst) {
            if self.drive(w, b, out) {
                self.burst.push(b);
            }
        }
        if let Some(i) = self.active {
            if self.drive(w, i, out) {
                return;
            }
            self.active = None;
        }
        if now < self.idle_until_ms {
            return;
        }
        // 4. Something new (or, option 0, nothing more).
        if !ctx.healing && self.budget > 0 && !w.more_work(Decision::Client) {
            self.budget = 0;
        }
        if ctx.healing || self.budget == 0 {
            if let Some(a) = self.known.approvals.iter().next().cloned() {
                self.decide_approval(w, &a, out, true);
            } else if ctx.healing && now >= self.last_list_ms + LIST_PENDING_EVERY_MS {
                // A lost `approval/request` line would block a turn (and the
                // queue behind it) forever: ask the log which approvals
                // wait, as an SDK does after a gap.
                self.last_list_ms = now;
                let (_, line) =
                    self.frame("approval/listPending", json!({"sessionId": sid_of(self)}));
                self.inflight.insert(self.next_rpc - 1, usize::MAX);
                out.push(Action::Send(line));
            }
            return;
        }
        self.budget -= 1;
        self.pick(w, ctx, out);
    }

    fn reconnect_permille(&self, ctx: &Ctx) -> u64 {
        match ctx.scenario {
            Scenario::LeaseHandover => 25,
            Scenario::Mixed => 5,
            _ => 2,
        }
    }

    fn observe(&mut self, w: &mut World, ctx: &Ctx, out: &mut Vec<Action>) {
        if ctx.sessions.is_empty() || !w.chance(Decision::Client, 150) {
            return;
        }
        let s =
            ctx.sessions[w.decide(Decision::Client, ctx.sessions.len() as u64) as usize].clone();
        // Every fourth read asks metadata only, with no draw of its own.
        let p = if self.next_rpc.is_multiple_of(4) {
            json!({"sessionId": s, "excludeItems": true})
        } else {
            json!({"sessionId": s})
        };
        let (_, line) = self.frame("session/read", p);
        self.inflight.insert(self.next_rpc - 1, usize::MAX);
        out.push(Action::Send(line));
    }

    fn text(&mut self, w: &mut World, ctx: &Ctx) -> String {
        self.counter += 1;
        crate::moves::turn_text(w, ctx.scenario, self.counter, self.idx, ctx.escapes)
    }

    fn pick(&mut self, w: &mut World, ctx: &Ctx, out: &mut Vec<Action>) {
        use crate::moves::Move;
        let sid = self.session.clone().expect("session");
        let mv = crate::moves::next_move(
            w,
            ctx.scenario,
            &self.known,
            &mut self.counter,
            self.idx,
            &sid,
            ctx.escapes,
        );
        let (method, params) = match mv {
            Move::Submit(m, p) => (m, p),
            Move::Turn => return self.pick_turn(w, ctx, out, &sid),
            Move::Approval(a) => return self.decide_approval(w, &a, out, false),
            Move::Conflict => return self.conflict_probe(w, out, &sid, ctx.crossing),
            Move::IdleUntil(t) => {
                self.idle_until_ms = t;
                return;
            }
            Move::Resend => {
                if !self.resend(w, out, false) {
                    self.pick_turn(w, ctx, out, &sid);
                }
                return;
            }
            Move::Flood => return self.flood_queue(w, out, &sid),
            Move::Pause => return self.pause(w, ctx, out, &sid),
            Move::Stray | Move::StrayRead => {
                let (method, p) = crate::moves::stray(&mv, w, &sid, &ctx.sessions);
                let (id, line) = self.frame(method, p);
                // Its answer is the model's to judge, not this client's.
                self.inflight.insert(id, usize::MAX);
                out.push(Action::Send(line));
                return;
            }
            Move::StopAllThenPause => {
                let i = self.new_cmd(
                    w,
                    "task/stopAll",
                    json!({"sessionId": sid}),
                    Purpose::Normal,
                );
                self.active = Some(i);
                self.drive(w, i, out);
                return self.pause(w, ctx, out, &sid);
            }
            Move::Malformed(kind) => {
                // The defective line first (its refusal is the model's to
                // judge), then the command itself under the same id.
                self.counter += 1;
                let (method, params) = kind.command(&sid, self.known.revision, self.counter);
                let i = self.new_cmd(w, method, params, Purpose::Normal);
                let v4 = crate::moves::uuid_v4(w.bits128(Decision::Ids));
                let id = self.next_rpc;
                self.next_rpc += 1;
                self.inflight.insert(id, usize::MAX);
                let line = kind.line(&json!(id), method, &self.cmds[i].params, &v4);
                out.push(Action::Send(line));
                self.active = Some(i);
                self.drive(w, i, out);
                return;
            }
        };
        let i = self.new_cmd(w, method, params, Purpose::Normal);
        self.active = Some(i);
        self.drive(w, i, out);
        self.maybe_burst(w, out, &sid);
    }

    /// Sometimes two more commands leave right behind the first (a
    /// pipelining client): the first intake's sync is in flight when they
    /// arrive, so the next sync covers both (a group commit, and its
    /// crash point). Option 0: no burst.
    fn maybe_burst(&mut self, w: &mut World, out: &mut Vec<Action>, sid: &str) {
        if !self.burst.is_empty() || !w.chance(Decision::Client, 250) {
            return;
        }
        for _ in 0..2 {
            self.counter += 1;
            let mut set = serde_json::Map::new();
            set.insert(format!("b{}", self.counter % 3), json!(self.counter));
            let p = json!({"sessionId": sid, "expectedRevision": self.known.revision, "set": set});
            let b = self.new_cmd(w, "state/update", p, Purpose::Normal);
            self.burst.push(b);
            self.drive(w, b, out);
        }
    }

    /// A long turn, then 17 queued submits in one burst: the queue fills
    /// (16) and the last one is refused `queue_full`.
    fn flood_queue(&mut self, w: &mut World, out: &mut Vec<Action>, sid: &str) {
        if !self.flood.is_empty() {
            return;
        }
        self.counter += 1;
        let p = json!({"sessionId": sid, "input": [{"type": "text", "text": format!("!sleep 2500 flood {}", self.counter)}]});
        let i = self.new_cmd(w, "turn/start", p, Purpose::Normal);
        self.active = Some(i);
        self.drive(w, i, out);
        for k in 0..=msp::core::QUEUE_MAX as u64 {
            let p = json!({"sessionId": sid, "ifBusy": "queue", "input": [{"type": "text", "text": format!("q{k}")}]});
            let f = self.new_cmd(w, "turn/start", p, Purpose::Normal);
            self.flood.push(f);
            self.drive(w, f, out);
        }
    }

    /// Leaves the session alone until its host unloads it (idle), so that
    /// the next command reloads it; then sends a carrier-less row again
    /// (its dedupe is the host's lifetime, across unload and reload).
    fn pause(&mut self, w: &mut World, ctx: &Ctx, out: &mut Vec<Action>, sid: &str) {
        // On an ephemeral host nothing but the events it sends shows what
        // happened: a client that stops listening would blind the judge.
        if !ctx.scenario.durable()
            || ctx.idle_unload_ms == 0
            || ctx.idle_unload_ms > 10_000
            || self.busy()
        {
            return;
        }
        let (_, line) = self.frame("view/unsubscribe", json!({"sessionId": sid}));
        self.inflight.insert(self.next_rpc - 1, usize::MAX);
        out.push(Action::Send(line));
        self.idle_until_ms = w.now_ms + ctx.idle_unload_ms + w.range(Decision::Client, 200, 1_500);
        self.resend_after_reload = true;
    }

    /// Whether this client has work in its session (a turn running or
    /// queued, a task, an approval).
    fn busy(&self) -> bool {
        self.known.running.is_some()
            || !self.known.queued.is_empty()
            || !self.known.tasks.is_empty()
            || !self.known.approvals.is_empty()
    }

    /// Sends an answered command of this session again under its id, the
    /// same payload spelled differently (an unknown member, a default made
    /// explicit): the host must answer the recorded outcome, or for a
    /// carrier-less row resolve it as its host's lifetime says.
    /// `carrierless`: pick a carrier-less row. False when none qualifies.
    fn resend(&mut self, w: &mut World, out: &mut Vec<Action>, carrierless: bool) -> bool {
        let sid = self.session.clone().unwrap_or_default();
        let candidates: Vec<usize> = self
            .cmds
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                matches!(
                    c.purpose,
                    Purpose::Normal | Purpose::Start | Purpose::Resume
                ) && c.answer.as_ref().is_some_and(|a| {
                    a.get("result").is_some() || a["error"]["code"] == json!(-32030)
                }) && c.params["sessionId"].as_str().is_none_or(|s| s == sid)
                    && (!carrierless
                        || matches!(
                            c.method.as_str(),
                            "turn/interrupt" | "turn/cancel" | "task/stop" | "task/stopAll"
                        ))
            })
            .map(|(i, _)| i)
            .collect();
        if candidates.is_empty() {
            return false;
        }
        let orig = candidates[w.decide(Decision::Client, candidates.len() as u64) as usize];
        let (mut cid, method, mut params) = {
            let c = &self.cmds[orig];
            (c.cid.clone(), c.method.clone(), c.params.clone())
        };
        crate::moves::same_payload_respelled(w, &method, &mut params, &mut cid, self.counter);
        let i = self.push_cmd(w, cid, &method, params, Purpose::Resend);
        self.active = Some(i);
        self.drive(w, i, out);
        true
    }

    fn pick_turn(&mut self, w: &mut World, ctx: &Ctx, out: &mut Vec<Action>, sid: &str) {
        let text = self.text(w, ctx);
        let p = crate::moves::turn_start_params(w, sid, &text);
        let i = self.new_cmd(w, "turn/start", p, Purpose::Normal);
        self.active = Some(i);
        self.drive(w, i, out);
        self.maybe_burst(w, out, sid);
    }

    fn decide_approval(
        &mut self,
        w: &mut World,
        a: &str,
        out: &mut Vec<Action>,
        approve_only: bool,
    ) {
        let sid = self.session.clone().expect("session");
        let p = crate::moves::approval_decision(w, &sid, a, approve_only);
        self.known.approvals.remove(a);
        let i = self.new_cmd(w, "approval/decide", p, Purpose::Normal);
        self.active = Some(i);
        self.drive(w, i, out);
    }

    /// Reuses an answered command's id (any method) with another payload:
    /// exactly one defined param changed (PROTOCOL.md 4.1's table), or for
    /// `task/stopAll`, whose one param names the session, another method.
    fn conflict_probe(&mut self, w: &mut World, out: &mut Vec<Action>, sid: &str, crossing: bool) {
        let candidates: Vec<usize> = self
            .cmds
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                matches!(
                    c.purpose,
                    Purpose::Normal | Purpose::Start | Purpose::Resume
                ) && c.params["sessionId"].as_str().is_none_or(|s| s == sid)
                    && c.answer.as_ref().is_some_and(|a| {
                        a.get("result").is_some()
                            || (a["error"]["code"] == json!(-32030)
                                && a["error"]["data"]["reason"] != json!("command_id_conflict"))
                    })
            })
            .map(|(i, _)| i)
            .collect();
        if candidates.is_empty() {
            return;
        }
        let orig = candidates[w.decide(Decision::Client, candidates.len() as u64) as usize];
        self.counter += 1;
        let n = self.counter;
        let (cid, mut method, mut p) = {
            let c = &self.cmds[orig];
            (c.cid.clone(), c.method.clone(), c.params.clone())
        };
        let other = self.mint(w);
        let flip = w.chance(Decision::Client, 500);
        if !crate::moves::respell(&mut method, &mut p, sid, (n, &other), flip, crossing) {
            return;
        }
        let i = self.push_cmd(w, cid, &method, p, Purpose::Conflict);
        self.active = Some(i);
        self.drive(w, i, out);
    }

    /// A line arrived on the current link.
    pub fn on_line(&mut self, w: &mut World, ctx: &Ctx, line: &[u8]) -> Vec<Action> {
        with_sdk!(self, s => s.on_line(self, w, line));
        let mut out = Vec::new();
        // UTF-8 checked once, whole (serde_json then skips its check of
        // each string); not UTF-8: the byte parser fails as before.
        let v = match std::str::from_utf8(line) {
            Ok(s) => serde_json::from_str::<Value>(s),
            Err(_) => serde_json::from_slice::<Value>(line),
        };
        let Ok(v) = v else {
            return out;
        };
        let has_method = v.get("method").is_some();
        if has_method && v.get("id").is_some() {
            // A server request (approval/request): answer `{}`.
            let mut l = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": v["id"], "result": {}}))
                .expect("serialise");
            l.push(b'\n');
            out.push(Action::Send(l));
            self.on_event(&v["method"], &v["params"]);
            return out;
        }
        if has_method {
            self.on_event(&v["method"], &v["params"]);
            return out;
        }
        let Some(id) = v["id"].as_u64() else {
            return out;
        };
        if !self.ready {
            if v.get("result").is_some() {
                self.ready = true;
            }
            return out;
        }
        let Some(i) = self.inflight.remove(&id) else {
            return out;
        };
        self.timeouts_in_row = 0;
        if i == usize::MAX {
            // A read: an observer's, or our own `approval/listPending`
            // (a lost `approval/request` line must not block the turn).
            if let Some(list) = v["result"]["approvals"].as_array() {
                for a in list {
                    if let Some(id) = a["approvalId"].as_str() {
                        self.known.approvals.insert(id.to_string());
                    }
                }
            }
            return out;
        }
        self.on_answer(w, ctx, i, &v, &mut out);
        out
    }

    fn on_answer(&mut self, w: &mut World, ctx: &Ctx, i: usize, v: &Value, out: &mut Vec<Action>) {
        if self.cmds[i].done || self.cmds[i].lost {
            return;
        }
        let now = w.now_ms;
        if let Some(r) = v.get("result") {
            self.finish(i, v);
            match self.cmds[i].purpose {
                Purpose::Start => {
                    let sid = r["session"]["sessionId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    self.session = Some(sid);
                    self.loaded = true;
                    self.last_cursor = r["viewCursor"].as_str().map(str::to_string);
                }
                Purpose::Resume => {
                    self.loaded = true;
                    let h = &r["history"];
                    let snapshot = h["mode"] == json!("snapshot");
                    // Subscribed at the head: the next reload goes from
                    // there. With no view (`excludeItems`) what this client
                    // knows may be stale (its next commands may be refused
                    // for it).
                    if snapshot || h["noneReason"] == json!("excluded") {
                        self.last_cursor = r["viewCursor"].as_str().map(str::to_string);
                    }
                    if snapshot {
                        self.known.reset_from(&h["snapshot"]["state"]);
                    }
                }
                // A probe's answer is the ledger's business (the model
                // judges it), not new state for this client.
                Purpose::Conflict | Purpose::Resend => {}
                Purpose::Normal => {
                    if r["disposition"] == json!("queued") {
                        if let Some(t) = r["turnId"].as_str() {
                            self.known.queued.push(t.to_string());
                            self.known.seen_turns.push(t.to_string());
                        }
                    }
                    if let Some(rev) = r["revision"].as_i64() {
                        self.known.revision = self.known.revision.max(rev);
                    }
                }
            }
            return;
        }
        let e = &v["error"];
        let code = e["code"].as_i64().unwrap_or(0);
        // The error table's default for the code unless `data.retryable`
        // says otherwise (PROTOCOL.md section 3), as the SDK decides it.
        let retryable = msp::client::outcome::ErrorKind::retryable_by_table(code, &e["data"]);
        let purpose = self.cmds[i].purpose;
        let backoff = now + w.range(Decision::Client, 100, 800);
        match code {
            -32021 | -32024 => {
                if matches!(purpose, Purpose::Start | Purpose::Resume) {
                    self.cmds[i].retry_at_ms = Some(backoff);
                    self.in_use_count += 1;
                    if code == -32021 && self.in_use_count >= 3 {
                        // Another live host holds it: go where it is (or
                        // wait for it to let go) from a fresh link.
                        self.in_use_count = 0;
                        out.push(Action::Close);
                        self.on_closed();
                    }
                } else {
                    // Not loaded on this link: reload, then retry.
                    self.loaded = false;
                    self.cmds[i].last_sent_ms = None;
                    self.cmds[i].retry_at_ms = Some(backoff);
                }
            }
            -32020 => {
                if matches!(purpose, Purpose::Start) {
                    self.cmds[i].retry_at_ms = Some(backoff);
                } else if ctx.scenario.durable() && purpose == Purpose::Resume {
                    // A durable session that vanished: record it (the
                    // liveness oracle flags it) and start over.
                    self.finish(i, v);
                    self.lose_session(w, out, "durable session not found on resume");
                } else {
                    self.finish(i, v);
                    self.lose_session(w, out, "session died with its ephemeral host");
                }
            }
            -32600 => {
                // `initialized` was lost or overtaken: handshake again on a
                // fresh link; the command is retried there.
                out.push(Action::Close);
                self.on_closed();
            }
            -32011 => {
                // Our cursor is unknown: resume from a snapshot.
                self.finish(i, v);
                self.last_cursor = None;
            }
            -32603 if e["data"]["reason"] == json!("logCorrupt") => {
                // The session's log is damaged: nothing more can be done
                // with it; start another.
                self.finish(i, v);
                self.lose_session(w, out, "session log corrupt");
            }
            _ if retryable => self.cmds[i].retry_at_ms = Some(backoff),
            _ => {
                self.finish(i, v);
                if purpose == Purpose::Start {
                    out.push(Action::Note(format!(
                        "session/start {} refused: starts over",
                        self.cmds[i].cid
                    )));
                }
            }
        }
    }

    fn finish(&mut self, i: usize, v: &Value) {
        let c = &mut self.cmds[i];
        c.done = true;
        let ans = if let Some(r) = v.get("result") {
            json!({"result": r})
        } else {
            json!({"error": v["error"]})
        };
        c.answer = Some(ans);
        self.inflight.retain(|_, k| *k != i);
    }

    fn lose_session(&mut self, _w: &mut World, out: &mut Vec<Action>, why: &str) {
        for c in self.cmds.iter_mut().filter(|c| !c.done && !c.lost) {
            c.lost = true;
        }
        out.push(Action::Note(format!(
            "{why}: gives up its commands, starts a new session"
        )));
        self.session = None;
        self.start = None;
        self.resume = None;
        self.active = None;
        self.burst.clear();
        self.loaded = false;
        self.last_cursor = None;
        self.known = crate::known::Known::default();
    }

    /// In an ephemeral world a reconnect may reach a new incarnation: the
    /// pending start and resume must not be replayed there, so they get new
    /// ids (the old ones are given up).
    pub fn forget_unsafe_replays(&mut self, out: &mut Vec<Action>) {
        with_sdk!(self, s => s.forget_unsafe_replays(self, out));
        for slot in [self.start, self.resume].into_iter().flatten() {
            let c = &mut self.cmds[slot];
            if !c.done && !c.lost && c.sent_count > 0 {
                c.lost = true;
                out.push(Action::Note(format!(
                    "{} {} not replayed after reconnect (ephemeral)",
                    c.method, c.cid
                )));
            }
        }
    }

    fn on_event(&mut self, method: &Value, p: &Value) {
        let Some(m) = method.as_str() else { return };
        if p["sessionId"].as_str() != self.session.as_deref() || self.session.is_none() {
            return;
        }
        if let Some(c) = p["viewCursor"].as_str() {
            if !c.contains('.') {
                let newer = self.last_cursor.as_deref().is_none_or(|l| {
                    msp::core::session::cursor_order(c) > msp::core::session::cursor_order(l)
                });
                if newer {
                    self.last_cursor = Some(c.to_string());
                }
            }
        }
        self.known.observe(m, p);
        if m == "session/closed" {
            self.loaded = false;
        }
    }
}

/// The client's current session id (it has one whenever it picks work).
fn sid_of(c: &Client) -> String {
    c.session.clone().unwrap_or_default()
}
