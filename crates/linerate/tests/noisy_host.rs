//! Load from elsewhere during a test is detected and flagged `noisy_host`
//! (a test binary of its own: its busy loops must not slow other tests).

mod common;

use std::process::Command;

use linerate_core::latency::{codes, LatencyReport, SCHEMA};
use linerate_core::result::Severity;

/// Busy-loop child processes, bounded in time (`timeout 20`), ended on
/// drop: SIGTERM to `timeout`, which passes it on to its loop.
struct Spinners(Vec<std::process::Child>);

impl Spinners {
    fn start(n: usize) -> Self {
        Self(
            (0..n)
                .map(|_| {
                    Command::new("timeout")
                        .args(["20", "sh", "-c", "while :; do :; done"])
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .spawn()
                        .expect("timeout and sh run")
                })
                .collect(),
        )
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let _ = c.wait();
        }
    }
}

#[test]
fn load_from_elsewhere_is_flagged() {
    // Three processes spinning on a host's CPUs beside a short test: other
    // tasks were runnable throughout.
    let spin = Spinners::start(3);
    let v = common::json_of(&[
        "latency",
        "127.0.0.1",
        "--in-process",
        "--time",
        "1",
        "--interval",
        "1ms",
        "--json",
    ]);
    drop(spin);
    let doc = common::round_trip::<LatencyReport>(SCHEMA, &v);
    let load = doc.result.host_load.as_ref().expect("/proc is readable");
    assert!(load.other_runnable_mean.unwrap() >= 1.0, "{load:?}");
    let f = doc
        .flags
        .iter()
        .find(|f| f.code == codes::NOISY_HOST)
        .unwrap_or_else(|| panic!("no noisy_host in {:?}", doc.flags));
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.evidence.contains_key("other_runnable_mean"), "{f:?}");
    assert_eq!(doc.exit_code(), 0, "a warning, not invalid");
}
