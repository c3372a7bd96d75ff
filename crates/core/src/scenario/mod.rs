//! Scenarios: an experiment as a TOML file — the bed, the tests (each a
//! measuring command's options, keyed by their long flag names), the tables
//! to print with reference figures beside the measured ones.
//!
//! Sans-IO: this module parses and checks the text it is given, builds each
//! test's command line, identifies the file by a content hash, and turns the
//! tests' JSON documents into the tables' cells ([`table`]). Reading the
//! file, parsing each command line with the binary's own flag parser,
//! running and printing belong to the binary.

pub mod table;

use schemars::JsonSchema;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The schema name of `linerate scenario run --json`.
pub const SCHEMA: &str = "linerate.scenario";
/// Its version.
pub const VERSION: u32 = 1;

/// The commands a test may run: those that produce one result document.
pub const COMMANDS: [&str; 6] = [
    "throughput",
    "latency",
    "rfc2544",
    "journey",
    "ceilings",
    "calc",
];

/// Option keys a test may not set: the scenario sets them (`bed`), or they
/// change what the command prints, which the scenario captures itself.
pub const RESERVED: [&str; 4] = ["bed", "json", "csv", "json-stream"];

/// A scenario file, as written.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// `[scenario]`: what it is.
    pub scenario: Header,
    /// `[bed]`: the testbed the tests run on, keyed as `linerate testbed up`'s
    /// long flags (topo, link, shaper, delay, mtu, offload …). None: the
    /// tests run where their own options point (loopback, a host).
    #[serde(default)]
    pub bed: Option<BTreeMap<String, toml::Value>>,
    /// `[[test]]`: the measurements, in order.
    #[serde(default)]
    pub test: Vec<Test>,
    /// `[[table]]`: what to print.
    #[serde(default)]
    pub table: Vec<table::TableSpec>,
}

/// `[scenario]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// A short identifier (a-z, 0-9, '-', '_'), saved with each result.
    pub name: String,
    /// One line saying what the scenario reproduces.
    pub title: String,
    /// The source it replays (e.g. "NXP AN11053"), if any.
    #[serde(default)]
    pub seed: Option<String>,
    /// Longer text: the experiment, its setup, what to look at.
    #[serde(default)]
    pub description: Option<String>,
}

/// `[[test]]`: one run of a measuring command.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Test {
    /// How tables refer to this test's result.
    pub id: String,
    /// The command: one of [`COMMANDS`].
    pub command: String,
    /// What a table row calls this test when it has no label of its own.
    #[serde(default)]
    pub label: Option<String>,
    /// Positional arguments of the command (e.g. the latency responder).
    #[serde(default)]
    pub args: Vec<String>,
    /// Options that replace the ones of the same name with `--short`
    /// (shortened trials for CI and quick checks).
    #[serde(default)]
    pub short: BTreeMap<String, toml::Value>,
    /// The command's options: each key a long flag name without `--`
    /// (`path`, `recv-path`, `time`); true for a switch, a string or number
    /// for a value, an array for a flag given once per element.
    #[serde(flatten)]
    pub options: BTreeMap<String, toml::Value>,
}

/// What `linerate scenario run --json` prints inside the common envelope:
/// the scenario, each test's command line and result document, the tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScenarioResult {
    /// `[scenario] name`.
    pub name: String,
    /// `[scenario] title`.
    pub title: String,
    /// `[scenario] seed`.
    pub seed: Option<String>,
    /// SHA-256 of the scenario file's text, hex.
    pub hash: String,
    /// Whether the trials were shortened (`--short`).
    pub short: bool,
    /// The bed's `linerate testbed up` command line, when there was one.
    pub bed: Option<Vec<String>>,
    /// The tests, in the order they ran.
    pub tests: Vec<TestRun>,
    /// The tables.
    pub tables: Vec<table::TableResult>,
}

/// One test as it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TestRun {
    /// Its id.
    pub id: String,
    /// Its command line after `linerate`.
    pub argv: Vec<String>,
    /// Its result document (the command's `--json` output), when it ran.
    pub result: Option<Value>,
    /// Why it has no result (a setup error), when it has none.
    pub error: Option<String>,
    /// The history id it was saved as.
    pub saved_as: Option<i64>,
}

/// A scenario file that cannot be used, with where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// 1-based line of the offending key (0: the file as a whole).
    pub line: usize,
    /// The key, as a dotted path (`test[2].path`), when one is at fault.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, &self.key) {
            (0, None) => write!(f, "{}", self.message),
            (0, Some(k)) => write!(f, "{k}: {}", self.message),
            (l, None) => write!(f, "line {l}: {}", self.message),
            (l, Some(k)) => write!(f, "line {l}: {k}: {}", self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

/// A parsed and checked scenario with its source (for error lines) and its
/// content hash.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The file's content.
    pub scenario: Scenario,
    /// The text it was parsed from.
    pub source: String,
    /// SHA-256 of the text, hex: identifies this exact scenario in the history.
    pub hash: String,
}

/// SHA-256 of `text`, lowercase hex.
pub fn content_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.get(..at.min(text.len()))
        .map_or(1, |t| t.matches('\n').count() + 1)
}

/// Whether a scenario or bed name is acceptable.
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 40
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

impl Loaded {
    /// Parses `text` and checks everything that does not need the
    /// commands' own parsers: the keys and their types, names, unique test
    /// ids, known commands, reserved options, and every table cell naming a
    /// test that exists.
    pub fn parse(text: &str) -> Result<Self, ScenarioError> {
        let scenario: Scenario = toml::from_str(text).map_err(|e| ScenarioError {
            line: e.span().map_or(0, |s| line_of(text, s.start)),
            key: None,
            message: e
                .message()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; "),
        })?;
        let loaded = Self {
            scenario,
            source: text.to_string(),
            hash: content_hash(text),
        };
        loaded.check()?;
        Ok(loaded)
    }

    /// An error at `key` of the `index`-th `[[section]]` (or `[section]`
    /// when `index` is None).
    pub fn error_at(
        &self,
        section: &str,
        index: Option<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> ScenarioError {
        let name = match index {
            Some(i) => format!("{section}[{}]", i + 1),
            None => section.to_string(),
        };
        ScenarioError {
            line: self.key_line(section, index, key),
            key: Some(match key.is_empty() {
                true => name,
                false => format!("{name}.{key}"),
            }),
            message: message.into(),
        }
    }

    /// The line where `key` is set in the `index`-th `[[section]]` (or
    /// `[section]`), found in the text: the section's header line when the
    /// key is not written on a line of its own there (an inline table, a
    /// default), 0 when the section is not found either.
    pub fn key_line(&self, section: &str, index: Option<usize>, key: &str) -> usize {
        let header = match index {
            Some(_) => format!("[[{section}]]"),
            None => format!("[{section}]"),
        };
        let lines: Vec<&str> = self.source.lines().collect();
        let mut starts = (0..lines.len()).filter(|&i| lines[i].trim() == header);
        let Some(start) = starts.nth(index.unwrap_or(0)) else {
            return 0;
        };
        let end = (start + 1..lines.len())
            .find(|&i| {
                let t = lines[i].trim_start();
                t.starts_with("[[") && !t.starts_with(&format!("[[{section}."))
                    || t.starts_with('[')
                        && !t.starts_with("[[")
                        && !t.starts_with(&format!("[{section}."))
            })
            .unwrap_or(lines.len());
        let written = |l: &str| {
            let t = l.trim_start();
            let k = t
                .split('=')
                .next()
                .unwrap_or_default()
                .trim()
                .trim_matches('"');
            t.contains('=') && k == key
        };
        (start + 1..end)
            .find(|&i| written(lines[i]))
            .map_or(start + 1, |i| i + 1)
    }

    fn check(&self) -> Result<(), ScenarioError> {
        let s = &self.scenario;
        if !valid_name(&s.scenario.name) {
            return Err(self.error_at(
                "scenario",
                None,
                "name",
                "1-40 characters of a-z, 0-9, '-', '_'",
            ));
        }
        if s.test.is_empty() {
            return Err(ScenarioError {
                line: 0,
                key: Some("test".into()),
                message: "no [[test]]: a scenario runs at least one test".into(),
            });
        }
        for (i, t) in s.test.iter().enumerate() {
            if !valid_name(&t.id) {
                return Err(self.error_at(
                    "test",
                    Some(i),
                    "id",
                    "1-40 characters of a-z, 0-9, '-', '_'",
                ));
            }
            if s.test[..i].iter().any(|o| o.id == t.id) {
                return Err(self.error_at(
                    "test",
                    Some(i),
                    "id",
                    format!("'{}' is used by an earlier test", t.id),
                ));
            }
            if !COMMANDS.contains(&t.command.as_str()) {
                return Err(self.error_at(
                    "test",
                    Some(i),
                    "command",
                    format!(
                        "'{}' is not a command a test can run ({})",
                        t.command,
                        COMMANDS.join(", ")
                    ),
                ));
            }
            for (key, value) in t.options.iter().chain(&t.short) {
                if RESERVED.contains(&key.as_str()) {
                    return Err(self.error_at(
                        "test",
                        Some(i),
                        key,
                        "set by the scenario, not by a test ([bed] gives --bed; the result is captured as JSON)",
                    ));
                }
                option_words(key, value).map_err(|m| self.error_at("test", Some(i), key, m))?;
            }
        }
        if let Some(bed) = &s.bed {
            for (key, value) in bed {
                if key == "name" || key == "dry-run" || key == "json" {
                    return Err(self.error_at(
                        "bed",
                        None,
                        key,
                        "set by the scenario (the bed gets a name of its own and is removed after)",
                    ));
                }
                option_words(key, value).map_err(|m| self.error_at("bed", None, key, m))?;
            }
        }
        let mut rows_before = 0;
        for (ti, t) in s.table.iter().enumerate() {
            if t.row.is_empty() && t.each.is_none() {
                return Err(self.error_at(
                    "table",
                    Some(ti),
                    "",
                    "no [[table.row]] and no [table.each]: the table has nothing to show",
                ));
            }
            for (ri, row) in t.row.iter().enumerate() {
                // Rows are `[[table.row]]` headers counted through the file.
                let refuse = |message: String| ScenarioError {
                    line: self.key_line("table.row", Some(rows_before + ri), "cells"),
                    key: Some(format!("table[{}].row[{}].cells", ti + 1, ri + 1)),
                    message,
                };
                if row.cells.len() != t.columns.len() {
                    return Err(refuse(format!(
                        "row '{}' has {} cells for {} columns",
                        row.label,
                        row.cells.len(),
                        t.columns.len()
                    )));
                }
                for cell in &row.cells {
                    let Some(test) = &cell.test else {
                        if let Some(key) = cell.reads().next() {
                            return Err(refuse(format!(
                                "row '{}': a cell with {key} names no test",
                                row.label
                            )));
                        }
                        continue;
                    };
                    if !s.test.iter().any(|x| x.id == *test) {
                        return Err(refuse(format!(
                            "row '{}' reads test '{test}', which the scenario does not run",
                            row.label
                        )));
                    }
                    check_cell(cell, false)
                        .map_err(|m| refuse(format!("row '{}': {m}", row.label)))?;
                }
            }
            rows_before += t.row.len();
            if let Some(each) = &t.each {
                self.check_each(ti, t.columns.len(), each)?;
            }
        }
        Ok(())
    }

    /// Checks table `ti`'s `[table.each]`: its test exists, its limit
    /// keeps a row, it has one cell per column, no cell names a test and
    /// each cell is as [`check_cell`] wants it.
    fn check_each(
        &self,
        ti: usize,
        columns: usize,
        each: &table::EachSpec,
    ) -> Result<(), ScenarioError> {
        let refuse = |key: &str, message: String| ScenarioError {
            line: self.sub_key_line("table", ti, "each", key),
            key: Some(format!("table[{}].each.{key}", ti + 1)),
            message,
        };
        if !self.scenario.test.iter().any(|x| x.id == each.test) {
            return Err(refuse(
                "test",
                format!("'{}' is not a test the scenario runs", each.test),
            ));
        }
        if !each.at.starts_with('/') {
            return Err(refuse(
                "at",
                format!("'{}' is not a JSON pointer (it starts with '/')", each.at),
            ));
        }
        if each.limit == Some(0) {
            return Err(refuse("limit", "0 rows: the table would show none".into()));
        }
        if each.cells.len() != columns {
            return Err(refuse(
                "cells",
                format!("{} cells for {columns} columns", each.cells.len()),
            ));
        }
        for cell in &each.cells {
            if cell.test.is_some() {
                return Err(refuse(
                    "cells",
                    "a cell of [table.each] reads the list's own test: no 'test' here".into(),
                ));
            }
            check_cell(cell, true).map_err(|m| refuse("cells", m))?;
        }
        Ok(())
    }

    /// The line where `key` is set in the `[SECTION.SUB]` table of the
    /// `index`-th `[[SECTION]]`: the `[SECTION.SUB]` header's line when the
    /// key is not written on a line of its own there, the `[[SECTION]]`
    /// header's line when there is no such table (an inline one), 0 when
    /// the section is not found.
    pub fn sub_key_line(&self, section: &str, index: usize, sub: &str, key: &str) -> usize {
        let lines: Vec<&str> = self.source.lines().collect();
        let header = format!("[[{section}]]");
        let Some(start) = (0..lines.len())
            .filter(|&i| lines[i].trim() == header)
            .nth(index)
        else {
            return 0;
        };
        let sub_header = format!("[{section}.{sub}]");
        let end = (start + 1..lines.len())
            .find(|&i| lines[i].trim() == header)
            .unwrap_or(lines.len());
        let Some(at) = (start + 1..end).find(|&i| lines[i].trim() == sub_header) else {
            return start + 1;
        };
        (at + 1..end)
            .take_while(|&i| !lines[i].trim_start().starts_with('['))
            .find(|&i| {
                let t = lines[i].trim_start();
                t.contains('=') && t.split('=').next().unwrap_or_default().trim() == key
            })
            .map_or(at + 1, |i| i + 1)
    }

    /// Test `index`'s command line after the program name: the command, its
    /// options (with `short`, the `[test.short]` ones instead of those of
    /// the same name), `--bed BED` when given, then its positional
    /// arguments.
    pub fn argv(&self, index: usize, bed: Option<&str>, short: bool) -> Vec<String> {
        let t = &self.scenario.test[index];
        let mut options = t.options.clone();
        if short {
            options.extend(t.short.clone());
        }
        let mut argv = vec![t.command.clone()];
        for (key, value) in &options {
            // Checked in `parse`.
            argv.extend(option_words(key, value).unwrap_or_default());
        }
        if let Some(b) = bed {
            argv.extend(["--bed".to_string(), b.to_string()]);
        }
        argv.extend(t.args.iter().cloned());
        argv
    }

    /// `linerate testbed up NAME …`'s arguments after the program name, from `[bed]`.
    pub fn bed_argv(&self, name: &str) -> Option<Vec<String>> {
        let bed = self.scenario.bed.as_ref()?;
        let mut argv = vec!["testbed".to_string(), "up".to_string(), name.to_string()];
        for (key, value) in bed {
            argv.extend(option_words(key, value).unwrap_or_default());
        }
        Some(argv)
    }

    /// The key of test `index` (or of `[bed]` with None) that a flag in an
    /// error message names (`--recv-path` -> `recv-path`), with its line.
    pub fn key_of_message(&self, index: Option<usize>, message: &str) -> Option<(String, usize)> {
        let keys: Vec<&String> = match index {
            Some(i) => {
                let t = &self.scenario.test[i];
                t.options.keys().chain(t.short.keys()).collect()
            }
            None => self.scenario.bed.as_ref()?.keys().collect(),
        };
        let (section, idx) = match index {
            Some(i) => ("test", Some(i)),
            None => ("bed", None),
        };
        keys.into_iter()
            .filter(|k| {
                let flag = format!("--{k}");
                message.match_indices(&flag).any(|(at, _)| {
                    let next = message[at + flag.len()..].chars().next();
                    !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
                })
            })
            .max_by_key(|k| k.len())
            .map(|k| (k.clone(), self.key_line(section, idx, k)))
    }
}

/// Checks a cell's paths and how its keys combine: each path a JSON
/// pointer (`at` may be empty: the whole document, or in `[table.each]`
/// the element, as `add` may there), and `as_text` alone (a text has no
/// addends, no origin and no "not available").
fn check_cell(cell: &table::CellSpec, in_each: bool) -> Result<(), String> {
    let pointer = |key: &str, p: &str, may_be_empty: bool| match p.starts_with('/')
        || (may_be_empty && p.is_empty())
    {
        true => Ok(()),
        false => Err(format!(
            "{key} = '{p}' is not a JSON pointer (it starts with '/')"
        )),
    };
    pointer("at", &cell.at, true)?;
    for (key, p) in cell.more_paths() {
        pointer(key, p, in_each && key == "add")?;
    }
    let beside_text = cell.more_paths().map(|(k, _)| k);
    match beside_text.chain(cell.text.as_ref().map(|_| "text")).next() {
        Some(key) if cell.as_text => Err(format!(
            "as_text shows the value at `at` as it is: no {key} with it"
        )),
        _ => Ok(()),
    }
}

/// A key and its value as command-line words: `--key` for true, nothing
/// for false, `--key VALUE` for a string or number, once per element for an
/// array.
pub fn option_words(key: &str, value: &toml::Value) -> Result<Vec<String>, String> {
    if key.is_empty()
        || key.starts_with('-')
        || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err("an option is its long flag name without '--' (e.g. recv-path)".into());
    }
    let flag = format!("--{key}");
    let scalar = |v: &toml::Value| -> Result<String, String> {
        match v {
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Integer(n) => Ok(n.to_string()),
            toml::Value::Float(x) => Ok(x.to_string()),
            other => Err(format!(
                "a {} where a string or number is expected (arrays hold values of a repeated flag)",
                other.type_str()
            )),
        }
    };
    Ok(match value {
        toml::Value::Boolean(true) => vec![flag],
        toml::Value::Boolean(false) => Vec::new(),
        toml::Value::Array(items) => {
            let mut out = Vec::new();
            for v in items {
                out.extend([flag.clone(), scalar(v)?]);
            }
            out
        }
        v => vec![flag, scalar(v)?],
    })
}

/// Quotes a command-line word for display when a shell would split it.
pub fn shell_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=,:+@%".contains(&b));
    match plain {
        true => w.to_string(),
        false => format!("'{}'", w.replace('\'', r"'\''")),
    }
}

#[cfg(test)]
mod tests;
