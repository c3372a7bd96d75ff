//! What a running command tells the person waiting for it.
//!
//! Drivers in `linerate-io` report through this trait and never print; the
//! binary decides where progress goes (stderr, a terminal line, nowhere).

/// A sink for progress. Every method has a default that ignores it.
pub trait Progress {
    /// One finished step, as a line ("[64 B] line rate 148,809 fps",
    /// "throughput: 1,000 frames at 500 fps … → pass").
    fn step(&mut self, _line: &str) {}

    /// Running totals of a transfer: seconds since its start, bytes sent and
    /// received so far (for a live rate).
    fn totals(&mut self, _elapsed_s: f64, _sent_bytes: u64, _received_bytes: u64) {}

    /// The live part (a terminal line) is over: clear it.
    fn done(&mut self) {}
}

/// Progress that goes nowhere (tests, JSON-only runs, library users).
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {}

/// Progress steps handed to a function (the binary prints them on stderr).
#[derive(Debug, Clone, Copy)]
pub struct Steps<F: FnMut(&str)>(pub F);

impl<F: FnMut(&str)> Progress for Steps<F> {
    fn step(&mut self, line: &str) {
        (self.0)(line);
    }
}

/// Progress collected as lines (tests).
#[derive(Debug, Clone, Default)]
pub struct Lines(pub Vec<String>);

impl Progress for Lines {
    fn step(&mut self, line: &str) {
        self.0.push(line.to_string());
    }
}
