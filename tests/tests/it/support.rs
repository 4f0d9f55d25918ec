//! Shared fixture: a real `Registry` on a temporary home whose output pipeline is
//! built by the real plugin loader from real cdylibs installed in the home's plugins
//! directory, plus deadline helpers and the process-group-gone check.
//!
//! The cdylibs are found next to this test executable (`target/<profile>/lib<name>.so`,
//! herd-test-support's `plugins`); when one is missing the test fails with the
//! `cargo build` line that makes it.

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use herd_core::{
    Event, Home, KillAnswer, KillSource, ListFilter, ListRow, LogAnswer, PollAnswer, Registry,
    RegistryConfig, SessionId, SpawnInfo, SpawnRequest, WaitAnswer, WaitStatus,
};
use herd_hooks::{Pipeline, PluginReport, PluginStatus, RedactorConfig, load_plugins};
use herd_test_support::plugins::PluginDir;
use herd_test_support::procs::group_members;
use herd_test_support::wait::until as wait_until;

/// The command that builds every library these tests load.
pub(crate) const BUILD: &str = "cargo build -p herd-plugin-example -p herd-test-plugin-leak -p herd-test-plugin-noop -p herd-test-plugin-misbehave";

/// The example plugin's library crate name.
pub(crate) const EXAMPLE: &str = "herd_plugin_example";
/// The test plugin that appends a fake `sk-proj-` key and the owner it saw.
pub(crate) const LEAK: &str = "herd_test_plugin_leak";
/// The test plugin that changes nothing.
pub(crate) const NOOP: &str = "herd_test_plugin_noop";
/// The test plugin that errors on `PLEASE_FAIL` and panics on `PLEASE_PANIC`.
pub(crate) const MISBEHAVE: &str = "herd_test_plugin_misbehave";

/// The raw key the leak plugin inserts; it must never leave herd unmasked.
pub(crate) const LEAKED_KEY: &str = "sk-proj-FAKEfakeFAKEfake0123456789abcd";
/// How the redactor masks [`LEAKED_KEY`].
pub(crate) const LEAKED_KEY_MASKED: &str = "sk-pro...abcd";

/// A plugins directory being filled before the registry is built, and the
/// plugins it enables.
pub(crate) struct Plugins {
    dir: PluginDir,
    enabled: Vec<String>,
}

impl Plugins {
    fn new(dir: PathBuf) -> Plugins {
        Plugins {
            dir: PluginDir::create(dir, BUILD),
            enabled: Vec::new(),
        }
    }

    /// Installs and enables `dir/plugin.toml` and, when given, a copy of a built
    /// library under `file`.
    pub(crate) fn install(
        &mut self,
        name: &str,
        manifest: &str,
        library: Option<(&str, &str)>,
    ) -> &mut Plugins {
        self.dir.install(name, manifest, library);
        self.enabled.push(name.to_owned());
        self
    }

    /// Installs and enables the built library `crate_lib` as plugin `name`.
    pub(crate) fn lib(&mut self, name: &str, crate_lib: &str) -> &mut Plugins {
        self.dir.install_lib(name, crate_lib);
        self.enabled.push(name.to_owned());
        self
    }

    /// Writes `path` (relative to the plugin dir `name`) with raw `bytes`.
    pub(crate) fn write_file(&self, name: &str, file: &str, bytes: &[u8]) {
        self.dir.write_file(name, file, bytes);
    }
}

/// A registry on its own temporary home, with the plugins it was given loaded.
pub(crate) struct Fixture {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) registry: Registry,
    pub(crate) reports: Vec<PluginReport>,
    pgids: std::sync::Mutex<Vec<i32>>,
}

impl Fixture {
    /// A registry with the built-in redactor only.
    pub(crate) async fn bare() -> Fixture {
        Fixture::build(|_| {}, |_| {}).await
    }

    /// A registry whose pipeline holds the plugins `install` puts into the home's
    /// plugins directory, loaded by `load_plugins` on a blocking thread.
    pub(crate) async fn with_plugins(install: impl FnOnce(&mut Plugins)) -> Fixture {
        Fixture::build(install, |_| {}).await
    }

    /// The general form: plugins, then any config tuning.
    pub(crate) async fn build(
        install: impl FnOnce(&mut Plugins),
        tune: impl FnOnce(&mut RegistryConfig),
    ) -> Fixture {
        Fixture::build_with_budget(install, tune, None).await
    }

    /// [`Fixture::build`] with the hook chain's budget set.
    pub(crate) async fn build_with_budget(
        install: impl FnOnce(&mut Plugins),
        tune: impl FnOnce(&mut RegistryConfig),
        budget: Option<Duration>,
    ) -> Fixture {
        let dir = tempfile::tempdir().expect("a temp dir can be created");
        let home = Home::new(dir.path());
        let mut plugins = Plugins::new(home.plugins_dir());
        install(&mut plugins);
        let Plugins {
            dir: plugin_dir,
            enabled,
        } = plugins;
        let pdir = plugin_dir.path().to_owned();
        // The loader runs plugin init on the calling thread: keep it off the runtime.
        let (chain, reports) = tokio::task::spawn_blocking(move || load_plugins(&pdir, &enabled))
            .await
            .expect("the loader does not panic");
        let chain = match budget {
            Some(budget) => chain.with_budget(budget),
            None => chain,
        };
        let pipeline = Pipeline::new(chain, &RedactorConfig::default()).expect("default config");
        let mut config = RegistryConfig {
            kill_grace: Duration::from_millis(500),
            idle_drain: Duration::from_millis(300),
            pipeline: Arc::new(pipeline),
            ..RegistryConfig::default()
        };
        tune(&mut config);
        let registry = Registry::new(home, config).expect("inside a runtime");
        Fixture {
            dir,
            registry,
            reports,
            pgids: std::sync::Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn home(&self) -> Home {
        Home::new(self.dir.path())
    }

    /// The load report row of plugin `name`.
    pub(crate) fn report(&self, name: &str) -> &PluginReport {
        self.reports
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no report row for {name}: {:#?}", self.reports))
    }

    /// Asserts every plugin in `names` loaded.
    pub(crate) fn assert_loaded(&self, names: &[&str]) {
        for name in names {
            assert_eq!(
                self.report(name).status,
                PluginStatus::Loaded,
                "{:#?}",
                self.reports
            );
        }
    }

    /// Spawns `command` in pipe mode for task `task`, owned by `owner`, with
    /// `notify` deciding whether the completion is queued for the owner.
    pub(crate) async fn run_as(
        &self,
        command: &str,
        task: &str,
        owner: &str,
        notify: bool,
    ) -> SpawnInfo {
        let info = self
            .registry
            .spawn(SpawnRequest {
                command: command.to_owned(),
                task_id: task.to_owned(),
                owner_task_id: Some(owner.to_owned()),
                notify,
                ..SpawnRequest::default()
            })
            .await
            .unwrap_or_else(|e| panic!("spawn of {command:?} failed: {e}"));
        self.pgids.lock().expect("not poisoned").push(info.pid);
        info
    }

    /// Spawns `command` in pipe mode for owner `t`.
    pub(crate) async fn run(&self, command: &str) -> SpawnInfo {
        self.run_as(command, "t", "t", false).await
    }

    /// Waits up to 30 s for the session to finish; the wait route's answer.
    pub(crate) async fn done(&self, id: &SessionId) -> WaitAnswer {
        let answer = self
            .registry
            .wait(id.as_str(), Duration::from_secs(30), None)
            .await
            .expect("wait succeeds");
        assert_eq!(
            answer.status,
            WaitStatus::Exited,
            "session {id} did not finish within 30 s; output so far: {:?}",
            answer.output
        );
        answer
    }

    /// Polls until the raw log file holds `needle` (so the reader has ingested it),
    /// failing after 10 s with what the log held.
    /// Waits until the session's log file holds `needle` and its tail (what
    /// polls, previews and lists read; it takes each write just after the file
    /// does) has every byte of the file.
    pub(crate) async fn until_logged(&self, id: &SessionId, needle: &str) {
        let path = self.home().session_log_path(id.as_str());
        wait_until(
            Duration::from_secs(10),
            &format!("{needle:?} in {path:?} and in the session's tail"),
            || {
                fs::read_to_string(&path).is_ok_and(|t| {
                    t.contains(needle)
                        && self
                            .registry
                            .poll(id.as_str())
                            .is_ok_and(|p| p.total_ingested >= t.len() as u64)
                })
            },
        )
        .await;
    }

    /// Waits until a poll of `id` shows `needle` in its preview.
    pub(crate) async fn until_polled(&self, id: &SessionId, needle: &str) {
        wait_until(
            Duration::from_secs(10),
            &format!("{needle:?} in a poll of {id}"),
            || {
                self.registry
                    .poll(id.as_str())
                    .is_ok_and(|p| p.output_preview.contains(needle))
            },
        )
        .await;
    }

    pub(crate) fn poll(&self, id: &SessionId) -> PollAnswer {
        self.registry.poll(id.as_str()).expect("poll succeeds")
    }

    pub(crate) fn log(&self, id: &SessionId) -> LogAnswer {
        self.registry
            .log(id.as_str(), None, None)
            .expect("log succeeds")
    }

    pub(crate) fn log_chunk(&self, id: &SessionId) -> String {
        self.registry
            .log_chunk(id.as_str(), 0, 1 << 20)
            .expect("log_chunk succeeds")
            .output
            .into_string()
    }

    pub(crate) async fn kill(&self, id: &SessionId) -> KillAnswer {
        self.registry
            .kill(id.as_str(), KillSource::ProcessKill)
            .await
            .expect("kill succeeds")
    }

    /// The list row of session `id` (finished sessions included).
    pub(crate) fn row(&self, id: &SessionId) -> ListRow {
        let rows = self.registry.list(&ListFilter {
            owner: None,
            session_key: None,
            include_finished: true,
        });
        rows.into_iter()
            .find(|r| &r.session_id == id)
            .unwrap_or_else(|| panic!("no list row for {id}"))
    }

    /// Asserts every spawned session's process group is gone (zombies not counted).
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
}

/// The completion event of session `id` on `rx`, within `limit`.
pub(crate) async fn completion_of(
    rx: &mut tokio::sync::broadcast::Receiver<Event>,
    id: &SessionId,
    limit: Duration,
) -> Event {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Ok(e @ Event::Completion { .. })) if completion_id(&e) == Some(id) => return e,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("event stream failed while waiting for {id}: {e}"),
            Err(_) => panic!("no completion of {id} within {limit:?}"),
        }
    }
}

fn completion_id(e: &Event) -> Option<&SessionId> {
    match e {
        Event::Completion { session_id, .. } => Some(session_id),
        _ => None,
    }
}

/// The output and owner carried by a completion event.
pub(crate) fn completion_output(e: &Event) -> (&str, &str) {
    match e {
        Event::Completion {
            output,
            owner_task_id,
            ..
        } => (output, owner_task_id),
        other => panic!("not a completion: {other:?}"),
    }
}
