//! Apply: runs a plan's command lines and their read-backs.

use std::process::{Command, Stdio};

use crate::plan::{render_argv, Step};
use crate::BedError;

/// Runs `argv` (no shell), with `LC_ALL=C` so outputs parse the same
/// everywhere; returns its stdout, or an error naming the command, its exit
/// status and its stderr.
pub fn run_command(argv: &[String]) -> Result<String, BedError> {
    let command = render_argv(argv);
    let (prog, args) = argv.split_first().ok_or_else(|| BedError::Spawn {
        command: command.clone(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty command"),
    })?;
    let out = Command::new(prog)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| BedError::Spawn {
            command: command.clone(),
            source,
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.trim();
        return Err(BedError::Command {
            command,
            status: out.status.to_string(),
            stderr: if stderr.is_empty() {
                "(nothing on stderr)".into()
            } else {
                stderr.lines().collect::<Vec<_>>().join(" / ")
            },
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// [`run_command`] for a netlink dump (`ip … show`), retried a few times:
/// a dump that overlaps a change elsewhere (other processes creating or
/// deleting links) is interrupted and iproute2 fails it ("Dump was
/// interrupted and may be inconsistent").
pub fn run_dump(argv: &[String]) -> Result<String, BedError> {
    let mut last = None;
    for attempt in 0..5u64 {
        match run_command(argv) {
            Ok(out) => return Ok(out),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(20 * (attempt + 1)));
    }
    Err(last.unwrap_or_else(|| BedError::Invalid("no attempt ran".into())))
}

/// Runs one step and, if it sets something, reads it back and checks it.
pub(crate) fn apply_step(step: &Step) -> Result<(), BedError> {
    run_command(&step.argv())?;
    if let Some(rb) = step.readback() {
        let out = run_command(&rb.argv)?;
        rb.check.verify(&out).map_err(|why| BedError::Readback {
            setting: rb.setting.clone(),
            why,
            command: render_argv(&rb.argv),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_name_the_command_and_stderr() {
        let argv: Vec<String> = ["sh", "-c", "echo oops >&2; exit 3"]
            .map(String::from)
            .to_vec();
        let e = run_command(&argv).unwrap_err().to_string();
        assert!(e.contains("`sh -c 'echo oops >&2; exit 3'` failed"), "{e}");
        assert!(e.contains("oops") && e.contains('3'), "{e}");
        let e = run_command(&["lr-no-such-binary".to_string()]).unwrap_err();
        assert!(matches!(e, BedError::Spawn { .. }), "{e}");
        // The OS error is the source, printed once: not in the message,
        // once in the chain.
        let line = linerate_core::error::chain(&e);
        assert_eq!(e.to_string(), "cannot run `lr-no-such-binary`");
        assert_eq!(line.matches("os error 2").count(), 1, "{line}");
        assert!(
            line.starts_with("cannot run `lr-no-such-binary`: No such file"),
            "{line}"
        );
        assert!(run_command(&[]).is_err());
        assert_eq!(
            run_command(&["echo".to_string(), "hi".to_string()]).unwrap(),
            "hi\n"
        );
    }
}
