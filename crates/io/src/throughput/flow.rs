//! One flow on one thread: the send paths and the receive paths.
//!
//! Every flow thread measures itself: bytes and packets, intervals on
//! CLOCK_MONOTONIC, and its own CPU time (getrusage RUSAGE_THREAD), so CPU
//! per byte and per packet are the costs of exactly this flow's syscalls
//! (on veth and loopback they include the peer's receive softirq work that
//! runs inside the sender's syscall, as measured on this machine kind).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use linerate_core::pace::Pacer;
use linerate_core::stats::interval::IntervalSeries;
use linerate_core::throughput::model::{
    FlowDir, FlowReport, FlowRole, PacingReport, RecvPath, SendPath, ZeroCopyReport,
    AUTO_RECV_LOWAT,
};
use linerate_core::throughput::receiver::FlowReceiver;
use linerate_core::units::ByteCount;
use linerate_core::wire::probe::{Pattern, Repr, HEADER_LEN};

use super::net::{self, DataSock, NetError};
use crate::sys::sock;

/// Size of the `typical` path's application buffer of a single sending
/// flow: larger than this machine's caches (L3 up to 32–36 MiB on the hosts
/// we target), so each copy reads cold memory.
pub const TYPICAL_APP_BUFFER_BYTES: usize = 64 << 20;
/// The `typical` buffers of all sending flows of one session together stay
/// under this (each flow gets `TYPICAL_TOTAL_BYTES / senders`, at most
/// [`TYPICAL_APP_BUFFER_BYTES`]): together they still exceed the caches,
/// and a session's memory stays bounded.
pub const TYPICAL_TOTAL_BYTES: usize = 256 << 20;
/// Zero-copy buffers in flight stay under this many bytes per flow.
const ZC_BYTES: usize = 8 << 20;

/// The `typical` application buffer of one of `senders` sending flows.
pub fn typical_buffer_bytes(senders: usize) -> usize {
    (TYPICAL_TOTAL_BYTES / senders.max(1)).min(TYPICAL_APP_BUFFER_BYTES)
}
/// A TCP receiver's buffer, bytes: the default low-water mark
/// ([`AUTO_RECV_LOWAT`]), so one receive takes what queued while the
/// receiver slept. Measured on this machine kind (veth, one stream, 5
/// interleaved rounds under load, with a 128 KiB mark): with a 128 KiB
/// buffer the receiver's CPU per byte rose from 0.23–0.24 to 0.25–0.51 ns/B
/// (a receive per low-water mark, then a sleep with the rest queued).
const TCP_RECV_BYTES: usize = AUTO_RECV_LOWAT as usize;

/// What a TCP receiver's buffer is aligned to, bytes (a page).
const RECV_ALIGN: usize = 4096;

/// A zeroed buffer of `len` bytes that starts on a [`RECV_ALIGN`] boundary.
///
/// The kernel copies received segments into it (`rep movsb` on x86-64),
/// which on this machine kind (AMD EPYC) runs faster onto an aligned
/// destination than onto malloc's, 16 bytes past a page. Measured over a veth
/// pair beside iperf2, same-run A/B rounds of one build with and without the
/// alignment: 2 streams forward 1.121 against 1.027 (9 rounds) and 1.113
/// against 1.063 (11), 8 streams 1.023 against 0.996 (9). Aligning the
/// senders' buffers as well gave nothing (1.156 against 1.195, 9 rounds).
struct AlignedBuf {
    store: Vec<u8>,
    at: usize,
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize) -> Self {
        let store = vec![0u8; len + RECV_ALIGN];
        let at = store.as_ptr().align_offset(RECV_ALIGN).min(RECV_ALIGN);
        Self { store, at, len }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.store[self.at..self.at + self.len]
    }
}
/// Datagrams per sendmmsg/recvmmsg call and most segments per GSO send.
pub const BATCH: usize = 64;
/// Zero-copy buffers in flight before a sender waits for completions.
const ZC_BUFFERS: usize = 32;
/// How long a TCP sender waits, after its last write, for its data to be
/// sent and acknowledged, to say when that was and to count its segments
/// (else it reports neither, and the table estimates the segments).
const SEGMENTS_DRAIN: Duration = Duration::from_secs(3);
/// How often a blocked flow looks at its stop flag.
const POLL: Duration = Duration::from_millis(100);

/// Shared live state of one flow (for progress and for stopping).
#[derive(Debug, Default)]
pub struct FlowShared {
    /// Bytes so far (relaxed; for progress).
    pub bytes: AtomicU64,
    /// Set to stop the flow now (abort or end of drain).
    pub stop: AtomicBool,
    /// Receivers: the peer's sent-packet count, once known (u64::MAX: unknown).
    pub peer_sent: AtomicU64,
    /// Receivers: the peer stopped sending; end after a quiet period.
    pub drain: AtomicBool,
}

impl FlowShared {
    /// Fresh state.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            peer_sent: AtomicU64::new(u64::MAX),
            ..Self::default()
        })
    }
}

/// What one flow thread is asked to do.
#[derive(Debug)]
pub struct FlowJob {
    /// The socket.
    pub sock: DataSock,
    /// Session id (in every probe).
    pub session: u32,
    /// Flow id.
    pub flow: u16,
    /// Direction of the flow.
    pub direction: FlowDir,
    /// Datagram or block size, bytes.
    pub size: usize,
    /// Send or receive.
    pub role: FlowRole,
    /// Send path (senders).
    pub send_path: SendPath,
    /// Receive path (receivers).
    pub recv_path: RecvPath,
    /// Receivers compare the payload of one block or datagram in this many
    /// (1: every one).
    pub verify_one_in: u32,
    /// Receivers spin on non-blocking receives (never sleep).
    pub recv_spin: bool,
    /// TCP receivers: SO_RCVLOWAT to ask for, bytes.
    pub recv_lowat: Option<u32>,
    /// UDP receivers: nap this long whenever the socket is found empty
    /// (None: wait in the kernel, or spin).
    pub recv_nap: Option<Duration>,
    /// Paced rate, bit/s (senders).
    pub rate_bits_per_s: Option<u64>,
    /// Sending time (senders), ns.
    pub duration_ns: u64,
    /// Interval length, ns.
    pub interval_ns: u64,
    /// `typical` path: application buffer bytes ([`typical_buffer_bytes`]).
    pub typical_bytes: usize,
    /// Live state.
    pub shared: Arc<FlowShared>,
}

struct Meter {
    start_ns: u64,
    cpu0: (u64, u64),
    series: IntervalSeries,
    bytes: u64,
    packets: u64,
    last_ns: u64,
}

impl Meter {
    fn new(interval_ns: u64) -> Self {
        Self {
            start_ns: sock::monotonic_ns(),
            cpu0: sock::thread_cpu_ns().unwrap_or((0, 0)),
            series: IntervalSeries::new(interval_ns),
            bytes: 0,
            packets: 0,
            last_ns: 0,
        }
    }

    fn now(&self) -> u64 {
        sock::monotonic_ns().saturating_sub(self.start_ns)
    }

    fn add(&mut self, now: u64, bytes: u64, packets: u64, shared: &FlowShared) {
        self.bytes += bytes;
        self.packets += packets;
        self.last_ns = now;
        shared.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.series.sample(now, self.bytes, self.packets);
    }

    /// Nothing sent or received since the last `add`.
    fn tick(&mut self, now: u64) {
        self.series.idle(now, self.bytes, self.packets);
    }

    fn finish(self, job: &FlowJob, path: String) -> FlowReport {
        let cpu1 = sock::thread_cpu_ns().unwrap_or(self.cpu0);
        let end = self.last_ns.max(1);
        FlowReport {
            bytes: self.bytes,
            packets: self.packets,
            elapsed_ns: end,
            cpu_user_ns: cpu1.0.saturating_sub(self.cpu0.0),
            cpu_sys_ns: cpu1.1.saturating_sub(self.cpu0.1),
            intervals: self.series.finish(end, self.bytes, self.packets),
            ..FlowReport::new(job.flow, job.direction, job.role, path)
        }
    }
}

fn transient(e: &io::Error) -> bool {
    sock::timed_out(e) || e.kind() == io::ErrorKind::Interrupted
}

/// Runs a flow to its end and reports it. Never panics on the network.
pub fn run(job: FlowJob) -> FlowReport {
    let _ = net::set_timeouts(&job.sock, POLL);
    let sends = job.role == FlowRole::Sender;
    // The data connection carried its hello before the flow: count from here.
    // A receiver may find data already queued (the peer started sending
    // before this thread ran): its segments are in the count read now but
    // its bytes will be received, so they are added back below.
    let segs0 = match &job.sock {
        DataSock::Tcp(s) => net::tcp_data_segs(s, sends),
        DataSock::Udp(_) => None,
    };
    let queued0 = match &job.sock {
        DataSock::Tcp(s) if !sends => sock::queued_in(s).unwrap_or(0),
        _ => 0,
    };
    let mut report = match job.role {
        FlowRole::Sender => run_sender(&job),
        FlowRole::Receiver => run_receiver(&job),
    };
    if let DataSock::Tcp(s) = &job.sock {
        let (mss, retrans) = net::tcp_facts(s);
        report.mss_bytes = mss;
        if sends {
            report.retransmits = retrans;
        }
        // A sender's segments are counted once its last writes have all
        // left and been acknowledged (run_sender waited for that).
        let out = !sends || report.acked_ns.is_some();
        // Bytes queued before the first count came in segments of at most
        // the MSS: at least this many (the count stays a lower bound, and
        // bytes per segment never exceed the MSS).
        let early = match mss {
            Some(m) if m > 0 => queued0.div_ceil(m as usize) as u64,
            _ => 0,
        };
        report.tcp_segments = match (segs0, net::tcp_data_segs(s, sends).filter(|_| out)) {
            // 32-bit kernel counters.
            (Some(a), Some(b)) => Some(u64::from(b.wrapping_sub(a)) + early),
            _ => None,
        };
    }
    report
}

struct SendState<'a> {
    job: &'a FlowJob,
    meter: Meter,
    pacer: Option<Pacer>,
    seq: u64,
    deadline: u64,
}

impl SendState<'_> {
    /// Starts the flow's clock, CPU time and pacer now: after a send path's
    /// set-up (the typical path fills a 64 MiB application buffer first,
    /// which on a loaded host can take longer than a short test), so the
    /// set-up counts neither in the flow's time nor in its CPU per byte.
    fn begin(&mut self) {
        self.meter = Meter::new(self.job.interval_ns);
        self.pacer = self
            .job
            .rate_bits_per_s
            .map(|r| Pacer::new(r, self.meter.start_ns));
    }

    /// Waits for the pacer; false when the flow must end.
    fn ready(&mut self) -> bool {
        loop {
            let now = self.meter.now();
            if now >= self.deadline || self.job.shared.stop.load(Ordering::Relaxed) {
                return false;
            }
            let Some(p) = self.pacer.as_mut() else {
                return true;
            };
            let wait = p.wait_ns(now + self.meter.start_ns);
            if wait == 0 {
                return true;
            }
            let left = self.deadline - now;
            std::thread::sleep(Duration::from_nanos(wait.min(left).min(50_000_000)));
            self.meter.tick(self.meter.now());
        }
    }

    fn sent(&mut self, bytes: usize, packets: u64) {
        let now = self.meter.now();
        self.meter.add(now, bytes as u64, packets, &self.job.shared);
        if let Some(p) = self.pacer.as_mut() {
            p.sent(bytes as u64);
        }
    }

    fn header(&self, seq: u64) -> Repr {
        Repr {
            session: self.job.session,
            flow: self.job.flow,
            seq,
            send_ns_lo32: sock::monotonic_ns() as u32,
        }
    }
}

/// What became of one send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// All of it went.
    Yes,
    /// UDP: the kernel dropped it locally (full qdisc, ENOBUFS) or refused
    /// it (ICMP port unreachable from a receiver not yet reading): not
    /// counted as sent, its sequence number is reused.
    Dropped,
    /// The flow must end now.
    Stop,
}

/// Writes all of `buf` on a TCP socket (or one UDP datagram), retrying on
/// timeouts while the flow may run.
fn send_all(st: &mut SendState<'_>, buf: &[u8], flags: i32) -> io::Result<Sent> {
    let fd = st.job.sock.fd();
    let tcp = st.job.sock.is_tcp();
    let mut off = 0;
    while off < buf.len() {
        match sock::send(fd, &buf[off..], flags) {
            Ok(n) => {
                off += n;
                if !tcp {
                    break;
                }
            }
            Err(e) if transient(&e) => {
                if st.job.shared.stop.load(Ordering::Relaxed) {
                    return Ok(Sent::Stop);
                }
                // Past the deadline, a TCP block is still finished so the
                // receiver sees whole blocks; give up only on stop.
            }
            Err(e)
                if !tcp
                    && (e.raw_os_error() == Some(libc::ENOBUFS)
                        || e.raw_os_error() == Some(libc::ECONNREFUSED)) =>
            {
                return Ok(Sent::Dropped);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Sent::Yes)
}

fn run_sender(job: &FlowJob) -> FlowReport {
    let meter = Meter::new(job.interval_ns);
    let pacer = job.rate_bits_per_s.map(|r| Pacer::new(r, meter.start_ns));
    let mut st = SendState {
        job,
        meter,
        pacer,
        seq: 0,
        deadline: job.duration_ns,
    };
    // Each path fills its buffers from the pattern, then drops it (the
    // ideal path writes it straight into its one send buffer: a block-sized
    // pattern freed would stay resident in the thread's malloc arena).
    let pattern = || Pattern::new(job.session, job.flow, job.size - HEADER_LEN);
    let mut zc = None;
    let (path, result) = match job.send_path {
        SendPath::Ideal => ("ideal".to_string(), send_ideal(&mut st)),
        SendPath::Typical => (
            format!(
                "typical ({} MiB application buffer)",
                job.typical_bytes >> 20
            ),
            send_typical(&mut st, pattern()),
        ),
        SendPath::Zerocopy => {
            let mut z = ZeroCopyReport::default();
            let r = send_zerocopy(&mut st, pattern(), &mut z);
            zc = Some(z);
            ("zerocopy".to_string(), r)
        }
        SendPath::Sendfile => (
            "sendfile (memfd)".to_string(),
            send_sendfile(&mut st, pattern()),
        ),
        SendPath::Mmsg => (
            format!("mmsg (sendmmsg x{BATCH})"),
            send_mmsg(&mut st, pattern()),
        ),
        SendPath::Gso => (
            "gso (UDP_SEGMENT)".to_string(),
            send_gso(&mut st, pattern()),
        ),
    };
    if let DataSock::Tcp(s) = &job.sock {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let pacer = st.pacer.take();
    let start_ns = st.meter.start_ns;
    let mut report = st.meter.finish(job, path);
    // After the flow's CPU time is taken: a TCP sender's last writes may
    // still sit in its socket, so it also says when they had all been sent
    // and acknowledged.
    if let DataSock::Tcp(s) = &job.sock {
        if net::wait_all_acked(s, SEGMENTS_DRAIN, &job.shared.stop) {
            report.acked_ns = Some(sock::monotonic_ns().saturating_sub(start_ns));
        }
    }
    report.zerocopy = zc;
    if let Some(p) = pacer {
        let achieved = report.bytes_per_s() * 8.0;
        let asked = p.rate_bits_per_s() as f64;
        report.pacing = Some(PacingReport {
            asked_bits_per_s: asked,
            achieved_bits_per_s: achieved,
            fell_behind: achieved < asked * 0.99,
        });
    }
    if let Err(e) = result {
        report.error = Some(e.to_string());
    }
    report
}

fn io_err(call: &str) -> impl Fn(io::Error) -> NetError + '_ {
    move |e| NetError::call(call, e)
}

fn send_ideal(st: &mut SendState<'_>) -> Result<(), NetError> {
    let mut buf = vec![0u8; st.job.size];
    st.header(0)
        .emit(&mut buf)
        .map_err(|e| NetError::call("probe", io::Error::other(e)))?;
    Pattern::write(st.job.session, st.job.flow, &mut buf[HEADER_LEN..]);
    while st.ready() {
        let seq = st.seq;
        let h = st.header(seq);
        let _ = h.emit(&mut buf);
        match send_all(st, &buf, 0).map_err(io_err("send"))? {
            Sent::Yes => {}
            Sent::Dropped => continue,
            Sent::Stop => break,
        }
        st.seq += 1;
        st.sent(buf.len(), 1);
    }
    Ok(())
}

fn send_typical(st: &mut SendState<'_>, pattern: Pattern) -> Result<(), NetError> {
    let payload = st.job.size - HEADER_LEN;
    let slots = (st.job.typical_bytes / payload.max(1)).max(1);
    let mut app = Vec::with_capacity(slots * payload);
    for _ in 0..slots {
        app.extend_from_slice(pattern.bytes());
    }
    drop(pattern);
    let mut buf = vec![0u8; st.job.size];
    let mut slot = 0;
    st.begin();
    while st.ready() {
        let from = &app[slot * payload..(slot + 1) * payload];
        buf[HEADER_LEN..].copy_from_slice(from);
        slot = (slot + 1) % slots;
        let h = st.header(st.seq);
        let _ = h.emit(&mut buf);
        match send_all(st, &buf, 0).map_err(io_err("send"))? {
            Sent::Yes => {}
            Sent::Dropped => continue,
            Sent::Stop => break,
        }
        st.seq += 1;
        st.sent(buf.len(), 1);
    }
    Ok(())
}

fn send_sendfile(st: &mut SendState<'_>, pattern: Pattern) -> Result<(), NetError> {
    let file: OwnedFd = net::memfd(pattern.bytes())?;
    drop(pattern);
    let fd = st.job.sock.fd();
    let payload = st.job.size - HEADER_LEN;
    let mut head = [0u8; HEADER_LEN];
    'outer: while st.ready() {
        let h = st.header(st.seq);
        let _ = h.emit(&mut head);
        if send_all(st, &head, libc::MSG_MORE).map_err(io_err("send"))? != Sent::Yes {
            break;
        }
        let mut off = 0;
        while off < payload {
            match sock::sendfile(fd, &file, off as u64, payload - off) {
                Ok(0) => {
                    return Err(NetError::call(
                        "sendfile",
                        io::Error::from(io::ErrorKind::WriteZero),
                    ))
                }
                Ok(n) => off += n,
                Err(e) if transient(&e) => {
                    if st.job.shared.stop.load(Ordering::Relaxed) {
                        break 'outer;
                    }
                }
                Err(e) => return Err(NetError::call("sendfile from memfd", e)),
            }
        }
        st.seq += 1;
        st.sent(st.job.size, 1);
    }
    Ok(())
}

fn send_mmsg(st: &mut SendState<'_>, pattern: Pattern) -> Result<(), NetError> {
    let size = st.job.size;
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; size]).collect();
    for b in &mut bufs {
        let _ = pattern.fill_probe(&st.header(0), b);
    }
    drop(pattern);
    let fd = st.job.sock.fd();
    while st.ready() {
        let base = st.seq;
        let h = st.header(base);
        for (i, b) in bufs.iter_mut().enumerate() {
            let _ = Repr {
                seq: base + i as u64,
                ..h
            }
            .emit(b);
        }
        let refs: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
        match sock::sendmmsg(fd, &refs) {
            Ok(n) => {
                st.seq += n as u64;
                st.sent(n * size, n as u64);
            }
            Err(e)
                if transient(&e)
                    || e.raw_os_error() == Some(libc::ENOBUFS)
                    || e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
            Err(e) => return Err(NetError::call("sendmmsg", e)),
        }
    }
    Ok(())
}

fn send_gso(st: &mut SendState<'_>, pattern: Pattern) -> Result<(), NetError> {
    let size = st.job.size;
    let segs = (65_000 / size).clamp(1, BATCH);
    let seg = u16::try_from(size).map_err(|_| NetError::Option {
        option: format!("UDP_SEGMENT={size}"),
        error: io::Error::from(io::ErrorKind::InvalidInput),
    })?;
    let mut buf = vec![0u8; segs * size];
    for c in buf.chunks_mut(size) {
        let _ = pattern.fill_probe(&st.header(0), c);
    }
    drop(pattern);
    let fd = st.job.sock.fd();
    while st.ready() {
        let base = st.seq;
        let h = st.header(base);
        for (i, c) in buf.chunks_mut(size).enumerate() {
            let _ = Repr {
                seq: base + i as u64,
                ..h
            }
            .emit(c);
        }
        match sock::send_gso(fd, &buf, seg) {
            Ok(n) => {
                let k = n / size;
                st.seq += k as u64;
                st.sent(k * size, k as u64);
            }
            Err(e)
                if transient(&e)
                    || e.raw_os_error() == Some(libc::ENOBUFS)
                    || e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
            Err(e) => {
                return Err(NetError::Option {
                    option: format!("UDP_SEGMENT={size} ({segs} segments per send)"),
                    error: e,
                })
            }
        }
    }
    Ok(())
}

fn send_zerocopy(
    st: &mut SendState<'_>,
    pattern: Pattern,
    z: &mut ZeroCopyReport,
) -> Result<(), NetError> {
    let fd = st.job.sock.fd();
    sock::set_int(&st.job.sock, libc::SOL_SOCKET, sock::SO_ZEROCOPY, 1).map_err(|error| {
        NetError::Option {
            option: "SO_ZEROCOPY=1 (MSG_ZEROCOPY needs Linux 4.14 for TCP, 5.0 for UDP)".into(),
            error,
        }
    })?;
    let size = st.job.size;
    let nbuf = (ZC_BYTES / size.max(1)).clamp(2, ZC_BUFFERS);
    let mut bufs: Vec<Vec<u8>> = (0..nbuf).map(|_| vec![0u8; size]).collect();
    for b in &mut bufs {
        let _ = pattern.fill_probe(&st.header(0), b);
    }
    drop(pattern);
    // The id of the last send made from each buffer (None: never used).
    let mut last_id: Vec<Option<u32>> = vec![None; nbuf];
    let mut next_id: u32 = 0;
    // All ids below `done_below` have completed; `ranges` holds completed
    // ranges above it.
    let mut done_below: u32 = 0;
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    let mut comps = Vec::new();
    let mut drain = |block_ms: i32,
                     done_below: &mut u32,
                     ranges: &mut Vec<(u32, u32)>,
                     z: &mut ZeroCopyReport|
     -> Result<(), NetError> {
        if block_ms > 0 {
            let _ = sock::poll_one(fd, libc::POLLERR, block_ms);
        }
        comps.clear();
        sock::zerocopy_completions(fd, &mut comps).map_err(io_err("recvmsg(MSG_ERRQUEUE)"))?;
        for c in &comps {
            let n = u64::from(c.hi.wrapping_sub(c.lo)) + 1;
            z.completed_sends += n;
            if c.copied {
                z.copied_sends += n;
            }
            ranges.push((c.lo, c.hi));
        }
        loop {
            let before = *done_below;
            ranges.retain(|&(lo, hi)| {
                if lo <= *done_below {
                    *done_below = (*done_below).max(hi.wrapping_add(1));
                    false
                } else {
                    true
                }
            });
            if *done_below == before {
                break;
            }
        }
        Ok(())
    };
    let mut i = 0;
    'outer: while st.ready() {
        // Wait until buffer i's last send completed.
        while let Some(id) = last_id[i] {
            if id < done_below {
                break;
            }
            if st.job.shared.stop.load(Ordering::Relaxed) {
                break 'outer;
            }
            drain(100, &mut done_below, &mut ranges, z)?;
        }
        let h = st.header(st.seq);
        let _ = h.emit(&mut bufs[i]);
        let mut off = 0;
        while off < size {
            match sock::send(fd, &bufs[i][off..], libc::MSG_ZEROCOPY) {
                Ok(n) => {
                    off += n;
                    last_id[i] = Some(next_id);
                    next_id = next_id.wrapping_add(1);
                    z.zerocopy_sends += 1;
                    if !st.job.sock.is_tcp() {
                        break;
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    // optmem exhausted by pending notifications: reap some.
                    drain(10, &mut done_below, &mut ranges, z)?;
                }
                Err(e)
                    if transient(&e)
                        || (!st.job.sock.is_tcp()
                            && e.raw_os_error() == Some(libc::ECONNREFUSED)) =>
                {
                    if st.job.shared.stop.load(Ordering::Relaxed) {
                        break 'outer;
                    }
                    if !st.job.sock.is_tcp() {
                        break;
                    }
                }
                Err(e) => return Err(NetError::call("send(MSG_ZEROCOPY)", e)),
            }
        }
        if off < size {
            // UDP datagram not sent: not counted, its number reused.
            continue;
        }
        st.seq += 1;
        st.sent(size, 1);
        i = (i + 1) % nbuf;
        drain(0, &mut done_below, &mut ranges, z)?;
    }
    // Collect the last completions (bounded).
    let until = sock::monotonic_ns() + 1_000_000_000;
    while done_below < next_id && sock::monotonic_ns() < until {
        drain(50, &mut done_below, &mut ranges, z)?;
    }
    Ok(())
}

fn run_receiver(job: &FlowJob) -> FlowReport {
    let mut meter = Meter::new(job.interval_ns);
    let rx = FlowReceiver::new(job.session, job.flow, job.size);
    let mut rx = if job.recv_path == RecvPath::Trunc {
        rx.headers_only()
    } else {
        rx.sampling(job.verify_one_in)
    };
    let drops0 = sock::socket_drops(&job.sock).ok();
    let lowat = match (job.sock.is_tcp(), job.recv_lowat) {
        (true, Some(b)) => match net::set_recv_lowat(&job.sock, b) {
            Ok(got) => Some(got),
            Err(e) => {
                let mut report = meter.finish(job, job.recv_path.to_string());
                report.error = Some(e.to_string());
                return report;
            }
        },
        _ => None,
    };
    let (path, result) = match (&job.sock, job.recv_path) {
        (DataSock::Tcp(_), RecvPath::Trunc) => (
            "trunc (MSG_TRUNC: headers only)".to_string(),
            recv_tcp_trunc(job, &mut meter, &mut rx),
        ),
        (DataSock::Tcp(_), _) => ("copy".to_string(), recv_tcp_copy(job, &mut meter, &mut rx)),
        (DataSock::Udp(_), RecvPath::Copy) => (
            "copy".to_string(),
            recv_udp(job, &mut meter, &mut rx, Udp::Copy),
        ),
        (DataSock::Udp(_), RecvPath::Trunc) => (
            "trunc (MSG_TRUNC: headers only)".to_string(),
            recv_udp(job, &mut meter, &mut rx, Udp::Trunc),
        ),
        (DataSock::Udp(_), RecvPath::Mmsg) => (
            format!("mmsg (recvmmsg x{BATCH})"),
            recv_udp(job, &mut meter, &mut rx, Udp::Mmsg),
        ),
        (DataSock::Udp(_), RecvPath::Gro) => (
            "gro (UDP_GRO)".to_string(),
            recv_udp(job, &mut meter, &mut rx, Udp::Gro),
        ),
    };
    let peer = job.shared.peer_sent.load(Ordering::Relaxed);
    let nap = nap_of(job);
    let path = if job.recv_spin {
        format!("{path}, spinning (MSG_DONTWAIT, never sleeps)")
    } else if let Some(n) = nap {
        format!("{path}, naps {} µs when empty", n.as_micros())
    } else {
        path
    };
    let path = match lowat {
        Some(b) => format!("{path}, rcvlowat {}", ByteCount::new(u64::from(b))),
        None => path,
    };
    let path = match net::rcvbuf(&job.sock) {
        Some(b) => format!("{path}, rcvbuf {} KiB", b >> 10),
        None => path,
    };
    let mut report = meter.finish(job, path);
    report.recv_lowat_bytes = lowat;
    report.recv_nap_us = nap.map(|n| u32::try_from(n.as_micros()).unwrap_or(u32::MAX));
    report.socket_drops = match (drops0, sock::socket_drops(&job.sock).ok()) {
        // sk_drops is a wrapping 32-bit counter.
        (Some(a), Some(b)) => Some(u64::from(b.wrapping_sub(a))),
        _ => None,
    };
    report.recv = Some(rx.counts((peer != u64::MAX).then_some(peer)));
    report.verification = rx.verification();
    report.bytes = rx.bytes();
    report.packets = rx.packets();
    if let Err(e) = result {
        report.error = Some(e.to_string());
    } else if rx.partial_block_bytes() > 0 {
        report.error = Some(format!(
            "stream ended inside a block ({} of {} bytes)",
            rx.partial_block_bytes(),
            job.size
        ));
    }
    report
}

/// Brings the meter up to the receiver's counts.
fn catch_up(meter: &mut Meter, rx: &FlowReceiver, shared: &FlowShared) {
    let now = meter.now();
    let db = rx.bytes().saturating_sub(meter.bytes);
    let dp = rx.packets().saturating_sub(meter.packets);
    meter.add(now, db, dp, shared);
}

/// How a receiver waits for data:
/// - asleep in the kernel until data or the receive timeout (one poll
///   period): every datagram that finds it asleep costs a wake-up, paid on
///   veth and loopback by the sender inside its own send;
/// - spinning on non-blocking receives (`recv_spin`): never sleeps, so no
///   wake-ups, at the cost of a whole CPU;
/// - napping (`recv_nap`, UDP): non-blocking receives until the socket is
///   empty, then a sleep of the nap's length during which datagrams queue
///   without waking anyone; after [`NAP_ACTIVE`] without data it waits in
///   the kernel again (one wake-up when traffic resumes).
struct Waiter {
    spin: bool,
    nap: Option<Duration>,
    fd: libc::c_int,
    /// Empty receives since the last data (spinning).
    empty: u32,
    /// Meter time of the first empty receive after data, ns.
    empty_since: Option<u64>,
}

/// A napping receiver keeps napping this long after its last data, then
/// waits in the kernel.
const NAP_ACTIVE: Duration = Duration::from_millis(20);

/// The nap a receiver really takes: UDP only, never when spinning.
fn nap_of(job: &FlowJob) -> Option<Duration> {
    job.recv_nap
        .filter(|_| !job.recv_spin && !job.sock.is_tcp())
}

impl Waiter {
    fn new(job: &FlowJob) -> Self {
        Self {
            spin: job.recv_spin,
            nap: nap_of(job),
            fd: job.sock.fd(),
            empty: 0,
            empty_since: None,
        }
    }

    /// Flags for the receive call.
    fn flags(&self) -> libc::c_int {
        if self.spin || self.nap.is_some() {
            libc::MSG_DONTWAIT
        } else {
            0
        }
    }

    fn data(&mut self) {
        self.empty = 0;
        self.empty_since = None;
    }

    /// After a receive that found nothing: true when a whole poll period
    /// has passed without data (the receive timed out, or spinning found
    /// nothing for that long, or a napping receiver's wait in the kernel
    /// timed out). The meter's intervals are ticked here (spinning: at most
    /// every 1,024 spins).
    fn idle(&mut self, meter: &mut Meter) -> bool {
        if let Some(nap) = self.nap {
            let now = meter.now();
            meter.tick(now);
            let since = *self.empty_since.get_or_insert(now);
            if now.saturating_sub(since) < NAP_ACTIVE.as_nanos() as u64 {
                std::thread::sleep(nap);
                return false;
            }
            // Quiet: wait in the kernel for the next datagram (or a poll
            // period), then receive without blocking again.
            return !sock::poll_readable(self.fd, POLL).unwrap_or(false);
        }
        if !self.spin {
            meter.tick(meter.now());
            return true;
        }
        self.empty = self.empty.wrapping_add(1);
        if self.empty > 1 && !self.empty.is_multiple_of(1024) {
            std::hint::spin_loop();
            return false;
        }
        let now = meter.now();
        meter.tick(now);
        let since = *self.empty_since.get_or_insert(now);
        now.saturating_sub(since) >= POLL.as_nanos() as u64
    }
}

/// Whether a receiver that saw no data for one poll period should end.
fn quiet_end(job: &FlowJob, packets: u64) -> bool {
    if job.shared.stop.load(Ordering::Relaxed) {
        return true;
    }
    let peer = job.shared.peer_sent.load(Ordering::Relaxed);
    job.shared.drain.load(Ordering::Relaxed) || (peer != u64::MAX && packets >= peer)
}

fn recv_tcp_copy(job: &FlowJob, meter: &mut Meter, rx: &mut FlowReceiver) -> Result<(), NetError> {
    let mut store = AlignedBuf::new(TCP_RECV_BYTES);
    let buf = store.as_mut();
    let fd = job.sock.fd();
    let mut wait = Waiter::new(job);
    loop {
        match sock::recv(fd, buf, wait.flags()) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                wait.data();
                rx.stream(&buf[..n]);
                catch_up(meter, rx, &job.shared);
            }
            Err(e) if transient(&e) => {
                if job.shared.stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                wait.idle(meter);
            }
            Err(e) => return Err(NetError::call("recv (TCP)", e)),
        }
    }
}

fn recv_tcp_trunc(job: &FlowJob, meter: &mut Meter, rx: &mut FlowReceiver) -> Result<(), NetError> {
    let mut buf = [0u8; HEADER_LEN];
    let fd = job.sock.fd();
    let mut wait = Waiter::new(job);
    loop {
        let head = rx.header_remaining();
        let r = if head > 0 {
            sock::recv(fd, &mut buf[..head], wait.flags())
        } else {
            sock::tcp_discard(fd, rx.payload_remaining().min(1 << 20), wait.flags())
        };
        match r {
            Ok(0) => return Ok(()),
            Ok(n) => {
                wait.data();
                if head > 0 {
                    rx.stream(&buf[..n.min(head)]);
                } else {
                    rx.skip_payload(n);
                }
                catch_up(meter, rx, &job.shared);
            }
            Err(e) if transient(&e) => {
                if job.shared.stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                wait.idle(meter);
            }
            Err(e) => return Err(NetError::call("recv(MSG_TRUNC) (TCP)", e)),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Udp {
    Copy,
    Trunc,
    Mmsg,
    Gro,
}

fn recv_udp(
    job: &FlowJob,
    meter: &mut Meter,
    rx: &mut FlowReceiver,
    mode: Udp,
) -> Result<(), NetError> {
    let fd = job.sock.fd();
    if mode == Udp::Gro {
        sock::set_int(&job.sock, libc::SOL_UDP, libc::UDP_GRO, 1).map_err(|error| {
            NetError::Option {
                option: "UDP_GRO=1 (Linux 5.0+)".into(),
                error,
            }
        })?;
    }
    let mut buf = vec![0u8; 65_536];
    let slot = (job.size + 1).max(HEADER_LEN);
    let mut bufs: Vec<Vec<u8>> = if mode == Udp::Mmsg {
        (0..BATCH).map(|_| vec![0u8; slot]).collect()
    } else {
        Vec::new()
    };
    let mut lens = vec![0usize; BATCH];
    let mut wait = Waiter::new(job);
    let flags = wait.flags();
    loop {
        if job.shared.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let peer = job.shared.peer_sent.load(Ordering::Relaxed);
        if peer != u64::MAX && rx.packets() >= peer {
            return Ok(());
        }
        let r: io::Result<()> = match mode {
            Udp::Copy => sock::recv(fd, &mut buf, flags).map(|n| rx.datagram(&buf[..n])),
            Udp::Trunc => sock::recv(fd, &mut buf[..HEADER_LEN], libc::MSG_TRUNC | flags)
                .map(|n| rx.datagram_truncated(&buf[..n.min(HEADER_LEN)], n)),
            Udp::Mmsg => sock::recvmmsg(fd, &mut bufs, &mut lens, libc::MSG_WAITFORONE | flags)
                .map(|k| {
                    for (b, &l) in bufs.iter().zip(&lens).take(k) {
                        rx.datagram(&b[..l.min(b.len())]);
                    }
                }),
            Udp::Gro => sock::recv_gro(fd, &mut buf, flags).map(|(n, seg)| match seg {
                Some(s) => buf[..n].chunks(s).for_each(|d| rx.datagram(d)),
                None => rx.datagram(&buf[..n]),
            }),
        };
        match r {
            Ok(()) => {
                wait.data();
                catch_up(meter, rx, &job.shared);
            }
            Err(e) if transient(&e) => {
                if wait.idle(meter) && quiet_end(job, rx.packets()) {
                    return Ok(());
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
            Err(e) => return Err(NetError::call("recv (UDP)", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receive_buffers_start_on_a_page_and_hold_their_length() {
        for len in [1, 4096, TCP_RECV_BYTES, TCP_RECV_BYTES + 7] {
            let mut b = AlignedBuf::new(len);
            let s = b.as_mut();
            assert_eq!(s.len(), len);
            assert_eq!(s.as_ptr() as usize % RECV_ALIGN, 0, "{len}");
            assert!(s.iter().all(|&x| x == 0));
        }
    }
}
