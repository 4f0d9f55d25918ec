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
