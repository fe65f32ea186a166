//! The frames of simulated runs against the public MSP v1 JSON Schema
//! (PROTOCOL.md section 7): every line a host put on a link in a few seeds
//! of each scenario, checked by `msp::conformance::schema::FrameChecker`
//! (responses against their method's result, errors against the error
//! table, notifications and server requests against their params, members
//! outside the schema only if they are listed extensions).
//!
//! The simulator's API used here is kept to `run::run`, `RunConfig` and
//! the trace's `What::HostRecv` / `What::HostSend` entries, so a rewrite
//! of the simulator's internals only has to keep those.

use msp::conformance::schema::FrameChecker;
use msp_sim::run::{run, RunConfig};
use msp_sim::trace::What;
use msp_sim::workload::Scenario;

/// One checker connection per (host incarnation, link).
fn conn_key(inc: u64, link: u64) -> u64 {
    (inc << 32) | (link & 0xffff_ffff)
}

#[test]
fn every_frame_of_simulated_runs_is_valid_against_the_public_schema() {
    let mut checker = FrameChecker::public().expect("the public schema loads");
    let mut runs = 0;
    for scenario in [Scenario::Mixed, Scenario::Turns, Scenario::CrashStorm] {
        for seed in 0..3 {
            let result = run(&RunConfig {
                scenario,
                seed,
                bug: None,
                client: Default::default(),
            });
            runs += 1;
            for (i, e) in result.trace.entries.iter().enumerate() {
                match &e.what {
                    What::HostRecv { inc, link, line } => {
                        checker.client_line(conn_key(*inc, *link), line)
                    }
                    What::HostSend { inc, link, line } => {
                        let origin = format!("{scenario:?} seed {seed}, trace entry {i}");
                        checker.server_line(conn_key(*inc, *link), line, &origin);
                    }
                    _ => {}
                }
            }
        }
    }
    let t = checker.tally();
    println!(
        "simulated runs ({runs}): {} frames validated, {} invalid",
        t.validated,
        t.invalid.len()
    );
    for (target, n) in &t.by_target {
        println!("    {n:6}  {target}");
    }
    for inv in t.invalid.iter().take(20) {
        println!("INVALID {inv}");
    }
    assert!(t.validated >= 1000, "{} frames", t.validated);
    assert!(t.by_target.keys().any(|k| k.starts_with("notification ")));
    assert!(t.by_target.keys().any(|k| k.starts_with("error ")));
    assert_eq!(
        t.invalid.len(),
        0,
        "invalid frames: see the INVALID lines above"
    );
}
