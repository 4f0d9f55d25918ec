//! PTY sessions: a real terminal, input, and the query responder (B1, B7).

use herd_core::{Mode, ModeName, SpawnRequest};

use crate::support::Fixture;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_pty_session_has_a_terminal_of_the_default_size() {
    let fx = Fixture::new();
    let info = fx
        .spawn(SpawnRequest {
            command: "test -t 1 && echo tty; stty size; echo \"pager=$PAGER\"".to_owned(),
            mode: Mode::pty(),
            ..SpawnRequest::default()
        })
        .await;
    assert_eq!(info.mode, ModeName::Pty);
    assert_eq!(info.pty_note, None);
    let answer = fx.done(&info.session_id).await;
    assert_eq!(answer.output.replace('\r', ""), "tty\n30 120\npager=cat\n");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b39_submit_reaches_a_pty_session() {
    let fx = Fixture::new();
    let info = fx
        .spawn(SpawnRequest {
            command: "stty -echo; echo ready; read -r line; echo \"got:$line\"".to_owned(),
            mode: Mode::pty(),
            ..SpawnRequest::default()
        })
        .await;
    let id = info.session_id.as_str();
    crate::support::wait_until(std::time::Duration::from_secs(10), "the ready line", || {
        fx.registry
            .poll(id)
            .unwrap()
            .output_preview
            .contains("ready")
    })
    .await;
    fx.registry.submit(id, "typed").await.unwrap();
    let answer = fx.done(&info.session_id).await;
    assert_eq!(answer.output.replace('\r', ""), "ready\ngot:typed\n");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b7_cursor_query_is_answered_live_and_stripped() {
    let fx = Fixture::new();
    // The program blocks until its terminal answers the cursor-position query. Echo
    // is off before the query goes out: the reply arrives as terminal input, and with
    // echo still on (`read -s` turns it off only once it starts) the line discipline
    // would echo it back into the output, racing the `read`.
    let info = fx
        .spawn(SpawnRequest {
            command: r#"stty -echo; printf '\033[6n'; IFS= read -r -s -d R reply; echo "reply=${reply#*[}""#
                .to_owned(),
            mode: Mode::pty(),
            ..SpawnRequest::default()
        })
        .await;
    let answer = fx.done(&info.session_id).await;
    let output = answer.output.replace('\r', "");
    let reply = output
        .trim()
        .strip_prefix("reply=")
        .unwrap_or_else(|| panic!("no reply line in {output:?}"));
    let (row, col) = reply
        .split_once(';')
        .unwrap_or_else(|| panic!("reply {reply:?} is not row;col"));
    assert!(
        row.parse::<u16>().is_ok() && col.parse::<u16>().is_ok(),
        "{reply:?}"
    );
    let raw = std::fs::read(fx.home().session_log_path(info.session_id.as_str())).unwrap();
    assert!(
        !raw.windows(4).any(|w| w == b"\x1b[6n"),
        "the query is stripped from the log"
    );
    fx.assert_groups_gone().await;
}
