//! `linerate exporter`: OpenMetrics for continuous monitoring, in the style
//! of Prometheus' blackbox exporter. `GET /probe?target=HOST[:PORT]&test=
//! throughput|latency[&duration=S]` runs one short test against the
//! `linerate server` on HOST and answers with its figures; `GET /metrics`
//! answers with the exporter's own counters.
//!
//! It is not an open proxy: a target must resolve to an address inside an
//! `--allow-target` prefix (default: loopback only), a probe lasts at most
//! `--max-duration`, at most `--max-probes` run at once (more get 503), and
//! the HTTP side reads at most 8 KiB of request head within 5 s, serves GET
//! only and at most 32 connections at once.

mod http;
mod metrics;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use linerate_core::latency::{EchoProtocol, Peer};
use linerate_core::progress::Silent;
use linerate_core::result::{exit_code, Flag};
use linerate_core::units::parse_duration;
use linerate_core::wire::control::DEFAULT_PORT;
use prometheus_client::registry::Registry;

use self::http::{Request, Response, OPENMETRICS};
use crate::Failure;

/// Most connections handled at once; more are answered 503 at once.
const MAX_CONNECTIONS: usize = 32;

/// An address prefix (`198.18.0.0/15`, `::1/128`, or one address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    /// Whether `ip` is inside (an IPv4-mapped IPv6 address counts as IPv4).
    fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(p) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(p) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Prefix {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (a, len) = s.split_once('/').unwrap_or((s, ""));
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("'{a}' is not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            "" => max,
            l => l
                .parse::<u8>()
                .ok()
                .filter(|l| *l <= max)
                .ok_or_else(|| format!("'/{l}': a prefix length is 0 to {max}"))?,
        };
        Ok(Self { addr, len })
    }
}

/// Loopback: the default allowed targets.
fn loopback() -> Vec<Prefix> {
    vec![
        Prefix {
            addr: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)),
            len: 8,
        },
        Prefix {
            addr: IpAddr::V6(Ipv6Addr::LOCALHOST),
            len: 128,
        },
    ]
}

// Flags of `linerate exporter`.
#[derive(Debug, Args)]
pub(crate) struct ExporterArgs {
    /// Address and port to serve HTTP on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9753")]
    pub(crate) listen: SocketAddr,
    /// Addresses a probe may test, as prefixes (198.18.0.0/15, 2001:2::/48,
    /// or one address); repeat for several. Default: loopback only
    /// (127.0.0.0/8, ::1), so the exporter is no open proxy.
    #[arg(long, value_name = "PREFIX")]
    pub(crate) allow_target: Vec<Prefix>,
    /// Longest test a probe may ask for with `duration=`.
    #[arg(long, value_name = "S", default_value = "10", value_parser = parse_duration)]
    pub(crate) max_duration: Duration,
    /// Test length when the probe gives no `duration=`.
    #[arg(long, value_name = "S", default_value = "2", value_parser = parse_duration)]
    pub(crate) default_duration: Duration,
    /// Most probes run at once; more are answered 503.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(crate) max_probes: u16,
}

/// What every connection's thread shares.
#[derive(Debug)]
struct Shared {
    allow: Vec<Prefix>,
    max_duration: Duration,
    default_duration: Duration,
    max_probes: usize,
    probes: AtomicUsize,
    own: metrics::Own,
    own_registry: Registry,
}

/// Runs `linerate exporter` until killed.
pub(crate) fn run(args: &ExporterArgs, _: &crate::Ctx) -> Result<(), Failure> {
    if args.default_duration > args.max_duration {
        return Err(anyhow::anyhow!("--default-duration is above --max-duration").into());
    }
    let listener =
        TcpListener::bind(args.listen).with_context(|| format!("listening on {}", args.listen))?;
    let own = metrics::Own::default();
    let shared = Arc::new(Shared {
        allow: match args.allow_target.is_empty() {
            true => loopback(),
            false => args.allow_target.clone(),
        },
        max_duration: args.max_duration,
        default_duration: args.default_duration,
        max_probes: usize::from(args.max_probes),
        probes: AtomicUsize::new(0),
        own_registry: own.registry(),
        own,
    });
    crate::output::elog!(
        "linerate exporter: serving http://{}/probe and /metrics",
        listener.local_addr().unwrap_or(args.listen)
    );
    let connections = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        if connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            connections.fetch_sub(1, Ordering::SeqCst);
            let _ = stream.set_write_timeout(Some(http::IO_TIMEOUT));
            http::write_response(&mut stream, &Response::text(503, "too many connections"));
            continue;
        }
        let (shared, active) = (shared.clone(), connections.clone());
        let spawned = std::thread::Builder::new()
            .name("lr-exporter".into())
            .spawn(move || {
                let (path, response) = match http::read_request(&mut stream) {
                    Ok(req) => (req.path.clone(), route(&shared, &req)),
                    Err(r) => ("other".to_string(), r),
                };
                shared.own.request(&path, response.status);
                http::write_response(&mut stream, &response);
                active.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            connections.fetch_sub(1, Ordering::SeqCst);
        }
    }
    Ok(())
}

fn route(shared: &Shared, req: &Request) -> Response {
    match req.path.as_str() {
        "/probe" => probe(shared, req),
        "/metrics" => match metrics::encode(&shared.own_registry) {
            Ok(body) => openmetrics(body),
            Err(_) => Response::text(500, "encoding the metrics failed"),
        },
        "/" => Response::text(
            200,
            "linerate exporter\n/probe?target=HOST[:PORT]&test=throughput|latency[&duration=S]\n/metrics",
        ),
        _ => Response::text(404, "not found: /probe and /metrics are served"),
    }
}

fn openmetrics(body: String) -> Response {
    Response {
        status: 200,
        content_type: OPENMETRICS,
        body,
    }
}

/// Which test a probe runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Test {
    Throughput,
    Latency,
}

/// The probe's parameters, checked: the target resolved and allowed.
fn probe_params(shared: &Shared, req: &Request) -> Result<(Test, SocketAddr, Duration), String> {
    let test = match req.param("test") {
        Some("throughput") => Test::Throughput,
        Some("latency") => Test::Latency,
        Some(t) => return Err(format!("test '{t}': throughput or latency")),
        None => return Err("test= is missing: throughput or latency".into()),
    };
    let target = req.param("target").ok_or("target= is missing")?;
    let (host, port) = split_host_port(target)?;
    let addr = linerate_io::resolve::resolve(host, port, false)
        .map_err(|e| format!("target '{target}': {e}"))?;
    if !shared.allow.iter().any(|p| p.contains(addr.ip())) {
        return Err(format!(
            "target {} is outside the allowed prefixes (--allow-target)",
            addr.ip()
        ));
    }
    let duration = match req.param("duration") {
        None => shared.default_duration,
        Some(d) => parse_duration(d).map_err(|e| format!("duration '{d}': {e}"))?,
    };
    if duration > shared.max_duration || duration < Duration::from_millis(100) {
        return Err(format!(
            "duration {:?}: from 0.1 s to --max-duration ({:?})",
            duration, shared.max_duration
        ));
    }
    Ok((test, addr, duration))
}

/// `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address.
fn split_host_port(target: &str) -> Result<(&str, u16), String> {
    let bad_port = |p: &str| format!("port '{p}' is not a number");
    if let Some(rest) = target.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("unclosed '['")?;
        return match after.strip_prefix(':') {
            Some(p) => Ok((host, p.parse().map_err(|_| bad_port(p))?)),
            None if after.is_empty() => Ok((host, DEFAULT_PORT)),
            None => Err(format!("'{after}' after the address")),
        };
    }
    match target.matches(':').count() {
        0 => Ok((target, DEFAULT_PORT)),
        1 => {
            let (h, p) = target.split_once(':').unwrap_or((target, ""));
            Ok((h, p.parse().map_err(|_| bad_port(p))?))
        }
        _ => Ok((target, DEFAULT_PORT)),
    }
}

/// Holds one of the probe slots while a probe runs.
struct Slot<'a>(&'a Shared);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.probes.fetch_sub(1, Ordering::SeqCst);
        self.0.own.in_flight.dec();
    }
}

fn probe(shared: &Shared, req: &Request) -> Response {
    let name = req.param("test").unwrap_or("none").to_string();
    let (test, addr, duration) = match probe_params(shared, req) {
        Ok(p) => p,
        Err(why) => {
            shared.own.probe(&name, "refused");
            let status = if why.contains("--allow-target") {
                403
            } else {
                400
            };
            return Response::text(status, why);
        }
    };
    if shared.probes.fetch_add(1, Ordering::SeqCst) >= shared.max_probes {
        shared.probes.fetch_sub(1, Ordering::SeqCst);
        shared.own.probe(&name, "refused");
        return Response::text(503, "too many probes running (--max-probes)");
    }
    shared.own.in_flight.inc();
    let _slot = Slot(shared);
    let t0 = Instant::now();
    let mut reg = Registry::default();
    let outcome = match test {
        Test::Throughput => throughput(addr, duration, &mut reg),
        Test::Latency => latency(addr, duration, &mut reg),
    };
    let flags = outcome.as_ref().map_or_else(|_| Vec::new(), Clone::clone);
    let success = outcome.is_ok() && exit_code(&flags) == 0;
    if let Err(e) = &outcome {
        crate::output::elog!("linerate exporter: probe {name} of {addr}: {e:#}");
    }
    metrics::probe_common(&mut reg, success, t0.elapsed().as_secs_f64(), &flags);
    shared
        .own
        .probe(&name, if success { "success" } else { "failure" });
    match metrics::encode(&reg) {
        Ok(body) => openmetrics(body),
        Err(_) => Response::text(500, "encoding the metrics failed"),
    }
}

/// A throughput test (TCP, forward, one stream) of `duration`.
fn throughput(
    addr: SocketAddr,
    duration: Duration,
    reg: &mut Registry,
) -> anyhow::Result<Vec<Flag>> {
    use linerate_core::throughput::config::{Config, Request, Target};
    let req = Request {
        duration,
        interval: duration,
        ..Request::default()
    };
    let cfg = Config::from_request(Target::Server(addr), &req)?;
    let interrupt = Arc::new(AtomicBool::new(false));
    let mut runs = linerate_io::throughput::run::run(&cfg, &mut Silent, &interrupt)?;
    let doc = runs
        .pop()
        .ok_or_else(|| anyhow::anyhow!("the test gave no result"))?;
    metrics::throughput(reg, &doc.result);
    Ok(doc.flags)
}

/// A UDP latency test of `duration` against the server's reflector.
fn latency(addr: SocketAddr, duration: Duration, reg: &mut Registry) -> anyhow::Result<Vec<Flag>> {
    use linerate_core::latency::{Config, Request};
    let req = Request {
        port: Some(addr.port()),
        time: Some(duration),
        ..Request::new(Peer::Server(addr.ip()), EchoProtocol::Udp)
    };
    let cfg = Config::new(&req)?;
    let doc = linerate_io::echo::run(&cfg, &mut Silent)?;
    metrics::latency(reg, &doc.result);
    Ok(doc.flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_contain_what_they_should() {
        let p: Prefix = "198.18.0.0/15".parse().unwrap();
        assert!(p.contains("198.19.255.1".parse().unwrap()));
        assert!(!p.contains("198.20.0.1".parse().unwrap()));
        assert!(!p.contains("::1".parse().unwrap()));
        let lo = loopback();
        assert!(lo.iter().any(|p| p.contains("127.0.0.1".parse().unwrap())));
        assert!(lo
            .iter()
            .any(|p| p.contains("::ffff:127.0.0.1".parse().unwrap())));
        assert!(lo.iter().any(|p| p.contains("::1".parse().unwrap())));
        assert!(!lo.iter().any(|p| p.contains("198.18.0.1".parse().unwrap())));
        let all: Prefix = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        assert!("1.2.3.4/33".parse::<Prefix>().is_err());
        assert!("host/8".parse::<Prefix>().is_err());
    }

    #[test]
    fn targets_split_into_host_and_port() {
        assert_eq!(
            split_host_port("127.0.0.1"),
            Ok(("127.0.0.1", DEFAULT_PORT))
        );
        assert_eq!(split_host_port("127.0.0.1:99"), Ok(("127.0.0.1", 99)));
        assert_eq!(split_host_port("[::1]:99"), Ok(("::1", 99)));
        assert_eq!(split_host_port("[::1]"), Ok(("::1", DEFAULT_PORT)));
        assert_eq!(split_host_port("::1"), Ok(("::1", DEFAULT_PORT)));
        assert!(split_host_port("a:b").is_err());
        assert!(split_host_port("[::1").is_err());
    }
}
