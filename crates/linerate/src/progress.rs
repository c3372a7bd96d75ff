//! Progress lines on stderr, only when stderr is a terminal (SPEC §4).

use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Whether progress should be shown.
pub(crate) fn enabled() -> bool {
    std::io::stderr().is_terminal()
}

/// A line on stderr that shows the elapsed time of a step, refreshed twice a
/// second until dropped, then erased. Does nothing when stderr is not a
/// terminal. (Its wake-ups are rare and on a thread of its own, so they
/// disturb a measurement no more than any idle process would.)
#[derive(Debug)]
pub(crate) struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Starts showing `label` with the elapsed time (and `of`, the expected
    /// time, if known).
    pub(crate) fn start(label: String, of: Option<Duration>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        if !enabled() {
            return Self { stop, thread: None };
        }
        let s = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("lr-progress".into())
            .spawn(move || {
                let t0 = Instant::now();
                while !s.load(Ordering::Relaxed) {
                    let e = t0.elapsed().as_secs_f64();
                    let line = match of {
                        Some(of) => format!("\r{label}: {e:.1} s of {:.1} s", of.as_secs_f64()),
                        None => format!("\r{label}: {e:.1} s"),
                    };
                    let _ = std::io::stderr().write_all(line.as_bytes());
                    std::thread::park_timeout(Duration::from_millis(500));
                }
                let _ = std::io::stderr().write_all(b"\r\x1b[K");
            })
            .ok();
        Self { stop, thread }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// A driver's progress as a [`Ticker`] line: each step replaces the line
/// (`{prefix}: {step}: 1.5 s of 5.0 s`), `done` erases it.
#[derive(Debug)]
pub(crate) struct TickerProgress {
    prefix: String,
    of: Option<Duration>,
    ticker: Option<Ticker>,
}

impl TickerProgress {
    /// Lines start with `prefix`; each step is expected to take `of`, if known.
    pub(crate) fn new(prefix: &str, of: Option<Duration>) -> Self {
        Self {
            prefix: prefix.to_string(),
            of,
            ticker: None,
        }
    }
}

impl linerate_core::progress::Progress for TickerProgress {
    fn step(&mut self, line: &str) {
        // The old line goes before the new one starts.
        self.ticker = None;
        self.ticker = Some(Ticker::start(format!("{}: {line}", self.prefix), self.of));
    }

    fn done(&mut self) {
        self.ticker = None;
    }
}
