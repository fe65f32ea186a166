//! The real drivers: `msp serve`.
//!
//! The sans-IO [`Host`](crate::core::Host) decides everything; this module
//! only carries out its [`Output`](crate::core::Output)s with tokio and the
//! filesystem and feeds the answers back as inputs:
//!
//! - [`cli`]: the `msp serve` command line;
//! - [`driver`]: the one task that owns the host and is the only caller of
//!   its `handle_*` methods;
//! - [`transport`]: stdio, TCP and Unix-socket connections (a reader task
//!   and a writer task per connection, talking to the driver over channels);
//! - [`storage`]: session logs (append, truncate, open and read on blocking
//!   threads);
//! - [`journal`]: the intake journal, one file per process whose fsync
//!   makes every session's appends durable at once (and its replay);
//! - [`commit`]: group commit across sessions (one batch of fsyncs at a
//!   time, run by a pool of sync workers);
//! - [`lease`]: the registry of this process's session leases (OS advisory
//!   locks; [`flock`] is the real lock and the real fsync);
//! - [`shim`]: the sync primitives of `commit` and `lease`, swapped for
//!   loom's by the models in `models/`;
//! - [`effects`]: the file-backed `keyed` and `unkeyed` providers;
//! - [`clock`]: wall time in Unix milliseconds;
//! - [`failpoint`]: the `MSP_CRASH_AT` test hook.
//!
//! Fault model of the real world, as the core sees it: an append or fsync
//! may fail (the session is dropped and reloaded from disk, pending answers
//! get `storageUnavailable`); the process may die at any instant (SIGKILL or
//! `MSP_CRASH_AT`), which loses every unsynced byte the kernel did not
//! already write and frees every lease; a client may vanish mid-frame.

pub mod cli;
pub mod clock;
pub mod commit;
pub mod driver;
pub mod effects;
pub mod failpoint;
pub mod flock;
pub mod journal;
#[cfg(test)]
mod journal_crash;
pub mod lease;
pub mod shim;
pub mod storage;
pub mod transport;

#[cfg(test)]
mod tests;

pub use cli::{serve_main, ServeArgs};
