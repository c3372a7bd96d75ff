//! `--sweep link=RATE,…` on beds the tests create (privileged; skips loudly
//! without root, fails under LINERATE_REQUIRE_PRIV=1): each point's rate is
//! read back from the bed (tc's tbf, the emulator's stats, the bed's
//! record), each point's throughput is measured against its own rate (never
//! above it, well above the slower point's), latency's wire time and
//! rfc2544's line rate are the point's, and the bed is at its own rate again
//! afterwards and after SIGINT. Bad rates and beds without a
//! shaped link are usage errors before anything runs.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use linerate_bed::{emulator, Bed, BedSpec, Topology};
use linerate_core::emu::Shaper;
use linerate_core::throughput::model::{Scenarios, SCENARIOS_SCHEMA};
use linerate_core::units::BitRate;

/// One measuring test at a time: they share two CPUs.
static MEASURING: Mutex<()> = Mutex::new(());

const M10: u64 = 10_000_000;
const M100: u64 = 100_000_000;

fn linerate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("the linerate binary runs")
}

/// A pair bed at 100 Mbit/s shaped by `shaper`.
fn bed(tag: &str, shaper: Shaper) -> Bed {
    emulator::use_exe(env!("CARGO_BIN_EXE_linerate"));
    let mut spec = BedSpec::new(format!("k{}{tag}", std::process::id()), Topology::Pair);
    spec.link = Some(BitRate::from_bps(M100));
    spec.shaper = shaper;
    Bed::up(&spec).expect("bed up")
}

/// The link rate of the bed as everything that holds it says now: every
/// root tbf of its hosts' interfaces, its record, and its emulator's
/// cables (both directions), bit/s.
fn rates_now(bed: &Bed) -> Vec<u64> {
    let mut rates = Vec::new();
    for role in ["a", "b"] {
        let (ns, dev) = (bed.netns(role).unwrap(), bed.iface(role).unwrap());
        let argv: Vec<String> = ["tc", "-n", ns, "-j", "qdisc", "show", "dev", dev]
            .map(String::from)
            .to_vec();
        let out = linerate_bed::run_command(&argv).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let tbf = v.as_array().unwrap().iter().find(|q| q["kind"] == "tbf");
        let tbf = tbf.unwrap_or_else(|| panic!("no tbf on {dev}: {out}"));
        rates.push(tbf["options"]["rate"].as_u64().unwrap() * 8);
    }
    let dir = Path::new(linerate_bed::state::STATE_DIR);
    let record = linerate_bed::state::read(dir, bed.name()).unwrap();
    rates.push(record.spec.link.unwrap().bps());
    if record.emulator.is_some() {
        let stats = linerate_io::emu::read_stats(&emulator::stats_path(dir, bed.name())).unwrap();
        for c in &stats.links {
            for d in [c.west_to_east, c.east_to_west] {
                rates.push(d.rate.unwrap().bps());
            }
        }
    }
    rates
}

/// Sweeps `link=10M,100M` over UDP on `bed` and checks every point
/// against its own rate.
fn sweep_two_rates(bed: &Bed) {
    let o = linerate(&[
        "throughput",
        "--bed",
        bed.name(),
        "--udp",
        "--time",
        "1",
        "--sweep",
        "link=10M,100M",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bed set (read back): link 10 Mbit/s"), "{err}");
    assert!(
        err.contains("bed set (read back): link 100 Mbit/s"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {err}\n{}", String::from_utf8_lossy(&o.stdout)));
    let doc = common::round_trip::<Scenarios>(SCENARIOS_SCHEMA, &v);
    let runs = &doc.result.runs;
    assert_eq!(runs.len(), 2, "{err}");
    let mut received = Vec::new();
    for (r, rate) in runs.iter().map(|r| &r.result).zip([M10, M100]) {
        assert_eq!(
            r.settings,
            [("link".to_string(), format!("{}M", rate / 1_000_000))]
        );
        // The point's rate is the model's and the result's.
        assert_eq!(r.path.link_bits_per_s, Some(rate), "{:?}", r.settings);
        let account = r.link_emulation.as_ref().unwrap();
        assert_eq!(account.link.map(BitRate::bps), Some(rate));
        assert_eq!(account.shaper, bed.spec().effective_shaper());
        if account.shaper == Shaper::Emu {
            assert!(
                account.during.is_some_and(|c| c.forwarded > 0),
                "{account:?}"
            );
        }
        let rx = (r.figures.directions.iter())
            .find(|d| d.role == linerate_core::throughput::model::FlowRole::Receiver)
            .unwrap();
        // Never above the point's rate, a tbf's bucket aside (what an
        // idle bucket passes at once over the receiver's time).
        let bucket_bits = r.path.burst_bytes.unwrap_or(0) as f64 * 8.0;
        let allowed = rate as f64 * 1.005 + bucket_bits * 1e9 / rx.time_ns as f64;
        assert!(
            rx.bits_per_s <= allowed,
            "{:?}: {} bit/s received above {allowed}",
            r.settings,
            rx.bits_per_s
        );
        received.push(rx.bits_per_s);
    }
    // The faster point carries well more than the slower one can.
    assert!(received[1] > 2.0 * M10 as f64, "{received:?}");
}

/// A bed shaped by `shaper` swept over two rates: the rate holders (its
/// `holders` of them) at 100M before and after.
fn each_point_at_its_rate_then_restored(test: &str, shaper: Shaper, holders: usize) {
    if !linerate_bed::privileges::require(test) {
        return;
    }
    let _one = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let bed = bed(shaper.as_str(), shaper);
    assert_eq!(rates_now(&bed), vec![M100; holders]);
    sweep_two_rates(&bed);
    assert_eq!(rates_now(&bed), vec![M100; holders], "restored");
    // The emulator's control file goes with the bed.
    let dir = Path::new(linerate_bed::state::STATE_DIR);
    let control = emulator::control_path(dir, bed.name());
    assert_eq!(control.exists(), shaper == Shaper::Emu);
    drop(bed);
    assert!(!control.exists(), "{} left", control.display());
}

#[test]
fn a_tbf_bed_runs_each_point_at_its_rate_and_is_restored() {
    // Both hosts' tbf and the record.
    each_point_at_its_rate_then_restored(
        "a_tbf_bed_runs_each_point_at_its_rate_and_is_restored",
        Shaper::Tbf,
        3,
    );
}

#[test]
fn an_emulated_bed_runs_each_point_at_its_rate_and_is_restored() {
    // Host tbfs (back-pressure), the record, the emulator's two directions.
    each_point_at_its_rate_then_restored(
        "an_emulated_bed_runs_each_point_at_its_rate_and_is_restored",
        Shaper::Emu,
        5,
    );
}

#[test]
fn latency_runs_each_point_on_its_wire_and_its_own_account() {
    if !linerate_bed::privileges::require("latency_runs_each_point_on_its_wire_and_its_own_account")
    {
        return;
    }
    let _one = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let bed = bed("l", Shaper::Emu);
    let o = linerate(&[
        "latency",
        "--bed",
        bed.name(),
        "--size",
        "18",
        "--count",
        "40",
        "--sweep",
        "link=10M,100M",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bed set (read back): link 10 Mbit/s"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {err}\n{}", String::from_utf8_lossy(&o.stdout)));
    common::validate("linerate.latency", &v);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{err}");
    for (r, rate) in runs.iter().zip([M10, M100]) {
        assert_eq!(r["link_bits_per_s"], rate, "{r}");
        // 64-byte frames both ways: 2 × 84 wire bytes at the point's rate.
        let wire = r["wire_rtt_ns"].as_f64().unwrap();
        assert!(
            (wire - 2.0 * 84.0 * 8.0 * 1e9 / rate as f64).abs() < 1.0,
            "{wire}"
        );
        // No round trip is faster than its point's wire.
        let rtt = r["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["stage"] == "rtt");
        let min = rtt.map_or_else(|| panic!("no rtt stage: {r}"), |s| &s["min_ns"]);
        assert!(min.as_f64().unwrap() >= wire, "{min} < {wire}");
        // The run's own emulator account, at the point's rate.
        let account = &r["link_emulation"];
        assert_eq!(account["link_bits_per_s"], rate, "{account}");
        assert!(
            account["during"]["forwarded"].as_u64().unwrap() >= 80,
            "{account}"
        );
    }
    // The whole sweep's account has no one rate.
    let whole = &v["link_emulation"];
    assert!(whole["link_bits_per_s"].is_null(), "{whole}");
    assert!(
        whole["during"]["forwarded"].as_u64().unwrap() >= 160,
        "{whole}"
    );
    assert_eq!(rates_now(&bed), [M100; 5], "restored");
}

#[test]
fn rfc2544_takes_each_points_rate_as_its_line_rate() {
    if !linerate_bed::privileges::require("rfc2544_takes_each_points_rate_as_its_line_rate") {
        return;
    }
    let _one = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let bed = bed("r", Shaper::Tbf);
    let o = linerate(&[
        "rfc2544",
        "--bed",
        bed.name(),
        "--generator",
        "packet",
        "--tests",
        "single",
        "--frames",
        "1518",
        "--trial",
        "300ms",
        "--drain",
        "100ms",
        "--ceiling-time",
        "200ms",
        "--sweep",
        "link=10M,100M",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {err}\n{}", String::from_utf8_lossy(&o.stdout)));
    common::validate("linerate.rfc2544", &v);
    let sizes = v["sizes"].as_array().unwrap();
    assert_eq!(sizes.len(), 2, "{err}");
    for (s, rate) in sizes.iter().zip([M10, M100]) {
        // 1518-byte frames take 1538 bytes of wire at the point's rate.
        let line = rate as f64 / (1538.0 * 8.0);
        let got = s["line_rate_frames_per_s"].as_f64().unwrap();
        assert!(
            (got - line).abs() < 1.0,
            "{}: {got} against {line}",
            s["settings"]
        );
    }
    let whole = &v["link_emulation"];
    assert_eq!(whole["shaper"], "tbf", "{whole}");
    assert!(whole["link_bits_per_s"].is_null(), "{whole}");
    assert_eq!(rates_now(&bed), [M100; 3], "restored");
    // The point's rate is the line rate: one given too would hide it.
    let o = linerate(&[
        "rfc2544",
        "--bed",
        bed.name(),
        "--link",
        "1G",
        "--sweep",
        "link=10M",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("conflicts with --link"));
}

#[test]
fn sigint_mid_point_restores_the_link() {
    if !linerate_bed::privileges::require("sigint_mid_point_restores_the_link") {
        return;
    }
    let _one = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let bed = bed("i", Shaper::Emu);
    let mut child = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "throughput",
            "--bed",
            bed.name(),
            "--udp",
            "--time",
            "20",
            "--sweep",
            "link=10M",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (at most 20 s) until every holder of the rate says 10M.
    let t0 = Instant::now();
    while rates_now(&bed) != [M10; 5] {
        assert!(t0.elapsed() < Duration::from_secs(20), "never set");
        assert!(child.try_wait().unwrap().is_none(), "ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let status = common::interrupt(&mut child, Duration::from_secs(15));
    assert_eq!(rates_now(&bed), [M100; 5], "restored after SIGINT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bad_link_sweeps_are_usage_errors_before_anything_runs() {
    if !linerate_bed::privileges::require("bad_link_sweeps_are_usage_errors_before_anything_runs") {
        return;
    }
    // A bed without a shaped link, and one with.
    let bare = Bed::up(&BedSpec::new(
        format!("k{}b", std::process::id()),
        Topology::Pair,
    ))
    .expect("bed up");
    let shaped = bed("u", Shaper::Tbf);
    for (bed, args, says) in [
        (
            &shaped,
            &["--sweep", "link=fast"][..],
            "--sweep: link: 'fast' is not a number",
        ),
        (
            &shaped,
            &["--sweep", "link=10"],
            "outside 1 kbit/s to 1 Tbit/s",
        ),
        (
            &shaped,
            &["--sweep", "link=10M", "--link", "1G"],
            "link: a link rate is given",
        ),
        (&bare, &["--sweep", "link=10M"], "has no shaped link"),
    ] {
        let mut argv = vec!["throughput", "--bed", bed.name(), "--udp", "--time", "1"];
        argv.extend_from_slice(args);
        let o = linerate(&argv);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: nothing ran");
    }
    assert_eq!(rates_now(&shaped), [M100; 3]);
}
