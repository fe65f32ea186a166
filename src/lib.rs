//! MSP v1 command-plane runtime: the wire layer ([`proto`]), the sans-IO core
//! ([`core`]), the session log format ([`log`]) and the real drivers ([`io`]).
//! See ARCHITECTURE.md for the map.
#![warn(missing_docs)]

pub mod log;
pub mod proto;
