//! One lease holder at a time: a lease is granted only when free, and only
//! the holder writes (appends, truncates) a session's log.

use std::collections::BTreeMap;

use super::Violation;
use crate::trace::{Actor, Trace, What};

/// Checks the property.
pub fn check(trace: &Trace) -> Vec<Violation> {
    let mut v = Vec::new();
    let mut holder: BTreeMap<String, usize> = BTreeMap::new();
    let mut reported = false;
    for (i, e) in trace.entries.iter().enumerate() {
        let h = match e.actor {
            Actor::Host(h) => h,
            _ => continue,
        };
        match &e.what {
            What::LeaseGrant { session, .. } => {
                if let Some(o) = holder.get(session) {
                    if *o != h {
                        v.push(Violation::new(
                            "one-lease-holder",
                            Some(i),
                            format!("host{h} granted {session} while host{o} holds it"),
                        ));
                    }
                }
                holder.insert(session.clone(), h);
            }
            What::LeaseRelease { session, .. } if holder.get(session) == Some(&h) => {
                holder.remove(session);
            }
            What::Append { session, .. } | What::Truncate { session, .. }
                if holder.get(session) != Some(&h) && !reported =>
            {
                reported = true;
                v.push(Violation::new(
                    "one-lease-holder",
                    Some(i),
                    format!(
                        "host{h} wrote {session} without its lease (holder: {})",
                        holder
                            .get(session)
                            .map_or("none".to_string(), |o| format!("host{o}"))
                    ),
                ));
            }
            _ => {}
        }
    }
    v
}
