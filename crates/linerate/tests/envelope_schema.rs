//! The common envelope's own schema (every command's document embeds it).

mod common;

use linerate_core::result::{Envelope, Flag, Severity};

#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
struct Nothing {}

#[test]
fn envelope_schema_is_published_and_flags_validate() {
    common::published::<Envelope<Nothing>>("linerate.envelope");
    let doc = Envelope::new("linerate.x", 1, Nothing {})
        .started(0)
        .flagged([Flag::new("cpu_bound", Severity::Invalid, "busy").with("busy_pct", 99.0)]);
    common::validate("linerate.envelope", &serde_json::to_value(&doc).unwrap());
    let bad = serde_json::json!({"schema": "x", "version": 1, "flags": [{"code": "a"}]});
    let r = std::panic::catch_unwind(|| common::validate("linerate.envelope", &bad));
    assert!(r.is_err(), "a flag without severity must not validate");
}
