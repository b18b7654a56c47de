//! Page-path rules of DESIGN §7: which paths a wiki page may have, and when two
//! paths in one tree clash. Pure functions; every write and every read of a tree
//! goes through here, so a path that passes is safe to check out on Linux, macOS
//! and Windows alike.

use std::collections::{BTreeMap, BTreeSet};

use unicode_normalization::UnicodeNormalization;

/// Longest page path accepted, in UTF-8 bytes.
pub const MAX_PATH_BYTES: usize = 240;

/// Why a path was refused; `Display` is a sentence an agent can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathRuleViolation {
    TooLong { bytes: usize },
    NotMarkdown,
    ControlOrFormatCharacter { character: char },
    ForbiddenCharacter { character: char },
    EmptySegment,
    DotSegment,
    GitSegment,
    LeadingDash,
    TrailingSpaceOrDot,
    DeviceName,
}

impl std::fmt::Display for PathRuleViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLong { bytes } => write!(
                f,
                "it is {bytes} bytes long and page paths may be at most {MAX_PATH_BYTES} bytes"
            ),
            Self::NotMarkdown => write!(f, "page paths must end in .md"),
            Self::ControlOrFormatCharacter { character } => write!(
                f,
                "it contains the invisible control or format character U+{:04X}",
                u32::from(*character)
            ),
            Self::ForbiddenCharacter { character } => write!(
                f,
                "it contains {character:?}, and none of \\ : < > \" | ? * may appear in a page path"
            ),
            Self::EmptySegment => write!(
                f,
                "it has an empty segment (a leading, trailing or doubled /)"
            ),
            Self::DotSegment => write!(f, "it has a . or .. segment"),
            Self::GitSegment => write!(f, "it has a segment that git reserves (.git or git~N)"),
            Self::LeadingDash => write!(f, "a segment starts with -"),
            Self::TrailingSpaceOrDot => write!(f, "a segment ends with a space or a dot"),
            Self::DeviceName => write!(
                f,
                "a segment is a Windows device name (con, prn, aux, nul, com1-com9, lpt1-lpt9)"
            ),
        }
    }
}

/// Checks one page path against every per-path rule.
pub fn check_page_path(path: &str) -> Result<(), PathRuleViolation> {
    if path.len() > MAX_PATH_BYTES {
        return Err(PathRuleViolation::TooLong { bytes: path.len() });
    }
    if let Some(character) = path.chars().find(|c| is_control_or_format(*c)) {
        return Err(PathRuleViolation::ControlOrFormatCharacter { character });
    }
    if let Some(character) = path.chars().find(|c| FORBIDDEN_CHARACTERS.contains(c)) {
        return Err(PathRuleViolation::ForbiddenCharacter { character });
    }
    for segment in path.split('/') {
        check_segment(segment)?;
    }
    if !path.ends_with(".md") {
        return Err(PathRuleViolation::NotMarkdown);
    }
    Ok(())
}

const FORBIDDEN_CHARACTERS: [char; 9] = ['\\', ':', '<', '>', '"', '|', '?', '*', '\0'];

fn check_segment(segment: &str) -> Result<(), PathRuleViolation> {
    if segment.is_empty() {
        return Err(PathRuleViolation::EmptySegment);
    }
    if segment == "." || segment == ".." {
        return Err(PathRuleViolation::DotSegment);
    }
    if segment.eq_ignore_ascii_case(".git") || is_git_short_name(segment) {
        return Err(PathRuleViolation::GitSegment);
    }
    if segment.starts_with('-') {
        return Err(PathRuleViolation::LeadingDash);
    }
    if segment.ends_with(' ') || segment.ends_with('.') {
        return Err(PathRuleViolation::TrailingSpaceOrDot);
    }
    let stem = segment.split('.').next().unwrap_or(segment);
    if is_device_name(stem) {
        return Err(PathRuleViolation::DeviceName);
    }
    Ok(())
}

/// `git~1` is how NTFS may spell `.git` in 8.3 form; git itself refuses it.
fn is_git_short_name(segment: &str) -> bool {
    let lower = segment.to_ascii_lowercase();
    lower
        .strip_prefix("git~")
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

fn is_device_name(stem: &str) -> bool {
    let lower = stem.to_ascii_lowercase();
    match lower.as_str() {
        "con" | "prn" | "aux" | "nul" => true,
        _ => {
            let bytes = lower.as_bytes();
            bytes.len() == 4
                && (lower.starts_with("com") || lower.starts_with("lpt"))
                && (b'1'..=b'9').contains(&bytes[3])
        }
    }
}

/// Unicode general categories Cc (control) and Cf (format): invisible characters
/// that make two different paths look the same.
fn is_control_or_format(c: char) -> bool {
    if c.is_control() {
        return true;
    }
    matches!(u32::from(c),
        0x00AD
        | 0x0600..=0x0605
        | 0x061C
        | 0x06DD
        | 0x070F
        | 0x0890..=0x0891
        | 0x08E2
        | 0x180E
        | 0x200B..=0x200F
        | 0x202A..=0x202E
        | 0x2060..=0x2064
        | 0x2066..=0x206F
        | 0xFEFF
        | 0xFFF9..=0xFFFB
        | 0x110BD
        | 0x110CD
        | 0x13430..=0x1343F
        | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A
        | 0xE0001
        | 0xE0020..=0xE007F)
}

/// The key two paths collide on: NFC, lower-cased, NFC again (lower-casing can
/// denormalize). Case-insensitive file systems compare roughly like this.
pub fn collision_key(path: &str) -> String {
    let composed: String = path.nfc().collect();
    composed.to_lowercase().nfc().collect()
}

/// A clash between two paths of one tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeClash {
    /// Both paths fold to the same key.
    Collision { first: String, second: String },
    /// `file` is a page and also a folder prefix of `inside`.
    FileAndFolder { file: String, inside: String },
}

impl std::fmt::Display for TreeClash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Collision { first, second } => write!(
                f,
                "the paths '{first}' and '{second}' differ only in case or Unicode normalization"
            ),
            Self::FileAndFolder { file, inside } => write!(
                f,
                "'{file}' would be both a page and a folder (of '{inside}')"
            ),
        }
    }
}

/// Checks that no two of `paths` collide after NFC + case folding and that no
/// path is also used (in folded form) as a folder of another path.
pub fn check_tree_paths<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<(), TreeClash> {
    let mut files: BTreeMap<String, &'a str> = BTreeMap::new();
    let mut folders: BTreeMap<String, &'a str> = BTreeMap::new();
    for path in paths {
        let key = collision_key(path);
        if let Some(first) = files.insert(key.clone(), path)
            && first != path
        {
            return Err(TreeClash::Collision {
                first: first.to_owned(),
                second: path.to_owned(),
            });
        }
        let mut end = 0;
        while let Some(slash) = key[end..].find('/') {
            end += slash;
            folders.entry(key[..end].to_owned()).or_insert(path);
            end += 1;
        }
    }
    let file_keys: BTreeSet<&String> = files.keys().collect();
    for (folder, inside) in &folders {
        if file_keys.contains(folder) {
            return Err(TreeClash::FileAndFolder {
                file: files[folder].to_owned(),
                inside: (*inside).to_owned(),
            });
        }
    }
    Ok(())
}

/// Checks that none of `added` (new page paths) clashes with `files`, the
/// files of the tree that are not pages: the same folded key, or one of them
/// used as a folder of the other. Clashes among `files` themselves are the
/// wiki's own business and are not reported.
pub fn check_against_other_files<'a>(
    files: impl IntoIterator<Item = &'a str>,
    added: &[&'a str],
) -> Result<(), TreeClash> {
    let added: Vec<(String, &str)> = added
        .iter()
        .map(|path| (collision_key(path), *path))
        .collect();
    for file in files {
        let file_key = collision_key(file);
        for (page_key, page) in &added {
            if *page_key == file_key {
                return Err(TreeClash::Collision {
                    first: file.to_owned(),
                    second: (*page).to_owned(),
                });
            }
            if is_folder_of(page_key, &file_key) {
                return Err(TreeClash::FileAndFolder {
                    file: (*page).to_owned(),
                    inside: file.to_owned(),
                });
            }
            if is_folder_of(&file_key, page_key) {
                return Err(TreeClash::FileAndFolder {
                    file: file.to_owned(),
                    inside: (*page).to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// Whether `folder` is a folder prefix of `path` (both folded keys).
fn is_folder_of(folder: &str, path: &str) -> bool {
    path.strip_prefix(folder)
        .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(path: &str) {
        assert_eq!(check_page_path(path), Ok(()), "{path:?} should pass");
    }

    fn refused(path: &str) -> PathRuleViolation {
        check_page_path(path).expect_err(&format!("{path:?} should be refused"))
    }

    #[test]
    fn plain_nested_and_unicode_paths_pass() {
        ok("Home.md");
        ok("guides/setup/Linux.md");
        ok("Ünïcödé/日本語.md");
        ok("a b.md");
        ok("x.y.md");
        ok("console.md");
        ok("com10.md");
        ok("com0.md");
        ok("lpt.md");
        ok("gitx~1.md");
        ok(".hidden.md");
        ok("a-b/c-.md");
    }

    #[test]
    fn length_boundary_is_240_bytes() {
        let at_limit = format!("{}.md", "a".repeat(MAX_PATH_BYTES - 3));
        ok(&at_limit);
        let over = format!("{}.md", "a".repeat(MAX_PATH_BYTES - 2));
        assert_eq!(refused(&over), PathRuleViolation::TooLong { bytes: 241 });
        // Multi-byte characters count in bytes, not characters.
        let multibyte = format!("{}.md", "é".repeat(119)); // 238 + 3 bytes
        assert_eq!(
            refused(&multibyte),
            PathRuleViolation::TooLong { bytes: 241 }
        );
    }

    #[test]
    fn must_end_in_md() {
        assert_eq!(refused("Home"), PathRuleViolation::NotMarkdown);
        assert_eq!(refused("Home.MD"), PathRuleViolation::NotMarkdown);
        assert_eq!(refused("Home.md.txt"), PathRuleViolation::NotMarkdown);
        assert_eq!(refused("img/logo.png"), PathRuleViolation::NotMarkdown);
    }

    #[test]
    fn control_and_format_characters_are_refused() {
        for c in [
            '\n',
            '\t',
            '\u{7f}',
            '\u{200b}',
            '\u{200e}',
            '\u{202e}',
            '\u{feff}',
            '\u{ad}',
            '\u{e0041}',
        ] {
            assert_eq!(
                refused(&format!("a{c}b.md")),
                PathRuleViolation::ControlOrFormatCharacter { character: c }
            );
        }
    }

    #[test]
    fn forbidden_characters_are_refused() {
        for c in ['\\', ':', '<', '>', '"', '|', '?', '*'] {
            assert_eq!(
                refused(&format!("a{c}b.md")),
                PathRuleViolation::ForbiddenCharacter { character: c }
            );
        }
    }

    #[test]
    fn segment_rules() {
        assert_eq!(refused("/Home.md"), PathRuleViolation::EmptySegment);
        assert_eq!(refused("a//Home.md"), PathRuleViolation::EmptySegment);
        assert_eq!(refused("a/"), PathRuleViolation::EmptySegment);
        assert_eq!(refused(""), PathRuleViolation::EmptySegment);
        assert_eq!(refused("./Home.md"), PathRuleViolation::DotSegment);
        assert_eq!(refused("a/../Home.md"), PathRuleViolation::DotSegment);
        assert_eq!(refused(".git/Home.md"), PathRuleViolation::GitSegment);
        assert_eq!(refused(".GiT/Home.md"), PathRuleViolation::GitSegment);
        assert_eq!(refused("git~1/Home.md"), PathRuleViolation::GitSegment);
        assert_eq!(refused("GIT~12/Home.md"), PathRuleViolation::GitSegment);
        assert_eq!(refused("-rf.md"), PathRuleViolation::LeadingDash);
        assert_eq!(refused("a/-b/c.md"), PathRuleViolation::LeadingDash);
        assert_eq!(refused("a /b.md"), PathRuleViolation::TrailingSpaceOrDot);
        assert_eq!(refused("a./b.md"), PathRuleViolation::TrailingSpaceOrDot);
    }

    #[test]
    fn device_names_with_and_without_extension() {
        for name in ["con", "PRN", "Aux", "nul", "com1", "COM9", "lpt1", "lpt9"] {
            assert_eq!(
                refused(&format!("{name}.md")),
                PathRuleViolation::DeviceName
            );
            assert_eq!(
                refused(&format!("{name}/x.md")),
                PathRuleViolation::DeviceName
            );
            assert_eq!(
                refused(&format!("{name}.txt.md")),
                PathRuleViolation::DeviceName
            );
        }
    }

    #[test]
    fn collisions_after_nfc_and_case_folding() {
        assert_eq!(check_tree_paths(["a.md", "b.md", "c/a.md"]), Ok(()));
        assert!(matches!(
            check_tree_paths(["Home.md", "home.md"]),
            Err(TreeClash::Collision { .. })
        ));
        // "é" precomposed vs "e" + combining acute.
        assert!(matches!(
            check_tree_paths(["caf\u{e9}.md", "cafe\u{301}.md"]),
            Err(TreeClash::Collision { .. })
        ));
        assert!(matches!(
            check_tree_paths(["Docs/a.md", "docs/b.md", "DOCS.md"]),
            Ok(())
        ));
        // The same path twice is not a clash with itself.
        assert_eq!(check_tree_paths(["a.md", "a.md"]), Ok(()));
    }

    #[test]
    fn new_pages_may_not_clash_with_other_files() {
        let files = ["images/logo.png", "Notes.MD", "docs/spec"];
        assert_eq!(
            check_against_other_files(files, &["images.md", "images/a.md", "docs/spec.md"]),
            Ok(())
        );
        assert!(matches!(
            check_against_other_files(files, &["notes.md"]),
            Err(TreeClash::Collision { .. })
        ));
        assert_eq!(
            check_against_other_files(files, &["images/logo.png/a.md"]),
            Err(TreeClash::FileAndFolder {
                file: "images/logo.png".into(),
                inside: "images/logo.png/a.md".into(),
            })
        );
        assert_eq!(
            check_against_other_files(["a.md/b.png"], &["A.md"]),
            Err(TreeClash::FileAndFolder {
                file: "A.md".into(),
                inside: "a.md/b.png".into(),
            })
        );
        // Two other files clashing with each other are not a new page's fault.
        assert_eq!(
            check_against_other_files(["x.png", "X.png"], &["y.md"]),
            Ok(())
        );
    }

    #[test]
    fn file_and_folder_clash() {
        assert!(matches!(
            check_tree_paths(["a.md", "a.md/b.md"]),
            Err(TreeClash::FileAndFolder { .. })
        ));
        assert!(matches!(
            check_tree_paths(["x/A.md/b.md", "x/a.md"]),
            Err(TreeClash::FileAndFolder { .. })
        ));
    }
}
