//! End-to-end: beds really come up in network namespaces, their hosts reach
//! each other (linerate's own UDP probe, no ping), every setting reads back,
//! and nothing is left behind — also after a panic. Needs root and `ip`;
//! skips loudly otherwise (fails with LINERATE_REQUIRE_PRIV=1).
#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;
use std::time::Duration;

use linerate_bed::{privileges, run_command, Bed, BedSpec, Topology};
use linerate_io::netns::spawn_in;

/// A bed name unique to this process and test: `e<pid>-<tag>`.
fn name(tag: &str) -> String {
    format!("e{}-{tag}", std::process::id())
}

fn netns_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

/// Sends UDP datagrams from host `from` to host `to`'s address `dst` until
/// one arrives (at most 40 tries, 100 ms apart); returns the payload received.
fn udp_probe(bed: &Bed, from: &str, to: &str, dst: IpAddr) -> Vec<u8> {
    let rx_ns = bed.netns(to).unwrap().to_string();
    let tx_ns = bed.netns(from).unwrap().to_string();
    let bind: SocketAddr = (dst, 0).into();
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done_rx = done.clone();
    let rx = spawn_in(Some(&rx_ns), "rx", move || {
        let s = UdpSocket::bind(bind).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        port_tx.send(s.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 64];
        let got = s.recv_from(&mut buf).map(|(n, _)| buf[..n].to_vec());
        done_rx.store(true, std::sync::atomic::Ordering::SeqCst);
        got.expect("a datagram arrives")
    })
    .unwrap();
    let target = port_rx.recv().unwrap();
    let tx = spawn_in(Some(&tx_ns), "tx", move || {
        let unspecified: SocketAddr = if target.is_ipv4() {
            "0.0.0.0:0".parse().unwrap()
        } else {
            "[::]:0".parse().unwrap()
        };
        let s = UdpSocket::bind(unspecified).unwrap();
        for _ in 0..40 {
            if done.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            let _ = s.send_to(b"linerate-probe", target);
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .unwrap();
    let got = rx.join().unwrap().unwrap();
    tx.join().unwrap().unwrap();
    got
}

fn assert_reach(bed: &Bed) {
    for (from, to) in [("a", "b"), ("b", "a")] {
        let v4 = IpAddr::V4(bed.ipv4(to).unwrap());
        assert_eq!(
            udp_probe(bed, from, to, v4),
            b"linerate-probe",
            "{from}->{to} v4"
        );
        let v6 = IpAddr::V6(bed.ipv6(to).unwrap());
        assert_eq!(
            udp_probe(bed, from, to, v6),
            b"linerate-probe",
            "{from}->{to} v6"
        );
    }
}

fn assert_gone(spec_name: &str) {
    for role in ["a", "b", "dut"] {
        let ns = format!("lr-{spec_name}-{role}");
        assert!(!netns_exists(&ns), "{ns} left behind");
    }
    assert!(
        !Path::new("/run/linerate/beds")
            .join(format!("{spec_name}.json"))
            .exists(),
        "state file left behind"
    );
    let links = run_command(&["ip".into(), "-o".into(), "link".into()]).unwrap();
    assert!(
        !links.contains(&format!("lr-{spec_name}")),
        "root link left behind"
    );
}

#[test]
fn pair_comes_up_reaches_and_goes_away() {
    if !privileges::require("pair_comes_up_reaches_and_goes_away") {
        return;
    }
    let n = name("pair");
    let spec = BedSpec::new(n.clone(), Topology::Pair);
    let bed = Bed::up(&spec).unwrap();
    assert_eq!(bed.netns("a"), Some(format!("lr-{n}-a").as_str()));
    assert_eq!(bed.ipv4("b").unwrap().to_string(), "198.18.0.2");
    assert_eq!(bed.iface("a"), Some("lr-a"));
    assert!(netns_exists(&format!("lr-{n}-a")));
    // another process's view
    let view = Bed::open(&n).unwrap();
    assert!(!view.is_owning());
    assert_eq!(view.ipv6("a").unwrap().to_string(), "2001:2::1");
    drop(view);
    assert!(
        netns_exists(&format!("lr-{n}-a")),
        "a view tore the bed down"
    );
    assert_reach(&bed);
    // the same bed twice is an error, and leaves the first intact
    let e = Bed::up(&spec).unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    assert!(netns_exists(&format!("lr-{n}-b")));
    drop(bed);
    assert_gone(&n);
}
