//! B30 ordering and B31 identity through the registry: redaction runs after the
//! plugin hooks on every route, so the key the leak plugin inserts is masked
//! everywhere; a secret the session prints itself is masked on every route with no
//! plugin at all; and the owner a hook sees is the session owner's.

use std::time::Duration;

use herd_core::KillStatus;

use crate::support::{
    Fixture, LEAK, LEAKED_KEY, LEAKED_KEY_MASKED, completion_of, completion_output,
};

/// A real-looking GitHub token (`ghp_` + 36 characters) and how the redactor masks it.
const GHP: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
const GHP_MASKED: &str = "ghp_ab...6789";

/// Asserts `out` carries the leak plugin's tag for `route` and `owner`, with its key masked.
fn check_leak(route: &str, out: &str, owner: &str) {
    assert!(
        !out.contains(LEAKED_KEY),
        "{route}: raw key leaked in {out:?}"
    );
    assert!(
        !out.contains("FAKEfake"),
        "{route}: key body leaked in {out:?}"
    );
    assert!(
        out.contains(&format!("leaked {LEAKED_KEY_MASKED}")),
        "{route}: the plugin's replacement is missing or not masked: {out:?}"
    );
    assert!(
        out.contains(&format!("[route={route} ")),
        "{route}: the hook saw another route: {out:?}"
    );
    assert!(
        out.contains(&format!(" owner={owner}]")),
        "{route}: the hook saw another owner than {owner}: {out:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn b30_b31_leak_plugin_key_masked_on_every_route_as_the_owner() {
    let fx = Fixture::with_plugins(|p| {
        p.lib("leak", LEAK);
    })
    .await;
    fx.assert_loaded(&["leak"]);
    let mut events = fx.registry.subscribe();
    // The container key and the owning turn differ: the hook must see the owner (B31).
    let info = fx
        .run_as("echo building; read -r _", "container-a", "turn-7", true)
        .await;
    let id = &info.session_id;
    fx.until_logged(id, "building").await;

    let poll = fx.poll(id).output_preview;
    check_leak("poll", &poll, "turn-7");
    assert!(poll.contains("code=running"), "{poll:?}");
    assert!(poll.starts_with("building"), "{poll:?}");
    check_leak("log", &fx.log(id).output, "turn-7");
    check_leak("log", &fx.log_chunk(id), "turn-7");
    let row = fx.row(id);
    assert_eq!(row.owner_task_id, "turn-7");
    check_leak("list_preview", &row.output_preview, "turn-7");

    let killed = fx.kill(id).await;
    assert_eq!(killed.status, KillStatus::Killed, "{killed:?}");
    check_leak("kill", &killed.output, "turn-7");

    let waited = fx.done(id).await;
    check_leak("wait", &waited.output, "turn-7");
    assert!(
        !waited.output.contains("code=running"),
        "an exited session's hook sees a return code: {:?}",
        waited.output
    );
    let event = completion_of(&mut events, id, Duration::from_secs(10)).await;
    let (output, owner) = completion_output(&event);
    assert_eq!(owner, "turn-7");
    check_leak("completion", output, "turn-7");

    // The owner's queue holds the same, masked, completion.
    let drained = fx.registry.drain("turn-7");
    assert_eq!(drained.len(), 1, "{drained:?}");
    check_leak("completion", completion_output(&drained[0]).0, "turn-7");
    assert!(
        fx.registry.drain("container-a").is_empty(),
        "the completion is the owner's, not the container's"
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn b30_session_secret_masked_on_every_route_without_plugins() {
    let fx = Fixture::bare().await;
    let mut events = fx.registry.subscribe();
    let info = fx.run(&format!("echo token {GHP} ready; read -r _")).await;
    let id = &info.session_id;
    fx.until_logged(id, "ready").await;

    let want = format!("token {GHP_MASKED} ready");
    let routes = [
        ("poll", fx.poll(id).output_preview.into_string()),
        ("log", fx.log(id).output.into_string()),
        ("log_chunk", fx.log_chunk(id)),
        ("list_preview", fx.row(id).output_preview.into_string()),
    ];
    for (route, out) in &routes {
        assert!(!out.contains(GHP), "{route}: raw token in {out:?}");
        assert_eq!(out.trim_end(), want, "{route}");
    }
    let killed = fx.kill(id).await;
    assert_eq!(killed.status, KillStatus::Killed, "{killed:?}");
    assert_eq!(killed.output.trim_end(), want, "kill");
    let waited = fx.done(id).await;
    assert_eq!(waited.output.trim_end(), want, "wait");
    let event = completion_of(&mut events, id, Duration::from_secs(10)).await;
    assert_eq!(completion_output(&event).0.trim_end(), want, "completion");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn b30_command_field_of_every_answer_is_masked() {
    // Every answer and event carries the command line through
    // `Pipeline::redact_command`, as the output beside it goes through the pipeline.
    let fx = Fixture::bare().await;
    let mut events = fx.registry.subscribe();
    let info = fx.run(&format!("echo token {GHP} ready; read -r _")).await;
    let id = &info.session_id;
    fx.until_logged(id, "ready").await;
    let commands = [
        ("spawn", info.command.clone()),
        ("poll", fx.poll(id).command),
        ("log", fx.log(id).command),
        ("list", fx.row(id).command),
    ];
    for (route, command) in &commands {
        assert!(!command.contains(GHP), "{route}: {command:?}");
        assert!(command.contains(GHP_MASKED), "{route}: {command:?}");
    }
    assert!(!fx.poll(id).output_preview.contains(GHP));
    let killed = fx.kill(id).await;
    assert!(!killed.output.contains(GHP), "{killed:?}");
    let waited = fx.done(id).await;
    assert!(!waited.command.contains(GHP), "wait: {:?}", waited.command);
    assert!(
        waited.command.contains(GHP_MASKED),
        "wait: {:?}",
        waited.command
    );
    let event = completion_of(&mut events, id, Duration::from_secs(10)).await;
    let herd_core::Event::Completion { command, .. } = &event else {
        panic!("not a completion: {event:?}");
    };
    assert!(!command.contains(GHP), "completion: {command:?}");
    assert!(command.contains(GHP_MASKED), "completion: {command:?}");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn b30_log_chunk_follower_never_sees_a_token_split_across_reads() {
    // `Registry::log_chunk` (the `logs --follow` route) hands out only whole lines
    // while the session runs, so a token the session writes in two pieces is
    // redacted whole in the later chunk.
    let fx = Fixture::bare().await;
    let (head, tail) = GHP.split_at(8);
    let info = fx
        .run(&format!(
            "printf 'token {head}'; read -r _; printf '{tail} ready\\n'"
        ))
        .await;
    let id = &info.session_id;
    fx.until_logged(id, head).await;
    let first = fx
        .registry
        .log_chunk(id.as_str(), 0, 1 << 20)
        .expect("log_chunk succeeds");
    assert!(first.is_running);
    fx.registry
        .submit(id.as_str(), "go")
        .await
        .expect("submit succeeds");
    fx.done(id).await;
    let second = fx
        .registry
        .log_chunk(id.as_str(), first.next_byte, 1 << 20)
        .expect("log_chunk succeeds");
    let joined = format!("{}{}", first.output, second.output);
    assert_eq!(joined, format!("token {GHP_MASKED} ready\n"));
    assert_eq!(fx.log(id).output, format!("token {GHP_MASKED} ready"));
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn b31_a_plugin_is_never_called_with_empty_text() {
    let fx = Fixture::with_plugins(|p| {
        p.lib("leak", LEAK);
    })
    .await;
    // A job that prints nothing: every window of it is empty.
    let quiet = fx.run_as("read -r _", "shared", "owner-a", false).await;
    let id = &quiet.session_id;
    assert_eq!(
        fx.poll(id).output_preview,
        "",
        "the plugin ran on empty text"
    );
    assert_eq!(fx.log(id).output, "", "the plugin ran on empty text");
    let killed = fx.kill(id).await;
    assert_eq!(killed.status, KillStatus::Killed, "{killed:?}");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn b31_concurrent_routes_each_see_their_own_sessions_owner() {
    let fx = Fixture::with_plugins(|p| {
        p.lib("leak", LEAK);
    })
    .await;
    let a = fx
        .run_as("echo from-a; read -r _", "shared", "owner-a", false)
        .await;
    let b = fx
        .run_as("echo from-b; read -r _", "shared", "owner-b", false)
        .await;
    // Polls read the session's tail, which takes each write just after the log
    // file does: wait for what they read, not for the file.
    fx.until_polled(&a.session_id, "from-a").await;
    fx.until_polled(&b.session_id, "from-b").await;
    // Many callers at once through the one hook worker: each answer is its owner's.
    let mut calls = tokio::task::JoinSet::new();
    for n in 0..16 {
        let registry = fx.registry.clone();
        let (id, want) = if n % 2 == 0 {
            (a.session_id.clone(), "from-a")
        } else {
            (b.session_id.clone(), "from-b")
        };
        calls.spawn(async move {
            let out = registry
                .poll(id.as_str())
                .expect("poll succeeds")
                .output_preview;
            (want, out)
        });
    }
    while let Some(done) = calls.join_next().await {
        let (want, out) = done.expect("poll task does not panic");
        let owner = if want == "from-a" {
            "owner-a"
        } else {
            "owner-b"
        };
        assert!(out.starts_with(want), "{out:?}");
        check_leak("poll", &out, owner);
    }
    for id in [&a.session_id, &b.session_id] {
        let killed = fx.kill(id).await;
        assert_eq!(killed.status, KillStatus::Killed, "{killed:?}");
    }
    fx.assert_groups_gone().await;
}
