//! Latency, RFC 2544 section 26.2: frames at the throughput rate for the trial
//! time; the RFC tags one frame per trial and asks for at least 20 trials,
//! reporting the average. Every linerate test frame carries its transmit
//! timestamp, so each trial yields the latency of every received frame; the
//! result keeps the per-trial summaries and a merged histogram (min, p50,
//! p99, max), and the mean of the per-trial means as the RFC's figure.

use serde::{Deserialize, Serialize};

use crate::stats::histogram::{Histogram, Summary};

use super::{Common, Plan, TrialOutcome, TrialSpec};

/// One latency trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyTrial {
    /// Offered rate, frames/s.
    pub offered_fps: f64,
    /// Frames lost in the trial (the rate should be loss-free).
    pub lost_frames: u64,
    /// Latency of the trial's frames (`None`: none received or not measured).
    pub summary: Option<Summary>,
}

/// The latency result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyResult {
    /// Rate asked, frames/s (the throughput).
    pub rate_fps: f64,
    /// Valid trials.
    pub trials: Vec<LatencyTrial>,
    /// Trials the generator could not run at the rate.
    pub invalid_trials: u32,
    /// All frames of all valid trials together.
    pub merged: Option<Summary>,
    /// RFC 2544 section 26.2's figure: the average of the trial means, ns.
    pub mean_of_trials_ns: Option<f64>,
}

/// The latency plan: `trials` trials at `rate_fps`.
#[derive(Debug, Clone)]
pub struct Latency {
    rate_fps: f64,
    wanted: u32,
    trials: Vec<LatencyTrial>,
    invalid: u32,
    merged: Histogram,
}

impl Latency {
    /// `trials` trials at `rate_fps` (RFC 2544 asks for 20).
    pub fn new(rate_fps: f64, trials: u32) -> Self {
        Self {
            rate_fps,
            wanted: trials,
            trials: Vec::new(),
            invalid: 0,
            merged: Histogram::new(),
        }
    }

    fn next(&self, c: &Common) -> Option<TrialSpec> {
        let done = self.trials.len() as u32 + self.invalid;
        (done < self.wanted && self.rate_fps > 0.0).then(|| c.rate_trial(self.rate_fps))
    }
}

impl Plan for Latency {
    type Output = LatencyResult;

    fn first(&mut self, c: &Common) -> Option<TrialSpec> {
        self.next(c)
    }

    fn passes(&self, o: &TrialOutcome) -> bool {
        o.lost_frames() == 0
    }

    fn on_valid(&mut self, c: &Common, _spec: &TrialSpec, o: &TrialOutcome) -> Option<TrialSpec> {
        if let Some(h) = &o.latency {
            self.merged.merge(h);
        }
        self.trials.push(LatencyTrial {
            offered_fps: o.offered_fps,
            lost_frames: o.lost_frames(),
            summary: o.latency.as_ref().and_then(Histogram::summary),
        });
        self.next(c)
    }

    fn on_generator_limit(
        &mut self,
        c: &Common,
        _spec: &TrialSpec,
        _o: &TrialOutcome,
    ) -> Option<TrialSpec> {
        self.invalid += 1;
        self.next(c)
    }

    fn describe(&self) -> String {
        format!(
            "{}/{} trials",
            self.trials.len() as u32 + self.invalid,
            self.wanted
        )
    }

    fn output(&self, _c: &Common) -> LatencyResult {
        let means: Vec<f64> = self
            .trials
            .iter()
            .filter_map(|t| t.summary.map(|s| s.mean_ns))
            .collect();
        LatencyResult {
            rate_fps: self.rate_fps,
            trials: self.trials.clone(),
            invalid_trials: self.invalid,
            merged: self.merged.summary(),
            mean_of_trials_ns: (!means.is_empty())
                .then(|| means.iter().sum::<f64>() / means.len() as f64),
        }
    }
}

/// The seed-003 view of one frame: if frames were sent strictly one at a
/// time, each waiting for the previous to arrive, the device would carry
/// `frame bits / one-way latency` bits per second. Comparing it with the
/// streaming throughput shows how much pipelining the device does.
pub fn single_frame_bits_per_s(frame_bytes: u32, latency_ns: u64) -> Option<f64> {
    (latency_ns > 0).then(|| f64::from(frame_bytes) * 8.0 * 1e9 / latency_ns as f64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn single_frame_throughput() {
        use super::single_frame_bits_per_s;
        // 1518 B in 10 µs: 12,144 bits / 10 µs = 1.2144 Gbit/s.
        assert_eq!(single_frame_bits_per_s(1518, 10_000), Some(1.2144e9));
        assert_eq!(single_frame_bits_per_s(64, 0), None);
    }

    use super::super::sim::{SimDut, SimGenerator};
    use super::super::{run_to_end, Procedure};
    use super::*;
    use std::time::Duration;

    #[test]
    fn twenty_trials_at_the_rate() {
        let mut c = Common::new(1518, 8127.0);
        c.trial = Duration::from_millis(500);
        let dut = SimDut::new(10_000.0, 0);
        let mut p = Procedure::new(c, Latency::new(8127.0, 20));
        run_to_end(&mut p, |s| SimGenerator::unlimited().play(&dut, s));
        let r = p.output();
        assert_eq!(r.trials.len(), 20);
        let m = r.merged.unwrap();
        assert_eq!((m.min_ns, m.max_ns), (10_000, 10_000));
        assert_eq!(m.count, 20 * 4064);
        assert_eq!(r.mean_of_trials_ns, Some(10_000.0));
    }

    #[test]
    fn generator_short_trials_are_counted_invalid() {
        let c = Common::new(64, 148_809.0);
        let dut = SimDut::new(1e9, 0);
        let mut p = Procedure::new(c, Latency::new(100_000.0, 3));
        run_to_end(&mut p, |s| SimGenerator::ceiling(50_000.0).play(&dut, s));
        let r = p.output();
        assert_eq!((r.trials.len(), r.invalid_trials), (0, 3));
        assert_eq!(r.merged, None);
    }

    #[test]
    fn zero_rate_runs_nothing() {
        let p = Procedure::new(Common::new(64, 1.0), Latency::new(0.0, 20));
        assert!(p.is_done());
    }
}
