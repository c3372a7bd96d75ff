//! The RFC 2544 test frame: Ethernet II / IPv4 / UDP carrying a linerate test
//! header (magic, stream id, sequence number, transmit timestamp).
//!
//! RFC 2544 section 8 and appendix C.2.6 ask for UDP/IP test frames; section
//! 12 and RFC 2544's IANA note (RFC 6815 / RFC 5735) reserve 198.18.0.0/15 for
//! benchmarking, so every frame goes between addresses of that block.
//!
//! Layout of the buffer (the frame from destination MAC to the end of the UDP
//! payload; the 4-byte FCS is added by the NIC and is **not** in the buffer,
//! but it is counted in the frame size, as in [`crate::linerate`]):
//!
//! ```text
//!  0  dst MAC 6 | src MAC 6 | EtherType 0x0800
//! 14  IPv4 header, 20 bytes, no options, DF set, TTL, proto 17, RFC 1071 checksum
//! 34  UDP header, 8 bytes, checksum 0 (allowed over IPv4, RFC 768)
//! 42  test header, 18 bytes:
//!       magic "LRT1" 4 | stream id u16 | sequence u32 | tx timestamp ns u64
//! 60  zero padding up to the frame size - 4
//! ```
//!
//! The test header is 18 bytes so that it fits the smallest RFC 2544 frame:
//! 64 - 4 (FCS) - 14 - 20 - 8 = 18. All fields are big-endian.
//!
//! The UDP checksum is left 0 so that a generator only rewrites the sequence
//! number and the timestamp per frame; the IPv4 checksum does not cover the
//! payload, and the identification field is constant (DF set, RFC 6864), so it
//! too is computed once per frame size.
//!
//! Length contract: [`TestFrame::new_checked`] accepts a buffer of at least
//! [`MIN_BUFFER_LEN`] bytes; after it, every accessor reads a fixed offset
//! below that length and cannot panic. [`TestFrameRepr::parse`] additionally
//! checks EtherType, IP version/IHL/protocol, the IPv4 header checksum, the IP
//! and UDP lengths against the buffer, and the magic.

use crate::linerate::{Encap, ModelError, FCS_BYTES};

/// Magic at the start of the test header: "LRT1" (linerate test frame, version 1).
pub const MAGIC: u32 = u32::from_be_bytes(*b"LRT1");
/// EtherType of IPv4 (IEEE 802 numbers).
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// IP protocol number of UDP (IANA).
pub const IPPROTO_UDP: u8 = 17;
/// UDP port on both sides: 9, discard (RFC 863), so that a host that does
/// deliver a test frame to its UDP layer has nothing to answer.
pub const DEFAULT_PORT: u16 = 9;
/// Bytes of the test header.
pub const TEST_HEADER_LEN: usize = 18;

mod field {
    use std::ops::Range;
    pub(super) const DST: Range<usize> = 0..6;
    pub(super) const SRC: Range<usize> = 6..12;
    pub(super) const ETHERTYPE: Range<usize> = 12..14;
    pub(super) const IP: usize = 14;
    pub(super) const IP_VER_IHL: usize = IP;
    pub(super) const IP_TOTAL_LEN: Range<usize> = IP + 2..IP + 4;
    pub(super) const IP_FLAGS_FRAG: Range<usize> = IP + 6..IP + 8;
    pub(super) const IP_TTL: usize = IP + 8;
    pub(super) const IP_PROTO: usize = IP + 9;
    pub(super) const IP_CSUM: Range<usize> = IP + 10..IP + 12;
    pub(super) const IP_SRC: Range<usize> = IP + 12..IP + 16;
    pub(super) const IP_DST: Range<usize> = IP + 16..IP + 20;
    pub(super) const IP_HEADER: Range<usize> = IP..IP + 20;
    pub(super) const UDP: usize = 34;
    pub(super) const UDP_SRC: Range<usize> = UDP..UDP + 2;
    pub(super) const UDP_DST: Range<usize> = UDP + 2..UDP + 4;
    pub(super) const UDP_LEN: Range<usize> = UDP + 4..UDP + 6;
    pub(super) const UDP_CSUM: Range<usize> = UDP + 6..UDP + 8;
    pub(super) const T: usize = 42;
    pub(super) const MAGIC: Range<usize> = T..T + 4;
    pub(super) const STREAM: Range<usize> = T + 4..T + 6;
    pub(super) const SEQ: Range<usize> = T + 6..T + 10;
    pub(super) const TX_NS: Range<usize> = T + 10..T + 18;
}

/// Smallest buffer that holds every header: 14 + 20 + 8 + 18 = 60 bytes (a
/// 64-byte frame without its FCS).
pub const MIN_BUFFER_LEN: usize = field::T + TEST_HEADER_LEN;

/// Why bytes are not a linerate test frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the headers need.
    #[error("{0} bytes is shorter than a test frame ({MIN_BUFFER_LEN} bytes)")]
    Truncated(usize),
    /// Not IPv4 (EtherType).
    #[error("EtherType {0:#06x} is not IPv4")]
    NotIpv4(u16),
    /// IPv4 header with options or a wrong version.
    #[error("unsupported IP version/IHL byte {0:#04x}")]
    BadIpHeader(u8),
    /// Not UDP.
    #[error("IP protocol {0} is not UDP")]
    NotUdp(u8),
    /// The IPv4 header checksum is wrong (RFC 1071).
    #[error("IPv4 header checksum is wrong")]
    BadChecksum,
    /// IP or UDP length disagrees with the buffer.
    #[error("IP/UDP length fields disagree with the {0}-byte buffer")]
    BadLength(usize),
    /// The magic is not "LRT1": some other UDP traffic.
    #[error("no linerate test header (magic {0:#010x})")]
    BadMagic(u32),
}

/// A view over the bytes of a test frame (no FCS).
#[derive(Debug, Clone)]
pub struct TestFrame<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8], r: std::ops::Range<usize>) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[r]);
    u16::from_be_bytes(a)
}
fn be32(b: &[u8], r: std::ops::Range<usize>) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[r]);
    u32::from_be_bytes(a)
}
fn be64(b: &[u8], r: std::ops::Range<usize>) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[r]);
    u64::from_be_bytes(a)
}

/// The Internet checksum of `data` (RFC 1071): one's-complement of the
/// one's-complement sum of the 16-bit big-endian words, odd byte padded.
pub fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl<T: AsRef<[u8]>> TestFrame<T> {
    /// Wraps a buffer without checking it (accessors may panic on a short
    /// buffer; use [`Self::new_checked`] on anything from the network).
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer of at least [`MIN_BUFFER_LEN`] bytes; afterwards no
    /// accessor can panic.
    pub fn new_checked(buffer: T) -> Result<Self, FrameError> {
        let len = buffer.as_ref().len();
        if len < MIN_BUFFER_LEN {
            return Err(FrameError::Truncated(len));
        }
        Ok(Self { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Destination MAC.
    pub fn dst_mac(&self) -> [u8; 6] {
        let mut m = [0; 6];
        m.copy_from_slice(&self.b()[field::DST]);
        m
    }
    /// Source MAC.
    pub fn src_mac(&self) -> [u8; 6] {
        let mut m = [0; 6];
        m.copy_from_slice(&self.b()[field::SRC]);
        m
    }
    /// EtherType.
    pub fn ethertype(&self) -> u16 {
        be16(self.b(), field::ETHERTYPE)
    }
    /// IPv4 version and IHL byte (0x45 without options).
    pub fn ip_ver_ihl(&self) -> u8 {
        self.b()[field::IP_VER_IHL]
    }
    /// IPv4 total length.
    pub fn ip_total_len(&self) -> u16 {
        be16(self.b(), field::IP_TOTAL_LEN)
    }
    /// IPv4 TTL.
    pub fn ttl(&self) -> u8 {
        self.b()[field::IP_TTL]
    }
    /// IPv4 protocol.
    pub fn ip_proto(&self) -> u8 {
        self.b()[field::IP_PROTO]
    }
    /// IPv4 source address.
    pub fn src_ip(&self) -> [u8; 4] {
        be32(self.b(), field::IP_SRC).to_be_bytes()
    }
    /// IPv4 destination address.
    pub fn dst_ip(&self) -> [u8; 4] {
        be32(self.b(), field::IP_DST).to_be_bytes()
    }
    /// True when the IPv4 header checksum verifies (RFC 1071: the sum over
    /// the header including the checksum field is 0xffff).
    pub fn ip_checksum_ok(&self) -> bool {
        internet_checksum(&self.b()[field::IP_HEADER]) == 0
    }
    /// UDP source port.
    pub fn src_port(&self) -> u16 {
        be16(self.b(), field::UDP_SRC)
    }
    /// UDP destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), field::UDP_DST)
    }
    /// UDP length (header and payload).
    pub fn udp_len(&self) -> u16 {
        be16(self.b(), field::UDP_LEN)
    }
    /// The magic word.
    pub fn magic(&self) -> u32 {
        be32(self.b(), field::MAGIC)
    }
    /// Stream id.
    pub fn stream(&self) -> u16 {
        be16(self.b(), field::STREAM)
    }
    /// Sequence number within the stream.
    pub fn seq(&self) -> u32 {
        be32(self.b(), field::SEQ)
    }
    /// Transmit timestamp in nanoseconds (clock chosen by the generator).
    pub fn tx_ns(&self) -> u64 {
        be64(self.b(), field::TX_NS)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TestFrame<T> {
    fn m(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Sets the sequence number (the generator's hot path).
    pub fn set_seq(&mut self, seq: u32) {
        self.m()[field::SEQ].copy_from_slice(&seq.to_be_bytes());
    }
    /// Sets the transmit timestamp (the generator's hot path).
    pub fn set_tx_ns(&mut self, ns: u64) {
        self.m()[field::TX_NS].copy_from_slice(&ns.to_be_bytes());
    }
    /// Sets the stream id.
    pub fn set_stream(&mut self, stream: u16) {
        self.m()[field::STREAM].copy_from_slice(&stream.to_be_bytes());
    }
}

/// A parsed, validated test frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestFrameRepr {
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// IPv4 source (in 198.18.0.0/15 for tests).
    pub src_ip: [u8; 4],
    /// IPv4 destination (in 198.18.0.0/15 for tests).
    pub dst_ip: [u8; 4],
    /// IPv4 TTL.
    pub ttl: u8,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// Stream id.
    pub stream: u16,
    /// Sequence number.
    pub seq: u32,
    /// Transmit timestamp, ns.
    pub tx_ns: u64,
    /// UDP payload bytes: the test header plus zero padding (>= 18).
    pub udp_payload_len: u16,
}

/// True when `ip` is inside 198.18.0.0/15 (RFC 2544 section 12, RFC 5735).
pub fn is_benchmark_ipv4(ip: [u8; 4]) -> bool {
    ip[0] == 198 && (ip[1] & 0xfe) == 18
}

impl TestFrameRepr {
    /// A test frame of `frame_bytes` (destination MAC to FCS, as
    /// [`crate::linerate`] counts) between the given addresses: UDP/IPv4 with
    /// the payload that fills it. RFC 2544 section 9 sizes are 64..1518;
    /// `jumbo` allows up to the jumbo maximum.
    pub fn for_frame_size(
        frame_bytes: u32,
        jumbo: bool,
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        src_ip: [u8; 4],
        dst_ip: [u8; 4],
    ) -> Result<Self, ModelError> {
        let frame = Encap::UDP4.frame_of_length(frame_bytes, jumbo)?;
        if frame.payload_bytes < TEST_HEADER_LEN as u32 || frame.padding_bytes > 0 {
            return Err(ModelError::FrameTooSmall {
                frame: frame_bytes,
                headers: MIN_BUFFER_LEN as u32 + FCS_BYTES,
                encap: Encap::UDP4,
            });
        }
        Ok(Self {
            dst_mac,
            src_mac,
            src_ip,
            dst_ip,
            ttl: 64,
            src_port: DEFAULT_PORT,
            dst_port: DEFAULT_PORT,
            stream: 0,
            seq: 0,
            tx_ns: 0,
            // Bounded by the jumbo maximum (16 KiB), so it fits u16.
            udp_payload_len: frame.payload_bytes as u16,
        })
    }

    /// Parses and validates a frame (see the module's length contract).
    pub fn parse<T: AsRef<[u8]>>(p: &TestFrame<T>) -> Result<Self, FrameError> {
        let len = p.b().len();
        if len < MIN_BUFFER_LEN {
            return Err(FrameError::Truncated(len));
        }
        if p.ethertype() != ETHERTYPE_IPV4 {
            return Err(FrameError::NotIpv4(p.ethertype()));
        }
        if p.ip_ver_ihl() != 0x45 {
            return Err(FrameError::BadIpHeader(p.ip_ver_ihl()));
        }
        if p.ip_proto() != IPPROTO_UDP {
            return Err(FrameError::NotUdp(p.ip_proto()));
        }
        if !p.ip_checksum_ok() {
            return Err(FrameError::BadChecksum);
        }
        let ip_len = usize::from(p.ip_total_len());
        let udp_len = usize::from(p.udp_len());
        // The buffer may carry trailing Ethernet padding, never less than the
        // IP packet.
        if ip_len + field::IP > len || udp_len + 20 != ip_len || udp_len < 8 + TEST_HEADER_LEN {
            return Err(FrameError::BadLength(len));
        }
        if p.magic() != MAGIC {
            return Err(FrameError::BadMagic(p.magic()));
        }
        Ok(Self {
            dst_mac: p.dst_mac(),
            src_mac: p.src_mac(),
            src_ip: p.src_ip(),
            dst_ip: p.dst_ip(),
            ttl: p.ttl(),
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            stream: p.stream(),
            seq: p.seq(),
            tx_ns: p.tx_ns(),
            udp_payload_len: (udp_len - 8) as u16,
        })
    }

    /// Bytes [`Self::emit`] writes: the frame without its FCS.
    pub fn buffer_len(&self) -> usize {
        field::T + usize::from(self.udp_payload_len)
    }

    /// The frame size on the wire model: buffer plus FCS.
    pub fn frame_bytes(&self) -> u32 {
        self.buffer_len() as u32 + FCS_BYTES
    }

    /// Writes the frame into the first [`Self::buffer_len`] bytes of `buf`
    /// (header fields, RFC 1071 IPv4 checksum, zero padding).
    ///
    /// # Panics
    /// If `buf` is shorter than [`Self::buffer_len`] (a programming error:
    /// the caller sizes its own buffer).
    pub fn emit(&self, buf: &mut [u8]) {
        let n = self.buffer_len();
        assert!(buf.len() >= n, "test frame buffer too short");
        let b = &mut buf[..n];
        b.fill(0);
        b[field::DST].copy_from_slice(&self.dst_mac);
        b[field::SRC].copy_from_slice(&self.src_mac);
        b[field::ETHERTYPE].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let udp_len = 8 + self.udp_payload_len;
        b[field::IP_VER_IHL] = 0x45;
        b[field::IP_TOTAL_LEN].copy_from_slice(&(20 + udp_len).to_be_bytes());
        // Identification 0, DF set (RFC 6864 section 4.1: atomic datagrams).
        b[field::IP_FLAGS_FRAG].copy_from_slice(&0x4000u16.to_be_bytes());
        b[field::IP_TTL] = self.ttl;
        b[field::IP_PROTO] = IPPROTO_UDP;
        b[field::IP_SRC].copy_from_slice(&self.src_ip);
        b[field::IP_DST].copy_from_slice(&self.dst_ip);
        let csum = internet_checksum(&b[field::IP_HEADER]);
        b[field::IP_CSUM].copy_from_slice(&csum.to_be_bytes());
        b[field::UDP_SRC].copy_from_slice(&self.src_port.to_be_bytes());
        b[field::UDP_DST].copy_from_slice(&self.dst_port.to_be_bytes());
        b[field::UDP_LEN].copy_from_slice(&udp_len.to_be_bytes());
        b[field::UDP_CSUM].copy_from_slice(&0u16.to_be_bytes());
        b[field::MAGIC].copy_from_slice(&MAGIC.to_be_bytes());
        b[field::STREAM].copy_from_slice(&self.stream.to_be_bytes());
        b[field::SEQ].copy_from_slice(&self.seq.to_be_bytes());
        b[field::TX_NS].copy_from_slice(&self.tx_ns.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linerate::RFC2544_FRAME_SIZES;
    use proptest::prelude::*;

    fn repr(size: u32) -> TestFrameRepr {
        TestFrameRepr::for_frame_size(
            size,
            size > 1518,
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            [198, 18, 0, 1],
            [198, 19, 0, 2],
        )
        .unwrap()
    }

    #[test]
    fn every_rfc2544_size_round_trips_with_the_right_length() {
        // RFC 2544 section 9.1: 64, 128, 256, 512, 1024, 1280, 1518.
        for &size in RFC2544_FRAME_SIZES.iter().chain(&[9018u32]) {
            let mut r = repr(size);
            r.stream = 7;
            r.seq = 0xdead_beef;
            r.tx_ns = 1_234_567_890_123;
            let mut buf = vec![0xaa; r.buffer_len()];
            r.emit(&mut buf);
            assert_eq!(buf.len() as u32 + 4, size);
            let view = TestFrame::new_checked(&buf[..]).unwrap();
            assert!(view.ip_checksum_ok());
            assert_eq!(TestFrameRepr::parse(&view).unwrap(), r);
        }
    }

    #[test]
    fn minimum_frame_is_exactly_full() {
        let r = repr(64);
        assert_eq!(r.buffer_len(), MIN_BUFFER_LEN);
        assert_eq!(r.udp_payload_len as usize, TEST_HEADER_LEN);
        assert!(TestFrameRepr::for_frame_size(63, false, [0; 6], [0; 6], [0; 4], [0; 4]).is_err());
        assert!(
            TestFrameRepr::for_frame_size(1519, false, [0; 6], [0; 6], [0; 4], [0; 4]).is_err()
        );
    }

    #[test]
    fn ipv4_checksum_matches_a_known_header() {
        // RFC 1071 worked example style: a header whose checksum is known
        // (the classic Wikipedia IPv4 example, checksum 0xb861).
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&h), 0xb861);
        assert_eq!(internet_checksum(&[0x01]), !0x0100);
    }

    #[test]
    fn setters_change_only_their_fields() {
        let r = repr(128);
        let mut buf = vec![0; r.buffer_len()];
        r.emit(&mut buf);
        let mut f = TestFrame::new_checked(&mut buf[..]).unwrap();
        f.set_seq(42);
        f.set_tx_ns(99);
        f.set_stream(3);
        let p = TestFrameRepr::parse(&f).unwrap();
        assert_eq!((p.seq, p.tx_ns, p.stream), (42, 99, 3));
        assert_eq!(p.src_ip, r.src_ip);
    }

    #[test]
    fn rejections() {
        let r = repr(64);
        let mut buf = vec![0; r.buffer_len()];
        r.emit(&mut buf);
        assert_eq!(
            TestFrame::new_checked(&buf[..59]).unwrap_err(),
            FrameError::Truncated(59)
        );
        let mut bad = buf.clone();
        bad[12] = 0x86;
        bad[13] = 0xdd;
        assert!(matches!(
            TestFrameRepr::parse(&TestFrame::new_checked(&bad[..]).unwrap()),
            Err(FrameError::NotIpv4(0x86dd))
        ));
        let mut bad = buf.clone();
        bad[14 + 8] ^= 1; // TTL changes, checksum no longer matches
        assert_eq!(
            TestFrameRepr::parse(&TestFrame::new_checked(&bad[..]).unwrap()),
            Err(FrameError::BadChecksum)
        );
        let mut bad = buf.clone();
        bad[42] = b'X';
        assert!(matches!(
            TestFrameRepr::parse(&TestFrame::new_checked(&bad[..]).unwrap()),
            Err(FrameError::BadMagic(_))
        ));
        // Trailing padding (a NIC may pad) is accepted.
        let mut padded = buf.clone();
        padded.extend_from_slice(&[0; 4]);
        assert!(TestFrameRepr::parse(&TestFrame::new_checked(&padded[..]).unwrap()).is_ok());
    }

    #[test]
    fn benchmark_block() {
        assert!(is_benchmark_ipv4([198, 18, 0, 1]));
        assert!(is_benchmark_ipv4([198, 19, 255, 255]));
        assert!(!is_benchmark_ipv4([198, 20, 0, 1]));
        assert!(!is_benchmark_ipv4([10, 18, 0, 1]));
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(v) = TestFrame::new_checked(&bytes[..]) {
                let _ = TestFrameRepr::parse(&v);
                let _ = (v.seq(), v.tx_ns(), v.stream(), v.magic(), v.udp_len(), v.ip_checksum_ok());
            }
        }

        #[test]
        fn round_trip(size in 64u32..=1518, stream: u16, seq: u32, tx: u64, ttl: u8) {
            let mut r = repr(size);
            r.stream = stream; r.seq = seq; r.tx_ns = tx; r.ttl = ttl;
            let mut buf = vec![0; r.buffer_len()];
            r.emit(&mut buf);
            prop_assert_eq!(TestFrameRepr::parse(&TestFrame::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn single_bit_flips_in_the_ip_header_are_caught(bit in 0usize..160) {
            let r = repr(64);
            let mut buf = vec![0; r.buffer_len()];
            r.emit(&mut buf);
            buf[14 + bit / 8] ^= 1 << (bit % 8);
            prop_assert!(TestFrameRepr::parse(&TestFrame::new_checked(&buf[..]).unwrap()).is_err());
        }
    }
}
