//! Unit tests for the registry's static guarantees and pure helpers.

use super::*;

fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}

#[test]
fn registry_is_cheap_to_share_across_tasks() {
    assert_send_sync::<Registry>();
}

#[test]
fn registry_needs_a_runtime() {
    let dir = std::env::temp_dir();
    match Registry::new(Home::new(dir), RegistryConfig::default()) {
        Err(Error::NoRuntime) => {}
        other => panic!("expected NoRuntime outside a runtime, got {other:?}"),
    }
}

#[tokio::test]
async fn a_missing_home_is_a_typed_error_naming_it_and_is_not_created() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let missing = dir.path().join("no-such-home");
    match Registry::new(Home::new(&missing), RegistryConfig::default()) {
        Err(Error::HomeMissing { path }) => assert_eq!(path, missing),
        other => panic!("expected HomeMissing, got {other:?}"),
    }
    assert!(!missing.exists(), "the home is never created");
    let text = Error::HomeMissing {
        path: missing.clone(),
    }
    .to_string();
    assert!(text.contains(&missing.display().to_string()), "{text}");
}

#[test]
fn lifecycle_sources_spare_persistent_sessions() {
    assert!(KillSource::KillAll.spares_persistent());
    assert!(KillSource::TurnTimeout.spares_persistent());
    assert!(KillSource::AgentClose.spares_persistent());
    assert!(!KillSource::ProcessKill.spares_persistent());
    assert!(!KillSource::OperatorStop.spares_persistent());
    assert!(!KillSource::HostShutdown.spares_persistent());
}

/// A real job (which ends on its own once the file `gate` exists), finished at once
/// through the choke point as if collecting its exit status had failed, its status
/// being `known` beforehand; the session's poll answer after.
async fn finished_with_a_failed_wait(
    registry: &Registry,
    known: Option<crate::session::ExitInfo>,
    gate: &std::path::Path,
) -> (SpawnInfo, crate::answers::PollAnswer) {
    let info = registry
        .spawn(SpawnRequest {
            // Not a short sleep: under load it could end before the finish below.
            command: format!("while [ ! -e {} ]; do sleep 0.05; done", gate.display()),
            task_id: "t".to_owned(),
            ..SpawnRequest::default()
        })
        .await
        .expect("the job starts");
    let session = registry
        .inner
        .table
        .running_session(&info.session_id)
        .expect("the job runs");
    session.state().exit = known;
    registry
        .inner
        .finish(
            &session,
            crate::reader::Finish {
                exit: Err(std::io::Error::other("waitpid: no child process")),
                descendants_alive: Vec::new(),
                killed_by: None,
                leftovers: Vec::new(),
            },
        )
        .await;
    let polled = registry
        .poll(info.session_id.as_str())
        .expect("the session is known");
    (info, polled)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b14_a_known_exit_status_wins_when_collecting_it_fails() {
    // B14: the status was recorded (a PTY child reaped before the wait), then
    // collecting it failed: the session finishes with the known status, not as
    // lost. The failure is handed to the choke point directly (no OS call can be
    // made to fail on cue); the job itself is real and ends on its own.
    let dir = tempfile::tempdir().expect("a temp dir");
    let registry = Registry::new(Home::new(dir.path().to_owned()), RegistryConfig::default())
        .expect("a registry in a runtime");
    let seven = crate::session::ExitInfo {
        code: Some(7),
        signal: None,
    };
    let gate = dir.path().join("gate");
    let (info, polled) = finished_with_a_failed_wait(&registry, Some(seven), &gate).await;
    assert_eq!(polled.exit_code, Some(7), "{polled:?}");
    assert_eq!(polled.status, crate::SessionStatus::Exited, "{polled:?}");
    // With nothing known, the same failure reads as an unknown exit.
    let (unknown, polled) = finished_with_a_failed_wait(&registry, None, &gate).await;
    assert_eq!(polled.exit_code, None, "{polled:?}");
    assert_ne!(polled.status, crate::SessionStatus::Running, "{polled:?}");
    std::fs::write(&gate, b"").expect("the temp dir is writable");
    // The real jobs end on their own and are reaped: no process is left.
    for pgid in [info.pid, unknown.pid] {
        herd_test_support::wait::until(
            std::time::Duration::from_secs(10),
            "the jobs' groups to be gone",
            || herd_test_support::procs::group_members(pgid).is_empty(),
        )
        .await;
    }
}

/// A hook that takes `delay` on the completion route and notes that it ran.
#[derive(Debug)]
struct SlowCompletion {
    delay: std::time::Duration,
    ran: std::sync::atomic::AtomicBool,
}

impl herd_hooks::Hook for SlowCompletion {
    fn name(&self) -> &str {
        "slow-completion"
    }
    fn transform(
        &self,
        ctx: &herd_hooks::OutputContext<'_>,
        _output: &str,
    ) -> Result<Option<String>, herd_hooks::HookError> {
        if ctx.route == herd_hooks::Route::Completion {
            // The hook's own work takes `delay` (a plugin busy on it).
            let until = std::time::Instant::now() + self.delay;
            while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
                std::thread::park_timeout(left);
            }
            self.ran.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(None)
    }
}

#[tokio::test(flavor = "current_thread")]
async fn b30_a_slow_completion_hook_does_not_hold_the_runtime() {
    // The choke point's hooks (and its ledger commit) run on the blocking pool: on
    // a runtime of one thread, a ticker keeps ticking while a completion hook takes
    // 1.5 s. (When the choke point ran on the runtime, the ticker stalled as long.)
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};
    let delay = Duration::from_millis(1_500);
    let hook = Arc::new(SlowCompletion {
        delay,
        ran: std::sync::atomic::AtomicBool::new(false),
    });
    let dir = tempfile::tempdir().expect("a temp dir");
    let chain = herd_hooks::HookChain::new(vec![Arc::clone(&hook) as Arc<dyn herd_hooks::Hook>]);
    let config = RegistryConfig {
        pipeline: Arc::new(
            herd_hooks::Pipeline::new(chain, &herd_hooks::RedactorConfig::default())
                .expect("a pipeline"),
        ),
        ..RegistryConfig::default()
    };
    let registry = Registry::new(Home::new(dir.path().to_owned()), config).expect("a registry");
    // The ticker runs from before the spawn to the end: the job may end (and the
    // hook run) while the spawn's answer is still on its way.
    let longest_us = Arc::new(AtomicU64::new(0));
    let n_ticks = Arc::new(AtomicU64::new(0));
    let ticker = {
        let (longest_us, n_ticks) = (Arc::clone(&longest_us), Arc::clone(&n_ticks));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last = Instant::now();
            loop {
                tick.tick().await;
                let gap = u64::try_from(last.elapsed().as_micros()).unwrap_or(u64::MAX);
                longest_us.fetch_max(gap, Ordering::SeqCst);
                n_ticks.fetch_add(1, Ordering::SeqCst);
                last = Instant::now();
            }
        })
    };
    let info = registry
        .spawn(SpawnRequest {
            command: "true".to_owned(),
            task_id: "t".to_owned(),
            ..SpawnRequest::default()
        })
        .await
        .expect("the job starts");
    let id = info.session_id.as_str();
    herd_test_support::wait::until(Duration::from_secs(30), "the job to finish", || {
        registry
            .poll(id)
            .is_ok_and(|p| p.status != crate::SessionStatus::Running)
    })
    .await;
    // One more tick after the finish, so a stall just before it is counted.
    let ticks = n_ticks.load(Ordering::SeqCst);
    herd_test_support::wait::until(Duration::from_secs(10), "the ticker to tick again", || {
        n_ticks.load(Ordering::SeqCst) >= ticks + 2
    })
    .await;
    ticker.abort();
    let longest = Duration::from_micros(longest_us.load(Ordering::SeqCst));
    assert!(
        hook.ran.load(Ordering::SeqCst),
        "the completion went through the slow hook"
    );
    assert!(
        longest < delay / 2,
        "the runtime stalled {longest:?} while the completion hook ran"
    );
}

/// A hook that, on the poll route, says it runs and then waits for `release` (at
/// most `deadline`), as a plugin busy on a poll's output would; notes whether it
/// gave up waiting.
#[derive(Debug)]
struct HeldPoll {
    running: std::sync::atomic::AtomicBool,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    deadline: std::time::Duration,
    gave_up: std::sync::atomic::AtomicBool,
}

impl herd_hooks::Hook for HeldPoll {
    fn name(&self) -> &str {
        "held-poll"
    }
    fn transform(
        &self,
        ctx: &herd_hooks::OutputContext<'_>,
        _output: &str,
    ) -> Result<Option<String>, herd_hooks::HookError> {
        if ctx.route == herd_hooks::Route::Poll {
            self.running
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let release = self
                .release
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if release.recv_timeout(self.deadline).is_err() {
                self.gave_up
                    .store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        Ok(None)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b30_a_poll_hook_still_running_holds_no_lock_a_kill_needs() {
    // The hooks run after the session's state is read and released: while a
    // poll's hook is busy, a kill of the same session concludes (its finish
    // stamps the state under the table lock). When the poll held the state lock
    // through its hooks, the kill waited for the hook.
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    let (release, released) = std::sync::mpsc::channel();
    let hook = Arc::new(HeldPoll {
        running: std::sync::atomic::AtomicBool::new(false),
        release: std::sync::Mutex::new(released),
        deadline: Duration::from_secs(20),
        gave_up: std::sync::atomic::AtomicBool::new(false),
    });
    let dir = tempfile::tempdir().expect("a temp dir");
    let chain = herd_hooks::HookChain::new(vec![Arc::clone(&hook) as Arc<dyn herd_hooks::Hook>])
        .with_budget(Duration::from_secs(60));
    let config = RegistryConfig {
        pipeline: Arc::new(
            herd_hooks::Pipeline::new(chain, &herd_hooks::RedactorConfig::default())
                .expect("a pipeline"),
        ),
        ..RegistryConfig::default()
    };
    let registry = Registry::new(Home::new(dir.path().to_owned()), config).expect("a registry");
    let info = registry
        .spawn(SpawnRequest {
            command: "sleep 60".to_owned(),
            task_id: "t".to_owned(),
            ..SpawnRequest::default()
        })
        .await
        .expect("the job starts");
    let id = info.session_id.as_str().to_owned();
    let poller = {
        let (registry, id) = (registry.clone(), id.clone());
        tokio::task::spawn_blocking(move || registry.poll(&id))
    };
    herd_test_support::wait::until(Duration::from_secs(30), "the poll's hook to run", || {
        hook.running.load(Ordering::SeqCst)
    })
    .await;
    // The kill's own answer waits for the poll's call (the hook's answer lane is
    // serialised), so the finish is watched through its completion event (the
    // notice lane).
    let mut events = registry.subscribe();
    let killer = {
        let (registry, id) = (registry.clone(), id.clone());
        tokio::spawn(async move { registry.kill(&id, KillSource::ProcessKill).await })
    };
    let completed = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            match events.recv().await {
                Ok(Event::Completion { session_id, .. }) if session_id.as_str() == id => {
                    return true;
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return false,
            }
        }
    })
    .await;
    assert_eq!(
        completed,
        Ok(true),
        "the kill's finish did not publish while the poll's hook ran"
    );
    assert!(
        !hook.gave_up.load(Ordering::SeqCst),
        "the kill finished only after the poll's hook gave up: the hook held a lock the finish needs"
    );
    release.send(()).expect("the hook waits");
    let polled = poller
        .await
        .expect("the poll ran")
        .expect("the poll is answered");
    assert_eq!(polled.session_id.as_str(), id);
    let killed = killer
        .await
        .expect("the kill ran")
        .expect("the kill is answered");
    assert_eq!(killed.status, crate::KillStatus::Killed, "{killed:?}");
    herd_test_support::wait::until(
        Duration::from_secs(10),
        "the job's group to be gone",
        || herd_test_support::procs::group_members(info.pid).is_empty(),
    )
    .await;
}

/// A running job that printed `printed` (a `printf` format) and then sleeps, in a
/// registry of its own, once its log ends with `ends`.
async fn printed_then_sleeping(
    printed: &str,
    ends: &[u8],
) -> (tempfile::TempDir, Registry, String) {
    use std::time::Duration;
    let dir = tempfile::tempdir().expect("a temp dir");
    let registry = Registry::new(Home::new(dir.path().to_owned()), RegistryConfig::default())
        .expect("a registry");
    let info = registry
        .spawn(SpawnRequest {
            command: format!("printf '{printed}'; sleep 30"),
            task_id: "t".to_owned(),
            ..SpawnRequest::default()
        })
        .await
        .expect("the job starts");
    let id = info.session_id.as_str().to_owned();
    let log = dir.path().join("logs/sessions").join(format!("{id}.log"));
    herd_test_support::wait::until(Duration::from_secs(30), "the job to print", || {
        std::fs::read(&log).is_ok_and(|text| text.ends_with(ends))
    })
    .await;
    (dir, registry, id)
}

// B30: a follower can hand the log over to another route only at a line's start it
// showed up to and holds everything after: after whole lines, at the start of the
// unfinished one; never once the unfinished line was partly shown on idle, nor
// after bytes that are not UTF-8 (its held text no longer counts the log's bytes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b30_a_follower_hands_over_only_at_a_line_start_it_showed_up_to() {
    let (_dir, registry, id) = printed_then_sleeping("one\\ntwo\\nab cd", b"ab cd").await;
    let mut follower = registry.log_follower(&id, 0).expect("a follower");
    let read = follower.read(1 << 20).expect("a read");
    assert_eq!(read.output.as_str(), "one\ntwo\n");
    assert_eq!(read.unread, 0);
    assert_eq!(
        follower.hand_over_at(),
        Some(8),
        "the unfinished line's start"
    );
    assert_eq!(follower.release_idle().as_str(), "ab cd");
    assert_eq!(follower.hand_over_at(), None, "part of the line was shown");
    registry
        .kill(&id, crate::KillSource::ProcessKill)
        .await
        .expect("the kill");

    // A token-like run held on idle went through the hooks, which may change its
    // length: no hand-over from it.
    let (_dir, registry, id) = printed_then_sleeping("ok\\nabcdefghijklmnop", b"mnop").await;
    let mut follower = registry.log_follower(&id, 0).expect("a follower");
    let read = follower.read(1 << 20).expect("a read");
    assert_eq!(read.output.as_str(), "ok\n");
    assert_eq!(follower.hand_over_at(), Some(3));
    assert_eq!(follower.release_idle().as_str(), "", "the run is held");
    assert_eq!(
        follower.hand_over_at(),
        None,
        "the held run went through the hooks"
    );
    registry
        .kill(&id, crate::KillSource::ProcessKill)
        .await
        .expect("the kill");

    let (_dir, registry, id) = printed_then_sleeping("bad \\200 byte\\nok\\n", b"ok\n").await;
    let mut follower = registry.log_follower(&id, 0).expect("a follower");
    let read = follower.read(1 << 20).expect("a read");
    assert!(read.output.as_str().ends_with("ok\n"), "{:?}", read.output);
    assert_eq!(
        follower.hand_over_at(),
        None,
        "a byte that is not UTF-8 was read"
    );
    registry
        .kill(&id, crate::KillSource::ProcessKill)
        .await
        .expect("the kill");
}

/// What a [`RowHeld`] store's row writes wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// A readiness mark asked for: the order a ready pattern that matches the job's
    /// first line can take against its spawn's commit.
    Ready,
    /// A kill's intent asked for: the order a kill of an owner's sessions can take
    /// against a spawn of theirs under way.
    KillIntent,
}

/// A running store whose row writes (a spawn's commit) wait until the update
/// `until` names was asked for, or 10 s went by.
#[derive(Debug)]
struct RowHeld {
    rows: herd_persistence::MemoryRunningStore,
    until: Until,
    asked: std::sync::Mutex<bool>,
    on_ask: std::sync::Condvar,
}

impl RowHeld {
    fn until(until: Until) -> RowHeld {
        RowHeld {
            rows: herd_persistence::MemoryRunningStore::default(),
            until,
            asked: std::sync::Mutex::new(false),
            on_ask: std::sync::Condvar::new(),
        }
    }

    /// Lets the held row writes go once `what` is asked for.
    fn release(&self, what: Until) {
        if what == self.until {
            *self
                .asked
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
            self.on_ask.notify_all();
        }
    }
}

impl herd_persistence::RunningStore for RowHeld {
    fn load(&self) -> Result<herd_persistence::Loaded, herd_persistence::Error> {
        self.rows.load()
    }

    fn write_one(
        &self,
        writer: &herd_persistence::Writer,
        record: &herd_persistence::SessionRecord,
    ) -> Result<(), herd_persistence::Error> {
        let asked = self
            .asked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        drop(
            self.on_ask
                .wait_timeout_while(asked, std::time::Duration::from_secs(10), |a| !*a)
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        self.rows.write_one(writer, record)
    }

    fn write_own(
        &self,
        writer: &herd_persistence::Writer,
        records: &[herd_persistence::SessionRecord],
        finished: &[&str],
    ) -> Result<(), herd_persistence::Error> {
        self.rows.write_own(writer, records, finished)
    }

    fn remove(&self, session_ids: &[&str]) -> Result<usize, herd_persistence::Error> {
        self.rows.remove(session_ids)
    }

    fn record_kill_intent(
        &self,
        session_ids: &[&str],
        intent: &herd_persistence::KillIntent,
    ) -> Result<usize, herd_persistence::Error> {
        let recorded = self.rows.record_kill_intent(session_ids, intent);
        self.release(Until::KillIntent);
        recorded
    }

    fn record_ready(
        &self,
        session_id: &str,
        ready_at: f64,
    ) -> Result<bool, herd_persistence::Error> {
        let marked = self.rows.record_ready(session_id, ready_at);
        self.release(Until::Ready);
        marked
    }
}

/// The running row of `id` in `store`, if it has one.
fn stored_row(store: &RowHeld, id: &str) -> Option<herd_persistence::CheckpointEntry> {
    herd_persistence::RunningStore::load(store)
        .expect("the store loads")
        .entries
        .into_iter()
        .find(|e| e.session.id == id)
}

/// A registry whose running rows go to `store`, with `config` otherwise.
fn registry_over(dir: &std::path::Path, store: &Arc<RowHeld>, config: RegistryConfig) -> Registry {
    let config = RegistryConfig {
        running_store: Some(Arc::clone(store) as Arc<dyn herd_persistence::RunningStore>),
        ..config
    };
    Registry::new(Home::new(dir.to_owned()), config).expect("a registry")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b17_a_kill_begun_before_the_spawns_commit_has_its_intent_stored() {
    // A kill of an owner's sessions reaches every one in the table, also one whose
    // spawn has not committed its running row yet: the intent's update met no row,
    // and a daemon dying in the kill's grace would not have reported it. Here the
    // spawn's row write waits until the kill asked for its intent.
    use std::time::Duration;
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = Arc::new(RowHeld::until(Until::KillIntent));
    let config = RegistryConfig {
        kill_grace: Duration::from_secs(3),
        ..RegistryConfig::default()
    };
    let registry = registry_over(dir.path(), &store, config);
    let spawning = tokio::spawn({
        let registry = registry.clone();
        async move {
            registry
                .spawn(SpawnRequest {
                    // TERM stays ignored across the exec: the kill waits its grace.
                    command: "trap '' TERM; exec sleep 30".to_owned(),
                    task_id: "t".to_owned(),
                    ..SpawnRequest::default()
                })
                .await
        }
    });
    let mut found = None;
    herd_test_support::wait::until(Duration::from_secs(10), "the session in the table", || {
        found = registry.snapshot_running_ids("t").into_iter().next();
        found.is_some()
    })
    .await;
    let id = found.expect("a running session");
    assert!(
        stored_row(&store, id.as_str()).is_none(),
        "the spawn's row is held until the kill asks for its intent"
    );
    let killing = tokio::spawn({
        let registry = registry.clone();
        let id = id.clone();
        async move { registry.kill(id.as_str(), KillSource::ProcessKill).await }
    });
    let mut intent = None;
    herd_test_support::wait::until(
        Duration::from_secs(10),
        "the kill's intent in the store while the kill waits its grace",
        || {
            intent = stored_row(&store, id.as_str()).and_then(|e| e.kill_intent);
            intent.is_some()
        },
    )
    .await;
    let intent = intent.expect("an intent");
    assert_eq!(intent.source, "process_kill");
    let answer = killing.await.expect("the kill task").expect("the kill");
    assert_eq!(answer.status, crate::KillStatus::Killed);
    spawning
        .await
        .expect("the spawn task")
        .expect("the spawn answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b45_a_ready_mark_made_before_the_spawns_commit_is_stored() {
    // CI, stop 57: `ready::b45_the_ready_mark_survives_a_daemon_crash` found no mark
    // after a crash. The job's first line matched the pattern while its spawn's
    // running row was not committed yet, so the mark's update met no row; here that
    // order is forced.
    use std::time::Duration;
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = Arc::new(RowHeld::until(Until::Ready));
    let registry = registry_over(dir.path(), &store, RegistryConfig::default());
    let info = registry
        .spawn(SpawnRequest {
            command: "echo up; exec sleep 30".to_owned(),
            task_id: "t".to_owned(),
            ready: Some("up".to_owned()),
            ..SpawnRequest::default()
        })
        .await
        .expect("the job starts");
    let id = info.session_id.as_str();
    let answer = registry
        .wait_ready(id, Duration::from_secs(20), None)
        .await
        .expect("the wait answers");
    assert!(answer.ready_at.is_some(), "the session is ready");
    let row = stored_row(&store, id).expect("the session has a running row");
    assert!(
        row.ready_at.is_some(),
        "the ready mark a waiter was told of is in the store"
    );
    registry
        .kill(id, KillSource::ProcessKill)
        .await
        .expect("the job is killed");
}
