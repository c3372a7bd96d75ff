//! `linerate calc`: the line-rate model for a list of links and frames, with
//! every derived figure (frames/s, bits/s at each layer, efficiency, the bus
//! ceiling and the bottleneck) computed here, once, and stored in the result.
//!
//! [`Config`] is what the flags say, validated ([`Config::new`]);
//! [`CalcResult`] is the versioned document (schema [`SCHEMA`]) renderers
//! read: they format its fields and compute nothing.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::linerate::{
    BusCeiling, BusError, Encap, Frame, ModelError, PcieLink, Row, RFC2544_FRAME_SIZES,
    WIRE_OVERHEAD_BYTES,
};
use crate::units::{BitRate, ByteCount};

/// Schema name of the JSON document.
pub const SCHEMA: &str = "linerate.calc";
/// Schema version: the body is the version-1 body (the envelope's fields are
/// additions).
pub const VERSION: u32 = 1;
/// Default PCIe Max_Payload_Size, the most common setting on servers.
pub const DEFAULT_MPS: u32 = 256;
/// Largest size a [`SizeList`] accepts (1 MiB): no frame comes near it.
pub const MAX_LISTED_SIZE: u32 = 1 << 20;

/// A list of byte sizes, or the RFC 2544 frame sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeList {
    /// `rfc2544`: [`RFC2544_FRAME_SIZES`].
    Rfc2544,
    /// Sizes as given.
    Sizes(Vec<u32>),
}

impl SizeList {
    /// The sizes, with `rfc2544` expanded.
    pub fn sizes(&self) -> Vec<u32> {
        match self {
            Self::Rfc2544 => RFC2544_FRAME_SIZES.to_vec(),
            Self::Sizes(v) => v.clone(),
        }
    }
}

impl FromStr for SizeList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().eq_ignore_ascii_case("rfc2544") {
            return Ok(Self::Rfc2544);
        }
        let mut sizes = Vec::new();
        for part in s.split(',') {
            let n: ByteCount = part.parse().map_err(|e| format!("{e}"))?;
            let n = u32::try_from(n.get())
                .ok()
                .filter(|&n| n <= MAX_LISTED_SIZE)
                .ok_or_else(|| format!("'{}' is too large for a frame", part.trim()))?;
            sizes.push(n);
        }
        Ok(Self::Sizes(sizes))
    }
}

/// What the sizes given are sizes of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Carried {
    /// Frame lengths, header to FCS.
    Frames(SizeList),
    /// Payloads above the innermost header.
    Payloads(Vec<u32>),
    /// MTUs (L2 payload): the largest payload that fits each.
    Mtus(Vec<u32>),
}

impl Default for Carried {
    fn default() -> Self {
        Self::Frames(SizeList::Rfc2544)
    }
}

/// What is asked for, before validation.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Link speeds.
    pub links: Vec<BitRate>,
    /// The sizes and what they measure.
    pub carried: Carried,
    /// What wraps the payload.
    pub encap: Encap,
    /// TCP option bytes (None: the encapsulation's default).
    pub tcp_options: Option<u32>,
    /// IP option bytes.
    pub ip_options: Option<u32>,
    /// Frames above the IEEE maximum allowed.
    pub jumbo: bool,
    /// Also the wire time of this many back-to-back frames.
    pub frames: Option<u64>,
    /// A PCIe bus to set beside the link.
    pub bus: Option<PcieLink>,
    /// Its Max_Payload_Size (None: [`DEFAULT_MPS`]).
    pub mps: Option<u32>,
}

impl Request {
    /// `carried` on `links`, everything else at its default: plain Ethernet,
    /// the encapsulation's own options, no jumbo frames, no frame count, no
    /// bus.
    pub fn new(links: Vec<BitRate>, carried: Carried) -> Self {
        Self {
            links,
            carried,
            encap: Encap::ETHERNET,
            tcp_options: None,
            ip_options: None,
            jumbo: false,
            frames: None,
            bus: None,
            mps: None,
        }
    }
}

/// Why a request cannot be modelled. Messages say what is wrong, never which
/// flag to change (the binary adds that).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalcError {
    /// A frame, payload, MTU or option the model refuses.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A link speed the model refuses.
    #[error("link {link}")]
    Link {
        /// The link.
        link: BitRate,
        /// Why.
        #[source]
        source: ModelError,
    },
    /// A bus the model does not know.
    #[error(transparent)]
    Bus(#[from] BusError),
    /// No link speed at all.
    #[error("no link speed given")]
    NoLink,
}

impl CalcError {
    /// Whether allowing jumbo frames would have made the request valid.
    pub fn jumbo_would_allow(&self) -> bool {
        matches!(self, Self::Model(m) if m.jumbo_would_allow())
    }
}

/// A validated `linerate calc`: the frames and links to model.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// One block of rows per link, in this order.
    pub links: Vec<BitRate>,
    /// The frames, in this order.
    pub frames: Vec<Frame>,
    /// Also the wire time of this many back-to-back frames.
    pub count: Option<u64>,
    /// The bus beside the link.
    pub bus: Option<BusCeiling>,
}

impl Config {
    /// Validates a request: every frame fits its encapsulation, every link is
    /// above zero, the bus is a PCIe link with a valid MPS.
    pub fn new(req: &Request) -> Result<Self, CalcError> {
        if req.links.is_empty() {
            return Err(CalcError::NoLink);
        }
        let mut encap = req.encap;
        if let Some(b) = req.tcp_options {
            encap = encap.with_tcp_options(b)?;
        }
        if let Some(b) = req.ip_options {
            encap = encap.with_ip_options(b)?;
        }
        let frames = match &req.carried {
            Carried::Payloads(v) => v
                .iter()
                .map(|&p| encap.frame_for_payload(p, req.jumbo))
                .collect::<Result<Vec<_>, _>>()?,
            Carried::Mtus(v) => v
                .iter()
                .map(|&m| encap.frame_for_mtu(m, req.jumbo))
                .collect::<Result<Vec<_>, _>>()?,
            Carried::Frames(list) => list
                .sizes()
                .into_iter()
                .map(|f| encap.frame_of_length(f, req.jumbo))
                .collect::<Result<Vec<_>, _>>()?,
        };
        for &link in &req.links {
            if let Some(&f) = frames.first() {
                Row::new(link, f).map_err(|source| CalcError::Link { link, source })?;
            }
        }
        let bus = match req.bus {
            Some(b) => Some(BusCeiling::new(b, req.mps.unwrap_or(DEFAULT_MPS))?),
            None => None,
        };
        Ok(Self {
            links: req.links.clone(),
            frames,
            count: req.frames,
            bus,
        })
    }

    /// The model's rows, link by link.
    pub fn rows(&self) -> Vec<Row> {
        self.links
            .iter()
            .flat_map(|&l| self.frames.iter().filter_map(move |&f| Row::new(l, f).ok()))
            .collect()
    }

    /// Computes the result.
    pub fn run(&self) -> CalcResult {
        CalcResult::new(&self.rows(), self.count, self.bus.as_ref())
    }
}

/// Which of link and bus limits the frame rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Bottleneck {
    /// The link's line rate.
    Link,
    /// The PCIe bus's DMA rate.
    Bus,
}

impl Bottleneck {
    /// `bus` when the bus moves fewer frames per second than the link carries.
    pub fn of(link_frames_per_s: f64, bus_frames_per_s: f64) -> Self {
        if bus_frames_per_s < link_frames_per_s {
            Self::Bus
        } else {
            Self::Link
        }
    }

    /// `link` or `bus`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Link => "link",
            Self::Bus => "bus",
        }
    }
}

/// One row: what a link carries at best with one frame. Every field name
/// carries its unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CalcRow {
    /// Link speed (L1 bit rate).
    pub link_bits_per_s: u64,
    /// Encapsulation name (`eth`, `vlan+udp4`, …).
    pub encap: String,
    /// Frame from destination MAC to FCS, padding included.
    pub frame_bytes: u32,
    /// Frame plus preamble, SFD and IFG.
    pub wire_bytes: u32,
    /// Payload above the innermost header.
    pub payload_bytes: u32,
    /// Pad bytes added to reach the 64-byte minimum.
    pub padding_bytes: u32,
    /// IP packet length, if there is an IP header.
    pub l3_bytes: Option<u32>,
    /// Frames per second at line rate (exact, not rounded).
    pub frames_per_s: f64,
    /// Wire time of one frame.
    pub frame_time_ns: f64,
    /// Payload bytes per second.
    pub payload_bytes_per_s: f64,
    /// Wire bit rate (equals the link speed).
    pub l1_bits_per_s: f64,
    /// Frame bit rate.
    pub l2_bits_per_s: f64,
    /// IP packet bit rate, if there is an IP header.
    pub l3_bits_per_s: Option<f64>,
    /// Payload bit rate.
    pub payload_bits_per_s: f64,
    /// Payload share of the wire.
    pub efficiency_pct: f64,
    /// The N of "N back-to-back frames", when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<u64>,
    /// Wire time of N frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames_time_ns: Option<f64>,
    /// Frames per second the bus can DMA, with a bus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_frames_per_s: Option<f64>,
    /// Which of link and bus limits the frame rate, with a bus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<Bottleneck>,
}

impl CalcRow {
    /// The row of `row`, with the time of `count` frames and the bus beside it.
    pub fn new(row: &Row, count: Option<u64>, bus: Option<&BusCeiling>) -> Self {
        let bus_fps = bus.map(|b| b.frame_rate(row.frame.frame_bytes).per_s());
        Self {
            link_bits_per_s: row.link.bps(),
            encap: row.frame.encap.to_string(),
            frame_bytes: row.frame.frame_bytes,
            wire_bytes: row.frame.wire_bytes(),
            payload_bytes: row.frame.payload_bytes,
            padding_bytes: row.frame.padding_bytes,
            l3_bytes: row.l3_bits_per_s().map(|_| row.frame.l3_bytes()),
            frames_per_s: row.frame_rate.per_s(),
            frame_time_ns: row.frame_time.nanos(),
            payload_bytes_per_s: row.payload_bytes_per_s(),
            l1_bits_per_s: row.l1_bits_per_s(),
            l2_bits_per_s: row.l2_bits_per_s(),
            l3_bits_per_s: row.l3_bits_per_s(),
            payload_bits_per_s: row.payload_bits_per_s(),
            efficiency_pct: row.efficiency() * 100.0,
            frames: count,
            frames_time_ns: count.map(|n| row.time_for_frames(n).nanos()),
            bus_frames_per_s: bus_fps,
            bottleneck: bus_fps.map(|b| Bottleneck::of(row.frame_rate.per_s(), b)),
        }
    }
}

/// The PCIe bus ceiling beside the link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BusFigures {
    /// `PCIe 3.0 x4`.
    pub bus: String,
    /// Generation.
    pub generation: u8,
    /// Lanes.
    pub lanes: u8,
    /// Max_Payload_Size.
    pub mps_bytes: u32,
    /// Per-lane transfer rate.
    pub transfers_per_s: f64,
    /// Raw bit rate of all lanes.
    pub raw_bits_per_s: f64,
    /// After line encoding.
    pub encoded_bits_per_s: f64,
    /// TLP header and framing per TLP.
    pub tlp_overhead_bytes: u32,
    /// DMA payload ceiling, one direction.
    pub payload_bits_per_s: f64,
}

impl From<&BusCeiling> for BusFigures {
    fn from(b: &BusCeiling) -> Self {
        Self {
            bus: b.link.to_string(),
            generation: b.link.generation,
            lanes: b.link.lanes,
            mps_bytes: b.mps,
            transfers_per_s: b.gt_per_s * 1e9,
            raw_bits_per_s: b.raw_bits_per_s,
            encoded_bits_per_s: b.encoded_bits_per_s,
            tlp_overhead_bytes: b.tlp_overhead_bytes,
            payload_bits_per_s: b.payload_bits_per_s,
        }
    }
}

/// What `linerate calc` computed (schema [`SCHEMA`], version [`VERSION`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CalcResult {
    /// Preamble + SFD + IFG per frame.
    pub wire_overhead_bytes: u32,
    /// The bus, when one was given.
    #[serde(default)]
    pub bus: Option<BusFigures>,
    /// The rows, link by link.
    pub rows: Vec<CalcRow>,
}

impl CalcResult {
    /// The result for these rows.
    pub fn new(rows: &[Row], count: Option<u64>, bus: Option<&BusCeiling>) -> Self {
        Self {
            wire_overhead_bytes: WIRE_OVERHEAD_BYTES,
            bus: bus.map(BusFigures::from),
            rows: rows.iter().map(|r| CalcRow::new(r, count, bus)).collect(),
        }
    }

    /// The N of `--frames N`, if the rows carry it.
    pub fn count(&self) -> Option<u64> {
        self.rows.iter().find_map(|r| r.frames)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(carried: Carried) -> Request {
        Request {
            frames: Some(50),
            ..Request::new(vec![BitRate::from_mbps(100)], carried)
        }
    }

    #[test]
    fn seed_000_rows() {
        let c = Config::new(&request(Carried::Frames(SizeList::Sizes(vec![64, 1518])))).unwrap();
        let r = c.run();
        assert_eq!(r.wire_overhead_bytes, 20);
        assert_eq!(r.rows.len(), 2);
        assert!((r.rows[0].frames_per_s - 148_809.52).abs() < 0.01);
        assert_eq!(r.rows[0].wire_bytes, 84);
        assert!((r.rows[1].frames_time_ns.unwrap() - 6_152_000.0).abs() < 1e-6);
        assert_eq!(r.count(), Some(50));
        assert!(r.rows[0].bottleneck.is_none());
    }

    #[test]
    fn errors_name_no_flags() {
        let e = Config::new(&request(Carried::Frames(SizeList::Sizes(vec![9018])))).unwrap_err();
        assert!(e.jumbo_would_allow());
        assert!(!e.to_string().contains("--"), "{e}");
        let e = Config::new(&request(Carried::Mtus(vec![9000]))).unwrap_err();
        assert!(
            e.jumbo_would_allow() && !e.to_string().contains("--"),
            "{e}"
        );
        let mut r = request(Carried::Frames(SizeList::Sizes(vec![20_000])));
        r.jumbo = true;
        let e = Config::new(&r).unwrap_err();
        assert!(
            !e.jumbo_would_allow() && e.to_string().contains("16384"),
            "{e}"
        );
        let mut r = request(Carried::default());
        r.links = vec![BitRate::from_bps(0)];
        assert!(matches!(Config::new(&r), Err(CalcError::Link { .. })));
    }

    #[test]
    fn bus_and_bottleneck() {
        let mut r = request(Carried::Frames(SizeList::Sizes(vec![64])));
        r.links = vec![BitRate::from_gbps(100)];
        r.bus = Some("pcie3x4".parse().unwrap());
        let res = Config::new(&r).unwrap().run();
        assert_eq!(res.rows[0].bottleneck, Some(Bottleneck::Bus));
        assert_eq!(res.bus.as_ref().unwrap().mps_bytes, DEFAULT_MPS);
    }

    #[test]
    fn size_lists() {
        assert_eq!("rfc2544".parse::<SizeList>().unwrap().sizes().len(), 7);
        assert_eq!(
            "64,1518".parse::<SizeList>().unwrap(),
            SizeList::Sizes(vec![64, 1518])
        );
        assert!("64,big".parse::<SizeList>().is_err());
        assert!("4G".parse::<SizeList>().is_err());
    }
}
