//! Tests of the in-memory stores: each keeps its trait's contract (the ledger
//! delivers once, results go by time and answer expired, keys and links are kept).

use std::time::Duration;

use super::*;

fn receipt(id: &str, name: &str, owner: &str, finished_at: f64) -> Stored {
    let mut receipt = ResultReceipt::exited(id, "make", 0, finished_at);
    receipt.name = Some(name.to_owned());
    receipt.owner_task_id = owner.to_owned();
    Stored {
        receipt,
        spawn: None,
    }
}

#[test]
fn b29_the_memory_ledger_delivers_each_completion_once() {
    let ledger = MemoryLedger::new();
    let record = |id: &str, created_at: f64| CompletionRecord {
        completion_id: id.to_owned(),
        session_id: id.to_owned(),
        owner_task_id: "a".to_owned(),
        task_id: String::new(),
        session_key: String::new(),
        event: serde_json::json!({"id": id}),
        created_at,
    };
    assert!(ledger.commit(&record("proc_1", unix_now())).unwrap());
    assert!(!ledger.commit(&record("proc_1", unix_now())).unwrap());
    assert!(ledger.commit(&record("proc_2", 1.0)).unwrap());
    assert_eq!(ledger.undelivered().unwrap().len(), 2);
    assert_eq!(
        ledger.mark_delivered_many(Some("b"), &["proc_1"]).unwrap(),
        0
    );
    assert_eq!(
        ledger
            .mark_delivered_many(None, &["proc_1", "proc_9"])
            .unwrap(),
        1
    );
    assert_eq!(ledger.is_delivered("proc_1").unwrap(), Some(true));
    assert_eq!(ledger.is_delivered("proc_9").unwrap(), None);
    // A delivered completion is not replaced; an old unclaimed one expires.
    assert!(
        !ledger
            .commit_replacing(&record("proc_1", unix_now()))
            .unwrap()
    );
    assert_eq!(ledger.expire_unclaimed(Duration::from_secs(60)).unwrap(), 1);
    assert!(ledger.undelivered().unwrap().is_empty());
}

#[test]
fn b38_the_memory_result_store_keeps_by_time_and_answers_expired() {
    let store = MemoryResultStore::new().with_ttl(Duration::from_secs(3600));
    let now = unix_now();
    store
        .store_all(&[
            receipt("proc_aa1", "old", "a", now - 7200.0),
            receipt("proc_aa2", "new", "b", now),
        ])
        .unwrap();
    assert_eq!(store.ids_with_prefix("proc_aa").unwrap().len(), 2);
    assert_eq!(store.newest_named("new").unwrap().unwrap().id, "proc_aa2");
    let listed = store.list(Some("b"), None, 10).unwrap();
    assert_eq!(listed.receipts.len(), 1);
    let report = store.prune_at_most(10).unwrap();
    assert_eq!(report.evicted, vec!["proc_aa1".to_owned()]);
    assert!(store.load("proc_aa1").unwrap().is_none());
    assert_eq!(store.tombstone("old").unwrap().unwrap().id, "proc_aa1");
    assert_eq!(store.finished_ids(None, now).unwrap(), vec!["proc_aa2"]);
    assert_eq!(store.forget_all(&["proc_aa2".to_owned()]).unwrap().len(), 1);
    assert!(store.tombstone("proc_aa2").unwrap().is_none());
    assert!(store.load("../x").is_err());
}

#[test]
fn the_memory_stores_keep_request_keys_and_host_links() {
    let keys = MemoryResultStore::new();
    keys.put_request_key("k", "answer", Duration::from_secs(60))
        .unwrap();
    assert_eq!(
        keys.request_key("k", Duration::from_secs(60)).unwrap(),
        Some("answer".to_owned())
    );
    let links = MemoryHostLinks::new();
    links.save("far-1", b"{}").unwrap();
    assert_eq!(links.load("far-1").unwrap(), Some(b"{}".to_vec()));
    assert!(links.load("../x").is_err());
}
