//! The fold of a whole session log into its [`Session`], and a per-run
//! memo of folds that lets a simulation load a log it loaded before in
//! time proportional to what was appended since.
//!
//! A host folds a session's whole log every time it loads it (a lease
//! grant, a restart) and every time it reads an unloaded session. In a
//! simulation the same session is loaded hundreds of times as it grows
//! (leases move, hosts crash), so folding from the first byte made the
//! cost of an event grow with the run's length (issue 10: at 256 commands
//! per client, two thirds of the CPU went to refolding). [`FoldMemo`]
//! keeps, per session id, the last bytes folded and their fold; a log that
//! begins with exactly those bytes starts from a copy of that fold and
//! decodes only the rest. Anything else (a truncated, compacted or rotted
//! log) misses and is folded from the start. The fold is a pure function
//! of the bytes, so a hit gives the very state a full fold would: a test
//! below compares the two on extended, torn, cut and damaged logs.
//!
//! Only the simulator installs the memo (`msp serve` loads a session once
//! per lease and would only pay for the copy).

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::record::{decode_log_each_from, LogCorrupt, LogShape, Record};
use super::session::Session;

/// A log's fold and what its decoding found.
#[derive(Debug, Clone)]
pub struct Folded {
    /// The session state.
    pub s: Session,
    /// The log's valid length, torn tail and snapshot head.
    pub shape: LogShape,
    /// Records folded after the snapshot head (all of them without one).
    pub tail_records: u64,
}

/// Folds `log`, the whole log of session `sid`; through the memo when one
/// is installed on this thread.
///
/// # Errors
///
/// The log is corrupt (see [`decode_log_each_from`]).
pub fn fold_log(sid: &str, log: &[u8]) -> Result<Folded, LogCorrupt> {
    if MEMO.with(|m| m.borrow().is_none()) {
        return fold_from(log, None);
    }
    let prior = MEMO.with(|m| {
        m.borrow_mut()
            .as_mut()
            .and_then(|m| m.take_prefix_of(sid, log))
    });
    let (mut bytes, start) = prior.map_or((Vec::new(), None), |(b, f)| (b, Some(f)));
    let had = bytes.len();
    let folded = fold_from(log, start)?;
    let valid = folded.shape.valid_len as usize;
    debug_assert!(valid >= had, "a fold from a prefix ends past it");
    bytes.extend_from_slice(&log[had..valid]);
    MEMO.with(|m| {
        if let Some(m) = m.borrow_mut().as_mut() {
            m.keep(sid, bytes, &folded);
        }
    });
    Ok(folded)
}

/// Folds `log` on from `start`, the fold of a prefix of it (from an empty
/// session without one).
fn fold_from(log: &[u8], start: Option<Folded>) -> Result<Folded, LogCorrupt> {
    let (mut s, prior, mut tail_records) = match start {
        Some(f) => (f.s, Some(f.shape), f.tail_records),
        None => (Session::default(), None, 0),
    };
    let shape = decode_log_each_from(log, prior, |rec, end| match rec {
        Record::Snapshot(snap) => s = Session::from_snapshot_owned(*snap),
        r => {
            tail_records += 1;
            s.apply_owned(r, end);
        }
    })?;
    Ok(Folded {
        s,
        shape,
        tail_records,
    })
}

/// Log bytes the memo keeps before it starts afresh.
const MAX_BYTES: usize = 256 << 20;

#[derive(Default)]
struct Memo {
    /// Per session id: the bytes last folded (whole valid frames) and
    /// their fold.
    entries: BTreeMap<String, (Vec<u8>, Folded)>,
    bytes: usize,
}

impl Memo {
    /// Takes `sid`'s entry out if its bytes begin `log` (a load that then
    /// fails leaves no entry behind).
    fn take_prefix_of(&mut self, sid: &str, log: &[u8]) -> Option<(Vec<u8>, Folded)> {
        let (bytes, _) = self.entries.get(sid)?;
        let hit = log.starts_with(bytes);
        let (bytes, f) = self.entries.remove(sid).expect("just found");
        self.bytes -= bytes.len();
        hit.then_some((bytes, f))
    }

    fn keep(&mut self, sid: &str, bytes: Vec<u8>, f: &Folded) {
        debug_assert_eq!(bytes.len() as u64, f.shape.valid_len);
        if self.bytes + bytes.len() > MAX_BYTES {
            *self = Memo::default();
        }
        self.bytes += bytes.len();
        let kept = Folded {
            s: f.s.clone(),
            // The kept bytes end at the valid length: no torn tail in them.
            shape: LogShape {
                torn: false,
                ..f.shape
            },
            tail_records: f.tail_records,
        };
        self.entries.insert(sid.to_string(), (bytes, kept));
    }
}

thread_local! {
    static MEMO: RefCell<Option<Memo>> = const { RefCell::new(None) };
}

/// Log folds on this thread are memoised while this lives.
#[must_use = "the memo is removed when the guard drops"]
pub struct FoldMemo(());

impl FoldMemo {
    /// Installs an empty memo on this thread (replacing any).
    pub fn install() -> FoldMemo {
        MEMO.with(|m| *m.borrow_mut() = Some(Memo::default()));
        FoldMemo(())
    }
}

impl Drop for FoldMemo {
    fn drop(&mut self) {
        MEMO.with(|m| *m.borrow_mut() = None);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::core::{Durability, HostConfig};
    use crate::harness::Harness;

    const SID: &str = "0198f0aa-2222-7000-8000-0000000000cc";

    /// The log of a session that saw updates, a rejection and turns;
    /// compacted (a snapshot head) when `compact_records` > 0.
    fn a_log(compact_records: u64) -> Vec<u8> {
        let mut cfg = HostConfig::new("/data", Durability::Durable, 7);
        cfg.compact_records = compact_records;
        let mut h = Harness::new(cfg, 1_754_590_931_000);
        let c = h.connect();
        h.send(c, &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}));
        h.send(c, &json!({"jsonrpc":"2.0","method":"initialized"}));
        let cid = |n: u32| format!("018f6a1e-9b3c-7c21-a54a-{n:012x}");
        let mut calls = vec![
            json!({"method":"session/start","params":{"commandId": cid(1), "sessionId": SID}}),
        ];
        for i in 0..12u32 {
            let expected = if i == 5 {
                0
            } else {
                u64::from(i.min(5)) + u64::from(i > 5) * u64::from(i - 6)
            };
            calls.push(json!({"method":"state/update","params":{"commandId": cid(100 + i), "sessionId": SID, "expectedRevision": expected, "set": {"k": i}}}));
            if i % 4 == 0 {
                calls.push(json!({"method":"turn/start","params":{"commandId": cid(300 + i), "sessionId": SID, "input": [{"type":"text","text":"hello"}]}}));
            }
        }
        for (id, mut call) in calls.into_iter().enumerate() {
            call["jsonrpc"] = json!("2.0");
            call["id"] = json!(id + 1);
            h.send(c, &call);
            h.advance(300);
            h.take(c);
        }
        h.disk.files[SID].contents()
    }

    /// What a fold gave, comparable (a `Session` has no `PartialEq`).
    fn seen(r: &Result<Folded, LogCorrupt>) -> String {
        format!("{r:?}")
    }

    fn frame_ends(log: &[u8]) -> Vec<usize> {
        let scan = crate::log::scan(log);
        scan.frames
            .iter()
            .map(|f| f.end_offset() as usize)
            .collect()
    }

    #[test]
    fn a_memoised_fold_is_the_full_fold_of_every_extension_cut_and_damage() {
        for compact in [0, 8] {
            let log = a_log(compact);
            let ends = frame_ends(&log);
            let want = if compact == 0 { 20 } else { 4 };
            assert!(
                ends.len() > want,
                "a log worth folding: {} frames",
                ends.len()
            );
            if compact > 0 {
                assert_eq!(
                    log[5],
                    crate::core::snapshot::SNAPSHOT_TYPE,
                    "a snapshot head"
                );
            }
            // Loads of growing prefixes, each after the one before, some
            // cut mid-frame (a torn tail), then damaged or shortened logs.
            let mut cuts: Vec<usize> = ends.iter().step_by(3).copied().collect();
            cuts.extend(ends.iter().step_by(5).map(|e| e - 3));
            cuts.sort_unstable();
            let mut damaged = log.clone();
            let mid = ends[ends.len() / 2] - 10;
            damaged[mid] ^= 0x40;
            let mut loads: Vec<Vec<u8>> = cuts.iter().map(|&c| log[..c].to_vec()).collect();
            loads.push(log.clone());
            loads.push(log.clone());
            loads.push(damaged.clone());
            loads.push(log.clone());
            loads.push(log[..ends[2]].to_vec());
            loads.push(log.clone());
            let mut damaged_head = log.clone();
            damaged_head[ends[0] - 2] ^= 1;
            loads.push(damaged_head);
            loads.push(log.clone());

            let expected: Vec<String> = loads.iter().map(|l| seen(&fold_log(SID, l))).collect();
            let _memo = FoldMemo::install();
            let mut hits = 0;
            for (i, l) in loads.iter().enumerate() {
                let before = MEMO.with(|m| {
                    m.borrow()
                        .as_ref()
                        .and_then(|m| m.entries.get(SID).map(|e| e.0.clone()))
                });
                let got = seen(&fold_log(SID, l));
                assert_eq!(
                    got, expected[i],
                    "load {i} (compact {compact}) differs through the memo"
                );
                hits += usize::from(before.is_some_and(|b| !b.is_empty() && l.starts_with(&b)));
            }
            // A compacted log has few frames: its cut loads mostly fail
            // (a torn snapshot) or shorten it.
            let least = if compact == 0 { loads.len() * 3 / 4 } else { 3 };
            assert!(
                hits >= least,
                "loads that start from the memo: {hits} of {}",
                loads.len()
            );
            let damaged_result = fold_log(SID, &damaged);
            assert!(
                damaged_result.is_err(),
                "damage inside a memoised prefix is still found"
            );
        }
    }

    #[test]
    fn without_the_memo_nothing_is_kept() {
        let log = a_log(0);
        fold_log(SID, &log).expect("folds");
        assert!(MEMO.with(|m| m.borrow().is_none()));
    }
}
