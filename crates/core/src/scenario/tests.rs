use super::*;
use serde_json::json;

const GOOD: &str = r#"# a comment
[scenario]
name = "demo"
title = "A demo"

[bed]
topo = "pair"
link = "100M"

[[test]]
id = "tp"
command = "throughput"
path = ["ideal", "typical"]
time = "2s"
nodelay = true
udp = false
short = { time = "1s" }

[[test]]
id = "rtt"
command = "latency"
args = ["127.0.0.1"]
in-process = true

[[table]]
title = "T"
columns = ["MB/s", "note"]
reference = "somewhere"

[[table.row]]
label = "ideal"
cells = [{ test = "tp", at = "/runs/0/x", scale = 0.5, reference = 10.0, tolerance_pct = 10.0 }, { text = "-" }]
why = "because"
"#;

fn err(text: &str) -> ScenarioError {
    Loaded::parse(text).expect_err("the file is refused")
}

#[test]
fn a_good_file_parses_into_command_lines() {
    let l = Loaded::parse(GOOD).expect("parses");
    assert_eq!(l.hash, content_hash(GOOD));
    assert_eq!(l.hash.len(), 64);
    assert_eq!(
        l.argv(0, Some("b1"), false),
        [
            "throughput",
            "--nodelay",
            "--path",
            "ideal",
            "--path",
            "typical",
            "--time",
            "2s",
            "--bed",
            "b1"
        ]
    );
    assert_eq!(
        l.argv(0, None, true),
        [
            "throughput",
            "--nodelay",
            "--path",
            "ideal",
            "--path",
            "typical",
            "--time",
            "1s"
        ]
    );
    assert_eq!(
        l.argv(1, None, false),
        ["latency", "--in-process", "127.0.0.1"]
    );
    assert_eq!(
        l.bed_argv("x").expect("a bed"),
        ["testbed", "up", "x", "--link", "100M", "--topo", "pair"]
    );
}

#[test]
fn an_unknown_key_names_its_line() {
    let e = err(&GOOD.replace("title = \"A demo\"", "title = \"A demo\"\ncolour = 3"));
    assert_eq!(e.line, 5, "{e}");
    assert!(e.message.contains("colour"), "{e}");
}

#[test]
fn a_bad_type_names_its_line() {
    let e = err(&GOOD.replace("title = \"A demo\"", "title = 7"));
    assert_eq!(e.line, 4, "{e}");
    assert!(e.message.contains("string"), "{e}");
}

#[test]
fn an_unknown_command_names_its_key() {
    let e = err(&GOOD.replace("command = \"latency\"", "command = \"teleport\""));
    assert_eq!(
        (e.line, e.key.as_deref()),
        (21, Some("test[2].command")),
        "{e}"
    );
    assert!(e.message.contains("teleport"), "{e}");
}

#[test]
fn a_table_reading_a_missing_test_is_refused() {
    let e = err(&GOOD.replace("test = \"tp\"", "test = \"nope\""));
    assert_eq!(
        (e.line, e.key.as_deref()),
        (32, Some("table[1].row[1].cells")),
        "{e}"
    );
    assert!(e.message.contains("'nope'"), "{e}");
}

#[test]
fn reserved_and_malformed_options_are_refused() {
    let e = err(&GOOD.replace("nodelay = true", "json = true"));
    assert_eq!(
        (e.line, e.key.as_deref()),
        (15, Some("test[1].json")),
        "{e}"
    );
    let e = err(&GOOD.replace("nodelay = true", "nodelay = { a = 1 }"));
    assert_eq!(e.key.as_deref(), Some("test[1].nodelay"), "{e}");
    assert!(e.message.contains("table"), "{e}");
}

#[test]
fn duplicate_ids_and_row_widths_are_refused() {
    let e = err(&GOOD.replace("id = \"rtt\"", "id = \"tp\""));
    assert_eq!(e.key.as_deref(), Some("test[2].id"), "{e}");
    let e = err(&GOOD.replace(", { text = \"-\" }]", "]"));
    assert!(e.message.contains("1 cells for 2 columns"), "{e}");
}

#[test]
fn a_flag_in_a_message_maps_to_its_key_and_line() {
    let l = Loaded::parse(GOOD).expect("parses");
    let hit = l.key_of_message(Some(0), "error: invalid value 'x' for '--path <PATH>'");
    assert_eq!(hit, Some(("path".to_string(), 13)));
    assert_eq!(l.key_of_message(Some(0), "--pathological"), None);
    assert_eq!(
        l.key_of_message(None, "--link: too fast"),
        Some(("link".to_string(), 8))
    );
}

#[test]
fn cells_read_figures_flags_and_references() {
    let l = Loaded::parse(GOOD).expect("parses");
    let doc = json!({
        "flags": [{"code": "steal", "severity": "warning", "message": "stolen"},
                  {"code": "fyi", "severity": "info", "message": "x"}],
        "runs": [{"x": 19.0, "flags": [{"code": "cpu_bound", "severity": "invalid", "message": "cpu"}]}]
    });
    let docs = BTreeMap::from([
        ("tp".to_string(), Ok(doc)),
        ("rtt".to_string(), Err("no root".to_string())),
    ]);
    let t = &table::fill(&l.scenario.table, &docs)[0];
    let c = &t.rows[0].cells[0];
    assert_eq!(c.value, Some(9.5));
    assert_eq!(c.within_tolerance, Some(true));
    // The run's own flags, not the document's (which gather every run's).
    assert_eq!(c.marks, [1]);
    let codes: Vec<&str> = t.footnotes.iter().map(|f| f.code.as_str()).collect();
    assert_eq!(codes, ["cpu_bound"]);
    assert_eq!(t.rows[0].cells[1].text.as_deref(), Some("-"));

    let docs = BTreeMap::from([("tp".to_string(), Err("bed down".to_string()))]);
    let t = &table::fill(&l.scenario.table, &docs)[0];
    assert_eq!(t.rows[0].cells[0].missing.as_deref(), Some("bed down"));
    let docs = BTreeMap::from([("tp".to_string(), Ok(json!({"runs": [{"x": "fast"}]})))]);
    let t = &table::fill(&l.scenario.table, &docs)[0];
    assert!(t.rows[0].cells[0]
        .missing
        .as_deref()
        .is_some_and(|m| m.contains("not a number")));
}

#[test]
fn selectors_pick_array_elements_by_field() {
    let doc = json!({"runs": [
        {"params": {"send_path": "ideal"}, "link": 100, "x": 1.0},
        {"params": {"send_path": "zerocopy"}, "link": 1000, "x": 2.0, "flags": [{"code": "c", "severity": "warning", "message": "m"}]}
    ]});
    assert_eq!(
        table::resolve(&doc, "/runs/[params.send_path=zerocopy]/x"),
        Some(&json!(2.0))
    );
    assert_eq!(
        table::resolve(&doc, "/runs/[link=100]/x"),
        Some(&json!(1.0))
    );
    assert_eq!(table::resolve(&doc, "/runs/[link=10]/x"), None);
    let both = "/runs/[params.send_path=zerocopy,link=1e3]/x";
    assert_eq!(table::resolve(&doc, both), Some(&json!(2.0)));
    assert_eq!(
        table::resolve(&doc, "/runs/[params.send_path=ideal,link=1000]/x"),
        None
    );
    assert_eq!(table::resolve(&doc, "/runs/[link]/x"), None);
    assert_eq!(table::resolve(&doc, "/runs/1/x"), Some(&json!(2.0)));
    assert_eq!(table::resolve(&doc, "/runs/1/x/deeper"), None);
    assert_eq!(table::resolve(&doc, ""), Some(&doc));
}

#[test]
fn settings_pairs_are_looked_up_by_name() {
    let doc = json!({"runs": [
        {"settings": [["size", "512"], ["reflector-copy", "off"]], "x": 1.0},
        {"settings": [["size", "1024"], ["reflector-copy", "on"]], "x": 2.0}
    ]});
    let at = "/runs/[settings.size=1024,settings.reflector-copy=on]/x";
    assert_eq!(table::resolve(&doc, at), Some(&json!(2.0)));
    assert_eq!(
        table::resolve(&doc, "/runs/[settings.size=512]/settings/reflector-copy"),
        Some(&json!("off"))
    );
    assert_eq!(table::resolve(&doc, "/runs/[settings.mtu=512]/x"), None);
    // A number still indexes the list of pairs.
    assert_eq!(
        table::resolve(&doc, "/runs/0/settings/1/1"),
        Some(&json!("off"))
    );
}

const CELLS: &str = r#"[scenario]
name = "cells"
title = "t"

[[test]]
id = "t"
command = "calc"

[[table]]
title = "T"
columns = ["sum", "energy"]

[[table.row]]
label = "r"
cells = [
  { test = "t", at = "/stages/a", add = ["/stages/b", "/stages/c"], scale = 1e-3 },
  { test = "t", at = "/flags/[code=energy]/evidence/j", unavailable = "/flags/[code=energy_unavailable]" },
]
"#;

#[test]
fn a_cell_adds_figures_and_says_when_one_cannot_exist() {
    let l = Loaded::parse(CELLS).expect("parses");
    let doc = json!({
        "flags": [{"code": "energy_unavailable", "severity": "info", "message": "energy: not available here (no RAPL)"}],
        "stages": {"a": 1000.0, "b": 2000.0, "c": 500.0}
    });
    let docs = BTreeMap::from([("t".to_string(), Ok(doc))]);
    let t = &table::fill(&l.scenario.table, &docs)[0];
    let [sum, energy] = &t.rows[0].cells[..] else {
        panic!("two cells")
    };
    assert_eq!(sum.value, Some(3.5));
    assert_eq!(energy.value, None);
    assert_eq!(energy.missing, None);
    assert_eq!(energy.text.as_deref(), Some(table::NOT_AVAILABLE));
    assert_eq!(
        energy.unavailable.as_deref(),
        Some("energy: not available here (no RAPL)")
    );

    // Measured: the figure; one addend missing: n/a naming it.
    let doc = json!({
        "flags": [{"code": "energy", "severity": "info", "message": "m", "evidence": {"j": 2.0}}],
        "stages": {"a": 1000.0, "c": 500.0}
    });
    let docs = BTreeMap::from([("t".to_string(), Ok(doc))]);
    let t = &table::fill(&l.scenario.table, &docs)[0];
    let [sum, energy] = &t.rows[0].cells[..] else {
        panic!("two cells")
    };
    assert_eq!(sum.value, None);
    assert!(
        sum.missing
            .as_deref()
            .is_some_and(|m| m.contains("/stages/b")),
        "{sum:?}"
    );
    assert_eq!(
        (energy.value, energy.unavailable.as_deref()),
        (Some(2.0), None)
    );

    // Neither the figure nor the statement: n/a.
    let docs = BTreeMap::from([("t".to_string(), Ok(json!({"flags": []})))]);
    let t = &table::fill(&l.scenario.table, &docs)[0];
    assert!(t.rows[0].cells[1].missing.is_some());
    assert_eq!(t.rows[0].cells[1].text, None);
}

#[test]
fn add_and_unavailable_must_be_pointers_of_a_test() {
    let e = err(&CELLS.replace("add = [\"/stages/b\"", "add = [\"stages/b\""));
    assert_eq!(e.key.as_deref(), Some("table[1].row[1].cells"), "{e}");
    assert!(e.message.contains("add = 'stages/b'"), "{e}");
    let e = err(&CELLS.replace("{ test = \"t\", at = \"/flags", "{ at = \"/flags"));
    assert!(e.message.contains("names no test"), "{e}");
}
