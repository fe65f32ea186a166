//! Shutdown racing a sync in flight: the driver submits a record's sync,
//! writes the next record and submits its sync (which waits for the next
//! batch unless the first is already done), then closes the committer while
//! the worker may still be syncing. Every `Ok` completion must cover durable
//! bytes (no answer after shutdown without its sync), every request
//! submitted before `close` completes exactly once, and one submitted after
//! it is handed back, never completed.

use loom::sync::{Arc, Mutex};

use crate::io::commit::{CommitBug, Committer, SyncRequest, Synced};
use crate::model_file::ModelFile;

/// What the completion callback saw.
#[derive(Debug, Default)]
struct Seen {
    keys: Vec<u32>,
    /// Completions released without their sync (`close` calls the callback
    /// on the model's main thread; a panic there, under the committer's
    /// lock, would tear loom down mid-model, so it is asserted at the end).
    unsynced: Vec<u32>,
}

/// Runs the model with a planted bug (or none).
pub fn run(bug: CommitBug) {
    crate::check(move || {
        let seen = {
            let log = Arc::new(ModelFile::default());
            let seen: Arc<Mutex<Seen>> = Arc::new(Mutex::new(Seen::default()));
            let on_done = {
                let log = Arc::clone(&log);
                let seen = Arc::clone(&seen);
                Box::new(move |batch: Vec<Synced<u32>>| {
                    let mut seen = seen.lock().expect("completions");
                    for s in batch {
                        if s.result.is_ok() && log.durable() < s.upto {
                            seen.unsynced.push(s.key);
                        }
                        seen.keys.push(s.key);
                    }
                })
            };
            let mut c = Committer::new(1, usize::MAX, on_done, bug);
            let req = |upto: u64, key: u32| SyncRequest {
                file: Arc::clone(&log),
                upto,
                key,
            };
            let e1 = log.append(10);
            assert!(c.submit(vec![req(e1, 1)]).is_ok());
            let e2 = log.append(10);
            assert!(c.submit(vec![req(e2, 2)]).is_ok());
            c.close();
            let e3 = log.append(10);
            let back = c.submit(vec![req(e3, 3)]);
            assert!(
                back.is_err_and(|r| r.len() == 1),
                "a request after close is handed back"
            );
            drop(c);
            let seen = std::mem::take(&mut *seen.lock().expect("completions"));
            seen
        };
        assert!(
            seen.unsynced.is_empty(),
            "answers {:?} released at shutdown without their sync",
            seen.unsynced
        );
        let mut keys = seen.keys;
        keys.sort_unstable();
        assert_eq!(
            keys,
            vec![1, 2],
            "every request before close completes once"
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_finishes_every_sync_it_races() {
        run(CommitBug::None);
    }

    #[test]
    #[should_panic(expected = "released at shutdown without their sync")]
    fn planted_close_completing_waiting_requests_unsynced_is_caught() {
        run(CommitBug::CloseSkipsWaiting);
    }
}
