//! The behaviour-contract check of `cargo xtask lint`: every behaviour ID the code
//! cites is defined in `docs/behaviors.md`, and the IDs no test names are listed.
//!
//! A *behaviour ID* is `B` and a number from 1 to 99 without a leading zero, standing
//! alone: no letter, digit or `_` right before the `B` or right after the number. So
//! `B15`, `(B15)`, `B15/B16` and `B5–B8` cite, and `0xB15`, `DEADB15`, `B15F`,
//! `SHA256`, `B100` and `B0` do not. `B64` is never an ID (it is base64's short name).
//! A range (`B5-B8`, `B5–B8`, `B5..B8`, `B5…B8`) cites every ID in it.
//!
//! Where IDs are cited:
//! - anywhere in a `.rs` file of the workspace (comments, strings, code);
//! - in a test's name, as one `_`-separated word `b15` (`fn b15_tree_kill_…`,
//!   `fn far_b17_…`, `fn b27_b29_b38_…`). A test is a `fn` under an attribute
//!   whose path ends in `test` (`#[test]`, `#[tokio::test(…)]`), a `fn` inside a
//!   `proptest!` block, or, in a test file, a table row `b33_name: "…"` of a macro
//!   that makes one test per row.
//!
//! `docs/behaviors.md` defines an ID with a heading `## B15 — what it promises`.
//! An ID cited but not defined fails the check, naming file and line; a defined ID
//! that no test names is printed, not failed.

use anyhow::{Context, Result, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// The document that defines every behaviour ID, relative to the workspace root.
pub(crate) const DOC: &str = "docs/behaviors.md";

/// Numbers that look like IDs and never are: `B64` is base64.
const NOT_IDS: &[u8] = &[64];

/// One citation: where, and which ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cite {
    pub(crate) file: String,
    pub(crate) line: usize,
    pub(crate) id: u8,
    /// The test's name when the ID is cited by a test name.
    pub(crate) test: Option<String>,
}

/// Runs the check over the workspace at `root`.
pub(crate) fn check_workspace(root: &Path) -> Result<()> {
    let doc_path = root.join(DOC);
    let doc = fs::read_to_string(&doc_path)
        .with_context(|| format!("cannot read {}", doc_path.display()))?;
    let defined = defined_ids(&doc).map_err(|e| anyhow::anyhow!("{DOC}: {e}"))?;
    let mut cites = Vec::new();
    for path in crate::walk::files_with_ext(root, "rs") {
        let text =
            fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let rel = crate::walk::rel(root, &path);
        cites.extend(scan_rust(&rel, &text));
    }
    let report = judge(&defined, &cites);
    if !report.untested.is_empty() {
        crate::shell::say(&format!(
            "behaviours no test names ({}): {}",
            report.untested.len(),
            report
                .untested
                .iter()
                .map(|n| format!("B{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !report.undefined.is_empty() {
        bail!(
            "behaviour IDs cited but not defined in {DOC} (add a `## B<n> — …` section, or fix the citation):\n  {}",
            report.undefined.join("\n  ")
        );
    }
    crate::shell::say(&format!(
        "behaviours: {} defined in {DOC}, {} citations checked",
        defined.len(),
        cites.len()
    ));
    Ok(())
}

/// What [`judge`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Report {
    /// `file:line: B<n> …` for every citation of an undefined ID.
    pub(crate) undefined: Vec<String>,
    /// Defined IDs that no test names.
    pub(crate) untested: Vec<u8>,
}

/// Compares the citations with the defined IDs.
pub(crate) fn judge(defined: &BTreeSet<u8>, cites: &[Cite]) -> Report {
    let mut report = Report::default();
    let mut tested = BTreeSet::new();
    for c in cites {
        if c.test.is_some() {
            tested.insert(c.id);
        }
        if !defined.contains(&c.id) {
            report.undefined.push(match &c.test {
                Some(name) => format!("{}:{}: B{} (test `{name}`)", c.file, c.line, c.id),
                None => format!("{}:{}: B{}", c.file, c.line, c.id),
            });
        }
    }
    report.untested = defined.difference(&tested).copied().collect();
    report
}

/// The IDs `doc` defines with `## B<n> — …` headings. A heading that starts like an
/// ID but is not one, or an ID defined twice, is an error naming the line.
pub(crate) fn defined_ids(doc: &str) -> Result<BTreeSet<u8>, String> {
    let mut seen: BTreeMap<u8, usize> = BTreeMap::new();
    for (n, line) in doc.lines().enumerate() {
        let Some(rest) = line.strip_prefix("## B") else {
            continue;
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if digits.is_empty() {
            // A heading such as `## Background`, not an ID.
            continue;
        }
        let after = &rest[digits.len()..];
        let id = parse_number(&digits)
            .filter(|_| after.starts_with(" — ") || after.starts_with(" - "))
            .ok_or_else(|| {
                format!(
                    "line {}: `{line}` is not an ID heading (`## B<1-99> — title`)",
                    n + 1
                )
            })?;
        if let Some(first) = seen.insert(id, n + 1) {
            return Err(format!(
                "line {}: B{id} is defined twice (first on line {first})",
                n + 1
            ));
        }
    }
    Ok(seen.into_keys().collect())
}

/// `1`..=`99` without a leading zero, not one of [`NOT_IDS`].
fn parse_number(digits: &str) -> Option<u8> {
    if digits.is_empty() || digits.len() > 2 || digits.starts_with('0') {
        return None;
    }
    let n: u8 = digits.parse().ok()?;
    (!NOT_IDS.contains(&n)).then_some(n)
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// A `B<n>` token in a line: its byte span and number.
#[derive(Debug, Clone, Copy)]
struct Token {
    start: usize,
    end: usize,
    n: u8,
}

fn tokens(line: &str) -> Vec<Token> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'B' && (i == 0 || !is_word(b[i - 1])) {
            let mut j = i + 1;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let bounded = j == b.len() || !is_word(b[j]);
            if bounded && let Some(n) = parse_number(&line[i + 1..j]) {
                out.push(Token {
                    start: i,
                    end: j,
                    n,
                });
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// Every behaviour ID `line` cites, ranges expanded, in order of appearance.
pub(crate) fn cited_ids(line: &str) -> Vec<u8> {
    let toks = tokens(line);
    let mut out = Vec::new();
    for (k, t) in toks.iter().enumerate() {
        out.push(t.n);
        if let Some(next) = toks.get(k + 1) {
            let between = &line[t.end..next.start];
            if matches!(between, "-" | "–" | ".." | "…") && t.n < next.n {
                out.extend((t.n + 1..next.n).filter(|n| !NOT_IDS.contains(n)));
            }
        }
    }
    out
}

/// The IDs a test's name cites: each `_`-separated word that is `b<n>`.
pub(crate) fn test_name_ids(name: &str) -> Vec<u8> {
    name.split('_')
        .filter_map(|w| w.strip_prefix('b').and_then(parse_number))
        .collect()
}

/// Whether an attribute line (`#[…]`) marks a test: its path ends in `test`.
fn is_test_attribute(trimmed: &str) -> bool {
    let Some(inner) = trimmed.strip_prefix("#[") else {
        return false;
    };
    let path = inner.split(['(', ']']).next().unwrap_or("").trim();
    path == "test" || path.ends_with("::test")
}

/// The name of the `fn` this line declares, if it declares one.
fn fn_name(trimmed: &str) -> Option<&str> {
    let mut rest = trimmed;
    for prefix in ["pub(crate) ", "pub(super) ", "pub ", "async ", "unsafe "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// A macro table row `name: …` (one test per row), if this line is one.
fn table_row_name(trimmed: &str) -> Option<&str> {
    let (name, rest) = trimmed.split_once(':')?;
    let is_ident = !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    (is_ident && rest.starts_with(' ')).then_some(name)
}

/// Whether `rel` is a test file: under a `tests` directory, or a `tests.rs`.
fn is_test_file(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    parts.iter().rev().skip(1).any(|p| *p == "tests") || rel.ends_with("tests.rs")
}

/// Every citation in one `.rs` file: IDs anywhere in its text, and IDs in the names
/// of its tests.
pub(crate) fn scan_rust(rel: &str, text: &str) -> Vec<Cite> {
    let test_file = is_test_file(rel);
    let mut out = Vec::new();
    let mut pending_test = false;
    // The indentation of the `proptest! {` line we are inside, if any.
    let mut proptest_indent: Option<usize> = None;
    for (n, line) in text.lines().enumerate() {
        let cite = |id: u8, test: Option<&str>| Cite {
            file: rel.to_owned(),
            line: n + 1,
            id,
            test: test.map(str::to_owned),
        };
        out.extend(cited_ids(line).into_iter().map(|id| cite(id, None)));
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if proptest_indent == Some(indent) && trimmed.starts_with('}') {
            proptest_indent = None;
        }
        if trimmed.ends_with("proptest! {") {
            proptest_indent = Some(indent);
            continue;
        }
        if trimmed.starts_with("#[") {
            pending_test |= is_test_attribute(trimmed);
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with("//") {
            continue;
        }
        let name = match fn_name(trimmed) {
            Some(name) if pending_test || proptest_indent.is_some() => Some(name),
            Some(_) => None,
            None if test_file => table_row_name(trimmed),
            None => None,
        };
        pending_test = false;
        if let Some(name) = name {
            out.extend(
                test_name_ids(name)
                    .into_iter()
                    .map(|id| cite(id, Some(name))),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_stand_alone() {
        assert_eq!(cited_ids("see B15, (B16) and B17."), [15, 16, 17]);
        assert_eq!(cited_ids("B1 at the start, B39 at the end B2"), [1, 39, 2]);
        assert_eq!(cited_ids("B15/B18: both"), [15, 18]);
        assert_eq!(cited_ids("// B13 ordering"), [13]);
        assert_eq!(cited_ids("\"B21\" in a string"), [21]);
    }

    #[test]
    fn hex_hashes_and_longer_words_are_not_ids() {
        for text in [
            "0xB15",
            "DEADB15",
            "B15F",
            "B15_LIMIT",
            "AB12",
            "SHA256",
            "sha256",
            "B100",
            "B0",
            "B05",
            "B64 encoding",
            "b15 lower case in prose",
            "B",
            "Bx",
            "#B1B2B3",
        ] {
            assert!(cited_ids(text).is_empty(), "{text:?} cites nothing");
        }
    }

    #[test]
    fn ranges_cite_every_id_inside() {
        assert_eq!(cited_ids("(B15-B17)"), [15, 16, 17]);
        assert_eq!(cited_ids("B5–B8 routes"), [5, 6, 7, 8]);
        assert_eq!(cited_ids("B1..B3"), [1, 2, 3]);
        assert_eq!(cited_ids("B19…B21"), [19, 20, 21]);
        // Not a range: a gap, or a backwards pair.
        assert_eq!(cited_ids("B5 - B8"), [5, 8]);
        assert_eq!(cited_ids("B8-B5"), [8, 5]);
    }

    #[test]
    fn test_names_cite_whole_words() {
        assert_eq!(test_name_ids("b15_tree_kill"), [15]);
        assert_eq!(test_name_ids("b27_b29_b38_read_only_home"), [27, 29, 38]);
        assert_eq!(test_name_ids("far_b17_time_limit"), [17]);
        assert!(test_name_ids("sub15_b_x").is_empty());
        assert!(test_name_ids("b64_roundtrip").is_empty());
        assert!(test_name_ids("b100_things").is_empty());
        assert!(test_name_ids("ab15_x").is_empty());
    }

    #[test]
    fn tests_are_found_by_attribute_proptest_block_and_table_row() {
        let src = "#[test]\nfn b15_one() {}\n#[tokio::test(flavor = \"multi_thread\")]\n#[cfg(unix)]\nasync fn b16_two() {}\nfn b17_helper_not_a_test() {}\nproptest! {\n    #[test]\n    fn b7_prop(x in 0..3) {}\n    fn b5_prop_without_attribute(x in 0..3) {}\n}\nfn b18_after_the_block() {}\n";
        let names: Vec<(usize, u8)> = scan_rust("core/src/x.rs", src)
            .into_iter()
            .filter(|c| c.test.is_some())
            .map(|c| (c.line, c.id))
            .collect();
        assert_eq!(names, [(2, 15), (5, 16), (9, 7), (10, 5)]);

        let table = "block! {\n    b33_block_pkill: \"pkill python\" => KillByName;\n}\n";
        let rows: Vec<u8> = scan_rust("guards/tests/it/table.rs", table)
            .into_iter()
            .filter(|c| c.test.is_some())
            .map(|c| c.id)
            .collect();
        assert_eq!(rows, [33]);
        // Outside a test file a `name: value` line is a field, not a test.
        assert!(
            scan_rust("guards/src/table.rs", table)
                .iter()
                .all(|c| c.test.is_none())
        );
    }

    #[test]
    fn headings_define_ids_and_bad_headings_are_named() {
        let doc = "# T\n\n## Background\n\n## B1 — one\n\ntext B2\n\n## B12 — twelve\n";
        assert_eq!(defined_ids(doc), Ok(BTreeSet::from([1, 12])));
        let twice = "## B3 — a\n## B3 — b\n";
        assert!(defined_ids(twice).is_err_and(|e| e.contains("line 2") && e.contains("twice")));
        let bad = "## B3x — a\n";
        assert!(defined_ids(bad).is_err_and(|e| e.contains("line 1")));
    }

    #[test]
    fn undefined_ids_fail_with_file_and_line_and_untested_ones_are_listed() {
        let defined = BTreeSet::from([1, 2, 3]);
        let src = "// B1 and B4\n#[test]\nfn b2_works() {}\n#[test]\nfn b5_missing() {}\n";
        let report = judge(&defined, &scan_rust("core/src/a.rs", src));
        assert_eq!(
            report.undefined,
            [
                "core/src/a.rs:1: B4",
                "core/src/a.rs:5: B5 (test `b5_missing`)"
            ]
        );
        assert_eq!(report.untested, [1, 3]);
    }
}
