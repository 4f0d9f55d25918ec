//! The untyped-read ratchet of `cargo xtask lint`: the CLI reads the daemon's
//! answers as herd-protocol's answer types (`protocol/src/answers.rs`), not by
//! indexing a `serde_json::Value` with a field name, where a missing field reads as
//! `null` and then as an empty string or a zero nobody asked for.
//!
//! The check counts indexing by a string literal (`answer["session_id"]`) in
//! herd-cli's production code (test code is exempt: test files, `#[cfg(test)]`
//! items), inside macro arguments too, per file against [`ALLOWED`] plus
//! [`NOT_ANSWER`] (reads of JSON that is no daemon answer, each with its reason): a
//! file over its count, or a file not listed that has any, fails; a file under its
//! count is a note to lower it (so that branches that convert files merge in any
//! order). The check
//! is syntactic: it cannot tell a `Value` from a map indexed by a `&str`, and counts
//! both; herd-cli indexes no map that way. A write (`x["note"] = …`) counts too, as
//! the check cannot tell it from a read; the MCP server sets its own fields on a
//! daemon answer it passes on with `results::set_field`, which reads nothing and,
//! unlike indexing, cannot panic on an answer that is no object.
//!
//! The MCP server (`cli/src/mcp.rs`, `cli/src/mcp/`) is counted like the rest: it
//! reads the daemon's answers as herd-protocol's types too (`Server::ask_for`, and
//! `Server::ask_kept` for an answer it passes on as the daemon wrote it), and its
//! reads of the MCP client's own JSON (JSON-RPC lines, its own tool schemas and
//! results) are [`NOT_ANSWER`] rows.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use proc_macro2::{Delimiter, TokenStream, TokenTree};
use syn::visit::{self, Visit};

use crate::source::{CrateSources, SourceFile, is_test_only, item_attrs};

mod not_answer;

/// The crates whose reads are counted.
const COUNTED: &[&str] = &["herd-cli"];

/// Files and the most string-literal indexings of a daemon answer each may hold:
/// none any more. Never add a row: read the answer as its herd-protocol type
/// instead (`client::answer_of`, `client::read_answer`, `client::read_part`).
pub(crate) const ALLOWED: &[(&str, usize)] = &[];

/// Files whose reads by field name read no daemon answer (the daemon's own rows
/// and params, cargo's build messages, the MCP client's messages and the MCP
/// server's own schemas and results), how many, and why. These are allowed on
/// top of [`ALLOWED`]; a count here comes with its reason, and shrinks like the
/// others.
pub(crate) const NOT_ANSWER: &[(&str, usize, &str)] = not_answer::NOT_ANSWER;

/// Counts `x["field"]` outside test code.
#[derive(Default)]
struct Counter {
    count: usize,
}

/// Words after which `["…"]` is an array, not an index (`for k in ["a"]`).
const NOT_INDEXED: &[&str] = &[
    "in", "return", "break", "match", "if", "while", "let", "mut", "else", "yield",
];

impl Counter {
    /// `x["field"]` in a macro's tokens (`format!("{}", x["a"])`): a bracket group
    /// holding one string literal right after an identifier or a group.
    fn tokens(&mut self, tokens: TokenStream) {
        let mut indexable = false;
        for tree in tokens {
            match tree {
                TokenTree::Group(g) => {
                    if indexable && g.delimiter() == Delimiter::Bracket && is_one_string(g.stream())
                    {
                        self.count += 1;
                    }
                    self.tokens(g.stream());
                    indexable = g.delimiter() != Delimiter::Brace;
                }
                TokenTree::Ident(ident) => {
                    indexable = !NOT_INDEXED.iter().any(|k| ident == k);
                }
                TokenTree::Punct(_) | TokenTree::Literal(_) => indexable = false,
            }
        }
    }
}

/// Whether `stream` is one string literal.
fn is_one_string(stream: TokenStream) -> bool {
    let mut trees = stream.into_iter();
    match (trees.next(), trees.next()) {
        (Some(TokenTree::Literal(lit)), None) => {
            let text = lit.to_string();
            text.starts_with('"') || text.starts_with("r\"") || text.starts_with("r#")
        }
        _ => false,
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

    fn visit_expr_index(&mut self, i: &'ast syn::ExprIndex) {
        if let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(_),
            ..
        }) = &*i.index
        {
            self.count += 1;
        }
        visit::visit_expr_index(self, i);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        visit::visit_macro(self, m);
    }
}

/// The string-literal indexings of one file's production code.
pub(crate) fn count(file: &SourceFile) -> usize {
    let mut counter = Counter::default();
    counter.visit_file(&file.ast);
    counter.count
}

/// Every counted file with such a read, and its count.
pub(crate) fn counts(crates: &[CrateSources]) -> BTreeMap<String, usize> {
    crates
        .iter()
        .filter(|c| COUNTED.contains(&c.name))
        .flat_map(|c| &c.files)
        .map(|f| (f.rel.clone(), count(f)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// `allowed` with each file's [`NOT_ANSWER`] count added (a file only there gets it).
fn with_not_answer<'a>(
    allowed: &[(&'a str, usize)],
    not_answer: &[(&'a str, usize, &str)],
) -> Vec<(&'a str, usize)> {
    let mut limits: BTreeMap<&str, usize> = allowed.iter().copied().collect();
    for (rel, n, _why) in not_answer {
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
                "{rel}: {n} reads by field name (`x[\"field\"]`) where at most {limit} may be: \
                 read the answer as its herd-protocol type (client::answer_of) instead"
            ));
        }
    }
    for (rel, limit) in allowed {
        let n = found.get(*rel).copied().unwrap_or(0);
        if n < *limit {
            notes.push(format!(
                "{rel} holds {n} reads by field name: lower its count from {limit} to {n} in \
                 ALLOWED (xtask/src/value_reads.rs), or in NOT_ANSWER \
                 (value_reads/not_answer.rs) when the ones left read no daemon answer"
            ));
        }
    }
    (failures, notes)
}

/// The check.
pub(crate) fn check(crates: &[CrateSources]) -> Result<()> {
    let found = counts(crates);
    let (failures, notes) = judge(&found, &with_not_answer(ALLOWED, NOT_ANSWER));
    for note in &notes {
        crate::shell::say(&format!("note: {note}"));
    }
    if !failures.is_empty() {
        bail!("untyped-read ratchet failed:\n  {}", failures.join("\n  "));
    }
    crate::shell::say(&format!(
        "untyped reads: {} `x[\"field\"]` left in {} herd-cli files, {} of them allowed as \
         reading no daemon answer (the ratchet only lowers)",
        found.values().sum::<usize>(),
        found.len(),
        NOT_ANSWER.iter().map(|(_, n, _)| n).sum::<usize>()
    ));
    Ok(())
}

/// Prints the table of [`ALLOWED`] as the sources stand (`cargo xtask value-reads`):
/// each file's count less its [`NOT_ANSWER`] one.
pub(crate) fn print_table(crates: &[CrateSources]) {
    for (rel, n) in counts(crates) {
        let not_answer: usize = NOT_ANSWER
            .iter()
            .filter(|(f, _, _)| *f == rel)
            .map(|(_, k, _)| k)
            .sum();
        let n = n.saturating_sub(not_answer);
        if n > 0 {
            crate::shell::say(&format!("    (\"{rel}\", {n}),"));
        }
    }
}

#[cfg(test)]
mod tests;
