//! Reconciliation's rules, checked against both stores.

use serde_json::json;

use super::*;
use crate::client::events::ToolCall;
use crate::client::gate::memory::{Commit, MemoryGateStore};
use crate::client::gate::sqlite::SqliteGateStore;

const KEY: &str = "0198f0aa-1111-7000-8000-0000000000aa:appr-1";

fn tool_item(outcome: Option<EffectOutcome>, key: Option<&str>) -> Item {
    Item {
        item_id: "item-1".into(),
        kind: "toolCall".into(),
        turn_id: None,
        status: "completed".into(),
        text: None,
        tool_call: Some(ToolCall {
            tool: "unkeyed".into(),
            effect_outcome: outcome,
            effect_key: key.map(|k| EffectKey::new(k).expect("key")),
        }),
        raw: json!({"itemId": "item-1", "kind": "toolCall", "rawArgs": "pay 10"}),
    }
}

/// A provider's key lookup that answers `answer` and counts its calls.
struct Lookup {
    answer: EffectOutcome,
    calls: u32,
}

impl KeyQuery for Lookup {
    fn query(&mut self, _key: &EffectKey) -> EffectOutcome {
        self.calls += 1;
        self.answer
    }
}

/// Runs one scenario against two handles on one fresh store of each kind
/// (two application instances sharing a gate).
fn check(scenario: impl Fn(&mut dyn ResolutionStore, &mut dyn ResolutionStore)) {
    let mem = MemoryGateStore::new(Commit::Immediate);
    scenario(&mut mem.clone(), &mut mem.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gate.sqlite");
    let (mut a, mut b) = (
        SqliteGateStore::open(&path).expect("open"),
        SqliteGateStore::open(&path).expect("open"),
    );
    scenario(&mut a, &mut b);
}

#[test]
fn a_keyed_query_settles_an_unknown_once_and_is_not_asked_again() {
    check(|a, b| {
        let item = tool_item(Some(EffectOutcome::Unknown), Some(KEY));
        let mut lookup = Lookup {
            answer: EffectOutcome::Committed,
            calls: 0,
        };
        let first = reconcile(a, &item, Some(&mut lookup), 10).expect("reconcile");
        let Reconciled::Resolved(r) = &first else {
            panic!("not resolved: {first:?}");
        };
        assert_eq!(
            (r.outcome, &r.by, r.at_ms),
            (Settled::Committed, &Resolver::Provider, 10)
        );
        // Another instance finds the record without asking the provider.
        let mut other = Lookup {
            answer: EffectOutcome::NotStarted,
            calls: 0,
        };
        let again = reconcile(b, &item, Some(&mut other), 20).expect("reconcile");
        assert_eq!(again, first);
        assert_eq!((lookup.calls, other.calls), (1, 0));
    });
}

#[test]
fn without_a_definite_answer_an_operator_decides_and_the_first_decision_wins() {
    check(|a, b| {
        let item = tool_item(Some(EffectOutcome::Unknown), Some(KEY));
        // An unkeyed provider: no query at all; a keyed one that cannot
        // tell: the same.
        let mut unsure = Lookup {
            answer: EffectOutcome::Unknown,
            calls: 0,
        };
        for q in [None, Some(&mut unsure as &mut dyn KeyQuery)] {
            let r = reconcile(a, &item, q, 1).expect("reconcile");
            let Reconciled::NeedsOperator(t) = r else {
                panic!("not an operator ticket: {r:?}");
            };
            assert_eq!(t.key.as_str(), KEY);
            assert_eq!(t.item["rawArgs"], "pay 10");
        }
        let ticket = match reconcile(b, &item, None, 2).expect("reconcile") {
            Reconciled::NeedsOperator(t) => t,
            o => panic!("{o:?}"),
        };
        let first = decide(
            a,
            &ticket,
            Settled::NotStarted,
            "ana",
            "no charge at the bank",
            3,
        )
        .expect("decide");
        let Decision::Recorded(rec) = first else {
            panic!("not recorded: {first:?}");
        };
        let second = decide(b, &ticket, Settled::Committed, "bo", "looks paid", 4).expect("decide");
        assert_eq!(second, Decision::AlreadySettled(rec.clone()));
        assert_eq!(
            reconcile(b, &item, None, 5).expect("reconcile"),
            Reconciled::Resolved(rec.clone())
        );
        assert_eq!(
            rec.by,
            Resolver::Operator {
                name: "ana".into(),
                note: "no charge at the bank".into()
            }
        );
    });
}

#[test]
fn a_definite_host_report_needs_nothing_but_a_contradiction_is_surfaced() {
    check(|a, _| {
        let mut lookup = Lookup {
            answer: EffectOutcome::Committed,
            calls: 0,
        };
        let done = tool_item(Some(EffectOutcome::Committed), Some(KEY));
        assert_eq!(
            reconcile(a, &done, Some(&mut lookup), 1).expect("reconcile"),
            Reconciled::Reported(Settled::Committed)
        );
        assert_eq!(lookup.calls, 0, "a definite report is not queried");
        let ticket = OperatorTicket {
            key: EffectKey::new(KEY).expect("key"),
            tool: "unkeyed".into(),
            item: json!({}),
        };
        decide(a, &ticket, Settled::NotStarted, "ana", "guess", 2).expect("decide");
        let r = reconcile(a, &done, None, 3).expect("reconcile");
        let Reconciled::Disputed { reported, recorded } = r else {
            panic!("not disputed: {r:?}");
        };
        assert_eq!(
            (reported, recorded.outcome),
            (Settled::Committed, Settled::NotStarted)
        );
    });
}

#[test]
fn pending_calls_and_unnamed_keys_are_typed_not_guessed() {
    check(|a, _| {
        assert_eq!(
            reconcile(a, &tool_item(None, Some(KEY)), None, 1).expect("pending"),
            Reconciled::Pending
        );
        assert_eq!(
            reconcile(a, &tool_item(Some(EffectOutcome::Unknown), None), None, 1),
            Err(ReconcileError::NoEffectKey)
        );
        let mut msg = tool_item(None, None);
        msg.tool_call = None;
        assert_eq!(
            reconcile(a, &msg, None, 1),
            Err(ReconcileError::NotAToolCall)
        );
    });
}

#[test]
fn a_failed_store_records_nothing_and_a_crash_keeps_only_durable_decisions() {
    let item = tool_item(Some(EffectOutcome::Unknown), Some(KEY));
    let ticket = match reconcile(&mut MemoryGateStore::new(Commit::Immediate), &item, None, 1)
        .expect("reconcile")
    {
        Reconciled::NeedsOperator(t) => t,
        o => panic!("{o:?}"),
    };
    // An injected failure: an error, and no record.
    let mut s = MemoryGateStore::new(Commit::Immediate);
    s.fail_next(1);
    assert!(matches!(
        decide(&mut s, &ticket, Settled::Committed, "ana", "", 2),
        Err(ReconcileError::Store(_))
    ));
    assert_eq!(s.resolution(&ticket.key).expect("read"), None);
    // Unsynced decisions die with the process; synced ones survive.
    let mut lazy = MemoryGateStore::new(Commit::OnSync);
    decide(&mut lazy, &ticket, Settled::Committed, "ana", "", 3).expect("decide");
    lazy.crash();
    assert_eq!(lazy.resolution(&ticket.key).expect("read"), None);
    decide(&mut lazy, &ticket, Settled::NotStarted, "bo", "", 4).expect("decide");
    lazy.sync();
    lazy.crash();
    let kept = lazy.resolution(&ticket.key).expect("read").expect("kept");
    assert_eq!(kept.outcome, Settled::NotStarted);
}

#[test]
fn sqlite_resolution_rows_that_are_malformed_are_typed_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gate.sqlite");
    let mut s = SqliteGateStore::open(&path).expect("open");
    let raw = rusqlite::Connection::open(&path).expect("raw");
    raw.execute(
        "INSERT INTO msp_effect_resolution VALUES ('k', 'maybe', 'provider', NULL, NULL, 1)",
        [],
    )
    .expect("insert");
    let key = EffectKey::new("k").expect("key");
    assert!(matches!(s.resolution(&key), Err(GateError::Store(m)) if m.contains("maybe")));
}
