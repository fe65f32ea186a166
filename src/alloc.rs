//! The global allocator of the binaries (`msp`, `msp-sim`): mimalloc,
//! entered by its plain calls wherever the alignment allows.
//!
//! The host and the simulator allocate on nearly every line they read or
//! write; mimalloc's thread-local free lists make that far cheaper than
//! glibc's malloc (a fifth of the host's CPU under load before, issue 11).
//! `mimalloc::MiMalloc` sends every call through mimalloc's aligned entry
//! points, which check the alignment again on each call: about a fifth of
//! the allocator's instructions in a sweep's profile, and 1.9% of all
//! (BENCHMARKS.md). Nearly every Rust allocation asks for an alignment
//! every mimalloc block of its size has anyway (at most 16 bytes and at
//! most the size: the rule `std`'s `System` allocator applies before it
//! calls `malloc`), so those go to `mi_malloc`, `mi_zalloc` and
//! `mi_realloc`; the others still go to `MiMalloc`. `mi_free` frees both.

use std::alloc::{GlobalAlloc, Layout};

use libmimalloc_sys as mi;
use mimalloc::MiMalloc;

/// mimalloc, by its plain calls when the layout allows (see the module
/// docs). Declare it with `#[global_allocator]`.
pub struct Mimalloc;

/// The alignment of every mimalloc block of at least this size
/// (`MI_MAX_ALIGN_SIZE` on 64-bit targets).
const PLAIN_ALIGN: usize = 16;

/// Whether a plain mimalloc block of `size` bytes is aligned to `align`.
#[inline]
fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

// SAFETY: every call goes to mimalloc: to `MiMalloc`, a correct
// GlobalAlloc, or, when every block of the size has the layout's alignment
// (`plain`), to mimalloc's plain calls, which return such a block (or null
// on exhaustion) and keep a reallocated block's contents; `mi_free` frees
// blocks from either kind of call.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if plain(layout.align(), layout.size()) {
            // SAFETY: see the impl's comment.
            return unsafe { mi::mi_malloc(layout.size()) }.cast();
        }
        // SAFETY: the caller upholds GlobalAlloc::alloc's contract.
        unsafe { MiMalloc.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if plain(layout.align(), layout.size()) {
            // SAFETY: as for alloc.
            return unsafe { mi::mi_zalloc(layout.size()) }.cast();
        }
        // SAFETY: as for alloc.
        unsafe { MiMalloc.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from mimalloc.
        unsafe { mi::mi_free(ptr.cast()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if plain(layout.align(), new_size) {
            // SAFETY: as for dealloc; the caller upholds realloc's contract.
            return unsafe { mi::mi_realloc(ptr.cast(), new_size) }.cast();
        }
        // SAFETY: as for dealloc.
        unsafe { MiMalloc.realloc(ptr, layout, new_size) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every layout a caller may ask for gets a block aligned as asked,
    /// by either path, and keeps its contents through a realloc across
    /// the two paths.
    #[test]
    fn blocks_are_aligned_as_asked_and_reallocs_keep_their_bytes() {
        let a = Mimalloc;
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1, 3, 8, 15, 16, 17, 24, 100, 4096, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; the block is freed below with
                // the layout it was (re)allocated with.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    for i in 0..size {
                        p.add(i).write(i as u8);
                    }
                    let grown = size * 3 + 1;
                    let q = a.realloc(p, layout, grown);
                    assert_eq!(q as usize % align, 0, "realloc {grown} align {align}");
                    for i in 0..size {
                        assert_eq!(q.add(i).read(), i as u8);
                    }
                    a.dealloc(q, Layout::from_size_align(grown, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| z.add(i).read() == 0));
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
