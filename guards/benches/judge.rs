//! Benchmark: median judge time per command over a corpus of 10,000 realistic commands.
//!
//! The corpus is generated deterministically from templates of what coding agents run
//! (mostly benign: git, cargo, npm, grep, heredocs, loops; about one in twenty a kill or a
//! service command). Each command is timed on its own; a run's figure is the median over
//! the corpus, and the printed value is the median of several runs. The baseline is the
//! median time tree-sitter-bash alone takes to parse the same commands with a reused
//! parser: the floor any parser-based judgement pays, so the ratio shows what the rules
//! cost on top of parsing.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::hint::black_box;
use std::time::Instant;

use herd_guards::{Host, judge};

const N_COMMANDS: usize = 10_000;
const N_RUNS: usize = 5;

const BENIGN: &[&str] = &[
    "git status",
    "git diff --stat HEAD~{n}",
    "git log --oneline -n {n}",
    "git add -A && git commit -m \"fix: handle case {n}\"",
    "cargo test -p herd-core -- --nocapture",
    "cargo build --release 2>&1 | tail -{n}",
    "cargo clippy --all-targets -- -D warnings",
    "npm run build",
    "npm test -- --watch=false",
    "npx tsc --noEmit",
    "ls -la src/",
    "cd frontend && npm install && npm run dev",
    "grep -rn \"TODO\" src/ | head -{n}",
    "rg -n 'fn main' --type rust",
    "find . -name '*.rs' -newer Cargo.toml | xargs wc -l",
    "sed -n '{n},{m}p' src/lib.rs",
    "cat package.json | jq '.scripts'",
    "python -m pytest tests/test_api.py -x -q",
    "python3 scripts/migrate.py --dry-run --batch {n}",
    "pip install -r requirements.txt",
    "docker compose up -d db",
    "docker ps --format '{{.Names}}'",
    "curl -s http://localhost:{port}/health | jq .",
    "echo \"build {n} done\" >> build.log",
    "mkdir -p out/{n} && cp target/release/app out/{n}/",
    "for f in src/*.ts; do echo \"$f\"; wc -l \"$f\"; done",
    "export RUST_LOG=debug; cargo run -- --port {port}",
    "tail -n {n} /var/log/app.log",
    "head -c {m} data/input.csv | sort | uniq -c",
    "make -j4 test",
    "go test ./... -run TestHandler{n}",
    "node scripts/seed.js --count {n}",
    "uvicorn app.main:app --port {port} --reload",
    "cat > notes.md <<'EOF'\nStep {n}: restart the dev server if it hangs.\nEOF",
    "if [ -f .env ]; then source .env; fi; echo $DATABASE_URL",
    "timeout 60 npm run e2e",
    "awk -F, '{print $2}' data.csv | sort -n | tail -{n}",
    "ps aux | grep node",
    "lsof -i :{port}",
    "kill {pid}",
    "kill -9 {pid}",
    "herd list",
    "herd logs proc_0123456789ab --tail {n}",
    "systemctl --user status herd",
    "grep 'pkill python' notes.txt",
    "bash -c 'cd /srv/app && ./run_tests.sh --shard {n}'",
];

const KILLS: &[&str] = &[
    "pkill -9 python3",
    "pkill -f 'node dev-server --port {port}'",
    "kill $(pgrep -f agent.main)",
    "taskkill /F /IM node.exe",
    "systemctl --user restart herd",
    "pgrep python | xargs kill -9",
    "killall -9 node",
    "herd daemon restart",
];

/// A small deterministic generator, so the corpus is the same on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        let len = u64::try_from(items.len()).unwrap_or(1);
        let idx = usize::try_from(self.next() % len).unwrap_or(0);
        items.get(idx).copied().unwrap_or_default()
    }
}

fn corpus() -> Vec<String> {
    let mut rng = Lcg(0x5eed);
    (0..N_COMMANDS)
        .map(|_| {
            let template = if rng.next().is_multiple_of(20) {
                rng.pick(KILLS)
            } else {
                rng.pick(BENIGN)
            };
            template
                .replace("{n}", &(rng.next() % 200).to_string())
                .replace("{m}", &(rng.next() % 5000).to_string())
                .replace("{port}", &(3000 + rng.next() % 6000).to_string())
                .replace("{pid}", &(1000 + rng.next() % 60000).to_string())
        })
        .collect()
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}

fn percentile(mut samples: Vec<f64>, pct: usize) -> f64 {
    samples.sort_by(f64::total_cmp);
    let idx = (samples.len() * pct / 100).min(samples.len().saturating_sub(1));
    samples.get(idx).copied().unwrap_or(f64::NAN)
}

/// Per-command times of one pass over the corpus, in microseconds.
fn pass(commands: &[String], mut each: impl FnMut(&str)) -> Vec<f64> {
    commands
        .iter()
        .map(|command| {
            let start = Instant::now();
            each(command);
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect()
}

fn main() {
    let commands = corpus();
    let host = Host::new(
        vec!["herd".to_owned(), "python".to_owned()],
        "python -m agent.main --serve",
    );
    let mut parser = tree_sitter::Parser::new();
    let language: tree_sitter::Language = tree_sitter_bash::LANGUAGE.into();
    if parser.set_language(&language).is_err() {
        println!(
            "herd-bench {{\"name\":\"guards.judge_median\",\"unit\":\"us\",\"value\":null,\"baseline\":null,\"baseline_name\":null,\"ratio\":null,\"target\":\"<= 20\",\"note\":\"tree-sitter-bash failed to load\"}}"
        );
        return;
    }
    // Warm up the thread-local parser and the caches.
    let _ = pass(&commands, |c| {
        black_box(judge(c, &host));
    });
    let mut judge_medians = Vec::new();
    let mut parse_medians = Vec::new();
    let mut judge_p99s = Vec::new();
    let mut n_blocked = 0;
    for _ in 0..N_RUNS {
        let times = pass(&commands, |c| {
            black_box(judge(c, &host));
        });
        judge_p99s.push(percentile(times.clone(), 99));
        judge_medians.push(median(times));
        parse_medians.push(median(pass(&commands, |c| {
            black_box(parser.parse(c, None));
        })));
    }
    for command in &commands {
        n_blocked += usize::from(judge(command, &host) != herd_guards::Verdict::Allow);
    }
    let value = median(judge_medians);
    let baseline = median(parse_medians);
    let p99 = median(judge_p99s);
    println!(
        "herd-bench {{\"name\":\"guards.judge_median\",\"unit\":\"us\",\"value\":{value:.2},\"baseline\":{baseline:.2},\"baseline_name\":\"tree-sitter-bash parse of the same commands (reused parser)\",\"ratio\":{ratio:.2},\"target\":\"<= 20\",\"note\":\"median per command over {N_COMMANDS} commands, {n_blocked} blocked; median of {N_RUNS} runs\"}}",
        ratio = value / baseline,
    );
    println!(
        "herd-bench {{\"name\":\"guards.judge_p99\",\"unit\":\"us\",\"value\":{p99:.2},\"baseline\":null,\"baseline_name\":null,\"ratio\":null,\"target\":null,\"note\":\"99th percentile per command, same corpus\"}}"
    );
}
