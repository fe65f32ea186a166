//! Shrinking: minimise a failing run's choice sequence while the run still
//! violates the same property, in the manner of Hypothesis's internal
//! reducer. Every candidate is a choice sequence replayed in the
//! simulator; a candidate that still fails and is smaller replaces the
//! best, normalised to the choices its run actually drew (so a value its
//! decision could not take is clamped, and trailing simplest choices
//! drop off).
//!
//! Smaller means, in order: fewer choices off their simplest option (a
//! fault injected, a command a client chose to issue: what makes the
//! steps of a timeline), a shorter sequence, then a lexicographically
//! smaller one. That order is well founded, so shrinking ends; a budget
//! of runs bounds it besides. (Steps themselves are not the order: a
//! planted bug can make clients retry without end, and a simpler run
//! may retry more.)
//!
//! Passes, repeated until none helps:
//! - truncate: the shortest prefix that still fails (past the end of a
//!   sequence every choice is the simplest: no fault, no more work);
//! - zero by kind: every network, disk, crash, effect, client, placement,
//!   id or fault-mix choice at once (simplify fault choices wholesale);
//! - zero chunks: halves, quarters, ... single choices, from the end;
//! - delete blocks of 1..8 choices that hold a non-simplest one (moves the
//!   rest earlier: drops a whole client action or fault opportunity),
//!   once few choices are left that are not the simplest;
//! - lower each remaining value by binary search (shorter delays, earlier
//!   options, lower fault-mix levels);
//! - when those are stuck: zero one choice and move the later ones to
//!   where their decisions now fall (same kind, same moment), since a
//!   fault removed shifts every choice after it.
//!
//! Fault model: none; the shrinker only edits choices.

use std::collections::{BTreeMap, BTreeSet};

use crate::choice::{self, Choice};
use crate::plan::Plan;
use crate::run::{run_with, RunConfig, RunResult};
use crate::signature::Step;
use crate::tally::Tally;
use crate::trace::Fnv;
use crate::world::Decision;

/// Every decision kind, in the order the zero-by-kind pass tries them.
const KINDS: [Decision; 8] = [
    Decision::Ids,
    Decision::Net,
    Decision::Effect,
    Decision::Disk,
    Decision::Crash,
    Decision::Placement,
    Decision::Client,
    Decision::FaultMix,
];

/// What a decision follows: the kind of the trace entry just before it
/// (an append of which records, a line of which method...) and its rank
/// among the decisions drawn after that entry.
type Anchor = (String, usize);

/// The anchor of decision `j` of run `r`.
fn anchor(r: &RunResult, j: usize) -> Anchor {
    let after = r.choices[j].after_entries;
    let rank = r.choices[..j]
        .iter()
        .rev()
        .take_while(|c| c.after_entries == after)
        .count();
    let ctx = after
        .checked_sub(1)
        .and_then(|k| r.trace.entries.get(k))
        .map(context)
        .unwrap_or_default();
    (ctx, rank)
}

/// A trace entry's kind, without its particulars (times, ids, sizes).
fn context(e: &crate::trace::Entry) -> String {
    use crate::trace::What;
    let method = |line: &str| -> String {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        match (v["method"].as_str(), v.get("id").is_some()) {
            (Some(m), _) => m.to_string(),
            (None, true) => "answer".to_string(),
            (None, false) => String::new(),
        }
    };
    let name = format!("{} ", e.actor);
    match &e.what {
        What::Append { bytes, .. } => {
            let recs: Vec<String> = msp::core::record::decode_log(bytes)
                .map(|d| {
                    d.records
                        .iter()
                        .map(|(r, _)| crate::trace::record_summary(r))
                        .collect()
                })
                .unwrap_or_default();
            // Record kinds and methods, not ids.
            let kinds: Vec<String> = recs
                .iter()
                .map(|r| r.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
                .collect();
            format!("{name}append {}", kinds.join(","))
        }
        What::ClientSend { line, .. } => format!("{name}send {}", method(line)),
        What::ClientRecv { line, .. } => format!("{name}recv {}", method(line)),
        What::HostRecv { line, .. } => format!("{name}hrecv {}", method(line)),
        What::HostSend { line, .. } => format!("{name}hsend {}", method(line)),
        other => {
            let d = format!("{other:?}");
            format!("{name}{}", d.split([' ', '(', '{']).next().unwrap_or(""))
        }
    }
}

/// Puts each of `later` (old choices and their anchors, in order) after
/// `prefix`, at the decision of `layout` (a run of `prefix`) that follows
/// the same kind of trace entry at the same rank, else at the first of
/// its kind at or after its old time; `None` if one finds no place.
fn place(mut cand: Vec<u64>, later: &[(Choice, Anchor)], layout: &RunResult) -> Option<Vec<u64>> {
    for (c, a) in later {
        let from = cand.len();
        let same = |x: &Choice| x.kind == c.kind && (x.options == 2) == (c.options == 2);
        let p = (from..layout.choices.len())
            .find(|p| same(&layout.choices[*p]) && anchor(layout, *p) == *a)
            .or_else(|| {
                (from..layout.choices.len())
                    .find(|p| same(&layout.choices[*p]) && layout.choices[*p].at_ms >= c.at_ms)
            })?;
        cand.resize(p, 0);
        let o = layout.choices[p].options;
        cand.push(if o == c.options {
            c.value
        } else {
            ((c.value as u128 * o as u128) / c.options as u128) as u64
        });
    }
    Some(cand)
}

/// The deleting pass waits until at most this many choices are not the
/// simplest (it costs four runs per such choice).
const DELETE_MAX: usize = 80;

/// The chunk-zeroing pass stops at chunks of this fraction of the
/// choices off their simplest (each level of chunks costs about one run
/// per such choice once the chunks are small).
const CHUNK_LEVELS: usize = 64;

/// How many runs a long pass makes between two runs of the cheap passes
/// ([`Shrinker::checkpoint`]).
const CHEAP_EVERY: u64 = 200;

/// The most later choices the realigning pass moves (each costs a run).
const REALIGN_MAX: usize = 24;

/// What a shrunk run must still do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Goal {
    /// Violate this property.
    Violates(String),
    /// Reach these events, in order, holding every property (a fixed
    /// bug's triggering events, on today's runtime).
    Reaches(Vec<Step>),
}

impl Goal {
    /// Whether run `r` meets the goal.
    pub fn met(&self, r: &RunResult) -> bool {
        match self {
            Goal::Violates(p) => r.violations.iter().any(|v| v.property == p),
            Goal::Reaches(sig) => {
                r.violations.is_empty() && crate::signature::reach(&r.trace, sig).is_ok()
            }
        }
    }
}

impl std::fmt::Display for Goal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Goal::Violates(p) => write!(f, "violate {p}"),
            Goal::Reaches(sig) => {
                let steps: Vec<String> = sig.iter().map(|s| s.to_string()).collect();
                write!(f, "reach \"{}\" holding every property", steps.join("; "))
            }
        }
    }
}

/// The outcome of a shrink.
#[derive(Debug, Clone)]
pub struct Shrunk {
    /// The run it started from.
    pub before: Tally,
    /// The shrunk run.
    pub after: Tally,
    /// The shrunk choice sequence.
    pub values: Vec<u64>,
    /// The shrunk run (it meets the goal).
    pub result: RunResult,
    /// Candidates replayed.
    pub runs_count: u64,
    /// The budget ran out before the passes were done.
    pub budget_exhausted: bool,
}

struct Best {
    values: Vec<u64>,
    choices: Vec<Choice>,
    tally: Tally,
    result: RunResult,
}

impl Best {
    /// Smaller is simpler: fewer choices off their simplest option (each
    /// fault injected, each command a client chose to issue is one),
    /// then a shorter sequence, then a lexicographically smaller one.
    fn key(&self) -> (usize, usize, &[u64]) {
        (
            choice::nonzero_count(&self.values),
            self.values.len(),
            &self.values,
        )
    }
}

/// The shrinker's state: what it replays, what must still fail, the best
/// so far.
struct Shrinker<'a> {
    cfg: RunConfig,
    plan: Plan,
    goal: Goal,
    best: Best,
    tried: BTreeSet<u64>,
    runs_count: u64,
    /// How many times `best` was replaced by a simpler failing run (its
    /// key only ever falls, so a change of this count is a change of it).
    improvements: u64,
    max_runs: u64,
    progress: &'a mut dyn FnMut(u64, &Tally),
}

/// Shrinks `start`, a choice sequence whose run of `cfg` under `plan`
/// (its workload and mix; its choices are replaced) violates `property`.
/// Replays at most `max_runs` candidates; `progress` hears of each
/// improvement (runs so far, the new best). Errs if `start` does not
/// violate `property`.
pub fn shrink(
    cfg: &RunConfig,
    plan: &Plan,
    property: &str,
    start: Vec<u64>,
    max_runs: u64,
    progress: &mut dyn FnMut(u64, &Tally),
) -> Result<Shrunk, String> {
    shrink_to(
        cfg,
        plan,
        &Goal::Violates(property.to_string()),
        start,
        max_runs,
        progress,
    )
}

/// Shrinks `start` while its run still meets `goal` (see [`shrink`]).
pub fn shrink_to(
    cfg: &RunConfig,
    plan: &Plan,
    goal: &Goal,
    start: Vec<u64>,
    max_runs: u64,
    progress: &mut dyn FnMut(u64, &Tally),
) -> Result<Shrunk, String> {
    let base = Plan {
        choices: None,
        ..plan.clone()
    };
    let first = run_with(
        cfg,
        &Plan {
            choices: Some(start),
            ..base.clone()
        },
        None,
    );
    if !goal.met(&first) {
        return Err(format!(
            "the run to shrink does not {goal} (it violates: {})",
            names(&first)
        ));
    }
    let before = Tally::of(&first);
    let mut s = Shrinker {
        cfg: cfg.clone(),
        plan: base,
        goal: goal.clone(),
        best: Best {
            values: choice::values(&first.choices),
            choices: first.choices.clone(),
            tally: before,
            result: first,
        },
        tried: BTreeSet::new(),
        improvements: 0,
        runs_count: 1,
        max_runs,
        progress,
    };
    loop {
        let round_start = s.best.values.clone();
        s.zero_kinds();
        s.truncate();
        s.zero_classes();
        s.zero_chunks();
        s.delete_blocks();
        s.lower();
        if s.out_of_budget() {
            break;
        }
        if s.best.values != round_start {
            continue;
        }
        // The cheap passes are stuck: the costly one.
        if !s.zero_and_realign() || s.out_of_budget() {
            break;
        }
    }
    Ok(Shrunk {
        before,
        after: s.best.tally,
        values: s.best.values.clone(),
        budget_exhausted: s.out_of_budget(),
        runs_count: s.runs_count,
        result: s.best.result,
    })
}

/// The properties a run violates, for messages.
fn names(r: &RunResult) -> String {
    let mut v: Vec<&str> = r.violations.iter().map(|v| v.property).collect();
    v.dedup();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

impl Shrinker<'_> {
    fn out_of_budget(&self) -> bool {
        self.runs_count >= self.max_runs
    }

    /// Replays `values`; keeps it if it still fails and is smaller.
    fn consider(&mut self, mut values: Vec<u64>) -> bool {
        choice::trim(&mut values);
        if self.out_of_budget() || values == self.best.values {
            return false;
        }
        let mut h = Fnv::new();
        for v in &values {
            h.u64(*v);
        }
        if !self.tried.insert(h.0) {
            return false;
        }
        self.runs_count += 1;
        let plan = Plan {
            choices: Some(values),
            ..self.plan.clone()
        };
        let r = run_with(&self.cfg, &plan, None);
        if !self.goal.met(&r) {
            return false;
        }
        let cand = Best {
            values: choice::values(&r.choices),
            choices: r.choices.clone(),
            tally: Tally::of(&r),
            result: r,
        };
        if cand.key() >= self.best.key() {
            return false;
        }
        self.best = cand;
        self.improvements += 1;
        (self.progress)(self.runs_count, &self.best.tally);
        true
    }

    /// Inside a long pass: every `CHEAP_EVERY` runs, when the pass has
    /// made progress since the last time, the cheap passes run (zero a
    /// whole kind, truncate: a few dozen runs). What a long pass zeroes
    /// choice by choice often lets a whole kind go, and a sequence
    /// without it be cut short, long before the pass is through its
    /// hundreds of choices; waiting for its end spent the run budget.
    /// `mark`: the run count and improvement count of the last time.
    fn checkpoint(&mut self, mark: &mut (u64, u64)) {
        if self.runs_count < mark.0 + CHEAP_EVERY {
            return;
        }
        if self.improvements != mark.1 {
            self.zero_kinds();
            self.truncate();
        }
        *mark = (self.runs_count, self.improvements);
    }

    /// The shortest prefix that still fails (binary search; a prefix's
    /// failing is not monotone in its length, so this is a heuristic the
    /// other passes make up for).
    fn truncate(&mut self) {
        let (mut lo, mut hi) = (0, self.best.values.len());
        while lo < hi && !self.out_of_budget() {
            let mid = (lo + hi) / 2;
            let cand = self.best.values[..mid].to_vec();
            if self.consider(cand) {
                hi = self.best.values.len().min(mid);
            } else {
                lo = mid + 1;
            }
        }
    }

    /// Every choice of one kind at its simplest, kind by kind.
    fn zero_kinds(&mut self) {
        for kind in KINDS {
            let mut cand = self.best.values.clone();
            let mut changed = false;
            for (i, c) in self.best.choices.iter().enumerate().take(cand.len()) {
                if c.kind == kind && cand[i] != 0 {
                    cand[i] = 0;
                    changed = true;
                }
            }
            if changed {
                self.consider(cand);
            }
        }
    }

    /// Zeroes every choice of one class (a kind and a number of options:
    /// every client wake-up jitter, every network yes/no...) at once, the
    /// most numerous class first, and moves the choices left after the
    /// first zeroed one to where their decisions now fall (one layout run,
    /// then the candidate).
    fn zero_classes(&mut self) {
        let mut classes: BTreeMap<(Decision, u64), usize> = BTreeMap::new();
        for (i, c) in self
            .best
            .choices
            .iter()
            .enumerate()
            .take(self.best.values.len())
        {
            if self.best.values[i] != 0 {
                *classes.entry((c.kind, c.options)).or_insert(0) += 1;
            }
        }
        let mut order: Vec<((Decision, u64), usize)> = classes.into_iter().collect();
        order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for ((kind, options), _) in order {
            if self.out_of_budget() {
                return;
            }
            let zeroed: Vec<usize> = (0..self.best.values.len())
                .filter(|i| {
                    let c = &self.best.choices[*i];
                    self.best.values[*i] != 0 && c.kind == kind && c.options == options
                })
                .collect();
            let Some(&first) = zeroed.first() else {
                continue;
            };
            let mut base = self.best.values.clone();
            for i in &zeroed {
                base[*i] = 0;
            }
            if self.consider(base.clone()) {
                continue;
            }
            let later: Vec<(Choice, Anchor)> = (first + 1..base.len())
                .filter(|j| base[*j] != 0)
                .map(|j| (self.best.choices[j], anchor(&self.best.result, j)))
                .collect();
            let prefix = base[..=first].to_vec();
            let layout = self.layout(&prefix);
            if let Some(cand) = place(prefix, &later, &layout) {
                self.consider(cand);
            }
        }
    }

    /// Zeroes chunks, largest first: halves, quarters, ... single
    /// choices, each level from the end, skipping chunks already at their
    /// simplest (the way delta debugging narrows down).
    fn zero_chunks(&mut self) -> bool {
        let start_values = self.best.values.clone();
        let mut mark = (self.runs_count, self.improvements);
        let mut size = self.best.values.len().div_ceil(2).max(1);
        loop {
            let mut end = self.best.values.len();
            while end > 0 && !self.out_of_budget() {
                self.checkpoint(&mut mark);
                let len = self.best.values.len();
                end = end.min(len);
                let start = end.saturating_sub(size);
                if self.best.values[start..end].iter().any(|v| *v != 0) {
                    let mut cand = self.best.values.clone();
                    cand[start..end].iter_mut().for_each(|v| *v = 0);
                    self.consider(cand);
                }
                end = start;
            }
            // Chunks smaller than a 64th of the choices still off their
            // simplest wait for a later round, when fewer are.
            let finest = (choice::nonzero_count(&self.best.values) / CHUNK_LEVELS).max(1);
            if size <= finest || self.out_of_budget() {
                return self.best.values != start_values;
            }
            size = size.div_ceil(2);
        }
    }

    /// Deletes blocks of 8, 4, 2 and 1 choices holding a non-simplest
    /// one, from the end.
    fn delete_blocks(&mut self) -> bool {
        if choice::nonzero_count(&self.best.values) > DELETE_MAX {
            return false;
        }
        let start_values = self.best.values.clone();
        for k in [8, 4, 2, 1] {
            let mut i = self.best.values.len();
            while i > 0 && !self.out_of_budget() {
                i -= 1;
                let len = self.best.values.len();
                if i >= len {
                    i = len;
                    continue;
                }
                let hi = (i + k).min(len);
                if self.best.values[i..hi].iter().all(|v| *v == 0) {
                    continue;
                }
                let mut cand = self.best.values.clone();
                cand.drain(i..hi);
                self.consider(cand);
            }
        }
        self.best.values != start_values
    }

    /// A run of `values` (not judged).
    fn layout(&mut self, values: &[u64]) -> RunResult {
        self.runs_count += 1;
        let plan = Plan {
            choices: Some(values.to_vec()),
            ..self.plan.clone()
        };
        run_with(&self.cfg, &plan, None)
    }

    /// Zeroes one non-simplest choice and moves every later one to where
    /// its decision now falls: a removed crash no longer draws its power
    /// loss, tear and restart choices, and its host draws more steps, so
    /// the later faults must move to stay at the moments they struck.
    /// Each later choice goes to the first decision of its kind that
    /// follows the same kind of trace entry (an append of the same
    /// records, a line of the same method) as the next of the same rank,
    /// else to the first of its kind at or after its old time.
    fn zero_and_realign(&mut self) -> bool {
        let start_values = self.best.values.clone();
        let mut i = self.best.values.len();
        while i > 0 && !self.out_of_budget() {
            i -= 1;
            if i >= self.best.values.len() || self.best.values[i] == 0 {
                continue;
            }
            let old = &self.best.result;
            let later: Vec<(Choice, Anchor)> = (i + 1..self.best.values.len())
                .filter(|j| self.best.choices[*j].value != 0)
                .map(|j| (self.best.choices[j], anchor(old, j)))
                .collect();
            if later.is_empty() || later.len() > REALIGN_MAX {
                continue;
            }
            let mut cand: Vec<u64> = self.best.values[..i].to_vec();
            cand.push(0);
            let mut placed = true;
            for (c, a) in &later {
                if self.out_of_budget() {
                    return self.best.values != start_values;
                }
                let r = self.layout(&cand);
                let from = cand.len();
                let same = |x: &Choice| x.kind == c.kind && (x.options == 2) == (c.options == 2);
                let p = (from..r.choices.len())
                    .find(|p| same(&r.choices[*p]) && anchor(&r, *p) == *a)
                    .or_else(|| {
                        (from..r.choices.len())
                            .find(|p| same(&r.choices[*p]) && r.choices[*p].at_ms >= c.at_ms)
                    });
                let Some(p) = p else {
                    placed = false;
                    break;
                };
                cand.resize(p, 0);
                // A range whose bounds moved (a tear in a write of another
                // length) keeps its place in the range.
                let o = r.choices[p].options;
                cand.push(if o == c.options {
                    c.value
                } else {
                    ((c.value as u128 * o as u128) / c.options as u128) as u64
                });
            }
            if placed {
                self.consider(cand);
            }
        }
        self.best.values != start_values
    }

    /// Lowers each non-simplest choice as far as it still fails.
    fn lower(&mut self) -> bool {
        let start_values = self.best.values.clone();
        let mut mark = (self.runs_count, self.improvements);
        let mut i = self.best.values.len();
        while i > 0 && !self.out_of_budget() {
            self.checkpoint(&mut mark);
            i -= 1;
            if i >= self.best.values.len() {
                continue;
            }
            let v = self.best.values[i];
            if v <= 1 {
                continue;
            }
            let (mut lo, mut hi) = (0u64, v);
            while lo < hi && !self.out_of_budget() {
                let mid = lo + (hi - lo) / 2;
                let mut cand = self.best.values.clone();
                if i >= cand.len() {
                    break;
                }
                cand[i] = mid;
                if self.consider(cand) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
        }
        self.best.values != start_values
    }
}
