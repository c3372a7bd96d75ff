//! Integration tests of the `linerate` binary: its output and every error path.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

fn linerate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("the linerate binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts exit code 2, no stdout, and an error line on stderr naming `what`.
fn assert_usage_error(args: &[&str], what: &str) {
    let o = linerate(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    assert!(
        o.stdout.is_empty(),
        "{args:?} printed to stdout: {}",
        stdout(&o)
    );
    let err = stderr(&o);
    let first = err.lines().next().unwrap_or("");
    assert!(first.contains("error"), "{args:?}: {err}");
    assert!(err.contains(what), "{args:?}: expected '{what}' in: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

#[test]
fn calc_prints_the_seed_000_reference_figures() {
    let o = linerate(&["calc", "--link", "100M,1G", "--frame", "rfc2544"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for needle in [
        "148,809",
        "6.845 MB/s",
        "8,127",
        "12.19 MB/s",
        "1,488,095",
        "81,274",
    ] {
        assert!(out.contains(needle), "missing {needle}:\n{out}");
    }
    assert_eq!(out.matches("Line rate at").count(), 2);
}

#[test]
fn calc_json_is_versioned_with_unit_fields() {
    let o = linerate(&[
        "calc",
        "--link",
        "100M",
        "--payload",
        "18,1472",
        "--encap",
        "udp4",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert_eq!(v["schema"], "linerate.calc");
    assert_eq!(v["version"], 1);
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["frame_bytes"], 64);
    assert_eq!(rows[1]["frame_bytes"], 1518);
    assert_eq!(rows[1]["l3_bytes"], 1500);
    let fps = rows[1]["frames_per_s"].as_f64().expect("number");
    assert!((fps - 8127.438).abs() < 0.01, "{fps}");
}

#[test]
fn calc_csv_has_header_and_rows() {
    let o = linerate(&["calc", "--link", "1G", "--frame", "64", "--csv"]);
    assert!(o.status.success());
    let out = stdout(&o);
    let mut lines = out.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("link_bits_per_s,encap,frame_bytes"));
    assert!(lines
        .next()
        .unwrap()
        .starts_with("1000000000,eth,64,84,46,0,"));
    assert!(lines.next().is_none());
}

#[test]
fn calc_csv_numbers_carry_no_binary_noise() {
    let o = linerate(&["calc", "--link", "1G", "--frame", "64", "--csv"]);
    assert!(o.status.success());
    let out = stdout(&o);
    let row = out.lines().nth(1).unwrap();
    assert_eq!(
        row,
        "1000000000,eth,64,84,46,0,,1488095.24,672,68452381,1000000000,761904762,,547619048,54.7619048,,,,"
    );
    let o = linerate(&["calc", "--csv"]);
    for cell in stdout(&o).split([',', '\n']) {
        assert!(
            !cell.contains("99999") && !cell.contains("00001"),
            "binary noise in {cell}"
        );
    }
}

#[test]
fn calc_table_fits_100_columns_unless_wide() {
    let o = linerate(&[
        "calc",
        "--link",
        "100M,10G",
        "--encap",
        "udp4",
        "--payload",
        "18,1472",
        "--frames",
        "1000",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for line in out.lines() {
        assert!(line.chars().count() <= 100, "too wide: {line}");
    }
    let o = linerate(&[
        "--wide",
        "calc",
        "--link",
        "100M,10G",
        "--encap",
        "udp4",
        "--payload",
        "18,1472",
        "--frames",
        "1000",
    ]);
    let wide = stdout(&o);
    assert!(
        wide.contains("L1 bit/s") && wide.contains("L3 bit/s"),
        "{wide}"
    );
}

#[test]
fn calc_columns_keep_one_unit() {
    // 684.5 MB/s at 64 B and 1.219 GB/s at 1518 B on 10G: one column, one unit.
    let o = linerate(&["calc", "--link", "10G", "--frame", "64,1518"]);
    let out = stdout(&o);
    assert!(
        out.contains("0.6845 GB/s") && !out.contains("MB/s"),
        "{out}"
    );
}

#[test]
fn every_specified_command_is_built() {
    // `scenario` was the last one answered "not built yet": now it asks
    // for its action like any command with subcommands.
    let o = linerate(&["scenario"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        !err.contains("not built yet") && err.contains("Usage"),
        "{err}"
    );
}

#[test]
fn calc_frames_gives_the_time_for_n_frames() {
    let o = linerate(&[
        "calc", "--link", "100M", "--frame", "1518", "--frames", "50",
    ]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(out.contains("50 frames"), "{out}");
    assert!(out.contains("6.152 ms"), "{out}");
}

#[test]
fn calc_mtu_with_tcp_uses_the_mss() {
    let o = linerate(&[
        "calc", "--link", "1G", "--mtu", "1500", "--encap", "tcp4", "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert_eq!(v["rows"][0]["payload_bytes"], 1448);
    let o = linerate(&[
        "calc",
        "--link",
        "1G",
        "--mtu",
        "1500",
        "--encap",
        "tcp4",
        "--tcp-options",
        "0",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert_eq!(v["rows"][0]["payload_bytes"], 1460);
}

#[test]
fn calc_says_when_a_frame_is_padded() {
    let o = linerate(&["calc", "--link", "1G", "--payload", "1", "--encap", "udp4"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("padded"), "{}", stdout(&o));
}

#[test]
fn calc_bus_sits_beside_the_link() {
    let o = linerate(&[
        "calc", "--link", "100G", "--frame", "64", "--bus", "pcie3x4", "--mps", "256",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("PCIe 3.0 x4"), "{out}");
    assert!(out.contains("28.81 Gbit/s"), "{out}");
    assert!(out.contains("bus"), "{out}");
}

#[test]
fn calc_help_names_the_standard_speeds() {
    let o = linerate(&["calc", "--help"]);
    assert!(o.status.success());
    let out = stdout(&o);
    for speed in ["10M", "100M", "2.5G", "25G", "400G", "800G"] {
        assert!(out.contains(speed), "{speed} not in help");
    }
    assert!(out.contains("payload_bytes_per_s"));
}

#[test]
fn payload_that_does_not_fit_the_mtu() {
    assert_usage_error(
        &["calc", "--payload", "1473", "--encap", "udp4"],
        "largest udp4 payload in a 1500-byte MTU is 1472 B",
    );
}

#[test]
fn frame_above_maximum_without_jumbo() {
    assert_usage_error(&["calc", "--frame", "9018"], "--jumbo");
    assert_usage_error(&["calc", "--mtu", "9000"], "--jumbo");
    assert_usage_error(&["calc", "--frame", "20000", "--jumbo"], "16384");
    let o = linerate(&["calc", "--frame", "9018", "--jumbo"]);
    assert!(o.status.success());
}

#[test]
fn frame_too_small_for_its_headers() {
    assert_usage_error(&["calc", "--frame", "40", "--encap", "tcp4"], "cannot hold");
    assert_usage_error(&["calc", "--mtu", "20", "--encap", "udp6"], "cannot hold");
}

#[test]
fn unknown_units_and_values() {
    assert_usage_error(&["calc", "--link", "100X"], "unknown unit");
    assert_usage_error(&["calc", "--link", "fast"], "not a number");
    assert_usage_error(&["calc", "--link", "0"], "out of range");
    assert_usage_error(&["calc", "--frame", "64,big"], "not a number");
    assert_usage_error(&["calc", "--frame", "1.5"], "whole number");
    assert_usage_error(&["calc", "--encap", "udp5"], "unknown encapsulation");
    assert_usage_error(&["calc", "--bus", "pcie7x4"], "generation 7");
    assert_usage_error(&["calc", "--bus", "pcie3x3"], "x3");
    assert_usage_error(&["calc", "--bus", "pcie3x4", "--mps", "300"], "300");
    assert_usage_error(&["calc", "--mps", "256"], "--bus");
    assert_usage_error(&["calc", "--frames", "0"], "--frames");
}

#[test]
fn options_that_do_not_apply() {
    assert_usage_error(
        &["calc", "--encap", "udp4", "--tcp-options", "12"],
        "no TCP header",
    );
    assert_usage_error(
        &["calc", "--encap", "tcp4", "--tcp-options", "13"],
        "multiple of 4",
    );
    assert_usage_error(
        &["calc", "--encap", "eth", "--ip-options", "4"],
        "no IP header",
    );
}

#[test]
fn conflicting_flags() {
    assert_usage_error(
        &["calc", "--frame", "64", "--payload", "46"],
        "cannot be used with",
    );
    assert_usage_error(&["calc", "--json", "--csv"], "cannot be used with");
    assert_usage_error(&["frobnicate"], "unrecognized subcommand");
}

/// `linerate demo` as a user without privileges: as root, the binary is run
/// as nobody (`setpriv`); where nobody cannot run it (the build directory
/// is private), with `--no-bed` instead, which says so.
fn demo_without_privileges() -> Output {
    let args = ["--no-save", "demo"];
    if linerate_bed::privileges::check().is_err() {
        return linerate(&args);
    }
    let bin = env!("CARGO_BIN_EXE_linerate");
    let nobody = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin])
        .args(args)
        .output();
    match nobody {
        Ok(o) if !matches!(o.status.code(), Some(126 | 127)) && !o.stdout.is_empty() => o,
        _ => {
            eprintln!("note: nobody cannot run {bin}: the demo runs with --no-bed instead");
            linerate(&["--no-save", "demo", "--no-bed"])
        }
    }
}

#[test]
fn demo_runs_without_privileges_or_hardware() {
    let o = demo_without_privileges();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // Part 1: the model (64-byte frames/s at 100 Mbit/s) with NXP AN11053's
    // 'ideal' figure beside the 1500-byte payload maximum.
    assert!(out.contains("148810"), "{out}");
    // The measured figure, and the note's under it on the `ref` row.
    let at = out.find("12.19").expect("the 1500-byte payload maximum");
    let next = out[at..].lines().nth(1).unwrap_or_default();
    assert!(
        next.trim_start().starts_with("ref") && next.contains("12.00 ok"),
        "{out}"
    );
    // Part 2: the loopback echo dissected, a figure in every stage.
    let start = out.find("2. A UDP echo").expect("latency part");
    let end = out.find("3. TCP over loopback").expect("throughput part");
    let row = out[start..end]
        .lines()
        .find(|l| l.trim_start().starts_with("UDP echo, 64 B"))
        .expect("the echo's row");
    assert!(!row.contains("n/a"), "{row}");
    // Part 4: the quick host ceilings.
    let ceilings = &out[out.find("4. This host's ceilings").expect("ceilings part")..];
    assert!(ceilings.contains("Internet checksum 1518 B"), "{ceilings}");
    // The bed parts: one paragraph saying what needs root and how to run it.
    let not_run = &out[out.find("Not run here").expect("the bed parts' line")..];
    assert!(not_run.contains("sudo linerate demo"), "{not_run}");
    assert!(!out.contains("Scenario seed001"), "{out}");
    for l in out.lines() {
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}",
            l.chars().count()
        );
    }
}

#[test]
fn broken_pipe_is_a_clean_exit() {
    use std::io::Read as _;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "calc",
            "--link",
            "1M,2M,3M,4M,5M,6M,7M,8M,9M,10M",
            "--frame",
            "rfc2544",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let status = child.wait().expect("wait");
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read");
    assert!(status.success(), "exit {status}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `linerate latency 127.0.0.1 --in-process --count COUNT EXTRA…`, which
/// must succeed; its standard output. The reply timeout is a fixed 2 s, not
/// sized from the RTTs: on a loaded test host a loopback reply can be tens
/// of milliseconds late, and these tests count every reply.
fn latency_loopback(count: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "latency",
        "127.0.0.1",
        "--in-process",
        "--count",
        count,
        "--timeout",
        "2s",
    ];
    args.extend_from_slice(extra);
    let o = linerate(&args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn latency_in_process_udp_dissects_stages() {
    let out = latency_loopback("300", &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["schema"], "linerate.latency");
    assert_eq!(v["clock"], "CLOCK_REALTIME");
    assert_eq!(v["same_clock"], true);
    let run = &v["runs"][0];
    assert_eq!(run["counts"]["sent"], 300);
    assert_eq!(run["counts"]["received"], 300);
    let stages: Vec<&str> = run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    for s in [
        "client_tx",
        "responder_rx",
        "responder_app",
        "responder_tx",
        "network",
        "client_rx",
        "rtt",
    ] {
        assert!(stages.contains(&s), "{s} missing from {stages:?}");
    }
    let rtt = run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "rtt")
        .unwrap();
    assert!(rtt["min_ns"].as_u64().unwrap() <= rtt["p50_ns"].as_u64().unwrap());
    assert!(rtt["p50_ns"].as_u64().unwrap() <= rtt["max_ns"].as_u64().unwrap());
    // By default one UDP exchange in 4 is stamped and dissected; the other
    // three quarters give the RTT without stamping cost.
    assert_eq!(run["stamp_every"], 4);
    assert_eq!(rtt["count"], 75);
    assert_eq!(run["rtt_unstamped"]["count"], 225);
}

#[test]
fn latency_stamp_every_one_dissects_every_exchange() {
    let table = |every: &str| latency_loopback("100", &["--stamp-every", every]);
    let out = table("1");
    assert!(!out.contains("RTT unstamped"), "{out}");
    assert!(!out.contains("RTT stamped"), "{out}");
    assert!(
        !out.contains("stamped exchanges"),
        "no sampling warning: {out}"
    );
    let out = table("2");
    assert!(out.contains("RTT unstamped"), "{out}");
    assert!(
        out.contains("kernel stamps on 1 exchange in 2 (50 stamped, 50 not)"),
        "{out}"
    );
    assert!(
        out.contains("the stages rest on only 50 stamped exchanges"),
        "{out}"
    );
}

#[test]
fn latency_sweep_prints_a_row_per_configuration() {
    let out = latency_loopback(
        "100",
        &[
            "--sweep",
            "reflector-copy=off,on",
            "--sweep",
            "udp-checksum=on,off",
        ],
    );
    for row in [
        "reflector-copy=off udp-checksum=on",
        "reflector-copy=on udp-checksum=off",
    ] {
        assert!(out.contains(row), "{row}:\n{out}");
    }
    assert!(out.contains("resp app"), "{out}");
}

#[test]
fn latency_tcp_one_byte_echo_in_process() {
    let out = latency_loopback("100", &["--tcp", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["protocol"], "tcp");
    assert_eq!(v["runs"][0]["size_bytes"], 1);
    assert_eq!(v["runs"][0]["counts"]["received"], 100);
    // One exchange in 4 stamped and dissected, the RTT quoted from the rest.
    assert_eq!(v["runs"][0]["stamp_every"], 4);
    assert_eq!(v["runs"][0]["rtt_unstamped"]["count"], 75);
    let rtt = v["runs"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "rtt")
        .expect("the stamped sample's RTT");
    assert_eq!(rtt["count"], 25);
}

#[test]
fn latency_bad_input() {
    assert_usage_error(
        &[
            "latency",
            "127.0.0.1",
            "--in-process",
            "--sweep",
            "colour=red",
        ],
        "unknown key",
    );
    assert_usage_error(
        &[
            "latency",
            "127.0.0.1",
            "--in-process",
            "--sweep",
            "reflector-mode=lazy",
        ],
        "lazy",
    );
    assert_usage_error(
        &["latency", "127.0.0.1", "--in-process", "--count", "0"],
        "--count",
    );
    assert_usage_error(
        &["latency", "127.0.0.1", "--in-process", "--size", "8"],
        "size 8",
    );
    assert_usage_error(
        &["latency", "127.0.0.1", "--in-process", "--rate=-5"],
        "--rate",
    );
    assert_usage_error(
        &["latency", "127.0.0.1", "--in-process", "--rate", "0"],
        "--rate",
    );
    assert_usage_error(
        &["latency", "no-such-host.invalid", "--echo"],
        "cannot resolve",
    );
    assert_usage_error(
        &["latency", "127.0.0.1", "--tcp", "--udp"],
        "cannot be used with",
    );
    assert_usage_error(
        &["latency", "127.0.0.1", "--icmp", "--in-process"],
        "kernel",
    );
    assert_usage_error(
        &["latency", "127.0.0.1", "--in-process", "--stamp-every", "0"],
        "at least 1",
    );
}

#[test]
fn latency_without_a_responder_fails_as_a_measurement() {
    // A UDP port nobody listens on: every request is lost.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port().to_string();
    drop(sock);
    let o = linerate(&[
        "latency",
        "127.0.0.1",
        "--echo",
        "--port",
        &port,
        "--count",
        "3",
        "--timeout",
        "50ms",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // The result says why (flag no_replies, invalid); the exit line names it.
    assert!(stderr(&o).contains("no_replies"), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("INVALID: default: no replies"),
        "{}",
        stdout(&o)
    );
}

/// Kills the child on drop (also when an assertion fails).
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `linerate server` child on a free loopback port, once it listens (the
/// port is found by binding and releasing it, so another test may take it
/// first: then a new port is tried). Killed on drop.
fn server_on_free_port() -> (Child, String) {
    use std::io::BufRead as _;
    for _ in 0..10 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
            .to_string();
        let mut child = Command::new(env!("CARGO_BIN_EXE_linerate"))
            .args(["server", "--bind", "127.0.0.1", "--port", &port])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        if lines
            .next()
            .and_then(Result::ok)
            .is_some_and(|l| l.contains("listening"))
        {
            // Keep draining its log so it never blocks on a full pipe.
            std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
            return (Child(child), port);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("no free port for a server in 10 tries");
}

#[test]
fn latency_against_linerate_server() {
    let (_server, port) = server_on_free_port();
    let o = linerate(&[
        "latency",
        "127.0.0.1",
        "--port",
        &port,
        "--count",
        "200",
        // Every reply is counted: a fixed timeout a loaded host cannot miss.
        "--timeout",
        "2s",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert_eq!(v["responder"], "reflector");
    assert_eq!(v["same_clock"], true);
    assert_eq!(v["runs"][0]["counts"]["received"], 200);
    let stages = v["runs"][0]["stages"].as_array().unwrap();
    assert!(stages.iter().any(|s| s["stage"] == "responder_app"));
    let o = linerate(&[
        "latency",
        "127.0.0.1",
        "--port",
        &port,
        "--tcp",
        "--count",
        "50",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn latency_reports_what_it_measured_when_the_server_dies() {
    let (mut server, port) = server_on_free_port();
    let client = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "latency",
            "127.0.0.1",
            "--port",
            &port,
            "--time",
            "2s",
            "--interval",
            "1ms",
            "--timeout",
            "100ms",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    let _ = server.0.kill();
    let o = client.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).expect("a result despite the dead server");
    let run = &v["runs"][0];
    assert!(
        run["counts"]["received"].as_u64().unwrap() > 0,
        "measured before the kill"
    );
    assert!(
        run["counts"]["lost"].as_u64().unwrap() > 0,
        "lost after the kill"
    );
    let flags = v["flags"].as_array().expect("flags");
    let incomplete = flags
        .iter()
        .find(|f| f["code"] == "incomplete")
        .unwrap_or_else(|| panic!("no incomplete flag: {flags:?}"));
    assert_eq!(incomplete["severity"], "invalid");
}
