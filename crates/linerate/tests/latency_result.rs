//! `linerate latency`'s result document: its published schema, real output
//! that validates and reads back, and version-1 documents that still read.

mod common;

use std::process::Command;

use linerate_core::latency::{codes, EchoProtocol, LatencyReport, Responder, SCHEMA};
use linerate_core::result::{Envelope, Severity};

fn latency(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
        .arg("latency")
        .args(args)
        .output()
        .expect("the linerate binary runs")
}

#[test]
fn latency_schema_is_published() {
    common::published::<Envelope<LatencyReport>>(SCHEMA);
}

#[test]
fn real_output_validates_and_round_trips() {
    for extra in [
        &[][..],
        &["--tcp"],
        &["--sweep", "reflector-mode=blocking,busy"],
        &["--repeat", "2"],
    ] {
        // An explicit timeout: a reply late on a busy test host is not lost.
        let mut args = vec![
            "127.0.0.1",
            "--in-process",
            "--count",
            "120",
            "--timeout",
            "1s",
            "--json",
        ];
        args.extend_from_slice(extra);
        let mut argv = vec!["latency"];
        argv.extend_from_slice(&args);
        let v = common::json_of(&argv);
        let doc = common::round_trip::<LatencyReport>(SCHEMA, &v);
        assert_eq!(v["version"], 3);
        assert!(v["started_at"].is_string() && v["host"].is_object(), "{v}");
        assert!(v.get("warnings").is_none(), "flags replace warnings");
        let tcp = doc.result.protocol == EchoProtocol::Tcp;
        assert_eq!(tcp, extra.contains(&"--tcp"));
        // UDP and TCP stamp 1 exchange in 4: 30 of 120 are too few for
        // percentiles.
        // Energy is said once (measured or not available), and a busy test
        // host may be said to be noisy; the rest are the run's.
        let (energy, flags): (Vec<_>, Vec<_>) = doc
            .flags
            .iter()
            .filter(|f| f.code != codes::NOISY_HOST)
            .partition(|f| f.code.starts_with("energy"));
        assert_eq!(energy.len(), 1, "{energy:?}");
        for f in &flags {
            assert_eq!(f.code, codes::FEW_STAMPED_EXCHANGES, "{f:?}");
            assert_eq!(f.severity, Severity::Warning);
        }
        assert!(!flags.is_empty(), "{:?}", doc.flags);
        assert!(v["host_load"]["samples"].as_u64().unwrap() >= 2, "{v}");
        let repeats = extra.contains(&"--repeat");
        assert_eq!(
            doc.result.runs.len(),
            if repeats { 2 } else { doc.result.runs.len() }
        );
        assert_eq!(doc.result.spread.len(), usize::from(repeats), "{v}");
        let run = &doc.result.runs[0];
        assert!(run.stamping_cost_ns.is_some(), "derived figure in the JSON");
    }
}

#[test]
fn version_1_documents_read_back() {
    for file in [
        "linerate.latency.json",
        "linerate.latency.tcp.json",
        "linerate.latency.sweep.json",
        "linerate.latency.bed.json",
    ] {
        let v = common::fixture(file);
        let doc: Envelope<LatencyReport> =
            serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!((doc.schema.as_str(), doc.version), (SCHEMA, 1), "{file}");
        let r = &doc.result;
        assert_eq!(r.responder, Responder::Reflector, "{file}");
        assert!(r.kernel_stamps, "{file}: version 1 always stamped");
        assert_eq!(r.runs.len(), v["runs"].as_array().unwrap().len(), "{file}");
        assert_eq!(
            r.runs[0].counts.sent,
            v["runs"][0]["counts"]["sent"].as_u64().unwrap()
        );
        assert_eq!(r.protocol.name(), v["protocol"].as_str().unwrap());
        // Re-assessing a stored result gives the flags its warnings said.
        let flags = linerate_core::latency::assess(r);
        assert_eq!(
            flags.len(),
            v["warnings"].as_array().unwrap().len(),
            "{file}: {flags:?}"
        );
    }
}

#[test]
fn terminal_output_fits_100_columns_unless_wide() {
    let args = [
        "127.0.0.1",
        "--in-process",
        "--count",
        "100",
        "--sweep",
        "reflector-copy=off,on",
        "--sweep",
        "udp-checksum=on,off",
    ];
    let o = latency(&args);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    for l in out.lines() {
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    let o = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["--wide", "latency"])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let header = out
        .lines()
        .find(|l| l.trim_start().starts_with("configuration"))
        .expect("the median table");
    for col in ["RTT stamped", "sent", "lost"] {
        assert!(header.contains(col), "--wide shows {col}: {header}");
    }
}

#[test]
fn a_long_run_keeps_talking_on_a_log() {
    // stderr is a pipe here: a plain progress line every 5 s once the run
    // has lasted 10 s.
    let out = latency(&[
        "127.0.0.1",
        "--in-process",
        "--time",
        "11",
        "--interval",
        "10ms",
        "--json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("linerate latency: 10 s of 11 s")),
        "{err}"
    );
}

#[test]
fn bad_repeats_and_sweeps_are_usage_errors() {
    for (args, says) in [
        (
            &["--repeat", "0"][..],
            "--repeat: 0: must be between 1 and 100",
        ),
        (&["--sweep", "colour=red"], "--sweep: unknown key 'colour'"),
        (
            &["--sweep", "spin=on", "--sweep", "spin=off"],
            "'spin' is swept twice",
        ),
    ] {
        let mut argv = vec!["127.0.0.1", "--in-process", "--count", "5"];
        argv.extend_from_slice(args);
        let out = latency(&argv);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `--load` on loopback (no root): the document carries the idle and the
/// loaded run, the load section with both phases' stages, their growth and
/// the load's figures; it validates against the schema and reads back.
#[test]
fn latency_under_load_validates_and_round_trips() {
    let v = common::json_of(&[
        "latency",
        "127.0.0.1",
        "--in-process",
        "--time",
        "0.5s",
        "--timeout",
        "1s",
        "--stamp-every",
        "1",
        "--load",
        "tcp,1,forward,rate=20M",
        "--settle",
        "0.3s",
        "--sweep",
        "load-direction=forward,reverse",
        "--json",
    ]);
    let doc = common::round_trip::<LatencyReport>(SCHEMA, &v);
    let r = &doc.result;
    let load = r.load.as_ref().expect("a load section");
    assert_eq!(r.runs.len(), 3, "idle, then one run per level");
    assert_eq!(load.levels.len(), 2);
    assert_eq!(load.levels[1].load.to_string(), "tcp,1,reverse,rate=20M");
    assert_eq!(
        v["load"]["levels"][1]["settings"][0],
        serde_json::json!(["load-direction", "reverse"])
    );
    assert!(!load.idle.is_empty());
    for level in &load.levels {
        assert!(!level.loaded.is_empty() && !level.growth.is_empty());
        let t = level.throughput.as_ref().expect("the load's figures");
        assert_eq!(t.directions.len(), 1, "{t:?}");
        assert!(v["load"]["levels"][0]["growth"][0]["growth_mean_ns"].is_number());
    }
}

#[test]
fn bad_loads_are_usage_errors() {
    for (extra, says) in [
        (&["--load", "tcp,sideways"][..], "--load: 'sideways'"),
        (
            &["--load", "tcp", "--count", "10"],
            "--count: a run under load",
        ),
        (
            &["--load", "tcp", "--sweep", "spin=on"],
            "--sweep: unknown key 'spin'",
        ),
        (&["--load", "tcp", "--repeat", "2"], "--repeat:"),
        (&["--load", "tcp", "--settle", "2m"], "--settle:"),
        (&["--load", "udp,size=1"], "--load: size_bytes"),
    ] {
        let mut args = vec!["127.0.0.1", "--in-process"];
        args.extend_from_slice(extra);
        let out = latency(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}
