//! Surface tests, one file per surface type (mirrors src/surface/).
mod actions_artifacts;
mod actions_cache;
mod build_cache;
#[path = "../common/mod.rs"]
mod common;
mod conformance;
mod docker_daemon;
mod filesystem;
mod git_remote;
mod github_api;
mod http_cache;
mod network_egress;
mod npm_registry;
mod object_store;
mod oci_registry;
mod pypi_index;
