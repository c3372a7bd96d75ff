//! Wire formats as views over byte slices (smoltcp style): a `Packet<T>`
//! whose `new_checked` validates the length once, after which no accessor can
//! panic, and a `Repr` with `parse`/`emit` round-trips.

pub mod testframe;
