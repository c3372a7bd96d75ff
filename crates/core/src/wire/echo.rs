//! The echo probe of `linerate latency`: a request the client sends and the
//! reflector returns, same length, with its own stamps written in where the
//! request left room.
//!
//! ```text
//!  0      2    3     4          8                16
//!  | "LE" | v1 | kind | session | sequence number |     16 B: every request
//!  16              24            32              40
//!  | rx kernel ns  | rx app ns   | tx app ns     |     reply stamps (if room)
//!  40              48            56              64
//!  | prev seq      | prev tx sched ns | prev tx software ns |  (if room)
//! ```
//! The kind byte is 1 (request) or 2 (reply); in a request its top bit
//! ([`STAMP_FLAG`]) asks the reflector for a kernel transmit stamp of the
//! reply, and the next bit ([`NEXT_STAMP_FLAG`]) says that the client's next
//! request will ask for one, so the reflector reads that request with its
//! receive stamp (the client stamps a sample of its exchanges, and only
//! those may pay for stamping). All integers are big-endian. A reply is never longer than its request:
//! stamps that do not fit stay out of the reply and reach the client over
//! the control connection at the end of the run. Stamps are nanoseconds of
//! CLOCK_REALTIME on the reflector's host (the clock of Linux software
//! timestamps); 0 means "not available".

use std::fmt;

/// First two bytes of every echo probe.
pub const MAGIC: [u8; 2] = *b"LE";
/// Version of this layout.
pub const VERSION: u8 = 1;
/// Bytes every probe has.
pub const HEADER_LEN: usize = 16;
/// Top bit of the kind byte of a request: stamp the reply's transmission.
pub const STAMP_FLAG: u8 = 0x80;
/// Bit of the kind byte of a request: the next request will carry
/// [`STAMP_FLAG`].
pub const NEXT_STAMP_FLAG: u8 = 0x40;
/// Bytes a probe needs to carry the reflector's receive and application stamps.
pub const STAMPS_LEN: usize = 40;
/// Bytes a probe needs to also carry the previous reply's transmit stamps.
pub const FULL_LEN: usize = 64;

mod field {
    use std::ops::Range;
    pub(super) const MAGIC: Range<usize> = 0..2;
    pub(super) const VERSION: usize = 2;
    pub(super) const KIND: usize = 3;
    pub(super) const SESSION: Range<usize> = 4..8;
    pub(super) const SEQ: Range<usize> = 8..16;
    pub(super) const RX_KERNEL: Range<usize> = 16..24;
    pub(super) const RX_APP: Range<usize> = 24..32;
    pub(super) const TX_APP: Range<usize> = 32..40;
    pub(super) const PREV_SEQ: Range<usize> = 40..48;
    pub(super) const PREV_TX_SCHED: Range<usize> = 48..56;
    pub(super) const PREV_TX_SOFT: Range<usize> = 56..64;
}

/// Why bytes are not an echo probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EchoError {
    /// Shorter than [`HEADER_LEN`].
    #[error("truncated echo probe ({0} bytes, need {HEADER_LEN})")]
    Truncated(usize),
    /// Not our magic: stray traffic.
    #[error("not a linerate echo probe")]
    BadMagic,
    /// A version this build does not speak.
    #[error("echo probe version {0}, expected {VERSION}")]
    BadVersion(u8),
    /// Neither request nor reply.
    #[error("unknown echo probe kind {0}")]
    BadKind(u8),
}

/// Request or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Client → reflector.
    Request,
    /// Reflector → client.
    Reply,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Self::Request => 1,
            Self::Reply => 2,
        }
    }
}

/// A view over an echo probe.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    u64::from_be_bytes(a)
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checks; use [`Packet::new_checked`] on received data.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps `buffer` after checking its length, magic, version and kind.
    pub fn new_checked(buffer: T) -> Result<Self, EchoError> {
        let p = Self { buffer };
        let b = p.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(EchoError::Truncated(b.len()));
        }
        if b[field::MAGIC] != MAGIC {
            return Err(EchoError::BadMagic);
        }
        if b[field::VERSION] != VERSION {
            return Err(EchoError::BadVersion(b[field::VERSION]));
        }
        p.kind()?;
        Ok(p)
    }

    /// The kind byte, checked.
    pub fn kind(&self) -> Result<Kind, EchoError> {
        let k = self.buffer.as_ref()[field::KIND];
        match k & !(STAMP_FLAG | NEXT_STAMP_FLAG) {
            1 => Ok(Kind::Request),
            2 if k == 2 => Ok(Kind::Reply),
            _ => Err(EchoError::BadKind(k)),
        }
    }

    /// Whether a request asks for a kernel transmit stamp of its reply.
    pub fn stamp_requested(&self) -> bool {
        self.buffer.as_ref()[field::KIND] & STAMP_FLAG != 0
    }

    /// Whether a request says that the next one will ask for a stamp.
    pub fn next_stamp_requested(&self) -> bool {
        self.buffer.as_ref()[field::KIND] & NEXT_STAMP_FLAG != 0
    }

    /// Session token given out over the control connection.
    pub fn session(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::SESSION];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Sequence number.
    pub fn seq(&self) -> u64 {
        be_u64(&self.buffer.as_ref()[field::SEQ])
    }

    /// Length of the whole probe.
    pub fn len(&self) -> usize {
        self.buffer.as_ref().len()
    }

    /// Never true for a checked packet.
    pub fn is_empty(&self) -> bool {
        self.buffer.as_ref().is_empty()
    }

    /// The reflector's stamps carried in a reply, if the probe has room.
    pub fn stamps(&self) -> Option<ReflectorStamps> {
        let b = self.buffer.as_ref();
        if b.len() < STAMPS_LEN {
            return None;
        }
        let mut s = ReflectorStamps {
            rx_kernel_ns: be_u64(&b[field::RX_KERNEL]),
            rx_app_ns: be_u64(&b[field::RX_APP]),
            tx_app_ns: be_u64(&b[field::TX_APP]),
            prev: None,
        };
        if b.len() >= FULL_LEN {
            let seq = be_u64(&b[field::PREV_SEQ]);
            let sched = be_u64(&b[field::PREV_TX_SCHED]);
            let soft = be_u64(&b[field::PREV_TX_SOFT]);
            if sched != 0 || soft != 0 {
                s.prev = Some(TxStamps {
                    seq,
                    tx_sched_ns: sched,
                    tx_soft_ns: soft,
                });
            }
        }
        Some(s)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the header of a request (the rest of the buffer is left as is).
    ///
    /// The buffer must be at least [`HEADER_LEN`] long; shorter buffers are
    /// left untouched and `false` is returned.
    pub fn emit_request(&mut self, session: u32, seq: u64) -> bool {
        let b = self.buffer.as_mut();
        if b.len() < HEADER_LEN {
            return false;
        }
        b[field::MAGIC].copy_from_slice(&MAGIC);
        b[field::VERSION] = VERSION;
        b[field::KIND] = Kind::Request.byte();
        b[field::SESSION].copy_from_slice(&session.to_be_bytes());
        b[field::SEQ].copy_from_slice(&seq.to_be_bytes());
        true
    }

    /// Marks a request (written by [`Packet::emit_request`]) as asking for a
    /// kernel transmit stamp of its reply (`stamp`), and as announcing that
    /// the next request will (`next`).
    pub fn set_stamp_flags(&mut self, stamp: bool, next: bool) {
        let b = self.buffer.as_mut();
        if b.len() < HEADER_LEN {
            return;
        }
        let mut kind = Kind::Request.byte();
        if stamp {
            kind |= STAMP_FLAG;
        }
        if next {
            kind |= NEXT_STAMP_FLAG;
        }
        b[field::KIND] = kind;
    }

    /// Turns a checked request into its reply in place, writing in the
    /// stamps that fit. Returns how many of the stamp fields were written.
    pub fn make_reply(&mut self, stamps: &ReflectorStamps) -> usize {
        let b = self.buffer.as_mut();
        if b.len() < HEADER_LEN {
            return 0;
        }
        b[field::KIND] = Kind::Reply.byte();
        if b.len() < STAMPS_LEN {
            return 0;
        }
        b[field::RX_KERNEL].copy_from_slice(&stamps.rx_kernel_ns.to_be_bytes());
        b[field::RX_APP].copy_from_slice(&stamps.rx_app_ns.to_be_bytes());
        b[field::TX_APP].copy_from_slice(&stamps.tx_app_ns.to_be_bytes());
        if b.len() < FULL_LEN {
            return 3;
        }
        let prev = stamps.prev.unwrap_or_default();
        b[field::PREV_SEQ].copy_from_slice(&prev.seq.to_be_bytes());
        b[field::PREV_TX_SCHED].copy_from_slice(&prev.tx_sched_ns.to_be_bytes());
        b[field::PREV_TX_SOFT].copy_from_slice(&prev.tx_soft_ns.to_be_bytes());
        6
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind() {
            Ok(Kind::Request) => "request",
            Ok(Kind::Reply) => "reply",
            Err(_) => "?",
        };
        write!(
            f,
            "echo {kind} session={} seq={} len={}",
            self.session(),
            self.seq(),
            self.len()
        )
    }
}

/// Transmit stamps of one reply, reported with a later one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TxStamps {
    /// Sequence number of the reply they belong to.
    pub seq: u64,
    /// SCM_TSTAMP_SCHED: entered the qdisc layer.
    pub tx_sched_ns: u64,
    /// SCM_TSTAMP_SND: handed to the driver.
    pub tx_soft_ns: u64,
}

/// What the reflector knows of one exchange, on its own clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReflectorStamps {
    /// Kernel software receive stamp of the request.
    pub rx_kernel_ns: u64,
    /// When the reflector's application had the request.
    pub rx_app_ns: u64,
    /// When the reflector's application called send for the reply.
    pub tx_app_ns: u64,
    /// Transmit stamps of an earlier reply.
    pub prev: Option<TxStamps>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_reply_round_trip() {
        let mut buf = [0u8; 64];
        assert!(Packet::new_unchecked(&mut buf[..]).emit_request(7, 42));
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!((p.kind(), p.session(), p.seq()), (Ok(Kind::Request), 7, 42));
        let stamps = ReflectorStamps {
            rx_kernel_ns: 1,
            rx_app_ns: 2,
            tx_app_ns: 3,
            prev: Some(TxStamps {
                seq: 41,
                tx_sched_ns: 4,
                tx_soft_ns: 5,
            }),
        };
        assert_eq!(Packet::new_unchecked(&mut buf[..]).make_reply(&stamps), 6);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.kind(), Ok(Kind::Reply));
        assert_eq!(p.stamps(), Some(stamps));
        assert_eq!(p.to_string(), "echo reply session=7 seq=42 len=64");
    }

    #[test]
    fn stamp_flag_marks_a_request_and_is_gone_from_its_reply() {
        let mut buf = [0u8; 64];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.emit_request(7, 42);
        assert!(!p.stamp_requested());
        assert!(!p.next_stamp_requested());
        p.set_stamp_flags(false, true);
        let q = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(q.kind(), Ok(Kind::Request));
        assert!(!q.stamp_requested());
        assert!(q.next_stamp_requested());
        assert_eq!(buf[3], 0x41);
        Packet::new_unchecked(&mut buf[..]).set_stamp_flags(true, true);
        assert_eq!(buf[3], 0xc1);
        Packet::new_unchecked(&mut buf[..]).set_stamp_flags(true, false);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.kind(), Ok(Kind::Request));
        assert!(p.stamp_requested());
        assert_eq!(buf[3], 0x81);
        Packet::new_unchecked(&mut buf[..]).make_reply(&ReflectorStamps::default());
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.kind(), Ok(Kind::Reply));
        assert!(!p.stamp_requested());
        // A flagged reply, or a flag on an unknown kind, is not ours.
        buf[3] = 0x82;
        assert_eq!(
            Packet::new_checked(&buf[..]).err(),
            Some(EchoError::BadKind(0x82))
        );
        buf[3] = 0x83;
        assert_eq!(
            Packet::new_checked(&buf[..]).err(),
            Some(EchoError::BadKind(0x83))
        );
        buf[3] = 0x42;
        assert_eq!(
            Packet::new_checked(&buf[..]).err(),
            Some(EchoError::BadKind(0x42))
        );
        Packet::new_unchecked(&mut buf[..]).set_stamp_flags(false, false);
        assert_eq!(buf[3], 1);
    }

    #[test]
    fn short_probes_carry_what_fits() {
        let mut buf = [0u8; HEADER_LEN];
        Packet::new_unchecked(&mut buf[..]).emit_request(1, 1);
        let s = ReflectorStamps::default();
        assert_eq!(Packet::new_unchecked(&mut buf[..]).make_reply(&s), 0);
        assert_eq!(Packet::new_checked(&buf[..]).unwrap().stamps(), None);
        let mut buf = [0u8; 50];
        Packet::new_unchecked(&mut buf[..]).emit_request(1, 1);
        assert_eq!(Packet::new_unchecked(&mut buf[..]).make_reply(&s), 3);
        assert_eq!(Packet::new_checked(&buf[..]).unwrap().len(), 50);
        assert!(!Packet::new_unchecked(&mut [0u8; 3][..]).emit_request(1, 1));
    }

    #[test]
    fn garbage_is_refused_without_panicking() {
        assert_eq!(
            Packet::new_checked(&[][..]).unwrap_err(),
            EchoError::Truncated(0)
        );
        assert_eq!(
            Packet::new_checked(&[0u8; 15][..]).unwrap_err(),
            EchoError::Truncated(15)
        );
        assert_eq!(
            Packet::new_checked(&[0u8; 16][..]).unwrap_err(),
            EchoError::BadMagic
        );
        let mut b = [0u8; 16];
        b[..2].copy_from_slice(b"LE");
        b[2] = 9;
        assert_eq!(
            Packet::new_checked(&b[..]).unwrap_err(),
            EchoError::BadVersion(9)
        );
        b[2] = VERSION;
        b[3] = 77;
        assert_eq!(
            Packet::new_checked(&b[..]).unwrap_err(),
            EchoError::BadKind(77)
        );
        // Every prefix of every byte pattern: never a panic.
        let mut x: u32 = 1;
        for len in 0..80 {
            for _ in 0..50 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        x as u8
                    })
                    .collect();
                if let Ok(p) = Packet::new_checked(&bytes[..]) {
                    let _ = (p.seq(), p.session(), p.stamps(), p.to_string());
                }
            }
        }
    }
}
