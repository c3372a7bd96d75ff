//! Throughput, RFC 2544 section 26.1: "the maximum rate at which none of the
//! offered frames are dropped by the device", found by binary search between
//! zero and the maximum rate of the medium.
//!
//! With a loss tolerance above 0 (not in RFC 2544; RFC 1242 section 3.17
//! defines throughput at zero loss) a trial passes when `lost / sent ≤ tol`.
//! The search stops when the bracket `[lo (highest pass), hi (lowest fail)]`
//! is no wider than the resolution (default 0.5 % of line rate); the result is
//! `lo`. A generator limit at rate `r` caps the bracket at `r` without calling
//! it a device failure; if the search ends against such a cap, the result is
//! a lower bound limited by the generator.

use serde::{Deserialize, Serialize};

use super::{Common, Limit, Plan, TrialOutcome, TrialSpec};

/// Settings of the throughput search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThroughputConfig {
    /// Width of the final bracket, as a fraction of line rate (0.005 = 0.5 %).
    pub resolution: f64,
    /// Largest loss that still passes, as a fraction (0 = RFC 2544).
    pub loss_tolerance: f64,
    /// Number of complete searches; the result is the lowest.
    pub repeats: u32,
    /// A generator ceiling measured beforehand, frames/s: when it is below
    /// line rate the search starts there and its top is a generator limit.
    pub generator_ceiling_fps: Option<f64>,
}

impl Default for ThroughputConfig {
    fn default() -> Self {
        Self {
            resolution: 0.005,
            loss_tolerance: 0.0,
            repeats: 1,
            generator_ceiling_fps: None,
        }
    }
}

/// One complete binary search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThroughputRun {
    /// Highest passing rate, frames/s (0 if none passed).
    pub throughput_fps: f64,
    /// What bounds it from above.
    pub limited_by: Limit,
    /// Lowest rate that failed (loss or generator limit), frames/s.
    pub lowest_fail_fps: Option<f64>,
    /// Valid trials run.
    pub trials: u32,
}

/// The throughput result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThroughputResult {
    /// Every complete search.
    pub runs: Vec<ThroughputRun>,
    /// The lowest throughput over the runs, frames/s (`None` before the first
    /// run ends).
    pub throughput_fps: Option<f64>,
    /// What limits the reported throughput.
    pub limited_by: Option<Limit>,
    /// The search resolution, frames/s.
    pub resolution_fps: f64,
    /// Line rate, frames/s.
    pub line_rate_fps: f64,
}

/// The binary search (a [`Plan`] for [`super::Procedure`]).
#[derive(Debug, Clone)]
pub struct Throughput {
    cfg: ThroughputConfig,
    top: f64,
    top_limit: Limit,
    lo: f64,
    lo_offered: f64,
    hi: Option<(f64, Limit)>,
    trials: u32,
    runs: Vec<ThroughputRun>,
}

impl Throughput {
    /// A search with `cfg`.
    pub fn new(cfg: ThroughputConfig) -> Self {
        Self {
            cfg,
            top: 0.0,
            top_limit: Limit::LineRate,
            lo: 0.0,
            lo_offered: 0.0,
            hi: None,
            trials: 0,
            runs: Vec::new(),
        }
    }

    fn resolution_fps(&self, c: &Common) -> f64 {
        (self.cfg.resolution * c.line_rate_fps).max(1.0)
    }

    fn restart(&mut self, c: &Common) -> TrialSpec {
        self.top = c.line_rate_fps;
        self.top_limit = Limit::LineRate;
        if let Some(g) = self.cfg.generator_ceiling_fps {
            if g < c.line_rate_fps * (1.0 - c.generator_tolerance) {
                self.top = g;
                self.top_limit = Limit::Generator;
            }
        }
        self.lo = 0.0;
        self.lo_offered = 0.0;
        self.hi = None;
        self.trials = 0;
        c.rate_trial(self.top)
    }

    /// Next step after a bracket change: another trial, or the end of a run.
    fn step(&mut self, c: &Common) -> Option<TrialSpec> {
        let Some((hi, hi_limit)) = self.hi else {
            // The top passed: done at the top.
            return self.finish_run(c, self.lo_offered, self.top_limit, None);
        };
        if hi - self.lo <= self.resolution_fps(c) {
            return self.finish_run(c, self.lo_offered, hi_limit, Some(hi));
        }
        Some(c.rate_trial((self.lo + hi) / 2.0))
    }

    fn finish_run(
        &mut self,
        c: &Common,
        fps: f64,
        limit: Limit,
        fail: Option<f64>,
    ) -> Option<TrialSpec> {
        self.runs.push(ThroughputRun {
            throughput_fps: fps,
            limited_by: limit,
            lowest_fail_fps: fail,
            trials: self.trials,
        });
        if (self.runs.len() as u32) < self.cfg.repeats.max(1) {
            Some(self.restart(c))
        } else {
            None
        }
    }
}

impl Plan for Throughput {
    type Output = ThroughputResult;

    fn first(&mut self, c: &Common) -> Option<TrialSpec> {
        Some(self.restart(c))
    }

    fn passes(&self, o: &TrialOutcome) -> bool {
        if self.cfg.loss_tolerance <= 0.0 {
            o.lost_frames() == 0
        } else {
            o.loss_ratio() <= self.cfg.loss_tolerance
        }
    }

    fn on_valid(&mut self, c: &Common, spec: &TrialSpec, o: &TrialOutcome) -> Option<TrialSpec> {
        self.trials += 1;
        if self.passes(o) {
            // The bracket moves by the asked rate; the result credits the
            // rate really offered (within the generator tolerance), never more.
            if spec.fps >= self.lo {
                self.lo = spec.fps;
                self.lo_offered = spec.fps.min(o.offered_fps);
            }
        } else {
            self.hi = Some((spec.fps, Limit::Device));
        }
        self.step(c)
    }

    fn on_generator_limit(
        &mut self,
        c: &Common,
        spec: &TrialSpec,
        _o: &TrialOutcome,
    ) -> Option<TrialSpec> {
        // Rates at and above `spec.fps` cannot be offered: cap the bracket
        // there, but say why.
        self.hi = Some((spec.fps, Limit::Generator));
        self.step(c)
    }

    fn describe(&self) -> String {
        match self.hi {
            Some((hi, why)) => format!("lo {:.1} hi {:.1} ({:?})", self.lo, hi, why),
            None => format!("lo {:.1} hi -", self.lo),
        }
    }

    fn output(&self, c: &Common) -> ThroughputResult {
        let worst = self
            .runs
            .iter()
            .min_by(|a, b| a.throughput_fps.total_cmp(&b.throughput_fps));
        ThroughputResult {
            runs: self.runs.clone(),
            throughput_fps: worst.map(|r| r.throughput_fps),
            limited_by: worst.map(|r| r.limited_by),
            resolution_fps: self.resolution_fps(c),
            line_rate_fps: c.line_rate_fps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::sim::{SimDut, SimGenerator};
    use super::super::{run_to_end, Procedure};
    use super::*;
    use std::time::Duration;

    /// 100 Mbit/s at 64 B: 100e6 / (84 × 8) = 148,809.52 frames/s.
    const LINE_64: f64 = 100e6 / 672.0;

    fn common(line: f64) -> Common {
        let mut c = Common::new(64, line);
        c.trial = Duration::from_secs(1);
        c
    }

    #[test]
    fn finds_a_dut_capacity_within_the_resolution_and_snapshots_the_trace() {
        let dut = SimDut::new(100_000.0, 0);
        let gen = SimGenerator::unlimited();
        let mut p = Procedure::new(
            common(LINE_64),
            Throughput::new(ThroughputConfig::default()),
        );
        let elapsed = run_to_end(&mut p, |s| gen.play(&dut, s));
        let r = p.output();
        let t = r.throughput_fps.unwrap();
        assert!(t <= 100_000.0 && t > 100_000.0 - r.resolution_fps, "{t}");
        assert_eq!(r.limited_by, Some(Limit::Device));
        // 9 trials of 1 s and 8 pauses of 2 s (frames are whole, so a trial
        // lasts 1 s within a frame time).
        assert!((elapsed.as_secs_f64() - 25.0).abs() < 1e-4, "{elapsed:?}");
        let expected = "\
#1   asked   148809.5 fps offered   148809.5 sent    148810 recv    100000 loss  32.800% Loss            lo 0.0 hi 148809.5 (Device)
#2   asked    74404.8 fps offered    74404.8 sent     74405 recv     74405 loss   0.000% Pass            lo 74404.8 hi 148809.5 (Device)
#3   asked   111607.1 fps offered   111607.1 sent    111607 recv     99999 loss  10.401% Loss            lo 74404.8 hi 111607.1 (Device)
#4   asked    93006.0 fps offered    93006.0 sent     93006 recv     93006 loss   0.000% Pass            lo 93006.0 hi 111607.1 (Device)
#5   asked   102306.5 fps offered   102306.5 sent    102307 recv    100000 loss   2.255% Loss            lo 93006.0 hi 102306.5 (Device)
#6   asked    97656.3 fps offered    97656.3 sent     97656 recv     97656 loss   0.000% Pass            lo 97656.3 hi 102306.5 (Device)
#7   asked    99981.4 fps offered    99981.4 sent     99981 recv     99981 loss   0.000% Pass            lo 99981.4 hi 102306.5 (Device)
#8   asked   101144.0 fps offered   101144.0 sent    101144 recv    100000 loss   1.131% Loss            lo 99981.4 hi 101144.0 (Device)
#9   asked   100562.7 fps offered   100562.7 sent    100563 recv    100000 loss   0.560% Loss            lo 99981.4 hi 100562.7 (Device)
";
        assert_eq!(p.trace_text(), expected, "\n{}", p.trace_text());
    }

    #[test]
    fn a_dut_faster_than_the_link_passes_at_line_rate_in_one_trial() {
        let dut = SimDut::new(1e9, 0);
        let mut p = Procedure::new(
            common(LINE_64),
            Throughput::new(ThroughputConfig::default()),
        );
        run_to_end(&mut p, |s| SimGenerator::unlimited().play(&dut, s));
        let r = p.output();
        assert_eq!(r.throughput_fps, Some(LINE_64));
        assert_eq!(r.limited_by, Some(Limit::LineRate));
        assert_eq!(p.trace().len(), 1);
    }

    #[test]
    fn a_generator_below_the_dut_is_reported_as_a_generator_limit_not_as_loss() {
        // DUT forwards 120 k fps; the generator tops out at 90 k fps.
        let dut = SimDut::new(120_000.0, 0);
        let gen = SimGenerator::ceiling(90_000.0);
        let mut p = Procedure::new(
            common(LINE_64),
            Throughput::new(ThroughputConfig::default()),
        );
        run_to_end(&mut p, |s| gen.play(&dut, s));
        let r = p.output();
        assert_eq!(r.limited_by, Some(Limit::Generator), "{}", p.trace_text());
        let t = r.throughput_fps.unwrap();
        assert!(t <= 90_000.0 && t > 90_000.0 - r.resolution_fps, "{t}");
        // No trial is ever judged a DUT loss: the DUT never lost a frame.
        assert!(p
            .trace()
            .iter()
            .all(|s| s.verdict != super::super::Verdict::Loss));
        assert!(p
            .trace()
            .iter()
            .any(|s| s.verdict == super::super::Verdict::GeneratorLimit));
    }

    #[test]
    fn receiver_drops_make_a_trial_invalid_not_lossy() {
        // The receiver overflows above 60 k fps; the DUT is perfect.
        let dut = SimDut::new(1e9, 0);
        let mut p = Procedure::new(
            common(LINE_64),
            Throughput::new(ThroughputConfig::default()),
        );
        run_to_end(&mut p, |s| {
            let mut o = SimGenerator::unlimited().play(&dut, s);
            if s.fps > 60_000.0 {
                o.receiver_drops = 10;
                o.received_frames -= 10;
            }
            o
        });
        let r = p.output();
        assert_eq!(r.limited_by, Some(Limit::Generator), "{}", p.trace_text());
        let t = r.throughput_fps.unwrap();
        assert!(t <= 60_000.0 && t > 60_000.0 - r.resolution_fps, "{t}");
        assert!(p
            .trace()
            .iter()
            .all(|s| s.verdict != super::super::Verdict::Loss));
    }

    #[test]
    fn a_measured_ceiling_starts_the_search_at_the_ceiling() {
        let dut = SimDut::new(1e9, 0);
        let gen = SimGenerator::ceiling(50_000.0);
        let cfg = ThroughputConfig {
            generator_ceiling_fps: Some(50_000.0),
            ..Default::default()
        };
        let mut p = Procedure::new(common(LINE_64), Throughput::new(cfg));
        run_to_end(&mut p, |s| gen.play(&dut, s));
        let r = p.output();
        assert_eq!(r.throughput_fps, Some(50_000.0));
        assert_eq!(r.limited_by, Some(Limit::Generator));
        assert_eq!(p.trace().len(), 1);
    }

    #[test]
    fn loss_tolerance_and_repeats() {
        // 1 % random-free loss above 80 k fps, capacity 100 k.
        let dut = SimDut::new(100_000.0, 0).with_loss_above(80_000.0, 0.01);
        let cfg = ThroughputConfig {
            loss_tolerance: 0.02,
            repeats: 2,
            ..Default::default()
        };
        let mut p = Procedure::new(common(LINE_64), Throughput::new(cfg));
        run_to_end(&mut p, |s| SimGenerator::unlimited().play(&dut, s));
        let r = p.output();
        assert_eq!(r.runs.len(), 2);
        let t = r.throughput_fps.unwrap();
        // With 2 % tolerance the 1 % extra loss passes, and so does a little
        // overload: loss (r - 100k)/r + ... ≤ 2 %.
        assert!(t > 100_000.0 - r.resolution_fps, "{t}");
        let zero = Procedure::new(
            common(LINE_64),
            Throughput::new(ThroughputConfig::default()),
        );
        let mut zero = zero;
        run_to_end(&mut zero, |s| SimGenerator::unlimited().play(&dut, s));
        let z = zero.output().throughput_fps.unwrap();
        assert!(z <= 80_000.0 && z > 80_000.0 - r.resolution_fps, "{z}");
    }

    #[test]
    fn a_dut_that_loses_everything_reports_zero() {
        let dut = SimDut::new(0.0, 0);
        let mut p = Procedure::new(
            common(LINE_64),
            Throughput::new(ThroughputConfig::default()),
        );
        run_to_end(&mut p, |s| SimGenerator::unlimited().play(&dut, s));
        assert_eq!(p.output().throughput_fps, Some(0.0));
        assert!(p.trace().len() < 12);
    }
}
