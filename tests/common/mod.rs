//! Shared helpers of the `serve_*` integration tests: start the real `msp`
//! binary on a temporary data directory, talk to it over stdio, TCP or a
//! Unix socket, and read frames with a generous timeout (never
//! sleep-and-hope: read until the expected frame arrives, or fail).
#![allow(dead_code)] // each test file uses a different subset

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long any single expectation may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// A fresh UUIDv7 string (command and session ids).
pub fn v7() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A running `msp serve` process, killed (SIGKILL) when dropped.
pub struct Server {
    child: Child,
    /// The data directory.
    pub dir: PathBuf,
    /// `host:port` for `--listen`, the socket path for `--socket`.
    pub addr: Option<String>,
    stderr: Option<Receiver<String>>,
}

/// The transport a [`Server`] is started with.
pub enum Via {
    /// `--stdio`; the [`Client`] comes with the server.
    Stdio,
    /// `--listen 127.0.0.1:0`.
    Tcp,
    /// `--socket DIR/../msp.sock`.
    Unix(PathBuf),
}

/// `msp serve` on `dir` with extra arguments and environment. For stdio the
/// client of the process's stdin/stdout is returned too.
pub fn start(
    dir: &Path,
    via: Via,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Server, Option<Client>) {
    start_cmd(
        Command::new(env!("CARGO_BIN_EXE_msp")),
        dir,
        via,
        extra,
        env,
    )
}

/// [`start`] with a file-size limit of `blocks` 512-byte blocks on the
/// process (`ulimit -f`, with SIGXFSZ ignored): a write past the limit fails
/// with `EFBIG`, after writing what fits. A disk that fills up mid-record,
/// without a fault-injecting file system.
pub fn start_with_file_limit(dir: &Path, blocks: u32, extra: &[&str]) -> (Server, Option<Client>) {
    let mut cmd = Command::new("sh");
    // `exec` keeps the pid, and an ignored signal stays ignored across it.
    cmd.arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f {blocks}; exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_msp"));
    start_cmd(cmd, dir, Via::Stdio, extra, &[])
}

/// [`start`] of `cmd`, the `msp` binary or a command that execs it with
/// the arguments appended here.
fn start_cmd(
    mut cmd: Command,
    dir: &Path,
    via: Via,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Server, Option<Client>) {
    cmd.arg("serve").arg("--data-dir").arg(dir);
    match &via {
        Via::Stdio => {
            cmd.arg("--stdio");
        }
        Via::Tcp => {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        Via::Unix(p) => {
            cmd.arg("--socket").arg(p);
        }
    }
    cmd.args(extra);
    cmd.env_remove("MSP_CRASH_AT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn msp serve");
    let stderr = lines_of(child.stderr.take().expect("stderr"));
    let mut server = Server {
        child,
        dir: dir.to_path_buf(),
        addr: None,
        stderr: Some(stderr),
    };
    match via {
        Via::Stdio => {
            let stdin = server.child.stdin.take().expect("stdin");
            let stdout = server.child.stdout.take().expect("stdout");
            let client = Client::new(Box::new(stdin), Box::new(stdout), None);
            (server, Some(client))
        }
        Via::Tcp | Via::Unix(_) => {
            let line = server.stderr_line_with("listening on ");
            let addr = line.trim().trim_start_matches("listening on ").to_string();
            server.addr = Some(addr);
            (server, None)
        }
    }
}

fn lines_of(stderr: ChildStderr) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stderr);
        let mut line = String::new();
        while r.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            if tx.send(std::mem::take(&mut line)).is_err() {
                // Nobody listens any more: keep draining so the pipe never
                // fills and blocks the server.
                continue;
            }
        }
    });
    rx
}

impl Server {
    /// Waits for a stderr line containing `needle` (fails after
    /// [`TIMEOUT`]).
    pub fn stderr_line_with(&mut self, needle: &str) -> String {
        let rx = self.stderr.as_ref().expect("stderr");
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return l,
                Ok(_) => continue,
                Err(e) => panic!("no stderr line with {needle:?}: {e:?}"),
            }
        }
    }

    /// A new TCP client of this server.
    pub fn tcp(&self) -> Client {
        let addr = self.addr.as_deref().expect("a --listen server");
        let s = TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        let r = s.try_clone().expect("clone");
        let shut = s.try_clone().expect("clone");
        Client::new(
            Box::new(s),
            Box::new(r),
            Some(Box::new(move || {
                let _ = shut.shutdown(Shutdown::Both);
            })),
        )
    }

    /// A new Unix-socket client of this server.
    pub fn unix(&self) -> Client {
        let path = self.addr.as_deref().expect("a --socket server");
        let s = UnixStream::connect(path).expect("connect");
        let r = s.try_clone().expect("clone");
        let shut = s.try_clone().expect("clone");
        Client::new(
            Box::new(s),
            Box::new(r),
            Some(Box::new(move || {
                let _ = shut.shutdown(Shutdown::Both);
            })),
        )
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and reap.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM.
    pub fn sigterm(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(ok.success(), "kill -TERM failed");
    }

    /// Waits for the process to exit (fails after [`TIMEOUT`]).
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "msp serve did not exit within {TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One connection to a server: send lines, read frames.
pub struct Client {
    writer: Option<Box<dyn Write + Send>>,
    frames: Receiver<Option<Vec<u8>>>,
    /// Frames read but not consumed yet, in arrival order.
    pub backlog: VecDeque<Value>,
    /// Every frame ever read, in arrival order.
    pub all: Vec<Value>,
    next_id: u64,
    eof: bool,
    shutdown: Option<Box<dyn FnMut() + Send>>,
}

impl Client {
    fn new(
        writer: Box<dyn Write + Send>,
        reader: Box<dyn Read + Send>,
        shutdown: Option<Box<dyn FnMut() + Send>>,
    ) -> Client {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(reader);
            loop {
                let mut line = Vec::new();
                match r.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(None);
                        return;
                    }
                    Ok(_) => {
                        if tx.send(Some(line)).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Client {
            writer: Some(writer),
            frames: rx,
            backlog: VecDeque::new(),
            all: Vec::new(),
            next_id: 1000,
            eof: false,
            shutdown,
        }
    }

    /// Writes raw bytes (no newline added). False if the peer is gone.
    pub fn send_raw(&mut self, bytes: &[u8]) -> bool {
        match self.writer.as_mut() {
            Some(w) => w.write_all(bytes).and_then(|()| w.flush()).is_ok(),
            None => false,
        }
    }

    /// Writes one JSON value as a line.
    pub fn send(&mut self, v: &Value) -> bool {
        let mut line = serde_json::to_vec(v).expect("serialise");
        line.push(b'\n');
        self.send_raw(&line)
    }

    /// Ends this side's input (stdin EOF for a stdio server).
    pub fn close_input(&mut self) {
        self.writer = None;
        if let Some(f) = self.shutdown.as_mut() {
            f();
        }
    }

    /// Reads one more frame from the wire: `None` at end of stream. Fails
    /// after [`TIMEOUT`].
    fn read_frame(&mut self, timeout: Duration) -> Option<Value> {
        if self.eof {
            return None;
        }
        match self.frames.recv_timeout(timeout) {
            Ok(Some(line)) => {
                assert_eq!(line.last(), Some(&b'\n'), "frames end with a newline");
                assert!(!line.ends_with(b"\r\n"), "the server never sends \\r");
                let v: Value = serde_json::from_slice(&line).unwrap_or_else(|e| {
                    panic!(
                        "server sent non-JSON {:?}: {e}",
                        String::from_utf8_lossy(&line)
                    )
                });
                self.all.push(v.clone());
                Some(v)
            }
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                self.eof = true;
                None
            }
            Err(RecvTimeoutError::Timeout) => {
                panic!("no frame within {timeout:?}; backlog: {:#?}", self.backlog)
            }
        }
    }

    /// The first frame (backlog first, then the wire) matching `pred`;
    /// other frames stay in the backlog. Fails after [`TIMEOUT`] or at end
    /// of stream.
    pub fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(i).expect("present");
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "timed out waiting for {what}; backlog: {:#?}",
                self.backlog
            );
            match self.read_frame(left) {
                Some(v) if pred(&v) => return v,
                Some(v) => self.backlog.push_back(v),
                None => panic!(
                    "end of stream while waiting for {what}; backlog: {:#?}",
                    self.backlog
                ),
            }
        }
    }

    /// Like [`Client::wait_for`], but `None` at end of stream (for crash
    /// tests, where the server may die first).
    pub fn wait_for_or_eof(&mut self, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        if let Some(i) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(i);
        }
        loop {
            match self.read_frame(TIMEOUT) {
                Some(v) if pred(&v) => return Some(v),
                Some(v) => self.backlog.push_back(v),
                None => return None,
            }
        }
    }

    /// The next frame whatever it is (backlog first).
    pub fn next(&mut self) -> Value {
        self.wait_for("any frame", |_| true)
    }

    /// Waits for the end of the stream, collecting the frames before it.
    pub fn expect_eof(&mut self) -> Vec<Value> {
        let mut got: Vec<Value> = self.backlog.drain(..).collect();
        loop {
            match self.read_frame(TIMEOUT) {
                Some(v) => got.push(v),
                None => return got,
            }
        }
    }

    /// The response to request `id`.
    pub fn response(&mut self, id: &Value) -> Value {
        let id = id.clone();
        self.wait_for(&format!("response {id}"), move |f| {
            f.get("method").is_none() && f["id"] == id
        })
    }

    /// Sends a request with a fresh integer id and returns its response.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(&json!(id))
    }

    /// Sends a request with a fresh integer id; returns the id.
    pub fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        assert!(
            self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})),
            "server gone"
        );
        id
    }

    /// `initialize` then `initialized`; returns the initialize result.
    pub fn init(&mut self) -> Value {
        let r = self.request(
            "initialize",
            json!({"clientInfo": {"name": "serve_tests", "version": "1"}}),
        );
        assert!(r.get("result").is_some(), "initialize failed: {r}");
        assert!(self.send(&json!({"jsonrpc": "2.0", "method": "initialized"})));
        r["result"].clone()
    }

    /// `session/start` of `sid`; returns the response.
    pub fn start_session(&mut self, sid: &str) -> Value {
        self.request(
            "session/start",
            json!({"commandId": v7(), "sessionId": sid}),
        )
    }

    /// Every event of `sid`'s durable history, via `view/page` forward.
    pub fn history(&mut self, sid: &str) -> Vec<Value> {
        let mut events = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10_000 {
            let mut p = json!({"sessionId": sid, "limit": 1000});
            if let Some(c) = &cursor {
                p["cursor"] = json!(c);
            }
            let r = self.request("view/page", p);
            let res = &r["result"];
            assert!(res.is_object(), "view/page failed: {r}");
            events.extend(res["events"].as_array().expect("events").iter().cloned());
            match res["nextCursor"].as_str() {
                Some(c) if !res["events"].as_array().expect("events").is_empty() => {
                    cursor = Some(c.to_string())
                }
                _ => return events,
            }
        }
        panic!("view/page never ended");
    }
}

impl Drop for Client {
    /// Closes the connection for real (the reader thread holds a clone of
    /// the socket, which would otherwise keep it open).
    fn drop(&mut self) {
        self.close_input();
    }
}

/// `error.code` of a response (panics on a result).
pub fn code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error, got {r}"))
}

/// `error.data.kind`.
pub fn kind(r: &Value) -> &str {
    r["error"]["data"]["kind"]
        .as_str()
        .unwrap_or_else(|| panic!("no error kind in {r}"))
}

/// `error.data.reason`.
pub fn reason(r: &Value) -> &str {
    r["error"]["data"]["reason"].as_str().unwrap_or("")
}

/// The value of an answer that clients compare: `result`, or `error`
/// without its free-text `message`.
pub fn answer_value(r: &Value) -> Value {
    if let Some(res) = r.get("result") {
        return json!({"result": res});
    }
    json!({"error": {"code": r["error"]["code"], "data": r["error"]["data"]}})
}
