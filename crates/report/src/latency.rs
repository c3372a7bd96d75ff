//! `linerate latency`: the seeds' stage table and per-stage statistics.

use std::fmt::Write as _;

use linerate_core::latency::{LatencyReport, LatencyRun, Responder, Stage};
use linerate_core::units::group_thousands;

use crate::table::{Align, Table};

fn us(ns: f64) -> String {
    format!("{:.2}", ns / 1000.0)
}

/// The stages that carry data in any run, in table order.
fn present(report: &LatencyReport, skip: &[Stage]) -> Vec<Stage> {
    Stage::ALL
        .iter()
        .copied()
        .filter(|s| !skip.contains(s))
        .filter(|&s| report.runs.iter().any(|r| r.stage(s).is_some()))
        .collect()
}

/// Renders the whole report for a terminal.
pub fn to_table(report: &LatencyReport) -> String {
    let mut out = String::new();
    let responder = match report.responder {
        Responder::Reflector => "linerate reflector (returns its own stamps)",
        Responder::PlainEcho => "plain echo server (RFC 862): client-side stages only",
        Responder::Kernel => "the peer's kernel (ICMP echo): client-side stages only",
    };
    let _ = writeln!(
        out,
        "Response time to {} over {}; responder: {responder}",
        report.target,
        report.protocol.to_uppercase()
    );
    let _ = writeln!(
        out,
        "  clock: {}; stamps: {}; hardware stamps: {}",
        report.clock, report.timestamp_source, report.hardware_timestamps
    );
    let _ = writeln!(
        out,
        "  {}",
        if report.same_clock && report.responder == Responder::Reflector {
            "client and responder share one clock (one host): one-way delays are shown"
        } else if report.responder != Responder::Reflector {
            "the responder returns no stamps: its time is inside \"network\", no one-way delays"
        } else {
            "client and responder clocks differ or are unknown: every stage uses one clock, no one-way delays"
        }
    );
    out.push('\n');

    // The seeds' form: a row per configuration, a column per stage.
    let stages = present(
        report,
        &[Stage::Rtt, Stage::OneWayForward, Stage::OneWayReturn],
    );
    let mut cols: Vec<(String, Align)> = vec![("configuration".into(), Align::Left)];
    cols.extend(stages.iter().map(|s| (s.title().to_string(), Align::Right)));
    // With sampled stamps the stamped exchanges' RTT (which the stages add
    // up to) stands beside the RTT of the exchanges that stamped nothing.
    let sampled = report.runs.iter().any(|r| r.rtt_unstamped.is_some());
    if sampled {
        cols.push(("RTT stamped".to_string(), Align::Right));
    }
    cols.extend([
        ("RTT".to_string(), Align::Right),
        ("sent".to_string(), Align::Right),
        ("lost".to_string(), Align::Right),
    ]);
    let mut t = Table::new(cols);
    for run in &report.runs {
        let mut row = vec![run.label()];
        for &s in &stages {
            row.push(run.stage(s).map_or("-".into(), |x| us(x.p50_ns as f64)));
        }
        if sampled {
            row.push(
                run.stage(Stage::Rtt)
                    .map_or("-".into(), |x| us(x.p50_ns as f64)),
            );
        }
        row.push(run.rtt().map_or("-".into(), |x| us(x.p50_ns as f64)));
        row.push(group_thousands(run.counts.sent));
        row.push(group_thousands(run.counts.lost));
        t.row(row);
    }
    let _ = writeln!(out, "Median (p50) of each stage, µs:");
    out.push_str(&t.render(2));
    let _ = writeln!(
        out,
        "  (medians of stages need not add up to the median RTT; per exchange the stages add up exactly, and so do the means)"
    );
    if sampled {
        let _ = writeln!(
            out,
            "  (stages from the kernel-stamped sample, whose RTT is \"RTT stamped\"; \"RTT\" is that of the exchanges that asked for no stamp)"
        );
    }

    for run in &report.runs {
        out.push('\n');
        let _ = writeln!(
            out,
            "{}: {} B requests, {} sent, {} answered, {} lost{}",
            run.label(),
            run.size_bytes,
            group_thousands(run.counts.sent),
            group_thousands(run.counts.received),
            group_thousands(run.counts.lost),
            if run.counts.unexpected > 0 {
                format!(", {} unexpected replies", run.counts.unexpected)
            } else {
                String::new()
            }
        );
        let mut t = Table::new([
            ("stage (µs)", Align::Left),
            ("min", Align::Right),
            ("p50", Align::Right),
            ("p90", Align::Right),
            ("p99", Align::Right),
            ("p99.9", Align::Right),
            ("max", Align::Right),
            ("mean", Align::Right),
            ("stddev", Align::Right),
            ("n", Align::Right),
        ]);
        let unstamped = run.rtt_unstamped.as_ref().map(|x| ("RTT unstamped", x));
        let rows = run
            .stages
            .iter()
            .map(|s| (s.stage.title(), &s.summary))
            .chain(unstamped);
        for (title, x) in rows {
            t.row(vec![
                title.to_string(),
                us(x.min_ns as f64),
                us(x.p50_ns as f64),
                us(x.p90_ns as f64),
                us(x.p99_ns as f64),
                us(x.p999_ns as f64),
                us(x.max_ns as f64),
                us(x.mean_ns),
                us(x.stddev_ns),
                group_thousands(x.count),
            ]);
        }
        out.push_str(&t.render(2));
        if let (Some(cost), Some(plain)) = (run.stamping_cost_ns(), &run.rtt_unstamped) {
            let stamped = run.stage(Stage::Rtt).map_or(0, |x| x.count);
            let _ = writeln!(
                out,
                "  kernel stamps on 1 exchange in {} ({} stamped, {} not): the stages are the stamped ones'; \
                 stamping added {} µs to the median RTT",
                run.stamp_every,
                group_thousands(stamped),
                group_thousands(plain.count),
                us(cost as f64)
            );
        }
    }
    if !report.warnings.is_empty() {
        out.push('\n');
        for w in &report.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
    }
    out.push('\n');
    for s in present(report, &[]) {
        let _ = writeln!(out, "  {:<10} {}", s.title(), s.definition());
    }
    out
}

/// The table for one run only (used while sweeping).
pub fn run_line(run: &LatencyRun) -> String {
    format!(
        "{}: RTT p50 {} µs, {} of {} answered",
        run.label(),
        run.rtt().map_or("-".into(), |x| us(x.p50_ns as f64)),
        run.counts.received,
        run.counts.sent
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_core::latency::{dissect, ClientStamps, ProbeCounts, ResponderStamps, StageStats};

    fn report() -> LatencyReport {
        let c = ClientStamps {
            app_send_ns: 0,
            tx_sched_ns: Some(3_000),
            tx_soft_ns: Some(4_000),
            tx_ack_ns: None,
            rx_kernel_ns: Some(20_000),
            app_recv_ns: 26_000,
        };
        let r = ResponderStamps {
            rx_kernel_ns: Some(5_000),
            rx_app_ns: 13_000,
            tx_app_ns: 13_050,
            tx_sched_ns: Some(16_000),
            tx_soft_ns: Some(17_000),
        };
        let mut st = StageStats::default();
        st.record(&dissect(&c, Some(&r), true));
        LatencyReport {
            schema: "linerate.latency".into(),
            version: 1,
            target: "198.18.0.2:5301".into(),
            protocol: "udp".into(),
            responder: Responder::Reflector,
            clock: "CLOCK_REALTIME".into(),
            timestamp_source: "software".into(),
            hardware_timestamps: "none".into(),
            same_clock: true,
            runs: vec![LatencyRun {
                settings: vec![("reflector-mode".into(), "busy".into())],
                duration_ns: 1,
                ..LatencyRun::new(
                    64,
                    ProbeCounts {
                        sent: 1,
                        received: 1,
                        lost: 0,
                        unexpected: 0,
                    },
                    &st,
                )
            }],
            warnings: vec!["x".into()],
        }
    }

    #[test]
    fn table_has_a_row_per_configuration_and_a_column_per_stage() {
        let t = to_table(&report());
        assert!(t.contains("reflector-mode=busy"), "{t}");
        for col in [
            "client tx",
            "resp rx",
            "resp app",
            "resp tx",
            "network",
            "client rx",
            "RTT",
        ] {
            assert!(t.contains(col), "{col}: {t}");
        }
        assert!(t.contains("26.00"), "RTT in µs: {t}");
        assert!(t.contains("CLOCK_REALTIME"));
        assert!(t.contains("one-way delays are shown"));
        assert!(t.contains("warning: x"));
    }

    #[test]
    fn sampled_stamps_show_both_rtts_and_the_cost() {
        let mut r = report();
        let mut h = linerate_core::stats::Histogram::default();
        h.record(24_500);
        r.runs[0].stamp_every = 4;
        r.runs[0].rtt_unstamped = h.summary();
        let t = to_table(&r);
        assert!(t.contains("RTT stamped"), "{t}");
        assert!(t.contains("RTT unstamped"), "{t}");
        assert!(t.contains("24.50"), "{t}");
        assert!(t.contains("kernel stamps on 1 exchange in 4"), "{t}");
        assert!(t.contains("stamping added 1.50 µs"), "{t}");
        assert_eq!(r.runs[0].rtt().map(|x| x.p50_ns), Some(24_500));
        assert!(run_line(&r.runs[0]).contains("RTT p50 24.50 µs"));
        let back: LatencyReport =
            serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn json_round_trips() {
        let r = report();
        let s = serde_json::to_string(&r).unwrap();
        let back: LatencyReport = serde_json::from_str(&s).unwrap();
        assert_eq!(back, r);
        assert!(s.contains("\"p50_ns\""));
        assert!(s.contains("\"stage\":\"client_tx\""));
    }
}
