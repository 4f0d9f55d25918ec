//! Spawning: modes, environment, scratch dir, rewrite, guard, lookup (B1-B3, B36, B37).
//!
//! The live environment test needs a registry host whose whole environment and working
//! directory it chooses (a name that is not UTF-8, a `PWD` that names the directory
//! through a symlink), which this test process cannot take on without disturbing the
//! tests running beside it. It re-runs this test binary as a child
//! (`HERD_IT_ROLE=env-child`, selecting `spawning::env_child`) with exactly that
//! environment; without the role the child entry does nothing, so a plain run executes
//! it once as a no-op.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::Duration;

use herd_core::{
    Home, LookupError, Mode, Registry, RegistryConfig, SpawnError, SpawnRequest, WaitStatus,
};

use crate::support::{Fixture, group_members, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_stdout_and_stderr_keep_their_order() {
    let fx = Fixture::new();
    let info = fx
        .run("for i in $(seq 1 200); do echo out$i; echo err$i >&2; done")
        .await;
    fx.done(&info.session_id).await;
    let log = fx
        .registry
        .log(info.session_id.as_str(), Some(0), Some(1000))
        .unwrap();
    let expected: Vec<String> = (1..=200)
        .flat_map(|i| [format!("out{i}"), format!("err{i}")])
        .collect();
    assert_eq!(log.output, expected.join("\n"));
    assert_eq!(log.total_lines, 400);
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_compound_background_runs_the_head_in_the_foreground() {
    let fx = Fixture::new();
    // Unrewritten, the whole list runs in a background subshell, where $BASHPID != $$
    // and nothing is printed; rewritten, the test runs in the shell itself.
    let command = r#"[ "$BASHPID" = "$$" ] && echo foreground &"#;
    let info = fx.run(command).await;
    assert_eq!(info.command, command, "the session keeps the original text");
    let answer = fx.done(&info.session_id).await;
    assert_eq!(answer.output.trim(), "foreground");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_tmpdir_is_the_homes_scratch_dir() {
    let fx = Fixture::new();
    let info = fx
        .run("echo \"$TMPDIR\"; test -d \"$TMPDIR\" && echo exists")
        .await;
    let answer = fx.done(&info.session_id).await;
    let scratch = fx.home().scratch_dir();
    assert_eq!(answer.output, format!("{}\nexists\n", scratch.display()));
    fx.assert_groups_gone().await;
}

fn set_fake_key() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: every environment access in this test binary goes through std, which
        // serialises reads and writes of the environment with its own lock.
        unsafe { std::env::set_var("FAKE_API_KEY", "sk-fake-123") };
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b36_credentials_are_not_passed_unless_forwarded() {
    set_fake_key();
    let fx = Fixture::new();
    let probe = "echo \"key=${FAKE_API_KEY:-unset} session=$HERD_SESSION sup=$HERD_SUPERVISED_CHILD py=$PYTHONUNBUFFERED\"";
    let hidden = fx.run(probe).await;
    let answer = fx.done(&hidden.session_id).await;
    assert_eq!(
        answer.output.trim(),
        format!("key=unset session={} sup=1 py=1", hidden.session_id)
    );
    let forwarded = fx
        .spawn(SpawnRequest {
            command: "echo \"key=${FAKE_API_KEY:-unset}\"".to_owned(),
            forward_env: vec!["FAKE_API_KEY".to_owned()],
            ..SpawnRequest::default()
        })
        .await;
    let answer = fx.done(&forwarded.session_id).await;
    assert_eq!(answer.output.trim(), "key=sk-fake-123");
    fx.assert_groups_gone().await;
}

/// The environment variable that turns `env_child` into a registry host.
const ROLE: &str = "HERD_IT_ROLE";
/// The home the child host works in.
const HOME_VAR: &str = "HERD_IT_HOME";
/// The role of `env_child`.
const ENV_CHILD: &str = "env-child";
/// The names the second job forwards.
const FORWARDED: [&str; 2] = ["API_KEY", "MY_DB_PASSWD"];

/// The one raw `Command` of this module: this test binary as a child.
#[expect(clippy::disallowed_methods, reason = "test drives a raw child")]
fn raw(program: impl AsRef<OsStr>) -> Command {
    Command::new(program)
}

/// A raw child killed and reaped when dropped.
struct Jod(Child);

impl Drop for Jod {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The registry host of `b36_job_env_drops_credentials_and_non_utf8_names`: runs only
/// as that test's child. It starts two jobs that write their environment (`env -0`) to
/// files in the home, the second forwarding [`FORWARDED`], waits for both, and records
/// their process groups in `pids`.
#[test]
fn env_child() {
    if std::env::var_os(ROLE).as_deref() != Some(OsStr::new(ENV_CHILD)) {
        return;
    }
    let home = std::env::var_os(HOME_VAR).expect("the parent sets the home");
    let home = Path::new(&home);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime starts");
    runtime.block_on(async {
        // Through the shell, which keeps an inherited `PWD` that names its directory;
        // the shell bypass would set `PWD` itself and hide what was inherited.
        let config = RegistryConfig {
            direct_exec: false,
            ..RegistryConfig::default()
        };
        let registry = Registry::new(Home::new(home), config).expect("inside a runtime");
        let mut pids = String::new();
        for (file, forward) in [("plain.env", &[][..]), ("forwarded.env", &FORWARDED[..])] {
            let info = registry
                .spawn(SpawnRequest {
                    command: format!("env -0 > '{}'", home.join(file).display()),
                    forward_env: forward.iter().map(|f| (*f).to_owned()).collect(),
                    ..SpawnRequest::default()
                })
                .await
                .expect("spawn succeeds");
            let answer = registry
                .wait(info.session_id.as_str(), Duration::from_secs(30), None)
                .await
                .expect("the session exists");
            assert_eq!(
                (answer.status, answer.exit_code),
                (WaitStatus::Exited, Some(0)),
                "session {} did not finish cleanly within 30 s; output: {:?}",
                info.session_id,
                answer.output
            );
            pids.push_str(&format!("{}\n", info.pid));
        }
        std::fs::write(home.join("pids"), pids).expect("the home is writable");
    });
}

/// The `NAME=value` entries of an `env -0` dump, as bytes.
fn env_entries(path: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let dump = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    dump.split(|b| *b == 0)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let eq = entry.iter().position(|b| *b == b'=').unwrap_or(entry.len());
            (
                entry[..eq].to_vec(),
                entry[eq..].iter().skip(1).copied().collect(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b36_job_env_drops_credentials_and_non_utf8_names() {
    let dir = tempfile::tempdir().expect("a temp dir can be created");
    let root = dir.path().canonicalize().expect("the temp dir resolves");
    let (real, alias, home) = (root.join("real"), root.join("alias"), root.join("home"));
    for d in [&real, &home] {
        std::fs::create_dir(d).expect("the temp dir is writable");
    }
    std::os::unix::fs::symlink(&real, &alias).expect("the temp dir is writable");
    let bad_name = OsStr::from_bytes(b"HERD_\xffNAME");
    let mut command = raw(std::env::current_exe().expect("path of this test binary"));
    command
        .args([
            "spawning::env_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").expect("the test runs with a PATH"),
        )
        .env(ROLE, ENV_CHILD)
        .env(HOME_VAR, &home)
        // The host's working directory is `real`, reached and named through `alias`:
        // a job that inherits `PWD` shows the alias, one that does not shows `real`.
        .current_dir(&alias)
        .env("PWD", &alias)
        .env("OLDPWD", &root)
        .env("MY_DB_PASSWD", "db-passwd-value")
        .env("API_KEY", "api-key-value")
        .env("AWS_SECRET_ACCESS_KEY", "aws-secret-value")
        .env("TOKENIZERS_PARALLELISM", "false")
        .env(bad_name, "bad-name-value")
        .env("HERD_BYTES_VALUE", OsStr::from_bytes(b"\xfe\xff"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let mut child = Jod(command.spawn().expect("the test binary re-runs as a child"));
    let mut status = None;
    wait_until(Duration::from_secs(60), "the env child to exit", || {
        status = child.0.try_wait().expect("the child can be polled");
        status.is_some()
    })
    .await;
    assert!(
        status.is_some_and(|s| s.success()),
        "the env child failed ({status:?}); its panic is above"
    );

    let value = |entries: &[(Vec<u8>, Vec<u8>)], name: &[u8]| -> Option<Vec<u8>> {
        entries
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let plain = env_entries(&home.join("plain.env"));
    let forwarded = env_entries(&home.join("forwarded.env"));
    for entries in [&plain, &forwarded] {
        assert_eq!(
            value(entries, b"PWD").as_deref(),
            Some(alias.as_os_str().as_bytes()),
            "PWD is inherited"
        );
        assert_eq!(
            value(entries, b"OLDPWD").as_deref(),
            Some(root.as_os_str().as_bytes()),
            "OLDPWD is inherited"
        );
        assert_eq!(
            value(entries, b"TOKENIZERS_PARALLELISM").as_deref(),
            Some(&b"false"[..])
        );
        assert_eq!(
            value(entries, b"HERD_BYTES_VALUE").as_deref(),
            Some(&b"\xfe\xff"[..]),
            "a value that is not UTF-8 is kept"
        );
        assert_eq!(value(entries, b"AWS_SECRET_ACCESS_KEY"), None);
        assert!(
            entries
                .iter()
                .all(|(k, v)| std::str::from_utf8(k).is_ok() && v != b"bad-name-value"),
            "a name that is not UTF-8 reached the job"
        );
    }
    assert_eq!(value(&plain, b"MY_DB_PASSWD"), None);
    assert_eq!(value(&plain, b"API_KEY"), None);
    assert_eq!(
        value(&forwarded, b"MY_DB_PASSWD").as_deref(),
        Some(&b"db-passwd-value"[..])
    );
    assert_eq!(
        value(&forwarded, b"API_KEY").as_deref(),
        Some(&b"api-key-value"[..])
    );

    let pids = std::fs::read_to_string(home.join("pids")).expect("the child recorded its jobs");
    for pid in pids.lines() {
        let pgid: i32 = pid.parse().expect("a pid per line");
        wait_until(
            Duration::from_secs(10),
            &format!("process group {pgid} to be gone"),
            || group_members(pgid).is_empty(),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_own_process_group_and_cwd() {
    let fx = Fixture::new();
    let cwd = fx.dir.path().to_path_buf();
    let info = fx
        .spawn(SpawnRequest {
            command: "ps -o pgid= -p $$; pwd".to_owned(),
            cwd: Some(cwd.clone()),
            ..SpawnRequest::default()
        })
        .await;
    let answer = fx.done(&info.session_id).await;
    let mut lines = answer.output.lines();
    assert_eq!(
        lines.next().map(str::trim),
        Some(info.pid.to_string().as_str())
    );
    assert_eq!(lines.next(), cwd.canonicalize().unwrap().to_str());
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_of_a_missing_shell_is_an_error_and_leaves_nothing() {
    let fx = Fixture::with(|c: &mut RegistryConfig| {
        c.shell = vec!["/nonexistent/shell".to_owned(), "-c".to_owned()];
    });
    let err = fx
        .registry
        .spawn(SpawnRequest {
            command: "true".to_owned(),
            ..SpawnRequest::default()
        })
        .await;
    match err {
        Err(SpawnError::Spawn { command, .. }) => assert_eq!(command, "true"),
        other => panic!("expected a spawn error, got {other:?}"),
    }
    assert!(
        fx.registry
            .list(&herd_core::ListFilter {
                include_finished: true,
                ..Default::default()
            })
            .is_empty()
    );
    let logs = std::fs::read_dir(fx.home().session_logs_dir())
        .unwrap()
        .count();
    assert_eq!(logs, 0, "a failed spawn leaves no log behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_command_is_refused() {
    let fx = Fixture::new();
    match fx.registry.spawn(SpawnRequest::default()).await {
        Err(SpawnError::InvalidRequest { field, .. }) => assert_eq!(field, "command"),
        other => panic!("expected an invalid request, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b37_lookup_by_full_id_and_unique_prefix() {
    let fx = Fixture::new();
    let a = fx.run("true").await;
    let b = fx.run("true").await;
    let full = a.session_id.as_str();
    assert_eq!(fx.registry.lookup(full).unwrap(), a.session_id);
    // A prefix long enough to be unique between the two ids.
    let common = full
        .chars()
        .zip(b.session_id.as_str().chars())
        .take_while(|(x, y)| x == y)
        .count();
    let len = (common + 1).max("proc_".len() + 4);
    assert_eq!(fx.registry.lookup(&full[..len]).unwrap(), a.session_id);
    assert_eq!(
        fx.registry.lookup(&full["proc_".len()..len]).unwrap(),
        a.session_id,
        "bare suffix"
    );
    match fx.registry.lookup(&full[..8]) {
        Err(LookupError::TooShort { .. }) => {}
        other => panic!("3 hex chars must be too short, got {other:?}"),
    }
    match fx.registry.lookup("proc_ffffffffffff0") {
        Err(LookupError::NotFound { .. }) => {}
        other => panic!("expected not found, got {other:?}"),
    }
    fx.done(&a.session_id).await;
    fx.done(&b.session_id).await;
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b33_guard_refusal_starts_nothing() {
    let fx = Fixture::with(|c: &mut RegistryConfig| {
        c.guard = Some(herd_guards::Host::new(
            vec!["herd".to_owned()],
            "herd serve",
        ));
    });
    let marker = fx.dir.path().join("ran");
    let refused = fx
        .registry
        .spawn(SpawnRequest {
            command: format!("touch '{}'; pkill herd", marker.display()),
            ..SpawnRequest::default()
        })
        .await;
    match refused {
        Err(SpawnError::Guarded(block)) => assert!(!block.remedy.is_empty(), "{block:?}"),
        other => panic!("expected a guard refusal, got {other:?}"),
    }
    assert!(!marker.exists(), "nothing ran");
    let info = fx.run("echo allowed").await;
    assert_eq!(fx.done(&info.session_id).await.output, "allowed\n");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b33_guard_reads_the_scripts_a_command_names() {
    // The guard parses most commands without a file read; one that names a script
    // must still be judged with the script's text, read from the job's directory.
    let fx = Fixture::with(|c: &mut RegistryConfig| {
        c.guard = Some(herd_guards::Host::new(
            vec!["herd".to_owned()],
            "herd serve",
        ));
    });
    let marker = fx.dir.path().join("ran");
    std::fs::write(
        fx.dir.path().join("stop.sh"),
        format!("touch '{}'\npkill herd\n", marker.display()),
    )
    .expect("write the script");
    let refused = fx
        .registry
        .spawn(SpawnRequest {
            command: "bash stop.sh".to_owned(),
            cwd: Some(fx.dir.path().to_path_buf()),
            ..SpawnRequest::default()
        })
        .await;
    match refused {
        Err(SpawnError::Guarded(block)) => {
            assert!(block.reason.contains("stop.sh"), "{block:?}");
        }
        other => panic!("expected a guard refusal naming the script, got {other:?}"),
    }
    assert!(!marker.exists(), "nothing ran");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_pty_fallback_runs_once_on_pipes() {
    // Test seam: `pty_unavailable` makes every PTY open fail, as on a host without
    // /dev/ptmx, so the fallback path runs for real.
    let fx = Fixture::with(|c: &mut RegistryConfig| c.pty_unavailable = true);
    let marker = fx.dir.path().join("runs");
    let info = fx
        .spawn(SpawnRequest {
            command: format!(
                "echo run >> '{}'; test -t 1 && echo tty || echo notty",
                marker.display()
            ),
            mode: Mode::pty(),
            ..SpawnRequest::default()
        })
        .await;
    assert_eq!(info.mode, herd_core::ModeName::Pipe);
    assert!(
        info.pty_note
            .as_deref()
            .is_some_and(|n| n.contains("pipes")),
        "{:?}",
        info.pty_note
    );
    let answer = fx.done(&info.session_id).await;
    assert_eq!(answer.output, "notty\n");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "run\n",
        "the command ran exactly once"
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_plain_command_is_exec_d_without_the_shell() {
    let fx = Fixture::new();
    let cwd = fx.dir.path().canonicalize().expect("temp dir");
    let info = fx
        .spawn(SpawnRequest {
            command: "sleep 30".to_owned(),
            cwd: Some(cwd.clone()),
            ..SpawnRequest::default()
        })
        .await;
    // The session's process is the program itself, with the environment the shell
    // would have given it: PWD is the session's cwd, herd's tag is there.
    // Read once the exec is done: the kernel names the new program before it has
    // laid out the new environment, and until then environ reads empty.
    let tag = format!("HERD_SESSION={}", info.session_id);
    let read_environ = || std::fs::read(format!("/proc/{}/environ", info.pid)).unwrap_or_default();
    herd_test_support::wait::until(
        std::time::Duration::from_secs(10),
        "the exec to finish",
        || {
            read_environ()
                .split(|b| *b == 0)
                .any(|v| v == tag.as_bytes())
        },
    )
    .await;
    let exe = std::fs::read_link(format!("/proc/{}/exe", info.pid)).expect("live child");
    assert_eq!(
        exe.file_name().and_then(|n| n.to_str()),
        Some("sleep"),
        "{exe:?}"
    );
    let environ = read_environ();
    let entries: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
    let pwd = format!("PWD={}", cwd.display());
    assert!(
        entries.contains(&pwd.as_bytes()),
        "no {pwd} in the child's environment"
    );
    assert!(
        entries.contains(&tag.as_bytes()),
        "no {tag} in the child's environment"
    );
    fx.registry
        .kill(info.session_id.as_str(), herd_core::KillSource::ProcessKill)
        .await
        .expect("kill");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_exec_without_the_shell_keeps_output_and_exit_codes() {
    let fx = Fixture::new();
    let echo = fx.run("echo plain words a=b").await;
    let answer = fx.done(&echo.session_id).await;
    assert_eq!(answer.output.trim_end(), "plain words a=b");
    assert_eq!(answer.exit_code, Some(0));

    let failing = fx.run("false").await;
    assert_eq!(fx.done(&failing.session_id).await.exit_code, Some(1));

    // Not found anywhere: the shell runs it and reports it the way it always does.
    let missing = fx.run("herd-no-such-program-anywhere").await;
    let answer = fx.done(&missing.session_id).await;
    assert_eq!(answer.exit_code, Some(127));
    assert!(
        answer.output.contains("command not found"),
        "{:?}",
        answer.output
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_non_directory_cwd_is_refused_in_every_mode() {
    let fx = Fixture::new();
    let file = fx.home().root().join("not-a-dir");
    std::fs::write(&file, "x").expect("a file");
    for mode in [herd_core::Mode::Pipe, herd_core::Mode::pty()] {
        for (cwd, needle) in [
            (fx.home().root().join("no-such-dir"), "cannot be used"),
            (file.clone(), "not a directory"),
        ] {
            let refused = fx
                .registry
                .spawn(SpawnRequest {
                    command: "pwd".to_owned(),
                    task_id: "t".to_owned(),
                    cwd: Some(cwd.clone()),
                    mode,
                    ..SpawnRequest::default()
                })
                .await
                .expect_err("a bad cwd starts nothing");
            let text = refused.to_string();
            assert!(
                text.contains("cwd") && text.contains(needle),
                "{mode:?} {cwd:?}: {text}"
            );
        }
    }
    assert!(
        fx.registry
            .list(&herd_core::ListFilter {
                owner: None,
                session_key: None,
                include_finished: true
            })
            .is_empty()
    );
}
