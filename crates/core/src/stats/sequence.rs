//! Loss, reordering and duplicate accounting from sequence numbers.
//!
//! Memory is bounded: the tracker remembers which of the last [`WINDOW`]
//! sequence numbers below the highest one seen have arrived. Rules:
//!
//! * a number above the highest so far advances the window; the numbers
//!   skipped are *missing* for now;
//! * a number below the highest, inside the window, not seen before, is
//!   *reordered* (it fills a gap);
//! * a number seen before, inside the window, is a *duplicate*;
//! * a number below the window is *late*: it counts as received and
//!   reordered, but whether it was a duplicate cannot be told (counted in
//!   `late` so the result can say so).
//!
//! Lost = expected − received unique, where expected is the highest number
//! plus one, or the count the sender reported when it is larger (trailing
//! losses are invisible to sequence numbers alone).

use serde::{Deserialize, Serialize};

/// Sequence numbers remembered below the highest one.
pub const WINDOW: u64 = 1 << 16;
const WORDS: usize = (WINDOW / 64) as usize;

/// Counts from one flow's sequence numbers.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct SeqCounts {
    /// Distinct sequence numbers received (late ones included).
    pub received_unique: u64,
    /// Expected count: highest + 1, or the sender's count when known and larger.
    pub expected: u64,
    /// Expected but never received.
    pub lost: u64,
    /// Arrived after a higher number.
    pub reordered: u64,
    /// Arrived again.
    pub duplicates: u64,
    /// Arrived more than the window behind the highest (duplicate or not unknown).
    pub late: u64,
}

/// What one arrival was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// A new number at or above the highest so far.
    InOrder,
    /// A new number below the highest (within the window).
    Reordered,
    /// More than the window below the highest: counted as new and
    /// reordered (a duplicate cannot be told).
    Late,
    /// Seen before.
    Duplicate,
}

/// The tracker of one flow.
#[derive(Debug, Clone)]
pub struct SeqTracker {
    highest: Option<u64>,
    seen: Vec<u64>,
    received_unique: u64,
    reordered: u64,
    duplicates: u64,
    late: u64,
}

impl Default for SeqTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self {
            highest: None,
            seen: vec![0; WORDS],
            received_unique: 0,
            reordered: 0,
            duplicates: 0,
            late: 0,
        }
    }

    fn bit(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    fn clear(&mut self, seq: u64) {
        let (w, m) = Self::bit(seq);
        if let Some(word) = self.seen.get_mut(w) {
            *word &= !m;
        }
    }

    /// Tests and sets the bit of `seq`; true if it was already set.
    fn mark(&mut self, seq: u64) -> bool {
        let (w, m) = Self::bit(seq);
        match self.seen.get_mut(w) {
            Some(word) => {
                let was = *word & m != 0;
                *word |= m;
                was
            }
            None => false,
        }
    }

    /// Accounts for one arrival and says what it was.
    pub fn record(&mut self, seq: u64) -> Arrival {
        match self.highest {
            None => {
                self.highest = Some(seq);
                self.mark(seq);
                self.received_unique += 1;
                Arrival::InOrder
            }
            Some(h) if seq > h => {
                if seq - h >= WINDOW {
                    self.seen.iter_mut().for_each(|w| *w = 0);
                } else {
                    for s in h + 1..seq {
                        self.clear(s);
                    }
                    self.clear(seq);
                }
                self.mark(seq);
                self.highest = Some(seq);
                self.received_unique += 1;
                Arrival::InOrder
            }
            Some(h) if h - seq >= WINDOW => {
                self.late += 1;
                self.reordered += 1;
                self.received_unique += 1;
                Arrival::Late
            }
            Some(_) => {
                if self.mark(seq) {
                    self.duplicates += 1;
                    Arrival::Duplicate
                } else {
                    self.reordered += 1;
                    self.received_unique += 1;
                    Arrival::Reordered
                }
            }
        }
    }

    /// The highest number seen.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// The counts, given the number of packets the sender reported (if known).
    pub fn counts(&self, sender_packets: Option<u64>) -> SeqCounts {
        let by_seq = self.highest.map_or(0, |h| h + 1);
        let expected = by_seq.max(sender_packets.unwrap_or(0));
        SeqCounts {
            received_unique: self.received_unique,
            expected,
            lost: expected.saturating_sub(self.received_unique),
            reordered: self.reordered,
            duplicates: self.duplicates,
            late: self.late,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seqs: &[u64], sent: Option<u64>) -> SeqCounts {
        let mut t = SeqTracker::new();
        for &s in seqs {
            t.record(s);
        }
        t.counts(sent)
    }

    #[test]
    fn in_order_is_clean() {
        let c = run(&(0..1000).collect::<Vec<_>>(), Some(1000));
        assert_eq!(c.lost + c.reordered + c.duplicates + c.late, 0);
        assert_eq!(c.received_unique, 1000);
    }

    #[test]
    fn loss_reorder_duplicate() {
        let c = run(&[0, 1, 3, 2, 2, 5, 6], Some(9));
        assert_eq!(c.expected, 9);
        assert_eq!(c.received_unique, 6);
        assert_eq!(c.lost, 3); // 4, 7, 8
        assert_eq!(c.reordered, 1);
        assert_eq!(c.duplicates, 1);
    }

    #[test]
    fn window_wraps_cleanly() {
        let mut seqs: Vec<u64> = (0..3 * WINDOW).collect();
        seqs.push(3 * WINDOW - 5); // duplicate inside the window
        seqs.push(10); // far below: late
        let c = run(&seqs, None);
        assert_eq!(c.duplicates, 1);
        assert_eq!(c.late, 1);
        // A jump far ahead forgets the window without losing count.
        let c = run(&[0, 10 * WINDOW, 10 * WINDOW - 1], None);
        assert_eq!(c.received_unique, 3);
        assert_eq!(c.lost, 10 * WINDOW + 1 - 3);
        assert_eq!(c.reordered, 1);
    }

    #[test]
    fn nothing_received() {
        let c = run(&[], Some(5));
        assert_eq!(c.lost, 5);
    }
}
