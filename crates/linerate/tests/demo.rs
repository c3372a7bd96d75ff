//! `linerate demo`, the tour made of built-in scenarios: its published
//! schema; its JSON document without a testbed (`--no-bed`) and what it
//! saves in the history; as root
//! (privileged: skips loudly without root, fails instead under
//! LINERATE_REQUIRE_PRIV=1) the bed parts run shortened, a bed part whose
//! bed cannot come up is listed as not run while the tour goes on, and
//! SIGINT during a bed part ends the tour with 130 and removes the bed.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::BufRead as _;

use linerate_core::demo::{DemoResult, BED_PARTS, SCHEMA};
use linerate_core::result::Envelope;
use linerate_core::scenario::Loaded;

/// A built-in scenario, parsed.
fn builtin(name: &str) -> Loaded {
    let text = common::linerate(&["scenario", "show", name]).stdout;
    Loaded::parse(&String::from_utf8_lossy(&text)).unwrap()
}

/// The bed a built-in scenario brings up (`sc-` and its hash's first 8
/// hex digits).
fn bed_of(name: &str) -> String {
    format!("sc-{}", &builtin(name).hash[..8])
}

/// The root tests bring up the same beds (a scenario's bed is named by its
/// hash): one at a time.
static BEDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn beds_listed() -> String {
    common::json_of(&["testbed", "list", "--json"]).to_string()
}

#[test]
fn the_schema_is_published() {
    common::published::<Envelope<DemoResult>>(SCHEMA);
}

#[test]
fn without_a_bed_the_tour_runs_and_names_the_bed_parts() {
    let dir = std::env::temp_dir().join(format!("lr-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("history.db");
    let db = db.to_str().unwrap();
    let doc = common::json_of(&["--history", db, "demo", "--no-bed", "--json"]);
    let e = common::round_trip::<DemoResult>(SCHEMA, &doc);
    let r = &e.result;
    assert_eq!(r.parts.len(), 1);
    let tour = &r.parts[0].result;
    assert_eq!(tour.name, "tour");
    assert!(!tour.short);
    assert!(tour.tests.iter().all(|t| t.result.is_some()), "{tour:?}");
    assert_eq!(tour.tables.len(), 4);
    let names: Vec<&str> = r.not_run.iter().map(|n| n.scenario.as_str()).collect();
    assert_eq!(names, BED_PARTS.map(|p| p.scenario));
    assert!(r.not_run.iter().all(|n| n.why == "--no-bed"));
    // Saved as `linerate scenario run tour` saves: the tour's document and
    // its measuring tests' own, each once; the demo's document (which holds
    // them again) is not.
    let list = common::json_of(&["--history", db, "history", "list", "--json"]);
    let rows = list.as_array().unwrap();
    let schemas: Vec<&str> = rows.iter().map(|r| r["schema"].as_str().unwrap()).collect();
    let scenarios = schemas.iter().filter(|s| **s == "linerate.scenario");
    assert_eq!(scenarios.count(), 1, "{schemas:?}");
    assert!(!schemas.contains(&SCHEMA), "{schemas:?}");
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    let saved: Vec<i64> = tour.tests.iter().filter_map(|t| t.saved_as).collect();
    assert!(!saved.is_empty(), "{tour:?}");
    assert!(
        saved.iter().all(|id| ids.contains(id)),
        "{saved:?} in {ids:?}"
    );
    assert_eq!(rows.len(), 1 + saved.len(), "{schemas:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn as_root_the_bed_parts_run_shortened() {
    if !linerate_bed::privileges::require("demo_bed_parts_as_root") {
        return;
    }
    let _one = BEDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let beds: Vec<String> = BED_PARTS.iter().map(|p| bed_of(p.scenario)).collect();
    let _swept: Vec<common::Swept> = beds.iter().cloned().map(common::Swept).collect();
    let o = common::linerate(&["--no-save", "demo", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    // 1: a figure's preconditions failed (flagged invalid); still a result.
    assert!(matches!(o.status.code(), Some(0 | 1)), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let e = common::round_trip::<DemoResult>(SCHEMA, &doc);
    let names: Vec<&str> = (e.result.parts.iter())
        .map(|p| p.result.name.as_str())
        .collect();
    let mut want = vec!["tour"];
    want.extend(BED_PARTS.map(|p| p.scenario));
    assert_eq!(names, want);
    assert!(e.result.not_run.is_empty());
    for p in &e.result.parts[1..] {
        let r = &p.result;
        assert!(r.short, "{}: shortened", r.name);
        assert!(r.bed.is_some(), "{}: on a bed", r.name);
        assert!(
            r.tests.iter().all(|t| t.result.is_some()),
            "{}: every test ran: {err}",
            r.name
        );
        // The headline: every table has a figure in each cell that reads one.
        let figures = r.tables.iter().flat_map(|t| &t.rows).flat_map(|r| &r.cells);
        assert!(figures.clone().any(|c| c.value.is_some()), "{}", r.name);
    }
    let listed = beds_listed();
    for b in &beds {
        assert!(!listed.contains(b.as_str()), "bed {b} removed");
    }
}

/// A network namespace this test made, deleted when dropped.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

#[test]
fn a_bed_part_whose_bed_cannot_come_up_is_not_run_and_the_tour_goes_on() {
    if !linerate_bed::privileges::require("demo_bed_part_not_up") {
        return;
    }
    let _one = BEDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let [first, second] = BED_PARTS;
    // The first part's bed needs this namespace: taken, its bed cannot come up.
    let taken = format!("lr-{}-a", bed_of(first.scenario));
    let made = std::process::Command::new("ip")
        .args(["netns", "add", &taken])
        .status()
        .unwrap();
    assert!(made.success(), "ip netns add {taken}");
    let _taken = Netns(taken.clone());
    let _swept = common::Swept(bed_of(second.scenario));
    let o = common::linerate(&["--no-save", "demo", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    // The part's error ends the tour (exit 2), after the parts that could run.
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&taken), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let e = common::round_trip::<DemoResult>(SCHEMA, &doc);
    let names: Vec<&str> = (e.result.parts.iter())
        .map(|p| p.result.name.as_str())
        .collect();
    assert_eq!(names, ["tour", second.scenario]);
    let [n] = &e.result.not_run[..] else {
        panic!("one part not run: {:?}", e.result.not_run)
    };
    assert_eq!(n.scenario, first.scenario);
    assert!(n.why.contains(&taken), "{}", n.why);
}

#[test]
fn sigint_during_a_bed_part_ends_the_tour_and_removes_the_bed() {
    if !linerate_bed::privileges::require("demo_sigint_removes_the_bed") {
        return;
    }
    let _one = BEDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let bed = bed_of(BED_PARTS[0].scenario);
    let _swept = common::Swept(bed.clone());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["--no-save", "demo"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the linerate binary runs");
    let err = child.stderr.take().expect("piped stderr");
    let mut lines = std::io::BufReader::new(err).lines();
    // The first bed part's first test has started: its bed is up.
    let first = &builtin(BED_PARTS[0].scenario).scenario.test[0].id;
    let started = format!("linerate scenario: test {first} ");
    let mut seen = Vec::new();
    let reached = lines.by_ref().map_while(Result::ok).any(|l| {
        seen.push(l.clone());
        l.starts_with(&started)
    });
    if !reached {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the tour never reached the first bed part's first test: {seen:?}");
    }
    assert!(beds_listed().contains(bed.as_str()), "the bed is up");
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
    let status = common::interrupt(&mut child, std::time::Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "128 + SIGINT");
    assert!(!beds_listed().contains(bed.as_str()), "bed {bed} removed");
}
