//! `linerate rfc2544`: flags -> [`Config`] (ends and addresses from
//! `linerate_bed::dut_target`) -> `linerate_io::rfc2544` -> `linerate_report::rfc2544`.

use std::time::Duration;

use anyhow::{anyhow, Context as _};
use clap::{Args, ValueEnum};
use linerate_bed::dut_target;
use linerate_bed::iface::BedIfaceSettings;
use linerate_bed::Bed;
use linerate_core::calc::SizeList;
use linerate_core::energy::flag_for;
use linerate_core::result::Flag;
use linerate_core::rfc2544::{self as core, parse_fps, parse_mac, parse_pct, Config, Endpoint};
use linerate_core::rfc2544::{Generator, GeneratorChoice, RxChoice, RxPath};
use linerate_core::units::{parse_duration as parse_dur, BitRate};

use crate::output::elog;
use crate::Failure;

/// Which RFC 2544 tests to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TestKind {
    /// Section 26.1: highest rate with no loss (binary search).
    Throughput,
    /// Section 26.2: latency at the throughput rate.
    Latency,
    /// Section 26.3: loss at 100 %, 90 %, … of line rate.
    Loss,
    /// Section 26.4: longest loss-free burst at line rate.
    B2b,
    /// Seed 003's view: latency of frames sent one at a time (--single-rate),
    /// and the single-frame throughput it implies (frame bits / latency).
    Single,
}

/// Frame generators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum GeneratorKind {
    /// The fastest that works: XDP live frames, else AF_XDP, else AF_PACKET
    /// sendmmsg (shaped links); why a faster one was not used is reported.
    Auto,
    /// AF_PACKET with sendmmsg.
    Packet,
    /// AF_PACKET with a PACKET_TX_RING (TPACKET_V2).
    PacketRing,
    /// AF_XDP in copy mode (skips the qdisc: refused on shaped links).
    #[value(name = "xdp")]
    AfXdp,
    /// XDP live frames: BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES
    /// (Linux 5.18), bursts of identical frames above 10,000 fps (skips the
    /// qdisc: refused on shaped links).
    XdpLive,
}

/// Receive paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ReceiverKind {
    /// The XDP counter where it attaches, else AF_PACKET (said in the
    /// result and flagged `receiver_fallback`).
    Auto,
    /// An XDP program counting test frames per stream in the driver's
    /// receive path, per-frame checks on a sample.
    XdpCount,
    /// AF_PACKET recvmmsg: every frame checked; drops above a few hundred
    /// thousand frames/s on a small host (such trials are invalid).
    Packet,
}

impl From<ReceiverKind> for RxChoice {
    fn from(r: ReceiverKind) -> Self {
        match r {
            ReceiverKind::Auto => Self::Auto,
            ReceiverKind::XdpCount => Self::Only(RxPath::XdpCount),
            ReceiverKind::Packet => Self::Only(RxPath::AfPacket),
        }
    }
}

// Flags of `linerate rfc2544`.
#[derive(Debug, Args)]
pub(crate) struct Rfc2544Args {
    /// A bed made with `linerate testbed up` (pair, bridge or router): frames
    /// go from host a's interface to host b's (through the router's port on
    /// a's side for a router).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["tx", "rx"])]
    pub(crate) bed: Option<String>,
    /// Sending interface (with --rx).
    #[arg(long, value_name = "IFACE", requires = "rx")]
    pub(crate) tx: Option<String>,
    /// Receiving interface (with --tx).
    #[arg(long, value_name = "IFACE", requires = "tx")]
    pub(crate) rx: Option<String>,
    /// Network namespace of --tx (default: this process's).
    #[arg(long, value_name = "NS", requires = "tx")]
    pub(crate) tx_netns: Option<String>,
    /// Network namespace of --rx (default: this process's).
    #[arg(long, value_name = "NS", requires = "rx")]
    pub(crate) rx_netns: Option<String>,
    /// Destination MAC of the frames with --tx/--rx (e.g. a router's port);
    /// default: the --rx interface's own.
    #[arg(long, value_name = "MAC", value_parser = parse_mac, requires = "tx")]
    pub(crate) dst_mac: Option<[u8; 6]>,
    /// IPv6 test frames (2001:2::/48, UDP checksum filled per frame; the
    /// smallest IPv6 test frame is 84 bytes, so `rfc2544` sizes start there).
    #[arg(long)]
    pub(crate) ipv6: bool,
    /// Tests to run, in this order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "throughput,latency,loss,b2b"
    )]
    pub(crate) tests: Vec<TestKind>,
    /// Frame sizes, header to FCS, or `rfc2544` (64,128,256,512,1024,1280,1518).
    #[arg(long, value_name = "BYTES[,…]|rfc2544", default_value = "rfc2544")]
    pub(crate) frames: SizeList,
    /// Trial time of rate trials (RFC 2544 section 24 asks for at least 60 s).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_dur)]
    pub(crate) trial: Duration,
    /// Throughput search resolution, percent of line rate.
    #[arg(long, value_name = "PCT", default_value = "0.5", value_parser = parse_pct)]
    pub(crate) resolution: f64,
    /// Loss that still passes the throughput test, percent (RFC 2544: 0).
    #[arg(long, value_name = "PCT", default_value = "0", value_parser = parse_pct)]
    pub(crate) loss_tolerance: f64,
    /// Complete throughput searches (the lowest result is reported).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) repeats: u32,
    /// Latency trials at the throughput rate (RFC 2544 section 26.2: 20).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) latency_trials: u32,
    /// Back-to-back searches (RFC 2544 section 26.4: 50).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) b2b_repeats: u32,
    /// Longest back-to-back burst, as time at line rate (RFC 2544: 2 s).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_dur)]
    pub(crate) b2b_max: Duration,
    /// Rate of the single-frame test: frames far apart, so none queues.
    #[arg(long, value_name = "FPS", default_value = "100", value_parser = parse_fps)]
    pub(crate) single_rate: f64,
    /// Step of the frame-loss curve, percent of line rate (RFC 2544: at most 10).
    #[arg(long, value_name = "PCT", default_value = "10", value_parser = parse_pct)]
    pub(crate) loss_step: f64,
    /// Wait for residual frames after each trial (RFC 2544 section 23 C: 2 s).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_dur)]
    pub(crate) drain: Duration,
    /// Extra pause between trials (RFC 2544 section 23 D: at least 5 s).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_dur)]
    pub(crate) settle: Duration,
    /// How often an invalid trial (generator short, receiver dropped) is
    /// repeated before it counts as a test-equipment limit.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=20))]
    pub(crate) retries: u32,
    /// How long the generator ceiling is measured before each frame size.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_dur)]
    pub(crate) ceiling_time: Duration,
    /// Frame generator.
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) generator: GeneratorKind,
    /// How the receiver counts frames.
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) receiver: ReceiverKind,
    /// PACKET_QDISC_BYPASS (refused on shaped links: it would skip tc).
    #[arg(long)]
    pub(crate) qdisc_bypass: bool,
    /// Sender threads of the packet and packet-ring generators, each with
    /// its own socket and its share of the frames (default: one per CPU, as
    /// trafgen starts one process per CPU).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) threads: Option<u32>,
    /// Line speed for the line-rate model (default: the bed's --link).
    #[arg(long, value_name = "SPEED")]
    pub(crate) link: Option<BitRate>,
    /// One JSON document (schema linerate.rfc2544, version 5).
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) plot: crate::report::PlotArgs,
    /// With --bed, a matrix of bed settings: KEY=V1,V2 with KEY mtu, gro,
    /// gso, tso, tx-checksum, rx-checksum, rps, tcp-rmem or tcp-wmem (set
    /// for the point, read back, restored after). Repeat for a cartesian
    /// product.
    #[arg(long, value_name = "KEY=V1,V2,…")]
    pub(crate) sweep: Vec<String>,
    /// Run the whole suite N times (per point) and report each run and the
    /// median with min–max per frame size.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) repeat: u32,
}

impl From<TestKind> for core::TestKind {
    fn from(t: TestKind) -> Self {
        [
            Self::Throughput,
            Self::Latency,
            Self::Loss,
            Self::B2b,
            Self::Single,
        ][t as usize]
    }
}

impl From<GeneratorKind> for GeneratorChoice {
    fn from(g: GeneratorKind) -> Self {
        use {Generator as G, GeneratorChoice::Only as O};
        [
            Self::Auto,
            O(G::Sendmmsg),
            O(G::TxRing),
            O(G::AfXdp),
            O(G::XdpLive),
        ][g as usize]
    }
}

/// The flags, the bed and the interfaces as a validated [`Config`].
fn config(args: &Rfc2544Args) -> Result<Config, Failure> {
    let t = match (&args.bed, &args.tx, &args.rx) {
        (Some(name), _, _) => dut_target::rfc2544(name, args.ipv6)?,
        (None, Some(tx), Some(rx)) => dut_target::interfaces(
            Endpoint::new(args.tx_netns.as_deref(), tx),
            Endpoint::new(args.rx_netns.as_deref(), rx),
            args.dst_mac,
            args.ipv6,
        ),
        _ => return Err(anyhow!("give --bed NAME, or --tx IFACE and --rx IFACE").into()),
    };
    let link = args.link.or(t.link).ok_or_else(|| {
        anyhow!("the line rate is unknown: give --link SPEED (e.g. --link 1G), or a bed made with --link")
    })?;
    let (sizes, replaced) = core::frame_sizes(&args.frames, args.ipv6);
    if replaced {
        crate::output::elog!("IPv6: 84-byte frames replace 64-byte ones (RFC 5180 section 5)");
    }
    let cfg = Config {
        tx: t.tx,
        rx: t.rx,
        tx_peer: t.tx_peer,
        src_ip: t.src_ip,
        dst_ip: t.dst_ip,
        dst_mac: t.dst_mac,
        link,
        tests: args.tests.iter().map(|&t| t.into()).collect(),
        sizes,
        trial: args.trial,
        resolution_pct: args.resolution,
        loss_tolerance_pct: args.loss_tolerance,
        repeats: args.repeats,
        latency_trials: args.latency_trials,
        b2b_repeats: args.b2b_repeats,
        b2b_max: args.b2b_max,
        single_rate_fps: args.single_rate,
        loss_step_pct: args.loss_step,
        drain: args.drain,
        settle: args.settle,
        retries: args.retries,
        ceiling_time: args.ceiling_time,
        generator: args.generator.into(),
        qdisc_bypass: args.qdisc_bypass,
        rx_path: args.receiver.into(),
        sender_threads: args.threads,
    };
    cfg.validate().map_err(|e| match e.setting() {
        Some(setting) => anyhow::Error::from(e).context(format!("--{setting}")),
        None => e.into(),
    })?;
    Ok(cfg)
}

/// The points of `--sweep` and the bed they set (opened, every value
/// checked against its interfaces), before anything runs.
fn sweep_points(args: &Rfc2544Args) -> Result<(Vec<SweepPoint>, Option<Bed>), Failure> {
    let usage = |e: String| Failure::Usage(anyhow::anyhow!(e));
    let points = core::sweep_points(&args.sweep).map_err(|e| usage(format!("--sweep: {e}")))?;
    linerate_core::sweep::check_repeat(args.repeat).map_err(|e| usage(format!("--repeat: {e}")))?;
    let bed = match (&args.bed, args.sweep.is_empty()) {
        (Some(name), false) => {
            let bed = Bed::open(name).with_context(|| format!("testbed '{name}'"))?;
            linerate_bed::reconfig::check(&bed, points.iter().flat_map(|p| &p.config))
                .map_err(|e| usage(format!("--sweep: {e}")))?;
            Some(bed)
        }
        (None, false) => return Err(usage("--sweep: bed settings need --bed".into())),
        _ => None,
    };
    let swept_link = points
        .iter()
        .any(|p| linerate_core::sweep::link_of(&p.config).is_some());
    if swept_link && args.link.is_some() {
        return Err(usage(
            "--sweep link: conflicts with --link (each point's rate is its line rate)".into(),
        ));
    }
    Ok((points, bed))
}

/// A point of `--sweep`: the bed settings it makes.
type SweepPoint = linerate_core::sweep::Point<Vec<linerate_core::sweep::BedSetting>>;

/// Runs `linerate rfc2544`.
pub(crate) fn run(args: &Rfc2544Args, ctx: &crate::Ctx) -> Result<Vec<Flag>, Failure> {
    let (points, bed) = sweep_points(args)?;
    let cfg = config(args)?;
    // Interface changes (GRO for XDP live frames, a sweep's bed settings)
    // go through the bed, which restores them on every exit path,
    // termination signals included. The first SIGINT/SIGTERM stops at the
    // next trial and prints what was measured (flagged incomplete); a
    // second one exits at once.
    linerate_bed::guard::install_signal_interrupt_then_teardown()
        .context("installing the signal guard")?;
    let mut progress = ctx.progress(crate::progress::StepLines::Keep);
    let meter = linerate_io::energy::Meter::start();
    let link = crate::testbed::link_reading(args.bed.as_deref());
    let matrix = points.len() > 1 || args.repeat > 1;
    let mut runs = Vec::new();
    'points: for p in &points {
        let set = match &bed {
            Some(bed) => Some(
                linerate_bed::reconfig::PointSettings::apply(bed, &p.config)
                    .context("setting the bed for the point")?,
            ),
            None => None,
        };
        if let Some(s) = &set {
            elog!("linerate rfc2544: bed set (read back): {}", s.describe());
        }
        for r in 1..=args.repeat {
            if matrix {
                let l = linerate_core::sweep::label(&p.settings);
                elog!("linerate rfc2544: {l}, run {r}/{}", args.repeat);
            }
            // A point's link rate is its line rate.
            let cfg = match linerate_core::sweep::link_of(&p.config) {
                Some(link) => Config {
                    link,
                    ..cfg.clone()
                },
                None => cfg.clone(),
            };
            let doc = linerate_io::rfc2544::run(&cfg, &mut progress, &mut BedIfaceSettings::new())?;
            runs.push((p.settings.clone(), matrix.then_some(r), doc));
            if linerate_io::signal::interrupt_signal().is_some() {
                if let Some(s) = set {
                    s.restore().context("restoring the bed after the point")?;
                }
                break 'points;
            }
        }
        if let Some(s) = set {
            s.restore().context("restoring the bed after the point")?;
        }
    }
    let doc = match matrix {
        true => core::combine(runs),
        false => runs.pop().map(|(_, _, doc)| doc),
    };
    let mut doc = doc.context("no run was made")?;
    // Frames/s offered to the link: the fastest trial's.
    let offered = (doc.result.sizes.iter().flat_map(|s| &s.trace))
        .flat_map(|t| t.steps.iter().map(|s| s.offered_fps))
        .reduce(f64::max);
    let (slot, flags) = (&mut doc.result.link_emulation, &mut doc.flags);
    crate::testbed::attach_link(link, offered, slot, flags);
    // Over a link sweep the whole has no one rate: each point has its own.
    if let (Some(a), true) = (
        slot,
        points
            .iter()
            .any(|p| p.settings.iter().any(|(k, _)| k == "link")),
    ) {
        a.link = None;
    }
    doc.flags.push(flag_for(&meter.read(), &doc.result));
    args.plot
        .write(&linerate_core::plot::of_rfc2544(&doc.result))?;
    if args.json {
        (doc.result.generator_notes.iter())
            .chain(&doc.result.receiver_notes)
            .for_each(|n| crate::output::elog!("note: {n}"));
    }
    ctx.output(&doc, args.json, || {
        linerate_report::rfc2544::render(&doc, ctx.width)
    })?;
    if let Some(sig) = linerate_io::signal::interrupt_signal() {
        return Err(Failure::Interrupted(sig));
    }
    Ok(doc.flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_enums_map_to_the_core_ones_of_the_same_name() {
        for t in TestKind::value_variants() {
            let name = t.to_possible_value().unwrap().get_name().to_string();
            let core = serde_json::to_value(core::TestKind::from(*t)).unwrap();
            assert_eq!(core, serde_json::Value::String(name));
        }
        let g = |k| GeneratorChoice::from(k).candidates();
        assert_eq!(g(GeneratorKind::Auto).len(), 3);
        assert_eq!(g(GeneratorKind::Packet), [Generator::Sendmmsg]);
        assert_eq!(g(GeneratorKind::PacketRing), [Generator::TxRing]);
        assert_eq!(g(GeneratorKind::AfXdp), [Generator::AfXdp]);
        assert_eq!(g(GeneratorKind::XdpLive), [Generator::XdpLive]);
    }
}
