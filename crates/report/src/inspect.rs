//! `linerate inspect`: an interface's report and the list of interfaces, as
//! people read them. Every figure comes from `linerate_core::inspect`.

use linerate_core::inspect::{InterfaceList, InterfaceReport};
use linerate_core::result::Flag;
use linerate_core::units::{group_thousands, BitRate};

use crate::column::Scale;

use crate::table::{paragraph, Align, Table, Width};

/// The offloads shown in the table (JSON has every one).
pub const MAIN_OFFLOADS: [(&str, &str); 12] = [
    ("rx-checksumming", "rx-csum"),
    ("tx-checksumming", "tx-csum"),
    ("scatter-gather", "sg"),
    ("tcp-segmentation-offload", "tso"),
    ("generic-segmentation-offload", "gso"),
    ("tx-udp-segmentation", "uso"),
    ("generic-receive-offload", "gro"),
    ("large-receive-offload", "lro"),
    ("rx-gro-list", "gro-list"),
    ("rx-udp-gro-forwarding", "udp-gro-fwd"),
    ("receive-hashing", "rxhash"),
    ("ntuple-filters", "ntuple"),
];

/// The brief list of interfaces, fitted to `width`.
pub fn list(l: &InterfaceList, width: Width) -> String {
    let mut t = Table::new([
        ("interface", Align::Left),
        ("kind", Align::Left),
        ("state", Align::Left),
        ("MTU", Align::Right),
        ("qdisc", Align::Left),
        ("addresses", Align::Left),
    ]);
    for i in &l.interfaces {
        t.row(vec![
            i.name.clone(),
            i.kind.clone().unwrap_or_else(|| "device".into()),
            i.operstate.clone().unwrap_or_default(),
            i.mtu_bytes.map(|m| m.to_string()).unwrap_or_default(),
            i.qdisc.clone().unwrap_or_default(),
            i.addrs.join(" "),
        ]);
    }
    let mut out = t.fit(0, width);
    out.push_str("\n`linerate inspect IFACE` for details.\n");
    out
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |x| x.to_string())
}

/// The human report of one interface, its flags after it, fitted to `width`.
pub fn report(r: &InterfaceReport, flags: &[Flag], width: Width) -> String {
    let mut out = format!(
        "{}{}: {}, driver {}{}, {}, MTU {}, qdisc {}\n\n",
        r.name,
        r.netns
            .as_deref()
            .map(|n| format!(" (namespace {n})"))
            .unwrap_or_default(),
        r.kind.as_deref().unwrap_or("device"),
        opt(r.driver.as_deref()),
        r.driver_version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default(),
        opt(r.operstate.as_deref()),
        opt(r.mtu_bytes),
        opt(r.qdisc.as_deref()),
    );
    let mut kv: Vec<(&str, String)> = Vec::new();
    kv.push((
        "speed",
        match r.speed_bits_per_s {
            Some(s) => format!(
                "{}{}, duplex {}",
                BitRate::from_bps(s),
                if r.speed_is_physical {
                    ""
                } else {
                    " (nominal: not a wire speed)"
                },
                opt(r.duplex.as_deref())
            ),
            None => "unknown (the driver reports none)".into(),
        },
    ));
    kv.push((
        "queues",
        format!(
            "rx {}, tx {}; rps_cpus {}",
            opt(r.rx_queues),
            opt(r.tx_queues),
            if r.rps_cpus.is_empty() {
                "-".into()
            } else {
                r.rps_cpus.join(" ")
            }
        ),
    ));
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for (long, short) in MAIN_OFFLOADS {
        if let Some(s) = r.offloads.get(long) {
            let label = format!("{short}{}", if s.fixed { "*" } else { "" });
            if s.on {
                on.push(label);
            } else {
                off.push(label);
            }
        }
    }
    kv.push((
        "offloads",
        if on.is_empty() && off.is_empty() {
            "unknown (ethtool -k failed)".into()
        } else {
            format!(
                "on: {}; off: {} (* fixed by the driver)",
                if on.is_empty() {
                    "-".into()
                } else {
                    on.join(" ")
                },
                if off.is_empty() {
                    "-".into()
                } else {
                    off.join(" ")
                }
            )
        },
    ));
    kv.push((
        "rings",
        match r.rings {
            Some(g) => format!(
                "rx {} of max {}, tx {} of max {} descriptors",
                opt(g.rx),
                opt(g.rx_max),
                opt(g.tx),
                opt(g.tx_max)
            ),
            None => "not reported by the driver".into(),
        },
    ));
    kv.push((
        "coalescing",
        match &r.coalescing {
            Some(c) if !c.is_empty() => c
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            Some(_) => "nothing applies".into(),
            None => "not supported by the driver".into(),
        },
    ));
    kv.push((
        "timestamps",
        match &r.timestamping {
            Some(ts) => format!(
                "{}; PHC {}; hw tx modes {}; hw rx filters {} (from {})",
                ts.capabilities.join(", "),
                ts.phc_index
                    .map_or_else(|| "none".into(), |i| format!("/dev/ptp{i}")),
                if ts.hw_tx_modes.is_empty() {
                    "none".into()
                } else {
                    ts.hw_tx_modes.join(",")
                },
                if ts.hw_rx_filters.is_empty() {
                    "none".into()
                } else {
                    ts.hw_rx_filters.join(",")
                },
                ts.source
            ),
            None => "unknown (ethtool -T failed)".into(),
        },
    ));
    kv.push((
        "PCIe",
        match &r.pcie {
            Some(p) => format!(
                "{}: link {}, max {}, Max_Payload_Size {}, NUMA node {}",
                p.address,
                p.current
                    .map_or_else(|| "none (not PCI Express)".into(), |l| l.to_string()),
                opt(p.max),
                p.mps_bytes
                    .map_or_else(|| "unknown".into(), |m| format!("{m} B")),
                p.numa_node
                    .filter(|n| *n >= 0)
                    .map_or_else(|| "none".into(), |n| n.to_string())
            ),
            None => "none (the device is not on PCI)".into(),
        },
    ));
    kv.push((
        "IRQs",
        if r.irqs.is_empty() {
            "none of its own".into()
        } else {
            r.irqs
                .iter()
                .map(|i| format!("{} {} ({})", i.irq, i.name, group_thousands(i.count)))
                .collect::<Vec<_>>()
                .join(", ")
        },
    ));
    for (k, v) in kv {
        out.push_str(&paragraph(
            &format!("  {k:<11} "),
            &" ".repeat(14),
            &v,
            width,
        ));
    }
    if !r.ceilings.is_empty() {
        out.push_str(&format!(
            "\nCeilings at {} (line-rate model{}):\n",
            BitRate::from_bps(r.speed_bits_per_s.unwrap_or(0)),
            if r.ceilings.iter().any(|c| c.bus_frames_per_s.is_some()) {
                " and PCIe bus model"
            } else {
                ""
            }
        ));
        let mut t = Table::new([
            ("frame B", Align::Right),
            ("UDP payload B", Align::Right),
            ("link frames/s", Align::Right),
            ("bus frames/s", Align::Right),
            ("UDP payload rate", Align::Right),
            ("limited by", Align::Left),
        ]);
        let rate = Scale::si(r.ceilings.iter().map(|c| c.udp4_payload_bits_per_s));
        for c in &r.ceilings {
            t.row(vec![
                c.frame_bytes.to_string(),
                c.udp4_payload_bytes.to_string(),
                group_thousands(c.link_frames_per_s.round() as u64),
                c.bus_frames_per_s
                    .map_or_else(|| "-".into(), |b| group_thousands(b.round() as u64)),
                rate.bits_per_s(c.udp4_payload_bits_per_s),
                c.limited_by.name().to_string(),
            ]);
        }
        out.push_str(&t.fit(2, width));
    }
    if !flags.is_empty() {
        out.push('\n');
        out.push_str(&crate::flags::render(flags, width));
    }
    out
}
