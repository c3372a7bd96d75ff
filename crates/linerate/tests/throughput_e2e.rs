//! End-to-end: `linerate server` and `linerate throughput` engines across a
//! veth pair between two namespaces that the test creates and always
//! removes (the bed's guard). Server in namespace `b`, client in `a`, both
//! on threads of this process. Correctness only: byte counts agree between
//! the ends, TCP loses nothing, sequence accounting adds up.
//! Needs root and `ip`; skips loudly otherwise (fails with
//! LINERATE_REQUIRE_PRIV=1).
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use linerate_bed::{privileges, Bed, BedSpec, Topology};
use linerate_core::throughput::model::{
    Direction, FlowDir, FlowRole, Protocol, RecvPath, SendPath, SideReport, ThroughputParams,
};
use linerate_io::netns::spawn_in;
use linerate_io::throughput::client;
use linerate_io::throughput::server::{Server, ServerConfig};

fn params(protocol: Protocol, direction: Direction, streams: u16) -> ThroughputParams {
    ThroughputParams {
        protocol,
        direction,
        streams,
        duration_ns: 300_000_000,
        size_bytes: if protocol == Protocol::Udp {
            1200
        } else {
            64 * 1024
        },
        rate_bits_per_s: (protocol == Protocol::Udp).then_some(40_000_000),
        interval_ns: 100_000_000,
        ..ThroughputParams::default()
    }
}

fn agree(sender: &SideReport, receiver: &SideReport, dir: FlowDir, tcp: bool) {
    let mut n = 0;
    for t in sender
        .flows
        .iter()
        .filter(|f| f.direction == dir && f.role == FlowRole::Sender)
    {
        n += 1;
        let r = receiver.flows.iter().find(|f| f.flow == t.flow).unwrap();
        let c = r.recv.unwrap();
        assert!(t.packets > 0);
        assert_eq!(c.corrupt, 0);
        assert_eq!(c.seq.duplicates, 0);
        assert_eq!(c.seq.expected, t.packets, "flow {}", t.flow);
        assert_eq!(c.seq.received_unique + c.seq.lost, t.packets);
        if tcp {
            assert_eq!(r.bytes, t.bytes);
            assert_eq!(c.seq.lost, 0);
            assert_eq!(c.seq.reordered, 0);
            // Both kernels' data-segment counts cover every byte at the
            // sender's MSS (the sender counts after its queue drained).
            // The sender saw its last byte acknowledged, after its last write.
            let acked = t.acked_ns.expect("TCP sender's acknowledgement time");
            assert!(
                acked >= t.elapsed_ns,
                "acked {acked} < elapsed {}",
                t.elapsed_ns
            );
            let mss = u64::from(t.mss_bytes.unwrap());
            // The sender's count covers every byte at its MSS. The
            // receiver's is a lower bound on veth: when GRO merges skbs that
            // are already GSO super-packets (a TSO sender on the other end),
            // the merged skb's gso_segs is the number of skbs merged, not of
            // segments, so tcpi_data_segs_in can fall short (seen under load
            // with four bidirectional streams).
            let segs = t.tcp_segments.expect("TCP_INFO segment count");
            assert!(
                segs * mss >= t.bytes && segs <= t.bytes,
                "flow {} sender: {segs} segments for {} bytes at MSS {mss}",
                t.flow,
                t.bytes
            );
            let segs = r.tcp_segments.expect("TCP_INFO segment count");
            assert!(
                segs > 0 && segs <= r.bytes,
                "flow {} receiver: {segs} segments for {} bytes",
                t.flow,
                r.bytes
            );
        }
    }
    assert!(n > 0);
}

#[test]
fn throughput_over_a_veth_pair() {
    if !privileges::require("throughput_over_a_veth_pair") {
        return;
    }
    let bed = Bed::up(&BedSpec::new(
        format!("t{}", std::process::id()),
        Topology::Pair,
    ))
    .unwrap();
    let ns_a = bed.netns("a").unwrap().to_string();
    let ns_b = bed.netns("b").unwrap().to_string();
    let ip_b = bed.ipv4("b").unwrap();

    let (tx, rx) = std::sync::mpsc::channel();
    let server = spawn_in(Some(&ns_b), "lr-e2e-server", move || {
        let s = Server::bind(ServerConfig {
            bind: SocketAddr::new(ip_b.into(), 0),
            once: false,
            max_clients: 2,
            max_duration: Some(Duration::from_secs(30)),
            log: std::sync::Arc::new(|s: &str| eprintln!("server: {s}")),
            limits: linerate_io::throughput::server::Limits::default(),
            access: linerate_io::throughput::server::Access::Anyone,
            iperf3: None,
        })
        .unwrap();
        tx.send((s.local_addr().unwrap(), s.stop_flag())).unwrap();
        s.run().unwrap();
    })
    .unwrap();
    let (addr, stop) = rx.recv_timeout(Duration::from_secs(10)).unwrap();

    let mut cases = Vec::new();
    for proto in [Protocol::Tcp, Protocol::Udp] {
        for dir in [Direction::Forward, Direction::Reverse, Direction::Bidir] {
            cases.push(params(proto, dir, 1));
        }
        cases.push(params(proto, Direction::Bidir, 4));
    }
    for path in [SendPath::Typical, SendPath::Zerocopy, SendPath::Sendfile] {
        cases.push(ThroughputParams {
            send_path: path,
            ..params(Protocol::Tcp, Direction::Forward, 1)
        });
    }
    for (path, recv) in [
        (SendPath::Typical, RecvPath::Trunc),
        (SendPath::Zerocopy, RecvPath::Copy),
        (SendPath::Mmsg, RecvPath::Mmsg),
        (SendPath::Gso, RecvPath::Gro),
    ] {
        cases.push(ThroughputParams {
            send_path: path,
            recv_path: recv,
            ..params(Protocol::Udp, Direction::Forward, 1)
        });
    }
    let client = spawn_in(Some(&ns_a), "lr-e2e-client", move || {
        let mut outcomes = Vec::new();
        for p in cases {
            let o = client::run(addr, &p, None);
            outcomes.push((p, o));
        }
        outcomes
    })
    .unwrap();
    let outcomes = client.join().unwrap().unwrap();
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap().unwrap();

    for (p, o) in outcomes {
        let o = o.unwrap_or_else(|e| panic!("{p:?}: {e}"));
        assert!(o.client.complete, "{p:?}: {:?}", o.client.notes);
        let s = o.server.as_ref().unwrap();
        assert!(s.complete, "{p:?}: {:?}", s.notes);
        let tcp = p.protocol == Protocol::Tcp;
        if p.direction != Direction::Reverse {
            agree(&o.client, s, FlowDir::Forward, tcp);
        }
        if p.direction != Direction::Forward {
            agree(s, &o.client, FlowDir::Reverse, tcp);
        }
        if tcp {
            // The MSS over veth (MTU 1500) is read back, at most 1460.
            let mss = o.client.flows[0].mss_bytes.unwrap();
            assert!((500..=1460).contains(&mss), "mss {mss}");
        }
        if p.send_path == SendPath::Zerocopy {
            let z = o.client.flows[0].zerocopy.unwrap();
            assert!(z.zerocopy_sends > 0);
        }
        // Each sending end counted its egress veth's packets; a UDP
        // datagram is one frame, but a GSO send crosses veth (UDP
        // segmentation offered, as by default) as one super-skb.
        for side in [&o.client, s] {
            let sent = side.sent_packets();
            if sent == 0 {
                continue;
            }
            let e = side
                .egress
                .as_ref()
                .unwrap_or_else(|| panic!("{p:?}: no egress count"));
            assert!(e.interface.starts_with("lr-"), "{p:?}: {}", e.interface);
            if tcp {
                assert!(e.packets > 0, "{p:?}");
            } else if p.send_path == SendPath::Gso {
                assert!(e.packets * 10 < sent, "{p:?}: {} for {sent}", e.packets);
            } else {
                assert!(
                    (sent..=sent + 500).contains(&e.packets),
                    "{p:?}: {} packets for {sent} datagrams",
                    e.packets
                );
            }
        }
    }
    drop(bed);
}
