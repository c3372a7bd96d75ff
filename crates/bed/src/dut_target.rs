//! Where `linerate rfc2544` sends its frames: a bed's hosts (or two
//! interfaces given by name) resolved into the ends, addresses, router MAC
//! and link of a [`linerate_core::rfc2544::Config`].

use std::net::{IpAddr, Ipv6Addr};

use linerate_core::rfc2544::Endpoint;
use linerate_core::units::BitRate;
use linerate_io::dut::{mac_in, HarnessError};

use crate::{Bed, BedError, Topology};

/// The ends of an RFC 2544 run and how frames are addressed between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Sending end.
    pub tx: Endpoint,
    /// Receiving end.
    pub rx: Endpoint,
    /// The other end of the sending veth (a bed's cable), when known.
    pub tx_peer: Option<Endpoint>,
    /// Source address of the frames.
    pub src_ip: IpAddr,
    /// Destination address of the frames.
    pub dst_ip: IpAddr,
    /// Destination MAC (a router's port); `None`: the receiver's own.
    pub dst_mac: Option<[u8; 6]>,
    /// The bed's emulated link, if it has one.
    pub link: Option<BitRate>,
}

/// Why a bed cannot be a target.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The bed could not be opened.
    #[error("opening bed '{name}'")]
    Open {
        /// The bed.
        name: String,
        /// Why.
        source: BedError,
    },
    /// The bed lacks a host, an interface or an address.
    #[error("bed '{0}' has no {1}")]
    Missing(String, String),
    /// The router port's MAC could not be read.
    #[error(transparent)]
    Mac(#[from] HarnessError),
}

/// Addresses for frames that no host owns (so none answers them): in the
/// bed's subnet, or in a subnet of their own for named interfaces.
pub fn addrs(ipv6: bool, own_subnet: bool) -> (IpAddr, IpAddr) {
    let s = if own_subnet { 0xffff } else { 0 };
    match (ipv6, own_subnet) {
        (false, false) => ([198, 18, 0, 249].into(), [198, 18, 0, 250].into()),
        (false, true) => ([198, 18, 0, 249].into(), [198, 19, 255, 250].into()),
        (true, _) => (
            Ipv6Addr::new(0x2001, 2, 0, s, 0, 0, 0, 0xf9).into(),
            Ipv6Addr::new(0x2001, 2, 0, s, 0, 0, 0, 0xfa).into(),
        ),
    }
}

/// Two interfaces given by name (no bed): frames addressed in a subnet of
/// their own, to `dst_mac` or the receiver's own MAC.
pub fn interfaces(tx: Endpoint, rx: Endpoint, dst_mac: Option<[u8; 6]>, ipv6: bool) -> Target {
    let (src_ip, dst_ip) = addrs(ipv6, true);
    Target {
        tx,
        rx,
        tx_peer: None,
        src_ip,
        dst_ip,
        dst_mac,
        link: None,
    }
}

/// Bed `name`: frames go from host a's interface to host b's; through a
/// router, to the router's port on a's side, addressed from a's address to
/// b's so that the router forwards them (and decrements the TTL, rewriting
/// the checksum the receiver checks).
pub fn rfc2544(name: &str, ipv6: bool) -> Result<Target, TargetError> {
    let bed = Bed::open(name).map_err(|source| TargetError::Open {
        name: name.to_string(),
        source,
    })?;
    let missing =
        |what: &str, role: &str| TargetError::Missing(name.into(), format!("{what}{role}"));
    let end = |role: &str| -> Result<Endpoint, TargetError> {
        let netns = bed.netns(role).ok_or_else(|| missing("host ", role))?;
        let iface = bed
            .iface(role)
            .ok_or_else(|| missing("interface on ", role))?;
        Ok(Endpoint {
            netns: Some(netns.to_string()),
            iface: iface.to_string(),
        })
    };
    // The other end of a's cable: XDP live frames need NAPI (GRO) there.
    let tx_peer = end("a").ok().and_then(|a| {
        let here = (a.netns.unwrap_or_default(), a.iface);
        bed.layout().cables.iter().find_map(|(x, y)| {
            let other = if *x == here {
                y
            } else if *y == here {
                x
            } else {
                return None;
            };
            Some(Endpoint {
                netns: Some(other.0.clone()),
                iface: other.1.clone(),
            })
        })
    });
    let ((src_ip, dst_ip), dst_mac) = if bed.topology() == Topology::Router {
        let ip = |role: &str| -> Result<IpAddr, TargetError> {
            let v = if ipv6 {
                bed.ipv6(role).map(IpAddr::V6)
            } else {
                bed.ipv4(role).map(IpAddr::V4)
            };
            v.ok_or_else(|| missing("address on ", role))
        };
        let port = end("dut")?;
        let mac = mac_in(port.netns.as_deref(), &port.iface)?;
        ((ip("a")?, ip("b")?), Some(mac))
    } else {
        (addrs(ipv6, false), None)
    };
    Ok(Target {
        tx: end("a")?,
        rx: end("b")?,
        tx_peer,
        src_ip,
        dst_ip,
        dst_mac,
        link: bed.link(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_of_the_test_ranges() {
        assert_eq!(addrs(false, false).1, IpAddr::from([198, 18, 0, 250]));
        assert_eq!(addrs(false, true).1, IpAddr::from([198, 19, 255, 250]));
        assert_eq!(addrs(true, false).0.to_string(), "2001:2::f9");
        assert_eq!(addrs(true, true).1.to_string(), "2001:2:0:ffff::fa");
    }
}
