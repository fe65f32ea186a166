//! What a run draws its choices from and what it fixes besides its
//! [`crate::run::RunConfig`]: a recorded choice sequence instead of the
//! seed, a fixed small workload, a fixed fault mix (the exhaustive check
//! and the property tests enumerate faults, not fault mixes), and a probe
//! that hashes the simulation's state after a given decision.
//!
//! Fault model: none; a plan only says where choices come from.

use crate::faults::FaultMix;
use crate::workload::Scenario;

/// The actors of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// Driving clients.
    pub clients_count: usize,
    /// Logical commands each client issues in the safety phase (besides
    /// the session/start and resumes it needs).
    pub commands_per_client: u32,
    /// A durable run adds a client that reads the others' sessions.
    pub observer: bool,
}

impl Workload {
    /// The scenario's own workload.
    pub fn of(scenario: Scenario) -> Workload {
        Workload {
            clients_count: scenario.clients_count(),
            commands_per_client: scenario.commands_per_client(),
            observer: scenario.durable(),
        }
    }
}

/// How a run draws its choices and what it fixes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Replay these choices (past their end, the simplest); `None` draws
    /// from the config's seed.
    pub choices: Option<Vec<u64>>,
    /// A fixed workload: every client issues exactly its commands (no
    /// "stop early" decision is drawn). `None`: the scenario's, with the
    /// stop decision (so a shrunk run can issue fewer).
    pub workload: Option<Workload>,
    /// A fixed fault mix instead of one drawn from the choices.
    pub mix: Option<FaultMix>,
    /// With `choices`: past their end, draw from the stream of this seed
    /// instead of taking the simplest options (a search's continuation).
    pub then_seed: Option<u64>,
    /// Which decisions the run draws: a sequence recorded by an older
    /// simulator replays with the draws it was recorded with.
    pub draws: Draws,
}

/// The simulator's draw order: which decisions a run draws, so that a
/// recorded choice sequence means what it meant when it was recorded. A
/// run file names it (`drawsVersion`); a new kind of decision that would
/// move the others gets a new variant, and older files keep theirs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Draws {
    /// Version 1: before sync stalls (no `stall` level in the fault mix).
    BeforeStalls,
    /// Version 2: the fault mix draws a `stall` level last.
    WithStalls,
    /// Version 3: the fault mix then draws a `shutdown` level; a host
    /// whose step draws a crash may instead be shut down gracefully
    /// (one more decision at such a step, only when the level is on).
    WithShutdowns,
    /// Version 4: an SDK observer's every fifth read is a `view/subscribe`
    /// (or the `view/unsubscribe` that ends it). No draw is added; the
    /// reads change, and with them what the hosts do.
    WithSubscriptions,
    /// Version 5: an SDK client draws, on each new link, whether it first
    /// sends a stray `initialized` ahead of its handshake (a client that
    /// breaks the handshake's order; the host must ignore it).
    WithHandshakeSlips,
    /// Version 6: a line delivered to a host may arrive in two reads,
    /// split at a drawn byte (a decision per delivered line), as TCP may
    /// cut it; the host's line splitter must join them.
    WithFragments,
    /// Version 7: two plain turn texts in three and one `state/update`
    /// value in two carry characters a JSON writer must escape, or text
    /// outside ASCII (`moves::escaped_text`). No draw is added; the lines
    /// change, and with them the scripted agent's replies and the timing.
    WithEscapes,
    /// Version 8: one fresh command in five an SDK client submits carries
    /// its command id in uppercase from its first line (a UUID spelled as
    /// RFC 9562 also allows), so the intake the host records and answers
    /// with, and every later replay, starts from that spelling. No draw
    /// is added.
    WithUpperIds,
    /// Version 9: the fault mix then draws a `read-fail` level (last);
    /// when it is on, opening or reading a session's files may fail (an
    /// EIO: one more decision at each open and each read).
    WithReadFaults,
    /// Version 10: the fault mix then draws a `solo-sync` level (last);
    /// when it is on, each host start draws whether that incarnation runs
    /// without group commit (one more decision at each start). And a
    /// conflict probe of a carrier-less row whose `flip` is drawn sends a
    /// durable `state/update` of its id (`moves::respell`; no draw added).
    WithSoloSyncs,
    /// Version 11: the fault mix then draws a `slow-io` level (last); when
    /// it is on, each open and read of a session's files draws whether it
    /// completes 1-40 ms later instead of in the step that asked (and, if
    /// so, when), so the host's other inputs land while it is in flight.
    WithSlowIo,
    /// Version 12: the fault mix then draws a `late-timer` level (last);
    /// when it is on, each arming of a host's timer draws whether it fires
    /// late (and, if so, by how much), as a busy driver thread or a coarse
    /// OS timer makes `msp serve`'s fire: the host then handles deadlines
    /// already past, not only ones that fall due at that instant.
    WithLateTimers,
    /// Version 13: each append the disk refuses draws whether the host
    /// hears of it at once (as before) or, as `msp serve` tells it, once
    /// it has carried out every output it had queued (the session's later
    /// appends and syncs skipped meanwhile, as `io::storage` skips them).
    /// No draw is added to the fault mix; one decision per failed append.
    WithDeferredFailures,
    /// Version 14: one double click in two of an SDK client goes out on
    /// another client's link to the same host (a twin process of the app
    /// sending the same command), so the copy is a replay on a connection
    /// whose answers do not queue behind the original's (no draw: the
    /// client's serial picks). And an SDK conflict probe that may cross
    /// (see [`Draws::WithSoloSyncs`]) draws whether it aims at a
    /// carrier-less row, when one was answered.
    WithTwins,
    /// Version 15: an SDK client that knows a pending approval draws, at
    /// each pick, whether it decides it at once (one time in two), and
    /// after approving, whether an interrupt of the turn goes out right
    /// behind the decision (three times in ten): the turn may then end
    /// while the tool call's effect is in flight, or its lost answer
    /// awaited. Such a chase draws whether the client's next pick is a
    /// pause (one time in two), which leaves the session idle but for that
    /// wait (it must stay loaded).
    #[default]
    WithPromptApprovals,
}

impl Draws {
    /// The one this build records.
    pub const CURRENT: Draws = Draws::WithPromptApprovals;

    /// The number a run file writes.
    pub fn version(self) -> u64 {
        match self {
            Draws::BeforeStalls => 1,
            Draws::WithStalls => 2,
            Draws::WithShutdowns => 3,
            Draws::WithSubscriptions => 4,
            Draws::WithHandshakeSlips => 5,
            Draws::WithFragments => 6,
            Draws::WithEscapes => 7,
            Draws::WithUpperIds => 8,
            Draws::WithReadFaults => 9,
            Draws::WithSoloSyncs => 10,
            Draws::WithSlowIo => 11,
            Draws::WithLateTimers => 12,
            Draws::WithDeferredFailures => 13,
            Draws::WithTwins => 14,
            Draws::WithPromptApprovals => 15,
        }
    }

    /// The draws of a run file's `drawsVersion`, if this build knows them.
    pub fn from_version(v: u64) -> Option<Draws> {
        match v {
            1 => Some(Draws::BeforeStalls),
            2 => Some(Draws::WithStalls),
            3 => Some(Draws::WithShutdowns),
            4 => Some(Draws::WithSubscriptions),
            5 => Some(Draws::WithHandshakeSlips),
            6 => Some(Draws::WithFragments),
            7 => Some(Draws::WithEscapes),
            8 => Some(Draws::WithUpperIds),
            9 => Some(Draws::WithReadFaults),
            10 => Some(Draws::WithSoloSyncs),
            11 => Some(Draws::WithSlowIo),
            12 => Some(Draws::WithLateTimers),
            13 => Some(Draws::WithDeferredFailures),
            14 => Some(Draws::WithTwins),
            15 => Some(Draws::WithPromptApprovals),
            _ => None,
        }
    }
}

impl Plan {
    /// Draw everything from the seed (what `msp-sim run` does).
    pub fn seeded() -> Plan {
        Plan::default()
    }

    /// Replay `choices`; the workload and fault mix come from them too.
    pub fn recorded(choices: Vec<u64>) -> Plan {
        Plan {
            choices: Some(choices),
            ..Plan::default()
        }
    }
}

/// A look at the simulation's state once decision `at_decision` has been
/// drawn (at the end of the world event that drew it): `prune` gets the
/// state hash and says whether to stop the run there (its future is one
/// already explored). Used by the exhaustive check.
pub struct Probe<'a> {
    /// The 0-based index of the decision.
    pub at_decision: usize,
    /// Called once with the state hash; `true` stops the run.
    pub prune: &'a mut dyn FnMut(u64) -> bool,
}

/// What a probe saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSeen {
    /// The state hash at the end of the event that drew the decision.
    pub state_hash: u64,
    /// Decisions drawn by then (those after the probed one belong to the
    /// same event).
    pub decisions_count: usize,
    /// The run stopped there (its oracles did not run).
    pub pruned: bool,
}
