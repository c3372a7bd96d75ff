//! Results that last, through the binary: every measuring command's result
//! saved and read back exactly (fixtures and real runs on loopback), two
//! processes saving at once, a corrupt database, a version-1 database,
//! `--no-save`, `compare` on results with known spread, and `--json-stream`.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use linerate_history::{Entry, Store};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// A fresh directory of its own under the system's temporary directory.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lr-hist-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `linerate <args>` with the history at `db`.
fn linerate(db: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--history")
        .arg(db)
        .output()
        .unwrap()
}

/// The `--json-stream` lines of `o`, each parsed (a line that is not JSON
/// fails the test).
fn events(o: &Output) -> Vec<Value> {
    let lines = stdout(o);
    let each = lines.lines();
    each.map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Their event names.
fn event_names(events: &[Value]) -> Vec<String> {
    let each = events.iter().map(|e| e["event"].as_str().unwrap());
    each.map(str::to_string).collect()
}

/// The events of `o`, which start with `start`, end with `end` and have a
/// `middle` event.
fn framed(o: &Output, middle: &str) -> Vec<Value> {
    let events = events(o);
    let names = event_names(&events);
    assert_eq!(
        names.first().map(String::as_str),
        Some("start"),
        "{names:?}"
    );
    assert_eq!(names.last().map(String::as_str), Some("end"), "{names:?}");
    assert!(names.iter().any(|n| n == middle), "{names:?}");
    events
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The ids `history list --json` shows.
fn ids(db: &Path, filters: &[&str]) -> Vec<i64> {
    let o = linerate(db, &[&["history", "list", "--json"], filters].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let list: Value = serde_json::from_slice(&o.stdout).unwrap();
    let list = list.as_array().unwrap().iter();
    list.map(|r| r["id"].as_i64().unwrap()).collect()
}

// An explicit timeout: the one sized from the RTTs seen (10 ms at least)
// can call a reply lost on a loaded test host.
const LATENCY: [&str; 7] = [
    "latency",
    "127.0.0.1",
    "--in-process",
    "--count",
    "50",
    "--timeout",
    "1s",
];

#[test]
fn the_suite_never_writes_to_the_users_data_directory() {
    // .cargo/config.toml points XDG_DATA_HOME of everything cargo runs
    // into target/.
    let xdg = std::env::var("XDG_DATA_HOME").unwrap_or_default();
    assert!(xdg.contains("target/test-xdg-data"), "XDG_DATA_HOME={xdg}");
    // And the binary's default follows it.
    let dir = scratch("xdg");
    let o = Command::new(BIN)
        .args(LATENCY)
        .arg("--json")
        .env("XDG_DATA_HOME", &dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.join("linerate/history.sqlite").is_file());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_real_latency_run_is_saved_exactly_as_printed_with_its_tag() {
    let dir = scratch("latency");
    let db = dir.join("h.sqlite");
    let o = linerate(&db, &[&LATENCY[..], &["--json", "--tag", "loop"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = ids(&db, &["--tag", "loop", "--command", "latency"]);
    assert_eq!(listed.len(), 1);
    let id = listed[0].to_string();
    let export = linerate(&db, &["history", "export", &id]);
    assert_eq!(
        stdout(&export),
        stdout(&o),
        "export prints the stored document exactly"
    );
    let list: Value =
        serde_json::from_slice(&linerate(&db, &["history", "--json"]).stdout).unwrap();
    common::validate("linerate.history.list", &list);
    let show = linerate(&db, &["history", "show", &id, "--json"]);
    let rec: Value = serde_json::from_slice(&show.stdout).unwrap();
    common::validate("linerate.history.show", &rec);
    assert_eq!(
        rec["document"],
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    );
    assert_eq!(rec["tag"], "loop");
    assert_eq!(rec["command"], "latency");
    assert!(
        rec["kernel"].is_string() && rec["cpus"].as_i64().unwrap() >= 1,
        "{rec}"
    );
    assert_eq!(rec["linerate_version"], env!("CARGO_PKG_VERSION"));
    let human = stdout(&linerate(&db, &["history", "show", &id]));
    assert!(
        human.contains("kernel") && human.contains("Response time"),
        "{human}"
    );
    assert!(ids(&db, &["--tag", "other"]).is_empty());
    assert!(ids(&db, &["--command", "throughput"]).is_empty());
    assert!(ids(&db, &["--since", "1h"]).contains(&listed[0]));
    assert!(ids(&db, &["--until", "1h"]).is_empty());
    let rm = linerate(&db, &["history", "rm", &id]);
    assert!(rm.status.success(), "{}", stderr(&rm));
    assert!(ids(&db, &[]).is_empty());
    let gone = linerate(&db, &["history", "show", &id]);
    assert_eq!(gone.status.code(), Some(2));
    assert!(
        stderr(&gone).contains("no result with id"),
        "{}",
        stderr(&gone)
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// `linerate server --once --json-stream` on a free port: its `log` events
/// are JSON lines on stdout, the first saying it listens.
fn stream_server() -> (
    std::process::Child,
    u16,
    std::thread::JoinHandle<Vec<Value>>,
) {
    for _ in 0..10 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let p = port.to_string();
        let mut child = Command::new(BIN)
            .args(["server", "--bind", "127.0.0.1", "--port", &p, "--once"])
            .arg("--json-stream")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let first: Value = serde_json::from_str(&first).unwrap_or(Value::Null);
        if first["event"] != "log"
            || !first["data"]["line"]
                .as_str()
                .unwrap_or("")
                .contains("listening")
        {
            let _ = child.kill();
            let _ = child.wait();
            continue;
        }
        let rest = std::thread::spawn(move || {
            let each = lines.map_while(Result::ok);
            each.map(|l| serde_json::from_str(&l).unwrap()).collect()
        });
        return (child, port, rest);
    }
    panic!("no free port for a server in 10 tries");
}

#[test]
fn a_real_throughput_run_streams_json_lines_and_is_saved() {
    let dir = scratch("throughput");
    let db = dir.join("h.sqlite");
    let (mut server, port, server_events) = stream_server();
    let p = port.to_string();
    let args = [
        "throughput",
        "127.0.0.1",
        "--port",
        &p,
        "--time",
        "2",
        "--json-stream",
    ];
    let o = linerate(&db, &args);
    let _ = server.wait();
    assert!(o.status.success(), "{}", stderr(&o));
    let events = framed(&o, "interval");
    assert_eq!(events[0]["data"]["command"], "throughput");
    let interval = events.iter().find(|e| e["event"] == "interval").unwrap();
    assert!(
        interval["data"]["sent_bytes"].as_u64().unwrap() > 0,
        "{interval}"
    );
    let end = &events.last().unwrap()["data"];
    assert_eq!(end["schema"], "linerate.throughput");
    // The end event's document is the one saved.
    let id = ids(&db, &["--command", "throughput"]);
    assert_eq!(id.len(), 1);
    let saved: Value = serde_json::from_str(&stdout(&linerate(
        &db,
        &["history", "export", &id[0].to_string()],
    )))
    .unwrap();
    assert_eq!(&saved, end);
    common::round_trip::<linerate_core::throughput::model::ThroughputResult>(
        "linerate.throughput",
        &saved,
    );
    let server_events = server_events.join().unwrap();
    assert!(
        server_events.iter().all(|e| e["event"] == "log"),
        "{server_events:?}"
    );
    assert!(!server_events.is_empty());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn latency_json_stream_has_start_step_and_end() {
    let dir = scratch("stream");
    let db = dir.join("h.sqlite");
    let o = linerate(
        &db,
        &[&LATENCY[..], &["--json-stream", "--no-save"]].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let names = event_names(&events(&o));
    assert_eq!(names, ["start", "step", "end"]);
    assert!(!db.exists(), "--no-save writes nothing");
    // A run without a result ends its stream with an error event.
    let refused = linerate(
        &db,
        &[
            "throughput",
            "127.0.0.1",
            "--port",
            "9",
            "--time",
            "1",
            "--json-stream",
        ],
    );
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let names = event_names(&events(&refused));
    assert_eq!(names, ["start", "error"]);
    // Not on a command that does not run long.
    let calc = linerate(&db, &["calc", "--json-stream"]);
    assert_eq!(calc.status.code(), Some(2));
    assert!(stderr(&calc).contains("--json-stream"), "{}", stderr(&calc));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn two_processes_saving_at_once_both_land() {
    let dir = scratch("concurrent");
    let db = dir.join("h.sqlite");
    let spawn = |tag: &str| {
        Command::new(BIN)
            .args(LATENCY)
            .args(["--json", "--tag", tag, "--history"])
            .arg(&db)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("a"), spawn("b"));
    for o in [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()] {
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert_eq!(ids(&db, &["--tag", "a"]).len(), 1);
    assert_eq!(ids(&db, &["--tag", "b"]).len(), 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_corrupt_database_costs_one_warning_line_not_the_result() {
    let dir = scratch("corrupt");
    let db = dir.join("h.sqlite");
    std::fs::write(&db, vec![0x42; 4096]).unwrap();
    let o = linerate(&db, &[&LATENCY[..], &["--json"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["schema"], "linerate.latency");
    let err = stderr(&o);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("not saved")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("corrupt"), "{err}");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        vec![0x42; 4096],
        "left as it was"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_version_1_database_is_read_after_migration() {
    let dir = scratch("v1");
    let db = dir.join("h.sqlite");
    let v1 = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../history/tests/fixtures/history-v1.sql"),
    )
    .unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(&v1)
        .unwrap();
    assert_eq!(ids(&db, &[]), [1, 2]);
    assert_eq!(ids(&db, &["--tag", "nightly"]), [1]);
    let show = linerate(&db, &["history", "show", "1", "--json"]);
    let rec: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(
        rec["kernel"], "6.1.0-18-amd64",
        "filled in by the migration"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Every measuring command's stored document reads back exactly, and shows
/// as its command renders it.
#[test]
fn every_measuring_commands_fixture_round_trips() {
    let dir = scratch("fixtures");
    let db = dir.join("h.sqlite");
    let mut store = Store::open(&db).unwrap();
    for (file, heading) in [
        ("linerate.throughput.json", "127.0.0.1"),
        ("linerate.throughput.scenarios.json", "across scenarios"),
        ("linerate.latency.json", "Response time"),
        ("linerate.latency.sweep.json", "Response time"),
        ("linerate.rfc2544.json", "RFC 2544"),
    ] {
        let text = serde_json::to_string_pretty(&common::fixture(file)).unwrap() + "\n";
        let id = store.save(&entry(&text)).unwrap().to_string();
        assert_eq!(
            stdout(&linerate(&db, &["history", "export", &id])),
            text,
            "{file}"
        );
        let show = stdout(&linerate(&db, &["history", "show", &id]));
        assert!(show.contains(heading), "{file}: {show}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

fn entry(text: &str) -> Entry<'_> {
    Entry {
        document: text,
        tag: None,
        bed: None,
        load: None,
    }
}

/// The RFC 2544 fixture with its 64-byte throughput searched three times
/// (`runs` fps; the lowest quoted, as RFC 2544 quotes it).
fn rfc2544_with_runs(runs: [f64; 3]) -> String {
    let mut doc = common::fixture("linerate.rfc2544.json");
    let t = &mut doc["sizes"][0]["throughput"];
    let one = t["runs"][0].clone();
    t["runs"] = runs
        .iter()
        .map(|&fps| {
            let mut r = one.clone();
            r["throughput_fps"] = json!(fps);
            r
        })
        .collect();
    t["throughput_fps"] = json!(runs.iter().copied().fold(f64::INFINITY, f64::min));
    serde_json::to_string_pretty(&doc).unwrap()
}

#[test]
fn compare_judges_changes_against_the_spread() {
    let dir = scratch("compare");
    let db = dir.join("h.sqlite");
    let mut store = Store::open(&db).unwrap();
    let mut save = |runs| {
        store
            .save(&entry(&rfc2544_with_runs(runs)))
            .unwrap()
            .to_string()
    };
    let base = save([100_000.0, 101_000.0, 102_000.0]);
    let better = save([110_000.0, 111_000.0, 112_000.0]);
    let worse = save([80_000.0, 81_000.0, 82_000.0]);
    let same = save([101_500.0, 102_500.0, 103_000.0]);
    let verdict = |ids: &[&str]| -> (Value, Option<i32>) {
        let o = linerate(
            &db,
            &[&["compare", "--json", "--fail-on-regression", "5"], ids].concat(),
        );
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        common::validate("linerate.compare", &doc);
        let row = doc["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == "64 B throughput")
            .unwrap()
            .clone();
        (row["changes"][1].clone(), o.status.code())
    };
    let (c, code) = verdict(&[&base, &better]);
    assert_eq!(
        (c["verdict"].as_str(), code),
        (Some("improvement"), Some(0)),
        "{c}"
    );
    assert!(
        (c["change_pct"].as_f64().unwrap() - 10.0).abs() < 1e-9,
        "{c}"
    );
    assert_eq!(c["spread_known"], true);
    let (c, code) = verdict(&[&base, &worse]);
    assert_eq!(
        (c["verdict"].as_str(), code),
        (Some("regression"), Some(1)),
        "{c}"
    );
    let (c, code) = verdict(&[&base, &same]);
    assert_eq!(
        (c["verdict"].as_str(), code),
        (Some("within_spread"), Some(0)),
        "{c}"
    );
    // The human table says the same, and why the exit code is 1.
    let o = linerate(
        &db,
        &["compare", &base, &worse, "--fail-on-regression", "5"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("regression"), "{}", stdout(&o));
    assert!(stderr(&o).contains("64 B throughput"), "{}", stderr(&o));
    // --last 2: the newest two, the older the baseline.
    let o = linerate(&db, &["compare", "--last", "2", "--json"]);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let picked: Vec<String> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].to_string())
        .collect();
    assert_eq!(picked, [worse, same]);
    // Results of other kinds do not compare.
    let lat = serde_json::to_string_pretty(&common::fixture("linerate.latency.json")).unwrap();
    let lat = store_one(&db, &lat);
    let o = linerate(&db, &["compare", &base, &lat]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("different kinds"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(dir);
}

fn store_one(db: &Path, text: &str) -> String {
    Store::open(db)
        .unwrap()
        .save(&entry(text))
        .unwrap()
        .to_string()
}

#[test]
fn history_schemas_are_published() {
    common::published::<Vec<linerate_history::Summary>>("linerate.history.list");
    common::published::<linerate_history::Record>("linerate.history.show");
}

#[test]
fn compare_schema_is_published() {
    common::published::<linerate_core::result::Envelope<linerate_core::compare::Comparison>>(
        "linerate.compare",
    );
}

/// On a bed the record names it and its settings (privileged: skips loudly
/// without root, fails under LINERATE_REQUIRE_PRIV=1).
#[test]
fn a_result_on_a_bed_is_saved_with_the_bed_and_its_settings() {
    use linerate_bed::{Bed, BedSpec, Topology};
    if !linerate_bed::privileges::require(
        "a_result_on_a_bed_is_saved_with_the_bed_and_its_settings",
    ) {
        return;
    }
    let dir = scratch("bed");
    let db = dir.join("h.sqlite");
    let name = format!("h{}", std::process::id());
    let mut spec = BedSpec::new(name.clone(), Topology::Pair);
    spec.link = Some("100M".parse().unwrap());
    let bed = Bed::up(&spec).expect("bed up");
    let o = linerate(
        &db,
        &["latency", "--bed", &name, "--count", "100", "--json"],
    );
    // RFC 2544 streams its steps and is saved too.
    let rfc = linerate(
        &db,
        &[
            "rfc2544",
            "--bed",
            &name,
            "--frames",
            "1518",
            "--tests",
            "throughput",
            "--trial",
            "500ms",
            "--drain",
            "200ms",
            "--ceiling-time",
            "300ms",
            "--resolution",
            "10",
            "--json-stream",
        ],
    );
    drop(bed);
    // A tbf-shaped bed has a rate and no wire: the latency may be flagged
    // below_wire_time (exit 1); it is saved all the same.
    assert!(o.status.code() != Some(2), "{}", stderr(&o));
    assert!(rfc.status.code() != Some(2), "{}", stderr(&rfc));
    let events = framed(&rfc, "step");
    assert_eq!(events.last().unwrap()["data"]["schema"], "linerate.rfc2544");
    assert_eq!(ids(&db, &["--bed", &name]).len(), 2);
    assert_eq!(ids(&db, &["--bed", &name, "--command", "rfc2544"]).len(), 1);
    let show = linerate(&db, &["history", "show", "1", "--json"]);
    let rec: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(rec["bed"], name.as_str());
    let settings = rec["bed_settings"].as_array().unwrap();
    assert!(
        settings
            .iter()
            .any(|s| s.as_str().unwrap().starts_with("link 100")),
        "{rec}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_database_locked_past_the_busy_timeout_costs_one_warning_line() {
    let dir = scratch("locked");
    let db = dir.join("h.sqlite");
    drop(Store::open(&db).unwrap());
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let o = linerate(&db, &[&LATENCY[..], &["--json"]].concat());
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["schema"], "linerate.latency");
    let err = stderr(&o);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("not saved")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("locked"), "{err}");
    assert!(ids(&db, &[]).is_empty());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn compare_latency_rows_by_their_settings_without_spread() {
    let dir = scratch("compare-latency");
    let db = dir.join("h.sqlite");
    let base = common::fixture("linerate.latency.sweep.json");
    let mut slower = base.clone();
    slower["runs"][1]["rtt_unstamped"]["p50_ns"] = json!(40_000);
    let a = store_one(&db, &serde_json::to_string_pretty(&base).unwrap());
    let b = store_one(&db, &serde_json::to_string_pretty(&slower).unwrap());
    let o = linerate(&db, &["compare", &a, &b, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = |key: &str| {
        let rows = doc["figures"].as_array().unwrap();
        let r = rows.iter().find(|r| r["key"] == key);
        r.unwrap_or_else(|| panic!("{key}: {doc}"))["changes"][1].clone()
    };
    assert_eq!(
        row("reflector-mode=blocking RTT p50")["verdict"],
        "unchanged"
    );
    let busy = row("reflector-mode=busy RTT p50");
    assert_eq!(busy["verdict"], "regression");
    assert_eq!(busy["spread_known"], false);
    let text = stdout(&linerate(&db, &["compare", &a, &b]));
    assert!(
        text.contains("regression*") && text.contains("no spread known"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_history_flags_are_usage_errors() {
    let dir = scratch("usage");
    let db = dir.join("h.sqlite");
    for (args, says) in [
        (&["history", "--since", "yesterday"][..], "time ago"),
        (&["compare", "1"][..], "two results"),
        (&["compare"][..], "--last N"),
        (&["compare", "--last", "1"][..], "--last"),
        (
            &["compare", "1", "2", "--fail-on-regression", "x"][..],
            "percentage",
        ),
        (&["history", "export", "99"][..], "no result with id 99"),
    ] {
        let o = linerate(&db, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn off_a_terminal_a_run_past_ten_seconds_prints_progress_lines() {
    let dir = scratch("progress");
    let db = dir.join("h.sqlite");
    let args = [
        "latency",
        "127.0.0.1",
        "--in-process",
        "--time",
        "11",
        "--interval",
        "10ms",
    ];
    let o = linerate(&db, &[&args[..], &["--no-save", "--json"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("linerate latency: "))
        .collect();
    assert!(!lines.is_empty(), "{err}");
    assert!(lines[0].contains(" of 11 s"), "{err}");
    // A short run prints none.
    let short = linerate(&db, &[&LATENCY[..], &["--no-save", "--json"]].concat());
    assert!(
        !stderr(&short).contains("linerate latency: "),
        "{}",
        stderr(&short)
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn report_renders_stored_results_by_id() {
    let dir = scratch("report-ids");
    let db = dir.join("h.sqlite");
    let o = linerate(&db, &[&LATENCY[..], &["--json", "--tag", "page"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let [id] = ids(&db, &["--tag", "page"])[..] else {
        panic!("one stored result")
    };
    let html = dir.join("page.html");
    let id = id.to_string();
    let o = linerate(&db, &["report", &id, "--html", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(&format!("history result {id}")),
        "the source is named"
    );
    assert!(page.contains("<svg"), "the RTT plots are on the page");
    // An id with no stored result is a usage error, said in one line.
    let o = linerate(&db, &["report", "999999"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(dir);
}
