//! Session leases: an exclusive, non-blocking OS advisory lock on
//! `DIR/sessions/<id>/lease`, and the registry of the leases this process
//! holds.
//!
//! The kernel drops a lock when its file handle closes, so a lease is
//! released on unload (the [`Lease`] is dropped) and when the process dies
//! for any reason, SIGKILL included. No lease state lives in the lock
//! file's contents. The lock is `flock`: it belongs to one open file
//! description, and locking it again through the same description succeeds
//! (which is why a take always opens a fresh one and the registry refuses a
//! second take of a lease it holds).
//!
//! [`LeaseRegistry`] serialises this process's takes, probes and releases
//! (they run on blocking threads and in the driver) and knows which leases
//! the process holds:
//!
//! - a probe (is another process holding it?) of a lease held here answers
//!   "no" without touching the lock; any other probe briefly takes and drops
//!   the lock under the registry's mutex, so it never makes a take of this
//!   process fail and never mistakes this process's lock for another's;
//! - a take retries a few times to ride over *another* process's probe.
//!
//! The loom models in `models/` check that a lease is never held twice and
//! that a probe never reports this process's own lease as held elsewhere,
//! by compiling this file against loom through [`super::shim`] and a model
//! kernel of `flock` (so only shim primitives and [`LockFile`] appear here).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use super::shim::{pause, Arc, Mutex, MutexGuard};

/// How many times a take is tried before the lease counts as held
/// elsewhere.
pub const TAKE_ATTEMPTS_MAX: u32 = 5;
/// Pause between two attempts of a take.
pub const TAKE_RETRY_MS: u64 = 2;

/// An open lock file: the OS lock of one open file description.
pub trait LockFile: Sized + Send + 'static {
    /// What opening a lock file needs (nothing for real files; the model
    /// kernel in the loom models).
    type Fs: Clone + Send + Sync + 'static;
    /// Opens the lock file, creating it if missing.
    fn create(fs: &Self::Fs, path: &Path) -> io::Result<Self>;
    /// Opens the lock file; `None` when there is none.
    fn open_existing(fs: &Self::Fs, path: &Path) -> io::Result<Option<Self>>;
    /// Takes the exclusive lock without waiting; `false` when another open
    /// file description holds it.
    fn try_lock(&self) -> io::Result<bool>;
    /// Drops the lock (closing the file drops it too).
    fn unlock(&self) -> io::Result<()>;
}

/// Deliberate defects for the loom models' planted-bug tests, in the manner
/// of `core::bugs`: `msp serve` always runs with [`LeaseBug::None`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseBug {
    /// The real registry.
    None,
    /// A probe checks the registry, then lets go of its mutex before it
    /// tries the lock, so a take of this process can slip in between.
    ProbeOutsideRegistry,
    /// A take of a lease this process holds locks the file it already has
    /// open again (which `flock` allows) and hands out a second lease.
    RetakeHeldFile,
}

/// The outcome of a take.
#[derive(Debug)]
pub enum Take<L: LockFile> {
    /// The lease is this process's until the [`Lease`] is dropped.
    Taken(Lease<L>),
    /// Another process holds it.
    HeldElsewhere,
    /// This process holds it already (the core never asks twice; answered
    /// rather than trusted).
    HeldHere,
}

struct Inner<L: LockFile> {
    fs: L::Fs,
    held: Mutex<BTreeMap<PathBuf, L>>,
    attempts: u32,
    retry_ms: u64,
    bug: LeaseBug,
}

/// The leases this process holds; cheap to clone (shared with the blocking
/// threads that open and probe sessions).
pub struct LeaseRegistry<L: LockFile> {
    inner: Arc<Inner<L>>,
}

impl<L: LockFile> Clone for LeaseRegistry<L> {
    fn clone(&self) -> Self {
        LeaseRegistry {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<L: LockFile> std::fmt::Debug for LeaseRegistry<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseRegistry")
            .field("held", &self.held_count())
            .finish()
    }
}

/// A held lease: the lock lasts as long as this value.
pub struct Lease<L: LockFile> {
    registry: LeaseRegistry<L>,
    path: PathBuf,
}

impl<L: LockFile> std::fmt::Debug for Lease<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("path", &self.path).finish()
    }
}

impl<L: LockFile> Lease<L> {
    /// The lease file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl<L: LockFile> Drop for Lease<L> {
    fn drop(&mut self) {
        self.registry.release(&self.path);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change under the lock is made whole, so a poisoned lock (a
    // panicked holder) still guards a consistent map.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<L: LockFile> LeaseRegistry<L> {
    /// An empty registry over `fs`, with the default take attempts.
    pub fn new(fs: L::Fs) -> LeaseRegistry<L> {
        LeaseRegistry::with(fs, TAKE_ATTEMPTS_MAX, TAKE_RETRY_MS, LeaseBug::None)
    }

    /// A registry with explicit take attempts (at least one), pause and
    /// planted bug (the loom models).
    pub fn with(fs: L::Fs, attempts: u32, retry_ms: u64, bug: LeaseBug) -> LeaseRegistry<L> {
        LeaseRegistry {
            inner: Arc::new(Inner {
                fs,
                held: Mutex::new(BTreeMap::new()),
                attempts: attempts.max(1),
                retry_ms,
                bug,
            }),
        }
    }

    /// Opens (creating if needed) the lease file at `path` and takes the
    /// lock.
    pub fn take(&self, path: &Path) -> io::Result<Take<L>> {
        let inner = &*self.inner;
        let file = L::create(&inner.fs, path)?;
        for attempt in 1..=inner.attempts {
            {
                let mut held = lock(&inner.held);
                if let Some(mine) = held.get(path) {
                    if inner.bug == LeaseBug::RetakeHeldFile && mine.try_lock()? {
                        return Ok(Take::Taken(self.lease(path)));
                    }
                    return Ok(Take::HeldHere);
                }
                if file.try_lock()? {
                    let previous = held.insert(path.to_path_buf(), file);
                    debug_assert!(previous.is_none(), "checked under the same lock");
                    return Ok(Take::Taken(self.lease(path)));
                }
            }
            if attempt < inner.attempts {
                pause(inner.retry_ms);
            }
        }
        Ok(Take::HeldElsewhere)
    }

    fn lease(&self, path: &Path) -> Lease<L> {
        Lease {
            registry: self.clone(),
            path: path.to_path_buf(),
        }
    }

    /// Whether another process holds the lease at `path` right now. A
    /// missing lease file means nobody does; a lease held here is not held
    /// elsewhere.
    pub fn held_elsewhere(&self, path: &Path) -> io::Result<bool> {
        let inner = &*self.inner;
        let mut guard = Some(lock(&inner.held));
        if guard.as_ref().is_some_and(|h| h.contains_key(path)) {
            return Ok(false);
        }
        if inner.bug == LeaseBug::ProbeOutsideRegistry {
            guard = None;
        }
        let Some(file) = L::open_existing(&inner.fs, path)? else {
            return Ok(false);
        };
        let free = file.try_lock()?;
        if free {
            file.unlock()?;
        }
        drop(guard);
        Ok(!free)
    }

    /// Whether this process holds the lease at `path`.
    pub fn holds(&self, path: &Path) -> bool {
        lock(&self.inner.held).contains_key(path)
    }

    /// How many leases this process holds.
    pub fn held_count(&self) -> usize {
        lock(&self.inner.held).len()
    }

    /// Drops the lock at `path` (called when its [`Lease`] is dropped). The
    /// file is closed under the registry's mutex, so a take of this process
    /// that follows finds the lock free.
    fn release(&self, path: &Path) {
        let mut held = lock(&self.inner.held);
        if let Some(file) = held.remove(path) {
            let _ = file.unlock();
            drop(file);
        }
    }
}
