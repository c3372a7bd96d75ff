//! Load from elsewhere during a test: CPU pressure (`/proc/pressure/cpu`),
//! runnable tasks that are not the test's own, and hypervisor steal, read
//! by `linerate-io` while the test runs ([`LoadSample`]s), summarised here
//! ([`HostLoad`]) and judged ([`assess`]: the flag `noisy_host`).

use serde::{Deserialize, Serialize};

use crate::result::Flag;

/// The flag [`assess`] raises (a warning).
pub const NOISY_HOST: &str = "noisy_host";

/// Other tasks runnable at once, on average over the test, from which the
/// host is flagged noisy: half a CPU's worth of someone else's work.
pub const NOISY_OTHER_RUNNABLE: f64 = 0.5;

/// Share of the test's time during which some task waited for a CPU
/// (`/proc/pressure/cpu` "some"), percent, from which the host is flagged
/// noisy when other tasks were runnable too.
pub const NOISY_PRESSURE_PCT: f64 = 20.0;

/// Steal from this share of the CPU time, percent, makes the host noisy.
pub const NOISY_STEAL_PCT: f64 = 5.0;

/// One line pair of `/proc/pressure/cpu`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pressure {
    /// "some" avg10: percent of the last 10 s some task waited for a CPU.
    pub some_avg10: f64,
    /// "some" total, µs since boot.
    pub some_total_us: u64,
    /// "full" total, µs since boot (older kernels have no "full" line).
    pub full_total_us: Option<u64>,
}

/// Parses `/proc/pressure/cpu`:
/// `some avg10=0.00 avg60=0.00 avg300=0.00 total=12345` (and `full …`).
pub fn parse_pressure(text: &str) -> Option<Pressure> {
    let field = |line: &str, name: &str| -> Option<String> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=').map(str::to_string))
    };
    let line = |kind: &str| text.lines().find(|l| l.starts_with(kind));
    let some = line("some ")?;
    Some(Pressure {
        some_avg10: field(some, "avg10")?.parse().ok()?,
        some_total_us: field(some, "total")?.parse().ok()?,
        full_total_us: line("full ").and_then(|l| field(l, "total")?.parse().ok()),
    })
}

/// `procs_running` of `/proc/stat`: tasks runnable on the whole host now.
pub fn parse_procs_running(stat: &str) -> Option<u32> {
    stat.lines()
        .find_map(|l| l.strip_prefix("procs_running "))
        .and_then(|v| v.trim().parse().ok())
}

/// The state letter of a `/proc/PID/task/TID/stat` line (after the
/// parenthesised command, which may itself hold spaces and parentheses).
pub fn parse_task_state(stat: &str) -> Option<char> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// One reading while a test runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadSample {
    /// When, ns of a monotonic clock.
    pub at_ns: u64,
    /// CPU pressure, if the kernel has PSI.
    pub pressure: Option<Pressure>,
    /// Tasks runnable on the host (`procs_running`).
    pub procs_running: Option<u32>,
    /// Of those, this process's own threads (state R).
    pub own_running: u32,
    /// The aggregate CPU jiffies of `/proc/stat` (all, steal).
    pub cpu: Option<(u64, u64)>,
}

/// Load from elsewhere over a test, from its first sample to its last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostLoad {
    /// From the first sample to the last, ns (CLOCK_MONOTONIC).
    pub duration_ns: u64,
    /// Samples taken.
    pub samples: u32,
    /// Share of that time some task waited for a CPU, percent
    /// (`/proc/pressure/cpu` "some" total, delta over the time; the test's
    /// own threads count too). None without PSI.
    pub cpu_pressure_some_pct: Option<f64>,
    /// Share of that time every non-idle task waited, percent ("full").
    pub cpu_pressure_full_pct: Option<f64>,
    /// The largest "some" avg10 seen, percent.
    pub cpu_pressure_some_avg10_max: Option<f64>,
    /// Runnable tasks that were not this process's threads, mean over the
    /// samples (`/proc/stat` procs_running minus this process's running
    /// threads).
    pub other_runnable_mean: Option<f64>,
    /// The most seen at one sample.
    pub other_runnable_max: Option<u32>,
    /// Share of the CPU time stolen by a hypervisor, percent (`/proc/stat`).
    pub steal_pct: Option<f64>,
}

impl HostLoad {
    /// The summary of `samples`, in the order taken; `None` with fewer than
    /// two.
    pub fn from_samples(samples: &[LoadSample]) -> Option<Self> {
        let (first, last) = (samples.first()?, samples.last()?);
        if samples.len() < 2 {
            return None;
        }
        let duration_ns = last.at_ns.saturating_sub(first.at_ns);
        let dur_us = duration_ns as f64 / 1e3;
        let share = |a: Option<u64>, b: Option<u64>| {
            let d = b?.checked_sub(a?)?;
            (dur_us > 0.0).then(|| (100.0 * d as f64 / dur_us).min(100.0))
        };
        let p = |s: &LoadSample| s.pressure;
        let others: Vec<u32> = samples
            .iter()
            .filter_map(|s| Some(s.procs_running?.saturating_sub(s.own_running)))
            .collect();
        Some(Self {
            duration_ns,
            samples: u32::try_from(samples.len()).unwrap_or(u32::MAX),
            cpu_pressure_some_pct: share(
                p(first).map(|p| p.some_total_us),
                p(last).map(|p| p.some_total_us),
            ),
            cpu_pressure_full_pct: share(
                p(first).and_then(|p| p.full_total_us),
                p(last).and_then(|p| p.full_total_us),
            ),
            cpu_pressure_some_avg10_max: samples
                .iter()
                .filter_map(|s| s.pressure.map(|p| p.some_avg10))
                .reduce(f64::max),
            other_runnable_mean: (!others.is_empty())
                .then(|| others.iter().map(|&n| f64::from(n)).sum::<f64>() / others.len() as f64),
            other_runnable_max: others.iter().copied().max(),
            steal_pct: match (first.cpu, last.cpu) {
                (Some(a), Some(b)) => {
                    let all = b.0.checked_sub(a.0).filter(|&d| d > 0);
                    all.and_then(|all| Some(100.0 * b.1.checked_sub(a.1)? as f64 / all as f64))
                }
                _ => None,
            },
        })
    }
}

/// `noisy_host` (a warning) when other work competed for the CPUs during
/// the test: other runnable tasks at least [`NOISY_OTHER_RUNNABLE`] on
/// average, CPU pressure of [`NOISY_PRESSURE_PCT`] or more while other
/// tasks were runnable, or steal of [`NOISY_STEAL_PCT`] or more. Evidence:
/// every figure read.
pub fn assess(load: &HostLoad) -> Option<Flag> {
    let others = load.other_runnable_mean.unwrap_or(0.0);
    let pressure = load.cpu_pressure_some_pct.unwrap_or(0.0);
    let steal = load.steal_pct.unwrap_or(0.0);
    let mut why = Vec::new();
    if others >= NOISY_OTHER_RUNNABLE {
        why.push(format!(
            "{others:.1} other tasks were runnable on average (at most {})",
            load.other_runnable_max.unwrap_or(0)
        ));
    }
    if pressure >= NOISY_PRESSURE_PCT && load.other_runnable_max.unwrap_or(0) > 0 {
        why.push(format!(
            "some task waited for a CPU {pressure:.0} % of the time (/proc/pressure/cpu)"
        ));
    }
    if steal >= NOISY_STEAL_PCT {
        why.push(format!("the hypervisor stole {steal:.1} % of the CPU time"));
    }
    if why.is_empty() {
        return None;
    }
    let mut f = Flag::warning(
        NOISY_HOST,
        format!(
            "noisy host: {} during the test; its figures may be slower and more spread than on a quiet host",
            why.join("; ")
        ),
    )
    .with("samples", load.samples)
    .with("duration_ns", load.duration_ns);
    let figures = [
        ("other_runnable_mean", load.other_runnable_mean),
        ("cpu_pressure_some_pct", load.cpu_pressure_some_pct),
        ("cpu_pressure_full_pct", load.cpu_pressure_full_pct),
        (
            "cpu_pressure_some_avg10_max",
            load.cpu_pressure_some_avg10_max,
        ),
        ("steal_pct", load.steal_pct),
    ];
    for (name, v) in figures {
        if let Some(v) = v {
            f = f.with(name, v);
        }
    }
    if let Some(m) = load.other_runnable_max {
        f = f.with("other_runnable_max", m);
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PSI: &str = "some avg10=12.50 avg60=3.00 avg300=1.00 total=1000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=200000\n";

    #[test]
    fn proc_files_parse() {
        let p = parse_pressure(PSI).unwrap();
        assert_eq!(p.some_avg10, 12.5);
        assert_eq!(p.some_total_us, 1_000_000);
        assert_eq!(p.full_total_us, Some(200_000));
        let old = parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=5").unwrap();
        assert_eq!(old.full_total_us, None);
        assert_eq!(parse_pressure("garbage"), None);
        let stat = "cpu  100 0 50 800 0 0 0 50 0 0\nprocs_running 7\nprocs_blocked 0\n";
        assert_eq!(parse_procs_running(stat), Some(7));
        assert_eq!(parse_task_state("42 (a (b) c) R 1 2 3"), Some('R'));
        assert_eq!(parse_task_state("42 (idle) S 1"), Some('S'));
    }

    fn sample(at_s: u64, some_us: u64, running: u32, own: u32, cpu: (u64, u64)) -> LoadSample {
        LoadSample {
            at_ns: at_s * 1_000_000_000,
            pressure: Some(Pressure {
                some_avg10: some_us as f64 / 1e5,
                some_total_us: some_us,
                full_total_us: Some(0),
            }),
            procs_running: Some(running),
            own_running: own,
            cpu: Some(cpu),
        }
    }

    #[test]
    fn a_quiet_host_is_not_flagged() {
        let s = [
            sample(0, 0, 2, 2, (0, 0)),
            sample(2, 10_000, 1, 1, (400, 0)),
        ];
        let l = HostLoad::from_samples(&s).unwrap();
        assert_eq!(l.other_runnable_mean, Some(0.0));
        assert!((l.cpu_pressure_some_pct.unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(l.steal_pct, Some(0.0));
        assert_eq!(assess(&l), None);
        assert_eq!(HostLoad::from_samples(&s[..1]), None);
    }

    #[test]
    fn other_runnable_tasks_pressure_and_steal_make_a_noisy_host() {
        // Two other tasks runnable beside the test's one thread, 2 s of
        // which 0.8 s some task waited.
        let s = [
            sample(0, 0, 3, 1, (0, 0)),
            sample(1, 400_000, 3, 1, (200, 0)),
            sample(2, 800_000, 2, 1, (400, 0)),
        ];
        let l = HostLoad::from_samples(&s).unwrap();
        assert!((l.other_runnable_mean.unwrap() - 5.0 / 3.0).abs() < 1e-9);
        assert_eq!(l.other_runnable_max, Some(2));
        let f = assess(&l).unwrap();
        assert_eq!(f.code, NOISY_HOST);
        assert_eq!(f.severity, crate::result::Severity::Warning);
        assert!(
            f.message.contains("other tasks were runnable"),
            "{}",
            f.message
        );
        assert!(f.message.contains("40 % of the time"), "{}", f.message);
        assert_eq!(f.evidence["other_runnable_max"], 2);
        // Steal alone.
        let s = [sample(0, 0, 1, 1, (0, 0)), sample(1, 0, 1, 1, (100, 10))];
        let f = assess(&HostLoad::from_samples(&s).unwrap()).unwrap();
        assert!(f.message.contains("stole 10.0 %"), "{}", f.message);
    }
}
