//! Slow opens and reads (`slow-io`, draws version 11): an open or read of
//! a session's files the simulator delays completes after the host's other
//! inputs, as on `msp serve`'s io threads, and an open still completes
//! (its lease granted or denied) once its wait is over.

use msp_sim::run::{run, RunConfig};
use msp_sim::trace::{Actor, What};
use msp_sim::workload::Scenario;

#[test]
fn a_delayed_open_or_read_lets_other_inputs_land_before_it_completes() {
    let (mut delayed, mut overtaken, mut opens_done) = (0u64, 0u64, 0u64);
    for seed in 0..40 {
        let r = run(&RunConfig {
            scenario: Scenario::Mixed,
            seed,
            bug: None,
            client: Default::default(),
        });
        let entries = &r.trace.entries;
        if !r.mix.contains("slow-io") {
            assert!(
                !entries
                    .iter()
                    .any(|e| matches!(e.what, What::IoDelayed { .. })),
                "seed {seed}: only a mix with slow-io delays opens and reads ({})",
                r.mix
            );
        }
        for (i, e) in entries.iter().enumerate() {
            let (
                Actor::Host(h),
                What::IoDelayed {
                    inc,
                    session,
                    what,
                    ms,
                },
            ) = (&e.actor, &e.what)
            else {
                continue;
            };
            delayed += 1;
            let done_at = e.at_ms + ms;
            let window = entries[i + 1..].iter().take_while(|x| x.at_ms < done_at);
            // Another input of the same incarnation came in meanwhile.
            if window.clone().any(|x| {
                x.actor == Actor::Host(*h)
                    && matches!(&x.what, What::HostRecv { inc: i2, .. } if i2 == inc)
            }) {
                overtaken += 1;
            }
            if *what == "open" {
                // The lease is decided no earlier than the wait's end
                // (unless the host died first).
                let died = entries[i + 1..].iter().any(|x| {
                    x.actor == Actor::Host(*h)
                        && matches!(&x.what, What::HostCrash { .. } | What::HostExit { .. })
                        && x.at_ms <= done_at
                });
                let decided = entries[i + 1..].iter().find(|x| {
                    x.actor == Actor::Host(*h)
                        && matches!(&x.what,
                            What::LeaseGrant { inc: i2, session: s }
                            | What::LeaseDenied { inc: i2, session: s }
                            if i2 == inc && s == session)
                });
                if let Some(d) = decided.filter(|_| !died) {
                    assert!(
                        d.at_ms >= done_at,
                        "seed {seed}: an open delayed to {done_at} ms was decided at {} ms",
                        d.at_ms
                    );
                    opens_done += 1;
                }
            }
        }
    }
    assert!(delayed > 500, "opens and reads were delayed: {delayed}");
    assert!(
        overtaken > 100,
        "other inputs landed meanwhile: {overtaken} of {delayed}"
    );
    assert!(opens_done > 100, "delayed opens completed: {opens_done}");
}
