//! runwarden's entry point: parse, run, map errors to exit codes.
//! Everything else lives in the library (`src/lib.rs`).

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // A run A or B (`__run`, started by the engine, no other argument)
    // goes straight to its work: building the whole command line parser
    // costs every run of every probe for nothing.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == "__run") && args.next().is_none() {
        return ExitCode::from(runwarden::child::run() as u8);
    }
    let cli = runwarden::cli::Cli::parse();
    match runwarden::cli::run(cli) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            runwarden::cli::not_run(&e);
            ExitCode::from(2)
        }
    }
}
