//! xtask: maintainer tasks for herd, run as `cargo xtask <task>`.
//!
//! - `lint`: rustfmt check, clippy with warnings as errors (also herd-core without
//!   its `sqlite` feature), a check of the release-only tests, then the tidy,
//!   dependency-direction and publish-metadata checks (ordinary `#[test]`s in this
//!   crate, so a plain `cargo test` enforces them too), and the behaviour-contract
//!   check: every behaviour ID the code or a test name cites is defined in
//!   `docs/behaviors.md` (`behaviors.rs`); no issue number in any `.rs` or `.md`
//!   file (`issues.rs`: a reader cannot follow one); and the shape checks: no
//!   production file over 800 lines or function over 100 (`sizes.rs`), no module
//!   cycle inside a crate (`cycles.rs`), known violations listed with what removes
//!   them in `debt.rs`; no
//!   behaviour ID, issue number or source path in the library crates' rustdoc
//!   (`rustdoc.rs`); and the boundary checks (`boundary.rs`): Linux-only mechanisms
//!   only in a crate's `sys` module, `std::sync::Mutex` in herd-core and the daemon only in
//!   `lock_order.rs`, herd's own environment variable names spelled once; and the
//!   wire-JSON ratchet (`wire_json.rs`): herd-cli's `json!` per file may only shrink,
//!   wire messages being herd-protocol's types; and the untyped-read ratchet
//!   (`value_reads.rs`): herd-cli's reads of a JSON value by field name
//!   (`answer["session_id"]`) per file may only shrink, answers being read as
//!   herd-protocol's types.
//! - `ci`: lint, build everything (plugin cdylibs included), run every test, the CLI
//!   contract check and the release dry run. `.ci/run` calls this.
//! - `bench [-p PKG] [--json]`: runs every benchmark and prints each figure beside
//!   the baseline measured in the same run. `bench --compare BEFORE.json AFTER.json`
//!   sets two such runs side by side, figure by figure.
//! - `soak`: the stress loops kept out of CI, each a named test run many times or at
//!   a raised size, then every fuzz target for a short budget (when nightly and
//!   cargo-fuzz are installed; otherwise it says why it skipped them).
//! - `fuzz [--seconds N] [TARGET...]`: runs the cargo-fuzz targets in `fuzz/` (60 s
//!   each by default) and reports executions and crashes per target. Never part of
//!   `ci`: it needs a toolchain named `nightly` and cargo-fuzz (`fuzz/README.md`
//!   says how to set them up, also where only stable can be installed).
//! - `wire-json`: prints the wire-JSON ratchet's table as the sources stand.
//! - `value-reads`: prints the untyped-read ratchet's table as the sources stand.
//! - `release [--dry-run]`: builds and packages a release: the binary tarball and
//!   every published crate, packaged and verified in dependency order.
//! - `client-order [--check]`: takes the functions herd's short client commands run
//!   (each under callgrind) into `cli/link/client-order.txt`, which the linker packs
//!   at the front of the binary's text; `--check` says how much of the list the
//!   release build still has (`client_order.rs`).
//!
//! xtask depends on nothing in the workspace; it reads `cargo metadata` instead.

mod behaviors;
mod bench;
mod boundary;
mod client_order;
mod cycles;
mod debt;
mod deps;
mod issues;
mod outsider;
mod publish;
mod release;
mod rustdoc;
mod shell;
mod sizes;
mod source;
#[cfg(test)]
mod tidy;
mod value_reads;
mod walk;
mod wire_json;

use anyhow::{Context, Result, bail};
use std::path::PathBuf;

use shell::{cargo, run};

const USAGE: &str = "usage: cargo xtask <lint | ci | bench [-p PKG] [--json] [--compare BEFORE.json AFTER.json] | soak | fuzz [--seconds N] [TARGET...] | release [--dry-run] | client-order [--check] | outsider | behaviors | issues | shape | wire-json | value-reads>";

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
        "client-order" => client_order::run(rest),
        "soak" => soak(),
        "fuzz" => fuzz(rest),
        "release" => release::run(rest.iter().any(|a| a == "--dry-run")),
        "outsider" => outsider::check(&workspace_root()?),
        "behaviors" => behaviors::check_workspace(&root),
        "issues" => issues::check_workspace(&root),
        "shape" => shape(&root),
        "value-reads" => {
            value_reads::print_table(&source::load_workspace(&root)?);
            Ok(())
        }
        "wire-json" => {
            wire_json::print_table(&source::load_workspace(&root)?);
            Ok(())
        }
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
    // herd-core for a host without SQLite, and the release-only tests
    // (the soak modules are `cfg(not(debug_assertions))`), which no debug build sees.
    cargo(&[
        "clippy",
        "-p",
        "herd-core",
        "--no-default-features",
        "--lib",
        "--quiet",
        "--",
        "-D",
        "warnings",
    ])
    .context("herd-core does not build without its `sqlite` feature")?;
    cargo(&[
        "check",
        "--profile",
        "soak-check",
        "-p",
        "herd-cli",
        "--tests",
        "--quiet",
    ])
    .context("the release-only tests (cli/tests/it/soak*.rs) do not compile")?;
    deps::check_workspace()?;
    behaviors::check_workspace(&workspace_root()?)?;
    issues::check_workspace(&workspace_root()?)?;
    shape(&workspace_root()?)?;
    publish::check_workspace()?;
    cargo(&["test", "--quiet", "-p", "xtask"])
        .context("tidy, dependency-direction or publish-metadata checks failed")?;
    Ok(())
}

/// The size and module-cycle checks, over one parse of the crates' sources.
fn shape(root: &std::path::Path) -> Result<()> {
    let crates = source::load_workspace(root)?;
    let failed: Vec<String> = [
        sizes::check(&crates),
        cycles::check(&crates),
        boundary::check(&crates),
        rustdoc::check(&crates),
        wire_json::check(&crates),
        value_reads::check(&crates),
    ]
    .into_iter()
    .filter_map(|r| r.err().map(|e| format!("{e:#}")))
    .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        bail!("{}", failed.join("\n"))
    }
}

fn ci() -> Result<()> {
    lint()?;
    cargo(&["build", "--workspace", "--all-targets", "--quiet"])
        .context("building the workspace failed")?;
    // The fuzz targets are their own workspace, built with nightly by `cargo xtask
    // fuzz`; checked here so that a change to what they call cannot leave them
    // unbuildable unnoticed.
    cargo(&[
        "check",
        "--manifest-path",
        "fuzz/Cargo.toml",
        "--bins",
        "--locked",
        "--quiet",
    ])
    .context(
        "the fuzz targets no longer compile (fuzz/fuzz_targets; `cargo xtask fuzz` runs them)",
    )?;
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
        what: "herd kill races a daemon SIGKILLed at a random moment, 30 rounds: 0 survivors, one completion each",
        package: "herd-cli",
        target: &["--test", "it"],
        filter: "contain::b16_soak_kill_races_a_daemon_sigkill",
        env: &[("HERD_SOAK_KILL_RACES", "30")],
        repeats: 1,
    },
    SoakItem {
        what: "kill latency of a 100-process tree through herd kill, in a cgroup and under the subreaper, 20 runs each",
        package: "herd-cli",
        target: &["--test", "it"],
        filter: "contain::soak_kill_latency_of_a_100_process_tree",
        env: &[("HERD_SOAK_KILL_RUNS", "20")],
        repeats: 1,
    },
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
        what: "100 daemon SIGKILLs at random moments while 20 supervised jobs run, every fifth with three supervisors stopped until the next daemon gave up waiting for them: no lost line, one completion each with its code, no orphans, no fd growth",
        package: "herd-cli",
        target: &["--test", "it"],
        filter: "shim::b28_shim_soak_daemon_sigkills_lose_no_line_and_no_completion",
        env: &[("HERD_SOAK_DAEMON_KILLS", "100")],
        repeats: 1,
    },
    SoakItem {
        what: "100 daemon SIGKILLs 0-30 ms into `herd events` runs: every completion printed exactly once",
        package: "herd-cli",
        target: &["--test", "it"],
        filter: "exactly_once::b29_every_completion_is_printed_once_across_daemon_sigkills_during_events",
        env: &[("HERD_SOAK_EVENT_KILLS", "100")],
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
        filter: "lifecycle::b9_b10_200_concurrent_sessions_publish_exactly_200_completions_and_none_stays_pending",
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
    SoakItem {
        what: "arbitrary JSON-RPC traffic and config numbers against the real daemon, 2,000 cases each",
        package: "herd-cli",
        target: &["--test", "it"],
        filter: "props::",
        env: &[("PROPTEST_CASES", "2000")],
        repeats: 1,
    },
    SoakItem {
        what: "1,000 running sleeps started one after another through the daemon: none hangs, all run, the time reported",
        package: "herd-cli",
        target: &["--test", "it"],
        filter: "soak::soak_1000_running_sleeps_start_and_none_hangs",
        env: &[("HERD_SOAK_RUNNING_JOBS", "1000")],
        repeats: 1,
    },
    SoakItem {
        what: "a daemon SIGKILLed with 10,000 finished and 1,000 running sessions: the time until `herd ps` answers, all running restored",
        package: "herd-cli",
        target: &["--test", "it"],
        filter: "soak_store::soak_restart_after_a_sigkill_with_10000_finished_and_1000_running",
        env: &[
            ("HERD_SOAK_STORE_FINISHED", "10000"),
            ("HERD_SOAK_STORE_RUNNING", "1000"),
        ],
        repeats: 1,
    },
    SoakItem {
        what: "200 connections opened and closed 500 times: the daemon's fds and connection count return to baseline",
        package: "herd-cli",
        target: &["--test", "it"],
        filter: "soak::soak_200_connections_in_a_loop",
        env: &[("HERD_SOAK_CONNECTION_LOOPS", "500")],
        repeats: 1,
    },
    SoakItem {
        what: "descriptor exhaustion (RLIMIT_NOFILE 256) held 30 s: no spin, a small log, served again once fds free",
        package: "herd-cli",
        target: &["--test", "it"],
        filter: "soak::soak_fd_exhaustion",
        env: &[("HERD_SOAK_EXHAUSTION_SECONDS", "30")],
        repeats: 1,
    },
    SoakItem {
        what: "a logs.follow client that never reads while the job prints for 60 s: bounded memory, other requests answered",
        package: "herd-cli",
        target: &["--test", "it"],
        filter: "soak::soak_a_client_that_never_reads_logs_follow",
        env: &[("HERD_SOAK_FOLLOW_SECONDS", "60")],
        repeats: 1,
    },
    SoakItem {
        what: "a plugin taking 1.5 s per completion under 200 finishing sessions: list p99 within 50 ms",
        package: "herd-cli",
        target: &["--test", "it"],
        filter: "soak::soak_a_slow_completion_plugin",
        env: &[("HERD_SOAK_SLOW_SESSIONS", "200")],
        repeats: 1,
    },
];

/// What every loop above needs built first (test executables build themselves;
/// plugin libraries do not).
const SOAK_BUILD: &[&str] = &[
    "build",
    "--release",
    "--quiet",
    "-p",
    "herd-test-plugin-slowcompletion",
];

/// The fuzz budget per target inside `soak`.
const SOAK_FUZZ_SECONDS: u64 = 30;

/// Runs the soak loops and prints, per loop, how many runs passed and how long it
/// took, then what the loops measured; then the fuzz targets for a short budget.
/// A failing loop does not stop the others: all are reported, then `soak` fails.
fn soak() -> Result<()> {
    cargo(SOAK_BUILD).context("building what the soak loops load")?;
    let figures = shell::target_dir()?.join("soak-figures.txt");
    // A stale file would report an earlier run's figures.
    let _ = std::fs::remove_file(&figures);
    let mut summary = Vec::new();
    let mut n_failed = 0;
    for item in SOAK {
        let start = std::time::Instant::now();
        let mut passed = 0;
        let mut failure = None;
        for _ in 0..item.repeats {
            let mut cmd = shell::command("cargo");
            cmd.args(["test", "--release", "--quiet", "-p", item.package])
                .args(item.target)
                .args(["--", item.filter])
                .env("HERD_SOAK_FIGURES", &figures);
            for (k, v) in item.env {
                cmd.env(k, v);
            }
            match run(&mut cmd) {
                Ok(()) => passed += 1,
                Err(e) => {
                    failure = Some(format!("{e:#}"));
                    break;
                }
            }
        }
        let line = format!(
            "{passed}/{} runs in {:.1}s: {}",
            item.repeats,
            start.elapsed().as_secs_f64(),
            item.what
        );
        summary.push(match failure {
            None => format!("ok   {line}"),
            Some(why) => {
                n_failed += 1;
                format!("FAIL {line} ({why})")
            }
        });
    }
    match fuzz_unavailable() {
        Some(reason) => summary.push(format!("skip fuzzing: {reason}")),
        None => {
            for outcome in fuzz_targets(SOAK_FUZZ_SECONDS, FUZZ_TARGETS)? {
                n_failed += usize::from(!outcome.is_clean());
                summary.push(outcome.line());
            }
        }
    }
    for line in &summary {
        shell::say(line);
    }
    if let Ok(text) = std::fs::read_to_string(&figures) {
        shell::say("measured:");
        for line in text.lines() {
            shell::say(&format!("  {line}"));
        }
    }
    if n_failed > 0 {
        bail!("{n_failed} soak item(s) failed");
    }
    Ok(())
}

/// The cargo-fuzz targets in `fuzz/fuzz_targets/`.
const FUZZ_TARGETS: &[&str] = &["redact", "persistence", "config", "daemon"];

/// The budget per target of `cargo xtask fuzz` without `--seconds`.
const FUZZ_DEFAULT_SECONDS: u64 = 60;

/// `cargo xtask fuzz [--seconds N] [TARGET...]`.
fn fuzz(args: &[String]) -> Result<()> {
    let mut seconds = FUZZ_DEFAULT_SECONDS;
    let mut targets = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                let value = args.next().context("--seconds needs a number")?;
                seconds = value
                    .parse()
                    .with_context(|| format!("--seconds {value}: not a whole number"))?;
            }
            name if FUZZ_TARGETS.contains(&name) => targets.push(name),
            other => bail!(
                "unknown fuzz argument `{other}`; targets: {}",
                FUZZ_TARGETS.join(", ")
            ),
        }
    }
    if targets.is_empty() {
        targets = FUZZ_TARGETS.to_vec();
    }
    if let Some(reason) = fuzz_unavailable() {
        bail!("cannot fuzz: {reason}");
    }
    let outcomes = fuzz_targets(seconds, &targets)?;
    for outcome in &outcomes {
        shell::say(&outcome.line());
    }
    let n_bad = outcomes.iter().filter(|o| !o.is_clean()).count();
    if n_bad > 0 {
        bail!("{n_bad} fuzz target(s) crashed or did not run");
    }
    Ok(())
}

/// Why the fuzz targets cannot run here, if they cannot.
fn fuzz_unavailable() -> Option<String> {
    let works = |args: &[&str]| {
        shell::command("cargo")
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !works(&["+nightly", "--version"]) {
        return Some(
            "no nightly toolchain: `rustup toolchain install nightly`, or without the \
             network `rustup toolchain link nightly \"$(rustc --print sysroot)\"` and \
             `export RUSTC_BOOTSTRAP=1` (see fuzz/README.md)"
                .to_owned(),
        );
    }
    if !works(&["+nightly", "fuzz", "--version"]) {
        return Some(
            "cargo-fuzz is not installed: `cargo install cargo-fuzz --locked` (see fuzz/README.md)"
                .to_owned(),
        );
    }
    None
}

/// How one fuzz target's run went.
#[derive(Debug)]
struct FuzzOutcome {
    target: String,
    seconds: u64,
    /// Executions libFuzzer reported (`None`: it never reported, e.g. the build failed).
    n_runs: Option<u64>,
    /// The input libFuzzer saved for a crash, if any.
    artifact: Option<String>,
    exited_ok: bool,
}

impl FuzzOutcome {
    fn is_clean(&self) -> bool {
        self.exited_ok && self.artifact.is_none()
    }

    fn line(&self) -> String {
        let runs = self
            .n_runs
            .map_or_else(|| "no".to_owned(), |n| n.to_string());
        match (&self.artifact, self.exited_ok) {
            (None, true) => format!(
                "ok   fuzz {}: {runs} executions in {} s, 0 crashes",
                self.target, self.seconds
            ),
            (Some(artifact), _) => format!(
                "FAIL fuzz {}: crashed after {runs} executions; input saved to {artifact} (rerun: cargo +nightly fuzz run {} {artifact})",
                self.target, self.target
            ),
            (None, false) => format!(
                "FAIL fuzz {}: did not run to its budget ({runs} executions; see the output above)",
                self.target
            ),
        }
    }
}

/// Runs each of `targets` for `seconds` with `cargo +nightly fuzz run`, its corpus
/// in `fuzz/corpus/<target>` (kept between runs) and the checked-in seeds of
/// `fuzz/seeds/<target>`. The `daemon` target drives a debug `herd` (overflow
/// checks on), built first when it is among `targets`.
fn fuzz_targets(seconds: u64, targets: &[&str]) -> Result<Vec<FuzzOutcome>> {
    use std::io::BufRead;
    let herd = shell::target_dir()?.join("debug").join("herd");
    if targets.contains(&"daemon") {
        cargo(&["build", "--quiet", "-p", "herd-cli", "--bin", "herd"])
            .context("building the herd binary the daemon target drives")?;
    }
    let mut outcomes = Vec::new();
    for &target in targets {
        let corpus = PathBuf::from("fuzz/corpus").join(target);
        std::fs::create_dir_all(&corpus)
            .with_context(|| format!("cannot create {}", corpus.display()))?;
        let seeds = PathBuf::from("fuzz/seeds").join(target);
        let mut cmd = shell::command("cargo");
        cmd.args(["+nightly", "fuzz", "run", target])
            .arg(&corpus)
            .args(seeds.is_dir().then_some(&seeds))
            .args([
                "--".to_owned(),
                format!("-max_total_time={seconds}"),
                "-print_final_stats=1".to_owned(),
            ])
            .env("HERD_FUZZ_BIN", &herd)
            .stderr(std::process::Stdio::piped());
        shell::say(&format!(
            "$ cargo +nightly fuzz run {target} {} -- -max_total_time={seconds}",
            corpus.display()
        ));
        let mut child = cmd.spawn().context("cannot start cargo +nightly fuzz")?;
        let stderr = child.stderr.take().context("cargo fuzz has no stderr")?;
        let mut outcome = FuzzOutcome {
            target: target.to_owned(),
            seconds,
            n_runs: None,
            artifact: None,
            exited_ok: false,
        };
        for line in std::io::BufReader::new(stderr).lines() {
            let line = line.context("reading cargo fuzz's output")?;
            if let Some(n) = line.strip_prefix("stat::number_of_executed_units:") {
                outcome.n_runs = n.trim().parse().ok();
            }
            if let Some(rest) = line.split("Test unit written to ").nth(1) {
                outcome.artifact = Some(rest.trim().to_owned());
            }
            // libFuzzer's progress lines (`#1234 NEW ...`) and coverage notes are
            // noise here; everything else (build errors, crash reports) is shown.
            let noise =
                line.starts_with('#') || line.starts_with("\tNEW_FUNC") || line.starts_with('"');
            if !noise {
                shell::say(&line);
            }
        }
        outcome.exited_ok = child.wait().context("waiting for cargo fuzz")?.success();
        outcomes.push(outcome);
    }
    Ok(outcomes)
}
