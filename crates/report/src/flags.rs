//! The flags of a result as lines of text, worst first.

use linerate_core::result::{Flag, Severity};

use crate::table::{Doc, Width};

/// One wrapped paragraph per flag, `invalid:` flags first, then `warning:`,
/// then `note:` (info), each in the order raised.
pub fn render(flags: &[Flag], width: Width) -> String {
    let mut d = Doc::new();
    add(&mut d, flags);
    d.text(width)
}

/// Adds the paragraphs of [`render`] to `doc`.
pub fn add(doc: &mut Doc, flags: &[Flag]) {
    for sev in [Severity::Invalid, Severity::Warning, Severity::Info] {
        let label = match sev {
            Severity::Invalid => "INVALID: ",
            Severity::Warning => "warning: ",
            Severity::Info => "note: ",
        };
        let indent = " ".repeat(label.len());
        for f in flags.iter().filter(|f| f.severity == sev) {
            doc.para(label, &indent, f.message.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_first() {
        let flags = [
            Flag::info("a", "fyi"),
            Flag::invalid("b", "broken"),
            Flag::warning("c", "careful"),
        ];
        assert_eq!(
            render(&flags, Width::default()),
            "INVALID: broken\nwarning: careful\nnote: fyi\n"
        );
    }
}
