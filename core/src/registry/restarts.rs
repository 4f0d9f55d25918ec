//! The restart policy: the spawn's checks, the job's argv wrapped in the
//! restart loop (`spawn::restart_loop`, which runs in the job's tree, under its
//! shim), and the daemon's side of each restart: a separator line in the output
//! (`── herd: run N of M (previous exit C) ──`) sets the session's run count,
//! which the next checkpoint refresh stores, and publishes one `retry` event
//! (queued for the owner when the session notifies). The completion at the end is
//! the session's one completion, with the number of runs.
//!
//! A restored session's count is the stored one, or the last separator in the log
//! tail the restore seeded, whichever is later: runs that happened while no daemon
//! ran are counted (their `retry` events are not sent late).

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::Inner;
use super::delivery::Notice;
use crate::config::SpawnRequest;
use crate::error::SpawnError;
use crate::reader::Observer;
use crate::session::Session;
use crate::spawn::restart_loop::{self, LoopSpec};

/// The longest line looked at for a separator.
const MAX_LINE_BYTES: usize = 4096;

/// Refuses a restart policy out of range, or one a registry without shims cannot
/// run.
pub(super) fn check_request(req: &SpawnRequest, supervised: bool) -> Result<(), SpawnError> {
    let Some(policy) = req.restart else {
        return Ok(());
    };
    let invalid =
        |field: &'static str, message: String| SpawnError::InvalidRequest { field, message };
    crate::config::limits::check(
        "max_restarts",
        policy.max_restarts,
        &crate::config::limits::MAX_RESTARTS,
    )
    .map_err(|m| invalid("max_restarts", m))?;
    let delay_ms = u64::try_from(policy.delay.as_millis()).unwrap_or(u64::MAX);
    crate::config::limits::check(
        "restart_delay_ms",
        delay_ms,
        &crate::config::limits::RESTART_DELAY_MS,
    )
    .map_err(|m| {
        invalid(
            "restart_delay_ms",
            format!("{m}: the first pause between two runs"),
        )
    })?;
    if !supervised {
        return Err(invalid(
            "restart",
            "a restart policy needs supervised sessions (a registry with a shim, as the herd daemon has)"
                .to_owned(),
        ));
    }
    Ok(())
}

/// The time limit of a spawn and of each of its runs: under a restart policy the
/// limit applies to each run, in the loop, not to the session.
pub(super) fn per_run<T>(req: &SpawnRequest, limit: Option<T>) -> (Option<T>, Option<Duration>) {
    match (req.restart, req.time_limit) {
        (Some(_), per_run) => (None, per_run),
        (None, _) => (limit, None),
    }
}

impl Inner {
    /// `argv` run under the restart loop when `req` asks for a policy, with the
    /// time limit applying to each run; else `argv` unchanged.
    pub(super) fn restart_argv(
        &self,
        req: &SpawnRequest,
        argv: Vec<String>,
        per_run: Option<Duration>,
    ) -> Vec<String> {
        let (Some(policy), Some(shim)) = (req.restart, &self.config.shim) else {
            return argv;
        };
        let spec = LoopSpec {
            always: policy.always,
            max_restarts: policy.max_restarts,
            delay: policy.delay,
            time_limit: per_run,
            grace: self.config.kill_grace,
            kill_leftovers: req.kill_leftovers.unwrap_or(self.config.kill_leftovers),
        };
        let mut wrapped = vec![shim.display().to_string(), "--restart-loop".to_owned()];
        wrapped.extend(spec.to_args());
        wrapped.push("--".to_owned());
        wrapped.extend(argv);
        wrapped
    }

    /// Arms the run counting of a session with a restart policy: an observer of
    /// its separator lines run beside `observer`.
    pub(super) fn arm_restarts(
        self: &Arc<Self>,
        s: &Arc<Session>,
        observer: Option<Box<dyn Observer>>,
    ) -> Option<Box<dyn Observer>> {
        let Some(policy) = s.origin.restart else {
            return observer;
        };
        // A restored session: runs while no daemon ran show in the log's tail.
        let (text, _, _) = s.text();
        if let Some(last) = text.lines().rev().find_map(restart_loop::separator_run) {
            let mut st = s.state();
            st.runs = st.runs.max(last);
        }
        let counter = Box::new(RunCounter {
            inner: Arc::downgrade(self),
            session: Arc::clone(s),
            total: policy.max_restarts.saturating_add(1),
            partial: Vec::new(),
        });
        Some(match observer {
            Some(first) => Box::new(crate::reader::Both(first, counter)),
            None => counter,
        })
    }

    /// Run `run` began (its separator was seen): counts it, stores the count with
    /// the next checkpoint refresh and publishes its `retry` event.
    fn run_began(self: &Arc<Self>, s: &Session, run: u32, total: u32, line: &str) {
        {
            let mut st = s.state();
            if run <= st.runs {
                return;
            }
            st.runs = run;
        }
        self.request_checkpoint();
        let command = self.shown_command(s);
        let notice = Notice::Retry {
            run,
            max_runs: total,
            previous: line
                .rsplit_once("(previous ")
                .map(|(_, rest)| rest.trim_end_matches([')', ' ', '─']).to_owned())
                .unwrap_or_default(),
        };
        let published = self.table.while_running(&s.id, |_, queues| {
            self.outbox.publish_notice(queues, s, command, notice);
        });
        if published.is_none() {
            return;
        }
        self.changed();
    }
}

/// Counts a session's runs by the separator lines of its output.
struct RunCounter {
    inner: Weak<Inner>,
    session: Arc<Session>,
    total: u32,
    partial: Vec<u8>,
}

impl RunCounter {
    fn line(&self, bytes: &[u8]) {
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let Ok(line) = std::str::from_utf8(bytes) else {
            return;
        };
        if let (Some(run), Some(inner)) = (restart_loop::separator_run(line), self.inner.upgrade())
        {
            inner.run_began(&self.session, run, self.total, line);
        }
    }
}

impl Observer for RunCounter {
    fn output(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        while let Some(end) = memchr::memchr(b'\n', &self.partial) {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            self.line(&line[..end]);
        }
        if self.partial.len() > MAX_LINE_BYTES {
            // Too long for a separator: its end is no separator either.
            self.partial.clear();
        }
    }

    fn end(&mut self) {
        let line = std::mem::take(&mut self.partial);
        self.line(&line);
    }
}
