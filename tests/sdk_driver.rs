//! The SDK's tokio driver against the real `msp serve`: every transport, a
//! replay after a dropped connection (value-identical ack, one turn),
//! fetch-reconcile-retry after `stale_revision`, and typed effect outcomes.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{start, Via};
use msp::client::driver::{Client, Transport};
use msp::client::optimistic::WriteStep;
use msp::client::{
    AckFields, ApprovalId, ClientConfig, ClientEvent, CommandOutcome, CommandSpec, EffectOutcome,
    Notification, ReadSpec, RejectReason, SessionId, TurnEnd,
};
use serde_json::{json, Map, Value};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Short timeouts: a lost answer is noticed in a second, not ten.
fn cfg() -> ClientConfig {
    ClientConfig {
        request_timeout_ms: 1_000,
        ..ClientConfig::default()
    }
}

const WAIT: Duration = Duration::from_secs(30);

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {WAIT:?}"))
}

async fn new_session(c: &Client) -> SessionId {
    let s = within(
        "session/start",
        c.submit(CommandSpec::SessionStart {
            session_id: None,
            workspace_root: None,
        }),
    )
    .await
    .expect("submit");
    s.outcome
        .ack()
        .and_then(|a| a.session_id().cloned())
        .unwrap_or_else(|| panic!("session/start: {:?}", s.outcome))
}

async fn history(c: &Client, sid: &SessionId) -> Vec<Value> {
    let page = c
        .read(ReadSpec::ViewPage {
            session_id: sid.clone(),
            limit: 1_000,
            cursor: None,
            backward: false,
        })
        .await
        .expect("read")
        .expect("view/page");
    page["events"].as_array().cloned().unwrap_or_default()
}

fn count(events: &[Value], method: &str) -> usize {
    events.iter().filter(|e| e["method"] == method).count()
}

/// One turn over `transport`: start a session, submit, wait for the end.
async fn one_turn(transport: Transport) {
    let c = Client::connect(transport, cfg()).await.expect("connect");
    let sid = new_session(&c).await;
    let s = within(
        "turn/start",
        c.submit(CommandSpec::TurnStart {
            session_id: sid.clone(),
            text: "hello".into(),
            if_busy: None,
        }),
    )
    .await
    .expect("submit");
    let ack = s.outcome.ack().expect("accepted");
    let turn = ack.turn_id().expect("a turn id").clone();
    assert_eq!(
        turn.as_str(),
        s.command_id.as_str(),
        "a fresh turn is named by its command"
    );
    let end = within("turn end", c.wait_turn_end(&sid, &turn))
        .await
        .expect("wait");
    assert!(matches!(end, TurnEnd::Completed { .. }), "{end:?}");
    c.close().await;
}

#[test]
fn one_turn_over_stdio_tcp_and_a_unix_socket() {
    let rt = rt();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("stdio");
    rt.block_on(one_turn(Transport::Stdio {
        program: env!("CARGO_BIN_EXE_msp").into(),
        args: vec![
            "serve".into(),
            "--stdio".into(),
            "--data-dir".into(),
            data.display().to_string(),
        ],
    }));
    let (server, _) = start(&dir.path().join("tcp"), Via::Tcp, &[], &[]);
    rt.block_on(one_turn(Transport::Tcp(server.addr.clone().expect("addr"))));
    let sock = dir.path().join("msp.sock");
    let (server, _) = start(&dir.path().join("unix"), Via::Unix(sock.clone()), &[], &[]);
    rt.block_on(one_turn(Transport::Unix(sock)));
    drop(server);
}

/// A TCP proxy that forwards lines both ways and, once armed, swallows the
/// first server line containing `needle` and cuts every connection (the
/// answer is lost with the connection). Later connections pass.
struct CuttingProxy {
    addr: String,
    upstream: Arc<Mutex<String>>,
    needle: Arc<Mutex<Option<String>>>,
    swallowed: Arc<Mutex<Option<Value>>>,
}

impl CuttingProxy {
    fn start(upstream: String) -> CuttingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let needle: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let swallowed = Arc::new(Mutex::new(None));
        let upstream = Arc::new(Mutex::new(upstream));
        let (n, sw, up) = (needle.clone(), swallowed.clone(), upstream.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let target = up.lock().expect("lock").clone();
                let Ok(server) = TcpStream::connect(&target) else {
                    // The host is down: the client sees a closed link.
                    continue;
                };
                let cut = Arc::new(AtomicBool::new(false));
                let (c2, s2) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut BufReader::new(c2), &mut { s2 });
                });
                let (n, sw) = (n.clone(), sw.clone());
                std::thread::spawn(move || {
                    let mut r = BufReader::new(server.try_clone().expect("clone"));
                    let mut w = client.try_clone().expect("clone");
                    loop {
                        let mut line = Vec::new();
                        if r.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
                            break;
                        }
                        let hit = {
                            let mut g = n.lock().expect("lock");
                            match g.as_deref() {
                                Some(x) if String::from_utf8_lossy(&line).contains(x) => {
                                    *g = None;
                                    true
                                }
                                _ => false,
                            }
                        };
                        if hit {
                            *sw.lock().expect("lock") =
                                Some(serde_json::from_slice(&line).expect("json"));
                            cut.store(true, Ordering::SeqCst);
                            let _ = client.shutdown(Shutdown::Both);
                            let _ = server.shutdown(Shutdown::Both);
                            break;
                        }
                        if w.write_all(&line).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        CuttingProxy {
            addr,
            upstream,
            needle,
            swallowed,
        }
    }

    /// Later connections go to `addr` (another host behind one address).
    fn set_upstream(&self, addr: String) {
        *self.upstream.lock().expect("lock") = addr;
    }

    fn arm(&self, needle: &str) {
        *self.needle.lock().expect("lock") = Some(needle.to_string());
    }
}

#[test]
fn a_lost_ack_is_replayed_with_the_same_id_and_answered_value_identically() {
    let rt = rt();
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _) = start(dir.path(), Via::Tcp, &[], &[]);
    let proxy = CuttingProxy::start(server.addr.clone().expect("addr"));
    rt.block_on(async {
        let c = Client::connect(Transport::Tcp(proxy.addr.clone()), cfg())
            .await
            .expect("connect");
        let sid = new_session(&c).await;
        let mut events = c.events();
        // The ack of the next turn/start is lost with its connection.
        let (id, wire) = c
            .prepare(CommandSpec::TurnStart {
                session_id: sid.clone(),
                text: "!sleep 50 once".into(),
                if_busy: None,
            })
            .await
            .expect("prepare");
        proxy.arm(&format!("\"result\":{{\"commandId\":\"{id}\""));
        let s = within(
            "the replayed turn/start",
            c.submit_with_id(id.clone(), wire),
        )
        .await
        .expect("submit");
        let lost = proxy
            .swallowed
            .lock()
            .expect("lock")
            .clone()
            .expect("the first ack was swallowed");
        assert_eq!(s.command_id, id);
        assert_eq!(
            s.outcome.answer_value(),
            Some(json!({"result": lost["result"]})),
            "the replay's ack is value-identical to the lost one"
        );
        let mut saw_disconnect = false;
        while let Ok(e) = events.try_recv() {
            saw_disconnect |= e == ClientEvent::Disconnected;
        }
        assert!(saw_disconnect, "the connection really dropped");
        let turn = s
            .outcome
            .ack()
            .and_then(|a| a.turn_id())
            .expect("turn")
            .clone();
        within("turn end", c.wait_turn_end(&sid, &turn))
            .await
            .expect("wait");
        let h = history(&c, &sid).await;
        assert_eq!(
            count(&h, "turn/started"),
            1,
            "one command, one turn: {h:#?}"
        );
        c.close().await;
    });
}

#[test]
fn a_stale_write_is_rejected_never_applied_and_reconciled_with_a_new_command() {
    let rt = rt();
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _) = start(dir.path(), Via::Tcp, &[], &[]);
    let addr = server.addr.clone().expect("addr");
    rt.block_on(async {
        let a = Client::connect(Transport::Tcp(addr.clone()), cfg())
            .await
            .expect("a");
        let b = Arc::new(
            Client::connect(Transport::Tcp(addr), cfg())
                .await
                .expect("b"),
        );
        let sid = new_session(&a).await;
        let set = |k: &str, v: Value| {
            let mut m = Map::new();
            m.insert(k.into(), v);
            m
        };
        // B decides on revision 0 while A writes first.
        let first = a
            .submit(CommandSpec::StateUpdate {
                session_id: sid.clone(),
                expected_revision: 0,
                set: set("owner", json!("a")),
            })
            .await
            .expect("a writes");
        assert!(matches!(
            first.outcome.ack().map(|x| &x.fields),
            Some(AckFields::StateUpdate { revision: 1 })
        ));
        let stale_spec = CommandSpec::StateUpdate {
            session_id: sid.clone(),
            expected_revision: 0,
            set: set("owner", json!("b")),
        };
        let stale = b.submit(stale_spec).await.expect("b writes");
        let r = stale.outcome.rejection().expect("stale").clone();
        assert_eq!(r.reason, RejectReason::StaleRevision);
        assert_eq!(
            r.current_revision,
            Some(1),
            "the SDK returns the current revision"
        );

        // The loop: A slips one more write in after B's first fetch, so B's
        // first decision is stale too; B re-fetches and decides anew.
        let calls = Arc::new(Mutex::new(Vec::<Value>::new()));
        let (calls2, a_ref, sid2) = (calls.clone(), &a, sid.clone());
        let handle = tokio::runtime::Handle::current();
        let step = b
            .update_state(&sid, 3, move |view| {
                calls2.lock().expect("lock").push(json!(view.kv.clone()));
                if calls2.lock().expect("lock").len() == 1 {
                    tokio::task::block_in_place(|| {
                        handle.block_on(a_ref.submit(CommandSpec::StateUpdate {
                            session_id: sid2.clone(),
                            expected_revision: view.revision,
                            set: {
                                let mut m = Map::new();
                                m.insert("owner".into(), json!("a-again"));
                                m
                            },
                        }))
                    })
                    .expect("a writes again");
                }
                let owner = view.kv.get("owner").cloned().unwrap_or(Value::Null);
                let mut m = Map::new();
                m.insert("seen_by_b".into(), owner);
                Some(m)
            })
            .await
            .expect("update_state");
        assert_eq!(
            step,
            WriteStep::Done {
                revision: 3,
                attempts: 2
            }
        );
        let seen = calls.lock().expect("lock").clone();
        assert_eq!(seen.len(), 2, "one fetch per decision: {seen:?}");
        assert_eq!(
            seen[1]["owner"],
            json!("a-again"),
            "the new decision saw the new state"
        );

        // The stale writes were never applied; replaying the first one's id
        // answers the same rejection and still applies nothing.
        let replay = b
            .submit_with_id(
                stale.command_id.clone(),
                CommandSpec::StateUpdate {
                    session_id: sid.clone(),
                    expected_revision: 0,
                    set: set("owner", json!("b")),
                }
                .to_wire(),
            )
            .await
            .expect("replay");
        assert_eq!(replay.outcome.answer_value(), stale.outcome.answer_value());
        let read = b
            .read(ReadSpec::SessionRead {
                session_id: sid.clone(),
            })
            .await
            .expect("read")
            .expect("session/read");
        let state = &read["history"]["snapshot"]["state"];
        assert_eq!(state["revision"], json!(3));
        assert_eq!(
            state["kv"],
            json!({"owner": "a-again", "seen_by_b": "a-again"})
        );
        assert_eq!(count(&history(&b, &sid).await, "state/updated"), 3);
        a.close().await;
    });
}

#[test]
fn a_keyed_effect_outcome_arrives_typed_with_its_key() {
    let rt = rt();
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _) = start(dir.path(), Via::Tcp, &[], &[]);
    rt.block_on(async {
        let c = Client::connect(Transport::Tcp(server.addr.clone().expect("addr")), cfg())
            .await
            .expect("connect");
        let mut events = c.events();
        let sid = new_session(&c).await;
        let s = c
            .submit(CommandSpec::TurnStart {
                session_id: sid.clone(),
                text: "!effect keyed pay-7".into(),
                if_busy: None,
            })
            .await
            .expect("turn");
        let turn = s
            .outcome
            .ack()
            .and_then(|a| a.turn_id())
            .expect("turn")
            .clone();
        let approval: ApprovalId = within("approval", async {
            loop {
                if let Ok(ClientEvent::View(v)) = events.recv().await {
                    if let Notification::ApprovalRequested { approval_id, .. } = v.notification {
                        return approval_id;
                    }
                }
            }
        })
        .await;
        let d = c
            .submit(CommandSpec::ApprovalDecide {
                session_id: sid.clone(),
                approval_id: approval.clone(),
                source_index: 0,
                choice_id: "approve".into(),
            })
            .await
            .expect("decide");
        assert!(
            matches!(d.outcome, CommandOutcome::Accepted(_)),
            "{:?}",
            d.outcome
        );
        let tool = within("the tool call's end", async {
            loop {
                if let Ok(ClientEvent::View(v)) = events.recv().await {
                    if let Notification::ItemCompleted { item, .. } = v.notification {
                        if let Some(tc) = item.tool_call {
                            return tc;
                        }
                    }
                }
            }
        })
        .await;
        assert_eq!(tool.tool, "keyed");
        assert_eq!(tool.effect_outcome, Some(EffectOutcome::Committed));
        assert_eq!(
            tool.effect_key.map(|k| k.as_str().to_string()),
            Some(format!("{sid}:{approval}")),
            "the key PROTOCOL.md section 5 names"
        );
        within("turn end", c.wait_turn_end(&sid, &turn))
            .await
            .expect("wait");
        c.close().await;
    });
}

#[test]
fn a_host_crash_between_intake_and_ack_is_healed_by_a_replay_at_the_restarted_host() {
    let rt = rt();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("host");
    let sock = dir.path().join("msp.sock");
    // Gated answer 1 is the session/start; the 2nd, the state/update, dies.
    let (mut first, _) = start(
        &data,
        Via::Unix(sock.clone()),
        &[],
        &[("MSP_CRASH_AT", "after-intake-before-ack:2")],
    );
    rt.block_on(async {
        let c = Arc::new(
            Client::connect(Transport::Unix(sock.clone()), cfg())
                .await
                .expect("connect"),
        );
        let mut events = c.events();
        let sid = new_session(&c).await;
        let mut set = Map::new();
        set.insert("x".into(), json!(1));
        let spec = CommandSpec::StateUpdate {
            session_id: sid.clone(),
            expected_revision: 0,
            set,
        };
        let pending = {
            let (c, spec) = (c.clone(), spec.clone());
            tokio::spawn(async move { c.submit(spec).await })
        };
        let status = tokio::task::spawn_blocking(move || {
            let st = first.wait_exit();
            (st, first)
        })
        .await
        .expect("join");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.0.signal(), Some(6), "aborted by the failpoint");
        // The restarted host, same data directory, same socket.
        let (_second, _) = start(&data, Via::Unix(sock.clone()), &[], &[]);
        let s = within("the replay at the restarted host", pending)
            .await
            .expect("join")
            .expect("submit");
        let applied = match &s.outcome {
            CommandOutcome::Accepted(a) => {
                assert_eq!(a.fields, AckFields::StateUpdate { revision: 1 });
                true
            }
            CommandOutcome::Rejected(r) => {
                assert_eq!(r.reason, RejectReason::Abandoned, "{r:?}");
                false
            }
            other => panic!("neither the ack nor abandoned: {other:?}"),
        };
        let again = c
            .submit_with_id(s.command_id.clone(), spec.to_wire())
            .await
            .expect("replay");
        assert_eq!(again.outcome.answer_value(), s.outcome.answer_value());
        let h = history(&c, &sid).await;
        assert_eq!(count(&h, "state/updated"), usize::from(applied), "{h:#?}");
        let mut saw = (false, false);
        while let Ok(e) = events.try_recv() {
            saw.0 |= e == ClientEvent::Disconnected;
            saw.1 |= matches!(e, ClientEvent::Resumed { .. });
        }
        assert_eq!(
            saw,
            (true, true),
            "the link dropped and the session was resumed"
        );
    });
}

#[test]
fn an_ephemeral_hosts_unanswered_command_ends_host_lost_and_is_not_replayed() {
    let rt = rt();
    let dir = tempfile::tempdir().expect("tempdir");
    let eph = ["--durability", "ephemeral"];
    let (first, _) = start(&dir.path().join("a"), Via::Tcp, &eph, &[]);
    let proxy = CuttingProxy::start(first.addr.clone().expect("addr"));
    rt.block_on(async {
        let c = Client::connect(Transport::Tcp(proxy.addr.clone()), cfg())
            .await
            .expect("connect");
        let mut events = c.events();
        let sid = new_session(&c).await;
        let (id, wire) = c
            .prepare(CommandSpec::StateUpdate {
                session_id: sid.clone(),
                expected_revision: 0,
                set: Map::new(),
            })
            .await
            .expect("prepare");
        // The ack is lost with the link, and the host dies: another
        // ephemeral host answers at the same address from now on.
        proxy.arm(&format!("\"result\":{{\"commandId\":\"{id}\""));
        let (second, _) = start(&dir.path().join("b"), Via::Tcp, &eph, &[]);
        let pending = {
            let c = &c;
            let (id, wire) = (id.clone(), wire.clone());
            async move { c.submit_with_id(id, wire).await }
        };
        let swallowed = async {
            loop {
                if proxy.swallowed.lock().expect("lock").is_some() {
                    proxy.set_upstream(second.addr.clone().expect("addr"));
                    first.kill9();
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        let (s, ()) = within("the lost command's end", async { tokio::join!(pending, swallowed) }).await;
        let s = s.expect("submit");
        assert!(
            matches!(
                &s.outcome,
                CommandOutcome::Error(e) if e.kind == msp::client::ErrorKind::HostLost { ever_sent: true }
            ),
            "{:?}",
            s.outcome
        );
        let mut lost = false;
        while let Ok(e) = events.try_recv() {
            lost |= e == ClientEvent::SessionLost { session_id: sid.clone() };
        }
        assert!(lost, "the session is reported lost");
        let read = c
            .read(ReadSpec::SessionRead { session_id: sid.clone() })
            .await
            .expect("read");
        assert!(
            matches!(&read, Err(e) if e.kind == msp::client::ErrorKind::SessionNotFound),
            "the new host never had it: {read:?}"
        );
        drop(second);
    });
}

#[test]
fn the_test_hatch_provokes_command_id_conflict_and_the_original_answer_stands() {
    let rt = rt();
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _) = start(dir.path(), Via::Tcp, &[], &[]);
    rt.block_on(async {
        let c = Client::connect(Transport::Tcp(server.addr.clone().expect("addr")), cfg())
            .await
            .expect("connect");
        let sid = new_session(&c).await;
        let spec = CommandSpec::TurnStart {
            session_id: sid.clone(),
            text: "original".into(),
            if_busy: None,
        };
        let first = c.submit(spec.clone()).await.expect("submit");
        assert!(first.outcome.ack().is_some(), "{:?}", first.outcome);
        let mut other = spec.to_wire().params;
        other.insert(
            "input".into(),
            json!([{"type": "text", "text": "another payload"}]),
        );
        let clash = c
            .submit_unchecked_for_tests(first.command_id.clone(), "turn/start", other)
            .await
            .expect("unchecked");
        assert_eq!(
            clash.outcome.rejection().map(|r| r.reason.clone()),
            Some(RejectReason::CommandIdConflict)
        );
        let again = c
            .submit_with_id(first.command_id.clone(), spec.to_wire())
            .await
            .expect("replay");
        assert_eq!(again.outcome.answer_value(), first.outcome.answer_value());
        let h = history(&c, &sid).await;
        assert_eq!(count(&h, "turn/started"), 1);
        c.close().await;
    });
}
