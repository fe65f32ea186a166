//! Log integrity: a log written only through the torn-tail rule is never
//! corrupt: whenever a host loads it, and at the end, every invalid byte
//! sits in a torn tail (nothing valid follows damage).

use msp::log::Tail;

use super::history::{DiskModel, History};
use super::Violation;
use crate::trace::{Trace, What};

/// Checks the property.
pub fn check(trace: &Trace, _h: &History) -> Vec<Violation> {
    let mut v = Vec::new();
    let mut disk = DiskModel::default();
    for (i, e) in trace.entries.iter().enumerate() {
        disk.apply(&e.what);
        let at_load = matches!(&e.what, What::LeaseGrant { .. });
        let at_end = matches!(&e.what, What::Phase(p) if p == "end");
        if !(at_load || at_end) {
            continue;
        }
        for (s, f) in &disk.files {
            if let What::LeaseGrant { session, .. } = &e.what {
                if session != s {
                    continue;
                }
            }
            if let Tail::Corrupt { offset, reason } = msp::log::scan(&f.bytes).tail {
                v.push(Violation::new(
                    "log-integrity",
                    Some(i),
                    format!("session log {s} is corrupt at byte {offset} ({reason}): bytes were appended after a torn tail"),
                ));
                return v;
            }
        }
    }
    v
}
