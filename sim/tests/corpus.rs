//! The regression corpus (`corpus/regressions/`) is replayed: a planted
//! bug's entry must still be caught, a real bug's entry must hold on
//! today's runtime, an entry that no longer reaches its signature fails
//! as drifted, a file that does not parse fails with its name. Every
//! planted bug has an entry of at most 12 steps, and an entry replays
//! from its file bit for bit.

use std::collections::BTreeSet;

use msp::core::bugs::Bug;
use msp_sim::corpus::{self, Entry, Verdict};
use msp_sim::tally::Tally;

/// The most steps a planted bug's shrunk run may take.
const STEPS_MAX: u64 = 12;

fn dir() -> String {
    format!("{}/../{}", env!("CARGO_MANIFEST_DIR"), corpus::DIR)
}

fn entries() -> Vec<(String, Result<Entry, String>)> {
    corpus::files(&dir())
        .expect("the corpus directory exists")
        .into_iter()
        .map(|f| {
            let e = Entry::load(&f).map_err(|e| e.to_string());
            (f, e)
        })
        .collect()
}

#[test]
fn every_corpus_entry_replays_to_its_verdict() {
    let all = entries();
    assert!(!all.is_empty(), "the corpus has entries");
    let mut failed = Vec::new();
    for (f, e) in &all {
        match e {
            Err(why) => failed.push(format!("{f}: does not parse: {why}")),
            Ok(e) => {
                let (v, _) = e.check();
                if !v.passed() {
                    failed.push(format!("{f}: {v}"));
                }
            }
        }
    }
    assert!(failed.is_empty(), "corpus failures:\n{}", failed.join("\n"));
}

#[test]
fn every_planted_bug_has_an_entry_of_at_most_twelve_steps() {
    let mut have = BTreeSet::new();
    for (f, e) in entries() {
        let Ok(e) = e else { continue };
        let Some(bug) = e.run.bug else { continue };
        let (_, r) = e.check();
        let t = Tally::of(&r);
        assert!(t.steps() <= STEPS_MAX, "{f}: {t}");
        have.insert(bug);
    }
    let missing: Vec<&str> = Bug::ALL
        .iter()
        .filter(|b| !have.contains(b))
        .map(|b| b.name())
        .collect();
    assert!(
        missing.is_empty(),
        "planted bugs without a corpus entry: {missing:?}"
    );
}

#[test]
fn an_entry_replays_bit_for_bit_from_its_file() {
    let (f, e) = entries()
        .into_iter()
        .find(|(_, e)| e.as_ref().is_ok_and(|e| e.run.bug.is_some()))
        .expect("a planted bug's entry");
    let e = e.expect("parses");
    // (The committed trace hash may change when the runtime does: `corpus
    // replay` says so, and the signature guards against drift. What must
    // hold is that a file replays as its run did.)
    let a = e.run.replay();
    let b = e.run.replay();
    assert_eq!(a.trace.hash(), b.trace.hash(), "{f}");
    let mut e = e;
    e.run.trace_hash = a.trace.hash();
    e.run.trace_hash_version = msp_sim::trace::TRACE_HASH_VERSION;
    // Through the file system too.
    let path = std::env::temp_dir().join(format!("msp-sim-corpus-{}.json", std::process::id()));
    let path = path.to_string_lossy().into_owned();
    e.save(&path).expect("writes");
    let again = Entry::load(&path).expect("reads back");
    std::fs::remove_file(&path).ok();
    assert_eq!(again, e);
    assert_eq!(again.run.replay().trace.hash(), e.run.trace_hash);
}

#[test]
fn a_doctored_entry_is_reported_as_drifted_never_as_passing() {
    for (f, e) in entries() {
        let Ok(mut e) = e else { continue };
        // What a simulator that reads every choice as its simplest would
        // replay: no client takes part, nothing reaches the signature.
        e.run.choices.clear();
        let (v, _) = e.check();
        assert!(matches!(v, Verdict::Drifted { .. }), "{f}: {v}");
        assert!(!v.passed());
        assert!(v.to_string().starts_with("DRIFTED"), "{v}");
    }
}

#[test]
fn an_unparsable_entry_fails_with_its_name() {
    let path = std::env::temp_dir().join(format!("msp-sim-bad-{}.json", std::process::id()));
    let path = path.to_string_lossy().into_owned();
    std::fs::write(
        &path,
        "{\"format\": \"msp-sim corpus entry\", \"version\": 1}",
    )
    .unwrap();
    let err = Entry::load(&path).unwrap_err().to_string();
    std::fs::remove_file(&path).ok();
    assert!(err.starts_with(&path), "{err}");
    assert!(err.contains("postmortem"), "{err}");
}
