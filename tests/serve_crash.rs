//! Crash safety of the real host: `kill -9` at seeded random points of a
//! command stream, the `MSP_CRASH_AT` failpoint between intake and ack (and
//! between an effect and its settlement), and leases freed by a killed
//! holder. After every restart the client resumes and replays every command
//! id it ever sent; the ledger rules of PROTOCOL.md 4.4 must hold.
//!
//! The seed of the random kill points is fixed (override with
//! `MSP_TEST_SEED=N`); it is printed so a failure can be reproduced.

mod common;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;

use common::{answer_value, code, reason, start, v7, Client, Via};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

/// One logical command of the client: its id, method, params (with the
/// id) and the first answer it ever received.
#[derive(Debug, Clone)]
struct Cmd {
    cid: String,
    method: String,
    params: Value,
    first: Option<Value>,
    /// A deliberate conflict: same id as an earlier command, other payload.
    conflict: bool,
}

/// The client's memory across host incarnations.
#[derive(Debug, Default)]
struct Model {
    sid: String,
    cmds: Vec<Cmd>,
    /// request id -> index in `cmds`, for answers of the current process.
    inflight: BTreeMap<u64, usize>,
    revision_guess: u64,
}

impl Model {
    fn record(&mut self, frame: &Value) {
        let Some(id) = frame["id"].as_u64() else {
            return;
        };
        if frame.get("method").is_some() {
            return;
        }
        let Some(i) = self.inflight.remove(&id) else {
            return;
        };
        let v = answer_value(frame);
        if let Some(rev) = frame["result"]["revision"].as_u64() {
            self.revision_guess = self.revision_guess.max(rev);
        }
        if let Some(rev) = frame["error"]["data"]["currentRevision"].as_u64() {
            self.revision_guess = self.revision_guess.max(rev);
        }
        let cmd = &mut self.cmds[i];
        match &cmd.first {
            None => cmd.first = Some(v),
            Some(first) => assert_eq!(&v, first, "answer of {} changed: {frame}", cmd.cid),
        }
    }

    fn send(&mut self, c: &mut Client, i: usize) -> bool {
        let cmd = &self.cmds[i];
        let id = c.send_request(&cmd.method, cmd.params.clone());
        self.inflight.insert(id, i);
        true
    }
}

fn is_response(f: &Value) -> bool {
    f.get("method").is_none() && f.get("id").is_some()
}

/// Checks a replay answer against the first one (or, with none, the
/// outcomes a command that may never have been admitted can have).
fn check_replay(cmd: &Cmd, got: &Value) {
    let v = answer_value(got);
    if cmd.conflict {
        // Same id, other payload: refused on every arrival, never recorded.
        assert_eq!(
            reason(got),
            "command_id_conflict",
            "conflict {} replayed to {got}",
            cmd.cid
        );
        return;
    }
    match &cmd.first {
        Some(first) => assert_eq!(
            &v, first,
            "replay of {} ({}) differs from its first answer",
            cmd.cid, cmd.method
        ),
        None => {
            if got.get("error").is_some() {
                assert_eq!(
                    code(got),
                    -32030,
                    "unanswered {} replayed to {got}",
                    cmd.cid
                );
                assert!(
                    ["abandoned", "stale_revision", "queue_full"].contains(&reason(got)),
                    "unanswered {} replayed to {got}",
                    cmd.cid
                );
            }
        }
    }
}

/// Waits until no turn runs or is queued.
fn wait_idle(c: &mut Client, sid: &str) {
    let deadline = std::time::Instant::now() + common::TIMEOUT;
    loop {
        let r = c.request("session/read", json!({"sessionId": sid}));
        let st = &r["result"]["history"]["snapshot"]["state"];
        if st["activeTurn"].is_null() && st["queuedTurns"].as_array().is_some_and(Vec::is_empty) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "turns never finished: {st}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn resume_and_replay(c: &mut Client, model: &mut Model) {
    c.init();
    let r = c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": model.sid}),
    );
    assert!(r["result"]["session"].is_object(), "resume failed: {r}");
    for i in 0..model.cmds.len() {
        let cmd = model.cmds[i].clone();
        let got = c.request(&cmd.method, cmd.params.clone());
        check_replay(&cmd, &got);
        if let Some(rev) = got["result"]["revision"].as_u64() {
            model.revision_guess = model.revision_guess.max(rev);
        }
        if model.cmds[i].first.is_none() {
            model.cmds[i].first = Some(answer_value(&got));
        }
    }
}

/// The final audit: every effect at most once, exactly once when its
/// command was answered with a result; conflicts never applied; every
/// launched turn ends exactly once.
fn audit(c: &mut Client, model: &Model) {
    wait_idle(c, &model.sid);
    let history = c.history(&model.sid);
    let mut state_updates: BTreeMap<String, usize> = BTreeMap::new();
    let mut user_messages: BTreeMap<String, usize> = BTreeMap::new();
    let mut started: BTreeMap<String, usize> = BTreeMap::new();
    let mut completed: BTreeMap<String, usize> = BTreeMap::new();
    for e in &history {
        let p = &e["params"];
        match e["method"].as_str() {
            Some("state/updated") => {
                assert!(
                    p["set"].get("conflict").is_none(),
                    "a conflicting payload was applied: {e}"
                );
                *state_updates
                    .entry(p["commandId"].as_str().expect("commandId").into())
                    .or_default() += 1;
            }
            Some("item/completed") if p["item"]["kind"] == "userMessage" => {
                let text = p["item"]["text"].as_str().unwrap_or_default();
                assert!(
                    !text.contains("CONFLICT"),
                    "a conflicting payload was applied: {e}"
                );
                *user_messages
                    .entry(p["item"]["commandId"].as_str().expect("commandId").into())
                    .or_default() += 1;
            }
            Some("turn/started") => {
                *started
                    .entry(p["turnId"].as_str().expect("turnId").into())
                    .or_default() += 1
            }
            Some("turn/completed") => {
                *completed
                    .entry(p["turnId"].as_str().expect("turnId").into())
                    .or_default() += 1
            }
            _ => {}
        }
    }
    for cmd in model.cmds.iter().filter(|c| !c.conflict) {
        let applied = cmd
            .first
            .as_ref()
            .is_some_and(|v| v.get("result").is_some());
        let counts = if cmd.method == "state/update" {
            &state_updates
        } else {
            &user_messages
        };
        let n = counts.get(&cmd.cid).copied().unwrap_or(0);
        assert_eq!(
            n,
            usize::from(applied),
            "{} {} applied {n} times (answer {:?})",
            cmd.method,
            cmd.cid,
            cmd.first
        );
    }
    for (turn, n) in &started {
        assert_eq!(*n, 1, "turn {turn} started {n} times");
        assert_eq!(
            completed.get(turn),
            Some(&1),
            "turn {turn} must end exactly once"
        );
    }
    let applied_updates: usize = state_updates.values().sum();
    let read = c.request("session/read", json!({"sessionId": model.sid}));
    assert_eq!(
        read["result"]["history"]["snapshot"]["state"]["revision"],
        json!(applied_updates),
        "the revision counts the applied updates"
    );
}

fn seed() -> u64 {
    std::env::var("MSP_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0001)
}

#[test]
fn kill9_at_random_points_then_replay_every_command_id() {
    let seed = seed();
    eprintln!("reproduce with MSP_TEST_SEED={seed}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = Model {
        sid: v7(),
        ..Model::default()
    };
    const ROUNDS: usize = 5;
    const COMMANDS_PER_ROUND: usize = 12;
    for round in 0..ROUNDS {
        let (server, c) = start(dir.path(), Via::Stdio, &[], &[]);
        let mut c = c.expect("stdio client");
        if round == 0 {
            c.init();
            let r = c.start_session(&model.sid);
            assert!(r["result"].is_object(), "{r}");
        } else {
            resume_and_replay(&mut c, &mut model);
        }
        model.inflight.clear();
        let kill_at = rng.gen_range(0..COMMANDS_PER_ROUND);
        for k in 0..COMMANDS_PER_ROUND {
            let answered: Vec<usize> = (0..model.cmds.len())
                .filter(|i| !model.cmds[*i].conflict && model.cmds[*i].first.is_some())
                .collect();
            let cmd = if !answered.is_empty() && rng.gen_bool(0.15) {
                // Same id, other payload: must be refused, never applied.
                let orig = &model.cmds[answered[rng.gen_range(0..answered.len())]];
                let mut params = orig.params.clone();
                if orig.method == "state/update" {
                    params["set"] = json!({"conflict": true});
                } else {
                    params["input"] = json!([{"type": "text", "text": "CONFLICT"}]);
                }
                Cmd {
                    cid: orig.cid.clone(),
                    method: orig.method.clone(),
                    params,
                    first: None,
                    conflict: true,
                }
            } else if rng.gen_bool(0.6) {
                let cid = v7();
                let expected = model.revision_guess + u64::from(rng.gen_bool(0.2));
                Cmd {
                    params: json!({"commandId": cid, "sessionId": model.sid, "expectedRevision": expected, "set": {format!("k{round}_{k}"): k}}),
                    cid,
                    method: "state/update".into(),
                    first: None,
                    conflict: false,
                }
            } else {
                let cid = v7();
                let sleep_ms = rng.gen_range(0..40);
                Cmd {
                    params: json!({"commandId": cid, "sessionId": model.sid, "input": [{"type": "text", "text": format!("!sleep {sleep_ms} r{round} c{k}")}]}),
                    cid,
                    method: "turn/start".into(),
                    first: None,
                    conflict: false,
                }
            };
            model.cmds.push(cmd);
            let i = model.cmds.len() - 1;
            model.send(&mut c, i);
            if k == kill_at {
                break;
            }
            if rng.gen_bool(0.5) {
                // Wait for every answer so far before going on.
                while !model.inflight.is_empty() {
                    let f = c.wait_for("an answer", is_response);
                    model.record(&f);
                }
            }
        }
        // A random delay moves the kill across the intake pipeline (read,
        // append, fsync, ack); the checks hold wherever it lands.
        std::thread::sleep(std::time::Duration::from_micros(rng.gen_range(0..3_000)));
        server.kill9();
        // Answers that made it out before the kill count as received.
        for f in c.expect_eof() {
            if is_response(&f) {
                model.record(&f);
            }
        }
        for cmd in model.cmds.iter().filter(|c| c.conflict) {
            if let Some(v) = &cmd.first {
                assert_eq!(
                    v["error"]["data"]["reason"],
                    json!("command_id_conflict"),
                    "{v}"
                );
            }
        }
    }
    let (_server, c) = start(dir.path(), Via::Stdio, &[], &[]);
    let mut c = c.expect("stdio client");
    resume_and_replay(&mut c, &mut model);
    audit(&mut c, &model);
    let outcomes = |pred: &dyn Fn(&Value) -> bool| {
        model
            .cmds
            .iter()
            .filter(|c| c.first.as_ref().is_some_and(pred))
            .count()
    };
    eprintln!(
        "{} commands: {} results, {} abandoned, {} other rejections",
        model.cmds.len(),
        outcomes(&|v| v.get("result").is_some()),
        outcomes(&|v| v["error"]["data"]["reason"] == "abandoned"),
        outcomes(&|v| v.get("error").is_some() && v["error"]["data"]["reason"] != "abandoned"),
    );
}

#[test]
fn crash_between_intake_and_ack_then_replay_answers_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sid = v7();
    // 1st gated answer: session/start; the 2nd, the state/update, dies.
    let (mut server, c) = start(
        dir.path(),
        Via::Stdio,
        &[],
        &[("MSP_CRASH_AT", "after-intake-before-ack:2")],
    );
    let mut c = c.expect("stdio client");
    c.init();
    assert!(c.start_session(&sid)["result"].is_object());
    let up = v7();
    let update = json!({"commandId": up, "sessionId": sid, "expectedRevision": 0, "set": {"x": 1}});
    let id = c.send_request("state/update", update.clone());
    let got = c.wait_for_or_eof(|f| is_response(f) && f["id"] == json!(id));
    assert_eq!(got, None, "the process died before the ack");
    let status = server.wait_exit();
    assert_eq!(
        status.signal(),
        Some(6),
        "aborted by the failpoint: {status:?}"
    );

    // 2nd incarnation: the intake was durable, so the replay answers it.
    // Then the same failpoint stops a turn/start (resume is gated answer 1).
    let (mut server, c) = start(
        dir.path(),
        Via::Stdio,
        &[],
        &[("MSP_CRASH_AT", "after-intake-before-ack:2")],
    );
    let mut c = c.expect("stdio client");
    c.init();
    let r = c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    assert!(r["result"].is_object(), "{r}");
    let r = c.request("state/update", update.clone());
    let applied = r.get("result").is_some();
    if applied {
        assert_eq!(
            r["result"],
            json!({"commandId": up, "status": "accepted", "revision": 1})
        );
    } else {
        assert_eq!(reason(&r), "abandoned", "{r}");
    }
    let turn_id = v7();
    let turn = json!({"commandId": turn_id, "sessionId": sid, "input": [{"type": "text", "text": "!sleep 5000 long"}]});
    let id = c.send_request("turn/start", turn.clone());
    assert_eq!(
        c.wait_for_or_eof(|f| is_response(f) && f["id"] == json!(id)),
        None
    );
    assert_eq!(server.wait_exit().signal(), Some(6));

    // 3rd incarnation, no failpoint: replays, then the audit.
    let (_server, c) = start(dir.path(), Via::Stdio, &[], &[]);
    let mut c = c.expect("stdio client");
    c.init();
    let r = c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    assert!(r["result"].is_object(), "{r}");
    let again = c.request("state/update", update);
    assert_eq!(
        again.get("result").is_some(),
        applied,
        "the outcome is durable: {again}"
    );
    let t = c.request("turn/start", turn.clone());
    let turn_applied = t.get("result").is_some();
    if turn_applied {
        assert_eq!(
            t["result"],
            json!({"commandId": turn_id, "status": "accepted", "turnId": turn_id, "startedNewTurn": true, "disposition": "started"})
        );
    } else {
        assert_eq!(reason(&t), "abandoned", "{t}");
    }
    let t2 = c.request("turn/start", turn);
    assert_eq!(answer_value(&t2), answer_value(&t), "replays are identical");
    wait_idle(&mut c, &sid);
    let history = c.history(&sid);
    let updates = history
        .iter()
        .filter(|e| e["method"] == "state/updated" && e["params"]["commandId"] == json!(up))
        .count();
    assert_eq!(updates, usize::from(applied));
    let messages = history
        .iter()
        .filter(|e| {
            e["method"] == "item/completed" && e["params"]["item"]["commandId"] == json!(turn_id)
        })
        .count();
    assert_eq!(messages, usize::from(turn_applied));
    if turn_applied {
        let ends: Vec<&Value> = history
            .iter()
            .filter(|e| e["method"] == "turn/completed" && e["params"]["turnId"] == json!(turn_id))
            .collect();
        assert_eq!(ends.len(), 1, "the crashed turn ends exactly once");
        assert_eq!(ends[0]["params"]["terminal"], json!("failed"));
        assert_eq!(ends[0]["params"]["reason"], json!("crash"));
    }
}

/// What [`approve_an_effect_and_die`] left behind.
struct DiedAfterEffect {
    sid: String,
    aid: String,
    /// The `approval/decide` sent (to replay it).
    decide: Value,
    /// Its answer, if the host sent it before dying.
    first: Option<Value>,
}

/// Starts `msp serve` set to die right after an effect takes place, has it
/// run `!effect PROVIDER ACTION`, approves it, and checks the host died
/// there (SIGABRT).
fn approve_an_effect_and_die(
    dir: &std::path::Path,
    provider: &str,
    action: &str,
) -> DiedAfterEffect {
    let sid = v7();
    let (mut server, c) = start(
        dir,
        Via::Stdio,
        &[],
        &[("MSP_CRASH_AT", "after-effect-before-settle")],
    );
    let mut c = c.expect("stdio client");
    c.init();
    c.start_session(&sid);
    let text = format!("!effect {provider} {action}");
    c.request(
        "turn/start",
        json!({"commandId": v7(), "sessionId": sid, "input": [{"type": "text", "text": text}]}),
    );
    let req = c.wait_for("approval/request", |f| f["method"] == "approval/request");
    let aid = req["params"]["approvalId"]
        .as_str()
        .expect("approvalId")
        .to_string();
    let decide = json!({"commandId": v7(), "sessionId": sid, "approvalId": aid,
        "requirementId": {"approvalId": aid, "sourceIndex": 0}, "choiceId": "approve"});
    let id = c.send_request("approval/decide", decide.clone());
    let first = c.wait_for_or_eof(|f| is_response(f) && f["id"] == json!(id));
    c.expect_eof();
    assert_eq!(
        server.wait_exit().signal(),
        Some(6),
        "died after the effect"
    );
    DiedAfterEffect {
        sid,
        aid,
        decide,
        first,
    }
}

#[test]
fn crash_after_a_keyed_effect_reconciles_it_without_a_second_mutation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let DiedAfterEffect {
        sid,
        aid,
        decide,
        first,
    } = approve_an_effect_and_die(dir.path(), "keyed", "pay-42");
    let keyed = dir.path().join("providers/keyed");
    assert_eq!(
        std::fs::read_dir(&keyed).expect("keyed dir").count(),
        1,
        "the effect happened"
    );

    let (_server, c) = start(dir.path(), Via::Stdio, &[], &[]);
    let mut c = c.expect("stdio client");
    c.init();
    let r = c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    assert!(r["result"].is_object(), "{r}");
    let replay = c.request("approval/decide", decide);
    match &first {
        Some(f) => assert_eq!(answer_value(&replay), answer_value(f)),
        None => assert_eq!(replay["result"]["approvalId"], json!(aid), "{replay}"),
    }
    wait_idle(&mut c, &sid);
    let history = c.history(&sid);
    let tools: Vec<&Value> = history
        .iter()
        .filter(|e| e["method"] == "item/completed" && e["params"]["item"]["kind"] == "toolCall")
        .collect();
    assert_eq!(tools.len(), 1, "the tool call completes once: {tools:#?}");
    assert_eq!(
        tools[0]["params"]["item"]["effectOutcome"],
        json!("committed"),
        "reconciled by key"
    );
    assert_eq!(
        std::fs::read_dir(&keyed).expect("keyed dir").count(),
        1,
        "never mutated twice"
    );
}

#[test]
fn an_unkeyed_effect_lost_in_a_crash_stays_unknown_until_an_operator_decides() {
    use msp::client::events::{Notification, ViewEvent};
    use msp::client::gate::sqlite::SqliteGateStore;
    use msp::client::reconcile::{decide, reconcile, Decision, Reconciled, Settled};

    let dir = tempfile::tempdir().expect("tempdir");
    let DiedAfterEffect { sid, aid, .. } =
        approve_an_effect_and_die(dir.path(), "unkeyed", "pay-7");
    let mutations = || {
        std::fs::read_to_string(dir.path().join("providers/unkeyed.log"))
            .expect("unkeyed log")
            .lines()
            .count()
    };
    assert_eq!(mutations(), 1, "the effect happened once");

    let (_server, c) = start(dir.path(), Via::Stdio, &[], &[]);
    let mut c = c.expect("stdio client");
    c.init();
    let r = c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    assert!(r["result"].is_object(), "{r}");
    wait_idle(&mut c, &sid);
    let items: Vec<_> = c
        .history(&sid)
        .iter()
        .map(|e| ViewEvent::parse(e["method"].as_str().unwrap_or_default(), &e["params"]))
        .filter_map(|v| match v.notification {
            Notification::ItemCompleted { item, .. } if item.tool_call.is_some() => Some(item),
            _ => None,
        })
        .collect();
    assert_eq!(items.len(), 1, "the tool call completes once: {items:#?}");

    // Two application instances share one gate file. Neither can ask an
    // unkeyed provider, so both are told to involve a person.
    let gate = dir.path().join("gate.sqlite");
    let mut a = SqliteGateStore::open(&gate).expect("gate");
    let mut b = SqliteGateStore::open(&gate).expect("gate");
    let ticket = match reconcile(&mut a, &items[0], None, 1).expect("reconcile") {
        Reconciled::NeedsOperator(t) => t,
        other => panic!("an unkeyed effect lost in a crash is unknown: {other:?}"),
    };
    assert_eq!(
        ticket.key.as_str(),
        format!("{sid}:{aid}"),
        "the effect key names it"
    );
    let first = decide(
        &mut a,
        &ticket,
        Settled::Committed,
        "ana",
        "one line in unkeyed.log",
        2,
    )
    .expect("decide");
    let Decision::Recorded(rec) = first else {
        panic!("{first:?}")
    };
    let late = decide(&mut b, &ticket, Settled::NotStarted, "bo", "guess", 3).expect("decide");
    assert_eq!(
        late,
        Decision::AlreadySettled(rec.clone()),
        "the first decision stands"
    );
    drop(b);
    let mut reopened = SqliteGateStore::open(&gate).expect("gate");
    assert_eq!(
        reconcile(&mut reopened, &items[0], None, 4).expect("reconcile"),
        Reconciled::Resolved(rec)
    );
    assert_eq!(mutations(), 1, "reconciling never re-issued the effect");
}

#[test]
fn a_killed_holder_frees_its_lease_for_the_second_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sid = v7();
    let (first, c1) = start(dir.path(), Via::Stdio, &[], &[]);
    let mut c1 = c1.expect("stdio client");
    c1.init();
    c1.start_session(&sid);
    let up = c1.request(
        "state/update",
        json!({"commandId": v7(), "sessionId": sid, "expectedRevision": 0, "set": {"a": 1}}),
    );
    assert_eq!(up["result"]["revision"], json!(1));

    let (second, _) = start(dir.path(), Via::Tcp, &[], &[]);
    let mut c2 = second.tcp();
    c2.init();
    let r = c2.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    assert_eq!(common::kind(&r), "sessionInUse");
    first.kill9();
    drop(c1);
    let r = c2.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    assert_eq!(r["result"]["session"]["sessionId"], json!(sid), "{r}");
    assert_eq!(
        r["result"]["history"]["snapshot"]["state"]["kv"],
        json!({"a": 1})
    );
}

#[test]
fn crash_mid_group_commit_loses_no_acked_intake_and_applies_none_twice() {
    const CLIENTS: usize = 16;
    const COMMANDS_EACH: usize = 4;
    let dir = tempfile::tempdir().expect("tempdir");
    let sid = v7();
    let (mut server, _) = start(
        dir.path(),
        Via::Tcp,
        &[],
        &[("MSP_CRASH_AT", "mid-group-commit")],
    );
    let mut setup = server.tcp();
    setup.init();
    assert!(setup.start_session(&sid)["result"].is_object());
    let mut clients: Vec<Client> = (0..CLIENTS)
        .map(|_| {
            let mut c = server.tcp();
            c.init();
            c
        })
        .collect();
    // Every client pipelines its commands at once: syncs cover several
    // intakes, and the first such sync kills the host.
    let mut sent: Vec<(usize, u64, Value)> = Vec::new();
    for (n, c) in clients.iter_mut().enumerate() {
        // One write per client, so its intakes arrive together.
        let mut batch = Vec::new();
        for k in 0..COMMANDS_EACH {
            let p = json!({"commandId": v7(), "sessionId": sid, "expectedRevision": k, "set": {format!("c{n}"): k}});
            let id = k as u64 + 1;
            let req = json!({"jsonrpc": "2.0", "id": id, "method": "state/update", "params": p});
            batch.extend(serde_json::to_vec(&req).expect("serialise"));
            batch.push(b'\n');
            sent.push((n, id, p));
        }
        assert!(c.send_raw(&batch));
    }
    let mut first: BTreeMap<String, Value> = BTreeMap::new();
    for (n, c) in clients.iter_mut().enumerate() {
        for f in c.expect_eof() {
            if let Some((_, _, p)) = sent
                .iter()
                .find(|(m, id, _)| *m == n && is_response(&f) && f["id"] == json!(id))
            {
                first.insert(
                    p["commandId"].as_str().expect("cid").to_string(),
                    answer_value(&f),
                );
            }
        }
    }
    assert_eq!(server.wait_exit().signal(), Some(6), "the failpoint fired");
    assert!(
        first.len() < sent.len(),
        "some intakes were caught in flight"
    );

    let (_server, c) = start(dir.path(), Via::Stdio, &[], &[]);
    let mut c = c.expect("stdio client");
    c.init();
    assert!(c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid})
    )["result"]
        .is_object());
    let mut applied = BTreeMap::new();
    for (_, _, p) in &sent {
        let cid = p["commandId"].as_str().expect("cid").to_string();
        let got = c.request("state/update", p.clone());
        match first.get(&cid) {
            Some(v) => assert_eq!(
                &answer_value(&got),
                v,
                "an answered intake survives identically"
            ),
            None => assert!(
                got.get("result").is_some()
                    || ["stale_revision", "abandoned"].contains(&reason(&got)),
                "{got}"
            ),
        }
        let again = c.request("state/update", p.clone());
        assert_eq!(answer_value(&again), answer_value(&got));
        applied.insert(cid, got.get("result").is_some());
    }
    let history = c.history(&sid);
    for (cid, was_applied) in &applied {
        let n = history
            .iter()
            .filter(|e| e["method"] == "state/updated" && e["params"]["commandId"] == json!(cid))
            .count();
        assert_eq!(n, usize::from(*was_applied), "{cid} applied {n} times");
    }
}
