//! Fidelity of the emulated link (ignored: a measurement, not a unit test;
//! run with `cargo test -p linerate-bed --test fidelity -- --ignored --nocapture`).
//!
//! A `pair` bed with `--link 100M`; a UDP sender in `a` sends as fast as it
//! can, the frames that reach `b` are counted by b's veth `rx_packets`
//! (after a 1 s warm-up, over 3 s of CLOCK_MONOTONIC via `Instant`), and
//! compared with the line-rate model: 8,127 frames/s for 1472-byte payloads
//! (1518-byte frames) and 148,809 frames/s for 18-byte payloads (64-byte
//! frames). The generator's own ceiling is measured on an unshaped pair: if
//! it cannot offer the model's rate, the result says so instead of blaming
//! the shaper.
#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linerate_bed::{privileges, run_command, Bed, BedSpec, Topology};
use linerate_core::linerate::{Encap, Row};
use linerate_core::units::BitRate;
use linerate_io::netns::spawn_in;

fn rx_packets(ns: &str, dev: &str) -> u64 {
    let out =
        run_command(&["ip", "-n", ns, "-j", "-s", "link", "show", "dev", dev].map(String::from))
            .unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0]["stats64"]["rx"]["packets"].as_u64().unwrap()
}

/// (frames/s arriving at b, datagrams/s the sender got out)
fn blast(bed: &Bed, payload: usize) -> (f64, f64) {
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let dst: SocketAddr = (IpAddr::V4(bed.ipv4("b").unwrap()), 0).into();
    let (tx_port, rx_port) = std::sync::mpsc::channel();
    let stop_rx = stop.clone();
    let rx = spawn_in(bed.netns("b"), "sink", move || {
        let s = UdpSocket::bind(dst).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        tx_port.send(s.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 2048];
        while !stop_rx.load(Ordering::Relaxed) {
            let _ = s.recv(&mut buf);
        }
    })
    .unwrap();
    let target = rx_port.recv().unwrap();
    let (stop_tx, sent_tx) = (stop.clone(), sent.clone());
    let tx = spawn_in(bed.netns("a"), "gen", move || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        s.connect(target).unwrap();
        let buf = vec![0x5au8; payload];
        while !stop_tx.load(Ordering::Relaxed) {
            if s.send(&buf).is_ok() {
                sent_tx.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .unwrap();
    let (ns_b, dev_b) = (bed.netns("b").unwrap(), bed.iface("b").unwrap());
    std::thread::sleep(Duration::from_secs(1));
    let (r0, s0, t0) = (
        rx_packets(ns_b, dev_b),
        sent.load(Ordering::Relaxed),
        Instant::now(),
    );
    std::thread::sleep(Duration::from_secs(3));
    let (r1, s1, t1) = (
        rx_packets(ns_b, dev_b),
        sent.load(Ordering::Relaxed),
        Instant::now(),
    );
    stop.store(true, Ordering::Relaxed);
    tx.join().unwrap().unwrap();
    rx.join().unwrap().unwrap();
    let secs = (t1 - t0).as_secs_f64();
    ((r1 - r0) as f64 / secs, (s1 - s0) as f64 / secs)
}

#[test]
#[ignore = "a measurement: run explicitly"]
fn emulated_100m_link_matches_the_model() {
    if !privileges::require("emulated_100m_link_matches_the_model") {
        return;
    }
    let link = BitRate::from_mbps(100);
    let pid = std::process::id();
    let mut shaped = BedSpec::new(format!("f{pid}-s"), Topology::Pair);
    shaped.link = Some(link);
    let shaped = Bed::up(&shaped).unwrap();
    let free = Bed::up(&BedSpec::new(format!("f{pid}-u"), Topology::Pair)).unwrap();
    let mut failures = Vec::new();
    for payload in [1472u32, 18] {
        let frame = Encap::UDP4.frame_for_payload(payload, false).unwrap();
        let model = Row::new(link, frame).unwrap().frame_rate.per_s();
        let (capacity, _) = blast(&free, payload as usize);
        let (got, offered) = blast(&shaped, payload as usize);
        let ratio = got / model;
        let limited = capacity < model * 1.01;
        println!(
            "{} B frames ({payload} B UDP payload): model {:.0} frames/s, measured {:.0} \
             frames/s at b (ratio {:.4}); sender {:.0}/s shaped, {:.0}/s unshaped{}",
            frame.frame_bytes,
            model,
            got,
            ratio,
            offered,
            capacity,
            if limited {
                " -> GENERATOR-LIMITED: this host cannot offer the model's rate"
            } else {
                ""
            }
        );
        if ratio > 1.005 || (!limited && ratio < 0.995) {
            failures.push(format!("{} B frames: ratio {ratio:.4}", frame.frame_bytes));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}
