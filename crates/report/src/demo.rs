//! `linerate demo`'s prose around its parts (each a scenario, rendered by
//! [`crate::scenario`]).

use linerate_core::demo::{BedPart, NotRun};

use crate::table::{paragraph, Width};

/// The tour's first lines.
pub fn heading(width: Width) -> String {
    let mut text = paragraph(
        "",
        "",
        "linerate demo: a short tour made of built-in scenarios (`linerate scenario list`; \
         `linerate scenario show NAME` prints one to copy and edit). First what one host \
         shows without a testbed or privileges:",
        width,
    );
    text.push('\n');
    text
}

/// The heading of a bed part (its scenario's tables follow).
pub fn bed_part(part: &BedPart, width: Width) -> String {
    let mut text = String::from("\n");
    text.push_str(&paragraph(
        "",
        "",
        &format!(
            "On a testbed of network namespaces: {} (`linerate scenario run {} --short`, \
             shortened trials; without --short for the full ones):",
            part.what, part.scenario
        ),
        width,
    ));
    text.push('\n');
    text
}

/// One line: the bed parts that did not run, why and how to run them.
pub fn not_run(parts: &[NotRun], what: &[&str], width: Width) -> String {
    let Some(first) = parts.first() else {
        return String::new();
    };
    let names: Vec<&str> = parts.iter().map(|p| p.scenario.as_str()).collect();
    let mut text = String::from("\n");
    text.push_str(&paragraph(
        "",
        "",
        &format!(
            "Not run here ({}): the parts on testbeds, which need root: {}. `sudo linerate \
             demo` runs them, or one at a time `sudo linerate scenario run {}` (--short for a \
             quick look).",
            first.why,
            what.join("; "),
            names.join("|"),
        ),
        width,
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_not_run_are_one_paragraph_naming_each() {
        let parts = linerate_core::demo::not_run("not root");
        let what: Vec<&str> = linerate_core::demo::BED_PARTS
            .iter()
            .map(|p| p.what)
            .collect();
        let text = not_run(&parts, &what, Width::Unlimited);
        assert_eq!(text.trim().lines().count(), 1, "{text}");
        assert!(text.contains("sudo linerate demo"), "{text}");
        assert!(text.contains("seed001|seed000"), "{text}");
        assert!(not_run(&[], &[], Width::Unlimited).is_empty());
    }
}
