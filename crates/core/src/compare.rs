//! Comparing results: which figures of each kind of result are comparable,
//! their unit and which direction is better ([`figures`]), and the change of
//! each between results, judged against the runs' spread ([`compare`]).
//!
//! A figure's spread is the min–max of its repeats: RFC 2544's repeated
//! throughput and back-to-back searches and its latency trials carry it in
//! the result; a result measured several times over gives it for every
//! figure through [`with_repeats`] (the figures of each repeat). A change is *beyond the spread*
//! when the ranges of the two results do not overlap (with one spread known:
//! when the other value lies outside it). Without any spread the change is
//! still shown, marked "no spread known": it may be noise.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::latency::LatencyReport;
use crate::result::Envelope;
use crate::rfc2544::Rfc2544Result;
use crate::throughput::model::{End, FlowDir, FlowRole, Scenarios, ThroughputResult};

/// Which way a figure improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// More is better (throughput).
    Higher,
    /// Less is better (latency, loss, CPU cost).
    Lower,
}

/// The unit of a figure (how the renderer formats it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Bits per second.
    BitsPerS,
    /// Packets or frames per second.
    PerS,
    /// Nanoseconds.
    Ns,
    /// Percent.
    Pct,
    /// A count (frames).
    Count,
    /// CPU nanoseconds per byte.
    NsPerByte,
}

/// The min–max of a figure's repeats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spread {
    /// Lowest repeat.
    pub min: f64,
    /// Highest repeat.
    pub max: f64,
}

impl Spread {
    /// The min–max of `values` (None: fewer than two).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let v: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        (v.len() >= 2).then(|| Self {
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }

    fn contains(&self, v: f64) -> bool {
        (self.min..=self.max).contains(&v)
    }

    fn overlaps(&self, o: &Self) -> bool {
        self.min <= o.max && o.min <= self.max
    }
}

/// One comparable figure of a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Figure {
    /// Names the figure across results of the same kind
    /// (`forward receiver client bits/s`, `64 B throughput`).
    pub key: String,
    /// Its unit.
    pub unit: Unit,
    /// Which way is better.
    pub better: Better,
    /// The value quoted (RFC 2544 throughput: the lowest search, as quoted).
    pub value: f64,
    /// The min–max of its repeats (None: not repeated).
    pub spread: Option<Spread>,
}

impl Figure {
    fn new(key: String, unit: Unit, better: Better, value: f64) -> Self {
        Self {
            key,
            unit,
            better,
            value,
            spread: None,
        }
    }

    fn spread(mut self, s: Option<Spread>) -> Self {
        self.spread = s;
        self
    }
}

/// Why a document gives no figures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    /// Not a result of a measuring command (calc, inspect …).
    #[error("{0} results are not measurements: nothing to compare")]
    NotComparable(String),
    /// The document does not read as its schema says.
    #[error("the stored {schema} document does not read: {reason}")]
    Unreadable {
        /// Its schema.
        schema: String,
        /// The parser's words.
        reason: String,
    },
    /// The results are of different kinds.
    #[error("results of different kinds ({0} and {1}) have no figures in common")]
    Mixed(String, String),
    /// Fewer than two results.
    #[error("comparing needs at least two results")]
    TooFew,
    /// The results carry none of the comparable figures (a throughput
    /// document of version 1 has no derived figures).
    #[error("the results have no comparable figures")]
    NoFigures,
}

/// The comparable figures of a result document, by its `schema`.
pub fn figures(doc: &Value) -> Result<Vec<Figure>, CompareError> {
    let schema = doc.get("schema").and_then(Value::as_str).unwrap_or("");
    let read = |reason: serde_json::Error| CompareError::Unreadable {
        schema: schema.to_string(),
        reason: reason.to_string(),
    };
    match schema {
        crate::throughput::model::SCHEMA => {
            let d: Envelope<ThroughputResult> =
                serde_json::from_value(doc.clone()).map_err(read)?;
            Ok(throughput(&d.result, ""))
        }
        crate::throughput::model::SCENARIOS_SCHEMA => {
            let d: Envelope<Scenarios> = serde_json::from_value(doc.clone()).map_err(read)?;
            let mut out = Vec::new();
            for r in &d.result.runs {
                let prefix = format!("path {} ", r.result.params.send_path);
                out.extend(throughput(&r.result, &prefix));
            }
            Ok(out)
        }
        crate::latency::SCHEMA => {
            let d: Envelope<LatencyReport> = serde_json::from_value(doc.clone()).map_err(read)?;
            Ok(latency(&d.result))
        }
        crate::rfc2544::SCHEMA => {
            let d: Envelope<Rfc2544Result> = serde_json::from_value(doc.clone()).map_err(read)?;
            Ok(rfc2544(&d.result))
        }
        other => Err(CompareError::NotComparable(other.to_string())),
    }
}

/// The figures of a result measured several times: `quoted` (the figures of
/// the result as quoted, e.g. the median repeat) with each figure's spread
/// set to the min–max of the same figure over `repeats` (the figures of
/// every repeat). A figure found in fewer than two repeats keeps the spread
/// it had.
pub fn with_repeats(quoted: Vec<Figure>, repeats: &[Vec<Figure>]) -> Vec<Figure> {
    quoted
        .into_iter()
        .map(|f| {
            let same = repeats.iter().flatten().filter(|r| r.key == f.key);
            let spread = Spread::of(same.map(|r| r.value)).or(f.spread);
            f.spread(spread)
        })
        .collect()
}

/// Per direction, end and role: bit/s and packets/s (higher better) and the
/// CPU cost per byte (lower better).
fn throughput(r: &ThroughputResult, prefix: &str) -> Vec<Figure> {
    let mut out = Vec::new();
    for d in &r.figures.directions {
        let dir = match d.direction {
            FlowDir::Forward => "forward",
            FlowDir::Reverse => "reverse",
        };
        let role = match d.role {
            FlowRole::Sender => "sent",
            FlowRole::Receiver => "recv",
        };
        let end = match d.end {
            End::Client => "client",
            End::Server => "server",
        };
        let key = |what: &str| format!("{prefix}{dir} {role} at {end}: {what}");
        out.push(Figure::new(
            key("rate"),
            Unit::BitsPerS,
            Better::Higher,
            d.bits_per_s,
        ));
        if let Some(p) = d.packets_per_s {
            out.push(Figure::new(key("packets"), Unit::PerS, Better::Higher, p));
        }
        if let Some(c) = d.cpu_ns_per_byte {
            out.push(Figure::new(key("CPU"), Unit::NsPerByte, Better::Lower, c));
        }
    }
    out
}

/// Per row (its settings): the quoted RTT's median, 99th percentile and
/// mean (lower better).
fn latency(r: &LatencyReport) -> Vec<Figure> {
    let mut out = Vec::new();
    for (i, run) in r.runs.iter().enumerate() {
        let Some(rtt) = run.rtt() else { continue };
        let row = match run.settings.is_empty() {
            true if r.runs.len() == 1 => String::new(),
            true => format!("row {} ", i + 1),
            false => {
                let s: Vec<String> = run
                    .settings
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                format!("{} ", s.join(" "))
            }
        };
        let ns = |what: &str, v: f64| {
            Figure::new(format!("{row}RTT {what}"), Unit::Ns, Better::Lower, v)
        };
        out.push(ns("p50", rtt.p50_ns as f64));
        out.push(ns("p99", rtt.p99_ns as f64));
        out.push(ns("mean", rtt.mean_ns));
    }
    out
}

/// Per frame size: throughput (spread: the searches), latency (spread: the
/// trials' means), back-to-back frames (spread: the searches) and the loss
/// at the highest rate of the loss curve.
fn rfc2544(r: &Rfc2544Result) -> Vec<Figure> {
    let mut out = Vec::new();
    for s in &r.sizes {
        let key = |what: &str| format!("{} B {what}", s.frame_bytes);
        if let Some(t) = s.throughput.as_ref() {
            if let Some(fps) = t.throughput_fps {
                let spread = Spread::of(t.runs.iter().map(|r| r.throughput_fps));
                out.push(
                    Figure::new(key("throughput"), Unit::PerS, Better::Higher, fps).spread(spread),
                );
            }
        }
        if let Some(l) = s.latency.as_ref() {
            if let Some(mean) = l.mean_of_trials_ns {
                let trials = l.trials.iter().filter_map(|t| t.summary.as_ref());
                let spread = Spread::of(trials.map(|s| s.mean_ns));
                out.push(Figure::new(key("latency"), Unit::Ns, Better::Lower, mean).spread(spread));
            }
        }
        if let Some(b) = s.back_to_back.as_ref() {
            if let Some(mean) = b.mean_frames {
                let spread = Spread::of(b.runs.iter().map(|r| r.frames as f64));
                out.push(
                    Figure::new(key("back-to-back"), Unit::Count, Better::Higher, mean)
                        .spread(spread),
                );
            }
        }
        if let Some(loss) = s.loss.as_ref() {
            let top = loss
                .points
                .iter()
                .max_by(|a, b| a.rate_pct.total_cmp(&b.rate_pct));
            if let Some((p, pct)) = top.and_then(|p| Some((p, p.loss_pct?))) {
                let what = format!("loss at {}%", p.rate_pct);
                out.push(Figure::new(key(&what), Unit::Pct, Better::Lower, pct));
            }
        }
    }
    out
}

/// Schema name of a comparison document (`linerate compare --json`).
pub const SCHEMA: &str = "linerate.compare";
/// Its version.
pub const VERSION: u32 = 1;

/// One of the compared results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Compared {
    /// Its id in the history.
    pub id: i64,
    /// Its schema.
    pub schema: String,
    /// When it started (RFC 3339 UTC).
    pub started_at: Option<String>,
    /// Its tag.
    pub tag: Option<String>,
}

/// Several results compared (JSON: schema [`SCHEMA`], version [`VERSION`],
/// in the common envelope).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Comparison {
    /// The results, the baseline first.
    pub results: Vec<Compared>,
    /// Every figure across them.
    pub figures: Vec<Row>,
    /// `--fail-on-regression`: the largest regression beyond the spread
    /// that passes, percent.
    pub fail_on_regression_pct: Option<f64>,
    /// The figures whose regression beyond the spread exceeds it.
    pub failing: Vec<String>,
}

impl Comparison {
    /// `results` with their `figures`, checked against `fail_pct`.
    pub fn new(results: Vec<Compared>, figures: Vec<Row>, fail_pct: Option<f64>) -> Self {
        let failing = match fail_pct {
            Some(limit) => figures
                .iter()
                .filter(|r| r.worst_regression_pct().is_some_and(|p| p > limit))
                .map(|r| r.key.clone())
                .collect(),
            None => Vec::new(),
        };
        Self {
            results,
            figures,
            fail_on_regression_pct: fail_pct,
            failing,
        }
    }
}

/// What a change amounts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Better, beyond the spread.
    Improvement,
    /// Worse, beyond the spread.
    Regression,
    /// Inside the spread: not a change the runs can tell from noise.
    WithinSpread,
    /// The same value.
    Unchanged,
}

/// One figure of one result against the baseline's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Change {
    /// (value − baseline) / baseline, percent (None: the baseline is 0).
    pub change_pct: Option<f64>,
    /// Better, worse, or not distinguishable.
    pub verdict: Verdict,
    /// Whether either result knew the figure's spread; without it a verdict
    /// of improvement or regression may be noise.
    pub spread_known: bool,
}

/// One figure across the compared results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Row {
    /// The figure's key.
    pub key: String,
    /// Its unit.
    pub unit: Unit,
    /// Which way is better.
    pub better: Better,
    /// Its value and spread in each result (None: that result lacks it).
    pub values: Vec<Option<Figure>>,
    /// Each result against the first (the baseline); the first's is None.
    pub changes: Vec<Option<Change>>,
}

impl Row {
    /// The worst regression of this row beyond its spread, percent (a
    /// positive number: how much worse), if any.
    pub fn worst_regression_pct(&self) -> Option<f64> {
        let worse = self
            .changes
            .iter()
            .flatten()
            .filter(|c| c.verdict == Verdict::Regression);
        worse
            .filter_map(|c| c.change_pct)
            .map(f64::abs)
            .reduce(f64::max)
    }
}

/// `candidate` against `baseline` for a figure where `better` says which
/// way is up.
pub fn judge(baseline: &Figure, candidate: &Figure) -> Change {
    let (b, c) = (baseline.value, candidate.value);
    let change_pct = (b != 0.0).then(|| (c - b) / b.abs() * 100.0);
    let spread_known = baseline.spread.is_some() || candidate.spread.is_some();
    let within = match (&baseline.spread, &candidate.spread) {
        (Some(x), Some(y)) => x.overlaps(y),
        (Some(x), None) => x.contains(c),
        (None, Some(y)) => y.contains(b),
        (None, None) => false,
    };
    let verdict = if c == b {
        Verdict::Unchanged
    } else if within {
        Verdict::WithinSpread
    } else if (c > b) == (baseline.better == Better::Higher) {
        Verdict::Improvement
    } else {
        Verdict::Regression
    };
    Change {
        change_pct,
        verdict,
        spread_known,
    }
}

/// The figures of several results of one kind side by side, each against
/// the first; rows in the first result's order, then any figure only later
/// results have.
pub fn compare(docs: &[Value]) -> Result<Vec<Row>, CompareError> {
    if docs.len() < 2 {
        return Err(CompareError::TooFew);
    }
    let kind = |d: &Value| {
        let s = d.get("schema").and_then(Value::as_str).unwrap_or("");
        s.strip_suffix(".scenarios").unwrap_or(s).to_string()
    };
    let first = kind(&docs[0]);
    if let Some(other) = docs.iter().map(kind).find(|k| *k != first) {
        return Err(CompareError::Mixed(first, other));
    }
    let all: Vec<Vec<Figure>> = docs.iter().map(figures).collect::<Result<_, _>>()?;
    if all.iter().all(Vec::is_empty) {
        return Err(CompareError::NoFigures);
    }
    let mut keys: Vec<&Figure> = Vec::new();
    for f in all.iter().flatten() {
        if !keys.iter().any(|k| k.key == f.key) {
            keys.push(f);
        }
    }
    Ok(keys
        .into_iter()
        .map(|k| {
            let values: Vec<Option<Figure>> = all
                .iter()
                .map(|figs| figs.iter().find(|f| f.key == k.key).cloned())
                .collect();
            let changes = values
                .iter()
                .enumerate()
                .map(|(i, v)| match (i, &values[0], v) {
                    (0, _, _) => None,
                    (_, Some(b), Some(c)) => Some(judge(b, c)),
                    _ => None,
                })
                .collect();
            Row {
                key: k.key.clone(),
                unit: k.unit,
                better: k.better,
                values,
                changes,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(value: f64, spread: Option<(f64, f64)>, better: Better) -> Figure {
        Figure::new("x".into(), Unit::PerS, better, value)
            .spread(spread.map(|(min, max)| Spread { min, max }))
    }

    #[test]
    fn a_change_is_judged_against_the_spread_and_the_better_direction() {
        use Better::{Higher, Lower};
        let j = |b: Figure, c: Figure| judge(&b, &c);
        // Ranges apart: up is an improvement when higher is better.
        let c = j(
            fig(100.0, Some((98.0, 101.0)), Higher),
            fig(110.0, Some((108.0, 112.0)), Higher),
        );
        assert_eq!(c.verdict, Verdict::Improvement);
        assert!(c.spread_known);
        assert!((c.change_pct.unwrap() - 10.0).abs() < 1e-9);
        // … and a regression when lower is better.
        let c = j(
            fig(100.0, Some((98.0, 101.0)), Lower),
            fig(110.0, Some((108.0, 112.0)), Lower),
        );
        assert_eq!(c.verdict, Verdict::Regression);
        // Overlapping ranges: within the spread.
        let c = j(
            fig(100.0, Some((95.0, 105.0)), Higher),
            fig(103.0, Some((99.0, 107.0)), Higher),
        );
        assert_eq!(c.verdict, Verdict::WithinSpread);
        // One spread: the other value inside it, or outside.
        let c = j(
            fig(100.0, Some((95.0, 105.0)), Higher),
            fig(96.0, None, Higher),
        );
        assert_eq!(c.verdict, Verdict::WithinSpread);
        let c = j(
            fig(100.0, Some((95.0, 105.0)), Higher),
            fig(90.0, None, Higher),
        );
        assert_eq!(c.verdict, Verdict::Regression);
        // No spread: the direction alone, said to be without spread.
        let c = j(fig(100.0, None, Higher), fig(99.0, None, Higher));
        assert_eq!((c.verdict, c.spread_known), (Verdict::Regression, false));
        assert_eq!(
            j(fig(5.0, None, Lower), fig(5.0, None, Lower)).verdict,
            Verdict::Unchanged
        );
        assert_eq!(
            j(fig(0.0, None, Lower), fig(1.0, None, Lower)).change_pct,
            None
        );
    }

    #[test]
    fn failing_figures_are_regressions_beyond_the_spread_over_the_limit() {
        let row = |b: Figure, c: Figure| Row {
            key: format!("{}", c.value),
            unit: Unit::PerS,
            better: Better::Higher,
            changes: vec![None, Some(judge(&b, &c))],
            values: vec![Some(b), Some(c)],
        };
        let rows = vec![
            // 20 % worse, beyond the spread: fails a 5 % limit.
            row(
                fig(100.0, Some((99.0, 101.0)), Better::Higher),
                fig(80.0, None, Better::Higher),
            ),
            // 3 % worse: under the limit.
            row(
                fig(100.0, None, Better::Higher),
                fig(97.0, None, Better::Higher),
            ),
            // 8 % worse but inside the spread: not a regression.
            row(
                fig(100.0, Some((90.0, 110.0)), Better::Higher),
                fig(92.0, None, Better::Higher),
            ),
        ];
        let c = Comparison::new(Vec::new(), rows.clone(), Some(5.0));
        assert_eq!(c.failing, ["80"]);
        assert!(Comparison::new(Vec::new(), rows, None).failing.is_empty());
    }

    #[test]
    fn repeats_give_every_figure_its_spread() {
        let f = |key: &str, v: f64| Figure::new(key.into(), Unit::Ns, Better::Lower, v);
        let quoted = vec![f("RTT p50", 10.0), f("RTT p99", 30.0)];
        let repeats = vec![
            vec![f("RTT p50", 9.0), f("RTT p99", 28.0)],
            vec![f("RTT p50", 10.0), f("RTT p99", 35.0)],
            vec![f("RTT p50", 12.0)],
        ];
        let out = with_repeats(quoted, &repeats);
        assert_eq!(
            out[0].spread,
            Some(Spread {
                min: 9.0,
                max: 12.0
            })
        );
        assert_eq!(
            out[1].spread,
            Some(Spread {
                min: 28.0,
                max: 35.0
            })
        );
        assert_eq!(out[0].value, 10.0, "the quoted value stays");
        assert_eq!(with_repeats(vec![f("x", 1.0)], &[])[0].spread, None);
    }

    #[test]
    fn spread_needs_two_repeats() {
        assert_eq!(Spread::of([3.0]), None);
        assert_eq!(
            Spread::of([3.0, 1.0, 2.0]),
            Some(Spread { min: 1.0, max: 3.0 })
        );
    }

    #[test]
    fn only_measurements_of_one_kind_compare() {
        let calc = serde_json::json!({"schema": "linerate.calc", "version": 1});
        assert!(matches!(
            figures(&calc),
            Err(CompareError::NotComparable(_))
        ));
        let lat = serde_json::json!({"schema": "linerate.latency"});
        let tput = serde_json::json!({"schema": "linerate.throughput"});
        assert_eq!(
            compare(std::slice::from_ref(&lat)),
            Err(CompareError::TooFew)
        );
        assert!(matches!(
            compare(&[lat, tput]),
            Err(CompareError::Mixed(..))
        ));
    }
}
