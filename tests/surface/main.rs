//! Surface tests, one file per surface type (mirrors src/surface/).
mod actions_artifacts;
mod actions_cache;
#[path = "../common/mod.rs"]
mod common;
mod conformance;
mod docker_daemon;
mod filesystem;
mod git_remote;
mod github_api;
mod github_api_dispatch;
mod github_api_more;
mod github_api_traces;
mod http_cache;
mod network_egress;
mod npm_registry;
mod oci_registry;
mod pypi_index;
