//! The MSP client SDK: a sans-IO client core, a tokio driver, the request
//! gate, and optimistic writes.
//!
//! Layers, innermost first:
//!
//! - [`ids`]: the identities kept apart in types (request, command, run,
//!   effect key, correlation) and UUIDv7 command-id minting.
//! - [`wire`]: what an application asks for ([`CommandSpec`],
//!   [`ReadSpec`]) as MSP params; client frames; server lines classified.
//! - [`outcome`]: a command's terminal outcome: accepted (typed ack),
//!   rejected (reason; unknown reasons terminal), or error (kind).
//! - [`events`]: typed public MSP notifications, `effectOutcome` included.
//! - [`core`]: [`ClientCore`], the sans-IO state machine: bytes, timeouts
//!   and application calls in; bytes, completions and events out; clock and
//!   randomness injected. The simulator drives it directly.
//! - [`optimistic`]: fetch-reconcile-retry for `state/update`, sans-IO.
//! - [`gate`]: the request gate: one application request id, one command,
//!   one persisted outcome, across processes (SQLite) or in a simulation
//!   (an in-memory store that can crash).
//! - [`reconcile`]: what to do about an effect reported `unknown`: ask a
//!   keyed provider by key, or record an operator's decision (first write
//!   wins, kept in the gate's store); never re-issue.
//! - [`driver`]: the tokio driver over stdio (`msp serve --stdio`), TCP or
//!   a Unix socket.

pub mod core;
pub mod driver;
pub mod events;
mod frame;
pub mod gate;
pub mod ids;
pub mod optimistic;
pub mod outcome;
pub mod reconcile;
pub mod wire;

pub use self::core::{
    ClientConfig, ClientCore, CommandHandle, Completion, InboundNotification, Output, ReadHandle,
    SubmitError,
};
pub use events::{ClientEvent, Durability, EffectOutcome, Notification, TurnEnd, ViewEvent};
pub use ids::{
    ApprovalId, CommandId, CorrelationId, EffectKey, Entropy, RequestId, SeededEntropy, SessionId,
    TaskId, TurnId,
};
pub use outcome::{Ack, AckFields, CommandOutcome, ErrorInfo, ErrorKind, RejectReason, Rejection};
pub use wire::{CommandSpec, ReadSpec, WireCommand};
