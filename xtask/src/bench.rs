//! `cargo xtask bench`: runs every benchmark and prints each figure beside the
//! baseline measured in the same run.
//!
//! Bench binaries (`benches/*.rs`, `harness = false`) print one stdout line per
//! figure: `herd-bench {json}` with `name`, `unit`, `value`, and optionally
//! `baseline`, `baseline_name`, `ratio`, `target`, `note`. Other lines pass through.
//! Nothing here judges a figure; the table shows the target beside it.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use crate::shell;

mod compare;

const PREFIX: &str = "herd-bench ";

/// One measured figure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Figure {
    pub(crate) name: String,
    pub(crate) unit: String,
    pub(crate) value: f64,
    #[serde(default)]
    pub(crate) baseline: Option<f64>,
    #[serde(default)]
    pub(crate) baseline_name: Option<String>,
    #[serde(default)]
    pub(crate) ratio: Option<f64>,
    #[serde(default)]
    pub(crate) target: Option<String>,
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// Parses one line of bench output; `None` for lines that are not figures.
pub(crate) fn parse_line(line: &str) -> Option<Result<Figure>> {
    let json = line.strip_prefix(PREFIX)?;
    Some(serde_json::from_str(json).with_context(|| format!("malformed bench line: {line}")))
}

pub(crate) fn run(args: &[String]) -> Result<()> {
    if let Some(at) = args.iter().position(|a| a == "--compare") {
        let (Some(before), Some(after)) = (args.get(at + 1), args.get(at + 2)) else {
            anyhow::bail!(
                "--compare takes two files: `cargo xtask bench --compare BEFORE.json AFTER.json`, each written by `cargo xtask bench --json` (a side of several runs: comma-separated files)"
            );
        };
        return compare::run(before, after);
    }
    let json = args.iter().any(|a| a == "--json");
    // The ABI-call figure loads a plugin library built with the same profile; cargo
    // bench does not place cdylibs beside the bench binaries by itself.
    shell::cargo(&[
        "build",
        "--release",
        "--quiet",
        "-p",
        "herd-plugin-example",
        "-p",
        "herd-test-plugin-noop",
    ])?;
    let mut cmd = shell::command("cargo");
    cmd.args(["bench", "--benches"]);
    let mut packages = args
        .iter()
        .skip_while(|a| *a != "-p")
        .skip(1)
        .take(1)
        .peekable();
    if packages.peek().is_none() {
        cmd.arg("--workspace");
    }
    for p in packages {
        cmd.args(["-p", p]);
    }
    cmd.stdout(Stdio::piped());
    shell::say("$ cargo bench --benches (figures collected from `herd-bench` lines)");
    let mut child = cmd.spawn().context("cannot start cargo bench")?;
    let stdout = child.stdout.take().context("cargo bench has no stdout")?;
    let mut figures = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo bench output")?;
        match parse_line(&line) {
            Some(fig) => {
                let fig = fig?;
                shell::say(&format!("  measured {}", fig.name));
                figures.push(fig);
            }
            None => shell::say(&line),
        }
    }
    let status = child.wait().context("waiting for cargo bench")?;
    print_table(&figures)?;
    if json {
        let dir = shell::target_dir()?.join("bench");
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join("figures.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&figures)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        shell::say(&format!("wrote {}", path.display()));
    }
    anyhow::ensure!(status.success(), "cargo bench failed with {status}");
    Ok(())
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

fn print_table(figures: &[Figure]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<44} {:>12} {:<8} {:>12} {:>8} {:>10}  baseline",
        "figure", "value", "unit", "baseline", "ratio", "target"
    )?;
    for f in figures {
        writeln!(
            out,
            "{:<44} {:>12} {:<8} {:>12} {:>8} {:>10}  {}",
            f.name,
            fmt_num(f.value),
            f.unit,
            f.baseline.map(fmt_num).unwrap_or_else(|| "-".into()),
            f.ratio
                .map(|r| format!("{r:.2}"))
                .unwrap_or_else(|| "-".into()),
            f.target.as_deref().unwrap_or("-"),
            f.baseline_name.as_deref().unwrap_or(""),
        )?;
        if let Some(note) = f.note.as_deref().filter(|n| !n.is_empty()) {
            writeln!(out, "    note: {note}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
