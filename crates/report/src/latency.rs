//! `linerate latency`: the seeds' stage table and per-stage statistics.
//!
//! Everything here formats fields of the result (ns shown as µs); the
//! figures themselves, the stamping cost included, come from
//! `linerate_core::latency`.

use linerate_core::latency::load::{LoadLevel, LoadReport, StageSum, PARTS};
use linerate_core::latency::{LatencyReport, LatencyRun, Responder, Stage};
use linerate_core::result::Envelope;
use linerate_core::throughput::model::FlowDir;
use linerate_core::units::group_thousands;

use crate::column::Scale;
use crate::table::{Align, Doc, Table, Width};

/// A duration in ns as µs with two decimals.
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

/// Renders a whole result (its flags included) for a terminal, within
/// `width`.
pub fn render(doc: &Envelope<LatencyReport>, width: Width) -> String {
    blocks(doc).text(width)
}

/// The whole result as a [`Doc`] (text or HTML).
pub fn blocks(doc: &Envelope<LatencyReport>) -> Doc {
    let report = &doc.result;
    let mut out = Doc::new();
    let responder = match report.responder {
        Responder::Reflector => "linerate reflector (returns its own stamps)",
        Responder::PlainEcho => "plain echo server (RFC 862): client-side stages only",
        Responder::Kernel => "the peer's kernel (ICMP echo): client-side stages only",
    };
    out.para(
        "",
        "  ",
        format!(
            "Response time to {} over {}; responder: {responder}",
            report.target,
            report.protocol.name().to_uppercase()
        ),
    );
    out.para(
        "  ",
        "    ",
        format!(
            "clock: {}; stamps: {}; hardware stamps: {}",
            report.clock, report.timestamp_source, report.hardware_timestamps
        ),
    );
    out.para(
        "  ",
        "    ",
        if report.same_clock && report.responder == Responder::Reflector {
            "client and responder share one clock (one host): one-way delays are shown"
        } else if report.responder != Responder::Reflector {
            "the responder returns no stamps: its time is inside \"network\", no one-way delays"
        } else {
            "client and responder clocks differ or are unknown: every stage uses one clock, no one-way delays"
        },
    );
    if let Some(l) = &report.host_load {
        out.para("  ", "    ", host_load_line(l));
    }
    out.blank();

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
    // Counts stand in each run's own line below too, and the stamped RTT
    // in its table: they go first when the width is short.
    let mut t = Table::new(cols).optional(&["sent", "RTT stamped", "lost"]);
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
    out.para("", "", "Median (p50) of each stage, µs:");
    out.table(t, 2);
    out.para(
        "  ",
        "   ",
        "(medians of stages need not add up to the median RTT; per exchange the stages add up exactly, and so do the means)",
    );
    if sampled {
        out.para(
            "  ",
            "   ",
            "(stages from the kernel-stamped sample, whose RTT is \"RTT stamped\", the RTT row below; \"RTT\" is that of the exchanges that asked for no stamp)",
        );
    }

    if let Some(load) = &report.load {
        load_blocks(&mut out, load, &report.runs);
    }

    if !report.spread.is_empty() {
        out.blank();
        out.para(
            "",
            "",
            "Repeated runs: median of the runs' figures, with min–max, µs:",
        );
        out.table(spread_table(report), 2);
    }
    for run in &report.runs {
        out.blank();
        run_stats(&mut out, run);
    }
    if !doc.flags.is_empty() {
        out.blank();
        crate::flags::add(&mut out, &doc.flags);
    }
    out.blank();
    for s in present(report, &[]) {
        out.para(
            &format!("  {:<10} ", s.title()),
            &" ".repeat(13),
            s.definition(),
        );
    }
    crate::testbed::add_link(&mut out, report.link_emulation.as_ref());
    out
}

/// A signed duration in ns as µs with two decimals and its sign.
fn signed_us(ns: f64) -> String {
    format!("{:+.2}", ns / 1000.0)
}

/// The load's figures of one level in a cell: each direction's rate and
/// its share of the line rate.
fn load_cell(level: &LoadLevel) -> String {
    let Some(t) = &level.throughput else {
        return "no result".into();
    };
    let scale = Scale::si(t.directions.iter().map(|d| d.bits_per_s));
    t.directions
        .iter()
        .map(|d| {
            let dir = match d.direction {
                FlowDir::Forward => "→",
                FlowDir::Reverse => "←",
            };
            let pct = d
                .pct_of_max
                .map_or(String::new(), |p| format!(" ({p:.0} %)"));
            format!("{dir} {}{pct}", scale.bits_per_s(d.bits_per_s))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `load` section: a row per level (the growth of each stage's mean),
/// then per level its stages idle against loaded.
fn load_blocks(out: &mut Doc, load: &LoadReport, runs: &[LatencyRun]) {
    let parts: Vec<Stage> = PARTS
        .iter()
        .copied()
        .filter(|&s| load.levels.iter().any(|l| l.growth_of(s).is_some()))
        .collect();
    out.blank();
    out.para(
        "",
        "  ",
        format!(
            "Under load (after {:.1} s to settle): growth of each stage's mean over the idle phase, µs; the parts add up to the RTT's growth:",
            load.settle_ns as f64 / 1e9
        ),
    );
    let mut cols: Vec<(String, Align)> = vec![
        ("load".into(), Align::Left),
        ("throughput".into(), Align::Left),
    ];
    cols.extend(parts.iter().map(|s| (s.title().to_string(), Align::Right)));
    cols.extend([
        ("RTT".to_string(), Align::Right),
        ("grew most".to_string(), Align::Left),
        ("lost".to_string(), Align::Right),
    ]);
    // Each level's throughput and loss stand in its own lines below too.
    let mut t = Table::new(cols).optional(&["lost", "grew most", "throughput", "resp app"]);
    for l in &load.levels {
        let mut row = vec![l.load.to_string(), load_cell(l)];
        for &s in &parts {
            row.push(
                l.growth_of(s)
                    .map_or("-".into(), |g| signed_us(g.growth_mean_ns)),
            );
        }
        row.push(
            l.growth_of(Stage::Rtt)
                .map_or("-".into(), |g| signed_us(g.growth_mean_ns)),
        );
        row.push(l.grew_most.map_or("-".into(), |s| s.title().to_string()));
        // Replies lost under load: the loaded run's count (of its sent).
        row.push(runs.get(l.run).map_or("-".into(), |r| {
            format!(
                "{}/{}",
                group_thousands(r.counts.lost),
                group_thousands(r.counts.sent)
            )
        }));
        t.row(row);
    }
    out.table(t, 2);
    for l in &load.levels {
        out.blank();
        out.para(
            "  ",
            "    ",
            format!(
                "{}: idle against loaded, µs; load throughput {}",
                l.label(),
                load_cell(l)
            ),
        );
        let mut t = Table::new([
            ("stage", Align::Left),
            ("idle p50", Align::Right),
            ("loaded p50", Align::Right),
            ("Δ p50", Align::Right),
            ("idle p99", Align::Right),
            ("loaded p99", Align::Right),
            ("Δ p99", Align::Right),
            ("Δ mean", Align::Right),
            ("share", Align::Right),
        ])
        .optional(&["idle p99", "loaded p99"]);
        for g in &l.growth {
            t.row(vec![
                g.stage.title().to_string(),
                us(g.idle_p50_ns as f64),
                us(g.loaded_p50_ns as f64),
                signed_us(g.growth_p50_ns as f64),
                us(g.idle_p99_ns as f64),
                us(g.loaded_p99_ns as f64),
                signed_us(g.growth_p99_ns as f64),
                signed_us(g.growth_mean_ns),
                g.share_pct.map_or("-".into(), |p| format!("{p:.0} %")),
            ]);
        }
        out.table(t, 4);
        let sum = |name: &str, s: Option<StageSum>| {
            s.map(|s| {
                format!(
                    "{name}: parts {} of RTT {} µs (mean){}",
                    us(s.parts_mean_ns),
                    us(s.rtt_mean_ns),
                    if s.complete {
                        ""
                    } else {
                        ", some exchanges lack a stage"
                    }
                )
            })
        };
        let sums: Vec<String> = [sum("idle", l.idle_sum), sum("loaded", l.loaded_sum)]
            .into_iter()
            .flatten()
            .collect();
        let cpu = l.host_cpu_busy_pct.map_or(String::new(), |b| {
            format!("; host CPUs {b:.0} % busy under load")
        });
        out.para("    ", "      ", format!("{}{cpu}", sums.join("; ")));
        if let Some(e) = &l.load_error {
            out.para("    ", "      ", format!("the load gave no result: {e}"));
        }
    }
    out.para("  ", "    ", format!("clocks: {}", load.clocks));
}

/// The load from elsewhere in one line.
pub fn host_load_line(l: &linerate_core::hostload::HostLoad) -> String {
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1} %"));
    format!(
        "host load during the test: {} other runnable tasks on average (at most {}), CPU pressure (some) {}, steal {}",
        l.other_runnable_mean
            .map_or("-".into(), |v| format!("{v:.2}")),
        l.other_runnable_max.map_or("-".into(), |v| v.to_string()),
        pct(l.cpu_pressure_some_pct),
        pct(l.steal_pct)
    )
}

/// Repeated runs per configuration: the median with min–max of their RTT
/// figures.
fn spread_table(report: &LatencyReport) -> Table {
    let mut t = Table::new([
        ("configuration", Align::Left),
        ("runs", Align::Right),
        ("RTT min", Align::Right),
        ("RTT p50", Align::Right),
        ("p50 min–max", Align::Right),
        ("RTT p99", Align::Right),
        ("p99 min–max", Align::Right),
    ])
    .optional(&["RTT min", "p99 min–max"]);
    let med = |s: &Option<linerate_core::sweep::Spread>| s.map_or("-".into(), |s| us(s.median));
    let range = |s: &Option<linerate_core::sweep::Spread>| {
        s.map_or("-".into(), |s| format!("{}–{}", us(s.min), us(s.max)))
    };
    for sp in &report.spread {
        t.row(vec![
            sp.label(),
            sp.p50_ns.map_or(0, |s| s.runs).to_string(),
            med(&sp.min_ns),
            med(&sp.p50_ns),
            range(&sp.p50_ns),
            med(&sp.p99_ns),
            range(&sp.p99_ns),
        ]);
    }
    t
}

/// One run's line and its table of per-stage statistics.
fn run_stats(out: &mut Doc, run: &LatencyRun) {
    out.para(
        "",
        "  ",
        format!(
            "{}: {} B requests, {} sent, {} answered, {} lost{}",
            run.label(),
            run.size_bytes,
            group_thousands(run.counts.sent),
            group_thousands(run.counts.received),
            group_thousands(run.counts.lost),
            if run.counts.unexpected > 0 {
                format!(
                    ", {} unexpected replies",
                    group_thousands(run.counts.unexpected)
                )
            } else {
                String::new()
            }
        ),
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
    ])
    .optional(&["stddev", "p99.9", "p90"]);
    let unstamped = run.rtt_unstamped.as_ref().map(|x| ("RTT unstamped", x));
    let to_kernel_rx = run
        .rtt_send_to_kernel_rx
        .as_ref()
        .map(|x| ("send→rx stamp", x));
    let rows = run
        .stages
        .iter()
        .map(|s| (s.stage.title(), &s.summary))
        .chain(unstamped)
        .chain(to_kernel_rx);
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
    out.table(t, 2);
    if let Some(w) = run.wire_rtt_ns {
        out.para(
            "  ",
            "  ",
            format!(
                "the link's wire time (line-rate model, request and reply frames): {} µs, the least a round trip can take",
                us(w)
            ),
        );
    }
    if let (Some(cost), Some(plain)) = (run.stamping_cost_ns, &run.rtt_unstamped) {
        out.para(
            "  ",
            "  ",
            format!(
                "kernel stamps on 1 exchange in {} ({} stamped, {} not): the stages are the stamped ones'; \
                 stamping added {} µs to the median RTT",
                run.stamp_every,
                group_thousands(run.stamped_exchanges()),
                group_thousands(plain.count),
                us(cost as f64)
            ),
        );
    }
    if let Some(k) = &run.responder_kernel {
        out.para("  ", "  ", responder_kernel_line(k));
    }
    if run.rtt_send_to_kernel_rx.is_some() {
        out.para(
            "  ",
            "  ",
            "send→rx stamp: the send call to the kernel's receive stamp of the reply, per exchange: \
             the span ping reports (it leaves out the wake-up and receive call that the RTT includes)",
        );
    }
}

/// The responder kernel's stages (ICMP echo on a bed), medians and p99.
fn responder_kernel_line(k: &linerate_core::journey::ResponderKernel) -> String {
    let stage = |name: &str, s: &Option<linerate_core::stats::Summary>| {
        s.as_ref().map_or(format!("{name} –"), |s| {
            format!(
                "{name} {} µs (p99 {})",
                us(s.p50_ns as f64),
                us(s.p99_ns as f64)
            )
        })
    };
    format!(
        "responder kernel on {} ({} requests, part of \"network\" above): {}, {}, {} — {}",
        k.device,
        group_thousands(k.requests),
        stage("rx", &k.rx),
        stage("processing", &k.processing),
        stage("tx", &k.tx),
        k.source
    )
}

/// One run in a line (for progress while sweeping).
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
    use linerate_core::latency::{
        dissect, ClientStamps, EchoProtocol, ProbeCounts, ResponderStamps, StageStats, SCHEMA,
        SCHEMA_VERSION,
    };
    use linerate_core::result::Flag;

    fn report() -> Envelope<LatencyReport> {
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
        let report = LatencyReport {
            link_emulation: None,
            target: "198.18.0.2:5301".into(),
            protocol: EchoProtocol::Udp,
            responder: Responder::Reflector,
            clock: "CLOCK_REALTIME".into(),
            timestamp_source: "software".into(),
            hardware_timestamps: "none".into(),
            same_clock: true,
            kernel_stamps: true,
            ipv6: false,
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
            link_bits_per_s: None,
            host_load: None,
            spread: Vec::new(),
            load: None,
        };
        Envelope::new(SCHEMA, SCHEMA_VERSION, report).flagged([Flag::warning("x", "x")])
    }

    #[test]
    fn table_has_a_row_per_configuration_and_a_column_per_stage() {
        let t = render(&report(), Width::default());
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
        assert!(t.lines().all(|l| l.chars().count() <= 100), "{t}");
    }

    #[test]
    fn a_sweep_fits_100_columns_and_shows_everything_when_wide() {
        let mut doc = report();
        let run = doc.result.runs[0].clone();
        let mut h = linerate_core::stats::Histogram::default();
        h.record(24_500);
        doc.result.runs = ["off", "on"]
            .iter()
            .map(|v| LatencyRun {
                settings: vec![
                    ("reflector-copy".into(), (*v).into()),
                    ("udp-checksum".into(), "on".into()),
                ],
                stamp_every: 4,
                rtt_unstamped: h.summary(),
                ..run.clone()
            })
            .collect();
        let t = render(&doc, Width::default());
        assert!(t.lines().all(|l| l.chars().count() <= 100), "{t}");
        let wide = render(&doc, Width::Unlimited);
        assert!(wide.contains("RTT stamped"), "{wide}");
        assert!(wide.lines().any(|l| l.chars().count() > 100), "{wide}");
    }

    /// A load section renders what core computed: the growth row per
    /// level, each level's stages idle against loaded with the load's
    /// throughput, within 100 columns.
    #[test]
    fn a_load_section_shows_growth_per_stage_and_the_load() {
        use linerate_core::latency::load::{
            LevelMeasured, LoadDirection, LoadReport, LoadSpec, LoadThroughput,
        };
        use linerate_core::throughput::model::FlowRole;
        let mut doc = report();
        let idle = doc.result.runs[0].clone();
        let mut loaded = idle.clone();
        // The network's median grows by 1 ms under load.
        for s in &mut loaded.stages {
            if matches!(s.stage, Stage::Network | Stage::Rtt) {
                s.summary.p50_ns += 1_000_000;
                s.summary.mean_ns += 1_000_000.0;
            }
        }
        doc.result.runs = vec![idle, loaded];
        let spec: LoadSpec = "udp,4,bidir,rate=1G".parse().unwrap();
        let throughput = LoadThroughput {
            asked_bits_per_s: Some(1_000_000_000),
            directions: vec![LoadDirection {
                direction: FlowDir::Forward,
                role: FlowRole::Receiver,
                bits_per_s: 941.5e6,
                pct_of_max: Some(96.0),
                time_ns: 5_000_000_000,
            }],
            flags: Vec::new(),
        };
        doc.result.load = LoadReport::build(
            &doc.result.runs,
            0,
            std::time::Duration::from_secs(2),
            vec![LevelMeasured {
                settings: Vec::new(),
                load: spec,
                run: 1,
                throughput: Ok(throughput),
                sustained: true,
                host_cpu_busy_pct: Some(42.0),
            }],
        );
        let t = render(&doc, Width::default());
        assert!(t.lines().all(|l| l.chars().count() <= 100), "{t}");
        assert!(t.contains("Under load (after 2.0 s to settle)"), "{t}");
        assert!(t.contains("udp,4,bidir,rate=1G"), "{t}");
        assert!(t.contains("→ 941.5 Mbit/s (96 %)"), "{t}");
        assert!(t.contains("+1000.00"), "the network's growth: {t}");
        assert!(t.contains("100 %"), "its share: {t}");
        let wide = render(&doc, Width::Unlimited);
        assert!(wide.contains("host CPUs 42 % busy under load"), "{wide}");
        assert!(wide.contains("grew most"), "{wide}");
    }

    #[test]
    fn repeats_show_their_spread_the_wire_time_and_the_host_load() {
        let mut doc = report();
        let run = doc.result.runs[0].clone();
        doc.result.runs = (1..=3)
            .map(|i| LatencyRun {
                repeat: Some(i),
                ..run.clone()
            })
            .collect();
        doc.result.link_bits_per_s = Some(100_000_000);
        doc.result.host_load = Some(linerate_core::hostload::HostLoad {
            duration_ns: 1_000_000_000,
            samples: 6,
            cpu_pressure_some_pct: Some(12.5),
            cpu_pressure_full_pct: None,
            cpu_pressure_some_avg10_max: None,
            other_runnable_mean: Some(0.25),
            other_runnable_max: Some(1),
            steal_pct: Some(0.0),
        });
        doc.result.derive();
        let t = render(&doc, Width::default());
        assert!(t.contains("Repeated runs"), "{t}");
        assert!(t.contains("reflector-mode=busy (run 3)"), "{t}");
        assert!(t.contains("26.00–26.00"), "{t}");
        assert!(t.contains("the link's wire time"), "{t}");
        assert!(t.contains("20.80 µs"), "{t}");
        assert!(t.contains("0.25 other runnable tasks"), "{t}");
        assert!(t.contains("12.5 %, steal 0.0 %"), "{t}");
        assert!(t.lines().all(|l| l.chars().count() <= 100), "{t}");
    }

    #[test]
    fn sampled_stamps_show_both_rtts_and_the_cost() {
        let mut doc = report();
        let r = &mut doc.result;
        let mut h = linerate_core::stats::Histogram::default();
        h.record(24_500);
        r.runs[0].stamp_every = 4;
        r.runs[0].rtt_unstamped = h.summary();
        r.runs[0] = r.runs[0].clone().with_derived();
        let t = render(&doc, Width::Unlimited);
        let r = &doc.result;
        assert!(t.contains("RTT stamped"), "{t}");
        assert!(t.contains("RTT unstamped"), "{t}");
        assert!(t.contains("24.50"), "{t}");
        assert!(t.contains("kernel stamps on 1 exchange in 4"), "{t}");
        assert!(t.contains("stamping added 1.50 µs"), "{t}");
        assert_eq!(r.runs[0].rtt().map(|x| x.p50_ns), Some(24_500));
        assert!(run_line(&r.runs[0]).contains("RTT p50 24.50 µs"));
        let back: Envelope<LatencyReport> =
            serde_json::from_str(&serde_json::to_string(&doc).unwrap()).unwrap();
        assert_eq!(back, doc);
    }

    #[test]
    fn the_span_ping_reports_has_its_row_and_its_meaning() {
        let mut doc = report();
        let t = render(&doc, Width::Unlimited);
        assert!(!t.contains("send→rx stamp"), "{t}");
        let mut h = linerate_core::stats::Histogram::default();
        h.record(4_990);
        doc.result.runs[0].rtt_send_to_kernel_rx = h.summary();
        let t = render(&doc, Width::Unlimited);
        let row = t.lines().find(|l| l.contains("send→rx stamp")).unwrap();
        assert!(row.contains("4.99"), "{t}");
        assert!(t.contains("the span ping reports"), "{t}");
    }

    #[test]
    fn json_round_trips() {
        let r = report();
        let s = serde_json::to_string(&r).unwrap();
        let back: Envelope<LatencyReport> = serde_json::from_str(&s).unwrap();
        assert_eq!(back, r);
        assert!(s.contains("\"p50_ns\""));
        assert!(s.contains("\"stage\":\"client_tx\""));
    }
}
