//! [`ClientCore`]: the sans-IO MSP client. It owns every decision a client
//! makes (when to send, re-send, reconnect, resume, give up) and does no IO.
//!
//! # Call order (quinn-proto style)
//!
//! The driver owns one link (stdio, TCP, Unix socket, or a simulated one)
//! at a time and the clock. Every input carries `now_ms`:
//!
//! 1. When a link opens: [`ClientCore::handle_connected`]. When it closes
//!    (either side): [`ClientCore::handle_disconnected`].
//! 2. Bytes read from the link: [`ClientCore::handle_bytes`].
//! 3. When [`ClientCore::poll_timeout`]'s deadline passes:
//!    [`ClientCore::handle_timeout`].
//! 4. Application calls: [`ClientCore::submit`],
//!    [`ClientCore::submit_with_id`], [`ClientCore::read`],
//!    [`ClientCore::forget`].
//! 5. After any of these, drain [`ClientCore::poll_output`] (bytes to
//!    write; [`Output::CloseLink`] asks the driver to drop the link and
//!    open a new one), [`ClientCore::poll_completion`] (terminal outcomes)
//!    and [`ClientCore::poll_event`] (typed notifications and link events).
//!    An observer that also needs the raw notifications (the simulator's
//!    workload) turns on [`ClientCore::set_inbound_tap`] and drains
//!    [`ClientCore::poll_inbound`] rather than parsing the lines again.
//!
//! Randomness (command ids, retry jitter) comes from the injected
//! [`Entropy`]; time only from the `now_ms` arguments. Every map the core
//! iterates is a `BTreeMap`, so the same inputs give the same outputs.
//!
//! # What the core guarantees
//!
//! - **One id per logical command.** [`ClientCore::submit`] mints a UUIDv7
//!   once; every re-send after a timeout, a reconnect or a retryable error
//!   carries the same id and the same payload.
//! - **Rejections are terminal**, unknown reasons included; `abandoned` is
//!   reported when the host reports it and never invented.
//! - **Sessions heal.** Commands for a session are sent on a link only after
//!   that session is loaded and subscribed there; after a reconnect, or a
//!   `sessionNotLoaded`, the core resumes it (a fresh `session/resume`
//!   with the last durable cursor it saw) and then replays the pending
//!   commands with their ids.
//! - **Ephemeral hosts.** A session last loaded on an ephemeral host is
//!   resumed on a new link before any of its commands is replayed: if the
//!   host answers `sessionNotFound`, that host died, the session is lost,
//!   and its pending commands end [`ErrorKind::HostLost`] instead of being
//!   replayed at another host. A `session/start` or `session/resume` whose
//!   ephemeral link closed unanswered ends the same way.
//! - **Explicit targets.** A `turn/interrupt` or `turn/cancel` submitted
//!   without a turn id names the turn the core knows is running, so a
//!   replay after a host restart stays anchored.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{json, Map, Value};

use super::events::{ClientEvent, Durability, Notification, TurnEnd, ViewEvent};
use super::frame;
use super::ids::{CommandId, CommandIdMinter, Entropy, SessionId, TurnId};
use super::outcome::{classify_error, Ack, CommandOutcome, ErrorInfo, ErrorKind};
use super::wire::{self, CommandSpec, ReadSpec, ServerFrame, WireCommand};
use crate::proto::framing::{Line, LineSplitter, DEFAULT_FRAME_LIMIT_BYTES};
use crate::proto::RpcError;

/// Tunables of the client core. Times are milliseconds of the injected
/// clock.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `clientInfo.name` (`[a-z0-9_]+`).
    pub client_name: String,
    /// `clientInfo.version`.
    pub client_version: String,
    /// An unanswered request is sent again (same command id) after this.
    pub request_timeout_ms: u64,
    /// This many request timeouts in a row on one link: the link is taken
    /// for dead and replaced.
    pub timeouts_before_reconnect: u32,
    /// An unanswered handshake after this long drops the link.
    pub handshake_timeout_ms: u64,
    /// The first retry delay after a retryable error; it doubles per
    /// attempt up to `retry_backoff_max_ms`, with random jitter.
    pub retry_backoff_min_ms: u64,
    /// The largest retry delay.
    pub retry_backoff_max_ms: u64,
    /// How many `sessionInUse` answers in a row a session load tolerates
    /// before its commands end with that error (another process holds the
    /// session and does not let go).
    pub in_use_attempts_max: u32,
    /// Every third `sessionInUse` in a row also replaces the link (the
    /// session may be reachable at another host).
    pub in_use_attempts_per_link: u32,
    /// Most commands and reads outstanding at once.
    pub pending_max: usize,
    /// Longest line accepted from the host.
    pub frame_limit_bytes: usize,
    /// **A planted bug, for the simulator's `client-new-id-on-retry`.**
    /// Every re-send of an application command mints a new command id, so
    /// a retry after a lost answer is a second command. Never set it.
    #[doc(hidden)]
    pub planted_bug_new_id_on_retry: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            client_name: "msp_sdk".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            request_timeout_ms: 10_000,
            timeouts_before_reconnect: 2,
            handshake_timeout_ms: 10_000,
            retry_backoff_min_ms: 100,
            retry_backoff_max_ms: 5_000,
            in_use_attempts_max: 30,
            in_use_attempts_per_link: 3,
            pending_max: 1_024,
            frame_limit_bytes: DEFAULT_FRAME_LIMIT_BYTES,
            planted_bug_new_id_on_retry: false,
        }
    }
}

/// Names one submitted command until its [`Completion`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommandHandle(u64);

/// Names one read until its [`Completion`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReadHandle(u64);

/// What the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Write these bytes (one or more whole lines) to the current link.
    Send(Vec<u8>),
    /// Drop the current link and open a new one (it looks dead, or the
    /// handshake must be redone). The core already treats it as closed.
    CloseLink,
}

/// A terminal answer for the application.
#[derive(Debug, Clone, PartialEq)]
pub enum Completion {
    /// A command's outcome.
    Command {
        /// The handle [`ClientCore::submit`] returned.
        handle: CommandHandle,
        /// The command's id.
        command_id: CommandId,
        /// The outcome.
        outcome: CommandOutcome,
    },
    /// A read's result.
    Read {
        /// The handle [`ClientCore::read`] returned.
        handle: ReadHandle,
        /// `result`, or the error.
        result: Result<Value, ErrorInfo>,
    },
}

/// Why a submission was refused before anything was sent.
#[derive(Debug, Clone, PartialEq)]
pub enum SubmitError {
    /// The command's params break the host's params rules.
    Invalid(RpcError),
    /// This command id is outstanding here with another payload: re-using
    /// an id for another command is a bug (the host would answer
    /// `command_id_conflict`).
    PayloadMismatch(CommandId),
    /// Too many commands and reads outstanding ([`ClientConfig::pending_max`]).
    TooManyPending,
}

impl std::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubmitError::Invalid(e) => write!(f, "invalid command: {e}"),
            SubmitError::PayloadMismatch(id) => {
                write!(f, "command id {id} is outstanding with another payload")
            }
            SubmitError::TooManyPending => f.write_str("too many outstanding requests"),
        }
    }
}

impl std::error::Error for SubmitError {}

/// A notification or request from the host, as the core parsed it from the
/// link: what [`ClientCore::poll_inbound`] hands to an observer that asked
/// for them with [`ClientCore::set_inbound_tap`].
///
/// It exists so a caller that must see the raw frames too, server request
/// ids included, does not parse every line a second time: the core parses
/// each line anyway, and hands a copy of the parsed frame over once it is
/// done with it. (The [`ClientEvent::View`] event of the same frame holds
/// its method and params too; a caller that needs no more than those reads
/// them there and leaves the tap off, saving the copy.)
#[derive(Debug, Clone, PartialEq)]
pub struct InboundNotification {
    /// The host's request id when the host sent it as a request (the core
    /// already queued the receipt); `None` for a notification.
    pub id: Option<Value>,
    /// The method.
    pub method: String,
    /// The params as received (`Null` when the frame had none).
    pub params: Value,
}

/// Who a command is for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Purpose {
    /// The application's.
    App,
    /// The core's own reload of a session on the current link.
    Reload(SessionId),
}

#[derive(Debug, Clone)]
struct Cmd {
    id: CommandId,
    wire: WireCommand,
    session: Option<SessionId>,
    purpose: Purpose,
    /// Sends so far (any link).
    sent_count: u32,
    /// When it was last sent on the current link (`None`: not in flight).
    sent_at_ms: Option<u64>,
    /// Not before this (a backoff after a retryable error).
    retry_at_ms: u64,
    /// Retryable answers in a row (for the backoff).
    attempts: u32,
    /// Sent at least once on a link to an ephemeral host.
    sent_ephemeral: bool,
}

#[derive(Debug, Clone)]
struct ReadReq {
    spec: ReadSpec,
    sent_at_ms: Option<u64>,
    /// Not before this (a backoff after a retryable error).
    retry_at_ms: u64,
    /// Retryable answers in a row.
    attempts: u32,
    /// The caller does not want the result
    /// ([`ClientCore::read_without_result`]): it is checked, not built.
    result_unwanted: bool,
}

/// What the core knows of one session it follows.
#[derive(Debug, Clone, Default)]
struct Sess {
    /// The last durable cursor received (where a resume continues).
    last_cursor: Option<String>,
    /// Loaded and subscribed on the current link.
    loaded: bool,
    /// The core's own reload in flight, if any.
    reload: Option<u64>,
    /// Durability of the host it was last loaded on.
    durability: Option<Durability>,
    /// `sessionInUse` answers in a row.
    in_use_count: u32,
    /// The turn the view says is running.
    running_turn: Option<TurnId>,
    /// How turns ended, as seen on the view (bounded).
    ended: BTreeMap<TurnId, TurnEnd>,
    /// The revision the view last showed (`state/updated`).
    revision: Option<u64>,
}

/// Turn ends remembered per session.
const ENDED_TURNS_MAX: usize = 4_096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InFlight {
    Init,
    Cmd(u64),
    Read(u64),
}

#[derive(Debug)]
struct Link {
    ready: bool,
    durability: Durability,
    opened_ms: u64,
    splitter: LineSplitter,
    next_rpc: u64,
    inflight: BTreeMap<u64, InFlight>,
    timeouts_in_row: u32,
}

/// The sans-IO MSP client. See the module docs for the call order.
pub struct ClientCore {
    cfg: ClientConfig,
    entropy: Box<dyn Entropy + Send>,
    minter: CommandIdMinter,
    link: Option<Link>,
    next_handle: u64,
    cmds: BTreeMap<u64, Cmd>,
    by_id: BTreeMap<CommandId, u64>,
    reads: BTreeMap<u64, ReadReq>,
    sessions: BTreeMap<SessionId, Sess>,
    lost: BTreeSet<SessionId>,
    outputs: VecDeque<Output>,
    completions: VecDeque<Completion>,
    events: VecDeque<ClientEvent>,
    /// The inbound tap: `None` when off (the default).
    inbound: Option<VecDeque<InboundNotification>>,
}

impl std::fmt::Debug for ClientCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCore")
            .field("link", &self.link.as_ref().map(|l| l.ready))
            .field("commands", &self.cmds.len())
            .field("reads", &self.reads.len())
            .field("sessions", &self.sessions.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ClientCore {
    /// Every part of the core's state but its configuration and its
    /// entropy source, as text. A model checker hashes it to recognise a
    /// client state it has already explored: two cores built with one
    /// configuration, whose entropy sources are equally advanced and whose
    /// dumps are equal, answer every later input alike. (`Debug` shows a
    /// short summary instead.)
    pub fn state_dump(&self) -> String {
        format!(
            "{:?} {:?} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
            self.minter,
            self.link,
            self.next_handle,
            self.cmds,
            self.by_id,
            self.reads,
            self.sessions,
            self.lost,
            self.outputs,
            self.completions,
            self.events
        )
    }

    /// A client with no link yet. `entropy` supplies every random bit the
    /// client uses.
    pub fn new(cfg: ClientConfig, entropy: Box<dyn Entropy + Send>) -> ClientCore {
        ClientCore {
            cfg,
            entropy,
            minter: CommandIdMinter::new(),
            link: None,
            next_handle: 1,
            cmds: BTreeMap::new(),
            by_id: BTreeMap::new(),
            reads: BTreeMap::new(),
            sessions: BTreeMap::new(),
            lost: BTreeSet::new(),
            outputs: VecDeque::new(),
            completions: VecDeque::new(),
            events: VecDeque::new(),
            inbound: None,
        }
    }

    // ----- inputs: the link -------------------------------------------------

    /// A new link is open: the handshake starts. A link still open in the
    /// core's view is closed first.
    pub fn handle_connected(&mut self, now_ms: u64) {
        if self.link.is_some() {
            self.close_link(false);
        }
        let mut link = Link {
            ready: false,
            durability: Durability::Durable,
            opened_ms: now_ms,
            splitter: LineSplitter::new(self.cfg.frame_limit_bytes),
            next_rpc: 1,
            inflight: BTreeMap::new(),
            timeouts_in_row: 0,
        };
        let rpc = link.next_rpc;
        link.next_rpc += 1;
        link.inflight.insert(rpc, InFlight::Init);
        let mut p = Map::new();
        p.insert(
            "clientInfo".into(),
            json!({"name": self.cfg.client_name, "version": self.cfg.client_version}),
        );
        self.outputs
            .push_back(Output::Send(wire::request_line(rpc, "initialize", &p)));
        self.link = Some(link);
    }

    /// The link closed (the peer, the network, or the driver after
    /// [`Output::CloseLink`]). Idempotent.
    pub fn handle_disconnected(&mut self, _now_ms: u64) {
        if self.link.is_some() {
            self.close_link(false);
        }
    }

    /// Bytes from the link.
    pub fn handle_bytes(&mut self, now_ms: u64, bytes: &[u8]) {
        let mut lines = Vec::new();
        match self.link.as_mut() {
            Some(l) => l.splitter.feed(bytes, &mut lines),
            None => return,
        }
        for line in lines {
            if self.link.is_none() {
                return;
            }
            match line {
                Line::Frame(f) => self.on_line(now_ms, &f),
                Line::TooLarge => self.events.push_back(ClientEvent::BadFrame {
                    detail: format!("a line over {} bytes", self.cfg.frame_limit_bytes),
                }),
            }
        }
        self.send_due(now_ms);
    }

    /// Time passed: re-sends what timed out or whose backoff ended.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        let Some(link) = self.link.as_ref() else {
            return;
        };
        if !link.ready {
            if now_ms >= link.opened_ms + self.cfg.handshake_timeout_ms {
                self.close_link(true);
            }
            return;
        }
        let timeout = self.cfg.request_timeout_ms;
        let mut timed_out = false;
        for c in self.cmds.values_mut() {
            if c.sent_at_ms.is_some_and(|t| now_ms >= t + timeout) {
                c.sent_at_ms = None;
                timed_out = true;
            }
        }
        for r in self.reads.values_mut() {
            if r.sent_at_ms.is_some_and(|t| now_ms >= t + timeout) {
                r.sent_at_ms = None;
                timed_out = true;
            }
        }
        if timed_out {
            let link = self.link.as_mut().expect("checked above");
            link.timeouts_in_row += 1;
            if link.timeouts_in_row >= self.cfg.timeouts_before_reconnect {
                self.close_link(true);
                return;
            }
        }
        self.send_due(now_ms);
    }

    // ----- inputs: the application -----------------------------------------

    /// Submits a new logical command: mints its id (once) and sends it when
    /// its session is loaded on a link.
    pub fn submit(
        &mut self,
        now_ms: u64,
        spec: &CommandSpec,
    ) -> Result<(CommandHandle, CommandId), SubmitError> {
        let spec = self.anchor(spec);
        let id = self.minter.mint(now_ms, self.entropy.as_mut());
        let h = self.submit_with_id(now_ms, id.clone(), spec.to_wire())?;
        Ok((h, id))
    }

    /// Mints a command id without submitting anything (the request gate
    /// persists it first, then submits it with
    /// [`ClientCore::submit_with_id`]).
    pub fn mint_command_id(&mut self, now_ms: u64) -> CommandId {
        self.minter.mint(now_ms, self.entropy.as_mut())
    }

    /// Fills in what [`CommandSpec`] leaves to the SDK: the running turn of
    /// an id-less interrupt or cancel.
    pub fn anchor(&self, spec: &CommandSpec) -> CommandSpec {
        match spec {
            CommandSpec::TurnInterrupt {
                session_id,
                turn_id: None,
            }
            | CommandSpec::TurnCancel {
                session_id,
                turn_id: None,
            } => {
                let running = self
                    .sessions
                    .get(session_id)
                    .and_then(|s| s.running_turn.clone());
                let mut s = spec.clone();
                if let CommandSpec::TurnInterrupt { turn_id, .. }
                | CommandSpec::TurnCancel { turn_id, .. } = &mut s
                {
                    *turn_id = running;
                }
                s
            }
            _ => spec.clone(),
        }
    }

    /// Submits a command under an id minted earlier: the request gate's
    /// path, and a restarted application's (the same id and the same
    /// payload as before, so the host answers what it answered then). If
    /// the id is already outstanding here with the same payload, its
    /// handle is returned and nothing new is sent.
    pub fn submit_with_id(
        &mut self,
        now_ms: u64,
        id: CommandId,
        command: WireCommand,
    ) -> Result<CommandHandle, SubmitError> {
        let command =
            WireCommand::parse(&command.method, command.params).map_err(SubmitError::Invalid)?;
        if let Some(h) = self.by_id.get(&id) {
            let c = &self.cmds[h];
            if c.wire.signature() == command.signature() {
                return Ok(CommandHandle(*h));
            }
            return Err(SubmitError::PayloadMismatch(id));
        }
        self.track(now_ms, id, command, Purpose::App)
    }

    /// **Not for applications.** Sends `method` with `params` under `id`
    /// with no checks at all: no params validation and no guard against
    /// re-using an id with another payload. It exists for test workloads
    /// that must provoke the host's own defences (a deliberate
    /// `command_id_conflict`). The command is tracked and retried like any
    /// other and completes with the host's answer.
    pub fn submit_unchecked_for_tests(
        &mut self,
        now_ms: u64,
        id: CommandId,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<CommandHandle, SubmitError> {
        let wire = WireCommand {
            method: method.to_string(),
            params,
        };
        let h = self.alloc_pending()?;
        self.insert_cmd(now_ms, h, id, wire, Purpose::App);
        Ok(CommandHandle(h))
    }

    /// **Not for applications.** Writes `line` (one frame, `\n` added if
    /// missing) on the current link as is, untracked: an answer to it is
    /// ignored. For test workloads that must send what no SDK call would
    /// (a malformed frame, a frame with a foreign request id). Returns
    /// false when no link is ready.
    pub fn send_raw_line_for_tests(&mut self, mut line: Vec<u8>) -> bool {
        if !self.is_ready() {
            return false;
        }
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        self.outputs.push_back(Output::Send(line));
        true
    }

    /// Sends a read; it is re-sent after a reconnect until answered.
    pub fn read(&mut self, now_ms: u64, spec: ReadSpec) -> Result<ReadHandle, SubmitError> {
        self.read_with(now_ms, spec, false)
    }

    /// Sends a read whose result the caller will not look at: an observer
    /// that only drives traffic (the simulator's, whose model judges the
    /// host's answers on the wire). It is sent, re-sent and retried exactly
    /// as [`ClientCore::read`], and its errors come back the same; but a
    /// `result` is only checked to be JSON, never built, and its
    /// [`Completion::Read`] carries `Ok(Value::Null)`. A large result (a
    /// `session/read` snapshot) then costs a scan instead of a tree.
    pub fn read_without_result(
        &mut self,
        now_ms: u64,
        spec: ReadSpec,
    ) -> Result<ReadHandle, SubmitError> {
        self.read_with(now_ms, spec, true)
    }

    fn read_with(
        &mut self,
        now_ms: u64,
        spec: ReadSpec,
        result_unwanted: bool,
    ) -> Result<ReadHandle, SubmitError> {
        let h = self.alloc_pending()?;
        self.reads.insert(
            h,
            ReadReq {
                spec,
                sent_at_ms: None,
                retry_at_ms: 0,
                attempts: 0,
                result_unwanted,
            },
        );
        self.send_due(now_ms);
        Ok(ReadHandle(h))
    }

    /// Stops waiting for a command: it completes now with
    /// [`ErrorKind::Forgotten`] (its outcome unknown) and is never re-sent
    /// by this core. Re-submitting its id later is safe.
    pub fn forget(&mut self, handle: CommandHandle) {
        if let Some(c) = self.cmds.get(&handle.0) {
            let ever_sent = c.sent_count > 0;
            self.finish(
                handle.0,
                client_error(
                    ErrorKind::Forgotten,
                    if ever_sent {
                        "the application stopped waiting; the command may have taken effect"
                    } else {
                        "the application stopped waiting; the command was never sent"
                    },
                ),
            );
        }
    }

    // ----- outputs ----------------------------------------------------------

    /// The next thing the driver must do.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The next terminal answer.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// Turns the inbound tap on or off (it is off in a new core). While it
    /// is on, every notification and request the core parses from the
    /// link (in [`ClientCore::handle_bytes`], after the core has acted on
    /// it) is also queued, in arrival order, for
    /// [`ClientCore::poll_inbound`]. The [`ClientEvent::View`] event takes
    /// the parsed frame and the tap a copy of it, so the tap costs a copy
    /// and a queue push per frame when on and one branch per frame when
    /// off.
    ///
    /// Only notifications and requests: a response's payload already
    /// reaches the caller as a [`Completion`] or a [`ClientEvent`], and
    /// copying it would cost a clone. Lines that are not frames (not JSON,
    /// over the frame limit) are reported as [`ClientEvent::BadFrame`], not
    /// here. Turning the tap off drops what it held. The tap is not part
    /// of [`ClientCore::state_dump`]: it changes nothing the core does.
    pub fn set_inbound_tap(&mut self, on: bool) {
        match (on, self.inbound.is_some()) {
            (true, false) => self.inbound = Some(VecDeque::new()),
            (false, true) => self.inbound = None,
            _ => {}
        }
    }

    /// The next notification or request the inbound tap holds (always
    /// `None` when the tap is off). See [`ClientCore::set_inbound_tap`].
    pub fn poll_inbound(&mut self) -> Option<InboundNotification> {
        self.inbound.as_mut()?.pop_front()
    }

    /// When [`ClientCore::handle_timeout`] is due next, if ever.
    pub fn poll_timeout(&self) -> Option<u64> {
        let link = self.link.as_ref()?;
        if !link.ready {
            return Some(link.opened_ms + self.cfg.handshake_timeout_ms);
        }
        let t = self.cfg.request_timeout_ms;
        let cmd = self.cmds.values().filter_map(|c| match c.sent_at_ms {
            Some(s) => Some(s + t),
            None if self.sendable(c) => Some(c.retry_at_ms),
            None => None,
        });
        let reads = self.reads.values().map(|r| match r.sent_at_ms {
            Some(s) => s + t,
            None => r.retry_at_ms,
        });
        cmd.chain(reads).min()
    }

    // ----- queries ----------------------------------------------------------

    /// Whether a link is open and its handshake done.
    pub fn is_ready(&self) -> bool {
        self.link.as_ref().is_some_and(|l| l.ready)
    }

    /// The current link's durability, once its handshake is done.
    pub fn durability(&self) -> Option<Durability> {
        self.link.as_ref().filter(|l| l.ready).map(|l| l.durability)
    }

    /// How `turn` of `session` ended, if the view showed it to this client.
    pub fn turn_end(&self, session: &SessionId, turn: &TurnId) -> Option<&TurnEnd> {
        self.sessions.get(session)?.ended.get(turn)
    }

    /// The last durable cursor seen for `session`.
    pub fn last_cursor(&self, session: &SessionId) -> Option<&str> {
        self.sessions.get(session)?.last_cursor.as_deref()
    }

    /// The revision the view of `session` last showed (`state/updated`).
    pub fn last_revision(&self, session: &SessionId) -> Option<u64> {
        self.sessions.get(session)?.revision
    }

    /// Commands and reads outstanding.
    pub fn pending_count(&self) -> usize {
        self.cmds.len() + self.reads.len()
    }

    /// Follows `session` from `cursor` without a command of the
    /// application: on the next link (or now) the core resumes it and
    /// streams its events. A restarted application uses it to see the end
    /// of a turn it submitted before.
    pub fn follow(&mut self, now_ms: u64, session: SessionId, cursor: Option<String>) {
        let s = self.sessions.entry(session).or_default();
        if s.last_cursor.is_none() {
            s.last_cursor = cursor;
        }
        self.send_due(now_ms);
    }

    /// Stops following `session`: it is not reloaded on later links and its
    /// events are no longer tracked (they still arrive while the host keeps
    /// this link subscribed).
    pub fn unfollow(&mut self, session: &SessionId) {
        self.sessions.remove(session);
    }

    // ----- internals --------------------------------------------------------

    fn alloc_pending(&mut self) -> Result<u64, SubmitError> {
        if self.pending_count() >= self.cfg.pending_max {
            return Err(SubmitError::TooManyPending);
        }
        let h = self.next_handle;
        self.next_handle += 1;
        Ok(h)
    }

    fn track(
        &mut self,
        now_ms: u64,
        id: CommandId,
        wire: WireCommand,
        purpose: Purpose,
    ) -> Result<CommandHandle, SubmitError> {
        let h = self.alloc_pending()?;
        if let Some(sid) = wire.session_id() {
            if self.lost.contains(&sid) && purpose == Purpose::App {
                self.by_id.insert(id.clone(), h);
                self.cmds.insert(h, new_cmd(id, wire, purpose));
                self.finish(
                    h,
                    client_error(
                        ErrorKind::SessionNotFound,
                        "the session is lost (its host no longer has it)",
                    ),
                );
                return Ok(CommandHandle(h));
            }
        }
        self.insert_cmd(now_ms, h, id, wire, purpose);
        Ok(CommandHandle(h))
    }

    fn insert_cmd(&mut self, now_ms: u64, h: u64, id: CommandId, wire: WireCommand, p: Purpose) {
        if let Some(sid) = wire.session_id() {
            if wire.method != "session/start" && wire.method != "session/resume" {
                self.sessions.entry(sid).or_default();
            }
        }
        self.by_id.entry(id.clone()).or_insert(h);
        self.cmds.insert(h, new_cmd(id, wire, p));
        self.send_due(now_ms);
    }

    /// Whether command `h` may go out on the current link now.
    fn sendable(&self, c: &Cmd) -> bool {
        match (&c.purpose, c.wire.method.as_str(), &c.session) {
            (Purpose::Reload(_), _, _) => true,
            (_, "session/start" | "session/resume", _) => true,
            (_, _, None) => true,
            (_, _, Some(sid)) => self.sessions.get(sid).is_some_and(|s| s.loaded),
        }
    }

    /// Sends every command and read that is due, and starts reloads of
    /// sessions that need one on this link.
    fn send_due(&mut self, now_ms: u64) {
        if !self.is_ready() {
            return;
        }
        self.start_reloads(now_ms);
        let due: Vec<u64> = self
            .cmds
            .iter()
            .filter(|(_, c)| c.sent_at_ms.is_none() && c.retry_at_ms <= now_ms && self.sendable(c))
            .map(|(h, _)| *h)
            .collect();
        for h in due {
            self.send_cmd(now_ms, h);
        }
        let reads: Vec<u64> = self
            .reads
            .iter()
            .filter(|(_, r)| r.sent_at_ms.is_none() && r.retry_at_ms <= now_ms)
            .map(|(h, _)| *h)
            .collect();
        for h in reads {
            let (method, params) = self.reads[&h].spec.to_wire();
            let rpc = self.next_rpc(InFlight::Read(h));
            self.outputs
                .push_back(Output::Send(wire::request_line(rpc, method, &params)));
            self.reads.get_mut(&h).expect("present").sent_at_ms = Some(now_ms);
        }
    }

    fn next_rpc(&mut self, what: InFlight) -> u64 {
        let link = self.link.as_mut().expect("a ready link");
        let rpc = link.next_rpc;
        link.next_rpc += 1;
        link.inflight.insert(rpc, what);
        rpc
    }

    fn send_cmd(&mut self, now_ms: u64, h: u64) {
        let durability = self.link.as_ref().expect("ready").durability;
        let rpc = self.next_rpc(InFlight::Cmd(h));
        if self.cfg.planted_bug_new_id_on_retry
            && self.cmds[&h].sent_count > 0
            && self.cmds[&h].purpose == Purpose::App
        {
            let fresh = self.minter.mint(now_ms, self.entropy.as_mut());
            let c = self.cmds.get_mut(&h).expect("present");
            let old = std::mem::replace(&mut c.id, fresh.clone());
            self.by_id.remove(&old);
            self.by_id.insert(fresh, h);
        }
        let c = self.cmds.get_mut(&h).expect("present");
        c.sent_count += 1;
        c.sent_at_ms = Some(now_ms);
        c.sent_ephemeral |= durability == Durability::Ephemeral;
        let line = wire::command_line(rpc, &c.wire.method, &c.wire.params, &c.id);
        self.outputs.push_back(Output::Send(line));
    }

    /// Every followed session not loaded on this link, with no reload in
    /// flight, gets a fresh `session/resume` (a new logical command: the
    /// decision to reload it here, now, from this cursor).
    fn start_reloads(&mut self, now_ms: u64) {
        // A session with commands waiting is followed, whatever happened
        // to it before (unfollowed, or given up after `sessionInUse`):
        // otherwise its commands would wait forever.
        let waiting: Vec<SessionId> = self
            .cmds
            .values()
            .filter(|c| c.purpose == Purpose::App && !self.sendable(c))
            .filter_map(|c| c.session.clone())
            .filter(|sid| !self.sessions.contains_key(sid))
            .collect();
        for sid in waiting {
            self.sessions.entry(sid).or_default();
        }
        let need: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(sid, s)| !s.loaded && s.reload.is_none() && !self.app_loading(sid))
            .map(|(sid, _)| sid.clone())
            .collect();
        for sid in need {
            let cursor = self.sessions[&sid].last_cursor.clone();
            let spec = CommandSpec::SessionResume {
                session_id: sid.clone(),
                cursor,
                exclude_items: false,
            };
            let id = self.minter.mint(now_ms, self.entropy.as_mut());
            let h = self.next_handle;
            self.next_handle += 1;
            self.cmds
                .insert(h, new_cmd(id, spec.to_wire(), Purpose::Reload(sid.clone())));
            self.sessions.get_mut(&sid).expect("present").reload = Some(h);
        }
    }

    /// An application `session/start`/`session/resume` for `sid` is
    /// outstanding (it will load the session; no reload needed).
    fn app_loading(&self, sid: &SessionId) -> bool {
        self.cmds.values().any(|c| {
            c.purpose == Purpose::App
                && matches!(c.wire.method.as_str(), "session/start" | "session/resume")
                && c.session.as_ref() == Some(sid)
        })
    }

    fn close_link(&mut self, ask_driver: bool) {
        let Some(link) = self.link.take() else {
            return;
        };
        if ask_driver {
            self.outputs.push_back(Output::CloseLink);
        }
        let was_ready = link.ready;
        let ephemeral = link.durability == Durability::Ephemeral;
        for s in self.sessions.values_mut() {
            s.loaded = false;
        }
        // The core's own reloads are never carried to another link: each
        // link gets a fresh one from the latest cursor.
        let reloads: Vec<u64> = self
            .cmds
            .iter()
            .filter(|(_, c)| matches!(c.purpose, Purpose::Reload(_)))
            .map(|(h, _)| *h)
            .collect();
        for h in reloads {
            self.drop_cmd(h);
        }
        for s in self.sessions.values_mut() {
            s.reload = None;
        }
        // A session/start or session/resume that went to an ephemeral host
        // unanswered may not be replayed at whatever host comes next.
        if ephemeral {
            let unsafe_: Vec<u64> = self
                .cmds
                .iter()
                .filter(|(_, c)| {
                    c.sent_ephemeral
                        && c.purpose == Purpose::App
                        && matches!(c.wire.method.as_str(), "session/start" | "session/resume")
                })
                .map(|(h, _)| *h)
                .collect();
            for h in unsafe_ {
                self.finish(
                    h,
                    client_error(
                        ErrorKind::HostLost { ever_sent: true },
                        "the link to an ephemeral host closed before the answer; the id is not replayed elsewhere",
                    ),
                );
            }
        }
        for c in self.cmds.values_mut() {
            c.sent_at_ms = None;
        }
        for r in self.reads.values_mut() {
            r.sent_at_ms = None;
        }
        if was_ready {
            self.events.push_back(ClientEvent::Disconnected);
        }
    }

    fn drop_cmd(&mut self, h: u64) -> Option<Cmd> {
        let c = self.cmds.remove(&h)?;
        if self.by_id.get(&c.id) == Some(&h) {
            self.by_id.remove(&c.id);
        }
        Some(c)
    }

    fn finish(&mut self, h: u64, outcome: CommandOutcome) {
        let Some(c) = self.drop_cmd(h) else {
            return;
        };
        if let Some(l) = self.link.as_mut() {
            l.inflight.retain(|_, w| *w != InFlight::Cmd(h));
        }
        match c.purpose {
            Purpose::App => self.completions.push_back(Completion::Command {
                handle: CommandHandle(h),
                command_id: c.id,
                outcome,
            }),
            Purpose::Reload(sid) => {
                if let Some(s) = self.sessions.get_mut(&sid) {
                    if s.reload == Some(h) {
                        s.reload = None;
                    }
                }
            }
        }
    }

    /// The delay before retry number `attempts`: doubling from the
    /// configured minimum, capped, the upper half of it random.
    fn backoff_delay_ms(&mut self, attempts: u32) -> u64 {
        let (min, max) = (self.cfg.retry_backoff_min_ms, self.cfg.retry_backoff_max_ms);
        let exp = min.saturating_mul(1 << attempts.min(16)).min(max);
        let jitter = self.entropy.next_u128() as u64 % (exp / 2 + 1);
        exp / 2 + jitter
    }

    fn backoff(&mut self, now_ms: u64, h: u64) {
        let attempts = self.cmds[&h].attempts + 1;
        let delay = self.backoff_delay_ms(attempts);
        let c = self.cmds.get_mut(&h).expect("present");
        c.attempts = attempts;
        c.retry_at_ms = now_ms + delay;
        c.sent_at_ms = None;
    }

    fn on_line(&mut self, now_ms: u64, line: &[u8]) {
        // The member-by-member reader first; the whole-tree reader for
        // whatever it leaves (odd lines, and every refused one: its error
        // texts are that reader's).
        let unwanted = |id: &Value| self.result_unwanted(id);
        let parsed = frame::parse_server_line_fast(line, &unwanted)
            .unwrap_or_else(|| wire::parse_server_line(line));
        match parsed {
            Err(e) => self
                .events
                .push_back(ClientEvent::BadFrame { detail: e.detail }),
            Ok(ServerFrame::Request { id, method, params }) => {
                self.outputs
                    .push_back(Output::Send(wire::receipt_line(&id)));
                self.on_notification(Some(id), method, params);
            }
            Ok(ServerFrame::Notification { method, params }) => {
                self.on_notification(None, method, params);
            }
            Ok(ServerFrame::Response { id, answer }) => self.on_response(now_ms, &id, answer),
        }
    }

    /// Whether a response with this `id` answers a read on this link whose
    /// result is not wanted ([`ClientCore::read_without_result`]).
    fn result_unwanted(&self, id: &Value) -> bool {
        let Some(rpc) = id.as_u64() else {
            return false;
        };
        match self.link.as_ref().and_then(|l| l.inflight.get(&rpc)) {
            Some(InFlight::Read(h)) => self.reads.get(h).is_some_and(|r| r.result_unwanted),
            _ => false,
        }
    }

    /// Acts on a notification (or a server request: `id`), queues it as a
    /// [`ClientEvent::View`], and hands a copy to the inbound tap when it
    /// is on (the event takes the parsed frame itself).
    fn on_notification(&mut self, id: Option<Value>, method: String, params: Value) {
        let tapped = self.inbound.is_some().then(|| InboundNotification {
            id,
            method: method.clone(),
            params: params.clone(),
        });
        let ev = ViewEvent::from_parts(method, params);
        if let Some(sid) = ev.session_id() {
            if let Some(s) = self.sessions.get_mut(&sid) {
                if ev.durable {
                    if let Some(c) = &ev.view_cursor {
                        s.last_cursor = Some(c.clone());
                    }
                }
                match &ev.notification {
                    Notification::TurnStarted { turn_id, .. } => {
                        s.running_turn = Some(turn_id.clone())
                    }
                    Notification::TurnEnded { turn_id, end, .. } => {
                        if s.running_turn.as_ref() == Some(turn_id) {
                            s.running_turn = None;
                        }
                        if s.ended.len() >= ENDED_TURNS_MAX {
                            s.ended.pop_first();
                        }
                        s.ended.insert(turn_id.clone(), end.clone());
                    }
                    Notification::StateUpdated { revision, .. } => {
                        s.revision = Some(s.revision.map_or(*revision, |r| r.max(*revision)))
                    }
                    Notification::SessionClosed { .. } => s.loaded = false,
                    _ => {}
                }
            }
        }
        self.events.push_back(ClientEvent::View(Box::new(ev)));
        if let (Some(q), Some(n)) = (self.inbound.as_mut(), tapped) {
            q.push_back(n);
        }
    }

    fn on_response(&mut self, now_ms: u64, id: &Value, answer: Result<Value, Value>) {
        let Some(rpc) = id.as_u64() else {
            return;
        };
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let Some(what) = link.inflight.remove(&rpc) else {
            return;
        };
        link.timeouts_in_row = 0;
        match what {
            InFlight::Init => self.on_handshake(now_ms, answer),
            InFlight::Read(h) => {
                if let Some(r) = self.reads.get_mut(&h) {
                    r.sent_at_ms = None;
                    self.on_read_answer(now_ms, h, answer)
                }
            }
            InFlight::Cmd(h) => {
                if let Some(c) = self.cmds.get_mut(&h) {
                    c.sent_at_ms = None;
                    self.on_cmd_answer(now_ms, h, answer);
                }
            }
        }
    }

    fn on_handshake(&mut self, _now_ms: u64, answer: Result<Value, Value>) {
        match answer {
            Ok(r) => {
                let durability = match r.get("sessionDurability").and_then(Value::as_str) {
                    Some("ephemeral") => Durability::Ephemeral,
                    _ => Durability::Durable,
                };
                let link = self.link.as_mut().expect("a link");
                link.ready = true;
                link.durability = durability;
                self.outputs
                    .push_back(Output::Send(wire::initialized_line()));
                self.events.push_back(ClientEvent::Connected { durability });
            }
            Err(e) => {
                self.events
                    .push_back(ClientEvent::HandshakeFailed { error: e });
                self.close_link(true)
            }
        }
    }

    fn on_read_answer(&mut self, now_ms: u64, h: u64, answer: Result<Value, Value>) {
        let result = match answer {
            // Whichever reader read the line, an unwanted result is `Null`.
            Ok(_) if self.reads[&h].result_unwanted => Ok(Value::Null),
            Ok(v) => Ok(v),
            Err(e) => {
                let err = classify_error(&e);
                if retry_on_fresh_link(&err) {
                    self.close_link(true);
                    return;
                }
                if is_retryable(&err) {
                    let attempts = self.reads[&h].attempts + 1;
                    let delay = self.backoff_delay_ms(attempts);
                    let r = self.reads.get_mut(&h).expect("present");
                    r.attempts = attempts;
                    r.retry_at_ms = now_ms + delay;
                    return;
                }
                Err(match err {
                    CommandOutcome::Error(info) => info,
                    other => ErrorInfo {
                        kind: ErrorKind::Other("commandRejected".into()),
                        code: -32030,
                        message: "a read was rejected".into(),
                        data: other.answer_value().unwrap_or(Value::Null),
                    },
                })
            }
        };
        if self.reads.remove(&h).is_some() {
            self.completions.push_back(Completion::Read {
                handle: ReadHandle(h),
                result,
            });
        }
    }

    fn on_cmd_answer(&mut self, now_ms: u64, h: u64, answer: Result<Value, Value>) {
        let purpose = self.cmds[&h].purpose.clone();
        let method = self.cmds[&h].wire.method.clone();
        let outcome = match answer {
            Ok(r) => CommandOutcome::Accepted(Ack::from_result(r)),
            Err(e) => classify_error(&e),
        };
        if let CommandOutcome::Accepted(ack) = &outcome {
            match (&purpose, method.as_str()) {
                (Purpose::Reload(sid), _) => self.on_loaded(sid.clone(), ack, true, None),
                (Purpose::App, "session/start" | "session/resume") => {
                    let asked = self.cmds[&h]
                        .wire
                        .params
                        .get("cursor")
                        .and_then(Value::as_str);
                    let asked = asked.map(str::to_string);
                    if let Some(sid) = ack.session_id().cloned() {
                        self.on_loaded(sid, ack, method == "session/resume", asked);
                    }
                }
                _ => {}
            }
            self.finish(h, outcome);
            return;
        }
        if retry_on_fresh_link(&outcome) {
            self.close_link(true);
            return;
        }
        if let CommandOutcome::Error(info) = &outcome {
            let session = self.cmds[&h].session.clone();
            let lifecycle = matches!(purpose, Purpose::Reload(_))
                || matches!(method.as_str(), "session/start" | "session/resume");
            match (&info.kind, session) {
                (ErrorKind::SessionNotLoaded | ErrorKind::SessionInUse, Some(sid))
                    if !lifecycle =>
                {
                    // Not loaded on this host (idle unload, another host
                    // took it): reload here, then re-send with the same id.
                    if let Some(s) = self.sessions.get_mut(&sid) {
                        s.loaded = false;
                    }
                    self.backoff(now_ms, h);
                    return;
                }
                (ErrorKind::SessionInUse, Some(sid)) => {
                    let n = {
                        let s = self.sessions.entry(sid.clone()).or_default();
                        s.in_use_count += 1;
                        s.in_use_count
                    };
                    if n < self.cfg.in_use_attempts_max {
                        self.backoff(now_ms, h);
                        if n % self.cfg.in_use_attempts_per_link.max(1) == 0 {
                            self.close_link(true);
                        }
                        return;
                    }
                    // Another process keeps the session: its commands end
                    // with that error and the core stops following it.
                    if let Some(s) = self.sessions.get_mut(&sid) {
                        s.in_use_count = 0;
                    }
                    self.fail_session(&sid, &outcome, true);
                }
                (ErrorKind::SessionNotFound, _) if matches!(purpose, Purpose::Reload(_)) => {
                    // The host that should hold the session does not: it is
                    // lost (for an ephemeral host, the host died).
                    if let Purpose::Reload(sid) = &purpose {
                        self.lose_session(sid);
                    }
                }
                (ErrorKind::NotFound, Some(sid)) if matches!(purpose, Purpose::Reload(_)) => {
                    // Our cursor is unknown to this host: reload from a
                    // snapshot instead.
                    if let Some(s) = self.sessions.get_mut(&sid) {
                        s.last_cursor = None;
                    }
                    self.finish(h, outcome);
                    self.send_due(now_ms);
                    return;
                }
                _ if is_retryable(&outcome) => {
                    self.backoff(now_ms, h);
                    return;
                }
                _ => {
                    if let Purpose::Reload(sid) = &purpose {
                        self.fail_session(sid, &outcome, true);
                    }
                }
            }
        }
        self.finish(h, outcome);
    }

    fn on_loaded(&mut self, sid: SessionId, ack: &Ack, resumed: bool, asked: Option<String>) {
        let durability = self.link.as_ref().map(|l| l.durability);
        self.lost.remove(&sid);
        let s = self.sessions.entry(sid.clone()).or_default();
        s.loaded = true;
        s.in_use_count = 0;
        s.durability = durability;
        let snapshot = if ack.raw["history"]["mode"] == json!("snapshot") {
            Some(ack.raw["history"]["snapshot"].clone())
        } else {
            None
        };
        let suffix_streams = ack.raw["history"]["mode"] == json!("none");
        if suffix_streams && s.last_cursor.is_none() {
            s.last_cursor = asked;
        }
        if !suffix_streams {
            // A start, or a snapshot: the view continues after the ack's
            // cursor. (With a streaming suffix, the cursor advances as the
            // suffix arrives.)
            if let Some(c) = ack.raw.get("viewCursor").and_then(Value::as_str) {
                s.last_cursor = Some(c.to_string());
            }
        }
        if let Some(snap) = &snapshot {
            let st = &snap["state"];
            s.running_turn = st["activeTurn"]["turnId"]
                .as_str()
                .and_then(|t| TurnId::new(t).ok());
            s.revision = st["revision"].as_u64();
        }
        if resumed {
            self.events.push_back(ClientEvent::Resumed {
                session_id: sid,
                snapshot,
            });
        }
    }

    /// The session is gone at its host: stop following it, and end its
    /// pending commands. A command that went to an ephemeral host ends
    /// `HostLost` (its effect unknown, never replayed elsewhere).
    fn lose_session(&mut self, sid: &SessionId) {
        let ephemeral = self
            .sessions
            .remove(sid)
            .and_then(|s| s.durability)
            .is_some_and(|d| d == Durability::Ephemeral);
        self.lost.insert(sid.clone());
        let pending: Vec<u64> = self
            .cmds
            .iter()
            .filter(|(_, c)| c.session.as_ref() == Some(sid) && c.purpose == Purpose::App)
            .map(|(h, _)| *h)
            .collect();
        for h in pending {
            let c = &self.cmds[&h];
            let outcome = if c.sent_ephemeral {
                client_error(
                    ErrorKind::HostLost { ever_sent: true },
                    "the ephemeral host that held this session is gone; the outcome is unknown",
                )
            } else if ephemeral {
                client_error(
                    ErrorKind::HostLost { ever_sent: false },
                    "the ephemeral host that held this session is gone; the command was never sent",
                )
            } else {
                client_error(
                    ErrorKind::SessionNotFound,
                    "the host does not have this session",
                )
            };
            self.finish(h, outcome);
        }
        self.events.push_back(ClientEvent::SessionLost {
            session_id: sid.clone(),
        });
    }

    /// A reload failed for good: the session's pending commands end with
    /// that error; with `unfollow`, the session is no longer followed.
    fn fail_session(&mut self, sid: &SessionId, err: &CommandOutcome, unfollow: bool) {
        let pending: Vec<u64> = self
            .cmds
            .iter()
            .filter(|(_, c)| c.session.as_ref() == Some(sid) && c.purpose == Purpose::App)
            .map(|(h, _)| *h)
            .collect();
        for h in pending {
            self.finish(h, err.clone());
        }
        if unfollow && self.sessions.remove(sid).is_some() {
            self.events.push_back(ClientEvent::FollowEnded {
                session_id: sid.clone(),
                outcome: err.clone(),
            });
        }
    }
}

fn new_cmd(id: CommandId, wire: WireCommand, purpose: Purpose) -> Cmd {
    let session = wire.session_id();
    Cmd {
        id,
        wire,
        session,
        purpose,
        sent_count: 0,
        sent_at_ms: None,
        retry_at_ms: 0,
        attempts: 0,
        sent_ephemeral: false,
    }
}

fn client_error(kind: ErrorKind, message: &str) -> CommandOutcome {
    CommandOutcome::Error(ErrorInfo {
        kind,
        code: 0,
        message: message.to_string(),
        data: Value::Null,
    })
}

/// `notInitialized`: our `initialized` was lost or overtaken; the handshake
/// is redone on a fresh link and the request re-sent there.
fn retry_on_fresh_link(o: &CommandOutcome) -> bool {
    matches!(o, CommandOutcome::Error(e) if e.kind == ErrorKind::InvalidRequest
        && e.data.get("kind").and_then(Value::as_str) == Some("notInitialized"))
}

fn is_retryable(o: &CommandOutcome) -> bool {
    match o {
        CommandOutcome::Error(e) => ErrorKind::retryable_by_table(e.code, &e.data),
        _ => false,
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
