//! The wire layer: everything that knows JSON-RPC and the MSP shapes.
//!
//! - [`framing`]: `\n`-terminated lines out of a byte stream, with the frame
//!   limit (PROTOCOL.md section 1).
//! - [`envelope`]: one line into a JSON-RPC request, notification or response,
//!   or the typed envelope error the line deserves.
//! - [`error`]: the error table (PROTOCOL.md section 3) as [`RpcError`].
//! - [`ids`]: UUIDv7 validation and minting.
//! - [`canonical`]: the payload signature (RFC 8785 canonical JSON).
//! - [`params`]: typed params of every method, validated with field-level errors.
//! - [`jwrite`]: JSON written straight into a frame, the bytes serde_json writes.

pub mod canonical;
pub mod envelope;
pub mod error;
pub mod framing;
pub mod ids;
pub mod jwrite;
pub mod params;

pub use error::RpcError;
