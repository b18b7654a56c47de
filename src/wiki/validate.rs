//! Every argument rule of DESIGN §7 that can be checked without the wiki: refs,
//! commit messages, identities, trailers, batch sizes and page paths. These run
//! before any lock, network request or disk write, so bad input changes nothing.

use std::collections::BTreeSet;

use super::error::WikiError;
use super::paths::{check_page_path, collision_key};
use super::types::{CommitSpec, PagePatch, PageWrite};

/// Largest page, in bytes of UTF-8.
pub const MAX_PAGE_BYTES: usize = 64 * 1024;
/// Most pages per write or patch call.
pub const MAX_PAGES_PER_CALL: usize = 20;
/// Largest sum of page contents per call.
pub const MAX_BATCH_BYTES: usize = 256 * 1024;
/// Most replacements per patch call.
pub const MAX_REPLACEMENTS: usize = 40;
/// Largest sum of replacement `old` + `new` bytes per patch call.
pub const MAX_REPLACEMENT_INPUT_BYTES: usize = 256 * 1024;
/// Longest commit message line.
pub const MAX_MESSAGE_BYTES: usize = 512;
/// Longest search query.
pub const MAX_QUERY_BYTES: usize = 512;
/// Most pages a listing returns.
pub const MAX_LISTED_PAGES: usize = 2_000;
/// Most page bytes a search reads.
pub const MAX_SEARCH_SCAN_BYTES: u64 = 8 * 1024 * 1024;
/// Largest diff output.
pub const MAX_DIFF_BYTES: usize = 512 * 1024;
/// Largest version of a page a diff reads; a larger page is named, not diffed.
pub const MAX_DIFF_BLOB_BYTES: u64 = 256 * 1024;
/// Most page bytes one diff reads in all; pages past it are named, not diffed.
pub const MAX_DIFF_READ_BYTES: u64 = 8 * 1024 * 1024;
/// Most commits walked to find a page's last change.
pub const MAX_LAST_CHANGE_WALK: usize = 1_000;
/// Largest page a read returns (pages written elsewhere may exceed the write limit).
pub const MAX_READ_PAGE_BYTES: u64 = 256 * 1024;
/// `limit` range of history.
pub const HISTORY_LIMIT_RANGE: std::ops::RangeInclusive<u32> = 1..=100;
/// Most trailers on one commit.
pub const MAX_TRAILERS: usize = 16;

/// A parsed ref argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefSpec {
    Head,
    Commit(gix::ObjectId),
}

/// `HEAD` or a full 40-hex sha (either case).
pub fn parse_ref(argument: &str, name: &str) -> Result<RefSpec, WikiError> {
    if argument == "HEAD" {
        return Ok(RefSpec::Head);
    }
    parse_full_sha(argument, name).map(RefSpec::Commit)
}

/// A full 40-hex sha.
pub fn parse_full_sha(argument: &str, name: &str) -> Result<gix::ObjectId, WikiError> {
    if argument.len() == 40 && argument.bytes().all(|b| b.is_ascii_hexdigit()) {
        gix::ObjectId::from_hex(argument.to_ascii_lowercase().as_bytes()).map_err(|_| {
            WikiError::invalid_input(format!(
                "{name} must be HEAD or a full 40-character hex sha"
            ))
        })
    } else if name == "expected_base" || name.ends_with("expected_sha") {
        Err(WikiError::invalid_input(format!(
            "{name} must be a full 40-character hex sha, got {:?}",
            shorten(argument, 60)
        )))
    } else {
        Err(WikiError::invalid_input(format!(
            "{name} must be HEAD or a full 40-character hex sha, got {:?}",
            shorten(argument, 60)
        )))
    }
}

pub fn check_page_path_argument(path: &str) -> Result<(), WikiError> {
    check_page_path(path).map_err(|violation| {
        WikiError::invalid_input(format!(
            "the page path {:?} is not allowed: {violation}",
            shorten(path, 300)
        ))
    })
}

pub fn check_history_limit(limit: u32) -> Result<(), WikiError> {
    if HISTORY_LIMIT_RANGE.contains(&limit) {
        Ok(())
    } else {
        Err(WikiError::invalid_input(format!(
            "limit must be between 1 and 100, got {limit}"
        )))
    }
}

pub fn check_query(query: &str) -> Result<(), WikiError> {
    if query.is_empty() {
        return Err(WikiError::invalid_input("query must not be empty"));
    }
    if query.len() > MAX_QUERY_BYTES {
        return Err(WikiError::limit_exceeded(format!(
            "query is {} bytes and may be at most {MAX_QUERY_BYTES} bytes",
            query.len()
        )));
    }
    Ok(())
}

/// The destination precondition, message, identity and trailers of a write.
pub fn check_commit_spec(
    spec: &CommitSpec,
    destination_id: &str,
) -> Result<gix::ObjectId, WikiError> {
    if let Some(expected) = &spec.expected_destination
        && !expected.eq_ignore_ascii_case(destination_id)
    {
        return Err(WikiError::not_applied(
            super::error::ErrorKind::DestinationChanged,
            format!(
                "the wiki destination is now {destination_id:?}, not {expected:?}; read a fresh snapshot and re-check the destination before writing"
            ),
        ));
    }
    let base = parse_full_sha(&spec.expected_base, "expected_base")?;
    let message = &spec.message;
    if message.trim().is_empty() {
        return Err(WikiError::invalid_input("message must not be empty"));
    }
    if message.len() > MAX_MESSAGE_BYTES {
        return Err(WikiError::limit_exceeded(format!(
            "message is {} bytes and may be at most {MAX_MESSAGE_BYTES} bytes",
            message.len()
        )));
    }
    if message.contains(['\n', '\r']) {
        return Err(WikiError::invalid_input(
            "message must be a single line; the commit trailers are added automatically",
        ));
    }
    if message.chars().any(char::is_control) {
        return Err(WikiError::invalid_input(
            "message must not contain control characters",
        ));
    }
    for (what, value) in [
        ("name", &spec.identity.name),
        ("email", &spec.identity.email),
    ] {
        if value.trim().is_empty()
            || value.contains(['<', '>'])
            || value.chars().any(char::is_control)
        {
            return Err(WikiError::invalid_input(format!(
                "the committer {what} must be non-empty and contain no <, > or control characters"
            )));
        }
    }
    if spec.trailers.len() > MAX_TRAILERS {
        return Err(WikiError::limit_exceeded(format!(
            "at most {MAX_TRAILERS} trailers may be added to a commit"
        )));
    }
    for trailer in &spec.trailers {
        let key_ok = !trailer.key.is_empty()
            && trailer
                .key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !trailer.key.starts_with('-');
        let value_ok = !trailer.value.trim().is_empty()
            && trailer.value.len() <= MAX_MESSAGE_BYTES
            && !trailer.value.chars().any(char::is_control);
        if !key_ok || !value_ok {
            return Err(WikiError::invalid_input(format!(
                "the trailer {:?} must be a token of letters, digits and - with a one-line value of at most {MAX_MESSAGE_BYTES} bytes",
                shorten(&trailer.key, 60)
            )));
        }
    }
    Ok(base)
}

/// The commit message: the caller's line, a blank line, then the trailers.
pub fn commit_message(spec: &CommitSpec) -> String {
    let mut message = spec.message.trim_end().to_owned();
    message.push('\n');
    if !spec.trailers.is_empty() {
        message.push('\n');
        for trailer in &spec.trailers {
            message.push_str(&trailer.key);
            message.push_str(": ");
            message.push_str(&trailer.value);
            message.push('\n');
        }
    }
    message
}

fn check_page_count(count: usize) -> Result<(), WikiError> {
    if count == 0 {
        return Err(WikiError::invalid_input("give at least one page"));
    }
    if count > MAX_PAGES_PER_CALL {
        return Err(WikiError::limit_exceeded(format!(
            "{count} pages were given and at most {MAX_PAGES_PER_CALL} may be changed per call; split the change into several calls"
        )));
    }
    Ok(())
}

/// Paths of one batch: each valid, no duplicates or collisions among them.
fn check_batch_paths<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<(), WikiError> {
    let mut seen = BTreeSet::new();
    let mut all = Vec::new();
    for path in paths {
        check_page_path_argument(path)?;
        if !seen.insert(collision_key(path)) {
            return Err(WikiError::invalid_input(format!(
                "the page {path:?} appears twice in this call (paths compare case-insensitively after Unicode normalization)"
            )));
        }
        all.push(path);
    }
    super::paths::check_tree_paths(all)
        .map_err(|clash| WikiError::invalid_input(format!("the pages of this call clash: {clash}")))
}

/// Per-page sizes of resulting contents.
pub fn check_page_sizes<'a>(
    pages: impl IntoIterator<Item = (&'a str, usize)>,
) -> Result<(), WikiError> {
    for (path, size) in pages {
        if size > MAX_PAGE_BYTES {
            return Err(WikiError::limit_exceeded(format!(
                "the page {path:?} would be {size} bytes and a page may be at most {MAX_PAGE_BYTES} bytes (64 KiB); split it into several pages"
            )));
        }
    }
    Ok(())
}

/// Per-page and per-batch sizes of resulting contents.
pub fn check_result_sizes<'a>(
    pages: impl IntoIterator<Item = (&'a str, usize)>,
) -> Result<(), WikiError> {
    let pages: Vec<(&str, usize)> = pages.into_iter().collect();
    check_page_sizes(pages.iter().copied())?;
    let total: usize = pages.iter().map(|(_, size)| size).sum();
    if total > MAX_BATCH_BYTES {
        return Err(WikiError::limit_exceeded(format!(
            "the pages of this call total {total} bytes and a call may write at most {MAX_BATCH_BYTES} bytes (256 KiB); split it into several calls"
        )));
    }
    Ok(())
}

pub fn check_write_pages(pages: &[PageWrite]) -> Result<(), WikiError> {
    check_page_count(pages.len())?;
    check_batch_paths(pages.iter().map(|page| page.path.as_str()))?;
    check_result_sizes(
        pages
            .iter()
            .map(|page| (page.path.as_str(), page.content.len())),
    )
}

/// One commit's writes and patches: each list as its own tool checks it,
/// and 1–20 distinct pages in all (a page is written or patched, not both).
pub fn check_change(writes: &[PageWrite], patches: &[PagePatch]) -> Result<(), WikiError> {
    if !writes.is_empty() {
        check_write_pages(writes)?;
    }
    if !patches.is_empty() {
        check_patches(patches)?;
    }
    check_page_count(writes.len() + patches.len())?;
    check_batch_paths(
        writes
            .iter()
            .map(|page| page.path.as_str())
            .chain(patches.iter().map(|patch| patch.path.as_str())),
    )
}

pub fn check_patches(patches: &[PagePatch]) -> Result<(), WikiError> {
    check_page_count(patches.len())?;
    check_batch_paths(patches.iter().map(|patch| patch.path.as_str()))?;
    let mut replacements = 0usize;
    let mut input_bytes = 0usize;
    for patch in patches {
        parse_full_sha(
            &patch.expected_sha,
            &format!("patches[{:?}].expected_sha", patch.path),
        )?;
        if patch.replacements.is_empty() {
            return Err(WikiError::invalid_input(format!(
                "the patch for {:?} has no replacements",
                patch.path
            )));
        }
        replacements += patch.replacements.len();
        input_bytes += patch
            .replacements
            .iter()
            .map(|replacement| replacement.old.len() + replacement.new.len())
            .sum::<usize>();
    }
    if replacements > MAX_REPLACEMENTS {
        return Err(WikiError::limit_exceeded(format!(
            "{replacements} replacements were given and at most {MAX_REPLACEMENTS} are allowed per call"
        )));
    }
    if input_bytes > MAX_REPLACEMENT_INPUT_BYTES {
        return Err(WikiError::limit_exceeded(format!(
            "the replacements total {input_bytes} bytes and at most {MAX_REPLACEMENT_INPUT_BYTES} bytes (256 KiB) are allowed per call"
        )));
    }
    Ok(())
}

/// Cuts `text` to at most `max` bytes on a char boundary, for messages.
pub fn shorten(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wiki::error::ErrorKind;
    use crate::wiki::types::{Committer, Replacement, Trailer};

    fn spec(message: &str) -> CommitSpec {
        CommitSpec {
            expected_destination: Some("Octo/Wiki".into()),
            expected_base: "a".repeat(40),
            message: message.into(),
            identity: Committer {
                name: "teammem[bot]".into(),
                email: "1+teammem[bot]@users.noreply.github.com".into(),
            },
            trailers: vec![Trailer {
                key: "Teammem-Job".into(),
                value: "42".into(),
            }],
        }
    }

    #[test]
    fn refs_are_head_or_full_sha() {
        assert_eq!(parse_ref("HEAD", "ref").unwrap(), RefSpec::Head);
        assert!(matches!(
            parse_ref(&"A".repeat(40), "ref").unwrap(),
            RefSpec::Commit(_)
        ));
        for bad in [
            "head",
            "main",
            &"a".repeat(39),
            &"a".repeat(41),
            &"g".repeat(40),
            "HEAD~1",
        ] {
            assert_eq!(
                parse_ref(bad, "ref").unwrap_err().kind,
                ErrorKind::InvalidInput,
                "{bad}"
            );
        }
    }

    #[test]
    fn message_boundaries() {
        assert!(check_commit_spec(&spec(&"m".repeat(512)), "octo/wiki").is_ok());
        assert_eq!(
            check_commit_spec(&spec(&"m".repeat(513)), "octo/wiki")
                .unwrap_err()
                .kind,
            ErrorKind::LimitExceeded
        );
        for bad in ["", "  ", "two\nlines", "cr\r", "tab\tbad"] {
            assert_eq!(
                check_commit_spec(&spec(bad), "octo/wiki").unwrap_err().kind,
                ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
        assert_eq!(
            check_commit_spec(&spec("ok"), "octo/other")
                .unwrap_err()
                .kind,
            ErrorKind::DestinationChanged
        );
        assert_eq!(
            commit_message(&spec("Update pages")),
            "Update pages\n\nTeammem-Job: 42\n"
        );
    }

    fn page(path: &str, size: usize) -> PageWrite {
        PageWrite {
            path: path.into(),
            content: "x".repeat(size),
        }
    }

    #[test]
    fn write_batch_boundaries() {
        assert!(check_write_pages(&[page("a.md", MAX_PAGE_BYTES)]).is_ok());
        assert_eq!(
            check_write_pages(&[page("a.md", MAX_PAGE_BYTES + 1)])
                .unwrap_err()
                .kind,
            ErrorKind::LimitExceeded
        );
        let twenty: Vec<_> = (0..20).map(|i| page(&format!("p{i}.md"), 1)).collect();
        assert!(check_write_pages(&twenty).is_ok());
        let twenty_one: Vec<_> = (0..21).map(|i| page(&format!("p{i}.md"), 1)).collect();
        assert_eq!(
            check_write_pages(&twenty_one).unwrap_err().kind,
            ErrorKind::LimitExceeded
        );
        assert_eq!(
            check_write_pages(&[]).unwrap_err().kind,
            ErrorKind::InvalidInput
        );
        // Four full pages are exactly 256 KiB; one more byte is over.
        let four: Vec<_> = (0..4)
            .map(|i| page(&format!("p{i}.md"), MAX_PAGE_BYTES))
            .collect();
        assert!(check_write_pages(&four).is_ok());
        let mut over = four.clone();
        over.push(page("extra.md", 1));
        assert_eq!(
            check_write_pages(&over).unwrap_err().kind,
            ErrorKind::LimitExceeded
        );
        assert_eq!(
            check_write_pages(&[page("A.md", 1), page("a.md", 1)])
                .unwrap_err()
                .kind,
            ErrorKind::InvalidInput
        );
        assert_eq!(
            check_write_pages(&[page("a.md", 1), page("a.md/b.md", 1)])
                .unwrap_err()
                .kind,
            ErrorKind::InvalidInput
        );
    }

    fn patch(path: &str, replacements: Vec<(String, String)>) -> PagePatch {
        PagePatch {
            path: path.into(),
            expected_sha: "b".repeat(40),
            replacements: replacements
                .into_iter()
                .map(|(old, new)| Replacement { old, new })
                .collect(),
        }
    }

    #[test]
    fn patch_batch_boundaries() {
        let forty: Vec<_> = (0..40).map(|i| (format!("o{i}"), "n".into())).collect();
        assert!(check_patches(&[patch("a.md", forty.clone())]).is_ok());
        let mut forty_one = forty;
        forty_one.push(("x".into(), "y".into()));
        assert_eq!(
            check_patches(&[patch("a.md", forty_one)]).unwrap_err().kind,
            ErrorKind::LimitExceeded
        );
        let exact = vec![("o".repeat(128 * 1024), "n".repeat(128 * 1024))];
        assert!(check_patches(&[patch("a.md", exact)]).is_ok());
        let over = vec![("o".repeat(128 * 1024), "n".repeat(128 * 1024 + 1))];
        assert_eq!(
            check_patches(&[patch("a.md", over)]).unwrap_err().kind,
            ErrorKind::LimitExceeded
        );
        let mut bad_sha = patch("a.md", vec![("a".into(), "b".into())]);
        bad_sha.expected_sha = "abc".into();
        assert_eq!(
            check_patches(&[bad_sha]).unwrap_err().kind,
            ErrorKind::InvalidInput
        );
        assert_eq!(
            check_patches(&[patch("a.md", vec![])]).unwrap_err().kind,
            ErrorKind::InvalidInput
        );
    }
}
