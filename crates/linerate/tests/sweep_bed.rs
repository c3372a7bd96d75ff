//! `linerate throughput --bed X --sweep mtu=…,gro=…`: each point sets the
//! bed (read back in the run's path facts), every point is in the JSON, and
//! the bed is as before afterwards and after SIGINT. Unknown keys, values
//! and settings the bed cannot take are usage errors before anything runs.
//! On beds the tests create and always remove (privileged; skips loudly
//! without root, fails under LINERATE_REQUIRE_PRIV=1).
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use linerate_bed::reconfig::{read_back, IfaceNow};
use linerate_bed::{Bed, BedSpec, Topology};
use linerate_core::throughput::model::{Scenarios, SCENARIOS_SCHEMA};

/// One measuring test at a time: they share two CPUs.
static MEASURING: Mutex<()> = Mutex::new(());

fn linerate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("the linerate binary runs")
}

fn now(bed: &Bed) -> Vec<IfaceNow> {
    read_back(bed, "gro").unwrap()
}

/// Host a's `net.ipv4.tcp_rmem` and its interface's RPS mask, now.
fn sysctl_and_rps(bed: &Bed) -> (String, String) {
    let ns = bed.netns("a").unwrap().to_string();
    let run = |cmd: &[&str]| {
        let argv: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        linerate_bed::run_command(&argv).unwrap()
    };
    (
        run(&[
            "ip",
            "netns",
            "exec",
            &ns,
            "sysctl",
            "-n",
            "net.ipv4.tcp_rmem",
        ]),
        run(&[
            "ip",
            "netns",
            "exec",
            &ns,
            "sh",
            "-c",
            "cat /sys/class/net/*/queues/rx-0/rps_cpus",
        ]),
    )
}

#[test]
fn every_point_sets_the_bed_and_the_bed_is_restored() {
    if !linerate_bed::privileges::require("every_point_sets_the_bed_and_the_bed_is_restored") {
        return;
    }
    let _one = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let name = format!("sw{}", std::process::id());
    let bed = Bed::up(&BedSpec::new(name.clone(), Topology::Bridge)).expect("bed up");
    let before = now(&bed);
    let o = linerate(&[
        "throughput",
        "--bed",
        &name,
        "--udp",
        "--time",
        "1",
        "--sweep",
        "mtu=1500,9000",
        "--sweep",
        "gro=on,off",
        "--json",
    ]);
    let after = now(&bed);
    drop(bed);
    assert_eq!(after, before, "the bed is as before");
    let err = String::from_utf8_lossy(&o.stderr);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {err}\n{}", String::from_utf8_lossy(&o.stdout)));
    let doc = common::round_trip::<Scenarios>(SCENARIOS_SCHEMA, &v);
    assert_eq!(doc.exit_code(), o.status.code().unwrap() as u8, "{err}");
    let runs = &doc.result.runs;
    assert_eq!(runs.len(), 4, "{err}");
    for r in runs {
        let r = &r.result;
        let mtu: u32 = r.settings[0].1.parse().unwrap();
        // The client read its interface's MTU during the run: the point's.
        assert_eq!(r.path.mtu_bytes, Some(mtu), "{:?}", r.settings);
        assert_eq!(r.settings[1].0, "gro");
    }
    let labels: Vec<&str> = doc.result.points.iter().map(|p| p.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "mtu=1500 gro=on",
            "mtu=1500 gro=off",
            "mtu=9000 gro=on",
            "mtu=9000 gro=off"
        ]
    );
    assert!(doc.result.points.iter().all(|p| p.bits_per_s.is_some()));
}

#[test]
fn sigint_mid_sweep_restores_the_bed() {
    if !linerate_bed::privileges::require("sigint_mid_sweep_restores_the_bed") {
        return;
    }
    let _one = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let name = format!("si{}", std::process::id());
    let bed = Bed::up(&BedSpec::new(name.clone(), Topology::Pair)).expect("bed up");
    let before = now(&bed);
    let before_sysctl = sysctl_and_rps(&bed);
    let mut child = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "throughput",
            "--bed",
            &name,
            "--udp",
            "--time",
            "20",
            "--sweep",
            "mtu=9000",
            "--sweep",
            "gro=off",
            "--sweep",
            "tcp-rmem=4096:65536:1048576",
            "--sweep",
            "rps=on",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (at most 20 s) until the point's settings are on the bed.
    let t0 = Instant::now();
    while !now(&bed).iter().all(|i| i.mtu == 9000) || !sysctl_and_rps(&bed).0.contains("65536") {
        assert!(t0.elapsed() < Duration::from_secs(20), "never set");
        assert!(child.try_wait().unwrap().is_none(), "ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let status = common::interrupt(&mut child, Duration::from_secs(15));
    let after = now(&bed);
    let after_sysctl = sysctl_and_rps(&bed);
    drop(bed);
    assert_eq!(after, before, "restored after SIGINT");
    assert_eq!(
        after_sysctl, before_sysctl,
        "sysctl and RPS restored after SIGINT"
    );
    // The run it cut short is reported, flagged incomplete.
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let flags = v["flags"].as_array().unwrap();
    assert!(flags.iter().any(|f| f["code"] == "incomplete"), "{v}");
}

#[test]
fn bad_sweeps_are_usage_errors_before_anything_runs() {
    if !linerate_bed::privileges::require("bad_sweeps_are_usage_errors_before_anything_runs") {
        return;
    }
    let name = format!("sb{}", std::process::id());
    let bed = Bed::up(&BedSpec::new(name.clone(), Topology::Pair)).expect("bed up");
    let before = now(&bed);
    for (sweep, says) in [
        ("colour=red", "unknown key 'colour'"),
        ("mtu=big", "mtu: 'big' is not a number"),
        ("gro=maybe", "gro: 'maybe' is not on or off"),
        // veth's driver cannot turn large receive offload on: not a key,
        // and the checker refuses an MTU the bed cannot take.
        ("lro=on", "unknown key 'lro'"),
        ("mtu=1000", "mtu 1000 is outside"),
        // veth has no interrupt coalescing: refused, naming the interface.
        ("rx-usecs=0,50", "has no interrupt coalescing"),
    ] {
        let o = linerate(&[
            "throughput",
            "--bed",
            &name,
            "--udp",
            "--time",
            "1",
            "--sweep",
            sweep,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{sweep}: {err}");
        assert!(err.contains(says), "{sweep}: {err}");
        assert!(o.stdout.is_empty(), "{sweep}: nothing ran");
    }
    assert_eq!(now(&bed), before);
}

#[test]
fn rfc2544_repeats_each_point_and_restores_the_bed() {
    if !linerate_bed::privileges::require("rfc2544_repeats_each_point_and_restores_the_bed") {
        return;
    }
    let _one = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let name = format!("sr{}", std::process::id());
    let bed = Bed::up(&BedSpec::new(name.clone(), Topology::Pair)).expect("bed up");
    let before = now(&bed);
    let o = linerate(&[
        "rfc2544",
        "--bed",
        &name,
        "--link",
        "1G",
        "--generator",
        "packet",
        "--tests",
        "single",
        "--frames",
        "64",
        "--trial",
        "300ms",
        "--drain",
        "100ms",
        "--ceiling-time",
        "200ms",
        "--sweep",
        "gro=on,off",
        "--repeat",
        "2",
        "--json",
    ]);
    let after = now(&bed);
    drop(bed);
    assert_eq!(after, before, "the bed is as before");
    let err = String::from_utf8_lossy(&o.stderr);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {err}\n{}", String::from_utf8_lossy(&o.stdout)));
    common::validate("linerate.rfc2544", &v);
    assert_eq!(v["version"], linerate_core::rfc2544::VERSION);
    let sizes = v["sizes"].as_array().unwrap();
    assert_eq!(sizes.len(), 4, "{err}");
    assert_eq!(sizes[1]["settings"][0], serde_json::json!(["gro", "on"]));
    assert_eq!(sizes[1]["repeat"], 2);
    let spread = v["spread"].as_array().unwrap();
    assert_eq!(spread.len(), 2, "{v}");
    assert_eq!(spread[1]["label"], "gro=off, 64 B");
    assert_eq!(spread[1]["runs"], 2);
}

#[test]
fn latency_sweeps_bed_keys_and_restores_the_bed() {
    if !linerate_bed::privileges::require("latency_sweeps_bed_keys_and_restores_the_bed") {
        return;
    }
    let _one = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let name = format!("sl{}", std::process::id());
    let bed = Bed::up(&BedSpec::new(name.clone(), Topology::Pair)).expect("bed up");
    let before = now(&bed);
    let o = linerate(&[
        "latency",
        "--bed",
        &name,
        "--count",
        "20",
        "--sweep",
        "mtu=1500,9000",
        "--sweep",
        "gro=off",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("bed set (read back): mtu 9000, gro off"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let labels: Vec<String> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["settings"].to_string())
        .collect();
    assert_eq!(labels.len(), 2, "{labels:?}");
    assert!(
        labels[1].contains("9000") && labels[1].contains("gro"),
        "{labels:?}"
    );
    assert_eq!(now(&bed), before, "the bed is as before");
    // veth has no interrupt coalescing: refused before anything runs.
    let o = linerate(&[
        "latency",
        "--bed",
        &name,
        "--count",
        "5",
        "--sweep",
        "rx-usecs=0",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("has no interrupt coalescing"), "{err}");
    assert!(o.stdout.is_empty());
    assert_eq!(now(&bed), before);
}
