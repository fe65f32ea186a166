//! The reference model rejects a doctored history for each rule it
//! checks, and accepts the legal one it was doctored from.
//!
//! Each test writes a small history by hand (what a host received, wrote,
//! synced and sent), the way a correct host would produce it; the control
//! asserts the model finds nothing wrong with it; the doctored copy holds
//! exactly one defect, and the model must name the promise it breaks.
//! Real runs are the other half of the evidence: every sweep of every
//! scenario is a clean history the model accepts.

use msp_sim::model::Model;
use msp_sim::oracle::Violation;
use msp_sim::trace::{Actor, Trace, What};
use msp_sim::workload::Scenario;
use serde_json::{json, Value};

const T0: u64 = msp_sim::run::START_MS;
/// The session: a UUIDv7 minted at the simulated clock's start.
const S: &str = "019885c4-e838-7000-8000-0000000000aa";

/// A UUIDv7 minted at the simulated clock's start (`T0`): a command id,
/// or an id the host mints (items, approvals: PROTOCOL.md 2).
fn cid(n: u32) -> String {
    format!("{:08x}-{:04x}-7c21-a54a-{n:012x}", T0 >> 16, T0 & 0xffff)
}

fn cursor(n: u64) -> String {
    format!("v:{S}:{n}")
}

/// A history under construction.
#[derive(Default, Clone)]
struct H {
    entries: Vec<(u64, Actor, What)>,
    t: u64,
    len: usize,
    n: u64,
    seq: u64,
    /// The host incarnation of `recv_on`/`send_on` (0 means 1).
    inc: u64,
    /// The last sequence of each source stream `(kind, id)`.
    streams: std::collections::BTreeMap<(String, String), u64>,
    /// The last host started is durable.
    durable: bool,
    /// `emittedAtMs` of the notifications `notify` sends: the trace's
    /// time when `None`; this value (`null`: the member left out).
    emitted: Option<Value>,
    /// `approvalMode.source` spelled otherwise in `start`'s and
    /// `snapshot_resume`'s `Session` objects (`startup` and `replay`
    /// when `None`).
    source: Option<&'static str>,
}

/// A right answer to `initialize` (PROTOCOL.md 1) from a host of that
/// durability.
fn init_ok(id: Value, durable: bool) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {
        "serverInfo": {"name": "msp", "version": "0.1.0"}, "userAgent": "msp/0.1.0",
        "museHome": "/sim/data", "platformFamily": "unix", "platformOs": "linux",
        "schema": {"version": 1, "fingerprint": format!("sha256:{}", "0a".repeat(32))},
        "grantedCapabilities": [], "experimentalApi": false,
        "sessionDurability": if durable { "durable" } else { "ephemeral" }}})
}

fn record(rtype: u8, body: Value) -> Vec<u8> {
    msp::log::encode_frame(rtype, &serde_json::to_vec(&body).unwrap())
}

impl H {
    fn new() -> H {
        let mut h = H::default();
        h.host_starts(1, true);
        h.connects(1, 1);
        h
    }

    /// Host 0 starts incarnation `inc`.
    fn host_starts(&mut self, inc: u64, durable: bool) {
        self.durable = durable;
        self.host(What::HostStart {
            inc,
            durable,
            solo_syncs: false,
        });
    }

    /// Client `link - 1` opens `link` to host 0's incarnation `inc` and
    /// the host reads its handshake (`initialize`, answered, then
    /// `initialized`).
    fn connects(&mut self, link: u64, inc: u64) {
        self.opens(link, inc);
        self.handshake_at(0, inc, link);
    }

    /// Host `host`'s incarnation `inc` reads `link`'s handshake:
    /// `initialize` (request 0, answered), then `initialized`.
    fn handshake_at(&mut self, host: usize, inc: u64, link: u64) {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                          "params": {"clientInfo": {"name": "t", "version": "1"}}});
        let ok = init_ok(json!(0), self.durable);
        let done = json!({"jsonrpc": "2.0", "method": "initialized"});
        let host = Actor::Host(host);
        for (what, line) in [("recv", init), ("send", ok), ("recv", done)] {
            let line = line.to_string();
            let what = if what == "recv" {
                What::HostRecv { inc, link, line }
            } else {
                What::HostSend { inc, link, line }
            };
            self.push(host, what);
        }
    }

    /// Client `link - 1` opens `link` to host 0's incarnation `inc`; no
    /// handshake yet.
    fn opens(&mut self, link: u64, inc: u64) {
        self.push(
            Actor::Client(link as usize - 1),
            What::Connect { link, host: 0, inc },
        );
    }

    fn push(&mut self, actor: Actor, what: What) {
        self.t += 1;
        self.entries.push((self.t, actor, what));
    }

    fn host(&mut self, what: What) {
        self.push(Actor::Host(0), what);
    }

    fn now(&self) -> u64 {
        T0 + self.t
    }

    /// A client request reaching the host on link 1.
    fn recv(&mut self, id: u64, method: &str, params: Value) {
        let line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        self.push(
            Actor::Client(0),
            What::ClientSend {
                link: 1,
                line: line.clone(),
            },
        );
        self.host(What::HostRecv {
            inc: 1,
            link: 1,
            line,
        });
    }

    fn send(&mut self, frame: Value) {
        self.host(What::HostSend {
            inc: 1,
            link: 1,
            line: frame.to_string(),
        });
    }

    fn answer(&mut self, id: u64, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn reject(&mut self, id: u64, error: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "error": error}));
    }

    fn append(&mut self, recs: Vec<Vec<u8>>) {
        let bytes: Vec<u8> = recs.concat();
        self.len += bytes.len();
        self.host(What::Append {
            inc: 1,
            session: S.into(),
            bytes,
        });
    }

    fn sync(&mut self) {
        let upto = self.len as u64;
        self.host(What::Synced {
            inc: 1,
            session: S.into(),
            upto_bytes: upto,
        });
    }

    fn received(&mut self, c: &str, method: &str, params: Value, answer: Value) -> Vec<u8> {
        self.seq += 1;
        record(
            3,
            json!({"record": "received", "commandId": c, "method": method, "params": params,
                   "signature": "sig", "answer": answer, "atMs": self.now()}),
        )
    }

    fn settled(&self, c: &str) -> Vec<u8> {
        record(
            4,
            json!({"record": "settled", "commandId": c, "outcome": "applied"}),
        )
    }

    fn settled_rejected(&self, c: &str, error: &Value) -> Vec<u8> {
        record(
            4,
            json!({"record": "settled", "commandId": c, "outcome": "rejected", "error": error}),
        )
    }

    /// The next durable event's record and its params.
    fn event(&mut self, method: &str, mut params: Value, cause: Option<&str>) -> (Vec<u8>, Value) {
        self.n += 1;
        params["sessionId"] = json!(S);
        params["viewCursor"] = json!(cursor(self.n));
        // The source stream a correct host records it on (PROTOCOL.md 4.5).
        let turn = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let (kind, id) = match method {
            "turn/started" | "turn/completed" => ("run", turn(&params["turnId"])),
            "item/started" | "item/completed" if params["item"]["kind"] != "toolCall" => {
                ("run", turn(&params["item"]["turnId"]))
            }
            // An approval's records share a review stream of their own.
            m if m.starts_with("approval/") => (
                "approval.review",
                format!("review-{}", turn(&params["approvalId"])),
            ),
            _ => ("session", S.to_string()),
        };
        let seq = self.streams.entry((kind.into(), id.clone())).or_default();
        *seq += 1;
        let record_id = cid(5000 + self.n as u32);
        params["sourceRange"] = json!({"stream": {"kind": kind, "id": id},
            "first": {"id": record_id, "sequence": *seq}, "last": {"id": record_id, "sequence": *seq}});
        let rec = record(
            5,
            json!({"record": "event", "n": self.n, "method": method, "params": params,
                   "emittedAtMs": self.now(), "cause": cause}),
        );
        (rec, params)
    }

    fn notify(&mut self, method: &str, params: &Value) {
        let at = self.emitted.clone().unwrap_or(json!(self.now()));
        let mut frame =
            json!({"jsonrpc": "2.0", "method": method, "params": params, "emittedAtMs": at});
        if at.is_null() {
            frame.as_object_mut().unwrap().remove("emittedAtMs");
        }
        self.send(frame);
    }

    fn session_obj(&self, created_ms: u64, turn_count: u64, active: Option<&str>) -> Value {
        json!({
            "sessionId": S, "status": if active.is_some() { "running" } else { "idle" },
            "turnCount": turn_count, "path": format!("/sim/data/sessions/{S}/session.log"),
            "createdAt": msp_sim::model::session::iso8601(created_ms),
            "updatedAt": msp_sim::model::session::iso8601(created_ms),
            "workspaceRoot": null, "providerId": "msp", "modelId": "scripted",
            "approvalMode": {"mode": "promptUnmatched", "source": self.source.unwrap_or("startup"), "lastCommandId": null},
            "forkedFrom": null, "activeTurnId": active,
        })
    }

    /// `session/start` of S by cid(1), answered.
    fn start(&mut self) {
        self.recv(
            1,
            "session/start",
            json!({"commandId": cid(1), "sessionId": S}),
        );
        self.host(What::LeaseGrant {
            inc: 1,
            session: S.into(),
        });
        let created_ms = self.now();
        let result =
            json!({"session": self.session_obj(created_ms, 0, None), "viewCursor": cursor(0)});
        let recs = vec![
            record(
                1,
                json!({"record": "created", "sessionId": S, "createdAtMs": created_ms,
                       "workspaceRoot": null, "startCommandId": cid(1)}),
            ),
            record(2, json!({"record": "loaded", "atMs": created_ms})),
            self.received(
                &cid(1),
                "session/start",
                json!({"sessionId": S, "workspaceRoot": null}),
                json!({"result": result}),
            ),
            self.settled(&cid(1)),
        ];
        self.append(recs);
        self.sync();
        // PROTOCOL.md 4.1: broadcast to every initialized connection (here
        // link 1 alone) before the response.
        self.send(json!({"jsonrpc": "2.0", "method": "session/started",
                         "params": {"session": result["session"]}, "emittedAtMs": self.now()}));
        self.answer(1, result);
    }

    /// A fresh `turn/start` of `text` by cid(n), request `id`: admitted,
    /// launched, answered, its events sent.
    fn turn(&mut self, id: u64, n: u32, text: &str) {
        let (ack, recs, [p1, p2]) = self.turn_begun(id, n, text);
        self.append(recs);
        self.sync();
        self.answer(id, ack);
        self.notify("turn/started", &p1);
        self.notify("item/completed", &p2);
    }

    /// A fresh `turn/start` of `text` by cid(n), request `id`, received
    /// and admitted: its ack, its records (intake, `turn/started`, the
    /// user message's `item/completed`, settled; not appended yet) and
    /// the two events' params.
    fn turn_begun(&mut self, id: u64, n: u32, text: &str) -> (Value, Vec<Vec<u8>>, [Value; 2]) {
        self.turn_begun_with_item(id, n, text, &cid(1000 + n))
    }

    /// [`H::turn_begun`], the user message's item minted as `item_id`.
    fn turn_begun_with_item(
        &mut self,
        id: u64,
        n: u32,
        text: &str,
        item_id: &str,
    ) -> (Value, Vec<Vec<u8>>, [Value; 2]) {
        let c = cid(n);
        let p = json!({"commandId": c, "sessionId": S, "input": [{"type": "text", "text": text}]});
        self.recv(id, "turn/start", p);
        let ack = json!({"commandId": c, "status": "accepted", "turnId": c, "startedNewTurn": true, "disposition": "started"});
        let received = self.received(
            &c,
            "turn/start",
            json!({"sessionId": S, "input": [{"type": "text", "text": text}], "ifBusy": "queue"}),
            json!({"result": ack}),
        );
        let (e1, p1) = self.event(
            "turn/started",
            json!({"turnId": c, "commandId": c}),
            Some(&c),
        );
        let item = json!({"itemId": item_id, "kind": "userMessage", "turnId": c, "revision": 1,
                          "status": "completed", "text": text, "commandId": c});
        let (e2, p2) = self.event("item/completed", json!({"item": item}), Some(&c));
        let settled = self.settled(&c);
        (ack, vec![received, e1, e2, settled], [p1, p2])
    }

    /// A fresh `turn/start` of `text` by `c`, request `id`, whose launch
    /// fails at once: acked `started`, its `turn/completed` failed with the
    /// failure's text, its intake settled rejected `launch_failed` with
    /// `message`; logged and synced, nothing sent yet. Returns the request
    /// params, the ack, the event's params and the rejection.
    fn failed_launch(
        &mut self,
        id: u64,
        c: &str,
        text: &str,
        message: &str,
    ) -> (Value, Value, Value, Value) {
        let input = json!([{"type": "text", "text": text}]);
        let p = json!({"commandId": c, "sessionId": S, "input": input});
        self.recv(id, "turn/start", p.clone());
        let ack = json!({"commandId": c, "status": "accepted", "turnId": c,
                         "startedNewTurn": true, "disposition": "started"});
        let received = self.received(
            c,
            "turn/start",
            json!({"sessionId": S, "input": input, "ifBusy": "queue"}),
            json!({"result": ack}),
        );
        let why = "scripted launch failure (!fail-launch)";
        let (e, event) = self.event(
            "turn/completed",
            json!({"turnId": c, "terminal": "failed", "reason": why,
                   "error": {"kind": "launchError", "message": why, "retryable": true}}),
            Some(c),
        );
        let mut error = rejected(c, "turn/start", "launch_failed");
        error["message"] = json!(message);
        let settled = self.settled_rejected(c, &error);
        self.append(vec![received, e, settled]);
        self.sync();
        (p, ack, event, error)
    }

    /// An accepted `state/update` by cid(n), request `id`, to `revision`.
    fn update(&mut self, id: u64, n: u32, expected: u64, set: Value) -> (Value, Value) {
        let c = cid(n);
        self.update_spelled(id, [&c, &c, &c], expected, set)
    }

    /// [`H::update`] whose command id is spelled `sent` in the request
    /// (and so in its ack), `recorded` in the log and `evented` in its
    /// `state/updated`: `[sent, recorded, evented]`.
    fn update_spelled(
        &mut self,
        id: u64,
        [sent, recorded, evented]: [&str; 3],
        expected: u64,
        set: Value,
    ) -> (Value, Value) {
        self.recv(
            id,
            "state/update",
            json!({"commandId": sent, "sessionId": S, "expectedRevision": expected, "set": set}),
        );
        let ack = json!({"commandId": sent, "status": "accepted", "revision": expected + 1});
        let received = self.received(
            recorded,
            "state/update",
            json!({"sessionId": S, "expectedRevision": expected, "set": set}),
            json!({"result": ack}),
        );
        let (e, p) = self.event(
            "state/updated",
            json!({"revision": expected + 1, "set": set, "commandId": evented}),
            Some(recorded),
        );
        let settled = self.settled(recorded);
        self.append(vec![received, e, settled]);
        self.sync();
        self.answer(id, ack.clone());
        self.notify("state/updated", &p);
        (ack, p)
    }

    /// A cursor-less `session/resume` by `c`, request `id`, answered with
    /// a snapshot at head `head` of `state` ([`snapshot_state`]): its
    /// intake logged and synced, then answered. The result.
    fn snapshot_resume(
        &mut self,
        id: u64,
        c: &str,
        head: u64,
        active: Option<&str>,
        state: Value,
    ) -> Value {
        self.recv(
            id,
            "session/resume",
            json!({"commandId": c, "sessionId": S}),
        );
        let created = self.entries.iter().find_map(|(at, _, w)| match w {
            What::LeaseGrant { .. } => Some(T0 + *at),
            _ => None,
        });
        let mut session = self.session_obj(created.unwrap(), 0, active);
        session["approvalMode"]["source"] = json!(self.source.unwrap_or("replay"));
        let snapshot = json!({"schemaVersion": 1, "viewCursor": cursor(head), "state": state});
        let result = json!({"session": session, "viewCursor": cursor(head),
            "history": {"mode": "snapshot", "items": null, "snapshot": snapshot}, "pendingRequests": []});
        let r = self.received(
            c,
            "session/resume",
            json!({"sessionId": S, "cursor": null}),
            json!({"result": result}),
        );
        let st = self.settled(c);
        self.append(vec![r, st]);
        self.sync();
        self.answer(id, result.clone());
        result
    }

    fn trace(&self) -> Trace {
        let mut t = Trace::new();
        for (at, actor, what) in &self.entries {
            t.push(*at, *actor, what.clone());
        }
        t
    }

    fn check(&self) -> Vec<Violation> {
        Model::check(&self.trace(), Scenario::Mixed).violations
    }
}

/// A snapshot's `state` with these members (no turn ever completed, no
/// approval or command pending).
fn snapshot_state(items: Value, active: Value, revision: u64, kv: Value) -> Value {
    json!({
        "items": items, "activeTurn": active, "queuedTurns": [], "pendingApprovals": [],
        "pendingUserInputs": [], "approvalMode": {"mode": "promptUnmatched", "source": "replay", "lastCommandId": null},
        "effectiveModel": {"modelId": "scripted", "providerId": "msp", "source": "default"},
        "goal": null, "todoList": null, "branch": null,
        "tokenUsage": {"promptTokens": 0, "outputTokens": 0, "totalTokens": 0},
        "turnCount": 0, "pendingCommands": [], "revision": revision, "kv": kv})
}

fn clean(h: &H) {
    let v = h.check();
    assert!(
        v.is_empty(),
        "control: the legal history is judged wrong: {v:#?}"
    );
}

fn caught(h: &H, property: &str) {
    let v = h.check();
    assert!(
        v.iter().any(|x| x.property == property),
        "{property} missed the defect; the model said {v:#?}"
    );
}

/// The legal history passes; the illegal one is caught as `property`.
fn judged(h: &H, legal: bool, property: &str) {
    if legal {
        clean(h);
    } else {
        caught(h, property);
    }
}

fn rejected(c: &str, method: &str, reason: &str) -> Value {
    json!({"code": -32030, "message": format!("{method} command {c} rejected: {reason}"),
           "data": {"kind": "commandRejected", "commandId": c, "reason": reason}})
}

// ----- the three promises -------------------------------------------------

#[test]
fn legal_histories_pass() {
    let mut h = H::new();
    h.start();
    h.turn(2, 10, "hello");
    h.update(3, 11, 0, json!({"a": 1}));
    clean(&h);
}

#[test]
fn durable_dedupe_an_ack_before_its_intake_is_synced() {
    let mut h = H::new();
    h.start();
    h.recv(
        2,
        "state/update",
        json!({"commandId": cid(11), "sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
    );
    let ack = json!({"commandId": cid(11), "status": "accepted", "revision": 1});
    let r = h.received(
        &cid(11),
        "state/update",
        json!({"sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
        json!({"result": ack}),
    );
    let (e, _) = h.event(
        "state/updated",
        json!({"revision": 1, "set": {"a": 1}, "commandId": cid(11)}),
        Some(&cid(11)),
    );
    let st = h.settled(&cid(11));
    h.append(vec![r, e, st]);
    h.answer(2, ack); // before the sync
    h.sync();
    caught(&h, "durable-dedupe");
}

#[test]
fn durable_dedupe_a_second_intake_of_one_id() {
    let mut h = H::new();
    h.start();
    h.update(2, 11, 0, json!({"a": 1}));
    let mut legal = H::new();
    legal.start();
    legal.update(2, 11, 0, json!({"a": 1}));
    legal.recv(
        3,
        "state/update",
        json!({"commandId": cid(11), "sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
    );
    legal.answer(
        3,
        json!({"commandId": cid(11), "status": "accepted", "revision": 1}),
    );
    clean(&legal);
    // The doctored host admits the retry again instead of replaying it.
    h.recv(
        3,
        "state/update",
        json!({"commandId": cid(11), "sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
    );
    let r = h.received(
        &cid(11),
        "state/update",
        json!({"sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
        json!({"error": rejected(&cid(11), "state/update", "stale_revision")}),
    );
    h.append(vec![r]);
    h.sync();
    caught(&h, "durable-dedupe");
}

#[test]
fn exactly_once_an_update_applied_twice() {
    let mut h = H::new();
    h.start();
    h.update(2, 11, 0, json!({"a": 1}));
    let (e, p) = h.event(
        "state/updated",
        json!({"revision": 2, "set": {"a": 1}, "commandId": cid(11)}),
        Some(&cid(11)),
    );
    h.append(vec![e]);
    h.sync();
    h.notify("state/updated", &p);
    caught(&h, "exactly-once-effect");
}

#[test]
fn exactly_once_a_turn_started_twice() {
    let mut h = H::new();
    h.start();
    h.turn(2, 10, "hello");
    let (e, _) = h.event(
        "turn/started",
        json!({"turnId": cid(10), "commandId": cid(10)}),
        Some(&cid(10)),
    );
    h.append(vec![e]);
    h.sync();
    caught(&h, "exactly-once-effect");
}

#[test]
fn payload_identity_another_payload_replayed_as_the_original() {
    let mut legal = H::new();
    legal.start();
    let (ack, _) = legal.update(2, 11, 0, json!({"a": 1}));
    let mut h = H::new();
    h.start();
    h.update(2, 11, 0, json!({"a": 1}));
    // Exactly one defined param differs: the conflict must be refused.
    let other =
        json!({"commandId": cid(11), "sessionId": S, "expectedRevision": 0, "set": {"a": 2}});
    legal.recv(3, "state/update", other.clone());
    legal.reject(3, rejected(&cid(11), "state/update", "command_id_conflict"));
    clean(&legal);
    h.recv(3, "state/update", other);
    h.answer(3, ack);
    caught(&h, "payload-identity");
}

#[test]
fn payload_identity_the_same_payload_refused_as_a_conflict() {
    let mut h = H::new();
    h.start();
    h.update(2, 11, 0, json!({"a": 1}));
    // An unknown member and reordered keys are the same payload.
    h.recv(3, "state/update", json!({"set": {"a": 1}, "expectedRevision": 0, "sessionId": S, "commandId": cid(11), "junk": true}));
    h.reject(3, rejected(&cid(11), "state/update", "command_id_conflict"));
    caught(&h, "payload-identity");
}

#[test]
fn payload_identity_integers_spelled_as_decimals_refused_as_a_conflict() {
    // PROTOCOL.md 4.4 signs payloads by RFC 8785, which writes `1.0` and
    // `1e0` as `1`: the same payload, so a replay. `1.5` is another.
    for (spelled, same) in [("1.0", true), ("1e0", true), ("1.5", false)] {
        let mut h = H::new();
        h.start();
        let (ack, _) = h.update(2, 11, 0, json!({"a": 1}));
        let p: Value = serde_json::from_str(&format!(
            r#"{{"commandId": "{}", "sessionId": "{S}", "expectedRevision": 0, "set": {{"a": {spelled}}}}}"#,
            cid(11)
        ))
        .unwrap();
        h.recv(3, "state/update", p.clone());
        h.answer(3, ack.clone());
        judged(&h, same, "payload-identity");
        let mut h2 = H::new();
        h2.start();
        h2.update(2, 11, 0, json!({"a": 1}));
        h2.recv(3, "state/update", p);
        h2.reject(3, rejected(&cid(11), "state/update", "command_id_conflict"));
        judged(&h2, !same, "payload-identity");
    }
}

#[test]
fn payload_identity_an_intake_recording_a_payload_no_request_carried() {
    let mut h = H::new();
    h.start();
    h.recv(
        2,
        "state/update",
        json!({"commandId": cid(11), "sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
    );
    let ack = json!({"commandId": cid(11), "status": "accepted", "revision": 1});
    let r = h.received(
        &cid(11),
        "state/update",
        json!({"sessionId": S, "expectedRevision": 0, "set": {"a": 9}}),
        json!({"result": ack}),
    );
    let (e, _) = h.event(
        "state/updated",
        json!({"revision": 1, "set": {"a": 9}, "commandId": cid(11)}),
        Some(&cid(11)),
    );
    let st = h.settled(&cid(11));
    h.append(vec![r, e, st]);
    h.sync();
    caught(&h, "payload-identity");
}

/// A `state/update` whose id its request spelled in uppercase, recorded
/// under `recorded` and named `evented` by its `state/updated`, answered
/// and notified (PROTOCOL.md 2: the id is echoed exactly as sent).
fn uppercase_update(recorded: &str, evented: &str) -> H {
    let sent = cid(11).to_ascii_uppercase();
    let mut h = H::new();
    h.start();
    h.update_spelled(2, [&sent, recorded, evented], 0, json!({"a": 1}));
    h
}

#[test]
fn payload_identity_an_intake_recording_its_id_in_a_spelling_no_request_had() {
    let upper = cid(11).to_ascii_uppercase();
    clean(&uppercase_update(&upper, &upper));
    // The doctored host records (and echoes) the ledger's lowercase key.
    let lower = cid(11);
    caught(&uppercase_update(&lower, &lower), "payload-identity");
}

#[test]
fn exactly_once_an_effect_naming_its_command_in_another_spelling() {
    let upper = cid(11).to_ascii_uppercase();
    // The event names the command by its key, not as it was sent.
    caught(&uppercase_update(&upper, &cid(11)), "exactly-once-effect");
}

#[test]
fn liveness_a_request_on_an_open_link_never_answered() {
    // A bad line with an id and no method is a request the host must
    // refuse (-32600 under its id), not a response it may drop.
    let bad = json!({"jsonrpc": "2.0", "id": 7, "params": {"sessionId": S}}).to_string();
    let mut h = H::new();
    h.start();
    h.push(
        Actor::Client(0),
        What::ClientSend {
            link: 1,
            line: bad.clone(),
        },
    );
    h.host(What::HostRecv {
        inc: 1,
        link: 1,
        line: bad,
    });
    let mut legal = h.clone();
    legal.reject(
        7,
        json!({"code": -32600, "message": "not a request", "data": {"kind": "invalidRequest"}}),
    );
    clean(&legal);
    caught(&h, "liveness");
}

#[test]
fn liveness_a_request_hung_after_the_faults_healed() {
    // Once the faults heal, a live host answers within the client's
    // request timeout. A request it read then and still owed when the
    // client gave up on the link (after its timeouts) was lost: a
    // wake-up that never came, a load that never ended.
    let timeout = msp_sim::client::REQUEST_TIMEOUT_MS;
    let gives_up = |h: &mut H, after_ms: u64| {
        h.t += after_ms;
        h.push(
            Actor::Client(0),
            What::LinkClosed {
                link: 1,
                why: "client left",
            },
        );
    };
    let mut h = H::new();
    h.start();
    let mut before = h.clone();
    h.push(Actor::World, What::Phase("liveness".into()));
    h.recv(2, "session/read", json!({"sessionId": S}));
    let mut early = h.clone();
    gives_up(&mut h, timeout);
    caught(&h, "liveness");
    // Legal: the client leaves before the timeout (another request's
    // error sends it to a fresh link).
    gives_up(&mut early, timeout - 10);
    clean(&early);
    // A request read while faults could still slow it has the timeout
    // from the heal: a sync stalled, a load behind a failed read.
    before.recv(2, "session/read", json!({"sessionId": S}));
    before.t += 2 * timeout;
    before.push(Actor::World, What::Phase("liveness".into()));
    let mut slowed = before.clone();
    gives_up(&mut slowed, timeout - 10);
    clean(&slowed);
    // Still owed that long after the heal, it hangs as surely.
    gives_up(&mut before, timeout);
    caught(&before, "liveness");
}

// ----- the ledger ---------------------------------------------------------

#[test]
fn payload_identity_a_durable_intake_of_an_id_a_carrier_less_row_took() {
    // PROTOCOL.md 4.4: a carrier-less row's answer dedupes for the host's
    // lifetime, so in that lifetime its id is taken: a `state/update` of
    // the same id (another payload) must be refused `command_id_conflict`,
    // not recorded. Control: the row was itself refused
    // `command_id_conflict` (it took nothing; whether that refusal was
    // right is another check's).
    let stop_all = |h: &mut H, refused: bool| {
        h.recv(
            2,
            "task/stopAll",
            json!({"commandId": cid(11), "sessionId": S}),
        );
        if refused {
            h.reject(2, rejected(&cid(11), "task/stopAll", "command_id_conflict"));
        } else {
            h.answer(2, json!({"commandId": cid(11), "status": "accepted"}));
        }
    };
    let mut h = H::new();
    h.start();
    stop_all(&mut h, false);
    h.update(3, 11, 0, json!({"probe": 1}));
    caught(&h, "payload-identity");
    let mut refused = H::new();
    refused.start();
    stop_all(&mut refused, true);
    refused.update(3, 11, 0, json!({"probe": 1}));
    assert!(
        !refused
            .check()
            .iter()
            .any(|v| v.property == "payload-identity" && v.detail.contains("carrier-less row")),
        "{:?}",
        refused.check()
    );
}

#[test]
fn value_identical_replays_a_replay_with_another_ack() {
    let mut h = H::new();
    h.start();
    h.update(2, 11, 0, json!({"a": 1}));
    h.recv(
        3,
        "state/update",
        json!({"commandId": cid(11), "sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
    );
    h.answer(
        3,
        json!({"commandId": cid(11), "status": "accepted", "revision": 2}),
    );
    caught(&h, "value-identical-replays");
}

#[test]
fn rejection_idempotency_a_rejection_replayed_with_another_reason() {
    let mut h = H::new();
    h.start();
    let stale =
        json!({"commandId": cid(12), "sessionId": S, "expectedRevision": 5, "set": {"a": 1}});
    h.recv(2, "state/update", stale.clone());
    let mut e = rejected(&cid(12), "state/update", "stale_revision");
    e["data"]["currentRevision"] = json!(0);
    let r = h.received(
        &cid(12),
        "state/update",
        json!({"sessionId": S, "expectedRevision": 5, "set": {"a": 1}}),
        json!({"error": e}),
    );
    let st = h.settled_rejected(&cid(12), &e);
    h.append(vec![r, st]);
    h.sync();
    h.reject(2, e.clone());
    h.recv(3, "state/update", stale);
    let mut legal_replay = H::new();
    legal_replay.entries = h.entries.clone();
    legal_replay.t = h.t;
    legal_replay.reject(3, e.clone());
    clean(&legal_replay);
    h.reject(3, rejected(&cid(12), "state/update", "queue_full"));
    caught(&h, "rejection-idempotency");
}

#[test]
fn admission_decision_an_update_accepted_at_the_wrong_revision() {
    let mut h = H::new();
    h.start();
    h.update(2, 11, 0, json!({"a": 1}));
    // expectedRevision 0 is stale now (revision 1): must be refused.
    h.update(3, 12, 0, json!({"b": 1}));
    caught(&h, "admission-decision");
}

#[test]
fn admission_decision_a_fresh_start_while_busy() {
    let mut h = H::new();
    h.start();
    h.turn(2, 10, "!sleep 5000 long");
    // A second submit while busy must queue, not start.
    h.turn(3, 20, "second");
    let v = h.check();
    assert!(
        v.iter().any(|x| x.property == "admission-decision"),
        "{v:#?}"
    );
}

#[test]
fn turn_id_derivation_a_turn_under_another_id() {
    let mut h = H::new();
    h.start();
    let c = cid(10);
    h.recv(
        2,
        "turn/start",
        json!({"commandId": c, "sessionId": S, "input": [{"type": "text", "text": "x"}]}),
    );
    let ack = json!({"commandId": c, "status": "accepted", "turnId": c, "startedNewTurn": true, "disposition": "started"});
    let r = h.received(
        &c,
        "turn/start",
        json!({"sessionId": S, "input": [{"type": "text", "text": "x"}], "ifBusy": "queue"}),
        json!({"result": ack}),
    );
    let (e, _) = h.event(
        "turn/started",
        json!({"turnId": cid(99), "commandId": c}),
        Some(&c),
    );
    h.append(vec![r, e]);
    h.sync();
    caught(&h, "turn-id-derivation");
}

#[test]
fn acked_effect_an_accepted_update_without_its_event() {
    let mut h = H::new();
    h.start();
    h.recv(
        2,
        "state/update",
        json!({"commandId": cid(11), "sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
    );
    let ack = json!({"commandId": cid(11), "status": "accepted", "revision": 1});
    let r = h.received(
        &cid(11),
        "state/update",
        json!({"sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
        json!({"result": ack}),
    );
    let st = h.settled(&cid(11));
    h.append(vec![r, st]);
    h.sync();
    h.answer(2, ack);
    h.update(3, 12, 0, json!({"b": 1}));
    caught(&h, "acked-effect");
}

#[test]
fn intake_settled_twice() {
    let mut h = H::new();
    h.start();
    h.update(2, 11, 0, json!({"a": 1}));
    let st = h.settled(&cid(11));
    h.append(vec![st]);
    h.sync();
    caught(&h, "intake-settled");
}

#[test]
fn recovery_an_abandoned_settlement_outside_recovery() {
    let mut h = H::new();
    h.start();
    h.recv(
        2,
        "state/update",
        json!({"commandId": cid(11), "sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
    );
    let ack = json!({"commandId": cid(11), "status": "accepted", "revision": 1});
    let r = h.received(
        &cid(11),
        "state/update",
        json!({"sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
        json!({"result": ack}),
    );
    let ab = record(
        4,
        json!({"record": "settled", "commandId": cid(11), "outcome": "abandoned"}),
    );
    h.append(vec![r, ab]);
    h.sync();
    caught(&h, "recovery");
}

// ----- views --------------------------------------------------------------

#[test]
fn cursor_uniqueness_an_event_sent_before_it_is_synced() {
    let mut h = H::new();
    h.start();
    h.recv(
        2,
        "state/update",
        json!({"commandId": cid(11), "sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
    );
    let ack = json!({"commandId": cid(11), "status": "accepted", "revision": 1});
    let r = h.received(
        &cid(11),
        "state/update",
        json!({"sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
        json!({"result": ack}),
    );
    let (e, p) = h.event(
        "state/updated",
        json!({"revision": 1, "set": {"a": 1}, "commandId": cid(11)}),
        Some(&cid(11)),
    );
    let st = h.settled(&cid(11));
    h.append(vec![r, e, st]);
    h.notify("state/updated", &p);
    h.sync();
    caught(&h, "cursor-uniqueness");
}

#[test]
fn cursor_uniqueness_a_cursor_naming_another_event_on_the_wire() {
    let mut h = H::new();
    h.start();
    let (_, mut p) = h.update(2, 11, 0, json!({"a": 1}));
    p["set"] = json!({"a": 7});
    h.notify("state/updated", &p);
    caught(&h, "cursor-uniqueness");
}

#[test]
fn view_cursor_order_a_gap_on_a_link() {
    let mut h = H::new();
    h.start();
    h.recv(
        2,
        "state/update",
        json!({"commandId": cid(11), "sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
    );
    let ack = json!({"commandId": cid(11), "status": "accepted", "revision": 1});
    let r = h.received(
        &cid(11),
        "state/update",
        json!({"sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
        json!({"result": ack}),
    );
    let (e, _skipped) = h.event(
        "state/updated",
        json!({"revision": 1, "set": {"a": 1}, "commandId": cid(11)}),
        Some(&cid(11)),
    );
    let st = h.settled(&cid(11));
    h.append(vec![r, e, st]);
    h.sync();
    h.answer(2, ack);
    // Event #1 is never sent on link 1, #2 is.
    h.update(3, 12, 1, json!({"b": 1}));
    caught(&h, "view-cursor-order");
}

#[test]
fn view_cursor_order_a_repeated_event() {
    let mut h = H::new();
    h.start();
    let (_, p) = h.update(2, 11, 0, json!({"a": 1}));
    h.notify("state/updated", &p);
    caught(&h, "view-cursor-order");
}

// ----- storage and leases ---------------------------------------------

#[test]
fn one_lease_holder_a_write_without_the_lease() {
    let mut h = H::new();
    h.start();
    h.host(What::LeaseRelease {
        inc: 1,
        session: S.into(),
    });
    h.update(2, 11, 0, json!({"a": 1}));
    let v = h.check();
    assert!(v.iter().any(|x| x.property == "one-lease-holder"), "{v:#?}");
}

#[test]
fn lease_unload_a_release_before_the_closed_record_is_durable() {
    let mut legal = H::new();
    legal.start();
    let closed = record(
        6,
        json!({"record": "closed", "reason": "idle", "atMs": legal.now()}),
    );
    legal.append(vec![closed.clone()]);
    legal.sync();
    legal.host(What::LeaseRelease {
        inc: 1,
        session: S.into(),
    });
    clean(&legal);
    let mut h = H::new();
    h.start();
    h.append(vec![closed]);
    h.host(What::LeaseRelease {
        inc: 1,
        session: S.into(),
    });
    h.sync();
    caught(&h, "lease-unload");
}

#[test]
fn lease_unload_an_idle_unload_with_a_turn_running() {
    let mut h = H::new();
    h.start();
    h.turn(2, 10, "!sleep 5000 long");
    let closed = record(
        6,
        json!({"record": "closed", "reason": "idle", "atMs": h.now()}),
    );
    h.append(vec![closed]);
    h.sync();
    caught(&h, "lease-unload");
}

#[test]
fn log_integrity_an_append_after_a_torn_tail() {
    let mut h = H::new();
    h.start();
    // Half a frame: what a power loss leaves of a write.
    let torn = h.settled(&cid(77))[..10].to_vec();
    h.append(vec![torn]);
    h.update(2, 11, 0, json!({"a": 1}));
    caught(&h, "log-integrity");
}

#[test]
fn log_integrity_a_truncation_that_cuts_valid_records() {
    let mut h = H::new();
    h.start();
    h.update(2, 11, 0, json!({"a": 1}));
    let cut = h.len as u64 - 20;
    h.host(What::Truncate {
        inc: 1,
        session: S.into(),
        len_bytes: cut,
    });
    caught(&h, "log-integrity");
}

// ----- reads and the scripted agent -------------------------------------

/// A start and three durable updates; the events they caused, as a
/// page lists them.
fn three_updates() -> (H, Vec<Value>) {
    let mut h = H::new();
    h.start();
    let mut events = Vec::new();
    for k in 0..3 {
        let (_, p) = h.update(2 + k, 11 + k as u32, k, json!({"a": k}));
        events.push(json!({"method": "state/updated", "params": p}));
    }
    (h, events)
}

/// A history of three durable updates, then a `view/page` (request id 9)
/// of `params`, answered `answer` (a result or, with `refused`, an error).
fn paged(params: Value, answer: Value, refused: bool) -> H {
    let (mut h, events) = three_updates();
    let mut p = params;
    p["sessionId"] = json!(S);
    h.recv(9, "view/page", p);
    if refused {
        h.reject(9, answer);
    } else {
        // `{"events": [i, j, ...]}` names the events by their index.
        let picked: Vec<Value> = answer["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| events[i.as_u64().unwrap() as usize].clone())
            .collect();
        h.answer(
            9,
            json!({"events": picked, "nextCursor": answer["nextCursor"]}),
        );
    }
    h
}

#[test]
fn read_consistency_a_page_off_by_one() {
    // Three updates after the start's events: their cursors are #n..#n+2.
    let n = |h: &H| h.n - 2;
    let probe = paged(
        json!({"limit": 2}),
        json!({"events": [], "nextCursor": null}),
        false,
    );
    let first = n(&probe);
    let c = |k: u64| json!(cursor(first + k));
    // Backward from the last update's cursor, limit 1: the one before it.
    let ask = json!({"limit": 1, "direction": "backward", "cursor": c(2)});
    clean(&paged(
        ask.clone(),
        json!({"events": [1], "nextCursor": c(1)}),
        false,
    ));
    caught(
        &paged(
            ask.clone(),
            json!({"events": [0], "nextCursor": c(0)}),
            false,
        ),
        "read-consistency",
    );
    caught(
        &paged(ask, json!({"events": [1], "nextCursor": null}), false),
        "read-consistency",
    );
}

#[test]
fn read_consistency_a_durable_cursor_refused() {
    let probe = paged(
        json!({"limit": 2}),
        json!({"events": [], "nextCursor": null}),
        false,
    );
    let last = probe.n;
    let missing = json!({"code": -32011, "message": "unknown cursor anchor",
        "data": {"kind": "notFound", "reason": "missingAnchor", "sessionId": S}});
    // A cursor past the head may be refused; one of a durable event not.
    clean(&paged(
        json!({"limit": 2, "cursor": cursor(last + 5)}),
        missing.clone(),
        true,
    ));
    caught(
        &paged(json!({"limit": 2, "cursor": cursor(last)}), missing, true),
        "read-consistency",
    );
    // A sound log (its archive included) is never refused as corrupt, and
    // a session that existed never as not found.
    let corrupt = json!({"code": -32603, "message": "session log is corrupt",
        "data": {"kind": "internal", "reason": "logCorrupt", "file": "history.log", "offset": 7}});
    caught(
        &paged(json!({"limit": 2}), corrupt, true),
        "read-consistency",
    );
    let gone = json!({"code": -32020, "message": "session not found",
        "data": {"kind": "sessionNotFound", "sessionId": S}});
    caught(&paged(json!({"limit": 2}), gone, true), "read-consistency");
    // A refusal of the request itself (on a link that never said
    // `initialized`) says nothing of the log.
    let uninit =
        json!({"code": -32600, "message": "Not initialized", "data": {"kind": "notInitialized"}});
    let mut h = H::new();
    h.start();
    h.update(2, 11, 0, json!({"a": 0}));
    h.opens(2, 1);
    h.recv_on(2, 9, "view/page", json!({"sessionId": S, "limit": 2}));
    h.send_on(2, json!({"jsonrpc": "2.0", "id": 9, "error": uninit}));
    clean(&h);
}

#[test]
fn read_consistency_a_resume_snapshot_with_another_revision() {
    let build = |revision: u64| {
        let mut h = H::new();
        h.start();
        h.update(2, 11, 0, json!({"a": 1}));
        let state = snapshot_state(json!([]), Value::Null, revision, json!({"a": 1}));
        h.snapshot_resume(3, &cid(20), 1, None, state);
        h
    };
    clean(&build(1));
    caught(&build(2), "read-consistency");
}

#[test]
fn read_consistency_approval_mode_source_before_and_after_a_resume() {
    // The public transcripts' vocabulary: every `session/start` answer
    // says `startup`, every `session/resume` answer `replay`, and the
    // session's `Session` objects keep saying `replay` once it resumed.
    let started = |source: Option<&'static str>| {
        let mut h = H::new();
        h.source = source;
        h.start();
        h
    };
    clean(&started(None));
    caught(&started(Some("replay")), "read-consistency");
    let resumed = |source: Option<&'static str>| {
        let mut h = H::new();
        h.start();
        h.update(2, 11, 0, json!({"a": 1}));
        let state = snapshot_state(json!([]), Value::Null, 1, json!({"a": 1}));
        h.source = source;
        h.snapshot_resume(3, &cid(20), 1, None, state);
        h
    };
    clean(&resumed(None));
    caught(&resumed(Some("startup")), "read-consistency");
}

/// A snapshot resume after a turn, answered, then replayed (request 4)
/// with `edit` applied to the first answer's text: a replay must be
/// value-identical to the recorded answer, whatever its spelling.
fn resume_replayed(edit: impl Fn(String) -> String) -> H {
    let mut h = H::new();
    h.start();
    h.turn(2, 10, "hi");
    let c = cid(20);
    let item = json!({"itemId": cid(1010), "kind": "userMessage", "turnId": cid(10), "revision": 1,
                      "status": "completed", "text": "hi", "commandId": cid(10)});
    let turn = json!({"turnId": cid(10), "commandId": cid(10)});
    let state = snapshot_state(json!([item]), turn, 0, json!({}));
    let result = h.snapshot_resume(3, &c, 2, Some(&cid(10)), state);
    let p = json!({"commandId": c, "sessionId": S});
    h.recv(4, "session/resume", p);
    let line = json!({"jsonrpc": "2.0", "id": 4, "result": result}).to_string();
    h.host(What::HostSend {
        inc: 1,
        link: 1,
        line: edit(line),
    });
    h
}

#[test]
fn value_identical_replays_a_snapshot_resume_replayed_with_other_items() {
    // Controls: the same answer, and the same values spelled otherwise
    // (an item's members in another order, a space), are value-identical.
    clean(&resume_replayed(|l| l));
    let reordered = |l: String| {
        let from = "\"text\":\"hi\",\"turnId\"";
        assert!(l.contains(from), "{l}");
        l.replacen(from, "\"turnId\"", 1).replacen(
            "\"status\":\"completed\",",
            "\"status\":\"completed\", \"text\":\"hi\",",
            1,
        )
    };
    clean(&resume_replayed(reordered));
    // An item that differs, and a snapshot that differs beside its items.
    caught(
        &resume_replayed(|l| l.replacen("\"text\":\"hi\"", "\"text\":\"ho\"", 1)),
        "value-identical-replays",
    );
    caught(
        &resume_replayed(|l| l.replacen("\"revision\":0", "\"revision\":1", 1)),
        "value-identical-replays",
    );
}

#[test]
fn scripted_agent_a_message_that_is_not_the_echo() {
    let build = |text: &str| {
        let mut h = H::new();
        h.start();
        h.turn(2, 10, "hi");
        let item = json!({"itemId": cid(500), "kind": "agentMessage", "turnId": cid(10), "revision": 1,
                          "status": "completed", "text": text});
        let (e, _) = h.event("item/completed", json!({"item": item}), None);
        h.append(vec![e]);
        h.sync();
        h
    };
    clean(&build("echo: hi"));
    caught(&build("echo: ho"), "scripted-agent");
}

#[test]
fn effect_durability_an_unkeyed_effect_performed_twice() {
    let mut h = H::new();
    h.start();
    for _ in 0..2 {
        h.host(What::Effect {
            inc: 1,
            provider: "unkeyed".into(),
            key: format!("{S}:{}", cid(600)),
            action: "act".into(),
            perform: true,
            mutated: true,
            lost: false,
        });
    }
    caught(&h, "effect-durability");
}

#[test]
fn log_integrity_an_answer_from_a_rotten_log() {
    // The holder lets go; the log rots; a host loads it again and answers
    // as if nothing were wrong.
    let build = |refuse: bool| {
        let mut h = H::new();
        h.start();
        h.update(2, 11, 0, json!({"a": 1}));
        let closed = record(
            6,
            json!({"record": "closed", "reason": "idle", "atMs": h.now()}),
        );
        h.append(vec![closed]);
        h.sync();
        h.host(What::LeaseRelease {
            inc: 1,
            session: S.into(),
        });
        h.push(
            Actor::Disk,
            What::BitRot {
                session: S.into(),
                offset: 20,
            },
        );
        h.recv(
            3,
            "session/resume",
            json!({"commandId": cid(30), "sessionId": S}),
        );
        h.host(What::LeaseGrant {
            inc: 1,
            session: S.into(),
        });
        if refuse {
            h.reject(
                3,
                json!({"code": -32603, "message": "log corrupt",
                "data": {"kind": "internal", "reason": "logCorrupt", "offset": 0,
                         "file": format!("/sim/data/sessions/{S}/session.log")}}),
            );
        } else {
            h.answer(3, json!({"session": {}, "viewCursor": cursor(1)}));
        }
        h
    };
    clean(&build(true));
    caught(&build(false), "log-integrity");
}

#[test]
fn log_integrity_a_replay_the_rot_holder_queued_before_dropping_is_no_answer_from_the_rot() {
    // The holder keeps the session in memory when its synced log rots; a
    // replay of a durable command reaches it; its sync fails and it drops
    // the session, then sends the replay it had queued (decided from
    // memory: allowed). Loading the damaged log again and answering from
    // it is not.
    let build = |reload: bool| {
        let mut h = H::new();
        h.start();
        let (ack, _) = h.update(2, 11, 0, json!({"a": 1}));
        h.push(
            Actor::Disk,
            What::BitRot {
                session: S.into(),
                offset: 20,
            },
        );
        h.recv(
            3,
            "state/update",
            json!({"commandId": cid(11), "sessionId": S, "expectedRevision": 0, "set": {"a": 1}}),
        );
        h.host(What::LeaseRelease {
            inc: 1,
            session: S.into(),
        });
        if reload {
            h.host(What::LeaseGrant {
                inc: 1,
                session: S.into(),
            });
        }
        h.answer(3, ack);
        h
    };
    clean(&build(false));
    caught(&build(true), "log-integrity");
}

#[test]
fn log_integrity_an_event_the_rot_holder_wrote_after_the_rot_sent_after_a_failed_reload() {
    // The holder goes on from memory after its synced log rots: an event
    // it writes then (past the damage) is its memory's, and it may still
    // send it after a reload of the damaged log failed (bitrot seed 604).
    // An event it never wrote is not.
    for written in [true, false] {
        let mut h = H::new();
        h.start();
        h.update(2, 11, 0, json!({"a": 1}));
        h.push(
            Actor::Disk,
            What::BitRot {
                session: S.into(),
                offset: 20,
            },
        );
        let (rec, p) = h.event(
            "state/updated",
            json!({"revision": 2, "set": {"b": 2}, "commandId": cid(12)}),
            Some(&cid(12)),
        );
        if written {
            h.append(vec![rec]);
            h.sync();
        }
        h.host(What::LeaseRelease {
            inc: 1,
            session: S.into(),
        });
        h.host(What::LeaseGrant {
            inc: 1,
            session: S.into(),
        });
        h.host(What::LeaseRelease {
            inc: 1,
            session: S.into(),
        });
        h.notify("state/updated", &p);
        judged(&h, written, "log-integrity");
    }
}

/// An ephemeral host with two clients: link 1 (client 0) and link 2
/// (client 1), both subscribed to S, which client 0 started.
fn ephemeral_two_links() -> H {
    let mut h = H::default();
    h.host_starts(1, false);
    h.connects(1, 1);
    h.connects(2, 1);
    h.recv_on(
        1,
        1,
        "session/start",
        json!({"commandId": cid(1), "sessionId": S}),
    );
    let session = h.session_obj(h.now(), 0, None);
    h.send_on(
        1,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"session": session, "viewCursor": cursor(0)}}),
    );
    h.recv_on(
        2,
        1,
        "session/resume",
        json!({"commandId": cid(2), "sessionId": S, "cursor": cursor(0)}),
    );
    let session = h.session_obj(h.now(), 0, None);
    h.send_on(
        2,
        json!({"jsonrpc": "2.0", "id": 1, "result": {
        "history": {"mode": "none", "items": null, "snapshot": null, "noneReason": "cursorSuffix"},
        "pendingRequests": [], "session": session, "viewCursor": cursor(0)}}),
    );
    h
}

impl H {
    fn recv_on(&mut self, link: u64, id: u64, method: &str, params: Value) {
        let line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        let inc = self.inc.max(1);
        self.host(What::HostRecv { inc, link, line });
    }

    /// The network cuts `link`: lines still to leave on it are lost.
    fn cut(&mut self, link: u64) {
        self.push(Actor::Net, What::LinkClosed { link, why: "cut" });
    }

    fn send_on(&mut self, link: u64, frame: Value) {
        self.host(What::HostSend {
            inc: self.inc.max(1),
            link,
            line: frame.to_string(),
        });
    }

    /// Client 0's fresh turn cid(3) on link 1, whose events the host sends
    /// to link 2 first; the answer on link 1 follows unless `answered` is
    /// false (link 1 closes instead).
    fn turn_seen_first_elsewhere(&mut self, answered: bool) {
        let c = cid(3);
        let p = json!({"commandId": c, "sessionId": S, "input": [{"type": "text", "text": "hi"}]});
        self.recv_on(1, 2, "turn/start", p);
        let events = [
            ("turn/started", json!({"turnId": c, "commandId": c})),
            (
                "item/completed",
                json!({"item": {"itemId": cid(1003), "kind": "userMessage", "turnId": c,
                   "revision": 1, "status": "completed", "text": "hi", "commandId": c}}),
            ),
        ];
        let mut frames = Vec::new();
        for (n, (m, mut q)) in events.into_iter().enumerate() {
            q["sessionId"] = json!(S);
            q["viewCursor"] = json!(cursor(n as u64 + 1));
            q["sourceRange"] = json!({"stream": {"kind": "run", "id": c},
                "first": {"id": cid(2000 + n as u32), "sequence": n + 1},
                "last": {"id": cid(2000 + n as u32), "sequence": n + 1}});
            frames.push(
                json!({"jsonrpc": "2.0", "method": m, "params": q, "emittedAtMs": self.now()}),
            );
        }
        for f in &frames {
            self.send_on(2, f.clone());
        }
        if answered {
            let ack = json!({"commandId": c, "status": "accepted", "turnId": c,
                             "startedNewTurn": true, "disposition": "started"});
            self.send_on(1, json!({"jsonrpc": "2.0", "id": 2, "result": ack}));
            for f in &frames {
                self.send_on(1, f.clone());
            }
        } else {
            self.cut(1);
        }
    }
}

#[test]
fn turn_lifecycle_an_ephemeral_turn_whose_events_no_answer_ever_admits() {
    // Control: another subscriber's link carries the turn's events before
    // the submitter's link carries the answer (the response precedes the
    // events only on the submitter's link): legal.
    let mut h = ephemeral_two_links();
    h.turn_seen_first_elsewhere(true);
    clean(&h);
    // Doctored: the answer never comes and the submitter's link closes;
    // the events still name a turn no admitted turn/start named.
    let mut h = ephemeral_two_links();
    h.turn_seen_first_elsewhere(false);
    caught(&h, "turn-lifecycle");
}

/// Client 0's `state/update` cid(3) (revision 0 -> 1) accepted on link 1;
/// its `state/updated` goes to both links when `event_sent`, else link 1
/// is cut before it leaves (nobody sees it). Then client 1 sends
/// `state/update` cid(4) expecting revision `expected` on link 2, and the
/// host answers `answer`.
fn ephemeral_update_then_another(event_sent: bool, expected: u64, answer: Value) -> H {
    let mut h = ephemeral_two_links();
    let set = json!({"a": 1});
    h.recv_on(
        1,
        2,
        "state/update",
        json!({"commandId": cid(3), "sessionId": S, "expectedRevision": 0, "set": set}),
    );
    let ack = json!({"commandId": cid(3), "status": "accepted", "revision": 1});
    h.send_on(1, json!({"jsonrpc": "2.0", "id": 2, "result": ack}));
    if event_sent {
        let p = json!({"commandId": cid(3), "revision": 1, "sessionId": S, "set": set,
            "viewCursor": cursor(1),
            "sourceRange": {"stream": {"kind": "session", "id": S},
                "first": {"id": cid(2000), "sequence": 1}, "last": {"id": cid(2000), "sequence": 1}}});
        let frame = json!({"jsonrpc": "2.0", "method": "state/updated", "params": p, "emittedAtMs": h.now()});
        h.send_on(1, frame.clone());
        h.send_on(2, frame);
    } else {
        h.cut(1);
    }
    h.recv_on(
        2,
        2,
        "state/update",
        json!({"commandId": cid(4), "sessionId": S, "expectedRevision": expected, "set": {"b": 2}}),
    );
    h.send_on(2, answer);
    h
}

#[test]
fn admission_decision_an_ephemeral_session_whose_accepted_event_nobody_saw() {
    let stale = json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32030,
        "message": format!("state/update command {} rejected: stale_revision", cid(4)),
        "data": {"kind": "commandRejected", "commandId": cid(4), "reason": "stale_revision",
                 "currentRevision": 1}}});
    // Control: the first update's event never left (its link was cut
    // right after the ack), so the model's view of the session lags the
    // host's: a second update expecting revision 0 is rightly stale.
    clean(&ephemeral_update_then_another(false, 0, stale.clone()));
    // Once the event was seen the model judges again: the same answer to
    // an update expecting the current revision (1) is wrong ...
    let mut wrong = stale;
    wrong["error"]["data"]["currentRevision"] = json!(1);
    caught(
        &ephemeral_update_then_another(true, 1, wrong),
        "admission-decision",
    );
    // ... and so is an acceptance of one expecting the old revision.
    let accepted = json!({"jsonrpc": "2.0", "id": 2, "result":
        {"commandId": cid(4), "status": "accepted", "revision": 2}});
    caught(
        &ephemeral_update_then_another(true, 0, accepted),
        "admission-decision",
    );
}

#[test]
fn admission_decision_a_minted_session_id_conflict_only_when_that_session_exists() {
    // A start without a session id was answered S at an ephemeral host
    // that then died. At the next incarnation S is started again, under
    // its own id by another command; the first command's replay, naming
    // no session, meets S taken: session_id_conflict (control). Without
    // that second start the conflict is invented (doctored).
    let history = |restarted: bool| {
        let mut h = H::default();
        h.host_starts(1, false);
        h.connects(1, 1);
        h.recv_on(1, 1, "session/start", json!({"commandId": cid(5)}));
        let session = h.session_obj(h.now(), 0, None);
        h.send_on(1, json!({"jsonrpc": "2.0", "id": 1, "result": {"session": session, "viewCursor": cursor(0)}}));
        h.host(What::HostCrash {
            inc: 1,
            point: None,
        });
        h.host_starts(2, false);
        h.inc = 2;
        h.push(
            Actor::Client(0),
            What::Connect {
                link: 2,
                host: 0,
                inc: 2,
            },
        );
        h.handshake_at(0, 2, 2);
        if restarted {
            h.recv_on(
                2,
                1,
                "session/start",
                json!({"commandId": cid(6), "sessionId": S}),
            );
            let session = h.session_obj(h.now(), 0, None);
            h.send_on(2, json!({"jsonrpc": "2.0", "id": 1, "result": {"session": session, "viewCursor": cursor(0)}}));
        }
        h.recv_on(2, 2, "session/start", json!({"commandId": cid(5)}));
        h.send_on(2, json!({"jsonrpc": "2.0", "id": 2, "error": rejected(&cid(5), "session/start", "session_id_conflict")}));
        h
    };
    clean(&history(true));
    caught(&history(false), "admission-decision");
}

/// A request line the network duplicated reaches the host twice with one
/// id. Here a launch fails at once, and the copy arrives after the
/// rejection was synced but before the original's ack went out (a group
/// commit with a slow sync of another session holds it): the host answers the original its ack and the copy the
/// settled rejection, in the order they arrived, and that is legal; the
/// other way round the copy got a stale ack after settlement.
#[test]
fn value_identical_replays_a_duplicated_line_is_answered_in_arrival_order() {
    let history = |original_first: bool| {
        let mut h = H::new();
        h.start();
        let why = "scripted launch failure (!fail-launch)";
        let (p, ack, p1, error) = h.failed_launch(2, &cid(20), "!fail-launch 1", why);
        // The copy, after the sync, before the answers went out.
        h.recv(2, "turn/start", p);
        if original_first {
            h.answer(2, ack);
            h.notify("turn/completed", &p1);
            h.reject(2, error);
        } else {
            h.reject(2, error);
            h.notify("turn/completed", &p1);
            h.answer(2, ack);
        }
        h
    };
    clean(&history(true));
    caught(&history(false), "value-identical-replays");
}

/// Client 0 queues cid(4) behind the running cid(3) and unqueues it with
/// cid(5) on link 1; the host sends `turn/unqueued` to link 2 first. The
/// answer on link 1 follows unless `answered` is false (link 1 closes).
fn unqueue_seen_first_elsewhere(answered: bool) -> H {
    let mut h = ephemeral_two_links();
    h.turn_seen_first_elsewhere(true);
    let (q, u) = (cid(4), cid(5));
    let input = json!([{"type": "text", "text": "later"}]);
    h.recv_on(
        1,
        3,
        "turn/start",
        json!({"commandId": q, "sessionId": S, "input": input, "ifBusy": "queue"}),
    );
    let queued = json!({"commandId": q, "status": "accepted", "turnId": q,
                        "startedNewTurn": false, "disposition": "queued"});
    h.send_on(1, json!({"jsonrpc": "2.0", "id": 3, "result": queued}));
    h.recv_on(
        1,
        4,
        "turn/unqueue",
        json!({"commandId": u, "sessionId": S, "turnId": q}),
    );
    let event = json!({"jsonrpc": "2.0", "method": "turn/unqueued", "emittedAtMs": h.now(),
        "params": {"turnId": q, "commandId": q, "sessionId": S, "viewCursor": cursor(3),
                   "sourceRange": {"stream": {"kind": "session", "id": S},
                                   "first": {"id": cid(2010), "sequence": 1},
                                   "last": {"id": cid(2010), "sequence": 1}}}});
    h.send_on(2, event.clone());
    if answered {
        let ack = json!({"commandId": u, "status": "accepted", "turnId": q});
        h.send_on(1, json!({"jsonrpc": "2.0", "id": 4, "result": ack}));
        h.send_on(1, event);
    } else {
        h.cut(1);
    }
    h
}

#[test]
fn turn_lifecycle_an_ephemeral_unqueue_whose_event_no_answer_ever_admits() {
    // Control: the `turn/unqueued` reaches another subscriber before the
    // unqueue's answer reaches its sender; it names the unqueued submit,
    // not the unqueue, and waits for that answer all the same.
    clean(&unqueue_seen_first_elsewhere(true));
    // Doctored: no answer ever admits an unqueue.
    caught(&unqueue_seen_first_elsewhere(false), "turn-lifecycle");
}

/// A `session/start` of an existing session under another command id is
/// refused `session_id_conflict` and records nothing; here it is admitted
/// (an intake pair, an ack) as if it had created the session.
#[test]
fn admission_decision_a_start_of_an_existing_session_under_another_id_admitted() {
    let mut h = H::new();
    h.start();
    let c = cid(7);
    h.recv(2, "session/start", json!({"commandId": c, "sessionId": S}));
    let result = json!({"session": h.session_obj(h.now(), 0, None), "viewCursor": cursor(0)});
    let received = h.received(
        &c,
        "session/start",
        json!({"sessionId": S, "workspaceRoot": null}),
        json!({"result": result}),
    );
    let settled = h.settled(&c);
    h.append(vec![received, settled]);
    h.sync();
    h.answer(2, result);
    caught(&h, "admission-decision");
}

#[test]
fn admission_decision_not_loaded_while_another_host_holds_the_lease() {
    // Host 0 holds S. Host 1, another process, is asked a command in S:
    // the answer is sessionInUse, never sessionNotLoaded (PROTOCOL.md 4.1).
    for (code, kind, legal) in [
        (-32021, "sessionInUse", true),
        (-32024, "sessionNotLoaded", false),
    ] {
        let mut h = H::new();
        h.start();
        h.push(
            Actor::Host(1),
            What::HostStart {
                inc: 1,
                durable: true,
                solo_syncs: false,
            },
        );
        h.push(
            Actor::Client(1),
            What::Connect {
                link: 2,
                host: 1,
                inc: 1,
            },
        );
        h.handshake_at(1, 1, 2);
        let line = json!({"jsonrpc": "2.0", "id": 9, "method": "task/stop", "params": {"commandId": cid(9), "sessionId": S, "taskId": cid(10)}}).to_string();
        h.push(
            Actor::Client(1),
            What::ClientSend {
                link: 2,
                line: line.clone(),
            },
        );
        h.push(
            Actor::Host(1),
            What::HostRecv {
                inc: 1,
                link: 2,
                line,
            },
        );
        let answer = json!({"jsonrpc": "2.0", "id": 9, "error": {"code": code, "message": kind, "data": {"kind": kind, "sessionId": S}}});
        h.push(
            Actor::Host(1),
            What::HostSend {
                inc: 1,
                link: 2,
                line: answer.to_string(),
            },
        );
        judged(&h, legal, "admission-decision");
    }
}

#[test]
fn admission_decision_storage_error_without_a_storage_failure() {
    // An internal error is the host's to send only after its storage
    // failed it (an append or a sync of the session): refusing a command
    // `storageUnavailable` on a sound disk is a wrong decision.
    for failed in [true, false] {
        let mut h = H::new();
        h.start();
        h.recv(
            5,
            "state/update",
            json!({"commandId": cid(5), "sessionId": S, "expectedRevision": 0, "set": {"k": 1}}),
        );
        if failed {
            h.host(What::AppendFailed {
                inc: 1,
                session: S.into(),
            });
        }
        h.reject(
            5,
            json!({"code": -32603, "message": "storage unavailable: disk full",
                   "data": {"kind": "internal", "reason": "storageUnavailable", "retryable": true}}),
        );
        judged(&h, failed, "admission-decision");
    }
}

#[test]
fn admission_decision_storage_error_for_an_intake_already_durable() {
    // `storageUnavailable` says nothing was applied (PROTOCOL.md 3): once
    // the holder has synced a command's intake in its current load, a
    // storage failure that follows cannot make that command's answer an
    // internal error (its queued ack stands).
    for synced_first in [false, true] {
        let mut h = H::new();
        h.start();
        let c = cid(5);
        h.recv(
            5,
            "state/update",
            json!({"commandId": c, "sessionId": S, "expectedRevision": 0, "set": {"k": 1}}),
        );
        let ack = json!({"commandId": c, "status": "accepted", "revision": 1});
        let received = h.received(
            &c,
            "state/update",
            json!({"sessionId": S, "expectedRevision": 0, "set": {"k": 1}}),
            json!({"result": ack}),
        );
        let durable_before = h.len as u64;
        h.append(vec![received]);
        if synced_first {
            h.sync();
        }
        h.host(What::SyncFailed {
            inc: 1,
            session: S.into(),
            kept_bytes: if synced_first {
                h.len as u64
            } else {
                durable_before
            },
        });
        h.reject(
            5,
            json!({"code": -32603, "message": "storage unavailable: fsync failed",
                   "data": {"kind": "internal", "reason": "storageUnavailable", "retryable": true}}),
        );
        judged(&h, !synced_first, "admission-decision");
    }
}

#[test]
fn admission_decision_not_initialized_after_the_handshake() {
    // `notInitialized` only before both halves of the handshake were read
    // on the link (PROTOCOL.md 2): after `initialize` alone it is right,
    // after `initialize` and `initialized` it is not.
    for (notified, legal) in [(false, true), (true, false)] {
        let mut lines = vec![json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                    "params": {"clientInfo": {"name": "t", "version": "1"}}})];
        if notified {
            lines.push(json!({"jsonrpc": "2.0", "method": "initialized"}));
        }
        lines.push(json!({"jsonrpc": "2.0", "id": 2, "method": "state/update",
                          "params": {"commandId": cid(7), "sessionId": S, "set": {"k": 1}}}));
        let answer = json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32600,
                            "message": "Not initialized", "data": {"kind": "notInitialized"}}});
        judged(
            &on_a_fresh_link(&lines, answer),
            legal,
            "admission-decision",
        );
    }
}

#[test]
fn admission_decision_resume_refused_a_durable_cursor() {
    // A durable host knows every event that was durable when a resume
    // arrived: `missingAnchor` is right only for a cursor past that.
    for (n, legal) in [(1, false), (9, true)] {
        let mut h = H::new();
        h.start();
        h.turn(3, 3, "hi");
        h.recv(
            8,
            "session/resume",
            json!({"commandId": cid(8), "sessionId": S, "cursor": cursor(n)}),
        );
        h.reject(
            8,
            json!({"code": -32011, "message": "unknown cursor anchor",
                   "data": {"kind": "notFound", "reason": "missingAnchor", "sessionId": S}}),
        );
        judged(&h, legal, "admission-decision");
    }
}

#[test]
fn read_consistency_a_read_refused_for_a_condition_that_never_held() {
    // Reads need no lease and the disk did not fail: a `session/read` of
    // a session that exists is never `sessionInUse`, `sessionNotFound` or
    // `storageUnavailable`; after an append failure the last is right.
    let refusals = [
        (
            json!({"code": -32021, "message": "in use", "data": {"kind": "sessionInUse"}}),
            false,
            false,
        ),
        (
            json!({"code": -32020, "message": "not found", "data": {"kind": "sessionNotFound"}}),
            false,
            false,
        ),
        (
            json!({"code": -32603, "message": "storage unavailable", "data": {"kind": "internal", "reason": "storageUnavailable", "retryable": true}}),
            false,
            false,
        ),
        (
            json!({"code": -32603, "message": "storage unavailable", "data": {"kind": "internal", "reason": "storageUnavailable", "retryable": true}}),
            true,
            true,
        ),
    ];
    for (error, failed, legal) in refusals {
        let mut h = H::new();
        h.start();
        h.recv(6, "session/read", json!({"sessionId": S}));
        if failed {
            h.host(What::AppendFailed {
                inc: 1,
                session: S.into(),
            });
        }
        h.reject(6, error.clone());
        judged(&h, legal, "read-consistency");
    }
}

#[test]
fn view_cursor_order_an_event_after_the_unsubscribe_answer() {
    // A link's lines leave in order: once the host answered
    // `view/unsubscribe`, nothing of the session follows on that link
    // (what it had queued went before the answer).
    for unsubscribed in [false, true] {
        let mut h = H::new();
        h.start();
        if unsubscribed {
            h.recv(5, "view/unsubscribe", json!({"sessionId": S}));
            h.answer(5, json!({}));
        }
        h.turn(6, 6, "after");
        judged(&h, !unsubscribed, "view-cursor-order");
    }
}

#[test]
fn read_consistency_a_pending_list_naming_an_approval_the_log_never_requested() {
    // The holder answers `approval/listPending` from memory, gated on the
    // sync of what it shows: every approval it lists is in the log.
    for (approvals, legal) in [
        (json!([]), true),
        (
            json!([{"approvalId": cid(40), "sessionId": S, "viewCursor": cursor(1)}]),
            false,
        ),
    ] {
        let mut h = H::new();
        h.start();
        h.recv(9, "approval/listPending", json!({"sessionId": S}));
        h.answer(9, json!({"approvals": approvals, "userInputs": []}));
        judged(&h, legal, "read-consistency");
    }
}

// ----- source ranges and launch failures (PROTOCOL.md 3, 4.5) -------------

/// A started session, one accepted update, then a second accepted update
/// whose `state/updated` params `edit` changes before they are recorded
/// and sent.
fn second_update(edit: impl Fn(&mut Value)) -> H {
    let mut h = H::new();
    h.start();
    h.update(2, 2, 0, json!({"a": 1}));
    let c = cid(3);
    let params = json!({"sessionId": S, "expectedRevision": 1, "set": {"b": 2}});
    let mut request = params.clone();
    request["commandId"] = json!(c);
    h.recv(3, "state/update", request);
    let ack = json!({"commandId": c, "status": "accepted", "revision": 2});
    let received = h.received(&c, "state/update", params, json!({"result": ack}));
    let (_, mut p) = h.event(
        "state/updated",
        json!({"revision": 2, "set": {"b": 2}, "commandId": c}),
        Some(&c),
    );
    edit(&mut p);
    let e = record(
        5,
        json!({"record": "event", "n": h.n, "method": "state/updated", "params": p,
               "emittedAtMs": h.now(), "cause": c}),
    );
    let settled = h.settled(&c);
    h.append(vec![received, e, settled]);
    h.sync();
    h.answer(3, ack);
    h.notify("state/updated", &p);
    h
}

#[test]
fn view_cursor_order_a_source_stream_whose_sequence_goes_back() {
    // Control: the session stream's second record has sequence 2.
    clean(&second_update(|_| {}));
    // A host that forgot its streams' sequences (after a reload, say)
    // numbers the second record 1 again.
    let h = second_update(|p| p["sourceRange"]["first"]["sequence"] = json!(1));
    caught(&h, "view-cursor-order");
}

#[test]
fn view_cursor_order_a_session_record_on_another_stream() {
    let h = second_update(|p| p["sourceRange"]["stream"] = json!({"kind": "run", "id": S}));
    caught(&h, "view-cursor-order");
    let h = second_update(|p| p["sourceRange"] = Value::Null);
    caught(&h, "view-cursor-order");
}

#[test]
fn cursor_uniqueness_two_events_naming_one_source_record() {
    // The first update's record id is cid(5000 + 1).
    let h = second_update(|p| {
        p["sourceRange"]["first"]["id"] = json!(cid(5001));
        p["sourceRange"]["last"]["id"] = json!(cid(5001));
    });
    caught(&h, "cursor-uniqueness");
}

/// A fresh turn whose input asks its launch to fail: acked `started`, its
/// `turn/completed` failed with `reason` (the failure's text), its intake
/// settled rejected `launch_failed` with `message` as the refusal's text.
fn failed_launch(message: &str) -> H {
    let mut h = H::new();
    h.start();
    let (_, ack, p, _) = h.failed_launch(2, &cid(2), "!fail-launch go", message);
    h.answer(2, ack);
    h.notify("turn/completed", &p);
    h
}

#[test]
fn intake_settled_a_failed_launch_refused_with_another_text() {
    judged(
        &failed_launch("scripted launch failure (!fail-launch)"),
        true,
        "intake-settled",
    );
    // The refusal's own default text, not the launch failure's.
    let c = cid(2);
    let other = rejected(&c, "turn/start", "launch_failed")["message"].clone();
    judged(
        &failed_launch(other.as_str().unwrap()),
        false,
        "intake-settled",
    );
}

// ----- an agent message's stream (PROTOCOL.md 5) ---------------------------

/// Turn cid(2) (`hello, streamed world`) on the link that started the
/// session: its agent message opened (`item/started`) unless `opened` is
/// false, then `deltas`, all ephemeral, then its durable completion.
fn streamed(opened: bool, deltas: &[&str]) -> H {
    let mut h = H::new();
    h.start();
    h.turn(2, 2, "hello, streamed world");
    let item_id = cid(3000);
    let mut frames = Vec::new();
    if opened {
        frames.push((
            "item/started",
            json!({"item": {"itemId": item_id, "kind": "agentMessage", "turnId": cid(2),
                            "revision": 1, "status": "inProgress", "text": ""}}),
        ));
    }
    for d in deltas {
        frames.push((
            "item/delta",
            json!({"itemId": item_id, "field": "text", "delta": d}),
        ));
    }
    for (k, (method, mut p)) in frames.into_iter().enumerate() {
        p["sessionId"] = json!(S);
        p["viewCursor"] = json!(format!("{}.{}", cursor(h.n), k + 1));
        h.notify(method, &p);
    }
    let recorded = msp_sim::model::session::iso8601(h.now() + 1);
    let item = json!({"itemId": item_id, "kind": "agentMessage", "turnId": cid(2), "revision": 2,
                      "status": "completed", "text": "echo: hello, streamed world",
                      "recordedAt": recorded});
    let (e, p) = h.event("item/completed", json!({"item": item}), None);
    h.append(vec![e]);
    h.sync();
    h.notify("item/completed", &p);
    h
}

#[test]
fn scripted_agent_deltas_that_do_not_make_the_message() {
    // Control: 16 + 11 characters.
    let legal = ["echo: hello, str", "eamed world"];
    judged(&streamed(true, &legal), true, "scripted-agent");
    // One delta lost on the way (the durable text is still right).
    judged(&streamed(true, &legal[..1]), false, "scripted-agent");
    // A delta of 17 characters.
    let long = ["echo: hello, stre", "amed world"];
    judged(&streamed(true, &long), false, "scripted-agent");
}

#[test]
fn view_cursor_order_a_message_never_opened_on_a_link_live_since_creation() {
    // The link has carried the session since its start: the message's
    // `item/started` and deltas went out after, so it must carry them.
    judged(&streamed(false, &[]), false, "view-cursor-order");
}

/// Turn cid(2) (`input`), running, ends with `turn/completed` of `params`
/// (its `turnId` added), after its agent message if `message`.
fn ended(input: &str, message: bool, mut params: Value) -> H {
    let mut h = H::new();
    h.start();
    h.turn(2, 2, input);
    if message {
        let recorded = msp_sim::model::session::iso8601(h.now() + 1);
        let item = json!({"itemId": cid(3000), "kind": "agentMessage", "turnId": cid(2),
            "revision": 1, "status": "completed", "text": format!("echo: {input}"),
            "recordedAt": recorded});
        let (e, p) = h.event("item/completed", json!({"item": item}), None);
        h.append(vec![e]);
        h.sync();
        h.notify("item/completed", &p);
    }
    params["turnId"] = json!(cid(2));
    let (e, p) = h.event("turn/completed", params, None);
    h.append(vec![e]);
    h.sync();
    h.notify("turn/completed", &p);
    h
}

#[test]
fn scripted_agent_a_turn_failed_without_its_model_error() {
    // `!retry 3` exhausts its attempts only after two scheduled retries, so
    // a plain turn that fails is neither: no error, no crash.
    let h = ended(
        "hello",
        false,
        json!({"terminal": "failed", "durationMs": 5}),
    );
    caught(&h, "scripted-agent");
    // The same turn cancelled is a host's decision (an interrupt, say):
    // nothing here says it was wrong.
    let h = ended(
        "hello",
        false,
        json!({"terminal": "cancelled", "durationMs": 5}),
    );
    let v = h.check();
    assert!(
        !v.iter().any(|x| x.property == "scripted-agent"),
        "a cancel is no agent failure: {v:#?}"
    );
}

#[test]
fn scripted_agent_a_retrying_turn_completed_without_its_retries() {
    // `!retry 2`: two failed attempts, each scheduled for a retry, come
    // before the message; this turn completes with neither.
    // Control: a plain turn completes after its message.
    let done = |input: &str| {
        let h = ended(input, true, json!({"terminal": "completed"}));
        h.check()
    };
    assert!(done("hello").is_empty(), "{:#?}", done("hello"));
    let v = done("!retry 2 go");
    assert!(
        v.iter()
            .any(|x| x.property == "scripted-agent" && x.detail.contains("retries")),
        "{v:#?}"
    );
}

impl H {
    /// S started; turn cid(2) (`!effect keyed act-1`) runs and asks
    /// approval cid(3001) for its tool call cid(3000). The tool call
    /// item and the records of its `item/started` and
    /// `approval/requested` (not appended yet), and their params.
    fn effect_asked(&mut self) -> (Value, Vec<Vec<u8>>, [Value; 2]) {
        self.effect_asked_at("keyed")
    }

    /// [`H::effect_asked`] at `provider` (`keyed` or `unkeyed`).
    fn effect_asked_at(&mut self, provider: &str) -> (Value, Vec<Vec<u8>>, [Value; 2]) {
        self.start();
        self.turn(2, 2, &format!("!effect {provider} act-1"));
        let (t, item_id, a) = (cid(2), cid(3000), cid(3001));
        let recorded = msp_sim::model::session::iso8601(self.now());
        let tool = json!({"itemId": item_id, "kind": "toolCall", "turnId": t, "revision": 1,
            "status": "inProgress", "recordedAt": recorded, "tool": provider, "args": "act-1",
            "approvalId": a});
        let (e1, started) = self.event("item/started", json!({"item": tool}), None);
        let (e2, asked) = self.event(
            "approval/requested",
            json!({"approvalId": a, "turnId": t, "taskId": cid(3002), "itemId": item_id,
                "toolCallId": item_id, "toolName": provider, "rawArgs": "act-1",
                "subject": {"kind": "tool", "toolName": provider},
                "currentRequirementId": {"approvalId": a, "sourceIndex": 0},
                "availableChoices": [
                    {"choiceId": "approve", "label": "Approve", "decision": "approved", "scope": "once"},
                    {"choiceId": "deny", "label": "Deny", "decision": "denied", "scope": "once"}],
                "protectedWrite": false, "judgeEscalated": false}),
            None,
        );
        (tool, vec![e1, e2], [started, asked])
    }
}

impl H {
    /// [`H::effect_asked_at`] `provider`, its records durable; then cid(4)
    /// approves it on link 3 (`received`, `approval/resolved` and
    /// `settled` appended and synced, the ack sent). The tool call item as
    /// asked, and the approval id.
    fn effect_approved(&mut self, provider: &str) -> (Value, String) {
        let (tool, recs, _) = self.effect_asked_at(provider);
        let (t, item_id, a, d) = (cid(2), cid(3000), cid(3001), cid(4));
        self.append(recs);
        self.sync();
        let requirement = json!({"approvalId": a, "sourceIndex": 0});
        self.recv(
            3,
            "approval/decide",
            json!({"commandId": d, "sessionId": S, "approvalId": a,
                   "requirementId": requirement, "choiceId": "approve"}),
        );
        let ack = json!({"commandId": d, "status": "accepted", "approvalId": a, "terminal": true});
        let received = self.received(
            &d,
            "approval/decide",
            json!({"sessionId": S, "approvalId": a, "requirementId": requirement,
                   "choiceId": "approve"}),
            json!({"result": ack}),
        );
        let (e, _) = self.event(
            "approval/resolved",
            json!({"approvalId": a, "itemId": item_id, "turnId": t, "decision": "approved",
                "policyResult": "allow", "resolvedBy": "user", "stageEvidence": [],
                "decidedByCommandId": d}),
            Some(&d),
        );
        let settled = self.settled(&d);
        self.append(vec![received, e, settled]);
        self.sync();
        self.answer(3, ack);
        (tool, a)
    }
}

/// Turn cid(2) asks an approval for its effect; the host aborts it with
/// the turn (an interrupt, say), completing the tool call `notStarted`
/// unless `complete_tool` is false, then ends the turn `cancelled`.
fn aborted_effect(complete_tool: bool) -> H {
    let mut h = H::new();
    let (tool, mut recs, _) = h.effect_asked();
    let (t, item_id, a) = (cid(2), cid(3000), cid(3001));
    let (e, _) = h.event(
        "approval/resolved",
        json!({"approvalId": a, "itemId": item_id, "turnId": t, "decision": "abort",
            "policyResult": "deny", "resolvedBy": "policy", "stageEvidence": []}),
        None,
    );
    recs.push(e);
    if complete_tool {
        let mut done = tool.clone();
        done["revision"] = json!(2);
        done["status"] = json!("cancelled");
        done["effectOutcome"] = json!("notStarted");
        let (e, _) = h.event("item/completed", json!({"item": done}), None);
        recs.push(e);
    }
    let (e, _) = h.event(
        "turn/completed",
        json!({"turnId": t, "terminal": "cancelled", "durationMs": 3}),
        None,
    );
    recs.push(e);
    h.append(recs);
    h.sync();
    h
}

#[test]
fn turn_lifecycle_a_refused_tool_call_left_open_when_its_turn_ends() {
    let open = |h: &H| {
        h.check()
            .into_iter()
            .filter(|v| v.property == "turn-lifecycle" && v.detail.contains("in progress"))
            .count()
    };
    // Control: the aborted approval's tool call completes `notStarted`
    // before the turn ends.
    assert_eq!(
        open(&aborted_effect(true)),
        0,
        "{:#?}",
        aborted_effect(true).check()
    );
    assert_eq!(
        open(&aborted_effect(false)),
        1,
        "{:#?}",
        aborted_effect(false).check()
    );
}

/// Turn cid(2) streams "echo: hello" on link 1 (opened, one delta "echo: he"),
/// then ends `terminal`. The message completes `status` with the text
/// streamed so far before the turn ends, unless `status` is `None` (the
/// host forgets it).
fn cut_short(status: Option<&str>, terminal: &str) -> H {
    let mut h = H::new();
    h.start();
    h.turn(2, 2, "hello");
    let item_id = cid(3000);
    let frames = [
        (
            "item/started",
            json!({"item": {"itemId": item_id, "kind": "agentMessage", "turnId": cid(2),
                            "revision": 1, "status": "inProgress", "text": ""}}),
        ),
        (
            "item/delta",
            json!({"itemId": item_id, "field": "text", "delta": "echo: he"}),
        ),
    ];
    for (k, (method, mut p)) in frames.into_iter().enumerate() {
        p["sessionId"] = json!(S);
        p["viewCursor"] = json!(format!("{}.{}", cursor(h.n), k + 1));
        h.notify(method, &p);
    }
    let mut recs = Vec::new();
    let mut sent = Vec::new();
    if let Some(status) = status {
        let recorded = msp_sim::model::session::iso8601(h.now() + 1);
        let item = json!({"itemId": item_id, "kind": "agentMessage", "turnId": cid(2),
            "revision": 2, "status": status, "text": "echo: he", "recordedAt": recorded});
        let (e, p) = h.event("item/completed", json!({"item": item}), None);
        recs.push(e);
        sent.push(("item/completed", p));
    }
    let (e, p) = h.event(
        "turn/completed",
        json!({"turnId": cid(2), "terminal": terminal}),
        None,
    );
    recs.push(e);
    sent.push(("turn/completed", p));
    h.append(recs);
    h.sync();
    for (m, p) in sent {
        h.notify(m, &p);
    }
    h
}

#[test]
fn turn_lifecycle_a_message_cut_short_says_how_its_turn_ended() {
    let cut = |status: Option<&str>, terminal: &str| {
        h_violations(&cut_short(status, terminal), "turn-lifecycle")
    };
    // Control: an interrupted turn's open message completes `cancelled`
    // (as the open tool call of golden transcript
    // userinput-interrupt-round-trip does) before the turn ends.
    clean(&cut_short(Some("cancelled"), "cancelled"));
    // Doctored: the message says `failed` of a cancelled turn, or
    // `cancelled` of a turn that completed.
    assert_eq!(cut(Some("failed"), "cancelled").len(), 1);
    assert_eq!(cut(Some("cancelled"), "completed").len(), 1);
    // Doctored: the message this link saw open never completes.
    let v = cut(None, "cancelled");
    assert!(v.len() == 1 && v[0].contains("never completed"), "{v:#?}");
}

/// The details of `h`'s violations of `property`.
fn h_violations(h: &H, property: &str) -> Vec<String> {
    h.check()
        .into_iter()
        .filter(|v| v.property == property)
        .map(|v| v.detail)
        .collect()
}

/// Turn cid(2) (`!task 5000`) starts background task cid(3000) and
/// completes; the task then ends `cancelled`, after a `task/stop` naming
/// it (request 3, cid(4)) reached the host if `stopped`.
fn task_cancelled(stopped: bool) -> H {
    let mut h = H::new();
    h.start();
    h.turn(2, 2, "!task 5000");
    let (t, task) = (cid(2), cid(3000));
    let recorded = msp_sim::model::session::iso8601(h.now());
    let started = json!({"itemId": task, "kind": "toolCall", "turnId": t, "revision": 1,
        "status": "inProgress", "recordedAt": recorded, "tool": "background"});
    // (Revision 1: a message that never streamed on this link.)
    let message = json!({"itemId": cid(3001), "kind": "agentMessage", "turnId": t,
        "revision": 1, "status": "completed", "text": "echo: !task 5000", "recordedAt": recorded});
    let mut recs = Vec::new();
    let mut sent = Vec::new();
    for (m, p) in [
        ("item/started", json!({"item": started})),
        ("item/completed", json!({"item": message})),
        (
            "turn/completed",
            json!({"turnId": t, "terminal": "completed"}),
        ),
    ] {
        let (e, p) = h.event(m, p, None);
        recs.push(e);
        sent.push((m, p));
    }
    h.append(recs);
    h.sync();
    for (m, p) in sent {
        h.notify(m, &p);
    }
    if stopped {
        h.recv(
            3,
            "task/stop",
            json!({"commandId": cid(4), "sessionId": S, "taskId": task}),
        );
        h.answer(
            3,
            json!({"commandId": cid(4), "status": "accepted", "taskId": task}),
        );
    }
    let mut done = started.clone();
    done["revision"] = json!(2);
    done["status"] = json!("cancelled");
    done["recordedAt"] = json!(msp_sim::model::session::iso8601(h.now()));
    let (e, p) = h.event("item/completed", json!({"item": done}), None);
    h.append(vec![e]);
    h.sync();
    h.notify("item/completed", &p);
    h
}

#[test]
fn turn_lifecycle_a_task_cancelled_that_no_stop_named() {
    // Control: `task/stop` ends the task `cancelled` (PROTOCOL.md 5).
    clean(&task_cancelled(true));
    // Doctored: nothing asked; the simulator never shuts a host down.
    let v = h_violations(&task_cancelled(false), "turn-lifecycle");
    assert!(v.len() == 1 && v[0].contains("ended cancelled"), "{v:#?}");
}

/// Turn cid(2) asks approval for `!effect keyed act-1`; cid(4) approves
/// it; the host performs it at the keyed provider (its response lost if
/// `lost`), then completes the tool call with effectOutcome `outcome`
/// (`""`: it never does).
fn keyed_effect(lost: bool, outcome: &str) -> H {
    let mut h = H::new();
    let (tool, a) = h.effect_approved("keyed");
    h.host(What::Effect {
        inc: 1,
        provider: "keyed".into(),
        key: format!("{S}:{a}"),
        action: "act-1".into(),
        perform: true,
        mutated: true,
        lost,
    });
    if outcome.is_empty() {
        return h;
    }
    let mut done = tool.clone();
    done["revision"] = json!(2);
    done["status"] = json!(if outcome == "committed" {
        "completed"
    } else {
        "failed"
    });
    done["effectOutcome"] = json!(outcome);
    let (e, _) = h.event("item/completed", json!({"item": done}), None);
    h.append(vec![e]);
    h.sync();
    h
}

#[test]
fn effect_durability_a_keyed_effect_reported_unknown_though_nothing_was_lost() {
    // Controls: the keyed provider's answer was lost, so the host cannot
    // know; or it arrived and the outcome is committed.
    let v = |lost, outcome| h_violations(&keyed_effect(lost, outcome), "effect-durability");
    assert_eq!(v(true, "unknown"), Vec::<String>::new());
    assert_eq!(v(false, "committed"), Vec::<String>::new());
    // Doctored: nothing was lost, yet unknown (recovery asks a keyed
    // provider by key, PROTOCOL.md 5).
    assert_eq!(v(false, "unknown").len(), 1, "{:#?}", v(false, "unknown"));
}

/// Turn cid(2) asks approval for `!effect unkeyed act-1`; cid(4)
/// approves it at host0's incarnation 1, durably; then, if `crash`,
/// incarnation 1 dies (the effect never reached the provider) and
/// incarnation 2 starts. The living incarnation performs the effect once.
fn unkeyed_effect_after(crash: bool) -> H {
    let mut h = H::new();
    let (_, a) = h.effect_approved("unkeyed");
    let inc = if crash {
        h.host(What::HostCrash {
            inc: 1,
            point: None,
        });
        h.host_starts(2, true);
        2
    } else {
        1
    };
    h.host(What::Effect {
        inc,
        provider: "unkeyed".into(),
        key: format!("{S}:{a}"),
        action: "act-1".into(),
        perform: true,
        mutated: true,
        lost: false,
    });
    h
}

#[test]
fn effect_durability_an_unkeyed_effect_issued_by_a_process_that_found_it_on_disk() {
    // Control: the incarnation that resolved the approval performs it.
    assert_eq!(
        h_violations(&unkeyed_effect_after(false), "effect-durability"),
        Vec::<String>::new()
    );
    // Doctored: the next incarnation found the approved call open and
    // issued it, once (the first attempt never reached the provider, so
    // nothing was performed twice). PROTOCOL.md 5: an unkeyed effect in
    // flight at a crash is reported `unknown`, never re-issued.
    let v = h_violations(&unkeyed_effect_after(true), "effect-durability");
    assert!(v.len() == 1 && v[0].contains("found on disk"), "{v:#?}");
}

#[test]
fn effect_durability_a_decided_tool_call_still_open_when_the_run_ends_healed() {
    // The response was lost; after 90 s without faults the host has
    // timed the call out (30 s) and completed it `unknown`, or not.
    let ended = |outcome: &str| {
        let mut h = keyed_effect(true, outcome);
        h.push(Actor::World, What::Phase("liveness".into()));
        h_violations(&h, "effect-durability")
    };
    assert_eq!(ended("unknown"), Vec::<String>::new());
    let v = ended("");
    assert!(v.len() == 1 && v[0].contains("never completed"), "{v:#?}");
}

#[test]
fn turn_lifecycle_a_task_still_running_long_after_it_was_due() {
    // `!task 5000` started; the run heals and ends 2 s (control: 0.5 s)
    // after the task was due, and it never completed.
    let ended = |late_ms: u64| {
        let mut h = task_cancelled(false);
        // Drop the cancellation (its append, sync and frame): the task
        // keeps running.
        h.entries.truncate(h.entries.len() - 3);
        h.t += 5_000 + late_ms;
        h.push(Actor::World, What::Phase("liveness".into()));
        h_violations(&h, "turn-lifecycle")
    };
    assert_eq!(ended(500), Vec::<String>::new());
    let v = ended(2_000);
    assert!(v.len() == 1 && v[0].contains("still runs"), "{v:#?}");
}

/// The started session's graceful shutdown: host 0 is asked to stop (if
/// `asked`), writes and syncs its `closed` record (`hostShutdown`),
/// releases the lease (if `released`), sends `session/closed` on link 1,
/// subscribed by the start (if `closed_sent`), and exits.
fn shut_down(asked: bool, released: bool, closed_sent: bool) -> H {
    let mut h = H::new();
    h.start();
    if asked {
        h.host(What::HostShutdown { inc: 1 });
    }
    let closed = record(
        6,
        json!({"record": "closed", "reason": "hostShutdown", "atMs": h.now()}),
    );
    h.append(vec![closed]);
    h.sync();
    if released {
        h.host(What::LeaseRelease {
            inc: 1,
            session: S.into(),
        });
    }
    if closed_sent {
        h.notify(
            "session/closed",
            &json!({"sessionId": S, "reason": "hostShutdown", "viewCursor": cursor(0)}),
        );
    }
    h.host(What::HostExit { inc: 1 });
    h
}

#[test]
fn lease_unload_a_shutdown_unload_no_stop_asked_for() {
    clean(&shut_down(true, true, true));
    // Doctored: the host closes for `hostShutdown` (record and frame)
    // though nothing asked it to stop (PROTOCOL.md 4.1: `idle` otherwise).
    let v = h_violations(&shut_down(false, true, true), "lease-unload");
    assert!(
        v.len() == 2
            && v.iter()
                .all(|d| d.contains("without being asked") || d.contains("was not asked")),
        "{v:#?}"
    );
}

#[test]
fn lease_unload_a_shutdown_that_exits_holding_a_lease() {
    let v = h_violations(&shut_down(true, false, true), "lease-unload");
    assert!(
        v.len() == 1 && v[0].contains("still holding the lease"),
        "{v:#?}"
    );
}

#[test]
fn lease_unload_a_shutdown_that_never_tells_a_subscriber() {
    // PROTOCOL.md 4.1: `session/closed` is the session's last event; a
    // link subscribed to it when the host unloads it for its shutdown
    // gets it before the host exits.
    let v = h_violations(&shut_down(true, true, false), "lease-unload");
    assert!(
        v.len() == 1 && v[0].contains("without sending session/closed"),
        "{v:#?}"
    );
}

#[test]
fn lease_unload_a_shutdown_that_hangs() {
    // Killed 1 ms after it was asked to stop: a crash during a shutdown.
    // Killed 10 s after: the shutdown never finished.
    let killed = |after_ms: u64| {
        let mut h = H::new();
        h.start();
        h.host(What::HostShutdown { inc: 1 });
        h.t += after_ms;
        h.host(What::HostCrash {
            inc: 1,
            point: None,
        });
        h_violations(&h, "lease-unload")
    };
    assert_eq!(killed(1), Vec::<String>::new());
    let v = killed(msp_sim::run::SHUTDOWN_GRACE_MS);
    assert!(
        v.len() == 1 && v[0].contains("still had sessions"),
        "{v:#?}"
    );
}

/// `h` with `HostShutdown` put before its last `n` entries (the host was
/// asked to stop just before it wrote them).
fn stopped_before_last(mut h: H, n: usize) -> H {
    let at = h.entries.len() - n;
    let t = h.entries[at].0;
    h.entries
        .insert(at, (t, Actor::Host(0), What::HostShutdown { inc: 1 }));
    h
}

#[test]
fn a_shutdown_ends_a_task_and_stops_waiting_for_an_effect() {
    // A task ended `cancelled` with no stop asked for, and a keyed effect
    // reported `unknown` with no response lost, are each wrong (the
    // doctored histories above); written by a host asked to stop, they
    // are how its unload ends live work (PROTOCOL.md 4.1).
    let task = stopped_before_last(task_cancelled(false), 3);
    assert_eq!(h_violations(&task, "turn-lifecycle"), Vec::<String>::new());
    // (keyed_effect: the effect call, then the completion's append and
    // sync.)
    let effect = stopped_before_last(keyed_effect(false, "unknown"), 2);
    assert_eq!(
        h_violations(&effect, "effect-durability"),
        Vec::<String>::new()
    );
}

#[test]
fn read_consistency_view_subscribe_after_a_cursor_the_session_never_issued() {
    // `after` must be a cursor the session issued, spelled as hosts spell
    // it: one with a leading zero, or past the head, must be refused
    // `missingAnchor`; one durable when the request arrived never is.
    let missing = json!({"code": -32011, "message": "unknown cursor anchor",
                         "data": {"kind": "notFound", "reason": "missingAnchor", "sessionId": S}});
    let odd = format!("v:{S}:01");
    // (after, answered at the head rather than refused, legal)
    let cases = [
        (odd.clone(), true, false),
        (cursor(9), true, false),
        (cursor(2), true, true),
        (odd, false, true),
        (cursor(9), false, true),
        (cursor(1), false, false),
    ];
    for (after, answered, legal) in cases {
        let mut h = H::new();
        h.start();
        h.turn(3, 3, "hi");
        h.recv(8, "view/subscribe", json!({"sessionId": S, "after": after}));
        if answered {
            h.answer(8, json!({"viewCursor": cursor(2)}));
        } else {
            h.reject(8, missing.clone());
        }
        judged(&h, legal, "read-consistency");
    }
}

#[test]
fn view_cursor_order_a_view_subscribe_backlog_never_sent() {
    // The events after `after` go out with the answer: the link's next
    // response comes after them.
    let mut h = H::new();
    h.start();
    h.turn(3, 3, "hi");
    // An observer's link, which saw nothing of the session yet.
    h.push(
        Actor::Client(1),
        What::Connect {
            link: 2,
            host: 0,
            inc: 1,
        },
    );
    h.handshake_at(0, 1, 2);
    h.recv_on(
        2,
        8,
        "view/subscribe",
        json!({"sessionId": S, "after": cursor(0)}),
    );
    h.send_on(
        2,
        json!({"jsonrpc": "2.0", "id": 8, "result": {"viewCursor": cursor(2)}}),
    );
    h.recv_on(2, 9, "view/unsubscribe", json!({"sessionId": S}));
    h.send_on(2, json!({"jsonrpc": "2.0", "id": 9, "result": {}}));
    caught(&h, "view-cursor-order");
}

#[test]
fn view_cursor_order_a_session_started_broadcast_never_sent() {
    // PROTOCOL.md 4.1: `session/started` is broadcast to every initialized
    // connection before the start's response. An observer's link,
    // initialized before the start arrived, is owed it (it may come after
    // the response on link 1: only that link has it first).
    for legal in [true, false] {
        let mut h = H::new();
        h.opens(2, 1);
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                          "params": {"clientInfo": {"name": "o", "version": "1"}}});
        h.host(What::HostRecv {
            inc: 1,
            link: 2,
            line: init.to_string(),
        });
        h.send_on(2, init_ok(json!(0), true));
        h.host(What::HostRecv {
            inc: 1,
            link: 2,
            line: json!({"jsonrpc": "2.0", "method": "initialized"}).to_string(),
        });
        h.start();
        if legal {
            h.send_on(
                2,
                json!({"jsonrpc": "2.0", "method": "session/started",
                       "params": {"session": {"sessionId": S}}, "emittedAtMs": h.now()}),
            );
        }
        judged(&h, legal, "view-cursor-order");
    }
}

#[test]
fn log_integrity_a_log_corrupt_refusal_naming_another_file() {
    // A `logCorrupt` names the damaged file of the session asked about
    // (its log or its archive) and the offset (PROTOCOL.md 4.4).
    for (file, legal) in [
        (format!("/sim/data/sessions/{S}/session.log"), true),
        (format!("/sim/data/sessions/{S}/history.log"), true),
        ("/sim/data/sessions/other/session.log".to_string(), false),
        (String::new(), false),
    ] {
        let mut h = H::new();
        h.start();
        h.recv(2, "view/page", json!({"sessionId": S, "limit": 5}));
        h.reject(
            2,
            json!({"code": -32603, "message": "log corrupt",
                   "data": {"kind": "internal", "reason": "logCorrupt", "offset": 0, "file": file}}),
        );
        let v = h.check();
        let named = v.iter().any(|x| x.detail.contains("naming file"));
        assert_eq!(named, !legal, "{file:?}: {v:#?}");
    }
}

#[test]
fn read_consistency_a_holder_read_showing_what_is_not_durable() {
    // A holder answers `session/read` from memory, where only what it
    // synced is durable: it waits for what it shows (PROTOCOL.md 4.2).
    // A read of the file (`notLoaded`) may show what the file holds.
    for (status, n, legal) in [
        ("idle", 0, true),
        ("notLoaded", 3, true),
        ("idle", 3, false),
    ] {
        let mut h = H::new();
        h.start();
        h.recv(2, "session/read", json!({"sessionId": S}));
        h.answer(
            2,
            json!({"session": {"sessionId": S, "status": status}, "viewCursor": cursor(n),
                   "history": {"mode": "none", "items": null, "snapshot": null}}),
        );
        let v = h.check();
        let shown = v
            .iter()
            .any(|x| x.property == "read-consistency" && x.detail.contains("from memory"));
        assert_eq!(shown, !legal, "{status} at {n}: {v:#?}");
    }
}

/// Link 2, opened to the running host without a handshake, carries
/// `lines` (each read by the host, which answers an `initialize` among
/// them at once unless `answer` does); then the host sends `answer` on it.
fn on_a_fresh_link(lines: &[Value], answer: Value) -> H {
    let mut h = H::new();
    h.start();
    h.opens(2, 1);
    for line in lines {
        h.push(
            Actor::Client(1),
            What::ClientSend {
                link: 2,
                line: line.to_string(),
            },
        );
        h.host(What::HostRecv {
            inc: 1,
            link: 2,
            line: line.to_string(),
        });
        // A host answers every request it reads: an `initialize` that
        // `answer` does not answer, at once.
        if line["method"] == "initialize" && line["id"] != answer["id"] {
            let ok = init_ok(line["id"].clone(), h.durable);
            h.send_on(2, ok);
        }
    }
    h.send_on(2, answer);
    h
}

#[test]
fn admission_decision_a_request_answered_before_the_handshake() {
    // PROTOCOL.md 2: any request but `initialize` before both halves of
    // the handshake is refused `notInitialized`; a host that answers it
    // skipped the handshake.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"clientInfo": {"name": "t", "version": "1"}}});
    let read = json!({"jsonrpc": "2.0", "id": 2, "method": "view/unsubscribe",
                      "params": {"sessionId": S}});
    let refused = json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32600,
                         "message": "Not initialized", "data": {"kind": "notInitialized"}}});
    let answered = json!({"jsonrpc": "2.0", "id": 2, "result": {}});
    // Nothing read before it, or `initialize` alone.
    for before in [vec![], vec![init.clone()]] {
        let mut lines = before.clone();
        lines.push(read.clone());
        clean(&on_a_fresh_link(&lines, refused.clone()));
        caught(
            &on_a_fresh_link(&lines, answered.clone()),
            "admission-decision",
        );
        // Refused, but as a second `initialize` would be.
        let mut wrong = refused.clone();
        wrong["error"]["data"]["kind"] = json!("alreadyInitialized");
        caught(&on_a_fresh_link(&lines, wrong), "admission-decision");
    }
}

#[test]
fn admission_decision_an_initialize_refused_after_an_early_initialized() {
    // An `initialized` read ahead of `initialize` initializes nothing: the
    // `initialize` that follows is the link's first and must succeed;
    // only a second one is `alreadyInitialized`.
    let early = json!({"jsonrpc": "2.0", "method": "initialized"});
    let init = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
               "params": {"clientInfo": {"name": "t", "version": "1"}}})
    };
    let ok = |id: u64| init_ok(json!(id), true);
    let again = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600,
               "message": "already initialized", "data": {"kind": "alreadyInitialized"}}})
    };
    clean(&on_a_fresh_link(&[early.clone(), init(1)], ok(1)));
    caught(
        &on_a_fresh_link(&[early.clone(), init(1)], again(1)),
        "admission-decision",
    );
    // The second `initialize` on a link (its first answered).
    let mut h = on_a_fresh_link(&[init(1)], ok(1));
    let mut twice = h.clone();
    for (h, answer, legal) in [(&mut h, again(2), true), (&mut twice, ok(2), false)] {
        h.host(What::HostRecv {
            inc: 1,
            link: 2,
            line: init(2).to_string(),
        });
        h.send_on(2, answer);
        judged(h, legal, "admission-decision");
    }
}

/// A run whose hosts unload after 4 s of idleness: S started on link 1,
/// which then unsubscribes (S is idle from then on, host 0 holding it).
fn left_idle() -> H {
    let mut h = H::new();
    h.push(
        Actor::World,
        What::FaultMix("none idle-unload=4000ms".into()),
    );
    h.start();
    h.recv(2, "view/unsubscribe", json!({"sessionId": S}));
    h.answer(2, json!({}));
    h
}

/// The holder writes S's `closed` record (idle), syncs it and tells link 1.
fn unloads(h: &mut H) {
    let at = h.now();
    h.append(vec![record(
        6,
        json!({"record": "closed", "reason": "idle", "atMs": at}),
    )]);
    h.sync();
    let at = h.now();
    h.send(
        json!({"jsonrpc": "2.0", "method": "session/closed", "emittedAtMs": at,
                  "params": {"sessionId": S, "reason": "idle", "viewCursor": cursor(0)}}),
    );
}

#[test]
fn lease_unload_an_idle_session_never_unloaded() {
    // PROTOCOL.md 4.1: the host unloads a session after --idle-unload-ms
    // of idleness. Whatever comes next (here the world's next phase)
    // after the deadline finds S still loaded: the holder kept it.
    let mut kept = left_idle();
    kept.t += 4_300;
    kept.push(Actor::World, What::Phase("later".into()));
    caught(&kept, "lease-unload");
    // Controls: the same moment before the deadline; an unload on time.
    let mut early = left_idle();
    early.t += 3_900;
    early.push(Actor::World, What::Phase("later".into()));
    clean(&early);
    let mut unloaded = left_idle();
    unloaded.t += 4_000;
    unloads(&mut unloaded);
    unloaded.t += 5_000;
    unloaded.push(Actor::World, What::Phase("later".into()));
    clean(&unloaded);
    // A command in S before the deadline: the model no longer knows when
    // (or whether) S is idle, and owes nothing.
    let mut busy = left_idle();
    busy.t += 1_000;
    busy.recv(
        3,
        "task/stopAll",
        json!({"commandId": cid(11), "sessionId": S}),
    );
    busy.answer(3, json!({"commandId": cid(11), "status": "accepted"}));
    busy.t += 5_000;
    busy.push(Actor::World, What::Phase("later".into()));
    clean(&busy);
}

#[test]
fn lease_unload_an_idle_unload_before_its_time() {
    // PROTOCOL.md 4.1: the host unloads a session *after* --idle-unload-ms
    // of idleness. S became idle when its subscribed link 1 unsubscribed
    // (the host learns that no earlier than the model): an idle close half
    // a second later is early (cargo-mutants: the idle deadline computed
    // as `now - idle_ms` unloaded every idle session at the next tick).
    let mut early = left_idle();
    early.t += 500;
    unloads(&mut early);
    caught(&early, "lease-unload");
    // Controls: the close on time; and an early close after an unsubscribe
    // of a link that was never subscribed, which says nothing about when
    // the host's idle timer started (link 1 left on its own before, which
    // the host may have learned at once).
    let mut on_time = left_idle();
    on_time.t += 4_000;
    unloads(&mut on_time);
    clean(&on_time);
    let mut h = H::new();
    h.push(
        Actor::World,
        What::FaultMix("none idle-unload=4000ms".into()),
    );
    h.start();
    h.push(
        Actor::Client(0),
        What::LinkClosed {
            link: 1,
            why: "client left",
        },
    );
    h.t += 3_500;
    h.connects(2, 1);
    h.recv_on(2, 8, "view/unsubscribe", json!({"sessionId": S}));
    h.send_on(2, json!({"jsonrpc": "2.0", "id": 8, "result": {}}));
    h.t += 500;
    unloads(&mut h);
    clean(&h);
}

#[test]
fn lease_unload_a_cut_before_a_turn_start_is_synced_owes_no_unload() {
    // A link cut while the turn it started was written but not yet synced:
    // the durable log showed S idle at the cut, the sync then showed the
    // turn running, and a running session is not unloaded (lease-handover
    // seed 32 of the `sim` client). Control: the same cut after the turn's
    // end is synced owes the unload.
    for turn_synced_before_cut in [false, true] {
        let mut h = H::new();
        h.push(
            Actor::World,
            What::FaultMix("none idle-unload=4000ms".into()),
        );
        h.start();
        let (_, recs, _) = h.turn_begun(3, 7, "hi");
        let c = cid(7);
        h.append(recs);
        if turn_synced_before_cut {
            let (done, _) = h.event(
                "turn/completed",
                json!({"turnId": c, "status": "completed"}),
                Some(&c),
            );
            h.append(vec![done]);
            h.sync();
        }
        h.cut(1);
        h.sync();
        h.t += 4_300;
        h.push(Actor::World, What::Phase("later".into()));
        judged(&h, !turn_synced_before_cut, "lease-unload");
    }
}

#[test]
fn lease_unload_an_idle_unload_while_another_link_is_subscribed() {
    // Idle means no connection subscribed (PROTOCOL.md 4.1): link 2's
    // `view/subscribe` of S, answered and never ended, keeps S loaded.
    for (ended, legal) in [(true, true), (false, false)] {
        let mut h = H::new();
        h.start();
        h.connects(2, 1);
        h.recv_on(2, 8, "view/subscribe", json!({"sessionId": S}));
        h.send_on(
            2,
            json!({"jsonrpc": "2.0", "id": 8, "result": {"viewCursor": cursor(0)}}),
        );
        if ended {
            h.recv_on(2, 9, "view/unsubscribe", json!({"sessionId": S}));
            h.send_on(2, json!({"jsonrpc": "2.0", "id": 9, "result": {}}));
        }
        h.recv(2, "view/unsubscribe", json!({"sessionId": S}));
        h.answer(2, json!({}));
        h.t += 4_000;
        unloads(&mut h);
        judged(&h, legal, "lease-unload");
    }
}

// ----- server requests ----------------------------------------------------

/// Turn cid(2)'s approval asked, durable, and its `approval/requested`
/// sent on link 1; returns its params.
fn approval_pending() -> (H, Value) {
    let mut h = H::new();
    let (_, recs, [started, asked]) = h.effect_asked();
    h.append(recs);
    h.sync();
    h.notify("item/started", &started);
    h.notify("approval/requested", &asked);
    (h, asked)
}

fn approval_request(h: &mut H, id: u64, params: &Value) {
    h.send(json!({"jsonrpc": "2.0", "id": id, "method": "approval/request", "params": params}));
}

#[test]
fn pending_visible_a_server_request_id_repeated_on_a_link() {
    // PROTOCOL.md 2: server request ids are integers per connection, from
    // 1; a client answers by id, so one never comes twice on a link.
    for (second, legal) in [(2, true), (1, false)] {
        let (mut h, asked) = approval_pending();
        approval_request(&mut h, 1, &asked);
        approval_request(&mut h, second, &asked);
        judged(&h, legal, "pending-visible");
    }
}

#[test]
fn pending_visible_an_approval_request_unlike_its_approval() {
    // `approval/request` carries the params of the durable
    // `approval/requested` (PROTOCOL.md 5), `viewCursor` included.
    let (mut h, asked) = approval_pending();
    approval_request(&mut h, 1, &asked);
    clean(&h);
    let (mut h, asked) = approval_pending();
    let mut other = asked.clone();
    other.as_object_mut().unwrap().remove("viewCursor");
    approval_request(&mut h, 1, &other);
    caught(&h, "pending-visible");
}

#[test]
fn pending_visible_a_resume_that_never_reissues_a_pending_approval() {
    // PROTOCOL.md 4.1: a resume's pending approvals are re-issued as
    // `approval/request` right after its response, so before the link's
    // next answer.
    for reissued in [true, false] {
        let (mut h, asked) = approval_pending();
        approval_request(&mut h, 1, &asked);
        let c = cid(20);
        h.recv(
            5,
            "session/resume",
            json!({"commandId": c, "sessionId": S, "cursor": cursor(h.n), "excludeItems": true}),
        );
        let result = json!({"session": {}, "viewCursor": cursor(h.n),
            "history": {"mode": "none", "items": null, "snapshot": null, "noneReason": "cursorSuffix"},
            "pendingRequests": []});
        let r = h.received(
            &c,
            "session/resume",
            json!({"sessionId": S, "cursor": cursor(h.n), "excludeItems": true}),
            json!({"result": result}),
        );
        let st = h.settled(&c);
        h.append(vec![r, st]);
        h.sync();
        h.answer(5, result);
        if reissued {
            approval_request(&mut h, 2, &asked);
        }
        h.recv(6, "approval/listPending", json!({"sessionId": S}));
        h.answer(6, json!({"approvals": [asked], "userInputs": []}));
        let v: Vec<String> = h
            .check()
            .into_iter()
            .filter(|x| x.property == "pending-visible")
            .map(|x| x.detail)
            .collect();
        assert_eq!(
            v.iter().any(|d| d.contains("re-issued right after")),
            !reissued,
            "{v:#?}"
        );
    }
}

/// A line the host reads on link 1 as it is, with its client's send.
fn raw_recv(h: &mut H, line: &str) {
    h.push(
        Actor::Client(0),
        What::ClientSend {
            link: 1,
            line: line.to_string(),
        },
    );
    h.host(What::HostRecv {
        inc: 1,
        link: 1,
        line: line.to_string(),
    });
}

fn refusal(id: Value, code: i64, kind: &str, field: Option<&str>) -> Value {
    let mut data = json!({"kind": kind});
    if let Some(f) = field {
        data["field"] = json!(f);
    }
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": "m", "data": data}})
}

/// After a start, the host reads `line` (as sent) and answers `answer`,
/// which is right exactly when `legal`.
fn a_bad_line_answered(line: &str, answer: Value, legal: bool) {
    let mut h = H::new();
    h.start();
    raw_recv(&mut h, line);
    h.send(answer);
    judged(&h, legal, "admission-decision");
}

#[test]
fn admission_decision_a_bad_line_refused_otherwise_than_the_precedence_says() {
    // PROTOCOL.md 1 and 3: not JSON, `-32700`; not a request, `-32600`;
    // then the method (`-32601`) before the params (`-32602` naming the
    // field). Each bad line, with the refusal it must get and a wrong one
    // a host could give.
    let c = cid(9);
    let su = |p: Value| {
        json!({"jsonrpc": "2.0", "id": "b", "method": "state/update", "params": p}).to_string()
    };
    let good = json!({"commandId": c, "sessionId": S, "expectedRevision": 0, "set": {"k": 1}});
    let no_sid = {
        let mut p = good.clone();
        p.as_object_mut().unwrap().remove("sessionId");
        p
    };
    let cases: Vec<(String, Value, Value)> = vec![
        (
            su(good.clone())[..20].to_string(),
            refusal(Value::Null, -32700, "parseError", None),
            refusal(Value::Null, -32600, "invalidRequest", None),
        ),
        (
            format!("[{}]", su(good.clone())),
            refusal(Value::Null, -32600, "invalidRequest", None),
            refusal(json!("b"), -32600, "invalidRequest", None),
        ),
        (
            json!({"jsonrpc": "2.0", "id": "b", "method": "state/updateX", "params": [good]})
                .to_string(),
            refusal(json!("b"), -32601, "methodNotFound", None),
            refusal(json!("b"), -32602, "invalidParams", Some("params")),
        ),
        (
            su(no_sid),
            refusal(json!("b"), -32602, "invalidParams", Some("sessionId")),
            refusal(json!("b"), -32602, "invalidParams", Some("commandId")),
        ),
        (
            su(
                json!({"commandId": "018f6a1e-9b3c-4c21-a54a-000000000009", "sessionId": S,
                      "expectedRevision": 0, "set": {}}),
            ),
            refusal(json!("b"), -32602, "invalidParams", Some("commandId")),
            json!({"jsonrpc": "2.0", "id": "b", "result": {"commandId": c, "status": "accepted", "revision": 1}}),
        ),
    ];
    for (line, right, wrong) in cases {
        a_bad_line_answered(&line, right, true);
        a_bad_line_answered(&line, wrong, false);
    }
}

#[test]
fn a_command_refused_as_a_bad_line_is_new_when_it_comes_again() {
    // A refusal records nothing (PROTOCOL.md 3): the well-formed command
    // that follows under the same id is admitted afresh, and answering it
    // as a replay of anything is wrong.
    for legal in [true, false] {
        let mut h = H::new();
        h.start();
        let c = cid(9);
        raw_recv(
            &mut h,
            &json!({"jsonrpc": "2.0", "id": "b", "method": "state/update",
                    "params": {"commandId": c, "sessionId": S, "expectedRevision": "0", "set": {"k": 1}}})
            .to_string(),
        );
        h.send(refusal(
            json!("b"),
            -32602,
            "invalidParams",
            Some("expectedRevision"),
        ));
        if legal {
            h.update(5, 9, 0, json!({"k": 1}));
        } else {
            // Answered from a ledger row nobody wrote.
            h.recv(
                5,
                "state/update",
                json!({"commandId": c, "sessionId": S, "expectedRevision": 0, "set": {"k": 1}}),
            );
            h.reject(5, rejected(&c, "state/update", "command_id_conflict"));
        }
        judged(&h, legal, "payload-identity");
    }
}

#[test]
fn admission_decision_an_answer_sent_twice() {
    // One request, one answer: a second answer with the same id answers
    // a request nobody sent again.
    for twice in [false, true] {
        let mut h = H::new();
        h.start();
        let (ack, _) = h.update(5, 5, 0, json!({"k": 1}));
        if twice {
            h.answer(5, ack);
        }
        judged(&h, !twice, "admission-decision");
    }
}

#[test]
fn value_identical_replays_a_command_id_spelled_in_uppercase_is_the_same_command() {
    // One UUID, one command (the ledger compares ids without case): the
    // uppercase copy gets the recorded answer; answering it as a new
    // command, with a second intake, is a second effect.
    for replayed in [true, false] {
        let mut h = H::new();
        h.start();
        let (ack, _) = h.update(5, 5, 0, json!({"k": 1}));
        let upper = cid(5).to_ascii_uppercase();
        h.recv(
            6,
            "state/update",
            json!({"commandId": upper, "sessionId": S, "expectedRevision": 0, "set": {"k": 1}}),
        );
        if replayed {
            h.answer(6, ack);
        } else {
            let again = json!({"commandId": upper, "status": "accepted", "revision": 2});
            let r = h.received(
                &upper,
                "state/update",
                json!({"sessionId": S, "expectedRevision": 0, "set": {"k": 1}}),
                json!({"result": again}),
            );
            h.append(vec![r]);
            h.sync();
            h.answer(6, again);
        }
        let v = h.check();
        assert_eq!(v.is_empty(), replayed, "{v:#?}");
    }
}

#[test]
fn admission_decision_an_initialize_with_a_bad_client_name_accepted() {
    // The public schema's `ClientInfo.name` is `[a-z0-9_]+`; msp/REFERENCE.md:
    // "a hyphenated `clientInfo.name` gets `invalidParams` and the
    // connection stays uninitialized", so the `initialize` that follows
    // succeeds. Three histories: the right one; the bad one accepted;
    // the bad one refused but the link counted as initialized anyway.
    for case in 0..3 {
        let mut h = H::default();
        h.host_starts(1, true);
        h.opens(1, 1);
        let bad = json!({"jsonrpc": "2.0", "id": "bad-init-1", "method": "initialize",
                         "params": {"clientInfo": {"name": "sim-client", "version": "1"}}});
        raw_recv(&mut h, &bad.to_string());
        let refused = refusal(
            json!("bad-init-1"),
            -32602,
            "invalidParams",
            Some("clientInfo.name"),
        );
        let accepted =
            json!({"jsonrpc": "2.0", "id": "bad-init-1", "result": {"museHome": "/sim/data"}});
        h.send(if case == 1 { accepted } else { refused });
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                          "params": {"clientInfo": {"name": "t", "version": "1"}}});
        raw_recv(&mut h, &init.to_string());
        h.send(if case == 2 {
            refusal(json!(0), -32600, "alreadyInitialized", None)
        } else {
            init_ok(json!(0), true)
        });
        judged(&h, case == 0, "admission-decision");
    }
}

#[test]
fn admission_decision_a_line_over_the_frame_limit_read_or_one_at_it_refused() {
    // PROTOCOL.md 1: a line over the frame limit gets `-32002
    // inputTooLarge`, id `null`, `data.limitBytes`; a line of exactly the
    // limit is read. The simulated hosts' limit is the simulator's
    // `FRAME_LIMIT_BYTES`.
    let limit = msp_sim::moves::FRAME_LIMIT_BYTES;
    let padded = |len: usize| {
        let body = json!({"jsonrpc": "2.0", "id": "b", "method": "session/read",
                          "params": {"sessionId": S}})
        .to_string();
        format!("{{{}{}", " ".repeat(len - body.len()), &body[1..])
    };
    let too_large = |l: usize| {
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32002, "message": "m",
               "data": {"kind": "inputTooLarge", "limitBytes": l}}})
    };
    for (line, answer, legal) in [
        (padded(limit + 1), too_large(limit), true),
        (padded(limit + 1), too_large(limit + 1), false),
        (
            padded(limit + 1),
            json!({"jsonrpc": "2.0", "id": "b", "error": {"code": -32602, "message": "m",
                   "data": {"kind": "invalidParams", "field": "sessionId"}}}),
            false,
        ),
        (padded(limit), too_large(limit), false),
    ] {
        a_bad_line_answered(&line, answer, legal);
    }
}

#[test]
fn admission_decision_a_turn_with_an_image_part_accepted() {
    // PROTOCOL.md 4.1: `input: [{type: "text", text}]`. A part of another
    // type is `invalidParams` naming `input` (or a member of it), even
    // one that carries a `text`.
    let c = cid(9);
    let line = json!({"jsonrpc": "2.0", "id": "b", "method": "turn/start",
                      "params": {"commandId": c, "sessionId": S,
                                 "input": [{"type": "image", "url": "u", "text": "a picture"}]}})
    .to_string();
    for (answer, legal) in [
        (
            refusal(json!("b"), -32602, "invalidParams", Some("input.type")),
            true,
        ),
        (
            refusal(json!("b"), -32602, "invalidParams", Some("input")),
            true,
        ),
        (
            refusal(json!("b"), -32602, "invalidParams", Some("sessionId")),
            false,
        ),
        (
            json!({"jsonrpc": "2.0", "id": "b", "result": {"commandId": c, "status": "accepted",
                   "turnId": c, "startedNewTurn": true, "disposition": "started"}}),
            false,
        ),
    ] {
        a_bad_line_answered(&line, answer, legal);
    }
}

#[test]
fn admission_decision_an_initialize_result_that_is_not_this_host_s() {
    // PROTOCOL.md 1 and the public `InitializeResult`: no capability
    // granted, `experimentalApi` false, `museHome` the absolute data
    // directory, `sessionDurability` the host's own, schema version 1 with
    // a `sha256:` fingerprint, a platform the schema names.
    let wrongs: Vec<(&str, Value)> = vec![
        ("grantedCapabilities", json!(["userShell"])),
        ("experimentalApi", json!(true)),
        ("museHome", json!("sim/data")),
        ("sessionDurability", json!("ephemeral")),
        (
            "schema",
            json!({"version": 2, "fingerprint": format!("sha256:{}", "0a".repeat(32))}),
        ),
        ("schema", json!({"version": 1, "fingerprint": "sha256:abc"})),
        ("platformOs", json!("windows")),
    ];
    // The last case is the right answer itself.
    for case in 0..=wrongs.len() {
        let legal = case == wrongs.len();
        let mut h = H::default();
        h.host_starts(1, true);
        h.opens(1, 1);
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                          "params": {"clientInfo": {"name": "t", "version": "1"}}});
        raw_recv(&mut h, &init.to_string());
        let mut ok = init_ok(json!(0), true);
        if let Some((member, wrong)) = wrongs.get(case) {
            ok["result"][*member] = wrong.clone();
        }
        h.send(ok);
        judged(&h, legal, "admission-decision");
    }
}

#[test]
fn admission_decision_an_error_off_the_table() {
    // PROTOCOL.md 3: each code carries its kind; `retryable` is the
    // code's default unless this host says otherwise (only
    // `storageUnavailable`); an `internal` error with no reason the host
    // names is a bug. The same refused line, answered each way.
    let line = json!({"jsonrpc": "2.0", "id": "b", "method": "state/update",
                      "params": {"commandId": cid(9), "sessionId": S, "expectedRevision": "0", "set": {}}})
    .to_string();
    let answer = |code: i64, data: Value| json!({"jsonrpc": "2.0", "id": "b", "error": {"code": code, "message": "m", "data": data}});
    for (a, legal) in [
        (
            answer(
                -32602,
                json!({"kind": "invalidParams", "field": "expectedRevision"}),
            ),
            true,
        ),
        (
            answer(
                -32602,
                json!({"kind": "invalidParams", "field": "expectedRevision", "retryable": false}),
            ),
            true,
        ),
        (
            answer(
                -32602,
                json!({"kind": "invalidParams", "field": "expectedRevision", "retryable": true}),
            ),
            false,
        ),
        (
            json!({"jsonrpc": "2.0", "id": "b", "error": {"code": -32602,
                   "data": {"kind": "invalidParams", "field": "expectedRevision"}}}),
            false,
        ),
    ] {
        a_bad_line_answered(&line, a, legal);
    }
    // An `internal` error without a reason this host names, answering a
    // well-formed read.
    for legal in [true, false] {
        let mut h = H::new();
        h.start();
        h.recv(7, "approval/listPending", json!({"sessionId": S}));
        h.send(if legal {
            json!({"jsonrpc": "2.0", "id": 7, "result": {"approvals": [], "userInputs": []}})
        } else {
            answer(-32603, json!({"kind": "internal"}))
                .as_object()
                .cloned()
                .map(|mut o| {
                    o.insert("id".into(), json!(7));
                    Value::Object(o)
                })
                .unwrap()
        });
        judged(&h, legal, "admission-decision");
    }
}

/// Three durable updates; a backward `view/page` of limit 1 from the last
/// one's cursor (request 9), received before the log rots (or after, with
/// `rot_first`); the rot, then a reload of the damaged log by the same
/// host (its lease released, granted, released); then the page's answer,
/// `right` or one event off.
fn paged_around_a_rot(rot_first: bool, right: bool) -> H {
    let (mut h, events) = three_updates();
    let first = h.n - 2;
    let rot = |h: &mut H| {
        h.push(
            Actor::Disk,
            What::BitRot {
                session: S.into(),
                offset: 20,
            },
        );
        for grant in [false, true, false] {
            let session = S.to_string();
            h.host(if grant {
                What::LeaseGrant { inc: 1, session }
            } else {
                What::LeaseRelease { inc: 1, session }
            });
        }
    };
    if rot_first {
        rot(&mut h);
    }
    h.recv(
        9,
        "view/page",
        json!({"sessionId": S, "limit": 1, "direction": "backward", "cursor": cursor(first + 2)}),
    );
    if !rot_first {
        rot(&mut h);
    }
    let k = if right { 1 } else { 0 };
    h.answer(
        9,
        json!({"events": [events[k].clone()], "nextCursor": cursor(first + k as u64)}),
    );
    h
}

#[test]
fn log_integrity_a_page_the_holder_had_before_the_rot_sent_after_a_failed_reload() {
    // bitrot seed 727: a page the holder received before its log rotted
    // may have been answered from its memory then and sent later, after
    // a reload of the damaged log failed; it must be the history as it
    // was. A page received after the rot is read from the damaged log.
    clean(&paged_around_a_rot(false, true));
    caught(&paged_around_a_rot(false, false), "read-consistency");
    caught(&paged_around_a_rot(true, true), "log-integrity");
}

/// Three durable updates, then a fourth (request 12) whose records the
/// holder appends before its log rots (`written_first`) or after a
/// reload that came after the rot; synced, then answered and its event
/// sent after the session was released and granted again.
fn updated_around_a_rot(written_first: bool) -> H {
    let (mut h, _) = three_updates();
    let reload = |h: &mut H| {
        for grant in [false, true] {
            let session = S.to_string();
            h.host(if grant {
                What::LeaseGrant { inc: 1, session }
            } else {
                What::LeaseRelease { inc: 1, session }
            });
        }
    };
    let rot = |h: &mut H| {
        h.push(
            Actor::Disk,
            What::BitRot {
                session: S.into(),
                offset: 20,
            },
        )
    };
    if !written_first {
        rot(&mut h);
        reload(&mut h);
    }
    let c = cid(14);
    let set = json!({"a": 3});
    h.recv(
        12,
        "state/update",
        json!({"commandId": c, "sessionId": S, "expectedRevision": 3, "set": set}),
    );
    let ack = json!({"commandId": c, "status": "accepted", "revision": 4});
    let received = h.received(
        &c,
        "state/update",
        json!({"sessionId": S, "expectedRevision": 3, "set": set}),
        json!({"result": ack}),
    );
    let (e, p) = h.event(
        "state/updated",
        json!({"revision": 4, "set": set, "commandId": c}),
        Some(&c),
    );
    let settled = h.settled(&c);
    h.append(vec![received, e, settled]);
    if written_first {
        rot(&mut h);
    }
    h.sync();
    if written_first {
        reload(&mut h);
    }
    h.answer(12, ack);
    h.notify("state/updated", &p);
    h
}

#[test]
fn log_integrity_an_intake_written_before_the_rot_answered_after_a_reload() {
    // bitrot seed 117 (with lines cut just before their newline): the
    // holder wrote a queued command's intake just before its log rotted;
    // the sync came after, then a same-instant release and grant (a
    // resume's reload, which finds the damage), then the answer. It was
    // decided from memory before the damage. One decided by a load after
    // the damage must be refused.
    clean(&updated_around_a_rot(true));
    caught(&updated_around_a_rot(false), "log-integrity");
}

/// A started turn whose user message carries `item_id`.
fn turn_with_item_id(item_id: &str) -> H {
    let mut h = H::new();
    h.start();
    let (ack, recs, [p1, p2]) = h.turn_begun_with_item(2, 5, "hi", item_id);
    h.append(recs);
    h.sync();
    h.answer(2, ack);
    h.notify("turn/started", &p1);
    h.notify("item/completed", &p2);
    h
}

#[test]
fn id_minting_an_item_id_not_from_the_host_clock() {
    // PROTOCOL.md 2: item and approval ids are UUIDv7s from the host's
    // injected clock: not another version, not seconds, not ahead.
    let v7_at = |ms: u64| {
        format!(
            "{:08x}-{:04x}-7abc-8def-000000000001",
            ms >> 16,
            ms & 0xffff
        )
    };
    for (id, legal) in [
        (cid(1005), true),
        (v7_at(T0 + 1), true),
        ("0198f0aa-1111-4000-8000-000000000001".to_string(), false),
        ("i5".to_string(), false),
        (v7_at(T0 / 1000), false),
        (v7_at(T0 + 3_600_000), false),
    ] {
        judged(&turn_with_item_id(&id), legal, "id-minting");
    }
}

#[test]
fn id_minting_a_session_id_the_host_minted_not_a_uuid_v7() {
    // PROTOCOL.md 2: a start without a sessionId gets one the host mints,
    // a UUIDv7 (here at an ephemeral host, which writes no log).
    for (sid, legal) in [
        (S.to_string(), true),
        ("019885c4-e838-4000-8000-0000000000aa".to_string(), false),
        ("session-1".to_string(), false),
    ] {
        let mut h = H::default();
        h.host_starts(1, false);
        h.connects(1, 1);
        h.recv_on(1, 1, "session/start", json!({"commandId": cid(5)}));
        let mut session = h.session_obj(h.now(), 0, None);
        session["sessionId"] = json!(sid);
        session["path"] = json!(format!("/sim/data/sessions/{sid}/session.log"));
        h.send_on(1, json!({"jsonrpc": "2.0", "id": 1, "result": {"session": session, "viewCursor": format!("v:{sid}:0")}}));
        judged(&h, legal, "id-minting");
    }
}

#[test]
fn admission_decision_a_notification_without_its_host_clock_time() {
    // PROTOCOL.md 4.5: frames carry `emittedAtMs` from the host clock: an
    // event without it, in seconds, or ahead of its send is wrong.
    for (emitted, legal) in [
        (None, true),
        (Some(Value::Null), false),
        (Some(json!((T0 + 10) / 1000)), false),
        (Some(json!(T0 + 3_600_000)), false),
    ] {
        let mut h = H::new();
        h.start();
        h.emitted = emitted;
        h.update(2, 11, 0, json!({"a": 1}));
        judged(&h, legal, "admission-decision");
    }
}
