//! tracefs: where it is (mounted by linerate when it is not), the `format`
//! file of each tracepoint, and whether the kernel has kprobes.

use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};

use crate::sys;

/// Where tracefs lives on current kernels.
pub const TRACEFS: &str = "/sys/kernel/tracing";
/// Where older setups see it (through debugfs).
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

/// A tracefs directory that is mounted.
#[derive(Debug, Clone)]
pub struct Tracefs {
    /// Its root.
    pub root: PathBuf,
    /// True when linerate mounted it (it stays mounted: harmless, and other
    /// tools may use it meanwhile).
    pub mounted_by_us: bool,
}

impl Tracefs {
    /// Finds tracefs, mounting it at `/sys/kernel/tracing` if it is nowhere.
    pub fn find_or_mount() -> io::Result<Self> {
        for root in [TRACEFS, DEBUGFS_TRACING] {
            if Path::new(root).join("events").is_dir() {
                return Ok(Self {
                    root: root.into(),
                    mounted_by_us: false,
                });
            }
        }
        let target = CString::new(TRACEFS).map_err(io::Error::other)?;
        sys::perf::mount_tracefs(&target)?;
        Ok(Self {
            root: TRACEFS.into(),
            mounted_by_us: true,
        })
    }

    /// The `format` file of tracepoint `SYSTEM/NAME`.
    pub fn format_path(&self, tracepoint: &str) -> PathBuf {
        self.root.join("events").join(tracepoint).join("format")
    }

    /// The text of that file.
    pub fn format(&self, tracepoint: &str) -> io::Result<String> {
        std::fs::read_to_string(self.format_path(tracepoint))
    }

    /// Whether the kernel has kprobes (tracefs shows `kprobe_events`).
    pub fn has_kprobes(&self) -> bool {
        self.root.join("kprobe_events").exists()
    }
}
