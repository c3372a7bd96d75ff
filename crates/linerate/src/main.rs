//! The `linerate` binary: parses flags into typed configuration, runs one
//! command from the library crates, prints its result and maps errors to exit
//! codes. Nothing else lives here.
//!
//! Exit codes (SPEC §4): 0 ok, 1 a measurement failed its preconditions,
//! 2 usage or setup error.

mod calc;
mod demo;
mod flags;
mod inspect;
mod latency;
mod output;
mod progress;
mod rfc2544;
mod server;
mod testbed;
mod throughput;

use std::process::ExitCode;

use clap::Parser as _;

use crate::flags::{Cli, Command};

/// How a command failed, which decides the exit code.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Bad flags, bad input or a setup that cannot work: exit 2.
    Usage(anyhow::Error),
    /// The measurement ran but its preconditions failed: exit 1.
    Measurement(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Self::Usage(e.into())
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with exit 0; usage errors to
            // stderr with exit 2 (clap's own convention, kept).
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let result = match cli.command {
        Command::Calc(args) => calc::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Latency(args) => latency::run(&args),
        Command::Server(args) => server::run(&args),
        Command::Throughput(args) => throughput::run(&args),
        Command::Testbed(args) => testbed::run(&args),
        Command::Inspect(args) => inspect::run(&args),
        Command::Rfc2544(args) => rfc2544::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            eprintln!("linerate: error: {e:#}");
            ExitCode::from(2)
        }
        Err(Failure::Measurement(e)) => {
            eprintln!("linerate: measurement not trustworthy: {e:#}");
            ExitCode::from(1)
        }
    }
}
