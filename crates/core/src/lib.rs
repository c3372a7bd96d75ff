//! # linerate-core: the sans-IO heart of linerate
//!
//! This crate holds everything linerate knows that does not need the kernel:
//! units as types ([`units`]), the line-rate model every result is compared
//! against ([`linerate`]), and (as the other layers grow) wire formats,
//! statistics and test procedures written as state machines that take the
//! time as an argument.
//!
//! Contracts of this layer:
//! * no I/O, no clock, no syscalls: `#![forbid(unsafe_code)]`, and CI checks
//!   that `cargo tree -p linerate-core` has no libc, nix, rustix, socket2,
//!   tokio or other I/O crate;
//! * every quantity carries its unit in its type and, when serialised, in its
//!   field name (`frames_per_s`, `payload_bytes_per_s`);
//! * every constant that encodes a standard cites it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod calc;
pub mod ceilings;
pub mod compare;
pub mod demo;
pub mod emu;
pub mod energy;
pub mod error;
pub mod hostload;
pub mod inspect;
pub mod journey;
pub mod latency;
pub mod linerate;
pub mod pace;
pub mod plot;
pub mod procedure;
pub mod progress;
pub mod qdisc;
pub mod result;
pub mod rfc2544;
pub mod scenario;
pub mod stats;
pub mod sweep;
pub mod testbed;
pub mod throughput;
pub mod units;
pub mod untrusted;
pub mod wire;
