//! Tests for the finish gate: how many choke points run on the blocking pool at
//! once, that a caller that goes away cancels none, and which choke points leave
//! the runtime at all.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use super::FinishGate;
use crate::id::SessionId;

/// Counters the gated jobs share, and the gate they wait at until the test opens it.
struct Jobs {
    running: AtomicUsize,
    most: AtomicUsize,
    done: watch::Sender<usize>,
    started: watch::Sender<usize>,
    open: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

impl Jobs {
    fn new() -> Arc<Jobs> {
        Arc::new(Jobs {
            running: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            done: watch::channel(0).0,
            started: watch::channel(0).0,
            open: std::sync::Mutex::new(false),
            opened: std::sync::Condvar::new(),
        })
    }

    /// A blocking job: counts itself running, waits for the gate, counts itself done.
    fn job(self: &Arc<Jobs>) -> impl FnOnce() + Send + 'static {
        let jobs = Arc::clone(self);
        move || {
            let now = jobs.running.fetch_add(1, Ordering::SeqCst) + 1;
            jobs.most.fetch_max(now, Ordering::SeqCst);
            jobs.started.send_modify(|n| *n += 1);
            let mut open = jobs.open.lock().expect("the gate's lock is never poisoned");
            while !*open {
                open = jobs
                    .opened
                    .wait(open)
                    .expect("the gate's lock is never poisoned");
            }
            drop(open);
            jobs.running.fetch_sub(1, Ordering::SeqCst);
            jobs.done.send_modify(|n| *n += 1);
        }
    }

    fn open(&self) {
        *self.open.lock().expect("the gate's lock is never poisoned") = true;
        self.opened.notify_all();
    }

    async fn until_started(&self, n: usize) {
        until(&self.started, n).await;
    }

    async fn until_done(&self, n: usize) {
        until(&self.done, n).await;
    }
}

/// Waits until `count` reaches `n` (a minute at most).
async fn until(count: &watch::Sender<usize>, n: usize) {
    let mut seen = count.subscribe();
    tokio::time::timeout(Duration::from_secs(60), seen.wait_for(|c| *c >= n))
        .await
        .expect("the count is reached in time")
        .expect("the sender is alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b9_a_burst_of_finishes_runs_a_few_at_once_and_every_one_runs() {
    let gate = Arc::new(FinishGate::new(3));
    let jobs = Jobs::new();
    let callers: Vec<_> = (0..40)
        .map(|_| {
            let (gate, job) = (Arc::clone(&gate), jobs.job());
            tokio::spawn(async move { gate.off_runtime(&SessionId::generate(), job).await })
        })
        .collect();
    jobs.until_started(3).await;
    // Three run and wait at the gate; the 37 others wait for a turn, not on a thread.
    assert_eq!(jobs.running.load(Ordering::SeqCst), 3);
    jobs.open();
    for caller in callers {
        caller.await.expect("a caller");
    }
    assert_eq!(*jobs.done.borrow(), 40);
    assert_eq!(
        jobs.most.load(Ordering::SeqCst),
        3,
        "never more than three at once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b9_a_finish_whose_caller_went_away_still_runs() {
    let gate = Arc::new(FinishGate::new(1));
    let jobs = Jobs::new();
    let first = {
        let (gate, job) = (Arc::clone(&gate), jobs.job());
        tokio::spawn(async move { gate.off_runtime(&SessionId::generate(), job).await })
    };
    jobs.until_started(1).await;
    // The second waits for the only turn; its caller goes away meanwhile (polled
    // once, so it asked for a turn, then dropped).
    let asked = tokio::time::timeout(
        Duration::ZERO,
        gate.off_runtime(&SessionId::generate(), jobs.job()),
    )
    .await;
    assert!(asked.is_err(), "the second waits for its turn");
    jobs.open();
    first.await.expect("the first caller");
    // Its job ran to its end all the same.
    jobs.until_done(2).await;
    assert_eq!(jobs.most.load(Ordering::SeqCst), 1);
}

/// A hook that changes nothing (its presence is what counts).
#[derive(Debug)]
struct Unchanged;

impl herd_hooks::Hook for Unchanged {
    fn name(&self) -> &str {
        "unchanged"
    }
    fn transform(
        &self,
        _ctx: &herd_hooks::OutputContext<'_>,
        _output: &str,
    ) -> Result<Option<String>, herd_hooks::HookError> {
        Ok(None)
    }
}

/// A registry in `home`, with `hooks` before the redactor.
fn registry(home: &std::path::Path, hooks: Vec<Arc<dyn herd_hooks::Hook>>) -> crate::Registry {
    let pipeline = herd_hooks::Pipeline::new(
        herd_hooks::HookChain::new(hooks),
        &herd_hooks::RedactorConfig::default(),
    )
    .expect("a pipeline");
    let config = crate::RegistryConfig {
        pipeline: Arc::new(pipeline),
        ..crate::RegistryConfig::default()
    };
    crate::Registry::new(crate::Home::new(home), config).expect("a registry in a runtime")
}

/// A job of task `t` that waits for its stdin to close, running, and its session.
async fn job(registry: &crate::Registry, notify: bool) -> Arc<crate::session::Session> {
    let info = registry
        .spawn(crate::SpawnRequest {
            command: "read -r _".to_owned(),
            task_id: "t".to_owned(),
            notify,
            ..crate::SpawnRequest::default()
        })
        .await
        .expect("the job starts");
    registry
        .inner
        .table
        .running_session(&info.session_id)
        .expect("the job runs")
}

/// Ends `sessions` (their stdin closed) and waits for each to finish.
async fn end(registry: &crate::Registry, sessions: &[&Arc<crate::session::Session>]) {
    for s in sessions {
        registry
            .close_stdin(s.id.as_str())
            .await
            .expect("stdin closes");
        let answer = registry
            .wait(s.id.as_str(), Duration::from_secs(60), None)
            .await
            .expect("the wait is answered");
        assert_eq!(answer.status, crate::WaitStatus::Exited, "{answer:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b30_a_finish_leaves_the_runtime_for_a_completion_hook_or_a_ledger_commit() {
    // The choke point runs where it is called only when nothing in it may block:
    // no hook on the completion route and no completion to commit to the ledger.
    let (plain_home, hooked_home) = (
        tempfile::tempdir().expect("a temp dir"),
        tempfile::tempdir().expect("a temp dir"),
    );
    let plain = registry(plain_home.path(), Vec::new());
    let (quiet, notified) = (job(&plain, false).await, job(&plain, true).await);
    assert!(plain.inner.finishes_in_place(&quiet), "nothing slow to do");
    assert!(
        !plain.inner.finishes_in_place(&notified),
        "a notified completion is committed (an fsync) first"
    );
    let hooked = registry(hooked_home.path(), vec![Arc::new(Unchanged)]);
    let hooked_quiet = job(&hooked, false).await;
    assert!(
        !hooked.inner.finishes_in_place(&hooked_quiet),
        "a hook runs on the completion's output"
    );
    // Either way each ends with its one completion.
    end(&plain, &[&quiet, &notified]).await;
    end(&hooked, &[&hooked_quiet]).await;
}
