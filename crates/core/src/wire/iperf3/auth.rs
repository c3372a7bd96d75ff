//! iperf3's authentication (3.2+), the parts without cryptography: the
//! credentials plaintext the client encrypts with the server's RSA public
//! key (`"user: %s\npwd:  %s\nts:   %" PRId64`), the users file
//! (`user,hex(sha256("{user}password"))` lines, `#` comments) and the
//! timestamp skew check. The RSA and SHA-256 steps live in
//! `linerate_io::iperf3::auth`.

/// iperf3's default skew threshold, s.
pub const DEFAULT_SKEW_S: i64 = 10;

/// The plaintext of an authentication token.
pub fn plaintext(user: &str, password: &str, unix_s: i64) -> String {
    format!("user: {user}\npwd:  {password}\nts:   {unix_s}")
}

/// The string whose SHA-256 the users file holds: `{user}password`.
pub fn salted(user: &str, password: &str) -> String {
    format!("{{{user}}}{password}")
}

/// Credentials read from a decrypted token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub user: String,
    /// Password (clear).
    pub password: String,
    /// The client's clock, s since the epoch.
    pub unix_s: i64,
}

/// Reads the plaintext as iperf3's `sscanf` does: literal words, any
/// whitespace between fields, names and password without whitespace.
pub fn parse_plaintext(text: &[u8]) -> Option<Credentials> {
    let text = std::str::from_utf8(text).ok()?;
    let text = text.trim_end_matches('\0');
    let mut words = text.split_ascii_whitespace();
    let mut field = |label: &str| -> Option<String> {
        // "user:" may be glued to its value only if the value follows the
        // colon directly (sscanf's %s after a literal).
        let w = words.next()?;
        let rest = w.strip_prefix(label)?;
        if rest.is_empty() {
            words.next().map(str::to_string)
        } else {
            Some(rest.to_string())
        }
    };
    let user = field("user:")?;
    let password = field("pwd:")?;
    let ts = field("ts:")?;
    // %PRId64 reads an optional sign and digits, ignoring what follows.
    let end = ts
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && (c == '-' || c == '+'))))
        .map_or(ts.len(), |(i, _)| i);
    let unix_s = ts[..end].parse().ok()?;
    Some(Credentials {
        user,
        password,
        unix_s,
    })
}

/// Whether a client clock of `ts` is within `skew_s` of `now`.
pub fn within_skew(ts: i64, now: i64, skew_s: i64) -> bool {
    now.checked_sub(ts).is_some_and(|d| d.abs() <= skew_s)
}

/// Whether the users file `text` lists `user` with password hash
/// `hash_hex` (lower-case hex of SHA-256 of [`salted`]). Lines are cut at
/// the first CR or LF; empty lines, lines without a comma and lines
/// starting with `#` are skipped; fields are the first two non-empty
/// comma-separated pieces (strtok).
pub fn users_file_lists(text: &str, user: &str, hash_hex: &str) -> bool {
    text.split('\n').any(|line| {
        let line = line.split('\r').next().unwrap_or_default();
        if line.is_empty() || !line.contains(',') || line.starts_with('#') {
            return false;
        }
        let mut parts = line.split(',').filter(|p| !p.is_empty());
        parts.next() == Some(user) && parts.next() == Some(hash_hex)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_round_trips_with_iperf3_spacing() {
        let t = plaintext("mario", "rossi", 1_700_000_000);
        assert_eq!(t, "user: mario\npwd:  rossi\nts:   1700000000");
        assert_eq!(
            parse_plaintext(t.as_bytes()),
            Some(Credentials {
                user: "mario".into(),
                password: "rossi".into(),
                unix_s: 1_700_000_000
            })
        );
        assert_eq!(
            parse_plaintext(b"user: a\npwd: b\nts: -5x").map(|c| c.unix_s),
            Some(-5)
        );
        assert_eq!(parse_plaintext(b"user: a\npwd: b"), None);
        assert_eq!(parse_plaintext(b"pwd: a\nuser: b\nts: 1"), None);
    }

    #[test]
    fn users_file_rules() {
        let f = "# comment,x\n\nmario,abc\r\nluigi,,def\nnocomma\n";
        assert!(users_file_lists(f, "mario", "abc"));
        assert!(users_file_lists(f, "luigi", "def"));
        assert!(!users_file_lists(f, "mario", "abd"));
        assert!(!users_file_lists(f, "# comment", "x"));
        assert_eq!(salted("mario", "rossi"), "{mario}rossi");
    }

    #[test]
    fn skew() {
        assert!(within_skew(100, 110, 10));
        assert!(!within_skew(100, 111, 10));
        assert!(!within_skew(i64::MIN, i64::MAX, 10));
    }
}
