//! The sans-IO boundary: what the core asks of the world ([`Output`]) and
//! the answers it gets back (the `handle_*` methods of
//! [`Host`](super::Host)). The real driver (`io/`) and the simulator both
//! speak exactly this vocabulary.

/// A connection, numbered by the driver. Never reused within one host.
pub type ConnId = u64;

/// Whether the host persists its sessions (PROTOCOL.md section 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Session logs are files; intakes are fsynced before their answer.
    Durable,
    /// Session logs live in memory and die with the host.
    Ephemeral,
}

impl Durability {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Durable => "durable",
            Durability::Ephemeral => "ephemeral",
        }
    }
}

/// How `Open` wants the session directory treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// `session/start`: create the directory and lease file if missing.
    Create,
    /// `session/resume` and replays: the session must exist.
    Existing,
}

/// What an `Effect` output asks a provider to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectMode {
    /// Perform the action under the effect key.
    Perform,
    /// Only ask whether the key was committed (reconciliation after a
    /// crash); never mutates.
    Query,
}

/// The result of an effect at its provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectOutcome {
    /// The mutation happened.
    Committed,
    /// The mutation did not happen.
    NotStarted,
    /// Nobody can tell (lost response, unkeyed provider after a crash).
    Unknown,
}

impl EffectOutcome {
    /// The wire spelling of `effectOutcome`.
    pub fn as_str(self) -> &'static str {
        match self {
            EffectOutcome::Committed => "committed",
            EffectOutcome::NotStarted => "notStarted",
            EffectOutcome::Unknown => "unknown",
        }
    }
}

/// A file's bytes as storage hands them to the core: shared, not copied.
///
/// A simulation opens the same growing log hundreds of times; handing the
/// core a copy of the whole file at every open made each open cost the
/// log's length (issue 10). The owner appends in place through
/// [`LogBytes::append`], which copies only while a reader still holds
/// the bytes (the core drops them once it has folded them). Debug-prints
/// and compares as the plain byte vector, so traces do not change.
///
/// Each value also carries its [`Lineage`]: a claim, kept true by this
/// type alone, that lets a reader that saw these bytes before know that
/// they have only grown since, without comparing them (see
/// [`super::log_fold`]). A value cut short ([`LogBytes::truncate`]) or
/// copied to be appended to starts a lineage of its own, but remembers
/// how long a prefix it still shares with the lineages it came from: a
/// crash that drops a log's unsynced tail leaves the rest known.
#[derive(Clone)]
pub struct LogBytes {
    bytes: std::sync::Arc<Vec<u8>>,
    lineage: Lineage,
    /// Earlier lineages, nearest first, each with the length of the
    /// prefix these bytes share with every value of it at least that
    /// long (never more than `bytes.len()`); `Lineage::NONE` pads.
    ancestors: [(Lineage, u64); ANCESTORS],
}

/// How many earlier lineages a [`LogBytes`] remembers.
const ANCESTORS: usize = 3;

/// Which append-only history a [`LogBytes`] belongs to.
///
/// Invariant: all values of one lineage share one buffer, which only ever
/// grows at its end, so any two of them, at any two times, are a prefix
/// of one another. A value gets a new lineage whenever that could stop
/// being true: when made from a vector, when cut short
/// ([`LogBytes::truncate`]) or changed other than by an append
/// ([`LogBytes::make_mut`]), and when appended to while another value
/// still shares its buffer (the append then goes to a copy). Only
/// equality of lineages means anything; their numbers are never printed
/// or hashed, so they do not touch determinism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lineage(u64);

impl Lineage {
    /// No lineage: pads [`LogBytes`]' ancestors (fresh ones start at 1).
    const NONE: Lineage = Lineage(0);

    fn fresh() -> Lineage {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Lineage(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

impl LogBytes {
    /// Appends `more` at the end. In place, the lineage stays (every
    /// earlier value of it is a prefix of the result); on a copy (another
    /// value shares the buffer) the result starts a lineage of its own.
    pub fn append(&mut self, more: &[u8]) {
        match std::sync::Arc::get_mut(&mut self.bytes) {
            Some(v) => v.extend_from_slice(more),
            None => {
                let mut v = Vec::with_capacity(self.bytes.len() + more.len());
                v.extend_from_slice(&self.bytes);
                v.extend_from_slice(more);
                let kept = self.branch(self.bytes.len() as u64);
                self.bytes = std::sync::Arc::new(v);
                self.lineage = Lineage::fresh();
                self.ancestors = kept;
            }
        }
    }

    /// Cuts the bytes to their first `len` (a copy first if a reader
    /// still shares them). The value starts a lineage of its own that
    /// remembers sharing those `len` bytes with the one it left.
    pub fn truncate(&mut self, len: usize) {
        let len = len.min(self.bytes.len());
        let kept = self.branch(len as u64);
        std::sync::Arc::make_mut(&mut self.bytes).truncate(len);
        self.lineage = Lineage::fresh();
        self.ancestors = kept;
    }

    /// The bytes, to change in any way (a copy first if a reader still
    /// shares them); the value starts a lineage of its own and forgets
    /// every earlier one.
    pub fn make_mut(&mut self) -> &mut Vec<u8> {
        self.lineage = Lineage::fresh();
        self.ancestors = [(Lineage::NONE, 0); ANCESTORS];
        std::sync::Arc::make_mut(&mut self.bytes)
    }

    /// The ancestors of a value that leaves its lineage keeping its first
    /// `kept` bytes: its own lineage, then its ancestors, each clipped to
    /// `kept`, the farthest forgotten.
    fn branch(&self, kept: u64) -> [(Lineage, u64); ANCESTORS] {
        let mut out = [(Lineage::NONE, 0); ANCESTORS];
        out[0] = (self.lineage, kept);
        for (o, &(l, n)) in out[1..].iter_mut().zip(&self.ancestors) {
            *o = (l, n.min(kept));
        }
        out
    }

    /// The append-only history these bytes belong to.
    pub fn lineage(&self) -> Lineage {
        self.lineage
    }

    /// Whether the first `len` bytes of this value are known, without
    /// comparing them, to be the first `len` bytes of every value of
    /// `lineage` at least `len` long: it is this value's lineage (and the
    /// value is that long), or one it left keeping at least `len` bytes.
    pub fn shares_prefix(&self, lineage: Lineage, len: u64) -> bool {
        if lineage == Lineage::NONE {
            return false;
        }
        if lineage == self.lineage {
            return len <= self.bytes.len() as u64;
        }
        self.ancestors
            .iter()
            .any(|&(l, kept)| l == lineage && len <= kept)
    }
}

impl Default for LogBytes {
    fn default() -> LogBytes {
        LogBytes::from(Vec::new())
    }
}

impl From<Vec<u8>> for LogBytes {
    fn from(v: Vec<u8>) -> LogBytes {
        LogBytes {
            bytes: std::sync::Arc::new(v),
            lineage: Lineage::fresh(),
            ancestors: [(Lineage::NONE, 0); ANCESTORS],
        }
    }
}

impl PartialEq for LogBytes {
    fn eq(&self, other: &LogBytes) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for LogBytes {}

impl std::ops::Deref for LogBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl std::fmt::Debug for LogBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.bytes.fmt(f)
    }
}

/// The answer to [`Output::Open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenResult {
    /// The lease is now held by this host; `log` is the whole session log
    /// as found on disk (empty for a new session).
    Opened {
        /// The log bytes.
        log: LogBytes,
    },
    /// `OpenMode::Existing` and no such session on disk.
    NotFound,
    /// Another process holds the lease. `log` is the log as read without
    /// the lease (reads never need it); a correct core does not load it.
    InUse {
        /// The log bytes.
        log: LogBytes,
    },
    /// The storage failed; the message says how.
    Failed(String),
}

/// The answer to [`Output::Read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadResult {
    /// The log as found on disk, and whether another process holds the
    /// lease right now.
    Found {
        /// The log bytes.
        log: LogBytes,
        /// The session's archive (read after the log), when the read asked
        /// for it; empty when there is none.
        history: LogBytes,
        /// Another process holds the lease.
        held_elsewhere: bool,
    },
    /// No such session on disk.
    NotFound,
    /// The storage failed.
    Failed(String),
}

/// The answer to [`Output::ReadHistory`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryResult {
    /// The archive's bytes of the asked range.
    Found(Vec<u8>),
    /// The storage failed (or the archive is shorter than asked).
    Failed(String),
}

/// The steps of a compaction ([`Output::Compact`]) after which a crash
/// leaves something different on disk. The simulator may crash the host
/// after each; `MSP_CRASH_AT` can abort a real host there. Not in
/// [`CrashPoint::ALL`]: a host without compaction never reaches them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CompactStep {
    /// The archive holds the compacted records and is synced; the new log
    /// is not written.
    Archived,
    /// The new log is written and synced under its temporary name.
    Written,
    /// The new log replaced the old one; the directory is not synced, so
    /// a power loss may still bring the old log back.
    Renamed,
}

impl CompactStep {
    /// Every step, in order.
    pub const ALL: [CompactStep; 3] = [
        CompactStep::Archived,
        CompactStep::Written,
        CompactStep::Renamed,
    ];

    /// The kebab-case name (simulator trace, `MSP_CRASH_AT`).
    pub fn name(self) -> &'static str {
        match self {
            CompactStep::Archived => "compact-archived",
            CompactStep::Written => "compact-written",
            CompactStep::Renamed => "compact-renamed",
        }
    }
}

/// A named moment at which the simulator may crash the host (PROTOCOL.md
/// 4.4's intake pair, seen from outside). The real host ignores them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CrashPoint {
    /// An intake record is synced; its answer has not been sent.
    AfterIntakeBeforeAck,
    /// A pending command was acked; its deferred effect (a queued launch or
    /// an approved provider action) has not happened.
    AfterAckBeforeEffect,
    /// A provider effect happened; its settlement is not yet durable.
    AfterEffectBeforeSettle,
    /// A sync covering two or more intakes is in flight.
    MidGroupCommit,
}

impl CrashPoint {
    /// Every crash point, for sweeps that must hit each.
    pub const ALL: [CrashPoint; 4] = [
        CrashPoint::AfterIntakeBeforeAck,
        CrashPoint::AfterAckBeforeEffect,
        CrashPoint::AfterEffectBeforeSettle,
        CrashPoint::MidGroupCommit,
    ];

    /// The kebab-case name used by the simulator's CLI.
    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::AfterIntakeBeforeAck => "after-intake-before-ack",
            CrashPoint::AfterAckBeforeEffect => "after-ack-before-effect",
            CrashPoint::AfterEffectBeforeSettle => "after-effect-before-settle",
            CrashPoint::MidGroupCommit => "mid-group-commit",
        }
    }
}

/// Something the core wants done. Drain with
/// [`Host::poll_output`](super::Host::poll_output) after every input, and
/// carry them out in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Write one `\n`-terminated frame to a connection.
    Send {
        /// The connection.
        conn: ConnId,
        /// The frame, newline included.
        line: Vec<u8>,
    },
    /// Close a connection (after its pending sends).
    Close {
        /// The connection.
        conn: ConnId,
    },
    /// Take the session's lease and read its log; answer with
    /// [`Host::handle_opened`](super::Host::handle_opened).
    Open {
        /// The session id (lowercase UUID).
        session: String,
        /// Create or require existing.
        mode: OpenMode,
        /// Echoed in the answer.
        token: u64,
    },
    /// Read the log without a lease; answer with
    /// [`Host::handle_read`](super::Host::handle_read).
    Read {
        /// The session id.
        session: String,
        /// Echoed in the answer.
        token: u64,
        /// Also read the session's whole archive (after the log), for a
        /// page or a subscription of a session not loaded here.
        history: bool,
    },
    /// Read logical bytes `from_bytes..to_bytes` of the session's archive
    /// (`DIR/sessions/<id>/history.log`; its offsets are logical offsets,
    /// see [`crate::core::snapshot`]), without a lease: the archive below
    /// the length a log's snapshot names never changes. Answer with
    /// [`Host::handle_history`](super::Host::handle_history).
    ReadHistory {
        /// The session id.
        session: String,
        /// Echoed in the answer.
        token: u64,
        /// First byte.
        from_bytes: u64,
        /// One past the last byte.
        to_bytes: u64,
    },
    /// Compact the session's log, crash-safely, in this order:
    ///
    /// 1. cut the archive (`history.log`, created if missing) to
    ///    `archive_len_bytes`, append the log's bytes
    ///    `log_from_bytes..log_len_bytes`, fsync it (and the directory if
    ///    the archive is new);
    /// 2. write `snapshot` (one frame) to a new file beside the log, fsync
    ///    it;
    /// 3. rename it over `session.log`;
    /// 4. fsync the session directory.
    ///
    /// Later appends go to the new log. It counts as the session's sync in
    /// flight: answer with
    /// [`Host::handle_synced`](super::Host::handle_synced)`(session,
    /// snapshot.len())` when step 4 is done, or
    /// [`Host::handle_storage_failed`](super::Host::handle_storage_failed)
    /// (the disk then holds the old log or the new one, both whole).
    Compact {
        /// The session id.
        session: String,
        /// The new log's content: one snapshot record frame.
        snapshot: Vec<u8>,
        /// Where the archivable bytes of the current log begin (just past
        /// its own snapshot, 0 for a log never compacted).
        log_from_bytes: u64,
        /// The current log's length (everything appended so far).
        log_len_bytes: u64,
        /// The archive's valid length before this compaction.
        archive_len_bytes: u64,
    },
    /// Cut the log to `len_bytes` (a torn tail) before the next append.
    Truncate {
        /// The session id.
        session: String,
        /// The new length.
        len_bytes: u64,
    },
    /// Append bytes at the end of the session log (volatile until synced).
    Append {
        /// The session id.
        session: String,
        /// Encoded log frames.
        bytes: Vec<u8>,
    },
    /// Make the log durable up to `upto_bytes`; answer with
    /// [`Host::handle_synced`](super::Host::handle_synced) or
    /// [`Host::handle_storage_failed`](super::Host::handle_storage_failed).
    /// At most one sync per session is outstanding.
    Sync {
        /// The session id.
        session: String,
        /// The log length this sync covers.
        upto_bytes: u64,
    },
    /// Release the session's lease (unload).
    Release {
        /// The session id.
        session: String,
    },
    /// Perform or query an external effect; answer with
    /// [`Host::handle_effect_done`](super::Host::handle_effect_done).
    Effect {
        /// Echoed in the answer.
        token: u64,
        /// `keyed` or `unkeyed`.
        provider: String,
        /// `<sessionId>:<approvalId>`.
        key: String,
        /// The action text.
        action: String,
        /// Perform or query.
        mode: EffectMode,
    },
    /// A named crash point was reached (simulator hook; no-op for real IO).
    CrashPoint(CrashPoint),
}

#[cfg(test)]
mod log_bytes_tests {
    use super::LogBytes;

    #[test]
    fn a_lineage_holds_one_growing_history() {
        let mut a = LogBytes::from(b"ab".to_vec());
        let l = a.lineage();
        a.append(b"cd");
        assert_eq!(
            (&a[..], a.lineage()),
            (&b"abcd"[..], l),
            "in place: same lineage"
        );

        // A reader's copy keeps the lineage and the bytes it was given;
        // the owner's append goes to a copy of its own.
        let reader = a.clone();
        assert_eq!(reader.lineage(), l);
        a.append(b"e");
        assert_ne!(
            a.lineage(),
            l,
            "appended while shared: a lineage of its own"
        );
        assert_eq!((&reader[..], reader.lineage()), (&b"abcd"[..], l));
        let mut reader = reader;
        reader.append(b"X");
        assert_eq!(
            reader.lineage(),
            l,
            "now alone in its buffer: grows in place"
        );

        // Any other change starts anew, even one that restores the bytes.
        let before = a.lineage();
        a.make_mut()[0] ^= 1;
        let flipped = a.lineage();
        a.make_mut()[0] ^= 1;
        assert!(before != flipped && flipped != a.lineage() && before != a.lineage());

        // Equal bytes are equal whatever their lineages; new values are new.
        let (x, y) = (LogBytes::from(b"q".to_vec()), LogBytes::from(b"q".to_vec()));
        assert_eq!(x, y);
        assert_ne!(x.lineage(), y.lineage());
        assert_ne!(LogBytes::default().lineage(), LogBytes::default().lineage());
        assert_eq!(format!("{x:?}"), format!("{:?}", b"q".to_vec()));
    }

    #[test]
    fn a_cut_or_a_copy_remembers_the_prefix_it_kept() {
        let mut a = LogBytes::from(b"abcdef".to_vec());
        let l1 = a.lineage();
        assert!(a.shares_prefix(l1, 6) && !a.shares_prefix(l1, 7));

        // A crash drops an unsynced tail, then the log grows again.
        a.truncate(4);
        a.append(b"XY");
        let l2 = a.lineage();
        assert_ne!(l1, l2);
        assert!(a.shares_prefix(l1, 4), "the kept bytes are l1's");
        assert!(!a.shares_prefix(l1, 5), "byte 5 is new");

        // Appended while a reader shares it: the copy keeps everything.
        let reader = a.clone();
        a.append(b"Z");
        assert!(a.shares_prefix(l2, 6) && a.shares_prefix(l1, 4));
        assert!(!a.shares_prefix(l2, 7));
        assert!(reader.shares_prefix(l2, 6) && !reader.shares_prefix(a.lineage(), 1));

        // A deeper cut clips every remembered prefix.
        a.truncate(2);
        assert!(a.shares_prefix(l1, 2) && !a.shares_prefix(l1, 3));
        assert!(a.shares_prefix(l2, 2) && !a.shares_prefix(l2, 3));

        // Only the nearest few lineages are remembered.
        for _ in 0..super::ANCESTORS {
            a.truncate(2);
        }
        assert!(!a.shares_prefix(l1, 1) && !a.shares_prefix(l2, 1));

        // Any other change forgets them all.
        let mut b = LogBytes::from(b"abc".to_vec());
        let lb = b.lineage();
        b.truncate(2);
        assert!(b.shares_prefix(lb, 2));
        b.make_mut()[1] ^= 1;
        assert!(!b.shares_prefix(lb, 1));
        assert!(!b.shares_prefix(super::Lineage::NONE, 0));
    }
}
