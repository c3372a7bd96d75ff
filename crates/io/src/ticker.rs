//! A line on stderr that shows the elapsed time of a step, refreshed twice a
//! second on a thread of its own until dropped, then erased; nothing when
//! stderr is not a terminal. (Its wake-ups are rare, so they disturb a
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

impl Ticker {
    /// Starts showing `label` with the elapsed time (and `of`, the expected
    /// time, if known).
    pub fn start(label: String, of: Option<Duration>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
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
