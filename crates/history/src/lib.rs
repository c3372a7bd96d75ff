//! The results history: every measurement's document (the common envelope,
//! exactly as `--json` prints it) kept in an SQLite database, with the
//! columns to find it by and the environment it was measured in (kernel,
//! CPU, linerate version, the testbed and its settings, steal and CPU
//! pressure during the test).
//!
//! Writes are transactions in WAL mode with a busy timeout, so several
//! linerate processes may save at once. The layout is versioned with
//! `PRAGMA user_version` and migrated forward when a database is opened
//! ([`SCHEMA_VERSION`]); a database written by a newer linerate is refused,
//! never rewritten.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod env;
mod migrate;
mod store;

pub use env::{default_path, BedFacts, Load, LoadSample};
pub use migrate::SCHEMA_VERSION;
pub use store::{Entry, Filter, HistoryError, Record, Store, Summary};
