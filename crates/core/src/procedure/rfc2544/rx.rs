//! Receive-side accounting of test frames, per stream: distinct frames,
//! duplicates, reordering and latency. Sans-IO: the receiver feeds it the
//! parsed header and the receive time; it never reads a clock.
//!
//! * A frame is a **duplicate** when its sequence number was seen before in
//!   the stream (a bitmap of seen numbers, grown on demand up to the
//!   stream's expected length).
//! * A frame is **reordered** when it is new but arrives after a frame with a
//!   higher sequence number (RFC 4737's "reordered" singleton test, without
//!   the extent).
//! * Latency is `rx_ns − tx_ns` when both come from one clock; a negative
//!   difference (clock went backwards) is counted, not recorded.

use std::collections::BTreeMap;

use crate::stats::histogram::Histogram;

/// Counters of one stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamCounter {
    seen: Vec<u64>,
    limit: u64,
    /// Distinct frames received.
    pub received: u64,
    /// Frames received again.
    pub duplicates: u64,
    /// New frames that arrived after a higher-numbered one.
    pub reordered: u64,
    /// Frames whose sequence number is beyond the expected length.
    pub out_of_range: u64,
    /// Frames whose receive time was before their transmit time.
    pub negative_latency: u64,
    /// Highest sequence number seen.
    pub highest: Option<u32>,
    /// One-way latency, ns.
    pub latency: Histogram,
}

impl StreamCounter {
    /// A stream that will carry at most `expected` frames (numbered from 0).
    pub fn new(expected: u64) -> Self {
        Self {
            limit: expected,
            ..Self::default()
        }
    }

    /// Records one frame.
    pub fn record(&mut self, seq: u32, tx_ns: u64, rx_ns: Option<u64>) {
        let s = u64::from(seq);
        if s >= self.limit {
            self.out_of_range += 1;
            return;
        }
        let (word, bit) = ((s / 64) as usize, s % 64);
        if word >= self.seen.len() {
            self.seen.resize(word + 1, 0);
        }
        if self.seen[word] & (1 << bit) != 0 {
            self.duplicates += 1;
            return;
        }
        self.seen[word] |= 1 << bit;
        self.received += 1;
        match self.highest {
            Some(h) if seq < h => self.reordered += 1,
            _ => self.highest = Some(seq),
        }
        if let Some(rx) = rx_ns {
            match rx.checked_sub(tx_ns) {
                Some(d) => self.latency.record(d),
                None => self.negative_latency += 1,
            }
        }
    }
}

/// Counters of every stream, and of frames that were not test frames.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RxTally {
    streams: BTreeMap<u16, StreamCounter>,
    /// Frames that parsed as no test frame (ARP, IPv6 ND, other traffic).
    pub other_frames: u64,
}

impl RxTally {
    /// An empty tally.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts counting `stream` (expected length `expected`), forgetting
    /// anything counted for it before.
    pub fn open(&mut self, stream: u16, expected: u64) {
        self.streams.insert(stream, StreamCounter::new(expected));
    }

    /// Records a test frame; frames of streams not opened count as other.
    pub fn record(&mut self, stream: u16, seq: u32, tx_ns: u64, rx_ns: Option<u64>) {
        match self.streams.get_mut(&stream) {
            Some(s) => s.record(seq, tx_ns, rx_ns),
            None => self.other_frames += 1,
        }
    }

    /// Stops counting `stream` and returns its counters.
    pub fn close(&mut self, stream: u16) -> Option<StreamCounter> {
        self.streams.remove(&stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_reorder_duplicates_latency() {
        let mut t = RxTally::new();
        t.open(1, 10);
        for (seq, rx) in [
            (0, 100),
            (1, 110),
            (3, 130),
            (2, 140),
            (3, 150),
            (9, 190),
            (12, 1),
        ] {
            t.record(1, seq, 50, Some(rx));
        }
        t.record(2, 0, 0, None);
        let s = t.close(1).unwrap();
        assert_eq!(s.received, 5); // 0 1 3 2 9
        assert_eq!(s.duplicates, 1); // 3 again
        assert_eq!(s.reordered, 1); // 2 after 3
        assert_eq!(s.out_of_range, 1); // 12
        assert_eq!(s.highest, Some(9));
        assert_eq!(s.latency.count(), 5);
        assert_eq!(s.latency.min(), Some(50));
        assert_eq!(t.other_frames, 1);
        assert!(t.close(1).is_none());
    }

    #[test]
    fn clock_going_backwards_is_counted_not_recorded() {
        let mut s = StreamCounter::new(2);
        s.record(0, 100, Some(50));
        assert_eq!(
            (s.negative_latency, s.latency.count(), s.received),
            (1, 0, 1)
        );
    }
}
