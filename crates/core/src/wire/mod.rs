//! Wire formats as views over byte slices (smoltcp style).
//!
//! Contract of every view here: `new_checked` validates the buffer's length
//! once; after that no accessor can panic, whatever the bytes say. `Repr`s are
//! the parsed, validated form, with `parse` / `emit` round trips. Nothing that
//! came from the network is indexed without a check.

pub mod control;
pub mod control_auth;
pub mod echo;
pub mod icmp;
pub mod iperf3;
pub mod probe;
pub mod testframe;
