//! Interface inspection (`linerate inspect`): what an interface is, how it
//! is set, and the ceilings that follow from the line-rate and bus models.
//!
//! Sources, all read-only: `ip -d -j link show` (kind, MTU, queues, qdisc),
//! `ethtool` (`-i` driver, plain for speed/duplex, `-k` offloads, `-c`
//! coalescing, `-g` rings, `-T` timestamping: the kernel's
//! `ETHTOOL_GET_TS_INFO` answer as ethtool prints it, parsed here), sysfs
//! of the PCI device named by ethtool's bus-info (`current_link_speed`,
//! `current_link_width`, `max_link_*`, `numa_node`, `msi_irqs`), the PCIe
//! capability's Device Control register in the device's config space for
//! Max_Payload_Size, and `/proc/interrupts`. Inside another namespace every
//! command runs under `ip netns exec NS`. Every parser is a pure function
//! over the tool's text, unit-tested on captured outputs.

use std::collections::BTreeMap;
use std::path::Path;

use linerate_core::linerate::PcieLink;

use crate::apply::run_command;

pub use linerate_core::inspect::{
    ceilings, Ceiling, FeatureState, InterfaceBrief, InterfaceList, InterfaceReport, Irq, Pcie,
    Rings, Timestamping, SCHEMA,
};

/// Parses `ethtool IF`: speed in bit/s and duplex.
pub fn parse_settings(text: &str) -> (Option<u64>, Option<String>) {
    let mut speed = None;
    let mut duplex = None;
    for line in text.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("Speed:") {
            speed = v
                .trim()
                .strip_suffix("Mb/s")
                .and_then(|n| n.parse::<u64>().ok())
                .map(|m| m * 1_000_000);
        } else if let Some(v) = line.strip_prefix("Duplex:") {
            let v = v.trim();
            if !v.starts_with("Unknown") {
                duplex = Some(v.to_string());
            }
        }
    }
    (speed, duplex)
}

/// Parses `key: value` lines (ethtool -i).
pub fn parse_keyvalues(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .collect()
}

/// Parses `ethtool -k IF`.
pub fn parse_features(text: &str) -> BTreeMap<String, FeatureState> {
    text.lines()
        .filter_map(|l| l.trim().split_once(':'))
        .filter_map(|(k, v)| {
            let mut words = v.split_whitespace();
            let on = match words.next()? {
                "on" => true,
                "off" => false,
                _ => return None,
            };
            Some((
                k.trim().to_string(),
                FeatureState {
                    on,
                    fixed: v.contains("[fixed]"),
                },
            ))
        })
        .collect()
}

/// Parses `ethtool -g IF`.
pub fn parse_rings(text: &str) -> Rings {
    let mut r = Rings::default();
    let mut current = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("Pre-set maximums") {
            current = false;
        } else if t.starts_with("Current hardware settings") {
            current = true;
        }
        let Some((k, v)) = t.split_once(':') else {
            continue;
        };
        let n = v.trim().parse::<u32>().ok();
        match (k.trim(), current) {
            ("RX", false) => r.rx_max = n,
            ("TX", false) => r.tx_max = n,
            ("RX", true) => r.rx = n,
            ("TX", true) => r.tx = n,
            _ => {}
        }
    }
    r
}

/// Parses `ethtool -c IF`: the parameters that apply.
pub fn parse_coalesce(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines().skip(1) {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Adaptive RX:") {
            // "Adaptive RX: off  TX: n/a"
            let mut parts = rest.split("TX:");
            if let Some(rx) = parts.next().map(str::trim).filter(|v| *v != "n/a") {
                out.insert("adaptive-rx".into(), rx.to_string());
            }
            if let Some(tx) = parts.next().map(str::trim).filter(|v| *v != "n/a") {
                out.insert("adaptive-tx".into(), tx.to_string());
            }
            continue;
        }
        if let Some((k, v)) = t.split_once(':') {
            let v = v.trim();
            if !v.is_empty() && v != "n/a" && !k.contains(' ') {
                out.insert(k.trim().to_string(), v.to_string());
            }
        }
    }
    out
}

/// Parses `ethtool -T IF`.
pub fn parse_timestamping(text: &str) -> Timestamping {
    let mut ts = Timestamping {
        source: "ethtool -T, i.e. the kernel's ETHTOOL_GET_TS_INFO answer".into(),
        ..Timestamping::default()
    };
    #[derive(PartialEq)]
    enum Sect {
        None,
        Caps,
        Tx,
        Rx,
    }
    let mut sect = Sect::None;
    for line in text.lines() {
        let indented = line.starts_with('\t') || line.starts_with("  ");
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if indented {
            let item = t.split_whitespace().next().unwrap_or("").to_string();
            match sect {
                Sect::Caps => ts.capabilities.push(item),
                Sect::Tx => ts.hw_tx_modes.push(item),
                Sect::Rx => ts.hw_rx_filters.push(item),
                Sect::None => {}
            }
            continue;
        }
        let (k, v) = t.split_once(':').unwrap_or((t, ""));
        let v = v.trim();
        sect = match k.trim() {
            "Capabilities" => Sect::Caps,
            "Hardware Transmit Timestamp Modes" => Sect::Tx,
            "Hardware Receive Filter Modes" => Sect::Rx,
            "PTP Hardware Clock" => {
                ts.phc_index = v.parse().ok();
                Sect::None
            }
            _ => Sect::None,
        };
        // "Hardware Transmit Timestamp Modes: none" on one line.
        if !v.is_empty() && v != "none" && sect != Sect::None {
            let item = v.to_string();
            match sect {
                Sect::Caps => ts.capabilities.push(item),
                Sect::Tx => ts.hw_tx_modes.push(item),
                Sect::Rx => ts.hw_rx_filters.push(item),
                Sect::None => {}
            }
        }
    }
    ts
}

/// `8.0 GT/s PCIe` and `4` → PCIe 3.0 x4.
pub fn parse_pcie_link(speed: &str, width: &str) -> Option<PcieLink> {
    let gt: f64 = speed.split_whitespace().next()?.parse().ok()?;
    let generation = [
        (2.5, 1),
        (5.0, 2),
        (8.0, 3),
        (16.0, 4),
        (32.0, 5),
        (64.0, 6),
    ]
    .iter()
    .find(|(g, _)| (g - gt).abs() < 0.01)
    .map(|(_, n)| *n)?;
    let lanes: u8 = width.trim().parse().ok()?;
    format!("pcie{generation}x{lanes}").parse().ok()
}

/// Max_Payload_Size from a PCI config space: the PCI Express capability
/// (ID 0x10) in the capability list at 0x34; Device Control at cap + 8,
/// bits 7:5 encode 128 << n (PCIe Base Specification §7.5.3.4).
pub fn mps_from_config(config: &[u8]) -> Option<u32> {
    const STATUS_CAP_LIST: u8 = 0x10;
    let status = *config.get(0x06)?;
    if status & STATUS_CAP_LIST == 0 {
        return None;
    }
    let mut ptr = usize::from(*config.get(0x34)? & 0xfc);
    for _ in 0..48 {
        if ptr == 0 {
            return None;
        }
        let id = *config.get(ptr)?;
        if id == 0x10 {
            let devctl = u16::from_le_bytes([*config.get(ptr + 8)?, *config.get(ptr + 9)?]);
            let code = (devctl >> 5) & 0x7;
            return (code <= 5).then(|| 128u32 << code);
        }
        ptr = usize::from(*config.get(ptr + 1)? & 0xfc);
    }
    None
}

/// The lines of /proc/interrupts that belong to a device: by IRQ number
/// (from msi_irqs) or by name (the interface or the PCI address in it).
pub fn parse_interrupts(text: &str, numbers: &[u32], names: &[&str]) -> Vec<Irq> {
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let Some((num, rest)) = line.trim().split_once(':') else {
            continue;
        };
        let Ok(irq) = num.trim().parse::<u32>() else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let count: u64 = fields.iter().map_while(|f| f.parse::<u64>().ok()).sum();
        let name = fields.last().copied().unwrap_or("").to_string();
        let by_name = names.iter().any(|n| !n.is_empty() && rest.contains(n));
        if numbers.contains(&irq) || by_name {
            out.push(Irq { irq, name, count });
        }
    }
    out
}

/// Runs a read-only command in `netns` (or here); None when it fails (the
/// driver does not support the query, the tool is missing…).
fn query(netns: Option<&str>, argv: &[&str]) -> Option<String> {
    let mut v: Vec<String> = Vec::new();
    if let Some(ns) = netns {
        v.extend(["ip", "netns", "exec", ns].map(String::from));
    }
    v.extend(argv.iter().map(|s| (*s).to_string()));
    run_command(&v).ok()
}

fn read_trim(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.chars()
            .enumerate()
            .all(|(i, c)| [4, 7, 10].contains(&i) || c.is_ascii_hexdigit())
}

/// Lists the interfaces of `netns` (or of this process's namespace).
pub fn list(netns: Option<&str>) -> Result<InterfaceList, crate::BedError> {
    netns.map(crate::guard::check_netns).transpose()?;
    let mut argv: Vec<String> = Vec::new();
    if let Some(ns) = netns {
        argv.extend(["ip", "-n", ns].map(String::from));
    } else {
        argv.push("ip".into());
    }
    argv.extend(["-d", "-j", "addr", "show"].map(String::from));
    let out = crate::apply::run_dump(&argv)?;
    let v: serde_json::Value = serde_json::from_str(&out)
        .map_err(|e| crate::BedError::Invalid(format!("cannot read `ip -j addr`: {e}")))?;
    let interfaces = v
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|l| InterfaceBrief {
            name: l["ifname"].as_str().unwrap_or("?").to_string(),
            kind: l["linkinfo"]["info_kind"].as_str().map(str::to_string),
            operstate: l["operstate"].as_str().map(str::to_string),
            mtu_bytes: l["mtu"].as_u64().and_then(|m| u32::try_from(m).ok()),
            qdisc: l["qdisc"].as_str().map(str::to_string),
            addrs: l["addr_info"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter_map(|a| {
                    Some(format!(
                        "{}/{}",
                        a["local"].as_str()?,
                        a["prefixlen"].as_u64()?
                    ))
                })
                .collect(),
        })
        .collect();
    Ok(InterfaceList {
        netns: netns.map(str::to_string),
        interfaces,
    })
}

/// Inspects interface `name` in `netns` (or here).
pub fn inspect(name: &str, netns: Option<&str>) -> Result<InterfaceReport, crate::BedError> {
    netns.map(crate::guard::check_netns).transpose()?;
    if name.is_empty() || name.len() > 15 || name.contains(['/', ' ', '\0']) {
        return Err(crate::BedError::Invalid(format!(
            "'{name}' is not an interface name"
        )));
    }
    let mut ip: Vec<String> = vec!["ip".into()];
    if let Some(ns) = netns {
        ip.extend(["-n".into(), ns.to_string()]);
    }
    ip.extend(["-d", "-j", "link", "show", "dev", name].map(String::from));
    let link_json = run_command(&ip).map_err(|e| match e {
        crate::BedError::Command { stderr, .. } => crate::BedError::Invalid(format!(
            "no interface '{name}'{}: {stderr}",
            netns
                .map(|n| format!(" in namespace {n}"))
                .unwrap_or_default()
        )),
        other => other,
    })?;
    let link: serde_json::Value = serde_json::from_str(&link_json)
        .map_err(|e| crate::BedError::Invalid(format!("cannot read `ip -j link`: {e}")))?;
    let l = &link[0];
    let kind = l["linkinfo"]["info_kind"].as_str().map(str::to_string);
    let num = |k: &str| l[k].as_u64().and_then(|m| u32::try_from(m).ok());

    let drv = query(netns, &["ethtool", "-i", name])
        .map(|t| parse_keyvalues(&t))
        .unwrap_or_default();
    let (speed, duplex) = query(netns, &["ethtool", name])
        .map(|t| parse_settings(&t))
        .unwrap_or((None, None));
    let offloads = query(netns, &["ethtool", "-k", name])
        .map(|t| parse_features(&t))
        .unwrap_or_default();
    let coalescing = query(netns, &["ethtool", "-c", name]).map(|t| parse_coalesce(&t));
    let rings = query(netns, &["ethtool", "-g", name]).map(|t| parse_rings(&t));
    let timestamping = query(netns, &["ethtool", "-T", name]).map(|t| parse_timestamping(&t));
    let rps_cpus: Vec<String> = query(
        netns,
        &[
            "sh",
            "-c",
            &format!("cat /sys/class/net/{name}/queues/rx-*/rps_cpus 2>/dev/null; true"),
        ],
    )
    .map(|t| t.lines().map(|l| l.trim().to_string()).collect())
    .unwrap_or_default();

    let driver = drv.get("driver").cloned();
    let bus_info = drv.get("bus-info").cloned().filter(|b| is_pci_address(b));
    let pcie = bus_info.as_ref().map(|addr| {
        let dev = Path::new("/sys/bus/pci/devices").join(addr);
        let link_of = |s: &str, w: &str| {
            parse_pcie_link(&read_trim(&dev.join(s))?, &read_trim(&dev.join(w))?)
        };
        Pcie {
            address: addr.clone(),
            current: link_of("current_link_speed", "current_link_width"),
            max: link_of("max_link_speed", "max_link_width"),
            mps_bytes: std::fs::read(dev.join("config"))
                .ok()
                .and_then(|c| mps_from_config(&c)),
            numa_node: read_trim(&dev.join("numa_node")).and_then(|n| n.parse().ok()),
        }
    });
    let mut irq_numbers: Vec<u32> = Vec::new();
    if let Some(addr) = &bus_info {
        if let Ok(d) = std::fs::read_dir(
            Path::new("/sys/bus/pci/devices")
                .join(addr)
                .join("msi_irqs"),
        ) {
            irq_numbers.extend(
                d.filter_map(Result::ok)
                    .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok()),
            );
        }
    }
    let interrupts = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    let mut names: Vec<&str> = Vec::new();
    if bus_info.is_some() {
        // only physical devices name their vectors after themselves
        names.push(name);
    }
    let mut irqs = parse_interrupts(&interrupts, &irq_numbers, &names);
    irqs.sort_by_key(|i| i.irq);

    let speed_is_physical =
        speed.is_some() && !linerate_core::inspect::is_virtual(kind.as_deref(), name);
    let mut report = InterfaceReport {
        name: name.to_string(),
        netns: netns.map(str::to_string),
        kind,
        driver,
        driver_version: drv.get("version").cloned(),
        firmware: drv.get("firmware-version").cloned(),
        operstate: l["operstate"].as_str().map(str::to_string),
        mtu_bytes: num("mtu"),
        speed_bits_per_s: speed,
        speed_is_physical,
        duplex,
        qdisc: l["qdisc"].as_str().map(str::to_string),
        rx_queues: num("num_rx_queues"),
        tx_queues: num("num_tx_queues"),
        rps_cpus,
        offloads,
        coalescing,
        rings,
        timestamping,
        pcie,
        irqs,
        ceilings: Vec::new(),
    };
    report.ceilings = linerate_core::inspect::ceilings_of(&report);
    Ok(report)
}
#[cfg(test)]
mod tests {
    use super::*;

    // Captured on this machine (ethtool 6.1): a veth end and virtio_net eth0.
    const VETH_T: &str = "Time stamping parameters for lr-a:\nCapabilities:\n\tsoftware-transmit\n\tsoftware-receive\n\tsoftware-system-clock\nPTP Hardware Clock: none\nHardware Transmit Timestamp Modes: none\nHardware Receive Filter Modes: none\n";
    // A NIC with hardware stamping (format of ethtool 6.1, e.g. igb/ixgbe).
    const HW_T: &str = "Time stamping parameters for eth1:\nCapabilities:\n\thardware-transmit\n\tsoftware-transmit\n\thardware-receive\n\tsoftware-receive\n\tsoftware-system-clock\n\thardware-raw-clock\nPTP Hardware Clock: 0\nHardware Transmit Timestamp Modes:\n\toff\n\ton\nHardware Receive Filter Modes:\n\tnone\n\tall\n";
    const RINGS: &str = "Ring parameters for eth0:\nPre-set maximums:\nRX:\t\t4096\nRX Mini:\tn/a\nRX Jumbo:\tn/a\nTX:\t\t4096\nCurrent hardware settings:\nRX:\t\t256\nRX Mini:\tn/a\nRX Jumbo:\tn/a\nTX:\t\t512\nRX Buf Len:\t\tn/a\n";
    const COALESCE: &str = "Coalesce parameters for eth0:\nAdaptive RX: off  TX: n/a\nstats-block-usecs: n/a\n\nrx-usecs: 0\nrx-frames: 1\nrx-usecs-irq: n/a\n\ntx-usecs: 0\ntx-frames: 1\n\nCQE mode RX: n/a  TX: n/a\n";

    #[test]
    fn timestamping_software_only() {
        let ts = parse_timestamping(VETH_T);
        assert_eq!(
            ts.capabilities,
            [
                "software-transmit",
                "software-receive",
                "software-system-clock"
            ]
        );
        assert_eq!(ts.phc_index, None);
        assert!(!ts.hardware());
        assert!(ts.hw_tx_modes.is_empty() && ts.hw_rx_filters.is_empty());
    }

    #[test]
    fn timestamping_hardware() {
        let ts = parse_timestamping(HW_T);
        assert!(ts.hardware());
        assert_eq!(ts.phc_index, Some(0));
        assert_eq!(ts.hw_tx_modes, ["off", "on"]);
        assert_eq!(ts.hw_rx_filters, ["none", "all"]);
    }

    #[test]
    fn rings_and_coalescing() {
        let r = parse_rings(RINGS);
        assert_eq!(
            r,
            Rings {
                rx: Some(256),
                rx_max: Some(4096),
                tx: Some(512),
                tx_max: Some(4096)
            }
        );
        let c = parse_coalesce(COALESCE);
        assert_eq!(c.get("adaptive-rx").map(String::as_str), Some("off"));
        assert_eq!(c.get("rx-usecs").map(String::as_str), Some("0"));
        assert!(!c.contains_key("adaptive-tx") && !c.contains_key("stats-block-usecs"));
    }

    #[test]
    fn settings_and_features() {
        let (s, d) = parse_settings("Settings for lr-a:\n\tSpeed: 10000Mb/s\n\tDuplex: Full\n");
        assert_eq!((s, d.as_deref()), (Some(10_000_000_000), Some("Full")));
        let (s, d) = parse_settings("\tSpeed: Unknown!\n\tDuplex: Unknown! (255)\n");
        assert_eq!((s, d), (None, None));
        let f = parse_features("Features for x:\nrx-checksumming: on\n\ttx-checksum-ipv4: off [fixed]\ngeneric-receive-offload: off\n");
        assert_eq!(
            f["rx-checksumming"],
            FeatureState {
                on: true,
                fixed: false
            }
        );
        assert_eq!(
            f["tx-checksum-ipv4"],
            FeatureState {
                on: false,
                fixed: true
            }
        );
        assert_eq!(f.len(), 3);
    }

    #[test]
    fn pcie_links() {
        let l = parse_pcie_link("8.0 GT/s PCIe", "4").unwrap();
        assert_eq!((l.generation, l.lanes), (3, 4));
        let l = parse_pcie_link("2.5 GT/s", "1").unwrap();
        assert_eq!(l.generation, 1);
        assert!(parse_pcie_link("Unknown", "0").is_none());
        assert!(parse_pcie_link("8.0 GT/s PCIe", "3").is_none());
    }

    #[test]
    fn mps_from_a_config_space() {
        let mut c = vec![0u8; 256];
        c[0x06] = 0x10; // capability list present
        c[0x34] = 0x40;
        c[0x40] = 0x01; // power management
        c[0x41] = 0x70;
        c[0x70] = 0x10; // PCI Express
        c[0x71] = 0x00;
        c[0x78] = 0b0010_0000; // DevCtl MPS code 1 = 256 B
        assert_eq!(mps_from_config(&c), Some(256));
        c[0x78] = 0;
        assert_eq!(mps_from_config(&c), Some(128));
        c[0x06] = 0;
        assert_eq!(mps_from_config(&c), None);
        assert_eq!(mps_from_config(&[]), None);
        // a loop in the list ends
        let mut l = vec![0u8; 256];
        l[0x06] = 0x10;
        l[0x34] = 0x40;
        l[0x40] = 0x05;
        l[0x41] = 0x40;
        assert_eq!(mps_from_config(&l), None);
    }

    #[test]
    fn interrupts() {
        let t = "           CPU0       CPU1       \n 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config\n 38:        100         50 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n 40:          1          2 PCI-MSIX-0000:00:04.0   1-edge      eth1-TxRx-0\n";
        let irqs = parse_interrupts(t, &[37, 38], &[]);
        assert_eq!(irqs.len(), 2);
        assert_eq!(irqs[1].count, 150);
        assert_eq!(irqs[1].name, "virtio2-input.0");
        let irqs = parse_interrupts(t, &[], &["eth1"]);
        assert_eq!(irqs[0].irq, 40);
    }

    #[test]
    fn pci_addresses() {
        assert!(is_pci_address("0000:00:03.0"));
        assert!(!is_pci_address(""));
        assert!(!is_pci_address("virtio0"));
    }
}
