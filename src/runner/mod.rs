//! The job runner: turns one verified range (or one merged PR) into wiki pages.
//! It re-checks ancestry, collects the authorized evidence, spawns the job-bound
//! wiki-writer MCP child and runs the configured agent against it, then checks
//! the agent's receipt against the wiki before the job may succeed.
//!
//! Invariant: the runner never writes the wiki itself; every edit goes through
//! the writer child, and a job succeeds only on a receipt the wiki confirms.

pub mod builtin;
pub mod evidence;
pub mod receipt;

pub use crate::forge::local::evidence as local_source;
