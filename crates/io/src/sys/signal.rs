//! Signal masks and `sigwait(3)`: termination signals handled by a thread
//! that waits for them, so no code runs inside an asynchronous handler.

use std::io;
use std::mem::MaybeUninit;

use super::syscall;

/// A signal set holding `signals`.
fn sigset(signals: &[libc::c_int]) -> io::Result<libc::sigset_t> {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `set` points to writable memory of the size of a sigset_t;
    // sigemptyset initialises all of it.
    syscall!(sigemptyset(set.as_mut_ptr()))?;
    for &sig in signals {
        // SAFETY: `set` was initialised by sigemptyset above; sigaddset only
        // writes inside it and rejects invalid signal numbers with EINVAL.
        syscall!(sigaddset(set.as_mut_ptr(), sig))?;
    }
    // SAFETY: initialised by sigemptyset (and sigaddset) above.
    Ok(unsafe { set.assume_init() })
}

/// Blocks `signals` in the calling thread; threads it spawns afterwards
/// inherit the mask. (Child processes do not: Rust's `std::process`
/// resets the mask in the child before exec.)
pub(crate) fn block(signals: &[libc::c_int]) -> io::Result<()> {
    let set = sigset(signals)?;
    // SAFETY: `set` is a valid, initialised sigset_t borrowed for the call;
    // the old-mask pointer may be null. pthread_sigmask changes only this
    // thread's signal mask, no memory of the process.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Unblocks `signals` in the calling thread (a process started by one that
/// blocked them inherits the mask across exec).
pub(crate) fn unblock(signals: &[libc::c_int]) -> io::Result<()> {
    let set = sigset(signals)?;
    // SAFETY: as in `block`: a valid sigset_t borrowed for the call, a null
    // old-mask pointer; only this thread's mask changes.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Waits until one of `signals` (which must be blocked in every thread) is
/// pending and takes it; returns its number.
pub(crate) fn wait(signals: &[libc::c_int]) -> io::Result<libc::c_int> {
    let set = sigset(signals)?;
    let mut sig: libc::c_int = 0;
    // SAFETY: `set` is a valid sigset_t and `sig` a valid c_int, both live
    // for the whole (blocking) call; sigwait writes only to `sig`.
    let rc = unsafe { libc::sigwait(&set, &mut sig) };
    if rc == 0 {
        Ok(sig)
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}
