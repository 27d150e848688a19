//! runwarden proves which channels between two isolated CI runs are open.
//!
//! Data flows one way: config -> plan -> plant (run A) -> recover (run B) ->
//! verdicts -> report -> outputs. Each step is one module:
//! [`config`] parses YAML with locations, [`plan`] validates it into a typed
//! plan, [`engine`] runs A and B as separate child processes ([`child`] is
//! their side), [`verdict`] holds every verdict rule, [`report`] is the
//! versioned result, and [`output`] renders it. Surfaces live in [`surface`]:
//! one folder per type, each implementing one typed trait
//! ([`surface::Surface`]), listed once in one registry; a kernel adapter
//! gives the engine its JSON view of every type. [`http`] speaks HTTP, and
//! its [`http::answer`] alone decides what an HTTP answer means (a refusal,
//! a conflict, not the server's own). docs/contributing.md says how to add
//! a surface type.

pub mod archive;
pub mod child;
pub mod cli;
pub mod config;
pub mod coverage;
pub mod discover;
pub mod drill;
pub mod engine;
pub mod escape;
pub mod fault;
pub mod git;
pub mod github;
pub mod http;
pub mod loopback;
pub mod marker;
pub mod nonce;
pub mod output;
pub mod pinned;
pub mod plan;
pub mod publish;
pub mod receipt;
pub mod redact;
pub mod rendezvous;
pub mod report;
pub mod route;
pub mod say;
pub mod scan;
pub mod signals;
pub mod state;
pub mod surface;
pub mod sys;
pub mod timed;
pub mod timefmt;
pub mod trust;
pub mod verdict;
pub mod watch;
pub mod wire;
pub mod wrap;
