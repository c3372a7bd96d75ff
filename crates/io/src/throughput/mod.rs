//! The throughput engine: `linerate server` and `linerate throughput`.
//!
//! [`server`] accepts control connections and runs each client's session
//! on threads of its own; [`client`] drives one session; [`flow`] runs one
//! flow (one direction of one stream) on one thread with the send and
//! receive paths; [`control`] carries the control frames with timeouts;
//! [`net`] sets the sockets up; [`host`] reads host facts recorded with a
//! result (CPU steal). `session` runs the flows of one end and drives
//! `linerate_core::throughput::session::SessionMachine`, which decides when
//! to tell the peer, drain, report or give up. The protocol and result model live in
//! `linerate_core::wire::control` and `linerate_core::throughput`.
//!
//! Clock: every elapsed time and interval is CLOCK_MONOTONIC of the end
//! that measured it. Probe send stamps are the low 32 bits of the sender's
//! CLOCK_MONOTONIC (comparable only on one host).
//!
//! [`run`] is the whole of `linerate throughput`: the bed's server, one
//! session per send path, each result assessed and enveloped.

pub mod client;
pub mod control;
pub mod flow;
pub mod host;
pub mod net;
pub mod run;
pub mod server;
mod session;

pub use session::Progress;
