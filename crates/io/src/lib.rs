//! # linerate-io: where linerate meets the kernel
//!
//! Every syscall linerate makes lives in this crate, and every `unsafe` block
//! of it lives in [`sys`], one module per kernel facility, each block with a
//! `// SAFETY:` note. The modules outside `sys` are safe wrappers that the
//! commands use; they turn kernel facts into `linerate-core` types at the
//! boundary and record which facility really ran (a timestamp source, a send
//! path, a fallback), so results can say so.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod ceilings;
pub mod dut;
pub mod echo;
pub mod emu;
pub mod energy;
pub mod host;
pub mod iperf3;
pub mod journey;
pub mod latency_load;
pub mod netns;
pub mod packet;
pub mod resolve;
pub mod rfc2544;
pub mod signal;
pub mod stamps;
pub(crate) mod sys;
pub mod throughput;
pub mod token;
