//! Compaction of the real host's session logs on a real disk: `msp serve
//! --compact-records N` aborted (`MSP_CRASH_AT`) right after each step of
//! a compaction, and killed with SIGKILL while a pipelined stream of
//! commands keeps it compacting. After every restart the client resumes,
//! replays every command it was answered, and reads the whole history:
//! nothing acknowledged is lost, every replay answers what it answered,
//! and the view has every acknowledged event once.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use common::{answer_value, start, v7, Client, Via};
use serde_json::{json, Value};

/// A `state/update` and the answer it got.
struct Acked {
    params: Value,
    answer: Value,
}

fn update(sid: &str, expected: u64) -> Value {
    json!({"commandId": v7(), "sessionId": sid, "expectedRevision": expected, "set": {"k": expected}})
}

fn is_response(f: &Value) -> bool {
    f.get("method").is_none() && f.get("id").is_some()
}

/// Resumes `sid` on a fresh host over `dir`, replays every acknowledged
/// command and checks the whole history; returns the host's revision.
fn resume_and_check(dir: &Path, sid: &str, acked: &[Acked], start_answer: &Value) -> u64 {
    let (server, c) = start(dir, Via::Stdio, &["--compact-records", "16"], &[]);
    let mut c = c.expect("stdio client");
    c.init();
    let r = c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    let revision = r["result"]["history"]["snapshot"]["state"]["revision"]
        .as_u64()
        .unwrap_or_else(|| panic!("resume failed: {r}"));
    assert!(
        revision >= acked.len() as u64,
        "revision {revision} after {} acknowledged updates",
        acked.len()
    );
    let again = c.request(
        "session/start",
        json!({"commandId": start_answer["cid"], "sessionId": sid}),
    );
    assert_eq!(
        answer_value(&again),
        start_answer["answer"],
        "start replayed"
    );
    for a in acked {
        let got = c.request("state/update", a.params.clone());
        assert_eq!(answer_value(&got), a.answer, "replay of {}", a.params);
    }
    let events = c.history(sid);
    let revisions: Vec<u64> = events
        .iter()
        .filter(|e| e["method"] == "state/updated")
        .map(|e| e["params"]["revision"].as_u64().expect("revision"))
        .collect();
    let want: Vec<u64> = (1..=revision).collect();
    assert_eq!(revisions, want, "every update's event, once, in order");
    for a in acked {
        let n = a.answer["result"]["revision"].as_u64().expect("acked");
        let e = events
            .iter()
            .find(|e| e["params"]["revision"] == json!(n))
            .expect("event");
        assert_eq!(e["params"]["commandId"], a.params["commandId"]);
    }
    drop(c);
    server.kill9();
    revision
}

fn start_session(c: &mut Client, sid: &str) -> Value {
    let cid = v7();
    let r = c.request("session/start", json!({"commandId": cid, "sessionId": sid}));
    assert!(r["result"].is_object(), "{r}");
    json!({"cid": cid, "answer": answer_value(&r)})
}

fn log_type(dir: &Path, sid: &str) -> u8 {
    let log = std::fs::read(dir.join("sessions").join(sid).join("session.log")).expect("log");
    log[5]
}

/// A compaction copies the archived records in chunks of 1 MiB
/// (`CompactJob::steps` in `io::storage`): one whose archived part spans
/// several chunks keeps every byte of each, so after a restart every
/// update replays as answered and every event reads back whole.
#[test]
fn a_compaction_larger_than_its_copy_chunk_archives_every_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sid = v7();
    let (server, c) = start(dir.path(), Via::Stdio, &["--compact-records", "48"], &[]);
    let mut c = c.expect("stdio client");
    c.init();
    let started = start_session(&mut c, &sid);
    // About 50 kB per update, in its intake and in its event.
    let pad = |n: u64| format!("{n:04}-").repeat(10_000);
    let mut acked = Vec::new();
    for n in 0..40u64 {
        let params = json!({"commandId": v7(), "sessionId": sid, "expectedRevision": n,
            "set": {"k": n, "pad": pad(n)}});
        let r = c.request("state/update", params.clone());
        assert_eq!(r["result"]["revision"], json!(n + 1), "update {n}");
        acked.push(Acked {
            params,
            answer: answer_value(&r),
        });
    }
    let archive = dir.path().join("sessions").join(&sid).join("history.log");
    let len = std::fs::metadata(&archive).expect("an archive").len();
    assert!(
        len > 2 << 20,
        "the archive spans several chunks: {len} bytes"
    );
    drop(c);
    server.kill9();
    let revision = resume_and_check(dir.path(), &sid, &acked, &started);
    assert_eq!(revision, 40);
    // Every event's own bytes, read back from the archive.
    let (server, c) = start(dir.path(), Via::Stdio, &[], &[]);
    let mut c = c.expect("stdio client");
    c.init();
    let pads: Vec<(u64, String)> = c
        .history(&sid)
        .iter()
        .filter(|e| e["method"] == "state/updated")
        .map(|e| {
            let p = &e["params"];
            let n = p["revision"].as_u64().expect("revision");
            (n, p["set"]["pad"].as_str().expect("pad").to_string())
        })
        .collect();
    assert_eq!(pads.len(), 40, "every event");
    for (n, got) in pads {
        assert!(
            got == pad(n - 1),
            "the event of revision {n} read back whole"
        );
    }
    drop(c);
    server.kill9();
}

#[test]
fn an_abort_after_each_compaction_step_loses_nothing_acknowledged() {
    for step in ["compact-archived", "compact-written", "compact-renamed"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let sid = v7();
        // The second compaction aborts after `step`.
        let spec = format!("{step}:2");
        let (mut server, c) = start(
            dir.path(),
            Via::Stdio,
            &["--compact-records", "16"],
            &[("MSP_CRASH_AT", &spec)],
        );
        let mut c = c.expect("stdio client");
        c.init();
        let started = start_session(&mut c, &sid);
        let mut acked = Vec::new();
        for n in 0..200u64 {
            let params = update(&sid, n);
            let id = c.send_request("state/update", params.clone());
            match c.wait_for_or_eof(move |f| is_response(f) && f["id"] == json!(id)) {
                Some(answer) => {
                    assert_eq!(answer["result"]["revision"], json!(n + 1), "{answer}");
                    acked.push(Acked {
                        params,
                        answer: answer_value(&answer),
                    });
                }
                None => break,
            }
        }
        let status = server.wait_exit();
        assert_eq!(status.signal(), Some(6), "{step}: aborted (SIGABRT)");
        assert!(acked.len() >= 4, "{step}: one compaction completed first");
        assert!(acked.len() < 200, "{step}: the failpoint fired");
        let session_dir = dir.path().join("sessions").join(&sid);
        assert!(session_dir.join("history.log").exists(), "{step}: archive");
        assert_eq!(
            log_type(dir.path(), &sid),
            7,
            "{step}: a snapshot heads the log"
        );
        drop(c);
        let revision = resume_and_check(dir.path(), &sid, &acked, &started);
        assert!(
            !session_dir.join("session.log.compact").exists(),
            "{step}: the next open removed the unfinished log"
        );
        assert!(revision >= acked.len() as u64);
    }
}

#[test]
fn kill9_while_pipelined_commands_keep_compacting_then_replay_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sid = v7();
    let (server, c) = start(dir.path(), Via::Stdio, &["--compact-records", "16"], &[]);
    let mut c = c.expect("stdio client");
    c.init();
    let started = start_session(&mut c, &sid);
    // 24 updates in flight at a time; the host is killed with answers
    // still on the way.
    const WINDOW: u64 = 24;
    let mut sent = Vec::new();
    let mut acked = Vec::new();
    let mut ids = std::collections::VecDeque::new();
    for n in 0..400u64 {
        let params = update(&sid, n);
        ids.push_back(c.send_request("state/update", params.clone()));
        sent.push(params);
        if ids.len() as u64 == WINDOW {
            let id = ids.pop_front().expect("in flight");
            let a = c.response(&json!(id));
            let i = acked.len();
            assert_eq!(a["result"]["revision"], json!(i + 1), "{a}");
            acked.push(Acked {
                params: sent[i].clone(),
                answer: answer_value(&a),
            });
        }
    }
    server.kill9();
    drop(c);
    assert_eq!(log_type(dir.path(), &sid), 7, "compacted before the kill");
    let revision = resume_and_check(dir.path(), &sid, &acked, &started);
    assert!(revision <= 400);
}
