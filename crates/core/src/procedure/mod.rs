//! Test procedures as sans-IO state machines: driven by `handle(now, event)`,
//! asked for work with `poll_action()` and for their next deadline with
//! `poll_timeout()`. Time is always an argument; nothing here reads a clock.

pub mod rfc2544;
