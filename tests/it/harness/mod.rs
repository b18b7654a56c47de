//! Test harness: real things started on loopback and in temp directories.

pub mod daemon; // the real `teammem` binary on a temp data dir, its address read from stdout
pub mod fake_github; // stateful fake of GitHub's REST API + OIDC issuer, backed by real git repos; one file per resource
pub mod git; // the git CLI as oracle: one helper, no user config, fixed identity
pub mod git_http; // smart-HTTP git server (git http-backend) with Basic auth, request log, faults
pub mod inproc; // the daemon in-process, with a job handler the test gates
pub mod postgres; // one real PostgreSQL server per test process (initdb + pg_ctl as an unprivileged user), a fresh database per test
