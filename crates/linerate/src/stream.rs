//! `--json-stream`: one JSON object per line on stdout while a command runs,
//! in iperf3's convention (`{"event": "…", "data": {…}}`, as iperf3 3.17's
//! `--json-stream` writes them): `start`, then `interval` (a transfer's
//! bytes over each reporting interval, from the driver's live totals;
//! CLOCK_MONOTONIC seconds since the transfer started) and `step` (a
//! procedure's finished step) while it runs, and `end` with the whole result
//! document; a run that ends without a result ends its stream with `error`
//! (the reason is on stderr). `linerate server` writes a `log` event per
//! session event.

use std::cell::Cell;
use std::io::Write as _;
use std::rc::Rc;
use std::time::Duration;

use serde_json::{json, Value};

/// Writes one event line on stdout; a closed stdout ends quietly (the
/// command's result still goes to the history).
pub(crate) fn emit(event: &str, data: Value) {
    // `event` first, as iperf3 writes it (a JSON object's keys are sorted).
    let line = format!("{{\"event\":{},\"data\":{data}}}", Value::from(event));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// The events of one running command.
#[derive(Debug)]
pub(crate) struct Stream {
    interval_s: f64,
    /// The last interval's end: (seconds, sent bytes, received bytes).
    last: (f64, u64, u64),
    /// Set once the `end` event is out; unset when this is dropped, the
    /// stream ends with `error`.
    ended: Rc<Cell<bool>>,
}

impl Stream {
    /// Starts the stream of `command` (its `start` event); intervals are
    /// `interval` long; `ended` is set by whoever writes the `end` event.
    pub(crate) fn start(
        command: &str,
        interval: Duration,
        data: Value,
        ended: Rc<Cell<bool>>,
    ) -> Self {
        let mut start = json!({
            "command": command,
            "linerate_version": linerate_core::result::LINERATE_VERSION,
            "interval_s": interval.as_secs_f64(),
        });
        if let (Some(s), Value::Object(extra)) = (start.as_object_mut(), data) {
            s.extend(extra);
        }
        emit("start", start);
        Self {
            interval_s: interval.as_secs_f64().max(1e-3),
            last: (0.0, 0, 0),
            ended,
        }
    }

    /// A finished step.
    pub(crate) fn step(&mut self, line: &str) {
        emit("step", json!({ "line": line }));
    }

    /// Live totals (bytes sent and received by this process's flows): an
    /// `interval` event once a whole interval has passed since the last one.
    pub(crate) fn totals(&mut self, t: f64, sent: u64, received: u64) {
        let (t0, s0, r0) = self.last;
        let dt = t - t0;
        if dt + 1e-9 < self.interval_s {
            return;
        }
        let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 * 8.0 / dt;
        emit(
            "interval",
            json!({
                "start_s": t0,
                "end_s": t,
                "sent_bytes": sent.saturating_sub(s0),
                "received_bytes": received.saturating_sub(r0),
                "sent_bits_per_s": rate(sent, s0),
                "received_bits_per_s": rate(received, r0),
            }),
        );
        self.last = (t, sent, received);
    }

    /// A transfer is over: the next one's totals start from zero.
    pub(crate) fn done(&mut self) {
        self.last = (0.0, 0, 0);
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if !self.ended.get() {
            let message = "the run ended without a result (the reason is on stderr)";
            emit("error", json!({ "message": message }));
        }
    }
}
