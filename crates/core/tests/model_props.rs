//! Property tests of the line-rate model: invariants that must hold for every
//! link speed, encapsulation and size, not only for the reference figures.

use linerate_core::linerate::{Encap, Row, MAX_JUMBO_FRAME_BYTES, MIN_FRAME_BYTES};
use linerate_core::units::BitRate;
use proptest::prelude::*;

const ENCAPS: [&str; 11] = [
    "eth",
    "vlan",
    "qinq",
    "ipv4",
    "ipv6",
    "udp4",
    "udp6",
    "tcp4",
    "tcp6",
    "vlan+udp4",
    "qinq+tcp6",
];

fn encap() -> impl Strategy<Value = Encap> {
    proptest::sample::select(ENCAPS.to_vec()).prop_map(|s| s.parse().expect("known name"))
}

fn link() -> impl Strategy<Value = BitRate> {
    (1_000u64..=800_000_000_000).prop_map(BitRate::from_bps)
}

proptest! {
    /// frames/s × wire bits = link rate: the model loses and invents nothing.
    #[test]
    fn frame_rate_times_wire_bits_is_link_rate(link in link(), e in encap(), payload in 0u32..9000) {
        let frame = e.frame_for_payload(payload, true).expect("fits in a jumbo frame");
        let row = Row::new(link, frame).expect("non-zero link");
        let wire_bits = f64::from(frame.wire_bytes()) * 8.0;
        let back = row.frame_rate.per_s() * wire_bits;
        prop_assert!(((back - link.bps_f64()) / link.bps_f64()).abs() < 1e-12);
        prop_assert!((row.l1_bits_per_s() - link.bps_f64()).abs() / link.bps_f64() < 1e-12);
        prop_assert!((row.frame_time.secs() * row.frame_rate.per_s() - 1.0).abs() < 1e-12);
    }

    /// Efficiency is below 100 % and the layers nest: payload ≤ L3 ≤ L2 < L1.
    #[test]
    fn efficiency_below_one_and_layers_nest(link in link(), e in encap(), payload in 0u32..9000) {
        let frame = e.frame_for_payload(payload, true).expect("fits");
        let row = Row::new(link, frame).expect("non-zero link");
        prop_assert!(row.efficiency() < 1.0);
        prop_assert!(row.efficiency() >= 0.0);
        prop_assert!(row.payload_bits_per_s() <= row.l2_bits_per_s());
        if let Some(l3) = row.l3_bits_per_s() {
            prop_assert!(row.payload_bits_per_s() <= l3 && l3 < row.l2_bits_per_s());
        }
        prop_assert!(row.l2_bits_per_s() < row.l1_bits_per_s());
        prop_assert!(frame.frame_bytes >= MIN_FRAME_BYTES);
        prop_assert!(frame.frame_bytes <= MAX_JUMBO_FRAME_BYTES);
    }

    /// A bigger payload never lowers efficiency or payload throughput, and
    /// strictly raises them once the frame is past the padding.
    #[test]
    fn efficiency_rises_with_size(link in link(), e in encap(), a in 0u32..8999, step in 1u32..1000) {
        let b = (a + step).min(9000);
        let fa = e.frame_for_payload(a, true).expect("fits");
        let fb = e.frame_for_payload(b, true).expect("fits");
        let ra = Row::new(link, fa).expect("row");
        let rb = Row::new(link, fb).expect("row");
        prop_assert!(rb.efficiency() > ra.efficiency());
        prop_assert!(rb.payload_bytes_per_s() > ra.payload_bytes_per_s());
        prop_assert!(rb.frame_rate.per_s() <= ra.frame_rate.per_s());
    }

    /// A faster link carries proportionally more of the same frame.
    #[test]
    fn monotonic_in_link_speed(slow in 1_000u64..400_000_000_000, factor in 1.001f64..2.0, e in encap(), payload in 0u32..1400) {
        let fast = slow + ((slow as f64 * (factor - 1.0)).ceil() as u64).max(1);
        let frame = e.frame_for_payload(payload, false).expect("fits");
        let rs = Row::new(BitRate::from_bps(slow), frame).expect("row");
        let rf = Row::new(BitRate::from_bps(fast), frame).expect("row");
        prop_assert!(rf.frame_rate.per_s() > rs.frame_rate.per_s());
        if payload > 0 {
            prop_assert!(rf.payload_bytes_per_s() > rs.payload_bytes_per_s());
        }
        let ratio = rf.frame_rate.per_s() / rs.frame_rate.per_s();
        prop_assert!((ratio - fast as f64 / slow as f64).abs() < 1e-9);
    }

    /// `frame_of_length` and `frame_for_payload` agree.
    #[test]
    fn frame_and_payload_views_agree(e in encap(), payload in 0u32..1400) {
        let by_payload = e.frame_for_payload(payload, false).expect("fits");
        let unpadded = e.frame_overhead_bytes() + payload;
        let by_length = e.frame_of_length(unpadded, false).expect("fits");
        prop_assert_eq!(by_payload, by_length);
    }

    /// Rates survive a display/parse round trip at the precision shown.
    #[test]
    fn bit_rate_display_round_trips(bps in 1u64..1_000_000_000_000) {
        let r = BitRate::from_bps(bps);
        let shown = r.to_string().replace(' ', "").replace("bit/s", "");
        let back: BitRate = shown.parse().expect("own display parses");
        let err = (back.bps_f64() - r.bps_f64()).abs() / r.bps_f64();
        prop_assert!(err < 5e-3, "{} -> {} -> {}", bps, shown, back.bps());
    }
}
