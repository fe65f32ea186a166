//! The world: virtual clock, ordered event queue, and the one seam
//! (`decide`) through which every random choice of a run goes.
//!
//! Fault model: none here; this module only makes choices reproducible.
//! Every choice is a `(kind, options) -> pick` decision drawn from one
//! `ChaCha8Rng` seeded from the run's u64 seed, and is counted, so a run can
//! later be recorded as a schedule of decisions and shrunk by editing it.
//! Nothing reads wall time, OS randomness or hash-map order.

use std::collections::BTreeMap;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The named decision points of a run (what a schedule records).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Decision {
    /// Swarm step: which faults are on and how hard.
    FaultMix,
    /// A network verb on one line (deliver, drop, dup, delay, reorder).
    Net,
    /// Crash a host at this step or crash point.
    Crash,
    /// Disk: tear, fail an fsync, fill the disk, IO latency.
    Disk,
    /// Effect provider: latency, lost response.
    Effect,
    /// A client's next action and its parameters.
    Client,
    /// Ids minted by clients and seeds of host incarnations.
    Ids,
    /// Which host a client connects to; restart delays.
    Placement,
}

/// One entry of the event queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A client's timer fired.
    ClientWake(usize),
    /// A line arrives at one end of a link.
    Deliver {
        /// The link.
        link: u64,
        /// Towards the host (else towards the client).
        to_host: bool,
        /// The frame, newline included.
        line: Vec<u8>,
    },
    /// A host's timer fired (ignored unless still armed for `at_ms`).
    HostTimer {
        /// The host.
        host: usize,
        /// The incarnation that armed it.
        incarnation: u64,
    },
    /// An fsync finished.
    SyncDone {
        /// The host.
        host: usize,
        /// The incarnation that asked.
        incarnation: u64,
        /// The session.
        session: String,
        /// The offset covered.
        upto_bytes: u64,
        /// The open epoch of the file at the time of the request.
        epoch: u64,
    },
    /// An effect provider answered.
    EffectDone {
        /// The host.
        host: usize,
        /// The incarnation that asked.
        incarnation: u64,
        /// The host's token.
        token: u64,
        /// The effect key.
        key: String,
        /// 0 committed, 1 not started, 2 unknown.
        outcome: u8,
    },
    /// A dead host starts again from the disk.
    Restart(usize),
    /// A link's host end notices the client end closed.
    HostSeesClose {
        /// The link.
        link: u64,
    },
    /// Faults heal: the liveness phase begins.
    Heal,
    /// The run ends.
    End,
}

/// The virtual clock, event queue and the run's only RNG.
pub struct World {
    rng: ChaCha8Rng,
    /// Simulated time in ms.
    pub now_ms: u64,
    queue: BTreeMap<(u64, u64), Event>,
    seq: u64,
    /// Decisions drawn so far, by kind.
    pub decisions_count: BTreeMap<Decision, u64>,
}

impl World {
    /// A world at time `start_ms` whose RNG is seeded from `seed`.
    pub fn new(seed: u64, start_ms: u64) -> World {
        World {
            rng: ChaCha8Rng::seed_from_u64(seed),
            now_ms: start_ms,
            queue: BTreeMap::new(),
            seq: 0,
            decisions_count: BTreeMap::new(),
        }
    }

    /// The seam: picks one of `options` (>= 1) choices for `kind`.
    pub fn decide(&mut self, kind: Decision, options: u64) -> u64 {
        assert!(options >= 1, "a decision needs at least one option");
        *self.decisions_count.entry(kind).or_insert(0) += 1;
        if options == 1 {
            return 0;
        }
        // Rejection sampling keeps every option equally likely.
        let zone = u64::MAX - (u64::MAX % options);
        loop {
            let v = self.rng.next_u64();
            if v < zone {
                return v % options;
            }
        }
    }

    /// True with probability `permille`/1000 (a `decide` over 1000 options).
    pub fn chance(&mut self, kind: Decision, permille: u64) -> bool {
        if permille == 0 {
            return false;
        }
        self.decide(kind, 1000) < permille
    }

    /// A value in `lo..=hi`.
    pub fn range(&mut self, kind: Decision, lo: u64, hi: u64) -> u64 {
        debug_assert!(lo <= hi);
        lo + self.decide(kind, hi - lo + 1)
    }

    /// 128 random bits (for ids), drawn as two decisions.
    pub fn bits128(&mut self, kind: Decision) -> u128 {
        let hi = self.decide(kind, u64::MAX) as u128;
        let lo = self.decide(kind, u64::MAX) as u128;
        (hi << 64) | lo
    }

    /// Schedules `ev` at absolute time `at_ms` (not before now).
    pub fn schedule(&mut self, at_ms: u64, ev: Event) {
        let at = at_ms.max(self.now_ms);
        self.seq += 1;
        self.queue.insert((at, self.seq), ev);
    }

    /// Pops the next event, advancing the clock to its time.
    pub fn pop(&mut self) -> Option<Event> {
        let (&(at, seq), _) = self.queue.iter().next()?;
        let ev = self.queue.remove(&(at, seq)).expect("key present");
        debug_assert!(at >= self.now_ms, "time never runs backwards");
        self.now_ms = at;
        Some(ev)
    }

    /// Events waiting.
    pub fn pending_count(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_decisions_and_events_in_time_order() {
        let mut a = World::new(7, 0);
        let mut b = World::new(7, 0);
        let da: Vec<u64> = (0..50).map(|_| a.decide(Decision::Net, 10)).collect();
        let db: Vec<u64> = (0..50).map(|_| b.decide(Decision::Net, 10)).collect();
        assert_eq!(da, db);
        assert!(da.iter().all(|v| *v < 10));
        a.schedule(30, Event::Heal);
        a.schedule(10, Event::End);
        a.schedule(10, Event::Restart(1));
        assert_eq!(a.pop(), Some(Event::End));
        assert_eq!(a.pop(), Some(Event::Restart(1)));
        assert_eq!(a.now_ms, 10);
        assert_eq!(a.pop(), Some(Event::Heal));
        assert_eq!(a.pop(), None);
    }
}
