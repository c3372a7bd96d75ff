//! The filter of `linerate journey --iface IF --filter EXPR`: which packets
//! of any application to follow on a host.
//!
//! Grammar: terms separated by spaces, optionally joined by `and` (every
//! term must hold):
//!
//! ```text
//! filter := term { ["and"] term }
//! term   := "udp" | "tcp" | "icmp"
//!         | "host" IP              (IPv4 or IPv6; source or destination)
//!         | "port" N               (source or destination, 1..=65535)
//!         | "len" N | "len" N..M   (IP length in bytes, 20..=65535)
//! ```
//!
//! e.g. `udp port 5201 len 100..200`. Each kind of term may appear once.
//!
//! What can be told apart for packets linerate did not send: tracepoint
//! records carry the skb's address, its length and the device, never the
//! headers, so the `tp_btf` programs read the IP header and the first 8
//! bytes of the transport header from the skb ([`read_headers`] is the same
//! reading in Rust, for tests and for the records' contents) and judge them
//! in the kernel. `len` is the IP length (IPv4 total length; IPv6 payload
//! length + 40). `icmp` is ICMP or ICMPv6. IPv6 extension headers are not
//! followed (the next header must be the transport), and a non-first IPv4
//! fragment has no ports.

use std::net::IpAddr;

use super::Proto;

/// A parsed filter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IfaceFilter {
    /// The protocol (None: any).
    pub proto: Option<Proto>,
    /// Source or destination address.
    pub host: Option<IpAddr>,
    /// Source or destination port.
    pub port: Option<u16>,
    /// IP length range, inclusive.
    pub len: Option<(u32, u32)>,
}

/// Why a filter does not parse; the message names the term.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// Nothing given.
    #[error("--filter is empty: give terms such as `udp port 5201 len 100..200`")]
    Empty,
    /// A word that is no term.
    #[error(
        "--filter: unknown term {0:?} (terms: udp, tcp, icmp, host IP, port N, len N or N..M)"
    )]
    Unknown(String),
    /// A term without its value.
    #[error("--filter: `{0}` needs a value")]
    Missing(&'static str),
    /// A value that does not parse or is out of range.
    #[error("--filter: `{term} {value}`: {why}")]
    Value {
        /// The term.
        term: &'static str,
        /// The value given.
        value: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A term given twice.
    #[error("--filter: `{0}` given twice")]
    Twice(&'static str),
}

/// Facts about one packet, as far as they are known (None: not read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketFacts {
    /// IP protocol number.
    pub ip_proto: Option<u8>,
    /// Source and destination addresses.
    pub addrs: Option<(IpAddr, IpAddr)>,
    /// Source and destination ports.
    pub ports: Option<(u16, u16)>,
    /// IP length.
    pub len: Option<u32>,
}

/// How a filter judges a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every term holds.
    Match,
    /// A term fails.
    NoMatch,
    /// No term fails, but one could not be tested (the fact is unknown).
    Unknown,
}

fn set<T>(slot: &mut Option<T>, v: T, term: &'static str) -> Result<(), FilterError> {
    if slot.is_some() {
        return Err(FilterError::Twice(term));
    }
    *slot = Some(v);
    Ok(())
}

fn value_err(term: &'static str, value: &str, why: &'static str) -> FilterError {
    FilterError::Value {
        term,
        value: value.to_string(),
        why,
    }
}

fn ip_len(term: &'static str, v: &str) -> Result<u32, FilterError> {
    let n: u32 = v
        .parse()
        .map_err(|_| value_err(term, v, "not a number of bytes"))?;
    if !(20..=65535).contains(&n) {
        return Err(value_err(term, v, "an IP length is 20..=65535 bytes"));
    }
    Ok(n)
}

impl IfaceFilter {
    /// Parses `--filter`.
    pub fn parse(s: &str) -> Result<Self, FilterError> {
        let mut f = Self::default();
        let mut words = s.split_whitespace().filter(|w| *w != "and").peekable();
        if words.peek().is_none() {
            return Err(FilterError::Empty);
        }
        while let Some(w) = words.next() {
            match w {
                "udp" | "tcp" | "icmp" => {
                    let p = Proto::parse(w).map_err(|_| FilterError::Unknown(w.into()))?;
                    set(&mut f.proto, p, "udp/tcp/icmp")?;
                }
                "host" => {
                    let v = words.next().ok_or(FilterError::Missing("host"))?;
                    let a = v
                        .parse()
                        .map_err(|_| value_err("host", v, "not an IPv4 or IPv6 address"))?;
                    set(&mut f.host, a, "host")?;
                }
                "port" => {
                    let v = words.next().ok_or(FilterError::Missing("port"))?;
                    let p: u16 = v
                        .parse()
                        .ok()
                        .filter(|&p| p > 0)
                        .ok_or_else(|| value_err("port", v, "a port is 1..=65535"))?;
                    set(&mut f.port, p, "port")?;
                }
                "len" => {
                    let v = words.next().ok_or(FilterError::Missing("len"))?;
                    let (lo, hi) = match v.split_once("..") {
                        Some((a, b)) => (ip_len("len", a)?, ip_len("len", b)?),
                        None => {
                            let n = ip_len("len", v)?;
                            (n, n)
                        }
                    };
                    if lo > hi {
                        return Err(value_err("len", v, "the range is empty"));
                    }
                    set(&mut f.len, (lo, hi), "len")?;
                }
                other => return Err(FilterError::Unknown(other.into())),
            }
        }
        if f.port.is_some() && f.proto == Some(Proto::Icmp) {
            return Err(value_err("port", "with icmp", "ICMP has no ports"));
        }
        Ok(f)
    }

    /// Judges the packet whose IP header starts `ip`, as the `tp_btf`
    /// programs do in the kernel: not IPv4 or IPv6 fails, and so does a
    /// `port` term on a packet without ports (not TCP or UDP, a non-first
    /// fragment).
    pub fn judge_headers(&self, ip: &[u8]) -> Verdict {
        match read_headers(ip) {
            None => Verdict::NoMatch,
            Some(f) if self.port.is_some() && f.ports.is_none() => Verdict::NoMatch,
            Some(f) => self.judge(&f),
        }
    }

    /// Judges a packet by what is known of it.
    pub fn judge(&self, p: &PacketFacts) -> Verdict {
        let mut unknown = false;
        let mut check = |known: Option<bool>| match known {
            Some(ok) => ok,
            None => {
                unknown = true;
                true
            }
        };
        let ok = self
            .proto
            .is_none_or(|want| check(p.ip_proto.map(|n| ip_protocols(want).contains(&n))))
            && self
                .host
                .is_none_or(|h| check(p.addrs.map(|(s, d)| s == h || d == h)))
            && self
                .port
                .is_none_or(|port| check(p.ports.map(|(s, d)| s == port || d == port)))
            && self
                .len
                .is_none_or(|(lo, hi)| check(p.len.map(|l| (lo..=hi).contains(&l))));
        match (ok, unknown) {
            (false, _) => Verdict::NoMatch,
            (true, true) => Verdict::Unknown,
            (true, false) => Verdict::Match,
        }
    }
}

/// The IP protocol numbers a protocol term accepts (IPv4, IPv6): `icmp`
/// is ICMP (1) or ICMPv6 (58).
pub fn ip_protocols(p: Proto) -> [u8; 2] {
    match p {
        Proto::Udp => [IPPROTO_UDP; 2],
        Proto::Tcp => [IPPROTO_TCP; 2],
        Proto::Icmp => [1, 58],
    }
}

/// IP protocol number of TCP.
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// Bytes of an IPv6 header (without extension headers).
pub const IPV6_HEADER: u32 = 40;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// What the packet starting at `ip` (its IP header, then the transport
/// header) shows: version 4 or 6, else None. Ports are read for TCP and UDP
/// only, and not from a non-first IPv4 fragment; IPv6 extension headers are
/// not followed. This is the reading the `tp_btf` programs do in the kernel.
pub fn read_headers(ip: &[u8]) -> Option<PacketFacts> {
    let first = *ip.first()?;
    let (proto, addrs, len, transport) = match first >> 4 {
        4 => {
            let ihl = usize::from(first & 0x0f) * 4;
            if ihl < 20 || ip.len() < 20 {
                return None;
            }
            let src: [u8; 4] = ip[12..16].try_into().ok()?;
            let dst: [u8; 4] = ip[16..20].try_into().ok()?;
            let fragment = be16(ip, 6)? & 0x1fff != 0;
            (
                ip[9],
                (IpAddr::from(src), IpAddr::from(dst)),
                u32::from(be16(ip, 2)?),
                (!fragment).then_some(ihl),
            )
        }
        6 => {
            if ip.len() < IPV6_HEADER as usize {
                return None;
            }
            let src: [u8; 16] = ip[8..24].try_into().ok()?;
            let dst: [u8; 16] = ip[24..40].try_into().ok()?;
            (
                ip[6],
                (IpAddr::from(src), IpAddr::from(dst)),
                u32::from(be16(ip, 4)?) + IPV6_HEADER,
                Some(IPV6_HEADER as usize),
            )
        }
        _ => return None,
    };
    let ports = transport
        .filter(|_| matches!(proto, IPPROTO_TCP | IPPROTO_UDP))
        .and_then(|at| Some((be16(ip, at)?, be16(ip, at + 2)?)));
    Some(PacketFacts {
        ip_proto: Some(proto),
        addrs: Some(addrs),
        ports,
        len: Some(len),
    })
}

impl std::fmt::Display for IfaceFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut terms = Vec::new();
        if let Some(p) = self.proto {
            terms.push(p.name().to_string());
        }
        if let Some(h) = self.host {
            terms.push(format!("host {h}"));
        }
        if let Some(p) = self.port {
            terms.push(format!("port {p}"));
        }
        match self.len {
            Some((lo, hi)) if lo == hi => terms.push(format!("len {lo}")),
            Some((lo, hi)) => terms.push(format!("len {lo}..{hi}")),
            None => {}
        }
        f.write_str(&terms.join(" and "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn filters_parse() {
        let f = IfaceFilter::parse("udp and port 5201 len 100..200 host 198.18.0.2").unwrap();
        assert_eq!(f.proto, Some(Proto::Udp));
        assert_eq!(f.port, Some(5201));
        assert_eq!(f.len, Some((100, 200)));
        assert_eq!(f.host, Some(IpAddr::from([198, 18, 0, 2])));
        assert_eq!(
            f.to_string(),
            "udp and host 198.18.0.2 and port 5201 and len 100..200"
        );
        let f = IfaceFilter::parse("len 142").unwrap();
        assert_eq!(f.len, Some((142, 142)));
        assert_eq!(IfaceFilter::parse(&f.to_string()), Ok(f));
        let f = IfaceFilter::parse("host 2001:2::1").unwrap();
        assert_eq!(
            f.host,
            Some(IpAddr::from(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1)))
        );
    }

    #[test]
    fn bad_filters_say_which_term() {
        let err = |s: &str| IfaceFilter::parse(s).unwrap_err().to_string();
        assert!(err("").contains("empty"));
        assert!(err("and").contains("empty"));
        assert!(err("sctp").contains("\"sctp\""));
        assert!(err("port").contains("`port` needs a value"));
        assert!(err("port 0").contains("1..=65535"));
        assert!(err("port 70000").contains("`port 70000`"));
        assert!(err("host 1.2.3").contains("IPv4 or IPv6"));
        assert!(err("len 10").contains("20..=65535"));
        assert!(err("len 200..100").contains("empty"));
        assert!(err("len x..100").contains("not a number"));
        assert!(err("udp tcp").contains("twice"));
        assert!(err("icmp port 7").contains("no ports"));
    }

    #[test]
    fn packets_are_judged_by_what_is_known() {
        let f = IfaceFilter::parse("udp port 5201 len 100..200").unwrap();
        let full = PacketFacts {
            ip_proto: Some(17),
            addrs: Some((
                Ipv4Addr::new(198, 18, 0, 1).into(),
                Ipv4Addr::new(198, 18, 0, 2).into(),
            )),
            ports: Some((40000, 5201)),
            len: Some(150),
        };
        assert_eq!(f.judge(&full), Verdict::Match);
        assert_eq!(
            f.judge(&PacketFacts {
                len: Some(201),
                ..full
            }),
            Verdict::NoMatch
        );
        assert_eq!(
            f.judge(&PacketFacts {
                ip_proto: Some(6),
                ..full
            }),
            Verdict::NoMatch
        );
        // A tracepoint record: only the length is known.
        let record = PacketFacts {
            len: Some(150),
            ..PacketFacts::default()
        };
        assert_eq!(f.judge(&record), Verdict::Unknown);
        let record = PacketFacts {
            len: Some(99),
            ..PacketFacts::default()
        };
        assert_eq!(f.judge(&record), Verdict::NoMatch);
        let only_len = IfaceFilter::parse("len 100..200").unwrap();
        assert_eq!(
            only_len.judge(&PacketFacts {
                len: Some(150),
                ..PacketFacts::default()
            }),
            Verdict::Match
        );
        let host = IfaceFilter::parse("host 198.18.0.1").unwrap();
        assert_eq!(host.judge(&full), Verdict::Match);
    }

    /// An IPv4 header (20 bytes, or with `options` 4-byte words more) and
    /// 8 transport bytes.
    pub(crate) fn ipv4(
        proto: u8,
        src: [u8; 4],
        dst: [u8; 4],
        ports: (u16, u16),
        total: u16,
    ) -> Vec<u8> {
        let mut b = vec![0u8; 28];
        b[0] = 0x45;
        b[2..4].copy_from_slice(&total.to_be_bytes());
        b[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        b[9] = proto;
        b[12..16].copy_from_slice(&src);
        b[16..20].copy_from_slice(&dst);
        b[20..22].copy_from_slice(&ports.0.to_be_bytes());
        b[22..24].copy_from_slice(&ports.1.to_be_bytes());
        b
    }

    /// An IPv6 header and 8 transport bytes.
    pub(crate) fn ipv6(
        next: u8,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        ports: (u16, u16),
        payload: u16,
    ) -> Vec<u8> {
        let mut b = vec![0u8; 48];
        b[0] = 0x60;
        b[4..6].copy_from_slice(&payload.to_be_bytes());
        b[6] = next;
        b[8..24].copy_from_slice(&src.octets());
        b[24..40].copy_from_slice(&dst.octets());
        b[40..42].copy_from_slice(&ports.0.to_be_bytes());
        b[42..44].copy_from_slice(&ports.1.to_be_bytes());
        b
    }

    #[test]
    fn crafted_headers_are_read_and_judged() {
        let a = [198, 18, 0, 1];
        let b = [198, 18, 0, 2];
        let udp = ipv4(17, a, b, (40000, 5201), 128);
        let facts = read_headers(&udp).unwrap();
        assert_eq!(facts.ip_proto, Some(17));
        assert_eq!(facts.ports, Some((40000, 5201)));
        assert_eq!(facts.len, Some(128));
        assert_eq!(facts.addrs, Some((IpAddr::from(a), IpAddr::from(b))));
        let judge = |f: &str, h: &[u8]| IfaceFilter::parse(f).unwrap().judge_headers(h);
        assert_eq!(judge("udp and port 5201", &udp), Verdict::Match);
        assert_eq!(judge("udp and port 5202", &udp), Verdict::NoMatch);
        assert_eq!(judge("tcp", &udp), Verdict::NoMatch);
        assert_eq!(judge("host 198.18.0.1 len 128", &udp), Verdict::Match);
        assert_eq!(judge("host 198.18.0.3", &udp), Verdict::NoMatch);
        assert_eq!(judge("len 129..200", &udp), Verdict::NoMatch);
        // ICMP has no ports: a port term cannot match it, even where its
        // identifier bytes equal the port.
        let icmp = ipv4(1, a, b, (5201, 5201), 84);
        assert_eq!(read_headers(&icmp).unwrap().ports, None);
        assert_eq!(judge("port 5201", &icmp), Verdict::NoMatch);
        assert_eq!(judge("icmp", &icmp), Verdict::Match);
        // A non-first fragment has no ports either.
        let mut frag = udp.clone();
        frag[6..8].copy_from_slice(&185u16.to_be_bytes());
        assert_eq!(read_headers(&frag).unwrap().ports, None);
        assert_eq!(judge("port 5201", &frag), Verdict::NoMatch);
        assert_eq!(judge("udp", &[0x00; 40]), Verdict::NoMatch);
        // IPv4 options move the transport header.
        let mut opts = udp[..20].to_vec();
        opts[0] = 0x46;
        opts.extend([1, 1, 1, 0]);
        opts.extend(&udp[20..]);
        assert_eq!(read_headers(&opts).unwrap().ports, Some((40000, 5201)));
        // IPv6: the length is the payload's + 40; icmp is ICMPv6 too.
        let (s6, d6) = ("2001:2::1".parse().unwrap(), "2001:2::2".parse().unwrap());
        let udp6 = ipv6(17, s6, d6, (40000, 5201), 108);
        assert_eq!(read_headers(&udp6).unwrap().len, Some(148));
        assert_eq!(
            judge("udp port 5201 host 2001:2::2 len 148", &udp6),
            Verdict::Match
        );
        assert_eq!(judge("host 198.18.0.2", &udp6), Verdict::NoMatch);
        assert_eq!(judge("icmp", &ipv6(58, s6, d6, (0, 0), 64)), Verdict::Match);
        // Not IP, or cut short.
        assert_eq!(read_headers(&[0x00; 40]), None);
        assert_eq!(read_headers(&udp[..19]), None);
        assert_eq!(read_headers(&udp6[..39]), None);
        let mut short_ihl = udp.clone();
        short_ihl[0] = 0x44;
        assert_eq!(read_headers(&short_ihl), None);
    }
}
