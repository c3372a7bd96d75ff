//! `linerate history`: the stored results as a table, and one result's
//! environment. (The store is `linerate-history`; these only format what it
//! returns, given as plain fields so this crate needs no database.)

use crate::table::{Align, Table, Width};

/// One line of `history list`.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Its id.
    pub id: i64,
    /// When it started (RFC 3339 UTC).
    pub started_at: String,
    /// The command.
    pub command: String,
    /// The bed it ran on.
    pub bed: Option<String>,
    /// Its tag.
    pub tag: Option<String>,
    /// 0 clean, 1 a precondition failed.
    pub exit_code: Option<i64>,
}

/// The list: id, start (to the second), command, bed, tag, and whether the
/// result was trustworthy.
pub fn list(lines: &[Line], width: Width) -> String {
    if lines.is_empty() {
        return "no results stored (that match)\n".into();
    }
    let mut t = Table::new([
        ("id", Align::Right),
        ("started (UTC)", Align::Left),
        ("command", Align::Left),
        ("bed", Align::Left),
        ("tag", Align::Left),
        ("result", Align::Left),
    ]);
    for l in lines {
        let started = l
            .started_at
            .get(..19)
            .unwrap_or(&l.started_at)
            .replace('T', " ");
        let result = match l.exit_code {
            Some(0) => "ok",
            Some(_) => "not trustworthy",
            None => "",
        };
        t.row(vec![
            l.id.to_string(),
            started,
            l.command.clone(),
            l.bed.clone().unwrap_or_default(),
            l.tag.clone().unwrap_or_default(),
            result.into(),
        ]);
    }
    t.fit(0, width)
}

/// One result's environment as `name: value` lines (unknowns left out).
pub fn environment(facts: &[(&str, Option<String>)]) -> String {
    let shown: Vec<&(&str, Option<String>)> = facts.iter().filter(|(_, v)| v.is_some()).collect();
    let w = shown.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, value) in shown {
        out += &format!("{name:<w$}  {}\n", value.as_deref().unwrap_or_default());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_and_environment() {
        let l = Line {
            id: 7,
            started_at: "2026-11-23T10:00:00.123456Z".into(),
            command: "latency".into(),
            bed: Some("lab".into()),
            tag: None,
            exit_code: Some(1),
        };
        let text = list(&[l], Width::default());
        assert!(text.contains("2026-11-23 10:00:00  latency"), "{text}");
        assert!(text.contains("not trustworthy"), "{text}");
        assert!(list(&[], Width::default()).contains("no results"));
        let env = environment(&[("kernel", Some("6.1".into())), ("bed", None)]);
        assert_eq!(env, "kernel  6.1\n");
    }
}
