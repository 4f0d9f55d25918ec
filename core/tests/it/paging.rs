//! Log paging over the whole output in the session's log file, not only the in-memory
//! tail (B39), through the output pipeline (B30), from memory and from receipts (B38).

use std::time::Duration;

use herd_core::{ListFilter, Mode, RegistryConfig, SessionStatus, SpawnRequest};

use crate::support::{Fixture, wait_until};

const GHP: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
const GHP_MASKED: &str = "ghp_ab...6789";

/// `first..=last` as the lines a page shows.
fn numbers(first: usize, last: usize) -> String {
    (first..=last)
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b39_log_pages_every_line_of_the_output_not_only_the_tail() {
    let fx = Fixture::new();
    // 588,895 bytes: far beyond the 200,000-byte in-memory tail.
    let info = fx.run(&format!("echo token {GHP}; seq 2 100000")).await;
    fx.done(&info.session_id).await;
    let id = info.session_id.as_str();

    let last = fx.registry.log(id, None, None).unwrap();
    assert_eq!(last.total_lines, 100_000);
    assert_eq!((last.offset, last.showing.as_str()), (99_800, "200 lines"));
    assert_eq!(last.output, numbers(99_801, 100_000));
    assert_eq!(last.note, None);

    let head = fx.registry.log(id, Some(0), Some(5)).unwrap();
    assert_eq!(head.output, format!("token {GHP_MASKED}\n2\n3\n4\n5"));
    assert!(!head.output.contains(GHP), "the secret is masked");
    assert_eq!((head.offset, head.total_lines), (0, 100_000));

    let middle = fx.registry.log(id, Some(50_000), Some(3)).unwrap();
    assert_eq!(middle.output, numbers(50_001, 50_003));
    assert_eq!(middle.offset, 50_000);

    let past = fx.registry.log(id, Some(250_000), Some(3)).unwrap();
    assert_eq!(past.output, "");
    assert_eq!(
        (past.total_lines, past.offset, past.showing.as_str()),
        (100_000, 100_000, "0 lines")
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b39_a_running_session_pages_its_log_while_it_waits() {
    let fx = Fixture::new();
    let info = fx
        .run("seq 1 100000; echo ready; read -r line; echo \"got:$line\"")
        .await;
    let id = info.session_id.as_str();
    wait_until(Duration::from_secs(10), "the ready line", || {
        fx.registry
            .poll(id)
            .unwrap()
            .output_preview
            .ends_with("ready\n")
    })
    .await;
    let head = fx.registry.log(id, Some(0), Some(2)).unwrap();
    assert_eq!(head.status, SessionStatus::Running);
    assert_eq!((head.output.as_str(), head.total_lines), ("1\n2", 100_001));
    let last = fx.registry.log(id, None, Some(2)).unwrap();
    assert_eq!(
        (last.output.as_str(), last.offset),
        ("100000\nready", 99_999)
    );

    fx.registry.submit(id, "go").await.unwrap();
    fx.done(&info.session_id).await;
    let after = fx.registry.log(id, Some(99_999), None).unwrap();
    assert_eq!(after.output, "100000\nready\ngot:go");
    assert_eq!(after.total_lines, 100_002);
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b39_a_pruned_session_pages_its_log_file_with_secrets_masked() {
    let fx = Fixture::with(|c: &mut RegistryConfig| c.finished_cap = 1);
    let first = fx.run(&format!("echo token {GHP}; seq 2 100000")).await;
    fx.done(&first.session_id).await;
    // A finished session stays in memory until its receipt is written; once it is,
    // the next finishes prune it (cap 1).
    fx.registry
        .sync_durable()
        .await
        .expect("the home is writable");
    for _ in 0..2 {
        let info = fx.run("true").await;
        fx.done(&info.session_id).await;
    }
    // Memory keeps one finished session (cap 1): the last `true`, not the first.
    assert_eq!(
        fx.registry.counts().1,
        1,
        "the first session was pruned from memory"
    );
    // `list` still shows it: finished sessions come from the store too (B38).
    let listed = fx.registry.list(&ListFilter {
        include_finished: true,
        ..ListFilter::default()
    });
    assert_eq!(
        listed
            .iter()
            .filter(|r| r.session_id == first.session_id)
            .count(),
        1,
        "the first session is listed once, from the store"
    );
    let id = first.session_id.as_str();

    let head = fx.registry.log(id, Some(0), Some(2)).unwrap();
    assert_eq!(head.output, format!("token {GHP_MASKED}\n2"));
    assert_eq!(head.total_lines, 100_000);
    assert!(
        head.note.as_deref().is_some_and(|n| n.contains("log file")),
        "{head:?}"
    );
    let middle = fx.registry.log(id, Some(50_000), Some(3)).unwrap();
    assert_eq!(middle.output, numbers(50_001, 50_003));
    let last = fx.registry.log(id, None, None).unwrap();
    assert_eq!((last.offset, last.total_lines), (99_800, 100_000));
    assert_eq!(last.output, numbers(99_801, 100_000));

    // Without its log file the receipt's tail answers, and the note says so.
    std::fs::remove_file(fx.home().session_log_path(id)).expect("the log file is removable");
    let tail = fx.registry.log(id, None, Some(1)).unwrap();
    assert_eq!(tail.output, "100000");
    assert!(tail.total_lines < 100_000, "{}", tail.total_lines);
    let note = tail.note.unwrap_or_default();
    assert!(
        note.contains("missing") && note.contains("start of the output is not available"),
        "{note}"
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b39_a_5_mb_line_gives_a_bounded_page_that_says_it_was_cut() {
    let fx = Fixture::new();
    let info = fx
        .run("echo before; head -c 5000000 /dev/zero | tr '\\0' x; echo; echo after")
        .await;
    fx.done(&info.session_id).await;
    let id = info.session_id.as_str();
    let marker = "[… line cut to fit the page …]";

    let long = fx.registry.log(id, Some(1), Some(1)).unwrap();
    assert_eq!(long.total_lines, 3);
    assert!(
        long.output.len() <= 200_000 + marker.len(),
        "{}",
        long.output.len()
    );
    assert!(long.output.len() > 100_000, "{}", long.output.len());
    assert!(long.output.starts_with("xxx") && long.output.ends_with(marker));
    assert!(
        long.note.as_deref().is_some_and(|n| n.contains("cut")),
        "{:?}",
        long.note
    );

    // Pages of lines around it leave the long line out rather than overflow.
    let last = fx.registry.log(id, None, None).unwrap();
    assert_eq!((last.output.as_str(), last.offset), ("after", 2));
    assert!(
        last.note
            .as_deref()
            .is_some_and(|n| n.contains("fewer lines")),
        "{:?}",
        last.note
    );
    let first = fx.registry.log(id, Some(0), None).unwrap();
    assert_eq!(
        (first.output.as_str(), first.showing.as_str()),
        ("before", "1 lines")
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b39_a_log_stopped_at_its_cap_pages_the_tail_and_says_so() {
    let fx = Fixture::with(|c: &mut RegistryConfig| c.log_cap_bytes = 100_000);
    let info = fx.run("seq 1 100000").await;
    fx.done(&info.session_id).await;
    let id = info.session_id.as_str();
    let last = fx.registry.log(id, None, Some(2)).unwrap();
    assert_eq!(last.output, "99999\n100000");
    assert!(last.total_lines < 100_000, "{}", last.total_lines);
    let note = last.note.unwrap_or_default();
    assert!(
        note.contains("cap of 100000 bytes") && note.contains("in-memory tail"),
        "{note}"
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b39_pty_log_pages_are_ansi_stripped_like_the_tail() {
    let fx = Fixture::new();
    let info = fx
        .spawn(SpawnRequest {
            command: r"printf '\033[31mred\033[0m\n'; seq 1 3".to_owned(),
            mode: Mode::pty(),
            ..SpawnRequest::default()
        })
        .await;
    assert_eq!(info.pty_note, None, "a PTY was opened: {info:?}");
    fx.done(&info.session_id).await;
    let id = info.session_id.as_str();
    let raw = std::fs::read(fx.home().session_log_path(id)).expect("the log file reads");
    assert!(raw.starts_with(b"\x1b[31mred"), "the log keeps raw bytes");
    let page = fx.registry.log(id, Some(0), None).unwrap();
    assert_eq!(
        (page.output.as_str(), page.total_lines),
        ("red\n1\n2\n3", 4)
    );
    fx.assert_groups_gone().await;
}
