//! Many sessions sharing fsyncs (issue 11): clients on different sessions
//! whose intakes the group committer syncs in shared batches. Every ack
//! must survive `kill -9`: after a restart each session holds exactly the
//! updates that were acknowledged, and every command id replays to its
//! first answer. An orderly shutdown reports how many fdatasyncs and
//! batches it ran.

mod common;

use common::{answer_value, start, v7, Via};
use serde_json::{json, Value};

const SESSIONS: usize = 12;
const COMMANDS_EACH: u64 = 15;

/// One client per session, each sending its updates one at a time with the
/// exact expected revision (so every one is accepted); returns per session
/// the command ids, params and first answers.
fn drive(server: &common::Server, sids: &[String]) -> Vec<Vec<(Value, Value)>> {
    let handles: Vec<_> = sids
        .iter()
        .map(|sid| {
            let mut c = server.tcp();
            c.init();
            let sid = sid.clone();
            std::thread::spawn(move || {
                let mut done = Vec::new();
                for k in 0..COMMANDS_EACH {
                    let p = json!({"commandId": v7(), "sessionId": sid, "expectedRevision": k, "set": {"k": k}});
                    let r = c.request("state/update", p.clone());
                    assert_eq!(r["result"]["revision"], json!(k + 1), "{r}");
                    done.push((p, answer_value(&r)));
                }
                done
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("client thread"))
        .collect()
}

#[test]
fn acks_of_many_sessions_sharing_fsyncs_survive_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _) = start(dir.path(), Via::Tcp, &["--idle-unload-ms", "0"], &[]);
    let sids: Vec<String> = (0..SESSIONS).map(|_| v7()).collect();
    let mut setup = server.tcp();
    setup.init();
    for sid in &sids {
        assert!(setup.start_session(sid)["result"].is_object());
    }
    let sent = drive(&server, &sids);
    server.kill9();

    let (mut server, _) = start(dir.path(), Via::Tcp, &[], &[]);
    let mut c = server.tcp();
    c.init();
    for (sid, cmds) in sids.iter().zip(&sent) {
        let r = c.request(
            "session/resume",
            json!({"commandId": v7(), "sessionId": sid}),
        );
        assert_eq!(
            r["result"]["history"]["snapshot"]["state"]["revision"],
            json!(COMMANDS_EACH),
            "session {sid} lost an acknowledged update: {r}"
        );
        for (params, first) in cmds {
            let again = c.request("state/update", params.clone());
            assert_eq!(&answer_value(&again), first, "replay of {params}");
        }
    }
    server.sigterm();
    let line = server.stderr_line_with("fdatasyncs in");
    let words: Vec<&str> = line.split_whitespace().collect();
    let (syncs, batches): (u64, u64) = match words.as_slice() {
        [_, _, n, "fdatasyncs", "in", m, "batches"] => {
            (n.parse().expect("count"), m.parse().expect("count"))
        }
        _ => panic!("unexpected stats line {line:?}"),
    };
    assert!(
        batches >= 1 && batches <= syncs,
        "every batch holds at least one fdatasync: {line}"
    );
    assert!(server.wait_exit().success());
}
