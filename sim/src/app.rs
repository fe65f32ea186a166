//! Application-level scenarios (seed 002, issue 12 item 6): several
//! application instances, each the real SDK (`msp::client::ClientCore`)
//! behind the request gate (`msp::client::gate::Gate` over a shared
//! crashable `MemoryGateStore`), against one host (`msp::harness::Harness`,
//! the same `core::Host` as `msp serve`, on a memory disk).
//!
//! Fault model: lost, duplicated and reordered request and answer lines
//! (the SDK retries with the same id and ignores an answer it already
//! has), host process crashes and power losses (unsynced bytes lost),
//! a host dying right after an effect took place at its provider (a lost
//! provider response), and application instances dying (their SDK state
//! lost; the request arrives again at a restarted instance). Every random
//! choice comes from one seeded ChaCha8 stream, so a seed replays exactly.
//!
//! Oracles judge what is on the host's disk (the session log, decoded) and
//! at the providers, against what the application asked for — never the
//! host's memory:
//! - `one-command-per-request`: the log received at most one command id
//!   per application request;
//! - `one-outcome-per-request`: every arrival of a request that got an
//!   answer the host records got the same one;
//! - `no-lost-update` (`two-writers`): applied increments of a counter form
//!   1, 2, 3, ... in log order (a stale write applied, or an old write
//!   replayed, repeats a value);
//! - `unkeyed-at-most-once`: a provider without key support was asked to
//!   perform each effect key at most once;
//! - `every-request-answered`: once faults stop, every arrival of every
//!   request ends with an answer;
//! - `unknown-surfaced`: an unkeyed effect whose response was lost is
//!   reported `unknown` (or not at all, if its turn never completed),
//!   never `committed` or `notStarted`.
//!
//! Limits (said plainly): one host, on one memory disk without torn
//! writes or bit rot; the full fault world (`run.rs`, several hosts,
//! leases, torn tails, rot) drives the same SDK core under the
//! simulator's workloads, without the gate and the application handlers.

use std::collections::{BTreeMap, BTreeSet};

use msp::client::gate::memory::{Commit, MemoryGateStore};
use msp::client::gate::{Admission, Gate, GateRecord, GateStore};
use msp::client::optimistic::{OptimisticWrite, StateView, WriteStep};
use msp::client::wire::CommandSpec;
use msp::client::{
    ClientConfig, ClientCore, ClientEvent, CommandHandle, CommandId, CommandOutcome, Completion,
    Notification, ReadHandle, RequestId, SeededEntropy, SessionId,
};
use msp::core::bugs::{Bug, BugSet};
use msp::core::record::{decode_log, Outcome, Record};
use msp::core::{ConnId, Durability, HostConfig};
use msp::harness::Harness;

use crate::trace::Fnv;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Map, Value};

/// One application-level scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppScenario {
    /// Each request arrives twice, at two instances (a double click and a
    /// proxy retry): one command and one run per request.
    DoubleClick,
    /// Two writers increment one counter with `expectedRevision`: one
    /// wins each round, the other is rejected and decides anew.
    TwoWriters,
    /// Approved tool calls at a keyed and an unkeyed provider, with lost
    /// provider responses.
    Effects,
    /// All three at once.
    MixedApp,
}

impl AppScenario {
    /// Every scenario.
    pub const ALL: [AppScenario; 4] = [
        AppScenario::DoubleClick,
        AppScenario::TwoWriters,
        AppScenario::Effects,
        AppScenario::MixedApp,
    ];

    /// Its `--scenario` name.
    pub fn name(self) -> &'static str {
        match self {
            AppScenario::DoubleClick => "app-double-click",
            AppScenario::TwoWriters => "two-writers",
            AppScenario::Effects => "effects",
            AppScenario::MixedApp => "mixed-app",
        }
    }

    /// Parses a `--scenario` name.
    pub fn from_name(s: &str) -> Option<AppScenario> {
        AppScenario::ALL.into_iter().find(|x| x.name() == s)
    }
}

/// A planted application-level bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppBug {
    /// The SDK mints a new command id when it re-sends.
    ClientNewIdOnRetry,
    /// The host performs an unkeyed effect again after a crash.
    RetryUnkeyedEffect,
    /// The application's handler checks the gate for the request, and
    /// inserts its own command later, in a second step, acting on the
    /// check rather than on the insert's answer: two instances that both
    /// checked before either inserted both send a command.
    GateCheckThenInsert,
}

impl AppBug {
    /// Every planted application-level bug.
    pub const ALL: [AppBug; 3] = [
        AppBug::ClientNewIdOnRetry,
        AppBug::RetryUnkeyedEffect,
        AppBug::GateCheckThenInsert,
    ];

    /// Its `--bug` name.
    pub fn name(self) -> &'static str {
        match self {
            AppBug::ClientNewIdOnRetry => "client-new-id-on-retry",
            AppBug::RetryUnkeyedEffect => Bug::RetryUnkeyedEffect.name(),
            AppBug::GateCheckThenInsert => "gate-check-then-insert",
        }
    }

    /// Parses a `--bug` name.
    pub fn from_name(s: &str) -> Option<AppBug> {
        AppBug::ALL.into_iter().find(|x| x.name() == s)
    }
}

/// A property an application run broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppViolation {
    /// The property's name.
    pub property: &'static str,
    /// What was seen.
    pub detail: String,
}

/// What one application run did and whether it held.
#[derive(Debug, Clone)]
pub struct AppRun {
    /// The seed.
    pub seed: u64,
    /// Broken properties (empty: passed).
    pub violations: Vec<AppViolation>,
    /// Requests whose every arrival got an answer.
    pub answered_count: usize,
    /// Requests in the run.
    pub requests_count: usize,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// FNV-1a over everything the instances and the host exchanged, in
    /// order: two runs of one seed must agree.
    pub hash: u64,
}

const T0: u64 = 1_750_000_000_000;
const TICK_MS: u64 = 20;
const FAULT_PHASE_MS: u64 = 40_000;
const END_MS: u64 = 120_000;

/// What one request asks for.
#[derive(Debug, Clone)]
enum Kind {
    /// A turn with this text.
    Turn(String),
    /// Increment the counter `k` (optimistic write).
    Increment,
    /// A turn whose tool call acts at this provider.
    Effect(&'static str),
}

#[derive(Debug, Clone)]
struct Request {
    id: RequestId,
    kind: Kind,
}

#[derive(Debug)]
enum JobState {
    /// Arrives at this time.
    Due(u64),
    /// (`gate-check-then-insert`) Checked, found nothing; inserts and
    /// sends at this time.
    CheckedAbsent(u64),
    /// Its command is in flight.
    Command(CommandHandle, CommandId),
    /// Its optimistic write waits for a read.
    Fetch(ReadHandle, OptimisticWrite),
    /// Its optimistic write waits for a write.
    Write(CommandHandle, OptimisticWrite),
    /// Finished.
    Done,
}

#[derive(Debug)]
struct Job {
    req: usize,
    state: JobState,
}

struct Instance {
    core: ClientCore,
    conn: Option<ConnId>,
    reconnect_at: u64,
    gate: Gate<MemoryGateStore>,
    jobs: Vec<Job>,
    approvals_decided: BTreeSet<String>,
    /// A request line the network holds back (reordering).
    held: Option<Vec<u8>>,
}

struct App {
    rng: ChaCha8Rng,
    now: u64,
    h: Harness,
    inst: Vec<Instance>,
    session: Option<SessionId>,
    requests: Vec<Request>,
    /// Host-recorded outcomes of each request's arrivals.
    outcomes: BTreeMap<usize, Vec<Value>>,
    faults: BTreeMap<&'static str, u64>,
    hash: Fnv,
    bug: Option<AppBug>,
    p_drop: f64,
    /// The host incarnation the instances' links belong to.
    incarnation: u64,
    /// Instance 0's `session/start`.
    boot: Option<CommandHandle>,
}

impl App {
    fn new_core(&mut self) -> ClientCore {
        let cfg = ClientConfig {
            client_name: "app".into(),
            request_timeout_ms: 1_000,
            handshake_timeout_ms: 1_000,
            retry_backoff_min_ms: 50,
            retry_backoff_max_ms: 500,
            planted_bug_new_id_on_retry: self.bug == Some(AppBug::ClientNewIdOnRetry),
            ..ClientConfig::default()
        };
        ClientCore::new(
            cfg,
            Box::new(SeededEntropy::new(u128::from(self.rng.gen::<u64>()))),
        )
    }

    fn count(&mut self, f: &'static str) {
        *self.faults.entry(f).or_insert(0) += 1;
    }

    /// Moves lines between every instance and the host until quiet.
    fn pump(&mut self) {
        for _ in 0..64 {
            let mut moved = false;
            for i in 0..self.inst.len() {
                while let Some(o) = self.inst[i].core.poll_output() {
                    moved = true;
                    match o {
                        msp::client::Output::Send(bytes) => {
                            let Some(c) = self.inst[i].conn else { continue };
                            self.hash.bytes(&bytes);
                            if self.faulty() && self.rng.gen_bool(self.p_drop) {
                                self.count("request line lost");
                                continue;
                            }
                            if self.faulty() && self.rng.gen_bool(self.p_drop / 2.0) {
                                // Held back: it reaches the host after the
                                // next line (or when the burst ends).
                                self.count("request lines reordered");
                                if let Some(earlier) = self.inst[i].held.replace(bytes) {
                                    self.h.send_raw(c, &earlier);
                                }
                                continue;
                            }
                            self.h.send_raw(c, &bytes);
                            if self.faulty() && self.rng.gen_bool(self.p_drop / 2.0) {
                                self.count("request line duplicated");
                                self.h.send_raw(c, &bytes);
                            }
                            if let Some(held) = self.inst[i].held.take() {
                                self.h.send_raw(c, &held);
                            }
                        }
                        msp::client::Output::CloseLink => {
                            if let Some(c) = self.inst[i].conn.take() {
                                self.h.disconnect(c);
                            }
                            self.inst[i].held = None;
                            self.inst[i].reconnect_at = self.now + 100;
                        }
                    }
                }
                if let Some(c) = self.inst[i].conn {
                    if let Some(held) = self.inst[i].held.take() {
                        moved = true;
                        self.h.send_raw(c, &held);
                    }
                    let mut lines = self.h.take_raw(c);
                    if self.faulty() && lines.len() > 1 && self.rng.gen_bool(self.p_drop) {
                        // Two answer lines swap places.
                        let k = self.rng.gen_range(0..lines.len() - 1);
                        lines.swap(k, k + 1);
                        self.count("answer lines reordered");
                    }
                    for line in lines {
                        moved = true;
                        self.hash.bytes(&line);
                        if self.faulty() && self.rng.gen_bool(self.p_drop) {
                            self.count("answer line lost");
                            continue;
                        }
                        self.inst[i].core.handle_bytes(self.now, &line);
                        if self.faulty() && self.rng.gen_bool(self.p_drop / 2.0) {
                            self.count("answer line duplicated");
                            self.inst[i].core.handle_bytes(self.now, &line);
                        }
                    }
                }
                moved |= self.react(i);
            }
            if !moved {
                return;
            }
        }
    }

    fn faulty(&self) -> bool {
        self.now < T0 + FAULT_PHASE_MS
    }

    /// Handles an instance's completions and events; true if it did
    /// anything.
    fn react(&mut self, i: usize) -> bool {
        let mut any = false;
        while let Some(ev) = self.inst[i].core.poll_event() {
            any = true;
            let ClientEvent::View(v) = ev else { continue };
            if let Notification::ApprovalRequested {
                session_id,
                approval_id,
                ..
            } = &v.notification
            {
                // Every instance that sees an approval approves it; the
                // host takes the first decision and refuses the others.
                if self.inst[i]
                    .approvals_decided
                    .insert(approval_id.as_str().to_string())
                {
                    let spec = CommandSpec::ApprovalDecide {
                        session_id: session_id.clone(),
                        approval_id: approval_id.clone(),
                        source_index: 0,
                        choice_id: "approve".into(),
                    };
                    let _ = self.inst[i].core.submit(self.now, &spec);
                }
            }
        }
        while let Some(c) = self.inst[i].core.poll_completion() {
            any = true;
            self.complete(i, c);
        }
        any
    }

    fn complete(&mut self, i: usize, c: Completion) {
        let now = self.now;
        if let Completion::Command {
            handle, outcome, ..
        } = &c
        {
            if Some(*handle) == self.boot && i == 0 {
                self.session = outcome.ack().and_then(|a| a.session_id().cloned());
                // Handles are per core: a restarted instance 0 counts from
                // 1 again.
                self.boot = None;
                return;
            }
        }
        let Some(j) = self.inst[i].jobs.iter().position(|j| match (&j.state, &c) {
            (JobState::Command(h, _), Completion::Command { handle, .. }) => h == handle,
            (JobState::Write(h, _), Completion::Command { handle, .. }) => h == handle,
            (JobState::Fetch(h, _), Completion::Read { handle, .. }) => h == handle,
            _ => false,
        }) else {
            return; // an approval decision's answer, or a session start
        };
        let req = self.inst[i].jobs[j].req;
        let state = std::mem::replace(&mut self.inst[i].jobs[j].state, JobState::Done);
        let next = match (state, c) {
            (JobState::Command(_, cid), Completion::Command { outcome, .. }) => {
                let rid = self.requests[req].id.clone();
                match self.inst[i].gate.settle(&rid, &cid, outcome) {
                    Ok(o) => {
                        self.record(req, &o);
                        if o.is_recorded_by_host() {
                            JobState::Done
                        } else {
                            JobState::Due(now + 200)
                        }
                    }
                    Err(_) => JobState::Due(now + 200),
                }
            }
            (JobState::Fetch(_, mut w), Completion::Read { result, .. }) => {
                let view = result.ok().as_ref().and_then(StateView::from_session_read);
                let step = w.on_fetched(view, |v| {
                    let k = v.kv.get("k").and_then(Value::as_u64).unwrap_or(0);
                    let mut set = Map::new();
                    set.insert("k".into(), json!(k + 1));
                    Some(set)
                });
                self.step_write(i, w, step)
            }
            (JobState::Write(_, mut w), Completion::Command { outcome, .. }) => {
                let step = w.on_outcome(&outcome);
                self.step_write(i, w, step)
            }
            _ => JobState::Done,
        };
        self.inst[i].jobs[j].state = next;
    }

    fn step_write(&mut self, i: usize, w: OptimisticWrite, step: WriteStep) -> JobState {
        let now = self.now;
        match step {
            WriteStep::Fetch(spec) => match self.inst[i].core.read(now, spec) {
                Ok(h) => JobState::Fetch(h, w),
                Err(_) => JobState::Due(now + 200),
            },
            WriteStep::Write(spec) => match self.inst[i].core.submit(now, &spec) {
                Ok((h, _)) => JobState::Write(h, w),
                Err(_) => JobState::Due(now + 200),
            },
            WriteStep::Done { .. } | WriteStep::Stopped(_) => JobState::Done,
        }
    }

    fn record(&mut self, req: usize, o: &CommandOutcome) {
        if o.is_recorded_by_host() {
            if let Some(v) = o.answer_value() {
                self.outcomes.entry(req).or_default().push(v);
            }
        }
    }

    /// Starts the jobs whose arrival time has come.
    fn arrivals(&mut self) {
        let Some(sid) = self.session.clone() else {
            return;
        };
        let now = self.now;
        for i in 0..self.inst.len() {
            for j in 0..self.inst[i].jobs.len() {
                let (t, checked) = match self.inst[i].jobs[j].state {
                    JobState::Due(t) => (t, false),
                    JobState::CheckedAbsent(t) => (t, true),
                    _ => continue,
                };
                if t > now {
                    continue;
                }
                let req = self.inst[i].jobs[j].req;
                let spec = match &self.requests[req].kind {
                    Kind::Increment => {
                        let (w, step) = OptimisticWrite::new(sid.clone(), 50);
                        let st = self.step_write(i, w, step);
                        self.inst[i].jobs[j].state = st;
                        continue;
                    }
                    Kind::Turn(text) => CommandSpec::TurnStart {
                        session_id: sid.clone(),
                        text: text.clone(),
                        if_busy: None,
                    },
                    Kind::Effect(provider) => CommandSpec::TurnStart {
                        session_id: sid.clone(),
                        text: format!("!effect {provider} pay-{req}"),
                        if_busy: None,
                    },
                };
                let fresh = self.inst[i].core.mint_command_id(now);
                let rid = self.requests[req].id.clone();
                let gap = TICK_MS * self.rng.gen_range(0..3);
                let inst = &mut self.inst[i];
                if self.bug == Some(AppBug::GateCheckThenInsert) {
                    // The planted bug: check now, insert later, and trust
                    // the check.
                    if checked {
                        let proposed = GateRecord {
                            request_id: rid.clone(),
                            command_id: fresh.clone(),
                            command: spec.to_wire(),
                            correlation_id: None,
                            outcome: None,
                            created_ms: now,
                        };
                        let _ = inst.gate.store_mut().claim(&proposed);
                        let st = match inst.core.submit_with_id(now, fresh.clone(), spec.to_wire())
                        {
                            Ok(h) => JobState::Command(h, fresh),
                            Err(_) => JobState::Due(now + 200),
                        };
                        self.inst[i].jobs[j].state = st;
                        continue;
                    }
                    if let Ok(None) = inst.gate.store_mut().get(&rid) {
                        self.inst[i].jobs[j].state = JobState::CheckedAbsent(now + gap);
                        continue;
                    }
                }
                let st = match inst.gate.admit(&rid, None, &spec.to_wire(), fresh, now) {
                    Ok(Admission::Answered { outcome, .. }) => {
                        self.record(req, &outcome);
                        JobState::Done
                    }
                    Ok(Admission::Send {
                        command_id,
                        command,
                        ..
                    }) => match inst.core.submit_with_id(now, command_id.clone(), command) {
                        Ok(h) => JobState::Command(h, command_id),
                        Err(_) => JobState::Due(now + 200),
                    },
                    Err(_) => JobState::Due(now + 200),
                };
                self.inst[i].jobs[j].state = st;
            }
        }
    }

    fn faults(&mut self) {
        if !self.faulty() {
            return;
        }
        if self.rng.gen_bool(0.003) {
            self.count("host crash");
            if self.rng.gen_bool(0.5) {
                self.h.crash_process();
            } else {
                self.h.crash();
            }
            self.notice_host_death();
        }
        if self.rng.gen_bool(0.01) && !self.h.crash_after_next_effect {
            self.count("provider response lost");
            self.h.crash_after_next_effect = true;
        }
        if self.session.is_some() && self.rng.gen_bool(0.002) {
            let i = self.rng.gen_range(0..self.inst.len());
            self.count("application instance crash");
            if let Some(c) = self.inst[i].conn.take() {
                self.h.disconnect(c);
            }
            let core = self.new_core();
            let inst = &mut self.inst[i];
            inst.core = core;
            inst.held = None;
            inst.reconnect_at = self.now + 300;
            inst.approvals_decided.clear();
            if let Some(sid) = &self.session {
                inst.core.follow(self.now, sid.clone(), None);
            }
            // The request arrives again at the restarted instance.
            for j in &mut inst.jobs {
                if !matches!(j.state, JobState::Done | JobState::Due(_)) {
                    j.state = JobState::Due(self.now + 300);
                }
            }
        }
    }

    fn tick(&mut self) {
        self.faults();
        for i in 0..self.inst.len() {
            if self.inst[i].conn.is_none() && self.now >= self.inst[i].reconnect_at {
                self.inst[i].conn = Some(self.h.connect());
                self.inst[i].core.handle_connected(self.now);
            }
        }
        self.arrivals();
        self.pump();
        self.h.advance(TICK_MS);
        self.now += TICK_MS;
        for i in 0..self.inst.len() {
            if self.inst[i]
                .core
                .poll_timeout()
                .is_some_and(|t| t <= self.now)
            {
                self.inst[i].core.handle_timeout(self.now);
            }
        }
        self.pump();
        self.notice_host_death();
    }

    /// Connections of a host incarnation that died are dead: every
    /// instance learns it and reconnects.
    fn notice_host_death(&mut self) {
        if self.h.incarnation() == self.incarnation {
            return;
        }
        self.incarnation = self.h.incarnation();
        for x in &mut self.inst {
            if x.conn.take().is_some() {
                x.core.handle_disconnected(self.now);
            }
            x.held = None;
            x.reconnect_at = self.now + 100;
        }
    }
}

/// Runs one application scenario with one seed.
pub fn run_app(scenario: AppScenario, seed: u64, bug: Option<AppBug>) -> AppRun {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6170_705f_7363_656e);
    let mut cfg = HostConfig::new("/sim", Durability::Durable, rng.gen());
    cfg.idle_unload_ms = 0;
    let bugs = match bug {
        Some(AppBug::RetryUnkeyedEffect) => BugSet::one(Bug::RetryUnkeyedEffect),
        _ => BugSet::default(),
    };
    let h = Harness::with_agent(cfg, T0, msp::core::agent::scripted_factory(), bugs);
    let store = MemoryGateStore::new(Commit::Immediate);
    let mut app = App {
        rng,
        now: T0,
        h,
        inst: Vec::new(),
        session: None,
        requests: Vec::new(),
        outcomes: BTreeMap::new(),
        faults: BTreeMap::new(),
        hash: Fnv::new(),
        bug,
        p_drop: 0.0,
        incarnation: 1,
        boot: None,
    };
    app.p_drop = [0.02, 0.05, 0.1][app.rng.gen_range(0..3)];
    let instances = if scenario == AppScenario::TwoWriters {
        2
    } else {
        3
    };
    for _ in 0..instances {
        let core = app.new_core();
        app.inst.push(Instance {
            core,
            conn: None,
            reconnect_at: T0,
            gate: Gate::new(store.clone()),
            jobs: Vec::new(),
            approvals_decided: BTreeSet::new(),
            held: None,
        });
    }
    // The session, started by instance 0 before any fault.
    app.inst[0].conn = Some(app.h.connect());
    app.inst[0].core.handle_connected(T0);
    let (h0, _) = app.inst[0]
        .core
        .submit(
            T0,
            &CommandSpec::SessionStart {
                session_id: None,
                workspace_root: None,
            },
        )
        .expect("a valid session/start");
    app.boot = Some(h0);
    for _ in 0..1_000 {
        app.tick();
        if app.session.is_some() {
            break;
        }
    }
    let Some(sid) = app.session.clone() else {
        return app.finish(
            seed,
            vec![AppViolation {
                property: "liveness",
                detail: "session/start was never answered in 20 s".into(),
            }],
        );
    };
    for x in &mut app.inst {
        x.core.follow(app.now, sid.clone(), None);
    }
    // The requests and their arrivals.
    let kinds: Vec<Kind> = match scenario {
        AppScenario::DoubleClick => (0..8).map(|n| Kind::Turn(format!("request {n}"))).collect(),
        AppScenario::TwoWriters => (0..12).map(|_| Kind::Increment).collect(),
        AppScenario::Effects => (0..8)
            .map(|n| Kind::Effect(if n % 2 == 0 { "keyed" } else { "unkeyed" }))
            .collect(),
        AppScenario::MixedApp => (0..12)
            .map(|n| match n % 3 {
                0 => Kind::Turn(format!("request {n}")),
                1 => Kind::Increment,
                _ => Kind::Effect(if n % 2 == 0 { "keyed" } else { "unkeyed" }),
            })
            .collect(),
    };
    for (n, kind) in kinds.into_iter().enumerate() {
        let id = RequestId::new(format!("req-{seed}-{n}")).expect("non-empty");
        let first = app.rng.gen_range(0..app.inst.len());
        let at = app.now + app.rng.gen_range(0..FAULT_PHASE_MS / 2);
        let arrivals: Vec<(usize, u64)> = match kind {
            // Each writer is its own request, at one instance.
            Kind::Increment => vec![(n % app.inst.len(), at)],
            _ => {
                let second =
                    (first + 1 + app.rng.gen_range(0..app.inst.len() - 1)) % app.inst.len();
                let gap = [0, 1, 30, 400, 3_000][app.rng.gen_range(0..5)];
                vec![(first, at), (second, at + gap)]
            }
        };
        app.requests.push(Request { id, kind });
        for (i, t) in arrivals {
            app.inst[i].jobs.push(Job {
                req: n,
                state: JobState::Due(t),
            });
        }
    }
    while app.now < T0 + END_MS {
        app.tick();
        let busy = app
            .inst
            .iter()
            .any(|x| x.jobs.iter().any(|j| !matches!(j.state, JobState::Done)));
        if !busy && !app.faulty() {
            // Let running turns finish before judging.
            for _ in 0..100 {
                app.tick();
            }
            break;
        }
    }
    let violations = app.judge(&sid);
    app.finish(seed, violations)
}

impl App {
    fn finish(self, seed: u64, violations: Vec<AppViolation>) -> AppRun {
        let answered_count = (0..self.requests.len())
            .filter(|r| {
                self.inst.iter().all(|x| {
                    x.jobs
                        .iter()
                        .filter(|j| j.req == *r)
                        .all(|j| matches!(j.state, JobState::Done))
                })
            })
            .count();
        AppRun {
            seed,
            violations,
            answered_count,
            requests_count: self.requests.len(),
            faults: self.faults,
            hash: self.hash.0,
        }
    }

    /// The oracles (see the module docs).
    fn judge(&self, sid: &SessionId) -> Vec<AppViolation> {
        let mut out = Vec::new();
        let bytes = self
            .h
            .disk
            .files
            .get(sid.as_str())
            .map(|f| f.contents())
            .unwrap_or_default();
        let log = match decode_log(&bytes) {
            Ok(l) => l,
            Err(e) => {
                out.push(AppViolation {
                    property: "log-readable",
                    detail: format!("{e:?}"),
                });
                return out;
            }
        };
        // Commands received per request (by the text it sent), and applied
        // increments in log order.
        let mut received: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut increments: BTreeMap<String, i64> = BTreeMap::new();
        let mut applied_values = Vec::new();
        let mut effect_items: BTreeMap<String, String> = BTreeMap::new();
        for (r, _) in &log.records {
            match r {
                Record::Received {
                    command_id,
                    method,
                    params,
                    ..
                } => {
                    if method == "turn/start" {
                        if let Some(t) = params["input"][0]["text"].as_str() {
                            received
                                .entry(t.to_string())
                                .or_default()
                                .insert(command_id.clone());
                        }
                    } else if method == "state/update" {
                        if let Some(v) = params["set"]["k"].as_i64() {
                            increments.insert(command_id.clone(), v);
                        }
                    }
                }
                Record::Settled {
                    command_id,
                    outcome: Outcome::Applied,
                } => {
                    if let Some(v) = increments.get(command_id) {
                        applied_values.push(*v);
                    }
                }
                Record::Event { method, params, .. } if method == "item/completed" => {
                    let params = params.to_value();
                    let item = &params["item"];
                    if item["kind"] == "toolCall" {
                        if let (Some(a), Some(o)) =
                            (item["approvalId"].as_str(), item["effectOutcome"].as_str())
                        {
                            effect_items.insert(format!("{sid}:{a}"), o.to_string());
                        }
                    }
                }
                _ => {}
            }
        }
        for (n, req) in self.requests.iter().enumerate() {
            let text = match &req.kind {
                Kind::Turn(t) => t.clone(),
                Kind::Effect(p) => format!("!effect {p} pay-{n}"),
                Kind::Increment => continue,
            };
            let ids = received.get(&text).map_or(0, BTreeSet::len);
            if ids > 1 {
                out.push(AppViolation {
                    property: "one-command-per-request",
                    detail: format!("request {} reached the host as {ids} commands", req.id),
                });
            }
        }
        for x in &self.inst {
            for j in &x.jobs {
                if !matches!(j.state, JobState::Done) {
                    out.push(AppViolation {
                        property: "every-request-answered",
                        detail: format!(
                            "request {} still {:?} after the faults healed",
                            self.requests[j.req].id, j.state
                        ),
                    });
                }
            }
        }
        for (n, answers) in &self.outcomes {
            if answers.windows(2).any(|w| w[0] != w[1]) {
                out.push(AppViolation {
                    property: "one-outcome-per-request",
                    detail: format!(
                        "request {} got different answers: {answers:?}",
                        self.requests[*n].id
                    ),
                });
            }
        }
        for (k, v) in applied_values.iter().enumerate() {
            if *v != k as i64 + 1 {
                out.push(AppViolation {
                    property: "no-lost-update",
                    detail: format!("applied increments {applied_values:?}"),
                });
                break;
            }
        }
        let mut performed: BTreeMap<&str, u32> = BTreeMap::new();
        for (_, key) in &self.h.disk.unkeyed {
            *performed.entry(key.as_str()).or_insert(0) += 1;
        }
        for (key, n) in &performed {
            if *n > 1 {
                out.push(AppViolation {
                    property: "unkeyed-at-most-once",
                    detail: format!("effect {key} was performed {n} times without key support"),
                });
            }
        }
        for key in &self.h.lost_effects {
            if !performed.contains_key(key.as_str()) {
                continue; // a keyed effect: reconciled by query
            }
            match effect_items.get(key).map(String::as_str) {
                None | Some("unknown") => {}
                Some(o) => out.push(AppViolation {
                    property: "unknown-surfaced",
                    detail: format!("effect {key}'s response was lost, yet it is reported {o}"),
                }),
            }
        }
        out
    }
}
