//! Running code inside a network namespace, one thread at a time.
//!
//! A socket keeps the namespace of the thread that created it, so one
//! process can run every end of a test on a testbed: each end runs on a
//! thread that first enters its host's namespace. All ends then share
//! one address space and one clock.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::thread;

use crate::sys;

/// Where `ip netns` keeps named namespaces.
pub const NETNS_RUN_DIR: &str = "/run/netns";

/// Why a thread could not enter a namespace.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The namespace file could not be opened (no such namespace?).
    #[error("cannot open network namespace {path}")]
    Open {
        /// The namespace file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// setns(2) failed (usually: not root / no CAP_SYS_ADMIN).
    #[error("setns into {path} failed")]
    Setns {
        /// The namespace file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The thread could not be spawned.
    #[error("cannot spawn a thread for namespace {path}")]
    Spawn {
        /// The namespace file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// The file of the namespace called `name` (`/run/netns/NAME`), or `name`
/// itself when it is a path.
pub fn netns_path(name: &str) -> PathBuf {
    if name.contains('/') {
        PathBuf::from(name)
    } else {
        Path::new(NETNS_RUN_DIR).join(name)
    }
}

/// Moves the calling thread into the network namespace `name`.
///
/// Only this thread moves; call it first thing on a thread of its own (see
/// [`spawn_in`]).
pub fn enter(name: &str) -> Result<(), NetnsError> {
    let path = netns_path(name);
    let file = File::open(&path).map_err(|source| NetnsError::Open {
        path: path.clone(),
        source,
    })?;
    sys::netns::setns_net(&file).map_err(|source| NetnsError::Setns { path, source })
}

/// Spawns a named thread that enters namespace `ns` (or stays in the
/// caller's namespace when `ns` is `None`) and then runs `f`.
///
/// The namespace is entered before `f` runs; if that fails, the thread ends
/// with the error and `f` never runs.
pub fn spawn_in<F, T>(
    ns: Option<&str>,
    thread_name: &str,
    f: F,
) -> Result<thread::JoinHandle<Result<T, NetnsError>>, NetnsError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let ns = ns.map(str::to_string);
    let path = ns.as_deref().map(netns_path).unwrap_or_default();
    thread::Builder::new()
        .name(thread_name.to_string())
        .spawn(move || {
            if let Some(ns) = ns.as_deref() {
                enter(ns)?;
            }
            Ok(f())
        })
        .map_err(|source| NetnsError::Spawn { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_os_error_is_printed_once() {
        let e = enter("lr-no-such-namespace").unwrap_err();
        assert!(matches!(e, NetnsError::Open { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "cannot open network namespace /run/netns/lr-no-such-namespace"
        );
        let line = linerate_core::error::chain(&e);
        assert_eq!(line.matches("os error 2").count(), 1, "{line}");
        assert!(
            line.ends_with(": No such file or directory (os error 2)"),
            "{line}"
        );
    }

    #[test]
    fn paths() {
        assert_eq!(netns_path("lr-x-a"), PathBuf::from("/run/netns/lr-x-a"));
        assert_eq!(
            netns_path("/proc/1/ns/net"),
            PathBuf::from("/proc/1/ns/net")
        );
    }

    #[test]
    fn a_missing_namespace_is_an_error_not_a_panic() {
        let h = spawn_in(Some("lr-does-not-exist-ns"), "t", || 1).unwrap();
        let err = h.join().unwrap().unwrap_err();
        assert!(matches!(err, NetnsError::Open { .. }), "{err}");
        assert!(err.to_string().contains("lr-does-not-exist-ns"));
    }

    #[test]
    fn no_namespace_runs_in_place() {
        let h = spawn_in(None, "t", || 41 + 1).unwrap();
        assert_eq!(h.join().unwrap().unwrap(), 42);
    }
}
