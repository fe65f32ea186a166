//! Twins (draws version 14): one double click in two of an SDK client goes
//! out on another client's link to the same host, as a second process of
//! the app sending a command it also sent would. On its own link a copy's
//! answer queues behind the original's, so a host that answered a replay
//! before the original's intake was durable went unseen there; on another
//! connection nothing holds it but the host's own gate, which the model
//! judges ("answered before its intake record was synced").

use msp_sim::plan::{Draws, Plan};
use msp_sim::run::{run, run_with, RunConfig};
use msp_sim::trace::What;
use msp_sim::workload::Scenario;

#[test]
fn twins_send_on_other_links_and_every_property_holds() {
    let mut twins = 0u64;
    for seed in 0..60 {
        let cfg = RunConfig {
            scenario: Scenario::Mixed,
            seed,
            bug: None,
            client: Default::default(),
        };
        let r = run(&cfg);
        assert!(r.violations.is_empty(), "seed {seed}: {:?}", r.violations);
        let counted = r.faults.get("twin").copied().unwrap_or(0);
        // Each is traced with the two links, which differ.
        let traced: Vec<(u64, u64)> = r
            .trace
            .entries
            .iter()
            .filter_map(|e| match &e.what {
                What::Note(n) => {
                    let rest = n.strip_prefix("twin: link ")?;
                    let (a, b) = rest.split_once(" -> ")?;
                    Some((a.parse().ok()?, b.parse().ok()?))
                }
                _ => None,
            })
            .collect();
        assert_eq!(traced.len() as u64, counted, "seed {seed}");
        assert!(
            traced.iter().all(|(a, b)| a != b),
            "seed {seed}: {traced:?}"
        );
        twins += counted;
        // A run of version 13 (a recorded run file of then) sends every
        // copy on its own link.
        if seed < 20 {
            let old = run_with(
                &cfg,
                &Plan {
                    draws: Draws::WithDeferredFailures,
                    ..Plan::seeded()
                },
                None,
            );
            assert_eq!(old.faults.get("twin"), None, "seed {seed}");
        }
    }
    assert!(twins >= 60, "twins in 60 seeds: {twins}");
}
