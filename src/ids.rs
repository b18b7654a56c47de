//! Validated identifiers, checked once where they enter and carried typed
//! from there: a full commit id ([`Sha`]), a pull request number
//! ([`PullNumber`]), a repository name ([`RepoName`]) and what one job
//! reconciles ([`Scope`]), from the dispatch to the commit trailer.
//!
//! Invariants: a value of these types always holds what its name says — a
//! `Sha` is 40 lowercase hex digits, a `PullNumber` is in `1..=i32::MAX`
//! (GitHub's numbers are 32-bit), a `RepoName` is `owner/name` in the
//! alphabet of [`is_repository_name`]; deserializing one checks it the same way, so a bundle or a row
//! that says otherwise is refused, never carried on. This module imports
//! nothing of the crate.

use std::fmt;

use serde::{Deserialize, Serialize};

/// `true` for 40 hex digits, either case.
pub fn is_full_sha(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A full 40-hex commit id, lowercase.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Sha(String);

impl Sha {
    /// A commit id standing for `name` in a test: its bytes in hex, padded
    /// with zeros ([`Sha::fake_name`] reads it back).
    #[cfg(test)]
    pub fn fake(name: &str) -> Sha {
        let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
        assert!(hex.len() <= 38, "a fake commit name of at most 19 bytes");
        Sha(format!("{hex:0<40}"))
    }

    /// The name [`Sha::fake`] made this id from.
    #[cfg(test)]
    pub fn fake_name(&self) -> String {
        let bytes: Vec<u8> = self
            .0
            .as_bytes()
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .take_while(|b| *b != 0)
            .collect();
        String::from_utf8(bytes).unwrap()
    }

    /// `text` as a commit id (either case in, lowercase kept); the error says
    /// what a commit id must be.
    pub fn parse(text: &str) -> Result<Sha, String> {
        if is_full_sha(text) {
            Ok(Sha(text.to_ascii_lowercase()))
        } else {
            Err(format!(
                "{:?} is not a full commit id; use all 40 hex digits",
                bounded(text)
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A number fixed by this commit and `salt` and unrelated across commits
    /// (FNV-1a of both): for picking which of many items a job at this
    /// commit handles when it cannot handle all, so that jobs at other
    /// commits pick others.
    pub fn spread(&self, salt: &str) -> u64 {
        self.0
            .bytes()
            .chain(salt.bytes())
            .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            })
    }
}

impl TryFrom<String> for Sha {
    type Error = String;
    fn try_from(text: String) -> Result<Sha, String> {
        Sha::parse(&text)
    }
}

impl From<Sha> for String {
    fn from(sha: Sha) -> String {
        sha.0
    }
}

impl std::ops::Deref for Sha {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Sha {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Sha {
    fn eq(&self, other: &str) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl PartialEq<&str> for Sha {
    fn eq(&self, other: &&str) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl PartialEq<String> for Sha {
    fn eq(&self, other: &String) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl PartialEq<Sha> for String {
    fn eq(&self, other: &Sha) -> bool {
        other == self
    }
}

impl fmt::Display for Sha {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Sha {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// A pull request number, `1..=i32::MAX`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct PullNumber(u32);

impl PullNumber {
    /// The largest number accepted (GitHub's numbers are 32-bit signed).
    pub const MAX: u64 = i32::MAX as u64;

    pub fn new(number: u64) -> Result<PullNumber, String> {
        if (1..=Self::MAX).contains(&number) {
            Ok(PullNumber(number as u32))
        } else {
            Err(format!(
                "{number} is not a pull request number; use 1 to {}",
                Self::MAX
            ))
        }
    }

    pub fn get(self) -> u64 {
        u64::from(self.0)
    }
}

impl TryFrom<u64> for PullNumber {
    type Error = String;
    fn try_from(number: u64) -> Result<PullNumber, String> {
        PullNumber::new(number)
    }
}

impl From<PullNumber> for u64 {
    fn from(number: PullNumber) -> u64 {
        number.get()
    }
}

impl PartialEq<u64> for PullNumber {
    fn eq(&self, other: &u64) -> bool {
        self.get() == *other
    }
}

impl fmt::Display for PullNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Debug for PullNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// `true` for `owner/name`: each part 1–39 (owner) or 1–100 (name) ASCII
/// letters, digits, `-`, `_` or `.`, and neither part `.` or `..`.
pub fn is_repository_name(text: &str) -> bool {
    let Some((owner, name)) = text.split_once('/') else {
        return false;
    };
    let ok = |part: &str, max: usize| {
        !part.is_empty()
            && part.len() <= max
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
            && part != "."
            && part != ".."
    };
    ok(owner, 39) && ok(name, 100)
}

/// A repository name, `owner/name`, as written (GitHub compares names
/// without regard to case; so does `PartialEq<str>`).
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RepoName(String);

impl RepoName {
    pub fn parse(text: &str) -> Result<RepoName, String> {
        if is_repository_name(text) {
            Ok(RepoName(text.to_owned()))
        } else {
            Err(format!("expected owner/name, got {:?}", bounded(text)))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RepoName {
    type Error = String;
    fn try_from(text: String) -> Result<RepoName, String> {
        RepoName::parse(&text)
    }
}

impl From<RepoName> for String {
    fn from(name: RepoName) -> String {
        name.0
    }
}

impl std::ops::Deref for RepoName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for RepoName {
    fn eq(&self, other: &str) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl PartialEq<&str> for RepoName {
    fn eq(&self, other: &&str) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl fmt::Display for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// What one job reconciles: the pushes `before..after` on the default
/// branch, or one merged pull request pinned to its merge commit. Its text
/// form (`Display`, [`Scope::parse`]) is the `Teammem-Range` trailer's value
/// and the writer child's `TEAMMEM_WRITER_RANGE`: `before..after` or
/// `#number@merge_sha`.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Scope {
    Range { before: Sha, after: Sha },
    PullRequest { number: PullNumber, merge_sha: Sha },
}

impl Scope {
    /// The newest commit the job may read (`after`, or the merge commit).
    pub fn tip(&self) -> &Sha {
        match self {
            Scope::Range { after, .. } => after,
            Scope::PullRequest { merge_sha, .. } => merge_sha,
        }
    }

    /// The inverse of `Display`; the error says which forms are accepted.
    pub fn parse(text: &str) -> Result<Scope, String> {
        let parsed = if let Some(pull) = text.strip_prefix('#') {
            pull.split_once('@').and_then(|(number, sha)| {
                let number = number.parse::<u64>().ok()?;
                Some(Scope::PullRequest {
                    number: PullNumber::new(number).ok()?,
                    merge_sha: Sha::parse(sha).ok()?,
                })
            })
        } else {
            text.split_once("..").and_then(|(before, after)| {
                Some(Scope::Range {
                    before: Sha::parse(before).ok()?,
                    after: Sha::parse(after).ok()?,
                })
            })
        };
        parsed.ok_or_else(|| {
            format!(
                "{:?} is not a job scope; write before..after (two full commit ids) or #number@merge_sha",
                bounded(text)
            )
        })
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Range { before, after } => write!(f, "{before}..{after}"),
            Scope::PullRequest { number, merge_sha } => write!(f, "#{number}@{merge_sha}"),
        }
    }
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scope({self})")
    }
}

/// At most 64 bytes of `text`, for error messages about bad input.
fn bounded(text: &str) -> &str {
    let mut end = text.len().min(64);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sha_is_checked_once_and_kept_lowercase() {
        let upper = "ABCDEF0123456789ABCDEF0123456789ABCDEF01";
        let sha = Sha::parse(upper).unwrap();
        assert_eq!(sha.as_str(), upper.to_ascii_lowercase());
        assert!(sha == upper);
        for bad in ["", "abc", &"g".repeat(40), &"a".repeat(41)] {
            assert!(Sha::parse(bad).unwrap_err().contains("40 hex"), "{bad}");
        }
        let wire = serde_json::to_string(&sha).unwrap();
        assert_eq!(wire, format!("\"{}\"", upper.to_ascii_lowercase()));
        assert!(serde_json::from_str::<Sha>("\"0123\"").is_err());
    }

    #[test]
    fn a_pull_number_is_in_githubs_range() {
        assert_eq!(PullNumber::new(7).unwrap().get(), 7);
        assert!(PullNumber::new(0).is_err());
        assert!(PullNumber::new(PullNumber::MAX + 1).is_err());
        assert!(serde_json::from_str::<PullNumber>("0").is_err());
        assert_eq!(
            serde_json::to_string(&PullNumber::new(12).unwrap()).unwrap(),
            "12"
        );
    }

    #[test]
    fn a_scope_reads_back_what_it_writes() {
        let range = Scope::Range {
            before: Sha::parse(&"a".repeat(40)).unwrap(),
            after: Sha::parse(&"B".repeat(40)).unwrap(),
        };
        let pull = Scope::PullRequest {
            number: PullNumber::new(12).unwrap(),
            merge_sha: Sha::parse(&"c".repeat(40)).unwrap(),
        };
        assert_eq!(
            range.to_string(),
            format!("{}..{}", "a".repeat(40), "b".repeat(40))
        );
        assert_eq!(pull.to_string(), format!("#12@{}", "c".repeat(40)));
        for scope in [&range, &pull] {
            assert_eq!(&Scope::parse(&scope.to_string()).unwrap(), scope);
        }
        assert_eq!(range.tip().as_str(), "b".repeat(40));
        for bad in [
            "",
            "a..b",
            &format!("{}...{}", "a".repeat(40), "b".repeat(40)),
            &format!("#0@{}", "c".repeat(40)),
            &format!("#x@{}", "c".repeat(40)),
            "#12@abc",
            &format!("{}..{}\nInjected: 1", "a".repeat(40), "b".repeat(40)),
        ] {
            assert!(
                Scope::parse(bad).unwrap_err().contains("before..after"),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_repository_name_is_owner_slash_name() {
        assert!(RepoName::parse("octo/app.rs").is_ok());
        for bad in ["octo", "/app", "octo/", "octo/..", "octo/a b", "o/a/b"] {
            assert!(RepoName::parse(bad).is_err(), "{bad}");
        }
        assert!(RepoName::parse("Octo/App").unwrap() == *"octo/app");
    }
}
