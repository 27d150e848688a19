//! A surface's state at one moment, and what changed between two moments:
//! what watch mode (`runwarden watch`) records and what each surface's
//! `Watchable` implementation produces.
//! - [`snapshot`]: a surface at one moment, streamed to disk in order,
//!   one [`line`] per entry;
//! - [`diff`]: two snapshots compared as the second is taken.
//!
//! Why a module of its own, below both: the surfaces write snapshots and
//! read changes, and watch mode drives the surfaces, so these types cannot
//! live in either without an import cycle.

pub mod diff;
pub mod line;
pub mod snapshot;
