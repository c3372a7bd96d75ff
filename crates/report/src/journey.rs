//! `linerate journey` for people: IDT AN-367's Table 5 shape (one row per
//! step in path order with the time from the send), the largest gaps in
//! words, drops with their reasons, hints, the tracer's cost and the flags.
//! Every figure is a field of [`JourneyResult`]; nothing is computed here.

use linerate_core::journey::iface::IfaceResult;
use linerate_core::journey::{
    DropSite, Gap, JourneyResult, ProgramCosts, Quantiles, Step, XdpReport, ATTRIBUTED,
};
use linerate_core::result::Envelope;
use linerate_core::units::group_thousands;

use crate::table::{paragraph, Align, Table, Width};

/// Gaps listed under the table.
const LARGEST_GAPS: usize = 5;

fn us(ns: i64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn q3(q: &Quantiles) -> [String; 3] {
    [us(q.median_ns), us(q.p90_ns), us(q.p99_ns)]
}

/// The steps as a table.
pub fn steps_table(r: &JourneyResult) -> Table {
    step_rows(&r.steps)
}

fn step_rows(steps: &[Step]) -> Table {
    let mut t = Table::new([
        ("#", Align::Right),
        ("event", Align::Left),
        ("device", Align::Left),
        ("namespace", Align::Left),
        ("cpu", Align::Left),
        ("packets", Align::Right),
        ("p50 µs", Align::Right),
        ("p90 µs", Align::Right),
        ("p99 µs", Align::Right),
    ])
    .optional(&["cpu", "namespace", "p90 µs"]);
    for (i, s) in steps.iter().enumerate() {
        let [m, p90, p99] = q3(&s.from_send);
        let ns = match (&s.netns, &s.role) {
            (Some(n), Some(role)) => format!("{n} ({role})"),
            (Some(n), None) => n.clone(),
            _ => String::new(),
        };
        let cpus: Vec<String> = s.cpus.iter().map(ToString::to_string).collect();
        t.row(vec![
            (i + 1).to_string(),
            if s.by_cpu_and_time {
                format!("{} *", s.tracepoint)
            } else {
                s.tracepoint.clone()
            },
            s.dev.clone().unwrap_or_default(),
            ns,
            cpus.join(","),
            group_thousands(s.packets),
            m,
            p90,
            p99,
        ]);
    }
    t
}

/// The whole report.
pub fn render(doc: &Envelope<JourneyResult>, width: Width) -> String {
    let r = &doc.result;
    let p = &r.probes;
    let mut out = format!(
        "journey on bed {} ({}): {} {}{} probes of {}–{} B at {} probes/s, host a → host b{}\n",
        r.bed,
        r.topology,
        group_thousands(p.sent),
        r.proto.to_uppercase(),
        if r.ipv6 { "/IPv6" } else { "" },
        r.payload_bytes.0,
        r.payload_bytes.1,
        r.rate_pps,
        if r.proto == "icmp" { " → host a" } else { "" }
    );
    out.push_str(&paragraph(
        "",
        "",
        &format!(
            "followed end to end {}, dropped {}, lost from view {} (received by the application: {}; skb address changed on the way: {}; trace samples lost: {}). Times from the sender's sendto() call, {}.",
            p.followed_end_to_end,
            p.dropped,
            p.lost_from_view,
            p.received,
            p.address_changed,
            p.ring_lost_samples,
            r.tracer.clock
        ),
        width,
    ));
    out.push('\n');
    out.push_str(&steps_table(r).fit(2, width));
    if r.steps.iter().any(|s| s.by_cpu_and_time) {
        let a = &r.attribution;
        out.push_str(&paragraph(
            "",
            "  ",
            &format!(
                "* {ATTRIBUTED}, on the CPU of the probe's netif_receive_skb: a FIB lookup in its \
                 namespace between it and the probe's next event, the first NAPI poll and \
                 softirq exit after it, the last softirq entry before it ({} events attributed, \
                 {} ambiguous, {} in no probe's bracket)",
                group_thousands(a.attributed),
                group_thousands(a.ambiguous),
                group_thousands(a.unattributed)
            ),
            width,
        ));
    }
    out.push_str(&gap_lines(&r.gaps, width));
    out.push_str(&drop_lines(&r.drops, width));
    let tracer = match (&r.tracer.fallback, r.tracer.tp_btf_programs.len()) {
        (Some(why), _) => format!("tracer: perf raw samples (tp_btf programs not used: {why})"),
        (None, 0) => "tracer: perf raw samples (--tracer perf)".to_string(),
        (None, n) => format!(
            "tracer: {n} tp_btf programs (filtering on the length in BPF; the events without an \
             skb gated per CPU by a probe's receive), perf raw samples for the other tracepoints"
        ),
    };
    out.push_str(&paragraph("\n", "", &tracer, width));
    out.push_str(&paragraph("\n", "", &xdp_line(&r.xdp), width));
    if let Some(c) = &r.cost {
        out.push_str(&paragraph(
            "\n",
            "",
            &format!(
                "tracer cost: UDP {} B back to back a → b (one in {} of a traced length): the sender's CPU per datagram {:.0} ns untraced, {:.0} ns traced: {:.1} % slower when CPU-bound; {} and {} datagrams/s sent, {} and {} read by the application",
                c.datagram_bytes,
                c.traced_one_in,
                c.untraced_cpu_ns_per_datagram,
                c.traced_cpu_ns_per_datagram,
                c.slower_pct,
                group_thousands(c.untraced_pps.round() as u64),
                group_thousands(c.traced_pps.round() as u64),
                group_thousands(c.untraced_received_pps.round() as u64),
                group_thousands(c.traced_received_pps.round() as u64)
            ),
            width,
        ));
        if let Some(p) = &c.programs {
            out.push_str(&paragraph("\n", "", &program_costs(p), width));
            for line in recursion_misses(p) {
                out.push_str(&paragraph("", "", &line, width));
            }
        }
    }
    if !r.hints.is_empty() {
        out.push_str("\nhints:\n");
        for h in &r.hints {
            out.push_str(&paragraph("  - ", "    ", &h.message, width));
        }
    }
    let flags = crate::flags::render(&doc.flags, width);
    if !flags.is_empty() {
        out.push('\n');
        out.push_str(&flags);
    }
    out
}

/// Where XDP programs are attached and what their tracepoints showed.
fn xdp_line(x: &XdpReport) -> String {
    if let Some(why) = &x.unread {
        return format!(
            "XDP: the bed's links could not be read ({why}): the xdp tracepoints are not opened"
        );
    }
    if x.attached.is_empty() {
        return "XDP: no program attached to the bed's interfaces, so no XDP event can fire on the \
                path (the xdp tracepoints are not opened)"
            .to_string();
    }
    let attached: Vec<String> = x
        .attached
        .iter()
        .map(|a| {
            let ids: Vec<String> = a.prog_ids.iter().map(u32::to_string).collect();
            format!(
                "{} in {} ({}, program {})",
                a.dev,
                a.netns,
                a.mode,
                ids.join(", ")
            )
        })
        .collect();
    let events = if x.events.is_empty() {
        "no XDP event fired (a program that passes every frame fires none)".to_string()
    } else {
        let e: Vec<String> = x
            .events
            .iter()
            .map(|e| {
                format!(
                    "{} {} on {} × {}",
                    e.tracepoint,
                    e.action.as_deref().unwrap_or("?"),
                    if e.devs.is_empty() {
                        e.ifindex.map_or("?".into(), |i| format!("ifindex {i}"))
                    } else {
                        e.devs.join("/")
                    },
                    group_thousands(e.count)
                )
            })
            .collect();
        format!(
            "events over the journey (the whole host's): {}",
            e.join(", ")
        )
    };
    format!("XDP: programs on {}; {events}", attached.join(", "))
}

/// The `tp_btf` programs' own work per datagram, in words (the costliest
/// first).
fn program_costs(p: &ProgramCosts) -> String {
    let floor = match (p.floor_ns_per_run, p.ns_per_datagram_over_floor) {
        (Some(f), Some(over)) => format!(
            " (an empty program measures {f:.0} ns per run: the statistics' own clock reads; \
             {over:.0} ns per datagram over that floor)"
        ),
        _ => String::new(),
    };
    let top: Vec<String> = p
        .programs
        .iter()
        .filter(|r| r.runs > 0)
        .take(4)
        .map(|r| {
            format!(
                "{} {:.2} runs × {:.0} ns",
                r.tracepoint, r.runs_per_datagram, r.ns_per_run
            )
        })
        .collect();
    format!(
        "tracer's own work (kernel BPF run statistics, one more traced round of {} datagrams): \
         {:.1} program runs per datagram, {:.0} ns per datagram in the programs{floor}, {:.1} % \
         of the untraced sender's CPU; the costliest per datagram: {}; the tracepoints' dispatch \
         to the programs is not counted",
        group_thousands(p.datagrams),
        p.runs_per_datagram,
        p.ns_per_datagram,
        p.pct_of_untraced_cpu,
        top.join(", ")
    )
}

/// One line per program the kernel skipped runs of (already running on
/// that CPU) in the statistics round.
fn recursion_misses(p: &ProgramCosts) -> Vec<String> {
    p.programs
        .iter()
        .filter(|r| r.recursion_misses > 0)
        .map(|r| {
            format!(
                "the kernel skipped {} runs of the {} program because it was already running on \
                 that CPU: those events were not recorded",
                group_thousands(r.recursion_misses),
                r.tracepoint
            )
        })
        .collect()
}

/// The drops, one paragraph each (empty without drops).
fn drop_lines(drops: &[DropSite], width: Width) -> String {
    let mut out = String::new();
    if drops.is_empty() {
        return out;
    }
    out.push_str("\ndrops (kernel drop reason, after which step):\n");
    for d in drops {
        out.push_str(&paragraph(
            "  ",
            "    ",
            &format!(
                "{} × {} after {}{}{}",
                d.count,
                d.reason,
                d.after,
                d.netns
                    .as_ref()
                    .map(|n| format!(" in {n}"))
                    .unwrap_or_default(),
                d.location
                    .as_ref()
                    .map(|l| format!(" (at {l})"))
                    .unwrap_or_default()
            ),
            width,
        ));
    }
    out
}

/// The largest gaps, one paragraph each (none: nothing).
fn gap_lines(gaps: &[Gap], width: Width) -> String {
    let mut out = String::new();
    if !gaps.is_empty() {
        out.push_str("\nlargest gaps (median, p90, p99 µs):\n");
        for g in gaps.iter().take(LARGEST_GAPS) {
            let [m, p90, p99] = q3(&g.duration);
            out.push_str(&paragraph(
                &format!("  {m:>7} {p90:>7} {p99:>7}  "),
                &" ".repeat(28),
                &format!("{} (#{}→#{})", g.what, g.from + 1, g.to + 1),
                width,
            ));
        }
    }
    out
}

/// `linerate journey --iface`: the packets of any application that matched
/// the filter on an interface, one row per event in path order.
pub fn render_iface(doc: &Envelope<IfaceResult>, width: Width) -> String {
    let r = &doc.result;
    let p = &r.packets;
    let head = format!(
        "journey of `{}` packets through {}{}: {} matched in {:.1} s (stopped by {})",
        r.filter,
        r.iface,
        r.netns
            .as_deref()
            .map(|n| format!(" (namespace {n})"))
            .unwrap_or_default(),
        group_thousands(p.matched),
        r.traced_ns as f64 / 1e9,
        r.stopped_by
    );
    let mut out = paragraph("", "", &head, width);
    out.push_str(&paragraph(
        "",
        "",
        &format!(
            "followed from the first row to their end (delivered where the table shows deliveries) {}, dropped {} (matching elsewhere on the host, not through {}: {}; events followed by skb address only: {}; records lost from the ring: {}). Times from each packet's first event, {}.",
            p.followed_first_to_last,
            p.dropped,
            r.iface,
            p.elsewhere,
            p.chain_events,
            p.ring_lost_records,
            r.tracer.clock
        ),
        width,
    ));
    out.push('\n');
    out.push_str(&step_rows(&r.steps).fit(2, width));
    out.push_str(&gap_lines(&r.gaps, width));
    out.push_str(&drop_lines(&r.drops, width));
    out.push_str(&paragraph(
        "\n",
        "",
        &format!(
            "tracer: {} tp_btf programs judging the filter on the packet headers in BPF",
            r.tracer.tp_btf_programs.len()
        ),
        width,
    ));
    let flags = crate::flags::render(&doc.flags, width);
    if !flags.is_empty() {
        out.push('\n');
        out.push_str(&flags);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_costs_name_the_costliest_and_the_floor() {
        let runs = [
            ("net/net_dev_queue".to_string(), 1000, 60_000, 0),
            ("irq/softirq_entry".to_string(), 1000, 90_000, 0),
            ("napi/napi_poll".to_string(), 0, 0, 0),
        ];
        let p = ProgramCosts::new("stats".into(), 1000, &runs, Some((1000, 50_000)), 3000.0);
        let text = program_costs(&p);
        assert!(
            text.contains("2.0 program runs per datagram, 150 ns per datagram"),
            "{text}"
        );
        assert!(
            text.contains("empty program measures 50 ns per run"),
            "{text}"
        );
        assert!(
            text.contains("50 ns per datagram over that floor"),
            "{text}"
        );
        assert!(text.contains("5.0 %"), "{text}");
        let first = text.find("irq/softirq_entry 1.00 runs × 90 ns").unwrap();
        assert!(first < text.find("net/net_dev_queue").unwrap());
        // A program that never ran is not among the costliest.
        assert!(!text.contains("napi_poll"), "{text}");
        assert!(recursion_misses(&p).is_empty());
    }

    #[test]
    fn skipped_runs_get_a_line_each() {
        let runs = [
            ("net/net_dev_queue".to_string(), 1000, 60_000, 0),
            ("irq/softirq_entry".to_string(), 1000, 90_000, 1200),
        ];
        let p = ProgramCosts::new("stats".into(), 1000, &runs, None, 3000.0);
        let lines = recursion_misses(&p);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("the kernel skipped 1,200 runs of the irq/softirq_entry program"),
            "{}",
            lines[0]
        );
    }
}
