//! The `msp serve` command line (PROTOCOL.md section 1).
//!
//! ```text
//! msp serve (--stdio | --listen 127.0.0.1:PORT | --socket PATH) --data-dir DIR
//!           [--durability durable|ephemeral] [--frame-limit-bytes N]
//!           [--idle-unload-ms N] [--allow-non-loopback] [--no-group-commit]
//! ```
//!
//! `--listen` with port 0 binds a free port; the bound address is printed
//! on stderr as `listening on ADDR` either way. Exit codes: 0 after an
//! orderly shutdown, 2 for a bad command line, 1 when the host cannot
//! start or its shutdown did not complete.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{ArgGroup, Parser, ValueEnum};
use rand::RngCore;

use super::driver::{self, Transport};
use super::failpoint::Failpoint;
use crate::core::{Durability, HostConfig};

/// `--durability`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// Session logs are files, fsynced before every answer.
    Durable,
    /// Sessions live in memory and die with the process.
    Ephemeral,
}

/// The arguments of `msp serve` (also the `serve` subcommand of the `msp`
/// command line, [`crate::cli`]).
#[derive(Debug, Parser)]
#[command(
    name = "msp serve",
    about = "Run the MSP/1 command-plane host (PROTOCOL.md section 1)",
    long_about = "Run the MSP/1 command-plane host (PROTOCOL.md section 1): JSON-RPC 2.0, one \
object per line, on exactly one transport. End of stdin (with --stdio) or SIGTERM is an \
orderly shutdown: every loaded session is unloaded (session/closed, hostShutdown), then \
the process exits 0.",
    after_help = "Exit codes: 0 after an orderly shutdown, 1 when the host cannot start or its \
shutdown did not complete, 2 for a bad command line.\n\
A client connects to --listen ADDR over TCP or to --socket PATH as a Unix stream socket, \
sends `initialize`, then the `initialized` notification, one JSON object per line."
)]
#[command(group(ArgGroup::new("transport").required(true).args(["stdio", "listen", "socket"])))]
pub struct ServeArgs {
    /// Serve one client on stdin/stdout; end of stdin shuts down.
    #[arg(long)]
    pub stdio: bool,
    /// Listen on a TCP address, e.g. 127.0.0.1:7777 (port 0 picks a free
    /// one; the bound address is printed on stderr); loopback only unless
    /// --allow-non-loopback.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Listen on a Unix socket at this path (a stale socket file is
    /// replaced).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// The data directory, created if missing: session logs and leases
    /// under DIR/sessions/SESSION_ID/.
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Whether sessions survive the process.
    #[arg(long, value_enum, default_value = "durable")]
    pub durability: DurabilityArg,
    /// The inbound frame limit in bytes (10 MiB); a longer line gets
    /// -32002 inputTooLarge.
    #[arg(long, value_name = "N", default_value_t = crate::proto::framing::DEFAULT_FRAME_LIMIT_BYTES)]
    pub frame_limit_bytes: usize,
    /// Unload a session after this many ms of idleness (0: never).
    #[arg(long, value_name = "N", default_value_t = crate::core::DEFAULT_IDLE_UNLOAD_MS)]
    pub idle_unload_ms: u64,
    /// Allow --listen on a non-loopback address (off by default).
    #[arg(long)]
    pub allow_non_loopback: bool,
    /// Give every intake an fsync of its own (off by default; the
    /// benchmark's baseline, never for production).
    #[arg(long)]
    pub no_group_commit: bool,
    /// Compact a session's log (snapshot + archive) once this many records
    /// were appended since its last compaction (32768; 0: never).
    #[arg(long, value_name = "N", default_value_t = crate::core::DEFAULT_COMPACT_RECORDS)]
    pub compact_records: u64,
}

/// Why `msp serve` could not start.
#[derive(Debug)]
pub enum ServeError {
    /// A flag combination or value the command line refuses (exit 2).
    Usage(String),
    /// The environment refused (data directory, bind, runtime) (exit 1).
    Startup(String),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Usage(m) | ServeError::Startup(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ServeError {}

impl ServeArgs {
    /// Checks what clap cannot: loopback, a positive frame limit.
    pub fn validate(&self) -> Result<(), ServeError> {
        if let Some(addr) = self.listen {
            if !addr.ip().is_loopback() && !self.allow_non_loopback {
                return Err(ServeError::Usage(format!(
                    "--listen {addr} is not a loopback address; pass --allow-non-loopback to serve it"
                )));
            }
        }
        if self.frame_limit_bytes == 0 {
            return Err(ServeError::Usage(
                "--frame-limit-bytes must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// The core's configuration for the absolute data directory `home`.
    pub fn host_config(&self, home: &str, seed: u64) -> HostConfig {
        let durability = match self.durability {
            DurabilityArg::Durable => Durability::Durable,
            DurabilityArg::Ephemeral => Durability::Ephemeral,
        };
        let mut cfg = HostConfig::new(home, durability, seed);
        cfg.frame_limit_bytes = self.frame_limit_bytes;
        cfg.idle_unload_ms = self.idle_unload_ms;
        cfg.group_commit = !self.no_group_commit;
        cfg.compact_records = self.compact_records;
        cfg
    }
}

/// Creates the data directory and returns its absolute path as UTF-8
/// (`museHome` is a JSON string).
pub fn prepare_data_dir(dir: &Path) -> Result<String, ServeError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        ServeError::Startup(format!(
            "cannot create data directory {}: {e}",
            dir.display()
        ))
    })?;
    let abs = std::fs::canonicalize(dir).map_err(|e| {
        ServeError::Startup(format!(
            "cannot resolve data directory {}: {e}",
            dir.display()
        ))
    })?;
    abs.to_str().map(str::to_string).ok_or_else(|| {
        ServeError::Startup(format!(
            "data directory {} is not valid UTF-8",
            abs.display()
        ))
    })
}

/// `msp serve ARGS...` (without the word `serve`); returns the exit code.
pub fn serve_main(args: Vec<String>) -> i32 {
    let parsed =
        match ServeArgs::try_parse_from(std::iter::once("msp serve".to_string()).chain(args)) {
            Ok(a) => a,
            Err(e) => {
                let code = e.exit_code();
                let _ = e.print();
                return code;
            }
        };
    serve_exit(parsed)
}

/// Runs `msp serve` with parsed arguments; returns the exit code (the
/// reason for a failure is printed on stderr).
pub fn serve_exit(parsed: ServeArgs) -> i32 {
    match serve(parsed) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("msp serve: {e}");
            match e {
                ServeError::Usage(_) => 2,
                ServeError::Startup(_) => 1,
            }
        }
    }
}

/// Runs the host to completion.
pub fn serve(args: ServeArgs) -> Result<i32, ServeError> {
    args.validate()?;
    let failpoint = Failpoint::from_env()
        .map_err(|e| ServeError::Usage(format!("{}: {e}", super::failpoint::ENV_VAR)))?;
    let home = prepare_data_dir(&args.data_dir)?;
    // The only randomness of the real host: the core's id RNG seed.
    let seed = rand::rngs::OsRng.next_u64();
    let cfg = args.host_config(&home, seed);
    // One thread runs the driver and every connection's reader and writer:
    // the driver is one task anyway, and on a small machine the hand-offs
    // between runtime threads cost more than they parallelise (measured:
    // 40-48 vs 59-68 us of host CPU per ack at 64 clients on one session,
    // see BENCHMARKS.md). Blocking work (opens, reads, effects) still runs
    // on tokio's blocking pool and fsyncs on the group committer's workers.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ServeError::Startup(format!("cannot start the runtime: {e}")))?;
    let code = runtime.block_on(async {
        let transport = if let Some(addr) = args.listen {
            let l = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| ServeError::Startup(format!("cannot listen on {addr}: {e}")))?;
            let bound = l
                .local_addr()
                .map_err(|e| ServeError::Startup(format!("cannot read the bound address: {e}")))?;
            eprintln!("listening on {bound}");
            Transport::Tcp(l)
        } else if let Some(path) = &args.socket {
            let l = super::transport::bind_unix(path).map_err(|e| {
                ServeError::Startup(format!("cannot listen on {}: {e}", path.display()))
            })?;
            eprintln!("listening on {}", path.display());
            Transport::Unix(l, path.clone())
        } else {
            Transport::Stdio
        };
        Ok(driver::run(cfg, failpoint, transport).await)
    });
    // The driver has finished (answers flushed, syncs done). Dropping the
    // runtime would wait for every blocking task, and a read of stdin
    // never ends while the client keeps it open: SIGTERM on `--stdio`
    // hung there.
    runtime.shutdown_background();
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        ServeArgs::try_parse_from(std::iter::once("msp serve").chain(args.iter().copied()))
    }

    #[test]
    fn exactly_one_transport() {
        assert!(parse(&["--data-dir", "d"]).is_err());
        assert!(parse(&["--stdio", "--listen", "127.0.0.1:0", "--data-dir", "d"]).is_err());
        assert!(parse(&["--stdio", "--data-dir", "d"]).is_ok());
    }

    #[test]
    fn non_loopback_needs_the_opt_in() {
        let a = parse(&["--listen", "0.0.0.0:0", "--data-dir", "d"]).expect("parses");
        assert!(matches!(a.validate(), Err(ServeError::Usage(_))));
        let b = parse(&[
            "--listen",
            "0.0.0.0:0",
            "--data-dir",
            "d",
            "--allow-non-loopback",
        ])
        .expect("parses");
        assert!(b.validate().is_ok());
        let c = parse(&["--listen", "[::1]:0", "--data-dir", "d"]).expect("parses");
        assert!(c.validate().is_ok());
    }

    #[test]
    fn flags_reach_the_host_config() {
        let a = parse(&[
            "--stdio",
            "--data-dir",
            "d",
            "--durability",
            "ephemeral",
            "--frame-limit-bytes",
            "1024",
            "--idle-unload-ms",
            "0",
            "--no-group-commit",
        ])
        .expect("parses");
        let cfg = a.host_config("/abs", 9);
        assert_eq!(cfg.durability, Durability::Ephemeral);
        assert_eq!(cfg.frame_limit_bytes, 1024);
        assert_eq!(cfg.idle_unload_ms, 0);
        assert!(!cfg.group_commit);
        assert_eq!(cfg.data_dir, "/abs");
        assert_eq!(cfg.seed, 9);
        assert!(
            parse(&["--stdio", "--data-dir", "d", "--frame-limit-bytes", "0"])
                .expect("parses")
                .validate()
                .is_err()
        );
    }
}
