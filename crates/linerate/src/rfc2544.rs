//! `linerate rfc2544`: the RFC 2544 device-under-test suite (throughput,
//! latency, frame loss rate, back-to-back) with raw AF_PACKET frames, driven
//! by the sans-IO procedures of `linerate-core` through the harness of
//! `linerate-io`.

use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use clap::{Args, ValueEnum};
use linerate_bed::{Bed, Topology};
use linerate_core::linerate::{Encap, Row};
use linerate_core::procedure::rfc2544::b2b::{BackToBack, BackToBackConfig, BackToBackResult};
use linerate_core::procedure::rfc2544::latency::{single_frame_bits_per_s, Latency, LatencyResult};
use linerate_core::procedure::rfc2544::loss::{FrameLoss, LossResult};
use linerate_core::procedure::rfc2544::throughput::{
    Throughput, ThroughputConfig, ThroughputResult,
};
use linerate_core::procedure::rfc2544::{
    Action, Common, Event, Limit, Plan, Procedure, TraceStep, Verdict,
};
use linerate_core::units::{format_bits_per_s, group_thousands, parse_duration, BitRate};
use linerate_io::dut::{mac_in, Endpoint, Harness, HarnessConfig};
use linerate_io::packet::SendPath;
use linerate_report::table::{Align, Table};
use serde::Serialize;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
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

    /// One JSON document (schema linerate.rfc2544, version 1).
    #[arg(long)]
    pub(crate) json: bool,
}

/// Everything measured for one frame size.
#[derive(Debug, Serialize)]
struct SizeReport {
    frame_bytes: u32,
    line_rate_frames_per_s: f64,
    /// Generator ceiling: frames the kernel accepted per second when offered
    /// as fast as possible (through the egress qdisc, so on a shaped link it
    /// is the shaper's rate).
    generator_ceiling_frames_per_s: Option<f64>,
    throughput: Option<ThroughputResult>,
    latency: Option<LatencyResult>,
    loss: Option<LossResult>,
    back_to_back: Option<BackToBackResult>,
    single_frame: Option<SingleFrame>,
    trace: Vec<TestTrace>,
}

/// Seed 003's single-frame view.
#[derive(Debug, Serialize)]
struct SingleFrame {
    latency: LatencyResult,
    /// Frame bits over the median one-way latency.
    single_frame_bits_per_s: Option<f64>,
    /// Streaming throughput (L2 bits/s), when the throughput test ran.
    streaming_bits_per_s: Option<f64>,
}

#[derive(Debug, Serialize)]
struct TestTrace {
    test: TestKind,
    steps: Vec<TraceStep>,
}

#[derive(Debug, Serialize)]
struct Rfc2544Json {
    schema: &'static str,
    version: u32,
    link_bits_per_s: u64,
    generator: &'static str,
    qdisc_bypass: bool,
    trial_s: f64,
    resolution_pct: f64,
    loss_tolerance_pct: f64,
    latency_clock: &'static str,
    ip_version: u8,
    /// With `--generator auto`: why faster generators were not used.
    generator_fallback: Option<String>,
    /// What this generator can and cannot verify, and what it changed.
    generator_notes: Vec<String>,
    /// Frames whose receive time fell back to a user-space stamp.
    rx_user_space_stamps: u64,
    sizes: Vec<SizeReport>,
}

/// What the clock of every latency figure is.
const LATENCY_CLOCK: &str = "CLOCK_REALTIME on one host: tx stamped in user space as the frame is handed to the kernel (sendmmsg or TX-ring slot), rx = kernel software receive timestamp (SO_TIMESTAMPNS)";
/// The same for XDP live frames.
const LATENCY_CLOCK_LIVE: &str = "CLOCK_REALTIME on one host: tx stamped in user space just before the BPF_PROG_TEST_RUN call (one stamp per call: per frame up to 10,000 fps, else the first frame of each call to arrive), rx = kernel software receive timestamp (SO_TIMESTAMPNS)";

fn latency_clock(path: SendPath) -> &'static str {
    if path == SendPath::XdpLive {
        LATENCY_CLOCK_LIVE
    } else {
        LATENCY_CLOCK
    }
}

/// What XDP live frames can and cannot verify, and what the harness changed.
fn live_notes(harness: &Harness, counted_by_device: Option<bool>) -> Vec<String> {
    let mut n = vec![
        "XDP live frames: BPF_PROG_TEST_RUN + BPF_F_TEST_XDP_LIVE_FRAMES running bpf_redirect(tx ifindex); frames skip the egress qdisc".to_string(),
        "up to 10,000 fps one frame per call: sequence numbers, loss, duplicates, reordering and latency per frame".to_string(),
        "above 10,000 fps one call per 100 ms carrying that slice's frames as one back-to-back burst at the kernel's speed (largest burst = catch-up burst); a call's frames are identical (one sequence number and tx stamp): the receiver counts them, duplicates and reordering within a call cannot be detected, latency is one sample per call (its first frame to arrive)".to_string(),
    ];
    match counted_by_device {
        Some(true) => n.push("sent frames = the sending veth's tx_queue_*_xdp_xmit counter (frames put on the peer's ring); frames it refused (ring full) are not counted as sent".to_string()),
        Some(false) => n.push("sent frames = frames handed to BPF_PROG_TEST_RUN (the device has no xdp_xmit counter, so frames it dropped would count as DUT loss)".to_string()),
        None => {}
    }
    if let Some(p) = &harness.gro_turned_on {
        n.push(format!(
            "GRO turned on at the veth peer {} ({}) for the run, off again after: veth ndo_xdp_xmit needs NAPI on the peer, or frames vanish",
            p.iface,
            p.netns.as_deref().unwrap_or("this namespace")
        ));
    }
    n
}

/// Starts the harness on `cfg` and sends the learning frames.
fn start_warm(
    cfg: &HarnessConfig,
    sizes: &[u32],
) -> Result<(Harness, Duration), (linerate_io::dut::HarnessError, bool)> {
    let mut h = Harness::start(cfg.clone()).map_err(|e| (e, true))?;
    for &s in sizes {
        h.template(s).map_err(|e| (e, false))?;
    }
    let first = sizes.first().copied().unwrap_or(64);
    match h.warm_up(first, Duration::from_secs(5)) {
        Ok(took) => Ok((h, took)),
        // The generator itself failed (e.g. live frames vanish): another
        // generator may work.
        Err(e @ linerate_io::dut::HarnessError::Generator { .. }) => Err((e, true)),
        Err(e) => Err((e, false)),
    }
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

struct Setup {
    cfg: HarnessConfig,
    link: BitRate,
}

fn setup(args: &Rfc2544Args) -> Result<Setup, Failure> {
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
    Ok(Setup {
        cfg: HarnessConfig {
            tx,
            rx,
            qdisc_bypass: args.qdisc_bypass,
            path: match args.generator {
                GeneratorKind::PacketRing => SendPath::TxRing,
                GeneratorKind::AfXdp => SendPath::AfXdp,
                GeneratorKind::XdpLive | GeneratorKind::Auto => SendPath::XdpLive,
                _ => SendPath::Sendmmsg,
            },
            src_ip,
            dst_ip,
            dst_mac,
            tx_peer,
        },
        link,
    })
}

/// Drives one procedure with the harness, printing progress to stderr.
fn drive<P: Plan>(
    harness: &mut Harness,
    proc_: &mut Procedure<P>,
    drain: Duration,
    label: &str,
) -> Result<(), Failure> {
    let epoch = Instant::now();
    loop {
        if let Some(Action::Trial(spec)) = proc_.poll_action() {
            eprint!(
                "  {label}: {} frames at {} fps ... ",
                group_thousands(spec.frames),
                group_thousands(spec.fps.round() as u64)
            );
            let (o, rep) = harness.trial(&spec, drain).map_err(anyhow::Error::from)?;
            proc_.handle(epoch.elapsed(), Event::TrialDone(o));
            if let Some(t) = proc_.trace().last() {
                eprintln!(
                    "offered {} fps (catch-up burst {}), sent {}, received {}, loss {:.3} %{}{} → {:?}  [{}]",
                    group_thousands(t.offered_fps.round() as u64),
                    rep.max_lag_frames,
                    group_thousands(t.sent_frames),
                    group_thousands(t.received_frames),
                    t.loss_pct,
                    if rep.enobufs + rep.short_batches > 0 {
                        format!(
                            " (ENOBUFS {}, short batches {})",
                            rep.enobufs, rep.short_batches
                        )
                    } else {
                        String::new()
                    },
                    if t.receiver_drops > 0 {
                        format!(" (RECEIVER dropped {})", t.receiver_drops)
                    } else {
                        String::new()
                    },
                    t.verdict,
                    t.next
                );
            }
        } else if let Some(at) = proc_.poll_timeout() {
            let now = epoch.elapsed();
            if at > now {
                std::thread::sleep(at - now);
            }
            proc_.handle(epoch.elapsed(), Event::Timeout);
        } else {
            return Ok(());
        }
    }
}

fn run_size(
    args: &Rfc2544Args,
    harness: &mut Harness,
    link: BitRate,
    size: u32,
) -> Result<(SizeReport, bool), Failure> {
    let frame = Encap::ETHERNET.frame_of_length(size, size > 1518)?;
    let row = Row::new(link, frame)?;
    let line = row.frame_rate.per_s();
    eprintln!(
        "[{size} B] line rate {} fps at {}",
        group_thousands(row.frame_rate.whole()),
        format_bits_per_s(link.bps_f64())
    );
    let ceiling = harness
        .ceiling(size, args.ceiling_time)
        .map_err(anyhow::Error::from)?;
    eprintln!(
        "  generator ceiling: {} fps ({} frames in {:.2} s, ENOBUFS {})",
        group_thousands(ceiling.offered_fps.round() as u64),
        group_thousands(ceiling.sent_frames),
        ceiling.elapsed.as_secs_f64(),
        ceiling.enobufs
    );
    // Let queues (qdisc, DUT) empty after the flood.
    std::thread::sleep(args.drain);

    let mut common = Common::new(size, line);
    common.trial = args.trial;
    common.settle = args.settle;
    common.invalid_retries = args.retries;
    let mut report = SizeReport {
        frame_bytes: size,
        line_rate_frames_per_s: line,
        generator_ceiling_frames_per_s: Some(ceiling.offered_fps),
        throughput: None,
        latency: None,
        loss: None,
        back_to_back: None,
        single_frame: None,
        trace: Vec::new(),
    };
    for test in &args.tests {
        match test {
            TestKind::Throughput => {
                let cfg = ThroughputConfig {
                    resolution: args.resolution / 100.0,
                    loss_tolerance: args.loss_tolerance / 100.0,
                    repeats: args.repeats,
                    generator_ceiling_fps: Some(ceiling.offered_fps),
                };
                let mut p = Procedure::new(common, Throughput::new(cfg));
                drive(harness, &mut p, args.drain, "throughput")?;
                report.throughput = Some(p.output());
                report.trace.push(TestTrace {
                    test: *test,
                    steps: p.trace().to_vec(),
                });
            }
            TestKind::Latency => {
                let rate = report
                    .throughput
                    .as_ref()
                    .and_then(|t| t.throughput_fps)
                    .unwrap_or(line);
                if report.throughput.is_none() {
                    eprintln!("  latency: no throughput test run, so at line rate (RFC 2544 section 26.2 asks for the throughput rate)");
                }
                let mut p = Procedure::new(common, Latency::new(rate, args.latency_trials));
                drive(harness, &mut p, args.drain, "latency")?;
                report.latency = Some(p.output());
                report.trace.push(TestTrace {
                    test: *test,
                    steps: p.trace().to_vec(),
                });
            }
            TestKind::Loss => {
                let mut p = Procedure::new(common, FrameLoss::new(args.loss_step));
                drive(harness, &mut p, args.drain, "loss")?;
                report.loss = Some(p.output());
                report.trace.push(TestTrace {
                    test: *test,
                    steps: p.trace().to_vec(),
                });
            }
            TestKind::Single => {
                let rate = args.single_rate.clamp(1.0, line);
                let mut p = Procedure::new(common, Latency::new(rate, 1));
                drive(harness, &mut p, args.drain, "single-frame")?;
                let latency = p.output();
                let streaming = report
                    .throughput
                    .as_ref()
                    .and_then(|t| t.throughput_fps)
                    .map(|f| f * f64::from(size) * 8.0);
                report.single_frame = Some(SingleFrame {
                    single_frame_bits_per_s: latency
                        .merged
                        .and_then(|m| single_frame_bits_per_s(size, m.p50_ns)),
                    streaming_bits_per_s: streaming,
                    latency,
                });
                report.trace.push(TestTrace {
                    test: *test,
                    steps: p.trace().to_vec(),
                });
            }
            TestKind::B2b => {
                let cfg = BackToBackConfig::new(line, args.b2b_max.as_secs_f64(), args.b2b_repeats);
                let mut p = Procedure::new(common, BackToBack::new(cfg));
                drive(harness, &mut p, args.drain, "back-to-back")?;
                report.back_to_back = Some(p.output());
                report.trace.push(TestTrace {
                    test: *test,
                    steps: p.trace().to_vec(),
                });
            }
        }
    }
    Ok((report, ceiling.sent_from_device_counter))
}

/// Which piece of test equipment made trials invalid: the generator (it
/// fell short of the asked rate) and/or the receiver (it dropped frames).
fn equipment(trace: &[TestTrace]) -> &'static str {
    let invalid = || {
        trace
            .iter()
            .flat_map(|t| t.steps.iter())
            .filter(|s| matches!(s.verdict, Verdict::InvalidRetry | Verdict::GeneratorLimit))
    };
    let receiver = invalid().any(|s| s.receiver_drops > 0);
    let generator = invalid().any(|s| s.receiver_drops == 0);
    match (generator, receiver) {
        (_, false) => "GENERATOR-LIMITED",
        (false, true) => "RECEIVER-LIMITED",
        (true, true) => "GENERATOR- AND RECEIVER-LIMITED",
    }
}

fn limit_note(l: Option<Limit>, trace: &[TestTrace]) -> String {
    match l {
        Some(Limit::LineRate) => "passes at line rate".into(),
        Some(Limit::Device) => "device limit (loss above)".into(),
        Some(Limit::Generator) => format!(
            "{}: a lower bound, the device may do more (see the invalid trials)",
            equipment(trace)
        ),
        None => String::new(),
    }
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn render(
    link: BitRate,
    path_note: &str,
    fallback: Option<&str>,
    clock: &str,
    notes: &[String],
    sizes: &[SizeReport],
) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "RFC 2544 on a {} link (line rate counts 20 B preamble+IFG per frame)\n",
        format_bits_per_s(link.bps_f64())
    ));
    out.push_str(&format!("generator: {path_note}"));
    if let Some(why) = fallback {
        out.push_str(&format!(" (auto: faster generators not used: {why})"));
    }
    out.push('\n');
    out.push_str(&format!("latency clock: {clock}\n"));
    for n in notes {
        out.push_str(&format!("note: {n}\n"));
    }
    for s in sizes {
        out.push_str(&format!("\n{}-byte frames\n", s.frame_bytes));
        let mut t = Table::new([
            ("", Align::Left),
            ("value", Align::Right),
            ("", Align::Left),
        ]);
        t.row(vec![
            "line rate".into(),
            format!(
                "{} fps",
                group_thousands(s.line_rate_frames_per_s.floor() as u64)
            ),
            String::new(),
        ]);
        if let Some(c) = s.generator_ceiling_frames_per_s {
            t.row(vec![
                "generator ceiling".into(),
                format!("{} fps", group_thousands(c.round() as u64)),
                format!(
                    "{:.1} % of line rate ({path_note})",
                    100.0 * c / s.line_rate_frames_per_s
                ),
            ]);
        }
        if let Some(tp) = &s.throughput {
            if let Some(f) = tp.throughput_fps {
                let bits = f * f64::from(s.frame_bytes) * 8.0;
                t.row(vec![
                    "throughput".into(),
                    format!("{} fps", group_thousands(f.round() as u64)),
                    format!(
                        "{} (L2), {:.2} % of line rate, ±{} fps; {}",
                        format_bits_per_s(bits),
                        100.0 * f / s.line_rate_frames_per_s,
                        group_thousands(tp.resolution_fps.round() as u64),
                        limit_note(tp.limited_by, &s.trace)
                    ),
                ]);
            }
        }
        if let Some(l) = &s.latency {
            match l.merged {
                Some(m) => t.row(vec![
                    "latency µs".into(),
                    format!("p50 {}", us(m.p50_ns)),
                    format!(
                        "min {} p99 {} max {} over {} frames, {} trial(s) at {} fps{}",
                        us(m.min_ns),
                        us(m.p99_ns),
                        us(m.max_ns),
                        group_thousands(m.count),
                        l.trials.len(),
                        group_thousands(l.rate_fps.round() as u64),
                        if l.invalid_trials > 0 {
                            format!(
                                "; {} trial(s) INVALID (generator short or receiver drops)",
                                l.invalid_trials
                            )
                        } else {
                            String::new()
                        }
                    ),
                ]),
                None => t.row(vec![
                    "latency".into(),
                    "-".into(),
                    format!("no frame measured ({} invalid trial(s))", l.invalid_trials),
                ]),
            }
        }
        if let Some(loss) = &s.loss {
            let curve: Vec<String> = loss
                .points
                .iter()
                .map(|p| match p.loss_pct {
                    Some(l) => format!("{:.0}%:{:.2}", p.rate_pct, l),
                    None => format!("{:.0}%:GEN", p.rate_pct),
                })
                .collect();
            t.row(vec![
                "frame loss %".into(),
                String::new(),
                format!("rate:loss {}", curve.join("  ")),
            ]);
        }
        if let Some(b) = &s.back_to_back {
            let v = match b.mean_frames {
                Some(m) => format!("{} frames", group_thousands(m.round() as u64)),
                None => "-".into(),
            };
            let note = if b.generator_limited {
                format!(
                    "{}: bursts at line rate could not be sent or received whole",
                    equipment(&s.trace)
                )
            } else if b.runs.iter().all(|r| r.limited_by == Limit::LineRate) {
                format!(
                    "the longest burst tried ({} frames) passed",
                    group_thousands(b.max_frames)
                )
            } else {
                format!("mean of {} search(es)", b.runs.len())
            };
            t.row(vec!["back-to-back".into(), v, note]);
        }
        if let Some(sf) = &s.single_frame {
            match sf.latency.merged {
                Some(m) => t.row(vec![
                    "single frame µs".into(),
                    format!("p50 {}", us(m.p50_ns)),
                    format!(
                        "min {} p99 {} at {} fps; one frame at a time: {}{}",
                        us(m.min_ns),
                        us(m.p99_ns),
                        group_thousands(sf.latency.rate_fps.round() as u64),
                        sf.single_frame_bits_per_s
                            .map(format_bits_per_s)
                            .unwrap_or_else(|| "-".into()),
                        sf.streaming_bits_per_s
                            .map(|b| format!(" vs streaming {}", format_bits_per_s(b)))
                            .unwrap_or_default()
                    ),
                ]),
                None => t.row(vec![
                    "single frame".into(),
                    "-".into(),
                    "no frame measured".into(),
                ]),
            }
        }
        let invalid = s
            .trace
            .iter()
            .flat_map(|t| &t.steps)
            .filter(|st| matches!(st.verdict, Verdict::InvalidRetry | Verdict::GeneratorLimit))
            .count();
        if invalid > 0 {
            t.row(vec![
                "invalid trials".into(),
                invalid.to_string(),
                "the generator fell short of the asked rate or the receiver dropped frames (not counted as DUT loss)".into(),
            ]);
        }
        out.push_str(&t.render(2));
    }
    out
}

/// Runs `linerate rfc2544`.
pub(crate) fn run(args: &Rfc2544Args, ctx: &crate::Ctx) -> Result<(), Failure> {
    let _ = ctx.width;
    let setup = setup(args)?;
    let mut sizes = args.frames.sizes();
    if args.ipv6 && args.frames == SizeList::Rfc2544 {
        // RFC 5180 section 5: 64-byte frames cannot carry IPv6 + UDP + a
        // test header.
        sizes.retain(|&s| s != 64);
        sizes.insert(0, 84);
        eprintln!("IPv6: 84-byte frames replace 64-byte ones (RFC 5180 section 5)");
    }
    for &s in &sizes {
        Encap::ETHERNET
            .frame_of_length(s, s > 1518)
            .with_context(|| format!("--frames {s}"))?;
        if s < 64 {
            usage!("--frames {s}: test frames are at least 64 bytes");
        }
    }
    // `auto`: the fastest generator that works — XDP live frames, AF_XDP,
    // AF_PACKET sendmmsg; each fallback and its reason are reported.
    let mut setup = setup;
    let candidates: Vec<SendPath> = if args.generator == GeneratorKind::Auto {
        vec![SendPath::XdpLive, SendPath::AfXdp, SendPath::Sendmmsg]
    } else {
        vec![setup.cfg.path]
    };
    let mut reasons: Vec<String> = Vec::new();
    let mut started = None;
    for (i, &path) in candidates.iter().enumerate() {
        setup.cfg.path = path;
        match start_warm(&setup.cfg, &sizes) {
            Ok(h) => {
                started = Some(h);
                break;
            }
            Err((e, retry)) if retry && i + 1 < candidates.len() => {
                let e = linerate_core::error::chain(&e);
                let why = format!("{}: {e}", path.name());
                eprintln!(
                    "generator auto: {} not used ({e}); trying {}",
                    path.name(),
                    candidates[i + 1].name()
                );
                reasons.push(why);
            }
            Err((e, _)) => return Err(anyhow::Error::from(e).into()),
        }
    }
    let (mut harness, took) = started.ok_or_else(|| anyhow!("no generator could start"))?;
    let fallback = (!reasons.is_empty()).then(|| reasons.join("; "));
    eprintln!(
        "linerate rfc2544: {} ({}) → {} ({}), generator {}{}",
        setup.cfg.tx.iface,
        setup.cfg.tx.netns.as_deref().unwrap_or("this namespace"),
        setup.cfg.rx.iface,
        setup.cfg.rx.netns.as_deref().unwrap_or("this namespace"),
        setup.cfg.path.name(),
        if args.qdisc_bypass {
            " + PACKET_QDISC_BYPASS"
        } else {
            ""
        }
    );
    eprintln!(
        "learning frames (RFC 2544 section 23 A): test frames arrive after {:.0} ms",
        took.as_secs_f64() * 1e3
    );
    let mut reports = Vec::new();
    let mut counted_by_device = None;
    for s in sizes {
        let (r, by_device) = run_size(args, &mut harness, setup.link, s)?;
        counted_by_device = Some(by_device);
        reports.push(r);
    }
    let notes = if setup.cfg.path == SendPath::XdpLive {
        live_notes(&harness, counted_by_device)
    } else {
        Vec::new()
    };
    let user_stamps = harness.rx_user_stamps;
    drop(harness);
    if args.json {
        for n in &notes {
            eprintln!("note: {n}");
        }
    }
    if user_stamps > 0 {
        eprintln!("note: {user_stamps} frame(s) had no kernel receive timestamp; their latency uses a user-space stamp after recvmmsg (later than the kernel's)");
    }
    if args.json {
        print_json(&Rfc2544Json {
            schema: "linerate.rfc2544",
            version: 1,
            link_bits_per_s: setup.link.bps(),
            generator: setup.cfg.path.name(),
            qdisc_bypass: args.qdisc_bypass,
            trial_s: args.trial.as_secs_f64(),
            resolution_pct: args.resolution,
            loss_tolerance_pct: args.loss_tolerance,
            latency_clock: latency_clock(setup.cfg.path),
            ip_version: if args.ipv6 { 6 } else { 4 },
            generator_fallback: fallback,
            generator_notes: notes,
            rx_user_space_stamps: user_stamps,
            sizes: reports,
        })
    } else {
        let path_note = match (setup.cfg.path, args.qdisc_bypass) {
            (SendPath::XdpLive, _) => "XDP live frames, no qdisc",
            (SendPath::AfXdp, _) => "AF_XDP copy mode, no qdisc",
            (SendPath::TxRing, false) => "AF_PACKET TX ring, through the egress qdisc",
            (SendPath::TxRing, true) => "AF_PACKET TX ring, qdisc bypassed",
            (SendPath::Sendmmsg, false) => "AF_PACKET sendmmsg, through the egress qdisc",
            (SendPath::Sendmmsg, true) => "AF_PACKET sendmmsg, qdisc bypassed",
        };
        print(&render(
            setup.link,
            path_note,
            fallback.as_deref(),
            latency_clock(setup.cfg.path),
            &notes,
            &reports,
        ))
    }
}
