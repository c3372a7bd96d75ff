//! `linerate throughput`: the result as tables (intervals, per-direction
//! summary from both ends, and the seed-000 "% of max possible" table).

use std::fmt::Write as _;

use linerate_core::throughput::model::{
    sender_mss, Direction, DirectionSum, FlowDir, FlowReport, FlowRole, LineMax, Protocol,
    SideReport, ThroughputResult, Verification,
};
use linerate_core::units::{format_bits_per_s, group_thousands, sig4, BitRate, ByteCount};

use crate::table::{Align, Table};

fn dir_name(d: FlowDir) -> &'static str {
    match d {
        FlowDir::Forward => "forward (client→server)",
        FlowDir::Reverse => "reverse (server→client)",
    }
}

/// The "Packets" cell of a seed-000 row: datagrams (UDP); TCP segments as
/// the kernel counted them, else estimated as bytes / MSS ("~").
fn packets_cell(sum: &DirectionSum, tcp: bool, mss: Option<u32>) -> String {
    match (tcp, sum.tcp_segments, mss) {
        (false, _, _) => group_thousands(sum.packets),
        (true, Some(n), _) => group_thousands(n),
        (true, None, Some(m)) if m > 0 => {
            format!("~{}", group_thousands(sum.bytes.div_ceil(u64::from(m))))
        }
        (true, None, _) => "?".into(),
    }
}

/// The "Payload/packet" cell: the datagram payload (UDP); for TCP the mean
/// payload of the counted segments, else the MSS (`per_packet`).
fn payload_cell(sum: &DirectionSum, per_packet: Option<u32>) -> String {
    match sum.tcp_segments {
        Some(n) if n > 0 => group_thousands((sum.bytes + n / 2) / n),
        _ => per_packet.map_or_else(|| "?".into(), |p| group_thousands(u64::from(p))),
    }
}

/// What a TCP row's packets and payload per packet are.
fn tcp_packets_footnote(s: &mut String, estimated: bool, mss: Option<u32>) {
    let mss = mss.map(|m| format!(": {m} B")).unwrap_or_default();
    let _ = if estimated {
        writeln!(
            s,
            "  TCP packets: segments, counted by the kernel where it says (TCP_INFO data_segs_out/_in; payload per packet then their mean), else estimated as bytes / MSS (~, payload per packet the MSS in use: TCP_MAXSEG read back{mss})."
        )
    } else {
        writeln!(
            s,
            "  TCP packets: data segments as each end's kernel counted them (TCP_INFO data_segs_out at senders, retransmissions included; data_segs_in at receivers; a TSO/GSO super-packet counts as the segments it carries); payload per packet: their mean (bytes / segments; the MSS in use, TCP_MAXSEG read back{mss}, is the largest)."
        )
    };
}

fn end_name(s: &SideReport) -> &'static str {
    match s.end {
        linerate_core::throughput::model::End::Client => "client",
        linerate_core::throughput::model::End::Server => "server",
    }
}

fn per_packet(f: &FlowReport) -> String {
    f.cpu_ns_per_packet()
        .map_or_else(|| "–".into(), |v| sig4(v / 1000.0))
}

fn per_byte(f: &FlowReport) -> String {
    f.cpu_ns_per_byte().map_or_else(|| "–".into(), sig4)
}

/// "datagrams/s" or "blocks/s".
fn unit_rate(r: &ThroughputResult) -> &'static str {
    match r.params.protocol {
        Protocol::Tcp => "blocks/s",
        Protocol::Udp => "datagrams/s",
    }
}

/// The header lines: what ran, against what, on which clock.
fn header(r: &ThroughputResult) -> String {
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
    let mut s = format!(
        "linerate throughput → {}: {proto}, {dir}, {} stream(s) per direction, {} s, {}-byte {unit}\n",
        r.server,
        p.streams,
        sig4(p.duration_ns as f64 / 1e9),
        group_thousands(u64::from(p.size_bytes)),
    );
    let _ = writeln!(
        s,
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
    );
    let _ = writeln!(s, "clock: {}", r.clock);
    if let Some(st) = r.steal_pct {
        let _ = writeln!(
            s,
            "client host: {st:.1} % of CPU time stolen by the hypervisor during the test (/proc/stat)"
        );
    }
    s
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

/// Interval table: receiver side of every direction (sender side when the
/// receiver's figures are missing), summed over streams.
fn intervals(r: &ThroughputResult) -> String {
    let mut out = String::new();
    for dir in [FlowDir::Forward, FlowDir::Reverse] {
        let flows: Vec<(&SideReport, &FlowReport)> = all_flows(r)
            .into_iter()
            .filter(|(_, f)| f.direction == dir)
            .collect();
        if flows.is_empty() {
            continue;
        }
        let rx: Vec<_> = flows
            .iter()
            .filter(|(_, f)| f.role == FlowRole::Receiver)
            .collect();
        let (chosen, role) = if rx.is_empty() {
            (flows.iter().collect::<Vec<_>>(), "sender")
        } else {
            (rx, "receiver")
        };
        let end = chosen.first().map_or("?", |(s, _)| end_name(s));
        let n = chosen
            .iter()
            .map(|(_, f)| f.intervals.len())
            .max()
            .unwrap_or(0);
        let mut t = Table::new([
            ("interval (s)", Align::Left),
            ("bytes", Align::Right),
            ("throughput", Align::Right),
            (unit_rate(r), Align::Right),
        ]);
        for i in 0..n {
            let (mut bytes, mut packets, mut start, mut end_ns) = (0u64, 0u64, u64::MAX, 0u64);
            for (_, f) in &chosen {
                if let Some(iv) = f.intervals.get(i) {
                    bytes += iv.bytes;
                    packets += iv.packets;
                    start = start.min(iv.start_ns);
                    end_ns = end_ns.max(iv.end_ns);
                }
            }
            let span = end_ns.saturating_sub(start).max(1) as f64 / 1e9;
            t.row(vec![
                format!("{:.2}-{:.2}", start as f64 / 1e9, end_ns as f64 / 1e9),
                group_thousands(bytes),
                format_bits_per_s(bytes as f64 * 8.0 / span),
                group_thousands((packets as f64 / span) as u64),
            ]);
        }
        let _ = writeln!(
            out,
            "\nIntervals, {}: measured by the {role} ({end}), all streams summed",
            dir_name(dir)
        );
        out.push_str(&t.render(2));
    }
    out
}

/// Per flow, from both ends.
fn flows_table(r: &ThroughputResult) -> String {
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
        ("lost", Align::Right),
        ("reord", Align::Right),
        ("dup", Align::Right),
        ("corrupt", Align::Right),
        ("CPU ns/B", Align::Right),
        (
            if r.params.protocol == Protocol::Tcp {
                "CPU µs/block"
            } else {
                "CPU µs/pkt"
            },
            Align::Right,
        ),
    ]);
    for (side, f) in all_flows(r) {
        let (lost, reord, dup, corrupt) = match (&f.recv, f.verification) {
            (Some(c), v) => (
                group_thousands(c.seq.lost),
                group_thousands(c.seq.reordered),
                group_thousands(c.seq.duplicates),
                if v == Verification::HeadersOnly {
                    format!("{} (hdr only)", c.corrupt)
                } else {
                    group_thousands(c.corrupt)
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
            format_bits_per_s(f.bytes_per_s() * 8.0),
            group_thousands(f.packets_per_s() as u64),
            lost,
            reord,
            dup,
            corrupt,
            per_byte(f),
            per_packet(f),
        ]);
    }
    let mut s = String::from("\nPer flow, from both ends (CPU: the flow thread's getrusage RUSAGE_THREAD, user+system)\n");
    s.push_str(&t.render(2));
    s
}

/// The seed-000 table: packets sent, payload per packet, total data, time,
/// throughput and % of max possible, per direction and end.
fn seed_table(r: &ThroughputResult) -> String {
    let mut t = Table::new([
        ("", Align::Left),
        ("Packets", Align::Right),
        ("Payload/packet (B)", Align::Right),
        ("Total data (B)", Align::Right),
        ("Time (ms)", Align::Right),
        ("Throughput (MB/s)", Align::Right),
        ("% of max possible", Align::Right),
    ]);
    let lm: Option<&LineMax> = r.line_max.as_ref();
    if let Some(m) = lm {
        t.row(max_possible_row(m));
    }
    let tcp = r.params.protocol == Protocol::Tcp;
    let mss = sender_mss(std::iter::once(&r.client).chain(r.server_side.iter()));
    let per_packet = if tcp { mss } else { Some(r.params.size_bytes) };
    let mut sides = vec![&r.client];
    if let Some(s) = &r.server_side {
        sides.push(s);
    }
    let mut estimated = false;
    let mut acked_rows = false;
    for dir in [FlowDir::Forward, FlowDir::Reverse] {
        for role in [FlowRole::Sender, FlowRole::Receiver] {
            for side in &sides {
                let Some(sum) = side.sum(dir, role) else {
                    continue;
                };
                let packets = packets_cell(&sum, tcp, per_packet);
                estimated |= tcp && sum.tcp_segments.is_none();
                // A TCP sender's time runs to its last acknowledgement.
                let (time_ns, rate) = match sum.acked_ns {
                    Some(a) if role == FlowRole::Sender && a > 0 => {
                        acked_rows = true;
                        (a, sum.bytes as f64 * 1e9 / a as f64)
                    }
                    _ => (sum.elapsed_ns, sum.bytes_per_s),
                };
                t.row(vec![
                    format!(
                        "{} {} by {} ({})",
                        match dir {
                            FlowDir::Forward => "forward",
                            FlowDir::Reverse => "reverse",
                        },
                        if role == FlowRole::Sender {
                            "sent"
                        } else {
                            "received"
                        },
                        end_name(side),
                        match role {
                            FlowRole::Sender => r.params.send_path.name(),
                            FlowRole::Receiver => r.params.recv_path.name(),
                        }
                    ),
                    packets,
                    payload_cell(&sum, per_packet),
                    group_thousands(sum.bytes),
                    format!("{:.2}", time_ns as f64 / 1e6),
                    sig4(rate / 1e6),
                    lm.map_or_else(|| "–".into(), |m| format!("{:.2}%", m.percent_of(rate))),
                ]);
            }
        }
    }
    let mut s =
        String::from("\nTable 1 (as in AN11053): throughput against the maximum possible\n");
    s.push_str(&t.render(2));
    if tcp {
        tcp_packets_footnote(&mut s, estimated, mss);
    }
    if acked_rows {
        s.push_str(
            "  TCP senders' time: from the first write until every byte had been sent and acknowledged (TCP_INFO), not the last write, after which data may still sit in the socket.\n",
        );
    }
    match lm {
        Some(m) => {
            let _ = writeln!(
                s,
                "  Max possible: line-rate model for {} with {}-byte payloads in {}-byte frames (+20 B preamble/SFD/IFG).",
                BitRate::from_bps(m.link_bits_per_s),
                m.payload_bytes,
                m.frame_bytes
            );
        }
        None => s.push_str(
            "  % of max possible: no line rate known (loopback and veth have none); give --link SPEED.\n",
        ),
    }
    s
}

/// The whole human report.
pub fn render(r: &ThroughputResult) -> String {
    let mut s = header(r);
    s.push_str(&intervals(r));
    s.push_str(&flows_table(r));
    s.push_str(&seed_table(r));
    if !r.notes.is_empty() {
        s.push_str("\nNotes:\n");
        for n in &r.notes {
            let _ = writeln!(s, "  * {n}");
        }
    }
    let _ = writeln!(
        s,
        "\nResult: {}",
        if r.complete {
            "complete"
        } else {
            "INCOMPLETE or flagged (see notes)"
        }
    );
    s
}

/// Seed 000's Table 1 across runs that differ only in the send path
/// (`--path ideal,typical,zerocopy`): one row per scenario, first direction
/// that ran (forward if any), sender's packets and data, receiver's rate.
pub fn render_scenarios(runs: &[ThroughputResult]) -> String {
    let mut t = Table::new([
        ("", Align::Left),
        ("Packets sent", Align::Right),
        ("Payload/packet (B)", Align::Right),
        ("Total data (B)", Align::Right),
        ("Time (ms)", Align::Right),
        ("Throughput (MB/s)", Align::Right),
        ("% of max possible", Align::Right),
        ("Sender CPU ns/B", Align::Right),
    ]);
    let lm = runs.iter().find_map(|r| r.line_max);
    if let Some(m) = lm {
        let mut cells = max_possible_row(&m);
        cells.push(String::new());
        t.row(cells);
    }
    for (i, r) in runs.iter().enumerate() {
        let dir = if r.params.direction == Direction::Reverse {
            FlowDir::Reverse
        } else {
            FlowDir::Forward
        };
        let sides: Vec<&SideReport> = std::iter::once(&r.client)
            .chain(r.server_side.iter())
            .collect();
        let tx = sides.iter().find_map(|s| s.sum(dir, FlowRole::Sender));
        let rx = sides.iter().find_map(|s| s.sum(dir, FlowRole::Receiver));
        let tcp = r.params.protocol == Protocol::Tcp;
        let mss = sender_mss(sides.iter().copied());
        let per_packet = if tcp { mss } else { Some(r.params.size_bytes) };
        let Some(tx) = tx else { continue };
        // What arrived, when the receiver's figures are known; else what was sent.
        let (rate, time_ns, label) = match rx {
            Some(rx) => (rx.bytes_per_s, rx.elapsed_ns, ""),
            None => (tx.bytes_per_s, tx.elapsed_ns, " (sent)"),
        };
        t.row(vec![
            format!("Scenario {}: {}{label}", i + 1, r.params.send_path),
            packets_cell(&tx, tcp, per_packet),
            payload_cell(&tx, per_packet),
            group_thousands(tx.bytes),
            format!("{:.2}", time_ns as f64 / 1e6),
            sig4(rate / 1e6),
            lm.map_or_else(|| "–".into(), |m| format!("{:.2}%", m.percent_of(rate))),
            if tx.bytes > 0 {
                sig4(tx.cpu_ns as f64 / tx.bytes as f64)
            } else {
                "–".into()
            },
        ]);
    }
    let mut s = String::from(
        "Table 1 across scenarios (as in AN11053): the same test with each send path\n",
    );
    s.push_str(&t.render(2));
    s.push_str(
        "  Throughput and time: measured by the receiver (what arrived); packets and data: sent.\n",
    );
    if lm.is_none() {
        s.push_str(
            "  % of max possible: no line rate known (loopback and veth have none); give --link SPEED.\n",
        );
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
