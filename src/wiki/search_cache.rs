//! The cache of search indexes: one per root tree, the last
//! [`SEARCH_CACHE_SIZE`] trees searched kept, each built from the tree's
//! pages in path order (`each_page`).
//!
//! Invariants: an index is built once however many callers ask for it at
//! once (the first builds, the others wait for it, and a build that fails
//! or panics clears its mark so a waiter builds); at most
//! [`MAX_CONCURRENT_BUILDS`](super::build_permits::MAX_CONCURRENT_BUILDS)
//! builds (search or context) run in one process; a caller waits for a
//! build or a permit only until its call's deadline; a page over
//! `MAX_READ_PAGE_BYTES` (256 KiB) is never read, and at most
//! `MAX_SEARCH_SCAN_BYTES` of pages are.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use gix::ObjectId;

use super::build_permits::BUILD_PERMITS;
use super::error::WikiError;
use super::page_facts::PageFactsMemo;
use super::search::{SEARCH_CACHE_SIZE, SearchIndex};
use super::tree::{IndexCache, commit_tree, read_blob};
use super::validate::{MAX_READ_PAGE_BYTES, MAX_SEARCH_SCAN_BYTES};

#[derive(Default)]
struct Entries {
    /// Built indexes by root tree, most recently used first.
    built: Vec<(ObjectId, Arc<SearchIndex>)>,
    /// Trees one caller is building an index of now; others wait for it.
    building: Vec<ObjectId>,
}

/// The indexes of the last few trees searched.
#[derive(Default)]
pub struct SearchCache {
    entries: Mutex<Entries>,
    /// Signalled whenever a build ends, built or not.
    build_ended: Condvar,
    /// Search indexes this cache has started building.
    builds: AtomicU64,
    /// What each page blob says, for the scans that need only that.
    page_facts: PageFactsMemo,
}

/// Clears a tree's "building" mark however its build ends (an error or a
/// panic included), so its waiters never wait for a build nobody runs.
struct Building<'a> {
    cache: &'a SearchCache,
    tree: ObjectId,
}

impl Drop for Building<'_> {
    fn drop(&mut self) {
        self.cache.lock().building.retain(|tree| *tree != self.tree);
        self.cache.build_ended.notify_all();
    }
}

impl SearchCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The index of `commit`'s tree, built on first use by one caller while
    /// the others asking for the same tree wait for it. Waiting (for that
    /// build or for a build permit) ends at `deadline` with a timeout.
    pub fn get_or_build(
        &self,
        repo: &gix::Repository,
        trees: &IndexCache,
        commit: ObjectId,
        deadline: Instant,
    ) -> Result<Arc<SearchIndex>, WikiError> {
        let tree = commit_tree(repo, commit)?;
        let mut entries = self.lock();
        loop {
            if let Some(at) = entries.built.iter().position(|(id, _)| *id == tree) {
                let entry = entries.built.remove(at);
                let index = entry.1.clone();
                entries.built.insert(0, entry);
                return Ok(index);
            }
            if !entries.building.contains(&tree) {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(super::timed_out());
            }
            entries = self
                .build_ended
                .wait_timeout(entries, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        entries.building.push(tree);
        drop(entries);
        let _building = Building { cache: self, tree };
        let _permit = BUILD_PERMITS.acquire(deadline)?;
        self.builds.fetch_add(1, Ordering::Relaxed);
        let built = Arc::new(build(repo, trees, tree)?);
        let mut entries = self.lock();
        entries.built.insert(0, (tree, built.clone()));
        entries.built.truncate(SEARCH_CACHE_SIZE);
        Ok(built)
    }

    /// Search indexes this cache has started building (a cache hit, or a
    /// wait for another caller's build, starts none).
    pub fn builds(&self) -> u64 {
        self.builds.load(Ordering::Relaxed)
    }

    /// The stale-fact count of `commit` and whether the scan left pages out:
    /// the cached index's when there is one, else counted over the same
    /// pages an index would read, without building (or caching) one.
    pub fn stale_facts(
        &self,
        repo: &gix::Repository,
        trees: &IndexCache,
        commit: ObjectId,
    ) -> Result<(usize, bool), WikiError> {
        let tree = commit_tree(repo, commit)?;
        {
            let entries = self.lock();
            if let Some((_, index)) = entries.built.iter().find(|(id, _)| *id == tree) {
                return Ok((index.stale_facts, index.truncated()));
            }
        }
        // The pages the index would read (path order, none over
        // `MAX_READ_PAGE_BYTES`, until the scan would pass its budget), from
        // each blob's remembered facts: only the pages that changed since
        // the last count are read.
        let index = trees.get_or_build(repo, tree)?;
        let (mut stale, mut scanned_bytes, mut skipped) = (0usize, 0u64, false);
        for page in index.pages.values() {
            let (found, _) = self.page_facts.facts(repo, page.blob)?;
            if found.size > MAX_READ_PAGE_BYTES {
                skipped = true;
                continue;
            }
            if scanned_bytes + found.size > MAX_SEARCH_SCAN_BYTES {
                return Ok((stale, true));
            }
            scanned_bytes += found.size;
            stale += found.stale as usize;
        }
        Ok((stale, skipped))
    }

    /// A cache whose page facts are shared with this node's other
    /// processes through `file`.
    pub fn with_page_facts_file(file: std::path::PathBuf) -> Self {
        SearchCache {
            page_facts: PageFactsMemo::persisted(file),
            ..SearchCache::default()
        }
    }

    /// What each page blob of this wiki says, remembered across commits.
    pub fn page_facts(&self) -> &PageFactsMemo {
        &self.page_facts
    }
}

/// Calls `visit(path, blob, text)` for the pages of `tree` in path order,
/// skipping any over [`MAX_READ_PAGE_BYTES`], until [`MAX_SEARCH_SCAN_BYTES`]
/// would be passed; returns the bytes read and whether any page was left out.
fn each_page(
    repo: &gix::Repository,
    trees: &IndexCache,
    tree: ObjectId,
    mut visit: impl FnMut(&str, ObjectId, String),
) -> Result<(u64, bool), WikiError> {
    let index = trees.get_or_build(repo, tree)?;
    let (mut scanned_bytes, mut skipped) = (0u64, false);
    for (path, page) in &index.pages {
        let size = repo
            .find_header(page.blob)
            .map_err(|err| WikiError::internal("reading a page header", err))?
            .size();
        if size > MAX_READ_PAGE_BYTES {
            // Not read at all: each hit re-reads its page's lines, so one
            // huge page would make every search of it slow.
            skipped = true;
            continue;
        }
        if scanned_bytes + size > MAX_SEARCH_SCAN_BYTES {
            return Ok((scanned_bytes, true));
        }
        scanned_bytes += size;
        let text = String::from_utf8_lossy(&read_blob(repo, page.blob)?).into_owned();
        visit(path, page.blob, text);
    }
    Ok((scanned_bytes, skipped))
}

fn build(
    repo: &gix::Repository,
    trees: &IndexCache,
    tree: ObjectId,
) -> Result<SearchIndex, WikiError> {
    let mut pages = Vec::new();
    let (scanned_bytes, truncated) = each_page(repo, trees, tree, |path, blob, text| {
        pages.push((path.to_owned(), blob.to_string(), text));
    })?;
    Ok(SearchIndex::build(pages, scanned_bytes, truncated))
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Duration;

    use crate::wiki::context::ContextIndex;

    /// A bare repository for the cache's tests.
    fn bare_repo(dir: &std::path::Path) -> gix::ThreadSafeRepository {
        gix::ThreadSafeRepository::init_opts(
            dir,
            gix::create::Kind::Bare,
            gix::create::Options::default(),
            gix::open::Options::isolated(),
        )
        .unwrap()
    }

    /// A commit (no parents, its own message) whose tree holds `pages`.
    fn commit(repo: &gix::Repository, pages: &[(String, String)], message: &str) -> ObjectId {
        let mut editor = repo.edit_tree(repo.empty_tree().id).unwrap();
        for (path, text) in pages {
            let blob = repo.write_blob(text.as_bytes()).unwrap().detach();
            editor
                .upsert(path.as_str(), gix::objs::tree::EntryKind::Blob, blob)
                .unwrap();
        }
        let tree = editor.write().unwrap().detach();
        let signature = gix::actor::Signature {
            name: "Ann".into(),
            email: "ann@example.com".into(),
            time: gix::date::Time::now_utc(),
        };
        repo.write_object(&gix::objs::Commit {
            tree,
            parents: Default::default(),
            author: signature.clone(),
            committer: signature,
            encoding: None,
            message: message.into(),
            extra_headers: Vec::new(),
        })
        .unwrap()
        .detach()
    }

    /// Pages enough that building their index takes a while.
    fn many_pages(extra: &str) -> Vec<(String, String)> {
        let mut pages: Vec<(String, String)> = (0..150)
            .map(|i| {
                let body: String = (0..60)
                    .map(|l| format!("Line {l} of page {i} about invoices and retries.\n"))
                    .collect();
                (format!("Page{i:03}.md"), format!("# Page {i}\n\n{body}"))
            })
            .collect();
        pages.push(("Small.md".to_owned(), format!("# Small\n\n{extra}\n")));
        pages
    }

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(600)
    }

    #[test]
    fn commits_sharing_a_tree_share_one_index_and_keep_their_own_ref() {
        let dir = tempfile::tempdir().unwrap();
        let repo = bare_repo(dir.path()).to_thread_local();
        let pages = many_pages("the one small page");
        let commits: Vec<ObjectId> = (0..6)
            .map(|n| commit(&repo, &pages, &format!("commit {n}")))
            .collect();
        let (cache, trees) = (SearchCache::default(), IndexCache::default());
        for _ in 0..2 {
            for &id in &commits {
                let index = cache.get_or_build(&repo, &trees, id, later()).unwrap();
                let result = index.search(id, "small page");
                assert_eq!(result.commit, id.to_string());
                assert_eq!(result.hits[0].path, "Small.md");
            }
        }
        assert_eq!(cache.builds(), 1, "six commits, one tree, one build");
        // A commit whose tree differs (in one small page) has its own index.
        let changed = commit(&repo, &many_pages("the changed small page"), "changed");
        let index = cache.get_or_build(&repo, &trees, changed, later()).unwrap();
        assert_eq!(index.search(changed, "changed").hits[0].path, "Small.md");
        assert_eq!(cache.builds(), 2);
    }

    #[test]
    fn concurrent_searches_of_an_uncached_tree_build_once() {
        let dir = tempfile::tempdir().unwrap();
        let shared = bare_repo(dir.path());
        let id = commit(&shared.to_thread_local(), &many_pages("x"), "one");
        let (cache, trees) = (SearchCache::default(), IndexCache::default());
        let callers = 8;
        let start = std::sync::Barrier::new(callers);
        let indexes: Vec<Arc<SearchIndex>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..callers)
                .map(|_| {
                    scope.spawn(|| {
                        let repo = shared.to_thread_local();
                        start.wait();
                        cache.get_or_build(&repo, &trees, id, later()).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(cache.builds(), 1, "{callers} callers, one build");
        assert!(indexes.iter().all(|i| Arc::ptr_eq(i, &indexes[0])));
        // The context index of that tree is built once too, and shared.
        let contexts: Vec<Arc<ContextIndex>> = std::thread::scope(|scope| {
            let handles: Vec<_> = indexes
                .iter()
                .map(|index| scope.spawn(|| index.context(later()).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(contexts.iter().all(|c| Arc::ptr_eq(c, &contexts[0])));
    }

    #[test]
    fn a_caller_waits_for_a_build_only_until_its_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let repo = bare_repo(dir.path()).to_thread_local();
        let id = commit(&repo, &many_pages("x"), "one");
        let (cache, trees) = (SearchCache::default(), IndexCache::default());
        // Another caller is building this tree's index.
        let tree = commit_tree(&repo, id).unwrap();
        cache.lock().building.push(tree);
        let error = match cache.get_or_build(&repo, &trees, id, Instant::now()) {
            Err(error) => error,
            Ok(_) => panic!("built while another caller was building"),
        };
        assert_eq!(error.kind, super::super::ErrorKind::Timeout);
        assert_eq!(cache.builds(), 0);
        // Its build ended without an index: the next caller builds.
        drop(Building {
            cache: &cache,
            tree,
        });
        cache.get_or_build(&repo, &trees, id, later()).unwrap();
        assert_eq!(cache.builds(), 1);
    }

    #[test]
    fn a_page_over_256_kib_is_skipped_and_the_scan_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let repo = bare_repo(dir.path()).to_thread_local();
        let stale = format!(
            "A fact <!-- teammem:evidence a.rs@{}#L1-L2 stale={} -->\n",
            "a".repeat(40),
            "b".repeat(40)
        );
        let big: String = std::iter::once(format!("# Big\n\nzebra {stale}"))
            .chain((0..).map(|i| format!("filler line {i}\n")))
            .scan(0usize, |len, line| {
                *len += line.len();
                (*len <= MAX_READ_PAGE_BYTES as usize + 1024).then_some(line)
            })
            .collect();
        assert!(big.len() as u64 > MAX_READ_PAGE_BYTES);
        let pages = vec![
            ("A.md".to_owned(), "# A\n\nAardvark.\n".to_owned()),
            ("Big.md".to_owned(), big),
            ("Z.md".to_owned(), format!("# Z\n\nzebra {stale}")),
        ];
        let id = commit(&repo, &pages, "big");
        let (cache, trees) = (SearchCache::default(), IndexCache::default());
        // Counted alone (no index yet) and with the index: the same pages.
        assert_eq!(cache.stale_facts(&repo, &trees, id).unwrap(), (1, true));
        let index = cache.get_or_build(&repo, &trees, id, later()).unwrap();
        let result = index.search(id, "zebra");
        let paths: Vec<&str> = result.hits.iter().map(|h| h.path.as_str()).collect();
        assert_eq!(paths, ["Z.md"]);
        assert!(result.truncated);
        assert_eq!(
            result.scanned_bytes,
            (pages[0].1.len() + pages[2].1.len()) as u64
        );
        assert_eq!(index.stale_facts, 1);
        assert!(!index.context(later()).unwrap().pages.contains("Big.md"));
    }
}
