//! Outputs: each a function over the [`crate::report::Report`] (or, for
//! `carriers`, over the public carrier catalogue). Outputs never see a
//! surface's internals, and every line they print is escaped
//! ([`crate::escape`]).

pub mod carriers;
pub mod comment;
pub mod coverage;
pub mod fleet;
pub mod github;
pub mod groups;
pub mod json;
pub mod markdown;
pub mod repo;
pub mod review;
pub mod sarif;
pub mod table;

use clap::ValueEnum;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table for people: on a terminal, one line per surface (`-v` for
    /// every channel); elsewhere (a pipe, a file, a log) every channel.
    Table,
    /// Every channel, one row each, on a terminal too.
    TableWide,
    /// The JSON report.
    Json,
    /// The table plus GitHub Actions annotations; also writes the job
    /// summary and step outputs when the runner provides their files.
    Github,
}
