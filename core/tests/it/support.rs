//! Shared fixture: a registry on a temporary home, deadlines, and the group-gone check.

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use herd_core::{
    Event, Home, Registry, RegistryConfig, SessionId, SpawnInfo, SpawnRequest, WaitAnswer,
};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

pub(crate) use herd_test_support::procs::group_members;
pub(crate) use herd_test_support::wait::until as wait_until;

/// Tests share this lock; the descriptor-count test takes it exclusively, because the
/// descriptor table is process-wide and other tests open pipes concurrently.
static FD_TABLE: RwLock<()> = RwLock::new(());

/// A test's hold on the descriptor table.
#[expect(dead_code, reason = "held only for its drop")]
enum Hold {
    Shared(RwLockReadGuard<'static, ()>),
    Exclusive(RwLockWriteGuard<'static, ()>),
}

/// A registry on its own temporary home.
pub(crate) struct Fixture {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) registry: Registry,
    pgids: std::sync::Mutex<Vec<i32>>,
    _hold: Hold,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        Fixture::with(|_| {})
    }

    pub(crate) fn with(tune: impl FnOnce(&mut RegistryConfig)) -> Fixture {
        let hold = Hold::Shared(FD_TABLE.read().unwrap_or_else(PoisonError::into_inner));
        Fixture::build(tune, hold)
    }

    /// A fixture that no other test runs beside (for descriptor counting).
    pub(crate) fn exclusive(tune: impl FnOnce(&mut RegistryConfig)) -> Fixture {
        let hold = Hold::Exclusive(FD_TABLE.write().unwrap_or_else(PoisonError::into_inner));
        Fixture::build(tune, hold)
    }

    fn build(tune: impl FnOnce(&mut RegistryConfig), hold: Hold) -> Fixture {
        let dir = tempfile::tempdir().expect("a temp dir can be created");
        let mut config = RegistryConfig {
            kill_grace: Duration::from_millis(500),
            ..RegistryConfig::default()
        };
        tune(&mut config);
        let registry = Registry::new(Home::new(dir.path()), config).expect("inside a runtime");
        Fixture {
            dir,
            registry,
            pgids: std::sync::Mutex::new(Vec::new()),
            _hold: hold,
        }
    }

    pub(crate) fn home(&self) -> Home {
        Home::new(self.dir.path())
    }

    /// Spawns `command` in pipe mode for owner `t`.
    pub(crate) async fn run(&self, command: &str) -> SpawnInfo {
        self.spawn(SpawnRequest {
            command: command.to_owned(),
            task_id: "t".to_owned(),
            ..SpawnRequest::default()
        })
        .await
    }

    pub(crate) async fn spawn(&self, req: SpawnRequest) -> SpawnInfo {
        let info = self.registry.spawn(req).await.expect("spawn succeeds");
        self.pgids.lock().expect("not poisoned").push(info.pid);
        info
    }

    /// Waits up to 30 s for the session to finish.
    pub(crate) async fn done(&self, id: &SessionId) -> WaitAnswer {
        let answer = self
            .registry
            .wait(id.as_str(), Duration::from_secs(30), None)
            .await
            .expect("wait succeeds");
        assert_eq!(
            answer.status,
            herd_core::WaitStatus::Exited,
            "session {id} did not finish within 30 s; output so far: {:?}",
            answer.output
        );
        answer
    }

    /// Asserts every spawned session's process group is gone: no live member is left.
    /// Zombies are not counted, because an orphan re-parented to an init that does
    /// not reap (as in some containers) stays a zombie after it died.
    pub(crate) async fn assert_groups_gone(&self) {
        let pgids = self.pgids.lock().expect("not poisoned").clone();
        for pgid in pgids {
            wait_until(
                Duration::from_secs(10),
                &format!("process group {pgid} to be gone"),
                || group_members(pgid).is_empty(),
            )
            .await;
        }
    }

    /// SIGKILLs a group the test left behind on purpose (an orphan).
    pub(crate) fn kill_group(pgid: i32) {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

/// The next completion event on `rx` within `limit`.
pub(crate) async fn next_completion(
    rx: &mut tokio::sync::broadcast::Receiver<Event>,
    limit: Duration,
) -> Event {
    loop {
        match tokio::time::timeout(limit, rx.recv()).await {
            Ok(Ok(e @ Event::Completion { .. })) => return e,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("event stream failed: {e}"),
            Err(_) => panic!("no completion within {limit:?}"),
        }
    }
}

/// Open descriptors of this process, leaving out files under `home`: the checkpoint
/// writer's lock and temp files there come and go with each background write, while a
/// leak shows as pipes, terminals, pidfds or sockets that stay.
pub(crate) fn fd_count_outside(home: &std::path::Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc is mounted")
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).map_or(true, |target| !target.starts_with(home)))
        .count()
}

/// The targets of this process's open descriptors.
pub(crate) fn fd_targets() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .expect("/proc is mounted")
        .flatten()
        .map(|e| {
            format!(
                "{:?} -> {:?}",
                e.file_name(),
                std::fs::read_link(e.path()).ok()
            )
        })
        .collect();
    out.sort();
    out
}
