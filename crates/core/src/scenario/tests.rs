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

const EACH: &str = r#"[scenario]
name = "each"
title = "Rows from a list"

[[test]]
id = "j"
command = "journey"

[[table]]
title = "Steps"
columns = ["device", "µs", "from rx"]

[[table.row]]
label = "fixed"
cells = [{ text = "-" }, { test = "j", at = "/total", scale = 1e-3 }, {}]

[table.each]
test = "j"
at = "/steps"
label = "{tracepoint} ({where.role})"
limit = 3
cells = [
  { at = "/dev", as_text = true },
  { at = "/t_ns", scale = 1e-3, digits = 1 },
  { at = "/t_ns", minus = "/steps/[dev=rx]/t_ns", scale = 1e-3 },
]
"#;

fn journey_doc() -> Value {
    json!({
        "flags": [{"code": "tracer_cost", "severity": "warning", "message": "slow"}],
        "total": 9000,
        "steps": [
            {"tracepoint": "user:sendto", "where": {"role": "a"}, "dev": null, "t_ns": 0},
            {"tracepoint": "net:netif_rx", "where": {"role": "dut"}, "dev": "rx", "t_ns": 2000},
            {"tracepoint": "net:net_dev_queue", "dev": ["tx", 2], "t_ns": 5500},
            {"tracepoint": "user:recvfrom", "where": {"role": "b"}, "dev": null, "t_ns": 8000}
        ]
    })
}

#[test]
fn each_makes_one_row_per_element_after_the_fixed_rows() {
    let l = Loaded::parse(EACH).expect("parses");
    let docs = BTreeMap::from([("j".to_string(), Ok(journey_doc()))]);
    let t = &table::fill(&l.scenario.table, &docs)[0];
    let labels: Vec<&str> = t.rows.iter().map(|r| r.label.as_str()).collect();
    // The limit keeps the first 3 elements; an absent field is "-".
    assert_eq!(
        labels,
        [
            "fixed",
            "user:sendto (a)",
            "net:netif_rx (dut)",
            "net:net_dev_queue (-)"
        ]
    );
    let texts: Vec<Option<&str>> = t.rows[1..]
        .iter()
        .map(|r| r.cells[0].text.as_deref())
        .collect();
    assert_eq!(texts, [Some("-"), Some("rx"), Some("tx, 2")]);
    let times: Vec<Option<f64>> = t.rows[1..].iter().map(|r| r.cells[1].value).collect();
    assert_eq!(times, [Some(0.0), Some(2.0), Some(5.5)]);
    assert_eq!(t.rows[1].cells[1].digits, 1);
    // minus: from one origin for every row.
    let from_rx: Vec<Option<f64>> = t.rows[1..].iter().map(|r| r.cells[2].value).collect();
    assert_eq!(from_rx, [Some(-2.0), Some(0.0), Some(3.5)]);
    // The document's warning marks the figures of generated rows too, not
    // their texts.
    assert_eq!(t.rows[3].cells[1].marks, [1]);
    assert!(t.rows[3].cells[0].marks.is_empty());
    assert_eq!(t.footnotes.len(), 1);
    assert_eq!(t.rows[0].cells[1].value, Some(9.0));
}

#[test]
fn each_without_its_list_says_why_in_one_row() {
    let l = Loaded::parse(EACH).expect("parses");
    let mut doc = journey_doc();
    doc["steps"] = json!({"not": "a list"});
    for (docs, want) in [
        (
            BTreeMap::from([("j".to_string(), Err("no root".to_string()))]),
            "no root",
        ),
        (
            BTreeMap::from([("j".to_string(), Ok(doc))]),
            "is not a list",
        ),
        (
            BTreeMap::from([("j".to_string(), Ok(json!({})))]),
            "no /steps",
        ),
    ] {
        let t = &table::fill(&l.scenario.table, &docs)[0];
        assert_eq!(t.rows.len(), 2, "{want}");
        assert_eq!(t.rows[1].label, "(none)");
        assert!(
            t.rows[1]
                .cells
                .iter()
                .all(|c| c.missing.as_deref().is_some_and(|m| m.contains(want))),
            "{want}: {:?}",
            t.rows[1]
        );
    }
    // An empty list: no rows of its own.
    let docs = BTreeMap::from([("j".to_string(), Ok(json!({"steps": []})))]);
    assert_eq!(table::fill(&l.scenario.table, &docs)[0].rows.len(), 1);
}

#[test]
fn minus_and_as_text_in_fixed_rows() {
    let text = EACH.replace(
        "{ test = \"j\", at = \"/total\", scale = 1e-3 }, {}]",
        "{ test = \"j\", at = \"/total\", minus = \"/steps/1/t_ns\" }, { test = \"j\", at = \"/steps\", as_text = true }]",
    );
    let l = Loaded::parse(&text).expect("parses");
    let docs = BTreeMap::from([("j".to_string(), Ok(journey_doc()))]);
    let row = &table::fill(&l.scenario.table, &docs)[0].rows[0];
    assert_eq!(row.cells[1].value, Some(7000.0));
    // A list of objects is no text.
    assert!(row.cells[2]
        .missing
        .as_deref()
        .is_some_and(|m| m.contains("not a value to show")));
    let missing_origin = text.replace("minus = \"/steps/1/t_ns\"", "minus = \"/nope\"");
    let l = Loaded::parse(&missing_origin).expect("parses");
    let row = &table::fill(&l.scenario.table, &docs)[0].rows[0];
    assert!(row.cells[1]
        .missing
        .as_deref()
        .is_some_and(|m| m.contains("/nope (minus)")));
}

#[test]
fn a_bad_each_names_its_key_and_line() {
    let e = err(&EACH.replace("test = \"j\"\nat", "test = \"k\"\nat"));
    assert_eq!(
        (e.line, e.key.as_deref()),
        (18, Some("table[1].each.test")),
        "{e}"
    );
    let e = err(&EACH.replace("at = \"/steps\"", "at = \"steps\""));
    assert_eq!(
        (e.line, e.key.as_deref()),
        (19, Some("table[1].each.at")),
        "{e}"
    );
    let e = err(&EACH.replace("  { at = \"/dev\", as_text = true },\n", ""));
    assert_eq!(e.key.as_deref(), Some("table[1].each.cells"), "{e}");
    assert!(e.message.contains("2 cells for 3 columns"), "{e}");
    let e = err(&EACH.replace("{ at = \"/dev\"", "{ test = \"j\", at = \"/dev\""));
    assert_eq!(e.line, 22, "{e}");
    assert!(e.message.contains("no 'test' here"), "{e}");
    let e = err(&EACH.replace("minus = \"/steps", "minus = \"steps"));
    assert!(e.message.contains("'steps/[dev=rx]/t_ns'"), "{e}");
    let e = err(&EACH.replace("limit = 3", "limit = 3\ncolour = 1"));
    assert!(e.message.contains("colour"), "{e}");
}

#[test]
fn templates_fill_fields_and_keep_stray_braces() {
    let el = json!({"a": 1, "b": {"c": "x"}, "n": null, "l": [1, true]});
    assert_eq!(table::template("{a}-{b.c}", &el), "1-x");
    assert_eq!(table::template("{n} {missing} {l}", &el), "- - 1, true");
    assert_eq!(table::template("open { here", &el), "open { here");
    assert_eq!(table::template("{b}", &el), "-");
    assert_eq!(table::template("", &el), "");
}

#[test]
fn as_text_stands_alone_and_every_reading_key_needs_a_test() {
    // A text has no addends, no origin and no "not available": refused,
    // naming the key, on the cells' line.
    let e = err(&EACH.replace(
        "{ test = \"j\", at = \"/total\", scale = 1e-3 }",
        "{ test = \"j\", at = \"/total\", as_text = true, minus = \"/total\" }",
    ));
    assert_eq!(
        (e.line, e.key.as_deref()),
        (15, Some("table[1].row[1].cells")),
        "{e}"
    );
    assert!(
        e.message.contains("as_text") && e.message.contains("minus"),
        "{e}"
    );
    let e = err(&EACH.replace(
        "{ at = \"/dev\", as_text = true }",
        "{ at = \"/dev\", as_text = true, add = [\"/x\"] }",
    ));
    assert_eq!(e.key.as_deref(), Some("table[1].each.cells"), "{e}");
    assert!(e.message.contains("no add with it"), "{e}");
    // minus or as_text on a cell of no test would be silently ignored.
    for cell in [
        "{ minus = \"/total\" }",
        "{ at = \"/total\", as_text = true }",
    ] {
        let e = err(&EACH.replace("{ text = \"-\" }", cell));
        assert!(e.message.contains("names no test"), "{cell}: {e}");
    }
}

#[test]
fn each_adds_inside_the_element_and_keeps_fixed_texts() {
    let text = EACH
        .replace(
            "{ at = \"/t_ns\", scale = 1e-3, digits = 1 }",
            "{ at = \"/t_ns\", add = [\"/t_ns\"], scale = 1e-3, digits = 1 }",
        )
        .replace("{ at = \"/dev\", as_text = true }", "{ text = \"x\" }");
    let l = Loaded::parse(&text).expect("parses");
    let docs = BTreeMap::from([("j".to_string(), Ok(journey_doc()))]);
    let t = &table::fill(&l.scenario.table, &docs)[0];
    // Each row's own figure doubled: `add` reads the element, as `at` does.
    let doubled: Vec<Option<f64>> = t.rows[1..].iter().map(|r| r.cells[1].value).collect();
    assert_eq!(doubled, [Some(0.0), Some(4.0), Some(11.0)]);
    // A fixed text reads nothing: no n/a beside it.
    for r in &t.rows[1..] {
        assert_eq!(r.cells[0].text.as_deref(), Some("x"));
        assert_eq!(r.cells[0].missing, None, "{r:?}");
    }
    // Nor in the row that says why there is no list.
    let docs = BTreeMap::from([("j".to_string(), Ok(json!({})))]);
    let none = &table::fill(&l.scenario.table, &docs)[0].rows[1];
    assert_eq!(none.label, "(none)");
    assert_eq!(none.cells[0].text.as_deref(), Some("x"));
    assert_eq!(none.cells[0].missing, None, "{none:?}");
    assert!(none.cells[1].missing.is_some(), "{none:?}");
}

#[test]
fn templates_read_pairs_as_selectors_do() {
    let el = json!({"settings": [["size", "512"], ["reflector-copy", "on"]]});
    assert_eq!(
        table::template("{settings.size} B, copy {settings.reflector-copy}", &el),
        "512 B, copy on"
    );
}

#[test]
fn a_table_without_rows_is_refused() {
    let text = EACH.replace("[[table.row]]\nlabel = \"fixed\"\ncells = [{ text = \"-\" }, { test = \"j\", at = \"/total\", scale = 1e-3 }, {}]\n", "");
    // Rows from the list alone are a table.
    Loaded::parse(&text).expect("parses");
    let end = text.find("[table.each]").expect("each");
    let e = err(&text[..end]);
    assert_eq!((e.line, e.key.as_deref()), (9, Some("table[1]")), "{e}");
    assert!(e.message.contains("nothing to show"), "{e}");
    // Nor may the list's rows be cut to none (the table would say the list
    // is empty).
    let e = err(&EACH.replace("limit = 3", "limit = 0"));
    assert_eq!(
        (e.line, e.key.as_deref()),
        (21, Some("table[1].each.limit")),
        "{e}"
    );
}
