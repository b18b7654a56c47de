//! The audience rule of DESIGN §9, one function for every path that may lead
//! to a wiki write: dispatch and request verification, the sweep, the runner
//! right before it mints the wiki token, and `check-config --github`.
//!
//! Invariant: memory never crosses an audience boundary. A source's own wiki
//! always passes (it has the source's audience); across repositories only a
//! public source into a public wiki passes. Anything GitHub could not tell us
//! is "ask again later", never a pass.

use super::GitHubForge;
use super::verify::RepoFacts;
use crate::config::Source;
use crate::forge::Refusal;

/// The refusal code every path reports for a mapping across audiences.
pub const AUDIENCE_MISMATCH: &str = "audience_mismatch";

/// The verdict on a mapping from the two repositories' visibilities
/// (`public`, `private`, `internal`), without asking GitHub.
pub fn audience_verdict(
    source: &str,
    source_visibility: &str,
    wiki: &str,
    wiki_visibility: &str,
) -> Result<(), Refusal> {
    if source.eq_ignore_ascii_case(wiki) {
        return Ok(());
    }
    let (s, w) = (source_visibility, wiki_visibility);
    let what_to_do = match (s == "public", w == "public") {
        (true, true) => return Ok(()),
        (false, true) => format!(
            "a {s} source never writes to a public wiki; make {wiki} private and point wiki_repository at {source} itself, or remove wiki_repository so the memory goes to {source}'s own wiki"
        ),
        (true, false) => format!(
            "a public source never reads or writes a {w} wiki; make {wiki} public, or remove wiki_repository so the memory goes to {source}'s own wiki"
        ),
        (false, false) => format!(
            "memory of a {s} repository stays in that repository: remove wiki_repository so it goes to {source}'s own wiki"
        ),
    };
    Err(Refusal::rejected(
        AUDIENCE_MISMATCH,
        format!("{source} is {s} and its wiki repository {wiki} is {w}: {what_to_do}"),
    ))
}

impl GitHubForge {
    /// The audience rule for `source`, asking GitHub for both repositories'
    /// visibility now (under the verification deadline).
    pub async fn check_audience(&self, source: &Source) -> Result<(), Refusal> {
        if source
            .wiki_repository
            .eq_ignore_ascii_case(&source.repository)
        {
            return Ok(());
        }
        self.within_deadline(async {
            let facts = self.repo_facts(&source.repository).await?;
            self.check_audience_with(source, &facts).await
        })
        .await
    }

    /// Like [`GitHubForge::check_audience`] when the source's facts are
    /// already known (verification asked for them in step 1).
    pub(super) async fn check_audience_with(
        &self,
        source: &Source,
        facts: &RepoFacts,
    ) -> Result<(), Refusal> {
        if source
            .wiki_repository
            .eq_ignore_ascii_case(&source.repository)
        {
            return Ok(());
        }
        let wiki = self.repo_facts(&source.wiki_repository).await?;
        audience_verdict(
            &source.repository,
            &facts.visibility,
            &source.wiki_repository,
            &wiki.visibility,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_to_public_crosses_repositories() {
        assert!(audience_verdict("o/a", "private", "O/A", "private").is_ok());
        assert!(audience_verdict("o/a", "public", "o/w", "public").is_ok());
        for (s, w) in [
            ("private", "public"),
            ("internal", "public"),
            ("public", "private"),
            ("public", "internal"),
            ("private", "private"),
        ] {
            let Err(Refusal::Rejected { code, message }) = audience_verdict("o/a", s, "o/w", w)
            else {
                panic!("{s} → {w} passed");
            };
            assert_eq!(code, AUDIENCE_MISMATCH);
            assert!(
                message.contains("o/a is") && message.contains("o/w is"),
                "{message}"
            );
            assert!(
                message.contains("wiki_repository"),
                "says what to do: {message}"
            );
        }
    }
}
