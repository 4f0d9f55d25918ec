//! The issue-number check of `cargo xtask lint`: no `issue 35`, `Issue #35`,
//! `issue35`, `issue_35` or `issues 27 and 36` in a `.rs` or `.md` file of the
//! workspace — comments, test names, strings and docs alike. A reader of the
//! repository cannot follow an issue number; say what the thing is instead.
//!
//! Files that still cite one, owned by work under way elsewhere, are listed in
//! [`TO_SCRUB`] and printed as warnings; a listed file that no longer cites one fails
//! ("remove it from the list"), so the list only shrinks. The checkers that must spell
//! the pattern to find it are listed in [`SPELLS_THE_PATTERN`].

use anyhow::{Context, Result, bail};
use std::fs;
use std::path::Path;

/// Files that still cite issue numbers, to be reworded by the work that owns them;
/// emptied, never grown.
const TO_SCRUB: &[&str] = &[];

/// The checkers, which name the pattern they refuse.
const SPELLS_THE_PATTERN: &[&str] = &["xtask/src/issues.rs", "xtask/src/rustdoc.rs"];

/// Runs the check over the workspace at `root`.
pub(crate) fn check_workspace(root: &Path) -> Result<()> {
    let mut files = crate::walk::files_with_ext(root, "rs");
    files.extend(crate::walk::files_with_ext(root, "md"));
    let mut cited = Vec::new();
    let mut listed_citing = Vec::new();
    for path in files {
        let rel = crate::walk::rel(root, &path);
        if SPELLS_THE_PATTERN.contains(&rel.as_str()) {
            continue;
        }
        let text =
            fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let lines: Vec<usize> = citing_lines(&text);
        if TO_SCRUB.contains(&rel.as_str()) {
            if !lines.is_empty() {
                listed_citing.push(rel);
            }
            continue;
        }
        cited.extend(lines.into_iter().map(|n| format!("{rel}:{n}")));
    }
    let stale: Vec<&str> = TO_SCRUB
        .iter()
        .copied()
        .filter(|f| !listed_citing.iter().any(|c| c == f))
        .collect();
    for file in &listed_citing {
        crate::shell::say(&format!(
            "warning: known, still cites issue numbers (reword them): {file}"
        ));
    }
    let mut problems = Vec::new();
    if !cited.is_empty() {
        problems.push(format!(
            "issue numbers cited (a reader cannot follow them; say what the thing is):\n  {}",
            cited.join("\n  ")
        ));
    }
    if !stale.is_empty() {
        problems.push(format!(
            "no longer cite issue numbers: remove them from TO_SCRUB in xtask/src/issues.rs:\n  {}",
            stale.join("\n  ")
        ));
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    crate::shell::say(&format!(
        "issue numbers: none cited ({} files known, to be reworded)",
        listed_citing.len()
    ));
    Ok(())
}

/// The 1-based numbers of the lines of `text` that cite an issue number, a
/// citation wrapped across two lines (`(issue` / `//! 36)`) counted on its first.
fn citing_lines(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    (0..lines.len())
        .filter(|&i| {
            cites_issue(lines[i])
                || lines
                    .get(i + 1)
                    .is_some_and(|next| wraps_a_citation(lines[i], next))
        })
        .map(|i| i + 1)
        .collect()
}

/// Whether `line` ends in `issue` (or `issues`) and `next` starts with a number,
/// comment markers and punctuation between them aside: a citation broken by a wrap.
fn wraps_a_citation(line: &str, next: &str) -> bool {
    let is_word = |c: char| c.is_ascii_alphanumeric();
    let last = line
        .trim_end_matches(|c: char| !is_word(c))
        .rsplit(|c: char| !is_word(c))
        .next()
        .unwrap_or_default();
    let first = next
        .trim_start_matches(|c: char| !is_word(c))
        .split(|c: char| !is_word(c))
        .next()
        .unwrap_or_default();
    matches!(last.to_ascii_lowercase().as_str(), "issue" | "issues")
        && !first.is_empty()
        && first.bytes().all(|b| b.is_ascii_digit())
}

/// `issue 27`, `Issue #27`, `issue-27`, `issue_27`, `issue27`, `issues 27 and 36`,
/// in any case; words are split at every character that is not a letter or digit, so
/// an identifier (`fn b15_issue_36_kill`, `mod issue34`) cites as prose does.
fn cites_issue(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let number = |w: &str| w.bytes().all(|b| b.is_ascii_digit());
    let glued = |w: &str| {
        let rest = w.strip_prefix("issues").or_else(|| w.strip_prefix("issue"));
        rest.is_some_and(|r| !r.is_empty() && number(r))
    };
    words.iter().any(|w| glued(w))
        || words
            .windows(2)
            .any(|w| matches!(w[0], "issue" | "issues") && number(w[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_an_issue_number_cites() {
        for line in [
            "// Issue 15: a far job",
            "(issue 36)",
            "Issue #35 asked",
            "issues 27 and 36",
            "fn b15_issue_36_escapees() {",
            "fn issue15_run_host() {",
            "mod issue34;",
            "see issue-12",
        ] {
            assert!(cites_issue(line), "{line}");
        }
    }

    #[test]
    fn words_that_merely_contain_issue_do_not_cite() {
        for line in [
            "an issue with the door",
            "the issues are listed",
            "issued 3 times",
            "reissue 4",
            "tissue_5",
            "fn issue_tracker_url() {}",
        ] {
            assert!(!cites_issue(line), "{line}");
        }
    }

    #[test]
    fn citing_lines_are_numbered_from_one() {
        assert_eq!(citing_lines("a\nb (issue 3)\nc\nissue4\n"), [2, 4]);
        // A citation wrapped across a comment's lines.
        assert_eq!(citing_lines("//! a daemon (issue\n//! 36): one\n"), [1]);
        assert_eq!(citing_lines("an issue\nof taste, 36 times\n"), [0usize; 0]);
    }
}
