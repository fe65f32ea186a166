//! The embedded gate store: one SQLite file, safe across processes.
//!
//! - **One row per request**: `request_id` is the primary key, and the
//!   claim is a single `INSERT ... ON CONFLICT(request_id) DO NOTHING` in an
//!   `IMMEDIATE` transaction, so two processes racing on one request id
//!   insert one row; the loser reads the winner's row in the same
//!   transaction. `command_id` is unique too: one command, one request.
//! - **Durable when it returns**: WAL journal with `synchronous=FULL`.
//! - **Concurrent writers wait** instead of failing: a busy timeout (5 s by
//!   default) covers another process's short write transaction.
//!
//! Fault model: a process killed at any point leaves either the whole
//! transaction or none of it (SQLite's atomic commit); a lock held past the
//! busy timeout is [`GateError::Store`], after which retrying is safe.

use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;

use super::{decode_row, params_text, Claim, GateError, GateRecord, GateStore};
use crate::client::ids::{CommandId, EffectKey, RequestId};
use crate::client::reconcile::{decode_resolution, resolver_columns, Resolution, ResolutionStore};

/// How long a writer waits for another process's transaction by default.
pub const DEFAULT_BUSY_TIMEOUT_MS: u64 = 5_000;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS msp_gate (
    request_id     TEXT PRIMARY KEY NOT NULL,
    command_id     TEXT NOT NULL UNIQUE,
    method         TEXT NOT NULL,
    params         TEXT NOT NULL,
    correlation_id TEXT,
    outcome        TEXT,
    created_ms     INTEGER NOT NULL
)";

/// One row per effect key an application reconciled (see
/// [`crate::client::reconcile`]): the key is unique, so the first decision
/// wins across processes.
const RESOLUTION_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS msp_effect_resolution (
    effect_key TEXT PRIMARY KEY NOT NULL,
    outcome    TEXT NOT NULL,
    resolver   TEXT NOT NULL,
    operator   TEXT,
    note       TEXT,
    at_ms      INTEGER NOT NULL
)";

const SELECT_RESOLUTION: &str = "SELECT effect_key, outcome, resolver, operator, note, at_ms
    FROM msp_effect_resolution WHERE effect_key = ?1";

const SELECT_ROW: &str =
    "SELECT request_id, command_id, method, params, correlation_id, outcome, created_ms
    FROM msp_gate WHERE request_id = ?1";

/// A [`GateStore`] in one SQLite file. Open one per thread or process; they
/// coordinate through the file.
#[derive(Debug)]
pub struct SqliteGateStore {
    conn: Connection,
}

/// Whether SQLite refused for a lock another connection holds.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

fn store_err(e: rusqlite::Error) -> GateError {
    GateError::Store(e.to_string())
}

impl SqliteGateStore {
    /// Opens (creating if needed) the gate file at `path`, with the default
    /// busy timeout.
    pub fn open(path: &Path) -> Result<SqliteGateStore, GateError> {
        Self::open_with_busy_timeout(path, DEFAULT_BUSY_TIMEOUT_MS)
    }

    /// Opens the gate file, waiting up to `busy_timeout_ms` for other
    /// writers.
    pub fn open_with_busy_timeout(
        path: &Path,
        busy_timeout_ms: u64,
    ) -> Result<SqliteGateStore, GateError> {
        let conn = Connection::open(path).map_err(store_err)?;
        let wait = Duration::from_millis(busy_timeout_ms);
        conn.busy_timeout(wait).map_err(store_err)?;
        // Two processes opening a new file at once both try to switch it
        // to WAL; SQLite answers the loser `SQLITE_BUSY` at once, without
        // its busy handler (waiting could deadlock). The setup is
        // idempotent, so it is retried until the busy timeout.
        let deadline = std::time::Instant::now() + wait;
        let mut pause = Duration::from_millis(1);
        loop {
            match Self::setup(&conn) {
                Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Err(e) => return Err(store_err(e)),
                Ok(mode) if !mode.eq_ignore_ascii_case("wal") => {
                    return Err(GateError::Store(format!(
                        "the gate file needs WAL mode; SQLite kept {mode:?}"
                    )));
                }
                Ok(_) => return Ok(SqliteGateStore { conn }),
            }
        }
    }

    /// Puts the file in WAL mode with full syncs and creates the tables if
    /// missing; the journal mode SQLite reports.
    fn setup(conn: &Connection) -> rusqlite::Result<String> {
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if mode.eq_ignore_ascii_case("wal") {
            conn.pragma_update(None, "synchronous", "FULL")?;
            conn.execute(SCHEMA, [])?;
            conn.execute(RESOLUTION_SCHEMA, [])?;
        }
        Ok(mode)
    }

    fn row(conn: &Connection, request: &str) -> Result<Option<GateRecord>, GateError> {
        let raw = conn
            .query_row(SELECT_ROW, params![request], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, i64>(6)?,
                ))
            })
            .optional()
            .map_err(store_err)?;
        match raw {
            None => Ok(None),
            Some((rid, cid, m, p, c, o, t)) => decode_row(&rid, &cid, &m, &p, c, o, t).map(Some),
        }
    }
}

impl SqliteGateStore {
    fn resolution_row(conn: &Connection, key: &str) -> Result<Option<Resolution>, GateError> {
        let raw = conn
            .query_row(SELECT_RESOLUTION, params![key], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, i64>(5)?,
                ))
            })
            .optional()
            .map_err(store_err)?;
        match raw {
            None => Ok(None),
            Some((k, o, by, name, note, at)) => {
                decode_resolution(&k, &o, &by, name, note, at).map(Some)
            }
        }
    }
}

impl ResolutionStore for SqliteGateStore {
    fn resolve_if_absent(&mut self, r: &Resolution) -> Result<Resolution, GateError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(store_err)?;
        let (kind, name, note) = resolver_columns(&r.by);
        tx.execute(
            "INSERT INTO msp_effect_resolution (effect_key, outcome, resolver, operator, note, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(effect_key) DO NOTHING",
            params![
                r.key.as_str(),
                r.outcome.as_str(),
                kind,
                name,
                note,
                i64::try_from(r.at_ms).unwrap_or(i64::MAX),
            ],
        )
        .map_err(store_err)?;
        let stored = Self::resolution_row(&tx, r.key.as_str())?.ok_or_else(|| {
            GateError::Store("insert-if-absent inserted nothing and found no row".into())
        })?;
        tx.commit().map_err(store_err)?;
        Ok(stored)
    }

    fn resolution(&mut self, key: &EffectKey) -> Result<Option<Resolution>, GateError> {
        Self::resolution_row(&self.conn, key.as_str())
    }
}

impl GateStore for SqliteGateStore {
    fn claim(&mut self, proposed: &GateRecord) -> Result<Claim, GateError> {
        debug_assert!(proposed.outcome.is_none());
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(store_err)?;
        let inserted = tx
            .execute(
                "INSERT INTO msp_gate (request_id, command_id, method, params, correlation_id, outcome, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6)
                 ON CONFLICT(request_id) DO NOTHING",
                params![
                    proposed.request_id.as_str(),
                    proposed.command_id.as_str(),
                    proposed.command.method,
                    params_text(&proposed.command),
                    proposed.correlation_id.as_ref().map(|c| c.as_str()),
                    i64::try_from(proposed.created_ms).unwrap_or(i64::MAX),
                ],
            )
            .map_err(store_err)?;
        let claim = if inserted == 1 {
            Claim::Won
        } else {
            match Self::row(&tx, proposed.request_id.as_str())? {
                Some(r) => Claim::Existing(r),
                None => {
                    return Err(GateError::Store(
                        "insert-if-absent inserted nothing and found no row".into(),
                    ))
                }
            }
        };
        tx.commit().map_err(store_err)?;
        Ok(claim)
    }

    fn record_outcome(
        &mut self,
        request: &RequestId,
        command: &CommandId,
        outcome: &Value,
    ) -> Result<Option<Value>, GateError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(store_err)?;
        tx.execute(
            "UPDATE msp_gate SET outcome = ?3
             WHERE request_id = ?1 AND command_id = ?2 AND outcome IS NULL",
            params![request.as_str(), command.as_str(), outcome.to_string()],
        )
        .map_err(store_err)?;
        let row = Self::row(&tx, request.as_str())?;
        tx.commit().map_err(store_err)?;
        Ok(row.and_then(|r| r.outcome))
    }

    fn get(&mut self, request: &RequestId) -> Result<Option<GateRecord>, GateError> {
        Self::row(&self.conn, request.as_str())
    }
}
