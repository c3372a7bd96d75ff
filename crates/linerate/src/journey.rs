//! `linerate journey`: flags -> [`Config`] (the bed from
//! `linerate_bed::target::journey`) -> `linerate_io::journey::run` ->
//! `linerate_report::journey`.

use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use linerate_core::journey::filter::IfaceFilter;
use linerate_core::journey::iface::IfaceConfig;
use linerate_core::journey::{assess, Backend, Config, Proto, SCHEMA, VERSION};
use linerate_core::result::{Envelope, Flag};
use linerate_core::units::parse_duration;

use crate::Failure;

// Flags of `linerate journey`.
#[derive(Debug, Args)]
pub(crate) struct JourneyArgs {
    /// A bed made with `linerate testbed up` (pair, bridge or router): probes
    /// go from host a to host b.
    #[arg(long, value_name = "NAME")]
    pub(crate) bed: Option<String>,
    /// Probe protocol: udp (datagrams to a socket in b), tcp (data segments
    /// of one connection to a listener in b), icmp (echo requests answered
    /// by b's kernel, followed there and back).
    #[arg(long, value_name = "udp|tcp|icmp", default_value = "udp")]
    pub(crate) proto: String,
    /// With --bed: IPv6 probes to host b's 2001:2::/48 address (the IPv6
    /// FIB lookups are followed instead of the IPv4 ones).
    #[arg(short = '6', long)]
    pub(crate) ipv6: bool,
    /// Payload (UDP, TCP or ICMP) of the first probe; probe i adds 5 × (i mod 16) bytes so
    /// probes in flight never share a length.
    #[arg(long, value_name = "BYTES", default_value_t = 100)]
    pub(crate) size: u32,
    /// Probes to send (--iface: packets to follow on the interface, then
    /// stop).
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub(crate) count: u32,
    /// --iface: stop after this long, if --count packets did not come
    /// first (SIGINT stops too; every way shows what was gathered).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub(crate) time: Duration,
    /// Probes per second.
    #[arg(long, value_name = "PPS", default_value_t = 100.0)]
    pub(crate) rate: f64,
    /// UDP port of the receiver in host b (default: any free one).
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    pub(crate) port: u16,
    /// SO_RCVBUF of the receiver; it then reads only after the last probe
    /// was sent, so a small buffer overflows (drops with reason SOCKET_RCVBUFF).
    #[arg(long, value_name = "BYTES")]
    pub(crate) rcvbuf: Option<u32>,
    /// How long each half of the tracer-cost measurement runs (UDP
    /// throughput without and with tracing; with tp_btf programs one more
    /// traced round reads the kernel's per-program BPF run statistics);
    /// 0 skips it.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub(crate) cost_time: Duration,
    /// Also open the context events (net:netif_rx, napi:napi_poll, the
    /// NET_RX softirq's exit) and the tracepoints that record every packet
    /// of the host (sock:sk_data_ready, qdisc enqueue and dequeue; with the
    /// perf tracer also the NET_RX softirq's entry and FIB lookups, which
    /// tp_btf programs gate per CPU by default): more steps, a costlier
    /// tracer (the cost shown is that of the set used).
    #[arg(long)]
    pub(crate) all_events: bool,
    /// Follow the matching packets of any application that pass this
    /// interface (in --netns, else linerate's namespace, else the one named
    /// namespace that has it) instead of sending probes; needs --filter.
    #[arg(long, value_name = "IFACE", conflicts_with = "bed")]
    pub(crate) iface: Option<String>,
    /// The named namespace (`ip netns`) holding --iface, where several have
    /// an interface of that name (beds all name theirs `lr-a`, `lr-b`…).
    #[arg(long, value_name = "NS", requires = "iface")]
    pub(crate) netns: Option<String>,
    /// Which packets --iface follows, judged on their headers in the kernel:
    /// terms `udp|tcp|icmp`, `host IP` (IPv4 or IPv6), `port N`, `len N` or
    /// `len N..M` (IP length), optionally joined by `and`, e.g.
    /// "udp port 5201 len 100..200".
    #[arg(long, value_name = "EXPR")]
    pub(crate) filter: Option<String>,
    /// What records the length-filtered tracepoints: auto (tp_btf programs
    /// that filter in BPF before writing, perf raw samples where BPF is
    /// refused, said in the result), tp_btf (or an error), perf.
    #[arg(long, value_name = "auto|tp_btf|perf", default_value = "auto")]
    pub(crate) tracer: String,
    /// One JSON document (schema linerate.journey, version 1).
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) plot: crate::report::PlotArgs,
}

/// A probe's events are looked for this long after its send.
const WINDOW: Duration = Duration::from_secs(1);

fn backend(args: &JourneyArgs) -> Result<Backend, Failure> {
    Ok(match args.tracer.as_str() {
        "auto" => Backend::Auto,
        "tp_btf" => Backend::TpBtf,
        "perf" => Backend::Perf,
        other => {
            return Err(anyhow!("--tracer {other}: give auto, tp_btf or perf").into());
        }
    })
}

fn config(args: &JourneyArgs) -> Result<Config, Failure> {
    let cfg = Config {
        payload_bytes: args.size,
        count: args.count,
        rate_pps: args.rate,
        port: args.port,
        rcvbuf_bytes: args.rcvbuf,
        cost_ns: u64::try_from(args.cost_time.as_nanos()).unwrap_or(u64::MAX),
        all_events: args.all_events,
        window_ns: WINDOW.as_nanos() as u64,
        proto: Proto::parse(&args.proto)?,
        tcp_option_bytes: 0,
        backend: backend(args)?,
        ipv6: args.ipv6,
    };
    cfg.validate()?;
    Ok(cfg)
}

/// Runs `linerate journey`.
pub(crate) fn run(args: &JourneyArgs, ctx: &crate::Ctx) -> Result<Vec<Flag>, Failure> {
    match (&args.iface, &args.filter) {
        (Some(_), None) => {
            return Err(anyhow!("--iface IF needs --filter EXPR (which packets to follow)").into())
        }
        (None, Some(_)) => return Err(anyhow!("--filter applies to --iface IF only").into()),
        _ => {}
    }
    if args.iface.is_some() && args.ipv6 {
        return Err(anyhow!(
            "-6 applies to --bed probes (--iface follows either family: its filter's `host` takes an IPv6 address)"
        )
        .into());
    }
    if let (Some(iface), Some(filter)) = (&args.iface, &args.filter) {
        let cfg = IfaceConfig {
            iface: iface.clone(),
            filter: IfaceFilter::parse(filter)?,
            count: u64::from(args.count),
            time_ns: u64::try_from(args.time.as_nanos()).unwrap_or(u64::MAX),
            backend: backend(args)?,
        };
        cfg.validate()?;
        return run_iface(&cfg, args.netns.as_deref(), ctx, args.json);
    }
    let cfg = config(args)?;
    let name = args
        .bed
        .as_deref()
        .ok_or_else(|| anyhow!("give --bed NAME (a bed made with `linerate testbed up`)"))?;
    let target = linerate_bed::target::journey(name)?;
    let interrupt = linerate_io::signal::interrupt_flag();
    let started = linerate_io::host::unix_now_ns();
    let mut progress = ctx.progress(crate::progress::StepLines::Keep);
    let result = linerate_io::journey::run(&cfg, &target, &mut progress, &interrupt)?;
    let flags = assess(&result);
    let doc = Envelope::new(SCHEMA, VERSION, result)
        .started(started)
        .on(linerate_io::host::facts())
        .flagged(flags);
    args.plot
        .write(&linerate_core::plot::of_journey(&doc.result))?;
    ctx.output(&doc, args.json, || {
        linerate_report::journey::render(&doc, ctx.width)
    })?;
    Ok(doc.flags)
}

/// Runs `linerate journey --iface IF --filter EXPR`.
fn run_iface(
    cfg: &IfaceConfig,
    netns: Option<&str>,
    ctx: &crate::Ctx,
    json: bool,
) -> Result<Vec<Flag>, Failure> {
    use linerate_core::journey::iface;
    let target = linerate_io::journey::iface::find_iface(&cfg.iface, netns)?;
    let interrupt = linerate_io::signal::interrupt_flag();
    let started = linerate_io::host::unix_now_ns();
    let mut progress = ctx.progress(crate::progress::StepLines::Keep);
    let result = linerate_io::journey::iface::run(cfg, &target, &mut progress, &interrupt)?;
    let flags = iface::assess(&result);
    let doc = Envelope::new(iface::SCHEMA, iface::VERSION, result)
        .started(started)
        .on(linerate_io::host::facts())
        .flagged(flags);
    ctx.output(&doc, json, || {
        linerate_report::journey::render_iface(&doc, ctx.width)
    })?;
    Ok(doc.flags)
}
