//! What `linerate throughput` is asked to run, typed and validated before
//! anything runs.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::units::{BitRate, ByteCount};

use super::model::{
    Direction, FlowDir, LinkSource, ParamError, Protocol, RecvPath, SendPath, ThroughputParams,
};

/// TCP block size unless one is given.
pub const DEFAULT_TCP_BLOCK_BYTES: u32 = 128 * 1024;
/// UDP payload unless one is given: the largest in one 1500-byte-MTU IPv4
/// packet (IPv6: [`DEFAULT_UDP_PAYLOAD_V6_BYTES`]).
pub const DEFAULT_UDP_PAYLOAD_BYTES: u32 = 1472;
/// The same for IPv6 (a 20-byte longer header).
pub const DEFAULT_UDP_PAYLOAD_V6_BYTES: u32 = 1452;

/// The choices of a test as given, before defaults and checks: what
/// [`Config::from_request`] turns into one run per send path.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// TCP or UDP.
    pub protocol: Protocol,
    /// Who sends.
    pub direction: Direction,
    /// Streams per direction.
    pub streams: u16,
    /// Sending time.
    pub duration: Duration,
    /// UDP payload or TCP block (None: the defaults above).
    pub size: Option<ByteCount>,
    /// Payload rate per direction (None: unpaced).
    pub rate: Option<BitRate>,
    /// One run per send path, in order.
    pub send_paths: Vec<SendPath>,
    /// Receive path.
    pub recv_path: RecvPath,
    /// Receivers spin on non-blocking receives.
    pub recv_spin: bool,
    /// TCP receivers' SO_RCVLOWAT.
    pub recv_lowat: Option<ByteCount>,
    /// UDP receivers' nap after an empty receive, µs.
    pub recv_nap_us: Option<u32>,
    /// SO_SNDBUF and SO_RCVBUF.
    pub window: Option<ByteCount>,
    /// TCP_NODELAY.
    pub nodelay: bool,
    /// TCP congestion control.
    pub congestion: Option<String>,
    /// TCP_MAXSEG.
    pub mss_bytes: Option<u32>,
    /// Reporting interval.
    pub interval: Duration,
    /// The link speed given (it overrides a bed's).
    pub link: Option<BitRate>,
}

impl Default for Request {
    fn default() -> Self {
        let p = ThroughputParams::default();
        Self {
            protocol: p.protocol,
            direction: p.direction,
            streams: p.streams,
            duration: Duration::from_nanos(p.duration_ns),
            size: None,
            rate: None,
            send_paths: vec![p.send_path],
            recv_path: p.recv_path,
            recv_spin: false,
            recv_lowat: None,
            recv_nap_us: None,
            window: None,
            nodelay: false,
            congestion: None,
            mss_bytes: None,
            interval: Duration::from_nanos(p.interval_ns),
            link: None,
        }
    }
}

/// `b` in bytes as a `u32`, or an error naming `param`.
fn bytes(b: Option<ByteCount>, param: &'static str) -> Result<Option<u32>, ParamError> {
    b.map(|b| {
        u32::try_from(b.get()).map_err(|_| ParamError {
            param,
            reason: format!("{b} is too large"),
        })
    })
    .transpose()
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A testbed resolved to plain data: where each end runs and what the link is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BedTarget {
    /// Network namespace of the client (host a).
    pub client_netns: String,
    /// Network namespace of the server (host b).
    pub server_netns: String,
    /// The server's address in host b.
    pub server_ip: IpAddr,
    /// The server's port (None: any free port).
    pub port: Option<u16>,
    /// The bed's emulated link, if it has one.
    pub link: Option<BitRate>,
    /// The bed's MTU, if it set one.
    pub mtu_bytes: Option<u32>,
}

/// Against what the test runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A `linerate server` at this address.
    Server(SocketAddr),
    /// A discard sink at this address (one-sided: sender figures only).
    Discard(SocketAddr),
    /// A testbed: a server on a thread in host b, the client in host a.
    Bed(BedTarget),
}

/// Why a configuration cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// No run asked for.
    #[error("no send path given")]
    NoRuns,
    /// A run's parameters are refused.
    #[error(transparent)]
    Params(#[from] ParamError),
    /// One-sided tests only send.
    #[error("a discard sink only receives: the reverse and bidirectional directions need a linerate server")]
    DiscardReceives,
}

/// A validated `linerate throughput` configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Against what.
    pub target: Target,
    /// One run per send path, in order (the same parameters otherwise).
    pub runs: Vec<ThroughputParams>,
    /// The link speed given for the test (it overrides a bed's).
    pub link: Option<BitRate>,
}

impl Config {
    /// Checks every run before any runs.
    pub fn new(
        target: Target,
        runs: Vec<ThroughputParams>,
        link: Option<BitRate>,
    ) -> Result<Self, ConfigError> {
        if runs.is_empty() {
            return Err(ConfigError::NoRuns);
        }
        for p in &runs {
            p.validate(None)?;
            if matches!(target, Target::Discard(_))
                && p.flows().iter().any(|d| *d != FlowDir::Forward)
            {
                return Err(ConfigError::DiscardReceives);
            }
        }
        Ok(Self { target, runs, link })
    }

    /// The configuration `req` asks for against `target`: defaults applied
    /// (the UDP payload by the target's address family), one run per send
    /// path, every run checked.
    pub fn from_request(target: Target, req: &Request) -> Result<Self, ConfigError> {
        let ipv6 = match &target {
            Target::Server(a) | Target::Discard(a) => a.is_ipv6(),
            Target::Bed(b) => b.server_ip.is_ipv6(),
        };
        let size_bytes = match (bytes(req.size, "size_bytes")?, req.protocol) {
            (Some(s), _) => s,
            (None, Protocol::Udp) if ipv6 => DEFAULT_UDP_PAYLOAD_V6_BYTES,
            (None, Protocol::Udp) => DEFAULT_UDP_PAYLOAD_BYTES,
            (None, Protocol::Tcp) => DEFAULT_TCP_BLOCK_BYTES,
        };
        let base = ThroughputParams {
            protocol: req.protocol,
            direction: req.direction,
            streams: req.streams,
            duration_ns: nanos(req.duration),
            size_bytes,
            rate_bits_per_s: req.rate.map(BitRate::bps),
            send_path: req.send_paths.first().copied().unwrap_or(SendPath::Ideal),
            recv_path: req.recv_path,
            recv_spin: req.recv_spin,
            recv_lowat_bytes: bytes(req.recv_lowat, "recv_lowat_bytes")?,
            recv_nap_us: req.recv_nap_us,
            window_bytes: bytes(req.window, "window_bytes")?,
            nodelay: req.nodelay,
            congestion: req.congestion.clone(),
            mss_bytes: req.mss_bytes,
            interval_ns: nanos(req.interval),
        };
        // Every run (the first is `base`) is checked in `new`.
        let runs = req
            .send_paths
            .iter()
            .map(|&send_path| ThroughputParams {
                send_path,
                ..base.clone()
            })
            .collect();
        Self::new(target, runs, req.link)
    }

    /// The link speed for the maximum possible: the given one, else the bed's.
    pub fn line(&self) -> Option<(BitRate, LinkSource)> {
        match (&self.link, &self.target) {
            (Some(l), _) => Some((*l, LinkSource::Given)),
            (None, Target::Bed(b)) => b.link.map(|l| (l, LinkSource::Bed)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::throughput::model::Direction;

    #[test]
    fn validated_before_running() {
        let addr = SocketAddr::from(([127, 0, 0, 1], crate::wire::control::DEFAULT_PORT));
        assert_eq!(
            Config::new(Target::Server(addr), vec![], None),
            Err(ConfigError::NoRuns)
        );
        let reverse = ThroughputParams {
            direction: Direction::Reverse,
            ..ThroughputParams::default()
        };
        assert_eq!(
            Config::new(Target::Discard(addr), vec![reverse.clone()], None),
            Err(ConfigError::DiscardReceives)
        );
        let bed = BedTarget {
            client_netns: "lr-x-a".into(),
            server_netns: "lr-x-b".into(),
            server_ip: "198.18.0.2".parse().unwrap(),
            port: None,
            link: Some(BitRate::from_mbps(100)),
            mtu_bytes: None,
        };
        let c = Config::new(Target::Bed(bed.clone()), vec![reverse.clone()], None).unwrap();
        assert_eq!(c.line(), Some((BitRate::from_mbps(100), LinkSource::Bed)));
        let c = Config::new(Target::Bed(bed), vec![reverse], Some(BitRate::from_gbps(1))).unwrap();
        assert_eq!(c.line(), Some((BitRate::from_gbps(1), LinkSource::Given)));
    }

    #[test]
    fn a_request_gets_its_defaults_and_one_run_per_path() {
        let v4 = Target::Server(SocketAddr::from(([127, 0, 0, 1], 1)));
        let v6 = Target::Server(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 1)));
        let c = Config::from_request(v4.clone(), &Request::default()).unwrap();
        assert_eq!(c.runs, vec![ThroughputParams::default()]);
        let udp = Request {
            protocol: Protocol::Udp,
            send_paths: vec![SendPath::Ideal, SendPath::Mmsg],
            ..Request::default()
        };
        let c = Config::from_request(v4.clone(), &udp).unwrap();
        assert_eq!(c.runs.len(), 2);
        assert_eq!(c.runs[1].send_path, SendPath::Mmsg);
        assert_eq!(c.runs[0].size_bytes, DEFAULT_UDP_PAYLOAD_BYTES);
        let c = Config::from_request(v6, &udp).unwrap();
        assert_eq!(c.runs[0].size_bytes, DEFAULT_UDP_PAYLOAD_V6_BYTES);
        let huge = Request {
            window: Some(ByteCount::new(1 << 40)),
            ..Request::default()
        };
        let Err(ConfigError::Params(e)) = Config::from_request(v4, &huge) else {
            panic!("a 1 TiB window is refused");
        };
        assert_eq!(e.param, "window_bytes");
    }
}
