//! Prompt approvals (draws version 15): an SDK client decides a pending
//! approval it knows one pick in two, and three approvals in ten are
//! chased by an interrupt of the turn sent right behind the decision, in
//! flight with it. Before, an approved tool call's effect rarely met the
//! end of its turn (the turn waits for the decision, which the move draw
//! seldom made), so a host that mishandled an effect still open when its
//! turn ended went unseen.

use msp_sim::plan::{Draws, Plan};
use msp_sim::run::{run, run_with, RunConfig, RunResult};
use msp_sim::trace::{Actor, What};
use msp_sim::workload::Scenario;

/// Chases in a run: a client's `turn/interrupt` line put on the same link
/// right after its `approval/decide` line (the SDK core writes both in
/// one step).
fn chases(r: &RunResult) -> usize {
    let sends: Vec<(usize, u64, &str)> = r
        .trace
        .entries
        .iter()
        .filter_map(|e| match (&e.actor, &e.what) {
            (Actor::Client(c), What::ClientSend { link, line }) => Some((*c, *link, line.as_str())),
            _ => None,
        })
        .collect();
    sends
        .windows(2)
        .filter(|w| {
            w[0].0 == w[1].0
                && w[0].1 == w[1].1
                && w[0].2.contains("\"method\":\"approval/decide\"")
                && w[0].2.contains("\"choiceId\":\"approve\"")
                && w[1].2.contains("\"method\":\"turn/interrupt\"")
        })
        .count()
}

/// How often the model met rule `rule` in a run.
fn hits(r: &RunResult, rule: &str) -> u64 {
    r.rules.get(rule).copied().unwrap_or(0)
}

#[test]
fn approvals_are_decided_promptly_and_chased_by_interrupts_and_every_property_holds() {
    let (mut new_chases, mut old_chases) = (0, 0);
    let (mut new_effects, mut old_effects) = (0, 0);
    for seed in 0..40 {
        let cfg = RunConfig {
            scenario: Scenario::Mixed,
            seed,
            bug: None,
            client: Default::default(),
        };
        let r = run(&cfg);
        assert!(r.violations.is_empty(), "seed {seed}: {:?}", r.violations);
        new_chases += chases(&r);
        new_effects += hits(&r, "4.4 keyed effect") + hits(&r, "4.4 unkeyed effect");
        // A run of version 14 (a recorded run file of then) makes none.
        let old = run_with(
            &cfg,
            &Plan {
                draws: Draws::WithTwins,
                ..Plan::seeded()
            },
            None,
        );
        assert!(
            old.violations.is_empty(),
            "seed {seed}: {:?}",
            old.violations
        );
        old_chases += chases(&old);
        old_effects += hits(&old, "4.4 keyed effect") + hits(&old, "4.4 unkeyed effect");
    }
    assert_eq!(old_chases, 0, "version 14 chases no approval");
    assert!(new_chases >= 10, "chases in 40 seeds: {new_chases}");
    // More approved tool calls reach their provider.
    assert!(
        new_effects > old_effects,
        "effects performed: {new_effects} (version 14: {old_effects})"
    );
}
