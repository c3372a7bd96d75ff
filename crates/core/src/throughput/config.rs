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
    /// Sweeps (`KEY=V1,V2`): socket settings ([`SOCKET_SWEEP_KEYS`]) and,
    /// on a bed, bed settings ([`crate::sweep::BED_KEYS`]).
    pub sweep: Vec<String>,
    /// Runs of each point (1: one, no spread).
    pub repeat: u32,
    /// Left out of the figures at the start (the test runs this much
    /// longer; iperf3's `-O`).
    pub omit: Duration,
    /// SO_NO_CHECK on UDP data sockets.
    pub no_udp_checksum: bool,
    /// Receivers compare one payload in N (None: every payload).
    pub verify_one_in: Option<u32>,
}

/// The socket settings a throughput sweep may vary.
pub const SOCKET_SWEEP_KEYS: [&str; 9] = [
    "size",
    "window",
    "mss",
    "path",
    "recv-path",
    "cc",
    "nodelay",
    "udp-checksum",
    "verify-one-in",
];

/// A checked point of a throughput matrix: its configuration and the bed
/// settings it needs.
pub type Point = crate::sweep::Point<(Config, Vec<crate::sweep::BedSetting>)>;

/// Points a throughput sweep may make, at most.
pub const MAX_POINTS: usize = 64;

/// One point of a throughput matrix: its request, and the bed settings it
/// needs (applied to the bed before it runs).
#[derive(Debug, Clone, PartialEq)]
pub struct PointRequest {
    /// The request with the point's socket settings.
    pub request: Request,
    /// The point's bed settings.
    pub bed: Vec<crate::sweep::BedSetting>,
}

/// One swept socket or bed value applied to a point.
fn apply(p: &mut PointRequest, key: &str, v: &str) -> Result<(), String> {
    let bytes =
        |v: &str| -> Result<ByteCount, String> { v.parse().map_err(|e| format!("'{v}': {e}")) };
    let number = |v: &str| -> Result<u32, String> {
        v.parse().map_err(|_| format!("'{v}' is not a number"))
    };
    let r = &mut p.request;
    match key {
        "size" => r.size = Some(bytes(v)?),
        "window" => r.window = Some(bytes(v)?),
        "mss" => r.mss_bytes = Some(number(v)?),
        "path" => r.send_paths = vec![v.parse()?],
        "recv-path" => r.recv_path = v.parse()?,
        "cc" => r.congestion = Some(v.to_string()),
        "nodelay" => r.nodelay = crate::sweep::on_off(v)?,
        "udp-checksum" => r.no_udp_checksum = !crate::sweep::on_off(v)?,
        "verify-one-in" => r.verify_one_in = Some(number(v)?),
        _ => p.bed.push(crate::sweep::BedSetting::parse(key, v)?),
    }
    Ok(())
}

impl Request {
    /// The points of the matrix the request's sweeps make (one without
    /// sweeps), each checked against `target` before anything runs; bed
    /// keys only on a bed.
    pub fn points(&self, target: &Target) -> Result<Vec<Point>, ConfigError> {
        crate::sweep::check_repeat(self.repeat).map_err(ConfigError::Repeat)?;
        let mut keys: Vec<&str> = SOCKET_SWEEP_KEYS.to_vec();
        if matches!(target, Target::Bed(_)) {
            keys.extend(crate::sweep::BED_KEYS);
        }
        let base = PointRequest {
            request: self.clone(),
            bed: Vec::new(),
        };
        let points = crate::sweep::expand(base, &self.sweep, &keys, MAX_POINTS, apply)
            .map_err(ConfigError::Sweep)?;
        points
            .into_iter()
            .map(|p| {
                let mut target = target.clone();
                if let Target::Bed(b) = &mut target {
                    // The bed's tbf buckets follow its own MTU, not a point's.
                    let bed_mtu = b.mtu_bytes;
                    // The point's MTU is the path's.
                    for s in &p.config.bed {
                        if let crate::sweep::BedSetting::Mtu(m) = s {
                            b.mtu_bytes = Some(*m);
                        }
                    }
                    // And its link rate the model's, a tbf's bucket with it.
                    if let Some(rate) = crate::sweep::link_of(&p.config.bed) {
                        if self.link.is_some() {
                            return Err(ConfigError::Sweep(crate::sweep::SweepError::Value {
                                key: "link".into(),
                                reason: "a link rate is given for every point already".into(),
                            }));
                        }
                        b.link = Some(rate);
                        if b.burst_bytes.is_some() {
                            b.burst_bytes = Some(crate::qdisc::tbf_burst_bytes(rate, bed_mtu));
                        }
                    }
                }
                let cfg = Config::from_request(target, &p.config.request)?;
                Ok(crate::sweep::Point {
                    settings: p.settings,
                    config: (cfg, p.config.bed),
                })
            })
            .collect()
    }
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
            sweep: Vec::new(),
            repeat: 1,
            omit: Duration::ZERO,
            no_udp_checksum: false,
            verify_one_in: None,
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
    /// The bucket of a token-bucket (tbf) link, bytes: what an idle link
    /// passes at once above its rate (None: no bucket, as on the emulator).
    pub burst_bytes: Option<u64>,
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
    /// The sweeps make no matrix.
    #[error(transparent)]
    Sweep(crate::sweep::SweepError),
    /// A repeat count out of range.
    #[error("{0}")]
    Repeat(String),
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
    /// The first ns of each run left out of its figures.
    pub omit_ns: u64,
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
        Ok(Self {
            target,
            runs,
            link,
            omit_ns: 0,
        })
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
            duration_ns: nanos(req.duration.saturating_add(req.omit)),
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
            no_udp_checksum: req.no_udp_checksum,
            verify_one_in: req.verify_one_in,
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
        let mut cfg = Self::new(target, runs, req.link)?;
        cfg.omit_ns = nanos(req.omit);
        Ok(cfg)
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
            burst_bytes: None,
        };
        let c = Config::new(Target::Bed(bed.clone()), vec![reverse.clone()], None).unwrap();
        assert_eq!(c.line(), Some((BitRate::from_mbps(100), LinkSource::Bed)));
        let c = Config::new(Target::Bed(bed), vec![reverse], Some(BitRate::from_gbps(1))).unwrap();
        assert_eq!(c.line(), Some((BitRate::from_gbps(1), LinkSource::Given)));
    }

    #[test]
    fn a_link_point_is_the_models_link_and_bucket() {
        let bed = Target::Bed(BedTarget {
            client_netns: "lr-x-a".into(),
            server_netns: "lr-x-b".into(),
            server_ip: "198.18.0.2".parse().unwrap(),
            port: None,
            link: Some(BitRate::from_gbps(1)),
            mtu_bytes: None,
            burst_bytes: Some(64_000),
        });
        let req = Request {
            protocol: Protocol::Udp,
            sweep: vec!["link=100M,10G".into()],
            ..Request::default()
        };
        let p = req.points(&bed).unwrap();
        let got: Vec<_> = p
            .iter()
            .map(|p| match &p.config.0.target {
                Target::Bed(b) => (b.link, b.burst_bytes, p.config.0.line()),
                _ => panic!("a bed"),
            })
            .collect();
        let (m100, g10) = (BitRate::from_mbps(100), BitRate::from_gbps(10));
        assert_eq!(
            got,
            [
                (Some(m100), Some(64_000), Some((m100, LinkSource::Bed))),
                (Some(g10), Some(640_000), Some((g10, LinkSource::Bed))),
            ]
        );
        // A rate given for every point would hide the point's.
        let fixed = Request {
            link: Some(BitRate::from_gbps(1)),
            ..req
        };
        let e = fixed.points(&bed).unwrap_err().to_string();
        assert!(e.contains("link: a link rate is given"), "{e}");
    }

    #[test]
    fn sweeps_make_checked_points() {
        let server = Target::Server(SocketAddr::from(([127, 0, 0, 1], 1)));
        let bed = Target::Bed(BedTarget {
            client_netns: "lr-x-a".into(),
            server_netns: "lr-x-b".into(),
            server_ip: "198.18.0.2".parse().unwrap(),
            port: None,
            link: None,
            mtu_bytes: Some(1500),
            burst_bytes: None,
        });
        let req = Request {
            protocol: Protocol::Udp,
            sweep: vec!["mtu=1500,9000".into(), "window=64K,4M".into()],
            repeat: 3,
            ..Request::default()
        };
        let p = req.points(&bed).unwrap();
        assert_eq!(p.len(), 4);
        let (cfg, bedset) = &p[3].config;
        assert_eq!(bedset, &[crate::sweep::BedSetting::Mtu(9000)]);
        assert_eq!(cfg.runs[0].window_bytes, Some(4 << 20));
        let Target::Bed(b) = &cfg.target else {
            panic!("a bed")
        };
        assert_eq!(b.mtu_bytes, Some(9000), "the point's MTU is the path's");
        assert_eq!(crate::sweep::label(&p[3].settings), "mtu=9000 window=4M");
        // Bed keys only on a bed; values checked before anything runs.
        let e = |sweep: &str, t: &Target| {
            let r = Request {
                sweep: vec![sweep.into()],
                ..Request::default()
            };
            r.points(t).unwrap_err().to_string()
        };
        assert!(e("mtu=9000", &server).contains("unknown key 'mtu'"));
        assert!(e("path=warp", &bed).contains("path: unknown value 'warp'"));
        assert!(e("gro=maybe", &bed).contains("gro: 'maybe' is not on or off"));
        assert!(e("mtu=10", &bed).contains("mtu: 10 is outside"));
        assert!(e("udp-checksum=off", &server).contains("no_udp_checksum: applies to UDP only"));
        assert!(e("verify-one-in=x", &server).contains("'x' is not a number"));
        assert!(e("verify-one-in=1,0", &server).contains("verify_one_in: verify one payload"));
        let sampled = Request {
            sweep: vec!["verify-one-in=1,16".into()],
            ..Request::default()
        };
        let p = sampled.points(&server).unwrap();
        let n: Vec<_> = p.iter().map(|p| p.config.0.runs[0].verify_one_in).collect();
        assert_eq!(n, [Some(1), Some(16)]);
        assert!(
            e("size=1", &server).contains("size_bytes"),
            "checked by params"
        );
        let zero = Request {
            repeat: 0,
            ..Request::default()
        };
        assert!(matches!(zero.points(&server), Err(ConfigError::Repeat(_))));
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
