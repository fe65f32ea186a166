//! The workload's next move on a session, shared by both clients
//! (`client.rs`, the legacy one, and `sdk_client.rs`, the SDK core's):
//! which command to issue and with what, drawn through [`World`] from
//! what the client knows of its session ([`Known`]). Pure choices: the
//! clients carry the moves out (submit, re-send, pause...) each its own
//! way. The draws are made in one fixed order, so a recorded choice
//! sequence means the same moves to both clients (and every legacy run
//! file still replays bit for bit).

use serde_json::{json, Map, Value};

use crate::known::Known;
use crate::workload::Scenario;
use crate::world::{Decision, World};

/// What a client does next on its session.
#[derive(Debug, Clone, PartialEq)]
pub enum Move {
    /// Issue this command (then perhaps a pipelined burst).
    Submit(&'static str, Value),
    /// Start (or queue) a turn: the client's own `pick_turn`.
    Turn,
    /// Decide this pending approval.
    Approval(String),
    /// Reuse an answered command's id with another payload.
    Conflict,
    /// Do nothing until this simulated time.
    IdleUntil(u64),
    /// Send an answered command again under its id (else a turn).
    Resend,
    /// A long turn and a burst of queued ones past the queue's bound.
    Flood,
    /// Wait until the host unloads the session.
    Pause,
    /// A command naming a session this client does not hold (another
    /// client's, or one that never existed), sent as a bare line: the
    /// host answers it without loading the session (`sessionInUse`,
    /// `sessionNotLoaded`, `sessionNotFound`), or, where that session is
    /// loaded, as any command. It is a `task/stop` of a task that never
    /// existed, so it changes no session.
    Stray,
    /// A read (`session/read` or `view/page`) of a session that never
    /// existed, sent as a bare line: the host must answer
    /// `sessionNotFound`, never a view it made up, never a storage error.
    StrayRead,
    /// A `task/stopAll` (carrier-less), then a pause until the host
    /// unloads the session; after the reload a carrier-less command goes
    /// again under its id and must get the answer it got before the
    /// unload (PROTOCOL.md 4.4: remembered for the host's lifetime).
    StopAllThenPause,
    /// A command sent first as a bare line the host must refuse before
    /// reading it as a command ([`Malformed`]: not JSON, not a request,
    /// an unknown method, bad params), then as itself under the same
    /// command id: the refusal recorded nothing (PROTOCOL.md 3), so the
    /// command is admitted afresh.
    Malformed(Malformed),
}

/// How a [`Move::Malformed`] line is wrong, one defect each; the
/// comments give what PROTOCOL.md 1 and 3 make of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Cut short: not JSON (`-32700`, id `null`).
    NotJson,
    /// The request inside an array, a batch (`-32600`, id `null`).
    Batch,
    /// An `id` that is neither a string nor an integer (`-32600`, id
    /// `null`).
    BoolId,
    /// `jsonrpc: "1.0"`: not a JSON-RPC 2.0 request (`-32600`).
    OldJsonrpc,
    /// A method MSP does not have (`-32601`).
    UnknownMethod,
    /// A method MSP does not have, with params that are not an object:
    /// the method is checked before the params (`-32601`).
    UnknownMethodArrayParams,
    /// Params that are not an object (`-32602`, field `params`).
    ArrayParams,
    /// No `commandId` (`-32602`, field `commandId`).
    NoCommandId,
    /// A `commandId` that is a UUID but not version 7 (`-32602`).
    V4CommandId,
    /// No `sessionId` (`-32602`, field `sessionId`).
    NoSessionId,
    /// A number for `sessionId` (`-32602`, field `sessionId`).
    NumericSessionId,
    /// A `turn/start` whose `input` is empty (`-32602`, field `input`).
    EmptyInput,
    /// A `turn/interrupt` asking `retract: true`, unsupported (`-32602`,
    /// field `retract`).
    Retract,
    /// A `state/update` whose `expectedRevision` is a string (`-32602`,
    /// field `expectedRevision`).
    RevisionAsText,
    /// A notification (no `id`) of a method MSP does not have: never
    /// answered, not even with an error.
    UnknownNotification,
    /// Not a defect: the line ends `\r\n`, which a host tolerates
    /// (PROTOCOL.md 1), so the command is admitted and the copy that
    /// follows is its replay.
    TrailingCr,
    /// A `turn/start` whose input part is an image (`-32602`, field
    /// `input` or one of its members: this host takes text parts only).
    /// It carries a `text` too, so a host must read its `type` to refuse
    /// it.
    ImagePart,
    /// A `turn/start` whose text part's `text` is a number (`-32602`,
    /// field `input` or one of its members).
    TextNotString,
    /// The command padded with spaces to one byte over the simulated
    /// host's frame limit ([`FRAME_LIMIT_BYTES`]): `-32002
    /// inputTooLarge`, id `null`, `data.limitBytes`; the link stays open.
    OverLimit,
    /// Not a defect: the command padded to exactly the frame limit, which
    /// a host reads (PROTOCOL.md 1: only a line over it is refused), so
    /// the copy that follows is its replay.
    AtLimit,
    /// A `turn/start` whose `ifBusy` is none of `queue`, `steer`,
    /// `replace` (`-32602`, field `ifBusy`).
    IfBusyUnknown,
    /// A `state/update` whose `set` is an array (`-32602`, field `set`).
    SetNotObject,
    /// A `state/update` whose `expectedRevision` is `1.5`, not an integer
    /// (`-32602`, field `expectedRevision`).
    RevisionFraction,
    /// A `session/resume` of the session whose `cursor` is a number
    /// (`-32602`, field `cursor`); the command that follows is the
    /// `state/update` under the same id.
    ResumeCursorNumber,
    /// An `approval/decide` without `choiceId` (`-32602`, field
    /// `choiceId`); the command that follows is the `state/update`.
    DecideNoChoice,
    /// A `view/page` of the session with `limit: 0` (`-32602`, field
    /// `limit`: 1..1000); the command follows.
    PageLimitZero,
    /// A `view/page` with `limit: 1001` (`-32602`, field `limit`).
    PageLimitOver,
    /// A `view/page` with `direction: "sideways"` (`-32602`, field
    /// `direction`).
    PageDirection,
    /// Not a defect: a `view/page` of `limit: 1000`, the largest, read
    /// from the start (answered with a page the model judges).
    PageLimitMax,
    /// A `session/read` whose `excludeItems` is a string (`-32602`, field
    /// `excludeItems`).
    ReadExcludeItemsText,
    /// A `turn/interrupt` naming `turnId: "t-1"`, not a UUIDv7
    /// (PROTOCOL.md 2: a malformed turn id in params is `-32602`, field
    /// `turnId`).
    InterruptTurnIdMalformed,
    /// The command's own UUIDv7 without its hyphens (32 hex digits; RFC
    /// 9562's string form is 8-4-4-4-12): not a `commandId` (`-32602`,
    /// field `commandId`), and no alias of the id the command goes under
    /// next.
    CommandIdUnhyphenated,
    /// A request with an `id` and `params` but no `method` (and neither
    /// `result` nor `error`, so not a response either): `-32600`, under
    /// its id.
    NoMethod,
}

/// The frame limit of every simulated host (`HostConfig::
/// frame_limit_bytes`; PROTOCOL.md 1's `--frame-limit-bytes`): small,
/// so that a [`Malformed::OverLimit`] line is cheap to send and to judge.
/// No other line a simulated client sends comes near it.
pub const FRAME_LIMIT_BYTES: usize = 16 * 1024;

impl Malformed {
    /// Every defect, in draw order (new ones go at the end).
    pub const ALL: [Malformed; 33] = [
        Malformed::NotJson,
        Malformed::Batch,
        Malformed::BoolId,
        Malformed::OldJsonrpc,
        Malformed::UnknownMethod,
        Malformed::UnknownMethodArrayParams,
        Malformed::ArrayParams,
        Malformed::NoCommandId,
        Malformed::V4CommandId,
        Malformed::NoSessionId,
        Malformed::NumericSessionId,
        Malformed::EmptyInput,
        Malformed::Retract,
        Malformed::RevisionAsText,
        Malformed::UnknownNotification,
        Malformed::TrailingCr,
        Malformed::ImagePart,
        Malformed::TextNotString,
        Malformed::OverLimit,
        Malformed::AtLimit,
        Malformed::IfBusyUnknown,
        Malformed::SetNotObject,
        Malformed::RevisionFraction,
        Malformed::ResumeCursorNumber,
        Malformed::DecideNoChoice,
        Malformed::PageLimitZero,
        Malformed::PageLimitOver,
        Malformed::PageDirection,
        Malformed::PageLimitMax,
        Malformed::ReadExcludeItemsText,
        Malformed::InterruptTurnIdMalformed,
        Malformed::CommandIdUnhyphenated,
        Malformed::NoMethod,
    ];

    /// The well-formed command this defect is made from, on `sid`: a
    /// `turn/start` for [`Malformed::EmptyInput`] and the other input
    /// defects, a `turn/interrupt` for
    /// [`Malformed::Retract`], else a `state/update` of `revision`
    /// writing `n`.
    pub fn command(self, sid: &str, revision: i64, n: u64) -> (&'static str, Value) {
        match self {
            Malformed::EmptyInput
            | Malformed::ImagePart
            | Malformed::TextNotString
            | Malformed::IfBusyUnknown => (
                "turn/start",
                json!({"sessionId": sid, "input": [{"type": "text", "text": format!("hello {n} after a bad line")}]}),
            ),
            Malformed::Retract | Malformed::InterruptTurnIdMalformed => {
                ("turn/interrupt", json!({"sessionId": sid}))
            }
            _ => (
                "state/update",
                json!({"sessionId": sid, "expectedRevision": revision, "set": {format!("m{}", n % 3): n}}),
            ),
        }
    }

    /// The defective line (with its `\n`) of request `id` for `method`
    /// with `params` (which carry the command id); `v4` is a UUID of
    /// version 4 for [`Malformed::V4CommandId`].
    pub fn line(self, id: &Value, method: &str, params: &Value, v4: &str) -> Vec<u8> {
        let mut p = params.clone();
        let mut m = json!(method);
        match self {
            Malformed::UnknownMethod | Malformed::UnknownNotification => {
                m = json!(format!("{method}X"))
            }
            Malformed::UnknownMethodArrayParams => {
                m = json!(format!("{method}X"));
                p = json!([p]);
            }
            Malformed::ArrayParams => p = json!([p]),
            Malformed::NoCommandId => {
                if let Some(o) = p.as_object_mut() {
                    o.remove("commandId");
                }
            }
            Malformed::V4CommandId => p["commandId"] = json!(v4),
            Malformed::CommandIdUnhyphenated => {
                let id = p["commandId"].as_str().unwrap_or_default().replace('-', "");
                p["commandId"] = json!(id);
            }
            Malformed::NoSessionId => {
                if let Some(o) = p.as_object_mut() {
                    o.remove("sessionId");
                }
            }
            Malformed::NumericSessionId => p["sessionId"] = json!(7),
            Malformed::EmptyInput => p["input"] = json!([]),
            Malformed::ImagePart => {
                p["input"] = json!([{"type": "image", "url": "https://example.invalid/a.png", "text": "a picture"}])
            }
            Malformed::TextNotString => p["input"] = json!([{"type": "text", "text": 5}]),
            Malformed::IfBusyUnknown => p["ifBusy"] = json!("later"),
            Malformed::InterruptTurnIdMalformed => p["turnId"] = json!("t-1"),
            Malformed::SetNotObject => p["set"] = json!([p["set"].clone()]),
            Malformed::RevisionFraction => p["expectedRevision"] = json!(1.5),
            Malformed::ResumeCursorNumber => {
                m = json!("session/resume");
                p = json!({"commandId": p["commandId"], "sessionId": p["sessionId"], "cursor": 5});
            }
            Malformed::DecideNoChoice => {
                // An approval that never existed: the params are refused
                // before anything looks for it.
                let a = "0190b6a4-7c3e-7a11-8f00-00000000a99a";
                m = json!("approval/decide");
                p = json!({"commandId": p["commandId"], "sessionId": p["sessionId"],
                           "approvalId": a, "requirementId": {"approvalId": a, "sourceIndex": 0}});
            }
            Malformed::PageLimitZero
            | Malformed::PageLimitOver
            | Malformed::PageDirection
            | Malformed::PageLimitMax => {
                let (limit, direction) = match self {
                    Malformed::PageLimitZero => (0, "forward"),
                    Malformed::PageLimitOver => (1001, "forward"),
                    Malformed::PageDirection => (5, "sideways"),
                    _ => (1000, "forward"),
                };
                m = json!("view/page");
                p = json!({"sessionId": p["sessionId"], "limit": limit, "direction": direction});
            }
            Malformed::ReadExcludeItemsText => {
                m = json!("session/read");
                p = json!({"sessionId": p["sessionId"], "excludeItems": "yes"});
            }
            Malformed::Retract => p["retract"] = json!(true),
            Malformed::RevisionAsText => {
                p["expectedRevision"] = json!(p["expectedRevision"].to_string())
            }
            Malformed::NotJson
            | Malformed::Batch
            | Malformed::BoolId
            | Malformed::OldJsonrpc
            | Malformed::NoMethod
            | Malformed::TrailingCr
            | Malformed::OverLimit
            | Malformed::AtLimit => {}
        }
        let mut frame = json!({"jsonrpc": "2.0", "id": id, "method": m, "params": p});
        match self {
            Malformed::BoolId => frame["id"] = json!(true),
            Malformed::OldJsonrpc => frame["jsonrpc"] = json!("1.0"),
            Malformed::Batch => frame = json!([frame]),
            Malformed::UnknownNotification => {
                if let Some(o) = frame.as_object_mut() {
                    o.remove("id");
                }
            }
            Malformed::NoMethod => {
                if let Some(o) = frame.as_object_mut() {
                    o.remove("method");
                }
            }
            _ => {}
        }
        let mut line = serde_json::to_vec(&frame).expect("serialise");
        match self {
            Malformed::NotJson => line.truncate(line.len() - 2),
            Malformed::TrailingCr => line.push(b'\r'),
            // Spaces after the opening brace: JSON whitespace, so the
            // line is the same frame, `FRAME_LIMIT_BYTES` (+ 1) long.
            Malformed::OverLimit | Malformed::AtLimit => {
                let want = FRAME_LIMIT_BYTES + usize::from(self == Malformed::OverLimit);
                let pad = want.saturating_sub(line.len());
                line.splice(1..1, std::iter::repeat_n(b' ', pad));
            }
            _ => {}
        }
        line.push(b'\n');
        line
    }
}

/// A version-4 UUID of `bits` (for [`Malformed::V4CommandId`]: a
/// well-formed UUID that is not a UUIDv7).
pub fn uuid_v4(bits: u128) -> String {
    uuid::Builder::from_random_bytes(bits.to_le_bytes())
        .into_uuid()
        .to_string()
}

/// The defect of a [`Move::Malformed`].
fn malformed(w: &mut World) -> Malformed {
    Malformed::ALL[w.decide(Decision::Client, Malformed::ALL.len() as u64) as usize]
}

/// The `task/stop` params of a [`Move::Stray`]: a session of `others`
/// (not `own`), or 3 times in 10 (or without others) a session that
/// never existed; a fresh task id and command id.
fn stray_params(w: &mut World, own: &str, others: &[String]) -> Value {
    let others: Vec<&String> = others.iter().filter(|s| *s != own).collect();
    let sid = if !others.is_empty() && w.chance(Decision::Client, 700) {
        others[w.decide(Decision::Client, others.len() as u64) as usize].clone()
    } else {
        msp::proto::ids::mint_uuid_v7(w.now_ms, w.bits128(Decision::Ids))
    };
    let task = msp::proto::ids::mint_uuid_v7(w.now_ms, w.bits128(Decision::Ids));
    let cid = msp::proto::ids::mint_uuid_v7(w.now_ms, w.bits128(Decision::Ids));
    json!({"commandId": cid, "sessionId": sid, "taskId": task})
}

/// The method and params of a [`Move::Stray`] (a `task/stop` of a task
/// that never existed) or of a [`Move::StrayRead`] (a read of a session
/// that never existed); any other move is taken as the latter.
pub fn stray(mv: &Move, w: &mut World, own: &str, others: &[String]) -> (&'static str, Value) {
    match mv {
        Move::Stray => ("task/stop", stray_params(w, own, others)),
        _ => stray_read(w),
    }
}

/// The method and params of a [`Move::StrayRead`]: a fresh session id,
/// read whole or paged, half the time each.
fn stray_read(w: &mut World) -> (&'static str, Value) {
    let sid = msp::proto::ids::mint_uuid_v7(w.now_ms, w.bits128(Decision::Ids));
    if w.chance(Decision::Client, 500) {
        ("session/read", json!({"sessionId": sid}))
    } else {
        (
            "view/page",
            json!({"sessionId": sid, "direction": "backward", "limit": 5}),
        )
    }
}

/// A turn's input text: its kind drawn per scenario (plain, sleeping,
/// failing launch, keyed or unkeyed effect, background task, failing
/// model attempts). `n` numbers it; `idx` is the client's index;
/// `escapes`: some plain texts carry characters to escape (draws version
/// 7). New kinds go at the end of each list, so a recorded choice keeps
/// its kind.
pub fn turn_text(w: &mut World, scenario: Scenario, n: u64, idx: usize, escapes: bool) -> String {
    let kinds: &[u64] = match scenario {
        Scenario::Turns => &[0, 1, 1, 1, 2, 2, 5, 6],
        Scenario::CrashStorm => &[0, 1, 1, 2, 3, 3, 4, 5, 6],
        _ => &[0, 1, 1, 2, 3, 4, 5, 6],
    };
    match kinds[w.decide(Decision::Client, kinds.len() as u64) as usize] {
        // Two plain texts in three carry characters a JSON writer must
        // escape, or text outside ASCII: `escaped_text`. No draw picks it.
        0 if escapes && !n.is_multiple_of(3) => {
            escaped_text(n, &format!("hello {n} from client {idx}"))
        }
        0 => format!("hello {n} from client {idx}"),
        1 => format!("!sleep {} work {n}", w.range(Decision::Client, 200, 3000)),
        2 => format!("!fail-launch {n}"),
        3 => format!("!effect keyed act-{idx}-{n}"),
        4 => format!("!effect unkeyed act-{idx}-{n}"),
        5 => format!("!task {}", w.range(Decision::Client, 300, 4000)),
        // 1 or 2 failed attempts, then the message; 3 ends the turn
        // `failed` with a `modelError` (PROTOCOL.md 5).
        _ => format!("!retry {} try {n}", w.range(Decision::Client, 1, 3)),
    }
}

/// `base` with characters a JSON writer must get right, by `k`: one kind
/// alone (a quote, a backslash, control characters escaped by name, one
/// escaped as `\u0001`, text outside ASCII in two, three and four bytes
/// of UTF-8, the last a surrogate pair in UTF-16, which RFC 8785 orders
/// by), or all of them. Alone, so that a writer which misses one kind is
/// not saved by another in the same string; inside the string, where a
/// word-at-a-time scan reads them (it reads a string's last few bytes one
/// by one), at every offset in a word as `base` grows.
pub fn escaped_text(k: u64, base: &str) -> String {
    match k % 6 {
        0 => format!("say \"{base}\" to {base}"),
        1 => format!("{base} a\\b {base}"),
        2 => format!("\t{base}\n{base}"),
        3 => format!("{base}\u{1}{base}"),
        4 => format!("\u{e9}{base} \u{2713} \u{1f600}"),
        _ => format!("\"{base}\": a\\b\tc\nd\u{1} \u{e9} \u{2713} \u{1f600}"),
    }
}

/// Sometimes (3 in 10) one of the queued turns.
pub fn some_queued(known: &Known, w: &mut World) -> Option<String> {
    if known.queued.is_empty() || !w.chance(Decision::Client, 300) {
        return None;
    }
    Some(known.queued[w.decide(Decision::Client, known.queued.len() as u64) as usize].clone())
}

/// Any turn the client ever saw start.
pub fn any_turn(known: &Known, w: &mut World) -> Option<String> {
    if known.seen_turns.is_empty() {
        None
    } else {
        Some(
            known.seen_turns[w.decide(Decision::Client, known.seen_turns.len() as u64) as usize]
                .clone(),
        )
    }
}

/// The next move on session `sid`. `counter` numbers texts and written
/// values (it advances as they are drawn); `idx` is the client's index;
/// `escapes` as for [`turn_text`].
pub fn next_move(
    w: &mut World,
    scenario: Scenario,
    known: &Known,
    counter: &mut u64,
    idx: usize,
    sid: &str,
    escapes: bool,
) -> Move {
    // turn, steer, unqueue, interrupt/cancel, task stop, approval,
    // state/update, conflicting reuse, idle, resend, queue flood,
    // start of an existing session, pause until unloaded, a decision
    // naming a stale requirement, a resume asking `excludeItems`, a
    // command naming a session the client does not hold, a read of a
    // session that never existed, a stop-all and a pause, a malformed
    // line and its command. A new
    // move is only ever appended (the draw's top values): a recorded pick
    // is below the older total, so every recorded sequence keeps its
    // moves.
    let weights: [u64; 19] = match scenario {
        Scenario::Turns => [40, 10, 10, 12, 4, 4, 4, 3, 6, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        _ => [30, 5, 5, 6, 5, 15, 8, 5, 8, 4, 1, 1, 2, 2, 2, 2, 1, 2, 3],
    };
    let total: u64 = weights.iter().sum();
    let mut r = w.decide(Decision::Client, total);
    let mut choice = 0;
    for (k, wt) in weights.iter().enumerate() {
        if r < *wt {
            choice = k;
            break;
        }
        r -= wt;
    }
    match choice {
        1 => {
            // The running turn, or (to reach `not_running`) a queued one,
            // or any turn this client saw.
            let t = some_queued(known, w)
                .or_else(|| known.running.clone())
                .or_else(|| any_turn(known, w));
            *counter += 1;
            let text = turn_text(w, scenario, *counter, idx, escapes);
            match t {
                Some(t) => Move::Submit(
                    "turn/steer",
                    json!({"sessionId": sid, "expectedTurnId": t, "input": [{"type": "text", "text": text}]}),
                ),
                None => Move::Turn,
            }
        }
        2 => {
            let t = if !known.queued.is_empty() && w.chance(Decision::Client, 800) {
                Some(
                    known.queued[w.decide(Decision::Client, known.queued.len() as u64) as usize]
                        .clone(),
                )
            } else {
                any_turn(known, w)
            };
            match t {
                Some(t) => Move::Submit("turn/unqueue", json!({"sessionId": sid, "turnId": t})),
                None => Move::Turn,
            }
        }
        3 => {
            let m = if w.chance(Decision::Client, 500) {
                "turn/interrupt"
            } else {
                "turn/cancel"
            };
            let mut p = json!({"sessionId": sid});
            if w.chance(Decision::Client, 600) {
                if let Some(t) = some_queued(known, w)
                    .or_else(|| known.running.clone())
                    .or_else(|| any_turn(known, w))
                {
                    p["turnId"] = json!(t);
                }
            }
            Move::Submit(m, p)
        }
        4 => match known.tasks.iter().next().cloned() {
            Some(t) if w.chance(Decision::Client, 700) => {
                Move::Submit("task/stop", json!({"sessionId": sid, "taskId": t}))
            }
            // A task that never existed (`missing_task`).
            _ if w.chance(Decision::Client, 300) => {
                let t = msp::proto::ids::mint_uuid_v7(w.now_ms, w.bits128(Decision::Ids));
                Move::Submit("task/stop", json!({"sessionId": sid, "taskId": t}))
            }
            _ => Move::Submit("task/stopAll", json!({"sessionId": sid})),
        },
        5 => match known.approvals.iter().next().cloned() {
            Some(a) => Move::Approval(a),
            None => Move::Turn,
        },
        6 => {
            let stale = w.chance(Decision::Client, 200);
            let rev = if stale {
                known.revision + 1
            } else {
                known.revision
            };
            *counter += 1;
            let n = *counter;
            let mut set = Map::new();
            // One value in two a string to escape (see `escaped_text`).
            let value = if escapes && n % 2 == 1 {
                json!(escaped_text(n / 2, &format!("v{n}")))
            } else {
                json!(n)
            };
            set.insert(format!("k{}", n % 5), value);
            if w.chance(Decision::Client, 200) {
                set.insert(format!("k{}", (n + 1) % 5), Value::Null);
            }
            Move::Submit(
                "state/update",
                json!({"sessionId": sid, "expectedRevision": rev, "set": set}),
            )
        }
        7 => Move::Conflict,
        8 => Move::IdleUntil(w.now_ms + w.range(Decision::Client, 200, 3000)),
        9 => Move::Resend,
        10 => Move::Flood,
        // `session/start` of the session this client already has, under a
        // new id: `session_id_conflict`.
        11 => Move::Submit("session/start", json!({"sessionId": sid})),
        12 => Move::Pause,
        // A fresh decision answering a requirement the approval does not
        // have (every approval's current one has `sourceIndex` 0):
        // `approvalRequirementStale`, or already resolved.
        13 => match known.approvals.iter().next().cloned() {
            Some(a) => {
                let mut p = approval_decision(w, sid, &a, false);
                p["requirementId"]["sourceIndex"] = json!(1);
                Move::Submit("approval/decide", p)
            }
            None => Move::Turn,
        },
        // The client's own session resumed again, metadata only: no
        // history, and the view follows from the head.
        14 => Move::Submit(
            "session/resume",
            json!({"sessionId": sid, "excludeItems": true}),
        ),
        15 => Move::Stray,
        16 => Move::StrayRead,
        17 => Move::StopAllThenPause,
        18 => Move::Malformed(malformed(w)),
        _ => Move::Turn,
    }
}

/// Changes exactly one defined param of an answered command's payload
/// (or, for `task/stopAll`, its method), for a deliberate
/// `command_id_conflict`: `n` numbers the probe, `other` is a fresh id,
/// `flip` picks between the two changes some methods have. With
/// `crossing` (draws version 10 and later), a carrier-less row's flipped
/// probe is a durable `state/update` instead: the id a carrier-less row
/// took for the host's lifetime must not become an intake. `false` when
/// the method has none.
pub fn respell(
    method: &mut String,
    p: &mut Value,
    sid: &str,
    (n, other): (u64, &str),
    flip: bool,
    crossing: bool,
) -> bool {
    let text = json!([{"type": "text", "text": format!("conflict-probe {n}")}]);
    let carrierless = crate::model::wire::CARRIERLESS_METHODS.contains(&method.as_str());
    if crossing && flip && carrierless {
        *method = "state/update".to_string();
        *p = json!({"sessionId": sid, "expectedRevision": 0, "set": {"probe": n}});
        return true;
    }
    match method.as_str() {
        "session/start" => p["workspaceRoot"] = json!(format!("/w/{n}")),
        "session/resume" => {
            p["cursor"] = if p["cursor"].is_string() {
                Value::Null
            } else {
                json!(format!("v:{sid}:0"))
            }
        }
        "turn/start" if flip => {
            p["ifBusy"] = json!(if p["ifBusy"] == "replace" {
                "steer"
            } else {
                "replace"
            })
        }
        "turn/start" => p["input"] = text,
        "turn/steer" if flip => p["expectedTurnId"] = json!(other),
        "turn/steer" => p["input"] = text,
        "turn/unqueue" => p["turnId"] = json!(other),
        "turn/interrupt" | "turn/cancel" => {
            p["turnId"] = if p["turnId"].is_string() {
                Value::Null
            } else {
                json!(other)
            }
        }
        "task/stop" => p["taskId"] = json!(other),
        "task/stopAll" => *method = "turn/interrupt".to_string(),
        "approval/decide" if flip => {
            p["choiceId"] = json!(if p["choiceId"] == "approve" {
                "deny"
            } else {
                "approve"
            })
        }
        "approval/decide" => p["requirementId"]["sourceIndex"] = json!(1),
        "state/update" if flip => {
            p["expectedRevision"] = json!(p["expectedRevision"].as_u64().unwrap_or(0) + 1)
        }
        "state/update" => p["set"] = json!({"probe": n}),
        _ => return false,
    }
    true
}

/// Spells an answered command's payload differently without changing
/// what it asks (an unknown member, a defaulted param made explicit, an
/// absent turn id as `null`, a `state/update`'s integers as decimals:
/// RFC 8785 writes `12.0` as `12`), or its command id `cid` in uppercase
/// or mixed case (one UUID, so one command: the ledger compares ids
/// without case), or not at all: its resend must be answered as a
/// replay. `counter` fills the unknown member and picks the id's case;
/// `params` carry the id too if they carried it.
pub fn same_payload_respelled(
    w: &mut World,
    method: &str,
    params: &mut Value,
    cid: &mut String,
    counter: u64,
) {
    match w.decide(Decision::Client, 4) {
        0 => params["x-unknown-member"] = json!(counter),
        1 if method == "turn/start" && params.get("ifBusy").is_none() => {
            params["ifBusy"] = json!("queue")
        }
        1 if params.get("turnId").is_none() && method.starts_with("turn/") => {
            params["turnId"] = Value::Null
        }
        2 if method == "state/update" => set_as_decimals(params),
        3 => {
            // All in uppercase, or (every other resend) only its first
            // letter: a mixed-case spelling of the same UUID.
            *cid = if counter.is_multiple_of(2) {
                cid.to_ascii_uppercase()
            } else {
                mixed_case(cid)
            };
            if params.get("commandId").is_some() {
                params["commandId"] = json!(cid);
            }
        }
        _ => {}
    }
}

/// `id` with its first lowercase letter in uppercase: one UUID in mixed
/// case, which the ledger must take for the same command.
pub fn mixed_case(id: &str) -> String {
    match id.find(|c: char| c.is_ascii_lowercase()) {
        Some(i) => format!(
            "{}{}{}",
            &id[..i],
            id[i..=i].to_ascii_uppercase(),
            &id[i + 1..]
        ),
        None => id.to_string(),
    }
}

/// Writes the integers of a `state/update`'s `set` as decimals (`12` as
/// `12.0`): the same payload, as RFC 8785 signs both `12`.
pub fn set_as_decimals(params: &mut Value) {
    let set = params["set"].as_object_mut();
    for v in set.into_iter().flat_map(|m| m.values_mut()) {
        if let Some(u) = v.as_u64() {
            *v = json!(u as f64);
        }
    }
}

/// The params of a `turn/start` of `text` on `sid`: `ifBusy` absent (the
/// default, queue) 2 times in 5, else queue, steer or replace.
pub fn turn_start_params(w: &mut World, sid: &str, text: &str) -> Value {
    let mut p = json!({"sessionId": sid, "input": [{"type": "text", "text": text}]});
    match w.decide(Decision::Client, 5) {
        0 | 1 => {}
        2 => p["ifBusy"] = json!("queue"),
        3 => p["ifBusy"] = json!("steer"),
        _ => p["ifBusy"] = json!("replace"),
    }
    p
}

/// The params of an `approval/decide` of approval `a` on `sid`: approve
/// (always with `approve_only`, else 3 times in 4) or deny.
pub fn approval_decision(w: &mut World, sid: &str, a: &str, approve_only: bool) -> Value {
    let choice = if approve_only || !w.chance(Decision::Client, 250) {
        "approve"
    } else {
        "deny"
    };
    json!({"sessionId": sid, "approvalId": a, "requirementId": {"approvalId": a, "sourceIndex": 0}, "choiceId": choice})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::choice::Source;

    /// The move a recorded pick `r` of the move draw makes, and the
    /// draw's number of options.
    fn pick(scenario: Scenario, r: u64) -> (Move, u64) {
        let mut w = World::with_source(Source::recorded(vec![r]), 0);
        let known = Known {
            approvals: ["a1".to_string()].into(),
            ..Known::default()
        };
        let mv = next_move(&mut w, scenario, &known, &mut 0, 0, "s1", true);
        (mv, w.choices()[0].options)
    }

    fn is_probe(mv: &Move) -> bool {
        match mv {
            Move::Submit("approval/decide", p) => p["requirementId"]["sourceIndex"] == json!(1),
            Move::Submit("session/resume", p) => p["excludeItems"] == json!(true),
            Move::Stray | Move::StrayRead | Move::StopAllThenPause | Move::Malformed(_) => true,
            _ => false,
        }
    }

    #[test]
    fn the_probe_moves_take_the_top_of_the_move_draw() {
        // So a sequence recorded before they existed (its picks below the
        // older total) replays the moves it recorded.
        for scenario in [Scenario::Mixed, Scenario::Turns] {
            let (_, total) = pick(scenario, 0);
            let probes: Vec<u64> = (0..total)
                .filter(|r| is_probe(&pick(scenario, *r).0))
                .collect();
            assert!(!probes.is_empty(), "{scenario}");
            let first = probes[0];
            assert_eq!(probes, (first..total).collect::<Vec<_>>(), "{scenario}");
            // Both kinds are there.
            assert!(matches!(
                pick(scenario, first).0,
                Move::Submit("approval/decide", _)
            ));
            assert!(matches!(pick(scenario, total - 1).0, Move::Malformed(_)));
            // The exhaustive check explores every move only while the
            // draw fits its width.
            if scenario == Scenario::Mixed {
                assert!(total <= crate::check::MAX_WIDTH, "{total}");
            }
        }
    }
}
