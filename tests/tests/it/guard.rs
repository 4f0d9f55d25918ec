//! B33 through the registry: with the self-kill guard configured, a spawn that would
//! kill the host by name is refused with the rule and starts nothing (no session, no
//! log file, no process), while pattern kills that cannot reach the host run.

use herd_core::{ListFilter, SpawnError, SpawnRequest};
use herd_guards::Host;

use crate::support::Fixture;

async fn guarded() -> Fixture {
    Fixture::build(
        |_| {},
        |config| {
            config.guard = Some(Host::new(vec!["python".into()], "python -m agent.main"));
        },
    )
    .await
}

fn request(command: &str, cwd: &std::path::Path) -> SpawnRequest {
    SpawnRequest {
        command: command.to_owned(),
        cwd: Some(cwd.to_owned()),
        task_id: "t".to_owned(),
        ..SpawnRequest::default()
    }
}

/// Asserts the registry holds no session and wrote no session log.
fn assert_nothing_started(fx: &Fixture) {
    let rows = fx.registry.list(&ListFilter {
        owner: None,
        session_key: None,
        include_finished: true,
    });
    assert!(rows.is_empty(), "a refused spawn left sessions: {rows:#?}");
    let logs = fx.home().session_logs_dir();
    let n_logs = std::fs::read_dir(&logs).map_or(0, Iterator::count);
    assert_eq!(n_logs, 0, "a refused spawn wrote a log under {logs:?}");
    // Nothing at all under the home but the plugins dir the fixture made: no
    // scratch dir, no checkpoint, no ledger.
    let mut entries: Vec<String> = std::fs::read_dir(fx.dir.path())
        .expect("the home exists")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let plugins = fx.home().plugins_dir();
    entries.retain(|name| fx.dir.path().join(name) != plugins);
    assert!(entries.is_empty(), "a refused spawn created {entries:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn b33_registry_refuses_host_kill_by_name_and_starts_nothing() {
    let fx = guarded().await;
    let cwd = tempfile::tempdir().expect("a temp dir can be created");
    for command in [
        "pkill -9 python3",
        "pkill -f 'python -m agent.main'",
        "killall python",
        "touch started && pkill -9 python3",
    ] {
        match fx.registry.spawn(request(command, cwd.path())).await {
            Err(SpawnError::Guarded(block)) => {
                let message = SpawnError::Guarded(block.clone()).to_string();
                assert!(
                    message.contains(block.rule.as_str()),
                    "{command}: the error names the rule: {message}"
                );
                assert!(!block.remedy.is_empty(), "{command}: {block:?}");
            }
            Err(other) => panic!("{command}: refused for the wrong reason: {other}"),
            Ok(info) => panic!("{command}: the guard let it start: {info:?}"),
        }
        assert_nothing_started(&fx);
    }
    assert!(
        !cwd.path().join("started").exists(),
        "the part before the refused kill ran"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn b33_registry_allows_pattern_kills_that_cannot_reach_the_host() {
    let fx = guarded().await;
    // `[s]` and `[p]` keep the patterns from matching the shell running them, so
    // pkill finds nothing anywhere: exit status 1, printed for the assertion.
    for (command, want) in [
        ("pkill -f 'python my_[s]cript.py'; echo rc=$?", "rc=1"),
        ("pkill -f 'herd-no-such-[p]rocess-xyz' || echo none", "none"),
    ] {
        let info = fx.run(command).await;
        let waited = fx.done(&info.session_id).await;
        assert_eq!(waited.exit_code, Some(0), "{command}: {waited:?}");
        assert_eq!(waited.output.trim_end(), want, "{command}");
    }
    fx.assert_groups_gone().await;
}
