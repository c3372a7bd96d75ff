//! `linerate compare ID ID…`: stored results' figures side by side
//! (`linerate_core::compare`), each against the first, rendered by
//! `linerate_report::compare`.

use anyhow::anyhow;
use clap::Args;
use linerate_core::compare::{compare, Compared, Comparison, SCHEMA, VERSION};
use linerate_core::result::Envelope;
use serde_json::Value;

use crate::output::{print, print_json};
use crate::{Ctx, Failure};

// Flags of `linerate compare`.
#[derive(Debug, Args)]
pub(crate) struct CompareArgs {
    /// Result ids (`linerate history list`), at least two; the first is the
    /// baseline. Without ids: --last N, or every result with --tag.
    pub(crate) ids: Vec<i64>,
    /// The newest N results (of --command, with --tag), the oldest of them
    /// the baseline.
    #[arg(long, value_name = "N", conflicts_with = "ids", value_parser = clap::value_parser!(u16).range(2..))]
    pub(crate) last: Option<u16>,
    /// With --last or --tag: only this command's results.
    #[arg(long, value_name = "NAME", conflicts_with = "ids")]
    pub(crate) command: Option<String>,
    /// Exit 1 when a figure regressed by more than PCT percent beyond the
    /// runs' spread (without a known spread: by more than PCT at all).
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    pub(crate) fail_on_regression: Option<f64>,
    /// One JSON document (schema linerate.compare, version 1).
    #[arg(long)]
    pub(crate) json: bool,
}

fn parse_pct(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("'{s}' is not a percentage (e.g. 5)")),
    }
}

/// `linerate compare`.
pub(crate) fn run(args: &CompareArgs, ctx: &Ctx) -> Result<(), Failure> {
    let ids: Vec<i64> = if !args.ids.is_empty() {
        args.ids.clone()
    } else if args.last.is_some() || ctx.tag().is_some() {
        let last = args.last.map(usize::from);
        let found = crate::history::select(ctx, args.command.as_deref(), last)?;
        found.iter().map(|s| s.id).collect()
    } else {
        return Err(Failure::Usage(anyhow!(
            "give result ids (linerate history list), --last N or --tag TEXT"
        )));
    };
    if ids.len() < 2 {
        return Err(Failure::Usage(anyhow!(
            "comparing needs two results or more; {} selected",
            ids.len()
        )));
    }
    let found = crate::history::documents(ctx, &ids)?;
    let docs: Vec<Value> = found.iter().map(|(d, _)| d.clone()).collect();
    let rows = compare(&docs)?;
    let results = ids
        .iter()
        .zip(&found)
        .map(|(&id, (d, tag))| Compared {
            id,
            schema: text(d, "schema").unwrap_or_default(),
            started_at: text(d, "started_at"),
            tag: tag.clone(),
        })
        .collect();
    let c = Comparison::new(results, rows, args.fail_on_regression);
    if args.json {
        let doc = Envelope::new(SCHEMA, VERSION, c.clone()).on(linerate_io::host::facts());
        print_json(&doc)?;
    } else {
        let labels: Vec<String> = c.results.iter().map(label).collect();
        print(&linerate_report::compare::render(
            &labels, &c.figures, ctx.width,
        ))?;
    }
    match (c.failing.len(), c.fail_on_regression_pct) {
        (0, _) | (_, None) => Ok(()),
        (n, Some(pct)) => Err(Failure::Check(anyhow!(
            "{n} figure(s) regressed by more than {pct} %: {}",
            c.failing.join("; ")
        ))),
    }
}

fn text(d: &Value, key: &str) -> Option<String> {
    d.get(key).and_then(Value::as_str).map(str::to_string)
}

/// `result 12, started 2026-11-23 10:00:05, tag nightly`.
fn label(r: &Compared) -> String {
    let mut l = format!("result {}", r.id);
    if let Some(w) = r.started_at.as_deref().and_then(|s| s.get(..19)) {
        l += &format!(", started {}", w.replace('T', " "));
    }
    if let Some(t) = &r.tag {
        l += &format!(", tag {t}");
    }
    l
}
