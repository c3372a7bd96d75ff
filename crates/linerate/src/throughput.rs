//! `linerate throughput HOST`: flags into a validated configuration, the
//! driver (`linerate_io::throughput::run`), the result rendered, its flags
//! returned.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use clap::Args;
use linerate_core::energy::flag_for;
use linerate_core::result::Flag;
use std::sync::atomic::Ordering;

use linerate_core::result::Envelope;
use linerate_core::throughput::config::{ConfigError, Point, Request, Target};
use linerate_core::throughput::model::{
    Direction, ParamError, Protocol, RecvPath, Scenarios, SendPath, ThroughputResult,
};
use linerate_core::units::{parse_duration, BitRate, ByteCount};
use linerate_core::wire::control::DEFAULT_PORT;
use linerate_core::wire::iperf3::{
    self,
    params::{Mode, Params, Transport},
};
use linerate_io::iperf3::auth::ClientAuth;
use linerate_io::iperf3::client::ClientConfig;
use linerate_io::resolve::{resolve, ResolveError};
use linerate_io::throughput::run::RunError;

use crate::output::elog;
use crate::Failure;

// Flags of `linerate throughput`.
#[derive(Debug, Args)]
pub(crate) struct ThroughputArgs {
    /// The `linerate server` to test against (name or address), a discard
    /// sink with --discard, or a local address with --in-process. Not with
    /// --bed.
    #[arg(required_unless_present = "bed", conflicts_with = "bed")]
    pub(crate) host: Option<String>,

    /// Run a `linerate server` in this process on HOST (a local address,
    /// e.g. 127.0.0.1; --port, else any free port): no server to start, the
    /// client and the server on threads of one process.
    #[arg(long, conflicts_with_all = ["bed", "discard", "iperf3"])]
    pub(crate) in_process: bool,

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
    #[arg(long, value_name = "S", default_value = "10", value_parser = parse_duration)]
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

    /// Receivers compare the payload of one block or datagram in N with the
    /// fill pattern, chosen pseudo-randomly per flow, instead of every one; every header
    /// (session, flow, sequence) is still checked and every byte still
    /// received into user space. Comparing cost 2 to 8 % of throughput
    /// where the CPUs were the limit (several TCP streams on 2 vCPUs,
    /// measured under load); the result says how many payloads were
    /// compared. Default: 1 (all). Not with --discard (no receiver).
    #[arg(long, value_name = "N", conflicts_with = "discard")]
    pub(crate) verify_one_in: Option<u32>,

    /// Receivers spin on non-blocking receives instead of sleeping: no
    /// wake-up per datagram (what limits small-packet rates when the
    /// receiver keeps up), at the cost of one CPU per receiving flow.
    #[arg(long)]
    pub(crate) recv_spin: bool,

    /// TCP receivers' low-water mark (SO_RCVLOWAT), bytes: a sleeping
    /// receiver is woken once this much is queued, not for every arriving
    /// segment. Default: 256 KiB (the receivers' buffer); 1 is the kernel's
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

    /// SO_NO_CHECK on UDP data sockets: no UDP checksum on transmit (IPv4;
    /// seed 004's checksum row).
    #[arg(long)]
    pub(crate) no_udp_checksum: bool,

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
    #[arg(long, value_name = "S", default_value = "1", value_parser = parse_duration)]
    pub(crate) interval: Duration,

    /// One JSON document (schema linerate.throughput, version 3; several
    /// paths, sweeps or repeats: linerate.throughput.scenarios, version 3).
    #[arg(long)]
    pub(crate) json: bool,

    /// Send to a discard sink (RFC 863 or a board's receive sink): no
    /// server, sender-side figures only, said to be one-sided.
    #[arg(long)]
    pub(crate) discard: bool,

    #[command(flatten)]
    pub(crate) plot: crate::report::PlotArgs,

    /// A settings matrix, one row per point: KEY=V1,V2 with KEY a socket
    /// setting (size, window, mss, path, recv-path, cc, nodelay,
    /// udp-checksum, verify-one-in) or, with
    /// --bed, a bed setting (mtu, gro, gso, tso, tx-checksum, rx-checksum,
    /// rps, tcp-rmem, tcp-wmem as MIN:DEFAULT:MAX: set on the bed for the
    /// point, read back, restored after). Repeat for a cartesian product.
    #[arg(long, value_name = "KEY=V1,V2,…")]
    pub(crate) sweep: Vec<String>,

    /// Leave the first S seconds out of the figures (iperf3's -O): the test
    /// runs S longer, those intervals are shown marked omitted.
    #[arg(long, value_name = "S", default_value = "0", value_parser = parse_duration)]
    pub(crate) omit: Duration,

    /// Run each point N times and report each run and the median with
    /// min–max.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) repeat: u32,

    /// HOST is an iperf3 server (`iperf3 -s`): speak its protocol (--port
    /// defaults to 5201). Its own figures come back as the server side,
    /// and its output is attached to the result.
    #[arg(long, conflicts_with_all = ["bed", "discard"])]
    pub(crate) iperf3: bool,

    /// --iperf3: end after this many bytes over all streams (iperf3's -n)
    /// instead of --time.
    #[arg(
        long,
        value_name = "BYTES",
        requires = "iperf3",
        conflicts_with = "blocks"
    )]
    pub(crate) bytes: Option<ByteCount>,

    /// --iperf3: end after this many blocks (iperf3's -k) instead of --time.
    #[arg(long, value_name = "N", requires = "iperf3")]
    pub(crate) blocks: Option<u64>,

    /// --iperf3: the IP TOS byte of the data packets (iperf3's -S).
    #[arg(long, value_name = "N", requires = "iperf3")]
    pub(crate) tos: Option<u8>,

    /// --iperf3 authentication: the user name (the password is read from
    /// IPERF3_PASSWORD).
    #[arg(long, requires_all = ["iperf3", "rsa_public_key_path"])]
    pub(crate) username: Option<String>,

    /// --iperf3 authentication: the server's RSA public key (PEM).
    #[arg(long, value_name = "FILE", requires = "username")]
    pub(crate) rsa_public_key_path: Option<PathBuf>,

    /// --iperf3 authentication: PKCS#1 v1.5 padding (servers before 3.17)
    /// instead of OAEP.
    #[arg(long, requires = "username")]
    pub(crate) use_pkcs1_padding: bool,
}

/// The flag of each parameter of `ThroughputParams` (core names the
/// parameter; the command line names its flag).
const PARAM_FLAGS: [(&str, &str); 15] = [
    ("no_udp_checksum", "--no-udp-checksum"),
    ("verify_one_in", "--verify-one-in"),
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
    let flag = PARAM_FLAGS.iter().find(|(n, _)| *n == e.param);
    let mut reason = e.reason.clone();
    for (name, f) in PARAM_FLAGS.iter().filter(|(n, _)| n.contains('_')) {
        reason = reason.replace(name, f);
    }
    Failure::Usage(anyhow!("{}: {reason}", flag.map_or(e.param, |(_, f)| f)))
}

impl ThroughputArgs {
    /// The validated points: the target resolved (a bed to its
    /// namespaces, address, link and MTU), per point one run per send path
    /// and the bed settings it needs.
    pub(crate) fn config(&self) -> Result<Vec<Point>, Failure> {
        self.config_at(None)
    }

    /// [`Self::config`], against the server at `server` when given (the
    /// one `--in-process` started) instead of HOST's.
    fn config_at(&self, server: Option<SocketAddr>) -> Result<Vec<Point>, Failure> {
        let target = if let Some(name) = &self.bed {
            let bed = linerate_bed::target::throughput(name, self.ipv6, self.port);
            Target::Bed(bed.with_context(|| format!("testbed '{name}'"))?)
        } else {
            let host = self.host.as_deref().unwrap_or_default();
            let port = match (self.iperf3, self.in_process) {
                (true, _) => iperf3::DEFAULT_PORT,
                (false, true) => 0,
                (false, false) => DEFAULT_PORT,
            };
            let addr = match server {
                Some(addr) => addr,
                None => {
                    resolve(host, self.port.unwrap_or(port), self.ipv6).map_err(|e| match e {
                        ResolveError::NoIpv6 { .. } => anyhow!(e).context("--ipv6"),
                        e => anyhow!(e),
                    })?
                }
            };
            match self.discard {
                true => Target::Discard(addr),
                false => Target::Server(addr),
            }
        };
        let req = Request {
            protocol: if self.udp {
                Protocol::Udp
            } else {
                Protocol::Tcp
            },
            direction: match (self.bidir, self.reverse) {
                (true, _) => Direction::Bidir,
                (false, true) => Direction::Reverse,
                (false, false) => Direction::Forward,
            },
            streams: self.streams,
            duration: self.time,
            size: self.size,
            rate: self.rate,
            send_paths: self.path.clone(),
            recv_path: self.recv_path,
            recv_spin: self.recv_spin,
            recv_lowat: self.recv_lowat,
            recv_nap_us: self.recv_nap,
            window: self.window,
            nodelay: self.nodelay,
            congestion: self.cc.clone(),
            mss_bytes: self.mss,
            interval: self.interval,
            link: self.link,
            sweep: self.sweep.clone(),
            repeat: self.repeat,
            omit: self.omit,
            no_udp_checksum: self.no_udp_checksum,
            verify_one_in: self.verify_one_in,
        };
        req.points(&target).map_err(|e| match e {
            ConfigError::Params(p) => param_usage(&p),
            ConfigError::DiscardReceives => Failure::Usage(anyhow!("--discard: {e}")),
            ConfigError::NoRuns => Failure::Usage(anyhow!("--path: {e}")),
            ConfigError::Sweep(_) => Failure::Usage(anyhow!("--sweep: {e}")),
            ConfigError::Repeat(_) => Failure::Usage(anyhow!("--repeat: {e}")),
        })
    }
}

/// The bed's settings for each point, checked before anything runs: the
/// bed opened once, every value its interfaces cannot take refused.
fn bed_for(args: &ThroughputArgs, points: &[Point]) -> Result<Option<linerate_bed::Bed>, Failure> {
    let (Some(name), true) = (&args.bed, points.iter().any(|p| !p.config.1.is_empty())) else {
        return Ok(None);
    };
    let bed = linerate_bed::Bed::open(name).with_context(|| format!("testbed '{name}'"))?;
    linerate_bed::reconfig::check(&bed, points.iter().flat_map(|p| &p.config.1))
        .map_err(|e| Failure::Usage(anyhow!("--sweep: {e}")))?;
    Ok(Some(bed))
}

/// Frames/s a run offered to the link: its senders' packets per second.
fn offered_frames_per_s(r: &ThroughputResult) -> Option<f64> {
    (r.figures.directions.iter())
        .filter(|d| d.role == linerate_core::throughput::model::FlowRole::Sender)
        .filter_map(|d| d.packets_per_s)
        .reduce(f64::max)
}

/// Runs every point (each `repeat` times), the bed set for it and restored
/// after; stops early, restoring, when interrupted.
fn run_points(
    args: &ThroughputArgs,
    points: &[Point],
    progress: &mut dyn linerate_core::progress::Progress,
) -> Result<Vec<Envelope<ThroughputResult>>, Failure> {
    let bed = bed_for(args, points)?;
    let interrupt = linerate_io::signal::interrupt_flag();
    let mut out = Vec::new();
    let repeats = args.repeat.max(1);
    'points: for (i, p) in points.iter().enumerate() {
        let (cfg, bed_settings) = &p.config;
        let settings = match (&bed, bed_settings.is_empty()) {
            (Some(bed), false) => Some(
                linerate_bed::reconfig::PointSettings::apply(bed, bed_settings)
                    .context("setting the bed for the point")?,
            ),
            _ => None,
        };
        if let Some(s) = &settings {
            elog!("linerate throughput: bed set (read back): {}", s.describe());
        }
        for r in 1..=repeats {
            if interrupt.load(Ordering::Relaxed) {
                break 'points;
            }
            if points.len() > 1 || repeats > 1 {
                elog!(
                    "linerate throughput: point {}/{} ({}), run {r}/{repeats}",
                    i + 1,
                    points.len(),
                    linerate_core::sweep::label(&p.settings)
                );
            }
            // One send path at a time, so each run gets the link
            // emulator's counters of its own test, not the sum.
            for (k, params) in cfg.runs.iter().enumerate() {
                if k > 0 && interrupt.load(Ordering::Relaxed) {
                    break 'points;
                }
                let one = linerate_core::throughput::config::Config {
                    runs: vec![params.clone()],
                    ..cfg.clone()
                };
                let mut link = crate::testbed::link_reading(args.bed.as_deref());
                for mut doc in linerate_io::throughput::run::run(&one, progress, &interrupt)? {
                    doc.result.settings.clone_from(&p.settings);
                    doc.result.repeat = (repeats > 1).then_some(r);
                    let offered = offered_frames_per_s(&doc.result);
                    let (slot, flags) = (&mut doc.result.link_emulation, &mut doc.flags);
                    crate::testbed::attach_link(link.take(), offered, slot, flags);
                    out.push(doc);
                }
            }
        }
        if let Some(s) = settings {
            s.restore().context("restoring the bed after the point")?;
        }
    }
    Ok(out)
}

/// Runs `linerate throughput`: one test per send path given, per point of
/// the sweeps, per repeat. Returns the result's flags (every run's, with
/// several runs).
pub(crate) fn run(args: &ThroughputArgs, ctx: &crate::Ctx) -> Result<Vec<Flag>, Failure> {
    let mut points = args.config()?;
    // Lives until the runs end.
    let _server = match (args.in_process, points.first().map(|p| &p.config.0.target)) {
        (true, Some(Target::Server(addr))) => {
            let server = linerate_io::throughput::run::LocalServer::start(None, *addr)?;
            points = args.config_at(Some(server.addr()))?;
            Some(server)
        }
        _ => None,
    };
    let matrix = points.len() > 1 || args.repeat > 1;
    if args.iperf3 {
        let ([point], false) = (points.as_slice(), matrix) else {
            return Err(Failure::Usage(anyhow!(
                "--iperf3: one test at a time (no --sweep, --repeat)"
            )));
        };
        return run_iperf3(args, &point.config.0, ctx);
    }
    let mut progress = ctx.progress(crate::progress::StepLines::Replace);
    let meter = linerate_io::energy::Meter::start();
    let mut runs = run_points(args, &points, &mut progress)?;
    let energy = meter.read();
    args.plot.write(&crate::report::throughput_plots(&runs))?;
    let render = |r| linerate_report::throughput::render(r, ctx.width);
    if runs.len() == 1 && !matrix {
        let mut doc = runs.pop().ok_or(RunError::NoResult)?;
        doc.flags.push(flag_for(&energy, &doc.result));
        ctx.output(&doc, args.json, || render(&doc))?;
        return Ok(doc.flags);
    }
    let mut doc = Scenarios::document(runs, linerate_io::host::facts());
    doc.flags.push(flag_for(&energy, &doc.result));
    ctx.output(&doc, args.json, || match matrix {
        true => linerate_report::throughput::render_points(&doc, ctx.width),
        false => {
            let each = doc.result.runs.iter().map(|r| render(r) + "\n");
            each.collect::<String>()
                + &linerate_report::throughput::render_scenarios(&doc, ctx.width)
        }
    })?;
    Ok(doc.flags)
}

/// The test against an iperf3 server: linerate's parameters carried as
/// iperf3's, the result rendered as a native one.
fn run_iperf3(
    args: &ThroughputArgs,
    cfg: &linerate_core::throughput::config::Config,
    ctx: &crate::Ctx,
) -> Result<Vec<Flag>, Failure> {
    let (Target::Server(addr), [tp]) = (&cfg.target, cfg.runs.as_slice()) else {
        return Err(Failure::Usage(anyhow!(
            "--path: an iperf3 server test runs one path (plain send and receive)"
        )));
    };
    let auth = match (&args.username, &args.rsa_public_key_path) {
        (Some(user), Some(key)) => {
            let password = std::env::var("IPERF3_PASSWORD").map_err(|_| {
                Failure::Usage(anyhow!("--username: set the password in IPERF3_PASSWORD"))
            })?;
            Some(ClientAuth::load(
                key,
                user,
                &password,
                args.use_pkcs1_padding,
            )?)
        }
        _ => None,
    };
    // iperf3's -Z is sendfile; --skip-rx-copy is MSG_TRUNC.
    let zerocopy = match tp.send_path {
        SendPath::Ideal => false,
        SendPath::Sendfile | SendPath::Zerocopy if tp.protocol == Protocol::Tcp => true,
        p => {
            return Err(Failure::Usage(anyhow!(
                "--path {p}: not with --iperf3 (ideal, or sendfile/zerocopy for TCP: iperf3's -Z)"
            )))
        }
    };
    let skip_rx_copy = match tp.recv_path {
        RecvPath::Copy => false,
        RecvPath::Trunc if tp.protocol == Protocol::Tcp => true,
        p => {
            return Err(Failure::Usage(anyhow!(
            "--recv-path {p}: not with --iperf3 (copy, or trunc for TCP: iperf3's --skip-rx-copy)"
        )))
        }
    };
    if tp.verify_one_in.is_some_and(|n| n > 1) {
        return Err(Failure::Usage(anyhow!(
            "--verify-one-in: not with --iperf3 (iperf3's payload carries no pattern to compare)"
        )));
    }
    let streams = tp.streams.max(1);
    let params = Params {
        zerocopy,
        skip_rx_copy,
        transport: match tp.protocol {
            Protocol::Tcp => Transport::Tcp,
            Protocol::Udp => Transport::Udp,
        },
        mode: match tp.direction {
            Direction::Forward => Mode::Forward,
            Direction::Reverse => Mode::Reverse,
            Direction::Bidir => Mode::Bidir,
        },
        // iperf3 counts whole seconds.
        time_s: u32::try_from(tp.duration_ns.div_ceil(1_000_000_000)).unwrap_or(u32::MAX),
        // iperf3 counts whole seconds.
        omit_s: u32::try_from(args.omit.as_nanos().div_ceil(1_000_000_000)).unwrap_or(u32::MAX),
        num_bytes: args.bytes.map_or(0, ByteCount::get),
        blockcount: args.blocks.unwrap_or(0),
        parallel: streams,
        len: tp.size_bytes,
        bandwidth: tp.rate_bits_per_s.map_or(0, |r| r / u64::from(streams)),
        window: tp.window_bytes.unwrap_or(0),
        nodelay: tp.nodelay,
        mss: tp.mss_bytes.unwrap_or(0),
        congestion: tp.congestion.clone(),
        tos: args.tos.unwrap_or(0),
        client_version: Some(format!("3.21 (linerate {})", env!("CARGO_PKG_VERSION"))),
        ..Params::default()
    };
    let client = ClientConfig {
        addr: *addr,
        params,
        auth,
        interval: Duration::from_nanos(tp.interval_ns),
        recv_lowat: tp.recv_lowat(),
    };
    let interrupt = linerate_io::signal::interrupt_flag();
    let mut progress = ctx.progress(crate::progress::StepLines::Replace);
    let doc = linerate_io::iperf3::client::document(
        &client,
        tp.clone(),
        cfg.line(),
        &mut progress,
        &interrupt,
    )?;
    ctx.output(&doc, args.json, || {
        let table = linerate_report::throughput::render(&doc, ctx.width);
        match &doc.result.server_output {
            Some(out) => format!("{table}\niperf3 server output:\n{out}"),
            None => table,
        }
    })?;
    Ok(doc.flags)
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
        let Failure::Usage(e) = param_usage(&e) else {
            panic!("not a usage error")
        };
        assert_eq!(
            e.to_string(),
            "--recv-nap: TCP receivers are woken per block (--recv-lowat)"
        );
    }
}
