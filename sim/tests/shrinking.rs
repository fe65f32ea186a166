//! Shrinking keeps the property violated while the run gets small (every
//! planted bug, from a seed of the scenario that catches it, to at most
//! 12 steps), and the shrunk run is a run file that replays bit for bit.
//! The clients are the default SDK clients.

use msp::core::bugs::Bug;
use msp_sim::choice;
use msp_sim::plan::Plan;
use msp_sim::run::{run, RunConfig};
use msp_sim::runfile::RunFile;
use msp_sim::shrink::shrink;
use msp_sim::workload::Scenario;

/// Shrinks the first run of seeds `from..from + 20` that violates
/// `property` under `bug`. A range, not one seed: a new workload move
/// shifts every seeded draw, and a seed that failed may stop failing
/// (the bug is still caught, by a neighbour).
fn shrunk(scenario: Scenario, from: u64, bug: Bug, property: &str) {
    let (seed, cfg, first) = (from..from + 20)
        .map(|seed| {
            let cfg = RunConfig {
                scenario,
                seed,
                bug: Some(bug),
                client: Default::default(),
            };
            let r = run(&cfg);
            (seed, cfg, r)
        })
        .find(|(_, _, r)| r.violations.iter().any(|v| v.property == property))
        .unwrap_or_else(|| panic!("{}: no seed of {from}..{} fails", bug.name(), from + 20));
    let mut improvements = 0;
    let s = shrink(
        &cfg,
        &Plan::seeded(),
        property,
        choice::values(&first.choices),
        4_000,
        &mut |_, _| improvements += 1,
    )
    .expect("the seed fails");
    assert!(improvements > 0);
    assert!(s.after.steps() <= 12, "{}: {}", bug.name(), s.after);
    assert!(
        s.after.steps() < s.before.steps(),
        "{} -> {}",
        s.before,
        s.after
    );
    assert!(s.after.choices_count < s.before.choices_count);
    assert!(s.result.violations.iter().any(|v| v.property == property));
    // As a run file, through JSON: the same run.
    let plan = Plan::recorded(s.values.clone());
    let file = RunFile::of(&cfg, &plan, &s.result, Some(seed), Some(property));
    let back = RunFile::from_json(&file.to_json()).expect("parses");
    let again = back.replay();
    assert_eq!(again.trace.hash(), s.result.trace.hash());
    assert_eq!(again.trace.hash(), back.trace_hash);
}

#[test]
fn an_ack_before_its_sync_shrinks_to_a_start_and_a_turn() {
    shrunk(Scenario::Mixed, 0, Bug::AckBeforeSync, "durable-dedupe");
}

#[test]
fn a_lease_not_checked_shrinks_to_a_client_that_leaves_its_host() {
    shrunk(
        Scenario::LeaseHandover,
        0,
        Bug::LeaseNotChecked,
        "one-lease-holder",
    );
}

#[test]
fn a_dedupe_in_memory_only_shrinks() {
    shrunk(
        Scenario::CrashStorm,
        0,
        Bug::DedupeInMemoryOnly,
        "durable-dedupe",
    );
}

#[test]
fn a_skipped_payload_check_shrinks() {
    // The reducer used to stop in local minima of 67 steps and more (its
    // chunk pass spent the run budget one choice at a time before the
    // cheap passes ran again). Seeds 0..12 of this scenario reach 5, 8,
    // 14, 24, 17, 2, 3, 2, 7, 27 and 165 steps within the 4,000 runs
    // (seeds 0-5 and 7-11; seed 6 does not fail; draws version 9,
    // 2026-12-06). Seed 11 is still such a minimum.
    shrunk(
        Scenario::LeaseHandover,
        0,
        Bug::SkipPayloadCheck,
        "payload-identity",
    );
}

#[test]
fn a_replay_that_mints_a_new_turn_shrinks() {
    shrunk(
        Scenario::LeaseHandover,
        0,
        Bug::ReplayMintsNewTurn,
        "value-identical-replays",
    );
}

#[test]
fn a_recovery_that_abandons_nothing_shrinks() {
    shrunk(
        Scenario::CrashStorm,
        0,
        Bug::NoAbandonOnRecovery,
        "recovery",
    );
}

#[test]
fn an_accepted_torn_tail_shrinks() {
    shrunk(
        Scenario::CrashStorm,
        0,
        Bug::TornTailAccepted,
        "log-integrity",
    );
}

#[test]
fn a_run_that_does_not_fail_is_refused() {
    let cfg = RunConfig {
        scenario: Scenario::Mixed,
        seed: 0,
        bug: None,
        client: Default::default(),
    };
    let r = run(&cfg);
    let e = shrink(
        &cfg,
        &Plan::seeded(),
        "durable-dedupe",
        choice::values(&r.choices),
        10,
        &mut |_, _| {},
    )
    .unwrap_err();
    assert!(e.contains("does not violate durable-dedupe"), "{e}");
}
