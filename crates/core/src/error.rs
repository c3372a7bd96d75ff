//! Errors as one line of text.
//!
//! Every error type of linerate prints only its own message; what caused it
//! (an OS error, a refused bpf command) is its `source`. The binary prints
//! the whole chain (`{:#}`); code that must turn an error into a `String`
//! (a report field, a message to the peer) uses [`chain`], so the cause is
//! not lost.

use std::error::Error;

/// `err` and each of its sources, outermost first, joined by `": "` (as
/// anyhow's `{:#}`): `setns into /run/netns/x failed: Operation not
/// permitted (os error 1)`. A source whose text the line already ends with
/// (an error that still prints its source in its own message) is not
/// repeated.
pub fn chain(err: &dyn Error) -> String {
    let mut line = err.to_string();
    let mut next = err.source();
    while let Some(e) = next {
        let text = e.to_string();
        if !text.is_empty() && !line.ends_with(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
        next = e.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

    #[derive(Debug)]
    struct Leaf;
    impl fmt::Display for Leaf {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("No such file or directory (os error 2)")
        }
    }
    impl Error for Leaf {}

    /// An error with a source; `repeat`: its message also prints the source
    /// (the double printing this module's callers avoid).
    #[derive(Debug)]
    struct Outer {
        what: &'static str,
        repeat: bool,
        source: Box<dyn Error + 'static>,
    }
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            if self.repeat {
                write!(f, "{}: {}", self.what, self.source)
            } else {
                f.write_str(self.what)
            }
        }
    }
    impl Error for Outer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(self.source.as_ref())
        }
    }

    #[test]
    fn whole_chain_outermost_first() {
        let e = Outer {
            what: "bed state /run/x",
            repeat: false,
            source: Box::new(Outer {
                what: "open",
                repeat: false,
                source: Box::new(Leaf),
            }),
        };
        assert_eq!(
            chain(&e),
            "bed state /run/x: open: No such file or directory (os error 2)"
        );
        assert_eq!(chain(&Leaf), "No such file or directory (os error 2)");
    }

    #[test]
    fn a_source_already_printed_is_not_repeated() {
        let e = Outer {
            what: "cannot run `ip`",
            repeat: true,
            source: Box::new(Leaf),
        };
        let line = chain(&e);
        assert_eq!(line.matches("os error 2").count(), 1, "{line}");
        assert_eq!(
            line,
            "cannot run `ip`: No such file or directory (os error 2)"
        );
    }
}
