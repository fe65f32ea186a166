//! Group-commit benchmark: per-command ack latency of `msp serve` with
//! group commit on, and with `--no-group-commit` (every intake gets an
//! fsync of its own), measured in the same run on the same machine.
//!
//! 64 concurrent TCP clients (none subscribed, so only acks flow) each send
//! N `state/update` commands, one at a time, to one shared session. The
//! `expectedRevision` is each client's latest guess, so many are stale: a
//! `stale_revision` rejection is a durable intake too and needs an fsync
//! before its answer, exactly like an acceptance.
//!
//! Run: `cargo bench --bench ack_latency`. Knobs: `ACK_BENCH_CLIENTS`
//! (default 64), `ACK_BENCH_COMMANDS` (per client, default 30),
//! `ACK_BENCH_DIR` (where the data directories go; default the system
//! temp dir, which must be a real disk for the numbers to mean anything).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

struct Stats {
    label: &'static str,
    count: usize,
    accepted: usize,
    p50_ms: f64,
    p99_ms: f64,
    mean_ms: f64,
    max_ms: f64,
    wall_ms: f64,
    /// The fastest and slowest client's mean latency: how fairly the host
    /// shares its fsyncs among clients.
    client_mean_ms: (f64, f64),
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is understood.
    let clients = env_usize("ACK_BENCH_CLIENTS", 64);
    let commands = env_usize("ACK_BENCH_COMMANDS", 30);
    let on = run("group commit", true, clients, commands);
    let off = run("no group commit", false, clients, commands);
    println!("ack latency, {clients} clients x {commands} state/update each, one shared session");
    println!(
        "{:<16} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>19}",
        "mode",
        "acks",
        "accepted",
        "p50 ms",
        "p99 ms",
        "mean ms",
        "max ms",
        "wall ms",
        "client mean min/max"
    );
    for s in [&on, &off] {
        println!(
            "{:<16} {:>7} {:>9} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.0} {:>9.2}/{:<9.2}",
            s.label,
            s.count,
            s.accepted,
            s.p50_ms,
            s.p99_ms,
            s.mean_ms,
            s.max_ms,
            s.wall_ms,
            s.client_mean_ms.0,
            s.client_mean_ms.1
        );
    }
    println!(
        "ratio (no group commit / group commit): p50 {:.1}x, p99 {:.1}x, mean {:.1}x, throughput {:.1}x",
        off.p50_ms / on.p50_ms,
        off.p99_ms / on.p99_ms,
        off.mean_ms / on.mean_ms,
        off.wall_ms / on.wall_ms
    );
}

struct Host {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_host(group_commit: bool) -> Host {
    let dir = match std::env::var("ACK_BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d),
        Err(_) => tempfile::tempdir(),
    }
    .expect("tempdir");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_msp"));
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--idle-unload-ms",
        "0",
        "--data-dir",
    ])
    .arg(dir.path())
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    if !group_commit {
        cmd.arg("--no-group-commit");
    }
    let mut child = cmd.spawn().expect("spawn msp serve");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    let addr = loop {
        line.clear();
        let n = err.read_line(&mut line).expect("read stderr");
        assert!(n > 0, "msp serve exited before listening");
        if let Some(a) = line.trim().strip_prefix("listening on ") {
            break a.to_string();
        }
    };
    // Keep draining stderr so the host never blocks on it.
    std::thread::spawn(move || {
        let mut sink = String::new();
        while err.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
            sink.clear();
        }
    });
    Host {
        child,
        addr,
        _dir: dir,
    }
}

struct Conn {
    w: TcpStream,
    r: BufReader<TcpStream>,
    next_id: u64,
}

impl Conn {
    fn new(addr: &str) -> Conn {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        s.set_read_timeout(Some(Duration::from_secs(120)))
            .expect("timeout");
        Conn {
            r: BufReader::new(s.try_clone().expect("clone")),
            w: s,
            next_id: 1,
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .expect("serialise");
        line.push(b'\n');
        self.w.write_all(&line).expect("write");
        loop {
            let mut buf = String::new();
            let n = self.r.read_line(&mut buf).expect("read");
            assert!(n > 0, "host closed the connection");
            let v: Value = serde_json::from_str(&buf).expect("JSON frame");
            if v["id"] == json!(id) && v.get("method").is_none() {
                return v;
            }
        }
    }

    fn init(&mut self) {
        let r = self.call(
            "initialize",
            json!({"clientInfo": {"name": "ack_bench", "version": "1"}}),
        );
        assert!(r.get("result").is_some(), "initialize: {r}");
        self.w
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"initialized\"}\n")
            .expect("write");
    }
}

fn run(label: &'static str, group_commit: bool, clients: usize, commands: usize) -> Stats {
    let host = spawn_host(group_commit);
    let sid = uuid::Uuid::now_v7().to_string();
    {
        let mut setup = Conn::new(&host.addr);
        setup.init();
        let r = setup.call(
            "session/start",
            json!({"commandId": uuid::Uuid::now_v7().to_string(), "sessionId": sid}),
        );
        assert!(r.get("result").is_some(), "session/start: {r}");
        // Disconnecting unsubscribes; the session stays loaded
        // (--idle-unload-ms 0), so the workers' commands need no resume.
    }
    let barrier = Arc::new(Barrier::new(clients + 1));
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let addr = host.addr.clone();
            let sid = sid.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut c = Conn::new(&addr);
                c.init();
                barrier.wait();
                let mut revision = 0u64;
                let mut accepted = 0usize;
                let mut latencies = Vec::with_capacity(commands);
                for _ in 0..commands {
                    let params = json!({"commandId": uuid::Uuid::now_v7().to_string(), "sessionId": sid,
                        "expectedRevision": revision, "set": {"k": revision}});
                    let t0 = Instant::now();
                    let r = c.call("state/update", params);
                    latencies.push(t0.elapsed());
                    if let Some(rev) = r["result"]["revision"].as_u64() {
                        revision = rev;
                        accepted += 1;
                    } else if let Some(rev) = r["error"]["data"]["currentRevision"].as_u64() {
                        revision = rev;
                    } else {
                        panic!("unexpected answer {r}");
                    }
                }
                (latencies, accepted)
            })
        })
        .collect();
    barrier.wait();
    let t0 = Instant::now();
    let mut all = Vec::new();
    let mut accepted = 0;
    let mut client_means = Vec::new();
    for w in workers {
        let (l, a) = w.join().expect("worker");
        let sum: Duration = l.iter().sum();
        client_means.push(sum.as_secs_f64() * 1e3 / l.len().max(1) as f64);
        all.extend(l);
        accepted += a;
    }
    client_means.sort_by(f64::total_cmp);
    let wall = t0.elapsed();
    drop(host);
    all.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let pct = |p: f64| ms(all[((all.len() as f64 * p).ceil() as usize).clamp(1, all.len()) - 1]);
    Stats {
        label,
        count: all.len(),
        accepted,
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        mean_ms: all.iter().map(|d| ms(*d)).sum::<f64>() / all.len() as f64,
        max_ms: ms(*all.last().expect("latencies")),
        wall_ms: ms(wall),
        client_mean_ms: (client_means[0], client_means[client_means.len() - 1]),
    }
}
