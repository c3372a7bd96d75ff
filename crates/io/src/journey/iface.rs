//! `linerate journey --iface IF --filter EXPR`: follows the matching
//! packets of any application, without probes (see
//! `linerate_core::journey::iface`).
//!
//! Only `tp_btf` programs ([`BtfPrograms::load_iface`]): each reads the
//! packet's IP and transport headers from the skb and judges the filter in
//! the kernel, so a packet that does not match costs a header read and
//! writes nothing. perf raw samples carry no headers: `--tracer perf` is
//! refused (by the configuration's check), and where BPF is refused the
//! error says why.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use linerate_core::journey::format::Format;
use linerate_core::journey::iface::{
    summarise, Chains, Iface, IfaceConfig, IfaceResult, MAX_EVENTS,
};
use linerate_core::journey::{left_out, Backend, Event, TracerInfo, TRACEPOINTS};
use linerate_core::progress::Progress;

use super::btf::{runs_for_iface, BtfPrograms, RINGBUF_BYTES};
use super::{function_level, JourneyError, Tracefs};
use crate::netns;
use crate::sys;

/// Where `--iface` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfaceTarget {
    /// Its name.
    pub name: String,
    /// The named namespace holding it (None: linerate's own).
    pub netns: Option<String>,
    /// That namespace's inode (what the programs' records carry).
    pub inode: u32,
}

/// The directory of named namespaces (`ip netns`).
const NETNS_DIR: &str = "/run/netns";

fn named_namespaces() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn inode_of(path: &str) -> Option<u32> {
    std::fs::metadata(path)
        .ok()
        .and_then(|m| u32::try_from(m.ino()).ok())
}

/// Finds interface `name`: in named namespace `netns` when given, else in
/// linerate's namespace, else in the one named namespace (`/run/netns`)
/// that has it.
pub fn find_iface(name: &str, netns: Option<&str>) -> Result<IfaceTarget, JourneyError> {
    let own = || inode_of("/proc/self/ns/net");
    if let Some(ns) = netns {
        if !has_iface(ns, name) {
            return Err(JourneyError::UnknownIfaceIn {
                name: name.into(),
                netns: ns.into(),
            });
        }
        return Ok(IfaceTarget {
            name: name.into(),
            netns: Some(ns.into()),
            inode: inode_of(&format!("{NETNS_DIR}/{ns}")).unwrap_or(0),
        });
    }
    if sys::packet::ifindex(name).is_ok() {
        return Ok(IfaceTarget {
            name: name.into(),
            netns: None,
            inode: own().unwrap_or(0),
        });
    }
    let mut found = Vec::new();
    for ns in named_namespaces() {
        if has_iface(&ns, name) {
            found.push(ns);
        }
    }
    match found.as_slice() {
        [ns] => Ok(IfaceTarget {
            name: name.into(),
            netns: Some(ns.clone()),
            inode: inode_of(&format!("{NETNS_DIR}/{ns}")).unwrap_or(0),
        }),
        [] => Err(JourneyError::UnknownIface(name.into())),
        many => Err(JourneyError::AmbiguousIface {
            name: name.into(),
            netns: many.join(", "),
        }),
    }
}

/// True when named namespace `ns` exists and has interface `name`.
fn has_iface(ns: &str, name: &str) -> bool {
    let n = name.to_string();
    netns::spawn_in(Some(ns), "lr-journey-iface", move || {
        sys::packet::ifindex(&n).is_ok()
    })
    .ok()
    .and_then(|h| h.join().ok())
    .and_then(Result::ok)
    .unwrap_or(false)
}

/// Namespace inode → name: the named namespaces, and linerate's own.
fn namespace_names() -> BTreeMap<u32, String> {
    let mut names: BTreeMap<u32, String> = named_namespaces()
        .into_iter()
        .filter_map(|ns| Some((inode_of(&format!("{NETNS_DIR}/{ns}"))?, ns)))
        .collect();
    if let Some(own) = inode_of("/proc/self/ns/net") {
        names.entry(own).or_insert_with(|| "(linerate's)".into());
    }
    names
}

/// Events drained this long ago are in time order with every later one
/// (the ring takes records in the order the CPUs reserve them).
const SETTLE_NS: u64 = 20_000_000;

/// Follows the packets matching `cfg.filter` that pass `target` until
/// `cfg.count` of them were seen, `cfg.time_ns` passed, or `stop` (SIGINT)
/// is set. The programs are detached before this returns, whatever
/// happens.
pub fn run(
    cfg: &IfaceConfig,
    target: &IfaceTarget,
    progress: &mut dyn Progress,
    stop: &AtomicBool,
) -> Result<IfaceResult, JourneyError> {
    let fs = Tracefs::find_or_mount().map_err(|source| JourneyError::Tracefs { source })?;
    let tps: Vec<_> = TRACEPOINTS
        .iter()
        .copied()
        .filter(|t| runs_for_iface(t.point))
        .collect();
    let mut programs = BtfPrograms::load_iface(&tps, &cfg.filter)
        .map_err(|source| JourneyError::IfaceBtf { source })?;
    programs.reasons = fs
        .format("skb/kfree_skb")
        .ok()
        .and_then(|f| Format::parse(&f).ok());
    let mut chains = Chains::new(Iface {
        name: target.name.clone(),
        netns_inode: Some(target.inode).filter(|&i| i != 0),
    });
    let t0 = sys::clock::monotonic_ns();
    programs
        .attach()
        .map_err(|source| JourneyError::Btf { source })?;
    progress.step(&format!(
        "attached: following `{}` on {}{} with {} tp_btf programs, for {} packets or {:.1} s",
        cfg.filter,
        target.name,
        target
            .netns
            .as_deref()
            .map(|n| format!(" (namespace {n})"))
            .unwrap_or_default(),
        programs.opened.len(),
        cfg.count,
        cfg.time_ns as f64 / 1e9
    ));
    let mut pending: Vec<Event> = Vec::new();
    let stopped_by = loop {
        programs.drain(&mut pending);
        let now = sys::clock::monotonic_ns();
        settle(&mut pending, &mut chains, now.saturating_sub(SETTLE_NS));
        if chains.on_iface() >= cfg.count {
            break "count";
        }
        if chains.events() >= MAX_EVENTS {
            break linerate_core::journey::iface::codes::EVENT_LIMIT;
        }
        if now >= t0 + cfg.time_ns {
            break "time";
        }
        if stop.load(Ordering::Relaxed) {
            break "interrupt";
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let traced_ns = sys::clock::monotonic_ns() - t0;
    programs.detach();
    programs.drain(&mut pending);
    settle(&mut pending, &mut chains, u64::MAX);
    let lost = programs
        .lost()
        .map_err(|source| JourneyError::Btf { source })?;
    let orphans = chains.orphans();
    let opened = programs.opened.clone();
    let recursion_misses = programs.recursion_misses();
    drop(programs);
    let names = namespace_names();
    let mut summary = summarise(chains.into_chains(), cfg.count, &|i| names.get(&i).cloned());
    let counts = &mut summary.counts;
    counts.ring_lost_records = lost;
    counts.orphan_events = orphans;
    let kprobes = fs.has_kprobes();
    let tracer = TracerInfo {
        method: format!(
            "tp_btf programs assembled in linerate: each reads the IP header and the transport \
             header's first 8 bytes with bpf_probe_read_kernel and judges the filter in BPF; \
             matching skb addresses are kept in an LRU hash map ({} entries) so events without \
             readable headers follow their chain; records to one BPF ring buffer of {} MiB \
             shared by every CPU (bpf_ringbuf_output without wake-up), polled",
            sys::tpbtf::CHAIN_ENTRIES,
            RINGBUF_BYTES >> 20
        ),
        backend: Backend::TpBtf,
        tp_btf_programs: opened.clone(),
        fallback: None,
        clock: "CLOCK_MONOTONIC (bpf_ktime_get_ns)".into(),
        opened: opened.clone(),
        missing: Vec::new(),
        left_out: left_out(&opened, |_| {
            "not used by --iface (its programs follow packets by headers and skb address)"
        }),
        filters: vec![format!("in BPF, on the headers: {}", cfg.filter)],
        kprobes,
        function_level: function_level(kprobes),
        mounted_tracefs: fs.mounted_by_us,
        ring_bytes_per_cpu: u64::from(RINGBUF_BYTES),
        cpus: sys::perf::cpu_count(),
        recursion_misses,
    };
    Ok(IfaceResult {
        iface: target.name.clone(),
        netns: target.netns.clone(),
        filter: cfg.filter.to_string(),
        count: cfg.count,
        time_ns: cfg.time_ns,
        stopped_by: stopped_by.into(),
        traced_ns,
        tracer,
        packets: summary.counts,
        steps: summary.steps,
        gaps: summary.gaps,
        drops: summary.drops,
        example: summary.example,
    })
}

/// Feeds the events older than `upto` into `chains`, in time order.
fn settle(pending: &mut Vec<Event>, chains: &mut Chains, upto: u64) {
    pending.sort_by_key(|e| e.time_ns);
    let n = pending.partition_point(|e| e.time_ns < upto);
    for e in pending.drain(..n) {
        chains.push(e);
    }
}
