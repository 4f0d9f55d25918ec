//! Benchmark: scanning 256 MiB of realistic terminal output (text with colour
//! escapes) against a raw `memchr` pass over the same bytes, in the same run.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::hint::black_box;
use std::time::Instant;

const TOTAL_BYTES: usize = 256 << 20;
const CHUNK_BYTES: usize = 64 << 10;
const RUNS: usize = 5;

/// About 4 MiB of build-log-like output: coloured status words, paths, plain lines.
fn sample() -> Vec<u8> {
    let mut out = Vec::with_capacity(4 << 20);
    let mut i = 0u64;
    while out.len() < 4 << 20 {
        match i % 4 {
            0 => out.extend_from_slice(
                format!(
                    "\x1b[1m\x1b[32m   Compiling\x1b[0m crate-{i} v0.{i}.0 (/work/src/crate-{i})\n"
                )
                .as_bytes(),
            ),
            1 => out.extend_from_slice(
                format!("test module_{i}::case_{i} ... \x1b[32mok\x1b[0m\n").as_bytes(),
            ),
            2 => out.extend_from_slice(
                format!("[{i:>6}] GET /api/items/{i} 200 OK in 3.{i}ms user-agent=curl/8.5\n")
                    .as_bytes(),
            ),
            _ => out.extend_from_slice(
                b"    at Object.<anonymous> (/srv/app/node_modules/lib/index.js:42:17)\n",
            ),
        }
        i += 1;
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn mb_per_s(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / secs / 1e6
}

fn main() {
    let data = sample();
    let mut scanner_runs = Vec::new();
    let mut memchr_runs = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let mut n = 0usize;
        let mut fed = 0usize;
        while fed < TOTAL_BYTES {
            for chunk in data.chunks(CHUNK_BYTES) {
                // Visit every ESC position (a scanner must look at each one);
                // `count()` would take memchr's vectorised counting shortcut.
                for idx in memchr::memchr_iter(0x1b, black_box(chunk)) {
                    n ^= idx;
                }
                fed += chunk.len();
            }
        }
        black_box(n);
        memchr_runs.push(mb_per_s(fed, start.elapsed().as_secs_f64()));

        let mut scanner = herd_pty::Scanner::new(30, 120);
        let start = Instant::now();
        let mut kept = 0usize;
        let mut fed = 0usize;
        while fed < TOTAL_BYTES {
            for chunk in data.chunks(CHUNK_BYTES) {
                let scan = scanner.feed(black_box(chunk));
                kept += scan.output.len() + scan.replies.len();
                fed += chunk.len();
            }
        }
        black_box(kept);
        scanner_runs.push(mb_per_s(fed, start.elapsed().as_secs_f64()));
    }
    let value = median(scanner_runs);
    let baseline = median(memchr_runs);
    let figure = format!(
        r#"{{"name":"pty.scan_throughput","unit":"MB/s","value":{value:.1},"baseline":{baseline:.1},"baseline_name":"memchr visiting every ESC in the same bytes","ratio":{:.3},"target":">= 0.5","note":"256 MiB of coloured build/test/server log output in 64 KiB chunks, median of {RUNS}"}}"#,
        value / baseline
    );
    println!("herd-bench {figure}");
}
