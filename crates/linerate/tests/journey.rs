//! `linerate journey`: the published schema, usage errors, and on beds the
//! tests create and always remove (privileged; skips loudly without root,
//! fails under LINERATE_REQUIRE_PRIV=1): the path in order and in the right
//! namespaces on bridge and router beds, the forwarding steps named, drops
//! with their kernel reasons (nft rule, small receive buffer), clear errors
//! for a missing tracepoint and for missing permission, and the tracer
//! detached on drop, on panic and on SIGINT.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use linerate_bed::{Bed, BedSpec, Topology};
use linerate_core::journey::iface::{self, IfaceJson, IfaceResult};
use linerate_core::journey::{Backend, JourneyJson, JourneyResult, Point, SCHEMA, TRACEPOINTS};
use linerate_core::journey::{FilterKind, Tracepoint};
use linerate_io::journey::btf::{runs_as_program, runs_for_iface, BtfPrograms};
use linerate_io::journey::xdp::{Verdict, XdpVerdict};
use linerate_io::journey::{Filters, Tracefs, Tracer};

/// Tracing sees every namespace's packets: the tests that trace run one at
/// a time, so no test's probes land in another's journey.
fn one_tracer() -> std::sync::MutexGuard<'static, ()> {
    static TRACING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TRACING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A privileged test's bed, with the tracer lock held: removed, then the
/// lock released, when dropped.
struct TracedBed {
    /// The bed's name (`<prefix><pid>`).
    name: String,
    _bed: Bed,
    _one_tracer: std::sync::MutexGuard<'static, ()>,
}

/// Takes the tracer lock and brings up a `topology` bed named
/// `<prefix><pid>` for `test`; None (the test skips, saying so) without the
/// privileges.
fn traced_bed(test: &str, prefix: &str, topology: Topology) -> Option<TracedBed> {
    let one_tracer = one_tracer();
    if !linerate_bed::privileges::require(test) {
        return None;
    }
    let name = format!("{prefix}{}", std::process::id());
    let bed = Bed::up(&BedSpec::new(name.clone(), topology)).expect("bed up");
    Some(TracedBed {
        name,
        _bed: bed,
        _one_tracer: one_tracer,
    })
}

fn linerate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("the linerate binary runs")
}

fn journey(bed: &str, extra: &[&str]) -> JourneyJson {
    let mut args = vec!["journey", "--bed", bed, "--json", "--cost-time", "0"];
    args.extend(extra);
    let doc = common::json_of(&args);
    common::round_trip::<JourneyResult>(SCHEMA, &doc)
}

/// Waits until the bridge's ports forward (they pass through learning
/// after the bed comes up; probes sent before are dropped, reason
/// BRIDGE_INGRESS_STP_STATE).
fn wait_forwarding(bed: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let ns = format!("lr-{bed}-dut");
    while Instant::now() < deadline {
        let o = Command::new("ip")
            .args(["netns", "exec", &ns, "bridge", "link"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        if text.lines().count() >= 2 && text.lines().all(|l| l.contains("state forwarding")) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the bridge ports of {bed} never reached forwarding");
}

/// Index of the first step at `point` on `dev` (and in `netns`).
fn step(r: &JourneyResult, point: Point, dev: Option<&str>, netns: &str) -> usize {
    let i = r
        .steps
        .iter()
        .position(|s| s.point == point && s.dev.as_deref() == dev)
        .unwrap_or_else(|| panic!("no step {point:?} on {dev:?}: {:#?}", r.steps));
    assert_eq!(
        r.steps[i].netns.as_deref(),
        Some(netns),
        "{point:?} {dev:?}"
    );
    i
}

/// The example probe's events are in time order and the path's events come
/// in causal order: time never goes backwards within the packet.
fn assert_causal(r: &JourneyResult, order: &[(&str, Option<&str>)]) {
    let ex = &r.example;
    assert!(!ex.is_empty(), "no probe followed end to end");
    assert!(ex.windows(2).all(|w| w[0].t_ns <= w[1].t_ns), "{ex:#?}");
    let mut at = 0;
    for (tp, dev) in order {
        let i = ex[at..]
            .iter()
            .position(|e| e.tracepoint == *tp && e.dev.as_deref() == *dev)
            .unwrap_or_else(|| panic!("{tp} on {dev:?} missing or out of order: {ex:#?}"));
        at += i + 1;
    }
}

/// Sends SIGINT to `child` and waits for its output.
fn interrupt(child: std::process::Child) -> Output {
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    child.wait_with_output().unwrap()
}

/// `linerate journey --json <args>` once its programs are attached (its
/// progress line says so); later stderr is read and dropped.
fn attached_journey(args: &[&str]) -> std::process::Child {
    journey_once(args, "attached")
}

/// `linerate journey --json <args>` once a progress line holding `marker`
/// was printed (the setup before it, BTF and the programs, can take
/// seconds on a loaded host); later stderr is read and dropped.
fn journey_once(args: &[&str], marker: &str) -> std::process::Child {
    use std::io::BufRead as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["journey", "--json"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let attached = err
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains(marker));
    assert!(attached, "{args:?}: the journey never printed {marker:?}");
    std::thread::spawn(move || err.for_each(drop));
    child
}

#[test]
fn schema_is_published() {
    common::published::<JourneyJson>(SCHEMA);
    common::published::<IfaceJson>(iface::SCHEMA);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, needle) in [
        (&["journey", "--bed", "x", "--size", "5"][..], "--size"),
        (&["journey", "--bed", "x", "--proto", "sctp"][..], "--proto"),
        (
            &["journey", "--bed", "x", "--proto", "tcp", "--rcvbuf", "1"][..],
            "--rcvbuf",
        ),
        (
            &["journey", "--bed", "x", "--tracer", "ebpf"][..],
            "--tracer",
        ),
        (&["journey", "--bed", "x", "--rate", "0"][..], "--rate"),
        (
            &["journey", "--bed", "x", "-6", "--size", "1397"][..],
            "with -6",
        ),
        (&["journey", "-6"][..], "--bed"),
        (
            &["journey", "-6", "--iface", "lo", "--filter", "udp"][..],
            "-6 applies to --bed",
        ),
        (&["journey"][..], "--bed"),
        (&["journey", "--iface", "lo"][..], "--filter"),
        (
            &["journey", "--iface", "lo", "--filter", "udp port 0"][..],
            "`port 0`",
        ),
        (
            &["journey", "--iface", "lo", "--filter", "udp sctp"][..],
            "\"sctp\"",
        ),
        (
            &["journey", "--iface", "lr-no-such-if", "--filter", "udp"][..],
            "no such interface",
        ),
        (
            &[
                "journey", "--iface", "lo", "--filter", "udp", "--tracer", "perf",
            ][..],
            "no packet headers",
        ),
        (
            &[
                "journey", "--iface", "lo", "--filter", "udp", "--time", "0s",
            ][..],
            "--time",
        ),
        (
            &["journey", "--bed", "lr-no-such-bed-here"][..],
            "no-such-bed",
        ),
    ] {
        let o = linerate(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn a_missing_tracepoint_is_an_error_naming_it() {
    let dir = std::env::temp_dir().join(format!("lr-journey-tracefs-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("events")).unwrap();
    let fs = Tracefs {
        root: dir.clone(),
        mounted_by_us: false,
    };
    let err = Tracer::open_with(
        &fs,
        &TRACEPOINTS,
        Filters {
            len: (100, 217),
            dport: 9,
            all_events: true,
        },
        Backend::Perf,
    )
    .unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    let text = err.to_string();
    assert!(
        text.starts_with("tracepoint net/net_dev_queue is not available"),
        "{text}"
    );
    assert!(text.contains("events/net/net_dev_queue/format"), "{text}");
}

#[test]
fn tp_btf_programs_pass_the_verifier_and_a_missing_one_is_named() {
    let _one_tracer = one_tracer();
    if !linerate_bed::privileges::require(
        "tp_btf_programs_pass_the_verifier_and_a_missing_one_is_named",
    ) {
        return;
    }
    let filters = Filters {
        len: (100, 217),
        dport: 9,
        all_events: true,
    };
    // The kernel's verifier checks every program here (loaded, not attached).
    let p = BtfPrograms::load(&TRACEPOINTS, filters).unwrap();
    let want: Vec<&str> = TRACEPOINTS
        .iter()
        .filter(|t| runs_as_program(t.point))
        .map(|t| t.path)
        .collect();
    assert_eq!(p.opened, want);
    assert!(want.contains(&"net/netif_receive_skb"), "{want:?}");
    assert_eq!(p.attached(), 0);
    let missing = [Tracepoint {
        point: Point::NetDevQueue,
        path: "net/lr_no_such_tracepoint",
        required: true,
        filter: FilterKind::Len,
    }];
    let err = BtfPrograms::load(&missing, filters)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "the kernel's BTF has no btf_trace_lr_no_such_tracepoint"
    );
    // An optional one (a FIB lookup on a kernel without it) is named in
    // `missing`; the others still load.
    let mut some = vec![Tracepoint {
        point: Point::FibTableLookup,
        path: "fib/lr_no_such_lookup",
        required: false,
        filter: FilterKind::None,
    }];
    some.extend(
        TRACEPOINTS
            .iter()
            .filter(|t| t.point == Point::NetifReceiveSkb),
    );
    let p = BtfPrograms::load(&some, filters).unwrap();
    assert_eq!(p.missing, ["fib/lr_no_such_lookup"]);
    assert_eq!(p.opened, ["net/netif_receive_skb"]);
}

/// Open perf event descriptors of this process.
fn perf_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| {
            let l = l.to_string_lossy();
            l.contains("perf_event") || l.contains("bpf_link")
        })
        .count()
}

#[test]
fn the_tracer_detaches_on_drop_and_on_panic() {
    let _one_tracer = one_tracer();
    if !linerate_bed::privileges::require("the_tracer_detaches_on_drop_and_on_panic") {
        return;
    }
    let fs = Tracefs::find_or_mount().unwrap();
    let filters = Filters {
        len: (100, 217),
        dport: 9,
        all_events: true,
    };
    for backend in [Backend::Perf, Backend::TpBtf] {
        let before = perf_fds();
        let mut t = Tracer::open_with(&fs, &TRACEPOINTS, filters, backend).unwrap();
        t.enable().unwrap();
        assert_eq!(perf_fds(), before + t.descriptors(), "{backend:?}");
        assert!(t.descriptors() >= TRACEPOINTS.len(), "{backend:?}");
        assert_eq!(t.programs_opened.is_empty(), backend == Backend::Perf);
        t.disable().unwrap();
        drop(t);
        assert_eq!(perf_fds(), before, "{backend:?}");
        let fs2 = fs.clone();
        let r = std::panic::catch_unwind(move || {
            let mut t = Tracer::open_with(&fs2, &TRACEPOINTS, filters, backend).unwrap();
            t.enable().unwrap();
            panic!("a panic while tracing");
        });
        assert!(r.is_err());
        assert_eq!(
            perf_fds(),
            before,
            "the panic left events open ({backend:?})"
        );
    }
    // Without --all-events, perf (asked for, or tp_btf's fallback) leaves
    // out the events without an skb: no program gates them there.
    let few = Filters {
        all_events: false,
        ..filters
    };
    for backend in [Backend::Perf, Backend::TpBtf] {
        let t = Tracer::open_with(&fs, &TRACEPOINTS, few, backend).unwrap();
        let gated: Vec<&str> = TRACEPOINTS
            .iter()
            .filter(|tp| tp.point.attributed())
            .map(|tp| tp.path)
            .filter(|p| t.opened.iter().any(|o| o == p))
            .collect();
        if backend == Backend::Perf {
            assert_eq!(gated, Vec::<&str>::new());
        } else {
            assert!(gated.contains(&"fib/fib_table_lookup"), "{gated:?}");
        }
    }
}

#[test]
fn a_bridge_journey_finds_the_path_and_the_bridge() {
    let Some(traced) = traced_bed(
        "a_bridge_journey_finds_the_path_and_the_bridge",
        "jb",
        Topology::Bridge,
    ) else {
        return;
    };
    let name = traced.name.clone();
    wait_forwarding(&name);
    let plots = std::env::temp_dir().join(format!("lr-journey-plot-{}", std::process::id()));
    let plot_dir = plots.to_str().unwrap();
    let doc = journey(
        &name,
        &["--count", "40", "--rate", "200", "--plot", plot_dir],
    );
    let r = &doc.result;
    // As root on a kernel with BTF, the length-filtered tracepoints run as
    // tp_btf programs (the router test runs the perf tracer).
    assert_eq!(r.tracer.backend, Backend::TpBtf, "{}", r.tracer.method);
    assert_eq!(r.tracer.fallback, None);
    // The waterfall: a row per step, each starting where its median puts it.
    let w = linerate_core::plot::journey_waterfall(r).expect("a waterfall");
    assert_eq!(w.rows.len(), r.steps.len());
    assert!(w.rows.windows(2).all(|p| p[0].start <= p[1].start), "{w:?}");
    let svg = std::fs::read_to_string(plots.join("journey-waterfall.svg")).unwrap();
    assert!(svg.contains("<svg"), "the waterfall is drawn");
    let _ = std::fs::remove_dir_all(&plots);
    let (a, dut, b) = (
        format!("lr-{name}-a"),
        format!("lr-{name}-dut"),
        format!("lr-{name}-b"),
    );
    assert!(r.probes.followed_end_to_end > 0, "{:#?}", r.probes);
    assert_eq!(r.probes.sent, 40);
    assert_eq!(r.steps[0].point, Point::UserSend);
    let order = [
        step(r, Point::UserSend, None, &a),
        step(r, Point::NetDevQueue, Some("lr-a"), &a),
        step(r, Point::NetifReceiveSkb, Some("lr-dut-a"), &dut),
        step(r, Point::NetDevQueue, Some("lr-dut-b"), &dut),
        step(r, Point::NetifReceiveSkb, Some("lr-b"), &b),
        step(r, Point::UserRecv, None, &b),
    ];
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    assert!(
        r.gaps
            .iter()
            .any(|g| g.what.starts_with("bridge forwarding")
                && g.what.contains("lr-dut-a")
                && g.what.contains("lr-dut-b")),
        "{:#?}",
        r.gaps
    );
    assert_causal(
        r,
        &[
            ("user:sendto", None),
            ("net:net_dev_queue", Some("lr-a")),
            ("net:netif_receive_skb", Some("lr-dut-a")),
            ("net:net_dev_queue", Some("lr-dut-b")),
            ("net:netif_receive_skb", Some("lr-b")),
            ("user:recvfrom", None),
        ],
    );
    assert!(!r.tracer.kprobes || r.tracer.function_level.contains("not used"));
    assert!(doc.flags.iter().any(|f| f.code == "no_function_level"));
}

#[test]
fn a_router_journey_finds_the_forwarding_step() {
    let Some(traced) = traced_bed(
        "a_router_journey_finds_the_forwarding_step",
        "jr",
        Topology::Router,
    ) else {
        return;
    };
    let name = traced.name.clone();
    // Neighbour resolution on the first probes is part of the path; warm up.
    let _ = journey(&name, &["--count", "3"]);
    // The perf tracer here (the bridge test runs tp_btf programs).
    let doc = journey(
        &name,
        &["--count", "40", "--rate", "200", "--tracer", "perf"],
    );
    let r = &doc.result;
    assert_eq!(r.tracer.backend, Backend::Perf);
    assert!(r.tracer.tp_btf_programs.is_empty());
    let dut = format!("lr-{name}-dut");
    assert!(r.probes.followed_end_to_end > 0, "{:#?}", r.probes);
    let rx = step(r, Point::NetifReceiveSkb, Some("lr-dut-a"), &dut);
    let tx = step(r, Point::NetDevQueue, Some("lr-dut-b"), &dut);
    assert!(rx < tx);
    assert!(
        r.gaps.iter().any(|g| g.what.starts_with("IP forwarding")),
        "{:#?}",
        r.gaps
    );
    assert_causal(
        r,
        &[
            ("net:net_dev_queue", Some("lr-a")),
            ("net:netif_receive_skb", Some("lr-dut-a")),
            ("net:net_dev_queue", Some("lr-dut-b")),
            ("net:netif_receive_skb", Some("lr-b")),
        ],
    );
}

/// `-6` on a router bed: IPv6 probes (UDP, TCP, ICMPv6) reach host b, and
/// the router's IPv6 FIB lookup appears between its receive and its queue
/// (the IPv4 lookups are left out, saying why).
#[test]
fn an_ipv6_router_journey_finds_the_ipv6_fib_lookup() {
    let Some(traced) = traced_bed(
        "an_ipv6_router_journey_finds_the_ipv6_fib_lookup",
        "j6",
        Topology::Router,
    ) else {
        return;
    };
    let name = traced.name.clone();
    let dut = format!("lr-{name}-dut");
    // A new bed answers IPv6 neighbour solicitations only once its
    // link-local addresses passed DAD (about a second): warm up until a
    // probe gets through, at most 10 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    let received = || {
        let o = linerate(&[
            "journey",
            "--bed",
            &name,
            "-6",
            "--count",
            "3",
            "--cost-time",
            "0",
            "--json",
        ]);
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)));
        doc["probes"]["received"].as_u64().unwrap()
    };
    while received() == 0 {
        assert!(Instant::now() < deadline, "no IPv6 probe got through");
        std::thread::sleep(Duration::from_millis(300));
    }
    let doc = journey(&name, &["-6", "--count", "30", "--rate", "200"]);
    let r = &doc.result;
    assert!(r.ipv6);
    assert!(r.probes.followed_end_to_end > 0, "{:#?}", r.probes);
    assert!(r
        .tracer
        .opened
        .iter()
        .any(|t| t == "fib6/fib6_table_lookup"));
    assert!(!r.tracer.opened.iter().any(|t| t == "fib/fib_table_lookup"));
    assert!(
        r.tracer
            .left_out
            .iter()
            .any(|l| l.starts_with("fib/fib_table_lookup") && l.contains("IPv6")),
        "{:#?}",
        r.tracer.left_out
    );
    let rx = step(r, Point::NetifReceiveSkb, Some("lr-dut-a"), &dut);
    let fib = step(r, Point::Fib6TableLookup, Some("lr-dut-b"), &dut);
    let tx = step(r, Point::NetDevQueue, Some("lr-dut-b"), &dut);
    assert!(rx < fib && fib < tx, "{:#?}", r.steps);
    assert_causal(
        r,
        &[
            ("net:netif_receive_skb", Some("lr-dut-a")),
            ("fib6:fib6_table_lookup", Some("lr-dut-b")),
            ("net:net_dev_queue", Some("lr-dut-b")),
            ("net:netif_receive_skb", Some("lr-b")),
        ],
    );
    for proto in ["tcp", "icmp"] {
        let doc = journey(
            &name,
            &["-6", "--count", "20", "--rate", "200", "--proto", proto],
        );
        let r = &doc.result;
        assert!(r.probes.followed_end_to_end > 0, "{proto}: {:#?}", r.probes);
        step(r, Point::Fib6TableLookup, Some("lr-dut-b"), &dut);
    }
}

/// Without an XDP program the xdp tracepoints stay closed, saying why;
/// with one attached to host b's interface it is detected, the tracepoints
/// are opened, and an aborting program's `xdp_exception`s are counted there.
#[test]
fn an_xdp_program_on_a_bed_interface_is_detected_and_its_events_counted() {
    let Some(traced) = traced_bed(
        "an_xdp_program_on_a_bed_interface_is_detected_and_its_events_counted",
        "jx",
        Topology::Pair,
    ) else {
        return;
    };
    let name = traced.name.clone();
    let b = format!("lr-{name}-b");
    let _ = journey(&name, &["--count", "3"]);
    let doc = journey(&name, &["--count", "5"]);
    let r = &doc.result;
    assert!(r.xdp.attached.is_empty() && r.xdp.events.is_empty());
    assert!(!r.tracer.opened.iter().any(|t| t.starts_with("xdp/")));
    assert!(
        r.tracer
            .left_out
            .iter()
            .any(|l| l.starts_with("xdp/xdp_exception: no XDP program")),
        "{:#?}",
        r.tracer.left_out
    );
    {
        let _pass = XdpVerdict::attach(&b, "lr-b", Verdict::Pass).expect("attach");
        let doc = journey(&name, &["--count", "5"]);
        let r = &doc.result;
        assert_eq!(r.xdp.attached.len(), 1, "{:#?}", r.xdp);
        let x = &r.xdp.attached[0];
        assert_eq!((x.dev.as_str(), x.netns.as_str()), ("lr-b", b.as_str()));
        assert_eq!(x.prog_ids.len(), 1, "{x:#?}");
        assert!(r.tracer.opened.iter().any(|t| t == "xdp/xdp_exception"));
        assert!(r.probes.received > 0, "{:#?}", r.probes);
    }
    let _abort = XdpVerdict::attach(&b, "lr-b", Verdict::Aborted).expect("attach");
    // Every probe is dropped: the journey is not trustworthy (exit 1), its
    // JSON still printed.
    let o = linerate(&[
        "journey",
        "--bed",
        &name,
        "--json",
        "--cost-time",
        "0",
        "--count",
        "5",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)));
    let events = doc["xdp"]["events"].as_array().unwrap();
    let aborted = events
        .iter()
        .find(|e| e["tracepoint"] == "xdp:xdp_exception")
        .unwrap_or_else(|| panic!("{doc:#}"));
    assert_eq!(aborted["action"], "XDP_ABORTED", "{aborted}");
    assert_eq!(aborted["devs"][0], "lr-b", "{aborted}");
    assert!(aborted["count"].as_u64().unwrap() >= 5, "{aborted}");
}

#[test]
fn a_router_journey_attributes_the_fib_lookup_and_the_softirq() {
    let Some(traced) = traced_bed(
        "a_router_journey_attributes_the_fib_lookup_and_the_softirq",
        "jf",
        Topology::Router,
    ) else {
        return;
    };
    let name = traced.name.clone();
    let _ = journey(&name, &["--count", "3"]);
    // Without --all-events the context events are left out, saying so; the
    // FIB lookup and the softirq entry stay (gated).
    let plain = journey(
        &name,
        &["--count", "20", "--rate", "200", "--tracer", "tp_btf"],
    );
    for tp in ["net/netif_rx", "napi/napi_poll", "irq/softirq_exit"] {
        let p = &plain.result.tracer;
        assert!(!p.opened.iter().any(|o| o == tp), "{tp}: {p:#?}");
        assert!(
            p.left_out
                .iter()
                .any(|l| l.starts_with(tp) && l.contains("context event")),
            "{tp}: {p:#?}"
        );
    }
    let fib = step(
        &plain.result,
        Point::FibTableLookup,
        Some("lr-dut-b"),
        &format!("lr-{name}-dut"),
    );
    assert!(plain.result.steps[fib].by_cpu_and_time);
    let doc = journey(
        &name,
        &[
            "--count",
            "40",
            "--rate",
            "200",
            "--tracer",
            "tp_btf",
            "--all-events",
        ],
    );
    let r = &doc.result;
    assert_eq!(r.tracer.backend, Backend::TpBtf);
    for tp in [
        "net/netif_rx",
        "fib/fib_table_lookup",
        "napi/napi_poll",
        "irq/softirq_entry",
        "irq/softirq_exit",
    ] {
        assert!(
            r.tracer.opened.iter().any(|o| o == tp),
            "{tp}: {:#?}",
            r.tracer
        );
        assert!(!r.tracer.left_out.iter().any(|l| l.starts_with(tp)), "{tp}");
    }
    assert!(r
        .tracer
        .left_out
        .iter()
        .any(|l| l.starts_with("xdp/xdp_redirect: no XDP program")));
    let (dut, b) = (format!("lr-{name}-dut"), format!("lr-{name}-b"));
    assert!(r.probes.followed_end_to_end > 0, "{:#?}", r.probes);
    // The router's lookup between its receive and its transmit, in its
    // namespace, marked as attributed by CPU and time.
    let rx = step(r, Point::NetifReceiveSkb, Some("lr-dut-a"), &dut);
    let fib = step(r, Point::FibTableLookup, Some("lr-dut-b"), &dut);
    let tx = step(r, Point::NetDevQueue, Some("lr-dut-b"), &dut);
    assert!(rx < fib && fib < tx, "{:#?}", r.steps);
    assert!(r.steps[fib].by_cpu_and_time);
    assert!(!r.steps[rx].by_cpu_and_time);
    assert!(r.attribution.attributed > 0, "{:#?}", r.attribution);
    assert!(
        r.gaps.iter().any(|g| g
            .what
            .starts_with("IP routing in the router, up to the FIB lookup")),
        "{:#?}",
        r.gaps
    );
    // The receive processing starts with a NET_RX softirq in the router;
    // a NAPI poll and the softirq's end follow host b's receive.
    let soft = step(r, Point::SoftirqNetRx, Some("lr-dut-a"), &dut);
    assert!(soft < rx);
    let rx_b = step(r, Point::NetifReceiveSkb, Some("lr-b"), &b);
    for point in [Point::NapiPoll, Point::SoftirqExitNetRx] {
        let i = r
            .steps
            .iter()
            .position(|s| s.point == point)
            .unwrap_or_else(|| panic!("no {point:?}: {:#?}", r.steps));
        assert!(i > rx, "{point:?}");
        assert!(r.steps[i].by_cpu_and_time);
        assert!(
            [dut.as_str(), b.as_str()].contains(&r.steps[i].netns.as_deref().unwrap_or("")),
            "{:#?}",
            r.steps[i]
        );
    }
    assert!(rx_b > tx);
    assert_causal(
        r,
        &[
            ("net:net_dev_queue", Some("lr-a")),
            ("irq:softirq_entry NET_RX", Some("lr-dut-a")),
            ("net:netif_receive_skb", Some("lr-dut-a")),
            ("fib:fib_table_lookup", Some("lr-dut-b")),
            ("net:net_dev_queue", Some("lr-dut-b")),
            ("net:netif_receive_skb", Some("lr-b")),
            ("irq:softirq_exit NET_RX", None),
        ],
    );
    let text = String::from_utf8(
        linerate(&[
            "journey",
            "--bed",
            &name,
            "--count",
            "5",
            "--cost-time",
            "0",
        ])
        .stdout,
    )
    .unwrap();
    assert!(
        text.contains("fib:fib_table_lookup *") && text.contains("attributed by CPU and time"),
        "{text}"
    );
}

#[test]
fn tcp_and_icmp_probes_are_followed() {
    let Some(traced) = traced_bed("tcp_and_icmp_probes_are_followed", "jt", Topology::Pair) else {
        return;
    };
    let name = traced.name.clone();
    let (a, b) = (format!("lr-{name}-a"), format!("lr-{name}-b"));
    // Neighbour resolution on the first probes is part of the path; warm up.
    let _ = journey(&name, &["--count", "3", "--proto", "icmp"]);
    let doc = journey(&name, &["--count", "30", "--rate", "200", "--proto", "tcp"]);
    let r = &doc.result;
    assert_eq!(r.proto, "tcp");
    assert!(r.probes.followed_end_to_end > 0, "{:#?}", r.probes);
    let tx = step(r, Point::NetDevQueue, Some("lr-a"), &a);
    let rx = step(r, Point::NetifReceiveSkb, Some("lr-b"), &b);
    let tcp = step(r, Point::TcpProbe, None, &b);
    let read = step(r, Point::SockRecvLength, None, &b);
    assert!(tx < rx && rx < tcp && tcp < read, "{:#?}", r.steps);
    // Once per probe: the later segments that reuse its buffer are other
    // probes'.
    let rows = r
        .steps
        .iter()
        .filter(|s| s.point == Point::TcpProbe)
        .count();
    assert_eq!(rows, 1, "{:#?}", r.steps);
    assert!(r.tracer.opened.iter().any(|t| t == "tcp/tcp_probe"));
    // The perf tracer decodes it too (its length: the segment's payload).
    let doc = journey(
        &name,
        &[
            "--count", "20", "--rate", "200", "--proto", "tcp", "--tracer", "perf",
        ],
    );
    let r = &doc.result;
    let rx = step(r, Point::NetifReceiveSkb, Some("lr-b"), &b);
    let tcp = step(r, Point::TcpProbe, None, &b);
    assert!(rx < tcp, "{:#?}", r.steps);
    let doc = journey(
        &name,
        &["--count", "30", "--rate", "200", "--proto", "icmp"],
    );
    let r = &doc.result;
    assert_eq!(r.proto, "icmp");
    assert!(
        r.tracer
            .left_out
            .iter()
            .any(|l| l.starts_with("tcp/tcp_probe") && l.contains("not TCP")),
        "{:#?}",
        r.tracer.left_out
    );
    assert!(r.probes.followed_end_to_end > 0, "{:#?}", r.probes);
    // The request into b, the reply queued by b's kernel, back into a.
    let req = step(r, Point::NetifReceiveSkb, Some("lr-b"), &b);
    let reply = step(r, Point::NetDevQueue, Some("lr-b"), &b);
    let back = step(r, Point::NetifReceiveSkb, Some("lr-a"), &a);
    assert!(req < reply && reply < back, "{:#?}", r.steps);
    assert!(
        r.gaps
            .iter()
            .any(|g| g.what.starts_with("the echo answered")),
        "{:#?}",
        r.gaps
    );
    let recv = r.steps.iter().find(|s| s.point == Point::UserRecv).unwrap();
    assert_eq!(recv.netns.as_deref(), Some(a.as_str()));
}

#[test]
fn drops_appear_with_their_kernel_reasons() {
    let Some(traced) = traced_bed(
        "drops_appear_with_their_kernel_reasons",
        "jd",
        Topology::Pair,
    ) else {
        return;
    };
    let name = traced.name.clone();
    let b = format!("lr-{name}-b");
    // An nft rule in b drops every other probe to this port.
    let port = (40_000 + std::process::id() % 20_000).to_string();
    let rules = format!(
        "table inet lrj {{\n chain pre {{\n type filter hook prerouting priority -300;\n \
         udp dport {port} numgen inc mod 2 == 0 drop\n }}\n}}\n"
    );
    let o = Command::new("ip")
        .args(["netns", "exec", &b, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin.take().unwrap().write_all(rules.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(o.status.success());
    let doc = journey(&name, &["--count", "20", "--rate", "200", "--port", &port]);
    let r = &doc.result;
    let nft = r
        .drops
        .iter()
        .find(|d| d.reason == "NETFILTER_DROP")
        .unwrap_or_else(|| panic!("{:#?}", r.drops));
    assert_eq!(nft.count, 10);
    assert_eq!(nft.after, "net:netif_receive_skb on lr-b");
    assert_eq!(nft.netns.as_deref(), Some(b.as_str()));
    assert_eq!(r.probes.dropped, 10);
    assert!(doc.flags.iter().any(|f| f.code == "drops"));
    // A receive buffer far too small, read only after the last probe: the
    // socket's queue overflows.
    let doc = journey(
        &name,
        &[
            "--count", "30", "--rate", "1000", "--rcvbuf", "1", "--size", "1000",
        ],
    );
    let r = &doc.result;
    assert!(
        r.drops.iter().any(|d| d.reason == "SOCKET_RCVBUFF"),
        "{:#?}",
        r.drops
    );
    assert!(r.hints.iter().any(|h| h.code == "sock_rcvqueue_full"));
}

#[test]
fn without_permission_the_error_names_the_tracepoint() {
    if !linerate_bed::privileges::require("without_permission_the_error_names_the_tracepoint") {
        return;
    }
    let name = format!("jp{}", std::process::id());
    let _bed = Bed::up(&BedSpec::new(name.clone(), Topology::Pair)).expect("bed up");
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_linerate"))
        .args(["journey", "--bed", &name, "--cost-time", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("net/net_dev_queue") || err.contains("tracefs"),
        "{err}"
    );
}

#[test]
fn sigint_ends_a_journey_with_its_result() {
    let Some(traced) = traced_bed(
        "sigint_ends_a_journey_with_its_result",
        "js",
        Topology::Pair,
    ) else {
        return;
    };
    let name = traced.name.clone();
    // Interrupted once the probes are being sent (not after a fixed time:
    // under load the setup alone can outlast it, and no probe is sent).
    let child = journey_once(
        &[
            "--bed",
            &name,
            "--count",
            "100000",
            "--rate",
            "100",
            "--cost-time",
            "0",
        ],
        "sending",
    );
    std::thread::sleep(Duration::from_secs(1));
    let o = interrupt(child);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)));
    let sent = doc["probes"]["sent"].as_u64().unwrap();
    assert!(sent > 0 && sent < 100_000, "{sent}");
}

/// The cost measurement's extra round reads each `tp_btf` program's
/// kernel run statistics: every datagram sent passed `net_dev_queue` once
/// (other traffic only adds runs), and the empty program gives a floor.
#[test]
fn the_cost_shows_each_programs_kernel_run_statistics() {
    let Some(traced) = traced_bed(
        "the_cost_shows_each_programs_kernel_run_statistics",
        "jc",
        Topology::Pair,
    ) else {
        return;
    };
    let name = traced.name.clone();
    let doc = common::json_of(&[
        "journey",
        "--bed",
        &name,
        "--json",
        "--count",
        "3",
        "--tracer",
        "tp_btf",
        "--cost-time",
        "200ms",
    ]);
    let doc = common::round_trip::<JourneyResult>(SCHEMA, &doc);
    let cost = doc.result.cost.expect("a cost");
    let p = cost.programs.expect("program statistics with tp_btf");
    assert!(p.datagrams > 0, "{p:#?}");
    let queue = p
        .programs
        .iter()
        .find(|r| r.tracepoint == "net/net_dev_queue")
        .unwrap_or_else(|| panic!("{p:#?}"));
    assert!(queue.runs >= p.datagrams, "{p:#?}");
    assert!(queue.run_time_ns > 0 && p.ns_per_datagram > 0.0, "{p:#?}");
    assert!(p.floor_ns_per_run.is_some_and(|f| f > 0.0), "{p:#?}");
    // The source names the floor only because it was measured.
    assert!(p.source.contains("the floor is an empty program"), "{p:#?}");
    assert_eq!(
        p.programs.len(),
        doc.result.tracer.tp_btf_programs.len(),
        "{p:#?}"
    );
    // Runs the kernel skipped are flagged exactly when a program had some.
    let missed: u64 = p.programs.iter().map(|r| r.recursion_misses).sum();
    let flagged = doc
        .flags
        .iter()
        .find(|f| f.code == "tracer_recursion_misses");
    assert_eq!(
        flagged.map(|f| f.evidence["recursion_misses"].as_u64()),
        (missed > 0).then_some(Some(missed)),
        "{p:#?}"
    );
    // The journey's own programs likewise, read when its tracing ended:
    // only programs it ran, each with a count.
    let own = &doc.result.tracer.recursion_misses;
    assert!(
        own.iter()
            .all(|(tp, n)| *n > 0 && doc.result.tracer.tp_btf_programs.contains(tp)),
        "{own:?}"
    );
    let skipped = doc.flags.iter().find(|f| f.code == "tracer_events_skipped");
    assert_eq!(
        skipped.map(|f| f.evidence["recursion_misses"].as_u64()),
        (!own.is_empty()).then(|| Some(own.values().sum::<u64>())),
        "{own:?}"
    );
}

#[test]
fn a_kernel_answered_ping_on_a_bed_shows_the_responders_stages() {
    let Some(traced) = traced_bed(
        "a_kernel_answered_ping_on_a_bed_shows_the_responders_stages",
        "jl",
        Topology::Pair,
    ) else {
        return;
    };
    let name = traced.name.clone();
    let doc = common::json_of(&[
        "latency", "--icmp", "--bed", &name, "--count", "50", "--json",
    ]);
    let k = &doc["runs"][0]["responder_kernel"];
    assert_eq!(k["device"], "lr-b", "{k}");
    assert_eq!(k["requests"], 50, "{k}");
    for stage in ["rx", "processing", "tx"] {
        assert_eq!(k[stage]["count"], 50, "{stage}: {k}");
        assert!(k[stage]["p50_ns"].as_u64().unwrap() > 0, "{stage}: {k}");
    }
    let text = linerate(&["latency", "--icmp", "--bed", &name, "--count", "20"]);
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(out.contains("responder kernel on lr-b"), "{out}");
}

/// `journey --iface lr-b --filter 'udp and port N'` in host b while an
/// application in host a sends datagrams to port N and as many to N + 1:
/// every datagram to N is followed (and only those), in path order from
/// host a's interface to host b's, time never going backwards in a packet.
#[test]
fn iface_follows_any_applications_matching_packets() {
    let Some(traced) = traced_bed(
        "iface_follows_any_applications_matching_packets",
        "ji",
        Topology::Pair,
    ) else {
        return;
    };
    let name = traced.name.clone();
    let (a, b) = (format!("lr-{name}-a"), format!("lr-{name}-b"));
    const PORT: u16 = 47_001;
    const SENT: u64 = 20;
    // A receiver in b on PORT (none on PORT + 1: those are dropped, and
    // must not count either).
    let rx = udp_receiver(&b, "198.18.0.2", PORT, SENT);
    let filter = format!("udp and port {PORT}");
    let child = attached_journey(&[
        "--iface", "lr-b", "--netns", &b, "--filter", &filter, "--count", "1000", "--time", "3s",
    ]);
    udp_send(&a, "198.18.0.2", &[PORT, PORT + 1], SENT);
    let o = child.wait_with_output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let doc = common::round_trip::<IfaceResult>(iface::SCHEMA, &doc);
    let received = rx.join().unwrap().unwrap();
    assert_eq!(received, SENT, "the receiver got every datagram to {PORT}");
    let r = &doc.result;
    assert_eq!(r.stopped_by, "time");
    assert_eq!(r.tracer.backend, Backend::TpBtf);
    // Every datagram to PORT, and none to PORT + 1 (those are dropped
    // with NO_SOCKET: no drop may show).
    assert_eq!(r.packets.matched, SENT, "{:#?}", r.packets);
    assert_eq!(r.packets.dropped, 0, "{:#?}", r.drops);
    assert!(r.drops.is_empty(), "{:#?}", r.drops);
    assert_eq!(r.packets.followed_first_to_last, SENT, "{:#?}", r.steps);
    assert!(
        r.packets.chain_events >= SENT,
        "net_dev_xmit follows by chain"
    );
    let at = |point: Point, dev: &str, ns: &str| {
        let i = r
            .steps
            .iter()
            .position(|s| s.point == point && s.dev.as_deref() == Some(dev))
            .unwrap_or_else(|| panic!("no {point:?} on {dev}: {:#?}", r.steps));
        assert_eq!(r.steps[i].netns.as_deref(), Some(ns), "{point:?}");
        assert_eq!(r.steps[i].packets, SENT, "{point:?}");
        i
    };
    let order = [
        at(Point::NetDevQueue, "lr-a", &a),
        at(Point::NetDevXmit, "lr-a", &a),
        at(Point::NetifReceiveSkb, "lr-b", &b),
    ];
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{:#?}", r.steps);
    assert!(r.steps.iter().all(|s| s.from_send.median_ns >= 0));
    let ex = &r.example;
    assert!(ex.len() >= 3, "{ex:#?}");
    assert_eq!(ex[0].t_ns, 0);
    assert!(ex.windows(2).all(|w| w[0].t_ns <= w[1].t_ns), "{ex:#?}");
    // Only the interface's traffic in its namespace: the filter is shown.
    assert_eq!(r.filter, format!("udp and port {PORT}"));
    assert_eq!(r.netns.as_deref(), Some(b.as_str()));
    // The human table: a row per step, within the default width.
    let text = linerate_report::journey::render_iface(&doc, Default::default());
    assert!(text.contains("net:netif_receive_skb"), "{text}");
    assert!(text.contains(&format!("{SENT} matched")), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
}

/// A receiver in namespace `ns` on `addr:port`, bound when this returns
/// (a datagram sent before would be dropped), that reads up to `n`
/// datagrams (at most 15 s); joins with how many it read.
fn udp_receiver(
    ns: &str,
    addr: &'static str,
    port: u16,
    n: u64,
) -> std::thread::JoinHandle<Result<u64, linerate_io::netns::NetnsError>> {
    let (bound, is_bound) = std::sync::mpsc::channel();
    let rx = linerate_io::netns::spawn_in(Some(ns), "rx", move || {
        let s = std::net::UdpSocket::bind((addr, port)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        bound.send(()).unwrap();
        let mut buf = [0u8; 2048];
        let mut got = 0u64;
        let deadline = Instant::now() + Duration::from_secs(15);
        while got < n && Instant::now() < deadline {
            if s.recv(&mut buf).is_ok() {
                got += 1;
            }
        }
        got
    })
    .unwrap();
    is_bound.recv().expect("the receiver binds");
    rx
}

/// Sends `n` datagrams (100 + i bytes) from namespace `ns` to each of
/// `ports` on `dst`, 10 ms apart.
fn udp_send(ns: &str, dst: &'static str, ports: &[u16], n: u64) {
    let ports = ports.to_vec();
    linerate_io::netns::spawn_in(Some(ns), "tx", move || {
        let s = std::net::UdpSocket::bind(("0.0.0.0", 0)).unwrap();
        for i in 0..n {
            let payload = vec![b'x'; 100 + i as usize];
            for &p in &ports {
                s.send_to(&payload, (dst, p)).unwrap();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    })
    .unwrap()
    .join()
    .unwrap()
    .unwrap();
}

/// `--iface lr-b` on a bridge or router bed follows another application's
/// datagrams from a through the DUT's forwarding to the socket in b: the
/// steps in path order and in their namespaces, times never backwards.
fn iface_across(topology: Topology, tag: &str, dst: &'static str) {
    let name = format!("{tag}{}", std::process::id());
    let _bed = Bed::up(&BedSpec::new(name.clone(), topology)).expect("bed up");
    let ns = |h: &str| format!("lr-{name}-{h}");
    if topology == Topology::Bridge {
        wait_forwarding(&name);
    }
    const PORT: u16 = 47_011;
    const SENT: u64 = 20;
    // Neighbour resolution (the router's ARP for b) before the trace.
    udp_send(&ns("a"), dst, &[PORT + 1], 1);
    let rx = udp_receiver(&ns("b"), dst, PORT, SENT);
    let filter = format!("udp and port {PORT}");
    let b = ns("b");
    let child = attached_journey(&[
        "--iface", "lr-b", "--netns", &b, "--filter", &filter, "--count", "1000", "--time", "3s",
    ]);
    udp_send(&ns("a"), dst, &[PORT], SENT);
    let o = child.wait_with_output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let doc = common::round_trip::<IfaceResult>(iface::SCHEMA, &doc);
    assert_eq!(rx.join().unwrap().unwrap(), SENT);
    let r = &doc.result;
    assert_eq!(r.packets.matched, SENT, "{:#?}", r.packets);
    assert_eq!(r.packets.dropped, 0, "{:#?}", r.drops);
    assert_eq!(r.packets.followed_first_to_last, SENT, "{:#?}", r.steps);
    let at = |point: Point, dev: Option<&str>, host: &str| {
        let i = r
            .steps
            .iter()
            .position(|s| s.point == point && s.dev.as_deref() == dev)
            .unwrap_or_else(|| panic!("no {point:?} on {dev:?}: {:#?}", r.steps));
        assert_eq!(r.steps[i].netns, Some(ns(host)), "{point:?} on {dev:?}");
        assert_eq!(r.steps[i].packets, SENT, "{point:?} on {dev:?}");
        i
    };
    // Into the DUT, forwarded out of its other port, into b, queued to
    // the receiver's socket (by the skb address: UDP's delivery carries
    // no headers the program reads).
    let path = [
        (Point::NetDevQueue, Some("lr-a"), "a"),
        (Point::NetifReceiveSkb, Some("lr-dut-a"), "dut"),
        (Point::NetDevQueue, Some("lr-dut-b"), "dut"),
        (Point::NetifReceiveSkb, Some("lr-b"), "b"),
        (Point::SkDataReady, None, "b"),
    ];
    let order: Vec<usize> = path.iter().map(|&(p, d, h)| at(p, d, h)).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{:#?}", r.steps);
    // The forwarding step, named in words between its two rows.
    let forwarding = format!("forwarding in {}", ns("dut"));
    assert!(
        r.gaps
            .iter()
            .any(|g| g.what.starts_with(&forwarding) && g.from == order[1]),
        "{:#?}",
        r.gaps
    );
    assert!(r
        .steps
        .windows(2)
        .all(|w| w[0].from_send.median_ns <= w[1].from_send.median_ns));
    // The example packet: every step of the path, in order, time never
    // going backwards.
    let ex = &r.example;
    assert!(ex.windows(2).all(|w| w[0].t_ns <= w[1].t_ns), "{ex:#?}");
    let mut from = 0;
    for (p, d, _) in path {
        let i = ex[from..]
            .iter()
            .position(|e| e.tracepoint == p.label() && e.dev.as_deref() == d)
            .unwrap_or_else(|| panic!("{p:?} on {d:?} missing or out of order: {ex:#?}"));
        from += i + 1;
    }
}

#[test]
fn iface_follows_a_bridge_s_forwarding_to_the_socket() {
    let _one_tracer = one_tracer();
    if !linerate_bed::privileges::require("iface_follows_a_bridge_s_forwarding_to_the_socket") {
        return;
    }
    iface_across(Topology::Bridge, "jib", "198.18.0.2");
}

#[test]
fn iface_follows_a_router_s_forwarding_to_the_socket() {
    let _one_tracer = one_tracer();
    if !linerate_bed::privileges::require("iface_follows_a_router_s_forwarding_to_the_socket") {
        return;
    }
    iface_across(Topology::Router, "jir", "198.19.0.1");
}

/// `--iface` on a pair bed with `--loss` and a shaped link: the datagrams
/// the loss drops show with the kernel's reason where they were dropped,
/// the others are followed through the link's qdisc to the socket.
#[test]
fn iface_shows_the_loss_drops_and_the_qdisc() {
    let _one_tracer = one_tracer();
    if !linerate_bed::privileges::require("iface_shows_the_loss_drops_and_the_qdisc") {
        return;
    }
    let name = format!("jil{}", std::process::id());
    let mut spec = BedSpec::new(name.clone(), Topology::Pair);
    spec.loss_pct = Some(50.0);
    spec.link = Some(linerate_core::units::BitRate::from_mbps(100));
    let _bed = Bed::up(&spec).expect("bed up");
    let (a, b) = (format!("lr-{name}-a"), format!("lr-{name}-b"));
    const PORT: u16 = 47_021;
    const SENT: u64 = 40;
    let rx = udp_receiver(&b, "198.18.0.2", PORT, SENT);
    let filter = format!("udp and port {PORT}");
    let child = attached_journey(&[
        "--iface", "lr-b", "--netns", &b, "--filter", &filter, "--count", "1000", "--time", "3s",
    ]);
    udp_send(&a, "198.18.0.2", &[PORT], SENT);
    let o = child.wait_with_output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let doc = common::round_trip::<IfaceResult>(iface::SCHEMA, &doc);
    let received = rx.join().unwrap().unwrap();
    let r = &doc.result;
    assert_eq!(r.packets.matched, SENT, "{:#?}", r.packets);
    // Every datagram the receiver did not get is a drop (50 %: some of 40).
    assert!(received > 0 && received < SENT, "{received}");
    let why = format!(
        "received {received}: {:#?} {:#?} {:#?}",
        r.packets, r.drops, r.steps
    );
    assert_eq!(r.packets.dropped, SENT - received, "{why}");
    assert_eq!(r.packets.followed_first_to_last, received, "{why}");
    let nft = r
        .drops
        .iter()
        .find(|d| d.reason == "NETFILTER_DROP")
        .unwrap_or_else(|| panic!("{:#?}", r.drops));
    assert_eq!(nft.count, SENT - received);
    assert_eq!(nft.after, "net:netif_receive_skb on lr-b");
    assert_eq!(nft.netns.as_deref(), Some(b.as_str()));
    assert!(doc.flags.iter().any(|f| f.code == iface::codes::DROPS));
    // The shaped link's qdisc on a's egress, between the queue and the
    // driver, for every datagram.
    let row = |p: Point| {
        r.steps
            .iter()
            .position(|s| s.point == p && s.dev.as_deref() == Some("lr-a"))
            .unwrap_or_else(|| panic!("no {p:?} on lr-a: {:#?}", r.steps))
    };
    let path = [
        row(Point::NetDevQueue),
        row(Point::QdiscEnqueue),
        row(Point::QdiscDequeue),
        row(Point::NetDevStartXmit),
    ];
    assert!(path.windows(2).all(|w| w[0] < w[1]), "{:#?}", r.steps);
    assert_eq!(r.steps[path[1]].packets, SENT);
    assert_eq!(r.steps[path[1]].netns.as_deref(), Some(a.as_str()));
}

/// The kernel's verifier takes the `--iface` programs for every kind of
/// term (IPv4 and IPv6 hosts, lengths, ports, each protocol), and they
/// detach when asked and when dropped.
#[test]
fn iface_programs_pass_the_verifier_for_every_term() {
    use linerate_core::journey::filter::IfaceFilter;
    let _one_tracer = one_tracer();
    if !linerate_bed::privileges::require("iface_programs_pass_the_verifier_for_every_term") {
        return;
    }
    let want: Vec<&str> = TRACEPOINTS
        .iter()
        .filter(|t| runs_for_iface(t.point))
        .map(|t| t.path)
        .collect();
    assert!(want.contains(&"net/net_dev_xmit") && want.contains(&"skb/kfree_skb"));
    assert!(!want.contains(&"sock/sock_recv_length"), "no skb there");
    for f in [
        "udp and port 5201 and host 198.18.0.200 and len 100..200",
        "tcp host 2001:2::1 port 65535 len 20",
        "icmp",
        "len 1500",
    ] {
        let filter = IfaceFilter::parse(f).unwrap();
        let mut p = BtfPrograms::load_iface(&TRACEPOINTS, &filter)
            .unwrap_or_else(|e| panic!("{f}: {}", linerate_core::error::chain(&e)));
        assert_eq!(p.opened, want, "{f}");
        p.attach().unwrap();
        assert_eq!(p.attached(), want.len());
        assert_eq!(p.lost().unwrap(), 0);
        p.detach();
        assert_eq!(p.attached(), 0);
        p.attach().unwrap();
        drop(p);
    }
}

/// SIGINT ends an `--iface` journey with what it gathered (here nothing
/// on an idle port: flagged, exit 1), not with an error.
#[test]
fn sigint_ends_an_iface_journey_with_its_result() {
    let _one_tracer = one_tracer();
    if !linerate_bed::privileges::require("sigint_ends_an_iface_journey_with_its_result") {
        return;
    }
    let child = attached_journey(&[
        "--iface",
        "lo",
        "--filter",
        "udp port 47003",
        "--time",
        "60s",
    ]);
    let o = interrupt(child);
    assert_eq!(o.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let doc = common::round_trip::<IfaceResult>(iface::SCHEMA, &doc);
    assert_eq!(doc.result.stopped_by, "interrupt");
    assert_eq!(doc.result.packets.matched, 0);
    assert!(doc
        .flags
        .iter()
        .any(|f| f.code == iface::codes::NOTHING_MATCHED));
}
