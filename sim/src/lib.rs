//! `msp-sim`: the msp runtime (the unmodified `msp::core::Host`) on a
//! simulated clock, network and disk, with property oracles.
//!
//! A run ([`run::run`]) is one seed of one [`workload::Scenario`]: the
//! world draws the seed's fault mix (swarm testing), runs a safety phase
//! with faults on and a liveness phase with faults healed, records a
//! [`trace::Trace`], and hands it to the [`oracle`]s. Every random choice
//! goes through [`world::World::decide`]; the same seed gives the same
//! trace hash.

pub mod app;
pub mod bench;
pub mod check;
pub mod choice;
pub mod client;
pub mod corpus;
pub mod coverage;
pub mod disk;
pub mod faults;
pub mod fuzz;
pub mod known;
pub mod model;
pub mod moves;
pub mod net;
pub mod oracle;
pub mod plan;
pub mod process;
pub mod readable;
pub mod run;
pub mod runfile;
pub mod sdk_client;
pub mod shard;
pub mod shrink;
pub mod signature;
pub mod sweep;
pub mod tally;
pub mod trace;
pub mod workload;
pub mod world;
