//! `linerate inspect [IFACE]`: an interface's settings, capabilities and the
//! ceilings that follow from them (library: `linerate_bed::inspect`).

use clap::Args;
use linerate_bed::inspect::{self, InterfaceReport};
use linerate_core::units::{format_bits_per_s, group_thousands, BitRate};
use linerate_report::table::{Align, Table};
use serde::Serialize;

use crate::output::{print, print_json};
use crate::Failure;

/// Flags of `linerate inspect`.
#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    /// The interface; without it, a brief list of all interfaces.
    pub(crate) iface: Option<String>,
    /// Look inside this network namespace (e.g. lr-mybed-a).
    #[arg(long, value_name = "NS")]
    pub(crate) netns: Option<String>,
    /// Look at a bed's host instead: its namespace, and its test interface
    /// unless IFACE is given.
    #[arg(long, value_name = "NAME", conflicts_with = "netns")]
    pub(crate) bed: Option<String>,
    /// The bed's host: a, b or dut.
    #[arg(long, value_name = "HOST", default_value = "a", requires = "bed")]
    pub(crate) host: String,
    /// One JSON document (schema linerate.inspect version 1).
    #[arg(long)]
    pub(crate) json: bool,
}

/// The offloads shown in the table (JSON has every one).
const MAIN_OFFLOADS: [(&str, &str); 12] = [
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

/// Runs `linerate inspect`.
pub(crate) fn run(args: &InspectArgs, ctx: &crate::Ctx) -> Result<(), Failure> {
    let _ = ctx.width;
    if let Some(name) = &args.bed {
        let bed = linerate_bed::Bed::open(name)?;
        let (Some(ns), Some(iface)) = (bed.netns(&args.host), bed.iface(&args.host)) else {
            return Err(anyhow::anyhow!("bed {} has no host '{}'", bed.name(), args.host).into());
        };
        let args = InspectArgs {
            iface: Some(args.iface.clone().unwrap_or_else(|| iface.to_string())),
            netns: Some(ns.to_string()),
            bed: None,
            host: args.host.clone(),
            json: args.json,
        };
        return run(&args, ctx);
    }
    if let Some(ns) = &args.netns {
        if ns.is_empty() || ns.contains('/') || !linerate_bed::guard::netns_exists(ns) {
            return Err(
                anyhow::anyhow!("no network namespace '{ns}' (ip netns list shows them)").into(),
            );
        }
    }
    let Some(iface) = &args.iface else {
        return list(args);
    };
    let r = inspect::inspect(iface, args.netns.as_deref())?;
    if args.json {
        print_json(&r)
    } else {
        print(&render(&r))
    }
}

fn list(args: &InspectArgs) -> Result<(), Failure> {
    let all = inspect::list(args.netns.as_deref())?;
    if args.json {
        #[derive(Serialize)]
        struct List<'a> {
            schema: &'static str,
            version: u32,
            netns: Option<&'a str>,
            interfaces: &'a [inspect::InterfaceBrief],
        }
        return print_json(&List {
            schema: "linerate.inspect.list",
            version: 1,
            netns: args.netns.as_deref(),
            interfaces: &all,
        });
    }
    let mut t = Table::new([
        ("interface", Align::Left),
        ("kind", Align::Left),
        ("state", Align::Left),
        ("MTU", Align::Right),
        ("qdisc", Align::Left),
        ("addresses", Align::Left),
    ]);
    for i in &all {
        t.row(vec![
            i.name.clone(),
            i.kind.clone().unwrap_or_else(|| "device".into()),
            i.operstate.clone().unwrap_or_default(),
            i.mtu_bytes.map(|m| m.to_string()).unwrap_or_default(),
            i.qdisc.clone().unwrap_or_default(),
            i.addrs.join(" "),
        ]);
    }
    let mut out = t.render(0);
    out.push_str("\n`linerate inspect IFACE` for details.\n");
    print(&out)
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |x| x.to_string())
}

/// The human report.
fn render(r: &InterfaceReport) -> String {
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
        out.push_str(&format!("  {k:<11} {v}\n"));
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
        for c in &r.ceilings {
            t.row(vec![
                c.frame_bytes.to_string(),
                c.udp4_payload_bytes.to_string(),
                group_thousands(c.link_frames_per_s.round() as u64),
                c.bus_frames_per_s
                    .map_or_else(|| "-".into(), |b| group_thousands(b.round() as u64)),
                format_bits_per_s(c.udp4_payload_bits_per_s),
                c.limited_by.to_string(),
            ]);
        }
        out.push_str(&t.render(2));
    }
    if !r.facts.is_empty() {
        out.push('\n');
        for f in &r.facts {
            out.push_str(&format!("  note: {f}\n"));
        }
    }
    if !r.warnings.is_empty() {
        out.push('\n');
        for w in &r.warnings {
            out.push_str(&format!("  warning: {w}\n"));
        }
    }
    out
}
