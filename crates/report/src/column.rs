//! Numbers in table columns and CSV cells.
//!
//! A table column shows one unit: [`Scale`] picks the SI prefix (or time
//! unit) from the column's largest value, and every cell of the column is
//! written in it (`0.6845 GB/s` above `1.219 GB/s`, not `684.5 MB/s`).
//! [`csv_number`] writes a computed figure without the binary noise of its
//! last bits (`123040`, not `123039.99999999999`).

use linerate_core::units::sig4;

/// One SI prefix (or time unit) for a whole column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    factor: f64,
    prefix: &'static str,
}

impl Scale {
    /// The SI prefix that puts the largest of `values` in [1, 1000).
    pub fn si(values: impl IntoIterator<Item = f64>) -> Self {
        const PREFIXES: [(f64, &str); 4] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
        let max = largest(values);
        let (factor, prefix) = PREFIXES
            .iter()
            .copied()
            .find(|(p, _)| max >= *p)
            .unwrap_or((1.0, ""));
        Self { factor, prefix }
    }

    /// The time unit (s, ms, µs, ns) that puts the largest of `secs` in
    /// [1, 1000) (or above, in seconds).
    pub fn time(secs: impl IntoIterator<Item = f64>) -> Self {
        let max = largest(secs);
        let (factor, prefix) = if max >= 1.0 {
            (1.0, "s")
        } else if max >= 1e-3 {
            (1e-3, "ms")
        } else if max >= 1e-6 {
            (1e-6, "µs")
        } else {
            (1e-9, "ns")
        };
        Self { factor, prefix }
    }

    /// `v` bit/s in this column's unit: `761.9 Mbit/s`.
    pub fn bits_per_s(&self, v: f64) -> String {
        format!("{} {}bit/s", sig4(v / self.factor), self.prefix)
    }

    /// `v` B/s in this column's unit: `12.19 MB/s`.
    pub fn bytes_per_s(&self, v: f64) -> String {
        format!("{} {}B/s", sig4(v / self.factor), self.prefix)
    }

    /// `secs` in this column's time unit: `6.152 ms` (a [`Scale::time`]).
    pub fn secs(&self, secs: f64) -> String {
        format!("{} {}", sig4(secs / self.factor), self.prefix)
    }
}

fn largest(values: impl IntoIterator<Item = f64>) -> f64 {
    values
        .into_iter()
        .map(f64::abs)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
}

/// Significant digits a CSV number keeps: more than any measurement or model
/// input carries, fewer than the 17 that show a float's binary noise.
pub const CSV_SIGNIFICANT_DIGITS: usize = 9;

/// A figure for CSV: rounded to [`CSV_SIGNIFICANT_DIGITS`] significant
/// digits, then written as the shortest decimal that reads back to that
/// value (`123040`, `148809.524`, `6.72`, `100000000000`).
pub fn csv_number(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    let rounded: f64 = format!("{:.*e}", CSV_SIGNIFICANT_DIGITS - 1, v)
        .parse()
        .unwrap_or(v);
    if rounded == 0.0 {
        return "0".into();
    }
    format!("{rounded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_unit_per_column() {
        let s = Scale::si([684.5e6, 1.219e9]);
        assert_eq!(s.bytes_per_s(684.5e6), "0.6845 GB/s");
        assert_eq!(s.bytes_per_s(1.219e9), "1.219 GB/s");
        assert_eq!(Scale::si([0.0]).bits_per_s(0.0), "0 bit/s");
        let t = Scale::time([672e-9, 12.304e-6]);
        assert_eq!(t.secs(672e-9), "0.6720 µs");
        assert_eq!(Scale::time([6.152e-3]).secs(6.152e-3), "6.152 ms");
    }

    #[test]
    fn csv_numbers_carry_no_binary_noise() {
        assert_eq!(csv_number(123_039.999_999_999_99), "123040");
        assert_eq!(csv_number(148_809.523_809_523_82), "148809.524");
        assert_eq!(csv_number(123.039_999_999_999_99), "123.04");
        assert_eq!(csv_number(1e11), "100000000000");
        assert_eq!(csv_number(54.761_904_761_904_766), "54.7619048");
        assert_eq!(csv_number(0.0), "0");
        assert_eq!(csv_number(f64::NAN), "");
    }
}
