//! Receive-side accounting of test frames, per stream: distinct frames,
//! duplicates, reordering and latency. Sans-IO: the receiver feeds it the
//! parsed header and the receive time; it never reads a clock.
//!
//! Sequence accounting is [`crate::stats::sequence::SeqTracker`]'s, the one
//! definition linerate has (RFC 4737's "reordered" singleton test, without
//! the extent):
//!
//! * a frame is a **duplicate** when its sequence number was seen before in
//!   the stream (within the tracker's window of [`WINDOW`](crate::stats::sequence::WINDOW) numbers below the
//!   highest one);
//! * a frame is **reordered** when it is new but arrives after a frame with
//!   a higher sequence number; one more than the window behind is counted
//!   as received, reordered and **late** (whether it was a duplicate cannot
//!   be told);
//! * a sequence number at or beyond the stream's expected length is **out
//!   of range** and not counted as received;
//! * latency is `rx_ns − tx_ns` of each new frame when both come from one
//!   clock; a negative difference (clock went backwards) is counted, not
//!   recorded.

use std::collections::BTreeMap;

use crate::stats::histogram::Histogram;
use crate::stats::sequence::{Arrival, SeqCounts, SeqTracker};

/// Counters of one stream.
#[derive(Debug, Clone, Default)]
pub struct StreamCounter {
    /// Received, duplicates, reordered and late frames (one definition:
    /// [`SeqTracker`]'s).
    seq: SeqTracker,
    limit: u64,
    /// Frames whose sequence number is beyond the expected length.
    pub out_of_range: u64,
    /// Frames whose receive time was before their transmit time.
    pub negative_latency: u64,
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
        if u64::from(seq) >= self.limit {
            self.out_of_range += 1;
            return;
        }
        if self.seq.record(u64::from(seq)) == Arrival::Duplicate {
            return;
        }
        if let Some(rx) = rx_ns {
            match rx.checked_sub(tx_ns) {
                Some(d) => self.latency.record(d),
                None => self.negative_latency += 1,
            }
        }
    }
}

impl StreamCounter {
    /// The sequence counts: distinct frames received, duplicates, new frames
    /// that arrived after a higher-numbered one, and late ones (more than the
    /// window behind the highest: counted as received and reordered).
    pub fn counts(&self) -> SeqCounts {
        self.seq.counts(None)
    }

    /// Highest sequence number seen.
    pub fn highest(&self) -> Option<u32> {
        self.seq.highest().and_then(|h| u32::try_from(h).ok())
    }
}

/// Counters of every stream, and of frames that were not test frames.
#[derive(Debug, Clone, Default)]
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
    use crate::stats::sequence::WINDOW;

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
        let c = s.counts();
        assert_eq!(c.received_unique, 5); // 0 1 3 2 9
        assert_eq!(c.duplicates, 1); // 3 again
        assert_eq!(c.reordered, 1); // 2 after 3
        assert_eq!(s.out_of_range, 1); // 12
        assert_eq!(s.highest(), Some(9));
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
            (
                s.negative_latency,
                s.latency.count(),
                s.counts().received_unique
            ),
            (1, 0, 1)
        );
    }

    #[test]
    fn one_definition_of_reordered() {
        // The same arrivals through the stream counter and the sequence
        // tracker give the same counts: reordered = new, after a higher one.
        let arrivals = [0u32, 2, 1, 5, 3, 4, 4, 9, 6, 0];
        let mut s = StreamCounter::new(10);
        let mut t = SeqTracker::new();
        for &q in &arrivals {
            s.record(q, 0, None);
            t.record(u64::from(q));
        }
        let c = t.counts(None);
        let sc = s.counts();
        assert_eq!((sc.received_unique, sc.duplicates, sc.reordered), (8, 2, 4));
        assert_eq!(
            (c.received_unique, c.duplicates, c.reordered),
            (sc.received_unique, sc.duplicates, sc.reordered)
        );
        // A frame more than the window behind: received, reordered, late.
        let mut s = StreamCounter::new(2 * WINDOW);
        s.record((WINDOW + 10) as u32, 0, Some(5));
        s.record(1, 0, Some(5));
        let sc = s.counts();
        assert_eq!((sc.received_unique, sc.reordered, sc.late), (2, 1, 1));
        assert_eq!(s.latency.count(), 2);
    }
}
