//! Fuzz harness of the RFC 2544 test frame (`wire::testframe`): the
//! Ethernet / IPv4 or IPv6 / UDP view, its parser, its setters and the
//! builder from a frame size.
//!
//! Properties: no input panics a checked view's accessors, setters,
//! checksum or the parser; a parsed frame re-emits to a frame that parses
//! to the same fields; emit→parse is the identity for every size and field;
//! mutated valid frames (truncated, bit flips, IP/UDP length fields at
//! extremes) are refused or parse to what their bytes say. See
//! docs/FUZZING.md.

mod fuzz_support;

use std::net::{IpAddr, Ipv6Addr};

use fuzz_support::{apply, bytes, config, mutations, Mutation};
use linerate_core::wire::testframe::{
    is_benchmark_ip, TestFrame, TestFrameRepr, ETHERTYPE_IPV6, MIN_BUFFER_LEN,
};
use proptest::prelude::*;

/// Reads everything a checked view offers, parses, and re-emits.
fn check(b: &[u8]) {
    let Ok(v) = TestFrame::new_checked(b) else {
        assert!(b.len() < 80, "{} bytes refused", b.len());
        return;
    };
    let _ = (v.dst_mac(), v.src_mac(), v.ethertype(), v.ip_ver_byte());
    let _ = (
        v.ip_total_len(),
        v.ttl(),
        v.ip_proto(),
        v.src_ip(),
        v.dst_ip(),
    );
    let _ = (v.checksum_ok(), v.src_port(), v.dst_port(), v.udp_len());
    let _ = (v.magic(), v.stream(), v.seq(), v.tx_ns(), v.is_ipv6());
    // Setters and the checksum fix-up on a copy.
    let mut w = b.to_vec();
    let mut m = TestFrame::new_checked(&mut w[..]).expect("same length");
    m.set_seq(1);
    m.set_tx_ns(2);
    m.set_stream(3);
    m.fill_udp_checksum();
    let _ = m.checksum_ok();
    if let Ok(r) = TestFrameRepr::parse(&v) {
        assert!(r.buffer_len() <= b.len());
        assert_eq!(r.src_ip.is_ipv6(), r.dst_ip.is_ipv6());
        assert_eq!(r.src_ip, v.src_ip());
        let mut again = vec![0u8; r.buffer_len()];
        r.emit(&mut again);
        let back = TestFrameRepr::parse(&TestFrame::new_checked(&again[..]).expect("emitted"));
        assert_eq!(back, Ok(r), "parse→emit→parse");
        // The fields parsed are what the view reads from the bytes.
        assert_eq!(
            (r.dst_mac, r.src_mac, r.dst_ip, r.ttl),
            (v.dst_mac(), v.src_mac(), v.dst_ip(), v.ttl())
        );
        assert_eq!(
            (r.src_port, r.dst_port, r.stream, r.seq, r.tx_ns),
            (v.src_port(), v.dst_port(), v.stream(), v.seq(), v.tx_ns())
        );
        assert_eq!(usize::from(r.udp_payload_len) + 8, usize::from(v.udp_len()));
        assert!(v.checksum_ok());
    }
}

fn v4() -> (IpAddr, IpAddr) {
    (IpAddr::from([198, 18, 0, 1]), IpAddr::from([198, 19, 0, 2]))
}

fn v6() -> (IpAddr, IpAddr) {
    (
        IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1)),
        IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2)),
    )
}

fn frame(size: u32, ipv6: bool, stream: u16, seq: u32, tx: u64) -> (TestFrameRepr, Vec<u8>) {
    let (s, d) = if ipv6 { v6() } else { v4() };
    let mut r = TestFrameRepr::for_frame_size(
        size,
        size > 1518,
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        s,
        d,
    )
    .expect("a valid size");
    r.stream = stream;
    r.seq = seq;
    r.tx_ns = tx;
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut buf);
    (r, buf)
}

/// Frame sizes: mostly small (fast), sometimes up to the jumbo maximum.
fn size(ipv6: bool) -> impl Strategy<Value = u32> {
    let min = if ipv6 { 84 } else { 64 };
    prop_oneof![8 => min..=200u32, 1 => min..=1518u32, 1 => 1519u32..=9018]
}

/// Mutations aimed at the IP and UDP length fields and the EtherType.
fn length_field_mutation(ipv6: bool) -> impl Strategy<Value = Mutation> {
    let fields: Vec<usize> = if ipv6 {
        vec![12, 18, 58]
    } else {
        vec![12, 16, 38]
    };
    (
        proptest::sample::select(fields),
        prop_oneof![
            Just(0u16),
            Just(1),
            Just(8),
            Just(25),
            Just(26),
            Just(0xffff),
            Just(0x86dd),
            Just(0x0800),
            any::<u16>()
        ],
    )
        .prop_map(|(at, value)| Mutation::Extreme16 { at, value })
}

proptest! {
    #![proptest_config(config())]

    /// (a) Arbitrary bytes, with the IPv4 or IPv6 EtherType half the time.
    #[test]
    fn any_bytes(mut b in bytes(120), ether in 0u8..4) {
        if b.len() > 14 && ether < 2 {
            let t: u16 = if ether == 0 { 0x0800 } else { ETHERTYPE_IPV6 };
            b[12..14].copy_from_slice(&t.to_be_bytes());
            b[14] = if ether == 0 { 0x45 } else { 0x60 };
        }
        check(&b);
    }

    /// Emit→parse is the identity, IPv4 and IPv6, every size and field.
    #[test]
    fn round_trip(ipv6: bool, size in (any::<bool>()).prop_flat_map(size), stream: u16, seq: u32, tx: u64, ttl: u8) {
        let min = if ipv6 { 84 } else { 64 };
        let (mut r, _) = frame(size.max(min), ipv6, stream, seq, tx);
        r.ttl = ttl;
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf);
        prop_assert_eq!(buf.len() as u32 + 4, size.max(min));
        let v = TestFrame::new_checked(&buf[..]).unwrap();
        prop_assert!(v.checksum_ok());
        prop_assert_eq!(TestFrameRepr::parse(&v), Ok(r));
        prop_assert!(is_benchmark_ip(r.src_ip) && is_benchmark_ip(r.dst_ip));
    }

    /// (b) Valid frames, mutated anywhere.
    #[test]
    fn mutated_valid_frames(ipv6: bool, size in (any::<bool>()).prop_flat_map(size), stream: u16, seq: u32, tx: u64, muts in mutations(3)) {
        let min = if ipv6 { 84 } else { 64 };
        let (_, mut buf) = frame(size.max(min), ipv6, stream, seq, tx);
        apply(&mut buf, &muts);
        check(&buf);
    }

    /// (b) Valid frames with the EtherType, IP length or UDP length at
    /// extremes, plus other mutations.
    #[test]
    fn length_fields_at_extremes(ipv6: bool, m in (any::<bool>()).prop_flat_map(length_field_mutation), more in mutations(2), seq: u32) {
        let (_, mut buf) = frame(if ipv6 { 128 } else { 64 }, ipv6, 1, seq, 2);
        apply(&mut buf, &[m]);
        check(&buf);
        apply(&mut buf, &more);
        check(&buf);
    }

    /// The builder takes any frame size (user input): it refuses what does
    /// not fit and builds what does, of exactly that size.
    #[test]
    fn any_frame_size(size: u32, jumbo: bool, ipv6: bool, mixed: bool) {
        let (s, d) = if ipv6 { v6() } else { v4() };
        let d = if mixed { if ipv6 { v4().1 } else { v6().1 } } else { d };
        if let Ok(r) = TestFrameRepr::for_frame_size(size, jumbo, [0; 6], [0; 6], s, d) {
            prop_assert!(!mixed);
            prop_assert_eq!(r.frame_bytes(), size);
            prop_assert!(r.buffer_len() >= MIN_BUFFER_LEN);
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut buf);
            prop_assert_eq!(TestFrameRepr::parse(&TestFrame::new_checked(&buf[..]).unwrap()), Ok(r));
        }
    }
}
