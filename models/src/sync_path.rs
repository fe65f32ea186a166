//! The sync path: the driver appends records and submits syncs while the
//! committer's workers run earlier ones; each completion is where the
//! driver would release answers.
//!
//! Two sessions (two model logs). The driver writes a record to each and
//! submits both syncs in one round; then it writes session A's next record,
//! possibly while A's first sync runs, and submits it. The completion
//! callback (the committer's `on_done`, where the real driver feeds
//! `handle_synced`) asserts that every record an `Ok` completion covers is
//! durable in the model log, i.e. a sync that began after the record was
//! written has finished. After `close`, every request has completed exactly
//! once.

use loom::sync::{Arc, Mutex};

use crate::io::commit::{CommitBug, Committer, SyncRequest, Synced};
use crate::model_file::ModelFile;

/// A request's name: (session, record number).
pub type Key = (usize, u32);

fn request(file: &Arc<ModelFile>, upto: u64, key: Key) -> SyncRequest<ModelFile, Key> {
    SyncRequest {
        file: Arc::clone(file),
        upto,
        key,
    }
}

/// Runs the model with `workers` sync workers and a planted bug (or none).
pub fn run(workers: usize, bug: CommitBug) {
    crate::check(move || {
        let logs = [
            Arc::new(ModelFile::default()),
            Arc::new(ModelFile::default()),
        ];
        let done: Arc<Mutex<Vec<Synced<Key>>>> = Arc::new(Mutex::new(Vec::new()));
        let on_done = {
            let logs = logs.clone();
            let done = Arc::clone(&done);
            Box::new(move |batch: Vec<Synced<Key>>| {
                for s in &batch {
                    if s.result.is_ok() {
                        assert!(
                            logs[s.key.0].durable() >= s.upto,
                            "answer {:?} released before a sync that began after its record was written",
                            s.key
                        );
                    }
                }
                done.lock().expect("completions").extend(batch);
            })
        };
        let mut c = Committer::new(workers, usize::MAX, on_done, bug);
        let [a, b] = &logs;
        let a1 = a.append(10);
        let b1 = b.append(10);
        assert!(c
            .submit(vec![request(a, a1, (0, 1)), request(b, b1, (1, 1))])
            .is_ok());
        let a2 = a.append(10);
        assert!(c.submit(vec![request(a, a2, (0, 2))]).is_ok());
        c.close();
        let mut keys: Vec<Key> = done
            .lock()
            .expect("completions")
            .iter()
            .map(|s| s.key)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            vec![(0, 1), (0, 2), (1, 1)],
            "every request completes exactly once"
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_worker_releases_nothing_early_and_completes_everything_once() {
        run(1, CommitBug::None);
    }

    #[test]
    fn two_workers_release_nothing_early_and_complete_everything_once() {
        run(2, CommitBug::None);
    }

    #[test]
    #[should_panic(expected = "released before a sync that began after its record was written")]
    fn planted_a_request_riding_on_a_running_sync_is_caught() {
        run(1, CommitBug::JoinRunningSync);
    }
}
