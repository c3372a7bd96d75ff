//! The C allocator's knobs a long-running server needs (glibc malloc).
//!
//! glibc serves an allocation of at least the mmap threshold (128 KiB at
//! start) with its own mapping, returned to the kernel on free; but the
//! first such block freed raises the threshold to its size (up to 32 MiB),
//! so later buffers of a session (a flow's receive buffer, a `typical`
//! sender's application buffer of up to 32 MiB) come from the per-thread
//! arenas instead, and freeing them keeps the pages resident: measured on
//! this machine kind, a `linerate server` stayed at 208 MB RSS after two
//! 16-stream `typical` sessions. [`fix_mmap_threshold`] keeps the
//! threshold where it is, and [`release_free_memory`] gives the arenas'
//! free pages back when a session ends. On other C libraries both do
//! nothing and say so.

/// The glibc default mmap threshold, bytes: blocks this large or larger are
/// mapped on their own.
pub(crate) const MMAP_THRESHOLD_BYTES: i32 = 128 * 1024;

/// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD_BYTES`] (setting it
/// turns the dynamic adjustment off), so every large buffer is unmapped when
/// freed. False when the C library is not glibc or refused.
#[cfg(target_env = "gnu")]
pub(crate) fn fix_mmap_threshold() -> bool {
    // SAFETY: mallopt only changes malloc's tuning parameters; it takes
    // plain integers, touches no caller memory, and is thread-safe (it takes
    // the arenas' locks).
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1 }
}

/// See the glibc version: nothing to do here.
#[cfg(not(target_env = "gnu"))]
pub(crate) fn fix_mmap_threshold() -> bool {
    false
}

/// Returns the free memory of every malloc arena to the kernel
/// (`malloc_trim(0)`): true when some was released.
#[cfg(target_env = "gnu")]
pub(crate) fn release_free_memory() -> bool {
    // SAFETY: malloc_trim only releases pages malloc itself holds free
    // (madvise(MADV_DONTNEED) on whole free pages, sbrk at the heap's top);
    // it locks each arena while it walks it, so it is sound while other
    // threads allocate, and it touches no memory the program owns.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// See the glibc version: nothing to do here.
#[cfg(not(target_env = "gnu"))]
pub(crate) fn release_free_memory() -> bool {
    false
}
