//! stdin: write, submit and close for pipe sessions (B39).

use herd_core::StdinStatus;

use crate::support::Fixture;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b39_submit_and_close_reach_a_pipe_session() {
    let fx = Fixture::new();
    let info = fx
        .run("read -r line; echo \"got:$line\"; cat; echo eof")
        .await;
    let id = info.session_id.as_str();
    let answer = fx.registry.submit(id, "hello").await.unwrap();
    assert_eq!(answer.status, StdinStatus::Ok);
    assert_eq!(answer.bytes_written, Some(6));
    let raw = fx.registry.write(id, b"raw\n").await.unwrap();
    assert_eq!(raw.status, StdinStatus::Ok);
    let closed = fx.registry.close_stdin(id).await.unwrap();
    assert_eq!(closed.status, StdinStatus::Ok);
    let done = fx.done(&info.session_id).await;
    assert_eq!(done.output, "got:hello\nraw\neof\n");
    let late = fx.registry.write(id, b"x").await.unwrap();
    assert_eq!(late.status, StdinStatus::AlreadyExited);
    fx.assert_groups_gone().await;
}
