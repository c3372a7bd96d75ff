//! Fuzz harness of the control protocol (`wire::control`): the
//! length-prefixed frame decoder and the JSON messages it yields.
//!
//! Properties: no input panics the decoder or anything a receiver calls on a
//! decoded message (hello check, parameter validation, derived figures of a
//! report); a decoded message re-encodes and decodes to itself; a length
//! prefix above `MAX_FRAME_BYTES` is refused by the push that completes it,
//! and nothing of that push is buffered; the decoder's memory stays within
//! a fixed bound whatever the prefixes claim. See docs/FUZZING.md.

mod fuzz_support;

use fuzz_support::{apply, bytes, config, mutations};
use linerate_core::latency::{
    dissect, ClientStamps, LatencyParams, ReflectorRecord, ReflectorReport, ResponderStamps,
    StageStats,
};
use linerate_core::throughput::model::{
    sender_mss, Egress, End, FlowDir, FlowReport, FlowRole, SideReport, ThroughputParams,
};
use linerate_core::wire::control::{
    check_hello, encode, ControlError, Decoder, FlowSent, Message, SessionKind, LEN_BYTES,
    MAX_FRAME_BYTES,
};
use linerate_core::wire::control_auth;
use proptest::prelude::*;
use serde_json::Value;

/// A key the fuzzed messages cannot know.
fn fuzz_key() -> control_auth::Key {
    control_auth::Key::from_text("fuzz harness key, never on the wire").expect("a valid key")
}

/// The most a decoder may hold, by its own rule.
const BUFFER_LIMIT: usize = 2 * (MAX_FRAME_BYTES + LEN_BYTES);

/// Everything a receiver does with a decoded message, so that a message
/// that decodes but breaks a later step is found too.
fn consume(m: &Message) {
    let _ = m.name();
    match m {
        Message::Hello {
            magic,
            version,
            nonce,
            ..
        } => {
            let _ = check_hello(magic, *version);
            let _ = control_auth::parse_nonce(nonce);
        }
        Message::Challenge { nonce, proof } => {
            let n = control_auth::parse_nonce(nonce).unwrap_or_default();
            // A proof from the wire never checks without the key.
            assert!(!fuzz_key().check_server_proof(&[0; 32], &n, proof));
        }
        Message::Auth { proof } => {
            assert!(!fuzz_key().check_client_proof(&[0; 32], &[1; 32], proof));
        }
        Message::Start { session, .. } => match session {
            SessionKind::Throughput(p) => {
                let _ = p.validate(None);
                let _ = p.validate(Some(u64::MAX));
                let _ = p.validate(Some(0));
                let _ = p.rate_per_flow_bits_per_s();
            }
            SessionKind::Latency(p) => {
                let _ = p.validate(None);
                let _ = p.validate(Some(1_000_000_000));
            }
        },
        Message::Report { side } => {
            for f in &side.flows {
                let _ = (
                    f.bytes_per_s(),
                    f.packets_per_s(),
                    f.cpu_ns_per_byte(),
                    f.cpu_ns_per_packet(),
                );
            }
            if let Some(e) = &side.egress {
                let _ = e.per_packet(u64::MAX);
            }
            let _ = sender_mss([side]);
            let _ = side.sent_packets();
            for dir in [FlowDir::Forward, FlowDir::Reverse] {
                for role in [FlowRole::Sender, FlowRole::Receiver] {
                    let _ = side.sum(dir, role);
                }
            }
        }
        Message::ReflectorRecords { records } => {
            let mut stats = StageStats::default();
            for r in records {
                let c = ClientStamps {
                    app_send_ns: r.seq,
                    app_recv_ns: r.seq.wrapping_mul(3),
                    tx_soft_ns: Some(r.seq ^ 1),
                    rx_kernel_ns: Some(u64::MAX - r.seq),
                    ..ClientStamps::default()
                };
                stats.record(&dissect(&c, Some(&r.stamps), true));
                stats.record(&dissect(&c, Some(&r.stamps), false));
            }
            let _ = stats.summaries();
        }
        _ => {}
    }
    // A decoded message encodes again (to at most the frame limit, as its
    // body came from one) and decodes to itself.
    let frame = encode(m).expect("a decoded message re-encodes");
    let mut d = Decoder::new();
    d.push(&frame).expect("its frame is accepted");
    let again = d.next_message().expect("and decodes").expect("whole");
    assert_eq!(&again, m, "round trip");
}

/// Pushes `wire` in chunks of the given sizes (cycled), popping messages,
/// and checks the decoder's invariants after every push.
fn feed(wire: &[u8], chunk_sizes: &[usize]) -> Result<Vec<Message>, ControlError> {
    let mut d = Decoder::new();
    let mut got = Vec::new();
    let mut rest = wire;
    let mut sizes = chunk_sizes.iter().cycle();
    let mut peak = 0;
    while !rest.is_empty() {
        let n = sizes
            .next()
            .map_or(rest.len(), |&n| n.max(1))
            .min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        let before = d.buffered();
        if let Err(e) = d.push(chunk) {
            // Nothing of a refused push is kept.
            assert_eq!(d.buffered(), before, "refused push left bytes behind ({e})");
            assert!(d.capacity() <= 2 * BUFFER_LIMIT);
            return Err(e);
        }
        assert!(d.buffered() <= BUFFER_LIMIT);
        peak = peak.max(d.buffered());
        // Memory follows what was accepted, never what a prefix claims.
        assert!(
            d.capacity() <= 2 * peak + 64,
            "capacity {} for {} bytes held",
            d.capacity(),
            d.buffered()
        );
        assert!(d.wanted() >= 1);
        loop {
            match d.next_message() {
                Ok(Some(m)) => {
                    consume(&m);
                    got.push(m);
                }
                Ok(None) => break,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(got)
}

fn frame_of(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

/// Valid messages of every variant, with arbitrary numbers in them.
fn message() -> impl Strategy<Value = Message> {
    // Printable ASCII (cheaper to generate than a regex strategy).
    let text = proptest::collection::vec(0x20u8..0x7f, 0..20)
        .prop_map(|b| b.into_iter().map(char::from).collect::<String>());
    prop_oneof![
        (text.clone(), text.clone()).prop_map(|(s, n)| Message::hello(&s, &n)),
        (text.clone(), text.clone()).prop_map(|(nonce, proof)| Message::Challenge { nonce, proof }),
        text.clone().prop_map(|proof| Message::Auth { proof }),
        Just(Message::Opened),
        (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(version, session_id, cookie)| {
            Message::Welcome {
                version,
                session_id,
                cookie,
            }
        }),
        text.clone().prop_map(|reason| Message::Refused { reason }),
        (
            any::<u16>(),
            any::<u64>(),
            proptest::collection::vec(any::<u16>(), 0..4)
        )
            .prop_map(|(streams, duration_ns, udp_ports)| {
                let p = ThroughputParams {
                    streams,
                    duration_ns,
                    ..ThroughputParams::default()
                };
                Message::Start {
                    session: SessionKind::Throughput(p),
                    udp_ports,
                }
            }),
        (any::<u64>(), any::<u64>(), any::<bool>()).prop_map(|(size_bytes, duration_ns, tcp)| {
            let p: LatencyParams = serde_json::from_value(serde_json::json!({
                "protocol": if tcp { "tcp" } else { "udp" },
                "size_bytes": size_bytes,
                "mode": "busy",
                "copy": false,
                "no_udp_checksum": true,
                "duration_ns": duration_ns,
            }))
            .expect("valid latency params");
            Message::Start {
                session: SessionKind::Latency(p),
                udp_ports: vec![],
            }
        }),
        proptest::collection::vec(any::<u16>(), 0..4)
            .prop_map(|udp_ports| Message::Accepted { udp_ports }),
        (any::<u32>(), any::<u64>(), any::<u16>()).prop_map(|(session_id, cookie, flow)| {
            Message::DataHello {
                session_id,
                cookie,
                flow,
            }
        }),
        Just(Message::Go),
        Just(Message::Running),
        proptest::collection::vec((any::<u16>(), any::<u64>(), any::<u64>()), 0..4).prop_map(|f| {
            Message::SendDone {
                flows: f
                    .into_iter()
                    .map(|(flow, packets, bytes)| FlowSent {
                        flow,
                        packets,
                        bytes,
                    })
                    .collect(),
            }
        }),
        (any::<[u64; 5]>(), any::<bool>()).prop_map(|(n, egress)| {
            let mut f = FlowReport::new(1, FlowDir::Forward, FlowRole::Sender, "copy".into());
            f.bytes = n[0];
            f.packets = n[1];
            f.elapsed_ns = n[2];
            f.cpu_user_ns = n[3];
            f.cpu_sys_ns = n[4];
            Message::Report {
                side: SideReport {
                    end: End::Server,
                    complete: true,
                    notes: vec!["n".into()],
                    flows: vec![f],
                    egress: egress.then(|| Egress {
                        interface: "lr-a".into(),
                        packets: n[1],
                    }),
                },
            }
        }),
        (any::<u16>(), text.clone())
            .prop_map(|(port, boot_id)| Message::ReflectorReady { port, boot_id }),
        proptest::collection::vec((any::<u64>(), any::<Option<u64>>()), 0..4).prop_map(|r| {
            Message::ReflectorRecords {
                records: r
                    .into_iter()
                    .map(|(seq, rx)| ReflectorRecord {
                        seq,
                        stamps: ResponderStamps {
                            rx_kernel_ns: rx,
                            ..ResponderStamps::default()
                        },
                    })
                    .collect(),
            }
        }),
        any::<u64>().prop_map(|replies| Message::ReflectorDone {
            report: ReflectorReport {
                replies,
                ..ReflectorReport::default()
            }
        }),
        text.prop_map(|reason| Message::Error { reason }),
    ]
}

/// JSON values a hostile peer could put anywhere.
fn extreme_json() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        Just(Value::Bool(true)),
        Just(serde_json::json!(u64::MAX)),
        Just(serde_json::json!(i64::MIN)),
        Just(serde_json::json!(-1)),
        Just(serde_json::json!(0)),
        Just(serde_json::json!(1e308)),
        Just(serde_json::json!(-0.5)),
        Just(serde_json::json!("")),
        Just(serde_json::json!([])),
        Just(serde_json::json!({})),
        any::<u64>().prop_map(|n| serde_json::json!(n)),
        any::<u32>().prop_map(|n| serde_json::json!(n)),
    ]
}

/// Replaces the `i`-th leaf (in document order, modulo their number) of `v`.
fn replace_leaf(v: &mut Value, i: usize, with: Value) {
    fn count(v: &Value) -> usize {
        match v {
            Value::Array(a) if !a.is_empty() => a.iter().map(count).sum(),
            Value::Object(o) if !o.is_empty() => o.values().map(count).sum(),
            _ => 1,
        }
    }
    fn put(v: &mut Value, mut i: usize, with: Value) {
        let children: Vec<&mut Value> = match v {
            Value::Array(a) if !a.is_empty() => a.iter_mut().collect(),
            Value::Object(o) if !o.is_empty() => o.values_mut().collect(),
            _ => {
                *v = with;
                return;
            }
        };
        for c in children {
            let n = count(c);
            if i < n {
                return put(c, i, with);
            }
            i -= n;
        }
    }
    let n = count(v);
    put(v, i % n, with);
}

proptest! {
    #![proptest_config(config())]

    /// (a) Arbitrary bytes in arbitrary chunks.
    #[test]
    fn any_bytes_in_any_chunking(wire in bytes(96), chunks in proptest::collection::vec(1usize..40, 1..4)) {
        let _ = feed(&wire, &chunks);
    }

    /// (a) A plausible length prefix and an arbitrary body: the message
    /// parser sees arbitrary bytes. Its error, which quotes them, carries
    /// no control character (log injection, issue 16 item 6).
    #[test]
    fn any_body_behind_a_right_prefix(body in bytes(96)) {
        if let Err(e) = feed(&frame_of(&body), &[usize::MAX]) {
            let shown = e.to_string();
            prop_assert!(!shown.chars().any(char::is_control), "{:?}", shown);
        }
    }

    /// (a) A JSON message of a made-up type whose name carries line breaks
    /// and terminal escapes: refused, and the error shows them escaped.
    #[test]
    fn unknown_types_are_quoted_escaped(name in proptest::collection::vec(any::<char>(), 0..24)) {
        let name: String = name.into_iter().collect();
        let body = serde_json::json!({ "type": name }).to_string();
        if let Err(e) = feed(&frame_of(body.as_bytes()), &[usize::MAX]) {
            let shown = e.to_string();
            prop_assert!(!shown.chars().any(char::is_control), "{:?}", shown);
        }
    }

    /// (b) Valid frames, mutated: truncation, bit flips, extreme length
    /// prefixes and fields, appended bytes.
    #[test]
    fn mutated_valid_frames(msgs in proptest::collection::vec(message(), 1..=2), muts in mutations(4), chunks in proptest::collection::vec(1usize..64, 1..3)) {
        let mut wire = Vec::new();
        for m in &msgs {
            wire.extend(encode(m).unwrap());
        }
        // Unmutated, every chunking gives the messages back.
        prop_assert_eq!(&feed(&wire, &chunks).unwrap(), &msgs);
        apply(&mut wire, &muts);
        let _ = feed(&wire, &chunks);
    }

    /// (b) Valid messages with one JSON value replaced by a hostile one
    /// (negative, huge, wrong type): decoding refuses it or yields a
    /// message everything downstream can handle.
    #[test]
    fn hostile_values_in_valid_messages(m in message(), at in any::<usize>(), with in extreme_json()) {
        let mut v = serde_json::to_value(&m).unwrap();
        replace_leaf(&mut v, at, with);
        let body = serde_json::to_vec(&v).unwrap();
        let _ = feed(&frame_of(&body), &[usize::MAX]);
    }

    /// Length prefixes at and around the limit, up to 4 GiB: above the
    /// limit the push completing the prefix is refused, nothing of it is
    /// kept, and no memory follows the claim.
    #[test]
    fn extreme_length_prefixes(len in prop_oneof![
        Just(MAX_FRAME_BYTES as u32), Just(MAX_FRAME_BYTES as u32 + 1),
        Just(u32::MAX), Just(u32::MAX - 1), Just(0x8000_0000u32),
        (MAX_FRAME_BYTES as u32 + 1)..=u32::MAX, 0u32..=MAX_FRAME_BYTES as u32
    ], split in 0usize..=4, body in bytes(64)) {
        let mut wire = len.to_be_bytes().to_vec();
        wire.extend_from_slice(&body);
        let mut d = Decoder::new();
        let first = d.push(&wire[..split]);
        let r = if split < LEN_BYTES {
            prop_assert!(first.is_ok(), "an incomplete prefix is not judged");
            d.push(&wire[split..])
        } else {
            let r = first.and_then(|()| d.push(&wire[split..]));
            if r.is_err() {
                prop_assert_eq!(d.buffered(), 0);
            }
            r
        };
        if len as usize > MAX_FRAME_BYTES {
            prop_assert_eq!(r, Err(ControlError::Oversize(len as usize)));
            prop_assert_eq!(d.buffered(), split.min(LEN_BYTES - 1) * usize::from(split < LEN_BYTES));
        } else {
            prop_assert!(r.is_ok());
            prop_assert_eq!(d.buffered(), wire.len());
        }
        prop_assert!(d.capacity() <= 2 * wire.len() + 64);
    }
}

/// Found by `hostile_values_in_valid_messages`: a server's `Report` with
/// CPU times or counters near `u64::MAX` overflowed (a panic in debug
/// builds, a wrapped figure in release) in `FlowReport::cpu_ns_per_byte`,
/// `SideReport::sent_packets` and `SideReport::sum`.
#[test]
fn regression_report_counters_near_u64_max_do_not_overflow() {
    let mut flows = Vec::new();
    for role in [FlowRole::Sender, FlowRole::Receiver] {
        for _ in 0..2 {
            let mut f = FlowReport::new(0, FlowDir::Forward, role, "copy".into());
            f.bytes = u64::MAX;
            f.packets = u64::MAX;
            f.elapsed_ns = 1;
            f.cpu_user_ns = u64::MAX;
            f.cpu_sys_ns = u64::MAX;
            f.tcp_segments = Some(u64::MAX);
            flows.push(f);
        }
    }
    let side = SideReport {
        end: End::Server,
        complete: true,
        notes: vec![],
        flows,
        egress: None,
    };
    let m = Message::Report { side: side.clone() };
    consume(&m);
    assert_eq!(side.sent_packets(), u64::MAX);
    let s = side.sum(FlowDir::Forward, FlowRole::Receiver).unwrap();
    assert_eq!(
        (s.bytes, s.packets, s.cpu_ns, s.tcp_segments),
        (u64::MAX, u64::MAX, u64::MAX, Some(u64::MAX))
    );
    assert!(side.flows[0].cpu_ns_per_byte().is_some_and(f64::is_finite));
}

/// A body of a million nested arrays (within the frame limit) is refused
/// by serde_json's recursion limit, not by overflowing the stack.
#[test]
fn deeply_nested_json_is_refused() {
    for open in [b'[', b'{'] {
        let body = vec![open; MAX_FRAME_BYTES];
        let mut d = Decoder::new();
        d.push(&frame_of(&body)).expect("within the limit");
        assert!(matches!(d.next_message(), Err(ControlError::Malformed(_))));
        assert_eq!(d.buffered(), 0);
    }
}

/// The largest frame is accepted; one byte more is refused before its body.
#[test]
fn frame_limit_is_exact() {
    let mut d = Decoder::new();
    let mut wire = frame_of(&vec![b' '; MAX_FRAME_BYTES]);
    d.push(&wire).expect("a frame of the limit is accepted");
    assert!(matches!(d.next_message(), Err(ControlError::Malformed(_))));
    wire.push(b' ');
    wire[..LEN_BYTES].copy_from_slice(&(MAX_FRAME_BYTES as u32 + 1).to_be_bytes());
    let mut d = Decoder::new();
    assert_eq!(
        d.push(&wire),
        Err(ControlError::Oversize(MAX_FRAME_BYTES + 1))
    );
    assert_eq!((d.buffered(), d.capacity()), (0, 0));
}
