//! The tracepoints a journey listens to and their records decoded into
//! typed [`Event`]s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::format::{record_type, Format, FormatError, Sample};
use super::Proto;

/// Where an event comes from: a kernel tracepoint, or the probe's own
/// sender and receiver (user space, stamped with CLOCK_MONOTONIC like the
/// tracepoints).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Point {
    /// The sender called sendto() (user space, host a).
    UserSend,
    /// fib:fib_table_lookup (an IPv4 route lookup; no skb: attributed to a
    /// probe by CPU and time).
    FibTableLookup,
    /// fib6:fib6_table_lookup (an IPv6 route lookup, for IPv6 probes; no
    /// skb: attributed like the IPv4 one).
    Fib6TableLookup,
    /// net:net_dev_queue (dev_queue_xmit: the packet enters a device's tx path).
    NetDevQueue,
    /// qdisc:qdisc_enqueue.
    QdiscEnqueue,
    /// qdisc:qdisc_dequeue.
    QdiscDequeue,
    /// net:net_dev_start_xmit (the driver's ndo_start_xmit is called).
    NetDevStartXmit,
    /// net:netif_rx (veth_xmit hands the packet to the peer's backlog).
    NetifRx,
    /// net:net_dev_xmit (the driver's transmit returned).
    NetDevXmit,
    /// irq:softirq_entry with vec NET_RX, on the CPU of the next receive
    /// (no skb: attributed by CPU and time).
    SoftirqNetRx,
    /// napi:napi_poll (a NAPI instance, or the CPU's backlog, polled: after
    /// the packets it handed to the stack; attributed by CPU and time).
    NapiPoll,
    /// irq:softirq_exit with vec NET_RX (the receive processing on that CPU
    /// ends; attributed by CPU and time).
    SoftirqExitNetRx,
    /// net:napi_gro_receive_entry (a NAPI driver hands the packet to GRO).
    NapiGroReceive,
    /// net:netif_receive_skb (the stack takes the packet: bridge, IP…).
    NetifReceiveSkb,
    /// sock:sock_rcvqueue_full (a socket's receive queue was full).
    SockRcvqueueFull,
    /// udp:udp_fail_queue_rcv_skb (UDP could not queue to the socket).
    UdpFailQueueRcvSkb,
    /// sock:sk_data_ready (the packet is queued to the socket, its reader woken).
    SkDataReady,
    /// tcp:tcp_probe (TCP's established-state receive takes the segment:
    /// `tcp_rcv_established`; TCP probes only).
    TcpProbe,
    /// skb:skb_copy_datagram_iovec (the payload is copied to the receiver;
    /// UDP copies linear buffers without it).
    SkbCopyDatagramIovec,
    /// sock:sock_recv_length (the receiver's recvmsg returns the probe's length).
    SockRecvLength,
    /// skb:kfree_skb (the buffer dropped, with a drop reason).
    KfreeSkb,
    /// skb:consume_skb (the buffer freed after use: delivered, answered;
    /// `--iface` only, by skb address).
    ConsumeSkb,
    /// The receiver's recvfrom() returned the probe (user space, host b).
    UserRecv,
    /// xdp:xdp_exception (an XDP program aborted or returned an invalid
    /// action; opened only where a bed interface has an XDP program).
    XdpException,
    /// xdp:xdp_redirect (an XDP program redirected a frame).
    XdpRedirect,
    /// xdp:xdp_redirect_err (an XDP redirect failed).
    XdpRedirectErr,
    /// xdp:xdp_bulk_tx (frames an XDP program sent back out, in bulk).
    XdpBulkTx,
}

/// A tracepoint the tracer opens: the [`Point`], its tracefs path, whether
/// a journey can go without it, and the in-kernel filter it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracepoint {
    /// What it marks.
    pub point: Point,
    /// `SYSTEM/NAME` under tracefs `events/`.
    pub path: &'static str,
    /// A journey refuses to start without it.
    pub required: bool,
    /// Which in-kernel filter applies.
    pub filter: FilterKind,
}

/// The in-kernel filter a tracepoint gets (`PERF_EVENT_IOC_SET_FILTER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterKind {
    /// `len` within the probes' lengths.
    Len,
    /// `dport` equal to the probes' port.
    Dport,
    /// `vec == 3` (NET_RX).
    NetRx,
    /// `protocol == 17` (UDP).
    Udp,
    /// `ret` within the probes' payload lengths.
    Ret,
    /// `data_len` (a TCP segment's payload) within the probes' lengths.
    DataLen,
    /// None: every record (matched by skb address afterwards).
    None,
}

/// Every tracepoint a journey opens, in no particular order (a `tp_btf`
/// record names its tracepoint by its index here: new ones go at the end).
pub const TRACEPOINTS: [Tracepoint; 25] = [
    tp(
        Point::NetDevQueue,
        "net/net_dev_queue",
        true,
        FilterKind::Len,
    ),
    tp(
        Point::NetDevStartXmit,
        "net/net_dev_start_xmit",
        false,
        FilterKind::Len,
    ),
    tp(
        Point::NetDevXmit,
        "net/net_dev_xmit",
        false,
        FilterKind::Len,
    ),
    tp(Point::NetifRx, "net/netif_rx", false, FilterKind::Len),
    tp(
        Point::NetifReceiveSkb,
        "net/netif_receive_skb",
        true,
        FilterKind::Len,
    ),
    tp(
        Point::NapiGroReceive,
        "net/napi_gro_receive_entry",
        false,
        FilterKind::Len,
    ),
    tp(
        Point::QdiscEnqueue,
        "qdisc/qdisc_enqueue",
        false,
        FilterKind::None,
    ),
    tp(
        Point::QdiscDequeue,
        "qdisc/qdisc_dequeue",
        false,
        FilterKind::None,
    ),
    tp(
        Point::FibTableLookup,
        "fib/fib_table_lookup",
        false,
        FilterKind::None,
    ),
    tp(
        Point::SoftirqNetRx,
        "irq/softirq_entry",
        false,
        FilterKind::NetRx,
    ),
    tp(
        Point::SockRcvqueueFull,
        "sock/sock_rcvqueue_full",
        false,
        FilterKind::None,
    ),
    tp(
        Point::UdpFailQueueRcvSkb,
        "udp/udp_fail_queue_rcv_skb",
        false,
        FilterKind::Dport,
    ),
    tp(
        Point::SkbCopyDatagramIovec,
        "skb/skb_copy_datagram_iovec",
        false,
        FilterKind::Len,
    ),
    tp(
        Point::SkDataReady,
        "sock/sk_data_ready",
        false,
        FilterKind::Udp,
    ),
    tp(
        Point::SockRecvLength,
        "sock/sock_recv_length",
        false,
        FilterKind::Ret,
    ),
    tp(Point::KfreeSkb, "skb/kfree_skb", true, FilterKind::None),
    tp(
        Point::ConsumeSkb,
        "skb/consume_skb",
        false,
        FilterKind::None,
    ),
    tp(Point::NapiPoll, "napi/napi_poll", false, FilterKind::None),
    tp(
        Point::SoftirqExitNetRx,
        "irq/softirq_exit",
        false,
        FilterKind::NetRx,
    ),
    tp(
        Point::Fib6TableLookup,
        "fib6/fib6_table_lookup",
        false,
        FilterKind::None,
    ),
    tp(Point::TcpProbe, "tcp/tcp_probe", false, FilterKind::DataLen),
    tp(
        Point::XdpException,
        "xdp/xdp_exception",
        false,
        FilterKind::None,
    ),
    tp(
        Point::XdpRedirect,
        "xdp/xdp_redirect",
        false,
        FilterKind::None,
    ),
    tp(
        Point::XdpRedirectErr,
        "xdp/xdp_redirect_err",
        false,
        FilterKind::None,
    ),
    tp(Point::XdpBulkTx, "xdp/xdp_bulk_tx", false, FilterKind::None),
];

/// What the probes are, for choosing the tracepoints (see [`not_for`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Selection {
    /// Their protocol.
    pub proto: Proto,
    /// IPv6 (else IPv4).
    pub ipv6: bool,
    /// An interface of the bed has an XDP program attached.
    pub xdp: bool,
}

/// The tracepoints of a journey: without `all_events`, those whose filter
/// lets through a sample for every packet of the host (sk_data_ready,
/// qdisc events; on perf also softirq NET_RX, NAPI polls and FIB lookups)
/// are left out, since recording every packet is what makes a tracer
/// expensive, and so are the context events ([`Point::context`]: one more
/// program run for every packet of the host, for a step the path's other
/// events already bound). With `gated` (the `tp_btf` tracer) the softirq
/// entry and the FIB lookups are kept: their programs write only while a
/// probe is being received on their CPU. Only the tracepoints these probes
/// can pass are opened (see [`not_for`]).
pub fn tracepoints(all_events: bool, gated: bool, sel: Selection) -> Vec<Tracepoint> {
    TRACEPOINTS
        .into_iter()
        .filter(|t| {
            (all_events || t.by_default(gated))
                && !t.point.iface_only()
                && not_for(t.point, sel).is_none()
        })
        .collect()
}

/// Why `point` is not opened for the probes `sel` (None: it is): the other
/// family's FIB lookups, TCP's receive for probes that are not TCP, and the
/// XDP events where no bed interface has an XDP program, are never a
/// probe's.
pub fn not_for(point: Point, sel: Selection) -> Option<&'static str> {
    match (point, sel.ipv6) {
        (Point::FibTableLookup, true) => {
            Some("IPv4 FIB lookups: the probes are IPv6 (opened for IPv4 probes)")
        }
        (Point::Fib6TableLookup, false) => {
            Some("IPv6 FIB lookups: the probes are IPv4 (opened for IPv6 probes, -6)")
        }
        (Point::TcpProbe, _) if sel.proto != Proto::Tcp => {
            Some("TCP's receive of a segment: the probes are not TCP (opened for --proto tcp)")
        }
        (p, _) if p.is_xdp() && !sel.xdp => Some(
            "no XDP program is attached to any interface of the bed (read from each namespace's \
             links at the start; see xdp.unread when they could not be read), so no XDP event \
             can fire on the path (opened when one is)",
        ),
        _ => None,
    }
}

/// `TracerInfo::left_out`: every tracepoint of [`TRACEPOINTS`] not in
/// `opened` (`SYSTEM/NAME`), with `why` it was not.
pub fn left_out(opened: &[String], why: impl Fn(&Tracepoint) -> &'static str) -> Vec<String> {
    TRACEPOINTS
        .iter()
        .filter(|t| !opened.iter().any(|o| o == t.path))
        .map(|t| format!("{}: {}", t.path, why(t)))
        .collect()
}

impl Tracepoint {
    /// True when a journey without `--all-events` opens it (`gated`: the
    /// `tp_btf` tracer, whose programs gate the events without an skb).
    pub fn by_default(&self, gated: bool) -> bool {
        !self.point.context() && (!self.every_packet() || (gated && self.point.attributed()))
    }

    /// True when perf records a sample for every packet of the host, not
    /// only for the probes (its filter cannot tell them apart).
    pub fn every_packet(&self) -> bool {
        matches!(self.point, Point::QdiscEnqueue | Point::QdiscDequeue)
            || matches!(self.filter, FilterKind::NetRx | FilterKind::Udp)
            || self.point.attributed()
    }
}

const fn tp(point: Point, path: &'static str, required: bool, filter: FilterKind) -> Tracepoint {
    Tracepoint {
        point,
        path,
        required,
        filter,
    }
}

impl Point {
    /// The name shown in tables: `net:net_dev_queue`, `user:sendto`.
    pub fn label(self) -> &'static str {
        match self {
            Self::UserSend => "user:sendto",
            Self::UserRecv => "user:recvfrom",
            Self::SoftirqNetRx => "irq:softirq_entry NET_RX",
            Self::SoftirqExitNetRx => "irq:softirq_exit NET_RX",
            other => TRACEPOINTS
                .iter()
                .find(|t| t.point == other)
                .map_or("?", |t| label_of(t.path)),
        }
    }

    /// True for the tracepoints only an `--iface` journey opens (by skb
    /// address, in its programs): `consume_skb` fires for every buffer the
    /// host frees, and a probe journey has no address map in the kernel.
    pub fn iface_only(self) -> bool {
        self == Self::ConsumeSkb
    }

    /// True for the events that carry no skb (FIB lookups, NAPI polls, the
    /// NET_RX softirq): a probe's are found by CPU and time, not by skb
    /// address (see `follow`).
    pub fn attributed(self) -> bool {
        matches!(
            self,
            Self::FibTableLookup
                | Self::Fib6TableLookup
                | Self::NapiPoll
                | Self::SoftirqNetRx
                | Self::SoftirqExitNetRx
        )
    }

    /// True for the context events, opened only with `--all-events`: each
    /// runs a program (or a perf filter) for every packet of the host, and
    /// the default path already bounds its step — `netif_rx` (on veth,
    /// inside the driver's transmit: between `net_dev_start_xmit` and
    /// `net_dev_xmit`), `napi_poll` and the NET_RX softirq's exit (after
    /// the receive, its socket steps included). Left out, a journey on a
    /// pair bed runs 7 programs per packet instead of 10.
    pub fn context(self) -> bool {
        matches!(
            self,
            Self::NetifRx | Self::NapiPoll | Self::SoftirqExitNetRx
        )
    }

    /// True for the FIB lookups (IPv4 or IPv6).
    pub fn is_fib(self) -> bool {
        matches!(self, Self::FibTableLookup | Self::Fib6TableLookup)
    }

    /// True for the XDP events (no skb: counted, not followed).
    pub fn is_xdp(self) -> bool {
        matches!(
            self,
            Self::XdpException | Self::XdpRedirect | Self::XdpRedirectErr | Self::XdpBulkTx
        )
    }

    /// True for the events whose records carry the packet's length.
    pub fn has_len(self) -> bool {
        matches!(
            self,
            Self::NetDevQueue
                | Self::NetDevStartXmit
                | Self::NetDevXmit
                | Self::NetifRx
                | Self::NetifReceiveSkb
                | Self::NapiGroReceive
                | Self::SkbCopyDatagramIovec
                | Self::SockRecvLength
                | Self::TcpProbe
        )
    }
}

fn label_of(path: &'static str) -> &'static str {
    match path {
        "net/net_dev_queue" => "net:net_dev_queue",
        "net/net_dev_start_xmit" => "net:net_dev_start_xmit",
        "net/net_dev_xmit" => "net:net_dev_xmit",
        "net/netif_rx" => "net:netif_rx",
        "net/netif_receive_skb" => "net:netif_receive_skb",
        "net/napi_gro_receive_entry" => "net:napi_gro_receive_entry",
        "qdisc/qdisc_enqueue" => "qdisc:qdisc_enqueue",
        "fib6/fib6_table_lookup" => "fib6:fib6_table_lookup",
        "tcp/tcp_probe" => "tcp:tcp_probe",
        "xdp/xdp_exception" => "xdp:xdp_exception",
        "xdp/xdp_redirect" => "xdp:xdp_redirect",
        "xdp/xdp_redirect_err" => "xdp:xdp_redirect_err",
        "xdp/xdp_bulk_tx" => "xdp:xdp_bulk_tx",
        "qdisc/qdisc_dequeue" => "qdisc:qdisc_dequeue",
        "fib/fib_table_lookup" => "fib:fib_table_lookup",
        "napi/napi_poll" => "napi:napi_poll",
        "sock/sock_rcvqueue_full" => "sock:sock_rcvqueue_full",
        "udp/udp_fail_queue_rcv_skb" => "udp:udp_fail_queue_rcv_skb",
        "skb/skb_copy_datagram_iovec" => "skb:skb_copy_datagram_iovec",
        "sock/sk_data_ready" => "sock:sk_data_ready",
        "sock/sock_recv_length" => "sock:sock_recv_length",
        "skb/kfree_skb" => "skb:kfree_skb",
        "skb/consume_skb" => "skb:consume_skb",
        _ => "?",
    }
}

/// One decoded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// What it marks.
    pub point: Point,
    /// CLOCK_MONOTONIC, ns.
    pub time_ns: u64,
    /// The CPU it ran on (user events: none).
    pub cpu: Option<u32>,
    /// The skb's address (real, not hashed: perf raw samples).
    pub skb: Option<u64>,
    /// `skb->len` where the record has it (L2 length on transmit, L3 after
    /// `eth_type_trans` on receive; the payload copied for
    /// skb_copy_datagram_iovec).
    pub len: Option<u32>,
    /// The device's name (or, for qdisc events, none: see `ifindex`).
    pub dev: Option<String>,
    /// The device's ifindex (qdisc events; `tp_btf` records).
    pub ifindex: Option<i32>,
    /// The inode number of the device's network namespace (`tp_btf`
    /// records only: perf raw samples do not carry it).
    pub netns: Option<u32>,
    /// The socket's address (sk_data_ready, sock_recv_length).
    pub sk: Option<u64>,
    /// kfree_skb's drop reason, by its `enum skb_drop_reason` name; for an
    /// XDP event, the program's action (`XDP_ABORTED`…).
    pub reason: Option<String>,
    /// kfree_skb's `location` (the address of the function that dropped).
    pub location: Option<u64>,
    /// The probe's sequence number (user events only).
    pub seq: Option<u64>,
    /// Why an `--iface` tracer kept it (None: a probe journey's record).
    pub kept: Option<Kept>,
}

/// Why the `--iface` tracer's program kept an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Its headers matched the filter (what they show).
    Headers(Headers),
    /// Its headers could not be read there, but an event on the same skb
    /// address matched before.
    Chain,
}

/// What a `tp_btf` program read of a packet's headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Headers {
    /// 4 or 6.
    pub version: u8,
    /// IP protocol (IPv6: the next header).
    pub proto: u8,
    /// IP length (IPv4 total length; IPv6 payload length + 40).
    pub len: u32,
    /// IPv4 identification; the low 16 bits of the IPv6 flow label.
    pub ident: u16,
    /// The transport header's first 8 bytes, as read (ports, then the TCP
    /// sequence number, UDP length and checksum, or ICMP identifier and
    /// sequence): with `ident`, what tells packets of a flow apart.
    pub transport: [u8; 8],
}

impl Event {
    /// A user-space event (sender or receiver).
    pub fn user(point: Point, time_ns: u64, seq: u64, len: u32) -> Self {
        Self {
            point,
            time_ns,
            cpu: None,
            skb: None,
            len: Some(len),
            dev: None,
            ifindex: None,
            netns: None,
            sk: None,
            reason: None,
            location: None,
            seq: Some(seq),
            kept: None,
        }
    }
}

/// Decodes raw records of the tracepoints that were opened.
#[derive(Debug, Clone, Default)]
pub struct Decoder {
    by_id: BTreeMap<u16, (Point, Format)>,
}

impl Decoder {
    /// A decoder knowing no tracepoint.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tracepoint's format; checks it has the fields the decoder reads.
    pub fn add(&mut self, point: Point, format: Format) -> Result<(), FormatError> {
        for f in needed_fields(point) {
            format.require(f)?;
        }
        self.by_id.insert(format.id, (point, format));
        Ok(())
    }

    /// The format of `point`, if added.
    pub fn format(&self, point: Point) -> Option<&Format> {
        self.by_id
            .values()
            .find(|(p, _)| *p == point)
            .map(|(_, f)| f)
    }

    /// The event a sample holds (None: a tracepoint not added, or a record
    /// it filters out, such as softirq vectors other than NET_RX).
    pub fn decode(&self, s: &Sample) -> Option<Event> {
        let (point, f) = self.by_id.get(&record_type(&s.raw)?)?;
        let raw = &s.raw;
        let mut e = Event {
            point: *point,
            time_ns: s.time_ns,
            cpu: Some(s.cpu),
            skb: f.uint(raw, "skbaddr"),
            len: f.uint(raw, "len").and_then(|v| u32::try_from(v).ok()),
            dev: f.string(raw, "name").or_else(|| f.string(raw, "dev_name")),
            ifindex: f.int(raw, "ifindex").and_then(|v| i32::try_from(v).ok()),
            netns: None,
            sk: f.uint(raw, "sk").or_else(|| f.uint(raw, "skaddr")),
            reason: None,
            location: None,
            seq: None,
            kept: None,
        };
        match point {
            Point::KfreeSkb => {
                let r = f.uint(raw, "reason")?;
                e.reason = Some(
                    f.symbol("reason", r)
                        .map_or_else(|| format!("reason {r}"), str::to_string),
                );
                e.location = f.uint(raw, "location");
            }
            Point::SoftirqNetRx | Point::SoftirqExitNetRx
                if f.uint(raw, "vec") != Some(NET_RX_VEC) =>
            {
                return None
            }
            Point::NapiPoll => e.len = f.int(raw, "work").and_then(|v| u32::try_from(v).ok()),
            Point::SockRecvLength => e.len = f.int(raw, "ret").and_then(|v| u32::try_from(v).ok()),
            Point::TcpProbe => {
                e.len = f.uint(raw, "data_len").and_then(|v| u32::try_from(v).ok());
            }
            p if p.is_xdp() => {
                let act = f.uint(raw, "act")?;
                e.reason = Some(
                    f.symbol("act", act)
                        .map_or_else(|| format!("action {act}"), |a| format!("XDP_{a}")),
                );
            }
            Point::FibTableLookup | Point::Fib6TableLookup => {
                e.dev = e.dev.filter(|d| !d.is_empty());
            }
            _ => {}
        }
        Some(e)
    }
}

/// The NET_RX softirq vector.
pub const NET_RX_VEC: u64 = 3;

/// The fields [`Decoder::decode`] reads for each point.
fn needed_fields(point: Point) -> &'static [&'static str] {
    match point {
        Point::NetDevQueue
        | Point::NetDevStartXmit
        | Point::NetDevXmit
        | Point::NetifRx
        | Point::NetifReceiveSkb
        | Point::NapiGroReceive => &["skbaddr", "len", "name"],
        Point::QdiscEnqueue | Point::QdiscDequeue => &["skbaddr", "ifindex"],
        Point::SkbCopyDatagramIovec => &["skbaddr", "len"],
        Point::TcpProbe => &["skbaddr", "data_len"],
        Point::XdpException | Point::XdpRedirect | Point::XdpRedirectErr | Point::XdpBulkTx => {
            &["ifindex", "act"]
        }
        Point::SkDataReady => &["skaddr", "protocol"],
        Point::SockRecvLength => &["sk", "ret"],
        Point::KfreeSkb => &["skbaddr", "reason", "location"],
        Point::ConsumeSkb => &["skbaddr"],
        Point::SoftirqNetRx | Point::SoftirqExitNetRx => &["vec"],
        Point::NapiPoll => &["dev_name", "work"],
        Point::FibTableLookup | Point::Fib6TableLookup => &["name"],
        Point::UdpFailQueueRcvSkb => &["dport"],
        Point::SockRcvqueueFull => &["sk_rcvbuf"],
        Point::UserSend | Point::UserRecv => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::super::format::tests::{netif_receive_skb_raw, KFREE_SKB, NETIF_RECEIVE_SKB};
    use super::*;

    #[test]
    fn samples_decode_into_events() {
        let mut d = Decoder::new();
        d.add(
            Point::NetifReceiveSkb,
            Format::parse(NETIF_RECEIVE_SKB).unwrap(),
        )
        .unwrap();
        let e = d
            .decode(&Sample {
                time_ns: 5,
                cpu: 1,
                raw: netif_receive_skb_raw(),
            })
            .unwrap();
        assert_eq!(e.point, Point::NetifReceiveSkb);
        assert_eq!((e.time_ns, e.cpu, e.len), (5, Some(1), Some(805)));
        assert_eq!(e.dev.as_deref(), Some("lr-b"));
        assert_eq!(e.skb, Some(0xffff_8880_03a1_c300));
    }

    #[test]
    fn kfree_skb_names_its_drop_reason() {
        let mut d = Decoder::new();
        d.add(Point::KfreeSkb, Format::parse(KFREE_SKB).unwrap())
            .unwrap();
        let mut raw = vec![0u8; 40];
        raw[0..2].copy_from_slice(&2310u16.to_le_bytes());
        raw[8..16].copy_from_slice(&0xffff_0000_1234_5600u64.to_le_bytes());
        raw[36..40].copy_from_slice(&6u32.to_le_bytes());
        let e = d
            .decode(&Sample {
                time_ns: 1,
                cpu: 0,
                raw: raw.clone(),
            })
            .unwrap();
        assert_eq!(e.reason.as_deref(), Some("SOCKET_RCVBUFF"));
        raw[36..40].copy_from_slice(&77u32.to_le_bytes());
        let e = d
            .decode(&Sample {
                time_ns: 1,
                cpu: 0,
                raw,
            })
            .unwrap();
        assert_eq!(e.reason.as_deref(), Some("reason 77"));
    }

    #[test]
    fn a_format_lacking_a_needed_field_is_refused_by_name() {
        let mut d = Decoder::new();
        let err = d
            .add(Point::KfreeSkb, Format::parse(NETIF_RECEIVE_SKB).unwrap())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "tracepoint netif_receive_skb has no field `reason`"
        );
    }

    #[test]
    fn unknown_records_are_skipped() {
        let d = Decoder::new();
        assert_eq!(
            d.decode(&Sample {
                time_ns: 0,
                cpu: 0,
                raw: netif_receive_skb_raw()
            }),
            None
        );
    }

    #[test]
    fn the_default_set_leaves_out_what_records_every_packet() {
        let few = tracepoints(false, false, Selection::default());
        assert!(few.len() < TRACEPOINTS.len());
        assert!(few.iter().all(|t| !t.every_packet()));
        assert!(few.iter().any(|t| t.point == Point::NetifReceiveSkb));
        assert!(TRACEPOINTS
            .iter()
            .filter(|t| t.required)
            .all(|t| few.contains(t)));
        assert_eq!(
            tracepoints(true, false, Selection::default()).len() + 6,
            TRACEPOINTS.iter().filter(|t| !t.point.iface_only()).count()
        );
        assert!(tracepoints(true, false, Selection::default())
            .iter()
            .all(|t| !t.point.iface_only()));
        // The tp_btf tracer keeps the gated events without --all-events.
        let gated = tracepoints(false, true, Selection::default());
        assert!(gated.iter().any(|t| t.point == Point::FibTableLookup));
        assert!(!gated.iter().any(|t| t.point == Point::Fib6TableLookup));
        // IPv6 probes: the IPv6 lookups instead.
        let v6 = tracepoints(
            false,
            true,
            Selection {
                ipv6: true,
                ..Selection::default()
            },
        );
        assert!(v6.iter().any(|t| t.point == Point::Fib6TableLookup));
        assert!(!v6.iter().any(|t| t.point == Point::FibTableLookup));
        // TCP's receive for TCP probes only.
        assert!(!v6.iter().any(|t| t.point == Point::TcpProbe));
        let tcp = tracepoints(
            false,
            true,
            Selection {
                proto: Proto::Tcp,
                ..Selection::default()
            },
        );
        assert!(tcp.iter().any(|t| t.point == Point::TcpProbe));
        // The XDP events where a bed interface has an XDP program only.
        assert!(!tcp.iter().any(|t| t.point.is_xdp()));
        let xdp = tracepoints(
            false,
            true,
            Selection {
                xdp: true,
                ..Selection::default()
            },
        );
        assert_eq!(xdp.iter().filter(|t| t.point.is_xdp()).count(), 4);
        assert!(gated.iter().any(|t| t.point == Point::SoftirqNetRx));
        assert!(!gated.iter().any(|t| t.point == Point::SkDataReady));
        assert!(!few.iter().any(|t| t.point.attributed()));
        // The context events only with --all-events, on both tracers.
        for t in TRACEPOINTS.iter().filter(|t| t.point.context()) {
            assert!(!gated.contains(t) && !few.contains(t), "{}", t.path);
            assert!(
                tracepoints(true, true, Selection::default()).contains(t),
                "{}",
                t.path
            );
        }
        assert_eq!(TRACEPOINTS.iter().filter(|t| t.point.context()).count(), 3);
    }

    #[test]
    fn labels() {
        assert_eq!(Point::NetDevQueue.label(), "net:net_dev_queue");
        assert_eq!(Point::KfreeSkb.label(), "skb:kfree_skb");
        assert_eq!(Point::UserSend.label(), "user:sendto");
        for t in TRACEPOINTS {
            assert_ne!(t.point.label(), "?", "{}", t.path);
        }
    }
}
