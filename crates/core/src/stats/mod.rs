//! Statistics: pure, mergeable, allocation-aware; recording is cheap enough
//! for a per-packet path, summaries are computed at the end.

pub mod histogram;

pub use histogram::{Histogram, Summary};
