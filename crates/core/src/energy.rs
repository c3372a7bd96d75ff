//! Energy of a run from RAPL counters (Intel and AMD *Running Average Power
//! Limit*), and the one way every measuring command reports it: a flag
//! ([`flag`]).
//!
//! `linerate-io` reads the counters before and after a run from one of two
//! sources: Linux's powercap framework (`energy_uj` of each package domain
//! `intel-rapl:N`, which wraps at `max_energy_range_uj`; [`delta_uj`]), or,
//! where powercap is absent, perf's `power` PMU (the `energy-pkg` event,
//! described by sysfs files that [`PerfPower::parse`] reads; its 64-bit
//! count times the event's scale is joules, [`Energy::from_perf`]). This
//! module turns two readings into joules and joules into energy per
//! gigabyte and per packet. A host without RAPL (most VMs,
//! non-x86 machines) gets the info flag `energy_unavailable` once per result:
//! "energy: not available here (no RAPL)".

use serde::{Deserialize, Serialize};

use crate::result::Flag;

/// The flag code of a result with an energy figure.
pub const ENERGY: &str = "energy";
/// The flag code of a result without one (no RAPL on the host).
pub const ENERGY_UNAVAILABLE: &str = "energy_unavailable";

/// One RAPL counter read twice: the zone and its two values, µJ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterPair {
    /// The zone's `name` (`package-0` …).
    pub zone: String,
    /// `energy_uj` at the start.
    pub before_uj: u64,
    /// `energy_uj` at the end.
    pub after_uj: u64,
    /// `max_energy_range_uj`: the counter wraps to 0 after this value.
    pub max_range_uj: u64,
}

/// Microjoules between two readings of a counter that wraps after
/// `max_range_uj` (one wrap at most: RAPL package counters take minutes to
/// wrap, longer than any linerate run between two readings). The counter's
/// step across the wrap is not known to the microjoule; the error is at most
/// one counter unit (about 15 µJ).
pub fn delta_uj(before: u64, after: u64, max_range_uj: u64) -> u64 {
    if after >= before {
        after - before
    } else {
        max_range_uj.saturating_sub(before) + after
    }
}

/// What the energy meter found over a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Energy {
    /// Measured: the sum over every package domain.
    Measured {
        /// Joules over the run.
        joules: f64,
        /// Seconds between the two readings (CLOCK_MONOTONIC).
        seconds: f64,
        /// What was read (`powercap intel-rapl: package-0, package-1`).
        source: String,
    },
    /// Not measured, and why.
    Unavailable {
        /// Why (`no /sys/class/powercap/intel-rapl:*`, a read error …).
        reason: String,
    },
}

impl Energy {
    /// The energy of `pairs` over `seconds`, read from `source`.
    pub fn from_pairs(pairs: &[CounterPair], seconds: f64, source: &str) -> Self {
        let uj: u64 = pairs
            .iter()
            .map(|p| delta_uj(p.before_uj, p.after_uj, p.max_range_uj))
            .sum();
        let zones: Vec<&str> = pairs.iter().map(|p| p.zone.as_str()).collect();
        Self::Measured {
            joules: uj as f64 * 1e-6,
            seconds,
            source: format!("{source}: {}", zones.join(", ")),
        }
    }

    /// The energy of perf counters read twice (`(before, after)` per CPU
    /// opened: one per package), each count worth `scale` joules, over
    /// `seconds`. perf keeps 64-bit counts across the hardware counter's
    /// wraps, so a count that went down is a broken reading, not a wrap.
    pub fn from_perf(counts: &[(u64, u64)], scale: f64, seconds: f64, source: &str) -> Self {
        if let Some((b, a)) = counts.iter().find(|(b, a)| a < b) {
            return Self::Unavailable {
                reason: format!("{source}: the count went down ({b} to {a})"),
            };
        }
        let total: u64 = counts.iter().map(|(b, a)| a - b).sum();
        Self::Measured {
            joules: total as f64 * scale,
            seconds,
            source: format!("{source}: {} package(s)", counts.len()),
        }
    }

    /// Joules, when measured.
    pub fn joules(&self) -> Option<f64> {
        match self {
            Self::Measured { joules, .. } => Some(*joules),
            Self::Unavailable { .. } => None,
        }
    }
}

/// perf's RAPL PMU (`/sys/bus/event_source/devices/power`) and its
/// package-energy event, as its sysfs files describe them.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfPower {
    /// `perf_event_attr.type` (the PMU's `type` file: dynamic, per boot).
    pub pmu_type: u32,
    /// `perf_event_attr.config` (`events/energy-pkg`: `event=0x02`).
    pub config: u64,
    /// Joules per count (`events/energy-pkg.scale`, e.g. 2⁻³²).
    pub scale: f64,
    /// One CPU per package to open the event on (the PMU's `cpumask`).
    pub cpus: Vec<u32>,
}

impl PerfPower {
    /// The PMU from its files' texts: `type`, `events/energy-pkg`,
    /// `events/energy-pkg.scale`, `events/energy-pkg.unit` (must say
    /// `Joules`) and `cpumask`; or why not.
    pub fn parse(
        pmu_type: &str,
        event: &str,
        scale: &str,
        unit: &str,
        cpumask: &str,
    ) -> Result<Self, String> {
        let pmu_type = pmu_type
            .trim()
            .parse()
            .map_err(|_| format!("type '{}' is not a number", pmu_type.trim()))?;
        let config = parse_event(event.trim())?;
        let scale: f64 = scale
            .trim()
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s > 0.0)
            .ok_or_else(|| format!("scale '{}' is not a positive number", scale.trim()))?;
        if unit.trim() != "Joules" {
            return Err(format!("unit '{}', not Joules", unit.trim()));
        }
        let cpus = parse_cpu_list(cpumask.trim())?;
        Ok(Self {
            pmu_type,
            config,
            scale,
            cpus,
        })
    }
}

/// `event=0x02` (the only term the power PMU's events have) as the
/// config value.
fn parse_event(text: &str) -> Result<u64, String> {
    let bad = || format!("event '{text}' is not event=N");
    let v = text.strip_prefix("event=").ok_or_else(bad)?;
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    }
    .map_err(|_| bad())
}

/// A sysfs CPU list (`0`, `0,16`, `0-3,8`) as CPU numbers.
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>, String> {
    let bad = || format!("cpu list '{text}' is not N,N-M");
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let lo: u32 = lo.trim().parse().map_err(|_| bad())?;
        let hi: u32 = hi.trim().parse().map_err(|_| bad())?;
        if hi < lo || hi - lo > 4096 {
            return Err(bad());
        }
        cpus.extend(lo..=hi);
    }
    if cpus.is_empty() {
        return Err(bad());
    }
    Ok(cpus)
}

/// Joules per gigabyte (10⁹ bytes) and per packet of a run that moved
/// `bytes` in `packets` (None where the count is 0).
pub fn per_unit(joules: f64, bytes: u64, packets: u64) -> (Option<f64>, Option<f64>) {
    let per = |n: u64, scale: f64| (n > 0).then(|| joules / (n as f64 / scale));
    (per(bytes, 1e9), per(packets, 1.0))
}

/// The one energy flag of a result: `energy` (info) with joules, joules per
/// gigabyte, microjoules per packet and the mean power (watts), or `energy_unavailable` (info,
/// "energy: not available here (no RAPL)"). Every measuring command adds
/// exactly one of them.
pub fn flag(energy: &Energy, bytes: u64, packets: u64) -> Flag {
    match energy {
        Energy::Measured {
            joules,
            seconds,
            source,
        } => {
            let (per_gb, per_packet) = per_unit(*joules, bytes, packets);
            let mut parts = vec![format!("{joules:.3} J over {seconds:.2} s")];
            if let Some(j) = per_gb {
                parts.push(format!("{j:.3} J/GB"));
            }
            if let Some(j) = per_packet {
                parts.push(format!("{:.3} µJ/packet", j * 1e6));
            }
            let mut f = Flag::info(
                ENERGY,
                format!(
                    "energy: {} (RAPL, the whole CPU package: everything the host ran meanwhile)",
                    parts.join(", ")
                ),
            )
            .with("energy_j", *joules)
            .with("seconds", *seconds)
            .with("source", source.as_str());
            if let Some(j) = per_gb {
                f = f.with("energy_j_per_gb", j);
            }
            if let Some(j) = per_packet {
                f = f.with("energy_uj_per_packet", j * 1e6);
            }
            if *seconds > 0.0 {
                f = f.with("power_w", joules / seconds);
            }
            f
        }
        Energy::Unavailable { reason } => {
            Flag::info(ENERGY_UNAVAILABLE, "energy: not available here (no RAPL)")
                .with("reason", reason.as_str())
        }
    }
}

/// What a result moved through the host: bytes and packets, the
/// denominators of energy per gigabyte and per packet.
pub trait Moved {
    /// (bytes, packets); 0 where not counted.
    fn moved(&self) -> (u64, u64);
}

/// Each flow once, as the client counted it (payload bytes); packets from
/// the derived figures where counted or estimated (not in version-1
/// documents).
impl Moved for crate::throughput::model::ThroughputResult {
    fn moved(&self) -> (u64, u64) {
        use crate::throughput::model::End;
        let bytes = self.client.flows.iter().map(|f| f.bytes).sum();
        let client = self
            .figures
            .directions
            .iter()
            .filter(|d| d.end == End::Client);
        (bytes, client.filter_map(|d| d.packets).sum())
    }
}

/// Every run's.
impl Moved for crate::throughput::model::Scenarios {
    fn moved(&self) -> (u64, u64) {
        (self.runs.iter().map(|r| r.result.moved()))
            .fold((0, 0), |(b, p), (rb, rp)| (b + rb, p + rp))
    }
}

/// Every request sent and every reply received, of the probe size.
impl Moved for crate::latency::LatencyReport {
    fn moved(&self) -> (u64, u64) {
        self.runs.iter().fold((0, 0), |(b, p), r| {
            let n = r.counts.sent + r.counts.received;
            (b + n * r.size_bytes, p + n)
        })
    }
}

/// Every frame the generator sent, in every trial (frame bytes).
impl Moved for crate::rfc2544::Rfc2544Result {
    fn moved(&self) -> (u64, u64) {
        self.sizes.iter().fold((0, 0), |(b, p), s| {
            let sent: u64 = (s.trace.iter().flat_map(|t| &t.steps))
                .map(|step| step.sent_frames)
                .sum();
            (b + sent * u64::from(s.frame_bytes), p + sent)
        })
    }
}

/// [`flag`] for what `result` moved.
pub fn flag_for(energy: &Energy, result: &impl Moved) -> Flag {
    let (bytes, packets) = result.moved();
    flag(energy, bytes, packets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraparound() {
        assert_eq!(delta_uj(100, 350, 1000), 250);
        assert_eq!(delta_uj(900, 50, 1000), 150);
        assert_eq!(delta_uj(7, 7, 1000), 0);
    }

    #[test]
    fn flags() {
        let pairs = [
            CounterPair {
                zone: "package-0".into(),
                before_uj: 262_143_000_000,
                after_uj: 1_000_000,
                max_range_uj: 262_143_328_850,
            },
            CounterPair {
                zone: "package-1".into(),
                before_uj: 0,
                after_uj: 2_000_000,
                max_range_uj: 262_143_328_850,
            },
        ];
        let e = Energy::from_pairs(&pairs, 2.0, "powercap");
        let j = e.joules().unwrap();
        assert!((j - 3.328_85).abs() < 1e-9, "{j}");
        let f = flag(&e, 2_000_000_000, 1_000_000);
        assert_eq!(f.code, ENERGY);
        let per_gb = f.evidence["energy_j_per_gb"].as_f64().unwrap();
        assert!((per_gb - j / 2.0).abs() < 1e-12);
        let per_pkt = f.evidence["energy_uj_per_packet"].as_f64().unwrap();
        assert!((per_pkt - j).abs() < 1e-9, "{per_pkt}");
        assert_eq!(f.evidence["source"], "powercap: package-0, package-1");
        let watts = f.evidence["power_w"].as_f64().unwrap();
        assert!((watts - j / 2.0).abs() < 1e-12, "{watts}");
        let none = flag(
            &Energy::Unavailable {
                reason: "no powercap".into(),
            },
            1,
            1,
        );
        assert_eq!(none.code, ENERGY_UNAVAILABLE);
        assert_eq!(none.message, "energy: not available here (no RAPL)");
        // No packets: no per-packet figure, never a division by zero.
        assert_eq!(per_unit(1.0, 0, 0), (None, None));
    }

    #[test]
    fn perf_power_pmu_files() {
        let scale = "2.3283064365386962890625e-10\n";
        let p = PerfPower::parse("23\n", "event=0x02\n", scale, "Joules\n", "0,16\n").unwrap();
        assert_eq!(p.pmu_type, 23);
        assert_eq!(p.config, 2);
        assert_eq!(p.scale, 2f64.powi(-32));
        assert_eq!(p.cpus, [0, 16]);
        assert_eq!(parse_cpu_list("0-2,8"), Ok(vec![0, 1, 2, 8]));
        let e = |t, ev, sc, u, c| PerfPower::parse(t, ev, sc, u, c).unwrap_err();
        assert!(e("x", "event=2", scale, "Joules", "0").contains("type"));
        assert!(e("1", "umask=2", scale, "Joules", "0").contains("event"));
        assert!(e("1", "event=2", "-1", "Joules", "0").contains("scale"));
        assert!(e("1", "event=2", scale, "Watts", "0").contains("Joules"));
        assert!(e("1", "event=2", scale, "Joules", "3-1").contains("cpu list"));
        assert!(e("1", "event=2", scale, "Joules", "").contains("cpu list"));
    }

    #[test]
    fn perf_counts_to_joules() {
        // 2³² counts of 2⁻³² J on one package, 2³³ on another: 3 J.
        let c = [(10, 10 + (1 << 32)), (0, 1 << 33)];
        match Energy::from_perf(&c, 2f64.powi(-32), 1.5, "perf power/energy-pkg") {
            Energy::Measured {
                joules,
                seconds,
                source,
            } => {
                assert!((joules - 3.0).abs() < 1e-12, "{joules}");
                assert_eq!(seconds, 1.5);
                assert_eq!(source, "perf power/energy-pkg: 2 package(s)");
            }
            other => panic!("{other:?}"),
        }
        let broken = Energy::from_perf(&[(5, 4)], 1.0, 1.0, "perf");
        assert!(matches!(broken, Energy::Unavailable { .. }), "{broken:?}");
    }
}
