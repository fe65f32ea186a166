//! One seed run twice gives one trace hash; shards cover a range without
//! overlap; a doctored trace diverges where it was changed.

use msp_sim::run::{run, RunConfig};
use msp_sim::sweep::shard_seeds;
use msp_sim::trace::{Actor, What};
use msp_sim::workload::Scenario;

#[test]
fn one_seed_twice_gives_equal_trace_hashes() {
    for scenario in [Scenario::Mixed, Scenario::LeaseHandover] {
        let cfg = RunConfig {
            scenario,
            seed: 7,
            bug: None,
            client: Default::default(),
        };
        let a = run(&cfg);
        let b = run(&cfg);
        assert!(a.trace.entries.len() > 100, "a run does something");
        assert_eq!(a.trace.hash(), b.trace.hash());
        assert_eq!(a.trace.first_divergence(&b.trace), None);
        let other = run(&RunConfig {
            scenario,
            seed: 8,
            bug: None,
            client: Default::default(),
        });
        assert_ne!(a.trace.hash(), other.trace.hash(), "seeds matter");
    }
}

#[test]
fn a_changed_event_is_named_as_the_first_divergence() {
    let cfg = RunConfig {
        scenario: Scenario::Turns,
        seed: 3,
        bug: None,
        client: Default::default(),
    };
    let a = run(&cfg);
    let mut b = a.trace.clone();
    b.entries[40].what = What::Note("tampered".into());
    b.entries[40].actor = Actor::World;
    assert_eq!(a.trace.first_divergence(&b), Some(40));
}

#[test]
fn shards_cover_the_range_without_overlap() {
    for n in 1..6u64 {
        let mut all: Vec<u64> = (1..=n).flat_map(|k| shard_seeds(10..47, k, n)).collect();
        all.sort_unstable();
        assert_eq!(all, (10..47).collect::<Vec<u64>>(), "{n} shards");
    }
}
