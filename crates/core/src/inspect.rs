//! `linerate inspect`: what an interface is, how it is set, the ceilings that
//! follow from the line-rate and bus models, and the settings that cap
//! performance, as [`Flag`]s.
//!
//! The data is filled by `linerate_bed::inspect` (sysfs, `ip`, `ethtool`);
//! everything here is pure: [`ceilings`] from the models, [`assess`] the
//! flags of a report.
//!
//! Schema [`SCHEMA`] version 2: version 1 had `facts` and `warnings` (lists
//! of sentences) and `limited_by` as free text; version 2 has the envelope's
//! `flags` (stable codes, below) instead. Version-1 documents read into
//! [`InterfaceReport`] (their `facts` and `warnings` are left out).
//!
//! Flag codes: `virtual_device`, `not_on_pci`, `no_pcie_link`,
//! `hardware_timestamps`, `no_hardware_timestamps`, `timestamping_unknown`,
//! `mps_unknown` (info); `pcie_link_degraded`, `gro_off`, `tso_off`,
//! `rx_checksumming_off`, `mtu_caps_throughput`, `rx_ring_small`,
//! `qdisc_shapes_egress`, `one_rx_queue_no_rps`, `bus_caps_throughput`
//! (warning). None is invalid: inspecting never fails a measurement.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::calc::Bottleneck;
use crate::linerate::{BusCeiling, Encap, PcieLink, Row, STANDARD_MTU_BYTES};
use crate::result::Flag;
use crate::units::BitRate;

/// The `schema` of `linerate inspect IFACE --json`.
pub const SCHEMA: &str = "linerate.inspect";
/// Its version (2: flags instead of facts and warnings).
pub const VERSION: u32 = 2;
/// The `schema` of `linerate inspect --json` (the list).
pub const LIST_SCHEMA: &str = "linerate.inspect.list";
/// Its version (the body of version 1, unchanged).
pub const LIST_VERSION: u32 = 1;
/// Max_Payload_Size the bus ceiling assumes when the device's is unreadable.
pub const ASSUMED_MPS: u32 = 256;
/// An RX ring below this many descriptors, when the driver allows more, is
/// flagged small.
pub const SMALL_RX_RING: u32 = 512;

/// One offload flag as `ethtool -k` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FeatureState {
    /// On or off.
    pub on: bool,
    /// The driver does not let it change.
    pub fixed: bool,
}

/// Ring sizes (descriptors) from `ethtool -g`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Rings {
    /// RX ring now.
    pub rx: Option<u32>,
    /// RX ring maximum.
    pub rx_max: Option<u32>,
    /// TX ring now.
    pub tx: Option<u32>,
    /// TX ring maximum.
    pub tx_max: Option<u32>,
}

/// Timestamping capabilities (`ethtool -T`, i.e. ETHTOOL_GET_TS_INFO).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Timestamping {
    /// Where this came from.
    pub source: String,
    /// `software-transmit`, `hardware-receive`, …
    pub capabilities: Vec<String>,
    /// The PTP hardware clock (`/dev/ptpN`), if any.
    pub phc_index: Option<u32>,
    /// Hardware transmit timestamp modes.
    pub hw_tx_modes: Vec<String>,
    /// Hardware receive filter modes.
    pub hw_rx_filters: Vec<String>,
}

impl Timestamping {
    /// Whether the device stamps packets in hardware.
    pub fn hardware(&self) -> bool {
        self.capabilities.iter().any(|c| c.starts_with("hardware-"))
    }
}

/// The PCIe side of a device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pcie {
    /// PCI address (bus-info).
    pub address: String,
    /// Negotiated link, if the device is PCI Express.
    pub current: Option<PcieLink>,
    /// The most the device supports.
    pub max: Option<PcieLink>,
    /// Max_Payload_Size from the PCIe capability (Device Control), if readable.
    pub mps_bytes: Option<u32>,
    /// NUMA node (-1: none).
    pub numa_node: Option<i32>,
}

impl Pcie {
    /// The DMA ceiling of the negotiated link (MPS [`ASSUMED_MPS`] when
    /// unreadable); None without a PCIe link.
    pub fn bus(&self) -> Option<BusCeiling> {
        BusCeiling::new(self.current?, self.mps_bytes.unwrap_or(ASSUMED_MPS)).ok()
    }
}

/// One interrupt line of the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Irq {
    /// IRQ number.
    pub irq: u32,
    /// Its name in /proc/interrupts.
    pub name: String,
    /// Interrupts so far, all CPUs.
    pub count: u64,
}

/// One ceiling row: what the link and the bus allow for one frame size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ceiling {
    /// Frame length, header to FCS.
    pub frame_bytes: u32,
    /// UDP/IPv4 payload in that frame.
    pub udp4_payload_bytes: u32,
    /// Line-rate frames per second.
    pub link_frames_per_s: f64,
    /// Bus frames per second (PCIe posted writes), if known.
    pub bus_frames_per_s: Option<f64>,
    /// The smaller of the two.
    pub frames_per_s: f64,
    /// UDP payload bits per second at that frame rate.
    pub udp4_payload_bits_per_s: f64,
    /// `link` or `bus`.
    pub limited_by: Bottleneck,
}

/// Everything `linerate inspect IFACE` reports (schema [`SCHEMA`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InterfaceReport {
    /// Interface name.
    pub name: String,
    /// Namespace (None: this process's).
    pub netns: Option<String>,
    /// Link kind (`veth`, `bridge`, …), None for a plain device.
    pub kind: Option<String>,
    /// Driver.
    pub driver: Option<String>,
    /// Driver version.
    pub driver_version: Option<String>,
    /// Firmware version.
    pub firmware: Option<String>,
    /// Operational state.
    pub operstate: Option<String>,
    /// MTU.
    pub mtu_bytes: Option<u32>,
    /// Speed the driver reports, bit/s.
    pub speed_bits_per_s: Option<u64>,
    /// Whether that speed is a real wire speed (false for veth, lo, …).
    pub speed_is_physical: bool,
    /// Duplex.
    pub duplex: Option<String>,
    /// Root qdisc.
    pub qdisc: Option<String>,
    /// RX queues.
    pub rx_queues: Option<u32>,
    /// TX queues.
    pub tx_queues: Option<u32>,
    /// RPS masks of the RX queues (hex).
    pub rps_cpus: Vec<String>,
    /// Offloads by their `ethtool -k` name.
    pub offloads: BTreeMap<String, FeatureState>,
    /// Coalescing parameters that apply (`n/a` ones left out); None when the
    /// driver does not support the query.
    pub coalescing: Option<BTreeMap<String, String>>,
    /// Ring sizes; None when not supported.
    pub rings: Option<Rings>,
    /// Timestamping; None when `ethtool -T` failed.
    pub timestamping: Option<Timestamping>,
    /// PCI/PCIe facts; None when the device is not on PCI.
    pub pcie: Option<Pcie>,
    /// Interrupts.
    pub irqs: Vec<Irq>,
    /// Ceilings from the line-rate model (and the bus model on PCIe).
    pub ceilings: Vec<Ceiling>,
}

impl InterfaceReport {
    /// Whether the device is virtual (no wire of its own).
    pub fn is_virtual(&self) -> bool {
        is_virtual(self.kind.as_deref(), &self.name)
    }

    /// Whether offload `name` is reported off.
    pub fn offload_off(&self, name: &str) -> bool {
        self.offloads.get(name).is_some_and(|s| !s.on)
    }
}

/// A brief line per interface (`linerate inspect` without IFACE).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InterfaceBrief {
    /// Name.
    pub name: String,
    /// Kind (`veth`, `bridge`…) or None for a plain device.
    pub kind: Option<String>,
    /// Operational state.
    pub operstate: Option<String>,
    /// MTU.
    pub mtu_bytes: Option<u32>,
    /// Root qdisc.
    pub qdisc: Option<String>,
    /// Addresses with prefix.
    pub addrs: Vec<String>,
}

/// The interfaces of a namespace (schema [`LIST_SCHEMA`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InterfaceList {
    /// The namespace (None: this process's).
    pub netns: Option<String>,
    /// One entry per interface.
    pub interfaces: Vec<InterfaceBrief>,
}

/// Whether a device of this kind (or named `lo`) is virtual: no wire, no
/// PCIe link, a nominal speed.
pub fn is_virtual(kind: Option<&str>, name: &str) -> bool {
    matches!(
        kind,
        Some("veth" | "bridge" | "dummy" | "ifb" | "vxlan" | "macvlan" | "ipvlan" | "tun")
    ) || name == "lo"
}

/// Ceilings for 64-byte frames and for the MTU's largest frame.
pub fn ceilings(link: BitRate, mtu: Option<u32>, bus: Option<&BusCeiling>) -> Vec<Ceiling> {
    let mut frames = Vec::new();
    if let Ok(f) = Encap::ETHERNET.frame_of_length(64, false) {
        frames.push((f.frame_bytes, 18));
    }
    if let Some(mtu) = mtu {
        if let Ok(f) = Encap::UDP4.frame_for_mtu(mtu, mtu > STANDARD_MTU_BYTES) {
            frames.push((f.frame_bytes, f.payload_bytes));
        }
    }
    let mut out = Vec::new();
    for (frame_bytes, payload) in frames {
        let Ok(frame) = Encap::ETHERNET.frame_of_length(frame_bytes, frame_bytes > 1518) else {
            continue;
        };
        let Ok(row) = Row::new(link, frame) else {
            continue;
        };
        let link_fps = row.frame_rate.per_s();
        let bus_fps = bus.map(|b| b.frame_rate(frame_bytes).per_s());
        let limited_by = bus_fps.map_or(Bottleneck::Link, |b| Bottleneck::of(link_fps, b));
        let fps = match (limited_by, bus_fps) {
            (Bottleneck::Bus, Some(b)) => b,
            _ => link_fps,
        };
        out.push(Ceiling {
            frame_bytes,
            udp4_payload_bytes: payload,
            link_frames_per_s: link_fps,
            bus_frames_per_s: bus_fps,
            frames_per_s: fps,
            udp4_payload_bits_per_s: fps * f64::from(payload) * 8.0,
            limited_by,
        });
    }
    out
}

/// The ceilings a report's facts allow: none for a virtual device or an
/// unknown speed.
pub fn ceilings_of(r: &InterfaceReport) -> Vec<Ceiling> {
    let bus = r.pcie.as_ref().and_then(Pcie::bus);
    match r.speed_bits_per_s {
        Some(s) if r.speed_is_physical && s > 0 => {
            ceilings(BitRate::from_bps(s), r.mtu_bytes, bus.as_ref())
        }
        _ => Vec::new(),
    }
}

/// Every flag of a report: what it lacks (info) and the settings that cap
/// performance (warning).
pub fn assess(r: &InterfaceReport) -> Vec<Flag> {
    let mut flags = Vec::new();
    flags.extend(device(r));
    flags.extend(pcie_link_degraded(r));
    flags.push(timestamps(r));
    flags.extend(gro_off(r));
    flags.extend(tso_off(r));
    flags.extend(rx_checksumming_off(r));
    flags.extend(mtu_caps_throughput(r));
    flags.extend(rx_ring_small(r));
    flags.extend(qdisc_shapes_egress(r));
    flags.extend(one_rx_queue_no_rps(r));
    flags.extend(bus_caps_throughput(r));
    flags.extend(mps_unknown(r));
    flags
}

/// `virtual_device`, `not_on_pci`, `no_pcie_link`: what the device is not.
pub fn device(r: &InterfaceReport) -> Vec<Flag> {
    let mut out = Vec::new();
    if r.is_virtual() {
        let kind = r.kind.as_deref().unwrap_or("loopback");
        out.push(
            Flag::info(
                "virtual_device",
                format!(
                    "{} is a virtual device ({kind}): no wire, no PCIe link, no NUMA node of its \
                     own; its reported speed ({}) is nominal, so no line-rate ceiling applies \
                     (the CPU is the limit)",
                    r.name,
                    r.speed_bits_per_s
                        .map_or_else(|| "none".into(), |s| BitRate::from_bps(s).to_string())
                ),
            )
            .with("kind", kind),
        );
    } else if r.pcie.is_none() {
        out.push(Flag::info(
            "not_on_pci",
            format!(
                "{} is not on a PCI bus (no bus-info): no PCIe facts",
                r.name
            ),
        ));
    }
    if let Some(p) = &r.pcie {
        if p.current.is_none() {
            out.push(
                Flag::info(
                    "no_pcie_link",
                    format!(
                        "PCI device {} shows no PCIe link (conventional PCI or a virtual \
                         device): no bus ceiling",
                        p.address
                    ),
                )
                .with("pci_address", p.address.clone()),
            );
        }
    }
    out
}

/// `pcie_link_degraded`: the link trained below what the device supports.
pub fn pcie_link_degraded(r: &InterfaceReport) -> Option<Flag> {
    let p = r.pcie.as_ref()?;
    let (c, m) = (p.current?, p.max?);
    (c.generation < m.generation || c.lanes < m.lanes).then(|| {
        Flag::warning(
            "pcie_link_degraded",
            format!("PCIe link trained below its maximum: {c} of {m} (slot or riser?)"),
        )
        .with("current", c.to_string())
        .with("max", m.to_string())
    })
}

/// `hardware_timestamps`, `no_hardware_timestamps` or `timestamping_unknown`.
pub fn timestamps(r: &InterfaceReport) -> Flag {
    match &r.timestamping {
        Some(ts) if !ts.hardware() => Flag::info(
            "no_hardware_timestamps",
            format!(
                "no hardware timestamps{}: only software stamps (kernel clock)",
                if ts.phc_index.is_none() {
                    ", no PHC"
                } else {
                    ""
                }
            ),
        ),
        Some(ts) => Flag::info(
            "hardware_timestamps",
            format!(
                "hardware timestamps: {}; PHC /dev/ptp{}",
                ts.capabilities
                    .iter()
                    .filter(|c| c.starts_with("hardware-"))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
                ts.phc_index
                    .map_or_else(|| "none".into(), |i| i.to_string())
            ),
        ),
        None => Flag::info(
            "timestamping_unknown",
            "timestamping capabilities unknown (ethtool -T failed)",
        ),
    }
}

/// `gro_off`: generic receive offload is off.
pub fn gro_off(r: &InterfaceReport) -> Option<Flag> {
    r.offload_off("generic-receive-offload").then(|| {
        Flag::warning(
            "gro_off",
            "gro off: every packet climbs the stack alone (more CPU per byte on receive)",
        )
    })
}

/// `tso_off`: TCP segmentation offload is off on a real device.
pub fn tso_off(r: &InterfaceReport) -> Option<Flag> {
    (r.offload_off("tcp-segmentation-offload") && !r.is_virtual())
        .then(|| Flag::warning("tso_off", "tso off: TCP segments are cut in software"))
}

/// `rx_checksumming_off`: receive checksum offload is off on a real device.
pub fn rx_checksumming_off(r: &InterfaceReport) -> Option<Flag> {
    (r.offload_off("rx-checksumming") && !r.is_virtual()).then(|| {
        Flag::warning(
            "rx_checksumming_off",
            "rx-checksumming off: the CPU verifies every checksum",
        )
    })
}

/// `mtu_caps_throughput`: an MTU below 1500.
pub fn mtu_caps_throughput(r: &InterfaceReport) -> Option<Flag> {
    let m = r.mtu_bytes.filter(|&m| m < STANDARD_MTU_BYTES)?;
    Some(
        Flag::warning(
            "mtu_caps_throughput",
            format!("MTU {m} < 1500: fewer payload bytes per frame, more packets per byte"),
        )
        .with("mtu_bytes", m),
    )
}

/// `rx_ring_small`: an RX ring below [`SMALL_RX_RING`] that could be larger.
pub fn rx_ring_small(r: &InterfaceReport) -> Option<Flag> {
    let Some(Rings {
        rx: Some(rx),
        rx_max: Some(max),
        ..
    }) = r.rings
    else {
        return None;
    };
    (rx < SMALL_RX_RING && max > rx).then(|| {
        Flag::warning(
            "rx_ring_small",
            format!(
                "RX ring {rx} of at most {max}: bursts may overflow it (ethtool -G {} rx {max})",
                r.name
            ),
        )
        .with("rx_ring", rx)
        .with("rx_ring_max", max)
    })
}

/// `qdisc_shapes_egress`: the root qdisc is a shaper.
pub fn qdisc_shapes_egress(r: &InterfaceReport) -> Option<Flag> {
    let q = r.qdisc.as_deref().filter(|q| crate::qdisc::is_shaping(q))?;
    Some(
        Flag::warning(
            "qdisc_shapes_egress",
            format!("root qdisc {q}: egress is shaped"),
        )
        .with("qdisc", q),
    )
}

/// `one_rx_queue_no_rps`: one RX queue and no receive packet steering on a
/// real device.
pub fn one_rx_queue_no_rps(r: &InterfaceReport) -> Option<Flag> {
    let rps_off = !r.rps_cpus.is_empty()
        && r.rps_cpus
            .iter()
            .all(|m| m.chars().all(|c| c == '0' || c == ','));
    (r.rx_queues == Some(1) && rps_off && !r.is_virtual()).then(|| {
        Flag::warning(
            "one_rx_queue_no_rps",
            "one RX queue and RPS off: all receive processing lands on one CPU",
        )
    })
}

/// `bus_caps_throughput`: the PCIe bus, not the link, is the ceiling.
pub fn bus_caps_throughput(r: &InterfaceReport) -> Option<Flag> {
    let c = r
        .ceilings
        .iter()
        .find(|c| c.limited_by == Bottleneck::Bus)?;
    Some(
        Flag::warning(
            "bus_caps_throughput",
            "the PCIe bus, not the link, is the ceiling for some frame sizes",
        )
        .with("frame_bytes", c.frame_bytes)
        .with("frames_per_s", c.frames_per_s),
    )
}

/// `mps_unknown`: the bus ceiling assumes [`ASSUMED_MPS`].
pub fn mps_unknown(r: &InterfaceReport) -> Option<Flag> {
    let p = r.pcie.as_ref()?;
    (p.bus().is_some() && p.mps_bytes.is_none()).then(|| {
        Flag::info(
            "mps_unknown",
            "Max_Payload_Size unreadable: the bus ceiling assumes 256 B",
        )
        .with("assumed_mps_bytes", ASSUMED_MPS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> InterfaceReport {
        InterfaceReport {
            name: "eth1".into(),
            netns: None,
            kind: None,
            driver: Some("igb".into()),
            driver_version: None,
            firmware: None,
            operstate: Some("UP".into()),
            mtu_bytes: Some(1500),
            speed_bits_per_s: Some(10_000_000_000),
            speed_is_physical: true,
            duplex: Some("Full".into()),
            qdisc: Some("mq".into()),
            rx_queues: Some(4),
            tx_queues: Some(4),
            rps_cpus: vec!["0".into()],
            offloads: BTreeMap::new(),
            coalescing: None,
            rings: None,
            timestamping: None,
            pcie: None,
            irqs: Vec::new(),
            ceilings: Vec::new(),
        }
    }

    fn codes(r: &InterfaceReport) -> Vec<String> {
        assess(r).into_iter().map(|f| f.code).collect()
    }

    #[test]
    fn ceilings_link_and_bus() {
        let link = BitRate::from_gbps(10);
        let c = ceilings(link, Some(1500), None);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].frame_bytes, 64);
        assert_eq!(c[0].frames_per_s.round(), 14_880_952.0);
        assert_eq!(c[1].frame_bytes, 1518);
        assert_eq!(c[1].udp4_payload_bytes, 1472);
        assert_eq!(c[0].limited_by, Bottleneck::Link);
        // a PCIe 1.0 x1 bus cannot carry 10G of minimum frames
        let bus = BusCeiling::new("pcie1x1".parse().unwrap(), 128).unwrap();
        let c = ceilings(link, Some(1500), Some(&bus));
        assert_eq!(c[0].limited_by, Bottleneck::Bus);
        assert!(c[0].frames_per_s < c[0].link_frames_per_s);
    }

    #[test]
    fn a_plain_nic_off_pci() {
        let r = report();
        assert_eq!(codes(&r), ["not_on_pci", "timestamping_unknown"]);
    }

    #[test]
    fn settings_that_cap_performance() {
        let mut r = report();
        for f in [
            "generic-receive-offload",
            "tcp-segmentation-offload",
            "rx-checksumming",
        ] {
            r.offloads.insert(
                f.into(),
                FeatureState {
                    on: false,
                    fixed: false,
                },
            );
        }
        r.mtu_bytes = Some(1400);
        r.rings = Some(Rings {
            rx: Some(256),
            rx_max: Some(4096),
            tx: None,
            tx_max: None,
        });
        r.qdisc = Some("tbf".into());
        r.rx_queues = Some(1);
        r.pcie = Some(Pcie {
            address: "0000:01:00.0".into(),
            current: Some("pcie1x1".parse().unwrap()),
            max: Some("pcie3x4".parse().unwrap()),
            mps_bytes: None,
            numa_node: Some(0),
        });
        r.ceilings = ceilings_of(&r);
        let c = codes(&r);
        for want in [
            "pcie_link_degraded",
            "gro_off",
            "tso_off",
            "rx_checksumming_off",
            "mtu_caps_throughput",
            "rx_ring_small",
            "qdisc_shapes_egress",
            "one_rx_queue_no_rps",
            "bus_caps_throughput",
            "mps_unknown",
        ] {
            assert!(c.iter().any(|x| x == want), "{want} not in {c:?}");
        }
        assert!(!c.iter().any(|x| x == "not_on_pci"));
        assert_eq!(crate::result::exit_code(&assess(&r)), 0);
    }

    #[test]
    fn loopback_is_virtual() {
        let mut r = report();
        r.name = "lo".into();
        r.speed_bits_per_s = None;
        r.speed_is_physical = false;
        r.timestamping = Some(Timestamping {
            capabilities: vec!["software-transmit".into()],
            ..Timestamping::default()
        });
        let f = assess(&r);
        assert_eq!(f[0].code, "virtual_device");
        assert!(f[0].message.contains("nominal"));
        assert_eq!(f[1].code, "no_hardware_timestamps");
        assert!(f[1].message.contains("no hardware timestamps, no PHC"));
        assert!(ceilings_of(&r).is_empty());
    }
}
