//! `msp-sim bench`: runs [`msp_sim::bench`] with this process's meter
//! (process CPU time and the counting global allocator of
//! [`crate::alloc`]) and prints the report.
//!
//! Each scenario runs the `--seeds` range (default 0..64) with its own
//! workload; the growth runs (of `--scenario`, default mixed) run the
//! first eighth of that range (at least one seed; the same seeds at
//! every N) at N, 4N and 16N commands per client (`--commands N`, default
//! 16: 16, 64, 256). The whole default bench takes about a minute on one
//! core of a 2-core KVM guest.

use std::process::ExitCode;
use std::time::Instant;

use msp_sim::bench::{growth_seeds, measure, Meter, Reading, Report, GROWTH_MULTIPLES};
use msp_sim::workload::Scenario;

use super::usage;

/// `--commands`' default: growth at 16, 64 and 256 commands per client.
pub const DEFAULT_COMMANDS: u32 = 16;
/// `--seeds`' default.
pub const DEFAULT_SEEDS: &str = "0..64";

/// `bench`'s arguments.
pub struct Args {
    /// One scenario, or every one.
    pub scenario: Option<Scenario>,
    /// The growth runs' base N.
    pub commands: u32,
    /// The seed range A..B.
    pub seeds: String,
    /// Print JSON.
    pub json: bool,
}

/// This process's meter: CPU time from the process CPU clock where there
/// is one (wall time otherwise: the bench runs one thread, so the two
/// agree on an idle machine), allocations from the global allocator.
struct ProcessMeter {
    origin: Instant,
}

impl Meter for ProcessMeter {
    fn read(&self) -> Reading {
        let wall_ns = self.origin.elapsed().as_nanos() as u64;
        let (allocations, bytes) = crate::alloc::counts();
        Reading {
            cpu_ns: process_cpu_ns().unwrap_or(wall_ns),
            wall_ns,
            allocations,
            bytes,
        }
    }

    fn cpu_source(&self) -> &str {
        if process_cpu_ns().is_some() {
            "process CPU time (clock_gettime CLOCK_PROCESS_CPUTIME_ID)"
        } else {
            "wall time (no process CPU clock on this platform; one thread)"
        }
    }
}

/// The process's CPU time in ns (every thread's; the bench runs one).
#[cfg(unix)]
fn process_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// No process CPU clock here: the meter falls back to wall time.
#[cfg(not(unix))]
fn process_cpu_ns() -> Option<u64> {
    None
}

/// Runs the subcommand; its exit code (0 unless the arguments are bad:
/// timings are reported, never judged).
pub fn main(a: Args) -> ExitCode {
    let Some(range) = super::seed_range(&a.seeds) else {
        return usage("--seeds wants A..B with A < B");
    };
    if a.commands == 0 {
        return usage("--commands wants N >= 1");
    }
    if GROWTH_MULTIPLES
        .iter()
        .any(|m| a.commands.checked_mul(*m).is_none())
    {
        return usage("--commands is too large");
    }
    crate::alloc::start_counting();
    let meter = ProcessMeter {
        origin: Instant::now(),
    };
    let scenarios: Vec<Scenario> = match a.scenario {
        Some(s) => vec![s],
        None => Scenario::ALL.to_vec(),
    };
    let mut report = Report {
        cpu_source: meter.cpu_source().to_string(),
        scenarios: Vec::new(),
        growth: Vec::new(),
    };
    for s in scenarios {
        eprintln!("bench: {s} seeds {}..{}", range.start, range.end);
        report
            .scenarios
            .push(measure(s, range.clone(), None, &meter));
    }
    let growth_scenario = a.scenario.unwrap_or(Scenario::Mixed);
    let g = growth_seeds(range);
    for m in GROWTH_MULTIPLES {
        let n = a.commands * m;
        eprintln!(
            "bench: {growth_scenario} N={n} seeds {}..{}",
            g.start, g.end
        );
        report
            .growth
            .push(measure(growth_scenario, g.clone(), Some(n), &meter));
    }
    if a.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.render());
    }
    ExitCode::SUCCESS
}
