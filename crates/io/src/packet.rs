//! Raw-frame generator and receiver (packet(7), AF_XDP).
//!
//! * [`FrameGenerator`]: test frames on one interface through one of the
//!   [`Generator`]s — AF_PACKET `sendmmsg` batches of up to 64, an AF_PACKET
//!   PACKET_TX_RING (TPACKET_V2), or an AF_XDP socket in copy mode — paced
//!   to an offered rate by a token bucket on the clock (the long-term rate is
//!   exact; frames leave in bursts of up to one batch when the thread wakes
//!   up late, and the largest such backlog is reported). It counts only the
//!   frames the kernel **accepted**: `sendmmsg`'s count (a short count or
//!   ENOBUFS from a full qdisc or device queue means those frames were not
//!   sent; they are sent again with the same sequence numbers), TX-ring
//!   slots handed back, AF_XDP chunks back on the completion ring. The
//!   offered rate it reports is accepted frames over the time from the first
//!   send to the last acceptance. AF_PACKET frames pass the qdisc, so a tc
//!   link emulator (tbf) shapes them; `PACKET_QDISC_BYPASS` and AF_XDP skip
//!   it and are **refused on an interface with a shaping qdisc**
//!   (measured on this machine kind).
//! * [`Receiver`]: `recvmmsg` batches of frames on one interface,
//!   parsed with the core test-frame view; non-test frames are counted and
//!   ignored; test frames go to a [`RxTally`] (loss, reorder, duplicates,
//!   latency per stream).
//!
//! Clock: `CLOCK_REALTIME` at both ends. The generator reads it in user space
//! just before it hands a batch to the kernel (one stamp per batch);
//! the receiver takes the kernel's software receive timestamp
//! (`SO_TIMESTAMPNS`, taken when the frame enters the receiving interface's
//! stack), and only if a frame lacks one, the time just after `recvmmsg`
//! returned (counted in [`Receiver::user_stamps`]). One-way latency is
//! valid because generator and receiver are threads of one process on one
//! host reading one clock; it includes the sender's syscall and qdisc time.
//! A step of the realtime clock (NTP) during a trial would show as an
//! outlier; negative differences are counted, not recorded.

use std::collections::VecDeque;
use std::io;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use linerate_core::procedure::rfc2544::rx::RxTally;
use linerate_core::wire::testframe::{TestFrame, TestFrameRepr, ETHERTYPE_IPV4, ETHERTYPE_IPV6};

use crate::sys::bpf::LiveFrames;
use crate::sys::packet::{
    self as raw, PacketSocket, SlotState, TxRing, MAX_BATCH, PACKET_OUTGOING,
};
use crate::sys::xdp::XdpTx;
use crate::sys::xdp_count::XdpCounter;

pub use crate::sys::bpf::BpfError;
/// How the generator hands frames to the kernel (defined with the result,
/// in core, so the result names it).
pub use linerate_core::rfc2544::Generator;

/// Why a raw socket could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PacketError {
    /// The interface does not exist (in this thread's namespace).
    #[error("no interface {iface}")]
    NoInterface {
        /// Interface name.
        iface: String,
        /// The error.
        source: io::Error,
    },
    /// A socket call failed.
    #[error("{what} on {iface}")]
    Socket {
        /// Which call.
        what: &'static str,
        /// Interface name.
        iface: String,
        /// The error.
        source: io::Error,
    },
    /// AF_XDP was asked on an interface with a shaping qdisc.
    #[error("AF_XDP refused on {iface}: it has a shaping qdisc ({qdisc}), and AF_XDP frames skip the qdisc, so the emulated link")]
    XdpOnShapedLink {
        /// Interface name.
        iface: String,
        /// The qdisc kind found.
        qdisc: String,
    },
    /// XDP live frames were asked on an interface with a shaping qdisc.
    #[error("XDP live frames refused on {iface}: it has a shaping qdisc ({qdisc}), and XDP-redirected frames skip the qdisc, so they would skip the emulated link")]
    LiveOnShapedLink {
        /// Interface name.
        iface: String,
        /// The qdisc kind found.
        qdisc: String,
    },
    /// The XDP live-frames program could not be loaded or run.
    #[error("XDP live frames on {iface}")]
    Bpf {
        /// Interface name.
        iface: String,
        /// The failed bpf(2) command.
        source: BpfError,
    },
    /// The XDP counter could not be set up on the receiving interface.
    #[error("XDP counter on {iface}")]
    XdpCount {
        /// Interface name.
        iface: String,
        /// The failed bpf(2) command.
        source: BpfError,
    },
    /// PACKET_QDISC_BYPASS was asked on an interface with a shaping qdisc.
    #[error("PACKET_QDISC_BYPASS refused on {iface}: it has a shaping qdisc ({qdisc}), and bypass would skip the emulated link")]
    BypassOnShapedLink {
        /// Interface name.
        iface: String,
        /// The qdisc kind found.
        qdisc: String,
    },
}

/// The shaping qdisc (tbf, htb) on `iface`, if any, as `tc qdisc show`
/// reports it in the calling thread's namespace (`None` also when `tc` is
/// missing: then bypass is allowed with no check).
pub fn shaping_qdisc(iface: &str) -> Option<String> {
    let out = Command::new("tc")
        .args(["qdisc", "show", "dev", iface])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .find(|w| linerate_core::qdisc::is_shaping(w))
        .map(str::to_string)
}

/// The MAC address of `iface` in the calling thread's namespace.
pub fn iface_mac(iface: &str) -> Result<[u8; 6], PacketError> {
    raw::hwaddr(iface).map_err(|source| PacketError::NoInterface {
        iface: iface.to_string(),
        source,
    })
}

/// The absolute pacing schedule of the AF_XDP path: the frames due `el`
/// after the start (all `frames` when unpaced; at `fps`, frame k is due at
/// k/fps). `None` when no more than `sent` are due: then it has waited a
/// little first ([`pace_wait`]).
fn pace_due(fps: Option<f64>, frames: u64, sent: u64, el: Duration) -> Option<u64> {
    let schedule = linerate_core::pace::FrameSchedule { fps, frames };
    let due = schedule.due(el.as_secs_f64());
    if due > sent {
        return Some(due);
    }
    pace_wait(&schedule, sent, el);
    None
}

/// Waits a little for frame `next` of `schedule`, `el` after its start:
/// sleeps when it is over 300 µs away (150 µs early, for the timer's
/// lateness), spins once otherwise.
fn pace_wait(schedule: &linerate_core::pace::FrameSchedule, next: u64, el: Duration) {
    let wait = schedule.wait_s(next, el.as_secs_f64());
    if wait > 300e-6 {
        std::thread::sleep(Duration::from_secs_f64(wait - 150e-6));
    } else if schedule.fps.is_some() {
        std::hint::spin_loop();
    }
}

/// `template` as stream `stream`: the frame count capped to what a run can
/// send, the frame's representation and its bytes.
fn stream_frame(
    template: &TestFrameRepr,
    stream: u16,
    frames: u64,
) -> (u64, TestFrameRepr, Vec<u8>) {
    let mut t = *template;
    t.stream = stream;
    let mut proto = vec![0u8; t.buffer_len()];
    t.emit(&mut proto);
    (frames.min(u64::from(u32::MAX)), t, proto)
}

/// Sets a test frame's sequence number and transmit stamp (and an IPv6
/// frame's UDP checksum) in place.
fn stamp_frame(frame: &mut [u8], seq: u32, tx_ns: u64) {
    if let Ok(mut f) = TestFrame::new_checked(frame) {
        f.set_seq(seq);
        f.set_tx_ns(tx_ns);
        f.fill_udp_checksum();
    }
}

/// What one generator run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenReport {
    /// Frames asked.
    pub asked_frames: u64,
    /// Frames the kernel accepted.
    pub sent_frames: u64,
    /// From the first send to the return of the last.
    pub elapsed: Duration,
    /// `sent_frames / elapsed`.
    pub offered_fps: f64,
    /// `sendmmsg` calls.
    pub batches: u64,
    /// Calls that accepted fewer frames than given.
    pub short_batches: u64,
    /// Calls that failed with ENOBUFS (queue full).
    pub enobufs: u64,
    /// Other failed calls.
    pub errors: u64,
    /// The first other error.
    pub first_error: Option<String>,
    /// The run stopped at its time limit before sending every frame.
    pub timed_out: bool,
    /// Largest backlog of due frames at any send (paced runs): frames the
    /// pacer had to send back to back to catch up after a late wake-up, so
    /// the burst the device saw, beyond one frame.
    pub max_lag_frames: u64,
    /// Frames the device refused (XDP live frames: the sending veth's
    /// `tx_queue_*_xdp_xmit_errors`, a full ring on the peer); not counted
    /// as sent.
    pub refused_frames: u64,
    /// `sent_frames` comes from the device's own counter (XDP live frames
    /// on a veth: `tx_queue_*_xdp_xmit`), not from the calls' return.
    pub sent_from_device_counter: bool,
    /// Largest number of frames that carried the same sequence number and
    /// transmit stamp (XDP live frames: one call's frames; 0 or 1 for the
    /// other paths): a receiver can count those, not tell them apart.
    pub identical_frames: u64,
    /// Threads that sent (each with its own socket): 1 but for the
    /// `sendmmsg` and TX-ring paths opened with more.
    pub sender_threads: u32,
}

impl GenReport {
    /// An empty report of a run asked to send `frames`.
    fn asking(frames: u64) -> Self {
        Self {
            asked_frames: frames,
            sender_threads: 1,
            ..Self::default()
        }
    }

    /// Sets the offered rate from the frames sent over `elapsed` (set first).
    fn close(&mut self) {
        self.offered_fps = if self.elapsed.is_zero() {
            0.0
        } else {
            self.sent_frames as f64 / self.elapsed.as_secs_f64()
        };
    }
}

/// One AF_PACKET sending socket and, on the TX-ring path, its ring: every
/// sender thread has its own, as every trafgen process has.
#[derive(Debug)]
struct Lane {
    sock: PacketSocket,
    ring: Option<TxRing>,
    /// The slot the kernel takes next: it walks the ring in order from where
    /// the last run left it, and so do we.
    ring_head: usize,
}

/// A paced AF_PACKET sender of test frames.
#[derive(Debug)]
pub struct FrameGenerator {
    /// The sender threads' sockets (at least one; the AF_XDP and XDP live
    /// paths use only the first).
    lanes: Vec<Lane>,
    /// The last unpaced run's rate per sender thread, and its frame length:
    /// how many threads a paced run needs.
    per_thread_fps: Option<(usize, f64)>,
    xdp: Option<XdpTx>,
    live: Option<LiveFrames>,
    iface: String,
    mac: [u8; 6],
    mtu: u32,
    /// PACKET_QDISC_BYPASS in force.
    pub qdisc_bypass: bool,
}

/// The frames of one run, shared by its sender threads: each takes the next
/// due sequence numbers, at most a batch at a time, from one counter. So the
/// run keeps one absolute schedule whatever the number of threads (the rate
/// is the sum's, not each thread's), and every frame has its own number.
struct Claims {
    schedule: linerate_core::pace::FrameSchedule,
    /// The first sequence number nobody has taken.
    next: AtomicU64,
    start: Instant,
    max_time: Duration,
}

/// Frames a sender thread has taken and not yet handed to the kernel:
/// `first..first + n`.
#[derive(Debug, Default)]
struct Pending {
    first: u64,
    n: usize,
}

/// What a sender thread does next ([`Claims::next`]).
enum Next {
    /// Send its pending frames.
    Send,
    /// Nothing was due: it waited a little; ask again.
    Again,
    /// Every frame is taken, or the run's time is up.
    Stop,
}

impl Claims {
    fn new(fps: Option<f64>, frames: u64, max_time: Duration) -> Self {
        Self {
            schedule: linerate_core::pace::FrameSchedule { fps, frames },
            next: AtomicU64::new(0),
            start: Instant::now(),
            max_time,
        }
    }

    /// Decides a sender thread's next step: with frames `pending` it sends
    /// them (unless the run's time is up); else it takes up to `max` of the
    /// frames due now (their backlog goes into `rep.max_lag_frames` when
    /// paced). When none is due it waits a little first ([`pace_wait`]).
    fn next(&self, pending: &mut Pending, max: usize, rep: &mut GenReport) -> Next {
        let el = self.start.elapsed();
        if el > self.max_time {
            rep.timed_out = true;
            return Next::Stop;
        }
        if pending.n > 0 {
            return Next::Send;
        }
        let due = self.schedule.due(el.as_secs_f64());
        let mut next = self.next.load(Ordering::Relaxed);
        loop {
            if next >= self.schedule.frames {
                return Next::Stop;
            }
            if due <= next {
                pace_wait(&self.schedule, next, el);
                return Next::Again;
            }
            let n = (due - next).min(max as u64);
            match self.next.compare_exchange_weak(
                next,
                next + n,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if self.schedule.fps.is_some() {
                        rep.max_lag_frames = rep.max_lag_frames.max(due - next);
                    }
                    *pending = Pending {
                        first: next,
                        n: n as usize,
                    };
                    return Next::Send;
                }
                Err(now) => next = now,
            }
        }
    }
}

/// What one sender thread did, and when the kernel last accepted a frame.
type LaneRun = (GenReport, Instant);

impl GenReport {
    /// Adds one sender thread's counts.
    fn add(&mut self, lane: &Self) {
        self.sent_frames += lane.sent_frames;
        self.batches += lane.batches;
        self.short_batches += lane.short_batches;
        self.enobufs += lane.enobufs;
        self.errors += lane.errors;
        if self.first_error.is_none() {
            self.first_error.clone_from(&lane.first_error);
        }
        self.timed_out |= lane.timed_out;
        self.max_lag_frames = self.max_lag_frames.max(lane.max_lag_frames);
    }

    /// Counts a failed call: the first error is kept.
    fn failed(&mut self, e: &io::Error) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e.to_string());
        }
    }
}

impl FrameGenerator {
    /// A sender on `iface` (in the calling thread's namespace) using `path`,
    /// with one sender thread.
    pub fn open(iface: &str, qdisc_bypass: bool, path: Generator) -> Result<Self, PacketError> {
        Self::open_threads(iface, qdisc_bypass, path, 1)
    }

    /// A sender on `iface` (in the calling thread's namespace) using `path`.
    /// The `sendmmsg` and TX-ring paths send from `threads` threads (at
    /// least one), each with its own socket (and ring); the AF_XDP and XDP
    /// live paths from one.
    pub fn open_threads(
        iface: &str,
        qdisc_bypass: bool,
        path: Generator,
        threads: usize,
    ) -> Result<Self, PacketError> {
        let sock_err = |what| socket_error(iface, what);
        let index = interface_index(iface)?;
        let mac = raw::hwaddr(iface).map_err(sock_err("SIOCGIFHWADDR"))?;
        if qdisc_bypass {
            if let Some(qdisc) = shaping_qdisc(iface) {
                return Err(PacketError::BypassOnShapedLink {
                    iface: iface.to_string(),
                    qdisc,
                });
            }
        }
        let mtu = raw::mtu(iface).map_err(sock_err("SIOCGIFMTU"))?;
        let lanes = match path {
            Generator::Sendmmsg | Generator::TxRing => threads.max(1),
            Generator::AfXdp | Generator::XdpLive => 1,
        };
        let mut socks = Vec::with_capacity(lanes);
        for _ in 0..lanes {
            let sock = PacketSocket::open(index, 0).map_err(sock_err("AF_PACKET socket"))?;
            let _ = sock.set_sndbuf(4 << 20);
            if qdisc_bypass {
                sock.set_qdisc_bypass(true)
                    .map_err(sock_err("PACKET_QDISC_BYPASS"))?;
            }
            let ring = if path == Generator::TxRing {
                // Slots for the largest frame the MTU allows (14 B Ethernet header).
                Some(
                    sock.tx_ring(mtu as usize + 14)
                        .map_err(sock_err("PACKET_TX_RING"))?,
                )
            } else {
                None
            };
            socks.push(Lane {
                sock,
                ring,
                ring_head: 0,
            });
        }
        let xdp = if path == Generator::AfXdp {
            if let Some(qdisc) = shaping_qdisc(iface) {
                return Err(PacketError::XdpOnShapedLink {
                    iface: iface.to_string(),
                    qdisc,
                });
            }
            Some(XdpTx::open(index, 4096, 4096).map_err(sock_err("AF_XDP socket (copy mode)"))?)
        } else {
            None
        };
        let live = if path == Generator::XdpLive {
            if let Some(qdisc) = shaping_qdisc(iface) {
                return Err(PacketError::LiveOnShapedLink {
                    iface: iface.to_string(),
                    qdisc,
                });
            }
            Some(LiveFrames::load(index).map_err(|source| PacketError::Bpf {
                iface: iface.to_string(),
                source,
            })?)
        } else {
            None
        };
        Ok(Self {
            lanes: socks,
            per_thread_fps: None,
            xdp,
            live,
            iface: iface.to_string(),
            mac,
            mtu,
            qdisc_bypass,
        })
    }

    /// The interface's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The interface's MTU (largest IP packet).
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// The interface name.
    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// The sender threads (each with its own socket) a run may use.
    pub fn threads(&self) -> usize {
        self.lanes.len()
    }

    /// The send path in use.
    pub fn path(&self) -> Generator {
        if self.lanes[0].ring.is_some() {
            Generator::TxRing
        } else if self.xdp.is_some() {
            Generator::AfXdp
        } else if self.live.is_some() {
            Generator::XdpLive
        } else {
            Generator::Sendmmsg
        }
    }

    /// Sends `frames` copies of `template` (stream `stream`, sequence 0..),
    /// at `fps` (or as fast as possible with `None`), stopping at
    /// `max_time` whatever is left.
    ///
    /// With several sender threads (`sendmmsg` and TX ring), each takes the
    /// next due frames of the one schedule, a batch at most, and sends them
    /// on its own socket: sequence numbers are unique and consecutive within
    /// a batch, but two threads' batches may reach the wire interleaved, so
    /// a receiver sees some frames out of order. An unpaced run uses every
    /// thread; a paced one as many as its rate needs (see the report's
    /// `sender_threads`), once an unpaced run of the frame length measured
    /// the rate per thread.
    pub fn run(
        &mut self,
        template: &TestFrameRepr,
        stream: u16,
        frames: u64,
        fps: Option<f64>,
        max_time: Duration,
    ) -> GenReport {
        if self.xdp.is_some() {
            return self.run_xdp(template, stream, frames, fps, max_time);
        }
        if self.live.is_some() {
            return self.run_live(template, stream, frames, fps, max_time);
        }
        let (frames, t, proto) = stream_frame(template, stream, frames);
        let ethertype = if t.src_ip.is_ipv6() {
            ETHERTYPE_IPV6
        } else {
            ETHERTYPE_IPV4
        };
        let claims = Claims::new(fps, frames, max_time);
        let lane_run = |lane: &mut Lane| {
            if lane.ring.is_some() {
                send_ring(lane, &proto, &claims)
            } else {
                lane.sock.set_tx_protocol(ethertype);
                send_mmsg(lane, &proto, &claims)
            }
        };
        let mut rep = GenReport::asking(frames);
        let start = claims.start;
        let mut last = start;
        let active = self.threads_for(fps, proto.len());
        let (first, rest) = self.lanes[..active]
            .split_first_mut()
            .expect("a generator has a socket");
        std::thread::scope(|s| {
            let mut others = Vec::new();
            for (i, lane) in rest.iter_mut().enumerate() {
                let spawned = std::thread::Builder::new()
                    .name(format!("lr-gen{}", i + 1))
                    .spawn_scoped(s, || lane_run(lane));
                match spawned {
                    Ok(h) => others.push(h),
                    Err(e) => rep.failed(&e),
                }
            }
            let mut runs = vec![lane_run(first)];
            for h in others {
                runs.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            }
            rep.sender_threads = runs.len() as u32;
            for (r, at) in &runs {
                rep.add(r);
                last = last.max(*at);
            }
        });
        rep.elapsed = last.duration_since(start);
        rep.close();
        if fps.is_none() && rep.sent_frames > 0 {
            let per_thread = rep.offered_fps / f64::from(rep.sender_threads);
            self.per_thread_fps = Some((proto.len(), per_thread));
        }
        rep
    }

    /// The sender threads a run at `fps` of `len`-byte frames uses: every
    /// one unpaced, or when no unpaced run of that frame length has been
    /// measured; else as many as the rate needs at 70 % of the measured
    /// rate per thread (so a slow paced run does not keep every CPU
    /// spinning, beside the receiver).
    fn threads_for(&self, fps: Option<f64>, len: usize) -> usize {
        let all = self.lanes.len();
        match (fps, self.per_thread_fps) {
            (Some(f), Some((l, per))) if l == len && per > 0.0 => {
                ((f / (0.7 * per)).ceil() as usize).clamp(1, all)
            }
            _ => all,
        }
    }
}

/// One sender thread of the `sendmmsg` path: batches of up to 64 frames
/// from the shared schedule, each patched (sequence number, transmit
/// stamp) in its own buffer. Frames the kernel did not accept (a short
/// count, ENOBUFS) stay this thread's and go again with the same numbers.
fn send_mmsg(lane: &mut Lane, proto: &[u8], claims: &Claims) -> LaneRun {
    let mut bufs: Vec<Vec<u8>> = vec![proto.to_vec(); MAX_BATCH];
    let mut rep = GenReport::default();
    let mut last = claims.start;
    let mut p = Pending::default();
    loop {
        match claims.next(&mut p, MAX_BATCH, &mut rep) {
            Next::Send => {}
            Next::Again => continue,
            Next::Stop => break,
        }
        let ts = raw::realtime_ns();
        for (i, b) in bufs.iter_mut().take(p.n).enumerate() {
            stamp_frame(&mut b[..], (p.first + i as u64) as u32, ts);
        }
        rep.batches += 1;
        match lane.sock.send_batch(&bufs[..p.n]) {
            Ok(k) => {
                rep.sent_frames += k as u64;
                if k < p.n {
                    rep.short_batches += 1;
                }
                p.first += k as u64;
                p.n -= k;
                last = Instant::now();
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                // A full queue (a shaper's or the device's): back off
                // instead of spinning; the frames stay due.
                rep.enobufs += 1;
                std::thread::sleep(Duration::from_micros(50));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) => {
                rep.failed(&e);
                if rep.errors > 1000 {
                    break;
                }
                std::thread::yield_now();
            }
        }
    }
    (rep, last)
}

/// One sender thread of the TX-ring path: frames from the shared schedule
/// are written into its ring's slots in order and the kernel is kicked
/// (`send(NULL, 0, MSG_DONTWAIT)`) after each batch. A frame counts as sent
/// when its slot comes back free (the kernel released the skb); a slot the
/// kernel marks WRONG_FORMAT counts as an error. A frame a full qdisc
/// refused stays queued and is retried by the next kick; frames taken while
/// the ring is full stay this thread's. At the end it waits (up to 1 s) for
/// queued frames.
fn send_ring(lane: &mut Lane, proto: &[u8], claims: &Claims) -> LaneRun {
    let len = proto.len();
    let mut rep = GenReport::default();
    let mut last = claims.start;
    let Some(ring) = lane.ring.as_mut() else {
        return (rep, last);
    };
    let slots = ring.frames();
    let mut head = lane.ring_head % slots;
    let mut inflight: VecDeque<usize> = VecDeque::new();
    // Slots handed back since the last look: sent (one clock read for all).
    let reap =
        |ring: &TxRing, inflight: &mut VecDeque<usize>, rep: &mut GenReport, last: &mut Instant| {
            let sent = rep.sent_frames;
            while let Some(&i) = inflight.front() {
                match ring.state(i) {
                    SlotState::Busy => break,
                    SlotState::Free => rep.sent_frames += 1,
                    SlotState::Refused => rep.errors += 1,
                }
                inflight.pop_front();
            }
            if rep.sent_frames > sent {
                *last = Instant::now();
            }
        };
    let mut p = Pending::default();
    loop {
        reap(ring, &mut inflight, &mut rep, &mut last);
        let room = MAX_BATCH.min(slots - inflight.len()).max(1);
        match claims.next(&mut p, room, &mut rep) {
            Next::Send => {}
            Next::Again => continue,
            Next::Stop => break,
        }
        let ts = raw::realtime_ns();
        let mut filled = 0;
        while filled < p.n && inflight.len() < slots {
            let seq = (p.first + filled as u64) as u32;
            let ok = ring.fill(head, len, |d| {
                d.copy_from_slice(proto);
                stamp_frame(d, seq, ts);
            });
            if !ok {
                break;
            }
            inflight.push_back(head);
            head = (head + 1) % slots;
            filled += 1;
        }
        p.first += filled as u64;
        p.n -= filled;
        rep.batches += 1;
        match lane.sock.kick() {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                rep.enobufs += 1;
                std::thread::sleep(Duration::from_micros(50));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) => rep.failed(&e),
        }
        if filled == 0 {
            // Ring full: let the kernel drain it.
            std::thread::yield_now();
        }
    }
    // Flush what is queued, for at most a second.
    let flush_end = Instant::now() + Duration::from_secs(1);
    while !inflight.is_empty() && Instant::now() < flush_end {
        let _ = lane.sock.kick();
        reap(ring, &mut inflight, &mut rep, &mut last);
        if !inflight.is_empty() {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    lane.ring_head = head;
    if !inflight.is_empty() {
        rep.timed_out = true;
    }
    (rep, last)
}
impl FrameGenerator {
    /// The AF_XDP path: frames are written into free UMEM chunks and put on
    /// the TX ring, published and kicked after each batch; a frame counts as
    /// sent when its chunk comes back on the completion ring. At the end it
    /// waits (up to 1 s) for the rest.
    fn run_xdp(
        &mut self,
        template: &TestFrameRepr,
        stream: u16,
        frames: u64,
        fps: Option<f64>,
        max_time: Duration,
    ) -> GenReport {
        let (frames, _, proto) = stream_frame(template, stream, frames);
        let len = proto.len();
        let mut rep = GenReport::asking(frames);
        let Some(x) = self.xdp.as_mut() else {
            return rep;
        };
        if len > x.max_frame() {
            rep.errors += 1;
            rep.first_error = Some(format!("{len}-byte frame exceeds the AF_XDP chunk"));
            return rep;
        }
        let mut queued = 0u64;
        let start = Instant::now();
        let mut last_done = start;
        while queued < frames {
            let el = start.elapsed();
            if el > max_time {
                rep.timed_out = true;
                break;
            }
            let done = x.reap();
            if done > 0 {
                rep.sent_frames += u64::from(done);
                last_done = Instant::now();
            }
            let Some(due) = pace_due(fps, frames, queued, el) else {
                continue;
            };
            if fps.is_some() {
                rep.max_lag_frames = rep.max_lag_frames.max(due - queued);
            }
            let want = ((due - queued) as usize).min(MAX_BATCH);
            let ts = raw::realtime_ns();
            let mut filled = 0;
            while filled < want {
                let seq = queued as u32;
                let ok = x.push(len, |d| {
                    d.copy_from_slice(&proto);
                    stamp_frame(d, seq, ts);
                });
                if !ok {
                    break;
                }
                queued += 1;
                filled += 1;
            }
            rep.batches += 1;
            if let Err(e) = x.publish() {
                rep.errors += 1;
                if rep.first_error.is_none() {
                    rep.first_error = Some(e.to_string());
                }
                if rep.errors > 1000 {
                    break;
                }
            }
            if filled == 0 {
                std::thread::yield_now();
            }
        }
        let flush_end = Instant::now() + Duration::from_secs(1);
        while (x.free_chunks() as u32) < x.chunks() && Instant::now() < flush_end {
            let _ = x.publish();
            let done = x.reap();
            if done > 0 {
                rep.sent_frames += u64::from(done);
                last_done = Instant::now();
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        if (x.free_chunks() as u32) < x.chunks() {
            rep.timed_out = true;
        }
        rep.elapsed = last_done.duration_since(start);
        rep.close();
        rep
    }
}

/// An AF_PACKET receiver that counts test frames (IPv4 and IPv6).
#[derive(Debug)]
pub struct Receiver {
    sock: PacketSocket,
    mac: [u8; 6],
    mtu: u32,
    bufs: Vec<Vec<u8>>,
    lens: Vec<usize>,
    kinds: Vec<u8>,
    stamps: Vec<Option<u64>>,
    /// Frames timestamped in user space because the kernel attached no
    /// SO_TIMESTAMPNS stamp.
    pub user_stamps: u64,
    /// Per-stream counters.
    pub tally: RxTally,
    /// Frames received in all (test or not).
    pub frames_seen: u64,
}

/// The index of `iface` (in the calling thread's namespace).
pub(crate) fn interface_index(iface: &str) -> Result<u32, PacketError> {
    raw::ifindex(iface).map_err(|source| PacketError::NoInterface {
        iface: iface.to_string(),
        source,
    })
}

/// Maps a failed socket call `what` on `iface` to its error.
pub(crate) fn socket_error(
    iface: &str,
    what: &'static str,
) -> impl FnOnce(io::Error) -> PacketError {
    let iface = iface.to_string();
    move |source| PacketError::Socket {
        what,
        iface,
        source,
    }
}

impl Receiver {
    /// A receiver on `iface` (in the calling thread's namespace); each
    /// blocking wait lasts at most `poll`.
    pub fn open(iface: &str, poll: Duration) -> Result<Self, PacketError> {
        let sock_err = |what| socket_error(iface, what);
        let index = interface_index(iface)?;
        let mac = raw::hwaddr(iface).map_err(sock_err("SIOCGIFHWADDR"))?;
        let mtu = raw::mtu(iface).map_err(sock_err("SIOCGIFMTU"))?;
        // Every protocol: IPv4 and IPv6 test frames (others count as other).
        let sock =
            PacketSocket::open(index, raw::ETH_P_ALL).map_err(sock_err("AF_PACKET socket"))?;
        // Older kernels lack it; outgoing frames are then dropped by pkttype.
        let _ = sock.set_ignore_outgoing();
        let _ = sock.set_rcvbuf(32 << 20);
        // Without it every frame falls back to a user-space stamp (counted).
        let _ = sock.set_timestampns();
        sock.set_rcvtimeo(poll.as_micros().clamp(1000, 1_000_000) as i64)
            .map_err(sock_err("SO_RCVTIMEO"))?;
        Ok(Self {
            sock,
            mac,
            mtu,
            bufs: vec![vec![0u8; 16_384 + 64]; MAX_BATCH],
            lens: vec![0; MAX_BATCH],
            kinds: vec![0; MAX_BATCH],
            stamps: vec![None; MAX_BATCH],
            user_stamps: 0,
            tally: RxTally::new(),
            frames_seen: 0,
        })
    }

    /// The interface's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// Frames the socket dropped (receive queue full) since the last call:
    /// the receiver could not keep up, which is not loss in the device.
    pub fn take_drops(&mut self) -> u64 {
        self.sock.stats().map(|(_, d)| u64::from(d)).unwrap_or(0)
    }

    /// The interface's MTU (largest IP packet).
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// Receives one batch (waiting at most the poll time) and counts it.
    pub fn poll(&mut self) -> io::Result<usize> {
        let n = self.sock.recv_batch(
            &mut self.bufs,
            &mut self.lens,
            &mut self.kinds,
            &mut self.stamps,
        )?;
        if n == 0 {
            return Ok(0);
        }
        let user_ns = raw::realtime_ns();
        for i in 0..n {
            if self.kinds[i] == PACKET_OUTGOING {
                continue;
            }
            self.frames_seen += 1;
            let got = self.lens[i].min(self.bufs[i].len());
            let parsed =
                TestFrame::new_checked(&self.bufs[i][..got]).and_then(|v| TestFrameRepr::parse(&v));
            match parsed {
                Ok(r) => {
                    let rx_ns = self.stamps[i].unwrap_or_else(|| {
                        self.user_stamps += 1;
                        user_ns
                    });
                    self.tally.record(r.stream, r.seq, r.tx_ns, Some(rx_ns));
                }
                Err(_) => self.tally.other_frames += 1,
            }
        }
        Ok(n)
    }
}

/// The XDP receive counter on one interface: an XDP program counts the test
/// frames of each stream in the driver's receive path and drops them, but
/// for a sample it passes up the stack (to a [`Receiver`] on the same
/// interface, for the per-frame checks). Detached when dropped.
#[derive(Debug)]
pub struct RxCounter {
    counter: XdpCounter,
}

impl RxCounter {
    /// Attaches the counter to `iface` (in the calling thread's namespace).
    /// Fails when the interface already has an XDP program, or without
    /// CAP_BPF and CAP_NET_ADMIN.
    pub fn attach(iface: &str) -> Result<Self, PacketError> {
        let index = interface_index(iface)?;
        let counter = XdpCounter::attach(index).map_err(|source| PacketError::XdpCount {
            iface: iface.to_string(),
            source,
        })?;
        Ok(Self { counter })
    }

    /// Starts counting `stream` from zero, for a trial at `fps` (which sets
    /// the sample: [`linerate_core::rfc2544::sample_mask`]).
    pub fn open_stream(&self, stream: u16, fps: f64) -> io::Result<()> {
        self.counter.reset(stream)?;
        self.counter
            .set_sample_mask(linerate_core::rfc2544::sample_mask(fps))
    }

    /// Test frames of `stream` counted since [`Self::open_stream`].
    pub fn count(&self, stream: u16) -> io::Result<u64> {
        self.counter.count(stream)
    }

    /// The counting program's own cost per frame: a fresh counter, attached
    /// nowhere, run `repeat` times on `frame` by `BPF_PROG_TEST_RUN` (the
    /// kernel's mean time per run, CLOCK_MONOTONIC; the driver's receive
    /// path around it is not in it). Checks that it counted every run of
    /// the frame's stream and dropped it (a test frame of stream 0 or of a
    /// sampled stream would be passed otherwise). Returns ns per frame.
    pub fn program_ns(frame: &[u8], repeat: u32) -> Result<u32, String> {
        let bpf = |e: BpfError| linerate_core::error::chain(&e);
        let stream = TestFrame::new_checked(frame)
            .map_err(|e| e.to_string())?
            .stream();
        let c = XdpCounter::load().map_err(bpf)?;
        // Only a stream's first frame goes up: every other run is a drop.
        c.set_sample_mask(u64::MAX).map_err(|e| e.to_string())?;
        let (verdict, ns) = c.test_run(frame, repeat).map_err(bpf)?;
        let counted = c.count(stream).map_err(|e| e.to_string())?;
        if counted != u64::from(repeat.max(1)) || verdict != 1 {
            return Err(format!(
                "the counter counted {counted} of {repeat} runs, last verdict {verdict} (1 = drop)"
            ));
        }
        Ok(ns)
    }
}

/// Rates up to this go one frame per `BPF_PROG_TEST_RUN` call (a call of
/// one frame costs ~30 µs here, so pacing is per frame and every frame has
/// its own sequence number and stamp); above it, calls of many frames.
const LIVE_PER_FRAME_MAX_FPS: f64 = 10_000.0;
/// Time slice of one paced multi-frame call: `repeat` = rate × slice. A call
/// of more than one frame costs ~26 ms beyond its frames on this machine
/// (a measurement, as recorded in the commit
/// notes), so shorter slices would waste most of the time.
const LIVE_SLICE_S: f64 = 0.1;
/// `repeat` of the unpaced calls (ceiling): about one slice at the fastest
/// rate measured here.
const LIVE_MAX_REPEAT: u64 = 131_072;
/// `batch_size` of the live test runs (frames per redirect flush).
const LIVE_BATCH: u32 = 64;

/// The sum of a veth's `tx_queue_*_xdp_xmit` and `tx_queue_*_xdp_xmit_errors`
/// counters (`ethtool -S`, in the calling thread's namespace): frames this
/// device's `ndo_xdp_xmit` put on its peer's rings, and frames it refused
/// because a ring was full. `None` when the device has no such counters
/// (not a veth) or `ethtool` is missing.
pub fn xdp_xmit_counters(iface: &str) -> Option<(u64, u64)> {
    let out = Command::new("ethtool").args(["-S", iface]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    parse_xdp_xmit(&String::from_utf8_lossy(&out.stdout))
}

fn parse_xdp_xmit(text: &str) -> Option<(u64, u64)> {
    let (mut ok, mut err, mut found) = (0u64, 0u64, false);
    for line in text.lines() {
        let Some((k, v)) = line.trim().split_once(':') else {
            continue;
        };
        let Ok(v) = v.trim().parse::<u64>() else {
            continue;
        };
        if k.starts_with("tx_queue_") && k.ends_with("_xdp_xmit") {
            ok += v;
            found = true;
        } else if k.starts_with("tx_queue_") && k.ends_with("_xdp_xmit_errors") {
            err += v;
        }
    }
    found.then_some((ok, err))
}

impl FrameGenerator {
    /// The XDP live-frames path: each `BPF_PROG_TEST_RUN` call makes
    /// `repeat` identical frames in the kernel and redirects them out of the
    /// interface, back to back at the kernel's speed.
    ///
    /// Pacing: up to 10,000 frames/s, one frame per call on the token-bucket
    /// schedule of the other paths (each frame has its own sequence number
    /// and stamp). Above, one call per 100 ms slice carrying the slice's
    /// frames (up to 4 slices' worth to catch up after a late call): the
    /// long-term rate is exact, but the frames of a call leave as one burst
    /// (reported in `max_lag_frames`), and they share one sequence number
    /// (the call's) and one transmit stamp (CLOCK_REALTIME just before the
    /// call), reported in `identical_frames`. Unpaced (ceiling): calls of
    /// 131,072 frames.
    ///
    /// Sent frames: the veth's `xdp_xmit` counter delta where it has one
    /// (frames refused on a full ring count in `refused_frames`), else the
    /// frames handed to the calls. The offered rate is sent frames over the
    /// CLOCK_MONOTONIC time from the first call to the return of the last
    /// (per slice: to the end of the last call's slice, if later).
    fn run_live(
        &mut self,
        template: &TestFrameRepr,
        stream: u16,
        frames: u64,
        fps: Option<f64>,
        max_time: Duration,
    ) -> GenReport {
        let (frames, _, mut buf) = stream_frame(template, stream, frames);
        let mut rep = GenReport::asking(frames);
        let Some(live) = self.live.as_ref() else {
            return rep;
        };
        // (frames per call, how far ahead a call sends, catch-up factor)
        let (cap, ahead, catch_up) = match fps {
            None => (LIVE_MAX_REPEAT, 0.0, 1),
            Some(f) if f <= LIVE_PER_FRAME_MAX_FPS => (1, 0.0, 1),
            Some(f) => (
                ((f * LIVE_SLICE_S).ceil() as u64).clamp(1, LIVE_MAX_REPEAT * 8),
                LIVE_SLICE_S,
                4,
            ),
        };
        let before = xdp_xmit_counters(&self.iface);
        let mut queued = 0u64;
        let mut call = 0u32;
        let start = Instant::now();
        let mut last_return = start;
        let mut last_call = start;
        while queued < frames {
            let el = start.elapsed();
            if el > max_time {
                rep.timed_out = true;
                break;
            }
            let due = match fps {
                None => frames,
                // Per frame: the frame due now is sent now (as the other
                // paths do); per slice: the frames due by the slice's end.
                Some(f) if ahead > 0.0 => {
                    frames.min(((el.as_secs_f64() + ahead) * f).floor() as u64)
                }
                Some(f) => frames.min((el.as_secs_f64() * f).floor() as u64 + 1),
            };
            let ready = due > queued && (due - queued >= cap || due == frames);
            if !ready {
                if let Some(f) = fps {
                    // When the next call's frames are due.
                    let at = (queued + cap) as f64 / f - ahead;
                    let wait = at - el.as_secs_f64();
                    if wait > 300e-6 {
                        std::thread::sleep(Duration::from_secs_f64(wait - 150e-6));
                    } else {
                        std::hint::spin_loop();
                    }
                }
                continue;
            }
            let n = (due - queued).min(cap * catch_up);
            // Every frame of a call leaves back to back: that is the burst.
            rep.max_lag_frames = rep.max_lag_frames.max(n);
            rep.identical_frames = rep.identical_frames.max(n);
            stamp_frame(&mut buf[..], call, raw::realtime_ns());
            rep.batches += 1;
            last_call = Instant::now();
            match live.run(&buf, n as u32, LIVE_BATCH) {
                Ok(()) => {
                    queued += n;
                    call = call.wrapping_add(1);
                    last_return = Instant::now();
                }
                Err(e) => {
                    rep.errors += 1;
                    if rep.first_error.is_none() {
                        rep.first_error = Some(linerate_core::error::chain(&e));
                    }
                    // A refused test run does not get better by retrying.
                    if rep.errors > 10 {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        let after = xdp_xmit_counters(&self.iface);
        match (before, after) {
            (Some((ok0, err0)), Some((ok1, err1))) => {
                rep.sent_frames = ok1.saturating_sub(ok0).min(queued);
                rep.refused_frames = err1.saturating_sub(err0);
                rep.sent_from_device_counter = true;
                if queued > 0 && rep.sent_frames == 0 && rep.refused_frames == 0 {
                    // veth_xdp_xmit drops without counting when the peer has
                    // no NAPI (no XDP program, GRO off).
                    rep.errors += 1;
                    rep.first_error = Some(format!(
                        "{queued} frame(s) redirected, none reached the peer of {}: a veth peer needs NAPI for XDP frames (GRO on: `ethtool -K PEER gro on`, or an XDP program on it)",
                        self.iface
                    ));
                }
            }
            _ => rep.sent_frames = queued,
        }
        rep.elapsed = last_return.duration_since(start);
        if ahead > 0.0 && rep.batches > 0 {
            // A periodic burst: the last call's frames stand for its whole
            // slice, so the span ends at the slice's end (or the call's
            // return, if later). On schedule, offered = asked; a late call
            // shows as a lower rate.
            let slice_end = last_call.duration_since(start) + Duration::from_secs_f64(ahead);
            rep.elapsed = rep.elapsed.max(slice_end);
        }
        rep.close();
        rep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn veth_xdp_xmit_counters_are_summed_over_queues() {
        let text = "NIC statistics:\n     peer_ifindex: 2\n     rx_queue_0_xdp_packets: 9\n     tx_queue_0_xdp_xmit: 100\n     tx_queue_0_xdp_xmit_errors: 3\n     tx_queue_1_xdp_xmit: 5\n     tx_queue_1_xdp_xmit_errors: 1\n";
        assert_eq!(parse_xdp_xmit(text), Some((105, 4)));
        assert_eq!(parse_xdp_xmit("NIC statistics:\n     rx_bytes: 5\n"), None);
    }
}
