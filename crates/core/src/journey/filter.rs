//! The filter of `linerate journey --iface IF --filter EXPR`: which packets
//! of any application to follow on a host.
//!
//! Grammar: terms separated by spaces, optionally joined by `and` (every
//! term must hold):
//!
//! ```text
//! filter := term { ["and"] term }
//! term   := "udp" | "tcp" | "icmp"
//!         | "host" IPV4            (source or destination)
//!         | "port" N               (source or destination, 1..=65535)
//!         | "len" N | "len" N..M   (IP length in bytes, 20..=65535)
//! ```
//!
//! e.g. `udp port 5201 len 100..200`. Each kind of term may appear once.
//!
//! What can be told apart for packets linerate did not send: tracepoint
//! records carry the skb's address, its length and the device, never the
//! headers, so `len` is the only term a tracepoint (or its in-kernel
//! filter) can test by itself; protocol, host and port need the packet's
//! headers read from the skb. A packet is then one chain of skb addresses:
//! there is no sequence number to tell a retransmission or a second packet
//! of the same length apart, and a copy or clone joins its chain only by
//! its length.

use std::net::Ipv4Addr;

use super::Proto;

/// A parsed filter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IfaceFilter {
    /// The protocol (None: any).
    pub proto: Option<Proto>,
    /// Source or destination address.
    pub host: Option<Ipv4Addr>,
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
        "--filter: unknown term {0:?} (terms: udp, tcp, icmp, host IPV4, port N, len N or N..M)"
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
    pub addrs: Option<(Ipv4Addr, Ipv4Addr)>,
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
                        .map_err(|_| value_err("host", v, "not an IPv4 address"))?;
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

    /// True when every term can be tested on a tracepoint's record alone
    /// (only `len`): the others need the packet's headers.
    pub fn needs_headers(&self) -> bool {
        self.proto.is_some() || self.host.is_some() || self.port.is_some()
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
        let proto_number = |p: Proto| match p {
            Proto::Udp => 17,
            Proto::Tcp => 6,
            Proto::Icmp => 1,
        };
        let ok = self
            .proto
            .is_none_or(|want| check(p.ip_proto.map(|n| n == proto_number(want))))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse() {
        let f = IfaceFilter::parse("udp and port 5201 len 100..200 host 198.18.0.2").unwrap();
        assert_eq!(f.proto, Some(Proto::Udp));
        assert_eq!(f.port, Some(5201));
        assert_eq!(f.len, Some((100, 200)));
        assert_eq!(f.host, Some(Ipv4Addr::new(198, 18, 0, 2)));
        assert!(f.needs_headers());
        let f = IfaceFilter::parse("len 142").unwrap();
        assert_eq!(f.len, Some((142, 142)));
        assert!(!f.needs_headers());
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
        assert!(err("host 1.2.3").contains("IPv4"));
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
            addrs: Some((Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2))),
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
}
