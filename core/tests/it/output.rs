//! Output: completeness, bounded tail, UTF-8, shell noise, log cap (B5, B6, B8).

use std::time::Duration;

use herd_core::{RegistryConfig, SpawnRequest};
use sha2::{Digest, Sha256};

use crate::support::{Fixture, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b5_200_mb_arrive_intact_with_a_bounded_tail() {
    let fx = Fixture::new();
    const LINE: &[u8] = b"herd-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTUVWXYZ\n";
    const TOTAL: usize = 200_000_000;
    let info = fx
        .run(&format!(
            "yes '{}' | head -c {TOTAL}",
            std::str::from_utf8(&LINE[..LINE.len() - 1]).unwrap()
        ))
        .await;
    fx.done(&info.session_id).await;
    let mut expected = Sha256::new();
    let mut left = TOTAL;
    while left > 0 {
        let n = left.min(LINE.len());
        expected.update(&LINE[..n]);
        left -= n;
    }
    let log = std::fs::read(fx.home().session_log_path(info.session_id.as_str())).unwrap();
    assert_eq!(log.len(), TOTAL);
    assert_eq!(
        Sha256::digest(&log),
        expected.finalize(),
        "log hash equals what the child wrote"
    );
    let poll = fx.registry.poll(info.session_id.as_str()).unwrap();
    assert_eq!(poll.total_ingested, TOTAL as u64);
    assert!(poll.output_cut);
    let page = fx
        .registry
        .log(info.session_id.as_str(), Some(0), Some(usize::MAX))
        .unwrap();
    // Log pages count every line of the log file, and carry at most 200,000 bytes.
    assert_eq!(page.total_lines, TOTAL.div_ceil(LINE.len()));
    assert_eq!(page.offset, 0);
    assert!(page.output.len() <= 200_000, "{}", page.output.len());
    assert!(page.output.starts_with("herd-0123"));
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b5_utf8_char_split_across_reads_is_held_then_completed() {
    let fx = Fixture::new();
    // The child writes the first two bytes of "€", then waits for a line on stdin.
    let info = fx
        .run(r"printf 'a\342\202'; read -r _; printf '\254b\n'")
        .await;
    let id = info.session_id.as_str();
    wait_until(Duration::from_secs(10), "3 bytes ingested", || {
        fx.registry.poll(id).unwrap().total_ingested == 3
    })
    .await;
    let preview = fx.registry.poll(id).unwrap().output_preview;
    assert_eq!(preview, "a", "the incomplete char is held, not replaced");
    fx.registry.submit(id, "go").await.unwrap();
    let answer = fx.done(&info.session_id).await;
    assert_eq!(answer.output, "a€b\n");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b5_invalid_bytes_become_replacement_chars_and_the_log_keeps_them() {
    let fx = Fixture::new();
    let info = fx.run(r"printf 'x\377y\n'").await;
    let answer = fx.done(&info.session_id).await;
    assert_eq!(answer.output, "x\u{fffd}y\n");
    let raw = std::fs::read(fx.home().session_log_path(info.session_id.as_str())).unwrap();
    assert_eq!(raw, b"x\xffy\n");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b6_login_interactive_bash_yields_exactly_hi() {
    let fx = Fixture::new();
    let info = fx.run("bash -lic 'echo hi'").await;
    let answer = fx.done(&info.session_id).await;
    assert_eq!(
        answer.output.trim(),
        "hi",
        "full output: {:?}",
        answer.output
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b5_log_cap_stops_the_log_and_counts_what_was_not_kept() {
    let fx = Fixture::with(|c: &mut RegistryConfig| c.log_cap_bytes = 1 << 20);
    let info = fx.run("head -c 20000000 /dev/zero").await;
    fx.done(&info.session_id).await;
    let log_len = std::fs::metadata(fx.home().session_log_path(info.session_id.as_str()))
        .unwrap()
        .len();
    assert_eq!(log_len, 1 << 20);
    let poll = fx.registry.poll(info.session_id.as_str()).unwrap();
    assert_eq!(poll.total_ingested, 20_000_000);
    assert_eq!(poll.bytes_not_kept, 20_000_000 - (1 << 20));
    let json = serde_json::to_value(&poll).unwrap();
    assert_eq!(json["bytes_not_kept"], 20_000_000 - (1 << 20));
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b8_completion_output_is_sized_and_says_it_was_cut() {
    let fx = Fixture::new();
    let mut events = fx.registry.subscribe();
    let info = fx
        .spawn(SpawnRequest {
            command: "seq 1 5000".to_owned(),
            completion_output_chars: Some(100),
            ..SpawnRequest::default()
        })
        .await;
    let event = crate::support::next_completion(&mut events, Duration::from_secs(30)).await;
    let json = serde_json::to_value(&event).unwrap();
    assert_eq!(json["type"], "completion");
    assert_eq!(json["output_cut"], true);
    let output = json["output"].as_str().unwrap();
    assert_eq!(output.chars().count(), 100);
    assert!(output.ends_with("4999\n5000\n"), "{output:?}");
    let text = herd_core::render_events(&[event]);
    assert!(
        text.contains(
            fx.home()
                .session_log_path(info.session_id.as_str())
                .to_str()
                .unwrap()
        ),
        "{text}"
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_chunk_reads_the_file_without_splitting_characters() {
    let fx = Fixture::new();
    let info = fx.run("printf 'ab€cd'").await;
    fx.done(&info.session_id).await;
    let id = info.session_id.as_str();
    let first = fx.registry.log_chunk(id, 0, 3).unwrap();
    assert_eq!(
        (first.output.as_str(), first.next_byte, first.is_running),
        ("ab", 2, false)
    );
    let second = fx.registry.log_chunk(id, first.next_byte, 100).unwrap();
    assert_eq!((second.output.as_str(), second.next_byte), ("€cd", 7));
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b39_log_pages_by_lines() {
    let fx = Fixture::new();
    let info = fx.run("seq 1 500").await;
    fx.done(&info.session_id).await;
    let id = info.session_id.as_str();
    let last = fx.registry.log(id, None, None).unwrap();
    assert_eq!(last.total_lines, 500);
    assert_eq!(last.offset, 300);
    assert_eq!(last.showing, "200 lines");
    assert!(last.output.starts_with("301\n") && last.output.ends_with("\n500"));
    let head = fx.registry.log(id, Some(0), Some(3)).unwrap();
    assert_eq!(head.output, "1\n2\n3");
    fx.assert_groups_gone().await;
}
