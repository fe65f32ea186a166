//! Every server frame our host emits, validated against the public MSP v1
//! JSON Schema (`schema/msp.schema.json`) by a real validator
//! (`msp::conformance::schema`, PROTOCOL.md section 7): the frames of every
//! conformance scenario (`corpus/conformance`) and of every public
//! transcript replay (`corpus/msp`). The frames of simulated runs are
//! checked in `sim/tests/schema_frames.rs`.
//!
//! Responses are checked against their method's result, errors against the
//! error table (code, kind, retryable), notifications and server requests
//! against their params; members outside the schema must be listed
//! extensions. Zero invalid frames.

use std::path::{Path, PathBuf};

use msp::conformance::scenario::{self, LineKind, Scenario};
use msp::conformance::schema::{check_extensions_are_additive, FrameChecker, Tally, EXTENSIONS};
use msp::conformance::transcript::{replay, Dir, ReplayError, ReplayOptions, Transcript};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn report(what: &str, t: &Tally) {
    println!(
        "{what}: {} frames validated, {} invalid",
        t.validated,
        t.invalid.len()
    );
    for (target, n) in &t.by_target {
        println!("    {n:5}  {target}");
    }
    for inv in t.invalid.iter().take(20) {
        println!("INVALID {inv}");
    }
}

/// Runs every scenario and feeds its client lines and the host's frames,
/// in wire order, to the checker.
fn scenario_frames() -> (Tally, usize) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("corpus/conformance"))
        .expect("corpus/conformance lists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ndjson"))
        .collect();
    files.sort();
    let mut c = FrameChecker::public().expect("the public schema loads");
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable");
        let s = Scenario::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let run = scenario::run(&s).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let server_after = |c: &mut FrameChecker, after: Option<usize>| {
            for r in run.received.iter().filter(|r| r.after_line_index == after) {
                c.server_line(
                    u64::from(r.conn),
                    &r.raw,
                    &format!("{name} (after line index {after:?})"),
                );
            }
        };
        server_after(&mut c, None);
        for (i, l) in s.lines.iter().enumerate() {
            if let LineKind::Client { conn, raw } = &l.kind {
                c.client_line(u64::from(*conn), raw);
            }
            server_after(&mut c, Some(i));
        }
    }
    (c.take_tally(), files.len())
}

/// Replays every public transcript that can be replayed (in scope or not:
/// the host's answers to methods it lacks are frames too).
fn transcript_frames() -> (Tally, usize) {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("corpus/msp"))
        .expect("corpus/msp lists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("transcript.ndjson").exists())
        .collect();
    dirs.sort();
    let mut c = FrameChecker::public().expect("the public schema loads");
    let mut replayed = 0;
    for d in &dirs {
        let t = Transcript::load(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        let r = match replay(&t, ReplayOptions::default()) {
            Ok(r) => r,
            Err(ReplayError::NotReplayable(_)) => continue,
            Err(e) => panic!("{}: {e}", t.name()),
        };
        replayed += 1;
        for (i, (conn, dir, line)) in r.wire.iter().enumerate() {
            match dir {
                Dir::Client => c.client_line(*conn, line),
                Dir::Server => {
                    c.server_line(*conn, line, &format!("{} (wire line {})", t.name(), i + 1));
                }
            }
        }
    }
    (c.take_tally(), replayed)
}

#[test]
fn every_conformance_scenario_frame_is_valid_against_the_public_schema() {
    let (t, files) = scenario_frames();
    report(&format!("conformance scenarios ({files} files)"), &t);
    assert!(files >= 50, "{files} scenario files");
    assert!(t.validated >= 700, "{} frames", t.validated);
    assert_eq!(
        t.invalid.len(),
        0,
        "invalid frames: see the INVALID lines above"
    );
    // The corpus exercises every kind of frame the schema types.
    for target in [
        "result initialize",
        "result session/start",
        "result session/resume",
        "result turn/start",
        "result approval/decide",
        "result view/page",
        "result session/read",
        "result approval/listPending",
        "notification turn/completed",
        "notification approval/resolved",
        "notification session/closed",
        "request approval/request",
        "error -32030",
        "error -32700",
    ] {
        assert!(
            t.by_target.contains_key(target),
            "no {target} frame in the corpus"
        );
    }
    // Every listed member extension occurs (none is dead weight) except
    // logCorrupt's, which needs a corrupt log.
    for e in EXTENSIONS {
        let key = format!("{}.{}", e.at, e.name);
        if !matches!(e.name, "file" | "offset") {
            assert!(t.extensions_seen.contains(&key), "{key} never occurs");
        }
    }
}

#[test]
fn every_transcript_replay_frame_is_valid_against_the_public_schema() {
    let (t, replayed) = transcript_frames();
    report(&format!("transcript replays ({replayed} transcripts)"), &t);
    assert!(replayed >= 20, "{replayed} transcripts replayed");
    assert!(t.validated >= 150, "{} frames", t.validated);
    assert_eq!(
        t.invalid.len(),
        0,
        "invalid frames: see the INVALID lines above"
    );
    assert!(t.by_target.contains_key("notification turn/retryScheduled"));
}

#[test]
fn extensions_are_listed_with_a_reference_and_additive() {
    let c = FrameChecker::public().unwrap();
    assert_eq!(
        check_extensions_are_additive(c.root()),
        Vec::<String>::new()
    );
    for e in EXTENSIONS {
        assert!(e.reference.starts_with("PROTOCOL.md"), "{e:?}");
    }
}

/// The checker is not a rubber stamp: frames our host sent before PROTOCOL.md
/// v4 fail it.
#[test]
fn pre_v4_frames_fail_the_check() {
    let mut c = FrameChecker::public().unwrap();
    c.client_line(
        1,
        r#"{"jsonrpc":"2.0","id":2,"method":"session/read","params":{}}"#,
    );
    let snapshot_v3 = r#"{"jsonrpc":"2.0","id":2,"result":{"session":{"sessionId":"s","status":"idle","turnCount":0,"path":"","createdAt":"x","updatedAt":"x","workspaceRoot":null,"providerId":"msp","modelId":"scripted","forkedFrom":null,"activeTurnId":null},"viewCursor":"v:s:0","history":{"mode":"snapshot","items":null,"snapshot":{"schemaVersion":1,"viewCursor":"v:s:0","state":{"items":[],"activeTurn":null,"queuedTurns":[],"pendingApprovals":[],"pendingUserInputs":[],"approvalMode":{"mode":"promptUnmatched","source":"startup","lastCommandId":null},"effectiveModel":null,"goal":null,"todoList":null,"branch":null,"tokenUsage":{"inputTokens":0,"outputTokens":0,"cachedTokens":0,"reasoningTokens":0},"turnCount":0}}},"pendingRequests":[]}}"#;
    let r = c.server_line(1, snapshot_v3, "v3 snapshot");
    assert!(r.iter().any(|x| x.contains("tokenUsage")), "{r:?}");
    let rejected_v3 = r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32030,"message":"m","data":{"kind":"commandRejected","commandId":"c","reason":"abandoned","retryable":false}}}"#;
    assert!(!c.server_line(1, rejected_v3, "v3 rejection").is_empty());
    assert_eq!(c.tally().invalid.len(), 2);
}
