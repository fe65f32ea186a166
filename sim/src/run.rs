//! One simulated run: the world loop that ties hosts, links, the disk and
//! clients together, then hands the trace to the oracles.
//!
//! Fault model: this module applies the faults of [`crate::faults`] at the
//! points named there (each through `World::decide`): per line on a link,
//! per host output (crash, crash point), per sync (fsync failure, disk
//! full), per effect (lost response), per crash (torn write). A run is a
//! safety phase with faults on, then a liveness phase with every fault
//! healed and every dead host restarted, in which every client must
//! converge.
//!
//! Compaction is on in 30% of seeds (the fault mix draws a record
//! threshold; [`COMPACT_ENV`] overrides it). The reference model does not
//! read snapshot records yet, so such runs are judged on
//! [`Trace::logical`]: the history a host that never compacts would have
//! left. With it on, each compaction step may crash the host
//! (named `compact-archived`, `compact-written`, `compact-renamed`, drawn
//! like the named crash points), and a power loss between the rename and
//! the directory sync may lose the rename.

use std::collections::BTreeMap;

use msp::core::bugs::{Bug, BugSet};
use msp::core::{
    CompactStep, Durability, EffectMode, EffectOutcome, HistoryResult, OpenMode, OpenResult,
    Output, ReadResult,
};

use crate::choice::{Choice, Source};
use crate::client::{Action, Client, Ctx, Role};
use crate::disk::Disk;
use crate::faults::{FaultMix, LATE_TIMER_MAX_MS};
use crate::net::Link;
use crate::oracle::{self, Violation};
use crate::plan::{Draws, Plan, Probe, ProbeSeen, Workload};
use crate::process::HostProc;
use crate::trace::{Actor, Fnv, Trace, What};
use crate::workload::Scenario;
use crate::world::{Decision, Event, Io, World};

/// The simulated epoch (so UUIDv7 timestamps look real).
pub const START_MS: u64 = 1_754_590_931_000;
/// The longest safety phase.
pub const SAFETY_MAX_MS: u64 = 60_000;
/// The liveness phase: every command must be answered within this.
pub const LIVENESS_MS: u64 = 90_000;
/// A run that processes more events than this is stuck.
pub const EVENTS_MAX: u64 = 3_000_000;
/// How long a host that began a graceful shutdown may take to become
/// quiescent before it is killed (simulated ms): past every sync stall
/// and effect timeout but one.
pub const SHUTDOWN_GRACE_MS: u64 = 10_000;

/// Per mille of the lines delivered to a host that arrive in two reads
/// (`Draws::WithFragments`).
pub const FRAGMENT_PERMILLE: u64 = 50;

/// Under `slow-io`, the share (permille) of delayed opens and reads that
/// take 50-400 ms (a disk busy with other readers) rather than 1-40 ms:
/// long enough for a reconnect, a duplicate line or an unload to land
/// while the host waits.
pub const SLOW_IO_LONG_PERMILLE: u64 = 125;

/// Under `late-timer`, the share (permille) of late timers that fire
/// 11-[`LATE_TIMER_MAX_MS`] ms late (a driver thread busy with a long
/// input) rather than 1-10 ms.
pub const LATE_TIMER_LONG_PERMILLE: u64 = 125;

/// The chance (permille) that an append the disk refused is reported to
/// its host only once the host's queued outputs are carried out, as
/// `msp serve` does, rather than at once (draws version 13): both orders
/// are exercised.
pub const DEFERRED_FAILURE_PERMILLE: u64 = 500;

/// A host that produces more outputs than this for one input without
/// waiting for anything is in a livelock (a read it asks again and again,
/// say): the run stops there, with the note the run-bounded oracle reads.
pub const HOST_STEPS_MAX: u64 = 1_000_000;
/// `MSP_SIM_COMPACT_RECORDS=N`: every host compacts a session's log after
/// N records (`HostConfig::compact_records`); unset or 0: as the seed's
/// fault mix draws (off in 70% of seeds).
pub const COMPACT_ENV: &str = "MSP_SIM_COMPACT_RECORDS";

/// `MSP_SIM_JUDGE=raw`: with compaction on, judge the compacted trace as it
/// is instead of [`Trace::logical`] (the model does not read snapshot
/// records yet, so this reports false alarms: a diagnostic).
pub const JUDGE_ENV: &str = "MSP_SIM_JUDGE";

/// The compaction threshold [`COMPACT_ENV`] asks for (0: off).
pub fn compact_records_from_env() -> u64 {
    std::env::var(COMPACT_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunConfig {
    /// The scenario.
    pub scenario: Scenario,
    /// The seed.
    pub seed: u64,
    /// A planted bug for every host, if any.
    pub bug: Option<Bug>,
    /// Which client drives the hosts (`--client`).
    pub client: ClientKind,
}

/// Which client logic a run's clients use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum ClientKind {
    /// The simulator's own SDK-like client ([`crate::client`]), kept so
    /// that every run file and corpus entry without a `client` member
    /// (recorded before the SDK existed) replays bit for bit; nothing new
    /// runs it unless asked.
    Sim,
    /// The real SDK core ([`msp::client::ClientCore`]) under the
    /// simulator's workloads ([`crate::sdk_client`]): what every command
    /// runs by default.
    #[default]
    Sdk,
    /// [`ClientKind::Sdk`] as it was before its observer paged session
    /// histories (`view/page`): every run file and corpus entry of client
    /// `sdk` recorded before then (without `observerPages`) replays bit
    /// for bit with it.
    SdkV1,
}

impl ClientKind {
    /// Every kind.
    pub const ALL: [ClientKind; 3] = [ClientKind::Sim, ClientKind::Sdk, ClientKind::SdkV1];

    /// The CLI and run-file name.
    pub fn name(self) -> &'static str {
        match self {
            ClientKind::Sim => "sim",
            ClientKind::Sdk => "sdk",
            ClientKind::SdkV1 => "sdk-v1",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<ClientKind> {
        ClientKind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The config.
    pub config: RunConfig,
    /// The fault mix, as printed.
    pub mix: String,
    /// The trace.
    pub trace: Trace,
    /// World events processed.
    pub events_count: u64,
    /// Bytes of every line sent on a link, by clients and hosts (before
    /// drops and duplicates): what the run moved, for the bench's cost per
    /// wire byte.
    pub wire_bytes: u64,
    /// Simulated duration.
    pub simulated_ms: u64,
    /// Fault counts by verb.
    pub faults: BTreeMap<&'static str, u64>,
    /// Named crash points reached.
    pub crash_point_hits: BTreeMap<&'static str, u64>,
    /// Named crash points at which the host was crashed.
    pub crash_point_crashes: BTreeMap<&'static str, u64>,
    /// Property violations, first first.
    pub violations: Vec<Violation>,
    /// How often each rule of PROTOCOL.md was exercised (the model's
    /// count, [`crate::model::report::RULES`]).
    pub rules: BTreeMap<&'static str, u64>,
    /// The clients as the run left them: their record of every logical
    /// command they issued (what the liveness oracle reads besides the
    /// trace). Public so tests can re-run the oracles over a doctored copy
    /// with [`oracle::check_all`].
    pub clients: Vec<Client>,
    /// Every decision the run drew, in order: replaying their values
    /// ([`Plan::recorded`]) gives this run again, bit for bit.
    pub choices: Vec<Choice>,
    /// What the plan's probe saw, if it had one.
    pub probe: Option<ProbeSeen>,
}

struct Sim {
    w: World,
    cfg: RunConfig,
    mix: FaultMix,
    /// Which decisions and moves this run makes (its plan's).
    draws: Draws,
    durability: Durability,
    bugs: BugSet,
    idle_unload_ms: u64,
    compact_records: u64,
    disk: Disk,
    hosts: Vec<HostProc>,
    links: BTreeMap<u64, Link>,
    next_link: u64,
    clients: Vec<Client>,
    trace: Trace,
    healing: bool,
    heal_scheduled: bool,
    rotted: bool,
    events_count: u64,
    /// A host exceeded [`HOST_STEPS_MAX`]: the run ends.
    stuck: bool,
    wire_bytes: u64,
    faults: BTreeMap<&'static str, u64>,
    cp_hits: BTreeMap<&'static str, u64>,
    cp_crashes: BTreeMap<&'static str, u64>,
    workload: Workload,
    host_seeds: Vec<u64>,
    /// The context a client is handed, refilled in place before each
    /// hand-out ([`Sim::refresh_ctx`]): a client wakes or reads a line at
    /// nearly every event, and building a fresh one each time (three
    /// vectors, a copy of every held session's id) was 1.4% of a run.
    ctx: Ctx,
}

/// Runs one seed of one scenario and checks every property.
pub fn run(cfg: &RunConfig) -> RunResult {
    run_with(cfg, &Plan::seeded(), None)
}

/// Runs `cfg` as `plan` says (a recorded choice sequence, a fixed workload
/// or fault mix) and checks every property, unless `probe` stops it.
pub fn run_with(cfg: &RunConfig, plan: &Plan, probe: Option<Probe<'_>>) -> RunResult {
    // Reloads decode each log record once per run, not once per load
    // (see `msp::core::record::memo`; results are the same).
    let _memo = msp::core::record::DecodeMemo::install();
    // Loads of a log loaded before fold only what was appended since
    // (see `msp::core::log_fold`; results are the same).
    let _folds = msp::core::log_fold::FoldMemo::install();
    let mut w = match (&plan.choices, plan.then_seed) {
        (None, _) => World::new(cfg.seed, START_MS),
        (Some(v), None) => World::with_source(Source::recorded(v.clone()), START_MS),
        (Some(v), Some(seed)) => World::with_source(
            Source::Prefixed {
                values: v.clone(),
                pos: 0,
                rng: Box::new(<rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(seed)),
            },
            START_MS,
        ),
    };
    w.fixed_workload = plan.workload.is_some();
    let mix = match &plan.mix {
        Some(m) => m.clone(),
        None => FaultMix::draw(&mut w, cfg.scenario, plan.draws),
    };
    let compact_records = match compact_records_from_env() {
        0 => mix.compact_records,
        n => n,
    };
    let idle_unload_ms = match cfg.scenario {
        Scenario::LeaseHandover => 1_500,
        _ => [0, 4_000, 600_000][w.decide(Decision::FaultMix, 3) as usize],
    };
    let durability = if cfg.scenario.durable() {
        Durability::Durable
    } else {
        Durability::Ephemeral
    };
    let mut s = Sim {
        w,
        cfg: cfg.clone(),
        mix,
        draws: plan.draws,
        durability,
        bugs: cfg.bug.map(BugSet::one).unwrap_or_default(),
        idle_unload_ms,
        compact_records,
        disk: Disk::default(),
        hosts: (0..cfg.scenario.hosts_count())
            .map(|_| HostProc::new())
            .collect(),
        links: BTreeMap::new(),
        next_link: 1,
        clients: Vec::new(),
        trace: Trace::new(),
        healing: false,
        heal_scheduled: false,
        rotted: false,
        events_count: 0,
        stuck: false,
        wire_bytes: 0,
        faults: BTreeMap::new(),
        cp_hits: BTreeMap::new(),
        cp_crashes: BTreeMap::new(),
        workload: plan.workload.unwrap_or(Workload::of(cfg.scenario)),
        host_seeds: vec![0; cfg.scenario.hosts_count()],
        ctx: Ctx {
            live_hosts: Vec::new(),
            healing: false,
            scenario: cfg.scenario,
            sessions: Vec::new(),
            session_issued: Vec::new(),
            idle_unload_ms: 0,
            subscribes: false,
            escapes: false,
            upper_ids: false,
            crossing: false,
            twins: false,
            prompt_approvals: false,
        },
    };
    // A panic of the host (or of the simulator) ends the run as a failure
    // of its seed, replayable and shrinkable like any other: the trace up
    // to the panic is kept, and the judges are not asked about a run cut
    // short.
    let panicked = {
        let _quiet = panics::Capture::begin();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.go(probe))) {
            Ok(p) => Err(p),
            Err(payload) => Ok(panics::text(&payload)),
        }
    };
    let probe = match panicked {
        Err(p) => p,
        Ok(text) => {
            s.note(Actor::World, What::Note(format!("panic: {text}")));
            let at = s.trace.entries.len().checked_sub(1);
            let v = oracle::Violation::new("no-panic", at, format!("the run panicked: {text}"));
            let mix = s.mix.describe();
            return RunResult {
                config: cfg.clone(),
                mix,
                simulated_ms: s.w.now_ms - START_MS,
                events_count: s.events_count,
                wire_bytes: s.wire_bytes,
                faults: s.faults,
                crash_point_hits: s.cp_hits,
                crash_point_crashes: s.cp_crashes,
                violations: vec![v],
                rules: BTreeMap::new(),
                trace: s.trace,
                clients: s.clients,
                choices: s.w.take_choices(),
                probe: None,
            };
        }
    };
    // With compaction on, the model judges the trace as a host that never
    // compacts would have left it (`Trace::logical`); `MSP_SIM_JUDGE=raw`
    // shows what it makes of the compacted trace itself.
    let logical = s.compact_records > 0 && !std::env::var(JUDGE_ENV).is_ok_and(|v| v == "raw");
    let (violations, rules) = if probe.is_some_and(|p| p.pruned) {
        (Vec::new(), BTreeMap::new())
    } else if logical {
        oracle::judge(&s.trace.logical(), &s.clients, cfg.scenario, &s.disk)
    } else {
        oracle::judge(&s.trace, &s.clients, cfg.scenario, &s.disk)
    };
    let mix = s.mix.describe();
    RunResult {
        config: cfg.clone(),
        mix,
        simulated_ms: s.w.now_ms - START_MS,
        events_count: s.events_count,
        wire_bytes: s.wire_bytes,
        faults: s.faults,
        crash_point_hits: s.cp_hits,
        crash_point_crashes: s.cp_crashes,
        violations,
        rules,
        trace: s.trace,
        clients: s.clients,
        choices: s.w.take_choices(),
        probe,
    }
}

impl Sim {
    /// How long the safety phase may last: [`SAFETY_MAX_MS`], stretched
    /// in proportion for a fixed workload with more commands per client
    /// than the scenario's (so `msp-sim bench --commands N` measures N
    /// commands, not as many as fit in 60 s). Scenario workloads and
    /// shrunk ones (fewer commands) keep the plain cap, so their traces
    /// are unchanged.
    fn safety_ms(&self) -> u64 {
        let own = u64::from(Workload::of(self.cfg.scenario).commands_per_client.max(1));
        let asked = u64::from(self.workload.commands_per_client);
        SAFETY_MAX_MS * asked.div_ceil(own).max(1)
    }

    fn note(&mut self, actor: Actor, what: What) {
        let now = self.w.now_ms - START_MS;
        self.trace.push(now, actor, what);
        self.w.trace_len = self.trace.entries.len();
    }

    fn count(&mut self, fault: &'static str) {
        *self.faults.entry(fault).or_insert(0) += 1;
    }

    fn go(&mut self, mut probe: Option<Probe<'_>>) -> Option<ProbeSeen> {
        let mut seen = None;
        if let Some(p) = &probe {
            self.w.set_probe(p.at_decision);
        }
        let mix = self.mix.describe();
        self.note(
            Actor::World,
            What::FaultMix(format!("{} idle-unload={}ms", mix, self.idle_unload_ms)),
        );
        self.note(Actor::World, What::Phase("safety".into()));
        for h in 0..self.hosts.len() {
            self.start_host(h);
        }
        for _ in 0..self.workload.clients_count {
            // Option 0 (the fewest actions): this client takes no part.
            if !self.w.more_work(Decision::Client) {
                continue;
            }
            let c = self.clients.len();
            let budget = self.workload.commands_per_client;
            let client = match self.cfg.client {
                ClientKind::Sim => Client::new(c, Role::Driver, budget),
                kind => Client::new_sdk(
                    &mut self.w,
                    c,
                    Role::Driver,
                    budget,
                    self.durability == Durability::Durable,
                    kind == ClientKind::Sdk,
                ),
            };
            self.clients.push(client);
            let at = self.w.now_ms + self.w.range(Decision::Client, 0, 50);
            self.w.schedule(at, Event::ClientWake(c));
        }
        if self.durability == Durability::Durable
            && self.workload.observer
            && self.w.more_work(Decision::Client)
        {
            let o = self.clients.len();
            let observer = match self.cfg.client {
                ClientKind::Sim => Client::new(o, Role::Observer, 0),
                kind => Client::new_sdk(
                    &mut self.w,
                    o,
                    Role::Observer,
                    0,
                    true,
                    kind == ClientKind::Sdk,
                ),
            };
            self.clients.push(observer);
            self.w.schedule(self.w.now_ms + 500, Event::ClientWake(o));
        }
        self.w.schedule(START_MS + self.safety_ms(), Event::Heal);
        while let Some(ev) = self.w.pop() {
            self.events_count += 1;
            if self.events_count > EVENTS_MAX || self.stuck {
                self.note(Actor::World, What::Note("event budget exhausted".into()));
                break;
            }
            match ev {
                Event::End => {
                    // Opens and reads still in flight complete first (the
                    // disk finishes what hosts asked of it), so a request
                    // read just before the end is answered, not cut off;
                    // nothing else happens any more.
                    // Bounded: a host that keeps asking for reads with no
                    // client left to ask it is in a livelock.
                    for n in 0.. {
                        let Some(Event::IoDone {
                            host,
                            incarnation,
                            io,
                        }) = self.w.pop_io()
                        else {
                            break;
                        };
                        if n == HOST_STEPS_MAX {
                            let n =
                                format!("host{host} kept reading after the run's end (a livelock)");
                            self.note(Actor::Host(host), What::Note(n));
                            self.stuck = true;
                            break;
                        }
                        self.io_done(host, incarnation, io);
                    }
                    break;
                }
                Event::Heal => self.heal(),
                Event::ClientWake(c) => self.client_wake(c),
                Event::Deliver {
                    link,
                    to_host,
                    line,
                } => self.deliver(link, to_host, line),
                Event::HostTimer { host, incarnation } => self.host_timer(host, incarnation),
                Event::SyncDone {
                    host,
                    incarnation,
                    session,
                    upto_bytes,
                    epoch,
                } => self.sync_done(host, incarnation, session, upto_bytes, epoch),
                Event::IoDone {
                    host,
                    incarnation,
                    io,
                } => self.io_done(host, incarnation, io),
                Event::EffectDone {
                    host,
                    incarnation,
                    token,
                    key,
                    outcome,
                } => {
                    if self.hosts[host].inc == incarnation && self.hosts[host].alive() {
                        let o = [
                            EffectOutcome::Committed,
                            EffectOutcome::NotStarted,
                            EffectOutcome::Unknown,
                        ][outcome as usize];
                        self.note(
                            Actor::Host(host),
                            What::EffectDone {
                                inc: incarnation,
                                key,
                                outcome: o.as_str(),
                            },
                        );
                        let now = self.w.now_ms;
                        if let Some(hst) = self.hosts[host].host.as_mut() {
                            hst.handle_effect_done(token, o, now);
                            self.drain(host);
                        }
                    }
                }
                Event::Restart(h) => {
                    if !self.hosts[h].alive() {
                        self.start_host(h);
                    }
                }
                Event::StopDeadline { host, incarnation } => {
                    if self.hosts[host].inc == incarnation && self.hosts[host].alive() {
                        let n = format!(
                            "host{host} was not quiescent {SHUTDOWN_GRACE_MS} ms after its shutdown began: killed"
                        );
                        self.note(Actor::Host(host), What::Note(n));
                        self.crash_process(host, None);
                    }
                }
                Event::HostSeesClose { link } => self.host_sees_close(link),
            }
            if seen.is_none() && self.w.probe_hit() {
                if let Some(p) = probe.as_mut() {
                    let state_hash = self.state_hash();
                    let pruned = (p.prune)(state_hash);
                    seen = Some(ProbeSeen {
                        state_hash,
                        decisions_count: self.w.choices().len(),
                        pruned,
                    });
                    if pruned {
                        return seen;
                    }
                }
            }
        }
        self.note(Actor::World, What::Phase("end".into()));
        seen
    }

    /// A hash of everything the rest of the run depends on (besides the
    /// choices still to come): the history so far (the trace hash), the
    /// clock, the events waiting, the clients, links, hosts (their cores
    /// are a function of the history and their seeds) and the disk. Two
    /// runs with one state hash run on alike if their choices do.
    fn state_hash(&self) -> u64 {
        let mut h = Fnv::new();
        h.u64(self.trace.hash());
        h.u64(self.w.now_ms);
        for (at, e) in self.w.queue_snapshot() {
            h.u64(at);
            h.bytes(format!("{e:?}").as_bytes());
        }
        h.bytes(format!("{:?}", self.clients).as_bytes());
        h.bytes(format!("{:?}", self.links).as_bytes());
        for (hp, seed) in self.hosts.iter().zip(&self.host_seeds) {
            h.bytes(
                format!(
                    "{} {} {:?} {:?} {}",
                    hp.inc,
                    hp.alive(),
                    hp.timer_at_ms,
                    hp.links,
                    hp.next_conn
                )
                .as_bytes(),
            );
            h.u64(*seed);
        }
        for (name, f) in &self.disk.files {
            h.bytes(name.as_bytes());
            h.bytes(&f.bytes);
            h.bytes(format!("{} {} {}", f.durable_len, f.last_write_at, f.epoch).as_bytes());
        }
        h.bytes(
            format!(
                "{:?} {:?} {:?} {}",
                self.disk.leases, self.disk.keyed, self.disk.unkeyed, self.disk.full_until_ms
            )
            .as_bytes(),
        );
        h.bytes(format!("{} {}", self.healing, self.heal_scheduled).as_bytes());
        h.0
    }

    fn heal(&mut self) {
        if self.healing {
            return;
        }
        self.healing = true;
        self.disk.full_until_ms = 0;
        self.note(Actor::World, What::Phase("liveness".into()));
        for h in 0..self.hosts.len() {
            if !self.hosts[h].alive() {
                let now = self.w.now_ms;
                self.w.schedule(now, Event::Restart(h));
            }
        }
        let end = self.w.now_ms + LIVENESS_MS;
        self.w.schedule(end, Event::End);
    }

    fn start_host(&mut self, h: usize) {
        let seed = self.w.bits128(Decision::Ids) as u64;
        self.host_seeds[h] = seed;
        // Drawn only when the level is on (runs drawn before it draw
        // nothing here).
        let solo_syncs = self.w.chance(Decision::Disk, self.mix.solo_sync_permille);
        let now = self.w.now_ms;
        self.hosts[h].start(
            self.durability,
            seed,
            (self.idle_unload_ms, self.compact_records, !solo_syncs),
            now,
            self.bugs,
        );
        let inc = self.hosts[h].inc;
        if inc > 1 {
            self.count("restart");
        }
        if solo_syncs {
            self.count("solo-sync");
        }
        self.note(
            Actor::Host(h),
            What::HostStart {
                inc,
                durable: self.durability == Durability::Durable,
                solo_syncs,
            },
        );
    }

    /// Refills [`Sim::ctx`] with the world as it is now, reusing its
    /// buffers (the same values a fresh one would hold).
    fn refresh_ctx(&mut self) {
        let c = &mut self.ctx;
        c.live_hosts.clear();
        c.live_hosts
            .extend((0..self.hosts.len()).filter(|h| self.hosts[*h].alive()));
        let held = self
            .clients
            .iter()
            .filter(|c| c.role == Role::Driver)
            .filter_map(|c| Some((c.session.as_ref()?, c.issued())));
        let mut n = 0;
        for (i, (sid, issued)) in held.enumerate() {
            match c.sessions.get_mut(i) {
                Some(s) => s.clone_from(sid),
                None => c.sessions.push(sid.clone()),
            }
            match c.session_issued.get_mut(i) {
                Some(x) => *x = issued,
                None => c.session_issued.push(issued),
            }
            n = i + 1;
        }
        c.sessions.truncate(n);
        c.session_issued.truncate(n);
        c.healing = self.healing;
        c.scenario = self.cfg.scenario;
        c.idle_unload_ms = self.idle_unload_ms;
        c.subscribes = self.draws >= Draws::WithSubscriptions;
        c.escapes = self.draws >= Draws::WithEscapes;
        c.upper_ids = self.draws >= Draws::WithUpperIds;
        c.crossing = self.draws >= Draws::WithSoloSyncs;
        c.twins = self.draws >= Draws::WithTwins;
        c.prompt_approvals = self.draws >= Draws::WithPromptApprovals;
    }

    // ----- clients ---------------------------------------------------------

    fn client_wake(&mut self, c: usize) {
        self.refresh_ctx();
        let acts = self.clients[c].on_wake(&mut self.w, &self.ctx);
        self.client_actions(c, acts);
        if !self.heal_scheduled
            && self
                .clients
                .iter()
                .filter(|c| c.role == Role::Driver)
                .all(|c| c.settled() && c.budget_left() == 0)
        {
            self.heal_scheduled = true;
            let at = self.w.now_ms + 2_000;
            self.w.schedule(at, Event::Heal);
        }
    }

    fn client_actions(&mut self, c: usize, acts: Vec<Action>) {
        for a in acts {
            match a {
                Action::WakeAt(t) => self.w.schedule(t, Event::ClientWake(c)),
                Action::Note(s) => {
                    // The client's own fault: it leaves its host.
                    if s.starts_with("reconnect:") {
                        self.count("reconnect");
                    }
                    self.note(Actor::Client(c), What::Note(s))
                }
                Action::Send(line) => {
                    if let Some(l) = self.clients[c].link {
                        self.send_to_host(l, line);
                    }
                }
                Action::Twin(line) => {
                    let Some(own) = self.clients[c].link else {
                        continue;
                    };
                    let to = self.twin_link(c, own).unwrap_or(own);
                    if to != own {
                        self.count("twin");
                        self.note(
                            Actor::Client(c),
                            What::Note(format!("twin: link {own} -> {to}")),
                        );
                    }
                    self.send_to_host(to, line);
                }
                Action::Close => {
                    if let Some(l) = self.client_link_of(c) {
                        self.client_closes(l);
                    }
                }
                Action::Connect(h) => self.connect(c, h),
            }
        }
    }

    /// The link a twin of client `c` (on link `own`) sends on: the first
    /// other client's link, in client order, to the same host incarnation,
    /// open both ways and past its handshake.
    fn twin_link(&self, c: usize, own: u64) -> Option<u64> {
        let (host, inc) = self.links.get(&own).map(|l| (l.host, l.inc))?;
        self.clients
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != c)
            .filter_map(|(_, other)| other.ready_link())
            .find(|l| {
                self.links
                    .get(l)
                    .is_some_and(|x| x.host == host && x.inc == inc && x.client_open && x.host_open)
            })
    }

    fn client_link_of(&self, c: usize) -> Option<u64> {
        // The client already forgot its link when it asked to close; find
        // the open one it had.
        self.links
            .values()
            .filter(|l| l.client == c && l.client_open)
            .map(|l| l.id)
            .next_back()
    }

    fn connect(&mut self, c: usize, h: usize) {
        if !self.hosts[h].alive() {
            return;
        }
        let id = self.next_link;
        self.next_link += 1;
        let hp = &mut self.hosts[h];
        let conn = hp.next_conn;
        hp.next_conn += 1;
        hp.links.insert(conn, id);
        let inc = hp.inc;
        let now = self.w.now_ms;
        self.links.insert(
            id,
            Link {
                id,
                client: c,
                host: h,
                inc,
                conn,
                client_open: true,
                host_open: true,
                to_host_last_ms: now,
                to_client_last_ms: now,
            },
        );
        self.note(
            Actor::Client(c),
            What::Connect {
                link: id,
                host: h,
                inc,
            },
        );
        if let Some(host) = self.hosts[h].host.as_mut() {
            host.handle_connect(conn, now);
        }
        self.drain(h);
        let slips = self.draws >= Draws::WithHandshakeSlips;
        let acts = self.clients[c].on_connected(&mut self.w, id, h, slips);
        self.client_actions(c, acts);
    }

    /// The client end closes: the client stops reading; the host notices
    /// after the lines already on the way.
    fn client_closes(&mut self, link: u64) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        if !l.client_open {
            return;
        }
        l.client_open = false;
        let at = l.to_host_last_ms + 1;
        let c = l.client;
        self.note(
            Actor::Client(c),
            What::LinkClosed {
                link,
                why: "client left",
            },
        );
        self.w.schedule(at, Event::HostSeesClose { link });
    }

    fn host_sees_close(&mut self, link: u64) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        if !l.host_open {
            return;
        }
        l.host_open = false;
        let (h, inc, conn) = (l.host, l.inc, l.conn);
        if self.hosts[h].inc == inc {
            self.hosts[h].links.remove(&conn);
            let now = self.w.now_ms;
            if let Some(host) = self.hosts[h].host.as_mut() {
                host.handle_disconnect(conn, now);
                self.drain(h);
            }
        }
    }

    /// Both ends close at once (a cut, or the host's death).
    fn sever(&mut self, link: u64, why: &'static str, tell_host: bool) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        let was_client_open = l.client_open;
        let was_host_open = l.host_open;
        l.client_open = false;
        l.host_open = false;
        let (c, h, inc, conn) = (l.client, l.host, l.inc, l.conn);
        if was_client_open || was_host_open {
            self.note(Actor::Net, What::LinkClosed { link, why });
        }
        if was_client_open {
            self.clients[c].on_closed();
            if self.durability == Durability::Ephemeral {
                let mut out = Vec::new();
                self.clients[c].forget_unsafe_replays(&mut out);
                self.client_actions(c, out);
            }
        }
        if tell_host && was_host_open && self.hosts[h].inc == inc {
            self.hosts[h].links.remove(&conn);
            let now = self.w.now_ms;
            if let Some(host) = self.hosts[h].host.as_mut() {
                host.handle_disconnect(conn, now);
                self.drain(h);
            }
        }
    }

    // ----- the network -------------------------------------------------------

    fn latency(&mut self) -> u64 {
        let base = 1;
        if !self.healing && self.w.chance(Decision::Net, self.mix.delay_permille) {
            self.count("delay");
            base + self.w.range(Decision::Net, 1, self.mix.delay_max_ms.max(1))
        } else {
            base
        }
    }

    fn maybe_cut(&mut self, link: u64) -> bool {
        if !self.healing && self.w.chance(Decision::Net, self.mix.cut_permille) {
            self.count("cut");
            self.sever(link, "cut", true);
            return true;
        }
        false
    }

    fn send_to_host(&mut self, link: u64, line: Vec<u8>) {
        let Some(l) = self.links.get(&link) else {
            return;
        };
        if !l.client_open {
            return;
        }
        let c = l.client;
        self.wire_bytes += line.len() as u64;
        self.note(
            Actor::Client(c),
            What::ClientSend {
                link,
                line: line_text(&line),
            },
        );
        if self.maybe_cut(link) {
            return;
        }
        if !self.healing && self.w.chance(Decision::Net, self.mix.drop_permille) {
            self.count("drop");
            self.note(
                Actor::Net,
                What::NetDrop {
                    link,
                    to_host: true,
                },
            );
            return;
        }
        let copies = if !self.healing && self.w.chance(Decision::Net, self.mix.dup_permille) {
            self.count("dup");
            self.note(Actor::Net, What::NetDup { link });
            2
        } else {
            1
        };
        for _ in 0..copies {
            let lat = self.latency();
            let now = self.w.now_ms;
            let reorder = !self.healing && self.w.chance(Decision::Net, self.mix.reorder_permille);
            let l = self.links.get_mut(&link).expect("link");
            let at = if reorder && l.to_host_last_ms > now + 1 {
                // Overtakes the previous undelivered request.
                now + 1
            } else {
                (now + lat).max(l.to_host_last_ms)
            };
            let overtook = at < l.to_host_last_ms;
            l.to_host_last_ms = l.to_host_last_ms.max(at);
            if overtook {
                self.count("reorder");
                self.note(Actor::Net, What::NetReorder { link });
            }
            self.w.schedule(
                at,
                Event::Deliver {
                    link,
                    to_host: true,
                    line: line.clone(),
                },
            );
        }
    }

    fn send_to_client(&mut self, link: u64, line: Vec<u8>) {
        if self.maybe_cut(link) {
            return;
        }
        if !self.healing && self.w.chance(Decision::Net, self.mix.drop_permille) {
            self.count("drop");
            self.note(
                Actor::Net,
                What::NetDrop {
                    link,
                    to_host: false,
                },
            );
            return;
        }
        let lat = self.latency();
        let now = self.w.now_ms;
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        let at = (now + lat).max(l.to_client_last_ms);
        l.to_client_last_ms = at;
        self.w.schedule(
            at,
            Event::Deliver {
                link,
                to_host: false,
                line,
            },
        );
    }

    fn deliver(&mut self, link: u64, to_host: bool, line: Vec<u8>) {
        let Some(l) = self.links.get(&link) else {
            return;
        };
        let (c, h, inc, conn) = (l.client, l.host, l.inc, l.conn);
        if to_host {
            if !l.host_open || self.hosts[h].inc != inc || !self.hosts[h].alive() {
                return;
            }
            self.note(
                Actor::Host(h),
                What::HostRecv {
                    inc,
                    link,
                    line: line_text(&line),
                },
            );
            let now = self.w.now_ms;
            // Sometimes in two reads, cut at a drawn byte (TCP keeps no
            // line boundaries): the host must join them.
            let cut = (self.draws >= Draws::WithFragments
                && line.len() > 1
                && self.w.chance(Decision::Net, FRAGMENT_PERMILLE))
            .then(|| self.w.range(Decision::Net, 1, line.len() as u64 - 1) as usize);
            if let Some(host) = self.hosts[h].host.as_mut() {
                match cut {
                    Some(k) => {
                        host.handle_bytes(conn, &line[..k], now);
                        host.handle_bytes(conn, &line[k..], now);
                    }
                    None => host.handle_bytes(conn, &line, now),
                }
            }
            self.drain(h);
        } else {
            if !l.client_open {
                return;
            }
            self.note(
                Actor::Client(c),
                What::ClientRecv {
                    link,
                    line: line_text(&line),
                },
            );
            self.refresh_ctx();
            let acts = self.clients[c].on_line(&mut self.w, &self.ctx, &line);
            self.client_actions(c, acts);
        }
    }

    // ----- hosts -------------------------------------------------------------

    fn host_timer(&mut self, h: usize, inc: u64) {
        let now = self.w.now_ms;
        let hp = &mut self.hosts[h];
        if hp.inc != inc || !hp.alive() {
            return;
        }
        match hp.timer_at_ms {
            Some(t) if t <= now => {
                hp.timer_at_ms = None;
                if let Some(host) = hp.host.as_mut() {
                    host.handle_timeout(now);
                }
                self.drain(h);
            }
            _ => {}
        }
    }

    /// Arms host `h`'s timer for its next deadline, if that is earlier
    /// than the one armed. Under `late-timer` (drawn per arming) it fires
    /// 1-10 ms after the deadline (11-[`LATE_TIMER_MAX_MS`] one time in
    /// eight), as a busy driver thread's would: the host is then told a
    /// time past the deadline it asked for.
    fn arm_timer(&mut self, h: usize) {
        let hp = &self.hosts[h];
        let Some(host) = hp.host.as_ref() else { return };
        let Some(t) = host.poll_timeout() else { return };
        if hp.timer_at_ms.is_some_and(|x| x <= t) {
            return;
        }
        let inc = hp.inc;
        self.hosts[h].timer_at_ms = Some(t);
        let late = if let Some(ms) = self.w.delay_ms(
            Decision::Placement,
            self.mix.late_timer_permille,
            LATE_TIMER_LONG_PERMILLE,
            (1, 10),
            (11, LATE_TIMER_MAX_MS),
        ) {
            self.count("late-timer");
            self.note(
                Actor::Host(h),
                What::TimerLate {
                    inc,
                    deadline_ms: t.saturating_sub(START_MS),
                    ms,
                },
            );
            ms
        } else {
            0
        };
        self.w.schedule(
            t + late,
            Event::HostTimer {
                host: h,
                incarnation: inc,
            },
        );
    }

    /// Carries out every output of host `h` in order; may crash it.
    fn drain(&mut self, h: usize) {
        if self.stuck {
            return;
        }
        for step in 0.. {
            if step == HOST_STEPS_MAX {
                let n = format!("host{h} made {HOST_STEPS_MAX} steps without waiting (a livelock)");
                self.note(Actor::Host(h), What::Note(n));
                self.stuck = true;
                return;
            }
            let Some(o) = self.hosts[h].host.as_mut().and_then(|x| x.poll_output()) else {
                // Outputs drained: the failures held back reach the host
                // now, one at a time, as `msp serve`'s deferred inputs do.
                let Some((session, reason)) = self.take_unreported_failure(h) else {
                    break;
                };
                let (now, inc) = (self.w.now_ms, self.hosts[h].inc);
                self.append_failed(h, inc, &session, reason, now);
                continue;
            };
            if !self.healing
                && !matches!(o, Output::CrashPoint(_))
                && self.w.chance(Decision::Crash, self.mix.crash_step_permille)
            {
                // A share of these steps stops the host gracefully
                // instead (after carrying out the step): the operator's
                // SIGTERM rather than a kill -9.
                if !self.hosts[h].stopping
                    && self.w.chance(Decision::Crash, self.mix.shutdown_permille)
                {
                    self.exec(h, o);
                    self.begin_shutdown(h);
                    continue;
                }
                self.count("crash");
                self.crash(h, None);
                return;
            }
            self.exec(h, o);
        }
        if self.hosts[h].stopping
            && self.hosts[h]
                .host
                .as_ref()
                .is_some_and(msp::core::Host::is_quiescent)
        {
            self.host_exit(h);
            return;
        }
        self.arm_timer(h);
    }

    /// The first storage failure of host `h` held back until its outputs
    /// drained, if any.
    fn take_unreported_failure(&mut self, h: usize) -> Option<(String, &'static str)> {
        let failures = &mut self.hosts[h].unreported_failures;
        (!failures.is_empty()).then(|| failures.remove(0))
    }

    /// Asks host `h` to stop ([`Host::shutdown`]): it unloads every
    /// session (`session/closed`, `hostShutdown`) and exits once it is
    /// quiescent ([`Sim::host_exit`]), or is killed after
    /// [`SHUTDOWN_GRACE_MS`].
    fn begin_shutdown(&mut self, h: usize) {
        let now = self.w.now_ms;
        let inc = self.hosts[h].inc;
        let Some(host) = self.hosts[h].host.as_mut() else {
            return;
        };
        host.shutdown(now);
        self.hosts[h].stopping = true;
        self.count("shutdown");
        self.note(Actor::Host(h), What::HostShutdown { inc });
        self.w.schedule(
            now + SHUTDOWN_GRACE_MS,
            Event::StopDeadline {
                host: h,
                incarnation: inc,
            },
        );
    }

    /// Host `h` finished its shutdown: the process exits. Its links close
    /// (what was still on the wire towards a client is lost with them, as
    /// in a crash), any lease it still held is freed, and it restarts
    /// after a delay as after a crash.
    fn host_exit(&mut self, h: usize) {
        let inc = self.hosts[h].inc;
        self.note(Actor::Host(h), What::HostExit { inc });
        self.end_process(h, "host exited");
    }

    /// A crash decided at a step or crash point of host `h`: a process
    /// crash (kill -9: its written bytes survive in the page cache) or,
    /// with the mix's `power` share, a machine crash (power loss: every
    /// host on the disk dies and every unsynced byte is lost).
    fn crash(&mut self, h: usize, point: Option<&'static str>) {
        if self.w.chance(Decision::Crash, self.mix.power_permille) {
            self.count("power-loss");
            self.power_loss(Some(h), point);
        } else {
            self.crash_process(h, point);
        }
    }

    /// Kills one host process; what it wrote stays on the disk.
    fn crash_process(&mut self, h: usize, point: Option<&'static str>) {
        let inc = self.hosts[h].inc;
        self.note(Actor::Host(h), What::HostCrash { inc, point });
        self.end_process(h, "host died");
    }

    /// The end of host `h`'s process, however it came (a crash or an
    /// exit): its links close with `why`, the leases it held are freed,
    /// and it restarts after a delay.
    fn end_process(&mut self, h: usize, why: &'static str) {
        let inc = self.hosts[h].inc;
        let links = self.hosts[h].kill();
        for l in links {
            self.sever(l, why, false);
        }
        for session in self.disk.free_leases(h) {
            self.note(Actor::Host(h), What::LeaseRelease { inc, session });
        }
        self.hosts[h].restart_pending = true;
        let at = self.w.now_ms + self.w.range(Decision::Placement, 50, 1_500);
        self.w.schedule(at, Event::Restart(h));
    }

    /// The machine loses power: every live host dies (the one whose step
    /// decided it first, at `point`), every file keeps only its synced
    /// bytes plus, with the `tear` fault, a prefix of its last write.
    fn power_loss(&mut self, first: Option<usize>, point: Option<&'static str>) {
        self.note(Actor::World, What::PowerLoss);
        let order: Vec<usize> = first
            .into_iter()
            .chain((0..self.hosts.len()).filter(|x| Some(*x) != first))
            .collect();
        for h in order {
            if self.hosts[h].alive() {
                let p = if Some(h) == first { point } else { None };
                self.crash_process(h, p);
            }
        }
        if self.durability != Durability::Durable {
            return;
        }
        // Renames whose directory was not synced may be lost.
        let renamed: Vec<String> = self.disk.renamed_from.keys().cloned().collect();
        for session in renamed {
            let old = self.disk.renamed_from.remove(&session).expect("listed");
            if self.w.chance(Decision::Disk, 500) {
                self.disk.files.insert(session.clone(), old);
                self.note(Actor::Disk, What::CompactLost { session });
            }
        }
        let sessions: Vec<String> = self.disk.files.keys().cloned().collect();
        let tear = self.mix.tear_permille;
        let w = &mut self.w;
        let mut tears = 0;
        let changed = self.disk.crash_files(&sessions, |_, last_len| {
            if last_len > 1 && w.chance(Decision::Disk, tear) {
                tears += 1;
                // Option 0 keeps the most (all but the last byte).
                Some(last_len - 1 - w.range(Decision::Disk, 0, last_len as u64 - 2) as usize)
            } else {
                None
            }
        });
        for _ in 0..tears {
            self.count("tear");
        }
        for (session, kept_bytes, torn) in changed {
            self.note(
                Actor::Disk,
                What::CrashKeep {
                    session,
                    kept_bytes,
                    torn,
                },
            );
        }
    }

    fn exec(&mut self, h: usize, o: Output) {
        let now = self.w.now_ms;
        let inc = self.hosts[h].inc;
        // A log whose append failed, its host not told yet: `io::storage`
        // skips its writes and syncs (and compactions) until the host
        // drops it.
        let skipped = match &o {
            Output::Append { session, .. }
            | Output::Sync { session, .. }
            | Output::Compact { session, .. }
            | Output::Truncate { session, .. } => self.hosts[h].failed_unreported(session),
            _ => false,
        };
        if skipped {
            return;
        }
        match o {
            Output::Send { conn, line } => {
                let Some(&link) = self.hosts[h].links.get(&conn) else {
                    return;
                };
                self.wire_bytes += line.len() as u64;
                self.note(
                    Actor::Host(h),
                    What::HostSend {
                        inc,
                        link,
                        line: line_text(&line),
                    },
                );
                self.send_to_client(link, line);
            }
            Output::Close { conn } => {
                if let Some(&link) = self.hosts[h].links.get(&conn) {
                    self.sever(link, "host closed", false);
                    self.hosts[h].links.remove(&conn);
                }
            }
            Output::Open {
                session,
                mode,
                token,
            } => self.ask_io(
                h,
                Io::Open {
                    session,
                    mode,
                    token,
                },
            ),
            Output::Read {
                session,
                token,
                history,
            } => self.ask_io(
                h,
                Io::Read {
                    session,
                    token,
                    history,
                },
            ),
            Output::ReadHistory {
                session,
                token,
                from_bytes,
                to_bytes,
            } => self.ask_io(
                h,
                Io::History {
                    session,
                    token,
                    from_bytes,
                    to_bytes,
                },
            ),
            Output::Compact {
                session,
                snapshot,
                log_from_bytes,
                log_len_bytes,
                archive_len_bytes,
            } => self.compact(
                h,
                session,
                snapshot,
                (log_from_bytes, log_len_bytes),
                archive_len_bytes,
            ),
            Output::Truncate { session, len_bytes } => {
                self.note(
                    Actor::Host(h),
                    What::Truncate {
                        inc,
                        session: session.clone(),
                        len_bytes,
                    },
                );
                // The io layer truncates then fsyncs (`io::storage`): the
                // cut length is durable.
                let f = self.disk.files.entry(session).or_default();
                f.bytes.truncate(len_bytes as usize);
                f.durable_len = f.bytes.len();
                f.last_write_at = f.bytes.len();
            }
            Output::Append { session, bytes } => {
                if now < self.disk.full_until_ms {
                    // `msp serve` tells its host after the drain; the
                    // simulator tells it either way (draws version 13).
                    // The trace records the failure when the host hears
                    // of it: what it sent before, it sent not knowing,
                    // as a process that dies sends what it sent.
                    if self.draws >= Draws::WithDeferredFailures
                        && self
                            .w
                            .chance(Decision::Placement, DEFERRED_FAILURE_PERMILLE)
                    {
                        self.count("disk-full");
                        self.count("failure-deferred");
                        self.hosts[h]
                            .unreported_failures
                            .push((session, "disk full"));
                    } else {
                        self.count("disk-full");
                        self.append_failed(h, inc, &session, "disk full", now);
                    }
                    return;
                }
                let f = self.disk.files.entry(session.clone()).or_default();
                f.last_write_at = f.bytes.len();
                f.bytes.append(&bytes);
                self.note(
                    Actor::Host(h),
                    What::Append {
                        inc,
                        session,
                        bytes,
                    },
                );
            }
            Output::Sync {
                session,
                upto_bytes,
            } => {
                if !self.healing && self.w.chance(Decision::Disk, self.mix.disk_full_permille) {
                    self.disk.full_until_ms = now + self.w.range(Decision::Disk, 100, 2_000);
                }
                let epoch = self.disk.files.get(&session).map_or(0, |f| f.epoch);
                let at = now + self.sync_latency_ms();
                self.w.schedule(
                    at,
                    Event::SyncDone {
                        host: h,
                        incarnation: inc,
                        session,
                        upto_bytes,
                        epoch,
                    },
                );
            }
            Output::Release { session } => {
                if self.disk.leases.get(&session) == Some(&h) {
                    self.disk.leases.remove(&session);
                    self.note(Actor::Host(h), What::LeaseRelease { inc, session });
                }
            }
            Output::Effect {
                token,
                provider,
                key,
                action,
                mode,
            } => {
                let perform = mode == EffectMode::Perform;
                let action_text = action.clone();
                let (mutated, outcome) = match (provider.as_str(), perform) {
                    ("keyed", true) => {
                        let fresh = !self.disk.keyed.contains_key(&key);
                        if fresh {
                            self.disk.keyed.insert(key.clone(), action);
                        }
                        (fresh, 0)
                    }
                    ("keyed", false) => (
                        false,
                        if self.disk.keyed.contains_key(&key) {
                            0
                        } else {
                            1
                        },
                    ),
                    (_, true) => {
                        self.disk.unkeyed.push((key.clone(), action));
                        (true, 0)
                    }
                    (_, false) => (false, 2),
                };
                let lost = !self.healing
                    && self
                        .w
                        .chance(Decision::Effect, self.mix.effect_lost_permille);
                if lost {
                    self.count("effect-lost");
                }
                self.note(
                    Actor::Host(h),
                    What::Effect {
                        inc,
                        provider,
                        key: key.clone(),
                        action: action_text,
                        perform,
                        mutated,
                        lost,
                    },
                );
                if !lost {
                    let at = now + self.w.range(Decision::Effect, 1, 50);
                    self.w.schedule(
                        at,
                        Event::EffectDone {
                            host: h,
                            incarnation: inc,
                            token,
                            key,
                            outcome,
                        },
                    );
                }
            }
            Output::CrashPoint(p) => {
                let name = p.name();
                *self.cp_hits.entry(name).or_insert(0) += 1;
                self.note(Actor::Host(h), What::CrashPointHit { inc, point: name });
                if !self.healing
                    && self
                        .w
                        .chance(Decision::Crash, self.mix.crash_point_permille_at(name))
                {
                    *self.cp_crashes.entry(name).or_insert(0) += 1;
                    self.count("crash-point");
                    self.crash(h, Some(name));
                }
            }
        }
    }

    /// Whether host `h`'s open or read of `session`'s files fails now (the
    /// `read-fail` fault; never while the run heals); counted and traced.
    /// An open fails before it takes the lease, as the io layer's does
    /// when it cannot read the log (its lease guard is dropped).
    /// An open or read host `h` asked for: carried out now, or, under
    /// `slow-io` (drawn per request), 1-40 ms later (50-400 ms one time in
    /// eight), when the host's other
    /// inputs may have come in between (as on `msp serve`'s io threads).
    /// The files are read when it completes; a host that died meanwhile
    /// never hears of it.
    fn ask_io(&mut self, h: usize, io: Io) {
        // One in eight waits behind other readers of a busy disk.
        if let Some(ms) = self.w.delay_ms(
            Decision::Disk,
            self.mix.slow_io_permille,
            SLOW_IO_LONG_PERMILLE,
            (1, 40),
            (50, 400),
        ) {
            self.count("slow-io");
            let at = self.w.now_ms + ms;
            let incarnation = self.hosts[h].inc;
            let (session, what) = match &io {
                Io::Open { session, .. } => (session.clone(), "open"),
                Io::Read { session, .. } => (session.clone(), "read"),
                Io::History { session, .. } => (session.clone(), "archive read"),
            };
            self.note(
                Actor::Host(h),
                What::IoDelayed {
                    inc: incarnation,
                    session,
                    what,
                    ms,
                },
            );
            self.w.schedule(
                at,
                Event::IoDone {
                    host: h,
                    incarnation,
                    io,
                },
            );
        } else {
            self.do_io(h, io);
        }
    }

    /// A delayed open or read completes: carried out, and its host drained
    /// (unless it died since it asked).
    fn io_done(&mut self, h: usize, incarnation: u64, io: Io) {
        if self.hosts[h].inc != incarnation || !self.hosts[h].alive() {
            return;
        }
        self.do_io(h, io);
        self.drain(h);
    }

    /// Carries out an open or read and hands the host its result.
    fn do_io(&mut self, h: usize, io: Io) {
        let now = self.w.now_ms;
        match io {
            Io::Open {
                session,
                mode,
                token,
            } => {
                let result = if self.read_fails(h, &session) {
                    OpenResult::Failed(format!("reading session {session}: EIO (simulated)"))
                } else {
                    self.open(h, &session, mode)
                };
                if let Some(host) = self.hosts[h].host.as_mut() {
                    host.handle_opened(token, result, now);
                }
            }
            Io::Read {
                session,
                token,
                history,
            } => {
                let failed = self.read_fails(h, &session);
                let result = match self.disk.files.get(&session) {
                    _ if failed => {
                        ReadResult::Failed(format!("reading session {session}: EIO (simulated)"))
                    }
                    None => ReadResult::NotFound,
                    Some(f) => ReadResult::Found {
                        log: f.bytes.clone(),
                        history: match self.disk.archives.get(&session) {
                            Some(a) if history => a.bytes.clone(),
                            _ => Default::default(),
                        },
                        held_elsewhere: self.disk.leases.get(&session).is_some_and(|o| *o != h),
                    },
                };
                if let Some(host) = self.hosts[h].host.as_mut() {
                    host.handle_read(token, result, now);
                }
            }
            Io::History {
                session,
                token,
                from_bytes,
                to_bytes,
            } => {
                let archive = self.disk.archives.get(&session).map(|a| &a.bytes[..]);
                let result =
                    match archive.and_then(|a| a.get(from_bytes as usize..to_bytes as usize)) {
                        Some(b) => HistoryResult::Found(b.to_vec()),
                        None => HistoryResult::Failed(format!(
                            "the archive of {session} has no bytes {from_bytes}..{to_bytes}"
                        )),
                    };
                let found = matches!(result, HistoryResult::Found(_));
                let inc = self.hosts[h].inc;
                self.note(
                    Actor::Host(h),
                    What::ArchiveRead {
                        inc,
                        session: session.clone(),
                        from_bytes,
                        to_bytes,
                        found,
                    },
                );
                if let Some(host) = self.hosts[h].host.as_mut() {
                    host.handle_history(token, result, now);
                }
            }
        }
    }

    fn read_fails(&mut self, h: usize, session: &str) -> bool {
        if self.healing || !self.w.chance(Decision::Disk, self.mix.read_fail_permille) {
            return false;
        }
        self.count("read-fail");
        let inc = self.hosts[h].inc;
        self.note(
            Actor::Host(h),
            What::ReadFailed {
                inc,
                session: session.to_string(),
            },
        );
        true
    }

    /// A write the disk refused (full, or a compaction that cannot copy),
    /// counted as `disk-full` by the caller: traced, and reported to the
    /// host as a storage failure.
    fn append_failed(&mut self, h: usize, inc: u64, session: &str, reason: &str, now: u64) {
        self.note(
            Actor::Host(h),
            What::AppendFailed {
                inc,
                session: session.to_string(),
            },
        );
        if let Some(host) = self.hosts[h].host.as_mut() {
            host.handle_storage_failed(session, reason, now);
        }
    }

    /// Carries out a compaction step by step; each step may crash the host
    /// (see the module docs). The completion comes back as a sync of the
    /// new log.
    fn compact(
        &mut self,
        h: usize,
        session: String,
        snapshot: Vec<u8>,
        (from, to): (u64, u64),
        archive_len: u64,
    ) {
        let now = self.w.now_ms;
        let inc = self.hosts[h].inc;
        let log = self
            .disk
            .files
            .get(&session)
            .map(|f| f.bytes.clone())
            .unwrap_or_default();
        let archive_ok = self
            .disk
            .archives
            .get(&session)
            .map_or(0, |a| a.bytes.len() as u64)
            >= archive_len;
        // The io layer archives only whole valid frames (a rotted one
        // fails the compaction and stays in the log: `msp::log::WholeFrames`).
        let bytes = log
            .get(from as usize..to as usize)
            .filter(|b| msp::log::WholeFrames::check(b).is_ok())
            .map(<[u8]>::to_vec);
        let (Some(bytes), true, false) = (bytes, archive_ok, now < self.disk.full_until_ms) else {
            self.count("disk-full");
            self.append_failed(h, inc, &session, "compaction failed", now);
            return;
        };
        let a = self.disk.archives.entry(session.clone()).or_default();
        a.bytes.truncate(archive_len as usize);
        a.bytes.append(&bytes);
        a.durable_len = a.bytes.len();
        a.last_write_at = a.bytes.len();
        self.note(
            Actor::Host(h),
            What::ArchiveAppend {
                inc,
                session: session.clone(),
                at_bytes: archive_len,
                bytes,
            },
        );
        if self.compact_crash_point(h, CompactStep::Archived)
            || self.compact_crash_point(h, CompactStep::Written)
        {
            return;
        }
        let len = snapshot.len();
        let old = self.disk.files.remove(&session).unwrap_or_default();
        let bytes_before = old.bytes.len() as u64;
        self.disk.files.insert(
            session.clone(),
            crate::disk::File {
                bytes: snapshot.clone().into(),
                durable_len: len,
                last_write_at: len,
                epoch: old.epoch,
            },
        );
        let epoch = old.epoch;
        self.disk.renamed_from.insert(session.clone(), old);
        self.note(
            Actor::Host(h),
            What::Compact {
                inc,
                session: session.clone(),
                bytes_before,
                new_bytes: snapshot,
            },
        );
        if self.compact_crash_point(h, CompactStep::Renamed) {
            return;
        }
        self.disk.renamed_from.remove(&session);
        let at = now + self.sync_latency_ms();
        self.w.schedule(
            at,
            Event::SyncDone {
                host: h,
                incarnation: inc,
                session,
                upto_bytes: len as u64,
                epoch,
            },
        );
    }

    /// How long a sync takes: 2-15 ms, or 50-500 ms when it stalls (the
    /// mix's `stall`; never while healing). A stall draws nothing when the
    /// mix has none, so a run recorded before stalls replays as it ran.
    fn sync_latency_ms(&mut self) -> u64 {
        if !self.healing && self.w.chance(Decision::Disk, self.mix.stall_permille) {
            self.count("stall");
            self.w.range(Decision::Disk, 50, 500)
        } else {
            self.w.range(Decision::Disk, 2, 15)
        }
    }

    /// A compaction step as a crash point: counted, traced, maybe crashed
    /// at (true: the host died).
    fn compact_crash_point(&mut self, h: usize, step: CompactStep) -> bool {
        let name = step.name();
        let inc = self.hosts[h].inc;
        *self.cp_hits.entry(name).or_insert(0) += 1;
        self.note(Actor::Host(h), What::CrashPointHit { inc, point: name });
        if !self.healing
            && self
                .w
                .chance(Decision::Crash, self.mix.crash_point_permille)
        {
            *self.cp_crashes.entry(name).or_insert(0) += 1;
            self.count("crash-point");
            self.crash(h, Some(name));
            return true;
        }
        false
    }

    fn open(&mut self, h: usize, session: &str, mode: OpenMode) -> OpenResult {
        let inc = self.hosts[h].inc;
        let exists = self.disk.files.contains_key(session);
        if !exists && mode == OpenMode::Existing {
            return OpenResult::NotFound;
        }
        if let Some(&holder) = self.disk.leases.get(session) {
            if holder != h {
                self.note(
                    Actor::Host(h),
                    What::LeaseDenied {
                        inc,
                        session: session.to_string(),
                    },
                );
                let log = self
                    .disk
                    .files
                    .get(session)
                    .map(|f| f.bytes.clone())
                    .unwrap_or_default();
                return OpenResult::InUse { log };
            }
        }
        self.disk.leases.insert(session.to_string(), h);
        // Taking the lease syncs the session directory: a compaction's
        // rename is durable from now on.
        self.disk.renamed_from.remove(session);
        self.note(
            Actor::Host(h),
            What::LeaseGrant {
                inc,
                session: session.to_string(),
            },
        );
        // Opening does not fsync: what a loader reads may include bytes a
        // dead process wrote and nobody synced (still in the page cache).
        // A new log's directory entry is durable at once: the io layer
        // fsyncs the directory when it creates one (`io::storage`).
        let f = self.disk.files.entry(session.to_string()).or_default();
        f.epoch += 1;
        OpenResult::Opened {
            log: f.bytes.clone(),
        }
    }

    fn sync_done(&mut self, h: usize, inc: u64, session: String, upto: u64, epoch: u64) {
        let now = self.w.now_ms;
        if self.hosts[h].inc != inc || !self.hosts[h].alive() {
            return;
        }
        let current = self
            .disk
            .files
            .get(&session)
            .is_some_and(|f| f.epoch == epoch);
        if !current {
            return;
        }
        if !self.healing && self.w.chance(Decision::Disk, self.mix.fsync_fail_permille) {
            self.count("fsync-fail");
            let f = self.disk.files.get_mut(&session).expect("file");
            f.bytes.truncate(f.durable_len);
            f.last_write_at = f.durable_len;
            let kept_bytes = f.durable_len as u64;
            self.note(
                Actor::Host(h),
                What::SyncFailed {
                    inc,
                    session: session.clone(),
                    kept_bytes,
                },
            );
            if let Some(host) = self.hosts[h].host.as_mut() {
                host.handle_storage_failed(&session, "fsync failed", now);
            }
            self.drain(h);
            return;
        }
        let f = self.disk.files.get_mut(&session).expect("file");
        f.durable_len = f.durable_len.max((upto as usize).min(f.bytes.len()));
        self.note(
            Actor::Host(h),
            What::Synced {
                inc,
                session: session.clone(),
                upto_bytes: upto,
            },
        );
        if let Some(host) = self.hosts[h].host.as_mut() {
            host.handle_synced(&session, upto, now);
        }
        self.drain(h);
        self.maybe_rot(&session);
    }

    /// The `bitrot` scenario: once per run, a byte inside a synced record
    /// that other records follow flips (the storage damaged acknowledged
    /// data; only the CRC can tell).
    fn maybe_rot(&mut self, session: &str) {
        if self.rotted || self.healing || !self.w.chance(Decision::Disk, self.mix.rot_permille) {
            return;
        }
        let Some(f) = self.disk.files.get_mut(session) else {
            return;
        };
        let mut frames = Vec::new();
        let mut at = 0;
        while let crate::model::logfile::Check::Valid { end, .. } =
            crate::model::logfile::check(&f.bytes[..f.durable_len], at)
        {
            frames.push((at, end));
            at = end;
        }
        // A compacted log's snapshot (head and parts) is not damaged: it is a summary the
        // next compaction rewrites from memory, with no place in the logical
        // log the oracles judge (`Trace::logical`), so its rot would be
        // healed by a compaction the model does not see. Rot of the records
        // after it, and of a log never compacted, is.
        use msp::core::snapshot::{SNAPSHOT_PART_TYPE, SNAPSHOT_TYPE};
        let first = frames
            .iter()
            .take_while(|(s, _)| {
                msp::log::decode_frame(&f.bytes, *s)
                    .is_ok_and(|fr| matches!(fr.record_type, SNAPSHOT_TYPE | SNAPSHOT_PART_TYPE))
            })
            .count();
        if frames.len() < first + 2 {
            return;
        }
        let k = first
            + self
                .w
                .decide(Decision::Disk, (frames.len() - first) as u64 - 1) as usize;
        let (start, end) = frames[k];
        let offset = self
            .w
            .range(Decision::Disk, start as u64 + 16, end as u64 - 1);
        f.bytes.make_mut()[offset as usize] ^= 0x20;
        self.rotted = true;
        self.count("rot");
        self.note(
            Actor::Disk,
            What::BitRot {
                session: session.to_string(),
                offset,
            },
        );
    }
}

/// A wire line as trace text: what `String::from_utf8_lossy` gives, by the
/// fast check first (`str::from_utf8` reads ASCII a word at a time; the
/// lossy decoder went byte by byte, over every line of every run: issue
/// 10). Invalid UTF-8 still takes the lossy path, so the text, and every
/// trace hash, is the same.
fn line_text(line: &[u8]) -> String {
    match std::str::from_utf8(line) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(line).into_owned(),
    }
}

/// Panics inside a run: caught by [`run_with`] and reported as the
/// `no-panic` property, with the message and place the panic hook saw.
mod panics {
    use std::cell::{Cell, RefCell};
    use std::sync::Once;

    thread_local! {
        /// This thread is inside a run: its panics are captured, not printed.
        static CAPTURING: Cell<bool> = const { Cell::new(false) };
        /// What the hook saw of this thread's last captured panic.
        static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
    }

    static HOOK: Once = Once::new();

    /// Captures this thread's panics until dropped. The hook it installs
    /// once chains to the one before it for every other panic (a failing
    /// test's assertion still prints).
    pub struct Capture;

    impl Capture {
        pub fn begin() -> Capture {
            HOOK.call_once(|| {
                let before = std::panic::take_hook();
                std::panic::set_hook(Box::new(move |info| {
                    if CAPTURING.with(Cell::get) {
                        LAST.with(|l| *l.borrow_mut() = Some(info.to_string()));
                    } else {
                        before(info);
                    }
                }));
            });
            CAPTURING.with(|c| c.set(true));
            LAST.with(|l| *l.borrow_mut() = None);
            Capture
        }
    }

    impl Drop for Capture {
        fn drop(&mut self) {
            CAPTURING.with(|c| c.set(false));
        }
    }

    /// The panic's text: what the hook saw (message and place), else the
    /// payload's message.
    pub fn text(payload: &Box<dyn std::any::Any + Send>) -> String {
        if let Some(t) = LAST.with(|l| l.borrow_mut().take()) {
            return t.replace('\n', " ");
        }
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string())
    }
}
