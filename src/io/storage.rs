//! Session logs on disk: `DIR/sessions/<sessionId>/session.log`, next to
//! its `lease` (PROTOCOL.md section 1).
//!
//! [`Storage`] lives in the driver task and owns the open log files and
//! leases of the sessions this process holds. The slow parts run on
//! blocking threads: [`open_session`] and [`read_session`] (read a whole
//! log), and the `sync_data` of a [`SyncJob`] on the group committer's sync
//! workers ([`super::commit`]). Appends are plain `write_all` calls into the
//! page cache, in output order, on the driver's thread; with group commit
//! each is also an entry of this process's intake journal
//! ([`super::journal`]), whose fsync is the session's sync, and the log is
//! fsynced lazily (checkpoint, compaction, release). An open replays what
//! a dead holder journaled, fsyncs the log and writes the session's
//! `holder` before the log is read.
//!
//! Compaction (`Output::Compact`, see `core::snapshot` for the layout) runs
//! on a blocking thread as a [`CompactJob`]: the archive
//! (`history.log`) is cut to its valid length, the log's archivable bytes
//! are appended to it and it is fsynced; the snapshot is written to
//! `session.log.compact` and fsynced; that file is renamed over
//! `session.log`; the directory is fsynced. A crash before the rename
//! leaves the old log (and bytes past the archive's valid length, which
//! the next compaction cuts off); after it, the new one. Appends the core
//! makes meanwhile wait in memory and go to the new log, in order, once the
//! job is done. Every open removes a leftover `session.log.compact` and
//! fsyncs the session directory, so that a rename a crashed process made is
//! durable before anything read from it is acknowledged.
//!
//! Fault model: any write, truncate or fsync may fail. The first failure of
//! a session is reported once (the driver feeds it to
//! `Host::handle_storage_failed`); later operations on that session are
//! skipped until the core releases it, so a half-failed session never gets
//! more bytes appended after a hole. A sync that completes after its session
//! was released and reopened belongs to an old *epoch* and is ignored.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::journal::{Checkpoint, Holder, Journal};
use super::lease::{Lease, LeaseRegistry, Take};
use crate::core::{CompactStep, HistoryResult, OpenMode, OpenResult, ReadResult};

/// The data directory layout.
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// A layout rooted at the absolute data directory.
    pub fn new(root: impl Into<PathBuf>) -> Layout {
        Layout { root: root.into() }
    }

    /// The data directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `DIR/sessions`.
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// `DIR/sessions/<id>`.
    pub fn session_dir(&self, sid: &str) -> PathBuf {
        self.sessions_dir().join(sid)
    }

    /// `DIR/sessions/<id>/session.log`.
    pub fn log_path(&self, sid: &str) -> PathBuf {
        self.session_dir(sid).join("session.log")
    }

    /// `DIR/sessions/<id>/lease`.
    pub fn lease_path(&self, sid: &str) -> PathBuf {
        self.session_dir(sid).join("lease")
    }

    /// `DIR/sessions/<id>/history.log`: the archive of a compacted log.
    pub fn archive_path(&self, sid: &str) -> PathBuf {
        self.session_dir(sid).join("history.log")
    }

    /// `DIR/sessions/<id>/session.log.compact`: a compaction's new log
    /// before its rename.
    pub fn compact_tmp_path(&self, sid: &str) -> PathBuf {
        self.session_dir(sid).join("session.log.compact")
    }

    /// `DIR/providers`: the effect providers' files.
    pub fn providers_dir(&self) -> PathBuf {
        self.root.join("providers")
    }
}

/// Session ids come from the core as lowercase UUIDs; anything else would
/// be a path the data directory must not contain.
pub fn valid_session_id(sid: &str) -> bool {
    sid.len() == 36
        && sid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
        && !sid.contains("..")
}

/// What a successful open hands to [`Storage::install`].
#[derive(Debug)]
pub struct OpenedFiles {
    log: Arc<File>,
    lease: Lease<File>,
    epoch: u64,
    len: u64,
}

/// What [`Storage::begin_open`] hands to [`open_session`]: the epoch the
/// open starts and this process's journal, which the open names in the
/// session's `holder` (see [`super::journal`]).
#[derive(Debug, Clone)]
pub struct OpenTicket {
    epoch: u64,
    journal: Option<String>,
}

/// This process's lease registry over real lock files.
pub type Leases = LeaseRegistry<File>;

/// Carries out `Output::Open` (blocking): creates the session directory for
/// `OpenMode::Create`, takes the lease, replays what a dead holder
/// journaled, makes the log durable, writes `holder`, reads the whole log.
pub fn open_session(
    layout: &Layout,
    guard: &Leases,
    sid: &str,
    mode: OpenMode,
    ticket: OpenTicket,
) -> (OpenResult, Option<OpenedFiles>) {
    match try_open(layout, guard, sid, mode, ticket) {
        Ok(r) => r,
        Err(e) => (
            OpenResult::Failed(format!("opening session {sid}: {e}")),
            None,
        ),
    }
}

fn try_open(
    layout: &Layout,
    guard: &Leases,
    sid: &str,
    mode: OpenMode,
    ticket: OpenTicket,
) -> io::Result<(OpenResult, Option<OpenedFiles>)> {
    if !valid_session_id(sid) {
        return Ok((
            OpenResult::Failed(format!("invalid session id {sid:?}")),
            None,
        ));
    }
    let dir = layout.session_dir(sid);
    let log_path = layout.log_path(sid);
    let log_existed = exists(&log_path)?;
    if mode == OpenMode::Existing && !log_existed {
        return Ok((OpenResult::NotFound, None));
    }
    let dir_existed = exists(&dir)?;
    if !dir_existed {
        std::fs::create_dir_all(&dir)?;
        sync_dir(&layout.sessions_dir())?;
        sync_dir(layout.root())?;
    }
    let lease = match guard.take(&layout.lease_path(sid))? {
        Take::Taken(lease) => lease,
        Take::HeldElsewhere => {
            let log = read_or_empty(&log_path)?;
            return Ok((OpenResult::InUse { log: log.into() }, None));
        }
        Take::HeldHere => {
            return Ok((
                OpenResult::Failed(format!("session {sid} is already open in this process")),
                None,
            ))
        }
    };
    let file = match OpenOptions::new()
        .read(true)
        .append(true)
        .create(mode == OpenMode::Create)
        .open(&log_path)
    {
        Ok(f) => f,
        // Removed between the check and the open: as if never there.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((OpenResult::NotFound, None)),
        Err(e) => return Err(e),
    };
    // A compaction that died before its rename left its new log behind;
    // one that died after it may have left the rename unsynced.
    match std::fs::remove_file(layout.compact_tmp_path(sid)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let epoch = ticket.epoch;
    if let Some(journal) = ticket.journal {
        super::journal::replay_session(layout, &journal, sid)?;
        super::journal::write_holder(layout, sid, &Holder { journal, epoch })?;
    }
    sync_dir(&dir)?;
    let log = std::fs::read(&log_path)?;
    let len = log.len() as u64;
    Ok((
        OpenResult::Opened { log: log.into() },
        Some(OpenedFiles {
            log: Arc::new(file),
            lease,
            epoch,
            len,
        }),
    ))
}

/// Carries out `Output::Read` (blocking): the whole log without the lease
/// (and, with `history`, the whole archive, read after it), and whether
/// another process holds the lease (never this one: the registry answers
/// for the leases it holds).
pub fn read_session(layout: &Layout, guard: &Leases, sid: &str, history: bool) -> ReadResult {
    if !valid_session_id(sid) {
        return ReadResult::NotFound;
    }
    let log = match std::fs::read(layout.log_path(sid)) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return ReadResult::NotFound,
        Err(e) => return ReadResult::Failed(format!("reading session {sid}: {e}")),
    };
    let history = if history {
        match read_or_empty(&layout.archive_path(sid)) {
            Ok(b) => b,
            Err(e) => return ReadResult::Failed(format!("reading the archive of {sid}: {e}")),
        }
    } else {
        Vec::new()
    };
    let held_elsewhere = match guard.held_elsewhere(&layout.lease_path(sid)) {
        Ok(h) => h,
        Err(e) => return ReadResult::Failed(format!("probing the lease of {sid}: {e}")),
    };
    ReadResult::Found {
        log: log.into(),
        history: history.into(),
        held_elsewhere,
    }
}

/// Carries out `Output::ReadHistory` (blocking): archive bytes
/// `from..to`. The archive below a snapshot's length never changes, so no
/// lease is needed.
pub fn read_history(layout: &Layout, sid: &str, from: u64, to: u64) -> HistoryResult {
    if !valid_session_id(sid) || to < from {
        return HistoryResult::Failed(format!("bad archive read of {sid:?}"));
    }
    let read = || -> io::Result<Vec<u8>> {
        let f = File::open(layout.archive_path(sid))?;
        let mut buf = vec![0; (to - from) as usize];
        f.read_exact_at(&mut buf, from)?;
        Ok(buf)
    };
    match read() {
        Ok(b) => HistoryResult::Found(b),
        Err(e) => HistoryResult::Failed(format!(
            "reading bytes {from}..{to} of the archive of {sid}: {e}"
        )),
    }
}

/// A compaction for a blocking thread (see the module docs); its result
/// goes back to [`Storage::compact_done`] with the same epoch.
#[derive(Debug)]
pub struct CompactJob {
    layout: Layout,
    sid: String,
    old_log: Arc<File>,
    snapshot: Vec<u8>,
    log_from_bytes: u64,
    log_len_bytes: u64,
    archive_len_bytes: u64,
    /// The incarnation of the session's files this compaction belongs to.
    pub epoch: u64,
    /// `MSP_CRASH_AT` names a step of this compaction: abort there.
    pub abort_at: Option<CompactStep>,
    /// With a journal: the new epoch `holder` names before the rename.
    holder: Option<Holder>,
    /// Whether the old log has journaled appends to fsync first.
    sync_old: bool,
}

impl CompactJob {
    /// Runs the compaction; the new log comes back open for appending.
    pub fn run(self) -> Result<File, String> {
        self.steps()
            .map_err(|e| format!("compacting session {}: {e}", self.sid))
    }

    fn failpoint(&self, step: CompactStep) {
        if self.abort_at == Some(step) {
            eprintln!(
                "msp serve: {}={} reached; aborting",
                super::failpoint::ENV_VAR,
                step.name()
            );
            std::process::abort();
        }
    }

    fn steps(&self) -> io::Result<File> {
        let dir = self.layout.session_dir(&self.sid);
        // 0. The journal's entries of the old log become stale below (a
        //    new epoch): the old log must not need them any more.
        if self.sync_old {
            self.old_log.sync_data()?;
        }
        // 1. The archive: cut what an interrupted compaction left, append
        //    the log's archivable bytes, sync.
        let archive_path = self.layout.archive_path(&self.sid);
        let existed = exists(&archive_path)?;
        let archive = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&archive_path)?;
        let len = archive.metadata()?.len();
        if len < self.archive_len_bytes {
            return Err(io::Error::other(format!(
                "the archive has {len} bytes, its log says {}",
                self.archive_len_bytes
            )));
        }
        archive.set_len(self.archive_len_bytes)?;
        let mut at = self.log_from_bytes;
        let mut out = self.archive_len_bytes;
        let mut buf = vec![0u8; 1 << 20];
        // What is archived must be the whole frames the holder wrote: a
        // damaged one (bit rot since) fails the compaction and stays in the
        // log, where the next load reports it.
        let mut frames = crate::log::WholeFrames::new();
        let damaged = |e: crate::log::LoadError| {
            io::Error::other(format!(
                "damaged frame at log offset {}: {}",
                self.log_from_bytes + e.offset,
                e.reason
            ))
        };
        while at < self.log_len_bytes {
            let n = ((self.log_len_bytes - at) as usize).min(buf.len());
            self.old_log.read_exact_at(&mut buf[..n], at)?;
            frames.feed(&buf[..n]).map_err(damaged)?;
            archive.write_all_at(&buf[..n], out)?;
            at += n as u64;
            out += n as u64;
        }
        frames.finish().map_err(damaged)?;
        archive.sync_data()?;
        if !existed {
            sync_dir(&dir)?;
        }
        self.failpoint(CompactStep::Archived);
        // 2. The new log under its temporary name.
        let tmp = self.layout.compact_tmp_path(&self.sid);
        let mut new_log = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .truncate(false)
            .open(&tmp)?;
        new_log.set_len(0)?;
        new_log.write_all(&self.snapshot)?;
        new_log.sync_data()?;
        // The new epoch before the rename: after it, no entry of the old
        // log may be replayed onto the new one.
        if let Some(h) = &self.holder {
            super::journal::write_holder(&self.layout, &self.sid, h)?;
        }
        self.failpoint(CompactStep::Written);
        // 3. The rename; 4. the directory.
        std::fs::rename(&tmp, self.layout.log_path(&self.sid))?;
        self.failpoint(CompactStep::Renamed);
        sync_dir(&dir)?;
        Ok(new_log)
    }
}

fn exists(p: &Path) -> io::Result<bool> {
    match std::fs::metadata(p) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn read_or_empty(p: &Path) -> io::Result<Vec<u8>> {
    match std::fs::read(p) {
        Ok(b) => Ok(b),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Makes a directory's entries durable (a new file or subdirectory).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A session this process holds.
#[derive(Debug)]
struct Held {
    log: Arc<File>,
    _lease: Lease<File>,
    epoch: u64,
    /// The epoch its journal entries carry (the one `holder` names).
    journal_epoch: u64,
    /// The log's length, appends included.
    len: u64,
    /// Appends were journaled since the log's last fsync: it must be
    /// fsynced before the lease goes.
    dirty: bool,
    failed: bool,
    /// A compaction is running: appends wait here for the new log.
    compacting: Option<Compacting>,
}

/// A compaction in flight.
#[derive(Debug)]
struct Compacting {
    /// Appends made meanwhile, for the new log.
    queued: Vec<Vec<u8>>,
    /// The new log's length (its snapshot).
    len: u64,
    /// The epoch of the new log.
    journal_epoch: u64,
}

/// An fsync for the group committer; its result goes back to
/// [`Storage::sync_done`] with the same epoch.
#[derive(Debug)]
pub struct SyncJob {
    /// The log file.
    pub file: Arc<File>,
    /// The incarnation of the session's files this sync belongs to.
    pub epoch: u64,
}

/// What the driver does after a storage operation.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<T> {
    /// It worked.
    Done(T),
    /// The session already failed; the operation was skipped.
    Skipped,
    /// It failed now: report `handle_storage_failed` (once).
    Failed(String),
}

/// The open logs and leases of this process.
#[derive(Debug)]
pub struct Storage {
    layout: Layout,
    guard: Leases,
    held: BTreeMap<String, Held>,
    next_epoch: u64,
    /// This process's intake journal (a durable `msp serve` always has
    /// one: its id goes into every `holder` it writes).
    journal: Option<Journal>,
    /// Whether appends are journaled and syncs are journal fsyncs (group
    /// commit); otherwise each sync is an fsync of the session's log.
    journaling: bool,
}

impl Storage {
    /// Storage over a data directory layout, without a journal (each sync
    /// an fsync of its log).
    pub fn new(layout: Layout) -> Storage {
        Storage {
            layout,
            guard: Leases::new(()),
            held: BTreeMap::new(),
            next_epoch: 1,
            journal: None,
            journaling: false,
        }
    }

    /// Storage with this process's journal; `journaling`: syncs go
    /// through it.
    pub fn with_journal(
        layout: Layout,
        guard: Leases,
        journal: Journal,
        journaling: bool,
    ) -> Storage {
        Storage {
            guard,
            journal: Some(journal),
            journaling,
            ..Storage::new(layout)
        }
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The lease registry shared with blocking jobs.
    pub fn guard(&self) -> &Leases {
        &self.guard
    }

    /// Whether syncs are journal fsyncs.
    pub fn journaling(&self) -> bool {
        self.journaling
    }

    fn fresh_epoch(&mut self) -> u64 {
        let e = self.next_epoch;
        self.next_epoch += 1;
        e
    }

    /// What an `Output::Open` passes to [`open_session`]: a fresh epoch.
    pub fn begin_open(&mut self) -> OpenTicket {
        OpenTicket {
            epoch: self.fresh_epoch(),
            journal: self.journal.as_ref().map(|j| j.id().to_string()),
        }
    }

    /// Records a successful open: the session's files are now this
    /// process's, under the open's epoch.
    pub fn install(&mut self, sid: &str, files: OpenedFiles) {
        let held = Held {
            log: files.log,
            _lease: files.lease,
            epoch: files.epoch,
            journal_epoch: files.epoch,
            len: files.len,
            dirty: false,
            failed: false,
            compacting: None,
        };
        let previous = self.held.insert(sid.to_string(), held);
        debug_assert!(
            previous.is_none(),
            "the core opens a session only when it holds none"
        );
    }

    fn with_held<T>(&mut self, sid: &str, op: impl FnOnce(&mut Held) -> io::Result<T>) -> Step<T> {
        let Some(h) = self.held.get_mut(sid) else {
            return Step::Failed(format!("session {sid} has no open log"));
        };
        if h.failed {
            return Step::Skipped;
        }
        match op(h) {
            Ok(v) => Step::Done(v),
            Err(e) => {
                h.failed = true;
                Step::Failed(e.to_string())
            }
        }
    }

    /// `Output::Append`: writes at the end of the log (volatile until a
    /// sync covers it) and, journaling, into this round's journal entries;
    /// while a compaction runs, the bytes wait for the new log.
    pub fn append(&mut self, sid: &str, bytes: &[u8]) -> Step<()> {
        if let Some(c) = self
            .held
            .get_mut(sid)
            .filter(|h| !h.failed)
            .and_then(|h| h.compacting.as_mut())
        {
            c.queued.push(bytes.to_vec());
            return Step::Done(());
        }
        let journal = self.journal.as_mut().filter(|_| self.journaling);
        let Some(h) = self.held.get_mut(sid) else {
            return Step::Failed(format!("session {sid} has no open log"));
        };
        if h.failed {
            return Step::Skipped;
        }
        append_to(sid, h, journal, bytes)
    }

    /// `Output::Compact`: the job to run on a blocking thread. `abort_at`:
    /// the `MSP_CRASH_AT` step to abort at, if this compaction is the one
    /// it names.
    pub fn begin_compact(
        &mut self,
        sid: &str,
        snapshot: Vec<u8>,
        log_range: (u64, u64),
        archive_len_bytes: u64,
        abort_at: Option<CompactStep>,
    ) -> Step<CompactJob> {
        let layout = self.layout.clone();
        let journal_epoch = self.fresh_epoch();
        let holder = self.journal.as_ref().map(|j| Holder {
            journal: j.id().to_string(),
            epoch: journal_epoch,
        });
        let len = snapshot.len() as u64;
        let step = self.with_held(sid, |h| {
            Ok(CompactJob {
                layout,
                sid: sid.to_string(),
                old_log: Arc::clone(&h.log),
                snapshot,
                log_from_bytes: log_range.0,
                log_len_bytes: log_range.1,
                archive_len_bytes,
                epoch: h.epoch,
                abort_at,
                holder,
                sync_old: h.dirty,
            })
        });
        if let (Step::Done(_), Some(h)) = (&step, self.held.get_mut(sid)) {
            debug_assert!(h.compacting.is_none(), "one compaction at a time");
            h.compacting = Some(Compacting {
                queued: Vec::new(),
                len,
                journal_epoch,
            });
        }
        step
    }

    /// A compaction finished. `None`: stale (old epoch or already failed),
    /// feed nothing; `Some(Ok)`: the new log is in place and the appends
    /// made meanwhile are written to it, feed `handle_synced`; `Some(Err)`:
    /// feed `handle_storage_failed`.
    pub fn compact_done(
        &mut self,
        sid: &str,
        epoch: u64,
        result: Result<File, String>,
    ) -> Option<Result<(), String>> {
        let journal = self.journal.as_mut().filter(|_| self.journaling);
        let h = self.held.get_mut(sid)?;
        if h.epoch != epoch || h.failed {
            return None;
        }
        let c = h.compacting.take()?;
        let file = match result {
            Ok(f) => f,
            Err(e) => {
                h.failed = true;
                return Some(Err(e));
            }
        };
        h.log = Arc::new(file);
        h.len = c.len;
        h.journal_epoch = c.journal_epoch;
        // Both the old log and the new one were fsynced.
        h.dirty = false;
        let mut journal = journal;
        for bytes in c.queued {
            if let Step::Failed(e) = append_to(sid, h, journal.as_deref_mut(), &bytes) {
                return Some(Err(e));
            }
        }
        Some(Ok(()))
    }

    /// `Output::Truncate`: cuts a torn tail and makes the cut durable.
    pub fn truncate(&mut self, sid: &str, len_bytes: u64) -> Step<()> {
        self.with_held(sid, |h| {
            h.log.set_len(len_bytes)?;
            h.len = len_bytes;
            h.log.sync_data()
        })
    }

    /// `Output::Sync`: the job to run on a blocking thread.
    pub fn begin_sync(&mut self, sid: &str) -> Step<SyncJob> {
        self.with_held(sid, |h| {
            Ok(SyncJob {
                file: Arc::clone(&h.log),
                epoch: h.epoch,
            })
        })
    }

    /// Journaling: writes this round's entries; returns the segment whose
    /// fsync makes them durable. On an error, the sessions whose entries
    /// were lost are marked failed and come back with the error (feed
    /// `handle_storage_failed` for each).
    pub fn flush_journal(&mut self) -> Result<Option<Arc<File>>, (String, Vec<String>)> {
        let Some(j) = self.journal.as_mut().filter(|_| self.journaling) else {
            return Ok(None);
        };
        j.flush()
            .map(Some)
            .map_err(|(e, sids)| (e, self.mark_failed(sids)))
    }

    /// After a flush: the checkpoint to run when the journal moved to a new
    /// segment. On an error, the sessions that relied on the old segment
    /// are marked failed and come back with the error.
    pub fn rotate_journal(&mut self) -> Result<Option<Checkpoint>, (String, Vec<String>)> {
        let Some(j) = self.journal.as_mut().filter(|_| self.journaling) else {
            return Ok(None);
        };
        j.rotate_if_full()
            .map_err(|(e, sids)| (e, self.mark_failed(sids)))
    }

    /// Marks the sessions failed (later operations are skipped until the
    /// core releases them); returns those that were not already.
    pub fn mark_failed(&mut self, sids: Vec<String>) -> Vec<String> {
        sids.into_iter()
            .filter(|sid| match self.held.get_mut(sid) {
                Some(h) if !h.failed => {
                    h.failed = true;
                    true
                }
                _ => false,
            })
            .collect()
    }

    /// A sync finished. `None`: stale (old epoch or already failed), feed
    /// nothing; `Some(Ok)`: feed `handle_synced`; `Some(Err)`: feed
    /// `handle_storage_failed`.
    pub fn sync_done(
        &mut self,
        sid: &str,
        epoch: u64,
        result: Result<(), String>,
    ) -> Option<Result<(), String>> {
        let h = self.held.get_mut(sid)?;
        if h.epoch != epoch || h.failed {
            return None;
        }
        if result.is_err() {
            h.failed = true;
        }
        Some(result)
    }

    /// `Output::Release`: closes the log and drops the lease. The log is
    /// not fsynced here (that would block the driver): its journaled
    /// appends stay replayable, since `holder` still names this journal's
    /// epoch, until a checkpoint or this process's exit fsyncs it; a next
    /// holder fsyncs the log at its open, before it reads it, and replays
    /// the journal if this process died.
    pub fn release(&mut self, sid: &str) {
        self.held.remove(sid);
    }

    /// How many sessions this process holds.
    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    /// At an orderly exit, once every session is released: retires the
    /// journal ([`Journal::retire`]). While a session is held, its
    /// journal stays for the next start's replay.
    pub fn close(&mut self) -> io::Result<()> {
        if !self.held.is_empty() {
            return Ok(());
        }
        match self.journal.take() {
            Some(j) => j.retire(),
            None => Ok(()),
        }
    }
}

/// Writes `bytes` at the end of `h`'s log and journals them.
fn append_to(sid: &str, h: &mut Held, journal: Option<&mut Journal>, bytes: &[u8]) -> Step<()> {
    if let Err(e) = (&*h.log).write_all(bytes) {
        h.failed = true;
        return Step::Failed(e.to_string());
    }
    if let Some(j) = journal {
        j.record(sid, h.journal_epoch, h.len, bytes);
        h.dirty = true;
    }
    h.len += bytes.len() as u64;
    Step::Done(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SID: &str = "0198f0aa-1111-7000-8000-0000000000aa";

    /// An open by `st`'s process.
    fn open_here(
        layout: &Layout,
        st: &mut Storage,
        mode: OpenMode,
    ) -> (OpenResult, Option<OpenedFiles>) {
        let ticket = st.begin_open();
        open_session(layout, st.guard(), SID, mode, ticket)
    }

    /// An open of a process without a journal.
    fn plain_ticket() -> OpenTicket {
        OpenTicket {
            epoch: 99,
            journal: None,
        }
    }

    /// A session log of three synced frames, then a compaction of all of
    /// it; with `rot`, a byte inside the second frame flips on disk first.
    /// Returns the compaction's result, the log and the archive after it,
    /// and the log as it was before.
    fn compact_three_frames(rot: bool) -> (Result<File, String>, Vec<u8>, Vec<u8>, Vec<u8>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        let mut st = Storage::new(layout.clone());
        let (_, files) = open_here(&layout, &mut st, OpenMode::Create);
        st.install(SID, files.expect("files"));
        let frames: Vec<Vec<u8>> = (1u8..=3)
            .map(|t| crate::log::encode_frame(t, format!("{{\"n\":{t}}}").as_bytes()))
            .collect();
        for f in &frames {
            assert_eq!(st.append(SID, f), Step::Done(()));
        }
        let Step::Done(job) = st.begin_sync(SID) else {
            panic!("no sync job")
        };
        job.file.sync_data().expect("sync");
        let len = frames.iter().map(Vec::len).sum::<usize>() as u64;
        if rot {
            let at = frames[0].len() as u64 + 20;
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .open(layout.log_path(SID))
                .expect("open");
            let mut b = [0u8; 1];
            f.read_exact_at(&mut b, at).expect("read");
            f.write_all_at(&[b[0] ^ 0x20], at).expect("write");
        }
        let before = std::fs::read(layout.log_path(SID)).expect("read log");
        let snapshot = crate::log::encode_frame(9, b"{}");
        let Step::Done(job) = st.begin_compact(SID, snapshot, (0, len), 0, None) else {
            panic!("no compaction job")
        };
        let result = job.run();
        let log = std::fs::read(layout.log_path(SID)).expect("read log");
        let archive = std::fs::read(layout.archive_path(SID)).unwrap_or_default();
        (result, log, archive, before)
    }

    #[test]
    fn a_compaction_archives_whole_frames_and_refuses_a_rotted_one() {
        let (result, log, archive, before) = compact_three_frames(false);
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(archive, before, "the frames moved to the archive");
        assert_eq!(
            log,
            crate::log::encode_frame(9, b"{}"),
            "the log is the snapshot"
        );

        let (result, log, _, before) = compact_three_frames(true);
        let err = result.expect_err("a damaged frame is not archived");
        let second = crate::log::encode_frame(1, b"{\"n\":1}").len();
        assert!(
            err.contains(&format!("damaged frame at log offset {second}")),
            "{err}"
        );
        assert_eq!(
            log, before,
            "the damaged log stays as it was, for the next load to report"
        );
    }

    #[test]
    fn open_create_then_append_sync_and_reopen_sees_the_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        let mut st = Storage::new(layout.clone());
        let (r, files) = open_here(&layout, &mut st, OpenMode::Create);
        assert_eq!(
            r,
            OpenResult::Opened {
                log: Vec::new().into()
            }
        );
        st.install(SID, files.expect("files"));
        assert_eq!(st.append(SID, b"abc"), Step::Done(()));
        let job = match st.begin_sync(SID) {
            Step::Done(j) => j,
            other => panic!("no sync job: {other:?}"),
        };
        assert_eq!(job.file.sync_data().map_err(|e| e.to_string()), Ok(()));
        assert_eq!(st.sync_done(SID, job.epoch, Ok(())), Some(Ok(())));
        // Another "process" (a second registry) sees the lease held.
        let other = Leases::new(());
        let (r2, f2) = open_session(&layout, &other, SID, OpenMode::Existing, plain_ticket());
        assert_eq!(
            r2,
            OpenResult::InUse {
                log: b"abc".to_vec().into()
            }
        );
        assert!(f2.is_none());
        assert_eq!(
            read_session(&layout, &other, SID, false),
            ReadResult::Found {
                log: b"abc".to_vec().into(),
                history: Vec::new().into(),
                held_elsewhere: true
            }
        );
        st.release(SID);
        let (r3, _f3) = open_session(&layout, &other, SID, OpenMode::Existing, plain_ticket());
        assert_eq!(
            r3,
            OpenResult::Opened {
                log: b"abc".to_vec().into()
            }
        );
    }

    /// What a dead compaction left behind and cannot be removed (here a
    /// directory under the temporary log's name) refuses the open with a
    /// typed failure, and the lease goes back: once it is gone, the
    /// session opens with its log whole. A session never compacted reads
    /// with an empty archive.
    #[test]
    fn a_leftover_compaction_that_cannot_be_removed_refuses_the_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        let mut st = Storage::new(layout.clone());
        let (_, files) = open_here(&layout, &mut st, OpenMode::Create);
        st.install(SID, files.expect("files"));
        assert_eq!(st.append(SID, b"abc"), Step::Done(()));
        st.release(SID);
        let other = Leases::new(());
        assert_eq!(
            read_session(&layout, &other, SID, true),
            ReadResult::Found {
                log: b"abc".to_vec().into(),
                history: Vec::new().into(),
                held_elsewhere: false
            }
        );
        let leftover = layout.compact_tmp_path(SID);
        std::fs::create_dir(&leftover).expect("a directory in the way");
        let (r, f) = open_here(&layout, &mut st, OpenMode::Existing);
        assert!(
            matches!(&r, OpenResult::Failed(m) if m.contains("opening session")),
            "{r:?}"
        );
        assert!(f.is_none());
        std::fs::remove_dir(&leftover).expect("removed");
        let (r, _f) = open_session(&layout, &other, SID, OpenMode::Existing, plain_ticket());
        assert_eq!(
            r,
            OpenResult::Opened {
                log: b"abc".to_vec().into()
            },
            "the failed open gave its lease back"
        );
    }

    #[test]
    fn existing_mode_on_a_missing_session_is_not_found_and_creates_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        let guard = Leases::new(());
        let (r, f) = open_session(&layout, &guard, SID, OpenMode::Existing, plain_ticket());
        assert_eq!(r, OpenResult::NotFound);
        assert!(f.is_none());
        assert!(!layout.session_dir(SID).exists());
        assert_eq!(
            read_session(&layout, &guard, SID, false),
            ReadResult::NotFound
        );
    }

    #[test]
    fn truncate_cuts_the_tail_and_appends_continue_at_the_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        let mut st = Storage::new(layout.clone());
        let (_, files) = open_here(&layout, &mut st, OpenMode::Create);
        st.install(SID, files.expect("files"));
        assert_eq!(st.append(SID, b"hello world"), Step::Done(()));
        assert_eq!(st.truncate(SID, 5), Step::Done(()));
        assert_eq!(st.append(SID, b"!"), Step::Done(()));
        assert_eq!(
            std::fs::read(layout.log_path(SID)).expect("read"),
            b"hello!"
        );
    }

    #[test]
    fn stale_epochs_and_unknown_sessions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        let mut st = Storage::new(layout.clone());
        assert!(
            matches!(st.append(SID, b"x"), Step::Failed(_)),
            "no open log"
        );
        let (_, files) = open_here(&layout, &mut st, OpenMode::Create);
        st.install(SID, files.expect("files"));
        assert_eq!(st.sync_done(SID, 999, Ok(())), None, "old epoch");
        let job = match st.begin_sync(SID) {
            Step::Done(j) => j,
            other => panic!("no sync job: {other:?}"),
        };
        assert_eq!(
            st.sync_done(SID, job.epoch, Err("boom".into())),
            Some(Err("boom".into()))
        );
        assert_eq!(
            st.append(SID, b"x"),
            Step::Skipped,
            "a failed session takes no more bytes"
        );
        assert_eq!(st.sync_done(SID, job.epoch, Ok(())), None, "reported once");
    }

    #[test]
    fn bad_session_ids_never_touch_the_disk() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        let guard = Leases::new(());
        let (r, _) = open_session(
            &layout,
            &guard,
            "../../../../etc/passwd-xxxxxxxxxxxxxx",
            OpenMode::Create,
            plain_ticket(),
        );
        assert!(matches!(r, OpenResult::Failed(_)));
        assert!(!layout.sessions_dir().exists());
    }

    /// A log that is there but cannot be read (here a directory under its
    /// name) is a storage failure, never a session that does not exist:
    /// not found, a start would create it anew over what the disk holds.
    /// An archive read of a reversed range is refused, not attempted.
    #[test]
    fn a_log_that_cannot_be_read_is_a_failure_not_an_absence() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        std::fs::create_dir_all(layout.log_path(SID)).expect("a directory in the way");
        let guard = Leases::new(());
        for mode in [OpenMode::Existing, OpenMode::Create] {
            let (r, f) = open_session(&layout, &guard, SID, mode, plain_ticket());
            assert!(matches!(&r, OpenResult::Failed(_)), "{mode:?}: {r:?}");
            assert!(f.is_none());
        }
        let r = read_session(&layout, &guard, SID, false);
        assert!(matches!(&r, ReadResult::Failed(_)), "{r:?}");
        // A readable log whose archive is a directory: the archive's read
        // fails, it is not "none yet".
        let third = "0198f0aa-1111-7000-8000-0000000000cc";
        std::fs::create_dir_all(layout.session_dir(third)).expect("a session directory");
        std::fs::write(layout.log_path(third), b"abc").expect("a log");
        std::fs::create_dir(layout.archive_path(third)).expect("a directory in the way");
        let r = read_session(&layout, &guard, third, true);
        assert!(matches!(&r, ReadResult::Failed(_)), "{r:?}");
        // A file where the session's directory should be: the log's
        // existence cannot be told (ENOTDIR), which is no absence either.
        let other = "0198f0aa-1111-7000-8000-0000000000bb";
        std::fs::write(layout.session_dir(other), b"not a directory").expect("a file");
        let (r, _) = open_session(&layout, &guard, other, OpenMode::Existing, plain_ticket());
        assert!(matches!(&r, OpenResult::Failed(_)), "{r:?}");
        std::fs::write(layout.archive_path(SID), b"0123456789abcdef").expect("an archive");
        assert_eq!(
            read_history(&layout, SID, 4, 10),
            HistoryResult::Found(b"456789".to_vec())
        );
        assert!(matches!(
            read_history(&layout, SID, 10, 4),
            HistoryResult::Failed(_)
        ));
    }
}
