//! `linerate inspect --json`: the published schemas, the real output of
//! `inspect lo` and of the list validated and read back, and the version-1
//! documents read into today's types.
#![allow(clippy::unwrap_used)]

mod common;

use linerate_core::inspect::{
    InterfaceList, InterfaceReport, LIST_SCHEMA, LIST_VERSION, SCHEMA, VERSION,
};
use linerate_core::result::Envelope;

#[test]
fn inspect_schemas_are_published() {
    common::published::<Envelope<InterfaceReport>>(SCHEMA);
    common::published::<Envelope<InterfaceList>>(LIST_SCHEMA);
}

#[test]
fn inspect_lo_validates_and_round_trips() {
    let v = common::json_of(&["inspect", "lo", "--json"]);
    let e = common::round_trip::<InterfaceReport>(SCHEMA, &v);
    assert_eq!(e.version, VERSION);
    assert_eq!(e.result.name, "lo");
    let codes: Vec<&str> = e.flags.iter().map(|f| f.code.as_str()).collect();
    assert!(codes.contains(&"virtual_device"), "{codes:?}");
    assert!(e.started_at.is_some() && e.host.is_some());
}

#[test]
fn inspect_list_validates_and_round_trips() {
    let v = common::json_of(&["inspect", "--json"]);
    let e = common::round_trip::<InterfaceList>(LIST_SCHEMA, &v);
    assert_eq!(e.version, LIST_VERSION);
    assert!(e.result.interfaces.iter().any(|i| i.name == "lo"));
}

#[test]
fn inspect_v1_documents_read_back() {
    let v = common::fixture("linerate.inspect.json");
    common::validate(SCHEMA, &v);
    let e: Envelope<InterfaceReport> = serde_json::from_value(v).unwrap();
    assert_eq!(e.version, 1);
    assert_eq!(e.result.mtu_bytes, Some(65536));
    assert!(e.result.offloads["generic-receive-offload"].on);
    let v = common::fixture("linerate.inspect.list.json");
    common::validate(LIST_SCHEMA, &v);
    let e: Envelope<InterfaceList> = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(e.result.interfaces.len(), 4);
    assert_eq!(
        serde_json::to_value(&e.result).unwrap()["interfaces"],
        v["interfaces"]
    );
}
