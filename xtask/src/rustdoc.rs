//! The rustdoc check of `cargo xtask lint`: the library crates' documentation (`///`
//! and `//!`, which is what docs.rs shows) cites no behaviour ID, no issue number and
//! no source-file path. A reader of the published docs has neither `docs/behaviors.md`,
//! the issue tracker nor the source tree in front of them, so the docs say what the
//! behaviour is in words.
//!
//! Test code is exempt (tests are named after the IDs they prove), and so are `//`
//! comments, where IDs and paths help the next maintainer. Which code counts as test
//! code is [`crate::source`]'s rule; inside a production file, items marked
//! `#[cfg(test)]` are skipped with everything in them.
//!
//! What is refused in a doc line:
//! - a behaviour ID as `docs/behaviors.md`'s check reads one (`B15`, `(B5-B8)`), except
//!   inside braces (`{B16}` is a pattern placeholder, not an ID);
//! - `issue` or `issues` followed by a number;
//! - a path to a Rust source file: a word ending in `.rs` that is quoted in backticks
//!   or contains a `/` (`benches/kill.rs`, `` `judge.rs` ``), or any `src/` path.

use anyhow::{Result, bail};
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Attribute, Expr, Item, Lit, Meta};

use crate::source::{CrateSources, is_test_only, item_attrs};

/// The crates whose docs are published: every checked crate but the binary one.
const BINARIES: &[&str] = &["herd-cli"];

/// Runs the check over the parsed crates; fails naming every offending doc line.
pub(crate) fn check(crates: &[CrateSources]) -> Result<()> {
    let mut found = Vec::new();
    for krate in crates.iter().filter(|c| !BINARIES.contains(&c.name)) {
        for file in &krate.files {
            let mut docs = Docs::default();
            docs.visit_file(&file.ast);
            for (line, text) in docs.lines {
                if let Some(why) = offence(&text) {
                    found.push(format!("{}:{line}: {why}: {}", file.rel, text.trim()));
                }
            }
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    bail!(
        "library rustdoc cites what a docs.rs reader cannot see (say it in words; IDs, \
         issues and paths may stay in `//` comments and test names):\n  {}",
        found.join("\n  ")
    )
}

/// What is wrong with one doc line, if anything.
pub(crate) fn offence(line: &str) -> Option<&'static str> {
    let unbraced = line.replace("{B", "{_");
    if !crate::behaviors::cited_ids(&unbraced).is_empty() {
        return Some("behaviour ID");
    }
    if cites_issue(line) {
        return Some("issue number");
    }
    if cites_source_path(line) {
        return Some("source path");
    }
    None
}

/// `issue 27`, `issues 27 and 36`, any case.
fn cites_issue(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .any(|w| matches!(w[0], "issue" | "issues") && w[1].bytes().all(|b| b.is_ascii_digit()))
}

/// A `src/` path, or a word ending in `.rs` that is backticked or has a `/` in it.
fn cites_source_path(line: &str) -> bool {
    if line.contains("src/") {
        return true;
    }
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/' | '.');
    let mut rest = line;
    while let Some(at) = rest.find(".rs") {
        let after = rest[at + 3..].chars().next();
        if after.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_')) {
            let word_start = rest[..at]
                .rfind(|c: char| !is_path_char(c))
                .map_or(0, |i| i + 1);
            let word = &rest[word_start..at];
            let backticked = rest[..word_start].ends_with('`') && after == Some('`');
            if !word.is_empty() && (backticked || word.contains('/')) {
                return true;
            }
        }
        rest = &rest[at + 3..];
    }
    false
}

/// Collects the doc lines of a file, skipping test-only items.
#[derive(Debug, Default)]
struct Docs {
    lines: Vec<(usize, String)>,
}

impl Docs {
    fn take(&mut self, attrs: &[Attribute]) {
        for attr in attrs {
            if !attr.path().is_ident("doc") {
                continue;
            }
            let Meta::NameValue(nv) = &attr.meta else {
                continue;
            };
            let Expr::Lit(lit) = &nv.value else { continue };
            let Lit::Str(s) = &lit.lit else { continue };
            let first = attr.span().start().line;
            for (k, text) in s.value().lines().enumerate() {
                self.lines.push((first + k, text.to_string()));
            }
        }
    }
}

impl<'ast> Visit<'ast> for Docs {
    fn visit_item(&mut self, item: &'ast Item) {
        if is_test_only(item_attrs(item)) {
            return;
        }
        visit::visit_item(self, item);
    }

    fn visit_attribute(&mut self, attr: &'ast Attribute) {
        self.take(std::slice::from_ref(attr));
    }
}

#[cfg(test)]
mod tests {
    use super::offence;

    #[test]
    fn refuses_ids_issues_and_paths() {
        for line in [
            " Kills the tree (B15).",
            " Sized output (B5-B8).",
            " See B12.",
            " Stored again later (issue 27).",
            " Issues 27 and 36 asked for it.",
            " Entry points for `benches/kill.rs`.",
            " The parsing itself is `options.rs`.",
            " The rule is in core/src/spawn.rs.",
        ] {
            assert!(offence(line).is_some(), "{line:?} should be refused");
        }
    }

    #[test]
    fn lets_words_placeholders_and_urls_through() {
        for line in [
            " `{B16}`: base32, `{H64}`: hex.",
            " Built for docs.rs on Linux.",
            " An issue with the disk, 2 of them.",
            " Base64 (B64) is not an ID.",
            " Ends with the last line of a running session.",
        ] {
            assert_eq!(offence(line), None, "{line:?} should pass");
        }
    }
}
