//! Linux queueing disciplines as the line-rate model sees them: which ones
//! shape a link, and the per-packet figures that make tbf charge what an
//! Ethernet wire carries.
//!
//! tbf (like every rate table of the kernel, `psched_l2t_ns` in
//! net/sched/sch_generic.c) charges a packet `max(len + overhead, mpu)`
//! bytes, where `len` is the `skb->len` the qdisc sees. On an Ethernet (or
//! veth) device that is the frame from the destination MAC to the end of the
//! payload: the Ethernet header is in it, the FCS, preamble/SFD and
//! inter-frame gap are not.

use crate::linerate::{FCS_BYTES, MIN_FRAME_BYTES, WIRE_OVERHEAD_BYTES};

/// tbf's `overhead`: the bytes a frame takes on the wire beyond its
/// `skb->len`: FCS (4) + preamble/SFD (8) + inter-frame gap (12) = 24.
pub const TBF_OVERHEAD_BYTES: u32 = FCS_BYTES + WIRE_OVERHEAD_BYTES;

/// tbf's `mpu`, the least a packet is charged after `overhead` is added:
/// the minimum frame (64 B, FCS included) plus preamble/SFD and gap = 84, so
/// a short, unpadded skb is charged as the padded minimum frame it is on a
/// wire.
pub const TBF_MPU_BYTES: u32 = MIN_FRAME_BYTES + WIRE_OVERHEAD_BYTES;

/// tbf burst at and below 1 Gbit/s (docs/METHODOLOGY.md §3: 64000 B measured
/// within 0.1 %; a 1-MTU burst undershoots by up to 17 % in this VM).
pub const TBF_BURST_MIN_BYTES: u64 = 64_000;

/// The tbf burst for a rate: 64000 bytes up to 1 Gbit/s, above that the
/// bytes of 512 µs at the rate (640 kB at 10G), so the bucket still holds
/// as much time as 64000 B does at 1G and late timers lose no credit; and
/// never less than four frames of the MTU (tbf drops a packet larger than
/// its bucket).
pub fn tbf_burst_bytes(rate: crate::units::BitRate, mtu: Option<u32>) -> u64 {
    let frames = 4 * (u64::from(mtu.unwrap_or(1500)) + 14);
    (rate.bps() / 8 * 512 / 1_000_000)
        .max(TBF_BURST_MIN_BYTES)
        .max(frames)
}

/// The qdisc kinds that can shape a link: limit its rate, or delay or drop
/// packets on purpose. A raw sender that bypasses the qdisc layer
/// (`PACKET_QDISC_BYPASS`, AF_XDP) would escape them, and an interface with
/// one as its root does not send at line rate.
///
/// * `tbf`, `htb`, `hfsc`, `cbq`: rate limiters (cbq left Linux in 6.3, but
///   older kernels still have it);
/// * `cake`: shapes when given a bandwidth; its options are not read here,
///   so it counts as shaping;
/// * `netem`: delay, loss, reordering and an optional rate.
///
/// Not listed: `fq` (its `maxrate` paces each flow, not the link),
/// `fq_codel`, `pfifo_fast`, `mq`, `noqueue` (they schedule, never limit).
pub const SHAPING_QDISCS: &[&str] = &["tbf", "htb", "hfsc", "cbq", "cake", "netem"];

/// Whether qdisc `kind` (as `tc qdisc show` names it) can shape a link.
pub fn is_shaping(kind: &str) -> bool {
    SHAPING_QDISCS.contains(&kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tbf_figures_are_the_wire_model() {
        assert_eq!(TBF_OVERHEAD_BYTES, 24);
        assert_eq!(TBF_MPU_BYTES, 84);
    }

    #[test]
    fn shaping_kinds() {
        for k in ["tbf", "htb", "hfsc", "cbq", "cake", "netem"] {
            assert!(is_shaping(k), "{k}");
        }
        for k in ["fq", "fq_codel", "pfifo_fast", "mq", "noqueue", "TBF", ""] {
            assert!(!is_shaping(k), "{k}");
        }
    }
}
