//! The shape every command's result shares: one envelope ([`Envelope`]) around
//! the command's own result, and [`Flag`]s that say what a result may not be
//! trusted for.
//!
//! A flag has a stable `code` (snake_case, for programs: never renamed once
//! published), a [`Severity`], a message for people, and its evidence (the
//! figures that raised it). Flags are raised by pure assessment functions in
//! each command's module of this crate, never by renderers, and they go into
//! the JSON as well as the tables. The exit code follows from them alone
//! ([`exit_code`]): 1 when any flag is [`Severity::Invalid`].
//!
//! Energy is reported the same way by every measuring command: one info
//! flag, `energy` (joules, per gigabyte, per packet, from RAPL) or
//! `energy_unavailable` ("energy: not available here (no RAPL)"), built by
//! [`crate::energy::flag`].
//!
//! Versioning: a document carries `schema` and `version`. Fields added in a
//! later version are optional or defaulted when read, so a document written
//! by an earlier version still reads back into today's type.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The version of linerate writing a result.
pub const LINERATE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// How much a flag weighs.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// A fact worth knowing (a fallback, a method, a one-sided figure); the
    /// result stands.
    Info,
    /// The result stands, but something may have bent it (steal time, a
    /// retransmission, few samples).
    Warning,
    /// A precondition of the measurement failed: the figure it concerns is
    /// not a measurement of the device or path (incomplete, rate not reached,
    /// generator- or receiver-limited, CPU-bound where the CPU set the rate).
    Invalid,
}

impl Severity {
    /// `info`, `warning`, `invalid`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Invalid => "invalid",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One finding about a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Flag {
    /// Stable machine-readable name, snake_case (`generator_limited`,
    /// `cpu_bound`, `above_line_rate` …).
    pub code: String,
    /// How much it weighs.
    pub severity: Severity,
    /// What it means, in a sentence for people.
    pub message: String,
    /// The figures that raised it (name → value; names carry units).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub evidence: BTreeMap<String, serde_json::Value>,
}

impl Flag {
    /// A flag of this severity.
    pub fn new(code: &str, severity: Severity, message: impl Into<String>) -> Self {
        debug_assert!(
            is_snake_case(code),
            "flag codes are snake_case, got '{code}'"
        );
        Self {
            code: code.to_string(),
            severity,
            message: message.into(),
            evidence: BTreeMap::new(),
        }
    }

    /// [`Severity::Info`].
    pub fn info(code: &str, message: impl Into<String>) -> Self {
        Self::new(code, Severity::Info, message)
    }

    /// [`Severity::Warning`].
    pub fn warning(code: &str, message: impl Into<String>) -> Self {
        Self::new(code, Severity::Warning, message)
    }

    /// [`Severity::Invalid`].
    pub fn invalid(code: &str, message: impl Into<String>) -> Self {
        Self::new(code, Severity::Invalid, message)
    }

    /// Adds one piece of evidence (a unit-suffixed name and its value).
    #[must_use]
    pub fn with(mut self, name: &str, value: impl Into<serde_json::Value>) -> Self {
        self.evidence.insert(name.to_string(), value.into());
        self
    }
}

/// Whether `s` is a flag code: lower-case ASCII letters, digits and single
/// underscores, starting with a letter.
pub fn is_snake_case(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !s.contains("__")
        && !s.ends_with('_')
}

/// The worst severity among `flags` (None: no flags).
pub fn worst(flags: &[Flag]) -> Option<Severity> {
    flags.iter().map(|f| f.severity).max()
}

/// The exit code a result earns (SPEC §4): 0 when nothing is invalid, 1 when
/// any flag says a precondition failed. (Exit code 2, usage or setup errors,
/// never reaches a result.)
pub fn exit_code(flags: &[Flag]) -> u8 {
    match worst(flags) {
        Some(Severity::Invalid) => 1,
        _ => 0,
    }
}

/// Facts about the host a result was measured on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostFacts {
    /// `uname -n`.
    #[serde(default)]
    pub hostname: Option<String>,
    /// Kernel release (`uname -r`).
    #[serde(default)]
    pub kernel: Option<String>,
    /// CPU model name (`/proc/cpuinfo`).
    #[serde(default)]
    pub cpu_model: Option<String>,
    /// Online CPUs.
    #[serde(default)]
    pub cpus: Option<u32>,
    /// Hypervisor (`/sys/hypervisor/type`, or the `hypervisor` CPU flag).
    #[serde(default)]
    pub virtualized: Option<bool>,
}

/// The envelope every command's JSON document has: schema, version, who wrote
/// it, when, where, and the flags; the command's own result is flattened in
/// beside them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Envelope<T> {
    /// `linerate.<command>`.
    pub schema: String,
    /// The schema's version.
    pub version: u32,
    /// The linerate that wrote it (absent in version-1 documents).
    #[serde(default)]
    pub linerate_version: Option<String>,
    /// When the measurement started: UTC, RFC 3339 (absent in version-1
    /// documents).
    #[serde(default)]
    pub started_at: Option<String>,
    /// The host (absent in version-1 documents).
    #[serde(default)]
    pub host: Option<HostFacts>,
    /// What the result may not be trusted for; empty when clean.
    #[serde(default)]
    pub flags: Vec<Flag>,
    /// The command's result.
    #[serde(flatten)]
    pub result: T,
}

impl<T> Envelope<T> {
    /// Wraps `result` under `schema`/`version`, written by this linerate.
    pub fn new(schema: &str, version: u32, result: T) -> Self {
        Self {
            schema: schema.to_string(),
            version,
            linerate_version: Some(LINERATE_VERSION.to_string()),
            started_at: None,
            host: None,
            flags: Vec::new(),
            result,
        }
    }

    /// Sets the start time (Unix time in nanoseconds, UTC).
    #[must_use]
    pub fn started(mut self, unix_ns: u64) -> Self {
        self.started_at = Some(rfc3339_utc(unix_ns));
        self
    }

    /// Sets the host facts.
    #[must_use]
    pub fn on(mut self, host: HostFacts) -> Self {
        self.host = Some(host);
        self
    }

    /// Adds flags.
    #[must_use]
    pub fn flagged(mut self, flags: impl IntoIterator<Item = Flag>) -> Self {
        self.flags.extend(flags);
        self
    }

    /// The exit code the flags earn ([`exit_code`]).
    pub fn exit_code(&self) -> u8 {
        exit_code(&self.flags)
    }
}

/// Unix time in nanoseconds as RFC 3339 UTC with microseconds
/// (`2026-11-23T19:05:59.123456Z`).
pub fn rfc3339_utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let micros = (unix_ns % 1_000_000_000) / 1_000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar (H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
    struct Body {
        rows: Vec<u32>,
    }

    #[test]
    fn exit_code_follows_the_worst_flag() {
        assert_eq!(exit_code(&[]), 0);
        let w = Flag::warning("steal", "x");
        let i = Flag::invalid("generator_limited", "y");
        assert_eq!(exit_code(std::slice::from_ref(&w)), 0);
        assert_eq!(exit_code(&[w.clone(), i]), 1);
        assert_eq!(worst(&[Flag::info("a", ""), w]), Some(Severity::Warning));
    }

    #[test]
    fn envelope_round_trips_and_reads_version_1() {
        let e = Envelope::new("linerate.x", 2, Body { rows: vec![1, 2] })
            .started(1_795_460_759_123_456_789)
            .flagged([Flag::invalid("incomplete", "cut short").with("lost_packets", 3)]);
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.contains("\"started_at\":\"2026-11-23T"), "{text}");
        assert!(text.contains("\"evidence\":{\"lost_packets\":3}"), "{text}");
        let back: Envelope<Body> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, e);
        // A version-1 document: schema, version and the body, nothing else.
        let v1: Envelope<Body> =
            serde_json::from_str(r#"{"schema":"linerate.x","version":1,"rows":[7]}"#).unwrap();
        assert_eq!(v1.result.rows, vec![7]);
        assert!(v1.flags.is_empty() && v1.linerate_version.is_none());
    }

    #[test]
    fn dates() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            rfc3339_utc(951_782_400_000_000_000),
            "2000-02-29T00:00:00.000000Z"
        );
        assert_eq!(
            rfc3339_utc(1_795_460_759_000_001_000),
            "2026-11-23T19:05:59.000001Z"
        );
    }

    #[test]
    fn codes() {
        assert!(is_snake_case("generator_limited"));
        assert!(is_snake_case("above_line_rate_pct2"));
        for bad in ["", "Generator", "a-b", "_a", "a_", "a__b", "1a"] {
            assert!(!is_snake_case(bad), "{bad}");
        }
    }
}
