//! The conformance corpus and the runner that checks it: every scenario in
//! `corpus/conformance/` passes, the corpus covers what it claims to, and
//! the runner really fails (with the right place, path and values) when a
//! scenario and the host disagree.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use msp::conformance::compare::DiffKind;
use msp::conformance::scenario::{self, LineKind, MismatchKind, Scenario};
use msp::conformance::{self as conf, FileOutcome};
use serde_json::Value;

/// The seed document's recorded `turn/cancel` request and ack (seed 000).
const SEED_REQUEST: &str = r#"{"jsonrpc":"2.0","id":4,"method":"turn/cancel","params":{"sessionId":"0198f0aa-1111-7000-8000-0000000000aa","commandId":"018f6a21-0f0f-7aaa-bbbb-0123456789ab","turnId":"018f6a1e-9b3c-7c21-a54a-2f30bd3c9f10"}}"#;
const SEED_ACK: &str = r#"{"jsonrpc":"2.0","id":4,"result":{"commandId":"018f6a21-0f0f-7aaa-bbbb-0123456789ab","status":"accepted","turnId":"018f6a1e-9b3c-7c21-a54a-2f30bd3c9f10"}}"#;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/conformance")
}

fn corpus_files() -> Vec<PathBuf> {
    let dir = corpus_dir();
    conf::expand_paths(&[dir.display().to_string()]).expect("the corpus directory lists")
}

fn seed_path() -> PathBuf {
    corpus_dir().join("turn-cancel-seed.ndjson")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).expect("readable scenario")
}

/// Runs scenario text; panics if it is unusable or the host could not be
/// driven.
fn check(text: &str) -> scenario::RunReport {
    let s = Scenario::parse(text).expect("well-formed scenario");
    scenario::run(&s).expect("the host can be driven")
}

/// The 1-based number of the first line containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .expect("needle present")
        + 1
}

fn server_line(raw: &str) -> String {
    serde_json::json!({"dir": "server", "raw": raw}).to_string()
}

#[test]
fn every_corpus_scenario_passes() {
    let files = corpus_files();
    assert!(
        files.len() >= 40,
        "the corpus has {} scenarios",
        files.len()
    );
    let failures: Vec<String> = files
        .iter()
        .map(|f| conf::check_file(f))
        .filter(|r| !matches!(r.outcome, FileOutcome::Passed(_)))
        .map(|r| r.to_string())
        .collect();
    assert!(
        failures.is_empty(),
        "failing scenarios:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_corpus_scenario_has_a_description_and_compares_frames() {
    for f in corpus_files() {
        let s = conf::load(&f).expect("well-formed");
        let d = s.meta.description.clone().unwrap_or_default();
        assert!(d.len() >= 20, "{}: no meaningful description", f.display());
        let servers = s
            .lines
            .iter()
            .filter(|l| matches!(l.kind, LineKind::Server { .. }))
            .count();
        assert!(servers >= 1, "{}: expects no server frame", f.display());
    }
}

#[test]
fn corpus_covers_every_method_error_kind_and_rejection_reason() {
    let mut methods = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    let mut reasons = BTreeSet::new();
    for f in corpus_files() {
        let s = conf::load(&f).expect("well-formed");
        for l in &s.lines {
            match &l.kind {
                LineKind::Client { raw, .. } => {
                    if let Ok(v) = serde_json::from_str::<Value>(raw) {
                        if let Some(m) = v["method"].as_str() {
                            methods.insert(m.to_string());
                        }
                    }
                }
                LineKind::Server { value, .. } => {
                    if let Some(k) = value["error"]["data"]["kind"].as_str() {
                        kinds.insert(k.to_string());
                    }
                    if let Some(r) = value["error"]["data"]["reason"].as_str() {
                        reasons.insert(r.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    let want_methods = [
        "initialize",
        "session/start",
        "session/resume",
        "session/read",
        "turn/start",
        "turn/steer",
        "turn/unqueue",
        "turn/interrupt",
        "turn/cancel",
        "task/stop",
        "task/stopAll",
        "approval/decide",
        "approval/listPending",
        "state/update",
        "view/subscribe",
        "view/unsubscribe",
        "view/page",
    ];
    for m in want_methods {
        assert!(methods.contains(m), "no scenario sends {m}");
    }
    let want_kinds = [
        "parseError",
        "invalidRequest",
        "notInitialized",
        "alreadyInitialized",
        "methodNotFound",
        "invalidParams",
        "inputTooLarge",
        "notFound",
        "sessionNotFound",
        "sessionInUse",
        "sessionNotLoaded",
        "commandRejected",
        "approvalNotFound",
        "approvalAlreadyResolved",
        "approvalChoiceInvalid",
        "approvalRequirementStale",
    ];
    for k in want_kinds {
        assert!(kinds.contains(k), "no scenario expects error kind {k}");
    }
    let want_reasons = [
        "command_id_conflict",
        "abandoned",
        "session_id_conflict",
        "launch_failed",
        "deferred_start_failed",
        "already_launched",
        "already_terminal",
        "missing_run",
        "missing_task",
        "not_running",
        "queue_full",
        "stale_revision",
        "missingAnchor",
    ];
    for r in want_reasons {
        assert!(reasons.contains(r), "no scenario expects reason {r}");
    }
}

#[test]
fn seed_exchange_is_carried_verbatim() {
    let text = read(&seed_path());
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let req = lines
        .iter()
        .position(|l| l["dir"] == "client" && l["raw"] == SEED_REQUEST);
    let ack = lines
        .iter()
        .position(|l| l["dir"] == "server" && l["raw"] == SEED_ACK);
    let (req, ack) = (
        req.expect("seed request verbatim"),
        ack.expect("seed ack verbatim"),
    );
    assert_eq!(ack, req + 1, "the ack is the first frame after the request");
}

#[test]
fn recording_the_corpus_reproduces_it_byte_for_byte() {
    for f in corpus_files() {
        let text = read(&f);
        let s = Scenario::parse(&text).expect("well-formed");
        let again = scenario::record(&s).expect("the host can be driven");
        assert!(
            again == text,
            "{}: recording changed the file (nondeterminism?)",
            f.display()
        );
    }
}

#[test]
fn a_wrong_expected_value_is_reported_at_its_line_and_path_with_both_values() {
    let text = read(&seed_path());
    let wrong_turn = "018f6a1e-9b3c-7c21-a54a-00000000beef";
    let bad_ack = SEED_ACK.replace("2f30bd3c9f10\"}}", "00000000beef\"}}");
    assert_ne!(bad_ack, SEED_ACK);
    let edited = text.replace(&server_line(SEED_ACK), &server_line(&bad_ack));
    assert_ne!(edited, text, "the seed ack line was found and edited");
    let report = check(&edited);
    assert_eq!(report.mismatches.len(), 1, "{:?}", report.mismatches);
    let m = &report.mismatches[0];
    assert_eq!(m.line, line_of(&edited, "00000000beef"));
    let MismatchKind::Frame { diffs } = &m.kind else {
        panic!("expected a frame diff, got {m}")
    };
    assert_eq!(diffs.len(), 1);
    assert_eq!(diffs[0].path, "$.result.turnId");
    assert_eq!(diffs[0].kind, DiffKind::Value);
    assert_eq!(diffs[0].expected, Some(Value::from(wrong_turn)));
    assert_eq!(
        diffs[0].received,
        Some(Value::from("018f6a1e-9b3c-7c21-a54a-2f30bd3c9f10"))
    );
    let shown = m.to_string();
    assert!(
        shown.contains("$.result.turnId") && shown.contains("beef"),
        "{shown}"
    );
}

#[test]
fn a_missing_frame_fails_at_the_expected_line() {
    let text = read(&seed_path());
    // Expect the ack twice: the host sends it once.
    let ack = server_line(SEED_ACK);
    let edited = text.replace(&ack, &format!("{ack}\n{ack}"));
    let report = check(&edited);
    assert!(!report.passed());
    // The second copy now stands where turn/completed was expected, so the
    // first mismatch is at the copy, and the last expected frame of the
    // step is missing.
    let missing: Vec<_> = report
        .mismatches
        .iter()
        .filter(|m| matches!(m.kind, MismatchKind::Missing { .. }))
        .collect();
    assert_eq!(missing.len(), 1, "{:?}", report.mismatches);
    assert_eq!(
        report.mismatches[0].line,
        line_of(&edited, "0123456789ab\\\",\\\"status") + 1
    );
}

#[test]
fn an_extra_frame_fails_after_the_step_that_caused_it() {
    let text = read(&seed_path());
    let edited = text.replace(&format!("{}\n", server_line(SEED_ACK)), "");
    assert_ne!(edited, text);
    let report = check(&edited);
    let extra: Vec<_> = report
        .mismatches
        .iter()
        .filter(|m| matches!(m.kind, MismatchKind::Extra { .. }))
        .collect();
    assert_eq!(extra.len(), 1, "{:?}", report.mismatches);
    // Reported against the client line that caused it, the seed request.
    assert_eq!(
        extra[0].line,
        line_of(&edited, "018f6a21-0f0f-7aaa-bbbb-0123456789ab")
    );
}

/// The agentMessage item id of `turn-start-fresh.ndjson`, as recorded.
fn fresh_turn_ids(text: &str) -> (String, String) {
    let s = Scenario::parse(text).expect("well-formed");
    let mut user = None;
    let mut agent = None;
    for l in &s.lines {
        if let LineKind::Server { value, .. } = &l.kind {
            let item = &value["params"]["item"];
            match item["kind"].as_str() {
                Some("userMessage") => user = item["itemId"].as_str().map(str::to_string),
                Some("agentMessage") => agent = item["itemId"].as_str().map(str::to_string),
                _ => {}
            }
        }
    }
    (
        user.expect("a userMessage"),
        agent.expect("an agentMessage"),
    )
}

#[test]
fn normalized_ids_may_be_spelled_differently_but_must_be_one_to_one() {
    let text = read(&corpus_dir().join("turn-start-fresh.ndjson"));
    assert!(
        text.contains("**.itemId"),
        "the scenario normalizes item ids"
    );
    let (user, agent) = fresh_turn_ids(&text);
    assert_ne!(user, agent);
    // A consistent respelling of one id passes.
    let respelled = text.replace(&agent, "0198f0aa-0000-7000-8000-00000000abcd");
    assert!(
        check(&respelled).passed(),
        "{:?}",
        check(&respelled).mismatches
    );
    // Two different expected ids meeting one received id fails: the last
    // agentMessage frame expects a new id where the host repeats its own.
    let last = text.rfind(&agent).expect("agent id present");
    let mut two_to_one = text.clone();
    two_to_one.replace_range(
        last..last + agent.len(),
        "0198f0aa-0000-7000-8000-00000000ffff",
    );
    let report = check(&two_to_one);
    assert_eq!(report.mismatches.len(), 1, "{:?}", report.mismatches);
    let MismatchKind::Frame { diffs } = &report.mismatches[0].kind else {
        panic!("expected a frame diff")
    };
    assert_eq!(diffs[0].path, "$.params.item.itemId");
    assert_eq!(
        diffs[0].kind,
        DiffKind::NotOneToOne {
            other: Value::from(agent.clone())
        }
    );
    // One expected id meeting two received ids fails too: expect the user
    // message's id where the agent message's id is received.
    let mut one_to_two = text.clone();
    one_to_two.replace_range(last..last + agent.len(), &user);
    let report = check(&one_to_two);
    assert_eq!(report.mismatches.len(), 1, "{:?}", report.mismatches);
    let MismatchKind::Frame { diffs } = &report.mismatches[0].kind else {
        panic!("expected a frame diff")
    };
    assert_eq!(
        diffs[0].kind,
        DiffKind::NotOneToOne {
            other: Value::from(user.clone())
        }
    );
}

#[test]
fn exit_codes_are_0_pass_1_mismatch_2_usage() {
    let seed = seed_path().display().to_string();
    assert_eq!(conf::main(vec![seed.clone()]), conf::EXIT_PASS);
    assert_eq!(
        conf::main(vec![corpus_dir().display().to_string()]),
        conf::EXIT_PASS
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let wrong = dir.path().join("wrong.ndjson");
    let bad_ack = SEED_ACK.replace("\"accepted\"", "\"rejected\"");
    std::fs::write(
        &wrong,
        read(&seed_path()).replace(&server_line(SEED_ACK), &server_line(&bad_ack)),
    )
    .unwrap();
    assert_eq!(
        conf::main(vec![wrong.display().to_string()]),
        conf::EXIT_MISMATCH
    );

    let ill = dir.path().join("ill.ndjson");
    std::fs::write(&ill, "{\"dir\":\"client\",\"raw\":\"{}\"}\n{\"dir\":\"control\",\"op\":\"advance\",\"ms\":\"soon\"}\n").unwrap();
    assert_eq!(
        conf::main(vec![ill.display().to_string()]),
        conf::EXIT_USAGE
    );
    let FileOutcome::Unusable(e) = conf::check_file(&ill).outcome else {
        panic!("an ill-formed file is unusable")
    };
    assert_eq!(e.line, 2);
    assert!(e.reason.contains("ms"), "{e}");

    assert_eq!(conf::main(vec![]), conf::EXIT_USAGE);
    assert_eq!(
        conf::main(vec!["--frobnicate".into(), seed.clone()]),
        conf::EXIT_USAGE
    );
    assert_eq!(
        conf::main(vec![dir.path().join("absent.ndjson").display().to_string()]),
        conf::EXIT_USAGE
    );
    // Several files: the most severe outcome wins.
    assert_eq!(
        conf::main(vec![seed.clone(), wrong.display().to_string()]),
        conf::EXIT_MISMATCH
    );
    assert_eq!(
        conf::main(vec![wrong.display().to_string(), ill.display().to_string()]),
        conf::EXIT_USAGE
    );
}

#[test]
fn record_writes_the_hosts_frames_into_a_skeleton() {
    let dir = tempfile::tempdir().expect("temp dir");
    let skeleton: String = read(&seed_path())
        .lines()
        .filter(|l| !l.starts_with("{\"dir\":\"server\""))
        .map(|l| format!("{l}\n"))
        .collect();
    let path = dir.path().join("skeleton.ndjson");
    std::fs::write(&path, &skeleton).unwrap();
    assert_eq!(
        conf::main(vec![path.display().to_string()]),
        conf::EXIT_MISMATCH,
        "frames unexpected"
    );
    assert_eq!(
        conf::main(vec!["record".into(), path.display().to_string()]),
        conf::EXIT_PASS
    );
    assert_eq!(
        conf::main(vec![path.display().to_string()]),
        conf::EXIT_PASS
    );
    let recorded = read(&path);
    let acks = recorded
        .lines()
        .filter(|l| l.contains("\\\"status\\\":\\\"accepted\\\""))
        .count();
    assert!(
        acks >= 2,
        "the recording holds the turn/start and turn/cancel acks"
    );
}

#[test]
fn the_binary_runs_a_scenario_and_reports_pass() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_msp"))
        .args(["conformance", &seed_path().display().to_string()])
        .output()
        .expect("msp runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("PASS") && stdout.contains("turn-cancel-seed.ndjson"),
        "{stdout}"
    );
    let none = std::process::Command::new(env!("CARGO_BIN_EXE_msp"))
        .arg("conformance")
        .output()
        .expect("msp runs");
    assert_eq!(none.status.code(), Some(2));
}
