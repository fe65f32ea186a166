//! One session as PROTOCOL.md says it must evolve: turns and their queue,
//! approvals, tasks, items, revision and kv, and the ledger of intakes.
//!
//! The model learns what the host did from durable records (on a durable
//! host) or from the events it sent (on an ephemeral one), and judges each
//! step against the spec before applying it: an event the spec does not
//! allow in the state the model holds is a violation, whatever the host's
//! own log says. The state is the model's; the host's claims are evidence.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use super::agent::{self, Script};
use super::report::Report;
use super::wire;
use crate::run::START_MS;

/// Where a turn is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum TurnSt {
    /// Admitted behind a busy session.
    Queued,
    /// Launched, not ended.
    Running,
    /// Ended with this terminal.
    Ended(String),
    /// Taken back from the queue before it ran.
    Unqueued,
    /// Its launch failed.
    LaunchFailed,
}

/// A turn.
#[derive(Debug, Clone)]
pub struct Turn {
    /// The submitting command id.
    pub cid: String,
    /// Its input text.
    pub text: String,
    /// Its directives.
    pub script: Script,
    /// Status.
    pub st: TurnSt,
    /// `emittedAtMs` of its `turn/started`.
    pub started_ms: Option<u64>,
    /// Steered inputs, in order.
    pub steers: Vec<String>,
    /// Its non-steered userMessage was emitted.
    pub user_message: bool,
    /// Its agent message completed.
    pub message_done: bool,
    /// The status its agent message completed with when not `completed`
    /// (cut short by the turn's end).
    pub message_cut: Option<String>,
    /// Its toolCall item (effect or background task).
    pub tool: Option<String>,
    /// The writer (host, incarnation) that launched it.
    pub launched_by: Option<(usize, u64)>,
    /// `emittedAtMs` of each `turn/retryScheduled`, in order.
    pub retries: Vec<u64>,
    /// A failed launch's text (its `turn/completed.reason`): every
    /// rejection of its command carries it as `message` (PROTOCOL.md 3).
    pub failure: Option<String>,
}

/// An approval.
#[derive(Debug, Clone)]
pub struct Appr {
    /// Its turn.
    pub turn: String,
    /// Its toolCall item.
    pub item: String,
    /// `approval/requested` params (`sessionId`, `viewCursor` included).
    pub params: Value,
    /// `None` while pending; else the resolved params.
    pub resolved: Option<Value>,
    /// The (host, incarnation) whose log record resolved it: the only
    /// process that may perform its effect at an unkeyed provider (any
    /// other found the decision on disk, with the effect perhaps in flight
    /// at a crash, and must report it `unknown`: PROTOCOL.md 5).
    pub resolved_by: Option<(usize, u64)>,
    /// The effect it gates: (provider, action).
    pub effect: Option<(String, String)>,
}

/// A background task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskSt {
    /// Running, due to complete at this host time.
    Running {
        /// Completion time (host clock ms).
        due_ms: u64,
    },
    /// Ended with this status.
    Ended(String),
}

/// How an intake settled.
#[derive(Debug, Clone, PartialEq)]
pub enum Settle {
    /// Took effect.
    Applied,
    /// Rejected with this error object.
    Rejected(Value),
    /// Its host died before it settled.
    Abandoned,
}

/// What an accepted command promised that the stream must show.
#[derive(Debug, Clone, PartialEq)]
pub enum Owed {
    /// `turn/started` of this turn (or its launch failure).
    Launch(String),
    /// A steered userMessage into this turn.
    Steer(String),
    /// `turn/unqueued` of this turn.
    Unqueue(String),
    /// `approval/resolved` of this approval with this decision.
    Resolve(String, String),
    /// `state/updated` to this revision.
    Update(u64),
}

/// One intake (the `received` half, and what became of it).
#[derive(Debug, Clone)]
pub struct Intake {
    /// The command id as recorded.
    pub cid: String,
    /// The method.
    pub method: String,
    /// Params as recorded (normalised by the host).
    pub params: Value,
    /// The model's payload signature of `params`.
    pub sig: String,
    /// The recorded admission answer; for a resume whose snapshot items
    /// were read as text (see `logfile::Body`), `null` in their place.
    pub answer: Result<Value, Value>,
    /// Those items' text, between its array's brackets (so that an answer
    /// on the wire whose items are exactly this text is known equal
    /// unread: `wire::is_array_of` with this one part).
    pub answer_items: Option<String>,
    /// Its settlement, once recorded.
    pub settled: Option<Settle>,
    /// Its effect is in the stream.
    pub effect: bool,
    /// The effect its ack promised, until seen.
    pub owed: Option<Owed>,
    /// Intake order.
    pub seq: u64,
    /// The trace index at which the model consumed it.
    pub at: usize,
    /// The host incarnation that wrote it (durable hosts).
    pub writer: Option<(usize, u64)>,
}

impl Intake {
    /// [`Intake::answer_items`] as the array's text.
    pub fn answer_items_text(&self) -> Option<String> {
        self.answer_items.as_ref().map(|t| format!("[{t}]"))
    }
}

/// Everything a read or snapshot shows, at one point of the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// The durable head ordinal.
    pub head: u64,
    /// `activeTurn`.
    pub active: Value,
    /// `queuedTurns`.
    pub queued: Value,
    /// `pendingApprovals`.
    pub pending_approvals: Value,
    /// `items`.
    pub items: Value,
    /// `turnCount`.
    pub turn_count: u64,
    /// `revision`.
    pub revision: u64,
    /// `kv`.
    pub kv: Value,
    /// `pendingCommands`.
    pub pending_commands: Value,
}

/// One session.
#[derive(Debug, Clone, Default)]
pub struct Sess {
    /// The session id.
    pub id: String,
    /// On a durable host.
    pub durable: bool,
    /// Its `created` record (or first start answer) was seen.
    pub created: bool,
    /// The `session/start` that created it.
    pub start_cid: Option<String>,
    /// `workspaceRoot` of the session's creation.
    pub workspace_root: Value,
    /// Turns by id.
    pub turns: BTreeMap<String, Turn>,
    /// The running turn.
    pub running: Option<String>,
    /// Queued turns, in intake order.
    pub queue: Vec<String>,
    /// Approvals by id.
    pub approvals: BTreeMap<String, Appr>,
    /// Background tasks by id.
    pub tasks: BTreeMap<String, TaskSt>,
    /// Tasks a `task/stop` reaching a host named: with `stop_all_ms`, the
    /// only way a task ends `cancelled` in the simulator (which never
    /// shuts a host down gracefully).
    stop_asked: BTreeSet<String>,
    /// Host-clock times a `task/stopAll` of this session reached a host:
    /// it stops every task started (emitted) by then. Times, not the
    /// model's task list: a durable host may start a task and read the
    /// stop before the task's record is synced and consumed here.
    pub stop_all_ms: Vec<u64>,
    /// When each background task started (its `item/started`'s time).
    task_since: BTreeMap<String, u64>,
    /// Items, latest revision, in order of first appearance.
    pub items: Vec<Value>,
    /// Each of `items` written out canonically ([`wire::canonical`]).
    items_text: Vec<String>,
    /// Some item's text is not trusted to parse back to it
    /// ([`wire::round_trips`]).
    items_untrusted: bool,
    item_at: BTreeMap<String, usize>,
    /// `state/update` revision.
    pub revision: u64,
    /// `state/update` kv.
    pub kv: Map<String, Value>,
    /// Turns started.
    pub turn_count: u64,
    /// The durable head ordinal.
    pub head: u64,
    /// Durable events by ordinal: (method, params).
    pub events: BTreeMap<u64, (String, Value)>,
    /// Intakes by command id key (added through `Sess::put_intake`,
    /// which keeps the two indexes below).
    pub ledger: BTreeMap<String, Intake>,
    /// The keys of the intakes not settled yet: what recovery must settle
    /// (a walk of the whole ledger at every recovery's end and every
    /// admission grew with the session, issue 10).
    unsettled: BTreeSet<String>,
    /// The keys of the intakes whose promised effect is still owed.
    owing: BTreeSet<String>,
    next_seq: u64,
    /// The last lifecycle record was `loaded` (a holder is live or died).
    pub open: bool,
    /// Recovery is running (records of a new life after a dead holder).
    pub recovering: bool,
    /// Ephemeral: the model missed events of this session (its host went
    /// on with nobody subscribed): its admissions are no longer judged.
    pub blind: bool,
    /// The trace index at which an accepted `session/resume` of it became
    /// durable in the log: its `Session` objects' `approvalMode.source`
    /// is `replay` from then on (the public transcripts' vocabulary: every
    /// resume answer says so).
    pub resumed_at: Option<usize>,
    /// Some host appended a `session/resume` record to its log (durable
    /// or not: a host that reads the file may see it): until then its
    /// `approvalMode.source` is `startup` (every start answer says so).
    pub resume_appended: bool,
    /// Ephemeral: events sent ahead of a gap, by ordinal.
    pub ahead: BTreeMap<u64, (String, Value, u64)>,
    /// The last `sourceRange` sequence seen on each source stream
    /// `(kind, id)` (PROTOCOL.md 4.5: each stream has its own sequence).
    streams: BTreeMap<(String, String), u64>,
    /// Every source record id a durable event named.
    record_ids: BTreeSet<String>,
    /// Unsettled command ids at the last point a view was taken.
    pub created_at_ms: Option<u64>,
}

/// Which writer appended a record and whether a new life starts there.
#[derive(Debug, Clone, Copy)]
pub struct Origin {
    /// (host, incarnation).
    pub writer: (usize, u64),
    /// The host time of the record, when known.
    pub at_ms: u64,
    /// The writer had been asked to stop gracefully (its live work ends
    /// for `hostShutdown`).
    pub stopping: bool,
}

/// Whether `c` is exactly the cursor of ordinal `n` of session `id`
/// (`v:<id>:<n>`, `n` in decimal as `format!` writes it), written out
/// nowhere.
fn is_cursor(c: &str, id: &str, n: u64) -> bool {
    let Some(digits) = c
        .strip_prefix("v:")
        .and_then(|r| r.strip_prefix(id))
        .and_then(|r| r.strip_prefix(':'))
    else {
        return false;
    };
    let canonical = digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.is_empty()
        && (digits == "0" || !digits.starts_with('0'));
    canonical && digits.parse::<u64>() == Ok(n)
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// The ack a turn/start should get, from the state at admission.
pub fn turn_start_expect(
    cid: &str,
    if_busy: &str,
    running: Option<&str>,
    queued: usize,
) -> Result<Value, &'static str> {
    let busy = running.is_some() || queued > 0;
    let ack = |turn: &str, started: bool, disp: &str| json!({"commandId": cid, "status": "accepted", "turnId": turn, "startedNewTurn": started, "disposition": disp});
    if !busy || if_busy == "replace" {
        return Ok(ack(cid, true, "started"));
    }
    if let (true, Some(r)) = (if_busy == "steer", running) {
        return Ok(ack(r, false, "steered"));
    }
    if queued >= 16 {
        return Err("queue_full");
    }
    Ok(ack(cid, false, "queued"))
}

/// The answer a turn-targeted command gets from its target's status:
/// `Ok(())` when it may act, else the rejection reason.
pub fn turn_target(st: Option<&TurnSt>, unqueue: bool) -> Result<(), &'static str> {
    match (st, unqueue) {
        (None, _) => Err("missing_run"),
        (Some(TurnSt::Running), false) => Ok(()),
        (Some(TurnSt::Running), true) => Err("already_launched"),
        (Some(TurnSt::Queued), false) => Err("not_running"),
        (Some(TurnSt::Queued), true) => Ok(()),
        (Some(_), _) => Err("already_terminal"),
    }
}

impl Sess {
    /// A new session.
    pub fn new(id: &str, durable: bool) -> Sess {
        Sess {
            id: id.to_string(),
            durable,
            ..Sess::default()
        }
    }

    /// A host received `task/stop` (`params`) for this session: the task
    /// it names may end `cancelled` from now on.
    pub fn stop_asked(&mut self, params: &Value) {
        self.stop_asked.insert(s(&params["taskId"]));
    }

    /// Busy: a turn runs or is queued.
    pub fn busy(&self) -> bool {
        self.running.is_some() || !self.queue.is_empty()
    }

    /// The status of turn `t`.
    pub fn turn_st(&self, t: &str) -> Option<&TurnSt> {
        self.turns.get(t).map(|x| &x.st)
    }

    /// The cursor of ordinal `n`.
    pub fn cursor(&self, n: u64) -> String {
        format!("v:{}:{}", self.id, n)
    }

    /// Pending approvals, by the cursor of their request.
    pub fn pending_approvals(&self) -> Vec<&Appr> {
        let mut v: Vec<&Appr> = self
            .approvals
            .values()
            .filter(|a| a.resolved.is_none())
            .collect();
        v.sort_by_key(|a| {
            wire::cursor_of(
                &self.id,
                a.params["viewCursor"].as_str().unwrap_or_default(),
            )
        });
        v
    }

    /// Unsettled intakes in intake order, as `pendingCommands` lists them.
    pub fn pending_commands(&self) -> Value {
        let mut v: Vec<&Intake> = self
            .ledger
            .values()
            .filter(|i| i.settled.is_none())
            .collect();
        v.sort_by_key(|i| i.seq);
        Value::Array(
            v.iter()
                .map(|i| json!({"commandId": i.cid, "method": i.method}))
                .collect(),
        )
    }

    fn turn_ref(&self, t: &str) -> Value {
        json!({"turnId": t, "commandId": self.turns.get(t).map(|x| x.cid.clone()).unwrap_or_default()})
    }

    /// What a snapshot at this point shows.
    pub fn view(&self) -> View {
        View {
            head: self.head,
            active: self
                .running
                .as_deref()
                .map_or(Value::Null, |t| self.turn_ref(t)),
            queued: Value::Array(self.queue.iter().map(|t| self.turn_ref(t)).collect()),
            pending_approvals: self.pending_approvals_value(),
            items: Value::Array(self.items.clone()),
            turn_count: self.turn_count,
            revision: self.revision,
            kv: Value::Object(self.kv.clone()),
            pending_commands: self.pending_commands(),
        }
    }

    /// `pendingApprovals` of a snapshot.
    fn pending_approvals_value(&self) -> Value {
        Value::Array(
            self.pending_approvals()
                .iter()
                .map(|a| json!({"approvalId": a.params["approvalId"], "itemId": a.item, "viewCursor": a.params["viewCursor"]}))
                .collect(),
        )
    }

    fn upsert_item(&mut self, item: &Value) {
        let id = s(&item["itemId"]);
        let mut text = String::new();
        wire::canonical(item, &mut text);
        // (Once untrusted, always: such an item is too rare to track.)
        self.items_untrusted |= !wire::round_trips(item);
        match self.item_at.get(&id) {
            Some(i) => {
                self.items[*i] = item.clone();
                self.items_text[*i] = text;
            }
            None => {
                self.item_at.insert(id, self.items.len());
                self.items.push(item.clone());
                self.items_text.push(text);
            }
        }
    }

    /// Whether `text` is exactly the model's items written out canonically
    /// (the form serde_json writes an object whose members are sorted, as
    /// a host's are) and their texts are trusted: then it parses to exactly
    /// the model's items.
    fn items_are(&self, text: &str) -> bool {
        self.items_texts()
            .is_some_and(|t| wire::is_array_of(text, t))
    }

    /// The model's items written out canonically, for a read's items to be
    /// compared with as text (`wire::Keep::ItemsAsText`); `None` when some
    /// item's text is not trusted to parse back to it.
    pub fn items_texts(&self) -> Option<&[String]> {
        (!self.items_untrusted).then_some(self.items_text.as_slice())
    }

    /// The item with this id, latest revision.
    pub fn item(&self, id: &str) -> Option<&Value> {
        self.item_at.get(id).map(|i| &self.items[*i])
    }

    /// Ephemeral: an accepted command's event has not been seen yet, one
    /// its host emits with the answer (not a queued turn's launch). The
    /// model knows an ephemeral session only by the events its host sent:
    /// when the link that was to carry that event closed before it left,
    /// nobody saw it, and the model's state lags the host's (a later
    /// `state/update` judged against the revision before). While it lags,
    /// its admissions are not judged, as a [`Sess::blind`] session's.
    pub fn lags(&self) -> bool {
        self.owing.iter().any(|k| {
            let i = &self.ledger[k];
            match &i.owed {
                Some(Owed::Launch(_)) => i
                    .answer
                    .as_ref()
                    .is_ok_and(|r| r["disposition"] != "queued"),
                Some(_) => true,
                None => false,
            }
        })
    }

    /// Adds (or replaces) the intake under key `k`, keeping the indexes of
    /// the unsettled and the owing intakes.
    fn put_intake(&mut self, k: String, i: Intake) {
        if i.settled.is_none() {
            self.unsettled.insert(k.clone());
        } else {
            self.unsettled.remove(&k);
        }
        if i.owed.is_some() {
            self.owing.insert(k.clone());
        } else {
            self.owing.remove(&k);
        }
        self.ledger.insert(k, i);
    }

    /// Whether `index` holds exactly the keys of the intakes `holds` is
    /// true of (what a walk of the ledger would find).
    fn indexes(&self, index: &BTreeSet<String>, holds: fn(&Intake) -> bool) -> bool {
        index
            .iter()
            .eq(self.ledger.iter().filter(|(_, i)| holds(i)).map(|(k, _)| k))
    }

    /// The intakes not settled yet, in key order.
    fn unsettled_intakes(&self) -> impl Iterator<Item = &Intake> {
        debug_assert!(
            self.indexes(&self.unsettled, |i| i.settled.is_none()),
            "the unsettled index lists every unsettled intake"
        );
        self.unsettled.iter().map(|k| &self.ledger[k])
    }

    fn intake_mut(&mut self, cid: &str) -> Option<&mut Intake> {
        self.ledger.get_mut(&wire::key(cid))
    }

    /// Records that command `cid`'s promised effect `o` was seen.
    fn pay(&mut self, cid: &str, o: &Owed) {
        if let Some(i) = self.intake_mut(cid) {
            i.effect = true;
            if i.owed.as_ref() == Some(o) {
                i.owed = None;
                self.owing.remove(&wire::key(cid));
            }
        }
    }

    fn check_not_terminal(&self, rep: &mut Report, cid: &str, what: &str) {
        if let Some(i) = self.ledger.get(&wire::key(cid)) {
            match &i.settled {
                Some(Settle::Abandoned) => rep.fail(
                    "acked-effect",
                    &format!("abandoned-effect {cid}"),
                    format!(
                        "{} {cid} was settled abandoned, yet {what} appears",
                        i.method
                    ),
                ),
                Some(Settle::Rejected(_))
                    if i.method != "turn/start" || what != "its launch failure" =>
                {
                    rep.fail(
                        "acked-effect",
                        &format!("rejected-effect {cid}"),
                        format!(
                            "{} {cid} was settled rejected, yet {what} appears",
                            i.method
                        ),
                    )
                }
                _ => {}
            }
        }
    }

    // ----- the intake pair ------------------------------------------------

    /// A `received` record (or, on an ephemeral host, the first recorded
    /// answer): checks it against the state at admission, then records
    /// the intake and what its ack promises. `sig` is
    /// `wire::signature(method, params)` (or `""` when it has none), which
    /// every caller has computed already.
    #[allow(clippy::too_many_arguments)]
    pub fn admit(
        &mut self,
        rep: &mut Report,
        cid: &str,
        method: &str,
        params: &Value,
        sig: String,
        (answer, items): (Result<Value, Value>, Option<String>),
        decided: bool,
    ) {
        let k = wire::key(cid);
        if self.ledger.contains_key(&k) {
            rep.fail(
                "durable-dedupe",
                &format!("twice {k}"),
                format!("{method} {cid} has a second intake in session {}: its first was not deduplicated", self.id),
            );
            return;
        }
        // A start admits only the session's own creator (a replay, or its
        // intake lost to a torn write); any other id is refused
        // `session_id_conflict`, which records nothing (PROTOCOL.md 4.1).
        if let Some(start) = self
            .start_cid
            .as_deref()
            .filter(|s| method == "session/start" && wire::key(s) != k)
        {
            rep.fail(
                "admission-decision",
                &format!("start-other {k}"),
                format!(
                    "session/start {cid} was admitted in session {}, which session/start {start} created: a start of an existing session under another id is refused session_id_conflict",
                    self.id
                ),
            );
        }
        if decided {
            self.judge_admission(rep, cid, method, params, &answer);
        }
        // On a durable host the intake's place in the log is exact: what
        // the answer shows is the state right there. (An ephemeral host's
        // answers are judged by window, in the caller.)
        if method == "session/resume" && answer.is_ok() && self.resumed_at.is_none() {
            // Its own answer already says `replay`.
            self.resumed_at = Some(rep.at);
        }
        if let (Ok(r), true) = (&answer, self.durable) {
            match method {
                "session/resume" => self.judge_resume(rep, cid, params, r, items.as_deref()),
                "session/start" => self.judge_session(
                    rep,
                    &format!("start {}", wire::key(cid)),
                    &r["session"],
                    true,
                ),
                _ => {}
            }
        }
        self.next_seq += 1;
        let mut owed = None;
        if let Ok(r) = &answer {
            match method {
                "turn/start" => {
                    let t = s(&r["turnId"]);
                    match r["disposition"].as_str() {
                        Some("queued") => {
                            self.queue.push(t.clone());
                            self.new_turn(&t, cid, params, TurnSt::Queued);
                            rep.hit("4.3 turn/start queued");
                        }
                        Some("steered") => owed = Some(Owed::Steer(t)),
                        _ => {
                            self.new_turn(&t, cid, params, TurnSt::Queued);
                            owed = Some(Owed::Launch(t));
                        }
                    }
                }
                "turn/steer" => owed = Some(Owed::Steer(s(&r["turnId"]))),
                "turn/unqueue" => owed = Some(Owed::Unqueue(s(&r["turnId"]))),
                "approval/decide" => {
                    let decision = if params["choiceId"] == "approve" {
                        "approved"
                    } else {
                        "denied"
                    };
                    owed = Some(Owed::Resolve(
                        s(&params["approvalId"]),
                        decision.to_string(),
                    ));
                }
                "state/update" => owed = Some(Owed::Update(r["revision"].as_u64().unwrap_or(0))),
                _ => {}
            }
        }
        self.put_intake(
            k,
            Intake {
                cid: cid.to_string(),
                method: method.to_string(),
                params: params.clone(),
                sig,
                answer,
                // An array's text (the caller's promise), kept without its
                // brackets.
                answer_items: items.map(|t| t[1..t.len() - 1].to_string()),
                settled: None,
                effect: false,
                owed,
                seq: self.next_seq,
                at: rep.at,
                writer: None,
            },
        );
    }

    fn new_turn(&mut self, t: &str, cid: &str, params: &Value, st: TurnSt) {
        let text = agent::input_text(params);
        self.turns.insert(
            t.to_string(),
            Turn {
                cid: cid.to_string(),
                script: agent::script(&text),
                text,
                st,
                started_ms: None,
                steers: Vec::new(),
                user_message: false,
                message_done: false,
                message_cut: None,
                tool: None,
                launched_by: None,
                retries: Vec::new(),
                failure: None,
            },
        );
    }

    /// The admission decision of PROTOCOL.md 4.1-4.3 for a command admitted
    /// in the model's current state, compared with what was recorded.
    fn judge_admission(
        &self,
        rep: &mut Report,
        cid: &str,
        method: &str,
        p: &Value,
        answer: &Result<Value, Value>,
    ) {
        let expected = self.expected(cid, method, p);
        let subject = format!("admit {}", wire::key(cid));
        match (expected, answer) {
            (Expected::Ack(want), Ok(got)) => {
                let got_cmp = strip_unknowable(method, got);
                rep.check(got_cmp == want, "admission-decision", &subject, || {
                    format!("{method} {cid}: in this state the ack must be {want}, the host recorded {got}")
                });
            }
            (Expected::Reject(reason, extra), Err(e)) => {
                let ok = wire::rejection(e) == Some(reason)
                    && e["data"]["commandId"] == json!(cid)
                    && extra.as_ref().is_none_or(|(k, v)| e["data"][k] == *v);
                rep.check(ok, "admission-decision", &subject, || {
                    format!("{method} {cid}: in this state the answer must be rejection {reason} {extra:?}, the host recorded {e}")
                });
            }
            (Expected::Any, _) => {}
            (want, got) => rep.fail(
                "admission-decision",
                &subject,
                format!("{method} {cid}: in this state the answer must be {want:?}, the host recorded {got:?}"),
            ),
        }
        if let Ok(r) = answer {
            match r["disposition"].as_str() {
                Some("started") if p["ifBusy"] == "replace" && self.busy() => {
                    rep.hit("4.3 turn/start replace")
                }
                Some("started") => rep.hit("4.3 turn/start started"),
                Some("steered") => rep.hit("4.3 turn/start steered"),
                _ => {}
            }
            match method {
                "turn/steer" => rep.hit("4.3 turn/steer accepted"),
                "turn/unqueue" => rep.hit("4.3 turn/unqueue accepted"),
                "state/update" => rep.hit("4.1 state/update accepted"),
                "approval/decide" => rep.hit("4.1 approval/decide accepted"),
                _ => {}
            }
        }
        if let Err(e) = answer {
            match wire::rejection(e) {
                Some("already_launched") => rep.hit("3 reject already_launched"),
                Some("already_terminal") => rep.hit("3 reject already_terminal"),
                Some("missing_run") => rep.hit("3 reject missing_run"),
                Some("missing_task") => rep.hit("3 reject missing_task"),
                Some("not_running") => rep.hit("3 reject not_running"),
                Some("queue_full") => rep.hit("3 reject queue_full"),
                Some("stale_revision") => rep.hit("3 reject stale_revision"),
                _ => {}
            }
        }
    }

    /// A `Session` object (PROTOCOL.md 4.5) against the state now: `loaded`
    /// when the answering host has the session loaded.
    pub fn judge_session(&self, rep: &mut Report, subject: &str, v: &Value, loaded: bool) {
        self.judge_session_since(rep, subject, v, loaded, rep.at);
    }

    /// [`Sess::judge_session`] of an object that may show the session as
    /// it was at any point since trace index `since` (a read of the file
    /// asked for then): a resume made durable after `since` may be
    /// missing from it.
    pub fn judge_session_since(
        &self,
        rep: &mut Report,
        subject: &str,
        v: &Value,
        loaded: bool,
        since: usize,
    ) {
        let status = match (loaded, &self.running) {
            (false, _) => "notLoaded",
            (true, Some(_)) => "running",
            (true, None) => "idle",
        };
        let path = || {
            if self.durable {
                format!(
                    "{}/sessions/{}/session.log",
                    crate::process::DATA_DIR,
                    self.id
                )
            } else {
                String::new()
            }
        };
        let want = || {
            let mut want = json!({
                "sessionId": self.id,
                "status": status,
                "turnCount": self.turn_count,
                "path": path(),
                "workspaceRoot": self.workspace_root,
                "providerId": "msp",
                "modelId": "scripted",
                "forkedFrom": null,
                "activeTurnId": self.running,
            });
            if let Some(ms) = self.created_at_ms {
                want["createdAt"] = json!(iso8601(ms));
            }
            want
        };
        // `v` without `updatedAt`, `approvalMode` (and `createdAt` when the
        // model has none) must be `want()`: compared member by member in
        // place, with no copy of either.
        let judged = |k: &str| {
            k != "updatedAt"
                && k != "approvalMode"
                && (self.created_at_ms.is_some() || k != "createdAt")
        };
        let text =
            |o: &Map<String, Value>, k: &str, x: &str| o.get(k).and_then(Value::as_str) == Some(x);
        let same = v.as_object().is_some_and(|o| {
            o.keys().filter(|k| judged(k)).count() == 9 + usize::from(self.created_at_ms.is_some())
                && text(o, "sessionId", &self.id)
                && text(o, "status", status)
                && o.get("turnCount").and_then(Value::as_u64) == Some(self.turn_count)
                && o.get("path")
                    .and_then(Value::as_str)
                    .is_some_and(|p| self.is_path(p))
                && o.get("workspaceRoot") == Some(&self.workspace_root)
                && text(o, "providerId", "msp")
                && text(o, "modelId", "scripted")
                && o.get("forkedFrom") == Some(&Value::Null)
                && match &self.running {
                    Some(t) => text(o, "activeTurnId", t),
                    None => o.get("activeTurnId") == Some(&Value::Null),
                }
                && self.created_at_ms.is_none_or(|ms| {
                    o.get("createdAt")
                        .and_then(Value::as_str)
                        .is_some_and(|c| is_iso8601(c, ms))
                })
        });
        let mode_ok = v["approvalMode"]["mode"] == "promptUnmatched"
            && self.source_ok(v["approvalMode"]["source"].as_str(), since)
            && v["updatedAt"].as_str() >= v["createdAt"].as_str();
        rep.check(same && mode_ok, "read-consistency", subject, || {
            format!(
                "session {}: Session object {v} where the model has {}",
                self.id,
                want()
            )
        });
    }

    /// Whether `src` is the `approvalMode.source` a `Session` object
    /// showing the session as of some point since trace index `since` may
    /// carry: `replay` once a resume is durable (or at least written),
    /// `startup` while none was durable. A session the model cannot
    /// follow may say either.
    fn source_ok(&self, src: Option<&str>, since: usize) -> bool {
        let followed = self.durable && !self.blind;
        match src {
            Some("startup") => !followed || self.resumed_at.is_none_or(|at| at > since),
            Some("replay") => !followed || self.resumed_at.is_some() || self.resume_appended,
            _ => false,
        }
    }

    /// Whether `p` is the session's `path` (as `judge_session` writes it
    /// out for a failure's message), compared in place.
    fn is_path(&self, p: &str) -> bool {
        if !self.durable {
            return p.is_empty();
        }
        p.strip_prefix(crate::process::DATA_DIR)
            .and_then(|r| r.strip_prefix("/sessions/"))
            .and_then(|r| r.strip_prefix(self.id.as_str()))
            == Some("/session.log")
    }

    /// A `session/resume` answer, judged where its intake sits in the log:
    /// the snapshot is the state right there. `items`: its snapshot's
    /// items as text, `null` in their place in `r` (see
    /// [`Sess::judge_snapshot`]).
    fn judge_resume(&self, rep: &mut Report, cid: &str, p: &Value, r: &Value, items: Option<&str>) {
        let subject = format!("resume {}", wire::key(cid));
        self.judge_session(rep, &subject, &r["session"], true);
        rep.check(
            r["viewCursor"] == json!(self.cursor(self.head)),
            "read-consistency",
            &subject,
            || {
                format!(
                    "session {}: resume answered viewCursor {} at head #{}",
                    self.id, r["viewCursor"], self.head
                )
            },
        );
        match p["cursor"].as_str() {
            Some(c) => {
                let known = wire::cursor_of(&self.id, c).is_some_and(|(n, _)| n <= self.head);
                let want = wire::no_history("cursorSuffix");
                rep.check(
                    known && r["history"] == want,
                    "read-consistency",
                    &subject,
                    || {
                        format!(
                            "session {}: resume from cursor {c} (head #{}) answered history {}",
                            self.id, self.head, r["history"]
                        )
                    },
                );
            }
            None if wire::asks_exclude_items(p) => {
                let want = wire::no_history("excluded");
                rep.check(r["history"] == want, "read-consistency", &subject, || {
                    format!(
                        "session {}: resume with excludeItems answered history {}",
                        self.id, r["history"]
                    )
                });
            }
            None => {
                let h = &r["history"];
                let shape = h["mode"] == "snapshot" && h["items"].is_null();
                rep.check(shape, "read-consistency", &subject, || {
                    format!("session {}: snapshot resume answered history {h}", self.id)
                });
                self.judge_snapshot(rep, &subject, &h["snapshot"], items, true);
            }
        }
        self.judge_pending_requests(rep, &subject, &r["pendingRequests"]);
    }

    /// `pendingRequests`: the pending approvals as pointers.
    pub fn judge_pending_requests(&self, rep: &mut Report, subject: &str, v: &Value) {
        let want: Vec<Value> = self
            .pending_approvals()
            .iter()
            .map(|a| json!({"kind": "approval", "approvalId": a.params["approvalId"], "viewCursor": a.params["viewCursor"]}))
            .collect();
        rep.check(
            *v == Value::Array(want.clone()),
            "read-consistency",
            subject,
            || {
                format!(
                    "session {}: pendingRequests {v} where the model has {want:?}",
                    self.id
                )
            },
        );
    }

    /// A `ViewSnapshot` against the state now. `ledger_exact`: the point
    /// is exact for intakes too (a resume's own place in the log), so
    /// `queuedTurns` and `pendingCommands` are judged. `items_text`: the
    /// snapshot's `state.items` kept as JSON text, a `null` in their place
    /// in `snap` (see `wire::Keep::ItemsAsText`): the model's items when
    /// it is exactly their canonical text (which parses to exactly them);
    /// any other text is parsed and put in place, and the whole judged as
    /// a value.
    pub fn judge_snapshot(
        &self,
        rep: &mut Report,
        subject: &str,
        snap: &Value,
        items_text: Option<&str>,
        ledger_exact: bool,
    ) {
        if let Some(t) = items_text.filter(|t| !self.items_are(t)) {
            let mut whole = snap.clone();
            whole["state"]["items"] = serde_json::from_str(t).expect("checked when read");
            return self.judge_snapshot(rep, subject, &whole, None, ledger_exact);
        }
        let st = &snap["state"];
        // The host's state without the members not judged here, compared
        // member by member in place with the model's (a snapshot grows
        // with its session: no copy of it is made, and the model's side
        // is written out as a `Value` only for a failure's message).
        let judged = |k: &str| {
            k != "approvalMode" && (ledger_exact || (k != "queuedTurns" && k != "pendingCommands"))
        };
        if ledger_exact {
            rep.hit("4.4 pendingCommands read");
        }
        let same = st.as_object().is_some_and(|g| {
            let members = if ledger_exact { 14 } else { 12 };
            g.keys().filter(|k| judged(k)).count() == members
                && (items_text.is_some()
                    || g.get("items").and_then(Value::as_array).map(Vec::as_slice)
                        == Some(self.items.as_slice()))
                && self.snapshot_state_is(g, ledger_exact)
        });
        let head_ok = snap["schemaVersion"] == json!(1)
            && snap["viewCursor"] == json!(self.cursor(self.head));
        rep.check(same && head_ok, "read-consistency", subject, || {
            let mut want = self.snapshot_want(ledger_exact);
            if !same {
                want["items"] = Value::Array(self.items.clone());
            }
            let mut got = st.clone();
            if let Some(o) = got.as_object_mut() {
                o.retain(|k, _| judged(k));
                if items_text.is_some() {
                    o.insert("items".into(), Value::Array(self.items.clone()));
                }
            }
            let diff: Vec<String> = want
                .as_object()
                .map(|w| {
                    w.iter()
                        .filter(|(k, x)| got.get(k.as_str()) != Some(x))
                        .map(|(k, x)| {
                            format!(
                                "{k}: host {} model {x}",
                                got.get(k.as_str()).cloned().unwrap_or(Value::Null)
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "session {}: snapshot at #{} differs from the model: {}",
                self.id,
                self.head,
                diff.join("; ")
            )
        });
    }

    /// A snapshot's `state` as the model has it, `items` aside (and with
    /// `queuedTurns` and `pendingCommands` when `ledger_exact`).
    fn snapshot_want(&self, ledger_exact: bool) -> Value {
        let mut want = json!({
            "activeTurn": self.running.as_deref().map_or(Value::Null, |t| self.turn_ref(t)),
            "pendingApprovals": self.pending_approvals_value(),
            "pendingUserInputs": [],
            "effectiveModel": {"modelId": "scripted", "providerId": "msp", "source": "default"},
            "goal": null, "todoList": null, "branch": null,
            "tokenUsage": {"promptTokens": 0, "outputTokens": 0, "totalTokens": 0},
            "turnCount": self.turn_count,
            "revision": self.revision,
            "kv": Value::Object(self.kv.clone()),
        });
        if ledger_exact {
            want["queuedTurns"] =
                Value::Array(self.queue.iter().map(|t| self.turn_ref(t)).collect());
            want["pendingCommands"] = self.pending_commands();
        }
        want
    }

    /// Whether every member of [`Sess::snapshot_want`] is in `g` with the
    /// same value, compared in place (no `Value` is built).
    fn snapshot_state_is(&self, g: &Map<String, Value>, ledger_exact: bool) -> bool {
        let text = |v: &Value, k: &str, x: &str| v.get(k).and_then(Value::as_str) == Some(x);
        let zero = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64) == Some(0);
        let turn_ref = |v: &Value, t: &str| {
            v.as_object().is_some_and(|o| o.len() == 2)
                && text(v, "turnId", t)
                && text(
                    v,
                    "commandId",
                    self.turns.get(t).map_or("", |x| x.cid.as_str()),
                )
        };
        let array = |k: &str| g.get(k).and_then(Value::as_array).map(Vec::as_slice);
        let pending = self.pending_approvals();
        let approvals_ok = array("pendingApprovals").is_some_and(|got| {
            got.len() == pending.len()
                && got.iter().zip(&pending).all(|(v, a)| {
                    v.as_object().is_some_and(|o| o.len() == 3)
                        && v.get("approvalId") == Some(&a.params["approvalId"])
                        && text(v, "itemId", &a.item)
                        && v.get("viewCursor") == Some(&a.params["viewCursor"])
                })
        });
        let ledger_ok = !ledger_exact || {
            let mut intakes: Vec<&Intake> = self
                .ledger
                .values()
                .filter(|i| i.settled.is_none())
                .collect();
            intakes.sort_by_key(|i| i.seq);
            array("queuedTurns").is_some_and(|got| {
                got.len() == self.queue.len()
                    && got.iter().zip(&self.queue).all(|(v, t)| turn_ref(v, t))
            }) && array("pendingCommands").is_some_and(|got| {
                got.len() == intakes.len()
                    && got.iter().zip(&intakes).all(|(v, i)| {
                        v.as_object().is_some_and(|o| o.len() == 2)
                            && text(v, "commandId", &i.cid)
                            && text(v, "method", &i.method)
                    })
            })
        };
        let null = |k: &str| g.get(k) == Some(&Value::Null);
        let object = |k: &str, n: usize| {
            g.get(k)
                .and_then(Value::as_object)
                .is_some_and(|o| o.len() == n)
        };
        let u64_is = |k: &str, n: u64| g.get(k).and_then(Value::as_u64) == Some(n);
        let active_ok = match (&self.running, g.get("activeTurn")) {
            (None, v) => v == Some(&Value::Null),
            (Some(t), Some(v)) => turn_ref(v, t),
            (Some(_), None) => false,
        };
        let member = |k: &str| g.get(k).unwrap_or(&Value::Null);
        let (model, tokens) = (member("effectiveModel"), member("tokenUsage"));
        active_ok
            && approvals_ok
            && array("pendingUserInputs").is_some_and(<[Value]>::is_empty)
            && object("effectiveModel", 3)
            && text(model, "modelId", "scripted")
            && text(model, "providerId", "msp")
            && text(model, "source", "default")
            && null("goal")
            && null("todoList")
            && null("branch")
            && object("tokenUsage", 3)
            && zero(tokens, "promptTokens")
            && zero(tokens, "outputTokens")
            && zero(tokens, "totalTokens")
            && u64_is("turnCount", self.turn_count)
            && u64_is("revision", self.revision)
            && g.get("kv").and_then(Value::as_object) == Some(&self.kv)
            && ledger_ok
    }

    /// What PROTOCOL.md prescribes for a command admitted now.
    pub fn expected(&self, cid: &str, method: &str, p: &Value) -> Expected {
        match method {
            "turn/start" => {
                let if_busy = p["ifBusy"].as_str().unwrap_or("queue");
                match turn_start_expect(cid, if_busy, self.running.as_deref(), self.queue.len()) {
                    Ok(a) => Expected::Ack(a),
                    Err(r) => Expected::Reject(r, None),
                }
            }
            "turn/steer" | "turn/unqueue" | "turn/interrupt" | "turn/cancel" => {
                let field = if method == "turn/steer" {
                    "expectedTurnId"
                } else {
                    "turnId"
                };
                let t = match p[field].as_str() {
                    Some(t) => t.to_string(),
                    None => match &self.running {
                        Some(r) => r.clone(),
                        None => return Expected::Reject("missing_run", None),
                    },
                };
                match turn_target(self.turn_st(&t), method == "turn/unqueue") {
                    Ok(()) => {
                        Expected::Ack(json!({"commandId": cid, "status": "accepted", "turnId": t}))
                    }
                    Err(r) => Expected::Reject(r, None),
                }
            }
            "task/stop" => {
                let t = s(&p["taskId"]);
                match self.tasks.get(&t) {
                    None => Expected::Reject("missing_task", None),
                    Some(TaskSt::Ended(_)) => Expected::Reject("already_terminal", None),
                    Some(TaskSt::Running { .. }) => {
                        Expected::Ack(json!({"commandId": cid, "status": "accepted", "taskId": t}))
                    }
                }
            }
            "task/stopAll" => Expected::Ack(json!({"commandId": cid, "status": "accepted"})),
            "state/update" => {
                let e = p["expectedRevision"].as_u64();
                if e == Some(self.revision) {
                    Expected::Ack(
                        json!({"commandId": cid, "status": "accepted", "revision": self.revision + 1}),
                    )
                } else {
                    Expected::Reject(
                        "stale_revision",
                        Some(("currentRevision", json!(self.revision))),
                    )
                }
            }
            "approval/decide" => {
                let a = s(&p["approvalId"]);
                match self.approvals.get(&a) {
                    Some(ap) if ap.resolved.is_none() => {
                        let req = &p["requirementId"];
                        if req["approvalId"] != json!(a) || req["sourceIndex"] != json!(0) {
                            Expected::Error(-32053)
                        } else if !matches!(p["choiceId"].as_str(), Some("approve" | "deny")) {
                            Expected::Error(-32052)
                        } else {
                            Expected::Ack(
                                json!({"commandId": cid, "status": "accepted", "approvalId": a, "terminal": true}),
                            )
                        }
                    }
                    Some(_) => Expected::Error(-32051),
                    None => Expected::Error(-32050),
                }
            }
            _ => Expected::Any,
        }
    }

    /// A `settled` record.
    pub fn settle(&mut self, rep: &mut Report, cid: &str, outcome: Settle) {
        let k = wire::key(cid);
        let recovering = self.recovering;
        // Read in place: an intake holds its recorded answer (for a resume
        // a whole snapshot).
        let Some(i) = self.ledger.get(&k) else {
            rep.fail(
                "intake-settled",
                &format!("orphan {k}"),
                format!("settled record of {cid}, which has no intake"),
            );
            return;
        };
        if i.settled.is_some() {
            rep.fail(
                "intake-settled",
                &format!("twice {k}"),
                format!("{} {cid} settled twice", i.method),
            );
            return;
        }
        let queued_turn = i.method == "turn/start"
            && i.answer
                .as_ref()
                .is_ok_and(|r| r["disposition"] == "queued");
        match &outcome {
            Settle::Applied => {
                rep.hit("4.4 settled applied");
                let ok = match i.method.as_str() {
                    "turn/start" => {
                        i.effect
                            || (queued_turn
                                && matches!(self.turn_st(&i.cid), Some(TurnSt::Unqueued)))
                    }
                    // The rest settle with their ack; their effect is
                    // recorded with the intake (checked by `check_owed`).
                    _ => i.answer.is_ok(),
                };
                rep.check(ok, "intake-settled", &format!("applied {k}"), || {
                    format!("{} {cid} settled applied, but its effect is not in the log before it (owed {:?})", i.method, i.owed)
                });
            }
            Settle::Rejected(e) => {
                rep.hit("4.4 settled rejected");
                let launch = i.method == "turn/start"
                    && matches!(self.turn_st(&i.cid), Some(TurnSt::LaunchFailed))
                    && i.answer.is_ok();
                let ok = match &i.answer {
                    Err(a) => a == e,
                    Ok(_) if launch => {
                        let want = if queued_turn {
                            "deferred_start_failed"
                        } else {
                            "launch_failed"
                        };
                        // Its message is the launch failure's text, as
                        // every replay will answer it (PROTOCOL.md 3).
                        let text = self.turns.get(&i.cid).and_then(|t| t.failure.as_deref());
                        wire::rejection(e) == Some(want) && text.is_some_and(|x| e["message"] == x)
                    }
                    Ok(_) => false,
                };
                rep.check(ok, "intake-settled", &format!("rejected {k}"), || {
                    format!("{} {cid} settled rejected {e}, which neither its admission nor a failed launch explains", i.method)
                });
            }
            Settle::Abandoned => {
                rep.hit("4.4 settled abandoned");
                rep.check(recovering, "recovery", &format!("abandon-live {k}"), || {
                    format!(
                        "{} {cid} settled abandoned outside recovery (its host had not died)",
                        i.method
                    )
                });
                rep.check(!i.effect, "recovery", &format!("abandon-effect {k}"), || {
                    format!("{} {cid} settled abandoned although its effect was recorded (must be applied)", i.method)
                });
                rep.check(!queued_turn, "recovery", &format!("abandon-queued {k}"), || {
                    format!("queued turn/start {cid} settled abandoned: a queued submit stays queued and pending")
                });
            }
        }
        if let Some(x) = self.ledger.get_mut(&k) {
            x.settled = Some(outcome);
            self.unsettled.remove(&k);
        }
    }

    // ----- lifecycle --------------------------------------------------------

    /// A record of a new life after a dead holder: recovery starts.
    pub fn begin_recovery(&mut self) {
        self.recovering = true;
    }

    /// Recovery must be complete before the new life does anything else.
    pub fn end_recovery(&mut self, rep: &mut Report) {
        if !self.recovering {
            return;
        }
        self.recovering = false;
        let id = self.id.clone();
        if let Some(t) = &self.running {
            rep.fail("recovery", &format!("running {t}"), format!("session {id}: turn {t} was running when its host died and recovery did not end it"));
        }
        if let Some(a) = self.pending_approvals().first() {
            let a = s(&a.params["approvalId"]);
            rep.fail("recovery", &format!("approval {a}"), format!("session {id}: approval {a} was pending when its host died and recovery did not resolve it"));
        }
        if let Some((t, _)) = self
            .tasks
            .iter()
            .find(|(_, st)| matches!(st, TaskSt::Running { .. }))
        {
            rep.fail("recovery", &format!("task {t}"), format!("session {id}: task {t} was running when its host died and recovery did not end it"));
        }
        let open: Vec<(String, String)> = self
            .unsettled_intakes()
            .filter(|i| {
                !(i.method == "turn/start"
                    && matches!(self.turn_st(&i.cid), Some(TurnSt::Queued))
                    && self.queue.contains(&i.cid))
            })
            .map(|i| (i.cid.clone(), i.method.clone()))
            .collect();
        for (cid, m) in open {
            rep.fail("recovery", &format!("unsettled {cid}"), format!("session {id}: {m} {cid} was unsettled when its host died and recovery left it pending"));
        }
        for t in &self.queue {
            rep.hit("4.4 recovery kept a queued submit");
            let _ = t;
        }
    }

    /// No approval pending and no task running (half of PROTOCOL.md 4.1's
    /// idleness; the other half is no turn running or queued).
    fn quiet(&self) -> bool {
        self.pending_approvals().is_empty()
            && !self
                .tasks
                .values()
                .any(|t| matches!(t, TaskSt::Running { .. }))
    }

    /// Idle as far as the durable log tells (PROTOCOL.md 4.1, less the
    /// subscriptions, which the log does not hold): no turn running or
    /// queued, no task running, no approval pending.
    pub fn idle(&self) -> bool {
        self.running.is_none() && self.queue.is_empty() && self.quiet()
    }

    /// A `closed` record: the life ends; an idle unload happens only when
    /// the session is idle (PROTOCOL.md 4.1), a shutdown only after every
    /// live thing ended.
    pub fn close(&mut self, rep: &mut Report, reason: &str) {
        self.end_recovery(rep);
        let id = self.id.clone();
        // A shutdown ends the live work (the running turn, its items,
        // tasks, approvals) but leaves queued turns queued: accepted
        // commands, launched at the session's next load (as after a
        // recovery). An idle unload finds nothing queued.
        let idle = self.running.is_none()
            && (self.queue.is_empty() || reason == "hostShutdown")
            && self.quiet();
        rep.check(
            idle,
            "lease-unload",
            &format!("close {id} {}", self.head),
            || {
                format!(
                    "session {id} unloaded ({reason}) while not idle: running {:?}, queued {:?}",
                    self.running, self.queue
                )
            },
        );
        if reason == "idle" {
            rep.hit("4.1 idle unload");
        }
        self.open = false;
    }

    // ----- the stream ---------------------------------------------------------

    /// Judges and applies durable event `n` (and keeps its params, which
    /// it takes rather than copies).
    pub fn event(
        &mut self,
        rep: &mut Report,
        n: u64,
        method: &str,
        params: Value,
        at_ms: u64,
        origin: Origin,
    ) {
        let p = &params;
        let id = self.id.clone();
        if !rep.check_lazy(
            n == self.head + 1,
            "view-cursor-order",
            || format!("dense {id} {n}"),
            || {
                format!(
                    "session {id}: durable event #{n} follows #{} (ordinals are dense)",
                    self.head
                )
            },
        ) {
            return;
        }
        rep.check_lazy(
            p["viewCursor"]
                .as_str()
                .is_some_and(|c| is_cursor(c, &id, n))
                && p["sessionId"].as_str() == Some(id.as_str()),
            "cursor-uniqueness",
            || format!("names {id} {n}"),
            || {
                format!(
                    "session {id}: durable event #{n} carries viewCursor {} / sessionId {}",
                    p["viewCursor"], p["sessionId"]
                )
            },
        );
        self.head = n;
        self.judge_source_range(rep, n, method, p);
        Self::judge_minted_ids(rep, &id, n, method, p, at_ms);
        let recovery_event = self.recovering
            && matches!(
                method,
                "turn/completed" | "approval/resolved" | "item/completed"
            );
        if self.recovering && !recovery_event {
            self.end_recovery(rep);
        }
        match method {
            "turn/started" => self.turn_started(rep, p, at_ms, origin),
            "turn/completed" => self.turn_completed(rep, p, at_ms, origin),
            "turn/unqueued" => self.turn_unqueued(rep, p),
            "item/started" | "item/completed" => {
                self.item_event(rep, method, p, at_ms, origin.stopping)
            }
            "approval/requested" => self.approval_requested(rep, p),
            "approval/resolved" => self.approval_resolved(rep, p, origin.writer),
            "state/updated" => self.state_updated(rep, p),
            "turn/retryScheduled" => self.retry_scheduled(rep, p, at_ms),
            other => rep.fail(
                "turn-lifecycle",
                &format!("method {other}"),
                format!("session {id}: unexpected durable event {other}"),
            ),
        }
        // Kept after it is applied (no rule above reads `events`).
        self.events.insert(n, (method.to_string(), params));
    }

    /// The ids a durable event names that the host mints (PROTOCOL.md 2:
    /// `itemId` and `approvalId` are UUIDv7s from the host's injected
    /// clock and RNG): each a UUIDv7 whose millisecond timestamp is on
    /// the simulated clock, from its start to the event's own
    /// `emittedAtMs` (minted then or earlier, never from another clock).
    fn judge_minted_ids(rep: &mut Report, sid: &str, n: u64, method: &str, p: &Value, at_ms: u64) {
        let minted = [
            ("itemId", &p["item"]["itemId"]),
            ("itemId", &p["itemId"]),
            ("approvalId", &p["approvalId"]),
        ];
        for (field, v) in minted {
            let Some(text) = v.as_str() else {
                continue;
            };
            rep.check_lazy(
                minted_by_clock(text, at_ms),
                "id-minting",
                || format!("minted {sid} {n} {field}"),
                || format!("session {sid}: durable event #{n} ({method}) names {field} {text}, not a UUIDv7 minted by the host clock by its emittedAtMs {at_ms}"),
            );
        }
    }

    /// A durable event's `sourceRange` (PROTOCOL.md 4.5): a turn's run
    /// records on `{kind: "run", id: turnId}`, session-level records (a
    /// `toolCall` item's mirror, `turn/unqueued`, `turn/retryScheduled`,
    /// `state/updated`) on `{kind: "session", id: sessionId}`, an
    /// approval's review records on a stream of its own that its
    /// resolution shares. Sequences rise on each stream (the public
    /// transcripts skip values: records that are not view events), and no
    /// source record is named twice.
    fn judge_source_range(&mut self, rep: &mut Report, n: u64, method: &str, p: &Value) {
        let id = self.id.clone();
        let sr = &p["sourceRange"];
        let kind = sr["stream"]["kind"].as_str().unwrap_or_default();
        let sid = sr["stream"]["id"].as_str().unwrap_or_default();
        let review = "approval.review";
        let want: Option<(&str, String)> = match method {
            "turn/started" | "turn/completed" => Some(("run", s(&p["turnId"]))),
            "item/started" | "item/completed" if p["item"]["kind"] == "toolCall" => {
                Some(("session", id.clone()))
            }
            "item/started" | "item/completed" => Some(("run", s(&p["item"]["turnId"]))),
            "turn/unqueued" | "turn/retryScheduled" | "state/updated" => {
                Some(("session", id.clone()))
            }
            "approval/resolved" => self
                .approvals
                .get(&s(&p["approvalId"]))
                .map(|a| (review, s(&a.params["sourceRange"]["stream"]["id"]))),
            // A fresh review stream: named by no earlier record.
            _ => None,
        };
        let stream_ok = match &want {
            Some((k, i)) => kind == *k && sid == i,
            None => {
                method != "approval/requested"
                    || (kind == review
                        && !sid.is_empty()
                        && !self
                            .streams
                            .contains_key(&(kind.to_string(), sid.to_string())))
            }
        };
        rep.check_lazy(
            stream_ok,
            "view-cursor-order",
            || format!("stream {id} {n}"),
            || format!("session {id}: durable event #{n} {method} has sourceRange {sr}, not on {want:?}"),
        );
        let (Some(first), Some(last)) = (
            sr["first"]["sequence"].as_u64(),
            sr["last"]["sequence"].as_u64(),
        ) else {
            rep.fail(
                "view-cursor-order",
                &format!("range {id} {n}"),
                format!("session {id}: durable event #{n} {method} has no source sequence: {sr}"),
            );
            return;
        };
        let prev = self
            .streams
            .entry((kind.to_string(), sid.to_string()))
            .or_default();
        let rises = first > *prev && last >= first;
        let before = *prev;
        *prev = (*prev).max(last);
        rep.check_lazy(
            rises,
            "view-cursor-order",
            || format!("sequence {id} {n}"),
            || format!("session {id}: durable event #{n} {method} covers sequences {first}..={last} of stream {kind}/{sid}, which was at {before} (a stream's sequence rises)"),
        );
        let mut ids = vec![s(&sr["first"]["id"])];
        if sr["last"]["id"] != sr["first"]["id"] {
            ids.push(s(&sr["last"]["id"]));
        }
        for r in ids {
            let fresh = !r.is_empty() && self.record_ids.insert(r.clone());
            rep.check_lazy(
                fresh,
                "cursor-uniqueness",
                || format!("record {id} {n}"),
                || format!("session {id}: durable event #{n} {method} names source record {r:?}, which is empty or an earlier event's"),
            );
        }
    }

    fn turn_started(&mut self, rep: &mut Report, p: &Value, at_ms: u64, origin: Origin) {
        let id = self.id.clone();
        let t = s(&p["turnId"]);
        let c = s(&p["commandId"]);
        rep.check(t == c, "turn-id-derivation", &format!("derive {t}"), || {
            format!("session {id}: turn/started names turn {t} for command {c}; a launched turn's id is its command id")
        });
        let Some(turn) = self.turns.get(&t).cloned() else {
            rep.fail(
                "turn-lifecycle",
                &format!("unknown {t}"),
                format!("session {id}: turn/started of {t}, which no admitted turn/start named"),
            );
            return;
        };
        rep.check(
            turn.st == TurnSt::Queued,
            "exactly-once-effect",
            &format!("start {t}"),
            || {
                format!(
                    "session {id}: turn {t} started again (it was {:?})",
                    turn.st
                )
            },
        );
        if let Some(r) = &self.running {
            rep.fail(
                "turn-lifecycle",
                &format!("two {t}"),
                format!("session {id}: turn {t} started while {r} was still running"),
            );
        }
        if let Some(pos) = self.queue.iter().position(|q| *q == t) {
            if pos > 0 {
                rep.fail("turn-lifecycle", &format!("fifo {t}"), format!("session {id}: queued turn {t} launched ahead of {:?} (a submit never overtakes the queue)", &self.queue[..pos]));
            }
            self.queue.remove(pos);
            rep.hit("4.3 queued launch");
        }
        rep.check(!turn.script.fail_launch, "scripted-agent", &format!("faillaunch {t}"), || {
            format!("session {id}: turn {t} (`{}`) launched though its input asks for a failed launch", turn.text)
        });
        self.check_not_terminal(rep, &turn.cid, "its turn/started");
        let x = self.turns.get_mut(&t).expect("turn");
        x.st = TurnSt::Running;
        x.started_ms = Some(at_ms);
        x.launched_by = Some(origin.writer);
        self.running = Some(t.clone());
        let cid = turn.cid.clone();
        self.pay(&cid, &Owed::Launch(t));
    }

    fn turn_completed(&mut self, rep: &mut Report, p: &Value, at_ms: u64, origin: Origin) {
        let id = self.id.clone();
        let t = s(&p["turnId"]);
        let terminal = s(&p["terminal"]);
        let Some(turn) = self.turns.get(&t).cloned() else {
            rep.fail(
                "turn-lifecycle",
                &format!("unknown {t}"),
                format!("session {id}: turn/completed of {t}, which no admitted turn/start named"),
            );
            return;
        };
        match turn.st {
            TurnSt::Queued => {
                // A failed launch: no turn/started, an error of kind
                // launchError.
                // `reason` is the failure's text (PROTOCOL.md 4.3), the
                // same as the error's message.
                let ok = terminal == "failed"
                    && p["error"]["kind"] == "launchError"
                    && p["error"]["retryable"] == json!(true)
                    && p["error"]["message"].is_string()
                    && p["reason"] == p["error"]["message"];
                rep.check(ok, "turn-lifecycle", &format!("launchfail {t}"), || {
                    format!("session {id}: turn {t} completed without starting, and not as a failed launch: {p}")
                });
                rep.check(turn.script.fail_launch, "scripted-agent", &format!("nolaunch {t}"), || {
                    format!("session {id}: turn {t} (`{}`) failed its launch, which its input does not ask for", turn.text)
                });
                if let Some(r) = &self.running {
                    rep.fail(
                        "turn-lifecycle",
                        &format!("launch-while {t}"),
                        format!(
                            "session {id}: turn {t} launched (and failed) while {r} was running"
                        ),
                    );
                }
                if let Some(pos) = self.queue.iter().position(|q| *q == t) {
                    if pos > 0 {
                        rep.fail(
                            "turn-lifecycle",
                            &format!("fifo {t}"),
                            format!(
                                "session {id}: queued turn {t} launched ahead of {:?}",
                                &self.queue[..pos]
                            ),
                        );
                    }
                    self.queue.remove(pos);
                }
                rep.hit("4.3 failed launch");
                self.check_not_terminal(rep, &turn.cid, "its launch failure");
                let x = self.turns.get_mut(&t).expect("turn");
                x.st = TurnSt::LaunchFailed;
                x.failure = p["reason"].as_str().map(str::to_string);
                let cid = turn.cid.clone();
                self.pay(&cid, &Owed::Launch(t));
            }
            TurnSt::Running => {
                rep.check(
                    self.running.as_deref() == Some(t.as_str()),
                    "turn-lifecycle",
                    &format!("notrunning {t}"),
                    || {
                        format!(
                            "session {id}: turn/completed of {t}, which is not the running turn"
                        )
                    },
                );
                let ok_terminal = matches!(terminal.as_str(), "completed" | "failed" | "cancelled");
                rep.check(
                    ok_terminal,
                    "turn-lifecycle",
                    &format!("terminal {t}"),
                    || format!("session {id}: turn {t} ended with terminal {terminal:?}"),
                );
                if p["reason"] == "crash" {
                    rep.check(self.recovering && terminal == "failed" && p.get("error").is_none(), "recovery", &format!("crash {t}"), || {
                        format!("session {id}: turn {t} ended {p} outside recovery or not as failed/crash without error")
                    });
                    rep.hit("4.4 recovery ended a running turn");
                } else if self.recovering {
                    rep.fail(
                        "recovery",
                        &format!("crash-reason {t}"),
                        format!("session {id}: recovery ended turn {t} with {p}, not failed/crash"),
                    );
                }
                let model_failed = turn.script.retry_failures >= agent::RETRY_ATTEMPTS_MAX;
                if p["error"]["kind"] == "modelError" {
                    let ok = terminal == "failed"
                        && p["reason"].is_string()
                        && p["error"]["message"].is_string()
                        && model_failed
                        && turn.retries.len() as u64 == agent::RETRY_ATTEMPTS_MAX - 1
                        && !turn.message_done;
                    rep.hit("5 model error ended a turn");
                    rep.check(ok, "scripted-agent", &format!("modelerror {t}"), || {
                        format!(
                            "session {id}: turn {t} (`{}`) ended {p} after {} retries",
                            turn.text,
                            turn.retries.len()
                        )
                    });
                } else if terminal == "completed" {
                    rep.check(!model_failed, "scripted-agent", &format!("retry-bound {t}"), || {
                        format!("session {id}: turn {t} (`{}`) completed though its model attempts all fail", turn.text)
                    });
                    // Each failed attempt was scheduled for a retry first.
                    let retried = turn.retries.len() as u64;
                    rep.check(
                        model_failed || retried == turn.script.retry_failures,
                        "scripted-agent",
                        &format!("retries {t}"),
                        || {
                            format!(
                                "session {id}: turn {t} (`{}`) completed after {retried} retries",
                                turn.text
                            )
                        },
                    );
                } else if terminal == "failed" && p["reason"] != "crash" {
                    // A running turn fails only by its model attempts
                    // (PROTOCOL.md 5, `!retry N`) or by a crash (4.4): the
                    // first carries its `modelError` and why.
                    rep.fail("scripted-agent", &format!("failed {t}"), format!(
                        "session {id}: turn {t} (`{}`) ended {p}: neither a crash nor its model's error",
                        turn.text
                    ));
                }
                // A message cut short by its turn's end says how the turn
                // ended: an interrupted (or replaced) turn's open items
                // complete `cancelled` before its `turn/completed`
                // (golden transcript userinput-interrupt-round-trip), a
                // failed turn's `failed`.
                // (A crash ends a turn whose cut message and end were
                // torn apart: crash-storm seed 118 at 64 commands.)
                if let Some(cut) = turn.message_cut.as_ref().filter(|_| p["reason"] != "crash") {
                    rep.hit("5 agent message cut by its turn's end");
                    rep.check(*cut == terminal, "turn-lifecycle", &format!("am-cut {t}"), || {
                        format!("session {id}: turn {t} ended {terminal} after its agent message completed {cut}")
                    });
                }
                if terminal == "completed" {
                    rep.hit("4.3 turn/completed completed");
                    rep.check(
                        turn.message_done,
                        "scripted-agent",
                        &format!("msg {t}"),
                        || format!("session {id}: turn {t} completed without its agent message"),
                    );
                }
                if let Some(a) = self.pending_approvals().iter().find(|a| a.turn == t) {
                    rep.fail(
                        "turn-lifecycle",
                        &format!("appr-open {t}"),
                        format!(
                            "session {id}: turn {t} ended with approval {} still pending",
                            a.params["approvalId"]
                        ),
                    );
                }
                // A tool call whose approval was refused (denied, or
                // aborted with its turn) runs no effect: it completes
                // (`effectOutcome: notStarted`, PROTOCOL.md 5) before its
                // turn ends. Only an approved effect may still be in
                // flight; a crash may have torn the completion off.
                if p["reason"] != "crash" {
                    let open = self.approvals.values().find(|a| {
                        a.turn == t
                            && a.resolved.as_ref().is_some_and(|r| {
                                !r["decision"]
                                    .as_str()
                                    .unwrap_or_default()
                                    .starts_with("approved")
                            })
                            && self
                                .item(&a.item)
                                .is_some_and(|i| i["status"] == "inProgress")
                    });
                    if let Some(a) = open {
                        rep.fail(
                            "turn-lifecycle",
                            &format!("tool-open {t}"),
                            format!(
                                "session {id}: turn {t} ended with tool call {} in progress, though its approval was {}",
                                a.item, a.resolved.as_ref().map_or(Value::Null, |r| r["decision"].clone())
                            ),
                        );
                    }
                }
                if p.get("error").is_none()
                    && p["reason"] != "crash"
                    && p.get("durationMs").is_some()
                    && turn.launched_by == Some(origin.writer)
                {
                    if let Some(st) = turn.started_ms {
                        let want = at_ms.saturating_sub(st);
                        rep.check(p["durationMs"] == json!(want), "scripted-agent", &format!("duration {t}"), || {
                            format!("session {id}: turn {t} ran {want} ms but reports durationMs {}", p["durationMs"])
                        });
                    }
                }
                self.turns.get_mut(&t).expect("turn").st = TurnSt::Ended(terminal);
                self.running = None;
                // `turnCount`: turns that ran and ended (public `Session`).
                self.turn_count += 1;
            }
            _ => rep.fail(
                "turn-lifecycle",
                &format!("again {t}"),
                format!(
                    "session {id}: turn {t} completed again (it was {:?})",
                    turn.st
                ),
            ),
        }
    }

    /// `turn/retryScheduled`: a failed model attempt of a `!retry N` turn,
    /// below the attempt bound (PROTOCOL.md 5 and the public schema).
    fn retry_scheduled(&mut self, rep: &mut Report, p: &Value, at_ms: u64) {
        let id = self.id.clone();
        let t = s(&p["turnId"]);
        let running = self.running.as_deref() == Some(t.as_str());
        let Some(turn) = self.turns.get(&t).cloned().filter(|_| running) else {
            rep.fail(
                "turn-lifecycle",
                &format!("retry {t}"),
                format!("session {id}: turn/retryScheduled of {t}, which is not running"),
            );
            return;
        };
        let attempt = turn.retries.len() as u64 + 1;
        let want = json!({
            "turnId": t, "attempt": attempt, "nextAttempt": attempt + 1,
            "maxAttempts": agent::RETRY_ATTEMPTS_MAX, "retryDelayMs": agent::RETRY_DELAY_MS,
        });
        let mut got = p.clone();
        if let Some(o) = got.as_object_mut() {
            for k in ["sessionId", "viewCursor", "sourceRange", "reason"] {
                o.remove(k);
            }
        }
        let ok = got == want
            && p["reason"].is_string()
            && attempt <= turn.script.retry_failures
            && attempt < agent::RETRY_ATTEMPTS_MAX
            && !turn.message_done;
        rep.check(ok, "scripted-agent", &format!("retry {t} {attempt}"), || {
            format!("session {id}: {p} is not attempt {attempt} of turn {t} (`{}`) as its script schedules it", turn.text)
        });
        if let Some(prev) = turn.retries.last() {
            rep.check(at_ms >= prev + agent::RETRY_DELAY_MS, "scripted-agent", &format!("retry-wait {t}"), || {
                format!("session {id}: turn {t} retried {} ms after its previous failure, before the {} ms backoff", at_ms.saturating_sub(*prev), agent::RETRY_DELAY_MS)
            });
        }
        rep.hit("5 turn/retryScheduled");
        if let Some(x) = self.turns.get_mut(&t) {
            x.retries.push(at_ms);
        }
    }

    fn turn_unqueued(&mut self, rep: &mut Report, p: &Value) {
        let id = self.id.clone();
        let t = s(&p["turnId"]);
        let c = s(&p["commandId"]);
        let Some(turn) = self.turns.get(&t).cloned() else {
            rep.fail(
                "turn-lifecycle",
                &format!("unknown {t}"),
                format!("session {id}: turn/unqueued of {t}, which no admitted turn/start named"),
            );
            return;
        };
        rep.check(
            turn.st == TurnSt::Queued && self.queue.contains(&t),
            "turn-lifecycle",
            &format!("unqueue {t}"),
            || {
                format!(
                    "session {id}: turn/unqueued of {t}, which is {:?}, not queued",
                    turn.st
                )
            },
        );
        rep.check(
            c == turn.cid,
            "turn-lifecycle",
            &format!("unqueue-cid {t}"),
            || {
                format!(
                    "session {id}: turn/unqueued of {t} names command {c}, not its submit {}",
                    turn.cid
                )
            },
        );
        // `turn/unqueued` names the submit, not the unqueue that caused
        // it: an unqueue abandoned by a crash may be followed by a new one
        // of the same turn (mixed seed 2 at 256 commands per client). The
        // event is only wrong when every command that asked for it ended
        // without effect. (command id, whether it may still take effect)
        let owed = Owed::Unqueue(t.clone());
        let owers: Vec<(String, bool)> = self
            .ledger
            .values()
            .filter(|i| i.owed.as_ref() == Some(&owed))
            .map(|i| {
                let dead = matches!(i.settled, Some(Settle::Abandoned | Settle::Rejected(_)));
                (i.cid.clone(), !dead)
            })
            .collect();
        rep.check(
            !owers.is_empty(),
            "turn-lifecycle",
            &format!("unqueue-why {t}"),
            || format!("session {id}: turn {t} was unqueued without an accepted turn/unqueue"),
        );
        self.queue.retain(|q| *q != t);
        self.turns.get_mut(&t).expect("turn").st = TurnSt::Unqueued;
        let any_live = owers.iter().any(|(_, live)| *live);
        for (o, live) in &owers {
            if *live {
                self.pay(o, &owed);
            } else if !any_live {
                self.check_not_terminal(rep, o, "its turn/unqueued");
            }
        }
        if let Some(i) = self.intake_mut(&turn.cid) {
            i.effect = true;
        }
    }

    fn item_event(
        &mut self,
        rep: &mut Report,
        method: &str,
        p: &Value,
        at_ms: u64,
        stopping: bool,
    ) {
        let id = self.id.clone();
        let item = &p["item"];
        let item_id = s(&item["itemId"]);
        let kind = s(&item["kind"]);
        let t = s(&item["turnId"]);
        let running = self.running.as_deref() == Some(t.as_str());
        let prev = self.item(&item_id).cloned();
        if let Some(pr) = &prev {
            let grows = item["revision"].as_u64() > pr["revision"].as_u64();
            rep.check(
                grows && pr["status"] == "inProgress",
                "turn-lifecycle",
                &format!("item {item_id}"),
                || {
                    format!(
                        "session {id}: item {item_id} updated from {} to {}",
                        pr, item
                    )
                },
            );
        } else {
            // An agent message streamed in deltas opened with an
            // ephemeral revision 1; its durable completion is revision 2.
            let streamed = kind == "agentMessage" && item["revision"] == json!(2);
            rep.check(
                item["revision"] == json!(1) || streamed,
                "turn-lifecycle",
                &format!("item-rev {item_id}"),
                || {
                    format!(
                        "session {id}: new item {item_id} has revision {}",
                        item["revision"]
                    )
                },
            );
        }
        match (method, kind.as_str()) {
            ("item/completed", "userMessage") => {
                let c = s(&item["commandId"]);
                let steered = item["steered"] == json!(true);
                rep.check(running, "turn-lifecycle", &format!("um {item_id}"), || {
                    format!("session {id}: userMessage of command {c} in turn {t}, which is not running")
                });
                if steered {
                    let k = wire::key(&c);
                    let owed = self.ledger.get(&k).and_then(|i| i.owed.clone());
                    rep.check(owed == Some(Owed::Steer(t.clone())), "exactly-once-effect", &format!("steer {k}"), || {
                        format!("session {id}: steered userMessage of command {c} into turn {t}, which no accepted steer owes (owed {owed:?})")
                    });
                    let spelled = self.ledger.get(&k).is_none_or(|i| i.cid == c);
                    rep.check(spelled, "exactly-once-effect", &format!("steer-cid {k}"), || {
                        format!("session {id}: steered userMessage names command {c}, which its intake spelled otherwise (PROTOCOL.md 2: echoed exactly as sent)")
                    });
                    let text = self
                        .ledger
                        .get(&k)
                        .map(|i| agent::input_text(&i.params))
                        .unwrap_or_default();
                    rep.check(item["text"] == json!(text), "turn-lifecycle", &format!("steer-text {k}"), || {
                        format!("session {id}: steered userMessage text {} is not the command's input {text:?}", item["text"])
                    });
                    self.check_not_terminal(rep, &c, "its steered userMessage");
                    if let Some(x) = self.turns.get_mut(&t) {
                        x.steers.push(text);
                    }
                    self.pay(&c, &Owed::Steer(t.clone()));
                } else {
                    let turn = self.turns.get(&t).cloned();
                    let ok = turn.as_ref().is_some_and(|x| {
                        !x.user_message && x.cid == c && item["text"] == json!(x.text)
                    });
                    rep.check(ok, "exactly-once-effect", &format!("um-once {t}"), || {
                        format!("session {id}: userMessage {item} does not open turn {t} once with its input")
                    });
                    if let Some(x) = self.turns.get_mut(&t) {
                        x.user_message = true;
                    }
                }
                rep.check(
                    item["status"] == "completed" && item["revision"] == json!(1),
                    "turn-lifecycle",
                    &format!("um-shape {item_id}"),
                    || format!("session {id}: userMessage item {item}"),
                );
            }
            ("item/completed", "agentMessage") => {
                let Some(turn) = self.turns.get(&t).cloned() else {
                    rep.fail(
                        "turn-lifecycle",
                        &format!("am {item_id}"),
                        format!("session {id}: agentMessage of unknown turn {t}"),
                    );
                    return;
                };
                rep.check(running && !turn.message_done, "turn-lifecycle", &format!("am-run {item_id}"), || {
                    format!("session {id}: agentMessage of turn {t} which is not running or already has one")
                });
                let want = agent::message(&turn.text, &turn.steers);
                let got = s(&item["text"]);
                let ok = match item["status"].as_str() {
                    Some("completed") => got == want,
                    Some("cancelled" | "failed") => want.starts_with(&got),
                    _ => false,
                };
                rep.check(ok, "scripted-agent", &format!("am-text {item_id}"), || {
                    format!("session {id}: agent message of turn {t} is {got:?} ({}), the script says {want:?}", item["status"])
                });
                if item["status"] == "completed" {
                    if let Some(st) = turn.started_ms {
                        rep.check(at_ms >= st + turn.script.sleep_ms, "scripted-agent", &format!("am-sleep {item_id}"), || {
                            format!("session {id}: turn {t} answered {} ms after launch, before its !sleep {}", at_ms - st, turn.script.sleep_ms)
                        });
                    }
                }
                if let Some(x) = self.turns.get_mut(&t) {
                    x.message_done = true;
                    x.message_cut = (item["status"] != "completed").then(|| s(&item["status"]));
                }
            }
            ("item/started", "toolCall") => {
                let Some(turn) = self.turns.get(&t).cloned() else {
                    rep.fail(
                        "turn-lifecycle",
                        &format!("tool {item_id}"),
                        format!("session {id}: toolCall of unknown turn {t}"),
                    );
                    return;
                };
                let tool = s(&item["tool"]);
                let want = match (&turn.script.effect, turn.script.task_ms) {
                    (Some((prov, _)), _) => Some(prov.clone()),
                    (None, Some(_)) => Some("background".to_string()),
                    _ => None,
                };
                rep.check(running && turn.tool.is_none() && want.as_deref() == Some(tool.as_str()) && item["status"] == "inProgress", "scripted-agent", &format!("tool {item_id}"), || {
                    format!("session {id}: toolCall {item} in turn {t} (`{}`), which its script does not call for now", turn.text)
                });
                if let Some((_, action)) = &turn.script.effect {
                    rep.check(item["args"] == json!(action), "scripted-agent", &format!("tool-args {item_id}"), || {
                        format!("session {id}: toolCall {item_id} args {} is not the script's action {action:?}", item["args"])
                    });
                }
                if tool == "background" {
                    self.task_since.insert(item_id.clone(), at_ms);
                    let due = at_ms + turn.script.task_ms.unwrap_or(0);
                    self.tasks
                        .insert(item_id.clone(), TaskSt::Running { due_ms: due });
                }
                if let Some(x) = self.turns.get_mut(&t) {
                    x.tool = Some(item_id.clone());
                }
            }
            ("item/completed", "toolCall") => {
                let Some(pr) = prev.clone() else {
                    rep.fail(
                        "turn-lifecycle",
                        &format!("tool-end {item_id}"),
                        format!("session {id}: toolCall {item_id} completed but never started"),
                    );
                    return;
                };
                let status = s(&item["status"]);
                if pr["tool"] == "background" {
                    if status == "cancelled" {
                        rep.hit("5 task cancelled by a stop");
                    }
                    let st = self.tasks.get(&item_id).cloned();
                    let ok = match (&st, status.as_str()) {
                        (Some(TaskSt::Running { due_ms }), "completed") => at_ms >= *due_ms,
                        // Cancelled only by a stop asked for it (PROTOCOL.md
                        // 5: `task/stop` ends it `cancelled`; its turn's end
                        // does not: the turn completes without waiting).
                        // A shutdown ends it too (PROTOCOL.md 4.1: every
                        // task of an unloaded session ends first).
                        (Some(TaskSt::Running { .. }), "cancelled") => {
                            let since = self.task_since.get(&item_id).copied().unwrap_or(0);
                            self.stop_asked.contains(&item_id)
                                || self.stop_all_ms.iter().any(|t| *t >= since)
                                || stopping
                        }
                        (Some(TaskSt::Running { .. }), "failed") => true,
                        _ => false,
                    };
                    rep.check(ok, "turn-lifecycle", &format!("task-end {item_id}"), || {
                        format!(
                            "session {id}: task {item_id} ended {status} at {at_ms} from {st:?}"
                        )
                    });
                    if self.recovering {
                        rep.check(status == "failed", "recovery", &format!("task-crash {item_id}"), || {
                            format!("session {id}: recovery ended task {item_id} {status}, not failed")
                        });
                    }
                    self.tasks.insert(item_id.clone(), TaskSt::Ended(status));
                } else {
                    // An effect's tool call: judged by the caller, which
                    // knows the provider.
                }
            }
            _ => rep.fail(
                "turn-lifecycle",
                &format!("item-kind {item_id}"),
                format!("session {id}: unexpected durable {method} of a {kind} item"),
            ),
        }
        self.upsert_item(item);
    }

    fn approval_requested(&mut self, rep: &mut Report, p: &Value) {
        let id = self.id.clone();
        let a = s(&p["approvalId"]);
        let t = s(&p["turnId"]);
        let turn = self.turns.get(&t).cloned();
        let running = self.running.as_deref() == Some(t.as_str());
        let Some(turn) = turn.filter(|_| running) else {
            rep.fail(
                "turn-lifecycle",
                &format!("appr {a}"),
                format!("session {id}: approval {a} requested for turn {t}, which is not running"),
            );
            return;
        };
        let Some((prov, action)) = turn.script.effect.clone() else {
            rep.fail(
                "scripted-agent",
                &format!("appr {a}"),
                format!(
                    "session {id}: approval {a} requested by turn {t}, whose script has no !effect"
                ),
            );
            return;
        };
        let item = turn.tool.clone().unwrap_or_default();
        let want = json!({
            "approvalId": a, "turnId": t, "taskId": item, "itemId": item, "toolCallId": item,
            "toolName": prov, "rawArgs": action,
            "subject": {"kind": "tool", "toolName": prov},
            "currentRequirementId": {"approvalId": a, "sourceIndex": 0},
            "availableChoices": [
                {"choiceId": "approve", "label": "Approve", "decision": "approved", "scope": "once"},
                {"choiceId": "deny", "label": "Deny", "decision": "denied", "scope": "once"},
            ],
            "protectedWrite": false, "judgeEscalated": false,
        });
        let mut got = p.clone();
        if let Some(o) = got.as_object_mut() {
            for k in ["sessionId", "viewCursor", "sourceRange"] {
                o.remove(k);
            }
        }
        // The approval's task id is the host's to mint (the public
        // transcripts' approval task ids are neither the approval's nor
        // the item's): only its presence is judged.
        let mut want = want;
        if p["taskId"].is_string() {
            want["taskId"] = p["taskId"].clone();
        }
        rep.check(
            got == want,
            "scripted-agent",
            &format!("appr-shape {a}"),
            || format!("session {id}: approval/requested {got} is not PROTOCOL.md 5's {want}"),
        );
        rep.check(
            !self.approvals.contains_key(&a),
            "exactly-once-effect",
            &format!("appr-twice {a}"),
            || format!("session {id}: approval {a} requested twice"),
        );
        self.approvals.insert(
            a,
            Appr {
                turn: t,
                item,
                params: p.clone(),
                resolved: None,
                resolved_by: None,
                effect: Some((prov, action)),
            },
        );
    }

    fn approval_resolved(&mut self, rep: &mut Report, p: &Value, writer: (usize, u64)) {
        let id = self.id.clone();
        let a = s(&p["approvalId"]);
        let Some(ap) = self.approvals.get(&a).cloned() else {
            rep.fail(
                "turn-lifecycle",
                &format!("resolve {a}"),
                format!("session {id}: approval/resolved of {a}, never requested"),
            );
            return;
        };
        if !rep.check(
            ap.resolved.is_none(),
            "exactly-once-effect",
            &format!("resolve-twice {a}"),
            || format!("session {id}: approval {a} resolved twice"),
        ) {
            return;
        }
        let decision = s(&p["decision"]);
        rep.check(p["itemId"] == json!(ap.item) && p["turnId"] == json!(ap.turn) && p["stageEvidence"] == json!([]), "turn-lifecycle", &format!("resolve-shape {a}"), || {
            format!("session {id}: approval/resolved {p} does not name its approval's item and turn")
        });
        match p.get("decidedByCommandId").and_then(Value::as_str) {
            Some(c) => {
                let k = wire::key(c);
                let owed = self.ledger.get(&k).and_then(|i| i.owed.clone());
                rep.check(owed == Some(Owed::Resolve(a.clone(), decision.clone())), "exactly-once-effect", &format!("decide {k}"), || {
                    format!("session {id}: approval {a} resolved {decision} by command {c}, which owes {owed:?}")
                });
                let policy = if decision == "approved" {
                    "allow"
                } else {
                    "deny"
                };
                rep.check(p["policyResult"] == policy && p["resolvedBy"] == "user", "turn-lifecycle", &format!("decide-shape {a}"), || {
                    format!("session {id}: approval/resolved {p}: a user's {decision} has policyResult {policy}, resolvedBy user")
                });
                self.check_not_terminal(rep, c, "its approval/resolved");
                self.pay(c, &Owed::Resolve(a.clone(), decision.clone()));
            }
            None => {
                let turn_over =
                    !matches!(self.turn_st(&ap.turn), Some(TurnSt::Running)) || self.recovering;
                rep.check(decision == "abort" && p["policyResult"] == "deny", "turn-lifecycle", &format!("abort {a}"), || {
                    format!("session {id}: approval {a} resolved {p} without a deciding command (only an abort may)")
                });
                let _ = turn_over;
            }
        }
        if let Some(x) = self.approvals.get_mut(&a) {
            x.resolved = Some(p.clone());
            x.resolved_by = Some(writer);
        }
    }

    fn state_updated(&mut self, rep: &mut Report, p: &Value) {
        let id = self.id.clone();
        let r = p["revision"].as_u64().unwrap_or(0);
        let c = s(&p["commandId"]);
        rep.check(
            r == self.revision + 1,
            "exactly-once-effect",
            &format!("rev {id} {r}"),
            || {
                format!(
                    "session {id}: state/updated to revision {r} after revision {}",
                    self.revision
                )
            },
        );
        let k = wire::key(&c);
        let intake = self.ledger.get(&k).cloned();
        // Its command named exactly as the intake spelled it
        // (PROTOCOL.md 2: echoed exactly as sent).
        let ok = intake.as_ref().is_some_and(|i| {
            i.owed == Some(Owed::Update(r)) && i.params["set"] == p["set"] && i.cid == c
        });
        rep.check(ok, "exactly-once-effect", &format!("upd {k}"), || {
            format!(
                "session {id}: state/updated {p} is not what an accepted state/update owes ({:?})",
                intake.map(|i| (i.owed, i.params))
            )
        });
        self.check_not_terminal(rep, &c, "its state/updated");
        self.revision = r;
        if let Some(set) = p["set"].as_object() {
            for (k, v) in set {
                if v.is_null() {
                    self.kv.remove(k);
                } else {
                    self.kv.insert(k.clone(), v.clone());
                }
            }
        }
        self.pay(&c, &Owed::Update(r));
    }

    /// At the end of a life's batch or the run: every accepted command's
    /// promise is kept unless its intake settled abandoned.
    pub fn check_owed(&self, rep: &mut Report, at_end: bool) {
        debug_assert!(
            self.indexes(&self.owing, |i| i.owed.is_some()),
            "the owing index lists every intake whose effect is owed"
        );
        // At the run's end the whole ledger, not only the index.
        let owing: Box<dyn Iterator<Item = &Intake>> = if at_end {
            Box::new(self.ledger.values())
        } else {
            Box::new(self.owing.iter().map(|k| &self.ledger[k]))
        };
        for i in owing {
            if let Some(o) = &i.owed {
                if matches!(i.settled, Some(Settle::Abandoned)) {
                    continue;
                }
                if matches!(o, Owed::Launch(_))
                    && i.answer
                        .as_ref()
                        .is_ok_and(|r| r["disposition"] == "queued")
                {
                    continue;
                }
                let msg = format!(
                    "session {}: {} {} was accepted but its effect {o:?} never appeared",
                    self.id, i.method, i.cid
                );
                if at_end {
                    rep.fail_at_end("acked-effect", &format!("owed {}", i.cid), msg);
                } else {
                    rep.fail("acked-effect", &format!("owed {}", i.cid), msg);
                }
            }
        }
    }
}

/// What the spec prescribes for a command in one state.
#[derive(Debug, Clone, PartialEq)]
pub enum Expected {
    /// This exact ack.
    Ack(Value),
    /// A `commandRejected` with this reason (and data member).
    Reject(&'static str, Option<(&'static str, Value)>),
    /// A non-recorded error with this code.
    Error(i64),
    /// Not judged here.
    Any,
}

/// Unix milliseconds as RFC 3339 UTC with milliseconds
/// (`2025-08-07T18:22:11.412Z`), the form of `createdAt`.
pub fn iso8601(unix_ms: u64) -> String {
    let (y, m, d, (hh, mm, ss, ms)) = civil(unix_ms);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{ms:03}Z")
}

/// The civil date and time of day of `unix_ms`: (year, month, day,
/// (hours, minutes, seconds, milliseconds)).
fn civil(unix_ms: u64) -> (i64, i64, i64, (u64, u64, u64, u64)) {
    let secs = unix_ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days to civil date (proleptic Gregorian), era-based.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let time = (rem / 3_600, rem % 3_600 / 60, rem % 60, unix_ms % 1000);
    (y, m, d, time)
}

/// Whether `text` is exactly [`iso8601`] of `unix_ms`, read field by
/// field (no `String` is written).
pub fn is_iso8601(text: &str, unix_ms: u64) -> bool {
    let (y, m, d, (hh, mm, ss, ms)) = civil(unix_ms);
    // `{:0w}` of a non-negative number: at least `w` digits, zero-padded.
    let field = |t: &str, v: u64, w: usize| -> bool {
        let mut digits = 1;
        let mut x = v;
        while x >= 10 {
            x /= 10;
            digits += 1;
        }
        let want = digits.max(w);
        t.len() == want && t.bytes().all(|b| b.is_ascii_digit()) && t.parse::<u64>() == Ok(v)
    };
    // Every field but the year has a fixed width: the year is what is
    // left before the first `-`.
    let Some((year, rest)) = text.split_once('-') else {
        return false;
    };
    let b = rest.as_bytes();
    y >= 0
        && field(year, y as u64, 4)
        && rest.is_ascii()
        && b.len() == 19
        && (b[2], b[5], b[8], b[11], b[14], b[18]) == (b'-', b'T', b':', b':', b'.', b'Z')
        && field(&rest[0..2], m as u64, 2)
        && field(&rest[3..5], d as u64, 2)
        && field(&rest[6..8], hh, 2)
        && field(&rest[9..11], mm, 2)
        && field(&rest[12..14], ss, 2)
        && field(&rest[15..18], ms, 3)
}

/// An ack with the members the model cannot predict removed.
pub fn strip_unknowable(_method: &str, v: &Value) -> Value {
    v.clone()
}

/// Whether `id` is a UUIDv7 minted by the simulated clock by `upto_ms`:
/// its millisecond timestamp from the clock's start to then.
pub fn minted_by_clock(id: &str, upto_ms: u64) -> bool {
    crate::model::bad_input::is_uuid_v7(id)
        && u64::from_str_radix(&id[..8], 16)
            .ok()
            .zip(u64::from_str_radix(&id[9..13], 16).ok())
            .is_some_and(|(hi, lo)| (START_MS..=upto_ms).contains(&(hi << 16 | lo)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_recognised_as_written() {
        let id = "0198f0aa-1111-7000-8000-0000000000aa";
        let s = Sess::new(id, true);
        for n in [0, 1, 9, 10, 42, 100, u64::MAX] {
            let c = s.cursor(n);
            for m in [0, 1, 9, 10, 42, 100, u64::MAX] {
                assert_eq!(is_cursor(&c, id, m), n == m, "{c} {m}");
            }
        }
        let odd = [
            "",
            "v:",
            "v::1",
            "v:x:1",
            "V:S:1",
            "v:s:",
            "v:s:01",
            "v:s:00",
            "v:s:+1",
            "v:s:-1",
            "v:s: 1",
            "v:s:1 ",
            "v:s:1.0",
            "v:s:1.1",
            "v:s:18446744073709551616",
            "x:s:1",
            "v:s:1:1",
            "v:S:1",
            "v:ss:1",
            "v:s:0x1",
            "v:s:\u{661}",
            "v:s:0",
            "v:s:1",
            "v:s:11",
        ];
        for c in odd {
            for n in [0, 1, 11] {
                assert_eq!(
                    is_cursor(c, "s", n),
                    c == Sess::new("s", true).cursor(n),
                    "{c} {n}"
                );
            }
        }
    }

    #[test]
    fn iso8601_is_recognised_as_written() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut instants = vec![
            0,
            1,
            999,
            1000,
            86_399_999,
            86_400_000,
            u64::MAX,
            u64::MAX / 1000,
        ];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            instants.push(x % 5_000_000_000_000);
            instants.push(x >> (x % 64));
        }
        for ms in instants {
            let t = iso8601(ms);
            assert!(is_iso8601(&t, ms), "{t}");
            for other in [
                ms.wrapping_add(1),
                ms.wrapping_sub(1),
                ms.wrapping_add(86_400_000),
            ] {
                assert_eq!(is_iso8601(&t, other), iso8601(other) == t, "{t} {other}");
            }
            // One change away: every byte replaced, the text cut or grown.
            for i in 0..t.len() {
                for c in ['0', '9', '-', ':', 'T', 'Z', '.', ' ', '\u{661}'] {
                    let mut v = t.clone();
                    v.replace_range(i..i + 1, &c.to_string());
                    assert_eq!(is_iso8601(&v, ms), v == t, "{v} {ms}");
                }
            }
            for v in [
                format!("0{t}"),
                format!("{t}0"),
                t[1..].to_string(),
                t[..t.len() - 1].to_string(),
                format!("+{t}"),
            ] {
                assert!(!is_iso8601(&v, ms), "{v} {ms}");
            }
        }
    }

    #[test]
    fn iso8601_known_instants() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_754_590_931_412), "2025-08-07T18:22:11.412Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
    }

    /// The old judgement of a snapshot: the model's state built as a
    /// `Value` and compared member by member.
    fn snapshot_ok_by_values(s: &Sess, snap: &Value, ledger_exact: bool) -> bool {
        let st = &snap["state"];
        let want = s.snapshot_want(ledger_exact);
        let judged = |k: &str| {
            k != "approvalMode" && (ledger_exact || (k != "queuedTurns" && k != "pendingCommands"))
        };
        let same = match (st.as_object(), want.as_object()) {
            (Some(g), Some(w)) => {
                g.keys().filter(|k| judged(k)).count() == w.len() + 1
                    && g.get("items").and_then(Value::as_array).map(Vec::as_slice)
                        == Some(s.items.as_slice())
                    && w.iter().all(|(k, x)| g.get(k) == Some(x))
            }
            _ => false,
        };
        let head_ok =
            snap["schemaVersion"] == json!(1) && snap["viewCursor"] == json!(s.cursor(s.head));
        same && head_ok
    }

    /// Every value one change away from `v` (up to `depth` levels down):
    /// each member or element replaced by odd values, removed, or joined
    /// by an extra member.
    fn one_change_away(v: &Value, depth: usize, out: &mut Vec<Value>) {
        let odd = [
            Value::Null,
            json!(0),
            serde_json::from_str::<Value>("-0").unwrap(),
            json!(0.0),
            json!(1),
            json!("x"),
            json!("c1"),
            json!([]),
            json!({}),
        ];
        match v {
            Value::Object(o) => {
                let mut extra = v.clone();
                extra["zz"] = json!(1);
                out.push(extra);
                for k in o.keys() {
                    for x in &odd {
                        let mut w = v.clone();
                        w[k.as_str()] = x.clone();
                        out.push(w);
                    }
                    let mut w = v.clone();
                    w.as_object_mut().unwrap().remove(k);
                    out.push(w);
                    if depth > 0 {
                        let mut inner = Vec::new();
                        one_change_away(&o[k], depth - 1, &mut inner);
                        for x in inner {
                            let mut w = v.clone();
                            w[k.as_str()] = x;
                            out.push(w);
                        }
                    }
                }
            }
            Value::Array(a) => {
                let mut longer = a.clone();
                longer.push(json!({}));
                out.push(Value::Array(longer));
                if let Some(first) = a.first() {
                    out.push(Value::Array(a[1..].to_vec()));
                    let mut rev = a.clone();
                    rev.reverse();
                    out.push(Value::Array(rev));
                    if depth > 0 {
                        let mut inner = Vec::new();
                        one_change_away(first, depth - 1, &mut inner);
                        for x in inner {
                            let mut w = a.clone();
                            w[0] = x;
                            out.push(Value::Array(w));
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// Judging a snapshot in place gives the verdicts of building the
    /// model's state as a `Value`, on snapshots one change away from right.
    /// An owed effect is reported by the next admission's check, not only
    /// at the run's end, and an unsettled intake by the end of a recovery:
    /// the indexes that spare those checks a walk of the ledger list what
    /// the walk would find, and forget what is paid or settled.
    #[test]
    fn owed_effects_and_unsettled_intakes_are_found_through_the_indexes() {
        let props = |rep: &Report| {
            rep.violations
                .iter()
                .map(|v| v.property)
                .collect::<Vec<_>>()
        };
        let mut s = Sess::new("s1", true);
        let mut rep = Report::default();
        let update = json!({"sessionId": "s1", "expectedRevision": 0, "set": {"a": 1}});
        let ack = json!({"commandId": "c1", "status": "accepted", "revision": 1});
        s.admit(
            &mut rep,
            "c1",
            "state/update",
            &update,
            "sig".into(),
            (Ok(ack), None),
            false,
        );
        assert!(rep.violations.is_empty(), "{:?}", rep.violations);
        s.check_owed(&mut rep, false);
        assert_eq!(props(&rep), ["acked-effect"], "the owed update, mid-run");
        s.begin_recovery();
        s.end_recovery(&mut rep);
        assert_eq!(
            props(&rep),
            ["acked-effect", "recovery"],
            "the unsettled intake"
        );
        // Paid and settled: neither check finds anything more.
        let mut rep = Report::default();
        s.pay("c1", &Owed::Update(1));
        s.settle(&mut rep, "c1", Settle::Applied);
        s.check_owed(&mut rep, false);
        s.check_owed(&mut rep, true);
        s.begin_recovery();
        s.end_recovery(&mut rep);
        assert!(rep.violations.is_empty(), "{:?}", rep.violations);
        assert!(s.owing.is_empty() && s.unsettled.is_empty());
    }

    #[test]
    fn snapshots_are_judged_as_by_values() {
        let mut cases = (0, 0);
        for running in [false, true] {
            let mut s = Sess::new("s1", true);
            s.head = 4;
            s.turn_count = 2;
            s.revision = 3;
            s.kv.insert("a".into(), json!([1, {"b": null}]));
            let p = json!({"input": [{"type": "text", "text": "hi"}]});
            if running {
                s.new_turn("t1", "c1", &p, TurnSt::Running);
                s.running = Some("t1".into());
            }
            s.new_turn("t2", "c2", &p, TurnSt::Queued);
            s.new_turn("t3", "c3", &p, TurnSt::Queued);
            s.queue = vec!["t2".into(), "t3".into()];
            for (a, n) in [("a1", 3), ("a2", 2)] {
                s.approvals.insert(
                    a.into(),
                    Appr {
                        turn: "t1".into(),
                        item: format!("i{a}"),
                        params: json!({"approvalId": a, "viewCursor": format!("v:s1:{n}")}),
                        resolved: None,
                        resolved_by: None,
                        effect: None,
                    },
                );
            }
            for (seq, cid) in [(2, "c2"), (1, "c3")] {
                s.put_intake(
                    cid.into(),
                    Intake {
                        cid: cid.into(),
                        method: "turn/start".into(),
                        params: p.clone(),
                        sig: String::new(),
                        answer: Ok(json!({})),
                        answer_items: None,
                        settled: None,
                        effect: false,
                        owed: None,
                        seq,
                        at: 0,
                        writer: None,
                    },
                );
            }
            s.upsert_item(&json!({"itemId": "i1", "kind": "userMessage", "text": "hi"}));
            for ledger_exact in [false, true] {
                let mut state = s.snapshot_want(true);
                state["items"] = Value::Array(s.items.clone());
                state["approvalMode"] = json!({"mode": "promptUnmatched"});
                let good =
                    json!({"schemaVersion": 1, "viewCursor": s.cursor(s.head), "state": state});
                let mut snaps = vec![good.clone()];
                one_change_away(&good, 3, &mut snaps);
                for snap in &snaps {
                    let mut rep = Report::default();
                    s.judge_snapshot(&mut rep, "t", snap, None, ledger_exact);
                    let want = snapshot_ok_by_values(&s, snap, ledger_exact);
                    assert_eq!(rep.violations.is_empty(), want, "{snap}");
                    if want {
                        cases.0 += 1;
                    } else {
                        cases.1 += 1;
                    }
                }
            }
        }
        assert!(cases.0 > 8 && cases.1 > 500, "{cases:?}");
    }

    /// The old, copying judgement of a `Session` object.
    fn session_ok_by_copies(s: &Sess, v: &Value, loaded: bool) -> bool {
        let status = match (loaded, &s.running) {
            (false, _) => "notLoaded",
            (true, Some(_)) => "running",
            (true, None) => "idle",
        };
        let path = if s.durable {
            format!("{}/sessions/{}/session.log", crate::process::DATA_DIR, s.id)
        } else {
            String::new()
        };
        let mut want = json!({
            "sessionId": s.id,
            "status": status,
            "turnCount": s.turn_count,
            "path": path,
            "workspaceRoot": s.workspace_root,
            "providerId": "msp",
            "modelId": "scripted",
            "forkedFrom": null,
            "activeTurnId": s.running,
        });
        if let Some(ms) = s.created_at_ms {
            want["createdAt"] = json!(iso8601(ms));
        }
        let mut got = v.clone();
        if let Some(o) = got.as_object_mut() {
            o.remove("updatedAt");
            o.remove("approvalMode");
            if s.created_at_ms.is_none() {
                o.remove("createdAt");
            }
        }
        let mode_ok = v["approvalMode"]["mode"] == "promptUnmatched"
            && s.source_ok(v["approvalMode"]["source"].as_str(), 0)
            && v["updatedAt"].as_str() >= v["createdAt"].as_str();
        got == want && mode_ok
    }

    /// Judging a `Session` object in place gives the copying verdicts.
    #[test]
    fn session_objects_are_judged_as_by_copies() {
        let base = |s: &Sess, status: &str| {
            let mut v = json!({
                "sessionId": s.id,
                "status": status,
                "turnCount": s.turn_count,
                "path": if s.durable { format!("{}/sessions/{}/session.log", crate::process::DATA_DIR, s.id) } else { String::new() },
                "workspaceRoot": s.workspace_root,
                "providerId": "msp",
                "modelId": "scripted",
                "forkedFrom": null,
                "activeTurnId": s.running,
                "approvalMode": {"mode": "promptUnmatched", "source": "startup"},
                "updatedAt": "2025-08-07T18:22:12.000Z",
            });
            if let Some(ms) = s.created_at_ms {
                v["createdAt"] = json!(iso8601(ms));
            }
            v
        };
        let mut cases = 0;
        for durable in [true, false] {
            for running in [None, Some("t1".to_string())] {
                for created in [None, Some(1_754_590_931_412u64)] {
                    for root in [Value::Null, json!("/w")] {
                        let mut s = Sess::new("s1", durable);
                        s.running = running.clone();
                        s.created_at_ms = created;
                        s.workspace_root = root.clone();
                        s.turn_count = 3;
                        for loaded in [true, false] {
                            let status = match (loaded, &running) {
                                (false, _) => "notLoaded",
                                (true, Some(_)) => "running",
                                (true, None) => "idle",
                            };
                            let good = base(&s, status);
                            let mut vs = vec![good.clone(), json!(null), json!([good.clone()])];
                            let edits: Vec<(&str, Value)> = vec![
                                ("turnCount", json!(3.0)),
                                ("turnCount", json!(4)),
                                ("turnCount", json!("3")),
                                ("status", json!("idle")),
                                ("status", json!("running")),
                                ("sessionId", json!("S1")),
                                ("path", json!("")),
                                ("workspaceRoot", json!("/w")),
                                ("workspaceRoot", Value::Null),
                                ("forkedFrom", json!("x")),
                                ("activeTurnId", json!("t1")),
                                ("activeTurnId", Value::Null),
                                ("activeTurnId", json!("t2")),
                                ("createdAt", json!("2025-08-07T18:22:11.412Z")),
                                ("createdAt", json!("1999-01-01T00:00:00.000Z")),
                                ("createdAt", Value::Null),
                                ("updatedAt", json!("2000-01-01T00:00:00.000Z")),
                                (
                                    "approvalMode",
                                    json!({"mode": "promptUnmatched", "source": "replay"}),
                                ),
                                ("approvalMode", json!({"mode": "never", "source": "replay"})),
                                ("extra", json!(1)),
                                ("providerId", json!("x")),
                                ("modelId", Value::Null),
                            ];
                            for (k, x) in edits {
                                let mut v = good.clone();
                                v[k] = x;
                                vs.push(v);
                            }
                            for k in [
                                "sessionId",
                                "turnCount",
                                "path",
                                "workspaceRoot",
                                "forkedFrom",
                                "activeTurnId",
                                "createdAt",
                                "updatedAt",
                                "approvalMode",
                                "modelId",
                            ] {
                                let mut v = good.clone();
                                v.as_object_mut().unwrap().remove(k);
                                vs.push(v);
                            }
                            for v in &vs {
                                let mut rep = Report::default();
                                s.judge_session(&mut rep, "t", v, loaded);
                                assert_eq!(
                                    rep.violations.is_empty(),
                                    session_ok_by_copies(&s, v, loaded),
                                    "{v}"
                                );
                                cases += usize::from(rep.violations.is_empty());
                            }
                        }
                    }
                }
            }
        }
        assert!(cases > 32, "some objects pass ({cases})");
    }
}
