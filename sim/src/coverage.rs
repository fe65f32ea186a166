//! Coverage of a run, as a set of named features, for the coverage-guided
//! search: which crash points were reached and crashed at (and during
//! which method's intake), which ledger outcome each method got (a new
//! command, a replay, a conflict, an abandoned one), which faults struck,
//! and which rules of PROTOCOL.md 4.1-4.4 the reference model saw
//! exercised ([`crate::run::RunResult::rules`]).
//!
//! Fault model: none; coverage only reads a finished run.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::run::RunResult;
use crate::trace::What;

/// The features of run `r`.
pub fn features(r: &RunResult) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (k, v) in &r.faults {
        if *v > 0 {
            out.insert(format!("fault {k}"));
        }
    }
    // The method of the last command each host took in, per host.
    let mut last_method: BTreeMap<usize, String> = BTreeMap::new();
    // (link, rpc id) -> (method, replayed) of commands hosts received.
    let mut pending: BTreeMap<(u64, String), (String, bool)> = BTreeMap::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for e in &r.trace.entries {
        let host = match e.actor {
            crate::trace::Actor::Host(h) => Some(h),
            _ => None,
        };
        match &e.what {
            What::HostRecv { link, line, .. } => {
                let v: Value = serde_json::from_str(line).unwrap_or_default();
                let (Some(m), Some(cid)) =
                    (v["method"].as_str(), v["params"]["commandId"].as_str())
                else {
                    continue;
                };
                let replayed = !seen.insert(cid.to_ascii_lowercase());
                if let Some(h) = host {
                    last_method.insert(h, m.to_string());
                }
                if let Some(id) = v.get("id") {
                    pending.insert((*link, id.to_string()), (m.to_string(), replayed));
                }
            }
            What::HostSend { link, line, .. } => {
                let v: Value = serde_json::from_str(line).unwrap_or_default();
                if v.get("method").is_some() {
                    continue;
                }
                let Some(id) = v.get("id") else { continue };
                let Some((m, replayed)) = pending.remove(&(*link, id.to_string())) else {
                    continue;
                };
                let outcome = match v["error"]["data"]["reason"].as_str() {
                    Some("command_id_conflict") => "conflict",
                    Some("abandoned") => "abandoned",
                    _ if replayed => "replay",
                    _ => "new",
                };
                out.insert(format!("ledger {m} {outcome}"));
            }
            What::CrashPointHit { point, .. } => {
                let m = host
                    .and_then(|h| last_method.get(&h))
                    .cloned()
                    .unwrap_or_default();
                out.insert(format!("crash point {point} reached during {m}"));
            }
            What::HostCrash { point: Some(p), .. } => {
                let m = host
                    .and_then(|h| last_method.get(&h))
                    .cloned()
                    .unwrap_or_default();
                out.insert(format!("crash point {p} crashed during {m}"));
            }
            _ => {}
        }
    }
    for (rule, n) in &r.rules {
        if *n > 0 {
            out.insert(format!("rule {rule}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{run, RunConfig};
    use crate::workload::Scenario;

    #[test]
    fn a_crash_storm_run_covers_crash_points_ledger_outcomes_faults_and_rules() {
        let r = run(&RunConfig {
            scenario: Scenario::CrashStorm,
            seed: 1,
            bug: None,
            client: Default::default(),
        });
        let f = features(&r);
        let has = |p: &str| f.iter().any(|x| x.starts_with(p));
        assert!(
            has("crash point after-intake-before-ack crashed during "),
            "{f:?}"
        );
        assert!(has("ledger session/start new"), "{f:?}");
        assert!(has("ledger turn/start "), "{f:?}");
        assert!(has("fault crash-point"), "{f:?}");
        assert!(has("rule 4.1 session/start fresh"), "{f:?}");
    }
}
