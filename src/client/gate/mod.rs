//! The request gate: one application request, one command, one persisted
//! outcome.
//!
//! Seed 002: a double click and a proxy retry are one logical request that
//! reaches two application instances. Only the application boundary knows
//! they are one, so it gives the request a stable [`RequestId`] and asks the
//! gate before calling MSP:
//!
//! 1. **Admit** ([`Gate::admit`]): insert-if-absent of `request id ->
//!    (command id, payload)`, atomically and durably. The first arrival
//!    wins and sends the command. Every later arrival, here or at another
//!    instance, gets the winner's record instead of minting a second
//!    command: if the outcome is persisted it is returned as is; if not (the
//!    winner is still waiting, or died after sending), the arrival re-sends
//!    the *winner's* command id and payload, which the host deduplicates
//!    (exactly-once effect: one command, one run, a value-identical ack).
//! 2. **Settle** ([`Gate::settle`]): the outcome is persisted, first write
//!    wins. Only outcomes the host itself records (acks and rejections) are
//!    persisted; other errors record nothing at the host (PROTOCOL.md
//!    section 3), so the next arrival re-sends the same command and learns
//!    the real answer.
//!
//! A [`CorrelationId`] is stored for tracing and never consulted: two
//! requests sharing one are still two requests.
//!
//! Stores: [`sqlite::SqliteGateStore`] (the embedded default, safe across
//! processes) and [`memory::MemoryGateStore`] (for the simulator:
//! deterministic, no threads, and it can crash and lose what it had not
//! committed).

pub mod memory;
pub mod sqlite;

use serde_json::{Map, Value};

use super::ids::{CommandId, CorrelationId, RequestId};
use super::outcome::CommandOutcome;
use super::wire::WireCommand;

/// One request's row: the command it maps to and, once known, its outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct GateRecord {
    /// The application's request id (the unique key).
    pub request_id: RequestId,
    /// The one command id this request maps to.
    pub command_id: CommandId,
    /// The command's method and params, so that any instance re-sends the
    /// same payload under that id.
    pub command: WireCommand,
    /// For tracing only.
    pub correlation_id: Option<CorrelationId>,
    /// The persisted outcome, as [`CommandOutcome::answer_value`].
    pub outcome: Option<Value>,
    /// When the request was first admitted (injected clock, Unix ms).
    pub created_ms: u64,
}

impl GateRecord {
    /// The persisted outcome, typed.
    pub fn outcome(&self) -> Option<CommandOutcome> {
        self.outcome
            .as_ref()
            .and_then(CommandOutcome::from_answer_value)
    }
}

/// The answer of [`GateStore::claim`].
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// The proposed record was inserted: this arrival owns the request.
    Won,
    /// A record existed: the earlier arrival's, returned as stored.
    Existing(GateRecord),
}

/// Why a gate operation failed.
#[derive(Debug, Clone, PartialEq)]
pub enum GateError {
    /// The store failed (I/O, a lock wait past the busy timeout, an injected
    /// fault). Nothing is known to have been written; retrying is safe.
    Store(String),
    /// A stored row could not be read back (bad JSON, an invalid id).
    Corrupt {
        /// The request whose row is bad.
        request_id: RequestId,
        /// What was wrong.
        detail: String,
    },
    /// The same request id arrived with another payload than the one
    /// recorded: two different intents share an id (an application bug).
    RequestConflict {
        /// The request.
        request_id: RequestId,
        /// The command recorded for it.
        recorded: CommandId,
    },
}

impl std::fmt::Display for GateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GateError::Store(e) => write!(f, "gate store failed: {e}"),
            GateError::Corrupt { request_id, detail } => {
                write!(f, "gate row of request {request_id} is corrupt: {detail}")
            }
            GateError::RequestConflict {
                request_id,
                recorded,
            } => write!(
                f,
                "request {request_id} arrived with another payload than its command {recorded}"
            ),
        }
    }
}

impl std::error::Error for GateError {}

/// Where the gate keeps its rows. Every method is atomic, and durable when
/// it returns `Ok` (as durable as the store is).
pub trait GateStore {
    /// Insert-if-absent: inserts `proposed` unless a row with its request id
    /// exists, in one atomic step (never a check, then an insert).
    fn claim(&mut self, proposed: &GateRecord) -> Result<Claim, GateError>;

    /// Persists `outcome` (an answer value) for `request` if no outcome is
    /// stored yet and the row maps to `command`; returns the outcome now
    /// stored (the first one written wins).
    fn record_outcome(
        &mut self,
        request: &RequestId,
        command: &CommandId,
        outcome: &Value,
    ) -> Result<Option<Value>, GateError>;

    /// The row of `request`, if any.
    fn get(&mut self, request: &RequestId) -> Result<Option<GateRecord>, GateError>;
}

/// What the application does with one arrival of a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Answered before: return this outcome; send nothing.
    Answered {
        /// The command the request mapped to.
        command_id: CommandId,
        /// Its persisted outcome.
        outcome: CommandOutcome,
    },
    /// Send this command under this id (for a later arrival: the winner's
    /// id and payload), then [`Gate::settle`] with its outcome.
    Send {
        /// The id to send under.
        command_id: CommandId,
        /// The payload to send.
        command: WireCommand,
        /// True for the first arrival; false when re-sending the winner's
        /// command (the host deduplicates it).
        first: bool,
    },
}

/// The request gate over a store.
#[derive(Debug)]
pub struct Gate<S> {
    store: S,
}

impl<S: GateStore> Gate<S> {
    /// A gate over `store`.
    pub fn new(store: S) -> Gate<S> {
        Gate { store }
    }

    /// The store (for inspection in tests and tools).
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Admits one arrival of `request`. `fresh_id` is a newly minted command
    /// id, used only if this arrival is the first (a lost race wastes it,
    /// harmlessly: it was never sent).
    pub fn admit(
        &mut self,
        request: &RequestId,
        correlation: Option<&CorrelationId>,
        command: &WireCommand,
        fresh_id: CommandId,
        now_ms: u64,
    ) -> Result<Admission, GateError> {
        let proposed = GateRecord {
            request_id: request.clone(),
            command_id: fresh_id,
            command: command.clone(),
            correlation_id: correlation.cloned(),
            outcome: None,
            created_ms: now_ms,
        };
        let rec = match self.store.claim(&proposed)? {
            Claim::Won => {
                return Ok(Admission::Send {
                    command_id: proposed.command_id,
                    command: proposed.command,
                    first: true,
                })
            }
            Claim::Existing(rec) => rec,
        };
        if rec.command.signature() != command.signature() {
            return Err(GateError::RequestConflict {
                request_id: request.clone(),
                recorded: rec.command_id,
            });
        }
        match rec.outcome() {
            Some(outcome) => Ok(Admission::Answered {
                command_id: rec.command_id,
                outcome,
            }),
            None if rec.outcome.is_some() => Err(GateError::Corrupt {
                request_id: request.clone(),
                detail: "the stored outcome is not an answer".into(),
            }),
            None => Ok(Admission::Send {
                command_id: rec.command_id,
                command: rec.command,
                first: false,
            }),
        }
    }

    /// Records the outcome of `request`'s command and returns the request's
    /// outcome: the one persisted first (value-identical to `outcome` for
    /// host-recorded answers), or `outcome` itself when it is not one the
    /// host records (then nothing is persisted and a later arrival re-sends).
    pub fn settle(
        &mut self,
        request: &RequestId,
        command_id: &CommandId,
        outcome: CommandOutcome,
    ) -> Result<CommandOutcome, GateError> {
        if !outcome.is_recorded_by_host() {
            return Ok(outcome);
        }
        let Some(value) = outcome.answer_value() else {
            return Ok(outcome);
        };
        match self.store.record_outcome(request, command_id, &value)? {
            Some(stored) => {
                CommandOutcome::from_answer_value(&stored).ok_or_else(|| GateError::Corrupt {
                    request_id: request.clone(),
                    detail: "the stored outcome is not an answer".into(),
                })
            }
            None => Ok(outcome),
        }
    }
}

/// Serialises a stored command's params.
pub(crate) fn params_text(c: &WireCommand) -> String {
    Value::Object(c.params.clone()).to_string()
}

/// Reads a stored row back, with typed errors for anything malformed.
pub(crate) fn decode_row(
    request_id: &str,
    command_id: &str,
    method: &str,
    params: &str,
    correlation: Option<String>,
    outcome: Option<String>,
    created_ms: i64,
) -> Result<GateRecord, GateError> {
    let rid = RequestId::new(request_id).map_err(|e| GateError::Store(e.to_string()))?;
    let corrupt = |d: String| GateError::Corrupt {
        request_id: rid.clone(),
        detail: d,
    };
    let command_id = CommandId::parse(command_id).map_err(|e| corrupt(e.to_string()))?;
    let params: Map<String, Value> =
        serde_json::from_str(params).map_err(|e| corrupt(format!("params: {e}")))?;
    let command = WireCommand::parse(method, params).map_err(|e| corrupt(e.to_string()))?;
    let outcome = match outcome {
        None => None,
        Some(t) => {
            Some(serde_json::from_str::<Value>(&t).map_err(|e| corrupt(format!("outcome: {e}")))?)
        }
    };
    let correlation_id = match correlation {
        None => None,
        Some(c) => Some(CorrelationId::new(c).map_err(|e| corrupt(e.to_string()))?),
    };
    Ok(GateRecord {
        request_id: rid.clone(),
        command_id,
        command,
        correlation_id,
        outcome,
        created_ms: u64::try_from(created_ms).unwrap_or(0),
    })
}

#[cfg(test)]
mod tests;
