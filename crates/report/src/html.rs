//! One self-contained HTML page of results: the seed-style tables, the
//! plots as inline SVG, the flags and the environment each result was
//! measured in. Inline CSS only: no script, no font, image or style sheet
//! fetched from anywhere, so the file opens offline and prints (print CSS
//! keeps a figure or table on one page and drops the colours of the flag
//! boxes to borders).

use std::fmt::Write as _;

use linerate_core::result::{Flag, HostFacts, Severity};

use crate::table::{escape, Align, Doc, Table};

/// One result on the page.
#[derive(Debug, Clone, Default)]
pub struct Section {
    /// The heading (`linerate latency: 127.0.0.1`).
    pub heading: String,
    /// Where it came from (a file name, `stdin`, a history id).
    pub source: String,
    /// The document's schema and version (`linerate.latency` v2).
    pub schema: String,
    /// Which linerate wrote it, if known.
    pub linerate_version: Option<String>,
    /// When the measurement started (UTC), if known.
    pub started_at: Option<String>,
    /// The host it ran on, if known.
    pub host: Option<HostFacts>,
    /// Its flags, in the order raised.
    pub flags: Vec<Flag>,
    /// A note on the flags (e.g. that they were raised again from a
    /// version-1 document), if any.
    pub flags_note: Option<String>,
    /// The seed-style tables: real HTML tables where the result's renderer
    /// builds a [`Doc`], else the terminal's text.
    pub body: Doc,
    /// The plots: title and SVG markup.
    pub plots: Vec<(String, String)>,
}

const STYLE: &str = "
:root { color-scheme: light; }
body { font-family: 'DejaVu Sans', Verdana, sans-serif; margin: 2em auto; max-width: 72em;
  padding: 0 1em; color: #111; line-height: 1.4; }
h1 { font-size: 1.6em; border-bottom: 2px solid #2c3e50; padding-bottom: .2em; }
h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.05em; }
pre { font-family: 'DejaVu Sans Mono', Menlo, Consolas, monospace; font-size: .82em;
  background: #f6f8fa; border: 1px solid #ddd; padding: .8em; overflow-x: auto; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .2em .6em; text-align: left; vertical-align: top; }
th { background: #eef3f8; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
ul.flags { list-style: none; padding: 0; }
ul.flags li { margin: .3em 0; padding: .3em .6em; border-left: 4px solid; }
li.invalid { border-color: #c00; background: #fdecec; }
li.warning { border-color: #b8860b; background: #fff6e0; }
li.info { border-color: #4a6d8c; background: #eaf4fb; }
code { font-size: .9em; }
p { margin: .5em 0; }
p.sub { margin: .1em 0 .1em 1.5em; font-size: .92em; color: #333; }
figure { margin: 1em 0; }
figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .85em; color: #444; }
@media print {
  body { margin: 0; max-width: none; font-size: 10pt; }
  h2 { break-before: page; }
  section:first-of-type h2 { break-before: auto; }
  pre { white-space: pre-wrap; font-size: 7.5pt; background: none; }
  figure, table, pre { break-inside: avoid; }
  ul.flags li { background: none; }
}
";

/// The whole page: a title, then each section.
pub fn page(title: &str, sections: &[Section]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{t}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{t}</h1>\n",
        t = escape(title)
    );
    if sections.len() > 1 {
        out.push_str("<nav><ol>\n");
        for (i, s) in sections.iter().enumerate() {
            let _ = writeln!(
                out,
                "<li><a href=\"#r{}\">{}</a></li>",
                i + 1,
                escape(&s.heading)
            );
        }
        out.push_str("</ol></nav>\n");
    }
    for (i, s) in sections.iter().enumerate() {
        section(&mut out, i + 1, s);
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn section(out: &mut String, n: usize, s: &Section) {
    let _ = writeln!(
        out,
        "<section id=\"r{n}\">\n<h2>{}</h2>",
        escape(&s.heading)
    );
    out.push_str("<h3>Environment</h3>\n");
    out.push_str(&environment(s).html());
    out.push_str("<h3>Flags</h3>\n");
    if let Some(note) = &s.flags_note {
        let _ = writeln!(out, "<p>{}</p>", escape(note));
    }
    out.push_str(&flags(&s.flags));
    out.push_str("<h3>Results</h3>\n");
    out.push_str(&s.body.html());
    if !s.plots.is_empty() {
        out.push_str("<h3>Plots</h3>\n");
    }
    for (title, svg) in &s.plots {
        let _ = writeln!(
            out,
            "<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>",
            strip_prolog(svg),
            escape(title)
        );
    }
    out.push_str("</section>\n");
}

/// An SVG document's markup from its `<svg` on (no XML declaration, which
/// has no place inside HTML).
fn strip_prolog(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

/// The facts of the environment as a two-column table.
fn environment(s: &Section) -> Table {
    let mut t = Table::new([("fact", Align::Left), ("value", Align::Left)]);
    let unknown = || "not recorded".to_string();
    t.row(vec!["source".into(), s.source.clone()]);
    t.row(vec!["schema".into(), s.schema.clone()]);
    t.row(vec![
        "written by".into(),
        s.linerate_version
            .as_ref()
            .map_or_else(unknown, |v| format!("linerate {v}")),
    ]);
    t.row(vec![
        "started (UTC)".into(),
        s.started_at.clone().unwrap_or_else(unknown),
    ]);
    let h = s.host.clone().unwrap_or_default();
    t.row(vec!["host".into(), h.hostname.unwrap_or_else(unknown)]);
    t.row(vec!["kernel".into(), h.kernel.unwrap_or_else(unknown)]);
    let cpu = match (h.cpu_model, h.cpus) {
        (Some(m), Some(n)) => format!("{m} × {n} online"),
        (Some(m), None) => m,
        (None, Some(n)) => format!("{n} online"),
        (None, None) => unknown(),
    };
    t.row(vec!["CPU".into(), cpu]);
    t.row(vec![
        "virtualised".into(),
        h.virtualized
            .map_or_else(unknown, |v| if v { "yes" } else { "no" }.to_string()),
    ]);
    t
}

/// The flags as a list, worst first, each with its code and evidence.
fn flags(flags: &[Flag]) -> String {
    if flags.is_empty() {
        return "<p>None: the result stands as measured.</p>\n".into();
    }
    let mut out = String::from("<ul class=\"flags\">\n");
    for sev in [Severity::Invalid, Severity::Warning, Severity::Info] {
        let (class, label) = match sev {
            Severity::Invalid => ("invalid", "INVALID"),
            Severity::Warning => ("warning", "warning"),
            Severity::Info => ("info", "note"),
        };
        for f in flags.iter().filter(|f| f.severity == sev) {
            let evidence: Vec<String> = f
                .evidence
                .iter()
                .map(|(k, v)| format!("{k} = {v}"))
                .collect();
            let _ = write!(
                out,
                "<li class=\"{class}\"><strong>{label}</strong> <code>{}</code>: {}",
                escape(&f.code),
                escape(&f.message)
            );
            if !evidence.is_empty() {
                let _ = write!(out, " <small>({})</small>", escape(&evidence.join(", ")));
            }
            out.push_str("</li>\n");
        }
    }
    out.push_str("</ul>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_holds_its_sections_escaped_with_no_script_or_remote_resource() {
        let s = Section {
            heading: "linerate calc <1G>".into(),
            source: "a.json".into(),
            schema: "linerate.calc v1".into(),
            flags: vec![
                Flag::info("fyi", "just so").with("rate_bits_per_s", 5),
                Flag::invalid("broken", "a & b"),
            ],
            body: Doc::pre(" frame  fps\n 64  1,488,095\n"),
            plots: vec![("t".into(), "<?xml version=\"1.0\"?>\n<svg></svg>".into())],
            ..Section::default()
        };
        let p = page("report", &[s.clone(), s]);
        assert!(p.starts_with("<!DOCTYPE html>"));
        assert!(p.contains("linerate calc &lt;1G&gt;"));
        assert!(p.contains("64  1,488,095"));
        assert!(p.contains("<figure>\n<svg></svg>"));
        assert!(!p.contains("<?xml"));
        assert!(p.contains("rate_bits_per_s = 5"));
        // Worst first.
        assert!(p.find("broken").unwrap() < p.find("fyi").unwrap());
        assert!(p.contains("@media print"));
        for banned in ["<script", "http://", "https://", "url(", "@import", "<link"] {
            assert!(!p.contains(banned), "{banned}");
        }
        assert!(p.contains("href=\"#r2\""));
    }
}
