//! `linerate scenario` without privileges: every built-in scenario lists,
//! shows verbatim and dry-runs; malformed files are one line naming the
//! file, line and key, exit 2; the published schema is the Rust type's.
#![allow(clippy::unwrap_used)]

mod common;

use common::linerate;

use linerate_core::result::Envelope;
use linerate_core::scenario::{ScenarioResult, SCHEMA};

const BUILTIN: [(&str, &str); 6] = [
    ("seed000", include_str!("../../../scenarios/seed000.toml")),
    ("seed001", include_str!("../../../scenarios/seed001.toml")),
    ("seed002", include_str!("../../../scenarios/seed002.toml")),
    ("seed003", include_str!("../../../scenarios/seed003.toml")),
    ("seed004", include_str!("../../../scenarios/seed004.toml")),
    ("tour", include_str!("../../../scenarios/tour.toml")),
];

#[test]
fn the_schema_is_published() {
    common::published::<Envelope<ScenarioResult>>(SCHEMA);
}

#[test]
fn every_builtin_is_listed_shown_verbatim_and_dry_runs() {
    let list = common::json_of(&["scenario", "list", "--json"]);
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, BUILTIN.map(|(n, _)| n));
    for (name, text) in BUILTIN {
        let shown = linerate(&["scenario", "show", name]);
        assert!(shown.status.success());
        assert_eq!(String::from_utf8_lossy(&shown.stdout), text, "{name}");
        for short in [false, true] {
            let mut args = vec!["scenario", "run", name, "--dry-run", "--json"];
            if short {
                args.push("--short");
            }
            let plan = common::json_of(&args);
            let tests = plan["tests"].as_array().unwrap();
            assert!(!tests.is_empty(), "{name}");
            // A bedless scenario (the tour) has none: no test gets --bed.
            let bed = plan["bed"][2].as_str().unwrap_or("none").to_string();
            for t in tests {
                let argv: Vec<&str> = t["argv"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap())
                    .collect();
                // Every test whose command takes a bed runs on the
                // scenario's; a bedless scenario (the tour) gives none of
                // them --bed.
                if takes_bed(argv[0]) {
                    assert_eq!(
                        argv.windows(2).any(|w| w == ["--bed", bed.as_str()]),
                        plan["bed"].is_array(),
                        "{name}: {argv:?}"
                    );
                }
            }
            assert!(!plan["tables"].as_array().unwrap().is_empty(), "{name}");
        }
        let text_plan = linerate(&["scenario", "run", name, "--dry-run"]);
        assert!(text_plan.status.success());
        assert!(String::from_utf8_lossy(&text_plan.stdout).contains("dry run: nothing runs"));
    }
}

/// Whether `command` has a `--bed` flag (its help says so).
fn takes_bed(command: &str) -> bool {
    let help = linerate(&[command, "--help"]);
    assert!(help.status.success(), "{command} --help");
    String::from_utf8_lossy(&help.stdout).contains("--bed <")
}

/// A scenario file in a temporary directory, removed on drop.
struct File(std::path::PathBuf);

impl File {
    fn new(tag: &str, text: &str) -> Self {
        let p = std::env::temp_dir().join(format!("lr-scen-{}-{tag}.toml", std::process::id()));
        std::fs::write(&p, text).unwrap();
        Self(p)
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const BASE: &str = "[scenario]\nname = \"t\"\ntitle = \"a test\"\n\n[[test]]\nid = \"rtt\"\ncommand = \"latency\"\nargs = [\"127.0.0.1\"]\nin-process = true\ncount = 10\n";

/// `scenario run` of `text` exits 2 with one line on stderr holding each of `want`.
fn refused(tag: &str, text: &str, want: &[&str]) {
    let f = File::new(tag, text);
    let path = f.0.to_str().unwrap();
    let o = linerate(&["scenario", "run", path, "--dry-run"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{tag}: {err}");
    assert_eq!(err.lines().count(), 1, "{tag}: one line: {err}");
    for w in want {
        assert!(err.contains(w), "{tag}: '{w}' in {err}");
    }
    assert!(err.contains(path), "{tag}: names the file: {err}");
}

#[test]
fn malformed_files_name_file_line_and_key() {
    let good = File::new("good", BASE);
    let o = linerate(&["scenario", "run", good.0.to_str().unwrap(), "--dry-run"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    refused(
        "unknown-key",
        &BASE.replace("title = \"a test\"", "title = \"a test\"\ncolour = 1"),
        &[":4:", "colour"],
    );
    refused(
        "bad-type",
        &BASE.replace("title = \"a test\"", "title = 3"),
        &[":3:", "string"],
    );
    refused(
        "command",
        &BASE.replace("\"latency\"", "\"teleport\""),
        &[":7:", "test[1].command", "teleport"],
    );
    refused(
        "flag",
        &BASE.replace("count = 10", "count = 10\nreflector-mode = \"sideways\""),
        &[":11:", "test[1].reflector-mode", "sideways"],
    );
    refused(
        "unknown-flag",
        &BASE.replace("count = 10", "count = 10\nwarp = 9"),
        &["test[1]", "--warp"],
    );
    refused(
        "config",
        &BASE.replace("count = 10", "count = 0"),
        &[":10:", "test[1].count"],
    );
    let table = format!("{BASE}\n[[table]]\ntitle = \"x\"\ncolumns = [\"a\"]\n[[table.row]]\nlabel = \"r\"\ncells = [{{ test = \"nope\", at = \"/a\" }}]\n");
    refused(
        "table",
        &table,
        &[":17:", "table[1].row[1].cells", "'nope'"],
    );
    refused("syntax", "[scenario\nname = 1\n", &[":1:"]);
    let o = linerate(&["scenario", "run", "no-such-scenario"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("seed000"));
}

#[test]
fn a_loopback_scenario_runs_without_privileges() {
    let text = format!("{BASE}\n[[table]]\ntitle = \"x\"\ncolumns = [\"rtt us\"]\n[[table.row]]\nlabel = \"r\"\ncells = [{{ test = \"rtt\", at = \"/runs/0/stages/[stage=rtt]/p50_ns\", scale = 1e-3 }}]\n");
    let f = File::new("loopback", &text);
    let doc = common::json_of(&[
        "--no-save",
        "scenario",
        "run",
        f.0.to_str().unwrap(),
        "--json",
    ]);
    let e = common::round_trip::<ScenarioResult>(SCHEMA, &doc);
    assert_eq!(e.result.tests.len(), 1);
    assert_eq!(
        e.result.tests[0].result.as_ref().unwrap()["schema"],
        "linerate.latency"
    );
    let cell = &e.result.tables[0].rows[0].cells[0];
    assert!(cell.value.is_some_and(|v| v > 0.0), "{cell:?}");
}

#[test]
fn a_test_that_cannot_run_is_recorded_and_the_others_still_run() {
    // Nothing listens on port 1 of loopback: the session cannot start.
    let text = format!(
        "{BASE}\n[[test]]\nid = \"down\"\ncommand = \"latency\"\nargs = [\"127.0.0.1\"]\nport = 1\ncount = 5\n\n[[table]]\ntitle = \"x\"\ncolumns = [\"rtt\", \"down\"]\n[[table.row]]\nlabel = \"r\"\ncells = [{{ test = \"rtt\", at = \"/runs/0/stages/[stage=rtt]/p50_ns\" }}, {{ test = \"down\", at = \"/runs/0\" }}]\n"
    );
    let f = File::new("down", &text);
    let o = linerate(&[
        "--no-save",
        "scenario",
        "run",
        f.0.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let e = common::round_trip::<ScenarioResult>(SCHEMA, &doc);
    let (ok, down) = (&e.result.tests[0], &e.result.tests[1]);
    assert!(ok.result.is_some() && ok.error.is_none());
    assert!(down.result.is_none() && down.error.is_some());
    let cells = &e.result.tables[0].rows[0].cells;
    assert!(cells[0].value.is_some(), "{cells:?}");
    assert!(
        cells[1]
            .missing
            .as_deref()
            .is_some_and(|m| m.contains("failed")),
        "{cells:?}"
    );
}
