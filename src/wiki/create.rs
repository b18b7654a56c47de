//! Creating a new local wiki: a bare repository whose default branch holds a
//! first commit with the given pages. GitHub wikis come into being through the
//! web interface; this is for local-forge wikis (`local_wiki_path`), which the
//! demo builds with nothing but the binary.
//!
//! Invariants: the destination must not exist yet or be an empty directory
//! (an existing repository is never touched); `HEAD` names the branch
//! explicitly, so no user or system git configuration changes the result.

use std::path::Path;

use gix::objs::tree::EntryKind;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};

use super::error::{ErrorKind, WikiError};
use super::types::{Committer, PageWrite};
use super::validate::check_write_pages;

/// Creates a bare wiki repository at `path` whose `branch` has one commit
/// holding `pages` (1–20 `.md` pages, the same rules as a write). Returns the
/// commit id.
pub fn create_local_wiki(
    path: &Path,
    branch: &str,
    pages: &[PageWrite],
    message: &str,
    author: &Committer,
) -> Result<String, WikiError> {
    check_write_pages(pages)?;
    let branch_ref = format!("refs/heads/{branch}");
    let branch_name: gix::refs::FullName = branch_ref
        .as_str()
        .try_into()
        .map_err(|_| WikiError::invalid_input(format!("{branch:?} is not a valid branch name")))?;
    if path.exists()
        && std::fs::read_dir(path)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(WikiError::not_applied(
            ErrorKind::ConfigurationError,
            format!(
                "{} already exists and is not empty; choose a new path for the wiki",
                path.display()
            ),
        ));
    }
    let internal = |what: &'static str| move |err: gix::Error| WikiError::internal(what, err);
    let repo = gix::ThreadSafeRepository::init_opts(
        path,
        gix::create::Kind::Bare,
        gix::create::Options::default(),
        gix::open::Options::isolated(),
    )
    .map_err(internal("creating the wiki repository"))?
    .to_thread_local();

    let mut editor = repo
        .edit_tree(repo.empty_tree().id)
        .map_err(internal("editing the first wiki tree"))?;
    for page in pages {
        let blob = repo
            .write_blob(page.content.as_bytes())
            .map_err(internal("writing a wiki page"))?;
        editor
            .upsert(page.path.as_str(), EntryKind::Blob, blob.detach())
            .map_err(internal("adding a wiki page"))?;
    }
    let tree = editor
        .write()
        .map_err(internal("writing the first wiki tree"))?
        .detach();
    let signature = gix::actor::Signature {
        name: author.name.as_str().into(),
        email: author.email.as_str().into(),
        time: gix::date::Time::now_utc(),
    };
    let commit = gix::objs::Commit {
        tree,
        parents: Default::default(),
        author: signature.clone(),
        committer: signature.clone(),
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    let commit_id = repo
        .write_object(&commit)
        .map_err(internal("writing the first wiki commit"))?
        .detach();
    let log = |message: &str| LogChange {
        mode: RefLog::AndReference,
        force_create_reflog: false,
        message: message.into(),
    };
    repo.edit_references_as(
        [
            RefEdit {
                change: Change::Update {
                    log: log("teammem: create wiki"),
                    expected: PreviousValue::MustNotExist,
                    new: gix::refs::Target::Object(commit_id),
                },
                name: branch_name.clone(),
                deref: false,
            },
            RefEdit {
                change: Change::Update {
                    log: log("teammem: default branch"),
                    expected: PreviousValue::Any,
                    new: gix::refs::Target::Symbolic(branch_name),
                },
                name: "HEAD".try_into().expect("HEAD is a valid ref name"),
                deref: false,
            },
        ],
        Some(signature.to_ref(&mut gix::date::parse::TimeBuf::default())),
    )
    .map_err(internal("setting the wiki's branch"))?;
    Ok(commit_id.to_string())
}
