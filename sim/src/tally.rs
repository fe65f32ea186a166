//! The size of a run, counted the way a person reading its timeline would:
//! client commands, injected faults, crashes and restarts (together its
//! steps), plus its choices and world events. Shrinking minimises steps
//! first.
//!
//! Fault model: none; this module only counts.

use std::fmt;

use crate::choice;
use crate::run::RunResult;

/// Fault counters that are faults proper (not crashes or restarts).
const FAULTS: [&str; 11] = [
    "drop",
    "dup",
    "delay",
    "reorder",
    "cut",
    "reconnect",
    "tear",
    "fsync-fail",
    "disk-full",
    "effect-lost",
    "read-fail",
];

/// What a run did, counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    /// Logical commands the clients issued (session/start and resume
    /// included; a re-send of one command is not another).
    pub commands_count: u64,
    /// Network, disk and provider faults injected.
    pub faults_count: u64,
    /// Host crashes (at a step or a crash point; a power loss is one).
    pub crashes_count: u64,
    /// Host restarts.
    pub restarts_count: u64,
    /// The choice sequence's length, trailing simplest choices left out.
    pub choices_count: u64,
    /// Choices that are not the simplest.
    pub nonzero_choices_count: u64,
    /// World events processed.
    pub events_count: u64,
}

impl Tally {
    /// Counts `r`.
    pub fn of(r: &RunResult) -> Tally {
        let count = |k: &str| r.faults.get(k).copied().unwrap_or(0);
        let values = choice::values(&r.choices);
        Tally {
            commands_count: r.clients.iter().map(|c| c.cmds.len() as u64).sum(),
            faults_count: FAULTS.iter().map(|k| count(k)).sum(),
            crashes_count: count("crash") + count("crash-point"),
            restarts_count: count("restart"),
            choices_count: values.len() as u64,
            nonzero_choices_count: choice::nonzero_count(&values) as u64,
            events_count: r.events_count,
        }
    }

    /// Steps: client commands + faults + crashes + restarts.
    pub fn steps(&self) -> u64 {
        self.commands_count + self.faults_count + self.crashes_count + self.restarts_count
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} steps ({} client commands, {} faults, {} crashes, {} restarts), {} choices ({} not the simplest), {} events",
            self.steps(),
            self.commands_count,
            self.faults_count,
            self.crashes_count,
            self.restarts_count,
            self.choices_count,
            self.nonzero_choices_count,
            self.events_count
        )
    }
}
