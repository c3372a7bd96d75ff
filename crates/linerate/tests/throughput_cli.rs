//! The `linerate server` and `linerate throughput` binaries: flag errors,
//! JSON, and peers killed mid-test (the other side still reports, marked
//! incomplete, and the server keeps serving).
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use linerate_core::result::Envelope;
use linerate_core::throughput::model::{
    Direction, Protocol, Scenarios, ThroughputParams, ThroughputResult,
};
use linerate_io::throughput::client;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// A server child on an ephemeral-ish port; returns it and its address.
/// The port is found by binding and releasing it, so another test may take
/// it first: then the server says so and a new port is tried.
fn server_child() -> (Child, SocketAddr) {
    for _ in 0..10 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(BIN)
            .args(["server", "--bind", "127.0.0.1", "--port", &port.to_string()])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait for "listening".
        let err = child.stderr.take().unwrap();
        let mut lines = BufReader::new(err).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        if !first.contains("listening") {
            let _ = child.kill();
            let _ = child.wait();
            continue;
        }
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                eprintln!("child: {l}")
            }
        });
        return (child, SocketAddr::from(([127, 0, 0, 1], port)));
    }
    panic!("no free port for a server in 10 tries");
}

/// A command's `--json` output, or a panic that shows its stderr.
fn json_doc(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)))
}

fn kill(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        vec!["throughput", "127.0.0.1", "--path", "fast"],
        vec!["throughput", "127.0.0.1", "--path", "gso"], // TCP
        vec!["throughput", "127.0.0.1", "--udp", "--size", "4"],
        vec!["throughput", "127.0.0.1", "--reverse", "--bidir"],
        vec!["throughput", "127.0.0.1", "--streams", "0"],
        vec!["throughput", "no-such-host.invalid", "--time", "1"],
        vec!["server", "--max-clients", "0"],
        vec!["throughput", "127.0.0.1", "--udp", "--recv-lowat", "4096"],
        vec!["throughput", "127.0.0.1", "--recv-lowat", "0"],
        vec!["throughput", "127.0.0.1", "--recv-lowat", "lots"],
        vec!["throughput", "127.0.0.1", "--recv-nap", "100"], // TCP
        vec!["throughput", "127.0.0.1", "--udp", "--recv-nap", "100000"],
        vec![
            "throughput",
            "127.0.0.1",
            "--udp",
            "--recv-spin",
            "--recv-nap",
            "50",
        ],
        vec!["throughput", "127.0.0.1", "--udp", "--recv-nap", "-1"],
        vec!["throughput", "127.0.0.1", "--verify-one-in", "0"],
        vec!["throughput", "127.0.0.1", "--verify-one-in", "2000000"],
        vec!["throughput", "127.0.0.1", "--verify-one-in", "-3"],
        vec![
            "throughput",
            "127.0.0.1",
            "--discard",
            "--verify-one-in",
            "4",
        ],
        vec![
            "throughput",
            "127.0.0.1",
            "--recv-path",
            "trunc",
            "--verify-one-in",
            "4",
        ],
    ] {
        let o = Command::new(BIN).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// An iperf3 peer's payload has no pattern: sampling is refused before
/// any connection (port 1: nothing listens, and nothing is tried).
#[test]
fn sampling_is_refused_against_iperf3() {
    let o = Command::new(BIN)
        .args(["throughput", "127.0.0.1", "--port", "1", "--iperf3"])
        .args(["--verify-one-in", "4"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--verify-one-in: not with --iperf3"), "{err}");
    assert!(!err.contains("connect"), "{err}");
}

#[test]
fn ipv6_without_a_bed_is_not_ignored() {
    // An IPv4 literal has no IPv6 address: a usage error naming the flag.
    let o = Command::new(BIN)
        .args(["throughput", "127.0.0.1", "--ipv6", "--time", "0.3"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--ipv6"), "{err}");
    // A parameter core refuses is reported under its flag.
    let o = Command::new(BIN)
        .args(["throughput", "127.0.0.1", "--recv-nap", "100"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--recv-nap: "), "{err}");
    assert!(!err.contains("recv_"), "{err}");
}

#[test]
fn nothing_listening_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = Command::new(BIN)
        .args([
            "throughput",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--time",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("refused"));
}

#[test]
fn json_result_is_versioned_and_complete() {
    let (srv, addr) = server_child();
    let o = Command::new(BIN)
        .args([
            "throughput",
            "127.0.0.1",
            "--port",
            &addr.port().to_string(),
            "--udp",
            "--size",
            "18",
            "--rate",
            "2M",
            "--time",
            "0.5",
            "--link",
            "1G",
            "--json",
        ])
        .output()
        .unwrap();
    kill(srv);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "linerate.throughput");
    assert_eq!(v["version"], 3);
    assert!(
        v["flags"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["severity"] != "invalid"),
        "{}",
        v["flags"]
    );
    assert_eq!(v["line_max"]["frame_bytes"], 64);
    assert_eq!(v["path"]["link_bits_per_s"], 1_000_000_000);
    assert_eq!(v["path"]["link_source"], "given");
    assert!(v["client"]["flows"][0]["cpu_sys_ns"].is_u64());
    assert!(v["server_side"]["flows"][0]["recv"]["seq"]["lost"].is_u64());
    // Derived figures: bits/s, packets/s and % of max, per direction and flow.
    let rx = v["figures"]["directions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["role"] == "receiver")
        .unwrap()
        .clone();
    assert!(rx["bits_per_s"].as_f64().unwrap() > 0.0, "{rx}");
    assert!(rx["packets_per_s"].as_f64().unwrap() > 0.0, "{rx}");
    assert!(rx["pct_of_max"].as_f64().unwrap() > 0.0, "{rx}");
    assert!(v["figures"]["flows"][0]["pct_of_max"].is_f64());
    // It validates against the published schema and reads back unchanged.
    common::validate("linerate.throughput", &v);
    let back: Envelope<ThroughputResult> = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), v);
}

#[test]
fn the_schemas_are_published() {
    common::published::<Envelope<ThroughputResult>>("linerate.throughput");
    common::published::<Envelope<Scenarios>>("linerate.throughput.scenarios");
}

#[test]
fn version_1_notes_are_raised_again_as_flags() {
    // Each concern a v1 document noted is a flag when its result is
    // assessed again, and a complete v1 run is not flagged incomplete.
    for (file, codes) in [
        (
            "linerate.throughput.json",
            &[
                "egress_packets",
                "tcp_retransmits",
                "tcp_verified",
                "cpu_bound",
                "socket_drops",
            ][..],
        ),
        (
            "linerate.throughput.udp.json",
            &["egress_packets", "above_line_rate", "cpu_bound"][..],
        ),
        ("linerate.throughput.bed.json", &["egress_packets"][..]),
    ] {
        let v = common::fixture(file);
        assert_eq!(v["complete"], true, "{file}");
        let doc: Envelope<ThroughputResult> = serde_json::from_value(v).unwrap();
        let mut r = doc.result;
        r.figures = linerate_core::throughput::assess::figures(&r);
        let flags = linerate_core::throughput::assess::assess(&r);
        let got: Vec<&str> = flags.iter().map(|f| f.code.as_str()).collect();
        for code in codes {
            assert!(got.contains(code), "{file}: {code} not in {got:?}");
        }
        assert!(!got.contains(&"incomplete"), "{file}: {got:?}");
        assert!(!got.contains(&"server_figures_missing"), "{file}: {got:?}");
    }
}

#[test]
fn version_1_documents_still_read() {
    for file in [
        "linerate.throughput.json",
        "linerate.throughput.udp.json",
        "linerate.throughput.bed.json",
    ] {
        let v = common::fixture(file);
        let doc: Envelope<ThroughputResult> =
            serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(doc.version, 1);
        assert_eq!(
            doc.result.client.flows.len(),
            v["client"]["flows"].as_array().unwrap().len()
        );
        // Its flags can be raised again from what it holds.
        let mut r = doc.result;
        r.figures = linerate_core::throughput::assess::figures(&r);
        let _ = linerate_core::throughput::assess::assess(&r);
    }
    let v = common::fixture("linerate.throughput.scenarios.json");
    let doc: Envelope<Scenarios> = serde_json::from_value(v).unwrap();
    assert_eq!(doc.result.runs.len(), 2);
    assert_eq!(doc.result.runs[1].schema, "linerate.throughput");
    // The UDP fixture had a 1 Gbit/s link: its maximum reads back.
    let v = common::fixture("linerate.throughput.udp.json");
    let doc: Envelope<ThroughputResult> = serde_json::from_value(v).unwrap();
    assert_eq!(doc.result.line_max.unwrap().frame_bytes, 1518);
}

#[test]
fn human_output_has_the_seed_table_and_says_when_no_line_rate_is_known() {
    let (srv, addr) = server_child();
    let o = Command::new(BIN)
        .args([
            "throughput",
            "127.0.0.1",
            "--port",
            &addr.port().to_string(),
            "--time",
            "0.3",
        ])
        .output()
        .unwrap();
    kill(srv);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("% of max possible"));
    assert!(out.contains("no line rate known"));
    assert!(out.contains("CLOCK_MONOTONIC"));
    // The receivers' wake-up threshold is said (default: 256 KiB, the receivers' buffer).
    assert!(out.contains("SO_RCVLOWAT 256 KiB"), "{out}");
    // TCP packets are the kernel's segment counts, not estimates.
    assert!(
        out.contains("data segments as each end's kernel counted them"),
        "{out}"
    );
    let table = out.split("Table 1").nth(1).unwrap();
    assert!(!table.lines().take(4).any(|l| l.contains('~')), "{out}");
}

#[test]
fn server_killed_mid_test_client_reports_incomplete() {
    let (srv, addr) = server_child();
    let p = ThroughputParams {
        protocol: Protocol::Tcp,
        direction: Direction::Bidir,
        duration_ns: 3_000_000_000,
        ..ThroughputParams::default()
    };
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(800));
        kill(srv);
    });
    let t0 = Instant::now();
    let o = client::run(addr, &p, None).unwrap();
    killer.join().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert!(!o.client.complete);
    assert!(o.server.is_none());
    // What the client measured before the kill is there.
    assert!(o.client.flows.iter().any(|f| f.bytes > 0));
}

#[test]
fn client_killed_mid_test_server_keeps_serving() {
    let (srv, addr) = server_child();
    let mut c = Command::new(BIN)
        .args([
            "throughput",
            "127.0.0.1",
            "--port",
            &addr.port().to_string(),
            "--time",
            "5",
            "--bidir",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    kill_child(&mut c);
    // The server serves the next client completely.
    let p = ThroughputParams {
        duration_ns: 300_000_000,
        ..ThroughputParams::default()
    };
    let o = client::run(addr, &p, None).unwrap();
    kill(srv);
    assert!(o.client.complete, "{:?}", o.client.notes);
    assert!(o.server.unwrap().complete);
}

fn kill_child(c: &mut Child) {
    let _ = c.kill();
    let _ = c.wait();
}

#[test]
fn ctrl_c_prints_what_was_measured_marked_incomplete() {
    let (srv, addr) = server_child();
    let c = Command::new(BIN)
        .args([
            "throughput",
            "127.0.0.1",
            "--port",
            &addr.port().to_string(),
            "--time",
            "10",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let st = Command::new("kill")
        .args(["-INT", &c.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let t0 = Instant::now();
    let o = c.wait_with_output().unwrap();
    kill(srv);
    assert!(t0.elapsed() < Duration::from_secs(5));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("interrupted"), "{out}");
    assert!(out.contains("INCOMPLETE"), "{out}");
}

#[test]
fn several_paths_run_as_seed_000_scenarios() {
    let (srv, addr) = server_child();
    let port = addr.port().to_string();
    let base = [
        "throughput",
        "127.0.0.1",
        "--port",
        &port,
        "--time",
        "0.3",
        "--path",
        "ideal,typical",
    ];
    let o = Command::new(BIN).args(base).arg("--json").output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "linerate.throughput.scenarios");
    assert_eq!(v["version"], 3);
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    // One point per path, each run once.
    assert_eq!(v["points"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["points"][1]["label"], "path=typical");
    assert_eq!(v["runs"][1]["params"]["send_path"], "typical");
    assert_eq!(v["runs"][1]["schema"], "linerate.throughput");
    common::validate("linerate.throughput.scenarios", &v);
    let back: Envelope<Scenarios> = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), v);
    let o = Command::new(BIN).args(base).output().unwrap();
    kill(srv);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("Scenario 1: ideal") && out.contains("Scenario 2: typical"),
        "{out}"
    );
    // A path the protocol cannot take is refused before anything runs.
    let o = Command::new(BIN)
        .args([
            "throughput",
            "127.0.0.1",
            "--port",
            &port,
            "--path",
            "ideal,gso",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn server_once_exits_after_one_session() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(BIN)
        .args([
            "server",
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--once",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let p = ThroughputParams {
        duration_ns: 200_000_000,
        ..ThroughputParams::default()
    };
    let mut outcome = None;
    for _ in 0..50 {
        match client::run(addr, &p, None) {
            Ok(o) => {
                outcome = Some(o);
                break;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    assert!(outcome.unwrap().client.complete);
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            assert!(st.success());
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "server --once still running"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_socket_matrix_repeats_each_point_and_omits_the_first_interval() {
    let (srv, addr) = server_child();
    let port = addr.port().to_string();
    let base = [
        "throughput",
        "127.0.0.1",
        "--port",
        &port,
        "--udp",
        "--time",
        "0.4",
        "--interval",
        "0.1",
        "--omit",
        "0.1",
        "--link",
        "10G",
        "--sweep",
        "size=100,1472",
        "--repeat",
        "2",
    ];
    let o = Command::new(BIN).args(base).arg("--json").output().unwrap();
    let table = Command::new(BIN).args(base).output().unwrap();
    kill(srv);
    let err = String::from_utf8_lossy(&o.stderr);
    let v = json_doc(&o);
    common::validate("linerate.throughput.scenarios", &v);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "{err}");
    assert_eq!(runs[3]["settings"], serde_json::json!([["size", "1472"]]));
    assert_eq!(runs[3]["repeat"], 2);
    assert_eq!(runs[3]["params"]["size_bytes"], 1472);
    // --omit: the test ran 0.1 s longer, its first interval is marked.
    assert_eq!(runs[0]["omit_ns"], 100_000_000);
    assert_eq!(runs[0]["params"]["duration_ns"], 500_000_000);
    let rows = runs[0]["figures"]["intervals"][0]["rows"]
        .as_array()
        .unwrap();
    assert_eq!(
        rows[0]["omitted"], true,
        "{}",
        runs[0]["figures"]["intervals"]
    );
    assert!(rows[1].get("omitted").is_none());
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[0]["label"], "size=100");
    assert_eq!(points[0]["bits_per_s"]["runs"], 2);
    // The table: a row per point.
    let out = String::from_utf8_lossy(&table.stdout);
    assert!(out.contains("Settings matrix"), "{out}");
    assert!(out.contains("size=1472     2"), "{out}");
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
}

#[test]
fn udp_checksums_can_be_turned_off_and_swept() {
    let (srv, addr) = server_child();
    let port = addr.port().to_string();
    let base = ["throughput", "127.0.0.1", "--port", &port, "--time", "0.3"];
    let o = Command::new(BIN)
        .args(base)
        .args(["--udp", "--sweep", "udp-checksum=on,off", "--json"])
        .output()
        .unwrap();
    let tcp = Command::new(BIN)
        .args(base)
        .args(["--tcp", "--no-udp-checksum"])
        .output()
        .unwrap();
    kill(srv);
    let err = String::from_utf8_lossy(&o.stderr);
    let v = json_doc(&o);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{err}");
    assert!(runs[0]["params"].get("no_udp_checksum").is_none());
    assert_eq!(runs[1]["params"]["no_udp_checksum"], true);
    assert!(
        runs[1]["figures"]["directions"][0]["bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(tcp.status.code(), Some(2));
    let err = String::from_utf8_lossy(&tcp.stderr);
    assert!(
        err.contains("--no-udp-checksum: applies to UDP only"),
        "{err}"
    );
}

/// The receiver flows of a `--json` result (both ends), each checked fully
/// verified and clean; returns (receiver, its sender) pairs.
fn verified_pairs(v: &serde_json::Value) -> Vec<(serde_json::Value, serde_json::Value)> {
    let flows = |end: &str| v[end]["flows"].as_array().cloned().unwrap_or_default();
    let all: Vec<_> = flows("client")
        .into_iter()
        .chain(flows("server_side"))
        .collect();
    let mut pairs = Vec::new();
    for r in all.iter().filter(|f| f["role"] == "receiver") {
        assert_eq!(r["verification"], "full", "{r}");
        assert!(r.get("error").is_none_or(serde_json::Value::is_null), "{r}");
        let c = &r["recv"];
        for k in ["corrupt", "foreign", "bad_length"] {
            assert_eq!(c[k], 0, "{k} in {r}");
        }
        assert_eq!(c["seq"]["duplicates"], 0, "{r}");
        assert_eq!(c["payloads_verified"], c["seq"]["received_unique"], "{r}");
        let s = all
            .iter()
            .find(|f| f["role"] == "sender" && f["flow"] == r["flow"])
            .unwrap_or_else(|| panic!("no sender for {r}"))
            .clone();
        pairs.push((r.clone(), s));
    }
    pairs
}

/// The grid's linerate configurations (bench/grid.sh: each as a user runs
/// it, defaults apart from streams, direction, protocol and size; UDP
/// unpaced) run over loopback and verify every payload: TCP receivers got
/// every block their sender wrote, whole and in order; UDP receivers never
/// saw a datagram that was not sent or not intact.
#[test]
fn the_grid_configurations_run_and_verify_their_payloads() {
    let (srv, addr) = server_child();
    let port = addr.port().to_string();
    let mut cases: Vec<Vec<&str>> = Vec::new();
    for streams in ["1", "4"] {
        for dir in [None, Some("--reverse"), Some("--bidir")] {
            let mut c = vec!["--streams", streams];
            c.extend(dir);
            cases.push(c);
        }
    }
    // 16 data connections at once from one address: beyond the server's
    // per-source limit of pending connections, yet all expected.
    cases.push(vec!["--streams", "8", "--bidir"]);
    cases.push(vec!["--udp", "--streams", "4", "--size", "1472"]);
    cases.push(vec!["--udp", "--streams", "4", "--size", "18"]);
    for case in &cases {
        let o = Command::new(BIN)
            .args(["throughput", "127.0.0.1", "--port", &port, "--time", "0.3"])
            .args(["--json", "--no-save"])
            .args(case)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{case:?}: {e}: {err}"));
        let streams: usize = case[case.iter().position(|a| *a == "--streams").unwrap() + 1]
            .parse()
            .unwrap();
        let pairs = verified_pairs(&v);
        let ways = if case.contains(&"--bidir") { 2 } else { 1 };
        assert_eq!(pairs.len(), streams * ways, "{case:?}: {v}");
        for (r, s) in pairs {
            let sent = s["packets"].as_u64().unwrap();
            assert!(sent > 0, "{case:?}: {s}");
            if case.contains(&"--udp") {
                let got = r["recv"]["seq"]["received_unique"].as_u64().unwrap();
                assert!(got > 0 && got <= sent, "{case:?}: {got} of {sent}");
                assert_eq!(
                    got + r["recv"]["seq"]["lost"].as_u64().unwrap(),
                    sent,
                    "{case:?}"
                );
            } else {
                assert_eq!(r["bytes"], s["bytes"], "{case:?}");
                assert_eq!(r["packets"], s["packets"], "{case:?}");
                assert_eq!(r["recv"]["seq"]["received_unique"], sent, "{case:?}");
                assert_eq!(r["recv"]["seq"]["lost"], 0, "{case:?}");
            }
        }
    }
    kill(srv);
}

/// `--verify-one-in N`: every byte received, every header checked, about
/// one payload in N compared, and the result says so (per flow and in a
/// flag with the count).
#[test]
fn sampled_verification_compares_some_payloads_and_says_so() {
    let (srv, addr) = server_child();
    let port = addr.port().to_string();
    let o = Command::new(BIN)
        .args(["throughput", "127.0.0.1", "--port", &port, "--time", "0.4"])
        .args(["--json", "--no-save", "--bidir", "--streams", "2"])
        .args(["--verify-one-in", "8"])
        .output()
        .unwrap();
    kill(srv);
    let v = json_doc(&o);
    common::validate("linerate.throughput", &v);
    assert_eq!(v["params"]["verify_one_in"], 8, "{v}");
    let mut verified = 0;
    for end in ["client", "server_side"] {
        let flows = v[end]["flows"].as_array().unwrap();
        let rx: Vec<_> = flows.iter().filter(|f| f["role"] == "receiver").collect();
        assert_eq!(rx.len(), 2, "{end}: {v}");
        for r in rx {
            assert_eq!(r["verification"], "sampled", "{r}");
            let c = &r["recv"];
            assert_eq!(c["corrupt"], 0, "{r}");
            let blocks = r["packets"].as_u64().unwrap();
            let n = c["payloads_verified"].as_u64().unwrap();
            assert_eq!(c["seq"]["received_unique"], blocks, "every header: {r}");
            assert!(n < blocks || blocks < 8, "{n} of {blocks}");
            verified += n;
        }
    }
    let flag = v["flags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "payload_sampled")
        .unwrap_or_else(|| panic!("no payload_sampled flag: {v}"));
    assert_eq!(flag["evidence"]["payloads_verified"], verified);
    assert!(verified > 0, "{v}");
    assert!(!v["flags"].to_string().contains("tcp_verified"), "{v}");
}

/// The human report says which receivers sampled: in the flow table's
/// corrupt column and in the note with the count.
#[test]
fn sampled_verification_is_marked_in_the_human_report() {
    let (srv, addr) = server_child();
    let port = addr.port().to_string();
    let o = Command::new(BIN)
        .args(["throughput", "127.0.0.1", "--port", &port, "--time", "0.3"])
        .args(["--no-save", "--reverse", "--verify-one-in", "4"])
        .output()
        .unwrap();
    kill(srv);
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out
        .lines()
        .find(|l| l.contains(" received "))
        .unwrap_or_else(|| panic!("no receiver row: {out}"));
    assert!(row.contains("0 (sampled)"), "{row}");
    assert!(
        out.contains("note: the receivers compared the payload of one block or datagram in 4"),
        "{out}"
    );
}

/// A server's resident memory (VmRSS of /proc/PID/status), kB.
fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// A server returns to near its idle size when large sessions end: two
/// sessions of 16 `typical` senders (16 MiB application buffers each)
/// used to leave about 200 MB resident (glibc raised its mmap threshold
/// after the first, so the second's buffers came from arenas that keep
/// their pages). The bound is the 10 MB; the wait for the server to
/// finish its side of the last session is bounded.
#[test]
fn a_server_returns_near_its_idle_size_after_large_sessions() {
    let (srv, addr) = server_child();
    let pid = srv.id();
    let port = addr.port().to_string();
    // A first small session: the server's one-time costs (code, threads).
    let warm = Command::new(BIN)
        .args(["throughput", "127.0.0.1", "--port", &port, "--time", "0.2"])
        .args(["--json", "--no-save"])
        .output()
        .unwrap();
    assert!(
        !warm.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&warm.stderr)
    );
    std::thread::sleep(Duration::from_millis(300));
    let idle = rss_kb(pid);
    let mut peak = idle;
    for _ in 0..2 {
        let o = Command::new(BIN)
            .args(["throughput", "127.0.0.1", "--port", &port, "--time", "0.3"])
            .args(["--streams", "16", "--reverse", "--path", "typical"])
            .args(["--json", "--no-save"])
            .output()
            .unwrap();
        let v = json_doc(&o);
        assert_eq!(verified_pairs(&v).len(), 16);
        peak = peak.max(rss_kb(pid));
    }
    let until = Instant::now() + Duration::from_secs(5);
    let mut after = rss_kb(pid);
    while after > idle + 10_000 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
        after = rss_kb(pid);
    }
    kill(srv);
    assert!(
        after <= idle + 10_000,
        "server RSS {after} kB after the sessions, {idle} kB idle before (peak seen {peak} kB)"
    );
}

/// `--in-process`: a server on a thread of the client's process, on
/// loopback, also when the client has a key (the server then requires it
/// too instead of being refused as keyless).
#[test]
fn in_process_runs_a_server_of_its_own_with_or_without_a_key() {
    for key in [None, Some("in-process-test-key-0123456789")] {
        let mut cmd = Command::new(BIN);
        cmd.args([
            "--no-save",
            "throughput",
            "127.0.0.1",
            "--in-process",
            "--time",
            "1s",
            "--json",
        ]);
        match key {
            Some(k) => cmd.env("LINERATE_AUTH_KEY", k),
            None => cmd.env_remove("LINERATE_AUTH_KEY"),
        };
        let o = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(matches!(o.status.code(), Some(0 | 1)), "key {key:?}: {err}");
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let e = common::round_trip::<ThroughputResult>("linerate.throughput", &doc);
        assert!(
            e.result.figures.directions.iter().all(|d| d.bytes > 0),
            "key {key:?}"
        );
    }
    let o = common::linerate(&["throughput", "--in-process", "--bed", "x"]);
    assert_eq!(o.status.code(), Some(2));
}
