//! The liveness judge catches the defects it exists for, in doctored
//! copies of real passing runs (the undoctored run is the control).

use msp_sim::client::Role;
use msp_sim::oracle::liveness;
use msp_sim::run::{run, RunConfig};
use msp_sim::trace::{Actor, Trace, What};
use msp_sim::workload::Scenario;

fn passing(seed: u64) -> msp_sim::run::RunResult {
    let r = run(&RunConfig {
        scenario: Scenario::Mixed,
        seed,
        bug: None,
        client: Default::default(),
    });
    assert!(
        r.violations.is_empty(),
        "seed {seed} is meant to pass: {:#?}",
        r.violations
    );
    assert!(liveness::check(&r.trace, &r.clients, Scenario::Mixed).is_empty());
    r
}

#[test]
fn a_command_left_without_a_final_answer() {
    let r = passing(1);
    let mut clients = r.clients.clone();
    let c = clients
        .iter_mut()
        .find(|c| c.role == Role::Driver)
        .expect("a driver");
    let cmd = c
        .cmds
        .iter_mut()
        .find(|m| m.done && !m.lost)
        .expect("an answered command");
    cmd.done = false;
    let v = liveness::check(&r.trace, &clients, Scenario::Mixed);
    assert!(
        v.iter()
            .any(|x| x.property == "liveness" && x.detail.contains("never got a final answer")),
        "{v:#?}"
    );
}

#[test]
fn a_lost_durable_session() {
    let r = passing(2);
    let mut t = Trace::new();
    for e in &r.trace.entries {
        t.push(e.at_ms, e.actor, e.what.clone());
    }
    let at = t.entries.last().expect("entries").at_ms;
    t.push(
        at,
        Actor::Client(0),
        What::Note(
            "durable session not found on resume: gives up its commands, starts a new session"
                .into(),
        ),
    );
    let v = liveness::check(&t, &r.clients, Scenario::Mixed);
    assert!(v.iter().any(|x| x.property == "liveness"), "{v:#?}");
}

#[test]
fn a_run_over_its_event_budget() {
    let r = passing(3);
    let mut t = Trace::new();
    for e in &r.trace.entries {
        t.push(e.at_ms, e.actor, e.what.clone());
    }
    t.push(0, Actor::World, What::Note("event budget exhausted".into()));
    let v = liveness::check(&t, &r.clients, Scenario::Mixed);
    assert!(v.iter().any(|x| x.property == "run-bounded"), "{v:#?}");
}
