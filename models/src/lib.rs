//! Loom models of the real host's shared state: the group-commit sync path,
//! shutdown racing a sync in flight, and the lease registry.
//!
//! **The code under loom is the shipped code.** `io::commit` and `io::lease`
//! below are `src/io/commit.rs` and `src/io/lease.rs` of the `msp` crate,
//! compiled into this crate with `#[path]` next to [`io::shim`], which
//! exports loom's `Arc`, `Mutex`, `Condvar` and `thread` under the names
//! `src/io/shim.rs` exports std's. Those two files use nothing else of the
//! `msp` crate, so no cfg flag, no second build of the workspace and no copy
//! is needed: `cargo test --workspace` runs the models.
//!
//! The world around that code is modelled here: [`model_file::ModelFile`]
//! (a log that tracks written versus durable bytes: a sync makes durable
//! what was written when it began) and [`model_flock::ModelFs`] (a kernel
//! of `flock` locks, one per open file description). The models:
//!
//! - [`sync_path`]: the driver appends and submits while the sync workers
//!   run; every completion that would release answers is checked against
//!   the file: *no answer is released before a sync that began after its
//!   record was written*, and every request completes exactly once;
//! - [`shutdown`]: `close` races the batch in flight and the requests
//!   waiting for the next one: *no answer after shutdown without its sync*;
//! - [`lease_model`]: takes and probes of two processes' registries: *a
//!   lease is never held twice*, and a probe never mistakes its own
//!   process's lease for another's.
//!
//! Each model has a test that plants a concurrency bug in the shipped code
//! (`CommitBug`, `LeaseBug`: switches that `msp serve` never sets) and
//! expects loom to find the interleaving that breaks the property.
//!
//! Bound: every model runs with [`PREEMPTION_BOUND`] preemptions (loom's
//! `preemption_bound`): each interleaving with at most that many forced
//! thread switches is explored exhaustively. The planted bugs need one or
//! two; the whole suite takes a few seconds in release mode.

pub mod io {
    //! The shipped io files, compiled against loom.
    #[path = "../../../src/io/commit.rs"]
    pub mod commit;
    #[path = "../../../src/io/lease.rs"]
    pub mod lease;
    pub mod shim;
}

pub mod lease_model;
pub mod model_file;
pub mod model_flock;
pub mod shutdown;
pub mod sync_path;

/// The preemption bound of every model (see the crate docs).
pub const PREEMPTION_BOUND: usize = 3;

/// Runs `f` under loom with the crate's bound.
pub fn check<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(PREEMPTION_BOUND);
    b.check(f);
}
