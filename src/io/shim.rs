//! The synchronisation primitives of the io layer's threads, in one place.
//!
//! [`commit`](super::commit) (group commit across sessions) and
//! [`lease`](super::lease) (the lease registry) use only what this module
//! exports. In `msp` it is the standard library. The loom models
//! (`models/`, crate `msp-models`) compile those same two source files with
//! `#[path]` next to a shim of their own that exports loom's instrumented
//! types under the same names, so the code loom explores is the code that
//! ships, never a copy. Hence the rule for those files: no `std::sync`,
//! `std::thread` or sleeping except through `super::shim`, and nothing from
//! the rest of the crate.

pub use std::sync::{Arc, Condvar, Mutex, MutexGuard};
pub use std::thread;

/// Waits a little before trying again (a lease take that met another
/// process's probe). Under loom this is a yield.
pub fn pause(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// Whether this thread is unwinding from a panic (a destructor then must
/// not wait on the other threads).
pub fn panicking() -> bool {
    std::thread::panicking()
}
