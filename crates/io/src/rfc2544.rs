//! The RFC 2544 driver: runs the sans-IO procedures of
//! [`linerate_core::procedure::rfc2544`] on real interfaces with the
//! [`Harness`], one frame size after another, and returns the result of
//! [`linerate_core::rfc2544`] in its envelope, assessed.
//!
//! The generator policy lives here: with [`GeneratorChoice::Auto`] the
//! fastest generator that works — XDP live frames, else AF_XDP, else
//! AF_PACKET `sendmmsg` (shaped links refuse the first two) — and why each
//! faster one was not used goes into the result. The receive policy too:
//! with [`RxChoice::Auto`] the XDP counter on the receiving interface, else
//! (it cannot attach) the AF_PACKET receiver, with the reason in the result
//! (`receiver_fallback`, flagged).
//!
//! This driver changes no interface itself: XDP live frames need GRO (NAPI)
//! on the sending veth's peer, which it asks of its caller through
//! [`IfaceSettings`] (the binary passes the bed's, which plans, reads back
//! and restores the change on every exit path).

use std::time::{Duration, Instant};

use linerate_core::procedure::rfc2544::b2b::{BackToBack, BackToBackConfig};
use linerate_core::procedure::rfc2544::latency::Latency;
use linerate_core::procedure::rfc2544::loss::FrameLoss;
use linerate_core::procedure::rfc2544::throughput::{Throughput, ThroughputConfig};
use linerate_core::procedure::rfc2544::{Action, Common, Event, Plan, Procedure};
use linerate_core::progress::Progress;
use linerate_core::result::{Envelope, Flag};
use linerate_core::rfc2544::{
    assess, live_notes, sender_notes, sender_threads, xdp_count_notes, Config, ConfigError,
    Generator, IfaceChange, Rfc2544Json, Rfc2544Result, RxPath, SingleFrame, SizeReport, TestKind,
    TestTrace, GRO_FOR_LIVE_FRAMES, SCHEMA, VERSION,
};
use linerate_core::units::{format_bits_per_s, group_thousands};

use crate::dut::{Harness, HarnessConfig, HarnessError};
use crate::packet::PacketError;

pub use linerate_core::rfc2544::{GeneratorChoice, RxChoice};

/// Interface settings made for a test, by whoever owns the interfaces (the
/// bed): set for the run, restored after it.
pub trait IfaceSettings {
    /// Sets the `ethtool -K` `feature` of `iface` (in `netns`, `None`: the
    /// caller's namespace) to `on`. Returns whether it changed anything
    /// (false: it was so already). What it changed is restored by
    /// [`IfaceSettings::restore`] (and by the implementor on drop, panic and
    /// termination signals).
    fn set_offload(
        &mut self,
        netns: Option<&str>,
        iface: &str,
        feature: &str,
        on: bool,
    ) -> Result<bool, String>;

    /// Restores every setting changed so far.
    fn restore(&mut self) -> Result<(), String>;
}

/// No interface may be changed (library users, tests): every change is
/// refused, so generators that need one fall back or fail saying why.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoIfaceSettings;

impl IfaceSettings for NoIfaceSettings {
    fn set_offload(
        &mut self,
        _netns: Option<&str>,
        iface: &str,
        feature: &str,
        on: bool,
    ) -> Result<bool, String> {
        Err(format!(
            "not allowed to turn {feature} {} on {iface}",
            if on { "on" } else { "off" }
        ))
    }

    fn restore(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// Why a run failed (before or during the measurement).
#[derive(Debug, thiserror::Error)]
pub enum Rfc2544Error {
    /// The configuration cannot run.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The harness (sockets, namespaces, the path) failed.
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// No generator was given to try.
    #[error("no generator could start")]
    NoGenerator,
}

/// Runs the tests of `cfg`, reporting progress lines to `progress`, with
/// interface changes made through `settings` (restored before returning).
/// The result comes in its envelope, with its flags ([`assess`]).
pub fn run(
    cfg: &Config,
    progress: &mut dyn Progress,
    settings: &mut dyn IfaceSettings,
) -> Result<Rfc2544Json, Rfc2544Error> {
    cfg.validate()?;
    let t0 = crate::host::unix_now_ns();
    let out = run_inner(cfg, progress, settings);
    if let Err(why) = settings.restore() {
        progress.step(&format!("interface settings not restored: {why}"));
    }
    let result = out?;
    let mut flags = assess(&result);
    if crate::signal::interrupted() {
        let done = result.sizes.len();
        flags.insert(
            0,
            Flag::invalid(
                "incomplete",
                format!(
                    "interrupted by a termination signal: the results measured so far ({done} of {} frame sizes, the last one possibly cut short)",
                    cfg.sizes.len()
                ),
            )
            .with("frame_sizes_done", done as f64),
        );
    }
    Ok(Envelope::new(SCHEMA, VERSION, result)
        .started(t0)
        .on(crate::host::facts())
        .flagged(flags))
}

/// CPUs this process may run on (1 when unknown).
fn cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
}

fn harness_config(cfg: &Config, path: Generator, rx_path: RxPath) -> HarnessConfig {
    HarnessConfig {
        sender_threads: sender_threads(path, cfg.sender_threads, cpus()) as usize,
        tx: cfg.tx.clone(),
        rx: cfg.rx.clone(),
        qdisc_bypass: cfg.qdisc_bypass,
        path,
        rx_path,
        src_ip: cfg.src_ip,
        dst_ip: cfg.dst_ip,
        dst_mac: cfg.dst_mac,
    }
}

/// Starts the harness with `path`, making the interface changes it needs
/// (recorded in `changes`), and sends the learning frames. The error says
/// whether another generator may work.
fn start_warm(
    cfg: &Config,
    path: Generator,
    rx_path: RxPath,
    settings: &mut dyn IfaceSettings,
    changes: &mut Vec<IfaceChange>,
) -> Result<(Harness, Duration), (HarnessError, bool)> {
    if let (Generator::XdpLive, Some(peer)) = (path, &cfg.tx_peer) {
        // veth ndo_xdp_xmit needs NAPI on the peer, or frames vanish.
        match settings.set_offload(peer.netns.as_deref(), &peer.iface, "gro", true) {
            Ok(true) => changes.push(IfaceChange {
                end: peer.clone(),
                feature: "gro".into(),
                on: true,
                why: GRO_FOR_LIVE_FRAMES.into(),
            }),
            Ok(false) => {}
            Err(why) => {
                return Err((
                    HarnessError::Generator {
                        iface: peer.iface.clone(),
                        why: format!("XDP live frames need NAPI on the veth peer: {why}"),
                    },
                    true,
                ))
            }
        }
    }
    let mut h = Harness::start(harness_config(cfg, path, rx_path)).map_err(|e| (e, true))?;
    for &s in &cfg.sizes {
        h.template(s).map_err(|e| (e, false))?;
    }
    let first = cfg.sizes.first().copied().unwrap_or(64);
    match h.warm_up(first, Duration::from_secs(5)) {
        Ok(took) => Ok((h, took)),
        // The generator itself failed (e.g. live frames vanish): another
        // generator may work.
        Err(e @ HarnessError::Generator { .. }) => Err((e, true)),
        Err(e) => Err((e, false)),
    }
}

fn run_inner(
    cfg: &Config,
    progress: &mut dyn Progress,
    settings: &mut dyn IfaceSettings,
) -> Result<Rfc2544Result, Rfc2544Error> {
    let candidates = cfg.generator.candidates();
    let rx_candidates = cfg.rx_path.candidates();
    let mut reasons: Vec<String> = Vec::new();
    let mut rx_reasons: Vec<String> = Vec::new();
    let mut changes = Vec::new();
    let mut started = None;
    'rx: for (ri, &rx_path) in rx_candidates.iter().enumerate() {
        reasons.clear();
        for (i, &path) in candidates.iter().enumerate() {
            match start_warm(cfg, path, rx_path, settings, &mut changes) {
                Ok((h, took)) => {
                    started = Some((h, took, path));
                    break 'rx;
                }
                Err((e, retry)) => {
                    if let Err(why) = settings.restore() {
                        progress.step(&format!("interface settings not restored: {why}"));
                    }
                    changes.clear();
                    // The receive path failed: another generator does not
                    // help, another receive path may.
                    let rx_failed = matches!(
                        e,
                        HarnessError::Packet(PacketError::XdpCount { .. })
                            | HarnessError::Counter { .. }
                    );
                    if rx_failed && ri + 1 < rx_candidates.len() {
                        let e = linerate_core::error::chain(&e);
                        progress.step(&format!(
                            "receiver auto: {} not used ({e}); trying {}",
                            rx_path.name(),
                            rx_candidates[ri + 1].name()
                        ));
                        rx_reasons.push(format!("{}: {e}", rx_path.name()));
                        continue 'rx;
                    }
                    if !(retry && i + 1 < candidates.len()) {
                        return Err(e.into());
                    }
                    let e = linerate_core::error::chain(&e);
                    progress.step(&format!(
                        "generator auto: {} not used ({e}); trying {}",
                        path.name(),
                        candidates[i + 1].name()
                    ));
                    reasons.push(format!("{}: {e}", path.name()));
                }
            }
        }
    }
    let (mut harness, took, path) = started.ok_or(Rfc2544Error::NoGenerator)?;
    let threads = harness.sender_threads();
    progress.step(&format!(
        "linerate rfc2544: {} ({}) → {} ({}), generator {}{}{}, receiver {}",
        cfg.tx.iface,
        cfg.tx.netns_label(),
        cfg.rx.iface,
        cfg.rx.netns_label(),
        path.name(),
        if threads > 1 {
            format!(" × {threads} threads")
        } else {
            String::new()
        },
        if cfg.qdisc_bypass {
            " + PACKET_QDISC_BYPASS"
        } else {
            ""
        },
        harness.rx_path().name()
    ));
    progress.step(&format!(
        "learning frames (RFC 2544 section 23 A): test frames arrive after {:.0} ms",
        took.as_secs_f64() * 1e3
    ));
    let mut sizes = Vec::new();
    let mut counted_by_device = None;
    let load = crate::host::LoadSampler::start();
    for &s in &cfg.sizes {
        if crate::signal::interrupted() {
            break;
        }
        let (r, by_device) = run_size(cfg, &mut harness, s, progress)?;
        counted_by_device = Some(by_device);
        sizes.push(r);
    }
    let live = path == Generator::XdpLive;
    let generator_notes = if live {
        live_notes(counted_by_device, &changes)
    } else {
        sender_notes(threads)
    };
    let rx_user_space_stamps = harness.rx_user_stamps;
    let receiver = harness.rx_path();
    let mut receiver_notes = Vec::new();
    if receiver == RxPath::XdpCount {
        receiver_notes = xdp_count_notes();
        if harness.rx_sample_drops > 0 {
            receiver_notes.push(format!(
                "the sampling socket dropped {} sampled frame(s): fewer per-frame checks, the count has them",
                group_thousands(harness.rx_sample_drops)
            ));
        }
    }
    drop(harness);
    Ok(Rfc2544Result {
        link_emulation: None,
        link_bits_per_s: cfg.link.bps(),
        generator: path,
        sender_threads: threads,
        qdisc_bypass: cfg.qdisc_bypass,
        trial_s: cfg.trial.as_secs_f64(),
        resolution_pct: cfg.resolution_pct,
        loss_tolerance_pct: cfg.loss_tolerance_pct,
        latency_clock: path.latency_clock().to_string(),
        ip_version: cfg.ip_version(),
        generator_fallback: (!reasons.is_empty()).then(|| reasons.join("; ")),
        generator_notes,
        rx_user_space_stamps,
        receiver,
        receiver_fallback: (!rx_reasons.is_empty()).then(|| rx_reasons.join("; ")),
        receiver_notes,
        sent_from_device_counter: if live { counted_by_device } else { None },
        iface_changes: changes,
        sizes,
        host_load: load.finish(),
        spread: Vec::new(),
    })
}

/// Drives one procedure with the harness, one progress line per trial.
fn drive<P: Plan>(
    harness: &mut Harness,
    proc_: &mut Procedure<P>,
    drain: Duration,
    label: &str,
    progress: &mut dyn Progress,
) -> Result<(), HarnessError> {
    let epoch = Instant::now();
    loop {
        if crate::signal::interrupted() {
            // What was measured so far stays; the caller flags it.
            return Ok(());
        }
        if let Some(Action::Trial(spec)) = proc_.poll_action() {
            let asked = format!(
                "  {label}: {} frames at {} fps ... ",
                group_thousands(spec.frames),
                group_thousands(spec.fps.round() as u64)
            );
            let (o, rep) = harness.trial(&spec, drain)?;
            proc_.handle(epoch.elapsed(), Event::TrialDone(o));
            if let Some(t) = proc_.trace().last() {
                progress.step(&format!(
                    "{asked}offered {} fps (catch-up burst {}), sent {}, received {}, loss {:.3} %{}{} → {:?}  [{}]",
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
                ));
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

/// Runs every test of `cfg` for `size`-byte frames. Also returns whether
/// sent frames came from the device's counter.
fn run_size(
    cfg: &Config,
    harness: &mut Harness,
    size: u32,
    progress: &mut dyn Progress,
) -> Result<(SizeReport, bool), Rfc2544Error> {
    let line = cfg.line_rate_fps(size)?;
    progress.step(&format!(
        "[{size} B] line rate {} fps at {}",
        group_thousands(line.floor() as u64),
        format_bits_per_s(cfg.link.bps_f64())
    ));
    let ceiling = harness.ceiling(size, cfg.ceiling_time)?;
    progress.step(&format!(
        "  generator ceiling: {} fps ({} frames in {:.2} s, ENOBUFS {})",
        group_thousands(ceiling.offered_fps.round() as u64),
        group_thousands(ceiling.sent_frames),
        ceiling.elapsed.as_secs_f64(),
        ceiling.enobufs
    ));
    // Let queues (qdisc, DUT) empty after the flood.
    std::thread::sleep(cfg.drain);

    let mut common = Common::new(size, line);
    common.trial = cfg.trial;
    common.settle = cfg.settle;
    common.invalid_retries = cfg.retries;
    let mut report = SizeReport::new(size, line, Some(ceiling.offered_fps));
    for &test in &cfg.tests {
        let label = test.label();
        let steps = match test {
            TestKind::Throughput => {
                let tc = ThroughputConfig {
                    resolution: cfg.resolution_pct / 100.0,
                    loss_tolerance: cfg.loss_tolerance_pct / 100.0,
                    repeats: cfg.repeats,
                    generator_ceiling_fps: Some(ceiling.offered_fps),
                };
                let mut p = Procedure::new(common, Throughput::new(tc));
                drive(harness, &mut p, cfg.drain, label, progress)?;
                report.throughput = Some(p.output());
                p.trace().to_vec()
            }
            TestKind::Latency => {
                let rate = report.throughput_fps().unwrap_or(line);
                if report.throughput.is_none() {
                    report.latency_at_line_rate = true;
                    progress.step("  latency: no throughput test run, so at line rate (RFC 2544 section 26.2 asks for the throughput rate)");
                }
                let mut p = Procedure::new(common, Latency::new(rate, cfg.latency_trials));
                drive(harness, &mut p, cfg.drain, label, progress)?;
                report.latency = Some(p.output());
                p.trace().to_vec()
            }
            TestKind::Loss => {
                let mut p = Procedure::new(common, FrameLoss::new(cfg.loss_step_pct));
                drive(harness, &mut p, cfg.drain, label, progress)?;
                report.loss = Some(p.output());
                p.trace().to_vec()
            }
            TestKind::Single => {
                let rate = cfg.single_rate_fps.clamp(1.0, line);
                let mut p = Procedure::new(common, Latency::new(rate, 1));
                drive(harness, &mut p, cfg.drain, label, progress)?;
                report.single_frame =
                    Some(SingleFrame::new(size, p.output(), report.throughput_fps()));
                p.trace().to_vec()
            }
            TestKind::B2b => {
                let bc = BackToBackConfig::new(line, cfg.b2b_max.as_secs_f64(), cfg.b2b_repeats);
                let mut p = Procedure::new(common, BackToBack::new(bc));
                drive(harness, &mut p, cfg.drain, label, progress)?;
                report.back_to_back = Some(p.output());
                p.trace().to_vec()
            }
        };
        report.trace.push(TestTrace::new(test, steps));
    }
    report.derive();
    Ok((report, ceiling.sent_from_device_counter))
}
