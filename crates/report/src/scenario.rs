//! `linerate scenario run`: the scenario's tables, each figure beside its
//! reference, marked with the flags that concern it; the tests that did not
//! run; the plan of `--dry-run`. Everything here is computed in
//! `linerate_core::scenario`; this module only formats.

use linerate_core::result::Envelope;
use linerate_core::scenario::table::{CellResult, TableResult};
use linerate_core::scenario::{shell_word, ScenarioResult};

use crate::table::{Align, Doc, Table, Width};

/// A figure with its digits and its flag marks (`12.00[1,2]`); its
/// reference goes in the row under it ([`reference`]).
fn cell(c: &CellResult) -> String {
    let marks: Vec<String> = c.marks.iter().map(u32::to_string).collect();
    let marks = match marks.is_empty() {
        true => String::new(),
        false => format!("[{}]", marks.join(",")),
    };
    let figure = match (&c.value, &c.text, &c.missing) {
        (Some(v), _, _) => format!("{v:.*}", usize::from(c.digits)),
        (None, Some(t), _) => t.clone(),
        (None, None, Some(_)) => "n/a".to_string(),
        (None, None, None) => String::new(),
    };
    format!("{figure}{marks}")
}

/// A cell's reference figure, with whether the measured one agrees within
/// the tolerance (`12.19 ok`, `off` outside it), or empty.
fn reference(c: &CellResult) -> String {
    let Some(r) = c.reference else {
        return String::new();
    };
    let agree = match c.within_tolerance {
        Some(true) => " ok",
        Some(false) => " off",
        None => "",
    };
    format!("{r:.*}{agree}", usize::from(c.digits))
}

/// Whether a cell shows a text (fixed or read from the result) and no figure.
fn is_text(c: &CellResult) -> bool {
    c.value.is_none() && c.text.is_some() && c.reference.is_none()
}

/// One table as blocks: title, the table, the reference's source, the
/// footnotes, the figures that are missing and why, the "why they differ"
/// lines, the note.
pub fn table_doc(t: &TableResult) -> Doc {
    let mut d = Doc::new();
    d.line(t.title.clone());
    // Columns of text only (names, hints) read from the left, and may wrap.
    let align = |k: usize| match (t.rows.iter()).all(|r| r.cells.get(k).is_some_and(is_text)) {
        true if !t.rows.is_empty() => Align::Left,
        _ => Align::Right,
    };
    let header = std::iter::once(("".to_string(), Align::Left))
        .chain((t.columns.iter().enumerate()).map(|(k, c)| (c.clone(), align(k))));
    let mut table = Table::new(header);
    // A row with references gets a row under it with them, labelled
    // `ref`: the measured and the published figure one above the other.
    for r in &t.rows {
        table.row(
            std::iter::once(r.label.clone())
                .chain(r.cells.iter().map(cell))
                .collect(),
        );
        if r.cells.iter().any(|c| c.reference.is_some()) {
            table.row(
                std::iter::once("  ref".to_string())
                    .chain(r.cells.iter().map(reference))
                    .collect(),
            );
        }
    }
    match t.rows.is_empty() {
        true => d.line("  (no rows: the list they come from is empty)"),
        false => d.table(table, 2),
    }
    if let Some(src) = &t.reference {
        d.para("  ", "  ", format!("ref: {src}"));
    }
    for f in &t.footnotes {
        let first = format!("  [{}] ", f.mark);
        let rest = " ".repeat(first.chars().count());
        d.para(
            &first,
            &rest,
            format!(
                "{} ({}, test {}): {}",
                f.code,
                severity(f.severity),
                f.test,
                f.message
            ),
        );
    }
    for r in &t.rows {
        for (c, col) in r.cells.iter().zip(&t.columns) {
            if let Some(why) = &c.missing {
                d.para("  n/a: ", "       ", format!("{} / {col}: {why}", r.label));
            }
            if let Some(why) = &c.unavailable {
                d.para(
                    "  not available: ",
                    "                 ",
                    format!("{} / {col}: {why}", r.label),
                );
            }
        }
    }
    for r in &t.rows {
        if let Some(why) = &r.why {
            let first = format!("  {}: ", r.label);
            d.para(&first, "    ", why.clone());
        }
    }
    if let Some(n) = &t.note {
        d.para("  ", "  ", n.clone());
    }
    d
}

fn severity(s: linerate_core::result::Severity) -> &'static str {
    match s {
        linerate_core::result::Severity::Invalid => "invalid",
        linerate_core::result::Severity::Warning => "warning",
        linerate_core::result::Severity::Info => "note",
    }
}

/// The whole scenario result as blocks (text and HTML share them), its
/// flags last.
pub fn doc(env: &Envelope<ScenarioResult>) -> Doc {
    let mut d = blocks(env);
    if !env.flags.is_empty() {
        d.blank();
        crate::flags::add(&mut d, &env.flags);
    }
    d
}

/// [`doc`] without the flags (`report` shows them in a section of their own).
pub fn blocks(env: &Envelope<ScenarioResult>) -> Doc {
    let r = &env.result;
    let mut d = Doc::new();
    let seed = r
        .seed
        .as_ref()
        .map(|s| format!(" (replays {s})"))
        .unwrap_or_default();
    d.para("", "", format!("Scenario {}: {}{seed}", r.name, r.title));
    let short = match r.short {
        true => ", shortened trials (--short)",
        false => "",
    };
    d.line(format!(
        "  file sha256 {}{short}",
        &r.hash[..r.hash.len().min(16)]
    ));
    if let Some(bed) = &r.bed {
        d.para("  bed: ", "       ", command_line(bed));
    }
    for t in &r.tests {
        let saved = t
            .saved_as
            .map(|id| format!(" (history {id})"))
            .unwrap_or_default();
        d.para(
            &format!("  {}: ", t.id),
            "      ",
            format!("{}{saved}", command_line(&t.argv)),
        );
        if let Some(e) = &t.error {
            d.para("    FAILED: ", "            ", e.clone());
        }
    }
    for t in &r.tables {
        d.blank();
        d.append(table_doc(t));
    }
    d
}

/// The scenario result as terminal text.
pub fn render(env: &Envelope<ScenarioResult>, width: Width) -> String {
    doc(env).text(width)
}

/// `linerate ARGV…` with shell quoting where needed.
pub fn command_line(argv: &[String]) -> String {
    let words: Vec<String> = argv.iter().map(|w| shell_word(w)).collect();
    format!("linerate {}", words.join(" "))
}

/// `--dry-run`: the bed, each test's command line, the tables' layout.
pub fn plan(
    name: &str,
    title: &str,
    bed: Option<&[String]>,
    tests: &[(String, Vec<String>)],
    tables: &[(String, Vec<String>)],
    width: Width,
) -> String {
    let mut d = Doc::new();
    d.para(
        "",
        "",
        format!("Scenario {name}: {title} (dry run: nothing runs)"),
    );
    match bed {
        Some(b) => d.para(
            "  bed: ",
            "       ",
            format!("{} (removed at the end)", command_line(b)),
        ),
        None => d.line("  bed: none (the tests run where their options point)"),
    }
    for (id, argv) in tests {
        d.para(&format!("  {id}: "), "      ", command_line(argv));
    }
    for (title, rows) in tables {
        d.para(
            "  table: ",
            "         ",
            format!("{title}: rows {}", rows.join("; ")),
        );
    }
    d.text(width)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_shows_marks_and_reference() {
        let c = CellResult {
            value: Some(11.5),
            digits: 1,
            text: None,
            missing: None,
            reference: Some(12.19),
            within_tolerance: Some(true),
            marks: vec![1, 2],
            unavailable: None,
        };
        assert_eq!(cell(&c), "11.5[1,2]");
        assert_eq!(reference(&c), "12.2 ok");
        // The reference stands under the figure, on a `ref` row.
        let t = TableResult {
            title: "T".into(),
            columns: vec!["MB/s".into()],
            reference: None,
            rows: vec![linerate_core::scenario::table::RowResult {
                label: "ideal".into(),
                cells: vec![c.clone()],
                why: None,
            }],
            footnotes: vec![],
            note: None,
        };
        let text = table_doc(&t).text(Width::Columns(100));
        let lines: Vec<&str> = text.lines().collect();
        let at = lines.iter().position(|l| l.contains("11.5[1,2]")).unwrap();
        assert!(lines[at + 1].trim_start().starts_with("ref"), "{text}");
        assert!(lines[at + 1].contains("12.2 ok"), "{text}");
        let c = CellResult {
            value: None,
            missing: Some("x".into()),
            reference: None,
            within_tolerance: None,
            marks: vec![],
            ..c
        };
        assert_eq!(cell(&c), "n/a");
        let c = CellResult {
            missing: None,
            text: Some(linerate_core::scenario::table::NOT_AVAILABLE.into()),
            unavailable: Some("energy: not available here (no RAPL)".into()),
            ..c
        };
        assert_eq!(cell(&c), "not available");
        let t = TableResult {
            title: "Energy".into(),
            columns: vec!["µJ".into()],
            reference: None,
            rows: vec![linerate_core::scenario::table::RowResult {
                label: "echo".into(),
                cells: vec![c],
                why: None,
            }],
            note: None,
            footnotes: vec![],
        };
        let text = table_doc(&t).text(Width::Columns(100));
        assert!(
            text.contains("not available: echo / µJ: energy: not available here (no RAPL)"),
            "{text}"
        );
    }

    #[test]
    fn text_columns_read_from_the_left_and_empty_tables_say_so() {
        let text = |t: &str| CellResult {
            value: None,
            digits: 2,
            text: Some(t.into()),
            missing: None,
            reference: None,
            within_tolerance: None,
            marks: vec![],
            unavailable: None,
        };
        let figure = CellResult {
            value: Some(1.5),
            text: None,
            ..text("")
        };
        let row = |label: &str, cells: Vec<CellResult>| linerate_core::scenario::table::RowResult {
            label: label.into(),
            cells,
            why: None,
        };
        let mut t = TableResult {
            title: "T".into(),
            columns: vec!["device".into(), "µs".into()],
            reference: None,
            rows: vec![
                row("one", vec![text("lr-a"), figure.clone()]),
                row("two", vec![text("lr-dut-b"), figure]),
            ],
            note: None,
            footnotes: vec![],
        };
        let out = table_doc(&t).text(Width::new(false));
        let line = out.lines().find(|l| l.contains("one")).unwrap_or_default();
        assert!(line.contains("lr-a    "), "{out}");
        assert!(line.ends_with("1.50"), "{out}");
        t.rows.clear();
        let out = table_doc(&t).text(Width::new(false));
        assert!(out.contains("(no rows"), "{out}");
    }
}
