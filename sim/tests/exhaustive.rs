//! The bounded exhaustive check: a small workload holds every property on
//! every schedule with at most one deviation (both fault mixes), state
//! hashing prunes repeats, and every planted bug is found without a seed.

use msp::core::bugs::Bug;
use msp_sim::check::{self, check_all_mixes, CheckConfig};
use msp_sim::plan::Workload;
use msp_sim::run::{run_with, RunConfig};
use msp_sim::workload::Scenario;

/// One client, two commands: small enough for `cargo test` (seconds),
/// big enough for every planted bug.
const SMALL: Workload = Workload {
    clients_count: 1,
    commands_per_client: 2,
    observer: false,
};

fn cfg(bug: Option<Bug>) -> RunConfig {
    RunConfig {
        scenario: Scenario::Mixed,
        seed: 0,
        bug,
        client: Default::default(),
    }
}

#[test]
fn a_small_workload_holds_every_property_on_every_schedule_with_one_deviation() {
    let (r, failed) = check_all_mixes(&cfg(None), SMALL, 1, false, &mut |_| {});
    assert!(
        failed.is_none() && r.failures.is_empty(),
        "{:#?}",
        r.failures
    );
    assert!(r.base_decisions_count > 100, "the base schedule does work");
    // Every deviation explored is a schedule run or a state pruned.
    assert!(r.schedules_count > 300, "{r:?}");
    assert!(r.pruned_count > 50, "state hashing prunes repeats: {r:?}");
    assert_eq!(
        r.states_count + 2,
        r.schedules_count,
        "one base schedule per mix"
    );
}

#[test]
fn pruning_never_hides_a_schedule_the_unpruned_search_judges() {
    // Without pruning (a probe that never prunes), the same bound judges
    // more schedules and finds nothing the pruned search misses.
    let mix = check::check_mixes()[0].1.clone();
    let c = CheckConfig {
        run: cfg(None),
        mix,
        workload: Workload {
            clients_count: 1,
            commands_per_client: 1,
            observer: false,
        },
        max_faults: 1,
        stop_at_first: false,
    };
    let pruned = check::check(&c, &mut |_| {});
    let base = run_with(&c.run, &check::plan(&c, Vec::new()), None);
    let mut all = 0;
    for (j, ch) in base.choices.iter().enumerate() {
        for alt in check::alternatives(ch) {
            let mut v = vec![0; j];
            v.push(alt);
            let r = run_with(&c.run, &check::plan(&c, v), None);
            assert!(r.violations.is_empty(), "{:?}", r.violations);
            all += 1;
        }
    }
    assert_eq!(pruned.schedules_count + pruned.pruned_count, all + 1);
    assert!(pruned.schedules_count < all + 1);
}

#[test]
fn every_planted_bug_is_found_by_the_check_without_a_seed() {
    for bug in Bug::ALL {
        // Re-performing an unkeyed effect needs two deviations: the
        // workload's effect at the unkeyed provider (not the simplest
        // command), and a crash while it is in flight.
        let depth = if bug == Bug::RetryUnkeyedEffect { 2 } else { 1 };
        let (r, failed) = check_all_mixes(&cfg(Some(bug)), SMALL, depth, true, &mut |_| {});
        let Some((mix, depth)) = failed else {
            panic!("{} not found by the check: {r:?}", bug.name());
        };
        let (values, v) = r.failures.first().expect("a failure");
        // The failing schedule replays from its choices alone.
        let c = CheckConfig {
            run: cfg(Some(bug)),
            mix,
            workload: SMALL,
            max_faults: depth,
            stop_at_first: true,
        };
        let again = run_with(&c.run, &check::plan(&c, values.clone()), None);
        assert!(
            again.violations.iter().any(|x| x.property == v.property),
            "{}: {v:?}",
            bug.name()
        );
        assert!(values.iter().filter(|x| **x != 0).count() <= depth);
    }
}
