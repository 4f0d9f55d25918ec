//! Tests for restart-safe dispatch (B34, B35) against real fake tools: a `systemd-run`
//! shell script (`core/tests/fixtures/fake-systemd/`, put first on the spawn PATH) that
//! records its argv into a per-test file and answers as told, a real Unix socket named
//! `bus` in a private runtime dir, and an injected clock the tests advance.
//!
//! The fake is run from the checked-in fixture rather than written into the temp dir: an
//! executable written by a test can be exec'd while another test thread's fork still holds
//! the write descriptor, which fails with ETXTBSY now and then.
//!
//! The one thing not real is systemd itself: these tests must not create scopes on the
//! machine that runs them, and CI containers have no user manager. The fake execs the
//! command after `--` exactly as `systemd-run --scope` does, so the argv is still proven
//! runnable.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing_subscriber::layer::SubscriberExt as _;

use super::*;

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;
const TEST_USER: &str = "herd-test-user";

/// The fake tools, checked in (also for the daemon's end-to-end tests).
fn fake_bin_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-systemd")
}

/// A clock the test moves by hand.
#[derive(Debug)]
struct TestClock(Mutex<Instant>);

impl TestClock {
    fn new() -> Arc<TestClock> {
        Arc::new(TestClock(Mutex::new(Instant::now())))
    }

    fn advance(&self, by: Duration) {
        let mut now = self.0.lock().expect("test clock lock is never poisoned");
        *now += by;
    }
}

impl Clock for TestClock {
    fn now(&self) -> Instant {
        *self.0.lock().expect("test clock lock is never poisoned")
    }
}

/// A temp dir with a record file for the fake tools and a private runtime dir
/// holding a live socket named `bus`.
struct Fixture {
    dir: tempfile::TempDir,
    listener: Option<UnixListener>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("create temp dir");
        let run = dir.path().join("run");
        std::fs::create_dir(&run).expect("create runtime dir");
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700))
            .expect("chmod runtime dir");
        let mut fixture = Fixture {
            dir,
            listener: None,
        };
        fixture.bind_bus();
        fixture
    }

    fn runtime_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    fn bus_path(&self) -> PathBuf {
        self.runtime_dir().join("bus")
    }

    fn systemd_run(&self) -> PathBuf {
        fake_bin_dir().join("systemd-run")
    }

    fn record(&self) -> PathBuf {
        self.dir.path().join("record")
    }

    fn bind_bus(&mut self) {
        self.listener = Some(UnixListener::bind(self.bus_path()).expect("bind the bus socket"));
    }

    fn remove_bus(&mut self) {
        self.listener = None;
        std::fs::remove_file(self.bus_path()).expect("remove the bus socket");
    }

    /// The spawn env: the fakes first on PATH, the private runtime dir, the fakes' knobs.
    fn env(&self, answer: &str) -> HashMap<String, String> {
        let mut env = HashMap::new();
        env.insert(
            "PATH".to_owned(),
            format!("{}:/usr/bin:/bin", fake_bin_dir().display()),
        );
        env.insert(
            "XDG_RUNTIME_DIR".to_owned(),
            self.runtime_dir().display().to_string(),
        );
        env.insert(
            "FAKE_SYSTEMD_RECORD".to_owned(),
            self.record().display().to_string(),
        );
        env.insert("FAKE_SYSTEMD_ANSWER".to_owned(), answer.to_owned());
        env
    }

    /// Every recorded fake-tool invocation, one `<tool> <argv>` line each.
    fn recorded(&self) -> Vec<String> {
        match std::fs::read_to_string(self.record()) {
            Ok(text) => text.lines().map(str::to_owned).collect(),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(err) => panic!("read record file {}: {err}", self.record().display()),
        }
    }
}

fn host(under_systemd: bool) -> HostFacts {
    HostFacts {
        invocation_id: under_systemd.then(|| "0123456789abcdef".to_owned()),
        uid: nix::unistd::getuid().as_raw(),
        user: TEST_USER.to_owned(),
        service_memory_max_bytes: Some(512 * MIB),
        total_ram_bytes: Some(8 * GIB),
    }
}

fn dispatcher(under_systemd: bool, clock: Arc<TestClock>) -> Dispatcher {
    Dispatcher::with_host(DispatchConfig::default(), host(under_systemd), clock)
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

const ID: &str = "proc_0123456789ab";

#[tokio::test]
async fn b34_scoped_argv_is_exact_and_runs() {
    let fx = Fixture::new();
    let d = dispatcher(true, TestClock::new());
    let env = fx.env("ok");
    let got = d
        .dispatch(&argv(&["bash", "-c", "echo hi"]), &env, true, false, ID)
        .await
        .expect("dispatch");
    let Dispatch::Scoped {
        argv: wrapped,
        unit,
        env: bus_env,
    } = &got
    else {
        panic!("expected a scoped dispatch, got {got:?}");
    };
    let expected: Vec<String> = [
        fx.systemd_run().display().to_string().as_str(),
        "--user",
        "--scope",
        "--quiet",
        "--collect",
        "--expand-environment=no",
        "--unit",
        "herd-worker-proc_0123456789ab",
        "--property",
        "MemoryAccounting=yes",
        "--property",
        "MemoryMax=536870912",
        "--property",
        "Delegate=yes",
        "--",
        "bash",
        "-c",
        "echo hi",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    assert_eq!(*wrapped, expected);
    assert_eq!(unit, "herd-worker-proc_0123456789ab.scope");
    assert_eq!(
        *bus_env,
        vec![
            (
                "XDG_RUNTIME_DIR".to_owned(),
                fx.runtime_dir().display().to_string()
            ),
            (
                "DBUS_SESSION_BUS_ADDRESS".to_owned(),
                format!("unix:path={}", fx.bus_path().display())
            ),
        ]
    );
    assert_eq!(got.kind(), DispatchKind::Scoped);
    assert!(got.is_restart_safe());
    assert_eq!(
        serde_json::to_value(got.kind()).expect("serialise kind"),
        serde_json::json!("scoped")
    );

    // The probe ran once, through the same wrapper, with the /bin/sh no-op.
    let recorded = fx.recorded();
    assert_eq!(recorded.len(), 1, "one probe: {recorded:?}");
    assert!(
        recorded[0].starts_with(
            "systemd-run --user --scope --quiet --collect --expand-environment=no --unit herd-probe-"
        )
            && recorded[0].ends_with("-- /bin/sh -c exit 0"),
        "probe argv: {}",
        recorded[0]
    );

    // The wrapped argv really runs: the fake execs what follows `--`, as systemd-run does.
    let output = tokio::process::Command::new(&wrapped[0])
        .args(&wrapped[1..])
        .env_clear()
        .envs(&env)
        .envs(bus_env.iter().map(|(k, v)| (k, v)))
        .output()
        .await
        .expect("run the scoped argv");
    assert!(output.status.success(), "scoped argv failed: {output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "hi\n");
    assert!(
        fx.recorded()[1].contains("--unit herd-worker-proc_0123456789ab"),
        "{:?}",
        fx.recorded()
    );
}

#[tokio::test]
async fn b34_in_process_when_not_under_systemd_or_not_outliving() {
    let fx = Fixture::new();
    let cmd = argv(&["bash", "-c", "true"]);
    let outside = dispatcher(false, TestClock::new());
    let got = outside
        .dispatch(&cmd, &fx.env("ok"), true, true, ID)
        .await
        .expect("dispatch outside systemd");
    assert_eq!(got, Dispatch::InProcess);
    assert!(!got.is_restart_safe());
    assert_eq!(got.note(), None);
    assert_eq!(
        outside.availability(&fx.env("ok")).await,
        ScopeAvailability::NotUnderSystemd
    );

    let inside = dispatcher(true, TestClock::new());
    let got = inside
        .dispatch(&cmd, &fx.env("ok"), false, true, ID)
        .await
        .expect("dispatch of a session that does not outlive its parent");
    assert_eq!(got, Dispatch::InProcess);
    assert_eq!(
        serde_json::to_value(&got).expect("serialise"),
        serde_json::json!({"dispatch": "in_process"})
    );
    assert!(fx.recorded().is_empty(), "no probe: {:?}", fx.recorded());
}

#[tokio::test]
async fn b34_probe_cached_then_rerun_after_ttl() {
    let fx = Fixture::new();
    let clock = TestClock::new();
    let d = dispatcher(true, clock.clone());
    let cmd = argv(&["bash", "-c", "true"]);
    for _ in 0..5 {
        let got = d.dispatch(&cmd, &fx.env("ok"), true, false, ID).await;
        assert_eq!(got.expect("dispatch").kind(), DispatchKind::Scoped);
    }
    assert_eq!(fx.recorded().len(), 1, "{:?}", fx.recorded());

    clock.advance(Duration::from_secs(59));
    // Told to fail now, but the cached success still answers: no probe runs.
    let got = d.dispatch(&cmd, &fx.env("fail"), true, false, ID).await;
    assert_eq!(got.expect("dispatch").kind(), DispatchKind::Scoped);
    assert_eq!(fx.recorded().len(), 1);

    clock.advance(Duration::from_secs(2));
    let got = d
        .dispatch(&cmd, &fx.env("fail"), true, false, ID)
        .await
        .expect("dispatch");
    assert_eq!(fx.recorded().len(), 2, "re-probed after the TTL");
    let Dispatch::Degraded { reason } = &got else {
        panic!("expected degraded, got {got:?}");
    };
    assert!(reason.contains("Failed to connect to bus"), "{reason}");

    // The failing verdict is cached too.
    clock.advance(Duration::from_secs(30));
    let got = d.dispatch(&cmd, &fx.env("ok"), true, false, ID).await;
    assert_eq!(got.expect("dispatch").kind(), DispatchKind::Degraded);
    assert_eq!(fx.recorded().len(), 2);
    clock.advance(Duration::from_secs(31));
    let got = d.dispatch(&cmd, &fx.env("ok"), true, false, ID).await;
    assert_eq!(got.expect("dispatch").kind(), DispatchKind::Scoped);
    assert_eq!(fx.recorded().len(), 3);
    assert_eq!(d.n_probes(), 3);
}

#[tokio::test]
async fn b34_systemd_before_254_gets_no_expand_switch() {
    // systemd-run 254+ expands $VAR in a scope's command line unless told not to; older
    // versions reject the switch (and do not expand). The probe learns which one it is.
    let fx = Fixture::new();
    let d = dispatcher(true, TestClock::new());
    let mut env = fx.env("ok");
    env.insert("FAKE_SYSTEMD_VERSION".to_owned(), "252".to_owned());
    let cmd = argv(&["bash", "-c", "for f in a b; do echo $f; done"]);
    for _ in 0..3 {
        let got = d
            .dispatch(&cmd, &env, true, false, ID)
            .await
            .expect("dispatch");
        let Dispatch::Scoped { argv: wrapped, .. } = &got else {
            panic!("expected scoped, got {got:?}");
        };
        assert!(
            !wrapped
                .iter()
                .any(|a| a.starts_with("--expand-environment")),
            "{wrapped:?}"
        );
        assert_eq!(wrapped[wrapped.len() - 3..], cmd[..]);
    }
    let recorded = fx.recorded();
    assert_eq!(
        recorded.len(),
        2,
        "one rejected probe, one plain: {recorded:?}"
    );
    assert!(
        recorded[0].contains("--expand-environment=no"),
        "{recorded:?}"
    );
    assert!(
        !recorded[1].contains("--expand-environment"),
        "{recorded:?}"
    );
    assert_eq!(d.n_probes(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b34_concurrent_first_callers_share_one_probe() {
    let fx = Fixture::new();
    let d = Arc::new(dispatcher(true, TestClock::new()));
    let env = Arc::new(fx.env("ok"));
    let mut tasks = Vec::new();
    for i in 0..16 {
        let d = Arc::clone(&d);
        let env = Arc::clone(&env);
        tasks.push(tokio::spawn(async move {
            d.dispatch(&argv(&["true"]), &env, true, false, &format!("job{i}"))
                .await
        }));
    }
    for task in tasks {
        let got = task.await.expect("task joined").expect("dispatch");
        assert_eq!(got.kind(), DispatchKind::Scoped);
    }
    assert_eq!(fx.recorded().len(), 1, "{:?}", fx.recorded());
    assert_eq!(d.n_probes(), 1);
}

#[tokio::test]
async fn b34_unsafe_runtime_dir_not_trusted() {
    let fx = Fixture::new();
    std::fs::set_permissions(fx.runtime_dir(), std::fs::Permissions::from_mode(0o777))
        .expect("chmod 0777");
    let d = dispatcher(true, TestClock::new());
    let got = d
        .dispatch(&argv(&["true"]), &fx.env("ok"), true, false, ID)
        .await
        .expect("dispatch");
    let Dispatch::Degraded { reason } = &got else {
        panic!("expected degraded, got {got:?}");
    };
    assert!(reason.contains("not trusted"), "{reason}");
    assert!(fx.recorded().is_empty(), "an untrusted bus is never probed");

    // A regular file named `bus` in a private dir is not a bus either.
    let fx = Fixture::new();
    let mut fx = fx;
    fx.remove_bus();
    std::fs::write(fx.bus_path(), b"").expect("write a plain file named bus");
    let got = d
        .dispatch(&argv(&["true"]), &fx.env("ok"), true, false, ID)
        .await
        .expect("dispatch");
    let Dispatch::Degraded { reason } = &got else {
        panic!("expected degraded, got {got:?}");
    };
    assert!(reason.contains("is not a socket"), "{reason}");
    assert!(fx.recorded().is_empty());
}

#[tokio::test]
async fn b34_require_scope_fails_typed_naming_the_default_bus() {
    let fx = Fixture::new();
    let mut env = fx.env("fail");
    env.remove("XDG_RUNTIME_DIR");
    let d = dispatcher(true, TestClock::new());
    let err = d
        .dispatch(&argv(&["true"]), &env, true, true, ID)
        .await
        .expect_err("no scope with require=true must fail");
    let expected_bus = PathBuf::from(format!("/run/user/{}/bus", nix::unistd::getuid()));
    match &err {
        DispatchError::ScopeUnavailable { bus_path, user, .. } => {
            assert_eq!(*bus_path, expected_bus);
            assert_eq!(user, TEST_USER);
        }
        other => panic!("expected ScopeUnavailable, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&expected_bus.display().to_string()),
        "{message}"
    );
    assert!(
        message.contains("loginctl enable-linger herd-test-user"),
        "{message}"
    );
    assert!(err.is_infrastructure());
    assert_eq!(d.n_degrade_warnings(), 0, "a refusal is not a degrade");
}

/// Collects every event's fields as text, for asserting what was logged.
#[derive(Clone, Default)]
struct Collected(Arc<Mutex<Vec<(tracing::Level, String)>>>);

struct FieldText(String);

impl tracing::field::Visit for FieldText {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Collected {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut text = FieldText(String::new());
        event.record(&mut text);
        self.0
            .lock()
            .expect("collector lock is never poisoned")
            .push((*event.metadata().level(), text.0));
    }
}

#[tokio::test]
async fn b34_degrade_warns_once_without_job_detail() {
    let collected = Collected::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(collected.clone()));
    let fx = Fixture::new();
    let clock = TestClock::new();
    let d = dispatcher(true, clock.clone());
    for i in 0..3 {
        let got = d
            .dispatch(
                &argv(&["true"]),
                &fx.env("fail"),
                true,
                false,
                &format!("job{i}"),
            )
            .await
            .expect("dispatch");
        assert_eq!(got.kind(), DispatchKind::Degraded);
        assert!(!got.is_restart_safe());
        let note = got.note().expect("a degraded dispatch has a note");
        assert!(
            note.contains("die when the herd service restarts"),
            "{note}"
        );
        clock.advance(Duration::from_secs(61)); // each dispatch probes afresh
    }
    assert_eq!(fx.recorded().len(), 3);
    assert_eq!(d.n_degrade_warnings(), 1);
    let warnings: Vec<String> = collected
        .0
        .lock()
        .expect("collector lock is never poisoned")
        .iter()
        .filter(|(level, _)| *level == tracing::Level::WARN)
        .map(|(_, text)| text.clone())
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let warning = &warnings[0];
    for needle in [
        "die when the herd service restarts",
        "loginctl enable-linger herd-test-user",
        "KillMode=process",
    ] {
        assert!(warning.contains(needle), "missing {needle:?} in {warning}");
    }
    assert!(!warning.contains("job0"), "no per-job detail: {warning}");
}

#[tokio::test]
async fn b34_lost_bus_flips_the_cached_verdict() {
    let mut fx = Fixture::new();
    let clock = TestClock::new();
    let d = dispatcher(true, clock.clone());
    let cmd = argv(&["true"]);
    let unit = "herd-worker-proc_0123456789ab.scope";
    let got = d.dispatch(&cmd, &fx.env("ok"), true, true, ID).await;
    assert_eq!(got.expect("dispatch").kind(), DispatchKind::Scoped);

    // The bus is still there: an early exit is the command's or the wrapper's own failure.
    let err = d.on_early_exit(&fx.env("ok"), unit, Some(1));
    assert!(
        matches!(
            err,
            DispatchError::ExitedBeforeAck {
                exit_code: Some(1),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!err.is_infrastructure());
    let got = d.dispatch(&cmd, &fx.env("ok"), true, true, ID).await;
    assert_eq!(got.expect("dispatch").kind(), DispatchKind::Scoped);

    // The bus vanishes. The address the spawn carried is not taken on trust.
    fx.remove_bus();
    let mut spawn_env = fx.env("ok");
    spawn_env.insert(
        "DBUS_SESSION_BUS_ADDRESS".to_owned(),
        format!("unix:path={}", fx.bus_path().display()),
    );
    let err = d.on_early_exit(&spawn_env, unit, Some(1));
    match &err {
        DispatchError::LostUserBus {
            bus_path, unit: u, ..
        } => {
            assert_eq!(*bus_path, fx.bus_path());
            assert_eq!(u, unit);
        }
        other => panic!("expected LostUserBus, got {other:?}"),
    }
    assert!(err.is_infrastructure());
    assert!(
        err.to_string()
            .contains(&fx.bus_path().display().to_string()),
        "{err}"
    );

    // Even with the bus back, the flipped verdict holds for the TTL: degrade, no probe.
    fx.bind_bus();
    let got = d
        .dispatch(&cmd, &fx.env("ok"), true, false, ID)
        .await
        .expect("dispatch");
    let Dispatch::Degraded { reason } = &got else {
        panic!("expected degraded after the flip, got {got:?}");
    };
    assert!(reason.contains("vanished"), "{reason}");
    assert_eq!(d.n_probes(), 1);
    clock.advance(Duration::from_secs(61));
    let got = d.dispatch(&cmd, &fx.env("ok"), true, false, ID).await;
    assert_eq!(got.expect("dispatch").kind(), DispatchKind::Scoped);
    assert_eq!(d.n_probes(), 2);
}

#[tokio::test]
async fn b34_probe_timeout_and_missing_binary_degrade() {
    let fx = Fixture::new();
    let config = DispatchConfig {
        probe_timeout: Duration::from_millis(300),
        ..DispatchConfig::default()
    };
    let d = Dispatcher::with_host(config, host(true), TestClock::new());
    let got = d
        .dispatch(&argv(&["true"]), &fx.env("hang"), true, false, ID)
        .await
        .expect("dispatch");
    let Dispatch::Degraded { reason } = &got else {
        panic!("expected degraded, got {got:?}");
    };
    assert!(reason.contains("did not finish within 300 ms"), "{reason}");

    let d = dispatcher(true, TestClock::new());
    let mut env = fx.env("ok");
    env.insert("PATH".to_owned(), "/nonexistent-herd-test-dir".to_owned());
    let got = d
        .dispatch(&argv(&["true"]), &env, true, false, ID)
        .await
        .expect("dispatch");
    let Dispatch::Degraded { reason } = &got else {
        panic!("expected degraded, got {got:?}");
    };
    assert!(reason.contains("systemd-run was not found"), "{reason}");
    assert_eq!(d.n_probes(), 0);
    assert_eq!(
        serde_json::to_value(&got).expect("serialise")["dispatch"],
        serde_json::json!("degraded")
    );
}

#[tokio::test]
async fn b34_doctor_availability_reports_remedy() {
    let fx = Fixture::new();
    let d = dispatcher(true, TestClock::new());
    assert_eq!(
        d.availability(&fx.env("ok")).await,
        ScopeAvailability::Available {
            bus_path: fx.bus_path()
        }
    );
    let d = dispatcher(true, TestClock::new());
    match d.availability(&fx.env("fail")).await {
        ScopeAvailability::Unavailable {
            bus_path, remedy, ..
        } => {
            assert_eq!(bus_path, fx.bus_path());
            assert!(remedy.contains("loginctl enable-linger herd-test-user"));
            assert!(remedy.contains("KillMode=process"));
        }
        other => panic!("expected unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn dispatch_rejects_bad_input() {
    let fx = Fixture::new();
    let d = dispatcher(true, TestClock::new());
    let err = d
        .dispatch(&[], &fx.env("ok"), true, false, ID)
        .await
        .expect_err("empty argv");
    assert!(matches!(err, DispatchError::EmptyArgv), "{err:?}");
    for bad in ["", "a b", "x/y", "semi;colon"] {
        let err = d
            .dispatch(&argv(&["true"]), &fx.env("ok"), true, false, bad)
            .await
            .expect_err("invalid unit id");
        assert!(
            matches!(err, DispatchError::InvalidUnitId { .. }),
            "{err:?}"
        );
        assert!(!err.is_infrastructure());
    }
}

#[test]
fn b35_infrastructure_failures_skip_the_breaker() {
    let start = Instant::now();
    let cooldown = Duration::from_secs(300);
    let mut breaker = FailureBreaker::new(3, cooldown);
    let refusal = DispatchError::ScopeUnavailable {
        bus_path: PathBuf::from("/run/user/1000/bus"),
        user: TEST_USER.to_owned(),
        detail: "no user bus".to_owned(),
    };
    assert!(refusal.is_infrastructure());
    for i in 0..10 {
        let now = start + Duration::from_secs(i * 400);
        let gate = breaker.record_failure(refusal.is_infrastructure(), now);
        assert_eq!(
            gate,
            BreakerGate::Cooldown {
                retry_after: now + cooldown
            }
        );
    }
    assert_eq!(breaker.n_consecutive(), 0);
    let last = start + Duration::from_secs(9 * 400);
    assert_eq!(
        breaker.gate(last + Duration::from_secs(299)),
        BreakerGate::Cooldown {
            retry_after: last + cooldown
        }
    );
    assert_eq!(breaker.gate(last + cooldown), BreakerGate::Ready);

    // The job's own failures count and trip at the limit.
    let job_failure = DispatchError::ExitedBeforeAck {
        unit: "herd-worker-x.scope".to_owned(),
        exit_code: Some(2),
    };
    let now = last + cooldown;
    assert_eq!(
        breaker.record_failure(job_failure.is_infrastructure(), now),
        BreakerGate::Ready
    );
    assert_eq!(breaker.record_failure(false, now), BreakerGate::Ready);
    // A refusal in between neither counts nor resets the count.
    breaker.record_failure(true, now);
    assert_eq!(breaker.n_consecutive(), 2);
    assert_eq!(
        breaker.record_failure(false, now),
        BreakerGate::Tripped { n_consecutive: 3 }
    );
    assert_eq!(
        breaker.gate(now + Duration::from_secs(3600)),
        BreakerGate::Tripped { n_consecutive: 3 }
    );
    breaker.record_success();
    assert_eq!(breaker.gate(now), BreakerGate::Ready);
    assert_eq!(breaker.n_consecutive(), 0);
}

#[test]
fn b34_memory_max_table() {
    // (service cgroup max, total RAM, configured) -> MemoryMax
    let cases: &[(Option<u64>, u64, Option<u64>, u64)] = &[
        (None, 16 * GIB, None, 4 * GIB),  // half of RAM, capped at 4 GiB
        (None, 4 * GIB, None, 2 * GIB),   // half of RAM
        (Some(GIB), 16 * GIB, None, GIB), // the service's own limit is lower
        (Some(8 * GIB), 16 * GIB, None, 4 * GIB), // the cap is lower
        (None, 64 * MIB, None, MIN_MEMORY_MAX_BYTES), // never below 64 MiB
        (Some(10 * MIB), 16 * GIB, None, MIN_MEMORY_MAX_BYTES),
        (None, 16 * GIB, Some(123 * MIB), 128_974_848), // a tighter configured value wins
        (None, 16 * GIB, Some(64 * GIB), 4 * GIB),      // a looser one does not
        (Some(GIB), 16 * GIB, Some(2 * GIB), GIB),
        (None, 16 * GIB, Some(MIB), MIN_MEMORY_MAX_BYTES), // the floor holds
        (None, FALLBACK_TOTAL_RAM_BYTES, None, GIB),       // unreadable RAM -> 1 GiB
    ];
    for &(service, ram, configured, expected) in cases {
        assert_eq!(
            memory_max(service, ram, configured),
            expected,
            "memory_max({service:?}, {ram}, {configured:?})"
        );
    }
    assert_eq!(MEMORY_MAX_CAP_BYTES, 4 * GIB);
}

#[test]
fn memory_readers_parse_real_files() {
    assert_eq!(
        parse_meminfo_total("MemTotal:       16318412 kB\nMemFree: 1 kB\n"),
        Some(16_318_412 * 1024)
    );
    assert_eq!(parse_meminfo_total("MemFree: 1 kB\n"), None);
    assert_eq!(parse_memory_max("max\n"), None);
    assert_eq!(parse_memory_max("536870912\n"), Some(536_870_912));
    assert_eq!(parse_memory_max("garbage"), None);
    assert_eq!(
        parse_cgroup_v2_path("12:memory:/old\n0::/system.slice/herd.service\n"),
        Some("/system.slice/herd.service")
    );
    assert_eq!(parse_cgroup_v2_path("4:memory:/only-v1\n"), None);

    // A cgroup tree in a temp dir: the service says max, its slice limits to 1 GiB.
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("cgroup");
    let service = root.join("system.slice").join("herd.service");
    std::fs::create_dir_all(&service).expect("create cgroup dirs");
    std::fs::write(service.join("memory.max"), "max\n").expect("write memory.max");
    std::fs::write(root.join("system.slice").join("memory.max"), "1073741824\n")
        .expect("write slice memory.max");
    let proc_cgroup = dir.path().join("cgroup-file");
    std::fs::write(&proc_cgroup, "0::/system.slice/herd.service\n").expect("write cgroup file");
    assert_eq!(read_service_memory_max_at(&proc_cgroup, &root), Some(GIB));
    std::fs::write(service.join("memory.max"), "268435456\n").expect("write memory.max");
    assert_eq!(
        read_service_memory_max_at(&proc_cgroup, &root),
        Some(256 * MIB)
    );
    std::fs::write(root.join("system.slice").join("memory.max"), "max\n")
        .expect("write slice memory.max");
    std::fs::write(service.join("memory.max"), "max\n").expect("write memory.max");
    assert_eq!(read_service_memory_max_at(&proc_cgroup, &root), None);
    assert_eq!(
        read_service_memory_max_at(&dir.path().join("missing"), &root),
        None
    );

    // A hybrid host: v2 only at the root, the memory controller on v1.
    let v1 = root.join("memory").join("process_api").join("job");
    std::fs::create_dir_all(&v1).expect("create v1 dirs");
    std::fs::write(&proc_cgroup, "4:memory:/process_api/job\n1:cpu:/\n0::/\n")
        .expect("write cgroup file");
    std::fs::write(v1.join("memory.limit_in_bytes"), "9223372036854771712\n")
        .expect("write unlimited v1 limit");
    assert_eq!(read_service_memory_max_at(&proc_cgroup, &root), None);
    std::fs::write(v1.join("memory.limit_in_bytes"), "805306368\n").expect("write v1 limit");
    assert_eq!(
        read_service_memory_max_at(&proc_cgroup, &root),
        Some(768 * MIB)
    );

    // This machine's own facts are readable (Linux CI).
    let facts = HostFacts::detect();
    assert!(
        facts.total_ram_bytes.is_some_and(|ram| ram > 64 * MIB),
        "{facts:?}"
    );
}

/// The last component of some non-root cgroup this process is in (any hierarchy), to
/// stand in for a unit name: `is_in_scope` matches on the path's end.
fn own_cgroup_leaf() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").expect("read /proc/self/cgroup");
    text.lines()
        .filter_map(|line| line.splitn(3, ':').nth(2))
        .filter_map(|path| Path::new(path).file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .next()
}

#[test]
#[expect(
    clippy::print_stderr,
    reason = "says in the test output which check ran"
)]
fn is_in_scope_reads_the_real_cgroup() {
    let pid = i32::try_from(std::process::id()).expect("pid fits i32");
    match own_cgroup_leaf() {
        Some(leaf) => assert!(is_in_scope(pid, &leaf), "{leaf}"),
        None => eprintln!("this process is in root cgroups only; positive case not checked"),
    }
    assert!(!is_in_scope(pid, "herd-worker-not-this-one.scope"));
    assert!(!is_in_scope(i32::MAX, "anything.scope"));
}

#[tokio::test]
#[expect(
    clippy::print_stderr,
    reason = "says in the test output which check ran"
)]
async fn scope_ack_sees_entry_exit_and_deadline() {
    let spawn = |script: &str| {
        tokio::process::Command::new("/bin/sh")
            .args(["-c", script])
            .kill_on_drop(true)
            .spawn()
            .expect("spawn /bin/sh")
    };
    let pid_of = |child: &tokio::process::Child| {
        i32::try_from(child.id().expect("child has a pid")).expect("pid fits i32")
    };

    // A child that exits at once is never seen in the unit: Exited (a zombie counts).
    let quick = spawn("exit 3");
    let ack = wait_for_scope_ack(
        pid_of(&quick),
        "herd-worker-x.scope",
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(ack, ScopeAck::Exited);

    // A live child outside the unit: the deadline answers.
    let mut slow = spawn("exec sleep 30");
    let ack = wait_for_scope_ack(
        pid_of(&slow),
        "herd-worker-x.scope",
        Duration::from_millis(100),
    )
    .await;
    assert_eq!(ack, ScopeAck::TimedOut);

    // The child shares our cgroups, so our own leaf stands in for its unit.
    match own_cgroup_leaf() {
        Some(leaf) => {
            let ack = wait_for_scope_ack(pid_of(&slow), &leaf, Duration::from_secs(10)).await;
            assert_eq!(ack, ScopeAck::Acknowledged);
        }
        None => eprintln!("this process is in root cgroups only; acknowledged case not checked"),
    }
    slow.kill().await.expect("kill the sleeping child");
}

#[expect(
    clippy::disallowed_methods,
    reason = "test drives a raw child: systemd-analyze"
)]
fn systemd_analyze_verify(unit_file: &Path) -> std::io::Result<std::process::Output> {
    std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit_file)
        .output()
}

/// A parse check for when `systemd-analyze` cannot run: sections, `Key=value` lines, and
/// the keys herd relies on.
fn parse_check(text: &str) -> Result<(), String> {
    let mut section = "";
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = if ["Unit", "Service", "Install"].contains(&name) {
                name
            } else {
                return Err(format!("unknown section {name}"));
            };
            continue;
        }
        if section.is_empty() || !line.contains('=') {
            return Err(format!("not a Key=value line inside a section: {line}"));
        }
    }
    Ok(())
}

#[test]
#[expect(
    clippy::print_stderr,
    reason = "says in the test output which check ran"
)]
fn b34_service_unit_is_valid_and_names_the_binary() {
    let dir = tempfile::tempdir().expect("temp dir");
    let binary = std::env::current_exe().expect("test binary path");
    let home = dir.path().join("my home %h $HOME");
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map_or_else(|| "root".to_owned(), |u| u.name);
    for kind in [UnitKind::User, UnitKind::System { user: &user }] {
        let text = systemd_unit(&binary, &home, kind);
        assert!(
            text.contains(&format!("\nExecStart=\"{}\" serve\n", binary.display())),
            "{text}"
        );
        assert!(text.contains("\nKillMode=process\n"), "{text}");
        assert!(text.contains("\nRestart=on-failure\n"), "{text}");
        assert!(
            text.contains(&format!(
                "\nEnvironment=\"HERD_HOME={}\"\n",
                home.display().to_string().replace('%', "%%")
            )),
            "{text}"
        );
        assert!(!text.contains("HERD_SUPERVISED_CHILD="), "{text}");
        parse_check(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));

        let unit_file = dir.path().join("herd.service");
        std::fs::write(&unit_file, &text).expect("write unit file");
        match systemd_analyze_verify(&unit_file) {
            Ok(output) => {
                let stderr = String::from_utf8_lossy(&output.stderr);
                if stderr.contains("Failed to initialize manager") {
                    eprintln!(
                        "systemd-analyze verify cannot run here ({}); the parse check passed",
                        stderr.trim()
                    );
                    continue;
                }
                assert!(
                    output.status.success(),
                    "systemd-analyze verify failed:\n{stderr}\n{text}"
                );
                for bad in ["Failed", "ignoring", "not executable", "Unknown"] {
                    assert!(
                        !stderr.contains(bad),
                        "systemd-analyze verify complained ({bad}):\n{stderr}\n{text}"
                    );
                }
                eprintln!("systemd-analyze verify accepted the {kind:?} unit");
            }
            Err(err) => eprintln!(
                "systemd-analyze is not available ({err}); the parse check passed instead"
            ),
        }
    }
}

#[tokio::test]
async fn stop_scope_runs_systemctl_and_treats_a_gone_unit_as_stopped() {
    let fx = Fixture::new();
    let d = dispatcher(true, TestClock::new());
    let unit = "herd-worker-proc_0123456789ab.scope";

    d.stop_scope(unit, &fx.env("ok"))
        .await
        .expect("stop succeeds");
    assert_eq!(
        fx.recorded(),
        vec![format!("systemctl --user stop {unit}")],
        "systemctl argv"
    );

    let mut env = fx.env("ok");
    env.insert("FAKE_SYSTEMCTL_EXIT".to_owned(), "5".to_owned());
    env.insert(
        "FAKE_SYSTEMCTL_STDERR".to_owned(),
        format!("Failed to stop {unit}: Unit {unit} not loaded."),
    );
    d.stop_scope(unit, &env)
        .await
        .expect("a unit that is already gone counts as stopped");

    env.insert(
        "FAKE_SYSTEMCTL_STDERR".to_owned(),
        "Failed to connect to bus: No such file or directory".to_owned(),
    );
    let err = d
        .stop_scope(unit, &env)
        .await
        .expect_err("a bus failure is a failed stop");
    assert!(
        matches!(&err, ScopeStopError::Failed { detail, .. } if detail.contains("Failed to connect to bus")),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains(&format!("systemctl --user stop {unit}")),
        "{err}"
    );

    for foreign in [
        "sshd.service",
        "--all",
        "herd-worker-x.service",
        "herd-worker-a b.scope",
    ] {
        let err = d
            .stop_scope(foreign, &fx.env("ok"))
            .await
            .expect_err("only worker scopes are stopped");
        assert!(
            matches!(err, ScopeStopError::NotAWorkerScope { .. }),
            "{err:?}"
        );
    }
    assert_eq!(fx.recorded().len(), 3, "no systemctl run for foreign units");

    let mut env = fx.env("ok");
    env.insert("PATH".to_owned(), "/nonexistent-herd-test-dir".to_owned());
    let err = d
        .stop_scope(unit, &env)
        .await
        .expect_err("no systemctl on PATH");
    assert!(matches!(err, ScopeStopError::NoSystemctl { .. }), "{err:?}");
}
