//! `linerate calc`: the line-rate model as a table, JSON or CSV.

use std::fmt::Write as _;

use linerate_core::linerate::{BusCeiling, Row, WIRE_OVERHEAD_BYTES};
use linerate_core::units::{
    format_bits_per_s, format_bytes_per_s, group_thousands, BitRate, TimeSpan,
};
use serde::Serialize;

use crate::table::{Align, Table};

/// Schema name of the JSON document.
pub const SCHEMA: &str = "linerate.calc";
/// Schema version; bumped on any incompatible change of the fields below.
pub const SCHEMA_VERSION: u32 = 1;

/// What `linerate calc` computed: rows of the model, with the optional time
/// for N frames and the optional bus ceiling beside them.
#[derive(Debug, Clone)]
pub struct Calc {
    /// One row per link speed and frame.
    pub rows: Vec<Row>,
    /// `--frames N`: also give the wire time of N back-to-back frames.
    pub frames: Option<u64>,
    /// `--bus`: the PCIe DMA ceiling to set beside the link.
    pub bus: Option<BusCeiling>,
}

/// One row as serialised: every field name carries its unit.
#[derive(Debug, Clone, Serialize)]
pub struct RowJson {
    /// Link speed (L1 bit rate).
    pub link_bits_per_s: u64,
    /// Encapsulation name (`eth`, `vlan+udp4`, …).
    pub encap: String,
    /// Frame from destination MAC to FCS, padding included.
    pub frame_bytes: u32,
    /// Frame plus preamble, SFD and IFG.
    pub wire_bytes: u32,
    /// Payload above the innermost header.
    pub payload_bytes: u32,
    /// Pad bytes added to reach the 64-byte minimum.
    pub padding_bytes: u32,
    /// IP packet length, if there is an IP header.
    pub l3_bytes: Option<u32>,
    /// Frames per second at line rate (exact, not rounded).
    pub frames_per_s: f64,
    /// Wire time of one frame.
    pub frame_time_ns: f64,
    /// Payload bytes per second.
    pub payload_bytes_per_s: f64,
    /// Wire bit rate (equals the link speed).
    pub l1_bits_per_s: f64,
    /// Frame bit rate.
    pub l2_bits_per_s: f64,
    /// IP packet bit rate, if there is an IP header.
    pub l3_bits_per_s: Option<f64>,
    /// Payload bit rate.
    pub payload_bits_per_s: f64,
    /// Payload share of the wire.
    pub efficiency_pct: f64,
    /// `--frames N`: N.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames: Option<u64>,
    /// `--frames N`: wire time of N frames.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames_time_ns: Option<f64>,
    /// `--bus`: frames per second the bus can DMA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bus_frames_per_s: Option<f64>,
    /// `--bus`: which of link and bus limits the frame rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<&'static str>,
}

/// The bus ceiling as serialised.
#[derive(Debug, Clone, Serialize)]
pub struct BusJson {
    /// `PCIe 3.0 x4`.
    pub bus: String,
    /// Generation.
    pub generation: u8,
    /// Lanes.
    pub lanes: u8,
    /// Max_Payload_Size.
    pub mps_bytes: u32,
    /// Per-lane transfer rate.
    pub transfers_per_s: f64,
    /// Raw bit rate of all lanes.
    pub raw_bits_per_s: f64,
    /// After line encoding.
    pub encoded_bits_per_s: f64,
    /// TLP header and framing per TLP.
    pub tlp_overhead_bytes: u32,
    /// DMA payload ceiling, one direction.
    pub payload_bits_per_s: f64,
}

/// The whole JSON document.
#[derive(Debug, Clone, Serialize)]
pub struct CalcJson {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// [`SCHEMA_VERSION`].
    pub version: u32,
    /// Preamble + SFD + IFG per frame.
    pub wire_overhead_bytes: u32,
    /// The bus, with `--bus`.
    pub bus: Option<BusJson>,
    /// The rows.
    pub rows: Vec<RowJson>,
}

impl Calc {
    fn bus_fps(&self, row: &Row) -> Option<f64> {
        self.bus
            .map(|b| b.frame_rate(row.frame.frame_bytes).per_s())
    }

    /// The document `--json` prints.
    pub fn to_json(&self) -> CalcJson {
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let bus_fps = self.bus_fps(r);
                RowJson {
                    link_bits_per_s: r.link.bps(),
                    encap: r.frame.encap.to_string(),
                    frame_bytes: r.frame.frame_bytes,
                    wire_bytes: r.frame.wire_bytes(),
                    payload_bytes: r.frame.payload_bytes,
                    padding_bytes: r.frame.padding_bytes,
                    l3_bytes: r.l3_bits_per_s().map(|_| r.frame.l3_bytes()),
                    frames_per_s: r.frame_rate.per_s(),
                    frame_time_ns: r.frame_time.nanos(),
                    payload_bytes_per_s: r.payload_bytes_per_s(),
                    l1_bits_per_s: r.l1_bits_per_s(),
                    l2_bits_per_s: r.l2_bits_per_s(),
                    l3_bits_per_s: r.l3_bits_per_s(),
                    payload_bits_per_s: r.payload_bits_per_s(),
                    efficiency_pct: r.efficiency() * 100.0,
                    frames: self.frames,
                    frames_time_ns: self.frames.map(|n| r.time_for_frames(n).nanos()),
                    bus_frames_per_s: bus_fps,
                    bottleneck: bus_fps.map(|b| bottleneck(b, r.frame_rate.per_s())),
                }
            })
            .collect();
        CalcJson {
            schema: SCHEMA,
            version: SCHEMA_VERSION,
            wire_overhead_bytes: WIRE_OVERHEAD_BYTES,
            bus: self.bus.map(|b| BusJson {
                bus: b.link.to_string(),
                generation: b.link.generation,
                lanes: b.link.lanes,
                mps_bytes: b.mps,
                transfers_per_s: b.gt_per_s * 1e9,
                raw_bits_per_s: b.raw_bits_per_s,
                encoded_bits_per_s: b.encoded_bits_per_s,
                tlp_overhead_bytes: b.tlp_overhead_bytes,
                payload_bits_per_s: b.payload_bits_per_s,
            }),
            rows,
        }
    }

    /// CSV with a header line; column names are the JSON field names.
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "link_bits_per_s,encap,frame_bytes,wire_bytes,payload_bytes,padding_bytes,l3_bytes,\
             frames_per_s,frame_time_ns,payload_bytes_per_s,l1_bits_per_s,l2_bits_per_s,\
             l3_bits_per_s,payload_bits_per_s,efficiency_pct,frames,frames_time_ns,\
             bus_frames_per_s,bottleneck\n",
        );
        let opt = |v: Option<String>| v.unwrap_or_default();
        for r in self.to_json().rows {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                r.link_bits_per_s,
                r.encap,
                r.frame_bytes,
                r.wire_bytes,
                r.payload_bytes,
                r.padding_bytes,
                opt(r.l3_bytes.map(|v| v.to_string())),
                r.frames_per_s,
                r.frame_time_ns,
                r.payload_bytes_per_s,
                r.l1_bits_per_s,
                r.l2_bits_per_s,
                opt(r.l3_bits_per_s.map(|v| v.to_string())),
                r.payload_bits_per_s,
                r.efficiency_pct,
                opt(r.frames.map(|v| v.to_string())),
                opt(r.frames_time_ns.map(|v| v.to_string())),
                opt(r.bus_frames_per_s.map(|v| v.to_string())),
                r.bottleneck.unwrap_or(""),
            );
        }
        out
    }

    /// The human table: one block per link speed.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let mut links: Vec<BitRate> = Vec::new();
        for r in &self.rows {
            if !links.contains(&r.link) {
                links.push(r.link);
            }
        }
        let has_l3 = self.rows.iter().any(|r| r.l3_bits_per_s().is_some());
        let mut padded_note = false;
        for (i, link) in links.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let encaps: Vec<String> = {
                let mut v: Vec<String> = Vec::new();
                for r in self.rows.iter().filter(|r| r.link == *link) {
                    let e = r.frame.encap.to_string();
                    if !v.contains(&e) {
                        v.push(e);
                    }
                }
                v
            };
            let _ = writeln!(
                out,
                "Line rate at {link} ({}): wire = frame + {WIRE_OVERHEAD_BYTES} B (preamble 7, SFD 1, IFG 12)",
                encaps.join(", ")
            );
            let mut cols = vec![
                ("frame B", Align::Right),
                ("wire B", Align::Right),
                ("payload B", Align::Right),
                ("frames/s", Align::Right),
                ("time/frame", Align::Right),
            ];
            let frames_title = self
                .frames
                .map(|n| format!("{} frames", group_thousands(n)));
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
            if self.bus.is_some() {
                cols.extend([("bus frames/s", Align::Right), ("limit", Align::Left)]);
            }
            let mut t = Table::new(cols);
            for r in self.rows.iter().filter(|r| r.link == *link) {
                let mut frame = r.frame.frame_bytes.to_string();
                if r.frame.padding_bytes > 0 {
                    frame.push('*');
                    padded_note = true;
                }
                let mut cells = vec![
                    frame,
                    r.frame.wire_bytes().to_string(),
                    r.frame.payload_bytes.to_string(),
                    group_thousands(r.frame_rate.whole()),
                    r.frame_time.to_string(),
                ];
                if let Some(n) = self.frames {
                    cells.push(r.time_for_frames(n).to_string());
                }
                cells.extend([
                    format_bytes_per_s(r.payload_bytes_per_s()),
                    format_bits_per_s(r.l1_bits_per_s()),
                    format_bits_per_s(r.l2_bits_per_s()),
                ]);
                if has_l3 {
                    cells.push(r.l3_bits_per_s().map_or("-".into(), format_bits_per_s));
                }
                cells.extend([
                    format_bits_per_s(r.payload_bits_per_s()),
                    format!("{:.2} %", r.efficiency() * 100.0),
                ]);
                if let Some(b) = self.bus_fps(r) {
                    cells.push(group_thousands(b.floor() as u64));
                    cells.push(bottleneck(b, r.frame_rate.per_s()).to_string());
                }
                t.row(cells);
            }
            out.push_str(&t.render(2));
        }
        if padded_note {
            out.push_str(
                "\n* padded by the MAC to the 64-byte minimum frame; the pad carries no payload\n",
            );
        }
        if let Some(b) = &self.bus {
            let _ = writeln!(
                out,
                "\nBus: {} at {} GT/s per lane, MPS {} B: {} raw, {} after encoding, {} DMA payload ceiling",
                b.link,
                b.gt_per_s,
                b.mps,
                format_bits_per_s(b.raw_bits_per_s),
                format_bits_per_s(b.encoded_bits_per_s),
                format_bits_per_s(b.payload_bits_per_s),
            );
            let _ = writeln!(
                out,
                "  (one direction; {} B of TLP header and framing per TLP; frames DMA'd without FCS; \
                 DLLPs and descriptor traffic not modelled: expect 5-15 % less)",
                b.tlp_overhead_bytes
            );
        }
        out
    }
}

fn bottleneck(bus_fps: f64, link_fps: f64) -> &'static str {
    if bus_fps < link_fps {
        "bus"
    } else {
        "link"
    }
}

/// "N frames take T": the line for `--frames` in prose, used by `demo`.
pub fn frames_sentence(row: &Row, n: u64) -> String {
    let t: TimeSpan = row.time_for_frames(n);
    format!(
        "{} frames of {} B at {} take {} on the wire ({} B of payload)",
        group_thousands(n),
        row.frame.frame_bytes,
        row.link,
        t,
        group_thousands(n * u64::from(row.frame.payload_bytes)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_core::linerate::Encap;

    fn calc() -> Calc {
        let rows = [64, 1518]
            .into_iter()
            .map(|s| {
                let f = Encap::ETHERNET.frame_of_length(s, false).unwrap();
                Row::new(BitRate::from_mbps(100), f).unwrap()
            })
            .collect();
        Calc {
            rows,
            frames: Some(50),
            bus: None,
        }
    }

    #[test]
    fn table_shows_seed_000_figures() {
        let t = calc().to_table();
        assert!(t.contains("148,809"), "{t}");
        assert!(t.contains("6.845 MB/s"), "{t}");
        assert!(t.contains("8,127"), "{t}");
        assert!(t.contains("12.19 MB/s"), "{t}");
        assert!(t.contains("6.152 ms"), "{t}");
    }

    #[test]
    fn json_fields_carry_units() {
        let v = serde_json::to_value(calc().to_json()).unwrap();
        assert_eq!(v["schema"], "linerate.calc");
        let r = &v["rows"][0];
        assert_eq!(r["frame_bytes"], 64);
        assert_eq!(r["wire_bytes"], 84);
        assert_eq!(r["payload_bytes"], 46);
        assert!((r["frames_per_s"].as_f64().unwrap() - 148_809.52).abs() < 0.01);
        assert!(r["l3_bytes"].is_null());
    }

    #[test]
    fn csv_has_one_line_per_row() {
        let csv = calc().to_csv();
        assert_eq!(csv.lines().count(), 3);
        assert!(csv
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("100000000,eth,64,84,46,0,,"));
    }

    #[test]
    fn frames_sentence_reads_well() {
        let c = calc();
        assert_eq!(
            frames_sentence(&c.rows[1], 50),
            "50 frames of 1518 B at 100 Mbit/s take 6.152 ms on the wire (75,000 B of payload)"
        );
    }
}
