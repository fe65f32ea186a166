//! Liveness: after the safety phase, with every fault healed and every
//! host restarted, every logical command of every client gets a final
//! answer before the run ends (a bounded number of steps), no durable
//! session is lost, and the run stays within its event budget. Commands a
//! client gave up because their ephemeral host died are exempt (ids must
//! not be replayed at a new host).

use super::Violation;
use crate::client::Client;
use crate::trace::{Trace, What};
use crate::workload::Scenario;

/// Checks the property.
pub fn check(trace: &Trace, clients: &[Client], scenario: Scenario) -> Vec<Violation> {
    let mut v = Vec::new();
    for (i, e) in trace.entries.iter().enumerate() {
        if let What::Note(n) = &e.what {
            if n == "event budget exhausted" {
                v.push(Violation::new(
                    "run-bounded",
                    Some(i),
                    "the run exceeded its event budget",
                ));
            }
            if scenario.durable() && n.starts_with("durable session not found") {
                v.push(Violation::new(
                    "liveness",
                    Some(i),
                    format!("{}: {n}", e.actor),
                ));
            }
        }
    }
    for c in clients
        .iter()
        .filter(|c| c.role == crate::client::Role::Driver)
    {
        if c.session.is_none() {
            v.push(Violation::new(
                "liveness",
                None,
                format!("client{} has no session at the end of the run", c.idx),
            ));
        }
        for cmd in &c.cmds {
            if !cmd.done && !cmd.lost {
                v.push(Violation::new(
                    "liveness",
                    None,
                    format!(
                        "client{} never got a final answer for {} {} (sent {} times) after the run healed",
                        c.idx, cmd.method, cmd.cid, cmd.sent_count
                    ),
                ));
            }
        }
    }
    v
}
