//! `linerate rfc2544` for people: a heading (link, generator, latency
//! clock), one table per frame size, and the result's flags. Every figure is
//! a field of [`Rfc2544Result`]; nothing is computed here.

use linerate_core::procedure::rfc2544::Limit;
use linerate_core::result::Flag;
use linerate_core::rfc2544::{Rfc2544Json, SizeReport, TestKind};
use linerate_core::units::{format_bits_per_s, group_thousands};

use crate::table::{Align, Doc, Table, Width};

/// Flags the heading already says (the generator's fallback and notes).
const IN_HEADING: [&str; 3] = [
    "generator_fallback",
    "live_frames_caveats",
    "iface_setting_changed",
];

fn fps(v: f64) -> String {
    group_thousands(v.round() as u64)
}

fn pct(v: Option<f64>) -> String {
    v.map(|p| format!("{p:.2}")).unwrap_or_default()
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// What bounds a throughput, from the result's limit and the equipment
/// behind the trials that set it.
fn limit_note(s: &SizeReport, l: Option<Limit>) -> String {
    match l {
        Some(Limit::LineRate) => "passes at line rate".into(),
        Some(Limit::Device) => "device limit (loss above)".into(),
        Some(Limit::Generator) => format!(
            "{}: a lower bound, the device may do more (see the invalid trials)",
            equipment_label(s, TestKind::Throughput)
        ),
        None => String::new(),
    }
}

fn equipment_label(s: &SizeReport, test: TestKind) -> &'static str {
    s.trace_of(test)
        .and_then(|t| t.limited_by())
        .map_or("GENERATOR-LIMITED", |e| e.limited_label())
}

/// The table of one frame size: what was found, in frames/s and percent of
/// line rate, with notes.
pub fn size_table(s: &SizeReport, generator: &str) -> Table {
    let mut t = Table::new([
        ("", Align::Left),
        ("fps", Align::Right),
        ("% of line", Align::Right),
        ("", Align::Left),
    ]);
    t.row(vec![
        "line rate".into(),
        group_thousands(s.line_rate_frames_per_s.floor() as u64),
        "100.00".into(),
        String::new(),
    ]);
    if let Some(c) = s.generator_ceiling_frames_per_s {
        t.row(vec![
            "generator ceiling".into(),
            fps(c),
            pct(s.generator_ceiling_line_rate_pct),
            generator.to_string(),
        ]);
    }
    if let Some(tp) = &s.throughput {
        if let Some(f) = tp.throughput_fps {
            t.row(vec![
                "throughput".into(),
                fps(f),
                pct(s.throughput_line_rate_pct),
                format!(
                    "{} (L2), ±{} fps; {}",
                    s.throughput_bits_per_s
                        .map(format_bits_per_s)
                        .unwrap_or_else(|| "-".into()),
                    fps(tp.resolution_fps),
                    limit_note(s, tp.limited_by)
                ),
            ]);
        }
    }
    if let Some(l) = &s.latency {
        let note = match l.merged {
            Some(m) => format!(
                "latency µs: p50 {} min {} p99 {} max {} over {} frames, {} trial(s){}{}",
                us(m.p50_ns),
                us(m.min_ns),
                us(m.p99_ns),
                us(m.max_ns),
                group_thousands(m.count),
                l.trials.len(),
                if s.latency_at_line_rate {
                    " at line rate (no throughput test)"
                } else {
                    ""
                },
                if l.invalid_trials > 0 {
                    format!(
                        "; {} trial(s) INVALID (generator short or receiver drops)",
                        l.invalid_trials
                    )
                } else {
                    String::new()
                }
            ),
            None => format!(
                "latency: no frame measured ({} invalid trial(s))",
                l.invalid_trials
            ),
        };
        t.row(vec!["latency".into(), fps(l.rate_fps), String::new(), note]);
    }
    if let Some(loss) = &s.loss {
        let curve: Vec<String> = loss
            .points
            .iter()
            .map(|p| match p.loss_pct {
                Some(l) => format!("{:.0}%:{:.2}", p.rate_pct, l),
                None => format!("{:.0}%:GEN", p.rate_pct),
            })
            .collect();
        t.row(vec![
            "frame loss".into(),
            String::new(),
            String::new(),
            format!("% of line rate:loss % {}", curve.join("  ")),
        ]);
    }
    if let Some(b) = &s.back_to_back {
        let frames = match b.mean_frames {
            Some(m) => format!("{} frames", fps(m)),
            None => "-".into(),
        };
        let note = if b.generator_limited {
            format!(
                "{}: bursts at line rate could not be sent or received whole",
                equipment_label(s, TestKind::B2b)
            )
        } else if b.runs.iter().all(|r| r.limited_by == Limit::LineRate) {
            format!(
                "the longest burst tried ({} frames) passed",
                group_thousands(b.max_frames)
            )
        } else {
            format!("mean of {} search(es)", b.runs.len())
        };
        t.row(vec![
            "back-to-back".into(),
            fps(s.line_rate_frames_per_s),
            "100.00".into(),
            format!("{frames}; {note}"),
        ]);
    }
    if let Some(sf) = &s.single_frame {
        let note = match sf.latency.merged {
            Some(m) => format!(
                "single frame µs: p50 {} min {} p99 {}; one frame at a time: {}{}",
                us(m.p50_ns),
                us(m.min_ns),
                us(m.p99_ns),
                sf.single_frame_bits_per_s
                    .map(format_bits_per_s)
                    .unwrap_or_else(|| "-".into()),
                sf.streaming_bits_per_s
                    .map(|b| format!(" vs streaming {}", format_bits_per_s(b)))
                    .unwrap_or_default()
            ),
            None => "single frame: no frame measured".into(),
        };
        t.row(vec![
            "single frame".into(),
            fps(sf.latency.rate_fps),
            String::new(),
            note,
        ]);
    }
    if s.invalid_trials > 0 {
        t.row(vec![
            "invalid trials".into(),
            String::new(),
            String::new(),
            format!(
                "{}: the generator fell short of the asked rate or the receiver dropped frames (not counted as DUT loss)",
                s.invalid_trials
            ),
        ]);
    }
    t
}

/// The spread table of runs combined (sweeps, repeats).
fn spread_table(spread: &[linerate_core::rfc2544::SizeSpread]) -> Table {
    let mut t = Table::new([
        ("point", Align::Left),
        ("runs", Align::Right),
        ("throughput fps", Align::Right),
        ("min–max", Align::Right),
        ("latency p50 µs", Align::Right),
        ("single-frame", Align::Right),
    ])
    .optional(&["single-frame", "min–max"]);
    for s in spread {
        t.row(vec![
            s.label.clone(),
            s.runs.to_string(),
            s.throughput_fps.map_or("-".into(), |x| fps(x.median)),
            s.throughput_fps
                .map_or("-".into(), |x| format!("{}–{}", fps(x.min), fps(x.max))),
            s.latency_p50_ns
                .map_or("-".into(), |x| format!("{:.2}", x.median / 1e3)),
            s.single_frame_bits_per_s
                .map_or("-".into(), |x| format_bits_per_s(x.median)),
        ]);
    }
    t
}

/// The whole report: heading, a table per frame size, flags.
pub fn render(doc: &Rfc2544Json, width: Width) -> String {
    blocks(doc).text(width)
}

/// The whole report as a [`Doc`] (text or HTML).
pub fn blocks(doc: &Rfc2544Json) -> Doc {
    let r = &doc.result;
    let generator = r.generator.describe(r.qdisc_bypass);
    let mut out = Doc::new();
    out.para(
        "",
        "  ",
        format!(
            "RFC 2544 on a {} link (line rate counts 20 B preamble+IFG per frame)",
            format_bits_per_s(r.link_bits_per_s as f64)
        ),
    );
    let mut g = format!("generator: {generator}");
    if r.sender_threads > 1 {
        g.push_str(&format!(", {} sender threads", r.sender_threads));
    }
    if let Some(why) = &r.generator_fallback {
        g.push_str(&format!(" (auto: faster generators not used: {why})"));
    }
    out.para("", "  ", g);
    let mut rx = format!("receiver: {}", r.receiver.name());
    if let Some(why) = &r.receiver_fallback {
        rx.push_str(&format!(" (auto: XDP counter not used: {why})"));
    }
    out.para("", "  ", rx);
    out.para("", "  ", format!("latency clock: {}", r.latency_clock));
    for n in r.generator_notes.iter().chain(&r.receiver_notes) {
        out.para("note: ", "      ", n.clone());
    }
    for s in &r.sizes {
        let mut head = format!("{}-byte frames", s.frame_bytes);
        if !s.settings.is_empty() {
            head = format!("{head}, {}", linerate_core::sweep::label(&s.settings));
        }
        if let Some(n) = s.repeat {
            head = format!("{head}, run {n}");
        }
        out.blank();
        out.para("", "", head);
        out.table(size_table(s, generator), 2);
    }
    if !r.spread.is_empty() {
        out.blank();
        out.para(
            "",
            "",
            "Per point and frame size: the median of its runs, with min–max",
        );
        out.table(spread_table(&r.spread), 2);
    }
    let flags: Vec<Flag> = doc
        .flags
        .iter()
        .filter(|f| !IN_HEADING.contains(&f.code.as_str()))
        .cloned()
        .collect();
    if !flags.is_empty() {
        out.blank();
        crate::flags::add(&mut out, &flags);
    }
    crate::testbed::add_link(&mut out, r.link_emulation.as_ref());
    out
}
