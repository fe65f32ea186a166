//! Runs as data: a seeded run's recorded choices replay it bit for bit; a
//! recorded sequence replays the same way twice; past its end every
//! decision takes its simplest option, so the empty sequence is a run with
//! no fault and (almost) no work.

use msp_sim::choice;
use msp_sim::plan::Plan;
use msp_sim::run::{run, run_with, RunConfig};
use msp_sim::workload::Scenario;

fn cfg(scenario: Scenario, seed: u64) -> RunConfig {
    RunConfig {
        scenario,
        seed,
        bug: None,
        client: Default::default(),
    }
}

#[test]
fn a_seeded_run_replays_bit_for_bit_from_its_recorded_choices() {
    for scenario in Scenario::ALL {
        let c = cfg(scenario, 5);
        let a = run(&c);
        let values = choice::values(&a.choices);
        assert!(values.len() > 100, "{scenario}: a run draws many choices");
        // The compact text form loses nothing.
        let values = choice::decode(&choice::encode(&values)).expect("round trip");
        // The seed must not matter any more: replay under another one.
        let b = run_with(&cfg(scenario, 999), &Plan::recorded(values.clone()), None);
        assert_eq!(a.trace.first_divergence(&b.trace), None, "{scenario}");
        assert_eq!(a.trace.hash(), b.trace.hash(), "{scenario}");
        assert_eq!(a.choices, b.choices, "{scenario}: the same decisions");
        let again = run_with(&c, &Plan::recorded(values), None);
        assert_eq!(again.trace.hash(), a.trace.hash(), "{scenario}: twice");
    }
}

#[test]
fn the_empty_sequence_is_the_simplest_run() {
    let r = run_with(&cfg(Scenario::Mixed, 0), &Plan::recorded(Vec::new()), None);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert!(r.faults.is_empty(), "no fault at all: {:?}", r.faults);
    assert!(r.clients.is_empty(), "no client takes part");
    assert!(r.choices.iter().all(|c| c.value == 0));
}

#[test]
fn a_choice_that_is_edited_changes_the_run_from_there_on_only() {
    let c = cfg(Scenario::CrashStorm, 3);
    let a = run(&c);
    let mut values = choice::values(&a.choices);
    // Flip the last decision that injected something.
    let i = a
        .choices
        .iter()
        .rposition(|x| x.options == 2 && x.value == 1)
        .expect("a crash-storm run injects faults");
    values[i] = 0;
    let b = run_with(&c, &Plan::recorded(values), None);
    assert_eq!(&b.choices[..i], &a.choices[..i], "the prefix is kept");
    assert_eq!(b.choices[i].value, 0);
    assert_ne!(a.trace.hash(), b.trace.hash());
}
