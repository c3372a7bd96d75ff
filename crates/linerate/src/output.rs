//! Writing results to stdout, where a closed pipe (`linerate … | head`) is a
//! normal end, not an error, and lines to stderr, where no write error (a
//! closed pipe, a full disk: `2>/dev/full`) may panic or change the outcome.

use std::io::{self, Write as _};

use crate::Failure;

/// Writes `text` to stdout; a broken pipe ends quietly.
pub(crate) fn print(text: &str) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Usage(
            anyhow::Error::new(e).context("writing to stdout"),
        )),
    }
}

/// Pretty JSON followed by a newline.
pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> Result<(), Failure> {
    let mut text = serde_json::to_string_pretty(value).map_err(anyhow::Error::from)?;
    text.push('\n');
    print(&text)
}

/// Writes one line to stderr; a write error (closed or full stderr) is
/// ignored: what stderr carries is diagnostics, and losing them must not
/// turn into a panic (exit 101) or a failed command.
pub(crate) fn eprint_line(line: &str) {
    let mut err = io::stderr().lock();
    let _ = err.write_all(line.as_bytes());
    let _ = err.write_all(b"\n");
    let _ = err.flush();
}

/// [`eprint_line`] with `format!` arguments.
macro_rules! elog {
    ($($arg:tt)*) => {
        $crate::output::eprint_line(&format!($($arg)*))
    };
}
pub(crate) use elog;
