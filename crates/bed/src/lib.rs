//! # linerate-bed: reproducible testbeds from network namespaces
//!
//! A bed is built in three stages (SPEC §2):
//!
//! 1. **topology** ([`BedSpec`], [`Topology`], [`layout::Layout`]): what the
//!    bed is: hosts `a`, `b` (and `dut`), their interfaces and addresses
//!    (198.18.0.0/15 and 2001:2::/48 only), the emulated link and settings;
//! 2. **plan** ([`plan::Plan`]): pure data, an ordered list of typed
//!    [`plan::Step`]s, each exactly one `ip`/`tc`/`nft`/`ethtool`/`sysctl`
//!    command line (what `--dry-run` prints, and what the unit tests
//!    snapshot), each setting with a read-back that verifies it took;
//! 3. **apply** ([`Bed::up`]): runs those commands, checks exit status,
//!    stderr and every read-back, and rolls a partial bring-up back. A
//!    [`Bed`] removes everything it created when dropped (also while a panic
//!    unwinds); [`guard::install_signal_teardown`] does the same on SIGINT,
//!    SIGTERM and SIGHUP. What a killed process leaves, [`sweep::sweep`]
//!    removes.
//!
//! Everything created is named `lr-…`: namespaces `lr-<bed>-a`, `lr-<bed>-b`,
//! `lr-<bed>-dut`, and every link lives inside them (veth ends are created
//! directly in their namespaces, none in the root namespace). The bed's
//! description is stored as JSON in `/run/linerate/beds/<bed>.json`, so other
//! processes can find it ([`Bed::open`]).
//!
//! Applying runs the `ip`, `tc`, `nft`, `ethtool` and `sysctl` binaries:
//! the plan *is* those commands, so what ran can be repeated by hand.
//!
//! ```no_run
//! use linerate_bed::{Bed, BedSpec, Topology};
//! use linerate_core::units::BitRate;
//!
//! # fn main() -> Result<(), linerate_bed::BedError> {
//! if !linerate_bed::privileges::require("example") {
//!     return Ok(()); // printed "SKIPPED: example: not root …"
//! }
//! let mut spec = BedSpec::new("t1234", Topology::Pair); // no "lr-" prefix
//! spec.link = Some(BitRate::from_mbps(100));
//! let bed = Bed::up(&spec)?; // removed again when `bed` is dropped
//! let server_ns = bed.netns("b").unwrap_or_default(); // "lr-t1234-b"
//! let server_ip = bed.ipv4("b"); // Some(198.18.0.2)
//! // run each end on a thread inside its namespace:
//! // linerate_io::netns::spawn_in(Some(server_ns), "server", move || { … })
//! # let _ = (server_ns, server_ip);
//! bed.down()?; // or just drop it
//! # Ok(())
//! # }
//! ```
//!
//! A command that owns beds should call [`guard::install_signal_teardown`]
//! first thing in `main`, so SIGINT/SIGTERM remove them too.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod apply;
mod bed;
pub mod dut_target;
pub mod emulator;
pub mod ethtool;
pub mod guard;
pub mod iface;
pub mod inspect;
pub mod layout;
pub mod plan;
pub mod privileges;
pub mod reconfig;
mod spec;
pub mod state;
pub mod sweep;
pub mod target;

pub use crate::apply::{run_command, run_dump};
pub use crate::bed::Bed;
pub use crate::plan::{HostFacts, Plan, Step};
pub use crate::spec::{
    parse_delay_ns, parse_pct, validate_name, BedSpec, Feature, Impair, Offloads, PerDir, TcpMem,
    Topology, MAX_MTU, MAX_NAME_LEN, MIN_MTU, PREFIX,
};

use std::path::PathBuf;

/// Why a bed could not be built, found or removed. Every variant is a
/// usage or setup error (exit code 2 in the binary).
#[derive(Debug, thiserror::Error)]
pub enum BedError {
    /// A bad name, topology or setting.
    #[error("{0}")]
    Invalid(String),
    /// Not root, or a tool missing.
    #[error("{0}")]
    Privileges(String),
    /// A bed of that name (or one of its namespaces) exists already.
    #[error("bed '{name}' already exists ({what}); `linerate testbed down {name}` removes it")]
    Exists {
        /// The bed.
        name: String,
        /// What was found.
        what: String,
    },
    /// No stored bed of that name.
    #[error("no bed called '{name}' ({path} not found); `linerate testbed list` shows the beds")]
    NotFound {
        /// The bed.
        name: String,
        /// The state file looked for.
        path: PathBuf,
    },
    /// A command exited with an error.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// A command could not be started.
    #[error("cannot run `{command}`")]
    Spawn {
        /// The command line.
        command: String,
        /// The error.
        source: std::io::Error,
    },
    /// A setting was applied but reads back differently.
    #[error("{setting} did not take: {why} (read back with `{command}`)")]
    Readback {
        /// The setting.
        setting: String,
        /// What was read instead.
        why: String,
        /// The read-back command.
        command: String,
    },
    /// A termination signal arrived during bring-up.
    #[error("interrupted by a signal")]
    Interrupted,
    /// The state file could not be read or written.
    #[error("bed state {path}")]
    State {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The state file is not a bed description.
    #[error("bed state {path} is unreadable: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// Teardown left something behind.
    #[error("teardown of bed '{name}' incomplete: {why}")]
    Teardown {
        /// The bed.
        name: String,
        /// What failed.
        why: String,
    },
}
