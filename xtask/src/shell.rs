//! Running child commands for xtask, with the command echoed first.

use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

/// Writes one line for the maintainer on stderr.
pub(crate) fn say(line: &str) {
    let mut err = std::io::stderr().lock();
    // A closed stderr leaves nobody to tell; ignoring the error is all we can do.
    let _ = writeln!(err, "{line}");
}

/// A command for `program`; xtask is allowed to spawn tools directly.
#[expect(
    clippy::disallowed_methods,
    reason = "xtask runs cargo and system tools; it is not part of herd's runtime"
)]
pub(crate) fn command(program: &str) -> Command {
    Command::new(program)
}

/// Runs `cmd`, echoing it, and fails when it exits non-zero.
pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    say(&format!("$ {}", render(cmd)));
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {}", render(cmd)))?;
    if !status.success() {
        bail!("`{}` failed with {status}", render(cmd));
    }
    Ok(())
}

/// Runs `cargo` with `args`.
pub(crate) fn cargo(args: &[&str]) -> Result<()> {
    let mut cmd = command("cargo");
    cmd.args(args);
    run(&mut cmd)
}

/// Runs `cmd` and returns its stdout, failing when it exits non-zero.
pub(crate) fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {}", render(cmd)))?;
    if !out.status.success() {
        bail!(
            "`{}` failed with {}: {}",
            render(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("{} printed non-UTF-8", render(cmd)))
}

/// The cargo target directory, as `cargo metadata` reports it.
pub(crate) fn target_dir() -> Result<PathBuf> {
    let mut cmd = command("cargo");
    cmd.args(["metadata", "--format-version", "1", "--no-deps"]);
    let meta: serde_json::Value =
        serde_json::from_str(&output(&mut cmd)?).context("cargo metadata printed invalid JSON")?;
    meta["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("cargo metadata has no target_directory")
}

fn render(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}
