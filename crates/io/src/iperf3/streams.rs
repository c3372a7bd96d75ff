//! The data streams of an iperf3 session, either end: one thread per
//! stream, sending (TCP blocks, or UDP datagrams with iperf3's header,
//! paced by `linerate_core::pace::Pacer` when a rate is asked) or receiving
//! (counting bytes; UDP: loss, reordering and jitter as iperf3 counts them).
//!
//! The payload is not linerate's probe format: an iperf3 peer sends and
//! expects its own (UDP: its 12/16-byte header, TCP: any bytes), so these
//! flows are separate from `throughput::flow`, which verifies probes.
//!
//! Clocks: elapsed times are CLOCK_MONOTONIC; UDP send stamps and arrival
//! times (jitter) are CLOCK_REALTIME, as iperf3 uses them (arrivals: the
//! kernel's software receive stamp, SO_TIMESTAMPING, else read when the
//! datagram is); CPU time is getrusage(RUSAGE_THREAD) of each stream's
//! thread.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use linerate_core::pace::Pacer;
use linerate_core::stats::interval::Interval;
use linerate_core::wire::iperf3::params::{Params, Transport};
use linerate_core::wire::iperf3::{errno, UdpCounts, UdpHeader};

use crate::sys::{sock, timestamping};
use crate::throughput::net::DataSock;

/// How often a blocked stream looks at its stop flag.
const POLL: Duration = Duration::from_millis(100);

/// What every stream of a session does, from the parameters.
#[derive(Debug, Clone)]
pub(crate) struct StreamCfg {
    /// Block (TCP) or datagram (UDP) size, bytes.
    pub(crate) len: usize,
    /// Pace each sending stream to this rate, bit/s (0: as fast as it goes).
    pub(crate) rate_bits_per_s: u64,
    /// UDP datagrams.
    pub(crate) udp: bool,
    /// 64-bit UDP sequence numbers.
    pub(crate) wide: bool,
    /// `--repeating-payload`: "0123456789" repeated instead of random bytes.
    pub(crate) repeating: bool,
    /// `-Z`: TCP senders use sendfile from a memfd.
    pub(crate) zerocopy: bool,
    /// `--skip-rx-copy`: TCP receivers discard with MSG_TRUNC.
    pub(crate) skip_rx_copy: bool,
    /// Seconds not counted at the start (`-O`), ns.
    pub(crate) omit_ns: u64,
    /// Bytes to send over all streams (`-n`), 0: by time.
    pub(crate) num_bytes: u64,
    /// Blocks to send over all streams (`-k`), 0: by time.
    pub(crate) blockcount: u64,
    /// Reporting interval, ns (0: no intervals).
    pub(crate) interval_ns: u64,
    /// TCP receivers' SO_RCVLOWAT (None: the kernel's, woken per arrival;
    /// a linerate client passes its own, an iperf3 session's server keeps
    /// the kernel's).
    pub(crate) recv_lowat: Option<u32>,
}

impl StreamCfg {
    /// The configuration the parameters ask for.
    pub(crate) fn of(p: &Params) -> Self {
        Self {
            len: p.len as usize,
            rate_bits_per_s: p.bandwidth,
            udp: p.transport == Transport::Udp,
            wide: p.udp_counters_64bit,
            repeating: p.repeating_payload,
            zerocopy: p.zerocopy,
            skip_rx_copy: p.skip_rx_copy,
            omit_ns: u64::from(p.omit_s) * 1_000_000_000,
            num_bytes: p.num_bytes,
            blockcount: p.blockcount,
            interval_ns: 1_000_000_000,
            recv_lowat: None,
        }
    }
}

/// Session-wide live state of the streams.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Set to stop every stream now.
    pub(crate) stop: AtomicBool,
    /// Set to stop the senders only (the test's time is up; receivers go
    /// on until the peer closes or `stop`).
    pub(crate) stop_senders: AtomicBool,
    /// Bytes sent by this end's senders.
    pub(crate) sent_bytes: AtomicU64,
    /// Blocks (datagrams) sent by this end's senders.
    pub(crate) sent_blocks: AtomicU64,
    /// Bytes received by this end's receivers.
    pub(crate) recv_bytes: AtomicU64,
    /// When the streams were told to stop (CLOCK_MONOTONIC ns, 0: not
    /// yet): a stream's time ends there, not when its blocked call returns.
    pub(crate) stopped_at_ns: AtomicU64,
}

/// What one stream did.
#[derive(Debug, Clone, Default)]
pub(crate) struct StreamOutcome {
    /// Stream id (1, 3, 4, …).
    pub(crate) id: i64,
    /// This end sent on it.
    pub(crate) sender: bool,
    /// Bytes after the omitted seconds.
    pub(crate) bytes: u64,
    /// Datagrams (UDP senders: sent after the omitted seconds) or blocks.
    pub(crate) packets: u64,
    /// UDP receivers: iperf3's counts, and those at the end of the omitted
    /// seconds.
    pub(crate) udp: Option<(UdpCounts, UdpCounts)>,
    /// Time counted (after the omitted seconds), ns.
    pub(crate) elapsed_ns: u64,
    /// CPU time of the stream's thread, user and system, ns.
    pub(crate) cpu_ns: (u64, u64),
    /// TCP senders: retransmitted segments (TCP_INFO).
    pub(crate) retransmits: Option<u64>,
    /// The MSS in use (TCP).
    pub(crate) mss: Option<u32>,
    /// TCP receivers: the SO_RCVLOWAT the kernel kept (None: not set).
    pub(crate) recv_lowat: Option<u32>,
    /// Per interval, from the stream's start (the omitted seconds included).
    pub(crate) intervals: Vec<Interval>,
    /// Why the stream ended early.
    pub(crate) error: Option<String>,
}

/// The running streams of one end.
#[derive(Debug)]
pub(crate) struct Running {
    handles: Vec<JoinHandle<StreamOutcome>>,
    pub(crate) shared: Arc<Shared>,
    cfg: Arc<StreamCfg>,
}

/// Starts one thread per stream: `(id, this end sends, socket)`.
pub(crate) fn start(socks: Vec<(i64, bool, DataSock)>, cfg: StreamCfg) -> io::Result<Running> {
    let shared = Arc::new(Shared::default());
    let cfg = Arc::new(cfg);
    let t0 = sock::monotonic_ns();
    let mut handles = Vec::new();
    for (id, sender, s) in socks {
        let (sh, c) = (Arc::clone(&shared), Arc::clone(&cfg));
        let name = format!("lr-i3-{}{id}", if sender { "tx" } else { "rx" });
        let h = std::thread::Builder::new().name(name).spawn(move || {
            let _ = sock::set_timeout(&s, libc::SO_RCVTIMEO, Some(POLL));
            let _ = sock::set_timeout(&s, libc::SO_SNDTIMEO, Some(POLL));
            let mut m = Meter::new(id, sender, t0, c.omit_ns, c.interval_ns);
            let r = match (sender, c.udp) {
                (true, false) => send_tcp(&s, &c, &sh, &mut m),
                (true, true) => send_udp(&s, &c, &sh, &mut m),
                (false, false) => recv_tcp(&s, &c, &sh, &mut m),
                (false, true) => recv_udp(&s, &c, &sh, &mut m),
            };
            let stopped = sh.stopped_at_ns.load(Ordering::Relaxed);
            let mut out = m.finish((stopped > 0).then_some(stopped));
            if let Err(e) = r {
                out.error = Some(e.to_string());
            }
            if matches!(s, DataSock::Tcp(_)) {
                if let Ok(i) = sock::tcp_info(&s) {
                    out.retransmits = sender.then_some(u64::from(i.total_retrans));
                }
                out.mss = sock::get_int(&s, libc::IPPROTO_TCP, libc::TCP_MAXSEG)
                    .ok()
                    .and_then(|v| u32::try_from(v).ok());
            }
            out
        });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                shared.stop.store(true, Ordering::Relaxed);
                for h in handles {
                    let _ = h.join();
                }
                return Err(e);
            }
        }
    }
    Ok(Running {
        handles,
        shared,
        cfg,
    })
}

impl Running {
    /// Stops every stream (they end within a poll period).
    pub(crate) fn stop(&self) {
        let _ = self.shared.stopped_at_ns.compare_exchange(
            0,
            sock::monotonic_ns(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        self.shared.stop.store(true, Ordering::Relaxed);
    }

    /// Stops the sending streams.
    pub(crate) fn stop_senders(&self) {
        self.shared.stop_senders.store(true, Ordering::Relaxed);
    }

    /// Bytes this end sent and received so far.
    pub(crate) fn totals(&self) -> (u64, u64) {
        (
            self.shared.sent_bytes.load(Ordering::Relaxed),
            self.shared.recv_bytes.load(Ordering::Relaxed),
        )
    }

    /// Whether `-n`/`-k` is reached: by this end's senders, or, when this
    /// end only receives, by what it received.
    pub(crate) fn target_reached(&self, sends: bool) -> bool {
        let c = &self.cfg;
        if sends {
            (c.num_bytes > 0 && self.shared.sent_bytes.load(Ordering::Relaxed) >= c.num_bytes)
                || (c.blockcount > 0
                    && self.shared.sent_blocks.load(Ordering::Relaxed) >= c.blockcount)
        } else {
            let got = self.shared.recv_bytes.load(Ordering::Relaxed);
            (c.num_bytes > 0 && got >= c.num_bytes)
                || (c.blockcount > 0 && got >= c.blockcount.saturating_mul(c.len as u64))
        }
    }

    /// Stops the streams and collects what each did.
    pub(crate) fn join(mut self) -> Vec<StreamOutcome> {
        self.stop();
        std::mem::take(&mut self.handles)
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| StreamOutcome {
                    error: Some("the stream's thread panicked".into()),
                    ..StreamOutcome::default()
                })
            })
            .collect()
    }
}

impl Drop for Running {
    /// Streams left running (their session failed) stop within a poll
    /// period instead of sending on.
    fn drop(&mut self) {
        self.stop();
    }
}

/// Counts one stream, with the omitted seconds taken off.
struct Meter {
    out: StreamOutcome,
    t0: u64,
    omit_end: u64,
    omitted: bool,
    bytes: u64,
    packets: u64,
    bytes_at_omit: u64,
    packets_at_omit: u64,
    cpu0: (u64, u64),
    udp: Option<UdpCounts>,
    udp_at_omit: UdpCounts,
    interval_ns: u64,
    /// The open interval: its start (ns from `t0`), bytes and packets at it.
    iv: (u64, u64, u64),
}

impl Meter {
    fn new(id: i64, sender: bool, t0: u64, omit_ns: u64, interval_ns: u64) -> Self {
        Self {
            out: StreamOutcome {
                id,
                sender,
                ..StreamOutcome::default()
            },
            t0,
            omit_end: t0.saturating_add(omit_ns),
            omitted: omit_ns == 0,
            bytes: 0,
            packets: 0,
            bytes_at_omit: 0,
            packets_at_omit: 0,
            cpu0: sock::thread_cpu_ns().unwrap_or_default(),
            udp: None,
            udp_at_omit: UdpCounts::default(),
            interval_ns,
            iv: (0, 0, 0),
        }
    }

    /// Closes the open interval at `at` (ns from `t0`).
    fn close_interval(&mut self, at: u64) {
        let (start, b0, p0) = self.iv;
        if at > start {
            self.out.intervals.push(Interval {
                start_ns: start,
                end_ns: at,
                bytes: self.bytes - b0,
                packets: self.packets - p0,
            });
        }
        self.iv = (at, self.bytes, self.packets);
    }

    fn add(&mut self, bytes: u64, packets: u64) {
        // One clock read per block or datagram (this is the per-packet path).
        let now = sock::monotonic_ns();
        if self.interval_ns > 0 {
            let at = now.saturating_sub(self.t0);
            if at >= self.iv.0 + self.interval_ns {
                // Whole intervals: the boundary, not the arrival time.
                let end = at - at % self.interval_ns;
                self.close_interval(end);
            }
        }
        self.bytes += bytes;
        self.packets += packets;
        if !self.omitted && now >= self.omit_end {
            self.omitted = true;
            self.bytes_at_omit = self.bytes;
            self.packets_at_omit = self.packets;
            if let Some(u) = self.udp {
                self.udp_at_omit = u;
            }
        }
    }

    /// The stream's figures; its time ends at `stopped_ns` when it was
    /// stopped then (else now).
    fn finish(mut self, stopped_ns: Option<u64>) -> StreamOutcome {
        let now = sock::monotonic_ns().min(stopped_ns.unwrap_or(u64::MAX));
        let from = if self.omitted {
            self.omit_end.max(self.t0)
        } else {
            now
        };
        let cpu = sock::thread_cpu_ns().unwrap_or_default();
        if self.interval_ns > 0 && self.bytes > self.iv.1 {
            self.close_interval(now.saturating_sub(self.t0));
        }
        self.out.bytes = self.bytes - self.bytes_at_omit;
        self.out.packets = self.packets - self.packets_at_omit;
        self.out.elapsed_ns = now.saturating_sub(from);
        self.out.cpu_ns = (
            cpu.0.saturating_sub(self.cpu0.0),
            cpu.1.saturating_sub(self.cpu0.1),
        );
        self.out.udp = self.udp.map(|u| (u, self.udp_at_omit));
        self.out
    }
}

/// The payload: iperf3 sends random bytes, or "0123456789" repeated.
fn payload(len: usize, repeating: bool) -> Vec<u8> {
    if repeating {
        (0..len).map(|i| b'0' + (i % 10) as u8).collect()
    } else {
        let mut b = vec![0u8; len];
        let mut x = crate::token::random_u64() | 1;
        for c in b.chunks_mut(8) {
            // xorshift64: incompressible enough for any link compression.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = c.len();
            c.copy_from_slice(&x.to_le_bytes()[..n]);
        }
        b
    }
}

fn transient(e: &io::Error) -> bool {
    sock::timed_out(e)
        || e.kind() == io::ErrorKind::Interrupted
        || e.raw_os_error() == Some(libc::ENOBUFS)
}

/// The peer closed or reset: the normal end of a stream.
fn closed(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPIPE | libc::ECONNRESET | libc::ECONNREFUSED | libc::ENOTCONN)
    )
}

/// Whether a sender should stop: asked to, or the session's target is met.
fn sender_done(c: &StreamCfg, sh: &Shared) -> bool {
    sh.stop.load(Ordering::Relaxed)
        || sh.stop_senders.load(Ordering::Relaxed)
        || (c.num_bytes > 0 && sh.sent_bytes.load(Ordering::Relaxed) >= c.num_bytes)
        || (c.blockcount > 0 && sh.sent_blocks.load(Ordering::Relaxed) >= c.blockcount)
}

/// Waits for the pacer; false when the sender should send now.
fn pace(p: &mut Option<Pacer>) -> bool {
    let Some(p) = p else { return false };
    let w = p.wait_ns(sock::monotonic_ns());
    if w > 0 {
        std::thread::sleep(Duration::from_nanos(w.min(10_000_000)));
        return true;
    }
    false
}

fn send_tcp(s: &DataSock, c: &StreamCfg, sh: &Shared, m: &mut Meter) -> io::Result<()> {
    let buf = payload(c.len, c.repeating);
    let file = if c.zerocopy {
        Some(sock::memfd_with("linerate-iperf3", &buf)?)
    } else {
        None
    };
    let fd = s.as_raw_fd();
    let mut pacer =
        (c.rate_bits_per_s > 0).then(|| Pacer::new(c.rate_bits_per_s, sock::monotonic_ns()));
    let mut in_block = 0usize;
    while !sender_done(c, sh) {
        if pace(&mut pacer) {
            continue;
        }
        let r = match &file {
            Some(f) => sock::sendfile(fd, f, in_block as u64, c.len - in_block),
            None => sock::send(fd, &buf[in_block..], 0),
        };
        match r {
            Ok(n) => {
                in_block += n;
                let blocks = u64::from(in_block >= c.len);
                if in_block >= c.len {
                    in_block = 0;
                }
                sh.sent_bytes.fetch_add(n as u64, Ordering::Relaxed);
                sh.sent_blocks.fetch_add(blocks, Ordering::Relaxed);
                if let Some(p) = pacer.as_mut() {
                    p.sent(n as u64);
                }
                m.add(n as u64, blocks);
            }
            Err(e) if transient(&e) => {}
            Err(e) if closed(&e) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn send_udp(s: &DataSock, c: &StreamCfg, sh: &Shared, m: &mut Meter) -> io::Result<()> {
    let mut buf = payload(c.len, c.repeating);
    let fd = s.as_raw_fd();
    let mut pacer =
        (c.rate_bits_per_s > 0).then(|| Pacer::new(c.rate_bits_per_s, sock::monotonic_ns()));
    let mut seq = 1u64;
    while !sender_done(c, sh) {
        if pace(&mut pacer) {
            continue;
        }
        let now = realtime_ns();
        let h = UdpHeader {
            sec: (now / 1_000_000_000) as u32,
            usec: ((now % 1_000_000_000) / 1000) as u32,
            seq,
        };
        h.emit(&mut buf, c.wide);
        match sock::send(fd, &buf, 0) {
            Ok(n) => {
                seq += 1;
                sh.sent_bytes.fetch_add(n as u64, Ordering::Relaxed);
                sh.sent_blocks.fetch_add(1, Ordering::Relaxed);
                if let Some(p) = pacer.as_mut() {
                    p.sent(n as u64);
                }
                m.add(n as u64, 1);
            }
            // Not sent: not counted, its number reused.
            Err(e) if transient(&e) || closed(&e) => {
                if e.raw_os_error() == Some(libc::ENOBUFS) {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn recv_tcp(s: &DataSock, c: &StreamCfg, sh: &Shared, m: &mut Meter) -> io::Result<()> {
    // At least the low-water mark: one read takes what woke the receiver.
    let mark = c.recv_lowat.unwrap_or(0) as usize;
    let mut buf = vec![0u8; c.len.max(mark).clamp(64 << 10, 1 << 20)];
    let fd = s.as_raw_fd();
    if let Some(b) = c.recv_lowat {
        m.out.recv_lowat =
            Some(crate::throughput::net::set_recv_lowat(s, b).map_err(io::Error::other)?);
    }
    // An unpaced sender fills the buffer in microseconds: one read per
    // buffer (MSG_WAITALL) instead of one per wake-up keeps the receive
    // window open (zero-window advertisements in one run each: 27 against
    // 557 without, iperf3 3.12's server 1142) and gained 10 % for one
    // stream against iperf3's client on loopback (`bench/iperf3.sh`, 5 and
    // 7 rounds: 0.885 → 0.968, 0.854 → 0.974 of iperf3's server). A paced
    // one would hold each read up to the socket's 100 ms timeout and bunch
    // the intervals: plain reads then.
    let wait_all = match c.rate_bits_per_s {
        0 => libc::MSG_WAITALL,
        _ => 0,
    };
    while !sh.stop.load(Ordering::Relaxed) {
        let r = if c.skip_rx_copy {
            sock::tcp_discard(fd, buf.len(), 0)
        } else {
            sock::recv(fd, &mut buf, wait_all)
        };
        match r {
            Ok(0) => return Ok(()),
            Ok(n) => {
                sh.recv_bytes.fetch_add(n as u64, Ordering::Relaxed);
                m.add(n as u64, 0);
            }
            Err(e) if transient(&e) => {}
            Err(e) if closed(&e) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A UDP receiver that drained this many datagrams or more since it last
/// woke sees dense traffic: it naps [`DENSE_NAP`] between drains instead of
/// blocking, so the sender's kernel path (on loopback: the sending thread)
/// finds no waiter to wake per datagram or two.
const DENSE_BURST: u32 = 4;

/// The nap between drains of dense traffic: ~100 µs of datagrams, a few
/// hundred KiB at 10 Gbit/s, wait in the socket buffer (≥ 1 MiB here).
const DENSE_NAP: Duration = Duration::from_micros(100);

fn recv_udp(s: &DataSock, c: &StreamCfg, sh: &Shared, m: &mut Meter) -> io::Result<()> {
    let mut buf = vec![0u8; 65_536];
    let fd = s.as_raw_fd();
    m.udp = Some(UdpCounts::default());
    // Arrival times from the kernel's receive stamp: batched reads do not
    // bunch them up (a datagram without one is stamped when read).
    let _ = timestamping::enable(
        fd,
        timestamping::SOF_TIMESTAMPING_RX_SOFTWARE | timestamping::SOF_TIMESTAMPING_SOFTWARE,
    );
    // Blocking until a datagram arrives, then draining without blocking.
    let mut block = true;
    let mut burst = 0u32;
    while !sh.stop.load(Ordering::Relaxed) {
        let flags = if block { 0 } else { libc::MSG_DONTWAIT };
        match timestamping::recv(fd, &mut buf, flags) {
            Ok(rx) => {
                block = false;
                burst += 1;
                let n = rx.len.min(buf.len());
                let arrival = match rx.software_ns {
                    0 => realtime_ns(),
                    t => t,
                };
                if let (Some(h), Some(u)) = (UdpHeader::parse(&buf[..n], c.wide), m.udp.as_mut()) {
                    u.datagram(&h, arrival);
                }
                sh.recv_bytes.fetch_add(n as u64, Ordering::Relaxed);
                m.add(n as u64, 1);
            }
            // Drained.
            Err(e) if !block && e.kind() == io::ErrorKind::WouldBlock => {
                if std::mem::take(&mut burst) >= DENSE_BURST {
                    std::thread::sleep(DENSE_NAP);
                } else {
                    block = true;
                }
            }
            Err(e) if transient(&e) || closed(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sets the socket options the parameters ask for on a data socket
/// (`pre_connect`: a client's socket before it connects, where MSS and
/// window must be set). Returns notes on options the kernel would not
/// take where iperf3 goes on too; an error (iperf error number, text) for
/// those iperf3 refuses the test over.
pub(crate) fn apply_options(
    s: &impl AsRawFd,
    p: &Params,
    tcp: bool,
) -> Result<Vec<String>, (i32, String)> {
    let mut notes = Vec::new();
    let set = |level, name, v: i32| sock::set_int(s, level, name, v);
    if p.window > 0 {
        let w = i32::try_from(p.window).unwrap_or(i32::MAX);
        for name in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
            set(libc::SOL_SOCKET, name, w)
                .map_err(|e| (errno::BUF_SIZE, format!("SO_SNDBUF/SO_RCVBUF={w}: {e}")))?;
        }
    }
    if tcp {
        if p.nodelay {
            let _ = set(libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
        }
        if p.mss > 0 {
            let mss = i32::try_from(p.mss).unwrap_or(i32::MAX);
            set(libc::IPPROTO_TCP, libc::TCP_MAXSEG, mss)
                .map_err(|e| (errno::MSS, format!("TCP_MAXSEG={mss}: {e}")))?;
        }
        if let Some(cc) = &p.congestion {
            sock::set_bytes(s, libc::IPPROTO_TCP, libc::TCP_CONGESTION, cc.as_bytes())
                .map_err(|e| (errno::SET_CONGESTION, format!("TCP_CONGESTION={cc}: {e}")))?;
        }
    }
    if p.tos > 0 {
        // One of the two applies (IPv4, or IPv6 and v4-mapped peers).
        let a = set(libc::IPPROTO_IP, libc::IP_TOS, i32::from(p.tos));
        let b = set(libc::IPPROTO_IPV6, libc::IPV6_TCLASS, i32::from(p.tos));
        if a.is_err() && b.is_err() {
            notes.push(format!(
                "TOS {} not set: the kernel refused IP_TOS and IPV6_TCLASS",
                p.tos
            ));
        }
    }
    if p.dont_fragment && !tcp {
        let a = set(
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        );
        let b = set(
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        );
        if a.is_err() && b.is_err() {
            notes.push("don't-fragment not set: the kernel refused IP_MTU_DISCOVER".into());
        }
    }
    if p.fqrate > 0 {
        // SO_MAX_PACING_RATE is bytes/s, an int here (at most ~17 Gbit/s).
        let bytes = i32::try_from(p.fqrate / 8).unwrap_or(i32::MAX);
        match set(libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, bytes) {
            Ok(()) if tcp => notes.push(format!(
                "--fq-rate {} bit/s set as SO_MAX_PACING_RATE (TCP paces itself; other flows need the fq qdisc)",
                p.fqrate
            )),
            Ok(()) => notes.push(format!(
                "--fq-rate {} bit/s set as SO_MAX_PACING_RATE: UDP is paced only under the fq qdisc",
                p.fqrate
            )),
            Err(e) => notes.push(format!("--fq-rate not applied: SO_MAX_PACING_RATE refused ({e})")),
        }
    }
    if p.flowlabel > 0 {
        notes.push(format!(
            "IPv6 flow label {} not applied (not supported by linerate)",
            p.flowlabel
        ));
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeating_payload_is_digits() {
        assert_eq!(payload(12, true), b"012345678901");
        let r = payload(13, false);
        assert_eq!(r.len(), 13);
        assert_ne!(r, vec![0; 13]);
    }
}
