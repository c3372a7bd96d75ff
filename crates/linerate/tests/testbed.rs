//! `linerate testbed`: dry runs (no privileges), bad input (exit 2), and the
//! whole life of a bed through the binary, including SIGTERM during
//! bring-up (privileged; skips loudly without root).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use linerate_core::result::Envelope;
use linerate_core::testbed::{
    BedStatus, TestbedDown, TestbedList, TestbedPlan, TestbedSweep, TestbedUp, DOWN_SCHEMA,
    LIST_SCHEMA, PLAN_SCHEMA, SWEEP_SCHEMA, UP_SCHEMA,
};

fn linerate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("the linerate binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `c<pid>-<tag>`: unique to this test process.
fn name(tag: &str) -> String {
    format!("c{}-{tag}", std::process::id())
}

fn netns_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

fn assert_exit_2(args: &[&str], what: &str) {
    let o = linerate(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("error") && err.contains(what),
        "{args:?}: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// Root, `ip`, or skip loudly (fail under LINERATE_REQUIRE_PRIV=1).
fn privileged(test: &str) -> bool {
    linerate_bed::privileges::require(test)
}

#[test]
fn dry_run_prints_the_commands_and_creates_nothing() {
    let n = name("dry");
    let o = linerate(&[
        "testbed",
        "up",
        &n,
        "--topo",
        "bridge",
        "--link",
        "100M",
        "--loss",
        "2",
        "--mtu",
        "9000",
        "--offload",
        "tx-checksum=off",
        "--rps",
        "--shaper",
        "tbf",
        "--dry-run",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Long commands are broken with " \" continuations within 100 columns
    // (not inside quotes); joined again they are the commands.
    let out = text(&o.stdout).replace(" \\\n    ", " ");
    for want in [
        &format!("ip netns add lr-{n}-dut"),
        &format!("ip -n lr-{n}-dut link add lr-br type bridge stp_state 0"),
        &format!("tc -n lr-{n}-a qdisc add dev lr-a root tbf rate 100000000bit burst 64000 latency 20ms overhead 24 mpu 84"),
        "numgen random mod 1000000 < 20000 counter drop",
        "ethtool -K lr-dut-b gro off gso off tso off tx off tx-udp-segmentation off",
        "rps_cpus",
        "#   verify:",
        &format!("ip netns del lr-{n}-a"),
    ] {
        assert!(out.contains(want), "missing {want}:\n{out}");
    }
    for role in ["a", "b", "dut"] {
        assert!(!netns_exists(&format!("lr-{n}-{role}")));
    }
    assert!(!Path::new("/run/linerate/beds")
        .join(format!("{n}.json"))
        .exists());
    let o = linerate(&["testbed", "up", &n, "--topo", "pair", "--dry-run", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "linerate.testbed.plan");
    assert_eq!(v["dry_run"], true);
    assert!(v["commands"].as_array().unwrap().len() > 5);
}

#[test]
fn bad_input_is_exit_2() {
    assert_exit_2(
        &["testbed", "up", "Bad!", "--topo", "pair", "--dry-run"],
        "character",
    );
    assert_exit_2(
        &[
            "testbed",
            "up",
            "abcdefghijklmnopqrstuvwxyz",
            "--topo",
            "pair",
            "--dry-run",
        ],
        "too long",
    );
    assert_exit_2(
        &["testbed", "up", "x1", "--topo", "star", "--dry-run"],
        "unknown topology",
    );
    assert_exit_2(
        &[
            "testbed",
            "up",
            "x1",
            "--topo",
            "pair",
            "--emu-poll",
            "--dry-run",
        ],
        "--emu-poll sets how the link emulator waits",
    );
    assert_exit_2(
        &[
            "testbed",
            "up",
            "x1",
            "--topo",
            "pair",
            "--mtu",
            "10",
            "--dry-run",
        ],
        "--mtu",
    );
    assert_exit_2(
        &[
            "testbed",
            "up",
            "x1",
            "--topo",
            "pair",
            "--loss",
            "300",
            "--dry-run",
        ],
        "--loss",
    );
    assert_exit_2(
        &[
            "testbed",
            "up",
            "x1",
            "--topo",
            "pair",
            "--offload",
            "warp=on",
            "--dry-run",
        ],
        "unknown offload",
    );
    assert_exit_2(
        &[
            "testbed",
            "up",
            "x1",
            "--topo",
            "pair",
            "--link",
            "1G",
            "--offload",
            "tso=on",
            "--dry-run",
        ],
        "conflicts with --link",
    );
    assert_exit_2(&["testbed", "down", &name("nosuch")], "no bed called");
    assert_exit_2(
        &["testbed", "exec", &name("nosuch"), "a", "--", "true"],
        "no bed called",
    );
    assert_exit_2(&["testbed", "sweep", "--prefix", "Bad!"], "--prefix");
}

#[test]
fn a_bed_through_the_binary() {
    if !privileged("a_bed_through_the_binary") {
        return;
    }
    let n = name("life");
    let o = linerate(&[
        "testbed", "up", &n, "--topo", "router", "--link", "10M", "--mtu", "1500",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains(&format!("lr-{n}-dut")) && out.contains("198.19.0.1"),
        "{out}"
    );
    // exists already
    assert_exit_2(&["testbed", "up", &n, "--topo", "pair"], "already exists");
    // list
    let o = linerate(&["testbed", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mine = v["beds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == n.as_str())
        .expect("listed");
    assert_eq!(mine["status"], "up");
    assert_eq!(mine["bed"]["spec"]["link_bits_per_s"], 10_000_000);
    assert_eq!(mine["bed"]["schema"], "linerate.bed");
    // exec: the command runs in the host's namespace and its exit code is ours
    let o = linerate(&[
        "testbed", "exec", &n, "b", "--", "ip", "-o", "addr", "show", "dev", "lr-b",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("198.19.0.1/24"));
    let o = linerate(&["testbed", "exec", &n, "a", "--", "sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7));
    assert_exit_2(&["testbed", "exec", &n, "c", "--", "true"], "no host 'c'");
    // down
    let o = linerate(&["testbed", "down", &n]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for role in ["a", "b", "dut"] {
        assert!(!netns_exists(&format!("lr-{n}-{role}")));
    }
    assert_exit_2(&["testbed", "down", &n], "no bed called");
}

#[test]
fn sigterm_during_bring_up_removes_what_was_built() {
    if !privileged("sigterm_during_bring_up_removes_what_was_built") {
        return;
    }
    let n = name("sig");
    let child = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "testbed", "up", &n, "--topo", "router", "--link", "100M", "--loss", "1", "--rps",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until bring-up has begun (the first namespace exists), then signal.
    let start = Instant::now();
    while !netns_exists(&format!("lr-{n}-a")) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "bring-up never began"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + 15), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("removed bed"),
        "{}",
        text(&o.stderr)
    );
    for role in ["a", "b", "dut"] {
        assert!(
            !netns_exists(&format!("lr-{n}-{role}")),
            "lr-{n}-{role} left"
        );
    }
    assert!(!Path::new("/run/linerate/beds")
        .join(format!("{n}.json"))
        .exists());
}

#[test]
fn sweep_prefix_removes_a_killed_processs_leftovers() {
    if !privileged("sweep_prefix_removes_a_killed_processs_leftovers") {
        return;
    }
    // "w": no other test's tag starts with it, so this test's sweep cannot
    // take another test's objects (and the veth names stay within 15 bytes).
    let n = name("w");
    // what a SIGKILLed process leaves: a namespace and root links
    Command::new("ip")
        .args(["netns", "add", &format!("lr-{n}-a")])
        .status()
        .unwrap();
    Command::new("ip")
        .args([
            "link",
            "add",
            &format!("lr-{n}"),
            "type",
            "veth",
            "peer",
            "name",
            &format!("lr-{n}p"),
        ])
        .status()
        .unwrap();
    let o = linerate(&["testbed", "sweep", "--prefix", &n]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains(&format!("removed namespace lr-{n}-a")),
        "{out}"
    );
    assert!(out.contains(&format!("removed link lr-{n}")), "{out}");
    assert!(!netns_exists(&format!("lr-{n}-a")));
    assert!(!Path::new("/sys/class/net").join(format!("lr-{n}")).exists());
}

#[test]
fn inspect_lists_and_describes_loopback() {
    let o = linerate(&["inspect"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("lo "), "{}", text(&o.stdout));
    let o = linerate(&["inspect", "lo", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "linerate.inspect");
    assert_eq!(v["name"], "lo");
    assert_eq!(v["pcie"], serde_json::Value::Null);
    assert_eq!(v["ceilings"].as_array().unwrap().len(), 0);
    assert_exit_2(&["inspect", "lr-no-such-if"], "no interface");
    assert_exit_2(
        &["inspect", "lo", "--netns", "lr-no-such-ns"],
        "no network namespace",
    );
    assert_exit_2(&["inspect", "a/b"], "not an interface name");
}

#[test]
fn inspect_a_bed_veth_says_what_it_lacks() {
    if !privileged("inspect_a_bed_veth_says_what_it_lacks") {
        return;
    }
    let n = name("insp");
    let mut spec = linerate_bed::BedSpec::new(n.clone(), linerate_bed::Topology::Pair);
    spec.link = Some("100M".parse().unwrap());
    let bed = linerate_bed::Bed::up(&spec).unwrap();
    let o = linerate(&["inspect", "--bed", &n, "--host", "b", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["name"], "lr-b");
    assert_eq!(v["qdisc"], "tbf");
    assert_eq!(v["timestamping"]["phc_index"], serde_json::Value::Null);
    assert_exit_2(&["inspect", "--bed", &n, "--host", "dut"], "no host 'dut'");
    let o = linerate(&["inspect", "lr-a", "--netns", bed.netns("a").unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for want in [
        "veth",
        "no hardware timestamps, no PHC",
        "no PCIe link",
        "nominal",
        "root qdisc tbf: egress is shaped",
        "tso gso uso gro",
    ] {
        assert!(out.contains(want), "missing {want}:\n{out}");
    }
}

type Plan = TestbedPlan<linerate_bed::BedSpec>;
type List = TestbedList<linerate_bed::state::BedRecord>;

/// `doc` validates against `schema` and reads back into `T`, which writes
/// the same JSON again.
use common::{json_of, round_trip};

#[test]
fn testbed_schemas_are_published() {
    common::published::<Envelope<Plan>>(PLAN_SCHEMA);
    common::published::<Envelope<TestbedDown>>(DOWN_SCHEMA);
    common::published::<Envelope<List>>(LIST_SCHEMA);
    common::published::<Envelope<TestbedSweep>>(SWEEP_SCHEMA);
    common::published::<linerate_bed::state::BedRecord>(linerate_bed::state::SCHEMA);
    common::published::<Envelope<TestbedUp<linerate_bed::state::BedRecord>>>(UP_SCHEMA);
}

#[test]
fn dry_run_json_validates_and_round_trips() {
    let n = name("dryj");
    let v = json_of(&[
        "testbed",
        "up",
        &n,
        "--topo",
        "router",
        "--link",
        "100M",
        "--mtu",
        "9000",
        "--dry-run",
        "--json",
    ]);
    let e: Envelope<Plan> = round_trip(PLAN_SCHEMA, &v);
    assert_eq!(e.version, 2);
    assert!(e.result.dry_run && e.result.spec.mtu == Some(9000));
    assert!(!netns_exists(&format!("lr-{n}-a")));
}

#[test]
fn testbed_v1_documents_read_back() {
    let v = common::fixture("linerate.testbed.dry-run.json");
    common::validate(PLAN_SCHEMA, &v);
    let e: Envelope<Plan> = serde_json::from_value(v).unwrap();
    assert_eq!(e.result.spec.name, "lrfx");
    assert_eq!(e.result.down_commands.len(), 2);
    let v = common::fixture("linerate.testbed.down.json");
    common::validate(DOWN_SCHEMA, &v);
    let e: Envelope<TestbedDown> = serde_json::from_value(v).unwrap();
    assert_eq!(e.result.removed, "lrfx");
    let v = common::fixture("linerate.testbed.list.json");
    common::validate(LIST_SCHEMA, &v);
    let e: Envelope<List> = serde_json::from_value(v).unwrap();
    assert_eq!(e.result.beds[0].status, BedStatus::Up);
    assert_eq!(e.result.beds[0].bed.layout.hosts.len(), 2);
    let v = common::fixture("linerate.testbed.sweep.json");
    common::validate(SWEEP_SCHEMA, &v);
    let _: Envelope<TestbedSweep> = serde_json::from_value(v).unwrap();
    let v = common::fixture("linerate.bed.json");
    common::validate(linerate_bed::state::SCHEMA, &v);
    let r: linerate_bed::state::BedRecord = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&r).unwrap(), v);
    // v1 list statuses that asked for a sweep
    let s: BedStatus = serde_json::from_str("\"incomplete (sweep it)\"").unwrap();
    assert_eq!(s, BedStatus::Incomplete);
}

#[test]
fn list_down_and_sweep_json_validate_and_round_trip() {
    if !privileged("list_down_and_sweep_json_validate_and_round_trip") {
        return;
    }
    let n = name("json");
    let v = json_of(&[
        "testbed", "up", &n, "--topo", "pair", "--link", "1G", "--mtu", "9000", "--json",
    ]);
    let e: Envelope<TestbedUp<linerate_bed::state::BedRecord>> = round_trip(UP_SCHEMA, &v);
    assert_eq!(e.result.bed.name, n);
    common::validate(
        linerate_bed::state::SCHEMA,
        &serde_json::to_value(&e.result.bed).unwrap(),
    );
    let o = linerate(&["testbed", "list"]);
    let out = text(&o.stdout);
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
    let v = json_of(&["testbed", "list", "--json"]);
    let e: Envelope<List> = round_trip(LIST_SCHEMA, &v);
    let mine = e.result.beds.iter().find(|b| b.name == n).expect("listed");
    assert_eq!(mine.status, BedStatus::Up);
    let v = json_of(&["testbed", "down", &n, "--json"]);
    let e: Envelope<TestbedDown> = round_trip(DOWN_SCHEMA, &v);
    assert_eq!(e.result.removed, n);
    assert_eq!(
        e.result.namespaces,
        [
            format!("lr-{n}-a"),
            format!("lr-{n}-b"),
            format!("lr-{n}-link")
        ]
    );
    assert!(!netns_exists(&format!("lr-{n}-a")));
    let v = json_of(&["testbed", "sweep", "--prefix", &n, "--json"]);
    let e: Envelope<TestbedSweep> = round_trip(SWEEP_SCHEMA, &v);
    assert!(e.result.errors.is_empty() && e.result.netns.is_empty());
}
