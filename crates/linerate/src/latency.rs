//! `linerate latency`: response time dissected into stages.

use std::time::Duration;

use anyhow::{anyhow, Context as _};
use clap::builder::{PossibleValuesParser, TypedValueParser as _};
use clap::Args;
use linerate_bed::reconfig::PointSettings;
use linerate_core::energy::flag_for;
use linerate_core::latency::load::{self, LoadError, LoadPlan, LoadSpec};
use linerate_core::latency::{
    Config, ConfigError, EchoProtocol, Parameter, Peer, ReflectorMode, Request, Setup, Variant,
};
use linerate_core::result::Flag;
use linerate_core::sweep::BedSetting;
use linerate_core::throughput::config::Target;
use linerate_core::units::{parse_duration, ByteCount};
use linerate_io::latency_load::LoadAgainst;
use linerate_io::resolve::resolve;
use std::net::SocketAddr;

use crate::output::elog;
use crate::Failure;

// Flags of `linerate latency`.
#[derive(Debug, Args)]
pub(crate) struct LatencyArgs {
    /// The responder: a host running `linerate server`, any echo server with
    /// --echo, any host with --icmp, or a local address with --in-process.
    /// Not with --bed (the bed's host b answers).
    #[arg(required_unless_present = "bed", conflicts_with = "bed")]
    pub(crate) host: Option<String>,

    /// Run on a testbed (`linerate testbed up NAME`): the client in host a,
    /// linerate's reflector (or, with --icmp, the kernel) in host b, both in
    /// this process, on one clock.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["in_process", "echo"])]
    pub(crate) bed: Option<String>,

    /// With --bed: use the hosts' IPv6 addresses.
    #[arg(long, requires = "bed")]
    pub(crate) ipv6: bool,

    #[arg(long, short = 'p', help = port_help())]
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

    /// A reply later than this counts as lost [default: UDP and ICMP size it
    /// from the RTTs seen, 10 × their p99 between 10 ms and 1 s; TCP 1 s].
    #[arg(long, value_parser = parse_duration)]
    pub(crate) timeout: Option<Duration>,

    /// The client spins on non-blocking receives instead of sleeping.
    #[arg(long)]
    pub(crate) spin: bool,

    /// How the reflector waits for requests: blocking (sleep until a request
    /// arrives), busy (spin on non-blocking receives), batch (take every
    /// queued request, then answer them in one pass).
    #[arg(long, default_value = "blocking", value_parser = mode_parser())]
    pub(crate) reflector_mode: ReflectorMode,

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

    /// Kernel-stamp one exchange in N and dissect those; the others stamp
    /// nothing on either end (ICMP: only the reply's receive stamp, as
    /// ping's SO_TIMESTAMP), so their RTT carries no stamping cost and is
    /// the RTT quoted, with the stamped sample's beside it (the difference
    /// is what stamping costs). 1: every exchange stamped. [default: 4]
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

    /// Run each configuration N times (round after round) and report each
    /// run and the median with min–max.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) repeat: u32,

    /// Latency under load: measure the exchanges idle, then while
    /// linerate's throughput flows load the same server or bed, and show
    /// per stage how much the RTT grew. SPEC: comma-separated, any order:
    /// tcp|udp, streams per direction (1-64), forward|reverse|bidir,
    /// rate=RATE (per direction), size=BYTES; e.g. tcp,4,reverse or
    /// udp,1,forward,rate=50M. --sweep then varies the load: load-streams,
    /// load-rate, load-direction. Each phase runs --time (default 5 s).
    #[arg(long, value_name = "SPEC", conflicts_with = "echo")]
    pub(crate) load: Option<String>,

    /// With --load: how long each load runs before the loaded exchanges
    /// start (left out of the load's figures) [default: 2s].
    #[arg(long, value_name = "S", requires = "load", value_parser = parse_duration)]
    pub(crate) settle: Option<Duration>,

    /// One JSON document (schema linerate.latency, version 3).
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) plot: crate::report::PlotArgs,
}

/// `--reflector-mode`'s values, as core names them.
fn mode_parser() -> impl clap::builder::TypedValueParser<Value = ReflectorMode> {
    PossibleValuesParser::new(["blocking", "busy", "batch"]).try_map(|s| s.parse())
}

/// `--port`'s help, with the defaults from where they are defined.
fn port_help() -> String {
    format!(
        "Port: `linerate server`'s control port (default {}), or the echo service with --echo (default {})",
        linerate_core::wire::control::DEFAULT_PORT,
        linerate_core::latency::ECHO_PORT
    )
}

/// A configuration error in the words of the command line.
fn usage(e: &ConfigError, args: &LatencyArgs) -> Failure {
    let flag = match e.parameter {
        // A size out of range may come from a sweep of sizes.
        Parameter::Size if args.sweep.iter().any(|s| s.starts_with("size=")) => "--sweep size",
        Parameter::Peer => "--in-process",
        Parameter::Count => "--count",
        Parameter::Time => "--time",
        Parameter::Rate => "--rate",
        Parameter::Size => "--size",
        Parameter::StampEvery => "--stamp-every",
        Parameter::NoUdpChecksum => "--no-udp-checksum",
        Parameter::Sweep => "--sweep",
        Parameter::Timeout => "--timeout",
        Parameter::Repeat => "--repeat",
    };
    Failure::Usage(anyhow!("{flag}: {}", e.reason))
}

/// The responder as the flags name it: a bed's hosts, or HOST resolved.
fn peer(args: &LatencyArgs) -> anyhow::Result<Peer> {
    if let Some(name) = &args.bed {
        let bed = linerate_bed::target::latency(name, args.ipv6);
        return Ok(Peer::Bed(bed.with_context(|| format!("testbed '{name}'"))?));
    }
    let ip = resolve(args.host.as_deref().unwrap_or_default(), 0, false)?.ip();
    Ok(match (args.in_process, args.echo) {
        (true, _) => Peer::InProcess(ip),
        (false, true) => Peer::Echo(ip),
        (false, false) => Peer::Server(ip),
    })
}

/// A load that cannot run, in the words of the command line.
fn load_usage(e: &LoadError) -> Failure {
    let flag = match e {
        LoadError::Sweep(_) => "--sweep",
        LoadError::Count => "--count",
        LoadError::Settle(_) => "--settle",
        LoadError::OneConfiguration => "--repeat",
        _ => "--load",
    };
    Failure::Usage(anyhow!("{flag}: {e}"))
}

/// With --load: the echo run (its sweeps are the load's, its time 5 s
/// unless given), the plan and against what the load runs.
fn load_config(args: &LatencyArgs, spec: &str) -> Result<(Config, LoadPlan, LoadAgainst), Failure> {
    let spec: LoadSpec = spec.parse().map_err(|e| load_usage(&e))?;
    let echo = config_with(
        args,
        Vec::new(),
        args.time.or(match args.count {
            Some(_) => None,
            None => Some(load::DEFAULT_PHASE_TIME),
        }),
    )?;
    let plan = LoadPlan::new(spec, &args.sweep, args.settle, &echo).map_err(|e| load_usage(&e))?;
    let against = match &echo.bed {
        Some(b) => {
            let bed = linerate_bed::target::throughput(&b.name, args.ipv6, None);
            LoadAgainst::Target(Target::Bed(
                bed.with_context(|| format!("testbed '{}'", b.name))?,
            ))
        }
        None if args.in_process => LoadAgainst::InProcess,
        None => LoadAgainst::Target(Target::Server(SocketAddr::new(
            echo.target.ip(),
            match echo.setup {
                Setup::Server => echo.target.port(),
                _ => args
                    .port
                    .unwrap_or(linerate_core::wire::control::DEFAULT_PORT),
            },
        ))),
    };
    // Every level's throughput parameters checked before anything runs.
    let check = match &against {
        LoadAgainst::Target(t) => t.clone(),
        LoadAgainst::InProcess => Target::Server(SocketAddr::new(echo.target.ip(), 0)),
    };
    plan.configs(&check, echo.schedule.timeout)
        .map_err(|e| Failure::Usage(anyhow!("--load: {e}")))?;
    Ok((echo, plan, against))
}

/// The flags as a validated run.
pub(crate) fn config(args: &LatencyArgs) -> Result<Config, Failure> {
    config_with(args, args.sweep.clone(), args.time)
}

/// The flags as a validated run, with these sweeps and this time.
fn config_with(
    args: &LatencyArgs,
    sweep: Vec<String>,
    time: Option<Duration>,
) -> Result<Config, Failure> {
    let protocol = match (args.tcp, args.icmp) {
        (true, _) => EchoProtocol::Tcp,
        (false, true) => EchoProtocol::Icmp,
        (false, false) => EchoProtocol::Udp,
    };
    let req = Request {
        port: args.port,
        size: args.size,
        count: args.count,
        time,
        interval: args.interval,
        rate_per_s: args.rate,
        timeout: args.timeout,
        spin: args.spin,
        reflector_mode: args.reflector_mode,
        reflector_copy: args.reflector_copy,
        no_udp_checksum: args.no_udp_checksum,
        kernel_stamps: !args.no_kernel_stamps,
        stamp_every: args.stamp_every,
        sweep,
        repeat: args.repeat,
        ..Request::new(peer(args)?, protocol)
    };
    Config::new(&req).map_err(|e| usage(&e, args))
}

/// The bed, opened once when a configuration sets bed keys, every value
/// checked against its interfaces before anything runs.
fn bed_for(args: &LatencyArgs, cfg: &Config) -> Result<Option<linerate_bed::Bed>, Failure> {
    let (Some(name), true) = (&args.bed, cfg.variants.iter().any(|v| !v.bed.is_empty())) else {
        return Ok(None);
    };
    let bed = linerate_bed::Bed::open(name).with_context(|| format!("testbed '{name}'"))?;
    linerate_bed::reconfig::check(&bed, cfg.variants.iter().flat_map(|v| &v.bed))
        .map_err(|e| Failure::Usage(anyhow::anyhow!("--sweep: {e}")))?;
    Ok(Some(bed))
}

/// Sets the bed for configuration `v` (read back), putting back what the
/// previous one set first; nothing when it sets the same.
fn set_point(
    bed: Option<&linerate_bed::Bed>,
    point: &mut Option<(Vec<BedSetting>, PointSettings)>,
    v: &Variant,
) -> Result<(), linerate_io::echo::EchoIoError> {
    let Some(bed) = bed else { return Ok(()) };
    if point.as_ref().is_some_and(|(set, _)| *set == v.bed) {
        return Ok(());
    }
    let fail = |source: linerate_bed::BedError| linerate_io::echo::EchoIoError::Prepare {
        point: linerate_core::sweep::label(&v.settings),
        source: Box::new(source),
    };
    if let Some((_, previous)) = point.take() {
        previous.restore().map_err(fail)?;
    }
    let settings = PointSettings::apply(bed, &v.bed).map_err(fail)?;
    elog!(
        "linerate latency: bed set (read back): {}",
        settings.describe()
    );
    *point = Some((v.bed.clone(), settings));
    Ok(())
}

/// `linerate latency`.
pub(crate) fn run(args: &LatencyArgs, ctx: &crate::Ctx) -> Result<Vec<Flag>, Failure> {
    if let Some(spec) = &args.load {
        return run_loaded(args, spec, ctx);
    }
    let cfg = config(args)?;
    let mut progress = ctx.progress(crate::progress::StepLines::Replace);
    let meter = linerate_io::energy::Meter::start();
    let link = crate::testbed::link_reading(args.bed.as_deref());
    let bed = bed_for(args, &cfg)?;
    let mut point: Option<(Vec<BedSetting>, PointSettings)> = None;
    // With a link sweep, each run's own reading of the emulator.
    let per_run = (cfg.variants.iter()).any(|v| linerate_core::sweep::link_of(&v.bed).is_some());
    let mut reading: Option<linerate_bed::emulator::Reading> = None;
    let mut accounts = Vec::new();
    let mut prepare = |v: &Variant| {
        if let Some(r) = reading.take() {
            accounts.push(r.account(None));
        }
        set_point(bed.as_ref(), &mut point, v)?;
        if per_run {
            reading = crate::testbed::link_reading(args.bed.as_deref());
        }
        Ok(())
    };
    let ran = linerate_io::echo::run_each(&cfg, &mut progress, &mut prepare);
    accounts.extend(reading.map(|r| r.account(None)));
    if let Some((_, settings)) = point {
        settings
            .restore()
            .context("restoring the bed after the sweep")?;
    }
    let mut doc = ran.map_err(|e| {
        anyhow::Error::new(e).context(match cfg.setup {
            Setup::Server => "latency session with linerate server",
            _ => "latency run",
        })
    })?;
    if accounts.len() == doc.result.runs.len() {
        for (run, account) in doc.result.runs.iter_mut().zip(accounts) {
            run.link_emulation = Some(account);
        }
    }
    doc.flags.push(flag_for(&meter.read(), &doc.result));
    output(args, ctx, doc, link)
}

/// `linerate latency --load SPEC`: idle, then under each load level.
fn run_loaded(args: &LatencyArgs, spec: &str, ctx: &crate::Ctx) -> Result<Vec<Flag>, Failure> {
    let (cfg, plan, against) = load_config(args, spec)?;
    let mut progress = ctx.progress(crate::progress::StepLines::Replace);
    let meter = linerate_io::energy::Meter::start();
    let link = crate::testbed::link_reading(args.bed.as_deref());
    let mut doc = linerate_io::latency_load::run(&cfg, &plan, &against, &mut progress)
        .map_err(|e| anyhow::Error::new(e).context("latency under load"))?;
    doc.flags.push(flag_for(&meter.read(), &doc.result));
    output(args, ctx, doc, link)
}

/// Plots, the bed's link account, and the document or table.
fn output(
    args: &LatencyArgs,
    ctx: &crate::Ctx,
    mut doc: linerate_core::result::Envelope<linerate_core::latency::LatencyReport>,
    link: Option<linerate_bed::emulator::Reading>,
) -> Result<Vec<Flag>, Failure> {
    args.plot
        .write(&linerate_core::plot::of_latency(&doc.result))?;
    crate::testbed::attach_link(link, None, &mut doc.result.link_emulation, &mut doc.flags);
    // Over a link sweep the whole has no one rate: each run has its own.
    if let (Some(a), true) = (
        &mut doc.result.link_emulation,
        doc.result.runs.iter().any(|r| r.link_bits_per_s.is_some()),
    ) {
        a.link = None;
    }
    ctx.output(&doc, args.json, || {
        linerate_report::latency::render(&doc, ctx.width)
    })?;
    Ok(doc.flags)
}
