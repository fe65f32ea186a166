//! Storage failures told after the drain (draws version 13): `msp serve`
//! tells its host of a refused append only once it has carried out every
//! output the host had queued (`io::driver`'s deferred inputs), skipping
//! the failed log's later writes meanwhile (`io::storage`). The simulator
//! tells its hosts at once or in that order, drawn per failure, so both
//! orders are judged.

use msp_sim::plan::{Draws, Plan};
use msp_sim::run::{run, run_with, RunConfig};
use msp_sim::trace::What;
use msp_sim::workload::Scenario;

#[test]
fn a_refused_append_reaches_its_host_at_once_or_after_the_drain_and_every_property_holds() {
    let (mut deferred, mut at_once) = (0u64, 0u64);
    for seed in 0..120 {
        let cfg = RunConfig {
            scenario: Scenario::Mixed,
            seed,
            bug: None,
            client: Default::default(),
        };
        let r = run(&cfg);
        assert!(r.violations.is_empty(), "seed {seed}: {:?}", r.violations);
        let count = |r: &msp_sim::run::RunResult, f: &str| r.faults.get(f).copied().unwrap_or(0);
        let (held, refused) = (count(&r, "failure-deferred"), count(&r, "disk-full"));
        assert!(held <= refused, "seed {seed}: held back only refusals");
        deferred += held;
        at_once += refused - held;
        // Every refusal the host heard of is traced when it heard of it;
        // a host that died first heard of none.
        let traced = r
            .trace
            .entries
            .iter()
            .filter(|e| matches!(e.what, What::AppendFailed { .. }))
            .count() as u64;
        assert!(
            traced <= refused,
            "seed {seed}: {traced} traced of {refused}"
        );
        // A run of version 12 (a recorded run file of then) draws no such
        // decision: the host hears of every refusal at once.
        let old = run_with(
            &cfg,
            &Plan {
                draws: Draws::WithLateTimers,
                ..Plan::seeded()
            },
            None,
        );
        assert_eq!(count(&old, "failure-deferred"), 0, "seed {seed}");
    }
    assert!(deferred >= 10, "failures told after the drain: {deferred}");
    assert!(at_once >= 10, "failures told at once: {at_once}");
}
