//! `linerate throughput HOST`: flags, running the client, building the
//! result (line-rate maximum, flags on preconditions) and printing it.

use std::io::{IsTerminal as _, Write as _};
use std::net::{SocketAddr, ToSocketAddrs as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use linerate_core::linerate::{Encap, NetLayer, TransportLayer};
use linerate_core::throughput::model::{
    sender_mss, Direction, End, FlowDir, FlowRole, LineMax, Protocol, RecvPath, SendPath,
    SideReport, ThroughputParams, ThroughputResult, SCHEMA, VERSION,
};
use linerate_core::units::{
    format_bits_per_s, group_thousands, parse_duration, BitRate, ByteCount,
};
use linerate_io::throughput::client;

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

    /// With --bed: use the hosts' IPv6 addresses.
    #[arg(long, requires = "bed")]
    pub(crate) ipv6: bool,

    /// Server port.
    #[arg(long, default_value_t = 5300)]
    pub(crate) port: u16,

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

    /// One JSON document (schema linerate.throughput, version 1).
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
        p.validate(None).map_err(|e| Failure::Usage(e.into()))?;
        Ok(p)
    }
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, Failure> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host, port)
        .to_socket_addrs()
        .map_err(|e| anyhow!("cannot resolve '{host}': {e}"))?
        .next()
        .ok_or_else(|| Failure::Usage(anyhow!("'{host}' has no address")))
}

/// A progress line on stderr, only when stderr is a terminal.
fn progress_printer() -> Option<impl FnMut(f64, u64, u64)> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let mut last = (0.0f64, 0u64, 0u64);
    Some(move |t: f64, tx: u64, rx: u64| {
        let dt = (t - last.0).max(1e-3);
        let line = format!(
            "\r  {t:6.1} s  sending {:>14}  receiving {:>14}   ",
            format_bits_per_s((tx - last.1.min(tx)) as f64 * 8.0 / dt),
            format_bits_per_s((rx - last.2.min(rx)) as f64 * 8.0 / dt),
        );
        last = (t, tx, rx);
        let _ = std::io::stderr().write_all(line.as_bytes());
    })
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

/// Runs `linerate throughput`: one test per send path given.
pub(crate) fn run(args: &ThroughputArgs, ctx: &crate::Ctx) -> Result<(), Failure> {
    let _ = ctx.width;
    let interrupt = interrupt_flag();
    let bed = match &args.bed {
        Some(name) => Some(BedServer::start(name, args.ipv6)?),
        None => None,
    };
    let addr = match &bed {
        Some(b) => b.server.addr(),
        None => resolve(args.host.as_deref().unwrap_or_default(), args.port)?,
    };
    let ctx = Ctx {
        client_ns: bed.as_ref().map(|b| b.client_ns.clone()),
        link: args.link.or(bed.as_ref().and_then(|b| b.link)),
    };
    let base = args.params(addr.is_ipv6())?;
    // Check every path before running any.
    let mut all = Vec::new();
    for &path in &args.path {
        let p = ThroughputParams {
            send_path: path,
            ..base.clone()
        };
        p.validate(None).map_err(|e| Failure::Usage(e.into()))?;
        all.push(p);
    }
    if all.len() == 1 {
        let result = run_one(args, &ctx, addr, base, &interrupt)?;
        if args.json {
            print_json(&result)?;
        } else {
            print(&linerate_report::throughput::render(&result))?;
        }
        return verdict(std::slice::from_ref(&result));
    }
    let mut results = Vec::new();
    for p in all {
        if interrupt.load(Ordering::Relaxed) {
            break;
        }
        let r = run_one(args, &ctx, addr, p, &interrupt)?;
        if !args.json {
            print(&linerate_report::throughput::render(&r))?;
            print("\n")?;
        }
        results.push(r);
    }
    if args.json {
        print_json(&Scenarios {
            schema: "linerate.throughput.scenarios",
            version: 1,
            runs: &results,
        })?;
    } else {
        print(&linerate_report::throughput::render_scenarios(&results))?;
    }
    verdict(&results)
}

/// Several runs, one per send path (JSON with `--path A,B,…`).
#[derive(Debug, serde::Serialize)]
struct Scenarios<'a> {
    schema: &'static str,
    version: u32,
    runs: &'a [ThroughputResult],
}

fn verdict(results: &[ThroughputResult]) -> Result<(), Failure> {
    match results.iter().find(|r| !r.complete) {
        None => Ok(()),
        Some(r) => Err(Failure::Measurement(anyhow!(
            "the result is incomplete or flagged: {}",
            r.notes.first().cloned().unwrap_or_default()
        ))),
    }
}

/// Where and against what the client runs.
#[derive(Debug)]
struct Ctx {
    /// The client's network namespace (a bed's host a).
    client_ns: Option<String>,
    /// The line rate for "% of max possible": --link, or the bed's.
    link: Option<BitRate>,
}

/// A `linerate server` running on a thread of this process (inside a bed's
/// host b, or in the caller's namespace), for the length of one command.
pub(crate) struct LocalServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<(), linerate_io::netns::NetnsError>>>,
}

impl LocalServer {
    /// Starts a server on `ip` (any port) in namespace `ns`.
    pub(crate) fn start(ns: Option<&str>, ip: std::net::IpAddr) -> Result<Self, Failure> {
        let where_ = ns.unwrap_or("this namespace").to_string();
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = linerate_io::netns::spawn_in(ns, "lr-server", move || {
            let server = linerate_io::throughput::server::Server::bind(
                linerate_io::throughput::server::ServerConfig {
                    bind: SocketAddr::new(ip, 0),
                    once: false,
                    max_clients: 1,
                    max_duration: None,
                    log: Arc::new(|_: &str| {}),
                },
            );
            match server {
                Ok(server) => {
                    let addr = server.local_addr();
                    let stop = server.stop_flag();
                    let _ = tx.send(addr.map(|a| (a, stop)).map_err(|e| e.to_string()));
                    let _ = server.run();
                }
                Err(e) => {
                    let _ = tx.send(Err(e.to_string()));
                }
            }
        })
        .map_err(|e| anyhow!(e))?;
        match rx.recv() {
            Ok(Ok((addr, stop))) => Ok(Self {
                addr,
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => Err(anyhow!("server in {where_}: {e}").into()),
            Err(_) => {
                let why = thread
                    .join()
                    .ok()
                    .and_then(Result::err)
                    .map_or("it ended early".to_string(), |e| {
                        linerate_core::error::chain(&e)
                    });
                Err(anyhow!("cannot start the server in {where_}: {why}").into())
            }
        }
    }

    /// Where it listens.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A bed's server (host b) and where its client runs (host a).
struct BedServer {
    server: LocalServer,
    client_ns: String,
    link: Option<BitRate>,
}

impl BedServer {
    fn start(name: &str, ipv6: bool) -> Result<Self, Failure> {
        let bed = linerate_bed::Bed::open(name)
            .map_err(|e| anyhow!(e).context(format!("testbed '{name}'")))?;
        let ip: std::net::IpAddr = if ipv6 {
            bed.ipv6("b").map(Into::into)
        } else {
            bed.ipv4("b").map(Into::into)
        }
        .ok_or_else(|| anyhow!("testbed '{name}' has no address for host b"))?;
        let (ns_a, ns_b) = match (bed.netns("a"), bed.netns("b")) {
            (Some(a), Some(b)) => (a.to_string(), b.to_string()),
            _ => return Err(anyhow!("testbed '{name}' lacks host a or b").into()),
        };
        Ok(Self {
            server: LocalServer::start(Some(&ns_b), ip)?,
            client_ns: ns_a,
            link: bed.link(),
        })
    }
}

fn run_one(
    args: &ThroughputArgs,
    ctx: &Ctx,
    addr: SocketAddr,
    params: ThroughputParams,
    interrupt: &Arc<AtomicBool>,
) -> Result<ThroughputResult, Failure> {
    let discard = args.discard;
    let p = params.clone();
    let flag = Arc::clone(interrupt);
    // The client runs on a thread of its own, in the bed's host a when
    // there is a bed (its sockets belong to the thread's namespace).
    let outcome = linerate_io::netns::spawn_in(ctx.client_ns.as_deref(), "lr-client", move || {
        let mut printer = progress_printer();
        let progress = printer.as_mut().map(|p| p as &mut dyn FnMut(f64, u64, u64));
        let outcome = if discard {
            client::run_discard(addr, &p, progress, &flag)
        } else {
            client::run_until(addr, &p, progress, &flag)
        };
        if printer.is_some() {
            eprint!("\r{:70}\r", "");
        }
        outcome
    })
    .map_err(|e| anyhow!(e))?
    .join()
    .map_err(|_| anyhow!("the client thread panicked"))?
    .map_err(|e| anyhow!(e))?;
    let outcome = outcome.map_err(|e| Failure::Usage(e.into()))?;
    Ok(build(args, ctx, addr, params, outcome))
}

/// What the egress interface of one end counted against what that end sent:
/// packets per datagram or block (on veth, a GSO/TSO super-packet counts
/// once; on a real link the counter counts frames).
fn egress_note(side: &SideReport, params: &ThroughputParams) -> Option<String> {
    let e = side.egress.as_ref()?;
    let sent = side.sent_packets();
    let per = e.per_packet(sent)?;
    let who = match side.end {
        End::Client => "client",
        End::Server => "server",
    };
    let (unit, one) = match params.protocol {
        Protocol::Udp => ("datagrams", "datagram"),
        Protocol::Tcp => ("blocks", "block"),
    };
    let ratio = if per >= 1.0 {
        format!("{per:.2} {unit} per packet")
    } else {
        format!("{:.2} packets per {one}", 1.0 / per)
    };
    let base = format!(
        "{who}: {} packets left {} (its tx_packets counter, all traffic) for {} {unit} sent: {ratio}",
        group_thousands(e.packets),
        e.interface,
        group_thousands(sent),
    );
    Some(match (params.protocol, params.send_path) {
        (Protocol::Udp, SendPath::Gso) if per > 1.5 => format!(
            "{base}. gso: the datagrams crossed {} as super-skbs, so packets/s here is not a frame \
             rate on this link; `ethtool -K {} tx-udp-segmentation off` makes the kernel cut each \
             send into one frame per datagram before the link",
            e.interface, e.interface
        ),
        (Protocol::Udp, SendPath::Gso) if per <= 1.05 => {
            format!("{base}. gso: cut before the link, one frame per datagram (software GSO)")
        }
        _ => base,
    })
}

fn build(
    args: &ThroughputArgs,
    ctx: &Ctx,
    addr: SocketAddr,
    params: ThroughputParams,
    o: client::Outcome,
) -> ThroughputResult {
    let mut notes = Vec::new();
    let mut complete = o.client.complete;
    for n in &o.client.notes {
        notes.push(format!("client: {n}"));
    }
    match &o.server {
        Some(s) => {
            complete &= s.complete;
            for n in &s.notes {
                notes.push(format!("server: {n}"));
            }
        }
        None if args.discard => {}
        None => {
            complete = false;
            notes.push("the server's figures never arrived: receive-side results of the forward direction are missing".into());
        }
    }
    let sides = std::iter::once(&o.client).chain(o.server.iter());
    let mut gso_said = false;
    for side in sides {
        if let Some(note) = egress_note(side, &params) {
            gso_said |= params.send_path == SendPath::Gso;
            notes.push(note);
        }
        for f in &side.flows {
            if let Some(z) = f.zerocopy {
                if z.copied_sends > 0 {
                    notes.push(format!(
                        "flow {}: zero-copy requested, but the kernel copied {} of {} completed sends (SO_EE_CODE_ZEROCOPY_COPIED; local delivery over loopback or veth always copies)",
                        f.flow, z.copied_sends, z.completed_sends
                    ));
                } else if z.completed_sends > 0 {
                    notes.push(format!(
                        "flow {}: zero-copy: {} sends completed without a copy",
                        f.flow, z.completed_sends
                    ));
                }
                if z.completed_sends < z.zerocopy_sends {
                    notes.push(format!(
                        "flow {}: {} zero-copy completions never arrived",
                        f.flow,
                        z.zerocopy_sends - z.completed_sends
                    ));
                }
            }
            if let Some(n) = f.retransmits.filter(|&n| n > 0) {
                notes.push(format!(
                    "flow {}: {n} TCP segments retransmitted (TCP_INFO tcpi_total_retrans)",
                    f.flow
                ));
            }
            if let Some(p) = f.pacing {
                if p.fell_behind {
                    complete = false;
                    notes.push(format!(
                        "flow {}: the sender could not keep the asked rate ({} of {}): the host, not the path, limited it",
                        f.flow,
                        format_bits_per_s(p.achieved_bits_per_s),
                        format_bits_per_s(p.asked_bits_per_s)
                    ));
                }
            }
            if f.role == FlowRole::Receiver {
                if let Some(c) = f.recv {
                    if c.corrupt > 0 {
                        notes.push(format!(
                            "flow {}: {} corrupt datagrams/blocks (payload differs from the pattern)",
                            f.flow, c.corrupt
                        ));
                    }
                    if c.seq.late > 0 {
                        notes.push(format!(
                            "flow {}: {} packets arrived more than 65 536 behind; duplicates among them cannot be told",
                            f.flow, c.seq.late
                        ));
                    }
                }
            }
        }
    }
    if params.send_path == SendPath::Gso && !gso_said {
        notes.push("gso: each send is one super-packet of up to 64 datagrams; unless the interface cuts it before the link (software GSO), it crosses veth/loopback as one skb and per-packet costs are not those of single datagrams".into());
    }
    if params.recv_path == RecvPath::Gro {
        notes.push("gro: the receiver got coalesced buffers and split them in user space".into());
    }
    if params.protocol == Protocol::Tcp {
        notes.push(
            "TCP: every block is verified in full (header and pattern) unless --recv-path trunc"
                .into(),
        );
    }
    let line_max = ctx.link.and_then(|link| {
        let v6 = addr.is_ipv6();
        let encap = Encap {
            net: if v6 { NetLayer::Ipv6 } else { NetLayer::Ipv4 },
            transport: match params.protocol {
                Protocol::Udp => TransportLayer::Udp,
                Protocol::Tcp => TransportLayer::Tcp,
            },
            tcp_options_bytes: if params.protocol == Protocol::Tcp { 12 } else { 0 },
            ..Encap::ETHERNET
        };
        let payload = match params.protocol {
            Protocol::Udp => Some(params.size_bytes),
            Protocol::Tcp => sender_mss(std::iter::once(&o.client).chain(o.server.iter())),
        };
        let Some(payload) = payload else {
            notes.push("--link given but the MSS in use could not be read: no maximum computed".into());
            return None;
        };
        match LineMax::new(link, encap, payload) {
            Ok(m) => Some(m),
            Err(e) => {
                notes.push(format!(
                    "--link: no single-frame maximum for {payload}-byte payloads ({e}): a {} larger than a standard Ethernet frame (loopback's MTU is 65 536)",
                    if params.protocol == Protocol::Tcp { "MSS" } else { "datagram, fragmented," }
                ));
                None
            }
        }
    });
    if let Some(m) = &line_max {
        let sides = std::iter::once(&o.client).chain(o.server.iter());
        for side in sides {
            for dir in [FlowDir::Forward, FlowDir::Reverse] {
                if let Some(sum) = side.sum(dir, FlowRole::Receiver) {
                    let pct = m.percent_of(sum.bytes_per_s);
                    if pct > 100.5 {
                        notes.push(format!(
                            "{dir:?} received at {pct:.2} % of the model's maximum: the link is faster than --link, or its emulation is inexact (on the probed kernel a tbf-emulated link passed TCP segments 1.5 % faster than its rate with overhead, UDP datagrams within 0.1 %: docs/METHODOLOGY.md)"
                        ));
                    }
                }
            }
        }
    }
    let steal_pct = o.steal_share.map(|s| s * 100.0);
    if let Some(st) = steal_pct {
        if st >= 5.0 {
            notes.push(format!(
                "the hypervisor stole {st:.1} % of this host's CPU time during the test (/proc/stat): figures are lower than the stack alone would give"
            ));
        }
    }
    let sides = std::iter::once(&o.client).chain(o.server.iter());
    for side in sides {
        for f in &side.flows {
            let busy = (f.cpu_user_ns + f.cpu_sys_ns) as f64 / f.elapsed_ns.max(1) as f64;
            if busy >= 0.95 && f.elapsed_ns >= 100_000_000 {
                notes.push(format!(
                    "flow {} ({} side, {}): its thread was CPU-bound ({:.0} % busy): this end's CPU, not the network, set the rate",
                    f.flow,
                    match side.end {
                        End::Client => "client",
                        End::Server => "server",
                    },
                    if f.role == FlowRole::Sender { "sender" } else { "receiver" },
                    busy * 100.0
                ));
            }
        }
    }
    notes.extend(socket_drop_notes(&o.client, o.server.as_ref()));
    if args.discard {
        notes.push("one-sided: --discard reports what was sent, not what arrived".into());
    }
    ThroughputResult {
        schema: SCHEMA.into(),
        version: VERSION,
        server: addr.to_string(),
        params,
        clock: "CLOCK_MONOTONIC of each end for elapsed times and intervals; probe send stamps: low 32 bits of the sender's CLOCK_MONOTONIC ns".into(),
        client: o.client,
        server_side: o.server,
        line_max,
        steal_pct,
        complete,
        notes,
    }
}

/// Receiving flows whose own socket dropped packets (sk_drops): that loss
/// is the receiver's, not the path's.
fn socket_drop_notes(client: &SideReport, server: Option<&SideReport>) -> Vec<String> {
    let mut notes = Vec::new();
    for side in std::iter::once(client).chain(server) {
        for f in side.flows.iter().filter(|f| f.role == FlowRole::Receiver) {
            let Some(d) = f.socket_drops.filter(|&d| d > 0) else {
                continue;
            };
            let end = match side.end {
                End::Client => "client",
                End::Server => "server",
            };
            let lost = f.recv.map(|c| c.seq.lost).unwrap_or(0);
            notes.push(if f.mss_bytes.is_some() {
                format!(
                    "flow {} ({end} side, receiver): the kernel dropped {} segments at its socket (sk_drops, SO_MEMINFO); TCP sent them again, no data lost",
                    f.flow,
                    group_thousands(d)
                )
            } else {
                format!(
                    "flow {} ({end} side, receiver): the kernel dropped {} datagrams at its own socket (sk_drops, SO_MEMINFO: receive buffer full), of {} lost in all: those the receiver lost, not the path (a larger --window, or a shorter --recv-nap, keeps them)",
                    f.flow,
                    group_thousands(d),
                    group_thousands(lost)
                )
            });
        }
    }
    notes
}

/// `linerate demo`'s throughput part: a TCP test of `secs` seconds over
/// loopback against a server on a thread of this process.
pub(crate) fn demo_run(secs: u32) -> Result<ThroughputResult, Failure> {
    #[derive(Debug, clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        args: ThroughputArgs,
    }
    let server = LocalServer::start(None, std::net::Ipv4Addr::LOCALHOST.into())?;
    let addr = server.addr();
    let time = secs.to_string();
    let port = addr.port().to_string();
    let wrap = <Wrap as clap::Parser>::try_parse_from([
        "throughput",
        "127.0.0.1",
        "--port",
        &port,
        "--time",
        &time,
    ])
    .map_err(|e| anyhow!("demo flags: {e}"))?;
    let ctx = Ctx {
        client_ns: None,
        link: None,
    };
    let params = wrap.args.params(false)?;
    run_one(
        &wrap.args,
        &ctx,
        addr,
        params,
        &Arc::new(AtomicBool::new(false)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_core::stats::sequence::SeqCounts;
    use linerate_core::throughput::model::{FlowReport, RecvCounts, Verification};

    fn receiver(socket_drops: Option<u64>, lost: u64, tcp: bool) -> FlowReport {
        FlowReport {
            elapsed_ns: 1,
            recv: Some(RecvCounts {
                seq: SeqCounts {
                    lost,
                    ..SeqCounts::default()
                },
                ..RecvCounts::default()
            }),
            verification: Verification::Full,
            mss_bytes: tcp.then_some(1448),
            socket_drops,
            ..FlowReport::new(3, FlowDir::Forward, FlowRole::Receiver, "copy".into())
        }
    }

    fn side(end: End, flows: Vec<FlowReport>) -> SideReport {
        SideReport {
            end,
            complete: true,
            notes: Vec::new(),
            flows,
            egress: None,
        }
    }

    #[test]
    fn socket_drops_are_said_to_be_the_receivers() {
        let server = side(End::Server, vec![receiver(Some(7_000), 10_000, false)]);
        let client = side(
            End::Client,
            vec![receiver(Some(0), 5, false), receiver(None, 5, false)],
        );
        let notes = socket_drop_notes(&client, Some(&server));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("flow 3 (server side, receiver)"));
        assert!(notes[0].contains("dropped 7,000 datagrams"), "{}", notes[0]);
        assert!(notes[0].contains("of 10,000 lost in all"), "{}", notes[0]);
        let tcp = side(End::Client, vec![receiver(Some(2), 0, true)]);
        let notes = socket_drop_notes(&tcp, None);
        assert!(notes[0].contains("TCP sent them again"), "{notes:?}");
    }
}
