//! Benchmark: redaction throughput and the cost of one call into a plugin.
//!
//! Figures (herd-bench line protocol, read by `cargo xtask bench`):
//! - `hooks.redact_clean_throughput`: 256 MiB of realistic logs with no secrets
//!   (target >= 300 MB/s), baseline a `memchr` pass counting newlines over the same
//!   bytes (the floor of any scan);
//! - `hooks.redact_dense_throughput`: logs with a secret on every few lines
//!   (target >= 100 MB/s), same baseline;
//! - `hooks.plugin_call`: one transform call through the ABI into a no-op
//!   plugin (target <= 1 us), baseline a direct (not inlined) Rust call. Needs
//!   `cargo build -p herd-test-plugin-noop`; without the library that figure alone
//!   is skipped with a line saying so.
//! - `hooks.pipeline_apply_one_plugin`: `Pipeline::apply` of a short output with
//!   that plugin in the chain (it runs on a worker thread so a time budget can be
//!   enforced), baseline the same call without hooks; informative, no target.

#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use herd_hooks::{RedactMode, Redactor};

const CLEAN_BYTES: usize = 256 * 1024 * 1024;
const DENSE_BYTES: usize = 64 * 1024 * 1024;
const RUNS: usize = 3;

/// Lines that look like what agents run: builds, tests, git, servers, JSON logs.
const CLEAN_LINES: &[&str] = &[
    "   Compiling serde_json v1.0.117 (/home/u/.cargo/registry/src/index.crates.io/serde_json-1.0.117)",
    "test redact::tests::mode_detection ... ok",
    "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "2024-05-01T12:00:00.123Z INFO  server listening on 0.0.0.0:8080 request_id=123e4567-e89b-12d3-a456-426614174000",
    "{\"level\":\"info\",\"ts\":1714564800.123,\"msg\":\"GET /api/v1/users 200\",\"latency_ms\":12,\"user_agent\":\"curl/8.5.0\"}",
    "npm WARN deprecated inflight@1.0.6: This module is not supported, and leaks memory.",
    "  --> src/registry/session.rs:412:17",
    "Downloading https://files.pythonhosted.org/packages/ab/cd/requests-2.31.0-py3-none-any.whl (62 kB)",
    "[=====================>        ] 73% 1.2 MiB/s eta 0:00:04",
    "HOME=/home/u PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8",
    "FAILED tests/test_api.py::test_login - AssertionError: expected 200, got 401",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 layer pulled",
];

const SECRET_LINES: &[&str] = &[
    "export OPENAI_API_KEY=sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "remote: https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/o/r.git",
    "DATABASE_URL=postgres://app:s3cr3tpassw0rd@db.internal:5432/app",
    "aws configure set aws_access_key_id AKIAABCDEFGHIJKLMNOP",
    "x-api-key: 0123456789abcdef0123456789abcdef",
];

fn build(n_bytes: usize, secret_every: Option<usize>) -> String {
    let mut text = String::with_capacity(n_bytes + 256);
    let mut idx = 0usize;
    while text.len() < n_bytes {
        match secret_every {
            Some(every) if idx.is_multiple_of(every) => {
                text.push_str(SECRET_LINES[(idx / every) % SECRET_LINES.len()])
            }
            _ => text.push_str(CLEAN_LINES[idx % CLEAN_LINES.len()]),
        }
        text.push('\n');
        idx += 1;
    }
    text
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn mb_per_s(n_bytes: usize, elapsed: Duration) -> f64 {
    n_bytes as f64 / 1e6 / elapsed.as_secs_f64()
}

fn baseline(text: &str) -> f64 {
    median(
        (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                black_box(memchr::memchr_iter(b'\n', black_box(text.as_bytes())).count());
                mb_per_s(text.len(), start.elapsed())
            })
            .collect(),
    )
}

fn throughput(redactor: &Redactor, text: &str) -> f64 {
    median(
        (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                black_box(redactor.redact(black_box(text), RedactMode::Code).len());
                mb_per_s(text.len(), start.elapsed())
            })
            .collect(),
    )
}

fn line(
    name: &str,
    unit: &str,
    value: f64,
    baseline: Option<(f64, &str)>,
    target: &str,
    note: &str,
) {
    let (b, bname, ratio) = match baseline {
        Some((b, n)) => (
            format!("{b:.3}"),
            format!("\"{n}\""),
            format!("{:.4}", value / b),
        ),
        None => ("null".into(), "null".into(), "null".into()),
    };
    let target = if target.is_empty() {
        "null".to_owned()
    } else {
        format!("\"{target}\"")
    };
    println!(
        "herd-bench {{\"name\":\"{name}\",\"unit\":\"{unit}\",\"value\":{value:.3},\"baseline\":{b},\"baseline_name\":{bname},\"ratio\":{ratio},\"target\":{target},\"note\":\"{note}\"}}"
    );
}

/// `target/<profile>/lib<name>.so` next to this bench executable.
fn cdylib(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.parent()?;
    let path = dir.join(format!("lib{name}.so"));
    path.exists().then_some(path)
}

#[inline(never)]
fn direct_noop(output: &str) -> Option<String> {
    black_box(output);
    None
}

fn plugin_call() {
    let n_calls = 1_000_000u32;
    let direct = median(
        (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..n_calls {
                    black_box(direct_noop(black_box("some output line")));
                }
                start.elapsed().as_secs_f64() * 1e9 / f64::from(n_calls)
            })
            .collect(),
    );
    let Some(path) = cdylib("herd_test_plugin_noop") else {
        println!(
            "# hooks.plugin_call skipped: libherd_test_plugin_noop.so not found next to the bench; run `cargo build --release -p herd-test-plugin-noop` (or without --release for a debug bench) first"
        );
        return;
    };
    let hook = match herd_hooks::plugin_hook(&path) {
        Ok(hook) => hook,
        Err(err) => {
            println!(
                "# hooks.plugin_call skipped: cannot load {}: {err}",
                path.display()
            );
            return;
        }
    };
    let via_abi = median(
        (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..n_calls {
                    black_box(hook.call_raw(black_box("some output line")));
                }
                start.elapsed().as_secs_f64() * 1e9 / f64::from(n_calls)
            })
            .collect(),
    );
    let n_applies = 20_000u32;
    let chain = herd_hooks::HookChain::new(vec![std::sync::Arc::new(hook.clone())]);
    let pipeline =
        herd_hooks::Pipeline::with_redactor(chain, std::sync::Arc::new(Redactor::builtin()));
    let bare = herd_hooks::Pipeline::redaction_only();
    let ctx = herd_hooks::OutputContext {
        route: herd_hooks::Route::Poll,
        command: "make",
        return_code: None,
        owner_task_id: "task",
        session_id: "proc_0123456789ab",
        backend: "local",
    };
    let per_apply = |p: &herd_hooks::Pipeline| {
        median(
            (0..RUNS)
                .map(|_| {
                    let start = Instant::now();
                    for _ in 0..n_applies {
                        black_box(
                            p.show(
                                &ctx,
                                herd_hooks::Window::all(black_box("some output line\n")),
                            )
                            .len(),
                        );
                    }
                    start.elapsed().as_secs_f64() * 1e9 / f64::from(n_applies)
                })
                .collect(),
        )
    };
    let with_plugin = per_apply(&pipeline);
    let without = per_apply(&bare);
    line(
        "hooks.pipeline_apply_one_plugin",
        "ns",
        with_plugin,
        Some((without, "Pipeline::apply without hooks")),
        "",
        "one short output through one no-op plugin on its budgeted worker thread, then redaction",
    );
    line(
        "hooks.plugin_call",
        "ns",
        via_abi,
        Some((direct, "direct Rust fn call")),
        "<= 1000 ns",
        "one transform call through the abi_stable root module into a no-op plugin",
    );
}

fn main() {
    let redactor = Redactor::builtin();

    let clean = build(CLEAN_BYTES, None);
    assert_eq!(
        redactor.redact(&clean, RedactMode::Code).len(),
        clean.len(),
        "clean logs must stay unchanged"
    );
    let base = baseline(&clean);
    let value = throughput(&redactor, &clean);
    line(
        "hooks.redact_clean_throughput",
        "MB/s",
        value,
        Some((base, "memchr newline count over the same bytes")),
        ">= 300 MB/s",
        "256 MiB realistic logs, no secrets",
    );
    drop(clean);

    let dense = build(DENSE_BYTES, Some(4));
    let base = baseline(&dense);
    let value = throughput(&redactor, &dense);
    line(
        "hooks.redact_dense_throughput",
        "MB/s",
        value,
        Some((base, "memchr newline count over the same bytes")),
        ">= 100 MB/s",
        "64 MiB logs, a secret every 4th line",
    );
    drop(dense);

    plugin_call();
}
