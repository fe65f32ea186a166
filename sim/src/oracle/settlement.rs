//! Every intake is eventually settled once the run heals: at the end, in
//! every durable session that was loaded again after its last holder died,
//! every `received` record has its `settled` record (queued submits settle
//! when they launch or are unqueued, and nothing stays queued once healed).

use std::collections::BTreeSet;

use msp::core::record::Record;

use super::history::{records, History};
use super::Violation;
use crate::trace::Trace;

/// Checks the property.
pub fn check(_trace: &Trace, h: &History) -> Vec<Violation> {
    let mut v = Vec::new();
    for (s, f) in &h.final_disk.files {
        if h.unrecovered.contains(s) {
            continue;
        }
        let mut open: Vec<(String, String)> = Vec::new();
        let mut settled: BTreeSet<String> = BTreeSet::new();
        for r in records(&f.bytes) {
            match r {
                Record::Received {
                    command_id, method, ..
                } => open.push((command_id.to_ascii_lowercase(), method)),
                Record::Settled { command_id, .. } => {
                    settled.insert(command_id.to_ascii_lowercase());
                }
                _ => {}
            }
        }
        for (c, m) in open.iter().filter(|(c, _)| !settled.contains(c)) {
            v.push(Violation::new(
                "intake-settled",
                None,
                format!("session {s}: intake {m} {c} never settled after the run healed"),
            ));
        }
    }
    v
}
