//! `linerate throughput`: the result as tables (intervals, per-direction
//! summary from both ends, and the seed-000 "% of max possible" table).

use crate::column::Scale;
use linerate_core::result::{exit_code, Envelope};
use linerate_core::sweep::Spread;
use linerate_core::throughput::model::{
    Direction, DirectionFigures, FlowDir, FlowFigures, FlowReport, FlowRole, LineMax, NoLineMax,
    Protocol, Scenarios, SideReport, ThroughputResult, Verification,
};
use linerate_core::units::{group_thousands, sig4, BitRate, ByteCount};

use crate::table::{Align, Doc, Table, Width};

fn dir_name(d: FlowDir) -> &'static str {
    match d {
        FlowDir::Forward => "forward (client→server)",
        FlowDir::Reverse => "reverse (server→client)",
    }
}

/// The "Packets" cell of a seed-000 row ("~": estimated as bytes / MSS).
fn packets_cell(d: &DirectionFigures) -> String {
    match d.packets {
        Some(n) if d.packets_estimated => format!("~{}", group_thousands(n)),
        Some(n) => group_thousands(n),
        None => "?".into(),
    }
}

/// The "Payload/packet" cell.
fn payload_cell(d: &DirectionFigures) -> String {
    d.payload_per_packet_bytes
        .map_or_else(|| "?".into(), group_thousands)
}

fn pct_cell(p: Option<f64>) -> String {
    p.map_or_else(|| "–".into(), |p| format!("{p:.2}%"))
}

/// What a TCP row's packets and payload per packet are.
fn tcp_packets_footnote(estimated: bool, mss: Option<u32>) -> String {
    let mss = mss.map(|m| format!(": {m} B")).unwrap_or_default();
    if estimated {
        format!(
            "TCP packets: segments, counted by the kernel where it says (TCP_INFO data_segs_out/_in; payload per packet then their mean), else estimated as bytes / MSS (~, payload per packet the MSS in use: TCP_MAXSEG read back{mss})."
        )
    } else {
        format!(
            "TCP packets: data segments as each end's kernel counted them (TCP_INFO data_segs_out at senders, retransmissions included; data_segs_in at receivers; a TSO/GSO super-packet counts as the segments it carries); payload per packet: their mean (bytes / segments; the MSS in use, TCP_MAXSEG read back{mss}, is the largest)."
        )
    }
}

fn end_name(s: &SideReport) -> &'static str {
    end_str(s.end)
}

fn end_str(e: linerate_core::throughput::model::End) -> &'static str {
    match e {
        linerate_core::throughput::model::End::Client => "client",
        linerate_core::throughput::model::End::Server => "server",
    }
}

fn opt_sig4(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), sig4)
}

/// "datagrams/s" or "blocks/s".
fn unit_rate(r: &ThroughputResult) -> &'static str {
    match r.params.protocol {
        Protocol::Tcp => "blocks/s",
        Protocol::Udp => "datagrams/s",
    }
}

/// The header lines: what ran, against what, on which clock.
fn header(out: &mut Doc, r: &ThroughputResult) {
    let p = &r.params;
    let proto = match p.protocol {
        Protocol::Tcp => "TCP",
        Protocol::Udp => "UDP",
    };
    let dir = match p.direction {
        Direction::Forward => "forward (client sends)",
        Direction::Reverse => "reverse (server sends)",
        Direction::Bidir => "bidirectional",
    };
    let unit = match p.protocol {
        Protocol::Tcp => "blocks",
        Protocol::Udp => "datagram payloads",
    };
    out.para(
        "",
        "  ",
        format!(
            "linerate throughput → {}: {proto}, {dir}, {} stream(s) per direction, {} s, {}-byte {unit}",
            r.server,
            p.streams,
            sig4(p.duration_ns as f64 / 1e9),
            group_thousands(u64::from(p.size_bytes)),
        ),
    );
    out.para(
        "",
        "  ",
        format!(
            "send path {}, receive path {}{}{}{}",
            p.send_path,
            p.recv_path,
            if p.recv_spin {
                " (spinning receivers)"
            } else {
                ""
            },
            p.recv_lowat()
                .map(|b| format!(", SO_RCVLOWAT {}", ByteCount::new(u64::from(b))))
                .or_else(|| p
                    .recv_nap()
                    .map(|us| format!(" (receivers nap {us} µs whenever the socket is empty)")))
                .unwrap_or_default(),
            p.rate_bits_per_s
                .map(|r| format!(", paced to {} per direction", BitRate::from_bps(r)))
                .unwrap_or_default()
        ),
    );
    let path = &r.path;
    if path.link_bits_per_s.is_some() || path.mtu_bytes.is_some() {
        let mut parts = Vec::new();
        if let Some(l) = path.link_bits_per_s {
            parts.push(format!(
                "link {}{}",
                BitRate::from_bps(l),
                match path.link_source {
                    Some(linerate_core::throughput::model::LinkSource::Bed) => " (the bed's)",
                    Some(linerate_core::throughput::model::LinkSource::Given) => " (given)",
                    None => "",
                }
            ));
        }
        if let Some(m) = path.mtu_bytes {
            parts.push(format!(
                "MTU {}{}",
                group_thousands(u64::from(m)),
                path.interface
                    .as_ref()
                    .map(|i| format!(" ({i})"))
                    .unwrap_or_default()
            ));
        }
        out.line(format!("path: {}", parts.join(", ")));
    }
    out.para("", "  ", format!("clock: {}", r.clock));
    if let Some(st) = r.steal_pct {
        out.para(
            "",
            "  ",
            format!(
                "client host: {st:.1} % of CPU time stolen by the hypervisor during the test (/proc/stat)"
            ),
        );
    }
}

/// All flows of both ends, in flow order, as (end, flow).
fn all_flows(r: &ThroughputResult) -> Vec<(&SideReport, &FlowReport)> {
    let mut v: Vec<(&SideReport, &FlowReport)> =
        r.client.flows.iter().map(|f| (&r.client, f)).collect();
    if let Some(s) = &r.server_side {
        v.extend(s.flows.iter().map(|f| (s, f)));
    }
    v.sort_by_key(|(s, f)| (f.flow, f.role == FlowRole::Receiver, end_name(s)));
    v
}

/// Interval table of every direction (core's figures: receivers' sums,
/// senders' when the receivers' are missing).
fn intervals(out: &mut Doc, r: &ThroughputResult) {
    for d in &r.figures.intervals {
        let mut t = Table::new([
            ("interval (s)", Align::Left),
            ("bytes", Align::Right),
            ("throughput", Align::Right),
            (unit_rate(r), Align::Right),
        ]);
        let scale = Scale::si(d.rows.iter().map(|iv| iv.bits_per_s));
        for iv in &d.rows {
            t.row(vec![
                format!(
                    "{:.2}-{:.2}{}",
                    iv.start_ns as f64 / 1e9,
                    iv.end_ns as f64 / 1e9,
                    if iv.omitted { " (omitted)" } else { "" }
                ),
                group_thousands(iv.bytes),
                scale.bits_per_s(iv.bits_per_s),
                group_thousands(iv.packets_per_s as u64),
            ]);
        }
        let role = match d.role {
            FlowRole::Receiver => "receiver",
            FlowRole::Sender => "sender",
        };
        out.blank();
        out.line(format!(
            "Intervals, {}: measured by the {role} ({}), all streams summed",
            dir_name(d.direction),
            end_str(d.end)
        ));
        out.table(t, 2);
    }
}

/// Per flow, from both ends.
fn flows_table(out: &mut Doc, r: &ThroughputResult) {
    let cpu_pkt = if r.params.protocol == Protocol::Tcp {
        "CPU µs/block"
    } else {
        "CPU µs/pkt"
    };
    let mut t = Table::new([
        ("flow", Align::Right),
        ("direction", Align::Left),
        ("end", Align::Left),
        ("role", Align::Left),
        ("path", Align::Left),
        ("bytes", Align::Right),
        ("time (s)", Align::Right),
        ("throughput", Align::Right),
        (unit_rate(r), Align::Right),
        ("% of max", Align::Right),
        ("lost", Align::Right),
        ("reord", Align::Right),
        ("dup", Align::Right),
        ("corrupt", Align::Right),
        ("CPU ns/B", Align::Right),
        (cpu_pkt, Align::Right),
    ])
    .optional(&[
        "dup", "reord", "path", "CPU ns/B", "time (s)", "bytes", "% of max", cpu_pkt,
    ]);
    let scale = Scale::si(r.figures.flows.iter().map(|g| g.bits_per_s));
    for (side, f) in all_flows(r) {
        let fig: Option<&FlowFigures> = r
            .figures
            .flows
            .iter()
            .find(|g| g.flow == f.flow && g.end == side.end && g.role == f.role);
        let (lost, reord, dup, corrupt) = match (&f.recv, f.verification) {
            (Some(c), v) => (
                group_thousands(c.seq.lost),
                group_thousands(c.seq.reordered),
                group_thousands(c.seq.duplicates),
                match v {
                    Verification::HeadersOnly => {
                        format!("{} (hdr only)", group_thousands(c.corrupt))
                    }
                    Verification::Sampled => format!("{} (sampled)", group_thousands(c.corrupt)),
                    Verification::Full | Verification::None => group_thousands(c.corrupt),
                },
            ),
            _ => ("".into(), "".into(), "".into(), "".into()),
        };
        t.row(vec![
            f.flow.to_string(),
            match f.direction {
                FlowDir::Forward => "forward".into(),
                FlowDir::Reverse => "reverse".into(),
            },
            end_name(side).into(),
            match f.role {
                FlowRole::Sender => "sent".into(),
                FlowRole::Receiver => "received".into(),
            },
            f.path.clone(),
            group_thousands(f.bytes),
            format!("{:.3}", f.elapsed_ns as f64 / 1e9),
            fig.map_or_else(|| "–".into(), |g| scale.bits_per_s(g.bits_per_s)),
            fig.map_or_else(|| "–".into(), |g| group_thousands(g.packets_per_s as u64)),
            pct_cell(fig.and_then(|g| g.pct_of_max)),
            lost,
            reord,
            dup,
            corrupt,
            opt_sig4(fig.and_then(|g| g.cpu_ns_per_byte)),
            opt_sig4(fig.and_then(|g| g.cpu_ns_per_packet).map(|v| v / 1000.0)),
        ]);
    }
    out.blank();
    out.para(
        "",
        "",
        "Per flow, from both ends (CPU: the flow thread's getrusage RUSAGE_THREAD, user+system)",
    );
    out.table(t, 2);
}

/// The footnote on a missing maximum.
fn no_max_note(r: &ThroughputResult) -> String {
    match &r.no_line_max {
        None | Some(NoLineMax::NoLink) => {
            "% of max possible: no line rate known (loopback and veth have none); give --link SPEED."
                .into()
        }
        Some(why) => format!("% of max possible: none, {why}."),
    }
}

/// The seed-000 table: packets sent, payload per packet, total data, time,
/// throughput and % of max possible, per direction and end.
fn seed_table(out: &mut Doc, r: &ThroughputResult) {
    let mut t = Table::new([
        ("", Align::Left),
        ("Packets", Align::Right),
        ("Payload/packet (B)", Align::Right),
        ("Total data (B)", Align::Right),
        ("Time (ms)", Align::Right),
        ("MB/s", Align::Right),
        ("% of max possible", Align::Right),
    ])
    .optional(&["Total data (B)"]);
    let lm: Option<&LineMax> = r.line_max.as_ref();
    if let Some(m) = lm {
        t.row(max_possible_row(m));
    }
    let tcp = r.params.protocol == Protocol::Tcp;
    let mut estimated = false;
    let mut acked_rows = false;
    for d in &r.figures.directions {
        estimated |= tcp && d.packets_estimated;
        acked_rows |= d.time_to_ack;
        t.row(vec![
            format!(
                "{} {}, {} ({})",
                dir_name_short(d.direction),
                if d.role == FlowRole::Sender {
                    "sent"
                } else {
                    "received"
                },
                end_str(d.end),
                d.path
            ),
            packets_cell(d),
            payload_cell(d),
            group_thousands(d.bytes),
            format!("{:.2}", d.time_ns as f64 / 1e6),
            sig4(d.bytes_per_s / 1e6),
            pct_cell(d.pct_of_max),
        ]);
    }
    out.blank();
    out.line("Table 1 (as in AN11053): throughput against the maximum possible");
    out.table(t, 2);
    let mut notes = Vec::new();
    if tcp {
        let mss = linerate_core::throughput::model::sender_mss(
            std::iter::once(&r.client).chain(r.server_side.iter()),
        );
        notes.push(tcp_packets_footnote(estimated, mss));
    }
    if acked_rows {
        notes.push("TCP senders' time: from the first write until every byte had been sent and acknowledged (TCP_INFO), not the last write, after which data may still sit in the socket.".to_string());
    }
    notes.push("MB/s: payload, 10^6 bytes per second.".into());
    match lm {
        Some(m) => notes.push(format!(
            "Max possible: line-rate model for {} with {}-byte payloads in {}-byte{} frames (+20 B preamble/SFD/IFG).",
            BitRate::from_bps(m.link_bits_per_s),
            m.payload_bytes,
            m.frame_bytes,
            if m.jumbo { " (jumbo)" } else { "" }
        )),
        None => notes.push(no_max_note(r)),
    }
    for n in notes {
        out.para("  ", "    ", n);
    }
}

fn dir_name_short(d: FlowDir) -> &'static str {
    match d {
        FlowDir::Forward => "forward",
        FlowDir::Reverse => "reverse",
    }
}

/// The whole human report of one run: header, intervals, flows, the seed
/// table, the flags (worst first) and the verdict.
pub fn render(doc: &Envelope<ThroughputResult>, width: Width) -> String {
    blocks(doc).text(width)
}

/// The whole result as a [`Doc`] (text or HTML).
pub fn blocks(doc: &Envelope<ThroughputResult>) -> Doc {
    let r = &doc.result;
    let mut s = Doc::new();
    header(&mut s, r);
    intervals(&mut s, r);
    flows_table(&mut s, r);
    seed_table(&mut s, r);
    if !doc.flags.is_empty() {
        s.blank();
        crate::flags::add(&mut s, &doc.flags);
    }
    let verdict = if doc.flags.iter().any(|f| f.code == "incomplete") {
        "INCOMPLETE (see the flags)"
    } else if exit_code(&doc.flags) != 0 {
        "INVALID (see the flags)"
    } else {
        "complete"
    };
    s.blank();
    s.line(format!("Result: {verdict}"));
    crate::testbed::add_link(&mut s, r.link_emulation.as_ref());
    s
}

/// A settings matrix (sweeps, repeats): one row per point with the median
/// of its runs and their min–max, then every run's flags.
pub fn render_points(doc: &Envelope<Scenarios>, width: Width) -> String {
    points_blocks(doc).text(width)
}

/// [`render_points`] as a [`Doc`] (text or HTML).
pub fn points_blocks(doc: &Envelope<Scenarios>) -> Doc {
    let mut t = Table::new([
        ("point", Align::Left),
        ("runs", Align::Right),
        ("Mbit/s", Align::Right),
        ("min–max", Align::Right),
        ("pkt/s", Align::Right),
        ("% of max", Align::Right),
        ("% min–max", Align::Right),
    ])
    .optional(&["% min–max", "pkt/s"]);
    let med = |s: Option<Spread>, f: f64| s.map_or("-".into(), |s| sig4(s.median / f));
    let range = |s: Option<Spread>, f: f64| {
        s.map_or("-".into(), |s| {
            format!("{}–{}", sig4(s.min / f), sig4(s.max / f))
        })
    };
    for p in &doc.result.points {
        t.row(vec![
            p.label.clone(),
            p.runs.len().to_string(),
            med(p.bits_per_s, 1e6),
            range(p.bits_per_s, 1e6),
            med(p.packets_per_s, 1.0),
            p.pct_of_max
                .map_or("-".into(), |s| format!("{:.2}", s.median)),
            p.pct_of_max
                .map_or("-".into(), |s| format!("{:.2}–{:.2}", s.min, s.max)),
        ]);
    }
    let mut s = Doc::new();
    s.para(
        "",
        "",
        "Settings matrix: per point the median of its runs (as received, else as sent), with min–max",
    );
    s.table(t, 2);
    if let Some(r) = doc.result.runs.first() {
        if r.result.line_max.is_none() {
            s.para("  ", "    ", no_max_note(&r.result));
        }
    }
    if !doc.flags.is_empty() {
        s.blank();
        crate::flags::add(&mut s, &doc.flags);
    }
    s
}

/// Seed 000's Table 1 across runs that differ only in the send path
/// (`--path ideal,typical,zerocopy`): one row per scenario, first direction
/// that ran (forward if any), sender's packets and data, receiver's rate.
pub fn render_scenarios(doc: &Envelope<Scenarios>, width: Width) -> String {
    scenario_blocks(doc).text(width)
}

/// The comparison of [`render_scenarios`] as a [`Doc`] (text or HTML).
pub fn scenario_blocks(doc: &Envelope<Scenarios>) -> Doc {
    let runs = &doc.result.runs;
    let mut t = Table::new([
        ("", Align::Left),
        ("Packets sent", Align::Right),
        ("Payload/packet (B)", Align::Right),
        ("Total data (B)", Align::Right),
        ("Time (ms)", Align::Right),
        ("MB/s", Align::Right),
        ("% of max possible", Align::Right),
        ("Sender CPU ns/B", Align::Right),
    ])
    .optional(&["Total data (B)", "Sender CPU ns/B"]);
    let lm = runs.iter().find_map(|r| r.result.line_max);
    if let Some(m) = lm {
        let mut cells = max_possible_row(&m);
        cells.push(String::new());
        t.row(cells);
    }
    for (i, run) in runs.iter().enumerate() {
        let r = &run.result;
        let dir = if r.params.direction == Direction::Reverse {
            FlowDir::Reverse
        } else {
            FlowDir::Forward
        };
        let Some(tx) = r.figures.direction(dir, FlowRole::Sender) else {
            continue;
        };
        // What arrived, when the receiver's figures are known; else what was sent.
        let (rate_of, label) = match r.figures.direction(dir, FlowRole::Receiver) {
            Some(rx) => (rx, ""),
            None => (tx, " (sent)"),
        };
        t.row(vec![
            format!("Scenario {}: {}{label}", i + 1, r.params.send_path),
            packets_cell(tx),
            payload_cell(tx),
            group_thousands(tx.bytes),
            format!("{:.2}", rate_of.time_ns as f64 / 1e6),
            sig4(rate_of.bytes_per_s / 1e6),
            pct_cell(rate_of.pct_of_max),
            opt_sig4(tx.cpu_ns_per_byte),
        ]);
    }
    let mut s = Doc::new();
    s.line("Table 1 across scenarios (as in AN11053): the same test with each send path");
    s.table(t, 2);
    s.para(
        "  ",
        "    ",
        "Throughput and time: measured by the receiver (what arrived); packets and data: sent.",
    );
    if lm.is_none() {
        if let Some(r) = runs.first() {
            s.para("  ", "    ", no_max_note(&r.result));
        }
    }
    s
}

/// The "Max possible" row of seed 000's Table 1 from the line-rate model.
fn max_possible_row(m: &LineMax) -> Vec<String> {
    vec![
        format!(
            "Max possible ({}, {})",
            BitRate::from_bps(m.link_bits_per_s),
            m.encap
        ),
        group_thousands(m.frames_per_s as u64) + "/s",
        group_thousands(u64::from(m.payload_bytes)),
        String::new(),
        String::new(),
        sig4(m.payload_bytes_per_s / 1e6),
        "100.0%".into(),
    ]
}
