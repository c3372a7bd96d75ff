//! Frame loss rate, RFC 2544 section 26.3: trials at 100 % of the maximum
//! rate, then 90 %, 80 % … (steps of at most 10 %), "until there are two
//! successive trials in which no frames are lost". Loss is
//! `(input_count − output_count) × 100 / input_count`.
//!
//! A step the generator cannot offer is kept in the curve, flagged, with no
//! loss figure: it is never counted as DUT loss, nor as a loss-free step.

use serde::{Deserialize, Serialize};

use super::{Common, Plan, TrialOutcome, TrialSpec};

/// One point of the loss curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LossPoint {
    /// Asked rate, percent of line rate.
    pub rate_pct: f64,
    /// Asked rate, frames/s.
    pub asked_fps: f64,
    /// Rate the generator offered, frames/s.
    pub offered_fps: f64,
    /// Frames sent.
    pub sent_frames: u64,
    /// Frames received.
    pub received_frames: u64,
    /// Loss, percent (`None` when the generator could not offer the rate).
    pub loss_pct: Option<f64>,
    /// The generator could not offer the rate.
    pub generator_limited: bool,
}

/// The loss curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LossResult {
    /// Points, from the highest rate down.
    pub points: Vec<LossPoint>,
}

/// The frame-loss plan.
#[derive(Debug, Clone)]
pub struct FrameLoss {
    step_pct: f64,
    pct: f64,
    clean_in_a_row: u32,
    points: Vec<LossPoint>,
}

impl FrameLoss {
    /// Steps of `step_pct` percent of line rate (RFC 2544: at most 10).
    pub fn new(step_pct: f64) -> Self {
        Self {
            step_pct: step_pct.clamp(0.1, 100.0),
            pct: 100.0,
            clean_in_a_row: 0,
            points: Vec::new(),
        }
    }

    fn advance(&mut self, c: &Common) -> Option<TrialSpec> {
        if self.clean_in_a_row >= 2 {
            return None;
        }
        self.pct -= self.step_pct;
        (self.pct > 1e-9).then(|| c.rate_trial(c.line_rate_fps * self.pct / 100.0))
    }

    fn point(&self, spec: &TrialSpec, o: &TrialOutcome, limited: bool) -> LossPoint {
        LossPoint {
            rate_pct: self.pct,
            asked_fps: spec.fps,
            offered_fps: o.offered_fps,
            sent_frames: o.sent_frames,
            received_frames: o.received_frames,
            loss_pct: (!limited).then(|| o.loss_ratio() * 100.0),
            generator_limited: limited,
        }
    }
}

impl Plan for FrameLoss {
    type Output = LossResult;

    fn first(&mut self, c: &Common) -> Option<TrialSpec> {
        Some(c.rate_trial(c.line_rate_fps))
    }

    fn passes(&self, o: &TrialOutcome) -> bool {
        o.lost_frames() == 0
    }

    fn on_valid(&mut self, c: &Common, spec: &TrialSpec, o: &TrialOutcome) -> Option<TrialSpec> {
        self.points.push(self.point(spec, o, false));
        if self.passes(o) {
            self.clean_in_a_row += 1;
        } else {
            self.clean_in_a_row = 0;
        }
        self.advance(c)
    }

    fn on_generator_limit(
        &mut self,
        c: &Common,
        spec: &TrialSpec,
        o: &TrialOutcome,
    ) -> Option<TrialSpec> {
        self.points.push(self.point(spec, o, true));
        self.clean_in_a_row = 0;
        self.advance(c)
    }

    fn describe(&self) -> String {
        if self.clean_in_a_row >= 2 || self.pct <= 1e-9 {
            format!("done, {} loss-free in a row", self.clean_in_a_row)
        } else {
            format!(
                "next {:.0}%, {} loss-free in a row",
                self.pct, self.clean_in_a_row
            )
        }
    }

    fn output(&self, _c: &Common) -> LossResult {
        LossResult {
            points: self.points.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::sim::{SimDut, SimGenerator};
    use super::super::{run_to_end, Procedure};
    use super::*;
    use std::time::Duration;

    #[test]
    fn curve_stops_after_two_clean_steps() {
        let mut c = Common::new(64, 100_000.0);
        c.trial = Duration::from_secs(1);
        let dut = SimDut::new(75_000.0, 0);
        let mut p = Procedure::new(c, FrameLoss::new(10.0));
        run_to_end(&mut p, |s| SimGenerator::unlimited().play(&dut, s));
        let r = p.output();
        let curve: Vec<(f64, f64)> = r
            .points
            .iter()
            .map(|p| (p.rate_pct.round(), p.loss_pct.unwrap()))
            .collect();
        // 100 %: 25 % lost; 90 %: 1 - 75/90; 80 %: 1 - 75/80; 70 %, 60 %: none.
        assert_eq!(curve.len(), 5, "{curve:?}");
        assert!((curve[0].1 - 25.0).abs() < 1e-9);
        assert!((curve[1].1 - 100.0 * (1.0 - 75.0 / 90.0)).abs() < 1e-3);
        assert!((curve[2].1 - 6.25).abs() < 1e-9);
        assert_eq!((curve[3], curve[4]), ((70.0, 0.0), (60.0, 0.0)));
    }

    #[test]
    fn generator_limited_steps_are_flagged_not_lossy() {
        let mut c = Common::new(64, 100_000.0);
        c.trial = Duration::from_secs(1);
        let dut = SimDut::new(1e9, 0);
        let mut p = Procedure::new(c, FrameLoss::new(10.0));
        run_to_end(&mut p, |s| SimGenerator::ceiling(85_000.0).play(&dut, s));
        let r = p.output();
        let flags: Vec<bool> = r.points.iter().map(|p| p.generator_limited).collect();
        assert_eq!(flags, vec![true, true, false, false]);
        assert_eq!(r.points[0].loss_pct, None);
    }
}
