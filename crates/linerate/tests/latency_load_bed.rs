//! Latency under load end to end on a bed the test builds and always
//! removes (privileged; skips loudly without root): a pair joined by
//! linerate's link emulator at 100 Mbit/s with a 100-frame queue, UDP
//! exchanges idle and under a TCP load through it. Both phases are
//! dissected, each phase's stages add up to its RTT, and the load's
//! figures stand beside them. No timed assertion: how much the queue adds
//! is reported, not checked.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Output};

use linerate_core::latency::load::StageSum;
use linerate_core::latency::{LatencyReport, Stage, SCHEMA};

fn linerate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("the linerate binary runs")
}

/// Sweeps the bed when dropped, also when an assertion fails midway.
struct Swept(String);

impl Drop for Swept {
    fn drop(&mut self) {
        let _ = linerate(&["testbed", "sweep", "--prefix", &self.0]);
    }
}

fn adds_up(phase: &str, sum: Option<StageSum>) {
    let s = sum.unwrap_or_else(|| panic!("{phase}: no RTT sample"));
    assert!(
        s.complete,
        "{phase}: every stamped exchange has every stage: {s:?}"
    );
    assert!(s.unexplained_ns().abs() < 1.0, "{phase}: {s:?}");
}

#[test]
fn latency_under_load_on_an_emulated_link() {
    if !linerate_bed::privileges::require("latency_under_load_on_an_emulated_link") {
        return;
    }
    let name = format!("ll{}", std::process::id());
    let _swept = Swept(name.clone());
    let up = linerate(&[
        "testbed", "up", &name, "--topo", "pair", "--link", "100M", "--limit", "100",
    ]);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let out = linerate(&[
        "latency",
        "--bed",
        &name,
        "--stamp-every",
        "1",
        "--time",
        "1s",
        "--timeout",
        "1s",
        "--load",
        "tcp,1,forward",
        "--settle",
        "1s",
        "--json",
    ]);
    // Exit 1 is allowed: a busy test host may leave the emulator behind.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let doc = common::round_trip::<LatencyReport>(SCHEMA, &v);
    let r = &doc.result;
    assert_eq!(r.link_bits_per_s, Some(100_000_000));
    assert_eq!(r.runs.len(), 2);
    let load = r.load.as_ref().expect("a load section");
    let level = &load.levels[0];
    // Both phases dissected into the reflector's stages, each adding up.
    for stages in [&load.idle, &level.loaded] {
        for s in [
            Stage::ClientTx,
            Stage::ResponderRx,
            Stage::Network,
            Stage::ClientRx,
        ] {
            assert!(stages.iter().any(|x| x.stage == s), "{s:?} in {stages:?}");
        }
    }
    adds_up("idle", level.idle_sum);
    adds_up("loaded", level.loaded_sum);
    assert!(level.growth_of(Stage::Network).is_some());
    // The load's figures: the forward direction, as a share of the link.
    let t = level.throughput.as_ref().expect("the load's figures");
    let fwd = &t.directions[0];
    assert!(fwd.bits_per_s > 0.0, "{t:?}");
    assert!(fwd.pct_of_max.is_some(), "a share of the bed's link: {t:?}");
    assert!(level.sustained, "{level:?}");
    drop(_swept);
    assert!(!std::path::Path::new("/run/netns")
        .join(format!("lr-{name}-a"))
        .exists());
}
