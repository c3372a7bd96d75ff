//! Writing results to stdout, where a closed pipe (`linerate … | head`) is a
//! normal end, not an error.

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
