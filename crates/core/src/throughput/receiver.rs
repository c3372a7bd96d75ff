//! The receiving end's accounting of one flow: datagrams (UDP) or a byte
//! stream cut into fixed-size blocks (TCP), each starting with a probe
//! header, the rest the flow's fill pattern.
//!
//! Verification is full for every payload byte that reaches user space: the
//! bytes are compared with the flow's pattern. With MSG_TRUNC only headers
//! are seen ([`FlowReceiver::headers_only`], [`FlowReceiver::skip_payload`],
//! [`FlowReceiver::datagram_truncated`]).
//! A sampling receiver ([`FlowReceiver::sampling`]) checks every header and
//! compares the payload of one block or datagram in N, chosen pseudo-randomly per flow.

use crate::stats::sequence::SeqTracker;
use crate::stats::splitmix::SplitMix64;
use crate::throughput::model::{RecvCounts, Verification};
use crate::wire::probe::{Packet, Pattern, Repr, HEADER_LEN};

/// Accounting of one received flow.
#[derive(Debug, Clone)]
pub struct FlowReceiver {
    session: u32,
    flow: u16,
    size: usize,
    pattern: Pattern,
    seq: SeqTracker,
    counts: RecvCounts,
    bytes: u64,
    packets: u64,
    // TCP block state.
    pos: usize,
    head: [u8; HEADER_LEN],
    block_ok: bool,
    /// The current block's payload is compared.
    compare: bool,
    payloads: Payloads,
}

/// Which payloads a receiver compares with the pattern.
#[derive(Debug, Clone)]
enum Payloads {
    /// Every one.
    Every,
    /// Each with probability 1/N, from a SplitMix64 stream seeded per
    /// flow: no block position is exempt, so a corruption that recurs is
    /// found within about N occurrences. A draw below `below`
    /// (2^64 / N) picks: one comparison, no division, per payload.
    Sampled { below: u64, rng: SplitMix64 },
    /// None: the payload never reaches user space (MSG_TRUNC).
    Unseen,
}

impl FlowReceiver {
    /// A receiver for flow `flow` of `session` whose datagrams or blocks are
    /// `size` bytes (header included; at least [`HEADER_LEN`]).
    pub fn new(session: u32, flow: u16, size: usize) -> Self {
        let size = size.max(HEADER_LEN);
        Self {
            session,
            flow,
            size,
            pattern: Pattern::new(session, flow, size - HEADER_LEN),
            seq: SeqTracker::new(),
            counts: RecvCounts::default(),
            bytes: 0,
            packets: 0,
            pos: 0,
            head: [0; HEADER_LEN],
            block_ok: true,
            compare: true,
            payloads: Payloads::Every,
        }
    }

    /// Compares the payload of one block or datagram in `one_in`, chosen
    /// pseudo-randomly from a stream seeded with the session and flow ids
    /// (every header is still checked); 0 and 1: every payload.
    pub fn sampling(mut self, one_in: u32) -> Self {
        let seed = (u64::from(self.session) << 16 | u64::from(self.flow)) ^ 0x7361_6d70_6c65_7321;
        self.payloads = if one_in > 1 {
            Payloads::Sampled {
                below: u64::MAX / u64::from(one_in),
                rng: SplitMix64::new(seed),
            }
        } else {
            Payloads::Every
        };
        self
    }

    /// Compares no payload, counts none as verified: the receive path
    /// discards payloads unseen (MSG_TRUNC) and hands over headers only.
    pub fn headers_only(mut self) -> Self {
        self.payloads = Payloads::Unseen;
        self
    }

    /// How much of each payload this receiver compares.
    pub fn verification(&self) -> Verification {
        match self.payloads {
            Payloads::Every => Verification::Full,
            Payloads::Sampled { .. } => Verification::Sampled,
            Payloads::Unseen => Verification::HeadersOnly,
        }
    }

    /// Whether the next payload is compared.
    fn pick(&mut self) -> bool {
        match &mut self.payloads {
            Payloads::Every => true,
            Payloads::Sampled { below, rng } => rng.next_u64() < *below,
            Payloads::Unseen => false,
        }
    }

    /// Bytes received so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Datagrams or whole blocks received so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Final counts, given the sender's packet count when it told it.
    pub fn counts(&self, sender_packets: Option<u64>) -> RecvCounts {
        RecvCounts {
            seq: self.seq.counts(sender_packets),
            ..self.counts
        }
    }

    /// Checks a header; false (and counted) when it is not ours.
    fn header(&mut self, bytes: &[u8]) -> Option<Repr> {
        match Repr::parse_bytes(bytes) {
            Ok(r) if r.session == self.session && r.flow == self.flow => Some(r),
            Ok(_) => {
                self.counts.foreign += 1;
                None
            }
            Err(_) => {
                self.counts.corrupt += 1;
                None
            }
        }
    }

    /// One whole UDP datagram as received.
    pub fn datagram(&mut self, d: &[u8]) {
        self.bytes += d.len() as u64;
        let Some(r) = self.header(d) else { return };
        self.packets += 1;
        if d.len() != self.size {
            self.counts.bad_length += 1;
        }
        let compare = self.pick();
        let ok =
            !compare || Packet::new_checked(d).is_ok_and(|p| self.pattern.matches(0, p.payload()));
        if ok {
            self.counts.payloads_verified += u64::from(compare);
            self.seq.record(r.seq);
        } else {
            self.counts.corrupt += 1;
        }
    }

    /// A UDP datagram of `full_len` bytes of which only `head` reached user
    /// space (MSG_TRUNC): header checked, payload not verified.
    pub fn datagram_truncated(&mut self, head: &[u8], full_len: usize) {
        self.bytes += full_len as u64;
        let Some(r) = self.header(head) else { return };
        self.packets += 1;
        if full_len != self.size {
            self.counts.bad_length += 1;
        }
        self.seq.record(r.seq);
    }

    /// Payload bytes left in the current TCP block (0: a header comes next).
    pub fn payload_remaining(&self) -> usize {
        if self.pos < HEADER_LEN {
            0
        } else {
            self.size - self.pos
        }
    }

    /// Header bytes still missing before the current block's payload.
    pub fn header_remaining(&self) -> usize {
        HEADER_LEN.saturating_sub(self.pos)
    }

    fn block_done(&mut self) {
        self.packets += 1;
        if self.compare && self.block_ok {
            self.counts.payloads_verified += 1;
        }
        if self.block_ok {
            if let Some(r) = Repr::parse_bytes(&self.head)
                .ok()
                .filter(|r| r.session == self.session && r.flow == self.flow)
            {
                self.seq.record(r.seq);
            }
        } else {
            self.counts.corrupt += 1;
        }
        self.pos = 0;
        self.block_ok = true;
    }

    /// Bytes of a TCP stream, in any chunking.
    pub fn stream(&mut self, mut data: &[u8]) {
        self.bytes += data.len() as u64;
        while !data.is_empty() {
            if self.pos < HEADER_LEN {
                let n = (HEADER_LEN - self.pos).min(data.len());
                self.head[self.pos..self.pos + n].copy_from_slice(&data[..n]);
                self.pos += n;
                data = &data[n..];
                if self.pos == HEADER_LEN {
                    let valid = Repr::parse_bytes(&self.head)
                        .is_ok_and(|r| r.session == self.session && r.flow == self.flow);
                    self.block_ok = valid;
                    self.compare = self.pick();
                    if self.size == HEADER_LEN {
                        self.block_done();
                    }
                }
            } else {
                let n = (self.size - self.pos).min(data.len());
                if self.block_ok
                    && self.compare
                    && !self.pattern.matches(self.pos - HEADER_LEN, &data[..n])
                {
                    self.block_ok = false;
                }
                self.pos += n;
                data = &data[n..];
                if self.pos == self.size {
                    self.block_done();
                }
            }
        }
    }

    /// `n` payload bytes of the current TCP block discarded unseen
    /// (MSG_TRUNC); at most [`FlowReceiver::payload_remaining`].
    pub fn skip_payload(&mut self, n: usize) {
        let n = n.min(self.payload_remaining());
        self.bytes += n as u64;
        if n > 0 {
            self.compare = false;
        }
        self.pos += n;
        if n > 0 && self.pos == self.size {
            self.block_done();
        }
    }

    /// Bytes of an incomplete block at the end of the stream.
    pub fn partial_block_bytes(&self) -> usize {
        self.pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(session: u32, flow: u16, seq: u64, size: usize) -> Vec<u8> {
        let mut b = vec![0u8; size];
        Pattern::new(session, flow, size - HEADER_LEN)
            .fill_probe(
                &Repr {
                    session,
                    flow,
                    seq,
                    send_ns_lo32: 0,
                },
                &mut b,
            )
            .unwrap();
        b
    }

    #[test]
    fn datagrams_counted_and_corruption_caught() {
        let mut r = FlowReceiver::new(5, 1, 100);
        r.datagram(&probe(5, 1, 0, 100));
        let mut bad = probe(5, 1, 1, 100);
        bad[60] ^= 0x40;
        r.datagram(&bad);
        r.datagram(&probe(5, 1, 2, 100));
        r.datagram(&probe(5, 2, 3, 100)); // another flow
        r.datagram(&[1, 2, 3]); // garbage
        let c = r.counts(Some(3));
        assert_eq!(c.corrupt, 2);
        assert_eq!(c.foreign, 1);
        assert_eq!(c.seq.received_unique, 2);
        assert_eq!(c.seq.lost, 1, "the corrupt one is not counted as received");
        assert_eq!(c.payloads_verified, 2);
    }

    #[test]
    fn tcp_blocks_in_any_chunking() {
        let size = 1000;
        let mut stream = Vec::new();
        for s in 0..20 {
            stream.extend(probe(9, 0, s, size));
        }
        stream[5 * size + 500] ^= 1; // corrupt block 5's payload
        for chunk in [1, 7, 18, 999, 1000, 4096] {
            let mut r = FlowReceiver::new(9, 0, size);
            for c in stream.chunks(chunk) {
                r.stream(c);
            }
            let c = r.counts(Some(20));
            assert_eq!(r.packets(), 20);
            assert_eq!(r.bytes(), 20_000);
            assert_eq!(c.corrupt, 1, "chunk {chunk}");
            assert_eq!(c.seq.received_unique, 19);
            assert_eq!(c.payloads_verified, 19);
            assert_eq!(r.partial_block_bytes(), 0);
        }
    }

    #[test]
    fn sampling_compares_about_one_in_n_and_checks_every_header() {
        let size = 200;
        let blocks = 4000u64;
        let mut stream = Vec::new();
        for s in 0..blocks {
            stream.extend(probe(3, 1, s, size));
        }
        // Every block's payload corrupted: a sampler finds about 1/16 of
        // them; the rest pass on their (good) headers.
        for b in 0..blocks as usize {
            stream[b * size + HEADER_LEN + 7] ^= 0x10;
        }
        let mut r = FlowReceiver::new(3, 1, size).sampling(16);
        for c in stream.chunks(1000) {
            r.stream(c);
        }
        let c = r.counts(Some(blocks));
        assert_eq!(r.packets(), blocks);
        assert_eq!(c.payloads_verified, 0, "every compared payload was bad");
        assert!(
            (150..=350).contains(&c.corrupt),
            "{} of {blocks}",
            c.corrupt
        );
        assert_eq!(c.seq.received_unique, blocks - c.corrupt);
        // A damaged header is caught whether or not its payload is sampled.
        let mut r = FlowReceiver::new(3, 1, size).sampling(1000);
        let mut good = probe(3, 1, 0, size);
        good.extend(probe(3, 1, 1, size));
        good[size + 1] = 99; // block 1's version byte
        r.stream(&good);
        assert_eq!(r.counts(None).corrupt, 1);
        // Good datagrams: about one in 8 compared, all counted as received.
        let mut r = FlowReceiver::new(4, 0, 100).sampling(8);
        for s in 0..800 {
            r.datagram(&probe(4, 0, s, 100));
        }
        let c = r.counts(Some(800));
        assert_eq!((c.corrupt, c.seq.received_unique), (0, 800));
        assert!(
            (50..=150).contains(&c.payloads_verified),
            "{}",
            c.payloads_verified
        );
        // One in 1 is every payload.
        let mut r = FlowReceiver::new(4, 0, 100).sampling(1);
        r.datagram(&probe(4, 0, 0, 100));
        assert_eq!(r.counts(None).payloads_verified, 1);
    }

    #[test]
    fn tcp_trunc_sees_headers_only() {
        let size = 100;
        let mut r = FlowReceiver::new(1, 0, size).headers_only();
        assert_eq!(r.verification(), Verification::HeadersOnly);
        for s in 0..3 {
            let b = probe(1, 0, s, size);
            assert_eq!(r.header_remaining(), HEADER_LEN);
            r.stream(&b[..HEADER_LEN]);
            assert_eq!(r.payload_remaining(), size - HEADER_LEN);
            r.skip_payload(50);
            r.skip_payload(1000);
        }
        assert_eq!(r.packets(), 3);
        assert_eq!(r.bytes(), 300);
        assert_eq!(r.counts(None).seq.received_unique, 3);
        assert_eq!(r.counts(None).payloads_verified, 0);
        // Blocks that are all header never call skip_payload: still none
        // counted as verified on a headers-only path.
        let mut r = FlowReceiver::new(1, 0, HEADER_LEN).headers_only();
        for s in 0..3 {
            r.stream(&probe(1, 0, s, HEADER_LEN));
        }
        assert_eq!(r.counts(None).seq.received_unique, 3);
        assert_eq!(r.counts(None).payloads_verified, 0);
        assert_eq!(
            FlowReceiver::new(1, 0, 100).verification(),
            Verification::Full
        );
        let sampled = FlowReceiver::new(1, 0, 100).sampling(4);
        assert_eq!(sampled.verification(), Verification::Sampled);
    }

    #[test]
    fn header_only_blocks() {
        let mut r = FlowReceiver::new(1, 0, HEADER_LEN);
        for s in 0..4 {
            r.stream(&probe(1, 0, s, HEADER_LEN));
        }
        assert_eq!(r.counts(None).seq.received_unique, 4);
    }
}
