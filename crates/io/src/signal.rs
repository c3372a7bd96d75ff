//! Termination signals (SIGINT, SIGTERM, SIGHUP) taken by a thread instead
//! of an asynchronous handler: block them early in `main`, before any other
//! thread exists, then let one thread wait for them and clean up (e.g. tear
//! a testbed down) before the process exits.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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

/// The signal [`interrupt`] was called with (0: none yet).
static INTERRUPTED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Marks the process as interrupted by signal `sig`: long drivers
/// (rfc2544) stop at their next trial boundary and return what they
/// measured so far.
pub fn interrupt(sig: i32) {
    INTERRUPTED.store(sig.max(1), Ordering::SeqCst);
}

/// Whether [`interrupt`] was called (a termination signal arrived).
pub fn interrupted() -> bool {
    interrupt_signal().is_some()
}

/// The signal [`interrupt`] was called with, if it was.
pub fn interrupt_signal() -> Option<i32> {
    Some(INTERRUPTED.load(Ordering::SeqCst)).filter(|&s| s != 0)
}

/// Takes the termination signals on a thread: the first sets the returned
/// flag (a test ends early, its result marked incomplete), a second exits
/// the process at once (status 128 + the signal). Call it on the main
/// thread before any other thread exists, so every later thread inherits
/// the mask; if the signals cannot be blocked, the flag never sets.
pub fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    if block_termination_signals().is_ok() {
        let f = Arc::clone(&flag);
        let _ = std::thread::Builder::new()
            .name("lr-signals".into())
            .spawn(move || {
                if let Ok(sig) = wait_for_termination_signal() {
                    // Also process-wide: whichever waiting thread takes
                    // the signal, `interrupted` says so (a scenario stops
                    // before its next test).
                    interrupt(sig);
                    f.store(true, Ordering::Relaxed);
                    if let Ok(sig) = wait_for_termination_signal() {
                        std::process::exit(128 + sig);
                    }
                }
            });
    }
    flag
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
