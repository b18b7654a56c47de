//! teammem keeps a repository's team memory (its wiki) in step with what merges
//! into the default branch. The modules are listed in reading order.

pub mod config; // teammem.toml, validated once into typed config
pub mod forge; // where sources live: GitHub's REST API (App auth, verification) and local git
pub mod ingest;
pub mod scheduler; // cron schedules for rescue, retention and sweep
pub mod secrets; // the GitHub App key (Key Vault or a 0600 file), secrets that never print
pub mod tokens; // maintainer API tokens, stored as SHA-256 hashes // signed dispatches: HMAC, OIDC, parsing, verification, one error per check
