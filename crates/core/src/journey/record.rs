//! The record a `tp_btf` tracer program writes for each matching event
//! (the layout the programs in `linerate_io` fill, decoded here): fixed
//! offsets, little-endian.
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 8 | `bpf_ktime_get_ns()` (CLOCK_MONOTONIC), ns |
//! | 8 | 8 | the skb's address (the socket's for `sock_recv_length`) |
//! | 16 | 4 | the length the program filtered on |
//! | 20 | 4 | the tracepoint's index in [`TRACEPOINTS`] |
//! | 24 | 4 | `bpf_get_smp_processor_id()` |
//! | 28 | 4 | the device's ifindex (0: none) |
//! | 32 | 4 | the device's network namespace inode (0: not read) |
//! | 36 | 4 | `kfree_skb`'s drop reason (else zero) |
//! | 40 | 16 | the device's name, NUL-padded |
//! | 56 | 8 | `kfree_skb`'s location (else zero) |
//! | 64 | 1 | `--iface`: the IP version read (4, 6; 0: headers not read) |
//! | 65 | 1 | `--iface`: why it was kept: 1 its headers matched, 2 its skb matched before (0: a probe journey's record) |
//! | 66 | 1 | IP protocol (IPv6: next header) |
//! | 67 | 1 | zero |
//! | 68 | 2 | IPv4 total length or IPv6 payload length, big-endian |
//! | 70 | 2 | IPv4 identification or the IPv6 flow label's low 16 bits, big-endian |
//! | 72 | 8 | the transport header's first 8 bytes |

use super::event::{Event, Headers, Kept, Point, TRACEPOINTS};
use super::filter::IPV6_HEADER;

/// Offset of the time.
pub const TIME: i16 = 0;
/// Offset of the skb (or socket) address.
pub const ADDR: i16 = 8;
/// Offset of the length.
pub const LEN: i16 = 16;
/// Offset of the tracepoint index.
pub const CODE: i16 = 20;
/// Offset of the CPU.
pub const CPU: i16 = 24;
/// Offset of the ifindex.
pub const IFINDEX: i16 = 28;
/// Offset of the namespace inode.
pub const NETNS: i16 = 32;
/// Offset of the drop reason.
pub const REASON: i16 = 36;
/// Offset of the device name.
pub const NAME: i16 = 40;
/// Offset of the drop location.
pub const LOCATION: i16 = 56;
/// Offset of the IP version read (`--iface`).
pub const VERSION: i16 = 64;
/// Offset of why the event was kept (`--iface`).
pub const KEPT: i16 = 65;
/// Offset of the IP protocol.
pub const PROTO: i16 = 66;
/// Offset of the IP length field, as in the header.
pub const IP_LEN: i16 = 68;
/// Offset of the IPv4 identification / flow label bits.
pub const IDENT: i16 = 70;
/// Offset of the transport header's first 8 bytes.
pub const TRANSPORT: i16 = 72;
/// Bytes of a record.
pub const SIZE: i16 = 80;
/// [`KEPT`]: its headers matched.
pub const KEPT_HEADERS: u8 = 1;
/// [`KEPT`]: its skb matched before.
pub const KEPT_CHAIN: u8 = 2;

fn kept(b: &[u8]) -> Option<Kept> {
    let be16 = |at: i16| u16::from_be_bytes([b[at as usize], b[at as usize + 1]]);
    match b[KEPT as usize] {
        KEPT_HEADERS => {
            let version = b[VERSION as usize];
            let len = u32::from(be16(IP_LEN)) + if version == 6 { IPV6_HEADER } else { 0 };
            Some(Kept::Headers(Headers {
                version,
                proto: b[PROTO as usize],
                len,
                ident: be16(IDENT),
                transport: b[TRANSPORT as usize..SIZE as usize].try_into().ok()?,
            }))
        }
        KEPT_CHAIN => Some(Kept::Chain),
        _ => None,
    }
}

fn u32_at(b: &[u8], at: i16) -> Option<u32> {
    let at = at as usize;
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: i16) -> Option<u64> {
    let at = at as usize;
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The tracepoint index a program writes for `point` (None: not a
/// tracepoint).
pub fn code_of(point: Point) -> Option<u32> {
    TRACEPOINTS
        .iter()
        .position(|t| t.point == point)
        .map(|i| i as u32)
}

/// The event a record holds (None: too short, or an unknown code).
/// `reason_name` names a `kfree_skb` drop reason (`enum skb_drop_reason`).
pub fn decode(b: &[u8], reason_name: impl Fn(u64) -> Option<String>) -> Option<Event> {
    if b.len() < SIZE as usize {
        return None;
    }
    let point = TRACEPOINTS.get(u32_at(b, CODE)? as usize)?.point;
    let name = &b[NAME as usize..NAME as usize + 16];
    let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
    let dev = std::str::from_utf8(&name[..end])
        .ok()
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let addr = u64_at(b, ADDR)?;
    let socket = point == Point::SockRecvLength;
    // The events without an skb: their address is none (a NAPI poll's is
    // its `napi_struct`), and only a NAPI poll's length means something
    // (the packets it handled), as in the perf samples.
    let no_skb = point.attributed();
    let ifindex = u32_at(b, IFINDEX)?;
    let netns = u32_at(b, NETNS)?;
    let drop = point == Point::KfreeSkb;
    let reason = u64::from(u32_at(b, REASON)?);
    Some(Event {
        point,
        time_ns: u64_at(b, TIME)?,
        cpu: Some(u32_at(b, CPU)?),
        skb: (!socket && !no_skb).then_some(addr),
        len: Some(u32_at(b, LEN)?).filter(|_| !no_skb || point == Point::NapiPoll),
        dev,
        ifindex: i32::try_from(ifindex).ok().filter(|&i| i > 0),
        netns: (netns != 0).then_some(netns),
        sk: socket.then_some(addr),
        reason: drop.then(|| reason_name(reason).unwrap_or_else(|| format!("reason {reason}"))),
        location: drop.then_some(u64_at(b, LOCATION)?),
        seq: None,
        kept: kept(b),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_decode_into_events() {
        let mut b = vec![0u8; SIZE as usize];
        b[0..8].copy_from_slice(&123u64.to_le_bytes());
        b[8..16].copy_from_slice(&0xffff_8880_0000_1000u64.to_le_bytes());
        b[16..20].copy_from_slice(&142u32.to_le_bytes());
        let code = code_of(Point::NetifReceiveSkb).unwrap();
        b[20..24].copy_from_slice(&code.to_le_bytes());
        b[24..28].copy_from_slice(&1u32.to_le_bytes());
        b[28..32].copy_from_slice(&7u32.to_le_bytes());
        b[32..36].copy_from_slice(&4_026_532_000u32.to_le_bytes());
        b[40..44].copy_from_slice(b"lr-b");
        let none = |_| None;
        let e = decode(&b, none).unwrap();
        assert_eq!(e.point, Point::NetifReceiveSkb);
        assert_eq!((e.reason, e.location), (None, None));
        assert_eq!((e.time_ns, e.cpu, e.len), (123, Some(1), Some(142)));
        assert_eq!(e.skb, Some(0xffff_8880_0000_1000));
        assert_eq!((e.dev.as_deref(), e.ifindex), (Some("lr-b"), Some(7)));
        assert_eq!(e.netns, Some(4_026_532_000));
        assert_eq!(e.sk, None);
        // sock_recv_length carries a socket, not an skb; no device.
        let code = code_of(Point::SockRecvLength).unwrap();
        b[20..24].copy_from_slice(&code.to_le_bytes());
        b[28..56].fill(0);
        let e = decode(&b, none).unwrap();
        assert_eq!((e.skb, e.sk), (None, Some(0xffff_8880_0000_1000)));
        assert_eq!((e.dev, e.ifindex, e.netns), (None, None, None));
        // A NAPI poll carries its napi_struct and the packets it handled,
        // not an skb; a FIB lookup neither.
        let code = code_of(Point::NapiPoll).unwrap();
        b[20..24].copy_from_slice(&code.to_le_bytes());
        let e = decode(&b, none).unwrap();
        assert_eq!((e.skb, e.sk, e.len), (None, None, Some(142)));
        let code = code_of(Point::FibTableLookup).unwrap();
        b[20..24].copy_from_slice(&code.to_le_bytes());
        let e = decode(&b, none).unwrap();
        assert_eq!((e.skb, e.len), (None, None));
        // A drop names its reason and location.
        let code = code_of(Point::KfreeSkb).unwrap();
        b[20..24].copy_from_slice(&code.to_le_bytes());
        b[36..40].copy_from_slice(&6u32.to_le_bytes());
        b[56..64].copy_from_slice(&0xffff_ffff_8100_0000u64.to_le_bytes());
        let e = decode(&b, |r| (r == 6).then(|| "SOCKET_RCVBUFF".to_string())).unwrap();
        assert_eq!(e.reason.as_deref(), Some("SOCKET_RCVBUFF"));
        assert_eq!(e.location, Some(0xffff_ffff_8100_0000));
        b[36..40].copy_from_slice(&77u32.to_le_bytes());
        assert_eq!(
            decode(&b, none).unwrap().reason.as_deref(),
            Some("reason 77")
        );
        // Unknown codes and short records are skipped.
        b[20..24].copy_from_slice(&999u32.to_le_bytes());
        assert_eq!(decode(&b, none), None);
        assert_eq!(decode(&b[..56], none), None);
        // --iface records say why they were kept and what the headers showed.
        let code = code_of(Point::NetDevQueue).unwrap();
        b[20..24].copy_from_slice(&code.to_le_bytes());
        assert_eq!(decode(&b, none).unwrap().kept, None);
        b[64] = 6;
        b[65] = KEPT_HEADERS;
        b[66] = 17;
        b[68..70].copy_from_slice(&108u16.to_be_bytes());
        b[70..72].copy_from_slice(&0xbeefu16.to_be_bytes());
        b[72..80].copy_from_slice(&[0x9c, 0x40, 0x14, 0x51, 0, 108, 1, 2]);
        let Some(Kept::Headers(h)) = decode(&b, none).unwrap().kept else {
            panic!("headers expected")
        };
        assert_eq!((h.version, h.proto, h.len, h.ident), (6, 17, 148, 0xbeef));
        assert_eq!(h.transport[..4], [0x9c, 0x40, 0x14, 0x51]);
        b[65] = KEPT_CHAIN;
        assert_eq!(decode(&b, none).unwrap().kept, Some(Kept::Chain));
        assert_eq!(code_of(Point::UserSend), None);
    }
}
