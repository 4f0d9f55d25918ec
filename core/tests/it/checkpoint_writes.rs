//! What the running store is asked to write while sessions run: a finish deletes its
//! own row and rewrites no running row, so the cost of a stream of short jobs does
//! not grow with the number of sessions running beside them (B38).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use herd_core::KillSource;
use herd_persistence::{
    CheckpointEntry, Error, KillIntent, Loaded, MemoryRunningStore, RunningStore, SessionRecord,
    Writer,
};
use herd_test_support::wait::until;

use crate::support::Fixture;

/// A memory store that counts the running rows each `write_own` rewrites.
#[derive(Debug, Default)]
struct Counting {
    inner: MemoryRunningStore,
    rewrites: Mutex<Vec<usize>>,
}

impl Counting {
    fn rewrites(&self) -> Vec<usize> {
        self.rewrites
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn has_row(&self, id: &str) -> bool {
        self.inner
            .load()
            .expect("the memory store reads")
            .entries
            .iter()
            .any(|e: &CheckpointEntry| e.session.id == id)
    }
}

impl RunningStore for Counting {
    fn load(&self) -> Result<Loaded, Error> {
        self.inner.load()
    }
    fn write_one(&self, writer: &Writer, record: &SessionRecord) -> Result<(), Error> {
        self.inner.write_one(writer, record)
    }
    fn write_own(
        &self,
        writer: &Writer,
        records: &[SessionRecord],
        finished: &[&str],
    ) -> Result<(), Error> {
        self.rewrites
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(records.len());
        self.inner.write_own(writer, records, finished)
    }
    fn remove(&self, session_ids: &[&str]) -> Result<usize, Error> {
        self.inner.remove(session_ids)
    }
    fn record_kill_intent(
        &self,
        session_ids: &[&str],
        intent: &KillIntent,
    ) -> Result<usize, Error> {
        self.inner.record_kill_intent(session_ids, intent)
    }
    fn record_ready(&self, session_id: &str, ready_at: f64) -> Result<bool, Error> {
        self.inner.record_ready(session_id, ready_at)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b38_a_finish_beside_running_sessions_deletes_its_row_and_rewrites_no_running_row() {
    let store = Arc::new(Counting::default());
    let given: Arc<dyn RunningStore> = Arc::clone(&store) as Arc<dyn RunningStore>;
    let fx = Fixture::with(move |c| c.running_store = Some(given));
    for _ in 0..3 {
        fx.run("sleep 30").await;
    }
    let short = fx.run("true").await;
    fx.done(&short.session_id).await;
    // The finish's deferred write (100 ms after it) deletes its row.
    until(Duration::from_secs(10), "a write after the finish", || {
        !store.rewrites().is_empty() && !store.has_row(short.session_id.as_str())
    })
    .await;
    let rewrites = store.rewrites();
    assert!(
        rewrites.iter().all(|&n| n == 0),
        "a finish rewrote running rows: {rewrites:?}"
    );
    fx.registry
        .kill_all("", &[], KillSource::HostShutdown)
        .await;
    fx.registry.shutdown().await;
    fx.assert_groups_gone().await;
}
