//! A registry over in-memory stores: the ledger, the results and the
//! running sessions a host gives in `RegistryConfig` take every write, `state.db` is
//! never made, and a `wait` answer follows the receipt's commit (B27, B29, B38).

use std::sync::Arc;

use herd_core::SpawnRequest;
use herd_persistence::{
    CompletionLedger, MemoryLedger, MemoryResultStore, MemoryRunningStore, ResultStore,
};

use crate::support::Fixture;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b29_b38_a_registry_keeps_completions_and_results_in_the_stores_it_is_given() {
    let ledger = Arc::new(MemoryLedger::new());
    let results = Arc::new(MemoryResultStore::new());
    let (l, r) = (Arc::clone(&ledger), Arc::clone(&results));
    let fx = Fixture::with(move |c| {
        c.running_store = Some(Arc::new(MemoryRunningStore::new()));
        c.ledger = Some(l);
        c.result_store = Some(r);
    });
    let info = fx
        .spawn(SpawnRequest {
            command: "echo kept; exit 3".to_owned(),
            task_id: "t".to_owned(),
            owner_task_id: Some("a".to_owned()),
            notify: true,
            ..SpawnRequest::default()
        })
        .await;
    let waited = fx.done(&info.session_id).await;
    assert_eq!(waited.exit_code, Some(3));
    // The answer came after the receipt's commit: no waiting here.
    let receipt = results
        .load(info.session_id.as_str())
        .expect("the memory store reads")
        .expect("the receipt is stored before the wait answers");
    assert_eq!(receipt.exit_code, Some(3));
    assert!(receipt.output.contains("kept"), "{receipt:?}");
    let undelivered = ledger.undelivered().expect("the memory ledger reads");
    assert_eq!(undelivered.len(), 1, "{undelivered:?}");
    assert_eq!(undelivered[0].session_id, info.session_id.as_str());
    assert!(
        !fx.home().ledger_path().exists(),
        "no state.db is made when every store is given"
    );
    fx.registry.shutdown().await;
}
