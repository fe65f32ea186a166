//! The benchmarks of `benches/scale.rs` at tiny sizes, in `cargo test`: the
//! raw fdatasync, admission with group commit on and off, the SQLite
//! baseline and recovery after kill -9 all run against the real binary. It
//! fails on an error only (a refused command, a host that does not start or
//! shut down, a log that does not decode), never on a timing.

#[path = "../benches/scale.rs"]
#[allow(dead_code)]
mod scale;

#[test]
fn every_benchmark_runs_at_a_tiny_size() {
    if let Err(e) = scale::smoke() {
        panic!("benchmark smoke run failed: {e}");
    }
}
