//! `cargo xtask bench --compare BEFORE.json AFTER.json`: two runs of the suite
//! (each written by `cargo xtask bench --json`), figure by figure.
//!
//! A figure that carries an in-run ratio (herd against its baseline measured in
//! the same run) is compared by that ratio, which a busy machine disturbs least;
//! others by their value. Whether up is better follows the unit: times, sizes and
//! CPU shares (`cpu s/s`) are better lower, rates and `x faster` better higher; a
//! bare `ratio` or `x` unit says nothing of its direction, so the figure's target
//! decides (`>= 0.9` is better higher, `<= 2x` lower), and without one its change
//! is shown without a verdict.

use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

use super::Figure;

/// How far a change may go before it counts as better or worse (the suite's
/// figures move by about this much between runs on an idle machine).
const NOISE: f64 = 0.10;

/// Which way a unit improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Better {
    Lower,
    Higher,
    Unknown,
}

pub(crate) fn better(unit: &str) -> Better {
    match unit {
        "ns" | "us" | "ms" | "s" | "B" | "KiB" | "KB" | "MiB" | "MB" | "GiB" | "GB" => {
            Better::Lower
        }
        // CPU seconds per second of wall time: a share of a core spent, not a rate of work.
        "cpu s/s" => Better::Lower,
        u if u.ends_with("/s") => Better::Higher,
        "x faster" => Better::Higher,
        _ => Better::Unknown,
    }
}

/// Which way a figure improves: by its unit, else by the comparison its target
/// states (`>= 0.9`, `<= 2x`), else unknown.
pub(crate) fn direction(figure: &Figure) -> Better {
    match better(&figure.unit) {
        Better::Unknown => match figure.target.as_deref().map(str::trim_start) {
            Some(t) if t.starts_with('>') => Better::Higher,
            Some(t) if t.starts_with('<') => Better::Lower,
            _ => Better::Unknown,
        },
        known => known,
    }
}

/// One figure of both runs: the compared quantity before and after.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) by_ratio: bool,
    pub(crate) before: f64,
    pub(crate) after: f64,
    pub(crate) verdict: &'static str,
}

/// Pairs the figures of two runs by name, in the order of `after`.
pub(crate) fn rows(before: &[Figure], after: &[Figure]) -> Vec<Row> {
    let mut out = Vec::new();
    for a in after {
        let Some(b) = before.iter().find(|b| b.name == a.name) else {
            continue;
        };
        let (by_ratio, was, now) = match (b.ratio, a.ratio) {
            (Some(was), Some(now)) => (true, was, now),
            _ => (false, b.value, a.value),
        };
        out.push(Row {
            name: a.name.clone(),
            by_ratio,
            before: was,
            after: now,
            verdict: verdict(direction(a), was, now),
        });
    }
    out
}

fn verdict(better: Better, was: f64, now: f64) -> &'static str {
    if !(was.is_finite() && now.is_finite()) || was == 0.0 {
        return "-";
    }
    let change = now / was;
    if (1.0 - NOISE..=1.0 + NOISE).contains(&change) {
        return "same";
    }
    match (better, change > 1.0) {
        (Better::Unknown, _) => "-",
        (Better::Lower, true) | (Better::Higher, false) => "WORSE",
        (Better::Lower, false) | (Better::Higher, true) => "better",
    }
}

fn load(path: &Path) -> Result<Vec<Figure>> {
    let bytes = std::fs::read(path).with_context(|| {
        format!(
            "cannot read {}: write it with `cargo xtask bench --json` (target/bench/figures.json)",
            path.display()
        )
    })?;
    serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a list of bench figures", path.display()))
}

pub(crate) fn run(before: &Path, after: &Path) -> Result<()> {
    let (was, now) = (load(before)?, load(after)?);
    let table = rows(&was, &now);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<44} {:>6} {:>12} {:>12} {:>8}  verdict (noise ±{:.0}%)",
        "figure",
        "by",
        "before",
        "after",
        "change",
        NOISE * 100.0
    )?;
    for r in &table {
        writeln!(
            out,
            "{:<44} {:>6} {:>12} {:>12} {:>8}  {}",
            r.name,
            if r.by_ratio { "ratio" } else { "value" },
            super::fmt_num(r.before),
            super::fmt_num(r.after),
            format!("{:.2}", r.after / r.before),
            r.verdict
        )?;
    }
    for (side, only, other) in [("before", &was, &now), ("after", &now, &was)] {
        for f in only
            .iter()
            .filter(|f| !other.iter().any(|o| o.name == f.name))
        {
            writeln!(out, "only {side}: {}", f.name)?;
        }
    }
    let worse = table.iter().filter(|r| r.verdict == "WORSE").count();
    writeln!(
        out,
        "{} figures compared, {worse} worse beyond noise",
        table.len()
    )?;
    Ok(())
}
