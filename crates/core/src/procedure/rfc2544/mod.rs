//! RFC 2544 ("Benchmarking Methodology for Network Interconnect Devices")
//! as sans-IO state machines.
//!
//! Each test is a [`Plan`] (what trial comes next, given the last result),
//! wrapped in a [`Procedure`] that does what every RFC 2544 test shares:
//!
//! * it hands out one trial at a time ([`Procedure::poll_action`]) and takes
//!   its outcome back with [`Procedure::handle`]`(now, Event::TrialDone(..))`;
//! * between trials it asks for a pause ([`Procedure::poll_timeout`]): RFC
//!   2544 section 23 steps C and D (wait for residual frames, let the DUT
//!   stabilise); the driver sleeps and calls `handle(now, Event::Timeout)`;
//! * the **generator self-check**: a trial whose offered rate (measured by the
//!   generator, frames the kernel accepted per second) fell short of the
//!   asked rate by more than [`Common::generator_tolerance`] is INVALID, and
//!   so is one in which the receiver itself dropped frames (its socket queue
//!   overflowed). It is repeated up to [`Common::invalid_retries`] times and
//!   then reported to the plan as a limit of the test equipment (called a
//!   generator limit: generator or receiver) — never as loss in the device
//!   under test;
//! * a step-by-step [`TraceStep`] log of every trial.
//!
//! Time is an argument ([`Duration`] since the driver's epoch); nothing here
//! reads a clock. Every trial is "send `frames` frames at `fps`": a rate trial
//! (sections 26.1-26.3) is `fps × trial time` frames, a burst (section 26.4)
//! is `n` frames at line rate.

use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::stats::histogram::Histogram;

pub mod b2b;
pub mod latency;
pub mod loss;
pub mod rx;
pub mod sim;
pub mod throughput;

/// One trial the driver must run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrialSpec {
    /// Frame size, destination MAC to FCS (RFC 2544 section 9).
    pub frame_bytes: u32,
    /// Rate to offer, frames per second.
    pub fps: f64,
    /// Frames to send at that rate.
    pub frames: u64,
}

impl TrialSpec {
    /// How long the trial takes on the wire at the asked rate.
    pub fn duration(&self) -> Duration {
        if self.fps > 0.0 {
            Duration::from_secs_f64(self.frames as f64 / self.fps)
        } else {
            Duration::ZERO
        }
    }
}

/// What the driver measured in one trial.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TrialOutcome {
    /// Frames the generator really sent (the kernel accepted them).
    pub sent_frames: u64,
    /// Distinct test frames of this trial's stream that came back.
    pub received_frames: u64,
    /// The rate the generator really offered, frames/s (sent frames over the
    /// time it took to send them).
    pub offered_fps: f64,
    /// Frames received more than once.
    pub duplicates: u64,
    /// Frames that arrived after a later-numbered frame.
    pub reordered: u64,
    /// Frames the receiver itself dropped (its queue overflowed): the test
    /// equipment, not the device, lost them, so the trial is invalid.
    pub receiver_drops: u64,
    /// One-way latencies of the received frames, ns (if measured).
    pub latency: Option<Histogram>,
}

impl TrialOutcome {
    /// Frames sent but not received.
    pub fn lost_frames(&self) -> u64 {
        self.sent_frames.saturating_sub(self.received_frames)
    }

    /// Lost frames over sent frames (RFC 2544 section 26.3:
    /// `(input_count - output_count) * 100 / input_count`, here as a fraction).
    pub fn loss_ratio(&self) -> f64 {
        if self.sent_frames == 0 {
            0.0
        } else {
            self.lost_frames() as f64 / self.sent_frames as f64
        }
    }
}

/// What happens to a procedure.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The trial handed out last has finished (after the residual-frame wait).
    TrialDone(TrialOutcome),
    /// The deadline of [`Procedure::poll_timeout`] has passed.
    Timeout,
}

/// What a procedure wants the driver to do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// Run this trial, then report [`Event::TrialDone`].
    Trial(TrialSpec),
}

/// Settings every RFC 2544 test shares.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Common {
    /// Frame size, destination MAC to FCS.
    pub frame_bytes: u32,
    /// Line rate at that size (the maximum rate of the medium, section 20).
    pub line_rate_fps: f64,
    /// Trial duration of rate trials. RFC 2544 section 24 says at least 60 s;
    /// linerate defaults to 10 s and says so.
    pub trial: Duration,
    /// Pause between trials (section 23 step D asks for at least 5 s of DUT
    /// stabilisation; linerate's driver waits for residual frames itself).
    pub settle: Duration,
    /// Largest shortfall of the offered rate against the asked one, as a
    /// fraction, before a trial is invalid (generator self-check).
    pub generator_tolerance: f64,
    /// How often an invalid trial is repeated before it counts as a
    /// generator limit.
    pub invalid_retries: u32,
}

impl Common {
    /// Defaults: 10 s trials, 2 s pause, 1 % generator tolerance, 1 retry.
    pub fn new(frame_bytes: u32, line_rate_fps: f64) -> Self {
        Self {
            frame_bytes,
            line_rate_fps,
            trial: Duration::from_secs(10),
            settle: Duration::from_secs(2),
            generator_tolerance: 0.01,
            invalid_retries: 1,
        }
    }

    /// A rate trial at `fps` for the configured trial time (at least one frame).
    pub fn rate_trial(&self, fps: f64) -> TrialSpec {
        TrialSpec {
            frame_bytes: self.frame_bytes,
            fps,
            frames: ((fps * self.trial.as_secs_f64()).round() as u64).max(1),
        }
    }
}

/// How a trial was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Valid, and the loss was within tolerance.
    Pass,
    /// Valid, and the device lost more than the tolerance.
    Loss,
    /// The generator fell short of the asked rate; the trial is repeated.
    InvalidRetry,
    /// The generator fell short again: a generator limit, not DUT loss.
    GeneratorLimit,
}

/// One line of a procedure's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TraceStep {
    /// Trial number, from 1.
    pub trial: u32,
    /// Rate asked, frames/s.
    pub asked_fps: f64,
    /// Rate the generator offered, frames/s.
    pub offered_fps: f64,
    /// Frames asked.
    pub asked_frames: u64,
    /// Frames sent.
    pub sent_frames: u64,
    /// Frames received.
    pub received_frames: u64,
    /// Loss, percent of sent.
    pub loss_pct: f64,
    /// Frames the receiver dropped itself.
    pub receiver_drops: u64,
    /// The judgement.
    pub verdict: Verdict,
    /// The plan's state after the trial (e.g. search bounds).
    pub next: String,
}

/// The test-specific part of a procedure: which trial comes next.
pub trait Plan {
    /// The result of the test.
    type Output;
    /// The first trial (`None`: nothing to do).
    fn first(&mut self, common: &Common) -> Option<TrialSpec>;
    /// A valid trial finished; `pass` says whether loss was within the
    /// plan's tolerance. Returns the next trial.
    fn on_valid(
        &mut self,
        common: &Common,
        spec: &TrialSpec,
        o: &TrialOutcome,
    ) -> Option<TrialSpec>;
    /// The generator could not offer `spec` (after the retries).
    fn on_generator_limit(
        &mut self,
        common: &Common,
        spec: &TrialSpec,
        o: &TrialOutcome,
    ) -> Option<TrialSpec>;
    /// Whether a valid outcome passes (loss within tolerance).
    fn passes(&self, o: &TrialOutcome) -> bool;
    /// The plan's state for the trace (bounds, step).
    fn describe(&self) -> String;
    /// The result so far.
    fn output(&self, common: &Common) -> Self::Output;
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Ready(TrialSpec),
    Running(TrialSpec),
    Settling { until: Duration, next: TrialSpec },
    Finished,
}

/// A plan with the shared RFC 2544 trial machinery (see the module docs).
#[derive(Debug, Clone)]
pub struct Procedure<P: Plan> {
    plan: P,
    common: Common,
    state: State,
    attempts: u32,
    trace: Vec<TraceStep>,
}

impl<P: Plan> Procedure<P> {
    /// A procedure ready to hand out its first trial.
    pub fn new(common: Common, mut plan: P) -> Self {
        let state = match plan.first(&common) {
            Some(spec) => State::Ready(spec),
            None => State::Finished,
        };
        Self {
            plan,
            common,
            state,
            attempts: 0,
            trace: Vec::new(),
        }
    }

    /// The next trial to run, if one is due now.
    pub fn poll_action(&mut self) -> Option<Action> {
        if let State::Ready(spec) = self.state {
            self.state = State::Running(spec);
            return Some(Action::Trial(spec));
        }
        None
    }

    /// When the procedure wants [`Event::Timeout`].
    pub fn poll_timeout(&self) -> Option<Duration> {
        match self.state {
            State::Settling { until, .. } => Some(until),
            _ => None,
        }
    }

    /// Feeds an event at time `now`. Events that do not fit the state (a
    /// timeout too early, an outcome with no trial running) are ignored.
    pub fn handle(&mut self, now: Duration, event: Event) {
        match (event, &self.state) {
            (Event::Timeout, State::Settling { until, next }) if now >= *until => {
                self.state = State::Ready(*next);
            }
            (Event::TrialDone(o), State::Running(spec)) => {
                let spec = *spec;
                let next = self.judge(&spec, &o);
                self.state = match next {
                    None => State::Finished,
                    Some(next) if self.common.settle.is_zero() => State::Ready(next),
                    Some(next) => State::Settling {
                        until: now + self.common.settle,
                        next,
                    },
                };
            }
            _ => {}
        }
    }

    fn judge(&mut self, spec: &TrialSpec, o: &TrialOutcome) -> Option<TrialSpec> {
        let tol = 1.0 - self.common.generator_tolerance;
        let valid = o.offered_fps >= spec.fps * tol
            && o.sent_frames as f64 >= spec.frames as f64 * tol
            && o.receiver_drops == 0;
        let (verdict, next) = if valid {
            self.attempts = 0;
            let pass = self.plan.passes(o);
            let next = self.plan.on_valid(&self.common, spec, o);
            (if pass { Verdict::Pass } else { Verdict::Loss }, next)
        } else if self.attempts < self.common.invalid_retries {
            self.attempts += 1;
            (Verdict::InvalidRetry, Some(*spec))
        } else {
            self.attempts = 0;
            let next = self.plan.on_generator_limit(&self.common, spec, o);
            (Verdict::GeneratorLimit, next)
        };
        self.trace.push(TraceStep {
            trial: self.trace.len() as u32 + 1,
            asked_fps: spec.fps,
            offered_fps: o.offered_fps,
            asked_frames: spec.frames,
            sent_frames: o.sent_frames,
            received_frames: o.received_frames,
            loss_pct: o.loss_ratio() * 100.0,
            receiver_drops: o.receiver_drops,
            verdict,
            next: self.plan.describe(),
        });
        next
    }

    /// True when no trial is left.
    pub fn is_done(&self) -> bool {
        self.state == State::Finished
    }

    /// The result (final once [`Self::is_done`]).
    pub fn output(&self) -> P::Output {
        self.plan.output(&self.common)
    }

    /// Every trial so far.
    pub fn trace(&self) -> &[TraceStep] {
        &self.trace
    }

    /// The shared settings.
    pub fn common(&self) -> &Common {
        &self.common
    }

    /// The trace as a fixed-width text table (for logs and snapshot tests).
    pub fn trace_text(&self) -> String {
        let mut s = String::new();
        for t in &self.trace {
            let _ = writeln!(
                s,
                "#{:<3} asked {:>10.1} fps offered {:>10.1} sent {:>9} recv {:>9} loss {:>7.3}% {:<15} {}",
                t.trial,
                t.asked_fps,
                t.offered_fps,
                t.sent_frames,
                t.received_frames,
                t.loss_pct,
                format!("{:?}", t.verdict),
                t.next
            );
        }
        s
    }
}

/// Why a result stops where it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The device passed at the maximum rate of the medium.
    LineRate,
    /// The device lost frames above the result: the DUT's own limit.
    Device,
    /// The test equipment could not offer more (the generator fell short, or
    /// the receiver dropped frames): the device may do better, and the
    /// result is a lower bound.
    Generator,
}

/// Runs a procedure to the end against a function that plays a trial
/// (a simulated DUT, in tests). Time advances by each trial's duration and
/// by the pauses the procedure asks for.
pub fn run_to_end<P: Plan>(
    proc_: &mut Procedure<P>,
    mut play: impl FnMut(&TrialSpec) -> TrialOutcome,
) -> Duration {
    let mut now = Duration::ZERO;
    for _ in 0..100_000 {
        if let Some(Action::Trial(spec)) = proc_.poll_action() {
            let o = play(&spec);
            now += spec.duration();
            proc_.handle(now, Event::TrialDone(o));
        } else if let Some(t) = proc_.poll_timeout() {
            now = now.max(t);
            proc_.handle(now, Event::Timeout);
        } else {
            break;
        }
    }
    now
}
