//! Unit tests of the core, one per ledger rule, driven through the
//! in-process [`Harness`] (no IO).

use serde_json::{json, Value};

use crate::core::{Durability, HostConfig};
use crate::harness::Harness;

pub(crate) const T0: u64 = 1_754_590_931_000;
const SID: &str = "0198f0aa-1111-7000-8000-0000000000aa";

fn cid(n: u32) -> String {
    format!("018f6a1e-9b3c-7c21-a54a-{n:012x}")
}

/// A harness with one initialized connection.
pub(crate) fn check(durability: Durability) -> (Harness, u64) {
    let mut h = Harness::new(HostConfig::new("/data", durability, 7), T0);
    let c = h.connect();
    init(&mut h, c);
    (h, c)
}

fn init(h: &mut Harness, c: u64) {
    h.send(c, &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}));
    h.send(c, &json!({"jsonrpc":"2.0","method":"initialized"}));
    let r = h.take(c);
    assert_eq!(r.len(), 1);
}

fn req(h: &mut Harness, c: u64, id: u64, method: &str, params: Value) -> Vec<Value> {
    h.send(c, &json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
    h.take(c)
}

fn response(frames: &[Value], id: u64) -> Value {
    frames
        .iter()
        .find(|f| f["id"] == json!(id) && f.get("method").is_none())
        .cloned()
        .unwrap_or_else(|| panic!("no response {id} in {frames:#?}"))
}

fn methods(frames: &[Value]) -> Vec<String> {
    frames.iter().filter_map(|f| f["method"].as_str().map(str::to_string)).collect()
}

fn start(h: &mut Harness, c: u64) -> Vec<Value> {
    req(h, c, 1, "session/start", json!({"commandId": cid(1), "sessionId": SID}))
}

fn turn(h: &mut Harness, c: u64, id: u64, n: u32, text: &str, extra: Value) -> Vec<Value> {
    let mut p = json!({"sessionId": SID, "commandId": cid(n), "input": [{"type":"text","text": text}]});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    req(h, c, id, "turn/start", p)
}

fn reason(v: &Value) -> &str {
    v["error"]["data"]["reason"].as_str().unwrap_or("")
}

#[test]
fn session_start_broadcasts_then_answers_and_replays_identically() {
    let (mut h, c) = check(Durability::Durable);
    let f = start(&mut h, c);
    assert_eq!(methods(&f), vec!["session/started"]);
    assert_eq!(f.len(), 2);
    let r = response(&f, 1);
    assert_eq!(r["result"]["viewCursor"], json!(format!("v:{SID}:0")));
    assert_eq!(r["result"]["session"]["path"], json!(format!("/data/sessions/{SID}/session.log")));
    let again = start(&mut h, c);
    assert_eq!(response(&again, 1)["result"], r["result"]);
    let conflict = req(&mut h, c, 2, "session/start", json!({"commandId": cid(1), "sessionId": SID, "workspaceRoot": "/x"}));
    assert_eq!(reason(&response(&conflict, 2)), "command_id_conflict");
    let other = req(&mut h, c, 3, "session/start", json!({"commandId": cid(2), "sessionId": SID}));
    assert_eq!(reason(&response(&other, 3)), "session_id_conflict");
}

#[test]
fn fresh_turn_runs_to_completion_with_ephemeral_deltas() {
    let (mut h, c) = check(Durability::Durable);
    start(&mut h, c);
    let f = turn(&mut h, c, 2, 10, "hello there, agent", json!({}));
    let ack = response(&f, 2);
    assert_eq!(ack["result"]["turnId"], json!(cid(10)));
    assert_eq!(ack["result"]["disposition"], json!("started"));
    assert_eq!(ack["result"]["startedNewTurn"], json!(true));
    h.advance(1000);
    let later = h.take(c);
    let all: Vec<Value> = f.into_iter().chain(later).collect();
    let m = methods(&all);
    assert_eq!(&m[..4], &["turn/started", "item/completed", "item/started", "item/delta"]);
    assert_eq!(m.last().unwrap(), "turn/completed");
    let deltas: String = all
        .iter()
        .filter(|f| f["method"] == "item/delta")
        .map(|f| f["params"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "echo: hello there, agent");
    assert_eq!(all[0]["id"], json!(2), "the ack precedes the events it causes");
}
