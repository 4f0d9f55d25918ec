//! A shim of the previous protocol (1) still attaches fully to this daemon: shims
//! outlive the daemon, so a daemon restarted after an upgrade meets shims started by
//! the binary before it.
//!
//! The shim's side below is a recorded byte session, replayed: the bytes a real
//! protocol-1 `herd-shim` (built from commit 48953f5, the last before length-prefixed
//! frames) wrote on its socket for a job `read line; echo got $line` while a daemon
//! sent it hello, `want` from 0 and three bytes of stdin. Building that old binary
//! inside a test is not possible here (a second build of an old commit costs minutes
//! on the CI's two cores), so its side is replayed against the new daemon-side code:
//! `attach`, the `Link` that sends and the `Incoming` that parses.

use std::time::Duration;

use herd_persistence::ShimDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;

use super::{Framing, FromShim, ToShim, attach};

/// What the protocol-1 shim wrote, frame by frame (each a JSON line).
const FROM_SHIM_P1: [&str; 4] = [
    "{\"op\":\"hello\",\"protocol\":1,\"shim_pid\":23959,\"pid\":23960,\"pgid\":23960,\"progress\":{\"log_bytes\":0,\"total_ingested\":0,\"bytes_not_kept\":0}}\n",
    "{\"op\":\"done\",\"id\":1,\"error\":null}\n",
    "{\"op\":\"grew\",\"progress\":{\"log_bytes\":7,\"total_ingested\":7,\"bytes_not_kept\":0}}\n",
    "{\"op\":\"exit\",\"record\":{\"version\":1,\"code\":0,\"signal\":null,\"finished_at_ms\":1796336731029,\"total_ingested\":7,\"bytes_not_kept\":0,\"descendants_alive\":[]},\"progress\":{\"log_bytes\":7,\"total_ingested\":7,\"bytes_not_kept\":0}}\n",
];

/// Reads one line the daemon sent, as the protocol-1 shim's reader did.
async fn read_line(stream: &mut tokio::net::UnixStream, pending: &mut Vec<u8>) -> Vec<u8> {
    loop {
        if let Some(nl) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=nl).collect();
            return line;
        }
        let mut buf = [0u8; 4096];
        let n = stream.read(&mut buf).await.expect("the daemon's bytes");
        assert!(n > 0, "the daemon closed the connection");
        pending.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test]
async fn b28_a_protocol_1_shim_attaches_fully_and_is_spoken_to_in_lines() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = ShimDir::at(tmp.path().to_path_buf());
    let listener = UnixListener::bind(dir.socket_path()).expect("the socket");
    let shim = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("the daemon connects");
        let mut pending = Vec::new();
        // The daemon's hello is a line a protocol-1 shim parses.
        let hello = read_line(&mut stream, &mut pending).await;
        let hello: ToShim = serde_json::from_slice(&hello).expect("a protocol-1 hello");
        assert!(
            matches!(hello, ToShim::Hello { protocol: 2, .. }),
            "{hello:?}"
        );
        stream
            .write_all(FROM_SHIM_P1[0].as_bytes())
            .await
            .expect("hello written");
        // Everything after is lines too: the shim announced no `frames`.
        let want = read_line(&mut stream, &mut pending).await;
        assert_eq!(want, b"{\"op\":\"want\",\"after\":0}\n");
        let stdin = read_line(&mut stream, &mut pending).await;
        assert_eq!(stdin, b"{\"op\":\"stdin\",\"id\":1,\"len\":3}\n");
        while pending.len() < 3 {
            let mut buf = [0u8; 16];
            let n = stream.read(&mut buf).await.expect("the body");
            pending.extend_from_slice(&buf[..n]);
        }
        assert_eq!(&pending[..3], b"hi\n");
        for frame in &FROM_SHIM_P1[1..] {
            stream.write_all(frame.as_bytes()).await.expect("written");
        }
    });
    let attached = attach(&dir)
        .await
        .expect("a protocol-1 shim attaches fully");
    assert_eq!(attached.hello.protocol, 1);
    assert_eq!(attached.hello.framing, Framing::Lines);
    assert_eq!(attached.hello.pid, 23960);
    let (link, mut incoming) = (attached.link, attached.incoming);
    assert!(link.send(
        &ToShim::Want {
            after: 0,
            mark_lag: None
        },
        b""
    ));
    assert!(link.send(&ToShim::Stdin { id: 1, len: 3 }, b"hi\n"));
    let mut seen = Vec::new();
    let deadline = Duration::from_secs(10);
    while let Some(message) = tokio::time::timeout(deadline, incoming.next())
        .await
        .expect("the replay is read in time")
        .expect("readable")
    {
        seen.push(message);
    }
    shim.await
        .expect("the replaying shim saw what a protocol-1 shim reads");
    assert!(
        matches!(seen[0], FromShim::Done { id: 1, error: None }),
        "{seen:?}"
    );
    assert!(matches!(&seen[1], FromShim::Grew { progress, .. } if progress.log_bytes == 7));
    match &seen[2] {
        FromShim::Exit { record, .. } => {
            assert_eq!(record.code, Some(0));
            assert_eq!(record.total_ingested, 7);
        }
        other => panic!("not the exit: {other:?}"),
    }
}
