//! teammem keeps a repository's team memory (its wiki) in step with what merges
//! into the default branch. The modules are listed in reading order.

pub mod config; // teammem.toml, validated once into typed config
pub mod mcp;
pub mod scheduler; // cron schedules for rescue, retention and sweep
pub mod tokens; // maintainer API tokens, stored as SHA-256 hashes
pub mod wiki; // the team memory as git: mirrors, reads, checked writes, publish (the only gix user) // MCP servers over the wiki (read tools, job-bound writer) and the `teammem wiki` functions
