//! Flags and hints of a journey result: pure rules over the result.

use super::{Hint, JourneyResult, Point, TracerInfo};
use crate::result::Flag;

/// Flag codes.
pub mod codes {
    /// No probe was followed end to end.
    pub const INCOMPLETE: &str = "incomplete";
    /// Some probes were lost from view.
    pub const LOST_FROM_VIEW: &str = "probes_lost_from_view";
    /// The kernel could not write every sample (a ring was full).
    pub const RING_OVERFLOW: &str = "ring_overflow";
    /// Probes were dropped by the kernel.
    pub const DROPS: &str = "drops";
    /// Tracing slowed the bed down by more than 10 %.
    pub const TRACER_COST: &str = "tracer_cost";
    /// No function-level events (no kprobes, no fentry).
    pub const NO_FUNCTION_LEVEL: &str = "no_function_level";
    /// Optional tracepoints were missing.
    pub const TRACEPOINTS_MISSING: &str = "tracepoints_missing";
    /// The kernel skipped runs of a `tp_btf` program already running on
    /// that CPU (its recursion misses): their events are missing.
    pub const RECURSION_MISSES: &str = "tracer_recursion_misses";
    /// The kernel skipped runs of the journey's own `tp_btf` programs
    /// (see `TracerInfo::recursion_misses`): their events are missing.
    pub const EVENTS_SKIPPED: &str = "tracer_events_skipped";
}

/// The warning for the runs of a journey's own programs the kernel skipped
/// (`TracerInfo::recursion_misses`), None when it skipped none; shared by
/// the probe journey and `--iface`.
pub(super) fn skipped_runs(tracer: &TracerInfo) -> Option<Flag> {
    let total: u64 = tracer.recursion_misses.values().sum();
    (total > 0).then(|| {
        let which: Vec<String> = tracer
            .recursion_misses
            .iter()
            .map(|(tp, n)| format!("{tp} {n}"))
            .collect();
        Flag::warning(
            codes::EVENTS_SKIPPED,
            format!(
                "the kernel skipped {total} runs of this journey's tp_btf programs because the \
                 program was already running on that CPU ({}): those events are missing from \
                 the table",
                which.join(", ")
            ),
        )
        .with("recursion_misses", total)
    })
}

/// The tracer-cost threshold, percent.
const COST_LIMIT_PCT: f64 = 10.0;

/// The flags a result earns.
pub fn assess(r: &JourneyResult) -> Vec<Flag> {
    let mut flags = Vec::new();
    let p = &r.probes;
    if p.followed_end_to_end == 0 && p.dropped == 0 {
        flags.push(
            Flag::invalid(
                codes::INCOMPLETE,
                "no probe was followed from host a to host b: no table to show",
            )
            .with("sent", p.sent),
        );
    }
    if p.lost_from_view > 0 {
        flags.push(
            Flag::warning(
                codes::LOST_FROM_VIEW,
                format!(
                    "{} of {} probes were neither followed end to end nor seen dropped",
                    p.lost_from_view, p.sent
                ),
            )
            .with("lost_from_view", p.lost_from_view)
            .with("sent", p.sent),
        );
    }
    if p.ring_lost_samples > 0 {
        flags.push(
            Flag::warning(
                codes::RING_OVERFLOW,
                "the kernel dropped trace samples because a ring buffer was full (busy host?)",
            )
            .with("lost_samples", p.ring_lost_samples),
        );
    }
    if p.dropped > 0 {
        let reasons: Vec<String> = r.drops.iter().map(|d| d.reason.clone()).collect();
        flags.push(
            Flag::info(
                codes::DROPS,
                format!(
                    "{} probes dropped by the kernel ({})",
                    p.dropped,
                    reasons.join(", ")
                ),
            )
            .with("dropped", p.dropped),
        );
    }
    if let Some(c) = r.cost.as_ref().filter(|c| c.slower_pct > COST_LIMIT_PCT) {
        flags.push(
            Flag::warning(
                codes::TRACER_COST,
                format!(
                    "tracing made UDP throughput {:.1} % slower (limit {COST_LIMIT_PCT} %): the times carry the tracer's cost",
                    c.slower_pct
                ),
            )
            .with("slower_pct", c.slower_pct),
        );
    }
    if let Some(p) = r.cost.as_ref().and_then(|c| c.programs.as_ref()) {
        let missed: Vec<String> = p
            .programs
            .iter()
            .filter(|c| c.recursion_misses > 0)
            .map(|c| format!("{} {}", c.tracepoint, c.recursion_misses))
            .collect();
        if !missed.is_empty() {
            let total: u64 = p.programs.iter().map(|c| c.recursion_misses).sum();
            flags.push(
                Flag::warning(
                    codes::RECURSION_MISSES,
                    format!(
                        "during the cost measurement the kernel skipped {total} runs of tp_btf \
                         programs because the program was already running on that CPU ({}): \
                         the events of those runs are missing, so under such load the journey \
                         may have lost events too",
                        missed.join(", ")
                    ),
                )
                .with("recursion_misses", total),
            );
        }
    }
    flags.extend(skipped_runs(&r.tracer));
    if !r.tracer.missing.is_empty() {
        flags.push(
            Flag::info(
                codes::TRACEPOINTS_MISSING,
                format!(
                    "this kernel lacks tracepoints {}: their steps are not shown",
                    r.tracer.missing.join(", ")
                ),
            )
            .with("missing", r.tracer.missing.clone()),
        );
    }
    flags.push(Flag::info(
        codes::NO_FUNCTION_LEVEL,
        r.tracer.function_level.clone(),
    ));
    flags
}

/// Rule-based tuning hints from a result.
pub fn hints(r: &JourneyResult) -> Vec<Hint> {
    let mut out = Vec::new();
    let hint = |code: &str, message: String| Hint {
        code: code.to_string(),
        message,
    };
    let has = |p: Point| r.steps.iter().any(|s| s.point == p);
    if has(Point::SockRcvqueueFull) || r.drops.iter().any(|d| d.reason == "SOCKET_RCVBUFF") {
        out.push(hint(
            "sock_rcvqueue_full",
            "the receiving socket's queue filled (SOCKET_RCVBUFF / sock_rcvqueue_full): raise \
             SO_RCVBUF (net.core.rmem_max, rmem_default) or read faster (recvmmsg, a busier \
             receiver thread)"
                .into(),
        ));
    }
    match r.steps.iter().find(|s| s.point == Point::NapiGroReceive) {
        Some(s) => out.push(hint(
            "gro",
            format!(
                "GRO is on at {}: packets pass napi_gro_receive, which may merge a flow's \
                 packets before the stack sees them (fewer, larger steps per packet)",
                s.dev.as_deref().unwrap_or("?")
            ),
        )),
        None => out.push(hint(
            "gro",
            "no NAPI/GRO step: veth hands packets to the per-CPU backlog (netif_rx) unless GRO \
             is on at the receiving end or an XDP program is attached there; a NIC driver \
             shows napi_gro_receive_entry here"
                .into(),
        )),
    }
    let cpus: std::collections::BTreeSet<u32> = r
        .steps
        .iter()
        .filter(|s| {
            !matches!(
                s.point,
                Point::UserSend | Point::UserRecv | Point::SockRecvLength
            )
        })
        .flat_map(|s| s.cpus.iter().copied())
        .collect();
    // The receiver's own recvmsg runs on its CPU; the path up to the socket
    // is what RPS can move.
    if cpus.len() == 1 {
        out.push(hint(
            "rps",
            format!(
                "every kernel step ran on CPU {} (on veth the whole path runs inside the \
                 sender's sendto()); RPS on the DUT's ingress port (rps_cpus, `testbed up \
                 --rps`) moves forwarding to another CPU",
                cpus.iter().next().copied().unwrap_or_default()
            ),
        ));
    }
    for g in &r.gaps {
        let (a, b) = (&r.steps[g.from], &r.steps[g.to]);
        if matches!(a.point, Point::NetifRx | Point::NetDevXmit)
            && matches!(b.point, Point::NetifReceiveSkb | Point::SoftirqNetRx)
            && g.duration.p90_ns > 50_000
        {
            out.push(hint(
                "softirq_deferral",
                format!(
                    "the NET_RX softirq ran late at {} (p90 {} µs from {}): work deferred \
                     to ksoftirqd or behind other softirqs; with a NIC, interrupt coalescing \
                     (ethtool -C) adds to this gap",
                    b.dev.as_deref().unwrap_or("?"),
                    g.duration.p90_ns / 1000,
                    a.tracepoint
                ),
            ));
        }
        if a.point == Point::QdiscEnqueue
            && b.point == Point::QdiscDequeue
            && g.duration.median_ns > 10_000
        {
            out.push(hint(
                "qdisc_wait",
                format!(
                    "probes wait {} µs (median) in the qdisc of {}: a shaped link (tbf) or a \
                     busy queue",
                    g.duration.median_ns / 1000,
                    a.dev.as_deref().unwrap_or("?")
                ),
            ));
        }
    }
    if let Some(g) = r.gaps.first() {
        if r.steps[g.from].point == Point::SkDataReady {
            out.push(hint(
                "wakeup",
                "the largest gap is the receiver's wake-up: a busy-polling receiver or one on \
                 the CPU that runs the receive softirq avoids the cross-CPU wake-up"
                    .into(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::path::tests::{bridge_events, devices};
    use super::super::tests::config;
    use super::super::{
        follow, summarise, Attribution, Backend, Cost, JourneyResult, ProbeSent, ProgramCosts,
        Rates, TracerInfo, XdpReport,
    };
    use super::*;
    use std::collections::BTreeMap;

    fn result(drop: Option<&str>) -> JourneyResult {
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
            events.extend(bridge_events(
                p.send_ns,
                p.payload,
                0x1000 * (p.seq + 1),
                drop,
            ));
        }
        events.sort_by_key(|e| e.time_ns);
        let s = summarise(
            &follow(&cfg, &devices(), &probes, &events, &[]),
            &devices(),
            "bridge",
        );
        let mut r = JourneyResult {
            bed: "t".into(),
            topology: "bridge".into(),
            proto: "udp".into(),
            ipv6: false,
            payload_bytes: (100, 175),
            rate_pps: 100.0,
            tracer: TracerInfo {
                method: String::new(),
                backend: Backend::TpBtf,
                tp_btf_programs: vec![],
                fallback: None,
                clock: String::new(),
                opened: vec![],
                missing: vec![],
                left_out: vec![],
                filters: vec![],
                kprobes: false,
                function_level: "no kprobes".into(),
                mounted_tracefs: false,
                ring_bytes_per_cpu: 0,
                cpus: 2,
                recursion_misses: BTreeMap::new(),
            },
            probes: s.counts,
            attribution: Attribution::default(),
            steps: s.steps,
            gaps: s.gaps,
            drops: s.drops,
            hints: vec![],
            cost: None,
            example: s.example,
            xdp: XdpReport::default(),
        };
        r.hints = hints(&r);
        r
    }

    fn codes_of(flags: &[Flag]) -> Vec<&str> {
        flags.iter().map(|f| f.code.as_str()).collect()
    }

    #[test]
    fn a_clean_journey_earns_only_the_function_level_note() {
        let r = result(None);
        assert_eq!(codes_of(&assess(&r)), [codes::NO_FUNCTION_LEVEL]);
        let h: Vec<&str> = r.hints.iter().map(|h| h.code.as_str()).collect();
        // One CPU for every step, no GRO on veth, the receiver's wake-up the
        // largest gap (sk_data_ready → recvmsg, 40 µs).
        assert_eq!(h, ["gro", "rps", "wakeup"]);
    }

    #[test]
    fn drops_costs_and_lost_probes_are_flagged() {
        let mut r = result(Some("SOCKET_RCVBUFF"));
        r.probes.lost_from_view = 1;
        r.probes.ring_lost_samples = 3;
        let slow = Rates {
            sent_pps: 1.0,
            received_pps: 1.0,
            cpu_ns_per_datagram: 1300.0,
        };
        let fast = Rates {
            cpu_ns_per_datagram: 1000.0,
            ..slow
        };
        r.cost = Some(Cost::new(1472, 100, 1, fast, slow));
        let flags = assess(&r);
        let c = codes_of(&flags);
        for code in [
            codes::LOST_FROM_VIEW,
            codes::RING_OVERFLOW,
            codes::DROPS,
            codes::TRACER_COST,
        ] {
            assert!(c.contains(&code), "{c:?}");
        }
        assert!(!c.contains(&codes::INCOMPLETE));
        assert!(r.hints.iter().any(|h| h.code == "sock_rcvqueue_full"));
    }

    #[test]
    fn a_late_softirq_is_timed_from_the_step_it_follows() {
        // Without --all-events there is no netif_rx: the gap then starts at
        // the driver's return, and the hint names that step.
        let mut r = result(None);
        let g = r.gaps[0].clone();
        r.steps[g.from].point = Point::NetDevXmit;
        r.steps[g.from].tracepoint = "net:net_dev_xmit".into();
        r.steps[g.to].point = Point::NetifReceiveSkb;
        r.gaps[0].duration.p90_ns = 60_000;
        let h = hints(&r);
        let late = h
            .iter()
            .find(|h| h.code == "softirq_deferral")
            .expect("hinted");
        assert!(
            late.message.contains("p90 60 µs from net:net_dev_xmit"),
            "{}",
            late.message
        );
        r.gaps[0].duration.p90_ns = 50_000;
        assert!(!hints(&r).iter().any(|h| h.code == "softirq_deferral"));
    }

    #[test]
    fn runs_the_kernel_skipped_are_flagged() {
        let mut r = result(None);
        let rates = Rates {
            sent_pps: 1.0,
            received_pps: 1.0,
            cpu_ns_per_datagram: 1000.0,
        };
        let cost = |misses: [u64; 2]| {
            let mut c = Cost::new(1472, 100, 1, rates, rates);
            let runs = [
                ("net/net_dev_queue".to_string(), 100, 2000, misses[0]),
                ("irq/softirq_entry".to_string(), 300, 3000, misses[1]),
            ];
            c.programs = Some(ProgramCosts::new("stats".into(), 100, &runs, None, 1000.0));
            c
        };
        r.cost = Some(cost([0, 0]));
        assert!(!codes_of(&assess(&r)).contains(&codes::RECURSION_MISSES));
        r.cost = Some(cost([2, 5]));
        let flags = assess(&r);
        let f = flags
            .iter()
            .find(|f| f.code == codes::RECURSION_MISSES)
            .expect("flagged");
        assert_eq!(f.severity, crate::result::Severity::Warning);
        assert_eq!(f.evidence["recursion_misses"], 7);
        assert!(
            f.message.contains("skipped 7 runs")
                && f.message.contains("net/net_dev_queue 2")
                && f.message.contains("irq/softirq_entry 5"),
            "{}",
            f.message
        );
    }

    #[test]
    fn nothing_followed_is_invalid() {
        let mut r = result(None);
        r.probes.followed_end_to_end = 0;
        r.probes.dropped = 0;
        let flags = assess(&r);
        assert!(
            flags
                .iter()
                .any(|f| f.code == codes::INCOMPLETE
                    && f.severity == crate::result::Severity::Invalid)
        );
    }

    #[test]
    fn skipped_runs_of_the_journeys_own_programs_are_flagged() {
        let mut t: TracerInfo = serde_json::from_value(serde_json::json!({
            "method": "", "backend": "tp_btf", "tp_btf_programs": [], "fallback": null,
            "clock": "", "opened": [], "missing": [], "left_out": [], "filters": [],
            "kprobes": false, "function_level": "", "mounted_tracefs": false,
            "ring_bytes_per_cpu": 0, "cpus": 2
        }))
        .expect("a result without the field still reads");
        assert!(t.recursion_misses.is_empty());
        assert!(skipped_runs(&t).is_none());
        t.recursion_misses.insert("net/netif_receive_skb".into(), 3);
        t.recursion_misses.insert("net/net_dev_queue".into(), 4);
        let f = skipped_runs(&t).expect("flagged");
        assert_eq!(f.code, codes::EVENTS_SKIPPED);
        assert_eq!(f.severity, crate::result::Severity::Warning);
        assert_eq!(f.evidence["recursion_misses"], 7);
        assert!(
            f.message.contains("net/netif_receive_skb 3"),
            "{}",
            f.message
        );
    }
}
