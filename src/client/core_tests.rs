//! Unit tests of the client core: each drives a [`ClientCore`] with
//! scripted server lines and virtual time, through one [`Script`] helper.

use serde_json::{json, Value};

use super::*;
use crate::client::events::TurnTerminal;
use crate::client::outcome::RejectReason;
use crate::proto::ids::is_uuid_v7;

const SID: &str = "0198f0aa-1111-7000-8000-0000000000aa";
const T0: u64 = 1_754_590_931_000;

fn sid() -> SessionId {
    SessionId::parse(SID).expect("sid")
}

/// A core, a virtual clock, and every frame it sent on each link.
struct Script {
    core: ClientCore,
    now: u64,
    /// Frames sent on the current link, in order.
    sent: Vec<Value>,
    /// Frames sent on earlier links.
    old: Vec<Value>,
    closes: usize,
    done: Vec<Completion>,
    events: Vec<ClientEvent>,
}

fn entropy() -> Box<dyn Entropy + Send> {
    let mut x: u128 = 0x0123_4567_89AB_CDEF_FEDC_BA98_7654_3210;
    Box::new(move || {
        x = x
            .wrapping_mul(0x2360_ED05_1FC6_5DA4_4385_DF64_9FCC_F645)
            .wrapping_add(1);
        x
    })
}

impl Script {
    fn new() -> Script {
        let cfg = ClientConfig {
            client_name: "conformance".into(),
            client_version: "0.0.0".into(),
            request_timeout_ms: 3_000,
            ..ClientConfig::default()
        };
        Script {
            core: ClientCore::new(cfg, entropy()),
            now: T0,
            sent: Vec::new(),
            old: Vec::new(),
            closes: 0,
            done: Vec::new(),
            events: Vec::new(),
        }
    }

    fn drain(&mut self) {
        while let Some(o) = self.core.poll_output() {
            match o {
                Output::Send(bytes) => {
                    assert_eq!(bytes.last(), Some(&b'\n'));
                    for l in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                        self.sent
                            .push(serde_json::from_slice(l).expect("the client sends JSON"));
                    }
                }
                Output::CloseLink => {
                    self.closes += 1;
                    self.old.append(&mut self.sent);
                }
            }
        }
        while let Some(c) = self.core.poll_completion() {
            self.done.push(c);
        }
        while let Some(e) = self.core.poll_event() {
            self.events.push(e);
        }
    }

    /// A new link, handshake answered with `durability`.
    fn link(&mut self, durability: &str) {
        self.old.append(&mut self.sent);
        self.core.handle_connected(self.now);
        self.drain();
        let init = self.request("initialize");
        self.answer(
            &init,
            json!({"sessionDurability": durability, "serverInfo": {"name": "t", "version": "0"}}),
        );
        let n = self
            .sent
            .iter()
            .position(|f| f["method"] == "initialize")
            .expect("init");
        assert_eq!(
            self.sent[n + 1]["method"],
            "initialized",
            "right after the answer"
        );
    }

    fn drop_link(&mut self) {
        self.core.handle_disconnected(self.now);
        self.drain();
        self.old.append(&mut self.sent);
    }

    fn server(&mut self, v: Value) {
        let mut line = serde_json::to_vec(&v).expect("json");
        line.push(b'\n');
        self.core.handle_bytes(self.now, &line);
        self.drain();
    }

    fn answer(&mut self, req: &Value, result: Value) {
        self.server(json!({"jsonrpc": "2.0", "id": req["id"], "result": result}));
    }

    fn fail(&mut self, req: &Value, code: i64, data: Value) {
        self.server(json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": code, "message": "m", "data": data}}));
    }

    fn advance(&mut self, ms: u64) {
        let until = self.now + ms;
        while let Some(t) = self.core.poll_timeout() {
            if t > until {
                break;
            }
            self.now = self.now.max(t);
            self.core.handle_timeout(self.now);
            self.drain();
        }
        self.now = until;
    }

    /// The last frame sent on the current link with `method`.
    fn request(&self, method: &str) -> Value {
        self.sent
            .iter()
            .rev()
            .find(|f| f["method"] == method)
            .cloned()
            .unwrap_or_else(|| panic!("no {method} sent; sent: {:#?}", self.sent))
    }

    /// A `session/read` of the session, submitted and sent: its handle
    /// and the request frame.
    fn sent_read(&mut self) -> (ReadHandle, Value) {
        let h = self
            .core
            .read(self.now, ReadSpec::SessionRead { session_id: sid() })
            .expect("read");
        self.drain();
        (h, self.request("session/read"))
    }

    fn count(&self, method: &str) -> usize {
        self.sent.iter().filter(|f| f["method"] == method).count()
    }

    fn submit(&mut self, spec: CommandSpec) -> (CommandHandle, CommandId) {
        let r = self.core.submit(self.now, &spec).expect("submit");
        self.drain();
        r
    }

    fn outcome(&self, h: CommandHandle) -> Option<&CommandOutcome> {
        self.done.iter().find_map(|c| match c {
            Completion::Command {
                handle, outcome, ..
            } if *handle == h => Some(outcome),
            _ => None,
        })
    }

    /// A session started on the current link; returns its cursor `:0`.
    fn started_session(&mut self) {
        let (h, _) = self.submit(CommandSpec::SessionStart {
            session_id: Some(sid()),
            workspace_root: None,
        });
        let req = self.request("session/start");
        self.answer(
            &req,
            json!({"session": {"sessionId": SID}, "viewCursor": format!("v:{SID}:0")}),
        );
        assert!(matches!(self.outcome(h), Some(CommandOutcome::Accepted(_))));
    }

    fn event(&mut self, method: &str, n: &str, mut params: Value) {
        params["sessionId"] = json!(SID);
        params["viewCursor"] = json!(format!("v:{SID}:{n}"));
        if !n.contains('.') {
            params["sourceRange"] = json!({"stream": {"kind": "run", "id": "x"}});
        }
        self.server(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }
}

fn turn_start(text: &str) -> CommandSpec {
    CommandSpec::TurnStart {
        session_id: sid(),
        text: text.into(),
        if_busy: None,
    }
}

#[test]
fn nothing_but_the_handshake_goes_out_before_the_initialize_answer() {
    let mut s = Script::new();
    s.core.handle_connected(s.now);
    s.drain();
    s.submit(CommandSpec::SessionStart {
        session_id: None,
        workspace_root: None,
    });
    assert_eq!(s.sent.len(), 1, "{:?}", s.sent);
    assert_eq!(s.sent[0]["method"], "initialize");
    assert_eq!(s.sent[0]["id"], json!(1));
    let init = s.sent[0].clone();
    s.answer(&init, json!({}));
    let methods: Vec<&str> = s
        .sent
        .iter()
        .map(|f| f["method"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(methods, ["initialize", "initialized", "session/start"]);
    assert!(is_uuid_v7(
        s.sent[2]["params"]["commandId"].as_str().expect("an id")
    ));
    assert_eq!(
        s.core.durability(),
        Some(Durability::Durable),
        "absent reads as durable"
    );
}

#[test]
fn a_timeout_resends_the_same_command_id_and_two_in_a_row_replace_the_link() {
    let mut s = Script::new();
    s.link("durable");
    let (h, id) = s.submit(CommandSpec::SessionStart {
        session_id: None,
        workspace_root: None,
    });
    s.advance(3_000);
    assert_eq!(s.count("session/start"), 2);
    let ids: Vec<&Value> = s
        .sent
        .iter()
        .filter(|f| f["method"] == "session/start")
        .map(|f| &f["params"]["commandId"])
        .collect();
    assert!(ids.iter().all(|i| **i == json!(id.as_str())), "{ids:?}");
    assert_ne!(
        s.sent[2]["id"], s.sent[3]["id"],
        "a new request id per send"
    );
    s.advance(3_000);
    assert_eq!(s.closes, 1, "two timeouts in a row: the link is replaced");
    assert!(s.outcome(h).is_none(), "no outcome is invented");
    s.link("durable");
    let again = s.request("session/start");
    assert_eq!(again["params"]["commandId"], json!(id.as_str()));
    s.answer(
        &again,
        json!({"session": {"sessionId": SID}, "viewCursor": "c0"}),
    );
    assert!(matches!(s.outcome(h), Some(CommandOutcome::Accepted(_))));
}

#[test]
fn after_a_reconnect_the_session_resumes_from_its_last_durable_cursor_then_replays() {
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    s.event("turn/started", "1", json!({"turnId": "t1"}));
    s.event("item/delta", "1.1", json!({"itemId": "i", "delta": "x"}));
    let (h, id) = s.submit(turn_start("hello"));
    assert_eq!(
        s.request("turn/start")["params"]["commandId"],
        json!(id.as_str())
    );
    s.drop_link();
    s.link("durable");
    // The turn waits for the session to be loaded on this link.
    assert_eq!(s.count("turn/start"), 0);
    let resume = s.request("session/resume");
    assert_eq!(
        resume["params"]["cursor"],
        json!(format!("v:{SID}:1")),
        "not the ephemeral 1.1"
    );
    assert_ne!(resume["params"]["commandId"], json!(id.as_str()));
    s.answer(
        &resume,
        json!({"session": {"sessionId": SID}, "viewCursor": format!("v:{SID}:3"), "history": {"mode": "none", "items": null, "snapshot": null, "noneReason": "cursorSuffix"}, "pendingRequests": []}),
    );
    let replay = s.request("turn/start");
    assert_eq!(replay["params"]["commandId"], json!(id.as_str()));
    assert_eq!(
        replay["params"]["input"],
        json!([{"type": "text", "text": "hello"}])
    );
    assert!(s
        .events
        .iter()
        .any(|e| matches!(e, ClientEvent::Resumed { snapshot: None, .. })));
    // The suffix after cursor 1 has not streamed yet: the cursor stays 1.
    assert_eq!(
        s.core.last_cursor(&sid()),
        Some(format!("v:{SID}:1").as_str())
    );
    s.answer(&replay, json!({"commandId": id.as_str(), "status": "accepted", "turnId": id.as_str(), "startedNewTurn": false, "disposition": "queued"}));
    let ack = s
        .outcome(h)
        .and_then(CommandOutcome::ack)
        .expect("accepted");
    assert_eq!(ack.turn_id().map(TurnId::as_str), Some(id.as_str()));
}

#[test]
fn an_ephemeral_hosts_ids_are_never_replayed_after_it_died() {
    let mut s = Script::new();
    s.link("ephemeral");
    s.started_session();
    let (h, id) = s.submit(turn_start("work"));
    let (start_h, start_id) = s.submit(CommandSpec::SessionStart {
        session_id: None,
        workspace_root: None,
    });
    s.drop_link();
    // The unanswered start is given up at once.
    assert!(matches!(
        s.outcome(start_h),
        Some(CommandOutcome::Error(ErrorInfo {
            kind: ErrorKind::HostLost { ever_sent: true },
            ..
        }))
    ));
    s.link("ephemeral");
    let resume = s.request("session/resume");
    s.fail(&resume, -32020, json!({"kind": "sessionNotFound"}));
    assert!(matches!(
        s.outcome(h),
        Some(CommandOutcome::Error(ErrorInfo {
            kind: ErrorKind::HostLost { ever_sent: true },
            ..
        }))
    ));
    assert!(s
        .events
        .iter()
        .any(|e| matches!(e, ClientEvent::SessionLost { .. })));
    s.advance(60_000);
    let replayed: Vec<&Value> = s
        .sent
        .iter()
        .filter(|f| {
            let c = &f["params"]["commandId"];
            *c == json!(id.as_str()) || *c == json!(start_id.as_str())
        })
        .collect();
    assert!(replayed.is_empty(), "replayed at a new host: {replayed:?}");
    // Later commands for the lost session end at once, unsent.
    let (h2, _) = s.submit(turn_start("again"));
    assert!(matches!(s.outcome(h2), Some(CommandOutcome::Error(_))));
    assert_eq!(s.count("turn/start"), 0);
}

#[test]
fn an_ephemeral_session_still_held_by_the_same_host_is_resumed_and_replayed() {
    let mut s = Script::new();
    s.link("ephemeral");
    s.started_session();
    let (_, id) = s.submit(turn_start("work"));
    s.drop_link();
    s.link("ephemeral");
    let resume = s.request("session/resume");
    s.answer(
        &resume,
        json!({"session": {"sessionId": SID}, "viewCursor": "c", "history": {"mode": "none"}}),
    );
    assert_eq!(
        s.request("turn/start")["params"]["commandId"],
        json!(id.as_str())
    );
}

#[test]
fn rejections_are_terminal_unknown_reasons_included_and_abandoned_is_reported() {
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    for reason in ["a_reason_from_the_future", "abandoned", "stale_revision"] {
        let (h, id) = s.submit(turn_start(reason));
        let req = s.request("turn/start");
        s.fail(
            &req,
            -32030,
            json!({"kind": "commandRejected", "commandId": id.as_str(), "reason": reason}),
        );
        let r = s
            .outcome(h)
            .and_then(CommandOutcome::rejection)
            .expect("rejected");
        assert_eq!(r.reason, RejectReason::parse(reason));
        s.advance(30_000);
        let sends = s
            .sent
            .iter()
            .filter(|f| f["params"]["commandId"] == json!(id.as_str()))
            .count();
        assert_eq!(sends, 1, "{reason}: a rejection is never retried");
    }
}

#[test]
fn retryable_errors_are_retried_with_the_same_id_after_a_backoff() {
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    let (h, id) = s.submit(turn_start("x"));
    let req = s.request("turn/start");
    s.fail(&req, -32001, json!({"kind": "overloaded"}));
    assert_eq!(s.count("turn/start"), 1, "not before the backoff");
    s.advance(1_000);
    assert_eq!(s.count("turn/start"), 2);
    let req = s.request("turn/start");
    assert_eq!(req["params"]["commandId"], json!(id.as_str()));
    s.fail(
        &req,
        -32603,
        json!({"kind": "internal", "reason": "storageUnavailable", "retryable": true}),
    );
    s.advance(1_000);
    let req = s.request("turn/start");
    assert_eq!(s.count("turn/start"), 3);
    s.fail(
        &req,
        -32602,
        json!({"kind": "invalidParams", "field": "input"}),
    );
    assert!(matches!(
        s.outcome(h),
        Some(CommandOutcome::Error(ErrorInfo {
            kind: ErrorKind::InvalidParams { .. },
            ..
        }))
    ));
}

#[test]
fn session_not_loaded_reloads_the_session_then_resends_the_same_id() {
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    s.event("session/closed", "2", json!({"reason": "idle"}));
    let (_, id) = s.submit(turn_start("x"));
    // The host said it unloaded the session: reload first.
    assert_eq!(s.count("turn/start"), 0);
    let resume = s.request("session/resume");
    assert_eq!(resume["params"]["cursor"], json!(format!("v:{SID}:2")));
    s.answer(
        &resume,
        json!({"session": {"sessionId": SID}, "viewCursor": "c", "history": {"mode": "none"}}),
    );
    let req = s.request("turn/start");
    // Unloaded again behind our back.
    s.fail(&req, -32024, json!({"kind": "sessionNotLoaded"}));
    assert_eq!(s.count("session/resume"), 2, "a reload at once");
    let resume = s.request("session/resume");
    s.answer(
        &resume,
        json!({"session": {"sessionId": SID}, "viewCursor": "c", "history": {"mode": "none"}}),
    );
    assert_eq!(s.count("turn/start"), 1, "not before the backoff");
    s.advance(1_000);
    assert_eq!(
        s.request("turn/start")["params"]["commandId"],
        json!(id.as_str())
    );
    assert_eq!(s.count("turn/start"), 2);
}

#[test]
fn an_unknown_cursor_reloads_from_a_snapshot() {
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    s.drop_link();
    s.link("durable");
    let resume = s.request("session/resume");
    assert!(resume["params"].get("cursor").is_some());
    s.fail(
        &resume,
        -32011,
        json!({"kind": "notFound", "reason": "missingAnchor"}),
    );
    let resume = s.request("session/resume");
    assert!(resume["params"].get("cursor").is_none(), "{resume}");
    let snap = json!({"schemaVersion": 1, "viewCursor": "v:s:9", "state": {"activeTurn": {"turnId": "t9"}, "revision": 4}});
    s.answer(&resume, json!({"session": {"sessionId": SID}, "viewCursor": "v:s:9", "history": {"mode": "snapshot", "snapshot": snap}}));
    assert!(s.events.iter().any(|e| matches!(
        e,
        ClientEvent::Resumed {
            snapshot: Some(_),
            ..
        }
    )));
    assert_eq!(s.core.last_cursor(&sid()), Some("v:s:9"));
    assert_eq!(s.core.last_revision(&sid()), Some(4));
}

#[test]
fn an_id_less_interrupt_names_the_running_turn() {
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    s.event(
        "turn/started",
        "1",
        json!({"turnId": "018f6a1e-9b3c-7c21-a54a-2f30bd3c9f10"}),
    );
    s.submit(CommandSpec::TurnInterrupt {
        session_id: sid(),
        turn_id: None,
    });
    assert_eq!(
        s.request("turn/interrupt")["params"]["turnId"],
        json!("018f6a1e-9b3c-7c21-a54a-2f30bd3c9f10")
    );
    s.event(
        "turn/completed",
        "2",
        json!({"turnId": "018f6a1e-9b3c-7c21-a54a-2f30bd3c9f10", "terminal": "cancelled"}),
    );
    s.submit(CommandSpec::TurnCancel {
        session_id: sid(),
        turn_id: None,
    });
    assert!(s.request("turn/cancel")["params"].get("turnId").is_none());
    let t = TurnId::new("018f6a1e-9b3c-7c21-a54a-2f30bd3c9f10").expect("t");
    assert_eq!(
        s.core.turn_end(&sid(), &t),
        Some(&TurnEnd::Completed {
            terminal: TurnTerminal::Cancelled,
            reason: None
        })
    );
}

#[test]
fn server_requests_get_an_empty_receipt_and_bad_lines_are_skipped() {
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    s.server(json!({"jsonrpc": "2.0", "id": 17, "method": "approval/request", "params": {"sessionId": SID, "approvalId": "a1"}}));
    assert_eq!(
        s.sent.last(),
        Some(&json!({"jsonrpc": "2.0", "id": 17, "result": {}}))
    );
    s.core
        .handle_bytes(s.now, b"this is not json\n{\"jsonrpc\":\"2.0\"}\n");
    s.drain();
    let bad = s
        .events
        .iter()
        .filter(|e| matches!(e, ClientEvent::BadFrame { .. }))
        .count();
    assert_eq!(bad, 2);
    assert!(s.core.is_ready(), "bad lines do not end the link");
}

#[test]
fn not_initialized_redoes_the_handshake_on_a_fresh_link() {
    let mut s = Script::new();
    s.link("durable");
    let (h, id) = s.submit(CommandSpec::SessionStart {
        session_id: None,
        workspace_root: None,
    });
    let req = s.request("session/start");
    s.fail(&req, -32600, json!({"kind": "notInitialized"}));
    assert_eq!(s.closes, 1);
    assert!(s.outcome(h).is_none());
    s.link("durable");
    assert_eq!(
        s.request("session/start")["params"]["commandId"],
        json!(id.as_str())
    );
}

#[test]
fn one_id_one_payload_unless_the_test_only_escape_hatch_is_used() {
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    let (h, id) = s.submit(turn_start("a"));
    let same = s
        .core
        .submit_with_id(s.now, id.clone(), turn_start("a").to_wire())
        .expect("same payload");
    assert_eq!(same, h, "a double submit joins the outstanding command");
    let other = s
        .core
        .submit_with_id(s.now, id.clone(), turn_start("b").to_wire());
    assert_eq!(other, Err(SubmitError::PayloadMismatch(id.clone())));
    let bad = s.core.submit_with_id(
        s.now,
        id.clone(),
        WireCommand {
            method: "turn/start".into(),
            params: serde_json::Map::new(),
        },
    );
    assert!(matches!(bad, Err(SubmitError::Invalid(_))));
    let mut p = turn_start("b").to_wire().params;
    p.insert("extra".into(), json!(1));
    let raw = s
        .core
        .submit_unchecked_for_tests(s.now, id.clone(), "turn/start", p)
        .expect("unchecked");
    s.drain();
    assert_ne!(raw, h);
    let conflict = s.request("turn/start");
    assert_eq!(conflict["params"]["commandId"], json!(id.as_str()));
    assert_eq!(conflict["params"]["input"][0]["text"], "b");
}

#[test]
fn session_in_use_is_retried_then_given_up_with_that_error() {
    let mut s = Script::new();
    s.core = ClientCore::new(
        ClientConfig {
            in_use_attempts_max: 4,
            in_use_attempts_per_link: 100,
            ..ClientConfig::default()
        },
        entropy(),
    );
    s.link("durable");
    let (h, _) = s.submit(CommandSpec::SessionResume {
        session_id: sid(),
        cursor: None,
        exclude_items: false,
    });
    for _ in 0..4 {
        let req = s.request("session/resume");
        s.fail(&req, -32021, json!({"kind": "sessionInUse"}));
        s.advance(10_000);
    }
    assert!(matches!(
        s.outcome(h),
        Some(CommandOutcome::Error(ErrorInfo {
            kind: ErrorKind::SessionInUse,
            ..
        }))
    ));
    assert_eq!(s.count("session/resume"), 4);
}

#[test]
fn forget_ends_the_wait_and_stops_resending() {
    let mut s = Script::new();
    s.link("durable");
    let (h, _) = s.submit(CommandSpec::SessionStart {
        session_id: None,
        workspace_root: None,
    });
    s.core.forget(h);
    s.drain();
    assert!(matches!(
        s.outcome(h),
        Some(CommandOutcome::Error(ErrorInfo {
            kind: ErrorKind::Forgotten,
            ..
        }))
    ));
    s.advance(30_000);
    assert_eq!(s.count("session/start"), 1);
    assert_eq!(s.core.pending_count(), 0);
}

#[test]
fn a_forgotten_command_says_whether_it_ever_went_out() {
    let message = |s: &Script, h| match s.outcome(h) {
        Some(CommandOutcome::Error(e)) if e.kind == ErrorKind::Forgotten => e.message.clone(),
        other => panic!("not forgotten: {other:?}"),
    };
    // No link yet: never sent.
    let mut s = Script::new();
    let (h, _) = s.submit(CommandSpec::SessionStart {
        session_id: None,
        workspace_root: None,
    });
    s.core.forget(h);
    s.drain();
    assert!(message(&s, h).contains("never sent"), "{}", message(&s, h));
    // Sent once: it may have taken effect.
    let mut s = Script::new();
    s.link("durable");
    let (h, _) = s.submit(CommandSpec::SessionStart {
        session_id: None,
        workspace_root: None,
    });
    assert_eq!(s.count("session/start"), 1);
    s.core.forget(h);
    s.drain();
    assert!(
        message(&s, h).contains("may have taken effect"),
        "{}",
        message(&s, h)
    );
}

#[test]
fn the_next_timeout_is_the_handshakes_then_the_requests() {
    let mut s = Script::new();
    let handshake = ClientConfig::default().handshake_timeout_ms;
    s.core.handle_connected(s.now);
    s.drain();
    assert_eq!(s.core.poll_timeout(), Some(T0 + handshake));
    s.now += 10;
    let init = s.request("initialize");
    s.answer(
        &init,
        json!({"sessionDurability": "durable", "serverInfo": {"name": "t", "version": "0"}}),
    );
    assert_eq!(s.core.poll_timeout(), None, "nothing outstanding");
    s.submit(CommandSpec::SessionStart {
        session_id: None,
        workspace_root: None,
    });
    assert_eq!(s.core.poll_timeout(), Some(T0 + 10 + 3_000));
}

#[test]
fn a_followed_session_is_resumed_from_the_given_cursor() {
    let mut s = Script::new();
    s.link("durable");
    s.core.follow(s.now, sid(), Some(format!("v:{SID}:7")));
    s.drain();
    let resume = s.request("session/resume");
    assert_eq!(resume["params"]["sessionId"], json!(SID));
    assert_eq!(resume["params"]["cursor"], json!(format!("v:{SID}:7")));
}

#[test]
fn an_unfollowed_session_is_not_reloaded_on_the_next_link() {
    // Control: a session started here is reloaded on the next link.
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    s.drop_link();
    s.link("durable");
    s.drain();
    assert_eq!(s.count("session/resume"), 1, "sent: {:#?}", s.sent);
    // Unfollowed first, it is not.
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    s.core.unfollow(&sid());
    s.drop_link();
    s.link("durable");
    s.drain();
    assert_eq!(s.count("session/resume"), 0, "sent: {:#?}", s.sent);
}

#[test]
fn request_ids_on_a_link_are_distinct_and_increase() {
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    for k in 0..4 {
        s.submit(turn_start(&format!("t{k}")));
    }
    let ids: Vec<u64> = s
        .sent
        .iter()
        .filter(|f| f.get("method").is_some() && !f["id"].is_null())
        .map(|f| f["id"].as_u64().expect("a numeric id"))
        .collect();
    assert!(ids.len() >= 6, "initialize, start and four turns: {ids:?}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
}

#[test]
fn an_answer_completes_its_command_whatever_was_answered_before_it() {
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    let (a, _) = s.submit(turn_start("a"));
    let (b, _) = s.submit(CommandSpec::StateUpdate {
        session_id: sid(),
        expected_revision: 0,
        set: json!({"k": 1}).as_object().cloned().expect("an object"),
    });
    let (ra, rb) = (s.request("turn/start"), s.request("state/update"));
    s.answer(&ra, json!({"status": "accepted", "turnId": "t"}));
    assert!(matches!(s.outcome(a), Some(CommandOutcome::Accepted(_))));
    // The other request is still in flight: its answer completes it at
    // once, without a re-send.
    s.answer(&rb, json!({"status": "accepted", "revision": 1}));
    assert!(matches!(s.outcome(b), Some(CommandOutcome::Accepted(_))));
    assert_eq!(s.count("state/update"), 1);
}

#[test]
fn retry_delays_double_from_the_minimum_with_the_upper_half_random() {
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    s.submit(turn_start("x"));
    let cfg = ClientConfig::default();
    let mut jitters = Vec::new();
    for attempt in 1..=7u32 {
        let req = s.request("turn/start");
        s.fail(&req, -32001, json!({"kind": "overloaded"}));
        let exp = (cfg.retry_backoff_min_ms << attempt).min(cfg.retry_backoff_max_ms);
        let delay = s.core.poll_timeout().expect("a retry is due") - s.now;
        assert!(
            (exp / 2..=exp).contains(&delay),
            "attempt {attempt}: {delay} ms, not in {}..={exp}",
            exp / 2
        );
        jitters.push(delay - exp / 2);
        s.advance(delay);
        assert_eq!(s.count("turn/start"), attempt as usize + 1);
    }
    // The random part spreads over the upper half (its range is hundreds
    // of milliseconds and more), not over a millisecond or two: clients
    // that failed together must not retry together.
    assert!(jitters.iter().any(|j| *j > 2), "{jitters:?}");
}

#[test]
fn a_refused_submission_says_why() {
    let id = CommandId::parse("0198f0aa-1111-7000-8000-0000000000ab").expect("id");
    let texts = [
        SubmitError::Invalid(crate::proto::error::RpcError::invalid_params(
            "limit",
            "too large",
        ))
        .to_string(),
        SubmitError::PayloadMismatch(id.clone()).to_string(),
        SubmitError::TooManyPending.to_string(),
    ];
    assert!(
        texts[0].contains("invalid") && texts[0].contains("too large"),
        "{texts:?}"
    );
    assert!(texts[1].contains(id.as_str()), "{texts:?}");
    assert!(texts[2].contains("outstanding"), "{texts:?}");
}

#[test]
fn too_many_outstanding_requests_are_refused_not_queued() {
    let mut s = Script::new();
    s.core = ClientCore::new(
        ClientConfig {
            pending_max: 2,
            ..ClientConfig::default()
        },
        entropy(),
    );
    let spec = CommandSpec::SessionStart {
        session_id: None,
        workspace_root: None,
    };
    assert!(s.core.submit(s.now, &spec).is_ok());
    assert!(s
        .core
        .read(s.now, ReadSpec::SessionRead { session_id: sid() })
        .is_ok());
    assert_eq!(
        s.core.submit(s.now, &spec),
        Err(SubmitError::TooManyPending)
    );
}

#[test]
fn the_same_inputs_give_the_same_bytes() {
    let run = || {
        let mut s = Script::new();
        s.link("durable");
        s.started_session();
        s.submit(turn_start("a"));
        let req = s.request("turn/start");
        s.fail(&req, -32001, json!({"kind": "overloaded"}));
        s.advance(20_000);
        s.drop_link();
        s.link("durable");
        s.advance(20_000);
        (s.old, s.sent)
    };
    assert_eq!(run(), run());
}

#[test]
fn reads_are_resent_after_a_reconnect_and_complete_with_their_result() {
    let mut s = Script::new();
    s.link("durable");
    let h = s
        .core
        .read(s.now, ReadSpec::SessionRead { session_id: sid() })
        .expect("read");
    s.drain();
    assert_eq!(s.count("session/read"), 1);
    s.drop_link();
    s.link("durable");
    let req = s.request("session/read");
    s.answer(&req, json!({"viewCursor": "c"}));
    assert!(s.done.iter().any(|c| matches!(c, Completion::Read { handle, result: Ok(v) } if *handle == h && v["viewCursor"] == "c")));
}

#[test]
fn a_read_without_result_goes_and_heals_as_a_read_and_completes_with_null() {
    /// The same read, wanted or not, through an overload, a reconnect and
    /// an answer: what went out, the completion, the dump.
    fn run(unwanted: bool, result: &str) -> (Vec<Value>, Vec<Value>, Vec<Completion>, String) {
        let mut s = Script::new();
        s.link("durable");
        let spec = ReadSpec::SessionRead { session_id: sid() };
        let h = if unwanted {
            s.core.read_without_result(s.now, spec)
        } else {
            s.core.read(s.now, spec)
        }
        .expect("read");
        s.drain();
        let req = s.request("session/read");
        s.fail(&req, -32001, json!({"kind": "overloaded"}));
        s.advance(1_000);
        s.drop_link();
        s.link("durable");
        let req = s.request("session/read");
        let mut line = format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#,
            req["id"]
        );
        line.push('\n');
        s.core.handle_bytes(s.now, line.as_bytes());
        s.drain();
        assert!(s
            .done
            .iter()
            .all(|c| matches!(c, Completion::Read { handle, .. } if *handle == h)));
        let dump = s.core.state_dump();
        (s.old, s.sent, s.done, dump)
    }
    let big = r#"{"history":{"mode":"snapshot","snapshot":{"state":{"revision":3,"kv":{"a":[1,2,{"b":"\u00e9"}]}}}},"viewCursor":"c"}"#;
    let (old, sent, done, dump) = run(false, big);
    let (old_u, sent_u, done_u, dump_u) = run(true, big);
    assert_eq!((&old, &sent), (&old_u, &sent_u), "the same traffic");
    assert_eq!(
        dump,
        dump_u.replace("result_unwanted: true", "result_unwanted: false")
    );
    assert!(
        matches!(&done[..], [Completion::Read { result: Ok(v), .. }] if v["viewCursor"] == "c")
    );
    assert!(matches!(
        &done_u[..],
        [Completion::Read {
            result: Ok(Value::Null),
            ..
        }]
    ));
    // A result that is not JSON the reference reader accepts is a bad line
    // either way, and the read waits on.
    for bad in ["1e400", "{\"a\":tru}"] {
        let (_, _, done, _) = run(false, bad);
        let (_, _, done_u, _) = run(true, bad);
        assert!(done.is_empty() && done_u.is_empty(), "{bad}");
    }
}

#[test]
fn a_read_answered_with_a_command_rejection_fails_with_its_code() {
    // No host rejects a read as a command; if one did, the read fails
    // with the rejection's code and answer, not a made-up code.
    let mut s = Script::new();
    s.link("durable");
    let (h, req) = s.sent_read();
    let data = json!({"kind": "commandRejected", "reason": "queue_full"});
    s.fail(&req, -32030, data.clone());
    let err = s
        .done
        .iter()
        .find_map(|c| match c {
            Completion::Read {
                handle,
                result: Err(e),
            } if *handle == h => Some(e.clone()),
            _ => None,
        })
        .expect("the read failed");
    assert_eq!(err.code, -32030);
    // The data is the rejection's answer, as a command's would be.
    assert_eq!(err.data["error"]["data"], data);
}

#[test]
fn a_command_for_an_unknown_durable_session_ends_session_not_found() {
    let mut s = Script::new();
    s.link("durable");
    let (h, _) = s.submit(turn_start("x"));
    assert_eq!(s.count("turn/start"), 0, "the session is loaded first");
    let resume = s.request("session/resume");
    assert!(resume["params"].get("cursor").is_none());
    s.fail(&resume, -32020, json!({"kind": "sessionNotFound"}));
    assert!(matches!(
        s.outcome(h),
        Some(CommandOutcome::Error(ErrorInfo {
            kind: ErrorKind::SessionNotFound,
            ..
        }))
    ));
    assert_eq!(s.count("turn/start"), 0);
}

#[test]
fn a_lost_session_ends_its_own_commands_only() {
    let other = SessionId::parse("0198f0aa-1111-7000-8000-0000000000cc").expect("sid");
    let mut s = Script::new();
    s.link("durable");
    let (mine, _) = s.submit(turn_start("x"));
    let (theirs, _) = s.submit(CommandSpec::TurnStart {
        session_id: other.clone(),
        text: "y".into(),
        if_busy: None,
    });
    let resume = s
        .sent
        .iter()
        .find(|f| f["method"] == "session/resume" && f["params"]["sessionId"] == json!(SID))
        .cloned()
        .expect("a reload of the first session");
    assert!(s
        .sent
        .iter()
        .any(|f| f["method"] == "session/resume"
            && f["params"]["sessionId"] == json!(other.as_str())));
    s.fail(&resume, -32020, json!({"kind": "sessionNotFound"}));
    assert!(matches!(
        s.outcome(mine),
        Some(CommandOutcome::Error(ErrorInfo {
            kind: ErrorKind::SessionNotFound,
            ..
        }))
    ));
    assert!(
        s.outcome(theirs).is_none(),
        "the other session's command waits for its own reload"
    );
}

#[test]
fn the_raw_line_hatch_sends_as_is_only_on_a_ready_link() {
    let mut s = Script::new();
    assert!(!s.core.send_raw_line_for_tests(b"{}".to_vec()));
    s.link("durable");
    assert!(s
        .core
        .send_raw_line_for_tests(br#"{"jsonrpc":"2.0","id":"x","method":"nope"}"#.to_vec()));
    s.drain();
    assert_eq!(s.sent.last().expect("sent")["id"], "x");
    s.server(json!({"jsonrpc": "2.0", "id": "x", "error": {"code": -32601}}));
    assert!(s.done.is_empty(), "an untracked answer completes nothing");
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn frame() -> impl Strategy<Value = Value> {
        let id = prop_oneof![
            Just(Value::Null),
            (0u64..12).prop_map(|n| json!(n)),
            "[a-z]{0,3}".prop_map(Value::String),
        ];
        let any = prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z:0-9-]{0,12}".prop_map(Value::String),
            Just(
                json!({"session": {"sessionId": SID}, "viewCursor": 3, "history": {"mode": "snapshot", "snapshot": 7}})
            ),
            Just(json!({"code": -32030, "data": {"kind": "commandRejected", "reason": 5}})),
            Just(json!({"code": "x", "data": []})),
        ];
        let method = prop_oneof![
            Just("turn/started"),
            Just("turn/completed"),
            Just("item/completed"),
            Just("session/closed"),
            Just("approval/request"),
            Just("state/updated"),
            Just("x/y"),
        ];
        (id, any.clone(), any, method, 0u8..4).prop_map(|(id, a, b, m, shape)| match shape {
            0 => json!({"jsonrpc": "2.0", "id": id, "result": a}),
            1 => json!({"jsonrpc": "2.0", "id": id, "error": a}),
            2 => json!({"jsonrpc": "2.0", "method": m, "params": {"sessionId": SID, "turnId": a, "viewCursor": b, "sourceRange": {}, "item": a, "revision": b}}),
            _ => json!({"jsonrpc": "2.0", "id": id, "method": m, "params": a}),
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_never_panic(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..16)) {
            let mut s = Script::new();
            s.link("durable");
            s.started_session();
            s.submit(turn_start("x"));
            for c in chunks {
                s.core.handle_bytes(s.now, &c);
                s.drain();
            }
        }

        #[test]
        fn arbitrary_server_frames_never_panic_and_time_still_moves(frames in proptest::collection::vec(frame(), 0..24)) {
            let mut s = Script::new();
            s.link("ephemeral");
            s.started_session();
            s.submit(turn_start("x"));
            s.core.read(s.now, ReadSpec::SessionRead { session_id: sid() }).expect("read");
            for f in frames {
                s.server(f);
                s.advance(700);
                if !s.core.is_ready() {
                    s.link("durable");
                }
            }
            prop_assert!(s.core.pending_count() <= 1_024);
        }
    }
}

#[test]
fn an_overloaded_read_is_retried_after_a_backoff_not_at_once() {
    let mut s = Script::new();
    s.link("durable");
    let (h, req) = s.sent_read();
    s.fail(&req, -32001, json!({"kind": "overloaded"}));
    assert_eq!(s.count("session/read"), 1, "not at once");
    s.advance(1_000);
    assert_eq!(s.count("session/read"), 2);
    let req = s.request("session/read");
    s.answer(&req, json!({"viewCursor": "c"}));
    assert!(s
        .done
        .iter()
        .any(|c| matches!(c, Completion::Read { handle, result: Ok(_) } if *handle == h)));
}

#[test]
fn a_waiting_command_keeps_its_session_followed() {
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    s.drop_link();
    // Submitted while no link is up, then the session is unfollowed.
    let (_, id) = s.submit(turn_start("x"));
    s.core.unfollow(&sid());
    s.link("durable");
    let resume = s.request("session/resume");
    s.answer(
        &resume,
        json!({"session": {"sessionId": SID}, "viewCursor": "c", "history": {"mode": "none"}}),
    );
    assert_eq!(
        s.request("turn/start")["params"]["commandId"],
        json!(id.as_str())
    );
}

#[test]
fn a_reload_that_fails_for_good_is_reported_even_with_no_command_waiting() {
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    s.drop_link();
    s.link("durable");
    let resume = s.request("session/resume");
    s.fail(
        &resume,
        -32603,
        json!({"kind": "internal", "reason": "logCorrupt", "retryable": false}),
    );
    let ended: Vec<&ClientEvent> = s
        .events
        .iter()
        .filter(|e| matches!(e, ClientEvent::FollowEnded { .. }))
        .collect();
    assert_eq!(ended.len(), 1, "{:?}", s.events);
    let ClientEvent::FollowEnded {
        session_id,
        outcome,
    } = ended[0]
    else {
        unreachable!()
    };
    assert_eq!(*session_id, sid());
    assert!(matches!(outcome, CommandOutcome::Error(_)), "{outcome:?}");
    // No longer followed: a new link does not reload it (`sent` holds
    // what went out since the last request was taken).
    s.drop_link();
    s.link("durable");
    assert_eq!(s.count("session/resume"), 0);
}

#[test]
fn the_state_dump_tells_apart_states_that_answer_differently_and_only_those() {
    let at = |steps: usize| {
        let mut s = Script::new();
        s.link("durable");
        s.started_session();
        if steps >= 1 {
            s.submit(turn_start("a"));
        }
        if steps >= 2 {
            let req = s.request("turn/start");
            s.answer(
                &req,
                json!({"turnId": "0198f0aa-2222-7000-8000-0000000000bb"}),
            );
        }
        s.core.state_dump()
    };
    // The same inputs: the same dump, though the two cores are distinct.
    assert_eq!(at(0), at(0));
    assert_eq!(at(2), at(2));
    // A command waiting for its answer is state; so is its answer's arrival.
    assert_ne!(at(0), at(1));
    assert_ne!(at(1), at(2));
}

#[test]
fn the_inbound_tap_hands_over_exactly_the_notifications_the_core_parsed() {
    /// Drives the same bytes through a core with the tap `on`: what the
    /// tap held after each `handle_bytes`, the view events, the dump.
    fn run(on: bool) -> (Vec<Vec<InboundNotification>>, Vec<ViewEvent>, String) {
        let mut s = Script::new();
        s.core.set_inbound_tap(on);
        s.link("durable");
        s.started_session();
        // The handshake and the start were responses only.
        let mut taps = vec![std::iter::from_fn(|| s.core.poll_inbound()).collect()];
        s.events.clear();
        let started = json!({"jsonrpc": "2.0", "method": "turn/started", "params": {"sessionId": SID, "turnId": "0198f0aa-2222-7000-8000-0000000000bb", "viewCursor": format!("v:{SID}:1"), "sourceRange": {}}});
        let request = json!({"jsonrpc": "2.0", "id": 17, "method": "approval/request", "params": {"sessionId": SID, "approvalId": "a1"}});
        let no_params = json!({"jsonrpc": "2.0", "method": "host/unknownThing"});
        let mut first = serde_json::to_vec(&started).expect("json");
        first.push(b'\n');
        let req = serde_json::to_vec(&request).expect("json");
        let (head, tail) = req.split_at(req.len() / 2);
        first.extend_from_slice(head);
        // One whole notification, then half a request.
        s.core.handle_bytes(s.now, &first);
        s.drain();
        taps.push(std::iter::from_fn(|| s.core.poll_inbound()).collect());
        // The request's other half, a bad line, an answer to nothing, and
        // a notification without params ending in CRLF.
        let mut second = tail.to_vec();
        second.extend_from_slice(b"\nnot json\n{\"jsonrpc\":\"2.0\",\"id\":999,\"result\":{}}\n");
        second.extend_from_slice(&serde_json::to_vec(&no_params).expect("json"));
        second.extend_from_slice(b"\r\n");
        s.core.handle_bytes(s.now, &second);
        s.drain();
        taps.push(std::iter::from_fn(|| s.core.poll_inbound()).collect());
        assert_eq!(
            s.sent.last(),
            Some(&json!({"jsonrpc": "2.0", "id": 17, "result": {}})),
            "the request still gets its receipt"
        );
        let views = s
            .events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::View(v) => Some((**v).clone()),
                _ => None,
            })
            .collect();
        (taps, views, s.core.state_dump())
    }

    let (taps, views, dump) = run(true);
    let n = |id: Option<Value>, method: &str, params: Value| InboundNotification {
        id,
        method: method.into(),
        params,
    };
    assert_eq!(
        taps,
        vec![
            vec![],
            vec![n(
                None,
                "turn/started",
                json!({"sessionId": SID, "turnId": "0198f0aa-2222-7000-8000-0000000000bb", "viewCursor": format!("v:{SID}:1"), "sourceRange": {}})
            )],
            vec![
                n(
                    Some(json!(17)),
                    "approval/request",
                    json!({"sessionId": SID, "approvalId": "a1"})
                ),
                n(None, "host/unknownThing", Value::Null),
            ],
        ]
    );
    // Exactly what the core acted on: one view event per tapped frame,
    // same method, same params, same order.
    let tapped: Vec<_> = taps.concat();
    assert_eq!(views.len(), tapped.len());
    for (v, t) in views.iter().zip(&tapped) {
        assert_eq!((&v.method, &v.params), (&t.method, &t.params));
    }

    // Off (the default): nothing is held, and the core does the same.
    let (off_taps, off_views, off_dump) = run(false);
    assert!(off_taps.iter().all(Vec::is_empty));
    assert_eq!(off_views, views);
    assert_eq!(off_dump, dump, "the tap is not state");
    let mut s = Script::new();
    s.link("durable");
    s.started_session();
    s.event(
        "turn/started",
        "1",
        json!({"turnId": "0198f0aa-2222-7000-8000-0000000000bb"}),
    );
    assert_eq!(s.core.poll_inbound(), None);

    // Turned off, it drops what it held.
    let mut s = Script::new();
    s.core.set_inbound_tap(true);
    s.link("durable");
    s.started_session();
    s.event(
        "turn/started",
        "1",
        json!({"turnId": "0198f0aa-2222-7000-8000-0000000000bb"}),
    );
    s.core.set_inbound_tap(false);
    assert_eq!(s.core.poll_inbound(), None);
}
