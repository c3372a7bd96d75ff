//! The throughput test, without I/O: parameters and result model
//! ([`model`]), the validated configuration ([`config`]), the result's
//! figures and flags ([`assess`]), the receiver's accounting of datagrams
//! and TCP blocks ([`receiver`]). Senders are paced by [`crate::pace`].

pub mod assess;
pub mod config;
pub mod model;
pub mod receiver;
pub mod session;
