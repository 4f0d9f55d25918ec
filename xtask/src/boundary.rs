//! The boundary checks of `cargo xtask lint`: some names may appear in production
//! code only in one place.
//!
//! - **The platform boundary**: a Linux-only mechanism (signalfd, `ppoll`, `prctl`,
//!   raw syscalls through `libc::SYS_*`, pidfds, `close_range`, `clone3` and its
//!   flags, `O_PATH`, the pipe-size `fcntl`s, glibc's errno location, a socket's
//!   peer credentials (`SO_PEERCRED`, nix's `PeerCredentials`), paths under
//!   `/proc` or `/sys/fs/cgroup` and a cgroup's own files such as `cgroup.procs`) is
//!   named only inside a crate's `sys` module (`src/sys.rs` and the files under
//!   `src/sys/`), so a port to another kernel has one place per crate to start from
//!   (`docs/porting.md`). The distinctive names ([`LINUX_NAMES`], `SYS_*`) count in
//!   any position of a path, so a glob import or a renamed module does not hide them.
//! - **herd-core's and the daemon's mutexes**: `std::sync::Mutex` and
//!   `tokio::sync::Mutex` (and either's `RwLock`) only in `core/src/lock_order.rs`;
//!   every other mutex of herd-core and of herd-cli's daemon ([`daemon_file`]:
//!   `cli/src/daemon.rs`, `cli/src/daemon/`, `cli/src/daemon_log.rs`) is
//!   `lock_order::Mutex` or `lock_order::AsyncMutex`, ranked in its type and checked in
//!   debug builds.
//! - **The leaf crates' mutexes** (herd-persistence, herd-hooks, which cannot name the
//!   ranks): only in the files of [`INNERMOST`], each an innermost lock whose reason
//!   `lock_order.rs` gives; a mutex in any other file of theirs fails.
//! - **herd's own environment variables** are spelled once: the string literal of a
//!   `HERD_…` name appears in one production file of the workspace, the one that
//!   defines its constant (`HERD_SUPERVISED_CHILD`: `guards/src/host.rs`), and every
//!   other place uses the constant. A clap `env = "HERD_…"` attribute is the
//!   argument's declaration and does not count.
//!
//! What counts: paths in `use` items, code, types and macro tokens (`libc::SYS_clone3`),
//! and string literals, in code and in macro arguments (`format!("/proc/{pid}/stat")`).
//! Comments and doc text do not. Test code is exempt (test files, `#[cfg(test)]`
//! items): a test may read `/proc` to check what production code did. Files outside
//! the boundary that predated the check were listed in [`KNOWN`] and printed as
//! warnings until they were moved; the list is empty now and only shrinks, so any
//! file outside a `sys` module that names a Linux-only mechanism fails.

use anyhow::{Result, bail};
use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

use crate::source::{CrateSources, SourceFile, is_test_only, item_attrs};

/// One rule: what it refuses, and which files may name it.
#[derive(Debug)]
pub(crate) struct Rule {
    /// Short name, printed with each finding.
    pub(crate) name: &'static str,
    /// Whether a `::`-joined path breaks the rule.
    pub(crate) path: fn(&str) -> bool,
    /// Whether a string literal's value breaks the rule.
    pub(crate) literal: fn(&str) -> bool,
    /// Whether the file (path from the workspace root) may name it.
    pub(crate) allowed: fn(&str) -> bool,
    /// What to do instead.
    pub(crate) fix: &'static str,
}

/// Whether `rel` is inside its crate's `sys` module.
fn in_sys(rel: &str) -> bool {
    rel.split_once("/src/")
        .is_some_and(|(_, in_src)| in_src == "sys.rs" || in_src.starts_with("sys/"))
}

/// Names that mean a Linux-only mechanism wherever they stand in a path: after a
/// glob import (`use nix::sys::*; signalfd::SignalFd`), a rename of the module, or
/// through another type (`FcntlArg::F_SETPIPE_SZ`, `OFlag::O_PATH`).
const LINUX_NAMES: &[&str] = &[
    "signalfd",
    "SignalFd",
    "SfdFlags",
    "ppoll",
    "prctl",
    "close_range",
    "clone3",
    "pidfd_open",
    "pidfd_send_signal",
    "O_PATH",
    "F_SETPIPE_SZ",
    "F_GETPIPE_SZ",
    "__errno_location",
    "PeerCredentials",
    "SO_PEERCRED",
];

fn linux_path(p: &str) -> bool {
    p.split("::")
        .any(|segment| LINUX_NAMES.contains(&segment) || segment.starts_with("SYS_"))
        || p == "libc::syscall"
        || p.starts_with("libc::PR_")
        || p.starts_with("libc::CLONE_")
}

/// Paths of the kernel's process table and cgroup file systems, and the names of a
/// cgroup's own files (`cgroup.procs`, `cgroup.kill`, …) joined onto a directory.
fn linux_literal(s: &str) -> bool {
    s == "/proc"
        || s.starts_with("/proc/")
        || s.starts_with("/sys/fs/cgroup")
        || s.strip_prefix("cgroup.").is_some_and(|rest| {
            !rest.is_empty() && rest.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        })
}

fn std_mutex(p: &str) -> bool {
    matches!(
        p,
        "std::sync::Mutex"
            | "std::sync::MutexGuard"
            | "std::sync::Mutex::new"
            | "std::sync::RwLock"
            | "std::sync::RwLock::new"
            | "tokio::sync::Mutex"
            | "tokio::sync::MutexGuard"
            | "tokio::sync::OwnedMutexGuard"
            | "tokio::sync::Mutex::new"
            | "tokio::sync::RwLock"
            | "tokio::sync::RwLock::new"
    )
}

/// Whether `rel` is a file of the daemon's in herd-cli (its mutexes are ranked).
pub(crate) fn daemon_file(rel: &str) -> bool {
    rel == "cli/src/daemon.rs"
        || rel.starts_with("cli/src/daemon/")
        || rel == "cli/src/daemon_log.rs"
}

/// The leaf crates' files that hold a mutex, each innermost (its reason is in
/// `core/src/lock_order.rs`'s module doc); a new one fails until it is listed there and
/// here.
pub(crate) const INNERMOST: &[&str] = &[
    "persistence/src/lazy_db.rs",
    "persistence/src/checkpoint.rs",
    "persistence/src/receipts.rs",
    "persistence/src/running.rs",
    "persistence/src/queue.rs",
    "persistence/src/memory.rs",
    "persistence/src/stores.rs",
    "hooks/src/pipeline.rs",
    "hooks/src/loader/start.rs",
];

/// Whether `rel` is in a leaf crate the daemon runs whose mutexes cannot be ranked.
fn leaf_crate_file(rel: &str) -> bool {
    (rel.starts_with("persistence/src/") || rel.starts_with("hooks/src/"))
        && !rel.starts_with("hooks/abi/")
}

fn never(_: &str) -> bool {
    false
}

/// Whether a string literal is the name of one of herd's environment variables.
fn own_env_name(s: &str) -> bool {
    s.strip_prefix("HERD_").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    })
}

/// The rules, in the order their findings are printed.
pub(crate) const RULES: &[Rule] = &[
    Rule {
        name: "platform boundary",
        path: linux_path,
        literal: linux_literal,
        allowed: in_sys,
        fix: "move the Linux-only call into the crate's `sys` module (or a thin function there) and call that",
    },
    Rule {
        name: "ranked mutex",
        path: std_mutex,
        literal: never,
        allowed: |rel| {
            !(rel.starts_with("core/src/") || daemon_file(rel)) || rel == "core/src/lock_order.rs"
        },
        fix: "use lock_order::Mutex (blocking) or lock_order::AsyncMutex (held across .await) with its rank (herd-core's crate::lock_order; the daemon's herd_core::lock_order, its ranks in lock_order::rank; debug builds check the order); lock_order::foreign for another crate's trait",
    },
    Rule {
        name: "innermost mutex",
        path: std_mutex,
        literal: never,
        allowed: |rel| !leaf_crate_file(rel) || INNERMOST.contains(&rel),
        fix: "a leaf crate's mutex must be innermost (taken and released inside one call, calling nothing of herd-core meanwhile): say why in core/src/lock_order.rs's module doc and list the file in INNERMOST in xtask/src/boundary.rs",
    },
];

/// Files outside the platform boundary that name a Linux-only mechanism today, to be
/// moved behind their crate's `sys` module. Empty: every crate's Linux-only calls sit
/// in its `sys`, and a new one anywhere else fails the lint.
pub(crate) const KNOWN: &[&str] = &[];

/// One name found in production code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) rule: &'static str,
    pub(crate) rel: String,
    pub(crate) line: usize,
    pub(crate) what: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {} ({})",
            self.rel, self.line, self.what, self.rule
        )
    }
}

/// Walks one file's production code for paths and string literals.
#[derive(Debug, Default)]
struct Names {
    /// `(line, path or "literal")`.
    paths: Vec<(usize, String)>,
    literals: Vec<(usize, String)>,
}

impl Names {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                if n.ident != "self" {
                    full.push(n.ident.to_string());
                }
                self.paths
                    .push((n.ident.span().start().line, full.join("::")));
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                self.paths
                    .push((r.ident.span().start().line, full.join("::")));
            }
            syn::UseTree::Glob(g) => {
                let line = g.star_token.spans[0].start().line;
                self.paths.push((line, prefix.join("::")));
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// `a :: b :: c` runs and string literals in macro tokens, at every depth.
    fn tokens(&mut self, tokens: TokenStream) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tts.len() {
            match &tts[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Literal(lit) => {
                    if let Ok(syn::Lit::Str(s)) =
                        syn::parse2::<syn::Lit>(TokenStream::from(TokenTree::Literal(lit.clone())))
                    {
                        self.literals.push((lit.span().start().line, s.value()));
                    }
                }
                TokenTree::Ident(id) => {
                    let mut segments = vec![id.to_string()];
                    let mut j = i;
                    while matches!(tts.get(j + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':')
                        && matches!(tts.get(j + 2), Some(TokenTree::Punct(p)) if p.as_char() == ':')
                    {
                        let Some(TokenTree::Ident(next)) = tts.get(j + 3) else {
                            break;
                        };
                        segments.push(next.to_string());
                        j += 3;
                    }
                    if segments.len() > 1 {
                        self.paths
                            .push((id.span().start().line, segments.join("::")));
                    }
                    i = j;
                }
                TokenTree::Punct(_) => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Names {
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

    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        use syn::spanned::Spanned;
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.paths
            .push((p.span().start().line, segments.join("::")));
        visit::visit_path(self, p);
    }

    fn visit_lit_str(&mut self, s: &'ast syn::LitStr) {
        self.literals.push((s.span().start().line, s.value()));
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        visit::visit_macro(self, m);
    }
}

/// Every break of a rule in one file.
pub(crate) fn findings(file: &SourceFile) -> Vec<Finding> {
    let mut names = Names::default();
    names.visit_file(&file.ast);
    let mut out = Vec::new();
    for rule in RULES {
        if (rule.allowed)(&file.rel) {
            continue;
        }
        let paths = names.paths.iter().filter(|(_, p)| (rule.path)(p));
        let literals = names.literals.iter().filter(|(_, s)| (rule.literal)(s));
        for (line, what) in paths.chain(literals) {
            out.push(Finding {
                rule: rule.name,
                rel: file.rel.clone(),
                line: *line,
                what: what.clone(),
            });
        }
    }
    out.sort_by(|a, b| (&a.rel, a.line, &a.what).cmp(&(&b.rel, b.line, &b.what)));
    out.dedup();
    out
}

/// Each `HERD_…` name whose string literal appears in more than one production file,
/// with the files.
pub(crate) fn env_names_spelled_twice(crates: &[CrateSources]) -> Vec<String> {
    let mut files_of: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        std::collections::BTreeMap::new();
    for file in crates.iter().flat_map(|c| &c.files) {
        let mut names = Names::default();
        names.visit_file(&file.ast);
        for (_, literal) in names.literals {
            if own_env_name(&literal) {
                files_of
                    .entry(literal)
                    .or_default()
                    .insert(file.rel.clone());
            }
        }
    }
    files_of
        .into_iter()
        .filter(|(_, files)| files.len() > 1)
        .map(|(name, files)| {
            let files: Vec<String> = files.into_iter().collect();
            format!(
                "{name} is spelled in {} (own env name): define one constant beside the code that reads it and use it everywhere",
                files.join(", ")
            )
        })
        .collect()
}

/// Runs the checks over the parsed crates. A platform-boundary finding in a file of
/// [`KNOWN`] is a warning; anything else fails, and so does a listed file with none.
pub(crate) fn check(crates: &[CrateSources]) -> Result<()> {
    let mut failures = Vec::new();
    let mut known_files = std::collections::BTreeSet::new();
    for file in crates.iter().flat_map(|c| &c.files) {
        for f in findings(file) {
            if f.rule == "platform boundary" && KNOWN.contains(&f.rel.as_str()) {
                known_files.insert(f.rel.clone());
                continue;
            }
            let fix = RULES
                .iter()
                .find(|r| r.name == f.rule)
                .map_or("", |r| r.fix);
            failures.push(format!("{f}: {fix}"));
        }
    }
    failures.extend(env_names_spelled_twice(crates));
    for rel in KNOWN {
        if !known_files.contains(*rel) {
            failures.push(format!(
                "{rel} no longer names a Linux-only mechanism: remove it from KNOWN in xtask/src/boundary.rs"
            ));
        }
    }
    for rel in &known_files {
        crate::shell::say(&format!(
            "warning: known, to be moved behind its crate's sys module: {rel}"
        ));
    }
    if !failures.is_empty() {
        bail!("boundary check failed:\n  {}", failures.join("\n  "));
    }
    crate::shell::say(&format!(
        "boundaries: platform, ranked mutexes, env names spelled once; {} files known outside the platform boundary",
        known_files.len()
    ));
    Ok(())
}

#[cfg(test)]
mod tests;
