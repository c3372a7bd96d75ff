//! The `linerate` binary: parses flags into typed configuration, runs one
//! command from the library crates, prints its result and maps errors to exit
//! codes. Nothing else lives here.
//!
//! Exit codes (SPEC §4): 0 ok, 1 a measurement failed its preconditions,
//! 2 usage or setup error.

mod calc;
mod ceilings;
mod compare;
mod demo;
mod exporter;
mod flags;
mod history;
mod inspect;
mod journey;
mod latency;
mod output;
mod progress;
mod report;
mod rfc2544;
mod scenario;
mod server;
mod stream;
mod testbed;
mod throughput;

use std::process::ExitCode;

use clap::Parser as _;
use linerate_core::result::{exit_code, Flag, Severity};

use crate::flags::{Cli, Command};

/// How a command failed: bad flags, bad input or a setup that cannot work
/// (exit 2). A measurement whose preconditions failed is not a failure: its
/// result carries invalid flags, and [`finish`] turns them into exit 1.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Exit 2.
    Usage(anyhow::Error),
    /// A check the user asked for failed (`compare --fail-on-regression`):
    /// exit 1.
    Check(anyhow::Error),
    /// A termination signal ended the command after it printed what it
    /// had measured: exit 128 + the signal, as a shell reports it.
    Interrupted(i32),
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Self::Usage(e.into())
    }
}

/// What every command gets besides its own flags.
#[derive(Debug)]
pub(crate) struct Ctx {
    /// How wide human output may be (`--wide`: unlimited).
    pub(crate) width: linerate_report::table::Width,
    /// Where results go: the history, the `--json-stream` ([`history`]).
    pub(crate) results: history::Results,
}

/// What a command's `run` returns: the flags its result earned. The exit code
/// is decided here, once, from them (0 clean, 1 any invalid flag).
pub(crate) trait IntoFlags {
    /// The flags.
    fn into_flags(self) -> Vec<Flag>;
}

impl IntoFlags for () {
    fn into_flags(self) -> Vec<Flag> {
        Vec::new()
    }
}

impl IntoFlags for Vec<Flag> {
    fn into_flags(self) -> Vec<Flag> {
        self
    }
}

/// Commands the specification lists that are not built yet.
const NOT_BUILT: [(&str, &str); 0] = [];

fn main() -> ExitCode {
    if let Some((name, what)) = std::env::args()
        .nth(1)
        .and_then(|a| NOT_BUILT.iter().find(|(n, _)| *n == a))
    {
        output::elog!(
            "linerate: error: `linerate {name}` ({what}) is specified but not built yet; `linerate --help` lists the commands that are"
        );
        return ExitCode::from(2);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with exit 0; usage errors to
            // stderr with exit 2 (clap's own convention, kept).
            // clap's print returns its write error: ignored like every
            // other write to stderr.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let results = match history::Results::new(&cli) {
        Ok(r) => r,
        Err(e) => return finish::<()>(Err(e)),
    };
    let ctx = Ctx {
        width: linerate_report::table::Width::new(cli.wide),
        results,
    };
    // Clients authenticate with the key of --auth-file or LINERATE_AUTH_KEY.
    if matches!(cli.command, Command::Throughput(_) | Command::Latency(_)) {
        match server::key(cli.auth_file.as_deref()) {
            Ok(k) => linerate_io::throughput::control::set_client_key(k),
            Err(e) => return finish::<()>(Err(e)),
        }
    }
    match cli.command {
        Command::Calc(args) => finish(calc::run(&args, &ctx)),
        Command::Demo(args) => finish(demo::run(&args, &ctx)),
        Command::Latency(args) => finish(latency::run(&args, &ctx)),
        Command::Server(args) => finish(server::run(&args, cli.auth_file.as_deref(), &ctx)),
        Command::Throughput(args) => finish(throughput::run(&args, &ctx)),
        Command::Testbed(args) => finish(testbed::run(&args, &ctx)),
        Command::Inspect(args) => finish(inspect::run(&args, &ctx)),
        Command::Rfc2544(args) => finish(rfc2544::run(&args, &ctx)),
        Command::History(args) => finish(history::run(&args, &ctx)),
        Command::Compare(args) => finish(compare::run(&args, &ctx)),
        Command::Ceilings(args) => finish(ceilings::run(&args, &ctx)),
        Command::Report(args) => finish(report::run(&args, &ctx)),
        Command::Exporter(args) => finish(exporter::run(&args, &ctx)),
        Command::Journey(args) => finish(journey::run(&args, &ctx)),
        Command::Scenario(args) => finish(scenario::run(&args, &ctx)),
    }
}

/// The exit code of a command's outcome; every error is printed here, once.
fn finish<T: IntoFlags>(outcome: Result<T, Failure>) -> ExitCode {
    match outcome {
        Ok(t) => {
            let flags = t.into_flags();
            let code = exit_code(&flags);
            if code != 0 {
                let codes: Vec<&str> = flags
                    .iter()
                    .filter(|f| f.severity == Severity::Invalid)
                    .map(|f| f.code.as_str())
                    .collect();
                output::elog!(
                    "linerate: measurement not trustworthy ({}): see the flags in the result",
                    codes.join(", ")
                );
            }
            ExitCode::from(code)
        }
        Err(Failure::Usage(e)) => {
            output::elog!("linerate: error: {e:#}");
            ExitCode::from(2)
        }
        Err(Failure::Check(e)) => {
            output::elog!("linerate: {e:#}");
            ExitCode::from(1)
        }
        Err(Failure::Interrupted(sig)) => {
            output::elog!(
                "linerate: interrupted by signal {sig}: the result printed is what was measured until then"
            );
            ExitCode::from(u8::try_from(128 + sig).unwrap_or(u8::MAX))
        }
    }
}
