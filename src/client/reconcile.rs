//! Reconciling an external effect whose outcome is `unknown`: by asking
//! the provider by key, or by an operator's recorded decision.
//!
//! Seed 002: neither a command id nor application dedupe can reconstruct a
//! provider-side outcome that was lost. The host reports such a tool call
//! `effectOutcome: "unknown"` ([`EffectOutcome::Unknown`]) and never
//! re-issues it to a provider without key support. This module is what an
//! application does next, sans IO:
//!
//! 1. [`reconcile`] looks for a decision recorded earlier (by this or
//!    another application instance); failing that, asks a provider that
//!    honours keys ([`KeyQuery`]) *without mutating*; a definite answer is
//!    recorded as [`Resolver::Provider`].
//! 2. Otherwise it returns [`Reconciled::NeedsOperator`] with an
//!    [`OperatorTicket`]: what a person needs to check the external system.
//!    [`decide`] records their decision, first write wins, so two operators
//!    (or two instances) can never record two different truths.
//!
//! Nothing here performs an action: re-issuing to an unkeyed provider could
//! mutate twice, so the only ways out of `unknown` are a keyed query or a
//! person. A decision is an *application* record (kept in the gate's store,
//! [`ResolutionStore`]): the host's log still says `unknown`, which is what
//! the host knew. If the host later reports a definite outcome that
//! contradicts the recorded decision, [`reconcile`] says so
//! ([`Reconciled::Disputed`]) instead of picking one.

use serde_json::Value;

use super::events::{EffectOutcome, Item};
use super::gate::GateError;
use super::ids::EffectKey;

/// A definite outcome: what `unknown` is reconciled to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The mutation happened (once).
    Committed,
    /// The mutation did not happen.
    NotStarted,
}

impl Settled {
    /// The definite outcome an [`EffectOutcome`] names, if it names one.
    pub fn of(o: EffectOutcome) -> Option<Settled> {
        match o {
            EffectOutcome::Committed => Some(Settled::Committed),
            EffectOutcome::NotStarted => Some(Settled::NotStarted),
            EffectOutcome::Unknown => None,
        }
    }

    /// The stored spelling (the wire's `effectOutcome` spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            Settled::Committed => "committed",
            Settled::NotStarted => "notStarted",
        }
    }

    /// Reads the stored spelling back.
    pub fn parse(s: &str) -> Option<Settled> {
        match s {
            "committed" => Some(Settled::Committed),
            "notStarted" => Some(Settled::NotStarted),
            _ => None,
        }
    }
}

/// Who settled an unknown effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolver {
    /// The provider answered a query by the effect key.
    Provider,
    /// A person checked the external system.
    Operator {
        /// Who decided (for the audit trail).
        name: String,
        /// Why, in their words.
        note: String,
    },
}

/// One recorded reconciliation of an effect key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// The effect it settles.
    pub key: EffectKey,
    /// What it was settled to.
    pub outcome: Settled,
    /// By whom.
    pub by: Resolver,
    /// When (injected clock, Unix ms).
    pub at_ms: u64,
}

/// Where resolutions are kept: one per effect key, first write wins. Both
/// gate stores implement it, so the decision lives beside the request's
/// outcome and is shared by every instance that shares the gate.
pub trait ResolutionStore {
    /// Inserts `r` unless a resolution of its key exists, atomically and
    /// durably; returns the resolution now stored (`r` or the earlier one).
    fn resolve_if_absent(&mut self, r: &Resolution) -> Result<Resolution, GateError>;

    /// The resolution of `key`, if any.
    fn resolution(&mut self, key: &EffectKey) -> Result<Option<Resolution>, GateError>;
}

/// A provider that honours effect keys, asked what happened to one. It
/// must not mutate: a query is a read.
pub trait KeyQuery {
    /// What happened to `key`: `Unknown` when the provider cannot tell.
    fn query(&mut self, key: &EffectKey) -> EffectOutcome;
}

/// What a person needs to reconcile an effect by hand.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorTicket {
    /// The effect key (the provider-side identity to look for).
    pub key: EffectKey,
    /// The provider (`tool`).
    pub tool: String,
    /// The tool call item as the host sent it (its `rawArgs` say what was
    /// to be done).
    pub item: Value,
}

/// The state of one tool call's effect after [`reconcile`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reconciled {
    /// The host reported a definite outcome; nothing to reconcile.
    Reported(Settled),
    /// Settled, now or earlier, by a query or an operator.
    Resolved(Resolution),
    /// Nobody but a person can tell; nothing was recorded.
    NeedsOperator(OperatorTicket),
    /// The host reported a definite outcome that contradicts a recorded
    /// decision (an operator guessed wrong, or the provider changed its
    /// answer): both are returned, neither is preferred.
    Disputed {
        /// What the host reports.
        reported: Settled,
        /// What was recorded.
        recorded: Resolution,
    },
    /// The tool call has no outcome yet (still in flight): wait for its
    /// `item/completed`.
    Pending,
}

/// Why [`reconcile`] or [`decide`] could not proceed.
#[derive(Debug, Clone, PartialEq)]
pub enum ReconcileError {
    /// The item is not a tool call.
    NotAToolCall,
    /// The tool call's effect key cannot be named (no approval id, or no
    /// session), so nobody can look it up.
    NoEffectKey,
    /// The store failed; nothing is known to have been recorded, retrying is
    /// safe.
    Store(GateError),
}

impl std::fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReconcileError::NotAToolCall => write!(f, "the item is not a tool call"),
            ReconcileError::NoEffectKey => write!(f, "the tool call's effect key is unknown"),
            ReconcileError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReconcileError {}

impl From<GateError> for ReconcileError {
    fn from(e: GateError) -> ReconcileError {
        ReconcileError::Store(e)
    }
}

/// Reconciles one tool call item (from `item/completed` or a view page).
/// `query` is the provider's key lookup, to be given only for providers
/// that honour keys; it is asked at most once, and only when nothing was
/// recorded before. Never performs anything.
pub fn reconcile<S: ResolutionStore + ?Sized>(
    store: &mut S,
    item: &Item,
    query: Option<&mut dyn KeyQuery>,
    now_ms: u64,
) -> Result<Reconciled, ReconcileError> {
    let call = item
        .tool_call
        .as_ref()
        .ok_or(ReconcileError::NotAToolCall)?;
    let Some(reported) = call.effect_outcome else {
        return Ok(Reconciled::Pending);
    };
    let key = call
        .effect_key
        .as_ref()
        .ok_or(ReconcileError::NoEffectKey)?;
    let recorded = store.resolution(key)?;
    if let Some(settled) = Settled::of(reported) {
        return Ok(match recorded {
            Some(r) if r.outcome != settled => Reconciled::Disputed {
                reported: settled,
                recorded: r,
            },
            _ => Reconciled::Reported(settled),
        });
    }
    if let Some(r) = recorded {
        return Ok(Reconciled::Resolved(r));
    }
    if let Some(settled) = query.and_then(|q| Settled::of(q.query(key))) {
        let r = Resolution {
            key: key.clone(),
            outcome: settled,
            by: Resolver::Provider,
            at_ms: now_ms,
        };
        return Ok(Reconciled::Resolved(store.resolve_if_absent(&r)?));
    }
    Ok(Reconciled::NeedsOperator(OperatorTicket {
        key: key.clone(),
        tool: call.tool.clone(),
        item: item.raw.clone(),
    }))
}

/// What [`decide`] recorded.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// This decision is now the record.
    Recorded(Resolution),
    /// Someone settled the effect first (another operator, or a provider
    /// query at another instance): their record stands, returned as stored.
    AlreadySettled(Resolution),
}

/// Records an operator's decision on a ticket. First write wins: a second,
/// different decision is refused by returning the first.
pub fn decide<S: ResolutionStore + ?Sized>(
    store: &mut S,
    ticket: &OperatorTicket,
    outcome: Settled,
    operator: &str,
    note: &str,
    now_ms: u64,
) -> Result<Decision, ReconcileError> {
    let r = Resolution {
        key: ticket.key.clone(),
        outcome,
        by: Resolver::Operator {
            name: operator.to_string(),
            note: note.to_string(),
        },
        at_ms: now_ms,
    };
    let stored = store.resolve_if_absent(&r)?;
    Ok(if stored == r {
        Decision::Recorded(stored)
    } else {
        Decision::AlreadySettled(stored)
    })
}

/// Encodes a resolver for a store row: (kind, name, note).
pub(crate) fn resolver_columns(by: &Resolver) -> (&'static str, Option<&str>, Option<&str>) {
    match by {
        Resolver::Provider => ("provider", None, None),
        Resolver::Operator { name, note } => ("operator", Some(name), Some(note)),
    }
}

/// Reads a store row back, with typed errors for anything malformed.
pub(crate) fn decode_resolution(
    key: &str,
    outcome: &str,
    kind: &str,
    name: Option<String>,
    note: Option<String>,
    at_ms: i64,
) -> Result<Resolution, GateError> {
    let bad = |detail: String| GateError::Store(format!("effect resolution of {key}: {detail}"));
    let key = EffectKey::new(key).map_err(|e| bad(e.to_string()))?;
    let outcome = Settled::parse(outcome).ok_or_else(|| bad(format!("outcome {outcome:?}")))?;
    let by = match (kind, name, note) {
        ("provider", _, _) => Resolver::Provider,
        ("operator", Some(name), Some(note)) => Resolver::Operator { name, note },
        (k, _, _) => return Err(bad(format!("resolver {k:?}"))),
    };
    let at_ms = u64::try_from(at_ms).map_err(|_| bad(format!("time {at_ms}")))?;
    Ok(Resolution {
        key,
        outcome,
        by,
        at_ms,
    })
}

#[cfg(test)]
mod tests;
