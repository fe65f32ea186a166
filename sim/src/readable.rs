//! Readable failures: numbered trace entries, short names for ids (a
//! legend: `s1` a session, `c7` a command, whose turn is `c7` too, `i3`
//! an item, `a2` an approval...), a filter to one session or command
//! (`--focus`), the slice of a trace that matters to a violation, and a
//! condensed timeline of a run (what a person would tell: commands,
//! answers, faults, crashes).
//!
//! Fault model: none; this module only renders.

use std::collections::BTreeMap;

use msp::core::record::{decode_log, Record};

use crate::oracle::Violation;
use crate::trace::{Entry, Trace, What};

/// Short names for the UUIDs of a trace, by first appearance.
#[derive(Debug, Clone, Default)]
pub struct Legend {
    /// Full id -> name.
    names: BTreeMap<String, String>,
    /// Last 8 characters -> full id (the trace's own short form).
    tails: BTreeMap<String, String>,
    /// Names in order of first appearance.
    order: Vec<(String, String)>,
    counters: BTreeMap<char, u64>,
}

/// Whether `b` is a lowercase or uppercase hex digit.
fn hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// The byte ranges of every UUID (8-4-4-4-12 hex) in `text`.
pub fn uuid_spans(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 36 <= b.len() {
        let ok = (0..36).all(|k| match k {
            8 | 13 | 18 | 23 => b[i + k] == b'-',
            _ => hex(b[i + k]),
        });
        let bounded = (i == 0 || !hex(b[i - 1])) && (i + 36 == b.len() || !hex(b[i + 36]));
        if ok && bounded {
            out.push((i, i + 36));
            i += 36;
        } else {
            i += 1;
        }
    }
    out
}

/// The name prefix of an id found right after `before` (its JSON key).
fn role(before: &str) -> char {
    let t = before.trim_end_matches("v:").trim_end_matches('"');
    let t = t.trim_end_matches(':').trim_end_matches('"');
    let key = t.rsplit('"').next().unwrap_or("");
    match key {
        "sessionId" | "viewCursor" | "cursor" => 's',
        "commandId" => 'c',
        "turnId" | "expectedTurnId" => 't',
        "itemId" => 'i',
        "approvalId" | "reviewId" => 'a',
        "taskId" => 'k',
        _ => 'u',
    }
}

impl Legend {
    /// Names every UUID of `trace` in order of first appearance.
    pub fn of(trace: &Trace) -> Legend {
        let mut l = Legend::default();
        for e in &trace.entries {
            match &e.what {
                What::ClientSend { line, .. }
                | What::ClientRecv { line, .. }
                | What::HostRecv { line, .. }
                | What::HostSend { line, .. } => l.scan(line),
                What::Append { session, bytes, .. } => {
                    l.add(session, 's');
                    if let Ok(d) = decode_log(bytes) {
                        for (r, _) in &d.records {
                            if let Record::Received { command_id, .. } = r {
                                l.add(command_id, 'c');
                            }
                        }
                    }
                }
                What::Note(n) => l.scan(n),
                w => {
                    if let Some(session) = storage_session(w) {
                        l.add(session, 's');
                    }
                }
            }
        }
        l
    }

    fn scan(&mut self, text: &str) {
        for (a, b) in uuid_spans(text) {
            self.add(&text[a..b], role(&text[..a]));
        }
    }

    fn add(&mut self, id: &str, prefix: char) {
        if uuid_spans(id).len() != 1 || id.len() != 36 {
            return;
        }
        let id = id.to_ascii_lowercase();
        if self.names.contains_key(&id) {
            return;
        }
        let n = self.counters.entry(prefix).or_insert(0);
        *n += 1;
        let name = format!("{prefix}{n}");
        let tail = id[id.len() - 8..].to_string();
        match self.tails.get(&tail) {
            // Two ids with one tail: the short form is ambiguous; keep
            // neither.
            Some(other) if *other != id => {
                self.tails.insert(tail, String::new());
            }
            _ => {
                self.tails.insert(tail, id.clone());
            }
        }
        self.names.insert(id.clone(), name.clone());
        self.order.push((name, id));
    }

    /// `text` with every known id (full, or the trace's 8-character short
    /// form) replaced by its name.
    pub fn apply(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for (a, b) in uuid_spans(text) {
            out.push_str(&text[last..a]);
            match self.names.get(&text[a..b].to_ascii_lowercase()) {
                Some(n) => out.push_str(n),
                None => out.push_str(&text[a..b]),
            }
            last = b;
        }
        out.push_str(&text[last..]);
        self.apply_tails(&out)
    }

    fn apply_tails(&self, text: &str) -> String {
        let b = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        let mut last = 0;
        while i + 8 <= b.len() {
            let word = (0..8).all(|k| hex(b[i + k]))
                && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
                && (i + 8 == b.len() || !b[i + 8].is_ascii_alphanumeric());
            if word {
                let tail = text[i..i + 8].to_ascii_lowercase();
                if let Some(name) = self
                    .tails
                    .get(&tail)
                    .filter(|id| !id.is_empty())
                    .and_then(|id| self.names.get(id))
                {
                    out.push_str(&text[last..i]);
                    out.push_str(name);
                    i += 8;
                    last = i;
                    continue;
                }
            }
            i += 1;
        }
        out.push_str(&text[last..]);
        out
    }

    /// The full id `key` names: a name (`s1`), a full id, or its last 8
    /// characters.
    pub fn resolve(&self, key: &str) -> Option<String> {
        let k = key.to_ascii_lowercase();
        if self.names.contains_key(&k) {
            return Some(k);
        }
        if let Some((_, id)) = self.order.iter().find(|(n, _)| *n == k) {
            return Some(id.clone());
        }
        self.tails.get(&k).filter(|id| !id.is_empty()).cloned()
    }

    /// `name = id` lines for the names that occur in `texts`.
    pub fn used_in(&self, texts: &[String]) -> Vec<String> {
        self.order
            .iter()
            .filter(|(n, _)| {
                texts.iter().any(|t| {
                    t.match_indices(n.as_str()).any(|(i, _)| {
                        let after = t.as_bytes().get(i + n.len());
                        let before = i.checked_sub(1).map(|j| t.as_bytes()[j]);
                        !after.is_some_and(|b| b.is_ascii_alphanumeric())
                            && !before.is_some_and(|b| b.is_ascii_alphanumeric())
                    })
                })
            })
            .map(|(n, id)| format!("{n:<4} = {id}"))
            .collect()
    }

    /// `name = id` lines, in order of first appearance.
    pub fn lines(&self) -> Vec<String> {
        self.order
            .iter()
            .map(|(n, id)| format!("{n:<4} = {id}"))
            .collect()
    }
}

/// Trace entry `i`, numbered, with ids named by `legend`.
pub fn line(trace: &Trace, i: usize, legend: &Legend) -> String {
    legend.apply(&format!("#{i:<5} {}", trace.entries[i]))
}

/// Whether entry `e` concerns the id `id` (a full UUID, lowercase): a line
/// carrying it, a session's file or lease, a record naming it.
pub fn mentions(e: &Entry, id: &str) -> bool {
    let has = |s: &str| s.to_ascii_lowercase().contains(id);
    match &e.what {
        What::ClientSend { line, .. }
        | What::ClientRecv { line, .. }
        | What::HostRecv { line, .. }
        | What::HostSend { line, .. } => has(line),
        What::Append { session, bytes, .. } => {
            has(session)
                || decode_log(bytes).is_ok_and(|d| {
                    d.records.iter().any(|(r, _)| match r {
                        Record::Received { command_id, .. }
                        | Record::Settled { command_id, .. } => has(command_id),
                        Record::Event { params, cause, .. } => {
                            has(params.raw().get()) || cause.as_deref().is_some_and(has)
                        }
                        _ => false,
                    })
                })
        }
        What::Effect { key, .. } | What::EffectDone { key, .. } => has(key),
        What::Note(n) => has(n),
        w => storage_session(w).is_some_and(has),
    }
}

/// Entries every filtered view keeps: phases, host starts and crashes,
/// power losses.
fn structural(e: &Entry) -> bool {
    matches!(
        e.what,
        What::Phase(_)
            | What::HostStart { .. }
            | What::HostCrash { .. }
            | What::HostShutdown { .. }
            | What::HostExit { .. }
            | What::PowerLoss
    )
}

/// Indices of the entries about `id` (a name, full id or short form),
/// with the structural ones between; `None` if `id` names nothing.
pub fn focus(trace: &Trace, legend: &Legend, id: &str) -> Option<Vec<usize>> {
    let full = legend.resolve(id)?;
    Some(
        (0..trace.entries.len())
            .filter(|i| {
                let e = &trace.entries[*i];
                structural(e) || mentions(e, &full)
            })
            .collect(),
    )
}

/// The ids a violation is about: those in its explanation and in the
/// entry where it shows.
pub fn violation_ids(trace: &Trace, v: &Violation) -> Vec<String> {
    let mut ids: Vec<String> = uuid_spans(&v.detail)
        .into_iter()
        .map(|(a, b)| v.detail[a..b].to_ascii_lowercase())
        .collect();
    if let Some(e) = v.at_index.and_then(|i| trace.entries.get(i)) {
        let text = format!("{e}");
        let full = match &e.what {
            What::ClientSend { line, .. }
            | What::ClientRecv { line, .. }
            | What::HostRecv { line, .. }
            | What::HostSend { line, .. } => line.clone(),
            _ => text,
        };
        for (a, b) in uuid_spans(&full) {
            ids.push(full[a..b].to_ascii_lowercase());
        }
    }
    ids.sort();
    ids.dedup();
    ids
}

/// The slice of `trace` that matters to `v`, numbered and named: from the
/// earliest entry about the ids it concerns (the command or session, its
/// first intake, the load or crash that set it up) to where it shows, with
/// the crashes and restarts in between; at most `max_lines` (the first
/// quarter and the end kept, the middle elided). Without ids, the last
/// `max_lines` entries before it.
pub fn report(trace: &Trace, legend: &Legend, v: &Violation, max_lines: usize) -> Vec<String> {
    let end = v
        .at_index
        .unwrap_or(trace.entries.len().saturating_sub(1))
        .min(trace.entries.len().saturating_sub(1));
    let ids = violation_ids(trace, v);
    let mut idx: Vec<usize> = if ids.is_empty() {
        (end.saturating_sub(max_lines.saturating_sub(1))..=end).collect()
    } else {
        let first = (0..=end).find(|i| ids.iter().any(|id| mentions(&trace.entries[*i], id)));
        match first {
            None => (end.saturating_sub(max_lines.saturating_sub(1))..=end).collect(),
            Some(f) => (f..=end)
                .filter(|i| {
                    let e = &trace.entries[*i];
                    *i == end || structural(e) || ids.iter().any(|id| mentions(e, id))
                })
                .collect(),
        }
    };
    if idx.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if idx.len() > max_lines && max_lines >= 4 {
        let head = max_lines / 4;
        let tail = max_lines - head - 1;
        let elided = idx.len() - head - tail;
        let rest = idx.split_off(head);
        for i in &idx {
            out.push(line(trace, *i, legend));
        }
        out.push(format!("... {elided} entries about these ids elided ..."));
        for i in &rest[rest.len() - tail..] {
            out.push(line(trace, *i, legend));
        }
    } else {
        for i in idx {
            out.push(line(trace, i, legend));
        }
    }
    out
}

/// The condensed timeline of a run, numbered and named: what a person
/// would tell of it. Every command a client sends (a request carrying a
/// `commandId`) and the answer it gets, every fault, crash, power loss,
/// restart, truncation, refused lease, provider call and client note,
/// every intake record appended and every sync, and the entries where
/// `violations` show; handshakes, reads, events and other appends are
/// left out.
pub fn timeline(trace: &Trace, legend: &Legend, violations: &[Violation]) -> Vec<String> {
    let cited: Vec<usize> = violations.iter().filter_map(|v| v.at_index).collect();
    // (link, rpc id) of the commands clients sent.
    let mut commands: BTreeMap<(u64, String), ()> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in trace.entries.iter().enumerate() {
        let keep = match &e.what {
            What::ClientSend { link, line } => {
                let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
                let is_cmd = v["params"]["commandId"].is_string() && v.get("id").is_some();
                if is_cmd {
                    commands.insert((*link, v["id"].to_string()), ());
                }
                is_cmd
            }
            What::ClientRecv { link, line } => {
                let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
                v.get("method").is_none()
                    && v.get("id").is_some()
                    && commands.contains_key(&(*link, v["id"].to_string()))
            }
            What::HostRecv { .. } | What::HostSend { .. } => false,
            // Intake records and what made them durable.
            What::Append { bytes, .. } => decode_log(bytes).is_ok_and(|d| {
                d.records
                    .iter()
                    .any(|(r, _)| matches!(r, Record::Received { .. } | Record::Settled { .. }))
            }),
            What::Synced { .. } => true,
            What::CrashPointHit { .. } => false,
            What::LeaseGrant { .. } | What::LeaseRelease { .. } | What::Connect { .. } => false,
            What::LinkClosed { why, .. } => *why != "client left",
            What::EffectDone { .. } => false,
            _ => true,
        };
        if keep || cited.contains(&i) {
            out.push(line(trace, i, legend));
        }
    }
    out
}

/// One line per violation, citing the entry where it shows.
pub fn violation_lines(legend: &Legend, violations: &[Violation]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in violations.iter().map(|v| {
        legend.apply(&format!(
            "VIOLATED {} at {}: {}",
            v.property,
            v.at_index
                .map_or("the end".to_string(), |i| format!("#{i}")),
            v.detail
        ))
    }) {
        // Two oracles may say the same thing: say it once.
        if !out.contains(&l) {
            out.push(l);
        }
    }
    out
}

/// The session a lease or storage entry is about (the entries the legend
/// and `--focus` name by their session).
fn storage_session(w: &What) -> Option<&str> {
    match w {
        What::LeaseGrant { session, .. }
        | What::LeaseDenied { session, .. }
        | What::LeaseRelease { session, .. }
        | What::AppendFailed { session, .. }
        | What::ReadFailed { session, .. }
        | What::IoDelayed { session, .. }
        | What::Truncate { session, .. }
        | What::Synced { session, .. }
        | What::SyncFailed { session, .. }
        | What::CrashKeep { session, .. } => Some(session),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Actor;

    const S: &str = "0198a1b2-c3d4-7e5f-8a6b-111111111111";
    const C: &str = "0198a1b2-c3d4-7e5f-8a6b-222222222222";

    fn trace() -> Trace {
        let mut t = Trace::new();
        t.push(
            0,
            Actor::Client(0),
            What::ClientSend {
                link: 1,
                line: format!(
                    "{{\"id\":2,\"method\":\"turn/start\",\"params\":{{\"sessionId\":\"{S}\",\"commandId\":\"{C}\"}}}}\n"
                ),
            },
        );
        t.push(
            1,
            Actor::Host(0),
            What::HostCrash {
                inc: 1,
                point: None,
            },
        );
        t.push(
            2,
            Actor::Host(0),
            What::LeaseGrant {
                inc: 2,
                session: S.to_string(),
            },
        );
        t
    }

    #[test]
    fn ids_get_names_by_role_and_first_appearance() {
        let t = trace();
        let l = Legend::of(&t);
        assert_eq!(l.resolve("s1").as_deref(), Some(S));
        assert_eq!(l.resolve("c1").as_deref(), Some(C));
        assert_eq!(l.resolve("222222222222").as_deref(), None);
        assert_eq!(l.resolve("22222222").as_deref(), Some(C));
        let text = line(&t, 0, &l);
        assert!(text.starts_with("#0 "), "{text}");
        assert!(text.contains("\"sessionId\":\"s1\""), "{text}");
        assert!(text.contains("\"commandId\":\"c1\""), "{text}");
        // The trace's own 8-character short form is named too.
        assert!(
            line(&t, 2, &l).ends_with("lease granted s1"),
            "{}",
            line(&t, 2, &l)
        );
        assert_eq!(l.lines()[0], format!("s1   = {S}"));
    }

    #[test]
    fn focus_keeps_the_ids_entries_and_the_crashes() {
        let t = trace();
        let l = Legend::of(&t);
        assert_eq!(focus(&t, &l, "c1"), Some(vec![0, 1]));
        assert_eq!(focus(&t, &l, "s1"), Some(vec![0, 1, 2]));
        assert_eq!(focus(&t, &l, "nope"), None);
    }

    #[test]
    fn a_report_starts_at_the_first_entry_about_the_violations_ids() {
        let mut t = trace();
        for k in 0..50 {
            t.push(10 + k, Actor::World, What::Note(format!("noise {k}")));
        }
        t.push(100, Actor::World, What::Note(format!("about {C}")));
        let l = Legend::of(&t);
        let v = Violation::new("durable-dedupe", Some(53), format!("turn/start {C} twice"));
        let r = report(&t, &l, &v, 20);
        assert!(r[0].starts_with("#0 "), "{r:?}");
        assert_eq!(r.len(), 3, "{r:?}");
        assert!(r[2].contains("about c1"), "{r:?}");
    }
}
