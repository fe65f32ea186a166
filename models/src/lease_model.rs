//! The lease registry: two processes' registries over one model kernel of
//! `flock` locks.
//!
//! - [`never_held_twice`]: two threads of process A and one of process B
//!   take the same lease; whoever gets it holds it a moment and drops it.
//!   A counter of live leases must never exceed one.
//! - [`probe_never_sees_its_own_lease`]: process A takes a lease (one
//!   attempt, so any interference shows) while another thread of A probes
//!   it; nobody else holds it, so the take must succeed and the probe must
//!   answer "not held elsewhere".

use std::path::PathBuf;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::io::lease::{LeaseBug, LeaseRegistry, Take};
use crate::model_flock::{ModelFs, ModelLock};

type Registry = LeaseRegistry<ModelLock>;

fn path() -> PathBuf {
    PathBuf::from("/data/sessions/s/lease")
}

/// Takes the lease; while holding it, counts itself among the holders.
fn hold(reg: &Registry, live: &AtomicUsize) {
    if let Take::Taken(lease) = reg.take(&path()).expect("model io") {
        let n = live.fetch_add(1, Ordering::SeqCst) + 1;
        assert!(n <= 1, "a lease is held twice");
        // The registry knows what this process holds (the driver's
        // accounting at exit reads it).
        assert!(
            reg.holds(&path()) && reg.held_count() == 1,
            "a held lease unaccounted"
        );
        thread::yield_now();
        live.fetch_sub(1, Ordering::SeqCst);
        drop(lease);
    }
}

/// Runs the held-twice model with a planted bug (or none).
pub fn never_held_twice(bug: LeaseBug) {
    crate::check(move || {
        let fs = ModelFs::default();
        let a: Registry = LeaseRegistry::with(fs.clone(), 2, 0, bug);
        let b: Registry = LeaseRegistry::with(fs.clone(), 2, 0, bug);
        let live = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let a = a.clone();
                let live = Arc::clone(&live);
                thread::spawn(move || hold(&a, &live))
            })
            .collect();
        hold(&b, &live);
        for t in threads {
            t.join().expect("holder");
        }
        assert_eq!(fs.owner(&path()), None, "every lease was released");
        assert_eq!(a.held_count() + b.held_count(), 0);
        assert!(
            !a.holds(&path()) && !b.holds(&path()),
            "a released lease still counted"
        );
    });
}

/// Runs the probe model with a planted bug (or none).
pub fn probe_never_sees_its_own_lease(bug: LeaseBug) {
    crate::check(move || {
        let fs = ModelFs::default();
        let here: Registry = LeaseRegistry::with(fs, 1, 0, bug);
        let prober = {
            let here = here.clone();
            thread::spawn(move || here.held_elsewhere(&path()).expect("model io"))
        };
        let taken = here.take(&path()).expect("model io");
        let elsewhere = prober.join().expect("prober");
        assert!(
            !elsewhere,
            "probe interference: a probe reported this process's own lease as held elsewhere"
        );
        assert!(
            matches!(taken, Take::Taken(_)),
            "probe interference: a take failed though no other process holds the lease: {taken:?}"
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_never_held_twice() {
        never_held_twice(LeaseBug::None);
    }

    #[test]
    #[should_panic(expected = "a lease is held twice")]
    fn planted_retaking_the_held_file_is_caught() {
        never_held_twice(LeaseBug::RetakeHeldFile);
    }

    #[test]
    fn a_probe_never_disturbs_or_mistakes_its_own_process() {
        probe_never_sees_its_own_lease(LeaseBug::None);
    }

    #[test]
    #[should_panic(expected = "probe interference")]
    fn planted_probe_outside_the_registry_is_caught() {
        probe_never_sees_its_own_lease(LeaseBug::ProbeOutsideRegistry);
    }
}
