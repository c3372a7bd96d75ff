//! End-to-end: beds really come up in network namespaces, their hosts reach
//! each other (linerate's own UDP probe, no ping), every setting reads back,
//! and nothing is left behind — also after a panic. Needs root and `ip`;
//! skips loudly otherwise (fails with LINERATE_REQUIRE_PRIV=1).
#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;
use std::time::Duration;

use linerate_bed::{privileges, run_command, run_dump, Bed, BedSpec, Topology};
use linerate_core::units::BitRate;
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
    let links = run_dump(&["ip".into(), "-o".into(), "link".into()]).unwrap();
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

#[test]
fn bridge_comes_up_reaches_and_goes_away() {
    if !privileges::require("bridge_comes_up_reaches_and_goes_away") {
        return;
    }
    let n = name("br");
    let mut spec = BedSpec::new(n.clone(), Topology::Bridge);
    spec.mtu = Some(1500);
    let bed = Bed::up(&spec).unwrap();
    assert_eq!(bed.netns("dut"), Some(format!("lr-{n}-dut").as_str()));
    assert_eq!(bed.iface("dut"), Some("lr-br"));
    let ports = run_command(&[
        "ip".into(),
        "-n".into(),
        format!("lr-{n}-dut"),
        "-o".into(),
        "link".into(),
        "show".into(),
        "master".into(),
        "lr-br".into(),
    ])
    .unwrap();
    assert!(
        ports.contains("lr-dut-a") && ports.contains("lr-dut-b"),
        "{ports}"
    );
    assert_reach(&bed);
    bed.down().unwrap();
    assert_gone(&n);
}

#[test]
fn router_comes_up_forwards_and_goes_away() {
    if !privileges::require("router_comes_up_forwards_and_goes_away") {
        return;
    }
    let n = name("rt");
    let spec = BedSpec::new(n.clone(), Topology::Router);
    let bed = Bed::up(&spec).unwrap();
    assert_eq!(bed.ipv4("b").unwrap().to_string(), "198.19.0.1");
    assert_eq!(bed.ipv6("b").unwrap().to_string(), "2001:2:0:1::1");
    let fwd = run_command(&[
        "ip".into(),
        "netns".into(),
        "exec".into(),
        format!("lr-{n}-dut"),
        "sysctl".into(),
        "-n".into(),
        "net.ipv4.ip_forward".into(),
        "net.ipv6.conf.all.forwarding".into(),
    ])
    .unwrap();
    assert_eq!(fwd.split_whitespace().collect::<Vec<_>>(), ["1", "1"]);
    assert_reach(&bed);
    drop(bed);
    assert_gone(&n);
}

#[test]
fn every_setting_is_applied_and_read_back() {
    if !privileges::require("every_setting_is_applied_and_read_back") {
        return;
    }
    let n = name("set");
    let mut spec = BedSpec::new(n.clone(), Topology::Router);
    spec.link = Some(BitRate::from_mbps(100));
    spec.mtu = Some(9000);
    spec.loss_pct = Some(1.0);
    spec.offloads = "tx-checksum=off,rx-checksum=on".parse().unwrap();
    spec.rps = true;
    spec.tcp_rmem = Some("4096,262144,8388608".parse().unwrap());
    spec.tcp_wmem = Some("4096,65536,4194304".parse().unwrap());
    let bed = Bed::up(&spec).unwrap(); // Bed::up verifies each read-back itself
    assert_eq!(bed.link(), Some(BitRate::from_mbps(100)));
    assert!(bed.notes().iter().any(|n| n.contains("gso")));
    // Independent checks of a sample of the settings.
    let ns_a = bed.netns("a").unwrap().to_string();
    let q = run_command(&[
        "tc".into(),
        "-n".into(),
        format!("lr-{n}-dut"),
        "-d".into(),
        "qdisc".into(),
        "show".into(),
        "dev".into(),
        "lr-dut-b".into(),
    ])
    .unwrap();
    assert!(
        q.contains("tbf") && q.contains("rate 100Mbit") && q.contains("overhead 24"),
        "{q}"
    );
    let l = run_command(&[
        "ip".into(),
        "-n".into(),
        ns_a.clone(),
        "link".into(),
        "show".into(),
        "lr-a".into(),
    ])
    .unwrap();
    assert!(l.contains("mtu 9000"), "{l}");
    let k = run_command(&[
        "ip".into(),
        "netns".into(),
        "exec".into(),
        ns_a.clone(),
        "ethtool".into(),
        "-k".into(),
        "lr-a".into(),
    ])
    .unwrap();
    for want in [
        "tx-checksumming: off",
        "generic-segmentation-offload: off",
        "tcp-segmentation-offload: off",
        "tx-udp-segmentation: off",
        "generic-receive-offload: off",
    ] {
        assert!(k.contains(want), "{want} in {k}");
    }
    let rmem = run_command(&[
        "ip".into(),
        "netns".into(),
        "exec".into(),
        format!("lr-{n}-b"),
        "sysctl".into(),
        "-n".into(),
        "net.ipv4.tcp_rmem".into(),
    ])
    .unwrap();
    assert_eq!(
        rmem.split_whitespace().collect::<Vec<_>>(),
        ["4096", "262144", "8388608"]
    );
    assert_reach(&bed); // through a shaped, lossy, jumbo router path
    drop(bed);
    assert_gone(&n);
}

/// The nftables rule really drops about the asked share (counted by its own
/// counter, so socket-buffer drops cannot blur it). 3000 datagrams at 10 %:
/// the bounds 5 %..15 % are more than 8 standard deviations away.
#[test]
fn loss_rule_drops_about_the_asked_share() {
    if !privileges::require("loss_rule_drops_about_the_asked_share") {
        return;
    }
    let n = name("loss");
    let mut spec = BedSpec::new(n.clone(), Topology::Pair);
    spec.loss_pct = Some(10.0);
    let bed = Bed::up(&spec).unwrap();
    let dst: SocketAddr = (IpAddr::V4(bed.ipv4("b").unwrap()), 9).into();
    spawn_in(bed.netns("a"), "tx", move || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        for _ in 0..3000 {
            let _ = s.send_to(b"x", dst);
        }
    })
    .unwrap()
    .join()
    .unwrap()
    .unwrap();
    let out = run_command(&[
        "ip".into(),
        "netns".into(),
        "exec".into(),
        bed.netns("b").unwrap().to_string(),
        "nft".into(),
        "list".into(),
        "table".into(),
        "netdev".into(),
        "lr_loss".into(),
    ])
    .unwrap();
    let dropped: u64 = out
        .split("counter packets ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("no counter in {out}"));
    assert!((150..=450).contains(&dropped), "dropped {dropped} of 3000");
}

#[test]
fn a_panic_inside_a_test_closure_removes_the_bed() {
    if !privileges::require("a_panic_inside_a_test_closure_removes_the_bed") {
        return;
    }
    let n = name("panic");
    let spec = BedSpec::new(n.clone(), Topology::Bridge);
    let result = std::panic::catch_unwind(|| {
        let bed = Bed::up(&spec).unwrap();
        assert!(netns_exists(bed.netns("dut").unwrap()));
        panic!("test failure inside the closure");
    });
    assert!(result.is_err());
    assert_gone(&n);
}

#[test]
fn a_setting_that_does_not_take_rolls_everything_back() {
    if !privileges::require("a_setting_that_does_not_take_rolls_everything_back") {
        return;
    }
    let n = name("fail");
    let mut spec = BedSpec::new(n.clone(), Topology::Router);
    // veth has no LRO ("off [fixed]"): ethtool refuses or the read-back fails.
    spec.offloads = "lro=on".parse().unwrap();
    let e = Bed::up(&spec).unwrap_err().to_string();
    assert!(e.contains("lro") || e.contains("large-receive"), "{e}");
    assert_gone(&n);
}

#[test]
fn sweep_with_a_prefix_removes_only_its_own_leftovers() {
    if !privileges::require("sweep_with_a_prefix_removes_only_its_own_leftovers") {
        return;
    }
    let mine = name("swp");
    let other = name("keep");
    let left = Bed::up(&BedSpec::new(mine.clone(), Topology::Pair)).unwrap();
    let kept = Bed::up(&BedSpec::new(other.clone(), Topology::Pair)).unwrap();
    let _record = left.keep(); // as a killed process would leave it
    let report = linerate_bed::sweep::sweep(Some(&mine)).unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.netns.len(), 2, "{report:?}");
    assert_eq!(report.files.len(), 1, "{report:?}");
    assert_gone(&mine);
    assert!(
        netns_exists(kept.netns("a").unwrap()),
        "sweep hit another bed"
    );
    drop(kept);
    assert_gone(&other);
}

#[test]
fn bad_input_is_a_clear_error_and_creates_nothing() {
    if !privileges::require("bad_input_is_a_clear_error_and_creates_nothing") {
        return;
    }
    for bad in ["Bad", "x/y", "waytoolongforabednamereally"] {
        let e = Bed::up(&BedSpec::new(bad, Topology::Pair)).unwrap_err();
        assert!(matches!(e, linerate_bed::BedError::Invalid(_)), "{e}");
    }
    let e = Bed::open(&name("nosuch")).unwrap_err();
    assert!(e.to_string().contains("no bed called"), "{e}");
}
