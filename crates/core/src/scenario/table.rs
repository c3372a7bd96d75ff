//! A scenario's tables: how they are written (`[[table]]`) and what they
//! hold once the tests ran — each cell a figure read from a test's result
//! document by a JSON pointer, scaled, beside its reference figure, marked
//! with the flags that concern it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::result::Severity;

/// `[[table]]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    /// The table's title.
    pub title: String,
    /// Column headings (with their units), one per cell of each row.
    pub columns: Vec<String>,
    /// Where the reference figures come from (e.g. "NXP AN11053, Table 1").
    #[serde(default)]
    pub reference: Option<String>,
    /// A note printed under the table.
    #[serde(default)]
    pub note: Option<String>,
    /// `[[table.row]]`: the rows, in order.
    #[serde(default)]
    pub row: Vec<RowSpec>,
    /// `[table.each]`: more rows, one per element of a list in a test's
    /// result (after the fixed rows).
    #[serde(default)]
    pub each: Option<EachSpec>,
}

/// `[table.each]`: rows made from a list in a test's result document (a
/// journey's steps, an RFC 2544 run's frame sizes, hints), one per element
/// in the list's order, so a table follows whatever the result holds.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EachSpec {
    /// The test whose result holds the list.
    pub test: String,
    /// Where the list is: a path as a cell's `at` (selectors allowed) that
    /// finds an array.
    pub at: String,
    /// Each row's label: text in which `{KEY}` is replaced by the element's
    /// field KEY (dotted for a nested one, as in selectors), shown as
    /// [`CellSpec::as_text`] shows a value (`-` when absent or null).
    pub label: String,
    /// At most this many rows: the list's first elements [default: all].
    #[serde(default)]
    pub limit: Option<usize>,
    /// One cell per column, as a row's, without `test` (the list's test;
    /// a `text` cell reads nothing): `at` and `add` are paths inside the
    /// element (`/from_send/median_ns`; empty: the element itself);
    /// `minus` and `unavailable` stay paths from the document's root (one
    /// origin for every row, the document's own statement).
    pub cells: Vec<CellSpec>,
}

/// `[[table.row]]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RowSpec {
    /// The row's label (first column).
    pub label: String,
    /// One cell per column.
    pub cells: Vec<CellSpec>,
    /// Why the measured figures differ from the reference ones: printed
    /// under the table.
    #[serde(default)]
    pub why: Option<String>,
}

/// One cell: a figure from a test's result, or a fixed text, or empty (`{}`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CellSpec {
    /// The test whose result the figure comes from.
    #[serde(default)]
    pub test: Option<String>,
    /// Where the figure is in the test's result document: a JSON pointer
    /// (RFC 6901, e.g. `/runs/0/line_max/payload_bytes_per_s`) whose steps
    /// may also be selectors `[KEY=VALUE]` picking the first array element
    /// whose field KEY (dotted for nested fields) equals VALUE, e.g.
    /// `/runs/[params.send_path=zerocopy]/figures/directions/[role=sender]/bytes_per_s`.
    #[serde(default)]
    pub at: String,
    /// Factor applied to the figure (e.g. 1e-6 for bytes/s to MB/s).
    #[serde(default)]
    pub scale: Option<f64>,
    /// Digits after the decimal point [default: 2].
    #[serde(default)]
    pub digits: Option<u8>,
    /// A fixed text instead of a figure.
    #[serde(default)]
    pub text: Option<String>,
    /// The published figure, in the same unit as the scaled one.
    #[serde(default)]
    pub reference: Option<f64>,
    /// How far (percent of the reference) the figure may be from it to
    /// count as agreeing.
    #[serde(default)]
    pub tolerance_pct: Option<f64>,
    /// Figures added to the one at `at` before scaling, each a path into
    /// the same result (e.g. the stages that make a total).
    #[serde(default)]
    pub add: Vec<String>,
    /// A path into the same result that says the figure cannot exist here
    /// (e.g. `/flags/[code=energy_unavailable]`): when the figure is absent
    /// and this finds something, the cell reads "not available", with the
    /// reason found there under the table, instead of `n/a`.
    #[serde(default)]
    pub unavailable: Option<String>,
    /// Show the value at `at` as text instead of a figure: a string as it
    /// is, a number or boolean as JSON writes it, a list of those joined by
    /// ", ", null as `-`.
    #[serde(default)]
    pub as_text: bool,
    /// A second path into the same document whose figure is subtracted
    /// before scaling: a time from an origin (`/steps/[point=netif_rx]/t_ns`).
    #[serde(default)]
    pub minus: Option<String>,
}

impl CellSpec {
    /// The JSON pointers the cell reads besides `at`, each with its key.
    pub fn more_paths(&self) -> impl Iterator<Item = (&'static str, &String)> {
        (self.add.iter().map(|p| ("add", p)))
            .chain(self.unavailable.iter().map(|p| ("unavailable", p)))
            .chain(self.minus.iter().map(|p| ("minus", p)))
    }

    /// The keys set on the cell that read its test's result besides `at`
    /// (a cell without `test` may set none of them).
    pub fn reads(&self) -> impl Iterator<Item = &'static str> + '_ {
        (self.more_paths().map(|(key, _)| key)).chain(self.as_text.then_some("as_text"))
    }
}

/// What a cell reads when its result says the figure cannot exist here.
pub const NOT_AVAILABLE: &str = "not available";

/// A table with its figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TableResult {
    /// The title.
    pub title: String,
    /// Column headings.
    pub columns: Vec<String>,
    /// Where the reference figures come from.
    pub reference: Option<String>,
    /// The rows.
    pub rows: Vec<RowResult>,
    /// A note under the table.
    pub note: Option<String>,
    /// The flags the cells are marked with, numbered from 1.
    pub footnotes: Vec<Footnote>,
}

/// A row with its figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RowResult {
    /// The label.
    pub label: String,
    /// The cells.
    pub cells: Vec<CellResult>,
    /// Why the figures differ from the reference ones.
    pub why: Option<String>,
}

/// A cell with its figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CellResult {
    /// The figure, scaled (None: a text cell, an empty one, or not in the
    /// result: see `missing`).
    pub value: Option<f64>,
    /// Digits to show.
    pub digits: u8,
    /// A fixed text.
    pub text: Option<String>,
    /// Why a figure asked for is absent (the test failed, the pointer
    /// found nothing, the value is not a number).
    pub missing: Option<String>,
    /// The reference figure.
    pub reference: Option<f64>,
    /// Whether the figure is within `tolerance_pct` of the reference (None
    /// without both).
    pub within_tolerance: Option<bool>,
    /// Footnote numbers of the flags that concern the figure.
    pub marks: Vec<u32>,
    /// Why the result says the figure cannot exist here (the cell's
    /// `unavailable` path found this); the cell's text is then
    /// [`NOT_AVAILABLE`].
    #[serde(default)]
    pub unavailable: Option<String>,
}

impl CellResult {
    /// Cell `c` before its test's result is read: its fixed text and
    /// reference, no figure.
    fn unread(c: &CellSpec) -> Self {
        Self {
            value: None,
            digits: c.digits.unwrap_or(2),
            text: c.text.clone(),
            missing: None,
            reference: c.reference,
            within_tolerance: None,
            marks: Vec::new(),
            unavailable: None,
        }
    }
}

/// A flag a cell is marked with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Footnote {
    /// Its number in the table.
    pub mark: u32,
    /// The test that raised it.
    pub test: String,
    /// The flag's code.
    pub code: String,
    /// Its severity.
    pub severity: Severity,
    /// Its message.
    pub message: String,
}

/// One step of a cell's path: an RFC 6901 token (`runs`, `0`), or a
/// selector `[KEY=VALUE]` (or several, `[K1=V1,K2=V2]`, all to hold) that
/// picks the first element of an array whose field KEY (dotted for a
/// nested one: `params.send_path`) equals VALUE
/// (strings as they are; numbers as numbers, so `1e8` matches
/// 100000000; booleans as `true`/`false`).
fn step<'a>(v: &'a Value, token: &str) -> Option<&'a Value> {
    if let Some(sel) = token.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        let conditions: Vec<(&str, &str)> = sel
            .split(',')
            .map(|c| c.split_once('='))
            .collect::<Option<_>>()?;
        let holds = |e: &Value, key: &str, want: &str| {
            let field = key.split('.').try_fold(e, member);
            match field {
                Some(Value::String(s)) => s == want,
                Some(Value::Number(n)) => n.as_f64().is_some_and(|n| want.parse() == Ok(n)),
                Some(Value::Bool(b)) => want.parse() == Ok(*b),
                _ => false,
            }
        };
        let matches = |e: &Value| conditions.iter().all(|(k, w)| holds(e, k, w));
        return v.as_array()?.iter().find(|e| matches(e));
    }
    let t = token.replace("~1", "/").replace("~0", "~");
    match (v, t.parse::<usize>()) {
        (Value::Array(a), Ok(i)) => a.get(i),
        _ => member(v, &t),
    }
}

/// Field `name` of an object, or the value of the pair named `name` in a
/// list of `[name, value]` pairs (a sweep point's `settings`:
/// `[["size", "512"], ["reflector-copy", "on"]]`).
fn member<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => m.get(name),
        Value::Array(pairs) => pairs.iter().find_map(|p| match p.as_array()?.as_slice() {
            [Value::String(k), value] if k == name => Some(value),
            _ => None,
        }),
        _ => None,
    }
}

/// Every value on the way from `doc` to `path` (a cell's `at`), `doc`
/// first; shorter than the path when a step finds nothing.
fn walk<'a>(doc: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut out = vec![doc];
    for token in path.split('/').skip(1) {
        match out.last().and_then(|v| step(v, token)) {
            Some(v) => out.push(v),
            None => break,
        }
    }
    out
}

/// The value at `path` in `doc` (see [`CellSpec::at`]).
pub fn resolve<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    let steps = path.split('/').skip(1).count();
    let on_way = walk(doc, path);
    (on_way.len() == steps + 1)
        .then(|| on_way.last().copied())
        .flatten()
}

/// The warning and invalid flags (code, severity, message) of the result
/// the figure at `path` belongs to: the `flags` array of the deepest object
/// on the way that has one (a run of a multi-run document carries its own;
/// the document's own flags gather every run's, and count only for figures
/// outside any run).
fn flags_on_path(doc: &Value, path: &str) -> Vec<(String, Severity, String)> {
    let on_way = walk(doc, path);
    let Some(flags) = on_way
        .iter()
        .rev()
        .find_map(|v| v.get("flags").and_then(Value::as_array))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for f in flags {
        let sev = f
            .get("severity")
            .and_then(|s| serde_json::from_value::<Severity>(s.clone()).ok());
        let (Some(code), Some(sev)) = (f.get("code").and_then(Value::as_str), sev) else {
            continue;
        };
        if sev != Severity::Info {
            let msg = f.get("message").and_then(Value::as_str).unwrap_or_default();
            out.push((code.to_string(), sev, msg.to_string()));
        }
    }
    out
}

/// The tables of `specs` filled from the tests' documents (`docs`: test id
/// to its result document, or to why there is none).
pub fn fill(
    specs: &[TableSpec],
    docs: &BTreeMap<String, Result<Value, String>>,
) -> Vec<TableResult> {
    specs.iter().map(|t| fill_one(t, docs)).collect()
}

fn fill_one(spec: &TableSpec, docs: &BTreeMap<String, Result<Value, String>>) -> TableResult {
    let mut footnotes: Vec<Footnote> = Vec::new();
    let mut rows: Vec<RowResult> = spec
        .row
        .iter()
        .map(|r| RowResult {
            label: r.label.clone(),
            why: r.why.clone(),
            cells: r
                .cells
                .iter()
                .map(|c| cell(c, docs, &mut footnotes))
                .collect(),
        })
        .collect();
    if let Some(each) = &spec.each {
        rows.extend(each_rows(each, docs, &mut footnotes));
    }
    TableResult {
        title: spec.title.clone(),
        columns: spec.columns.clone(),
        reference: spec.reference.clone(),
        note: spec.note.clone(),
        rows,
        footnotes,
    }
}

/// The rows of `[table.each]`: one per element of the list (at most
/// `limit`), each cell read at the element's own path; one row `(none)`
/// whose cells say why when the list cannot be read.
fn each_rows(
    each: &EachSpec,
    docs: &BTreeMap<String, Result<Value, String>>,
    notes: &mut Vec<Footnote>,
) -> Vec<RowResult> {
    let test = &each.test;
    let list = match docs.get(test) {
        Some(Ok(doc)) => match resolve(doc, &each.at) {
            Some(Value::Array(list)) => Ok(list),
            Some(_) => Err(format!(
                "{} is not a list in test '{test}'s result",
                each.at
            )),
            None => Err(format!("no {} in test '{test}'s result", each.at)),
        },
        Some(Err(why)) => Err(why.clone()),
        None => Err(format!("test '{test}' did not run")),
    };
    let list = match list {
        Ok(list) => list,
        Err(why) => {
            // A text cell reads nothing: it keeps its text.
            let cells = (each.cells.iter())
                .map(|c| CellResult {
                    missing: c.text.is_none().then(|| why.clone()),
                    ..CellResult::unread(c)
                })
                .collect();
            return vec![RowResult {
                label: "(none)".into(),
                cells,
                why: None,
            }];
        }
    };
    let limit = each.limit.unwrap_or(usize::MAX);
    (list.iter().enumerate().take(limit))
        .map(|(i, element)| RowResult {
            label: template(&each.label, element),
            why: None,
            cells: (each.cells.iter())
                .map(|c| {
                    // `at` and `add` inside the element; a fixed text
                    // reads nothing.
                    let inside = |p: &String| format!("{}/{i}{p}", each.at);
                    let at = CellSpec {
                        test: c.text.is_none().then(|| test.clone()),
                        at: inside(&c.at),
                        add: c.add.iter().map(inside).collect(),
                        ..c.clone()
                    };
                    cell(&at, docs, notes)
                })
                .collect(),
        })
        .collect()
}

/// `text` with each `{KEY}` replaced by `element`'s field KEY (dotted for a
/// nested one) as [`as_text`] shows it, `-` when absent; a `{` without
/// its `}` stays as it is.
pub fn template(text: &str, element: &Value) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        out.push_str(&rest[..open]);
        let key = &rest[open + 1..close];
        let field = key.split('.').try_fold(element, member);
        out.push_str(&field.and_then(as_text).unwrap_or_else(|| "-".into()));
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// A value as a cell's text: a string as it is, a number or boolean as
/// JSON writes it, null as `-`, a list of those joined by ", "; None for
/// an object or a list holding one.
pub fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => Some("-".into()),
        Value::String(s) => Some(s.clone()),
        Value::Number(_) | Value::Bool(_) => Some(v.to_string()),
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::Array(_) => None,
                other => as_text(other),
            })
            .collect::<Option<Vec<_>>>()
            .map(|parts| parts.join(", ")),
        Value::Object(_) => None,
    }
}

/// The figure at `minus` in `doc` (0 without one), or why there is none.
fn origin(doc: &Value, c: &CellSpec, test: &str) -> Result<f64, String> {
    let Some(m) = &c.minus else { return Ok(0.0) };
    resolve(doc, m)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("no figure at {m} (minus) in test '{test}'s result"))
}

fn cell(
    c: &CellSpec,
    docs: &BTreeMap<String, Result<Value, String>>,
    notes: &mut Vec<Footnote>,
) -> CellResult {
    let mut out = CellResult::unread(c);
    let Some(test) = &c.test else { return out };
    let doc = match docs.get(test) {
        Some(Ok(doc)) => doc,
        Some(Err(why)) => {
            out.missing = Some(why.clone());
            return out;
        }
        None => {
            out.missing = Some(format!("test '{test}' did not run"));
            return out;
        }
    };
    let paths = || std::iter::once(&c.at).chain(&c.add);
    if c.as_text {
        match resolve(doc, &c.at) {
            Some(v) => match as_text(v) {
                Some(t) => out.text = Some(t),
                None => {
                    out.missing = Some(format!(
                        "{} is not a value to show in test '{test}'s result",
                        c.at
                    ))
                }
            },
            None => out.missing = Some(format!("no {} in test '{test}'s result", c.at)),
        }
    } else {
        let figures: Result<Vec<f64>, String> = paths()
            .map(|at| match resolve(doc, at).map(|v| (v, v.as_f64())) {
                Some((_, Some(x))) => Ok(x),
                Some((Value::Null, None)) => Err(format!("{at} is null in test '{test}'s result")),
                Some((_, None)) => Err(format!("{at} is not a number in test '{test}'s result")),
                None => Err(format!("no {at} in test '{test}'s result")),
            })
            .collect();
        let value = figures.and_then(|x| Ok(x.iter().sum::<f64>() - origin(doc, c, test)?));
        match value {
            Ok(v) => out.value = Some(v * c.scale.unwrap_or(1.0)),
            Err(why) => {
                match (c.unavailable.as_deref()).and_then(|u| Some((resolve(doc, u)?, u))) {
                    Some((said, path)) => {
                        out.text = Some(NOT_AVAILABLE.to_string());
                        out.unavailable = Some(reason(said, path));
                    }
                    None => out.missing = Some(why),
                }
            }
        }
    }
    if let (Some(v), Some(r), Some(tol)) = (out.value, c.reference, c.tolerance_pct) {
        out.within_tolerance = Some(r != 0.0 && ((v - r) / r).abs() * 100.0 <= tol);
    }
    // A text read from the result (a name, a hint) is no figure a flag
    // could concern.
    let mut flags: Vec<(String, Severity, String)> = Vec::new();
    if !c.as_text {
        for f in paths().flat_map(|at| flags_on_path(doc, at)) {
            if !flags.contains(&f) {
                flags.push(f);
            }
        }
    }
    for (code, severity, message) in flags {
        let mark = match notes.iter().find(|n| n.test == *test && n.code == code) {
            Some(n) => n.mark,
            None => {
                let mark = u32::try_from(notes.len() + 1).unwrap_or(u32::MAX);
                notes.push(Footnote {
                    mark,
                    test: test.clone(),
                    code,
                    severity,
                    message,
                });
                mark
            }
        };
        if !out.marks.contains(&mark) {
            out.marks.push(mark);
        }
    }
    out
}

/// What an `unavailable` path found, as a reason: the text there, or the
/// `message` (a flag's) or `reason` (a skipped benchmark's) of the object
/// there, else the path itself.
fn reason(said: &Value, path: &str) -> String {
    let field = |k| said.get(k).and_then(Value::as_str);
    match said {
        Value::String(s) => s.clone(),
        _ => field("message")
            .or_else(|| field("reason"))
            .map_or_else(|| format!("{path} in the result"), str::to_string),
    }
}
