//! Requests to a shim whose follower stopped reading it: each fails at once with
//! "already finished", whether it was waiting when the follow ended or was sent
//! after (a resize racing a job that ended at once used to wait out its deadline).

use std::time::Duration;

use super::{FINISHED, Framing, Link, ToShim};

/// Far beyond the test's own deadline: an answer inside that deadline came from
/// the closed mark, not from the request's timer.
const REQUEST_DEADLINE: Duration = Duration::from_secs(3600);
const TEST_DEADLINE: Duration = Duration::from_secs(30);

fn resize(id: u64) -> (ToShim, Vec<u8>) {
    (
        ToShim::Resize {
            id,
            rows: 24,
            cols: 80,
        },
        Vec::new(),
    )
}

#[tokio::test]
async fn b28_shim_a_request_sent_after_the_follow_ended_fails_at_once() {
    let (ours, shim_end) = tokio::net::UnixStream::pair().expect("socket pair");
    let (_read, write) = ours.into_split();
    let link = Link::start(write, Framing::Lengths);
    link.fail_pending();
    // The shim's end is still open and takes the bytes, so only the closed mark can
    // answer this request.
    let answer = tokio::time::timeout(TEST_DEADLINE, link.request(resize, REQUEST_DEADLINE))
        .await
        .expect("the request was answered long before its own deadline");
    assert_eq!(answer, Err(FINISHED.to_owned()));
    drop(shim_end);
}

#[tokio::test]
async fn b28_shim_a_request_waiting_when_the_follow_ends_fails_at_once() {
    let (ours, shim_end) = tokio::net::UnixStream::pair().expect("socket pair");
    let (_read, write) = ours.into_split();
    let link = Link::start(write, Framing::Lengths);
    let asking = tokio::spawn({
        let link = std::sync::Arc::clone(&link);
        async move { link.request(resize, REQUEST_DEADLINE).await }
    });
    let until = tokio::time::Instant::now() + TEST_DEADLINE;
    while link.pending_map().waiting.is_empty() {
        assert!(
            tokio::time::Instant::now() < until,
            "the request never became pending"
        );
        tokio::task::yield_now().await;
    }
    link.fail_pending();
    let answer = tokio::time::timeout(TEST_DEADLINE, asking)
        .await
        .expect("the request was answered long before its own deadline")
        .expect("the asking task ran to its end");
    assert_eq!(answer, Err(FINISHED.to_owned()));
    drop(shim_end);
}
