//! The client core against public golden transcripts: the server lines of
//! a transcript are fed to a [`ClientCore`], the application calls its
//! client lines imply are made, and every frame the core sends must match
//! the transcript's client line, with the client's own request ids and
//! command ids unified one-to-one (the SDK mints its own). Server lines
//! are rewritten with that unification before they are fed (acks echo the
//! command id, and a fresh turn is named by it). No extra frame may be
//! sent, and the typed outcomes and events must say what the transcript
//! says.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

use msp::client::{
    AckFields, ApprovalId, ClientConfig, ClientCore, ClientEvent, CommandOutcome, CommandSpec,
    Completion, Entropy, ErrorKind, Notification, Output, SessionId, TurnEnd, TurnId,
};
use msp::conformance::compare::{Comparator, Rules};
use msp::conformance::transcript::{Dir, Transcript};
use msp::proto::params::IfBusy;
use serde_json::{Map, Value};

/// What one transcript run produced.
struct Run {
    done: Vec<CommandOutcome>,
    events: Vec<ClientEvent>,
    core: ClientCore,
    cmp: Comparator,
}

impl Run {
    fn turn_ends(&self) -> Vec<(String, TurnEnd)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::View(v) => match &v.notification {
                    Notification::TurnEnded { turn_id, end, .. } => {
                        Some((turn_id.as_str().to_string(), end.clone()))
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    /// Our command id for a command id written in the transcript.
    fn ours(&self, transcript_id: &str) -> String {
        self.cmp
            .mapped(&Value::String(transcript_id.into()))
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{transcript_id} was never unified"))
            .to_string()
    }
}

fn entropy() -> Box<dyn Entropy + Send> {
    let mut x: u128 = 7;
    Box::new(move || {
        x = x
            .wrapping_mul(0x2360_ED05_1FC6_5DA4_4385_DF64_9FCC_F645)
            .wrapping_add(0x5851_F42D_4C95_7F2D);
        x
    })
}

/// The application call a transcript's client command line implies.
fn spec_of(method: &str, p: &Map<String, Value>) -> CommandSpec {
    let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
    let sid = || SessionId::parse(&s("sessionId").expect("sessionId")).expect("a UUID");
    match method {
        "session/start" => CommandSpec::SessionStart {
            session_id: s("sessionId").map(|x| SessionId::parse(&x).expect("a UUID")),
            workspace_root: s("workspaceRoot"),
        },
        "session/resume" => CommandSpec::SessionResume {
            session_id: sid(),
            cursor: s("cursor"),
            exclude_items: p.get("excludeItems") == Some(&Value::Bool(true)),
        },
        "turn/start" => CommandSpec::TurnStart {
            session_id: sid(),
            text: p["input"][0]["text"].as_str().expect("text").into(),
            if_busy: s("ifBusy").map(|b| match b.as_str() {
                "queue" => IfBusy::Queue,
                "steer" => IfBusy::Steer,
                _ => IfBusy::Replace,
            }),
        },
        "turn/unqueue" => CommandSpec::TurnUnqueue {
            session_id: sid(),
            turn_id: TurnId::new(s("turnId").expect("turnId")).expect("t"),
        },
        "approval/decide" => CommandSpec::ApprovalDecide {
            session_id: sid(),
            approval_id: ApprovalId::new(s("approvalId").expect("approvalId")).expect("a"),
            source_index: p["requirementId"]["sourceIndex"].as_u64().expect("index"),
            choice_id: s("choiceId").expect("choiceId"),
        },
        other => panic!("no application call for {other}"),
    }
}

/// Plays `corpus/msp/<name>` against a fresh core; see the module docs.
fn check(name: &str) -> Run {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus/msp")
        .join(name);
    let t = Transcript::load(&dir).expect("transcript");
    let cfg = ClientConfig {
        client_name: "conformance".into(),
        client_version: "0.0.0".into(),
        ..ClientConfig::default()
    };
    let mut core = ClientCore::new(cfg, entropy());
    let now = t.manifest.clock_start_ms;
    let mut cmp = Comparator::new(
        Rules::exact()
            .with_normalize(["params.commandId", "params.turnId", "params.expectedTurnId"])
            .expect("patterns"),
    );
    // Our request ids <-> the transcript's, one-to-one.
    let mut ids: BTreeMap<String, Value> = BTreeMap::new();
    let mut ids_back: BTreeMap<String, Value> = BTreeMap::new();
    let mut out: VecDeque<Value> = VecDeque::new();
    let mut done = Vec::new();
    let mut events = Vec::new();
    core.handle_connected(now);
    let drain = |core: &mut ClientCore,
                 out: &mut VecDeque<Value>,
                 done: &mut Vec<CommandOutcome>,
                 events: &mut Vec<ClientEvent>| {
        while let Some(o) = core.poll_output() {
            let Output::Send(bytes) = o else {
                panic!("{name}: the core dropped the link")
            };
            for l in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                out.push_back(serde_json::from_slice(l).expect("JSON"));
            }
        }
        while let Some(c) = core.poll_completion() {
            if let Completion::Command { outcome, .. } = c {
                done.push(outcome);
            }
        }
        while let Some(e) = core.poll_event() {
            events.push(e);
        }
    };
    drain(&mut core, &mut out, &mut done, &mut events);
    for line in &t.lines {
        let want = line.frame.clone().expect("JSON line");
        match line.dir {
            Dir::Server => {
                let mut f = cmp.rewrite(&want);
                if f.get("method").is_none() {
                    let key = f["id"].to_string();
                    f["id"] = ids.get(&key).cloned().unwrap_or_else(|| {
                        panic!("{name}:{}: an answer to no request", line.number)
                    });
                }
                let mut bytes = serde_json::to_vec(&f).expect("json");
                bytes.push(b'\n');
                core.handle_bytes(now, &bytes);
            }
            Dir::Client => {
                let is_command =
                    want.get("id").is_some() && want["params"].get("commandId").is_some();
                if out.is_empty() && is_command {
                    let method = want["method"].as_str().expect("method");
                    let params = cmp.rewrite(&want["params"]);
                    let mut params = params.as_object().expect("params").clone();
                    params.remove("commandId");
                    core.submit(now, &spec_of(method, &params)).expect("submit");
                }
            }
        }
        drain(&mut core, &mut out, &mut done, &mut events);
        if line.dir == Dir::Client {
            let mut got = out.pop_front().unwrap_or_else(|| {
                panic!(
                    "{name}:{}: the SDK sent nothing for {}",
                    line.number, line.raw
                )
            });
            let mut want = want.clone();
            if want.get("method").is_some() && want.get("id").is_some() {
                let (w, g) = (want["id"].clone(), got["id"].clone());
                let (wk, gk) = (w.to_string(), g.to_string());
                assert_eq!(
                    ids.entry(wk).or_insert(g.clone()),
                    &g,
                    "{name}:{}: request ids not one-to-one",
                    line.number
                );
                assert_eq!(
                    ids_back.entry(gk).or_insert(w.clone()),
                    &w,
                    "{name}:{}: request ids not one-to-one",
                    line.number
                );
                want.as_object_mut().expect("object").remove("id");
                got.as_object_mut().expect("object").remove("id");
            }
            let diffs = cmp.compare_frame(&want, &got);
            assert!(
                diffs.is_empty(),
                "{name}:{}: the SDK's frame differs:\n{}\nwant {want}\ngot  {got}",
                line.number,
                diffs
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
    assert!(out.is_empty(), "{name}: extra frames {out:?}");
    Run {
        done,
        events,
        core,
        cmp,
    }
}

fn sid() -> SessionId {
    SessionId::parse("0198f0aa-1111-7000-8000-0000000000aa").expect("sid")
}

#[test]
fn text_run_single_turn() {
    let r = check("text-run-single-turn");
    assert_eq!(r.done.len(), 2);
    assert_eq!(r.done[0].ack().and_then(|a| a.session_id()), Some(&sid()));
    let turn = r.ours("018f6a1e-9b3c-7c21-a54a-2f30bd3c9f10");
    assert!(matches!(
        &r.done[1].ack().expect("accepted").fields,
        AckFields::TurnStart { turn_id, started_new_turn: true, disposition } if turn_id.as_str() == turn && disposition == "started"
    ));
    assert_eq!(r.turn_ends().len(), 1);
    assert_eq!(r.turn_ends()[0].0, turn);
    assert_eq!(
        r.core.last_cursor(&sid()),
        Some("v:0198f0aa-1111-7000-8000-0000000000aa:10")
    );
}

#[test]
fn approval_round_trip() {
    let r = check("approval-round-trip");
    let requested: Vec<bool> = r
        .events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::View(v) => match &v.notification {
                Notification::ApprovalRequested { is_request, .. } => Some(*is_request),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(
        requested,
        [false, true],
        "the notification, then the server request"
    );
    assert!(matches!(
        r.done.last().and_then(|o| o.ack()).map(|a| &a.fields),
        Some(AckFields::Approval { approval_id }) if approval_id.as_str() == "0198f0ac-7777-7000-8000-0000000000e1"
    ));
    assert_eq!(r.turn_ends().len(), 1);
}

#[test]
fn pending_command_ack_launch() {
    let r = check("pending-command-ack-launch");
    let second = r.ours("018f6a32-2222-7000-8000-0000000000b2");
    assert!(matches!(
        &r.done[2].ack().expect("accepted").fields,
        AckFields::TurnStart { turn_id, started_new_turn: false, disposition } if turn_id.as_str() == second && disposition == "queued"
    ));
    let ends: Vec<String> = r.turn_ends().into_iter().map(|(t, _)| t).collect();
    assert_eq!(
        ends,
        [r.ours("018f6a32-1111-7000-8000-0000000000a1"), second]
    );
}

#[test]
fn turn_unqueued_round_trip() {
    let r = check("turn-unqueued-round-trip");
    let queued = r.ours("018f6a32-3333-7000-8000-0000000000c3");
    let ends = r.turn_ends();
    assert!(ends.contains(&(queued, TurnEnd::Unqueued)), "{ends:?}");
    assert_eq!(ends.len(), 2);
}

#[test]
fn cursor_retained_resumes_and_follows_the_suffix() {
    let r = check("cursor-retained");
    assert!(r
        .events
        .iter()
        .any(|e| matches!(e, ClientEvent::Resumed { snapshot: None, .. })));
    assert_eq!(
        r.core.last_cursor(&sid()),
        Some("v:0198f0aa-1111-7000-8000-0000000000aa:415")
    );
    assert_eq!(r.turn_ends().len(), 1);
}

#[test]
fn cursor_never_existed_is_a_typed_not_found() {
    let r = check("cursor-never-existed");
    assert!(matches!(
        &r.done[..],
        [CommandOutcome::Error(e)] if e.kind == ErrorKind::NotFound && e.data["reason"] == "missingAnchor"
    ));
}
