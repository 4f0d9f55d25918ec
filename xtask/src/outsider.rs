//! The plugin an outsider builds: the five-minute guide of
//! `plugins-example/README.md`, run line by line in a fresh directory outside the
//! workspace, with `herd-plugin-abi` resolved from its packaged `.crate` the way it
//! would come from crates.io, then a real daemon applying the plugin on every route.
//!
//! The `.crate` is made by `cargo package` and unpacked; a `.cargo/config.toml` in
//! the directory above the plugin patches `crates-io`'s `herd-plugin-abi` to it, so
//! the guide's commands run unmodified. The plugin's build goes to
//! `target/outsider`, so a second run is incremental.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};

use crate::shell::{self, command, output, run, say};

/// The marker before the guide's code block in the README.
const GUIDE_MARKER: &str = "<!-- five-minute-guide";

/// Runs the outsider plugin check.
pub(crate) fn check(root: &Path) -> Result<()> {
    let target = shell::target_dir()?;
    let herd_dir = target.join("debug");
    ensure!(
        herd_dir.join("herd").is_file(),
        "build the workspace first (target/debug/herd is missing)"
    );
    let guide = guide_commands(&root.join("plugins-example").join("README.md"))?;
    let crate_dir = package_abi(root, &target)?;

    let scratch = std::env::temp_dir().join(format!("herd-outsider-{}", std::process::id()));
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)?;
    }
    std::fs::create_dir_all(scratch.join(".cargo"))?;
    let result = run_guide(&scratch, &crate_dir, &target, &herd_dir, &guide);
    // A daemon left by a failed step must not outlive the check.
    let mut stop = command(&herd_dir.join("herd").to_string_lossy());
    stop.args(["shutdown", "--yes"])
        .env("HERD_HOME", scratch.join("home"));
    let _ = stop.output();
    if result.is_ok() {
        std::fs::remove_dir_all(&scratch)?;
    } else {
        say(&format!(
            "outsider check: files kept in {}",
            scratch.display()
        ));
    }
    result
}

/// The commands of the guide's code block, one per line.
fn guide_commands(readme: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(readme)
        .with_context(|| format!("cannot read {}", readme.display()))?;
    let after = text
        .split_once(GUIDE_MARKER)
        .with_context(|| format!("{} has no `{GUIDE_MARKER}` marker", readme.display()))?
        .1;
    let block = after
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .with_context(|| "the guide marker is not followed by a ```sh block")?
        .0;
    let commands: Vec<String> = block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    ensure!(!commands.is_empty(), "the guide block is empty");
    Ok(commands)
}

/// `cargo package -p herd-plugin-abi`, unpacked into `target/outsider/registry`;
/// the unpacked crate's directory.
fn package_abi(root: &Path, target: &Path) -> Result<PathBuf> {
    let mut package = command("cargo");
    package
        .args([
            "package",
            "-p",
            "herd-plugin-abi",
            "--no-verify",
            "--allow-dirty",
        ])
        .current_dir(root);
    run(&mut package)?;
    let packaged = target.join("package");
    let file = std::fs::read_dir(&packaged)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("herd-plugin-abi-") && n.ends_with(".crate"))
        })
        .max()
        .context("cargo package wrote no herd-plugin-abi .crate")?;
    let unpack = target.join("outsider").join("registry");
    // A crate of an earlier run is replaced whole, and its files get the time of
    // this extraction: `cargo package` stamps them all 2006, so with the archive's
    // times cargo would take an earlier run's build of it as fresh.
    if unpack.exists() {
        std::fs::remove_dir_all(&unpack)?;
    }
    std::fs::create_dir_all(&unpack)?;
    let mut tar = command("tar");
    tar.arg("xzmf").arg(&file).arg("-C").arg(&unpack);
    run(&mut tar)?;
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .context("the .crate has no name")?;
    Ok(unpack.join(stem))
}

fn run_guide(
    scratch: &Path,
    crate_dir: &Path,
    target: &Path,
    herd_dir: &Path,
    guide: &[String],
) -> Result<()> {
    std::fs::write(
        scratch.join(".cargo").join("config.toml"),
        format!(
            "# As if from crates.io: the packaged crate, unpacked.\n[patch.crates-io]\nherd-plugin-abi = {{ path = {:?} }}\n\n[build]\ntarget-dir = {:?}\n",
            crate_dir.display().to_string(),
            target.join("outsider").join("build").display().to_string()
        ),
    )?;
    let home = scratch.join("home");
    let path = format!(
        "{}:{}",
        herd_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut last_out = String::new();
    for line in guide {
        say(&format!("outsider $ {line}"));
        let mut step = command("bash");
        step.args(["-c", line])
            .current_dir(scratch)
            .env("HERD_HOME", &home)
            .env("PATH", &path)
            .env_remove("CARGO_TARGET_DIR");
        last_out = output(&mut step).with_context(|| format!("guide step `{line}` failed"))?;
        say(last_out.trim_end());
    }
    // The last step started a job; its id is the first word it printed.
    let id = last_out
        .split_whitespace()
        .find(|w| w.starts_with("proc_"))
        .with_context(|| format!("the guide's last step printed no session id: {last_out}"))?
        .to_owned();
    let herd = |args: &[&str]| -> Result<serde_json::Value> {
        let mut cmd = command(&herd_dir.join("herd").to_string_lossy());
        cmd.args(args).env("HERD_HOME", &home).current_dir(scratch);
        let text = output(&mut cmd)?;
        serde_json::from_str(&text).with_context(|| format!("herd {args:?} printed {text}"))
    };
    let want = "a\n\nb\n";
    let waited = herd(&["wait", &id, "--json"])?;
    let polled = herd(&["poll", &id, "--json"])?;
    let paged = herd(&["logs", &id, "--json", "--limit", "10"])?;
    let listed = herd(&["ps", "--all", "--json"])?;
    let row = listed["processes"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["session_id"] == id.as_str()))
        .cloned()
        .unwrap_or_default();
    let routes = [
        (
            "wait",
            waited["output"].as_str().unwrap_or_default().to_owned(),
        ),
        (
            "poll",
            polled["output_preview"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ),
        (
            "log page",
            format!("{}\n", paged["output"].as_str().unwrap_or_default()),
        ),
        (
            "list preview",
            row["output_preview"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ),
    ];
    for (route, got) in &routes {
        if got != want {
            bail!(
                "the outsider plugin did not apply on the {route} route: got {got:?}, want {want:?}"
            );
        }
    }
    let plugins = herd(&["plugins", "list", "--json"])?;
    ensure!(
        plugins["plugins"][0]["status"] == "loaded",
        "the plugin is not loaded: {plugins}"
    );
    say(
        "outsider check: the guide's plugin built from the packaged herd-plugin-abi and applied on wait, poll, log and list routes",
    );
    Ok(())
}
