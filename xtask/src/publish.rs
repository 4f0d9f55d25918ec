//! Which workspace crates are published, in what order, and whether their publish
//! metadata is complete.
//!
//! herd's libraries are meant to be taken one at a time by hosts and plugin authors
//! outside this repository, so every library crate and the binary crate go to the
//! registry; tests, xtask, the test plugins and the example plugin (a template to
//! copy, not a dependency) never do. [`PUBLISHED`] is that decision, written once: a
//! workspace package not in it must say `publish = false`, and one in it must not.
//!
//! The check reads `cargo metadata --no-deps` (no network) and holds every published
//! crate to what the registry and docs.rs need and what a reader of its page expects:
//! description, license, repository, a readme file that exists, 1 to 5 valid keywords,
//! 1 to 5 known category slugs, `rust-version`, `[package.metadata.docs.rs]`. Every
//! normal or build dependency on a workspace crate must carry a version equal to that
//! crate's own (the `version` beside the `path` in the root `[workspace.dependencies]`),
//! because the packaged manifest keeps only the version; and it must point at a
//! published crate, or the packaged crate could never build from the registry.
//! Dev-dependencies are exempt: cargo drops path-only ones when packaging.
//!
//! [`order`] sorts the published crates so that each comes after the crates it
//! depends on, the order `cargo xtask release` lists and a real publish uploads them.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

/// The crates that go to the registry. Every other workspace package is
/// `publish = false`.
pub(crate) const PUBLISHED: &[&str] = &[
    "herd-plugin-abi",
    "herd-pty",
    "herd-guards",
    "herd-persistence",
    "herd-protocol",
    "herd-hooks",
    "herd-core",
    "herd-cli",
];

/// crates.io's category slugs (<https://crates.io/category_slugs>); the registry
/// rejects any other.
const CATEGORY_SLUGS: &[&str] = &[
    "accessibility",
    "aerospace",
    "aerospace::drones",
    "aerospace::protocols",
    "aerospace::simulation",
    "aerospace::space-protocols",
    "aerospace::unmanned-aerial-vehicles",
    "algorithms",
    "api-bindings",
    "asynchronous",
    "authentication",
    "automotive",
    "caching",
    "command-line-interface",
    "command-line-utilities",
    "compilers",
    "compression",
    "computer-vision",
    "concurrency",
    "config",
    "cryptography",
    "cryptography::cryptocurrencies",
    "data-structures",
    "database",
    "database-implementations",
    "date-and-time",
    "development-tools",
    "development-tools::build-utils",
    "development-tools::cargo-plugins",
    "development-tools::debugging",
    "development-tools::ffi",
    "development-tools::procedural-macro-helpers",
    "development-tools::profiling",
    "development-tools::testing",
    "email",
    "embedded",
    "emulators",
    "encoding",
    "external-ffi-bindings",
    "filesystem",
    "finance",
    "game-development",
    "game-engines",
    "games",
    "graphics",
    "gui",
    "hardware-support",
    "internationalization",
    "localization",
    "mathematics",
    "memory-management",
    "multimedia",
    "multimedia::audio",
    "multimedia::encoding",
    "multimedia::images",
    "multimedia::video",
    "network-programming",
    "no-std",
    "no-std::no-alloc",
    "os",
    "os::android-apis",
    "os::freebsd-apis",
    "os::linux-apis",
    "os::macos-apis",
    "os::unix-apis",
    "os::windows-apis",
    "parser-implementations",
    "parsing",
    "rendering",
    "rendering::data-formats",
    "rendering::engine",
    "rendering::graphics-api",
    "rust-patterns",
    "science",
    "science::bioinformatics",
    "science::geo",
    "science::neuroscience",
    "science::robotics",
    "simulation",
    "template-engine",
    "text-editors",
    "text-processing",
    "value-formatting",
    "virtualization",
    "visualization",
    "wasm",
    "web-programming",
    "web-programming::http-client",
    "web-programming::http-server",
    "web-programming::websocket",
];

/// The registry's limits on keywords and categories.
const MAX_KEYWORDS: usize = 5;
const MAX_KEYWORD_CHARS: usize = 20;
const MAX_CATEGORIES: usize = 5;

/// One workspace package, as far as publishing is concerned.
#[derive(Debug, Clone, Default)]
pub(crate) struct Crate {
    pub(crate) name: String,
    pub(crate) version: String,
    /// `false` for `publish = false` (cargo metadata's empty `publish` list).
    pub(crate) publishable: bool,
    pub(crate) description: Option<String>,
    pub(crate) license: Option<String>,
    pub(crate) repository: Option<String>,
    /// The readme as the manifest names it, and whether that file exists.
    pub(crate) readme: Option<(String, bool)>,
    pub(crate) keywords: Vec<String>,
    pub(crate) categories: Vec<String>,
    pub(crate) rust_version: Option<String>,
    pub(crate) has_docs_rs: bool,
    /// Normal and build dependencies on workspace packages, with their version
    /// requirement as cargo metadata spells it (`*` when the manifest gave none).
    pub(crate) internal: Vec<(String, String)>,
}

/// Something that would stop a crate from publishing, or make its page untrue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// A package outside [`PUBLISHED`] that does not say `publish = false`.
    ShouldNotPublish { name: String },
    /// A package in [`PUBLISHED`] that says `publish = false`.
    ShouldPublish { name: String },
    /// A field the registry or docs.rs needs is missing or empty.
    Missing { name: String, field: &'static str },
    /// The manifest names a readme that is not there.
    ReadmeAbsent { name: String, path: String },
    /// A keyword the registry refuses, or too many of them.
    BadKeywords { name: String, why: String },
    /// A category that is not a crates.io slug, or too many of them.
    BadCategories { name: String, why: String },
    /// A dependency on a workspace crate whose version does not match that crate.
    InternalVersion {
        from: String,
        to: String,
        req: String,
        expected: String,
    },
    /// A published crate depends on one that is never published.
    OnUnpublished { from: String, to: String },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::ShouldNotPublish { name } => write!(
                f,
                "{name} would be published: add `publish = false` to its manifest, or add it \
                 to PUBLISHED in xtask/src/publish.rs if hosts should get it"
            ),
            Problem::ShouldPublish { name } => write!(
                f,
                "{name} is in PUBLISHED (xtask/src/publish.rs) but says `publish = false`"
            ),
            Problem::Missing { name, field } => {
                write!(f, "{name} has no `{field}`: add it to its [package]")
            }
            Problem::ReadmeAbsent { name, path } => write!(
                f,
                "{name} names readme `{path}`, which does not exist beside its manifest"
            ),
            Problem::BadKeywords { name, why } => write!(f, "{name}: keywords: {why}"),
            Problem::BadCategories { name, why } => write!(
                f,
                "{name}: categories: {why} (see https://crates.io/category_slugs)"
            ),
            Problem::InternalVersion {
                from,
                to,
                req,
                expected,
            } => write!(
                f,
                "{from} depends on {to} with version `{req}`, expected `{expected}`: give \
                 `{to}` in the root [workspace.dependencies] `version = \"{}\"` beside its path",
                expected.trim_start_matches('^')
            ),
            Problem::OnUnpublished { from, to } => write!(
                f,
                "{from} is published but depends on {to}, which never is: the packaged \
                 {from} could not build from the registry"
            ),
        }
    }
}

fn is_blank(s: Option<&String>) -> bool {
    s.is_none_or(|s| s.trim().is_empty())
}

/// Whether the registry accepts `keyword`: ASCII letters, digits, `_`, `-` and `+`,
/// starting with a letter, at most 20 characters.
fn keyword_ok(keyword: &str) -> bool {
    keyword.len() <= MAX_KEYWORD_CHARS
        && keyword
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
        && keyword
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+'))
}

/// Checks every package's publish classification and every published crate's metadata.
pub(crate) fn check(crates: &[Crate]) -> Vec<Problem> {
    let mut out = Vec::new();
    let published: BTreeSet<&str> = crates
        .iter()
        .filter(|c| c.publishable)
        .map(|c| c.name.as_str())
        .collect();
    for c in crates {
        let name = c.name.clone();
        let listed = PUBLISHED.contains(&c.name.as_str());
        match (listed, c.publishable) {
            (false, true) => out.push(Problem::ShouldNotPublish { name: name.clone() }),
            (true, false) => out.push(Problem::ShouldPublish { name: name.clone() }),
            _ => {}
        }
        if !c.publishable {
            continue;
        }
        let fields = [
            ("description", &c.description),
            ("license", &c.license),
            ("repository", &c.repository),
            ("rust-version", &c.rust_version),
        ];
        for (field, value) in fields {
            if is_blank(value.as_ref()) {
                out.push(Problem::Missing {
                    name: name.clone(),
                    field,
                });
            }
        }
        match &c.readme {
            None => out.push(Problem::Missing {
                name: name.clone(),
                field: "readme",
            }),
            Some((path, false)) => out.push(Problem::ReadmeAbsent {
                name: name.clone(),
                path: path.clone(),
            }),
            Some((_, true)) => {}
        }
        if !c.has_docs_rs {
            out.push(Problem::Missing {
                name: name.clone(),
                field: "package.metadata.docs.rs",
            });
        }
        if c.keywords.is_empty() {
            out.push(Problem::Missing {
                name: name.clone(),
                field: "keywords",
            });
        } else if c.keywords.len() > MAX_KEYWORDS {
            out.push(Problem::BadKeywords {
                name: name.clone(),
                why: format!(
                    "{} given, the registry takes at most {MAX_KEYWORDS}",
                    c.keywords.len()
                ),
            });
        }
        for k in c.keywords.iter().filter(|k| !keyword_ok(k)) {
            out.push(Problem::BadKeywords {
                name: name.clone(),
                why: format!(
                    "`{k}` is refused (ASCII letters, digits, `_`, `-`, `+`, starting with a \
                     letter, at most {MAX_KEYWORD_CHARS} characters)"
                ),
            });
        }
        if c.categories.is_empty() {
            out.push(Problem::Missing {
                name: name.clone(),
                field: "categories",
            });
        } else if c.categories.len() > MAX_CATEGORIES {
            out.push(Problem::BadCategories {
                name: name.clone(),
                why: format!(
                    "{} given, the registry takes at most {MAX_CATEGORIES}",
                    c.categories.len()
                ),
            });
        }
        for cat in c
            .categories
            .iter()
            .filter(|cat| !CATEGORY_SLUGS.contains(&cat.as_str()))
        {
            out.push(Problem::BadCategories {
                name: name.clone(),
                why: format!("`{cat}` is not a crates.io category slug"),
            });
        }
        for (to, req) in &c.internal {
            if !published.contains(to.as_str()) {
                out.push(Problem::OnUnpublished {
                    from: name.clone(),
                    to: to.clone(),
                });
            }
            let Some(target) = crates.iter().find(|t| t.name == *to) else {
                continue;
            };
            let expected = format!("^{}", target.version);
            if *req != expected && *req != format!("={}", target.version) {
                out.push(Problem::InternalVersion {
                    from: name.clone(),
                    to: to.clone(),
                    req: req.clone(),
                    expected,
                });
            }
        }
    }
    out
}

/// The published crates, each after every published crate it depends on; ties keep
/// the order of [`PUBLISHED`].
///
/// # Errors
/// A dependency cycle among them (cargo would refuse it first).
pub(crate) fn order(crates: &[Crate]) -> anyhow::Result<Vec<Crate>> {
    let mut left: Vec<&Crate> = PUBLISHED
        .iter()
        .filter_map(|n| crates.iter().find(|c| c.name == *n && c.publishable))
        .collect();
    let mut done: Vec<Crate> = Vec::new();
    while !left.is_empty() {
        let ready = left.iter().position(|c| {
            c.internal.iter().all(|(to, _)| {
                done.iter().any(|d| d.name == *to) || !left.iter().any(|l| l.name == *to)
            })
        });
        let Some(idx) = ready else {
            let names: Vec<&str> = left.iter().map(|c| c.name.as_str()).collect();
            anyhow::bail!("dependency cycle among {}", names.join(", "));
        };
        done.push(left.remove(idx).clone());
    }
    Ok(done)
}

/// Reads the workspace's packages from `cargo metadata --format-version 1 --no-deps`
/// output.
pub(crate) fn crates_from_metadata(meta: &serde_json::Value) -> Vec<Crate> {
    let empty = Vec::new();
    let pkgs = meta["packages"].as_array().unwrap_or(&empty);
    let members: Vec<&str> = pkgs.iter().filter_map(|p| p["name"].as_str()).collect();
    let text = |v: &serde_json::Value| v.as_str().map(String::from);
    let list = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap_or(&empty)
            .iter()
            .filter_map(|s| s.as_str().map(String::from))
            .collect()
    };
    pkgs.iter()
        .filter_map(|p| {
            let name = p["name"].as_str()?.to_string();
            let dir = p["manifest_path"]
                .as_str()
                .map(PathBuf::from)
                .and_then(|m| m.parent().map(PathBuf::from))
                .unwrap_or_default();
            let readme = text(&p["readme"]).map(|r| {
                let exists = dir.join(&r).is_file();
                (r, exists)
            });
            let internal = p["dependencies"]
                .as_array()
                .unwrap_or(&empty)
                .iter()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .filter_map(|d| {
                    let dep = d["name"].as_str()?;
                    members
                        .contains(&dep)
                        .then(|| (dep.to_string(), text(&d["req"]).unwrap_or_default()))
                })
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            Some(Crate {
                version: text(&p["version"]).unwrap_or_default(),
                // `null` means any registry; `[]` is `publish = false`.
                publishable: p["publish"].as_array().is_none_or(|r| !r.is_empty()),
                description: text(&p["description"]),
                license: text(&p["license"]),
                repository: text(&p["repository"]),
                readme,
                keywords: list(&p["keywords"]),
                categories: list(&p["categories"]),
                rust_version: text(&p["rust_version"]),
                has_docs_rs: p["metadata"]["docs"]["rs"].is_object(),
                internal,
                name,
            })
        })
        .collect()
}

/// The workspace's packages, read through `cargo metadata` (no network).
pub(crate) fn workspace_crates() -> anyhow::Result<Vec<Crate>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = crate::shell::output(crate::shell::command(&cargo).args([
        "metadata",
        "--format-version",
        "1",
        "--no-deps",
    ]))?;
    let meta: serde_json::Value = serde_json::from_str(&out)?;
    Ok(crates_from_metadata(&meta))
}

/// Fails naming every publish-metadata problem in the workspace.
pub(crate) fn check_workspace() -> anyhow::Result<Vec<Crate>> {
    let crates = workspace_crates()?;
    let problems = check(&crates);
    if problems.is_empty() {
        crate::shell::say("publish metadata: ok");
        return Ok(crates);
    }
    let lines: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    anyhow::bail!("publish metadata check failed:\n  {}", lines.join("\n  "))
}

#[cfg(test)]
mod tests;
