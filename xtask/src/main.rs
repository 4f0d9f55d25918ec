//! xtask: maintainer tasks for herd, run as `cargo xtask <task>`.
//!
//! - `lint`: rustfmt check, clippy with warnings as errors, then the tidy,
//!   dependency-direction and publish-metadata checks (ordinary `#[test]`s in this
//!   crate, so a plain `cargo test` enforces them too).
//! - `ci`: lint, build everything (plugin cdylibs included), run every test, the CLI
//!   contract check and the release dry run. `.ci/run` calls this.
//! - `bench [-p PKG] [--json]`: runs every benchmark and prints each figure beside
//!   the baseline measured in the same run.
//! - `soak`: the stress loops kept out of CI, each a named test run many times or at
//!   a raised size.
//! - `release [--dry-run]`: builds and packages a release: the binary tarball and
//!   every published crate, packaged and verified in dependency order.
//!
//! xtask depends on nothing in the workspace; it reads `cargo metadata` instead.

mod bench;
mod deps;
mod outsider;
mod publish;
mod release;
mod shell;
#[cfg(test)]
mod tidy;

use anyhow::{Context, Result, bail};
use std::path::PathBuf;

use shell::{cargo, run};

const USAGE: &str = "usage: cargo xtask <lint | ci | bench [-p PKG] [--json] | soak | release [--dry-run] | outsider>";

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
        "outsider" => outsider::check(&workspace_root()?),
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
    publish::check_workspace()?;
    cargo(&["test", "--quiet", "-p", "xtask"])
        .context("tidy, dependency-direction or publish-metadata checks failed")?;
    Ok(())
}

fn ci() -> Result<()> {
    lint()?;
    cargo(&["build", "--workspace", "--all-targets", "--quiet"])
        .context("building the workspace failed")?;
    cargo(&["test", "--workspace", "--quiet"]).context("tests failed")?;
    contract()?;
    outsider::check(&workspace_root()?)?;
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

/// One stress loop: a test run many times, or once with its size raised.
#[derive(Debug)]
struct SoakItem {
    what: &'static str,
    package: &'static str,
    /// `--lib` or `--test it`.
    target: &'static [&'static str],
    filter: &'static str,
    env: &'static [(&'static str, &'static str)],
    repeats: u32,
}

/// The loops too long for CI. Each names what it stresses; CI runs the same tests once
/// at their small default size.
const SOAK: &[SoakItem] = &[
    SoakItem {
        what: "ledger exactly-once across 300 SIGKILLs of a committing writer",
        package: "herd-persistence",
        target: &["--test", "it"],
        filter: "ledger::b29_ledger_exactly_once_across_sigkills",
        env: &[("HERD_SOAK_CYCLES", "300")],
        repeats: 1,
    },
    SoakItem {
        what: "every answered spawn is re-adopted after a SIGKILL at a random moment, 100 crashes",
        package: "herd-core",
        target: &["--test", "it"],
        filter: "restore::b28_every_answered_spawn_survives_a_sigkill_at_a_random_moment",
        env: &[("HERD_SOAK_SPAWN_CYCLES", "100")],
        repeats: 1,
    },
    SoakItem {
        what: "100 daemon SIGKILLs at random moments while 20 supervised jobs run: no lost line, one completion each with its code, no orphans, no fd growth",
        package: "herd-cli",
        target: &["--test", "it"],
        filter: "shim::b28_shim_soak_daemon_sigkills_lose_no_line_and_no_completion",
        env: &[("HERD_SOAK_DAEMON_KILLS", "100")],
        repeats: 1,
    },
    SoakItem {
        what: "children started during the grace window leave no survivors (B15), 50 times",
        package: "herd-core",
        target: &["--lib"],
        filter: "kill::tests::b15_children_started_during_grace_leave_no_survivors",
        env: &[],
        repeats: 50,
    },
    SoakItem {
        what: "setsid escapees found by their tag, 50 times",
        package: "herd-core",
        target: &["--lib"],
        filter: "kill::tests::b15_setsid_escapee_is_found_by_its_session_tag",
        env: &[],
        repeats: 50,
    },
    SoakItem {
        what: "200 concurrent sessions publish exactly 200 completions, 20 times",
        package: "herd-core",
        target: &["--test", "it"],
        filter: "lifecycle::b9_200_concurrent_sessions_publish_exactly_200_completions",
        env: &[],
        repeats: 20,
    },
    SoakItem {
        what: "2,000 spawn/finish cycles leave the fd count unchanged, 5 times",
        package: "herd-core",
        target: &["--test", "it"],
        filter: "lifecycle::b12_2000_spawn_finish_cycles_leave_the_fd_count_unchanged",
        env: &[],
        repeats: 5,
    },
    SoakItem {
        what: "PTY scanner chunking properties with 200,000 cases",
        package: "herd-pty",
        target: &["--lib"],
        filter: "scanner::tests::b7_",
        env: &[("PROPTEST_CASES", "200000")],
        repeats: 1,
    },
    SoakItem {
        what: "guard never panics or stalls, 20,000 cases per property",
        package: "herd-guards",
        target: &["--test", "it"],
        filter: "robustness::",
        env: &[("PROPTEST_CASES", "20000")],
        repeats: 1,
    },
];

/// Runs the soak loops and prints, per loop, how many runs passed and how long it took.
fn soak() -> Result<()> {
    let mut summary = Vec::new();
    for item in SOAK {
        let start = std::time::Instant::now();
        let mut passed = 0;
        for _ in 0..item.repeats {
            let mut cmd = shell::command("cargo");
            cmd.args(["test", "--release", "--quiet", "-p", item.package])
                .args(item.target)
                .args(["--", item.filter]);
            for (k, v) in item.env {
                cmd.env(k, v);
            }
            run(&mut cmd).with_context(|| {
                format!("soak `{}` failed after {passed} passing runs", item.what)
            })?;
            passed += 1;
        }
        summary.push(format!(
            "ok  {passed}/{} runs in {:.1}s: {}",
            item.repeats,
            start.elapsed().as_secs_f64(),
            item.what
        ));
    }
    for line in &summary {
        shell::say(line);
    }
    Ok(())
}
