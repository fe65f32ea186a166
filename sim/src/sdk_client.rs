//! The SDK client (`--client sdk`): the same workloads as
//! [`crate::client`], but every protocol decision is the real SDK's
//! [`ClientCore`]: command-id minting, re-sends with the same id after a
//! timeout, a reconnect or a retryable error, the handshake, the reload
//! (`session/resume` from the last durable cursor) before any replay, the
//! ephemeral-host rule (`sessionNotFound` on the reload ends the session's
//! commands `HostLost`), view following. So every sweep with this client
//! tests the client too, under the same oracles.
//!
//! What stays here is the workload: which command to issue next (every
//! choice through [`World::decide`]), the application's view of its
//! session (turns, tasks, approvals, revision) and the deliberate
//! application faults, each through the core's own entry points so the
//! core still owns every re-send:
//!
//! - a double click: the command's first line goes out a second time under
//!   a foreign request id ([`ClientCore::send_raw_line_for_tests`]);
//! - a deliberate conflict: an answered command's id with one param
//!   changed ([`ClientCore::submit_unchecked_for_tests`]);
//! - a resend: an answered command's id with the same payload spelled
//!   differently ([`ClientCore::submit_with_id`]);
//! - stale `expectedRevision`, commands aimed at gone turns, tasks and
//!   approvals: ordinary submissions;
//! - the observer: [`ClientCore::read`] of other clients' sessions;
//! - a pause until the host unloads the session: `view/unsubscribe` as a
//!   raw line, so the next command meets `sessionNotLoaded` and the core
//!   reloads.
//!
//! Randomness of the core (ids, retry jitter) is a [`SeededEntropy`]
//! seeded by one [`World::bits128`] draw per client; its clock is the
//! simulated time. The liveness oracle reads the same [`Cmd`] records the
//! legacy client keeps: one per application submission, `done` with the
//! host's answer, or `lost` when the core ended it client-side (`HostLost`,
//! a session the core knows is lost) without an answer.
//!
//! Fault model: as [`crate::client`] (the workload's application faults).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use msp::client::wire::{CommandSpec, ReadSpec, WireCommand};
use msp::client::{
    ApprovalId, ClientConfig, ClientCore, ClientEvent, CommandHandle, CommandId, CommandOutcome,
    Completion, Entropy, ReadHandle, SeededEntropy, SessionId, TaskId, TurnId,
};
use msp::proto::params::IfBusy;
use serde_json::{json, Map, Value};

use crate::client::{Action, Client, Cmd, Ctx, Purpose, Role};
use crate::moves::Malformed;

/// How often (per mille of new links) an SDK client breaks the
/// handshake's order by sending `initialized` before `initialize`.
pub const HANDSHAKE_SLIP_PERMILLE: u64 = 30;

/// Per mille of an SDK client's links that open with an `initialize`
/// whose `clientInfo.name` is hyphenated (refused `invalidParams`; the
/// core's own `initialize` follows).
pub const BAD_INITIALIZE_PERMILLE: u64 = 30;

/// What [`SdkClient::sent`] reads of a line the core sent, borrowed from
/// it. A member of another type than the one read fails the parse, as
/// it made the tree's lookup come back empty.
#[derive(serde::Deserialize)]
struct SentLine<'a> {
    #[serde(default, borrow)]
    id: Option<&'a serde_json::value::RawValue>,
    #[serde(default, borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<SentParams<'a>>,
}

/// The member of a sent line's params that [`SentLine`] reads.
#[derive(serde::Deserialize)]
struct SentParams<'a> {
    #[serde(rename = "commandId", default, borrow)]
    command_id: Option<std::borrow::Cow<'a, str>>,
}
use crate::workload::Scenario;
use crate::world::{Decision, World};

/// The core's request timeout (the legacy client's too).
const REQUEST_TIMEOUT_MS: u64 = crate::client::REQUEST_TIMEOUT_MS;
/// The most events an observing `view/page` asks for.
const PAGE_LIMIT: u64 = 24;
/// Up to this many logical commands issued by a session's driver, every
/// whole-view read an observer makes of that session reads it whole.
const FULL_READS_FREE_UP_TO: u64 = 16;
/// Past [`FULL_READS_FREE_UP_TO`], one more skipped whole-view read (read
/// metadata only) per this many commands issued, before each whole one.
const FULL_READS_SKIP_PER: u64 = 8;
/// How often a healing client re-reads pending approvals.
const LIST_PENDING_EVERY_MS: u64 = 2_000;

/// What a read was for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ReadKind {
    /// An observer's `session/read` (the model judges the answer).
    Observe,
    /// `approval/listPending` of our session (healing).
    Pending,
    /// An observer's `view/page` of session `sid` (the model judges the
    /// answer; its `nextCursor` continues the walk, in the same direction).
    Page { sid: String, backward: bool },
}

/// The SDK client's state beside the [`Client`] record it fills.
pub struct SdkClient {
    core: ClientCore,
    now_ms: u64,
    host: usize,
    connected_once: bool,
    handles: BTreeMap<CommandHandle, usize>,
    reads: BTreeMap<ReadHandle, ReadKind>,
    /// Commands whose first line goes out twice (a double click).
    double: BTreeSet<String>,
    raw_serial: u64,
    start: Option<usize>,
    active: Option<usize>,
    burst: Vec<usize>,
    flood: Vec<usize>,
    known: crate::known::Known,
    budget: u32,
    counter: u64,
    /// Fresh commands submitted; with `upper_ids`, every fifth goes out
    /// with its id in uppercase (draws version 8).
    fresh: u64,
    /// [`Ctx::upper_ids`] of the step in progress.
    upper_ids: bool,
    /// [`Ctx::crossing`] of the step in progress.
    crossing: bool,
    /// [`Ctx::twins`] of the step in progress.
    twins: bool,
    /// [`Ctx::prompt_approvals`] of the step in progress.
    prompt_approvals: bool,
    /// The next pick pauses (leaves the session until its host unloads
    /// it idle): drawn behind an approval chased by an interrupt (draws
    /// version 15), whose effect's answer may still be awaited.
    pause_next: bool,
    /// Observing reads sent: of each four, one asks metadata only
    /// (`excludeItems`), one a `view/page`, two the whole view (which
    /// one is the count's, with no draw of its own).
    observed: u64,
    /// Logical commands issued (what [`SdkClient::budget_left`] counts
    /// down), the size of this client's session for observers: a view
    /// grows with the commands applied to it.
    issued: u64,
    /// Per session, the whole-view reads turned into metadata-only reads
    /// since the last whole one (see [`SdkClient::whole_read_due`]).
    thinned: BTreeMap<String, u64>,
    /// An observer pages (`ClientKind::Sdk`); off, its reads are those
    /// of `ClientKind::SdkV1`.
    pages_on: bool,
    /// Per session, where the last page said the next one starts
    /// (`nextCursor`) and its direction: an observer walks a session's
    /// history page by page, as a client would (the model judges each).
    pages: BTreeMap<String, (String, bool)>,
    /// The session an observer is subscribed to by `view/subscribe` on
    /// its current link (see [`SdkClient::subscription`]).
    subscribed: Option<String>,
    idle_until_ms: u64,
    last_list_ms: u64,
    resend_after_reload: bool,
    /// Durable hosts (a lost session is then a liveness failure).
    durable: bool,
    /// The seed of the core's entropy and how many draws it has given:
    /// together, the state of the entropy source, for the state hash.
    entropy_seed: u128,
    draws: Arc<AtomicU64>,
    /// The core's events other than view events, taken out of the core
    /// in [`SdkClient::on_line`] (to reach the view events behind them)
    /// and acted on in [`SdkClient::pump`] first, in the core's order.
    /// Empty between the world's calls, so not part of the state hash.
    held: VecDeque<ClientEvent>,
}

/// The core's entropy source, counting its draws (so the run's state hash
/// can tell how far the source has advanced without reading it).
struct CountedEntropy {
    inner: SeededEntropy,
    draws: Arc<AtomicU64>,
}

impl Entropy for CountedEntropy {
    fn next_u128(&mut self) -> u128 {
        self.draws.fetch_add(1, Ordering::Relaxed);
        self.inner.next_u128()
    }
}

/// What the run's state hash sees of the client (`Sim::state_hash`, for
/// `check`'s pruning): the core's whole state, its entropy source's
/// position and the workload's state. Whatever is left out here is state
/// two runs could differ in and still be pruned as one.
impl std::fmt::Debug for SdkClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SdkClient")
            .field("core", &self.core.state_dump())
            .field(
                "entropy",
                &(self.entropy_seed, self.draws.load(Ordering::Relaxed)),
            )
            .field("now_ms", &self.now_ms)
            .field("host", &self.host)
            .field("connected_once", &self.connected_once)
            .field("handles", &self.handles)
            .field("reads", &self.reads)
            .field("double", &self.double)
            .field("raw_serial", &self.raw_serial)
            .field("start", &self.start)
            .field("active", &self.active)
            .field("burst", &self.burst)
            .field("flood", &self.flood)
            .field("known", &self.known)
            .field("budget", &self.budget)
            .field("counter", &self.counter)
            .field("observed", &self.observed)
            .field("issued", &self.issued)
            .field("thinned", &self.thinned)
            .field("pages_on", &self.pages_on)
            .field("pages", &self.pages)
            .field("idle_until_ms", &self.idle_until_ms)
            .field("last_list_ms", &self.last_list_ms)
            .field("resend_after_reload", &self.resend_after_reload)
            .field("durable", &self.durable)
            .finish()
    }
}

/// The core's configuration in the simulator: the legacy client's
/// timeouts, backoffs within the simulated phases.
pub fn sim_client_config() -> ClientConfig {
    ClientConfig {
        client_name: "msp_sim_sdk".into(),
        client_version: "1".into(),
        request_timeout_ms: REQUEST_TIMEOUT_MS,
        handshake_timeout_ms: crate::client::HANDSHAKE_TIMEOUT_MS,
        retry_backoff_min_ms: 100,
        retry_backoff_max_ms: 2_000,
        ..ClientConfig::default()
    }
}

/// The command a workload's `(method, params)` asks for, as the SDK's
/// typed spec (so `submit` mints its id and anchors an id-less
/// interrupt or cancel); `None` when it is not expressible as one.
fn spec_of(method: &str, p: &Value) -> Option<CommandSpec> {
    let sid = || SessionId::parse(p["sessionId"].as_str()?).ok();
    let text = || {
        p["input"]
            .as_array()
            .filter(|a| a.len() == 1)
            .and_then(|a| a[0]["text"].as_str())
            .map(str::to_string)
    };
    let turn = |k: &str| p[k].as_str().and_then(|t| TurnId::new(t).ok());
    Some(match method {
        "session/start" => CommandSpec::SessionStart {
            session_id: match p.get("sessionId") {
                Some(_) => Some(sid()?),
                None => None,
            },
            workspace_root: None,
        },
        "session/resume" => CommandSpec::SessionResume {
            session_id: sid()?,
            cursor: match p.get("cursor") {
                None => None,
                Some(c) => Some(c.as_str()?.to_string()),
            },
            exclude_items: match p.get("excludeItems") {
                None => false,
                Some(x) => x.as_bool()?,
            },
        },
        "turn/start" => CommandSpec::TurnStart {
            session_id: sid()?,
            text: text()?,
            if_busy: match p["ifBusy"].as_str() {
                None => None,
                Some("queue") => Some(IfBusy::Queue),
                Some("steer") => Some(IfBusy::Steer),
                Some("replace") => Some(IfBusy::Replace),
                Some(_) => return None,
            },
        },
        "turn/steer" => CommandSpec::TurnSteer {
            session_id: sid()?,
            expected_turn_id: turn("expectedTurnId")?,
            text: text()?,
        },
        "turn/unqueue" => CommandSpec::TurnUnqueue {
            session_id: sid()?,
            turn_id: turn("turnId")?,
        },
        "turn/interrupt" => CommandSpec::TurnInterrupt {
            session_id: sid()?,
            turn_id: turn("turnId"),
        },
        "turn/cancel" => CommandSpec::TurnCancel {
            session_id: sid()?,
            turn_id: turn("turnId"),
        },
        "task/stop" => CommandSpec::TaskStop {
            session_id: sid()?,
            task_id: TaskId::new(p["taskId"].as_str()?).ok()?,
        },
        "task/stopAll" => CommandSpec::TaskStopAll { session_id: sid()? },
        "approval/decide" => CommandSpec::ApprovalDecide {
            session_id: sid()?,
            approval_id: ApprovalId::new(p["approvalId"].as_str()?).ok()?,
            source_index: p["requirementId"]["sourceIndex"].as_u64()?,
            choice_id: p["choiceId"].as_str()?.to_string(),
        },
        "state/update" => CommandSpec::StateUpdate {
            session_id: sid()?,
            expected_revision: p["expectedRevision"].as_u64()?,
            set: p["set"].as_object()?.clone(),
        },
        _ => return None,
    })
}

/// Whether `line` may have a member named `commandId`: it has those
/// bytes, or a `\u` escape (the only way to spell a member name's letters
/// otherwise). False means [`SentLine`] would read no command id from it.
fn may_name_command_id(line: &[u8]) -> bool {
    const NAME: &[u8] = b"commandId";
    line.iter().enumerate().any(|(i, b)| match b {
        b'c' => line[i..].starts_with(NAME),
        b'\\' => line.get(i + 1) == Some(&b'u'),
        _ => false,
    })
}

/// How a double click's copy of a line is spelled: the same JSON value
/// in other bytes, so a host that compares payloads (or finds members)
/// by their text rather than by their value is caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spelling {
    /// serde_json's compact output, byte for byte the core's own line.
    Compact,
    /// Members in reverse order, with spaces around `:` and `,`.
    Reordered,
    /// The first character of every string value (not of member names)
    /// as a `\u` escape, where it is ASCII; the `commandId` in mixed case
    /// (one UUID: the ledger compares ids without case); and a
    /// `state/update`'s `set` integers as decimals (`12.0`: RFC 8785
    /// signs it as `12`).
    Escaped,
}

/// Writes `v` as JSON in `spelling`: a line any JSON reader reads as
/// `v` again.
fn spell(out: &mut Vec<u8>, v: &Value, spelling: Spelling) {
    match v {
        Value::String(s) if spelling == Spelling::Escaped => {
            let mut chars = s.chars();
            match chars.next() {
                Some(c) if c.is_ascii() && c != '"' && c != '\\' => {
                    out.extend_from_slice(format!("\"\\u{:04x}", c as u32).as_bytes());
                    let rest = serde_json::to_vec(chars.as_str()).expect("a string");
                    out.extend_from_slice(&rest[1..]);
                }
                _ => serde_json::to_writer(&mut *out, s).expect("a string"),
            }
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(if spelling == Spelling::Reordered {
                        b" , "
                    } else {
                        b","
                    });
                }
                spell(out, item, spelling);
            }
            out.push(b']');
        }
        Value::Object(members) => {
            let mut members: Vec<(&String, &Value)> = members.iter().collect();
            let (colon, comma): (&[u8], &[u8]) = if spelling == Spelling::Reordered {
                members.reverse();
                (b" : ", b" , ")
            } else {
                (b":", b",")
            };
            out.push(b'{');
            for (i, (k, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(comma);
                }
                serde_json::to_writer(&mut *out, k).expect("a string");
                out.extend_from_slice(colon);
                spell(out, item, spelling);
            }
            out.push(b'}');
        }
        other => serde_json::to_writer(&mut *out, other).expect("a value"),
    }
}

/// `params` without `commandId`, as a map.
fn bare(params: &Value) -> Map<String, Value> {
    let mut m = params.as_object().cloned().unwrap_or_default();
    m.remove("commandId");
    m
}

impl SdkClient {
    /// A client with `budget` logical commands; its core's entropy is one
    /// draw of the world.
    pub fn new(w: &mut World, budget: u32, durable: bool, pages: bool) -> SdkClient {
        let seed = w.bits128(Decision::Ids);
        let draws = Arc::new(AtomicU64::new(0));
        let entropy = CountedEntropy {
            inner: SeededEntropy::new(seed),
            draws: draws.clone(),
        };
        // The workload's view follows the host's notifications through
        // the core's view events (the frames the core parsed, so no line
        // is parsed twice; the inbound tap would add a copy of each).
        let core = ClientCore::new(sim_client_config(), Box::new(entropy));
        SdkClient {
            core,
            entropy_seed: seed,
            draws,
            now_ms: w.now_ms,
            host: 0,
            connected_once: false,
            handles: BTreeMap::new(),
            reads: BTreeMap::new(),
            double: BTreeSet::new(),
            raw_serial: 0,
            start: None,
            active: None,
            burst: Vec::new(),
            flood: Vec::new(),
            known: crate::known::Known::default(),
            budget,
            counter: 0,
            fresh: 0,
            upper_ids: false,
            crossing: false,
            twins: false,
            prompt_approvals: false,
            pause_next: false,
            observed: 0,
            issued: 0,
            thinned: BTreeMap::new(),
            pages_on: pages,
            pages: BTreeMap::new(),
            subscribed: None,
            idle_until_ms: 0,
            last_list_ms: 0,
            resend_after_reload: false,
            durable,
            held: VecDeque::new(),
        }
    }

    /// Logical commands still to issue in the safety phase.
    pub fn budget_left(&self) -> u32 {
        self.budget
    }

    /// Logical commands issued so far.
    pub fn issued(&self) -> u64 {
        self.issued
    }

    /// Whether an observer's whole-view read of `sid`, whose driver has
    /// issued `size` commands, goes out whole (else it reads metadata
    /// only, `excludeItems`). A whole view grows with its session, so
    /// reading it at a fixed rate would make a run's cost grow with the
    /// square of its length; a client that follows a session pages it or
    /// follows its events, and reads it whole now and then. Past
    /// [`FULL_READS_FREE_UP_TO`] commands, each whole read is preceded by
    /// `(size - FULL_READS_FREE_UP_TO) / FULL_READS_SKIP_PER` thinned ones:
    /// the whole views' bytes per observing read stay about constant.
    /// No scenario's own workload issues enough commands per client for
    /// this to thin a read: only longer fixed workloads (`bench`'s growth
    /// runs) see it.
    fn whole_read_due(&mut self, sid: &str, size: u64) -> bool {
        let owed = size.saturating_sub(FULL_READS_FREE_UP_TO) / FULL_READS_SKIP_PER;
        let done = self.thinned.get(sid).copied().unwrap_or(0);
        if done < owed {
            self.thinned.insert(sid.to_string(), done + 1);
            return false;
        }
        self.thinned.remove(sid);
        true
    }

    fn outstanding(c: &Client, i: usize) -> bool {
        !c.cmds[i].done && !c.cmds[i].lost
    }

    // ----- the world's calls -------------------------------------------------

    /// The world opened `link` to `host` for this client. With `slips`,
    /// [`HANDSHAKE_SLIP_PERMILLE`] per mille of links first carry a stray
    /// `initialized` notification, ahead of the core's `initialize`.
    pub fn on_connected(
        &mut self,
        c: &mut Client,
        w: &mut World,
        link: u64,
        host: usize,
        slips: bool,
    ) -> Vec<Action> {
        self.now_ms = w.now_ms;
        c.link = Some(link);
        self.host = host;
        self.connected_once = true;
        self.core.handle_connected(w.now_ms);
        // Sometimes the application rebuilds its view: the core forgets
        // the cursor, so its reload on this link resumes from a snapshot
        // (the other shape of a resume, which the core otherwise takes
        // only when its cursor is unknown).
        if let Some(sid) = c.session.as_deref().and_then(|s| SessionId::parse(s).ok()) {
            if w.chance(Decision::Client, 100) {
                self.core.unfollow(&sid);
                self.core.follow(w.now_ms, sid, None);
            }
        }
        let mut out = Vec::new();
        // PROTOCOL.md 2: the handshake is `initialize`, then
        // `initialized`. A client that sends `initialized` first has not
        // initialized the link: the host ignores the early notification,
        // answers the `initialize` that follows, and still refuses every
        // other request until the second `initialized` (which the core
        // sends after the answer). The model judges each of those answers.
        // (No draw at all without `slips`: older runs replay unchanged.)
        //
        // Or the link first carries an `initialize` whose `clientInfo.name`
        // breaks the public schema's `[a-z0-9_]+`: refused
        // `invalidParams`, and the link stays uninitialized, so the core's
        // own `initialize` that follows must succeed. This is the slip
        // draw's third option: a run file recorded before it replays
        // unchanged (its values are 0 and 1).
        if slips {
            match w.pick_permille(
                Decision::Client,
                &[HANDSHAKE_SLIP_PERMILLE, BAD_INITIALIZE_PERMILLE],
            ) {
                1 => out.push(Action::Send(
                    b"{\"jsonrpc\":\"2.0\",\"method\":\"initialized\"}\n".to_vec(),
                )),
                2 => {
                    self.raw_serial += 1;
                    let mut line = serde_json::to_vec(&json!({
                        "jsonrpc": "2.0",
                        "id": format!("bad-init-{}", self.raw_serial),
                        "method": "initialize",
                        "params": {"clientInfo": {"name": "sim-client", "version": "1"}},
                    }))
                    .expect("serialise");
                    line.push(b'\n');
                    out.push(Action::Send(line));
                }
                _ => {}
            }
        }
        self.pump(c, &mut out);
        out
    }

    /// The link closed (cut, host death, our own close).
    pub fn on_closed(&mut self, c: &mut Client) {
        c.link = None;
        // A subscription ends with its link.
        self.subscribed = None;
        self.core.handle_disconnected(self.now_ms);
    }

    /// After a close in an ephemeral world: the core already ended what
    /// must not be replayed elsewhere (it knows the link's durability from
    /// the handshake); report it now.
    pub fn forget_unsafe_replays(&mut self, c: &mut Client, out: &mut Vec<Action>) {
        self.drain_completions(c, out);
    }

    /// A timer fired.
    pub fn on_wake(&mut self, c: &mut Client, w: &mut World, ctx: &Ctx) -> Vec<Action> {
        let mut out = Vec::new();
        self.now_ms = w.now_ms;
        self.core.handle_timeout(w.now_ms);
        self.pump(c, &mut out);
        self.step(c, w, ctx, &mut out);
        self.pump(c, &mut out);
        let now = w.now_ms;
        let mut next = now
            + if ctx.healing {
                250
            } else {
                w.range(Decision::Client, 20, 400)
            };
        if let Some(t) = self.core.poll_timeout() {
            next = next.min(t.max(now + 1));
        }
        out.push(Action::WakeAt(next));
        out
    }

    /// A line arrived on the current link.
    pub fn on_line(&mut self, c: &mut Client, w: &mut World, line: &[u8]) -> Vec<Action> {
        let mut out = Vec::new();
        self.now_ms = w.now_ms;
        let mut bytes = line.to_vec();
        if bytes.last() != Some(&b'\n') {
            bytes.push(b'\n');
        }
        self.core.handle_bytes(w.now_ms, &bytes);
        // The notifications the core just parsed (its view events), before
        // anything the core produced is acted on (the view is as it was
        // before the line was handled: handling it touches neither the
        // record nor the view). The other events wait for `pump`, in order.
        while let Some(ev) = self.core.poll_event() {
            match ev {
                ClientEvent::View(v) => self.on_event(c, &v.method, &v.params),
                other => self.held.push_back(other),
            }
        }
        self.pump(c, &mut out);
        out
    }

    // ----- the core's outputs --------------------------------------------------

    /// Moves everything the core produced into actions and the record,
    /// reacting to completions and events, until the core is quiet.
    fn pump(&mut self, c: &mut Client, out: &mut Vec<Action>) {
        loop {
            let mut moved = false;
            while let Some(o) = self.core.poll_output() {
                moved = true;
                match o {
                    msp::client::Output::Send(bytes) => {
                        for line in bytes.split_inclusive(|b| *b == b'\n') {
                            let twin = self.sent(c, line);
                            out.push(Action::Send(line.to_vec()));
                            if let Some(t) = twin {
                                out.push(Action::Twin(t));
                            }
                        }
                    }
                    msp::client::Output::CloseLink => {
                        c.link = None;
                        out.push(Action::Close);
                    }
                }
            }
            moved |= self.drain_completions(c, out);
            while let Some(ev) = self.held.pop_front().or_else(|| self.core.poll_event()) {
                moved = true;
                self.on_client_event(c, ev, out);
            }
            if !moved {
                return;
            }
        }
    }

    /// A line the core put on the link: counts the command's sends, and
    /// doubles the first send of a double click. The copy goes on the link
    /// through the core, or, with `twins`, one time in two is returned to
    /// go out on another client's link ([`Action::Twin`]).
    fn sent(&mut self, c: &mut Client, line: &[u8]) -> Option<Vec<u8>> {
        // Only three members are read (the whole line is parsed only for
        // a double click): a tree of every line sent cost a few percent
        // of a run. And only lines that can carry a `commandId` are read
        // at all: half the lines sent (reads, the handshake) cannot.
        if !may_name_command_id(line) {
            return None;
        }
        let Ok(l) = serde_json::from_slice::<SentLine<'_>>(line) else {
            return None;
        };
        let cid = l.params.and_then(|p| p.command_id)?;
        if l.id.is_none_or(|id| id.get().parse::<u64>().is_err()) {
            return None;
        }
        let cid: &str = &cid;
        let method: &str = l.method.as_deref().unwrap_or_default();
        if let Some(k) = (0..c.cmds.len()).rev().find(|k| {
            c.cmds[*k].cid == cid && c.cmds[*k].method == method && Self::outstanding(c, *k)
        }) {
            let cmd = &mut c.cmds[k];
            cmd.sent_count += 1;
            cmd.last_sent_ms = Some(self.now_ms);
        }
        if self.double.remove(cid) {
            self.raw_serial += 1;
            let mut dup = crate::model::wire::json_of(line).expect("a line just read");
            // Under an id of its own, which the core ignores the answer
            // to: a string, or an integer below zero or above i64's range
            // (JSON-RPC allows any; the host must echo it as sent).
            let n = self.raw_serial;
            dup["id"] = match (n / 3) % 3 {
                0 => json!(format!("dbl-{n}")),
                1 => json!(-(n as i64)),
                _ => json!((1u64 << 63) + n),
            };
            // The copy is the same request in other bytes, two times in
            // three (no draw: the serial picks).
            let spelling = match self.raw_serial % 3 {
                0 => Spelling::Compact,
                1 => Spelling::Reordered,
                _ => Spelling::Escaped,
            };
            if spelling == Spelling::Escaped {
                dup["params"]["commandId"] = json!(crate::moves::mixed_case(cid));
                if method == "state/update" {
                    crate::moves::set_as_decimals(&mut dup["params"]);
                }
            }
            let mut l = Vec::with_capacity(line.len() + 64);
            spell(&mut l, &dup, spelling);
            l.push(b'\n');
            // The twin takes the odd copies (no draw: the serial picks).
            if self.twins && n % 2 == 1 {
                return Some(l);
            }
            self.core.send_raw_line_for_tests(l);
        }
        None
    }

    /// The core's handshake on its link is done.
    pub fn is_ready(&self) -> bool {
        self.core.is_ready()
    }

    fn drain_completions(&mut self, c: &mut Client, out: &mut Vec<Action>) -> bool {
        let mut moved = false;
        while let Some(done) = self.core.poll_completion() {
            moved = true;
            match done {
                Completion::Command {
                    handle, outcome, ..
                } => {
                    if let Some(i) = self.handles.remove(&handle) {
                        self.on_outcome(c, i, &outcome, out);
                    }
                }
                Completion::Read { handle, result } => match self.reads.remove(&handle) {
                    Some(ReadKind::Pending) => {
                        if let Ok(r) = result {
                            for a in r["approvals"].as_array().into_iter().flatten() {
                                if let Some(id) = a["approvalId"].as_str() {
                                    self.known.approvals.insert(id.to_string());
                                }
                            }
                        }
                    }
                    Some(ReadKind::Page { sid, backward }) => {
                        // The walk goes on from `nextCursor` (the spec's
                        // anchor of the next page in the same direction);
                        // at the end, or on an error, a new one starts.
                        let next = result.as_ref().ok().and_then(|r| r["nextCursor"].as_str());
                        if let Some(c) = next {
                            self.pages.insert(sid, (c.to_string(), backward));
                        }
                    }
                    _ => {}
                },
            }
        }
        moved
    }

    fn on_outcome(
        &mut self,
        c: &mut Client,
        i: usize,
        outcome: &CommandOutcome,
        out: &mut Vec<Action>,
    ) {
        let answered = {
            let cmd = &mut c.cmds[i];
            match outcome.answer_value() {
                Some(a) => {
                    cmd.done = true;
                    cmd.answer = Some(a);
                    true
                }
                None => {
                    cmd.lost = true;
                    false
                }
            }
        };
        if !answered {
            let why = match outcome {
                CommandOutcome::Error(e) => e.message.clone(),
                _ => String::new(),
            };
            out.push(Action::Note(format!(
                "{} {} given up by the SDK: {why}",
                c.cmds[i].method, c.cmds[i].cid
            )));
        }
        let purpose = c.cmds[i].purpose;
        match outcome {
            CommandOutcome::Accepted(ack) => match purpose {
                Purpose::Start if self.start == Some(i) && c.session.is_none() => {
                    c.session = ack.session_id().map(|s| s.as_str().to_string());
                }
                Purpose::Normal => {
                    let r = &ack.raw;
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
                _ => {}
            },
            CommandOutcome::Error(e) => {
                let ours = c.cmds[i].params["sessionId"].as_str() == c.session.as_deref();
                if e.code == -32603
                    && e.data["reason"] == json!("logCorrupt")
                    && ours
                    && c.session.is_some()
                {
                    self.lose_session(c, out, "session log corrupt");
                } else if purpose == Purpose::Start && self.start == Some(i) {
                    self.start = None;
                    out.push(Action::Note(format!(
                        "session/start {} ended without a session: starts over",
                        c.cmds[i].cid
                    )));
                }
            }
            CommandOutcome::Rejected(_) => {
                if purpose == Purpose::Start && self.start == Some(i) {
                    self.start = None;
                    out.push(Action::Note(format!(
                        "session/start {} refused: starts over",
                        c.cmds[i].cid
                    )));
                }
            }
        }
    }

    fn on_client_event(&mut self, c: &mut Client, ev: ClientEvent, out: &mut Vec<Action>) {
        match ev {
            ClientEvent::SessionLost { session_id }
                if c.session.as_deref() == Some(session_id.as_str()) =>
            {
                // The liveness oracle flags the first note in a durable
                // world: a durable host must not lose a session.
                let why = if self.durable {
                    "durable session not found on resume"
                } else {
                    "session died with its ephemeral host"
                };
                self.lose_session(c, out, why);
            }
            ClientEvent::Resumed {
                session_id,
                snapshot: Some(snap),
            } if c.session.as_deref() == Some(session_id.as_str()) => {
                let st = &snap["state"];
                self.known.reset_from(st);
            }
            _ => {}
        }
    }

    /// The session is gone: its commands were ended by the core (or are
    /// given up here), and the client starts a new one.
    fn lose_session(&mut self, c: &mut Client, out: &mut Vec<Action>, why: &str) {
        let Some(sid) = c.session.take() else {
            return;
        };
        let gone: Vec<CommandHandle> = self
            .handles
            .iter()
            .filter(|(_, i)| c.cmds[**i].params["sessionId"].as_str() == Some(sid.as_str()))
            .map(|(h, _)| *h)
            .collect();
        for h in gone {
            // The core answers Forgotten; the record says lost.
            self.core.forget(h);
        }
        self.drain_completions(c, out);
        if let Ok(s) = SessionId::parse(&sid) {
            self.core.unfollow(&s);
        }
        out.push(Action::Note(format!(
            "{why}: gives up its commands, starts a new session"
        )));
        self.start = None;
        self.active = None;
        self.burst.clear();
        self.flood.clear();
        self.known = crate::known::Known::default();
        self.resend_after_reload = false;
    }

    fn on_event(&mut self, c: &Client, m: &str, p: &Value) {
        if c.session.is_none() || p["sessionId"].as_str() != c.session.as_deref() {
            return;
        }
        self.known.observe(m, p);
    }

    // ----- the workload -----------------------------------------------------

    fn record(
        &mut self,
        c: &mut Client,
        w: &World,
        cid: &str,
        method: &str,
        params: Map<String, Value>,
        purpose: Purpose,
    ) -> usize {
        let mut p = Value::Object(params);
        p["commandId"] = json!(cid);
        c.cmds.push(Cmd {
            cid: cid.to_string(),
            method: method.to_string(),
            params: p,
            purpose,
            done: false,
            lost: false,
            sent_count: 0,
            last_sent_ms: None,
            retry_at_ms: None,
            answer: None,
            issued_ms: w.now_ms,
        });
        c.cmds.len() - 1
    }

    /// Submits a new logical command (the core mints its id). Returns its
    /// record's index, or None when the core refused it outright.
    fn submit(
        &mut self,
        c: &mut Client,
        w: &mut World,
        method: &str,
        params: Value,
        purpose: Purpose,
    ) -> Option<usize> {
        let now = w.now_ms;
        let dbl = w.chance(Decision::Client, 80);
        self.fresh += 1;
        let upper = self.upper_ids && self.fresh.is_multiple_of(5);
        let (h, cid, wire) = match spec_of(method, &params) {
            Some(spec) if upper => {
                let spec = self.core.anchor(&spec);
                let wire = spec.to_wire();
                let id = uppercase(self.core.mint_command_id(now));
                let h = self
                    .core
                    .submit_with_id(now, id.clone(), wire.clone())
                    .ok()?;
                (h, id, wire)
            }
            Some(spec) => {
                let spec = self.core.anchor(&spec);
                let wire = spec.to_wire();
                let (h, id) = self.core.submit(now, &spec).ok()?;
                (h, id, wire)
            }
            None => {
                let mut id = self.core.mint_command_id(now);
                if upper {
                    id = uppercase(id);
                }
                let wire = WireCommand::parse(method, bare(&params)).ok()?;
                let h = self
                    .core
                    .submit_with_id(now, id.clone(), wire.clone())
                    .ok()?;
                (h, id, wire)
            }
        };
        let i = self.record(c, w, cid.as_str(), &wire.method, wire.params, purpose);
        self.handles.insert(h, i);
        if dbl {
            self.double.insert(cid.as_str().to_string());
        }
        Some(i)
    }

    /// Sends an answered command's id again: `checked` through
    /// [`ClientCore::submit_with_id`] (the same payload), else unchecked.
    fn reuse(
        &mut self,
        c: &mut Client,
        w: &mut World,
        cid: &str,
        method: &str,
        params: Value,
        purpose: Purpose,
    ) -> Option<usize> {
        let now = w.now_ms;
        let id = CommandId::parse(cid).ok()?;
        let p = bare(&params);
        let h = if purpose == Purpose::Resend {
            match WireCommand::parse(method, p.clone()) {
                Ok(wire) => self.core.submit_with_id(now, id, wire).ok()?,
                Err(_) => self
                    .core
                    .submit_unchecked_for_tests(now, id, method, p.clone())
                    .ok()?,
            }
        } else {
            self.core
                .submit_unchecked_for_tests(now, id, method, p.clone())
                .ok()?
        };
        if self.handles.contains_key(&h) {
            return None;
        }
        let i = self.record(c, w, cid, method, p, purpose);
        self.handles.insert(h, i);
        if w.chance(Decision::Client, 80) {
            self.double.insert(cid.to_string());
        }
        Some(i)
    }

    fn step(&mut self, c: &mut Client, w: &mut World, ctx: &Ctx, out: &mut Vec<Action>) {
        let now = w.now_ms;
        self.upper_ids = ctx.upper_ids;
        self.crossing = ctx.crossing;
        self.twins = ctx.twins;
        self.prompt_approvals = ctx.prompt_approvals;
        if c.link.is_none() {
            if ctx.live_hosts.is_empty() {
                return;
            }
            let n = ctx.live_hosts.len();
            let after = if self.connected_once {
                self.host + 1
            } else {
                0
            };
            let first = ctx.live_hosts.iter().position(|h| *h >= after).unwrap_or(0);
            let h = ctx.live_hosts[(first + w.decide(Decision::Placement, n as u64) as usize) % n];
            out.push(Action::Connect(h));
            return;
        }
        if !self.core.is_ready() {
            return;
        }
        if !ctx.healing && w.chance(Decision::Client, reconnect_permille(ctx)) {
            out.push(Action::Close);
            self.on_closed(c);
            out.push(Action::Note("reconnect: leaves its host".into()));
            return;
        }
        if c.role == Role::Observer {
            self.observe(w, ctx);
            return;
        }
        // 1. A session to drive.
        if c.session.is_none() {
            if self.start.is_some_and(|i| Self::outstanding(c, i)) {
                return;
            }
            let explicit = w.chance(Decision::Client, 500);
            let params = if explicit {
                let sid = msp::proto::ids::mint_uuid_v7(w.now_ms, w.bits128(Decision::Ids));
                json!({"sessionId": sid})
            } else {
                json!({})
            };
            self.start = self.submit(c, w, "session/start", params, Purpose::Start);
            return;
        }
        // 2. The commands in flight (the core re-sends them).
        self.flood.retain(|f| Self::outstanding(c, *f));
        self.burst.retain(|b| Self::outstanding(c, *b));
        if let Some(i) = self.active {
            if Self::outstanding(c, i) {
                return;
            }
            self.active = None;
        }
        if now < self.idle_until_ms {
            return;
        }
        // After a pause the host has unloaded the session: a carrier-less
        // row goes again under its id; the host answers `sessionNotLoaded`,
        // the core reloads the session and re-sends it.
        if self.resend_after_reload && !ctx.healing {
            self.resend_after_reload = false;
            if self.resend(c, w, true) {
                return;
            }
        }
        // 3. Something new (or, option 0, nothing more).
        if !ctx.healing && self.budget > 0 && !w.more_work(Decision::Client) {
            self.budget = 0;
        }
        if ctx.healing || self.budget == 0 {
            if let Some(a) = self.known.approvals.iter().next().cloned() {
                self.decide_approval(c, w, &a, true);
            } else if ctx.healing && now >= self.last_list_ms + LIST_PENDING_EVERY_MS {
                // A lost `approval/request` line would block a turn (and the
                // queue behind it) forever: ask which approvals wait.
                self.last_list_ms = now;
                if let Some(s) = c.session.as_deref().and_then(|s| SessionId::parse(s).ok()) {
                    if let Ok(h) = self.core.read(now, ReadSpec::ListPending { session_id: s }) {
                        self.reads.insert(h, ReadKind::Pending);
                    }
                }
            }
            return;
        }
        self.budget -= 1;
        self.issued += 1;
        self.pick(c, w, ctx);
    }

    fn observe(&mut self, w: &mut World, ctx: &Ctx) {
        // Once faults heal, no subscription keeps a session loaded (an
        // idle unload or a lease handover waits for its subscribers).
        if ctx.healing {
            if let Some(old) = self.subscribed.take() {
                self.send_stray("view/unsubscribe", json!({"sessionId": old}));
            }
        }
        if ctx.sessions.is_empty() || !w.chance(Decision::Client, 150) {
            return;
        }
        let i = w.decide(Decision::Client, ctx.sessions.len() as u64) as usize;
        let s = ctx.sessions[i].clone();
        let size = ctx.session_issued.get(i).copied().unwrap_or(0);
        // At most one read per session outstanding (reads are re-sent
        // until answered).
        if self.reads.len() >= 4 {
            return;
        }
        // The answer is the model's to judge (it reads it on the wire);
        // the core only checks it is JSON and does not build it.
        if let Ok(sid) = SessionId::parse(&s) {
            self.observed += 1;
            if ctx.subscribes && !ctx.healing && self.observed % 5 == 4 {
                self.subscription(&s);
                return;
            }
            let spec = match self.observed % 4 {
                0 => ReadSpec::SessionMeta { session_id: sid },
                1 if self.pages_on => {
                    let spec = self.page_spec(sid);
                    let backward = matches!(spec, ReadSpec::ViewPage { backward: true, .. });
                    if let Ok(h) = self.core.read(w.now_ms, spec) {
                        self.reads.insert(h, ReadKind::Page { sid: s, backward });
                    }
                    return;
                }
                _ if self.pages_on && !self.whole_read_due(&s, size) => {
                    ReadSpec::SessionMeta { session_id: sid }
                }
                _ => ReadSpec::SessionRead { session_id: sid },
            };
            if let Ok(h) = self.core.read_without_result(w.now_ms, spec) {
                self.reads.insert(h, ReadKind::Observe);
            }
        }
    }

    /// An observer's subscription, every fifth observation: ends the one
    /// it holds (`view/unsubscribe`), else opens one on `s`
    /// (`view/subscribe`) whose `after` is, by turn: absent, the empty
    /// view, where the page walk of `s` stands, that cursor's ephemeral
    /// form, one far past the head, a non-canonical spelling (the last
    /// two must be refused `missingAnchor`). The events after `after`
    /// come first, then live ones while it lasts (about five
    /// observations); `s` may be loaded on the link's host, elsewhere or
    /// nowhere. The answers are the model's to judge; no draw is made.
    fn subscription(&mut self, s: &str) {
        if let Some(old) = self.subscribed.take() {
            self.send_stray("view/unsubscribe", json!({"sessionId": old}));
            return;
        }
        let walked = self.pages.get(s).map(|(c, _)| c.clone());
        let empty = format!("v:{s}:0");
        let after = match (self.observed / 5) % 6 {
            0 => None,
            1 => Some(empty),
            2 => Some(walked.unwrap_or(empty)),
            3 => Some(format!("{}.1", walked.unwrap_or(empty))),
            4 => Some(format!("v:{s}:1000000")),
            _ => Some(format!("v:{s}:01")),
        };
        let mut p = json!({"sessionId": s});
        if let Some(a) = after {
            p["after"] = json!(a);
        }
        self.send_stray("view/subscribe", p);
        self.subscribed = Some(s.to_string());
    }

    /// A `view/page` of `sid`, 1..=[`PAGE_LIMIT`] events: the next page of
    /// the walk the last page of `sid` began (its `nextCursor`, its
    /// direction), or a new walk from the start or the head. Walks from
    /// the start read a compacted session's archive. The limit and a new
    /// walk's direction come from the count of observing reads, not from
    /// draws: a kept run's choices keep their meaning.
    fn page_spec(&mut self, sid: SessionId) -> ReadSpec {
        let k = self.observed / 4;
        let limit = (1 + k.wrapping_mul(7) % PAGE_LIMIT) as u32;
        let (cursor, backward) = match self.pages.remove(sid.as_str()) {
            Some((c, backward)) => (Some(c), backward),
            None => (None, k % 2 == 1),
        };
        ReadSpec::ViewPage {
            session_id: sid,
            limit,
            cursor,
            backward,
        }
    }

    fn text(&mut self, c: &Client, w: &mut World, ctx: &Ctx) -> String {
        self.counter += 1;
        crate::moves::turn_text(w, ctx.scenario, self.counter, c.idx, ctx.escapes)
    }

    fn pick(&mut self, c: &mut Client, w: &mut World, ctx: &Ctx) {
        use crate::moves::Move;
        let sid = c.session.clone().expect("session");
        if self.prompt_approvals && self.prompt_pick(c, w, ctx, &sid) {
            return;
        }
        let mv = crate::moves::next_move(
            w,
            ctx.scenario,
            &self.known,
            &mut self.counter,
            c.idx,
            &sid,
            ctx.escapes,
        );
        let (method, params) = match mv {
            Move::Submit(m, p) => (m, p),
            Move::Turn => return self.pick_turn(c, w, ctx, &sid),
            Move::Approval(a) => {
                self.decide_approval(c, w, &a, false);
                return;
            }
            Move::Conflict => return self.conflict_probe(c, w, &sid),
            Move::IdleUntil(t) => {
                self.idle_until_ms = t;
                return;
            }
            Move::Resend => {
                if !self.resend(c, w, false) {
                    self.pick_turn(c, w, ctx, &sid);
                }
                return;
            }
            Move::Flood => return self.flood_queue(c, w, &sid),
            Move::Pause => return self.pause(w, ctx, &sid),
            Move::Stray | Move::StrayRead => {
                let (method, p) = crate::moves::stray(&mv, w, &sid, &ctx.sessions);
                return self.send_stray(method, p);
            }
            Move::StopAllThenPause => {
                self.active = self.submit(
                    c,
                    w,
                    "task/stopAll",
                    json!({"sessionId": sid}),
                    Purpose::Normal,
                );
                return self.pause(w, ctx, &sid);
            }
            Move::Malformed(kind) => return self.malformed(c, w, &sid, kind),
        };
        self.active = self.submit(c, w, method, params, Purpose::Normal);
        self.maybe_burst(c, w, &sid);
    }

    /// A [`Move::Malformed`]: the defective line as a bare one (its
    /// refusal is the model's to judge), then the command itself under
    /// the same id through the core, admitted afresh. Every other time
    /// (by count, no draw) the line reuses the id of a command the host
    /// answered, and nothing follows: the params are refused before the
    /// ledger is asked (PROTOCOL.md 1), so the line is not a replay.
    fn malformed(&mut self, c: &mut Client, w: &mut World, sid: &str, kind: Malformed) {
        self.counter += 1;
        let (method, mut params) = kind.command(sid, self.known.revision, self.counter);
        self.raw_serial += 1;
        let v4 = crate::moves::uuid_v4(w.bits128(Decision::Ids));
        let rpc = json!(format!("bad-{}", self.raw_serial));
        let answered = c
            .cmds
            .iter()
            .rev()
            .find(|x| {
                x.answer.is_some()
                    && x.params["sessionId"] == json!(sid)
                    && crate::model::wire::DURABLE_METHODS.contains(&x.method.as_str())
            })
            .map(|x| x.cid.clone());
        if let (0, Some(old)) = (self.raw_serial % 2, answered) {
            params["commandId"] = json!(old);
            self.core
                .send_raw_line_for_tests(kind.line(&rpc, method, &params, &v4));
            return;
        }
        let id = self.core.mint_command_id(w.now_ms);
        params["commandId"] = json!(id.as_str());
        self.core
            .send_raw_line_for_tests(kind.line(&rpc, method, &params, &v4));
        let Ok(wire) = WireCommand::parse(method, bare(&params)) else {
            return;
        };
        let Ok(h) = self.core.submit_with_id(w.now_ms, id.clone(), wire.clone()) else {
            return;
        };
        let i = self.record(
            c,
            w,
            id.as_str(),
            &wire.method,
            wire.params,
            Purpose::Normal,
        );
        self.handles.insert(h, i);
        self.active = Some(i);
    }

    /// A bare line: the core does not track it (its answer is the
    /// model's to judge).
    fn send_stray(&mut self, method: &str, p: Value) {
        self.raw_serial += 1;
        let id = format!("stray-{}", self.raw_serial);
        let mut line =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": p}))
                .expect("serialise");
        line.push(b'\n');
        self.core.send_raw_line_for_tests(line);
    }

    fn maybe_burst(&mut self, c: &mut Client, w: &mut World, sid: &str) {
        if !self.burst.is_empty() || !w.chance(Decision::Client, 250) {
            return;
        }
        for _ in 0..2 {
            self.counter += 1;
            let mut set = Map::new();
            set.insert(format!("b{}", self.counter % 3), json!(self.counter));
            let p = json!({"sessionId": sid, "expectedRevision": self.known.revision, "set": set});
            if let Some(b) = self.submit(c, w, "state/update", p, Purpose::Normal) {
                self.burst.push(b);
            }
        }
    }

    /// A long turn, then 17 queued submits in one burst: the queue fills
    /// (16) and the last one is refused `queue_full`.
    fn flood_queue(&mut self, c: &mut Client, w: &mut World, sid: &str) {
        if !self.flood.is_empty() {
            return;
        }
        self.counter += 1;
        let p = json!({"sessionId": sid, "input": [{"type": "text", "text": format!("!sleep 2500 flood {}", self.counter)}]});
        self.active = self.submit(c, w, "turn/start", p, Purpose::Normal);
        for k in 0..=msp::core::QUEUE_MAX as u64 {
            let p = json!({"sessionId": sid, "ifBusy": "queue", "input": [{"type": "text", "text": format!("q{k}")}]});
            if let Some(f) = self.submit(c, w, "turn/start", p, Purpose::Normal) {
                self.flood.push(f);
            }
        }
    }

    /// Leaves the session alone until its host unloads it (idle): the
    /// next command meets `sessionNotLoaded` and the core reloads; then a
    /// carrier-less row goes again (its dedupe is the host's lifetime).
    fn pause(&mut self, w: &mut World, ctx: &Ctx, sid: &str) {
        if !ctx.scenario.durable()
            || ctx.idle_unload_ms == 0
            || ctx.idle_unload_ms > 10_000
            || self.busy()
        {
            return;
        }
        self.raw_serial += 1;
        let mut line = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": format!("unsub-{}", self.raw_serial), "method": "view/unsubscribe", "params": {"sessionId": sid}}))
            .expect("serialise");
        line.push(b'\n');
        if !self.core.send_raw_line_for_tests(line) {
            return;
        }
        self.idle_until_ms = w.now_ms + ctx.idle_unload_ms + w.range(Decision::Client, 200, 1_500);
        self.resend_after_reload = true;
    }

    fn busy(&self) -> bool {
        self.known.running.is_some()
            || !self.known.queued.is_empty()
            || !self.known.tasks.is_empty()
            || !self.known.approvals.is_empty()
    }

    /// Sends an answered command of this session again under its id, the
    /// same payload spelled differently. `carrierless`: pick a
    /// carrier-less row. False when none qualifies.
    fn resend(&mut self, c: &mut Client, w: &mut World, carrierless: bool) -> bool {
        let sid = c.session.clone().unwrap_or_default();
        let candidates: Vec<usize> = c
            .cmds
            .iter()
            .enumerate()
            .filter(|(_, x)| {
                matches!(x.purpose, Purpose::Normal | Purpose::Start)
                    && x.answer.as_ref().is_some_and(|a| {
                        a.get("result").is_some() || a["error"]["code"] == json!(-32030)
                    })
                    && x.params["sessionId"].as_str().is_none_or(|s| s == sid)
                    && (!carrierless
                        || matches!(
                            x.method.as_str(),
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
            let x = &c.cmds[orig];
            (x.cid.clone(), x.method.clone(), x.params.clone())
        };
        crate::moves::same_payload_respelled(w, &method, &mut params, &mut cid, self.counter);
        self.active = self.reuse(c, w, &cid, &method, params, Purpose::Resend);
        true
    }

    fn pick_turn(&mut self, c: &mut Client, w: &mut World, ctx: &Ctx, sid: &str) {
        let text = self.text(c, w, ctx);
        let p = crate::moves::turn_start_params(w, sid, &text);
        self.active = self.submit(c, w, "turn/start", p, Purpose::Normal);
        self.maybe_burst(c, w, sid);
    }

    /// Decides approval `a`; true when the decision approves it.
    fn decide_approval(
        &mut self,
        c: &mut Client,
        w: &mut World,
        a: &str,
        approve_only: bool,
    ) -> bool {
        let sid = c.session.clone().expect("session");
        let p = crate::moves::approval_decision(w, &sid, a, approve_only);
        let approved = p["choiceId"] == "approve";
        self.known.approvals.remove(a);
        self.active = self.submit(c, w, "approval/decide", p, Purpose::Normal);
        approved
    }

    /// Draws version 15's pick ahead of the move draw; true when it made
    /// one. A pending approval this client knows is decided one time in
    /// two, and an approving decision draws whether an interrupt of the
    /// turn goes out right behind it (three times in ten), in flight with
    /// it: the turn may then end while the tool call's effect is in flight
    /// or its lost answer awaited. One such chase in two is followed by a
    /// pause ([`Self::pause`]; no draw then), which leaves the session idle
    /// but for that wait. Without this a tool call's effect rarely meets
    /// the end of its turn: the turn waits for the decision, which the
    /// move draw seldom makes.
    fn prompt_pick(&mut self, c: &mut Client, w: &mut World, ctx: &Ctx, sid: &str) -> bool {
        if std::mem::take(&mut self.pause_next) {
            self.pause(w, ctx, sid);
            return true;
        }
        let Some(a) = self.known.approvals.iter().next().cloned() else {
            return false;
        };
        if !w.chance(Decision::Client, 500) {
            return false;
        }
        if self.decide_approval(c, w, &a, false) && w.chance(Decision::Client, 300) {
            let p = json!({"sessionId": sid});
            if let Some(b) = self.submit(c, w, "turn/interrupt", p, Purpose::Normal) {
                self.burst.push(b);
            }
            self.pause_next = w.chance(Decision::Client, 500);
        }
        true
    }

    /// Reuses an answered command's id with another payload: exactly one
    /// defined param changed, or for `task/stopAll` another method.
    fn conflict_probe(&mut self, c: &mut Client, w: &mut World, sid: &str) {
        let candidates: Vec<usize> = c
            .cmds
            .iter()
            .enumerate()
            .filter(|(_, x)| {
                matches!(x.purpose, Purpose::Normal | Purpose::Start)
                    && x.params["sessionId"].as_str().is_none_or(|s| s == sid)
                    && x.answer.as_ref().is_some_and(|a| {
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
        // From draws version 14 a probe that may cross aims at a
        // carrier-less row one time in four when there is one: they are
        // few among the answered commands, and the rule a crossing probe
        // tests (a durable command reusing such an id is a conflict, from
        // the host's lifetime ledger) was met in few seeds.
        let carrierless = |i: &usize| {
            crate::model::wire::CARRIERLESS_METHODS.contains(&c.cmds[*i].method.as_str())
        };
        let candidates = if self.twins
            && self.crossing
            && candidates.iter().any(carrierless)
            && w.chance(Decision::Client, 250)
        {
            candidates.into_iter().filter(carrierless).collect()
        } else {
            candidates
        };
        let orig = candidates[w.decide(Decision::Client, candidates.len() as u64) as usize];
        self.counter += 1;
        let n = self.counter;
        let (cid, mut method, mut p) = {
            let x = &c.cmds[orig];
            (x.cid.clone(), x.method.clone(), x.params.clone())
        };
        let other = msp::proto::ids::mint_uuid_v7(w.now_ms, w.bits128(Decision::Ids));
        let flip = w.chance(Decision::Client, 500);
        if !crate::moves::respell(&mut method, &mut p, sid, (n, &other), flip, self.crossing) {
            return;
        }
        self.active = self.reuse(c, w, &cid, &method, p, Purpose::Conflict);
    }
}

/// `id` spelled in uppercase: the same UUID, so the same command.
fn uppercase(id: CommandId) -> CommandId {
    CommandId::parse(&id.as_str().to_ascii_uppercase()).expect("a UUIDv7 in uppercase is one")
}

fn reconnect_permille(ctx: &Ctx) -> u64 {
    match ctx.scenario {
        Scenario::LeaseHandover => 25,
        Scenario::Mixed => 5,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every spelling reads back as the value it spelled; only the
    /// compact one is serde_json's own bytes.
    #[test]
    fn a_double_clicks_copy_is_the_same_value_in_other_bytes() {
        let v = json!({"id": "dbl-1", "jsonrpc": "2.0", "method": "turn/start",
            "params": {"commandId": "019885c4-f46a-740e-ad0f-a6133255a7ae", "sessionId": "s1",
                       "input": [{"type": "text", "text": "q\"0\u{e9}"}, {"type": "text", "text": "\\x"}],
                       "ifBusy": null, "n": [1, -2, 3.5, true], "set": {}}});
        let compact = serde_json::to_vec(&v).unwrap();
        for (spelling, same_bytes) in [
            (Spelling::Compact, true),
            (Spelling::Reordered, false),
            (Spelling::Escaped, false),
        ] {
            let mut out = Vec::new();
            spell(&mut out, &v, spelling);
            let back: Value = serde_json::from_slice(&out).expect("valid JSON");
            assert_eq!(back, v, "{spelling:?}: {}", String::from_utf8_lossy(&out));
            assert_eq!(out == compact, same_bytes, "{spelling:?}");
        }
        let mut out = Vec::new();
        spell(&mut out, &v, Spelling::Escaped);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(r#""\u0074urn/start""#), "{text}");
        assert!(
            text.contains(r#""sessionId":"#),
            "member names stay plain: {text}"
        );
    }

    /// Whole-view reads are thinned only past the free size, and then so
    /// that one in `1 + (size - 16) / 8` goes out whole, per session.
    #[test]
    fn whole_view_reads_thin_as_the_session_grows() {
        let mut w = World::new(1, 0);
        let mut c = SdkClient::new(&mut w, 8, true, true);
        let pattern = |c: &mut SdkClient, sid: &str, size: u64| -> String {
            (0..8)
                .map(|_| {
                    if c.whole_read_due(sid, size) {
                        'W'
                    } else {
                        'm'
                    }
                })
                .collect()
        };
        for size in [0, 16, 23] {
            assert_eq!(pattern(&mut c, "a", size), "WWWWWWWW", "size {size}");
        }
        assert_eq!(pattern(&mut c, "a", 24), "mWmWmWmW");
        assert_eq!(pattern(&mut c, "b", 40), "mmmWmmmW");
        // Another session's count is its own.
        assert_eq!(pattern(&mut c, "c", 16), "WWWWWWWW");
    }

    #[test]
    fn a_line_without_the_name_or_an_escape_names_no_command_id() {
        let read = |l: &[u8]| {
            serde_json::from_slice::<SentLine<'_>>(l)
                .ok()
                .and_then(|l| l.params)
                .and_then(|p| p.command_id)
                .map(|c| c.into_owned())
        };
        for (line, named) in [
            (
                &br#"{"id":1,"jsonrpc":"2.0","method":"session/read","params":{"sessionId":"s"}}"#
                    [..],
                None,
            ),
            (br#"{"jsonrpc":"2.0","method":"initialized"}"#, None),
            (
                br#"{"id":2,"method":"m","params":{"commandId":"c1"}}"#,
                Some("c1"),
            ),
            (
                br#"{"id":2,"method":"m","params":{"comm\u0061ndId":"c2"}}"#,
                Some("c2"),
            ),
            (
                br#"{"id":2,"method":"m","params":{"x":"\u0063ommandId"}}"#,
                None,
            ),
            (br#"{"id":2,"method":"m","params":{"commandI":"c"}}"#, None),
            (br#"{"id":2,"params":{"commandIdx":"c","c":"\n"}}"#, None),
            (b"", None),
        ] {
            let may = may_name_command_id(line);
            assert_eq!(
                read(line).as_deref(),
                named,
                "{}",
                String::from_utf8_lossy(line)
            );
            assert!(may || named.is_none(), "{}", String::from_utf8_lossy(line));
        }
        assert!(!may_name_command_id(
            br#"{"id":1,"params":{"sessionId":"s"}}"#
        ));
    }
}
