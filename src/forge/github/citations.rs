//! Cited source lines followed from their commit to a job's tip in a GitHub
//! source: one compare `cited...tip` per distinct cited commit (its files and
//! their patches) says which citations are current, which only moved or were
//! renamed, and which changed; for a changed one, the file's history since
//! the cited commit (`GET /commits?path=`, then `GET /commits/{sha}` oldest
//! first) names the commit that changed the lines, as the local forge does
//! commit by commit.
//!
//! Invariants:
//! - a citation is `Stale` only when GitHub's patches show its lines changed
//!   (or its file removed) and a commit of the file's history since the cited
//!   commit is found that did it; `Current` or `Moved` only when GitHub's
//!   answer is complete for the file: a file missing from a compare that
//!   lists [`COMPARE_FILE_CAP`] files, a file without a patch (binary, or
//!   past GitHub's diff limit, where it reports no patch and zero changes),
//!   a commit not in the tip's history, or a call over the job's budget is
//!   `Unchecked` with the reason, never guessed;
//! - a job spends at most [`MAX_COMPARES`] compares and [`MAX_HISTORY_CALLS`]
//!   history calls; when the wiki cites more commits than one job compares,
//!   the ones compared are chosen anew per tip, so successive jobs cover all;
//! - only the source's own history is read, with the `contents: read` token.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use super::api::{encode_path, failure};
use super::{GitHubError, GitHubForge, Permissions};
use crate::config::Source;
use crate::forge::evidence::SourceError;
use crate::ids::Sha;
use crate::staleness::{CitationState, Cited, MAX_CITATIONS, Mapped, map_lines, patch_hunks};

/// Distinct cited commits compared per job.
pub const MAX_COMPARES: usize = 24;
/// Calls per job spent naming the commits that changed stale citations.
pub const MAX_HISTORY_CALLS: usize = 48;
/// GitHub lists at most this many files in a compare; a longer list is cut.
pub const COMPARE_FILE_CAP: usize = 300;
/// Commits of one file's history read per listing call.
const HISTORY_PAGE: usize = 100;
/// Renames followed while naming the commit that changed a citation.
const MAX_RENAMES: usize = 4;

#[derive(Deserialize)]
struct Comparison {
    status: String,
    #[serde(default)]
    files: Vec<ApiFile>,
}

/// One file of a compare or of a single commit.
#[derive(Deserialize, Clone)]
struct ApiFile {
    filename: String,
    status: String,
    previous_filename: Option<String>,
    patch: Option<String>,
    sha: Option<String>,
    #[serde(default)]
    changes: u64,
}

#[derive(Deserialize)]
struct CommitFiles {
    #[serde(default)]
    files: Vec<ApiFile>,
}

#[derive(Deserialize)]
struct Listed {
    sha: String,
}

/// What one compare says about one citation.
enum Judged {
    Known(CitationState),
    /// Its lines changed, or its file went away: the commit is still to name.
    Changed,
}

/// The calls of one job's follow, with its budget and what it already read.
struct Follow<'a> {
    forge: &'a GitHubForge,
    source: &'a Source,
    tip: &'a Sha,
    history_calls: usize,
    commits: HashMap<String, Vec<ApiFile>>,
    listings: HashMap<String, Vec<String>>,
}

impl GitHubForge {
    /// Follows every citation in `cited` to `tip`. An outage of GitHub ends
    /// the follow: the citations not yet answered are `Unchecked`.
    pub async fn follow_citations(
        &self,
        source: &Source,
        cited: Vec<Cited>,
        tip: &Sha,
    ) -> Result<BTreeMap<Cited, CitationState>, SourceError> {
        let mut states = BTreeMap::new();
        let mut by_commit: BTreeMap<Sha, Vec<Cited>> = BTreeMap::new();
        for (n, citation) in cited.into_iter().enumerate() {
            if n >= MAX_CITATIONS {
                let reason =
                    format!("more than {MAX_CITATIONS} citations in the wiki; checked the first");
                states.insert(citation, CitationState::Unchecked { reason });
            } else {
                by_commit
                    .entry(citation.commit.clone())
                    .or_default()
                    .push(citation);
            }
        }
        let mut commits: Vec<Sha> = by_commit.keys().cloned().collect();
        // When there are more commits than one job compares, each tip picks
        // its own subset, so the next jobs check the others.
        commits.sort_by_key(|commit| tip.spread(commit.as_str()));
        let mut follow = Follow {
            forge: self,
            source,
            tip,
            history_calls: 0,
            commits: HashMap::new(),
            listings: HashMap::new(),
        };
        let mut outage: Option<String> = None;
        for (n, commit) in commits.iter().enumerate() {
            let group = by_commit.remove(commit).unwrap_or_default();
            if let Some(why) = &outage {
                let reason = format!("GitHub did not answer ({why}); a later job checks it");
                unchecked(&mut states, group, &reason);
                continue;
            }
            if n >= MAX_COMPARES {
                let reason = format!(
                    "the wiki cites more than {MAX_COMPARES} commits; this job compared {MAX_COMPARES} of them and a later job compares others"
                );
                unchecked(&mut states, group, &reason);
                continue;
            }
            match follow.group(commit, group.clone()).await {
                Ok(answers) => states.extend(answers),
                Err(SourceError::Unavailable(why)) => {
                    let reason = format!("GitHub did not answer ({why}); a later job checks it");
                    unchecked(&mut states, group, &reason);
                    outage = Some(why);
                }
                Err(e) => unchecked(&mut states, group, &e.to_string()),
            }
        }
        Ok(states)
    }
}

impl Follow<'_> {
    /// The citations of one cited commit, through one compare.
    async fn group(
        &mut self,
        commit: &Sha,
        group: Vec<Cited>,
    ) -> Result<Vec<(Cited, CitationState)>, SourceError> {
        let r = &self.source.repository;
        let url = format!(
            "/repos/{r}/compare/{commit}...{}?per_page=1&page=1",
            self.tip
        );
        let comparison: Comparison = self
            .forge
            .get_patiently(r, &Permissions::contents_read(), &url)
            .await
            .map_err(|e| {
                failure(e, || {
                    SourceError::Invalid(format!("commit {commit} is not in {r}"))
                })
            })?;
        let mut out = Vec::with_capacity(group.len());
        match comparison.status.as_str() {
            "identical" => {
                out.extend(group.into_iter().map(|c| (c, CitationState::Current)));
                return Ok(out);
            }
            "ahead" => {}
            _ => {
                let reason =
                    format!("commit {commit} is not in the history of the default branch's tip");
                out.extend(group.into_iter().map(|c| {
                    let reason = reason.clone();
                    (c, CitationState::Unchecked { reason })
                }));
                return Ok(out);
            }
        }
        let cut = comparison.files.len() >= COMPARE_FILE_CAP;
        for citation in group {
            let state = match self.judge(&comparison.files, cut, &citation).await? {
                Judged::Known(state) => state,
                Judged::Changed => match self.changing_commit(&citation).await {
                    Ok((changed_in, deleted)) => CitationState::Stale {
                        changed_in,
                        deleted,
                    },
                    Err(Stop::Unavailable(why)) => return Err(SourceError::Unavailable(why)),
                    Err(Stop::Unchecked(reason)) => CitationState::Unchecked { reason },
                },
            };
            out.push((citation, state));
        }
        Ok(out)
    }

    /// One citation against the combined change `cited...tip`.
    async fn judge(
        &mut self,
        files: &[ApiFile],
        cut: bool,
        cited: &Cited,
    ) -> Result<Judged, SourceError> {
        let path = cited.path.as_str();
        let file = files.iter().find(|f| {
            if f.status == "renamed" {
                f.previous_filename.as_deref() == Some(path)
            } else {
                f.filename == path
            }
        });
        let Some(file) = file else {
            if cut {
                return Ok(unchecked_state(format!(
                    "more than {COMPARE_FILE_CAP} files changed since {}; GitHub lists only {COMPARE_FILE_CAP} of them",
                    short(&cited.commit)
                )));
            }
            return Ok(Judged::Known(CitationState::Current));
        };
        if file.status == "removed" {
            return Ok(Judged::Changed);
        }
        let now = file.filename.clone();
        let lines = match &file.patch {
            Some(patch) => match patch_hunks(patch) {
                Some(hunks) => map_lines(cited.lines, &hunks),
                None => {
                    return Ok(unchecked_state(format!(
                        "GitHub's patch of {path} since {} does not parse",
                        short(&cited.commit)
                    )));
                }
            },
            None if file.status == "renamed"
                && file.changes == 0
                && self.same_blob(cited, file).await? =>
            {
                Mapped::At(cited.lines)
            }
            None => {
                return Ok(unchecked_state(format!(
                    "GitHub gave no patch of {path} since {} (a binary file, or past GitHub's diff limit)",
                    short(&cited.commit)
                )));
            }
        };
        Ok(match lines {
            Mapped::At(lines) if now == cited.path && lines == cited.lines => {
                Judged::Known(CitationState::Current)
            }
            Mapped::At(lines) => Judged::Known(CitationState::Moved { path: now, lines }),
            Mapped::Changed => Judged::Changed,
        })
    }

    /// Whether a rename without a patch kept the file's content: its blob at
    /// the cited commit is the renamed file's blob (one contents call). GitHub
    /// drops the patch of a changed file past its diff limit as well.
    async fn same_blob(&mut self, cited: &Cited, file: &ApiFile) -> Result<bool, SourceError> {
        let Some(renamed) = file.sha.as_deref() else {
            return Ok(false);
        };
        let before = self
            .forge
            .contents_entry(self.source, cited.commit.as_str(), &cited.path)
            .await?;
        Ok(before
            .and_then(|c| c.sha)
            .is_some_and(|sha| sha.eq_ignore_ascii_case(renamed)))
    }

    /// The first commit after the cited one that changed the cited lines (or
    /// removed the file), walking the file's history oldest first and
    /// following renames.
    async fn changing_commit(&mut self, cited: &Cited) -> Result<(Sha, bool), Stop> {
        let mut path = cited.path.clone();
        let mut lines = cited.lines;
        // The newest commit that touched the file at the cited commit: the
        // walk starts after it.
        let at_cited = self.history_at(cited.commit.as_str(), &path, 1).await?;
        let Some(mut since_commit) = at_cited.into_iter().next() else {
            return Err(Stop::Unchecked(format!(
                "{path} has no history at {}",
                short(&cited.commit)
            )));
        };
        for _ in 0..=MAX_RENAMES {
            let history = self
                .history_at(self.tip.as_str(), &path, HISTORY_PAGE)
                .await?;
            let Some(at) = history.iter().position(|sha| *sha == since_commit) else {
                return Err(Stop::Unchecked(if history.len() >= HISTORY_PAGE {
                    format!(
                        "more than {HISTORY_PAGE} commits changed {path} since {}; the one that changed the cited lines was not looked for",
                        short(&cited.commit)
                    )
                } else {
                    format!(
                        "the history of {path} at the tip does not reach {}",
                        short(&cited.commit)
                    )
                }));
            };
            let mut renamed = None;
            for commit in history[..at].iter().rev() {
                let files = self.commit_files(commit).await?;
                let Some(file) = files.iter().find(|f| {
                    f.filename == path || f.previous_filename.as_deref() == Some(path.as_str())
                }) else {
                    continue;
                };
                if file.status == "removed" {
                    return Ok((sha(commit)?, true));
                }
                match file.patch.as_deref().map(patch_hunks) {
                    Some(Some(hunks)) => match map_lines(lines, &hunks) {
                        Mapped::At(moved) => lines = moved,
                        Mapped::Changed => return Ok((sha(commit)?, false)),
                    },
                    None if file.status == "renamed" && file.changes == 0 => {}
                    _ => {
                        return Err(Stop::Unchecked(format!(
                            "GitHub gave no readable patch of {path} in {}",
                            &commit[..7.min(commit.len())]
                        )));
                    }
                }
                if file.status == "renamed" && file.filename != path {
                    renamed = Some((file.filename.clone(), commit.clone()));
                    break;
                }
            }
            match renamed {
                Some((to, commit)) => {
                    path = to;
                    since_commit = commit;
                }
                None => {
                    return Err(Stop::Unchecked(format!(
                        "its lines changed since {}, but no commit in the history of {path} was found that changed them",
                        short(&cited.commit)
                    )));
                }
            }
        }
        Err(Stop::Unchecked(format!(
            "{} was renamed more than {MAX_RENAMES} times since {}",
            cited.path,
            short(&cited.commit)
        )))
    }

    /// Newest first: up to `count` commits that touched `path` in the
    /// history of `at`.
    async fn history_at(
        &mut self,
        at: &str,
        path: &str,
        count: usize,
    ) -> Result<Vec<String>, Stop> {
        let key = format!("{at}\0{count}\0{path}");
        if let Some(known) = self.listings.get(&key) {
            return Ok(known.clone());
        }
        self.spend()?;
        let r = &self.source.repository;
        let url = format!(
            "/repos/{r}/commits?sha={at}&path={}&per_page={count}&page=1",
            encode_path(path)
        );
        let listed: Vec<Listed> = self.get(&url).await?;
        let shas: Vec<String> = listed
            .into_iter()
            .map(|c| c.sha.to_ascii_lowercase())
            .collect();
        self.listings.insert(key, shas.clone());
        Ok(shas)
    }

    /// The files one commit changed against its first parent, with patches.
    async fn commit_files(&mut self, commit: &str) -> Result<Vec<ApiFile>, Stop> {
        if let Some(files) = self.commits.get(commit) {
            return Ok(files.clone());
        }
        self.spend()?;
        let r = &self.source.repository;
        let answer: CommitFiles = self.get(&format!("/repos/{r}/commits/{commit}")).await?;
        self.commits.insert(commit.to_owned(), answer.files.clone());
        Ok(answer.files)
    }

    fn spend(&mut self) -> Result<(), Stop> {
        if self.history_calls >= MAX_HISTORY_CALLS {
            return Err(Stop::Unchecked(format!(
                "its lines changed, but naming the commit that changed them needs more than the {MAX_HISTORY_CALLS} GitHub calls one job spends; a later job continues"
            )));
        }
        self.history_calls += 1;
        Ok(())
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, Stop> {
        let r = &self.source.repository;
        self.forge
            .get_patiently(r, &Permissions::contents_read(), url)
            .await
            .map_err(|e| match e {
                GitHubError::Unavailable { message, .. } => Stop::Unavailable(message),
                other => Stop::Unchecked(format!("GitHub refused {url}: {other}")),
            })
    }
}

/// Why naming a changing commit stopped.
enum Stop {
    Unavailable(String),
    Unchecked(String),
}

fn unchecked_state(reason: String) -> Judged {
    Judged::Known(CitationState::Unchecked { reason })
}

fn unchecked(states: &mut BTreeMap<Cited, CitationState>, group: Vec<Cited>, reason: &str) {
    for citation in group {
        let reason = reason.to_owned();
        states.insert(citation, CitationState::Unchecked { reason });
    }
}

fn sha(commit: &str) -> Result<Sha, Stop> {
    Sha::parse(commit).map_err(|e| {
        Stop::Unchecked(format!(
            "GitHub named a commit {commit:?} that is not a sha: {e}"
        ))
    })
}

fn short(sha: &Sha) -> &str {
    &sha.as_str()[..7]
}
