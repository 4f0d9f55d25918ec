//! Spawning: modes, environment, scratch dir, rewrite, guard, lookup (B1-B3, B36, B37).

use std::sync::Once;

use herd_core::{LookupError, Mode, RegistryConfig, SpawnError, SpawnRequest};

use crate::support::Fixture;

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
    let exe = std::fs::read_link(format!("/proc/{}/exe", info.pid)).expect("live child");
    assert_eq!(
        exe.file_name().and_then(|n| n.to_str()),
        Some("sleep"),
        "{exe:?}"
    );
    let environ = std::fs::read(format!("/proc/{}/environ", info.pid)).expect("environ");
    let entries: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
    let pwd = format!("PWD={}", cwd.display());
    assert!(
        entries.contains(&pwd.as_bytes()),
        "no {pwd} in the child's environment"
    );
    let tag = format!("HERD_SESSION={}", info.session_id);
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
