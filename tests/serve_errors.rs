//! The error table of PROTOCOL.md section 3, row by row, as produced by a
//! real `msp serve` process over stdio and TCP; plus hostile input
//! (invalid UTF-8, deep nesting, huge numbers, over-limit frames, a client
//! that vanishes mid-frame).

mod common;

use common::{answer_value, code, kind, reason, start, v7, Client, Via};
use serde_json::{json, Value};

fn err_line(c: &mut Client, raw: &[u8]) -> Value {
    assert!(c.send_raw(raw));
    c.wait_for("an error with id null", |f| {
        f.get("error").is_some() && f["id"].is_null()
    })
}

#[test]
fn wire_and_handshake_errors_over_stdio() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, c) = start(
        dir.path(),
        Via::Stdio,
        &["--frame-limit-bytes", "4096"],
        &[],
    );
    let mut c = c.expect("stdio client");

    // Requests before the handshake: notInitialized, id echoed.
    let r = c.request("view/page", json!({"sessionId": v7(), "limit": 1}));
    assert_eq!((code(&r), kind(&r)), (-32600, "notInitialized"));

    // Not JSON, not UTF-8, too deep: -32700 with id null, connection kept.
    let r = err_line(&mut c, b"this is not json\n");
    assert_eq!((code(&r), kind(&r)), (-32700, "parseError"));
    let r = err_line(&mut c, b"\xff\xfe{\"a\":1}\n");
    assert_eq!(code(&r), -32700);

    // Batch and bad ids: -32600.
    let r = err_line(
        &mut c,
        b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}]\n",
    );
    assert_eq!((code(&r), kind(&r)), (-32600, "invalidRequest"));
    let r = err_line(
        &mut c,
        b"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"initialize\",\"params\":{}}\n",
    );
    assert_eq!(code(&r), -32600);
    let r = err_line(
        &mut c,
        b"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"initialize\",\"params\":{}}\n",
    );
    assert_eq!(code(&r), -32600);
    let r = err_line(
        &mut c,
        b"{\"jsonrpc\":\"2.0\",\"id\":123456789012345678901234567890,\"method\":\"initialize\",\"params\":{}}\n",
    );
    assert_eq!(
        code(&r),
        -32600,
        "an id beyond 64 bits is not an integer id"
    );

    // Over the frame limit: -32002, id null, limitBytes; the connection
    // keeps working on the next line.
    let mut big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"x\",\"params\":{{\"p\":\"{}\"}}}}",
        "a".repeat(10_000)
    )
    .into_bytes();
    big.push(b'\n');
    let r = err_line(&mut c, &big);
    assert_eq!((code(&r), kind(&r)), (-32002, "inputTooLarge"));
    assert_eq!(r["error"]["data"]["limitBytes"], json!(4096));

    // Handshake: initialize, a second initialize, a request before
    // `initialized`.
    let init = c.request(
        "initialize",
        json!({"clientInfo": {"name": "t", "version": "1"}}),
    );
    let home = std::fs::canonicalize(dir.path()).expect("canonical");
    assert_eq!(
        init["result"]["museHome"],
        json!(home.to_str().expect("utf-8"))
    );
    assert_eq!(init["result"]["sessionDurability"], json!("durable"));
    assert_eq!(init["result"]["grantedCapabilities"], json!([]));
    let r = c.request(
        "initialize",
        json!({"clientInfo": {"name": "t", "version": "1"}}),
    );
    assert_eq!((code(&r), kind(&r)), (-32600, "alreadyInitialized"));
    let r = c.request("session/read", json!({"sessionId": v7()}));
    assert_eq!(kind(&r), "notInitialized", "initialize alone is not enough");
    assert!(c.send(&json!({"jsonrpc": "2.0", "method": "initialized"})));

    // Method and params.
    let r = c.request("no/such", json!({}));
    assert_eq!((code(&r), kind(&r)), (-32601, "methodNotFound"));
    let sid = v7();
    let r = c.request("session/start", json!({"sessionId": sid}));
    assert_eq!(
        (code(&r), r["error"]["data"]["field"].as_str()),
        (-32602, Some("commandId"))
    );
    let v4 = "6f1c2a4e-9b3c-4c21-a54a-00000000000a"; // version 4
    let r = c.request("session/start", json!({"commandId": v4, "sessionId": sid}));
    assert_eq!(
        (code(&r), r["error"]["data"]["field"].as_str()),
        (-32602, Some("commandId"))
    );
    let started = c.start_session(&sid);
    assert!(started["result"]["session"].is_object(), "{started}");
    let r = c.request(
        "turn/cancel",
        json!({"commandId": v7(), "sessionId": sid, "retract": true}),
    );
    assert_eq!(
        (code(&r), r["error"]["data"]["field"].as_str()),
        (-32602, Some("retract"))
    );
    let r = c.request(
        "turn/start",
        json!({"commandId": v7(), "sessionId": sid, "input": []}),
    );
    assert_eq!(code(&r), -32602);

    // Huge numbers as expectedRevision: refused with a typed error, never
    // applied, host alive.
    let raw = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"state/update\",\"params\":{{\"commandId\":\"{}\",\"sessionId\":\"{sid}\",\"expectedRevision\":123456789012345678901234567890,\"set\":{{}}}}}}\n",
        v7()
    );
    assert!(c.send_raw(raw.as_bytes()));
    let r = c.response(&json!(77));
    assert_eq!(
        (code(&r), r["error"]["data"]["field"].as_str()),
        (-32602, Some("expectedRevision"))
    );
    let raw = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":78,\"method\":\"state/update\",\"params\":{{\"commandId\":\"{}\",\"sessionId\":\"{sid}\",\"expectedRevision\":1e400,\"set\":{{}}}}}}\n",
        v7()
    );
    assert!(c.send_raw(raw.as_bytes()));
    let r = c.wait_for("an answer to 1e400", |f| {
        f.get("error").is_some() && (f["id"] == json!(78) || f["id"].is_null())
    });
    assert!(
        [-32700, -32602].contains(&code(&r)),
        "1e400 is out of every integer range: {r}"
    );
    let read = c.request("session/read", json!({"sessionId": sid}));
    assert_eq!(
        read["result"]["history"]["snapshot"]["state"]["revision"],
        json!(0),
        "nothing applied"
    );

    // Session rows.
    let r = c.request(
        "turn/start",
        json!({"commandId": v7(), "sessionId": v7(), "input": [{"type": "text", "text": "x"}]}),
    );
    assert_eq!((code(&r), kind(&r)), (-32020, "sessionNotFound"));
    let r = c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": v7()}),
    );
    assert_eq!(code(&r), -32020);
    let r = c.request(
        "view/subscribe",
        json!({"sessionId": sid, "after": format!("v:{sid}:999")}),
    );
    assert_eq!((code(&r), reason(&r)), (-32011, "missingAnchor"));
    let r = c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid, "cursor": format!("v:{}:0", v7())}),
    );
    assert_eq!((code(&r), reason(&r)), (-32011, "missingAnchor"));

    // commandRejected with several reasons, each replayed identically.
    let up = v7();
    let ok = c.request(
        "state/update",
        json!({"commandId": up, "sessionId": sid, "expectedRevision": 0, "set": {"a": 1}}),
    );
    assert_eq!(ok["result"]["revision"], json!(1));
    let conflict = c.request(
        "state/update",
        json!({"commandId": up, "sessionId": sid, "expectedRevision": 0, "set": {"a": 2}}),
    );
    assert_eq!(
        (code(&conflict), reason(&conflict)),
        (-32030, "command_id_conflict")
    );
    let stale_id = v7();
    let stale = c.request(
        "state/update",
        json!({"commandId": stale_id, "sessionId": sid, "expectedRevision": 0, "set": {"b": 1}}),
    );
    assert_eq!((code(&stale), reason(&stale)), (-32030, "stale_revision"));
    assert_eq!(stale["error"]["data"]["currentRevision"], json!(1));
    assert_eq!(stale["error"]["data"]["commandId"], json!(stale_id));
    let again = c.request(
        "state/update",
        json!({"commandId": stale_id, "sessionId": sid, "expectedRevision": 0, "set": {"b": 1}}),
    );
    assert_eq!(
        answer_value(&again),
        answer_value(&stale),
        "a durable rejection replays identically"
    );
    let r = c.request(
        "session/start",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    assert_eq!(reason(&r), "session_id_conflict");
    let r = c.request("turn/steer", json!({"commandId": v7(), "sessionId": sid, "expectedTurnId": v7(), "input": [{"type": "text", "text": "x"}]}));
    assert_eq!(reason(&r), "missing_run");
    let r = c.request(
        "turn/interrupt",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    assert_eq!(reason(&r), "missing_run");
    let fail_id = v7();
    let fail = json!({"commandId": fail_id, "sessionId": sid, "input": [{"type": "text", "text": "!fail-launch"}]});
    let r = c.request("turn/start", fail.clone());
    assert_eq!(r["result"]["disposition"], json!("started"), "{r}");
    let done = c.wait_for("the failed launch", |f| f["method"] == "turn/completed");
    assert_eq!(done["params"]["error"]["kind"], json!("launchError"));
    let r = c.request("turn/start", fail);
    assert_eq!(
        reason(&r),
        "launch_failed",
        "a replay answers the settled outcome"
    );
    let read = c.request("session/read", json!({"sessionId": sid}));
    assert_eq!(
        read["result"]["history"]["snapshot"]["state"]["kv"],
        json!({"a": 1}),
        "the conflict was never applied"
    );
}

#[test]
fn deep_nesting_and_broken_bytes_are_parse_errors_and_the_host_survives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, c) = start(dir.path(), Via::Stdio, &[], &[]);
    let mut c = c.expect("stdio client");
    for deep in [
        vec![b'['; 100_000],
        vec![b'{'; 100_000],
        b"{\"a\":".repeat(30_000),
    ] {
        let mut line = deep;
        line.push(b'\n');
        let r = err_line(&mut c, &line);
        assert_eq!(
            code(&r),
            -32700,
            "deep nesting is a parse error, not a crash"
        );
    }
    let r = err_line(&mut c, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"x\":\"\xc3\x28\"}}\n");
    assert_eq!(code(&r), -32700, "invalid UTF-8 inside a string");
    // A trailing \r is tolerated, and the host still answers normally.
    assert!(c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"initialize\",\"params\":{\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\r\n"));
    let r = c.response(&json!(5));
    assert!(r["result"]["serverInfo"].is_object(), "{r}");
}

#[test]
fn approval_errors_and_a_keyed_effect_performed_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, c) = start(dir.path(), Via::Stdio, &[], &[]);
    let mut c = c.expect("stdio client");
    c.init();
    let sid = v7();
    c.start_session(&sid);
    let turn = c.request("turn/start", json!({"commandId": v7(), "sessionId": sid, "input": [{"type": "text", "text": "!effect keyed act-1"}]}));
    assert_eq!(turn["result"]["disposition"], json!("started"), "{turn}");
    let req = c.wait_for("approval/request", |f| {
        f["method"] == "approval/request" && f.get("id").is_some()
    });
    let p = req["params"].clone();
    let aid = p["approvalId"].as_str().expect("approvalId").to_string();
    assert_eq!(
        p["currentRequirementId"],
        json!({"approvalId": aid, "sourceIndex": 0})
    );
    let decide = |c: &mut Client, cid: &str, approval: &str, req_id: Value, choice: &str| {
        c.request(
            "approval/decide",
            json!({"commandId": cid, "sessionId": sid, "approvalId": approval, "requirementId": req_id, "choiceId": choice}),
        )
    };
    let r = decide(
        &mut c,
        &v7(),
        &v7(),
        json!({"approvalId": aid, "sourceIndex": 0}),
        "approve",
    );
    assert_eq!((code(&r), kind(&r)), (-32050, "approvalNotFound"));
    let r = decide(
        &mut c,
        &v7(),
        &aid,
        json!({"approvalId": aid, "sourceIndex": 3}),
        "approve",
    );
    assert_eq!((code(&r), kind(&r)), (-32053, "approvalRequirementStale"));
    let r = decide(
        &mut c,
        &v7(),
        &aid,
        json!({"approvalId": aid, "sourceIndex": 0}),
        "maybe",
    );
    assert_eq!((code(&r), kind(&r)), (-32052, "approvalChoiceInvalid"));
    let yes = v7();
    let ok = decide(
        &mut c,
        &yes,
        &aid,
        json!({"approvalId": aid, "sourceIndex": 0}),
        "approve",
    );
    assert_eq!(
        ok["result"],
        json!({"commandId": yes, "status": "accepted", "approvalId": aid, "terminal": true})
    );
    let replay = decide(
        &mut c,
        &yes,
        &aid,
        json!({"approvalId": aid, "sourceIndex": 0}),
        "approve",
    );
    assert_eq!(answer_value(&replay), answer_value(&ok));
    let r = decide(
        &mut c,
        &v7(),
        &aid,
        json!({"approvalId": aid, "sourceIndex": 0}),
        "deny",
    );
    assert_eq!((code(&r), kind(&r)), (-32051, "approvalAlreadyResolved"));
    assert_eq!(
        r["error"]["data"]["resolution"]["decision"],
        json!("approved")
    );
    let tool = c.wait_for("the toolCall completion", |f| {
        f["method"] == "item/completed" && f["params"]["item"]["kind"] == "toolCall"
    });
    assert_eq!(tool["params"]["item"]["effectOutcome"], json!("committed"));
    c.wait_for("turn/completed", |f| f["method"] == "turn/completed");
    let keyed: Vec<_> = std::fs::read_dir(dir.path().join("providers/keyed"))
        .expect("keyed provider dir")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(keyed.len(), 1, "one mutation for one approval: {keyed:?}");
    let content = std::fs::read_to_string(&keyed[0]).expect("read");
    assert_eq!(content, format!("{sid}:{aid}\nact-1"));
}

/// Frame boundaries of a session log (16-byte header, length at 8..12).
fn frame_offsets(log: &[u8]) -> Vec<usize> {
    let mut offs = Vec::new();
    let mut at = 0;
    while at + 16 <= log.len() {
        assert_eq!(&log[at..at + 4], b"MSPL", "frame magic at {at}");
        offs.push(at);
        let len = u32::from_le_bytes(log[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        at += 16 + len;
    }
    assert_eq!(at, log.len(), "the log ends on a frame boundary");
    offs
}

#[test]
fn log_corrupt_in_the_middle_names_file_and_offset_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sid = v7();
    {
        let (mut server, c) = start(dir.path(), Via::Stdio, &[], &[]);
        let mut c = c.expect("stdio client");
        c.init();
        c.start_session(&sid);
        for rev in 0..6 {
            let r = c.request("state/update", json!({"commandId": v7(), "sessionId": sid, "expectedRevision": rev, "set": {"n": rev}}));
            assert_eq!(r["result"]["revision"], json!(rev + 1));
        }
        c.close_input();
        c.expect_eof();
        assert!(server.wait_exit().success());
    }
    let home = std::fs::canonicalize(dir.path()).expect("canonical");
    let log_path = home.join("sessions").join(&sid).join("session.log");
    let mut log = std::fs::read(&log_path).expect("log");
    let offs = frame_offsets(&log);
    assert!(
        offs.len() >= 6,
        "enough frames to corrupt one in the middle"
    );
    let victim = offs[offs.len() / 2];
    log[victim + 16 + 2] ^= 0x5a;
    std::fs::write(&log_path, &log).expect("write");

    let (_server, c) = start(dir.path(), Via::Stdio, &[], &[]);
    let mut c = c.expect("stdio client");
    c.init();
    let r = c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    assert_eq!((code(&r), reason(&r)), (-32603, "logCorrupt"), "{r}");
    assert_eq!(
        r["error"]["data"]["file"],
        json!(log_path.to_str().expect("utf-8"))
    );
    assert_eq!(r["error"]["data"]["offset"], json!(victim));
    assert_eq!(
        std::fs::read(&log_path).expect("log"),
        log,
        "nothing truncated or rewritten"
    );
    // The host keeps serving, and the corrupt session stays unloaded.
    let again = c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    assert_eq!(reason(&again), "logCorrupt");
    let other = v7();
    assert!(c.start_session(&other)["result"].is_object());
}

#[test]
fn leases_across_processes_in_use_then_not_loaded_then_resumable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sid = v7();
    let (mut first, c1) = start(dir.path(), Via::Stdio, &[], &[]);
    let mut c1 = c1.expect("stdio client");
    c1.init();
    c1.start_session(&sid);

    let (_second, c2) = start(dir.path(), Via::Stdio, &[], &[]);
    let mut c2 = c2.expect("stdio client");
    c2.init();
    let input = json!([{"type": "text", "text": "hello"}]);
    let r = c2.request(
        "turn/start",
        json!({"commandId": v7(), "sessionId": sid, "input": input}),
    );
    assert_eq!((code(&r), kind(&r)), (-32021, "sessionInUse"));
    let r = c2.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    assert_eq!((code(&r), kind(&r)), (-32021, "sessionInUse"));
    // Reads need no lease.
    let read = c2.request("session/read", json!({"sessionId": sid}));
    assert_eq!(read["result"]["session"]["sessionId"], json!(sid));

    // The first host shuts down in order: the lease is free, the session is
    // on disk and loaded nowhere.
    c1.close_input();
    let tail = c1.expect_eof();
    assert!(tail
        .iter()
        .any(|f| f["method"] == "session/closed" && f["params"]["reason"] == "hostShutdown"));
    assert!(first.wait_exit().success());
    let r = c2.request(
        "turn/start",
        json!({"commandId": v7(), "sessionId": sid, "input": input}),
    );
    assert_eq!((code(&r), kind(&r)), (-32024, "sessionNotLoaded"));
    let r = c2.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    assert_eq!(r["result"]["session"]["sessionId"], json!(sid), "{r}");
    let r = c2.request(
        "turn/start",
        json!({"commandId": v7(), "sessionId": sid, "input": input}),
    );
    assert_eq!(r["result"]["status"], json!("accepted"));
}

#[test]
fn a_client_vanishing_mid_frame_does_not_disturb_the_others_over_tcp() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _) = start(dir.path(), Via::Tcp, &[], &[]);
    let mut a = server.tcp();
    a.init();
    let sid = v7();
    a.start_session(&sid);
    let mut b = server.tcp();
    b.init();
    assert!(b.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/re"));
    b.close_input();
    drop(b);
    let mut c = server.tcp();
    c.init();
    let r = c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    assert_eq!(r["result"]["session"]["sessionId"], json!(sid), "{r}");
    let r = a.request(
        "state/update",
        json!({"commandId": v7(), "sessionId": sid, "expectedRevision": 0, "set": {"x": 1}}),
    );
    assert_eq!(r["result"]["revision"], json!(1));
    c.wait_for("state/updated on the other subscriber", |f| {
        f["method"] == "state/updated"
    });
}

#[test]
fn non_loopback_listen_is_refused_without_the_opt_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_msp"))
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
}

#[test]
fn the_257th_connection_is_overloaded_and_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _) = start(dir.path(), Via::Tcp, &[], &[]);
    let mut held: Vec<Client> = (0..256).map(|_| server.tcp()).collect();
    // A round trip on the last one proves all 256 were admitted first.
    let r = held[255].request(
        "initialize",
        json!({"clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(r["result"].is_object(), "{r}");
    let mut extra = server.tcp();
    let frames = extra.expect_eof();
    assert_eq!(
        frames.len(),
        1,
        "one error, then the host closes: {frames:?}"
    );
    assert_eq!((code(&frames[0]), kind(&frames[0])), (-32001, "overloaded"));
    // -32001 is retryable by default (public errors table): not written.
    assert!(frames[0]["error"]["data"].get("retryable").is_none());
    assert!(frames[0]["id"].is_null());
    // Room again once one leaves.
    held.pop();
    let mut again = server.tcp();
    let deadline = std::time::Instant::now() + common::TIMEOUT;
    loop {
        let r = again.send_request(
            "initialize",
            json!({"clientInfo": {"name": "t", "version": "1"}}),
        );
        let f = again.wait_for_or_eof(|f| f["id"] == json!(r) || f["id"].is_null());
        match f {
            Some(f) if f.get("result").is_some() => break,
            // The host may not have seen the disconnect yet: retry.
            _ => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "no room after a disconnect"
                );
                again = server.tcp();
            }
        }
    }
}
