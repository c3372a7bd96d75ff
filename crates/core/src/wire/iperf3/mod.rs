//! iperf3's wire protocol (esnet/iperf 3.1 to 3.21), as facts: the cookie,
//! the state bytes of the control connection, its length-prefixed JSON
//! messages, the parameters and results they carry, the UDP datagram header
//! and the UDP "connect" handshake, the authentication plaintext. The
//! session itself, both ends, is the sans-IO machine of [`session`].
//! docs/IPERF3.md lists every fact with the version it appeared in.
//!
//! Nothing here trusts the peer: every length is capped before memory
//! follows it, every number is range-checked, unknown keys are ignored.

pub mod auth;
pub mod params;
pub mod results;
pub mod session;
#[cfg(test)]
mod versions;

/// iperf3's default port (control, TCP data and UDP data).
pub const DEFAULT_PORT: u16 = 5201;

/// Length of the cookie: 36 characters and a NUL.
pub const COOKIE_LEN: usize = 37;

/// The cookie alphabet (RFC 4648 base32 characters, lower case).
const COOKIE_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// A session's cookie: sent first on the control connection and first on
/// every TCP data connection of the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cookie(pub [u8; COOKIE_LEN]);

impl Cookie {
    /// A cookie from 36 random bytes (each mapped onto the alphabet).
    pub fn from_random(bytes: [u8; COOKIE_LEN - 1]) -> Self {
        let mut c = [0u8; COOKIE_LEN];
        for (d, b) in c.iter_mut().zip(bytes) {
            *d = COOKIE_ALPHABET[usize::from(b & 31)];
        }
        Self(c)
    }

    /// The cookie in `buf` (its first [`COOKIE_LEN`] bytes), if long enough.
    /// Any bytes are accepted, as iperf3 does: a cookie is only compared.
    pub fn parse(buf: &[u8]) -> Option<Self> {
        let b: [u8; COOKIE_LEN] = buf.get(..COOKIE_LEN)?.try_into().ok()?;
        Some(Self(b))
    }

    /// The bytes on the wire.
    pub fn as_bytes(&self) -> &[u8; COOKIE_LEN] {
        &self.0
    }
}

/// Whether a connection's first byte starts an iperf3 cookie (a character
/// of the cookie alphabet). linerate's own control frames start with the
/// high byte of a length of at most 1 MiB, always 0, so one byte tells the
/// protocols apart.
pub fn starts_cookie(first: u8) -> bool {
    COOKIE_ALPHABET.contains(&first)
}

/// The state byte of the control connection (a signed char in iperf3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// 1: streams are connected, the test is about to start.
    TestStart,
    /// 2: the test runs.
    TestRunning,
    /// 4: the client ends the test.
    TestEnd,
    /// 9: the server asks for the parameters.
    ParamExchange,
    /// 10: the server asks the client to connect the streams.
    CreateStreams,
    /// 11: the server stops (signal).
    ServerTerminate,
    /// 12: the client stops (signal).
    ClientTerminate,
    /// 13: results are exchanged (client writes, then reads).
    ExchangeResults,
    /// 14: the client may print its results.
    DisplayResults,
    /// 15: iperf3's own start state (never sent by a conforming peer).
    IperfStart,
    /// 16: the client is done.
    IperfDone,
    /// −1: the server refuses (busy, or a cookie it does not know).
    AccessDenied,
    /// −2: the server reports an error: two big-endian int32 follow
    /// (iperf error code, errno).
    ServerError,
}

impl State {
    /// The byte on the wire.
    pub fn byte(self) -> u8 {
        match self {
            Self::TestStart => 1,
            Self::TestRunning => 2,
            Self::TestEnd => 4,
            Self::ParamExchange => 9,
            Self::CreateStreams => 10,
            Self::ServerTerminate => 11,
            Self::ClientTerminate => 12,
            Self::ExchangeResults => 13,
            Self::DisplayResults => 14,
            Self::IperfStart => 15,
            Self::IperfDone => 16,
            Self::AccessDenied => 0xff,
            Self::ServerError => 0xfe,
        }
    }

    /// The state a byte stands for.
    pub fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            1 => Self::TestStart,
            2 => Self::TestRunning,
            4 => Self::TestEnd,
            9 => Self::ParamExchange,
            10 => Self::CreateStreams,
            11 => Self::ServerTerminate,
            12 => Self::ClientTerminate,
            13 => Self::ExchangeResults,
            14 => Self::DisplayResults,
            15 => Self::IperfStart,
            16 => Self::IperfDone,
            0xff => Self::AccessDenied,
            0xfe => Self::ServerError,
            _ => return None,
        })
    }
}

/// iperf's error numbers that travel in SERVER_ERROR (`iperf_api.h`), the
/// ones linerate sends or explains.
pub mod errno {
    /// Test duration too long (`time` above 86400).
    pub const DURATION: i32 = 5;
    /// Too many parallel streams (above 128).
    pub const NUM_STREAMS: i32 = 6;
    /// Block size too large (TCP above 1 MiB, or 0).
    pub const BLOCK_SIZE: i32 = 7;
    /// Socket buffer size too large (above 512 MiB).
    pub const BUF_SIZE: i32 = 8;
    /// MSS too large (above 32767).
    pub const MSS: i32 = 10;
    /// Bogus omit value (above 600).
    pub const OMIT: i32 = 12;
    /// Invalid burst count (1–1000).
    pub const BURST: i32 = 15;
    /// UDP block size invalid (16–65507).
    pub const UDP_BLOCK_SIZE: i32 = 20;
    /// Bad TOS value (0–255).
    pub const BAD_TOS: i32 = 21;
    /// Total requested rate above the server's limit.
    pub const TOTAL_RATE: i32 = 27;
    /// Duration above the server's maximum.
    pub const MAX_DURATION: i32 = 37;
    /// Parameters could not be received (malformed, negative, too long).
    pub const RECV_PARAMS: i32 = 114;
    /// The client terminated.
    pub const CLIENT_TERM: i32 = 119;
    /// The server terminated.
    pub const SERVER_TERM: i32 = 120;
    /// The server is busy (what a client shows for ACCESS_DENIED).
    pub const ACCESS_DENIED: i32 = 121;
    /// IPv6 flow label out of range or not settable.
    pub const SET_FLOW: i32 = 127;
    /// Protocol not supported (SCTP).
    pub const PROTOCOL: i32 = 131;
    /// TCP congestion control could not be set.
    pub const SET_CONGESTION: i32 = 134;
    /// Authentication failed.
    pub const AUTH: i32 = 142;

    /// What iperf3 prints for an error number (the ones above), else a
    /// generic text with the number.
    pub fn describe(code: i32) -> String {
        match code {
            DURATION => "test duration too long (at most 86400 s)".into(),
            NUM_STREAMS => "too many parallel streams (at most 128)".into(),
            BLOCK_SIZE => "block size invalid (TCP: 1 B to 1 MiB)".into(),
            BUF_SIZE => "socket buffer size too large (at most 512 MiB)".into(),
            MSS => "MSS too large (at most 32767)".into(),
            OMIT => "bogus value for --omit (at most 600)".into(),
            BURST => "invalid burst count (1 to 1000)".into(),
            UDP_BLOCK_SIZE => "UDP block size invalid (16 to 65507 bytes)".into(),
            BAD_TOS => "bad TOS value (0 to 255)".into(),
            TOTAL_RATE => "total requested bitrate is above the server's limit".into(),
            MAX_DURATION => "the test is longer than the server's maximum duration".into(),
            RECV_PARAMS => "the parameters could not be received".into(),
            CLIENT_TERM => "the client has terminated".into(),
            SERVER_TERM => "the server has terminated".into(),
            ACCESS_DENIED => "the server is busy running a test; try again later".into(),
            SET_FLOW => "unable to set the IPv6 flow label".into(),
            PROTOCOL => "protocol not supported".into(),
            SET_CONGESTION => "unable to set TCP_CONGESTION".into(),
            AUTH => "test authorization failed".into(),
            160 => "the test's duration expired".into(),
            n => format!("iperf error {n}"),
        }
    }
}

/// The SERVER_ERROR message: state byte, error code, errno (big-endian).
pub fn server_error(code: i32, os_errno: i32) -> [u8; 9] {
    let mut m = [0u8; 9];
    m[0] = State::ServerError.byte();
    m[1..5].copy_from_slice(&code.to_be_bytes());
    m[5..9].copy_from_slice(&os_errno.to_be_bytes());
    m
}

/// Bytes of a JSON message's length prefix (big-endian u32).
pub const LEN_BYTES: usize = 4;
/// The largest parameters message accepted (iperf3's own limit, 8 KiB).
pub const MAX_PARAMS_BYTES: usize = 8 * 1024;
/// The largest results message accepted. iperf3 reads it unbounded; a
/// server's `server_output_json` of a long test with intervals is the
/// biggest legitimate one (about 1.5 KiB per stream-second).
pub const MAX_RESULTS_BYTES: usize = 8 << 20;

/// A JSON message on the wire: the length prefix and the body.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
    let mut f = Vec::with_capacity(LEN_BYTES + body.len());
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(body);
    f
}

/// The 4-byte datagram a client sends to "connect" a UDP stream: ASCII
/// "9876" since 3.12 (the integer 0x36373839 written on a little-endian host).
pub const UDP_CONNECT_MSG: [u8; 4] = *b"9876";
/// The server's answer: ASCII "6789" since 3.12.
pub const UDP_CONNECT_REPLY: [u8; 4] = *b"6789";
/// Before 3.12 the client sent the integer 123456789 in host order
/// (little-endian on every common host).
pub const LEGACY_UDP_CONNECT_MSG: [u8; 4] = 123_456_789u32.to_le_bytes();
/// Before 3.12 the server answered 987654321 in host order.
pub const LEGACY_UDP_CONNECT_REPLY: [u8; 4] = 987_654_321u32.to_le_bytes();

/// Whether 4 bytes are a server's UDP connect answer (either form).
pub fn is_udp_connect_reply(b: &[u8]) -> bool {
    b == UDP_CONNECT_REPLY || b == LEGACY_UDP_CONNECT_REPLY
}

/// The UDP datagram header: send time (CLOCK_REALTIME of the sender) and a
/// sequence number from 1, all big-endian; 12 bytes with a 32-bit sequence
/// number, 16 with `udp_counters_64bit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// Seconds of the send time.
    pub sec: u32,
    /// Microseconds of the send time.
    pub usec: u32,
    /// Sequence number (from 1).
    pub seq: u64,
}

/// The smallest UDP datagram iperf3 sends or accepts (`-l` lower bound).
pub const MIN_UDP_DATAGRAM: usize = 16;

impl UdpHeader {
    /// Header length for the counter width.
    pub fn len(wide: bool) -> usize {
        if wide {
            16
        } else {
            12
        }
    }

    /// Parses the header at the start of `buf` (None: too short).
    pub fn parse(buf: &[u8], wide: bool) -> Option<Self> {
        let b = buf.get(..Self::len(wide))?;
        let u32_at = |i: usize| -> Option<u32> {
            Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?))
        };
        let seq = if wide {
            u64::from_be_bytes(b.get(8..16)?.try_into().ok()?)
        } else {
            u64::from(u32_at(8)?)
        };
        Some(Self {
            sec: u32_at(0)?,
            usec: u32_at(4)?,
            seq,
        })
    }

    /// Writes the header at the start of `buf`; false when `buf` is too
    /// short (nothing written). A 32-bit counter keeps the low 32 bits.
    pub fn emit(&self, buf: &mut [u8], wide: bool) -> bool {
        let Some(b) = buf.get_mut(..Self::len(wide)) else {
            return false;
        };
        b[0..4].copy_from_slice(&self.sec.to_be_bytes());
        b[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if wide {
            b[8..16].copy_from_slice(&self.seq.to_be_bytes());
        } else {
            b[8..12].copy_from_slice(&(self.seq as u32).to_be_bytes());
        }
        true
    }

    /// The send time, ns since the Unix epoch.
    pub fn sent_ns(&self) -> u64 {
        u64::from(self.sec) * 1_000_000_000 + u64::from(self.usec) * 1000
    }
}

/// The id of the `index`-th stream (from 0) of a session: 1, 3, 4, 5, …
/// (iperf3 numbers streams this way and matches results by it).
pub fn stream_id(index: usize) -> i64 {
    let i = i64::try_from(index).unwrap_or(i64::MAX - 2);
    if i == 0 {
        1
    } else {
        i + 2
    }
}

/// What a UDP receiver counts, the way iperf3 counts it: the highest
/// sequence number seen is the packet count; a gap counts as lost; a
/// sequence number at or below the highest is late (out of order) and takes
/// one back from the lost count; jitter per RFC 1889 (smoothed by 1/16),
/// from the sender's and the receiver's CLOCK_REALTIME.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UdpCounts {
    /// Highest sequence number seen.
    pub packets: u64,
    /// Lost (gaps, less late arrivals).
    pub errors: u64,
    /// Late arrivals.
    pub out_of_order: u64,
    /// Smoothed jitter, ns.
    pub jitter_ns: f64,
    prev_transit_ns: Option<i128>,
}

impl UdpCounts {
    /// Counts one datagram with header `h`, arrived at `arrival_ns`
    /// (CLOCK_REALTIME, ns since the epoch).
    pub fn datagram(&mut self, h: &UdpHeader, arrival_ns: u64) {
        if h.seq > self.packets {
            self.errors = self
                .errors
                .saturating_add(h.seq.saturating_sub(self.packets).saturating_sub(1));
            self.packets = h.seq;
        } else {
            self.out_of_order = self.out_of_order.saturating_add(1);
            self.errors = self.errors.saturating_sub(1);
        }
        let transit = i128::from(arrival_ns) - i128::from(h.sent_ns());
        if let Some(prev) = self.prev_transit_ns {
            let d = (transit - prev).abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.prev_transit_ns = Some(transit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_is_36_alphabet_characters_and_a_nul() {
        let c = Cookie::from_random([255; 36]);
        assert_eq!(c.0[36], 0);
        assert!(c.0[..36].iter().all(|&b| starts_cookie(b)));
        assert_eq!(c.0.iter().position(|&b| b == 0), Some(36));
        assert_eq!(Cookie::parse(c.as_bytes()), Some(c));
        assert_eq!(Cookie::parse(&c.0[..36]), None);
        // A linerate frame starts with 0.
        assert!(!starts_cookie(0));
    }

    #[test]
    fn state_bytes_round_trip() {
        for b in 0..=255u8 {
            if let Some(s) = State::from_byte(b) {
                assert_eq!(s.byte(), b);
            }
        }
        assert_eq!(State::AccessDenied.byte() as i8, -1);
        assert_eq!(State::ServerError.byte() as i8, -2);
        assert_eq!(server_error(142, 0)[..5], [0xfe, 0, 0, 0, 142]);
    }

    #[test]
    fn udp_connect_values() {
        assert_eq!(LEGACY_UDP_CONNECT_MSG, [0x15, 0xcd, 0x5b, 0x07]);
        assert_eq!(LEGACY_UDP_CONNECT_REPLY, [0xb1, 0x68, 0xde, 0x3a]);
        assert!(is_udp_connect_reply(b"6789"));
        assert!(is_udp_connect_reply(&LEGACY_UDP_CONNECT_REPLY));
        assert!(!is_udp_connect_reply(b"9876"));
    }

    #[test]
    fn udp_header_both_widths() {
        let h = UdpHeader {
            sec: 1_700_000_000,
            usec: 999_999,
            seq: (1 << 32) + 5,
        };
        let mut b = [0u8; 16];
        assert!(h.emit(&mut b, true));
        assert_eq!(UdpHeader::parse(&b, true), Some(h));
        assert!(h.emit(&mut b, false));
        assert_eq!(UdpHeader::parse(&b, false).map(|x| x.seq), Some(5));
        assert_eq!(&b[8..12], &[0, 0, 0, 5]);
        assert!(!h.emit(&mut [0u8; 15], true));
        assert_eq!(UdpHeader::parse(&b[..11], false), None);
    }

    #[test]
    fn stream_ids_skip_two() {
        let ids: Vec<i64> = (0..4).map(stream_id).collect();
        assert_eq!(ids, [1, 3, 4, 5]);
    }

    #[test]
    fn udp_counts_as_iperf3() {
        let mut c = UdpCounts::default();
        let h = |seq| UdpHeader {
            sec: 0,
            usec: 0,
            seq,
        };
        for s in [1, 2, 5, 3, 6] {
            c.datagram(&h(s), 1000);
        }
        // 3 and 4 missing at 5 (2 lost), 3 came late: 1 lost, 1 late.
        assert_eq!((c.packets, c.errors, c.out_of_order), (6, 1, 1));
        assert_eq!(c.jitter_ns, 0.0);
        c.datagram(&h(7), 1000 + 16_000);
        assert_eq!(c.jitter_ns, 1000.0);
    }
}
