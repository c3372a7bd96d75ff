//! Fuzz harness of ICMP echo (`wire::icmp`): what a raw socket returns
//! (IPv4 with its IP header, IPv6 without) and the requests linerate builds.
//!
//! Properties: no input panics; a checked view's accessors never panic;
//! build→reply→parse gives the 64-bit sequence number back; an ICMPv4
//! request's checksum verifies; mutated valid replies are refused or give
//! the sequence number their bytes say. See docs/FUZZING.md.

mod fuzz_support;

use fuzz_support::{apply, bytes, config, mutations};
use linerate_core::wire::echo;
use linerate_core::wire::icmp::{
    build_linerate_request, icmp_message, linerate_reply, EchoKind, EchoRepr, Family, Packet,
    HEADER_LEN, MIN_LINERATE_LEN,
};
use proptest::prelude::*;

fn family() -> impl Strategy<Value = Family> {
    prop_oneof![Just(Family::V4), Just(Family::V6)]
}

/// Everything a reader does with a datagram.
fn check(d: &[u8], family: Family, ident: u16) {
    if let Ok(msg) = icmp_message(d, family) {
        assert!(msg.len() <= d.len());
        if let Ok(p) = Packet::new_checked(msg) {
            let _ = (p.msg_type(), p.code(), p.checksum(), p.ident(), p.seq_no());
            let _ = (p.payload().len(), p.checksum_ok_v4());
            if let Ok(r) = EchoRepr::parse(&p, family) {
                assert_eq!(
                    (r.ident, r.seq_no, r.family),
                    (p.ident(), p.seq_no(), family)
                );
            }
        }
    }
    if let Ok(e) = linerate_reply(d, family, ident) {
        let _ = (e.seq(), e.session(), e.kind(), e.stamps(), e.to_string());
        assert!(e.len() >= echo::HEADER_LEN);
    }
}

/// The reply a peer's kernel makes of `req`, as a raw socket returns it.
fn reply_datagram(req: &[u8], family: Family) -> Vec<u8> {
    let mut icmp = req.to_vec();
    let p = Packet::new_checked(&icmp[..]).expect("a built request");
    let r = EchoRepr {
        kind: EchoKind::Reply,
        ..EchoRepr::parse(&p, family).expect("an echo request")
    };
    r.emit(&mut icmp).expect("room for a header");
    match family {
        Family::V6 => icmp,
        Family::V4 => {
            let mut d = vec![
                0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 1, 0, 0, 198, 18, 0, 2, 198, 18, 0, 1,
            ];
            d.extend_from_slice(&icmp);
            d
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// (a) Arbitrary datagrams.
    #[test]
    fn any_bytes(d in bytes(80), family in family(), ident: u16) {
        check(&d, family, ident);
    }

    /// Build a request, answer it, read the answer: the sequence number
    /// comes back; the request verifies (ICMPv4).
    #[test]
    fn round_trip(family in family(), ident: u16, seq: u64, len in 0usize..96) {
        let mut req = vec![0u8; len];
        let built = build_linerate_request(&mut req, family, ident, seq);
        prop_assert_eq!(built.is_ok(), len >= MIN_LINERATE_LEN);
        if built.is_err() {
            prop_assert!(req.iter().all(|&b| b == 0), "a refused build writes nothing");
            return Ok(());
        }
        let p = Packet::new_checked(&req[..]).unwrap();
        prop_assert_eq!(EchoRepr::parse(&p, family), Ok(EchoRepr { family, kind: EchoKind::Request, ident, seq_no: seq as u16 }));
        if family == Family::V4 {
            prop_assert!(p.checksum_ok_v4());
        }
        prop_assert!(linerate_reply(&req, Family::V6, ident).is_err() || family == Family::V4);
        let d = reply_datagram(&req, family);
        let e = linerate_reply(&d, family, ident).unwrap();
        prop_assert_eq!((e.seq(), e.len()), (seq, len - HEADER_LEN));
        prop_assert!(linerate_reply(&d, family, ident.wrapping_add(1)).is_err());
        check(&d, family, ident);
    }

    /// (b) Valid replies, mutated (IP header length, types, truncation …).
    #[test]
    fn mutated_valid_replies(family in family(), ident: u16, seq: u64, extra in 0usize..32, muts in mutations(3)) {
        let mut req = vec![0u8; MIN_LINERATE_LEN + extra];
        build_linerate_request(&mut req, family, ident, seq).unwrap();
        let mut d = reply_datagram(&req, family);
        apply(&mut d, &muts);
        check(&d, family, ident);
        if let Ok(e) = linerate_reply(&d, family, ident) {
            // Whatever parsed is what the bytes say.
            let msg = icmp_message(&d, family).unwrap();
            prop_assert_eq!(e.seq(), echo::Packet::new_checked(&msg[HEADER_LEN..]).unwrap().seq());
        }
    }
}
