//! A mergeable log-linear histogram of durations in nanoseconds.
//!
//! Layout (HDR-histogram style): values below 256 ns have a bucket each;
//! every power-of-two range above is split into 256 equal buckets, so any
//! recorded value is known to within 1/256 (0.39 %) of itself. Minimum,
//! maximum, sum and sum of squares are kept exactly. Two histograms merge by
//! adding their buckets, so per-thread or per-interval histograms combine
//! without losing precision.

use serde::{Deserialize, Serialize};

/// Bits of sub-bucket resolution per power of two.
const SUB_BITS: u32 = 8;
/// Buckets per power of two (and the exact range at the bottom).
const SUB: u64 = 1 << SUB_BITS;

/// The bucket of `v`.
fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    // (msb - 8 + 1) full octaves above the exact range, then the sub-bucket.
    let octave = u64::from(shift) + 1;
    (octave * SUB + ((v >> shift) - SUB)) as usize
}

/// The smallest value that falls in bucket `i`, and the bucket's width.
fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, 1);
    }
    let octave = i / SUB;
    let sub = i % SUB;
    let shift = octave - 1;
    ((SUB + sub) << shift, 1 << shift)
}

/// Durations in nanoseconds, mergeable.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    min: u64,
    max: u64,
    sum: u128,
    sum_sq: f64,
}

/// What a histogram says, in nanoseconds: the columns of every latency table.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample (exact).
    pub min_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest sample (exact).
    pub max_ns: u64,
    /// Arithmetic mean (exact).
    pub mean_ns: f64,
    /// Population standard deviation (exact).
    pub stddev_ns: f64,
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one sample.
    pub fn record(&mut self, value_ns: u64) {
        self.record_n(value_ns, 1);
    }

    /// Records `n` samples of the same value.
    pub fn record_n(&mut self, value_ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        let i = index(value_ns);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += n;
        if self.count == 0 || value_ns < self.min {
            self.min = value_ns;
        }
        self.max = self.max.max(value_ns);
        self.count += n;
        self.sum += u128::from(value_ns) * u128::from(n);
        let v = value_ns as f64;
        self.sum_sq += v * v * n as f64;
    }

    /// The buckets that hold samples, in increasing order: each as
    /// (smallest value, width, count), ns.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| {
                let (lo, w) = bounds(i);
                (lo, w, c)
            })
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Self) {
        if other.count == 0 {
            return;
        }
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.min = if self.count == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.count += other.count;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Smallest sample, if any.
    pub fn min(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min)
    }

    /// Largest sample, if any.
    pub fn max(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max)
    }

    /// Mean, if any samples.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    /// Population standard deviation, if any samples.
    pub fn stddev(&self) -> Option<f64> {
        let mean = self.mean()?;
        let var = self.sum_sq / self.count as f64 - mean * mean;
        Some(var.max(0.0).sqrt())
    }

    /// The value below or at which a share `q` (0‥1) of samples lie: the
    /// sample of rank ⌈q·n⌉, reported as the middle of its bucket (exact
    /// below 256 ns, within 0.39 % above) and clamped to [min, max].
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let q = if q.is_nan() { 0.5 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (low, width) = bounds(i);
                let mid = low + (width - 1) / 2;
                return Some(mid.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// Min, percentiles, max, mean and spread; `None` when empty.
    pub fn summary(&self) -> Option<Summary> {
        Some(Summary {
            count: self.count,
            min_ns: self.min()?,
            p50_ns: self.quantile(0.50)?,
            p90_ns: self.quantile(0.90)?,
            p99_ns: self.quantile(0.99)?,
            p999_ns: self.quantile(0.999)?,
            max_ns: self.max()?,
            mean_ns: self.mean()?,
            stddev_ns: self.stddev()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_value_range() {
        let mut next = 0u64;
        for i in 0..(SUB as usize * 40) {
            let (low, width) = bounds(i);
            assert_eq!(low, next, "bucket {i}");
            assert_eq!(index(low), i);
            assert_eq!(index(low + width - 1), i);
            next = low + width;
        }
        assert!(index(u64::MAX) < 64 * SUB as usize);
        let (low, width) = bounds(index(u64::MAX));
        assert_eq!(low.checked_add(width - 1), Some(u64::MAX));
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::new();
        for v in 1..=100 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), Some(50));
        assert_eq!(h.quantile(0.9), Some(90));
        assert_eq!(h.quantile(0.99), Some(99));
        assert_eq!(h.quantile(1.0), Some(100));
        assert_eq!(h.quantile(0.0), Some(1));
        assert_eq!(h.mean(), Some(50.5));
        let sd = h.stddev().unwrap();
        assert!((sd - 28.866).abs() < 0.001, "{sd}");
    }

    #[test]
    fn large_values_within_resolution() {
        let mut h = Histogram::new();
        for v in (1..=10_000u64).map(|i| i * 1_000) {
            h.record(v);
        }
        for (q, exact) in [(0.5, 5_000_000u64), (0.99, 9_900_000), (0.999, 9_990_000)] {
            let got = h.quantile(q).unwrap();
            let err = (got as f64 - exact as f64).abs() / exact as f64;
            assert!(err <= 1.0 / 256.0, "q={q}: {got} vs {exact}");
        }
        assert_eq!(h.min(), Some(1_000));
        assert_eq!(h.max(), Some(10_000_000));
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        let mut all = Histogram::new();
        for v in 0..5_000u64 {
            let x = v * 7919 % 1_000_003;
            if v % 3 == 0 {
                a.record(x);
            } else {
                b.record(x);
            }
            all.record(x);
        }
        let mut m = Histogram::new();
        m.merge(&a);
        m.merge(&b);
        assert_eq!(m.summary(), all.summary());
        assert_eq!(m.count(), 5_000);
    }

    #[test]
    fn empty_has_no_summary() {
        let h = Histogram::new();
        assert_eq!(h.summary(), None);
        assert_eq!(h.quantile(0.5), None);
        let mut m = Histogram::new();
        m.merge(&h);
        assert_eq!(m.count(), 0);
    }

    #[test]
    fn one_sample_is_every_percentile() {
        let mut h = Histogram::new();
        h.record(123_456);
        let s = h.summary().unwrap();
        assert_eq!(
            (s.min_ns, s.p50_ns, s.p99_ns, s.max_ns),
            (123_456, 123_456, 123_456, 123_456)
        );
        assert_eq!(s.stddev_ns, 0.0);
    }
}
