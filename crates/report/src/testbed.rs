//! `linerate testbed`: a bed, the list of beds and a sweep, as people read
//! them (data: `linerate_core::testbed`).

use linerate_core::testbed::{BedStatus, BedSummary, TestbedDown, TestbedPlan, TestbedSweep};

use crate::table::{paragraph, Align, Table, Width};

/// `: link 100 Mbit/s, rps` (empty without settings).
pub fn settings_line(settings: &[String]) -> String {
    if settings.is_empty() {
        String::new()
    } else {
        format!(": {}", settings.join(", "))
    }
}

/// The human description of a bed that is up.
pub fn describe(b: &BedSummary, width: Width) -> String {
    let mut out = paragraph(
        "",
        "  ",
        &format!(
            "bed {} ({}) is up{}",
            b.name,
            b.topology,
            settings_line(&b.settings)
        ),
        width,
    );
    out.push('\n');
    let mut t = Table::new([
        ("host", Align::Left),
        ("namespace", Align::Left),
        ("interface", Align::Left),
        ("IPv4", Align::Left),
        ("IPv6", Align::Left),
        ("gateways", Align::Left),
    ]);
    for h in &b.hosts {
        let opt = |x: &Option<String>| x.clone().unwrap_or_else(|| "-".into());
        t.row(vec![
            h.role.clone(),
            h.netns.clone(),
            h.iface.clone(),
            opt(&h.ipv4),
            opt(&h.ipv6),
            if h.gateways.is_empty() {
                "-".into()
            } else {
                h.gateways.join(", ")
            },
        ]);
    }
    out.push_str(&t.fit(2, width));
    if !b.notes.is_empty() {
        out.push('\n');
        for n in &b.notes {
            out.push_str(&paragraph("note: ", "      ", n, width));
        }
    }
    out.push_str(&format!(
        "\nrun inside a host: linerate testbed exec {0} a -- CMD…\nremove it:        linerate testbed down {0}\n",
        b.name
    ));
    out
}

/// A status as the list shows it: what to do about it included.
pub fn status(s: BedStatus) -> String {
    if s.needs_sweep() {
        format!("{} (sweep it)", s.name())
    } else {
        s.name().to_string()
    }
}

/// The list of beds: one row each, then the files that could not be read.
pub fn list(beds: &[(BedSummary, BedStatus)], errors: &[String], width: Width) -> String {
    if beds.is_empty() && errors.is_empty() {
        return "no beds (none stored in /run/linerate/beds)\n".into();
    }
    let mut t = Table::new([
        ("bed", Align::Left),
        ("topology", Align::Left),
        ("status", Align::Left),
        ("a", Align::Left),
        ("b", Align::Left),
        ("settings", Align::Left),
    ]);
    for (b, s) in beds {
        let addr = |role: &str| {
            b.hosts
                .iter()
                .find(|h| h.role == role)
                .and_then(|h| h.ipv4.clone())
                .unwrap_or_else(|| "-".into())
        };
        t.row(vec![
            b.name.clone(),
            b.topology.clone(),
            status(*s),
            addr("a"),
            addr("b"),
            b.settings.join(", "),
        ]);
    }
    let mut out = t.fit(0, width);
    for e in errors {
        out.push_str(&paragraph("warning: ", "         ", e, width));
    }
    out
}

/// `bed NAME removed (namespaces)`.
pub fn down(d: &TestbedDown) -> String {
    format!("bed {} removed ({})\n", d.removed, d.namespaces.join(", "))
}

/// One line per object a sweep removed.
pub fn sweep(s: &TestbedSweep) -> String {
    let mut out = String::new();
    for n in &s.netns {
        out.push_str(&format!("removed namespace {n}\n"));
    }
    for l in &s.links {
        out.push_str(&format!("removed link {l}\n"));
    }
    for f in &s.files {
        out.push_str(&format!("removed {f}\n"));
    }
    if out.is_empty() {
        out.push_str("nothing to sweep\n");
    }
    out
}

/// `testbed up --dry-run`: a title, the commands with their read-backs
/// (`steps`, as the bed's plan writes them), the teardown and the notes,
/// wrapped within `width`.
pub fn dry_run<S>(name: &str, topology: &str, steps: &str, p: &TestbedPlan<S>, w: Width) -> String {
    let mut out =
        format!("# linerate testbed up {name} --topo {topology} (dry run: nothing is created)\n");
    out.push_str(steps);
    out.push_str("# down:\n");
    for s in &p.down_commands {
        out.push_str(&format!("#   {s}\n"));
    }
    for n in &p.notes {
        out.push_str(&paragraph("# note: ", "#       ", n, w));
    }
    out
}
