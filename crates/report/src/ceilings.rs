//! `linerate ceilings` for people: the machine and method facts, one table
//! per part (time per operation with its spread, the rate, the line rate it
//! fills and the verdict), the headline sentences and the flags. Every
//! figure is a field of [`CeilingsResult`]; nothing is computed here.

use linerate_core::ceilings::{Cache, Ceiling, CeilingsResult, Part};
use linerate_core::result::Flag;
use linerate_core::units::{format_bits_per_s, format_bytes_per_s};

use crate::table::{paragraph, Align, Table, Width};

/// `64 B`, `1518 B`, `64 KiB`, `1 MiB`.
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// "enough for 25G, not for 40G".
pub fn verdict(c: &Ceiling) -> String {
    match (&c.enough_for, &c.not_for) {
        (Some(e), Some(n)) => format!("enough for {e}, not for {n}"),
        (Some(e), None) => format!("enough for {e}"),
        (None, Some(n)) => format!("not for {n}"),
        (None, None) => String::new(),
    }
}

fn ns(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The headline of a benchmark: "Internet checksum (avx2), 1518-byte frames:
/// 41.2 Gbit/s — enough for 25G, not for 40G".
pub fn sentence(c: &Ceiling) -> String {
    let what = match c.part {
        Part::Copy => format!(
            "copy ({}, {}), {} blocks",
            c.method,
            if c.cache == Some(Cache::Cold) {
                "cold"
            } else {
                "hot"
            },
            size(c.bytes_per_op)
        ),
        Part::Checksum => format!(
            "Internet checksum ({}), {}-byte frames",
            c.method, c.frame_bytes
        ),
        Part::Send => format!("send ({}), {}-byte frames", c.method, c.frame_bytes),
        Part::Receive => format!("receive ({}), {}-byte frames", c.method, c.frame_bytes),
    };
    format!(
        "{what}: {} — {}",
        format_bits_per_s(c.line_rate_bits_per_s),
        verdict(c)
    )
}

/// The table of one part.
pub fn part_table(r: &CeilingsResult, part: Part, width: Width) -> Option<String> {
    let rows: Vec<&Ceiling> = r.ceilings.iter().filter(|c| c.part == part).collect();
    if rows.is_empty() {
        return None;
    }
    let energy = rows.iter().any(|c| c.energy_uj_per_op.is_some());
    let packets = matches!(part, Part::Send | Part::Receive);
    let mut cols = vec![("method", Align::Left)];
    if part == Part::Copy {
        cols.push(("cache", Align::Left));
    }
    cols.extend([
        (
            if part == Part::Copy { "block" } else { "frame" },
            Align::Right,
        ),
        (if packets { "ns/packet" } else { "ns/op" }, Align::Right),
        ("min–max", Align::Right),
        (if packets { "packets/s" } else { "bytes/s" }, Align::Right),
        ("line rate", Align::Right),
        ("verdict", Align::Left),
    ]);
    if energy {
        cols.push(("µJ/op", Align::Right));
    }
    let mut t = Table::new(cols).optional(&["µJ/op", "min–max", "bytes/s"]);
    for c in rows {
        let mut cells = vec![c.method.clone()];
        if part == Part::Copy {
            cells.push(match c.cache {
                Some(Cache::Cold) => "cold".into(),
                _ => "hot".into(),
            });
        }
        cells.extend([
            if part == Part::Copy {
                size(c.bytes_per_op)
            } else {
                format!("{} B", c.frame_bytes)
            },
            ns(c.ns_per_op.median),
            format!("{}–{}", ns(c.ns_per_op.min), ns(c.ns_per_op.max)),
            if packets {
                format!("{:.3} M", c.frames_per_s / 1e6)
            } else {
                format_bytes_per_s(c.bytes_per_s)
            },
            format_bits_per_s(c.line_rate_bits_per_s),
            verdict(c),
        ]);
        if energy {
            cells.push(
                c.energy_uj_per_op
                    .map_or(String::new(), |e| format!("{e:.3}")),
            );
        }
        t.row(cells);
    }
    Some(t.fit(2, width))
}

fn heading(part: Part) -> &'static str {
    match part {
        Part::Copy => "Copy by block size, method and cache state (a block above a jumbo frame counts as 1518-byte frames)",
        Part::Checksum => "RFC 1071 Internet checksum by frame size (scalar, and vectorised where the CPU has the features)",
        Part::Send => "Send paths: one UDP/IPv4 datagram per frame to a socket on loopback (the cost includes loopback's receive up to that socket)",
        Part::Receive => "Receive paths: queued UDP/IPv4 datagrams drained from a socket on loopback",
    }
}

/// The whole report: facts, checks, a table per part, headlines, flags.
pub fn render(r: &CeilingsResult, flags: &[Flag], width: Width) -> String {
    let m = &r.machine;
    let mut text = paragraph(
        "",
        "",
        &format!(
            "linerate ceilings{}: {} with {}{}; each figure the median of {} repeats after {} \
             warm-up, timed with {}; cold copies walk {} arenas.",
            if r.quick { " (quick)" } else { "" },
            m.arch,
            if m.cpu_features.is_empty() {
                "no vector features probed".to_string()
            } else {
                format!("CPU features {}", m.cpu_features.join(" "))
            },
            m.llc_bytes
                .map_or(String::new(), |b| format!(", last-level cache {}", size(b))),
            r.repeats,
            r.warmups,
            r.clock,
            size(r.cold_arena_bytes),
        ),
        width,
    );
    for c in &r.checks {
        text.push_str(&paragraph(
            "check: ",
            "       ",
            &format!(
                "{}: {} — {}",
                c.part,
                c.what,
                if c.passed { "passed" } else { "FAILED" }
            ),
            width,
        ));
    }
    for part in Part::ALL {
        if let Some(t) = part_table(r, part, width) {
            text.push('\n');
            text.push_str(&paragraph("", "", heading(part), width));
            text.push_str(&t);
        }
    }
    let heads = headlines(r);
    if !heads.is_empty() {
        text.push('\n');
        for h in heads {
            text.push_str(&paragraph("* ", "  ", &sentence(h), width));
        }
    }
    if !r.skipped.is_empty() {
        text.push('\n');
        // One line per reason, naming every benchmark it stopped.
        let mut reasons: Vec<&str> = Vec::new();
        for s in &r.skipped {
            if !reasons.contains(&s.reason.as_str()) {
                reasons.push(&s.reason);
            }
        }
        for reason in reasons {
            let which: Vec<String> = (r.skipped.iter())
                .filter(|s| s.reason == reason)
                .map(|s| format!("{} {}", s.part, s.method))
                .collect();
            text.push_str(&paragraph(
                "not measured: ",
                "  ",
                &format!("{}: {reason}", which.join(", ")),
                width,
            ));
        }
    }
    let f = crate::flags::render(flags, width);
    if !f.is_empty() {
        text.push('\n');
        text.push_str(&f);
    }
    text
}

/// The benchmarks the headline sentences name: per part (copies: hot and
/// cold), the fastest method at 1518-byte frames, or at the largest frame
/// measured when none was 1518 bytes.
pub fn headlines(r: &CeilingsResult) -> Vec<&Ceiling> {
    let best = |part: Part, cache: Option<Cache>| {
        let group: Vec<&Ceiling> = r
            .ceilings
            .iter()
            // A copy above a jumbo frame stands for 1518-byte frames: not
            // a frame-sized copy.
            .filter(|c| {
                c.part == part
                    && c.cache == cache
                    && (part != Part::Copy || c.bytes_per_op == u64::from(c.frame_bytes))
            })
            .collect();
        let frame = if group.iter().any(|c| c.frame_bytes == 1518) {
            1518
        } else {
            group.iter().map(|c| c.frame_bytes).max()?
        };
        group
            .into_iter()
            .filter(|c| c.frame_bytes == frame)
            .max_by(|a, b| a.frames_per_s.total_cmp(&b.frames_per_s))
    };
    [
        best(Part::Copy, Some(Cache::Hot)),
        best(Part::Copy, Some(Cache::Cold)),
        best(Part::Checksum, None),
        best(Part::Send, None),
        best(Part::Receive, None),
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_core::ceilings::Sample;

    #[test]
    fn headline_sentence() {
        // 1518-byte checksums in 320 ns: 3.125 M frames/s, 38.45 Gbit/s of
        // 1538 wire bytes each (40G carries 3.25 M of them).
        let c = Ceiling::from_sample(&Sample {
            part: Part::Checksum,
            method: "avx2".into(),
            cache: None,
            bytes_per_op: 1518,
            frame_bytes: None,
            ops_per_repeat: 1000,
            repeat_ns: vec![320_000],
            energy: None,
        });
        assert_eq!(
            sentence(&c),
            "Internet checksum (avx2), 1518-byte frames: 38.45 Gbit/s — enough for 25G, not for 40G"
        );
        assert_eq!(size(64 << 20), "64 MiB");
        assert_eq!(size(1518), "1518 B");
    }
}
