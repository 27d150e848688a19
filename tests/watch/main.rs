//! Watch mode tests (mirrors src/watch/): the canaries against real
//! readers, a watch's attribution of what a command did on real surfaces,
//! and `runwarden watch` as a user runs it.
mod canary;
mod cli;
#[path = "../common/mod.rs"]
mod common;
mod run;
mod surfaces;
