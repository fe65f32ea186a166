//! A crash model of the intake journal, on real files: proptest drives the
//! real [`Storage`] (appends, rounds of journal fsyncs, segment rotations
//! and checkpoints, releases, reopens, compactions, orderly exits) and, at
//! a crash, takes from every file what a power loss may take: each session
//! log keeps some length between what was certainly fsynced (at its open,
//! a checkpoint that covered it, a compaction, an exit that removed the
//! journal) and what was written, the journal's active segment likewise
//! between its last fsync and its end (retired segments were fsynced whole
//! at rotation). The next "process" recovers, at its start
//! (`recover_dead`) or at each session's open (`replay_session`), and
//! every log must hold every acknowledged append (everything before the
//! round's fsync that answered it) and nothing that was never appended.
//!
//! The durability bounds are the model's own bookkeeping from the storage
//! contract (which call fsyncs what), not read back from the code under
//! test. What a real file system cannot show is a missing fsync (the page
//! cache keeps the bytes): the model trusts that each fsync it counts on
//! happens; the replay, the epochs, the offsets and the holders are what
//! this checks (removing any of them fails it).

use std::fs::OpenOptions;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::journal::{self, Checkpoint, Journal};
use super::storage::{open_session, Layout, Leases, Step, Storage};
use crate::core::{OpenMode, OpenResult};

const SIDS: [&str; 3] = [
    "0198f0aa-4444-7000-8000-0000000000a1",
    "0198f0aa-4444-7000-8000-0000000000a2",
    "0198f0aa-4444-7000-8000-0000000000a3",
];

/// Segments rotate after a few entries (an entry is 64 bytes of framing
/// plus the frame).
const SEGMENT_BYTES: u64 = 400;

#[derive(Debug, Clone)]
enum Op {
    /// A frame of `len` payload bytes appended to session `s` (opened
    /// first when it is not held).
    Append {
        s: usize,
        len: usize,
    },
    /// The round's end: journal written, rotated when full, fsynced; every
    /// held session's appends are acknowledged. `checkpoint`: run the
    /// checkpoints of retired segments now.
    Round {
        checkpoint: bool,
    },
    Release {
        s: usize,
    },
    Compact {
        s: usize,
    },
    /// Power loss; `at_start`: the next process replays dead journals at
    /// its start, else at each session's open.
    Crash {
        seed: u64,
        at_start: bool,
    },
    /// An orderly exit (every session released, the storage closed), then
    /// a power loss.
    Exit {
        seed: u64,
        at_start: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..SIDS.len(), 0usize..48).prop_map(|(s, len)| Op::Append { s, len }),
        5 => any::<bool>().prop_map(|checkpoint| Op::Round { checkpoint }),
        1 => (0..SIDS.len()).prop_map(|s| Op::Release { s }),
        1 => (0..SIDS.len()).prop_map(|s| Op::Compact { s }),
        2 => (any::<u64>(), any::<bool>()).prop_map(|(seed, at_start)| Op::Crash { seed, at_start }),
        1 => (any::<u64>(), any::<bool>()).prop_map(|(seed, at_start)| Op::Exit { seed, at_start }),
    ]
}

/// What the model knows of one session.
#[derive(Debug, Default)]
struct Sess {
    /// Whether its directory and log exist.
    exists: bool,
    held: bool,
    /// The log file's bytes as written.
    content: Vec<u8>,
    /// End offsets of the whole frames in `content`.
    ends: Vec<usize>,
    /// Acknowledged: a round's journal fsync covered these bytes.
    acked: usize,
    /// Certainly fsynced in the log file itself.
    durable: usize,
    /// The log file's generation (a new one at every open and compaction).
    generation: u64,
    /// It has entries in the active segment, the last made for this
    /// generation.
    in_active: Option<u64>,
    /// The snapshot frame's length at the log's start (0: none yet).
    snap_len: usize,
    /// The archive's length.
    archive_len: u64,
}

struct World {
    _dir: tempfile::TempDir,
    layout: Layout,
    st: Option<Storage>,
    sess: Vec<Sess>,
    /// Journals created so far (their ids are numbered).
    journals: u64,
    /// The active segment's fsynced length.
    active_synced: u64,
    /// Retired segments' checkpoints, with the sessions (and generations)
    /// whose logs they fsync.
    pending: Vec<(Checkpoint, Vec<(usize, u64)>)>,
    frames: u64,
}

fn journal_id(n: u64) -> String {
    format!("0198f0aa-5555-7000-8000-{n:012x}")
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        let mut w = World {
            _dir: dir,
            layout,
            st: None,
            sess: (0..SIDS.len()).map(|_| Sess::default()).collect(),
            journals: 0,
            active_synced: 0,
            pending: Vec::new(),
            frames: 0,
        };
        w.start_process(false);
        w
    }

    fn st(&mut self) -> &mut Storage {
        self.st.as_mut().expect("a live process")
    }

    fn start_process(&mut self, recover_at_start: bool) {
        let guard = Leases::new(());
        if recover_at_start {
            journal::recover_dead(&self.layout, &guard).expect("recover");
        }
        self.journals += 1;
        let j = Journal::create(&self.layout, journal_id(self.journals))
            .expect("journal")
            .with_segment_bytes(SEGMENT_BYTES);
        self.st = Some(Storage::with_journal(self.layout.clone(), guard, j, true));
        self.active_synced = 0;
    }

    fn open(&mut self, s: usize) {
        let layout = self.layout.clone();
        let mode = if self.sess[s].exists {
            OpenMode::Existing
        } else {
            OpenMode::Create
        };
        let st = self.st();
        let ticket = st.begin_open();
        let (r, files) = open_session(&layout, st.guard(), SIDS[s], mode, ticket);
        let OpenResult::Opened { log } = r else {
            panic!("open of {}: {r:?}", SIDS[s]);
        };
        st.install(SIDS[s], files.expect("files"));
        let m = &mut self.sess[s];
        assert_eq!(&log[..], &m.content[..], "an open reads what was written");
        m.exists = true;
        m.held = true;
        // The open fsynced the log.
        m.durable = m.content.len();
        m.generation += 1;
    }

    fn append(&mut self, s: usize, len: usize) {
        if !self.sess[s].held {
            self.open(s);
        }
        self.frames += 1;
        let payload = format!("{{\"n\":{},\"pad\":\"{}\"}}", self.frames, "x".repeat(len));
        let frame = crate::log::encode_frame(3, payload.as_bytes());
        assert_eq!(self.st().append(SIDS[s], &frame), Step::Done(()));
        let m = &mut self.sess[s];
        m.content.extend_from_slice(&frame);
        m.ends.push(m.content.len());
        m.in_active = Some(m.generation);
    }

    fn round(&mut self, checkpoint: bool) {
        let seg = self
            .st()
            .flush_journal()
            .expect("journal write")
            .expect("journaling");
        let rotated = self.st().rotate_journal().expect("rotation");
        // The committer's fsync: of the segment that took the round's
        // entries (the old one, when it rotated).
        seg.sync_data().expect("journal fsync");
        if let Some(cp) = rotated {
            let covered = self
                .sess
                .iter_mut()
                .enumerate()
                .filter_map(|(i, m)| m.in_active.take().map(|g| (i, g)))
                .collect();
            self.pending.push((cp, covered));
            self.active_synced = 0;
        } else {
            self.active_synced = seg.metadata().expect("segment").len();
        }
        for m in self.sess.iter_mut().filter(|m| m.held) {
            m.acked = m.content.len();
        }
        if checkpoint {
            for (cp, covered) in std::mem::take(&mut self.pending) {
                cp.run().expect("checkpoint");
                for (i, g) in covered {
                    let m = &mut self.sess[i];
                    // The same file, released or not.
                    if m.generation == g {
                        m.durable = m.content.len();
                    }
                }
            }
        }
    }

    fn release(&mut self, s: usize) {
        if !self.sess[s].held {
            return;
        }
        self.st().release(SIDS[s]);
        // Not fsynced: its entries stay replayable (and a checkpoint of
        // the segment still fsyncs it).
        self.sess[s].held = false;
    }

    fn exit(&mut self, seed: u64, at_start: bool) {
        for s in 0..SIDS.len() {
            self.release(s);
        }
        self.st().close().expect("close");
        let own = journal::journals_dir(&self.layout).join(journal_id(self.journals));
        if !own.exists() {
            // A journal removed at exit covered nothing any more: every
            // log was fsynced whole.
            for m in &mut self.sess {
                m.durable = m.content.len();
            }
        }
        self.crash(seed, at_start);
    }

    fn compact(&mut self, s: usize) {
        if !self.sess[s].held {
            return;
        }
        self.frames += 1;
        let snapshot =
            crate::log::encode_frame(9, format!("{{\"snap\":{}}}", self.frames).as_bytes());
        let m = &self.sess[s];
        let range = (m.snap_len as u64, m.content.len() as u64);
        let archive_len = m.archive_len;
        let Step::Done(job) =
            self.st()
                .begin_compact(SIDS[s], snapshot.clone(), range, archive_len, None)
        else {
            panic!("no compaction job");
        };
        let epoch = job.epoch;
        let file = job.run();
        assert!(file.is_ok(), "compaction: {file:?}");
        assert_eq!(self.st().compact_done(SIDS[s], epoch, file), Some(Ok(())));
        let m = &mut self.sess[s];
        m.archive_len += range.1 - range.0;
        m.content = snapshot;
        m.ends = vec![m.content.len()];
        m.snap_len = m.content.len();
        // Compaction is the session's sync: old log, archive and new log
        // fsynced.
        m.acked = m.content.len();
        m.durable = m.content.len();
        m.generation += 1;
    }

    fn crash(&mut self, seed: u64, at_start: bool) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // The process dies: no release, no close, no checkpoint.
        self.st = None;
        self.pending.clear();
        let dead = journal::journals_dir(&self.layout).join(journal_id(self.journals));
        if dead.exists() {
            let mut segs: Vec<_> = std::fs::read_dir(&dead)
                .expect("dead journal")
                .map(|e| e.expect("entry").path())
                .filter(|p| p.extension().is_some_and(|x| x == "wal"))
                .collect();
            segs.sort();
            let active = segs.last().expect("an active segment");
            cut(active, self.active_synced, &mut rng);
        }
        for (i, m) in self.sess.iter_mut().enumerate() {
            m.held = false;
            m.in_active = None;
            if m.exists {
                cut(&self.layout.log_path(SIDS[i]), m.durable as u64, &mut rng);
            }
        }
        self.start_process(at_start);
        if at_start {
            assert!(!dead.exists(), "a journal replayed whole is removed");
        }
        for s in 0..SIDS.len() {
            if self.sess[s].exists {
                self.check_after_crash(s);
            }
        }
    }

    /// Opens a session after a crash and checks its log: every
    /// acknowledged byte is back, nothing else; then cuts a torn tail off
    /// as a load would.
    fn check_after_crash(&mut self, s: usize) {
        let layout = self.layout.clone();
        let st = self.st();
        let ticket = st.begin_open();
        let (r, files) = open_session(&layout, st.guard(), SIDS[s], OpenMode::Existing, ticket);
        let OpenResult::Opened { log } = r else {
            panic!("reopen of {}: {r:?}", SIDS[s]);
        };
        st.install(SIDS[s], files.expect("files"));
        let m = &self.sess[s];
        assert!(
            log.len() >= m.acked,
            "session {s}: {} acknowledged bytes, {} after the crash",
            m.acked,
            log.len()
        );
        assert_eq!(
            &log[..],
            &m.content[..log.len()],
            "session {s}: the log holds only what was appended"
        );
        let whole = m
            .ends
            .iter()
            .copied()
            .filter(|&e| e <= log.len())
            .max()
            .unwrap_or(0)
            .max(m.snap_len.min(log.len()));
        if whole < log.len() {
            assert_eq!(self.st().truncate(SIDS[s], whole as u64), Step::Done(()));
        }
        let m = &mut self.sess[s];
        m.content.truncate(whole);
        m.ends.retain(|&e| e <= whole);
        m.acked = m.acked.min(whole);
        m.durable = whole;
        m.held = true;
        m.generation += 1;
    }
}

/// Cuts `path` to a random length between `synced` and its length.
fn cut(path: &std::path::Path, synced: u64, rng: &mut ChaCha8Rng) {
    let f = OpenOptions::new().write(true).open(path).expect("file");
    let len = f.metadata().expect("len").len();
    assert!(synced <= len, "{}: synced {synced} > {len}", path.display());
    let kept = rng.gen_range(synced..=len);
    f.set_len(kept).expect("cut");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_acknowledged_append_survives_power_loss(ops in proptest::collection::vec(op(), 1..60)) {
        let mut w = World::new();
        for op in ops {
            match op {
                Op::Append { s, len } => w.append(s, len),
                Op::Round { checkpoint } => w.round(checkpoint),
                Op::Release { s } => w.release(s),
                Op::Compact { s } => w.compact(s),
                Op::Crash { seed, at_start } => w.crash(seed, at_start),
                Op::Exit { seed, at_start } => w.exit(seed, at_start),
            }
        }
        // A last power loss checks what the run left.
        w.crash(7, false);
    }
}
