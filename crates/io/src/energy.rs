//! The RAPL energy meter, read at the start and the end of a run, from the
//! first of two sources the host has:
//! - the package domains of Linux's powercap framework
//!   (`/sys/class/powercap/intel-rapl:N/energy_uj`, also on AMD);
//! - perf's `power` PMU (`/sys/bus/event_source/devices/power`): its
//!   `energy-pkg` event opened on one CPU of each package (the PMU's
//!   `cpumask`), the type, event, scale and unit read from sysfs.
//!
//! `linerate_core::energy` turns the readings into joules (powercap's
//! wraparound at `max_energy_range_uj`; perf's counts times the scale) and
//! into the one energy flag every measuring command carries.

use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use linerate_core::energy::{CounterPair, Energy, PerfPower};

use crate::sys::clock::monotonic_ns;

/// Where Linux exposes powercap zones.
pub const POWERCAP: &str = "/sys/class/powercap";
/// Where Linux describes perf's RAPL PMU.
pub const PERF_POWER: &str = "/sys/bus/event_source/devices/power";
/// The perf source's name in results.
const PERF_SOURCE: &str = "perf power/energy-pkg";

/// One package zone and its counter at the start.
#[derive(Debug, Clone)]
struct Zone {
    name: String,
    dir: PathBuf,
    max_range_uj: u64,
    before_uj: u64,
}

/// One perf counter: the event opened on one CPU (or, in tests, a file
/// holding the count).
#[derive(Debug, Clone)]
enum Counter {
    /// A perf event's descriptor.
    Perf(Arc<OwnedFd>),
    /// A file whose text is the count (fixtures).
    #[cfg(test)]
    File(PathBuf),
}

impl Counter {
    fn read(&self) -> Result<u64, String> {
        match self {
            Self::Perf(fd) => {
                crate::sys::perf::read_count(fd).map_err(|e| format!("reading {PERF_SOURCE}: {e}"))
            }
            #[cfg(test)]
            Self::File(p) => read_u64(p),
        }
    }
}

/// perf's counters of every package and their counts at the start.
#[derive(Debug, Clone)]
struct PerfCounters {
    scale: f64,
    counters: Vec<(Counter, u64)>,
}

/// What a meter reads.
#[derive(Debug, Clone)]
enum Source {
    Powercap(Vec<Zone>),
    Perf(PerfCounters),
}

/// A meter started before a run ([`Meter::start`]) and read after it
/// ([`Meter::read`]).
#[derive(Debug, Clone)]
pub struct Meter {
    source: Result<Source, String>,
    start_ns: u64,
}

/// The power PMU described under `dir`, or why not.
fn perf_power(dir: &Path) -> Result<PerfPower, String> {
    if !dir.is_dir() {
        return Err(format!("no perf power PMU ({} absent)", dir.display()));
    }
    let text = |rel: &str| {
        fs::read_to_string(dir.join(rel)).map_err(|e| format!("{}: {e}", dir.join(rel).display()))
    };
    PerfPower::parse(
        &text("type")?,
        &text("events/energy-pkg")?,
        &text("events/energy-pkg.scale")?,
        &text("events/energy-pkg.unit")?,
        &text("cpumask")?,
    )
    .map_err(|why| format!("{}: {why}", dir.display()))
}

/// Opens `energy-pkg` of the PMU under `dir` on each package's CPU with
/// `open`, and reads every count once.
fn perf_counters(
    dir: &Path,
    open: impl Fn(&PerfPower, u32) -> Result<Counter, String>,
) -> Result<PerfCounters, String> {
    let pmu = perf_power(dir)?;
    let counters = pmu
        .cpus
        .iter()
        .map(|&cpu| {
            let c = open(&pmu, cpu)?;
            let before = c.read()?;
            Ok((c, before))
        })
        .collect::<Result<_, String>>()?;
    Ok(PerfCounters {
        scale: pmu.scale,
        counters,
    })
}

/// The perf event itself.
fn open_perf(pmu: &PerfPower, cpu: u32) -> Result<Counter, String> {
    crate::sys::perf::open_counter(pmu.pmu_type, pmu.config, cpu)
        .map(|fd| Counter::Perf(Arc::new(fd)))
        .map_err(|e| format!("perf_event_open {PERF_SOURCE} on CPU {cpu}: {e}"))
}

fn read_u64(path: &Path) -> Result<u64, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.trim()
        .parse()
        .map_err(|_| format!("{}: not a number: {}", path.display(), text.trim()))
}

/// The package zones under `root` (`intel-rapl:N`, not the sub-zones
/// `intel-rapl:N:M` that package counters already include), read now.
fn zones(root: &Path) -> Result<Vec<Zone>, String> {
    let entries = fs::read_dir(root).map_err(|e| format!("no {} ({e})", root.display()))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("intel-rapl:"))
                .is_some_and(|rest| !rest.contains(':'))
        })
        .collect();
    if dirs.is_empty() {
        return Err(format!("no intel-rapl package zone in {}", root.display()));
    }
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let name = fs::read_to_string(dir.join("name"))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| dir.display().to_string());
            Ok(Zone {
                name,
                max_range_uj: read_u64(&dir.join("max_energy_range_uj"))?,
                before_uj: read_u64(&dir.join("energy_uj"))?,
                dir,
            })
        })
        .collect()
}

impl Meter {
    /// Starts on this host's powercap zones, or else on perf's power PMU;
    /// without either, the reason names both.
    pub fn start() -> Self {
        Self::start_with(Path::new(POWERCAP), Path::new(PERF_POWER), open_perf)
    }

    /// Starts on the powercap zones under `root` (a fixture directory in
    /// tests).
    pub fn start_in(root: &Path) -> Self {
        Self {
            source: zones(root).map(Source::Powercap),
            start_ns: monotonic_ns(),
        }
    }

    fn start_with(
        powercap: &Path,
        perf: &Path,
        open: impl Fn(&PerfPower, u32) -> Result<Counter, String>,
    ) -> Self {
        let start_ns = monotonic_ns();
        let source = zones(powercap)
            .map(Source::Powercap)
            .or_else(|no_powercap| {
                perf_counters(perf, open)
                    .map(Source::Perf)
                    .map_err(|no_perf| format!("{no_powercap}; {no_perf}"))
            });
        Self { source, start_ns }
    }

    /// Whether there is anything to read.
    pub fn is_available(&self) -> bool {
        self.source.is_ok()
    }

    /// The energy since the start (the meter can be read again later).
    pub fn read(&self) -> Energy {
        let seconds = monotonic_ns().saturating_sub(self.start_ns) as f64 * 1e-9;
        let zones = match &self.source {
            Ok(Source::Powercap(z)) => z,
            Ok(Source::Perf(p)) => {
                let counts: Result<Vec<(u64, u64)>, String> = (p.counters.iter())
                    .map(|(c, before)| Ok((*before, c.read()?)))
                    .collect();
                return match counts {
                    Ok(c) => Energy::from_perf(&c, p.scale, seconds, PERF_SOURCE),
                    Err(reason) => Energy::Unavailable { reason },
                };
            }
            Err(reason) => {
                return Energy::Unavailable {
                    reason: reason.clone(),
                }
            }
        };
        let pairs: Result<Vec<CounterPair>, String> = zones
            .iter()
            .map(|z| {
                Ok(CounterPair {
                    zone: z.name.clone(),
                    before_uj: z.before_uj,
                    after_uj: read_u64(&z.dir.join("energy_uj"))?,
                    max_range_uj: z.max_range_uj,
                })
            })
            .collect();
        match pairs {
            Ok(p) => Energy::from_pairs(&p, seconds, "powercap intel-rapl"),
            Err(reason) => Energy::Unavailable { reason },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A powercap tree with two packages and a sub-zone, in a fresh
    /// directory.
    fn fixture(tag: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("lr-powercap-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        for (dir, name, energy, max) in [
            ("intel-rapl:0", "package-0", "262143000000", "262143328850"),
            ("intel-rapl:1", "package-1", "5000000", "262143328850"),
            ("intel-rapl:0:0", "core", "1", "262143328850"),
        ] {
            let d = root.join(dir);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("name"), format!("{name}\n")).unwrap();
            fs::write(d.join("energy_uj"), format!("{energy}\n")).unwrap();
            fs::write(d.join("max_energy_range_uj"), format!("{max}\n")).unwrap();
        }
        root
    }

    #[test]
    fn reads_packages_across_a_wraparound() {
        let root = fixture("wrap");
        let meter = Meter::start_in(&root);
        assert!(meter.is_available());
        // package-0 wraps: 328,850 µJ to the top and 1,000,000 after it;
        // package-1 adds 2 J; the core sub-zone is inside package-0.
        fs::write(root.join("intel-rapl:0/energy_uj"), "1000000\n").unwrap();
        fs::write(root.join("intel-rapl:1/energy_uj"), "7000000\n").unwrap();
        fs::write(root.join("intel-rapl:0:0/energy_uj"), "999999999\n").unwrap();
        match meter.read() {
            Energy::Measured { joules, source, .. } => {
                assert!((joules - 3.328_85).abs() < 1e-9, "{joules}");
                assert_eq!(source, "powercap intel-rapl: package-0, package-1");
            }
            other => panic!("{other:?}"),
        }
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn says_why_not() {
        let root = fixture("broken");
        fs::write(root.join("intel-rapl:1/energy_uj"), "n/a\n").unwrap();
        let broken = Meter::start_in(&root);
        assert!(!broken.is_available());
        match broken.read() {
            Energy::Unavailable { reason } => assert!(reason.contains("not a number"), "{reason}"),
            other => panic!("{other:?}"),
        }
        fs::remove_dir_all(&root).unwrap();
        let none = Meter::start_in(Path::new("/nonexistent-powercap"));
        match none.read() {
            Energy::Unavailable { reason } => {
                assert!(reason.starts_with("no /nonexistent"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    /// A perf power PMU's sysfs files, two packages (CPUs 0 and 4), and a
    /// count file per package standing in for its event.
    fn perf_fixture(tag: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("lr-perfpower-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("events")).unwrap();
        for (file, text) in [
            ("type", "23\n"),
            ("cpumask", "0,4\n"),
            ("events/energy-pkg", "event=0x02\n"),
            ("events/energy-pkg.scale", "2.3283064365386962890625e-10\n"),
            ("events/energy-pkg.unit", "Joules\n"),
            ("count-0", "1000\n"),
            ("count-4", "0\n"),
        ] {
            fs::write(root.join(file), text).unwrap();
        }
        root
    }

    fn open_file(dir: PathBuf) -> impl Fn(&PerfPower, u32) -> Result<Counter, String> {
        move |pmu, cpu| {
            assert_eq!((pmu.pmu_type, pmu.config), (23, 2));
            Ok(Counter::File(dir.join(format!("count-{cpu}"))))
        }
    }

    #[test]
    fn perf_power_is_the_second_source() {
        let root = perf_fixture("read");
        let none = Path::new("/nonexistent-powercap");
        let meter = Meter::start_with(none, &root, open_file(root.clone()));
        assert!(meter.is_available());
        // 2³² counts of 2⁻³² J on each package: 2 J.
        fs::write(root.join("count-0"), format!("{}\n", 1000 + (1u64 << 32))).unwrap();
        fs::write(root.join("count-4"), format!("{}\n", 1u64 << 32)).unwrap();
        match meter.read() {
            Energy::Measured { joules, source, .. } => {
                assert!((joules - 2.0).abs() < 1e-9, "{joules}");
                assert_eq!(source, "perf power/energy-pkg: 2 package(s)");
            }
            other => panic!("{other:?}"),
        }
        // powercap, when present, comes first.
        let pc = fixture("first");
        let meter = Meter::start_with(&pc, &root, open_file(root.clone()));
        assert!(matches!(meter.source, Ok(Source::Powercap(_))));
        fs::remove_dir_all(&pc).unwrap();
        // A unit that is not Joules: not a source, and the reason says so
        // after powercap's.
        fs::write(root.join("events/energy-pkg.unit"), "Watts\n").unwrap();
        match Meter::start_with(none, &root, open_file(root.clone())).read() {
            Energy::Unavailable { reason } => {
                assert!(reason.starts_with("no /nonexistent-powercap"), "{reason}");
                assert!(reason.contains("unit 'Watts', not Joules"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        fs::remove_dir_all(&root).unwrap();
        // Neither: both named once.
        let absent = Path::new("/nonexistent-power-pmu");
        match Meter::start_with(none, absent, open_perf).read() {
            Energy::Unavailable { reason } => {
                assert!(reason.contains("no perf power PMU"), "{reason}");
                assert_eq!(
                    reason.matches("nonexistent-powercap").count(),
                    1,
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
