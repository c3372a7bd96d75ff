//! Following each probe through the events ([`follow`]) and turning the
//! paths into the table ([`summarise`]).

use std::collections::{BTreeMap, BTreeSet};

use super::event::{Event, Point};
use super::{
    Attribution, Config, DropSite, ExampleEvent, Gap, ProbeCounts, Quantiles, Step, LEN_SLOTS,
};

/// A kfree_skb on a chain address counts as the probe's drop, and an
/// sk_data_ready as its queueing to the socket, only this soon after the
/// last receive: both happen in the same softirq, and addresses are
/// recycled within milliseconds.
const SAME_SOFTIRQ_NS: u64 = 1_000_000;

/// A probe as the sender sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSent {
    /// Its sequence number (in its payload).
    pub seq: u64,
    /// Its UDP payload length.
    pub payload: u32,
    /// CLOCK_MONOTONIC just before sendto(), ns.
    pub send_ns: u64,
}

/// A device of the bed and where it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Interface name (unique within a bed).
    pub name: String,
    /// Its namespace.
    pub netns: String,
    /// The bed role of the namespace (`a`, `dut`, `b`).
    pub role: String,
}

/// One probe's events, in time order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbePath {
    /// The probe.
    pub probe: ProbeSent,
    /// Its events (user and kernel), sorted by time.
    pub events: Vec<Event>,
}

impl ProbePath {
    /// Seen leaving host a (net_dev_queue on a's interface).
    pub fn started(&self, devices: &[Device]) -> bool {
        self.events.iter().any(|e| {
            e.point == Point::NetDevQueue && role_of(devices, e.dev.as_deref()) == Some("a")
        })
    }

    /// Seen delivered to the receiver (its payload copied, or read).
    pub fn delivered(&self) -> bool {
        self.events.iter().any(|e| {
            matches!(
                e.point,
                Point::SkDataReady
                    | Point::SockRecvLength
                    | Point::SkbCopyDatagramIovec
                    | Point::UserRecv
            )
        })
    }

    /// Seen dropped (kfree_skb on its buffer) and not delivered.
    pub fn dropped(&self) -> bool {
        !self.delivered() && self.events.iter().any(|e| e.point == Point::KfreeSkb)
    }

    /// Its skb address changed on the way (a copy or a clone).
    pub fn address_changed(&self) -> bool {
        let addrs: BTreeSet<u64> = self
            .events
            .iter()
            .filter(|e| e.point.has_len())
            .filter_map(|e| e.skb)
            .collect();
        addrs.len() > 1
    }
}

fn device<'a>(devices: &'a [Device], name: Option<&str>) -> Option<&'a Device> {
    let name = name?;
    devices.iter().find(|d| d.name == name)
}

fn role_of<'a>(devices: &'a [Device], name: Option<&str>) -> Option<&'a str> {
    device(devices, name).map(|d| d.role.as_str())
}

/// Assembles each probe's path.
///
/// `events` are the decoded kernel events sorted by time; `received` the
/// receiver's [`Point::UserRecv`] events (with the probe's sequence number).
/// A probe's events are looked for from its send until `cfg.window_ns`
/// later, or until the next probe of the same length is sent.
pub fn follow(
    cfg: &Config,
    devices: &[Device],
    probes: &[ProbeSent],
    events: &[Event],
    received: &[Event],
) -> Vec<ProbePath> {
    let recv_by_seq: BTreeMap<u64, &Event> =
        received.iter().filter_map(|e| Some((e.seq?, e))).collect();
    probes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut end = p.send_ns.saturating_add(cfg.window_ns);
            if let Some(next) = probes.get(i + LEN_SLOTS as usize) {
                end = end.min(next.send_ns);
            }
            let lo = events.partition_point(|e| e.time_ns < p.send_ns);
            let hi = events.partition_point(|e| e.time_ns < end);
            let layers = (cfg.l3_overhead(), cfg.l2_overhead(), cfg.tcp_header());
            let mut path = follow_one(p, layers, devices, &events[lo..hi], &events[..hi]);
            if let Some(r) = recv_by_seq.get(&p.seq) {
                path.push((*r).clone());
            }
            path.push(Event::user(Point::UserSend, p.send_ns, p.seq, p.payload));
            path.sort_by_key(|e| e.time_ns);
            ProbePath {
                probe: *p,
                events: path,
            }
        })
        .collect()
}

/// The kernel events of one probe: `window` from its send to its end,
/// `before` every event up to the end (for the softirq that preceded a
/// receive).
///
/// `(l3, l2, tcp)`: what the probe's IP packet and its frame add to its
/// payload, and its TCP header (0 for other probes).
/// The path starts at the first net_dev_queue on host a's interface with
/// the probe's frame length. From there it takes every event with the
/// probe's length at that layer on a bed device (a new skb address found so
/// joins the chain: a copy or clone), the copy to user space on a chain
/// address, qdisc events on a chain address while it is in use, and the
/// first kfree_skb of a chain address just after its last use (a drop).
fn follow_one(
    p: &ProbeSent,
    (l3, l2, tcp): (u32, u32, u32),
    devices: &[Device],
    window: &[Event],
    before: &[Event],
) -> Vec<Event> {
    let len_ok = |e: &Event| {
        let Some(l) = e.len else { return false };
        match e.point {
            Point::NetDevQueue | Point::NetDevStartXmit => l == p.payload + l2,
            Point::NetifRx | Point::NetifReceiveSkb | Point::NapiGroReceive => l == p.payload + l3,
            Point::NetDevXmit => l == p.payload + l3 || l == p.payload + l2,
            Point::SkbCopyDatagramIovec => l == p.payload,
            // The segment's payload (perf: `data_len`) or, in the skb at
            // TCP's receive, the TCP header and the payload (tp_btf: `len`).
            Point::TcpProbe => tcp > 0 && (l == p.payload || l == p.payload + tcp),
            _ => false,
        }
    };
    let Some(start) = window.iter().position(|e| {
        e.point == Point::NetDevQueue
            && len_ok(e)
            && role_of(devices, e.dev.as_deref()) == Some("a")
    }) else {
        return Vec::new();
    };
    let window = &window[start..];
    // Address → (first, last) time of a length-matched event on it.
    let mut addrs: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut out: Vec<Event> = Vec::new();
    for e in window {
        let on_bed = device(devices, e.dev.as_deref()).is_some();
        let known = e.skb.is_some_and(|a| addrs.contains_key(&a));
        let take = len_ok(e)
            && match e.point {
                Point::SkbCopyDatagramIovec | Point::TcpProbe => known,
                _ => on_bed,
            };
        if take {
            if let Some(a) = e.skb {
                let span = addrs.entry(a).or_insert((e.time_ns, e.time_ns));
                span.1 = e.time_ns;
            }
            out.push(e.clone());
        }
    }
    let first = window[0].time_ns;
    let last = addrs.values().map(|s| s.1).max().unwrap_or(first);
    let mut freed = BTreeSet::new();
    let mut end = last;
    for e in window {
        let on = e.skb.and_then(|a| addrs.get(&a).map(|s| (a, *s)));
        let keep = match e.point {
            Point::QdiscEnqueue | Point::QdiscDequeue => {
                on.is_some_and(|(_, (f, l))| (f..=l).contains(&e.time_ns))
            }
            Point::KfreeSkb => match on {
                Some((a, (_, l)))
                    if (l..=l + SAME_SOFTIRQ_NS).contains(&e.time_ns) && !freed.contains(&a) =>
                {
                    freed.insert(a);
                    end = end.max(e.time_ns);
                    true
                }
                _ => false,
            },
            _ => false,
        };
        if keep {
            out.push(e.clone());
        }
    }
    socket_events(&mut out, p, devices, window);
    // Socket-queue trouble between the first event and the buffer's end.
    out.extend(
        window
            .iter()
            .filter(|e| matches!(e.point, Point::SockRcvqueueFull | Point::UdpFailQueueRcvSkb))
            .filter(|e| (first..=end).contains(&e.time_ns))
            .cloned(),
    );
    out.sort_by_key(|e| e.time_ns);
    attach_softirqs(&mut out, before);
    name_qdisc_devices(&mut out);
    out
}

/// The words the result and the table use for the events without an skb.
pub const ATTRIBUTED: &str = "attributed by CPU and time, not by skb";

/// Adds to the paths the events that carry no skb, by CPU and time, and
/// counts how that went. A FIB lookup belongs to a probe when it ran on
/// the CPU of one of the probe's netif_receive_skb events, in its
/// namespace (where the lookup's device tells), after it and before the
/// probe's next event and the end of that NET_RX softirq (the lookup routes
/// the packet the stack just took); a lookup inside the brackets of several probes is
/// attributed to none (ambiguous). The first NAPI poll and the first NET_RX
/// softirq exit on that CPU after a receive (within 1 ms) end the receive
/// processing that ran it; probes received in one poll share them. The
/// NET_RX softirq entries were attached by [`follow`] (the latest on the
/// CPU after the probe's previous event). Times stay monotonic within a
/// probe: every path is sorted by time again.
pub fn attribute(paths: &mut [ProbePath], devices: &[Device], events: &[Event]) -> Attribution {
    struct Bracket<'a> {
        path: usize,
        cpu: u32,
        from: u64,
        to: u64,
        rx: &'a Event,
    }
    // The same namespace as the receive `rx` (always on a bed device),
    // where the lookup `e` tells: by inode (`tp_btf` records), else by the
    // bed device's namespace; a device outside the bed other than `lo`
    // (every namespace has one) is in none of its namespaces.
    let same_netns = |rx: &Event, e: &Event| match (rx.netns, e.netns) {
        (Some(x), Some(y)) => x == y,
        _ => match (
            device(devices, rx.dev.as_deref()),
            device(devices, e.dev.as_deref()),
        ) {
            (Some(x), Some(y)) => x.netns == y.netns,
            (_, None) => e.dev.as_deref().is_none_or(|d| d == "lo"),
            (None, Some(_)) => true,
        },
    };
    let mut brackets = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        for (j, e) in p.events.iter().enumerate() {
            let (Point::NetifReceiveSkb, Some(cpu)) = (e.point, e.cpu) else {
                continue;
            };
            let lo = events.partition_point(|x| x.time_ns <= e.time_ns);
            let limit = events[lo..]
                .iter()
                .take_while(|x| x.time_ns <= e.time_ns + SAME_SOFTIRQ_NS)
                .find(|x| x.point == Point::SoftirqExitNetRx && x.cpu == Some(cpu))
                .map_or(e.time_ns + SAME_SOFTIRQ_NS, |x| x.time_ns);
            let next = p.events[j + 1..]
                .iter()
                .find(|n| !n.point.attributed() && n.time_ns > e.time_ns)
                .map_or(limit, |n| n.time_ns.min(limit));
            brackets.push(Bracket {
                path: i,
                cpu,
                from: e.time_ns,
                to: next,
                rx: e,
            });
        }
    }
    let mut add: Vec<Vec<Event>> = vec![Vec::new(); paths.len()];
    let mut a = Attribution {
        method: format!(
            "FIB lookups, NAPI polls and NET_RX softirq entries and exits carry no skb: {ATTRIBUTED} \
             (a FIB lookup on the CPU of a probe's netif_receive_skb, in its namespace where the \
             lookup's device tells, after it and before the probe's next event and the softirq's \
             exit; the first NAPI poll and softirq exit on that CPU after it; the \
             last softirq entry before it)"
        ),
        ..Attribution::default()
    };
    // Each lookup's owners, found from the brackets (each at most 1 ms of
    // events) rather than every lookup of the host (perf with
    // --all-events records them all) against every bracket.
    let mut owners: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for b in &brackets {
        let lo = events.partition_point(|x| x.time_ns <= b.from);
        let hi = events.partition_point(|x| x.time_ns < b.to).max(lo);
        for (k, e) in events[lo..hi].iter().enumerate() {
            if e.point.is_fib() && e.cpu == Some(b.cpu) && same_netns(b.rx, e) {
                owners.entry(lo + k).or_default().insert(b.path);
            }
        }
    }
    let lookups = events.iter().filter(|e| e.point.is_fib()).count() as u64;
    a.unattributed += lookups - owners.len() as u64;
    for (k, paths_of) in &owners {
        match paths_of.iter().collect::<Vec<_>>()[..] {
            [&only] => {
                add[only].push(events[*k].clone());
                a.attributed += 1;
            }
            _ => a.ambiguous += 1,
        }
    }
    let mut used = BTreeSet::new();
    for b in &brackets {
        let lo = events.partition_point(|e| e.time_ns <= b.from);
        for point in [Point::NapiPoll, Point::SoftirqExitNetRx] {
            let first = events[lo..]
                .iter()
                .enumerate()
                .take_while(|(_, e)| e.time_ns <= b.from + SAME_SOFTIRQ_NS)
                .find(|(_, e)| e.point == point && e.cpu == Some(b.cpu));
            if let Some((k, e)) = first {
                used.insert(lo + k);
                add[b.path].push(e.clone());
            }
        }
    }
    let polls = events
        .iter()
        .filter(|e| matches!(e.point, Point::NapiPoll | Point::SoftirqExitNetRx))
        .count() as u64;
    a.attributed += used.len() as u64;
    a.unattributed += polls - used.len() as u64;
    for (p, extra) in paths.iter_mut().zip(add) {
        p.events.extend(extra);
        p.events.sort_by_key(|e| e.time_ns);
        p.events.dedup();
    }
    // The softirq entries `follow` attached (a copy named after the
    // receive's device: known by time and CPU).
    let entries: BTreeSet<(u64, Option<u32>)> = paths
        .iter()
        .flat_map(|p| &p.events)
        .filter(|e| e.point == Point::SoftirqNetRx)
        .map(|e| (e.time_ns, e.cpu))
        .collect();
    for e in events.iter().filter(|e| e.point == Point::SoftirqNetRx) {
        if entries.contains(&(e.time_ns, e.cpu)) {
            a.attributed += 1;
        } else {
            a.unattributed += 1;
        }
    }
    a
}

/// Adds the socket's side in host b: the first sk_data_ready on the CPU of
/// the last receive in b after it (the packet queued to a UDP socket), and
/// the receiver's recvmsg returning the probe's length on that socket.
fn socket_events(out: &mut Vec<Event>, p: &ProbeSent, devices: &[Device], window: &[Event]) {
    if out.iter().any(|e| e.point == Point::KfreeSkb) {
        return;
    }
    let Some(rx) = out
        .iter()
        .rev()
        .find(|e| {
            e.point == Point::NetifReceiveSkb && role_of(devices, e.dev.as_deref()) == Some("b")
        })
        .cloned()
    else {
        return;
    };
    let ready = window
        .iter()
        .find(|e| {
            e.point == Point::SkDataReady
                && e.cpu == rx.cpu
                && (rx.time_ns..=rx.time_ns + SAME_SOFTIRQ_NS).contains(&e.time_ns)
        })
        .cloned();
    let after = ready.as_ref().map_or(rx.time_ns, |r| r.time_ns);
    let recv = window.iter().find(|e| {
        e.point == Point::SockRecvLength
            && e.len == Some(p.payload)
            && e.time_ns >= after
            && ready.as_ref().is_none_or(|r| r.sk == e.sk)
    });
    out.extend(ready);
    out.extend(recv.cloned());
}

/// Adds, before each netif_receive_skb, the NET_RX softirq entry on its CPU
/// that ran it: the latest one on that CPU after the probe's previous event.
fn attach_softirqs(path: &mut Vec<Event>, before: &[Event]) {
    let mut found = Vec::new();
    for (i, e) in path.iter().enumerate() {
        if e.point != Point::NetifReceiveSkb {
            continue;
        }
        let since = i.checked_sub(1).map_or(0, |j| path[j].time_ns);
        let upto = before.partition_point(|s| s.time_ns <= e.time_ns);
        if let Some(s) = before[..upto]
            .iter()
            .rev()
            .take_while(|s| s.time_ns >= since)
            .find(|s| s.point == Point::SoftirqNetRx && s.cpu == e.cpu)
        {
            let mut s = s.clone();
            s.dev.clone_from(&e.dev);
            found.push(s);
        }
    }
    path.extend(found);
    path.sort_by_key(|e| e.time_ns);
    path.dedup();
}

/// qdisc records carry an ifindex, not a name: the device is that of the
/// net_dev_queue on the same buffer just before.
fn name_qdisc_devices(path: &mut [Event]) {
    for i in 0..path.len() {
        if matches!(path[i].point, Point::QdiscEnqueue | Point::QdiscDequeue) {
            let skb = path[i].skb;
            path[i].dev = path[..i]
                .iter()
                .rev()
                .find(|e| e.point == Point::NetDevQueue && e.skb == skb)
                .and_then(|e| e.dev.clone());
        }
    }
}

/// The table and the counts from the paths.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Rows in path order.
    pub steps: Vec<Step>,
    /// Gaps, largest median first.
    pub gaps: Vec<Gap>,
    /// Drops, most frequent first.
    pub drops: Vec<DropSite>,
    /// Counts (without `ring_lost_samples`).
    pub counts: ProbeCounts,
    /// The first probe followed end to end.
    pub example: Vec<ExampleEvent>,
}

type Key = (Point, Option<String>, usize);

/// Summarises the paths. `topology` names the bed's (`bridge`, `router`,
/// `pair`) for naming the gaps.
pub fn summarise(paths: &[ProbePath], devices: &[Device], topology: &str) -> Summary {
    struct Acc {
        offsets: BTreeMap<u64, i64>,
        cpus: BTreeSet<u32>,
        netns: Option<String>,
        first_seen: usize,
    }
    let mut rows: BTreeMap<Key, Acc> = BTreeMap::new();
    let mut order = 0;
    let mut drops: super::DropCounts = BTreeMap::new();
    for p in paths {
        let mut seen: BTreeMap<(Point, Option<String>), usize> = BTreeMap::new();
        let mut netns: Option<String> = None;
        let mut prev_label = String::from("?");
        for e in &p.events {
            let dev_ns = device(devices, e.dev.as_deref()).map(|d| d.netns.clone());
            let ns = match e.point {
                Point::UserSend => device_of_role(devices, "a"),
                // Where the packet last was: b for UDP and TCP, back in a
                // for an ICMP echo's reply.
                Point::UserRecv => netns.clone().or_else(|| device_of_role(devices, "b")),
                _ => dev_ns.or_else(|| netns.clone()),
            };
            netns.clone_from(&ns);
            let n = seen.entry((e.point, e.dev.clone())).or_default();
            let key = (e.point, e.dev.clone(), *n);
            *n += 1;
            let acc = rows.entry(key).or_insert_with(|| {
                order += 1;
                Acc {
                    offsets: BTreeMap::new(),
                    cpus: BTreeSet::new(),
                    netns: ns.clone(),
                    first_seen: order,
                }
            });
            acc.offsets
                .insert(p.probe.seq, e.time_ns as i64 - p.probe.send_ns as i64);
            acc.cpus.extend(e.cpu);
            if e.point == Point::KfreeSkb && !p.delivered() {
                let reason = e.reason.clone().unwrap_or_else(|| "?".into());
                let loc = e.location.map(|l| format!("{l:#x}"));
                *drops
                    .entry((reason, prev_label.clone(), ns, loc))
                    .or_default() += 1;
            }
            prev_label = step_label(e.point, e.dev.as_deref());
        }
    }
    let mut keyed: Vec<(Key, Acc, Quantiles)> = rows
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
            role: a
                .netns
                .as_deref()
                .and_then(|ns| devices.iter().find(|d| d.netns == ns))
                .map(|d| d.role.clone()),
            netns: a.netns.clone(),
            cpus: a.cpus.iter().copied().collect(),
            packets: a.offsets.len() as u64,
            from_send: *q,
            by_cpu_and_time: point.attributed(),
        })
        .collect();
    let rows: Vec<&BTreeMap<u64, i64>> = keyed.iter().map(|(_, a, _)| &a.offsets).collect();
    let gaps = gaps_between(&rows, &steps, topology);
    let drops = DropSite::from_counts(drops);
    let followed = paths
        .iter()
        .filter(|p| p.started(devices) && p.delivered())
        .count() as u64;
    let dropped = paths.iter().filter(|p| p.dropped()).count() as u64;
    let counts = ProbeCounts {
        sent: paths.len() as u64,
        followed_end_to_end: followed,
        received: paths
            .iter()
            .filter(|p| p.events.iter().any(|e| e.point == Point::UserRecv))
            .count() as u64,
        dropped,
        lost_from_view: (paths.len() as u64).saturating_sub(followed + dropped),
        address_changed: paths.iter().filter(|p| p.address_changed()).count() as u64,
        ring_lost_samples: 0,
    };
    let example = paths
        .iter()
        .find(|p| p.started(devices) && p.delivered())
        .map(|p| {
            p.events
                .iter()
                .map(|e| ExampleEvent {
                    tracepoint: e.point.label().to_string(),
                    t_ns: e.time_ns as i64 - p.probe.send_ns as i64,
                    dev: e.dev.clone(),
                    cpu: e.cpu,
                    skb: e.skb.map(|a| format!("{a:#x}")),
                    len: e.len,
                })
                .collect()
        })
        .unwrap_or_default();
    Summary {
        steps,
        gaps,
        drops,
        counts,
        example,
    }
}

/// The gaps between consecutive `steps`, each over the packets that
/// showed both (`rows[i]`: packet → time of step `i`), named in words,
/// largest median first.
pub(crate) fn gaps_between(
    rows: &[&BTreeMap<u64, i64>],
    steps: &[Step],
    topology: &str,
) -> Vec<Gap> {
    let mut gaps: Vec<Gap> = rows
        .windows(2)
        .enumerate()
        .filter_map(|(i, w)| {
            let mut d: Vec<i64> = w[0]
                .iter()
                .filter_map(|(k, t)| w[1].get(k).map(|u| u - t))
                .collect();
            let packets = d.len() as u64;
            Quantiles::of(&mut d).map(|duration| Gap {
                from: i,
                to: i + 1,
                what: name_gap(&steps[i], &steps[i + 1], topology),
                packets,
                duration,
            })
        })
        .collect();
    gaps.sort_by_key(|g| std::cmp::Reverse(g.duration.median_ns));
    gaps
}

fn device_of_role(devices: &[Device], role: &str) -> Option<String> {
    devices
        .iter()
        .find(|d| d.role == role)
        .map(|d| d.netns.clone())
}

/// `net:netif_receive_skb on lr-b`.
pub(crate) fn step_label(point: Point, dev: Option<&str>) -> String {
    match dev {
        Some(d) => format!("{} on {d}", point.label()),
        None => point.label().to_string(),
    }
}

fn step_text(s: &Step) -> String {
    let mut t = step_label(s.point, s.dev.as_deref());
    if let Some(r) = &s.role {
        t.push_str(&format!(" ({r})"));
    }
    t
}

/// The gap between two steps in words: what the kernel does there, then
/// the two steps.
fn name_gap(a: &Step, b: &Step, topology: &str) -> String {
    use Point as P;
    let same_dev = a.dev == b.dev;
    fn role(s: &Step) -> &str {
        s.role.as_deref().unwrap_or("")
    }
    let what = match (a.point, b.point) {
        (P::UserSend, _) => "sendto(): socket, transport and IP output in host a".to_string(),
        (P::NetifReceiveSkb | P::FibTableLookup | P::Fib6TableLookup, P::TcpProbe) => {
            "IP receive and local delivery up to TCP's receive (ip_local_deliver or \
             ip6_input, tcp_v4_rcv or tcp_v6_rcv, the socket's lock)"
                .to_string()
        }
        (
            P::TcpProbe,
            P::SkDataReady | P::SkbCopyDatagramIovec | P::SockRecvLength | P::UserRecv,
        ) => "TCP's receive: the segment queued to the socket (and acknowledged), the \
              receiver's wake-up and recvmsg()"
            .to_string(),
        (
            P::NetifReceiveSkb | P::FibTableLookup | P::Fib6TableLookup,
            P::NetDevQueue | P::FibTableLookup | P::Fib6TableLookup,
        ) if role(a) == "b" && role(b) == "b" => {
            "the echo answered by host b's kernel (IP and ICMP receive, the reply built and \
             routed)"
                .to_string()
        }
        (P::NetifReceiveSkb, P::FibTableLookup) if role(a) == "dut" && role(b) == "dut" => {
            "IP routing in the router, up to the FIB lookup (ip_rcv, netfilter PREROUTING, \
             ip_route_input)"
                .to_string()
        }
        (P::NetifReceiveSkb, P::Fib6TableLookup) if role(a) == "dut" && role(b) == "dut" => {
            "IPv6 routing in the router, up to the FIB lookup (ipv6_rcv, netfilter PREROUTING, \
             ip6_route_input)"
                .to_string()
        }
        (P::FibTableLookup, P::NetDevQueue) if role(a) == "dut" && role(b) == "dut" => {
            "IP routing in the router, after the FIB lookup (ip_forward, netfilter FORWARD and \
             POSTROUTING, neighbour output)"
                .to_string()
        }
        (P::Fib6TableLookup, P::NetDevQueue) if role(a) == "dut" && role(b) == "dut" => {
            "IPv6 routing in the router, after the FIB lookup (ip6_forward, netfilter FORWARD \
             and POSTROUTING, neighbour output)"
                .to_string()
        }
        (_, P::NapiPoll) => {
            "the rest of that NAPI poll (this packet's receive, then the packets after it)"
                .to_string()
        }
        (
            P::NapiPoll | P::NetifReceiveSkb | P::FibTableLookup | P::Fib6TableLookup,
            P::SoftirqExitNetRx,
        ) => "the rest of the NET_RX softirq (other polls)".to_string(),
        (P::SoftirqExitNetRx, _) if role(a) == "b" => {
            "after the NET_RX softirq: the receiver's wake-up and recvmsg()".to_string()
        }
        (P::NetifReceiveSkb, P::FibTableLookup | P::Fib6TableLookup) if role(a) == "b" => {
            "IP receive up to the routing lookup in host b".to_string()
        }
        (P::FibTableLookup | P::Fib6TableLookup, _) if role(a) == "b" => {
            "local delivery after the routing lookup in host b (IP and transport receive, socket \
             queue, the receiver's wake-up)"
                .to_string()
        }
        (P::NetifReceiveSkb, P::NetDevQueue) if role(a) == "dut" && role(b) == "dut" => {
            if topology == "router" {
                "IP forwarding in the router (routing lookup, netfilter, neighbour)".to_string()
            } else {
                "bridge forwarding (br_handle_frame → FDB lookup → br_forward)".to_string()
            }
        }
        // `--iface`: no roles, but the namespaces.
        (P::NetifReceiveSkb, P::NetDevQueue)
            if a.role.is_none() && !same_dev && a.netns.is_some() && a.netns == b.netns =>
        {
            format!(
                "forwarding in {} (bridge or IP routing: no tracepoint inside)",
                a.netns.as_deref().unwrap_or("?")
            )
        }
        (P::SkDataReady, P::ConsumeSkb) => {
            "the reader's wake-up and recvmsg() up to the buffer's free (UDP may defer the free \
             to the next NET_RX softirq of the CPU that allocated it)"
                .to_string()
        }
        (P::NetifReceiveSkb, P::ConsumeSkb) => {
            "receive up to the buffer's free (consumed by the stack: an echo answered, a \
             socket's copy made)"
                .to_string()
        }
        (P::NetDevQueue, P::QdiscEnqueue | P::NetDevStartXmit) if same_dev => {
            "queueing discipline entry".to_string()
        }
        (P::QdiscEnqueue, P::QdiscDequeue) => "waiting in the qdisc".to_string(),
        (P::QdiscDequeue, P::NetDevStartXmit) => "qdisc to driver".to_string(),
        (P::NetDevStartXmit, P::NetifRx) => "veth transmit to the peer's backlog".to_string(),
        (P::NetifRx | P::NetDevXmit, P::SoftirqNetRx | P::NetifReceiveSkb) => {
            "backlog: waiting for the NET_RX softirq".to_string()
        }
        (P::SoftirqNetRx, P::NetifReceiveSkb) => "softirq to the stack's receive".to_string(),
        (P::NetifReceiveSkb, P::SkDataReady) => {
            "IP and transport receive up to the socket queue".to_string()
        }
        (P::NetifReceiveSkb, P::SkbCopyDatagramIovec | P::SockRecvLength | P::UserRecv)
            if role(a) == "b" =>
        {
            "IP and transport receive, socket queue and the receiver's wake-up in host b"
                .to_string()
        }
        (P::NetifReceiveSkb, P::UserRecv) if role(a) == "a" => {
            "the reply's IP and ICMP receive, the raw socket's queue and the sender's wake-up in \
             host a"
                .to_string()
        }
        (P::KfreeSkb, P::UserRecv) => {
            "the raw socket's copy waiting for its reader (the kernel freed the original after \
             delivering the copy)"
                .to_string()
        }
        (P::SkDataReady, _) => "the receiver's wake-up and recvmsg()".to_string(),
        (P::SockRecvLength, P::UserRecv) => "return to user space".to_string(),
        (P::NetifReceiveSkb, P::KfreeSkb | P::SockRcvqueueFull | P::UdpFailQueueRcvSkb) => {
            "receive up to the drop".to_string()
        }
        (P::SkbCopyDatagramIovec, _) => "copy to user space and return from recvfrom()".to_string(),
        _ => "kernel path".to_string(),
    };
    format!("{what}: {} → {}", step_text(a), step_text(b))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::tests::config;
    use super::*;

    pub(crate) fn devices() -> Vec<Device> {
        let d = |n: &str, ns: &str, r: &str| Device {
            name: n.into(),
            netns: ns.into(),
            role: r.into(),
        };
        vec![
            d("lr-a", "lr-t-a", "a"),
            d("lr-dut-a", "lr-t-dut", "dut"),
            d("lr-dut-b", "lr-t-dut", "dut"),
            d("lr-br", "lr-t-dut", "dut"),
            d("lr-b", "lr-t-b", "b"),
        ]
    }

    fn ev(point: Point, t: u64, skb: u64, len: Option<u32>, dev: Option<&str>) -> Event {
        Event {
            point,
            time_ns: t,
            cpu: Some(1),
            skb: Some(skb),
            len,
            dev: dev.map(str::to_string),
            ifindex: None,
            netns: None,
            sk: None,
            reason: None,
            location: None,
            seq: None,
            kept: None,
        }
    }

    /// The events of one probe through a bridge (payload `p`, skb `a`), as
    /// recorded on Linux 6.18, starting at `t`.
    pub(crate) fn bridge_events(t: u64, p: u32, a: u64, drop: Option<&str>) -> Vec<Event> {
        let (l2, l3) = (Some(p + 42), Some(p + 28));
        let mut v = vec![
            ev(Point::NetDevQueue, t + 14_000, a, l2, Some("lr-a")),
            ev(Point::NetDevStartXmit, t + 15_000, a, l2, Some("lr-a")),
            ev(Point::NetifRx, t + 17_000, a, l3, Some("lr-dut-a")),
            ev(Point::NetDevXmit, t + 18_000, a, l3, Some("lr-dut-a")),
            ev(Point::NetifReceiveSkb, t + 19_000, a, l3, Some("lr-dut-a")),
            ev(Point::NetDevQueue, t + 30_000, a, l2, Some("lr-dut-b")),
            ev(Point::NetDevStartXmit, t + 31_000, a, l2, Some("lr-dut-b")),
            ev(Point::NetifRx, t + 32_000, a, l3, Some("lr-b")),
            ev(Point::NetifReceiveSkb, t + 33_000, a, l3, Some("lr-b")),
        ];
        let mut softirq = ev(Point::SoftirqNetRx, t + 18_500, 0, None, None);
        softirq.skb = None;
        v.push(softirq);
        match drop {
            Some(reason) => {
                let mut k = ev(Point::KfreeSkb, t + 36_000, a, None, None);
                k.reason = Some(reason.into());
                v.push(k);
            }
            None => {
                let mut r = ev(Point::SkDataReady, t + 40_000, 0, None, None);
                (r.skb, r.sk) = (None, Some(0x5000));
                v.push(r);
                let mut l = ev(Point::SockRecvLength, t + 80_000, 0, Some(p), None);
                (l.skb, l.sk) = (None, Some(0x5000));
                v.push(l);
            }
        }
        // Someone else's packet of another length, and a recycled address
        // used again later.
        v.push(ev(
            Point::NetDevQueue,
            t + 20_000,
            a + 64,
            Some(p + 1),
            Some("lr-a"),
        ));
        v.push(ev(Point::KfreeSkb, t + 5_000_000, a, None, None));
        v.sort_by_key(|e| e.time_ns);
        v
    }

    /// An event without an skb on `cpu` at `t`.
    fn free(point: Point, t: u64, cpu: u32, dev: Option<&str>) -> Event {
        let mut e = ev(point, t, 0, None, dev);
        (e.skb, e.cpu) = (None, Some(cpu));
        e
    }

    /// Two probes through a bridge, the second `later` ns after the first
    /// (sent at `t`), and their events.
    fn two_probes(t: u64, later: u64) -> ([ProbeSent; 2], Vec<Event>) {
        let probe = |seq, payload, send_ns| ProbeSent {
            seq,
            payload,
            send_ns,
        };
        let mut events = bridge_events(t, 100, 0xffff_0000_0000_1000, None);
        events.extend(bridge_events(t + later, 105, 0xffff_0000_0000_2000, None));
        ([probe(0, 100, t), probe(1, 105, t + later)], events)
    }

    #[test]
    fn events_without_an_skb_are_attributed_by_cpu_and_time() {
        let cfg = config();
        let t = 1_000_000;
        let (probes, mut events) = two_probes(t, 2_000_000);
        events.extend([
            // The router's lookup, between its receive (19 µs) and its
            // queueing (30 µs), on the receive's CPU.
            free(Point::FibTableLookup, t + 25_000, 1, Some("lr-dut-b")),
            // The same instant on another CPU: not the probe's.
            free(Point::FibTableLookup, t + 26_000, 0, Some("lr-dut-b")),
            // b's local lookup, between its receive (33 µs) and
            // sk_data_ready (40 µs); then the poll and the softirq's end.
            free(Point::FibTableLookup, t + 35_000, 1, Some("lr-b")),
            // Host a's lookup for b's answer, on the same CPU inside that
            // bracket: another namespace, not the probe's.
            free(Point::FibTableLookup, t + 36_000, 1, Some("lr-a")),
            free(Point::NapiPoll, t + 41_000, 1, None),
            free(Point::SoftirqExitNetRx, t + 42_000, 1, None),
            // After that softirq ended: not the probe's either.
            free(Point::FibTableLookup, t + 42_500, 1, Some("lr-b")),
            free(Point::NapiPoll, t + 43_000, 1, None),
            // Probe 1: a lookup after its queueing (outside its bracket).
            free(Point::FibTableLookup, t + 2_031_000, 1, None),
            // Probe 1: inside its router bracket, but a device of no
            // namespace of the bed (the host's own): not the probe's.
            free(Point::FibTableLookup, t + 2_025_000, 1, Some("eth0")),
        ]);
        events.sort_by_key(|e| e.time_ns);
        let mut paths = follow(&cfg, &devices(), &probes, &events, &[]);
        let a = attribute(&mut paths, &devices(), &events);
        // A FIB lookup, a NAPI poll, a softirq exit and the two softirq entries
        // follow attached, of probe 0 and probe 1.
        assert_eq!((a.attributed, a.ambiguous, a.unattributed), (6, 0, 6));
        let pts: Vec<Point> = paths[0].events.iter().map(|e| e.point).collect();
        let at = |p: Point, n: usize| {
            pts.iter()
                .enumerate()
                .filter(|(_, q)| **q == p)
                .nth(n)
                .map(|(i, _)| i)
                .unwrap()
        };
        let fib = at(Point::FibTableLookup, 0);
        assert_eq!(pts[fib - 1], Point::NetifReceiveSkb);
        assert_eq!(pts[fib + 1], Point::NetDevQueue);
        assert_eq!(paths[0].events[fib].dev.as_deref(), Some("lr-dut-b"));
        assert_eq!(
            pts[at(Point::FibTableLookup, 1) - 1],
            Point::NetifReceiveSkb
        );
        assert!(at(Point::NapiPoll, 0) < at(Point::SoftirqExitNetRx, 0));
        assert_eq!(pts.iter().filter(|p| **p == Point::NapiPoll).count(), 1);
        assert!(paths[0]
            .events
            .windows(2)
            .all(|w| w[0].time_ns <= w[1].time_ns));
        assert!(!paths[1]
            .events
            .iter()
            .any(|e| e.point.attributed() && e.point != Point::SoftirqNetRx));
        let s = summarise(&paths, &devices(), "router");
        let rows: Vec<&Step> = s.steps.iter().filter(|s| s.by_cpu_and_time).collect();
        assert!(rows
            .iter()
            .any(|r| r.point == Point::FibTableLookup && r.role.as_deref() == Some("dut")));
        assert!(s.gaps.iter().any(|g| g
            .what
            .starts_with("IP routing in the router, up to the FIB lookup")));
        assert!(!s
            .steps
            .iter()
            .any(|s| s.point == Point::NetDevQueue && s.by_cpu_and_time));
    }

    #[test]
    fn a_lookup_inside_two_probes_brackets_is_ambiguous() {
        let cfg = config();
        let t = 1_000_000;
        let (probes, mut events) = two_probes(t, 1_000);
        events.push(free(Point::FibTableLookup, t + 25_000, 1, None));
        events.sort_by_key(|e| e.time_ns);
        let mut paths = follow(&cfg, &devices(), &probes, &events, &[]);
        let a = attribute(&mut paths, &devices(), &events);
        // Attributed: only the two probes' softirq entries.
        assert_eq!((a.attributed, a.ambiguous), (2, 1));
        assert!(paths
            .iter()
            .all(|p| !p.events.iter().any(|e| e.point == Point::FibTableLookup)));
    }

    #[test]
    fn a_bridge_probe_is_followed_in_path_order() {
        let cfg = config();
        let probes = [ProbeSent {
            seq: 0,
            payload: 100,
            send_ns: 1_000_000,
        }];
        let events = bridge_events(1_000_000, 100, 0xffff_0000_0000_1000, None);
        let recv = [Event::user(Point::UserRecv, 1_000_000 + 90_000, 0, 100)];
        let paths = follow(&cfg, &devices(), &probes, &events, &recv);
        let pts: Vec<Point> = paths[0].events.iter().map(|e| e.point).collect();
        assert_eq!(
            pts,
            [
                Point::UserSend,
                Point::NetDevQueue,
                Point::NetDevStartXmit,
                Point::NetifRx,
                Point::NetDevXmit,
                Point::SoftirqNetRx,
                Point::NetifReceiveSkb,
                Point::NetDevQueue,
                Point::NetDevStartXmit,
                Point::NetifRx,
                Point::NetifReceiveSkb,
                Point::SkDataReady,
                Point::SockRecvLength,
                Point::UserRecv,
            ]
        );
        let s = summarise(&paths, &devices(), "bridge");
        assert_eq!(s.counts.followed_end_to_end, 1);
        assert_eq!(s.counts.lost_from_view, 0);
        assert_eq!(s.steps.len(), 14);
        assert_eq!(s.steps[0].from_send.median_ns, 0);
        assert_eq!(s.steps[6].netns.as_deref(), Some("lr-t-dut"));
        assert_eq!(s.steps[10].netns.as_deref(), Some("lr-t-b"));
        assert_eq!(
            s.steps[11].netns.as_deref(),
            Some("lr-t-b"),
            "sk_data_ready inherits"
        );
        // The largest gap after sendto's 14 µs is the bridge's 11 µs.
        let bridge = s
            .gaps
            .iter()
            .find(|g| g.what.starts_with("bridge forwarding"))
            .unwrap();
        assert_eq!(bridge.duration.median_ns, 11_000);
        assert_eq!(
            bridge.what,
            "bridge forwarding (br_handle_frame → FDB lookup → br_forward): \
             net:netif_receive_skb on lr-dut-a (dut) → net:net_dev_queue on lr-dut-b (dut)"
        );
        assert_eq!(s.example.len(), 14);
    }

    #[test]
    fn a_drop_is_reported_with_its_reason_and_place() {
        let cfg = config();
        let probes: Vec<ProbeSent> = (0..4)
            .map(|i| ProbeSent {
                seq: i,
                payload: cfg.probe_payload(i),
                send_ns: 1_000_000 * (i + 1),
            })
            .collect();
        let mut events = Vec::new();
        for p in &probes {
            let drop = (p.seq % 2 == 1).then_some("NETFILTER_DROP");
            events.extend(bridge_events(
                p.send_ns,
                p.payload,
                0x1000 * (p.seq + 1),
                drop,
            ));
        }
        events.sort_by_key(|e| e.time_ns);
        let paths = follow(&cfg, &devices(), &probes, &events, &[]);
        let s = summarise(&paths, &devices(), "bridge");
        assert_eq!(s.counts.dropped, 2);
        assert_eq!(s.counts.followed_end_to_end, 2);
        assert_eq!(s.drops.len(), 1);
        assert_eq!(s.drops[0].reason, "NETFILTER_DROP");
        assert_eq!(s.drops[0].after, "net:netif_receive_skb on lr-b");
        assert_eq!(s.drops[0].netns.as_deref(), Some("lr-t-b"));
        assert_eq!(s.drops[0].count, 2);
        let k = s.steps.iter().find(|s| s.point == Point::KfreeSkb).unwrap();
        assert_eq!(k.packets, 2);
    }

    #[test]
    fn a_probe_with_no_events_is_lost_from_view() {
        let cfg = config();
        let probes = [ProbeSent {
            seq: 0,
            payload: 100,
            send_ns: 5,
        }];
        let paths = follow(&cfg, &devices(), &probes, &[], &[]);
        let s = summarise(&paths, &devices(), "pair");
        assert_eq!(s.counts.lost_from_view, 1);
        assert_eq!(s.counts.followed_end_to_end, 0);
        assert!(s.example.is_empty());
    }

    #[test]
    fn qdisc_events_take_the_device_of_their_queue() {
        let mut path = vec![
            ev(Point::NetDevQueue, 1, 7, Some(142), Some("lr-a")),
            ev(Point::QdiscEnqueue, 2, 7, None, None),
        ];
        name_qdisc_devices(&mut path);
        assert_eq!(path[1].dev.as_deref(), Some("lr-a"));
    }
}
