//! The module-cycle check of `cargo xtask lint`: inside each crate, no two sibling
//! modules use each other, directly or around a circle, at any nesting level.
//!
//! The graph: a module depends on another when its production code names it by a path
//! that starts with `crate::`, `super::` or `self::`, in a `use` (groups and globs
//! expanded), in any path of code or types (`crate::a::b::f()`), or in a macro's
//! tokens (`format!("{}", crate::a::X)`, `$crate::…`), or in an attribute's arguments
//! (`#[arg(add = ArgValueCandidates::new(crate::complete::sessions))]`, and a string
//! that is a whole path: `#[serde(with = "crate::wire::hex")]`; doc text is not a
//! use). Items under any `#[cfg(…)]` other than one that requires `test` count: a
//! `#[cfg(target_os = "linux")] use crate::a::X;` is an edge on the build that has
//! it. The target is the longest
//! prefix of the path that is a module. Relative paths without such a prefix can only
//! name the module's own children (or other crates) and add no edge; visibility paths
//! (`pub(in crate::a)`) are not uses.
//!
//! Each dependency is collapsed to its two sides' children of their closest common
//! ancestor: `a::x` using `b::y` is the edge `a -> b` between the crate root's
//! children, `a::x` using `a::y` the edge `a::x -> a::y`. A module using an ancestor's
//! items (`super::*` in a child) or its own descendants is no sibling edge. Any cycle
//! among siblings fails, printed with one use site per edge. Test code (test files,
//! `#[cfg(test)]` items and modules, `#[test]` functions) is left out: a test may
//! reach anywhere, and no production build contains it.

use anyhow::{Result, bail};
use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use crate::source::{CrateSources, SourceFile, is_test_only, item_attrs};

/// A module path from the crate root; empty for the root.
pub(crate) type Module = Vec<String>;

/// A cycle among sibling modules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cycle {
    pub(crate) krate: String,
    /// Every module of the strongly connected set, sorted.
    pub(crate) members: Vec<Module>,
    /// One shortest circle through the first member, closed (first == last).
    pub(crate) path: Vec<Module>,
    /// One use site per edge of `path`: `file:line: the path`.
    pub(crate) sites: Vec<String>,
}

fn show(m: &[String]) -> String {
    if m.is_empty() {
        "crate".to_string()
    } else {
        m.join("::")
    }
}

impl Cycle {
    /// The key a debt entry names: the crate and the sorted members.
    pub(crate) fn key(&self) -> String {
        debt_key(&self.krate, self.members.iter().map(|m| show(m)))
    }
}

/// `herd-core: {a, b}`, the form cycle keys take.
pub(crate) fn debt_key(krate: &str, members: impl IntoIterator<Item = String>) -> String {
    let mut members: Vec<String> = members.into_iter().collect();
    members.sort();
    format!("{krate}: {{{}}}", members.join(", "))
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path: Vec<String> = self.path.iter().map(|m| show(m)).collect();
        write!(f, "{}: {}", self.krate, path.join(" -> "))?;
        if self.members.len() + 1 > self.path.len() {
            let all: Vec<String> = self.members.iter().map(|m| show(m)).collect();
            write!(f, " (within a knot of {})", all.join(", "))?;
        }
        for (pair, site) in path.windows(2).zip(&self.sites) {
            write!(f, "\n      {} -> {}: {site}", pair[0], pair[1])?;
        }
        Ok(())
    }
}

/// One use of a module path: the module whose code it is in, the path made absolute,
/// and where.
#[derive(Debug)]
struct Reference {
    from: Module,
    target: Vec<String>,
    site: String,
}

/// Walks one file: its inline modules and every `crate::`/`super::`/`self::` path.
#[derive(Debug)]
struct Refs<'f> {
    rel: &'f str,
    stack: Module,
    modules: Vec<Module>,
    refs: Vec<Reference>,
}

impl Refs<'_> {
    fn push(&mut self, segments: &[String], line: usize) {
        let Some(target) = absolute(&self.stack, segments) else {
            return;
        };
        self.refs.push(Reference {
            from: self.stack.clone(),
            target,
            site: format!("{}:{line}: {}", self.rel, segments.join("::")),
        });
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let line = n.ident.span().start().line;
                if n.ident == "self" {
                    self.push(&prefix.clone(), line);
                } else {
                    prefix.push(n.ident.to_string());
                    self.push(&prefix.clone(), line);
                    prefix.pop();
                }
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.push(&prefix.clone(), r.ident.span().start().line);
                prefix.pop();
            }
            syn::UseTree::Glob(g) => self.push(&prefix.clone(), g.star_token.span.start().line),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// Finds `crate :: a :: b` runs in macro tokens, at every group depth.
    fn tokens(&mut self, tokens: TokenStream) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tts.len() {
            match &tts[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if is_anchor(&id.to_string()) => {
                    let mut segments = vec![id.to_string()];
                    let mut j = i;
                    while is_path_sep(&tts, j + 1) {
                        let Some(TokenTree::Ident(next)) = tts.get(j + 3) else {
                            break;
                        };
                        segments.push(next.to_string());
                        j += 3;
                    }
                    if segments.len() > 1 {
                        self.push(&segments, id.span().start().line);
                    }
                    i = j;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

fn is_anchor(ident: &str) -> bool {
    matches!(ident, "crate" | "super" | "self")
}

/// Whether `tts[at..at + 2]` is `::`.
fn is_path_sep(tts: &[TokenTree], at: usize) -> bool {
    let colon = |i: usize| matches!(tts.get(i), Some(TokenTree::Punct(p)) if p.as_char() == ':');
    matches!(tts.get(at), Some(TokenTree::Punct(p)) if p.as_char() == ':' && p.spacing() == proc_macro2::Spacing::Joint)
        && colon(at + 1)
}

/// `segments` (starting `crate`, `super` or `self`) as seen from module `from`, made
/// absolute; `None` for paths anchored elsewhere, or a `super` above the root.
fn absolute(from: &[String], segments: &[String]) -> Option<Vec<String>> {
    let first = segments.first()?;
    if !is_anchor(first) {
        return None;
    }
    let mut out: Vec<String>;
    let mut i = 0;
    if first == "crate" {
        out = Vec::new();
        i = 1;
    } else {
        out = from.to_vec();
        while let Some(s) = segments.get(i).filter(|s| *s == "super" || *s == "self") {
            if s == "super" {
                out.pop()?;
            }
            i += 1;
        }
    }
    out.extend(segments[i..].iter().cloned());
    Some(out)
}

impl<'ast> Visit<'ast> for Refs<'_> {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        if !is_test_only(item_attrs(i)) {
            visit::visit_item(self, i);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if let Some((_, items)) = &m.content {
            self.stack.push(m.ident.to_string());
            self.modules.push(self.stack.clone());
            for item in items {
                self.visit_item(item);
            }
            self.stack.pop();
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if u.leading_colon.is_none() {
            self.use_tree(&mut Vec::new(), &u.tree);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() {
            let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            if segments.len() > 1 {
                self.push(&segments, p.span().start().line);
            }
        }
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        visit::visit_macro(self, m);
    }

    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        // Doc text names modules for readers, not for the compiler.
        if a.path().is_ident("doc") {
            return;
        }
        if let syn::Meta::List(list) = &a.meta {
            self.attribute_tokens(list.tokens.clone());
        }
        visit::visit_attribute(self, a);
    }
}

impl Refs<'_> {
    /// The paths an attribute's arguments name: as tokens
    /// (`#[arg(add = ArgValueCandidates::new(crate::complete::sessions))]`) and as
    /// string literals that are a whole path (`#[serde(with = "crate::wire::hex")]`).
    fn attribute_tokens(&mut self, tokens: TokenStream) {
        self.tokens(tokens.clone());
        for tt in tokens {
            match tt {
                TokenTree::Group(g) => self.attribute_tokens(g.stream()),
                TokenTree::Literal(lit) => {
                    let line = lit.span().start().line;
                    if let Ok(syn::Lit::Str(s)) =
                        syn::parse2::<syn::Lit>(TokenStream::from(TokenTree::Literal(lit)))
                        && let Ok(path) = syn::parse_str::<syn::Path>(&s.value())
                        && path.leading_colon.is_none()
                    {
                        let segments: Vec<String> =
                            path.segments.iter().map(|s| s.ident.to_string()).collect();
                        if segments.len() > 1 {
                            self.push(&segments, line);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// The sibling edges of one crate: `(from, to)` → the first use site seen.
pub(crate) fn sibling_edges(files: &[SourceFile]) -> BTreeMap<(Module, Module), String> {
    let mut modules: BTreeSet<Module> = BTreeSet::from([Vec::new()]);
    let mut refs = Vec::new();
    for f in files {
        let mut walk = Refs {
            rel: &f.rel,
            stack: f.module.clone(),
            modules: Vec::new(),
            refs: Vec::new(),
        };
        walk.visit_file(&f.ast);
        modules.insert(f.module.clone());
        modules.extend(walk.modules);
        refs.extend(walk.refs);
    }
    let mut edges = BTreeMap::new();
    for r in refs {
        let to = (0..=r.target.len())
            .rev()
            .map(|n| &r.target[..n])
            .find(|prefix| modules.contains(*prefix))
            .unwrap_or(&[]);
        let common = r.from.iter().zip(to).take_while(|(a, b)| a == b).count();
        if common == r.from.len() || common == to.len() {
            // The same module, an ancestor or a descendant: not a sibling edge.
            continue;
        }
        let key = (r.from[..=common].to_vec(), to[..=common].to_vec());
        edges.entry(key).or_insert(r.site);
    }
    edges
}

/// Every cycle among sibling modules of the crate `krate`.
pub(crate) fn cycles(krate: &str, files: &[SourceFile]) -> Vec<Cycle> {
    let edges = sibling_edges(files);
    let mut next: BTreeMap<&Module, Vec<&Module>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
        next.entry(to).or_default();
    }
    let mut out = Vec::new();
    for members in strongly_connected(&next) {
        if members.len() < 2 {
            continue;
        }
        let path = shortest_circle(&next, &members);
        let sites = path
            .windows(2)
            .map(|w| edges[&(w[0].clone(), w[1].clone())].clone())
            .collect();
        out.push(Cycle {
            krate: krate.to_string(),
            members: members.into_iter().cloned().collect(),
            path,
            sites,
        });
    }
    out
}

/// Tarjan's strongly connected components, each sorted, in a stable order.
fn strongly_connected<'m>(next: &BTreeMap<&'m Module, Vec<&'m Module>>) -> Vec<Vec<&'m Module>> {
    #[derive(Debug, Default)]
    struct State<'m> {
        index: BTreeMap<&'m Module, usize>,
        low: BTreeMap<&'m Module, usize>,
        stack: Vec<&'m Module>,
        on_stack: BTreeSet<&'m Module>,
        out: Vec<Vec<&'m Module>>,
    }
    fn connect<'m>(v: &'m Module, next: &BTreeMap<&'m Module, Vec<&'m Module>>, s: &mut State<'m>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in next.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                connect(w, next, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort();
            s.out.push(component);
        }
    }
    let mut s = State::default();
    for &v in next.keys() {
        if !s.index.contains_key(v) {
            connect(v, next, &mut s);
        }
    }
    s.out.sort();
    s.out
}

/// The shortest circle from the first member back to itself inside `members`.
fn shortest_circle(next: &BTreeMap<&Module, Vec<&Module>>, members: &[&Module]) -> Vec<Module> {
    let start = members[0];
    let inside: BTreeSet<&Module> = members.iter().copied().collect();
    let mut came_from: BTreeMap<&Module, &Module> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in next.get(v).into_iter().flatten() {
            if w == start {
                let mut path = vec![start.clone(), v.clone()];
                let mut at = v;
                while at != start {
                    at = came_from[at];
                    path.push(at.clone());
                }
                path.reverse();
                return path;
            }
            if inside.contains(w) && !came_from.contains_key(w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    // A strongly connected set of two or more always has a circle through each member.
    unreachable!("no circle through {start:?} inside its strongly connected set")
}

/// Runs the check over the parsed crates: known cycles are printed, a new cycle, or a
/// listed one that is gone or changed, fails.
pub(crate) fn check(crates: &[CrateSources]) -> Result<()> {
    let mut found = Vec::new();
    for c in crates {
        found.extend(cycles(c.name, &c.files));
    }
    let findings: Vec<crate::debt::Finding> = found
        .iter()
        .map(|c| crate::debt::Finding {
            key: c.key(),
            message: c.to_string(),
        })
        .collect();
    let listed: Vec<(String, String)> = crate::debt::CYCLES
        .iter()
        .map(|(krate, members, plan)| {
            (
                debt_key(krate, members.iter().map(|m| (*m).to_string())),
                (*plan).to_string(),
            )
        })
        .collect();
    let settled = crate::debt::settle(&findings, &listed);
    settled.warn();
    if let Some(failure) = settled.failure(
        "module cycles",
        "break the circle (move what both sides need into a module below them, or pass it in)",
    ) {
        bail!("{failure}");
    }
    crate::shell::say(&format!(
        "module cycles: {} crates checked, {} known, to be split",
        crates.len(),
        settled.known.len()
    ));
    Ok(())
}

#[cfg(test)]
mod tests;
