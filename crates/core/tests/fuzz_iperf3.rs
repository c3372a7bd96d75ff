//! Fuzz harness of iperf3's wire (`wire::iperf3`): both session machines
//! fed arbitrary and mutated control bytes in arbitrary chunks, the
//! parameters and results parsers, the UDP header and the credentials
//! plaintext.
//!
//! Properties: nothing panics; a machine's buffer never holds more than the
//! largest message; an oversize length prefix ends the session before its
//! body arrives; once finished, a machine stays finished and says nothing
//! more. See docs/FUZZING.md.

mod fuzz_support;

use fuzz_support::{apply, bytes, config, mutations};
use linerate_core::wire::iperf3::auth::parse_plaintext;
use linerate_core::wire::iperf3::params::Params;
use linerate_core::wire::iperf3::results::Results;
use linerate_core::wire::iperf3::session::{
    ClientAction, ClientEvent, ClientSession, ServerAction, ServerEvent, ServerSession, Timeouts,
};
use linerate_core::wire::iperf3::{frame, Cookie, UdpCounts, UdpHeader, MAX_RESULTS_BYTES};
use proptest::prelude::*;

/// A plausible client byte stream: cookie, parameters, TEST_END, results,
/// IPERF_DONE.
fn valid_client_wire() -> Vec<u8> {
    let mut w = Cookie::from_random([3; 36]).0.to_vec();
    w.extend(frame(
        br#"{"udp":true,"time":1,"parallel":2,"len":1400,"bandwidth":1000000}"#,
    ));
    w.push(4);
    w.extend(frame(br#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":10,"retransmits":0,"jitter":0,"errors":0,"packets":1}]}"#));
    w.push(16);
    w
}

/// A plausible server byte stream.
fn valid_server_wire() -> Vec<u8> {
    let mut w = vec![9, 10, 1, 2, 13];
    w.extend(frame(br#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":-1,"streams":[{"id":1,"bytes":10,"retransmits":-1,"jitter":0.001,"errors":1,"omitted_errors":0,"packets":5,"omitted_packets":0,"start_time":0,"end_time":1}]}"#));
    w.push(14);
    w
}

fn own() -> Box<Results> {
    Box::new(Results::default())
}

/// Drives a server machine with `wire` in chunks, answering its requests
/// as a server would; checks the invariants.
fn drive_server(wire: &[u8], chunks: &[usize]) {
    let mut s = ServerSession::new(0, Timeouts::default());
    let mut now = 0u64;
    let mut rest = wire;
    let mut sizes = chunks.iter().cycle();
    let mut finished = false;
    while !rest.is_empty() {
        let n = sizes
            .next()
            .map_or(rest.len(), |&n| n.max(1))
            .min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        now += 1_000_000;
        let mut queue = vec![s.handle(now, ServerEvent::Bytes(chunk))];
        while let Some(actions) = queue.pop() {
            for a in actions {
                assert!(!finished, "a finished server acted: {a:?}");
                match a {
                    ServerAction::Check(p) => {
                        let _ = p.check_limits(Some(300), Some(1_000_000_000));
                        let _ = p.stream_senders();
                        queue.push(s.handle(now, ServerEvent::Accepted));
                        queue.push(s.handle(now, ServerEvent::StreamsReady));
                    }
                    ServerAction::StopFlows => {
                        queue.push(s.handle(now, ServerEvent::FlowsStopped(own())))
                    }
                    ServerAction::Finish(_) => finished = true,
                    ServerAction::Send(b) => assert!(b.len() <= MAX_RESULTS_BYTES + 8),
                    _ => {}
                }
            }
        }
        assert_eq!(finished, s.is_done());
    }
    let _ = s.handle(now + 100_000_000_000_000, ServerEvent::Tick);
    assert!(s.is_done(), "a tick past every deadline ends the session");
    assert!(s.handle(now, ServerEvent::Closed).is_empty());
}

fn drive_client(wire: &[u8], chunks: &[usize]) {
    let p = Params {
        time_s: 1,
        parallel: 1,
        ..Params::default()
    };
    let (mut c, _) = ClientSession::new(0, Cookie::from_random([0; 36]), &p, Timeouts::default());
    let mut now = 0u64;
    let mut rest = wire;
    let mut sizes = chunks.iter().cycle();
    while !rest.is_empty() {
        let n = sizes
            .next()
            .map_or(rest.len(), |&n| n.max(1))
            .min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        now += 600_000_000;
        let mut queue = vec![
            c.handle(now, ClientEvent::Bytes(chunk)),
            c.handle(now, ClientEvent::Tick),
        ];
        while let Some(actions) = queue.pop() {
            for a in actions {
                if a == ClientAction::CollectResults {
                    queue.push(c.handle(now, ClientEvent::OwnResults(own())));
                }
            }
        }
    }
    // A running test ends at its time; the step after it then times out.
    for k in 1..=2u64 {
        let _ = c.handle(now + k * 100_000_000_000_000, ClientEvent::Tick);
    }
    assert!(c.is_done(), "ticks past every deadline end the session");
}

proptest! {
    #![proptest_config(config())]

    /// Arbitrary bytes at both machines, in arbitrary chunks.
    #[test]
    fn any_bytes_any_chunking(wire in bytes(128), chunks in proptest::collection::vec(1usize..48, 1..4)) {
        drive_server(&wire, &chunks);
        drive_client(&wire, &chunks);
    }

    /// Valid sessions, mutated (truncation, bit flips, extreme lengths).
    #[test]
    fn mutated_sessions(muts in mutations(4), chunks in proptest::collection::vec(1usize..64, 1..3)) {
        let mut w = valid_client_wire();
        apply(&mut w, &muts);
        drive_server(&w, &chunks);
        let mut w = valid_server_wire();
        apply(&mut w, &muts);
        drive_client(&w, &chunks);
    }

    /// Parameters and results parsers on arbitrary bodies and on valid
    /// bodies with one byte changed.
    #[test]
    fn json_bodies(body in bytes(160), at in any::<usize>(), v in any::<u8>()) {
        let _ = Params::parse(&body);
        let _ = Results::parse(&body);
        for mut b in [valid_client_wire()[41..].to_vec(), valid_server_wire()[9..].to_vec()] {
            let i = at % b.len();
            b[i] = v;
            if let Ok(p) = Params::parse(&b) {
                let _ = (p.check_limits(Some(0), Some(0)), p.to_json(), p.stream_senders());
            }
            if let Ok(r) = Results::parse(&b) {
                let again = Results::parse(&serde_json::to_vec(&r.to_json()).unwrap());
                prop_assert!(again.is_ok());
            }
        }
    }

    /// UDP headers and counts, credentials plaintext.
    #[test]
    fn udp_and_auth(b in bytes(24), arrival in any::<u64>(), wide in any::<bool>()) {
        let mut c = UdpCounts::default();
        if let Some(h) = UdpHeader::parse(&b, wide) {
            c.datagram(&h, arrival);
            c.datagram(&h, 0);
            prop_assert!(c.errors <= c.packets);
        }
        let _ = parse_plaintext(&b);
    }
}

/// A length prefix of 4 GiB for the results ends the session at once.
#[test]
fn huge_results_prefix_is_refused_at_once() {
    let mut w = valid_client_wire();
    let at = w.iter().rposition(|&b| b == 4).unwrap() + 1;
    w.truncate(at);
    w.extend(u32::MAX.to_be_bytes());
    let mut s = ServerSession::new(0, Timeouts::default());
    let mut done = false;
    let mut q = vec![s.handle(0, ServerEvent::Bytes(&w))];
    while let Some(a) = q.pop() {
        for a in a {
            match a {
                ServerAction::Check(_) => {
                    q.push(s.handle(0, ServerEvent::Accepted));
                    q.push(s.handle(0, ServerEvent::StreamsReady));
                }
                ServerAction::StopFlows => q.push(s.handle(0, ServerEvent::FlowsStopped(own()))),
                ServerAction::Finish(_) => done = true,
                _ => {}
            }
        }
    }
    assert!(done);
}
