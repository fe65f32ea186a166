//! The intake journal on a real disk: with group commit a session's sync is
//! an fsync of the process's journal, and its log is fsynced only later (at
//! a checkpoint, a release, a compaction). These tests kill the host with
//! `kill -9` and then take from every log what a power loss could have
//! taken (every byte after its last fsync: for a session created by the
//! killed process and never checkpointed, the whole log), and check that
//! every acknowledged intake comes back from the journal, answered the same
//! and applied once, whether the replay runs at the next start or when a
//! process that was already running opens the session.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{answer_value, start, v7, Client, Via};
use serde_json::{json, Value};

/// The answers a client received, by command id, with their params.
type Answers = BTreeMap<String, (Value, Value)>;

fn log_path(dir: &Path, sid: &str) -> PathBuf {
    dir.join("sessions").join(sid).join("session.log")
}

/// The journal directories under `DIR/journal`.
fn journals(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("journal"))
        .map(|rd| rd.map(|e| e.expect("entry").path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn segments(journal: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(journal)
        .expect("journal dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    v.sort();
    v
}

/// The `k`-th acknowledged `state/update` on `sid`, remembered by command
/// id.
fn update(c: &mut Client, sid: &str, k: usize, answers: &mut Answers) {
    let cid = v7();
    let p = json!({"commandId": cid, "sessionId": sid, "expectedRevision": k, "set": {format!("k{k}"): k}});
    let r = c.request("state/update", p.clone());
    assert_eq!(r["result"]["revision"], json!(k + 1), "{r}");
    answers.insert(cid, (p, answer_value(&r)));
}

/// `n` acknowledged `state/update`s on a fresh `sid`.
fn updates(c: &mut Client, sid: &str, n: usize, answers: &mut Answers) {
    for k in 0..n {
        update(c, sid, k, answers);
    }
}

/// A host on stdio with one started session.
fn stdio_session(dir: &Path, env: &[(&str, &str)]) -> (common::Server, Client, String) {
    let (server, c) = start(dir, Via::Stdio, &[], env);
    let mut c = c.expect("stdio client");
    c.init();
    let sid = v7();
    assert!(c.start_session(&sid)["result"].is_object());
    (server, c, sid)
}

/// What a power loss may leave of a log that was never fsynced after its
/// creation: nothing.
fn lose_unsynced(dir: &Path, sid: &str) {
    let path = log_path(dir, sid);
    assert!(
        std::fs::metadata(&path).expect("log").len() > 0,
        "the log took the appends"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("log")
        .set_len(0)
        .expect("truncate");
}

/// Resumes `sid` on `c`, checks its state, then replays every command:
/// each answers as first, and each applied exactly once.
fn check_session(c: &mut Client, sid: &str, n: usize, answers: &Answers) {
    let r = c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    );
    let kv = &r["result"]["history"]["snapshot"]["state"]["kv"];
    assert_eq!(
        kv.as_object().map(|o| o.len()),
        Some(n),
        "every acknowledged update of {sid} is back: {r}"
    );
    for (cid, (p, first)) in answers.iter().filter(|(_, (p, _))| p["sessionId"] == sid) {
        let got = c.request("state/update", p.clone());
        assert_eq!(&answer_value(&got), first, "{cid} answers as it did");
    }
    let history = c.history(sid);
    for cid in answers
        .iter()
        .filter(|(_, (p, _))| p["sessionId"] == sid)
        .map(|(cid, _)| cid)
    {
        let applied = history
            .iter()
            .filter(|e| e["method"] == "state/updated" && e["params"]["commandId"] == json!(cid))
            .count();
        assert_eq!(applied, 1, "{cid} applied {applied} times");
    }
}

#[test]
fn acked_intakes_of_many_sessions_come_back_from_the_journal_at_the_next_start() {
    const SESSIONS: usize = 6;
    const EACH: usize = 5;
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _) = start(dir.path(), Via::Tcp, &[], &[]);
    let mut answers = Answers::new();
    let sids: Vec<String> = (0..SESSIONS).map(|_| v7()).collect();
    let mut clients: Vec<Client> = sids
        .iter()
        .map(|sid| {
            let mut c = server.tcp();
            c.init();
            assert!(c.start_session(sid)["result"].is_object());
            c
        })
        .collect();
    // Interleaved, so the journal's entries of the sessions interleave.
    for k in 0..EACH {
        for (c, sid) in clients.iter_mut().zip(&sids) {
            update(c, sid, k, &mut answers);
        }
    }
    let js = journals(dir.path());
    assert_eq!(js.len(), 1, "one journal per process");
    assert!(
        segments(&js[0])
            .iter()
            .any(|s| std::fs::metadata(s).expect("segment").len() > 0),
        "the intakes went through the journal"
    );
    server.kill9();
    drop(clients);
    for sid in &sids {
        lose_unsynced(dir.path(), sid);
    }

    let (mut server, c) = start(dir.path(), Via::Stdio, &[], &[]);
    let line = server.stderr_line_with("dead intake journals");
    assert!(
        line.contains("of 1 dead intake journals (1 removed)"),
        "{line}"
    );
    let mut c = c.expect("stdio client");
    c.init();
    for sid in &sids {
        check_session(&mut c, sid, EACH, &answers);
    }
    assert!(
        !journals(dir.path()).contains(&js[0]),
        "the replayed journal was removed"
    );
    // An orderly exit releases every session (fsyncing its log) and then
    // removes its own journal: nothing is left to replay.
    assert_eq!(journals(dir.path()).len(), 1, "this process's journal");
    server.sigterm();
    assert!(server.wait_exit().success());
    assert_eq!(journals(dir.path()), Vec::<PathBuf>::new());
}

#[test]
fn a_running_host_replays_a_dead_holders_journal_when_it_opens_the_session() {
    const EACH: usize = 4;
    let dir = tempfile::tempdir().expect("tempdir");
    // B starts first: at its start there is nothing to replay.
    let (second, _) = start(dir.path(), Via::Tcp, &[], &[]);
    let (first, mut c1, sid) = stdio_session(dir.path(), &[]);
    let mut answers = Answers::new();
    updates(&mut c1, &sid, EACH, &mut answers);
    first.kill9();
    drop(c1);
    lose_unsynced(dir.path(), &sid);

    let mut c2 = second.tcp();
    c2.init();
    check_session(&mut c2, &sid, EACH, &answers);
    // More work on top of the replayed log, by the new holder.
    let r = c2.request(
        "state/update",
        json!({"commandId": v7(), "sessionId": sid, "expectedRevision": EACH, "set": {"after": true}}),
    );
    assert_eq!(r["result"]["revision"], json!(EACH + 1), "{r}");
}

#[test]
fn checkpoints_retire_full_segments_and_a_restart_still_recovers_every_intake() {
    const EACH: usize = 30;
    let dir = tempfile::tempdir().expect("tempdir");
    // Segments of 256 bytes: nearly every round rotates and checkpoints.
    let env = [("MSP_JOURNAL_SEGMENT_BYTES", "256")];
    let (server, mut c, sid) = stdio_session(dir.path(), &env);
    let mut answers = Answers::new();
    updates(&mut c, &sid, EACH, &mut answers);
    let js = journals(dir.path());
    assert_eq!(js.len(), 1);
    let newest = segments(&js[0]).last().cloned().expect("a segment");
    let seq: u64 = newest
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("numbered");
    assert!(
        seq > EACH as u64 / 2,
        "the journal rotated ({seq} segments)"
    );
    // Checkpoints run in the background: they catch up.
    let deadline = Instant::now() + Duration::from_secs(20);
    while segments(&js[0]).len() > 2 {
        assert!(
            Instant::now() < deadline,
            "retired segments were never removed: {:?}",
            segments(&js[0])
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server.kill9();
    drop(c);

    let (_server, c) = start(dir.path(), Via::Stdio, &[], &env);
    let mut c = c.expect("stdio client");
    c.init();
    check_session(&mut c, &sid, EACH, &answers);
}
