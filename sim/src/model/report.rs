//! What the model says: violations, named by the promise they break, and
//! how often each rule of PROTOCOL.md was exercised (rule coverage).

use std::collections::{BTreeMap, BTreeSet};

use crate::oracle::Violation;

/// Violations and rule counts of one run.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Violations, in trace order.
    pub violations: Vec<Violation>,
    /// One report per (property, subject): a broken rule is said once.
    said: BTreeSet<(&'static str, String)>,
    /// How often each rule was exercised.
    pub rules: BTreeMap<&'static str, u64>,
    /// The trace entry being judged.
    pub at: usize,
}

impl Report {
    /// Records a violation of `property` about `subject` (said once per
    /// property and subject).
    pub fn fail(&mut self, property: &'static str, subject: &str, detail: String) {
        debug_assert!(
            crate::oracle::PROPERTIES.contains(&property),
            "{property} is not a listed property"
        );
        if self.said.insert((property, subject.to_string())) {
            self.violations
                .push(Violation::new(property, Some(self.at), detail));
        }
    }

    /// Records a violation found at the end of the run.
    pub fn fail_at_end(&mut self, property: &'static str, subject: &str, detail: String) {
        debug_assert!(
            crate::oracle::PROPERTIES.contains(&property),
            "{property} is not a listed property"
        );
        if self.said.insert((property, subject.to_string())) {
            self.violations.push(Violation::new(property, None, detail));
        }
    }

    /// Checks `ok`, else records the violation.
    pub fn check(
        &mut self,
        ok: bool,
        property: &'static str,
        subject: &str,
        detail: impl FnOnce() -> String,
    ) -> bool {
        if !ok {
            self.fail(property, subject, detail());
        }
        ok
    }

    /// [`Report::check`], with the subject written out only on a violation
    /// (the subject names a violation once; a check made on every event
    /// need not format one that holds).
    pub fn check_lazy(
        &mut self,
        ok: bool,
        property: &'static str,
        subject: impl FnOnce() -> String,
        detail: impl FnOnce() -> String,
    ) -> bool {
        if !ok {
            self.fail(property, &subject(), detail());
        }
        ok
    }

    /// Counts one exercise of `rule`.
    pub fn hit(&mut self, rule: &'static str) {
        *self.rules.entry(rule).or_insert(0) += 1;
    }
}

/// The rules of PROTOCOL.md 4.1-4.4 whose exercise a sweep counts; a
/// 100-seed `mixed` sweep must exercise each (else a coverage shortfall).
pub const RULES: &[&str] = &[
    // 2 the handshake
    "2 initialize",
    "2 initialize again",
    "2 initialize result judged",
    "2 request before the handshake",
    // 4.1 commands
    "4.1 session/start fresh",
    "4.1 session/start replay",
    "4.1 session/started broadcast",
    "4.1 session/resume snapshot",
    "4.1 session/resume cursor suffix",
    "4.1 session/resume replay",
    "4.1 session/resume excludeItems",
    "4.1 state/update accepted",
    "4.1 approval/decide accepted",
    "4.1 approval/decide requirement stale",
    "4.1 approval/request judged",
    "4.1 pending approvals re-issued",
    "4.1 task/stop accepted",
    "4.1 task/stopAll",
    "4.1 idle unload",
    "4.1 shutdown unload",
    // 4.3 turns
    "4.3 turn/start started",
    "4.3 turn/start queued",
    "4.3 turn/start steered",
    "4.3 turn/start replace",
    "4.3 turn/steer accepted",
    "4.3 turn/unqueue accepted",
    "4.3 turn/interrupt accepted",
    "4.3 turn/cancel accepted",
    "4.3 turn/completed completed",
    "4.3 failed launch",
    "4.3 queued launch",
    // 3 rejection reasons
    "3 reject command_id_conflict",
    "3 reject abandoned",
    "3 reject session_id_conflict",
    "3 reject launch_failed",
    "3 reject deferred_start_failed",
    "3 reject already_launched",
    "3 reject already_terminal",
    "3 reject missing_run",
    "3 reject missing_task",
    "3 reject not_running",
    "3 reject queue_full",
    "3 reject stale_revision",
    // 1, 3 bad input, refused in the error precedence
    "1 inputTooLarge",
    "1 overloaded while shutting down",
    "3 parseError",
    "3 invalidRequest",
    "3 methodNotFound",
    "3 invalidParams",
    "3 a refused line records nothing",
    "3 error code, kind and retryable judged",
    // 4.4 the ledger
    "4.4 replay of an applied command",
    "4.4 replay of a rejected command",
    "4.4 replay of an abandoned command",
    "4.4 replay after a restart",
    "4.4 conflicting reuse, one param changed",
    "4.4 same payload, other spelling",
    "4.4 settled applied",
    "4.4 settled rejected",
    "4.4 settled abandoned",
    "4.4 recovery ended a running turn",
    "4.4 recovery kept a queued submit",
    "4.4 carrier-less replay, same host",
    "4.4 carrier-less replay, after restart",
    "4.4 carrier-less replay, after reload",
    "4.4 keyed effect",
    "4.4 unkeyed effect",
    "4.4 effect outcome unknown",
    "4.4 pendingCommands read",
    // 4.2 reads
    "4.2 read excludeItems",
    "4.2 archived history read",
    "4.2 view/unsubscribe ends the view",
    "4.2 approval/listPending judged",
    // 5 the scripted agent's stream
    "5 agent message deltas judged",
    "5 agent message opened on a live link",
    "5 task cancelled by a stop",
    "5 turn/retryScheduled",
    "5 model error ended a turn",
];

/// Rules only the SDK client reaches (its observer pages histories with
/// `view/page` and subscribes with `view/subscribe`, and its links may
/// break the handshake's order or open with an `initialize` whose
/// `clientInfo.name` is bad; the simulator's own client and `sdk-v1` do
/// neither); a 100-seed `mixed` sweep of client `sdk` must exercise
/// each.
pub const PAGE_RULES: &[&str] = &[
    "2 initialized before initialize",
    "2 initialize refused invalidParams",
    "4.2 view/page forward",
    "4.2 view/page backward",
    "4.2 view/page from a cursor",
    "4.2 view/subscribe after a cursor",
    "4.2 view/subscribe from the head",
    "4.2 view/subscribe refused missingAnchor",
];

/// Rules of [`RULES`] the simulator's own client (`--client sim`) is not
/// owed: its `StopAllThenPause` move pauses without sending the
/// `task/stopAll` again after the reload (the SDK client's does), so only
/// its rare plain re-sends reach the rule (4 in 300 `mixed` seeds).
pub const SIM_CLIENT_EXEMPT: &[&str] = &["4.4 carrier-less replay, after reload"];

/// Rules a sweep counts and prints but does not owe: too rare for every
/// 100 seeds to reach them (an interrupt landing inside a message's
/// stream: 2-9 per 100 `mixed` seeds).
pub const OBSERVED_RULES: &[&str] = &[
    "5 agent message cut by its turn's end",
    "4.2 view/subscribe backlog read from the file",
    "4.4 corrupt archive named",
    "4.1 idle unload on time",
    "3 storageUnavailable before the intake was durable",
    "3 storageUnavailable after a failed read",
];

/// Rules only the `bitrot` scenario reaches; a 100-seed `bitrot` sweep
/// must exercise each.
pub const BITROT_RULES: &[&str] = &["4.4 corrupt log refused"];
