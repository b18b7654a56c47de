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

// The local forge's source-repository reader lives with the forge (DESIGN §1:
// only `forge/local/` opens sources with gix). Until the forge branch's
// `forge/local/mod.rs` declares it, the runner includes the file by path.
#[path = "../forge/local/evidence.rs"]
pub mod local_source;
