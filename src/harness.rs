//! A deterministic in-process driver for the core: a memory disk (volatile
//! until synced; a crash keeps only synced bytes), in-memory leases and
//! effect providers, and a manual clock. Every IO completes at once and in
//! order. The conformance runner and the core's unit tests drive hosts
//! through it; the simulator (`msp-sim`) has its own fault-injecting world.
//!
//! Compaction ([`Output::Compact`]) runs its steps in order on the memory
//! disk: the archive is written durable, the new log replaces the old one
//! (the old one is kept aside until the directory "fsync"), then the sync
//! completes. [`Harness::compact_crash`] kills the host after a chosen
//! step, as a process crash or a power loss; a power loss after the rename
//! brings the old log back when [`Harness::lose_renames`] is set (the
//! directory was not synced). Opening a session makes a pending rename
//! durable, as `io::storage` does by syncing the directory.

use std::collections::{BTreeMap, VecDeque};

use serde_json::Value;

use crate::core::agent::AgentFactory;
use crate::core::bugs::BugSet;
use crate::core::{
    CompactStep, ConnId, Durability, EffectMode, EffectOutcome, HistoryResult, Host, HostConfig,
    OpenMode, OpenResult, Output, ReadResult,
};

/// One session file on the memory disk.
#[derive(Debug, Clone, Default)]
pub struct MemFile {
    /// Bytes that survive a crash.
    pub durable: Vec<u8>,
    /// Bytes appended since the last sync (lost on crash).
    pub volatile: Vec<u8>,
}

impl MemFile {
    /// The file as the host sees it.
    pub fn contents(&self) -> Vec<u8> {
        let mut v = self.durable.clone();
        v.extend_from_slice(&self.volatile);
        v
    }
}

/// The memory disk shared by host incarnations.
#[derive(Debug, Clone, Default)]
pub struct MemDisk {
    /// Session logs by session id.
    pub files: BTreeMap<String, MemFile>,
    /// Sessions whose lease the current incarnation holds.
    pub leases: BTreeMap<String, u64>,
    /// Keys committed at the keyed provider.
    pub keyed: BTreeMap<String, String>,
    /// Mutations at the unkeyed provider (action, key).
    pub unkeyed: Vec<(String, String)>,
    /// Session archives (`history.log`) by session id.
    pub archives: BTreeMap<String, MemFile>,
    /// Logs replaced by a compaction whose rename is not durable yet (the
    /// old file, which a power loss may bring back).
    pub renamed_from: BTreeMap<String, MemFile>,
}

/// A host driven in process.
pub struct Harness {
    cfg: HostConfig,
    agent: AgentFactory,
    bugs: BugSet,
    host: Host,
    incarnation: u64,
    /// The clock.
    pub now_ms: u64,
    /// The disk.
    pub disk: MemDisk,
    sent: BTreeMap<ConnId, VecDeque<Vec<u8>>>,
    open_conns: Vec<ConnId>,
    next_conn: ConnId,
    /// Sessions held by a foreign process (for `sessionInUse` tests).
    pub foreign_leases: Vec<String>,
    /// When set, syncs wait in `held_syncs` until [`Harness::release_syncs`]
    /// (to observe what happens before an intake is durable).
    pub hold_syncs: bool,
    held_syncs: VecDeque<(String, u64)>,
    /// Sync requests seen (a group-commit measure).
    pub sync_count: u64,
    /// When set, the next sync fails (an fsync error) instead of completing.
    pub fail_next_sync: bool,
    /// When set, opens wait in `held_opens` until [`Harness::release_opens`].
    pub hold_opens: bool,
    held_opens: VecDeque<Output>,
    /// When set, reads of a session's files without its lease (`Read`,
    /// `ReadHistory`) wait in `held_reads` until
    /// [`Harness::release_reads`], as they do on the io threads of
    /// `msp serve` while other inputs come in.
    pub hold_reads: bool,
    held_reads: VecDeque<Output>,
    /// Kill the host right after this step of the next compaction: `true`
    /// for a power loss, `false` for a process crash.
    pub compact_crash: Option<(CompactStep, bool)>,
    /// A power loss loses renames whose directory was not synced.
    pub lose_renames: bool,
    /// Compactions that completed.
    pub compactions_count: u64,
    /// When set, the next performed effect takes effect at its provider and
    /// then the host process dies before it learns the outcome (a lost
    /// provider response); the flag clears.
    pub crash_after_next_effect: bool,
    /// Effect keys whose outcome a [`Harness::crash_after_next_effect`]
    /// kept from the host, in order.
    pub lost_effects: Vec<String>,
    /// When set, the next performed effect takes effect at its provider
    /// and its response never reaches the host (which lives on and times
    /// the call out); the flag clears.
    pub lose_next_effect_response: bool,
    /// When set, the next performed effect takes effect at its provider
    /// and its response waits in [`Harness::held_effect_responses`] until
    /// [`Harness::release_effect_responses`]; the flag clears.
    pub hold_next_effect_response: bool,
    /// Effect responses held back: (token, outcome).
    pub held_effect_responses: Vec<(u64, EffectOutcome)>,
}

impl Harness {
    /// A harness running `cfg` with the scripted agent.
    pub fn new(cfg: HostConfig, now_ms: u64) -> Harness {
        Harness::with_agent(
            cfg,
            now_ms,
            crate::core::agent::scripted_factory(),
            BugSet::default(),
        )
    }

    /// A harness with a given agent and planted bugs.
    pub fn with_agent(cfg: HostConfig, now_ms: u64, agent: AgentFactory, bugs: BugSet) -> Harness {
        let host = Host::with_agent(cfg.clone(), now_ms, agent.clone(), bugs);
        Harness {
            cfg,
            agent,
            bugs,
            host,
            incarnation: 1,
            now_ms,
            disk: MemDisk::default(),
            sent: BTreeMap::new(),
            open_conns: Vec::new(),
            next_conn: 1,
            foreign_leases: Vec::new(),
            hold_syncs: false,
            held_syncs: VecDeque::new(),
            sync_count: 0,
            fail_next_sync: false,
            hold_opens: false,
            held_opens: VecDeque::new(),
            hold_reads: false,
            held_reads: VecDeque::new(),
            compact_crash: None,
            lose_renames: false,
            compactions_count: 0,
            crash_after_next_effect: false,
            lost_effects: Vec::new(),
            lose_next_effect_response: false,
            hold_next_effect_response: false,
            held_effect_responses: Vec::new(),
        }
    }

    /// Carries out every held open, in order.
    pub fn release_opens(&mut self) {
        while let Some(o) = self.held_opens.pop_front() {
            self.execute(o);
            self.run();
        }
    }

    /// Carries out every held read, in order.
    pub fn release_reads(&mut self) {
        while let Some(o) = self.held_reads.pop_front() {
            self.execute(o);
            self.run();
        }
    }

    /// Completes every held sync, in order.
    pub fn release_syncs(&mut self) {
        while let Some((session, upto)) = self.held_syncs.pop_front() {
            self.complete_sync(&session, upto);
            self.run();
        }
    }

    /// Fails every held sync: like a failed fsync, the bytes stay as
    /// written and none of them is acknowledged.
    pub fn fail_held_syncs(&mut self) {
        let sessions: std::collections::BTreeSet<String> =
            self.held_syncs.drain(..).map(|(s, _)| s).collect();
        for session in sessions {
            self.host
                .handle_storage_failed(&session, "fsync failed", self.now_ms);
            self.run();
        }
    }

    fn complete_sync(&mut self, session: &str, upto_bytes: u64) {
        let f = self.disk.files.entry(session.to_string()).or_default();
        let v = std::mem::take(&mut f.volatile);
        f.durable.extend(v);
        self.host.handle_synced(session, upto_bytes, self.now_ms);
    }

    /// Kills the host keeping the first `keep_bytes` of each file's unsynced
    /// tail: a torn write.
    pub fn crash_torn(&mut self, keep_bytes: usize) {
        for f in self.disk.files.values_mut() {
            let keep: Vec<u8> = f.volatile.iter().copied().take(keep_bytes).collect();
            f.durable.extend(keep);
            f.volatile.clear();
        }
        self.held_syncs.clear();
        self.crash();
    }

    /// The current host incarnation (1 for the first; every crash or
    /// restart adds one): a driver holding connections sees from it that
    /// they died.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The host (read-only).
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// Opens a connection.
    pub fn connect(&mut self) -> ConnId {
        let c = self.next_conn;
        self.next_conn += 1;
        self.open_conns.push(c);
        self.host.handle_connect(c, self.now_ms);
        self.run();
        c
    }

    /// Closes a connection.
    pub fn disconnect(&mut self, conn: ConnId) {
        self.open_conns.retain(|c| *c != conn);
        self.host.handle_disconnect(conn, self.now_ms);
        self.run();
    }

    /// Sends raw bytes (a line should end with `\n`).
    pub fn send_raw(&mut self, conn: ConnId, bytes: &[u8]) {
        self.host.handle_bytes(conn, bytes, self.now_ms);
        self.run();
    }

    /// Sends one JSON value as a line.
    pub fn send(&mut self, conn: ConnId, v: &Value) {
        let mut line = serde_json::to_vec(v).expect("serialise");
        line.push(b'\n');
        self.send_raw(conn, &line);
    }

    /// Frames received on `conn` since the last call, parsed.
    pub fn take(&mut self, conn: ConnId) -> Vec<Value> {
        self.take_raw(conn)
            .into_iter()
            .map(|l| serde_json::from_slice(&l).expect("host sends JSON"))
            .collect()
    }

    /// Raw lines received on `conn` since the last call.
    pub fn take_raw(&mut self, conn: ConnId) -> Vec<Vec<u8>> {
        self.sent
            .get_mut(&conn)
            .map(|q| q.drain(..).collect())
            .unwrap_or_default()
    }

    /// Advances the clock by `ms`, firing timers in order.
    pub fn advance(&mut self, ms: u64) {
        let end = self.now_ms + ms;
        for _ in 0..10_000_000 {
            match self.host.poll_timeout() {
                Some(t) if t <= end => {
                    self.now_ms = self.now_ms.max(t);
                    self.host.handle_timeout(self.now_ms);
                    self.run();
                }
                _ => break,
            }
        }
        self.now_ms = end;
        self.host.handle_timeout(self.now_ms);
        self.run();
    }

    /// Advances the clock by `ms` and only then wakes the host once, as a
    /// driver thread that was busy past its deadlines does: every deadline
    /// in between is already past when the host hears the time.
    pub fn oversleep(&mut self, ms: u64) {
        self.now_ms += ms;
        self.host.handle_timeout(self.now_ms);
        self.run();
    }

    /// Kills the host: unsynced bytes are lost, leases freed, connections
    /// dropped.
    pub fn crash(&mut self) {
        if self.lose_renames {
            let renamed = std::mem::take(&mut self.disk.renamed_from);
            for (s, old) in renamed {
                self.disk.files.insert(s, old);
            }
        }
        for f in self.disk.files.values_mut() {
            f.volatile.clear();
        }
        self.held_syncs.clear();
        self.held_reads.clear();
        self.disk.leases.clear();
        self.open_conns.clear();
        self.sent.clear();
        self.incarnation += 1;
        // Until restart, a dead host: a fresh core that nobody talks to.
        // Each incarnation gets its own id seed, as a process seeded from
        // entropy would: the same seed at the same clock millisecond would
        // mint the previous incarnation's item and record ids again.
        let mut cfg = self.cfg.clone();
        cfg.seed = self.cfg.seed ^ self.incarnation.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.host = Host::with_agent(cfg, self.now_ms, self.agent.clone(), self.bugs);
        if self.cfg.durability == Durability::Ephemeral {
            self.disk.files.clear();
            self.disk.archives.clear();
        }
    }

    /// Kills the host process only (kill -9): what it wrote stays in the
    /// page cache, readable by the next incarnation but still not durable
    /// (a later [`Harness::crash`] would erase it).
    pub fn crash_process(&mut self) {
        let volatile: Vec<(String, Vec<u8>)> = self
            .disk
            .files
            .iter()
            .map(|(s, f)| (s.clone(), f.volatile.clone()))
            .collect();
        // A process crash loses no rename: the kernel keeps it.
        let lose_renames = std::mem::replace(&mut self.lose_renames, false);
        self.crash();
        self.lose_renames = lose_renames;
        for (s, v) in volatile {
            if let Some(f) = self.disk.files.get_mut(&s) {
                f.volatile = v;
            }
        }
    }

    /// Starts a new host incarnation on the same disk.
    pub fn restart(&mut self) {
        self.crash();
    }

    /// Delivers the held effect responses (to whatever host runs now).
    pub fn release_effect_responses(&mut self) {
        for (token, outcome) in std::mem::take(&mut self.held_effect_responses) {
            let now = self.now_ms;
            self.host.handle_effect_done(token, outcome, now);
            self.run();
        }
    }

    /// Whether the host may exit ([`Host::is_quiescent`]).
    pub fn is_quiescent(&self) -> bool {
        self.host.is_quiescent()
    }

    /// Whether connection `conn` is still open (the host has not closed it).
    pub fn is_open(&self, conn: ConnId) -> bool {
        self.open_conns.contains(&conn)
    }

    /// Orderly shutdown (end of stdin): unload everything.
    pub fn shutdown(&mut self) {
        self.host.shutdown(self.now_ms);
        self.run();
    }

    /// Carries out outputs until there are none.
    pub fn run(&mut self) {
        let mut guard = 0u64;
        while let Some(o) = self.host.poll_output() {
            guard += 1;
            assert!(guard < 50_000_000, "host output does not quiesce");
            self.execute(o);
        }
    }

    fn execute(&mut self, o: Output) {
        let now = self.now_ms;
        match o {
            Output::Send { conn, line } => {
                if self.open_conns.contains(&conn) {
                    self.sent.entry(conn).or_default().push_back(line);
                }
            }
            Output::Close { conn } => {
                self.open_conns.retain(|c| *c != conn);
            }
            o @ Output::Open { .. } if self.hold_opens => self.held_opens.push_back(o),
            o @ (Output::Read { .. } | Output::ReadHistory { .. }) if self.hold_reads => {
                self.held_reads.push_back(o)
            }
            Output::Open {
                session,
                mode,
                token,
            } => {
                let result = if self.foreign_leases.contains(&session) {
                    let log = self
                        .disk
                        .files
                        .get(&session)
                        .map(MemFile::contents)
                        .unwrap_or_default();
                    OpenResult::InUse { log: log.into() }
                } else {
                    match (self.disk.files.get(&session), mode) {
                        (None, OpenMode::Existing) => OpenResult::NotFound,
                        (f, _) => {
                            // The open syncs the directory: a compaction's
                            // rename is durable from now on.
                            self.disk.renamed_from.remove(&session);
                            let log = f.map(MemFile::contents).unwrap_or_default();
                            self.disk.files.entry(session.clone()).or_default();
                            self.disk.leases.insert(session, self.incarnation);
                            OpenResult::Opened { log: log.into() }
                        }
                    }
                };
                self.host.handle_opened(token, result, now);
            }
            Output::Read {
                session,
                token,
                history,
            } => {
                let result = match self.disk.files.get(&session) {
                    None => ReadResult::NotFound,
                    Some(f) => ReadResult::Found {
                        log: f.contents().into(),
                        history: match self.disk.archives.get(&session) {
                            Some(a) if history => a.contents().into(),
                            _ => Default::default(),
                        },
                        held_elsewhere: self.foreign_leases.contains(&session),
                    },
                };
                self.host.handle_read(token, result, now);
            }
            Output::ReadHistory {
                session,
                token,
                from_bytes,
                to_bytes,
            } => {
                let archive = self
                    .disk
                    .archives
                    .get(&session)
                    .map(MemFile::contents)
                    .unwrap_or_default();
                let result = match archive.get(from_bytes as usize..to_bytes as usize) {
                    Some(b) => HistoryResult::Found(b.to_vec()),
                    None => HistoryResult::Failed(format!(
                        "the archive of {session} has {} bytes, {to_bytes} asked",
                        archive.len()
                    )),
                };
                self.host.handle_history(token, result, now);
            }
            Output::Compact {
                session,
                snapshot,
                log_from_bytes,
                log_len_bytes,
                archive_len_bytes,
            } => self.compact(
                &session,
                snapshot,
                log_from_bytes..log_len_bytes,
                archive_len_bytes,
            ),
            Output::Truncate { session, len_bytes } => {
                let f = self.disk.files.entry(session).or_default();
                let mut all = f.contents();
                all.truncate(len_bytes as usize);
                f.durable = all;
                f.volatile.clear();
            }
            Output::Append { session, bytes } => {
                self.disk
                    .files
                    .entry(session)
                    .or_default()
                    .volatile
                    .extend(bytes);
            }
            Output::Sync {
                session,
                upto_bytes,
            } => {
                self.sync_count += 1;
                if std::mem::take(&mut self.fail_next_sync) {
                    // The page cache's fate is unknown after a failed fsync:
                    // keep the bytes as written, acknowledge none of them.
                    self.host
                        .handle_storage_failed(&session, "fsync failed", now);
                } else if self.hold_syncs {
                    self.held_syncs.push_back((session, upto_bytes));
                } else {
                    self.complete_sync(&session, upto_bytes);
                }
            }
            Output::Release { session } => {
                self.disk.leases.remove(&session);
            }
            Output::Effect {
                token,
                provider,
                key,
                action,
                mode,
            } => {
                let key_for_lost = key.clone();
                let outcome = match (provider.as_str(), mode) {
                    ("keyed", EffectMode::Query) => {
                        if self.disk.keyed.contains_key(&key) {
                            EffectOutcome::Committed
                        } else {
                            EffectOutcome::NotStarted
                        }
                    }
                    ("keyed", EffectMode::Perform) => {
                        self.disk.keyed.entry(key).or_insert(action);
                        EffectOutcome::Committed
                    }
                    (_, EffectMode::Perform) => {
                        self.disk.unkeyed.push((action, key));
                        EffectOutcome::Committed
                    }
                    (_, EffectMode::Query) => EffectOutcome::Unknown,
                };
                if mode == EffectMode::Perform && self.crash_after_next_effect {
                    self.crash_after_next_effect = false;
                    self.lost_effects.push(key_for_lost);
                    self.crash_process();
                    return;
                }
                if mode == EffectMode::Perform && self.lose_next_effect_response {
                    self.lose_next_effect_response = false;
                    return;
                }
                if mode == EffectMode::Perform && self.hold_next_effect_response {
                    self.hold_next_effect_response = false;
                    self.held_effect_responses.push((token, outcome));
                    return;
                }
                self.host.handle_effect_done(token, outcome, now);
            }
            Output::CrashPoint(_) => {}
        }
    }
}

impl Harness {
    /// Carries out a compaction step by step (see the module docs).
    fn compact(
        &mut self,
        session: &str,
        snapshot: Vec<u8>,
        log_range: std::ops::Range<u64>,
        archive_len_bytes: u64,
    ) {
        let now = self.now_ms;
        let log = self
            .disk
            .files
            .get(session)
            .map(MemFile::contents)
            .unwrap_or_default();
        let mut archive = self
            .disk
            .archives
            .get(session)
            .map(MemFile::contents)
            .unwrap_or_default();
        let range = log_range.start as usize..log_range.end as usize;
        let (Some(bytes), true) = (log.get(range), archive.len() as u64 >= archive_len_bytes)
        else {
            self.host
                .handle_storage_failed(session, "compaction: bad ranges", now);
            return;
        };
        if let Err(e) = crate::log::WholeFrames::check(bytes) {
            let why = format!(
                "compaction: damaged frame at {}: {}",
                log_range.start + e.offset,
                e.reason
            );
            self.host.handle_storage_failed(session, &why, now);
            return;
        }
        archive.truncate(archive_len_bytes as usize);
        archive.extend_from_slice(bytes);
        self.disk.archives.insert(
            session.to_string(),
            MemFile {
                durable: archive,
                volatile: Vec::new(),
            },
        );
        if self.crash_after(CompactStep::Archived) {
            return;
        }
        // The new log is written and synced under its temporary name:
        // nobody sees it yet.
        if self.crash_after(CompactStep::Written) {
            return;
        }
        let len = snapshot.len() as u64;
        let old = self.disk.files.insert(
            session.to_string(),
            MemFile {
                durable: snapshot,
                volatile: Vec::new(),
            },
        );
        self.disk
            .renamed_from
            .insert(session.to_string(), old.unwrap_or_default());
        if self.crash_after(CompactStep::Renamed) {
            return;
        }
        self.disk.renamed_from.remove(session);
        self.compactions_count += 1;
        self.sync_count += 1;
        if self.hold_syncs {
            self.held_syncs.push_back((session.to_string(), len));
        } else {
            self.host.handle_synced(session, len, now);
        }
    }

    /// Kills the host after `step` if a test asked for it; true if it did.
    fn crash_after(&mut self, step: CompactStep) -> bool {
        match self.compact_crash {
            Some((s, power)) if s == step => {
                self.compact_crash = None;
                if power {
                    self.crash();
                } else {
                    self.crash_process();
                }
                true
            }
            _ => false,
        }
    }
}

impl std::fmt::Debug for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("now_ms", &self.now_ms)
            .finish()
    }
}
