//! A disk that refuses writes, on a real `msp serve`: the process runs
//! under a file-size limit (`ulimit -f`, SIGXFSZ ignored), so a real
//! `write` fails with `EFBIG` part way through a record. Depending on the
//! limit and the flags that is a session's log, the intake journal (which
//! holds every session's appends), or a compaction's archive or snapshot.
//!
//! What must hold (PROTOCOL.md section 3, the mission's three properties):
//! every answer is an ack or a typed error, a failed write gets the
//! retryable `storageUnavailable`, the process neither panics nor exits
//! badly; and a host restarted on the same directory without the limit
//! loads every session (the torn bytes cut, nothing after a hole), replays
//! every acknowledged command value-identically, and holds each session's
//! `kv` as a whole number of updates, every acknowledged one among them.

mod common;

use std::collections::BTreeMap;

use common::{answer_value, start, start_with_file_limit, v7, Client, Via};
use serde_json::{json, Value};

/// Sessions written to round-robin: with more than one, the journal grows
/// faster than any log and fails first under group commit.
const SESSIONS: usize = 3;

/// `state/update`s sent in all.
const UPDATES: usize = 36;

/// One `state/update` and the answer it got under the limit.
struct Sent {
    sid: String,
    params: Value,
    key: String,
    answer: Value,
}

/// What a run under the limit saw.
#[derive(Default)]
struct Seen {
    acks: usize,
    unavailable: usize,
    /// The `message`s of the `storageUnavailable` answers.
    messages: Vec<String>,
}

impl Seen {
    fn unavailable(&mut self, r: &Value) {
        self.unavailable += 1;
        self.messages.push(
            r["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
}

fn is_unavailable(r: &Value) -> bool {
    r["error"]["code"] == json!(-32603)
        && r["error"]["data"]["kind"] == "internal"
        && r["error"]["data"]["reason"] == "storageUnavailable"
        && r["error"]["data"]["retryable"] == json!(true)
}

fn error_kind(r: &Value) -> &str {
    r["error"]["data"]["kind"].as_str().unwrap_or("")
}

/// `session/resume`, metadata only.
fn resume(c: &mut Client, sid: &str) -> Value {
    c.request(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid, "excludeItems": true}),
    )
}

/// The workload under a limit of `blocks`: sessions started, then updates
/// round-robin, each setting a key of its own. A session the host gave up
/// (`sessionNotLoaded` after a failure) is resumed and written on.
fn limited_run(
    dir: &std::path::Path,
    blocks: u32,
    extra: &[&str],
) -> (Vec<String>, Vec<Sent>, Seen) {
    let (mut server, c) = start_with_file_limit(dir, blocks, extra);
    let mut c = c.expect("stdio client");
    c.init();
    let mut seen = Seen::default();
    let mut sids = Vec::new();
    for _ in 0..SESSIONS {
        let sid = v7();
        let r = c.start_session(&sid);
        if r.get("result").is_some() {
            sids.push(sid);
        } else {
            assert!(
                is_unavailable(&r),
                "limit {blocks} {extra:?}: session/start answered {r}"
            );
            seen.unavailable += 1;
        }
    }
    let mut revs: BTreeMap<String, u64> = sids.iter().map(|s| (s.clone(), 0)).collect();
    let mut sent = Vec::new();
    for i in 0..UPDATES {
        if sids.is_empty() {
            break;
        }
        let sid = sids[i % sids.len()].clone();
        let key = format!("k{i}");
        let params = json!({
            "commandId": v7(),
            "sessionId": sid,
            "expectedRevision": revs[&sid],
            "set": {&key: "v".repeat(150)},
        });
        let r = c.request("state/update", params.clone());
        if let Some(res) = r.get("result") {
            seen.acks += 1;
            revs.insert(sid.clone(), res["revision"].as_u64().expect("revision"));
        } else if is_unavailable(&r) {
            seen.unavailable(&r);
        } else if r["error"]["data"]["reason"] == "stale_revision" {
            // A command answered `storageUnavailable` may still have been
            // written (its outcome is unknown until retried).
            let cur = r["error"]["data"]["currentRevision"]
                .as_u64()
                .expect("currentRevision");
            revs.insert(sid.clone(), cur);
        } else if error_kind(&r) == "sessionNotLoaded" {
            // The host released the session after its failure.
            let rr = resume(&mut c, &sid);
            if rr.get("result").is_none() {
                assert!(
                    is_unavailable(&rr),
                    "limit {blocks} {extra:?}: resume answered {rr}"
                );
                seen.unavailable += 1;
            }
        } else {
            panic!("limit {blocks} {extra:?}: state/update answered {r}");
        }
        sent.push(Sent {
            sid,
            params,
            key,
            answer: r,
        });
    }
    c.close_input();
    let st = server.wait_exit();
    assert!(
        st.success(),
        "limit {blocks} {extra:?}: msp serve exited {st}"
    );
    (sids, sent, seen)
}

/// Restarts without the limit and checks what the limited run left.
fn check_after_restart(
    dir: &std::path::Path,
    blocks: u32,
    extra: &[&str],
    sids: &[String],
    sent: &[Sent],
) {
    let (mut server, c) = start(dir, Via::Stdio, extra, &[]);
    let mut c = c.expect("stdio client");
    c.init();
    for sid in sids {
        let r = resume(&mut c, sid);
        assert!(
            r.get("result").is_some(),
            "limit {blocks} {extra:?}: after a restart, resume of {sid} answered {r}"
        );
    }
    for s in sent.iter().filter(|s| s.answer.get("result").is_some()) {
        let r = c.request("state/update", s.params.clone());
        assert_eq!(
            answer_value(&r),
            answer_value(&s.answer),
            "limit {blocks} {extra:?}: an acknowledged command replayed differently"
        );
    }
    for sid in sids {
        let r = c.request("session/read", json!({"sessionId": sid}));
        let state = &r["result"]["history"]["snapshot"]["state"];
        let kv = state["kv"]
            .as_object()
            .unwrap_or_else(|| panic!("no kv in {r}"));
        // Every update sets a key of its own: the revision counts them.
        assert_eq!(
            state["revision"].as_u64(),
            Some(kv.len() as u64),
            "limit {blocks} {extra:?}: revision and keys of {sid} disagree: {state}"
        );
        for s in sent
            .iter()
            .filter(|s| &s.sid == sid && s.answer.get("result").is_some())
        {
            assert!(
                kv.contains_key(&s.key),
                "limit {blocks} {extra:?}: acknowledged {} lost from {sid}",
                s.key
            );
        }
    }
    c.close_input();
    assert!(server.wait_exit().success());
}

/// Runs the limits with `extra` flags; the limits together must both
/// acknowledge and refuse, and some refusal must name `reach` (the write
/// that failed), or the test proves nothing.
fn disk_fills(extra: &[&str], reach: &str) {
    let mut total = Seen::default();
    for blocks in [4, 8, 12, 20, 32] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (sids, sent, seen) = limited_run(dir.path(), blocks, extra);
        check_after_restart(dir.path(), blocks, extra, &sids, &sent);
        total.acks += seen.acks;
        total.unavailable += seen.unavailable;
        total.messages.extend(seen.messages);
    }
    assert!(
        total.acks > 0,
        "{extra:?}: no command was ever acknowledged"
    );
    assert!(
        total.unavailable > 0,
        "{extra:?}: the limit never failed a write"
    );
    assert!(
        total.messages.iter().any(|m| m.contains(reach)),
        "{extra:?}: no write of {reach:?} failed: {:?}",
        total.messages
    );
}

#[test]
fn a_full_disk_under_group_commit_loses_no_acknowledged_command() {
    // Three sessions' appends fill the journal before any one log.
    disk_fills(&[], "writing the intake journal");
}

#[test]
fn a_full_disk_with_an_fsync_per_intake_loses_no_acknowledged_command() {
    disk_fills(&["--no-group-commit"], "File too large");
}

#[test]
fn a_full_disk_during_compactions_loses_no_acknowledged_command() {
    disk_fills(&["--compact-records", "4"], "compacting session");
}
