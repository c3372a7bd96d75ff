//! What a bed should be: its name, topology and settings, validated.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use linerate_core::emu::{QueueLimit, Shaper};
use linerate_core::units::{parse_duration, BitRate};
use serde::{Deserialize, Serialize};

use crate::BedError;

/// Prefix of every namespace and link linerate creates.
pub const PREFIX: &str = "lr-";

/// Longest bed name: `lr-<name>-dut` stays well inside file-name limits and
/// readable in `ip netns list`.
pub const MAX_NAME_LEN: usize = 20;

/// Highest MTU accepted (the veth maximum is 65535 bytes minus headers).
pub const MAX_MTU: u32 = 65_000;
/// Lowest MTU accepted (IPv6 needs 1280; IPv4 576 would do, but a bed
/// always carries IPv6 too).
pub const MIN_MTU: u32 = 1280;

/// How the hosts of a bed are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Topology {
    /// Hosts `a` and `b` joined by one veth.
    Pair,
    /// `a` — `dut` (a Linux bridge with two ports) — `b`, one subnet.
    Bridge,
    /// `a` — `dut` (IPv4 and IPv6 forwarding) — `b`, two subnets.
    Router,
}

impl Topology {
    /// All topologies.
    pub const ALL: [Self; 3] = [Self::Pair, Self::Bridge, Self::Router];

    /// The lowercase name used on the command line and in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pair => "pair",
            Self::Bridge => "bridge",
            Self::Router => "router",
        }
    }

    /// The hosts of this topology, in creation order.
    pub fn hosts(self) -> &'static [&'static str] {
        match self {
            Self::Pair => &["a", "b"],
            Self::Bridge | Self::Router => &["a", "b", "dut"],
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Topology {
    type Err = BedError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "pair" => Ok(Self::Pair),
            "bridge" => Ok(Self::Bridge),
            "router" => Ok(Self::Router),
            _ => Err(BedError::Invalid(format!(
                "unknown topology '{s}' (expected pair, bridge or router)"
            ))),
        }
    }
}

/// An interface feature as `ethtool -K` sets it and `ethtool -k` shows it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Feature {
    /// Generic receive offload (`gro`).
    Gro,
    /// Generic segmentation offload (`gso`).
    Gso,
    /// TCP segmentation offload (`tso`).
    Tso,
    /// Large receive offload (`lro`).
    Lro,
    /// Scatter-gather (`sg`).
    Sg,
    /// Transmit checksum offload (`tx`).
    TxChecksum,
    /// Receive checksum offload (`rx`).
    RxChecksum,
    /// UDP segmentation (`tx-udp-segmentation`, UDP_SEGMENT / "USO").
    TxUdpSegmentation,
    /// GRO of fraglists (`rx-gro-list`).
    RxGroList,
    /// UDP GRO on forwarded traffic (`rx-udp-gro-forwarding`).
    RxUdpGroForwarding,
    /// VLAN tag stripping on receive (`rxvlan`).
    RxVlan,
    /// VLAN tag insertion on transmit (`txvlan`).
    TxVlan,
}

impl Feature {
    /// Every feature, with the names accepted for it (first = canonical).
    const NAMES: [(Self, &'static [&'static str]); 12] = [
        (Self::Gro, &["gro", "generic-receive-offload", "rx-gro"]),
        (
            Self::Gso,
            &[
                "gso",
                "generic-segmentation-offload",
                "tx-generic-segmentation",
            ],
        ),
        (Self::Tso, &["tso", "tcp-segmentation-offload"]),
        (Self::Lro, &["lro", "large-receive-offload", "rx-lro"]),
        (Self::Sg, &["sg", "scatter-gather"]),
        (
            Self::TxChecksum,
            &["tx-checksum", "tx", "tx-checksumming", "tx-csum"],
        ),
        (
            Self::RxChecksum,
            &["rx-checksum", "rx", "rx-checksumming", "rx-csum"],
        ),
        (
            Self::TxUdpSegmentation,
            &["tx-udp-segmentation", "uso", "udp-segmentation", "ufo"],
        ),
        (Self::RxGroList, &["rx-gro-list", "gro-list"]),
        (
            Self::RxUdpGroForwarding,
            &["rx-udp-gro-forwarding", "udp-gro-forwarding"],
        ),
        (Self::RxVlan, &["rxvlan", "rx-vlan-offload"]),
        (Self::TxVlan, &["txvlan", "tx-vlan-offload"]),
    ];

    /// The name `linerate` prints and accepts first.
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(f, _)| *f == self)
            .map_or("?", |(_, names)| names[0])
    }

    /// The argument of `ethtool -K DEV <arg> on|off`.
    pub fn ethtool_set_name(self) -> &'static str {
        match self {
            Self::Gro => "gro",
            Self::Gso => "gso",
            Self::Tso => "tso",
            Self::Lro => "lro",
            Self::Sg => "sg",
            Self::TxChecksum => "tx",
            Self::RxChecksum => "rx",
            Self::TxUdpSegmentation => "tx-udp-segmentation",
            Self::RxGroList => "rx-gro-list",
            Self::RxUdpGroForwarding => "rx-udp-gro-forwarding",
            Self::RxVlan => "rxvlan",
            Self::TxVlan => "txvlan",
        }
    }

    /// The line `ethtool -k DEV` prints for it (before the colon).
    pub fn ethtool_show_name(self) -> &'static str {
        match self {
            Self::Gro => "generic-receive-offload",
            Self::Gso => "generic-segmentation-offload",
            Self::Tso => "tcp-segmentation-offload",
            Self::Lro => "large-receive-offload",
            Self::Sg => "scatter-gather",
            Self::TxChecksum => "tx-checksumming",
            Self::RxChecksum => "rx-checksumming",
            Self::TxUdpSegmentation => "tx-udp-segmentation",
            Self::RxGroList => "rx-gro-list",
            Self::RxUdpGroForwarding => "rx-udp-gro-forwarding",
            Self::RxVlan => "rx-vlan-offload",
            Self::TxVlan => "tx-vlan-offload",
        }
    }

    /// Offloads that hand the qdisc one super-packet for many frames: tbf
    /// charges its overhead once per skb, so they must be off where a link
    /// is emulated (docs/METHODOLOGY.md §3).
    pub const SUPER_PACKET: [Self; 4] = [Self::Gso, Self::Tso, Self::TxUdpSegmentation, Self::Gro];
}

impl FromStr for Feature {
    type Err = BedError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let want = s.trim().to_ascii_lowercase();
        Self::NAMES
            .iter()
            .find(|(_, names)| names.contains(&want.as_str()))
            .map(|(f, _)| *f)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::NAMES.iter().map(|(_, n)| n[0]).collect();
                BedError::Invalid(format!(
                    "unknown offload '{s}' (known: {})",
                    known.join(", ")
                ))
            })
    }
}

/// Offload settings: feature → on (true) or off (false).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct Offloads(pub BTreeMap<Feature, bool>);

impl Offloads {
    /// No settings.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromStr for Offloads {
    type Err = BedError;

    /// `gro=off,tso=off,tx-checksum=on`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut map = BTreeMap::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| BedError::Invalid(format!("offload '{part}' is not NAME=on|off")))?;
            let on = match v.trim().to_ascii_lowercase().as_str() {
                "on" | "1" | "true" | "yes" => true,
                "off" | "0" | "false" | "no" => false,
                _ => {
                    return Err(BedError::Invalid(format!(
                        "offload '{part}': value must be on or off"
                    )))
                }
            };
            map.insert(k.parse()?, on);
        }
        Ok(Self(map))
    }
}

impl fmt::Display for Offloads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| format!("{}={}", k.name(), if *v { "on" } else { "off" }))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// A TCP buffer triple as `net.ipv4.tcp_rmem` takes it: min, default, max bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TcpMem {
    /// Minimum bytes.
    pub min_bytes: u64,
    /// Default bytes (the socket buffer a new socket starts with).
    pub default_bytes: u64,
    /// Maximum bytes (autotuning ceiling).
    pub max_bytes: u64,
}

impl FromStr for TcpMem {
    type Err = BedError;

    /// `4096,131072,6291456` (or blank-separated).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BedError::Invalid(format!("'{s}' is not MIN,DEFAULT,MAX bytes"));
        let v: Vec<u64> = s
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty())
            .map(|p| p.parse::<u64>().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        match v[..] {
            [min, def, max] if min <= def && def <= max && max > 0 && max <= 1 << 31 => Ok(Self {
                min_bytes: min,
                default_bytes: def,
                max_bytes: max,
            }),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for TcpMem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}",
            self.min_bytes, self.default_bytes, self.max_bytes
        )
    }
}

/// What a bed should be. Build with [`BedSpec::new`], set fields, pass to
/// [`crate::Bed::up`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BedSpec {
    /// The bed's name, without the `lr-` prefix.
    pub name: String,
    /// How the hosts are joined.
    pub topology: Topology,
    /// Emulated link speed (tbf on every egress of the path, per direction).
    #[serde(rename = "link_bits_per_s")]
    #[schemars(with = "Option<u64>")]
    pub link: Option<BitRate>,
    /// Random loss in percent on the receiving hosts' ingress (nftables).
    pub loss_pct: Option<f64>,
    /// MTU of every interface on the path.
    #[serde(rename = "mtu_bytes")]
    pub mtu: Option<u32>,
    /// Offload settings on every interface on the path.
    pub offloads: Offloads,
    /// Receive packet steering to all CPUs on every interface on the path.
    pub rps: bool,
    /// `net.ipv4.tcp_rmem` in every host (per network namespace).
    pub tcp_rmem: Option<TcpMem>,
    /// `net.ipv4.tcp_wmem` in every host (per network namespace).
    pub tcp_wmem: Option<TcpMem>,
    /// What makes the link: linerate's emulator (`emu`) or tbf. Absent:
    /// tbf (beds stored before the emulator existed were tbf).
    #[serde(default = "legacy_shaper", skip_serializing_if = "is_tbf")]
    pub shaper: Shaper,
    /// What the emulator adds besides the rate (emu only; absent: nothing).
    #[serde(default, skip_serializing_if = "Impair::is_empty")]
    pub impair: Impair,
    /// Why the shaper was chosen, when the bed asked for none and got tbf
    /// (the link beyond the emulator's measured limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shaper_note: Option<String>,
    /// The emulator polls its ports between frames instead of sleeping
    /// (`--emu-poll`): it notices a frame at once, at the cost of a CPU
    /// while traffic flows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub emu_poll: bool,
}

fn legacy_shaper() -> Shaper {
    Shaper::Tbf
}

fn is_tbf(s: &Shaper) -> bool {
    *s == Shaper::Tbf
}

/// A setting per direction: from a to b, and from b to a.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PerDir<T> {
    /// Frames from host a towards host b.
    pub a_to_b: T,
    /// Frames from host b towards host a.
    pub b_to_a: T,
}

impl<T: Copy + PartialEq + fmt::Display> PerDir<T> {
    /// Both directions alike.
    pub fn both(v: T) -> Self {
        Self {
            a_to_b: v,
            b_to_a: v,
        }
    }

    /// `X` (both directions) or `X/Y` (a to b, b to a), each parsed by `one`.
    pub fn parse(s: &str, one: impl Fn(&str) -> Result<T, String>) -> Result<Self, String> {
        match s.split_once('/') {
            Some((x, y)) => Ok(Self {
                a_to_b: one(x)?,
                b_to_a: one(y)?,
            }),
            None => one(s).map(Self::both),
        }
    }

    /// `X`, or `X/Y` when the directions differ.
    pub fn show(&self, unit: &str) -> String {
        if self.a_to_b == self.b_to_a {
            format!("{}{unit}", self.a_to_b)
        } else {
            format!("{}{unit}/{}{unit} (a→b/b→a)", self.a_to_b, self.b_to_a)
        }
    }
}

/// A duration such as `1ms` or `250us`, in ns.
pub fn parse_delay_ns(s: &str) -> Result<u64, String> {
    let d = parse_duration(s.trim()).map_err(|e| e.to_string())?;
    if d.as_secs() > 10 {
        return Err(format!("'{s}' is longer than 10 s"));
    }
    Ok(d.as_nanos() as u64)
}

/// A percentage between 0 and 100.
pub fn parse_pct(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage"))?;
    if !(v.is_finite() && (0.0..=100.0).contains(&v)) {
        return Err(format!("'{s}' is not a percentage between 0 and 100"));
    }
    Ok(v)
}

/// The emulator's impairments besides the rate (and `--loss`, which the
/// emulator takes over when it runs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Impair {
    /// Propagation delay, ns.
    pub delay_ns: PerDir<u64>,
    /// Jitter of that delay (uniform ±), ns.
    pub jitter_ns: PerDir<u64>,
    /// Random duplication, percent.
    pub duplicate_pct: PerDir<f64>,
    /// Random reordering, percent (frames that skip the delay).
    pub reorder_pct: PerDir<f64>,
    /// The queue limit of every direction (default 1000 frames).
    pub limit: Option<QueueLimit>,
}

impl Impair {
    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The settings given, each as `name value`.
    pub fn settings(&self) -> Vec<String> {
        let mut v = Vec::new();
        let ms = |p: PerDir<u64>| PerDir {
            a_to_b: p.a_to_b as f64 / 1e6,
            b_to_a: p.b_to_a as f64 / 1e6,
        };
        if self.delay_ns != PerDir::default() {
            v.push(format!("delay {}", ms(self.delay_ns).show(" ms")));
        }
        if self.jitter_ns != PerDir::default() {
            v.push(format!("jitter {}", ms(self.jitter_ns).show(" ms")));
        }
        if self.duplicate_pct != PerDir::default() {
            v.push(format!("duplicate {}", self.duplicate_pct.show("%")));
        }
        if self.reorder_pct != PerDir::default() {
            v.push(format!("reorder {}", self.reorder_pct.show("%")));
        }
        if let Some(l) = self.limit {
            v.push(format!("limit {l}"));
        }
        v
    }
}

impl BedSpec {
    /// A bed called `name` (without the `lr-` prefix) with no settings.
    pub fn new(name: impl Into<String>, topology: Topology) -> Self {
        Self {
            name: name.into(),
            topology,
            link: None,
            loss_pct: None,
            mtu: None,
            offloads: Offloads::default(),
            rps: false,
            tcp_rmem: None,
            tcp_wmem: None,
            shaper: Shaper::Tbf,
            impair: Impair::default(),
            shaper_note: None,
            emu_poll: false,
        }
    }

    /// Whether this bed runs linerate's link emulator: the emu shaper and
    /// a rate or an impairment to emulate.
    pub fn uses_emulator(&self) -> bool {
        self.shaper == Shaper::Emu && (self.link.is_some() || !self.impair.is_empty())
    }

    /// The shaper that really makes the link (none when nothing is shaped).
    pub fn effective_shaper(&self) -> Shaper {
        match self.shaper {
            Shaper::Emu if self.uses_emulator() => Shaper::Emu,
            Shaper::Tbf if self.link.is_some() => Shaper::Tbf,
            _ => Shaper::None,
        }
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), BedError> {
        validate_name(&self.name)?;
        if let Some(link) = self.link {
            if link.bps() < 1_000 || link.bps() > 1_000_000_000_000 {
                return Err(BedError::Invalid(format!(
                    "--link {link} is outside 1 kbit/s to 1 Tbit/s"
                )));
            }
            for f in Feature::SUPER_PACKET {
                if self.offloads.0.get(&f) == Some(&true) {
                    return Err(BedError::Invalid(format!(
                        "--offload {}=on conflicts with --link: a shaper sees a super-packet \
                         as one frame, so the emulated rate would be wrong \
                         (docs/METHODOLOGY.md §3)",
                        f.name()
                    )));
                }
            }
        }
        if let Some(loss) = self.loss_pct {
            if !(loss.is_finite() && (0.0..=100.0).contains(&loss)) {
                return Err(BedError::Invalid(format!(
                    "--loss {loss} is not a percentage between 0 and 100"
                )));
            }
            if loss > 0.0 && loss < 0.0001 {
                return Err(BedError::Invalid(format!(
                    "--loss {loss}: the finest loss is 0.0001 % (one in a million)"
                )));
            }
        }
        if self.uses_emulator() && self.offloads.0.get(&Feature::TxChecksum) == Some(&true) {
            return Err(BedError::Invalid(
                "--offload tx-checksum=on conflicts with --shaper emu: the emulator forwards \
                 frames as they are, so a checksum left to the device would stay unfilled"
                    .into(),
            ));
        }
        if !self.impair.is_empty() && self.shaper != Shaper::Emu {
            return Err(BedError::Invalid(format!(
                "{} need the emulator: --shaper emu, not {}",
                self.impair.settings().join(", "),
                self.shaper.as_str()
            )));
        }
        if self.emu_poll && !self.uses_emulator() {
            return Err(BedError::Invalid(
                "--emu-poll sets how the link emulator waits: it needs --shaper emu and a \
                 --link or an impairment"
                    .into(),
            ));
        }
        if self.impair.limit.is_some() && self.link.is_none() {
            return Err(BedError::Invalid(
                "--limit bounds the queue waiting for the wire: it needs --link".into(),
            ));
        }
        if let Some(mtu) = self.mtu {
            if !(MIN_MTU..=MAX_MTU).contains(&mtu) {
                return Err(BedError::Invalid(format!(
                    "--mtu {mtu} is outside {MIN_MTU}..{MAX_MTU} bytes"
                )));
            }
        }
        Ok(())
    }

    /// `lr-<name>`: the prefix of everything this bed creates.
    pub fn full_name(&self) -> String {
        format!("{PREFIX}{}", self.name)
    }
}

/// Checks a bed name: 1–20 characters of `a-z`, `0-9`, `_`, `-`, starting
/// with a letter or digit, without the `lr-` prefix.
pub fn validate_name(name: &str) -> Result<(), BedError> {
    if name.is_empty() {
        return Err(BedError::Invalid("the bed name is empty".into()));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(BedError::Invalid(format!(
            "bed name '{name}' is too long ({} characters, at most {MAX_NAME_LEN})",
            name.len()
        )));
    }
    if name.starts_with(PREFIX) {
        return Err(BedError::Invalid(format!(
            "bed name '{name}': give it without the '{PREFIX}' prefix (linerate adds it)"
        )));
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    if let Some(c) = name.chars().find(|c| !ok_char(*c)) {
        return Err(BedError::Invalid(format!(
            "bed name '{name}' has the character {c:?}; use a-z, 0-9, '-' and '_'"
        )));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(BedError::Invalid(format!(
            "bed name '{name}' must start with a letter or digit"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name("t1234").is_ok());
        assert!(validate_name("lab-1_x").is_ok());
        for bad in ["", "Bad", "a b", "a/b", "-x", "lr-x", "x.y", "ä"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        let long = "x".repeat(MAX_NAME_LEN + 1);
        assert!(validate_name(&long)
            .unwrap_err()
            .to_string()
            .contains("too long"));
    }

    #[test]
    fn offloads_parse() {
        let o: Offloads = "gro=off, tso=off,tx-checksum=on,ufo=off".parse().unwrap();
        assert_eq!(o.0.get(&Feature::Gro), Some(&false));
        assert_eq!(o.0.get(&Feature::TxChecksum), Some(&true));
        assert_eq!(o.0.get(&Feature::TxUdpSegmentation), Some(&false));
        assert_eq!(
            o.to_string(),
            "gro=off,tso=off,tx-checksum=on,tx-udp-segmentation=off"
        );
        assert!("gro".parse::<Offloads>().is_err());
        assert!("gro=maybe".parse::<Offloads>().is_err());
        assert!("warp=on".parse::<Offloads>().is_err());
    }

    #[test]
    fn spec_validation() {
        let mut s = BedSpec::new("t1", Topology::Pair);
        assert!(s.validate().is_ok());
        s.mtu = Some(100);
        assert!(s.validate().unwrap_err().to_string().contains("--mtu"));
        s.mtu = Some(9000);
        s.loss_pct = Some(101.0);
        assert!(s.validate().unwrap_err().to_string().contains("--loss"));
        s.loss_pct = Some(f64::NAN);
        assert!(s.validate().is_err());
        s.loss_pct = Some(0.5);
        s.link = Some(BitRate::from_mbps(100));
        s.offloads = "gso=on".parse().unwrap();
        assert!(s.validate().unwrap_err().to_string().contains("gso=on"));
        s.offloads = "gso=off".parse().unwrap();
        assert!(s.validate().is_ok());
        assert!("star".parse::<Topology>().is_err());
        assert_eq!("Router".parse::<Topology>().unwrap(), Topology::Router);
    }

    #[test]
    fn tcp_mem() {
        let m: TcpMem = "4096,131072,6291456".parse().unwrap();
        assert_eq!(m.default_bytes, 131_072);
        assert_eq!(m.to_string(), "4096 131072 6291456");
        assert!("1,2".parse::<TcpMem>().is_err());
        assert!("3,2,1".parse::<TcpMem>().is_err());
    }
}
