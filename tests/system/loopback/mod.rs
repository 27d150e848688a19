//! The loopback services (mirrors src/loopback/), each proven against a
//! real client before any surface is tested against it.
mod actions_cache;
mod github_artifacts;
mod github_contents;
mod github_graphql;
mod github_rest;
mod github_runs;
mod github_scanning;
