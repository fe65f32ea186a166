//! A fixed small sweep of every scenario holds every property.

use msp::core::{CompactStep, CrashPoint};
use msp_sim::sweep::{sweep, Summary};
use msp_sim::workload::Scenario;

/// Rules every scenario's 24 seeds exercise many times over. The SDK
/// client validates commands with the host's own params module, so a
/// mistake there that refuses a kind of command silences it on both
/// sides: no answer is wrong, but these counts fall to zero
/// (cargo-mutants: `input_text`'s `t == "text"` -> `false` passed every
/// sweep before this check).
const CORE_RULES: [&str; 4] = [
    "4.3 turn/start queued",
    "4.3 turn/completed completed",
    "4.4 replay of an applied command",
    "3 invalidParams",
];

/// And on durable hosts, where the model judges the log's records.
const DURABLE_CORE_RULES: [&str; 3] = [
    "4.1 session/start fresh",
    "4.1 state/update accepted",
    "4.3 turn/start started",
];

fn check(scenario: Scenario, seeds: std::ops::Range<u64>) {
    let seeds: Vec<u64> = seeds.collect();
    let out = sweep(scenario, &seeds, None, 2, false, &|| {});
    let s = Summary::of(scenario, None, &out, false);
    assert_eq!(s.seeds_count, seeds.len() as u64);
    assert!(s.events_count > 1_000 * seeds.len() as u64, "runs do work");
    assert!(s.divergences.is_empty(), "{:?}", s.divergences);
    // The seeds that failed here before (mixed 8 and 14, crash-storm 6 and
    // 8, ephemeral 8) were core bugs and a client bug, all fixed: none is
    // excused any more.
    assert!(s.failures.is_empty(), "{scenario}: {:#?}", s.failures);
    let durable: &[&str] = if scenario.durable() {
        &DURABLE_CORE_RULES
    } else {
        &[]
    };
    for rule in CORE_RULES.iter().chain(durable) {
        assert!(
            s.rules.get(*rule).copied().unwrap_or(0) > 0,
            "{scenario}: rule {rule:?} never exercised in {} seeds",
            seeds.len()
        );
    }
    // The faults themselves: a crash point the core stops announcing is a
    // moment the simulator can no longer crash in, which no judge sees
    // (cargo-mutants: `finish`'s `gated_answer |=` -> `&=` silenced
    // after-intake-before-ack, the intake pair's own crash point). Where
    // the workload has provider effects and compaction, every crash point
    // is reached; crash-storm also crashes at each.
    if matches!(
        scenario,
        Scenario::Mixed | Scenario::CrashStorm | Scenario::BitRot
    ) {
        let points = CrashPoint::ALL
            .iter()
            .map(|p| p.name())
            .chain(CompactStep::ALL.iter().map(|c| c.name()));
        for p in points {
            let hits = s.cp_hits.get(p).copied().unwrap_or(0);
            assert!(hits > 0, "{scenario}: crash point {p} never reached");
            if scenario == Scenario::CrashStorm {
                let crashes = s.cp_crashes.get(p).copied().unwrap_or(0);
                assert!(crashes > 0, "{scenario}: never crashed at {p}");
            }
        }
    }
}

#[test]
fn mixed_sweep_holds_every_property() {
    check(Scenario::Mixed, 0..24);
}

#[test]
fn turns_sweep_holds_every_property() {
    check(Scenario::Turns, 0..24);
}

#[test]
fn crash_storm_sweep_holds_every_property() {
    check(Scenario::CrashStorm, 0..24);
}

#[test]
fn lease_handover_sweep_holds_every_property() {
    check(Scenario::LeaseHandover, 0..24);
}

#[test]
fn ephemeral_sweep_holds_every_property() {
    check(Scenario::Ephemeral, 0..24);
}

#[test]
fn bitrot_sweep_holds_every_property() {
    check(Scenario::BitRot, 0..24);
}
