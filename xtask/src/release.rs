//! `cargo xtask release [--dry-run]`: builds `herd` and the example plugin in
//! release mode and packages them with the docs and checksums under `dist/`, then
//! packages and verifies every published crate and puts the `.crate` files beside
//! the tarball (one `SHA256SUMS` covers them all).
//!
//! A real release refuses a dirty tree; both modes refuse a version without a
//! CHANGELOG entry and publish metadata that fails the check in `publish.rs`. The
//! dry run reports a dirty tree instead of refusing (and lets `cargo package` take
//! the uncommitted files), and does not tag.
//!
//! The crates are packaged by one `cargo package -p …` for all of them: cargo packs
//! them in dependency order and verifies each against the others' freshly packed
//! `.crate` files (a local overlay registry), so an unpublished herd crate resolves
//! as if it came from the registry while third-party crates come from the real one.
//! Verification builds each crate from its unpacked `.crate` alone, so a file a crate
//! needs but does not ship fails here rather than for a user. `--locked` keeps the
//! third-party versions the workspace was tested with. Nothing but the package
//! registry is reached over the network.

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::publish::{self, Crate};
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
    let crates = publish::order(&publish::check_workspace()?)?;
    let started = Instant::now();
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
    // Every man page: herd(1) and herd-<subcommand>(1), which herd(1) names.
    let man = stage.join("man");
    shell::run(
        shell::command(&built.join("herd").to_string_lossy())
            .args(["man", "--dir"])
            .arg(&man),
    )?;
    let tarball = format!("{name}.tar.gz");
    shell::run(
        shell::command("tar")
            .args(["czf", &tarball, &name])
            .current_dir(&dist),
    )?;
    let sum = sha256_hex(&dist.join(&tarball))?;
    let mut sums_text = format!("{sum}  {tarball}\n");
    shell::say(&format!(
        "release: binary tarball built in {:.0}s",
        started.elapsed().as_secs_f64()
    ));
    let packaged = package_crates(&crates, !dirty.trim().is_empty(), &dist)?;
    for (file, crate_sum) in &packaged {
        sums_text.push_str(&format!("{crate_sum}  {file}\n"));
    }
    let sums = dist.join("SHA256SUMS");
    fs::write(&sums, sums_text).with_context(|| format!("cannot write {}", sums.display()))?;
    if !dry_run {
        shell::run(shell::command("git").args(["tag", &format!("v{version}")]))?;
    }
    shell::say(&format!(
        "release{}: made {} ({sum}), {} crates and {} in {:.0}s",
        if dry_run { " dry run" } else { "" },
        dist.join(&tarball).display(),
        packaged.len(),
        sums.display(),
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// The root manifest's `[profile.dev]` settings, as `--config` values for `cargo
/// package` (a tidy test keeps the two equal).
pub(crate) const VERIFY_PROFILE: &[&str] = &[
    "profile.dev.debug=\"line-tables-only\"",
    "profile.dev.package.\"*\".debug=false",
];

/// Packages and verifies `crates` (already in dependency order) with one `cargo
/// package`, copies each `.crate` into `dist` and returns its file name and checksum.
fn package_crates(
    crates: &[Crate],
    allow_dirty: bool,
    dist: &Path,
) -> Result<Vec<(String, String)>> {
    let started = Instant::now();
    let mut args = vec!["package", "--locked"];
    // Verification builds each crate as a workspace of its own, which the root
    // manifest's profiles do not reach; the same settings given as config let it
    // reuse the dependency builds of the workspace instead of building them again
    // with full debug info.
    for setting in VERIFY_PROFILE {
        args.extend(["--config", setting]);
    }
    if allow_dirty {
        args.push("--allow-dirty");
    }
    for c in crates {
        args.extend(["-p", c.name.as_str()]);
    }
    forget_unpacked_overlay(crates)?;
    forget_verified_builds()?;
    shell::cargo(&args).context("packaging or verifying the published crates failed")?;
    let packaged_dir = shell::target_dir()?.join("package");
    let mut out = Vec::new();
    for c in crates {
        let file = format!("{}-{}.crate", c.name, c.version);
        let from = packaged_dir.join(&file);
        fs::copy(&from, dist.join(&file))
            .with_context(|| format!("cannot copy {} into {}", from.display(), dist.display()))?;
        let sum = sha256_hex(&dist.join(&file))?;
        shell::say(&format!(
            "packaged and verified: {} {} -> {}",
            c.name,
            c.version,
            dist.join(&file).display()
        ));
        out.push((file, sum));
    }
    shell::say(&format!(
        "release: {} crates packaged and verified in {:.0}s",
        out.len(),
        started.elapsed().as_secs_f64()
    ));
    Ok(out)
}

/// Removes the sources cargo unpacked from an earlier run's packages.
///
/// Verification resolves the workspace's own crates from a local overlay
/// registry, and cargo unpacks each `.crate` under
/// `$CARGO_HOME/registry/src/-<hash>/<name>-<version>`. It does not unpack again
/// when that directory exists, so a second run with the same version would verify
/// against the first run's sources (seen: herd-cli verified against an older
/// herd-core and failed to compile). Crates.io's own directories are left alone.
fn forget_unpacked_overlay(crates: &[Crate]) -> Result<()> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .context("neither CARGO_HOME nor HOME is set")?;
    let src = cargo_home.join("registry").join("src");
    let Ok(registries) = std::fs::read_dir(&src) else {
        return Ok(());
    };
    for registry in registries.filter_map(Result::ok) {
        // Local overlays are unnamed: their directory is `-<hash>`.
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        for c in crates {
            let unpacked = registry.path().join(format!("{}-{}", c.name, c.version));
            if unpacked.exists() {
                std::fs::remove_dir_all(&unpacked)
                    .with_context(|| format!("cannot remove {}", unpacked.display()))?;
            }
        }
    }
    Ok(())
}

/// Removes what earlier builds made of the workspace's own crates in the dev
/// profile, which verification uses. Verification compiles each crate against
/// the others as registry crates, and cargo takes a registry crate of the same
/// name and version for unchanged, whatever its new sources say, so a second run
/// would link herd-core against the first run's herd-persistence (seen: "no method
/// named `forget`"). Other dependencies' builds are kept; the herd crates are
/// rebuilt by the next dev build.
fn forget_verified_builds() -> Result<()> {
    let dev = shell::target_dir()?.join("debug");
    for sub in [".fingerprint", "deps", "build"] {
        let Ok(entries) = std::fs::read_dir(dev.join(sub)) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let ours = ["herd-", "herd_", "libherd_"]
                .iter()
                .any(|prefix| name.starts_with(prefix));
            if !ours {
                continue;
            }
            let path = entry.path();
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            removed.with_context(|| format!("cannot remove {}", path.display()))?;
        }
    }
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
