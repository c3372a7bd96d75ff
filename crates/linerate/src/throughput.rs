//! `linerate throughput HOST`: flags into a validated configuration, the
//! driver (`linerate_io::throughput::run`), the result rendered, its flags
//! returned.

use std::io::{IsTerminal as _, Write as _};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use linerate_core::progress::{Progress, Silent};
use linerate_core::result::{Envelope, Flag};
use linerate_core::throughput::config::{BedTarget, Config, ConfigError, Target};
use linerate_core::throughput::model::{
    Direction, ParamError, Protocol, RecvPath, Scenarios, SendPath, ThroughputParams,
    ThroughputResult, SCENARIOS_SCHEMA, SCENARIOS_VERSION,
};
use linerate_core::units::{format_bits_per_s, parse_duration, BitRate, ByteCount};
use linerate_core::wire::control::DEFAULT_PORT;
use linerate_io::throughput::run::{LocalServer, RunError};

use crate::output::{print, print_json};
use crate::Failure;

/// Flags of `linerate throughput`.
#[derive(Debug, Args)]
pub(crate) struct ThroughputArgs {
    /// The `linerate server` to test against (name or address), or a discard
    /// sink with --discard. Not with --bed.
    #[arg(required_unless_present = "bed", conflicts_with = "bed")]
    pub(crate) host: Option<String>,

    /// Run on a testbed (`linerate testbed up NAME`): the server in host b,
    /// the client in host a, both in this process (no server to start). The
    /// bed's --link is the line rate unless --link is given.
    #[arg(long, value_name = "NAME", conflicts_with = "discard")]
    pub(crate) bed: Option<String>,

    /// IPv6: with --bed the hosts' IPv6 addresses; with HOST its IPv6
    /// address (an error when it has none).
    #[arg(long)]
    pub(crate) ipv6: bool,

    /// Server port [default: `linerate server`'s]. With --bed, the port the
    /// bed's server listens on in host b (default: any free port).
    #[arg(long)]
    pub(crate) port: Option<u16>,

    /// TCP (the default).
    #[arg(long, conflicts_with = "udp")]
    pub(crate) tcp: bool,

    /// UDP.
    #[arg(long)]
    pub(crate) udp: bool,

    /// Sending time (s, ms, m …; a bare number is seconds).
    #[arg(long, value_name = "S", default_value = "10", value_parser = parse_time)]
    pub(crate) time: Duration,

    /// UDP datagram payload or TCP block, bytes, probe header (18 B) included
    /// [default: TCP 128K, UDP 1472 (IPv6: 1452), one 1500-byte-MTU packet].
    #[arg(long, value_name = "BYTES")]
    pub(crate) size: Option<ByteCount>,

    /// Streams per direction.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) streams: u16,

    /// The server sends, the client receives.
    #[arg(long, conflicts_with = "bidir")]
    pub(crate) reverse: bool,

    /// Both directions at once (each stream one way).
    #[arg(long)]
    pub(crate) bidir: bool,

    /// Pace each direction to this payload rate in bit/s (k/M/G), split
    /// evenly over its streams.
    #[arg(long, value_name = "BITS/S")]
    pub(crate) rate: Option<BitRate>,

    /// Send path: ideal, typical, zerocopy, sendfile (TCP), mmsg (UDP), gso (UDP).
    /// Several, comma-separated (e.g. ideal,typical,zerocopy), run one after
    /// the other and end with one table comparing them, as seed 000's scenarios.
    #[arg(
        long,
        value_name = "PATH[,PATH…]",
        value_delimiter = ',',
        default_value = "ideal"
    )]
    pub(crate) path: Vec<SendPath>,

    /// Receive path: copy, trunc, mmsg (UDP), gro (UDP).
    #[arg(long, value_name = "PATH", default_value = "copy")]
    pub(crate) recv_path: RecvPath,

    /// Receivers spin on non-blocking receives instead of sleeping: no
    /// wake-up per datagram (what limits small-packet rates when the
    /// receiver keeps up), at the cost of one CPU per receiving flow.
    #[arg(long)]
    pub(crate) recv_spin: bool,

    /// TCP receivers' low-water mark (SO_RCVLOWAT), bytes: a sleeping
    /// receiver is woken once this much is queued, not for every arriving
    /// segment. Default: the block size, at most 128 KiB; 1 is the kernel's
    /// default (wake on every arrival).
    #[arg(long, value_name = "BYTES")]
    pub(crate) recv_lowat: Option<ByteCount>,

    /// UDP receivers: after a receive finds the socket empty, sleep this
    /// many microseconds before looking again, so the datagrams arriving
    /// meanwhile queue without a wake-up each. Default 100; 0 waits in the
    /// kernel (woken per datagram when the receiver keeps up).
    #[arg(long, value_name = "MICROSECONDS")]
    pub(crate) recv_nap: Option<u32>,

    /// SO_SNDBUF and SO_RCVBUF of every data socket, bytes.
    #[arg(long, value_name = "BYTES")]
    pub(crate) window: Option<ByteCount>,

    /// TCP_NODELAY on TCP data sockets.
    #[arg(long)]
    pub(crate) nodelay: bool,

    /// TCP congestion control (TCP_CONGESTION), e.g. cubic, reno, bbr.
    #[arg(long, value_name = "NAME")]
    pub(crate) cc: Option<String>,

    /// TCP_MAXSEG before connecting, bytes.
    #[arg(long, value_name = "BYTES")]
    pub(crate) mss: Option<u32>,

    /// The link speed, for "% of max possible" (e.g. 100M, 1G).
    #[arg(long, value_name = "SPEED")]
    pub(crate) link: Option<BitRate>,

    /// Reporting interval.
    #[arg(long, value_name = "S", default_value = "1", value_parser = parse_time)]
    pub(crate) interval: Duration,

    /// One JSON document (schema linerate.throughput, version 2; several
    /// paths: linerate.throughput.scenarios, version 2).
    #[arg(long)]
    pub(crate) json: bool,

    /// Send to a discard sink (RFC 863 or a board's receive sink): no
    /// server, sender-side figures only, said to be one-sided.
    #[arg(long)]
    pub(crate) discard: bool,
}

fn parse_time(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The flag of each parameter of `ThroughputParams` (core names the
/// parameter; the command line names its flag).
const PARAM_FLAGS: [(&str, &str); 13] = [
    ("recv_lowat_bytes", "--recv-lowat"),
    ("recv_nap_us", "--recv-nap"),
    ("recv_spin", "--recv-spin"),
    ("recv_path", "--recv-path"),
    ("send_path", "--path"),
    ("streams", "--streams"),
    ("duration_ns", "--time"),
    ("size_bytes", "--size"),
    ("interval_ns", "--interval"),
    ("rate_bits_per_s", "--rate"),
    ("congestion", "--cc"),
    ("mss_bytes", "--mss"),
    ("window_bytes", "--window"),
];

/// A refused parameter as a usage error naming its flag.
fn param_usage(e: &ParamError) -> Failure {
    let flag = |p: &str| {
        PARAM_FLAGS
            .iter()
            .find(|(name, _)| *name == p)
            .map_or(p.to_string(), |(_, f)| (*f).to_string())
    };
    let mut reason = e.reason.clone();
    for (name, f) in PARAM_FLAGS.iter().filter(|(n, _)| n.contains('_')) {
        reason = reason.replace(name, f);
    }
    Failure::Usage(anyhow!("{}: {reason}", flag(e.param)))
}

impl ThroughputArgs {
    fn params(&self, ipv6: bool) -> Result<ThroughputParams, Failure> {
        let protocol = if self.udp {
            Protocol::Udp
        } else {
            Protocol::Tcp
        };
        let size = match self.size {
            Some(s) => u32::try_from(s.get()).map_err(|_| anyhow!("--size {s} is too large"))?,
            // The largest payload in one 1500-byte-MTU packet.
            None if protocol == Protocol::Udp && ipv6 => 1452,
            None if protocol == Protocol::Udp => 1472,
            None => 128 * 1024,
        };
        let window = match self.window {
            Some(w) => {
                Some(u32::try_from(w.get()).map_err(|_| anyhow!("--window {w} is too large"))?)
            }
            None => None,
        };
        let p = ThroughputParams {
            protocol,
            direction: if self.bidir {
                Direction::Bidir
            } else if self.reverse {
                Direction::Reverse
            } else {
                Direction::Forward
            },
            streams: self.streams,
            duration_ns: nanos(self.time),
            size_bytes: size,
            rate_bits_per_s: self.rate.map(BitRate::bps),
            send_path: self.path.first().copied().unwrap_or(SendPath::Ideal),
            recv_path: self.recv_path,
            recv_spin: self.recv_spin,
            recv_lowat_bytes: match self.recv_lowat {
                Some(b) => Some(
                    u32::try_from(b.get()).map_err(|_| anyhow!("--recv-lowat {b} is too large"))?,
                ),
                None => None,
            },
            recv_nap_us: self.recv_nap,
            window_bytes: window,
            nodelay: self.nodelay,
            congestion: self.cc.clone(),
            mss_bytes: self.mss,
            interval_ns: nanos(self.interval),
        };
        p.validate(None).map_err(|e| param_usage(&e))?;
        Ok(p)
    }

    /// The validated configuration: the target resolved (a bed to its
    /// namespaces, address, link and MTU), one run per send path.
    fn config(&self) -> Result<Config, Failure> {
        let target = match &self.bed {
            Some(name) => Target::Bed(bed_target(name, self.ipv6, self.port)?),
            None => {
                let addr = resolve(
                    self.host.as_deref().unwrap_or_default(),
                    self.port.unwrap_or(DEFAULT_PORT),
                    self.ipv6,
                )?;
                if self.discard {
                    Target::Discard(addr)
                } else {
                    Target::Server(addr)
                }
            }
        };
        let ipv6 = match &target {
            Target::Server(a) | Target::Discard(a) => a.is_ipv6(),
            Target::Bed(b) => b.server_ip.is_ipv6(),
        };
        let base = self.params(ipv6)?;
        let runs = self
            .path
            .iter()
            .map(|&send_path| ThroughputParams {
                send_path,
                ..base.clone()
            })
            .collect();
        Config::new(target, runs, self.link).map_err(|e| match e {
            ConfigError::Params(p) => param_usage(&p),
            ConfigError::DiscardReceives => Failure::Usage(anyhow!("--discard: {e}")),
            ConfigError::NoRuns => Failure::Usage(anyhow!("--path: {e}")),
        })
    }
}

/// A bed by name, as plain data.
fn bed_target(name: &str, ipv6: bool, port: Option<u16>) -> Result<BedTarget, Failure> {
    let bed = linerate_bed::Bed::open(name)
        .map_err(|e| anyhow!(e).context(format!("testbed '{name}'")))?;
    let server_ip: IpAddr = if ipv6 {
        bed.ipv6("b").map(Into::into)
    } else {
        bed.ipv4("b").map(Into::into)
    }
    .ok_or_else(|| anyhow!("testbed '{name}' has no address for host b"))?;
    let (client_netns, server_netns) = match (bed.netns("a"), bed.netns("b")) {
        (Some(a), Some(b)) => (a.to_string(), b.to_string()),
        _ => return Err(anyhow!("testbed '{name}' lacks host a or b").into()),
    };
    Ok(BedTarget {
        name: name.to_string(),
        client_netns,
        server_netns,
        server_ip,
        port,
        link: bed.link(),
        mtu_bytes: bed.spec().mtu,
    })
}

/// `host` at `port`; with `ipv6`, its IPv6 address only.
fn resolve(host: &str, port: u16, ipv6: bool) -> Result<SocketAddr, Failure> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let mut addrs = (host, port)
        .to_socket_addrs()
        .map_err(|e| anyhow!("cannot resolve '{host}': {e}"))?;
    if ipv6 {
        return addrs
            .find(SocketAddr::is_ipv6)
            .ok_or_else(|| Failure::Usage(anyhow!("--ipv6: '{host}' has no IPv6 address")));
    }
    addrs
        .next()
        .ok_or_else(|| Failure::Usage(anyhow!("'{host}' has no address")))
}

/// The live rate on stderr, only when stderr is a terminal.
#[derive(Debug, Default)]
struct RateLine {
    last: (f64, u64, u64),
    shown: bool,
}

impl Progress for RateLine {
    fn totals(&mut self, t: f64, tx: u64, rx: u64) {
        let dt = (t - self.last.0).max(1e-3);
        let line = format!(
            "\r  {t:6.1} s  sending {:>14}  receiving {:>14}   ",
            format_bits_per_s((tx - self.last.1.min(tx)) as f64 * 8.0 / dt),
            format_bits_per_s((rx - self.last.2.min(rx)) as f64 * 8.0 / dt),
        );
        self.last = (t, tx, rx);
        self.shown = true;
        let _ = std::io::stderr().write_all(line.as_bytes());
    }

    fn done(&mut self) {
        if self.shown {
            eprint!("\r{:70}\r", "");
        }
        *self = Self::default();
    }
}

/// Takes SIGINT/SIGTERM/SIGHUP on a thread: the first ends the test early
/// (the result is printed, marked incomplete), a second one exits at once.
fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    // Blocked here, on the main thread before any other thread exists, so
    // every thread spawned later inherits the mask.
    if linerate_io::signal::block_termination_signals().is_ok() {
        let f = Arc::clone(&flag);
        let _ = std::thread::Builder::new()
            .name("lr-signals".into())
            .spawn(move || {
                if let Ok(sig) = linerate_io::signal::wait_for_termination_signal() {
                    f.store(true, Ordering::Relaxed);
                    if let Ok(sig2) = linerate_io::signal::wait_for_termination_signal() {
                        std::process::exit(128 + sig2);
                    }
                    let _ = sig;
                }
            });
    }
    flag
}

fn run_failure(e: RunError) -> Failure {
    Failure::Usage(anyhow::Error::new(e))
}

/// Runs `linerate throughput`: one test per send path given. Returns the
/// result's flags (every run's, with several paths).
pub(crate) fn run(args: &ThroughputArgs, ctx: &crate::Ctx) -> Result<Vec<Flag>, Failure> {
    let cfg = args.config()?;
    let interrupt = interrupt_flag();
    let mut rate_line = RateLine::default();
    let mut silent = Silent;
    let progress: &mut dyn Progress = if std::io::stderr().is_terminal() {
        &mut rate_line
    } else {
        &mut silent
    };
    let mut runs =
        linerate_io::throughput::run::run(&cfg, progress, &interrupt).map_err(run_failure)?;
    if cfg.runs.len() == 1 {
        let Some(doc) = runs.pop() else {
            return Err(anyhow!("the test produced no result").into());
        };
        if args.json {
            print_json(&doc)?;
        } else {
            print(&linerate_report::throughput::render(&doc, ctx.width))?;
        }
        return Ok(doc.flags);
    }
    if !args.json {
        for r in &runs {
            print(&linerate_report::throughput::render(r, ctx.width))?;
            print("\n")?;
        }
    }
    let doc = scenarios(runs);
    if args.json {
        print_json(&doc)?;
    } else {
        print(&linerate_report::throughput::render_scenarios(
            &doc, ctx.width,
        ))?;
    }
    Ok(doc.flags)
}

/// Several runs in one document; its flags are every run's, each saying
/// which scenario raised it.
fn scenarios(runs: Vec<Envelope<ThroughputResult>>) -> Envelope<Scenarios> {
    let mut flags = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        for f in &r.flags {
            let mut f = f.clone();
            f.message = format!(
                "scenario {} ({}): {}",
                i + 1,
                r.result.params.send_path,
                f.message
            );
            flags.push(f.with("scenario", i + 1));
        }
    }
    let started_at = runs.first().and_then(|r| r.started_at.clone());
    let mut doc = Envelope::new(SCENARIOS_SCHEMA, SCENARIOS_VERSION, Scenarios { runs })
        .on(linerate_io::host::facts())
        .flagged(flags);
    doc.started_at = started_at;
    doc
}

/// `linerate demo`'s throughput part: a TCP test of `secs` seconds over
/// loopback against a server on a thread of this process.
pub(crate) fn demo_run(secs: u32) -> Result<Envelope<ThroughputResult>, Failure> {
    let server =
        LocalServer::start(None, SocketAddr::from(([127, 0, 0, 1], 0))).map_err(run_failure)?;
    let params = ThroughputParams {
        duration_ns: u64::from(secs) * 1_000_000_000,
        ..ThroughputParams::default()
    };
    let cfg = Config::new(Target::Server(server.addr()), vec![params], None)
        .map_err(|e| Failure::Usage(anyhow!(e)))?;
    let mut runs =
        linerate_io::throughput::run::run(&cfg, &mut Silent, &Arc::new(AtomicBool::new(false)))
            .map_err(run_failure)?;
    drop(server);
    runs.pop()
        .ok_or_else(|| anyhow!("the demo's test produced no result").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parameter_names_its_flag() {
        let e = ParamError {
            param: "recv_nap_us",
            reason: "TCP receivers are woken per block (recv_lowat_bytes)".into(),
        };
        let Failure::Usage(e) = param_usage(&e);
        assert_eq!(
            e.to_string(),
            "--recv-nap: TCP receivers are woken per block (--recv-lowat)"
        );
    }
}
