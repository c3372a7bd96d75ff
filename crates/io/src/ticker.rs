//! A line on stderr that shows the elapsed time of a step, refreshed twice a
//! second on a thread of its own until dropped, then erased; when stderr is
//! not a terminal (a log, CI), a plain line every [`LINE_EVERY`] instead, so
//! a long step is never silent. (Its wake-ups are rare, so they disturb a
//! measurement no more than any idle process would.)

use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The elapsed-time line; it goes when this value is dropped.
#[derive(Debug)]
pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How often a step's line is repeated on a stderr that is not a terminal.
pub const LINE_EVERY: Duration = Duration::from_secs(5);

/// The text of a step's line after `elapsed` (and of `of`, if known).
fn line(label: &str, elapsed: Duration, of: Option<Duration>) -> String {
    let e = elapsed.as_secs_f64();
    match of {
        Some(of) => format!("{label}: {e:.1} s of {:.1} s", of.as_secs_f64()),
        None => format!("{label}: {e:.1} s"),
    }
}

impl Ticker {
    /// Starts showing `label` with the elapsed time (and `of`, the expected
    /// time, if known).
    pub fn start(label: String, of: Option<Duration>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
            return Self::lines(label, of, stop);
        }
        let s = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("lr-progress".into())
            .spawn(move || {
                let t0 = Instant::now();
                while !s.load(Ordering::Relaxed) {
                    let l = format!("\r{}", line(&label, t0.elapsed(), of));
                    let _ = std::io::stderr().write_all(l.as_bytes());
                    std::thread::park_timeout(Duration::from_millis(500));
                }
                let _ = std::io::stderr().write_all(b"\r\x1b[K");
            })
            .ok();
        Self { stop, thread }
    }

    /// A plain line every [`LINE_EVERY`] (none for a step that ends sooner).
    fn lines(label: String, of: Option<Duration>, stop: Arc<AtomicBool>) -> Self {
        let s = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("lr-progress".into())
            .spawn(move || {
                let t0 = Instant::now();
                let mut next = LINE_EVERY;
                while !s.load(Ordering::Relaxed) {
                    let e = t0.elapsed();
                    if e >= next {
                        eprintln!("{}", line(&label, e, of));
                        next += LINE_EVERY;
                    }
                    std::thread::park_timeout(next.saturating_sub(e).min(LINE_EVERY));
                }
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
