//! The job runner against real git repositories made with the `git` CLI:
//! evidence collection on the local forge, the writer's evidence tools, the
//! handler end to end with the real writer child, and the agent backends.

mod command;
mod evidence; // commits, merge and squash "pull requests", manifests, bounds
mod evidence_tools; // get_job_evidence, list_pull_request_files, get_source_file through the writer child
#[allow(dead_code)] // shared helpers; not every test module uses each one
pub mod fixture; // source and wiki repositories built with the git CLI
mod handler; // the JobHandler end to end with the real writer child and the git CLI as oracle
mod openai; // the openai backend against a scripted chat-completions fake on loopback // the command backend with a small test agent that drives its own writer
