//! Session leases: an exclusive, non-blocking OS advisory lock (`flock` on
//! Unix, via `fs4`) on `DIR/sessions/<id>/lease`.
//!
//! The kernel drops the lock when its file handle closes, so a lease is
//! released on unload (the handle is dropped) and when the process dies for
//! any reason, SIGKILL included. No lease state lives in the lock file's
//! contents.
//!
//! A probe (is another process holding it?) briefly takes and drops the
//! lock on a fresh handle. So that a probe never makes a concurrent take
//! fail spuriously, takes and probes of this process are serialised by
//! [`LeaseGuard`], and a take retries a few times to ride over another
//! process's probe.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fs4::fs_std::FileExt;

/// How many times a take is tried before the lease counts as held
/// elsewhere.
pub const TAKE_ATTEMPTS_MAX: u32 = 5;
/// Pause between two attempts of a take.
pub const TAKE_RETRY_MS: u64 = 2;

/// Serialises this process's lease takes and probes.
#[derive(Debug, Clone, Default)]
pub struct LeaseGuard(Arc<Mutex<()>>);

/// A held lease: the lock lasts as long as this value.
#[derive(Debug)]
pub struct Lease {
    _file: File,
}

impl LeaseGuard {
    /// Opens (creating if needed) the lease file and takes the lock.
    /// `Ok(None)` when another process holds it.
    pub fn take(&self, path: &Path) -> io::Result<Option<Lease>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        for attempt in 1..=TAKE_ATTEMPTS_MAX {
            let taken = {
                let _g = self.0.lock().unwrap_or_else(|e| e.into_inner());
                FileExt::try_lock_exclusive(&file)?
            };
            if taken {
                return Ok(Some(Lease { _file: file }));
            }
            if attempt < TAKE_ATTEMPTS_MAX {
                std::thread::sleep(Duration::from_millis(TAKE_RETRY_MS));
            }
        }
        Ok(None)
    }

    /// Whether another process holds the lease at `path` right now. A
    /// missing lease file means nobody does. Must not be called for a lease
    /// this process holds (the probe would see its own lock).
    pub fn held_elsewhere(&self, path: &Path) -> io::Result<bool> {
        let file = match OpenOptions::new().read(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let _g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if FileExt::try_lock_exclusive(&file)? {
            FileExt::unlock(&file)?;
            Ok(false)
        } else {
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_take_fails_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lease");
        let guard = LeaseGuard::default();
        let first = guard.take(&path).expect("io").expect("free");
        assert!(
            guard.take(&path).expect("io").is_none(),
            "flock is per open file"
        );
        drop(first);
        assert!(guard.take(&path).expect("io").is_some());
    }

    #[test]
    fn probe_sees_a_held_lease_and_leaves_a_free_one_free() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lease");
        let guard = LeaseGuard::default();
        assert!(
            !guard.held_elsewhere(&path).expect("io"),
            "no file, nobody holds it"
        );
        let held = guard.take(&path).expect("io").expect("free");
        assert!(guard.held_elsewhere(&path).expect("io"));
        drop(held);
        assert!(!guard.held_elsewhere(&path).expect("io"));
        assert!(
            guard.take(&path).expect("io").is_some(),
            "the probe released its lock"
        );
    }
}
