//! Loopback tests of the echo reflector and clients.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use linerate_core::latency::{
    client_stamps_monotonic, dissect, EchoProtocol, ResponderStamps, Stage,
};
use linerate_core::procedure::pingpong::{Schedule, Until};
use linerate_core::wire::echo::Packet;

use super::*;

fn schedule(count: u64) -> Schedule {
    Schedule {
        until: Until::Count(count),
        interval: Duration::ZERO,
        max_in_flight: 1,
        // Long: a loaded test host can hold a loopback reply back for
        // hundreds of milliseconds, and these tests count every reply.
        timeout: Duration::from_secs(2),
        timeout_auto: false,
    }
}

fn client(target: SocketAddr, session: u32, size: usize, count: u64) -> ClientConfig {
    ClientConfig {
        target,
        session,
        size,
        schedule: schedule(count),
        spin: false,
        no_udp_checksum: false,
        plain_echo: false,
        kernel_stamps: true,
        stamp_every: 1,
    }
}

fn start_udp(
    cfg: ReflectorConfig,
) -> (
    SocketAddr,
    Arc<AtomicBool>,
    std::thread::JoinHandle<ReflectorReport>,
) {
    let r = UdpReflector::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let addr = r.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::spawn(move || r.run(&s).unwrap());
    (addr, stop, h)
}

/// Stage sums equal the RTT, stamps are monotonic and every stage is there.
fn check_stages(run: &ClientRun, report: &ReflectorReport) {
    let by_seq: std::collections::HashMap<u64, ResponderStamps> =
        report.records.iter().map(|r| (r.seq, r.stamps)).collect();
    let mut complete = 0;
    let dissected = run.exchanges.iter().filter(|x| x.dissected).count();
    for x in run.exchanges.iter().filter(|x| x.dissected) {
        assert!(client_stamps_monotonic(&x.client), "{:?}", x.client);
        let r = by_seq
            .get(&x.seq)
            .expect("reflector recorded every exchange");
        let s = dissect(&x.client, Some(r), true);
        let parts = [
            Stage::ClientTx,
            Stage::ResponderRx,
            Stage::ResponderApp,
            Stage::ResponderTx,
            Stage::Network,
            Stage::ClientRx,
        ];
        if parts.iter().all(|&p| s.get(p).is_some()) {
            let sum: i64 = parts.iter().map(|&p| s.get(p).unwrap()).sum();
            assert_eq!(sum, s.get(Stage::Rtt).unwrap());
            assert!(s.get(Stage::ResponderApp).unwrap() >= 0);
            complete += 1;
        }
    }
    assert!(
        complete * 10 >= dissected * 9 && dissected > 0,
        "most stamped exchanges fully stamped: {complete}/{dissected}"
    );
}

#[test]
fn sampled_stamps_dissect_one_exchange_in_n_and_time_the_rest_bare() {
    // Strict ping-pong blocking, busy, and pipelined (several in flight).
    for (mode, in_flight, spin) in [
        (ReflectorMode::Blocking, 1, false),
        (ReflectorMode::Busy, 1, true),
        (ReflectorMode::Blocking, 8, false),
    ] {
        let mut cfg = ReflectorConfig::new(78);
        cfg.mode = mode;
        let (addr, stop, h) = start_udp(cfg);
        let mut c = client(addr, 78, 64, 400);
        c.stamp_every = 4;
        c.spin = spin;
        c.schedule.max_in_flight = in_flight;
        let run = run_udp_client(&c).unwrap();
        stop.store(true, Ordering::Relaxed);
        let report = h.join().unwrap();
        let what = format!("{mode:?} in flight {in_flight}");
        assert_eq!(run.counts.received, 400, "{what}");
        assert_eq!(run.stamp_every, 4);
        let (stamped, bare): (Vec<&Exchange>, Vec<&Exchange>) =
            run.exchanges.iter().partition(|x| x.dissected);
        assert_eq!(stamped.len(), 100, "{what}");
        assert_eq!(bare.len(), 300, "{what}");
        for x in &stamped {
            assert_eq!(x.seq % 4, 0, "{what}");
        }
        // The bare ones asked the kernel for nothing on the client…
        for x in &bare {
            assert_eq!(x.client.rx_kernel_ns, None, "{what}");
            assert_eq!(x.client.tx_soft_ns, None, "{what}");
            assert_eq!(x.client.tx_sched_ns, None, "{what}");
        }
        // …nor a transmit stamp of the reflector, which stamped the sample.
        let rec: std::collections::HashMap<u64, ResponderStamps> =
            report.records.iter().map(|r| (r.seq, r.stamps)).collect();
        let with_tx = |xs: &[&Exchange]| {
            xs.iter()
                .filter(|x| rec.get(&x.seq).is_some_and(|r| r.tx_soft_ns.is_some()))
                .count()
        };
        assert_eq!(with_tx(&bare), 0, "{what}");
        assert!(with_tx(&stamped) >= 95, "{what}: {}", with_tx(&stamped));
        // The reflector read the announced stamped requests with their
        // receive stamp, the others with plain recvfrom.
        let with_rx = |xs: &[&Exchange]| {
            xs.iter()
                .filter(|x| rec.get(&x.seq).is_some_and(|r| r.rx_kernel_ns.is_some()))
                .count()
        };
        if in_flight == 1 {
            assert_eq!(with_rx(&stamped), 100, "{what}");
            assert_eq!(with_rx(&bare), 0, "{what}");
        }
        check_stages(&run, &report);
        assert_eq!(run.missing_tx_stamps, 0, "{what}");
        let row = summarize(Vec::new(), 64, &run, Some(&report), true);
        assert_eq!(row.stamp_every, 4);
        assert_eq!(row.stage(Stage::Rtt).map(|s| s.count), Some(100), "{what}");
        assert_eq!(row.rtt_unstamped.map(|s| s.count), Some(300), "{what}");
        assert_eq!(row.rtt().map(|s| s.count), Some(300));
        assert!(row.stamping_cost_ns.is_some());
    }
}

#[test]
fn udp_echo_on_loopback_dissects_into_stages() {
    for mode in [
        ReflectorMode::Blocking,
        ReflectorMode::Busy,
        ReflectorMode::Batch,
    ] {
        let mut cfg = ReflectorConfig::new(77);
        cfg.mode = mode;
        cfg.copy = mode == ReflectorMode::Batch;
        let (addr, stop, h) = start_udp(cfg);
        let run = run_udp_client(&client(addr, 77, 64, 200)).unwrap();
        stop.store(true, Ordering::Relaxed);
        let report = h.join().unwrap();
        assert_eq!(run.counts.sent, 200, "{mode:?}");
        assert_eq!(run.counts.received, 200, "{mode:?}");
        assert_eq!(report.replies, 200);
        assert_eq!(report.bytes_out, report.bytes_in);
        // 64-byte probes carry the reflector's stamps inline too.
        let inline = run.exchanges[5].inline.expect("inline stamps");
        let rec = report
            .records
            .iter()
            .find(|r| r.seq == run.exchanges[5].seq)
            .unwrap();
        assert_eq!(inline.rx_app_ns, rec.stamps.rx_app_ns);
        check_stages(&run, &report);
    }
}

#[test]
fn unknown_sessions_get_no_reply() {
    let (addr, stop, h) = start_udp(ReflectorConfig::new(1));
    let mut cfg = client(addr, 2, 64, 3);
    cfg.schedule.timeout = Duration::from_millis(50);
    let run = run_udp_client(&cfg).unwrap();
    assert_eq!(run.counts.received, 0);
    assert_eq!(run.counts.lost, 3);
    // Garbage, truncated and oversize datagrams: dropped, no reply, no panic.
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    s.send_to(b"", addr).unwrap();
    s.send_to(b"LE", addr).unwrap();
    s.send_to(&[0xffu8; 300], addr).unwrap();
    let mut reply_kind = [0u8; 16];
    Packet::new_unchecked(&mut reply_kind[..]).emit_request(1, 5);
    reply_kind[3] = 2; // a reply sent to the reflector: not a request
    s.send_to(&reply_kind, addr).unwrap();
    s.send_to(&vec![0u8; 65_000], addr).unwrap();
    let mut buf = [0u8; 100];
    assert!(
        s.recv_from(&mut buf).is_err(),
        "no reply to anything invalid"
    );
    stop.store(true, Ordering::Relaxed);
    let report = h.join().unwrap();
    assert_eq!(report.replies, 0);
    assert_eq!(report.unknown_session, 3);
    assert_eq!(report.malformed, 5);
}

#[test]
fn short_requests_get_short_replies_and_stamps_at_the_end() {
    let (addr, stop, h) = start_udp(ReflectorConfig::new(9));
    let run = run_udp_client(&client(addr, 9, 16, 20)).unwrap();
    stop.store(true, Ordering::Relaxed);
    let report = h.join().unwrap();
    assert_eq!(run.counts.received, 20);
    assert!(run.exchanges.iter().all(|x| x.inline.is_none()));
    assert_eq!(report.bytes_out, 20 * 16);
    check_stages(&run, &report);
    assert!(
        run_udp_client(&client(addr, 9, 15, 1)).is_err(),
        "below the header size"
    );
}

#[test]
fn plain_udp_echo_server_gives_client_side_stages() {
    // An RFC 862 echo server: returns every datagram unchanged.
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = s.local_addr().unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let h = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = s.recv_from(&mut buf) {
            s.send_to(&buf[..n], from).unwrap();
        }
    });
    let mut cfg = client(addr, 0, 64, 50);
    cfg.plain_echo = true;
    let run = run_udp_client(&cfg).unwrap();
    h.join().unwrap();
    assert_eq!(run.counts.received, 50);
    let x = &run.exchanges[10];
    let st = dissect(&x.client, None, true);
    let sum = st.get(Stage::ClientTx).unwrap()
        + st.get(Stage::Network).unwrap()
        + st.get(Stage::ClientRx).unwrap();
    assert_eq!(sum, st.get(Stage::Rtt).unwrap());
}

#[test]
fn tcp_one_byte_echo() {
    let r = TcpReflector::bind("127.0.0.1:0".parse().unwrap(), ReflectorConfig::new(5)).unwrap();
    let addr = r.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let h = std::thread::spawn(move || r.run(&s2).unwrap());
    let run = run_tcp_client(&client(addr, 5, 1, 100)).unwrap();
    stop.store(true, Ordering::Relaxed);
    let report = h.join().unwrap();
    assert_eq!(run.counts.received, 100);
    assert_eq!(report.replies, 100);
    assert_eq!(report.bytes_in, 100);
    assert_eq!(report.bytes_out, 100);
    check_stages(&run, &report);
    assert!(
        run.exchanges
            .iter()
            .filter(|x| x.client.tx_ack_ns.is_some())
            .count()
            >= 90,
        "TX_ACK stamps on TCP"
    );
}

#[test]
fn tcp_sampled_stamps_dissect_one_exchange_in_n_and_time_the_rest_bare() {
    // Blocking and busy, 1-byte and 64-byte requests.
    for (mode, spin, size) in [
        (ReflectorMode::Blocking, false, 1),
        (ReflectorMode::Busy, true, 64),
    ] {
        let mut cfg = ReflectorConfig::new(9);
        cfg.mode = mode;
        let r = TcpReflector::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
        let addr = r.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let h = std::thread::spawn(move || r.run(&s2).unwrap());
        let mut c = client(addr, 9, size, 400);
        c.stamp_every = 4;
        c.spin = spin;
        let run = run_tcp_client(&c).unwrap();
        stop.store(true, Ordering::Relaxed);
        let report = h.join().unwrap();
        let what = format!("{mode:?} {size} B");
        assert_eq!(run.counts.received, 400, "{what}");
        assert_eq!(report.replies, 400, "{what}");
        assert_eq!(report.bytes_out, 400 * size as u64, "{what}");
        assert_eq!(run.stamp_every, 4);
        let (stamped, bare): (Vec<&Exchange>, Vec<&Exchange>) =
            run.exchanges.iter().partition(|x| x.dissected);
        assert_eq!((stamped.len(), bare.len()), (100, 300), "{what}");
        assert!(stamped.iter().all(|x| x.seq % 4 == 0), "{what}");
        // The bare ones asked the kernel for nothing on either end…
        for x in &bare {
            let c = &x.client;
            assert_eq!(
                (c.rx_kernel_ns, c.tx_soft_ns, c.tx_sched_ns, c.tx_ack_ns),
                (None, None, None, None),
                "{what}"
            );
        }
        let rec: std::collections::HashMap<u64, ResponderStamps> =
            report.records.iter().map(|r| (r.seq, r.stamps)).collect();
        let count = |xs: &[&Exchange], f: fn(&ResponderStamps) -> bool| {
            xs.iter().filter(|x| rec.get(&x.seq).is_some_and(f)).count()
        };
        assert_eq!(count(&bare, |r| r.tx_soft_ns.is_some()), 0, "{what}");
        assert_eq!(count(&bare, |r| r.rx_kernel_ns.is_some()), 0, "{what}");
        // …the sample every stamp, on both ends.
        assert_eq!(count(&stamped, |r| r.rx_kernel_ns.is_some()), 100, "{what}");
        assert!(count(&stamped, |r| r.tx_soft_ns.is_some()) >= 95, "{what}");
        let acked = stamped
            .iter()
            .filter(|x| x.client.tx_ack_ns.is_some())
            .count();
        assert!(acked >= 90, "{what}: TX_ACK on {acked} of 100");
        assert_eq!(run.missing_tx_stamps, 0, "{what}");
        assert_eq!(run.missing_rx_stamps, 0, "{what}");
        check_stages(&run, &report);
        let row = summarize(Vec::new(), size as u64, &run, Some(&report), true);
        assert_eq!(row.stamp_every, 4);
        assert_eq!(row.stage(Stage::Rtt).map(|s| s.count), Some(100), "{what}");
        assert_eq!(row.rtt_unstamped.map(|s| s.count), Some(300), "{what}");
        assert_eq!(row.rtt().map(|s| s.count), Some(300));
    }
}

#[test]
fn tcp_reflector_refuses_a_wrong_session() {
    let mut cfg = ReflectorConfig::new(5);
    cfg.idle_timeout = Duration::from_millis(400);
    let r = TcpReflector::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let addr = r.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let h = std::thread::spawn(move || r.run(&s2).unwrap());
    let mut c = client(addr, 6, 1, 2);
    c.schedule.timeout = Duration::from_millis(100);
    let run = run_tcp_client(&c);
    let report = h.join().unwrap();
    assert_eq!(report.replies, 0);
    assert_eq!(report.unknown_session, 1);
    if let Ok(run) = run {
        assert_eq!(run.counts.received, 0);
    }
}

#[test]
fn icmp_echo_to_loopback() {
    // SAFETY-free check of privileges: raw sockets need CAP_NET_RAW.
    if std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            !s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(true)
    {
        if std::env::var("LINERATE_REQUIRE_PRIV").as_deref() == Ok("1") {
            panic!("icmp_echo_to_loopback needs root (LINERATE_REQUIRE_PRIV=1)");
        }
        eprintln!("SKIPPED: icmp_echo_to_loopback needs root for a raw ICMP socket");
        return;
    }
    let run = run_icmp_client(&client("127.0.0.1:0".parse().unwrap(), 0, 56, 20)).unwrap();
    assert_eq!(run.counts.received, 20);
    for x in &run.exchanges {
        assert!(client_stamps_monotonic(&x.client));
    }
    assert!(
        run.exchanges
            .iter()
            .filter(|x| x.client.rx_kernel_ns.is_some())
            .count()
            >= 18
    );
}

/// ICMP samples its transmit stamps: one request in 4 has them (and is
/// dissected); every reply keeps its receive stamp, so the span ping
/// reports comes from the others.
#[test]
fn icmp_echo_samples_its_transmit_stamps() {
    if !std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    }) {
        if std::env::var("LINERATE_REQUIRE_PRIV").as_deref() == Ok("1") {
            panic!("icmp_echo_samples_its_transmit_stamps needs root (LINERATE_REQUIRE_PRIV=1)");
        }
        eprintln!(
            "SKIPPED: icmp_echo_samples_its_transmit_stamps needs root for a raw ICMP socket"
        );
        return;
    }
    let mut cfg = client("127.0.0.1:0".parse().unwrap(), 0, 56, 40);
    cfg.stamp_every = 4;
    let run = run_icmp_client(&cfg).unwrap();
    assert_eq!((run.counts.received, run.stamp_every), (40, 4));
    for x in &run.exchanges {
        assert_eq!(x.dissected, x.seq % 4 == 0, "{x:?}");
        // Only the sample asked for transmit stamps.
        assert_eq!(x.client.tx_soft_ns.is_some(), x.dissected, "{x:?}");
    }
    assert_eq!(run.missing_tx_stamps, 0);
    let with_rx = |dissected: bool| {
        run.exchanges
            .iter()
            .filter(|x| x.dissected == dissected && x.client.rx_kernel_ns.is_some())
            .count() as u64
    };
    assert!(with_rx(false) >= 27, "{run:?}");
    // The span comes from the exchanges outside the sample.
    let span = send_to_kernel_rx_summary(&run).unwrap();
    assert_eq!(span.count, with_rx(false));
}

fn start_server(
    max_duration: Option<Duration>,
) -> (SocketAddr, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    use crate::throughput::server::{Server, ServerConfig};
    let server = Server::bind(ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        once: false,
        max_clients: 4,
        max_duration,
        log: Arc::new(|_| {}),
        limits: crate::throughput::server::Limits::default(),
        access: crate::throughput::server::Access::LoopbackOnly,
        iperf3: None,
    })
    .unwrap();
    let addr = server.local_addr().unwrap();
    let stop = server.stop_flag();
    let h = std::thread::spawn(move || server.run().unwrap());
    (addr, stop, h)
}

fn params(protocol: EchoProtocol, size: u64) -> linerate_core::latency::LatencyParams {
    linerate_core::latency::LatencyParams {
        protocol,
        size_bytes: size,
        mode: ReflectorMode::Blocking,
        copy: false,
        no_udp_checksum: false,
        duration_ns: 5_000_000_000,
        kernel_stamps: true,
    }
}

#[test]
fn latency_session_through_linerate_server() {
    let (addr, stop, h) = start_server(Some(Duration::from_secs(60)));
    for (proto, size, every) in [
        (EchoProtocol::Udp, 64, 1),
        (EchoProtocol::Udp, 16, 1),
        (EchoProtocol::Tcp, 1, 1),
        (EchoProtocol::Tcp, 64, 4),
    ] {
        let mut c = client(addr, 0, size as usize, 150);
        c.stamp_every = every;
        let r = run_remote(addr, &params(proto, size), &c).unwrap();
        assert_eq!(
            r.client.exchanges.iter().filter(|x| x.dissected).count(),
            150usize.div_ceil(every as usize),
            "{proto:?}"
        );
        assert_eq!(r.client.counts.received, 150, "{proto:?}");
        assert!(r.incomplete.is_none());
        let reflector = r.reflector.expect("the server's records");
        assert_eq!(reflector.replies, 150);
        assert_eq!(
            reflector.records.len(),
            150,
            "records come back over control"
        );
        assert!(r.same_clock, "same host, same boot id");
        assert!(reflector.bytes_out <= reflector.bytes_in);
        check_stages(&r.client, &reflector);
    }
    // Parameters the server refuses: a clear error, and the server goes on.
    let err = run_remote(addr, &params(EchoProtocol::Udp, 8), &client(addr, 0, 8, 1)).unwrap_err();
    assert!(err.to_string().contains("request size 8"), "{err}");
    let mut long = params(EchoProtocol::Udp, 64);
    long.duration_ns = 3_600_000_000_000;
    let err = run_remote(addr, &long, &client(addr, 0, 64, 1)).unwrap_err();
    assert!(err.to_string().contains("the server's limit"), "{err}");
    let r = run_remote(
        addr,
        &params(EchoProtocol::Udp, 64),
        &client(addr, 0, 64, 10),
    )
    .unwrap();
    assert_eq!(r.client.counts.received, 10, "the server still serves");
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

#[test]
fn the_servers_reflector_answers_only_its_session() {
    use crate::throughput::control::Control;
    use linerate_core::wire::control::{Message, SessionKind};
    let (addr, stop, h) = start_server(None);
    let mut ctrl = Control::new(std::net::TcpStream::connect(addr).unwrap());
    let t = Duration::from_secs(5);
    let session_id = crate::throughput::control::client_handshake(&mut ctrl, "test")
        .unwrap()
        .session_id;
    ctrl.send(&Message::Start {
        session: SessionKind::Latency(params(EchoProtocol::Udp, 64)),
        udp_ports: vec![],
    })
    .unwrap();
    let Message::ReflectorReady { port, .. } = ctrl.recv(t).unwrap() else {
        panic!("no reflector_ready")
    };
    ctrl.send(&Message::Go).unwrap();
    assert!(matches!(ctrl.recv(t).unwrap(), Message::Running));
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let to: SocketAddr = (addr.ip(), port).into();
    let mut probe = [0u8; 64];
    let mut buf = [0u8; 128];
    // A token the server never gave out: no reply.
    Packet::new_unchecked(&mut probe[..]).emit_request(session_id ^ 1, 1);
    s.send_to(&probe, to).unwrap();
    assert!(
        s.recv_from(&mut buf).is_err(),
        "a forged session got a reply"
    );
    // This session's token: a reply of the same length.
    Packet::new_unchecked(&mut probe[..]).emit_request(session_id, 2);
    s.send_to(&probe, to).unwrap();
    let (n, _) = s.recv_from(&mut buf).unwrap();
    assert_eq!(n, 64);
    ctrl.send(&Message::SendDone { flows: vec![] }).unwrap();
    let mut records = 0;
    let report = loop {
        match ctrl.recv(t).unwrap() {
            Message::ReflectorRecords { records: r } => records += r.len(),
            Message::ReflectorDone { report } => break report,
            other => panic!("unexpected {}", other.name()),
        }
    };
    assert_eq!((records, report.replies, report.unknown_session), (1, 1, 1));
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

#[test]
fn without_kernel_stamps_only_the_rtt_remains() {
    let mut rc = ReflectorConfig::new(3);
    rc.kernel_stamps = false;
    let (addr, stop, h) = start_udp(rc);
    let mut c = client(addr, 3, 64, 50);
    c.kernel_stamps = false;
    let run = run_udp_client(&c).unwrap();
    stop.store(true, Ordering::Relaxed);
    let report = h.join().unwrap();
    assert_eq!(run.counts.received, 50);
    assert_eq!(run.missing_tx_stamps, 50);
    assert_eq!(run.missing_rx_stamps, 50);
    let row = summarize(vec![], 64, &run, Some(&report), true);
    let stages: Vec<Stage> = row.stages.iter().map(|s| s.stage).collect();
    // The reflector's application stamps still give its application time.
    assert!(stages.contains(&Stage::Rtt));
    assert!(!stages.contains(&Stage::ClientTx));
    assert!(!stages.contains(&Stage::Network));
}

#[test]
fn past_the_recording_limit_stamps_are_drained_and_dropped() {
    use crate::stamps::{self, Want};
    use std::os::fd::AsRawFd as _;
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    stamps::enable(a.as_raw_fd(), Want::RxTx).unwrap();
    let fd = a.as_raw_fd();
    let mut run = ClientRun::default();
    let mut got = Vec::new();
    a.send_to(b"x", b.local_addr().unwrap()).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    run.collect_tx_stamps(fd, &mut got).unwrap();
    let recorded = got.len();
    assert!(recorded >= 1, "stamps collected while recording");
    // At the limit: the queue is drained, the stamps dropped.
    let x = Exchange {
        seq: 0,
        client: Default::default(),
        inline: None,
        dissected: true,
    };
    run.exchanges = vec![x; MAX_RECORDED_EXCHANGES];
    a.send_to(b"y", b.local_addr().unwrap()).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    run.collect_tx_stamps(fd, &mut got).unwrap();
    assert_eq!(got.len(), recorded, "nothing added past the limit");
    run.exchanges = Vec::new();
    run.collect_tx_stamps(fd, &mut got).unwrap();
    assert_eq!(
        got.len(),
        recorded,
        "the queue was drained, not left to fill"
    );
}

#[test]
fn receive_stamps_are_on_once_warmed_up() {
    // The kernel switches software receive stamps on through deferred work
    // once a socket asks; the warm-up waits for a stamped datagram.
    assert!(
        udp::rx_stamps_on(Duration::from_secs(2)).expect("loopback socket"),
        "no software receive stamp on loopback within 2 s"
    );
}
