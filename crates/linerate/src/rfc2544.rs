//! `linerate rfc2544`: the RFC 2544 device-under-test suite (throughput,
//! latency, frame loss rate, back-to-back) with raw frames. Here: the flags,
//! the bed's interfaces and addresses turned into a [`Config`]; the driver
//! is `linerate_io::rfc2544`, the result and its flags `linerate_core::rfc2544`,
//! the tables `linerate_report::rfc2544`.

use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use clap::{Args, ValueEnum};
use linerate_bed::iface::BedIfaceSettings;
use linerate_bed::{Bed, Topology};
use linerate_core::progress::Progress;
use linerate_core::result::Flag;
use linerate_core::rfc2544::{self as core, Config, Endpoint, Generator, GeneratorChoice};
use linerate_core::units::{parse_duration, BitRate};
use linerate_io::dut::mac_in;

use crate::flags::SizeList;
use crate::output::{print, print_json};
use crate::Failure;

/// Returns a usage error (exit code 2).
macro_rules! usage {
    ($($t:tt)*) => {
        return Err(Failure::Usage(anyhow!($($t)*)))
    };
}

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

fn parse_dur(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let bad = || format!("'{s}' is not a MAC address (like 02:00:00:00:00:01)");
    let parts: Vec<&str> = s.trim().split(':').collect();
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        if p.len() != 2 {
            return Err(bad());
        }
        *m = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(mac)
}

fn parse_fps(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 1.0 => Ok(v),
        _ => Err(format!("'{s}' is not a rate of at least 1 frame/s")),
    }
}

fn parse_pct(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage"))?;
    if !(0.0..=100.0).contains(&v) || !v.is_finite() {
        return Err(format!("'{s}' is not between 0 and 100"));
    }
    Ok(v)
}

/// Flags of `linerate rfc2544`.
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

    /// PACKET_QDISC_BYPASS (refused on shaped links: it would skip tc).
    #[arg(long)]
    pub(crate) qdisc_bypass: bool,

    /// Line speed for the line-rate model (default: the bed's --link).
    #[arg(long, value_name = "SPEED")]
    pub(crate) link: Option<BitRate>,

    /// One JSON document (schema linerate.rfc2544, version 2).
    #[arg(long)]
    pub(crate) json: bool,
}

/// Addresses for frames that no host owns (so none answers them): in the
/// bed's subnet, or in a subnet of their own for --tx/--rx.
fn addrs(ipv6: bool, own_subnet: bool) -> (IpAddr, IpAddr) {
    match (ipv6, own_subnet) {
        (false, false) => ([198, 18, 0, 249].into(), [198, 18, 0, 250].into()),
        (false, true) => ([198, 18, 0, 249].into(), [198, 19, 255, 250].into()),
        (true, false) => (
            Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0xf9).into(),
            Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0xfa).into(),
        ),
        (true, true) => (
            Ipv6Addr::new(0x2001, 2, 0, 0xffff, 0, 0, 0, 0xf9).into(),
            Ipv6Addr::new(0x2001, 2, 0, 0xffff, 0, 0, 0, 0xfa).into(),
        ),
    }
}

impl From<TestKind> for core::TestKind {
    fn from(t: TestKind) -> Self {
        match t {
            TestKind::Throughput => Self::Throughput,
            TestKind::Latency => Self::Latency,
            TestKind::Loss => Self::Loss,
            TestKind::B2b => Self::B2b,
            TestKind::Single => Self::Single,
        }
    }
}

impl From<GeneratorKind> for GeneratorChoice {
    fn from(g: GeneratorKind) -> Self {
        match g {
            GeneratorKind::Auto => Self::Auto,
            GeneratorKind::Packet => Self::Only(Generator::Sendmmsg),
            GeneratorKind::PacketRing => Self::Only(Generator::TxRing),
            GeneratorKind::AfXdp => Self::Only(Generator::AfXdp),
            GeneratorKind::XdpLive => Self::Only(Generator::XdpLive),
        }
    }
}

/// The flags, the bed and the interfaces as a validated [`Config`].
fn config(args: &Rfc2544Args) -> Result<Config, Failure> {
    let mut tx_peer = None;
    let (tx, rx, bed_link, src_ip, dst_ip, dst_mac) = if let Some(name) = &args.bed {
        let bed = Bed::open(name).with_context(|| format!("opening bed '{name}'"))?;
        let end = |role: &str| -> anyhow::Result<Endpoint> {
            Ok(Endpoint {
                netns: Some(
                    bed.netns(role)
                        .ok_or_else(|| anyhow!("bed '{name}' has no host {role}"))?
                        .to_string(),
                ),
                iface: bed
                    .iface(role)
                    .ok_or_else(|| anyhow!("bed '{name}' has no interface on {role}"))?
                    .to_string(),
            })
        };
        // The other end of a's cable: XDP live frames need NAPI (GRO) there.
        if let Ok(a) = end("a") {
            let here = (a.netns.clone().unwrap_or_default(), a.iface.clone());
            tx_peer = bed.layout().cables.iter().find_map(|(x, y)| {
                let other = if *x == here {
                    y
                } else if *y == here {
                    x
                } else {
                    return None;
                };
                Some(Endpoint {
                    netns: Some(other.0.clone()),
                    iface: other.1.clone(),
                })
            });
        }
        if bed.topology() == Topology::Router {
            // Frames go to the router's port on a's side, addressed from a's
            // address to b's, so that the router forwards them (and
            // decrements the TTL, rewriting the checksum the receiver checks).
            let ip = |role: &str| -> anyhow::Result<IpAddr> {
                let v = if args.ipv6 {
                    bed.ipv6(role).map(IpAddr::V6)
                } else {
                    bed.ipv4(role).map(IpAddr::V4)
                };
                v.ok_or_else(|| anyhow!("bed '{name}' has no address on {role}"))
            };
            let port = end("dut")?;
            let mac = mac_in(port.netns.as_deref(), &port.iface).map_err(anyhow::Error::from)?;
            (
                end("a")?,
                end("b")?,
                bed.link(),
                ip("a")?,
                ip("b")?,
                Some(mac),
            )
        } else {
            let (src, dst) = addrs(args.ipv6, false);
            (end("a")?, end("b")?, bed.link(), src, dst, None)
        }
    } else {
        match (&args.tx, &args.rx) {
            (Some(tx), Some(rx)) => {
                let (src, dst) = addrs(args.ipv6, true);
                (
                    Endpoint {
                        netns: args.tx_netns.clone(),
                        iface: tx.clone(),
                    },
                    Endpoint {
                        netns: args.rx_netns.clone(),
                        iface: rx.clone(),
                    },
                    None,
                    src,
                    dst,
                    args.dst_mac,
                )
            }
            _ => usage!("give --bed NAME, or --tx IFACE and --rx IFACE"),
        }
    };
    let link = args.link.or(bed_link).ok_or_else(|| {
        anyhow!("the line rate is unknown: give --link SPEED (e.g. --link 1G), or a bed made with --link")
    })?;
    if link.bps() == 0 {
        usage!("--link must be above zero");
    }
    let mut sizes = args.frames.sizes();
    if args.ipv6 && args.frames == SizeList::Rfc2544 {
        // RFC 5180 section 5: 64-byte frames cannot carry IPv6 + UDP + a
        // test header.
        sizes.retain(|&s| s != 64);
        sizes.insert(0, 84);
        eprintln!("IPv6: 84-byte frames replace 64-byte ones (RFC 5180 section 5)");
    }
    let cfg = Config {
        tx,
        rx,
        tx_peer,
        src_ip,
        dst_ip,
        dst_mac,
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
    };
    cfg.validate().map_err(|e| match e {
        core::ConfigError::FrameTooSmall(_) | core::ConfigError::Frame(..) => {
            anyhow::Error::from(e).context("--frames")
        }
        core::ConfigError::ZeroLink => anyhow::Error::from(e).context("--link"),
        e => e.into(),
    })?;
    Ok(cfg)
}

/// Progress lines on stderr, as the run goes.
struct Stderr;

impl Progress for Stderr {
    fn step(&mut self, line: &str) {
        eprintln!("{line}");
    }
}

/// Runs `linerate rfc2544`.
pub(crate) fn run(args: &Rfc2544Args, ctx: &crate::Ctx) -> Result<Vec<Flag>, Failure> {
    let cfg = config(args)?;
    // Interface changes (GRO for XDP live frames) go through the bed, which
    // restores them on every exit path, termination signals included.
    linerate_bed::guard::install_signal_teardown().context("installing the signal guard")?;
    let mut settings = BedIfaceSettings::new();
    let doc =
        linerate_io::rfc2544::run(&cfg, &mut Stderr, &mut settings).map_err(anyhow::Error::from)?;
    if args.json {
        for n in &doc.result.generator_notes {
            eprintln!("note: {n}");
        }
        print_json(&doc)?;
    } else {
        print(&linerate_report::rfc2544::render(&doc, ctx.width))?;
    }
    Ok(doc.flags)
}
