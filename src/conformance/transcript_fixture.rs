//! `msp conformance serve-fixture`: a canned host that plays one transcript
//! to a real client.
//!
//! The fixture walks the transcript in order. Server lines are written as
//! recorded (byte for byte, except the values the client minted, see
//! below); at each client line it reads the client's next frame and matches
//! it structurally against the recorded one:
//!
//! - the client's own request ids and every client-minted identifier
//!   (`commandId`, and the `turnId`s derived from it, `sessionId` when the
//!   client chose it) are unified one-to-one with the recorded ones, and the
//!   server lines that follow carry the client's values (a response goes
//!   out under the client's request id, an ack names the client's
//!   `commandId`);
//! - values the fixture itself sent (a server-minted `sessionId`,
//!   `approvalId`, a cursor) must come back exactly as sent;
//! - the id of a response to a server request must be the id the fixture
//!   used;
//! - `params.clientInfo` is compared by type only (a real client names
//!   itself); everything else exactly, unknown members included.
//!
//! The first difference stops the fixture with a report naming the
//! transcript line and every differing JSON path. [`Fixture`] is sans-IO;
//! [`main`] drives it over stdin and stdout.

use std::io::{BufRead, Write};
use std::path::Path;

use serde_json::{json, Value};

use super::raw::{rewrite_raw, string_values};
use super::{mk_diff, Dir, IdSpace, Line, Transcript, EXIT_INFRA, EXIT_MISMATCH, EXIT_PASS};
use crate::conformance::compare::{Comparator, Diff, DiffKind, Rules};
use crate::proto::ids::is_hyphenated_uuid;

/// Member name used to pin a value the fixture sent.
const PIN: &str = "\u{1}pin";

/// A client frame that does not match the transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct FixtureMismatch {
    /// The transcript line the frame was matched against (for a frame
    /// after the end, the last line).
    pub line: usize,
    /// What was expected there.
    pub label: String,
    /// The differing paths (empty when `reason` says it all).
    pub diffs: Vec<Diff>,
    /// A summary when there are no paths (input ended early, extra frame,
    /// not JSON).
    pub reason: Option<String>,
}

impl std::fmt::Display for FixtureMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = format!("line {} ({})", self.line, self.label);
        if let Some(r) = &self.reason {
            write!(f, "{at}: {r}")?;
        }
        for (i, d) in self.diffs.iter().enumerate() {
            if i > 0 || self.reason.is_some() {
                writeln!(f)?;
            }
            write!(f, "{at}: {d}")?;
        }
        Ok(())
    }
}

/// The fixture's state: where it is in the transcript and what it unified.
#[derive(Debug)]
pub struct Fixture<'a> {
    t: &'a Transcript,
    next: usize,
    cmp: Comparator,
    ids: IdSpace,
}

/// The rules client frames are matched with.
pub fn fixture_rules(t: &Transcript) -> Rules {
    let unified = [
        "**.commandId",
        "**.turnId",
        "**.expectedTurnId",
        "**.sessionId",
        "**.approvalId",
        "**.taskId",
        "**.itemId",
        "**.cursor",
        "**.after",
        PIN,
    ];
    Rules::conformance_defaults()
        .with_type_only(["params.clientInfo"])
        .and_then(|r| r.with_normalize(unified))
        .and_then(|r| r.with_normalize(t.manifest.normalize.iter().map(String::as_str)))
        .unwrap_or_else(|_| Rules::conformance_defaults())
}

impl<'a> Fixture<'a> {
    /// A fixture at the start of `t`.
    pub fn new(t: &'a Transcript) -> Fixture<'a> {
        Fixture {
            t,
            next: 0,
            cmp: Comparator::new(fixture_rules(t)),
            ids: IdSpace::default(),
        }
    }

    /// Whether every line was played.
    pub fn done(&self) -> bool {
        self.next >= self.t.lines.len()
    }

    /// The server lines up to the next client line (call once, first).
    pub fn start(&mut self) -> Vec<String> {
        self.server_lines()
    }

    fn server_lines(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(l) = self.t.lines.get(self.next) {
            if l.dir != Dir::Server {
                break;
            }
            self.next += 1;
            let line = self.rewrite_server(l);
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                self.pin_sent(&v);
            }
            out.push(line);
        }
        out
    }

    /// A recorded server line with the client's values in place of the
    /// recorded client-minted ones.
    fn rewrite_server(&self, l: &Line) -> String {
        let is_response = l.frame.as_ref().is_some_and(|f| f.get("method").is_none());
        let cmp = &self.cmp;
        let string = |s: &str| match cmp.mapped(&Value::String(s.to_string())) {
            Some(Value::String(n)) if n != s => Some(n.clone()),
            _ => None,
        };
        let ids = &self.ids;
        let top_id = |v: &Value| {
            if is_response {
                ids.mapped(v).cloned()
            } else {
                None
            }
        };
        rewrite_raw(&l.raw, &string, &top_id)
    }

    /// Values the fixture sent must come back as sent.
    fn pin_sent(&mut self, frame: &Value) {
        let mut strings = Vec::new();
        string_values(frame, &mut strings);
        for s in strings {
            let v = Value::String(s.clone());
            if (is_hyphenated_uuid(&s) || s.starts_with("v:")) && self.cmp.mapped(&v).is_none() {
                let pin = json!({ PIN: v });
                let _ = self.cmp.compare_frame(&pin, &pin);
            }
        }
    }

    /// Matches one client frame (a line without its `\n`; a trailing `\r`
    /// is tolerated) and returns the server lines to write next.
    pub fn client_frame(&mut self, raw: &str) -> Result<Vec<String>, FixtureMismatch> {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let Some(expected) = self.t.lines.get(self.next) else {
            let last = self.t.lines.last().map(|l| l.number).unwrap_or(0);
            return Err(FixtureMismatch {
                line: last,
                label: "end of transcript".into(),
                diffs: Vec::new(),
                reason: Some(format!(
                    "unexpected client frame after the end of the transcript: {raw}"
                )),
            });
        };
        debug_assert_eq!(
            expected.dir,
            Dir::Client,
            "server lines are consumed before reading"
        );
        let mismatch = |diffs: Vec<Diff>, reason: Option<String>| FixtureMismatch {
            line: expected.number,
            label: expected.label(),
            diffs,
            reason,
        };
        let received = serde_json::from_str::<Value>(raw).ok();
        let diffs = match (&expected.frame, received) {
            (None, _) => {
                let want = expected.raw.strip_suffix('\r').unwrap_or(&expected.raw);
                if want == raw {
                    Vec::new()
                } else {
                    return Err(mismatch(
                        Vec::new(),
                        Some(format!("expected the raw text {want:?}, received {raw:?}")),
                    ));
                }
            }
            (Some(_), None) => {
                return Err(mismatch(
                    Vec::new(),
                    Some(format!("expected a JSON frame, received {raw:?}")),
                ))
            }
            (Some(e), Some(r)) => self.match_frame(e, &r),
        };
        if !diffs.is_empty() {
            return Err(mismatch(diffs, None));
        }
        self.next += 1;
        Ok(self.server_lines())
    }

    fn match_frame(&mut self, e: &Value, r: &Value) -> Vec<Diff> {
        let (mut e, mut r) = (e.clone(), r.clone());
        let mut diffs = Vec::new();
        let is_response = |v: &Value| v.get("method").is_none() && v.get("id").is_some();
        let is_request = |v: &Value| v.get("method").is_some() && v.get("id").is_some();
        let both_responses = is_response(&e) && is_response(&r);
        if both_responses || (is_request(&e) && is_request(&r)) {
            let take = |v: &mut Value| {
                v.as_object_mut()
                    .and_then(|o| o.remove("id"))
                    .unwrap_or(Value::Null)
            };
            let (ei, ri) = (take(&mut e), take(&mut r));
            if both_responses {
                // An answer to the fixture's own request: the id it used.
                if ei != ri {
                    diffs.push(mk_diff("$.id", DiffKind::Value, Some(&ei), Some(&ri)));
                }
            } else if let Some(kind) = self.ids.unify(&ei, &ri) {
                // The client's id space: one-to-one, any JSON type.
                diffs.push(mk_diff("$.id", kind, Some(&ei), Some(&ri)));
            }
        }
        diffs.extend(self.cmp.compare_frame(&e, &r));
        diffs
    }

    /// At end of input: every client line must have been played.
    pub fn finish(&self) -> Result<(), FixtureMismatch> {
        match self.t.lines.get(self.next) {
            None => Ok(()),
            Some(l) => Err(FixtureMismatch {
                line: l.number,
                label: l.label(),
                diffs: Vec::new(),
                reason: Some("input ended before this client line".into()),
            }),
        }
    }
}

/// Runs the fixture over any reader and writer; returns the exit code and
/// writes the report (if any) to `report`.
pub fn serve(
    t: &Transcript,
    input: impl BufRead,
    mut output: impl Write,
    mut report: impl Write,
) -> i32 {
    let mut fx = Fixture::new(t);
    let write = |out: &mut dyn Write, lines: Vec<String>| -> std::io::Result<()> {
        for l in lines {
            out.write_all(l.as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()
    };
    if let Err(e) = write(&mut output, fx.start()) {
        let _ = writeln!(report, "serve-fixture: cannot write: {e}");
        return EXIT_INFRA;
    }
    for line in input.split(b'\n') {
        let bytes = match line {
            Ok(b) => b,
            Err(e) => {
                let _ = writeln!(report, "serve-fixture: cannot read: {e}");
                return EXIT_INFRA;
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        if text.trim().is_empty() {
            continue;
        }
        match fx.client_frame(&text) {
            Ok(lines) => {
                if let Err(e) = write(&mut output, lines) {
                    let _ = writeln!(report, "serve-fixture: cannot write: {e}");
                    return EXIT_INFRA;
                }
            }
            Err(m) => {
                let _ = writeln!(report, "FAIL {}: {m}", t.name());
                return EXIT_MISMATCH;
            }
        }
    }
    match fx.finish() {
        Ok(()) => {
            let _ = writeln!(report, "PASS {}: the client played every line", t.name());
            EXIT_PASS
        }
        Err(m) => {
            let _ = writeln!(report, "FAIL {}: {m}", t.name());
            EXIT_MISMATCH
        }
    }
}

/// Where `serve-fixture` meets its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FixtureTransport {
    /// stdin and stdout.
    Stdio,
    /// One client on a TCP listener at this address.
    Tcp(std::net::SocketAddr),
    /// One client on a Unix stream socket at this path (a stale socket
    /// file is replaced; the file is removed afterwards).
    Unix(std::path::PathBuf),
}

/// `msp conformance serve-fixture --transcript DIR`: stdin/stdout, report
/// on stderr.
pub fn main(dir: &Path) -> i32 {
    main_on(dir, &FixtureTransport::Stdio)
}

/// `serve-fixture` on a transport: serves one client, reports on stderr
/// (a listener first prints `listening on ADDR`), returns the exit code
/// (0 the client played every line, 1 it deviated, 3 infrastructure).
pub fn main_on(dir: &Path, transport: &FixtureTransport) -> i32 {
    let t = match Transcript::load(dir) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ERROR {e}");
            return EXIT_INFRA;
        }
    };
    match transport {
        FixtureTransport::Stdio => {
            let stdin = std::io::stdin();
            let stdout = std::io::stdout();
            serve(&t, stdin.lock(), stdout.lock(), std::io::stderr())
        }
        FixtureTransport::Tcp(addr) => {
            let run = || -> std::io::Result<i32> {
                let l = std::net::TcpListener::bind(addr)?;
                eprintln!("listening on {}", l.local_addr()?);
                let (s, _) = l.accept()?;
                let input = std::io::BufReader::new(s.try_clone()?);
                Ok(serve(&t, input, s, std::io::stderr()))
            };
            run().unwrap_or_else(|e| {
                eprintln!("serve-fixture: cannot serve on {addr}: {e}");
                EXIT_INFRA
            })
        }
        FixtureTransport::Unix(path) => {
            let run = || -> std::io::Result<i32> {
                let l = bind_unix(path)?;
                eprintln!("listening on {}", path.display());
                let (s, _) = l.accept()?;
                let input = std::io::BufReader::new(s.try_clone()?);
                let code = serve(&t, input, s, std::io::stderr());
                let _ = std::fs::remove_file(path);
                Ok(code)
            };
            run().unwrap_or_else(|e| {
                eprintln!("serve-fixture: cannot serve on {}: {e}", path.display());
                EXIT_INFRA
            })
        }
    }
}

/// Binds a Unix socket, replacing a stale socket file no process listens
/// on; a live one (or a file that is not a socket) is an error.
fn bind_unix(path: &Path) -> std::io::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::fs::FileTypeExt;
    use std::os::unix::net::{UnixListener, UnixStream};
    match UnixListener::bind(path) {
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let is_socket =
                std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
            if !is_socket || UnixStream::connect(path).is_ok() {
                return Err(e);
            }
            std::fs::remove_file(path)?;
            UnixListener::bind(path)
        }
        other => other,
    }
}
