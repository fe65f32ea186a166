//! Property oracles. Each module checks one property and reads only the
//! recorded trace (plus the clients' own record of the logical commands
//! they issued): what clients sent and received, what hosts received and
//! sent, what hosts wrote, synced and truncated, leases, effects, crashes.
//! None reads the core's private state.
//!
//! Fault model: none; oracles judge. The ruled exceptions of the seed
//! document are modelled, not flagged: carrier-less rows (`turn/interrupt`,
//! `turn/cancel`, `task/stop`, `task/stopAll`) dedupe only for a host's
//! lifetime; pending intakes may settle `abandoned` after a crash; a queued
//! or fresh `turn/start` ack may later answer its launch failure.

pub mod durable_dedupe;
pub mod exactly_once;
pub mod history;
pub mod lease;
pub mod liveness;
pub mod log_integrity;
pub mod payload_identity;
pub mod pending_visible;
pub mod replay_identity;
pub mod settlement;
pub mod turn_ids;
pub mod turn_lifecycle;
pub mod view_cursor;

use crate::client::Client;
use crate::disk::Disk;
use crate::trace::Trace;
use crate::workload::Scenario;

pub use history::History;

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

/// Every property name, in checking order.
pub const PROPERTIES: [&str; 15] = [
    "durable-dedupe",
    "exactly-once-effect",
    "value-identical-replays",
    "rejection-idempotency",
    "payload-identity",
    "intake-settled",
    "turn-id-derivation",
    "turn-lifecycle",
    "view-cursor-order",
    "cursor-uniqueness",
    "one-lease-holder",
    "log-integrity",
    "pending-visible",
    "liveness",
    "run-bounded",
];

/// Runs every oracle over a finished run.
pub fn check_all(
    trace: &Trace,
    clients: &[Client],
    scenario: Scenario,
    _disk: &Disk,
) -> Vec<Violation> {
    let h = History::build(trace);
    let mut v = Vec::new();
    v.extend(durable_dedupe::check(trace, &h));
    v.extend(exactly_once::check(trace, &h));
    v.extend(replay_identity::check(trace, &h));
    v.extend(payload_identity::check(trace, &h));
    v.extend(settlement::check(trace, &h));
    v.extend(turn_ids::check(trace, &h));
    v.extend(turn_lifecycle::check(trace, &h));
    v.extend(view_cursor::check(trace, &h));
    v.extend(lease::check(trace));
    v.extend(log_integrity::check(trace, &h));
    v.extend(pending_visible::check(trace, &h));
    v.extend(liveness::check(trace, clients, scenario));
    v.extend(crate::model::Model::check(trace, scenario).violations);
    v.sort_by_key(|x| x.at_index.unwrap_or(usize::MAX));
    v
}
