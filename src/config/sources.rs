//! `[[sources]]`: each source's reader, and the mapping rule between sources.
//!
//! Invariants: a local source's wiki is never a source repository (its own or
//! another's), so memory commits never land among the code; one dispatch
//! secret shared by several sources is warned of, compared by hash and never
//! quoted.

use std::path::{Path, PathBuf};

use super::rules::{check_repository, is_env_name};
use super::section::Section;
use super::{Config, DEFAULT_PROTECTED_PAGES, Forge, Source};
use crate::ids::RepoName;

/// Mappings the file alone shows to be wrong: a local source whose wiki is a
/// source repository (its own or another source's), where memory commits
/// would land among the code.
pub(super) fn check_mappings(sources: &[(usize, Source)], errors: &mut Vec<String>) {
    let same = |a: &Path, b: &Path| a.components().eq(b.components());
    for (i, s) in sources {
        let Forge::Local { wiki, .. } = &s.forge else {
            continue;
        };
        for (j, other) in sources {
            let Forge::Local { repo, .. } = &other.forge else {
                continue;
            };
            if !same(wiki, repo) {
                continue;
            }
            errors.push(if i == j {
                format!(
                    "sources[{i}].local_wiki_path: is the source repository itself (local_path); give the wiki a repository of its own"
                )
            } else {
                format!(
                    "sources[{i}].local_wiki_path: is the source repository of sources[{j}] ({}); give {} a wiki repository of its own",
                    other.repository, s.repository
                )
            });
        }
    }
}

pub(super) fn read_source(
    i: usize,
    t: &toml::Table,
    have_github: bool,
    errors: &mut Vec<String>,
) -> Option<Source> {
    let before = errors.len();
    let mut s = Section::new(format!("sources[{i}]"), t);
    let repository = s.required_string("repository", errors);
    if let Some(r) = &repository {
        check_repository(&s.key("repository"), r, errors);
    }
    let wiki_repository = s.string("wiki_repository", errors);
    if let Some(r) = &wiki_repository {
        check_repository(&s.key("wiki_repository"), r, errors);
    }
    let dispatch_workflow = s
        .string("dispatch_workflow", errors)
        .unwrap_or_else(|| ".github/workflows/team-memory-post-merge.yml".into());
    let request_workflow = s
        .string("request_workflow", errors)
        .unwrap_or_else(|| ".github/workflows/team-memory-request.yml".into());
    for (key, wf) in [
        ("dispatch_workflow", &dispatch_workflow),
        ("request_workflow", &request_workflow),
    ] {
        if !wf.starts_with(".github/workflows/") || !(wf.ends_with(".yml") || wf.ends_with(".yaml"))
        {
            errors.push(format!(
                "{}: expected a path like .github/workflows/NAME.yml, got {wf:?}",
                s.key(key)
            ));
        }
    }
    let webhook_secret_env = s.required_string("webhook_secret_env", errors);
    if let Some(name) = &webhook_secret_env
        && !is_env_name(name)
    {
        errors.push(format!(
            "{}: expected the NAME of an environment variable (A-Z, 0-9, _), got {name:?}; the secret itself never goes in the config",
            s.key("webhook_secret_env")
        ));
    }
    let oidc_audience = s.string("oidc_audience", errors);
    if oidc_audience.as_deref() == Some("") {
        errors.push(format!("{}: must not be empty", s.key("oidc_audience")));
    }
    let policy_path = s.string("policy_path", errors);
    if let Some(p) = &policy_path
        && (p.is_empty() || p.starts_with('/') || p.split('/').any(|seg| seg == ".."))
    {
        errors.push(format!(
            "{}: expected a path inside the repository like .github/team-memory.md, got {p:?}",
            s.key("policy_path")
        ));
    }
    let sweep = s.bool("sweep", false, errors);
    let protected_pages = match s.get("protected_pages") {
        None => DEFAULT_PROTECTED_PAGES.map(str::to_owned).to_vec(),
        Some(_) => s.strings("protected_pages", errors),
    };
    for (n, page) in protected_pages.iter().enumerate() {
        if let Err(why) = crate::wiki::paths::check_page_path(page) {
            errors.push(format!(
                "{}[{n}]: {page:?} is not a wiki page path: {why}; name pages like \"Home.md\" or \"Areas/Team.md\"",
                s.key("protected_pages")
            ));
        }
    }
    let local_path = s.string("local_path", errors);
    let local_wiki_path = s.string("local_wiki_path", errors);
    let forge = match (local_path, local_wiki_path) {
        (None, None) => {
            if !have_github {
                errors.push(format!(
                    "{}: a GitHub source needs a [github] section (or give local_path and local_wiki_path for a local source)",
                    s.key("repository")
                ));
            }
            Some(Forge::GitHub)
        }
        (Some(repo), Some(wiki)) => {
            for (key, p) in [("local_path", &repo), ("local_wiki_path", &wiki)] {
                if !Path::new(p).is_absolute() {
                    errors.push(format!(
                        "{}: expected an absolute path, got {p:?}",
                        s.key(key)
                    ));
                }
            }
            if wiki_repository.is_some() {
                errors.push(format!(
                    "{}: not used by a local source (its wiki is local_wiki_path)",
                    s.key("wiki_repository")
                ));
            }
            if oidc_audience.is_some() {
                errors.push(format!(
                    "{}: local sources have no Actions runs to vouch for them; remove it",
                    s.key("oidc_audience")
                ));
            }
            Some(Forge::Local {
                repo: PathBuf::from(repo),
                wiki: PathBuf::from(wiki),
            })
        }
        (Some(_), None) => {
            errors.push(format!(
                "{}: required with local_path",
                s.key("local_wiki_path")
            ));
            None
        }
        (None, Some(_)) => {
            errors.push(format!(
                "{}: required with local_wiki_path",
                s.key("local_path")
            ));
            None
        }
    };
    s.finish(errors);
    if errors.len() > before {
        return None;
    }
    // Both names passed `check_repository` above (no error was added).
    let repository = RepoName::parse(&repository?).ok()?;
    let wiki_repository = match wiki_repository {
        Some(name) => RepoName::parse(&name).ok()?,
        None => repository.clone(),
    };
    Some(Source {
        wiki_repository,
        repository,
        dispatch_workflow,
        request_workflow,
        webhook_secret_env: webhook_secret_env?,
        oidc_audience,
        policy_path,
        sweep,
        forge: forge?,
        protected_pages,
    })
}

impl Config {
    /// One warning per dispatch secret that several sources share (the same
    /// variable, or different variables holding one value): whoever holds
    /// it for one repository can send dispatches for the others. Values are
    /// compared by their SHA-256, read from the environment, and never
    /// quoted; unset variables are left to [`Config::check_environment`].
    pub fn shared_dispatch_secrets(&self) -> Vec<String> {
        let mut by_value: std::collections::BTreeMap<[u8; 32], Vec<String>> =
            std::collections::BTreeMap::new();
        for (i, source) in self.sources.iter().enumerate() {
            if let Some(secret) =
                crate::secrets::env_secret(&source.webhook_secret_env).filter(|v| !v.is_empty())
            {
                by_value
                    .entry(secret.fingerprint())
                    .or_default()
                    .push(format!(
                        "sources[{i}] ({}, {})",
                        source.repository, source.webhook_secret_env
                    ));
            }
        }
        by_value
            .into_values()
            .filter(|sharing| sharing.len() > 1)
            .map(|sharing| {
                format!(
                    "{} use one dispatch secret: whoever holds it for one repository can send dispatches for the others; give each source its own (`openssl rand -hex 32`)",
                    sharing.join(", ")
                )
            })
            .collect()
    }
}
