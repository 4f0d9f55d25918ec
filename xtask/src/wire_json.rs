//! The wire-JSON ratchet of `cargo xtask lint`: messages to and from the daemon are
//! built from herd-protocol's types (`protocol/`), not by hand with `json!`.
//!
//! A `json!` cannot say whether it builds a wire message or a line the CLI prints, so
//! the check counts every `json!` in herd-cli's production code (test code is exempt:
//! test files, `#[cfg(test)]` items) per file, against [`ALLOWED`]: a file over its
//! count, or a file not listed that has any, fails. The counts only shrink: a file
//! under its count is printed as a note to lower it (not a failure, so that branches
//! that convert files merge in any order). herd-protocol itself is not checked: it is
//! where the wire's types live.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

use crate::source::{CrateSources, SourceFile, is_test_only, item_attrs};

mod not_wire;

/// The crates whose `json!` are counted.
const COUNTED: &[&str] = &["herd-cli"];

/// Files and the most `json!` each may hold for a wire message: none any more.
/// Never add one: build the message from herd-protocol's types instead.
pub(crate) const ALLOWED: &[(&str, usize)] = &[];

/// Files whose `json!` build no wire message (the lines a `--json` command prints
/// for its user), how many of them, and why. These are allowed on top of
/// [`ALLOWED`]; a count here comes with its reason, and shrinks like the others.
pub(crate) const NOT_WIRE: &[(&str, usize, &str)] = not_wire::NOT_WIRE;

/// Counts `json!` invocations outside test code.
#[derive(Default)]
struct Counter {
    count: usize,
}

impl Counter {
    /// `json!` nested in another macro's tokens (`vec![json!(…)]`, `json!({"a": json!(…)})`).
    fn tokens(&mut self, tokens: TokenStream) {
        let mut previous_json = false;
        for tree in tokens {
            match tree {
                TokenTree::Ident(ident) => previous_json = ident == "json",
                TokenTree::Punct(p) => {
                    if previous_json && p.as_char() == '!' {
                        self.count += 1;
                    }
                    previous_json = false;
                }
                TokenTree::Group(g) => {
                    self.tokens(g.stream());
                    previous_json = false;
                }
                TokenTree::Literal(_) => previous_json = false,
            }
        }
    }
}

impl<'ast> Visit<'ast> for Counter {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        if !is_test_only(item_attrs(i)) {
            visit::visit_item(self, i);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if m.path.segments.last().is_some_and(|s| s.ident == "json") {
            self.count += 1;
        }
        self.tokens(m.tokens.clone());
        visit::visit_macro(self, m);
    }
}

/// The `json!` count of one file's production code.
pub(crate) fn count(file: &SourceFile) -> usize {
    let mut counter = Counter::default();
    counter.visit_file(&file.ast);
    counter.count
}

/// Every counted file with a `json!`, and its count.
pub(crate) fn counts(crates: &[CrateSources]) -> BTreeMap<String, usize> {
    crates
        .iter()
        .filter(|c| COUNTED.contains(&c.name))
        .flat_map(|c| &c.files)
        .map(|f| (f.rel.clone(), count(f)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// `allowed` with each file's [`NOT_WIRE`] count added (a file only there gets it).
fn with_not_wire<'a>(
    allowed: &[(&'a str, usize)],
    not_wire: &[(&'a str, usize, &str)],
) -> Vec<(&'a str, usize)> {
    let mut limits: BTreeMap<&str, usize> = allowed.iter().copied().collect();
    for (rel, n, _why) in not_wire {
        *limits.entry(rel).or_default() += n;
    }
    limits.into_iter().collect()
}

/// What the counts say against `allowed`: failures, and notes of counts to lower.
pub(crate) fn judge(
    found: &BTreeMap<String, usize>,
    allowed: &[(&str, usize)],
) -> (Vec<String>, Vec<String>) {
    let (mut failures, mut notes) = (Vec::new(), Vec::new());
    for (rel, n) in found {
        let limit = allowed
            .iter()
            .find(|(f, _)| f == rel)
            .map_or(0, |(_, n)| *n);
        if *n > limit {
            failures.push(format!(
                "{rel}: {n} `json!` where at most {limit} may be: build the wire message from \
                 herd-protocol's types (protocol/src/params.rs, answers.rs) instead"
            ));
        }
    }
    for (rel, limit) in allowed {
        let n = found.get(*rel).copied().unwrap_or(0);
        if n < *limit {
            notes.push(format!(
                "{rel} holds {n} `json!`: lower its count from {limit} to {n} in ALLOWED \
                 (xtask/src/wire_json.rs), or in NOT_WIRE (wire_json/not_wire.rs) when the \
                 ones left build no wire message"
            ));
        }
    }
    (failures, notes)
}

/// The check.
pub(crate) fn check(crates: &[CrateSources]) -> Result<()> {
    let found = counts(crates);
    let (failures, notes) = judge(&found, &with_not_wire(ALLOWED, NOT_WIRE));
    for note in &notes {
        crate::shell::say(&format!("note: {note}"));
    }
    if !failures.is_empty() {
        bail!("wire-JSON ratchet failed:\n  {}", failures.join("\n  "));
    }
    crate::shell::say(&format!(
        "wire JSON: {} `json!` left in {} herd-cli files, {} of them allowed as no wire \
         message (the ratchet only lowers)",
        found.values().sum::<usize>(),
        found.len(),
        NOT_WIRE.iter().map(|(_, n, _)| n).sum::<usize>()
    ));
    Ok(())
}

/// Prints the table of [`ALLOWED`] as the sources stand (`cargo xtask wire-json`):
/// each file's count less its [`NOT_WIRE`] one.
pub(crate) fn print_table(crates: &[CrateSources]) {
    for (rel, n) in counts(crates) {
        let not_wire: usize = NOT_WIRE
            .iter()
            .filter(|(f, _, _)| *f == rel)
            .map(|(_, k, _)| k)
            .sum();
        let n = n.saturating_sub(not_wire);
        if n > 0 {
            crate::shell::say(&format!("    (\"{rel}\", {n}),"));
        }
    }
}

#[cfg(test)]
mod tests;
