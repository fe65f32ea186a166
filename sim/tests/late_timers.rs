//! Late timers (`late-timer`, draws version 12): a host's timer may fire
//! after the deadline it was armed for, as `msp serve`'s does when its
//! driver thread is busy, and what fell due meanwhile (an idle unload)
//! still happens at that late wake-up.

use msp_sim::faults::LATE_TIMER_MAX_MS;
use msp_sim::run::{run, RunConfig};
use msp_sim::trace::{Actor, What};
use msp_sim::workload::Scenario;

#[test]
fn a_late_timer_fires_within_its_bound_and_still_unloads_what_fell_due() {
    let (mut late, mut long, mut unloads_late) = (0u64, 0u64, 0u64);
    for seed in 0..40 {
        let r = run(&RunConfig {
            scenario: Scenario::LeaseHandover,
            seed,
            bug: None,
            client: Default::default(),
        });
        let entries = &r.trace.entries;
        let on = r.mix.contains("late-timer");
        for (i, e) in entries.iter().enumerate() {
            let (
                Actor::Host(h),
                What::TimerLate {
                    inc,
                    deadline_ms,
                    ms,
                },
            ) = (&e.actor, &e.what)
            else {
                continue;
            };
            assert!(
                on,
                "seed {seed}: a late timer without the fault ({})",
                r.mix
            );
            assert!(
                (1..=LATE_TIMER_MAX_MS).contains(ms),
                "seed {seed}: {ms} ms late"
            );
            assert!(e.at_ms <= *deadline_ms, "armed before its deadline");
            late += 1;
            if *ms > 10 {
                long += 1;
            }
            // An idle unload written at the late wake-up itself: the host
            // met a deadline already past and still acted on it.
            let fired = deadline_ms + ms;
            if entries[i + 1..]
                .iter()
                .take_while(|x| x.at_ms <= fired)
                .any(|x| {
                    x.at_ms == fired
                        && x.actor == Actor::Host(*h)
                        && matches!(&x.what, What::Append { inc: i2, bytes, .. }
                            if i2 == inc && contains(bytes, br#""reason":"idle""#))
                })
            {
                unloads_late += 1;
            }
        }
    }
    assert!(late > 300, "timers fired late: {late}");
    assert!(long > 10, "some by more than 10 ms: {long} of {late}");
    assert!(
        unloads_late > 5,
        "idle unloads written at a late wake-up: {unloads_late}"
    );
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
