//! Restart-safe dispatch in the registry (B34, B35): `persist_on_release` spawns ask the
//! configured dispatcher, run in the scope it names, and a kill stops that scope.
//!
//! systemd cannot run in the test container, so `systemd-run` and `systemctl` are the
//! recording fakes of `tests/fixtures/fake-systemd/` (first on the PATH of the
//! registry's `tools_env`, which stands in for the daemon's own environment); the
//! host facts say "under systemd" by injection. The processes, pipes, the bus socket
//! and the kills are real.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use herd_core::{
    DispatchConfig, DispatchKind, Dispatcher, HostFacts, KillSource, KillStatus, SpawnError,
    SpawnRequest, SystemClock,
};

use crate::support::{Fixture, wait_until};

/// A dispatcher that believes it runs as a systemd unit.
fn under_systemd() -> Arc<Dispatcher> {
    let host = HostFacts {
        invocation_id: Some("0123456789abcdef".to_owned()),
        uid: nix::unistd::getuid().as_raw(),
        user: "tester".to_owned(),
        service_memory_max_bytes: None,
        total_ram_bytes: Some(8 << 30),
    };
    Arc::new(Dispatcher::with_host(
        DispatchConfig::default(),
        host,
        Arc::new(SystemClock),
    ))
}

/// A private runtime dir (with a bound `bus` once asked) and the environment that
/// points at it, the fakes and the record file: both the jobs' environment and the
/// one the registry resolves its own tools in (`tools_env`, the daemon's in
/// production).
struct Host {
    _dir: tempfile::TempDir,
    _bus: Option<UnixListener>,
    runtime: PathBuf,
    record: PathBuf,
    env: Vec<(String, String)>,
}

/// The host's paths and environment; no descriptor is opened yet, so the fixture
/// (which holds the descriptor-table lock) can be made with its `tools_env` first.
fn host(extra: &[(&str, &str)]) -> Host {
    let dir = tempfile::tempdir().expect("a temp dir can be created");
    let runtime = dir.path().join("xdg");
    std::fs::create_dir(&runtime).expect("the temp dir is writable");
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700))
        .expect("the runtime dir is ours");
    let record = dir.path().join("record");
    let fakes = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-systemd");
    let mut env: HashMap<String, String> = HashMap::from([
        (
            "PATH".to_owned(),
            format!(
                "{}:{}",
                fakes.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        ),
        ("XDG_RUNTIME_DIR".to_owned(), runtime.display().to_string()),
        ("DBUS_SESSION_BUS_ADDRESS".to_owned(), String::new()),
        (
            "FAKE_SYSTEMD_RECORD".to_owned(),
            record.display().to_string(),
        ),
    ]);
    env.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    Host {
        _dir: dir,
        _bus: None,
        runtime,
        record,
        env: env.into_iter().collect(),
    }
}

impl Host {
    /// Binds the user bus socket in the runtime dir.
    fn bind_bus(&mut self) {
        self._bus = Some(UnixListener::bind(self.runtime.join("bus")).expect("bind the bus"));
    }

    /// The environment as the registry's `tools_env`.
    fn tools_env(&self) -> HashMap<String, String> {
        self.env.iter().cloned().collect()
    }
}

/// A registry whose dispatcher believes it runs under systemd and resolves its tools
/// in `host`'s environment.
fn systemd_fixture(host: &Host, tune: impl FnOnce(&mut herd_core::RegistryConfig)) -> Fixture {
    let tools = host.tools_env();
    Fixture::with(|c| {
        c.dispatcher = Some(under_systemd());
        c.tools_env = Some(tools);
        tune(c);
    })
}

fn persist(command: &str, host: &Host) -> SpawnRequest {
    SpawnRequest {
        command: command.to_owned(),
        task_id: "t".to_owned(),
        env: host.env.clone(),
        persist_on_release: true,
        ..SpawnRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b34_a_persist_spawn_runs_in_its_scope_and_a_failed_scope_stop_is_reported() {
    let mut host = host(&[
        ("FAKE_SYSTEMCTL_EXIT", "1"),
        ("FAKE_SYSTEMCTL_STDERR", "Access denied"),
    ]);
    // The fixture first: it holds the descriptor-table lock before the bus socket opens.
    let fx = systemd_fixture(&host, |_| {});
    host.bind_bus();
    let info = fx.spawn(persist("echo ready; exec sleep 30", &host)).await;
    assert_eq!(info.dispatch, DispatchKind::Scoped, "{info:?}");
    let unit = format!("herd-worker-{}.scope", info.session_id);
    assert!(
        info.note.as_deref().is_some_and(|n| n.contains(&unit)),
        "{info:?}"
    );
    // The fake systemd-run records its argv when it runs, which may be after the
    // spawn answered.
    let unit_arg = format!("--unit herd-worker-{} ", info.session_id);
    wait_until(
        Duration::from_secs(10),
        "systemd-run to record its argv",
        || std::fs::read_to_string(&host.record).is_ok_and(|r| r.contains(&unit_arg)),
    )
    .await;
    let record = std::fs::read_to_string(&host.record).expect("systemd-run recorded its argv");
    assert!(
        record.contains(&format!(
            "--unit herd-worker-{} --property MemoryAccounting=yes",
            info.session_id
        )),
        "{record}"
    );

    let answer = fx
        .registry
        .kill(info.session_id.as_str(), KillSource::ProcessKill)
        .await
        .expect("the session exists");
    assert_eq!(answer.status, KillStatus::KillIncomplete, "{answer:?}");
    assert!(
        answer
            .scope_stop_failed
            .as_deref()
            .is_some_and(|e| e.contains(&unit) && e.contains("Access denied")),
        "{answer:?}"
    );
    let record = std::fs::read_to_string(&host.record).expect("the record exists");
    assert!(
        record.contains(&format!("systemctl --user stop {unit}")),
        "{record}"
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b34_a_spawn_without_persist_or_dispatcher_stays_in_process() {
    let mut host = host(&[]);
    let fx = systemd_fixture(&host, |_| {});
    host.bind_bus();
    let mut req = persist("true", &host);
    req.persist_on_release = false;
    let info = fx.spawn(req).await;
    assert_eq!(info.dispatch, DispatchKind::InProcess);
    fx.done(&info.session_id).await;
    assert!(!host.record.exists(), "nothing went through systemd-run");

    let plain = Fixture::new();
    let info = plain.spawn(persist("true", &host)).await;
    assert_eq!(info.dispatch, DispatchKind::InProcess);
    plain.done(&info.session_id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b34_no_bus_degrades_or_fails_typed_when_a_scope_is_required() {
    let host = host(&[]);
    let fx = systemd_fixture(&host, |_| {});
    let info = fx.spawn(persist("echo direct", &host)).await;
    assert_eq!(info.dispatch, DispatchKind::Degraded);
    assert!(
        info.note
            .as_deref()
            .is_some_and(|n| n.contains("direct subprocess")),
        "{info:?}"
    );
    assert!(fx.done(&info.session_id).await.output.contains("direct"));

    let strict = systemd_fixture(&host, |c| c.require_restart_safe_scope = true);
    match strict.registry.spawn(persist("echo never", &host)).await {
        Err(SpawnError::Dispatch(err)) => {
            assert!(err.is_infrastructure(), "{err}");
            assert!(
                err.to_string().contains("loginctl enable-linger tester"),
                "{err}"
            );
        }
        other => panic!("expected a typed dispatch refusal, got {other:?}"),
    }
    assert!(
        strict
            .registry
            .list(&herd_core::ListFilter::default())
            .is_empty(),
        "nothing was started"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b34_a_scoped_worker_that_loses_its_bus_flips_the_verdict() {
    let dispatcher = under_systemd();
    let mut host = host(&[]);
    let tools = host.tools_env();
    let fx = Fixture::with(|c| {
        c.dispatcher = Some(Arc::clone(&dispatcher));
        c.tools_env = Some(tools);
    });
    host.bind_bus();
    let info = fx.spawn(persist("read x", &host)).await;
    assert_eq!(info.dispatch, DispatchKind::Scoped);

    // The user manager goes away, then the worker exits without ever being seen in
    // its scope (the fake systemd-run never moves it).
    let bus_path = PathBuf::from(
        &host
            .env
            .iter()
            .find(|(k, _)| k == "XDG_RUNTIME_DIR")
            .expect("set")
            .1,
    )
    .join("bus");
    host._bus = None;
    std::fs::remove_file(&bus_path).expect("the bus socket can be removed");
    fx.registry
        .close_stdin(info.session_id.as_str())
        .await
        .expect("stdin closes");
    fx.done(&info.session_id).await;

    // An explicit bus address is taken as given (no socket check), so only the cached
    // verdict can say no now: the re-check at the early exit flipped it.
    host.env.retain(|(k, _)| k != "DBUS_SESSION_BUS_ADDRESS");
    host.env.push((
        "DBUS_SESSION_BUS_ADDRESS".to_owned(),
        format!("unix:path={}", bus_path.display()),
    ));
    let env: HashMap<String, String> = host.env.iter().cloned().collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match dispatcher.availability(&env).await {
            herd_core::ScopeAvailability::Unavailable { detail, .. } => {
                assert!(detail.contains("vanished"), "{detail}");
                break;
            }
            other => assert!(
                std::time::Instant::now() < deadline,
                "the verdict never flipped after the bus vanished: {other:?}"
            ),
        }
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(20),
            std::future::pending::<()>(),
        )
        .await;
    }
    let next = fx.spawn(persist("true", &host)).await;
    assert_eq!(next.dispatch, DispatchKind::Degraded, "{next:?}");
    fx.done(&next.session_id).await;
}
