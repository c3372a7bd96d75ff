//! The RFC 2544 test frame: Ethernet II / IPv4 or IPv6 / UDP carrying a
//! linerate test header (magic, stream id, sequence number, transmit
//! timestamp).
//!
//! RFC 2544 section 8 and appendix C.2.6 ask for UDP/IP test frames; RFC 2544
//! section 12 and RFC 5735 reserve 198.18.0.0/15 for benchmarking IPv4, RFC
//! 5180 section 5 (and RFC 5156) 2001:2::/48 for IPv6, so every frame goes
//! between addresses of those blocks.
//!
//! Layout of the buffer (the frame from destination MAC to the end of the UDP
//! payload; the 4-byte FCS is added by the NIC and is **not** in the buffer,
//! but it is counted in the frame size, as in [`crate::linerate`]):
//!
//! ```text
//!  0  dst MAC 6 | src MAC 6 | EtherType 0x0800 (IPv4) or 0x86DD (IPv6)
//! 14  IPv4 header, 20 bytes, no options, DF set, TTL, proto 17, RFC 1071 checksum
//!     or IPv6 header, 40 bytes, next header 17, hop limit
//! 34|54  UDP header, 8 bytes; checksum 0 over IPv4 (allowed, RFC 768),
//!        computed over IPv6 (mandatory, RFC 8200 section 8.1)
//! 42|62  test header, 18 bytes:
//!       magic "LRT1" 4 | stream id u16 | sequence u32 | tx timestamp ns u64
//!        then zero padding up to the frame size - 4
//! ```
//!
//! The test header is 18 bytes so that it fits the smallest RFC 2544 frame:
//! 64 - 4 (FCS) - 14 - 20 - 8 = 18. Over IPv6 the smallest test frame is
//! 84 bytes (RFC 5180 section 5 notes that 64-byte IPv6 frames cannot carry a
//! UDP test payload). All fields are big-endian.
//!
//! Over IPv4 a generator only rewrites the sequence number and timestamp per
//! frame: the IPv4 checksum does not cover the payload, the identification
//! is constant (DF set, RFC 6864). Over IPv6 it must also call
//! [`TestFrame::fill_udp_checksum`].
//!
//! Length contract: [`TestFrame::new_checked`] accepts a buffer of at least
//! [`MIN_BUFFER_LEN`] bytes (at least [`MIN_BUFFER_LEN_V6`] when the
//! EtherType says IPv6); after it, every accessor reads a fixed offset below
//! that length and cannot panic. [`TestFrameRepr::parse`] additionally checks
//! EtherType, IP version/IHL/next header, the IPv4 header checksum or the
//! IPv6 UDP checksum, the IP and UDP lengths against the buffer, and the magic.

use std::net::IpAddr;
use std::ops::Range;

use crate::linerate::{Encap, ModelError, NetLayer, TransportLayer, FCS_BYTES};

/// Magic at the start of the test header: "LRT1" (linerate test frame, version 1).
pub const MAGIC: u32 = u32::from_be_bytes(*b"LRT1");
/// EtherType of IPv4 (IEEE 802 numbers).
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// IP protocol number of UDP (IANA).
pub const IPPROTO_UDP: u8 = 17;
/// UDP port on both sides: 9, discard (RFC 863), so that a host that does
/// deliver a test frame to its UDP layer has nothing to answer.
pub const DEFAULT_PORT: u16 = 9;
/// Bytes of the test header.
pub const TEST_HEADER_LEN: usize = 18;

const ETH: usize = 14;
const V4_L4: usize = ETH + 20;
const V6_L4: usize = ETH + 40;

/// Smallest IPv4 buffer that holds every header: 14 + 20 + 8 + 18 = 60 bytes
/// (a 64-byte frame without its FCS).
pub const MIN_BUFFER_LEN: usize = V4_L4 + 8 + TEST_HEADER_LEN;
/// Smallest IPv6 buffer: 14 + 40 + 8 + 18 = 80 bytes (an 84-byte frame).
pub const MIN_BUFFER_LEN_V6: usize = V6_L4 + 8 + TEST_HEADER_LEN;

/// Why bytes are not a linerate test frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the headers need.
    #[error("{0} bytes is shorter than a test frame ({MIN_BUFFER_LEN} bytes, {MIN_BUFFER_LEN_V6} over IPv6)")]
    Truncated(usize),
    /// Neither IPv4 nor IPv6 (EtherType).
    #[error("EtherType {0:#06x} is not IPv4 or IPv6")]
    NotIp(u16),
    /// IPv4 header with options, or a wrong IP version.
    #[error("unsupported IP version/IHL byte {0:#04x}")]
    BadIpHeader(u8),
    /// Not UDP.
    #[error("IP protocol {0} is not UDP")]
    NotUdp(u8),
    /// The IPv4 header checksum or the IPv6 UDP checksum is wrong (RFC 1071).
    #[error("checksum is wrong")]
    BadChecksum,
    /// IP or UDP length disagrees with the buffer.
    #[error("IP/UDP length fields disagree with the {0}-byte buffer")]
    BadLength(usize),
    /// The magic is not "LRT1": some other UDP traffic.
    #[error("no linerate test header (magic {0:#010x})")]
    BadMagic(u32),
}

/// Why a test frame could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The frame size does not fit the encapsulation.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Source and destination are of different address families.
    #[error("source {0} and destination {1} are not of the same IP version")]
    MixedFamilies(IpAddr, IpAddr),
}

/// A view over the bytes of a test frame (no FCS).
#[derive(Debug, Clone)]
pub struct TestFrame<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}
fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// One's-complement sum of 16-bit big-endian words (odd byte padded), not
/// folded or inverted, to chain over several pieces.
fn sum16(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The Internet checksum of `data` (RFC 1071): one's-complement of the
/// one's-complement sum of the 16-bit big-endian words, odd byte padded.
pub fn internet_checksum(data: &[u8]) -> u16 {
    fold(sum16(0, data))
}

/// The UDP checksum over IPv6 (RFC 8200 section 8.1): pseudo-header of
/// source, destination, upper-layer length and next header, then the UDP
/// header (checksum field as given) and payload. 0 is sent as 0xffff.
fn udp6_checksum(src: &[u8], dst: &[u8], udp: &[u8]) -> u16 {
    let mut acc = sum16(0, src);
    acc = sum16(acc, dst);
    acc += udp.len() as u64; // upper-layer length (fits: jumbo max 16 KiB)
    acc += u64::from(IPPROTO_UDP);
    fold(sum16(acc, udp))
}

impl<T: AsRef<[u8]>> TestFrame<T> {
    /// Wraps a buffer without checking it (accessors may panic on a short
    /// buffer; use [`Self::new_checked`] on anything from the network).
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer of at least [`MIN_BUFFER_LEN`] bytes
    /// ([`MIN_BUFFER_LEN_V6`] when the EtherType is IPv6); afterwards no
    /// accessor can panic.
    pub fn new_checked(buffer: T) -> Result<Self, FrameError> {
        let b = buffer.as_ref();
        let len = b.len();
        if len < MIN_BUFFER_LEN || (be16(b, 12) == ETHERTYPE_IPV6 && len < MIN_BUFFER_LEN_V6) {
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

    /// True when the EtherType says IPv6.
    pub fn is_ipv6(&self) -> bool {
        self.ethertype() == ETHERTYPE_IPV6
    }

    fn l4(&self) -> usize {
        if self.is_ipv6() {
            V6_L4
        } else {
            V4_L4
        }
    }

    fn t(&self) -> usize {
        self.l4() + 8
    }

    /// Destination MAC.
    pub fn dst_mac(&self) -> [u8; 6] {
        let mut m = [0; 6];
        m.copy_from_slice(&self.b()[0..6]);
        m
    }
    /// Source MAC.
    pub fn src_mac(&self) -> [u8; 6] {
        let mut m = [0; 6];
        m.copy_from_slice(&self.b()[6..12]);
        m
    }
    /// EtherType.
    pub fn ethertype(&self) -> u16 {
        be16(self.b(), 12)
    }
    /// First byte of the IP header: version and IHL (0x45 for IPv4 without
    /// options; 0x6_ for IPv6).
    pub fn ip_ver_byte(&self) -> u8 {
        self.b()[ETH]
    }
    /// IPv4 total length, or IPv6 header + payload length.
    pub fn ip_total_len(&self) -> usize {
        if self.is_ipv6() {
            40 + usize::from(be16(self.b(), ETH + 4))
        } else {
            usize::from(be16(self.b(), ETH + 2))
        }
    }
    /// IPv4 TTL or IPv6 hop limit.
    pub fn ttl(&self) -> u8 {
        self.b()[if self.is_ipv6() { ETH + 7 } else { ETH + 8 }]
    }
    /// IPv4 protocol or IPv6 next header.
    pub fn ip_proto(&self) -> u8 {
        self.b()[if self.is_ipv6() { ETH + 6 } else { ETH + 9 }]
    }
    fn ip_ranges(&self) -> (Range<usize>, Range<usize>) {
        if self.is_ipv6() {
            (ETH + 8..ETH + 24, ETH + 24..ETH + 40)
        } else {
            (ETH + 12..ETH + 16, ETH + 16..ETH + 20)
        }
    }
    fn ip_at(&self, r: Range<usize>) -> IpAddr {
        let b = &self.b()[r];
        if let Ok(a) = <[u8; 16]>::try_from(b) {
            IpAddr::from(a)
        } else {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[..4]);
            IpAddr::from(a)
        }
    }
    /// Source address.
    pub fn src_ip(&self) -> IpAddr {
        self.ip_at(self.ip_ranges().0)
    }
    /// Destination address.
    pub fn dst_ip(&self) -> IpAddr {
        self.ip_at(self.ip_ranges().1)
    }
    /// True when the checksum that protects this frame verifies: the IPv4
    /// header checksum, or the IPv6 UDP checksum over the UDP length (a zero
    /// IPv6 UDP checksum is invalid).
    pub fn checksum_ok(&self) -> bool {
        if self.is_ipv6() {
            let end = self.l4() + usize::from(self.udp_len());
            if end > self.b().len() || be16(self.b(), self.l4() + 6) == 0 {
                return false;
            }
            let (s, d) = self.ip_ranges();
            fold(sum16(
                sum16(sum16(0, &self.b()[s]), &self.b()[d])
                    + u64::from(self.udp_len())
                    + u64::from(IPPROTO_UDP),
                &self.b()[self.l4()..end],
            )) == 0
        } else {
            internet_checksum(&self.b()[ETH..V4_L4]) == 0
        }
    }
    /// UDP source port.
    pub fn src_port(&self) -> u16 {
        be16(self.b(), self.l4())
    }
    /// UDP destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), self.l4() + 2)
    }
    /// UDP length (header and payload).
    pub fn udp_len(&self) -> u16 {
        be16(self.b(), self.l4() + 4)
    }
    /// The magic word.
    pub fn magic(&self) -> u32 {
        be32(self.b(), self.t())
    }
    /// Stream id.
    pub fn stream(&self) -> u16 {
        be16(self.b(), self.t() + 4)
    }
    /// Sequence number within the stream.
    pub fn seq(&self) -> u32 {
        be32(self.b(), self.t() + 6)
    }
    /// Transmit timestamp in nanoseconds (clock chosen by the generator).
    pub fn tx_ns(&self) -> u64 {
        be64(self.b(), self.t() + 10)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TestFrame<T> {
    fn put(&mut self, at: usize, bytes: &[u8]) {
        self.buffer.as_mut()[at..at + bytes.len()].copy_from_slice(bytes);
    }
    /// Sets the sequence number (the generator's hot path).
    pub fn set_seq(&mut self, seq: u32) {
        let at = self.t() + 6;
        self.put(at, &seq.to_be_bytes());
    }
    /// Sets the transmit timestamp (the generator's hot path).
    pub fn set_tx_ns(&mut self, ns: u64) {
        let at = self.t() + 10;
        self.put(at, &ns.to_be_bytes());
    }
    /// Sets the stream id.
    pub fn set_stream(&mut self, stream: u16) {
        let at = self.t() + 4;
        self.put(at, &stream.to_be_bytes());
    }
    /// Recomputes the UDP checksum of an IPv6 frame after its fields
    /// changed (IPv4 frames carry none: a no-op). A UDP length beyond the
    /// buffer leaves the frame as it is.
    pub fn fill_udp_checksum(&mut self) {
        if !self.is_ipv6() {
            return;
        }
        let l4 = self.l4();
        let end = l4 + usize::from(self.udp_len());
        if end > self.b().len() {
            return;
        }
        self.put(l4 + 6, &[0, 0]);
        let (s, d) = self.ip_ranges();
        let b = self.b();
        let c = udp6_checksum(&b[s], &b[d], &b[l4..end]);
        let c = if c == 0 { 0xffff } else { c };
        self.put(l4 + 6, &c.to_be_bytes());
    }
}

/// A parsed, validated test frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestFrameRepr {
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Source (198.18.0.0/15 or 2001:2::/48 for tests).
    pub src_ip: IpAddr,
    /// Destination (same family as the source).
    pub dst_ip: IpAddr,
    /// IPv4 TTL or IPv6 hop limit.
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

/// True when `ip` is in a benchmarking block: 198.18.0.0/15 or 2001:2::/48
/// (RFC 5180 section 5).
pub fn is_benchmark_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => is_benchmark_ipv4(a.octets()),
        IpAddr::V6(a) => {
            let s = a.segments();
            s[0] == 0x2001 && s[1] == 0x0002 && s[2] == 0
        }
    }
}

impl TestFrameRepr {
    /// A test frame of `frame_bytes` (destination MAC to FCS, as
    /// [`crate::linerate`] counts) between the given addresses: UDP over
    /// IPv4 or IPv6 (by the addresses' family) with the payload that fills
    /// it. RFC 2544 section 9 sizes are 64..1518 (84..1518 over IPv6);
    /// `jumbo` allows up to the jumbo maximum.
    pub fn for_frame_size(
        frame_bytes: u32,
        jumbo: bool,
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        src_ip: IpAddr,
        dst_ip: IpAddr,
    ) -> Result<Self, BuildError> {
        let net = match (src_ip, dst_ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) => NetLayer::Ipv4,
            (IpAddr::V6(_), IpAddr::V6(_)) => NetLayer::Ipv6,
            _ => return Err(BuildError::MixedFamilies(src_ip, dst_ip)),
        };
        let encap = Encap {
            net,
            transport: TransportLayer::Udp,
            ..Encap::ETHERNET
        };
        let frame = encap.frame_of_length(frame_bytes, jumbo)?;
        if frame.payload_bytes < TEST_HEADER_LEN as u32 || frame.padding_bytes > 0 {
            return Err(ModelError::FrameTooSmall {
                frame: frame_bytes,
                headers: encap.frame_overhead_bytes() + TEST_HEADER_LEN as u32,
                encap,
            }
            .into());
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
        let v6 = match p.ethertype() {
            ETHERTYPE_IPV4 => false,
            ETHERTYPE_IPV6 => true,
            other => return Err(FrameError::NotIp(other)),
        };
        if len
            < if v6 {
                MIN_BUFFER_LEN_V6
            } else {
                MIN_BUFFER_LEN
            }
        {
            return Err(FrameError::Truncated(len));
        }
        let ver = p.ip_ver_byte();
        if (v6 && ver >> 4 != 6) || (!v6 && ver != 0x45) {
            return Err(FrameError::BadIpHeader(ver));
        }
        if p.ip_proto() != IPPROTO_UDP {
            return Err(FrameError::NotUdp(p.ip_proto()));
        }
        let ip_len = p.ip_total_len();
        let udp_len = usize::from(p.udp_len());
        let ip_hdr = if v6 { 40 } else { 20 };
        // The buffer may carry trailing Ethernet padding, never less than the
        // IP packet.
        if ip_len + ETH > len || udp_len + ip_hdr != ip_len || udp_len < 8 + TEST_HEADER_LEN {
            return Err(FrameError::BadLength(len));
        }
        if !p.checksum_ok() {
            return Err(FrameError::BadChecksum);
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

    fn is_ipv6(&self) -> bool {
        self.src_ip.is_ipv6()
    }

    fn l4(&self) -> usize {
        if self.is_ipv6() {
            V6_L4
        } else {
            V4_L4
        }
    }

    /// Bytes [`Self::emit`] writes: the frame without its FCS.
    pub fn buffer_len(&self) -> usize {
        self.l4() + 8 + usize::from(self.udp_payload_len)
    }

    /// The frame size on the wire model: buffer plus FCS.
    pub fn frame_bytes(&self) -> u32 {
        self.buffer_len() as u32 + FCS_BYTES
    }

    /// Writes the frame into the first [`Self::buffer_len`] bytes of `buf`
    /// (header fields, checksums, zero padding).
    ///
    /// # Panics
    /// If `buf` is shorter than [`Self::buffer_len`] (a programming error:
    /// the caller sizes its own buffer).
    pub fn emit(&self, buf: &mut [u8]) {
        let n = self.buffer_len();
        assert!(buf.len() >= n, "test frame buffer too short");
        let b = &mut buf[..n];
        b.fill(0);
        b[0..6].copy_from_slice(&self.dst_mac);
        b[6..12].copy_from_slice(&self.src_mac);
        let udp_len = 8 + self.udp_payload_len;
        match (self.src_ip, self.dst_ip) {
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                b[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
                b[ETH] = 0x60;
                b[ETH + 4..ETH + 6].copy_from_slice(&udp_len.to_be_bytes());
                b[ETH + 6] = IPPROTO_UDP;
                b[ETH + 7] = self.ttl;
                b[ETH + 8..ETH + 24].copy_from_slice(&s.octets());
                b[ETH + 24..ETH + 40].copy_from_slice(&d.octets());
            }
            (s, d) => {
                // Mixed families cannot be built by `for_frame_size`; a
                // hand-made one is emitted as IPv4 with what fits.
                let v4 = |ip: IpAddr| match ip {
                    IpAddr::V4(a) => a.octets(),
                    IpAddr::V6(_) => [0; 4],
                };
                b[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
                b[ETH] = 0x45;
                b[ETH + 2..ETH + 4].copy_from_slice(&(20 + udp_len).to_be_bytes());
                // Identification 0, DF set (RFC 6864 section 4.1: atomic datagrams).
                b[ETH + 6..ETH + 8].copy_from_slice(&0x4000u16.to_be_bytes());
                b[ETH + 8] = self.ttl;
                b[ETH + 9] = IPPROTO_UDP;
                b[ETH + 12..ETH + 16].copy_from_slice(&v4(s));
                b[ETH + 16..ETH + 20].copy_from_slice(&v4(d));
                let csum = internet_checksum(&b[ETH..V4_L4]);
                b[ETH + 10..ETH + 12].copy_from_slice(&csum.to_be_bytes());
            }
        }
        let l4 = self.l4();
        b[l4..l4 + 2].copy_from_slice(&self.src_port.to_be_bytes());
        b[l4 + 2..l4 + 4].copy_from_slice(&self.dst_port.to_be_bytes());
        b[l4 + 4..l4 + 6].copy_from_slice(&udp_len.to_be_bytes());
        let t = l4 + 8;
        b[t..t + 4].copy_from_slice(&MAGIC.to_be_bytes());
        b[t + 4..t + 6].copy_from_slice(&self.stream.to_be_bytes());
        b[t + 6..t + 10].copy_from_slice(&self.seq.to_be_bytes());
        b[t + 10..t + 18].copy_from_slice(&self.tx_ns.to_be_bytes());
        TestFrame::new_unchecked(b).fill_udp_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linerate::RFC2544_FRAME_SIZES;
    use proptest::prelude::*;
    use std::net::Ipv6Addr;

    const V4Z: IpAddr = IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);

    fn repr6(size: u32) -> TestFrameRepr {
        TestFrameRepr::for_frame_size(
            size,
            size > 1518,
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1)),
            IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2)),
        )
        .unwrap()
    }

    #[test]
    fn ipv6_frames_round_trip_with_a_valid_udp_checksum() {
        // RFC 5180: 64-byte frames cannot carry IPv6 + UDP + a test header.
        assert!(matches!(
            TestFrameRepr::for_frame_size(
                83,
                false,
                [0; 6],
                [0; 6],
                IpAddr::V6(Ipv6Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST)
            ),
            Err(BuildError::Model(_))
        ));
        assert_eq!(repr6(84).buffer_len(), MIN_BUFFER_LEN_V6);
        for size in [84u32, 128, 256, 512, 1024, 1280, 1518, 9018] {
            let mut r = repr6(size);
            r.stream = 9;
            r.seq = 77;
            r.tx_ns = 5;
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut buf);
            assert_eq!(buf.len() as u32 + 4, size);
            let mut v = TestFrame::new_checked(&mut buf[..]).unwrap();
            assert!(v.is_ipv6() && v.checksum_ok());
            assert_eq!(TestFrameRepr::parse(&v).unwrap(), r);
            // The hot path: new sequence and time, then the checksum.
            v.set_seq(78);
            v.set_tx_ns(6);
            assert!(!v.checksum_ok());
            v.fill_udp_checksum();
            let p = TestFrameRepr::parse(&v).unwrap();
            assert_eq!((p.seq, p.tx_ns), (78, 6));
        }
    }

    #[test]
    fn ipv6_payload_corruption_is_caught_and_short_v6_is_truncated() {
        let r = repr6(128);
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf);
        let mut bad = buf.clone();
        bad[100] ^= 0x10; // padding, covered by the UDP checksum
        assert_eq!(
            TestFrameRepr::parse(&TestFrame::new_checked(&bad[..]).unwrap()),
            Err(FrameError::BadChecksum)
        );
        assert_eq!(
            TestFrame::new_checked(&buf[..79]).unwrap_err(),
            FrameError::Truncated(79)
        );
        let mixed = TestFrameRepr::for_frame_size(
            128,
            false,
            [0; 6],
            [0; 6],
            V4Z,
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        );
        assert!(matches!(mixed, Err(BuildError::MixedFamilies(..))));
        assert!(is_benchmark_ip(r.src_ip));
        assert!(!is_benchmark_ip(IpAddr::V6(Ipv6Addr::LOCALHOST)));
    }

    fn repr(size: u32) -> TestFrameRepr {
        TestFrameRepr::for_frame_size(
            size,
            size > 1518,
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            IpAddr::from([198, 18, 0, 1]),
            IpAddr::from([198, 19, 0, 2]),
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
            assert!(view.checksum_ok());
            assert_eq!(TestFrameRepr::parse(&view).unwrap(), r);
        }
    }

    #[test]
    fn minimum_frame_is_exactly_full() {
        let r = repr(64);
        assert_eq!(r.buffer_len(), MIN_BUFFER_LEN);
        assert_eq!(r.udp_payload_len as usize, TEST_HEADER_LEN);
        assert!(TestFrameRepr::for_frame_size(63, false, [0; 6], [0; 6], V4Z, V4Z).is_err());
        assert!(TestFrameRepr::for_frame_size(1519, false, [0; 6], [0; 6], V4Z, V4Z).is_err());
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
        // Says IPv6 but is too short for it.
        assert_eq!(
            TestFrame::new_checked(&bad[..]).unwrap_err(),
            FrameError::Truncated(60)
        );
        bad[12] = 0x08;
        bad[13] = 0x06;
        assert_eq!(
            TestFrameRepr::parse(&TestFrame::new_checked(&bad[..]).unwrap()),
            Err(FrameError::NotIp(0x0806))
        );
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
                let _ = (v.seq(), v.tx_ns(), v.stream(), v.magic(), v.udp_len(), v.checksum_ok(), v.src_ip(), v.ttl());
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
        fn round_trip_v6(size in 84u32..=1518, stream: u16, seq: u32, tx: u64, ttl: u8) {
            let mut r = repr6(size);
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
