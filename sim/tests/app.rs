//! Application-level scenarios (issue 12 item 6): clean without bugs, each
//! planted application bug caught, and a seed replays exactly.

use msp_sim::app::{run_app, AppBug, AppScenario};

fn sweep(s: AppScenario, seeds: std::ops::Range<u64>, bug: Option<AppBug>) -> Vec<(u64, String)> {
    seeds
        .flat_map(|seed| {
            let r = run_app(s, seed, bug);
            r.violations
                .into_iter()
                .map(move |v| (seed, format!("{}: {}", v.property, v.detail)))
        })
        .collect()
}

#[test]
fn every_app_scenario_is_clean_without_bugs() {
    for s in AppScenario::ALL {
        let bad = sweep(s, 0..12, None);
        assert!(bad.is_empty(), "{}: {bad:#?}", s.name());
    }
}

#[test]
fn every_planted_app_bug_is_caught_under_mixed_app() {
    for bug in AppBug::ALL {
        let mut found = None;
        for seed in 0..60 {
            let r = run_app(AppScenario::MixedApp, seed, Some(bug));
            if let Some(v) = r.violations.first() {
                found = Some((seed, v.property));
                break;
            }
        }
        let (seed, property) = found.unwrap_or_else(|| panic!("{} slipped through", bug.name()));
        let want = match bug {
            AppBug::ClientNewIdOnRetry => "one-command-per-request",
            AppBug::RetryUnkeyedEffect => "unkeyed-at-most-once",
            AppBug::GateCheckThenInsert => "one-command-per-request",
        };
        assert_eq!(property, want, "{} at seed {seed}", bug.name());
    }
}

#[test]
fn an_app_seed_replays_exactly_and_runs_do_work() {
    for s in AppScenario::ALL {
        let a = run_app(s, 7, None);
        let b = run_app(s, 7, None);
        assert_eq!(a.hash, b.hash, "{}", s.name());
        assert_eq!(a.faults, b.faults);
        assert_ne!(
            a.hash,
            run_app(s, 8, None).hash,
            "{}: seeds differ",
            s.name()
        );
        assert!(a.answered_count > 0, "{}: nothing answered", s.name());
    }
}

#[test]
fn app_sweeps_lose_duplicate_and_reorder_lines_both_ways() {
    let mut seen = std::collections::BTreeMap::new();
    for seed in 0..20 {
        for (f, n) in run_app(AppScenario::MixedApp, seed, None).faults {
            *seen.entry(f).or_insert(0u64) += n;
        }
    }
    for f in [
        "request line lost",
        "request line duplicated",
        "request lines reordered",
        "answer line lost",
        "answer line duplicated",
        "answer lines reordered",
    ] {
        assert!(
            seen.get(f).copied().unwrap_or(0) > 0,
            "{f} never injected: {seen:?}"
        );
    }
}
