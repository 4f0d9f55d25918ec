//! [`attach_live`]: a daemon restored right after the last one died may find a
//! supervisor that has not bound its socket yet (it binds it only once the dead
//! daemon's connection closed, `Spec::attach_here`). The daemon waits for the socket
//! while the supervisor lives; for a supervisor that is gone it does not wait.

use std::sync::atomic::{AtomicUsize, Ordering};

use herd_persistence::ShimDir;
use tokio::io::AsyncWriteExt;

use super::{AttachError, attach_live};

/// The hello line of a shim (protocol 1: every daemon of this build attaches to it).
const HELLO: &str = "{\"op\":\"hello\",\"protocol\":1,\"shim_pid\":4242,\"pid\":4243,\"pgid\":4243,\"progress\":{\"log_bytes\":0,\"total_ingested\":0,\"bytes_not_kept\":0}}\n";

#[tokio::test]
async fn b28_a_restored_daemon_waits_for_a_live_supervisor_that_binds_its_socket_late() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = ShimDir::at(tmp.path().to_path_buf());
    let asked = AtomicUsize::new(0);
    // The first liveness check finds the supervisor alive and, as a supervisor woken
    // by its dead daemon's hang-up does, it binds its socket right then: only a
    // second try can reach it.
    let alive = || {
        if asked.fetch_add(1, Ordering::SeqCst) == 0 {
            let listener =
                tokio::net::UnixListener::bind(dir.socket_path()).expect("the late socket");
            drop(tokio::spawn(async move {
                let (mut stream, _) = listener.accept().await.expect("the daemon connects");
                stream.write_all(HELLO.as_bytes()).await.expect("hello");
                // Held open until the daemon's side is dropped.
                let mut rest = Vec::new();
                let _ = tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut rest).await;
            }));
        }
        true
    };
    let attached = attach_live(&dir, alive)
        .await
        .expect("the supervisor is attached once its socket is bound");
    assert_eq!(attached.hello.pid, 4243);
    assert!(
        asked.load(Ordering::SeqCst) >= 1,
        "the missing socket made the daemon ask whether the supervisor lives"
    );
}

#[tokio::test]
async fn b28_a_supervisor_that_is_gone_is_not_waited_for() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = ShimDir::at(tmp.path().to_path_buf());
    let asked = AtomicUsize::new(0);
    let result = attach_live(&dir, || {
        asked.fetch_add(1, Ordering::SeqCst);
        false
    })
    .await;
    assert!(
        matches!(result, Err(AttachError::Unreachable(_))),
        "a dead supervisor without a socket is unreachable: {result:?}"
    );
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "one look at the supervisor, no second try"
    );
}
