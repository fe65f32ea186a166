//! The binary's global allocator: [`msp::alloc::Mimalloc`] (the simulator
//! allocates on nearly every event), wrapped to count allocations and
//! bytes for `msp-sim bench`.
//!
//! Counting is off until [`start_counting`]: a sweep on several threads
//! would otherwise contend on the counters' cache line on every
//! allocation. When on, the counters are relaxed atomics updated by a
//! plain load and store, not a locked read-modify-write: the bench
//! allocates on one thread and reads the counters from it, and a locked
//! add on every allocation (two per call) cost about 5% of the bench's
//! CPU time in a profile, inflating the very ns/event it measures. With
//! several threads allocating at once, counts could be lost (never torn);
//! only the single-threaded bench turns counting on.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use msp::alloc::Mimalloc;

/// Whether allocations are being counted.
static COUNTING: AtomicBool = AtomicBool::new(false);
/// Allocations counted (alloc, alloc_zeroed, realloc).
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Bytes those allocations asked for.
static BYTES: AtomicU64 = AtomicU64::new(0);

/// mimalloc, counting allocations while [`COUNTING`] is on.
pub struct Counting;

#[global_allocator]
static GLOBAL: Counting = Counting;

impl Counting {
    #[inline]
    fn count(size: usize) {
        if COUNTING.load(Relaxed) {
            ALLOCATIONS.store(ALLOCATIONS.load(Relaxed) + 1, Relaxed);
            BYTES.store(BYTES.load(Relaxed) + size as u64, Relaxed);
        }
    }
}

// SAFETY: every call is forwarded unchanged to `Mimalloc`, a correct
// GlobalAlloc; counting touches only atomics and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::count(layout.size());
        // SAFETY: the caller upholds GlobalAlloc::alloc's contract.
        unsafe { Mimalloc.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::count(layout.size());
        // SAFETY: as for alloc.
        unsafe { Mimalloc.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is `Mimalloc`.
        unsafe { Mimalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::count(new_size);
        // SAFETY: as for dealloc; the caller upholds realloc's contract.
        unsafe { Mimalloc.realloc(ptr, layout, new_size) }
    }
}

/// Turns counting on (for the rest of the process).
pub fn start_counting() {
    COUNTING.store(true, Relaxed);
}

/// Allocations and bytes counted so far.
pub fn counts() -> (u64, u64) {
    (ALLOCATIONS.load(Relaxed), BYTES.load(Relaxed))
}
