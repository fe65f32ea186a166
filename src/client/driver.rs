//! The tokio driver: one task owns a [`ClientCore`], a link and the wall
//! clock, and carries the core's outputs out. Everything it decides, the
//! core decided; this module only moves bytes and time.
//!
//! Transports: a child process over stdio (`msp serve --stdio ...`,
//! respawned on reconnect: a new host on the same data directory), TCP, or
//! a Unix socket. On a lost link it reconnects with a capped backoff; the
//! core then heals (handshake, session reloads, replays with the same ids).
//!
//! The driver is the only place in the SDK that reads the wall clock and OS
//! randomness.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::core::{ClientConfig, ClientCore, CommandHandle, Completion, Output, SubmitError};
use super::events::{ClientEvent, Notification, TurnEnd};
use super::gate::{Admission, Gate, GateError, GateStore};
use super::ids::{CommandId, CorrelationId, RequestId, SessionId, TurnId};
use super::optimistic::{OptimisticWrite, StateView, WriteStep};
use super::outcome::{CommandOutcome, ErrorInfo};
use super::wire::{CommandSpec, ReadSpec, WireCommand};

/// Where the host is.
#[derive(Debug, Clone)]
pub enum Transport {
    /// Spawn `program` with `args` and speak over its stdin/stdout (for
    /// `msp serve --stdio --data-dir DIR`). A reconnect spawns it again.
    Stdio {
        /// The executable.
        program: PathBuf,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A TCP address (`127.0.0.1:7777`).
    Tcp(String),
    /// A Unix socket path.
    Unix(PathBuf),
}

/// Why a driver call failed.
#[derive(Debug)]
pub enum ClientError {
    /// The core refused the submission.
    Submit(SubmitError),
    /// The request gate failed.
    Gate(GateError),
    /// The driver task is gone (the client was closed).
    Closed,
    /// Connecting failed.
    Io(std::io::Error),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Submit(e) => write!(f, "{e}"),
            ClientError::Gate(e) => write!(f, "{e}"),
            ClientError::Closed => f.write_str("the client is closed"),
            ClientError::Io(e) => write!(f, "transport: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<GateError> for ClientError {
    fn from(e: GateError) -> Self {
        ClientError::Gate(e)
    }
}

/// A command's id and outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    /// The id the command was sent under.
    pub command_id: CommandId,
    /// Its outcome.
    pub outcome: CommandOutcome,
}

/// The answer of [`Client::submit_gated`].
#[derive(Debug, Clone, PartialEq)]
pub struct GatedOutcome {
    /// The one command id of the request.
    pub command_id: CommandId,
    /// The request's outcome.
    pub outcome: CommandOutcome,
    /// True when the gate answered from its store and nothing was sent.
    pub from_gate: bool,
}

type Reply<T> = oneshot::Sender<T>;
/// A read's answer as handed to its caller.
type ReadReply = Reply<Result<Result<Value, ErrorInfo>, ClientError>>;

enum Call {
    Submit(CommandSpec, Reply<Result<Submitted, ClientError>>),
    SubmitWithId(
        CommandId,
        WireCommand,
        Reply<Result<Submitted, ClientError>>,
    ),
    Unchecked(
        CommandId,
        String,
        Map<String, Value>,
        Reply<Result<Submitted, ClientError>>,
    ),
    Prepare(CommandSpec, Reply<(CommandId, WireCommand)>),
    Read(ReadSpec, ReadReply),
    WaitTurn(SessionId, TurnId, Reply<TurnEnd>),
    Follow(SessionId),
}

/// A connected MSP client. Cheap to share by reference; every method can
/// be called concurrently. Dropping it stops the driver task.
pub struct Client {
    calls: mpsc::Sender<Call>,
    events: broadcast::Sender<ClientEvent>,
    task: tokio::task::JoinHandle<()>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

type Reader = Box<dyn AsyncRead + Unpin + Send>;
type Writer = Box<dyn AsyncWrite + Unpin + Send>;

struct Link {
    writer: Writer,
    child: Option<tokio::process::Child>,
    reader_task: tokio::task::JoinHandle<()>,
}

/// How long a spawned host gets to shut down in order after its input
/// closed, before it is killed.
const CHILD_EXIT_WAIT_MS: u64 = 5_000;

impl Link {
    /// Closes the link in order: our side of the stream ends, so a spawned
    /// host sees end of input and unloads its sessions (`hostShutdown`)
    /// before exiting; it is killed only if it does not exit in time.
    async fn shutdown(mut self) {
        let _ = self.writer.shutdown().await;
        // A pipe closes only when its handle is dropped.
        drop(std::mem::replace(
            &mut self.writer,
            Box::new(tokio::io::sink()),
        ));
        if let Some(mut child) = self.child.take() {
            let wait =
                tokio::time::timeout(Duration::from_millis(CHILD_EXIT_WAIT_MS), child.wait());
            if wait.await.is_err() {
                let _ = child.start_kill();
            }
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.reader_task.abort();
        if let Some(c) = self.child.as_mut() {
            let _ = c.start_kill();
        }
    }
}

async fn open(t: &Transport) -> std::io::Result<(Reader, Writer, Option<tokio::process::Child>)> {
    match t {
        Transport::Stdio { program, args } => {
            let mut child = tokio::process::Command::new(program)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()?;
            let stdin = child
                .stdin
                .take()
                .ok_or_else(|| std::io::Error::other("no stdin"))?;
            let stdout = child
                .stdout
                .take()
                .ok_or_else(|| std::io::Error::other("no stdout"))?;
            Ok((Box::new(stdout), Box::new(stdin), Some(child)))
        }
        Transport::Tcp(addr) => {
            let s = tokio::net::TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            let (r, w) = s.into_split();
            Ok((Box::new(r), Box::new(w), None))
        }
        Transport::Unix(path) => {
            let s = tokio::net::UnixStream::connect(path).await?;
            let (r, w) = s.into_split();
            Ok((Box::new(r), Box::new(w), None))
        }
    }
}

/// Reconnect delays: doubling from this, capped below.
const RECONNECT_MIN_MS: u64 = 50;
const RECONNECT_MAX_MS: u64 = 2_000;

impl Client {
    /// Connects (the first attempt must succeed, so a wrong address fails
    /// here) and starts the driver task on the current tokio runtime.
    pub async fn connect(transport: Transport, cfg: ClientConfig) -> Result<Client, ClientError> {
        let first = open(&transport).await.map_err(ClientError::Io)?;
        let entropy = Box::new(rand::random::<u128>);
        let core = ClientCore::new(cfg, entropy);
        let (calls_tx, calls_rx) = mpsc::channel(256);
        let (events, _) = broadcast::channel(4_096);
        let ev = events.clone();
        let task = tokio::spawn(async move {
            Driver {
                core,
                transport,
                events: ev,
                link: None,
                link_seq: 0,
                waiting: BTreeMap::new(),
                reads: BTreeMap::new(),
                turn_waits: BTreeMap::new(),
            }
            .run(first, calls_rx)
            .await
        });
        Ok(Client {
            calls: calls_tx,
            events,
            task,
        })
    }

    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Call) -> Result<T, ClientError> {
        let (tx, rx) = oneshot::channel();
        self.calls
            .send(make(tx))
            .await
            .map_err(|_| ClientError::Closed)?;
        rx.await.map_err(|_| ClientError::Closed)
    }

    /// Events from now on (typed notifications, link events). A receiver
    /// that falls more than 4,096 events behind gets `Lagged` and should
    /// re-read the session.
    pub fn events(&self) -> broadcast::Receiver<ClientEvent> {
        self.events.subscribe()
    }

    /// Submits a new logical command and waits for its terminal outcome
    /// (retries, reconnects and replays happen underneath, with one id).
    pub async fn submit(&self, spec: CommandSpec) -> Result<Submitted, ClientError> {
        self.call(|r| Call::Submit(spec, r)).await?
    }

    /// Submits under an id minted earlier (a restarted application
    /// finishing what it started) and waits for the outcome.
    pub async fn submit_with_id(
        &self,
        id: CommandId,
        command: WireCommand,
    ) -> Result<Submitted, ClientError> {
        self.call(|r| Call::SubmitWithId(id, command, r)).await?
    }

    /// **Not for applications**: see
    /// [`ClientCore::submit_unchecked_for_tests`].
    pub async fn submit_unchecked_for_tests(
        &self,
        id: CommandId,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<Submitted, ClientError> {
        let m = method.to_string();
        self.call(|r| Call::Unchecked(id, m, params, r)).await?
    }

    /// A fresh command id and the command as it will be sent (an id-less
    /// interrupt or cancel anchored to the running turn).
    pub async fn prepare(
        &self,
        spec: CommandSpec,
    ) -> Result<(CommandId, WireCommand), ClientError> {
        self.call(|r| Call::Prepare(spec, r)).await
    }

    /// A read; its result or error.
    pub async fn read(&self, spec: ReadSpec) -> Result<Result<Value, ErrorInfo>, ClientError> {
        self.call(|r| Call::Read(spec, r)).await?
    }

    /// Follows `session` (it is resumed on this link and every later one).
    pub async fn follow(&self, session: SessionId) -> Result<(), ClientError> {
        self.calls
            .send(Call::Follow(session))
            .await
            .map_err(|_| ClientError::Closed)
    }

    /// Waits until `turn` of `session` has ended (`turn/completed` or
    /// `turn/unqueued`), whether it ended before this call (found in the
    /// session's history) or after (seen live).
    pub async fn wait_turn_end(
        &self,
        session: &SessionId,
        turn: &TurnId,
    ) -> Result<TurnEnd, ClientError> {
        let (tx, mut live) = oneshot::channel();
        self.calls
            .send(Call::WaitTurn(session.clone(), turn.clone(), tx))
            .await
            .map_err(|_| ClientError::Closed)?;
        if let Some(end) = self.find_turn_end(session, turn).await? {
            return Ok(end);
        }
        (&mut live).await.map_err(|_| ClientError::Closed)
    }

    /// Scans the session's durable history for the end of `turn`.
    async fn find_turn_end(
        &self,
        session: &SessionId,
        turn: &TurnId,
    ) -> Result<Option<TurnEnd>, ClientError> {
        let mut cursor = None;
        for _ in 0..10_000 {
            let page = self
                .read(ReadSpec::ViewPage {
                    session_id: session.clone(),
                    limit: 1_000,
                    cursor: cursor.clone(),
                    backward: false,
                })
                .await?;
            let Ok(page) = page else {
                return Ok(None);
            };
            let events = page["events"].as_array().cloned().unwrap_or_default();
            for e in &events {
                let method = e["method"].as_str().unwrap_or_default();
                let ev = super::events::ViewEvent::parse(method, &e["params"]);
                if let Notification::TurnEnded { turn_id, end, .. } = ev.notification {
                    if &turn_id == turn {
                        return Ok(Some(end));
                    }
                }
            }
            match page["nextCursor"].as_str() {
                Some(c) if !events.is_empty() => cursor = Some(c.to_string()),
                _ => return Ok(None),
            }
        }
        Ok(None)
    }

    /// One request through the gate: an arrival already answered gets the
    /// persisted outcome and sends nothing; otherwise the request's one
    /// command (the winner's id and payload) is sent, and its outcome
    /// persisted (first write wins) and returned.
    ///
    /// Gate calls run on a blocking thread: a SQLite store may wait for
    /// another process's lock.
    pub async fn submit_gated<S: GateStore + Send + 'static>(
        &self,
        gate: &Arc<Mutex<Gate<S>>>,
        request: &RequestId,
        correlation: Option<&CorrelationId>,
        spec: CommandSpec,
    ) -> Result<GatedOutcome, ClientError> {
        let (fresh, command) = self.prepare(spec).await?;
        let g = Arc::clone(gate);
        let (req, corr) = (request.clone(), correlation.cloned());
        let admission = tokio::task::spawn_blocking(move || {
            let mut g = g
                .lock()
                .map_err(|_| GateError::Store("gate lock poisoned".into()))?;
            g.admit(&req, corr.as_ref(), &command, fresh, now_ms())
        })
        .await
        .map_err(|e| ClientError::Gate(GateError::Store(e.to_string())))??;
        let (command_id, command) = match admission {
            Admission::Answered {
                command_id,
                outcome,
            } => {
                return Ok(GatedOutcome {
                    command_id,
                    outcome,
                    from_gate: true,
                })
            }
            Admission::Send {
                command_id,
                command,
                ..
            } => (command_id, command),
        };
        let sent = self.submit_with_id(command_id.clone(), command).await?;
        let g = Arc::clone(gate);
        let req = request.clone();
        let cid = command_id.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            let mut g = g
                .lock()
                .map_err(|_| GateError::Store("gate lock poisoned".into()))?;
            g.settle(&req, &cid, sent.outcome)
        })
        .await
        .map_err(|e| ClientError::Gate(GateError::Store(e.to_string())))??;
        Ok(GatedOutcome {
            command_id,
            outcome,
            from_gate: false,
        })
    }

    /// An optimistic write with fetch-reconcile-retry: read the state, ask
    /// `decide` what to set (or `None` to stop), write it with
    /// `expectedRevision`; on `stale_revision` read again and decide anew
    /// (a new command, never the old write again), at most `max_attempts`
    /// writes. Returns the final step ([`WriteStep::Done`] or
    /// [`WriteStep::Stopped`]).
    pub async fn update_state(
        &self,
        session: &SessionId,
        max_attempts: u32,
        mut decide: impl FnMut(&StateView) -> Option<Map<String, Value>>,
    ) -> Result<WriteStep, ClientError> {
        let (mut w, mut step) = OptimisticWrite::new(session.clone(), max_attempts);
        loop {
            step = match step {
                WriteStep::Fetch(read) => {
                    let view = self
                        .read(read)
                        .await?
                        .ok()
                        .and_then(|v| StateView::from_session_read(&v));
                    w.on_fetched(view, &mut decide)
                }
                WriteStep::Write(spec) => {
                    let s = self.submit(spec).await?;
                    w.on_outcome(&s.outcome)
                }
                done => return Ok(done),
            };
        }
    }

    /// Stops the driver: the link closes in order (a spawned host sees end
    /// of input and shuts down, unloading its sessions). A link the core
    /// gave up on, by contrast, is dropped at once (a spawned host is
    /// killed).
    pub async fn close(self) {
        drop(self.calls);
        let _ = self.task.await;
    }
}

struct Driver {
    core: ClientCore,
    transport: Transport,
    events: broadcast::Sender<ClientEvent>,
    link: Option<Link>,
    link_seq: u64,
    waiting: BTreeMap<CommandHandle, Vec<Reply<Result<Submitted, ClientError>>>>,
    reads: BTreeMap<super::core::ReadHandle, ReadReply>,
    turn_waits: BTreeMap<(SessionId, TurnId), Vec<Reply<TurnEnd>>>,
}

type Chunk = (u64, Option<Vec<u8>>);

impl Driver {
    async fn run(
        mut self,
        first: (Reader, Writer, Option<tokio::process::Child>),
        mut calls: mpsc::Receiver<Call>,
    ) {
        let (chunks_tx, mut chunks) = mpsc::channel::<Chunk>(64);
        self.attach(first, &chunks_tx);
        let mut reconnect_delay_ms = RECONNECT_MIN_MS;
        let mut reconnect_at: Option<tokio::time::Instant> = None;
        loop {
            self.pump().await;
            if self.link.is_none() && reconnect_at.is_none() {
                reconnect_at =
                    Some(tokio::time::Instant::now() + Duration::from_millis(reconnect_delay_ms));
                reconnect_delay_ms = (reconnect_delay_ms * 2).min(RECONNECT_MAX_MS);
            }
            let deadline = self.core.poll_timeout().map(|t| {
                tokio::time::Instant::now() + Duration::from_millis(t.saturating_sub(now_ms()))
            });
            tokio::select! {
                c = calls.recv() => match c {
                    Some(call) => self.on_call(call),
                    None => break,
                },
                Some((seq, chunk)) = chunks.recv() => {
                    if seq != self.link_seq || self.link.is_none() {
                        continue;
                    }
                    match chunk {
                        Some(bytes) => {
                            reconnect_delay_ms = RECONNECT_MIN_MS;
                            self.core.handle_bytes(now_ms(), &bytes)
                        }
                        None => {
                            self.link = None;
                            self.core.handle_disconnected(now_ms());
                        }
                    }
                }
                _ = sleep_until(deadline) => self.core.handle_timeout(now_ms()),
                _ = sleep_until(reconnect_at) => {
                    reconnect_at = None;
                    if let Ok(l) = open(&self.transport).await {
                        self.attach(l, &chunks_tx);
                    }
                }
            }
        }
        if let Some(link) = self.link.take() {
            link.shutdown().await;
        }
    }

    fn attach(
        &mut self,
        (mut reader, writer, child): (Reader, Writer, Option<tokio::process::Child>),
        chunks: &mpsc::Sender<Chunk>,
    ) {
        self.link_seq += 1;
        let seq = self.link_seq;
        let tx = chunks.clone();
        let reader_task = tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match reader.read(&mut buf).await {
                    Ok(0) | Err(_) => {
                        let _ = tx.send((seq, None)).await;
                        return;
                    }
                    Ok(n) => {
                        if tx.send((seq, Some(buf[..n].to_vec()))).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        self.link = Some(Link {
            writer,
            child,
            reader_task,
        });
        self.core.handle_connected(now_ms());
    }

    /// Carries out the core's outputs and hands events, then completions,
    /// to their receivers: an application that sees an outcome has been
    /// sent every event that came before it (a `SessionLost` before the
    /// `HostLost` it explains).
    async fn pump(&mut self) {
        while let Some(o) = self.core.poll_output() {
            match o {
                Output::Send(bytes) => {
                    let ok = match self.link.as_mut() {
                        Some(l) => {
                            l.writer.write_all(&bytes).await.is_ok()
                                && l.writer.flush().await.is_ok()
                        }
                        None => false,
                    };
                    if !ok && self.link.is_some() {
                        self.link = None;
                        self.core.handle_disconnected(now_ms());
                    }
                }
                Output::CloseLink => self.link = None,
            }
        }
        while let Some(e) = self.core.poll_event() {
            if let ClientEvent::View(v) = &e {
                if let Notification::TurnEnded {
                    session_id,
                    turn_id,
                    end,
                } = &v.notification
                {
                    let key = (session_id.clone(), turn_id.clone());
                    for w in self.turn_waits.remove(&key).unwrap_or_default() {
                        let _ = w.send(end.clone());
                    }
                }
            }
            let _ = self.events.send(e);
        }
        while let Some(c) = self.core.poll_completion() {
            match c {
                Completion::Command {
                    handle,
                    command_id,
                    outcome,
                } => {
                    for w in self.waiting.remove(&handle).unwrap_or_default() {
                        let _ = w.send(Ok(Submitted {
                            command_id: command_id.clone(),
                            outcome: outcome.clone(),
                        }));
                    }
                }
                Completion::Read { handle, result } => {
                    if let Some(w) = self.reads.remove(&handle) {
                        let _ = w.send(Ok(result));
                    }
                }
            }
        }
    }

    fn on_call(&mut self, call: Call) {
        let now = now_ms();
        match call {
            Call::Submit(spec, reply) => match self.core.submit(now, &spec) {
                Ok((h, _)) => self.waiting.entry(h).or_default().push(reply),
                Err(e) => {
                    let _ = reply.send(Err(ClientError::Submit(e)));
                }
            },
            Call::SubmitWithId(id, wire, reply) => match self.core.submit_with_id(now, id, wire) {
                Ok(h) => self.waiting.entry(h).or_default().push(reply),
                Err(e) => {
                    let _ = reply.send(Err(ClientError::Submit(e)));
                }
            },
            Call::Unchecked(id, method, params, reply) => {
                match self
                    .core
                    .submit_unchecked_for_tests(now, id, &method, params)
                {
                    Ok(h) => self.waiting.entry(h).or_default().push(reply),
                    Err(e) => {
                        let _ = reply.send(Err(ClientError::Submit(e)));
                    }
                }
            }
            Call::Prepare(spec, reply) => {
                let wire = self.core.anchor(&spec).to_wire();
                let id = self.core.mint_command_id(now);
                let _ = reply.send((id, wire));
            }
            Call::Read(spec, reply) => match self.core.read(now, spec) {
                Ok(h) => {
                    self.reads.insert(h, reply);
                }
                Err(e) => {
                    let _ = reply.send(Err(ClientError::Submit(e)));
                }
            },
            Call::WaitTurn(sid, turn, reply) => {
                if let Some(end) = self.core.turn_end(&sid, &turn) {
                    let _ = reply.send(end.clone());
                    return;
                }
                self.core.follow(now, sid.clone(), None);
                self.turn_waits.entry((sid, turn)).or_default().push(reply);
            }
            Call::Follow(sid) => self.core.follow(now, sid, None),
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
