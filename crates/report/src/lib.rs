//! # linerate-report: how results look to people and to programs
//!
//! Renderers take linerate's result model (from `linerate-core`) and nothing
//! else: they never measure, compute rates or read clocks. Each result has a
//! human table in the seeds' style, a versioned JSON document whose field
//! names carry their units (`frames_per_s`, `payload_bytes_per_s`), and CSV
//! with the same column names.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod calc;
pub mod ceilings;
pub mod column;
pub mod compare;
pub mod demo;
pub mod flags;
pub mod history;
pub mod html;
pub mod inspect;
pub mod journey;
pub mod latency;
pub mod plot;
pub mod rfc2544;
pub mod scenario;
pub mod table;
pub mod testbed;
pub mod throughput;
