//! `linerate compare`: figures of several results side by side, each later
//! result's change against the first and what it amounts to (computed in
//! `linerate_core::compare`; formatted here).

use linerate_core::compare::{Change, Figure, Row, Unit, Verdict};
use linerate_core::units::{format_bits_per_s, sig4, TimeSpan};

use crate::table::{Align, Table, Width};

/// A figure's value in its unit (`941.2 Mbit/s`, `12.3 µs`, `148.8 k/s`).
pub fn value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::BitsPerS => format_bits_per_s(v),
        Unit::PerS => {
            let prefixes = [(1e9, "G"), (1e6, "M"), (1e3, "k")];
            let (f, p) = prefixes
                .into_iter()
                .find(|(f, _)| v.abs() >= *f)
                .unwrap_or((1.0, ""));
            format!("{} {p}/s", sig4(v / f))
        }
        Unit::Ns => TimeSpan::from_secs(v * 1e-9).to_string(),
        Unit::Pct => format!("{} %", sig4(v)),
        Unit::Count => sig4(v),
        Unit::NsPerByte => format!("{} ns/B", sig4(v)),
    }
}

/// A figure with its spread: `148.8 k/s [147.9 k/s – 149.0 k/s]`.
fn cell(f: &Figure) -> String {
    match f.spread {
        Some(s) => format!(
            "{} [{} – {}]",
            value(f.unit, f.value),
            value(f.unit, s.min),
            value(f.unit, s.max)
        ),
        None => value(f.unit, f.value),
    }
}

/// What a change amounts to, in words; an improvement or regression found
/// without any spread is marked `*` (see [`NO_SPREAD`]).
pub fn verdict(c: &Change) -> String {
    let word = match c.verdict {
        Verdict::Improvement => "improvement",
        Verdict::Regression => "regression",
        Verdict::WithinSpread => "within spread",
        Verdict::Unchanged => "unchanged",
    };
    let moved = matches!(c.verdict, Verdict::Improvement | Verdict::Regression);
    match (moved, c.spread_known) {
        (true, false) => format!("{word}*"),
        _ => word.to_string(),
    }
}

/// The note under a table with verdicts marked `*`.
pub const NO_SPREAD: &str =
    "* no spread known (the figure was not repeated): the change may be noise";

/// The change in percent, signed (`+3.2 %`); `–` when the baseline is 0.
fn change(c: &Change) -> String {
    c.change_pct
        .map_or_else(|| "–".into(), |p| format!("{p:+.1} %"))
}

/// The comparison: a legend of the results (`labels`, the baseline
/// first), then one row per figure with a value column per result and, for
/// each result after the first, its change against the first and the
/// verdict.
pub fn render(labels: &[String], rows: &[Row], width: Width) -> String {
    let mut out =
        String::from("Each result against the first; [min – max] is the spread of repeats.\n");
    for (i, l) in labels.iter().enumerate() {
        out += &format!("  ({}) {l}\n", i + 1);
    }
    let mut cols = vec![("figure".to_string(), Align::Left)];
    for i in 1..=labels.len() {
        cols.push((format!("({i})"), Align::Right));
        if i > 1 {
            cols.push((format!("change ({i})"), Align::Right));
            cols.push(("verdict".to_string(), Align::Left));
        }
    }
    let mut t = Table::new(cols);
    let mut unknown = false;
    for r in rows {
        let mut cells = vec![r.key.clone()];
        for (i, v) in r.values.iter().enumerate() {
            cells.push(v.as_ref().map_or_else(|| "–".into(), cell));
            if i > 0 {
                let c = r.changes.get(i).copied().flatten();
                cells.push(c.as_ref().map_or_else(String::new, change));
                let v = c.as_ref().map_or_else(|| "not in both".into(), verdict);
                unknown |= v.ends_with('*');
                cells.push(v);
            }
        }
        t.row(cells);
    }
    out += &t.fit(2, width);
    if unknown {
        out += &format!("  {NO_SPREAD}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_core::compare::{judge, Better, Spread};

    fn fig(v: f64, spread: Option<Spread>) -> Figure {
        Figure {
            key: "64 B throughput".into(),
            unit: Unit::PerS,
            better: Better::Higher,
            value: v,
            spread,
        }
    }

    #[test]
    fn renders_values_spreads_and_verdicts() {
        let a = fig(
            148_000.0,
            Some(Spread {
                min: 147_000.0,
                max: 149_000.0,
            }),
        );
        let b = fig(120_000.0, None);
        let row = Row {
            key: a.key.clone(),
            unit: a.unit,
            better: a.better,
            changes: vec![None, Some(judge(&a, &b))],
            values: vec![Some(a), Some(b)],
        };
        let text = render(&["#1".into(), "#2".into()], &[row], Width::default());
        assert!(text.contains("(1) #1\n") && text.contains("(2)"), "{text}");
        assert!(text.contains("148.0 k/s [147.0 k/s – 149.0 k/s]"), "{text}");
        assert!(text.contains("-18.9 %"), "{text}");
        assert!(
            text.contains("regression") && !text.contains("no spread"),
            "{text}"
        );
        let none = Change {
            change_pct: Some(1.0),
            verdict: Verdict::Improvement,
            spread_known: false,
        };
        assert_eq!(verdict(&none), "improvement*");
    }
}
