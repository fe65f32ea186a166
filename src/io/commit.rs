//! Group commit across sessions: one batch of fsyncs at a time, shared by
//! every session that needs one.
//!
//! The core asks for at most one sync per session at a time and folds
//! everything appended meanwhile into the next one (group commit within a
//! session). With many sessions that is still one fsync per session per
//! round; this module makes the rounds shared. The driver [`submit`]s the
//! sync requests of one drain together. While a batch is in flight, new
//! requests wait for the next batch; when a batch ends, everything that
//! waited becomes the next batch at once. A batch's `sync_data` calls run on
//! a small pool of sync workers concurrently, because the kernel and the
//! disk overlap concurrent fsyncs of different files (measured on this
//! machine's ext4: 64 files synced by 16 threads take about one fsync's
//! time, one after the other about 64). When the last request of a batch
//! is done, the
//! whole batch's completions go to the driver in one call, so the answers of
//! every session in it leave in one drain.
//!
//! The contract, which the loom models in `models/` check on this very file:
//!
//! - a request completes `Ok` only after a `sync_data` of its file that
//!   began after the request was submitted (so after its bytes were
//!   written: the driver appends before it submits); requests of one file
//!   in one batch share one `sync_data` (the intake journal: every round
//!   asks for an fsync of the same file);
//! - every request submitted before [`close`] completes exactly once, with
//!   the result of its own sync, even when `close` races a batch in flight;
//!   a request submitted after `close` is handed back, never completed.
//!
//! Only [`super::shim`] primitives are used (see there why).
//!
//! [`submit`]: Committer::submit
//! [`close`]: Committer::close

use std::collections::VecDeque;

use super::shim::{thread, Arc, Condvar, Mutex, MutexGuard};

/// A file that can be made durable.
pub trait SyncData: Send + Sync + 'static {
    /// Makes every byte written to the file so far durable (`fdatasync`).
    fn sync_data(&self) -> Result<(), String>;
}

/// One request: make `file` durable up to `upto` (bytes already written).
#[derive(Debug)]
pub struct SyncRequest<F, K> {
    /// The file.
    pub file: Arc<F>,
    /// The log length the request covers (handed back in the completion).
    pub upto: u64,
    /// The caller's name for the request (session and epoch in `msp`).
    pub key: K,
}

/// A completed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced<K> {
    /// The request's key.
    pub key: K,
    /// The request's `upto`.
    pub upto: u64,
    /// The result of the sync that covered it.
    pub result: Result<(), String>,
}

/// Deliberate defects for the loom models' planted-bug tests, in the manner
/// of `core::bugs`: `msp serve` always runs with [`CommitBug::None`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitBug {
    /// The real committer.
    None,
    /// A request submitted while its file's sync is already running joins
    /// that sync ("it is being synced anyway"), so bytes appended after the
    /// sync began are reported durable.
    JoinRunningSync,
    /// `close` completes the requests still waiting for a batch as synced
    /// without syncing them ("nothing is left to wait for at exit").
    CloseSkipsWaiting,
}

/// Where completions go: called once per batch, by a sync worker, with the
/// committer's lock held (so batches arrive in order). It must not block or
/// call back into the committer.
pub type OnDone<K> = Box<dyn Fn(Vec<Synced<K>>) + Send + Sync>;

struct Pending<F, K> {
    file: Arc<F>,
    upto: u64,
    key: K,
}

struct State<F, K> {
    /// Submitted while a batch was in flight: the next batch.
    waiting: Vec<Pending<F, K>>,
    /// The batch in flight: not yet picked by a worker.
    todo: VecDeque<Pending<F, K>>,
    /// The batch in flight: picked by a worker, sync running.
    running: Vec<(Arc<F>, usize)>,
    /// The batch in flight: finished.
    done: Vec<Synced<K>>,
    in_flight: bool,
    closing: bool,
    /// At most this many requests per batch.
    batch_max: usize,
    /// Workers waiting for work (so a batch of n wakes at most n of them,
    /// never the whole pool).
    idle: usize,
    next_run_id: usize,
    /// Requests riding on a running sync, by its run id (planted bug only).
    riders: Vec<(usize, Vec<(u64, K)>)>,
}

struct Shared<F, K> {
    state: Mutex<State<F, K>>,
    work: Condvar,
    on_done: OnDone<K>,
    bug: CommitBug,
}

/// The group committer: a pool of sync workers and the batch they share.
pub struct Committer<F: SyncData, K: Send + 'static> {
    shared: Arc<Shared<F, K>>,
    workers: Vec<thread::JoinHandle<()>>,
}

impl<F: SyncData, K: Send + 'static> std::fmt::Debug for Committer<F, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Committer")
            .field("workers", &self.workers.len())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A worker that panicked mid-batch leaves the state consistent (every
    // change is made whole under the lock), so a poisoned lock is usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<F: SyncData, K: Send + 'static> Committer<F, K> {
    /// Starts `workers` sync workers (at least one) that deliver each
    /// batch's completions to `on_done`. A batch takes at most `batch_max`
    /// requests (at least one; 1 with one worker is the no-group-commit
    /// baseline: every request an fsync of its own, one at a time).
    pub fn new(
        workers: usize,
        batch_max: usize,
        on_done: OnDone<K>,
        bug: CommitBug,
    ) -> Committer<F, K> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                waiting: Vec::new(),
                todo: VecDeque::new(),
                running: Vec::new(),
                done: Vec::new(),
                in_flight: false,
                closing: false,
                batch_max: batch_max.max(1),
                idle: 0,
                next_run_id: 0,
                riders: Vec::new(),
            }),
            work: Condvar::new(),
            on_done,
            bug,
        });
        let workers = (0..workers.max(1))
            .map(|_| {
                let shared = Arc::clone(&shared);
                thread::spawn(move || worker(&shared))
            })
            .collect();
        Committer { shared, workers }
    }

    /// Submits requests whose bytes are written. They join the next batch
    /// (which starts at once when none is in flight). After [`close`] the
    /// requests are handed back untouched.
    ///
    /// [`close`]: Committer::close
    pub fn submit(&self, reqs: Vec<SyncRequest<F, K>>) -> Result<(), Vec<SyncRequest<F, K>>> {
        if reqs.is_empty() {
            return Ok(());
        }
        let mut st = lock(&self.shared.state);
        if st.closing {
            return Err(reqs);
        }
        for r in reqs {
            if self.shared.bug == CommitBug::JoinRunningSync {
                let running = st.running.iter().find(|(f, _)| Arc::ptr_eq(f, &r.file));
                if let Some(id) = running.map(|(_, id)| *id) {
                    // The defect: ride on a sync that began before these
                    // bytes were written.
                    st.riders_of(id).push((r.upto, r.key));
                    continue;
                }
            }
            st.waiting.push(Pending {
                file: r.file,
                upto: r.upto,
                key: r.key,
            });
        }
        if !st.in_flight {
            let n = start_batch(&mut st);
            wake(&self.shared, &st, n);
        }
        Ok(())
    }

    /// Stops taking requests, lets the batch in flight and every waiting
    /// request finish (each synced and completed), then stops the workers.
    pub fn close(&mut self) {
        {
            let mut st = lock(&self.shared.state);
            st.closing = true;
            if self.shared.bug == CommitBug::CloseSkipsWaiting && !st.waiting.is_empty() {
                let skipped: Vec<Synced<K>> = std::mem::take(&mut st.waiting)
                    .into_iter()
                    .map(|p| Synced {
                        key: p.key,
                        upto: p.upto,
                        result: Ok(()),
                    })
                    .collect();
                (self.shared.on_done)(skipped);
            }
            self.shared.work.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl<F: SyncData, K: Send + 'static> Committer<F, K> {
    /// How many `sync_data` calls the workers have begun (requests of one
    /// file in one batch share one): what the benchmarks count as fsyncs.
    pub fn syncs_run(&self) -> u64 {
        lock(&self.shared.state).next_run_id as u64
    }

    /// Stops taking requests without waiting for the workers (a shutdown
    /// that gave up on a sync that never returns). Whatever is in flight
    /// still completes into `on_done` if it ever returns.
    pub fn detach(&mut self) {
        lock(&self.shared.state).closing = true;
        self.shared.work.notify_all();
        self.workers.clear();
    }
}

impl<F: SyncData, K: Send + 'static> Drop for Committer<F, K> {
    fn drop(&mut self) {
        // Not while unwinding: a panic under the lock (in `on_done`) must
        // not turn into a second one here.
        if !self.workers.is_empty() && !super::shim::panicking() {
            self.close();
        }
    }
}

impl<F, K> State<F, K> {
    /// The requests riding on the running sync `id` (planted bug only).
    fn riders_of(&mut self, id: usize) -> &mut Vec<(u64, K)> {
        let at = self
            .riders
            .iter()
            .position(|(i, _)| *i == id)
            .unwrap_or_else(|| {
                self.riders.push((id, Vec::new()));
                self.riders.len() - 1
            });
        &mut self.riders[at].1
    }
}

/// Moves the waiting requests (at most `batch_max`, oldest first) into a
/// new batch; returns its size.
fn start_batch<F, K>(st: &mut State<F, K>) -> usize {
    debug_assert!(!st.in_flight, "one batch in flight at a time");
    debug_assert!(st.todo.is_empty() && st.running.is_empty() && st.done.is_empty());
    if st.waiting.is_empty() {
        return 0;
    }
    let n = st.waiting.len().min(st.batch_max);
    st.todo.extend(st.waiting.drain(..n));
    st.in_flight = true;
    n
}

/// Wakes up to `n` idle workers (each wake-up is a context switch: the
/// pool is sized for the widest batch, not woken whole for every one).
fn wake<F: SyncData, K: Send + 'static>(shared: &Shared<F, K>, st: &State<F, K>, n: usize) {
    for _ in 0..n.min(st.idle) {
        shared.work.notify_one();
    }
}

fn worker<F: SyncData, K: Send + 'static>(shared: &Shared<F, K>) {
    loop {
        let mut st = lock(&shared.state);
        let job = loop {
            if let Some(p) = st.todo.pop_front() {
                let id = st.next_run_id;
                st.next_run_id += 1;
                st.running.push((Arc::clone(&p.file), id));
                // The batch's other requests of the same file share this
                // sync: it begins after all of them were submitted.
                let (same, others): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut st.todo)
                    .into_iter()
                    .partition(|q: &Pending<F, K>| Arc::ptr_eq(&q.file, &p.file));
                st.todo = others;
                break (p, same, id);
            }
            if st.closing && !st.in_flight && st.waiting.is_empty() {
                return;
            }
            st.idle += 1;
            st = shared.work.wait(st).unwrap_or_else(|e| e.into_inner());
            st.idle -= 1;
        };
        drop(st);
        let (p, same, id) = job;
        let result = p.file.sync_data();
        let mut st = lock(&shared.state);
        st.running.retain(|(_, i)| *i != id);
        let riders = match st.riders.iter().position(|(i, _)| *i == id) {
            Some(at) => st.riders.swap_remove(at).1,
            None => Vec::new(),
        };
        for (upto, key) in riders {
            st.done.push(Synced {
                key,
                upto,
                result: result.clone(),
            });
        }
        for q in same {
            st.done.push(Synced {
                key: q.key,
                upto: q.upto,
                result: result.clone(),
            });
        }
        st.done.push(Synced {
            key: p.key,
            upto: p.upto,
            result,
        });
        if st.todo.is_empty() && st.running.is_empty() {
            let done = std::mem::take(&mut st.done);
            st.in_flight = false;
            (shared.on_done)(done);
            let n = start_batch(&mut st);
            if st.closing && n == 0 {
                // The last batch ended while closing: the others may exit.
                shared.work.notify_all();
            } else {
                // This worker takes one request of the new batch itself.
                wake(shared, &st, n.saturating_sub(1));
            }
        }
    }
}
