//! Sessions with iperf3 clients and servers of versions 3.1, 3.9, 3.16,
//! 3.17 and 3.21, from exchanges constructed after what each version
//! writes (its parameters and results: keys, types, which are sent only
//! when set) and what it requires of its peer's results (required keys,
//! number types checked since 3.18, the omitted pair both or neither since
//! 3.14, stream ids it knows). Only Debian's 3.12 runs in the integration
//! tests; these cover the others.
//!
//! `--json-stream` (3.17) changes only the client's own output: no key on
//! the wire says it is on, so its sessions are the plain ones below.

use serde_json::Value;

use super::params::{Mode, Transport};
use super::results::{Results, StreamResult};
use super::session::{
    ClientAction, ClientEnding, ClientEvent, ClientSession, ServerAction, ServerEnding,
    ServerEvent, ServerSession, Timeouts,
};
use super::{errno, frame, server_error, stream_id, Cookie, State};

/// One version's behaviour on the wire.
struct Version {
    name: &'static str,
    /// Its parameters for `-t 2 -P 2` with `--bidir` (3.7+) or `-R`.
    tcp: &'static str,
    /// Its parameters for `-u -b 1M -t 1` and a version's UDP extras.
    udp: &'static str,
    /// Sends `start_time`/`end_time` per stream (3.2+).
    times: bool,
    /// Sends `omitted_errors`/`omitted_packets` (3.14+) and requires them
    /// both or neither.
    omitted_pair: bool,
    /// Reads its peer's results by JSON type (3.18+): a key of another type
    /// counts as missing.
    typed: bool,
}

const VERSIONS: [Version; 5] = [
    Version {
        name: "3.1",
        tcp: r#"{"tcp":true,"omit":0,"time":2,"parallel":2,"reverse":true,"len":131072,"client_version":"3.1"}"#,
        udp: r#"{"udp":true,"omit":0,"time":1,"parallel":1,"len":8192,"bandwidth":1048576,"udp_counters_64bit":1,"client_version":"3.1"}"#,
        times: false,
        omitted_pair: false,
        typed: false,
    },
    Version {
        name: "3.9",
        tcp: r#"{"tcp":true,"omit":0,"time":2,"parallel":2,"bidirectional":true,"len":131072,"pacing_timer":1000,"client_version":"3.9"}"#,
        udp: r#"{"udp":true,"omit":0,"time":1,"parallel":1,"len":1448,"bandwidth":1048576,"pacing_timer":1000,"repeating_payload":1,"client_version":"3.9"}"#,
        times: true,
        omitted_pair: false,
        typed: false,
    },
    Version {
        name: "3.16",
        tcp: r#"{"tcp":true,"omit":1,"time":2,"num":0,"blockcount":0,"parallel":2,"bidirectional":true,"len":131072,"pacing_timer":1000,"zerocopy":1,"client_version":"3.16"}"#,
        udp: r#"{"udp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":1,"len":1448,"bandwidth":1048576,"pacing_timer":1000,"dont_fragment":1,"client_version":"3.16"}"#,
        times: true,
        omitted_pair: true,
        typed: false,
    },
    Version {
        name: "3.17",
        tcp: r#"{"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":2,"bidirectional":true,"len":131072,"pacing_timer":1000,"congestion_used":"cubic","client_version":"3.17.1"}"#,
        udp: r#"{"udp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":1,"len":1448,"bandwidth":1048576,"pacing_timer":1000,"get_server_output":1,"client_version":"3.17.1"}"#,
        times: true,
        omitted_pair: true,
        typed: false,
    },
    Version {
        name: "3.21",
        tcp: r#"{"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":2,"bidirectional":true,"mptcp":true,"len":131072,"pacing_timer":1000,"skip_rx_copy":1,"client_version":"3.21"}"#,
        udp: r#"{"udp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":1,"len":1448,"bandwidth":1048576,"pacing_timer":1000,"gso":0,"gso_dg_size":0,"gso_bf_size":65507,"gro":0,"gro_bf_size":65507,"client_version":"3.21"}"#,
        times: true,
        omitted_pair: true,
        typed: true,
    },
];

impl Version {
    /// Its results for streams `ids` (`bytes` each), as its send_results
    /// writes them.
    fn results(&self, ids: &[i64], bytes: u64, sender: bool) -> Vec<u8> {
        let streams: Vec<String> = ids
            .iter()
            .map(|id| {
                let mut s = format!(
                    r#"{{"id":{id},"bytes":{bytes},"retransmits":{},"jitter":0,"errors":0"#,
                    if sender { 0 } else { -1 }
                );
                if self.omitted_pair {
                    s.push_str(r#","omitted_errors":0"#);
                }
                s.push_str(r#","packets":0"#);
                if self.omitted_pair {
                    s.push_str(r#","omitted_packets":0"#);
                }
                if self.times {
                    s.push_str(r#","start_time":0,"end_time":2.000183"#);
                }
                s.push('}');
                s
            })
            .collect();
        let congestion = if self.name == "3.1" {
            ""
        } else {
            r#","congestion_used":"cubic""#
        };
        format!(
            r#"{{"cpu_util_total":3.25,"cpu_util_user":0.5,"cpu_util_system":2.75,"sender_has_retransmits":{}{congestion},"streams":[{}]}}"#,
            if sender { 1 } else { -1 },
            streams.join(",")
        )
        .into_bytes()
    }

    /// Whether this version's client (get_results) takes `body` from the
    /// server for its streams `ids`: the four top-level numbers, `streams`,
    /// per stream the six keys, the omitted pair both or neither (3.14+),
    /// types checked (3.18+), every id one of its own.
    fn accepts(&self, body: &[u8], ids: &[i64]) -> Result<(), String> {
        let v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let num = |o: &Value, k: &str| match o.get(k) {
            None => Err(format!("{}: no {k}", self.name)),
            Some(x) if self.typed && !x.is_number() => {
                Err(format!("{}: {k} is not a number", self.name))
            }
            Some(_) => Ok(()),
        };
        for k in [
            "cpu_util_total",
            "cpu_util_user",
            "cpu_util_system",
            "sender_has_retransmits",
        ] {
            num(&v, k)?;
        }
        let streams = v["streams"]
            .as_array()
            .ok_or(format!("{}: no streams array", self.name))?;
        for s in streams {
            for k in ["id", "bytes", "retransmits", "jitter", "errors", "packets"] {
                num(s, k)?;
            }
            let (e, p) = (s.get("omitted_errors"), s.get("omitted_packets"));
            if self.omitted_pair && e.is_some() != p.is_some() {
                return Err(format!("{}: half the omitted pair", self.name));
            }
            let id = s["id"].as_i64().unwrap_or(-1);
            if !ids.contains(&id) {
                return Err(format!(
                    "{}: stream id {id} is not one of its own",
                    self.name
                ));
            }
        }
        Ok(())
    }
}

/// The stream ids a client numbers its `n` streams with (1, 3, 4, …), in
/// the order it connects them (with `--bidir`, its sending streams first).
fn ids(n: usize) -> Vec<i64> {
    (0..n).map(stream_id).collect()
}

/// The server's own results for `n` streams, as linerate's server builds
/// them (every optional key present).
fn server_results(n: usize, senders: &[bool]) -> Results {
    Results {
        cpu_util_total: 1.0,
        cpu_util_user: 0.25,
        cpu_util_system: 0.75,
        sender_has_retransmits: if senders.iter().any(|s| !s) { 1 } else { -1 },
        congestion_used: Some("cubic".into()),
        server_output_text: None,
        server_output_json: None,
        streams: (0..n)
            .map(|i| StreamResult {
                id: stream_id(i),
                bytes: 1_000_000,
                retransmits: -1,
                jitter_s: 0.0,
                errors: 0,
                omitted_errors: Some(0),
                packets: 0,
                omitted_packets: Some(0),
                start_time_s: Some(0.0),
                end_time_s: Some(2.0),
            })
            .collect(),
    }
}

fn sent(actions: &[ServerAction]) -> Vec<u8> {
    actions
        .iter()
        .filter_map(|a| match a {
            ServerAction::Send(b) => Some(b.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// One version's client through a whole session with linerate's server
/// machine, the client's bytes arriving in one piece per step; returns
/// the bytes the server wrote.
fn serve(v: &Version, params: &str) -> Vec<u8> {
    let mut s = ServerSession::new(0, Timeouts::default());
    let cookie = Cookie::from_random([b'k'; 36]);
    let mut wire = Vec::new();
    let mut hello = cookie.as_bytes().to_vec();
    hello.extend(frame(params.as_bytes()));
    let a = s.handle(1, ServerEvent::Bytes(&hello));
    wire.extend(sent(&a));
    let Some(ServerAction::Check(p)) = a.iter().find(|x| matches!(x, ServerAction::Check(_)))
    else {
        panic!("{}: no parameters to check: {a:?}", v.name);
    };
    assert_eq!(
        p.client_version.as_deref().map(|c| &c[..3]),
        Some(&v.name[..3])
    );
    let senders = p.stream_senders();
    wire.extend(sent(&s.handle(2, ServerEvent::Accepted)));
    let a = s.handle(3, ServerEvent::StreamsReady);
    assert!(a.contains(&ServerAction::StartFlows), "{}: {a:?}", v.name);
    wire.extend(sent(&a));
    let a = s.handle(2_000_000_000, ServerEvent::Bytes(&[State::TestEnd.byte()]));
    assert_eq!(a, vec![ServerAction::StopFlows], "{}", v.name);
    let ours = server_results(senders.len(), &senders);
    let a = s.handle(2_000_000_001, ServerEvent::FlowsStopped(Box::new(ours)));
    wire.extend(sent(&a));
    // The client writes its results, then reads the server's.
    let theirs = frame(&v.results(&ids(senders.len()), 999_000, senders[0]));
    let a = s.handle(2_000_000_002, ServerEvent::Bytes(&theirs));
    let Some(ServerAction::ClientResults(r)) = a
        .iter()
        .find(|x| matches!(x, ServerAction::ClientResults(_)))
    else {
        panic!("{}: the client's results were not taken: {a:?}", v.name);
    };
    assert_eq!(r.streams.len(), senders.len(), "{}", v.name);
    assert!(r.streams.iter().all(|s| s.bytes == 999_000));
    assert_eq!(r.streams[0].end_time_s.is_some(), v.times, "{}", v.name);
    assert_eq!(
        r.streams[0].omitted_packets.is_some(),
        v.omitted_pair,
        "{}",
        v.name
    );
    wire.extend(sent(&a));
    let a = s.handle(
        2_000_000_003,
        ServerEvent::Bytes(&[State::IperfDone.byte()]),
    );
    assert_eq!(
        a,
        vec![ServerAction::Finish(ServerEnding::Complete)],
        "{}",
        v.name
    );
    wire
}

/// Splits what the server wrote into its state bytes and its results body.
fn states_and_results(wire: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let at = wire
        .iter()
        .position(|&b| b == State::ExchangeResults.byte())
        .expect("EXCHANGE_RESULTS");
    let len = u32::from_be_bytes(wire[at + 1..at + 5].try_into().unwrap()) as usize;
    let body = wire[at + 5..at + 5 + len].to_vec();
    let mut states = wire[..=at].to_vec();
    states.extend_from_slice(&wire[at + 5 + len..]);
    (states, body)
}

#[test]
fn every_version_s_parameters_are_read() {
    for v in &VERSIONS {
        let p = super::params::Params::parse(v.tcp.as_bytes()).unwrap();
        assert_eq!((p.transport, p.time_s, p.parallel), (Transport::Tcp, 2, 2));
        let mode = if v.name == "3.1" {
            Mode::Reverse
        } else {
            Mode::Bidir
        };
        assert_eq!(p.mode, mode, "{}", v.name);
        let p = super::params::Params::parse(v.udp.as_bytes()).unwrap();
        assert_eq!(
            (p.transport, p.bandwidth, p.stream_senders()),
            (Transport::Udp, 1_048_576, vec![true]),
            "{}",
            v.name
        );
    }
    // Each version's extras are read as what they ask.
    let p = |i: usize| super::params::Params::parse(VERSIONS[i].udp.as_bytes()).unwrap();
    assert!(p(0).udp_counters_64bit && p(0).len == 8192);
    assert!(p(1).repeating_payload);
    assert!(p(2).dont_fragment);
    assert!(p(3).get_server_output);
    let p = super::params::Params::parse(VERSIONS[2].tcp.as_bytes()).unwrap();
    assert!(p.zerocopy && p.omit_s == 1);
    let p = super::params::Params::parse(VERSIONS[4].tcp.as_bytes()).unwrap();
    assert!(p.skip_rx_copy);
}

/// Every version's client completes a TCP and a UDP session with the
/// server machine: the same states in the same order, its results taken
/// whatever keys its version sends, and the server's results acceptable
/// to its version's reader (ids its own, types, the omitted pair).
#[test]
fn every_version_s_client_completes_a_session() {
    for v in &VERSIONS {
        for params in [v.tcp, v.udp] {
            let wire = serve(v, params);
            let (states, body) = states_and_results(&wire);
            assert_eq!(
                states,
                [
                    State::ParamExchange,
                    State::CreateStreams,
                    State::TestStart,
                    State::TestRunning,
                    State::ExchangeResults,
                    State::DisplayResults
                ]
                .map(State::byte),
                "{}",
                v.name
            );
            let n = super::params::Params::parse(params.as_bytes())
                .unwrap()
                .stream_senders()
                .len();
            v.accepts(&body, &ids(n)).unwrap();
        }
    }
}

/// The readers above are strict enough to fail: results with a string
/// where 3.21 wants a number, half the omitted pair, an id the client does
/// not have.
#[test]
fn the_version_readers_refuse_what_their_version_refuses() {
    let ok = br#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":-1,"streams":[{"id":1,"bytes":5,"retransmits":-1,"jitter":0,"errors":0,"packets":0}]}"#;
    for v in &VERSIONS {
        v.accepts(ok, &[1]).unwrap();
        assert!(v.accepts(ok, &[3]).is_err(), "{}: unknown id", v.name);
    }
    let text = br#"{"cpu_util_total":"1","cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":-1,"streams":[]}"#;
    assert!(VERSIONS[4].accepts(text, &[]).is_err());
    assert!(VERSIONS[3].accepts(text, &[]).is_ok());
    let half = br#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":-1,"streams":[{"id":1,"bytes":5,"retransmits":-1,"jitter":0,"errors":0,"packets":0,"omitted_errors":0}]}"#;
    assert!(VERSIONS[2].accepts(half, &[1]).is_err());
    assert!(VERSIONS[1].accepts(half, &[1]).is_ok());
}

/// linerate's client against each version's server: that version's
/// results are taken (3.1 without times or the omitted pair).
#[test]
fn every_version_s_server_results_are_read_by_the_client() {
    for v in &VERSIONS {
        let p = super::params::Params::parse(v.tcp.as_bytes()).unwrap();
        let n = p.stream_senders().len();
        let (mut c, _) =
            ClientSession::new(0, Cookie::from_random([b'c'; 36]), &p, Timeouts::default());
        let mut actions = Vec::new();
        for b in [
            State::ParamExchange,
            State::CreateStreams,
            State::TestStart,
            State::TestRunning,
        ] {
            actions.extend(c.handle(1, ClientEvent::Bytes(&[b.byte()])));
        }
        actions.extend(c.handle(3_000_000_000, ClientEvent::Tick));
        actions.extend(c.handle(
            3_000_000_001,
            ClientEvent::Bytes(&[State::ExchangeResults.byte()]),
        ));
        assert!(
            actions.contains(&ClientAction::CollectResults),
            "{}",
            v.name
        );
        c.handle(
            3_000_000_002,
            ClientEvent::OwnResults(Box::new(server_results(n, &[]))),
        );
        let mut theirs = frame(&v.results(&ids(n), 777, true));
        theirs.push(State::DisplayResults.byte());
        let a = c.handle(3_000_000_003, ClientEvent::Bytes(&theirs));
        let Some(ClientAction::ServerResults(r)) = a
            .iter()
            .find(|x| matches!(x, ClientAction::ServerResults(_)))
        else {
            panic!("{}: the server's results were not taken: {a:?}", v.name);
        };
        assert_eq!(
            r.streams.iter().map(|s| s.bytes).sum::<u64>(),
            777 * n as u64
        );
        assert!(
            a.contains(&ClientAction::Finish(ClientEnding::Complete)),
            "{}: {a:?}",
            v.name
        );
    }
}

/// Out-of-range values in any version's parameters get SERVER_ERROR with
/// iperf3's number; keys a later version may add are ignored.
#[test]
fn out_of_range_values_and_unknown_keys_in_a_session() {
    let refuse = |body: &str| {
        let mut s = ServerSession::new(0, Timeouts::default());
        let mut w = Cookie::from_random([b'r'; 36]).as_bytes().to_vec();
        w.extend(frame(body.as_bytes()));
        sent(&s.handle(1, ServerEvent::Bytes(&w)))
    };
    for (body, code) in [
        (
            VERSIONS[4]
                .tcp
                .replace(r#""parallel":2"#, r#""parallel":129"#),
            errno::NUM_STREAMS,
        ),
        (
            VERSIONS[0].tcp.replace(r#""omit":0"#, r#""omit":601"#),
            errno::OMIT,
        ),
        (
            VERSIONS[1].udp.replace(r#""len":1448"#, r#""len":70000"#),
            errno::UDP_BLOCK_SIZE,
        ),
        (
            VERSIONS[4].udp.replace(r#""gro":0"#, r#""gro":7"#),
            errno::RECV_PARAMS,
        ),
    ] {
        assert_eq!(
            refuse(&body),
            [&[State::ParamExchange.byte()][..], &server_error(code, 0)].concat(),
            "{body}"
        );
    }
    let future = VERSIONS[4].tcp.replace(
        r#""client_version""#,
        r#""a_key_of_3_99":{"x":[1]},"client_version""#,
    );
    assert_eq!(
        refuse(&future),
        [State::ParamExchange.byte()],
        "accepted: the caller is asked to check, nothing is refused"
    );
}
