//! Progress while a command runs (SPEC §4), one mechanism for every
//! command: on a terminal an `indicatif` spinner line with the elapsed time,
//! the current step and the live rate; on any other stderr one plain line
//! every [`LINE_EVERY`] once a run has lasted [`QUIET_FOR`] (a short run
//! prints nothing); and with `--json-stream` the same events as JSON lines
//! on stdout ([`crate::stream`]).

use std::io::IsTerminal as _;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use linerate_core::progress::Progress;
use linerate_core::units::format_bits_per_s;

use crate::stream::Stream;

/// A run shorter than this prints no progress lines off a terminal.
const QUIET_FOR: Duration = Duration::from_secs(10);
/// How often a progress line is printed off a terminal after [`QUIET_FOR`].
const LINE_EVERY: Duration = Duration::from_secs(5);

/// What a command's steps are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepLines {
    /// A log worth keeping (rfc2544's trials): every step printed as a
    /// line (and the last one shown on the live line).
    Keep,
    /// Where the run is (latency's "configuration 2/3"): shown on the live
    /// line, replaced by the next.
    Replace,
}

/// Whether a progress line is due off a terminal: after [`QUIET_FOR`],
/// then every [`LINE_EVERY`].
fn line_due(elapsed: Duration, last: Option<Duration>) -> bool {
    match last {
        _ if elapsed < QUIET_FOR => false,
        None => true,
        Some(l) => elapsed >= l + LINE_EVERY,
    }
}

/// The stderr display of one run.
#[derive(Debug)]
enum View {
    /// A terminal: an `indicatif` line (its own thread ticks it).
    Bar(ProgressBar),
    /// Not a terminal: a thread printing [`line_due`] lines.
    Lines {
        message: Arc<Mutex<String>>,
        stop: mpsc::Sender<()>,
        thread: Option<JoinHandle<()>>,
    },
}

impl View {
    fn start(label: &str, of: Option<Duration>) -> Self {
        let of_s = of.map(|d| d.as_secs_f64());
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            // indicatif writes the elapsed time as `3s`.
            let of_text = of_s.map_or_else(String::new, |s| format!(" of {s:.0}s"));
            let template = format!("{{spinner}} {label}: {{elapsed}}{of_text} {{msg}}");
            if let Ok(style) = ProgressStyle::with_template(&template) {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(500));
            return Self::Bar(bar);
        }
        let of_text = of_s.map_or_else(String::new, |s| format!(" of {s:.0} s"));
        let message = Arc::new(Mutex::new(String::new()));
        let (stop, stopped) = mpsc::channel();
        let (label, shown) = (label.to_string(), Arc::clone(&message));
        let thread = std::thread::Builder::new()
            .name("lr-progress".into())
            .spawn(move || {
                let t0 = Instant::now();
                let mut last = None;
                loop {
                    match stopped.recv_timeout(Duration::from_millis(250)) {
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                    let e = t0.elapsed();
                    if line_due(e, last) {
                        last = Some(e);
                        let msg = shown.lock().map(|m| m.clone()).unwrap_or_default();
                        eprintln!("{label}: {:.0} s{of_text} {msg}", e.as_secs_f64());
                    }
                }
            })
            .ok();
        Self::Lines {
            message,
            stop,
            thread,
        }
    }

    fn message(&self, text: String) {
        match self {
            Self::Bar(b) => b.set_message(text),
            Self::Lines { message, .. } => {
                if let Ok(mut m) = message.lock() {
                    *m = text;
                }
            }
        }
    }

    fn line(&self, text: &str) {
        match self {
            Self::Bar(b) => b.println(text),
            Self::Lines { .. } => eprintln!("{text}"),
        }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        match self {
            Self::Bar(b) => b.finish_and_clear(),
            Self::Lines { stop, thread, .. } => {
                let _ = stop.send(());
                if let Some(t) = thread.take() {
                    let _ = t.join();
                }
            }
        }
    }
}

/// A command's progress: the stderr display and, with `--json-stream`, the
/// event stream.
#[derive(Debug)]
pub(crate) struct Live {
    label: String,
    of: Option<Duration>,
    steps: StepLines,
    view: Option<View>,
    stream: Option<Stream>,
    last: (f64, u64, u64),
}

impl Live {
    /// Progress labelled `label` (`linerate latency`); each transfer is
    /// expected to take `of`, if known.
    pub(crate) fn new(
        label: &str,
        of: Option<Duration>,
        steps: StepLines,
        stream: Option<Stream>,
    ) -> Self {
        Self {
            label: label.to_string(),
            of,
            steps,
            view: None,
            stream,
            last: (0.0, 0, 0),
        }
    }

    fn view(&mut self) -> &View {
        let (label, of) = (&self.label, self.of);
        self.view.get_or_insert_with(|| View::start(label, of))
    }
}

impl Progress for Live {
    fn step(&mut self, line: &str) {
        if let Some(s) = self.stream.as_mut() {
            s.step(line);
        }
        let keep = self.steps == StepLines::Keep;
        let view = self.view();
        if keep {
            view.line(line);
        }
        view.message(line.to_string());
    }

    fn totals(&mut self, t: f64, tx: u64, rx: u64) {
        if let Some(s) = self.stream.as_mut() {
            s.totals(t, tx, rx);
        }
        let dt = (t - self.last.0).max(1e-3);
        let rate =
            |now: u64, then: u64| format_bits_per_s(now.saturating_sub(then) as f64 * 8.0 / dt);
        let text = format!(
            "sending {}  receiving {}",
            rate(tx, self.last.1),
            rate(rx, self.last.2)
        );
        self.last = (t, tx, rx);
        self.view().message(text);
    }

    fn done(&mut self) {
        if let Some(s) = self.stream.as_mut() {
            s.done();
        }
        self.view = None;
        self.last = (0.0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_off_a_terminal_start_after_ten_seconds_then_every_five() {
        let s = Duration::from_secs;
        assert!(!line_due(s(9), None));
        assert!(line_due(s(10), None));
        assert!(!line_due(s(14), Some(s(10))));
        assert!(line_due(s(15), Some(s(10))));
    }
}
