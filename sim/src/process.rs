//! Host processes: each runs the unmodified `msp::core::Host`.
//!
//! Fault model: a process may crash at any output step and at the named
//! crash points (every later output of that step is dropped with the
//! process); a crashed process frees its leases and closes its links; it
//! restarts after a delay as a new `Host` fed nothing but what the disk
//! holds. Several processes may share one disk and contend for a session's
//! lease.

use std::collections::BTreeMap;

use msp::core::bugs::BugSet;
use msp::core::{ConnId, Durability, Host, HostConfig};

/// The data directory every simulated host uses (one shared disk).
pub const DATA_DIR: &str = "/sim/data";

/// One host process slot: its current incarnation, if alive.
pub struct HostProc {
    /// The live core, `None` while dead.
    pub host: Option<Host>,
    /// Incarnation number (1 for the first start).
    pub inc: u64,
    /// The armed timer (absolute ms).
    pub timer_at_ms: Option<u64>,
    /// Host connection id -> link id.
    pub links: BTreeMap<ConnId, u64>,
    /// Next connection id (never reused within an incarnation).
    pub next_conn: ConnId,
    /// A restart is scheduled.
    pub restart_pending: bool,
    /// A graceful shutdown began ([`Host::shutdown`]): the process exits
    /// once its host is quiescent.
    pub stopping: bool,
    /// Sessions whose append the disk refused and whose host is told so
    /// only once it has no output left ([`crate::plan::Draws::WithDeferredFailures`]),
    /// in order, with the reason: as `msp serve`'s driver defers
    /// `handle_storage_failed` to the end of its drain. Their appends and
    /// syncs are skipped meanwhile, as `io::storage` skips a failed log's.
    pub unreported_failures: Vec<(String, &'static str)>,
}

impl HostProc {
    /// A dead slot (started by the first `start`).
    pub fn new() -> HostProc {
        HostProc {
            host: None,
            inc: 0,
            timer_at_ms: None,
            links: BTreeMap::new(),
            next_conn: 1,
            restart_pending: false,
            stopping: false,
            unreported_failures: Vec::new(),
        }
    }

    /// Starts a new incarnation with `HostConfig::idle_unload_ms`,
    /// `compact_records` (0 never compacts) and `group_commit` as given.
    pub fn start(
        &mut self,
        durability: Durability,
        seed: u64,
        (idle_unload_ms, compact_records, group_commit): (u64, u64, bool),
        now_ms: u64,
        bugs: BugSet,
    ) {
        debug_assert!(self.host.is_none(), "start only a dead process");
        let mut cfg = HostConfig::new(DATA_DIR, durability, seed);
        cfg.idle_unload_ms = idle_unload_ms;
        cfg.compact_records = compact_records;
        cfg.group_commit = group_commit;
        cfg.frame_limit_bytes = crate::moves::FRAME_LIMIT_BYTES;
        self.inc += 1;
        self.host = Some(Host::with_agent(
            cfg,
            now_ms,
            msp::core::agent::scripted_factory(),
            bugs,
        ));
        self.timer_at_ms = None;
        self.links.clear();
        self.next_conn = 1;
        self.restart_pending = false;
        self.stopping = false;
        self.unreported_failures.clear();
    }

    /// Kills the incarnation; returns the links it had.
    pub fn kill(&mut self) -> Vec<u64> {
        self.host = None;
        self.timer_at_ms = None;
        self.unreported_failures.clear();
        std::mem::take(&mut self.links).into_values().collect()
    }

    /// Whether `session`'s failure waits to be reported: its writes are
    /// skipped until then.
    pub fn failed_unreported(&self, session: &str) -> bool {
        self.unreported_failures.iter().any(|(s, _)| s == session)
    }

    /// Alive.
    pub fn alive(&self) -> bool {
        self.host.is_some()
    }
}

impl Default for HostProc {
    fn default() -> Self {
        HostProc::new()
    }
}
