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
//! - `hooks.redact_stream_clean_throughput` / `hooks.redact_stream_dense_throughput`:
//!   the same clean and dense texts pushed through a `ShownStream` in 64 KiB chunks,
//!   then `finish`; baseline `Redactor::redact` of the whole text, measured in
//!   alternation with it in the same run (window-safe redaction costs at
//!   most 2x, so target >= 0.5 ratio);
//! - `hooks.readout_log_throughput` / `hooks.readout_clean_throughput`:
//!   `Pipeline::show_log_blocks` (the read-out of a finished log, `herd logs`) on
//!   one thread over 256 MiB of the e2e bench's log line (`yes 'INFO ... status=ok'`)
//!   and of the clean logs, baseline the same memchr pass; what one core of the
//!   daemon redacts a log at;
//! - `hooks.window_tail_2000`: one `Pipeline::show(ctx, Window::last_chars(tail,
//!   2000))` over the last 1 MiB of the dense text, baseline cutting the last 2,000
//!   characters first and redacting the cut (what routes did before); target <= 2x;
//! - `hooks.window_page_200_lines`: `Window::lines` of 200 lines from the middle of
//!   that tail against cutting the same 200 lines first and redacting them; target
//!   <= 2x.
//!
//! The windows are redacted with their context (whole lines, up to
//! `LINE_CONTEXT_BYTES` each way, plus a look back for an open private-key block),
//! so their cost is that of the context, not of the few characters shown.
//!
//! `HERD_BENCH_ONLY=<substring>[,<substring>...]` runs only the figures whose name
//! contains one of them (the texts a selected figure needs are still built).
//! `HERD_BENCH_CLOCK=thread` times the redaction figures (not the plugin ones) by the
//! calling thread's CPU time instead of wall time: steadier on a machine shared
//! with other work (redaction runs on the calling thread).

#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use herd_hooks::{OutputContext, Pipeline, RedactMode, Redactor, Route, Window};

const CLEAN_BYTES: usize = 256 * 1024 * 1024;
const DENSE_BYTES: usize = 64 * 1024 * 1024;
const RUNS: usize = 3;
/// The chunk size of the streamed figures (what a reader hands a stream at a time).
const STREAM_CHUNK_BYTES: usize = 64 * 1024;
/// The text the window figures cut their windows from: the last MiB of the dense logs.
const TAIL_BYTES: usize = 1024 * 1024;
/// The completion tail's budget (characters).
const TAIL_CHARS: usize = 2000;
/// The lines of one log page.
const PAGE_LINES: usize = 200;
/// Calls timed per run of a window figure.
const WINDOW_CALLS: u32 = 1000;

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

/// The line of the e2e bench's 1 GiB log (`cli.logs_1gib_vs_cat`).
const READOUT_LOG_LINE: &str =
    "INFO 2026-12-01T10:00:00Z worker-3 processed batch 1234 in 56 ms status=ok";

/// `Pipeline::show_log_blocks` on one thread over `CLEAN_BYTES` of `lines`.
fn readout_figure(pipeline: &Pipeline, name: &str, lines: &[&str]) {
    let mut text = Vec::with_capacity(CLEAN_BYTES + 256);
    let mut idx = 0;
    while text.len() < CLEAN_BYTES {
        text.extend_from_slice(lines[idx % lines.len()].as_bytes());
        text.push(b'\n');
        idx += 1;
    }
    let n_bytes = text.len();
    let base = baseline(std::str::from_utf8(&text).expect("the lines are text"));
    let mut samples = Vec::new();
    for _ in 0..RUNS {
        let start = Stamp::now();
        let shown = pipeline
            .show_log_blocks("make", text, false, true, 1)
            .expect("a redaction-only pipeline reads out in blocks");
        samples.push(mb_per_s(n_bytes, start.elapsed()));
        assert_eq!(shown.len(), n_bytes, "the log has no secrets");
        text = shown.into_text();
    }
    line(
        name,
        "MB/s",
        median(samples.clone()),
        Some((base, "memchr newline count over the same bytes")),
        "",
        &format!(
            "Pipeline::show_log_blocks on one thread over {} MiB of {}, median of {RUNS} (spread {})",
            n_bytes >> 20,
            if lines.len() == 1 {
                "the e2e bench's log line"
            } else {
                "the clean logs"
            },
            spread(&samples, 0)
        ),
    );
}

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

/// A point on the redaction figures' clock (see `HERD_BENCH_CLOCK`).
#[derive(Debug, Clone, Copy)]
struct Stamp(Duration);

impl Stamp {
    fn now() -> Stamp {
        static THREAD_CLOCK: OnceLock<bool> = OnceLock::new();
        static START: OnceLock<Instant> = OnceLock::new();
        let thread = *THREAD_CLOCK
            .get_or_init(|| std::env::var("HERD_BENCH_CLOCK").is_ok_and(|v| v == "thread"));
        if thread {
            use nix::sys::resource::{UsageWho, getrusage};
            if let Ok(usage) = getrusage(UsageWho::RUSAGE_THREAD) {
                let (user, sys) = (usage.user_time(), usage.system_time());
                let micros =
                    (user.tv_sec() + sys.tv_sec()) * 1_000_000 + user.tv_usec() + sys.tv_usec();
                return Stamp(Duration::from_micros(u64::try_from(micros).unwrap_or(0)));
            }
        }
        Stamp(START.get_or_init(Instant::now).elapsed())
    }

    fn elapsed(self) -> Duration {
        Stamp::now().0.saturating_sub(self.0)
    }
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
                let start = Stamp::now();
                black_box(memchr::memchr_iter(b'\n', black_box(text.as_bytes())).count());
                mb_per_s(text.len(), start.elapsed())
            })
            .collect(),
    )
}

/// Min-max of `v`, for the notes.
fn spread(v: &[f64], digits: usize) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{lo:.digits$}-{hi:.digits$}")
}

/// The context every bench output is shown under: a `make` log, so `Code` mode like
/// the whole-text baselines.
fn bench_ctx() -> OutputContext<'static> {
    let ctx = OutputContext {
        route: Route::Log,
        command: "make",
        return_code: None,
        owner_task_id: "task",
        session_id: "proc_0123456789ab",
        backend: "local",
        partial: false,
    };
    assert_eq!(
        RedactMode::for_command(ctx.command),
        RedactMode::Code,
        "the stream must redact in the mode of the whole-text baseline"
    );
    ctx
}

/// `text` through a fresh `ShownStream` in `STREAM_CHUNK_BYTES` chunks, then
/// `finish`; calls `sink` with every piece shown.
fn stream_through(
    pipeline: &Arc<Pipeline>,
    ctx: &OutputContext<'_>,
    text: &str,
    mut sink: impl FnMut(&str),
) {
    let mut stream = Pipeline::show_stream(pipeline, ctx);
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = STREAM_CHUNK_BYTES.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (chunk, after) = rest.split_at(cut);
        sink(stream.push(black_box(chunk)).as_str());
        rest = after;
    }
    sink(stream.finish().as_str());
}

/// Whole-text redaction and the stream over the same text, alternating, `RUNS`
/// times: (whole MB/s samples, stream MB/s samples). The stream samples are empty
/// when `with_stream` is false.
fn whole_and_stream(
    pipeline: &Arc<Pipeline>,
    text: &str,
    with_stream: bool,
) -> (Vec<f64>, Vec<f64>) {
    let ctx = bench_ctx();
    let redactor = pipeline.redactor();
    let mut whole = Vec::new();
    let mut streamed = Vec::new();
    for _ in 0..RUNS {
        let start = Stamp::now();
        black_box(redactor.redact(black_box(text), RedactMode::Code).len());
        whole.push(mb_per_s(text.len(), start.elapsed()));
        if with_stream {
            let mut n_shown_bytes = 0usize;
            let start = Stamp::now();
            stream_through(pipeline, &ctx, text, |shown| n_shown_bytes += shown.len());
            streamed.push(mb_per_s(text.len(), start.elapsed()));
            black_box(n_shown_bytes);
        }
    }
    (whole, streamed)
}

/// Checks once, untimed, that the stream shows what whole-text redaction shows.
fn check_stream_matches(pipeline: &Arc<Pipeline>, text: &str) {
    let mut shown = String::with_capacity(text.len());
    stream_through(pipeline, &bench_ctx(), text, |piece| shown.push_str(piece));
    assert!(
        shown == pipeline.redactor().redact(text, RedactMode::Code),
        "the stream must show what whole-text redaction shows"
    );
}

fn stream_figure(name: &str, whole: &[f64], streamed: &[f64], what: &str) {
    let ratios: Vec<f64> = streamed.iter().zip(whole).map(|(s, w)| s / w).collect();
    line(
        name,
        "MB/s",
        median(streamed.to_vec()),
        Some((
            median(whole.to_vec()),
            "Redactor::redact of the whole text, same run",
        )),
        ">= 0.5 ratio",
        &format!(
            "{what} pushed through a ShownStream in 64 KiB chunks, then finish; median of {RUNS}, stream {} MB/s, whole {} MB/s, paired ratios {}",
            spread(streamed, 0),
            spread(whole, 0),
            spread(&ratios, 2)
        ),
    );
}

/// Nanoseconds per call of `f`, over `WINDOW_CALLS` calls.
fn ns_per_call(mut f: impl FnMut() -> usize) -> f64 {
    let start = Stamp::now();
    for _ in 0..WINDOW_CALLS {
        black_box(f());
    }
    start.elapsed().as_secs_f64() * 1e9 / f64::from(WINDOW_CALLS)
}

/// Byte index where line `n` of `text` starts (`text.len()` past the last), as
/// `Window::lines` counts lines.
fn line_start(text: &str, n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    memchr::memchr_iter(b'\n', text.as_bytes())
        .nth(n - 1)
        .map_or(text.len(), |idx| idx + 1)
}

/// A window figure: `RUNS` alternating runs of the window (which finds its own
/// range in the source, as a route does) and of the baseline (redacting the text
/// cut beforehand), the medians and their spreads. `cut` alone is timed too: what
/// finding the range costs, for the note; and `also`, a labelled variant, when given.
fn window_figure(
    name: &str,
    mut window: impl FnMut() -> usize,
    mut redact_cut: impl FnMut() -> usize,
    mut cut: impl FnMut() -> usize,
    mut also: Option<(&str, &mut dyn FnMut() -> usize)>,
    baseline_name: &str,
    what: &str,
) {
    let mut shown = Vec::new();
    let mut redacted = Vec::new();
    let mut cutting = Vec::new();
    let mut variant = Vec::new();
    for _ in 0..RUNS {
        shown.push(ns_per_call(&mut window));
        redacted.push(ns_per_call(&mut redact_cut));
        cutting.push(ns_per_call(&mut cut));
        if let Some((_, f)) = also.as_mut() {
            variant.push(ns_per_call(f));
        }
    }
    let ratios: Vec<f64> = shown.iter().zip(&redacted).map(|(s, c)| s / c).collect();
    let also_note = match &also {
        Some((label, _)) => format!(
            "; {label} {:.0} ns ({:.2}x the baseline)",
            median(variant.clone()),
            median(variant) / median(redacted.clone())
        ),
        None => String::new(),
    };
    line(
        name,
        "ns",
        median(shown.clone()),
        Some((median(redacted.clone()), baseline_name)),
        "<= 2x",
        &format!(
            "{what}; median of {RUNS} runs of {WINDOW_CALLS} calls, window {} ns, redacting the cut {} ns, paired ratios {}; finding the cut alone {:.0} ns (inside the window figure, not the baseline){also_note}",
            spread(&shown, 0),
            spread(&redacted, 0),
            spread(&ratios, 2),
            median(cutting)
        ),
    );
}

/// The start of the last `n_chars` characters of `text`.
fn last_chars_start(text: &str, n_chars: usize) -> usize {
    text.char_indices()
        .rev()
        .nth(n_chars - 1)
        .map_or(0, |(idx, _)| idx)
}

/// Lines `first..first + n` of `text` without the newline after the last one, as
/// `Window::lines` cuts them.
fn lines_range(text: &str, first: usize, n: usize) -> std::ops::Range<usize> {
    let start = line_start(text, first);
    let mut end = line_start(text, first + n);
    if end > start && text.as_bytes()[end - 1] == b'\n' {
        end -= 1;
    }
    start..end
}

/// The window figures over the last `TAIL_BYTES` of `dense` (from a line start).
fn windows(pipeline: &Pipeline, dense: &str, wanted: &dyn Fn(&str) -> bool) {
    let ctx = bench_ctx();
    let redactor = pipeline.redactor();
    let mut from = dense.len().saturating_sub(TAIL_BYTES);
    while !dense.is_char_boundary(from) {
        from += 1;
    }
    let from = memchr::memchr(b'\n', &dense.as_bytes()[from..]).map_or(from, |idx| from + idx + 1);
    let tail = &dense[from..];

    if wanted("hooks.window_tail_2000") {
        let shown = pipeline.show(&ctx, Window::last_chars(tail, TAIL_CHARS));
        // The budget is taken from the redacted lines the window touches, so masks
        // shorter than their secrets leave a tail under 2,000 characters.
        let n_chars = shown.chars().count();
        assert!(
            n_chars > 0 && n_chars <= TAIL_CHARS,
            "the tail keeps within its budget: {n_chars} chars"
        );
        let cut = &tail[last_chars_start(tail, TAIL_CHARS)..];
        window_figure(
            "hooks.window_tail_2000",
            || {
                pipeline
                    .show(&ctx, Window::last_chars(black_box(tail), TAIL_CHARS))
                    .len()
            },
            || redactor.redact(black_box(cut), RedactMode::Code).len(),
            || last_chars_start(black_box(tail), TAIL_CHARS),
            None,
            "Redactor::redact of the last 2,000 chars, cut beforehand",
            &format!(
                "Pipeline::show of Window::last_chars(tail, 2000), tail = the last MiB of the dense logs; it shows {n_chars} chars"
            ),
        );
    }

    if wanted("hooks.window_page_200_lines") {
        let n_lines = memchr::memchr_iter(b'\n', tail.as_bytes()).count();
        let first = n_lines / 2;
        let shown = pipeline.show(&ctx, Window::lines(tail, first, PAGE_LINES));
        assert_eq!(shown.lines().count(), PAGE_LINES, "masking keeps the lines");
        let range = lines_range(tail, first, PAGE_LINES);
        let cut = &tail[range.clone()];
        // Log pages reach the pipeline as a byte range (core's `TextPage` finds the
        // lines itself): the same page as `Window::range`, for the note.
        let mut as_range = || {
            pipeline
                .show(&ctx, Window::range(black_box(tail), range.clone()))
                .len()
        };
        window_figure(
            "hooks.window_page_200_lines",
            || {
                pipeline
                    .show(&ctx, Window::lines(black_box(tail), first, PAGE_LINES))
                    .len()
            },
            || redactor.redact(black_box(cut), RedactMode::Code).len(),
            || lines_range(black_box(tail), first, PAGE_LINES).len(),
            Some((
                "the same page as Window::range of its bytes (how log pages reach the pipeline)",
                &mut as_range,
            )),
            "Redactor::redact of the same 200 lines, cut beforehand",
            &format!(
                "Pipeline::show of Window::lines(tail, {first}, 200), the middle of the last MiB of the dense logs ({} bytes)",
                cut.len()
            ),
        );
    }
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
        partial: false,
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
    let only = std::env::var("HERD_BENCH_ONLY").unwrap_or_default();
    let wanted = |name: &str| {
        only.is_empty()
            || only
                .split(',')
                .any(|part| !part.is_empty() && name.contains(part))
    };
    let pipeline = Arc::new(Pipeline::redaction_only());
    let redactor = Arc::clone(pipeline.redactor());

    let (clean_whole, clean_stream) = (
        wanted("hooks.redact_clean_throughput"),
        wanted("hooks.redact_stream_clean_throughput"),
    );
    if clean_whole || clean_stream {
        let clean = build(CLEAN_BYTES, None);
        assert_eq!(
            redactor.redact(&clean, RedactMode::Code).len(),
            clean.len(),
            "clean logs must stay unchanged"
        );
        let (whole, streamed) = whole_and_stream(&pipeline, &clean, clean_stream);
        if clean_whole {
            let base = baseline(&clean);
            line(
                "hooks.redact_clean_throughput",
                "MB/s",
                median(whole.clone()),
                Some((base, "memchr newline count over the same bytes")),
                ">= 300 MB/s",
                "256 MiB realistic logs, no secrets",
            );
        }
        if clean_stream {
            stream_figure(
                "hooks.redact_stream_clean_throughput",
                &whole,
                &streamed,
                "the 256 MiB clean logs",
            );
        }
    }

    for (name, lines) in [
        ("hooks.readout_log_throughput", &[READOUT_LOG_LINE][..]),
        ("hooks.readout_clean_throughput", CLEAN_LINES),
    ] {
        if wanted(name) {
            readout_figure(&pipeline, name, lines);
        }
    }

    let (dense_whole, dense_stream) = (
        wanted("hooks.redact_dense_throughput"),
        wanted("hooks.redact_stream_dense_throughput"),
    );
    let any_window = wanted("hooks.window_tail_2000") || wanted("hooks.window_page_200_lines");
    if dense_whole || dense_stream || any_window {
        let dense = build(DENSE_BYTES, Some(4));
        if dense_whole || dense_stream {
            if dense_stream {
                check_stream_matches(&pipeline, &dense);
            }
            let (whole, streamed) = whole_and_stream(&pipeline, &dense, dense_stream);
            if dense_whole {
                let base = baseline(&dense);
                line(
                    "hooks.redact_dense_throughput",
                    "MB/s",
                    median(whole.clone()),
                    Some((base, "memchr newline count over the same bytes")),
                    ">= 100 MB/s",
                    "64 MiB logs, a secret every 4th line",
                );
            }
            if dense_stream {
                stream_figure(
                    "hooks.redact_stream_dense_throughput",
                    &whole,
                    &streamed,
                    "the 64 MiB dense logs",
                );
            }
        }
        if any_window {
            windows(&pipeline, &dense, &wanted);
        }
    }

    if wanted("hooks.plugin_call") || wanted("hooks.pipeline_apply_one_plugin") {
        plugin_call();
    }
}
