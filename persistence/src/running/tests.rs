//! The same contract, checked on both implementations.

use std::path::PathBuf;

use super::*;
use crate::{Home, Mode};

fn record(id: &str, at: f64) -> SessionRecord {
    SessionRecord {
        id: id.to_owned(),
        command: "sleep 1".to_owned(),
        pid: 10,
        pgid: 10,
        start_time: Some(1),
        task_id: "t".to_owned(),
        owner_task_id: "o".to_owned(),
        session_key: String::new(),
        mode: Mode::Pipe,
        notify: false,
        watch_patterns: Vec::new(),
        heartbeat_seconds: 0,
        completion_output_chars: 0,
        persist_on_release: false,
        log_path: PathBuf::from("/h/x.log"),
        cwd: None,
        started_at: at,
        shim: None,
        name: None,
        options: None,
        command_given: None,
    }
}

fn contract(store: &dyn RunningStore) {
    let a = Writer::new(1, Some(1));
    let b = Writer::new(2, Some(2));
    store
        .write_one(&a, &record("proc_000000000002", 2.0))
        .expect("write");
    store
        .write_one(&a, &record("proc_000000000001", 1.0))
        .expect("write");
    let intent = KillIntent {
        source: "kill_all".to_owned(),
        requested_at: 3.0,
    };
    assert_eq!(
        store
            .record_kill_intent(&["proc_000000000001", "proc_00000000dead"], &intent)
            .expect("intent"),
        1
    );
    store
        .write_own(
            &b,
            &[
                record("proc_000000000001", 1.0),
                record("proc_000000000003", 3.0),
            ],
            &["proc_000000000003"],
        )
        .expect("write own");
    let loaded = store.load().expect("load");
    let rows: Vec<(&str, i32, bool)> = loaded
        .entries
        .iter()
        .map(|e| (e.session.id.as_str(), e.writer.pid, e.kill_intent.is_some()))
        .collect();
    assert_eq!(
        rows,
        [
            ("proc_000000000001", 2, true),
            ("proc_000000000002", 1, false),
        ]
    );
    // B45: a readiness mark is set once and kept by later writes of the row.
    assert!(store.record_ready("proc_000000000001", 5.0).expect("ready"));
    assert!(!store.record_ready("proc_000000000001", 6.0).expect("ready"));
    assert!(!store.record_ready("proc_00000000dead", 6.0).expect("ready"));
    store
        .write_own(&b, &[record("proc_000000000001", 1.0)], &[])
        .expect("write own");
    let ready: Vec<(String, Option<f64>)> = store
        .load()
        .expect("load")
        .entries
        .into_iter()
        .map(|e| (e.session.id, e.ready_at))
        .collect();
    assert_eq!(
        ready,
        [
            ("proc_000000000001".to_owned(), Some(5.0)),
            ("proc_000000000002".to_owned(), None),
        ]
    );
    assert_eq!(store.remove(&["proc_000000000002"]).expect("remove"), 1);
    assert_eq!(store.load().expect("load").entries.len(), 1);
    let twice = [
        record("proc_000000000004", 4.0),
        record("proc_000000000004", 4.0),
    ];
    assert!(store.write_own(&a, &twice, &[]).is_err());
}

#[test]
fn b27_the_memory_store_keeps_the_running_store_contract() {
    contract(&MemoryRunningStore::new());
}

#[test]
fn b27_the_sqlite_store_keeps_the_running_store_contract() {
    let tmp = tempfile::tempdir().expect("temp dir");
    contract(&CheckpointStore::new(&Home::new(tmp.path())));
}
