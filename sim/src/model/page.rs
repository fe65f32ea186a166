//! The model's judgement of a `view/page` answer (PROTOCOL.md 4.2, public
//! `ViewPageResult`), from the durable events the model consumed off the
//! simulated disk, never from the host's own log or memory.
//!
//! A page is a window of a session's durable history: `limit` events
//! after a cursor (forward; from the first event without one) or just
//! before it (backward; up to the head without one), oldest first, and
//! `nextCursor`, the anchor of the next page in the same direction
//! (forward the last event's cursor, backward the first's), `null` at the
//! end. Events the model holds as durable are immutable, so every event of
//! a page at an ordinal the model holds must be exactly the model's. A
//! host that reads the session's file without the lease may also see
//! events written and not yet synced (the model's head is then behind the
//! host's): their ordinals are judged, their contents are not. What a page
//! must contain is bounded below by the model's head when the request
//! arrived (`floor`): every event durable then is there to be paged.
//!
//! The pages that reach below a compaction point are the host's archive
//! reads (issue 11: old events stay on disk, read for `view/page`): the
//! simulator's workload pages from the start of a session's history so
//! that those reads run under faults and are judged here.

use serde_json::Value;

use super::report::Report;
use super::session::Sess;
use super::wire;

/// What a `view/page` request asked: `limit`, the anchor's ordinal (from
/// `cursor`) and the direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    /// `limit`.
    pub limit: u64,
    /// The cursor's ordinal, when the request names one.
    pub anchor: Option<u64>,
    /// `direction: "backward"`.
    pub backward: bool,
}

impl Ask {
    /// The request's params read as the host must read them; `None` for a
    /// request the host must refuse (or one whose cursor is not of `sid`,
    /// answered `missing_anchor`), whose answer is not a page.
    pub fn of(sid: &str, p: &Value) -> Option<Ask> {
        let limit = p["limit"].as_u64().filter(|l| (1..=1000).contains(l))?;
        let anchor = match &p["cursor"] {
            Value::Null => None,
            c => Some(wire::cursor_of(sid, c.as_str()?)?.0),
        };
        let backward = match &p["direction"] {
            Value::Null => false,
            d => match d.as_str()? {
                "forward" => false,
                "backward" => true,
                _ => return None,
            },
        };
        Some(Ask {
            limit,
            anchor,
            backward,
        })
    }
}

/// Judges the page `r` answered to `ask` on session `sess`, whose durable
/// head was `floor` when the request arrived. `held`: the answering host
/// held the session's lease from the request's arrival on, so it paged
/// its own log, of which only what it synced is durable: nothing past the
/// model's head.
pub fn judge(
    rep: &mut Report,
    subject: &str,
    sess: &Sess,
    ask: Ask,
    floor: u64,
    held: bool,
    r: &Value,
) {
    let id = sess.id.as_str();
    let Some(events) = r["events"].as_array() else {
        rep.fail(
            "read-consistency",
            subject,
            format!("session {id}: view/page answered {r} (no events array)"),
        );
        return;
    };
    // Each event: exactly `{method, params}`, its ordinal from its cursor.
    let mut ns = Vec::with_capacity(events.len());
    for e in events {
        let n = e["params"]["viewCursor"]
            .as_str()
            .and_then(|c| wire::cursor_of(id, c))
            .filter(|(_, k)| *k == 0)
            .map(|(n, _)| n);
        let shape = e.as_object().is_some_and(|o| o.len() == 2)
            && e["method"].is_string()
            && e["params"]["sessionId"].as_str() == Some(id);
        let Some(n) = n.filter(|_| shape) else {
            rep.fail(
                "read-consistency",
                subject,
                format!("session {id}: view/page event {e} is not a durable event of the session"),
            );
            return;
        };
        ns.push(n);
    }
    let dense = ns.windows(2).all(|w| w[1] == w[0] + 1);
    let (first, last) = (ns.first().copied(), ns.last().copied());
    let len = ns.len() as u64;
    let next = &r["nextCursor"];
    let next_is = |n: Option<u64>| match n {
        None => next.is_null(),
        Some(n) => next.as_str() == Some(sess.cursor(n).as_str()),
    };
    // The window the host must have served, given its head `h` (unknown
    // to the model beyond `h >= floor`; a page that ends short of `limit`
    // shows it).
    let (window_ok, next_ok) = if ask.backward {
        match ask.anchor {
            Some(a) => {
                let want = ask.limit.min(a.saturating_sub(1));
                let ok = len == want && (len == 0 || last == Some(a - 1));
                (ok, next_is(first.filter(|f| *f > 1)))
            }
            None => {
                // Up to the head: the last event is the head, which is at
                // least `floor`; an empty page means an empty history.
                let ok = match last {
                    Some(l) => l >= floor && len == ask.limit.min(l),
                    None => floor == 0,
                };
                (ok, next_is(first.filter(|f| *f > 1)))
            }
        }
    } else {
        let a = ask.anchor.unwrap_or(0);
        let starts = first.is_none_or(|f| f == a + 1);
        // Short of `limit`: the page reached the head, at least `floor`.
        let end = last.unwrap_or(a);
        let short_ok = len == ask.limit || end >= floor;
        let next_ok = if len < ask.limit {
            next.is_null()
        } else {
            // A full page: `null` only if it ended at the head.
            next_is(last) || (next.is_null() && end >= floor)
        };
        (starts && short_ok && len <= ask.limit, next_ok)
    };
    rep.check(
        dense && window_ok && next_ok,
        "read-consistency",
        subject,
        || {
            format!(
                "session {id}: view/page {ask:?} (model head #{} at arrival, #{} now) answered ordinals {ns:?}, nextCursor {next}",
                floor, sess.head
            )
        },
    );
    if held {
        rep.check(
            last.is_none_or(|l| l <= sess.head),
            "read-consistency",
            subject,
            || {
                format!(
                    "session {id}: view/page served events up to #{} from the lease holder's memory, durable only up to #{}",
                    last.unwrap_or(0),
                    sess.head
                )
            },
        );
    }
    // Contents: every event the model holds as durable, exactly.
    for (e, n) in events.iter().zip(&ns) {
        if *n > sess.head {
            continue;
        }
        let same = sess
            .events
            .get(n)
            .is_some_and(|(m, p)| e["method"] == m.as_str() && e["params"] == *p);
        if !rep.check(same, "read-consistency", subject, || {
            format!(
                "session {id}: view/page event #{n} is {e}, the durable event is {:?}",
                sess.events.get(n)
            )
        }) {
            return;
        }
    }
    rep.hit(if ask.backward {
        "4.2 view/page backward"
    } else {
        "4.2 view/page forward"
    });
    if ask.anchor.is_some() {
        rep.hit("4.2 view/page from a cursor");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A session of `n` durable events (`state/updated`, revision k).
    fn sess(n: u64) -> Sess {
        let mut s = Sess::new("s", true);
        for k in 1..=n {
            let p = json!({"sessionId": "s", "viewCursor": s.cursor(k), "revision": k});
            s.events.insert(k, ("state/updated".to_string(), p));
        }
        s.head = n;
        s
    }

    /// The page the spec gives, as the host must write it (`head` its
    /// durable head).
    fn page(s: &Sess, head: u64, ask: Ask) -> Value {
        let ns: Vec<u64> = if ask.backward {
            let below = ask.anchor.unwrap_or(head + 1).min(head + 1);
            (below.saturating_sub(ask.limit).max(1)..below).collect()
        } else {
            let a = ask.anchor.unwrap_or(0);
            (a + 1..=head.min(a + ask.limit)).collect()
        };
        let more = if ask.backward {
            ns.first().is_some_and(|f| *f > 1)
        } else {
            ns.last().is_some_and(|l| *l < head)
        };
        let next = match (more, ask.backward) {
            (false, _) => Value::Null,
            (true, true) => json!(s.cursor(ns[0])),
            (true, false) => json!(s.cursor(*ns.last().unwrap())),
        };
        let events: Vec<Value> = ns
            .iter()
            .map(|n| {
                let (m, p) = &s.events[n];
                json!({"method": m, "params": p})
            })
            .collect();
        json!({"events": events, "nextCursor": next})
    }

    fn ok(s: &Sess, ask: Ask, floor: u64, r: &Value) -> bool {
        let mut rep = Report::default();
        judge(&mut rep, "t", s, ask, floor, false, r);
        rep.violations.is_empty()
    }

    fn asks() -> Vec<Ask> {
        let mut v = Vec::new();
        for limit in [1, 2, 3, 5, 9] {
            for anchor in [None, Some(0), Some(1), Some(3), Some(6), Some(7)] {
                for backward in [false, true] {
                    v.push(Ask {
                        limit,
                        anchor,
                        backward,
                    });
                }
            }
        }
        v
    }

    #[test]
    fn the_spec_page_passes_and_every_one_change_fails() {
        let s = sess(7);
        for ask in asks() {
            let good = page(&s, 7, ask);
            assert!(ok(&s, ask, 7, &good), "{ask:?} {good}");
            let events = good["events"].as_array().unwrap().clone();
            let mut bad = Vec::new();
            // One event dropped at either end, one added past either end.
            if !events.is_empty() {
                let mut b = good.clone();
                b["events"].as_array_mut().unwrap().remove(0);
                bad.push(b);
                let mut b = good.clone();
                b["events"].as_array_mut().unwrap().pop();
                bad.push(b);
                // A changed event.
                let mut b = good.clone();
                b["events"][0]["params"]["revision"] = json!(99);
                bad.push(b);
                // Newest first.
                if events.len() > 1 {
                    let mut b = good.clone();
                    b["events"].as_array_mut().unwrap().reverse();
                    bad.push(b);
                }
            }
            // The next cursor wrong: null for a cursor, or another one.
            let mut b = good.clone();
            b["nextCursor"] = if good["nextCursor"].is_null() {
                json!(s.cursor(1))
            } else {
                Value::Null
            };
            bad.push(b);
            for b in bad {
                assert!(!ok(&s, ask, 7, &b), "{ask:?} accepted {b}");
            }
        }
    }

    #[test]
    fn events_the_model_has_not_seen_durable_are_judged_by_place_only() {
        // The host read the file with two unsynced events the model has
        // not consumed: a page up to its head of 9 is right.
        let host = sess(9);
        let mut model = sess(7);
        model.head = 7;
        let ask = Ask {
            limit: 4,
            anchor: None,
            backward: true,
        };
        assert!(ok(&model, ask, 7, &page(&host, 9, ask)));
        // A page whose head is behind what was durable at arrival is not.
        assert!(!ok(&model, ask, 8, &page(&host, 7, ask)));
        // Forward to the end: short of the limit, so at the head.
        let fwd = Ask {
            limit: 20,
            anchor: Some(2),
            backward: false,
        };
        assert!(ok(&model, fwd, 7, &page(&host, 9, fwd)));
        assert!(!ok(&model, fwd, 8, &page(&host, 7, fwd)));
        // From the lease holder's memory, events past the model's durable
        // head are unsynced ones: wrong.
        let mut rep = Report::default();
        judge(&mut rep, "t", &model, ask, 7, true, &page(&host, 9, ask));
        assert_eq!(rep.violations.len(), 1);
        let mut rep = Report::default();
        judge(&mut rep, "t", &model, ask, 7, true, &page(&model, 7, ask));
        assert!(rep.violations.is_empty());
    }

    #[test]
    fn asks_are_read_as_the_host_reads_them() {
        let c = Sess::new("s", true).cursor(3);
        assert_eq!(
            Ask::of(
                "s",
                &json!({"limit": 5, "cursor": c, "direction": "backward"})
            ),
            Some(Ask {
                limit: 5,
                anchor: Some(3),
                backward: true
            })
        );
        assert_eq!(
            Ask::of("s", &json!({"limit": 5})).map(|a| (a.anchor, a.backward)),
            Some((None, false))
        );
        for bad in [
            json!({"limit": 0}),
            json!({"limit": 1001}),
            json!({"limit": 5, "direction": "sideways"}),
            json!({"limit": 5, "cursor": "v:other:3"}),
        ] {
            assert_eq!(Ask::of("s", &bad), None, "{bad}");
        }
    }
}
