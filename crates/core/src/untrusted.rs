//! Strings a peer controls (a client's software name, a congestion-control
//! name, an unknown variant echoed by a parse error, a server's refusal
//! reason) made safe to log or print: control characters, line breaks and
//! terminal escapes become visible escapes, and the length is bounded, so
//! a peer can neither forge log lines nor drive the reader's terminal.

/// Longest text [`escape`] keeps, characters; the rest is cut with `…`.
pub const MAX_SHOWN_CHARS: usize = 200;

/// `s` with every control character (C0, DEL, C1, and the Unicode line and
/// paragraph separators and bidirectional overrides) written as `\u{…}`
/// (`\n`, `\r`, `\t` as such) and a backslash doubled, cut to
/// [`MAX_SHOWN_CHARS`] characters.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_SHOWN_CHARS + 8));
    for (i, c) in s.chars().enumerate() {
        if i == MAX_SHOWN_CHARS {
            out.push('…');
            break;
        }
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_dangerous(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// `s` with only the dangerous characters of [`escape`] written as
/// `\u{…}` (backslashes kept, no length limit): a last pass over a whole
/// log line whose quoted parts were escaped already.
pub fn neutralize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if is_dangerous(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

fn is_dangerous(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_escapes_become_visible() {
        assert_eq!(escape("cubic"), "cubic");
        assert_eq!(escape("a\nb"), "a\\nb");
        assert_eq!(
            escape("\u{1b}[2J\u{1b}]0;x\u{7}"),
            "\\u{1b}[2J\\u{1b}]0;x\\u{7}"
        );
        assert_eq!(escape("x\\ny"), "x\\\\ny");
        assert_eq!(escape("\u{9b}31m\u{202e}"), "\\u{9b}31m\\u{202e}");
        assert_eq!(escape("é ü 日本"), "é ü 日本");
        let long = "y".repeat(1000);
        assert_eq!(escape(&long).chars().count(), MAX_SHOWN_CHARS + 1);
        assert_eq!(neutralize("a\\n\nb\u{1b}"), "a\\n\\u{a}b\\u{1b}");
        // Nothing a peer sends survives as a line break or an escape.
        for c in (0u32..0x110000).filter_map(char::from_u32) {
            let e = escape(&c.to_string());
            assert!(!e.chars().any(is_dangerous), "{c:?} -> {e:?}");
        }
    }
}
