//! Test procedures as state machines: they take the time and events as
//! arguments and return what to do next and when to wake them; they never
//! read a clock or touch a socket, so they are tested with simulated time.

pub mod pingpong;
pub mod rfc2544;
