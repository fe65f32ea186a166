//! Each planted bug is caught by a small sweep, and by the property meant
//! to catch it. Some bugs need particular faults (a crash between ack and
//! sync, a torn write then two loads, two hosts contending), so each bug
//! names the scenario whose swarm reaches them.

use msp::core::bugs::Bug;
use msp_sim::sweep::sweep;
use msp_sim::workload::Scenario;

fn check(bug: &str, scenario: Scenario, property: &str) {
    let b = Bug::from_name(bug).expect("a planted bug");
    let seeds: Vec<u64> = (0..12).collect();
    let out = sweep(scenario, &seeds, Some(b), 2, false, &|| {});
    let first = out
        .iter()
        .find(|o| o.properties.iter().any(|p| p == property));
    assert!(
        first.is_some(),
        "{bug} not caught by {property} in {scenario}; saw {:?}",
        out.iter().map(|o| o.properties.clone()).collect::<Vec<_>>()
    );
}

#[test]
fn ack_before_sync_is_caught_by_durable_dedupe() {
    check("ack-before-sync", Scenario::Mixed, "durable-dedupe");
}

#[test]
fn dedupe_in_memory_only_is_caught_by_durable_dedupe() {
    check(
        "dedupe-in-memory-only",
        Scenario::CrashStorm,
        "durable-dedupe",
    );
}

#[test]
fn skip_payload_check_is_caught_by_payload_identity() {
    check(
        "skip-payload-check",
        Scenario::LeaseHandover,
        "payload-identity",
    );
}

#[test]
fn replay_mints_new_turn_is_caught_by_value_identical_replays() {
    check(
        "replay-mints-new-turn",
        Scenario::LeaseHandover,
        "value-identical-replays",
    );
}

#[test]
fn no_abandon_on_recovery_is_caught_by_recovery() {
    check("no-abandon-on-recovery", Scenario::CrashStorm, "recovery");
}

#[test]
fn lease_not_checked_is_caught_by_one_lease_holder() {
    check(
        "lease-not-checked",
        Scenario::LeaseHandover,
        "one-lease-holder",
    );
}

#[test]
fn torn_tail_accepted_is_caught_by_log_integrity() {
    check("torn-tail-accepted", Scenario::CrashStorm, "log-integrity");
}
