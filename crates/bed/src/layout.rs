//! Where everything of a bed goes: namespaces, interfaces and addresses,
//! derived from the topology alone (pure data).
//!
//! | topology | a | dut | b |
//! |---|---|---|---|
//! | pair | `lr-a` 198.18.0.1/24, 2001:2::1/64 | — | `lr-b` 198.18.0.2/24, 2001:2::2/64 |
//! | bridge | `lr-a` 198.18.0.1/24, 2001:2::1/64 | bridge `lr-br` with ports `lr-dut-a`, `lr-dut-b` | `lr-b` 198.18.0.2/24, 2001:2::2/64 |
//! | router | `lr-a` 198.18.0.1/24, 2001:2::1/64, default via .254 / ::fe | `lr-dut-a` 198.18.0.254/24, 2001:2::fe/64; `lr-dut-b` 198.19.0.254/24, 2001:2:0:1::fe/64; forwarding on | `lr-b` 198.19.0.1/24, 2001:2:0:1::1/64, default via .254 / ::fe |
//!
//! 198.18.0.0/15 is RFC 2544's benchmarking range (RFC 5735), 2001:2::/48
//! its IPv6 counterpart (RFC 5180).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use crate::spec::{Topology, PREFIX};

/// An address with its prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cidr {
    /// The address.
    pub addr: IpAddr,
    /// Prefix length in bits.
    pub prefix_len: u8,
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

fn v4(a: u8, b: u8, c: u8, d: u8) -> Cidr {
    Cidr {
        addr: IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
        prefix_len: 24,
    }
}

fn v6(net: u16, host: u16) -> Cidr {
    Cidr {
        addr: IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, net, 0, 0, 0, host)),
        prefix_len: 64,
    }
}

/// One interface of a bed inside a host's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Iface {
    /// The namespace it lives in.
    pub netns: String,
    /// Its name there.
    pub name: String,
    /// Addresses (test addresses first: IPv4, then IPv6).
    pub addrs: Vec<Cidr>,
    /// True for a veth end (the emulated link's egress and ingress points);
    /// false for the bridge device.
    pub veth: bool,
}

/// One host (namespace) of a bed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Host {
    /// `a`, `b` or `dut`.
    pub role: String,
    /// `lr-<bed>-<role>`.
    pub netns: String,
    /// The interface tests use (for `dut`: the bridge, or the port towards `a`).
    pub iface: String,
    /// Default gateways (router topology), IPv4 then IPv6.
    pub gateways: Vec<IpAddr>,
}

/// The veth cables: (netns, end) — (netns, end).
pub type Cable = ((String, String), (String, String));

/// Everything's place in a bed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Layout {
    /// The hosts, in creation order.
    pub hosts: Vec<Host>,
    /// Every interface, hosts' test interfaces and DUT ports.
    pub ifaces: Vec<Iface>,
    /// The veth pairs.
    pub cables: Vec<Cable>,
    /// The bridge device in the DUT, and its ports (bridge topology).
    pub bridge: Option<(String, String, Vec<String>)>,
    /// True when the DUT forwards IP (router topology).
    pub forwarding: Option<String>,
    /// The link namespace where linerate's emulator forwards each cable
    /// (beds with `--shaper emu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkNs>,
}

/// One cable cut in two in the link namespace: the emulator forwards
/// between its two ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EmuCable {
    /// Its name: the two sides it joins (`a-b`, `a-dut`, `dut-b`).
    pub name: String,
    /// The end towards host a's side.
    pub west: String,
    /// The end towards host b's side.
    pub east: String,
    /// True for the cable that carries the delay and the random
    /// impairments (the first from a; the rest carry the rate only).
    pub impaired: bool,
}

/// The link namespace of an emulated bed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkNs {
    /// `lr-<bed>-link`.
    pub netns: String,
    /// The cables the emulator forwards, from a's side to b's.
    pub cables: Vec<EmuCable>,
}

impl Layout {
    /// The layout of bed `name` (without prefix).
    pub fn new(name: &str, topology: Topology) -> Self {
        let ns = |role: &str| format!("{PREFIX}{name}-{role}");
        let (a, b, dut) = (ns("a"), ns("b"), ns("dut"));
        let iface = |netns: &str, n: &str, addrs: Vec<Cidr>, veth: bool| Iface {
            netns: netns.to_string(),
            name: n.to_string(),
            addrs,
            veth,
        };
        let host = |role: &str, netns: &str, iface: &str, gateways: Vec<IpAddr>| Host {
            role: role.to_string(),
            netns: netns.to_string(),
            iface: iface.to_string(),
            gateways,
        };
        let pair = |x: (&str, &str), y: (&str, &str)| -> Cable {
            (
                (x.0.to_string(), x.1.to_string()),
                (y.0.to_string(), y.1.to_string()),
            )
        };
        match topology {
            Topology::Pair => Self {
                hosts: vec![host("a", &a, "lr-a", vec![]), host("b", &b, "lr-b", vec![])],
                ifaces: vec![
                    iface(&a, "lr-a", vec![v4(198, 18, 0, 1), v6(0, 1)], true),
                    iface(&b, "lr-b", vec![v4(198, 18, 0, 2), v6(0, 2)], true),
                ],
                cables: vec![pair((&a, "lr-a"), (&b, "lr-b"))],
                bridge: None,
                forwarding: None,
                link: None,
            },
            Topology::Bridge => Self {
                hosts: vec![
                    host("a", &a, "lr-a", vec![]),
                    host("b", &b, "lr-b", vec![]),
                    host("dut", &dut, "lr-br", vec![]),
                ],
                ifaces: vec![
                    iface(&a, "lr-a", vec![v4(198, 18, 0, 1), v6(0, 1)], true),
                    iface(&b, "lr-b", vec![v4(198, 18, 0, 2), v6(0, 2)], true),
                    iface(&dut, "lr-dut-a", vec![], true),
                    iface(&dut, "lr-dut-b", vec![], true),
                    iface(&dut, "lr-br", vec![], false),
                ],
                cables: vec![
                    pair((&a, "lr-a"), (&dut, "lr-dut-a")),
                    pair((&b, "lr-b"), (&dut, "lr-dut-b")),
                ],
                bridge: Some((
                    dut.clone(),
                    "lr-br".into(),
                    vec!["lr-dut-a".into(), "lr-dut-b".into()],
                )),
                forwarding: None,
                link: None,
            },
            Topology::Router => {
                let gw_a4 = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 254));
                let gw_b4 = IpAddr::V4(Ipv4Addr::new(198, 19, 0, 254));
                let gw_a6 = IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0xfe));
                let gw_b6 = IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 0xfe));
                Self {
                    hosts: vec![
                        host("a", &a, "lr-a", vec![gw_a4, gw_a6]),
                        host("b", &b, "lr-b", vec![gw_b4, gw_b6]),
                        host("dut", &dut, "lr-dut-a", vec![]),
                    ],
                    ifaces: vec![
                        iface(&a, "lr-a", vec![v4(198, 18, 0, 1), v6(0, 1)], true),
                        iface(&b, "lr-b", vec![v4(198, 19, 0, 1), v6(1, 1)], true),
                        iface(
                            &dut,
                            "lr-dut-a",
                            vec![v4(198, 18, 0, 254), v6(0, 0xfe)],
                            true,
                        ),
                        iface(
                            &dut,
                            "lr-dut-b",
                            vec![v4(198, 19, 0, 254), v6(1, 0xfe)],
                            true,
                        ),
                    ],
                    cables: vec![
                        pair((&a, "lr-a"), (&dut, "lr-dut-a")),
                        pair((&b, "lr-b"), (&dut, "lr-dut-b")),
                    ],
                    bridge: None,
                    forwarding: Some(dut),
                    link: None,
                }
            }
        }
    }

    /// The layout of bed `name` with every cable cut in two in the link
    /// namespace `lr-<name>-link`, where the emulator joins the halves:
    /// `lr-a` — `lr-xa` ‖ `lr-xb` — `lr-b` for a pair; for bridge and
    /// router beds both cables, `lr-a` — `lr-xa` ‖ `lr-xda` — `lr-dut-a`
    /// and `lr-dut-b` — `lr-xdb` ‖ `lr-xb` — `lr-b`.
    pub fn emulated(name: &str, topology: Topology) -> Self {
        let mut l = Self::new(name, topology);
        let link = format!("{PREFIX}{name}-link");
        // The link-side end of a host- or DUT-side interface.
        let far = |dev: &str| format!("lr-x{}", dev.trim_start_matches("lr-").replace("dut-", "d"));
        let mut cables = Vec::new();
        let mut emu = Vec::new();
        for (k, ((ns1, d1), (ns2, d2))) in l.cables.iter().enumerate() {
            let (x1, x2) = (far(d1), far(d2));
            // Cable 0 runs a → (b or dut); cable 1 runs b → dut: its west
            // end is the DUT's.
            let (west, east) = if k == 0 { (&x1, &x2) } else { (&x2, &x1) };
            let name = match (topology, k) {
                (Topology::Pair, _) => "a-b",
                (_, 0) => "a-dut",
                _ => "dut-b",
            };
            emu.push(EmuCable {
                name: name.into(),
                west: west.clone(),
                east: east.clone(),
                impaired: k == 0,
            });
            cables.push(((ns1.clone(), d1.clone()), (link.clone(), x1.clone())));
            cables.push(((ns2.clone(), d2.clone()), (link.clone(), x2.clone())));
            for x in [x1, x2] {
                l.ifaces.push(Iface {
                    netns: link.clone(),
                    name: x,
                    addrs: vec![],
                    veth: true,
                });
            }
        }
        l.cables = cables;
        l.link = Some(LinkNs {
            netns: link,
            cables: emu,
        });
        l
    }

    /// The host with this role.
    pub fn host(&self, role: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.role == role)
    }

    /// The interface `name` in namespace `netns`.
    pub fn iface(&self, netns: &str, name: &str) -> Option<&Iface> {
        self.ifaces
            .iter()
            .find(|i| i.netns == netns && i.name == name)
    }

    /// A host's test interface.
    pub fn host_iface(&self, role: &str) -> Option<&Iface> {
        let h = self.host(role)?;
        self.iface(&h.netns, &h.iface)
    }

    /// The IPv4 test address of a host.
    pub fn ipv4(&self, role: &str) -> Option<Ipv4Addr> {
        self.host_iface(role)?
            .addrs
            .iter()
            .find_map(|c| match c.addr {
                IpAddr::V4(a) => Some(a),
                IpAddr::V6(_) => None,
            })
    }

    /// The IPv6 test address of a host.
    pub fn ipv6(&self, role: &str) -> Option<Ipv6Addr> {
        self.host_iface(role)?
            .addrs
            .iter()
            .find_map(|c| match c.addr {
                IpAddr::V6(a) => Some(a),
                IpAddr::V4(_) => None,
            })
    }

    /// Every namespace, in creation order (the link namespace last).
    pub fn namespaces(&self) -> Vec<String> {
        let hosts = self.hosts.iter().map(|h| h.netns.clone());
        hosts
            .chain(self.link.iter().map(|l| l.netns.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_addresses() {
        let l = Layout::new("t1", Topology::Pair);
        assert_eq!(l.namespaces(), ["lr-t1-a", "lr-t1-b"]);
        assert_eq!(l.ipv4("a"), Some(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(l.ipv4("b"), Some(Ipv4Addr::new(198, 18, 0, 2)));
        assert_eq!(l.ipv6("b").unwrap().to_string(), "2001:2::2");
        assert_eq!(l.ipv4("dut"), None);
    }

    #[test]
    fn router_addresses() {
        let l = Layout::new("t1", Topology::Router);
        assert_eq!(l.ipv4("b"), Some(Ipv4Addr::new(198, 19, 0, 1)));
        assert_eq!(l.ipv4("dut"), Some(Ipv4Addr::new(198, 18, 0, 254)));
        assert_eq!(l.ipv6("b").unwrap().to_string(), "2001:2:0:1::1");
        assert_eq!(l.host("a").unwrap().gateways.len(), 2);
    }

    #[test]
    fn emulated_cables_run_through_the_link_namespace() {
        let l = Layout::emulated("t1", Topology::Pair);
        assert_eq!(l.namespaces(), ["lr-t1-a", "lr-t1-b", "lr-t1-link"]);
        let link = l.link.as_ref().unwrap();
        assert_eq!(
            (link.cables[0].west.as_str(), link.cables[0].east.as_str()),
            ("lr-xa", "lr-xb")
        );
        assert_eq!(l.cables.len(), 2);
        let l = Layout::emulated("t1", Topology::Bridge);
        let c = &l.link.as_ref().unwrap().cables;
        let ends: Vec<(&str, &str)> = c
            .iter()
            .map(|c| (c.west.as_str(), c.east.as_str()))
            .collect();
        assert_eq!(ends, [("lr-xa", "lr-xda"), ("lr-xdb", "lr-xb")]);
        assert_eq!(l.cables.len(), 4);
        assert!(l.iface("lr-t1-link", "lr-xdb").is_some());
    }

    #[test]
    fn every_name_has_the_prefix_and_fits_ifnamsiz() {
        for t in Topology::ALL {
            let l = Layout::emulated("abcdefghijklmnopqrst", t);
            for i in &l.ifaces {
                assert!(i.name.starts_with(PREFIX) && i.name.len() <= 15, "{i:?}");
                assert!(i.netns.starts_with(PREFIX));
            }
        }
    }
}
