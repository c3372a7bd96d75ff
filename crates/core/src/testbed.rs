//! `linerate testbed`: the documents of `up --dry-run`, `down`, `list` and
//! `sweep`, each under its own schema name, and the plain summary of a bed
//! that the human renderers read.
//!
//! The bed's own description (schema `linerate.bed`, the stored record) and
//! its spec are defined by `linerate-bed`; the documents here are generic
//! over them (`S` the spec, `R` the record) so this crate stays free of the
//! bed's I/O.
//!
//! Version 1 of all four was one schema name, `linerate.testbed`, with four
//! shapes; version 2 gives each its name. Version-1 documents read into
//! these types (the list's status strings included).

use serde::{Deserialize, Serialize};

/// `testbed up --dry-run --json`.
pub const PLAN_SCHEMA: &str = "linerate.testbed.plan";
/// `testbed down --json`.
pub const DOWN_SCHEMA: &str = "linerate.testbed.down";
/// `testbed list --json`.
pub const LIST_SCHEMA: &str = "linerate.testbed.list";
/// `testbed up --json` (the bed built, its stored description inside).
pub const UP_SCHEMA: &str = "linerate.testbed.up";
/// `testbed sweep --json`.
pub const SWEEP_SCHEMA: &str = "linerate.testbed.sweep";
/// Version of the four (2: one schema name each; 1 was `linerate.testbed`).
pub const VERSION: u32 = 2;

/// What `testbed up --dry-run` would do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestbedPlan<S> {
    /// Always true: nothing was created.
    pub dry_run: bool,
    /// The bed asked for.
    pub spec: S,
    /// The commands that would build it, in order.
    pub commands: Vec<String>,
    /// The commands that would read each setting back.
    pub readbacks: Vec<String>,
    /// The commands that would remove it.
    pub down_commands: Vec<String>,
    /// Fidelity notes.
    pub notes: Vec<String>,
}

/// The bed `testbed up` built: its stored description (`linerate.bed`, as
/// `/run/linerate/beds/NAME.json` holds it). Version 1 printed that
/// description alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestbedUp<R> {
    /// The bed's description.
    pub bed: R,
}

/// What `testbed down` removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestbedDown {
    /// The bed's name.
    pub removed: String,
    /// Its namespaces, now gone.
    pub namespaces: Vec<String>,
}

/// Whether a stored bed is whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BedStatus {
    /// Complete, every namespace present.
    Up,
    /// Never finished (its creator died while building it).
    #[serde(alias = "incomplete (sweep it)")]
    Incomplete,
    /// Complete, but no namespace is left.
    #[serde(alias = "gone (sweep it)")]
    Gone,
    /// Complete, some namespaces missing.
    #[serde(alias = "partial (sweep it)")]
    Partial,
}

impl BedStatus {
    /// The status of a bed whose record says `complete`, with `present` of
    /// its `total` namespaces existing.
    pub fn of(complete: bool, present: usize, total: usize) -> Self {
        match (complete, present) {
            (false, _) => Self::Incomplete,
            (true, p) if p == total => Self::Up,
            (_, 0) => Self::Gone,
            _ => Self::Partial,
        }
    }

    /// `up`, `incomplete`, `gone`, `partial`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Incomplete => "incomplete",
            Self::Gone => "gone",
            Self::Partial => "partial",
        }
    }

    /// Whether `testbed sweep` should remove it.
    pub fn needs_sweep(self) -> bool {
        self != Self::Up
    }
}

/// One stored bed in `testbed list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ListedBed<R> {
    /// The bed's name.
    pub name: String,
    /// Whether it is whole.
    pub status: BedStatus,
    /// Its stored description (schema `linerate.bed`).
    pub bed: R,
}

/// The stored beds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestbedList<R> {
    /// The beds that could be read.
    pub beds: Vec<ListedBed<R>>,
    /// Files that could not be read, one sentence each.
    pub errors: Vec<String>,
}

/// What `testbed sweep` removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestbedSweep {
    /// Namespaces deleted.
    pub netns: Vec<String>,
    /// Root-namespace links deleted.
    pub links: Vec<String>,
    /// Bed files removed (paths).
    pub files: Vec<String>,
    /// Link emulator processes stopped (pids).
    #[serde(default)]
    pub emulators: Vec<u32>,
    /// What failed.
    pub errors: Vec<String>,
}

/// A bed as the human renderers show it: plain fields, filled from the
/// stored record by `linerate-bed`.
#[derive(Debug, Clone, PartialEq)]
pub struct BedSummary {
    /// The bed's name.
    pub name: String,
    /// `pair`, `bridge`, `router`.
    pub topology: String,
    /// Its settings, each as `name value` (`link 100 Mbit/s`, `rps`).
    pub settings: Vec<String>,
    /// Its hosts.
    pub hosts: Vec<HostSummary>,
    /// Fidelity notes.
    pub notes: Vec<String>,
}

/// One host of a [`BedSummary`].
#[derive(Debug, Clone, PartialEq)]
pub struct HostSummary {
    /// `a`, `b`, `dut`.
    pub role: String,
    /// Its namespace.
    pub netns: String,
    /// Its test interface.
    pub iface: String,
    /// Its IPv4 test address.
    pub ipv4: Option<String>,
    /// Its IPv6 test address.
    pub ipv6: Option<String>,
    /// Its default gateways.
    pub gateways: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status() {
        assert_eq!(BedStatus::of(true, 2, 2), BedStatus::Up);
        assert_eq!(BedStatus::of(false, 2, 2), BedStatus::Incomplete);
        assert_eq!(BedStatus::of(true, 0, 2), BedStatus::Gone);
        assert_eq!(BedStatus::of(true, 1, 2), BedStatus::Partial);
        let v1: BedStatus = serde_json::from_str("\"partial (sweep it)\"").unwrap();
        assert_eq!(v1, BedStatus::Partial);
        assert_eq!(serde_json::to_string(&BedStatus::Up).unwrap(), "\"up\"");
    }
}
