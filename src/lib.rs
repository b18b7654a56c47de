//! teammem keeps a repository's team memory (its wiki) in step with what merges
//! into the default branch. The modules are listed in reading order.

pub mod cli; // clap commands and their dispatch
pub mod config; // teammem.toml, validated once into typed config
pub mod db; // SQLite pool (WAL, busy timeout) and embedded migrations
pub mod queue; // the durable job queue: the only SQL about jobs
