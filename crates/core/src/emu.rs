//! The link emulator's departure schedule, sans IO: a cable with a wire.
//!
//! A frame that arrives at one end of an emulated link leaves the other end
//! after its **serialization time** at the link rate (its wire bytes: frame
//! with FCS, padded to the 64-byte minimum, plus preamble/SFD and
//! inter-frame gap, [`wire_bytes_of_frame`]), **queued behind the frames
//! before it** (the wire carries one frame at a time), plus an optional
//! **propagation delay** with jitter. Optional random loss, duplication and
//! reordering follow netem's meanings; a **queue limit** (bytes or frames
//! waiting for the wire) drops at the tail and counts it.
//!
//! [`Direction`] is one direction of one link: the caller passes the time
//! (ns on its clock, CLOCK_MONOTONIC in the emulator) and random numbers
//! ([`SplitMix64`]); this never reads a clock. The wire itself is a
//! [`Pacer`]: the start of frame `n` is due when the bytes before it have
//! left, and an idle wire restarts the schedule at the frame's arrival.
//! [`Account`] is what the emulator counts, and [`assess`] turns its
//! change over a test into flags (`emulator_limited`, `link_queue_drops`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::linerate::{FCS_BYTES, MIN_FRAME_BYTES, WIRE_OVERHEAD_BYTES};
use crate::pace::Pacer;
use crate::result::Flag;
use crate::units::BitRate;

/// Wire bytes of a frame whose bytes from destination MAC to the end of the
/// payload (a veth's `skb->len`, what AF_PACKET hands over) are `len`: plus
/// FCS, padded to the minimum frame, plus preamble/SFD and inter-frame gap
/// (the line-rate model's figures; tbf's `overhead 24 mpu 84`).
pub fn wire_bytes_of_frame(len: u32) -> u32 {
    (len + FCS_BYTES).max(MIN_FRAME_BYTES) + WIRE_OVERHEAD_BYTES
}

/// The queue limit of one direction: frames waiting for (or on) the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueLimit {
    /// At most this many frame bytes (as received, without wire overhead).
    Bytes(u64),
    /// At most this many frames.
    Frames(u64),
}

impl QueueLimit {
    /// The default: 1000 frames (a Linux `txqueuelen`).
    pub const DEFAULT: Self = Self::Frames(1000);

    /// `64k`, `1500000b`, `100p` (frames), `1000` (frames).
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        let bad = || {
            format!("'{s}' is not a queue limit (e.g. 1000 or 1000p for frames, 64k or 96000b for bytes)")
        };
        let num = |x: &str| x.trim().parse::<u64>().map_err(|_| bad());
        let v = if let Some(n) = t.strip_suffix('p') {
            Self::Frames(num(n)?)
        } else if let Some(n) = t.strip_suffix("kb").or_else(|| t.strip_suffix('k')) {
            Self::Bytes(num(n)?.saturating_mul(1000))
        } else if let Some(n) = t.strip_suffix("mb").or_else(|| t.strip_suffix('m')) {
            Self::Bytes(num(n)?.saturating_mul(1_000_000))
        } else if let Some(n) = t.strip_suffix('b') {
            Self::Bytes(num(n)?)
        } else {
            Self::Frames(num(&t)?)
        };
        match v {
            Self::Bytes(0) | Self::Frames(0) => Err(format!("queue limit '{s}' is zero")),
            v => Ok(v),
        }
    }
}

impl std::fmt::Display for QueueLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Bytes(b) => write!(f, "{b} B"),
            Self::Frames(n) => write!(f, "{n} frames"),
        }
    }
}

/// What one direction of an emulated link does to frames.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Impairments {
    /// Link rate (None: no serialization delay, frames pass at once).
    #[serde(rename = "rate_bits_per_s")]
    #[schemars(with = "Option<u64>")]
    pub rate: Option<BitRate>,
    /// Propagation delay added after serialization, ns.
    pub delay_ns: u64,
    /// Jitter: the delay of each frame is drawn uniformly from
    /// `delay ± jitter` (never below 0); frames keep their order.
    pub jitter_ns: u64,
    /// Random loss, parts per million of arriving frames.
    pub loss_ppm: u32,
    /// Random duplication, parts per million (the copy is serialized too).
    pub duplicate_ppm: u32,
    /// Random reordering, parts per million: such a frame skips the
    /// propagation delay (netem's meaning), so it overtakes the frames in
    /// flight; without a delay it changes nothing.
    pub reorder_ppm: u32,
    /// Tail-drop limit of the queue waiting for the wire.
    pub limit: QueueLimit,
}

impl Impairments {
    /// A link of `rate` and nothing else, with the default queue limit.
    pub fn rate(rate: Option<BitRate>) -> Self {
        Self {
            rate,
            delay_ns: 0,
            jitter_ns: 0,
            loss_ppm: 0,
            duplicate_ppm: 0,
            reorder_ppm: 0,
            limit: QueueLimit::DEFAULT,
        }
    }
}

pub use crate::stats::splitmix::SplitMix64;

/// The emulator's random draws.
trait Draws {
    /// True with probability `ppm` per million.
    fn chance(&mut self, ppm: u32) -> bool;
    /// Uniform in `[-span, span]`.
    fn spread(&mut self, span: u64) -> i64;
}

impl Draws for SplitMix64 {
    fn chance(&mut self, ppm: u32) -> bool {
        ppm > 0 && self.next_u64() % 1_000_000 < u64::from(ppm)
    }

    fn spread(&mut self, span: u64) -> i64 {
        if span == 0 {
            return 0;
        }
        let width = span.saturating_mul(2).saturating_add(1);
        i64::try_from(self.next_u64() % width).unwrap_or(0) - i64::try_from(span).unwrap_or(0)
    }
}

/// What the emulator counted, since it started (one direction, or summed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Counters {
    /// Frames that arrived at the link's ingress.
    pub arrived: u64,
    /// Frames sent out of the egress (copies included).
    pub forwarded: u64,
    /// Frames dropped at the tail of the queue (the `--limit`).
    pub queue_drops: u64,
    /// Frames dropped on purpose (`--loss`).
    pub lost: u64,
    /// Copies made (`--duplicate`).
    pub duplicated: u64,
    /// Frames sent ahead of the delay line (`--reorder`).
    pub reordered: u64,
    /// Frames the kernel could not hand to the emulator (its receive ring
    /// was full: the emulator fell behind), PACKET_STATISTICS `tp_drops`.
    pub ring_drops: u64,
    /// Frames the emulator could not send (the egress refused them).
    pub send_errors: u64,
    /// Departures later than their due time by more than [`LATE_NS`].
    pub late: u64,
    /// Sum of those departures' lateness, ns.
    pub late_total_ns: u64,
    /// The largest lateness of any departure, ns.
    pub late_max_ns: u64,
    /// Sum over every departure of how long after its due time it left,
    /// ns: the emulator's own reaction (noticing the frame, its copy, the
    /// wait for the send) beyond the schedule, which the wire does not
    /// have (absent in documents before it was counted).
    #[serde(default)]
    pub lag_total_ns: u64,
    /// Frames longer than the emulator's receive slots (its interface's
    /// MTU grew before it followed), which it did not forward (absent in
    /// documents before it was counted).
    #[serde(default)]
    pub truncated: u64,
}

/// A departure counts as late beyond this (ns): the emulator busy-waits
/// the last microseconds, so an on-time departure leaves within about a
/// microsecond of its due time; one 5 µs late was descheduled or behind.
pub const LATE_NS: u64 = 5_000;

impl Counters {
    /// The counts of `self` minus those of an earlier reading `before`.
    /// The maximum lateness is not a sum: it is the later reading's when
    /// departures left late in between (an upper bound of theirs), else at
    /// most [`LATE_NS`] (none in between was later than that; an earlier
    /// maximum is not this interval's).
    pub fn since(&self, before: &Self) -> Self {
        Self {
            arrived: self.arrived.saturating_sub(before.arrived),
            forwarded: self.forwarded.saturating_sub(before.forwarded),
            queue_drops: self.queue_drops.saturating_sub(before.queue_drops),
            lost: self.lost.saturating_sub(before.lost),
            duplicated: self.duplicated.saturating_sub(before.duplicated),
            reordered: self.reordered.saturating_sub(before.reordered),
            ring_drops: self.ring_drops.saturating_sub(before.ring_drops),
            send_errors: self.send_errors.saturating_sub(before.send_errors),
            late: self.late.saturating_sub(before.late),
            late_total_ns: self.late_total_ns.saturating_sub(before.late_total_ns),
            late_max_ns: if self.late > before.late {
                self.late_max_ns
            } else {
                self.late_max_ns.min(LATE_NS)
            },
            lag_total_ns: self.lag_total_ns.saturating_sub(before.lag_total_ns),
            truncated: self.truncated.saturating_sub(before.truncated),
        }
    }

    /// The sum of two directions' counts.
    pub fn plus(&self, o: &Self) -> Self {
        Self {
            arrived: self.arrived + o.arrived,
            forwarded: self.forwarded + o.forwarded,
            queue_drops: self.queue_drops + o.queue_drops,
            lost: self.lost + o.lost,
            duplicated: self.duplicated + o.duplicated,
            reordered: self.reordered + o.reordered,
            ring_drops: self.ring_drops + o.ring_drops,
            send_errors: self.send_errors + o.send_errors,
            late: self.late + o.late,
            late_total_ns: self.late_total_ns + o.late_total_ns,
            late_max_ns: self.late_max_ns.max(o.late_max_ns),
            lag_total_ns: self.lag_total_ns + o.lag_total_ns,
            truncated: self.truncated + o.truncated,
        }
    }

    /// The mean lag of a departure behind its due time, ns (None before
    /// any departure): the emulator's own added delay per frame.
    pub fn mean_lag_ns(&self) -> Option<f64> {
        (self.forwarded > 0).then(|| self.lag_total_ns as f64 / self.forwarded as f64)
    }

    /// Records a departure at `now_ns` of a frame due at `due_ns`.
    pub fn departed(&mut self, due_ns: u64, now_ns: u64) {
        self.forwarded += 1;
        let late = now_ns.saturating_sub(due_ns);
        self.lag_total_ns += late;
        if late > LATE_NS {
            self.late += 1;
            self.late_total_ns += late;
        }
        self.late_max_ns = self.late_max_ns.max(late);
    }
}

/// A frame waiting to leave: when, and in which order among equals.
#[derive(Debug)]
struct Pending<T> {
    due_ns: u64,
    seq: u64,
    frame: T,
}

impl<T> PartialEq for Pending<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.due_ns, self.seq) == (o.due_ns, o.seq)
    }
}
impl<T> Eq for Pending<T> {}
impl<T> PartialOrd for Pending<T> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Pending<T> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.due_ns, self.seq).cmp(&(o.due_ns, o.seq))
    }
}

/// What became of an arriving frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Queued; it leaves at this time (ns).
    Queued(u64),
    /// Queued twice (a duplicate): the first copy leaves at this time.
    Duplicated(u64),
    /// Dropped at the tail of a full queue.
    QueueFull,
    /// Dropped on purpose (random loss).
    Lost,
}

/// One direction of an emulated link: frames of type `T` (the caller's
/// buffers) go in with their arrival time and come out at their departure
/// time.
#[derive(Debug)]
pub struct Direction<T> {
    imp: Impairments,
    wire: Option<Pacer>,
    /// When the wire is free again (the last queued frame's end), ns.
    wire_free_ns: u64,
    /// Frames not yet fully serialized: (end of serialization, bytes).
    on_wire: VecDeque<(u64, u64)>,
    queued_bytes: u64,
    /// The departure of the last in-order frame (jitter keeps order).
    last_due_ns: u64,
    pending: BinaryHeap<Reverse<Pending<T>>>,
    seq: u64,
    rng: SplitMix64,
    /// What happened so far.
    pub counters: Counters,
}

impl<T: Clone> Direction<T> {
    /// A direction with these impairments and random seed.
    pub fn new(imp: Impairments, seed: u64) -> Self {
        Self {
            imp,
            wire: None,
            wire_free_ns: 0,
            on_wire: VecDeque::new(),
            queued_bytes: 0,
            last_due_ns: 0,
            pending: BinaryHeap::new(),
            seq: 0,
            rng: SplitMix64::new(seed),
            counters: Counters::default(),
        }
    }

    /// The impairments.
    pub fn impairments(&self) -> &Impairments {
        &self.imp
    }

    /// Changes the impairments in place (a sweep point's link rate): the
    /// frames already queued keep their departure times and the counters
    /// go on; a frame arriving later is serialized at the new rate, after
    /// the frames on the wire. The random draws go on from where they were.
    pub fn set_impairments(&mut self, imp: Impairments) {
        if imp.rate != self.imp.rate {
            // The next frame starts when the wire is free, at the new rate.
            self.wire = match (imp.rate, self.wire.take()) {
                (Some(rate), Some(p)) => Some(Pacer::new(rate.bps(), p.due_ns())),
                _ => None,
            };
        }
        self.imp = imp;
    }

    /// Puts `wire` bytes on the wire no earlier than `now_ns`; returns the
    /// end of their serialization. An idle wire restarts the schedule at
    /// the arrival (a cable has no credit to spend).
    fn serialize(&mut self, now_ns: u64, len: u32) -> u64 {
        let Some(rate) = self.imp.rate else {
            return now_ns;
        };
        let wire_bytes = u64::from(wire_bytes_of_frame(len));
        let pacer = match &mut self.wire {
            Some(p) if p.due_ns() > now_ns => p,
            slot => slot.insert(Pacer::new(rate.bps(), now_ns)),
        };
        // The frame's first bit goes at the pacer's due time; its last
        // bit at the due time after its bytes are counted.
        pacer.sent(wire_bytes);
        let end = pacer.due_ns();
        self.wire_free_ns = end;
        self.on_wire.push_back((end, u64::from(len)));
        self.queued_bytes += u64::from(len);
        end
    }

    /// Forgets the frames whose serialization ended by `now_ns`.
    fn drain_wire(&mut self, now_ns: u64) {
        while let Some(&(end, bytes)) = self.on_wire.front() {
            if end > now_ns {
                break;
            }
            self.on_wire.pop_front();
            self.queued_bytes -= bytes;
        }
    }

    /// Whether a frame of `len` bytes fits in the queue at `now_ns`.
    fn fits(&self, len: u32) -> bool {
        if self.imp.rate.is_none() {
            return true;
        }
        match self.imp.limit {
            QueueLimit::Frames(n) => (self.on_wire.len() as u64) < n,
            QueueLimit::Bytes(b) => self.queued_bytes + u64::from(len) <= b,
        }
    }

    /// A frame of `len` bytes (destination MAC to end of payload) arrives
    /// at `now_ns`.
    pub fn arrive(&mut self, now_ns: u64, len: u32, frame: T) -> Admission {
        self.counters.arrived += 1;
        self.drain_wire(now_ns);
        if self.rng.chance(self.imp.loss_ppm) {
            self.counters.lost += 1;
            return Admission::Lost;
        }
        if !self.fits(len) {
            self.counters.queue_drops += 1;
            return Admission::QueueFull;
        }
        let copies = if self.rng.chance(self.imp.duplicate_ppm) {
            self.counters.duplicated += 1;
            2
        } else {
            1
        };
        let mut first = None;
        for i in 0..copies {
            if i > 0 && !self.fits(len) {
                self.counters.queue_drops += 1;
                break;
            }
            let end = self.serialize(now_ns, len);
            let due = self.propagate(end);
            first.get_or_insert(due);
            self.seq += 1;
            self.pending.push(Reverse(Pending {
                due_ns: due,
                seq: self.seq,
                frame: frame.clone(),
            }));
        }
        let due = first.unwrap_or(now_ns);
        match copies {
            2 => Admission::Duplicated(due),
            _ => Admission::Queued(due),
        }
    }

    /// The departure of a frame whose serialization ends at `end_ns`:
    /// plus the delay (with jitter, in order), or at once if reordered.
    fn propagate(&mut self, end_ns: u64) -> u64 {
        if self.imp.delay_ns > 0 && self.rng.chance(self.imp.reorder_ppm) {
            self.counters.reordered += 1;
            return end_ns;
        }
        let jitter = self.rng.spread(self.imp.jitter_ns);
        let delay = self.imp.delay_ns.saturating_add_signed(jitter);
        let due = end_ns.saturating_add(delay).max(self.last_due_ns);
        self.last_due_ns = due;
        due
    }

    /// When the next frame is due, if one waits.
    pub fn next_due(&self) -> Option<u64> {
        self.pending.peek().map(|Reverse(p)| p.due_ns)
    }

    /// The next frame due by `now_ns`, with its due time; the caller sends
    /// it and reports with [`Direction::sent`].
    pub fn pop_due(&mut self, now_ns: u64) -> Option<(T, u64)> {
        if self.next_due()? > now_ns {
            return None;
        }
        self.pending.pop().map(|Reverse(p)| (p.frame, p.due_ns))
    }

    /// Records that a frame due at `due_ns` left at `now_ns` (or, with
    /// `ok` false, that the egress refused it).
    pub fn sent(&mut self, due_ns: u64, now_ns: u64, ok: bool) {
        if ok {
            self.counters.departed(due_ns, now_ns);
        } else {
            self.counters.send_errors += 1;
        }
    }

    /// Frames waiting to leave.
    pub fn backlog(&self) -> usize {
        self.pending.len()
    }
}

/// How the emulator keeps its departures on time on this host: set up and
/// measured when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Timing {
    /// Its thread runs real-time (`SCHED_FIFO`): it runs as soon as it
    /// wakes, ahead of the test's own threads, which otherwise hold the CPU
    /// it needs for a departure.
    pub realtime: bool,
    /// It holds the kernel's CPU latency request at 0
    /// (`/dev/cpu_dma_latency`) while it runs: idle CPUs poll instead of
    /// halting, so a wake-up takes microseconds, not the hundreds a halted
    /// virtual CPU can take. The request ends with the emulator's process.
    pub cpu_latency_held: bool,
    /// How late a timed sleep of its thread ends, median, ns (measured at
    /// start, CLOCK_MONOTONIC).
    pub timer_overshoot_p50_ns: u64,
    /// The same, 99th percentile, ns.
    pub timer_overshoot_p99_ns: u64,
    /// It wakes this long before a departure and busy-waits the rest, ns
    /// ([`Timing::margin_for`] of the overshoot).
    pub wake_margin_ns: u64,
    /// How long its send took to reach the far end at start; it calls its
    /// send [`Delivery::lead_ns`] before each due time. None: not measured
    /// (it sends at the due time).
    #[serde(default)]
    pub delivery: Option<Delivery>,
    /// It polls its ports between frames (for [`POLL_WINDOW_NS`] after the
    /// last one) instead of sleeping until the next.
    #[serde(default)]
    pub polls: bool,
}

/// How long a polling emulator goes on polling after the last frame it
/// saw before it sleeps again, ns.
pub const POLL_WINDOW_NS: u64 = 10_000_000;

/// The shortest wake margin, ns: a departure is busy-waited for at least
/// this long (the wake-up itself and the loop's own turn).
pub const MIN_WAKE_MARGIN_NS: u64 = 3_000;
/// The longest wake margin, ns: a timer later than this is not compensated
/// by busy-waiting (its departures count as late instead).
pub const MAX_WAKE_MARGIN_NS: u64 = 200_000;

impl Timing {
    /// The wake margin for a timer whose sleeps end up to `overshoot_p99_ns`
    /// late: that, plus 2 µs for the loop's own turn, within
    /// [`MIN_WAKE_MARGIN_NS`]..=[`MAX_WAKE_MARGIN_NS`].
    pub fn margin_for(overshoot_p99_ns: u64) -> u64 {
        overshoot_p99_ns
            .saturating_add(2_000)
            .clamp(MIN_WAKE_MARGIN_NS, MAX_WAKE_MARGIN_NS)
    }
}

/// Timed wakes whose overshoot the emulator keeps to size its margin.
pub const MARGIN_WINDOW: usize = 64;

/// The wake margin as the emulator runs: its timer's overshoot measured at
/// start is a floor; the overshoot of its recent timed wakes (the last
/// [`MARGIN_WINDOW`]) can raise it, since a timer loaded by the test wakes
/// later than an idle one (on a VM: 5 % of 1518-byte frames at 100 Mbit/s
/// left 30–50 µs late with the start-up margin alone).
#[derive(Debug, Clone)]
pub struct WakeMargin {
    floor_ns: u64,
    recent: [u64; MARGIN_WINDOW],
    len: usize,
    next: usize,
    margin_ns: u64,
}

impl WakeMargin {
    /// Starts at `floor_ns` (the start-up [`Timing::wake_margin_ns`]).
    pub fn new(floor_ns: u64) -> Self {
        Self {
            floor_ns,
            recent: [0; MARGIN_WINDOW],
            len: 0,
            next: 0,
            margin_ns: floor_ns,
        }
    }

    /// The margin now, ns.
    pub fn ns(&self) -> u64 {
        self.margin_ns
    }

    /// Records how late a timed wake came (ns) and sizes the margin again:
    /// [`Timing::margin_for`] the 95th percentile of the recent wakes, never
    /// below the floor.
    pub fn record(&mut self, overshoot_ns: u64) {
        self.recent[self.next] = overshoot_ns;
        self.next = (self.next + 1) % MARGIN_WINDOW;
        self.len = (self.len + 1).min(MARGIN_WINDOW);
        let mut v = self.recent;
        let v = &mut v[..self.len];
        v.sort_unstable();
        let p95 = v[(self.len - 1) * 95 / 100];
        self.margin_ns = Timing::margin_for(p95).max(self.floor_ns);
    }
}

/// The emulator's own limit, measured at bed start on this host.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Capacity {
    /// Frames per second it forwarded, one direction, minimum-size frames,
    /// with nothing else shaping (the most it carries on this host).
    pub frames_per_s: f64,
    /// The frame size measured (bytes, destination MAC to payload end).
    pub frame_bytes: u32,
    /// How long the measurement ran, s.
    pub seconds: f64,
    /// True when it forwarded every frame the source sent (its receive
    /// ring never overflowed): the figure is the source's rate, so the
    /// emulator's limit is at least this.
    pub source_limited: bool,
}

/// How long the emulator's send takes to reach the far end, measured at
/// bed start: from just before its send call (CLOCK_REALTIME) to the far
/// end's kernel receive stamp, for minimum-size (60-byte) and full-size
/// (1514-byte) calibration frames sent one at a time to an idle host.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Delivery {
    /// Frames measured, each size.
    pub samples: u32,
    /// The fastest 60-byte frame, ns.
    pub small_min_ns: u64,
    /// The median 60-byte frame, ns.
    pub small_p50_ns: u64,
    /// The fastest 1514-byte frame, ns.
    pub large_min_ns: u64,
    /// The median 1514-byte frame, ns.
    pub large_p50_ns: u64,
}

/// Fewest frames of each size a [`Delivery`] must rest on to be used.
pub const DELIVERY_MIN_SAMPLES: usize = 20;

impl Delivery {
    /// From the measured times of each size, ns; None when either size
    /// has fewer than [`DELIVERY_MIN_SAMPLES`].
    pub fn of(small: &[u64], large: &[u64]) -> Option<Self> {
        if small.len() < DELIVERY_MIN_SAMPLES || large.len() < DELIVERY_MIN_SAMPLES {
            return None;
        }
        let sorted = |v: &[u64]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v
        };
        let (s, l) = (sorted(small), sorted(large));
        Some(Self {
            samples: s.len().min(l.len()) as u32,
            small_min_ns: s[0],
            small_p50_ns: s[s.len() / 2],
            large_min_ns: l[0],
            large_p50_ns: l[l.len() / 2],
        })
    }

    /// The send lead: how much earlier than a frame's due time the
    /// emulator calls its send, ns: the fastest delivery of either size,
    /// so that no frame reaches the far end before its due time unless
    /// the kernel delivers faster than it ever did at start.
    pub fn lead_ns(&self) -> u64 {
        self.small_min_ns.min(self.large_min_ns)
    }
}

/// Why a bed asked for no particular shaper gets tbf instead of the
/// emulator: the link at its rate, in frames of the largest size the MTU
/// allows, needs more frames/s than the emulator forwarded on this host
/// (`capacity`, measured at an earlier bed's start). None: the emulator
/// carries it, or its limit is unknown, or was the source's (so at least
/// that: it may carry more).
pub fn tbf_instead(link: BitRate, mtu: u32, capacity: &Capacity) -> Option<String> {
    if capacity.source_limited {
        return None;
    }
    // The frame: MTU plus the 14-byte Ethernet header (a veth frame as
    // the emulator sees it).
    let wire_bits = u64::from(wire_bytes_of_frame(mtu + 14)) * 8;
    let needed = link.bps() as f64 / wire_bits as f64;
    (needed > capacity.frames_per_s).then(|| {
        format!(
            "shaper tbf chosen: {link} in {}-byte frames needs {needed:.0} frames/s, above the \
             {:.0} frames/s the link emulator forwarded on this host; tbf shapes the rate only \
             (--shaper emu to use the emulator anyway)",
            mtu + 18,
            capacity.frames_per_s
        )
    })
}

/// Which shaper made a bed's link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Shaper {
    /// linerate's emulator: serialization, queue, delay, impairments.
    Emu,
    /// Linux tbf: the long-term rate only (a frame finding tokens is not
    /// delayed).
    Tbf,
    /// No link emulation (a bare veth).
    None,
}

impl Shaper {
    /// The name on the command line and in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Emu => "emu",
            Self::Tbf => "tbf",
            Self::None => "none",
        }
    }
}

/// The link emulation behind a result measured on a bed: which shaper, and
/// (for the emulator) what it counted during the test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LinkAccount {
    /// The bed.
    pub bed: String,
    /// The shaper in use.
    pub shaper: Shaper,
    /// The emulated link rate, if any.
    #[serde(rename = "link_bits_per_s")]
    #[schemars(with = "Option<u64>")]
    pub link: Option<BitRate>,
    /// The emulator's measured limit (emu only).
    pub capacity: Option<Capacity>,
    /// What the emulator counted during the test, both directions and all
    /// links summed (emu only; None when its counters could not be read).
    pub during: Option<Counters>,
    /// Frames per second the test offered to the link, when it knows.
    pub offered_frames_per_s: Option<f64>,
    /// Why this shaper was chosen when the bed asked for none (tbf
    /// beyond the emulator's limit: [`tbf_instead`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shaper_note: Option<String>,
    /// The emulator's own added delay during the test: the mean lag of a
    /// departure behind its due time, ns ([`Counters::mean_lag_ns`] of
    /// `during`; absent before it was counted or when nothing left).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_lag_ns: Option<f64>,
    /// How the emulator kept time (emu only; absent before it said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<Timing>,
}

/// A mean departure lag above this (ns) is a warning: every delay
/// measured through the emulator then holds more of the emulator's own
/// time than the ±1 µs a 1 Gbit/s wire time is asked to match within.
pub const LAG_WARN_NS: f64 = 500.0;

/// Flags for a result measured through an emulated link:
/// `emulator_limited` (the emulator, not the device under test, fell
/// behind: the loss or delay is the test equipment's) and
/// `link_queue_drops` (the emulated link's queue overflowed: tail drop of
/// the link, not of the device under test).
pub fn assess(a: &LinkAccount) -> Vec<Flag> {
    let mut flags = Vec::new();
    if a.shaper != Shaper::Emu {
        return flags;
    }
    let Some(c) = a.during else {
        flags.push(Flag::warning(
            "emulator_unaccounted",
            format!(
                "bed {}: the link emulator's counters could not be read, so its share of \
                 any loss or delay is unknown",
                a.bed
            ),
        ));
        return flags;
    };
    let limit = a.capacity.map(|c| c.frames_per_s);
    let over = match (a.offered_frames_per_s, limit) {
        (Some(o), Some(l)) => o > l,
        _ => false,
    };
    // Late: more than 1 % of departures, or any frame the kernel could not
    // hand over (the emulator's receive ring overflowed).
    let late = c.late > 0 && c.late * 100 > c.forwarded.max(1);
    if over || late || c.ring_drops > 0 || c.send_errors > 0 {
        let mut why = Vec::new();
        if over {
            why.push(format!(
                "the test offered {:.0} frames/s, above the {:.0} frames/s it forwards on this host",
                a.offered_frames_per_s.unwrap_or(0.0),
                limit.unwrap_or(0.0)
            ));
        }
        if late {
            why.push(format!(
                "{} of {} frames left late (by up to {:.1} µs)",
                c.late,
                c.forwarded,
                c.late_max_ns as f64 / 1000.0
            ));
        }
        if c.ring_drops > 0 {
            why.push(format!(
                "{} frames overflowed its receive ring",
                c.ring_drops
            ));
        }
        if c.send_errors > 0 {
            why.push(format!("{} frames could not be sent", c.send_errors));
        }
        flags.push(
            Flag::warning(
                "emulator_limited",
                format!(
                    "bed {}: the link emulator fell behind ({}); loss or delay from it is the \
                     test equipment's, not the device under test's",
                    a.bed,
                    why.join("; ")
                ),
            )
            .with("late_frames", c.late)
            .with("late_max_ns", c.late_max_ns)
            .with("ring_drops_frames", c.ring_drops)
            .with("capacity_frames_per_s", limit.unwrap_or(0.0))
            .with(
                "offered_frames_per_s",
                a.offered_frames_per_s.unwrap_or(0.0),
            ),
        );
    }
    if c.truncated > 0 {
        flags.push(
            Flag::invalid(
                "emulator_truncated",
                format!(
                    "bed {}: the link emulator received {} frames longer than its receive \
                     slots and did not forward them (an MTU raised faster than it followed); \
                     that loss is the test equipment's, not the device under test's",
                    a.bed, c.truncated
                ),
            )
            .with("truncated_frames", c.truncated),
        );
    }
    if let Some(lag) = c.mean_lag_ns() {
        let message = format!(
            "bed {}: the link emulator's frames left on average {:.2} µs (at most {:.1} µs) \
             after their due time (its send called when due, less the send lead measured at \
             bed start): its own reaction, inside every delay measured through it (per pass; \
             not wire time, and not subtracted)",
            a.bed,
            lag / 1000.0,
            c.late_max_ns as f64 / 1000.0
        );
        let flag = match lag > LAG_WARN_NS {
            true => Flag::warning("emulator_delay", message),
            false => Flag::info("emulator_delay", message),
        };
        flags.push(
            flag.with("mean_lag_ns", lag)
                .with("late_max_ns", c.late_max_ns),
        );
    }
    if c.queue_drops > 0 {
        flags.push(
            Flag::info(
                "link_queue_drops",
                format!(
                    "bed {}: the emulated link's queue dropped {} frames at its tail \
                     (more offered than the link carries, as a cable's sender would drop)",
                    a.bed, c.queue_drops
                ),
            )
            .with("queue_drops_frames", c.queue_drops),
        );
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(rate_mbps: u64) -> Impairments {
        Impairments::rate(Some(BitRate::from_mbps(rate_mbps)))
    }

    fn drain<T: Clone>(d: &mut Direction<T>) -> Vec<(T, u64)> {
        let mut out = Vec::new();
        while let Some((f, due)) = d.pop_due(u64::MAX) {
            d.sent(due, due, true);
            out.push((f, due));
        }
        out
    }

    #[test]
    fn a_new_rate_applies_to_frames_after_the_queued_ones() {
        let mut d = Direction::new(link(100), 1);
        // Two 1514-byte frames at 100M: 1538 wire bytes, 123.04 µs each.
        d.arrive(0, 1514, 1u8);
        d.arrive(0, 1514, 2u8);
        let mut imp = link(1000);
        imp.delay_ns = 7;
        d.set_impairments(imp);
        assert_eq!(d.impairments(), &imp);
        d.arrive(0, 1514, 3u8);
        let out = drain(&mut d);
        let due: Vec<u64> = out.iter().map(|(_, t)| *t).collect();
        // The queued frames keep their times; the third follows them at
        // 1G (12.304 µs) plus the new delay.
        assert_eq!(due, [123_040, 246_080, 246_080 + 12_304 + 7]);
        assert_eq!(d.counters.arrived, 3);
        assert_eq!(d.counters.forwarded, 3);
        // Unshaped: frames pass at once.
        d.set_impairments(Impairments::rate(None));
        d.arrive(1_000_000, 60, 4u8);
        assert_eq!(d.next_due(), Some(1_000_000));
    }

    #[test]
    fn wire_bytes_follow_the_model() {
        // A 60-byte veth frame is a 64-byte frame on the wire: 84 bytes.
        assert_eq!(wire_bytes_of_frame(60), 84);
        assert_eq!(wire_bytes_of_frame(42), 84);
        assert_eq!(wire_bytes_of_frame(1514), 1538);
    }

    #[test]
    fn a_frame_leaves_after_its_wire_time() {
        // 84 wire bytes at 100 Mbit/s: 6.72 µs.
        let mut d = Direction::new(link(100), 1);
        assert_eq!(d.arrive(1_000, 60, 'a'), Admission::Queued(7_720));
        assert_eq!(d.pop_due(7_719), None);
        assert_eq!(d.pop_due(7_720), Some(('a', 7_720)));
        // 1538 bytes at 100M: 123.04 µs.
        let mut d = Direction::new(link(100), 1);
        assert_eq!(d.arrive(0, 1514, ()), Admission::Queued(123_040));
        // 1 Gbit/s, 64-byte frame: 672 ns.
        let mut d = Direction::new(link(1000), 1);
        assert_eq!(d.arrive(0, 60, ()), Admission::Queued(672));
    }

    #[test]
    fn frames_queue_behind_each_other_and_an_idle_wire_restarts() {
        let mut d = Direction::new(link(100), 1);
        for _ in 0..3 {
            d.arrive(0, 60, ());
        }
        let dues: Vec<u64> = drain(&mut d).into_iter().map(|(_, t)| t).collect();
        assert_eq!(dues, [6_720, 13_440, 20_160]);
        // Long after: no credit saved up, the next frame takes its full time.
        assert_eq!(d.arrive(1_000_000, 60, ()), Admission::Queued(1_006_720));
    }

    #[test]
    fn delay_and_jitter_keep_order() {
        let mut imp = link(100);
        imp.delay_ns = 1_000_000;
        let mut d = Direction::new(imp, 1);
        assert_eq!(d.arrive(0, 60, ()), Admission::Queued(1_006_720));
        imp.jitter_ns = 500_000;
        let mut d = Direction::new(imp, 7);
        // Frames 10 µs apart: jitter would reorder them, so some are held.
        for i in 0..1000u32 {
            d.arrive(u64::from(i) * 10_000, 60, i);
        }
        let out = drain(&mut d);
        let order: Vec<u32> = out.iter().map(|(i, _)| *i).collect();
        assert_eq!(order, (0..1000).collect::<Vec<_>>());
        // Each departure within its wire time + delay ± jitter (or held
        // behind the one before).
        for (i, due) in &out {
            let arrival = u64::from(*i) * 10_000;
            assert!(*due >= arrival + 6_720 + 500_000, "{i} {due}");
        }
        // Frames 2 ms apart: none held, the delays fill delay ± jitter.
        let mut d = Direction::new(imp, 7);
        for i in 0..1000u64 {
            d.arrive(i * 2_000_000, 60, i);
        }
        let delays: Vec<u64> = drain(&mut d)
            .iter()
            .map(|(i, due)| due - i * 2_000_000 - 6_720)
            .collect();
        let (lo, hi) = (delays.iter().min().unwrap(), delays.iter().max().unwrap());
        assert!(*lo >= 500_000 && *hi <= 1_500_000, "{lo} {hi}");
        assert!(hi - lo > 900_000, "jitter spread {lo}..{hi}");
    }

    #[test]
    fn the_queue_limit_drops_at_the_tail_and_counts() {
        let mut imp = link(100);
        imp.limit = QueueLimit::Frames(10);
        let mut d = Direction::new(imp, 1);
        let got: Vec<Admission> = (0..15).map(|_| d.arrive(0, 60, ())).collect();
        assert!(got[..10].iter().all(|a| matches!(a, Admission::Queued(_))));
        assert!(got[10..].iter().all(|a| *a == Admission::QueueFull));
        assert_eq!(d.counters.queue_drops, 5);
        // Once two frames have left the wire, two fit again.
        assert!(matches!(d.arrive(13_440, 60, ()), Admission::Queued(_)));
        assert!(matches!(d.arrive(13_440, 60, ()), Admission::Queued(_)));
        assert_eq!(d.arrive(13_440, 60, ()), Admission::QueueFull);
        imp.limit = QueueLimit::Bytes(3000);
        let mut d = Direction::new(imp, 1);
        assert!(matches!(d.arrive(0, 1514, ()), Admission::Queued(_)));
        assert!(matches!(d.arrive(0, 1400, ()), Admission::Queued(_)));
        assert_eq!(d.arrive(0, 100, ()), Admission::QueueFull);
        assert_eq!(d.counters.queue_drops, 1);
    }

    /// Counts within 5 standard deviations of n·p.
    fn within(count: u64, n: u64, ppm: u32) {
        let p = f64::from(ppm) / 1e6;
        let mean = n as f64 * p;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (count as f64 - mean).abs() < 5.0 * sd,
            "{count} of {n}, expected {mean} ± {sd}"
        );
    }

    #[test]
    fn loss_duplication_and_reordering_rates() {
        let n = 100_000u64;
        let mut imp = Impairments::rate(None);
        imp.loss_ppm = 10_000;
        imp.duplicate_ppm = 20_000;
        imp.reorder_ppm = 50_000;
        imp.delay_ns = 1_000_000;
        let mut d = Direction::new(imp, 42);
        for i in 0..n {
            d.arrive(i * 1_000, 60, i);
        }
        let c = d.counters;
        within(c.lost, n, 10_000);
        within(c.duplicated, n - c.lost, 20_000);
        within(c.reordered, n - c.lost + c.duplicated, 50_000);
        let out = drain(&mut d);
        assert_eq!(out.len() as u64, n - c.lost + c.duplicated);
        let overtaken = out.windows(2).filter(|w| w[1].0 < w[0].0).count() as u64;
        assert!(overtaken >= c.reordered * 9 / 10, "{overtaken} {c:?}");
    }

    #[test]
    fn late_departures_are_counted() {
        let mut c = Counters::default();
        c.departed(1_000, 1_500);
        c.departed(1_000, 1_000 + LATE_NS + 1);
        assert_eq!((c.forwarded, c.late, c.late_max_ns), (2, 1, LATE_NS + 1));
        assert_eq!(c.lag_total_ns, 500 + LATE_NS + 1);
        assert_eq!(c.mean_lag_ns(), Some((500 + LATE_NS + 1) as f64 / 2.0));
        assert_eq!(Counters::default().mean_lag_ns(), None);
        let later = c.plus(&c);
        assert_eq!(later.since(&c).forwarded, 2);
        // A maximum from before an interval is not the interval's: one
        // 200 ms departure, then an interval of on-time ones.
        let mut run = Counters::default();
        run.departed(0, 200_000_000);
        let before = run;
        run.departed(10_000, 10_300);
        assert_eq!(run.since(&before).late, 0);
        assert_eq!(run.since(&before).late_max_ns, LATE_NS);
        // Late departures in the interval: the later maximum stands.
        run.departed(0, 300_000_000);
        assert_eq!(run.since(&before).late_max_ns, 300_000_000);
    }

    #[test]
    fn tbf_is_chosen_beyond_the_emulators_limit() {
        let cap = Capacity {
            frames_per_s: 100_000.0,
            frame_bytes: 60,
            seconds: 0.5,
            source_limited: false,
        };
        // 1G in 1518-byte frames: 81,274 frames/s, carried.
        assert_eq!(tbf_instead(BitRate::from_gbps(1), 1500, &cap), None);
        // 10G: 812,744 frames/s, not.
        let why = tbf_instead(BitRate::from_gbps(10), 1500, &cap).unwrap();
        assert!(
            why.contains("812744 frames/s") && why.contains("100000"),
            "{why}"
        );
        // Jumbo frames need fewer: 10G in 9018-byte frames is 138,427/s.
        assert!(tbf_instead(BitRate::from_gbps(10), 9000, &cap).is_some());
        assert!(tbf_instead(BitRate::from_gbps(1), 9000, &cap).is_none());
        // A limit that was the source's says nothing against the emulator.
        let at_least = Capacity {
            source_limited: true,
            ..cap
        };
        assert_eq!(tbf_instead(BitRate::from_gbps(10), 1500, &at_least), None);
    }

    #[test]
    fn queue_limits_parse() {
        assert_eq!(QueueLimit::parse("100p"), Ok(QueueLimit::Frames(100)));
        assert_eq!(QueueLimit::parse("100"), Ok(QueueLimit::Frames(100)));
        assert_eq!(QueueLimit::parse("64k"), Ok(QueueLimit::Bytes(64_000)));
        assert_eq!(QueueLimit::parse("1500b"), Ok(QueueLimit::Bytes(1500)));
        assert!(QueueLimit::parse("0").is_err() && QueueLimit::parse("x").is_err());
    }

    #[test]
    fn assess_flags_the_emulator_not_the_device() {
        let mut a = LinkAccount {
            bed: "x".into(),
            shaper: Shaper::Emu,
            link: Some(BitRate::from_mbps(100)),
            capacity: Some(Capacity {
                frames_per_s: 100_000.0,
                frame_bytes: 60,
                seconds: 0.5,
                source_limited: false,
            }),
            during: Some(Counters {
                forwarded: 1000,
                ..Counters::default()
            }),
            offered_frames_per_s: Some(50_000.0),
            shaper_note: None,
            mean_lag_ns: None,
            timing: None,
        };
        // On time: the emulator's delay is said (info), nothing else.
        let codes = |a: &LinkAccount| -> Vec<(String, Severity)> {
            assess(a)
                .into_iter()
                .map(|f| (f.code, f.severity))
                .collect()
        };
        use crate::result::Severity;
        assert_eq!(codes(&a), [("emulator_delay".into(), Severity::Info)]);
        a.during = Some(Counters {
            forwarded: 1000,
            lag_total_ns: 1000 * 2_000,
            ..Counters::default()
        });
        assert_eq!(codes(&a), [("emulator_delay".into(), Severity::Warning)]);
        a.during = Some(Counters {
            forwarded: 1000,
            ..Counters::default()
        });
        a.offered_frames_per_s = Some(148_809.0);
        let f = assess(&a);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].code, "emulator_limited");
        a.offered_frames_per_s = None;
        a.during = Some(Counters {
            forwarded: 1000,
            late: 50,
            late_max_ns: 80_000,
            queue_drops: 3,
            ..Counters::default()
        });
        let codes: Vec<String> = assess(&a).into_iter().map(|f| f.code).collect();
        assert_eq!(
            codes,
            ["emulator_limited", "emulator_delay", "link_queue_drops"]
        );
        // Frames cut to the emulator's slots were not forwarded: the
        // result is the equipment's fault, not a loss in the device.
        a.during = Some(Counters {
            forwarded: 1000,
            truncated: 7,
            ..Counters::default()
        });
        let f = assess(&a);
        assert_eq!(f[0].code, "emulator_truncated");
        assert_eq!(f[0].severity, Severity::Invalid);
        assert!(f[0].message.contains("7 frames"), "{}", f[0].message);
        a.during = None;
        assert_eq!(assess(&a)[0].code, "emulator_unaccounted");
        a.shaper = Shaper::Tbf;
        assert!(assess(&a).is_empty());
    }

    #[test]
    fn the_send_lead_is_the_fastest_delivery_of_either_size() {
        let small: Vec<u64> = (0..40).map(|i| 1_500 + 10 * i).collect();
        let large: Vec<u64> = (0..40).map(|i| 1_450 + 20 * (39 - i)).collect();
        let d = Delivery::of(&small, &large).expect("enough samples");
        assert_eq!((d.small_min_ns, d.large_min_ns), (1_500, 1_450));
        assert_eq!((d.small_p50_ns, d.large_p50_ns), (1_700, 1_850));
        assert_eq!(d.lead_ns(), 1_450);
        assert_eq!(d.samples, 40);
        // Too few frames of one size: no lead at all (sends at the due time).
        assert_eq!(
            Delivery::of(&small, &large[..DELIVERY_MIN_SAMPLES - 1]),
            None
        );
    }

    #[test]
    fn the_wake_margin_covers_the_timers_overshoot_within_bounds() {
        // A VM timer measured at 53 µs p99: wake 55 µs early.
        assert_eq!(Timing::margin_for(53_253), 55_253);
        // A precise timer still gets the floor (the wake-up and a turn).
        assert_eq!(Timing::margin_for(0), MIN_WAKE_MARGIN_NS);
        // A timer too late to busy-wait over is capped (its departures
        // count as late instead of the CPU being held for it).
        assert_eq!(Timing::margin_for(5_000_000), MAX_WAKE_MARGIN_NS);
        assert_eq!(Timing::margin_for(u64::MAX), MAX_WAKE_MARGIN_NS);
    }

    #[test]
    fn the_wake_margin_follows_the_recent_overshoot_above_its_floor() {
        let mut m = WakeMargin::new(20_000);
        assert_eq!(m.ns(), 20_000);
        // Precise wakes never lower it below the start-up floor.
        for _ in 0..MARGIN_WINDOW {
            m.record(1_000);
        }
        assert_eq!(m.ns(), 20_000);
        // A loaded timer: 1 wake in 10 comes 60 µs late; the 95th
        // percentile of the window is then 60 µs.
        for i in 0..MARGIN_WINDOW {
            m.record(if i % 10 == 0 { 60_000 } else { 5_000 });
        }
        assert_eq!(m.ns(), 62_000);
        // The load goes: the window forgets it.
        for _ in 0..MARGIN_WINDOW {
            m.record(5_000);
        }
        assert_eq!(m.ns(), 20_000);
        // Never above the cap.
        m.record(10_000_000);
        for _ in 0..MARGIN_WINDOW {
            m.record(10_000_000);
        }
        assert_eq!(m.ns(), MAX_WAKE_MARGIN_NS);
    }
}
