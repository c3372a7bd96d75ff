//! What a latency result may not be trusted for: [`assess`] turns a
//! [`LatencyReport`] into [`Flag`]s, from the figures the report carries
//! alone (so a stored result can be assessed again).

use crate::result::Flag;

use super::{LatencyReport, LatencyRun, Responder, Stage};

/// The flag codes [`assess`] raises (stable: programs match on them).
pub mod codes {
    /// A run's result lacks part of its data (the server's stamps never
    /// came): invalid.
    pub const INCOMPLETE: &str = "incomplete";
    /// A run got no reply at all: nothing was measured; invalid.
    pub const NO_REPLIES: &str = "no_replies";
    /// The stages rest on fewer than [`super::MIN_STAMPED`] stamped
    /// exchanges.
    pub const FEW_STAMPED_EXCHANGES: &str = "few_stamped_exchanges";
    /// Some requests got no reply in time.
    pub const LOST_REPLIES: &str = "lost_replies";
    /// More than 1 % of the stamped requests lack a kernel transmit stamp.
    pub const MISSING_TX_STAMPS: &str = "missing_tx_stamps";
    /// More than 1 % of the stamped replies lack a kernel receive stamp.
    pub const MISSING_RX_STAMPS: &str = "missing_rx_stamps";
    /// More than 1 % of the stamped exchanges lack the responder's receive
    /// stamp.
    pub const MISSING_RESPONDER_RX_STAMPS: &str = "missing_responder_rx_stamps";
    /// Answers beyond the client's recording limit: counted, not dissected.
    pub const UNRECORDED_ANSWERS: &str = "unrecorded_answers";
    /// Intervals that came out negative (stamps out of order), left out.
    pub const NEGATIVE_INTERVALS: &str = "negative_intervals";
    /// SO_NO_CHECK asked for over IPv6, where it has no effect.
    pub const NO_UDP_CHECKSUM_IPV6: &str = "no_udp_checksum_ipv6";
    /// A round trip shorter than the wire time the line-rate model gives
    /// for the link and frame sizes: physically impossible; invalid.
    pub const BELOW_WIRE_TIME: &str = "below_wire_time";
    /// Other work competed for the CPUs during the test (a warning).
    pub const NOISY_HOST: &str = crate::hostload::NOISY_HOST;

    /// Every code, for documentation and tests.
    pub const ALL: [&str; 12] = [
        BELOW_WIRE_TIME,
        NOISY_HOST,
        INCOMPLETE,
        NO_REPLIES,
        FEW_STAMPED_EXCHANGES,
        LOST_REPLIES,
        MISSING_TX_STAMPS,
        MISSING_RX_STAMPS,
        MISSING_RESPONDER_RX_STAMPS,
        UNRECORDED_ANSWERS,
        NEGATIVE_INTERVALS,
        NO_UDP_CHECKSUM_IPV6,
    ];
}

/// Fewer stamped exchanges than this make stage percentiles shaky.
pub const MIN_STAMPED: u64 = 100;

/// The flags a latency result earns: [`codes::INCOMPLETE`] and
/// [`codes::NO_REPLIES`] are invalid, stamp and loss conditions warnings,
/// the rest notes. Each run's flags name its configuration.
pub fn assess(report: &LatencyReport) -> Vec<Flag> {
    let mut flags = Vec::new();
    if report.ipv6 && report.runs.iter().any(|r| r.no_udp_checksum) {
        flags.push(Flag::info(
            codes::NO_UDP_CHECKSUM_IPV6,
            "SO_NO_CHECK has no effect over IPv6: UDP checksums are mandatory there (RFC 8200 §8.1)",
        ));
    }
    let reflector = report.responder == Responder::Reflector;
    for run in &report.runs {
        assess_run(run, report.kernel_stamps, reflector, &mut flags);
    }
    flags.extend(report.host_load.as_ref().and_then(crate::hostload::assess));
    flags.extend(super::load::assess(report));
    flags
}

/// [`codes::BELOW_WIRE_TIME`]: the fastest round trip of `run` (stamped or
/// not) beat the model's wire time.
fn below_wire_time(run: &LatencyRun, label: &str) -> Option<Flag> {
    let wire = run.wire_rtt_ns?;
    let fastest = [run.rtt_unstamped.as_ref(), run.stage(Stage::Rtt)]
        .into_iter()
        .flatten()
        .filter(|s| s.count > 0)
        .map(|s| s.min_ns)
        .min()?;
    ((fastest as f64) < wire).then(|| {
        Flag::invalid(
            codes::BELOW_WIRE_TIME,
            format!(
                "{label}: a round trip took {:.2} µs, less than the {:.2} µs its two frames need on the wire at the link's rate: physically impossible, so the link does not delay frames as a cable would (a rate-only shaper such as tbf) or is faster than declared",
                fastest as f64 / 1e3,
                wire / 1e3
            ),
        )
        .with("fastest_rtt_ns", fastest)
        .with("wire_rtt_ns", wire)
    })
}

/// Whether `part` is more than 1 % of `of`.
fn over_one_pct(part: u64, of: u64) -> bool {
    part.saturating_mul(100) > of
}

fn assess_run(run: &LatencyRun, kernel_stamps: bool, reflector: bool, flags: &mut Vec<Flag>) {
    let label = run.label();
    let flag = |f: Flag| f.with("configuration", label.clone());
    if let Some(why) = &run.incomplete {
        flags.push(flag(Flag::invalid(
            codes::INCOMPLETE,
            format!("{label}: incomplete: {why}"),
        )));
    }
    if let Some(f) = below_wire_time(run, &label) {
        flags.push(flag(f));
    }
    if run.counts.received == 0 {
        flags.push(flag(
            Flag::invalid(
                codes::NO_REPLIES,
                format!(
                    "{label}: no replies: nothing was measured ({} requests sent)",
                    run.counts.sent
                ),
            )
            .with("sent_requests", run.counts.sent),
        ));
    }
    // Stamps are owed only by the dissected (stamped) exchanges: the
    // denominator of every stamp flag, quoted as it is (0 when none was).
    let n = run.stamped_exchanges();
    if kernel_stamps && run.stamp_every > 1 && n < MIN_STAMPED {
        flags.push(flag(
            Flag::warning(
                codes::FEW_STAMPED_EXCHANGES,
                format!(
                    "{label}: the stages rest on only {n} stamped exchanges (1 in {}); run longer or stamp every exchange",
                    run.stamp_every
                ),
            )
            .with("stamped_exchanges", n)
            .with("stamp_every", run.stamp_every),
        ));
    }
    if run.counts.lost > 0 {
        flags.push(flag(
            Flag::warning(
                codes::LOST_REPLIES,
                format!(
                    "{label}: {} of {} requests got no reply in time",
                    run.counts.lost, run.counts.sent
                ),
            )
            .with("lost_requests", run.counts.lost)
            .with("sent_requests", run.counts.sent),
        ));
    }
    if kernel_stamps && over_one_pct(run.missing_tx_stamps, n) {
        flags.push(flag(
            Flag::warning(
                codes::MISSING_TX_STAMPS,
                format!(
                    "{label}: {} of {n} requests have no kernel transmit stamp; their tx stages are left out",
                    run.missing_tx_stamps
                ),
            )
            .with("missing_stamps", run.missing_tx_stamps)
            .with("stamped_exchanges", n),
        ));
    }
    if kernel_stamps && over_one_pct(run.missing_rx_stamps, n) {
        flags.push(flag(
            Flag::warning(
                codes::MISSING_RX_STAMPS,
                format!(
                    "{label}: {} of {n} replies have no kernel receive stamp; their rx stages are left out",
                    run.missing_rx_stamps
                ),
            )
            .with("missing_stamps", run.missing_rx_stamps)
            .with("stamped_exchanges", n),
        ));
    }
    // The reflector reads a request with its receive stamp only when the
    // request before announced it (lost or reordered requests mislead it).
    let resp_rx = run.stage(Stage::ResponderRx).map_or(0, |s| s.count);
    let without = n - resp_rx.min(n);
    if kernel_stamps && reflector && over_one_pct(without, n) {
        flags.push(flag(
            Flag::warning(
                codes::MISSING_RESPONDER_RX_STAMPS,
                format!(
                    "{label}: {without} of {n} stamped exchanges have no responder receive stamp; their resp rx and network stages are left out"
                ),
            )
            .with("missing_stamps", without)
            .with("stamped_exchanges", n),
        ));
    }
    if run.unrecorded > 0 {
        flags.push(flag(
            Flag::info(
                codes::UNRECORDED_ANSWERS,
                format!(
                    "{label}: the stages cover the first {} answers; {} later ones are counted, not dissected (memory bound)",
                    run.counts.received.saturating_sub(run.unrecorded),
                    run.unrecorded
                ),
            )
            .with("unrecorded_answers", run.unrecorded),
        ));
    }
    if run.negative_intervals > 0 {
        flags.push(flag(
            Flag::warning(
                codes::NEGATIVE_INTERVALS,
                format!(
                    "{label}: {} intervals came out negative (stamps out of order) and were left out",
                    run.negative_intervals
                ),
            )
            .with("negative_intervals", run.negative_intervals),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::{
        dissect, ClientStamps, EchoProtocol, ProbeCounts, ResponderStamps, StageStats,
    };
    use crate::result::{exit_code, Severity};

    /// A run of 100 stamped exchanges of 400, `with_rx` of which carry the
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

    fn report(runs: Vec<LatencyRun>, responder: Responder) -> LatencyReport {
        LatencyReport {
            link_emulation: None,
            target: "127.0.0.1".into(),
            protocol: EchoProtocol::Udp,
            responder,
            clock: "CLOCK_REALTIME".into(),
            timestamp_source: "software".into(),
            hardware_timestamps: "none".into(),
            same_clock: true,
            kernel_stamps: true,
            ipv6: false,
            link_bits_per_s: None,
            runs,
            host_load: None,
            spread: Vec::new(),
            load: None,
        }
    }

    fn codes_of(flags: &[Flag]) -> Vec<&str> {
        flags.iter().map(|f| f.code.as_str()).collect()
    }

    #[test]
    fn a_clean_run_has_no_flags() {
        assert!(assess(&report(vec![run(100)], Responder::Reflector)).is_empty());
    }

    #[test]
    fn missing_responder_receive_stamps_are_said() {
        let f = assess(&report(vec![run(90)], Responder::Reflector));
        assert_eq!(codes_of(&f), [codes::MISSING_RESPONDER_RX_STAMPS]);
        assert!(
            f[0].message
                .contains("10 of 100 stamped exchanges have no responder receive stamp"),
            "{f:?}"
        );
        assert_eq!(f[0].evidence["missing_stamps"], 10);
        assert_eq!(f[0].evidence["configuration"], "default");
        // Not a reflector (plain echo, ICMP): no responder stages at all.
        assert!(assess(&report(vec![run(0)], Responder::PlainEcho)).is_empty());
    }

    #[test]
    fn incomplete_and_no_replies_are_invalid_the_rest_not() {
        let mut silent = run(100);
        silent.counts.received = 0;
        silent.counts.lost = 400;
        let mut cut = run(100);
        cut.incomplete = Some("the server's stamps are missing".into());
        cut.settings = vec![("spin".into(), "on".into())];
        let f = assess(&report(vec![silent, cut], Responder::Reflector));
        assert_eq!(
            codes_of(&f),
            [codes::NO_REPLIES, codes::LOST_REPLIES, codes::INCOMPLETE]
        );
        assert!(f[0].message.contains("no replies"), "{f:?}");
        assert!(f[2].message.starts_with("spin=on: incomplete"), "{f:?}");
        assert_eq!(exit_code(&f), 1);
        assert_eq!(f[1].severity, Severity::Warning);
    }

    #[test]
    fn stamp_conditions_warn() {
        let mut r = run(100);
        r.missing_tx_stamps = 2;
        r.missing_rx_stamps = 1;
        r.negative_intervals = 3;
        r.unrecorded = 5;
        r.no_udp_checksum = true;
        let mut few = run(100);
        few.stages.iter_mut().for_each(|s| s.summary.count = 50);
        let mut rep = report(vec![r, few], Responder::Reflector);
        rep.ipv6 = true;
        let f = assess(&rep);
        assert_eq!(
            codes_of(&f),
            [
                codes::NO_UDP_CHECKSUM_IPV6,
                codes::MISSING_TX_STAMPS,
                codes::UNRECORDED_ANSWERS,
                codes::NEGATIVE_INTERVALS,
                codes::FEW_STAMPED_EXCHANGES,
            ]
        );
        assert_eq!(exit_code(&f), 0);
        for code in codes::ALL {
            assert!(crate::result::is_snake_case(code), "{code}");
        }
        // Without kernel stamps nothing is owed.
        rep.kernel_stamps = false;
        assert_eq!(
            codes_of(&assess(&rep)),
            [
                codes::NO_UDP_CHECKSUM_IPV6,
                codes::UNRECORDED_ANSWERS,
                codes::NEGATIVE_INTERVALS
            ]
        );
    }

    #[test]
    fn a_round_trip_faster_than_the_wire_is_impossible() {
        // The test run's fastest RTT is 10 µs; 64-byte UDP requests (110-byte
        // frames) on a 100 Mbit/s link need 2 × 10.4 µs on the wire.
        let mut rep = report(vec![run(100)], Responder::Reflector);
        rep.link_bits_per_s = Some(100_000_000);
        rep.derive();
        let f = assess(&rep);
        assert_eq!(codes_of(&f), [codes::BELOW_WIRE_TIME]);
        assert_eq!(f[0].severity, Severity::Invalid);
        assert_eq!(f[0].evidence["fastest_rtt_ns"], 10_000);
        assert_eq!(exit_code(&f), 1);
        // At 10 Gbit/s the wire needs 0.15 µs: possible.
        rep.link_bits_per_s = Some(10_000_000_000);
        rep.derive();
        assert!(assess(&rep).is_empty());
        // A sweep point's own link rate is the run's wire, not the report's.
        rep.runs[0].link_bits_per_s = Some(100_000_000);
        rep.derive();
        assert_eq!(codes_of(&assess(&rep)), [codes::BELOW_WIRE_TIME]);
    }

    #[test]
    fn a_noisy_host_is_flagged() {
        let mut rep = report(vec![run(100)], Responder::Reflector);
        rep.host_load = Some(crate::hostload::HostLoad {
            duration_ns: 1_000_000_000,
            samples: 5,
            cpu_pressure_some_pct: Some(30.0),
            cpu_pressure_full_pct: None,
            cpu_pressure_some_avg10_max: Some(25.0),
            other_runnable_mean: Some(1.2),
            other_runnable_max: Some(2),
            steal_pct: Some(0.0),
        });
        let f = assess(&rep);
        assert_eq!(codes_of(&f), [codes::NOISY_HOST]);
        assert_eq!(f[0].severity, Severity::Warning);
    }

    #[test]
    fn repeats_are_summarised_per_configuration() {
        let mut a = run(100);
        a.repeat = Some(1);
        let mut b = run(100);
        b.repeat = Some(2);
        b.stages.iter_mut().for_each(|s| s.summary.p50_ns *= 3);
        let mut c = run(100);
        c.settings = vec![("spin".into(), "on".into())];
        c.repeat = Some(1);
        let mut rep = report(vec![a, b, c], Responder::Reflector);
        rep.derive();
        assert_eq!(rep.spread.len(), 2);
        let s = rep.spread[0].p50_ns.unwrap();
        assert_eq!(s.runs, 2);
        assert_eq!((s.min, s.max), (10_000.0, 30_000.0));
        assert_eq!(s.median, 20_000.0);
        assert_eq!(rep.spread[1].label(), "spin=on");
        // No repeats: no spread.
        rep.runs.iter_mut().for_each(|r| r.repeat = None);
        rep.derive();
        assert!(rep.spread.is_empty());
    }

    /// A run with no stamped exchange quotes 0 of them (not 1): the
    /// denominator printed is the one counted.
    #[test]
    fn no_stamped_exchange_is_quoted_as_zero() {
        let mut r = run(100);
        r.stages.clear();
        let f = assess(&report(vec![r], Responder::Reflector));
        assert_eq!(codes_of(&f), [codes::FEW_STAMPED_EXCHANGES]);
        assert_eq!(f[0].evidence["stamped_exchanges"], 0);
        assert!(f[0].message.contains("only 0 stamped exchanges"), "{f:?}");
    }
}
