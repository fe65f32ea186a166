//! Optimistic writes: `state/update` with `expectedRevision`, and the
//! fetch-reconcile-retry loop, as a sans-IO state machine.
//!
//! A write carries the revision its decision was based on. When another
//! writer got there first, the host rejects it `stale_revision` (with
//! `data.currentRevision`) and applies nothing. The old write is then
//! *wrong*, not merely late: replaying it (same id or a new one) would
//! apply a decision made on a state that no longer exists. So the loop
//! here fetches the current state, hands it to the application's decider,
//! and submits what the decider says now as a **new** command (a new
//! command id), or stops when the decider declines.
//!
//! [`OptimisticWrite`] only decides; the driver (or the simulator) performs
//! each [`WriteStep`] and feeds the answer back.

use serde_json::{Map, Value};

use super::ids::SessionId;
use super::outcome::{AckFields, CommandOutcome, RejectReason};
use super::wire::{CommandSpec, ReadSpec};

/// The state a writer decides against: the session's `revision` and `kv`.
#[derive(Debug, Clone, PartialEq)]
pub struct StateView {
    /// The current revision (0 before any write).
    pub revision: u64,
    /// The key-value state.
    pub kv: Map<String, Value>,
}

impl StateView {
    /// Reads revision and `kv` out of a `session/read` result (or a
    /// resume's snapshot wrapped the same way). `None` when they are
    /// missing.
    pub fn from_session_read(result: &Value) -> Option<StateView> {
        let state = &result["history"]["snapshot"]["state"];
        Some(StateView {
            revision: state.get("revision")?.as_u64()?,
            kv: state.get("kv")?.as_object()?.clone(),
        })
    }
}

/// What the driver must do next for one optimistic write.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteStep {
    /// Read the current state (`session/read`) and call
    /// [`OptimisticWrite::on_fetched`].
    Fetch(ReadSpec),
    /// Submit this as a new command (a fresh command id) and call
    /// [`OptimisticWrite::on_outcome`] with its outcome.
    Write(CommandSpec),
    /// Applied: the write produced `revision`.
    Done {
        /// The revision after the write.
        revision: u64,
        /// Writes submitted, this one included.
        attempts: u32,
    },
    /// Stopped without applying anything.
    Stopped(WriteStop),
}

/// Why an optimistic write stopped unapplied.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteStop {
    /// The decider looked at the current state and declined to write.
    Declined {
        /// The revision it looked at.
        revision: u64,
    },
    /// Every attempt was stale: other writers kept winning.
    StillStale {
        /// The revision the last rejection reported.
        current_revision: Option<u64>,
        /// Writes submitted.
        attempts: u32,
    },
    /// The write failed for another reason (its outcome).
    Failed(CommandOutcome),
    /// The state could not be read (a `session/read` without revision or
    /// `kv`).
    Unreadable,
}

/// One logical "change the state" intent, made of as many fresh decisions
/// as it takes (at most `max_attempts` writes).
#[derive(Debug, Clone)]
pub struct OptimisticWrite {
    session: SessionId,
    max_attempts: u32,
    attempts: u32,
    last_stale: Option<u64>,
}

impl OptimisticWrite {
    /// A new intent; the first step is always a fetch, so the first
    /// decision is made on the current state.
    pub fn new(session: SessionId, max_attempts: u32) -> (OptimisticWrite, WriteStep) {
        let w = OptimisticWrite {
            session,
            max_attempts: max_attempts.max(1),
            attempts: 0,
            last_stale: None,
        };
        let fetch = w.fetch();
        (w, fetch)
    }

    fn fetch(&self) -> WriteStep {
        WriteStep::Fetch(ReadSpec::SessionRead {
            session_id: self.session.clone(),
        })
    }

    /// The state was read: ask the decider what to write *now*. It returns
    /// the keys to set, or `None` to stop.
    pub fn on_fetched(
        &mut self,
        view: Option<StateView>,
        decide: impl FnOnce(&StateView) -> Option<Map<String, Value>>,
    ) -> WriteStep {
        let Some(view) = view else {
            return WriteStep::Stopped(WriteStop::Unreadable);
        };
        match decide(&view) {
            None => WriteStep::Stopped(WriteStop::Declined {
                revision: view.revision,
            }),
            Some(set) => {
                self.attempts += 1;
                WriteStep::Write(CommandSpec::StateUpdate {
                    session_id: self.session.clone(),
                    expected_revision: view.revision,
                    set,
                })
            }
        }
    }

    /// The write's outcome: done, or (stale) fetch again for a new
    /// decision, or stop.
    pub fn on_outcome(&mut self, outcome: &CommandOutcome) -> WriteStep {
        match outcome {
            CommandOutcome::Accepted(ack) => match ack.fields {
                AckFields::StateUpdate { revision } => WriteStep::Done {
                    revision,
                    attempts: self.attempts,
                },
                _ => WriteStep::Stopped(WriteStop::Failed(outcome.clone())),
            },
            CommandOutcome::Rejected(r) if r.reason == RejectReason::StaleRevision => {
                self.last_stale = r.current_revision;
                if self.attempts >= self.max_attempts {
                    WriteStep::Stopped(WriteStop::StillStale {
                        current_revision: self.last_stale,
                        attempts: self.attempts,
                    })
                } else {
                    self.fetch()
                }
            }
            other => WriteStep::Stopped(WriteStop::Failed(other.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::outcome::classify_error;
    use serde_json::json;

    fn sid() -> SessionId {
        SessionId::parse("0198f0aa-1111-7000-8000-0000000000aa").expect("sid")
    }

    fn view(rev: u64, n: i64) -> Option<StateView> {
        StateView::from_session_read(
            &json!({"history": {"snapshot": {"state": {"revision": rev, "kv": {"n": n}}}}}),
        )
    }

    fn incr(v: &StateView) -> Option<Map<String, Value>> {
        let n = v.kv.get("n").and_then(Value::as_i64).unwrap_or(0);
        let mut m = Map::new();
        m.insert("n".into(), json!(n + 1));
        Some(m)
    }

    #[test]
    fn stale_write_is_never_replayed_a_new_decision_is_made() {
        let (mut w, step) = OptimisticWrite::new(sid(), 3);
        assert!(matches!(step, WriteStep::Fetch(_)));
        let first = w.on_fetched(view(4, 10), incr);
        let WriteStep::Write(CommandSpec::StateUpdate {
            expected_revision,
            set,
            ..
        }) = &first
        else {
            panic!("a write, got {first:?}")
        };
        assert_eq!((*expected_revision, set["n"].clone()), (4, json!(11)));
        let stale = classify_error(
            &json!({"code": -32030, "message": "", "data": {"kind": "commandRejected", "reason": "stale_revision", "currentRevision": 5}}),
        );
        assert!(matches!(w.on_outcome(&stale), WriteStep::Fetch(_)));
        // Another writer made n 20 at revision 5: the new decision is
        // based on that, not on the old write.
        let second = w.on_fetched(view(5, 20), incr);
        let WriteStep::Write(CommandSpec::StateUpdate {
            expected_revision,
            set,
            ..
        }) = &second
        else {
            panic!("a write, got {second:?}")
        };
        assert_eq!((*expected_revision, set["n"].clone()), (5, json!(21)));
        assert_ne!(first, second);
        let ok = CommandOutcome::from_answer_value(
            &json!({"result": {"commandId": "c", "status": "accepted", "revision": 6}}),
        )
        .expect("an answer");
        assert_eq!(
            w.on_outcome(&ok),
            WriteStep::Done {
                revision: 6,
                attempts: 2
            }
        );
    }

    #[test]
    fn attempts_are_bounded_and_declines_stop() {
        let (mut w, _) = OptimisticWrite::new(sid(), 1);
        let _ = w.on_fetched(view(0, 0), incr);
        let stale = classify_error(
            &json!({"code": -32030, "data": {"kind": "commandRejected", "reason": "stale_revision", "currentRevision": 9}}),
        );
        assert_eq!(
            w.on_outcome(&stale),
            WriteStep::Stopped(WriteStop::StillStale {
                current_revision: Some(9),
                attempts: 1
            })
        );
        let (mut w, _) = OptimisticWrite::new(sid(), 3);
        assert_eq!(
            w.on_fetched(view(2, 0), |_| None),
            WriteStep::Stopped(WriteStop::Declined { revision: 2 })
        );
        assert_eq!(
            w.on_fetched(None, incr),
            WriteStep::Stopped(WriteStop::Unreadable)
        );
    }
}
