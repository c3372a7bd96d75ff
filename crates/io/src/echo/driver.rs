//! `linerate latency` as one call: [`run`] takes a validated
//! [`Config`] and measures each of its configurations where the config
//! says (against `linerate server`, with a reflector in this process or on
//! a testbed's host, or the client alone against a plain echo server or a
//! kernel), then assesses the result.

use linerate_core::latency::{
    assess, Config, LatencyReport, Responder, Setup, Variant, SCHEMA, SCHEMA_VERSION,
};
use linerate_core::latency::{LatencyParams, LatencyRun};
use linerate_core::progress::Progress;
use linerate_core::result::Envelope;

use super::{
    run_client_in, run_remote, run_with_local_reflector, send_to_kernel_rx_summary, summarize,
    ClientConfig, EchoIoError, Placement, ReflectorConfig,
};
use crate::stamps;

/// Where the stamps of a latency result come from.
pub const TIMESTAMP_SOURCE: &str =
    "software (SO_TIMESTAMPING: RX_SOFTWARE, TX_SCHED, TX_SOFTWARE; TX_ACK on TCP)";

/// Where they come from when the kernel was asked for none.
pub const APP_TIMESTAMP_SOURCE: &str =
    "application only (clock_gettime around send and receive; no kernel stamps)";

/// Runs every configuration of `cfg`, one row each, and returns the result
/// in its envelope, flagged ([`assess`]). Progress: a step per
/// configuration, `done` at the end.
pub fn run(
    cfg: &Config,
    progress: &mut dyn Progress,
) -> Result<Envelope<LatencyReport>, EchoIoError> {
    run_each(cfg, progress, &mut |_| Ok(()))
}

/// [`run`], calling `prepare` with each configuration before it runs (the
/// binary sets a bed's settings for it there); an error from `prepare`
/// ends the run.
pub fn run_each(
    cfg: &Config,
    progress: &mut dyn Progress,
    prepare: &mut dyn FnMut(&Variant) -> Result<(), EchoIoError>,
) -> Result<Envelope<LatencyReport>, EchoIoError> {
    let t0 = crate::host::unix_now_ns();
    let place = Placement {
        reflector_ns: cfg.bed.as_ref().and_then(|b| b.responder_netns.clone()),
        client_ns: cfg.bed.as_ref().and_then(|b| b.client_netns.clone()),
    };
    let hardware = {
        let ip = cfg.target.ip();
        // Probe the device in the client's namespace: that is where it lives.
        crate::netns::spawn_in(place.client_ns.as_deref(), "lr-probe", move || {
            hardware_stamps(ip)
        })
        .ok()
        .and_then(|h| h.join().ok())
        .and_then(Result::ok)
        .unwrap_or_else(|| "unknown (could not probe the client's namespace)".into())
    };
    let mut same_clock = cfg.same_clock_expected();
    let mut runs = Vec::with_capacity(cfg.variants.len());
    let (n, rounds) = (cfg.variants.len(), cfg.repeat.max(1));
    let load = crate::host::LoadSampler::start();
    // With repeats, round after round of every configuration: a drift of
    // the host over time spreads over all of them alike.
    for round in 1..=rounds {
        for (i, v) in cfg.variants.iter().enumerate() {
            progress.step(&match rounds {
                1 => format!("configuration {}/{n}", i + 1),
                _ => format!("configuration {}/{n}, run {round}/{rounds}", i + 1),
            });
            if let Err(e) = prepare(v) {
                progress.done();
                return Err(e);
            }
            let (run, clock) = run_one(cfg, v, &place);
            let mut run = match run {
                Ok(r) => r,
                Err(e) => {
                    progress.done();
                    return Err(e);
                }
            };
            run.repeat = (rounds > 1).then_some(round);
            run.link_bits_per_s = linerate_core::sweep::link_of(&v.bed).map(|l| l.bps());
            same_clock &= clock;
            runs.push(run);
        }
    }
    progress.done();
    let host_load = load.finish();
    let mut report = LatencyReport {
        link_emulation: None,
        target: cfg.target_label(),
        protocol: cfg.protocol,
        responder: cfg.responder,
        clock: stamps::CLOCK_NAME.into(),
        timestamp_source: if cfg.kernel_stamps {
            TIMESTAMP_SOURCE
        } else {
            APP_TIMESTAMP_SOURCE
        }
        .into(),
        hardware_timestamps: hardware,
        same_clock,
        kernel_stamps: cfg.kernel_stamps,
        ipv6: cfg.target.is_ipv6(),
        link_bits_per_s: cfg.bed.as_ref().and_then(|b| b.link).map(|l| l.bps()),
        runs,
        host_load,
        spread: Vec::new(),
        load: None,
    };
    report.derive();
    let flags = assess(&report);
    Ok(Envelope::new(SCHEMA, SCHEMA_VERSION, report)
        .started(t0)
        .on(crate::host::facts())
        .flagged(flags))
}

/// One configuration: its row, and whether both ends shared a clock.
fn run_one(
    cfg: &Config,
    v: &Variant,
    place: &Placement,
) -> (Result<LatencyRun, EchoIoError>, bool) {
    let size = usize::try_from(v.size_bytes).unwrap_or(usize::MAX);
    let client = ClientConfig {
        target: cfg.target,
        session: crate::token::session_token(),
        size,
        schedule: cfg.schedule,
        spin: v.spin,
        no_udp_checksum: v.no_udp_checksum,
        plain_echo: cfg.responder != Responder::Reflector,
        kernel_stamps: cfg.kernel_stamps,
        stamp_every: cfg.stamp_every,
    };
    let settings = v.settings.clone();
    let row = |mut r: LatencyRun| {
        r.no_udp_checksum = v.no_udp_checksum;
        r
    };
    match cfg.setup {
        Setup::LocalReflector => {
            let mut rc = ReflectorConfig::new(client.session);
            rc.mode = v.reflector_mode;
            rc.copy = v.reflector_copy;
            rc.no_udp_checksum = v.no_udp_checksum;
            rc.kernel_stamps = cfg.kernel_stamps;
            let r = run_with_local_reflector(cfg.protocol, cfg.target, rc, &client, place).map(
                |(run, report)| row(summarize(settings, v.size_bytes, &run, Some(&report), true)),
            );
            (r, true)
        }
        Setup::Server => {
            let params = LatencyParams {
                protocol: cfg.protocol,
                size_bytes: v.size_bytes,
                mode: v.reflector_mode,
                copy: v.reflector_copy,
                no_udp_checksum: v.no_udp_checksum,
                duration_ns: cfg.expected_duration_ns(),
                kernel_stamps: cfg.kernel_stamps,
            };
            match run_remote(cfg.target, &params, &client) {
                Ok(r) => {
                    let mut out = row(summarize(
                        settings,
                        v.size_bytes,
                        &r.client,
                        r.reflector.as_ref(),
                        r.same_clock,
                    ));
                    out.incomplete = r.incomplete;
                    (Ok(out), r.same_clock)
                }
                Err(e) => (Err(e), false),
            }
        }
        Setup::ClientOnly => {
            let responder = responder_trace(cfg, v, place);
            let r = run_client_in(cfg.protocol, &client, place.client_ns.as_deref()).map(|run| {
                let mut r = row(summarize(
                    settings,
                    v.size_bytes,
                    &run,
                    None,
                    cfg.bed.is_some(),
                ));
                r.responder_kernel = responder.and_then(|t| t.finish());
                // No responder stamps: the span client-only tools (ping)
                // report stands beside the RTT.
                r.rtt_send_to_kernel_rx = send_to_kernel_rx_summary(&run);
                r
            });
            (r, true)
        }
    }
}

/// Traces the responder's kernel when it answers (ICMP echo, IPv4, on a
/// bed's host b); None otherwise, or when tracing is not possible (its
/// stages then stay inside "network", as without a bed).
fn responder_trace(
    cfg: &Config,
    v: &Variant,
    place: &Placement,
) -> Option<crate::journey::responder::ResponderTrace> {
    let ns = place.reflector_ns.as_deref()?;
    if cfg.responder != Responder::Kernel || cfg.target.is_ipv6() {
        return None;
    }
    // ICMP data + 8 bytes of ICMP header + 20 of IPv4.
    let ip_len = u32::try_from(v.size_bytes).ok()? + 28;
    crate::journey::responder::trace_responder(ns, cfg.target.ip(), ip_len).ok()
}

/// What the device carrying traffic to `ip` (from this thread's namespace)
/// can stamp in hardware, as a sentence.
pub fn hardware_stamps(ip: std::net::IpAddr) -> String {
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

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use linerate_core::latency::{EchoProtocol, Peer, Request};
    use linerate_core::progress::Lines;

    use super::*;

    #[test]
    fn a_loopback_run_in_process_is_enveloped_and_flagged() {
        let mut req = Request::new(
            Peer::InProcess(IpAddr::from([127, 0, 0, 1])),
            EchoProtocol::Udp,
        );
        req.count = Some(40);
        req.sweep = vec!["reflector-copy=off,on".into()];
        let cfg = Config::new(&req).unwrap();
        let mut p = Lines::default();
        let env = run(&cfg, &mut p).unwrap();
        assert_eq!(p.0, ["configuration 1/2", "configuration 2/2"]);
        assert_eq!((env.schema.as_str(), env.version), (SCHEMA, SCHEMA_VERSION));
        assert!(env.started_at.is_some() && env.host.is_some());
        let r = &env.result;
        assert_eq!(r.runs.len(), 2);
        assert!(r.same_clock && r.kernel_stamps && !r.ipv6);
        assert_eq!(r.runs[1].label(), "reflector-copy=on");
        assert!(r.runs.iter().all(|x| x.counts.received == 40));
        // 10 stamped exchanges of 40: too few for percentiles (and a busy
        // test host may be said to be noisy).
        let flags: Vec<_> = env
            .flags
            .iter()
            .filter(|f| f.code != linerate_core::latency::codes::NOISY_HOST)
            .collect();
        assert!(flags
            .iter()
            .all(|f| f.code == linerate_core::latency::codes::FEW_STAMPED_EXCHANGES));
        assert_eq!(flags.len(), 2);
        assert_eq!(env.exit_code(), 0);
        assert_eq!(r.timestamp_source, TIMESTAMP_SOURCE);
        assert!(r.host_load.is_some(), "/proc is readable here");
        assert!(r.runs.iter().all(|x| x.repeat.is_none()) && r.spread.is_empty());
    }

    #[test]
    fn repeats_run_round_after_round_and_are_summarised() {
        let mut req = Request::new(
            Peer::InProcess(IpAddr::from([127, 0, 0, 1])),
            EchoProtocol::Udp,
        );
        req.count = Some(20);
        req.repeat = 2;
        req.sweep = vec!["spin=off,on".into()];
        let cfg = Config::new(&req).unwrap();
        let mut p = Lines::default();
        let env = run(&cfg, &mut p).unwrap();
        assert_eq!(
            p.0,
            [
                "configuration 1/2, run 1/2",
                "configuration 2/2, run 1/2",
                "configuration 1/2, run 2/2",
                "configuration 2/2, run 2/2"
            ]
        );
        let r = &env.result;
        let labels: Vec<String> = r.runs.iter().map(LatencyRun::label).collect();
        assert_eq!(
            labels,
            [
                "spin=off (run 1)",
                "spin=on (run 1)",
                "spin=off (run 2)",
                "spin=on (run 2)"
            ]
        );
        assert_eq!(r.spread.len(), 2);
        assert!(r.spread.iter().all(|s| s.p50_ns.unwrap().runs == 2));
        // The timeout was sized from the loopback RTTs (10 × p99), not
        // left at the initial second.
        let t = r.runs[0].timeout_ns.unwrap();
        assert!((10_000_000..1_000_000_000).contains(&t), "{t}");
    }

    /// Without kernel stamps the document says the stamps are the
    /// application's, not SO_TIMESTAMPING's.
    #[test]
    fn without_kernel_stamps_the_source_is_the_application() {
        let mut req = Request::new(
            Peer::InProcess(IpAddr::from([127, 0, 0, 1])),
            EchoProtocol::Udp,
        );
        req.count = Some(20);
        req.kernel_stamps = false;
        let cfg = Config::new(&req).unwrap();
        let env = run(&cfg, &mut linerate_core::progress::Silent).unwrap();
        assert!(!env.result.kernel_stamps);
        assert_eq!(env.result.timestamp_source, APP_TIMESTAMP_SOURCE);
    }
}
