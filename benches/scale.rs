//! Host-at-scale benchmarks (issue 11), every figure of a run measured in
//! that run on this machine, printed as ratios and as multiples of the
//! disk's own fdatasync time:
//!
//! - `fsync`: the disk's raw latency: append 100 bytes, `fdatasync`;
//! - `admission`: `msp serve` over TCP, clients x sessions in {1, 16, 64} x
//!   {1, 8, 64}, group commit on and off (`--no-group-commit`: every intake
//!   an fsync of its own, one at a time). Each client sends one
//!   `state/update` at a time (closed loop); its k-th goes to session
//!   `(client + k * clients) % sessions`. Reported: acks/s, p50/p99 latency,
//!   server CPU (user + system, all threads) per ack, acks per fdatasync and
//!   per batch of fdatasyncs (from the line the host prints at exit);
//! - `sqlite`: the same closed loop against SQLite (rusqlite, bundled): WAL,
//!   `synchronous=FULL`, a table with a unique `command_id`, the payload's
//!   hash and the stored answer, one `BEGIN IMMEDIATE` transaction per
//!   command (look the id up; answer the stored one, refuse another
//!   payload, or insert), one connection per client thread;
//! - `recover --records N`: a session of about N log records written by
//!   pipelined `state/update`s, the host killed with SIGKILL, a new host
//!   started: the time `session/resume` takes, and the new host's RSS.
//!   Records are counted logically (a compacted log's snapshot counts the
//!   records it folds); the log, the archive and the snapshot (the live
//!   state, serialised) are measured on disk after the kill.
//!
//! Run: `cargo bench --bench scale` (fsync, admission, sqlite; about a
//! minute), `cargo bench --bench scale -- recover --records 1000000`.
//! Knobs: `MSP_BENCH_SECS` (measured seconds per configuration, default
//! 1.5), `MSP_BENCH_DIR` (where data goes; default the temp dir, which must
//! be a real disk), `MSP_BENCH_BIN` (another `msp` binary, e.g. an older
//! build, for before/after figures with the same harness).
//!
//! `tests/bench_smoke.rs` runs [`smoke`] in `cargo test`: tiny sizes, fails
//! on errors only, never on timing.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

type Res<T> = Result<T, String>;

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[allow(dead_code)] // `tests/bench_smoke.rs` includes this file without `main`'s callers
fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let result = match args.first().map(String::as_str) {
        None | Some("all") => all(env_f64("MSP_BENCH_SECS", 1.5)),
        Some("recover") => {
            let records = args
                .iter()
                .position(|a| a == "--records")
                .and_then(|i| args.get(i + 1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(100_000);
            recover(records).map(|r| print_recover(&r))
        }
        Some("admission") => {
            let num = |flag: &str, default: usize| {
                args.iter()
                    .position(|a| a == flag)
                    .and_then(|i| args.get(i + 1))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(default)
            };
            let gc = !args.iter().any(|a| a == "--no-group-commit");
            let secs = env_f64("MSP_BENCH_SECS", 1.5);
            admission(
                num("--clients", 64),
                num("--sessions", 64),
                gc,
                Duration::from_millis(300),
                Duration::from_secs_f64(secs),
            )
            .map(|st| println!("{st:?}"))
        }
        Some(other) => Err(format!(
            "unknown benchmark {other:?} (all | admission --clients C --sessions S [--no-group-commit] | recover --records N)"
        )),
    };
    if let Err(e) = result {
        eprintln!("benchmark failed: {e}");
        std::process::exit(1);
    }
}

// ----- the host and its clients -------------------------------------------

fn bench_dir() -> Res<tempfile::TempDir> {
    match std::env::var("MSP_BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d),
        Err(_) => tempfile::tempdir(),
    }
    .map_err(|e| format!("tempdir: {e}"))
}

fn msp_bin() -> PathBuf {
    std::env::var_os("MSP_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_msp")))
}

struct Server {
    child: Child,
    addr: String,
    /// stderr lines after `listening on`.
    stderr: mpsc::Receiver<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(dir: &Path, group_commit: bool) -> Res<Server> {
        let mut cmd = Command::new(msp_bin());
        cmd.args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--idle-unload-ms",
            "0",
            "--data-dir",
        ])
        .arg(dir)
        .env_remove("MSP_CRASH_AT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        if !group_commit {
            cmd.arg("--no-group-commit");
        }
        let mut child = cmd.spawn().map_err(|e| format!("spawn msp serve: {e}"))?;
        let mut err = BufReader::new(child.stderr.take().ok_or("no stderr")?);
        let mut line = String::new();
        let addr = loop {
            line.clear();
            let n = err
                .read_line(&mut line)
                .map_err(|e| format!("stderr: {e}"))?;
            if n == 0 {
                return Err("msp serve exited before listening".into());
            }
            if let Some(a) = line.trim().strip_prefix("listening on ") {
                break a.to_string();
            }
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut l = String::new();
            while err.read_line(&mut l).map(|n| n > 0).unwrap_or(false) {
                let _ = tx.send(std::mem::take(&mut l));
            }
        });
        Ok(Server {
            child,
            addr,
            stderr: rx,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, wait for the exit, and read the fdatasync/batch counts the
    /// host prints (None from a host that prints none).
    fn stop(mut self) -> Res<Option<(u64, u64)>> {
        let pid = self.pid().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                if !status.success() {
                    return Err(format!("msp serve exited with {status}"));
                }
                break;
            }
            if Instant::now() > deadline {
                return Err("msp serve did not shut down".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut counts = None;
        while let Ok(l) = self.stderr.recv_timeout(Duration::from_millis(200)) {
            // "msp serve: N fdatasyncs in M batches"
            let w: Vec<&str> = l.split_whitespace().collect();
            if let [_, _, n, "fdatasyncs", "in", m, "batches"] = w.as_slice() {
                counts = n.parse().ok().zip(m.parse().ok());
            }
        }
        Ok(counts)
    }

    /// SIGKILL.
    fn kill9(mut self) -> Res<()> {
        self.child.kill().map_err(|e| format!("kill: {e}"))?;
        let _ = self.child.wait();
        Ok(())
    }
}

struct Conn {
    w: TcpStream,
    r: BufReader<TcpStream>,
    next_id: u64,
}

impl Conn {
    fn open(addr: &str) -> Res<Conn> {
        let s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(120)))
            .map_err(|e| e.to_string())?;
        let r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
        let mut c = Conn {
            w: s,
            r,
            next_id: 1,
        };
        let init = c.call(
            "initialize",
            json!({"clientInfo": {"name": "msp_bench", "version": "1"}}),
        )?;
        if init.get("result").is_none() {
            return Err(format!("initialize: {init}"));
        }
        c.w.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"initialized\"}\n")
            .map_err(|e| e.to_string())?;
        Ok(c)
    }

    fn send(&mut self, method: &str, params: Value) -> Res<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .map_err(|e| e.to_string())?;
        line.push(b'\n');
        self.w.write_all(&line).map_err(|e| format!("write: {e}"))?;
        Ok(id)
    }

    /// The next response (notifications and server requests skipped).
    fn response(&mut self) -> Res<Value> {
        loop {
            let mut buf = String::new();
            let n = self
                .r
                .read_line(&mut buf)
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("the host closed the connection".into());
            }
            let v: Value = serde_json::from_str(&buf).map_err(|e| format!("{e}: {buf}"))?;
            if v.get("method").is_none() && v.get("id").is_some() {
                return Ok(v);
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Res<Value> {
        let id = self.send(method, params)?;
        let v = self.response()?;
        if v["id"] != json!(id) {
            return Err(format!("answer to another request: {v}"));
        }
        Ok(v)
    }
}

fn v7() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// CPU time of a process's live threads in microseconds, as the scheduler
/// counts it (`/proc/PID/task/*/schedstat`: nanoseconds on a CPU). Precise,
/// unlike the tick-sampled `/proc/PID/stat`, which charges a whole 10 ms
/// tick to whoever runs when it fires and so overstates a process that
/// wakes up thousands of times a second; threads that exit are not counted
/// (the host's threads live as long as it does).
fn cpu_us(pid: u32) -> Res<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|e| e.to_string())?;
    let mut ns = 0u64;
    for t in tasks.flatten() {
        let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) else {
            continue; // the thread just exited
        };
        ns += s
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or("bad schedstat")?;
    }
    Ok(ns / 1000)
}

/// Total CPU time (user + system, every thread, dead ones included) of a
/// process, in microseconds (`/proc/PID/stat`, 100 ticks per second).
#[allow(dead_code)] // kept to compare with `cpu_us`
fn cpu_us_ticks(pid: u32) -> Res<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| e.to_string())?;
    let after = stat.rsplit_once(')').ok_or("bad stat")?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> Res<u64> {
        f.get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| "bad stat field".to_string())
    };
    // Fields 14 and 15 of the man page; index 0 here is field 3.
    Ok((ticks(11)? + ticks(12)?) * 10_000)
}

fn rss_mb(pid: u32) -> Res<f64> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| e.to_string())?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or("no VmRSS")?;
    Ok(kb / 1024.0)
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1e3
}

// ----- the disk -----------------------------------------------------------

/// Raw fdatasync latency of this disk.
#[derive(Debug, Clone, Copy)]
struct Fsync {
    p50_ms: f64,
    p99_ms: f64,
    mean_ms: f64,
}

fn fsync_raw(n: usize) -> Res<Fsync> {
    let dir = bench_dir()?;
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("raw"))
        .map_err(|e| e.to_string())?;
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        f.write_all(&[b'x'; 100]).map_err(|e| e.to_string())?;
        let t0 = Instant::now();
        f.sync_data().map_err(|e| format!("fdatasync: {e}"))?;
        lat.push(t0.elapsed());
    }
    lat.sort_unstable();
    Ok(Fsync {
        p50_ms: pct(&lat, 0.5),
        p99_ms: pct(&lat, 0.99),
        mean_ms: lat.iter().map(|d| d.as_secs_f64() * 1e3).sum::<f64>() / n as f64,
    })
}

// ----- admission ----------------------------------------------------------

/// One closed-loop measurement.
#[derive(Debug, Clone)]
struct Stats {
    acks: usize,
    acks_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// Server CPU per ack in the measured window (None for SQLite, which
    /// runs in this process).
    cpu_us_per_ack: Option<f64>,
    /// Acks per fdatasync and per batch over the host's whole life.
    acks_per_fsync: Option<f64>,
    acks_per_batch: Option<f64>,
}

/// What each client thread hands back: latencies of commands that started
/// and ended inside the window, acks in the window, acks in all.
type ClientOut = (Vec<Duration>, usize, usize);

fn admission(
    clients: usize,
    sessions: usize,
    group_commit: bool,
    warmup: Duration,
    window: Duration,
) -> Res<Stats> {
    let dir = bench_dir()?;
    let host = Server::start(dir.path(), group_commit)?;
    let sids: Vec<String> = (0..sessions).map(|_| v7()).collect();
    {
        let mut setup = Conn::open(&host.addr)?;
        for sid in &sids {
            let r = setup.call(
                "session/start",
                json!({"commandId": v7(), "sessionId": sid}),
            )?;
            if r.get("result").is_none() {
                return Err(format!("session/start: {r}"));
            }
        }
        // Disconnecting unsubscribes; sessions stay loaded (idle unload
        // off), so the clients' commands need no resume.
    }
    let barrier = Arc::new(Barrier::new(clients + 1));
    let start = Arc::new(std::sync::OnceLock::<Instant>::new());
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            let addr = host.addr.clone();
            let sids = sids.clone();
            let barrier = Arc::clone(&barrier);
            let start = Arc::clone(&start);
            std::thread::spawn(move || -> Res<ClientOut> {
                let mut conn = Conn::open(&addr)?;
                barrier.wait();
                let t0 = *start.get().ok_or("no start")?;
                let (from, to) = (t0 + warmup, t0 + warmup + window);
                let mut revision: BTreeMap<usize, u64> = BTreeMap::new();
                let (mut lat, mut in_window, mut all) = (Vec::new(), 0usize, 0usize);
                let mut k = 0usize;
                loop {
                    let began = Instant::now();
                    if began >= to {
                        break;
                    }
                    let s = (c + k * clients) % sessions;
                    k += 1;
                    let rev = revision.get(&s).copied().unwrap_or(0);
                    let r = conn.call(
                        "state/update",
                        json!({"commandId": v7(), "sessionId": sids[s],
                               "expectedRevision": rev, "set": {"k": rev}}),
                    )?;
                    let ended = Instant::now();
                    if let Some(n) = r["result"]["revision"].as_u64() {
                        revision.insert(s, n);
                    } else if let Some(n) = r["error"]["data"]["currentRevision"].as_u64() {
                        // A stale_revision rejection: a durable intake too.
                        revision.insert(s, n);
                    } else {
                        return Err(format!("unexpected answer {r}"));
                    }
                    all += 1;
                    if ended >= from && ended < to {
                        in_window += 1;
                        if began >= from {
                            lat.push(ended - began);
                        }
                    }
                }
                Ok((lat, in_window, all))
            })
        })
        .collect();
    let t0 = Instant::now();
    start.set(t0).map_err(|_| "start set twice")?;
    barrier.wait();
    std::thread::sleep(warmup);
    let cpu0 = cpu_us(host.pid())?;
    let tick0 = cpu_us_ticks(host.pid())?;
    std::thread::sleep((t0 + warmup + window).saturating_duration_since(Instant::now()));
    let cpu1 = cpu_us(host.pid())?;
    let tick1 = cpu_us_ticks(host.pid())?;
    if std::env::var_os("MSP_BENCH_TICKS").is_some() {
        eprintln!(
            "cpu: schedstat {} us, ticks {} us",
            cpu1 - cpu0,
            tick1 - tick0
        );
    }
    let (mut lat, mut acks, mut all) = (Vec::new(), 0usize, sessions);
    for w in workers {
        let (l, a, n) = w.join().map_err(|_| "client panicked")??;
        lat.extend(l);
        acks += a;
        all += n;
    }
    let counts = host.stop()?;
    lat.sort_unstable();
    if acks == 0 {
        return Err("no acks in the window".into());
    }
    Ok(Stats {
        acks,
        acks_per_s: acks as f64 / window.as_secs_f64(),
        p50_ms: pct(&lat, 0.5),
        p99_ms: pct(&lat, 0.99),
        cpu_us_per_ack: Some((cpu1 - cpu0) as f64 / acks as f64),
        acks_per_fsync: counts.map(|(n, _)| all as f64 / n.max(1) as f64),
        acks_per_batch: counts.map(|(_, m)| all as f64 / m.max(1) as f64),
    })
}

// ----- SQLite -------------------------------------------------------------

fn sqlite(clients: usize, warmup: Duration, window: Duration) -> Res<Stats> {
    use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
    let dir = bench_dir()?;
    let path = dir.path().join("ledger.db");
    let open = |path: &Path| -> Res<Connection> {
        let c = Connection::open(path).map_err(|e| e.to_string())?;
        c.busy_timeout(Duration::from_secs(60))
            .map_err(|e| e.to_string())?;
        let mode: String = c
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(|e| e.to_string())?;
        if mode != "wal" {
            return Err(format!("journal_mode is {mode}"));
        }
        c.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| e.to_string())?;
        Ok(c)
    };
    open(&path)?
        .execute_batch(
            "CREATE TABLE ledger (command_id TEXT PRIMARY KEY, payload_hash INTEGER NOT NULL, answer TEXT NOT NULL)",
        )
        .map_err(|e| e.to_string())?;
    let barrier = Arc::new(Barrier::new(clients + 1));
    let start = Arc::new(std::sync::OnceLock::<Instant>::new());
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            let barrier = Arc::clone(&barrier);
            let start = Arc::clone(&start);
            let conn = open(&path);
            std::thread::spawn(move || -> Res<ClientOut> {
                let mut db = conn?;
                barrier.wait();
                let t0 = *start.get().ok_or("no start")?;
                let (from, to) = (t0 + warmup, t0 + warmup + window);
                let (mut lat, mut in_window, mut all) = (Vec::new(), 0usize, 0usize);
                let mut k = 0u64;
                loop {
                    let began = Instant::now();
                    if began >= to {
                        break;
                    }
                    let cid = v7();
                    let payload = format!("{{\"method\":\"state/update\",\"client\":{c},\"k\":{k}}}");
                    k += 1;
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    payload.hash(&mut h);
                    let hash = h.finish() as i64;
                    let tx = db
                        .transaction_with_behavior(TransactionBehavior::Immediate)
                        .map_err(|e| e.to_string())?;
                    let known: Option<(i64, String)> = tx
                        .query_row(
                            "SELECT payload_hash, answer FROM ledger WHERE command_id = ?1",
                            params![cid],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                        .optional()
                        .map_err(|e| e.to_string())?;
                    match known {
                        Some((h, _)) if h != hash => return Err("command_id_conflict".into()),
                        Some(_) => {}
                        None => {
                            let answer = format!("{{\"commandId\":\"{cid}\",\"status\":\"accepted\"}}");
                            tx.execute(
                                "INSERT INTO ledger (command_id, payload_hash, answer) VALUES (?1, ?2, ?3)",
                                params![cid, hash, answer],
                            )
                            .map_err(|e| e.to_string())?;
                        }
                    }
                    tx.commit().map_err(|e| e.to_string())?;
                    let ended = Instant::now();
                    all += 1;
                    if ended >= from && ended < to {
                        in_window += 1;
                        if began >= from {
                            lat.push(ended - began);
                        }
                    }
                }
                Ok((lat, in_window, all))
            })
        })
        .collect();
    start.set(Instant::now()).map_err(|_| "start set twice")?;
    barrier.wait();
    let (mut lat, mut acks) = (Vec::new(), 0usize);
    for w in workers {
        let (l, a, _) = w.join().map_err(|_| "client panicked")??;
        lat.extend(l);
        acks += a;
    }
    lat.sort_unstable();
    if acks == 0 {
        return Err("no SQLite commits in the window".into());
    }
    Ok(Stats {
        acks,
        acks_per_s: acks as f64 / window.as_secs_f64(),
        p50_ms: pct(&lat, 0.5),
        p99_ms: pct(&lat, 0.99),
        cpu_us_per_ack: None,
        acks_per_fsync: None,
        acks_per_batch: None,
    })
}

// ----- recovery -----------------------------------------------------------

#[derive(Debug)]
struct Recover {
    records: usize,
    log_mb: f64,
    archive_mb: f64,
    snapshot_mb: f64,
    write_s: f64,
    /// From the restart to the host listening (the replay of the dead
    /// intake journal comes after, before the first input is served: it
    /// is inside `resume_ms`).
    start_ms: f64,
    resume_ms: f64,
    rss_mb: f64,
}

/// Writes a session of about `records` records (each accepted
/// `state/update` adds an intake pair and an event), kills the host with
/// SIGKILL, starts another and times `session/resume`.
fn recover(records: usize) -> Res<Recover> {
    const WINDOW: usize = 256;
    let dir = bench_dir()?;
    let sid = v7();
    let host = Server::start(dir.path(), true)?;
    let mut c = Conn::open(&host.addr)?;
    let r = c.call(
        "session/start",
        json!({"commandId": v7(), "sessionId": sid}),
    )?;
    if r.get("result").is_none() {
        return Err(format!("session/start: {r}"));
    }
    let log = dir.path().join("sessions").join(&sid).join("session.log");
    // Logical records, and the snapshot's size (0: the log has none).
    let count = |log: &Path| -> Res<(usize, u64)> {
        let bytes = std::fs::read(log).map_err(|e| e.to_string())?;
        let d = msp::core::record::decode_log(&bytes)
            .map_err(|e| format!("the log does not decode: {e:?}"))?;
        Ok(match d.records.first() {
            Some((msp::core::record::Record::Snapshot(s), _)) => (
                s.record_count as usize + d.records.len() - 1,
                d.snapshot_bytes,
            ),
            _ => (d.records.len(), 0),
        })
    };
    let commands = records.div_ceil(3);
    let t0 = Instant::now();
    let (mut sent, mut answered) = (0usize, 0usize);
    while answered < commands {
        while sent < commands && sent - answered < WINDOW {
            c.send(
                "state/update",
                json!({"commandId": v7(), "sessionId": sid, "expectedRevision": sent, "set": {"k": sent}}),
            )?;
            sent += 1;
        }
        let a = c.response()?;
        if a["result"]["revision"].as_u64() != Some(answered as u64 + 1) {
            return Err(format!("pipelined update {answered} answered {a}"));
        }
        answered += 1;
    }
    let write_s = t0.elapsed().as_secs_f64();
    drop(c);
    host.kill9()?;
    let (on_disk, snapshot_bytes) = count(&log)?;
    let log_mb = std::fs::metadata(&log).map_err(|e| e.to_string())?.len() as f64 / 1e6;
    let archive_mb =
        std::fs::metadata(log.with_file_name("history.log")).map_or(0.0, |m| m.len() as f64 / 1e6);
    let t_start = Instant::now();
    let host = Server::start(dir.path(), true)?;
    let start_ms = t_start.elapsed().as_secs_f64() * 1e3;
    let mut c = Conn::open(&host.addr)?;
    let t1 = Instant::now();
    let r = c.call(
        "session/resume",
        json!({"commandId": v7(), "sessionId": sid}),
    )?;
    let resume_ms = t1.elapsed().as_secs_f64() * 1e3;
    if r.get("result").is_none() {
        return Err(format!("session/resume: {r}"));
    }
    let rss_mb = rss_mb(host.pid())?;
    host.stop()?;
    Ok(Recover {
        records: on_disk,
        log_mb,
        archive_mb,
        snapshot_mb: snapshot_bytes as f64 / 1e6,
        write_s,
        start_ms,
        resume_ms,
        rss_mb,
    })
}

fn print_recover(r: &Recover) {
    println!(
        "recover: {} records ({:.1} MB log, {:.1} MB archive, {:.1} MB snapshot; written in {:.1} s): after kill -9 the next host listened after {:.0} ms and answered session/resume {:.0} ms later (the dead intake journal's replay included); host RSS {:.0} MB ({:.1}x the log and archive, {})",
        r.records,
        r.log_mb,
        r.archive_mb,
        r.snapshot_mb,
        r.write_s,
        r.start_ms,
        r.resume_ms,
        r.rss_mb,
        r.rss_mb / (r.log_mb + r.archive_mb).max(1e-9),
        if r.snapshot_mb > 0.0 {
            format!("{:.2}x the snapshot", r.rss_mb / r.snapshot_mb)
        } else {
            "no snapshot".into()
        }
    );
}

// ----- the whole run --------------------------------------------------------

const CLIENTS: [usize; 3] = [1, 16, 64];
const SESSIONS: [usize; 3] = [1, 8, 64];

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

fn all(secs: f64) -> Res<()> {
    let warmup = Duration::from_millis(300);
    let window = Duration::from_secs_f64(secs);
    let disk = fsync_raw(200)?;
    println!(
        "disk: fdatasync of 100 B: p50 {:.2} ms, p99 {:.2} ms, mean {:.2} ms (the unit 'F' below is the p50)",
        disk.p50_ms, disk.p99_ms, disk.mean_ms
    );
    let f = disk.p50_ms;
    let mut lite = BTreeMap::new();
    for c in CLIENTS {
        lite.insert(c, sqlite(c, warmup, window)?);
    }
    println!(
        "\n{:>7} {:>8} {:>4} {:>7} {:>9} {:>8} {:>8} {:>6} {:>8} {:>9} {:>9} {:>9}",
        "clients",
        "sessions",
        "gc",
        "acks",
        "acks/s",
        "p50 ms",
        "p99 ms",
        "p99/F",
        "us/ack",
        "acks/fs",
        "acks/batch",
        "x sqlite"
    );
    let mut on_at = BTreeMap::new();
    for c in CLIENTS {
        for s in SESSIONS {
            let on = admission(c, s, true, warmup, window)?;
            let off = admission(c, s, false, warmup, window)?;
            for (label, st) in [("on", &on), ("off", &off)] {
                println!(
                    "{:>7} {:>8} {:>4} {:>7} {:>9.0} {:>8.2} {:>8.2} {:>6.1} {:>8} {:>9} {:>9} {:>9.1}",
                    c,
                    s,
                    label,
                    st.acks,
                    st.acks_per_s,
                    st.p50_ms,
                    st.p99_ms,
                    st.p99_ms / f,
                    opt(st.cpu_us_per_ack, 1),
                    opt(st.acks_per_fsync, 1),
                    opt(st.acks_per_batch, 1),
                    st.acks_per_s / lite[&c].acks_per_s
                );
            }
            println!(
                "{:>7} {:>8} {:>4} group commit on/off: acks/s {:.1}x, p99 {:.2}x",
                "",
                "",
                "",
                on.acks_per_s / off.acks_per_s,
                on.p99_ms / off.p99_ms
            );
            on_at.insert((c, s), on);
        }
    }
    println!();
    for c in CLIENTS {
        let st = &lite[&c];
        println!(
            "sqlite {c:>2} clients: {:.0} commits/s, p50 {:.2} ms, p99 {:.2} ms ({:.1} F)",
            st.acks_per_s,
            st.p50_ms,
            st.p99_ms,
            st.p99_ms / f
        );
    }
    for c in CLIENTS {
        println!(
            "{c:>2} clients, group commit: acks/s on 64 sessions / on 1 session = {:.2}",
            on_at[&(c, 64)].acks_per_s / on_at[&(c, 1)].acks_per_s
        );
    }
    Ok(())
}

/// The `cargo test` smoke run: every benchmark at a tiny size, against the
/// real binary; errors fail it, timings never do.
#[allow(dead_code)] // called from tests/bench_smoke.rs, not from main
pub fn smoke() -> Res<()> {
    let d = fsync_raw(5)?;
    assert_finite(d.p50_ms, "fsync p50")?;
    let w = Duration::from_millis(50);
    for gc in [true, false] {
        let st = in_a_window(|win| admission(2, 2, gc, w, win))?;
        assert_finite(st.p99_ms, "admission p99")?;
        let per_fsync = st
            .acks_per_fsync
            .ok_or("the host printed no fdatasync count")?;
        if per_fsync <= 0.0 {
            return Err(format!("acks per fdatasync {per_fsync}"));
        }
    }
    let st = in_a_window(|win| sqlite(2, w, win))?;
    assert_finite(st.p99_ms, "sqlite p99")?;
    let r = recover(300)?;
    if r.records < 300 {
        return Err(format!("recover wrote {} records, asked 300", r.records));
    }
    print_recover(&r);
    Ok(())
}

/// Runs a measurement in a 0.3 s window, again in 1.2 s and 4.8 s ones
/// if nothing completed inside it: on a loaded machine (CI's two cores
/// running other tests) a short window can see no ack at all, which is
/// timing, not an error. Nothing in 4.8 s is one.
fn in_a_window<T>(mut run: impl FnMut(Duration) -> Res<T>) -> Res<T> {
    let mut last = String::new();
    for ms in [300, 1_200, 4_800] {
        match run(Duration::from_millis(ms)) {
            Err(e) if e.contains("in the window") => last = e,
            other => return other,
        }
    }
    Err(format!("{last} (4.8 s)"))
}

fn assert_finite(v: f64, what: &str) -> Res<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(format!("{what} is {v}"))
    }
}
