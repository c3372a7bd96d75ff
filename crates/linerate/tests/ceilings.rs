//! `linerate ceilings`: the published schema, the real `--quick --json`
//! document validated and read back, `--sizes`, the table naming its methods and CPU
//! features, and usage errors.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use linerate_core::ceilings::{CeilingsResult, Part, SCHEMA, VERSION};
use linerate_core::result::Envelope;

fn linerate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("the linerate binary runs")
}

#[test]
fn ceilings_schema_is_published() {
    common::published::<Envelope<CeilingsResult>>(SCHEMA);
}

#[test]
fn quick_run_validates_and_round_trips() {
    let v = common::json_of(&["ceilings", "--quick", "--json"]);
    let e = common::round_trip::<CeilingsResult>(SCHEMA, &v);
    assert_eq!(e.version, VERSION);
    let r = &e.result;
    assert!(r.quick && r.repeats == 3);
    assert!(r.clock.contains("CLOCK_MONOTONIC"), "{}", r.clock);
    // Every part ran, every check passed, and every figure has its repeats.
    for part in Part::ALL {
        assert!(r.ceilings.iter().any(|c| c.part == part), "{part}");
    }
    assert!(
        !r.checks.is_empty() && r.checks.iter().all(|c| c.passed),
        "{:?}",
        r.checks
    );
    for c in &r.ceilings {
        assert_eq!(c.repeat_ns.len(), 3, "{c:?}");
        assert!(c.ns_per_op.min <= c.ns_per_op.median && c.ns_per_op.median <= c.ns_per_op.max);
        assert!(c.frames_per_s > 0.0, "{c:?}");
    }
    let methods = |part: Part| -> Vec<&str> {
        let mut m: Vec<&str> = (r.ceilings.iter())
            .filter(|c| c.part == part)
            .map(|c| c.method.as_str())
            .collect();
        m.dedup();
        m
    };
    assert!(methods(Part::Checksum).contains(&"scalar"));
    assert_eq!(methods(Part::Send)[..3], ["send", "sendmmsg", "UDP GSO"]);
    assert_eq!(methods(Part::Receive)[..3], ["recv", "recvmmsg", "UDP GRO"]);
    // The raw-frame paths: timed on a temporary veth pair as root, else
    // each skipped with its reason; the pair is gone afterwards.
    let raw = [
        (Part::Send, "AF_PACKET sendmmsg"),
        (Part::Send, "AF_PACKET TX ring"),
        (Part::Send, "AF_XDP (copy mode)"),
        (Part::Send, "XDP live frames"),
        (Part::Receive, "AF_PACKET recvmmsg"),
        (Part::Receive, "XDP counter (program)"),
    ];
    for (part, m) in raw {
        let timed = methods(part).contains(&m);
        let skipped = (r.skipped.iter()).find(|s| s.part == part && s.method == m);
        assert!(timed != skipped.is_some(), "{m}: {:?}", r.skipped);
        if let Some(s) = skipped {
            assert!(!s.reason.is_empty(), "{m}");
        }
    }
    if linerate_bed::privileges::require("ceilings: raw-frame paths on a veth pair") {
        let timed = |part, m| methods(part).contains(&m);
        assert!(timed(Part::Send, "AF_PACKET sendmmsg"), "{:?}", r.skipped);
        assert!(
            timed(Part::Receive, "AF_PACKET recvmmsg"),
            "{:?}",
            r.skipped
        );
        assert!(
            timed(Part::Receive, "XDP counter (program)"),
            "{:?}",
            r.skipped
        );
        let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
        let left = String::from_utf8_lossy(&left.stdout);
        assert!(!left.contains("lr-ceil"), "{left}");
    }
    if cfg!(target_arch = "x86_64") {
        assert!(r.machine.cpu_features.iter().any(|f| f == "sse2"));
        assert!(methods(Part::Copy).contains(&"rep movsb"));
        assert!(methods(Part::Checksum).contains(&"sse2"));
    }
    // Energy is said once, either way.
    let energy: Vec<&str> = (e.flags.iter())
        .map(|f| f.code.as_str())
        .filter(|c| c.starts_with("energy"))
        .collect();
    assert_eq!(energy.len(), 1, "{energy:?}");
}

#[test]
fn table_names_methods_and_cpu_features() {
    let o = linerate(&[
        "ceilings",
        "--quick",
        "--only",
        "checksum",
        "--repeats",
        "1",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("CLOCK_MONOTONIC"), "{out}");
    assert!(out.contains("check: checksum:"), "{out}");
    assert!(
        out.contains("Internet checksum (") && out.contains("1518-byte frames"),
        "{out}"
    );
    assert!(
        out.contains("enough for") || out.contains("not for"),
        "{out}"
    );
    assert!(!out.contains("Copy by block size"), "{out}");
    if cfg!(target_arch = "x86_64") {
        assert!(out.contains("CPU features sse2"), "{out}");
        // A row of the vectorised method, beside the scalar one.
        let row = |m: &str| {
            out.lines()
                .any(|l| l.trim_start().starts_with(&format!("{m} ")))
        };
        assert!(row("scalar") && row("sse2"), "{out}");
    }
    for l in out.lines() {
        assert!(l.chars().count() <= 100, "{l}");
    }
}

#[test]
fn sizes_replace_the_copy_and_checksum_lists() {
    let v = common::json_of(&[
        "ceilings",
        "--quick",
        "--only",
        "copy,checksum",
        "--sizes",
        "1K,512",
        "--repeats",
        "1",
        "--json",
    ]);
    let e = common::round_trip::<CeilingsResult>(SCHEMA, &v);
    let sizes = |part: Part| {
        let mut s: Vec<u64> = (e.result.ceilings.iter())
            .filter(|c| c.part == part)
            .map(|c| c.bytes_per_op)
            .collect();
        s.sort_unstable();
        s.dedup();
        s
    };
    assert_eq!(sizes(Part::Copy), [512, 1024]);
    assert_eq!(sizes(Part::Checksum), [512, 1024]);
}

#[test]
fn usage_errors_exit_2() {
    for (args, what) in [
        (
            &["ceilings", "--repeats", "0"][..],
            "--repeats must be 1 to 100",
        ),
        (&["ceilings", "--repeats", "many"][..], "invalid value"),
        (
            &["ceilings", "--only", "memcpy"][..],
            "unknown part 'memcpy'",
        ),
        (&["ceilings", "--sizes", "512,0"][..], "--sizes: 0 B"),
    ] {
        let o = linerate(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
        assert!(err.contains(what), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// Energy per gigabyte and per packet divide by what each measuring
/// command's result moved: read from real documents of each.
#[test]
fn energy_denominators_of_the_measuring_commands() {
    use linerate_core::energy::{flag_for, Energy, Moved};
    let read = |file: &str| common::fixture(file);
    let rfc: Envelope<linerate_core::rfc2544::Rfc2544Result> =
        serde_json::from_value(read("linerate.rfc2544.json")).unwrap();
    let lat: Envelope<linerate_core::latency::LatencyReport> =
        serde_json::from_value(read("linerate.latency.json")).unwrap();
    let tput: Envelope<linerate_core::throughput::model::ThroughputResult> =
        serde_json::from_value(read("linerate.throughput.udp.json")).unwrap();
    let (rb, rp) = rfc.result.moved();
    let first = &rfc.result.sizes[0];
    let sent0: u64 = first
        .trace
        .iter()
        .flat_map(|t| &t.steps)
        .map(|s| s.sent_frames)
        .sum();
    assert!(sent0 > 0 && rp >= sent0 && rb >= rp * 64, "{rb} {rp}");
    let (lb, lp) = lat.result.moved();
    let c = &lat.result.runs[0].counts;
    assert!(lp >= c.sent + c.received && lb >= lp * 16, "{lb} {lp}");
    // A version-1 throughput document has no derived packet figures.
    let (tb, tp) = tput.result.moved();
    assert!(tb > 400_000_000 && tp == 0, "{tb} {tp}");
    let measured = Energy::Measured {
        joules: 2.0,
        seconds: 1.0,
        source: "fixture".into(),
    };
    let f = flag_for(&measured, &tput.result);
    let per_gb = f.evidence["energy_j_per_gb"].as_f64().unwrap();
    assert!(
        (per_gb - 2.0 / (tb as f64 / 1e9)).abs() < 1e-9 * per_gb,
        "{per_gb}"
    );
}

/// SIGINT while the raw-frame paths run on the temporary veth pair: the
/// pair is removed and the exit code says which signal ended the run.
#[test]
fn sigint_removes_the_veth_pair() {
    use std::time::{Duration, Instant};
    if !linerate_bed::privileges::require("ceilings: SIGINT removes the veth pair") {
        return;
    }
    let netns = || {
        let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["ceilings", "--only", "send", "--repeats", "100"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ns = format!("lr-ceil{}-a", child.id());
    let start = Instant::now();
    while !netns().contains(&ns) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no {ns} after 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    // Bounded wait for the exit.
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("still running 120 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("removed bed"), "{err}");
    let left = netns();
    assert!(!left.contains(&format!("lr-ceil{pid}")), "{left}");
}
