//! Progress lines on stderr, only when stderr is a terminal (SPEC §4).

use std::io::IsTerminal as _;

/// Whether progress should be shown.
pub(crate) fn enabled() -> bool {
    std::io::stderr().is_terminal()
}
