//! runwarden's entry point: parse, run, map errors to exit codes.
//! Everything else lives in the library (`src/lib.rs`).

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = runwarden::cli::Cli::parse();
    match runwarden::cli::run(cli) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            for line in e.lines() {
                runwarden::cli::error(&line);
            }
            ExitCode::from(2)
        }
    }
}
