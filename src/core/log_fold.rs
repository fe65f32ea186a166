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
//! decodes only the rest. So does a log cut short no shorter than those
//! bytes and grown since (a crash dropped its unsynced tail; see
//! [`LogBytes::shares_prefix`]). Anything else (a log cut below them,
//! compacted or rotted) misses. A miss whose log begins with a snapshot
//! head (the snapshot record and its parts) byte for byte equal to the
//! last head the memo decoded for that session starts from that head's
//! fold: a crash that tore a compacted log below what was folded gives
//! new bytes behind the same head, and decoding a long session's
//! snapshot again on every such load made the cost of an event grow with
//! the session (issue 10: a sixth of the instructions at 256 commands per
//! client). Comparing the head's bytes is far cheaper than decoding them.
//! Anything else is folded from the start. The fold is a pure function of
//! the bytes, so a hit gives the very state a full fold would: a test
//! below compares the two on extended, torn, cut and damaged logs.
//!
//! Only the simulator installs the memo (`msp serve` loads a session once
//! per lease and would only pay for the copy).

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::boundary::{Lineage, LogBytes};
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
pub fn fold_log(sid: &str, log: &LogBytes) -> Result<Folded, LogCorrupt> {
    if MEMO.with(|m| m.borrow().is_none()) {
        return fold_from(log, None);
    }
    let start = MEMO.with(|m| {
        m.borrow_mut()
            .as_mut()
            .and_then(|m| m.take_prefix_of(sid, log).or_else(|| m.head_of(sid, log)))
    });
    let (folded, head) = fold_keeping_head(log, start, true)?;
    MEMO.with(|m| {
        if let Some(m) = m.borrow_mut().as_mut() {
            if let Some(head) = head {
                let end = head.shape.valid_len as usize;
                m.keep_head(sid, log[..end].to_vec(), head);
            }
            m.keep(sid, log.lineage(), &folded);
        }
    });
    Ok(folded)
}

/// Folds `log` on from `start`, the fold of a prefix of it (from an empty
/// session without one).
fn fold_from(log: &[u8], start: Option<Folded>) -> Result<Folded, LogCorrupt> {
    fold_keeping_head(log, start, false).map(|(f, _)| f)
}

/// [`fold_from`], and, if `keep_head`, the fold of the log's snapshot head
/// (the snapshot and its parts, nothing after) when this fold decoded one.
fn fold_keeping_head(
    log: &[u8],
    start: Option<Folded>,
    keep_head: bool,
) -> Result<(Folded, Option<Folded>), LogCorrupt> {
    let (mut s, prior, mut tail_records) = match start {
        Some(f) => (f.s, Some(f.shape), f.tail_records),
        None => (Session::default(), None, 0),
    };
    let mut head = None;
    let shape = decode_log_each_from(log, prior, |rec, end| match rec {
        Record::Snapshot(snap) => {
            s = Session::from_snapshot_owned(*snap);
            if keep_head {
                head = Some(s.clone());
            }
        }
        r => {
            tail_records += 1;
            s.apply_owned(r, end);
        }
    })?;
    // A snapshot is only ever the first record: its fold is the fold of
    // the bytes up to its end, with no tail records.
    let head = head.map(|s| Folded {
        s,
        shape: LogShape {
            valid_len: shape.snapshot_bytes,
            torn: false,
            ..shape
        },
        tail_records: 0,
    });
    Ok((
        Folded {
            s,
            shape,
            tail_records,
        },
        head,
    ))
}

/// Log bytes the memo's folds stand for before it starts afresh (a bound
/// on the old session states it keeps alive).
const MAX_BYTES: u64 = 256 << 20;

#[derive(Default)]
struct Memo {
    /// Per session id: the lineage of the bytes last folded and their
    /// fold (whose shape says how many bytes it folded: whole valid
    /// frames).
    entries: BTreeMap<String, (Lineage, Folded)>,
    /// Per session id: the last snapshot head decoded (its bytes) and its
    /// fold.
    heads: BTreeMap<String, (Vec<u8>, Folded)>,
    bytes: u64,
}

impl Memo {
    /// Takes `sid`'s entry out if the bytes it folded begin `log`, as
    /// [`LogBytes::shares_prefix`] knows without comparing them: the same
    /// lineage and no shorter, or one `log` left (a crash's cut) keeping
    /// at least those bytes (a load that then fails leaves no entry
    /// behind).
    fn take_prefix_of(&mut self, sid: &str, log: &LogBytes) -> Option<Folded> {
        let (lineage, f) = self.entries.remove(sid)?;
        self.bytes -= f.shape.valid_len;
        log.shares_prefix(lineage, f.shape.valid_len).then_some(f)
    }

    /// A copy of `sid`'s head fold if `log` begins with exactly its bytes.
    fn head_of(&self, sid: &str, log: &[u8]) -> Option<Folded> {
        let (bytes, f) = self.heads.get(sid)?;
        log.starts_with(bytes).then(|| f.clone())
    }

    /// Counts `len` more bytes kept, starting afresh first if they would
    /// pass [`MAX_BYTES`].
    fn make_room(&mut self, len: u64) {
        if self.bytes + len > MAX_BYTES {
            *self = Memo::default();
        }
        self.bytes += len;
    }

    fn keep_head(&mut self, sid: &str, bytes: Vec<u8>, f: Folded) {
        debug_assert_eq!(bytes.len() as u64, f.shape.valid_len);
        self.make_room(f.shape.valid_len);
        if let Some((old, _)) = self.heads.insert(sid.to_string(), (bytes, f)) {
            self.bytes -= old.len() as u64;
        }
    }

    fn keep(&mut self, sid: &str, lineage: Lineage, f: &Folded) {
        self.make_room(f.shape.valid_len);
        let kept = Folded {
            s: f.s.clone(),
            // What is kept ends at the valid length: no torn tail in it.
            shape: LogShape {
                torn: false,
                ..f.shape
            },
            tail_records: f.tail_records,
        };
        if let Some((_, old)) = self.entries.insert(sid.to_string(), (lineage, kept)) {
            self.bytes -= old.shape.valid_len;
        }
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
                u64::from(i.min(5)) + u64::from(i > 5) * u64::from(i.saturating_sub(6))
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

    /// A file's life as the simulator's disk lives it, one step at a time:
    /// `Append(n)` bytes more of the log (in place), `Load`, damage or a
    /// cut (changes that are not appends), the same bytes anew, an append
    /// while a reader still holds the bytes.
    #[derive(Debug, Clone, Copy)]
    enum Step {
        Append(usize),
        Load,
        Flip(usize),
        Cut(usize),
        Anew,
        AppendShared(usize),
    }

    #[test]
    fn a_snapshot_anywhere_but_first_is_corrupt_with_or_without_a_prefix() {
        let plain = a_log(0);
        let compacted = a_log(8);
        let (p, c) = (frame_ends(&plain), frame_ends(&compacted));
        assert_eq!(compacted[5], crate::core::snapshot::SNAPSHOT_TYPE);
        // The plain log's first two records, then the compacted log's
        // snapshot (its first frame; this one has no parts).
        let mut bytes = plain[..p[1]].to_vec();
        bytes.extend_from_slice(&compacted[..c[0]]);
        let whole = decode_log_each_from(&bytes, None, |_, _| {}).unwrap_err();
        assert_eq!(whole.offset, p[1] as u64, "{whole:?}");
        // Going on after a decoded prefix of one or both records.
        for prefix in [p[0], p[1]] {
            let prior = decode_log_each_from(&bytes[..prefix], None, |_, _| {}).unwrap();
            let e = decode_log_each_from(&bytes, Some(prior), |_, _| {}).unwrap_err();
            assert_eq!(e, whole, "after a prefix of {prefix} bytes");
        }
    }

    #[test]
    fn a_memoised_fold_is_the_full_fold_of_every_extension_cut_and_damage() {
        use Step::*;
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
            // Grow the file frame by frame with loads between (some in the
            // middle of a frame: a torn tail the next append completes),
            // then damage, cut and rebuild it, loading after each.
            let mut steps = Vec::new();
            let mut at = 0;
            for (i, &e) in ends.iter().enumerate() {
                if i % 4 == 3 {
                    steps.extend([Append(e - 3 - at), Load, Append(3)]);
                } else {
                    steps.push(Append(e - at));
                }
                at = e;
                if i % 3 == 0 {
                    steps.push(Load);
                }
            }
            let mid = ends[ends.len() / 2] - 10;
            steps.extend([
                Load,
                Flip(mid),
                Load,
                Flip(mid),
                Load,
                Load,
                Cut(ends[2]),
                Load,
                Anew,
                Load,
                Flip(ends[0] - 2),
                Load,
                Flip(ends[0] - 2),
                Load,
                AppendShared(0),
                Load,
                // A cut below what was folded misses; one above it (a
                // crash dropping an unsynced tail) and a copy to append
                // to do not.
                Cut(ends[1]),
                Append(ends[2] - ends[1]),
                Load,
                Append(ends[4] - ends[2]),
                Cut(ends[3]),
                Load,
                Append(ends[4] - ends[3] - 2),
                Load,
                Cut(ends[4] - 5),
                AppendShared(5),
                Load,
            ]);

            let _memo = FoldMemo::install();
            let mut file = LogBytes::default();
            let (mut hits, mut cut_hits, mut damaged_found) = (0, 0, 0);
            // The bytes the last load folded, if it succeeded and only
            // appends and cuts that kept those bytes came since.
            let mut clean: Option<usize> = None;
            let mut cut_since = false;
            let mut written = 0;
            for (i, step) in steps.iter().enumerate() {
                match *step {
                    Append(n) => {
                        file.append(&log[written..written + n]);
                        written += n;
                    }
                    AppendShared(n) => {
                        let reader = file.clone();
                        file.append(&log[written..written + n]);
                        written += n;
                        assert_ne!(reader.lineage(), file.lineage(), "a copy starts anew");
                        cut_since = true;
                    }
                    Flip(at) => {
                        file.make_mut()[at] ^= 0x40;
                        clean = None;
                    }
                    Cut(len) => {
                        file.truncate(len);
                        written = len;
                        clean = clean.filter(|&folded| folded <= len);
                        cut_since = true;
                    }
                    Anew => {
                        file = LogBytes::from(file.to_vec());
                        clean = None;
                    }
                    Load => {
                        let memo_had = MEMO.with(|m| {
                            m.borrow().as_ref().and_then(|m| {
                                m.entries.get(SID).map(|(l, f)| (*l, f.shape.valid_len))
                            })
                        });
                        let got = fold_log(SID, &file);
                        let folded = got.as_ref().ok().map(|f| f.shape.valid_len as usize);
                        let (got, full) = (seen(&got), seen(&fold_from(&file, None)));
                        assert_eq!(
                            got, full,
                            "step {i} {step:?} (compact {compact}) differs through the memo"
                        );
                        let hit = memo_had.is_some_and(|(l, len)| file.shares_prefix(l, len));
                        assert_eq!(
                            hit,
                            clean.is_some(),
                            "step {i} {step:?} (compact {compact})"
                        );
                        hits += usize::from(hit);
                        cut_hits += usize::from(hit && cut_since);
                        clean = folded;
                        cut_since = false;
                        damaged_found += usize::from(got.starts_with("Err"));
                    }
                }
            }
            // Every load after a successful one, with only appends and
            // cuts that keep what it folded since, starts from the memo,
            // and no other.
            assert!(hits >= 3, "loads that start from the memo: {hits}");
            assert!(
                cut_hits >= 2,
                "loads after a cut above the fold or a copy that start from the memo: {cut_hits}"
            );
            assert!(
                damaged_found >= 2,
                "damage inside a memoised prefix is still found"
            );
        }
    }

    #[test]
    fn a_new_lineage_behind_the_same_snapshot_head_starts_from_the_head() {
        let log = a_log(8);
        assert_eq!(log[5], crate::core::snapshot::SNAPSHOT_TYPE);
        let ends = frame_ends(&log);
        let _memo = FoldMemo::install();
        let head_of =
            |file: &LogBytes| MEMO.with(|m| m.borrow().as_ref().and_then(|m| m.head_of(SID, file)));
        let first = LogBytes::from(log[..ends[ends.len() - 2]].to_vec());
        assert!(head_of(&first).is_none(), "nothing decoded yet");
        let full = seen(&fold_from(&first, None));
        assert_eq!(seen(&fold_log(SID, &first)), full);
        // The same bytes anew, then with a torn tail, then with one more
        // record: new lineages, the same head.
        for file in [
            LogBytes::from(first.to_vec()),
            LogBytes::from(log[..ends[ends.len() - 1] - 3].to_vec()),
            LogBytes::from(log.clone()),
        ] {
            let head = head_of(&file).expect("the head is remembered");
            assert!(head.shape.snapshot_bytes > 0 && head.tail_records == 0);
            assert_eq!(head.shape.valid_len, head.shape.snapshot_bytes);
            assert_eq!(seen(&fold_log(SID, &file)), seen(&fold_from(&file, None)));
        }
        // A byte of the head changed: no head hit, and the damage is found.
        let mut bad = log.clone();
        bad[ends[0] - 2] ^= 0x40;
        let bad = LogBytes::from(bad);
        assert!(head_of(&bad).is_none(), "other head bytes");
        let got = fold_log(SID, &bad);
        assert!(got.is_err(), "{}", seen(&got));
        assert_eq!(seen(&got), seen(&fold_from(&bad, None)));
    }

    /// The head remembered from a torn log is the head's fold alone: the
    /// tail it was decoded with was torn, the head is whole frames.
    #[test]
    fn a_head_first_decoded_from_a_torn_log_is_whole() {
        let log = a_log(8);
        let ends = frame_ends(&log);
        let _memo = FoldMemo::install();
        let torn = LogBytes::from(log[..ends[ends.len() - 1] - 3].to_vec());
        let got = fold_log(SID, &torn).expect("a torn tail folds");
        assert!(got.shape.torn, "the log was torn");
        let head = MEMO
            .with(|m| m.borrow().as_ref().and_then(|m| m.head_of(SID, &torn)))
            .expect("the head is remembered");
        assert!(!head.shape.torn, "a head is whole frames");
        let whole = LogBytes::from(log.clone());
        assert_eq!(seen(&fold_log(SID, &whole)), seen(&fold_from(&whole, None)));
    }

    #[test]
    fn the_memo_trusts_a_lineage_only_as_far_as_it_folded() {
        let log = a_log(0);
        let ends = frame_ends(&log);
        let _memo = FoldMemo::install();
        let mut file = LogBytes::from(log[..ends[5]].to_vec());
        let first = fold_log(SID, &file).expect("folds");
        // Cut below what was folded, then grow again past it, all in the
        // same buffer: the cut remembers keeping too few bytes.
        file.truncate(ends[1]);
        file.append(&log[ends[1]..ends[7]]);
        let again = fold_log(SID, &file).expect("folds");
        assert_eq!(seen(&Ok(again)), seen(&fold_from(&file, None)));
        assert_ne!(seen(&Ok(first)), seen(&fold_from(&file, None)));
    }

    #[test]
    fn without_the_memo_nothing_is_kept() {
        let log = LogBytes::from(a_log(0));
        fold_log(SID, &log).expect("folds");
        assert!(MEMO.with(|m| m.borrow().is_none()));
    }
}
