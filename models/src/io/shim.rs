//! The models' side of `src/io/shim.rs`: loom's instrumented primitives
//! under the names the shipped files use, so every lock, wait, notify and
//! spawn in them is a point where loom may switch threads.

pub use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
pub use loom::thread;

/// A pause between two lease take attempts: a yield under loom (time does
/// not exist in a model; what matters is that other threads may run).
pub fn pause(_ms: u64) {
    loom::thread::yield_now();
}

/// Whether this thread is unwinding from a panic (a destructor then must
/// not wait on the other threads).
pub fn panicking() -> bool {
    std::thread::panicking()
}
