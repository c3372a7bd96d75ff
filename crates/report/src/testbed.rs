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
    for p in &s.emulators {
        out.push_str(&format!("stopped link emulator {p}\n"));
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
    for line in steps.lines() {
        out.push_str(&shell_line(line, w));
    }
    out.push_str("# down:\n");
    for s in &p.down_commands {
        out.push_str(&format!("#   {s}\n"));
    }
    for n in &p.notes {
        out.push_str(&paragraph("# note: ", "#       ", n, w));
    }
    out
}

/// A command line within `w`: broken at spaces outside quotes with a
/// trailing ` \` and the rest indented, so it still runs when pasted into a
/// shell (a quoted argument longer than the width stays whole). Comment lines
/// are left as they are.
fn shell_line(line: &str, w: Width) -> String {
    let Some(limit) = w
        .limit()
        .filter(|&l| line.chars().count() > l && !line.starts_with('#'))
    else {
        return format!("{line}\n");
    };
    // Words, keeping quoted parts inside their word.
    let mut words: Vec<String> = Vec::new();
    let (mut cur, mut quote) = (String::new(), None::<char>);
    for c in line.chars() {
        match (c, quote) {
            (' ', None) => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            ('\'' | '"', None) => {
                quote = Some(c);
                cur.push(c);
            }
            (c, Some(q)) if c == q => {
                quote = None;
                cur.push(c);
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    let mut out = String::new();
    let mut row = String::new();
    for word in words {
        let len = row.chars().count();
        if len > 4 && len + 1 + word.chars().count() + 2 > limit {
            out.push_str(&row);
            out.push_str(" \\\n");
            row = "    ".to_string();
        } else if !row.is_empty() {
            row.push(' ');
        }
        row.push_str(&word);
    }
    out.push_str(&row);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_commands_break_outside_quotes() {
        let cmd = format!(
            "nft 'add rule {}' {}",
            "x ".repeat(30).trim(),
            "arg ".repeat(30)
        );
        let out = shell_line(&cmd, Width::Columns(40));
        assert!(out.lines().count() > 2, "{out}");
        // The quoted argument is never split, every broken line ends in " \".
        assert!(
            out.contains(&format!("'add rule {}'", "x ".repeat(30).trim())),
            "{out}"
        );
        let lines: Vec<&str> = out.lines().collect();
        for l in &lines[..lines.len() - 1] {
            assert!(l.ends_with(" \\"), "{out}");
        }
        // Pasted back together, the words are the same.
        let joined = out.replace(" \\\n    ", " ");
        assert_eq!(joined.trim_end(), cmd.trim_end());
        assert_eq!(
            shell_line("# a comment", Width::Columns(5)),
            "# a comment\n"
        );
        assert_eq!(shell_line(&cmd, Width::Unlimited), format!("{cmd}\n"));
    }
}

/// Adds [`link_line`] to a result's report when it was measured on a bed
/// with a link (nothing otherwise).
pub fn add_link(doc: &mut crate::table::Doc, a: Option<&linerate_core::emu::LinkAccount>) {
    if let Some(a) = a {
        doc.para("", "  ", link_line(a).trim_end().to_string());
    }
}

/// One line for a result measured on a bed: which shaper made its link and,
/// for the emulator, what it counted during the test.
pub fn link_line(a: &linerate_core::emu::LinkAccount) -> String {
    use linerate_core::emu::Shaper;
    let rate = a.link.map_or(String::new(), |l| format!(" at {l}"));
    let mut s = format!("link: bed {}, shaper {}{rate}", a.bed, a.shaper.as_str());
    match (a.shaper, a.during) {
        (Shaper::Emu, Some(c)) => {
            s.push_str(&format!(
                "; the emulator forwarded {} frames, dropped {} at its queue, {} left late",
                c.forwarded, c.queue_drops, c.late
            ));
            if c.late > 0 {
                s.push_str(&format!(
                    " (by up to {:.1} µs)",
                    c.late_max_ns as f64 / 1000.0
                ));
            }
            if let Some(lag) = a.mean_lag_ns {
                s.push_str(&format!(", its own delay {:.2} µs a frame", lag / 1000.0));
            }
        }
        (Shaper::Emu, None) => s.push_str("; the emulator's counters could not be read"),
        (Shaper::Tbf, _) => s.push_str(" (rate only: a frame that finds tokens is not delayed)"),
        (Shaper::None, _) => {}
    }
    if let Some(t) = a.timing {
        if !t.realtime {
            s.push_str("; its thread had no real-time priority here (later departures)");
        }
        if !t.cpu_latency_held {
            s.push_str("; idle CPUs could halt (no CPU latency request: slower wake-ups)");
        }
        if t.polls {
            s.push_str("; it polled between frames (--emu-poll: a CPU of its own)");
        }
    }
    if let Some(n) = &a.shaper_note {
        s.push_str(&format!(" ({n})"));
    }
    if let Some(c) = a.capacity {
        let at_least = if c.source_limited { "≥ " } else { "" };
        s.push_str(&format!(
            "; its limit {at_least}{:.0} frames/s",
            c.frames_per_s
        ));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod link_tests {
    use super::*;
    use linerate_core::emu::{Capacity, Counters, LinkAccount, Shaper};
    use linerate_core::units::BitRate;

    #[test]
    fn the_link_line_names_the_shaper_and_the_counts() {
        let mut a = LinkAccount {
            bed: "x".into(),
            shaper: Shaper::Emu,
            link: Some(BitRate::from_mbps(100)),
            capacity: Some(Capacity {
                frames_per_s: 41_000.0,
                frame_bytes: 60,
                seconds: 0.5,
                source_limited: true,
            }),
            during: Some(Counters {
                forwarded: 12,
                late: 1,
                late_max_ns: 7_500,
                ..Counters::default()
            }),
            offered_frames_per_s: None,
            shaper_note: None,
            mean_lag_ns: Some(1_250.0),
            timing: None,
        };
        // In a result's report, as text and as HTML (`report --html`).
        let mut doc = crate::table::Doc::new();
        add_link(&mut doc, Some(&a));
        assert!(doc
            .text(Width::Unlimited)
            .contains("shaper emu at 100 Mbit/s"));
        assert!(doc.html().contains("shaper emu at 100 Mbit/s"));
        let mut none = crate::table::Doc::new();
        add_link(&mut none, None);
        assert_eq!(none.text(Width::Unlimited), "");
        let l = link_line(&a);
        assert!(l.contains("its own delay 1.25 µs a frame"), "{l}");
        assert!(
            l.starts_with("link: bed x, shaper emu at 100 Mbit/s"),
            "{l}"
        );
        assert!(
            l.contains("forwarded 12 frames") && l.contains("7.5 µs"),
            "{l}"
        );
        assert!(l.contains("≥ 41000 frames/s"), "{l}");
        assert!(!l.contains("real-time"), "{l}");
        // No late departure: no "by up to" from an older maximum.
        a.during = Some(Counters {
            forwarded: 12,
            late_max_ns: 3_000,
            ..Counters::default()
        });
        // An emulator the host refused real-time priority says so.
        a.timing = Some(linerate_core::emu::Timing {
            realtime: false,
            cpu_latency_held: true,
            timer_overshoot_p50_ns: 15_000,
            timer_overshoot_p99_ns: 50_000,
            wake_margin_ns: 52_000,
            delivery: None,
            polls: false,
        });
        let l = link_line(&a);
        assert!(l.contains("0 left late") && !l.contains("by up to"), "{l}");
        assert!(l.contains("no real-time priority"), "{l}");
        assert!(!l.contains("could halt"), "{l}");
        (a.shaper, a.capacity, a.during) = (Shaper::Tbf, None, None);
        assert!(link_line(&a).contains("rate only"));
    }
}
