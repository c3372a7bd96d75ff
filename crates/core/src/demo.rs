//! `linerate demo` as data: a short tour made of built-in scenarios — the
//! bedless one everywhere, the replays of the notes on testbeds (shortened
//! trials) where this process may build beds — and its JSON result.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::result::Envelope;
use crate::scenario::ScenarioResult;

/// The schema name of `linerate demo --json`.
pub const SCHEMA: &str = "linerate.demo";
/// Its version.
pub const VERSION: u32 = 1;

/// The built-in scenario the tour starts with: no bed, no privileges.
pub const LOOPBACK_PART: &str = "tour";

/// A part of the tour that needs a testbed (root).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BedPart {
    /// The built-in scenario it runs with `--short`.
    pub scenario: &'static str,
    /// What it shows, for the line that says it did not run.
    pub what: &'static str,
}

/// The parts that need a testbed, in the order they run: SEGGER's response
/// times first (the headline), then NXP AN11053's Table 1.
pub const BED_PARTS: [BedPart; 2] = [
    BedPart {
        scenario: "seed001",
        what: "SEGGER emNet's response times at 100 Mbit/s and 1 Gbit/s",
    },
    BedPart {
        scenario: "seed000",
        what: "NXP AN11053's Table 1 at 100 Mbit/s",
    },
];

/// What `linerate demo --json` prints inside the common envelope (whose
/// flags are every part's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DemoResult {
    /// The scenarios that ran, in order, each its `linerate scenario run
    /// --json` document.
    pub parts: Vec<Envelope<ScenarioResult>>,
    /// The parts that did not run, and why.
    pub not_run: Vec<NotRun>,
}

/// A part of the tour that did not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NotRun {
    /// The built-in scenario.
    pub scenario: String,
    /// Why it did not run (e.g. "not root").
    pub why: String,
    /// The command line that runs it.
    pub command: String,
}

/// The bed parts that cannot run when this process may not build beds
/// (`why`), each with the command that runs it.
pub fn not_run(why: &str) -> Vec<NotRun> {
    BED_PARTS.iter().map(|p| p.not_run(why)).collect()
}

impl BedPart {
    /// This part as one that did not run (`why`), with the command that
    /// runs it.
    pub fn not_run(&self, why: &str) -> NotRun {
        NotRun {
            scenario: self.scenario.to_string(),
            why: why.to_string(),
            command: format!("sudo linerate scenario run {} --short", self.scenario),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bed_part_says_how_to_run_it() {
        let n = not_run("not root");
        assert_eq!(n.len(), BED_PARTS.len());
        assert_eq!(n[0].scenario, "seed001");
        assert!(n
            .iter()
            .all(|p| p.command.ends_with(&format!("run {} --short", p.scenario))));
        assert!(n.iter().all(|p| p.why == "not root"));
    }
}
