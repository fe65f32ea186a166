//! Judging a run. The judge is the reference model ([`crate::model`]):
//! an executable specification of PROTOCOL.md that reads the observable
//! history (what clients and hosts sent and received, what hosts wrote,
//! synced and truncated, leases, provider calls, crashes) and imports
//! nothing of `src/core`. Beside it, [`liveness`] reads each client's own
//! record of its logical commands (every one must get a final answer once
//! faults heal).
//!
//! Fault model: none; oracles judge. The ruled exceptions of the seed
//! document are part of the model: carrier-less rows dedupe for a host's
//! lifetime only; an intake unsettled at its host's death settles
//! `abandoned` (never with an effect, never a queued submit); a fresh or
//! queued `turn/start` ack may later answer its launch failure.

pub mod liveness;

use std::collections::BTreeMap;

use crate::client::Client;
use crate::disk::Disk;
use crate::trace::Trace;
use crate::workload::Scenario;

/// One violated property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The property's name (stable; tests assert it).
    pub property: &'static str,
    /// The trace entry where it shows, if one does.
    pub at_index: Option<usize>,
    /// A short explanation.
    pub detail: String,
}

impl Violation {
    /// A violation of `property` at trace entry `at`.
    pub fn new(property: &'static str, at: Option<usize>, detail: impl Into<String>) -> Violation {
        Violation {
            property,
            at_index: at,
            detail: detail.into(),
        }
    }
}

/// Every property name: the promise a violation breaks.
pub const PROPERTIES: [&str; 24] = [
    // The three promises.
    "exactly-once-effect",
    "durable-dedupe",
    "payload-identity",
    // The ledger's other rules (PROTOCOL.md 4.4).
    "value-identical-replays",
    "rejection-idempotency",
    "intake-settled",
    "acked-effect",
    "recovery",
    "pending-visible",
    // Turns, commands and the scripted agent (4.1, 4.3, 5).
    "admission-decision",
    "turn-id-derivation",
    "id-minting",
    "turn-lifecycle",
    "scripted-agent",
    "effect-durability",
    // Views and reads (4.2, 4.5).
    "view-cursor-order",
    "cursor-uniqueness",
    "read-consistency",
    // Storage and leases (1, 4.1, 4.4).
    "one-lease-holder",
    "lease-unload",
    "log-integrity",
    // The run itself.
    "liveness",
    "run-bounded",
    // The code under test (or the simulator) panicked: the run stops there.
    "no-panic",
];

/// Runs every judge over a finished run.
pub fn check_all(
    trace: &Trace,
    clients: &[Client],
    scenario: Scenario,
    disk: &Disk,
) -> Vec<Violation> {
    judge(trace, clients, scenario, disk).0
}

/// Runs every judge; also returns how often the model saw each rule of
/// PROTOCOL.md exercised ([`crate::model::report::RULES`]).
pub fn judge(
    trace: &Trace,
    clients: &[Client],
    scenario: Scenario,
    _disk: &Disk,
) -> (Vec<Violation>, BTreeMap<&'static str, u64>) {
    let mut v = Vec::new();
    v.extend(liveness::check(trace, clients, scenario));
    let report = crate::model::Model::check(trace, scenario);
    v.extend(report.violations);
    v.sort_by_key(|x| x.at_index.unwrap_or(usize::MAX));
    (v, report.rules)
}
