//! The simulated disk shared by every host process of a run.
//!
//! Fault model:
//! - each session log is one file of bytes; bytes past `durable_len` are
//!   volatile (page cache) until an fsync covers them;
//! - a process crash changes nothing here: what the process wrote stays in
//!   the page cache, and the next opener reads it (not yet durable);
//! - a machine crash (power loss) drops every file's volatile bytes, except
//!   that with the `tear` fault it keeps a prefix that ends inside the
//!   file's last write (earlier unsynced writes survive whole, the last one
//!   partly);
//! - `fsync-fail`: the sync fails and the unsynced bytes are lost (the
//!   kernel dropped the dirty pages); the host is told so;
//! - `disk-full`: during a window, appends fail;
//! - `read-fail`: opening a session (before its lease is taken) or reading
//!   its files without the lease fails, as an EIO would (`run.rs`
//!   decides; the files are unchanged);
//! - opening a log does not fsync it; a new log's directory entry is made
//!   durable when it is created (the io layer fsyncs the directory then);
//!   a truncation is followed by an fsync (as in `io::storage`);
//! - compaction (only when the run turns it on): the archive is appended
//!   and synced in one step; the new log is written and synced under
//!   another name (invisible); the rename replaces the log at once but is
//!   not durable until the directory is synced: a power loss before that
//!   may bring the old log back (then its own unsynced bytes are lost as
//!   usual). Taking a session's lease syncs its directory (as
//!   `io::storage` does), making a pending rename durable;
//! - leases are advisory locks by host process: granted when free, freed
//!   on release and when the holding process dies. The disk does not stop
//!   a host that writes without the lease (flock is advisory), so a core
//!   that ignores `InUse` really does interleave writes.
//!
//! Effect providers live here too (they are "file-backed under DIR"):
//! `keyed` commits at most one mutation per key, `unkeyed` mutates on
//! every perform.

use std::collections::BTreeMap;

use msp::core::LogBytes;

/// One session log.
#[derive(Debug, Clone, Default)]
pub struct File {
    /// The bytes as any reader sees them (shared with the core's open and
    /// read answers, not copied into them).
    pub bytes: LogBytes,
    /// Bytes `..durable_len` survive a crash.
    pub durable_len: usize,
    /// Where the last append began (for a torn prefix).
    pub last_write_at: usize,
    /// Bumped at every open, so late sync completions of an older load are
    /// ignored.
    pub epoch: u64,
}

/// The disk: files, leases, providers.
#[derive(Debug, Clone, Default)]
pub struct Disk {
    /// Session logs by session id.
    pub files: BTreeMap<String, File>,
    /// Lease holders: session -> host index.
    pub leases: BTreeMap<String, usize>,
    /// Keyed provider: key -> action, committed once.
    pub keyed: BTreeMap<String, String>,
    /// Unkeyed provider: every mutation (key, action).
    pub unkeyed: Vec<(String, String)>,
    /// Appends fail until this time (disk full).
    pub full_until_ms: u64,
    /// Session archives (`history.log`), always synced.
    pub archives: BTreeMap<String, File>,
    /// Logs a compaction renamed over, while the rename is not durable:
    /// the old file a power loss may bring back.
    pub renamed_from: BTreeMap<String, File>,
}

impl Disk {
    /// Drops every lease `host` holds; returns the sessions.
    pub fn free_leases(&mut self, host: usize) -> Vec<String> {
        let held: Vec<String> = self
            .leases
            .iter()
            .filter(|(_, h)| **h == host)
            .map(|(s, _)| s.clone())
            .collect();
        for s in &held {
            self.leases.remove(s);
        }
        held
    }

    /// A power loss: every file with volatile bytes loses them, except a torn
    /// prefix when `keep(file_len_volatile)` returns `Some(n)` bytes to keep.
    /// Returns `(session, kept_len, torn)` for every file that changed.
    pub fn crash_files(
        &mut self,
        sessions: &[String],
        mut keep: impl FnMut(usize, usize) -> Option<usize>,
    ) -> Vec<(String, u64, bool)> {
        let mut changed = Vec::new();
        for s in sessions {
            let Some(f) = self.files.get_mut(s) else {
                continue;
            };
            if f.bytes.len() == f.durable_len {
                continue;
            }
            let last_start = f.last_write_at.max(f.durable_len);
            let torn = keep(last_start - f.durable_len, f.bytes.len() - last_start);
            let new_len = match torn {
                Some(extra) => last_start + extra.min(f.bytes.len() - last_start),
                None => f.durable_len,
            };
            f.bytes.truncate(new_len);
            f.durable_len = new_len;
            f.last_write_at = new_len;
            changed.push((s.clone(), new_len as u64, torn.is_some()));
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_keeps_durable_and_maybe_a_prefix_of_the_last_write() {
        let mut d = Disk::default();
        d.files.insert(
            "s".into(),
            File {
                bytes: vec![1; 100].into(),
                durable_len: 40,
                last_write_at: 70,
                epoch: 0,
            },
        );
        let c = d.crash_files(&["s".to_string()], |_, _| None);
        assert_eq!(c, vec![("s".to_string(), 40, false)]);
        d.files
            .get_mut("s")
            .unwrap()
            .bytes
            .make_mut()
            .extend([2; 60]);
        d.files.get_mut("s").unwrap().last_write_at = 70;
        let c = d.crash_files(&["s".to_string()], |before, last| {
            assert_eq!((before, last), (30, 30));
            Some(5)
        });
        assert_eq!(c, vec![("s".to_string(), 75, true)]);
        assert_eq!(d.files["s"].durable_len, 75);
    }
}
