//! One function per kind of chart, generic over the drawing backend.

use linerate_core::plot::{BarChart, HistogramChart, Mark, StackedBars, Waterfall, XyChart};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::{color, tick};

const FONT: &str = "sans-serif";

fn caption() -> (&'static str, u32) {
    (FONT, 20)
}

/// A range that is not empty: `lo..hi` widened when they are equal.
fn span(lo: f64, hi: f64) -> std::ops::Range<f64> {
    if hi > lo {
        lo..hi
    } else {
        let d = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        lo - d..hi + d
    }
}

fn log10(x: f64) -> f64 {
    x.max(f64::MIN_POSITIVE).log10()
}

/// Series on x and y axes; a logarithmic x axis is drawn as log10 of the
/// values with ticks labelled by the values themselves.
pub(super) fn xy<DB: DrawingBackend>(
    c: &XyChart,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let fx = |x: f64| if c.log_x { log10(x) } else { x };
    let ((x0, x1), (y0, y1)) = c.bounds().unwrap_or(((0.0, 1.0), (0.0, 1.0)));
    let y_top = if y1 > 0.0 { y1 * 1.08 } else { 1.0 };
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, caption())
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(span(fx(x0), fx(x1)), span(y0.min(0.0), y_top))
        .map_err(|e| e.to_string())?;
    let log = c.log_x;
    let x_fmt = move |v: &f64| tick(if log { 10f64.powf(*v) } else { *v });
    chart
        .configure_mesh()
        .x_desc(c.x_label.as_str())
        .y_desc(c.y_label.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&|v: &f64| tick(*v))
        .label_style((FONT, 13))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in c.series.iter().enumerate() {
        let col = color(i);
        let mut pts: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (fx(x), y)).collect();
        if s.mark == Mark::Steps {
            pts = pts
                .windows(2)
                .flat_map(|w| [w[0], (w[1].0, w[0].1)])
                .chain(pts.last().copied())
                .collect();
        }
        chart
            .draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
        if s.mark == Mark::LinePoints {
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 4, col.filled())))
                .map_err(|e| e.to_string())?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(|e| e.to_string())
}

/// Bins as bars on a (log) x axis.
pub(super) fn histogram<DB: DrawingBackend>(
    c: &HistogramChart,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let fx = |x: f64| if c.log_x { log10(x) } else { x };
    let lo = c.bins.first().map_or(0.0, |b| fx(b.0));
    let hi = c.bins.last().map_or(1.0, |b| fx(b.1));
    let top = c.bins.iter().map(|b| b.2).max().unwrap_or(1) as f64 * 1.08;
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, caption())
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(span(lo, hi), 0f64..top.max(1.0))
        .map_err(|e| e.to_string())?;
    let log = c.log_x;
    let x_fmt = move |v: &f64| tick(if log { 10f64.powf(*v) } else { *v });
    chart
        .configure_mesh()
        .x_desc(c.x_label.as_str())
        .y_desc("exchanges")
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&|v: &f64| tick(*v))
        .label_style((FONT, 13))
        .draw()
        .map_err(|e| e.to_string())?;
    let col = color(0);
    chart
        .draw_series(
            c.bins
                .iter()
                .map(|&(a, b, n)| Rectangle::new([(fx(a), 0.0), (fx(b), n as f64)], col.filled())),
        )
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Labelled bars side by side.
pub(super) fn bars<DB: DrawingBackend>(
    c: &BarChart,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let n = c.bars.len().max(1);
    let top = c.bars.iter().map(|b| b.1).fold(0.0, f64::max);
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, caption())
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d((0..n).into_segmented(), span(0.0, top * 1.08))
        .map_err(|e| e.to_string())?;
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) => c.bars.get(*i).map_or(String::new(), |b| b.0.clone()),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(c.y_label.as_str())
        .x_labels(n)
        .x_label_formatter(&label)
        .y_label_formatter(&|v: &f64| tick(*v))
        .label_style((FONT, 13))
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(c.bars.iter().enumerate().map(|(i, b)| {
            let mut r = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), b.1),
                ],
                color(i).filled(),
            );
            r.set_margin(0, 0, 12, 12);
            r
        }))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// One bar per configuration, one stacked segment per stage, and each
/// bar's reference mark as a black line across it.
pub(super) fn stacked<DB: DrawingBackend>(
    c: &StackedBars,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let n = c.bars.len().max(1);
    let stack_top = c
        .bars
        .iter()
        .map(|b| b.1.iter().sum::<f64>())
        .fold(0.0, f64::max);
    let mark_top = c.marks.iter().flatten().copied().fold(0.0, f64::max);
    let top = stack_top.max(mark_top) * 1.3;
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, caption())
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d((0..n).into_segmented(), span(0.0, top))
        .map_err(|e| e.to_string())?;
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) => c.bars.get(*i).map_or(String::new(), |b| b.0.clone()),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(c.y_label.as_str())
        .x_labels(n)
        .x_label_formatter(&label)
        .y_label_formatter(&|v: &f64| tick(*v))
        .label_style((FONT, 13))
        .draw()
        .map_err(|e| e.to_string())?;
    for (j, seg) in c.segments.iter().enumerate() {
        let col = color(j);
        chart
            .draw_series(c.bars.iter().enumerate().map(|(i, (_, v))| {
                let below: f64 = v.iter().take(j).sum();
                let h = v.get(j).copied().unwrap_or(0.0);
                let mut r = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), below),
                        (SegmentValue::Exact(i + 1), below + h),
                    ],
                    col.filled(),
                );
                r.set_margin(0, 0, 16, 16);
                r
            }))
            .map_err(|e| e.to_string())?
            .label(seg.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], col.filled()));
    }
    if c.marks.iter().any(Option::is_some) {
        chart
            .draw_series(c.marks.iter().enumerate().filter_map(|(i, m)| {
                let m = (*m)?;
                Some(PathElement::new(
                    vec![(SegmentValue::Exact(i), m), (SegmentValue::Exact(i + 1), m)],
                    BLACK.stroke_width(2),
                ))
            }))
            .map_err(|e| e.to_string())?
            .label(c.mark_label.as_str())
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(|e| e.to_string())
}

/// Rows of spans on a common time axis, the first row at the top.
pub(super) fn waterfall<DB: DrawingBackend>(
    c: &Waterfall,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let n = c.rows.len().max(1);
    let end = c
        .rows
        .iter()
        .map(|r| r.start + r.duration)
        .fold(0.0, f64::max);
    let longest = c
        .rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(4);
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, caption())
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size((longest as u32 * 8).clamp(48, 260))
        .build_cartesian_2d(span(0.0, end * 1.05), (0..n).into_segmented())
        .map_err(|e| e.to_string())?;
    // Row i is drawn at n-1-i so the first row is at the top.
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(k) if *k < n => c
            .rows
            .get(n - 1 - k)
            .map_or(String::new(), |r| r.label.clone()),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(c.x_label.as_str())
        .y_labels(n)
        .y_label_formatter(&label)
        .x_label_formatter(&|v: &f64| tick(*v))
        .label_style((FONT, 13))
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(c.rows.iter().enumerate().map(|(i, r)| {
            let k = n - 1 - i;
            let mut rect = Rectangle::new(
                [
                    (r.start, SegmentValue::Exact(k)),
                    (r.start + r.duration, SegmentValue::Exact(k + 1)),
                ],
                color(i).filled(),
            );
            rect.set_margin(4, 4, 0, 0);
            rect
        }))
        .map_err(|e| e.to_string())?;
    Ok(())
}
