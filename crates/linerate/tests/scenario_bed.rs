//! Every built-in scenario run end to end with shortened trials (`--short`)
//! on the bed it brings up and removes (privileged; skips loudly without
//! root, fails instead under LINERATE_REQUIRE_PRIV=1): the document
//! validates and reads back, every table has every row with a figure in
//! each cell that asks for one, and every warning or invalid flag a test's
//! result carries marks the table cells read from that result.
#![allow(clippy::unwrap_used)]

mod common;

use common::linerate;
use std::collections::BTreeSet;

use linerate_core::result::Severity;
use linerate_core::scenario::{Loaded, ScenarioResult, SCHEMA};

fn run_builtin(name: &str, text: &str) {
    if !linerate_bed::privileges::require(&format!("scenario_{name}_short_on_a_bed")) {
        return;
    }
    let spec = Loaded::parse(text).unwrap();
    // The scenario removes its bed itself; this is the safety net.
    let _swept = common::Swept(format!("sc-{}", &spec.hash[..8]));
    let o = linerate(&["--no-save", "scenario", "run", name, "--short", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    // 1: a figure's preconditions failed (flagged invalid); still a result.
    assert!(matches!(o.status.code(), Some(0 | 1)), "{name}: {err}");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let e = common::round_trip::<ScenarioResult>(SCHEMA, &doc);
    let r = &e.result;
    assert!(r.short);
    assert_eq!(r.hash, spec.hash);
    assert!(
        r.tests.iter().all(|t| t.result.is_some()),
        "{name}: every test ran: {err}"
    );
    assert_eq!(r.tables.len(), spec.scenario.table.len());
    let mut marked = BTreeSet::new();
    for (t, s) in r.tables.iter().zip(&spec.scenario.table) {
        let labels: Vec<&str> = t.rows.iter().map(|r| r.label.as_str()).collect();
        let want: Vec<&str> = s.row.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, want, "{name}: {}", t.title);
        for (row, srow) in t.rows.iter().zip(&s.row) {
            for (c, sc) in row.cells.iter().zip(&srow.cells) {
                // A figure, or the result's own word that it cannot
                // exist here (no RAPL, a method this CPU lacks).
                if sc.test.is_some() {
                    assert!(
                        c.value.is_some() || c.unavailable.is_some(),
                        "{name}: {} / {}: {:?}",
                        t.title,
                        row.label,
                        c.missing
                    );
                }
            }
        }
        marked.extend(t.footnotes.iter().map(|f| (f.test.clone(), f.code.clone())));
    }
    // Each test's warning and invalid flags (host-limited, emulator-limited,
    // noisy host …) are carried into the tables that read it.
    let read: BTreeSet<&str> = spec
        .scenario
        .table
        .iter()
        .flat_map(|t| &t.row)
        .flat_map(|r| &r.cells)
        .filter_map(|c| c.test.as_deref())
        .collect();
    for t in r.tests.iter().filter(|t| read.contains(t.id.as_str())) {
        let flags = t.result.as_ref().unwrap()["flags"].as_array().unwrap();
        for f in flags {
            let sev: Severity = serde_json::from_value(f["severity"].clone()).unwrap();
            if sev != Severity::Info {
                let code = f["code"].as_str().unwrap().to_string();
                assert!(
                    marked.contains(&(t.id.clone(), code.clone())),
                    "{name}: test {}'s flag {code} marks no cell",
                    t.id
                );
            }
        }
    }
    // The bed is gone.
    let list = common::json_of(&["testbed", "list", "--json"]);
    assert!(
        !list
            .to_string()
            .contains(&format!("sc-{}", &spec.hash[..8])),
        "{name}: the bed was removed"
    );
}

#[test]
fn seed000_short_on_a_bed() {
    run_builtin("seed000", include_str!("../../../scenarios/seed000.toml"));
}

#[test]
fn seed001_short_on_a_bed() {
    run_builtin("seed001", include_str!("../../../scenarios/seed001.toml"));
}

#[test]
fn seed002_short_on_a_bed() {
    run_builtin("seed002", include_str!("../../../scenarios/seed002.toml"));
}

#[test]
fn seed004_short_on_a_bed() {
    run_builtin("seed004", include_str!("../../../scenarios/seed004.toml"));
}
