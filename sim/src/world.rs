//! The world: virtual clock, ordered event queue, and the one seam
//! (`decide`) through which every random choice of a run goes.
//!
//! Fault model: none here; this module only makes choices reproducible.
//! Every choice is a `(kind, options) -> pick` decision drawn from a
//! [`Source`]: the `ChaCha8Rng` seeded from the run's u64 seed, or a
//! recorded sequence of choices (a run file, a shrinker's candidate).
//! Every decision is recorded ([`World::choices`]), so any run can be
//! replayed from its choices alone. Option 0 of every decision is the
//! simplest (no fault, first option, shortest delay, fewest actions): a
//! recorded sequence that runs out yields the simplest run from there on.
//! Nothing reads wall time, OS randomness or hash-map order.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::choice::{uniform, Choice, Source};

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
    /// Which host a client connects to; restart delays; how late a host's
    /// timer fires.
    Placement,
}

/// An open or read of a session's files a host asked for (its
/// `Output::Open`, `Output::Read` or `Output::ReadHistory`), carried out
/// when it completes: at once, or later under `slow-io`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Io {
    /// Open (and lease) a session to load it.
    Open {
        /// The session.
        session: String,
        /// How the directory is treated.
        mode: msp::core::OpenMode,
        /// The host's token.
        token: u64,
    },
    /// Read a session's log (and archive) without its lease.
    Read {
        /// The session.
        session: String,
        /// The host's token.
        token: u64,
        /// The archive is wanted too.
        history: bool,
    },
    /// Read a byte range of a session's archive.
    History {
        /// The session.
        session: String,
        /// The host's token.
        token: u64,
        /// First byte.
        from_bytes: u64,
        /// End byte (exclusive).
        to_bytes: u64,
    },
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
    /// An open or read a host asked for completes (`slow-io`).
    IoDone {
        /// The host.
        host: usize,
        /// The incarnation that asked.
        incarnation: u64,
        /// What it asked for.
        io: Io,
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
    /// A host that began a graceful shutdown and is still not quiescent
    /// is killed (as a service manager kills a stop that hangs).
    StopDeadline {
        /// The host.
        host: usize,
        /// The incarnation that began the shutdown.
        incarnation: u64,
    },
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

/// The virtual clock, event queue and the run's only source of choices.
pub struct World {
    source: Source,
    /// Simulated time in ms.
    pub now_ms: u64,
    start_ms: u64,
    queue: BTreeMap<(u64, u64), Event>,
    seq: u64,
    /// Decisions drawn so far, by kind.
    pub decisions_count: BTreeMap<Decision, u64>,
    /// Trace entries recorded so far (the run keeps it current; each
    /// choice records it).
    pub trace_len: usize,
    /// Every decision drawn, in order (one-option decisions draw nothing).
    record: Vec<Choice>,
    /// Ids handed out by [`World::bits128`] (keeps ids of the simplest
    /// choices distinct).
    ids_serial: u64,
    /// The workload is fixed by the run's plan: [`World::more_work`] says
    /// yes without drawing (the exhaustive check's small workloads).
    pub fixed_workload: bool,
    /// Raise [`World::probe_hit`] once decision number `probe_at` is drawn.
    probe_at: Option<usize>,
    probe_hit: bool,
}

impl World {
    /// A world at time `start_ms` whose choices come from the ChaCha
    /// stream seeded from `seed`.
    pub fn new(seed: u64, start_ms: u64) -> World {
        World::with_source(
            Source::Seeded(Box::new(ChaCha8Rng::seed_from_u64(seed))),
            start_ms,
        )
    }

    /// A world at time `start_ms` drawing its choices from `source`.
    pub fn with_source(source: Source, start_ms: u64) -> World {
        World {
            source,
            now_ms: start_ms,
            start_ms,
            queue: BTreeMap::new(),
            seq: 0,
            decisions_count: BTreeMap::new(),
            trace_len: 0,
            record: Vec::new(),
            ids_serial: 0,
            fixed_workload: false,
            probe_at: None,
            probe_hit: false,
        }
    }

    /// Draws one decision: from the recorded sequence, else from the seed
    /// with `seeded` (which returns a value in `0..options`).
    fn draw(
        &mut self,
        kind: Decision,
        options: u64,
        seeded: impl FnOnce(&mut ChaCha8Rng) -> u64,
    ) -> u64 {
        assert!(options >= 1, "a decision needs at least one option");
        *self.decisions_count.entry(kind).or_insert(0) += 1;
        if options == 1 {
            return 0;
        }
        let value = match self.source.next_recorded(options) {
            Some(v) => v,
            None => seeded(self.source.rng().expect("a seeded source")),
        };
        debug_assert!(value < options);
        self.record.push(Choice {
            kind,
            options,
            value,
            at_ms: self.now_ms - self.start_ms,
            after_entries: self.trace_len,
        });
        if self.probe_at.is_some_and(|p| self.record.len() > p) {
            self.probe_at = None;
            self.probe_hit = true;
        }
        value
    }

    /// The seam: picks one of `options` (>= 1) choices for `kind`, each
    /// equally likely under a seed. Call sites order their options so
    /// that 0 is the simplest.
    pub fn decide(&mut self, kind: Decision, options: u64) -> u64 {
        self.draw(kind, options, |rng| uniform(rng, options))
    }

    /// True with probability `permille`/1000 under a seed: a two-option
    /// decision whose option 0 (the simple one: no fault) is `false`.
    /// Certain outcomes (`permille` 0 or >= 1000) draw nothing.
    pub fn chance(&mut self, kind: Decision, permille: u64) -> bool {
        if permille == 0 {
            return false;
        }
        if permille >= 1000 {
            return true;
        }
        self.draw(kind, 2, |rng| u64::from(uniform(rng, 1000) < permille)) == 1
    }

    /// One of `permilles.len() + 1` options: option `i >= 1` with
    /// probability `permilles[i - 1]`/1000, option 0 (nothing happens)
    /// with the rest. Under a seed it draws what [`World::chance`] draws
    /// (one pick in 0..1000), so a [`World::chance`] of `permilles[0]`
    /// can grow options without changing which pick means what: its
    /// recorded values keep their meaning.
    pub fn pick_permille(&mut self, kind: Decision, permilles: &[u64]) -> u64 {
        debug_assert!(permilles.iter().sum::<u64>() <= 1000);
        self.draw(kind, permilles.len() as u64 + 1, |rng| {
            let u = uniform(rng, 1000);
            let mut edge = 0;
            for (i, p) in permilles.iter().enumerate() {
                edge += p;
                if u < edge {
                    return i as u64 + 1;
                }
            }
            0
        })
    }

    /// A value in `lo..=hi`; option 0 is `lo`.
    pub fn range(&mut self, kind: Decision, lo: u64, hi: u64) -> u64 {
        debug_assert!(lo <= hi);
        lo + self.decide(kind, hi - lo + 1)
    }

    /// A fault's delay (ms): `None` without the fault (chance
    /// `permille`); with it, a value in `short`, or one time in
    /// `1000 / long_permille` a value in `long`. Up to three decisions of
    /// `kind`, always in this order (the fault, long or short, the value),
    /// so every delayed fault reads its choices alike and option 0 of each
    /// is the simplest: no delay, a short one, the shortest.
    pub fn delay_ms(
        &mut self,
        kind: Decision,
        permille: u64,
        long_permille: u64,
        short: (u64, u64),
        long: (u64, u64),
    ) -> Option<u64> {
        if !self.chance(kind, permille) {
            return None;
        }
        let (lo, hi) = if self.chance(kind, long_permille) {
            long
        } else {
            short
        };
        Some(self.range(kind, lo, hi))
    }

    /// 128 bits for an id, drawn as two decisions. The low 20 bits are a
    /// serial, so ids never collide within a run whatever the choices (a
    /// shrunk run must not turn two commands into one by lowering an id
    /// choice); the simplest choices (zeros) give the lowest value not
    /// handed out yet.
    pub fn bits128(&mut self, kind: Decision) -> u128 {
        let hi = self.decide(kind, u64::MAX) as u128;
        let lo = self.decide(kind, u64::MAX);
        self.ids_serial += 1;
        debug_assert!(self.ids_serial < 1 << 20, "ids serial overflow");
        (hi << 64) | ((lo << 20) | (self.ids_serial & 0xF_FFFF)) as u128
    }

    /// Whether a client issues one more command: under a seed almost
    /// always (999 in 1000); option 0, the simplest and what a recorded
    /// sequence yields past its end, is "no more" (fewest actions). With a
    /// fixed workload it says yes without drawing.
    pub fn more_work(&mut self, kind: Decision) -> bool {
        self.fixed_workload || self.chance(kind, 999)
    }

    /// Every decision drawn so far, in order.
    pub fn choices(&self) -> &[Choice] {
        &self.record
    }

    /// Takes the record of decisions drawn so far.
    pub fn take_choices(&mut self) -> Vec<Choice> {
        std::mem::take(&mut self.record)
    }

    /// Asks to be told ([`World::probe_hit`]) once decision number `index`
    /// (0-based) has been drawn.
    pub fn set_probe(&mut self, index: usize) {
        self.probe_at = Some(index);
        self.probe_hit = self.record.len() > index;
    }

    /// Whether the probed decision has been drawn.
    pub fn probe_hit(&self) -> bool {
        self.probe_hit
    }

    /// The events waiting, in order, without their insertion numbers (for
    /// a state hash).
    pub fn queue_snapshot(&self) -> impl Iterator<Item = (u64, &Event)> {
        self.queue.iter().map(|((at, _), e)| (*at, e))
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

    /// Pops the next open or read still in flight ([`Event::IoDone`]),
    /// skipping every other event and advancing the clock to its time: the
    /// run's end lets the disk finish what hosts asked of it.
    pub fn pop_io(&mut self) -> Option<Event> {
        let key = self
            .queue
            .iter()
            .find(|(_, ev)| matches!(ev, Event::IoDone { .. }))
            .map(|(k, _)| *k)?;
        let ev = self.queue.remove(&key).expect("key present");
        self.now_ms = self.now_ms.max(key.0);
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

    #[test]
    fn a_recorded_world_replays_a_seeded_one_and_runs_out_into_the_simplest() {
        let draw = |w: &mut World| -> Vec<u64> {
            let mut v = Vec::new();
            for _ in 0..40 {
                v.push(w.decide(Decision::Client, 7));
                v.push(u64::from(w.chance(Decision::Net, 300)));
                v.push(w.range(Decision::Disk, 2, 15));
                v.push(w.bits128(Decision::Ids) as u64);
            }
            v
        };
        let mut a = World::new(11, 0);
        let va = draw(&mut a);
        let rec = crate::choice::values(a.choices());
        let mut b = World::with_source(Source::recorded(rec), 0);
        assert_eq!(draw(&mut b), va);
        assert_eq!(a.choices(), b.choices());
        // Past the end: no fault, lowest values, no more work.
        let mut c = World::with_source(Source::recorded(Vec::new()), 0);
        assert!(!c.chance(Decision::Net, 999));
        assert_eq!(c.range(Decision::Disk, 2, 15), 2);
        assert_eq!(c.decide(Decision::Client, 5), 0);
        assert!(!c.more_work(Decision::Client));
        assert!(
            c.chance(Decision::Net, 1000),
            "a certain outcome draws nothing"
        );
        assert_eq!(c.choices().len(), 4);
        // Ids of the simplest choices stay distinct, and so do ids whose
        // choices differ by the serial's step.
        assert_ne!(c.bits128(Decision::Ids), c.bits128(Decision::Ids));
        let mut d = World::with_source(Source::recorded(vec![0, 1, 0, 0]), 0);
        assert_ne!(d.bits128(Decision::Ids), d.bits128(Decision::Ids));
    }

    #[test]
    fn chance_is_a_two_option_decision_whose_zero_is_no() {
        let mut w = World::new(3, 0);
        let hits = (0..2000).filter(|_| w.chance(Decision::Net, 250)).count();
        assert!((350..650).contains(&hits), "about a quarter: {hits}");
        assert!(w.choices().iter().all(|c| c.options == 2 && c.value < 2));
        let ones = w.choices().iter().filter(|c| c.value == 1).count();
        assert_eq!(ones, hits);
    }

    #[test]
    fn a_probe_fires_once_its_decision_is_drawn() {
        let mut w = World::with_source(Source::recorded(vec![1, 1, 1]), 0);
        w.set_probe(1);
        w.decide(Decision::Net, 3);
        assert!(!w.probe_hit());
        w.decide(Decision::Net, 3);
        assert!(w.probe_hit());
    }
}
