//! Drawing the charts `linerate_core::plot` prepares, as SVG or PNG.
//!
//! Text is laid out with DejaVu Sans, embedded in the binary (its licence
//! is beside it in `assets/fonts/`), so no system font or fontconfig is
//! needed; SVG names the family `sans-serif` and a viewer uses its own.
//! Nothing here computes a figure: every number comes from the chart.

use std::sync::OnceLock;

use linerate_core::plot::{Chart, Named};
use plotters::coord::Shift;
use plotters::prelude::*;

mod draw;

/// The embedded font (DejaVu Sans 2.37; Bitstream Vera licence).
const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// Width and height of every plot, pixels.
pub const SIZE: (u32, u32) = (800, 480);

/// The file format of a plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Scalable vector graphics (text stays text).
    Svg,
    /// A PNG bitmap.
    Png,
}

impl Format {
    /// The file extension.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Svg => "svg",
            Self::Png => "png",
        }
    }
}

/// Why a plot could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The embedded font did not load.
    #[error("the embedded font did not load")]
    Font,
    /// The drawing backend failed.
    #[error("drawing {what}: {message}")]
    Draw {
        /// Which chart.
        what: String,
        /// The backend's words.
        message: String,
    },
    /// Encoding the bitmap failed.
    #[error("encoding PNG")]
    Png(#[from] png::EncodingError),
}

fn font() -> Result<(), PlotError> {
    static LOADED: OnceLock<bool> = OnceLock::new();
    let ok = *LOADED.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    ok.then_some(()).ok_or(PlotError::Font)
}

/// Draws `chart` in `format`: the file's bytes.
pub fn render(chart: &Chart, format: Format) -> Result<Vec<u8>, PlotError> {
    font()?;
    let (w, h) = SIZE;
    let fail = |message: String| PlotError::Draw {
        what: title(chart).to_string(),
        message,
    };
    match format {
        Format::Svg => {
            let mut out = String::new();
            {
                let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
                draw_any(chart, &root).map_err(fail)?;
                root.present().map_err(|e| fail(e.to_string()))?;
            }
            Ok(out.into_bytes())
        }
        Format::Png => {
            let mut rgb = vec![0u8; (w * h * 3) as usize];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
                draw_any(chart, &root).map_err(fail)?;
                root.present().map_err(|e| fail(e.to_string()))?;
            }
            let mut out = Vec::new();
            {
                let mut enc = png::Encoder::new(&mut out, w, h);
                enc.set_color(png::ColorType::Rgb);
                enc.set_depth(png::BitDepth::Eight);
                enc.write_header()?.write_image_data(&rgb)?;
            }
            Ok(out)
        }
    }
}

/// A drawn plot: its file name and bytes.
#[derive(Debug, Clone)]
pub struct Drawn {
    /// File name with extension (`latency-cdf.svg`).
    pub file: String,
    /// The chart's title.
    pub title: String,
    /// The file's bytes.
    pub bytes: Vec<u8>,
}

/// Draws every chart of `plots`.
pub fn render_all(plots: &[Named], format: Format) -> Result<Vec<Drawn>, PlotError> {
    plots
        .iter()
        .map(|p| {
            Ok(Drawn {
                file: format!("{}.{}", p.name, format.extension()),
                title: title(&p.chart).to_string(),
                bytes: render(&p.chart, format)?,
            })
        })
        .collect()
}

/// The title of any chart.
pub fn title(chart: &Chart) -> &str {
    match chart {
        Chart::Xy(c) => &c.title,
        Chart::Histogram(c) => &c.title,
        Chart::Bars(c) => &c.title,
        Chart::Stacked(c) => &c.title,
        Chart::Waterfall(c) => &c.title,
    }
}

fn draw_any<DB: DrawingBackend>(
    chart: &Chart,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    match chart {
        Chart::Xy(c) => draw::xy(c, root),
        Chart::Histogram(c) => draw::histogram(c, root),
        Chart::Bars(c) => draw::bars(c, root),
        Chart::Stacked(c) => draw::stacked(c, root),
        Chart::Waterfall(c) => draw::waterfall(c, root),
    }
}

/// Colours of series, in order (colour-blind-safe Okabe–Ito palette).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Numbers on an axis: at most four significant digits, no trailing zeros.
fn tick(v: f64) -> String {
    let a = v.abs();
    let s = if a == 0.0 {
        "0".to_string()
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_core::plot::{
        comparison, waterfall, HistogramChart, Mark, Series, StackedBars, XyChart,
    };

    fn xy() -> Chart {
        Chart::Xy(XyChart {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: true,
            series: vec![Series {
                label: "s".into(),
                mark: Mark::Steps,
                points: vec![(1.0, 0.0), (10.0, 0.5), (100.0, 1.0)],
            }],
        })
    }

    #[test]
    fn every_kind_draws_to_svg_and_png() {
        let charts = [
            xy(),
            Chart::Bars(comparison(
                "c",
                "Mbit/s",
                &[("a".into(), 1.0), ("b".into(), 2.0)],
            )),
            Chart::Waterfall(waterfall(
                "w",
                &[("rx".into(), 0, 10), ("app".into(), 10, 5)],
            )),
            Chart::Histogram(HistogramChart {
                title: "h".into(),
                x_label: "RTT (µs)".into(),
                log_x: true,
                bins: vec![(10.0, 12.0, 5), (12.0, 15.0, 9)],
            }),
            Chart::Stacked(StackedBars {
                title: "s".into(),
                y_label: "µs".into(),
                segments: vec!["client tx".into(), "network".into()],
                bars: vec![("a".into(), vec![1.0, 2.0]), ("b".into(), vec![1.5, 0.5])],
                marks: vec![Some(3.2), None],
                mark_label: "median RTT".into(),
            }),
        ];
        for c in &charts {
            let svg = String::from_utf8(render(c, Format::Svg).unwrap()).unwrap();
            assert!(svg.starts_with("<svg") && svg.contains(title(c)), "{svg}");
            let png = render(c, Format::Png).unwrap();
            assert_eq!(&png[1..4], b"PNG");
        }
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(148_809.5), "148810");
        assert_eq!(tick(12.5), "12.5");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(100.0), "100");
    }
}
