//! The output pipeline: hooks first, redaction last.
//!
//! Invariant: every text that leaves this module has gone through the redactor,
//! and the redactor runs last. Hooks may rewrite output freely, even reintroducing
//! a secret, because redaction comes after them. That is why `Pipeline` keeps the
//! redactor in its own field instead of in the hook list: nothing can be inserted
//! after it.
//!
//! Fail open, never crash. Each hook runs on its own worker thread and the caller
//! waits at most the chain's budget (default 2 s):
//! - a hook that returns an error is skipped for that output (the output goes on
//!   unchanged) and reported once at `warn`, later at `debug`;
//! - a hook that panics is caught (`catch_unwind` on the worker) and treated the same;
//! - a hook that exceeds the budget is abandoned for that output: its worker is
//!   detached (it finishes or hangs on its own, its answer is dropped), and the hook
//!   is suppressed for 60 s, so a wedged plugin costs one budget per minute, not one
//!   per output.
//!
//! Plugin hooks run native code in this process. A plugin that aborts or
//! corrupts memory cannot be contained here; the ABI requires plugin bodies to go
//! through `herd_plugin_abi::catch_panic` so an unwinding panic never crosses the
//! `extern "C"` boundary (which would abort the daemon).
//!
//! Each hook has two workers: one for answers a caller waits on (poll, log, list,
//! wait, kill, foreground) and one for notices built in the background
//! (completion, heartbeat, watch), so a hook slow on one kind never stalls the
//! other. Calls of one kind are serialised on their worker; the budget counts from
//! when the call is queued. An abandoned worker is not replaced until its stuck
//! call returns: a hung hook costs one thread per lane, never one per timeout.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use crate::redact::{Redactor, RedactorConfig};
use crate::{Error, OutputContext, Route};

/// How long a hook may take on one output before it is abandoned.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(2);

/// How long a hook that exceeded its budget is skipped.
pub const SUPPRESS_AFTER_TIMEOUT: Duration = Duration::from_secs(60);

/// A hook's own failure, reported by the hook (not a timeout): an error, or a
/// panic the hook caught itself (a plugin's `catch_panic`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hook failed: {message}")]
pub struct HookError {
    message: String,
    panicked: bool,
}

impl HookError {
    /// A failure with the hook's message.
    pub fn new(message: impl Into<String>) -> HookError {
        HookError {
            message: message.into(),
            panicked: false,
        }
    }

    /// A panic the hook caught itself, with its message: counted as a panic.
    pub fn panicked(message: impl Into<String>) -> HookError {
        HookError {
            message: message.into(),
            panicked: true,
        }
    }

    /// Whether the hook panicked.
    pub fn is_panic(&self) -> bool {
        self.panicked
    }

    /// The hook's message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// An output transform. Returns `Ok(None)` for "unchanged", `Ok(Some(text))` for
/// a replacement.
pub trait Hook: Send + Sync + fmt::Debug + 'static {
    /// The hook's name, for reports and logs.
    fn name(&self) -> &str;

    /// Transforms `output`, which is the previous hook's result (or the raw
    /// output for the first hook).
    ///
    /// # Errors
    ///
    /// A `HookError` skips this hook for this output; the output goes on unchanged.
    fn transform(&self, ctx: &OutputContext<'_>, output: &str)
    -> Result<Option<String>, HookError>;

    /// Whether the hook can take calls now. A hook still starting (a plugin's
    /// init) may block here, up to its own start deadline; `Err(reason)` when it
    /// could not start, and the chain then skips it without counting a call.
    ///
    /// # Errors
    ///
    /// Why the hook cannot take calls.
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }

    /// Where the hook's start stands, without waiting.
    fn start(&self) -> HookStart {
        HookStart::default()
    }
}

/// Where a hook's start stands (a plugin's init runs on its own thread).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HookStart {
    /// Taking calls; since when, when known.
    Ready {
        /// When it became ready.
        since: Option<SystemTime>,
    },
    /// Still starting.
    Starting,
    /// Could not start; it is skipped until the process restarts.
    Failed {
        /// Why.
        reason: String,
    },
}

impl Default for HookStart {
    fn default() -> HookStart {
        HookStart::Ready { since: None }
    }
}

/// One route's counters of a hook.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RouteCounts {
    /// Calls handed to the hook.
    pub calls: u64,
    /// Calls that returned an error.
    pub errors: u64,
    /// Calls that panicked.
    pub panics: u64,
    /// Calls abandoned because the budget ran out.
    pub timeouts: u64,
}

/// Per-hook counters, for status pages and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HookStats {
    /// The hook's name.
    pub name: String,
    /// Calls handed to the hook.
    pub n_calls: u64,
    /// Calls that returned a replacement.
    pub n_replaced: u64,
    /// Calls that returned an error.
    pub n_errors: u64,
    /// Calls that panicked.
    pub n_panics: u64,
    /// Calls abandoned because the budget ran out.
    pub n_timeouts: u64,
    /// Outputs the hook was skipped for while suppressed.
    pub n_suppressed: u64,
    /// The last failure, if any.
    pub last_failure: Option<String>,
    /// The same counters by route name (`"poll"`, `"log"`, ...).
    pub routes: BTreeMap<&'static str, RouteCounts>,
    /// Where the hook's start stands (filled in by [`HookChain::stats`]).
    pub start: HookStart,
}

/// The context copied for a worker thread, which may outlive the caller's borrow.
#[derive(Debug, Clone)]
pub(crate) struct OwnedContext {
    route: Route,
    command: String,
    return_code: Option<i32>,
    owner_task_id: String,
    session_id: String,
    backend: String,
    partial: bool,
}

impl OwnedContext {
    pub(crate) fn from_ctx(ctx: &OutputContext<'_>) -> OwnedContext {
        OwnedContext {
            route: ctx.route,
            command: ctx.command.to_owned(),
            return_code: ctx.return_code,
            owner_task_id: ctx.owner_task_id.to_owned(),
            session_id: ctx.session_id.to_owned(),
            backend: ctx.backend.to_owned(),
            partial: ctx.partial,
        }
    }

    pub(crate) fn as_ctx(&self) -> OutputContext<'_> {
        OutputContext {
            route: self.route,
            command: &self.command,
            return_code: self.return_code,
            owner_task_id: &self.owner_task_id,
            session_id: &self.session_id,
            backend: &self.backend,
            partial: self.partial,
        }
    }
}

/// How one hook call ended on the worker.
enum Outcome {
    Done(Option<String>),
    Failed(String),
    Panicked(String),
}

struct Job {
    ctx: OwnedContext,
    output: String,
    reply: mpsc::SyncSender<Outcome>,
}

/// Which worker of a hook serves a route: an answer a caller waits on
/// (`Interactive`: poll, log, list, wait, kill, foreground) never queues behind a
/// notice being built in the background (completion, heartbeat, watch), so a hook
/// that is slow on completions does not stall `herd ps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    Interactive = 0,
    Background = 1,
}

impl Lane {
    fn of(route: Route) -> Lane {
        match route {
            Route::Completion | Route::Heartbeat | Route::Watch => Lane::Background,
            Route::Foreground
            | Route::Poll
            | Route::Log
            | Route::Wait
            | Route::Kill
            | Route::ListPreview => Lane::Interactive,
        }
    }
}

/// One lane's worker thread.
#[derive(Default)]
struct Worker {
    /// Its job queue; `None` until first use and after an abandon.
    jobs: Option<mpsc::Sender<Job>>,
    /// The current thread's liveness flag.
    alive: Option<Arc<AtomicBool>>,
    /// An abandoned worker still inside the call that ran past its budget: no new
    /// thread is started for the lane until it returns, so a hook that hangs
    /// costs one thread, not one per timeout.
    stuck: Option<Arc<AtomicBool>>,
}

struct EntryState {
    /// The workers, by [`Lane`].
    workers: [Worker; 2],
    suppressed_until: Option<Instant>,
    stats: HookStats,
    /// When a panic was last logged at `warn` (panics are logged once a minute).
    panic_logged_at: Option<Instant>,
}

impl EntryState {
    /// Counts one event of `route` in the totals and the route's counters.
    fn count(&mut self, route: Route, what: fn(&mut RouteCounts)) {
        what(self.stats.routes.entry(route.as_str()).or_default());
    }
}

struct Entry {
    hook: Arc<dyn Hook>,
    state: Mutex<EntryState>,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("hook", &self.hook.name())
            .finish_non_exhaustive()
    }
}

impl Entry {
    fn state(&self) -> MutexGuard<'_, EntryState> {
        // A panic while holding this lock can only come from our own bookkeeping,
        // which leaves the counters consistent enough to keep going.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Hooks in their configured order, each with its own worker and counters.
#[derive(Debug)]
pub struct HookChain {
    entries: Vec<Entry>,
    budget: Duration,
    suppress_for: Duration,
}

impl Default for HookChain {
    fn default() -> HookChain {
        HookChain::new(Vec::new())
    }
}

impl HookChain {
    /// A chain running `hooks` in this order, with the default budget.
    pub fn new(hooks: Vec<Arc<dyn Hook>>) -> HookChain {
        let mut chain = HookChain {
            entries: Vec::with_capacity(hooks.len()),
            budget: DEFAULT_BUDGET,
            suppress_for: SUPPRESS_AFTER_TIMEOUT,
        };
        for hook in hooks {
            chain.push(hook);
        }
        chain
    }

    /// Appends a hook at the end of the chain (still before redaction).
    pub fn push(&mut self, hook: Arc<dyn Hook>) {
        let stats = HookStats {
            name: hook.name().to_owned(),
            ..HookStats::default()
        };
        self.entries.push(Entry {
            hook,
            state: Mutex::new(EntryState {
                workers: [Worker::default(), Worker::default()],
                suppressed_until: None,
                stats,
                panic_logged_at: None,
            }),
        });
    }

    /// Sets the per-output time budget of each hook.
    #[must_use]
    pub fn with_budget(mut self, budget: Duration) -> HookChain {
        self.budget = budget;
        self
    }

    /// Sets how long a hook that ran out of budget is skipped.
    #[must_use]
    pub fn with_suppression(mut self, suppress_for: Duration) -> HookChain {
        self.suppress_for = suppress_for;
        self
    }

    /// The per-output time budget of each hook.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// The hooks' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|e| e.hook.name().to_owned())
            .collect()
    }

    /// Number of hooks.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the chain has no hooks.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Counters of every hook, in order.
    pub fn stats(&self) -> Vec<HookStats> {
        self.entries
            .iter()
            .map(|e| {
                let mut stats = e.state().stats.clone();
                stats.start = e.hook.start();
                stats
            })
            .collect()
    }

    /// Runs every hook in order; each sees the previous one's output.
    pub(crate) fn run<'o>(&self, ctx: &OutputContext<'_>, output: &'o str) -> Cow<'o, str> {
        let mut current = Cow::Borrowed(output);
        if self.entries.is_empty() {
            return current;
        }
        let owned_ctx = OwnedContext::from_ctx(ctx);
        for entry in &self.entries {
            if let Some(replacement) = self.run_one(entry, &owned_ctx, &current) {
                current = Cow::Owned(replacement);
            }
        }
        current
    }

    /// One hook on one output; `None` means "unchanged" for every failure.
    fn run_one(&self, entry: &Entry, ctx: &OwnedContext, output: &str) -> Option<String> {
        let name = entry.hook.name();
        // A hook still starting is waited for here (bounded by its own start
        // deadline); one that could not start is skipped, uncounted.
        if entry.hook.ready().is_err() {
            return None;
        }
        let queued_at = Instant::now();
        let route = ctx.route;
        let lane = Lane::of(route);
        let sender = worker_sender(entry, route, queued_at)?;
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job {
            ctx: ctx.clone(),
            output: output.to_owned(),
            reply,
        };
        if sender.send(job).is_err() {
            let mut st = entry.state();
            st.workers[lane as usize].jobs = None;
            st.stats.n_errors += 1;
            st.count(route, |c| c.errors += 1);
            record_failure(&mut st, name, "hook worker exited".to_owned(), false);
            return None;
        }
        let outcome = answer.recv_timeout(self.budget);
        let mut st = entry.state();
        match outcome {
            Ok(Outcome::Done(replacement)) => {
                if replacement.is_some() {
                    st.stats.n_replaced += 1;
                }
                replacement
            }
            Ok(Outcome::Failed(message)) => {
                st.stats.n_errors += 1;
                st.count(route, |c| c.errors += 1);
                record_failure(&mut st, name, message, false);
                None
            }
            Ok(Outcome::Panicked(message)) => {
                st.stats.n_panics += 1;
                st.count(route, |c| c.panics += 1);
                record_failure(&mut st, name, format!("hook panicked: {message}"), true);
                None
            }
            Err(RecvTimeoutError::Timeout) => {
                // Abandon the worker: dropping our sender lets it exit once the
                // stuck call returns; its answer goes to a dropped receiver. Until
                // then the lane starts no other thread.
                let worker = &mut st.workers[lane as usize];
                worker.jobs = None;
                // A second caller timing out on the same stuck worker must not clear
                // the first one's record of it.
                if let Some(alive) = worker.alive.take() {
                    worker.stuck = Some(alive);
                }
                st.suppressed_until = Some(Instant::now() + self.suppress_for);
                st.stats.n_timeouts += 1;
                st.count(route, |c| c.timeouts += 1);
                record_failure(
                    &mut st,
                    name,
                    format!(
                        "hook exceeded its {:?} budget; skipped for {:?}",
                        self.budget, self.suppress_for
                    ),
                    false,
                );
                None
            }
            Err(RecvTimeoutError::Disconnected) => {
                st.workers[lane as usize].jobs = None;
                st.stats.n_errors += 1;
                st.count(route, |c| c.errors += 1);
                record_failure(&mut st, name, "hook worker exited".to_owned(), false);
                None
            }
        }
    }
}

/// The worker thread of `entry`'s `lane`, started if there is none; `None` (counted)
/// while the hook is suppressed, while an abandoned call is still running, or when no
/// thread could be started.
fn worker_sender(entry: &Entry, route: Route, queued_at: Instant) -> Option<mpsc::Sender<Job>> {
    let lane = Lane::of(route);
    let name = entry.hook.name();
    let mut st = entry.state();
    if let Some(until) = st.suppressed_until {
        if queued_at < until {
            st.stats.n_suppressed += 1;
            return None;
        }
        st.suppressed_until = None;
    }
    let worker = &mut st.workers[lane as usize];
    if worker
        .stuck
        .as_ref()
        .is_some_and(|alive| alive.load(Ordering::SeqCst))
    {
        // The abandoned call has not returned yet: skip, start nothing.
        st.stats.n_suppressed += 1;
        return None;
    }
    worker.stuck = None;
    st.stats.n_calls += 1;
    st.count(route, |c| c.calls += 1);
    let worker = &mut st.workers[lane as usize];
    match &worker.jobs {
        Some(sender) => Some(sender.clone()),
        None => match spawn_worker(Arc::clone(&entry.hook)) {
            Ok((sender, alive)) => {
                worker.jobs = Some(sender.clone());
                worker.alive = Some(alive);
                Some(sender)
            }
            Err(err) => {
                record_failure(
                    &mut st,
                    name,
                    format!("cannot start hook worker: {err}"),
                    false,
                );
                st.stats.n_errors += 1;
                st.count(route, |c| c.errors += 1);
                None
            }
        },
    }
}

/// How often a hook's panics are logged at `warn` (the rest at `debug`).
const PANIC_LOG_PERIOD: Duration = Duration::from_secs(60);

/// Logs a failure: the first of each distinct message at `warn`, repeats at
/// `debug`; panics (whose messages vary) at `warn` once a minute per hook.
fn record_failure(st: &mut EntryState, name: &str, message: String, panicked: bool) {
    if panicked {
        let now = Instant::now();
        if st
            .panic_logged_at
            .is_some_and(|at| now.duration_since(at) < PANIC_LOG_PERIOD)
        {
            tracing::debug!(hook = name, reason = %message, "output hook panicked again");
        } else {
            st.panic_logged_at = Some(now);
            tracing::warn!(
                hook = name,
                reason = %message,
                panics = st.stats.n_panics,
                "output hook panicked; output passed on unchanged (its panics are logged once a minute)"
            );
        }
    } else if st.stats.last_failure.as_deref() == Some(message.as_str()) {
        tracing::debug!(hook = name, reason = %message, "output hook skipped again");
    } else {
        tracing::warn!(hook = name, reason = %message, "output hook skipped; output passed on unchanged");
    }
    st.stats.last_failure = Some(message);
}

/// Starts a worker thread for `hook`: its job queue, and a flag that stays true
/// until the thread has exited.
fn spawn_worker(hook: Arc<dyn Hook>) -> std::io::Result<(mpsc::Sender<Job>, Arc<AtomicBool>)> {
    let (jobs, queue) = mpsc::channel::<Job>();
    let alive = Arc::new(AtomicBool::new(true));
    let running = Arc::clone(&alive);
    std::thread::Builder::new()
        .name(format!("herd-hook-{}", hook.name()))
        .spawn(move || {
            // Cleared however the thread ends.
            struct Exit(Arc<AtomicBool>);
            impl Drop for Exit {
                fn drop(&mut self) {
                    self.0.store(false, Ordering::SeqCst);
                }
            }
            let _exit = Exit(running);
            while let Ok(job) = queue.recv() {
                let result = catch_unwind(AssertUnwindSafe(|| {
                    hook.transform(&job.ctx.as_ctx(), &job.output)
                }));
                let outcome = match result {
                    Ok(Ok(replacement)) => Outcome::Done(replacement),
                    Ok(Err(err)) if err.panicked => Outcome::Panicked(err.message),
                    Ok(Err(err)) => Outcome::Failed(err.message),
                    Err(payload) => Outcome::Panicked(panic_message(payload.as_ref())),
                };
                // The caller may have given up (timeout); that is fine.
                let _ = job.reply.send(outcome);
            }
        })?;
    Ok((jobs, alive))
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// The output pipeline: the hook chain, then the redactor as a fixed last stage.
#[derive(Debug)]
pub struct Pipeline {
    chain: HookChain,
    /// Invariant: runs after every hook on every output; not part of `chain`.
    redactor: Arc<Redactor>,
}

impl Default for Pipeline {
    fn default() -> Pipeline {
        Pipeline::redaction_only()
    }
}

/// The built-in redactor, compiled once per process (it depends on nothing).
fn builtin_redactor() -> Arc<Redactor> {
    static BUILTIN: OnceLock<Arc<Redactor>> = OnceLock::new();
    Arc::clone(BUILTIN.get_or_init(|| Arc::new(Redactor::builtin())))
}

impl Pipeline {
    /// A pipeline with no hooks and the built-in redactor.
    pub fn redaction_only() -> Pipeline {
        Pipeline {
            chain: HookChain::default(),
            redactor: builtin_redactor(),
        }
    }

    /// A pipeline running `chain`, then a redactor built from `config`.
    ///
    /// # Errors
    ///
    /// Returns the redactor's error for an invalid extra pattern (the error names it).
    pub fn new(chain: HookChain, config: &RedactorConfig) -> Result<Pipeline, Error> {
        let redactor = if config.extra_patterns.is_empty() {
            builtin_redactor()
        } else {
            Arc::new(Redactor::new(config)?)
        };
        Ok(Pipeline { chain, redactor })
    }

    /// A pipeline with an already built redactor.
    pub fn with_redactor(chain: HookChain, redactor: Arc<Redactor>) -> Pipeline {
        Pipeline { chain, redactor }
    }

    /// Redacts a command line for display (no hooks run on commands).
    pub fn redact_command<'c>(&self, command: &'c str) -> Cow<'c, str> {
        self.redactor.redact_command(command)
    }

    /// The hook chain.
    pub fn chain(&self) -> &HookChain {
        &self.chain
    }

    /// The redactor (the fixed last stage).
    pub fn redactor(&self) -> &Arc<Redactor> {
        &self.redactor
    }

    /// Whether the redactor is the built-in one alone (no configured patterns,
    /// which may span lines): the block read-out's condition (`readout`).
    pub(crate) fn has_builtin_redactor(&self) -> bool {
        Arc::ptr_eq(&self.redactor, &builtin_redactor())
    }

    /// Counters of every hook, in order.
    pub fn hook_stats(&self) -> Vec<HookStats> {
        self.chain.stats()
    }
}

#[cfg(test)]
mod tests;
