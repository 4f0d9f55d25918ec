//! Spawn request keys: a key taken once answers every retry with the first
//! answer, a retry during the first waits for it, a cancelled spawn frees its key,
//! malformed keys are refused and the map stays bounded.

use std::time::Instant;

use serde_json::json;

use super::{Claim, Entry, MAX_KEYS, SpawnKeys};

fn started(claim: Claim<'_>) -> super::Started<'_> {
    match claim {
        Claim::Start(started) => started,
        Claim::Answered(answer) => panic!("expected to start, got the answer {answer:?}"),
    }
}

fn answered(claim: Claim<'_>) -> serde_json::Value {
    match claim {
        Claim::Answered(Ok(value)) => value,
        Claim::Answered(Err(err)) => panic!("expected an answer, got the error {err:?}"),
        Claim::Start(_) => panic!("expected the first spawn's answer, got a second start"),
    }
}

#[tokio::test]
async fn a_key_sent_again_gets_the_first_answer_and_starts_nothing() {
    let keys = SpawnKeys::default();
    let first = started(keys.claim("k-1").await.expect("a good key"));
    first.finish(&Ok(json!({"session_id": "proc_000000000001"})));
    let again = answered(keys.claim("k-1").await.expect("a good key"));
    assert_eq!(again["session_id"], "proc_000000000001");
    // Another key is another spawn.
    let other = keys.claim("k-2").await.expect("a good key");
    assert!(matches!(other, Claim::Start(_)));
}

#[tokio::test]
async fn a_refused_spawn_is_refused_again_under_its_key() {
    let keys = SpawnKeys::default();
    let first = started(keys.claim("k").await.expect("a good key"));
    let refusal = crate::protocol::RpcError::new(-32010, "blocked by the guard");
    first.finish(&Err(refusal));
    match keys.claim("k").await.expect("a good key") {
        Claim::Answered(Err(err)) => assert_eq!(err.message, "blocked by the guard"),
        other => panic!("expected the refusal again, got {other:?}"),
    }
}

#[tokio::test]
async fn a_retry_while_the_first_is_starting_waits_for_its_answer() {
    let keys = std::sync::Arc::new(SpawnKeys::default());
    let first = started(keys.claim("k").await.expect("a good key"));
    let retry = {
        let keys = std::sync::Arc::clone(&keys);
        tokio::spawn(async move { answered(keys.claim("k").await.expect("a good key")) })
    };
    // The retry is parked on the key until the first finishes.
    tokio::task::yield_now().await;
    assert!(
        !retry.is_finished(),
        "the retry answered before the first spawn ended"
    );
    first.finish(&Ok(json!({"session_id": "proc_0000000000aa"})));
    let answer = retry.await.expect("the retry task");
    assert_eq!(answer["session_id"], "proc_0000000000aa");
}

#[tokio::test]
async fn a_cancelled_spawn_frees_its_key() {
    let keys = SpawnKeys::default();
    drop(started(keys.claim("k").await.expect("a good key")));
    let again = keys.claim("k").await.expect("a good key");
    assert!(matches!(again, Claim::Start(_)), "{again:?}");
}

#[tokio::test]
async fn malformed_keys_are_refused_naming_the_rule() {
    let keys = SpawnKeys::default();
    let long = "a".repeat(65);
    for bad in ["", "a b", "key/1", "ключ", long.as_str()] {
        let err = keys.claim(bad).await.expect_err("a malformed key");
        assert_eq!(err.code, crate::protocol::INVALID_PARAMS, "{bad:?}");
        assert!(err.message.contains("request_key"), "{}", err.message);
    }
    assert!(keys.claim(&"a".repeat(64)).await.is_ok());
}

#[tokio::test]
async fn the_map_of_keys_stays_bounded() {
    let keys = SpawnKeys::default();
    {
        let mut map = keys.map();
        for i in 0..MAX_KEYS {
            map.insert(
                format!("old-{i}"),
                Entry::Done {
                    answer: Ok(json!(i)),
                    at: Instant::now(),
                },
            );
        }
    }
    started(keys.claim("new").await.expect("a good key")).finish(&Ok(json!("new")));
    assert!(keys.map().len() <= MAX_KEYS);
    assert_eq!(
        answered(keys.claim("new").await.expect("a good key")),
        "new"
    );
}
