//! `linerate throughput --bed`: the bed's link and MTU reach the result
//! (jumbo frames get their % of max possible), flags blame the path when
//! the path limited the rate, and --port is the bed server's port. On beds
//! the tests create and always remove (privileged; skips loudly without
//! root, fails under LINERATE_REQUIRE_PRIV=1).
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Output};

use linerate_bed::{Bed, BedSpec, Topology};
use linerate_core::result::Envelope;
use linerate_core::throughput::model::ThroughputResult;
use linerate_core::units::BitRate;

fn linerate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("the linerate binary runs")
}

fn json(o: &Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    serde_json::from_slice(&o.stdout).expect("valid JSON")
}

fn codes(v: &serde_json::Value) -> Vec<String> {
    v["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn jumbo_frames_on_a_bed_get_their_percentage() {
    if !linerate_bed::privileges::require("jumbo_frames_on_a_bed_get_their_percentage") {
        return;
    }
    let name = format!("j{}", std::process::id());
    let mut spec = BedSpec::new(name.clone(), Topology::Pair);
    spec.link = Some(BitRate::from_gbps(1));
    spec.mtu = Some(9000);
    let _bed = Bed::up(&spec).expect("bed up");
    for extra in [None, Some("1G")] {
        let mut args = vec!["throughput", "--bed", &name, "--tcp", "--time", "1"];
        if let Some(l) = extra {
            args.extend(["--link", l]);
        }
        let mut with_json = args.clone();
        with_json.push("--json");
        let v = json(&linerate(&with_json));
        // The MSS of a 9000-byte MTU in a 9018-byte (jumbo) frame.
        assert_eq!(v["line_max"]["frame_bytes"], 9018, "{}", v["line_max"]);
        assert_eq!(v["line_max"]["jumbo"], true);
        assert_eq!(v["path"]["mtu_bytes"], 9000);
        assert_eq!(
            v["path"]["link_source"],
            if extra.is_some() { "given" } else { "bed" }
        );
        assert!(v["no_line_max"].is_null(), "{}", v["no_line_max"]);
        assert!(!codes(&v).contains(&"no_line_rate".to_string()));
        for d in v["figures"]["directions"].as_array().unwrap() {
            let pct = d["pct_of_max"].as_f64().unwrap();
            assert!(pct > 10.0 && pct < 103.0, "{d}");
        }
        common::validate("linerate.throughput", &v);
        let back: Envelope<ThroughputResult> = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), v);
        // The table has the figures, and nothing about loopback or --link.
        let o = linerate(&args);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("(jumbo) frames"), "{out}");
        assert!(!out.contains("no line rate known"), "{out}");
        assert!(!out.contains("give --link"), "{out}");
        assert!(!out.contains("loopback"), "{out}");
        let table = out.split("Table 1").nth(1).unwrap();
        assert!(
            table
                .lines()
                .any(|l| l.contains("received, server") && l.trim_end().ends_with('%')),
            "{out}"
        );
    }
}

#[test]
fn a_rate_above_the_link_is_the_paths_limit_and_port_is_honoured() {
    if !linerate_bed::privileges::require(
        "a_rate_above_the_link_is_the_paths_limit_and_port_is_honoured",
    ) {
        return;
    }
    let name = format!("r{}", std::process::id());
    let mut spec = BedSpec::new(name.clone(), Topology::Pair);
    spec.link = Some(BitRate::from_mbps(100));
    let _bed = Bed::up(&spec).expect("bed up");
    // 150 Mbit/s asked of a 100 Mbit/s link: the link limited it, not the host.
    let v = json(&linerate(&[
        "throughput",
        "--bed",
        &name,
        "--udp",
        "--rate",
        "150M",
        "--time",
        "1",
        "--port",
        "15377",
        "--json",
    ]));
    let c = codes(&v);
    assert!(c.contains(&"path_limited_rate".to_string()), "{c:?}");
    assert!(!c.contains(&"rate_not_reached".to_string()), "{c:?}");
    let f = v["flags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "path_limited_rate")
        .unwrap();
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("the link, not this host"),
        "{f}"
    );
    // A sender at the line rate is never blamed on its CPU.
    assert!(
        !v["flags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "cpu_bound" && f["severity"] == "invalid"),
        "{}",
        v["flags"]
    );
    // --port with --bed: the bed's server listened there.
    assert!(
        v["server"].as_str().unwrap().ends_with(":15377"),
        "{}",
        v["server"]
    );
    common::validate("linerate.throughput", &v);
}
