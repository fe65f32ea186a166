//! The driver: the one task that owns the [`Host`] and is the only caller
//! of its `handle_*` methods.
//!
//! Each turn of the loop feeds one input (a connection event, an IO
//! completion, a signal or a due timer, with the wall clock as `now`), then
//! drains [`Host::poll_output`] and carries out every output in order:
//! sends go to the connection's writer queue, appends are written at once,
//! and the slow operations (opening or reading a log, `sync_data`, provider
//! effects) run on blocking threads and come back as inputs. So the core
//! keeps admitting while an fsync is in flight; when it completes, the core
//! emits one new sync covering everything appended meanwhile: that is how
//! intakes share fsyncs (group commit).
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
use tokio::sync::mpsc::error::TrySendError;

use super::clock::{until, wall_ms};
use super::effects::run_effect;
use super::failpoint::Failpoint;
use super::storage::{open_session, read_session, OpenedFiles, Step, Storage};
use super::transport::{self, ConnEvent, ConnHandle};
use crate::core::{ConnId, EffectOutcome, Host, HostConfig, OpenResult, Output, ReadResult};

/// The longest an orderly shutdown may take before the process gives up
/// waiting (a stuck provider, a disk that never answers).
pub const SHUTDOWN_GRACE_MS: u64 = 30_000;
/// How long the writers get to flush their queues at exit.
pub const FLUSH_GRACE_MS: u64 = 5_000;
/// A bound on drain rounds per input, so a broken core cannot spin the
/// driver forever.
const PUMP_ROUNDS_MAX: usize = 1_000_000;

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
        session: String,
        result: ReadResult,
    },
    Synced {
        session: String,
        epoch: u64,
        upto_bytes: u64,
        result: Result<(), String>,
    },
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
    failpoint: Option<Failpoint>,
    deferred: VecDeque<Deferred>,
    shutting_down: bool,
    inflight_io_count: usize,
}

/// Runs a host over `transport` until an orderly shutdown completes.
/// Returns the process exit code.
pub async fn run(cfg: HostConfig, failpoint: Option<Failpoint>, transport: Transport) -> i32 {
    let layout = super::storage::Layout::new(&cfg.data_dir);
    let (io_tx, mut io_rx) = mpsc::unbounded_channel();
    let (conn_tx, mut conn_rx) = mpsc::channel(transport::CONN_EVENTS_MAX);
    let mut d = Driver {
        host: Host::new(cfg, wall_ms()),
        storage: Storage::new(layout),
        conns: BTreeMap::new(),
        io_tx,
        failpoint,
        deferred: VecDeque::new(),
        shutting_down: false,
        inflight_io_count: 0,
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
        if d.shutting_down && d.host.is_quiescent() && d.inflight_io_count == 0 {
            break;
        }
        let timer = d.host.poll_timeout().map(|at| until(at, wall_ms()));
        tokio::select! {
            biased;
            Some(ev) = io_rx.recv() => d.on_io(ev),
            _ = term.recv(), if !d.shutting_down => {
                d.begin_shutdown();
                give_up_at = Some(tokio::time::Instant::now() + Duration::from_millis(SHUTDOWN_GRACE_MS));
                if let Some(a) = &acceptor { a.abort(); }
            }
            _ = interrupt.recv(), if !d.shutting_down => {
                d.begin_shutdown();
                give_up_at = Some(tokio::time::Instant::now() + Duration::from_millis(SHUTDOWN_GRACE_MS));
                if let Some(a) = &acceptor { a.abort(); }
            }
            Some(ev) = conn_rx.recv() => {
                let was = d.shutting_down;
                d.on_conn(ev);
                if d.shutting_down && !was {
                    give_up_at = Some(tokio::time::Instant::now() + Duration::from_millis(SHUTDOWN_GRACE_MS));
                }
            }
            _ = tokio::time::sleep(timer.unwrap_or_default()), if timer.is_some() => {
                d.host.handle_timeout(wall_ms());
            }
            _ = tokio::time::sleep_until(give_up_at.unwrap_or_else(tokio::time::Instant::now)), if give_up_at.is_some() => {
                eprintln!("msp serve: shutdown did not complete within {SHUTDOWN_GRACE_MS} ms");
                code = 1;
                break;
            }
        }
    }
    if let Some(a) = &acceptor {
        a.abort();
    }
    d.flush_writers().await;
    if let Some(p) = socket_path {
        let _ = std::fs::remove_file(p);
    }
    code
}

impl Driver {
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
            }
            IoEvent::Read {
                token,
                session,
                result,
            } => {
                // This process may have taken the lease while the probe ran.
                let result = match result {
                    ReadResult::Found { log, .. } if self.storage.holds(&session) => {
                        ReadResult::Found {
                            log,
                            held_elsewhere: false,
                        }
                    }
                    r => r,
                };
                self.host.handle_read(token, result, now);
            }
            IoEvent::Synced {
                session,
                epoch,
                upto_bytes,
                result,
            } => match self.storage.sync_done(&session, epoch, result) {
                Some(Ok(())) => self.host.handle_synced(&session, upto_bytes, now),
                Some(Err(e)) => self.host.handle_storage_failed(&session, &e, now),
                None => {}
            },
            IoEvent::EffectDone { token, outcome } => {
                self.host.handle_effect_done(token, outcome, now)
            }
        }
    }

    fn drop_conn(&mut self, conn: ConnId) {
        if let Some(h) = self.conns.remove(&conn) {
            h.reader.abort();
            // Dropping `tx` lets the writer finish its queue and close.
        }
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
                let Some(h) = self.conns.get(&conn) else {
                    return;
                };
                match h.tx.try_send(line) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) | Err(TrySendError::Closed(_)) => {
                        // Too slow to read its frames, or gone.
                        self.drop_conn(conn);
                        self.deferred.push_back(Deferred::Disconnect(conn));
                    }
                }
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
                self.spawn_io(move || {
                    let (result, files) = open_session(&layout, &guard, &session, mode);
                    IoEvent::Opened {
                        token,
                        session,
                        result,
                        files,
                    }
                });
            }
            Output::Read { session, token } => {
                let layout = self.storage.layout().clone();
                let guard = self.storage.guard().clone();
                let held_here = self.storage.holds(&session);
                self.spawn_io(move || {
                    let result = read_session(&layout, &guard, &session, held_here);
                    IoEvent::Read {
                        token,
                        session,
                        result,
                    }
                });
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
                    self.spawn_io(move || IoEvent::Synced {
                        result: job.run(),
                        session,
                        epoch: job.epoch,
                        upto_bytes,
                    });
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
                let providers = self.storage.layout().providers_dir();
                self.spawn_io(move || IoEvent::EffectDone {
                    token,
                    outcome: run_effect(&providers, &provider, &key, &action, mode),
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
