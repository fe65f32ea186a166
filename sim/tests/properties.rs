//! Property tests whose strategy is a choice sequence: proptest draws a
//! sparse sequence (a few non-simplest choices among simplest ones) for a
//! small fixed workload with every fault on (the exhaustive check's
//! plans), the simulator runs it, and the three guarantees must hold. A
//! failing sequence is minimised by proptest's own shrinking (fewer and
//! smaller choices, shorter gaps) and kept in
//! `sim/proptest-regressions/properties.txt`, which is committed (it holds
//! the cases the planted-bug test found, which today's runtime passes).
//!
//! The last test plants a bug and shows the strategy finds it and that
//! proptest shrinks it to a handful of choices.

use msp::core::bugs::Bug;
use msp_sim::check::{check_mixes, CheckConfig, DEFAULT_WORKLOAD};
use msp_sim::plan::Plan;
use msp_sim::run::{run_with, RunConfig, RunResult};
use msp_sim::workload::Scenario;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestError, TestRng, TestRunner};

/// What proptest found, replayed first by every property (relative to
/// the package: `cargo test` runs in `sim/`). Seeded with the minimal
/// cases the planted-bug test below found; committed.
const REGRESSIONS: &str = "proptest-regressions/properties.txt";

/// Cases per property: each is one small run (a few ms), so the three
/// properties take seconds.
const CASES: u32 = 64;

/// One generated run: scenario, which mix (process crashes or power
/// losses), and the choices.
#[derive(Debug, Clone)]
struct Case {
    scenario: Scenario,
    mix: usize,
    choices: Vec<u64>,
}

/// A sparse choice sequence: up to 10 (gap, value) pairs, each `gap`
/// simplest choices then one `value` (clamped by its decision: any value
/// is "yes" for a fault, and picks among a client's options).
fn choices() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec((0usize..120, 1u64..100), 0..10).prop_map(|pairs| {
        let mut v = Vec::new();
        for (gap, value) in pairs {
            v.extend(std::iter::repeat_n(0, gap));
            v.push(value);
        }
        v
    })
}

fn cases() -> impl Strategy<Value = Case> {
    (
        prop_oneof![
            Just(Scenario::Mixed),
            Just(Scenario::CrashStorm),
            Just(Scenario::LeaseHandover),
        ],
        0usize..2,
        choices(),
    )
        .prop_map(|(scenario, mix, choices)| Case {
            scenario,
            mix,
            choices,
        })
}

fn run(case: &Case, bug: Option<Bug>) -> RunResult {
    let cfg = CheckConfig {
        run: RunConfig {
            scenario: case.scenario,
            seed: 0,
            bug,
            client: Default::default(),
        },
        mix: check_mixes()[case.mix].1.clone(),
        workload: DEFAULT_WORKLOAD,
        max_faults: 0,
        stop_at_first: true,
    };
    let plan = Plan {
        choices: Some(case.choices.clone()),
        ..msp_sim::check::plan(&cfg, Vec::new())
    };
    run_with(&cfg.run, &plan, None)
}

/// The violations of `properties` in a run of `case`.
fn broken(case: &Case, bug: Option<Bug>, properties: &[&str]) -> Vec<String> {
    run(case, bug)
        .violations
        .iter()
        .filter(|v| properties.contains(&v.property))
        .map(|v| format!("{}: {}", v.property, v.detail))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: CASES,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(REGRESSIONS))),
        ..ProptestConfig::default()
    })]

    /// A repeated command id applies once and gets a value-identical answer.
    #[test]
    fn exactly_once_effect(case in cases()) {
        let b = broken(&case, None, &["exactly-once-effect", "value-identical-replays"]);
        prop_assert!(b.is_empty(), "{b:?}");
    }

    /// No ack before its intake is durable, so dedupe survives a crash.
    #[test]
    fn durable_dedupe(case in cases()) {
        let b = broken(&case, None, &["durable-dedupe"]);
        prop_assert!(b.is_empty(), "{b:?}");
    }

    /// The same id with another payload is rejected command_id_conflict.
    #[test]
    fn payload_identity(case in cases()) {
        let b = broken(&case, None, &["payload-identity"]);
        prop_assert!(b.is_empty(), "{b:?}");
    }
}

/// With a planted bug the same strategy fails, and proptest's shrinking
/// leaves a handful of choices (no file persistence: the failure is
/// meant).
#[test]
fn the_strategy_finds_a_planted_bug_and_proptest_shrinks_it() {
    // A fixed RNG: `TestRunner::new` seeds itself from the OS, so where
    // shrinking stops (the count below) would move from run to run.
    let config = Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    };
    let algorithm = config.rng_algorithm;
    let mut runner = TestRunner::new_with_rng(config, TestRng::deterministic_rng(algorithm));
    let out = runner.run(&cases(), |case| {
        let b = broken(
            &case,
            Some(Bug::ReplayMintsNewTurn),
            &["value-identical-replays"],
        );
        prop_assert!(b.is_empty(), "{b:?}");
        Ok(())
    });
    match out {
        Err(TestError::Fail(_, minimal)) => {
            let nonzero = minimal.choices.iter().filter(|v| **v != 0).count();
            assert!(
                // A handful: the exact count moves with the runtime's
                // record layout (4 since turn/unqueue's reorder).
                (1..=6).contains(&nonzero),
                "shrunk to {nonzero} non-simplest choices: {minimal:?}"
            );
            let again = broken(
                &minimal,
                Some(Bug::ReplayMintsNewTurn),
                &["value-identical-replays"],
            );
            assert!(!again.is_empty(), "the minimal case fails: {minimal:?}");
        }
        other => panic!("the planted bug was not found: {other:?}"),
    }
}
