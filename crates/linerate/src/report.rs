//! `linerate report` and the `--plot DIR` flag of the measuring commands:
//! stored result documents rendered again, as text, plots or one
//! self-contained HTML page.
//!
//! `report` takes result documents as `serde_json::Value`s whatever their
//! source ([`load`] reads files and stdin; a history store can hand its
//! documents to [`Rendered::from_value`] the same way) and recognises each
//! by its `schema` field.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _};
use clap::{Args, ValueEnum};
use linerate_core::calc::CalcResult;
use linerate_core::latency::LatencyReport;
use linerate_core::plot::{self, Named};
use linerate_core::result::Envelope;
use linerate_core::rfc2544::Rfc2544Result;
use linerate_core::throughput::model::{Scenarios, ThroughputResult};
use linerate_report::html::{page, Section};
use linerate_report::plot::{render_all, Format};
use linerate_report::table::Doc;

use crate::output::print;
use crate::Failure;

/// Bitmap or vector plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PlotFormat {
    /// SVG (text stays text; scales).
    Svg,
    /// PNG bitmaps.
    Png,
}

impl From<PlotFormat> for Format {
    fn from(f: PlotFormat) -> Self {
        match f {
            PlotFormat::Svg => Self::Svg,
            PlotFormat::Png => Self::Png,
        }
    }
}

// `--plot DIR` and `--plot-format`, shared by the commands that plot.
#[derive(Debug, Clone, Args)]
pub(crate) struct PlotArgs {
    /// Also write the result's plots into DIR (created if missing): SVG, or
    /// PNG with --plot-format png.
    #[arg(long, value_name = "DIR")]
    pub(crate) plot: Option<PathBuf>,
    /// The plots' file format.
    #[arg(long, value_enum, default_value = "svg", requires = "plot")]
    pub(crate) plot_format: PlotFormat,
}

impl PlotArgs {
    /// Writes `plots` into `--plot DIR`, if given; says on stderr what it
    /// wrote (stdout stays the result's).
    pub(crate) fn write(&self, plots: &[Named]) -> Result<(), Failure> {
        let Some(dir) = &self.plot else {
            return Ok(());
        };
        if plots.is_empty() {
            crate::output::elog!("linerate: no plot: the result holds no data to plot");
            return Ok(());
        }
        for p in write_plots(dir, plots, self.plot_format.into())? {
            crate::output::elog!("linerate: plot written: {}", p.display());
        }
        Ok(())
    }
}

/// Draws `plots` and writes each into `dir`; the paths written.
fn write_plots(dir: &Path, plots: &[Named], format: Format) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    for d in render_all(plots, format)? {
        let path = dir.join(&d.file);
        std::fs::write(&path, &d.bytes).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

// Flags of `linerate report`.
#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// Result documents: ids of stored results (`linerate history`), files
    /// as `--json` wrote them, or `-` for stdin.
    #[arg(value_name = "SOURCE", required = true)]
    pub(crate) sources: Vec<String>,
    /// Write one self-contained HTML page (tables, plots, flags,
    /// environment) to FILE instead of printing the tables.
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<PathBuf>,
    /// The page's title.
    #[arg(long, value_name = "TEXT", default_value = "linerate report")]
    pub(crate) title: String,
    #[command(flatten)]
    pub(crate) plot: PlotArgs,
}

/// Reads one SOURCE: a file, or `-` for stdin; must be one JSON document.
pub(crate) fn load(source: &str) -> anyhow::Result<serde_json::Value> {
    let text = if source == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading stdin")?;
        s
    } else {
        std::fs::read_to_string(source).with_context(|| format!("reading {source}"))?
    };
    serde_json::from_str(&text).with_context(|| format!("{source}: not a JSON document"))
}

/// One document, rendered: what the page and the terminal show of it.
#[derive(Debug)]
pub(crate) struct Rendered {
    /// Heading, schema, environment, flags and the text tables.
    pub(crate) section: Section,
    /// Its plots' data.
    pub(crate) plots: Vec<Named>,
}

/// The schemas `report` renders.
const SCHEMAS: [&str; 7] = [
    linerate_core::calc::SCHEMA,
    linerate_core::ceilings::SCHEMA,
    linerate_core::scenario::SCHEMA,
    linerate_core::latency::SCHEMA,
    linerate_core::throughput::model::SCHEMA,
    linerate_core::throughput::model::SCENARIOS_SCHEMA,
    linerate_core::rfc2544::SCHEMA,
];

fn typed<T: serde::de::DeserializeOwned>(
    v: serde_json::Value,
    source: &str,
) -> anyhow::Result<Envelope<T>> {
    serde_json::from_value(v).with_context(|| format!("{source}: not a readable document"))
}

/// A section for `doc` (text and flags filled in by the caller).
fn section_of<T>(doc: &Envelope<T>, source: &str, heading: String) -> Section {
    Section {
        heading,
        source: source.to_string(),
        schema: format!("{} version {}", doc.schema, doc.version),
        linerate_version: doc.linerate_version.clone(),
        started_at: doc.started_at.clone(),
        host: doc.host.clone(),
        flags: doc.flags.clone(),
        ..Section::default()
    }
}

/// Flags of a version-1 document (which stored none), raised again from
/// what it holds.
const REASSESSED: &str =
    "This version-1 document stored no flags: these were raised again from the figures it holds.";

impl Rendered {
    /// Renders one document, recognised by its `schema` field, into
    /// blocks that become text or HTML; `source` names it in messages and
    /// on the page.
    pub(crate) fn from_value(v: serde_json::Value, source: &str) -> anyhow::Result<Self> {
        let schema = v
            .get("schema")
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| anyhow!("{source}: no `schema` field: not a linerate result document"))?
            .to_string();
        let (section, plots) = match schema.as_str() {
            linerate_core::calc::SCHEMA => {
                let doc: Envelope<CalcResult> = typed(v, source)?;
                let mut s = section_of(&doc, source, "linerate calc: the line-rate model".into());
                s.body = linerate_report::calc::doc(&doc.result);
                (s, plot::of_calc(&doc.result))
            }
            linerate_core::latency::SCHEMA => {
                let mut doc: Envelope<LatencyReport> = typed(v, source)?;
                let reassessed = doc.version == 1 && doc.flags.is_empty();
                if reassessed {
                    doc.flags = linerate_core::latency::assess(&doc.result);
                }
                let heading = format!("linerate latency: {}", doc.result.target);
                let mut s = section_of(&doc, source, heading);
                s.flags_note = reassessed.then(|| REASSESSED.to_string());
                s.body = linerate_report::latency::blocks(&doc);
                (s, plot::of_latency(&doc.result))
            }
            linerate_core::throughput::model::SCHEMA => {
                let mut doc: Envelope<ThroughputResult> = typed(v, source)?;
                let reassessed = reassess_throughput(&mut doc);
                let heading = format!("linerate throughput: {}", doc.result.server);
                let mut s = section_of(&doc, source, heading);
                s.flags_note = reassessed.then(|| REASSESSED.to_string());
                s.body = linerate_report::throughput::blocks(&doc);
                (s, plot::of_throughput(&doc.result))
            }
            linerate_core::throughput::model::SCENARIOS_SCHEMA => {
                let mut doc: Envelope<Scenarios> = typed(v, source)?;
                let mut body = Doc::new();
                for run in &mut doc.result.runs {
                    reassess_throughput(run);
                    body.append(linerate_report::throughput::blocks(run));
                    body.blank();
                }
                let plots = throughput_plots(&doc.result.runs);
                body.append(linerate_report::throughput::scenario_blocks(&doc));
                let heading = match doc.result.runs.first() {
                    Some(r) => format!(
                        "linerate throughput: {} (send paths compared)",
                        r.result.server
                    ),
                    None => "linerate throughput (send paths compared)".into(),
                };
                let mut s = section_of(&doc, source, heading);
                s.body = body;
                (s, plots)
            }
            linerate_core::rfc2544::SCHEMA => {
                let mut doc: Envelope<Rfc2544Result> = typed(v, source)?;
                // Version 1 stored neither derived figures nor flags.
                let reassessed = doc.version == 1 && doc.flags.is_empty();
                if doc.version == 1 {
                    doc.result.sizes.iter_mut().for_each(|s| s.derive());
                }
                if reassessed {
                    doc.flags = linerate_core::rfc2544::assess(&doc.result);
                }
                let heading = format!(
                    "linerate rfc2544 at {}",
                    linerate_core::units::BitRate::from_bps(doc.result.link_bits_per_s)
                );
                let mut s = section_of(&doc, source, heading);
                s.flags_note = reassessed.then(|| REASSESSED.to_string());
                s.body = linerate_report::rfc2544::blocks(&doc);
                (s, plot::of_rfc2544(&doc.result))
            }
            linerate_core::scenario::SCHEMA => scenario_section(v, source)?,
            linerate_core::ceilings::SCHEMA => {
                let doc: Envelope<linerate_core::ceilings::CeilingsResult> = typed(v, source)?;
                let mut s = section_of(&doc, source, "linerate ceilings".to_string());
                // Laid out as the command prints it; the flags are the
                // section's own.
                s.body = Doc::pre(linerate_report::ceilings::render(
                    &doc.result,
                    &[],
                    linerate_report::table::Width::new(false),
                ));
                (s, Vec::new())
            }
            other => bail!(
                "{source}: `{other}` documents are not rendered by `report` (it renders {})",
                SCHEMAS.join(", ")
            ),
        };
        Ok(Self { section, plots })
    }
}

/// A scenario as one section: its tables, then each test's own rendering
/// (and plots) under its id.
fn scenario_section(v: serde_json::Value, source: &str) -> anyhow::Result<(Section, Vec<Named>)> {
    let doc: Envelope<linerate_core::scenario::ScenarioResult> = typed(v, source)?;
    let heading = format!(
        "linerate scenario {}: {}",
        doc.result.name, doc.result.title
    );
    let mut s = section_of(&doc, source, heading);
    let mut body = linerate_report::scenario::blocks(&doc);
    let mut plots = Vec::new();
    for t in &doc.result.tests {
        let Some(result) = &t.result else { continue };
        // A test whose documents `report` does not render (journey) is
        // shown by the scenario's tables alone.
        let schema = result.get("schema").and_then(serde_json::Value::as_str);
        if let Some(other) = schema.filter(|s| !SCHEMAS.contains(s)) {
            body.blank();
            body.para(
                "",
                "  ",
                format!("Test {}: {other} documents are not rendered by `report`; the scenario's tables hold its figures", t.id),
            );
            continue;
        }
        let test = Rendered::from_value(result.clone(), &format!("{source}: test {}", t.id))?;
        body.blank();
        body.line(format!("Test {}: {}", t.id, test.section.heading));
        body.append(test.section.body);
        plots.extend(test.plots);
    }
    s.body = body;
    Ok((s, plots))
}

/// A version-1 throughput document stored neither its derived figures nor
/// flags: both are computed again from what it holds. True when the flags
/// were.
fn reassess_throughput(doc: &mut Envelope<ThroughputResult>) -> bool {
    if doc.version != 1 {
        return false;
    }
    doc.result.figures = linerate_core::throughput::assess::figures(&doc.result);
    if doc.flags.is_empty() {
        doc.flags = linerate_core::throughput::assess::assess(&doc.result);
        return true;
    }
    false
}

/// `linerate report`: each SOURCE's tables printed, or with `--html` one
/// page of them all; `--plot DIR` also writes every plot. Exits 0 once
/// rendered: the documents' flags are in what it wrote, not in its exit code.
pub(crate) fn run(args: &ReportArgs, ctx: &crate::Ctx) -> Result<(), Failure> {
    if args.sources.iter().filter(|s| *s == "-").count() > 1 {
        return Err(anyhow!("stdin (`-`) can be read once only").into());
    }
    let mut docs = Vec::new();
    for source in &args.sources {
        // A number that names no file is a result in the history.
        if let (Ok(id), false) = (source.parse::<i64>(), Path::new(source).exists()) {
            let [(doc, _tag)]: [_; 1] = crate::history::documents(ctx, &[id])?
                .try_into()
                .map_err(|_| anyhow!("history result {id}: not found"))?;
            docs.push(Rendered::from_value(doc, &format!("history result {id}"))?);
            continue;
        }
        let name = if source == "-" {
            "stdin"
        } else {
            source.as_str()
        };
        docs.push(Rendered::from_value(load(source)?, name)?);
    }
    let all_plots: Vec<Named> = docs.iter().flat_map(|d| d.plots.clone()).collect();
    args.plot.write(&dedup_names(all_plots))?;
    let Some(html) = &args.html else {
        let text: Vec<String> = docs
            .iter()
            .map(|d| d.section.body.text(ctx.width))
            .collect();
        return print(&text.join("\n"));
    };
    let mut sections = Vec::new();
    for d in docs {
        let mut s = d.section;
        for drawn in render_all(&d.plots, Format::Svg).map_err(anyhow::Error::from)? {
            let svg = String::from_utf8(drawn.bytes).map_err(anyhow::Error::from)?;
            s.plots.push((drawn.title, svg));
        }
        sections.push(s);
    }
    std::fs::write(html, page(&args.title, &sections))
        .with_context(|| format!("writing {}", html.display()))?;
    crate::output::elog!("linerate: report written: {}", html.display());
    Ok(())
}

/// Plots of several documents with distinct file names (`-2`, `-3` added
/// to a repeated name).
fn dedup_names(plots: Vec<Named>) -> Vec<Named> {
    let mut seen: Vec<String> = Vec::new();
    plots
        .into_iter()
        .map(|mut p| {
            let base = p.name.clone();
            let mut k = 1;
            while seen.contains(&p.name) {
                k += 1;
                p.name = format!("{base}-{k}");
            }
            seen.push(p.name.clone());
            p
        })
        .collect()
}

/// The plots of one or several throughput runs (several: one set per send
/// path, numbered).
pub(crate) fn throughput_plots(runs: &[Envelope<ThroughputResult>]) -> Vec<Named> {
    let mut out = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        for mut p in plot::of_throughput(&r.result) {
            if runs.len() > 1 {
                p.name = format!("{}-{}", p.name, i + 1);
            }
            out.push(p);
        }
    }
    out
}
