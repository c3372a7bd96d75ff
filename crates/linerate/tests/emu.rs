//! The link emulator end to end on beds (privileged; skips loudly without
//! root): it starts and stops with the bed and leaves nothing after
//! `down`, SIGINT during bring-up, a panic, or a killed owner + sweep; the
//! gap between frames at the receiver is their wire time; the queue limit
//! drops and counts; loss, duplication and reordering counted within
//! statistical bounds; a flood it cannot carry is flagged
//! `emulator_limited`; an MTU raised by a sweep is forwarded whole.
#![allow(clippy::unwrap_used)]

use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use linerate_bed::{emulator, Bed, BedSpec, Topology};
use linerate_core::emu::{Counters, Shaper};
use linerate_core::units::BitRate;

fn linerate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("the linerate binary runs")
}

fn name(tag: &str) -> String {
    format!("e{}-{tag}", std::process::id())
}

fn netns_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

fn emulators_of(bed: &str) -> Vec<u32> {
    emulator::find(|b| b == bed)
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// Nothing of bed `n` is left: no namespace, emulator or file.
fn assert_gone(n: &str) {
    for role in ["a", "b", "link"] {
        assert!(!netns_exists(&format!("lr-{n}-{role}")), "{n} {role}");
    }
    assert!(emulators_of(n).is_empty(), "emulator of {n} still runs");
    let dir = Path::new(linerate_bed::state::STATE_DIR);
    for f in [format!("{n}.json"), format!("{n}.emu.stats")] {
        assert!(!dir.join(&f).exists(), "{f} left");
    }
}

fn privileged(test: &str) -> bool {
    linerate_bed::privileges::require(test)
}

/// Sweeps bed `n` (and its emulator) when dropped, also when an assertion
/// fails midway.
struct Swept(String);

impl Drop for Swept {
    fn drop(&mut self) {
        let _ = linerate(&["testbed", "sweep", "--prefix", &self.0]);
    }
}

/// Brings bed `n` up through the binary; the guard sweeps it.
#[must_use]
fn up(n: &str, extra: &[&str]) -> Swept {
    let swept = Swept(n.to_string());
    // The emulator even where its last measured limit would choose tbf.
    let mut args = vec!["testbed", "up", n, "--topo", "pair", "--shaper", "emu"];
    args.extend_from_slice(extra);
    let o = linerate(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    swept
}

fn stats(n: &str) -> Counters {
    let p = emulator::stats_path(Path::new(linerate_bed::state::STATE_DIR), n);
    let after = linerate_io::emu::now_mono_ns();
    let s = linerate_io::emu::read_stats_after(&p, after, Duration::from_secs(1)).unwrap();
    s.cables[0].west_to_east
}

/// Sends `count` UDP datagrams of `size` bytes from host a to host b's
/// port 9 (discard) as fast as the socket takes them, `gap` apart.
fn send_from_a(n: &str, count: usize, size: usize, gap: Duration) {
    let ns = format!("lr-{n}-a");
    let h = linerate_io::netns::spawn_in(Some(&ns), "lr-test-tx", move || {
        let s = UdpSocket::bind("198.18.0.1:0").unwrap();
        let buf = vec![0x5au8; size];
        for _ in 0..count {
            let _ = s.send_to(&buf, "198.18.0.2:9");
            if !gap.is_zero() {
                std::thread::sleep(gap);
            }
        }
    })
    .unwrap();
    h.join().unwrap().unwrap();
}

#[test]
fn the_emulator_lives_and_dies_with_the_bed() {
    if !privileged("the_emulator_lives_and_dies_with_the_bed") {
        return;
    }
    // testbed up / show / down.
    let n = name("life");
    let _swept = up(&n, &["--link", "100M"]);
    assert_eq!(emulators_of(&n).len(), 1);
    let o = linerate(&["testbed", "show", &n]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("shaper emu") && out.contains("emulator limit"),
        "{out}"
    );
    // It measured its own delivery to host a at start and sends that far
    // ahead: the fastest of each size, no more than their medians, and
    // within what a veth hop can take.
    let p = emulator::stats_path(Path::new(linerate_bed::state::STATE_DIR), &n);
    let d = linerate_io::emu::read_stats(&p)
        .unwrap()
        .timing
        .and_then(|t| t.delivery)
        .expect("the delivery time measured at start");
    assert!(d.samples >= 20, "{d:?}");
    assert!(
        d.small_min_ns <= d.small_p50_ns && d.large_min_ns <= d.large_p50_ns,
        "{d:?}"
    );
    assert!(d.lead_ns() > 0 && d.lead_ns() < 1_000_000, "{d:?}");
    assert!(out.contains("ahead of each due time"), "{out}");
    let o = linerate(&["testbed", "down", &n]);
    assert!(o.status.success());
    assert_gone(&n);

    // The owner gone without teardown (as after SIGKILL): sweep stops it.
    let n = name("kill");
    let _swept = up(&n, &["--link", "100M"]);
    let o = linerate(&["testbed", "sweep", "--prefix", &n]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("stopped link emulator"));
    assert_gone(&n);

    // SIGINT while the emulator measures its limit: all rolled back.
    let n = name("int");
    let _int = Swept(n.clone());
    let mut child = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "testbed", "up", &n, "--topo", "pair", "--link", "100M", "--shaper", "emu",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let begun = Instant::now();
    while emulators_of(&n).is_empty() && begun.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = child.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let status = child.wait().unwrap();
    assert!(matches!(status.code(), Some(130) | Some(0)), "{status}");
    if status.code() == Some(0) {
        // Bring-up finished before the signal: the bed is up; remove it.
        linerate(&["testbed", "down", &n]);
    }
    assert_gone(&n);

    // A panic while an owning Bed is alive: the unwind removes it all.
    emulator::use_exe(env!("CARGO_BIN_EXE_linerate"));
    let n = name("panic");
    let _panic = Swept(n.clone());
    let mut spec = BedSpec::new(n.clone(), Topology::Pair);
    spec.link = Some(BitRate::from_mbps(100));
    spec.shaper = Shaper::Emu;
    let r = std::panic::catch_unwind(|| {
        let _bed = Bed::up(&spec).unwrap();
        assert_eq!(emulators_of(&spec.name).len(), 1);
        panic!("on purpose");
    });
    assert!(r.is_err());
    assert_gone(&n);
}

#[test]
fn a_polling_emulator_forwards_every_frame_and_says_so() {
    if !privileged("a_polling_emulator_forwards_every_frame_and_says_so") {
        return;
    }
    let n = name("poll");
    let _swept = up(&n, &["--link", "1G", "--emu-poll"]);
    let before = stats(&n);
    send_from_a(&n, 200, 18, Duration::from_micros(100));
    std::thread::sleep(Duration::from_millis(100));
    let c = stats(&n).since(&before);
    // The 200 datagrams, and whatever else host a sent (ARP, ND).
    assert!(c.arrived >= 200, "{c:?}");
    assert_eq!(c.forwarded, c.arrived, "{c:?}");
    // Its stats and every result measured through it say how it waited.
    let p = emulator::stats_path(Path::new(linerate_bed::state::STATE_DIR), &n);
    let timing = linerate_io::emu::read_stats(&p).unwrap().timing.unwrap();
    assert!(timing.polls, "{timing:?}");
    let o = linerate(&["latency", "--bed", &n, "-c", "200", "--no-save"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let words = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("it polled between frames"), "{out}");
}

#[test]
fn departures_are_spaced_by_their_wire_time_and_the_queue_limit_drops() {
    if !privileged("departures_are_spaced_by_their_wire_time_and_the_queue_limit_drops") {
        return;
    }
    let n = name("wire");
    // 10 Mbit/s: a 1514-byte frame (1472 B of UDP payload) takes
    // 1538 × 8 / 10 Mbit/s = 1230.4 µs on the wire, far above the timer
    // resolution and the VM's wake-up noise.
    let _swept = up(&n, &["--link", "10M", "--limit", "20p"]);
    let before = stats(&n);
    send_from_a(&n, 60, 1472, Duration::ZERO);
    std::thread::sleep(Duration::from_millis(200));
    let c = stats(&n).since(&before);
    // A burst of 60 into a queue of 20: the tail dropped and counted, the
    // rest forwarded; every arrival is one or the other.
    assert!(c.queue_drops > 0, "{c:?}");
    assert_eq!(c.arrived, c.forwarded + c.queue_drops + c.lost, "{c:?}");
    // The emulator's own clock: each departure on time (its late counter),
    // and the forwarded frames took their wire time each.
    let after_burst = stats(&n);
    let ns = format!("lr-{n}-b");
    let (tx, rx) = std::sync::mpsc::channel();
    let h = linerate_io::netns::spawn_in(Some(&ns), "lr-test-rx", move || {
        let s = UdpSocket::bind("198.18.0.2:7001").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        // Kernel receive stamps: when each frame reached host b's socket,
        // not when this thread woke (a loaded host wakes it late and reads
        // the queued frames at once).
        linerate_io::stamps::enable_rx_stamps(&s).unwrap();
        tx.send(()).unwrap();
        let mut buf = [0u8; 2048];
        let mut times = Vec::new();
        while times.len() < 15 {
            match linerate_io::stamps::recv_stamped(&s, &mut buf) {
                Ok((_, stamp)) => times.push(stamp.expect("a kernel receive stamp")),
                Err(_) => break,
            }
        }
        times
    })
    .unwrap();
    rx.recv().unwrap();
    let ns_a = format!("lr-{n}-a");
    linerate_io::netns::spawn_in(Some(&ns_a), "lr-test-tx", || {
        let s = UdpSocket::bind("198.18.0.1:0").unwrap();
        for _ in 0..15 {
            s.send_to(&[0u8; 1472], "198.18.0.2:7001").unwrap();
        }
    })
    .unwrap()
    .join()
    .unwrap()
    .unwrap();
    let times = h.join().unwrap().unwrap();
    assert_eq!(times.len(), 15);
    // 14 gaps of one wire time: the span, within 10 % (a wake-up of the
    // receiving thread at either end) plus the lateness the emulator
    // itself reports (a late departure sends the frames due behind it at
    // once; results flag that as emulator_limited).
    let late = stats(&n).since(&after_burst).late_max_ns as f64 / 1e9;
    let span = times[14].saturating_sub(times[0]) as f64 / 1e9;
    let wire = 1538.0 * 8.0 / 10e6;
    assert!(
        (span - 14.0 * wire).abs() < 1.4 * wire + late,
        "span {span} s for 14 × {wire} s (emulator late by up to {late} s)"
    );
    linerate(&["testbed", "down", &n]);
    assert_gone(&n);
}

#[test]
fn impairments_are_counted_within_statistical_bounds() {
    if !privileged("impairments_are_counted_within_statistical_bounds") {
        return;
    }
    let n = name("imp");
    let _swept = up(
        &n,
        &[
            "--loss",
            "10",
            "--duplicate",
            "10",
            "--reorder",
            "20",
            "--delay",
            "1ms",
        ],
    );
    let before = stats(&n);
    send_from_a(&n, 2000, 100, Duration::from_micros(100));
    // The emulator may still be working through the burst (on a loaded
    // host it fell 20 ms behind and had counted 1752 of 2000 at a fixed
    // 200 ms): wait until every datagram arrived and everything due left,
    // for at most 5 s.
    let until = Instant::now() + Duration::from_secs(5);
    let c = loop {
        std::thread::sleep(Duration::from_millis(100));
        let c = stats(&n).since(&before);
        let settled = c.arrived >= 2000 && c.forwarded == c.arrived - c.lost + c.duplicated;
        if settled || Instant::now() >= until {
            break c;
        }
    };
    // Within 5 standard deviations of n·p.
    let within = |count: u64, n: u64, p: f64| {
        let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
        assert!(
            (count as f64 - mean).abs() < 5.0 * sd,
            "{count} of {n} (p {p}): {c:?}"
        );
    };
    assert!(c.arrived >= 2000, "{c:?}");
    within(c.lost, c.arrived, 0.10);
    within(c.duplicated, c.arrived - c.lost, 0.10);
    within(c.reordered, c.arrived - c.lost + c.duplicated, 0.20);
    assert_eq!(c.forwarded, c.arrived - c.lost + c.duplicated, "{c:?}");
    linerate(&["testbed", "down", &n]);
    assert_gone(&n);
}

#[test]
fn a_flood_the_emulator_cannot_carry_is_flagged_emulator_limited() {
    if !privileged("a_flood_the_emulator_cannot_carry_is_flagged_emulator_limited") {
        return;
    }
    let n = name("flood");
    let _swept = up(&n, &["--link", "10G"]);
    // Unpaced 64-byte UDP frames at 10 Gbit/s: far more than it forwards.
    // It may exit 1 (the loss makes the figures untrustworthy): the
    // document is printed either way.
    let o = linerate(&[
        "throughput",
        "--bed",
        &n,
        "--udp",
        "--size",
        "18",
        "--time",
        "2",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("a JSON document");
    let codes: Vec<&str> = v["flags"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert!(codes.contains(&"emulator_limited"), "{codes:?}");
    assert_eq!(v["link_emulation"]["shaper"], "emu", "{v}");
    assert!(v["link_emulation"]["during"]["arrived"].as_u64().unwrap() > 0);
    linerate(&["testbed", "down", &n]);
    assert_gone(&n);
}

#[test]
fn each_send_path_run_gets_its_own_link_account() {
    if !privileged("each_send_path_run_gets_its_own_link_account") {
        return;
    }
    let n = name("paths");
    let _swept = up(&n, &["--link", "100M"]);
    // Two paths, one after the other: each run's counters are its own
    // test's, not the sum of both.
    let o = linerate(&[
        "throughput",
        "--bed",
        &n,
        "--udp",
        "--size",
        "1472",
        "--path",
        "ideal,mmsg",
        "--time",
        "1",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect(&err);
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{v}");
    let arrived: Vec<u64> = runs
        .iter()
        .map(|r| {
            assert_eq!(r["link_emulation"]["shaper"], "emu", "{r}");
            r["link_emulation"]["during"]["arrived"]
                .as_u64()
                .expect("counted")
        })
        .collect();
    // Every cable and direction over the bed's life: at least both runs',
    // and each run saw less than the whole.
    let p = emulator::stats_path(Path::new(linerate_bed::state::STATE_DIR), &n);
    let after = linerate_io::emu::now_mono_ns();
    let total = linerate_io::emu::read_stats_after(&p, after, Duration::from_secs(1))
        .unwrap()
        .total()
        .arrived;
    assert!(arrived.iter().all(|a| *a > 0), "{arrived:?}");
    assert!(arrived.iter().sum::<u64>() <= total, "{arrived:?} {total}");
    assert!(arrived.iter().all(|a| *a < total), "{arrived:?} {total}");
    linerate(&["testbed", "down", &n]);
    assert_gone(&n);
}

#[test]
fn an_mtu_raised_by_a_sweep_is_forwarded_whole_and_frame_offloads_are_refused() {
    if !privileged("an_mtu_raised_by_a_sweep_is_forwarded_whole_and_frame_offloads_are_refused") {
        return;
    }
    let n = name("mtu");
    let _swept = up(&n, &["--link", "1G"]);
    // The bed comes up at MTU 1500; the 9000 point's jumbo datagrams must
    // pass the emulator whole (its receive slots follow the MTU), not cut
    // to 1500-byte slots and lost.
    let o = linerate(&[
        "throughput",
        "--bed",
        &n,
        "--udp",
        "--size",
        "8972",
        "--rate",
        "200M",
        "--sweep",
        "mtu=1500,9000",
        "--time",
        "1",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect(&err);
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{v}");
    let jumbo = &runs[1];
    assert_eq!(jumbo["path"]["mtu_bytes"], 9000, "{jumbo}");
    assert_eq!(jumbo["link_emulation"]["during"]["truncated"], 0, "{jumbo}");
    let dirs = jumbo["figures"]["directions"]
        .as_array()
        .expect("directions");
    let count = |role: &str| {
        dirs.iter()
            .find(|d| d["role"] == role)
            .and_then(|d| d["packets"].as_u64())
            .expect(role)
    };
    let (sent, received) = (count("sender"), count("receiver"));
    assert!(sent > 1000, "{jumbo}");
    assert!(received * 100 >= sent * 99, "{received} of {sent}: {jumbo}");
    let codes: Vec<&str> = v["flags"]
        .as_array()
        .expect("flags")
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert!(!codes.contains(&"emulator_truncated"), "{codes:?}");
    // Checksum and segmentation offloads would hand the emulator unfinished
    // frames: refused before anything runs, one line, exit 2.
    let o = linerate(&[
        "throughput",
        "--bed",
        &n,
        "--sweep",
        "tx-checksum=on,off",
        "--time",
        "1",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("link emulator") && err.lines().count() == 1,
        "{err}"
    );
    linerate(&["testbed", "down", &n]);
    assert_gone(&n);
}
