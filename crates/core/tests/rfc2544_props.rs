//! Property tests of the RFC 2544 procedures against random simulated
//! devices and generators: the result is always where the simulation says it
//! must be, and a generator limit is never reported as device loss.

use std::time::Duration;

use linerate_core::procedure::rfc2544::b2b::{BackToBack, BackToBackConfig};
use linerate_core::procedure::rfc2544::loss::FrameLoss;
use linerate_core::procedure::rfc2544::sim::{SimDut, SimGenerator};
use linerate_core::procedure::rfc2544::throughput::{Throughput, ThroughputConfig};
use linerate_core::procedure::rfc2544::{run_to_end, Common, Limit, Procedure, Verdict};
use proptest::prelude::*;

fn common(line: f64) -> Common {
    let mut c = Common::new(64, line);
    c.trial = Duration::from_secs(2);
    c.settle = Duration::ZERO;
    c
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Throughput is within one resolution below min(capacity, generator,
    /// line), and names the right limit.
    #[test]
    fn throughput_lands_within_the_resolution(
        line in 1_000.0f64..2_000_000.0,
        cap_share in 0.0f64..1.5,
        gen_share in 0.05f64..1.5,
        res_pct in 0.1f64..5.0,
    ) {
        let cap = line * cap_share;
        let gen = line * gen_share;
        let dut = SimDut::new(cap, 0);
        let g = SimGenerator::ceiling(gen);
        let cfg = ThroughputConfig { resolution: res_pct / 100.0, ..Default::default() };
        let mut p = Procedure::new(common(line), Throughput::new(cfg));
        run_to_end(&mut p, |s| g.play(&dut, s));
        prop_assert!(p.is_done());
        let r = p.output();
        let t = r.throughput_fps.unwrap();
        let truth = cap.min(gen).min(line);
        // One resolution, plus the generator tolerance (1 %) the self-check
        // grants, plus one frame per trial of rounding.
        let slack = r.resolution_fps + 0.011 * truth + 2.0;
        prop_assert!(t <= truth + 1.0, "t {} truth {}\n{}", t, truth, p.trace_text());
        prop_assert!(t >= truth - slack, "t {} truth {}\n{}", t, truth, p.trace_text());
        // A trial is judged Loss only when the device really dropped frames.
        for s in p.trace() {
            if s.verdict == Verdict::Loss {
                prop_assert!(s.received_frames < s.sent_frames);
            }
        }
        match r.limited_by.unwrap() {
            Limit::LineRate => prop_assert!(cap >= line * 0.99 && gen >= line * 0.99),
            Limit::Device => prop_assert!(cap < line && cap <= gen * 1.011, "{}", p.trace_text()),
            Limit::Generator => prop_assert!(gen < line && gen <= cap * 1.011 + r.resolution_fps, "{}", p.trace_text()),
        }
    }

    /// The loss curve steps down by the step until two clean steps, and each
    /// point's loss is the simulation's.
    #[test]
    fn loss_curve_matches_the_simulation(
        line in 1_000.0f64..1_000_000.0,
        cap_share in 0.05f64..1.2,
        step in 1.0f64..10.0,
    ) {
        let cap = line * cap_share;
        let dut = SimDut::new(cap, 0);
        let mut p = Procedure::new(common(line), FrameLoss::new(step));
        run_to_end(&mut p, |s| SimGenerator::unlimited().play(&dut, s));
        let r = p.output();
        let n = r.points.len();
        prop_assert!(n >= 1);
        for (i, pt) in r.points.iter().enumerate() {
            prop_assert!((pt.rate_pct - (100.0 - step * i as f64)).abs() < 1e-6);
            let expect = if pt.asked_fps <= cap { 0.0 } else { 1.0 - cap / pt.asked_fps };
            prop_assert!((pt.loss_pct.unwrap() / 100.0 - expect).abs() < 1e-3 + 2.0 / pt.sent_frames as f64);
        }
        // Ends after two loss-free steps, or when the rate reaches 0.
        let clean_tail = r.points.iter().rev().take(2).all(|p| p.loss_pct == Some(0.0));
        prop_assert!(clean_tail || r.points[n - 1].rate_pct - step <= 1e-9);
    }

    /// Back-to-back equals buffer / (1 - capacity/line) within the
    /// resolution, or the longest burst when the device keeps up.
    #[test]
    fn back_to_back_matches_the_buffer(
        line in 10_000.0f64..1_000_000.0,
        cap_share in 0.1f64..0.95,
        buffer in 0u64..50_000,
    ) {
        let cap = line * cap_share;
        let dut = SimDut::new(cap, buffer);
        let cfg = BackToBackConfig::new(line, 1.0, 1);
        let mut p = Procedure::new(common(line), BackToBack::new(cfg));
        run_to_end(&mut p, |s| SimGenerator::unlimited().play(&dut, s));
        let r = p.output();
        let got = r.runs[0].frames as f64;
        let truth = (buffer as f64 / (1.0 - cap_share)).min(cfg.max_frames as f64);
        prop_assert!((got - truth).abs() <= cfg.resolution_frames as f64 + 2.0, "got {} truth {}", got, truth);
    }
}
