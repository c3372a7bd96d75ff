//! Back-to-back frames, RFC 2544 section 26.4: bursts at minimum inter-frame
//! gap (line rate); the longest burst the device passes with no loss, found
//! by binary search on the burst length, repeated (the RFC asks for 50
//! trials and the average). The RFC's longest burst lasts at least 2 s.
//!
//! A burst the generator cannot send at line rate ends the run as a
//! generator limit: every burst is at the same rate, so no length can be
//! judged.

use serde::{Deserialize, Serialize};

use super::{Common, Limit, Plan, TrialOutcome, TrialSpec};

/// Settings of the back-to-back search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BackToBackConfig {
    /// Longest burst tried, frames (RFC 2544: at least 2 s at line rate).
    pub max_frames: u64,
    /// Width of the final bracket, frames.
    pub resolution_frames: u64,
    /// Complete searches (RFC 2544: 50).
    pub repeats: u32,
}

impl BackToBackConfig {
    /// Bursts up to `secs` at line rate, 1-frame resolution (at least 0.1 %
    /// of the longest burst), `repeats` searches.
    pub fn new(line_rate_fps: f64, secs: f64, repeats: u32) -> Self {
        let max = ((line_rate_fps * secs).round() as u64).max(1);
        Self {
            max_frames: max,
            resolution_frames: (max / 1000).max(1),
            repeats,
        }
    }
}

/// One search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BackToBackRun {
    /// Longest burst passed, frames.
    pub frames: u64,
    /// What stops it: LineRate means even the longest burst passed.
    pub limited_by: Limit,
}

/// The back-to-back result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BackToBackResult {
    /// Every search.
    pub runs: Vec<BackToBackRun>,
    /// Average burst length over the runs (RFC 2544 section 26.4 reports it).
    pub mean_frames: Option<f64>,
    /// Longest burst tried.
    pub max_frames: u64,
    /// The generator could not send bursts at line rate.
    pub generator_limited: bool,
}

/// The back-to-back plan.
#[derive(Debug, Clone)]
pub struct BackToBack {
    cfg: BackToBackConfig,
    lo: u64,
    hi: Option<u64>,
    runs: Vec<BackToBackRun>,
}

impl BackToBack {
    /// A search with `cfg`.
    pub fn new(cfg: BackToBackConfig) -> Self {
        Self {
            cfg,
            lo: 0,
            hi: None,
            runs: Vec::new(),
        }
    }

    fn burst(&self, c: &Common, frames: u64) -> TrialSpec {
        TrialSpec {
            frame_bytes: c.frame_bytes,
            fps: c.line_rate_fps,
            frames: frames.max(1),
        }
    }

    fn restart(&mut self, c: &Common) -> Option<TrialSpec> {
        if self.runs.len() as u32 >= self.cfg.repeats.max(1) {
            return None;
        }
        self.lo = 0;
        self.hi = None;
        Some(self.burst(c, self.cfg.max_frames))
    }

    fn finish(&mut self, c: &Common, frames: u64, limit: Limit) -> Option<TrialSpec> {
        self.runs.push(BackToBackRun {
            frames,
            limited_by: limit,
        });
        self.restart(c)
    }
}

impl Plan for BackToBack {
    type Output = BackToBackResult;

    fn first(&mut self, c: &Common) -> Option<TrialSpec> {
        self.restart(c)
    }

    fn passes(&self, o: &TrialOutcome) -> bool {
        o.lost_frames() == 0
    }

    fn on_valid(&mut self, c: &Common, spec: &TrialSpec, o: &TrialOutcome) -> Option<TrialSpec> {
        if self.passes(o) {
            self.lo = self.lo.max(spec.frames);
        } else {
            self.hi = Some(spec.frames);
        }
        match self.hi {
            None => self.finish(c, self.lo, Limit::LineRate),
            Some(hi) if hi - self.lo <= self.cfg.resolution_frames => {
                self.finish(c, self.lo, Limit::Device)
            }
            Some(hi) => Some(self.burst(c, self.lo + (hi - self.lo) / 2)),
        }
    }

    fn on_generator_limit(
        &mut self,
        _c: &Common,
        _spec: &TrialSpec,
        _o: &TrialOutcome,
    ) -> Option<TrialSpec> {
        self.runs.push(BackToBackRun {
            frames: self.lo,
            limited_by: Limit::Generator,
        });
        None
    }

    fn describe(&self) -> String {
        match self.hi {
            Some(hi) => format!("lo {} hi {}", self.lo, hi),
            None => format!("lo {} hi -", self.lo),
        }
    }

    fn output(&self, _c: &Common) -> BackToBackResult {
        let valid: Vec<f64> = self
            .runs
            .iter()
            .filter(|r| r.limited_by != Limit::Generator)
            .map(|r| r.frames as f64)
            .collect();
        BackToBackResult {
            runs: self.runs.clone(),
            mean_frames: (!valid.is_empty())
                .then(|| valid.iter().sum::<f64>() / valid.len() as f64),
            max_frames: self.cfg.max_frames,
            generator_limited: self.runs.iter().any(|r| r.limited_by == Limit::Generator),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::sim::{SimDut, SimGenerator};
    use super::super::{run_to_end, Procedure};
    use super::*;

    #[test]
    fn longest_burst_is_buffer_over_the_overload_share() {
        // Line 148,809 fps, DUT forwards 100,000 fps and buffers 5,000
        // frames: it falls behind by 1 - 100000/148809 = 32.8 % of each
        // burst, so the longest clean burst is 5000 / 0.328 = 15,245 frames.
        let line = 100e6 / 672.0;
        let c = Common::new(64, line);
        let mut cfg = BackToBackConfig::new(line, 2.0, 3);
        cfg.resolution_frames = 1;
        let dut = SimDut::new(100_000.0, 5_000);
        let mut p = Procedure::new(c, BackToBack::new(cfg));
        run_to_end(&mut p, |s| SimGenerator::unlimited().play(&dut, s));
        let r = p.output();
        let t = 5_000.0 / (1.0 - 100_000.0 / line);
        assert_eq!(r.runs.len(), 3);
        for run in &r.runs {
            assert_eq!(run.limited_by, Limit::Device);
            // The sim forwards floor(capacity × t) + buffer: within a frame.
            assert!(
                (run.frames as f64 - t).abs() <= 1.0,
                "{} vs {t}",
                run.frames
            );
        }
        assert!(!r.generator_limited);
    }

    #[test]
    fn fast_dut_passes_the_longest_burst() {
        let c = Common::new(1518, 8127.0);
        let mut p = Procedure::new(c, BackToBack::new(BackToBackConfig::new(8127.0, 2.0, 1)));
        run_to_end(&mut p, |s| {
            SimGenerator::unlimited().play(&SimDut::new(1e6, 0), s)
        });
        let r = p.output();
        assert_eq!(r.runs[0].frames, 16_254);
        assert_eq!(r.runs[0].limited_by, Limit::LineRate);
    }

    #[test]
    fn slow_generator_is_a_generator_limit() {
        let c = Common::new(64, 148_809.0);
        let mut p = Procedure::new(c, BackToBack::new(BackToBackConfig::new(148_809.0, 1.0, 5)));
        run_to_end(&mut p, |s| {
            SimGenerator::ceiling(100_000.0).play(&SimDut::new(1e9, 0), s)
        });
        let r = p.output();
        assert!(r.generator_limited);
        assert_eq!(r.mean_frames, None);
        assert_eq!(p.trace().len(), 2); // one try, one retry
    }
}
