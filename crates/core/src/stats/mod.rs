//! Statistics: pure, mergeable, allocation-aware; recording is cheap enough
//! for a per-packet path, summaries are computed at the end. No clock: time
//! comes in as an argument.

pub mod histogram;
pub mod interval;
pub mod sequence;
pub mod splitmix;

pub use histogram::{Histogram, Summary};
