//! Unit tests of the two files the loom models share with `msp`
//! ([`commit`](super::commit) and [`lease`](super::lease)), on real threads
//! and real files. (They cannot live in those files: the models compile
//! them against loom.)

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use super::commit::{CommitBug, Committer, SyncData, SyncRequest, Synced};
use super::lease::{LeaseRegistry, Take};

/// A file whose syncs are counted and can be made to fail.
#[derive(Debug)]
struct Counted {
    syncs: std::sync::atomic::AtomicUsize,
    fail: bool,
}

impl SyncData for Counted {
    fn sync_data(&self) -> Result<(), String> {
        self.syncs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2));
        if self.fail {
            Err("disk on fire".into())
        } else {
            Ok(())
        }
    }
}

fn counted(fail: bool) -> Arc<Counted> {
    Arc::new(Counted {
        syncs: std::sync::atomic::AtomicUsize::new(0),
        fail,
    })
}

fn committer(workers: usize) -> (Committer<Counted, u32>, mpsc::Receiver<Vec<Synced<u32>>>) {
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let c = Committer::new(
        workers,
        usize::MAX,
        Box::new(move |done| {
            let _ = tx.lock().expect("sender").send(done);
        }),
        CommitBug::None,
    );
    (c, rx)
}

fn recv(rx: &mpsc::Receiver<Vec<Synced<u32>>>) -> Vec<Synced<u32>> {
    rx.recv_timeout(Duration::from_secs(10)).expect("a batch")
}

#[test]
fn a_batch_completes_every_request_once_with_its_own_result() {
    let (mut c, rx) = committer(4);
    let good: Vec<Arc<Counted>> = (0..6).map(|_| counted(false)).collect();
    let bad = counted(true);
    let mut reqs: Vec<SyncRequest<Counted, u32>> = good
        .iter()
        .enumerate()
        .map(|(i, f)| SyncRequest {
            file: Arc::clone(f),
            upto: 100 + i as u64,
            key: i as u32,
        })
        .collect();
    reqs.push(SyncRequest {
        file: Arc::clone(&bad),
        upto: 7,
        key: 99,
    });
    c.submit(reqs).expect("open");
    let mut done = recv(&rx);
    done.sort_by_key(|s| s.key);
    assert_eq!(done.len(), 7, "one batch, every request in it");
    for (i, s) in done.iter().take(6).enumerate() {
        assert_eq!(
            (s.key, s.upto, &s.result),
            (i as u32, 100 + i as u64, &Ok(()))
        );
    }
    assert_eq!(done[6].result, Err("disk on fire".into()));
    for f in &good {
        assert_eq!(f.syncs.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
    c.close();
    assert!(rx.try_recv().is_err(), "nothing completes twice");
}

#[test]
fn requests_submitted_during_a_batch_form_the_next_one() {
    let (mut c, rx) = committer(2);
    let a = counted(false);
    let b = counted(false);
    c.submit(vec![SyncRequest {
        file: Arc::clone(&a),
        upto: 1,
        key: 1,
    }])
    .expect("open");
    // While the first batch runs (2 ms syncs), two more arrive.
    c.submit(vec![SyncRequest {
        file: Arc::clone(&a),
        upto: 2,
        key: 2,
    }])
    .expect("open");
    c.submit(vec![SyncRequest {
        file: Arc::clone(&b),
        upto: 3,
        key: 3,
    }])
    .expect("open");
    let mut keys: Vec<Vec<u32>> = Vec::new();
    while keys.iter().map(Vec::len).sum::<usize>() < 3 {
        let mut k: Vec<u32> = recv(&rx).into_iter().map(|s| s.key).collect();
        k.sort_unstable();
        keys.push(k);
    }
    assert!(keys.len() <= 3 && keys[0].contains(&1));
    assert_eq!(
        a.syncs.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "request 2 got a sync of its own after request 1's"
    );
    c.close();
}

#[test]
fn requests_of_one_file_in_one_batch_share_one_sync() {
    let (mut c, rx) = committer(4);
    let journal = counted(false);
    let other = counted(false);
    let mut reqs: Vec<SyncRequest<Counted, u32>> = (0..5)
        .map(|k| SyncRequest {
            file: Arc::clone(&journal),
            upto: k,
            key: k as u32,
        })
        .collect();
    reqs.push(SyncRequest {
        file: Arc::clone(&other),
        upto: 9,
        key: 9,
    });
    c.submit(reqs).expect("open");
    let mut keys: Vec<u32> = recv(&rx).into_iter().map(|s| s.key).collect();
    keys.sort_unstable();
    assert_eq!(keys, vec![0, 1, 2, 3, 4, 9], "every request completes once");
    assert_eq!(journal.syncs.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(other.syncs.load(std::sync::atomic::Ordering::SeqCst), 1);
    c.close();
    assert!(rx.try_recv().is_err(), "nothing completes twice");
}

#[test]
fn close_drains_waiting_requests_and_then_refuses_new_ones() {
    let (mut c, rx) = committer(1);
    let a = counted(false);
    for k in 0..5 {
        c.submit(vec![SyncRequest {
            file: Arc::clone(&a),
            upto: k,
            key: k as u32,
        }])
        .expect("open");
    }
    c.close();
    let mut n = 0;
    while let Ok(batch) = rx.try_recv() {
        assert!(batch.iter().all(|s| s.result.is_ok()));
        n += batch.len();
    }
    assert_eq!(n, 5, "everything submitted before close completed");
    assert_eq!(
        a.syncs.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "the first request's sync, then one shared by the four that waited"
    );
    let back = c
        .submit(vec![SyncRequest {
            file: a,
            upto: 9,
            key: 9,
        }])
        .expect_err("closed");
    assert_eq!(back.len(), 1, "handed back, not completed");
}

#[test]
fn a_real_file_syncs_through_the_committer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut f = File::create(dir.path().join("log")).expect("create");
    f.write_all(b"record").expect("write");
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let mut c: Committer<File, &'static str> = Committer::new(
        2,
        usize::MAX,
        Box::new(move |d| {
            let _ = tx.lock().expect("sender").send(d);
        }),
        CommitBug::None,
    );
    c.submit(vec![SyncRequest {
        file: Arc::new(f),
        upto: 6,
        key: "s",
    }])
    .expect("open");
    let done = rx.recv_timeout(Duration::from_secs(10)).expect("batch");
    assert_eq!(
        done,
        vec![Synced {
            key: "s",
            upto: 6,
            result: Ok(())
        }]
    );
    c.close();
}

fn lease_path(dir: &Path) -> std::path::PathBuf {
    dir.join("lease")
}

#[test]
fn a_second_take_is_refused_here_and_elsewhere_until_the_first_is_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = lease_path(dir.path());
    let here: LeaseRegistry<File> = LeaseRegistry::new(());
    let other: LeaseRegistry<File> = LeaseRegistry::new(());
    let first = match here.take(&path).expect("io") {
        Take::Taken(l) => l,
        t => panic!("free lease not taken: {t:?}"),
    };
    assert!(matches!(here.take(&path).expect("io"), Take::HeldHere));
    assert!(
        matches!(other.take(&path).expect("io"), Take::HeldElsewhere),
        "flock is per open file"
    );
    assert!(here.holds(&path));
    drop(first);
    assert!(!here.holds(&path));
    assert!(matches!(other.take(&path).expect("io"), Take::Taken(_)));
}

#[test]
fn a_probe_sees_another_holder_never_its_own_and_leaves_a_free_lease_free() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = lease_path(dir.path());
    let here: LeaseRegistry<File> = LeaseRegistry::new(());
    let other: LeaseRegistry<File> = LeaseRegistry::new(());
    assert!(
        !here.held_elsewhere(&path).expect("io"),
        "no file, nobody holds it"
    );
    let held = match other.take(&path).expect("io") {
        Take::Taken(l) => l,
        t => panic!("free lease not taken: {t:?}"),
    };
    assert!(here.held_elsewhere(&path).expect("io"));
    assert!(!other.held_elsewhere(&path).expect("io"), "its own lease");
    drop(held);
    assert!(!here.held_elsewhere(&path).expect("io"));
    assert!(
        matches!(here.take(&path).expect("io"), Take::Taken(_)),
        "the probe released its lock"
    );
}

#[test]
fn batch_max_one_gives_every_request_a_batch_of_its_own() {
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let mut c: Committer<Counted, u32> = Committer::new(
        1,
        1,
        Box::new(move |d| {
            let _ = tx.lock().expect("sender").send(d);
        }),
        CommitBug::None,
    );
    let f = counted(false);
    let reqs = (0..4)
        .map(|k| SyncRequest {
            file: Arc::clone(&f),
            upto: k,
            key: k as u32,
        })
        .collect();
    c.submit(reqs).expect("open");
    for k in 0..4u32 {
        let batch = recv(&rx);
        assert_eq!(batch.len(), 1);
        assert_eq!(batch[0].key, k, "oldest first");
    }
    c.close();
}
