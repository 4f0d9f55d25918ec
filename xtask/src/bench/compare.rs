//! `cargo xtask bench --compare BEFORE.json AFTER.json`: two runs of the suite
//! (each written by `cargo xtask bench --json`), figure by figure.
//!
//! Either side may be several runs, comma-separated (`b1.json,b2.json`): then a
//! figure is worse only when every run after is worse than every run before by
//! more than the noise margin, so the spread the runs show on this machine counts
//! as noise too (one run per side is the plain ±10% rule).
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

/// The compared quantity of one figure over a side's runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Span {
    pub(crate) low: f64,
    pub(crate) high: f64,
    /// How many runs measured it.
    pub(crate) runs: usize,
}

impl Span {
    fn of(values: &[f64]) -> Option<Span> {
        let low = values.iter().copied().reduce(f64::min)?;
        let high = values.iter().copied().reduce(f64::max)?;
        Some(Span {
            low,
            high,
            runs: values.len(),
        })
    }

    /// The middle of the span (the value itself for one run).
    pub(crate) fn mid(&self) -> f64 {
        (self.low + self.high) / 2.0
    }
}

/// One figure of both sides: the compared quantity before and after.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) by_ratio: bool,
    pub(crate) before: Span,
    pub(crate) after: Span,
    pub(crate) verdict: &'static str,
}

/// Pairs the figures of two runs by name, in the order of `after`.
#[cfg(test)]
pub(crate) fn rows(before: &[Figure], after: &[Figure]) -> Vec<Row> {
    rows_of_runs(&[before.to_vec()], &[after.to_vec()])
}

/// Pairs the figures of two sides of one or more runs each by name, in the order
/// the after runs first name them. A figure is compared by its in-run ratio when
/// every run of both sides has one, else by its value.
pub(crate) fn rows_of_runs(before: &[Vec<Figure>], after: &[Vec<Figure>]) -> Vec<Row> {
    let mut names: Vec<&Figure> = Vec::new();
    for f in after.iter().flatten() {
        if !names.iter().any(|n| n.name == f.name) {
            names.push(f);
        }
    }
    let mut out = Vec::new();
    for a in names {
        let (was, now) = (pick(before, &a.name), pick(after, &a.name));
        if was.is_empty() {
            continue;
        }
        let by_ratio = was.iter().chain(&now).all(|f| f.ratio.is_some());
        let quantity = |figs: &[&Figure]| -> Vec<f64> {
            figs.iter()
                .map(|f| {
                    if by_ratio {
                        f.ratio.unwrap_or(f.value)
                    } else {
                        f.value
                    }
                })
                .collect()
        };
        let (Some(was), Some(now)) = (Span::of(&quantity(&was)), Span::of(&quantity(&now))) else {
            continue;
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

/// The figure called `name` in each run that has it.
fn pick<'f>(runs: &'f [Vec<Figure>], name: &str) -> Vec<&'f Figure> {
    runs.iter()
        .filter_map(|run| run.iter().find(|f| f.name == name))
        .collect()
}

/// Worse (or better) only when the whole after span lies beyond the whole before
/// span by more than [`NOISE`]; with one run a side that is the plain ±10% rule.
fn verdict(better: Better, was: Span, now: Span) -> &'static str {
    let all = [was.low, was.high, now.low, now.high];
    if all.iter().any(|v| !v.is_finite()) || was.low <= 0.0 || was.high <= 0.0 {
        return "-";
    }
    let up = now.low / was.high > 1.0 + NOISE;
    let down = now.high / was.low < 1.0 - NOISE;
    match (better, up, down) {
        (_, false, false) => "same",
        (Better::Unknown, _, _) => "-",
        (Better::Lower, true, _) | (Better::Higher, _, true) => "WORSE",
        (Better::Lower, _, true) | (Better::Higher, true, _) => "better",
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

/// A side's runs: one file, or several separated by commas.
fn load_side(paths: &str) -> Result<Vec<Vec<Figure>>> {
    paths
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| load(Path::new(p)))
        .collect()
}

/// A span as the table shows it: the value, or `low..high` over several runs.
fn fmt_span(span: Span) -> String {
    if span.runs > 1 {
        format!(
            "{}..{}",
            super::fmt_num(span.low),
            super::fmt_num(span.high)
        )
    } else {
        super::fmt_num(span.low)
    }
}

pub(crate) fn run(before: &str, after: &str) -> Result<()> {
    let (was, now) = (load_side(before)?, load_side(after)?);
    anyhow::ensure!(
        !was.is_empty() && !now.is_empty(),
        "--compare takes a file (or comma-separated files) for each side"
    );
    let table = rows_of_runs(&was, &now);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<44} {:>6} {:>16} {:>16} {:>8}  verdict (noise ±{:.0}%, {} run(s) before, {} after)",
        "figure",
        "by",
        "before",
        "after",
        "change",
        NOISE * 100.0,
        was.len(),
        now.len()
    )?;
    for r in &table {
        writeln!(
            out,
            "{:<44} {:>6} {:>16} {:>16} {:>8}  {}",
            r.name,
            if r.by_ratio { "ratio" } else { "value" },
            fmt_span(r.before),
            fmt_span(r.after),
            format!("{:.2}", r.after.mid() / r.before.mid()),
            r.verdict
        )?;
    }
    let named = |runs: &[Vec<Figure>], name: &str| runs.iter().flatten().any(|f| f.name == name);
    for (side, only, other) in [("before", &was, &now), ("after", &now, &was)] {
        let mut shown: Vec<&str> = Vec::new();
        for f in only.iter().flatten() {
            if !named(other, &f.name) && !shown.contains(&f.name.as_str()) {
                shown.push(&f.name);
                writeln!(out, "only {side}: {}", f.name)?;
            }
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
