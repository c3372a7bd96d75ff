//! A device-under-test harness: a generator thread on the sending
//! interface (inside its namespace) and a receiver thread on the receiving
//! interface (inside its namespace), driven one trial at a time.
//!
//! A trial (RFC 2544 section 23): the receiver opens a fresh stream id, the
//! generator sends the trial's frames, the harness waits the drain time for
//! residual frames (section 23 step C says 2 s), then closes the stream and
//! turns its counters into a [`TrialOutcome`] for the core procedure.

use std::net::IpAddr;
use std::sync::mpsc::{self, Receiver as Rx, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use linerate_core::linerate::{ETH_HEADER_BYTES, FCS_BYTES, MAX_UNTAGGED_FRAME_BYTES};
use linerate_core::procedure::rfc2544::rx::StreamCounter;
use linerate_core::procedure::rfc2544::{TrialOutcome, TrialSpec};
use linerate_core::wire::testframe::TestFrameRepr;

use crate::netns::{spawn_in, NetnsError};
use crate::packet::{FrameGenerator, GenReport, Generator, PacketError, Receiver, RxCounter};

pub use linerate_core::rfc2544::{Endpoint, RxPath};

/// Harness settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessConfig {
    /// Sending end.
    pub tx: Endpoint,
    /// Receiving end.
    pub rx: Endpoint,
    /// Use PACKET_QDISC_BYPASS (refused on shaped interfaces).
    pub qdisc_bypass: bool,
    /// How frames are handed to the kernel.
    pub path: Generator,
    /// Sender threads of the `sendmmsg` and TX-ring paths, each with its
    /// own socket (at least 1; the other paths send from one).
    pub sender_threads: usize,
    /// How the receiver counts them.
    pub rx_path: RxPath,
    /// Source of the frames (198.18.0.0/15 or 2001:2::/48).
    pub src_ip: IpAddr,
    /// Destination of the frames (same family as the source).
    pub dst_ip: IpAddr,
    /// Destination MAC of the frames: the receiving interface's own
    /// (`None`, for a bridge or a cable) or a router's (see [`mac_in`]).
    pub dst_mac: Option<[u8; 6]>,
}

/// The MAC address of `iface` in namespace `netns` (read from a thread
/// inside it): e.g. the router port a generator must address.
pub fn mac_in(netns: Option<&str>, iface: &str) -> Result<[u8; 6], HarnessError> {
    let name = iface.to_string();
    let h = spawn_in(netns, "lr-mac", move || crate::packet::iface_mac(&name))?;
    match h.join() {
        Ok(Ok(r)) => r.map_err(HarnessError::from),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(HarnessError::Worker("mac lookup")),
    }
}

/// Why the harness failed.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A thread could not enter its namespace.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// A socket could not be opened.
    #[error(transparent)]
    Packet(#[from] PacketError),
    /// A frame size the test frame cannot have.
    #[error("frame size {0}: {1}")]
    Frame(u32, String),
    /// No test frame reached the receiver.
    #[error("no test frame from {tx} reached {rx} within {waited:?}: the path does not forward (link down, bridge port not forwarding, wrong interface?)")]
    NoPath {
        /// Sending interface.
        tx: String,
        /// Receiving interface.
        rx: String,
        /// How long it tried.
        waited: Duration,
    },
    /// The generator sent nothing and said why (e.g. XDP live frames that
    /// vanish at a veth peer without NAPI).
    #[error("generator on {iface}: {why}")]
    Generator {
        /// Sending interface.
        iface: String,
        /// The generator's first error.
        why: String,
    },
    /// The XDP counter could not be read.
    #[error("XDP counter on {iface}: {why}")]
    Counter {
        /// Receiving interface.
        iface: String,
        /// What failed.
        why: String,
    },
    /// A worker thread ended early.
    #[error("the {0} thread ended unexpectedly")]
    Worker(&'static str),
}

enum GenCmd {
    Run {
        template: TestFrameRepr,
        stream: u16,
        frames: u64,
        fps: Option<f64>,
        max_time: Duration,
    },
}

/// What the receiver knows of a closed stream.
struct Closed {
    /// Per-frame counts (of every frame, or of the XDP counter's sample).
    counter: Option<StreamCounter>,
    /// Frames the AF_PACKET socket dropped itself.
    drops: u64,
    /// Frames with user-space receive stamps, so far.
    user_stamps: u64,
    /// The XDP counter's count of the stream (with that receive path).
    count: Option<Result<u64, String>>,
}

enum RxCmd {
    /// Stream, frames expected, rate, acknowledgement.
    Open(u16, u64, f64, Sender<Result<(), String>>),
    Close(u16, Sender<Closed>),
}

/// The running harness. Dropping it stops both threads.
#[derive(Debug)]
pub struct Harness {
    cfg: HarnessConfig,
    gen: Option<Sender<GenCmd>>,
    gen_reply: Rx<GenReport>,
    rx: Option<Sender<RxCmd>>,
    threads: Vec<JoinHandle<Result<(), NetnsError>>>,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    mtu: u32,
    next_stream: u16,
    /// Frames the receiver saw that were not of an open stream.
    pub other_frames: u64,
    /// Test frames so far whose receive time is a user-space stamp because
    /// the kernel attached no SO_TIMESTAMPNS stamp.
    pub rx_user_stamps: u64,
    /// With the XDP counter: sampled frames the sampling socket dropped so
    /// far (fewer per-frame checks; the count has them all).
    pub rx_sample_drops: u64,
}

impl std::fmt::Debug for GenCmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GenCmd")
    }
}
impl std::fmt::Debug for RxCmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RxCmd")
    }
}

impl Harness {
    /// Starts the generator and receiver threads in their namespaces.
    ///
    /// Interface settings a generator needs (GRO at a veth peer for XDP
    /// live frames) are the caller's to make, through the bed: the harness
    /// changes no interface.
    pub fn start(cfg: HarnessConfig) -> Result<Self, HarnessError> {
        let (gen_tx, gen_rx) = mpsc::channel::<GenCmd>();
        let (rep_tx, rep_rx) = mpsc::channel::<GenReport>();
        // One ready channel per thread, its only sender moved into it: a
        // thread that ends before opening (a namespace it cannot enter)
        // drops the sender, and the wait below ends instead of hanging.
        let (ready, ready_rx) = mpsc::channel::<Result<([u8; 6], u32), PacketError>>();
        let iface = cfg.tx.iface.clone();
        let bypass = cfg.qdisc_bypass;
        let path = cfg.path;
        let threads = cfg.sender_threads;
        let gen_thread = spawn_in(cfg.tx.netns.as_deref(), "lr-gen", move || {
            let mut g = match FrameGenerator::open_threads(&iface, bypass, path, threads) {
                Ok(g) => g,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            let _ = ready.send(Ok((g.mac(), g.mtu())));
            while let Ok(GenCmd::Run {
                template,
                stream,
                frames,
                fps,
                max_time,
            }) = gen_rx.recv()
            {
                let r = g.run(&template, stream, frames, fps, max_time);
                if rep_tx.send(r).is_err() {
                    break;
                }
            }
        })?;
        let mut threads = vec![gen_thread];
        let (src_mac, tx_mtu) = Self::wait_ready(&ready_rx, &mut threads, "generator")?;

        let (rx_tx, rx_rx) = mpsc::channel::<RxCmd>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<([u8; 6], u32), PacketError>>();
        let iface = cfg.rx.iface.clone();
        let rx_path = cfg.rx_path;
        let rx_thread = spawn_in(cfg.rx.netns.as_deref(), "lr-rx", move || {
            // The counter first: the sampling socket then sees only what
            // it passes.
            let counter = match rx_path {
                RxPath::XdpCount => match RxCounter::attach(&iface) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                },
                RxPath::AfPacket => None,
            };
            let mut r = match Receiver::open(&iface, Duration::from_millis(20)) {
                Ok(r) => r,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let _ = ready_tx.send(Ok((r.mac(), r.mtu())));
            loop {
                loop {
                    match rx_rx.try_recv() {
                        Ok(RxCmd::Open(s, n, fps, ack)) => {
                            r.tally.open(s, n);
                            let _ = r.take_drops();
                            let opened = counter.as_ref().map_or(Ok(()), |c| {
                                c.open_stream(s, fps).map_err(|e| e.to_string())
                            });
                            let _ = ack.send(opened);
                        }
                        Ok(RxCmd::Close(s, reply)) => {
                            let _ = reply.send(Closed {
                                drops: r.take_drops(),
                                counter: r.tally.close(s),
                                user_stamps: r.user_stamps,
                                count: counter
                                    .as_ref()
                                    .map(|c| c.count(s).map_err(|e| e.to_string())),
                            });
                        }
                        Err(mpsc::TryRecvError::Empty) => break,
                        Err(mpsc::TryRecvError::Disconnected) => return,
                    }
                }
                if r.poll().is_err() {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        })?;
        threads.push(rx_thread);
        let (dst_mac, rx_mtu) = match Self::wait_ready(&ready_rx, &mut threads, "receiver") {
            Ok(m) => m,
            Err(e) => {
                drop(gen_tx);
                for t in threads {
                    let _ = t.join();
                }
                return Err(e);
            }
        };
        let override_mac = cfg.dst_mac;
        Ok(Self {
            cfg,
            gen: Some(gen_tx),
            gen_reply: rep_rx,
            rx: Some(rx_tx),
            threads,
            src_mac,
            dst_mac: override_mac.unwrap_or(dst_mac),
            mtu: tx_mtu.min(rx_mtu),
            next_stream: 1,
            other_frames: 0,
            rx_user_stamps: 0,
            rx_sample_drops: 0,
        })
    }

    fn wait_ready(
        ready: &Rx<Result<([u8; 6], u32), PacketError>>,
        threads: &mut Vec<JoinHandle<Result<(), NetnsError>>>,
        who: &'static str,
    ) -> Result<([u8; 6], u32), HarnessError> {
        match ready.recv() {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => {
                // The thread ended before opening: a namespace error.
                if let Some(t) = threads.pop() {
                    if let Ok(Err(e)) = t.join() {
                        return Err(e.into());
                    }
                }
                Err(HarnessError::Worker(who))
            }
        }
    }

    /// The MAC addresses (sender, receiver).
    pub fn macs(&self) -> ([u8; 6], [u8; 6]) {
        (self.src_mac, self.dst_mac)
    }

    /// The generator's send path.
    pub fn path(&self) -> Generator {
        self.cfg.path
    }

    /// The threads the generator sends from, each with its own socket.
    pub fn sender_threads(&self) -> u32 {
        let asked = u32::try_from(self.cfg.sender_threads).unwrap_or(u32::MAX);
        linerate_core::rfc2544::sender_threads(self.cfg.path, Some(asked), 1)
    }

    /// The receiver's counting path.
    pub fn rx_path(&self) -> RxPath {
        self.cfg.rx_path
    }

    /// The smaller MTU of the two interfaces.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// The test frame of `frame_bytes`; it must fit the interfaces' MTU.
    pub fn template(&self, frame_bytes: u32) -> Result<TestFrameRepr, HarnessError> {
        let l3 = frame_bytes.saturating_sub(ETH_HEADER_BYTES + FCS_BYTES);
        if l3 > self.mtu {
            return Err(HarnessError::Frame(
                frame_bytes,
                format!(
                    "needs an MTU of at least {l3} on {} and {}; the smaller is {}",
                    self.cfg.tx.iface, self.cfg.rx.iface, self.mtu
                ),
            ));
        }
        TestFrameRepr::for_frame_size(
            frame_bytes,
            frame_bytes > MAX_UNTAGGED_FRAME_BYTES,
            self.src_mac,
            self.dst_mac,
            self.cfg.src_ip,
            self.cfg.dst_ip,
        )
        .map_err(|e| HarnessError::Frame(frame_bytes, e.to_string()))
    }

    fn stream(&mut self) -> u16 {
        let s = self.next_stream;
        self.next_stream = self.next_stream.wrapping_add(1).max(1);
        s
    }

    fn generate(
        &mut self,
        template: TestFrameRepr,
        stream: u16,
        frames: u64,
        fps: Option<f64>,
        max_time: Duration,
    ) -> Result<GenReport, HarnessError> {
        let gen = self.gen.as_ref().ok_or(HarnessError::Worker("generator"))?;
        gen.send(GenCmd::Run {
            template,
            stream,
            frames,
            fps,
            max_time,
        })
        .map_err(|_| HarnessError::Worker("generator"))?;
        self.gen_reply
            .recv()
            .map_err(|_| HarnessError::Worker("generator"))
    }

    /// Runs one trial and waits `drain` for residual frames.
    pub fn trial(
        &mut self,
        spec: &TrialSpec,
        drain: Duration,
    ) -> Result<(TrialOutcome, GenReport), HarnessError> {
        let template = self.template(spec.frame_bytes)?;
        let stream = self.stream();
        let rx = self.rx.clone().ok_or(HarnessError::Worker("receiver"))?;
        let (ack_tx, ack_rx) = mpsc::channel();
        rx.send(RxCmd::Open(stream, spec.frames, spec.fps, ack_tx))
            .map_err(|_| HarnessError::Worker("receiver"))?;
        let iface = self.cfg.rx.iface.clone();
        let counter_err = move |why| HarnessError::Counter { iface, why };
        ack_rx
            .recv()
            .map_err(|_| HarnessError::Worker("receiver"))?
            .map_err(counter_err.clone())?;
        // Allow a generator 5 % + 100 ms beyond the trial's own length: one
        // that needs more is short of the rate anyway.
        let max_time = spec.duration().mul_f64(1.05) + Duration::from_millis(100);
        let rep = self.generate(template, stream, spec.frames, Some(spec.fps), max_time)?;
        std::thread::sleep(drain);
        let (c_tx, c_rx) = mpsc::channel();
        rx.send(RxCmd::Close(stream, c_tx))
            .map_err(|_| HarnessError::Worker("receiver"))?;
        let closed = c_rx.recv().map_err(|_| HarnessError::Worker("receiver"))?;
        let counter = closed.counter.unwrap_or_default();
        self.rx_user_stamps = closed.user_stamps;
        let count = closed.count.transpose().map_err(counter_err)?;
        // With the XDP counter the socket only gets a sample: its drops
        // thin the per-frame checks, not the count.
        let receiver_drops = if count.is_some() {
            self.rx_sample_drops += closed.drops;
            0
        } else {
            closed.drops
        };
        // XDP live frames above 10,000 frames/s: every frame of one call
        // carries the same sequence number, so duplicates cannot be told
        // apart (see `received_frames`).
        let c = counter.counts();
        let (received, duplicates) =
            linerate_core::rfc2544::received_frames(&c, count, rep.identical_frames > 1);
        Ok((
            TrialOutcome {
                sent_frames: rep.sent_frames,
                received_frames: received,
                offered_fps: rep.offered_fps,
                duplicates,
                reordered: c.reordered,
                receiver_drops,
                latency: Some(counter.latency),
            },
            rep,
        ))
    }

    /// RFC 2544 section 23 step A ("learning frames"), and a path check:
    /// sends bursts of 10 test frames until one arrives, at most `timeout`.
    /// Returns how long that took. Freshly made interfaces and bridge ports
    /// drop frames for a moment (carrier coming up), which must not count
    /// against the first trial.
    pub fn warm_up(
        &mut self,
        frame_bytes: u32,
        timeout: Duration,
    ) -> Result<Duration, HarnessError> {
        let start = std::time::Instant::now();
        let spec = TrialSpec {
            frame_bytes,
            fps: 1000.0,
            frames: 10,
        };
        loop {
            let (o, rep) = self.trial(&spec, Duration::from_millis(50))?;
            if o.received_frames > 0 {
                return Ok(start.elapsed());
            }
            if rep.sent_frames == 0 {
                if let Some(why) = rep.first_error {
                    return Err(HarnessError::Generator {
                        iface: self.cfg.tx.iface.clone(),
                        why,
                    });
                }
            }
            if start.elapsed() > timeout {
                return Err(HarnessError::NoPath {
                    tx: self.cfg.tx.iface.clone(),
                    rx: self.cfg.rx.iface.clone(),
                    waited: start.elapsed(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The generator's own ceiling for `frame_bytes`: frames offered as fast
    /// as possible for `time`, counted as the kernel accepted them. The
    /// frames go out on the link like any other (stream 0, not counted).
    pub fn ceiling(&mut self, frame_bytes: u32, time: Duration) -> Result<GenReport, HarnessError> {
        let template = self.template(frame_bytes)?;
        self.generate(template, 0, u64::from(u32::MAX), None, time)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.gen = None;
        self.rx = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
