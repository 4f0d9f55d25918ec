//! B30 through the registry: the example plugin, loaded by the real loader into the
//! registry's pipeline, tidies the output of a real session on every route (poll, log,
//! log chunk, wait, list preview, completion event), running and exited.

use std::time::Duration;

use crate::support::{EXAMPLE, Fixture, completion_of, completion_output};

/// Colour escapes, a carriage-return progress bar, three repeated lines, then a
/// marker; the session then blocks on stdin so the running routes can be asked.
const NOISY: &str = r"printf '\033[32mfetching\033[0m\n 10%%\r 60%%\r100%%\nwarn: peer dep\nwarn: peer dep\nwarn: peer dep\ndone\n'; read -r _ || true";

/// What the example plugin makes of that output (give or take the final newline).
const TIDY: &str = "fetching\n100%\nwarn: peer dep [x3]\ndone";

fn check(route: &str, out: &str) {
    assert!(
        !out.contains('\x1b'),
        "{route}: escape byte left in {out:?}"
    );
    assert!(
        !out.contains('\r'),
        "{route}: carriage return left in {out:?}"
    );
    assert!(
        !out.contains("60%"),
        "{route}: progress bar not collapsed in {out:?}"
    );
    assert_eq!(
        out.matches("warn: peer dep").count(),
        1,
        "{route}: repeats not folded in {out:?}"
    );
    assert_eq!(out.trim_end_matches('\n'), TIDY, "{route}");
}

#[tokio::test(flavor = "multi_thread")]
async fn b30_example_plugin_tidies_every_registry_route() {
    let fx = Fixture::with_plugins(|p| {
        p.lib("tidy-terminal", EXAMPLE);
    })
    .await;
    fx.assert_loaded(&["tidy-terminal"]);
    let mut events = fx.registry.subscribe();
    let info = fx.run(NOISY).await;
    let id = &info.session_id;
    fx.until_logged(id, "done").await;

    // Running: poll, log, log chunk, list preview.
    check("poll (running)", &fx.poll(id).output_preview);
    check("log (running)", &fx.log(id).output);
    check("log_chunk (running)", &fx.log_chunk(id));
    check("list (running)", &fx.row(id).output_preview);

    let answer = fx
        .registry
        .close_stdin(id.as_str())
        .await
        .expect("close_stdin succeeds");
    assert_eq!(answer.status, herd_core::StdinStatus::Ok, "{answer:?}");

    let waited = fx.done(id).await;
    assert_eq!(waited.exit_code, Some(0), "{waited:?}");
    check("wait", &waited.output);
    let event = completion_of(&mut events, id, Duration::from_secs(10)).await;
    check("completion", completion_output(&event).0);
    check("poll (exited)", &fx.poll(id).output_preview);
    check("log (exited)", &fx.log(id).output);
    check("list (exited)", &fx.row(id).output_preview);

    // The log file itself keeps the raw bytes: only what leaves herd is transformed.
    let raw = std::fs::read(fx.home().session_log_path(id.as_str())).expect("log file exists");
    assert!(raw.contains(&0x1b), "the log file keeps the raw output");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn b30_example_plugin_leaves_plain_output_alone() {
    let fx = Fixture::with_plugins(|p| {
        p.lib("tidy-terminal", EXAMPLE);
    })
    .await;
    let mut events = fx.registry.subscribe();
    let info = fx.run("printf 'one\\ntwo\\n'").await;
    let id = &info.session_id;
    let waited = fx.done(id).await;
    assert_eq!(waited.output.trim_end(), "one\ntwo");
    let event = completion_of(&mut events, id, Duration::from_secs(10)).await;
    assert_eq!(completion_output(&event).0.trim_end(), "one\ntwo");
    assert_eq!(fx.log(id).output, "one\ntwo");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn b30_example_plugin_tidies_pty_output() {
    let fx = Fixture::with_plugins(|p| {
        p.lib("tidy-terminal", EXAMPLE);
    })
    .await;
    let mut events = fx.registry.subscribe();
    let info = fx
        .registry
        .spawn(herd_core::SpawnRequest {
            command: NOISY.to_owned(),
            task_id: "t".to_owned(),
            mode: herd_core::Mode::Pty {
                rows: 30,
                cols: 120,
            },
            ..herd_core::SpawnRequest::default()
        })
        .await
        .expect("pty spawn succeeds");
    assert_eq!(info.pty_note, None, "a PTY was opened: {info:?}");
    let id = &info.session_id;
    fx.until_logged(id, "done").await;
    check("poll (pty)", &fx.poll(id).output_preview);
    check("log (pty)", &fx.log(id).output);
    fx.registry
        .submit(id.as_str(), "")
        .await
        .expect("submit succeeds");
    let waited = fx.done(id).await;
    check("wait (pty)", &waited.output);
    let event = completion_of(&mut events, id, Duration::from_secs(10)).await;
    check("completion (pty)", completion_output(&event).0);
    check("list (pty)", &fx.row(id).output_preview);
}

/// The control for the tests above: without the plugin the registry only strips the
/// escapes (it does that before any hook runs), so the tidying is the plugin's work.
#[tokio::test(flavor = "multi_thread")]
async fn b30_without_plugin_progress_and_repeats_stay() {
    let fx = Fixture::bare().await;
    let info = fx.run(NOISY).await;
    let id = &info.session_id;
    fx.until_logged(id, "done").await;
    let preview = fx.poll(id).output_preview;
    assert!(!preview.contains('\x1b'), "{preview:?}");
    assert!(preview.contains("60%"), "{preview:?}");
    assert_eq!(preview.matches("warn: peer dep").count(), 3, "{preview:?}");
    fx.registry
        .close_stdin(id.as_str())
        .await
        .expect("close_stdin succeeds");
    fx.done(id).await;
    fx.assert_groups_gone().await;
}
