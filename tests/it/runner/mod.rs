//! The job runner against real git repositories made with the `git` CLI:
//! evidence collection on the local forge, the writer's evidence tools, the
//! handler end to end with the real writer child, and the agent backends.

// The audience rule past dispatch: a visibility change while queued, a retry, the sweep.
mod audience;
// The default log of one real job: one INFO line per state change the queue recorded, no other naming the job.
mod job_log;
// A long history over four quarters: quarter pages, nothing lost, a removed area and file.
mod archives;
// How-to-work-here.md through the daemon: written with markers, read again at the tip on a direct push or a PR that touches what it reads.
mod how_to_work;
// The per-job broker: GitHub source files and listings for get_source_file and list_source_files, reachable only
// by the writer it was given to, and its end with the job.
mod broker;
// The command backend with a small test agent that drives the job's writer through the relay.
mod command;
// One job's agent against another job's endpoint, a left-over work directory's links, forged log lines.
mod cross_job;
// The runner inside the real daemon: signed dispatch to a succeeded job and wiki pages.
mod daemon;
// A range without pull requests refreshes the pages of its tip.
mod direct_changes;
// The first-parent history a backfill plans from, on both forges against the git CLI.
mod forge_history;
// Signed dispatches, following jobs, the daemon's hold point, the wiki read with git.
pub(crate) mod daemon_client;
// Issue #5's end-to-end scenarios, written once for both forges.
mod e2e;
// The scenarios on the GitHub forge (fake REST API, wiki over git http-backend).
mod e2e_github;
// The scenarios on the local forge, and the openai and command agents in the daemon.
mod e2e_local;
// Commits, merge and squash "pull requests", manifests, bounds.
mod evidence;
// get_job_evidence, list_pull_request_files, list_source_files, get_source_file through the writer child.
mod evidence_tools;
// Source and wiki repositories built with the git CLI (shared helpers; not
// every test module uses each one).
#[allow(dead_code)]
pub mod fixture;
// One source, its wiki and the real daemon serving them: the setup most tests here share.
mod one_source;
// The runner in the real daemon on the GitHub forge: fake REST API, wiki over git http-backend.
mod github;
// A hostile command agent tries every escape and publishes what it got: no secret, nothing left running.
mod hostile;
// The sandbox failing closed, receipts that are not files, the token revoked on failure.
mod isolation;
// GitHub evidence against the fake REST API: paging, bounds, classification, PR jobs, policy.
mod github_evidence;
// The JobHandler end to end with the real writer child and the git CLI as oracle.
mod handler;
// Evidence markers followed through real histories: moved, stale, deleted, renamed, one commit.
mod staleness;
// The same on a GitHub source: the fake's compares and file histories, the local forge as oracle.
mod staleness_github;
// The openai backend against a scripted chat-completions fake on loopback.
mod openai;
// One job, one wiki commit: staged writes published once, nothing on failure or cancel, a moved wiki rebuilt on.
mod one_commit;
// A wiki a person edited heavily: moved and renamed pages, deleted anchors and sections; repaired or left alone with a note.
mod person_edits;
// Purposes through the real writer: a crate doc kept in its README, usage boilerplate, a sentence over two lines.
mod purposes;
// The builtin's rebuild after its own second writer call conflicted, and a sections-only commit: one commit, a receipt that says updated.
mod rebuild;
// A renamed file keeps its purpose and its history: both paths on the entry, get_context follows the rename.
mod renames;
// A source with git submodules: gitlinks added, re-pinned, moved, removed; listed as submodules.
mod submodules;
// A range larger than one job: ordered parts through the real daemon; coalescing only within the bound.
mod split;
// The sweep for missed pushes: the real daemon on both forges, and its decisions in process.
mod sweep;
// The writer trusts only the runner: a tampered evidence.json, checked and budgeted marker rewrites, Home.md below teammem's lines, bounded diffs, fair staleness checks, last_change.
mod write_rules;
