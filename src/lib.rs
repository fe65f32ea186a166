//! MSP v1 command-plane runtime: the wire layer ([`proto`]), the sans-IO core
//! ([`core`]), the client SDK ([`client`]), the session log format ([`log`]), the real drivers ([`io`]),
//! a deterministic in-process driver ([`harness`]) and the conformance
//! runner ([`conformance`]), and the `msp` command line ([`cli`]). See
//! ARCHITECTURE.md for the map.
#![warn(missing_docs)]

pub mod alloc;
pub mod cli;
pub mod client;
pub mod conformance;
pub mod core;
pub mod harness;
pub mod io;
pub mod log;
pub mod proto;
