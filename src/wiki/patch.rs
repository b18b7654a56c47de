//! The exact-anchor patch engine of DESIGN §7: every non-empty `old` must occur
//! exactly once in the original page, replacements may not overlap and are all
//! applied to the original text, an empty `old` appends (at most one per page).
//! Bytes outside the replaced ranges are copied unchanged.

/// One exact-anchor replacement.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct Replacement {
    pub old: String,
    pub new: String,
}

/// Why a page's replacements cannot be applied; `Display` says what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchViolation {
    AnchorMissing { index: usize },
    AnchorAmbiguous { index: usize, occurrences: usize },
    Overlap { first: usize, second: usize },
    SecondAppend { index: usize },
}

impl std::fmt::Display for PatchViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::AnchorMissing { index } => write!(
                f,
                "replacement {index}: its old text does not occur in the page at the expected base; re-read the page and copy the anchor exactly"
            ),
            Self::AnchorAmbiguous { index, occurrences } => write!(
                f,
                "replacement {index}: its old text occurs {occurrences} times in the page; extend it until it occurs exactly once"
            ),
            Self::Overlap { first, second } => write!(
                f,
                "replacements {first} and {second} overlap; merge them into one replacement"
            ),
            Self::SecondAppend { index } => write!(
                f,
                "replacement {index}: only one replacement with an empty old text (an append) is allowed per page"
            ),
        }
    }
}

/// Applies `replacements` to `original` and returns the new text.
pub fn apply_replacements(
    original: &str,
    replacements: &[Replacement],
) -> Result<String, PatchViolation> {
    let mut ranges: Vec<(usize, usize, usize)> = Vec::with_capacity(replacements.len());
    let mut append: Option<usize> = None;
    for (index, replacement) in replacements.iter().enumerate() {
        if replacement.old.is_empty() {
            if append.is_some() {
                return Err(PatchViolation::SecondAppend { index });
            }
            append = Some(index);
            continue;
        }
        let starts = occurrences(original, &replacement.old);
        match starts.as_slice() {
            [] => return Err(PatchViolation::AnchorMissing { index }),
            [start] => ranges.push((*start, start + replacement.old.len(), index)),
            many => {
                return Err(PatchViolation::AnchorAmbiguous {
                    index,
                    occurrences: many.len(),
                });
            }
        }
    }
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let (_, first_end, first) = pair[0];
        let (second_start, _, second) = pair[1];
        if second_start < first_end {
            return Err(PatchViolation::Overlap {
                first: first.min(second),
                second: first.max(second),
            });
        }
    }
    let mut result = String::with_capacity(original.len());
    let mut copied_up_to = 0;
    for (start, end, index) in ranges {
        result.push_str(&original[copied_up_to..start]);
        result.push_str(&replacements[index].new);
        copied_up_to = end;
    }
    result.push_str(&original[copied_up_to..]);
    if let Some(index) = append {
        result.push_str(&replacements[index].new);
    }
    Ok(result)
}

/// Every start offset of `needle` in `haystack`, overlapping matches included,
/// so that "aa" in "aaa" counts twice and is refused as ambiguous.
fn occurrences(haystack: &str, needle: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(offset) = haystack[from..].find(needle) {
        let start = from + offset;
        found.push(start);
        let next_char = haystack[start..].chars().next().map_or(1, char::len_utf8);
        from = start + next_char;
        if from > haystack.len() {
            break;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(old: &str, new: &str) -> Replacement {
        Replacement {
            old: old.into(),
            new: new.into(),
        }
    }

    #[test]
    fn replaces_unique_anchors_and_keeps_other_bytes() {
        let original = "# Title\r\n\ttabs  and  spaces\nend\u{0}\n";
        let patched =
            apply_replacements(original, &[r("Title", "Heading"), r("end", "fin")]).unwrap();
        assert_eq!(patched, "# Heading\r\n\ttabs  and  spaces\nfin\u{0}\n");
    }

    #[test]
    fn applies_to_the_original_not_in_sequence() {
        // The second anchor exists only in the original, the first's new text
        // would have created another occurrence if applied in sequence.
        let patched = apply_replacements("a b", &[r("a", "b b"), r("b", "c")]).unwrap();
        assert_eq!(patched, "b b c");
    }

    #[test]
    fn missing_and_ambiguous_anchors_are_refused() {
        assert_eq!(
            apply_replacements("abc", &[r("x", "y")]),
            Err(PatchViolation::AnchorMissing { index: 0 })
        );
        assert_eq!(
            apply_replacements("ab ab", &[r("a", "b"), r("ab", "c")]),
            Err(PatchViolation::AnchorAmbiguous {
                index: 0,
                occurrences: 2
            })
        );
        assert_eq!(
            apply_replacements("aaa", &[r("aa", "b")]),
            Err(PatchViolation::AnchorAmbiguous {
                index: 0,
                occurrences: 2
            })
        );
    }

    #[test]
    fn overlaps_are_refused_adjacent_ranges_are_not() {
        assert_eq!(
            apply_replacements("abcdef", &[r("cde", "x"), r("abc", "y")]),
            Err(PatchViolation::Overlap {
                first: 0,
                second: 1
            })
        );
        assert_eq!(
            apply_replacements("abcdef", &[r("def", "2"), r("abc", "1")]).unwrap(),
            "12"
        );
        assert_eq!(
            apply_replacements("abcdef", &[r("abc", "1"), r("abc", "2")]),
            Err(PatchViolation::Overlap {
                first: 0,
                second: 1
            })
        );
    }

    #[test]
    fn empty_old_appends_once() {
        assert_eq!(
            apply_replacements("line\n", &[r("", "more\n"), r("line", "LINE")]).unwrap(),
            "LINE\nmore\n"
        );
        assert_eq!(
            apply_replacements("x", &[r("", "1"), r("", "2")]),
            Err(PatchViolation::SecondAppend { index: 1 })
        );
        assert_eq!(
            apply_replacements("", &[r("", "new page")]).unwrap(),
            "new page"
        );
    }

    #[test]
    fn multibyte_text_is_matched_on_char_boundaries() {
        assert_eq!(
            apply_replacements("héé", &[r("é", "e")]),
            Err(PatchViolation::AnchorAmbiguous {
                index: 0,
                occurrences: 2
            })
        );
        assert_eq!(
            apply_replacements("日本語", &[r("本", "x")]).unwrap(),
            "日x語"
        );
    }
}
