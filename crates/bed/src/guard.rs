//! Guards: every bed being built or owned by this process is registered
//! here, so a termination signal can remove it before the process exits.
//!
//! [`install_signal_teardown`] blocks SIGINT, SIGTERM and SIGHUP (call it
//! first thing in `main`, before other threads exist, so all inherit the
//! mask) and starts a thread that waits for them with `sigwait`: no code
//! runs in an asynchronous signal handler. On a signal that thread stops
//! further bring-up steps, removes every registered bed and exits with
//! 128 + the signal number. Steps run under the registry lock, so teardown
//! never races with a half-run step.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::apply;
use crate::plan::Step;
use crate::BedError;

/// What to remove for one bed.
#[derive(Debug, Clone)]
pub(crate) struct Registered {
    pub(crate) name: String,
    pub(crate) namespaces: Vec<String>,
    pub(crate) state_file: PathBuf,
}

/// A line on stderr that cannot fail: a closed or full stderr must not
/// panic the signal thread before it has removed the beds.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

static REGISTRY: Mutex<Vec<Registered>> = Mutex::new(Vec::new());
static TERMINATING: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

fn lock() -> MutexGuard<'static, Vec<Registered>> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn register(r: Registered) {
    lock().push(r);
}

pub(crate) fn deregister(name: &str) {
    lock().retain(|r| r.name != name);
}

/// Runs one bring-up step unless a termination signal arrived.
pub(crate) fn run_step(step: &Step) -> Result<(), BedError> {
    let _held = lock();
    if TERMINATING.load(Ordering::SeqCst) {
        return Err(BedError::Interrupted);
    }
    apply::apply_step(step)
}

/// The termination signal that arrived, if one did.
pub fn terminating() -> Option<i32> {
    TERMINATING
        .load(Ordering::SeqCst)
        .then(|| SIGNAL.load(Ordering::SeqCst))
}

/// The exit code for a process ended by a termination signal: 128 + its
/// number (130 for SIGINT, 143 for SIGTERM), as a shell reports it.
pub fn signal_exit_code() -> Option<i32> {
    terminating().map(|sig| 128 + sig)
}

/// Runs `f` (a bring-up step that is not a command, e.g. starting the
/// emulator) under the registry lock, unless a termination signal arrived.
pub(crate) fn run_locked<T>(f: impl FnOnce() -> Result<T, BedError>) -> Result<T, BedError> {
    let _held = lock();
    if TERMINATING.load(Ordering::SeqCst) {
        return Err(BedError::Interrupted);
    }
    f()
}

/// Stops the bed's emulator, removes the namespaces (those that exist),
/// the emulator's files and the state file; returns what failed.
fn teardown_unlocked(r: &Registered) -> Vec<String> {
    let (_, mut errors) = crate::emulator::stop(|bed| bed == r.name);
    if let Some(dir) = r.state_file.parent() {
        errors.extend(crate::emulator::remove_files(dir, &r.name));
    }
    for ns in r.namespaces.iter().rev() {
        if !netns_exists(ns) {
            continue;
        }
        let step = Step::DelNetns { netns: ns.clone() };
        if let Err(e) = apply::run_command(&step.argv()) {
            errors.push(linerate_core::error::chain(&e));
        }
    }
    match std::fs::remove_file(&r.state_file) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => errors.push(format!("{}: {e}", r.state_file.display())),
    }
    errors
}

/// Tears a bed down (under the registry lock) and deregisters it.
pub(crate) fn teardown(r: &Registered) -> Result<(), BedError> {
    let errors = {
        let mut reg = lock();
        let errors = teardown_unlocked(r);
        reg.retain(|x| x.name != r.name);
        if let (Some(sig), true) = (terminating(), errors.is_empty()) {
            // Said under the lock: the signal thread exits only after it.
            say!("linerate: signal {sig}: removed bed '{}'", r.name);
        }
        errors
    };
    if errors.is_empty() {
        Ok(())
    } else {
        Err(BedError::Teardown {
            name: r.name.clone(),
            why: errors.join("; "),
        })
    }
}

/// Whether `/run/netns/NS` exists.
pub fn netns_exists(ns: &str) -> bool {
    Path::new(linerate_io::netns::NETNS_RUN_DIR)
        .join(ns)
        .exists()
}

/// An error unless `ns` names an existing network namespace.
pub fn check_netns(ns: &str) -> Result<(), BedError> {
    if ns.is_empty() || ns.contains('/') || !netns_exists(ns) {
        return Err(BedError::Invalid(format!(
            "no network namespace '{ns}' (ip netns list shows them)"
        )));
    }
    Ok(())
}

/// Blocks the termination signals and starts the thread that removes every
/// registered bed when one arrives, then exits with 128 + its number.
pub fn install_signal_teardown() -> std::io::Result<()> {
    install(false)
}

/// Like [`install_signal_teardown`], but the first signal only interrupts
/// ([`linerate_io::signal::interrupt`]): a driver stops at its next trial
/// boundary, restores what it changed and prints what it measured so far.
/// A second signal restores, removes and exits at once.
pub fn install_signal_interrupt_then_teardown() -> std::io::Result<()> {
    install(true)
}

fn install(interrupt_first: bool) -> std::io::Result<()> {
    linerate_io::signal::block_termination_signals()?;
    std::thread::Builder::new()
        .name("lr-signal".into())
        .spawn(move || {
            if interrupt_first {
                if let Ok(sig) = linerate_io::signal::wait_for_termination_signal() {
                    linerate_io::signal::interrupt(sig);
                }
            }
            let sig = linerate_io::signal::wait_for_termination_signal().unwrap_or(0);
            SIGNAL.store(sig, Ordering::SeqCst);
            TERMINATING.store(true, Ordering::SeqCst);
            // Under the lock `run_step` holds: a change in flight (e.g.
            // `ethtool -K gro on`) finishes before its restore runs, and
            // none starts after it.
            let reg = lock();
            for e in crate::iface::restore_all() {
                say!("linerate: signal {sig}: interface setting not restored: {e}");
            }
            for e in crate::reconfig::restore_links() {
                say!("linerate: signal {sig}: link rate not restored: {e}");
            }
            for r in reg.iter() {
                let errors = teardown_unlocked(r);
                if errors.is_empty() {
                    say!("linerate: signal {sig}: removed bed '{}'", r.name);
                } else {
                    say!(
                        "linerate: signal {sig}: bed '{}' not fully removed ({}); \
                         `linerate testbed sweep --prefix {}` removes the rest",
                        r.name,
                        errors.join("; "),
                        r.name
                    );
                }
            }
            std::process::exit(128 + sig);
        })?;
    Ok(())
}
