//! `linerate journey`: sends probes (UDP, TCP or ICMP echo) from host a to host b of a bed and
//! follows each through the kernel with tracepoints (see
//! `linerate_core::journey` for how the paths are assembled).
//!
//! The tracer ([`Tracer`]) runs the length-filtered tracepoints as `tp_btf`
//! programs assembled in linerate ([`btf`]: the filter runs in BPF before
//! anything is written; time from `bpf_ktime_get_ns`, CLOCK_MONOTONIC) and
//! the others with `perf_event_open` raw samples (real skb addresses,
//! lengths, device names; CLOCK_MONOTONIC; in-kernel filters on `dport` and
//! the softirq vector), every tracepoint on perf where BPF is refused. The
//! cost of either is measured on the bed ([`Cost`]).

use std::io;
use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use linerate_core::journey::format::FormatError;
use linerate_core::journey::{
    attribute, follow, hints, left_out, not_for, summarise, tracepoints, Backend, Config, Cost,
    Device, Event, JourneyResult, Point, ProbeSent, ProgramCosts, Proto, Rates, Selection,
    Tracepoint, TracerInfo, XdpProgram, XdpReport, L2_OVERHEAD, LEN_SLOTS, LEN_STEP,
};
use linerate_core::progress::Progress;

use crate::netns::{self, NetnsError};
use crate::sys;

pub mod btf;
pub mod iface;
pub mod responder;
pub mod tracefs;
pub mod tracer;
pub mod xdp;

pub use tracefs::Tracefs;
pub use tracer::{Filters, Tracer, RING_PAGES};

/// The first bytes of every probe's payload; the sequence number follows
/// (u64, little-endian).
pub const MAGIC: &[u8; 4] = b"LRJ1";

/// Why a journey could not run.
#[derive(Debug, thiserror::Error)]
pub enum JourneyError {
    /// tracefs is neither mounted nor mountable.
    #[error("cannot find or mount tracefs at {}", tracefs::TRACEFS)]
    Tracefs {
        /// The error.
        source: io::Error,
    },
    /// A tracepoint the journey needs is missing (or unreadable).
    #[error("tracepoint {name} is not available: cannot read {}", path.display())]
    Tracepoint {
        /// `SYSTEM/NAME`.
        name: String,
        /// Its format file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A tracepoint's format lacks what the decoder needs.
    #[error("tracepoint {name} has an unexpected format")]
    Format {
        /// `SYSTEM/NAME`.
        name: String,
        /// What is wrong.
        source: FormatError,
    },
    /// perf_event_open was refused.
    #[error("no permission to trace {name} with perf_event_open (run as root, or lower kernel.perf_event_paranoid)")]
    Permission {
        /// `SYSTEM/NAME`.
        name: String,
        /// The error.
        source: io::Error,
    },
    /// perf_event_open failed otherwise.
    #[error("cannot open tracepoint {name} on CPU {cpu} with perf_event_open")]
    Open {
        /// `SYSTEM/NAME`.
        name: String,
        /// The CPU.
        cpu: u32,
        /// The error.
        source: io::Error,
    },
    /// The kernel refused an in-kernel filter.
    #[error("tracepoint {name} refused the filter `{filter}`")]
    Filter {
        /// `SYSTEM/NAME`.
        name: String,
        /// The filter.
        filter: String,
        /// The error.
        source: io::Error,
    },
    /// A ring could not be mapped or shared.
    #[error("cannot set up the perf ring buffer of CPU {cpu}")]
    Ring {
        /// The CPU.
        cpu: u32,
        /// The error.
        source: io::Error,
    },
    /// Starting or stopping the events failed.
    #[error("cannot enable or disable the tracepoints")]
    Control {
        /// The error.
        source: io::Error,
    },
    /// The `tp_btf` programs could not be used (with `--tracer tp_btf`).
    #[error("cannot trace with tp_btf programs")]
    Btf {
        /// Why.
        source: btf::BtfTracerError,
    },
    /// A namespace could not be entered.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// A probe socket failed.
    #[error("probe socket: {what}")]
    Socket {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: io::Error,
    },
    /// IPv6 probes asked for on a bed whose host b has no IPv6 address.
    #[error("-6: bed {0} has no IPv6 address for host b")]
    NoIpv6(String),
    /// A probe thread panicked.
    #[error("the {0} thread panicked")]
    Thread(&'static str),
    /// `--iface` needs the `tp_btf` programs (perf samples carry no
    /// headers), and they could not be used.
    #[error("--iface needs tp_btf programs to read the packet headers (perf samples carry none), and they cannot be used")]
    IfaceBtf {
        /// Why.
        source: btf::BtfTracerError,
    },
    /// `--iface` names no interface of any namespace.
    #[error("--iface {0}: no such interface (in linerate's namespace or any named one)")]
    UnknownIface(String),
    /// `--iface` is not in the `--netns` given.
    #[error("--iface {name}: no such interface in namespace {netns}")]
    UnknownIfaceIn {
        /// The interface.
        name: String,
        /// The namespace.
        netns: String,
    },
    /// `--iface` names an interface of several named namespaces.
    #[error("--iface {name}: several namespaces have it ({netns}); say which with --netns NS")]
    AmbiguousIface {
        /// The interface.
        name: String,
        /// The namespaces.
        netns: String,
    },
}

/// Where the probes go: a bed read as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The bed's name.
    pub bed: String,
    /// Its topology (`pair`, `bridge`, `router`).
    pub topology: String,
    /// Host a's namespace (the sender).
    pub client_netns: String,
    /// Host b's namespace (the receiver).
    pub server_netns: String,
    /// Host b's IPv4 address.
    pub server_ip: Ipv4Addr,
    /// Host b's IPv6 address (for IPv6 probes; None: the bed has none).
    pub server_ip6: Option<Ipv6Addr>,
    /// The bed's interfaces with an XDP program attached (their
    /// tracepoints are opened when there is one), or why its links could
    /// not be read.
    pub xdp: Result<Vec<XdpProgram>, String>,
    /// Every interface of the bed with its namespace and role.
    pub devices: Vec<Device>,
}

fn socket_err(what: &'static str) -> impl FnOnce(io::Error) -> JourneyError {
    move |source| JourneyError::Socket { what, source }
}

/// Sets its flag when dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// How a probe receiver behaves.
#[derive(Debug, Clone, Copy)]
struct Receive {
    count: u64,
    rcvbuf: Option<u32>,
}

/// Sends the probes, traces them, follows them. `stop` (SIGINT) ends the
/// sending early; the tracer is closed before this returns, whatever happens.
pub fn run(
    cfg: &Config,
    target: &Target,
    progress: &mut dyn Progress,
    stop: &AtomicBool,
) -> Result<JourneyResult, JourneyError> {
    let fs = Tracefs::find_or_mount().map_err(|source| JourneyError::Tracefs { source })?;
    if fs.mounted_by_us {
        progress.step(&format!("mounted tracefs at {}", fs.root.display()));
    }
    let kprobes = fs.has_kprobes();
    let mut cfg = cfg.clone();
    if cfg.proto == Proto::Tcp {
        cfg.tcp_option_bytes = tcp_option_bytes(target)?;
    }
    let cfg = &cfg;
    let server: IpAddr = if cfg.ipv6 {
        target
            .server_ip6
            .ok_or_else(|| JourneyError::NoIpv6(target.bed.clone()))?
            .into()
    } else {
        target.server_ip.into()
    };
    let sent_all = Arc::new(AtomicBool::new(false));
    let how = Receive {
        count: u64::from(cfg.count),
        rcvbuf: cfg.rcvbuf_bytes,
    };
    let (port, receiver) = match cfg.proto {
        Proto::Udp => spawn_receiver(target, server, cfg.port, how, Arc::clone(&sent_all))?,
        Proto::Tcp => spawn_tcp_receiver(target, server, cfg.port, how, Arc::clone(&sent_all))?,
        Proto::Icmp => (
            0,
            spawn_icmp_receiver(target, cfg.ipv6, how, Arc::clone(&sent_all))?,
        ),
    };
    // On every way out (an error below included) the receiver learns that
    // nothing more comes, and ends after its drain time.
    let _release = SetOnDrop(Arc::clone(&sent_all));
    let filters = Filters {
        len: cfg.len_range(),
        dport: port,
        all_events: cfg.all_events,
    };
    let sel = Selection {
        proto: cfg.proto,
        ipv6: cfg.ipv6,
        xdp: target.xdp.as_ref().is_ok_and(|x| !x.is_empty()),
    };
    let set = tracepoints(cfg.all_events, cfg.backend != Backend::Perf, sel);
    let mut tracer = Tracer::open_with(&fs, &set, filters, cfg.backend)?;
    progress.step(&format!(
        "tracing {} tracepoints on {} CPUs; sending {} probes from {} to {}:{port}",
        tracer.opened.len(),
        tracer.cpus,
        cfg.count,
        target.client_netns,
        server
    ));
    tracer.enable()?;
    let to = SocketAddr::new(server, port);
    let probes = {
        let cfg = cfg.clone();
        let stop_ptr = Arc::new(AtomicBool::new(stop.load(Ordering::Relaxed)));
        let stop_thread = Arc::clone(&stop_ptr);
        let sender = netns::spawn_in(
            Some(&target.client_netns),
            "lr-journey-tx",
            move || match cfg.proto {
                Proto::Udp => send_probes(&cfg, to, &stop_thread),
                Proto::Tcp => send_tcp_probes(&cfg, to, &stop_thread),
                Proto::Icmp => send_icmp_probes(&cfg, to, &stop_thread),
            },
        )?;
        while !sender.is_finished() {
            tracer.poll();
            stop_ptr.store(stop.load(Ordering::Relaxed), Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(1));
        }
        sent_all.store(true, Ordering::Release);
        let probes = sender
            .join()
            .map_err(|_| JourneyError::Thread("sender"))??;
        probes.map_err(socket_err("send"))?
    };
    while !receiver.is_finished() {
        tracer.poll();
        std::thread::sleep(Duration::from_millis(1));
    }
    let received = receiver
        .join()
        .map_err(|_| JourneyError::Thread("receiver"))??
        .map_err(socket_err("receive"))?;
    // Let late events (frees after the receiver read) land, then stop.
    std::thread::sleep(Duration::from_millis(20));
    tracer.disable()?;
    let recursion_misses = tracer.recursion_misses();
    let (mut events, ring_lost) = tracer.events();
    keep_bed_namespaces(&mut events, &target.devices);
    let info = TracerInfo {
        method: tracer.method(),
        backend: if tracer.programs_opened.is_empty() {
            Backend::Perf
        } else {
            Backend::TpBtf
        },
        tp_btf_programs: tracer.programs_opened.clone(),
        fallback: tracer.fallback.clone(),
        clock: "CLOCK_MONOTONIC (bpf_ktime_get_ns in tp_btf programs, perf use_clockid for perf samples, clock_gettime for sendto/recvfrom)".into(),
        opened: tracer.opened.clone(),
        missing: tracer.missing.clone(),
        left_out: left_out(&tracer.opened, |t| {
            if let Some(why) = not_for(t.point, sel) {
                why
            } else if t.point.iface_only() {
                "opened by --iface only (it fires for every buffer the host frees)"
            } else if tracer.missing.iter().any(|m| m == t.path) {
                "missing on this kernel"
            } else if t.point.context() {
                "a context event: one more program run (perf: filter) for every packet of the \
                 host, for a step the path's other events bound (--all-events opens it)"
            } else {
                "records every packet of the host with this tracer (--all-events opens it)"
            }
        }),
        filters: tracer.filters.clone(),
        kprobes,
        function_level: function_level(kprobes),
        mounted_tracefs: fs.mounted_by_us,
        ring_bytes_per_cpu: (RING_PAGES * 4096) as u64,
        cpus: tracer.cpus,
        recursion_misses,
    };
    drop(tracer);
    progress.step(&format!(
        "{} events recorded, {} probes received; following them",
        events.len(),
        received.len()
    ));
    let mut paths = follow(cfg, &target.devices, &probes, &events, &received);
    let attribution = attribute(&mut paths, &target.devices, &events);
    let s = summarise(&paths, &target.devices, &target.topology);
    let cost = if cfg.cost_ns > 0 && !stop.load(Ordering::Relaxed) {
        progress.step("measuring the tracer's cost (UDP 1472 B, one datagram in 100 traced)");
        // The tracer the journey ran: what it opened, with the backend it
        // ended on.
        let opened: Vec<Tracepoint> = set
            .iter()
            .filter(|t| info.opened.iter().any(|o| o == t.path))
            .copied()
            .collect();
        let backend = match info.backend {
            Backend::Perf => Backend::Perf,
            _ => cfg.backend,
        };
        Some(measure_cost(
            &fs,
            &opened,
            backend,
            target,
            cfg.cost_ns,
            stop,
        )?)
    } else {
        None
    };
    let mut counts = s.counts;
    counts.ring_lost_samples = ring_lost;
    let (lo, hi) = (
        cfg.probe_payload(0),
        cfg.probe_payload(u64::from(LEN_SLOTS) - 1),
    );
    let mut result = JourneyResult {
        bed: target.bed.clone(),
        topology: target.topology.clone(),
        proto: cfg.proto.name().into(),
        ipv6: cfg.ipv6,
        payload_bytes: (lo, hi.max(lo)),
        rate_pps: cfg.rate_pps,
        tracer: info,
        probes: counts,
        attribution,
        steps: s.steps,
        gaps: s.gaps,
        drops: s.drops,
        hints: Vec::new(),
        cost,
        example: s.example,
        xdp: match &target.xdp {
            Ok(attached) => XdpReport::new(attached.clone(), &events),
            Err(why) => XdpReport {
                unread: Some(why.clone()),
                ..XdpReport::default()
            },
        },
    };
    result.hints = hints(&result);
    Ok(result)
}

/// Drops the `tp_btf` events on a bed device's name whose namespace is
/// none of the bed's (another bed with the same interface names): perf
/// samples carry no namespace, so for them the name is all there is.
fn keep_bed_namespaces(events: &mut Vec<Event>, devices: &[Device]) {
    use std::os::unix::fs::MetadataExt as _;
    let inodes: std::collections::BTreeSet<u64> = devices
        .iter()
        .filter_map(|d| std::fs::metadata(netns::netns_path(&d.netns)).ok())
        .map(|m| m.ino())
        .collect();
    if inodes.is_empty() {
        return;
    }
    events.retain(|e| {
        let on_bed = devices.iter().any(|d| Some(&d.name) == e.dev.as_ref());
        !on_bed || e.netns.is_none_or(|n| inodes.contains(&u64::from(n)))
    });
}

fn function_level(kprobes: bool) -> String {
    if kprobes {
        "function-level events are not used: only tracepoints (kprobes exist on this kernel but \
         are not attached); steps inside the bridge and IP code are the gaps between tracepoints"
            .into()
    } else {
        "this kernel has no kprobes (no kprobe_events in tracefs), so no function-level events \
         (fentry/fexit are not used either): steps inside the bridge and IP code show as the gaps \
         between tracepoints"
            .into()
    }
}

/// The receiver thread: the probes it read.
type ReceiverThread = std::thread::JoinHandle<Result<io::Result<Vec<Event>>, NetnsError>>;

/// The receiver in host b: binds `port` (0: any), returns the port and the
/// thread, which collects [`Point::UserRecv`] events until every probe came
/// or the sender is done and nothing more arrives.
fn spawn_receiver(
    target: &Target,
    ip: IpAddr,
    port: u16,
    how: Receive,
    sent_all: Arc<AtomicBool>,
) -> Result<(u16, ReceiverThread), JourneyError> {
    let (tx, rx) = mpsc::channel();
    let h = netns::spawn_in(Some(&target.server_netns), "lr-journey-rx", move || {
        let sock = match bind_receiver(ip, port, how.rcvbuf) {
            Ok(s) => s,
            Err(e) => {
                let _ = tx.send(Err(e));
                return Ok(Vec::new());
            }
        };
        let _ = tx.send(sock.local_addr().map(|a| a.port()));
        receive_probes(&sock, how, &sent_all)
    })?;
    let port = rx
        .recv()
        .map_err(|_| JourneyError::Thread("receiver"))?
        .map_err(socket_err("bind the receiver in host b"))?;
    Ok((port, h))
}

fn bind_receiver(ip: IpAddr, port: u16, rcvbuf: Option<u32>) -> io::Result<UdpSocket> {
    let sock = UdpSocket::bind((ip, port))?;
    if let Some(b) = rcvbuf {
        let b = i32::try_from(b).map_err(io::Error::other)?;
        sys::sock::set_int(&sock, libc::SOL_SOCKET, libc::SO_RCVBUF, b)?;
    }
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    Ok(sock)
}

/// How long the receiver waits for stragglers once the sender is done.
const DRAIN: Duration = Duration::from_millis(300);

fn receive_probes(sock: &UdpSocket, how: Receive, sent_all: &AtomicBool) -> io::Result<Vec<Event>> {
    if how.rcvbuf.is_some() {
        // Read only once everything was sent: the queue fills as it would
        // behind a slow application.
        while !sent_all.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    receive_until(
        how.count,
        sent_all,
        |b| sock.recv(b).map(Some),
        |data, t, out| {
            if let Some(seq) = probe_seq(data) {
                out.push(Event::user(Point::UserRecv, t, seq, data.len() as u32));
            }
        },
    )
}

/// Reads with `read` (a 20 ms read timeout; `None`: the stream ended) and
/// hands each read with its CLOCK_MONOTONIC arrival to `take`, until
/// `count` probes are in or [`DRAIN`] has passed since the sender finished.
fn receive_until(
    count: u64,
    sent_all: &AtomicBool,
    mut read: impl FnMut(&mut [u8]) -> io::Result<Option<usize>>,
    mut take: impl FnMut(&[u8], u64, &mut Vec<Event>),
) -> io::Result<Vec<Event>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    let mut done_at = None;
    while (out.len() as u64) < count {
        match read(&mut buf) {
            Ok(None) => break,
            Ok(Some(n)) => take(&buf[..n], sys::clock::monotonic_ns(), &mut out),
            Err(e) if sys::sock::timed_out(&e) => {}
            Err(e) => return Err(e),
        }
        if sent_all.load(Ordering::Acquire) {
            let since = *done_at.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() > DRAIN {
                break;
            }
        }
    }
    Ok(out)
}

/// The sequence number of a probe's payload.
fn probe_seq(payload: &[u8]) -> Option<u64> {
    if payload.get(..4)? != MAGIC {
        return None;
    }
    Some(u64::from_le_bytes(payload.get(4..12)?.try_into().ok()?))
}

/// Calls `send(seq, payload)` for every probe at the configured rate
/// (bounded by count and rate), with `payload` holding the probe's bytes:
/// [`MAGIC`], the sequence number (u64 LE), the probe's length (u32 LE),
/// zero fill.
fn send_paced(
    cfg: &Config,
    stop: &AtomicBool,
    mut send: impl FnMut(u64, &[u8]) -> io::Result<()>,
) -> io::Result<Vec<ProbeSent>> {
    let mut buf = vec![0u8; 1500];
    buf[..4].copy_from_slice(MAGIC);
    let interval = cfg.interval_ns();
    let start = sys::clock::monotonic_ns();
    let mut out = Vec::with_capacity(cfg.count as usize);
    for seq in 0..u64::from(cfg.count) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let due = start + seq * interval;
        loop {
            let now = sys::clock::monotonic_ns();
            if now >= due {
                break;
            }
            std::thread::sleep(Duration::from_nanos((due - now).min(1_000_000)));
        }
        let len = cfg.probe_payload(seq);
        buf[4..12].copy_from_slice(&seq.to_le_bytes());
        buf[12..16].copy_from_slice(&len.to_le_bytes());
        let send_ns = sys::clock::monotonic_ns();
        send(seq, &buf[..len as usize])?;
        out.push(ProbeSent {
            seq,
            payload: len,
            send_ns,
        });
    }
    Ok(out)
}

/// Sends the UDP probes.
fn send_probes(cfg: &Config, to: SocketAddr, stop: &AtomicBool) -> io::Result<Vec<ProbeSent>> {
    let sock = UdpSocket::bind(any_of(to))?;
    sock.connect(to)?;
    send_paced(cfg, stop, |_, p| sock.send(p).map(drop))
}

/// The unspecified address of `to`'s family, any port.
fn any_of(to: SocketAddr) -> SocketAddr {
    match to {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    }
}

/// Sends the TCP probes: one connection (made before the first probe; its
/// handshake carries no data and matches no probe length), `TCP_NODELAY`,
/// one write — one data segment at these rates — per probe.
fn send_tcp_probes(cfg: &Config, to: SocketAddr, stop: &AtomicBool) -> io::Result<Vec<ProbeSent>> {
    let sock = TcpStream::connect_timeout(&to, Duration::from_secs(2))?;
    sock.set_nodelay(true)?;
    let mut w = &sock;
    let sent = send_paced(cfg, stop, |_, p| w.write_all(p))?;
    // Let the last segments be acknowledged before the socket closes.
    std::thread::sleep(Duration::from_millis(50));
    Ok(sent)
}

/// ICMP echo identifier of the probes.
const ICMP_IDENT: u16 = 0x4c52;

/// Sends the ICMP echo probes on a raw socket (the ICMP payload is the
/// probe's bytes; the ICMP sequence number is the probe's, mod 2^16).
/// ICMPv6's checksum is the kernel's (raw ICMPv6 sockets always fill it).
fn send_icmp_probes(cfg: &Config, to: SocketAddr, stop: &AtomicBool) -> io::Result<Vec<ProbeSent>> {
    use linerate_core::wire::icmp::{Family, HEADER_LEN};
    let family = if to.is_ipv6() { Family::V6 } else { Family::V4 };
    let sock = sys::sock::icmp_raw_socket(to.is_ipv6())?;
    let to = SocketAddr::new(to.ip(), 0);
    let mut msg = vec![0u8; 1500 + HEADER_LEN];
    send_paced(cfg, stop, |seq, p| {
        let m = &mut msg[..HEADER_LEN + p.len()];
        m[0] = family.request_type();
        m[1] = 0;
        m[2..4].fill(0);
        m[4..6].copy_from_slice(&ICMP_IDENT.to_be_bytes());
        // The low 16 bits: ICMP's sequence number is 16 bits wide.
        m[6..8].copy_from_slice(&(seq as u16).to_be_bytes());
        m[HEADER_LEN..].copy_from_slice(p);
        if family == Family::V4 {
            let c = linerate_core::wire::testframe::internet_checksum(m);
            m[2..4].copy_from_slice(&c.to_be_bytes());
        }
        sys::sock::send_to(sock.as_raw_fd(), m, to).map(drop)
    })
}

/// TCP option bytes of a data segment between a and b: 12 when both hosts
/// have `net.ipv4.tcp_timestamps` on (the Linux default), else 0.
fn tcp_option_bytes(target: &Target) -> Result<u32, JourneyError> {
    let mut on = true;
    for ns in [&target.client_netns, &target.server_netns] {
        let v = netns::spawn_in(Some(ns), "lr-journey-sysctl", || {
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_timestamps")
        })?
        .join()
        .map_err(|_| JourneyError::Thread("sysctl"))??
        .map_err(socket_err("read net.ipv4.tcp_timestamps"))?;
        on &= v.trim() != "0";
    }
    Ok(if on {
        linerate_core::journey::TCP_TIMESTAMPS
    } else {
        0
    })
}

/// The TCP listener in host b: binds `port` (0: any), returns the port and
/// the thread, which accepts the sender's connection and reads the probes
/// from the stream (each carries its length, so reads that join or split
/// probes are cut back into them).
fn spawn_tcp_receiver(
    target: &Target,
    ip: IpAddr,
    port: u16,
    how: Receive,
    sent_all: Arc<AtomicBool>,
) -> Result<(u16, ReceiverThread), JourneyError> {
    let (tx, rx) = mpsc::channel();
    let h = netns::spawn_in(Some(&target.server_netns), "lr-journey-rx", move || {
        let listener = match TcpListener::bind((ip, port)) {
            Ok(l) => l,
            Err(e) => {
                let _ = tx.send(Err(e));
                return Ok(Vec::new());
            }
        };
        let _ = tx.send(listener.local_addr().map(|a| a.port()));
        receive_tcp(&listener, how, &sent_all)
    })?;
    let port = rx
        .recv()
        .map_err(|_| JourneyError::Thread("receiver"))?
        .map_err(socket_err("listen in host b"))?;
    Ok((port, h))
}

fn receive_tcp(
    listener: &TcpListener,
    how: Receive,
    sent_all: &AtomicBool,
) -> io::Result<Vec<Event>> {
    listener.set_nonblocking(true)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if sent_all.load(Ordering::Acquire) || std::time::Instant::now() > deadline {
                    return Ok(Vec::new());
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    };
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_millis(20)))?;
    let mut pending: Vec<u8> = Vec::new();
    let mut r = &stream;
    receive_until(
        how.count,
        sent_all,
        |b| r.read(b).map(|n| (n > 0).then_some(n)),
        |data, t, out| {
            pending.extend_from_slice(data);
            while let Some((seq, len)) = stream_probe(&pending) {
                out.push(Event::user(Point::UserRecv, t, seq, len as u32));
                pending.drain(..len);
            }
        },
    )
}

/// The first whole probe at the start of a TCP stream's bytes: its
/// sequence number and length (None: not all of it has come yet, or the
/// stream is not probes).
fn stream_probe(b: &[u8]) -> Option<(u64, usize)> {
    let seq = probe_seq(b)?;
    let len = u32::from_le_bytes(b.get(12..16)?.try_into().ok()?) as usize;
    (len >= 16 && b.len() >= len).then_some((seq, len))
}

/// The ICMP receiver in host a: a raw socket reading the echo replies to
/// the probes (matched by identifier and the probe's sequence number in
/// the payload).
fn spawn_icmp_receiver(
    target: &Target,
    v6: bool,
    how: Receive,
    sent_all: Arc<AtomicBool>,
) -> Result<ReceiverThread, JourneyError> {
    let (tx, rx) = mpsc::channel();
    let h = netns::spawn_in(Some(&target.client_netns), "lr-journey-rx", move || {
        let sock = match sys::sock::icmp_raw_socket(v6).and_then(|fd| {
            // A raw socket reads like a datagram socket; std's UdpSocket
            // only wraps recv(2) and SO_RCVTIMEO here.
            let s = UdpSocket::from(fd);
            s.set_read_timeout(Some(Duration::from_millis(20)))?;
            Ok(s)
        }) {
            Ok(s) => s,
            Err(e) => {
                let _ = tx.send(Err(e));
                return Ok(Vec::new());
            }
        };
        let _ = tx.send(Ok(()));
        receive_icmp(&sock, v6, how, &sent_all)
    })?;
    rx.recv()
        .map_err(|_| JourneyError::Thread("receiver"))?
        .map_err(socket_err("open a raw ICMP socket in host a"))?;
    Ok(h)
}

fn receive_icmp(
    sock: &UdpSocket,
    v6: bool,
    how: Receive,
    sent_all: &AtomicBool,
) -> io::Result<Vec<Event>> {
    use linerate_core::wire::icmp::{icmp_message, Family, HEADER_LEN};
    let family = if v6 { Family::V6 } else { Family::V4 };
    receive_until(
        how.count,
        sent_all,
        |b| sock.recv(b).map(Some),
        |data, t, out| {
            if let Ok(m) = icmp_message(data, family) {
                let ours = m.len() > HEADER_LEN
                    && m[0] == family.reply_type()
                    && m[4..6] == ICMP_IDENT.to_be_bytes();
                if let Some(seq) = probe_seq(&m[HEADER_LEN.min(m.len())..]).filter(|_| ours) {
                    out.push(Event::user(
                        Point::UserRecv,
                        t,
                        seq,
                        (m.len() - HEADER_LEN) as u32,
                    ));
                }
            }
        },
    )
}

/// UDP payload of the cost measurement's load.
const COST_DATAGRAM: usize = 1472;
/// One datagram in this many has a traced length.
const COST_TRACED_ONE_IN: u64 = 100;
/// The traced datagrams' payload (outside the load's lengths at every layer).
const COST_TRACED_PAYLOAD: usize = 1000;

/// Rounds of the cost measurement (each: `ns` untraced, then `ns` traced).
const COST_ROUNDS: u32 = 2;

/// UDP throughput from a to b for `ns`, without and then with the tracer
/// (one datagram in 100 of a traced length; every datagram still runs the
/// filters and the unfiltered skb tracepoints), [`COST_ROUNDS`] times; then,
/// with `tp_btf` programs, one more traced round with the kernel's BPF run
/// statistics on, for each program's runs and time ([`ProgramCosts`]).
fn measure_cost(
    fs: &Tracefs,
    set: &[Tracepoint],
    backend: Backend,
    target: &Target,
    ns: u64,
    stop: &AtomicBool,
) -> Result<Cost, JourneyError> {
    // Alternating rounds, the best of each kind: the host's other load
    // (noise) only ever lowers a round.
    let (mut untraced, mut traced) = (Rates::default(), Rates::default());
    // The round with the least CPU per datagram: other load only adds.
    let best = |a: Rates, b: Rates| {
        if a.sent_pps == 0.0 || b.cpu_ns_per_datagram < a.cpu_ns_per_datagram {
            b
        } else {
            a
        }
    };
    for _ in 0..COST_ROUNDS {
        untraced = best(untraced, blast(target, ns, None, stop)?.rates);
        traced = best(
            traced,
            blast(target, ns, Some((fs, set, backend, false)), stop)?.rates,
        );
    }
    let mut cost = Cost::new(
        COST_DATAGRAM as u32,
        COST_TRACED_ONE_IN as u32,
        ns,
        untraced,
        traced,
    );
    if backend != Backend::Perf && !stop.load(Ordering::Relaxed) {
        let b = blast(target, ns, Some((fs, set, backend, true)), stop)?;
        if !b.programs.is_empty() {
            let runs: Vec<(String, u64, u64, u64)> = b
                .programs
                .iter()
                .map(|(tp, s)| (tp.clone(), s.runs, s.run_time_ns, s.recursion_misses))
                .collect();
            // The floor named only where it was measured (the empty
            // program may not attach, or may not run).
            let floor = b.floor.filter(|f| f.runs > 0);
            let source = if floor.is_some() {
                format!("{PROGRAM_STATS_SOURCE}; {PROGRAM_STATS_FLOOR}")
            } else {
                format!(
                    "{PROGRAM_STATS_SOURCE}; no floor: the empty program on net/net_dev_queue \
                     was not attached or did not run"
                )
            };
            cost.programs = Some(ProgramCosts::new(
                source,
                b.sent,
                &runs,
                floor.map(|f| (f.runs, f.run_time_ns)),
                untraced.cpu_ns_per_datagram,
            ));
        }
    }
    Ok(cost)
}

/// How [`ProgramCosts`] are taken, for the result.
const PROGRAM_STATS_SOURCE: &str = "kernel BPF run statistics (BPF_ENABLE_STATS, \
    bpf_prog_info.run_cnt and run_time_ns: sched_clock around each program run) during one \
    more traced round, not one of the timed ones; the tracepoints' dispatch to the programs is \
    not in it; runs count every packet and softirq of the host at those tracepoints";

/// What the floor of [`ProgramCosts`] is, added to the source when it was
/// measured.
const PROGRAM_STATS_FLOOR: &str =
    "the floor is an empty program's time per run on net/net_dev_queue in that round";

/// One round of [`blast`].
struct Blast {
    rates: Rates,
    /// Datagrams sent.
    sent: u64,
    /// With statistics on: each program's tracepoint and run statistics.
    programs: Vec<(String, sys::bpf::RunStats)>,
    /// With statistics on: the empty program's run statistics.
    floor: Option<sys::bpf::RunStats>,
}

/// Datagrams/s sent by a and received in b while a sends back to back for
/// `ns`; traced with `trace` (the tracepoints, the backend, and whether the
/// kernel's BPF run statistics are on during the round).
fn blast(
    target: &Target,
    ns: u64,
    trace: Option<(&Tracefs, &[Tracepoint], Backend, bool)>,
    stop: &AtomicBool,
) -> Result<Blast, JourneyError> {
    let sock = {
        let ip = target.server_ip;
        netns::spawn_in(
            Some(&target.server_netns),
            "lr-journey-cost-rx",
            move || bind_receiver(ip.into(), 0, None),
        )?
        .join()
        .map_err(|_| JourneyError::Thread("cost receiver"))??
        .map_err(socket_err("bind the cost receiver"))?
    };
    let port = sock
        .local_addr()
        .map_err(socket_err("cost receiver"))?
        .port();
    // Kept open for the round: statistics stay on while it is. A kernel
    // that refuses them: no program statistics.
    let stats = match trace {
        Some((_, _, _, true)) => sys::bpf::enable_run_stats().ok(),
        _ => None,
    };
    // The statistics' own floor: an empty program on a tracepoint every
    // datagram passes once.
    let floor = match (&stats, trace) {
        (Some(_), Some((_, set, _, _))) => set
            .iter()
            .find(|t| t.point == Point::NetDevQueue)
            .and_then(|t| btf::EmptyProgram::attach(t).ok()),
        _ => None,
    };
    let mut tracer = match trace {
        Some((fs, set, backend, _)) => {
            let filters = Filters {
                len: (
                    COST_TRACED_PAYLOAD as u32,
                    COST_TRACED_PAYLOAD as u32 + L2_OVERHEAD + LEN_STEP * (LEN_SLOTS - 1),
                ),
                dport: port,
                // `set` is what the journey opened.
                all_events: true,
            };
            let mut t = Tracer::open_with(fs, set, filters, backend)?;
            t.enable()?;
            Some(t)
        }
        None => None,
    };
    let received = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let rx = {
        let (received, done) = (Arc::clone(&received), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 2048];
            while !done.load(Ordering::Relaxed) {
                if sock.recv(&mut buf).is_ok() {
                    received.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let to = SocketAddr::from((target.server_ip, port));
    let tx = netns::spawn_in(
        Some(&target.client_netns),
        "lr-journey-cost-tx",
        move || {
            let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
            sock.connect(to)?;
            let buf = vec![0u8; COST_DATAGRAM];
            let end = sys::clock::monotonic_ns() + ns;
            let cpu = || sys::sock::thread_cpu_ns().map(|(u, s)| u + s);
            let cpu0 = cpu()?;
            let (mut n, mut sent) = (0u64, 0u64);
            while sys::clock::monotonic_ns() < end {
                let len = if n % COST_TRACED_ONE_IN == 0 {
                    COST_TRACED_PAYLOAD
                } else {
                    COST_DATAGRAM
                };
                // A full queue (ENOBUFS) is part of the load; keep going.
                if sock.send(&buf[..len]).is_ok() {
                    sent += 1;
                }
                n += 1;
            }
            io::Result::Ok((sent, cpu()? - cpu0))
        },
    )?;
    while !tx.is_finished() {
        if let Some(t) = tracer.as_mut() {
            t.poll();
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let (sent, cpu_ns) = tx
        .join()
        .map_err(|_| JourneyError::Thread("cost sender"))??
        .map_err(socket_err("cost sender"))?;
    std::thread::sleep(Duration::from_millis(30));
    done.store(true, Ordering::Relaxed);
    rx.join()
        .map_err(|_| JourneyError::Thread("cost receiver"))?;
    let programs = match (&stats, &tracer) {
        (Some(_), Some(t)) => t.program_stats()?,
        _ => Vec::new(),
    };
    let floor = floor
        .map(|f| f.run_stats())
        .transpose()
        .map_err(|source| JourneyError::Btf { source })?;
    drop(tracer);
    drop(stats);
    let s = ns as f64 / 1e9;
    Ok(Blast {
        rates: Rates {
            sent_pps: sent as f64 / s,
            received_pps: received.load(Ordering::Relaxed) as f64 / s,
            cpu_ns_per_datagram: cpu_ns as f64 / sent.max(1) as f64,
        },
        sent,
        programs,
        floor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_payloads_carry_their_sequence_number() {
        let mut p = vec![0u8; 20];
        p[..4].copy_from_slice(MAGIC);
        p[4..12].copy_from_slice(&42u64.to_le_bytes());
        assert_eq!(probe_seq(&p), Some(42));
        assert_eq!(probe_seq(&p[..8]), None);
        p[0] = b'X';
        assert_eq!(probe_seq(&p), None);
    }

    #[test]
    fn a_tcp_stream_is_cut_back_into_probes() {
        let probe = |seq: u64, len: u32| {
            let mut p = vec![0u8; len as usize];
            p[..4].copy_from_slice(MAGIC);
            p[4..12].copy_from_slice(&seq.to_le_bytes());
            p[12..16].copy_from_slice(&len.to_le_bytes());
            p
        };
        let mut stream = probe(7, 100);
        stream.extend(probe(8, 105));
        assert_eq!(stream_probe(&stream), Some((7, 100)));
        assert_eq!(stream_probe(&stream[100..]), Some((8, 105)));
        // Not all of it has come yet.
        assert_eq!(stream_probe(&stream[100..150]), None);
        assert_eq!(stream_probe(&stream[..10]), None);
        // A length shorter than the header is not a probe.
        let mut bad = probe(1, 100);
        bad[12..16].copy_from_slice(&4u32.to_le_bytes());
        assert_eq!(stream_probe(&bad), None);
    }

    #[test]
    fn filters_read_as_the_kernel_wants_them() {
        let f = Filters {
            len: (100, 217),
            dport: 4000,
            all_events: false,
        };
        use linerate_core::journey::FilterKind;
        assert_eq!(f.text(FilterKind::Len).unwrap(), "len >= 100 && len <= 217");
        assert_eq!(f.text(FilterKind::Dport).unwrap(), "dport == 4000");
        assert_eq!(f.text(FilterKind::NetRx).unwrap(), "vec == 3");
        assert_eq!(f.text(FilterKind::None), None);
    }
}
