//! The host configurations a run draws are the ones its hosts run with:
//! an incarnation started without group commit (`solo-sync`, draws
//! version 10) syncs each intake alone, the others batch intakes, and a
//! sweep draws both.

use std::collections::BTreeMap;

use msp::core::record::{decode_log, Record};
use msp_sim::run::{run, RunConfig};
use msp_sim::trace::{Actor, What};
use msp_sim::workload::Scenario;

#[test]
fn an_incarnation_without_group_commit_syncs_each_intake_alone() {
    // Syncs that covered one intake in a solo incarnation, and the most
    // intakes one sync covered in a grouped one.
    let (mut solo_syncs, mut grouped_max) = (0, 0);
    for seed in 0..60 {
        let r = run(&RunConfig {
            scenario: Scenario::Mixed,
            seed,
            bug: None,
            client: Default::default(),
        });
        // A compaction makes appended records durable without a `Synced`
        // entry; those runs are left out.
        if r.mix.contains("compact@") {
            continue;
        }
        let mut solo: BTreeMap<(usize, u64), bool> = BTreeMap::new();
        // Each session file's length, as its appends, truncations and
        // power losses leave it.
        let mut len: BTreeMap<String, u64> = BTreeMap::new();
        // Intakes appended and not yet synced, by host, incarnation and
        // session: (the file's length after the append, intakes in it).
        let mut unsynced: BTreeMap<(usize, u64, String), Vec<(u64, u64)>> = BTreeMap::new();
        for e in &r.trace.entries {
            match (&e.actor, &e.what) {
                (
                    Actor::Host(h),
                    What::HostStart {
                        inc, solo_syncs, ..
                    },
                ) => {
                    solo.insert((*h, *inc), *solo_syncs);
                }
                (
                    Actor::Host(h),
                    What::Append {
                        inc,
                        session,
                        bytes,
                    },
                ) => {
                    let intakes = decode_log(bytes)
                        .map(|d| {
                            d.records
                                .iter()
                                .filter(|(r, _)| matches!(r, Record::Received { .. }))
                                .count()
                        })
                        .unwrap_or(0);
                    let l = len.entry(session.clone()).or_default();
                    *l += bytes.len() as u64;
                    unsynced
                        .entry((*h, *inc, session.clone()))
                        .or_default()
                        .push((*l, intakes as u64));
                }
                (
                    _,
                    What::Truncate {
                        session, len_bytes, ..
                    },
                ) => {
                    len.insert(session.clone(), *len_bytes);
                }
                (
                    _,
                    What::CrashKeep {
                        session,
                        kept_bytes,
                        ..
                    },
                ) => {
                    len.insert(session.clone(), *kept_bytes);
                }
                (
                    Actor::Host(h),
                    What::SyncFailed {
                        inc,
                        session,
                        kept_bytes,
                    },
                ) => {
                    len.insert(session.clone(), *kept_bytes);
                    unsynced.remove(&(*h, *inc, session.clone()));
                }
                (
                    Actor::Host(h),
                    What::Synced {
                        inc,
                        session,
                        upto_bytes,
                    },
                ) => {
                    let q = unsynced.entry((*h, *inc, session.clone())).or_default();
                    let covered = q.iter().take_while(|(end, _)| end <= upto_bytes).count();
                    let n: u64 = q.drain(..covered).map(|(_, n)| n).sum();
                    if solo[&(*h, *inc)] {
                        assert!(
                            n <= 1,
                            "seed {seed}: host{h} (inc {inc}) started without group commit \
                             synced {n} intakes of {session} at once"
                        );
                        solo_syncs += n;
                    } else {
                        grouped_max = grouped_max.max(n);
                    }
                }
                _ => {}
            }
        }
    }
    assert!(solo_syncs > 0, "no incarnation ran without group commit");
    assert!(
        grouped_max >= 2,
        "no sync of a grouped incarnation covered two intakes"
    );
}
