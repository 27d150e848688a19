//! Watch mode (issue 17): what an agent step actually did, as opposed to
//! what could carry a message. Its parts land one at a time; so far:
//! - [`canary`]: decoy credentials where agents look, and the detection of
//!   any read of them (fanotify, else inotify, else atime).
//!
//! Not yet wired to the command line or the action: `runwarden watch`
//! comes with the surface snapshots and their diff.

pub mod canary;
