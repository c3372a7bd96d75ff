//! A bed read as plain data for a test: where each end runs, the server's
//! (or responder's) address in host b, and the link. The commands run their
//! client in host a and their server in host b.

use std::net::IpAddr;

use linerate_core::journey::XdpProgram;
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
        xdp: xdp_programs(bed).map_err(|e| linerate_core::error::chain(&e)),
        devices,
    })
}

/// The bed's interfaces with an XDP program attached, from `ip -d -j link
/// show` in each of its namespaces.
fn xdp_programs(bed: &Bed) -> Result<Vec<XdpProgram>, BedError> {
    let layout = bed.layout();
    let mut namespaces: Vec<&str> = layout.ifaces.iter().map(|i| i.netns.as_str()).collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    let mut out = Vec::new();
    for ns in namespaces {
        let argv = ["ip", "-n", ns, "-d", "-j", "link", "show"].map(String::from);
        let text = crate::apply::run_dump(&argv)?;
        let links: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| BedError::Invalid(format!("cannot read `ip -j link` in {ns}: {e}")))?;
        for link in links.as_array().map(Vec::as_slice).unwrap_or_default() {
            let name = link["ifname"].as_str().unwrap_or_default();
            let ours = layout
                .ifaces
                .iter()
                .any(|i| i.netns == ns && i.name == name);
            if let Some(p) = xdp_of(link).filter(|_| ours) {
                out.push(XdpProgram {
                    dev: name.to_string(),
                    netns: ns.to_string(),
                    ..p
                });
            }
        }
    }
    Ok(out)
}

/// The XDP part of one link of `ip -d -j link show` (None: no program):
/// `"xdp": {"mode": M, "prog": {"id": N…}}`, or with several programs
/// (mode 4) `"attached": [{"mode": M, "prog": {"id": N…}}…]`.
fn xdp_of(link: &serde_json::Value) -> Option<XdpProgram> {
    let xdp = link.get("xdp")?;
    let mode = match xdp["mode"].as_u64() {
        Some(1) => "native",
        Some(2) => "generic",
        Some(3) => "offload",
        Some(4) => "multi",
        _ => "unknown",
    };
    let mut prog_ids: Vec<u32> = std::iter::once(xdp)
        .chain(xdp["attached"].as_array().into_iter().flatten())
        .filter_map(|a| a["prog"]["id"].as_u64())
        .filter_map(|id| u32::try_from(id).ok())
        .collect();
    prog_ids.sort_unstable();
    prog_ids.dedup();
    Some(XdpProgram {
        dev: String::new(),
        netns: String::new(),
        ifindex: link["ifindex"]
            .as_u64()
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(0),
        prog_ids,
        mode: mode.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdp_programs_are_read_from_ip_json() {
        let one: serde_json::Value = serde_json::from_str(
            r#"{"ifindex":2,"ifname":"lr-b","xdp":{"mode":1,"prog":{"id":42,"name":"x"}}}"#,
        )
        .unwrap();
        let p = xdp_of(&one).unwrap();
        assert_eq!(
            (p.ifindex, p.prog_ids, p.mode.as_str()),
            (2, vec![42], "native")
        );
        let multi: serde_json::Value = serde_json::from_str(
            r#"{"ifindex":3,"xdp":{"mode":4,"attached":[{"mode":2,"prog":{"id":7}},{"mode":1,"prog":{"id":5}}]}}"#,
        )
        .unwrap();
        let p = xdp_of(&multi).unwrap();
        assert_eq!((p.prog_ids, p.mode.as_str()), (vec![5, 7], "multi"));
        let none: serde_json::Value = serde_json::from_str(r#"{"ifindex":2}"#).unwrap();
        assert_eq!(xdp_of(&none), None);
    }
}
