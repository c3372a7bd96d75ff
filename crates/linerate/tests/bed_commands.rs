//! Test commands with `--bed`: every end in one process, each in its host's
//! namespace, on beds the tests create and always remove (privileged; skips
//! loudly without root, fails under LINERATE_REQUIRE_PRIV=1).

use std::process::{Command, Output};

use linerate_bed::{Bed, BedSpec, Topology};

fn linerate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("the linerate binary runs")
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("valid JSON")
}

fn stage<'a>(run: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    run["stages"]
        .as_array()?
        .iter()
        .find(|s| s["stage"] == name)
}

#[test]
fn latency_across_a_veth_pair() {
    if !linerate_bed::privileges::require("latency_across_a_veth_pair") {
        return;
    }
    let name = format!("l{}", std::process::id());
    let bed = Bed::up(&BedSpec::new(name.clone(), Topology::Pair)).expect("bed up");

    // UDP through linerate's reflector in host b: every stage, one clock
    // (an explicit timeout: a reply late on a busy test host is not lost).
    let v = json(&linerate(&[
        "latency",
        "--bed",
        &name,
        "--count",
        "300",
        "--timeout",
        "1s",
        "--json",
    ]));
    assert_eq!(
        (v["schema"].as_str(), v["version"].as_u64()),
        (Some("linerate.latency"), Some(3))
    );
    assert!(v["flags"].is_array(), "{v}");
    assert_eq!(
        v["target"],
        format!("198.18.0.2 (bed {name}: host a → reflector in host b)").as_str()
    );
    assert_eq!(v["same_clock"], true);
    assert_eq!(v["responder"], "reflector");
    let run = &v["runs"][0];
    assert_eq!(run["counts"]["received"], 300);
    for s in [
        "client_tx",
        "responder_rx",
        "responder_app",
        "responder_tx",
        "network",
        "client_rx",
        "rtt",
        "one_way_forward",
        "one_way_return",
    ] {
        assert!(stage(run, s).is_some(), "stage {s} missing");
    }
    // The means add up exactly per exchange, so their sum is the mean RTT
    // (up to float rounding and stamps left out).
    let parts = [
        "client_tx",
        "responder_rx",
        "responder_app",
        "responder_tx",
        "network",
        "client_rx",
    ];
    let sum: f64 = parts
        .iter()
        .map(|s| stage(run, s).unwrap()["mean_ns"].as_f64().unwrap())
        .sum();
    let rtt = stage(run, "rtt").unwrap()["mean_ns"].as_f64().unwrap();
    if run["missing_tx_stamps"] == 0 && run["missing_rx_stamps"] == 0 {
        assert!(
            (sum - rtt).abs() < 1.0,
            "stage means {sum} vs RTT mean {rtt}"
        );
    }
    assert!(
        v["hardware_timestamps"]
            .as_str()
            .unwrap()
            .contains("none on"),
        "{}",
        v["hardware_timestamps"]
    );

    // TCP 1-byte echo.
    let v = json(&linerate(&[
        "latency", "--bed", &name, "--tcp", "--count", "200", "--json",
    ]));
    assert_eq!(v["runs"][0]["counts"]["received"], 200);
    assert!(stage(&v["runs"][0], "responder_app").is_some());

    // ICMP: the kernel of host b answers; client-side stages only.
    let v = json(&linerate(&[
        "latency",
        "--bed",
        &name,
        "--icmp",
        "--count",
        "100",
        "--timeout",
        "1s",
        "--json",
    ]));
    assert_eq!(v["responder"], "kernel");
    let run = &v["runs"][0];
    assert_eq!(run["counts"]["received"], 100);
    assert!(stage(run, "client_tx").is_some());
    assert!(stage(run, "responder_app").is_none());
    assert!(stage(run, "one_way_forward").is_none());

    // IPv6 without UDP checksums: a note that SO_NO_CHECK does nothing there.
    let v = json(&linerate(&[
        "latency",
        "--bed",
        &name,
        "--ipv6",
        "--no-udp-checksum",
        "--count",
        "100",
        "--stamp-every",
        "1",
        "--json",
    ]));
    assert_eq!(v["ipv6"], true);
    assert!(
        v["flags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "no_udp_checksum_ipv6" && f["severity"] == "info"),
        "{}",
        v["flags"]
    );

    // A bed that does not exist: a clear error, exit 2.
    let o = linerate(&["latency", "--bed", "lr-no-such-bed-x", "--count", "1"]);
    assert_eq!(o.status.code(), Some(2));

    bed.down().expect("bed down");
    assert!(!std::path::Path::new(&format!("/run/netns/lr-{name}-a")).exists());
}

#[test]
fn throughput_on_a_bed_runs_both_ends_and_knows_the_line_rate() {
    if !linerate_bed::privileges::require(
        "throughput_on_a_bed_runs_both_ends_and_knows_the_line_rate",
    ) {
        return;
    }
    let name = format!("t{}", std::process::id());
    let mut spec = BedSpec::new(name.clone(), Topology::Pair);
    spec.link = Some(linerate_core::units::BitRate::from_mbps(100));
    let _bed = Bed::up(&spec).expect("bed up");
    let v = json(&linerate(&[
        "throughput",
        "--bed",
        &name,
        "--udp",
        "--time",
        "1",
        "--json",
    ]));
    // Both ends reported, and the bed's link is the maximum possible.
    assert!(
        v["server_side"].is_object(),
        "the server end in host b answered"
    );
    assert_eq!(v["line_max"]["link_bits_per_s"], 100_000_000);
    assert_eq!(v["line_max"]["frame_bytes"], 1518);
    let sent = v["client"]["flows"][0]["bytes"].as_u64().unwrap();
    let got = v["server_side"]["flows"][0]["bytes"].as_u64().unwrap();
    assert!(got > 0 && got <= sent, "received {got} of {sent}");
    // No HOST with --bed, and a bed that does not exist: usage errors.
    let o = linerate(&["throughput", "198.18.0.2", "--bed", &name]);
    assert_eq!(o.status.code(), Some(2));
    let o = linerate(&["throughput", "--bed", "lr-no-such-bed-y", "--time", "1"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_lossy_bed_sizes_the_timeout_from_the_rtts() {
    if !linerate_bed::privileges::require("a_lossy_bed_sizes_the_timeout_from_the_rtts") {
        return;
    }
    let name = format!("lt{}", std::process::id());
    let mut spec = BedSpec::new(name.clone(), Topology::Pair);
    spec.loss_pct = Some(5.0);
    let bed = Bed::up(&spec).expect("bed up");
    let o = linerate(&["latency", "--bed", &name, "--count", "400", "--json"]);
    drop(bed);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let run = &v["runs"][0];
    // Lost requests (5 % each way) waited 10 × p99 of the RTTs seen, not
    // a second each.
    assert!(run["counts"]["lost"].as_u64().unwrap() > 0, "{run}");
    let t = run["timeout_ns"].as_u64().unwrap();
    assert!(t < 1_000_000_000, "timeout {t} ns was not sized");
    let codes: Vec<&str> = v["flags"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert!(codes.contains(&"lost_replies"), "{codes:?}");
}

#[test]
fn a_round_trip_faster_than_the_wire_is_flagged_on_a_shaped_bed() {
    if !linerate_bed::privileges::require(
        "a_round_trip_faster_than_the_wire_is_flagged_on_a_shaped_bed",
    ) {
        return;
    }
    let name = format!("lw{}", std::process::id());
    let mut spec = BedSpec::new(name.clone(), Topology::Pair);
    spec.link = Some(linerate_core::units::BitRate::from_mbps(100));
    let bed = Bed::up(&spec).expect("bed up");
    // 1472-byte requests: 1518-byte frames, 2 × 123.04 µs on a 100 Mbit/s
    // wire; tbf delays no frame that finds tokens in its bucket.
    let o = linerate(&[
        "latency",
        "--bed",
        &name,
        "--size",
        "1472",
        "--count",
        "200",
        "--timeout",
        "1s",
        "--json",
    ]);
    drop(bed);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["link_bits_per_s"], 100_000_000);
    let run = &v["runs"][0];
    let wire = run["wire_rtt_ns"].as_f64().unwrap();
    assert!((wire - 246_080.0).abs() < 1e-6, "{wire}");
    let fastest = [&run["rtt_unstamped"]["min_ns"], &run["stages"]]
        .iter()
        .filter_map(|x| x.as_u64())
        .chain(
            run["stages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["stage"] == "rtt")
                .filter_map(|s| s["min_ns"].as_u64()),
        )
        .min()
        .unwrap();
    let flagged = v["flags"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["code"] == "below_wire_time" && f["severity"] == "invalid");
    assert_eq!((fastest as f64) < wire, flagged, "{}", v["flags"]);
    assert_eq!(o.status.code(), Some(if flagged { 1 } else { 0 }));
}
