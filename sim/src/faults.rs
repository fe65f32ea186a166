//! The swarm step: each seed first draws which faults are on and how hard.
//!
//! Fault model (all probabilities per opportunity, in permille):
//! - network `drop` a line (either direction), `dup` a request line, `delay`
//!   a line (FIFO kept), `reorder` requests within a small window on one
//!   connection, `cut` a connection (both directions), `reconnect` (a client
//!   leaves and picks a possibly different host);
//! - disk: bytes are volatile until fsync; `fsync-fail` fails a sync (its
//!   unsynced bytes are lost, the host must not ack what it covered);
//!   `stall` makes a sync take 50-500 ms instead of 2-15 ms (a disk busy
//!   with other writers), which widens every window between an append and
//!   its sync: reads, crashes and replays that land in it;
//!   `disk-full` fails appends during a window (the host hears of each
//!   at once, or, `failure-deferred` in half the cases, once its queued
//!   outputs are carried out, as `msp serve` tells it; the log's later
//!   writes are skipped meanwhile); `read-fail` fails the
//!   reads of a session's files (opening it to load it, or reading it
//!   without the lease), as an EIO would; `slow-io` completes such an
//!   open or read 1-40 ms later instead of at once, so other inputs (a
//!   disconnect, another request, a sync) land while it is in flight, as
//!   they do on the io threads of `msp serve`; synced bytes never change
//!   (except under the `bitrot` scenario's deliberate damage);
//! - timers: `late-timer` fires a host's timer after its deadline, not at
//!   it, so the host meets deadlines already past;
//! - process: `crash` at any output step, `crash-point` crash at a named
//!   crash point, `restart` from the same disk after a delay. A crash is a
//!   process crash (kill -9: bytes it wrote survive in the page cache) or,
//!   with the `power` share, a machine crash (power loss: every host dies,
//!   every unsynced byte on the disk is lost, and with `tear` the last
//!   write of a file may survive as a prefix);
//! - effects: a provider may lose its response (`effect-lost`).
//!
//! Swarm testing (Groce et al.): a fault that is off for a seed lets the
//! other faults reach deeper states, so each fault is on for only some
//! seeds.

use crate::plan::Draws;
use crate::workload::Scenario;
use crate::world::{Decision, World};

/// The fault verbs, for counting and printing.
pub const FAULT_NAMES: [&str; 23] = [
    "drop",
    "dup",
    "delay",
    "reorder",
    "cut",
    "reconnect",
    "tear",
    "fsync-fail",
    "stall",
    "disk-full",
    "crash",
    "crash-point",
    "power-loss",
    "shutdown",
    "restart",
    "effect-lost",
    "rot",
    "read-fail",
    "solo-sync",
    "slow-io",
    "late-timer",
    "failure-deferred",
    "twin",
];

/// The latest a `late-timer` fires after its deadline (ms); the model's
/// idle-unload judge allows this much more when the fault is on.
pub const LATE_TIMER_MAX_MS: u64 = 50;

/// A fault level of a mix: on with `on_permille`, then one of `levels`;
/// off (0) is option 0.
fn pick(world: &mut World, on_permille: u64, levels: &[u64]) -> u64 {
    if world.chance(Decision::FaultMix, on_permille) {
        levels[world.decide(Decision::FaultMix, levels.len() as u64) as usize]
    } else {
        0
    }
}

/// The least chance (permille) of a crash at a rarely reached crash
/// point, when crash points are on.
pub const RARE_CRASH_POINT_PERMILLE: u64 = 300;

/// A seed's fault mix: permille per opportunity (0 = off).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultMix {
    /// Lose a line.
    pub drop_permille: u64,
    /// Duplicate a request line.
    pub dup_permille: u64,
    /// Delay a line by up to `delay_max_ms`.
    pub delay_permille: u64,
    /// The longest delay.
    pub delay_max_ms: u64,
    /// Swap a request with the previous undelivered one.
    pub reorder_permille: u64,
    /// Cut a connection when a line passes.
    pub cut_permille: u64,
    /// A client leaves its host at a wake-up.
    pub reconnect_permille: u64,
    /// A crash keeps a torn prefix of the last write.
    pub tear_permille: u64,
    /// An fsync fails.
    pub fsync_fail_permille: u64,
    /// An fsync stalls: it completes after 50-500 ms instead of 2-15 ms.
    /// Drawn only under [`Draws::WithStalls`] (0 in older runs).
    pub stall_permille: u64,
    /// Share of step crashes (not crash points) that are graceful
    /// shutdowns instead: the host is asked to stop (`Host::shutdown`),
    /// runs until it is quiescent, and exits. Drawn only under
    /// [`Draws::WithShutdowns`] (0 in older runs).
    pub shutdown_permille: u64,
    /// The disk fills up (per fsync, starting a window).
    pub disk_full_permille: u64,
    /// Crash at any output step.
    pub crash_step_permille: u64,
    /// Crash at a named crash point.
    pub crash_point_permille: u64,
    /// Share of crashes that are machine crashes (power loss) rather than
    /// process crashes.
    pub power_permille: u64,
    /// An effect response is lost.
    pub effect_lost_permille: u64,
    /// After a sync, a synced byte of a record that others follow rots
    /// (at most once per run; the `bitrot` scenario only).
    pub rot_permille: u64,
    /// Opening a session (to load it) or reading its files (without the
    /// lease) fails, as an EIO would: the host must refuse what waited on
    /// it `storageUnavailable`, having loaded or answered nothing from it.
    /// Drawn only under [`Draws::WithReadFaults`] (0 in older runs).
    pub read_fail_permille: u64,
    /// A host incarnation starts without group commit
    /// (`HostConfig::group_commit` off, as `msp serve --no-group-commit`):
    /// every intake then gets a sync of its own, and a command that finds
    /// its session's sync busy waits for it. Per start, so one run may mix
    /// both modes over the same logs. Drawn only under
    /// [`Draws::WithSoloSyncs`] (0 in older runs).
    pub solo_sync_permille: u64,
    /// Opening a session or reading its files completes 1-40 simulated ms
    /// after the host asked, not at once: the host's other inputs (lines,
    /// disconnects, syncs, timers) land in between, as on the io threads
    /// of `msp serve`. Drawn only under [`Draws::WithSlowIo`] (0 in older
    /// runs: every open and read completes in the step that asked).
    pub slow_io_permille: u64,
    /// A host's timer fires 1-10 simulated ms after the deadline it was
    /// armed for (11-[`LATE_TIMER_MAX_MS`] one time in eight), not at it,
    /// as `msp serve`'s do when its driver thread is busy: the host then
    /// meets deadlines already past. Drawn per arming only under
    /// [`Draws::WithLateTimers`] (0 in older runs: every timer fires at
    /// its deadline).
    pub late_timer_permille: u64,
    /// Sessions compact their log after this many records (0: never); see
    /// `run.rs`: compaction steps are crash points, and the judge then reads
    /// the trace with compaction translated away.
    pub compact_records: u64,
}

impl FaultMix {
    /// Draws the mix of a seed for `scenario`, with the decisions of
    /// `draws` (a run recorded before stalls existed draws none).
    pub fn draw(world: &mut World, scenario: Scenario, draws: Draws) -> FaultMix {
        let mut m = FaultMix {
            drop_permille: pick(world, 500, &[5, 20, 50]),
            dup_permille: pick(world, 500, &[20, 60, 150]),
            delay_permille: pick(world, 500, &[50, 200, 500]),
            delay_max_ms: 0,
            reorder_permille: pick(world, 400, &[20, 80]),
            cut_permille: pick(world, 400, &[3, 10, 30]),
            reconnect_permille: pick(world, 400, &[10, 40]),
            tear_permille: pick(world, 600, &[300, 700, 1000]),
            fsync_fail_permille: pick(world, 300, &[10, 40]),
            stall_permille: 0,
            shutdown_permille: 0,
            disk_full_permille: pick(world, 200, &[5, 20]),
            crash_step_permille: pick(world, 500, &[1, 3, 8]),
            crash_point_permille: pick(world, 600, &[50, 150, 400]),
            power_permille: pick(world, 600, &[200, 500, 1000]),
            effect_lost_permille: pick(world, 400, &[100, 300]),
            rot_permille: 0,
            read_fail_permille: 0,
            solo_sync_permille: 0,
            slow_io_permille: 0,
            late_timer_permille: 0,
            compact_records: 0,
        };
        m.compact_records = pick(world, 300, &[8, 24, 64]);
        m.delay_max_ms = if m.delay_permille > 0 {
            [20, 200, 1500][world.decide(Decision::FaultMix, 3) as usize]
        } else {
            0
        };
        if draws >= Draws::WithStalls {
            // Drawn last, so every decision before it stays where a run
            // recorded before stalls has it.
            m.stall_permille = pick(world, 500, &[150, 400]);
        }
        if draws >= Draws::WithShutdowns {
            // Last again, for the same reason.
            m.shutdown_permille = pick(world, 500, &[200, 500]);
        }
        if draws >= Draws::WithReadFaults {
            // Last again.
            m.read_fail_permille = pick(world, 300, &[20, 100]);
        }
        if draws >= Draws::WithSoloSyncs {
            // Last again.
            m.solo_sync_permille = pick(world, 300, &[500, 1000]);
        }
        if draws >= Draws::WithSlowIo {
            // Last again.
            m.slow_io_permille = pick(world, 500, &[300, 1000]);
        }
        if draws >= Draws::WithLateTimers {
            // Last again.
            m.late_timer_permille = pick(world, 500, &[300, 1000]);
        }
        match scenario {
            Scenario::Mixed => {}
            Scenario::Turns => {
                // Light faults: the point is turn control.
                m.crash_step_permille = m.crash_step_permille.min(1);
                m.crash_point_permille = m.crash_point_permille.min(30);
                m.fsync_fail_permille = 0;
                m.stall_permille = 0;
                m.disk_full_permille = 0;
                m.read_fail_permille = 0;
            }
            Scenario::CrashStorm => {
                m.crash_step_permille = m.crash_step_permille.max(4);
                m.crash_point_permille = m.crash_point_permille.max(250);
                m.tear_permille = m.tear_permille.max(500);
                m.power_permille = m.power_permille.max(300);
            }
            Scenario::LeaseHandover => {
                m.reconnect_permille = m.reconnect_permille.max(60);
                m.crash_point_permille = 0;
            }
            Scenario::BitRot => {
                // Reloads are what meet the damage: crash often.
                m.crash_step_permille = m.crash_step_permille.max(3);
                m.crash_point_permille = m.crash_point_permille.max(150);
                m.rot_permille = 30;
            }
            Scenario::Ephemeral => {
                m.compact_records = 0;
                m.tear_permille = 0;
                m.fsync_fail_permille = 0;
                m.stall_permille = 0;
                m.disk_full_permille = 0;
                m.read_fail_permille = 0;
                // Nothing is synced in memory.
                m.solo_sync_permille = 0;
                m.crash_point_permille = m.crash_point_permille.min(50);
            }
        }
        m
    }

    /// The chance of crashing at the named crash point `point`, so that
    /// every 100-seed sweep crashes at each whenever crash points are on
    /// in its mixes. The one every intake passes takes the mix's rate; the
    /// points a command passes rarely (a deferred effect, a group commit)
    /// no less than [`RARE_CRASH_POINT_PERMILLE`]; the rarest, a provider
    /// call's settlement, which only a command that survived the others
    /// reaches and which has nothing rarer behind it, twice that.
    pub fn crash_point_permille_at(&self, point: &str) -> u64 {
        match (self.crash_point_permille, point) {
            (0, _) | (_, "after-intake-before-ack") => self.crash_point_permille,
            (p, "after-effect-before-settle") => p.max(2 * RARE_CRASH_POINT_PERMILLE),
            (p, _) => p.max(RARE_CRASH_POINT_PERMILLE),
        }
    }

    /// One line naming the faults that are on and how hard.
    pub fn describe(&self) -> String {
        let parts = [
            ("drop", self.drop_permille),
            ("dup", self.dup_permille),
            ("delay", self.delay_permille),
            ("reorder", self.reorder_permille),
            ("cut", self.cut_permille),
            ("reconnect", self.reconnect_permille),
            ("tear", self.tear_permille),
            ("fsync-fail", self.fsync_fail_permille),
            ("stall", self.stall_permille),
            ("shutdown", self.shutdown_permille),
            ("disk-full", self.disk_full_permille),
            ("crash", self.crash_step_permille),
            ("crash-point", self.crash_point_permille),
            ("power", self.power_permille),
            ("effect-lost", self.effect_lost_permille),
            ("rot", self.rot_permille),
            ("read-fail", self.read_fail_permille),
            ("solo-sync", self.solo_sync_permille),
            ("slow-io", self.slow_io_permille),
            ("late-timer", self.late_timer_permille),
        ];
        let on: Vec<String> = parts
            .iter()
            .filter(|(_, p)| *p > 0)
            .map(|(n, p)| format!("{n}={p}\u{2030}"))
            .collect();
        if on.is_empty() {
            "no faults".to_string()
        } else {
            let mut s = on.join(" ");
            if self.delay_max_ms > 0 {
                s.push_str(&format!(" (delay<={}ms)", self.delay_max_ms));
            }
            if self.compact_records > 0 {
                s.push_str(&format!(" compact@{}", self.compact_records));
            }
            s
        }
    }
}
