//! Which server a process is ([`ServerKind`]) and what it may expose
//! ([`Profile`]): the contract the binding (`context.rs`) and the toolsets'
//! filter (`toolsets/mod.rs`) share, kept below both so neither imports the
//! other for it.
//!
//! Invariant: a profile is fixed when the server starts and never changes;
//! read-only beats the kind (`toolsets::exposes`).

/// Which server a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// `teammem mcp --config FILE`: the coding agents' server.
    Agent,
    /// `teammem mcp --wiki-writer`: the job-bound writer child.
    WikiWriter,
}

/// What a server is allowed to expose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub kind: ServerKind,
    /// `--read-only`: no tool that is not read-only, whatever the kind.
    pub read_only: bool,
}
