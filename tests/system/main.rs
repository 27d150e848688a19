//! System tests (mirrors src/): the real binary and the library's entry
//! points, one module per part of runwarden: the command line, the
//! engine, config validation, the outputs and `publish`, the GitHub
//! Action, cross-job `plant`/`recover`/`cleanup`, `discover`,
//! `rendezvous`, the HTTP client and the loopback services; and the
//! repository's own docs and workflows. (The surface types are in
//! tests/surface/, watch mode in tests/watch/.)
mod action;
mod cli;
#[path = "../common/mod.rs"]
mod common;
mod coverage;
mod crossjob;
mod discover;
mod docs;
mod engine;
mod http;
mod loopback;
mod newcomer;
mod output;
mod pinned;
mod plan;
mod publish;
mod rendezvous;
mod structure;
mod workflows;
