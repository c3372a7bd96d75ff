//! What `linerate demo` shows, as data: the line-rate model at three link
//! speeds, seed 000's 'ideal' scenario against its maximum, and the
//! loopback runs' and the quick host ceilings' requests (`linerate-io` runs them, `linerate-report`
//! writes the prose).

use std::net::Ipv4Addr;

use crate::calc::{self, CalcError, CalcResult, Carried};
use crate::latency::{EchoProtocol, Peer, Request};
use crate::linerate::{Encap, Row};
use crate::throughput::model::ThroughputParams;
use crate::units::BitRate;

/// Exchanges in the loopback latency part.
pub const LATENCY_EXCHANGES: u64 = 1000;

/// Seconds of the loopback throughput part.
pub const THROUGHPUT_SECONDS: u64 = 1;

/// Frames seed 000 (NXP AN11053) sent in its 'ideal' scenario.
pub const SEED000_FRAMES: u64 = 50;

/// The time it took, seconds.
pub const SEED000_SECONDS: f64 = 6.25e-3;

/// Part 1: the model, and seed 000 measured against it.
#[derive(Debug, Clone)]
pub struct Model {
    /// RFC 2544 frame sizes at 100 Mbit/s, 1 and 10 Gbit/s.
    pub calc: CalcResult,
    /// Seed 000's link and frame: 1518-byte Ethernet frames at 100 Mbit/s.
    pub seed000: Row,
    /// Its payload rate (every frame's payload in [`SEED000_SECONDS`]) as a
    /// share of the maximum, 0..=1.
    pub seed000_share: f64,
}

/// Part 1 computed.
pub fn model() -> Result<Model, CalcError> {
    let links = vec![
        BitRate::from_mbps(100),
        BitRate::from_gbps(1),
        BitRate::from_gbps(10),
    ];
    // `linerate calc --link 100M,1G,10G`: the RFC 2544 frames by default.
    let calc = calc::Config::new(&calc::Request::new(links, Carried::default()))?.run();
    let seed000 = Row::new(
        BitRate::from_mbps(100),
        Encap::ETHERNET.frame_of_length(1518, false)?,
    )?;
    let payload = f64::from(seed000.frame.payload_bytes) * SEED000_FRAMES as f64;
    Ok(Model {
        calc,
        seed000_share: seed000.share_of_payload_rate(payload / SEED000_SECONDS),
        seed000,
    })
}

/// Part 2: `linerate latency 127.0.0.1 --in-process --count 1000`.
pub fn latency_request() -> Request {
    let mut req = Request::new(
        Peer::InProcess(Ipv4Addr::LOCALHOST.into()),
        EchoProtocol::Udp,
    );
    req.count = Some(LATENCY_EXCHANGES);
    req
}

/// Part 3: TCP over loopback with every other parameter at its default.
pub fn throughput_params() -> ThroughputParams {
    ThroughputParams {
        duration_ns: THROUGHPUT_SECONDS * 1_000_000_000,
        ..ThroughputParams::default()
    }
}

/// Part 4: `linerate ceilings --quick`.
pub fn ceilings_request() -> crate::ceilings::Request {
    crate::ceilings::Request {
        quick: true,
        ..crate::ceilings::Request::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed000_reached_most_of_its_maximum() {
        let m = model().unwrap();
        assert_eq!(m.calc.rows.len(), 21);
        // 50 × 1500 B in 6.25 ms is 12 MB/s of a 12.19 MB/s maximum.
        assert!(
            (m.seed000_share - 0.984).abs() < 0.001,
            "{}",
            m.seed000_share
        );
    }
}
