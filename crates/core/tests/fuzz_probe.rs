//! Fuzz harness of the probe header (`wire::probe`) and of the receiver
//! that reads probes (`throughput::receiver::FlowReceiver`, datagram and
//! stream paths).
//!
//! Properties: no input panics; a parsed header re-emits to the same 18
//! bytes; emit→parse is the identity (48-bit sequence numbers); a valid
//! probe with mutations either fails to parse or parses to the fields its
//! bytes say. See docs/FUZZING.md.

mod fuzz_support;

use fuzz_support::{apply, bytes, config, mutations};
use linerate_core::throughput::receiver::FlowReceiver;
use linerate_core::wire::probe::{delay_ns, Packet, Pattern, Repr, HEADER_LEN, MAX_SEQ};
use proptest::prelude::*;

/// Parses `b` and checks what a parsed view promises.
fn check(b: &[u8]) {
    let parsed = Repr::parse_bytes(b);
    match Packet::new_checked(b) {
        Ok(p) => {
            let r = Repr::parse(&p);
            assert_eq!(parsed, Ok(r));
            assert!(r.seq <= MAX_SEQ);
            assert_eq!(p.payload().len(), b.len() - HEADER_LEN);
            let mut again = [0u8; HEADER_LEN];
            r.emit(&mut again).expect("room for a header");
            assert_eq!(&again[..], &b[..HEADER_LEN], "re-emitted header");
            let _ = delay_ns(r.send_ns_lo32, u64::MAX);
        }
        Err(e) => assert_eq!(parsed, Err(e)),
    }
    // What a receiver does with it, whatever it is.
    let mut rx = FlowReceiver::new(1, 2, 64);
    rx.datagram(b);
    rx.datagram_truncated(b, b.len().saturating_mul(2));
    rx.stream(b);
    let _ = rx.counts(None);
}

fn valid(session: u32, flow: u16, seq: u64, ts: u32, extra: usize) -> (Repr, Vec<u8>) {
    let r = Repr {
        session,
        flow,
        seq,
        send_ns_lo32: ts,
    };
    let mut buf = vec![0u8; HEADER_LEN + extra];
    Pattern::new(session, flow, extra)
        .fill_probe(&r, &mut buf)
        .expect("sized");
    (r, buf)
}

proptest! {
    #![proptest_config(config())]

    /// (a) Arbitrary bytes.
    #[test]
    fn any_bytes(b in bytes(48)) {
        check(&b);
    }

    /// (b) Valid probes, mutated (truncated, bit flips, extreme fields).
    #[test]
    fn mutated_valid_probes(session: u32, flow: u16, seq in 0..=MAX_SEQ, ts: u32, extra in 0usize..40, muts in mutations(3)) {
        let (r, mut buf) = valid(session, flow, seq, ts, extra);
        prop_assert_eq!(Repr::parse_bytes(&buf), Ok(r));
        apply(&mut buf, &muts);
        check(&buf);
    }

    /// Emit→parse round trip, any sequence number (the top 16 bits are
    /// dropped), any buffer length; the receiver counts a valid probe once
    /// and finds no corruption.
    #[test]
    fn round_trip(session: u32, flow: u16, seq: u64, ts: u32, len in 0usize..64) {
        let r = Repr { session, flow, seq, send_ns_lo32: ts };
        let mut buf = vec![0u8; len];
        let emitted = r.emit(&mut buf);
        prop_assert_eq!(emitted.is_ok(), len >= HEADER_LEN);
        if emitted.is_ok() {
            let want = Repr { seq: seq & MAX_SEQ, ..r };
            prop_assert_eq!(Repr::parse_bytes(&buf), Ok(want));
            let (_, full) = valid(session, flow, seq & MAX_SEQ, ts, len - HEADER_LEN);
            let mut rx = FlowReceiver::new(session, flow, len);
            rx.datagram(&full);
            let c = rx.counts(None);
            prop_assert_eq!((c.corrupt, c.seq.received_unique), (0, 1));
        }
    }

    /// The pattern matcher takes any offset and payload.
    #[test]
    fn pattern_matches_any_offset(session: u32, flow: u16, len in 0usize..64, offset: usize, payload in bytes(16)) {
        let p = Pattern::new(session, flow, len);
        prop_assert_eq!(p.bytes().len(), len);
        let _ = p.matches(offset, &payload);
        if offset <= len {
            prop_assert!(p.matches(offset, &p.bytes()[offset..]));
        }
    }
}
