//! The responder's kernel stages of a kernel-answered echo (ICMP echo on a
//! bed), from the same tracepoints as a journey: on the responder's
//! interface, the request's `netif_rx` → `netif_receive_skb` (rx: backlog
//! and softirq), `netif_receive_skb` → the reply's `net_dev_queue`
//! (processing: IP and ICMP receive, the reply built and routed), and
//! `net_dev_queue` → `net_dev_xmit` (tx). One clock (CLOCK_MONOTONIC) on
//! one host, so no offset enters.

use serde::{Deserialize, Serialize};

use super::event::{Event, Point};
use crate::stats::{Histogram, Summary};

/// The reply must be queued this soon after the request's receive.
const REPLY_WITHIN_NS: u64 = 1_000_000;

/// The responder kernel's stages over a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResponderKernel {
    /// How they were measured.
    pub source: String,
    /// The responder's interface.
    pub device: String,
    /// Requests whose reply was found.
    pub requests: u64,
    /// netif_rx → netif_receive_skb of the request (backlog, NET_RX softirq).
    pub rx: Option<Summary>,
    /// netif_receive_skb of the request → net_dev_queue of the reply.
    pub processing: Option<Summary>,
    /// net_dev_queue → net_dev_xmit of the reply.
    pub tx: Option<Summary>,
}

/// Where the responder is: its interface and, where the records carry it,
/// the inode of its network namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponderAt<'a> {
    /// The responder's interface.
    pub device: &'a str,
    /// Its namespace's inode (None: not known).
    pub netns: Option<u32>,
    /// What recorded the events (`tp_btf programs`, `perf raw samples`).
    pub recorded_by: &'a str,
}

/// The stages from `events` (sorted by time): requests of IP length
/// `ip_len` received on the responder's device, and their replies (same
/// length, with the Ethernet header on transmit) queued on it. Other beds
/// name their interfaces alike: an event whose record carries another
/// namespace than the responder's is another host's.
pub fn responder_stages(events: &[Event], at: ResponderAt<'_>, ip_len: u32) -> ResponderKernel {
    let device = at.device;
    let on = |e: &Event, p: Point, len: u32| {
        e.point == p
            && e.len == Some(len)
            && e.dev.as_deref() == Some(device)
            && match (at.netns, e.netns) {
                (Some(want), Some(got)) => want == got,
                _ => true,
            }
    };
    let frame_len = ip_len + super::L2_OVERHEAD - super::L3_OVERHEAD;
    let (mut rx, mut processing, mut tx) = (Histogram::new(), Histogram::new(), Histogram::new());
    let mut requests = 0;
    for (i, e) in events.iter().enumerate() {
        if !on(e, Point::NetifReceiveSkb, ip_len) {
            continue;
        }
        let later = &events[i + 1..];
        let Some(reply) = later
            .iter()
            .take_while(|r| r.time_ns <= e.time_ns + REPLY_WITHIN_NS)
            .find(|r| on(r, Point::NetDevQueue, frame_len))
        else {
            continue;
        };
        requests += 1;
        processing.record(reply.time_ns - e.time_ns);
        if let Some(q) = events[..i]
            .iter()
            .rev()
            .find(|q| on(q, Point::NetifRx, ip_len) && q.skb == e.skb)
        {
            rx.record(e.time_ns - q.time_ns);
        }
        if let Some(x) = later.iter().find(|x| {
            x.point == Point::NetDevXmit && x.skb == reply.skb && x.time_ns >= reply.time_ns
        }) {
            tx.record(x.time_ns - reply.time_ns);
        }
    }
    ResponderKernel {
        source: format!(
            "tracepoints net:netif_rx, netif_receive_skb, net_dev_queue, net_dev_xmit on the \
             responder's interface ({}, CLOCK_MONOTONIC)",
            at.recorded_by
        ),
        device: device.to_string(),
        requests,
        rx: rx.summary(),
        processing: processing.summary(),
        tx: tx.summary(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(point: Point, t: u64, skb: u64, len: u32, dev: &str) -> Event {
        Event {
            point,
            time_ns: t,
            cpu: Some(0),
            skb: Some(skb),
            len: Some(len),
            dev: Some(dev.into()),
            ifindex: None,
            netns: None,
            sk: None,
            reason: None,
            location: None,
            seq: None,
            kept: None,
        }
    }

    #[test]
    fn request_and_reply_on_the_responders_interface_make_the_stages() {
        let mut v = Vec::new();
        for k in 0..3u64 {
            let t = k * 1_000_000;
            v.push(ev(Point::NetifRx, t, 1, 84, "lr-b"));
            v.push(ev(Point::NetifReceiveSkb, t + 1_000, 1, 84, "lr-b"));
            v.push(ev(Point::NetDevQueue, t + 6_000, 2, 98, "lr-b"));
            v.push(ev(Point::NetDevXmit, t + 8_000, 2, 84, "lr-b"));
            // The client's own receive of the reply is not the responder's.
            v.push(ev(Point::NetifReceiveSkb, t + 9_000, 2, 84, "lr-a"));
        }
        let at = |device, netns| ResponderAt {
            device,
            netns,
            recorded_by: "tp_btf programs",
        };
        // Another bed's lr-b (another namespace) answering its own echo.
        let mut other = ev(Point::NetifReceiveSkb, 2_500_000, 7, 84, "lr-b");
        other.netns = Some(99);
        let mut other_reply = ev(Point::NetDevQueue, 2_501_000, 8, 98, "lr-b");
        other_reply.netns = Some(99);
        v.extend([other, other_reply]);
        v.sort_by_key(|e| e.time_ns);
        for e in v.iter_mut().filter(|e| e.netns.is_none()) {
            e.netns = Some(5);
        }
        let r = responder_stages(&v, at("lr-b", Some(5)), 84);
        assert_eq!(r.requests, 3);
        assert!(r.source.contains("(tp_btf programs, CLOCK_MONOTONIC)"));
        // Without the namespace (perf samples), the other bed's echo counts.
        assert_eq!(responder_stages(&v, at("lr-b", None), 84).requests, 4);
        assert_eq!(r.rx.unwrap().count, 3);
        assert_eq!(r.processing.unwrap().min_ns, 5_000);
        assert_eq!(r.tx.unwrap().max_ns, 2_000);
        assert_eq!(responder_stages(&v, at("lr-x", Some(5)), 84).requests, 0);
    }
}
