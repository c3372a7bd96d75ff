//! Pacing a sender to a rate, the one schedule every sender uses: when may
//! the next bytes go ([`Pacer`], throughput flows, in bit/s), and how many
//! frames are due ([`FrameSchedule`], the RFC 2544 generators, in frames/s).
//!
//! The schedule is absolute: byte `n` is due at `start + n × 8 / rate`, so
//! short sleeps that overshoot are made up by the following sends and the
//! long-term rate stays exact (a leaky bucket with no burst allowance beyond
//! one send). The caller passes the time; this never reads a clock.

/// Paces one flow.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate_bits_per_s: u64,
    start_ns: u64,
    sent_bytes: u64,
    max_lag_ns: u64,
}

impl Pacer {
    /// A pacer for `rate_bits_per_s` (at least 1) starting at `start_ns`.
    pub fn new(rate_bits_per_s: u64, start_ns: u64) -> Self {
        Self {
            rate_bits_per_s: rate_bits_per_s.max(1),
            start_ns,
            sent_bytes: 0,
            max_lag_ns: 0,
        }
    }

    /// When the next byte is due, ns on the caller's clock.
    pub fn due_ns(&self) -> u64 {
        let ns = u128::from(self.sent_bytes) * 8 * 1_000_000_000 / u128::from(self.rate_bits_per_s);
        self.start_ns
            .saturating_add(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// How long to wait before the next send at `now_ns` (0: send now).
    pub fn wait_ns(&mut self, now_ns: u64) -> u64 {
        let due = self.due_ns();
        if now_ns >= due {
            self.max_lag_ns = self.max_lag_ns.max(now_ns - due);
            0
        } else {
            due - now_ns
        }
    }

    /// Records `bytes` sent.
    pub fn sent(&mut self, bytes: u64) {
        self.sent_bytes += bytes;
    }

    /// The largest lag behind schedule seen at a send, ns.
    pub fn max_lag_ns(&self) -> u64 {
        self.max_lag_ns
    }

    /// The asked rate, bit/s.
    pub fn rate_bits_per_s(&self) -> u64 {
        self.rate_bits_per_s
    }
}

/// The same absolute schedule counted in frames: frame `k` (from 0) is due
/// at `k / fps` after the start, so a late wake-up is made up by sending the
/// backlog at once (the generators report the largest such catch-up burst).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameSchedule {
    /// Frames per second; `None`: as fast as possible.
    pub fps: Option<f64>,
    /// Frames in the whole run.
    pub frames: u64,
}

impl FrameSchedule {
    /// How many frames are due `elapsed_s` after the start (all of them when
    /// unpaced; never more than the run's).
    pub fn due(&self, elapsed_s: f64) -> u64 {
        match self.fps {
            None => self.frames,
            Some(f) => {
                let k = (elapsed_s.max(0.0) * f).floor();
                // f64 → u64 saturates; +1: frame 0 is due at once.
                self.frames.min((k as u64).saturating_add(1))
            }
        }
    }

    /// Seconds until frame number `sent` is due, `elapsed_s` after the start
    /// (0 when it is due already, or unpaced).
    pub fn wait_s(&self, sent: u64, elapsed_s: f64) -> f64 {
        match self.fps {
            Some(f) if f > 0.0 => (sent as f64 / f - elapsed_s).max(0.0),
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_is_absolute() {
        // 8 Mbit/s = 1 byte per µs.
        let mut p = Pacer::new(8_000_000, 1000);
        assert_eq!(p.wait_ns(1000), 0);
        p.sent(1000);
        assert_eq!(p.wait_ns(1000), 1_000_000);
        // Woken late: the lag is recorded, no wait.
        assert_eq!(p.wait_ns(1_500_000), 0);
        assert_eq!(p.max_lag_ns(), 499_000);
        p.sent(1000);
        assert_eq!(p.wait_ns(1_500_000), 501_000);
    }

    #[test]
    fn simulated_sender_hits_the_rate() {
        let rate = 100_000_000u64; // 100 Mbit/s
        let mut p = Pacer::new(rate, 0);
        let mut now = 0u64;
        let mut sent = 0u64;
        while now < 5_000_000_000 {
            let w = p.wait_ns(now);
            // A sleep that overshoots by 50 µs, like a busy VM.
            now += if w > 0 { w + 50_000 } else { 3_000 };
            if w == 0 {
                p.sent(1472);
                sent += 1472;
            }
        }
        let achieved = sent as f64 * 8.0 / 5.0;
        assert!((achieved / rate as f64 - 1.0).abs() < 0.01, "{achieved}");
    }

    #[test]
    fn frame_schedule_is_absolute() {
        let s = FrameSchedule {
            fps: Some(1000.0),
            frames: 10,
        };
        assert_eq!(s.due(0.0), 1);
        assert_eq!(s.due(0.0025), 3);
        // A late wake-up: the backlog is due at once, capped by the run.
        assert_eq!(s.due(1.0), 10);
        assert!((s.wait_s(3, 0.0025) - 0.0005).abs() < 1e-12);
        assert_eq!(s.wait_s(1, 0.5), 0.0);
        let fast = FrameSchedule {
            fps: None,
            frames: 7,
        };
        assert_eq!((fast.due(0.0), fast.wait_s(3, 0.0)), (7, 0.0));
        let huge = FrameSchedule {
            fps: Some(f64::MAX),
            frames: u64::MAX,
        };
        assert_eq!(huge.due(1.0), u64::MAX);
    }
}
