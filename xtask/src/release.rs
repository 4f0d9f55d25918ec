//! `cargo xtask release [--dry-run]`: builds `herd` and the example plugin in
//! release mode and packages them with the docs and checksums under `dist/`.
//!
//! A real release refuses a dirty tree; both modes refuse a version without a
//! CHANGELOG entry. The dry run reports a dirty tree instead of refusing, and
//! does not tag.

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

use crate::shell;

pub(crate) fn run(dry_run: bool) -> Result<()> {
    let version = cli_version()?;
    let dirty = shell::output(shell::command("git").args(["status", "--porcelain"]))
        .context("cannot read git status")?;
    if !dirty.trim().is_empty() {
        if dry_run {
            shell::say("release dry run: the tree is dirty; a real release would refuse");
        } else {
            bail!("refusing to release from a dirty tree; commit or stash first:\n{dirty}");
        }
    }
    let changelog = fs::read_to_string("CHANGELOG.md").context("cannot read CHANGELOG.md")?;
    if !has_entry(&changelog, &version) {
        bail!("CHANGELOG.md has no entry for {version}; add a `## [{version}]` section first");
    }
    let target = host_triple()?;
    shell::cargo(&[
        "build",
        "--release",
        "--quiet",
        "-p",
        "herd-cli",
        "-p",
        "herd-plugin-example",
    ])?;
    let built = shell::target_dir()?.join("release");
    let name = format!("herd-{version}-{target}");
    let dist = PathBuf::from("dist");
    let stage = dist.join(&name);
    if stage.exists() {
        fs::remove_dir_all(&stage).with_context(|| format!("cannot clear {}", stage.display()))?;
    }
    fs::create_dir_all(&stage).with_context(|| format!("cannot create {}", stage.display()))?;
    // `herd-shim` ships beside `herd`: the daemon starts it for every session.
    let files: [(PathBuf, &str); 6] = [
        (built.join("herd"), "herd"),
        (built.join("herd-shim"), "herd-shim"),
        (
            built.join("libherd_plugin_example.so"),
            "libherd_plugin_example.so",
        ),
        (PathBuf::from("README.md"), "README.md"),
        (PathBuf::from("CHANGELOG.md"), "CHANGELOG.md"),
        (PathBuf::from("LICENSE"), "LICENSE"),
    ];
    for (from, to) in &files {
        fs::copy(from, stage.join(to))
            .with_context(|| format!("cannot copy {} into the package", from.display()))?;
    }
    let tarball = format!("{name}.tar.gz");
    shell::run(
        shell::command("tar")
            .args(["czf", &tarball, &name])
            .current_dir(&dist),
    )?;
    let sum = sha256_hex(&dist.join(&tarball))?;
    let sums = dist.join("SHA256SUMS");
    fs::write(&sums, format!("{sum}  {tarball}\n"))
        .with_context(|| format!("cannot write {}", sums.display()))?;
    if !dry_run {
        shell::run(shell::command("git").args(["tag", &format!("v{version}")]))?;
    }
    shell::say(&format!(
        "release{}: made {} and {} ({sum})",
        if dry_run { " dry run" } else { "" },
        dist.join(&tarball).display(),
        sums.display()
    ));
    Ok(())
}

fn cli_version() -> Result<String> {
    let out = shell::output(shell::command("cargo").args([
        "metadata",
        "--format-version",
        "1",
        "--no-deps",
    ]))?;
    let meta: serde_json::Value = serde_json::from_str(&out)?;
    meta["packages"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == "herd-cli"))
        .and_then(|p| p["version"].as_str())
        .map(String::from)
        .context("herd-cli is missing from cargo metadata")
}

fn host_triple() -> Result<String> {
    let out = shell::output(shell::command("rustc").arg("-vV"))?;
    out.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(String::from)
        .context("rustc -vV printed no host line")
}

/// Whether the changelog has a `## [version]` (or `## version`) heading.
pub(crate) fn has_entry(changelog: &str, version: &str) -> bool {
    changelog.lines().any(|l| {
        let l = l.trim();
        l.starts_with("## ")
            && (l[3..].starts_with(&format!("[{version}]"))
                || l[3..].split_whitespace().next() == Some(version))
    })
}

fn sha256_hex(path: &Path) -> Result<String> {
    let bytes = fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let digest = Sha256::digest(&bytes);
    Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests;
