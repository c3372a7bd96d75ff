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
use linerate_core::scenario::table::{self, CellSpec};
use linerate_core::scenario::{Loaded, ScenarioResult, SCHEMA};

/// Runs built-in `name` shortened and checks it as the module says; its
/// result, for checks of its own (None: skipped without privileges).
fn run_builtin(name: &str, text: &str) -> Option<ScenarioResult> {
    if !linerate_bed::privileges::require(&format!("scenario_{name}_short_on_a_bed")) {
        return None;
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
        assert_eq!(
            labels[..want.len().min(labels.len())],
            want,
            "{name}: {}",
            t.title
        );
        // Rows from a list: one per element, up to the limit.
        let listed = s.each.as_ref().map_or(0, |e| {
            let doc = r.tests.iter().find(|t| t.id == e.test).unwrap();
            let list = table::resolve(doc.result.as_ref().unwrap(), &e.at);
            let len = list.and_then(|l| l.as_array()).map(Vec::len);
            let len = len.unwrap_or_else(|| panic!("{name}: {}: no list at {}", t.title, e.at));
            len.min(e.limit.unwrap_or(usize::MAX))
        });
        assert_eq!(labels.len(), want.len() + listed, "{name}: {}", t.title);
        for (k, row) in t.rows.iter().enumerate() {
            let cells: Vec<&CellSpec> = match s.row.get(k) {
                Some(fixed) => fixed.cells.iter().collect(),
                None => s.each.iter().flat_map(|e| &e.cells).collect(),
            };
            for (c, sc) in row.cells.iter().zip(cells) {
                let reads = sc.test.is_some() || (k >= s.row.len() && !sc.at.is_empty());
                // A figure, or the result's own word that it cannot exist
                // here (no RAPL, a method this CPU lacks).
                let shown = match sc.as_text {
                    true => c.text.is_some(),
                    false => c.value.is_some() || c.unavailable.is_some(),
                };
                if reads {
                    assert!(
                        shown,
                        "{name}: {} / {}: {:?}",
                        t.title, row.label, c.missing
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
        .chain(
            spec.scenario
                .table
                .iter()
                .filter_map(|t| Some(t.each.as_ref()?.test.as_str())),
        )
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
    Some(e.result)
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
fn seed003_short_on_a_bed() {
    let Some(r) = run_builtin("seed003", include_str!("../../../scenarios/seed003.toml")) else {
        return;
    };
    let doc = |id: &str| {
        let t = r.tests.iter().find(|t| t.id == id).unwrap();
        t.result.clone().unwrap()
    };
    // A frame sent alone crosses the emulated link twice: its frame bits
    // over its one-way time never reach the line rate.
    let frames = doc("frames");
    for s in frames["sizes"].as_array().unwrap() {
        let line = s["line_rate_frames_per_s"].as_f64().unwrap()
            * s["frame_bytes"].as_f64().unwrap()
            * 8.0;
        let single = s["single_frame"]["single_frame_bits_per_s"]
            .as_f64()
            .unwrap();
        assert!(
            single > 0.0 && single < line,
            "{}: {single} of {line}",
            s["frame_bytes"]
        );
    }
    for id in ["journey64", "journey1500"] {
        // Steps in path order: the bridge receives on its a side before it
        // queues on its b side, and both come after the sender's sendto().
        let j = doc(id);
        let steps = j["steps"].as_array().unwrap();
        let at = |point: &str, dev: &str| {
            steps
                .iter()
                .position(|s| s["point"] == point && s["dev"] == dev)
                .unwrap_or_else(|| panic!("{id}: no {point} on {dev}"))
        };
        assert_eq!(steps[0]["point"], "user_send", "{id}");
        assert!(
            at("netif_rx", "lr-dut-a") < at("netif_receive_skb", "lr-dut-a"),
            "{id}"
        );
        assert!(
            at("netif_receive_skb", "lr-dut-a") < at("net_dev_queue", "lr-dut-b"),
            "{id}"
        );
        // The bridge's forwarding is named among the gaps.
        let gaps = j["gaps"].as_array().unwrap();
        assert!(
            gaps.iter()
                .any(|g| g["what"].as_str().unwrap().starts_with("bridge forwarding")),
            "{id}: {gaps:?}"
        );
    }
}

#[test]
fn seed004_short_on_a_bed() {
    run_builtin("seed004", include_str!("../../../scenarios/seed004.toml"));
}
