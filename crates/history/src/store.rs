//! The store: open (creating and migrating), save, find, read, remove.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, ErrorCode, OptionalExtension as _};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::env::{BedFacts, Columns, Load};

/// How long a write waits for another process's transaction.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// What went wrong with the history database.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The directory or file could not be made or opened.
    #[error("cannot open the history database {path}")]
    Open {
        /// The database.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not an SQLite database, or a damaged one.
    #[error("the history database {path} is corrupt or not an SQLite database: move it away, or choose another with --history PATH")]
    Corrupt {
        /// The database.
        path: PathBuf,
    },
    /// Another process held the database longer than the busy timeout.
    #[error("the history database {path} stayed locked by another process for {}s", BUSY_TIMEOUT.as_secs())]
    Locked {
        /// The database.
        path: PathBuf,
    },
    /// Written by a newer linerate: left as it is.
    #[error("the history database has layout version {found}; this linerate knows up to {known}: use a newer linerate, or another --history PATH")]
    Newer {
        /// Its `user_version`.
        found: u32,
        /// [`crate::SCHEMA_VERSION`].
        known: u32,
    },
    /// No result has this id.
    #[error("no result with id {0} in the history")]
    NotFound(i64),
    /// The document to save is not a JSON object with a `schema`.
    #[error("not a linerate result document (a JSON object with a \"schema\")")]
    NotADocument,
    /// Any other SQLite error.
    #[error("history database")]
    Sql(#[from] rusqlite::Error),
}

impl HistoryError {
    /// Corrupt and locked files named as such (SQLite reports them as
    /// plain errors).
    fn at(self, path: &Path) -> Self {
        let Self::Sql(e) = &self else { return self };
        let path = path.to_path_buf();
        match e.sqlite_error_code() {
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => Self::Corrupt { path },
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Self::Locked { path },
            _ => self,
        }
    }
}

/// One result to save.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The document, exactly as `--json` prints it (stored verbatim).
    pub document: &'a str,
    /// A label (`--tag`).
    pub tag: Option<&'a str>,
    /// The testbed it ran on.
    pub bed: Option<&'a BedFacts>,
    /// The host's load during the test.
    pub load: Option<&'a Load>,
}

/// A stored result without its document (a line of `history list`; JSON:
/// `linerate history list --json` is an array of these).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Its id.
    pub id: i64,
    /// `throughput`, `latency`, `rfc2544` …
    pub command: String,
    /// The document's schema.
    pub schema: String,
    /// When the measurement started (RFC 3339 UTC), else when it was saved.
    pub started_at: String,
    /// Its label.
    pub tag: Option<String>,
    /// The testbed's name.
    pub bed: Option<String>,
    /// 0 clean, 1 a precondition failed (an invalid flag).
    pub exit_code: Option<i64>,
}

/// A stored result with its environment and document (JSON: `linerate
/// history show ID --json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Record {
    /// What `history list` shows.
    #[serde(flatten)]
    pub summary: Summary,
    /// The document's version.
    pub version: i64,
    /// When it was saved (RFC 3339 UTC).
    pub saved_at: String,
    /// The linerate that measured.
    pub linerate_version: Option<String>,
    /// Kernel release.
    pub kernel: Option<String>,
    /// CPU model.
    pub cpu_model: Option<String>,
    /// Online CPUs.
    pub cpus: Option<i64>,
    /// The bed's settings (`link 100 Mbit/s` …).
    pub bed_settings: Vec<String>,
    /// Steal during the test, percent.
    pub steal_pct: Option<f64>,
    /// CPU pressure (PSI "some") during the test, percent.
    pub cpu_pressure_pct: Option<f64>,
    /// The document, parsed (Null if the stored text is not JSON).
    pub document: Value,
    /// The document exactly as stored (what `history export` prints).
    #[serde(skip)]
    pub text: String,
}

/// Which results to list. Dates compare as RFC 3339 UTC text, so a prefix
/// such as `2026-11-23` works.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this command's.
    pub command: Option<String>,
    /// Only those on this bed.
    pub bed: Option<String>,
    /// Only those with this tag.
    pub tag: Option<String>,
    /// Started at or after this.
    pub since: Option<String>,
    /// Started before this.
    pub until: Option<String>,
    /// Only the newest this many (still listed oldest first).
    pub last: Option<usize>,
}

/// An open history database.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

const SUMMARY: &str = "id, command, schema, COALESCE(started_at, saved_at), tag, bed, exit_code";

fn summary(r: &rusqlite::Row<'_>) -> rusqlite::Result<Summary> {
    Ok(Summary {
        id: r.get(0)?,
        command: r.get(1)?,
        schema: r.get(2)?,
        started_at: r.get(3)?,
        tag: r.get(4)?,
        bed: r.get(5)?,
        exit_code: r.get(6)?,
    })
}

impl Store {
    /// Opens the database at `path`, creating it and its directory when
    /// missing, and migrates it to [`crate::SCHEMA_VERSION`].
    pub fn open(path: &Path) -> Result<Self, HistoryError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| HistoryError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        }
        // Switching a new file to WAL and migrating it take locks that
        // SQLite may refuse at once, without its busy handler, while another
        // process does the same (seen with four writers opening one new
        // file): retried here up to the busy timeout.
        let start = std::time::Instant::now();
        loop {
            match Self::open_conn(path).map_err(|e| e.at(path)) {
                Err(HistoryError::Locked { .. }) if start.elapsed() < BUSY_TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                r => return r,
            }
        }
    }

    fn open_conn(path: &Path) -> Result<Self, HistoryError> {
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // The first statement that reads the file: a corrupt one fails here.
        // (A file system without shared memory keeps the rollback journal:
        // the mode returned is then not "wal", and writes still serialise.)
        let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        crate::migrate::migrate(&mut conn)?;
        Ok(Self {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// The database's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Saves one result in a transaction; returns its id.
    pub fn save(&mut self, e: &Entry<'_>) -> Result<i64, HistoryError> {
        let doc: Value =
            serde_json::from_str(e.document).map_err(|_| HistoryError::NotADocument)?;
        if doc.get("schema").and_then(Value::as_str).is_none() {
            return Err(HistoryError::NotADocument);
        }
        let c = Columns::of(&doc, e.load);
        let settings = e.bed.map(|b| Value::from(b.settings.clone()).to_string());
        let saved_at = now_rfc3339();
        let id = (|| {
            let tx = self.conn.transaction()?;
            tx.execute(
                "INSERT INTO results (saved_at, command, schema, version, started_at, tag, document,
                   linerate_version, kernel, cpu_model, cpus, bed, bed_settings, steal_pct,
                   cpu_pressure_pct, exit_code)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                params![
                    saved_at,
                    c.command,
                    c.schema,
                    c.version,
                    c.started_at,
                    e.tag,
                    e.document,
                    c.linerate_version,
                    c.kernel,
                    c.cpu_model,
                    c.cpus,
                    e.bed.map(|b| &b.name),
                    settings,
                    c.steal_pct,
                    c.cpu_pressure_pct,
                    c.exit_code
                ],
            )?;
            let id = tx.last_insert_rowid();
            tx.commit()?;
            Ok::<_, rusqlite::Error>(id)
        })();
        id.map_err(|e| HistoryError::from(e).at(&self.path))
    }

    /// The results `f` selects, oldest first.
    pub fn list(&self, f: &Filter) -> Result<Vec<Summary>, HistoryError> {
        let mut sql = format!("SELECT {SUMMARY} FROM results WHERE 1 = 1");
        let mut args: Vec<&dyn rusqlite::ToSql> = Vec::new();
        let conds = [
            (&f.command, "command = ?"),
            (&f.bed, "bed = ?"),
            (&f.tag, "tag = ?"),
            (&f.since, "COALESCE(started_at, saved_at) >= ?"),
            (&f.until, "COALESCE(started_at, saved_at) < ?"),
        ];
        for (value, cond) in conds.iter() {
            if let Some(v) = value {
                sql += " AND ";
                sql += cond;
                args.push(v);
            }
        }
        sql += " ORDER BY COALESCE(started_at, saved_at) DESC, id DESC";
        let limit = f.last.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        if let Some(n) = &limit {
            sql += " LIMIT ?";
            args.push(n);
        }
        let mut rows = (|| {
            let mut q = self.conn.prepare(&sql)?;
            let it = q.query_map(args.as_slice(), summary)?;
            it.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(|e| HistoryError::from(e).at(&self.path))?;
        rows.reverse();
        Ok(rows)
    }

    /// One result with its environment and document.
    pub fn record(&self, id: i64) -> Result<Record, HistoryError> {
        let sql = format!(
            "SELECT {SUMMARY}, version, saved_at, linerate_version, kernel, cpu_model, cpus,
               bed_settings, steal_pct, cpu_pressure_pct, document FROM results WHERE id = ?1"
        );
        let found = self.conn.query_row(&sql, [id], |r| {
            let settings: Option<String> = r.get(13)?;
            let text: String = r.get(16)?;
            Ok(Record {
                summary: summary(r)?,
                version: r.get(7)?,
                saved_at: r.get(8)?,
                linerate_version: r.get(9)?,
                kernel: r.get(10)?,
                cpu_model: r.get(11)?,
                cpus: r.get(12)?,
                bed_settings: settings
                    .and_then(|s| serde_json::from_str(&s).ok())
                    .unwrap_or_default(),
                steal_pct: r.get(14)?,
                cpu_pressure_pct: r.get(15)?,
                document: serde_json::from_str(&text).unwrap_or(Value::Null),
                text,
            })
        });
        found
            .optional()
            .map_err(|e| HistoryError::from(e).at(&self.path))?
            .ok_or(HistoryError::NotFound(id))
    }

    /// The stored document of result `id`, parsed (what `linerate report`
    /// and `compare` read).
    pub fn get(&self, id: i64) -> Result<Value, HistoryError> {
        match self.record(id)?.document {
            Value::Null => Err(HistoryError::NotADocument),
            doc => Ok(doc),
        }
    }

    /// Removes result `id`.
    pub fn remove(&mut self, id: i64) -> Result<(), HistoryError> {
        let n = self
            .conn
            .execute("DELETE FROM results WHERE id = ?1", [id])
            .map_err(|e| HistoryError::from(e).at(&self.path))?;
        match n {
            0 => Err(HistoryError::NotFound(id)),
            _ => Ok(()),
        }
    }
}

/// Now as RFC 3339 UTC (the system's real-time clock).
fn now_rfc3339() -> String {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    linerate_core::result::rfc3339_utc(ns)
}
