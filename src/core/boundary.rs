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
/// [`LogBytes::make_mut`], which copies only while a reader still holds
/// the bytes (the core drops them once it has folded them). Debug-prints
/// as the plain byte vector, so traces do not change.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct LogBytes(std::sync::Arc<Vec<u8>>);

impl LogBytes {
    /// The bytes, to change: a copy first if a reader still shares them.
    pub fn make_mut(&mut self) -> &mut Vec<u8> {
        std::sync::Arc::make_mut(&mut self.0)
    }
}

impl From<Vec<u8>> for LogBytes {
    fn from(v: Vec<u8>) -> LogBytes {
        LogBytes(std::sync::Arc::new(v))
    }
}

impl std::ops::Deref for LogBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for LogBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
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
