//! xtask: maintainer tasks for herd, run as `cargo xtask <task>`.
//!
//! - `lint`: rustfmt check, clippy with warnings as errors, then the tidy and
//!   dependency-direction checks (ordinary `#[test]`s in this crate, so a plain
//!   `cargo test` enforces them too).
//! - `ci`: lint, build everything (plugin cdylibs included), run every test, the CLI
//!   contract check and the release dry run. `.ci/run` calls this.
//! - `bench [-p PKG] [--json]`: runs every benchmark and prints each figure beside
//!   the baseline measured in the same run.
//! - `soak`: the long stress loops kept out of CI.
//! - `release [--dry-run]`: builds and packages a release.
//!
//! xtask depends on nothing in the workspace; it reads `cargo metadata` instead.

mod bench;
mod deps;
mod release;
mod shell;
#[cfg(test)]
mod tidy;

use anyhow::{Context, Result, bail};
use std::path::PathBuf;

use shell::{cargo, run};

const USAGE: &str =
    "usage: cargo xtask <lint | ci | bench [-p PKG] [--json] | soak | release [--dry-run]>";

fn main() -> std::process::ExitCode {
    match real_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            shell::say(&format!("xtask: error: {e:#}"));
            std::process::ExitCode::FAILURE
        }
    }
}

fn real_main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((task, rest)) = args.split_first() else {
        bail!("{USAGE}");
    };
    let root = workspace_root()?;
    std::env::set_current_dir(&root).with_context(|| format!("cannot enter {}", root.display()))?;
    match task.as_str() {
        "lint" => lint(),
        "ci" => ci(),
        "bench" => bench::run(rest),
        "soak" => soak(),
        "release" => release::run(rest.iter().any(|a| a == "--dry-run")),
        "-h" | "--help" | "help" => {
            shell::say(USAGE);
            Ok(())
        }
        other => bail!("unknown task `{other}`\n{USAGE}"),
    }
}

/// The workspace root: the parent of this crate's manifest directory.
fn workspace_root() -> Result<PathBuf> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map(PathBuf::from)
        .context("xtask's manifest directory has no parent")
}

fn lint() -> Result<()> {
    cargo(&["fmt", "--all", "--", "--check"])
        .context("formatting differs: run `cargo fmt --all`")?;
    cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--quiet",
        "--",
        "-D",
        "warnings",
    ])
    .context("clippy found problems")?;
    deps::check_workspace()?;
    cargo(&["test", "--quiet", "-p", "xtask"])
        .context("tidy or dependency-direction checks failed")?;
    Ok(())
}

fn ci() -> Result<()> {
    lint()?;
    cargo(&["build", "--workspace", "--all-targets", "--quiet"])
        .context("building the workspace failed")?;
    cargo(&["test", "--workspace", "--quiet"]).context("tests failed")?;
    contract()?;
    release::run(true)?;
    shell::say("xtask ci: all green");
    Ok(())
}

/// Runs the CLI contract check (`shared/acceptance/cli-contract.sh`, or the copy in
/// `tests/acceptance/` when the shared tree is absent) against the debug binary.
fn contract() -> Result<()> {
    let herd = shell::target_dir()?.join("debug").join("herd");
    let shared = PathBuf::from("../shared/acceptance/cli-contract.sh");
    let script = if shared.is_file() {
        shared
    } else {
        PathBuf::from("tests/acceptance/cli-contract.sh")
    };
    let mut cmd = shell::command("bash");
    cmd.arg(&script).env("HERD", &herd);
    run(&mut cmd).with_context(|| format!("the CLI contract check {} failed", script.display()))
}

/// Runs the soak loops: the same `soak_*` tests CI runs small, at full size.
fn soak() -> Result<()> {
    let mut cmd = shell::command("cargo");
    cmd.args([
        "test",
        "--release",
        "--workspace",
        "soak_",
        "--",
        "--nocapture",
    ])
    .env("HERD_SOAK", "1");
    run(&mut cmd).context("a soak loop failed")
}
