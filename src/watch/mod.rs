//! Watch mode (`runwarden watch`): what a command (an agent step) actually
//! did on the configured surfaces, as opposed to what could carry a
//! message, and whether it read credentials it had no business reading.
//! - [`crate::state`]: the snapshots it takes and their differences;
//! - [`canary`]: decoy credentials where agents look, and the detection of
//!   any read of them (fanotify, else inotify, else atime);
//! - [`run`]: the whole watch (snapshot, canaries, the command, snapshot,
//!   diff) and its report.

pub mod canary;
pub mod run;
