//! The sans-IO runtime core.
//!
//! [`Host`] is a deterministic state machine. Call order, in the manner of
//! quinn-proto:
//!
//! 1. feed one input with a `handle_*` method, passing the current time
//!    from the injected clock;
//! 2. drain [`Host::poll_output`] until `None` and carry out every
//!    [`Output`] in order;
//! 3. arm a timer for [`Host::poll_timeout`] and call
//!    [`Host::handle_timeout`] when it fires.
//!
//! Nothing in here reads a clock, randomness, a file or a socket.

pub mod agent;
pub mod boundary;
pub mod bugs;
mod commands;
mod event_fields;
mod host;
pub mod log_fold;
mod members;
pub mod record;
pub mod session;
pub mod snapshot;
mod turns;
pub mod view;

#[cfg(test)]
mod compaction_tests;
#[cfg(test)]
mod tests;

pub use boundary::*;
pub use commands::{derived_session_id, QUEUE_MAX};
pub use host::{Host, BACKLOG_CHUNK_EVENTS, CONNECTIONS_MAX, EFFECT_TIMEOUT_MS, UNANSWERED_MAX};

/// The schema fingerprint this host reports in `initialize`.
pub const SCHEMA_FINGERPRINT: &str =
    "sha256:c8d1a2a1866814e220fd396d382a9a75861412feee884b5021b2ee359bd3dc59";

/// Default idle-unload delay (PROTOCOL.md 4.1): ten minutes.
pub const DEFAULT_IDLE_UNLOAD_MS: u64 = 600_000;

/// The compaction threshold `msp serve` uses unless told otherwise:
/// records appended since the last compaction.
pub const DEFAULT_COMPACT_RECORDS: u64 = 32_768;

/// Configuration fixed at host construction.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Durable (files, fsync) or ephemeral (memory).
    pub durability: Durability,
    /// The absolute data directory (`museHome` in `initialize`).
    pub data_dir: String,
    /// Frame limit in bytes.
    pub frame_limit_bytes: usize,
    /// Idle unload delay; 0 never unloads.
    pub idle_unload_ms: u64,
    /// When false, every intake gets a sync of its own (the baseline the
    /// group-commit benchmark compares against).
    pub group_commit: bool,
    /// Seed of the host's id RNG (from OS entropy in `msp serve`, from the
    /// run seed in the simulator).
    pub seed: u64,
    /// Compact a durable session's log once this many records were
    /// appended since its last compaction (and they take at least as many
    /// bytes as its last snapshot); 0 never compacts. Off unless set:
    /// `msp serve` sets [`DEFAULT_COMPACT_RECORDS`], the simulator only on
    /// request.
    pub compact_records: u64,
    /// At most this many archived events per read of a subscription's
    /// backlog; the next chunk is read when one is queued, so a long
    /// history never sits in memory whole. [`BACKLOG_CHUNK_EVENTS`]
    /// unless a test wants several chunks from a short history.
    pub backlog_chunk_events: u64,
    /// The effect providers an `!effect` may name (PROTOCOL.md 5), each
    /// with whether it honours effect keys. After a crash or a lost
    /// response the core queries a keyed provider by key (the reconcile
    /// path); an effect at an unkeyed one whose outcome was not seen is
    /// reported `unknown`, never performed again. `msp serve` fills it from
    /// its provider registry (`io::effects::Providers`); default: the
    /// built-in `keyed` (true) and `unkeyed` (false).
    pub effect_providers: std::collections::BTreeMap<String, bool>,
}

impl HostConfig {
    /// Defaults of PROTOCOL.md section 1 for `data_dir`.
    pub fn new(data_dir: impl Into<String>, durability: Durability, seed: u64) -> Self {
        HostConfig {
            durability,
            data_dir: data_dir.into(),
            frame_limit_bytes: crate::proto::framing::DEFAULT_FRAME_LIMIT_BYTES,
            idle_unload_ms: DEFAULT_IDLE_UNLOAD_MS,
            group_commit: true,
            seed,
            compact_records: 0,
            backlog_chunk_events: BACKLOG_CHUNK_EVENTS,
            effect_providers: [("keyed".to_string(), true), ("unkeyed".to_string(), false)]
                .into_iter()
                .collect(),
        }
    }
}
