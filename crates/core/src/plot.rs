//! The data of every plot, prepared from results: series, bins, CDF points
//! and the line-rate curve. Drawing (`linerate-report`'s `plot` module) only
//! places these numbers on a canvas; everything computed is computed here,
//! once, so the data can be checked without looking at pixels.
//!
//! Values are already scaled to the unit their axis names (`Mbit/s`, `µs`,
//! `s`): a renderer prints the numbers as given.

use serde::{Deserialize, Serialize};

use crate::calc::CalcResult;
use crate::latency::{LatencyReport, LatencyRun, Stage};
use crate::linerate::{Encap, Row, MIN_FRAME_BYTES};
use crate::rfc2544::Rfc2544Result;
use crate::stats::Histogram;
use crate::throughput::model::{FlowDir, FlowRole, ThroughputResult};
use crate::units::BitRate;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    /// A line through the points.
    Line,
    /// A line with each point marked (measured values).
    LinePoints,
    /// Steps: each point's value holds until the next point (a CDF).
    Steps,
}

/// One named series of (x, y) points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// The legend entry.
    pub label: String,
    /// How it is drawn.
    pub mark: Mark,
    /// The points, in increasing x.
    pub points: Vec<(f64, f64)>,
}

/// A chart of series on x and y axes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XyChart {
    /// The title.
    pub title: String,
    /// The x axis, with its unit.
    pub x_label: String,
    /// The y axis, with its unit.
    pub y_label: String,
    /// The x axis is logarithmic.
    pub log_x: bool,
    /// The series, drawn in this order.
    pub series: Vec<Series>,
}

impl XyChart {
    /// The smallest and largest x and y over every series (None: no point).
    pub fn bounds(&self) -> Option<((f64, f64), (f64, f64))> {
        let mut pts = self.series.iter().flat_map(|s| s.points.iter());
        let &(x0, y0) = pts.next()?;
        Some(pts.fold(((x0, x0), (y0, y0)), |((a, b), (c, d)), &(x, y)| {
            ((a.min(x), b.max(x)), (c.min(y), d.max(y)))
        }))
    }
}

/// One bin of a distribution, in the unit of its [`Distribution`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bin {
    /// Lower edge (inclusive), ns.
    pub lower_ns: u64,
    /// Upper edge (exclusive), ns.
    pub upper_ns: u64,
    /// Samples in the bin.
    pub count: u64,
}

/// A distribution of durations in at most [`DISTRIBUTION_BINS`] log-spaced
/// bins: what a histogram and a CDF plot are drawn from, stored in a
/// result so a report can draw them again later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Distribution {
    /// Samples in all bins.
    pub count: u64,
    /// The bins with samples, in increasing order (empty bins left out).
    pub bins: Vec<Bin>,
}

/// The most bins a [`Distribution`] has.
pub const DISTRIBUTION_BINS: usize = 48;

impl Distribution {
    /// `h`'s samples in at most [`DISTRIBUTION_BINS`] bins whose edges are
    /// spaced evenly on a log scale from the smallest to the largest sample
    /// (each histogram bucket counted in the bin of its lower edge, so a
    /// bin is exact to the histogram's 1/256 resolution). None when empty.
    pub fn from_histogram(h: &Histogram) -> Option<Self> {
        let (min, max) = (h.min()?, h.max()?);
        let lo = min.max(1) as f64;
        let hi = (max.max(1) + 1) as f64;
        let n = DISTRIBUTION_BINS;
        let ratio = (hi / lo).powf(1.0 / n as f64);
        // Integer edges, strictly increasing (small ranges get fewer bins).
        let mut edges: Vec<u64> = vec![min];
        for k in 1..=n {
            let e = (lo * ratio.powi(k as i32)).ceil() as u64;
            let e = if k == n { max + 1 } else { e.min(max + 1) };
            if e > *edges.last().unwrap_or(&0) {
                edges.push(e);
            }
        }
        let mut bins: Vec<Bin> = edges
            .windows(2)
            .map(|w| Bin {
                lower_ns: w[0],
                upper_ns: w[1],
                count: 0,
            })
            .collect();
        for (value, _, count) in h.buckets() {
            let v = value.clamp(min, max);
            let i = bins
                .partition_point(|b| b.upper_ns <= v)
                .min(bins.len().saturating_sub(1));
            if let Some(b) = bins.get_mut(i) {
                b.count += count;
            }
        }
        bins.retain(|b| b.count > 0);
        Some(Self {
            count: h.count(),
            bins,
        })
    }

    /// The CDF: for each bin, its upper edge (µs) and the share of samples
    /// below it; starts at the lowest edge with 0.
    pub fn cdf_us(&self) -> Vec<(f64, f64)> {
        let Some(first) = self.bins.first() else {
            return Vec::new();
        };
        let total = self.count.max(1) as f64;
        let mut acc = 0u64;
        let mut pts = vec![(first.lower_ns as f64 / 1e3, 0.0)];
        for b in &self.bins {
            acc += b.count;
            pts.push((b.upper_ns as f64 / 1e3, acc as f64 / total));
        }
        pts
    }
}

/// Bars with a height each (a histogram, or figures to compare).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BarChart {
    /// The title.
    pub title: String,
    /// The y axis, with its unit.
    pub y_label: String,
    /// The bars, left to right: label and height.
    pub bars: Vec<(String, f64)>,
}

/// A histogram: bins as (lower edge, upper edge, count) on an x axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramChart {
    /// The title.
    pub title: String,
    /// The x axis, with its unit.
    pub x_label: String,
    /// The x axis is logarithmic (the bins are log-spaced).
    pub log_x: bool,
    /// (lower, upper, count), in the x axis's unit.
    pub bins: Vec<(f64, f64, u64)>,
}

/// Bars made of stacked segments: one bar per configuration, one segment
/// per stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackedBars {
    /// The title.
    pub title: String,
    /// The y axis, with its unit.
    pub y_label: String,
    /// Segment names, bottom to top.
    pub segments: Vec<String>,
    /// The bars: label and one height per segment.
    pub bars: Vec<(String, Vec<f64>)>,
    /// A reference mark per bar (the median RTT), if any.
    pub marks: Vec<Option<f64>>,
    /// What the reference mark is.
    pub mark_label: String,
}

/// One row of a waterfall: a span that starts and lasts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// What the row is.
    pub label: String,
    /// Start, in the chart's unit, from the first event.
    pub start: f64,
    /// Duration, in the chart's unit.
    pub duration: f64,
}

/// A waterfall: rows of spans on a common time axis (a packet's journey).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waterfall {
    /// The title.
    pub title: String,
    /// The time axis, with its unit.
    pub x_label: String,
    /// The rows, top to bottom.
    pub rows: Vec<Span>,
}

/// A bit rate's unit for an axis: divisor and name (`Mbit/s`…), chosen so
/// `max` is between 1 and 1000 of it.
pub fn rate_unit(max_bits_per_s: f64) -> (f64, &'static str) {
    const UNITS: [(f64, &str); 5] = [
        (1e12, "Tbit/s"),
        (1e9, "Gbit/s"),
        (1e6, "Mbit/s"),
        (1e3, "kbit/s"),
        (1.0, "bit/s"),
    ];
    UNITS
        .into_iter()
        .find(|(d, _)| max_bits_per_s >= *d)
        .unwrap_or((1.0, "bit/s"))
}

/// The L2 line rate (frame bits/s, header to FCS) of untagged Ethernet
/// frames on `link`, every 8 bytes from `from` to `to` frame bytes (both
/// included): the curve measured throughput is drawn beside.
pub fn line_rate_curve(link: BitRate, from: u32, to: u32) -> Vec<(f64, f64)> {
    let (from, to) = (from.max(MIN_FRAME_BYTES), to.max(from));
    let sizes = (from..to).step_by(8).chain(std::iter::once(to));
    sizes
        .filter_map(|f| {
            let frame = Encap::ETHERNET.frame_of_length(f, f > 1518).ok()?;
            let row = Row::new(link, frame).ok()?;
            Some((f64::from(f), row.l2_bits_per_s()))
        })
        .collect()
}

fn scaled(points: &[(f64, f64)], div: f64) -> Vec<(f64, f64)> {
    points.iter().map(|&(x, y)| (x, y / div)).collect()
}

/// RFC 2544 throughput (L2 bit/s) per frame size beside the link's line
/// rate and, where measured, the generator's ceiling. None without a
/// throughput result.
pub fn rfc2544_throughput(r: &Rfc2544Result) -> Option<XyChart> {
    let measured: Vec<(f64, f64)> = r
        .sizes
        .iter()
        .filter_map(|s| Some((f64::from(s.frame_bytes), s.throughput_bits_per_s?)))
        .collect();
    if measured.is_empty() {
        return None;
    }
    let link = BitRate::from_bps(r.link_bits_per_s);
    let from = r.sizes.iter().map(|s| s.frame_bytes).min()?;
    let to = r.sizes.iter().map(|s| s.frame_bytes).max()?;
    let curve = line_rate_curve(link, from, to);
    let ceiling: Vec<(f64, f64)> = r
        .sizes
        .iter()
        .filter_map(|s| {
            let fps = s.generator_ceiling_frames_per_s?;
            Some((
                f64::from(s.frame_bytes),
                fps * f64::from(s.frame_bytes) * 8.0,
            ))
        })
        .collect();
    let max = curve
        .iter()
        .chain(&measured)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    let (div, unit) = rate_unit(max);
    let mut series = vec![
        Series {
            label: format!("line rate at {link}"),
            mark: Mark::Line,
            points: scaled(&curve, div),
        },
        Series {
            label: "measured throughput".into(),
            mark: Mark::LinePoints,
            points: scaled(&measured, div),
        },
    ];
    if !ceiling.is_empty() {
        series.push(Series {
            label: "generator ceiling".into(),
            mark: Mark::LinePoints,
            points: scaled(&ceiling, div),
        });
    }
    Some(XyChart {
        title: "RFC 2544 throughput against frame size".into(),
        x_label: "frame size (bytes, header to FCS)".into(),
        y_label: format!("L2 throughput ({unit})"),
        log_x: false,
        series,
    })
}

/// Payload throughput of each `linerate calc` row against its frame size,
/// one series per link and encapsulation, beside each link's L2 line rate.
pub fn calc_throughput(r: &CalcResult) -> Option<XyChart> {
    type Group = ((u64, String), Vec<(f64, f64)>);
    let mut groups: Vec<Group> = Vec::new();
    for row in &r.rows {
        let key = (row.link_bits_per_s, row.encap.clone());
        let p = (f64::from(row.frame_bytes), row.payload_bits_per_s);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, pts)) => pts.push(p),
            None => groups.push((key, vec![p])),
        }
    }
    if groups.is_empty() {
        return None;
    }
    let mut links: Vec<u64> = groups.iter().map(|((l, _), _)| *l).collect();
    links.dedup();
    let from = r.rows.iter().map(|x| x.frame_bytes).min()?;
    let to = r.rows.iter().map(|x| x.frame_bytes).max()?;
    let curves: Vec<(u64, Vec<(f64, f64)>)> = links
        .iter()
        .map(|&l| (l, line_rate_curve(BitRate::from_bps(l), from, to)))
        .collect();
    let max = curves
        .iter()
        .flat_map(|(_, c)| c.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let (div, unit) = rate_unit(max);
    let mut series = Vec::new();
    for (l, c) in &curves {
        series.push(Series {
            label: format!("L2 line rate at {}", BitRate::from_bps(*l)),
            mark: Mark::Line,
            points: scaled(c, div),
        });
    }
    for ((l, encap), mut pts) in groups {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        series.push(Series {
            label: format!("{encap} payload at {}", BitRate::from_bps(l)),
            mark: Mark::LinePoints,
            points: scaled(&pts, div),
        });
    }
    Some(XyChart {
        title: "Line rate against frame size".into(),
        x_label: "frame size (bytes, header to FCS)".into(),
        y_label: format!("throughput ({unit})"),
        log_x: false,
        series,
    })
}

/// Per-interval throughput over time, one line per stream and direction:
/// the receiving end's intervals where it reported them, else the sender's.
pub fn throughput_over_time(r: &ThroughputResult) -> Option<XyChart> {
    let sides = std::iter::once(&r.client).chain(r.server_side.as_ref());
    let flows: Vec<_> = sides
        .flat_map(|s| s.flows.iter().map(move |f| (s.end, f)))
        .collect();
    let mut picked: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut keys: Vec<(u16, FlowDir)> = flows.iter().map(|(_, f)| (f.flow, f.direction)).collect();
    keys.sort_by_key(|&(n, d)| (n, d == FlowDir::Reverse));
    keys.dedup();
    for (n, dir) in keys {
        let of = |role| {
            flows
                .iter()
                .find(|(_, f)| f.flow == n && f.direction == dir && f.role == role)
                .filter(|(_, f)| !f.intervals.is_empty())
        };
        let Some((end, f)) = of(FlowRole::Receiver).or_else(|| of(FlowRole::Sender)) else {
            continue;
        };
        let role = match f.role {
            FlowRole::Receiver => "received",
            FlowRole::Sender => "sent",
        };
        let dir = match dir {
            FlowDir::Forward => "client→server",
            FlowDir::Reverse => "server→client",
        };
        let end = match end {
            crate::throughput::model::End::Client => "client",
            crate::throughput::model::End::Server => "server",
        };
        let pts = f
            .intervals
            .iter()
            .map(|i| (i.end_ns as f64 / 1e9, i.bytes_per_s() * 8.0))
            .collect();
        picked.push((format!("stream {n} {dir} ({role}, {end})"), pts));
    }
    if picked.is_empty() {
        return None;
    }
    let max = picked
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.1))
        .fold(0.0, f64::max);
    let (div, unit) = rate_unit(max);
    Some(XyChart {
        title: "Throughput per interval".into(),
        x_label: "time (s from the flow's start, CLOCK_MONOTONIC of the measuring end)".into(),
        y_label: format!("throughput ({unit})"),
        log_x: false,
        series: picked
            .into_iter()
            .map(|(label, p)| Series {
                label,
                mark: Mark::LinePoints,
                points: scaled(&p, div),
            })
            .collect(),
    })
}

/// The RTT histogram of one latency run (None: the result holds no
/// distribution, as documents before it did not).
pub fn latency_histogram(run: &LatencyRun) -> Option<HistogramChart> {
    let d = run.rtt_distribution.as_ref()?;
    Some(HistogramChart {
        title: format!("RTT histogram: {} ({} exchanges)", run.label(), d.count),
        x_label: "RTT (µs)".into(),
        log_x: true,
        bins: d
            .bins
            .iter()
            .map(|b| (b.lower_ns as f64 / 1e3, b.upper_ns as f64 / 1e3, b.count))
            .collect(),
    })
}

/// The RTT CDFs of a latency result, one line per run that holds a
/// distribution.
pub fn latency_cdf(r: &LatencyReport) -> Option<XyChart> {
    let series: Vec<Series> = r
        .runs
        .iter()
        .filter_map(|run| {
            Some(Series {
                label: run.label(),
                mark: Mark::Steps,
                points: run.rtt_distribution.as_ref()?.cdf_us(),
            })
        })
        .collect();
    if series.is_empty() {
        return None;
    }
    Some(XyChart {
        title: "RTT distribution (CDF)".into(),
        x_label: "RTT (µs)".into(),
        y_label: "share of exchanges".into(),
        log_x: true,
        series,
    })
}

/// The stages along a response's path, in the order a request meets them.
pub const PATH_STAGES: [Stage; 6] = [
    Stage::ClientTx,
    Stage::Network,
    Stage::ResponderRx,
    Stage::ResponderApp,
    Stage::ResponderTx,
    Stage::ClientRx,
];

/// The median of each stage along the path, stacked: one bar per run
/// (configuration of a sweep), with the run's median stamped RTT as a mark
/// (medians do not add up exactly, so the stack may differ from it). None
/// when no run has stages.
pub fn dissection(r: &LatencyReport) -> Option<StackedBars> {
    let stages: Vec<Stage> = PATH_STAGES
        .into_iter()
        .filter(|&s| r.runs.iter().any(|run| run.stage(s).is_some()))
        .collect();
    if stages.is_empty() {
        return None;
    }
    Some(StackedBars {
        title: "Response time dissected (median of each stage)".into(),
        y_label: "µs".into(),
        segments: stages.iter().map(|s| s.title().to_string()).collect(),
        bars: r
            .runs
            .iter()
            .map(|run| {
                let v = stages
                    .iter()
                    .map(|&s| run.stage(s).map_or(0.0, |x| x.p50_ns as f64 / 1e3))
                    .collect();
                (run.label(), v)
            })
            .collect(),
        marks: r
            .runs
            .iter()
            .map(|run| run.stage(Stage::Rtt).map(|x| x.p50_ns as f64 / 1e3))
            .collect(),
        mark_label: "median RTT (stamped)".into(),
    })
}

/// Figures side by side (for `compare`): one bar per labelled figure.
pub fn comparison(title: &str, unit: &str, figures: &[(String, f64)]) -> BarChart {
    BarChart {
        title: title.into(),
        y_label: unit.into(),
        bars: figures.to_vec(),
    }
}

/// A waterfall of (label, start, duration) rows, times in ns, drawn in µs
/// from the earliest start.
pub fn waterfall(title: &str, rows: &[(String, u64, u64)]) -> Waterfall {
    let t0 = rows.iter().map(|r| r.1).min().unwrap_or(0);
    Waterfall {
        title: title.into(),
        x_label: "time (µs from the first event)".into(),
        rows: rows
            .iter()
            .map(|(label, start, dur)| Span {
                label: label.clone(),
                start: (start - t0) as f64 / 1e3,
                duration: *dur as f64 / 1e3,
            })
            .collect(),
    }
}

/// A journey's steps as a waterfall: each step starts at its median time
/// from the send and lasts until the next step's median (the last one: no
/// width), in path order.
pub fn journey_waterfall(r: &crate::journey::JourneyResult) -> Option<Waterfall> {
    let at = |s: &crate::journey::Step| u64::try_from(s.from_send.median_ns).unwrap_or(0);
    let rows: Vec<(String, u64, u64)> = r
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let next = r.steps.get(i + 1).map_or(at(s), at);
            let label = match &s.dev {
                Some(d) => format!("{} on {d}", s.tracepoint),
                None => s.tracepoint.clone(),
            };
            (label, at(s), next.saturating_sub(at(s)))
        })
        .collect();
    (!rows.is_empty()).then(|| waterfall("The probes' journey: median time from sendto()", &rows))
}

/// Any chart, as drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Chart {
    /// Series on x and y axes.
    Xy(XyChart),
    /// A histogram.
    Histogram(HistogramChart),
    /// Labelled bars.
    Bars(BarChart),
    /// Stacked bars.
    Stacked(StackedBars),
    /// A waterfall.
    Waterfall(Waterfall),
}

/// A chart with the file name (without extension) it is written under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Named {
    /// File stem: `throughput-vs-frame-size`, `latency-cdf`…
    pub name: String,
    /// The chart.
    pub chart: Chart,
}

fn named(name: impl Into<String>, chart: Chart) -> Named {
    Named {
        name: name.into(),
        chart,
    }
}

/// The plots of a `linerate calc` result.
pub fn of_calc(r: &CalcResult) -> Vec<Named> {
    calc_throughput(r)
        .map(|c| named("calc-vs-frame-size", Chart::Xy(c)))
        .into_iter()
        .collect()
}

/// The plots of a `linerate rfc2544` result.
pub fn of_rfc2544(r: &Rfc2544Result) -> Vec<Named> {
    rfc2544_throughput(r)
        .map(|c| named("rfc2544-throughput-vs-frame-size", Chart::Xy(c)))
        .into_iter()
        .collect()
}

/// The plots of a `linerate journey` result: its steps as a waterfall.
pub fn of_journey(r: &crate::journey::JourneyResult) -> Vec<Named> {
    journey_waterfall(r)
        .map(|c| named("journey-waterfall", Chart::Waterfall(c)))
        .into_iter()
        .collect()
}

/// The plots of a `linerate throughput` result.
pub fn of_throughput(r: &ThroughputResult) -> Vec<Named> {
    throughput_over_time(r)
        .map(|c| named("throughput-over-time", Chart::Xy(c)))
        .into_iter()
        .collect()
}

/// The plots of a `linerate latency` result: the dissection, the CDF and
/// one histogram per run.
pub fn of_latency(r: &LatencyReport) -> Vec<Named> {
    let mut out = Vec::new();
    if let Some(c) = dissection(r) {
        out.push(named("latency-stages", Chart::Stacked(c)));
    }
    if let Some(c) = latency_cdf(r) {
        out.push(named("latency-cdf", Chart::Xy(c)));
    }
    for (i, run) in r.runs.iter().enumerate() {
        if let Some(c) = latency_histogram(run) {
            let name = match r.runs.len() {
                1 => "latency-histogram".to_string(),
                _ => format!("latency-histogram-{}", i + 1),
            };
            out.push(named(name, Chart::Histogram(c)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_rate_curve_is_the_model_at_each_size() {
        let c = line_rate_curve(BitRate::from_mbps(100), 64, 80);
        // 64 B: 148,809.5 frames/s × 512 bits; 80 B: 100M × 80/100.
        assert_eq!(c.len(), 3);
        assert!((c[0].1 - 100e6 * 64.0 / 84.0).abs() < 1e-3, "{c:?}");
        assert_eq!(c[2], (80.0, 80e6));
        assert_eq!(
            c.iter().map(|p| p.0).collect::<Vec<_>>(),
            [64.0, 72.0, 80.0]
        );
    }

    #[test]
    fn distribution_keeps_every_sample_and_its_cdf_ends_at_one() {
        let mut h = Histogram::new();
        for v in 1_000..11_000u64 {
            h.record(v);
        }
        h.record(1_000_000);
        let d = Distribution::from_histogram(&h).unwrap();
        assert!(d.bins.len() <= DISTRIBUTION_BINS);
        assert_eq!(d.bins.iter().map(|b| b.count).sum::<u64>(), 10_001);
        assert_eq!(d.bins[0].lower_ns, 1_000);
        assert_eq!(d.bins.last().unwrap().upper_ns, 1_000_001);
        assert!(d.bins.windows(2).all(|w| w[0].upper_ns <= w[1].lower_ns));
        let cdf = d.cdf_us();
        assert_eq!(cdf[0], (1.0, 0.0));
        assert_eq!(cdf.last().unwrap().1, 1.0);
        assert!(cdf.windows(2).all(|w| w[0].1 <= w[1].1 && w[0].0 < w[1].0));
        // The outlier alone in the last bin: one sample in 10,001.
        assert_eq!(d.bins.last().unwrap().count, 1);
    }

    #[test]
    fn distribution_of_one_value_is_one_bin() {
        let mut h = Histogram::new();
        h.record_n(500, 7);
        let d = Distribution::from_histogram(&h).unwrap();
        assert_eq!(
            d.bins,
            [Bin {
                lower_ns: 500,
                upper_ns: 501,
                count: 7
            }]
        );
        assert!(Distribution::from_histogram(&Histogram::new()).is_none());
    }

    #[test]
    fn rate_units_keep_the_maximum_below_a_thousand() {
        assert_eq!(rate_unit(148_809.0 * 512.0), (1e6, "Mbit/s"));
        assert_eq!(rate_unit(9.9e9), (1e9, "Gbit/s"));
        assert_eq!(rate_unit(0.0), (1.0, "bit/s"));
    }

    #[test]
    fn waterfall_starts_at_the_first_event() {
        let w = waterfall("j", &[("b".into(), 5_000, 1_000), ("a".into(), 2_000, 500)]);
        assert_eq!(w.rows[0].start, 3.0);
        assert_eq!(w.rows[1].start, 0.0);
        assert_eq!(w.rows[1].duration, 0.5);
    }
}
