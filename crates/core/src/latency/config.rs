//! What a `linerate latency` run is asked to do, checked once: [`Request`]
//! (the raw choices, as a user gave them) becomes a [`Config`] (validated,
//! defaults applied, sweeps expanded) or a [`ConfigError`] naming the
//! parameter at fault.
//!
//! Error strings name parameters (`stamp_every`, `sweep`), never command-line
//! flags: the binary maps [`Parameter`]s to its flag names.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::procedure::pingpong::{Schedule, Until, AUTO_TIMEOUT_MAX};
use crate::sweep::on_off;
use crate::units::{BitRate, ByteCount};
use crate::wire::control::DEFAULT_PORT;

use super::{EchoProtocol, ReflectorMode, Responder, MAX_REQUEST_BYTES};

/// One UDP or TCP exchange in this many is kernel-stamped unless asked
/// otherwise:
/// enough for stage percentiles in any run of a second or more, while three
/// quarters of the exchanges measure an RTT free of the stamping cost
/// (1–1.3 µs a round trip on veth, docs/METHODOLOGY.md).
pub const DEFAULT_STAMP_EVERY: u32 = 4;

/// Requests of a run unless a count or a time is given.
pub const DEFAULT_COUNT: u64 = 1000;

/// Requests in flight at most with an open-loop rate.
pub const MAX_IN_FLIGHT: u32 = 64;

/// Highest open-loop rate, requests/s.
pub const MAX_RATE_PER_S: f64 = 10_000_000.0;

/// Configurations one sweep may make, at most.
pub const MAX_CONFIGURATIONS: usize = 64;

/// The port of the RFC 862 echo service.
pub const ECHO_PORT: u16 = 7;

/// Largest UDP request: an IPv4 datagram's payload.
pub const MAX_UDP_REQUEST_BYTES: u64 = 65_507;

/// Largest ICMP echo data.
pub const MAX_ICMP_DATA_BYTES: u64 = 65_000;

/// Where the responder is, as the user named it (host names already
/// resolved to an address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// A host running `linerate server` (or, with ICMP, any host: its kernel
    /// answers).
    Server(IpAddr),
    /// A plain echo server (RFC 862): client-side stages only.
    Echo(IpAddr),
    /// linerate's reflector in this process, on this local address.
    InProcess(IpAddr),
    /// A testbed: the client in one namespace, the responder in another.
    Bed(BedPeer),
}

/// A testbed's ends as plain data (the binary reads them from the bed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BedPeer {
    /// The bed's name.
    pub name: String,
    /// Namespace of the client (host a); `None`: the caller's.
    pub client_netns: Option<String>,
    /// Namespace of the responder (host b); `None`: the caller's.
    pub responder_netns: Option<String>,
    /// The responder's address (host b).
    pub responder_ip: IpAddr,
    /// The bed's emulated link, if it has one: the wire time of the model
    /// is the least a round trip can take on it.
    pub link: Option<BitRate>,
}

/// How a run is arranged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// `linerate server` at the target (its control port) starts a reflector
    /// for the session and returns its stamps.
    Server,
    /// linerate's reflector in this process (on a bed: in the responder's
    /// namespace), on the target's address, any free port.
    LocalReflector,
    /// The client alone: a plain echo server or the peer's kernel answers.
    ClientOnly,
}

/// The choices of a run as given, before any default or check.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The responder.
    pub peer: Peer,
    /// Echo protocol.
    pub protocol: EchoProtocol,
    /// Port: the server's control port, or the echo service's.
    pub port: Option<u16>,
    /// Request size (UDP payload, TCP bytes per request, ICMP data).
    pub size: Option<ByteCount>,
    /// Number of requests.
    pub count: Option<u64>,
    /// Send for this long instead of a count.
    pub time: Option<Duration>,
    /// Gap between requests.
    pub interval: Option<Duration>,
    /// Requests per second, open loop.
    pub rate_per_s: Option<f64>,
    /// A reply later than this counts as lost (None: UDP and ICMP size it
    /// from the RTTs seen, [`crate::procedure::pingpong::sized_timeout`];
    /// TCP, which delays replies rather than losing them, waits 1 s).
    pub timeout: Option<Duration>,
    /// The client spins on non-blocking receives.
    pub spin: bool,
    /// How the reflector waits.
    pub reflector_mode: ReflectorMode,
    /// The reflector copies each request before answering.
    pub reflector_copy: bool,
    /// SO_NO_CHECK on both ends.
    pub no_udp_checksum: bool,
    /// Kernel timestamps on both ends.
    pub kernel_stamps: bool,
    /// One exchange in this many is kernel-stamped (UDP).
    pub stamp_every: Option<u32>,
    /// Sweeps: `KEY=V1,V2`, each multiplying the configurations.
    pub sweep: Vec<String>,
    /// Runs of each configuration (1: one, no spread).
    pub repeat: u32,
}

impl Request {
    /// A request for `peer` over `protocol` with every other choice at its
    /// default.
    pub fn new(peer: Peer, protocol: EchoProtocol) -> Self {
        Self {
            peer,
            protocol,
            port: None,
            size: None,
            count: None,
            time: None,
            interval: None,
            rate_per_s: None,
            timeout: None,
            spin: false,
            reflector_mode: ReflectorMode::Blocking,
            reflector_copy: false,
            no_udp_checksum: false,
            kernel_stamps: true,
            stamp_every: None,
            sweep: Vec::new(),
            repeat: 1,
        }
    }
}

/// The settings one configuration (a row of the result) varies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// The swept settings that name it (`[("reflector-mode", "busy")]`;
    /// empty without sweeps).
    pub settings: Vec<(String, String)>,
    /// How the reflector waits.
    pub reflector_mode: ReflectorMode,
    /// The reflector copies each request.
    pub reflector_copy: bool,
    /// SO_NO_CHECK on both ends.
    pub no_udp_checksum: bool,
    /// The client spins.
    pub spin: bool,
    /// Request size in bytes.
    pub size_bytes: u64,
    /// Bed settings the configuration needs (on a bed only: [`BED_KEYS`]
    /// of [`crate::sweep`]), set before it runs and restored after.
    ///
    /// [`BED_KEYS`]: crate::sweep::BED_KEYS
    pub bed: Vec<crate::sweep::BedSetting>,
}

/// A validated run: what the driver in `linerate-io` does.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Echo protocol.
    pub protocol: EchoProtocol,
    /// Who answers.
    pub responder: Responder,
    /// How the run is arranged.
    pub setup: Setup,
    /// The responder's address and port (port 0: the local reflector picks).
    pub target: SocketAddr,
    /// The testbed, if the run is on one.
    pub bed: Option<BedPeer>,
    /// When requests go out and when the run ends.
    pub schedule: Schedule,
    /// Kernel timestamps on both ends.
    pub kernel_stamps: bool,
    /// One exchange in this many is kernel-stamped (1: every one).
    pub stamp_every: u32,
    /// The configurations, one result row each, in order.
    pub variants: Vec<Variant>,
    /// Runs of each configuration: with more than one, every configuration
    /// runs once per round, round after round, and the result has the
    /// spread.
    pub repeat: u32,
}

/// A parameter of a run, as errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parameter {
    /// The responder (peer and placement).
    Peer,
    /// Requests.
    Count,
    /// Duration.
    Time,
    /// Open-loop rate.
    Rate,
    /// Request size.
    Size,
    /// Stamp sampling.
    StampEvery,
    /// UDP checksums off.
    NoUdpChecksum,
    /// Sweeps.
    Sweep,
    /// How long a reply may take.
    Timeout,
    /// Repeats.
    Repeat,
}

impl Parameter {
    /// snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Peer => "peer",
            Self::Count => "count",
            Self::Time => "time",
            Self::Rate => "rate",
            Self::Size => "size",
            Self::StampEvery => "stamp_every",
            Self::NoUdpChecksum => "no_udp_checksum",
            Self::Sweep => "sweep",
            Self::Timeout => "timeout",
            Self::Repeat => "repeat",
        }
    }
}

impl fmt::Display for Parameter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a [`Request`] makes no run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{parameter}: {reason}")]
pub struct ConfigError {
    /// The parameter at fault.
    pub parameter: Parameter,
    /// What is wrong with it.
    pub reason: String,
}

fn err<T>(parameter: Parameter, reason: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError {
        parameter,
        reason: reason.into(),
    })
}

impl Config {
    /// Checks `req` and applies the defaults.
    pub fn new(req: &Request) -> Result<Self, ConfigError> {
        let proto = req.protocol;
        let in_process = matches!(req.peer, Peer::InProcess(_));
        if proto == EchoProtocol::Icmp && in_process {
            return err(
                Parameter::Peer,
                "ICMP is answered by the peer's kernel; a reflector in this process does not apply",
            );
        }
        if req.timeout.is_some_and(|t| t.is_zero()) {
            return err(
                Parameter::Timeout,
                "must be above 0 (every reply would be lost)",
            );
        }
        if req.no_udp_checksum && proto != EchoProtocol::Udp {
            return err(Parameter::NoUdpChecksum, "applies to UDP only");
        }
        let stamp_every = match req.stamp_every {
            Some(0) => return err(Parameter::StampEvery, "must be at least 1"),
            n => n.unwrap_or(DEFAULT_STAMP_EVERY),
        };
        let size_bytes = match req.size {
            Some(b) => b.get(),
            None => default_size(proto),
        };
        let (responder, setup, ip, bed) = match &req.peer {
            _ if proto == EchoProtocol::Icmp => {
                let (ip, bed) = match &req.peer {
                    Peer::Bed(b) => (b.responder_ip, Some(b.clone())),
                    Peer::Server(ip) | Peer::Echo(ip) | Peer::InProcess(ip) => (*ip, None),
                };
                (Responder::Kernel, Setup::ClientOnly, ip, bed)
            }
            Peer::Server(ip) => (Responder::Reflector, Setup::Server, *ip, None),
            Peer::Echo(ip) => (Responder::PlainEcho, Setup::ClientOnly, *ip, None),
            Peer::InProcess(ip) => (Responder::Reflector, Setup::LocalReflector, *ip, None),
            Peer::Bed(b) => (
                Responder::Reflector,
                Setup::LocalReflector,
                b.responder_ip,
                Some(b.clone()),
            ),
        };
        // Against `linerate server` the port is its control port; a plain
        // echo server's is the echo service (RFC 862); a local reflector
        // takes any free port.
        let port = req.port.unwrap_or(match (&req.peer, setup) {
            (Peer::Echo(_), _) => ECHO_PORT,
            (_, Setup::Server) => DEFAULT_PORT,
            _ => 0,
        });
        let until = match (req.count, req.time) {
            (Some(0), _) => return err(Parameter::Count, "must be at least 1"),
            (Some(n), _) => Until::Count(n),
            (None, Some(t)) if t.is_zero() => return err(Parameter::Time, "must be above 0"),
            (None, Some(t)) => Until::Time(t),
            (None, None) => Until::Count(DEFAULT_COUNT),
        };
        let (interval, max_in_flight) = match (req.interval, req.rate_per_s) {
            (_, Some(r)) if !(r > 0.0 && r <= MAX_RATE_PER_S) => {
                return err(
                    Parameter::Rate,
                    "must be between 0 and 10,000,000 requests/s",
                )
            }
            (_, Some(r)) => (Duration::from_secs_f64(1.0 / r), MAX_IN_FLIGHT),
            (Some(i), None) => (i, 1),
            (None, None) => (Duration::ZERO, 1),
        };
        let base = Variant {
            settings: Vec::new(),
            reflector_mode: req.reflector_mode,
            reflector_copy: req.reflector_copy,
            no_udp_checksum: req.no_udp_checksum,
            spin: req.spin,
            size_bytes,
            bed: Vec::new(),
        };
        let variants = expand_on(base, &req.sweep, bed.is_some())?;
        for v in &variants {
            check_size(proto, v.size_bytes)?;
        }
        Ok(Self {
            protocol: proto,
            responder,
            setup,
            target: SocketAddr::new(ip, port),
            bed,
            schedule: Schedule {
                until,
                interval,
                max_in_flight,
                timeout: req.timeout.unwrap_or(AUTO_TIMEOUT_MAX),
                // TCP loses no reply, it only delays one: a late reply is
                // waited for (the longest timeout), not counted lost.
                timeout_auto: req.timeout.is_none() && proto != EchoProtocol::Tcp,
            },
            kernel_stamps: req.kernel_stamps,
            stamp_every,
            variants,
            repeat: crate::sweep::check_repeat(req.repeat)
                .or_else(|e| err(Parameter::Repeat, e))?,
        })
    }

    /// How long a run means to take, for the server to bound its reflector
    /// by (it adds a grace period and refuses more than its limit). A count
    /// is estimated at 10 ms per exchange (or the interval, if longer):
    /// generous for any LAN; a slower run is cut short and its last requests
    /// are reported lost.
    pub fn expected_duration_ns(&self) -> u64 {
        let d = match self.schedule.until {
            Until::Time(t) => t,
            Until::Count(n) => self
                .schedule
                .interval
                .max(Duration::from_millis(10))
                .checked_mul(u32::try_from(n).unwrap_or(u32::MAX))
                .unwrap_or(Duration::MAX),
        };
        u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Both ends stamp with one clock by construction (one process, or one
    /// host's namespaces); against a server it is known only once the
    /// server said its boot id.
    pub fn same_clock_expected(&self) -> bool {
        self.bed.is_some() || self.setup != Setup::ClientOnly
    }

    /// The target as the result names it.
    pub fn target_label(&self) -> String {
        let ip = self.target.ip();
        match (&self.bed, self.setup) {
            (Some(b), Setup::LocalReflector) => {
                format!("{ip} (bed {}: host a → reflector in host b)", b.name)
            }
            (Some(b), _) => format!("{ip} (bed {}: host a → host b)", b.name),
            (None, Setup::LocalReflector) => format!("{ip} (reflector in this process)"),
            (None, _) => self.target.to_string(),
        }
    }
}

/// The request size of `protocol` unless one is given: 64 B UDP payload,
/// 1 B per TCP request, 56 B of ICMP data (ping's).
pub fn default_size(protocol: EchoProtocol) -> u64 {
    match protocol {
        EchoProtocol::Udp => 64,
        EchoProtocol::Tcp => 1,
        EchoProtocol::Icmp => 56,
    }
}

/// The request sizes `protocol` carries, bytes.
pub fn size_range(protocol: EchoProtocol) -> (u64, u64) {
    match protocol {
        EchoProtocol::Udp => (crate::wire::echo::HEADER_LEN as u64, MAX_UDP_REQUEST_BYTES),
        EchoProtocol::Tcp => (1, MAX_REQUEST_BYTES),
        EchoProtocol::Icmp => (0, MAX_ICMP_DATA_BYTES),
    }
}

fn check_size(protocol: EchoProtocol, size: u64) -> Result<(), ConfigError> {
    let (min, max) = size_range(protocol);
    if (min..=max).contains(&size) {
        return Ok(());
    }
    err(
        Parameter::Size,
        format!(
            "request size {size} B is outside {min}..={max} B for {}",
            protocol.name()
        ),
    )
}

/// The keys a sweep may vary.
pub const SWEEP_KEYS: [&str; 5] = [
    "reflector-mode",
    "reflector-copy",
    "udp-checksum",
    "spin",
    "size",
];

/// One sweep value applied to a configuration (the key is one of
/// [`SWEEP_KEYS`]).
fn apply(c: &mut Variant, key: &str, v: &str) -> Result<(), String> {
    match key {
        "reflector-mode" => c.reflector_mode = v.parse()?,
        "reflector-copy" => c.reflector_copy = on_off(v)?,
        "udp-checksum" => c.no_udp_checksum = !on_off(v)?,
        "spin" => c.spin = on_off(v)?,
        k if crate::sweep::BED_KEYS.contains(&k) => {
            c.bed.push(crate::sweep::BedSetting::parse(k, v)?)
        }
        _ => {
            let b: ByteCount = v.parse().map_err(|e| format!("'{v}': {e}"))?;
            c.size_bytes = b.get();
        }
    }
    Ok(())
}

/// Expands sweeps (`KEY=V1,V2`, each multiplying the configurations) from
/// `base` with [`crate::sweep::expand`]; every configuration's `settings`
/// name the values it took.
pub fn expand(base: Variant, sweeps: &[String]) -> Result<Vec<Variant>, ConfigError> {
    expand_on(base, sweeps, false)
}

/// [`expand`], with the bed keys too when the run is `on_bed`.
fn expand_on(base: Variant, sweeps: &[String], on_bed: bool) -> Result<Vec<Variant>, ConfigError> {
    let mut keys = SWEEP_KEYS.to_vec();
    if on_bed {
        keys.extend(crate::sweep::BED_KEYS);
    }
    let points =
        crate::sweep::expand(base, sweeps, &keys, MAX_CONFIGURATIONS, apply).map_err(|e| {
            ConfigError {
                parameter: Parameter::Sweep,
                reason: e.to_string(),
            }
        })?;
    Ok(points
        .into_iter()
        .map(|p| Variant {
            settings: p.settings,
            ..p.config
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lo() -> IpAddr {
        IpAddr::from([127, 0, 0, 1])
    }

    fn config(f: impl FnOnce(&mut Request)) -> Result<Config, ConfigError> {
        let mut r = Request::new(Peer::InProcess(lo()), EchoProtocol::Udp);
        f(&mut r);
        Config::new(&r)
    }

    fn refused(f: impl FnOnce(&mut Request), parameter: Parameter, reason: &str) {
        let e = config(f).expect_err("refused");
        assert_eq!(e.parameter, parameter, "{e}");
        assert!(e.reason.contains(reason), "{e}");
        assert!(!e.to_string().contains("--"), "names no flag: {e}");
    }

    #[test]
    fn defaults_per_protocol_and_peer() {
        let c = config(|_| {}).unwrap();
        assert_eq!((c.stamp_every, c.variants[0].size_bytes), (4, 64));
        assert_eq!(
            (c.setup, c.responder),
            (Setup::LocalReflector, Responder::Reflector)
        );
        assert_eq!(c.target, SocketAddr::new(lo(), 0));
        assert_eq!(c.schedule.until, Until::Count(1000));
        assert!(c.same_clock_expected());
        let c = config(|r| r.protocol = EchoProtocol::Tcp).unwrap();
        assert_eq!((c.stamp_every, c.variants[0].size_bytes), (4, 1));
        let c = config(|r| r.peer = Peer::Server(lo())).unwrap();
        assert_eq!(c.target.port(), DEFAULT_PORT);
        assert_eq!(c.target_label(), format!("127.0.0.1:{DEFAULT_PORT}"));
        let c = config(|r| r.peer = Peer::Echo(lo())).unwrap();
        assert_eq!((c.target.port(), c.responder), (7, Responder::PlainEcho));
        assert!(!c.same_clock_expected());
        let c = config(|r| {
            r.peer = Peer::Server(lo());
            r.protocol = EchoProtocol::Icmp;
        })
        .unwrap();
        assert_eq!(
            (c.setup, c.responder),
            (Setup::ClientOnly, Responder::Kernel)
        );
        assert_eq!(c.variants[0].size_bytes, 56);
        // ICMP samples its transmit stamps as UDP and TCP do.
        assert_eq!(c.stamp_every, DEFAULT_STAMP_EVERY);
        let c = config(|r| r.rate_per_s = Some(1000.0)).unwrap();
        assert_eq!(c.schedule.max_in_flight, MAX_IN_FLIGHT);
        assert_eq!(c.schedule.interval, Duration::from_millis(1));
    }

    #[test]
    fn bed_places_the_reflector_in_host_b() {
        let bed = BedPeer {
            name: "lab".into(),
            client_netns: Some("lr-lab-a".into()),
            responder_netns: Some("lr-lab-b".into()),
            responder_ip: IpAddr::from([198, 18, 0, 2]),
            link: None,
        };
        let c = config(|r| r.peer = Peer::Bed(bed.clone())).unwrap();
        assert_eq!(c.setup, Setup::LocalReflector);
        assert_eq!(c.target, "198.18.0.2:0".parse().unwrap());
        assert_eq!(
            c.target_label(),
            "198.18.0.2 (bed lab: host a → reflector in host b)"
        );
        let c = config(|r| {
            r.peer = Peer::Bed(bed);
            r.protocol = EchoProtocol::Icmp;
        })
        .unwrap();
        assert_eq!(c.setup, Setup::ClientOnly);
        assert!(c.same_clock_expected());
        assert_eq!(c.target_label(), "198.18.0.2 (bed lab: host a → host b)");
    }

    #[test]
    fn bed_keys_sweep_on_a_bed_only() {
        let bed = BedPeer {
            name: "lab".into(),
            client_netns: Some("lr-lab-a".into()),
            responder_netns: Some("lr-lab-b".into()),
            responder_ip: IpAddr::from([198, 18, 0, 2]),
            link: None,
        };
        let c = config(|r| {
            r.peer = Peer::Bed(bed.clone());
            r.sweep = vec!["mtu=1500,9000".into(), "spin=off,on".into()];
        })
        .unwrap();
        let got: Vec<(Vec<crate::sweep::BedSetting>, bool)> =
            c.variants.iter().map(|v| (v.bed.clone(), v.spin)).collect();
        use crate::sweep::BedSetting::Mtu;
        assert_eq!(
            got,
            [
                (vec![Mtu(1500)], false),
                (vec![Mtu(1500)], true),
                (vec![Mtu(9000)], false),
                (vec![Mtu(9000)], true)
            ]
        );
        assert_eq!(c.variants[3].settings[0], ("mtu".into(), "9000".into()));
        // Off a bed there is no bed to set.
        let e = config(|r| r.sweep = vec!["mtu=9000".into()]).unwrap_err();
        assert!(e.reason.contains("unknown key 'mtu'"), "{}", e.reason);
        let e = config(|r| {
            r.peer = Peer::Bed(bed);
            r.sweep = vec!["gro=sometimes".into()];
        })
        .unwrap_err();
        assert!(
            e.reason.contains("'sometimes' is not on or off"),
            "{}",
            e.reason
        );
    }

    #[test]
    fn bad_requests_name_their_parameter() {
        refused(
            |r| r.stamp_every = Some(0),
            Parameter::StampEvery,
            "at least 1",
        );
        refused(
            |r| r.protocol = EchoProtocol::Icmp,
            Parameter::Peer,
            "kernel",
        );
        refused(
            |r| {
                r.protocol = EchoProtocol::Tcp;
                r.no_udp_checksum = true;
            },
            Parameter::NoUdpChecksum,
            "UDP only",
        );
        refused(|r| r.count = Some(0), Parameter::Count, "at least 1");
        refused(
            |r| r.time = Some(Duration::ZERO),
            Parameter::Time,
            "above 0",
        );
        refused(|r| r.rate_per_s = Some(-5.0), Parameter::Rate, "between");
        refused(|r| r.rate_per_s = Some(0.0), Parameter::Rate, "between");
        refused(
            |r| r.size = Some(ByteCount::new(8)),
            Parameter::Size,
            "size 8 B",
        );
        refused(
            |r| r.sweep = vec!["colour=red".into()],
            Parameter::Sweep,
            "unknown key",
        );
        refused(
            |r| r.sweep = vec!["reflector-mode=lazy".into()],
            Parameter::Sweep,
            "lazy",
        );
        refused(
            |r| r.sweep = vec!["size=8,64".into()],
            Parameter::Size,
            "size 8 B",
        );
        refused(
            |r| r.sweep = vec!["spin".into()],
            Parameter::Sweep,
            "KEY=V1,V2",
        );
        refused(
            |r| r.sweep = vec!["spin=".into()],
            Parameter::Sweep,
            "no values",
        );
    }

    #[test]
    fn sweeps_multiply_and_name_their_rows() {
        let c = config(|r| {
            r.sweep = vec!["reflector-copy=off,on".into(), "udp-checksum=on,off".into()];
        })
        .unwrap();
        assert_eq!(c.variants.len(), 4);
        let last = &c.variants[3];
        assert!(last.reflector_copy && last.no_udp_checksum);
        assert_eq!(
            last.settings,
            vec![
                ("reflector-copy".to_string(), "on".to_string()),
                ("udp-checksum".to_string(), "off".to_string())
            ]
        );
        let many: Vec<String> = (0..7).map(|_| "spin=on,off".to_string()).collect();
        assert!(expand(config(|_| {}).unwrap().variants[0].clone(), &many).is_err());
    }

    #[test]
    fn the_timeout_is_sized_unless_given_and_repeats_are_bounded() {
        let c = config(|_| {}).unwrap();
        assert!(c.schedule.timeout_auto);
        assert_eq!(c.schedule.timeout, AUTO_TIMEOUT_MAX);
        let c = config(|r| r.timeout = Some(Duration::from_millis(3))).unwrap();
        assert!(!c.schedule.timeout_auto);
        assert_eq!(c.schedule.timeout, Duration::from_millis(3));
        let c = config(|r| r.protocol = EchoProtocol::Tcp).unwrap();
        assert!(!c.schedule.timeout_auto, "TCP replies are late, never lost");
        assert_eq!(c.schedule.timeout, AUTO_TIMEOUT_MAX);
        assert_eq!(config(|r| r.repeat = 5).unwrap().repeat, 5);
        refused(|r| r.repeat = 0, Parameter::Repeat, "between 1 and");
    }

    #[test]
    fn expected_duration() {
        let c = config(|r| r.count = Some(100)).unwrap();
        assert_eq!(c.expected_duration_ns(), 1_000_000_000);
        let c = config(|r| r.time = Some(Duration::from_secs(3))).unwrap();
        assert_eq!(c.expected_duration_ns(), 3_000_000_000);
    }
}
