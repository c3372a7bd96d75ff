//! Where the history lives, and the environment a result was measured in.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::Value;

/// `$XDG_DATA_HOME/linerate/history.sqlite`, else
/// `$HOME/.local/share/linerate/history.sqlite` (the XDG base directory
/// default); None when neither variable is set.
pub fn default_path() -> Option<PathBuf> {
    let var = |n: &str| {
        std::env::var_os(n)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let data = var("XDG_DATA_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|h| h.join(".local/share")))?;
    Some(data.join("linerate").join("history.sqlite"))
}

/// The testbed a result was measured on.
#[derive(Debug, Clone, PartialEq)]
pub struct BedFacts {
    /// Its name.
    pub name: String,
    /// Its settings as `linerate testbed list` shows them (`link 100 Mbit/s`).
    pub settings: Vec<String>,
}

/// The host's load during a test: steal and CPU pressure between two
/// [`LoadSample`]s.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Load {
    /// Share of CPU time a hypervisor stole, percent (`/proc/stat`).
    pub steal_pct: Option<f64>,
    /// Share of wall time in which some task waited for a CPU, percent
    /// (`/proc/pressure/cpu`, "some" total; None without PSI).
    pub cpu_pressure_pct: Option<f64>,
}

/// The counters [`Load`] is the difference of, read at one moment.
#[derive(Debug, Clone, Copy)]
pub struct LoadSample {
    at: Instant,
    jiffies: Option<(u64, u64)>,
    pressure_us: Option<u64>,
}

impl LoadSample {
    /// Reads `/proc/stat` and `/proc/pressure/cpu` now (CLOCK_MONOTONIC for
    /// the wall time between samples).
    pub fn now() -> Self {
        let pressure = std::fs::read_to_string("/proc/pressure/cpu").ok();
        Self {
            at: Instant::now(),
            jiffies: linerate_io::throughput::host::cpu_jiffies(),
            pressure_us: pressure.as_deref().and_then(psi_some_total_us),
        }
    }

    /// The load from this sample until now.
    pub fn until_now(&self) -> Load {
        let end = Self::now();
        let wall_us = end.at.duration_since(self.at).as_secs_f64() * 1e6;
        let pressure = match (self.pressure_us, end.pressure_us) {
            (Some(a), Some(b)) if wall_us > 0.0 && b >= a => {
                Some(((b - a) as f64 / wall_us * 100.0).min(100.0))
            }
            _ => None,
        };
        let steal = match (self.jiffies, end.jiffies) {
            (Some(a), Some(b)) => linerate_io::throughput::host::steal_share(a, b),
            _ => None,
        };
        Load {
            steal_pct: steal.map(|s| s * 100.0),
            cpu_pressure_pct: pressure,
        }
    }
}

/// The `some … total=N` of `/proc/pressure/cpu`, microseconds.
fn psi_some_total_us(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    let total = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?;
    total.parse().ok()
}

/// The indexed columns of one stored document.
#[derive(Debug, Default)]
pub(crate) struct Columns {
    pub(crate) command: String,
    pub(crate) schema: String,
    pub(crate) version: i64,
    pub(crate) started_at: Option<String>,
    pub(crate) linerate_version: Option<String>,
    pub(crate) kernel: Option<String>,
    pub(crate) cpu_model: Option<String>,
    pub(crate) cpus: Option<i64>,
    pub(crate) steal_pct: Option<f64>,
    pub(crate) cpu_pressure_pct: Option<f64>,
    pub(crate) exit_code: i64,
}

impl Columns {
    /// From the envelope (`schema`, `version`, `host` …); steal from the
    /// result when it measured it (throughput: its own, or the worst of its
    /// scenarios'), else from `load`.
    pub(crate) fn of(doc: &Value, load: Option<&Load>) -> Self {
        let s = |p: &str| doc.pointer(p).and_then(Value::as_str).map(str::to_string);
        let schema = s("/schema").unwrap_or_default();
        let own_steal = doc.get("steal_pct").and_then(Value::as_f64).or_else(|| {
            let runs = doc.get("runs")?.as_array()?;
            let each = runs.iter().filter_map(|r| r.get("steal_pct")?.as_f64());
            each.reduce(f64::max)
        });
        let invalid = doc.get("flags").and_then(Value::as_array).is_some_and(|f| {
            f.iter()
                .any(|f| f.get("severity") == Some(&"invalid".into()))
        });
        Self {
            command: command_of(&schema),
            version: doc.get("version").and_then(Value::as_i64).unwrap_or(0),
            started_at: s("/started_at"),
            linerate_version: s("/linerate_version"),
            kernel: s("/host/kernel"),
            cpu_model: s("/host/cpu_model"),
            cpus: doc.pointer("/host/cpus").and_then(Value::as_i64),
            steal_pct: own_steal.or(load.and_then(|l| l.steal_pct)),
            cpu_pressure_pct: load.and_then(|l| l.cpu_pressure_pct),
            exit_code: i64::from(invalid),
            schema,
        }
    }
}

/// The command that writes `schema`: `linerate.throughput.scenarios` →
/// `throughput`.
pub(crate) fn command_of(schema: &str) -> String {
    let rest = schema.strip_prefix("linerate.").unwrap_or(schema);
    rest.split('.').next().unwrap_or(rest).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_come_from_the_envelope() {
        let doc = serde_json::json!({
            "schema": "linerate.throughput.scenarios", "version": 2,
            "linerate_version": "0.1.0", "started_at": "2026-11-23T10:00:00.000000Z",
            "host": {"kernel": "6.1.0", "cpu_model": "EPYC", "cpus": 2},
            "flags": [{"code": "x", "severity": "invalid", "message": "m"}],
            "runs": [{"steal_pct": 0.5}, {"steal_pct": 2.0}, {}]
        });
        let load = Load {
            steal_pct: Some(9.0),
            cpu_pressure_pct: Some(3.0),
        };
        let c = Columns::of(&doc, Some(&load));
        assert_eq!(c.command, "throughput");
        assert_eq!((c.version, c.cpus, c.exit_code), (2, Some(2), 1));
        assert_eq!(c.kernel.as_deref(), Some("6.1.0"));
        assert_eq!(c.steal_pct, Some(2.0), "the result's own steal wins");
        assert_eq!(c.cpu_pressure_pct, Some(3.0));
        let bare = Columns::of(
            &serde_json::json!({"schema": "linerate.latency"}),
            Some(&load),
        );
        assert_eq!((bare.steal_pct, bare.exit_code), (Some(9.0), 0));
        assert_eq!(bare.command, "latency");
    }

    #[test]
    fn psi_total() {
        let text = "some avg10=0.12 avg60=0.05 avg300=0.01 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(psi_some_total_us(text), Some(123_456));
        assert_eq!(psi_some_total_us("full total=1"), None);
        let l = LoadSample::now().until_now();
        assert!(
            l.cpu_pressure_pct
                .is_none_or(|p| (0.0..=100.0).contains(&p)),
            "{l:?}"
        );
    }
}
