//! The throughput test, without I/O: parameters and result model
//! ([`model`]), the receiver's accounting of datagrams and TCP blocks
//! ([`receiver`]) and the send pacer ([`pacer`]).

pub mod model;
pub mod pacer;
pub mod receiver;
pub mod session;
