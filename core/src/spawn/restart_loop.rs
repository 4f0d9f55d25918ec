//! The restart policy's runner: `herd-shim --restart-loop …` is a session's
//! main process when the spawn asked for `--restart`. It runs the job's argv, and
//! when a run ends as the policy says (`on-failure`: not exit 0; `always`), writes
//! a separator line to its output, waits the back-off (the delay doubled each time,
//! at most [`MAX_BACKOFF`]) and runs it again, at most `max_restarts` times; then it
//! exits as the last run did. Every run shares the session's log, tree, cgroup and
//! shim, so redaction, the leftovers rule and a kill reach each run, and a kill
//! during the back-off ends the session with its one completion. The loop lives in
//! the job's tree, not in the daemon: a daemon that dies between runs changes
//! nothing, so no run is started twice and none is lost. A per-run time limit
//! stops the run's processes (SIGTERM, the grace, SIGKILL) and counts as a failure.
//!
//! The separator, `── herd: run 2 of 4 (previous exit 1) ──`, is what the daemon
//! counts runs and sends `retry` events by (`registry::restarts`).

use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

/// The longest back-off between two runs.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// What starts a separator line; the run number follows.
pub(crate) const SEPARATOR_PREFIX: &str = "── herd: run ";

/// How often a run with a time limit is looked at.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// The loop's settings, as its argv carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoopSpec {
    pub(crate) always: bool,
    pub(crate) max_restarts: u32,
    pub(crate) delay: Duration,
    pub(crate) time_limit: Option<Duration>,
    pub(crate) grace: Duration,
    /// Stop what a run left running before the next one (`--kill-leftovers`).
    pub(crate) kill_leftovers: bool,
}

impl LoopSpec {
    /// The arguments after `--restart-loop`, before `--` and the job's argv.
    pub(crate) fn to_args(self) -> Vec<String> {
        vec![
            if self.always { "always" } else { "on-failure" }.to_owned(),
            self.max_restarts.to_string(),
            self.delay.as_millis().to_string(),
            self.time_limit.map_or(0, |t| t.as_millis()).to_string(),
            self.grace.as_millis().to_string(),
            u8::from(self.kill_leftovers).to_string(),
        ]
    }

    /// Reads what [`LoopSpec::to_args`] wrote.
    fn parse(args: &[String]) -> Option<LoopSpec> {
        let [when, max, delay, limit, grace, leftovers] = args else {
            return None;
        };
        let ms = |text: &String| text.parse::<u64>().ok().map(Duration::from_millis);
        Some(LoopSpec {
            always: match when.as_str() {
                "always" => true,
                "on-failure" => false,
                _ => return None,
            },
            max_restarts: max.parse().ok()?,
            delay: ms(delay)?,
            time_limit: ms(limit).filter(|d| !d.is_zero()),
            grace: ms(grace)?,
            kill_leftovers: match leftovers.as_str() {
                "1" => true,
                "0" => false,
                _ => return None,
            },
        })
    }
}

/// The pause before run `next` (2 or later): the delay doubled per earlier restart.
pub(crate) fn backoff(delay: Duration, next: u32) -> Duration {
    let doublings = next.saturating_sub(2).min(20);
    delay
        .saturating_mul(1 << doublings)
        .min(MAX_BACKOFF.max(delay))
}

/// The separator line before run `run` of `total`, after a run that ended `how`.
pub(crate) fn separator(run: u32, total: u32, how: &str) -> String {
    format!("{SEPARATOR_PREFIX}{run} of {total} (previous {how}) ──\n")
}

/// The run number a separator line names, if `line` is one.
pub(crate) fn separator_run(line: &str) -> Option<u32> {
    let rest = line.strip_prefix(SEPARATOR_PREFIX)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// `herd-shim --restart-loop ARGS… -- ARGV…`: returns the exit code.
pub(crate) fn main(args: &[String]) -> i32 {
    let Some(split) = args.iter().position(|a| a == "--") else {
        return usage();
    };
    let (Some(spec), Some((program, rest))) = (
        LoopSpec::parse(&args[..split]),
        args[split + 1..].split_first(),
    ) else {
        return usage();
    };
    let total = spec.max_restarts.saturating_add(1);
    let mut run = 1;
    loop {
        let (code, how) = run_once(program, rest, spec);
        let again = (spec.always || code != 0) && run < total;
        if !again {
            return code;
        }
        // The leftovers rule holds per run: what a run left is stopped before the
        // next starts when asked; else it stays, held by the session.
        if spec.kill_leftovers && !descendants().is_empty() {
            stop_run(spec.grace);
        }
        run += 1;
        sleep(backoff(spec.delay, run));
        let line = separator(run, total, &how);
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
}

fn usage() -> i32 {
    tracing::error!("herd-shim --restart-loop is started by the herd daemon, not by hand");
    2
}

#[expect(
    clippy::disallowed_methods,
    reason = "the back-off between two runs of a restart policy; it synchronises nothing"
)]
fn sleep(d: Duration) {
    std::thread::sleep(d);
}

/// Runs the job once; its exit code (128 + a signal's number) and how it ended in
/// words.
#[expect(
    clippy::disallowed_methods,
    reason = "the restart loop is part of herd-core's spawn path: it runs the job it was started for"
)]
fn run_once(program: &str, args: &[String], spec: LoopSpec) -> (i32, String) {
    let mut child = match std::process::Command::new(program).args(args).spawn() {
        Ok(child) => child,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "herd: {program}: {error}");
            return (127, "exit 127".to_owned());
        }
    };
    let started = Instant::now();
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(_) => break None,
        }
        match spec.time_limit {
            Some(limit) if !timed_out && started.elapsed() >= limit => {
                timed_out = true;
                stop_run(spec.grace);
            }
            Some(_) => sleep(LOOK_EVERY),
            None => break child.wait().ok(),
        }
    };
    let code = status.map_or(1, |s| s.code().unwrap_or(128 + s.signal().unwrap_or(0)));
    let how = if timed_out {
        "run's time limit".to_owned()
    } else {
        match status.and_then(|s| s.signal()) {
            Some(sig) => format!("signal {sig}"),
            None => format!("exit {code}"),
        }
    };
    (if timed_out && code == 0 { 124 } else { code }, how)
}

/// Stops every descendant of this process: SIGTERM, the grace, then SIGKILL.
fn stop_run(grace: Duration) {
    let signal_all = |sig: Signal| {
        for pid in descendants() {
            let _ = crate::sys::signal_pid(pid, sig);
        }
    };
    signal_all(Signal::SIGTERM);
    signal_all(Signal::SIGCONT);
    let until = Instant::now() + grace;
    while Instant::now() < until && !descendants().is_empty() {
        sleep(LOOK_EVERY);
    }
    signal_all(Signal::SIGKILL);
}

/// This process's live descendants, by parentage.
fn descendants() -> Vec<i32> {
    let table = crate::sys::process_table();
    let mut tree = vec![crate::sys::own_pid()];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            table
                .iter()
                .filter(|p| p.ppid == parent && !p.is_dead())
                .map(|p| p.pid),
        );
        i += 1;
    }
    tree.remove(0);
    tree
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b46_the_backoff_doubles_from_the_delay_up_to_its_cap() {
        let d = Duration::from_millis(500);
        assert_eq!(backoff(d, 2), d);
        assert_eq!(backoff(d, 3), Duration::from_secs(1));
        assert_eq!(backoff(d, 4), Duration::from_secs(2));
        assert_eq!(backoff(d, 40), MAX_BACKOFF);
    }

    #[test]
    fn b46_the_spec_and_the_separator_read_back() {
        let spec = LoopSpec {
            always: false,
            max_restarts: 3,
            delay: Duration::from_millis(250),
            time_limit: Some(Duration::from_secs(5)),
            grace: Duration::from_secs(2),
            kill_leftovers: true,
        };
        assert_eq!(LoopSpec::parse(&spec.to_args()), Some(spec));
        let line = separator(2, 4, "exit 1");
        assert_eq!(line, "── herd: run 2 of 4 (previous exit 1) ──\n");
        assert_eq!(separator_run(line.trim_end()), Some(2));
        assert_eq!(separator_run("run 2 of 4"), None);
    }
}
