//! Surface tests, one file per surface type (mirrors src/surface/).
#[path = "../common/mod.rs"]
mod common;
mod filesystem;
mod git_remote;
