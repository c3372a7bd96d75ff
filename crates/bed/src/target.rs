//! A bed read as plain data for a test: where each end runs, the server's
//! (or responder's) address in host b, and the link. The commands run their
//! client in host a and their server in host b.

use std::net::IpAddr;

use linerate_core::latency::BedPeer;
use linerate_core::throughput::config::BedTarget;

use crate::{Bed, BedError};

/// Host b's address (IPv6 with `ipv6`).
fn server_ip(bed: &Bed, ipv6: bool) -> Result<IpAddr, BedError> {
    if ipv6 {
        bed.ipv6("b").map(Into::into)
    } else {
        bed.ipv4("b").map(Into::into)
    }
    .ok_or_else(|| BedError::Invalid("no address for host b".into()))
}

/// The stored bed `name` as a throughput target; `port`: the server's in
/// host b (None: any free port).
pub fn throughput(name: &str, ipv6: bool, port: Option<u16>) -> Result<BedTarget, BedError> {
    let bed = Bed::open(name)?;
    let server_ip = server_ip(&bed, ipv6)?;
    let (Some(a), Some(b)) = (bed.netns("a"), bed.netns("b")) else {
        return Err(BedError::Invalid("it lacks host a or b".into()));
    };
    Ok(BedTarget {
        client_netns: a.to_string(),
        server_netns: b.to_string(),
        server_ip,
        port,
        link: bed.link(),
        mtu_bytes: bed.spec().mtu,
        burst_bytes: match (bed.spec().effective_shaper(), bed.link()) {
            (linerate_core::emu::Shaper::Tbf, Some(rate)) => {
                Some(crate::plan::tbf_burst_bytes(rate, bed.spec().mtu))
            }
            _ => None,
        },
    })
}

/// The stored bed `name` as a latency peer: the client in host a, the
/// responder in host b.
pub fn latency(name: &str, ipv6: bool) -> Result<BedPeer, BedError> {
    let bed = Bed::open(name)?;
    Ok(BedPeer {
        name: name.to_string(),
        client_netns: bed.netns("a").map(str::to_string),
        responder_netns: bed.netns("b").map(str::to_string),
        responder_ip: server_ip(&bed, ipv6)?,
        link: bed.link(),
    })
}

/// The stored bed `name` as a journey target: probes from host a to host
/// b's IPv4 address, every interface with its namespace and role.
pub fn journey(name: &str) -> Result<linerate_io::journey::Target, BedError> {
    journey_of(&Bed::open(name)?)
}

/// [`journey`] for a bed already at hand (an owning one in tests).
pub fn journey_of(bed: &Bed) -> Result<linerate_io::journey::Target, BedError> {
    let (Some(a), Some(b)) = (bed.netns("a"), bed.netns("b")) else {
        return Err(BedError::Invalid("it lacks host a or b".into()));
    };
    let server_ip = bed
        .ipv4("b")
        .ok_or_else(|| BedError::Invalid("no IPv4 address for host b".into()))?;
    let layout = bed.layout();
    let devices = layout
        .ifaces
        .iter()
        .map(|i| linerate_core::journey::Device {
            name: i.name.clone(),
            netns: i.netns.clone(),
            role: layout
                .hosts
                .iter()
                .find(|h| h.netns == i.netns)
                .map_or_else(String::new, |h| h.role.clone()),
        })
        .collect();
    Ok(linerate_io::journey::Target {
        bed: bed.name().to_string(),
        topology: bed.topology().to_string(),
        client_netns: a.to_string(),
        server_netns: b.to_string(),
        server_ip,
        server_ip6: bed.ipv6("b"),
        devices,
    })
}
