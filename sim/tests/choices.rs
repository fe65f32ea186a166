//! Runs as data: a seeded run's recorded choices replay it bit for bit; a
//! recorded sequence replays the same way twice; past its end every
//! decision takes its simplest option, so the empty sequence is a run with
//! no fault and (almost) no work; a sequence recorded before a new kind
//! of decision replays with the draws it was recorded with.

use msp_sim::choice;
use msp_sim::plan::{Draws, Plan};
use msp_sim::run::{run, run_with, RunConfig};
use msp_sim::workload::Scenario;
use msp_sim::world::Decision;

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
    // Flip the last crash the run injected (a decision that always shows:
    // a late delay can draw the latency the undelayed line would have).
    let i = a
        .choices
        .iter()
        .rposition(|x| x.kind == Decision::Crash && x.options == 2 && x.value == 1)
        .expect("a crash-storm run crashes");
    values[i] = 0;
    let b = run_with(&c, &Plan::recorded(values), None);
    assert_eq!(&b.choices[..i], &a.choices[..i], "the prefix is kept");
    assert_eq!(b.choices[i].value, 0);
    assert_ne!(a.trace.hash(), b.trace.hash());
}

#[test]
fn a_sequence_recorded_before_stalls_replays_with_the_draws_it_was_recorded_with() {
    // A seed whose mix stalls syncs, and stalls some.
    let (c, now) = (0..40)
        .map(|seed| {
            let c = cfg(Scenario::Mixed, seed);
            let r = run(&c);
            (c, r)
        })
        .find(|(_, r)| r.faults.get("stall").is_some_and(|n| *n > 0))
        .expect("a mixed seed of 0..40 stalls syncs");
    assert!(now.mix.contains("stall="), "{}", now.mix);
    // The same seed under the draws before stalls: no stall level drawn,
    // none stalls, and every mix decision before the stall level (drawn
    // last) is the same; the idle-unload decision after the mix differs.
    let before = Plan {
        draws: Draws::BeforeStalls,
        ..Plan::seeded()
    };
    let old = run_with(&c, &before, None);
    assert!(!old.mix.contains("stall"), "{}", old.mix);
    assert!(!old.faults.contains_key("stall"), "{:?}", old.faults);
    let mix_draws = old
        .choices
        .iter()
        .take_while(|x| x.kind == Decision::FaultMix)
        .count()
        - 1;
    assert_eq!(now.choices[..mix_draws], old.choices[..mix_draws]);
    assert_ne!(now.trace.hash(), old.trace.hash());
    // Its recorded sequence replays bit for bit with its draws, and reads
    // as another run with today's.
    let values = choice::values(&old.choices);
    let again = run_with(
        &cfg(Scenario::Mixed, 999),
        &Plan {
            draws: Draws::BeforeStalls,
            ..Plan::recorded(values.clone())
        },
        None,
    );
    assert_eq!(again.trace.hash(), old.trace.hash());
    let misread = run_with(&cfg(Scenario::Mixed, 999), &Plan::recorded(values), None);
    assert_ne!(misread.trace.hash(), old.trace.hash());
}
