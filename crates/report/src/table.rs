//! A plain-text table: a header row and right-aligned columns.

use std::fmt::Write as _;

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
}

impl Table {
    /// A table with these column titles and alignments.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = (S, Align)>) -> Self {
        Self {
            header: columns.into_iter().map(|(s, a)| (s.into(), a)).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are blank and extra cells are dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Renders the table, each line indented by `indent` spaces, two spaces
    /// between columns.
    pub fn render(&self, indent: usize) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|(h, _)| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
            let mut text = " ".repeat(indent);
            for (i, (width, (_, align))) in widths.iter().zip(&self.header).enumerate() {
                let cell = cells.next().unwrap_or("");
                let pad = width.saturating_sub(cell.chars().count());
                if i > 0 {
                    text.push_str("  ");
                }
                match align {
                    Align::Right => {
                        text.push_str(&" ".repeat(pad));
                        text.push_str(cell);
                    }
                    Align::Left => {
                        text.push_str(cell);
                        text.push_str(&" ".repeat(pad));
                    }
                }
            }
            let _ = writeln!(out, "{}", text.trim_end());
        };
        line(&mut out, &mut self.header.iter().map(|(h, _)| h.as_str()));
        for row in &self.rows {
            line(&mut out, &mut row.iter().map(String::as_str));
        }
        out
    }
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
}
