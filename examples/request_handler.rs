//! An application request handler over the MSP SDK, in four steps:
//!
//!   request id  ->  gate  ->  turn  ->  the turn's terminal event
//!
//! A user double-clicks "Send" while a proxy retries: the same logical
//! request arrives twice (here: the handler is simply called twice with one
//! request id). The gate makes it one command and one turn; the second
//! arrival gets the first one's outcome without sending anything.
//!
//! Run it (it spawns `msp serve --stdio`, so build the host first):
//!
//!     cargo build --release --bin msp
//!     cargo run --release --example request_handler
//!
//! Options: `--msp PATH` (default: the `msp` next to this example's
//! directory, i.e. target/release/msp), `--data-dir DIR` (default: a new
//! directory under the system temp dir).

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use msp::client::driver::{Client, Transport};
use msp::client::gate::{sqlite::SqliteGateStore, Gate};
use msp::client::{ClientConfig, CommandOutcome, CommandSpec, RequestId, SessionId, TurnEnd};

type AppGate = Arc<Mutex<Gate<SqliteGateStore>>>;

/// The handler: one arrival of one application request.
async fn handle(
    client: &Client,
    gate: &AppGate,
    session: &SessionId,
    request_id: &str,
    text: &str,
) -> Result<String, Box<dyn Error>> {
    // 1. The request's stable identity, given by the application boundary.
    let request = RequestId::new(request_id)?;

    // 2. The gate: the first arrival sends the one command for this request;
    //    any later arrival (here or in another process sharing the gate
    //    file) gets that command's outcome instead of a second command.
    let turn = CommandSpec::TurnStart {
        session_id: session.clone(),
        text: text.to_string(),
        if_busy: None,
    };
    let gated = client.submit_gated(gate, &request, None, turn).await?;

    // 3. The command's outcome is admission only: accepted, rejected, or an
    //    error. It never says what the turn did.
    let ack = match &gated.outcome {
        CommandOutcome::Accepted(ack) => ack,
        CommandOutcome::Rejected(r) => return Ok(format!("refused: {}", r.reason.as_str())),
        CommandOutcome::Error(e) => {
            return Err(format!("failed: {:?} {}", e.kind, e.message).into())
        }
    };
    let turn_id = ack.turn_id().ok_or("a turn/start ack names its turn")?;

    // 4. What the turn did arrives on the session's view: wait for its
    //    terminal event (turn/completed, or turn/unqueued if reclaimed).
    let end = client.wait_turn_end(session, turn_id).await?;
    let how = match end {
        TurnEnd::Completed { terminal, .. } => format!("{terminal:?}"),
        TurnEnd::Unqueued => "unqueued".to_string(),
    };
    Ok(format!(
        "command {} -> turn {turn_id} ended {how} (answered by the gate alone: {})",
        gated.command_id, gated.from_gate
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let (msp_bin, data_dir) = args()?;
    std::fs::create_dir_all(&data_dir)?;

    // The host: `msp serve` over stdio on a data directory.
    let transport = Transport::Stdio {
        program: msp_bin,
        args: vec![
            "serve".into(),
            "--stdio".into(),
            "--data-dir".into(),
            data_dir.join("host").display().to_string(),
        ],
    };
    let client = Client::connect(transport, ClientConfig::default()).await?;

    // The gate: one SQLite file every instance of the application shares.
    let gate: AppGate = Arc::new(Mutex::new(Gate::new(SqliteGateStore::open(
        &data_dir.join("gate.sqlite"),
    )?)));

    // A session to work in.
    let started = client
        .submit(CommandSpec::SessionStart {
            session_id: None,
            workspace_root: None,
        })
        .await?;
    let session = started
        .outcome
        .ack()
        .and_then(|a| a.session_id().cloned())
        .ok_or("session/start was not accepted")?;

    // The same logical request, twice: a click and the proxy's retry.
    for arrival in ["click", "proxy retry"] {
        let reply = handle(&client, &gate, &session, "req-42", "summarize the notes").await?;
        println!("{arrival}: {reply}");
    }
    client.close().await;
    Ok(())
}

fn args() -> Result<(PathBuf, PathBuf), Box<dyn Error>> {
    let here = std::env::current_exe()?;
    let mut msp_bin = here
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("msp"))
        .ok_or("cannot locate the msp binary; pass --msp PATH")?;
    let mut data_dir =
        std::env::temp_dir().join(format!("msp-request-handler-{}", std::process::id()));
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--msp" => msp_bin = it.next().ok_or("--msp needs a path")?.into(),
            "--data-dir" => data_dir = it.next().ok_or("--data-dir needs a path")?.into(),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if !msp_bin.exists() {
        return Err(format!(
            "{} not found: run `cargo build --release --bin msp` or pass --msp PATH",
            msp_bin.display()
        )
        .into());
    }
    Ok((msp_bin, data_dir))
}
