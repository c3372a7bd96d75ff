//! Termination signals (SIGINT, SIGTERM, SIGHUP) taken by a thread instead
//! of an asynchronous handler: block them early in `main`, before any other
//! thread exists, then let one thread wait for them and clean up (e.g. tear
//! a testbed down) before the process exits.

use std::io;

use crate::sys;

/// SIGINT (Ctrl-C).
pub const SIGINT: i32 = libc::SIGINT;
/// SIGTERM.
pub const SIGTERM: i32 = libc::SIGTERM;
/// SIGHUP (terminal closed).
pub const SIGHUP: i32 = libc::SIGHUP;

/// The signals [`block_termination_signals`] blocks.
pub const TERMINATION_SIGNALS: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread and in every
/// thread it spawns afterwards. Call it first thing in `main`.
pub fn block_termination_signals() -> io::Result<()> {
    sys::signal::block(&TERMINATION_SIGNALS)
}

/// Waits for one of the termination signals (blocked by
/// [`block_termination_signals`]) and returns its number.
pub fn wait_for_termination_signal() -> io::Result<i32> {
    sys::signal::wait(&TERMINATION_SIGNALS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_in_a_thread_works() {
        // Only this test thread's mask changes.
        std::thread::spawn(|| block_termination_signals().unwrap())
            .join()
            .unwrap();
    }
}
