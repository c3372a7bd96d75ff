//! The link emulator: forwards frames between the two veth ends of each
//! emulated cable in a bed's link namespace, each frame leaving when
//! [`linerate_core::emu::Direction`] says (serialization at the link rate,
//! queue, delay, impairments).
//!
//! One thread serves every port of a bed: AF_PACKET sockets (all
//! protocols, outgoing frames ignored, non-blocking) whose frames arrive in
//! a memory-mapped receive ring (PACKET_RX_RING, TPACKET_V2: taking a frame
//! is a read of shared memory, no system call; `recvmmsg` where the kernel
//! refuses a ring), the kernel's receive stamp as each frame's arrival (so
//! the time the emulator takes to notice a frame is part of its wire time,
//! not added to it), departures on CLOCK_MONOTONIC, each send called the
//! fastest delivery to the far end measured at start ([`measure_delivery`])
//! before the frame's due time (so the send's own way is not added either,
//! and no frame arrives early).
//!
//! Keeping time on a host that also runs the test: the thread is real-time
//! (`SCHED_FIFO` at [`FIFO_PRIORITY`]), so the test's own threads (a
//! spinning client or reflector included) never hold the CPU a departure
//! needs; it holds the kernel's CPU latency request at 0, so idle CPUs
//! poll instead of halting and a wake-up takes microseconds; its timer
//! slack is 1 ns. It sleeps in `ppoll` until a frame arrives or the next
//! departure is a wake margin away (its timer's p99 overshoot measured at
//! start, plus 2 µs: [`Timing`]), then busy-waits to the due time. It never
//! spins while idle, so it takes no CPU from the test between frames. How
//! late each frame left behind its due time is counted: the emulator's own
//! added delay, reported with every result.
//!
//! What it counted is written every [`STATS_EVERY_NS`] to a stats file
//! ([`Stats`], JSON, replaced atomically), which any process measuring on
//! the bed reads before and after its test ([`read_stats`]). At the same
//! tick it checks its control file ([`control_path`], by modification time
//! and inode): new impairments for
//! its cables (a sweep's link rate), taken without losing a queued frame
//! and confirmed in the next stats ([`Stats::links`]).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use linerate_core::emu::{
    Capacity, Counters, Delivery, Direction, Impairments, Timing, WakeMargin, POLL_WINDOW_NS,
};
use serde::{Deserialize, Serialize};

use crate::packet::{interface_index, socket_error, PacketError};
use crate::sys::clock::{monotonic_ns, realtime_ns};
use crate::sys::emu::RxRing;
use crate::sys::packet::{self as raw, PacketSocket, ETH_P_ALL, MAX_BATCH, PACKET_OUTGOING};

/// Longest busy-wait at real-time priority without a sleep, ns: a flood
/// whose departures are closer together than the wake margin keeps the
/// emulator busy; beyond this it goes on at normal priority, yielding each
/// turn, so that a real-time thread never holds a CPU from the test's
/// threads and the kernel's softirq work (frames due meanwhile may leave
/// late, counted); it is real-time again at its next sleep.
pub const MAX_SPIN_RUN_NS: u64 = 200_000;
/// The emulator thread's real-time priority (`SCHED_FIFO`; 1 is the
/// lowest): above every normal thread, below the kernel's own real-time
/// threads.
pub const FIFO_PRIORITY: i32 = 10;
/// Timed sleeps measured at start to find the timer's overshoot.
const OVERSHOOT_SAMPLES: usize = 200;
/// Each of those sleeps, ns.
const OVERSHOOT_SLEEP_NS: u64 = 30_000;
/// A receive stamp older than this is not trusted as the arrival, ns (a
/// wake-up from idle takes up to ~350 µs in a VM; more means a stale stamp).
const STAMP_MAX_AGE_NS: u64 = 2_000_000;
/// Longest sleep when idle, ns (the stats file is rewritten after it).
const IDLE_SLEEP_NS: u64 = 50_000_000;
/// The stats file is rewritten this often, ns.
pub const STATS_EVERY_NS: u64 = 50_000_000;

/// Why the emulator stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// The interface or its raw socket failed (the same errors as the
    /// raw-frame generators').
    #[error(transparent)]
    Packet(#[from] PacketError),
    /// The stats file could not be written or read.
    #[error("emulator stats {path}")]
    Stats {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The control file could not be written.
    #[error("emulator control file {path}")]
    Control {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The stats file is not the emulator's.
    #[error("emulator stats {path} unreadable: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The calibration's frame source failed.
    #[error("calibration source")]
    Calibration(#[source] crate::netns::NetnsError),
    /// Measuring the delivery time (send call to the far end) failed.
    #[error("measuring the emulator's delivery time")]
    Delivery(#[source] io::Error),
}

/// One emulated cable: its two ports (veth ends in the link namespace) and
/// what each direction does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cable {
    /// A name for it (the host or DUT port it reaches, e.g. `a`).
    pub name: String,
    /// The port towards host a's side.
    pub west: String,
    /// The port towards host b's side.
    pub east: String,
    /// Frames entering at `west`, leaving at `east`.
    pub west_to_east: Impairments,
    /// Frames entering at `east`, leaving at `west`.
    pub east_to_west: Impairments,
}

/// What one cable counted, per direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CableStats {
    /// The cable's name.
    pub name: String,
    /// West to east.
    pub west_to_east: Counters,
    /// East to west.
    pub east_to_west: Counters,
}

/// The stats file: the emulator's identity, limit and counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// The emulator's process.
    pub pid: u32,
    /// CLOCK_MONOTONIC when written, ns.
    pub updated_mono_ns: u64,
    /// True once it forwards the bed's traffic (after calibrating).
    pub ready: bool,
    /// Its measured limit.
    pub capacity: Option<Capacity>,
    /// Per cable.
    pub cables: Vec<CableStats>,
    /// Why it stopped, if it did.
    pub stopped: Option<String>,
    /// How it keeps time on this host (absent in files of emulators that
    /// did not say).
    #[serde(default)]
    pub timing: Option<Timing>,
    /// The cables as it forwards them now: as started, or as the control
    /// file last set them ([`control_path`]); what a change of the link is
    /// read back from (absent in files of emulators before it).
    #[serde(default)]
    pub links: Vec<Cable>,
    /// Why the control file last read was refused (the cables stay as
    /// they were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_error: Option<String>,
    /// The largest MTU whose frames it forwards whole now (the smallest
    /// over its ports): its receive slots follow each interface's MTU at
    /// every stats write, which is what an MTU change is read back from
    /// (0 in files of emulators before it).
    #[serde(default)]
    pub mtu: u32,
}

impl Stats {
    /// Every cable's and direction's counts summed.
    pub fn total(&self) -> Counters {
        self.cables.iter().fold(Counters::default(), |t, c| {
            t.plus(&c.west_to_east).plus(&c.east_to_west)
        })
    }
}

/// Reads a stats file.
pub fn read_stats(path: &Path) -> Result<Stats, EmuError> {
    let text = std::fs::read_to_string(path).map_err(|source| EmuError::Stats {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| EmuError::Corrupt {
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}

/// Reads a stats file written at or after `after_mono_ns`, waiting up to
/// `wait` for the emulator's next write (it writes every
/// [`STATS_EVERY_NS`]); the last one read if none is that fresh.
pub fn read_stats_after(
    path: &Path,
    after_mono_ns: u64,
    wait: Duration,
) -> Result<Stats, EmuError> {
    let end = monotonic_ns() + u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
    loop {
        let s = read_stats(path)?;
        if s.updated_mono_ns >= after_mono_ns || monotonic_ns() > end || s.stopped.is_some() {
            return Ok(s);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The control file of the emulator writing `stats_path`
/// (`<bed>.emu.ctl` beside `<bed>.emu.stats`): the cables as JSON
/// ([`write_control`]). The emulator checks its modification time and inode at every
/// stats write (every [`STATS_EVERY_NS`]) and, when it changed, forwards
/// over the cables it holds from then on ([`Stats::links`] says so).
pub fn control_path(stats_path: &Path) -> PathBuf {
    stats_path.with_extension("ctl")
}

/// Writes the control file at `path` (whole: temporary file and rename, so
/// the emulator never reads half of it).
pub fn write_control(path: &Path, cables: &[Cable]) -> Result<(), EmuError> {
    let text = serde_json::to_string(cables).map_err(|e| EmuError::Corrupt {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    write_atomically(path, &text).map_err(|e| match e {
        EmuError::Stats { path, source } => EmuError::Control { path, source },
        e => e,
    })
}

/// The control file as the emulator follows it: its path and the
/// modification time and inode last read (each write is a new file by
/// rename, so a new inode even within one tick of the file system's
/// coarse clock).
struct Control {
    path: PathBuf,
    seen: Option<(std::time::SystemTime, u64)>,
}

impl Control {
    /// The cables of the control file when it changed since the last call
    /// (or why it cannot be read); `None` when it did not change or is
    /// absent.
    fn changed(&mut self) -> Option<Result<Vec<Cable>, String>> {
        let meta = std::fs::metadata(&self.path).ok()?;
        let now = (
            meta.modified().ok()?,
            std::os::unix::fs::MetadataExt::ino(&meta),
        );
        if self.seen == Some(now) {
            return None;
        }
        self.seen = Some(now);
        let text = std::fs::read_to_string(&self.path).map_err(|e| e.to_string());
        Some(text.and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string())))
    }
}

/// Takes a changed control file into `engine`, recording in `stats` the
/// cables now forwarded or why the file was refused.
fn follow_control(control: &mut Control, engine: &mut Engine, stats: &mut Stats) {
    let Some(wanted) = control.changed() else {
        return;
    };
    match wanted.and_then(|c| engine.reconfigure(&c).map(|()| c)) {
        Ok(cables) => {
            stats.links = cables;
            stats.control_error = None;
        }
        Err(why) => {
            eprintln!(
                "linerate emulator: control file {}: {why}",
                control.path.display()
            );
            stats.control_error = Some(why);
        }
    }
}

/// CLOCK_MONOTONIC now, ns: the stats file's clock.
pub fn now_mono_ns() -> u64 {
    monotonic_ns()
}

fn write_stats(path: &Path, s: &Stats) -> Result<(), EmuError> {
    write_atomically(path, &serde_json::to_string(s).unwrap_or_default())
}

/// Writes `text` to `path` through a temporary file and a rename.
fn write_atomically(path: &Path, text: &str) -> Result<(), EmuError> {
    let err = |source| EmuError::Stats {
        path: path.to_path_buf(),
        source,
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{}.tmp", name.unwrap_or_default()));
    std::fs::write(&tmp, text).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// Lets SIGTERM, SIGINT and SIGHUP end the calling thread's process again
/// (the emulator inherits its starter's blocked mask across exec; call it
/// first, before other threads exist).
pub fn default_termination_signals() -> io::Result<()> {
    crate::sys::signal::unblock(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP])
}

/// Sends `SIGTERM` (or `SIGKILL` with `hard`) to an emulator process;
/// false when it is gone.
pub fn signal(pid: u32, hard: bool) -> io::Result<bool> {
    let sig = if hard { libc::SIGKILL } else { libc::SIGTERM };
    crate::sys::emu::kill(pid, sig)
}

/// One port: its socket, its receive ring (or, where the kernel refuses
/// one, buffers for `recvmmsg`).
struct Port {
    iface: String,
    sock: PacketSocket,
    ring: Option<RxRing>,
    bufs: Vec<Vec<u8>>,
    /// The MTU its ring slots (or buffers) have room for.
    mtu_ready: u32,
    lens: Vec<usize>,
    kinds: Vec<u8>,
    stamps: Vec<Option<u64>>,
}

/// The receive room for frames of an interface with MTU `mtu`: the MTU,
/// the Ethernet header and a VLAN tag.
fn room_for(mtu: u32) -> usize {
    mtu as usize + 32
}

impl Port {
    fn open(iface: &str) -> Result<Self, EmuError> {
        let e = |what| socket_error(iface, what);
        let index = interface_index(iface)?;
        let mtu = raw::mtu(iface).map_err(e("SIOCGIFMTU"))?;
        let sock = PacketSocket::open(index, ETH_P_ALL).map_err(e("AF_PACKET socket"))?;
        sock.set_ignore_outgoing()
            .map_err(e("PACKET_IGNORE_OUTGOING"))?;
        sock.set_qdisc_bypass(true)
            .map_err(e("PACKET_QDISC_BYPASS"))?;
        let _ = sock.set_rcvbuf(8 << 20);
        let _ = sock.set_sndbuf(8 << 20);
        let _ = sock.set_timestampns();
        sock.set_nonblocking().map_err(e("O_NONBLOCK"))?;
        let room = room_for(mtu);
        let ring = RxRing::new(sock.raw_fd(), room).ok();
        let bufs = match ring {
            Some(_) => Vec::new(),
            None => vec![vec![0u8; room]; MAX_BATCH],
        };
        Ok(Self {
            iface: iface.to_string(),
            sock,
            ring,
            bufs,
            mtu_ready: mtu,
            lens: vec![0; MAX_BATCH],
            kinds: vec![0; MAX_BATCH],
            stamps: vec![None; MAX_BATCH],
        })
    }

    /// Makes room for its interface's MTU when it grew since the port was
    /// opened (a sweep's `mtu=9000` point): a frame longer than the ring's
    /// slots would arrive cut (and be counted `truncated`, not forwarded).
    /// A ring that cannot be set up again gives way to plain receives.
    fn fit_mtu(&mut self) -> Result<(), EmuError> {
        let mtu = raw::mtu(&self.iface).map_err(|source| PacketError::Socket {
            what: "SIOCGIFMTU",
            iface: self.iface.clone(),
            source,
        })?;
        if mtu <= self.mtu_ready {
            return Ok(());
        }
        let room = room_for(mtu);
        match self.ring.take().map(|r| r.resized(room)) {
            Some(Ok(ring)) => self.ring = Some(ring),
            Some(Err(_)) => self.bufs = vec![vec![0u8; room]; MAX_BATCH],
            None => self.bufs.iter_mut().for_each(|b| b.resize(room, 0)),
        }
        self.mtu_ready = mtu;
        Ok(())
    }

    /// Sends `frames` (all of EtherType `ethertype`) with one `sendmmsg`;
    /// returns how many the kernel took.
    fn send_run(&mut self, ethertype: u16, frames: &[&[u8]]) -> usize {
        self.sock.set_tx_protocol(ethertype);
        self.sock.send_batch(frames).unwrap_or(0)
    }
}

/// A frame's EtherType (0 for a runt).
fn ethertype(frame: &[u8]) -> u16 {
    match frame {
        [_, _, _, _, _, _, _, _, _, _, _, _, hi, lo, ..] => u16::from_be_bytes([*hi, *lo]),
        _ => 0,
    }
}

/// Frame buffers kept for reuse at most (the rest are freed after a burst).
const POOL_MAX: usize = 4096;

/// The forwarding engine: ports in pairs (cable `k` has ports `2k`, west,
/// and `2k + 1`, east); frames arriving at port `i` go through direction
/// `i` and leave at port `i ^ 1`.
struct Engine {
    names: Vec<String>,
    ports: Vec<Port>,
    dirs: Vec<Direction<Vec<u8>>>,
    /// Spare frame buffers (no allocation per frame).
    pool: Vec<Vec<u8>>,
    /// The frames of one departure batch, reused.
    batch: Vec<(Vec<u8>, u64)>,
    /// How it keeps time (set up in [`Engine::new`]).
    timing: Timing,
    /// Keeps idle CPUs polling while the engine lives (the kernel drops
    /// the request when this file closes).
    _cpu_latency: Option<std::fs::File>,
    /// When the current busy-wait began (the end of the last sleep).
    busy_since_ns: u64,
    /// The wake margin, raised by late timed wakes.
    margin: WakeMargin,
    /// The ports' descriptors, for `ppoll` (kept: no allocation a sleep).
    fds: Vec<std::os::fd::RawFd>,
    /// Whether the thread runs real-time now (it leaves real-time
    /// priority in a flood, see [`Engine::wait`]).
    realtime_now: bool,
    /// Every arrival is taken as this much earlier, ns, so each frame's
    /// send is called that long before its due time
    /// ([`Delivery::lead_ns`]; 0 unless [`Start::delivery`]).
    lead_ns: u64,
    /// When it last took a frame (CLOCK_MONOTONIC, ns): a polling engine
    /// polls until [`POLL_WINDOW_NS`] after it.
    last_frame_ns: u64,
}

/// How the emulator starts forwarding: what it measured at start and how
/// it waits.
#[derive(Debug, Clone, Copy, Default)]
pub struct Start {
    /// Its limit ([`calibrate`]), recorded in the stats.
    pub capacity: Option<Capacity>,
    /// Its send's delivery time ([`measure_delivery`]): each send is called
    /// its lead before the frame's due time (None: at the due time).
    pub delivery: Option<Delivery>,
    /// Poll the ports between frames instead of sleeping (`--emu-poll`).
    pub poll: bool,
}

impl Engine {
    fn new(cables: &[Cable], seed: u64) -> Result<Self, EmuError> {
        let (timing, cpu_latency) = keep_time();
        let mut ports = Vec::new();
        let mut dirs = Vec::new();
        for (k, c) in cables.iter().enumerate() {
            ports.push(Port::open(&c.west)?);
            ports.push(Port::open(&c.east)?);
            let s = seed.wrapping_add(2 * k as u64);
            dirs.push(Direction::new(c.west_to_east, s));
            dirs.push(Direction::new(c.east_to_west, s.wrapping_add(1)));
        }
        let fds = ports.iter().map(|p: &Port| p.sock.raw_fd()).collect();
        Ok(Self {
            names: cables.iter().map(|c| c.name.clone()).collect(),
            ports,
            dirs,
            pool: Vec::new(),
            batch: Vec::with_capacity(MAX_BATCH),
            timing,
            _cpu_latency: cpu_latency,
            busy_since_ns: monotonic_ns(),
            margin: WakeMargin::new(timing.wake_margin_ns),
            realtime_now: timing.realtime,
            fds,
            lead_ns: 0,
            last_frame_ns: 0,
        })
    }

    /// Takes what was measured at start and how to wait: each send is
    /// called the delivery's lead before its frame's due time, so the
    /// send's own way to the far end no longer adds to the wire time
    /// (every arrival moves by the same amount: the queue, each frame
    /// behind the one before it, is kept as it is).
    fn start(&mut self, start: &Start) {
        self.timing.delivery = start.delivery;
        self.timing.polls = start.poll;
        self.lead_ns = start.delivery.map_or(0, |d| d.lead_ns());
    }

    /// Gives every port room for its interface's MTU now
    /// ([`Port::fit_mtu`]) and returns the smallest: the largest MTU whose
    /// frames it forwards whole.
    fn fit_mtu(&mut self) -> Result<u32, EmuError> {
        for p in &mut self.ports {
            p.fit_mtu()?;
        }
        Ok(self.ports.iter().map(|p| p.mtu_ready).min().unwrap_or(0))
    }

    /// Receives what is queued at every port; false when a port is gone.
    fn receive(&mut self) -> Result<bool, EmuError> {
        let lead = self.lead_ns;
        let mut took_any = false;
        for (i, p) in self.ports.iter_mut().enumerate() {
            if let Some(ring) = &mut p.ring {
                let (dir, pool) = (&mut self.dirs[i], &mut self.pool);
                // At most a batch per port and step, so departures stay
                // on time under a flood.
                for _ in 0..MAX_BATCH {
                    let took = ring.take(|data, stamp, kind, whole| {
                        if kind == PACKET_OUTGOING {
                            return;
                        }
                        if !whole {
                            dir.counters.truncated += 1;
                            return;
                        }
                        let mut frame = pool.pop().unwrap_or_default();
                        frame.clear();
                        frame.extend_from_slice(data);
                        let arrival = arrival_of(Some(stamp)).saturating_sub(lead);
                        dir.arrive(arrival, data.len() as u32, frame);
                    });
                    if !took {
                        break;
                    }
                    took_any = true;
                }
                continue;
            }
            let n = match p
                .sock
                .recv_batch(&mut p.bufs, &mut p.lens, &mut p.kinds, &mut p.stamps)
            {
                Ok(n) => n,
                Err(e) if gone(&e) => return Ok(false),
                Err(source) => {
                    return Err(PacketError::Socket {
                        what: "recvmmsg",
                        iface: p.iface.clone(),
                        source,
                    }
                    .into())
                }
            };
            if n == 0 {
                continue;
            }
            took_any = true;
            for j in 0..n {
                if p.kinds[j] == PACKET_OUTGOING {
                    continue;
                }
                let len = p.lens[j];
                if len > p.bufs[j].len() {
                    self.dirs[i].counters.truncated += 1;
                    continue;
                }
                let arrival = arrival_of(p.stamps[j]).saturating_sub(lead);
                let mut frame = self.pool.pop().unwrap_or_default();
                frame.clear();
                frame.extend_from_slice(&p.bufs[j][..len]);
                self.dirs[i].arrive(arrival, len as u32, frame);
            }
        }
        if took_any {
            self.last_frame_ns = monotonic_ns();
        }
        Ok(true)
    }

    /// Sends every frame due by now: per direction, up to [`MAX_BATCH`]
    /// at a time, one `sendmmsg` per run of frames of one EtherType.
    fn depart(&mut self) {
        for i in 0..self.dirs.len() {
            loop {
                let now = monotonic_ns();
                while self.batch.len() < MAX_BATCH {
                    match self.dirs[i].pop_due(now) {
                        Some(f) => self.batch.push(f),
                        None => break,
                    }
                }
                if self.batch.is_empty() {
                    break;
                }
                let port = &mut self.ports[i ^ 1];
                let mut k = 0;
                while k < self.batch.len() {
                    let et = ethertype(&self.batch[k].0);
                    let run = self.batch[k..]
                        .iter()
                        .take_while(|(f, _)| ethertype(f) == et)
                        .count();
                    let frames: Vec<&[u8]> = self.batch[k..k + run]
                        .iter()
                        .map(|(f, _)| f.as_slice())
                        .collect();
                    let sent = if et == 0 {
                        0
                    } else {
                        port.send_run(et, &frames)
                    };
                    for (j, (_, due)) in self.batch[k..k + run].iter().enumerate() {
                        self.dirs[i].sent(*due, now, j < sent);
                    }
                    k += run;
                }
                for (f, _) in self.batch.drain(..) {
                    if self.pool.len() < POOL_MAX {
                        self.pool.push(f);
                    }
                }
            }
        }
    }

    fn next_due(&self) -> Option<u64> {
        self.dirs.iter().filter_map(Direction::next_due).min()
    }

    /// Waits for the next event: busy-waits for a departure due within the
    /// wake margin (at normal priority, yielding, after [`MAX_SPIN_RUN_NS`]
    /// of busy-waiting without a sleep: a flood shares the CPU with the
    /// test); otherwise sleeps in `ppoll` until a frame arrives or the next
    /// departure is a margin away.
    fn wait(&mut self) -> Result<(), EmuError> {
        let now = monotonic_ns();
        let margin = self.margin.ns();
        let next = self.next_due();
        if next.is_some_and(|d| d <= now + margin) {
            if now.saturating_sub(self.busy_since_ns) < MAX_SPIN_RUN_NS {
                std::hint::spin_loop();
                return Ok(());
            }
            // A flood: busy for longer than a departure's wait. It goes on
            // at normal priority, yielding each turn, so the test's threads
            // and the kernel's (softirq) share the CPU with it; real-time
            // again at its next sleep.
            if self.realtime_now {
                self.realtime_now = crate::sys::emu::set_normal().is_err();
            }
            std::thread::yield_now();
            return Ok(());
        }
        if self.timing.polls && now.saturating_sub(self.last_frame_ns) < POLL_WINDOW_NS {
            // Polling between frames: at normal priority, so that the
            // test's threads and the kernel's share the CPU with it.
            if self.realtime_now {
                self.realtime_now = crate::sys::emu::set_normal().is_err();
            }
            std::hint::spin_loop();
            return Ok(());
        }
        let sleep = next.map_or(IDLE_SLEEP_NS, |d| (d - now - margin).min(IDLE_SLEEP_NS));
        let fds = std::mem::take(&mut self.fds);
        let woke_by_frame = self.sleep(&fds, sleep);
        self.fds = fds;
        let woke_by_frame = woke_by_frame?;
        if next.is_some() && !woke_by_frame {
            // A timed wake for a departure: how late it came.
            let late = self.busy_since_ns.saturating_sub(now + sleep);
            self.margin.record(late);
        }
        Ok(())
    }

    /// Sleeps until one of `fds` is readable or `ns` pass; true when a
    /// descriptor woke it.
    fn sleep(&mut self, fds: &[std::os::fd::RawFd], ns: u64) -> Result<bool, EmuError> {
        if self.timing.realtime && !self.realtime_now {
            self.realtime_now = crate::sys::emu::set_fifo(FIFO_PRIORITY).is_ok();
        }
        let readable =
            crate::sys::emu::ppoll_readable(fds, ns).map_err(|source| PacketError::Socket {
                what: "ppoll",
                iface: self.ports[0].iface.clone(),
                source,
            })?;
        self.busy_since_ns = monotonic_ns();
        Ok(readable)
    }

    /// Adds the kernel's receive-ring drops to each direction.
    fn take_ring_drops(&mut self) {
        for (i, p) in self.ports.iter().enumerate() {
            if let Ok((_, drops)) = p.sock.stats() {
                self.dirs[i].counters.ring_drops += u64::from(drops);
            }
        }
    }

    /// False when a port's interface went away (its socket says
    /// ENETDOWN or ENODEV: a ring takes no system call that would).
    fn ports_alive(&self) -> bool {
        self.ports.iter().all(|p| {
            let err = crate::sys::emu::socket_error(p.sock.raw_fd()).unwrap_or(0);
            !matches!(err, libc::ENETDOWN | libc::ENODEV | libc::ENXIO)
        })
    }

    fn cable_stats(&self) -> Vec<CableStats> {
        self.names
            .iter()
            .enumerate()
            .map(|(k, name)| CableStats {
                name: name.clone(),
                west_to_east: self.dirs[2 * k].counters,
                east_to_west: self.dirs[2 * k + 1].counters,
            })
            .collect()
    }

    /// Takes new impairments for every cable (the same cables, in the
    /// same order: a sweep point's link rate), keeping the frames queued
    /// and the counters; the error says why it refused.
    fn reconfigure(&mut self, cables: &[Cable]) -> Result<(), String> {
        let same = cables.len() == self.names.len()
            && cables.iter().enumerate().all(|(k, c)| {
                c.name == self.names[k]
                    && c.west == self.ports[2 * k].iface
                    && c.east == self.ports[2 * k + 1].iface
            });
        if !same {
            return Err("its cables are not the ones forwarded (names or ports differ)".into());
        }
        for (k, c) in cables.iter().enumerate() {
            self.dirs[2 * k].set_impairments(c.west_to_east);
            self.dirs[2 * k + 1].set_impairments(c.east_to_west);
        }
        Ok(())
    }

    fn step(&mut self) -> Result<bool, EmuError> {
        let alive = self.receive()?;
        self.depart();
        Ok(alive)
    }
}

/// Sets the calling thread up to keep the emulator's time (real-time
/// priority, 1 ns timer slack, idle CPUs polling) and measures its timer's
/// overshoot; returns what it got and the CPU latency request to hold.
/// What the host refuses (no `CAP_SYS_NICE`, no `/dev/cpu_dma_latency`) is
/// left out and said in the [`Timing`].
fn keep_time() -> (Timing, Option<std::fs::File>) {
    use crate::sys::emu as sys;
    let _ = sys::set_timer_slack(1);
    let realtime = sys::set_fifo(FIFO_PRIORITY).is_ok();
    let held = sys::hold_cpu_latency(0).ok();
    let mut over: Vec<u64> = (0..OVERSHOOT_SAMPLES)
        .map(|_| {
            let t0 = monotonic_ns();
            let _ = sys::ppoll_readable(&[], OVERSHOOT_SLEEP_NS);
            (monotonic_ns() - t0).saturating_sub(OVERSHOOT_SLEEP_NS)
        })
        .collect();
    over.sort_unstable();
    let at = |q: f64| over[((over.len() - 1) as f64 * q).round() as usize];
    let (p50, p99) = (at(0.5), at(0.99));
    let timing = Timing {
        realtime,
        cpu_latency_held: held.is_some(),
        timer_overshoot_p50_ns: p50,
        timer_overshoot_p99_ns: p99,
        wake_margin_ns: Timing::margin_for(p99),
        delivery: None,
        polls: false,
    };
    (timing, held)
}

/// A frame's arrival on CLOCK_MONOTONIC: the kernel's receive stamp
/// (CLOCK_REALTIME) moved onto it, or now when there is none (one older
/// than [`STAMP_MAX_AGE_NS`] is not this arrival's: a stamp carried over
/// from elsewhere).
fn arrival_of(stamp_real_ns: Option<u64>) -> u64 {
    let (mono, real) = (monotonic_ns(), realtime_ns());
    stamp_real_ns
        .filter(|s| *s <= real && real - s < STAMP_MAX_AGE_NS)
        .map_or(mono, |s| mono - (real - s).min(mono))
}

/// Errors that mean the interface went away (the bed is going down).
fn gone(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENETDOWN | libc::ENXIO | libc::ENODEV)
    )
}

/// Forwards the bed's frames over `cables` (the calling thread must be in
/// the link namespace) until `stop` is set or a port disappears, writing
/// [`Stats`] to `stats_path`, as `start` says.
pub fn run(
    cables: &[Cable],
    start: &Start,
    stats_path: &Path,
    stop: &AtomicBool,
    seed: u64,
) -> Result<(), EmuError> {
    let mut engine = Engine::new(cables, seed)?;
    engine.start(start);
    let mut stats = Stats {
        pid: std::process::id(),
        updated_mono_ns: monotonic_ns(),
        ready: true,
        capacity: start.capacity,
        cables: engine.cable_stats(),
        stopped: None,
        timing: Some(engine.timing),
        links: cables.to_vec(),
        control_error: None,
        mtu: engine.fit_mtu()?,
    };
    let mut control = Control {
        path: control_path(stats_path),
        seen: None,
    };
    write_stats(stats_path, &stats)?;
    let mut next_write = monotonic_ns() + STATS_EVERY_NS;
    let result = loop {
        if stop.load(Ordering::Relaxed) {
            break Ok("stopped".to_string());
        }
        match engine.step() {
            Ok(true) => {}
            Ok(false) => break Ok("an interface of the link went away".to_string()),
            Err(e) => break Err(e),
        }
        let now = monotonic_ns();
        if now >= next_write {
            if !engine.ports_alive() {
                break Ok("an interface of the link went away".to_string());
            }
            engine.take_ring_drops();
            follow_control(&mut control, &mut engine, &mut stats);
            stats.mtu = engine.fit_mtu()?;
            stats.cables = engine.cable_stats();
            stats.updated_mono_ns = now;
            write_stats(stats_path, &stats)?;
            next_write = now + STATS_EVERY_NS;
        }
        engine.wait()?;
    };
    engine.take_ring_drops();
    stats.cables = engine.cable_stats();
    stats.updated_mono_ns = monotonic_ns();
    stats.stopped = Some(match &result {
        Ok(why) => why.clone(),
        Err(e) => linerate_core::error::chain(e),
    });
    write_stats(stats_path, &stats)?;
    result.map(|_| ())
}

/// The local experimental EtherType (IEEE 802): calibration frames no host
/// stack takes.
const CALIBRATION_ETHERTYPE: u16 = 0x88b5;

/// Measures the frames/s the emulator forwards on this host, west to east
/// over `cable` (the calling thread in the link namespace), with no
/// shaping: a thread in namespace `src_netns` sends minimum-size frames
/// (of a local experimental EtherType, to a locally administered address
/// no host owns) out of `src_iface` as fast as it can for `seconds`.
pub fn calibrate(
    cable: &Cable,
    src_netns: &str,
    src_iface: &str,
    seconds: f64,
) -> Result<Capacity, EmuError> {
    let plain = Cable {
        west_to_east: Impairments::rate(None),
        east_to_west: Impairments::rate(None),
        ..cable.clone()
    };
    let mut engine = Engine::new(std::slice::from_ref(&plain), 1)?;
    let run_ns = (seconds * 1e9) as u64;
    let iface = src_iface.to_string();
    let source =
        crate::netns::spawn_in(Some(src_netns), "lr-emu-cal", move || blast(&iface, run_ns))
            .map_err(EmuError::Calibration)?;
    let start = monotonic_ns();
    // Until the source is done, and a little longer to drain.
    // Under the same waits as when it forwards a bed's traffic (its rests
    // in a flood included), so the limit is the one a test meets.
    while !source.is_finished() || monotonic_ns() < start + run_ns {
        engine.step()?;
        engine.wait()?;
    }
    let drain_end = monotonic_ns() + 20_000_000;
    while monotonic_ns() < drain_end {
        engine.step()?;
        engine.wait()?;
    }
    let _ = source.join();
    engine.take_ring_drops();
    let c = engine.dirs[0].counters;
    Ok(Capacity {
        frames_per_s: c.forwarded as f64 / seconds,
        frame_bytes: 60,
        seconds,
        source_limited: c.ring_drops == 0,
    })
}

/// Calibration frames of each size sent to measure the delivery time.
const DELIVERY_SAMPLES: u32 = 200;
/// The gap between two of them, ns (the far end's stack is idle again).
const DELIVERY_GAP_NS: u64 = 20_000;

/// Measures how long the emulator's send takes to reach the far end: a
/// thread in namespace `dst_netns` receives on `dst_iface` (the peer of
/// `cable`'s west port) with kernel receive stamps while the calling thread
/// (in the link namespace) sends [`DELIVERY_SAMPLES`] 60-byte and as many
/// 1514-byte calibration frames out of the west port, each stamped
/// (CLOCK_REALTIME) just before its send call. Per frame: its receive stamp
/// at the far end minus that stamp, the same point where a host's socket
/// stamps what the emulator delivers.
pub fn measure_delivery(
    cable: &Cable,
    dst_netns: &str,
    dst_iface: &str,
) -> Result<Option<Delivery>, EmuError> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let iface = dst_iface.to_string();
    let receiver = crate::netns::spawn_in(Some(dst_netns), "lr-emu-dlv", move || {
        let got = receive_calibration(&iface, &ready_tx);
        let _ = ready_tx.send(false);
        got
    })
    .map_err(EmuError::Calibration)?;
    let started = ready_rx
        .recv_timeout(Duration::from_secs(2))
        .unwrap_or(false);
    let mut sent = Vec::new();
    if started {
        let mut sock = PacketSocket::open(interface_index(&cable.west)?, 0)
            .map_err(socket_error(&cable.west, "AF_PACKET socket"))?;
        sock.set_tx_protocol(CALIBRATION_ETHERTYPE);
        sock.set_qdisc_bypass(true)
            .map_err(socket_error(&cable.west, "PACKET_QDISC_BYPASS"))?;
        let mut frame = vec![0u8; 1514];
        frame[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
        frame[12..14].copy_from_slice(&CALIBRATION_ETHERTYPE.to_be_bytes());
        for seq in 0..2 * DELIVERY_SAMPLES {
            let len = if seq % 2 == 0 { 60 } else { 1514 };
            frame[14..18].copy_from_slice(&seq.to_be_bytes());
            let t = realtime_ns();
            if sock
                .send_batch(&[&frame[..len]])
                .map_err(EmuError::Delivery)?
                == 1
            {
                sent.push((seq, len, t));
            }
            let next = monotonic_ns() + DELIVERY_GAP_NS;
            while monotonic_ns() < next {
                std::hint::spin_loop();
            }
        }
    }
    let stamps = match receiver.join() {
        Ok(Ok(Ok(stamps))) => stamps,
        Ok(Ok(Err(e))) => return Err(EmuError::Delivery(e)),
        Ok(Err(e)) => return Err(EmuError::Calibration(e)),
        Err(_) => {
            return Err(EmuError::Delivery(io::Error::other(
                "its receiver panicked",
            )))
        }
    };
    let mut small = Vec::new();
    let mut large = Vec::new();
    for (seq, len, t) in sent {
        if let Some(rx) = stamps.iter().find(|(s, _)| *s == seq).map(|(_, rx)| *rx) {
            let d = rx.saturating_sub(t);
            if len == 60 {
                small.push(d)
            } else {
                large.push(d)
            }
        }
    }
    Ok(Delivery::of(&small, &large))
}

/// The far end of [`measure_delivery`]: receives calibration frames on
/// `iface` until [`DELIVERY_SAMPLES`] × 2 came or 1 s passed; says it is
/// ready (socket open) on `ready`. Returns (sequence, receive stamp).
fn receive_calibration(
    iface: &str,
    ready: &std::sync::mpsc::Sender<bool>,
) -> io::Result<Vec<(u32, u64)>> {
    let sock = PacketSocket::open(raw::ifindex(iface)?, CALIBRATION_ETHERTYPE)?;
    sock.set_timestampns()?;
    sock.set_rcvtimeo(100_000)?;
    let _ = ready.send(true);
    let mut bufs = vec![vec![0u8; 1600]; MAX_BATCH];
    let (mut lens, mut kinds, mut stamps) = (
        vec![0; MAX_BATCH],
        vec![0u8; MAX_BATCH],
        vec![None; MAX_BATCH],
    );
    let mut got = Vec::new();
    let end = monotonic_ns() + 1_000_000_000 + 2 * u64::from(DELIVERY_SAMPLES) * DELIVERY_GAP_NS;
    while got.len() < 2 * DELIVERY_SAMPLES as usize && monotonic_ns() < end {
        let n = sock.recv_batch(&mut bufs, &mut lens, &mut kinds, &mut stamps)?;
        for j in 0..n {
            if kinds[j] == PACKET_OUTGOING || lens[j] < 18 {
                continue;
            }
            if let Some(t) = stamps[j] {
                let seq = u32::from_be_bytes([bufs[j][14], bufs[j][15], bufs[j][16], bufs[j][17]]);
                got.push((seq, t));
            }
        }
    }
    Ok(got)
}

/// Sends 60-byte calibration frames out of `iface` for `run_ns`; returns
/// how many went.
fn blast(iface: &str, run_ns: u64) -> io::Result<u64> {
    let sock = PacketSocket::open(raw::ifindex(iface)?, 0)?;
    let mut sock = sock;
    sock.set_tx_protocol(CALIBRATION_ETHERTYPE);
    // Past the host's qdisc: a bed's back-pressure tbf would otherwise
    // measure the link rate, not the emulator.
    sock.set_qdisc_bypass(true)?;
    let _ = sock.set_sndbuf(4 << 20);
    let mut frame = [0u8; 60];
    frame[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    frame[12..14].copy_from_slice(&CALIBRATION_ETHERTYPE.to_be_bytes());
    let batch = [&frame[..]; MAX_BATCH];
    let end = monotonic_ns() + run_ns;
    let mut sent = 0u64;
    while monotonic_ns() < end {
        match sock.send_batch(&batch) {
            Ok(n) => sent += n as u64,
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => std::thread::yield_now(),
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_core::units::BitRate;

    fn cable(mbps: u64) -> Cable {
        let imp = Impairments::rate(Some(BitRate::from_mbps(mbps)));
        Cable {
            name: "a-b".into(),
            west: "lr-xa".into(),
            east: "lr-xb".into(),
            west_to_east: imp,
            east_to_west: imp,
        }
    }

    #[test]
    fn the_control_file_is_taken_once_per_change() {
        let dir = std::env::temp_dir().join(format!("lr-emu-ctl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let stats = dir.join("t.emu.stats");
        let path = control_path(&stats);
        assert_eq!(path, dir.join("t.emu.ctl"));
        let mut control = Control {
            path: path.clone(),
            seen: None,
        };
        // Absent: nothing to take.
        assert!(control.changed().is_none());
        write_control(&path, &[cable(10)]).unwrap();
        assert_eq!(control.changed(), Some(Ok(vec![cable(10)])));
        assert!(control.changed().is_none(), "taken once");
        // A rewrite (a new file by rename) is a change, at once.
        write_control(&path, &[cable(100)]).unwrap();
        assert_eq!(control.changed(), Some(Ok(vec![cable(100)])));
        // Written in place (same inode): its time tells, a tick later.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&path, "not json").unwrap();
        assert!(matches!(control.changed(), Some(Err(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
