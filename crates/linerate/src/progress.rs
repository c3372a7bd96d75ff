//! Progress lines on stderr, only when stderr is a terminal (SPEC §4).

use std::io::{IsTerminal as _, Write as _};
use std::time::Duration;

use linerate_core::progress::Progress;
use linerate_core::units::format_bits_per_s;
use linerate_io::ticker::Ticker;

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
        let (prefix, ticker) = (prefix.to_string(), None);
        Self { prefix, of, ticker }
    }
}

impl Progress for TickerProgress {
    fn step(&mut self, line: &str) {
        // The old line goes before the new one starts.
        self.ticker = None;
        self.ticker = Some(Ticker::start(format!("{}: {line}", self.prefix), self.of));
    }

    fn done(&mut self) {
        self.ticker = None;
    }
}

/// The live rate (per interval) on stderr, only when stderr is a terminal.
#[derive(Debug, Default)]
pub(crate) struct RateLine {
    last: (f64, u64, u64),
    shown: bool,
}

impl Progress for RateLine {
    fn totals(&mut self, t: f64, tx: u64, rx: u64) {
        let dt = (t - self.last.0).max(1e-3);
        let rate = |now: u64, then: u64| format_bits_per_s((now - then.min(now)) as f64 * 8.0 / dt);
        let (sending, receiving) = (rate(tx, self.last.1), rate(rx, self.last.2));
        self.last = (t, tx, rx);
        self.shown = std::io::stderr().is_terminal();
        if self.shown {
            let line =
                format!("\r  {t:6.1} s  sending {sending:>14}  receiving {receiving:>14}   ");
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }

    fn done(&mut self) {
        if self.shown {
            let _ = std::io::stderr().write_all(format!("\r{:70}\r", "").as_bytes());
        }
        *self = Self::default();
    }
}
