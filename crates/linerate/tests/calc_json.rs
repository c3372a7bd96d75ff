//! `linerate calc --json`: the published schema, the real output validated
//! and read back, and the version-1 documents read into today's type.
#![allow(clippy::unwrap_used)]

mod common;

use linerate_core::calc::{Bottleneck, CalcResult, SCHEMA};
use linerate_core::result::Envelope;

#[test]
fn calc_schema_is_published() {
    common::published::<Envelope<CalcResult>>(SCHEMA);
}

#[test]
fn calc_output_validates_and_round_trips() {
    for args in [
        &["calc", "--link", "100M,1G", "--frame", "64,1518", "--json"][..],
        &[
            "calc", "--link", "100G", "--frame", "64,1518", "--bus", "pcie3x16", "--mps", "256",
            "--frames", "50", "--json",
        ],
        &["calc", "--payload", "18,1472", "--encap", "udp4", "--json"],
    ] {
        let v = common::json_of(args);
        let e = common::round_trip::<CalcResult>(SCHEMA, &v);
        assert_eq!(e.version, 1);
        assert!(e.flags.is_empty(), "{args:?}");
    }
}

#[test]
fn calc_v1_documents_read_back() {
    let v = common::fixture("linerate.calc.json");
    common::validate(SCHEMA, &v);
    let e: Envelope<CalcResult> = serde_json::from_value(v).unwrap();
    assert_eq!(e.result.rows.len(), 4);
    assert!((e.result.rows[0].frames_per_s - 148_809.52).abs() < 0.01);
    let v = common::fixture("linerate.calc.bus.json");
    common::validate(SCHEMA, &v);
    let e: Envelope<CalcResult> = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(e.result.rows[0].bottleneck, Some(Bottleneck::Link));
    assert_eq!(e.result.bus.as_ref().unwrap().lanes, 16);
    // The v1 body is today's body: it re-serialises to the same fields.
    let back = serde_json::to_value(&e.result).unwrap();
    for k in ["wire_overhead_bytes", "bus", "rows"] {
        assert_eq!(back[k], v[k], "{k}");
    }
}
