//! Per-interval counters: cumulative samples in, interval records out.

use serde::{Deserialize, Serialize};

/// What one flow did during one reporting interval.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Interval {
    /// Start, ns since the flow's start (CLOCK_MONOTONIC of the measuring end).
    pub start_ns: u64,
    /// End, ns since the flow's start.
    pub end_ns: u64,
    /// Bytes in the interval.
    pub bytes: u64,
    /// Datagrams or blocks in the interval.
    pub packets: u64,
}

impl Interval {
    /// Bytes per second over the interval.
    pub fn bytes_per_s(&self) -> f64 {
        rate(self.bytes, self.end_ns.saturating_sub(self.start_ns))
    }

    /// Packets per second over the interval.
    pub fn packets_per_s(&self) -> f64 {
        rate(self.packets, self.end_ns.saturating_sub(self.start_ns))
    }
}

/// `count` per second over `ns` nanoseconds (0 for an empty span).
pub fn rate(count: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        count as f64 * 1e9 / ns as f64
    }
}

/// Turns cumulative (time, bytes, packets) samples into intervals of a
/// fixed length. The caller passes the time; this never reads a clock.
#[derive(Debug, Clone)]
pub struct IntervalSeries {
    period_ns: u64,
    next_end_ns: u64,
    last: Interval,
    done: Vec<Interval>,
}

impl IntervalSeries {
    /// A series with intervals of `period_ns` (at least 1 ms).
    pub fn new(period_ns: u64) -> Self {
        let period_ns = period_ns.max(1_000_000);
        Self {
            period_ns,
            next_end_ns: period_ns,
            last: Interval::default(),
            done: Vec::new(),
        }
    }

    /// When the current interval ends, ns since start.
    pub fn next_end_ns(&self) -> u64 {
        self.next_end_ns
    }

    /// Offers a sample; closes the current interval if `now_ns` passed its end.
    pub fn sample(&mut self, now_ns: u64, bytes: u64, packets: u64) {
        if now_ns >= self.next_end_ns {
            self.close(now_ns, bytes, packets);
            while self.next_end_ns <= now_ns {
                self.next_end_ns += self.period_ns;
            }
        }
    }

    /// Notes that nothing happened up to `now_ns`: intervals whose end
    /// passed are closed at their exact boundary (idle ones with zero
    /// counts, so a stall shows as such).
    pub fn idle(&mut self, now_ns: u64, bytes: u64, packets: u64) {
        while now_ns >= self.next_end_ns {
            let end = self.next_end_ns;
            self.close(end, bytes, packets);
            self.next_end_ns += self.period_ns;
        }
    }

    fn close(&mut self, now_ns: u64, bytes: u64, packets: u64) {
        let iv = Interval {
            start_ns: self.last.end_ns,
            end_ns: now_ns,
            bytes: bytes.saturating_sub(self.last.bytes),
            packets: packets.saturating_sub(self.last.packets),
        };
        if iv.end_ns > iv.start_ns {
            self.done.push(iv);
        }
        self.last = Interval {
            start_ns: 0,
            end_ns: now_ns,
            bytes,
            packets,
        };
    }

    /// Closes the last (possibly short) interval and returns them all.
    /// A last interval shorter than a tenth of the period is folded into
    /// the one before, so a few stray microseconds do not show as a rate.
    ///
    /// `now_ns` is the flow's end (its last byte): intervals that idle
    /// ticks closed after it are dropped, and the one holding it ends there.
    pub fn finish(mut self, now_ns: u64, bytes: u64, packets: u64) -> Vec<Interval> {
        while self.done.last().is_some_and(|l| l.start_ns >= now_ns) {
            self.done.pop();
        }
        if let Some(l) = self.done.last_mut() {
            if l.end_ns > now_ns {
                l.end_ns = now_ns;
            }
        }
        if self.last.end_ns > now_ns {
            self.last.end_ns = now_ns;
        }
        self.close(now_ns, bytes, packets);
        if self.done.len() >= 2 {
            let n = self.done.len();
            let last = self.done[n - 1];
            if last.end_ns - last.start_ns < self.period_ns / 10 {
                self.done.pop();
                let prev = &mut self.done[n - 2];
                prev.end_ns = last.end_ns;
                prev.bytes += last.bytes;
                prev.packets += last.packets;
            }
        }
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_time_closes_at_the_boundary() {
        let mut s = IntervalSeries::new(1_000_000_000);
        s.sample(900_000_000, 1000, 10);
        s.idle(2_500_000_000, 1000, 10);
        let v = s.finish(2_600_000_000, 1000, 10);
        assert_eq!(
            v[0],
            Interval {
                start_ns: 0,
                end_ns: 1_000_000_000,
                bytes: 1000,
                packets: 10
            }
        );
        assert_eq!(
            v[1],
            Interval {
                start_ns: 1_000_000_000,
                end_ns: 2_000_000_000,
                bytes: 0,
                packets: 0
            }
        );
        assert_eq!(v.len(), 3);
    }

    #[test]
    fn intervals_partition_the_total() {
        let mut s = IntervalSeries::new(1_000_000_000);
        let mut t = 0;
        let mut bytes = 0;
        while t < 3_500_000_000u64 {
            t += 10_000_000;
            bytes += 1000;
            s.sample(t, bytes, bytes / 100);
        }
        let v = s.finish(t, bytes, bytes / 100);
        assert_eq!(v.len(), 4);
        assert_eq!(v[3].end_ns, t);
        assert_eq!(v.iter().map(|i| i.bytes).sum::<u64>(), bytes);
        assert_eq!(v[0].start_ns, 0);
        assert_eq!(v[1].start_ns, v[0].end_ns);
        assert!((v[0].bytes_per_s() - 100_000.0).abs() < 1.0);
        // A stray tail is folded into the last interval.
        let mut s = IntervalSeries::new(1_000_000_000);
        s.sample(1_000_000_000, 100, 1);
        let v = s.finish(1_000_000_100, 101, 2);
        assert_eq!(v.len(), 1);
        assert_eq!(
            (v[0].bytes, v[0].packets, v[0].end_ns),
            (101, 2, 1_000_000_100)
        );
    }
}
