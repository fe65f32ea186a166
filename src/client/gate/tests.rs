//! The gate's rules, checked against both stores through one helper.

use serde_json::json;

use super::memory::{Commit, MemoryGateStore};
use super::sqlite::SqliteGateStore;
use super::*;
use crate::client::ids::{CommandId, CorrelationId, RequestId, SessionId};
use crate::client::wire::CommandSpec;

fn cid(n: u32) -> CommandId {
    CommandId::parse(&format!("018f6a1e-9b3c-7c21-a54a-{n:012x}")).expect("v7")
}

fn turn(text: &str) -> WireCommand {
    CommandSpec::TurnStart {
        session_id: SessionId::parse("0198f0aa-1111-7000-8000-0000000000aa").expect("sid"),
        text: text.into(),
        if_busy: None,
    }
    .to_wire()
}

fn ack(c: &CommandId) -> CommandOutcome {
    CommandOutcome::from_answer_value(&json!({"result": {"commandId": c.as_str(), "status": "accepted", "turnId": c.as_str(), "startedNewTurn": true, "disposition": "started"}}))
        .expect("an answer")
}

/// Runs one gate scenario against a fresh store of each kind.
fn check(scenario: impl Fn(&mut dyn FnMut() -> Box<dyn GateStore>)) {
    let mem = MemoryGateStore::new(Commit::Immediate);
    scenario(&mut || Box::new(mem.clone()));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gate.sqlite");
    scenario(&mut || Box::new(SqliteGateStore::open(&path).expect("open")));
}

impl GateStore for Box<dyn GateStore> {
    fn claim(&mut self, p: &GateRecord) -> Result<Claim, GateError> {
        (**self).claim(p)
    }
    fn record_outcome(
        &mut self,
        r: &RequestId,
        c: &CommandId,
        o: &Value,
    ) -> Result<Option<Value>, GateError> {
        (**self).record_outcome(r, c, o)
    }
    fn get(&mut self, r: &RequestId) -> Result<Option<GateRecord>, GateError> {
        (**self).get(r)
    }
}

#[test]
fn one_request_one_command_one_outcome_across_instances() {
    check(|open| {
        let (mut a, mut b) = (Gate::new(open()), Gate::new(open()));
        let req = RequestId::new("req-1").expect("req");
        let cmd = turn("deploy");
        let first = a.admit(&req, None, &cmd, cid(1), 10).expect("admit");
        assert_eq!(
            first,
            Admission::Send {
                command_id: cid(1),
                command: cmd.clone(),
                first: true
            }
        );
        // The other instance races in before any outcome: it re-sends the
        // winner's id, never its own fresh one.
        let second = b.admit(&req, None, &cmd, cid(2), 11).expect("admit");
        assert_eq!(
            second,
            Admission::Send {
                command_id: cid(1),
                command: cmd.clone(),
                first: false
            }
        );
        let stored = a.settle(&req, &cid(1), ack(&cid(1))).expect("settle");
        assert_eq!(stored, ack(&cid(1)));
        let third = b.admit(&req, None, &cmd, cid(3), 12).expect("admit");
        assert_eq!(
            third,
            Admission::Answered {
                command_id: cid(1),
                outcome: ack(&cid(1))
            }
        );
    });
}

#[test]
fn the_first_outcome_wins_and_unrecorded_errors_are_not_persisted() {
    check(|open| {
        let mut g = Gate::new(open());
        let req = RequestId::new("req-2").expect("req");
        let cmd = turn("x");
        g.admit(&req, None, &cmd, cid(7), 0).expect("admit");
        let overloaded = CommandOutcome::from_answer_value(
            &json!({"error": {"code": -32001, "data": {"kind": "overloaded"}}}),
        )
        .expect("an answer");
        assert_eq!(
            g.settle(&req, &cid(7), overloaded.clone()).expect("settle"),
            overloaded
        );
        assert!(matches!(
            g.admit(&req, None, &cmd, cid(8), 1).expect("admit"),
            Admission::Send { first: false, .. }
        ));
        g.settle(&req, &cid(7), ack(&cid(7))).expect("settle");
        let late = CommandOutcome::from_answer_value(
            &json!({"error": {"code": -32030, "data": {"kind": "commandRejected", "reason": "x"}}}),
        )
        .expect("an answer");
        assert_eq!(g.settle(&req, &cid(7), late).expect("settle"), ack(&cid(7)));
    });
}

#[test]
fn another_payload_under_one_request_id_is_a_conflict() {
    check(|open| {
        let mut g = Gate::new(open());
        let req = RequestId::new("req-3").expect("req");
        g.admit(&req, None, &turn("a"), cid(20), 0).expect("admit");
        let e = g.admit(&req, None, &turn("b"), cid(21), 0).unwrap_err();
        assert_eq!(
            e,
            GateError::RequestConflict {
                request_id: req.clone(),
                recorded: cid(20)
            }
        );
    });
}

#[test]
fn a_shared_correlation_id_never_merges_two_requests() {
    check(|open| {
        let mut g = Gate::new(open());
        let corr = CorrelationId::new("trace-1").expect("corr");
        let cmd = turn("same text");
        let a = g
            .admit(
                &RequestId::new("r-a").expect("r"),
                Some(&corr),
                &cmd,
                cid(30),
                0,
            )
            .expect("admit");
        let b = g
            .admit(
                &RequestId::new("r-b").expect("r"),
                Some(&corr),
                &cmd,
                cid(31),
                0,
            )
            .expect("admit");
        assert!(matches!(a, Admission::Send { first: true, .. }));
        assert!(matches!(b, Admission::Send { first: true, .. }));
        let row = g
            .store_mut()
            .get(&RequestId::new("r-a").expect("r"))
            .expect("get")
            .expect("row");
        assert_eq!(row.correlation_id, Some(corr));
    });
}

#[test]
fn memory_store_loses_unsynced_claims_on_crash_only_in_on_sync_mode() {
    let req = RequestId::new("r").expect("r");
    let lazy = MemoryGateStore::new(Commit::OnSync);
    let mut g = Gate::new(lazy.clone());
    g.admit(&req, None, &turn("t"), cid(40), 0).expect("admit");
    lazy.crash();
    assert!(lazy.rows().is_empty(), "an unsynced claim is lost");
    g.admit(&req, None, &turn("t"), cid(41), 0).expect("admit");
    lazy.sync();
    lazy.crash();
    assert_eq!(lazy.rows().len(), 1);
    assert_eq!(lazy.rows()[0].command_id, cid(41));

    let eager = MemoryGateStore::new(Commit::Immediate);
    let mut g = Gate::new(eager.clone());
    g.admit(&req, None, &turn("t"), cid(42), 0).expect("admit");
    eager.crash();
    assert_eq!(eager.rows().len(), 1);
    eager.fail_next(1);
    assert!(matches!(
        g.admit(
            &RequestId::new("r2").expect("r"),
            None,
            &turn("t"),
            cid(43),
            0
        ),
        Err(GateError::Store(_))
    ));
    assert_eq!(eager.rows().len(), 1, "a failed claim writes nothing");
}

#[test]
fn sqlite_threads_racing_on_each_request_insert_one_row_each() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gate.sqlite");
    SqliteGateStore::open(&path).expect("create");
    let requests: Vec<String> = (0..40).map(|i| format!("race-{i}")).collect();
    let threads: Vec<_> = (0..2u32)
        .map(|t| {
            let path = path.clone();
            let requests = requests.clone();
            std::thread::spawn(move || {
                // Each admission is an fsynced transaction: on a disk busy
                // with other work (a shared CI machine) the other thread's
                // commits can outlast the default 5 s wait. The race is
                // what is tested, not the timeout.
                let store = SqliteGateStore::open_with_busy_timeout(&path, 120_000).expect("open");
                let mut g = Gate::new(store);
                let mut won = Vec::new();
                for (i, r) in requests.iter().enumerate() {
                    let fresh = cid(1_000 * (t + 1) + i as u32);
                    let a = g
                        .admit(
                            &RequestId::new(r.clone()).expect("r"),
                            None,
                            &turn(r),
                            fresh,
                            0,
                        )
                        .expect("admit");
                    if let Admission::Send {
                        first: true,
                        command_id,
                        ..
                    } = a
                    {
                        won.push((r.clone(), command_id));
                    }
                }
                won
            })
        })
        .collect();
    let mut wins: Vec<(String, CommandId)> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("thread"))
        .collect();
    wins.sort();
    let won_requests: Vec<&String> = wins.iter().map(|(r, _)| r).collect();
    let mut want: Vec<&String> = requests.iter().collect();
    want.sort();
    assert_eq!(won_requests, want, "each request won exactly once");
    let mut g = Gate::new(SqliteGateStore::open(&path).expect("open"));
    for (r, c) in &wins {
        let row = g
            .store_mut()
            .get(&RequestId::new(r.clone()).expect("r"))
            .expect("get")
            .expect("row");
        assert_eq!(&row.command_id, c, "the stored id is the winner's");
    }
}

#[test]
fn sqlite_corrupt_rows_are_typed_errors_not_panics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gate.sqlite");
    let mut s = SqliteGateStore::open(&path).expect("open");
    let conn = rusqlite::Connection::open(&path).expect("raw");
    conn.execute(
        "INSERT INTO msp_gate VALUES ('bad', 'not-a-uuid', 'turn/start', '{}', NULL, NULL, 0)",
        [],
    )
    .expect("insert");
    let e = s.get(&RequestId::new("bad").expect("r")).unwrap_err();
    assert!(matches!(e, GateError::Corrupt { .. }), "{e:?}");
}

#[test]
fn sqlite_processes_opening_one_fresh_gate_file_at_once_all_succeed() {
    // Two applications started together (a double click and a proxy
    // retry) open the same new gate file: switching it to WAL needs an
    // exclusive lock, and SQLite answers a racing upgrade "database is
    // locked" without waiting (it would deadlock). Every open must still
    // succeed.
    for round in 0..30 {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("gate.sqlite");
        let start = std::sync::Arc::new(std::sync::Barrier::new(4));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (path, start) = (path.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    SqliteGateStore::open(&path).map(|_| ())
                })
            })
            .collect();
        for t in threads {
            let r = t.join().expect("thread");
            assert!(r.is_ok(), "round {round}: {r:?}");
        }
    }
}
