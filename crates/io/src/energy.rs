//! The RAPL energy meter: the package domains of Linux's powercap framework
//! (`/sys/class/powercap/intel-rapl:N/energy_uj`, also on AMD), read at the
//! start and the end of a run. `linerate_core::energy` turns the readings
//! into joules (wraparound at `max_energy_range_uj`) and into the one energy
//! flag every measuring command carries. perf's `power/energy-pkg/` event
//! reads the same counters and is not used.

use std::fs;
use std::path::{Path, PathBuf};

use linerate_core::energy::{CounterPair, Energy};

use crate::sys::clock::monotonic_ns;

/// Where Linux exposes powercap zones.
pub const POWERCAP: &str = "/sys/class/powercap";

/// One package zone and its counter at the start.
#[derive(Debug, Clone)]
struct Zone {
    name: String,
    dir: PathBuf,
    max_range_uj: u64,
    before_uj: u64,
}

/// A meter started before a run ([`Meter::start`]) and read after it
/// ([`Meter::read`]).
#[derive(Debug, Clone)]
pub struct Meter {
    zones: Result<Vec<Zone>, String>,
    start_ns: u64,
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
    /// Starts on this host's powercap zones.
    pub fn start() -> Self {
        Self::start_in(Path::new(POWERCAP))
    }

    /// Starts on the zones under `root` (a fixture directory in tests).
    pub fn start_in(root: &Path) -> Self {
        Self {
            zones: zones(root),
            start_ns: monotonic_ns(),
        }
    }

    /// Whether there is anything to read.
    pub fn is_available(&self) -> bool {
        self.zones.is_ok()
    }

    /// The energy since the start (the meter can be read again later).
    pub fn read(&self) -> Energy {
        let seconds = monotonic_ns().saturating_sub(self.start_ns) as f64 * 1e-9;
        let zones = match &self.zones {
            Ok(z) => z,
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
}
