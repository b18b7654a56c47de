//! The job runner against real git repositories made with the `git` CLI:
//! evidence collection on the local forge, the builtin agent's edits, receipts
//! and the handler end to end with the real writer child.

mod evidence; // commits, merge and squash "pull requests", manifests, bounds
mod evidence_tools;
#[allow(dead_code)] // shared helpers; not every test module uses each one
pub mod fixture;
mod handler; // the JobHandler end to end with the real writer child and the git CLI as oracle // source and wiki repositories built with the git CLI // get_job_evidence, list_pull_request_files, get_source_file through the writer child
