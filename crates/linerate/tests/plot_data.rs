//! The data of every plot, checked on the figures it was prepared from and
//! against golden files (`tests/fixtures/plots/*.json`, rewritten with
//! `LINERATE_UPDATE_GOLDEN=1`; review the diff): the series, bins and
//! curves, not pixels.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use linerate_core::calc::CalcResult;
use linerate_core::latency::LatencyReport;
use linerate_core::plot::{self, Chart, Mark, Named};
use linerate_core::result::Envelope;
use linerate_core::rfc2544::Rfc2544Result;
use linerate_core::throughput::model::ThroughputResult;

fn golden(name: &str, plots: &[Named]) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/plots")
        .join(format!("{name}.json"));
    let mut text = serde_json::to_string_pretty(plots).unwrap();
    text.push('\n');
    if std::env::var_os("LINERATE_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{}: the plot data changed (LINERATE_UPDATE_GOLDEN=1 rewrites it; review the diff)",
        path.display()
    );
}

fn xy(p: &Named) -> &plot::XyChart {
    match &p.chart {
        Chart::Xy(c) => c,
        other => panic!("{}: not an XY chart: {other:?}", p.name),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn calc_plots_its_rows_beside_the_line_rate() {
    let doc: Envelope<CalcResult> =
        serde_json::from_value(common::fixture("linerate.calc.json")).unwrap();
    let plots = plot::of_calc(&doc.result);
    assert_eq!(plots.len(), 1);
    let c = xy(&plots[0]);
    assert_eq!(c.y_label, "throughput (Mbit/s)");
    // Each row's payload rate is a point of its link's series.
    for row in &doc.result.rows {
        let found = c
            .series
            .iter()
            .filter(|s| s.mark == Mark::LinePoints)
            .any(|s| {
                s.points.iter().any(|&(x, y)| {
                    x == f64::from(row.frame_bytes) && close(y, row.payload_bits_per_s / 1e6)
                })
            });
        assert!(
            found,
            "row {} B at {} bit/s not plotted",
            row.frame_bytes, row.link_bits_per_s
        );
    }
    // The 100 Mbit/s line-rate curve: 64 B frames carry 100M × 64/84.
    let curve = c
        .series
        .iter()
        .find(|s| s.label == "L2 line rate at 100 Mbit/s")
        .expect("the 100M curve");
    assert_eq!(curve.points[0].0, 64.0);
    assert!(close(curve.points[0].1, 100.0 * 64.0 / 84.0));
    assert!(curve
        .points
        .windows(2)
        .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
    golden("calc", &plots);
}

#[test]
fn rfc2544_plots_the_throughput_found() {
    let mut doc: Envelope<Rfc2544Result> =
        serde_json::from_value(common::fixture("linerate.rfc2544.json")).unwrap();
    // Version 1 stored no derived figures: derived as `report` does.
    doc.result.sizes.iter_mut().for_each(|s| s.derive());
    let plots = plot::of_rfc2544(&doc.result);
    let c = xy(&plots[0]);
    let measured = c
        .series
        .iter()
        .find(|s| s.label == "measured throughput")
        .unwrap();
    let want: Vec<(f64, f64)> = doc
        .result
        .sizes
        .iter()
        .filter_map(|s| Some((f64::from(s.frame_bytes), s.throughput_bits_per_s? / 1e6)))
        .collect();
    assert!(!want.is_empty());
    assert_eq!(measured.points.len(), want.len());
    for (a, b) in measured.points.iter().zip(&want) {
        assert!(a.0 == b.0 && close(a.1, b.1), "{a:?} vs {b:?}");
    }
    golden("rfc2544", &plots);
}

#[test]
fn throughput_plots_one_line_per_stream() {
    for (file, name) in [
        ("linerate.throughput.json", "throughput"),
        ("linerate.throughput.udp.json", "throughput-udp"),
    ] {
        let doc: Envelope<ThroughputResult> =
            serde_json::from_value(common::fixture(file)).unwrap();
        let plots = plot::of_throughput(&doc.result);
        let c = xy(&plots[0]);
        let streams = doc.result.params.streams as usize;
        assert_eq!(c.series.len(), streams, "{file}");
        // The receiver's intervals (the server's, forward): bits/s of each.
        let server = doc.result.server_side.as_ref().unwrap();
        let f = &server.flows[0];
        let pts = &c.series[0].points;
        assert!(c.series[0].label.contains("received, server"), "{file}");
        assert_eq!(pts.len(), f.intervals.len());
        let unit = match c.y_label.as_str() {
            "throughput (Gbit/s)" => 1e9,
            "throughput (Mbit/s)" => 1e6,
            other => panic!("{other}"),
        };
        for (p, i) in pts.iter().zip(&f.intervals) {
            assert!(close(p.1 * unit, i.bytes_per_s() * 8.0), "{file}");
            assert!(close(p.0, i.end_ns as f64 / 1e9), "{file}");
        }
        golden(name, &plots);
    }
}

#[test]
fn latency_plots_the_stages_and_distribution() {
    let doc: Envelope<LatencyReport> =
        serde_json::from_value(common::fixture("linerate.latency.sweep.json")).unwrap();
    // Version 1 kept no distribution: the stages only.
    let plots = plot::of_latency(&doc.result);
    let names: Vec<&str> = plots.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["latency-stages"]);
    let Chart::Stacked(s) = &plots[0].chart else {
        panic!("stacked bars")
    };
    assert_eq!(s.bars.len(), doc.result.runs.len());
    for ((label, values), run) in s.bars.iter().zip(&doc.result.runs) {
        assert_eq!(label, &run.label());
        assert_eq!(values.len(), s.segments.len());
        let tx = run.stage(linerate_core::latency::Stage::ClientTx).unwrap();
        assert!(close(values[0], tx.p50_ns as f64 / 1e3));
    }
    golden("latency-sweep", &plots);

    // A real run has its distribution: histogram and CDF from it.
    let v = common::json_of(&[
        "latency",
        "127.0.0.1",
        "--in-process",
        "--count",
        "300",
        "--json",
    ]);
    let doc: Envelope<LatencyReport> = serde_json::from_value(v).unwrap();
    let plots = plot::of_latency(&doc.result);
    let names: Vec<&str> = plots.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["latency-stages", "latency-cdf", "latency-histogram"]
    );
    let run = &doc.result.runs[0];
    let d = run.rtt_distribution.as_ref().unwrap();
    let Chart::Histogram(h) = &plots[2].chart else {
        panic!("histogram")
    };
    assert_eq!(
        h.bins.iter().map(|b| b.2).sum::<u64>(),
        run.rtt().unwrap().count
    );
    assert_eq!(h.bins.len(), d.bins.len());
    let cdf = &xy(&plots[1]).series[0].points;
    assert_eq!(cdf.last().unwrap().1, 1.0);
    assert!(close(cdf[0].0, run.rtt().unwrap().min_ns as f64 / 1e3));
}

#[test]
fn comparison_and_waterfall_keep_their_figures() {
    let figures = vec![("before".to_string(), 941.2), ("after".to_string(), 712.0)];
    let b = plot::comparison("throughput", "Mbit/s", &figures);
    assert_eq!(b.bars, figures);
    let w = plot::waterfall(
        "journey",
        &[
            ("send()".into(), 1_000, 2_500),
            ("qdisc".into(), 3_500, 500),
            ("driver".into(), 4_000, 1_000),
        ],
    );
    let rows: Vec<(&str, f64, f64)> = w
        .rows
        .iter()
        .map(|r| (r.label.as_str(), r.start, r.duration))
        .collect();
    assert_eq!(
        rows,
        [
            ("send()", 0.0, 2.5),
            ("qdisc", 2.5, 0.5),
            ("driver", 3.0, 1.0)
        ]
    );
}
