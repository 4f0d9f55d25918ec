//! Exactly once at the consumer: `herd events` prints, then acknowledges
//! the printed ids; a daemon that dies between the two is replaced and the next one
//! takes the acknowledgement, so a printed completion is never printed again.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Env, wait_until};

/// Starts `n` notified jobs of `owner`, each printing `out_bytes` characters and
/// exiting with its index modulo 50; returns their ids and codes.
fn start_jobs(env: &Env, owner: &str, n: usize, out_bytes: usize) -> HashMap<String, i64> {
    let mut jobs = HashMap::new();
    for i in 0..n {
        let code = i64::try_from(i % 50).expect("small");
        let command = format!("head -c {out_bytes} /dev/zero | tr '\\0' x; exit {code}");
        let info = env.json(&[
            "run", "--json", "--notify", "--owner", owner, "--", &command,
        ]);
        let id = info["session_id"].as_str().expect("session_id").to_owned();
        jobs.insert(id, code);
    }
    jobs
}

/// Waits until none of `owner`'s sessions runs.
fn wait_all_finished(env: &Env, owner: &str) {
    wait_until(Duration::from_secs(60), || {
        env.ps_rows(&["--owner", owner]).is_empty()
    })
    .expect("every job finishes within 60 s");
}

/// `herd events --json` for `owner`, its stdout piped.
fn events_child(env: &Env, owner: &str) -> Child {
    env.cmd(&["events", "--json", "--owner", owner])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("herd events starts")
}

/// The completions among JSON lines, by session id, counted.
fn count_completions(lines: &[Value], seen: &mut HashMap<String, u32>) {
    for event in lines.iter().filter(|e| e["type"] == "completion") {
        assert!(
            event["event_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("completion:")),
            "every event carries its id: {event}"
        );
        let id = event["session_id"].as_str().expect("session_id").to_owned();
        *seen.entry(id).or_default() += 1;
    }
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

/// Deterministic: the consumer is blocked writing its output (the pipe is full)
/// when the daemon is SIGKILLed, so it has printed and not yet acknowledged. It
/// finishes its print, acknowledges on the next daemon it starts, and exits 0; a
/// second `herd events` prints none of those completions again.
#[test]
fn b29_events_printed_before_a_daemon_crash_are_acknowledged_by_the_next_daemon() {
    let env = Env::new();
    let owner = "consumer";
    // 40 completions of 2,000 characters each: more than a pipe holds.
    let jobs = start_jobs(&env, owner, 40, 2_000);
    wait_all_finished(&env, owner);
    let mut child = events_child(&env, owner);
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("the first event line");
    // The client has the whole drain and is blocked on a full pipe: crash now.
    env.crash_daemon();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("the rest of the events");
    let status = child.wait().expect("herd events ends");
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert!(
        status.success(),
        "herd events finishes its acknowledgement on the next daemon instead of failing: {status:?}, stderr: {err}"
    );
    let mut seen = HashMap::new();
    count_completions(&json_lines(&format!("{first}{rest}")), &mut seen);
    assert_eq!(
        seen.len(),
        jobs.len(),
        "the first run printed every completion"
    );
    // Later runs print none of them again, on this daemon or the one after a crash.
    let again = env.ok(&["events", "--json", "--owner", owner]);
    count_completions(&json_lines(&again), &mut seen);
    env.crash_daemon();
    let after_crash = env.ok(&["events", "--json", "--owner", owner]);
    count_completions(&json_lines(&after_crash), &mut seen);
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        twice.is_empty(),
        "completions printed more than once: {twice:?}"
    );
}

/// A small seeded generator (xorshift64*), so a failing run can be repeated with
/// `HERD_TEST_SEED`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Random: notified jobs finish while `herd events --json` runs again and again,
/// the daemon SIGKILLed 0–30 ms into some runs (seeded). Every completion is
/// printed exactly once across all runs, and a run that fails printed nothing.
/// `HERD_SOAK_EVENT_KILLS` sets the number of crashes (`cargo xtask soak`: 100).
#[test]
fn b29_every_completion_is_printed_once_across_daemon_sigkills_during_events() {
    let kills: u32 = std::env::var("HERD_SOAK_EVENT_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let seed: u64 = std::env::var("HERD_TEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_0027);
    let mut rng = Rng(seed.max(1));
    let env = Env::new();
    let owner = "consumer";
    let mut jobs: HashMap<String, i64> = HashMap::new();
    let mut seen: HashMap<String, u32> = HashMap::new();
    let mut n_crashes = 0;
    let deadline = Instant::now() + Duration::from_secs(60 + u64::from(kills) * 3);
    while n_crashes < kills || seen.len() < jobs.len() {
        assert!(
            Instant::now() < deadline,
            "seed {seed} (HERD_TEST_SEED): not every completion arrived: {} of {} after {n_crashes} crashes",
            seen.len(),
            jobs.len()
        );
        if n_crashes < kills {
            // A few new completions for every run.
            jobs.extend(start_jobs(
                &env,
                owner,
                3,
                64 + (rng.next() % 3000) as usize,
            ));
        }
        let crash_after = (n_crashes < kills && rng.next().is_multiple_of(2))
            .then(|| Duration::from_millis(rng.next() % 31));
        let child = events_child(&env, owner);
        if let Some(after) = crash_after {
            // A random moment, not a synchronisation: the crash may hit anything.
            #[expect(
                clippy::disallowed_methods,
                reason = "a random delay places the crash at a random moment"
            )]
            std::thread::sleep(after);
            // The last crash's daemon may not have been replaced yet.
            if env.daemon_pid().is_some() {
                env.crash_daemon();
            }
            n_crashes += 1;
        }
        let out = child.wait_with_output().expect("herd events ends");
        let lines = json_lines(&String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            assert!(
                lines.is_empty(),
                "seed {seed}: a run that fails printed nothing (it never had the events): {:?} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        count_completions(&lines, &mut seen);
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        twice.is_empty(),
        "seed {seed}: completions printed more than once: {twice:?}"
    );
    let unknown: Vec<_> = seen.keys().filter(|id| !jobs.contains_key(*id)).collect();
    assert!(unknown.is_empty(), "completions of no job: {unknown:?}");
}
