//! The intake journal: one append-only file per process that makes the
//! appends of every session it holds durable with one fsync.
//!
//! Without it, group commit across sessions is one `fdatasync` per session
//! per batch (on this machine each one three waited IOs: the data, the
//! inode, the cache flush), so 64 busy sessions cost 64 fsyncs where one
//! session costs one. With it, an append still goes to its session's log
//! (into the page cache, where readers and compaction find it), and the
//! same bytes go into the journal as an *entry* naming the session, the
//! log's *epoch* and the offset. A sync of any session is an fsync of the
//! journal; the logs themselves are fsynced lazily: when the journal
//! rotates to a new segment (a checkpoint), before a compaction, at an
//! orderly exit, and by the next holder when it opens the session.
//!
//! Layout: `DIR/journal/<journal id>/` holds `owner.lock` (locked by the
//! process for its life), `replay.lock` (serialises those who replay a dead
//! journal) and segments `<seq>.wal`. Every session directory has a
//! `holder` file naming the journal and epoch of the process that last
//! wrote the log: it is written and fsynced before the first journaled
//! append of an epoch.
//!
//! Why an entry applies only under its holder: within one epoch a log only
//! grows by appends, so writing an entry's bytes at its offset is
//! idempotent. An epoch ends when the log may change in any other way (a
//! release ends nothing: the released log keeps its epoch until the next
//! holder's open):
//! - a compaction fsyncs the old log, then writes a new epoch into
//!   `holder` before it renames the new log into place;
//! - the next holder (this process or another) replays the dead holder's
//!   entries of the epoch `holder` names (none while the holder lives: its
//!   bytes are in the page cache), fsyncs the log, and only then writes
//!   its own epoch.
//!
//! So an entry whose epoch `holder` does not name is stale and skipped,
//! and one it names is exactly what the log must contain at that offset.
//!
//! Replay of a dead journal (its owner's lock is free) happens in two
//! places: when a session is opened (only that session's entries), and at
//! the start of `msp serve` (every session with entries, then the journal
//! is removed if all of them were replayed).
//!
//! Entry format: `MSPJ`, payload length (u32 LE), CRC32C of the payload
//! (u32 LE), then the payload: the session id (36 bytes), epoch (u64 LE),
//! offset (u64 LE) and the appended bytes. The first invalid entry ends a
//! segment (a torn tail of an entry that was never acknowledged).

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fs4::fs_std::FileExt as LockExt;

use super::storage::{sync_dir, valid_session_id, Layout};

/// Rotate to a new segment (a checkpoint) once the active one is this big.
pub const SEGMENT_BYTES: u64 = 32 << 20;
/// Opens every entry.
const ENTRY_MAGIC: [u8; 4] = *b"MSPJ";
/// Magic, length, CRC.
const ENTRY_HEADER_BYTES: usize = 12;
/// Session id, epoch, offset.
const ENTRY_FIXED_BYTES: usize = 36 + 8 + 8;
/// The record type of the one frame in a `holder` file.
const HOLDER_FRAME_TYPE: u8 = 1;

/// Appends one entry to `out`.
pub fn encode_entry(out: &mut Vec<u8>, sid: &str, epoch: u64, offset: u64, bytes: &[u8]) {
    debug_assert!(valid_session_id(sid), "the storage checks ids at open");
    let len = ENTRY_FIXED_BYTES + bytes.len();
    out.reserve(ENTRY_HEADER_BYTES + len);
    out.extend_from_slice(&ENTRY_MAGIC);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    let crc_at = out.len();
    out.extend_from_slice(&[0; 4]);
    let start = out.len();
    out.extend_from_slice(sid.as_bytes());
    out.extend_from_slice(&epoch.to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(bytes);
    let crc = crc32c::crc32c(&out[start..]);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
}

/// One journal entry, borrowed from a segment's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The session.
    pub sid: &'a str,
    /// The epoch of the session's log the bytes belong to.
    pub epoch: u64,
    /// Where in the log the bytes go.
    pub offset: u64,
    /// The appended bytes.
    pub bytes: &'a [u8],
}

/// The valid entries at the start of a segment, in order: the first
/// invalid one (a torn write, garbage) ends it.
pub fn decode_entries(seg: &[u8]) -> Vec<Entry<'_>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let Some(header) = seg.get(at..at + ENTRY_HEADER_BYTES) {
        if header[..4] != ENTRY_MAGIC {
            break;
        }
        let len = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        let start = at + ENTRY_HEADER_BYTES;
        let Some(payload) = start.checked_add(len).and_then(|end| seg.get(start..end)) else {
            break;
        };
        if len < ENTRY_FIXED_BYTES || crc32c::crc32c(payload) != crc {
            break;
        }
        let Ok(sid) = std::str::from_utf8(&payload[..36]) else {
            break;
        };
        if !valid_session_id(sid) {
            break;
        }
        out.push(Entry {
            sid,
            epoch: u64::from_le_bytes(payload[36..44].try_into().expect("8 bytes")),
            offset: u64::from_le_bytes(payload[44..52].try_into().expect("8 bytes")),
            bytes: &payload[ENTRY_FIXED_BYTES..],
        });
        at = start + len;
    }
    out
}

/// Who last wrote a session's log: a journal and an epoch of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The journal's id (its directory name).
    pub journal: String,
    /// The epoch.
    pub epoch: u64,
}

impl Holder {
    fn encode(&self) -> Vec<u8> {
        crate::log::encode_frame(
            HOLDER_FRAME_TYPE,
            format!("{} {}", self.journal, self.epoch).as_bytes(),
        )
    }

    fn decode(bytes: &[u8]) -> Option<Holder> {
        let f = crate::log::decode_frame(bytes, 0).ok()?;
        if f.record_type != HOLDER_FRAME_TYPE {
            return None;
        }
        let text = std::str::from_utf8(f.payload).ok()?;
        let (journal, epoch) = text.split_once(' ')?;
        if !valid_journal_id(journal) {
            return None;
        }
        Some(Holder {
            journal: journal.to_string(),
            epoch: epoch.parse().ok()?,
        })
    }
}

/// Journal ids are UUIDs, like session ids (anything else would be a path
/// the data directory must not contain).
fn valid_journal_id(id: &str) -> bool {
    valid_session_id(id)
}

/// `DIR/journal`.
pub fn journals_dir(layout: &Layout) -> PathBuf {
    layout.root().join("journal")
}

fn holder_path(layout: &Layout, sid: &str) -> PathBuf {
    layout.session_dir(sid).join("holder")
}

/// The session's holder; `None` when there is none or it is unreadable
/// (torn while being written: then every entry it could name was already
/// made durable in the log, see the module docs).
pub fn read_holder(layout: &Layout, sid: &str) -> io::Result<Option<Holder>> {
    match std::fs::read(holder_path(layout, sid)) {
        Ok(b) => Ok(Holder::decode(&b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes and fsyncs the session's holder (the caller holds its lease; a
/// new file's directory entry is made durable by the caller's directory
/// sync).
pub fn write_holder(layout: &Layout, sid: &str, holder: &Holder) -> io::Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(holder_path(layout, sid))?;
    let bytes = holder.encode();
    f.write_all_at(&bytes, 0)?;
    f.set_len(bytes.len() as u64)?;
    f.sync_data()
}

/// The segments of a journal directory, oldest first.
fn segments(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for e in rd {
        let e = e?;
        let name = e.file_name();
        let Some(seq) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".wal"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        out.push((seq, e.path()));
    }
    out.sort();
    Ok(out)
}

fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:016}.wal"))
}

/// Opens (creating) a lock file, as the lease registry does.
fn open_lock(path: &Path) -> io::Result<File> {
    <File as super::lease::LockFile>::create(&(), path)
}

/// A dead journal, locked for replay: no other replayer runs while this
/// value lives, and its owner is gone.
struct DeadJournal {
    dir: PathBuf,
    _replay: File,
}

impl DeadJournal {
    /// Locks `dir` for replay (waiting for another replayer) and checks
    /// that its owner is gone; `None` when the owner is alive or the
    /// journal was removed meanwhile.
    fn lock(dir: &Path) -> io::Result<Option<DeadJournal>> {
        if !dir.exists() {
            return Ok(None);
        }
        let replay = match open_lock(&dir.join("replay.lock")) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        LockExt::lock_exclusive(&replay)?;
        if !dir.join("owner.lock").exists() {
            // Removed by the replayer we waited for.
            return Ok(None);
        }
        let owner = open_lock(&dir.join("owner.lock"))?;
        if !LockExt::try_lock_shared(&owner)? {
            return Ok(None);
        }
        let _ = LockExt::unlock(&owner);
        Ok(Some(DeadJournal {
            dir: dir.to_path_buf(),
            _replay: replay,
        }))
    }

    /// Every segment's bytes, oldest first.
    fn read(&self) -> io::Result<Vec<Vec<u8>>> {
        segments(&self.dir)?
            .into_iter()
            .map(|(_, p)| std::fs::read(p))
            .collect()
    }
}

/// The writes a holder's entries ask of its session's log, in order: the
/// entries of `sid` whose epoch is the holder's.
pub fn writes_for<'a>(segs: &'a [Vec<u8>], sid: &str, epoch: u64) -> Vec<(u64, &'a [u8])> {
    segs.iter()
        .flat_map(|s| decode_entries(s))
        .filter(|e| e.sid == sid && e.epoch == epoch)
        .map(|e| (e.offset, e.bytes))
        .collect()
}

/// Writes the entries into the log and fsyncs it.
fn apply(log: &File, writes: &[(u64, &[u8])]) -> io::Result<()> {
    for (offset, bytes) in writes {
        log.write_all_at(bytes, *offset)?;
    }
    log.sync_data()
}

/// Opens a log for positioned writes (a descriptor opened for appending
/// would append whatever the offset).
fn open_for_writes(layout: &Layout, sid: &str) -> io::Result<File> {
    OpenOptions::new().write(true).open(layout.log_path(sid))
}

/// Called with the session's lease held, before its log is read: replays
/// what a dead holder journaled for it and makes the log durable. Returns
/// how many entries were written.
pub fn replay_session(layout: &Layout, own: &str, sid: &str) -> io::Result<usize> {
    let mut n = 0;
    let log = open_for_writes(layout, sid)?;
    if let Some(h) = read_holder(layout, sid)? {
        if h.journal != own {
            if let Some(dead) = DeadJournal::lock(&journals_dir(layout).join(&h.journal))? {
                let segs = dead.read()?;
                let writes = writes_for(&segs, sid, h.epoch);
                n = writes.len();
                apply(&log, &writes)?;
            }
        }
    }
    // Whatever the log holds now is durable before anything read from it is
    // acknowledged (a crashed process's bytes may sit in the page cache).
    log.sync_data()?;
    Ok(n)
}

/// Removes a journal directory whose entries are no longer needed (its
/// segments, its lock files, itself) and makes the removal durable. The
/// owner's lock goes last but one: a replayer that waited on `replay.lock`
/// finds `owner.lock` gone and knows there is nothing left to replay.
fn remove_dir(dir: &Path) -> io::Result<()> {
    for (_, p) in segments(dir)? {
        std::fs::remove_file(p)?;
    }
    std::fs::remove_file(dir.join("owner.lock"))?;
    std::fs::remove_file(dir.join("replay.lock"))?;
    std::fs::remove_dir(dir)?;
    sync_dir(dir.parent().expect("DIR/journal/<id>"))
}

/// What [`recover_dead`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// Dead journals found.
    pub journals: usize,
    /// Of them, replayed whole and removed.
    pub removed: usize,
    /// Entries written into session logs.
    pub entries: usize,
}

/// At startup: replays every dead journal into the logs of its sessions
/// (taking each session's lease; one held elsewhere is left to whoever
/// holds it, who replays it at its open) and removes each journal that
/// was replayed whole.
pub fn recover_dead(layout: &Layout, guard: &super::storage::Leases) -> io::Result<Recovered> {
    let mut out = Recovered::default();
    let rd = match std::fs::read_dir(journals_dir(layout)) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    let mut dirs: Vec<PathBuf> = rd.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    dirs.sort();
    for dir in dirs {
        let Some(jid) = dir.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            continue;
        };
        if !valid_journal_id(&jid) {
            continue;
        }
        let Some(dead) = DeadJournal::lock(&dir)? else {
            continue;
        };
        out.journals += 1;
        let segs = dead.read()?;
        let mut sids: Vec<&str> = segs
            .iter()
            .flat_map(|s| decode_entries(s))
            .map(|e| e.sid)
            .collect();
        sids.sort_unstable();
        sids.dedup();
        let mut whole = true;
        for sid in sids {
            let lease = match guard.take(&layout.lease_path(sid)) {
                Ok(super::lease::Take::Taken(l)) => l,
                Ok(_) => {
                    whole = false;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            match read_holder(layout, sid)? {
                Some(h) if h.journal == jid => {
                    let log = match open_for_writes(layout, sid) {
                        Ok(f) => f,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(e),
                    };
                    let writes = writes_for(&segs, sid, h.epoch);
                    out.entries += writes.len();
                    apply(&log, &writes)?;
                }
                // Someone else wrote the log since: these entries are
                // stale.
                _ => {}
            }
            drop(lease);
        }
        if whole {
            remove_dir(&dir)?;
            out.removed += 1;
        }
    }
    Ok(out)
}

/// A segment that was rotated out: it may be removed once every log that
/// has entries in it is fsynced.
#[derive(Debug)]
pub struct Checkpoint {
    segment: PathBuf,
    /// The logs, by path: a released session's file is not kept open
    /// until its segment retires (a host that loads many sessions would
    /// run out of descriptors), and an fsync through any descriptor of a
    /// file makes its written bytes durable. A log a compaction replaced
    /// since was fsynced by it (its new file's fsync here is harmless).
    logs: Vec<PathBuf>,
}

impl Checkpoint {
    /// Fsyncs the logs, then removes the segment (blocking). On an error
    /// the segment stays (replay skips what is stale in it).
    pub fn run(self) -> Result<(), String> {
        sync_logs(&self.logs)
            .map_err(|e| format!("checkpoint of {}: {e}", self.segment.display()))?;
        std::fs::remove_file(&self.segment)
            .map_err(|e| format!("removing {}: {e}", self.segment.display()))
    }
}

/// Fsyncs each log (one that is gone has nothing left to make durable).
fn sync_logs(logs: &[PathBuf]) -> io::Result<()> {
    for path in logs {
        match File::open(path) {
            Ok(f) => f.sync_data()?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// This process's journal (owned by the storage, on the driver thread).
#[derive(Debug)]
pub struct Journal {
    id: String,
    dir: PathBuf,
    _owner: File,
    seq: u64,
    active: Arc<File>,
    active_len: u64,
    /// Rotate once the active segment is this big.
    segment_bytes: u64,
    /// Entries of this round, written by [`Journal::flush`].
    buf: Vec<u8>,
    /// The sessions with entries in `buf` (failed together if it cannot be
    /// written).
    buf_sids: Vec<String>,
    /// The sessions with entries in the active segment.
    dirty: BTreeSet<String>,
    /// Where their logs are.
    layout: Layout,
}

impl Journal {
    /// Creates this process's journal under `DIR/journal/<id>` and locks
    /// it for the process's life.
    pub fn create(layout: &Layout, id: String) -> io::Result<Journal> {
        debug_assert!(valid_journal_id(&id));
        let top = journals_dir(layout);
        std::fs::create_dir_all(&top)?;
        let dir = top.join(&id);
        std::fs::create_dir(&dir)?;
        let owner = open_lock(&dir.join("owner.lock"))?;
        if !LockExt::try_lock_exclusive(&owner)? {
            return Err(io::Error::other(format!("journal {id} is locked")));
        }
        open_lock(&dir.join("replay.lock"))?;
        let active = Arc::new(Self::open_segment(&dir, 1)?);
        sync_dir(&dir)?;
        sync_dir(&top)?;
        Ok(Journal {
            id,
            dir,
            _owner: owner,
            seq: 1,
            active,
            active_len: 0,
            segment_bytes: SEGMENT_BYTES,
            buf: Vec::new(),
            buf_sids: Vec::new(),
            dirty: BTreeSet::new(),
            layout: layout.clone(),
        })
    }

    fn open_segment(dir: &Path, seq: u64) -> io::Result<File> {
        OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(segment_path(dir, seq))
    }

    /// Sets the size at which the active segment rotates (tests and
    /// `MSP_JOURNAL_SEGMENT_BYTES` use small ones to exercise checkpoints).
    pub fn with_segment_bytes(mut self, bytes: u64) -> Journal {
        self.segment_bytes = bytes.max(1);
        self
    }

    /// The journal's id (what `holder` files name).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Journals an append of `bytes` at `offset` of the session's log
    /// (written at the next [`Journal::flush`]).
    pub fn record(&mut self, sid: &str, epoch: u64, offset: u64, bytes: &[u8]) {
        encode_entry(&mut self.buf, sid, epoch, offset, bytes);
        if self.buf_sids.last().map(String::as_str) != Some(sid) {
            self.buf_sids.push(sid.to_string());
        }
        if !self.dirty.contains(sid) {
            self.dirty.insert(sid.to_string());
        }
    }

    /// The logs of the sessions with entries in the active segment.
    fn dirty_logs(&self) -> Vec<PathBuf> {
        self.dirty.iter().map(|s| self.layout.log_path(s)).collect()
    }

    /// Writes this round's entries to the active segment; returns the
    /// segment to fsync for them. On an error the sessions whose entries
    /// were in the round come back (they must fail), and the journal moves
    /// to a fresh segment.
    pub fn flush(&mut self) -> Result<Arc<File>, (String, Vec<String>)> {
        let sids = std::mem::take(&mut self.buf_sids);
        if self.buf.is_empty() {
            return Ok(Arc::clone(&self.active));
        }
        let res = (&*self.active).write_all(&self.buf);
        self.active_len += self.buf.len() as u64;
        self.buf.clear();
        match res {
            Ok(()) => Ok(Arc::clone(&self.active)),
            Err(e) => {
                // The segment's end is unknown now: never append after it.
                self.active_len = u64::MAX;
                Err((format!("writing the intake journal: {e}"), sids))
            }
        }
    }

    /// After a flush: when the active segment is full (or broken), fsyncs
    /// it, starts the next one and returns the checkpoint that retires the
    /// full one. The fsync is what keeps a later request valid: a sync
    /// request covers only the segment it names, and a session's earlier
    /// entries may sit in this one. On an error, the sessions with entries
    /// in the segment come back (they must fail).
    pub fn rotate_if_full(&mut self) -> Result<Option<Checkpoint>, (String, Vec<String>)> {
        if self.active_len < self.segment_bytes {
            return Ok(None);
        }
        let fail = |j: &Journal, what: &str, e: io::Error| {
            (
                format!("{what} the intake journal: {e}"),
                j.dirty.iter().cloned().collect::<Vec<_>>(),
            )
        };
        self.active
            .sync_data()
            .map_err(|e| fail(self, "syncing", e))?;
        let next =
            Self::open_segment(&self.dir, self.seq + 1).map_err(|e| fail(self, "rotating", e))?;
        sync_dir(&self.dir).map_err(|e| fail(self, "rotating", e))?;
        let old = segment_path(&self.dir, self.seq);
        self.seq += 1;
        self.active = Arc::new(next);
        self.active_len = 0;
        Ok(Some(Checkpoint {
            segment: old,
            logs: {
                let logs = self.dirty_logs();
                self.dirty.clear();
                logs
            },
        }))
    }

    /// At an orderly exit, after every session was released: fsyncs the
    /// logs with entries in the active segment, then removes the journal,
    /// unless a checkpoint of a retired segment has not finished (its
    /// segment is still there: the journal then stays, and the next start
    /// replays it, skipping what is stale). On an error it stays too.
    pub fn retire(self) -> io::Result<()> {
        sync_logs(&self.dirty_logs())?;
        if segments(&self.dir)?.len() > 1 {
            return Ok(());
        }
        remove_dir(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const A: &str = "0198f0aa-1111-7000-8000-0000000000aa";
    const B: &str = "0198f0aa-1111-7000-8000-0000000000bb";

    #[test]
    fn entries_round_trip_and_a_torn_or_flipped_one_ends_the_segment() {
        let entries = [
            Entry {
                sid: A,
                epoch: 3,
                offset: 0,
                bytes: b"first",
            },
            Entry {
                sid: B,
                epoch: 4,
                offset: 10,
                bytes: b"",
            },
            Entry {
                sid: A,
                epoch: 3,
                offset: 5,
                bytes: b"second",
            },
        ];
        let mut seg = Vec::new();
        let mut ends = Vec::new();
        for e in &entries {
            encode_entry(&mut seg, e.sid, e.epoch, e.offset, e.bytes);
            ends.push(seg.len());
        }
        assert_eq!(decode_entries(&seg), entries);
        // Every cut keeps exactly the whole entries before it.
        for cut in 0..=seg.len() {
            let whole = ends.iter().filter(|&&e| e <= cut).count();
            assert_eq!(decode_entries(&seg[..cut]).len(), whole, "cut at {cut}");
        }
        // A flipped bit anywhere in an entry ends the segment there.
        for at in 0..seg.len() {
            let mut bad = seg.clone();
            bad[at] ^= 0x10;
            let first_bad = ends.iter().position(|&e| at < e).expect("inside");
            assert_eq!(decode_entries(&bad).len(), first_bad, "flip at {at}");
        }
    }

    #[test]
    fn only_the_holders_epoch_of_the_session_is_replayed_in_order() {
        let mut s1 = Vec::new();
        encode_entry(&mut s1, A, 1, 0, b"old");
        encode_entry(&mut s1, A, 2, 0, b"aa");
        encode_entry(&mut s1, B, 2, 0, b"bb");
        let mut s2 = Vec::new();
        encode_entry(&mut s2, A, 2, 2, b"cc");
        let segs = vec![s1, s2];
        assert_eq!(
            writes_for(&segs, A, 2),
            vec![(0, &b"aa"[..]), (2, &b"cc"[..])]
        );
        assert_eq!(writes_for(&segs, A, 1), vec![(0, &b"old"[..])]);
        assert!(writes_for(&segs, A, 7).is_empty());
    }

    const J1: &str = "0198f0aa-2222-7000-8000-0000000000c1";

    /// A session directory with an empty log, as an open leaves it.
    fn session(layout: &Layout, sid: &str) {
        std::fs::create_dir_all(layout.session_dir(sid)).expect("mkdir");
        std::fs::write(layout.log_path(sid), b"").expect("log");
    }

    /// A journal of a "process" that journals `appends` of each session
    /// under `epoch`, writing them into the logs too, then dies: its lock
    /// goes, its logs keep only `kept` bytes each (the page cache lost the
    /// rest), its journal stays.
    fn die_after(
        layout: &Layout,
        jid: &str,
        epoch: u64,
        appends: &[(&str, &[u8])],
        segment_bytes: u64,
        kept: u64,
    ) -> Vec<Checkpoint> {
        let mut j = Journal::create(layout, jid.to_string())
            .expect("journal")
            .with_segment_bytes(segment_bytes);
        let mut logs: BTreeMap<&str, (Arc<File>, u64)> = BTreeMap::new();
        let mut checkpoints = Vec::new();
        for (sid, bytes) in appends {
            let (log, len) = logs.entry(sid).or_insert_with(|| {
                write_holder(
                    layout,
                    sid,
                    &Holder {
                        journal: jid.to_string(),
                        epoch,
                    },
                )
                .expect("holder");
                let f = OpenOptions::new()
                    .append(true)
                    .open(layout.log_path(sid))
                    .expect("log");
                (Arc::new(f), 0)
            });
            (&**log).write_all(bytes).expect("append");
            j.record(sid, epoch, *len, bytes);
            *len += bytes.len() as u64;
            j.flush().expect("flush");
            checkpoints.extend(j.rotate_if_full().expect("rotate"));
        }
        drop(j);
        for sid in logs.keys() {
            let f = OpenOptions::new()
                .write(true)
                .open(layout.log_path(sid))
                .expect("log");
            f.set_len(kept).expect("lose the unsynced tail");
        }
        checkpoints
    }

    fn log(layout: &Layout, sid: &str) -> Vec<u8> {
        std::fs::read(layout.log_path(sid)).expect("read log")
    }

    #[test]
    fn an_open_replays_what_the_dead_holder_journaled_and_only_that() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        session(&layout, A);
        session(&layout, B);
        die_after(
            &layout,
            J1,
            7,
            &[(A, b"one,"), (B, b"bee,"), (A, b"two,"), (A, b"three")],
            SEGMENT_BYTES,
            0,
        );
        assert_eq!(log(&layout, A), b"");
        assert_eq!(replay_session(&layout, B, A).expect("replay"), 3);
        assert_eq!(log(&layout, A), b"one,two,three");
        // Replaying again writes the same bytes at the same offsets.
        assert_eq!(replay_session(&layout, B, A).expect("replay"), 3);
        assert_eq!(log(&layout, A), b"one,two,three");
        // A holder of another epoch (a compaction, a later open) makes
        // the dead journal's entries stale.
        write_holder(
            &layout,
            B,
            &Holder {
                journal: J1.to_string(),
                epoch: 8,
            },
        )
        .expect("holder");
        assert_eq!(replay_session(&layout, A, B).expect("replay"), 0);
        assert_eq!(log(&layout, B), b"");
        // The process's own journal is never replayed (it is alive).
        assert_eq!(replay_session(&layout, J1, A).expect("replay"), 0);
    }

    /// A journal id becomes a path under `DIR/journal`: a holder naming
    /// anything but a UUID (`..`, a path) is unreadable, as a torn one is,
    /// and a directory there that is not named by one is not a journal.
    #[test]
    fn a_holder_or_directory_not_named_by_a_uuid_is_no_journal() {
        let good = Holder {
            journal: J1.to_string(),
            epoch: 3,
        };
        assert_eq!(Holder::decode(&good.encode()), Some(good));
        for bad in ["..", "../../etc", "notes", ""] {
            let h = Holder {
                journal: bad.to_string(),
                epoch: 3,
            };
            assert_eq!(Holder::decode(&h.encode()), None, "{bad:?}");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        let stray = journals_dir(&layout).join("notes");
        std::fs::create_dir_all(&stray).expect("mkdir");
        std::fs::write(stray.join("owner.lock"), b"").expect("owner.lock");
        let guard = super::super::storage::Leases::new(());
        assert_eq!(
            recover_dead(&layout, &guard).expect("recover"),
            Recovered::default(),
            "not a journal"
        );
        assert!(stray.join("owner.lock").exists(), "left alone");
        assert!(!stray.join("replay.lock").exists(), "not even locked");
    }

    #[test]
    fn a_live_journal_is_not_replayed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        session(&layout, A);
        let mut j = Journal::create(&layout, J1.to_string()).expect("journal");
        let h = Holder {
            journal: J1.to_string(),
            epoch: 1,
        };
        write_holder(&layout, A, &h).expect("holder");
        j.record(A, 1, 0, b"in the page cache only");
        j.flush().expect("flush");
        assert_eq!(replay_session(&layout, B, A).expect("replay"), 0);
        let guard = super::super::storage::Leases::new(());
        assert_eq!(
            recover_dead(&layout, &guard).expect("recover"),
            Recovered::default(),
            "its owner holds the lock"
        );
        assert!(journals_dir(&layout).join(J1).exists());
        j.retire().expect("retire");
        assert!(!journals_dir(&layout).join(J1).exists());
    }

    #[test]
    fn startup_replays_every_session_of_a_dead_journal_then_removes_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        session(&layout, A);
        session(&layout, B);
        // Segments of ~40 bytes: every flush rotates, and no checkpoint
        // ran before the death (the lost bytes are still journaled).
        let cps = die_after(
            &layout,
            J1,
            3,
            &[(A, b"a1,"), (B, b"b1,"), (A, b"a2,"), (B, b"b2")],
            40,
            0,
        );
        assert_eq!(cps.len(), 4, "every flush filled its segment");
        let guard = super::super::storage::Leases::new(());
        let rec = recover_dead(&layout, &guard).expect("recover");
        assert_eq!(
            rec,
            Recovered {
                journals: 1,
                removed: 1,
                entries: 4
            }
        );
        assert_eq!(log(&layout, A), b"a1,a2,");
        assert_eq!(log(&layout, B), b"b1,b2");
        assert!(!journals_dir(&layout).join(J1).exists());
        assert_eq!(
            recover_dead(&layout, &guard).expect("again"),
            Recovered::default()
        );
    }

    #[test]
    fn a_checkpoint_makes_the_logs_durable_before_it_drops_their_segment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        session(&layout, A);
        // An entry is 64 bytes of framing and the appended bytes: the
        // first fills a segment of 70, the second does not.
        let cps = die_after(&layout, J1, 1, &[(A, b"first,"), (A, b"2")], 70, 6);
        assert_eq!(cps.len(), 1, "the first entry filled a segment");
        let seg_dir = journals_dir(&layout).join(J1);
        assert_eq!(segments(&seg_dir).expect("segments").len(), 2);
        for cp in cps {
            assert_eq!(cp.logs.len(), 1, "the log with entries in it");
            cp.run().expect("checkpoint");
        }
        let left = segments(&seg_dir).expect("segments");
        assert_eq!(left.len(), 1, "the retired segment is gone");
        // What remains replays the tail only; the head is in the log.
        assert_eq!(replay_session(&layout, B, A).expect("replay"), 1);
        assert_eq!(log(&layout, A), b"first,2");
    }

    #[test]
    fn a_holder_round_trips_and_a_torn_one_reads_as_none() {
        let h = Holder {
            journal: B.to_string(),
            epoch: 42,
        };
        let bytes = h.encode();
        assert_eq!(Holder::decode(&bytes), Some(h));
        for cut in 0..bytes.len() {
            assert_eq!(Holder::decode(&bytes[..cut]), None, "cut at {cut}");
        }
    }
}
