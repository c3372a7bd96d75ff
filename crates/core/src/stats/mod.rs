//! Statistics that need no clock: sequence accounting and interval series.

pub mod interval;
pub mod sequence;
