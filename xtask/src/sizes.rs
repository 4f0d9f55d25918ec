//! The size check of `cargo xtask lint`: no production source file over
//! [`FILE_LIMIT`] lines and no function over [`FN_LIMIT`] lines in the library and
//! binary crates, so a reader can hold each one.
//!
//! How lines are counted:
//! - a file's lines are all its lines except those of test-only items
//!   (`#[cfg(test)] mod tests { … }`, a `#[cfg(test)]` function or impl): a unit-test
//!   module inside a file does not make it long;
//! - a function's lines run from the first line of its signature to its closing brace
//!   (its doc comment and attributes do not count). Free functions, impl methods and
//!   trait default methods are functions; a closure is part of the function it is
//!   written in, and a nested `fn` counts both inside its parent and on its own.
//!   Test-only functions are not checked.
//!
//! A file whose opening `//!` block has a line starting [`LONG_BY_DESIGN`] followed by
//! a reason (a parser table, a state machine) is exempt from both limits.
//! What is over the limits today and being split is listed in `debt.rs`.

use anyhow::{Result, bail};
use std::fmt;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use crate::source::{CrateSources, is_test_only, item_attrs};

/// The most lines a production source file may have.
pub(crate) const FILE_LIMIT: usize = 800;
/// The most lines a function may have.
pub(crate) const FN_LIMIT: usize = 100;
/// The line that exempts a file, followed by why.
pub(crate) const LONG_BY_DESIGN: &str = "//! Long by design:";

/// Something over a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Oversize {
    File {
        path: String,
        lines: usize,
    },
    Fn {
        path: String,
        line: usize,
        name: String,
        lines: usize,
    },
}

impl Oversize {
    /// The key a debt entry names: the path and `file` or `fn NAME`.
    pub(crate) fn key(&self) -> (String, String) {
        match self {
            Oversize::File { path, .. } => (path.clone(), "file".to_string()),
            Oversize::Fn { path, name, .. } => (path.clone(), format!("fn {name}")),
        }
    }
}

impl fmt::Display for Oversize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Oversize::File { path, lines } => write!(
                f,
                "{path}: file is {lines} lines outside its tests (limit {FILE_LIMIT})"
            ),
            Oversize::Fn {
                path,
                line,
                name,
                lines,
            } => write!(
                f,
                "{path}:{line}: fn {name} is {lines} lines (limit {FN_LIMIT})"
            ),
        }
    }
}

/// One file's measurements.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Measured {
    /// Lines outside test-only items.
    pub(crate) lines: usize,
    /// Every checked function: name (`Type::method` for methods), first line, lines.
    pub(crate) fns: Vec<(String, usize, usize)>,
    /// The reason given after [`LONG_BY_DESIGN`], when the file gives one.
    pub(crate) long_by_design: Option<String>,
}

/// Measures the file `text`, parsed as `ast`.
pub(crate) fn measure(text: &str, ast: &syn::File) -> Measured {
    let mut walk = Walk::default();
    walk.visit_file(ast);
    Measured {
        lines: text.lines().count().saturating_sub(walk.test_lines),
        fns: walk.fns,
        long_by_design: long_by_design(text),
    }
}

/// What in the file at `path` is over a limit.
pub(crate) fn oversizes(path: &str, text: &str, ast: &syn::File) -> Vec<Oversize> {
    let m = measure(text, ast);
    if m.long_by_design.is_some() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if m.lines > FILE_LIMIT {
        out.push(Oversize::File {
            path: path.to_string(),
            lines: m.lines,
        });
    }
    for (name, line, lines) in m.fns {
        if lines > FN_LIMIT {
            out.push(Oversize::Fn {
                path: path.to_string(),
                line,
                name,
                lines,
            });
        }
    }
    out
}

/// The reason on a `//! Long by design: …` line of the file's opening `//!` block.
fn long_by_design(text: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .take_while(|l| l.is_empty() || l.starts_with("//!"))
        .find_map(|l| l.strip_prefix(LONG_BY_DESIGN))
        .map(str::trim)
        .filter(|why| !why.is_empty())
        .map(str::to_string)
}

/// Collects function lengths and the lines of test-only items.
#[derive(Debug, Default)]
struct Walk {
    test_lines: usize,
    fns: Vec<(String, usize, usize)>,
    /// The type or trait whose items we are inside, for method names.
    owner: Vec<String>,
}

fn lines_of(span: proc_macro2::Span) -> usize {
    span.end().line + 1 - span.start().line
}

impl Walk {
    fn record(&mut self, name: String, sig: &syn::Signature, block: &syn::Block) {
        let start = sig.span().start().line;
        let end = block.span().end().line;
        self.fns.push((name, start, end + 1 - start));
    }

    fn method_name(&self, ident: &syn::Ident) -> String {
        match self.owner.last() {
            Some(owner) => format!("{owner}::{ident}"),
            None => ident.to_string(),
        }
    }
}

impl<'ast> Visit<'ast> for Walk {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        if is_test_only(item_attrs(i)) {
            self.test_lines += lines_of(i.span());
            return;
        }
        visit::visit_item(self, i);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.record(f.sig.ident.to_string(), &f.sig, &f.block);
        visit::visit_item_fn(self, f);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let owner = match &*i.self_ty {
            syn::Type::Path(p) => p
                .path
                .segments
                .last()
                .map_or_else(|| "_".to_string(), |s| s.ident.to_string()),
            _ => "_".to_string(),
        };
        self.owner.push(owner);
        visit::visit_item_impl(self, i);
        self.owner.pop();
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        self.owner.push(t.ident.to_string());
        visit::visit_item_trait(self, t);
        self.owner.pop();
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test_only(&f.attrs) {
            self.test_lines += lines_of(f.span());
            return;
        }
        self.record(self.method_name(&f.sig.ident), &f.sig, &f.block);
        visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.record(self.method_name(&f.sig.ident), &f.sig, block);
        }
        visit::visit_trait_item_fn(self, f);
    }
}

/// Runs the check over the parsed crates: known debt is printed, anything new over a
/// limit, or a debt entry that is no longer over, fails.
pub(crate) fn check(crates: &[CrateSources]) -> Result<()> {
    let mut found = Vec::new();
    let (mut n_files, mut n_fns, mut n_exempt) = (0, 0, 0);
    for c in crates {
        for f in &c.files {
            n_files += 1;
            let m = measure(&f.text, &f.ast);
            n_fns += m.fns.len();
            n_exempt += usize::from(m.long_by_design.is_some());
            found.extend(oversizes(&f.rel, &f.text, &f.ast));
        }
    }
    let findings: Vec<crate::debt::Finding> = found
        .iter()
        .map(|o| {
            let (path, what) = o.key();
            crate::debt::Finding {
                key: format!("{path}: {what}"),
                message: o.to_string(),
            }
        })
        .collect();
    let listed: Vec<(String, String)> = crate::debt::SIZES
        .iter()
        .map(|(path, what, plan)| (format!("{path}: {what}"), (*plan).to_string()))
        .collect();
    let settled = crate::debt::settle(&findings, &listed);
    settled.warn();
    if let Some(failure) = settled.failure(
        "sizes",
        "split it by concern, or say why it is long in a `//! Long by design: …` line",
    ) {
        bail!("{failure}");
    }
    crate::shell::say(&format!(
        "sizes: {n_files} files and {n_fns} functions checked ({n_exempt} long by design), {} known, to be split",
        settled.known.len()
    ));
    Ok(())
}

#[cfg(test)]
mod tests;
