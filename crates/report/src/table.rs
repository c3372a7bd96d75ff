//! A plain-text table: a header row and aligned columns, fitted to a width.
//!
//! Terminal output is at most [`DEFAULT_COLUMNS`] wide unless the user asks
//! for `--wide` ([`Width::Unlimited`]): a table too wide for its width first
//! drops the columns marked [`Table::optional`] (the order given is the order
//! they go), then wraps the widest left-aligned column's cells onto
//! continuation lines.

use std::fmt::Write as _;

/// The width of terminal output unless `--wide`.
pub const DEFAULT_COLUMNS: usize = 100;

/// How wide output may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// At most this many columns.
    Columns(usize),
    /// `--wide`: every column, nothing wrapped.
    Unlimited,
}

impl Width {
    /// [`DEFAULT_COLUMNS`], or unlimited with `--wide`.
    pub fn new(wide: bool) -> Self {
        if wide {
            Self::Unlimited
        } else {
            Self::Columns(DEFAULT_COLUMNS)
        }
    }

    /// The limit, if any.
    pub fn limit(self) -> Option<usize> {
        match self {
            Self::Columns(n) => Some(n),
            Self::Unlimited => None,
        }
    }
}

impl Default for Width {
    fn default() -> Self {
        Self::Columns(DEFAULT_COLUMNS)
    }
}

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Pad on the right.
    Left,
    /// Pad on the left (numbers).
    Right,
}

/// A table being built row by row.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
    /// Column indices that may be dropped to fit, first dropped first.
    optional: Vec<usize>,
}

impl Table {
    /// A table with these column titles and alignments.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = (S, Align)>) -> Self {
        Self {
            header: columns.into_iter().map(|(s, a)| (s.into(), a)).collect(),
            rows: Vec::new(),
            optional: Vec::new(),
        }
    }

    /// Marks columns (by title) that are left out when the table does not fit
    /// its width, in this order; `--wide` shows them.
    #[must_use]
    pub fn optional(mut self, titles: &[&str]) -> Self {
        for t in titles {
            if let Some(i) = self.header.iter().position(|(h, _)| h == t) {
                self.optional.push(i);
            }
        }
        self
    }

    /// Adds a row; missing cells are blank and extra cells are dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Renders every column with nothing wrapped, each line indented by
    /// `indent` spaces, two spaces between columns.
    pub fn render(&self, indent: usize) -> String {
        self.fit(indent, Width::Unlimited)
    }

    /// Renders the table within `width` (see the module's note).
    pub fn fit(&self, indent: usize, width: Width) -> String {
        let n = self.header.len();
        let cell = |row: &Vec<String>, i: usize| row.get(i).map_or("", String::as_str).to_string();
        let mut keep: Vec<usize> = (0..n).collect();
        let natural = |keep: &[usize]| -> Vec<usize> {
            keep.iter()
                .map(|&i| {
                    self.rows
                        .iter()
                        .map(|r| cell(r, i).chars().count())
                        .chain(std::iter::once(self.header[i].0.chars().count()))
                        .max()
                        .unwrap_or(0)
                })
                .collect()
        };
        let total = |w: &[usize]| indent + w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
        let mut widths = natural(&keep);
        let mut wrap_col = None;
        if let Some(limit) = width.limit() {
            let mut drop = self.optional.iter();
            while total(&widths) > limit {
                let Some(d) = drop.next() else { break };
                keep.retain(|i| i != d);
                widths = natural(&keep);
            }
            if total(&widths) > limit {
                // Wrap the widest left-aligned column.
                let widest = keep
                    .iter()
                    .enumerate()
                    .filter(|(_, &i)| self.header[i].1 == Align::Left)
                    .max_by_key(|(k, _)| widths[*k]);
                if let Some((k, _)) = widest {
                    let over = total(&widths) - limit;
                    let floor = self.header[keep[k]].0.chars().count().max(12);
                    let w = widths[k].saturating_sub(over).max(floor);
                    if w < widths[k] {
                        widths[k] = w;
                        wrap_col = Some(k);
                    }
                }
            }
        }
        let mut out = String::new();
        let mut line = |cells: Vec<String>| {
            // Each cell as lines (only the wrapped column has several).
            let parts: Vec<Vec<String>> = cells
                .into_iter()
                .enumerate()
                .map(|(k, c)| match wrap_col {
                    Some(w) if w == k => wrap_words(&c, widths[k]),
                    _ => vec![c],
                })
                .collect();
            let height = parts.iter().map(Vec::len).max().unwrap_or(1);
            for l in 0..height {
                let mut text = " ".repeat(indent);
                for (k, p) in parts.iter().enumerate() {
                    let c = p.get(l).map_or("", String::as_str);
                    let pad = widths[k].saturating_sub(c.chars().count());
                    if k > 0 {
                        text.push_str("  ");
                    }
                    match self.header[keep[k]].1 {
                        Align::Right => {
                            text.push_str(&" ".repeat(pad));
                            text.push_str(c);
                        }
                        Align::Left => {
                            text.push_str(c);
                            text.push_str(&" ".repeat(pad));
                        }
                    }
                }
                let _ = writeln!(out, "{}", text.trim_end());
            }
        };
        line(keep.iter().map(|&i| self.header[i].0.clone()).collect());
        for row in &self.rows {
            line(keep.iter().map(|&i| cell(row, i)).collect());
        }
        out
    }
}

impl Table {
    /// The same table as an HTML `<table>`: every column, nothing wrapped,
    /// numbers right-aligned (class `num`), cells escaped.
    pub fn html(&self) -> String {
        let mut out = String::from("<table>\n<thead><tr>");
        let class = |a: Align| match a {
            Align::Right => " class=\"num\"",
            Align::Left => "",
        };
        for (h, a) in &self.header {
            let _ = write!(out, "<th{}>{}</th>", class(*a), escape(h));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for row in &self.rows {
            out.push_str("<tr>");
            for (i, (_, a)) in self.header.iter().enumerate() {
                let c = row.get(i).map_or("", String::as_str);
                let _ = write!(out, "<td{}>{}</td>", class(*a), escape(c));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table>\n");
        out
    }
}

/// One block of a rendered result.
#[derive(Debug, Clone)]
pub enum Block {
    /// A paragraph wrapped to the width: `first` before its first line,
    /// `rest` before the others.
    Para {
        /// Prefix of the first line (`"* "`, `"Bus: "`, or empty).
        first: String,
        /// Prefix of the other lines (usually spaces).
        rest: String,
        /// The text.
        text: String,
    },
    /// A table, indented by this many spaces in text.
    Table(Table, usize),
    /// An empty line.
    Blank,
    /// One line as it is (not wrapped).
    Line(String),
    /// Text already laid out (from a renderer that builds no [`Doc`]).
    Pre(String),
}

/// A rendered result as blocks, so the same tables and paragraphs become
/// terminal text ([`Doc::text`], fitted to a width) or HTML ([`Doc::html`],
/// real `<table>`s).
#[derive(Debug, Clone, Default)]
pub struct Doc {
    blocks: Vec<Block>,
}

impl Doc {
    /// An empty document.
    pub fn new() -> Self {
        Self::default()
    }

    /// A document of text already laid out.
    pub fn pre(text: impl Into<String>) -> Self {
        Self {
            blocks: vec![Block::Pre(text.into())],
        }
    }

    /// Adds a paragraph (see [`paragraph`]).
    pub fn para(&mut self, first: &str, rest: &str, text: impl Into<String>) {
        self.blocks.push(Block::Para {
            first: first.into(),
            rest: rest.into(),
            text: text.into(),
        });
    }

    /// Adds a table, indented by `indent` spaces in text.
    pub fn table(&mut self, t: Table, indent: usize) {
        self.blocks.push(Block::Table(t, indent));
    }

    /// Adds an empty line.
    pub fn blank(&mut self) {
        self.blocks.push(Block::Blank);
    }

    /// Adds every block of `other`.
    pub fn append(&mut self, other: Self) {
        self.blocks.extend(other.blocks);
    }

    /// Adds one line as it is (not wrapped).
    pub fn line(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Line(text.into()));
    }

    /// The document as terminal text within `width`.
    pub fn text(&self, width: Width) -> String {
        let mut out = String::new();
        for b in &self.blocks {
            match b {
                Block::Para { first, rest, text } => {
                    out.push_str(&paragraph(first, rest, text, width));
                }
                Block::Table(t, indent) => out.push_str(&t.fit(*indent, width)),
                Block::Blank => out.push('\n'),
                Block::Line(l) => {
                    out.push_str(l);
                    out.push('\n');
                }
                Block::Pre(s) => out.push_str(s),
            }
        }
        out
    }

    /// The document as HTML: paragraphs, `<table>`s and `<pre>` blocks.
    pub fn html(&self) -> String {
        let mut out = String::new();
        for b in &self.blocks {
            match b {
                Block::Para { first, text, .. } => {
                    // An indented paragraph (a note under a table) is a
                    // `sub` paragraph.
                    let class = if first.starts_with(' ') {
                        " class=\"sub\""
                    } else {
                        ""
                    };
                    let lead = first.trim();
                    let sep = if lead.is_empty() { "" } else { " " };
                    let _ = writeln!(out, "<p{class}>{}{sep}{}</p>", escape(lead), escape(text));
                }
                Block::Table(t, _) => out.push_str(&t.html()),
                Block::Blank => {}
                Block::Line(l) => {
                    let _ = writeln!(out, "<p>{}</p>", escape(l));
                }
                Block::Pre(s) => {
                    let _ = writeln!(out, "<pre>{}</pre>", escape(s.trim_end()));
                }
            }
        }
        out
    }
}

/// `text` with the characters HTML gives a meaning escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Splits `text` into lines of at most `width` characters at spaces (a word
/// longer than `width` stands alone on its line).
pub fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let len = cur.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

/// A paragraph: `first` before its first line, `rest` (usually spaces) before
/// the others, wrapped within `width`; ends with a newline.
pub fn paragraph(first: &str, rest: &str, text: &str, width: Width) -> String {
    let Some(limit) = width.limit() else {
        return format!("{first}{text}\n");
    };
    let room = limit
        .saturating_sub(first.chars().count().max(rest.chars().count()))
        .max(20);
    let mut out = String::new();
    for (i, l) in wrap_words(text, room).into_iter().enumerate() {
        let _ = writeln!(out, "{}{l}", if i == 0 { first } else { rest });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let mut t = Table::new([("name", Align::Left), ("fps", Align::Right)]);
        t.row(vec!["a".into(), "148,809".into()]);
        t.row(vec!["longer".into(), "1".into()]);
        assert_eq!(
            t.render(1),
            " name        fps\n a       148,809\n longer        1\n"
        );
    }

    #[test]
    fn too_wide_tables_drop_optional_columns_then_wrap() {
        let mut t = Table::new([
            ("a", Align::Right),
            ("extra", Align::Right),
            ("note", Align::Left),
        ])
        .optional(&["extra"]);
        t.row(vec!["1".into(), "x".repeat(30), "word ".repeat(12)]);
        let wide = t.fit(0, Width::Unlimited);
        assert!(wide.lines().any(|l| l.chars().count() > 40), "{wide}");
        let narrow = t.fit(0, Width::Columns(40));
        assert!(!narrow.contains("extra"), "{narrow}");
        assert!(narrow.lines().all(|l| l.chars().count() <= 40), "{narrow}");
        assert_eq!(narrow.matches("word").count(), 12, "{narrow}");
    }

    #[test]
    fn html_has_every_cell_escaped_and_aligned() {
        let mut t = Table::new([("name", Align::Left), ("fps", Align::Right)]).optional(&["fps"]);
        t.row(vec!["<a&b>".into(), "148,809".into()]);
        let h = t.html();
        assert!(h.contains("<th class=\"num\">fps</th>"), "{h}");
        assert!(
            h.contains("<td>&lt;a&amp;b&gt;</td><td class=\"num\">148,809</td>"),
            "{h}"
        );
    }

    #[test]
    fn a_doc_renders_the_same_blocks_as_text_and_html() {
        let mut t = Table::new([("frame B", Align::Right)]);
        t.row(vec!["64".into()]);
        let mut d = Doc::new();
        d.para("", "  ", "Line rate at 1 Gbit/s");
        d.table(t, 2);
        d.blank();
        d.para("* ", "  ", "padded");
        assert_eq!(
            d.text(Width::default()),
            "Line rate at 1 Gbit/s\n  frame B\n       64\n\n* padded\n"
        );
        let h = d.html();
        assert!(
            h.starts_with("<p>Line rate at 1 Gbit/s</p>\n<table>"),
            "{h}"
        );
        assert!(h.contains("<td class=\"num\">64</td>") && h.ends_with("<p>* padded</p>\n"));
        assert_eq!(Doc::pre("a < b\n").html(), "<pre>a &lt; b</pre>\n");
        let mut n = Doc::new();
        n.para("  ", "    ", "under a table");
        n.line("path: lo");
        assert_eq!(n.text(Width::default()), "  under a table\npath: lo\n");
        assert_eq!(
            n.html(),
            "<p class=\"sub\">under a table</p>\n<p>path: lo</p>\n"
        );
    }

    #[test]
    fn paragraphs_wrap() {
        let p = paragraph("note: ", "      ", &"abc ".repeat(40), Width::Columns(50));
        assert!(p.lines().all(|l| l.chars().count() <= 50), "{p}");
        assert!(p.starts_with("note: abc") && p.lines().nth(1).unwrap().starts_with("      abc"));
        assert_eq!(wrap_words("", 5), vec![String::new()]);
    }
}
