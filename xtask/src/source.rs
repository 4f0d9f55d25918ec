//! The production sources of the workspace's library and binary crates, parsed once
//! with `syn` for the size and module-cycle checks.
//!
//! A crate's production sources are the `.rs` files under its `src/` (found by the
//! shared walker) that are not test code. Test code is: a file named `tests.rs`, a
//! file under a `tests/` or `benches/` directory, and the file (or directory) of a
//! module declared `#[cfg(test)] mod name;`. Inside a production file, items marked
//! `#[cfg(test)]` (or `#[test]`) are test code too; [`is_test_only`] says which.
//!
//! A file's module path follows from where it sits: `src/lib.rs`, `src/main.rs` and
//! every binary root named in the crate's `Cargo.toml` (`path = "src/…"`) are the crate
//! root, `src/a/b.rs` (or `src/a/b/mod.rs`) is `a::b`. A production `mod` with a
//! `#[path]` attribute is refused: its file would sit where the checks place another
//! module, so its uses would be counted against the wrong module (tests may use one).

use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use syn::punctuated::Punctuated;
use syn::{Attribute, Item, Meta, Token};

/// The crates checked: package name and folder. Examples, plugins and the test and
/// maintainer crates are not.
pub(crate) const CHECKED: &[(&str, &str)] = &[
    ("herd-pty", "pty"),
    ("herd-guards", "guards"),
    ("herd-persistence", "persistence"),
    ("herd-protocol", "protocol"),
    ("herd-plugin-abi", "hooks/abi"),
    ("herd-hooks", "hooks"),
    ("herd-core", "core"),
    ("herd-cli", "cli"),
];

/// One production source file.
pub(crate) struct SourceFile {
    /// Path from the workspace root, `/`-separated (`core/src/registry.rs`).
    pub(crate) rel: String,
    /// The module the file is, from the crate root (`["registry", "durable"]`).
    pub(crate) module: Vec<String>,
    pub(crate) text: String,
    pub(crate) ast: syn::File,
}

impl std::fmt::Debug for SourceFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceFile")
            .field("rel", &self.rel)
            .field("module", &self.module)
            .finish_non_exhaustive()
    }
}

/// One crate's production sources.
#[derive(Debug)]
pub(crate) struct CrateSources {
    pub(crate) name: &'static str,
    pub(crate) files: Vec<SourceFile>,
}

/// Parses every checked crate's production sources under the workspace `root`.
pub(crate) fn load_workspace(root: &Path) -> Result<Vec<CrateSources>> {
    CHECKED
        .iter()
        .map(|(name, dir)| {
            Ok(CrateSources {
                name,
                files: load_crate(root, dir)?,
            })
        })
        .collect()
}

/// Parses the production sources of the crate in folder `dir`.
fn load_crate(root: &Path, dir: &str) -> Result<Vec<SourceFile>> {
    let src = root.join(dir).join("src");
    let manifest = fs::read_to_string(root.join(dir).join("Cargo.toml")).unwrap_or_default();
    let roots = crate_roots(&manifest);
    let mut files = Vec::new();
    for path in crate::walk::files_with_ext(&src, "rs") {
        let in_src = crate::walk::rel(&src, &path);
        let Some(module) = module_of(&in_src, &roots) else {
            continue;
        };
        let rel = crate::walk::rel(root, &path);
        let text =
            fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let ast = syn::parse_file(&text).with_context(|| format!("cannot parse {rel}"))?;
        if let Some(name) = path_attributed_module(&ast.items) {
            anyhow::bail!(
                "{rel}: `mod {name}` has a #[path] attribute: move the file to where its module name puts it (the size and cycle checks place files by where they sit)"
            );
        }
        files.push(SourceFile {
            rel,
            module,
            text,
            ast,
        });
    }
    Ok(drop_test_modules(files))
}

/// The crate-root files, relative to `src/`: `lib.rs`, `main.rs` and every
/// `path = "src/…"` a target of the manifest names.
pub(crate) fn crate_roots(manifest: &str) -> BTreeSet<String> {
    let mut roots: BTreeSet<String> = ["lib.rs", "main.rs"].map(String::from).into();
    for line in manifest.lines() {
        let Some(value) = line.trim().strip_prefix("path") else {
            continue;
        };
        let value = value.trim_start().trim_start_matches('=').trim();
        if let Some(p) = value.trim_matches('"').strip_prefix("src/") {
            roots.insert(p.to_string());
        }
    }
    roots
}

/// The module path of the file at `in_src` (relative to `src/`), or `None` when the
/// path alone says it is test code.
pub(crate) fn module_of(in_src: &str, roots: &BTreeSet<String>) -> Option<Vec<String>> {
    let parts: Vec<&str> = in_src.split('/').collect();
    let (last, dirs) = parts.split_last()?;
    if *last == "tests.rs" || dirs.iter().any(|d| *d == "tests" || *d == "benches") {
        return None;
    }
    if roots.contains(in_src) {
        return Some(Vec::new());
    }
    let mut module: Vec<String> = dirs.iter().map(|d| (*d).to_string()).collect();
    let stem = last.strip_suffix(".rs")?;
    if stem != "mod" {
        module.push(stem.to_string());
    }
    Some(module)
}

/// The name of the first non-test `mod` among `items` (inline modules searched too)
/// that carries a `#[path]` attribute.
pub(crate) fn path_attributed_module(items: &[Item]) -> Option<String> {
    items.iter().find_map(|item| {
        let Item::Mod(m) = item else {
            return None;
        };
        if is_test_only(&m.attrs) {
            return None;
        }
        if m.attrs.iter().any(|a| a.path().is_ident("path")) {
            return Some(m.ident.to_string());
        }
        m.content
            .as_ref()
            .and_then(|(_, inner)| path_attributed_module(inner))
    })
}

/// Removes the files of modules some file declares `#[cfg(test)] mod name;`.
fn drop_test_modules(files: Vec<SourceFile>) -> Vec<SourceFile> {
    let mut test_modules: Vec<Vec<String>> = Vec::new();
    for f in &files {
        for item in &f.ast.items {
            if let Item::Mod(m) = item
                && m.content.is_none()
                && is_test_only(&m.attrs)
            {
                let mut path = f.module.clone();
                path.push(m.ident.to_string());
                test_modules.push(path);
            }
        }
    }
    files
        .into_iter()
        .filter(|f| !test_modules.iter().any(|t| f.module.starts_with(t)))
        .collect()
}

/// Whether these attributes make an item test-only: `#[test]` (or any attribute path
/// ending in `test`, such as `#[tokio::test]`), or a `#[cfg(…)]` that requires `test`
/// (`cfg(test)`, `cfg(all(test, unix))`).
pub(crate) fn is_test_only(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        let path = a.path();
        if path.segments.last().is_some_and(|s| s.ident == "test") {
            return true;
        }
        path.is_ident("cfg")
            && a.parse_args::<Meta>()
                .is_ok_and(|meta| requires_test(&meta))
    })
}

/// Whether a cfg predicate can only hold in a test build.
fn requires_test(meta: &Meta) -> bool {
    match meta {
        Meta::Path(p) => p.is_ident("test"),
        Meta::List(list) => {
            let Ok(nested) = list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
            else {
                return false;
            };
            if list.path.is_ident("all") {
                nested.iter().any(requires_test)
            } else if list.path.is_ident("any") {
                !nested.is_empty() && nested.iter().all(requires_test)
            } else {
                false
            }
        }
        Meta::NameValue(_) => false,
    }
}

/// The attributes of an item, for the kinds that carry them.
pub(crate) fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

#[cfg(test)]
mod tests;
