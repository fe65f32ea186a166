//! The request gate across real processes, against the real `msp serve`:
//!
//! - two application processes sharing one SQLite gate file receive one
//!   request id at once (a double click and a proxy retry): one command,
//!   one turn, and both answer the same outcome;
//! - an application process killed (SIGKILL) after its command was
//!   acknowledged but before it persisted the outcome is restarted: it
//!   re-sends the same command id and finds the same outcome, and the
//!   turn ran once.
//!
//! The application processes are this test binary re-executed with
//! `MSP_SDK_APP` set: [`app_process_entry_point`] is then the body of an
//! application instance (see its doc). Each prints one JSON line per step
//! on stdout.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{start, Via};
use msp::client::driver::{Client, Transport};
use msp::client::gate::sqlite::SqliteGateStore;
use msp::client::gate::{Gate, GateStore};
use msp::client::{ClientConfig, CommandSpec, ReadSpec, RequestId, SessionId};
use serde_json::{json, Value};

const APP_ENV: &str = "MSP_SDK_APP";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The body of one application instance, when this binary runs with
/// `MSP_SDK_APP` = `{"addr", "gate", "request", "session", "text",
/// "hang_after_ack"}`: it submits the turn through the gate (or, with
/// `hang_after_ack`, admits and sends but stops before persisting the
/// outcome, and waits to be killed), waits for the turn's end, and prints
/// what it saw. Without the variable (an ordinary test run) it checks that
/// the gate file it would open is refused when the path is unusable, so it
/// still asserts something.
#[test]
fn app_process_entry_point() {
    let Ok(cfg) = std::env::var(APP_ENV) else {
        let bad = Path::new("/nonexistent-dir/for/sure/gate.sqlite");
        assert!(SqliteGateStore::open(bad).is_err());
        return;
    };
    let cfg: Value = serde_json::from_str(&cfg).expect("config");
    let say = |v: Value| println!("APP {v}");
    rt().block_on(async {
        let client = Client::connect(
            Transport::Tcp(cfg["addr"].as_str().expect("addr").into()),
            ClientConfig {
                request_timeout_ms: 1_000,
                ..ClientConfig::default()
            },
        )
        .await
        .expect("connect");
        let store = SqliteGateStore::open(Path::new(cfg["gate"].as_str().expect("gate")))
            .expect("gate");
        let gate = Arc::new(Mutex::new(Gate::new(store)));
        let request = RequestId::new(cfg["request"].as_str().expect("request")).expect("r");
        let session = SessionId::parse(cfg["session"].as_str().expect("session")).expect("s");
        let spec = CommandSpec::TurnStart {
            session_id: session.clone(),
            text: cfg["text"].as_str().expect("text").into(),
            if_busy: None,
        };
        if cfg["hang_after_ack"] == json!(true) {
            // Admit and send like submit_gated, but "crash" before settle.
            let (fresh, wire) = client.prepare(spec).await.expect("prepare");
            let admission = gate
                .lock()
                .expect("lock")
                .admit(&request, None, &wire, fresh, 0)
                .expect("admit");
            let msp::client::gate::Admission::Send {
                command_id,
                command,
                ..
            } = admission
            else {
                panic!("a fresh request must be sent: {admission:?}")
            };
            let s = client
                .submit_with_id(command_id, command)
                .await
                .expect("submit");
            say(json!({"step": "acked", "commandId": s.command_id.as_str(), "answer": s.outcome.answer_value()}));
            // Wait to be killed (bounded, so that no process outlives a
            // broken parent for long).
            tokio::time::sleep(Duration::from_secs(120)).await;
            panic!("an application process that should have been killed was not");
        }
        let g = client
            .submit_gated(&gate, &request, None, spec)
            .await
            .expect("submit_gated");
        say(json!({"step": "outcome", "commandId": g.command_id.as_str(), "fromGate": g.from_gate, "answer": g.outcome.answer_value()}));
        let turn = g.outcome.ack().and_then(|a| a.turn_id()).expect("accepted").clone();
        let end = client.wait_turn_end(&session, &turn).await.expect("wait");
        say(json!({"step": "ended", "turnId": turn.as_str(), "end": format!("{end:?}")}));
        client.close().await;
    });
}

/// Starts one application process.
fn spawn_app(cfg: &Value) -> Child {
    Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            "app_process_entry_point",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(APP_ENV, cfg.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn an application process")
}

/// The `APP` lines a process prints, until `until` is seen (or the end of
/// its output). Fails after [`common::TIMEOUT`] without one.
fn app_lines(child: &mut Child, until: &str) -> Vec<Value> {
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(out);
        let mut line = String::new();
        while r.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            // libtest may print its own "test ... " prefix on the same line.
            if let Some(i) = line.find("APP {") {
                let v: Value = serde_json::from_str(line[i + 4..].trim()).expect("json");
                if tx.send(v).is_err() {
                    return;
                }
            }
            line.clear();
        }
    });
    let mut lines = Vec::new();
    loop {
        match rx.recv_timeout(common::TIMEOUT) {
            Ok(v) => {
                let stop = v["step"] == until;
                lines.push(v);
                if stop {
                    return lines;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return lines,
            Err(e) => panic!(
                "no {until} step within {:?} ({e:?}); got {lines:#?}",
                common::TIMEOUT
            ),
        }
    }
}

fn step<'a>(lines: &'a [Value], name: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["step"] == name)
        .unwrap_or_else(|| panic!("no {name} step in {lines:#?}"))
}

/// A host, a session started on it, and a client for the checks.
struct World {
    _dir: tempfile::TempDir,
    _server: common::Server,
    addr: String,
    gate: String,
    session: SessionId,
    rt: tokio::runtime::Runtime,
    client: Client,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, _) = start(&dir.path().join("host"), Via::Tcp, &[], &[]);
        let addr = server.addr.clone().expect("addr");
        let gate = dir.path().join("gate.sqlite").display().to_string();
        let rt = rt();
        let client = rt
            .block_on(Client::connect(
                Transport::Tcp(addr.clone()),
                ClientConfig::default(),
            ))
            .expect("connect");
        let s = rt
            .block_on(client.submit(CommandSpec::SessionStart {
                session_id: None,
                workspace_root: None,
            }))
            .expect("start");
        let session = s
            .outcome
            .ack()
            .and_then(|a| a.session_id().cloned())
            .expect("sid");
        World {
            _dir: dir,
            _server: server,
            addr,
            gate,
            session,
            rt,
            client,
        }
    }

    fn app(&self, request: &str, hang_after_ack: bool) -> Value {
        json!({"addr": self.addr, "gate": self.gate, "request": request, "session": self.session.as_str(), "text": format!("work for {request}"), "hang_after_ack": hang_after_ack})
    }

    /// Every `turn/started` of the session.
    fn turns_started(&self) -> Vec<Value> {
        let page = self
            .rt
            .block_on(self.client.read(ReadSpec::ViewPage {
                session_id: self.session.clone(),
                limit: 1_000,
                cursor: None,
                backward: false,
            }))
            .expect("read")
            .expect("view/page");
        page["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["method"] == "turn/started")
            .cloned()
            .collect()
    }
}

#[test]
fn two_processes_one_gate_file_one_request_id_give_one_turn() {
    let w = World::new();
    let cfg = w.app("double-click-1", false);
    let mut a = spawn_app(&cfg);
    let mut b = spawn_app(&cfg);
    let la = app_lines(&mut a, "ended");
    let lb = app_lines(&mut b, "ended");
    assert!(a.wait().expect("wait").success());
    assert!(b.wait().expect("wait").success());
    let (oa, ob) = (step(&la, "outcome"), step(&lb, "outcome"));
    assert_eq!(
        oa["commandId"], ob["commandId"],
        "one request, one command id"
    );
    assert_eq!(oa["answer"], ob["answer"], "one value-identical outcome");
    assert!(oa["answer"]["result"]["turnId"].is_string(), "{oa}");
    let turns = w.turns_started();
    assert_eq!(turns.len(), 1, "one turn: {turns:#?}");
    assert_eq!(turns[0]["params"]["commandId"], oa["commandId"]);
    // One row, holding that outcome.
    let mut g = Gate::new(SqliteGateStore::open(Path::new(&w.gate)).expect("gate"));
    let row = g
        .store_mut()
        .get(&RequestId::new("double-click-1").expect("r"))
        .expect("get")
        .expect("row");
    assert_eq!(json!(row.command_id.as_str()), oa["commandId"]);
    assert_eq!(row.outcome.as_ref(), Some(&oa["answer"]));
}

#[test]
fn an_app_killed_after_sending_finds_the_same_outcome_when_restarted() {
    let w = World::new();
    let mut first = spawn_app(&w.app("killed-1", true));
    let acked = app_lines(&mut first, "acked");
    let before = step(&acked, "acked").clone();
    first.kill().expect("SIGKILL");
    first.wait().expect("reap");
    // The gate holds the command but no outcome: the process died first.
    let mut g = Gate::new(SqliteGateStore::open(Path::new(&w.gate)).expect("gate"));
    let row = g
        .store_mut()
        .get(&RequestId::new("killed-1").expect("r"))
        .expect("get")
        .expect("the claim is durable");
    assert_eq!(json!(row.command_id.as_str()), before["commandId"]);
    assert!(row.outcome.is_none());

    let mut again = spawn_app(&w.app("killed-1", false));
    let lines = app_lines(&mut again, "ended");
    assert!(again.wait().expect("wait").success());
    let after = step(&lines, "outcome");
    assert_eq!(
        after["commandId"], before["commandId"],
        "the same command id is re-sent"
    );
    assert_eq!(after["fromGate"], json!(false));
    assert_eq!(
        after["answer"], before["answer"],
        "the host answers value-identically"
    );
    assert_eq!(w.turns_started().len(), 1, "the turn ran once");

    // A third arrival is answered by the gate alone.
    let mut third = spawn_app(&w.app("killed-1", false));
    let lines = app_lines(&mut third, "ended");
    assert!(third.wait().expect("wait").success());
    assert_eq!(step(&lines, "outcome")["fromGate"], json!(true));
    assert_eq!(step(&lines, "outcome")["answer"], before["answer"]);
    assert_eq!(w.turns_started().len(), 1);
}
