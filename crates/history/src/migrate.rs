//! The database layout, one step per version, applied in order.

use rusqlite::{Connection, TransactionBehavior};

use crate::store::HistoryError;

/// The layout this linerate writes.
pub const SCHEMA_VERSION: u32 = 2;

/// Version 1: each result's document and the columns to find it by.
const V1: &str = "
CREATE TABLE results (
    id INTEGER PRIMARY KEY,
    saved_at TEXT NOT NULL,
    command TEXT NOT NULL,
    schema TEXT NOT NULL,
    version INTEGER NOT NULL,
    started_at TEXT,
    tag TEXT,
    document TEXT NOT NULL
);
CREATE INDEX results_by_command ON results (command, started_at);
";

/// Version 2: the environment of each result (kernel, CPU, linerate, the
/// bed and its settings, steal and CPU pressure) and its exit code, as
/// columns; filled from the stored documents for the rows already there
/// (a version-1 row has no bed and no pressure: they stay unknown).
const V2: &str = "
ALTER TABLE results ADD COLUMN linerate_version TEXT;
ALTER TABLE results ADD COLUMN kernel TEXT;
ALTER TABLE results ADD COLUMN cpu_model TEXT;
ALTER TABLE results ADD COLUMN cpus INTEGER;
ALTER TABLE results ADD COLUMN bed TEXT;
ALTER TABLE results ADD COLUMN bed_settings TEXT;
ALTER TABLE results ADD COLUMN steal_pct REAL;
ALTER TABLE results ADD COLUMN cpu_pressure_pct REAL;
ALTER TABLE results ADD COLUMN exit_code INTEGER;
CREATE INDEX results_by_tag ON results (tag);
CREATE INDEX results_by_bed ON results (bed);
";

/// Brings `conn` to [`SCHEMA_VERSION`] in one immediate transaction (a
/// second process opening the same new file waits, then finds it done).
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), HistoryError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: u32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > SCHEMA_VERSION {
        return Err(HistoryError::Newer {
            found,
            known: SCHEMA_VERSION,
        });
    }
    if found < 1 {
        tx.execute_batch(V1)?;
    }
    if found < 2 {
        tx.execute_batch(V2)?;
        backfill(&tx)?;
    }
    if found < SCHEMA_VERSION {
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    tx.commit()?;
    Ok(())
}

/// Version 2's columns for the rows saved before it, from their documents.
fn backfill(tx: &rusqlite::Transaction<'_>) -> Result<(), HistoryError> {
    let rows: Vec<(i64, String)> = {
        let mut q = tx.prepare("SELECT id, document FROM results")?;
        let it = q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        it.collect::<Result<_, _>>()?
    };
    let mut up = tx.prepare(
        "UPDATE results SET linerate_version = ?2, kernel = ?3, cpu_model = ?4, cpus = ?5,
         steal_pct = ?6, exit_code = ?7 WHERE id = ?1",
    )?;
    for (id, text) in rows {
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let c = crate::env::Columns::of(&doc, None);
        up.execute(rusqlite::params![
            id,
            c.linerate_version,
            c.kernel,
            c.cpu_model,
            c.cpus,
            c.steal_pct,
            c.exit_code
        ])?;
    }
    Ok(())
}
