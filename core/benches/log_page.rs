//! Benchmark: `Registry::log` pages over a 200 MB session log (B39).
//!
//! Figures (herd-bench line protocol, read by `cargo xtask bench`), each the median
//! of several calls on a warm page cache:
//! - `log_page.default_200mb`: the default page (last 200 lines).
//! - `log_page.offset_middle_200mb`: 200 lines from the middle line.
//! - `log_page.offset_near_end_200mb`: 200 lines from 100 lines before the end.
//!
//! Baseline: counting the newlines of the same file in 64 KiB blocks with `memchr`,
//! the floor of any answer that reports the total line count without an index.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

#[path = "support/figures.rs"]
mod figures;
use figures::{emit, ms};

use std::io::Read;
use std::time::{Duration, Instant};

use herd_core::{Home, Registry, RegistryConfig, SpawnRequest, WaitStatus};

const LOG_BYTES: u64 = 200_000_000;
const RUNS: usize = 7;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Newlines of the file at `path`, counted in 64 KiB blocks.
fn count_newlines(path: &std::path::Path) -> u64 {
    let mut file = std::fs::File::open(path).expect("the log opens");
    let mut buf = vec![0; 64 * 1024];
    let mut n = 0u64;
    loop {
        let got = file.read(&mut buf).expect("the log reads");
        if got == 0 {
            return n;
        }
        n += memchr::memchr_iter(b'\n', &buf[..got]).count() as u64;
    }
}

/// The median time of `RUNS` calls of `f`.
fn time(mut f: impl FnMut()) -> f64 {
    median(
        (0..RUNS)
            .map(|_| {
                let started = Instant::now();
                f();
                ms(started.elapsed())
            })
            .collect(),
    )
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime can be built");
    let dir = tempfile::tempdir().expect("temp dir");
    let home = Home::new(dir.path());
    let registry = rt.block_on(async {
        Registry::new(home.clone(), RegistryConfig::default()).expect("inside a runtime")
    });
    let id = rt.block_on(async {
        let info = registry
            .spawn(SpawnRequest {
                command: format!(
                    "yes 'herd-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTUVWXYZ' | head -c {LOG_BYTES}"
                ),
                ..SpawnRequest::default()
            })
            .await
            .expect("spawn");
        let answer = registry
            .wait(info.session_id.as_str(), Duration::from_secs(170), None)
            .await
            .expect("wait");
        assert_eq!(answer.status, WaitStatus::Exited);
        info.session_id
    });
    let id = id.as_str();
    let path = home.session_log_path(id);
    let total = registry.log(id, None, None).expect("log").total_lines;
    assert_eq!(
        total as u64,
        count_newlines(&path) + 1,
        "the log ends mid-line"
    );

    let floor = time(|| {
        std::hint::black_box(count_newlines(&path));
    });
    let baseline = Some((
        floor,
        "memchr newline count of the same file, 64 KiB blocks",
    ));
    let note = format!("{LOG_BYTES} byte log, {total} lines, warm page cache, median of {RUNS}");
    let figures = [
        ("log_page.default_200mb", None),
        ("log_page.offset_middle_200mb", Some(total / 2)),
        ("log_page.offset_near_end_200mb", Some(total - 100)),
    ];
    for (name, offset) in figures {
        let value = time(|| {
            let page = registry.log(id, offset, None).expect("log");
            assert_eq!(page.total_lines, total);
            std::hint::black_box(page);
        });
        emit(name, value, baseline, Some("<= 3x the baseline"), &note);
    }
}
