//! `linerate calc`: the line-rate model as a table, JSON or CSV. Every figure
//! comes from [`CalcResult`] (computed in `linerate_core::calc`); this module
//! only formats.

use std::fmt::Write as _;

use linerate_core::calc::CalcResult;
use linerate_core::units::{format_bits_per_s, group_thousands};

use crate::column::{csv_number, Scale};
use crate::table::{Align, Doc, Table, Width};

pub use linerate_core::calc::{SCHEMA, VERSION as SCHEMA_VERSION};

/// The CSV header: the JSON field names of a row.
pub const CSV_HEADER: &str = "link_bits_per_s,encap,frame_bytes,wire_bytes,payload_bytes,\
    padding_bytes,l3_bytes,frames_per_s,frame_time_ns,payload_bytes_per_s,l1_bits_per_s,\
    l2_bits_per_s,l3_bits_per_s,payload_bits_per_s,efficiency_pct,frames,frames_time_ns,\
    bus_frames_per_s,bottleneck";

/// Columns left out first when the table does not fit (in this order).
const OPTIONAL: [&str; 6] = [
    "L1 bit/s",
    "wire B",
    "L2 bit/s",
    "L3 bit/s",
    "time/frame",
    "payload bit/s",
];

/// CSV with a header line; column names are the JSON field names, numbers
/// without binary noise ([`csv_number`]).
pub fn csv(r: &CalcResult) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    let num = |v: Option<f64>| v.map(csv_number).unwrap_or_default();
    let int = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    for r in &r.rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.link_bits_per_s,
            r.encap,
            r.frame_bytes,
            r.wire_bytes,
            r.payload_bytes,
            r.padding_bytes,
            int(r.l3_bytes.map(u64::from)),
            csv_number(r.frames_per_s),
            csv_number(r.frame_time_ns),
            csv_number(r.payload_bytes_per_s),
            csv_number(r.l1_bits_per_s),
            csv_number(r.l2_bits_per_s),
            num(r.l3_bits_per_s),
            csv_number(r.payload_bits_per_s),
            csv_number(r.efficiency_pct),
            int(r.frames),
            num(r.frames_time_ns),
            num(r.bus_frames_per_s),
            r.bottleneck.map_or("", |b| b.name()),
        );
    }
    out
}

/// The human table: one block per link speed, fitted to `width`.
pub fn table(res: &CalcResult, width: Width) -> String {
    doc(res).text(width)
}

/// The human table as a [`Doc`] (text or HTML): one block per link speed.
pub fn doc(res: &CalcResult) -> Doc {
    let mut out = Doc::new();
    let mut links: Vec<u64> = Vec::new();
    for r in &res.rows {
        if !links.contains(&r.link_bits_per_s) {
            links.push(r.link_bits_per_s);
        }
    }
    let has_l3 = res.rows.iter().any(|r| r.l3_bits_per_s.is_some());
    let has_bus = res.rows.iter().any(|r| r.bus_frames_per_s.is_some());
    let count = res.count();
    let mut padded_note = false;
    for (i, &link) in links.iter().enumerate() {
        if i > 0 {
            out.blank();
        }
        let rows: Vec<_> = res
            .rows
            .iter()
            .filter(|r| r.link_bits_per_s == link)
            .collect();
        let mut encaps: Vec<&str> = Vec::new();
        for r in &rows {
            if !encaps.contains(&r.encap.as_str()) {
                encaps.push(&r.encap);
            }
        }
        out.para(
            "",
            "  ",
            format!(
                "Line rate at {} ({}): wire = frame + {} B (preamble 7, SFD 1, IFG 12)",
                linerate_core::units::BitRate::from_bps(link),
                encaps.join(", "),
                res.wire_overhead_bytes
            ),
        );
        let frames_title = count.map(|n| format!("{} frames", group_thousands(n)));
        let mut cols = vec![
            ("frame B", Align::Right),
            ("wire B", Align::Right),
            ("payload B", Align::Right),
            ("frames/s", Align::Right),
            ("time/frame", Align::Right),
        ];
        if let Some(t) = &frames_title {
            cols.push((t.as_str(), Align::Right));
        }
        cols.extend([
            ("payload/s", Align::Right),
            ("L1 bit/s", Align::Right),
            ("L2 bit/s", Align::Right),
        ]);
        if has_l3 {
            cols.push(("L3 bit/s", Align::Right));
        }
        cols.extend([
            ("payload bit/s", Align::Right),
            ("efficiency", Align::Right),
        ]);
        if has_bus {
            cols.extend([("bus frames/s", Align::Right), ("limit", Align::Left)]);
        }
        let mut t = Table::new(cols).optional(&OPTIONAL);
        let secs = |ns: f64| ns * 1e-9;
        let time = Scale::time(rows.iter().map(|r| secs(r.frame_time_ns)));
        let n_time = Scale::time(rows.iter().filter_map(|r| r.frames_time_ns).map(secs));
        let payload = Scale::si(rows.iter().map(|r| r.payload_bytes_per_s));
        let l1 = Scale::si(rows.iter().map(|r| r.l1_bits_per_s));
        let l2 = Scale::si(rows.iter().map(|r| r.l2_bits_per_s));
        let l3 = Scale::si(rows.iter().filter_map(|r| r.l3_bits_per_s));
        let pbits = Scale::si(rows.iter().map(|r| r.payload_bits_per_s));
        for r in &rows {
            let mut frame = r.frame_bytes.to_string();
            if r.padding_bytes > 0 {
                frame.push('*');
                padded_note = true;
            }
            let mut cells = vec![
                frame,
                r.wire_bytes.to_string(),
                r.payload_bytes.to_string(),
                group_thousands(r.frames_per_s.floor() as u64),
                time.secs(secs(r.frame_time_ns)),
            ];
            if count.is_some() {
                cells.push(
                    r.frames_time_ns
                        .map_or("-".into(), |n| n_time.secs(secs(n))),
                );
            }
            cells.extend([
                payload.bytes_per_s(r.payload_bytes_per_s),
                l1.bits_per_s(r.l1_bits_per_s),
                l2.bits_per_s(r.l2_bits_per_s),
            ]);
            if has_l3 {
                cells.push(r.l3_bits_per_s.map_or("-".into(), |v| l3.bits_per_s(v)));
            }
            cells.extend([
                pbits.bits_per_s(r.payload_bits_per_s),
                format!("{:.2} %", r.efficiency_pct),
            ]);
            if has_bus {
                cells.push(
                    r.bus_frames_per_s
                        .map_or("-".into(), |b| group_thousands(b.floor() as u64)),
                );
                cells.push(r.bottleneck.map_or("-", |b| b.name()).to_string());
            }
            t.row(cells);
        }
        out.table(t, 2);
    }
    if padded_note {
        out.blank();
        out.para(
            "* ",
            "  ",
            "padded by the MAC to the 64-byte minimum frame; the pad carries no payload",
        );
    }
    if let Some(b) = &res.bus {
        out.blank();
        out.para(
            "Bus: ",
            "  ",
            format!(
                "{} at {} GT/s per lane, MPS {} B:",
                b.bus,
                b.transfers_per_s / 1e9,
                b.mps_bytes,
            ),
        );
        out.para(
            "  ",
            "  ",
            format!(
                "{} raw, {} after encoding, {} DMA payload ceiling",
                format_bits_per_s(b.raw_bits_per_s),
                format_bits_per_s(b.encoded_bits_per_s),
                format_bits_per_s(b.payload_bits_per_s),
            ),
        );
        out.para(
            "  ",
            "  ",
            format!(
                "(one direction; {} B of TLP header and framing per TLP; frames DMA'd without FCS; \
                 DLLPs and descriptor traffic not modelled: expect 5-15 % less)",
                b.tlp_overhead_bytes
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_core::calc::{Carried, Config, Request, SizeList};
    use linerate_core::units::BitRate;

    fn calc(links: Vec<BitRate>, sizes: Vec<u32>) -> CalcResult {
        Config::new(&Request {
            frames: Some(50),
            ..Request::new(links, Carried::Frames(SizeList::Sizes(sizes)))
        })
        .unwrap()
        .run()
    }

    fn seed() -> CalcResult {
        calc(vec![BitRate::from_mbps(100)], vec![64, 1518])
    }

    #[test]
    fn table_shows_seed_000_figures() {
        let t = table(&seed(), Width::Unlimited);
        assert!(t.contains("148,809"), "{t}");
        assert!(t.contains("6.845 MB/s"), "{t}");
        assert!(t.contains("8,127"), "{t}");
        assert!(t.contains("12.19 MB/s"), "{t}");
        assert!(t.contains("6.152 ms"), "{t}");
    }

    #[test]
    fn table_fits_100_columns_and_one_unit_per_column() {
        let r = calc(vec![BitRate::from_gbps(10)], vec![64, 1518]);
        let t = table(&r, Width::default());
        for line in t.lines() {
            assert!(line.chars().count() <= 100, "{} wide: {line}", line.len());
        }
        assert!(t.contains("148,809") || t.contains("14,880,952"), "{t}");
        // 684.5 MB/s and 1.219 GB/s: one column, one unit.
        assert!(t.contains("0.6845 GB/s") && t.contains("1.219 GB/s"), "{t}");
        let wide = table(&r, Width::Unlimited);
        assert!(wide.contains("L1 bit/s"), "{wide}");
        assert!(wide.lines().any(|l| l.chars().count() > 100), "{wide}");
    }

    #[test]
    fn csv_has_one_line_per_row_without_noise() {
        let csv = csv(&seed());
        assert_eq!(csv.lines().count(), 3);
        let row = csv.lines().nth(1).unwrap();
        assert!(
            row.starts_with("100000000,eth,64,84,46,0,,148809.524,6720,"),
            "{row}"
        );
        let g = calc(vec![BitRate::from_gbps(1)], vec![1518]);
        let row = super::csv(&g);
        assert!(
            !row.contains("9999999") && !row.contains("0000001"),
            "{row}"
        );
    }
}
