//! The driver: the one task that owns the [`Host`] and is the only caller
//! of its `handle_*` methods.
//!
//! Each input (a connection event, an IO completion, a signal or a due
//! timer, with the wall clock as `now`) is fed to the host, and then
//! [`Host::poll_output`] is drained and every output carried out in order:
//! appends are written at once; sends are gathered per connection; syncs
//! are gathered into one submission to the group committer
//! ([`super::commit`]); the slow operations (opening or reading a log,
//! provider effects) run on blocking threads and come back as inputs.
//!
//! A *round* of the loop waits for one input, then also takes every input
//! that is already there (up to [`ROUND_INPUTS_MAX`]), each fed and drained
//! on its own as above; only then are the gathered sends handed to each
//! connection's writer (one hand-off per connection per round) and the
//! gathered syncs submitted (one submission per round). So under load the
//! answers of many clients leave in few writes, and the syncs of many
//! sessions share one batch of fsyncs:
//!
//! - within a session, the core keeps at most one sync in flight and folds
//!   everything appended meanwhile into the next one;
//! - across sessions, the committer runs one batch at a time and every sync
//!   asked for meanwhile joins the next batch; a batch's completions come
//!   back as one input list, fed one `handle_synced` at a time.
//!
//! Errors found while carrying out an output (a failed write, a vanished
//! connection) are queued and fed back after the current drain, never in
//! the middle of it.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use super::clock::{until, wall_ms};
use super::commit::{CommitBug, Committer, SyncRequest, Synced};
use super::effects::Providers;
use super::failpoint::Failpoint;
use super::storage::{open_session, read_history, read_session, OpenedFiles, Step, Storage};
use super::transport::{self, ConnEvent, ConnHandle};
use crate::core::{
    ConnId, EffectOutcome, HistoryResult, Host, HostConfig, OpenResult, Output, ReadResult,
};
use std::sync::Arc;

/// The longest an orderly shutdown may take before the process gives up
/// waiting (a stuck provider, a disk that never answers).
pub const SHUTDOWN_GRACE_MS: u64 = 30_000;
/// How long the writers get to flush their queues at exit.
pub const FLUSH_GRACE_MS: u64 = 5_000;
/// A bound on drain rounds per input, so a broken core cannot spin the
/// driver forever.
const PUMP_ROUNDS_MAX: usize = 1_000_000;
/// At most this many inputs per round of the loop before the gathered sends
/// and syncs go out (so one busy client cannot hold back everyone's
/// answers).
pub const ROUND_INPUTS_MAX: usize = 256;
/// Sync workers of the group committer. The kernel and the disk overlap
/// concurrent fsyncs of different files, so a batch of many sessions needs
/// enough of them in flight at once; they sleep in the kernel, not on a
/// core.
pub const SYNC_WORKERS: usize = 16;

/// What a sync request is called: the sessions it makes durable, each with
/// its files' epoch and the log length the sync covers (one session for an
/// fsync of its log; every session synced this round for a journal fsync).
type SyncKey = Vec<(String, u64, u64)>;

/// Run by the driver after each session load, set by the binary (see
/// [`set_after_load`]).
static AFTER_LOAD: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets what the driver runs after each session load: `msp` hands its
/// allocator the memory the load freed (a load's transient buffers are
/// several times the session's live state, and an allocator that keeps
/// them reserved leaves the process's RSS there). The hook runs as a task
/// of the driver's runtime, after the round's answers went out: with
/// `msp serve`'s current-thread runtime, on the thread whose heap the load
/// freed into. The first call wins.
pub fn set_after_load(hook: fn()) {
    let _ = AFTER_LOAD.set(hook);
}

/// Where clients come from.
#[derive(Debug)]
pub enum Transport {
    /// stdin/stdout, one connection.
    Stdio,
    /// A bound TCP listener.
    Tcp(TcpListener),
    /// A bound Unix-socket listener and its path (removed at exit).
    Unix(UnixListener, PathBuf),
}

/// An IO completion coming back to the driver.
#[derive(Debug)]
enum IoEvent {
    Opened {
        token: u64,
        session: String,
        result: OpenResult,
        files: Option<OpenedFiles>,
    },
    Read {
        token: u64,
        result: ReadResult,
    },
    History {
        token: u64,
        result: HistoryResult,
    },
    /// A compaction finished (its new log's length is what it syncs).
    Compacted {
        session: String,
        epoch: u64,
        upto: u64,
        result: Result<std::fs::File, String>,
    },
    /// One batch of the group committer.
    Synced(Vec<Synced<SyncKey>>),
    EffectDone {
        token: u64,
        outcome: EffectOutcome,
    },
}

/// An input discovered while carrying out outputs, fed after the drain.
#[derive(Debug)]
enum Deferred {
    StorageFailed(String, String),
    Disconnect(ConnId),
}

struct Driver {
    host: Host,
    storage: Storage,
    conns: BTreeMap<ConnId, ConnHandle>,
    io_tx: mpsc::UnboundedSender<IoEvent>,
    committer: Committer<std::fs::File, SyncKey>,
    providers: Arc<Providers>,
    failpoint: Option<Failpoint>,
    deferred: VecDeque<Deferred>,
    shutting_down: bool,
    inflight_io_count: usize,
    /// Frames gathered this round, per connection, and how many.
    sends: BTreeMap<ConnId, (Vec<u8>, usize)>,
    /// Syncs gathered this round (journaling: the sessions, for one
    /// request at the round's end).
    syncs: Vec<SyncRequest<std::fs::File, SyncKey>>,
    journal_syncs: SyncKey,
    /// Batches the committer completed.
    batch_count: u64,
}

/// Runs a host over `transport` until an orderly shutdown completes, with
/// the built-in effect providers. Returns the process exit code.
pub async fn run(cfg: HostConfig, failpoint: Option<Failpoint>, transport: Transport) -> i32 {
    let layout = super::storage::Layout::new(&cfg.data_dir);
    let providers = Providers::builtin(&layout.providers_dir());
    run_with_providers(cfg, failpoint, transport, providers).await
}

/// [`run`] with the application's own effect providers (which replace the
/// built-in ones; register those too to keep them). The host learns from
/// the registry which names are effects and which honour effect keys.
pub async fn run_with_providers(
    mut cfg: HostConfig,
    failpoint: Option<Failpoint>,
    transport: Transport,
    providers: Providers,
) -> i32 {
    cfg.effect_providers = providers.key_support();
    let providers = Arc::new(providers);
    let layout = super::storage::Layout::new(&cfg.data_dir);
    let (io_tx, mut io_rx) = mpsc::unbounded_channel();
    let (conn_tx, mut conn_rx) = mpsc::channel(transport::CONN_EVENTS_MAX);
    let done_tx = io_tx.clone();
    // Without group commit (the benchmark baseline) every intake gets an
    // fsync of its own, one at a time, across sessions too.
    let (workers, batch_max) = if cfg.group_commit {
        (SYNC_WORKERS, usize::MAX)
    } else {
        (1, 1)
    };
    let committer = Committer::new(
        workers,
        batch_max,
        Box::new(move |batch| {
            // The receiver outlives the committer unless the driver is gone.
            let _ = done_tx.send(IoEvent::Synced(batch));
        }),
        CommitBug::None,
    );
    let storage = match open_storage(&cfg, layout) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("msp serve: {e}");
            return 1;
        }
    };
    let mut d = Driver {
        host: Host::new(cfg, wall_ms()),
        storage,
        conns: BTreeMap::new(),
        io_tx,
        committer,
        providers,
        failpoint,
        deferred: VecDeque::new(),
        shutting_down: false,
        inflight_io_count: 0,
        sends: BTreeMap::new(),
        syncs: Vec::new(),
        journal_syncs: Vec::new(),
        batch_count: 0,
    };
    let mut socket_path = None;
    let acceptor = match transport {
        Transport::Stdio => {
            transport::attach_stdio(conn_tx.clone()).await;
            None
        }
        Transport::Tcp(l) => Some(tokio::spawn(transport::accept_tcp(l, conn_tx.clone()))),
        Transport::Unix(l, path) => {
            socket_path = Some(path);
            Some(tokio::spawn(transport::accept_unix(l, conn_tx.clone())))
        }
    };
    drop(conn_tx);
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("msp serve: cannot watch SIGTERM: {e}");
            return 1;
        }
    };
    let mut interrupt = match signal(SignalKind::interrupt()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("msp serve: cannot watch SIGINT: {e}");
            return 1;
        }
    };
    let mut give_up_at: Option<tokio::time::Instant> = None;
    let mut code = 0;
    loop {
        d.pump();
        d.end_round();
        if d.shutting_down && d.host.is_quiescent() && d.inflight_io_count == 0 {
            break;
        }
        let timer = d.host.poll_timeout().map(|at| until(at, wall_ms()));
        tokio::select! {
            biased;
            Some(ev) = io_rx.recv() => d.on_io(ev),
            _ = term.recv(), if !d.shutting_down => {
                d.begin_shutdown();
                give_up_at = Some(grace_deadline());
                if let Some(a) = &acceptor { a.abort(); }
            }
            _ = interrupt.recv(), if !d.shutting_down => {
                d.begin_shutdown();
                give_up_at = Some(grace_deadline());
                if let Some(a) = &acceptor { a.abort(); }
            }
            Some(ev) = conn_rx.recv() => d.on_conn_graced(ev, &mut give_up_at),
            _ = tokio::time::sleep(timer.unwrap_or_default()), if timer.is_some() => {
                d.host.handle_timeout(wall_ms());
            }
            _ = tokio::time::sleep_until(give_up_at.unwrap_or_else(tokio::time::Instant::now)), if give_up_at.is_some() => {
                eprintln!("msp serve: shutdown did not complete within {} ms", shutdown_grace_ms());
                code = 1;
                break;
            }
        }
        // Take every input that is already there before anything goes out.
        for _ in 1..ROUND_INPUTS_MAX {
            d.pump();
            if let Ok(ev) = io_rx.try_recv() {
                d.on_io(ev);
            } else if let Ok(ev) = conn_rx.try_recv() {
                d.on_conn_graced(ev, &mut give_up_at);
            } else {
                break;
            }
        }
    }
    if let Some(a) = &acceptor {
        a.abort();
    }
    d.pump();
    d.end_round();
    if d.inflight_io_count == 0 {
        d.committer.close();
    } else {
        // Gave up on a sync that never came back: do not wait for it.
        d.committer.detach();
    }
    if d.storage.held_count() == 0 {
        if let Err(e) = d.storage.close() {
            eprintln!("msp serve: removing the intake journal: {e}");
        }
    }
    // Read by the benchmarks (acks per fsync); harmless elsewhere. The
    // lazy fsyncs of logs (checkpoints, releases) are not counted: one per
    // session per 32 MiB of journal, or per release.
    eprintln!(
        "msp serve: {} fdatasyncs in {} batches",
        d.committer.syncs_run(),
        d.batch_count
    );
    d.flush_writers().await;
    if let Some(p) = socket_path {
        let _ = std::fs::remove_file(p);
    }
    code
}

/// The storage of a durable host: replays the journals of dead processes
/// (before anything is served), then starts this process's journal.
fn open_storage(cfg: &HostConfig, layout: super::storage::Layout) -> Result<Storage, String> {
    if cfg.durability != crate::core::Durability::Durable {
        return Ok(Storage::new(layout));
    }
    let guard = super::storage::Leases::new(());
    let rec = super::journal::recover_dead(&layout, &guard)
        .map_err(|e| format!("replaying the intake journals: {e}"))?;
    if rec.journals > 0 {
        eprintln!(
            "msp serve: replayed {} entries of {} dead intake journals ({} removed)",
            rec.entries, rec.journals, rec.removed
        );
    }
    let id = uuid::Uuid::now_v7().to_string();
    let mut journal = super::journal::Journal::create(&layout, id)
        .map_err(|e| format!("creating the intake journal: {e}"))?;
    // Small segments exercise checkpoints in tests.
    if let Some(bytes) = std::env::var("MSP_JOURNAL_SEGMENT_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        journal = journal.with_segment_bytes(bytes);
    }
    Ok(Storage::with_journal(
        layout,
        guard,
        journal,
        cfg.group_commit,
    ))
}

/// When a shutdown beginning now gives up: [`shutdown_grace_ms`] later.
fn grace_deadline() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_millis(shutdown_grace_ms())
}

/// The grace period of a shutdown: [`SHUTDOWN_GRACE_MS`], or
/// `MSP_SHUTDOWN_GRACE_MS` when set (a test hook, so that a test of a
/// shutdown that never completes does not wait half a minute).
fn shutdown_grace_ms() -> u64 {
    std::env::var("MSP_SHUTDOWN_GRACE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(SHUTDOWN_GRACE_MS)
}

impl Driver {
    /// [`Driver::on_conn`]; if the event began the shutdown (end of
    /// stdin), its grace period starts: `give_up_at`. One path for the
    /// round's first input and for those taken with it.
    fn on_conn_graced(&mut self, ev: ConnEvent, give_up_at: &mut Option<tokio::time::Instant>) {
        let was = self.shutting_down;
        self.on_conn(ev);
        if self.shutting_down && !was {
            *give_up_at = Some(grace_deadline());
        }
    }

    /// Drains the host's outputs, then feeds deferred inputs, until both
    /// are empty.
    fn pump(&mut self) {
        for _ in 0..PUMP_ROUNDS_MAX {
            while let Some(o) = self.host.poll_output() {
                self.exec(o);
            }
            match self.deferred.pop_front() {
                Some(Deferred::StorageFailed(session, error)) => {
                    self.host.handle_storage_failed(&session, &error, wall_ms());
                }
                Some(Deferred::Disconnect(conn)) => self.host.handle_disconnect(conn, wall_ms()),
                None => return,
            }
        }
        panic!("the host kept producing outputs for {PUMP_ROUNDS_MAX} rounds");
    }

    fn begin_shutdown(&mut self) {
        if !self.shutting_down {
            self.shutting_down = true;
            self.host.shutdown(wall_ms());
        }
    }

    fn on_conn(&mut self, ev: ConnEvent) {
        let now = wall_ms();
        match ev {
            ConnEvent::Connected { conn, handle } => {
                self.conns.insert(conn, handle);
                self.host.handle_connect(conn, now);
            }
            ConnEvent::Bytes { conn, bytes } => self.host.handle_bytes(conn, &bytes, now),
            ConnEvent::Closed { conn } => {
                self.drop_conn(conn);
                self.host.handle_disconnect(conn, now);
            }
            ConnEvent::StdinEof => self.begin_shutdown(),
        }
    }

    fn on_io(&mut self, ev: IoEvent) {
        if let IoEvent::Synced(batch) = ev {
            return self.on_synced(batch);
        }
        self.inflight_io_count -= 1;
        let now = wall_ms();
        match ev {
            IoEvent::Opened {
                token,
                session,
                result,
                files,
            } => {
                if let Some(f) = files {
                    self.storage.install(&session, f);
                }
                self.host.handle_opened(token, result, now);
                if let Some(hook) = AFTER_LOAD.get().copied() {
                    // After this round's answers went out: a task of this
                    // (current-thread) runtime, so on the driver's thread,
                    // whose heap the load freed into.
                    tokio::spawn(async move {
                        tokio::task::yield_now().await;
                        hook();
                    });
                }
            }
            IoEvent::Read { token, result } => {
                // The lease registry never reports this process's own lease
                // as held elsewhere, so the answer needs no correction.
                self.host.handle_read(token, result, now);
            }
            IoEvent::History { token, result } => self.host.handle_history(token, result, now),
            IoEvent::Compacted {
                session,
                epoch,
                upto,
                result,
            } => match self.storage.compact_done(&session, epoch, result) {
                Some(Ok(())) => self.host.handle_synced(&session, upto, now),
                Some(Err(e)) => self.host.handle_storage_failed(&session, &e, now),
                None => {}
            },
            IoEvent::Synced(_) => unreachable!("handled above"),
            IoEvent::EffectDone { token, outcome } => {
                self.host.handle_effect_done(token, outcome, now)
            }
        }
    }

    /// A batch of the group committer: one input per completed sync, each
    /// drained on its own, in the order the batch lists them.
    fn on_synced(&mut self, batch: Vec<Synced<SyncKey>>) {
        self.batch_count += 1;
        for Synced { key, result, .. } in batch {
            debug_assert!(self.inflight_io_count > 0, "every completion was submitted");
            self.inflight_io_count -= 1;
            for (session, epoch, upto) in key {
                let now = wall_ms();
                match self.storage.sync_done(&session, epoch, result.clone()) {
                    Some(Ok(())) => self.host.handle_synced(&session, upto, now),
                    Some(Err(e)) => self.host.handle_storage_failed(&session, &e, now),
                    None => {}
                }
                self.pump();
            }
        }
    }

    fn drop_conn(&mut self, conn: ConnId) {
        // Frames gathered before the close still go out first.
        self.hand_over(conn);
        if let Some(h) = self.conns.remove(&conn) {
            h.reader.abort();
            // Dropping `tx` lets the writer finish its queue and close.
        }
    }

    /// Hands a connection's gathered frames to its writer in one piece; a
    /// client that has not read [`transport::WRITE_QUEUE_FRAMES`] frames is
    /// too slow and is disconnected.
    fn hand_over(&mut self, conn: ConnId) {
        let Some((bytes, frames)) = self.sends.remove(&conn) else {
            return;
        };
        let Some(h) = self.conns.get(&conn) else {
            return;
        };
        match h.send(bytes, frames) {
            Ok(()) => {}
            Err(transport::SendRefused::TooSlow) => {
                // Its queue is not written out: the writer would wait on
                // this client for ever, holding the socket open and the
                // queue in memory (with the reader gone, the client's own
                // writes would block too). Both tasks end; the socket
                // closes.
                if let Some(h) = self.conns.remove(&conn) {
                    h.reader.abort();
                    h.writer.abort();
                }
                self.deferred.push_back(Deferred::Disconnect(conn));
            }
            Err(transport::SendRefused::Closed) => {
                self.drop_conn(conn);
                self.deferred.push_back(Deferred::Disconnect(conn));
            }
        }
    }

    /// The end of a round: every connection's gathered frames go to its
    /// writer, and the gathered syncs go to the committer as one
    /// submission.
    fn end_round(&mut self) {
        while let Some(conn) = self.sends.keys().next().copied() {
            self.hand_over(conn);
        }
        self.flush_journal();
        if !self.syncs.is_empty() {
            let reqs = std::mem::take(&mut self.syncs);
            self.inflight_io_count += reqs.len();
            if let Err(back) = self.committer.submit(reqs) {
                // The committer only closes after the loop: never here.
                for r in back {
                    self.inflight_io_count -= 1;
                    for (session, _, _) in r.key {
                        self.deferred.push_back(Deferred::StorageFailed(
                            session,
                            "the group committer has stopped".into(),
                        ));
                    }
                }
            }
        }
        // A refused hand-over or submission is an input to feed now.
        if !self.deferred.is_empty() {
            self.pump();
            if !self.sends.is_empty() || !self.syncs.is_empty() || !self.journal_syncs.is_empty() {
                self.end_round();
            }
        }
    }

    /// Journaling: writes the round's journal entries and turns the round's
    /// syncs into one request, an fsync of the journal segment that holds
    /// them; starts a checkpoint when the segment is full.
    fn flush_journal(&mut self) {
        if !self.storage.journaling() {
            return;
        }
        let flushed = self.storage.flush_journal();
        // A full segment is fsynced before the next one takes entries, so a
        // request for the segment of this round's entries also covers each
        // session's earlier ones.
        let rotated = self.storage.rotate_journal();
        let mut failed = Vec::new();
        match flushed {
            Ok(Some(segment)) if !self.journal_syncs.is_empty() => {
                self.syncs.push(SyncRequest {
                    file: segment,
                    upto: 0,
                    key: std::mem::take(&mut self.journal_syncs),
                });
            }
            Ok(_) => {}
            Err((e, mut sessions)) => {
                // The sessions that asked for a sync this round may have
                // had entries in the lost write: they fail too.
                let asked = std::mem::take(&mut self.journal_syncs);
                sessions.extend(
                    self.storage
                        .mark_failed(asked.into_iter().map(|(s, _, _)| s).collect()),
                );
                failed.push((e, sessions));
            }
        }
        match rotated {
            Ok(Some(checkpoint)) => {
                tokio::task::spawn_blocking(move || {
                    if let Err(e) = checkpoint.run() {
                        eprintln!("msp serve: {e}");
                    }
                });
            }
            Ok(None) => {}
            Err(e) => failed.push(e),
        }
        for (e, sessions) in failed {
            for s in sessions {
                self.deferred
                    .push_back(Deferred::StorageFailed(s, e.clone()));
            }
        }
        debug_assert!(self.journal_syncs.is_empty(), "every sync asked went out");
    }

    /// Runs `job` on a blocking thread; its result comes back as an input.
    fn spawn_io(&mut self, job: impl FnOnce() -> IoEvent + Send + 'static) {
        self.inflight_io_count += 1;
        let tx = self.io_tx.clone();
        tokio::task::spawn_blocking(move || {
            let _ = tx.send(job());
        });
    }

    fn storage_step<T>(&mut self, session: &str, step: Step<T>) -> Option<T> {
        match step {
            Step::Done(v) => Some(v),
            Step::Skipped => None,
            Step::Failed(e) => {
                self.deferred
                    .push_back(Deferred::StorageFailed(session.to_string(), e));
                None
            }
        }
    }

    fn exec(&mut self, o: Output) {
        match o {
            Output::Send { conn, line } => {
                if !self.conns.contains_key(&conn) {
                    return;
                }
                let (bytes, frames) = self.sends.entry(conn).or_default();
                bytes.extend_from_slice(&line);
                *frames += 1;
            }
            Output::Close { conn } => {
                self.drop_conn(conn);
                self.deferred.push_back(Deferred::Disconnect(conn));
            }
            Output::Open {
                session,
                mode,
                token,
            } => {
                let layout = self.storage.layout().clone();
                let guard = self.storage.guard().clone();
                let ticket = self.storage.begin_open();
                self.spawn_io(move || {
                    let (result, files) = open_session(&layout, &guard, &session, mode, ticket);
                    IoEvent::Opened {
                        token,
                        session,
                        result,
                        files,
                    }
                });
            }
            Output::Read {
                session,
                token,
                history,
            } => {
                let layout = self.storage.layout().clone();
                let guard = self.storage.guard().clone();
                self.spawn_io(move || {
                    let result = read_session(&layout, &guard, &session, history);
                    IoEvent::Read { token, result }
                });
            }
            Output::ReadHistory {
                session,
                token,
                from_bytes,
                to_bytes,
            } => {
                let layout = self.storage.layout().clone();
                self.spawn_io(move || IoEvent::History {
                    token,
                    result: read_history(&layout, &session, from_bytes, to_bytes),
                });
            }
            Output::Compact {
                session,
                snapshot,
                log_from_bytes,
                log_len_bytes,
                archive_len_bytes,
            } => {
                let upto = snapshot.len() as u64;
                let abort_at = self.failpoint.as_mut().and_then(|f| f.hit_compaction());
                let step = self.storage.begin_compact(
                    &session,
                    snapshot,
                    (log_from_bytes, log_len_bytes),
                    archive_len_bytes,
                    abort_at,
                );
                if let Some(job) = self.storage_step(&session, step) {
                    let epoch = job.epoch;
                    self.spawn_io(move || IoEvent::Compacted {
                        session,
                        epoch,
                        upto,
                        result: job.run(),
                    });
                }
            }
            Output::Truncate { session, len_bytes } => {
                let step = self.storage.truncate(&session, len_bytes);
                self.storage_step(&session, step);
            }
            Output::Append { session, bytes } => {
                let step = self.storage.append(&session, &bytes);
                self.storage_step(&session, step);
            }
            Output::Sync {
                session,
                upto_bytes,
            } => {
                let step = self.storage.begin_sync(&session);
                if let Some(job) = self.storage_step(&session, step) {
                    if self.storage.journaling() {
                        self.journal_syncs.push((session, job.epoch, upto_bytes));
                    } else {
                        self.syncs.push(SyncRequest {
                            file: job.file,
                            upto: upto_bytes,
                            key: vec![(session, job.epoch, upto_bytes)],
                        });
                    }
                }
            }
            Output::Release { session } => self.storage.release(&session),
            Output::Effect {
                token,
                provider,
                key,
                action,
                mode,
            } => {
                let providers = Arc::clone(&self.providers);
                self.spawn_io(move || IoEvent::EffectDone {
                    token,
                    outcome: providers.run(&provider, &key, &action, mode),
                });
            }
            Output::CrashPoint(p) => {
                if self.failpoint.as_mut().is_some_and(|f| f.hit(p)) {
                    eprintln!(
                        "msp serve: {}={} reached; aborting",
                        super::failpoint::ENV_VAR,
                        p.name()
                    );
                    std::process::abort();
                }
            }
        }
    }

    /// Lets every writer finish its queue (bounded by [`FLUSH_GRACE_MS`]).
    async fn flush_writers(&mut self) {
        let writers: Vec<_> = std::mem::take(&mut self.conns)
            .into_values()
            .map(|h| {
                h.reader.abort();
                h.writer
            })
            .collect();
        let all = async {
            for w in writers {
                let _ = w.await;
            }
        };
        let _ = tokio::time::timeout(Duration::from_millis(FLUSH_GRACE_MS), all).await;
    }
}
