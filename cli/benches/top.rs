//! How long one redraw of `herd top` takes with 1,000 sessions (target
//! <= 50 ms).
//!
//! The bench compiles `herd top`'s own model and renderer (`cli/src/top/model.rs`
//! and `render.rs`, by `#[path]`: they name nothing else of the binary) and draws
//! into ratatui's `TestBackend`, so the figure is the drawing itself, without a
//! terminal's write speed. The rows are what a `list` answers for 1,000 sessions,
//! half running (with CPU and memory figures), named, with output lines.
//!
//! Figures (one `herd-bench` line each, read by `cargo xtask bench`):
//! - `top.redraw_1000`: one redraw after a new listing (the filter and sort are
//!   rebuilt, then the frame drawn) at 120x40, with the pane following a PTY
//!   session, median of 200, the p99 in the note;
//! - `top.redraw_1000_80x24`: the same at 80x24;
//! - `top.redraw_1000_filtered`: with a filter typed (`/` matching one row in ten).
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

#[allow(dead_code, reason = "the bench uses part of the model")]
#[path = "../src/top/model.rs"]
mod model;
#[allow(dead_code, reason = "the bench uses part of the renderer")]
#[path = "../src/top/render.rs"]
mod render;

use std::collections::HashMap;
use std::time::Instant;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

const N_SESSIONS: usize = 1_000;
const N_REDRAWS: usize = 200;

/// A listing of `n` sessions as the daemon answers it.
fn rows(n: usize) -> Vec<model::Row> {
    let rows: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let running = i % 2 == 0;
            json!({
                "session_id": format!("proc_{i:012x}"),
                "name": (i % 3 == 0).then(|| format!("job-{i}")),
                "command": format!("cargo test --workspace -- --test-threads {i} some_long_filter_name"),
                "pid": 10_000 + i,
                "mode": if i % 5 == 0 { "pty" } else { "pipe" },
                "owner_task_id": format!("agent-{}", i % 7),
                "uptime_seconds": i * 13,
                "status": if running { "running" } else { "exited" },
                "output_preview": format!("compiling crate {i} of {n}\n\u{1b}[32m   Compiling\u{1b}[0m herd-core v0.1.0 ({i})\n"),
                "exit_code": (!running).then_some(i32::try_from(i % 3).unwrap_or(0)),
                "duration_seconds": (!running).then_some(i),
                "completion_reason": (!running).then_some("exited"),
            })
        })
        .collect();
    serde_json::from_value(serde_json::Value::Array(rows)).expect("the rows are a list answer")
}

fn usage(rows: &[model::Row]) -> HashMap<String, model::Usage> {
    rows.iter()
        .filter(|r| r.is_running())
        .enumerate()
        .map(|(i, r)| {
            (
                r.session_id.clone(),
                model::Usage {
                    cpu_percent: (i % 100) as f64 * 1.5,
                    rss_bytes: ((i as u64 + 1) * 3) << 20,
                    n_processes: 1 + i % 4,
                },
            )
        })
        .collect()
}

/// Median and p99 of `N_REDRAWS` redraws, in milliseconds.
fn measure(cols: u16, lines: u16, filter: &str) -> (f64, f64) {
    let listing = rows(N_SESSIONS);
    let mut m = model::Model::new(Instant::now());
    m.set_rows(listing.clone(), Instant::now());
    m.set_usage(usage(&listing));
    m.set_filter(filter);
    m.move_selection(5);
    let mut pane = model::Pane::new("proc_000000000000", true);
    for i in 0..200 {
        pane.feed(&format!(
            "\u{1b}[1;3{}mline {i}\u{1b}[0m of the build\r\n",
            i % 8
        ));
    }
    pane.feed("\r[=====>      ] 42%");
    let mut terminal = Terminal::new(TestBackend::new(cols, lines)).expect("a test backend");
    let mut samples = Vec::with_capacity(N_REDRAWS);
    for _ in 0..N_REDRAWS {
        let rows = listing.clone();
        let start = Instant::now();
        m.set_rows(rows, Instant::now());
        let chrome = render::Chrome {
            pane: Some(&pane),
            zoomed: false,
            status: "",
            prompt: None,
            note: "",
            now: Instant::now(),
        };
        terminal
            .draw(|frame| render::draw(frame, &mut m, &chrome))
            .expect("the test backend draws");
        samples.push(start.elapsed().as_secs_f64() * 1e3);
    }
    samples.sort_by(f64::total_cmp);
    let p99 = samples[(samples.len() * 99 / 100).min(samples.len() - 1)];
    (samples[samples.len() / 2], p99)
}

fn report(name: &str, value: f64, note: &str) {
    let line = json!({
        "name": name, "unit": "ms", "value": value, "target": "<= 50 ms", "note": note,
    });
    println!("herd-bench {line}");
}

fn main() {
    let only = std::env::var("HERD_BENCH_ONLY").unwrap_or_default();
    let wanted = |name: &str| only.is_empty() || only.split(',').any(|o| name.contains(o));
    for (name, cols, lines, filter) in [
        ("top.redraw_1000", 120, 40, ""),
        ("top.redraw_1000_80x24", 80, 24, ""),
        ("top.redraw_1000_filtered", 120, 40, "job-1"),
    ] {
        if !wanted(name) {
            continue;
        }
        let (median, p99) = measure(cols, lines, filter);
        report(
            name,
            median,
            &format!(
                "{N_SESSIONS} sessions, {cols}x{lines}, a listing rebuilt and drawn each time; median of {N_REDRAWS}, p99 {p99:.2} ms"
            ),
        );
    }
}
