//! The dependency-direction check: workspace edges must follow the table in
//! ARCHITECTURE.md's code map, so the arrows only ever point down.
//!
//! The check reads `cargo metadata` and compares every edge between workspace
//! packages (normal, build and dev alike) with [`ALLOWED`]. A package missing
//! from the table is itself a violation: adding a crate is a design change.
//! The one exception is a dev-dependency on a [`DEV_ONLY`] crate (the shared test
//! support), which any package may take and which is no edge of the layering, and a
//! dev-dependency of a package on itself (features for its own tests and benches).

use std::fmt;

/// Which workspace packages each package may depend on.
pub(crate) const ALLOWED: &[(&str, Allowed)] = &[
    ("herd-pty", Allowed::Only(&[])),
    ("herd-guards", Allowed::Only(&[])),
    ("herd-persistence", Allowed::Only(&[])),
    // The wire's types: a leaf the CLI (daemon, client, MCP server, host link) uses.
    // herd-core does not: its answer types are the registry's, serialised with the
    // same field names, and herd-cli's protocol test checks they stay within these.
    ("herd-protocol", Allowed::Only(&[])),
    ("herd-plugin-abi", Allowed::Only(&[])),
    ("herd-hooks", Allowed::Only(&["herd-plugin-abi"])),
    (
        "herd-core",
        Allowed::Only(&["herd-pty", "herd-guards", "herd-persistence", "herd-hooks"]),
    ),
    (
        "herd-cli",
        Allowed::Only(&[
            "herd-core",
            "herd-pty",
            "herd-guards",
            "herd-persistence",
            "herd-protocol",
            "herd-hooks",
            "herd-plugin-abi",
        ]),
    ),
    ("herd-plugin-example", Allowed::Only(&["herd-plugin-abi"])),
    (
        "herd-minimal-host",
        Allowed::Only(&["herd-core", "herd-guards"]),
    ),
    ("herd-tests", Allowed::Any),
    ("herd-test-support", Allowed::Only(&[])),
    ("xtask", Allowed::Only(&[])),
];

/// Dev-only crates: any package may take one as a dev-dependency (it depends on
/// nothing of herd, so no arrow can point up through it); as a normal or build
/// dependency it is an edge like any other, and no package's table allows it.
pub(crate) const DEV_ONLY: &[&str] = &["herd-test-support"];

/// Test plugins (`hooks/testdata/*`) are plugins: the ABI and nothing else.
const TEST_PLUGIN_PREFIX: &str = "herd-test-plugin-";
const TEST_PLUGIN_ALLOWED: Allowed = Allowed::Only(&["herd-plugin-abi"]);

/// What a package may depend on inside the workspace.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Allowed {
    /// Exactly these packages.
    Only(&'static [&'static str]),
    /// Any workspace package (the cross-crate test crate).
    Any,
}

/// One workspace package and the workspace packages it depends on.
#[derive(Debug, Clone)]
pub(crate) struct Package {
    pub(crate) name: String,
    pub(crate) deps: Vec<String>,
}

/// An edge the table does not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Violation {
    /// `from` depends on `to`, which the table forbids.
    Forbidden { from: String, to: String },
    /// `name` is not in the table at all.
    Unknown { name: String },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Forbidden { from, to } => write!(
                f,
                "forbidden dependency edge {from} -> {to}: arrows only point down \
                 (see ARCHITECTURE.md); a new edge needs a design change recorded there \
                 and in xtask/src/deps.rs"
            ),
            Violation::Unknown { name } => write!(
                f,
                "workspace package {name} is not in the allowed-edges table: add it to \
                 xtask/src/deps.rs and to the crate map in ARCHITECTURE.md"
            ),
        }
    }
}

fn allowed_for(name: &str) -> Option<Allowed> {
    if name.starts_with(TEST_PLUGIN_PREFIX) {
        return Some(TEST_PLUGIN_ALLOWED);
    }
    ALLOWED.iter().find(|(n, _)| *n == name).map(|(_, a)| *a)
}

/// Checks every package's workspace edges against the table.
pub(crate) fn check(packages: &[Package]) -> Vec<Violation> {
    let mut out = Vec::new();
    for p in packages {
        match allowed_for(&p.name) {
            None => out.push(Violation::Unknown {
                name: p.name.clone(),
            }),
            Some(Allowed::Any) => {}
            Some(Allowed::Only(ok)) => {
                for d in &p.deps {
                    if !ok.contains(&d.as_str()) {
                        out.push(Violation::Forbidden {
                            from: p.name.clone(),
                            to: d.clone(),
                        });
                    }
                }
            }
        }
    }
    out
}

/// Extracts the workspace packages and their workspace edges from
/// `cargo metadata --format-version 1 --no-deps` output.
pub(crate) fn packages_from_metadata(meta: &serde_json::Value) -> Vec<Package> {
    let empty = Vec::new();
    let pkgs = meta["packages"].as_array().unwrap_or(&empty);
    let members: Vec<&str> = pkgs.iter().filter_map(|p| p["name"].as_str()).collect();
    pkgs.iter()
        .filter_map(|p| {
            let name = p["name"].as_str()?.to_string();
            let mut deps: Vec<String> = p["dependencies"]
                .as_array()
                .unwrap_or(&empty)
                .iter()
                .filter(|d| {
                    let dev_only = d["name"].as_str().is_some_and(|n| DEV_ONLY.contains(&n));
                    // A dev-dependency on the package itself only turns features on
                    // for its own tests and benches: no edge.
                    let itself = d["name"].as_str() == Some(name.as_str());
                    !((dev_only || itself) && d["kind"].as_str() == Some("dev"))
                })
                .filter_map(|d| d["name"].as_str())
                .filter(|d| members.contains(d))
                .map(String::from)
                .collect();
            deps.sort();
            deps.dedup();
            Some(Package { name, deps })
        })
        .collect()
}

/// Reads `cargo metadata` for the workspace and fails naming every forbidden edge.
pub(crate) fn check_workspace() -> anyhow::Result<()> {
    let out = crate::shell::output(crate::shell::command("cargo").args([
        "metadata",
        "--format-version",
        "1",
        "--no-deps",
    ]))?;
    let meta: serde_json::Value = serde_json::from_str(&out)?;
    let violations = check(&packages_from_metadata(&meta));
    if violations.is_empty() {
        crate::shell::say("dependency direction: ok");
        return Ok(());
    }
    let lines: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
    anyhow::bail!(
        "dependency direction check failed:\n  {}",
        lines.join("\n  ")
    )
}

#[cfg(test)]
mod tests;
