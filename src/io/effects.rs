//! Effect providers (PROTOCOL.md section 5): the [`EffectProvider`] trait
//! an application implements to let approved tool calls act on the outside
//! world, the [`Providers`] registry `msp serve` runs them from, and the
//! two built-in providers, file-backed under `DIR/providers/`.
//!
//! The contract with the core: a provider that [`EffectProvider::honours_keys`]
//! returns the earlier result when the same effect key is performed again
//! and never mutates twice, and answers [`EffectProvider::query`] with what
//! happened to a key; that is how the core reconciles an effect whose
//! response was lost or that was in flight at a crash. A provider without
//! key support is never performed again after such a loss: the item is
//! reported `effectOutcome: "unknown"` for an operator to reconcile.
//!
//! - `keyed` honours effect keys: one file per key,
//!   `providers/keyed/<hash of the key>`, holding the key and the action.
//!   A Perform creates it at most once (written to a temporary file,
//!   fsynced, then hard-linked into place, which fails if the name exists),
//!   so a retry with the same key returns the earlier result and never
//!   mutates twice. A Query only checks whether the file exists.
//! - `unkeyed` mutates every time: each Perform appends a line
//!   `<key>\t<action>` to `providers/unkeyed.log` and fsyncs it. It cannot
//!   answer a Query (`unknown`).
//! - Any other provider name performs nothing (`notStarted`).
//!
//! Fault model: a failure before the mutation is `notStarted`; a failure
//! after it may have happened (the fsync of the directory entry) is
//! `unknown`. These run on blocking threads.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::storage::sync_dir;
use crate::core::{EffectMode, EffectOutcome};

/// Distinguishes temporary files of concurrent performs in one process.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The file name a key maps to: FNV-1a 64 and CRC32C of the key, in hex
/// (fixed length whatever the key; the key itself is stored inside).
pub fn key_file_name(key: &str) -> String {
    let mut fnv: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        fnv ^= u64::from(b);
        fnv = fnv.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{fnv:016x}{:08x}", crc32c::crc32c(key.as_bytes()))
}

/// Something an approved `!effect PROVIDER ACTION` acts on. Calls are
/// blocking and run on the io layer's blocking threads, possibly several
/// at once.
pub trait EffectProvider: Send + Sync {
    /// Whether a retry with the same effect key returns the earlier result
    /// and never mutates twice, and [`query`](Self::query) can tell what
    /// happened to a key. Decides whether the core may reconcile a lost
    /// outcome by key (true) or must report it `unknown` (false).
    fn honours_keys(&self) -> bool;

    /// Performs `action` under effect `key`: `Committed` once it took
    /// effect, `NotStarted` if it surely did not, `Unknown` if it cannot
    /// tell.
    fn perform(&self, key: &str, action: &str) -> EffectOutcome;

    /// What happened to `key`, for reconciliation. Providers without key
    /// support cannot know: `Unknown`.
    fn query(&self, key: &str) -> EffectOutcome {
        let _ = key;
        EffectOutcome::Unknown
    }
}

/// The providers `msp serve` runs effects at, by the name an `!effect`
/// gives. Names not registered are not effects (the core completes such a
/// tool call without one).
#[derive(Clone, Default)]
pub struct Providers {
    by_name: std::collections::BTreeMap<String, std::sync::Arc<dyn EffectProvider>>,
}

impl Providers {
    /// The built-in `keyed` and `unkeyed` providers, file-backed under
    /// `providers_dir`.
    pub fn builtin(providers_dir: &Path) -> Providers {
        let mut p = Providers::default();
        p.register("keyed", KeyedFileProvider::new(providers_dir));
        p.register("unkeyed", UnkeyedFileProvider::new(providers_dir));
        p
    }

    /// Adds or replaces the provider called `name`.
    pub fn register(&mut self, name: &str, provider: impl EffectProvider + 'static) {
        self.by_name
            .insert(name.to_string(), std::sync::Arc::new(provider));
    }

    /// Each registered name with whether it honours keys, for
    /// `HostConfig::effect_providers`.
    pub fn key_support(&self) -> std::collections::BTreeMap<String, bool> {
        self.by_name
            .iter()
            .map(|(n, p)| (n.clone(), p.honours_keys()))
            .collect()
    }

    /// Carries out an `Output::Effect` (blocking). A query of a provider
    /// without key support, or any call to an unknown name, does nothing.
    pub fn run(&self, provider: &str, key: &str, action: &str, mode: EffectMode) -> EffectOutcome {
        let Some(p) = self.by_name.get(provider) else {
            return EffectOutcome::NotStarted;
        };
        match mode {
            EffectMode::Perform => p.perform(key, action),
            EffectMode::Query if p.honours_keys() => p.query(key),
            EffectMode::Query => EffectOutcome::Unknown,
        }
    }
}

/// The built-in `keyed` provider (see the module doc).
pub struct KeyedFileProvider {
    dir: PathBuf,
}

impl KeyedFileProvider {
    /// Keeps its files under `providers_dir/keyed/`.
    pub fn new(providers_dir: &Path) -> Self {
        KeyedFileProvider {
            dir: providers_dir.to_path_buf(),
        }
    }
}

impl EffectProvider for KeyedFileProvider {
    fn honours_keys(&self) -> bool {
        true
    }
    fn perform(&self, key: &str, action: &str) -> EffectOutcome {
        keyed_perform(&self.dir, key, action)
    }
    fn query(&self, key: &str) -> EffectOutcome {
        keyed_query(&self.dir, key)
    }
}

/// The built-in `unkeyed` provider (see the module doc).
pub struct UnkeyedFileProvider {
    dir: PathBuf,
}

impl UnkeyedFileProvider {
    /// Appends to `providers_dir/unkeyed.log`.
    pub fn new(providers_dir: &Path) -> Self {
        UnkeyedFileProvider {
            dir: providers_dir.to_path_buf(),
        }
    }
}

impl EffectProvider for UnkeyedFileProvider {
    fn honours_keys(&self) -> bool {
        false
    }
    fn perform(&self, key: &str, action: &str) -> EffectOutcome {
        unkeyed_perform(&self.dir, key, action)
    }
}

fn keyed_dir(providers_dir: &Path) -> PathBuf {
    providers_dir.join("keyed")
}

fn content(key: &str, action: &str) -> Vec<u8> {
    format!("{key}\n{action}").into_bytes()
}

/// Whether the key's file exists and really holds this key (a hash
/// collision would hold another).
fn committed(path: &Path, key: &str) -> io::Result<Option<bool>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let stored = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
            Ok(Some(stored == key.as_bytes()))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn keyed_query(providers_dir: &Path, key: &str) -> EffectOutcome {
    match committed(&keyed_dir(providers_dir).join(key_file_name(key)), key) {
        Ok(Some(true)) => EffectOutcome::Committed,
        Ok(None) => EffectOutcome::NotStarted,
        Ok(Some(false)) | Err(_) => EffectOutcome::Unknown,
    }
}

fn keyed_perform(providers_dir: &Path, key: &str, action: &str) -> EffectOutcome {
    let dir = keyed_dir(providers_dir);
    let path = dir.join(key_file_name(key));
    match committed(&path, key) {
        Ok(Some(true)) => return EffectOutcome::Committed,
        Ok(Some(false)) | Err(_) => return EffectOutcome::Unknown,
        Ok(None) => {}
    }
    if std::fs::create_dir_all(&dir).is_err() {
        return EffectOutcome::NotStarted;
    }
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(
        ".tmp-{}-{}-{n}",
        key_file_name(key),
        std::process::id()
    ));
    let written = (|| -> io::Result<()> {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(&content(key, action))?;
        f.sync_data()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return EffectOutcome::NotStarted;
    }
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => match sync_dir(&dir) {
            Ok(()) => EffectOutcome::Committed,
            Err(_) => EffectOutcome::Unknown,
        },
        // A concurrent perform with the same key won the race: its result.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => keyed_query(providers_dir, key),
        Err(_) => EffectOutcome::NotStarted,
    }
}

fn unkeyed_perform(providers_dir: &Path, key: &str, action: &str) -> EffectOutcome {
    if std::fs::create_dir_all(providers_dir).is_err() {
        return EffectOutcome::NotStarted;
    }
    let mut f = match OpenOptions::new()
        .append(true)
        .create(true)
        .open(providers_dir.join("unkeyed.log"))
    {
        Ok(f) => f,
        Err(_) => return EffectOutcome::NotStarted,
    };
    let line = format!("{key}\t{}\n", action.replace('\n', " "));
    match f.write_all(line.as_bytes()).and_then(|()| f.sync_data()) {
        Ok(()) => EffectOutcome::Committed,
        Err(_) => EffectOutcome::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One call at a built-in provider under `dir`.
    fn run_effect(
        dir: &Path,
        provider: &str,
        key: &str,
        action: &str,
        mode: EffectMode,
    ) -> EffectOutcome {
        Providers::builtin(dir).run(provider, key, action, mode)
    }

    #[test]
    fn keyed_performs_once_per_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        assert_eq!(
            run_effect(p, "keyed", "s:a", "act", EffectMode::Query),
            EffectOutcome::NotStarted
        );
        assert_eq!(
            run_effect(p, "keyed", "s:a", "act", EffectMode::Perform),
            EffectOutcome::Committed
        );
        assert_eq!(
            run_effect(p, "keyed", "s:a", "other", EffectMode::Perform),
            EffectOutcome::Committed
        );
        assert_eq!(
            run_effect(p, "keyed", "s:a", "act", EffectMode::Query),
            EffectOutcome::Committed
        );
        let files: Vec<_> = std::fs::read_dir(p.join("keyed")).expect("dir").collect();
        assert_eq!(files.len(), 1, "one file, no leftover temporaries");
        let stored = std::fs::read(p.join("keyed").join(key_file_name("s:a"))).expect("file");
        assert_eq!(stored, b"s:a\nact", "the first action stays");
    }

    #[test]
    fn unkeyed_mutates_every_time_and_cannot_be_queried() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        assert_eq!(
            run_effect(p, "unkeyed", "k", "a", EffectMode::Perform),
            EffectOutcome::Committed
        );
        assert_eq!(
            run_effect(p, "unkeyed", "k", "a", EffectMode::Perform),
            EffectOutcome::Committed
        );
        assert_eq!(
            run_effect(p, "unkeyed", "k", "a", EffectMode::Query),
            EffectOutcome::Unknown
        );
        let log = std::fs::read_to_string(p.join("unkeyed.log")).expect("log");
        assert_eq!(log, "k\ta\nk\ta\n");
    }

    /// Counts performs and queries, honouring keys or not.
    struct Counting(bool, std::sync::Arc<std::sync::atomic::AtomicU64>);

    impl EffectProvider for Counting {
        fn honours_keys(&self) -> bool {
            self.0
        }
        fn perform(&self, _key: &str, _action: &str) -> EffectOutcome {
            self.1.fetch_add(1, Ordering::SeqCst);
            EffectOutcome::Committed
        }
        fn query(&self, _key: &str) -> EffectOutcome {
            self.1.fetch_add(100, Ordering::SeqCst);
            EffectOutcome::Committed
        }
    }

    #[test]
    fn the_registry_runs_application_providers_and_never_queries_unkeyed_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = Providers::builtin(dir.path());
        let keyed = std::sync::Arc::new(AtomicU64::new(0));
        let plain = std::sync::Arc::new(AtomicU64::new(0));
        p.register("ledger", Counting(true, keyed.clone()));
        p.register("mailer", Counting(false, plain.clone()));
        let support = p.key_support();
        assert_eq!(support.get("ledger"), Some(&true));
        assert_eq!(support.get("mailer"), Some(&false));
        assert_eq!(support.get("keyed"), Some(&true));
        assert_eq!(support.get("unkeyed"), Some(&false));
        assert_eq!(
            p.run("ledger", "k", "a", EffectMode::Perform),
            EffectOutcome::Committed
        );
        assert_eq!(
            p.run("ledger", "k", "a", EffectMode::Query),
            EffectOutcome::Committed
        );
        assert_eq!(keyed.load(Ordering::SeqCst), 101);
        assert_eq!(
            p.run("mailer", "k", "a", EffectMode::Perform),
            EffectOutcome::Committed
        );
        assert_eq!(
            p.run("mailer", "k", "a", EffectMode::Query),
            EffectOutcome::Unknown
        );
        assert_eq!(
            plain.load(Ordering::SeqCst),
            1,
            "an unkeyed provider is never queried"
        );
        assert_eq!(
            p.run("nope", "k", "a", EffectMode::Perform),
            EffectOutcome::NotStarted
        );
    }

    #[test]
    fn unknown_providers_do_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            run_effect(dir.path(), "nope", "k", "a", EffectMode::Perform),
            EffectOutcome::NotStarted
        );
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
    }

    #[test]
    fn key_file_names_are_fixed_length_and_distinct() {
        let a = key_file_name(
            "0198f0aa-1111-7000-8000-0000000000aa:0198f0aa-1111-7000-8000-0000000000ab",
        );
        let b = key_file_name(
            "0198f0aa-1111-7000-8000-0000000000aa:0198f0aa-1111-7000-8000-0000000000ac",
        );
        assert_eq!(a.len(), 24);
        assert_ne!(a, b);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }

    /// A key file that is there but cannot be read (here a directory in
    /// its place: EISDIR) says nothing of whether the effect happened:
    /// `unknown`, never `notStarted`, which would let recovery perform it
    /// again (cargo-mutants: every read error taken for absence).
    #[test]
    fn a_key_file_that_cannot_be_read_is_unknown_not_absent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        std::fs::create_dir_all(p.join("keyed").join(key_file_name("s:a"))).expect("mkdir");
        for mode in [EffectMode::Query, EffectMode::Perform] {
            assert_eq!(
                run_effect(p, "keyed", "s:a", "act", mode),
                EffectOutcome::Unknown,
                "{mode:?}"
            );
        }
    }

    /// Performs of one key racing each other (two hosts' recoveries, or a
    /// retry overtaking a slow call): one commits, and every other reads
    /// its result instead of reporting `notStarted` (cargo-mutants: the
    /// lost race of the hard link taken for a failure).
    #[test]
    fn racing_performs_of_one_key_all_report_the_one_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let providers = std::sync::Arc::new(Providers::builtin(dir.path()));
        for round in 0..5 {
            let key = format!("s:race{round}");
            let start = std::sync::Arc::new(std::sync::Barrier::new(6));
            let calls: Vec<_> = (0..6)
                .map(|i| {
                    let (providers, start, key) = (providers.clone(), start.clone(), key.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        providers.run("keyed", &key, &format!("act{i}"), EffectMode::Perform)
                    })
                })
                .collect();
            for c in calls {
                assert_eq!(c.join().expect("thread"), EffectOutcome::Committed, "{key}");
            }
            let stored = std::fs::read(dir.path().join("keyed").join(key_file_name(&key)))
                .expect("the key file");
            assert!(stored.starts_with(format!("{key}\nact").as_bytes()));
        }
    }
}
