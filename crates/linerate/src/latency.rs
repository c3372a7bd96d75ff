//! `linerate latency`: response time dissected into stages.

use std::net::{SocketAddr, ToSocketAddrs as _};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use clap::{Args, ValueEnum};
use linerate_core::latency::{
    EchoProtocol, LatencyParams, LatencyReport, LatencyRun, Responder, Stage, SCHEMA,
    SCHEMA_VERSION,
};
use linerate_core::procedure::pingpong::{Schedule, Until};
use linerate_core::units::{parse_duration, ByteCount};
use linerate_io::echo::{
    run_client_in, run_remote, run_with_local_reflector, summarize, ClientConfig, Placement, Proto,
    ReflectorConfig, ReflectorMode,
};
use linerate_io::stamps;

use crate::output::{print, print_json};
use crate::Failure;

/// `linerate server`'s default control port.
const SERVER_PORT: u16 = 5300;

/// Flags of `linerate latency`.
#[derive(Debug, Args)]
pub(crate) struct LatencyArgs {
    /// The responder: a host running `linerate server`, any echo server with
    /// --echo, any host with --icmp, or a local address with --in-process.
    /// Not with --bed (the bed's host b answers).
    #[arg(
        value_name = "HOST",
        required_unless_present = "bed",
        conflicts_with = "bed"
    )]
    pub(crate) host: Option<String>,

    /// Run on a testbed (`linerate testbed up NAME`): the client in host a,
    /// linerate's reflector (or, with --icmp, the kernel) in host b, both in
    /// this process, on one clock.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["in_process", "echo"])]
    pub(crate) bed: Option<String>,

    /// With --bed: use the hosts' IPv6 addresses.
    #[arg(long, requires = "bed")]
    pub(crate) ipv6: bool,

    /// Port: `linerate server`'s control port (default 5300), or the echo
    /// service with --echo (default 7).
    #[arg(long, short = 'p')]
    pub(crate) port: Option<u16>,

    /// UDP echo (default).
    #[arg(long, group = "proto")]
    pub(crate) udp: bool,

    /// TCP echo with TCP_NODELAY (1-byte requests unless --size).
    #[arg(long, group = "proto")]
    pub(crate) tcp: bool,

    /// ICMP echo (needs root for a raw socket); client-side stages only.
    #[arg(long, group = "proto")]
    pub(crate) icmp: bool,

    /// Request size: UDP payload (default 64, at least 16), TCP bytes per
    /// request (default 1), ICMP data (default 56).
    #[arg(long, value_name = "BYTES")]
    pub(crate) size: Option<ByteCount>,

    /// Number of requests [default: 1000].
    #[arg(long, short = 'c', group = "until")]
    pub(crate) count: Option<u64>,

    /// Send for this long instead of a count (e.g. 5s).
    #[arg(long, group = "until", value_parser = parse_duration)]
    pub(crate) time: Option<Duration>,

    /// Gap between requests (default 0: next request as soon as the reply is in).
    #[arg(long, group = "pace", value_parser = parse_duration)]
    pub(crate) interval: Option<Duration>,

    /// Requests per second, open loop (up to 64 in flight).
    #[arg(long, group = "pace", value_name = "PPS")]
    pub(crate) rate: Option<f64>,

    /// A reply later than this counts as lost.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub(crate) timeout: Duration,

    /// The client spins on non-blocking receives instead of sleeping.
    #[arg(long)]
    pub(crate) spin: bool,

    /// How the reflector waits for requests.
    #[arg(long, value_enum, default_value = "blocking")]
    pub(crate) reflector_mode: ModeArg,

    /// The reflector copies each request into a separate buffer (seed 004's memcpy row).
    #[arg(long)]
    pub(crate) reflector_copy: bool,

    /// SO_NO_CHECK on both ends: UDP over IPv4 without checksums (seed 004).
    #[arg(long)]
    pub(crate) no_udp_checksum: bool,

    /// No kernel timestamps on either end: the RTT from application stamps
    /// only, without what stamping costs (no stages; for comparison with
    /// tools that stamp nothing, e.g. sockperf).
    #[arg(long)]
    pub(crate) no_kernel_stamps: bool,

    /// UDP: kernel-stamp one exchange in N and dissect those; the others
    /// stamp nothing on either end, so their RTT carries no stamping cost and
    /// is the RTT quoted, with the stamped sample's beside it (the difference
    /// is what stamping costs). 1: every exchange stamped. TCP and ICMP
    /// stamp every exchange. [default: 4 for UDP]
    #[arg(long, value_name = "N")]
    pub(crate) stamp_every: Option<u32>,

    /// The responder is a plain echo server (RFC 862, e.g. an embedded stack's
    /// echo sample): client-side stages only.
    #[arg(long)]
    pub(crate) echo: bool,

    /// Run linerate's reflector in this process on HOST (a local address):
    /// no server needed, one clock for both ends.
    #[arg(long, conflicts_with = "echo")]
    pub(crate) in_process: bool,

    /// Run several configurations and print one table, a row each:
    /// KEY=V1,V2 with KEY one of reflector-mode, reflector-copy, udp-checksum,
    /// spin, size. Repeat for a matrix.
    #[arg(long, value_name = "KEY=V1,V2,…")]
    pub(crate) sweep: Vec<String>,

    /// One JSON document (schema linerate.latency, version 1).
    #[arg(long)]
    pub(crate) json: bool,
}

/// `--reflector-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ModeArg {
    /// Sleep until a request arrives.
    Blocking,
    /// Spin on non-blocking receives.
    Busy,
    /// Take every queued request, then answer them in one pass.
    Batch,
}

impl From<ModeArg> for ReflectorMode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Blocking => Self::Blocking,
            ModeArg::Busy => Self::Busy,
            ModeArg::Batch => Self::Batch,
        }
    }
}

/// One configuration of a run.
#[derive(Debug, Clone, Copy)]
struct Config {
    mode: ReflectorMode,
    copy: bool,
    no_check: bool,
    spin: bool,
    size: usize,
}

fn on_off(v: &str) -> anyhow::Result<bool> {
    match v {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => bail!("'{v}' is not on or off"),
    }
}

/// The settings that name a configuration: `[("reflector-mode", "busy")]`.
type Settings = Vec<(String, String)>;

/// Expands the sweeps into configurations, each with its settings label.
fn expand(base: Config, sweeps: &[String]) -> anyhow::Result<Vec<(Config, Settings)>> {
    let mut out = vec![(base, Vec::new())];
    for sweep in sweeps {
        let (key, values) = sweep
            .split_once('=')
            .ok_or_else(|| anyhow!("--sweep '{sweep}': expected KEY=V1,V2"))?;
        let values: Vec<&str> = values
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect();
        if values.is_empty() {
            bail!("--sweep '{sweep}': no values");
        }
        let mut next = Vec::new();
        for (cfg, label) in &out {
            for v in &values {
                let mut c = *cfg;
                match key {
                    "reflector-mode" => {
                        c.mode = ModeArg::from_str(v, true)
                            .map_err(|_| anyhow!("--sweep reflector-mode: '{v}' is not blocking, busy or batch"))?
                            .into();
                    }
                    "reflector-copy" => c.copy = on_off(v).context("--sweep reflector-copy")?,
                    "udp-checksum" => c.no_check = !on_off(v).context("--sweep udp-checksum")?,
                    "spin" => c.spin = on_off(v).context("--sweep spin")?,
                    "size" => {
                        let b: ByteCount = v.parse().with_context(|| format!("--sweep size: '{v}'"))?;
                        c.size = usize::try_from(b.get()).context("--sweep size")?;
                    }
                    _ => bail!(
                        "--sweep: unknown key '{key}' (expected reflector-mode, reflector-copy, udp-checksum, spin or size)"
                    ),
                }
                let mut l = label.clone();
                l.push((key.to_string(), (*v).to_string()));
                next.push((c, l));
            }
        }
        out = next;
    }
    if out.len() > 64 {
        bail!("--sweep makes {} configurations; 64 at most", out.len());
    }
    Ok(out)
}

/// `linerate latency`.
pub(crate) fn run(args: &LatencyArgs, ctx: &crate::Ctx) -> Result<(), Failure> {
    let _ = ctx.width;
    let proto = if args.tcp {
        Proto::Tcp
    } else if args.icmp {
        Proto::Icmp
    } else {
        Proto::Udp
    };
    if proto == Proto::Icmp && args.in_process {
        return Err(anyhow!(
            "--icmp is answered by the peer's kernel; --in-process does not apply"
        )
        .into());
    }
    if args.no_udp_checksum && proto != Proto::Udp {
        return Err(anyhow!("--no-udp-checksum applies to UDP only").into());
    }
    let stamp_every = match (proto, args.stamp_every) {
        (_, Some(0)) => return Err(anyhow!("--stamp-every must be at least 1").into()),
        (Proto::Udp, n) => n.unwrap_or(DEFAULT_STAMP_EVERY),
        (_, None | Some(1)) => 1,
        (_, Some(_)) => {
            return Err(anyhow!(
                "--stamp-every applies to UDP only: TCP and ICMP stamp every exchange"
            )
            .into())
        }
    };
    let default_size = match proto {
        Proto::Udp => 64,
        Proto::Tcp => 1,
        Proto::Icmp => 56,
    };
    let size = match args.size {
        Some(b) => usize::try_from(b.get()).map_err(|_| anyhow!("--size too large"))?,
        None => default_size,
    };
    // Against `linerate server` HOST:PORT is its control port; with --echo
    // the echo service (RFC 862: port 7); in-process and on a bed the
    // reflector takes any free port.
    let remote = args.bed.is_none() && !args.in_process && !args.echo && proto != Proto::Icmp;
    let port = args.port.unwrap_or(if args.echo {
        7
    } else if remote {
        SERVER_PORT
    } else {
        0
    });
    // With a bed: the client in host a, the responder in host b.
    let (target, place, bed_name) = match &args.bed {
        Some(name) => {
            let bed = linerate_bed::Bed::open(name).with_context(|| format!("testbed '{name}'"))?;
            let ip: std::net::IpAddr = if args.ipv6 {
                bed.ipv6("b").map(Into::into)
            } else {
                bed.ipv4("b").map(Into::into)
            }
            .ok_or_else(|| anyhow!("testbed '{name}' has no address for host b"))?;
            let place = Placement {
                reflector_ns: bed.netns("b").map(str::to_string),
                client_ns: bed.netns("a").map(str::to_string),
            };
            (SocketAddr::new(ip, port), place, Some(name.clone()))
        }
        None => {
            let host = args.host.as_deref().unwrap_or_default();
            let t = (host, port)
                .to_socket_addrs()
                .with_context(|| format!("cannot resolve '{host}'"))?
                .next()
                .ok_or_else(|| anyhow!("'{host}' has no address"))?;
            (t, Placement::default(), None)
        }
    };
    let local_reflector = args.in_process || (bed_name.is_some() && proto != Proto::Icmp);
    let until = match (args.count, args.time) {
        (Some(0), _) => return Err(anyhow!("--count must be at least 1").into()),
        (Some(n), _) => Until::Count(n),
        (None, Some(t)) if t.is_zero() => return Err(anyhow!("--time must be above 0").into()),
        (None, Some(t)) => Until::Time(t),
        (None, None) => Until::Count(1000),
    };
    let (interval, in_flight) = match (args.interval, args.rate) {
        (_, Some(r)) if !(r > 0.0 && r <= 10_000_000.0) => {
            return Err(anyhow!("--rate must be between 0 and 10,000,000 requests/s").into())
        }
        (_, Some(r)) => (Duration::from_secs_f64(1.0 / r), 64),
        (Some(i), None) => (i, 1),
        (None, None) => (Duration::ZERO, 1),
    };
    let base = Config {
        mode: args.reflector_mode.into(),
        copy: args.reflector_copy,
        no_check: args.no_udp_checksum,
        spin: args.spin,
        size,
    };
    let configs = expand(base, &args.sweep)?;
    let mut warnings = Vec::new();
    let responder = if proto == Proto::Icmp {
        Responder::Kernel
    } else if args.echo {
        Responder::PlainEcho
    } else {
        Responder::Reflector
    };
    let hardware = {
        let ip = target.ip();
        // Probe the device in the client's namespace: that is where it lives.
        linerate_io::netns::spawn_in(place.client_ns.as_deref(), "lr-probe", move || {
            hardware_stamps(ip)
        })
        .ok()
        .and_then(|h| h.join().ok())
        .and_then(Result::ok)
        .unwrap_or_else(|| "unknown (could not probe the client's namespace)".into())
    };
    if target.is_ipv6() && configs.iter().any(|(c, _)| c.no_check) {
        warnings.push(
            "SO_NO_CHECK has no effect over IPv6: UDP checksums are mandatory there (RFC 8200 §8.1)"
                .into(),
        );
    }
    let mut same_clock = args.in_process || bed_name.is_some() || remote;
    let mut runs: Vec<LatencyRun> = Vec::new();
    for (i, (c, settings)) in configs.iter().enumerate() {
        let _ticker = crate::progress::Ticker::start(
            format!(
                "linerate latency: configuration {}/{}",
                i + 1,
                configs.len()
            ),
            match until {
                Until::Time(t) => Some(t),
                Until::Count(_) => None,
            },
        );
        let client = ClientConfig {
            target,
            session: session_token(),
            size: c.size,
            schedule: Schedule {
                until,
                interval,
                max_in_flight: in_flight,
                timeout: args.timeout,
            },
            spin: c.spin,
            no_udp_checksum: c.no_check,
            plain_echo: responder != Responder::Reflector,
            kernel_stamps: !args.no_kernel_stamps,
            stamp_every,
        };
        let run = if local_reflector {
            let mut rc = ReflectorConfig::new(client.session);
            rc.mode = c.mode;
            rc.copy = c.copy;
            rc.no_udp_checksum = c.no_check;
            rc.kernel_stamps = !args.no_kernel_stamps;
            let (run, report) = run_with_local_reflector(proto, target, rc, &client, &place)
                .map_err(|e| anyhow!(e).context("latency run"))?;
            summarize(settings.clone(), c.size as u64, &run, Some(&report), true)
        } else if remote {
            let params = LatencyParams {
                protocol: if proto == Proto::Tcp {
                    EchoProtocol::Tcp
                } else {
                    EchoProtocol::Udp
                },
                size_bytes: c.size as u64,
                mode: c.mode,
                copy: c.copy,
                no_udp_checksum: c.no_check,
                duration_ns: expected_duration_ns(until, interval),
                kernel_stamps: !args.no_kernel_stamps,
            };
            let r = run_remote(target, &params, &client)
                .map_err(|e| anyhow!(e).context("latency session with linerate server"))?;
            same_clock &= r.same_clock;
            if let Some(why) = &r.incomplete {
                warnings.push(format!("incomplete: {why}"));
            }
            summarize(
                settings.clone(),
                c.size as u64,
                &r.client,
                r.reflector.as_ref(),
                r.same_clock,
            )
        } else {
            let run = run_client_in(proto, &client, place.client_ns.as_deref())
                .map_err(|e| anyhow!(e).context("latency run"))?;
            summarize(
                settings.clone(),
                c.size as u64,
                &run,
                None,
                bed_name.is_some(),
            )
        };
        check(
            &run,
            !args.no_kernel_stamps,
            responder == Responder::Reflector,
            &mut warnings,
        );
        runs.push(run);
    }
    let report = LatencyReport {
        schema: SCHEMA.into(),
        version: SCHEMA_VERSION,
        target: match (&bed_name, local_reflector) {
            (Some(b), true) => format!("{} (bed {b}: host a → reflector in host b)", target.ip()),
            (Some(b), false) => format!("{} (bed {b}: host a → host b)", target.ip()),
            (None, true) => format!("{} (reflector in this process)", target.ip()),
            (None, false) => target.to_string(),
        },
        protocol: proto.name().into(),
        responder,
        clock: stamps::CLOCK_NAME.into(),
        timestamp_source:
            "software (SO_TIMESTAMPING: RX_SOFTWARE, TX_SCHED, TX_SOFTWARE; TX_ACK on TCP)".into(),
        hardware_timestamps: hardware,
        same_clock,
        runs,
        warnings,
    };
    if args.json {
        print_json(&report)?;
    } else {
        print(&linerate_report::latency::to_table(&report))?;
    }
    if report.warnings.iter().any(|w| w.starts_with("incomplete")) {
        return Err(Failure::Measurement(anyhow!(
            "the result is incomplete (see the warnings)"
        )));
    }
    if report.runs.iter().any(|r| r.counts.received == 0) {
        return Err(Failure::Measurement(anyhow!(
            "no replies: nothing was measured"
        )));
    }
    Ok(())
}

/// What the device carrying traffic to `ip` can stamp in hardware.
fn hardware_stamps(ip: std::net::IpAddr) -> String {
    match stamps::egress_interface(ip) {
        Some(i) => match stamps::device_stamping(&i) {
            Ok(d) if d.hardware => format!(
                "{i} has them (PHC {}); this build uses software stamps",
                d.phc_index.map_or("none".into(), |p| p.to_string())
            ),
            Ok(_) => format!("none on {i} (ETHTOOL_GET_TS_INFO)"),
            Err(e) => format!("unknown for {i} ({e})"),
        },
        None => "unknown (no local interface found for the route)".into(),
    }
}

/// Flags conditions that make a run's figures less trustworthy.
fn check(run: &LatencyRun, kernel_stamps: bool, reflector: bool, warnings: &mut Vec<String>) {
    // Stamps are owed only by the dissected (stamped) exchanges.
    let n = run.stage(Stage::Rtt).map_or(0, |s| s.count).max(1);
    let label = run.label();
    if kernel_stamps && run.stamp_every > 1 && n < MIN_STAMPED {
        warnings.push(format!(
            "{label}: the stages rest on only {n} stamped exchanges (1 in {}); run longer or use --stamp-every 1",
            run.stamp_every
        ));
    }
    if run.counts.lost > 0 {
        warnings.push(format!(
            "{label}: {} of {} requests got no reply in time",
            run.counts.lost, run.counts.sent
        ));
    }
    if kernel_stamps && run.missing_tx_stamps * 100 > n {
        warnings.push(format!(
            "{label}: {} of {} requests have no kernel transmit stamp; their tx stages are left out",
            run.missing_tx_stamps, n
        ));
    }
    if kernel_stamps && run.missing_rx_stamps * 100 > n {
        warnings.push(format!(
            "{label}: {} of {} replies have no kernel receive stamp; their rx stages are left out",
            run.missing_rx_stamps, n
        ));
    }
    // The reflector reads a request with its receive stamp only when the
    // request before announced it (lost or reordered requests mislead it).
    let resp_rx = run.stage(Stage::ResponderRx).map_or(0, |s| s.count);
    if kernel_stamps && reflector && (n - resp_rx.min(n)) * 100 > n {
        warnings.push(format!(
            "{label}: {} of {n} stamped exchanges have no responder receive stamp; their resp rx and network stages are left out",
            n - resp_rx.min(n)
        ));
    }
    if run.unrecorded > 0 {
        warnings.push(format!(
            "{label}: the stages cover the first {} answers; {} later ones are counted, not dissected (memory bound)",
            run.counts.received - run.unrecorded,
            run.unrecorded
        ));
    }
    if run.negative_intervals > 0 {
        warnings.push(format!(
            "{label}: {} intervals came out negative (stamps out of order) and were left out",
            run.negative_intervals
        ));
    }
}

/// One UDP exchange in this many is kernel-stamped unless `--stamp-every`
/// says otherwise: enough for stage percentiles in any run of a second or
/// more, while three quarters of the exchanges measure an RTT free of the
/// stamping cost (1–1.3 µs a round trip on veth, docs/METHODOLOGY.md).
const DEFAULT_STAMP_EVERY: u32 = 4;

/// Fewer stamped exchanges than this make stage percentiles shaky.
const MIN_STAMPED: u64 = 100;

/// How long a run means to take, for the server to bound its reflector by
/// (it adds a grace period and refuses more than its --max-duration). A
/// count is estimated at 10 ms per exchange (or the interval, if longer):
/// generous for any LAN; a slower run is cut short and its last requests
/// are reported lost.
fn expected_duration_ns(until: Until, interval: Duration) -> u64 {
    let d = match until {
        Until::Time(t) => t,
        Until::Count(n) => interval
            .max(Duration::from_millis(10))
            .checked_mul(u32::try_from(n).unwrap_or(u32::MAX))
            .unwrap_or(Duration::MAX),
    };
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A session token that a stray or old client will not guess by accident.
fn session_token() -> u32 {
    let t = stamps::realtime_ns();
    ((t ^ (t >> 32)) as u32 ^ std::process::id().rotate_left(16)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_core::latency::{dissect, ClientStamps, ProbeCounts, ResponderStamps, StageStats};

    /// A run of 100 stamped exchanges, `with_rx` of which carry the
    /// responder's receive stamp.
    fn run(with_rx: usize) -> LatencyRun {
        let c = ClientStamps {
            app_send_ns: 0,
            tx_sched_ns: Some(1_000),
            tx_soft_ns: Some(2_000),
            tx_ack_ns: None,
            rx_kernel_ns: Some(9_000),
            app_recv_ns: 10_000,
        };
        let mut st = StageStats::default();
        for i in 0..100 {
            let r = ResponderStamps {
                rx_kernel_ns: (i < with_rx).then_some(3_000),
                rx_app_ns: 4_000,
                tx_app_ns: 5_000,
                tx_sched_ns: None,
                tx_soft_ns: Some(6_000),
            };
            st.record(&dissect(&c, Some(&r), true));
        }
        let counts = ProbeCounts {
            sent: 400,
            received: 400,
            lost: 0,
            unexpected: 0,
        };
        LatencyRun {
            duration_ns: 1,
            stamp_every: 4,
            ..LatencyRun::new(64, counts, &st)
        }
    }

    #[test]
    fn missing_responder_receive_stamps_are_said() {
        let mut w = Vec::new();
        check(&run(100), true, true, &mut w);
        assert!(w.is_empty(), "{w:?}");
        check(&run(90), true, true, &mut w);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("10 of 100 stamped exchanges have no responder receive stamp"),
            "{w:?}"
        );
        // Not a reflector (plain echo, ICMP): no responder stages at all.
        let mut w = Vec::new();
        check(&run(0), true, false, &mut w);
        assert!(w.is_empty(), "{w:?}");
    }
}
