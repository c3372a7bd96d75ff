//! Property tests of the wire formats: arbitrary bytes never panic a
//! parser, and what is emitted parses back to itself.

use linerate_core::throughput::receiver::FlowReceiver;
use linerate_core::wire::control::{encode, Decoder, FlowSent, Message, MAX_FRAME_BYTES};
use linerate_core::wire::probe::{Pattern, Repr, HEADER_LEN, MAX_SEQ};
use proptest::prelude::*;

proptest! {
    #[test]
    fn control_decoder_survives_any_bytes(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..8)) {
        let mut d = Decoder::new();
        for c in chunks {
            if d.push(&c).is_err() {
                break;
            }
            while let Ok(Some(_)) = d.next_message() {}
        }
        prop_assert!(d.buffered() <= 2 * (MAX_FRAME_BYTES + 4));
    }

    #[test]
    fn control_round_trip(flows in proptest::collection::vec((any::<u16>(), any::<u64>(), any::<u64>()), 0..20), split in 1usize..50) {
        let msg = Message::SendDone { flows: flows.iter().map(|&(flow, packets, bytes)| FlowSent { flow, packets, bytes }).collect() };
        let wire = encode(&msg).unwrap();
        let mut d = Decoder::new();
        let mut got = None;
        for c in wire.chunks(split) {
            d.push(c).unwrap();
            if let Some(m) = d.next_message().unwrap() {
                got = Some(m);
            }
        }
        prop_assert_eq!(got, Some(msg));
    }

    #[test]
    fn probe_parse_survives_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = Repr::parse_bytes(&bytes);
        let mut r = FlowReceiver::new(1, 2, 40);
        r.datagram(&bytes);
        r.stream(&bytes);
        r.datagram_truncated(&bytes, bytes.len());
    }

    #[test]
    fn probe_round_trip(session: u32, flow: u16, seq in 0..=MAX_SEQ, ts: u32, extra in 0usize..100) {
        let r = Repr { session, flow, seq, send_ns_lo32: ts };
        let mut buf = vec![0u8; HEADER_LEN + extra];
        Pattern::new(session, flow, extra).fill_probe(&r, &mut buf).unwrap();
        prop_assert_eq!(Repr::parse_bytes(&buf).unwrap(), r);
        let mut rx = FlowReceiver::new(session, flow, HEADER_LEN + extra);
        rx.datagram(&buf);
        let c = rx.counts(None);
        prop_assert_eq!(c.corrupt, 0);
        prop_assert_eq!(c.seq.received_unique, 1);
    }
}
