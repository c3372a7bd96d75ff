//! ICMP echo request and reply (RFC 792 for IPv4, RFC 4443 section 4 for
//! IPv6) carrying linerate's echo header ([`crate::wire::echo`]), as
//! `linerate latency --icmp` sends and reads them on a raw socket.
//!
//! ```text
//!  0      1      2          4       6          8
//!  | type | code | checksum | ident | seq (16) | payload: the 16-byte echo
//!                                                header, then its fill
//! ```
//! Requests carry linerate's echo header after the ICMP header so that a
//! reply is matched by its 64-bit sequence number, not ICMP's 16-bit one
//! (the ICMP sequence number is its low 16 bits). All integers are
//! big-endian. The ICMPv4 checksum (RFC 1071) covers the whole message; the
//! ICMPv6 one also covers a pseudo-header, and the kernel computes it on a
//! raw ICMPv6 socket (RFC 3542 section 3.1), so it is left 0 here.
//!
//! Length contract: [`Packet::new_checked`] accepts a buffer of at least
//! [`HEADER_LEN`] bytes; afterwards no accessor can panic. The raw socket
//! helpers ([`icmp_message`], [`EchoRepr::parse`], [`linerate_reply`])
//! check what they index.

use crate::wire::echo;
use crate::wire::testframe::internet_checksum;

/// Bytes of the ICMP echo header.
pub const HEADER_LEN: usize = 8;
/// ICMPv4 echo request type (RFC 792).
pub const ECHO_REQUEST_V4: u8 = 8;
/// ICMPv4 echo reply type.
pub const ECHO_REPLY_V4: u8 = 0;
/// ICMPv6 echo request type (RFC 4443 section 4.1).
pub const ECHO_REQUEST_V6: u8 = 128;
/// ICMPv6 echo reply type (RFC 4443 section 4.2).
pub const ECHO_REPLY_V6: u8 = 129;
/// The smallest message [`build_linerate_request`] writes and
/// [`linerate_reply`] accepts: ICMP header and linerate echo header.
pub const MIN_LINERATE_LEN: usize = HEADER_LEN + echo::HEADER_LEN;

/// The IP version an ICMP message travels over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// ICMPv4 (RFC 792).
    V4,
    /// ICMPv6 (RFC 4443).
    V6,
}

impl Family {
    /// The family of an address.
    pub fn of(ip: std::net::IpAddr) -> Self {
        if ip.is_ipv6() {
            Self::V6
        } else {
            Self::V4
        }
    }

    /// The echo request type of this family.
    pub const fn request_type(self) -> u8 {
        match self {
            Self::V4 => ECHO_REQUEST_V4,
            Self::V6 => ECHO_REQUEST_V6,
        }
    }

    /// The echo reply type of this family.
    pub const fn reply_type(self) -> u8 {
        match self {
            Self::V4 => ECHO_REPLY_V4,
            Self::V6 => ECHO_REPLY_V6,
        }
    }
}

/// Request or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EchoKind {
    /// Echo request.
    Request,
    /// Echo reply.
    Reply,
}

/// Why bytes are not the ICMP echo message looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IcmpError {
    /// Fewer bytes than the headers need.
    #[error("ICMP message truncated: {0} bytes, need {1}")]
    Truncated(usize, usize),
    /// What a raw IPv4 socket returned does not start with an IPv4 header
    /// of at least 20 bytes.
    #[error("not an IPv4 header (version/IHL byte {0:#04x})")]
    BadIpHeader(u8),
    /// Not an echo message of this family (type, code).
    #[error("ICMP type {0} code {1} is not an echo request or reply")]
    NotEcho(u8, u8),
    /// An echo message, but not the kind looked for.
    #[error("ICMP echo of the wrong kind (type {0})")]
    WrongKind(u8),
    /// An echo reply to another process (identifier).
    #[error("ICMP echo identifier {0} is not ours")]
    OtherIdent(u16),
    /// The payload is not a linerate echo probe.
    #[error(transparent)]
    Echo(#[from] echo::EchoError),
}

/// A view over an ICMP echo message (header and payload).
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checks (accessors may panic on fewer than
    /// [`HEADER_LEN`] bytes; use [`Packet::new_checked`] on received data).
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps `buffer` after checking it holds an ICMP echo header;
    /// afterwards no accessor can panic.
    pub fn new_checked(buffer: T) -> Result<Self, IcmpError> {
        let len = buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(IcmpError::Truncated(len, HEADER_LEN));
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

    /// ICMP type.
    pub fn msg_type(&self) -> u8 {
        self.b()[0]
    }

    /// ICMP code (0 for echo).
    pub fn code(&self) -> u8 {
        self.b()[1]
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes([self.b()[2], self.b()[3]])
    }

    /// Echo identifier.
    pub fn ident(&self) -> u16 {
        u16::from_be_bytes([self.b()[4], self.b()[5]])
    }

    /// Echo sequence number (16 bits).
    pub fn seq_no(&self) -> u16 {
        u16::from_be_bytes([self.b()[6], self.b()[7]])
    }

    /// The bytes after the ICMP header.
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }

    /// Whether the ICMPv4 checksum over the whole message verifies (RFC
    /// 1071: the message with its checksum sums to zero). Means nothing for
    /// ICMPv6, whose checksum covers a pseudo-header too.
    pub fn checksum_ok_v4(&self) -> bool {
        internet_checksum(self.b()) == 0
    }

    /// Request or reply, by type and code for `family`.
    pub fn echo_kind(&self, family: Family) -> Result<EchoKind, IcmpError> {
        let (t, c) = (self.msg_type(), self.code());
        match (t, c) {
            (t, 0) if t == family.request_type() => Ok(EchoKind::Request),
            (t, 0) if t == family.reply_type() => Ok(EchoKind::Reply),
            _ => Err(IcmpError::NotEcho(t, c)),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Recomputes the ICMPv4 checksum over the whole buffer (after the
    /// payload is written). For ICMPv6 the field is set to 0: the kernel
    /// fills it in.
    pub fn fill_checksum(&mut self, family: Family) {
        let b = self.buffer.as_mut();
        if b.len() < HEADER_LEN {
            return;
        }
        b[2..4].copy_from_slice(&[0, 0]);
        if family == Family::V4 {
            let c = internet_checksum(b);
            b[2..4].copy_from_slice(&c.to_be_bytes());
        }
    }

    /// The bytes after the ICMP header, to write.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// A parsed ICMP echo header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoRepr {
    /// IPv4 or IPv6.
    pub family: Family,
    /// Request or reply.
    pub kind: EchoKind,
    /// Identifier (linerate: derived from its process id).
    pub ident: u16,
    /// Sequence number (linerate: the low 16 bits of its own).
    pub seq_no: u16,
}

impl EchoRepr {
    /// Parses a checked view as an echo message of `family`.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>, family: Family) -> Result<Self, IcmpError> {
        Ok(Self {
            family,
            kind: p.echo_kind(family)?,
            ident: p.ident(),
            seq_no: p.seq_no(),
        })
    }

    /// Writes this header into the first [`HEADER_LEN`] bytes of `buf`, then
    /// the checksum over all of `buf` (so write the payload first). Returns
    /// [`IcmpError::Truncated`] and leaves `buf` as it is when it is shorter
    /// than a header.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), IcmpError> {
        if buf.len() < HEADER_LEN {
            return Err(IcmpError::Truncated(buf.len(), HEADER_LEN));
        }
        buf[0] = match self.kind {
            EchoKind::Request => self.family.request_type(),
            EchoKind::Reply => self.family.reply_type(),
        };
        buf[1] = 0;
        buf[4..6].copy_from_slice(&self.ident.to_be_bytes());
        buf[6..8].copy_from_slice(&self.seq_no.to_be_bytes());
        Packet::new_unchecked(buf).fill_checksum(self.family);
        Ok(())
    }
}

/// The ICMP message in what a raw socket returned: IPv4 raw sockets deliver
/// the IP header too (skipped by its IHL), IPv6 ones do not.
pub fn icmp_message(datagram: &[u8], family: Family) -> Result<&[u8], IcmpError> {
    if family == Family::V6 {
        return Ok(datagram);
    }
    let first = *datagram.first().ok_or(IcmpError::Truncated(0, 20))?;
    let ihl = usize::from(first & 0x0f) * 4;
    if ihl < 20 {
        return Err(IcmpError::BadIpHeader(first));
    }
    datagram
        .get(ihl..)
        .ok_or(IcmpError::Truncated(datagram.len(), ihl))
}

/// Writes a whole linerate ICMP echo request into `buf` (its length is the
/// message's: ICMP header, linerate echo header of `session` 0 and `seq`,
/// then whatever `buf` holds after it), with the ICMPv4 checksum (ICMPv6:
/// 0, the kernel's). The ICMP sequence number is the low 16 bits of `seq`.
pub fn build_linerate_request(
    buf: &mut [u8],
    family: Family,
    ident: u16,
    seq: u64,
) -> Result<(), IcmpError> {
    if buf.len() < MIN_LINERATE_LEN {
        return Err(IcmpError::Truncated(buf.len(), MIN_LINERATE_LEN));
    }
    echo::Packet::new_unchecked(&mut buf[HEADER_LEN..]).emit_request(0, seq);
    EchoRepr {
        family,
        kind: EchoKind::Request,
        ident,
        seq_no: seq as u16,
    }
    .emit(buf)
}

/// The linerate echo probe inside a raw socket's datagram, if it is an
/// echo reply of `family` to identifier `ident` carrying one (its
/// [`echo::Packet::seq`] is the request's 64-bit sequence number). The
/// checksum is not verified (the kernel delivered it).
pub fn linerate_reply(
    datagram: &[u8],
    family: Family,
    ident: u16,
) -> Result<echo::Packet<&[u8]>, IcmpError> {
    let msg = icmp_message(datagram, family)?;
    if msg.len() < MIN_LINERATE_LEN {
        return Err(IcmpError::Truncated(msg.len(), MIN_LINERATE_LEN));
    }
    let p = Packet::new_checked(msg)?;
    let r = EchoRepr::parse(&p, family)?;
    if r.kind != EchoKind::Reply {
        return Err(IcmpError::WrongKind(p.msg_type()));
    }
    if r.ident != ident {
        return Err(IcmpError::OtherIdent(r.ident));
    }
    Ok(echo::Packet::new_checked(
        p.into_inner().get(HEADER_LEN..).unwrap_or_default(),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a raw IPv4 socket returns: a 20-byte IP header, then `icmp`.
    fn with_ipv4_header(icmp: &[u8]) -> Vec<u8> {
        let mut d = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 1, 0, 0];
        d.extend_from_slice(&[198, 18, 0, 2, 198, 18, 0, 1]);
        d.extend_from_slice(icmp);
        d
    }

    /// The reply a peer's kernel makes of a request: type changed, the
    /// rest echoed, checksum recomputed.
    fn reply_of(req: &[u8], family: Family) -> Vec<u8> {
        let mut r = req.to_vec();
        r[0] = family.reply_type();
        Packet::new_unchecked(&mut r[..]).fill_checksum(family);
        r
    }

    #[test]
    fn request_has_a_verifying_checksum_and_round_trips() {
        let mut req = vec![0xa5u8; 8 + 100];
        build_linerate_request(&mut req, Family::V4, 0x1234, 0x1_0005).unwrap();
        let p = Packet::new_checked(&req[..]).unwrap();
        assert!(
            p.checksum_ok_v4(),
            "a message with its checksum sums to zero"
        );
        assert_eq!(
            EchoRepr::parse(&p, Family::V4).unwrap(),
            EchoRepr {
                family: Family::V4,
                kind: EchoKind::Request,
                ident: 0x1234,
                seq_no: 5
            }
        );
        let e = echo::Packet::new_checked(p.payload()).unwrap();
        assert_eq!(
            (e.kind(), e.seq(), e.session()),
            (Ok(echo::Kind::Request), 0x1_0005, 0)
        );
        // The fill after the echo header is left as it was.
        assert!(req[MIN_LINERATE_LEN..].iter().all(|&b| b == 0xa5));
    }

    #[test]
    fn same_bytes_as_the_io_client_wrote() {
        // What crates/io/src/echo/icmp.rs wrote by hand before this module.
        let (ident, seq) = (0x4c52u16, 70_000u64);
        let mut old = vec![0u8; 8 + 16];
        old[0] = ECHO_REQUEST_V4;
        old[4..6].copy_from_slice(&ident.to_be_bytes());
        old[6..8].copy_from_slice(&(seq as u16).to_be_bytes());
        echo::Packet::new_unchecked(&mut old[8..]).emit_request(0, seq);
        let c = internet_checksum(&old);
        old[2..4].copy_from_slice(&c.to_be_bytes());
        let mut new = vec![0u8; 8 + 16];
        build_linerate_request(&mut new, Family::V4, ident, seq).unwrap();
        assert_eq!(new, old);
        let mut v6 = vec![0u8; 8 + 16];
        build_linerate_request(&mut v6, Family::V6, ident, seq).unwrap();
        assert_eq!((v6[0], &v6[2..4]), (ECHO_REQUEST_V6, &[0u8, 0][..]));
    }

    #[test]
    fn replies_are_found_in_raw_datagrams() {
        let mut req = vec![0u8; 8 + 64];
        build_linerate_request(&mut req, Family::V4, 7, 42).unwrap();
        let d = with_ipv4_header(&reply_of(&req, Family::V4));
        let e = linerate_reply(&d, Family::V4, 7).unwrap();
        assert_eq!((e.seq(), e.len()), (42, 64));
        assert_eq!(
            linerate_reply(&d, Family::V4, 8).unwrap_err(),
            IcmpError::OtherIdent(7)
        );
        // Our own request, seen on the raw socket, is not a reply.
        let d = with_ipv4_header(&req);
        assert_eq!(
            linerate_reply(&d, Family::V4, 7).unwrap_err(),
            IcmpError::WrongKind(8)
        );
        // IPv6 raw sockets deliver the ICMP message alone.
        let mut req6 = vec![0u8; 8 + 16];
        build_linerate_request(&mut req6, Family::V6, 7, 43).unwrap();
        let r6 = reply_of(&req6, Family::V6);
        let e = linerate_reply(&r6, Family::V6, 7).unwrap();
        assert_eq!(e.seq(), 43);
    }

    #[test]
    fn garbage_is_refused() {
        assert_eq!(
            icmp_message(&[], Family::V4),
            Err(IcmpError::Truncated(0, 20))
        );
        assert_eq!(
            icmp_message(&[0x41], Family::V4),
            Err(IcmpError::BadIpHeader(0x41))
        );
        assert_eq!(
            icmp_message(&[0x45; 10], Family::V4),
            Err(IcmpError::Truncated(10, 20))
        );
        let mut b = vec![0x45u8; 20];
        b.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(icmp_message(&b, Family::V4).map(<[u8]>::len), Ok(4));
        assert_eq!(icmp_message(&[1, 2], Family::V6), Ok(&[1u8, 2][..]));
        assert_eq!(
            Packet::new_checked(&[0u8; 7][..]).unwrap_err(),
            IcmpError::Truncated(7, 8)
        );
        let p = Packet::new_checked(&[3u8, 1, 0, 0, 0, 0, 0, 0][..]).unwrap();
        assert_eq!(p.echo_kind(Family::V4), Err(IcmpError::NotEcho(3, 1)));
        assert!(build_linerate_request(&mut [0u8; 23], Family::V4, 1, 1).is_err());
        assert!(EchoRepr {
            family: Family::V4,
            kind: EchoKind::Reply,
            ident: 1,
            seq_no: 1
        }
        .emit(&mut [0u8; 7])
        .is_err());
        // An echo reply with a payload that is not ours.
        let mut r = vec![0u8; 8 + 16];
        r[..8].copy_from_slice(&[129, 0, 0, 0, 0, 7, 0, 1]);
        assert_eq!(
            linerate_reply(&r, Family::V6, 7).unwrap_err(),
            IcmpError::Echo(echo::EchoError::BadMagic)
        );
    }
}
