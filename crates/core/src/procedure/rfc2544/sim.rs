//! A simulated device under test and a simulated generator, deterministic, so
//! the procedures have exact expected results.
//!
//! The DUT forwards at most `capacity_fps` and holds `buffer_frames` in its
//! queue: in a trial of `n` frames offered at `r` over `t = n / r` seconds it
//! forwards `min(n, capacity × t + buffer)` frames, then (optionally) loses a
//! fixed fraction of them when the offered rate is above a threshold (a loss
//! curve). Latency is a constant plus the queueing delay of a full buffer
//! when the DUT is overloaded.
//!
//! So the zero-loss throughput is `capacity` (for long trials), and the
//! longest loss-free burst at line rate `L` is
//! `floor(buffer / (1 − capacity / L))` frames (RFC 2544 section 26.4).

use crate::stats::histogram::Histogram;

use super::{TrialOutcome, TrialSpec};

/// A device with a forwarding capacity, a buffer and an optional loss curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimDut {
    /// Frames per second it forwards at most.
    pub capacity_fps: f64,
    /// Frames it queues beyond that.
    pub buffer_frames: u64,
    /// Above this offered rate (fps), it loses `.1` of what it forwards.
    pub loss_above: Option<(f64, f64)>,
    /// One-way latency when not queueing, ns.
    pub latency_ns: u64,
}

impl SimDut {
    /// A DUT with this capacity and buffer, 10 µs latency, no extra loss.
    pub fn new(capacity_fps: f64, buffer_frames: u64) -> Self {
        Self {
            capacity_fps,
            buffer_frames,
            loss_above: None,
            latency_ns: 10_000,
        }
    }

    /// Adds a loss of `fraction` of forwarded frames above `fps` offered.
    pub fn with_loss_above(mut self, fps: f64, fraction: f64) -> Self {
        self.loss_above = Some((fps, fraction));
        self
    }
}

/// A generator that can offer at most `ceiling_fps`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimGenerator {
    /// Highest rate it can offer (`f64::INFINITY`: any).
    pub ceiling_fps: f64,
}

impl SimGenerator {
    /// A generator with no limit.
    pub fn unlimited() -> Self {
        Self {
            ceiling_fps: f64::INFINITY,
        }
    }

    /// A generator that tops out at `fps`.
    pub fn ceiling(fps: f64) -> Self {
        Self { ceiling_fps: fps }
    }

    /// Plays one trial through `dut`.
    pub fn play(&self, dut: &SimDut, spec: &TrialSpec) -> TrialOutcome {
        let t = spec.duration().as_secs_f64();
        let offered = spec.fps.min(self.ceiling_fps);
        // A slow generator sends for the same time, so fewer frames.
        let sent = if offered < spec.fps {
            (offered * t).floor() as u64
        } else {
            spec.frames
        };
        let fwd_cap = (dut.capacity_fps * t).floor() as u64 + dut.buffer_frames;
        let mut received = sent.min(fwd_cap);
        if let Some((above, frac)) = dut.loss_above {
            if offered > above {
                received -= (received as f64 * frac).ceil() as u64;
            }
        }
        let mut latency = Histogram::new();
        let queueing = if offered > dut.capacity_fps && dut.capacity_fps > 0.0 {
            (dut.buffer_frames as f64 / dut.capacity_fps * 1e9) as u64
        } else {
            0
        };
        if received > 0 {
            latency.record_n(dut.latency_ns + queueing, received);
        }
        TrialOutcome {
            sent_frames: sent,
            received_frames: received,
            offered_fps: offered,
            duplicates: 0,
            reordered: 0,
            receiver_drops: 0,
            latency: Some(latency),
        }
    }
}
