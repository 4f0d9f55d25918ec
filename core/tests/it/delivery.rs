//! Acknowledged delivery and adoption into the background (B24, B29).

use herd_core::{Adoption, Event, Registry, RegistryConfig, SpawnRequest};
use herd_persistence::Ledger;

use crate::support::Fixture;

fn notify_job(command: &str, owner: &str) -> SpawnRequest {
    SpawnRequest {
        command: command.to_owned(),
        task_id: "t".to_owned(),
        owner_task_id: Some(owner.to_owned()),
        notify: true,
        ..SpawnRequest::default()
    }
}

fn ids(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e.session_id().map(|id| id.as_str().to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b29_a_drain_that_is_not_acknowledged_is_delivered_again_and_never_twice_at_once() {
    let fx = Fixture::new();
    let mut finished = Vec::new();
    for n in 0..3 {
        let info = fx.spawn(notify_job(&format!("echo job-{n}"), "o")).await;
        fx.done(&info.session_id).await;
        finished.push(info.session_id.as_str().to_owned());
    }
    let lease = fx.registry.take("o");
    let first = ids(lease.events());
    assert_eq!(first.len(), 3, "{first:?}");
    // While the lease is held, a concurrent consumer of the same owner gets nothing.
    assert!(fx.registry.take("o").events().is_empty());
    assert!(fx.registry.drain("o").is_empty());
    // A fourth completion queued meanwhile comes after the returned three.
    let late = fx.spawn(notify_job("echo late", "o")).await;
    fx.done(&late.session_id).await;
    drop(lease);
    let again = fx.registry.take("o");
    let mut expected = first.clone();
    expected.push(late.session_id.as_str().to_owned());
    assert_eq!(
        ids(again.events()),
        expected,
        "returned in order, then the new one"
    );
    // Unacknowledged, the ledger still holds them: a crash now replays them.
    let ledger = Ledger::open(&fx.home())
        .expect("the ledger opens")
        .expect("the ledger exists");
    assert_eq!(ledger.undelivered().expect("the ledger reads").len(), 4);
    let acked = again.acknowledge();
    assert_eq!(acked.len(), 4);
    assert!(ledger.undelivered().expect("the ledger reads").is_empty());
    assert!(fx.registry.take("o").events().is_empty());
    let restarted = Registry::new(fx.home(), RegistryConfig::default()).expect("in a runtime");
    assert!(
        restarted.drain("o").is_empty(),
        "an acknowledged completion came back"
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b29_a_lease_dropped_by_a_crashed_consumer_is_replayed_after_the_restart() {
    let fx = Fixture::new();
    let info = fx.spawn(notify_job("echo once", "o")).await;
    fx.done(&info.session_id).await;
    let lease = fx.registry.take("o");
    assert_eq!(lease.events().len(), 1);
    // The consumer "crashes" with the lease held: this process forgets it without
    // returning it, and a new registry on the same home starts.
    std::mem::forget(lease);
    let restarted = Registry::new(fx.home(), RegistryConfig::default()).expect("in a runtime");
    let replayed = restarted.take("o");
    assert_eq!(
        ids(replayed.events()),
        vec![info.session_id.as_str().to_owned()]
    );
    assert_eq!(replayed.acknowledge().len(), 1);
    assert!(restarted.drain("o").is_empty());
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b24_adopting_a_running_session_queues_exactly_one_completion() {
    let fx = Fixture::new();
    let running = fx
        .spawn(SpawnRequest {
            command: "read -r _; echo adopted".to_owned(),
            task_id: "t".to_owned(),
            owner_task_id: Some("o".to_owned()),
            ..SpawnRequest::default()
        })
        .await;
    let (id, adoption) = fx
        .registry
        .adopt(running.session_id.as_str())
        .expect("the session exists");
    assert_eq!(
        (id.clone(), adoption),
        (running.session_id.clone(), Adoption::Notified)
    );
    fx.registry
        .submit(id.as_str(), "go")
        .await
        .expect("stdin is open");
    fx.done(&id).await;
    let drained = fx.registry.drain("o");
    assert_eq!(ids(&drained), vec![id.as_str().to_owned()]);
    assert!(matches!(drained[0], Event::Completion { .. }));
    // A session that already finished is answered as finished and queues nothing.
    let quick = fx.run("true").await;
    fx.done(&quick.session_id).await;
    let (_, adoption) = fx
        .registry
        .adopt(quick.session_id.as_str())
        .expect("the session exists");
    assert_eq!(adoption, Adoption::Finished);
    assert!(fx.registry.drain("t").is_empty() && fx.registry.drain("o").is_empty());
    assert!(fx.registry.adopt("h-nosuchsession").is_err());
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_folds_the_oldest_and_the_next_drain_says_how_many() {
    let fx = crate::support::Fixture::with(|c| c.queue_cap = 3);
    let mut finished = Vec::new();
    for n in 0..5 {
        let info = fx.spawn(notify_job(&format!("echo job-{n}"), "o")).await;
        fx.done(&info.session_id).await;
        finished.push(info.session_id.as_str().to_owned());
    }
    let drained = fx.registry.drain("o");
    let Some(Event::QueueFolded {
        completions,
        heartbeats,
        watch_events,
        message,
    }) = drained.first()
    else {
        panic!("the drain does not start with the fold: {drained:?}");
    };
    assert_eq!((*completions, *heartbeats, *watch_events), (2, 0, 0));
    assert!(message.contains("2 completions"), "{message}");
    // The newest three are there; the two oldest are not lost: still undelivered in
    // the ledger, and listed as finished.
    assert_eq!(ids(&drained[1..]), finished[2..].to_vec());
    let ledger = Ledger::open(&fx.home())
        .expect("the ledger opens")
        .expect("the ledger exists");
    let pending: Vec<String> = ledger
        .undelivered()
        .expect("the ledger reads")
        .into_iter()
        .map(|r| r.completion_id)
        .collect();
    assert_eq!(pending, finished[..2].to_vec());
    assert!(fx.registry.drain("o").is_empty(), "the fold is told once");
    fx.assert_groups_gone().await;
}

/// A consumer printed a lease's events and its process died before the
/// acknowledgement; the next registry takes the acknowledgement by id, whether the
/// replay already queued them or not, and a lease dropped after its events were
/// acknowledged by id does not queue them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b29_events_acknowledged_by_id_on_the_next_registry_are_never_delivered_again() {
    let fx = Fixture::new();
    let mut done = Vec::new();
    for n in 0..3 {
        let info = fx.spawn(notify_job(&format!("echo job-{n}"), "o")).await;
        fx.done(&info.session_id).await;
        done.push(info.session_id);
    }
    let lease = fx.registry.take("o");
    let event_ids: Vec<String> = lease.events().iter().map(Event::event_id).collect();
    assert_eq!(event_ids.len(), 3);
    assert!(
        event_ids.iter().all(|id| id.starts_with("completion:")),
        "{event_ids:?}"
    );
    std::mem::forget(lease);
    // Another registry on the home (the next daemon): one replays first, one not.
    let replayed_first = Registry::new(fx.home(), RegistryConfig::default()).expect("in a runtime");
    assert_eq!(
        replayed_first.pending("o"),
        0,
        "nothing is replayed before a consume"
    );
    let ack = replayed_first.acknowledge_ids("o", &event_ids[..2]);
    assert!(ack.committed);
    assert_eq!(ack.n_completions, 2);
    assert_eq!(
        ack.n_dequeued, 2,
        "the replay queued them, the acknowledgement took them out"
    );
    let rest = replayed_first.take("o");
    assert_eq!(ids(rest.events()), vec![done[2].as_str().to_owned()]);
    // Acknowledged by id elsewhere while this lease holds it: dropping the lease
    // does not queue it again.
    assert_eq!(
        replayed_first
            .acknowledge_ids("o", &event_ids[2..])
            .n_dequeued,
        0
    );
    drop(rest);
    assert!(replayed_first.take("o").events().is_empty());
    let ledger = Ledger::open(&fx.home()).expect("opens").expect("exists");
    assert!(ledger.undelivered().expect("reads").is_empty());
    let third = Registry::new(fx.home(), RegistryConfig::default()).expect("in a runtime");
    assert!(
        third.drain("o").is_empty(),
        "an acknowledged completion came back"
    );
    // Another owner's ids acknowledge nothing of this one's.
    let info = fx.spawn(notify_job("echo mine", "o")).await;
    fx.done(&info.session_id).await;
    let mine = format!("completion:{}", info.session_id);
    assert!(fx.registry.acknowledge_ids("other", &[mine]).n_dequeued == 0);
    assert_eq!(
        ids(&fx.registry.drain("o")),
        vec![info.session_id.as_str().to_owned()]
    );
    fx.assert_groups_gone().await;
}
