//! Wire formats: views over byte slices with validated representations.
//!
//! Each format has a `Packet<T: AsRef<[u8]>>` view whose `new_checked`
//! validates the length once (after which no accessor can panic) and a `Repr`
//! with `parse`/`emit`, smoltcp style. Nothing here reads a socket or a clock.

pub mod control;
pub mod probe;
