//! The schedule of a request/response test (`linerate latency`): when to
//! send the next probe, which replies are late, when the run is over.
//!
//! Driven quinn-style: the caller passes `now` (ns of a monotonic clock) to
//! [`PingPong::poll`], which says what to do, and to the `on_*` methods when
//! something happened; [`PingPong::next_wakeup`] says when to call again.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::stats::Histogram;

/// When the run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// After this many probes (sent and answered or timed out).
    Count(u64),
    /// After sending for this long.
    Time(Duration),
}

impl Until {
    /// How long the run sends, when it is given as a time.
    pub fn time(self) -> Option<Duration> {
        match self {
            Self::Time(t) => Some(t),
            Self::Count(_) => None,
        }
    }
}

/// The schedule of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// When to stop.
    pub until: Until,
    /// Gap between sends (0: next probe as soon as the reply is in).
    pub interval: Duration,
    /// Probes in flight at most: 1 is strict ping-pong (the seeds' case); more
    /// allows an open-loop rate (`--rate`) faster than the RTT.
    pub max_in_flight: u32,
    /// A reply later than this counts as lost (with `timeout_auto`: until
    /// enough replies came to size it).
    pub timeout: Duration,
    /// Size the timeout from the RTTs seen ([`sized_timeout`] of their
    /// 99th percentile) once [`AUTO_TIMEOUT_MIN_REPLIES`] replies came.
    pub timeout_auto: bool,
}

/// The timeout for RTTs whose 99th percentile is `p99`: ten times it,
/// within [`AUTO_TIMEOUT_MIN`] … [`AUTO_TIMEOUT_MAX`]: a reply that late is
/// lost, not slow, and a lossy path is not silent for a second per lost reply.
pub fn sized_timeout(p99: Duration) -> Duration {
    p99.saturating_mul(10)
        .clamp(AUTO_TIMEOUT_MIN, AUTO_TIMEOUT_MAX)
}

/// The shortest timeout [`sized_timeout`] gives.
pub const AUTO_TIMEOUT_MIN: Duration = Duration::from_millis(10);
/// The longest (and the timeout before replies came).
pub const AUTO_TIMEOUT_MAX: Duration = Duration::from_secs(1);
/// Replies needed before the timeout is sized from them.
pub const AUTO_TIMEOUT_MIN_REPLIES: u64 = 10;

/// What the driver should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Send probe `seq` now.
    Send {
        /// Its sequence number.
        seq: u64,
    },
    /// Nothing to do before [`PingPong::next_wakeup`].
    Wait,
    /// The run is over.
    Done,
}

/// What became of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyVerdict {
    /// An answer to a probe in flight.
    Fresh,
    /// A second answer, an answer after its timeout, or to a probe never sent.
    Unexpected,
}

/// Counters of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Probes sent.
    pub sent: u64,
    /// Fresh replies.
    pub received: u64,
    /// Probes whose reply did not come within the timeout.
    pub lost: u64,
    /// Replies that were not fresh.
    pub unexpected: u64,
    /// The timeout in force when these were read, ns.
    pub timeout_ns: u64,
}

/// The state machine.
#[derive(Debug, Clone)]
pub struct PingPong {
    schedule: Schedule,
    start_ns: Option<u64>,
    next_seq: u64,
    next_send_ns: u64,
    in_flight: BTreeMap<u64, u64>,
    counts: Counts,
    rtts: Histogram,
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl PingPong {
    /// A run with this schedule, not started.
    pub fn new(schedule: Schedule) -> Self {
        let mut schedule = schedule;
        schedule.max_in_flight = schedule.max_in_flight.max(1);
        Self {
            schedule,
            start_ns: None,
            next_seq: 0,
            next_send_ns: 0,
            in_flight: BTreeMap::new(),
            counts: Counts {
                timeout_ns: ns(schedule.timeout),
                ..Counts::default()
            },
            rtts: Histogram::new(),
        }
    }

    /// The timeout in force.
    pub fn timeout(&self) -> Duration {
        Duration::from_nanos(self.counts.timeout_ns)
    }

    /// Records a fresh reply's RTT and, with an automatic timeout, sizes
    /// it again (after the first replies, then every 16th).
    fn learn(&mut self, rtt_ns: u64) {
        if !self.schedule.timeout_auto {
            return;
        }
        self.rtts.record(rtt_ns);
        let n = self.rtts.count();
        if n >= AUTO_TIMEOUT_MIN_REPLIES && (n < 64 || n.is_multiple_of(16)) {
            if let Some(p99) = self.rtts.quantile(0.99) {
                self.counts.timeout_ns = ns(sized_timeout(Duration::from_nanos(p99)));
            }
        }
    }

    /// Probes sent and neither answered nor timed out yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Counters so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    fn sending_over(&self, now: u64) -> bool {
        match self.schedule.until {
            Until::Count(n) => self.next_seq >= n,
            Until::Time(d) => self
                .start_ns
                .is_some_and(|s| now.saturating_sub(s) >= ns(d)),
        }
    }

    fn expire(&mut self, now: u64) {
        let timeout = self.counts.timeout_ns;
        let late: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|&(_, &sent)| now.saturating_sub(sent) >= timeout)
            .map(|(&seq, _)| seq)
            .collect();
        for seq in late {
            self.in_flight.remove(&seq);
            self.counts.lost += 1;
        }
    }

    /// What to do at `now`. Call [`PingPong::on_sent`] after each send.
    pub fn poll(&mut self, now: u64) -> Action {
        if self.start_ns.is_none() {
            self.start_ns = Some(now);
            self.next_send_ns = now;
        }
        self.expire(now);
        if self.sending_over(now) {
            return if self.in_flight.is_empty() {
                Action::Done
            } else {
                Action::Wait
            };
        }
        if self.in_flight.len() < self.schedule.max_in_flight as usize && now >= self.next_send_ns {
            return Action::Send { seq: self.next_seq };
        }
        Action::Wait
    }

    /// Probe `seq` went out at `now`.
    pub fn on_sent(&mut self, now: u64, seq: u64) {
        if seq != self.next_seq {
            return;
        }
        self.in_flight.insert(seq, now);
        self.counts.sent += 1;
        self.next_seq += 1;
        let interval = ns(self.schedule.interval);
        // Keep the long-term rate: the next slot follows the previous slot,
        // not the (possibly late) send; if we fell more than one slot behind,
        // restart from now instead of bursting.
        let slot = self.next_send_ns.saturating_add(interval);
        self.next_send_ns = if slot + interval < now { now } else { slot };
    }

    /// A reply to `seq` arrived at `now`.
    pub fn on_reply(&mut self, now: u64, seq: u64) -> ReplyVerdict {
        self.expire(now);
        if let Some(sent) = self.in_flight.remove(&seq) {
            self.counts.received += 1;
            self.learn(now.saturating_sub(sent));
            ReplyVerdict::Fresh
        } else {
            self.counts.unexpected += 1;
            ReplyVerdict::Unexpected
        }
    }

    /// When to poll again at the latest (ns), or `None` when done.
    pub fn next_wakeup(&self, now: u64) -> Option<u64> {
        let timeout = self.counts.timeout_ns;
        let first_expiry = self.in_flight.values().map(|&s| s + timeout).min();
        let can_send =
            !self.sending_over(now) && self.in_flight.len() < self.schedule.max_in_flight as usize;
        let send_at = can_send.then_some(self.next_send_ns.max(now));
        let end = match self.schedule.until {
            Until::Time(d) if !self.sending_over(now) => {
                self.start_ns.map(|s| s.saturating_add(ns(d)))
            }
            _ => None,
        };
        [first_expiry, send_at, end].into_iter().flatten().min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(until: Until, interval_us: u64, in_flight: u32) -> Schedule {
        Schedule {
            until,
            interval: Duration::from_micros(interval_us),
            max_in_flight: in_flight,
            timeout: Duration::from_millis(100),
            timeout_auto: false,
        }
    }

    /// A simulated reflector answering after `rtt` ns, dropping every
    /// `drop_every`-th probe.
    fn simulate(pp: &mut PingPong, rtt: u64, drop_every: u64) -> (Vec<(u64, u64)>, u64) {
        let mut now = 1_000_000;
        let mut pending: Vec<(u64, u64)> = Vec::new();
        let mut sends = Vec::new();
        for _ in 0..1_000_000 {
            pending.sort();
            while let Some(&(at, seq)) = pending.first() {
                if at > now {
                    break;
                }
                pending.remove(0);
                pp.on_reply(at, seq);
            }
            match pp.poll(now) {
                Action::Send { seq } => {
                    pp.on_sent(now, seq);
                    sends.push((seq, now));
                    if drop_every == 0 || (seq + 1) % drop_every != 0 {
                        pending.push((now + rtt, seq));
                    }
                }
                Action::Done => return (sends, now),
                Action::Wait => {
                    let wake = pp.next_wakeup(now).expect("not done");
                    let reply = pending.iter().map(|&(at, _)| at).min();
                    now = reply.map_or(wake, |r| r.min(wake)).max(now + 1);
                }
            }
        }
        panic!("did not finish");
    }

    #[test]
    fn strict_ping_pong_sends_after_each_reply() {
        let mut pp = PingPong::new(schedule(Until::Count(100), 0, 1));
        let (sends, _) = simulate(&mut pp, 20_000, 0);
        assert_eq!(sends.len(), 100);
        for w in sends.windows(2) {
            assert!(w[1].1 - w[0].1 >= 20_000, "never two in flight");
        }
        assert_eq!(pp.counts().received, 100);
        assert_eq!(pp.counts().lost, 0);
    }

    #[test]
    fn open_loop_rate_keeps_its_interval() {
        // 10 µs interval, 50 µs RTT, up to 16 in flight: sends every 10 µs.
        let mut pp = PingPong::new(schedule(Until::Count(1000), 10, 16));
        let (sends, _) = simulate(&mut pp, 50_000, 0);
        let span = sends.last().unwrap().1 - sends[0].1;
        assert_eq!(span, 999 * 10_000);
    }

    #[test]
    fn lost_probes_time_out_and_the_run_ends() {
        let mut pp = PingPong::new(schedule(Until::Count(50), 0, 1));
        let (_, end) = simulate(&mut pp, 1_000, 10);
        let c = pp.counts();
        assert_eq!((c.sent, c.received, c.lost), (50, 45, 5));
        assert!(end >= 5 * 100_000_000, "waited for the timeouts");
    }

    #[test]
    fn the_timeout_is_sized_from_the_rtts_seen() {
        assert_eq!(sized_timeout(Duration::from_micros(50)), AUTO_TIMEOUT_MIN);
        assert_eq!(
            sized_timeout(Duration::from_millis(4)),
            Duration::from_millis(40)
        );
        assert_eq!(sized_timeout(Duration::from_secs(5)), AUTO_TIMEOUT_MAX);
        // 1 ms RTTs, one probe in 10 lost: each loss costs 10 ms, not the
        // initial second.
        let mut s = schedule(Until::Count(100), 0, 1);
        s.timeout = AUTO_TIMEOUT_MAX;
        s.timeout_auto = true;
        let mut pp = PingPong::new(s);
        let (_, end) = simulate(&mut pp, 1_000_000, 10);
        let c = pp.counts();
        assert_eq!((c.received, c.lost), (90, 10));
        assert!(pp.timeout() >= AUTO_TIMEOUT_MIN && pp.timeout() <= Duration::from_millis(11));
        assert_eq!(c.timeout_ns, ns(pp.timeout()));
        // The first loss (probe 9, before 10 replies) waited the full second.
        assert!(end < 2_000_000_000, "{end}");
        assert!(end > 1_000_000_000, "{end}");
        // An explicit timeout stays.
        let mut pp = PingPong::new(schedule(Until::Count(50), 0, 1));
        simulate(&mut pp, 1_000_000, 0);
        assert_eq!(pp.timeout(), Duration::from_millis(100));
    }

    #[test]
    fn timed_runs_stop_sending_on_time() {
        let mut pp = PingPong::new(schedule(Until::Time(Duration::from_millis(10)), 100, 1));
        let (sends, _) = simulate(&mut pp, 1_000, 0);
        assert_eq!(sends.len(), 100);
    }

    #[test]
    fn duplicate_and_unknown_replies_are_unexpected() {
        let mut pp = PingPong::new(schedule(Until::Count(2), 0, 1));
        assert_eq!(pp.poll(0), Action::Send { seq: 0 });
        pp.on_sent(0, 0);
        assert_eq!(pp.on_reply(10, 0), ReplyVerdict::Fresh);
        assert_eq!(pp.on_reply(11, 0), ReplyVerdict::Unexpected);
        assert_eq!(pp.on_reply(12, 99), ReplyVerdict::Unexpected);
        assert_eq!(pp.counts().unexpected, 2);
    }
}
