//! Energy of a run from RAPL counters (Intel and AMD *Running Average Power
//! Limit*, as Linux's powercap framework exposes them), and the one way every
//! measuring command reports it: a flag ([`flag`]).
//!
//! `linerate-io` reads the counters (`energy_uj` of each package domain
//! `intel-rapl:N`, which wraps at `max_energy_range_uj`) before and after a
//! run; this module turns two readings into joules ([`delta_uj`]) and joules
//! into energy per gigabyte and per packet. A host without RAPL (most VMs,
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

    /// Joules, when measured.
    pub fn joules(&self) -> Option<f64> {
        match self {
            Self::Measured { joules, .. } => Some(*joules),
            Self::Unavailable { .. } => None,
        }
    }
}

/// Joules per gigabyte (10⁹ bytes) and per packet of a run that moved
/// `bytes` in `packets` (None where the count is 0).
pub fn per_unit(joules: f64, bytes: u64, packets: u64) -> (Option<f64>, Option<f64>) {
    let per = |n: u64, scale: f64| (n > 0).then(|| joules / (n as f64 / scale));
    (per(bytes, 1e9), per(packets, 1.0))
}

/// The one energy flag of a result: `energy` (info) with joules, joules per
/// gigabyte and microjoules per packet, or `energy_unavailable` (info,
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
}
