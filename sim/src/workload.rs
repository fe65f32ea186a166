//! Named scenarios: which actors a run has and which faults it may draw.
//!
//! Fault model: a scenario only bounds the swarm (the per-seed fault mix of
//! [`crate::faults`]); it injects nothing itself.

use std::fmt;

/// A named workload (`--scenario`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// Everything at once (the default).
    Mixed,
    /// Turn control: queue, steer, replace, unqueue, interrupt, cancel,
    /// failed launches; light faults.
    Turns,
    /// Frequent crashes at every crash point.
    CrashStorm,
    /// Several hosts on one disk; sessions move between them.
    LeaseHandover,
    /// Ephemeral hosts: nothing survives a host; clients never replay a
    /// command id at a new host.
    Ephemeral,
    /// Synced bytes of a session log rot once (a flipped byte in a record
    /// that others follow): every later load must answer `logCorrupt`,
    /// never from the damaged log.
    BitRot,
}

impl Scenario {
    /// Every scenario.
    pub const ALL: [Scenario; 6] = [
        Scenario::Mixed,
        Scenario::Turns,
        Scenario::CrashStorm,
        Scenario::LeaseHandover,
        Scenario::Ephemeral,
        Scenario::BitRot,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Mixed => "mixed",
            Scenario::Turns => "turns",
            Scenario::CrashStorm => "crash-storm",
            Scenario::LeaseHandover => "lease-handover",
            Scenario::Ephemeral => "ephemeral",
            Scenario::BitRot => "bitrot",
        }
    }

    /// Parses a CLI name.
    pub fn from_name(s: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|x| x.name() == s)
    }

    /// Whether hosts are durable.
    pub fn durable(self) -> bool {
        self != Scenario::Ephemeral
    }

    /// Whether this scenario enables the named crash points (so a large
    /// sweep must hit every one of them).
    pub fn crash_points_enabled(self) -> bool {
        matches!(self, Scenario::Mixed | Scenario::CrashStorm)
    }

    /// Host processes sharing the disk.
    pub fn hosts_count(self) -> usize {
        match self {
            Scenario::LeaseHandover => 3,
            Scenario::Mixed => 2,
            _ => 1,
        }
    }

    /// Clients driving the hosts.
    pub fn clients_count(self) -> usize {
        match self {
            Scenario::Turns => 2,
            Scenario::LeaseHandover => 3,
            _ => 3,
        }
    }

    /// Logical commands each client issues in the safety phase.
    pub fn commands_per_client(self) -> u32 {
        match self {
            Scenario::CrashStorm => 14,
            Scenario::Turns => 22,
            _ => 16,
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
