//! The SDK client (`--client sdk`): the real `msp::client::ClientCore`
//! under the simulator's workloads. Every scenario runs clean with it, a
//! seed gives the same trace twice and replays from its run file, the
//! planted bugs are still caught, and the SDK's own rules show in the
//! traces (reloads before replays, one id per logical command).

use msp::core::bugs::Bug;
use msp_sim::plan::Plan;
use msp_sim::run::{run, run_with, ClientKind, RunConfig};
use msp_sim::runfile::RunFile;
use msp_sim::sweep::sweep_client;
use msp_sim::trace::What;
use msp_sim::workload::Scenario;

fn cfg(scenario: Scenario, seed: u64, bug: Option<Bug>) -> RunConfig {
    RunConfig {
        scenario,
        seed,
        bug,
        client: ClientKind::Sdk,
    }
}

#[test]
fn every_scenario_runs_clean_with_the_sdk_client() {
    for scenario in Scenario::ALL {
        let seeds: Vec<u64> = (0..6).collect();
        let out = sweep_client(
            scenario,
            &seeds,
            None,
            ClientKind::Sdk,
            &Plan::seeded(),
            2,
            false,
            &|| {},
        );
        let bad: Vec<_> = out
            .iter()
            .filter(|o| o.failure.is_some() || o.divergence.is_some())
            .map(|o| (o.seed, o.failure.clone(), o.divergence.clone()))
            .collect();
        assert!(bad.is_empty(), "{scenario} with the SDK client: {bad:#?}");
    }
}

#[test]
fn the_sdk_client_is_deterministic_and_replays_from_its_run_file() {
    for (scenario, seed) in [(Scenario::Mixed, 5), (Scenario::Ephemeral, 2)] {
        let c = cfg(scenario, seed, None);
        let a = run(&c);
        let b = run(&c);
        assert_eq!(a.trace.hash(), b.trace.hash(), "{scenario} seed {seed}");
        // Its choices alone replay it (the core's entropy is one of them).
        let file = RunFile::of(&c, &Plan::seeded(), &a, Some(seed), None);
        assert_eq!(file.client, ClientKind::Sdk);
        let back = RunFile::from_json(&file.to_json()).expect("round trip");
        assert_eq!(back.client, ClientKind::Sdk);
        assert_eq!(back.replay().trace.hash(), a.trace.hash());
        // And it is not the legacy client's run.
        let legacy = run(&RunConfig {
            client: ClientKind::Sim,
            ..c
        });
        assert_ne!(legacy.trace.hash(), a.trace.hash());
    }
}

#[test]
fn planted_bugs_are_caught_with_the_sdk_client() {
    for (bug, scenario, property) in [
        ("ack-before-sync", Scenario::Mixed, "durable-dedupe"),
        (
            "lease-not-checked",
            Scenario::LeaseHandover,
            "one-lease-holder",
        ),
        ("torn-tail-accepted", Scenario::CrashStorm, "log-integrity"),
    ] {
        let b = Bug::from_name(bug).expect("a planted bug");
        let seeds: Vec<u64> = (0..6).collect();
        let out = sweep_client(
            scenario,
            &seeds,
            Some(b),
            ClientKind::Sdk,
            &Plan::seeded(),
            2,
            false,
            &|| {},
        );
        assert!(
            out.iter()
                .any(|o| o.properties.iter().any(|p| p == property)),
            "{bug} not caught by {property} in {scenario} with the SDK client"
        );
    }
}

/// Under crashes the core re-sends commands under their ids, reloads the
/// session on each new link (`session/resume`), and settles every
/// logical command (an answer, or given up with the outcome unknown).
#[test]
fn the_sdk_resends_with_the_same_id_and_reloads_after_a_reconnect() {
    let r = run_with(&cfg(Scenario::CrashStorm, 3, None), &Plan::seeded(), None);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    let mut resent = 0;
    let mut resumes = 0;
    for e in &r.trace.entries {
        if let What::ClientSend { line, .. } = &e.what {
            let v: serde_json::Value = serde_json::from_str(line.trim_end()).expect("json");
            if v["method"] == "session/resume" {
                resumes += 1;
            }
            let Some(cid) = v["params"]["commandId"].as_str() else {
                continue;
            };
            let sends = r
                .clients
                .iter()
                .flat_map(|c| &c.cmds)
                .filter(|c| c.cid == cid)
                .map(|c| c.sent_count)
                .sum::<u32>();
            if sends > 1 {
                resent += 1;
            }
        }
    }
    assert!(resent > 0, "some command was re-sent under its id");
    assert!(resumes > 0, "the core reloaded a session after a reconnect");
    for c in &r.clients {
        for cmd in &c.cmds {
            assert!(cmd.done || cmd.lost, "{} {} unsettled", cmd.method, cmd.cid);
        }
    }
}
