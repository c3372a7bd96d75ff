//! `linerate journey --iface IF --filter EXPR`: the packets of any
//! application that match a filter, followed through the kernel without
//! probes.
//!
//! The `tp_btf` programs (in `linerate_io`) read each packet's IP and
//! transport headers and judge them against the [`IfaceFilter`] in the
//! kernel; an event whose headers cannot be read there (`net_dev_xmit`,
//! where the skb may already be gone, or an skb without a network header
//! yet) is kept when an earlier event on the same skb address matched
//! ([`Kept::Chain`]). [`Chains`] groups the kept events into packets: one
//! chain per packet, joined by skb address, and across a copy or clone
//! (a new address) by what the headers show (IP identification, length,
//! protocol, the transport header's first 8 bytes). A packet passes each
//! tracepoint on a device once, so an event at a place its chain already
//! passed starts a new packet (an skb address reused by the next packet of
//! the same flow). [`summarise`] turns the chains that touched the
//! interface into the table: one row per event in path order, time from
//! the packet's first event (median, p90, p99), drops with their kernel
//! reasons.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::event::{Event, Headers, Kept, Point};
use super::filter::IfaceFilter;
use super::path::{gaps_between, step_label};
use super::{Backend, DropSite, ExampleEvent, Gap, Quantiles, Step, TracerInfo};
use crate::result::Flag;

/// Schema name of the `--iface` JSON document.
pub const SCHEMA: &str = "linerate.journey.iface";
/// Its version.
pub const VERSION: u32 = 3;
/// A copy or clone (a new skb address with the same headers) joins a
/// packet only this soon after the packet's last event.
pub const JOIN_NS: u64 = 100_000_000;
/// The most packets `--count` may ask for.
pub const MAX_PACKETS: u64 = 100_000;
/// The most events a journey keeps (matching packets elsewhere on the host
/// count too): past it the trace stops (`stopped_by` `event_limit`).
pub const MAX_EVENTS: u64 = 2_000_000;

/// What an `--iface` journey does.
#[derive(Debug, Clone, PartialEq)]
pub struct IfaceConfig {
    /// The interface the packets must pass.
    pub iface: String,
    /// Which packets.
    pub filter: IfaceFilter,
    /// Stop after this many packets on the interface.
    pub count: u64,
    /// Stop after this long, ns.
    pub time_ns: u64,
    /// The tracer (`perf` cannot read headers: refused).
    pub backend: Backend,
}

/// Why an `--iface` configuration cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IfaceError {
    /// `--count` out of range.
    #[error("--count must be 1..={MAX_PACKETS} packets, got {0}")]
    Count(u64),
    /// `--time` zero.
    #[error("--time must be above 0")]
    Time,
    /// `--tracer perf` asked for.
    #[error(
        "--tracer perf cannot follow --iface packets: perf raw samples carry no packet headers, \
         and the filter is judged on them (use --tracer tp_btf or auto)"
    )]
    Perf,
}

impl IfaceConfig {
    /// Checks the ranges and the tracer.
    pub fn validate(&self) -> Result<(), IfaceError> {
        if !(1..=MAX_PACKETS).contains(&self.count) {
            return Err(IfaceError::Count(self.count));
        }
        if self.time_ns == 0 {
            return Err(IfaceError::Time);
        }
        if self.backend == Backend::Perf {
            return Err(IfaceError::Perf);
        }
        Ok(())
    }
}

/// The interface as the tracer's records name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    /// Its name.
    pub name: String,
    /// The inode of its network namespace (None: not known; the name
    /// alone decides).
    pub netns_inode: Option<u32>,
}

impl Iface {
    fn is(&self, e: &Event) -> bool {
        e.dev.as_deref() == Some(self.name.as_str())
            && match (self.netns_inode, e.netns) {
                (Some(want), Some(got)) => want == got,
                _ => true,
            }
    }
}

/// One packet: its events in time order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The events.
    pub events: Vec<Event>,
    /// What its headers showed (the first matching event's).
    pub headers: Headers,
    /// It passed the interface.
    pub on_iface: bool,
    /// It reached a socket (or its end: see [`is_delivery`]).
    pub delivered: bool,
}

type Place = (Point, Option<String>, Option<u32>);

fn place(e: &Event) -> Place {
    (e.point, e.dev.clone(), e.netns)
}

/// Groups kept events into packets, fed in time order.
#[derive(Debug, Clone)]
pub struct Chains {
    iface: Iface,
    chains: Vec<Chain>,
    places: Vec<BTreeSet<Place>>,
    by_addr: BTreeMap<u64, usize>,
    by_headers: BTreeMap<Headers, usize>,
    on_iface: u64,
    orphans: u64,
    events: u64,
}

impl Chains {
    /// No packet yet; `iface` is the interface packets must pass.
    pub fn new(iface: Iface) -> Self {
        Self {
            iface,
            chains: Vec::new(),
            places: Vec::new(),
            by_addr: BTreeMap::new(),
            by_headers: BTreeMap::new(),
            on_iface: 0,
            orphans: 0,
            events: 0,
        }
    }

    /// Adds an event (later than every event added before).
    pub fn push(&mut self, e: Event) {
        let (Some(addr), Some(kept)) = (e.skb, e.kept) else {
            return;
        };
        let at = place(&e);
        let free = |i: usize, s: &Self| !s.places[i].contains(&at);
        let i = match kept {
            Kept::Chain => match self.by_addr.get(&addr) {
                // After its delivery a packet only has its payload copied
                // and its buffer freed; UDP frees most buffers without a
                // tracepoint, so the address stays in the kernel's map and
                // the next buffer there, not matched where it was first
                // seen, would be taken for this packet.
                Some(&i) if self.chains[i].delivered && !after_delivery(e.point) => {
                    self.orphans += 1;
                    return;
                }
                Some(&i) => i,
                None => {
                    // Its match happened before the trace began.
                    self.orphans += 1;
                    return;
                }
            },
            Kept::Headers(h) => {
                let same_addr = self
                    .by_addr
                    .get(&addr)
                    .copied()
                    .filter(|&i| self.chains[i].headers == h && free(i, self));
                let clone = || {
                    self.by_headers.get(&h).copied().filter(|&i| {
                        free(i, self)
                            && self.chains[i]
                                .events
                                .last()
                                .is_some_and(|l| e.time_ns <= l.time_ns + JOIN_NS)
                    })
                };
                match same_addr.or_else(clone) {
                    Some(i) => i,
                    None => {
                        self.chains.push(Chain {
                            events: Vec::new(),
                            headers: h,
                            on_iface: false,
                            delivered: false,
                        });
                        self.places.push(BTreeSet::new());
                        let i = self.chains.len() - 1;
                        self.by_headers.insert(h, i);
                        i
                    }
                }
            }
        };
        self.by_addr.insert(addr, i);
        self.places[i].insert(at);
        self.events += 1;
        let c = &mut self.chains[i];
        if !c.on_iface && self.iface.is(&e) {
            c.on_iface = true;
            self.on_iface += 1;
        }
        c.delivered |= is_delivery(e.point);
        c.events.push(e);
    }

    /// Packets that passed the interface so far.
    pub fn on_iface(&self) -> u64 {
        self.on_iface
    }

    /// Events in the packets so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Events kept by chain whose first match came before the trace.
    pub fn orphans(&self) -> u64 {
        self.orphans
    }

    /// Every packet, in order of its first event, its events in time
    /// order (an event the tracer delivered late is put in its place).
    pub fn into_chains(mut self) -> Vec<Chain> {
        for c in &mut self.chains {
            c.events.sort_by_key(|e| e.time_ns);
        }
        self.chains
    }
}

/// How many packets were followed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct IfaceCounts {
    /// Packets that matched the filter and passed the interface (at most
    /// `--count`).
    pub matched: u64,
    /// Of those, packets seen at the table's first row and at their end:
    /// delivered (`sk_data_ready`, `skb_copy_datagram_iovec` or
    /// `consume_skb`) where the table shows deliveries, else at its last
    /// row that is not a drop.
    pub followed_first_to_last: u64,
    /// Of those, packets dropped by the kernel (kfree_skb).
    pub dropped: u64,
    /// Packets that matched the filter elsewhere on the host but never
    /// passed the interface (left out of the table).
    pub elsewhere: u64,
    /// Events kept because an earlier event on their skb matched (their
    /// headers could not be read there).
    pub chain_events: u64,
    /// Chain events whose match came before the trace began, or that came
    /// on a buffer address after its packet's delivery (the address reused
    /// by a packet not matched): left out.
    pub orphan_events: u64,
    /// Records the programs could not write because the ring buffer was
    /// full.
    pub ring_lost_records: u64,
}

/// What `linerate journey --iface` measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IfaceResult {
    /// The interface (`--iface`).
    pub iface: String,
    /// The namespace holding it (None: linerate's own).
    pub netns: Option<String>,
    /// The filter, as understood (`udp and port 5201`).
    pub filter: String,
    /// `--count` asked for.
    pub count: u64,
    /// `--time` asked for, ns.
    pub time_ns: u64,
    /// What ended the trace: `count`, `time`, `interrupt`, or
    /// `event_limit` ([`MAX_EVENTS`] kept: the filter matches much traffic
    /// elsewhere on the host).
    pub stopped_by: String,
    /// How long it traced, ns.
    pub traced_ns: u64,
    /// The tracer.
    pub tracer: TracerInfo,
    /// Packet counts.
    pub packets: IfaceCounts,
    /// The table: one row per event in path order; `from_send` is the time
    /// from each packet's first event.
    pub steps: Vec<Step>,
    /// The gaps between consecutive rows (over the packets that showed
    /// both), named in words, largest median first.
    pub gaps: Vec<Gap>,
    /// Drops, most frequent first.
    pub drops: Vec<DropSite>,
    /// The first packet followed from the first row to its end, event by
    /// event (time from its first event).
    pub example: Vec<ExampleEvent>,
}

/// An `--iface` document as printed by `linerate journey --iface … --json`.
pub type IfaceJson = crate::result::Envelope<IfaceResult>;

/// The table, the drops and the counts from the packets, at most `count`
/// of those that passed the interface (in order of their first event).
/// `netns_name` names a namespace inode.
pub fn summarise(
    chains: Vec<Chain>,
    count: u64,
    netns_name: &dyn Fn(u32) -> Option<String>,
) -> IfaceSummary {
    let elsewhere = chains.iter().filter(|c| !c.on_iface).count() as u64;
    let kept: Vec<Chain> = chains
        .into_iter()
        .filter(|c| c.on_iface)
        .take(usize::try_from(count).unwrap_or(usize::MAX))
        .collect();
    struct Acc {
        offsets: BTreeMap<u64, i64>,
        cpus: BTreeSet<u32>,
        netns: Option<u32>,
        first_seen: usize,
    }
    type Row = (Point, Option<String>, usize);
    let mut rows: BTreeMap<Row, Acc> = BTreeMap::new();
    let mut order = 0;
    let mut drops: super::DropCounts = BTreeMap::new();
    let mut chain_rows: Vec<BTreeSet<Row>> = Vec::new();
    let mut counts = IfaceCounts {
        matched: kept.len() as u64,
        ..IfaceCounts::default()
    };
    let ns_name = |n: Option<u32>| n.map(|i| netns_name(i).unwrap_or_else(|| format!("inode {i}")));
    for (packet, c) in (0u64..).zip(&kept) {
        let t0 = c.events[0].time_ns;
        let mut seen: BTreeMap<(Point, Option<String>), usize> = BTreeMap::new();
        let mut mine = BTreeSet::new();
        let mut prev = String::from("?");
        let mut netns = None;
        let delivered = c.events.iter().any(|e| is_delivery(e.point));
        if c.events.iter().any(|e| e.point == Point::KfreeSkb) && !delivered {
            counts.dropped += 1;
        }
        for e in &c.events {
            counts.chain_events += u64::from(e.kept == Some(Kept::Chain));
            netns = e.netns.or(netns);
            let n = seen.entry((e.point, e.dev.clone())).or_default();
            let key = (e.point, e.dev.clone(), *n);
            *n += 1;
            let acc = rows.entry(key.clone()).or_insert_with(|| {
                order += 1;
                Acc {
                    offsets: BTreeMap::new(),
                    cpus: BTreeSet::new(),
                    netns,
                    first_seen: order,
                }
            });
            acc.offsets.insert(packet, e.time_ns as i64 - t0 as i64);
            acc.cpus.extend(e.cpu);
            mine.insert(key);
            if e.point == Point::KfreeSkb && !delivered {
                let reason = e.reason.clone().unwrap_or_else(|| "?".into());
                let loc = e.location.map(|l| format!("{l:#x}"));
                *drops
                    .entry((reason, prev.clone(), ns_name(netns), loc))
                    .or_default() += 1;
            }
            prev = step_label(e.point, e.dev.as_deref());
        }
        chain_rows.push(mine);
    }
    let mut keyed: Vec<(Row, Acc, Quantiles)> = rows
        .into_iter()
        .filter_map(|(k, a)| {
            let mut v: Vec<i64> = a.offsets.values().copied().collect();
            Quantiles::of(&mut v).map(|q| (k, a, q))
        })
        .collect();
    keyed.sort_by_key(|(_, a, q)| (q.median_ns, a.first_seen));
    let steps: Vec<Step> = keyed
        .iter()
        .map(|((point, dev, _), a, q)| Step {
            tracepoint: point.label().to_string(),
            point: *point,
            dev: dev.clone(),
            netns: ns_name(a.netns),
            role: None,
            cpus: a.cpus.iter().copied().collect(),
            packets: a.offsets.len() as u64,
            from_send: *q,
            by_cpu_and_time: point.attributed(),
        })
        .collect();
    // A packet's end: delivered (queued to a socket, its payload copied, its
    // buffer freed after use: which of these a packet shows depends on the
    // protocol and on how its reader reads) where the table shows
    // deliveries; else the last row that is not a drop (a dropped packet is
    // not followed to the end).
    let delivering = keyed.iter().any(|(k, _, _)| is_delivery(k.0));
    let last = keyed.iter().rev().find(|(k, _, _)| !is_drop(k.0));
    let first = keyed.first().map(|f| &f.0);
    let complete = |rows: &BTreeSet<Row>| {
        first.is_some_and(|f| rows.contains(f))
            && if delivering {
                rows.iter().any(|r| is_delivery(r.0))
            } else {
                last.is_some_and(|l| rows.contains(&l.0))
            }
    };
    counts.followed_first_to_last = chain_rows.iter().filter(|r| complete(r)).count() as u64;
    counts.elsewhere = elsewhere;
    let drops = DropSite::from_counts(drops);
    let example = kept
        .iter()
        .zip(&chain_rows)
        .find(|(_, r)| complete(r))
        .map(|(c, _)| {
            let t0 = c.events[0].time_ns;
            c.events
                .iter()
                .map(|e| ExampleEvent {
                    tracepoint: e.point.label().to_string(),
                    t_ns: e.time_ns as i64 - t0 as i64,
                    dev: e.dev.clone(),
                    cpu: e.cpu,
                    skb: e.skb.map(|a| format!("{a:#x}")),
                    len: e.len,
                })
                .collect()
        })
        .unwrap_or_default();
    let rows: Vec<&BTreeMap<u64, i64>> = keyed.iter().map(|(_, a, _)| &a.offsets).collect();
    IfaceSummary {
        gaps: gaps_between(&rows, &steps, ""),
        steps,
        drops,
        counts,
        example,
    }
}

/// What [`summarise`] makes of the packets.
#[derive(Debug, Clone, PartialEq)]
pub struct IfaceSummary {
    /// The table's rows.
    pub steps: Vec<Step>,
    /// The gaps between consecutive rows, largest first.
    pub gaps: Vec<Gap>,
    /// Drops.
    pub drops: Vec<DropSite>,
    /// Counts (the ring's and orphans' left for the caller).
    pub counts: IfaceCounts,
    /// The first packet followed from the first row to its end.
    pub example: Vec<ExampleEvent>,
}

/// True for the events that show a packet reached its end: queued to a
/// socket, its payload copied, or its buffer freed after use.
fn is_delivery(p: Point) -> bool {
    matches!(
        p,
        Point::SkDataReady | Point::SkbCopyDatagramIovec | Point::ConsumeSkb
    )
}

/// True for the events that may follow a delivery on the same buffer.
fn after_delivery(p: Point) -> bool {
    matches!(
        p,
        Point::SkbCopyDatagramIovec | Point::ConsumeSkb | Point::KfreeSkb
    )
}

fn is_drop(p: Point) -> bool {
    matches!(
        p,
        Point::KfreeSkb | Point::SockRcvqueueFull | Point::UdpFailQueueRcvSkb
    )
}

/// Flag codes of an `--iface` result.
pub mod codes {
    /// No packet matched the filter on the interface.
    pub const NOTHING_MATCHED: &str = "nothing_matched";
    /// No packet was seen from the table's first row to its last.
    pub const NONE_FOLLOWED: &str = "none_followed";
    /// Packets were dropped by the kernel.
    pub use super::super::codes::DROPS;
    /// The ring buffer was full: records were lost.
    pub use super::super::codes::RING_OVERFLOW;
    /// The trace stopped at the event limit.
    pub const EVENT_LIMIT: &str = "event_limit";
}

/// The flags an `--iface` result earns.
pub fn assess(r: &IfaceResult) -> Vec<Flag> {
    let mut flags = Vec::new();
    flags.extend(super::assess::skipped_runs(&r.tracer));
    let p = &r.packets;
    if p.matched == 0 {
        flags.push(
            Flag::invalid(
                codes::NOTHING_MATCHED,
                format!(
                    "no packet matching `{}` passed {} while tracing: no table to show",
                    r.filter, r.iface
                ),
            )
            .with("elsewhere", p.elsewhere)
            .with("traced_ns", r.traced_ns),
        );
    } else if p.followed_first_to_last == 0 {
        flags.push(
            Flag::warning(
                codes::NONE_FOLLOWED,
                "no packet was seen at both the first and the last row of the table",
            )
            .with("matched", p.matched),
        );
    }
    if r.stopped_by == codes::EVENT_LIMIT {
        flags.push(
            Flag::warning(
                codes::EVENT_LIMIT,
                format!(
                    "the trace stopped after {MAX_EVENTS} events, before --count or --time: the \
                     filter matches much traffic elsewhere on the host (narrow it)"
                ),
            )
            .with("traced_ns", r.traced_ns),
        );
    }
    if p.ring_lost_records > 0 {
        flags.push(
            Flag::warning(
                codes::RING_OVERFLOW,
                "the programs could not write every record: the ring buffer was full (busy host?)",
            )
            .with("lost_records", p.ring_lost_records),
        );
    }
    if p.dropped > 0 {
        let reasons: Vec<String> = r.drops.iter().map(|d| d.reason.clone()).collect();
        flags.push(
            Flag::info(
                codes::DROPS,
                format!(
                    "{} packets dropped by the kernel ({})",
                    p.dropped,
                    reasons.join(", ")
                ),
            )
            .with("dropped", p.dropped),
        );
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(ident: u16) -> Headers {
        Headers {
            version: 4,
            proto: 17,
            len: 128,
            ident,
            transport: [0x9c, 0x40, 0x14, 0x51, 0, 108, 0, 0],
        }
    }

    fn ev(point: Point, t: u64, skb: u64, dev: Option<&str>, kept: Kept) -> Event {
        Event {
            point,
            time_ns: t,
            cpu: Some(0),
            skb: Some(skb),
            len: Some(128),
            dev: dev.map(str::to_string),
            ifindex: None,
            netns: Some(7),
            sk: None,
            reason: (point == Point::KfreeSkb).then(|| "SOCKET_RCVBUFF".to_string()),
            location: None,
            seq: None,
            kept: Some(kept),
        }
    }

    /// One datagram from a to b across a veth pair: queued on lr-a, the
    /// xmit seen by chain, received on lr-b, copied to the socket.
    fn packet(t: u64, skb: u64, ident: u16) -> Vec<Event> {
        let h = Kept::Headers(headers(ident));
        vec![
            ev(Point::NetDevQueue, t, skb, Some("lr-a"), h),
            ev(Point::NetDevXmit, t + 5_000, skb, Some("lr-a"), Kept::Chain),
            ev(Point::NetifReceiveSkb, t + 20_000, skb, Some("lr-b"), h),
            ev(Point::SkbCopyDatagramIovec, t + 50_000, skb, None, h),
        ]
    }

    fn chains(events: Vec<Event>) -> Chains {
        let mut c = Chains::new(Iface {
            name: "lr-b".into(),
            netns_inode: Some(7),
        });
        for e in events {
            c.push(e);
        }
        c
    }

    #[test]
    fn a_reused_skb_address_starts_a_new_packet() {
        // Two datagrams of one flow on the same skb address (the slab hands
        // the freed buffer to the next), the same headers but the ident.
        let mut evs = packet(1_000_000, 0xa0, 1);
        evs.extend(packet(2_000_000, 0xa0, 2));
        // A third with equal headers too (an IPv6 flow without ident):
        // told apart because it passes places the second already passed.
        evs.extend(packet(3_000_000, 0xa0, 2));
        let c = chains(evs);
        assert_eq!(c.on_iface(), 3);
        let all = c.into_chains();
        assert_eq!(all.len(), 3);
        for ch in &all {
            assert_eq!(ch.events.len(), 4);
            assert!(ch.events.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        }
    }

    #[test]
    fn a_clone_joins_by_headers_and_orphans_are_left_out() {
        let h = Kept::Headers(headers(9));
        let evs = vec![
            // A chain event before any match: its match was before the trace.
            ev(Point::NetDevXmit, 10, 0xff, Some("lr-a"), Kept::Chain),
            ev(Point::NetDevQueue, 100, 0xa0, Some("lr-a"), h),
            // A clone: a new address with the same headers.
            ev(Point::NetifReceiveSkb, 200, 0xb0, Some("lr-b"), h),
            ev(Point::NetDevXmit, 300, 0xb0, Some("lr-b"), Kept::Chain),
            // Far later: the same headers are another packet.
            ev(
                Point::NetifReceiveSkb,
                200 + 2 * JOIN_NS,
                0xc0,
                Some("lr-x"),
                h,
            ),
        ];
        let c = chains(evs);
        assert_eq!(c.orphans(), 1);
        assert_eq!(c.events(), 4);
        let all = c.into_chains();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].events.len(), 3);
        assert!(all[0].on_iface && !all[1].on_iface);
    }

    #[test]
    fn the_table_counts_packets_on_the_interface() {
        let mut evs = Vec::new();
        for i in 0..10u16 {
            evs.extend(packet(u64::from(i) * 1_000_000, 0xa0 + u64::from(i), i));
        }
        // A drop after the receive: no copy to the socket.
        let mut dropped = packet(50_000_000, 0xf0, 99);
        dropped[3] = ev(
            Point::KfreeSkb,
            50_060_000,
            0xf0,
            None,
            Kept::Headers(headers(99)),
        );
        evs.extend(dropped);
        // Elsewhere: never on lr-b.
        evs.push(ev(
            Point::NetDevQueue,
            60_000_000,
            0xe0,
            Some("lr-x"),
            Kept::Headers(headers(77)),
        ));
        let c = chains(evs);
        let names = |i: u32| (i == 7).then(|| "lr-t-b".to_string());
        let IfaceSummary {
            steps,
            drops,
            counts,
            example,
            ..
        } = summarise(c.into_chains(), 100, &names);
        assert_eq!(counts.matched, 11);
        assert_eq!(counts.elsewhere, 1);
        assert_eq!(counts.dropped, 1);
        assert_eq!(counts.chain_events, 11);
        // The last row is the copy to the socket: the dropped one lacks it.
        assert_eq!(counts.followed_first_to_last, 10);
        let points: Vec<Point> = steps.iter().map(|s| s.point).collect();
        assert_eq!(
            points,
            [
                Point::NetDevQueue,
                Point::NetDevXmit,
                Point::NetifReceiveSkb,
                Point::SkbCopyDatagramIovec,
                Point::KfreeSkb
            ]
        );
        assert_eq!(steps[0].from_send.median_ns, 0);
        assert_eq!(steps[2].from_send.median_ns, 20_000);
        assert_eq!(steps[2].packets, 11);
        assert_eq!(steps[0].netns.as_deref(), Some("lr-t-b"));
        assert_eq!(drops.len(), 1);
        assert_eq!(drops[0].reason, "SOCKET_RCVBUFF");
        assert_eq!(drops[0].after, "net:netif_receive_skb on lr-b");
        assert_eq!(example.len(), 4);
        assert!(example.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
        // --count keeps the first packets only.
        let mut evs = Vec::new();
        for i in 0..5u16 {
            evs.extend(packet(u64::from(i) * 1_000_000, 0xa0 + u64::from(i), i));
        }
        let counts = summarise(chains(evs).into_chains(), 3, &names).counts;
        assert_eq!(counts.matched, 3);
    }

    #[test]
    fn a_udp_delivery_ends_at_the_socket_and_its_late_free_does_not_count() {
        // Queued to the socket (sk_data_ready, by chain), then freed: the
        // free of the last datagram comes after the trace (UDP defers it).
        let mut evs = Vec::new();
        for i in 0..4u16 {
            let (t, skb) = (u64::from(i) * 1_000_000, 0xa0 + u64::from(i));
            let mut p = packet(t, skb, i);
            p[3] = ev(Point::SkDataReady, t + 30_000, skb, None, Kept::Chain);
            evs.extend(p);
            if i < 3 {
                evs.push(ev(Point::ConsumeSkb, t + 900_000, skb, None, Kept::Chain));
            }
            if i == 0 {
                // A reader that copies this one's payload (late): the
                // others, delivered too, are still followed to their end.
                let h = Kept::Headers(headers(i));
                evs.push(ev(Point::SkbCopyDatagramIovec, t + 800_000, skb, None, h));
            }
        }
        // The address of the last one reused by a packet matched nowhere:
        // its qdisc event is no step of the delivered packet.
        evs.push(ev(
            Point::QdiscDequeue,
            3_950_000,
            0xa3,
            Some("eth0"),
            Kept::Chain,
        ));
        evs.sort_by_key(|e| e.time_ns);
        let names = |_: u32| None;
        assert_eq!(chains(evs.clone()).orphans(), 1);
        let IfaceSummary {
            steps,
            gaps,
            drops,
            counts,
            ..
        } = summarise(chains(evs).into_chains(), 100, &names);
        let points: Vec<Point> = steps.iter().map(|s| s.point).collect();
        assert_eq!(
            points[2..],
            [
                Point::NetifReceiveSkb,
                Point::SkDataReady,
                Point::SkbCopyDatagramIovec,
                Point::ConsumeSkb
            ]
        );
        assert_eq!((steps[4].packets, steps[5].packets), (1, 3));
        assert_eq!(counts.followed_first_to_last, 4);
        assert_eq!((counts.dropped, drops.len()), (0, 0));
        // Named in words, largest first: the free that came late.
        assert_eq!(gaps.len(), steps.len() - 1);
        assert!(
            gaps[0].what.starts_with("the receiver's wake-up"),
            "{gaps:#?}"
        );
        assert!(gaps
            .windows(2)
            .all(|w| w[0].duration.median_ns >= w[1].duration.median_ns));
    }

    #[test]
    fn configs_are_checked_and_results_flagged() {
        let cfg = IfaceConfig {
            iface: "lr-b".into(),
            filter: IfaceFilter::parse("udp").unwrap(),
            count: 10,
            time_ns: 1,
            backend: Backend::Auto,
        };
        assert_eq!(cfg.validate(), Ok(()));
        let bad = |f: fn(&mut IfaceConfig)| {
            let mut c = cfg.clone();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(|c| c.count = 0).contains("--count"));
        assert!(bad(|c| c.time_ns = 0).contains("--time"));
        assert!(bad(|c| c.backend = Backend::Perf).contains("no packet headers"));
    }

    #[test]
    fn flags_follow_the_counts() {
        let tracer = TracerInfo {
            method: String::new(),
            backend: Backend::TpBtf,
            tp_btf_programs: Vec::new(),
            fallback: None,
            clock: String::new(),
            opened: Vec::new(),
            missing: Vec::new(),
            left_out: Vec::new(),
            filters: Vec::new(),
            kprobes: false,
            function_level: String::new(),
            mounted_tracefs: false,
            ring_bytes_per_cpu: 0,
            cpus: 1,
            recursion_misses: BTreeMap::new(),
        };
        let mut r = IfaceResult {
            iface: "lr-b".into(),
            netns: None,
            filter: "udp".into(),
            count: 10,
            time_ns: 1,
            stopped_by: "time".into(),
            traced_ns: 1,
            tracer,
            packets: IfaceCounts::default(),
            steps: Vec::new(),
            gaps: Vec::new(),
            drops: Vec::new(),
            example: Vec::new(),
        };
        let codes =
            |r: &IfaceResult| -> Vec<String> { assess(r).into_iter().map(|f| f.code).collect() };
        assert_eq!(codes(&r), [codes::NOTHING_MATCHED]);
        assert_eq!(crate::result::exit_code(&assess(&r)), 1);
        r.packets.matched = 5;
        assert_eq!(codes(&r), [codes::NONE_FOLLOWED]);
        r.packets.followed_first_to_last = 5;
        assert!(codes(&r).is_empty());
        r.packets.ring_lost_records = 3;
        r.packets.dropped = 1;
        r.stopped_by = codes::EVENT_LIMIT.into();
        assert_eq!(
            codes(&r),
            [codes::EVENT_LIMIT, codes::RING_OVERFLOW, codes::DROPS]
        );
        assert_eq!(crate::result::exit_code(&assess(&r)), 0);
        // Runs of its own programs the kernel skipped: flagged, a warning.
        r.tracer
            .recursion_misses
            .insert("net/net_dev_xmit".into(), 2);
        assert!(codes(&r)
            .iter()
            .any(|c| c == crate::journey::codes::EVENTS_SKIPPED));
    }
}
