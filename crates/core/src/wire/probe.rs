//! The probe header at the start of every test datagram and TCP block.
//!
//! Layout (18 bytes, big-endian), small enough that an 18-byte UDP payload
//! (a 64-byte Ethernet frame) carries it whole:
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 1 | magic `0x4C` (`'L'`) |
//! | 1 | 1 | version ([`PROBE_VERSION`]) |
//! | 2 | 2 | flow id (one per unidirectional stream of a session) |
//! | 4 | 4 | session id |
//! | 8 | 6 | sequence number (48 bits; per flow, from 0) |
//! | 14 | 4 | send time: the low 32 bits of the sender's `CLOCK_MONOTONIC` in ns |
//!
//! The send time wraps every 4.29 s; it is comparable only with a clock on the
//! same host (namespaces of one machine), where a receiver unwraps it against
//! its own `CLOCK_MONOTONIC`. Across hosts it is not used.
//!
//! After the header comes the fill pattern ([`Pattern`]): byte `i` of the
//! payload (counted after the header) is a function of the session id, the
//! flow id and `i` only, so a sender pre-stages its buffers once (the `ideal`
//! path does no per-send payload work) and a receiver verifies a payload with
//! one comparison against the same pattern. The sequence number in the
//! header, checked by the receiver's accounting, tells blocks apart.

use crate::stats::splitmix::SplitMix64;

/// First byte of every probe.
pub const PROBE_MAGIC: u8 = 0x4C;
/// Version of this layout.
pub const PROBE_VERSION: u8 = 1;
/// Header length in bytes.
pub const HEADER_LEN: usize = 18;
/// The largest sequence number (48 bits).
pub const MAX_SEQ: u64 = (1 << 48) - 1;

/// Why bytes are not a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// Fewer bytes than a header.
    #[error("probe truncated: {0} bytes, header needs {HEADER_LEN}")]
    Truncated(usize),
    /// The first byte is not the magic.
    #[error("not a linerate probe (magic {0:#04x})")]
    BadMagic(u8),
    /// A version this build does not know.
    #[error("probe version {0} not supported (this build speaks {PROBE_VERSION})")]
    BadVersion(u8),
}

/// A view over the bytes of a probe (header and payload).
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checking anything.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps `buffer` after checking it holds a whole header with the right
    /// magic and version; afterwards no accessor can panic.
    pub fn new_checked(buffer: T) -> Result<Self, ProbeError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(ProbeError::Truncated(b.len()));
        }
        if b[0] != PROBE_MAGIC {
            return Err(ProbeError::BadMagic(b[0]));
        }
        if b[1] != PROBE_VERSION {
            return Err(ProbeError::BadVersion(b[1]));
        }
        Ok(Self { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The flow id.
    pub fn flow(&self) -> u16 {
        u16::from_be_bytes([self.b()[2], self.b()[3]])
    }

    /// The session id.
    pub fn session(&self) -> u32 {
        let b = self.b();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }

    /// The sequence number.
    pub fn seq(&self) -> u64 {
        let b = self.b();
        u64::from_be_bytes([0, 0, b[8], b[9], b[10], b[11], b[12], b[13]])
    }

    /// Low 32 bits of the sender's CLOCK_MONOTONIC at send, ns.
    pub fn send_ns_lo32(&self) -> u32 {
        let b = self.b();
        u32::from_be_bytes([b[14], b[15], b[16], b[17]])
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the header fields (the buffer must hold at least a header:
    /// check with [`Packet::new_checked`] or size it yourself).
    fn set(&mut self, r: &Repr) {
        let b = self.buffer.as_mut();
        b[0] = PROBE_MAGIC;
        b[1] = PROBE_VERSION;
        b[2..4].copy_from_slice(&r.flow.to_be_bytes());
        b[4..8].copy_from_slice(&r.session.to_be_bytes());
        b[8..14].copy_from_slice(&(r.seq & MAX_SEQ).to_be_bytes()[2..]);
        b[14..18].copy_from_slice(&r.send_ns_lo32.to_be_bytes());
    }
}

/// A parsed probe header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Session id.
    pub session: u32,
    /// Flow id.
    pub flow: u16,
    /// Sequence number (48 bits used).
    pub seq: u64,
    /// Low 32 bits of the sender's CLOCK_MONOTONIC at send, ns.
    pub send_ns_lo32: u32,
}

impl Repr {
    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Self {
        Self {
            session: p.session(),
            flow: p.flow(),
            seq: p.seq(),
            send_ns_lo32: p.send_ns_lo32(),
        }
    }

    /// Parses the start of `bytes`.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Self, ProbeError> {
        Packet::new_checked(bytes).map(|p| Self::parse(&p))
    }

    /// Writes this header into the first [`HEADER_LEN`] bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), ProbeError> {
        if buf.len() < HEADER_LEN {
            return Err(ProbeError::Truncated(buf.len()));
        }
        Packet::new_unchecked(buf).set(self);
        Ok(())
    }
}

/// The fill pattern of one flow: byte `i` after the header.
///
/// SplitMix64 (Steele, Lea, Flood 2014) seeded with the session and flow ids;
/// any two flows differ, and a shifted, zeroed or bit-flipped payload does
/// not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    bytes: Vec<u8>,
}

impl Pattern {
    /// The first `len` bytes of the pattern of (`session`, `flow`).
    pub fn new(session: u32, flow: u16, len: usize) -> Self {
        let mut bytes = vec![0; len];
        Self::write(session, flow, &mut bytes);
        Self { bytes }
    }

    /// Writes the first `dst.len()` bytes of the pattern of (`session`,
    /// `flow`) into `dst`: what [`Pattern::new`] holds, without a buffer of
    /// its own (a sender filling its send buffer needs no second copy).
    pub fn write(session: u32, flow: u16, dst: &mut [u8]) {
        let mut rng =
            SplitMix64::new((u64::from(session) << 16 | u64::from(flow)) ^ 0x6c69_6e65_7261_7465);
        for chunk in dst.chunks_mut(8) {
            let n = chunk.len();
            chunk.copy_from_slice(&rng.next_u64().to_le_bytes()[..n]);
        }
    }

    /// The pattern bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether `payload`, found at payload offset `offset`, matches; bytes
    /// past the pattern's length never match.
    pub fn matches(&self, offset: usize, payload: &[u8]) -> bool {
        offset
            .checked_add(payload.len())
            .and_then(|end| self.bytes.get(offset..end))
            .is_some_and(|want| want == payload)
    }

    /// Fills `buf` as a whole probe: header `repr`, then the pattern.
    pub fn fill_probe(&self, repr: &Repr, buf: &mut [u8]) -> Result<(), ProbeError> {
        repr.emit(buf)?;
        let payload = &mut buf[HEADER_LEN..];
        let n = payload.len().min(self.bytes.len());
        payload[..n].copy_from_slice(&self.bytes[..n]);
        Ok(())
    }
}

/// Unwraps a 32-bit nanosecond send stamp against a full 64-bit `now_ns` of
/// the same clock, assuming the send happened less than 2.1 s before `now`.
/// Returns the one-way delay in ns, or `None` if the stamp lies in the future.
pub fn delay_ns(send_ns_lo32: u32, now_ns: u64) -> Option<u64> {
    let now_lo = now_ns as u32;
    let d = now_lo.wrapping_sub(send_ns_lo32);
    (d < 1 << 31).then_some(u64::from(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let r = Repr {
            session: 0xDEAD_BEEF,
            flow: 7,
            seq: MAX_SEQ,
            send_ns_lo32: 123_456,
        };
        let mut buf = [0u8; 64];
        let pat = Pattern::new(r.session, r.flow, 64);
        pat.fill_probe(&r, &mut buf).unwrap();
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Repr::parse(&p), r);
        assert!(pat.matches(0, p.payload()));
    }

    #[test]
    fn header_fits_a_minimum_frame() {
        // 64-byte frame: 14 Eth + 20 IPv4 + 8 UDP + 18 payload + 4 FCS.
        assert_eq!(HEADER_LEN, 18);
    }

    #[test]
    fn garbage_never_panics() {
        for len in 0..40 {
            for fill in [0u8, 0x4C, 0xFF] {
                let buf = vec![fill; len];
                let _ = Repr::parse_bytes(&buf);
            }
        }
        assert_eq!(Repr::parse_bytes(&[0x4C; 5]), Err(ProbeError::Truncated(5)));
        assert_eq!(Repr::parse_bytes(&[0x00; 20]), Err(ProbeError::BadMagic(0)));
        let mut b = [0u8; 20];
        b[0] = PROBE_MAGIC;
        b[1] = 9;
        assert_eq!(Repr::parse_bytes(&b), Err(ProbeError::BadVersion(9)));
        assert!(Repr {
            session: 1,
            flow: 1,
            seq: 1,
            send_ns_lo32: 1
        }
        .emit(&mut [0u8; 3])
        .is_err());
    }

    #[test]
    fn pattern_written_in_place_is_the_pattern() {
        let mut buf = [0u8; 13];
        Pattern::write(7, 3, &mut buf);
        assert_eq!(&buf[..], Pattern::new(7, 3, 13).bytes());
        // A shorter pattern is a prefix of a longer one.
        assert_eq!(Pattern::new(7, 3, 5).bytes(), &buf[..5]);
        assert_ne!(&buf[..], Pattern::new(7, 4, 13).bytes());
        // The bytes on the wire: the first SplitMix64 output of the flow's
        // seed, little-endian (peers of other builds compare against it).
        assert_eq!(buf[..8], [200, 158, 25, 86, 105, 101, 211, 97]);
    }

    #[test]
    fn pattern_catches_corruption_and_differs_by_flow() {
        let a = Pattern::new(1, 0, 1000);
        let b = Pattern::new(1, 1, 1000);
        assert_ne!(a.bytes(), b.bytes());
        let mut p = a.bytes()[100..300].to_vec();
        assert!(a.matches(100, &p));
        assert!(!a.matches(101, &p));
        p[17] ^= 1;
        assert!(!a.matches(100, &p));
        assert!(!a.matches(900, &[0u8; 200]));
        assert!(!a.matches(usize::MAX, &[0u8; 2]));
    }

    #[test]
    fn delays_unwrap() {
        assert_eq!(delay_ns(u32::MAX - 9, (1u64 << 32) + 10), Some(20));
        assert_eq!(delay_ns(100, 50), None);
    }
}
