//! The `msp` command line, through clap: `msp --help` and every
//! subcommand's `--help` list every option with its default.
//!
//! ```text
//! msp serve (--stdio | --listen ADDR | --socket PATH) --data-dir DIR [options]
//! msp conformance [--record] PATH...
//! msp conformance record PATH...
//! msp conformance replay --transcript DIR [--transcript DIR ...]
//! msp conformance serve-fixture --transcript DIR [--stdio | --listen ADDR | --socket PATH]
//! ```
//!
//! Parsing only: each subcommand runs the library function that owns it
//! ([`crate::io::cli::serve_exit`], [`crate::conformance::run_files`],
//! [`crate::conformance::transcript::main_replay`],
//! [`crate::conformance::transcript::fixture::main_on`]). A bad command
//! line exits 2, `--help` and `--version` exit 0.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{ArgGroup, Args, CommandFactory, Parser, Subcommand};

use crate::conformance::transcript::fixture::FixtureTransport;
use crate::conformance::EXIT_USAGE;
use crate::io::ServeArgs;

/// `msp`.
#[derive(Debug, Parser)]
#[command(
    name = "msp",
    version,
    about = "MSP v1 command-plane host (JSON-RPC 2.0 over lines) and its conformance tools",
    long_about = "MSP v1 command-plane host (JSON-RPC 2.0 over lines) and its conformance tools.\n\n\
`msp serve` runs the host (the wire contract is PROTOCOL.md); `msp conformance` checks a host \
against our recorded scenarios and the public golden transcripts, and serves a transcript to \
a client as a canned host.",
    arg_required_else_help = true,
    after_help = "Run `msp <COMMAND> --help` for a command's options and defaults."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands of `msp`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the MSP/1 command-plane host.
    Serve(ServeArgs),
    /// Check a host against recorded scenarios and public transcripts.
    Conformance(ConformanceArgs),
}

/// `msp conformance`.
#[derive(Debug, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    about = "Check a host against recorded scenarios and public transcripts",
    long_about = "Check a host against recorded scenarios and public transcripts.\n\n\
Without a subcommand, runs every scenario file (corpus/conformance/*.ndjson, PROTOCOL.md \
section 6) against a host on a deterministic clock and id source and compares the frames it \
sends with the recorded ones.",
    after_help = "Exit codes: 0 every scenario passed (or was recorded); 1 a mismatch; 2 usage \
(bad arguments, or a scenario file that cannot be read or is ill-formed); 3 infrastructure \
(the host could not be driven). With several files the most severe outcome wins."
)]
pub struct ConformanceArgs {
    /// A conformance tool other than checking scenarios.
    #[command(subcommand)]
    pub command: Option<ConformanceCommand>,
    /// Rewrite each scenario with the frames the host actually sends
    /// instead of checking it (same as `record`; off by default).
    #[arg(long)]
    pub record: bool,
    /// Scenario files (*.ndjson), or directories standing for their
    /// *.ndjson files in name order.
    #[arg(value_name = "PATH")]
    pub paths: Vec<String>,
}

/// The subcommands of `msp conformance`.
#[derive(Debug, Subcommand)]
pub enum ConformanceCommand {
    /// Run each scenario and write the host's frames back into it (how
    /// scenarios are authored; read the result against PROTOCOL.md).
    Record {
        /// Scenario files (*.ndjson) or directories of them.
        #[arg(value_name = "PATH", required = true)]
        paths: Vec<String>,
    },
    /// Replay public golden transcripts against our host.
    #[command(
        after_help = "Exit codes: 0 every transcript passed; 1 a mismatch or a transcript that \
cannot be replayed; 2 usage; 3 infrastructure. docs/COVERAGE.md says which pass and why the \
others do not."
    )]
    Replay {
        /// A transcript directory (manifest.json + transcript.ndjson);
        /// repeat for several.
        #[arg(long = "transcript", value_name = "DIR", required = true)]
        transcripts: Vec<PathBuf>,
    },
    /// Serve one transcript's server lines to one client, as a canned host.
    ServeFixture(ServeFixtureArgs),
}

/// `msp conformance serve-fixture`.
#[derive(Debug, Args)]
#[command(
    group(ArgGroup::new("transport").args(["stdio", "listen", "socket"])),
    long_about = "Serve one transcript's server lines to one client, as a canned host: the \
client must send the transcript's client lines (its own request ids and command ids are \
unified with the recorded ones); every server line is written back under the client's ids.\n\n\
A client connects to --listen ADDR over TCP, or to --socket PATH as a Unix stream socket, \
or talks on stdin/stdout (the default). One client per run; the report goes to stderr.",
    after_help = "Exit codes: 0 the client played every line; 1 it deviated (the report names \
the line and JSON path); 2 usage; 3 infrastructure."
)]
pub struct ServeFixtureArgs {
    /// The transcript directory (manifest.json + transcript.ndjson).
    #[arg(long, value_name = "DIR")]
    pub transcript: PathBuf,
    /// Talk on stdin/stdout (the default when no transport is given).
    #[arg(long)]
    pub stdio: bool,
    /// Accept one client on a TCP address, e.g. 127.0.0.1:7778 (port 0
    /// picks a free one; `listening on ADDR` is printed on stderr);
    /// loopback only unless --allow-non-loopback.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Accept one client on a Unix stream socket at this path.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Allow --listen on a non-loopback address (off by default).
    #[arg(long)]
    pub allow_non_loopback: bool,
}

impl ServeFixtureArgs {
    /// The transport, or why it is refused (a non-loopback address without
    /// the opt-in).
    pub fn transport(&self) -> Result<FixtureTransport, String> {
        if let Some(addr) = self.listen {
            if !addr.ip().is_loopback() && !self.allow_non_loopback {
                return Err(format!(
                    "--listen {addr} is not a loopback address; pass --allow-non-loopback to serve it"
                ));
            }
            return Ok(FixtureTransport::Tcp(addr));
        }
        Ok(match &self.socket {
            Some(p) => FixtureTransport::Unix(p.clone()),
            None => FixtureTransport::Stdio,
        })
    }
}

/// Parses `args` (the program name first) and runs the command; returns
/// the exit code.
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = e.exit_code();
            let _ = e.print();
            return code;
        }
    };
    match cli.command {
        Command::Serve(a) => crate::io::cli::serve_exit(a),
        Command::Conformance(c) => match c.command {
            None if c.paths.is_empty() => {
                let mut cmd = Cli::command();
                cmd.build();
                let usage = cmd
                    .find_subcommand_mut("conformance")
                    .map(|s| s.render_usage().to_string())
                    .unwrap_or_default();
                eprintln!("msp conformance: no scenario given\n{usage}\nFor more information, try '--help'.");
                EXIT_USAGE
            }
            None => crate::conformance::run_files(&c.paths, c.record),
            Some(ConformanceCommand::Record { paths }) => {
                crate::conformance::run_files(&paths, true)
            }
            Some(ConformanceCommand::Replay { transcripts }) => {
                crate::conformance::transcript::main_replay(&transcripts)
            }
            Some(ConformanceCommand::ServeFixture(f)) => match f.transport() {
                Ok(t) => crate::conformance::transcript::fixture::main_on(&f.transcript, &t),
                Err(e) => {
                    eprintln!("msp conformance serve-fixture: {e}");
                    EXIT_USAGE
                }
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("msp").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_option_of_serve_shows_its_default_or_says_it_is_off() {
        let mut cmd = Cli::command();
        let serve = cmd.find_subcommand_mut("serve").expect("serve");
        let help = serve.render_long_help().to_string();
        for needle in [
            "--stdio",
            "--listen <ADDR>",
            "--socket <PATH>",
            "--data-dir <DIR>",
            "[default: durable]",
            "[default: 10485760]",
            "[default: 600000]",
            "--allow-non-loopback",
            "--no-group-commit",
            "Exit codes",
        ] {
            assert!(help.contains(needle), "{needle} missing from:\n{help}");
        }
        assert_eq!(help.matches("off by default").count(), 2, "{help}");
    }

    #[test]
    fn conformance_keeps_its_forms() {
        let c = parse(&["conformance", "a.ndjson", "dir"]).unwrap();
        let Command::Conformance(c) = c.command else {
            panic!()
        };
        assert_eq!(c.paths, ["a.ndjson", "dir"]);
        assert!(c.command.is_none() && !c.record);
        let c = parse(&["conformance", "--record", "a.ndjson"]).unwrap();
        assert!(matches!(
            c.command,
            Command::Conformance(ConformanceArgs { record: true, .. })
        ));
        let c = parse(&["conformance", "record", "a.ndjson"]).unwrap();
        assert!(matches!(
            c.command,
            Command::Conformance(ConformanceArgs {
                command: Some(ConformanceCommand::Record { .. }),
                ..
            })
        ));
        assert!(
            parse(&["conformance", "replay"]).is_err(),
            "needs --transcript"
        );
        assert!(parse(&["conformance", "--frobnicate"]).is_err());
    }

    #[test]
    fn serve_fixture_transports() {
        let f = |args: &[&str]| {
            let c = parse(args).unwrap();
            let Command::Conformance(ConformanceArgs {
                command: Some(ConformanceCommand::ServeFixture(f)),
                ..
            }) = c.command
            else {
                panic!()
            };
            f.transport()
        };
        let base = ["conformance", "serve-fixture", "--transcript", "d"];
        assert_eq!(f(&base), Ok(FixtureTransport::Stdio));
        let tcp = [&base[..], &["--listen", "127.0.0.1:0"]].concat();
        assert!(matches!(f(&tcp), Ok(FixtureTransport::Tcp(_))));
        let wide = [&base[..], &["--listen", "0.0.0.0:0"]].concat();
        assert!(f(&wide).unwrap_err().contains("loopback"));
        let unix = [&base[..], &["--socket", "/tmp/x.sock"]].concat();
        assert_eq!(f(&unix), Ok(FixtureTransport::Unix("/tmp/x.sock".into())));
        let both = [&base[..], &["--stdio", "--socket", "/tmp/x.sock"]].concat();
        assert!(parse(&both).is_err(), "one transport");
    }
}
