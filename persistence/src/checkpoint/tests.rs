//! Tests for the running sessions in the store: a real `state.db` in a temp home,
//! and checkpoint files as releases before the store wrote them.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::{
    CheckpointProblem, Mode, ReceiptStore, ResultReceipt, ShimRef, SpawnOptions,
    parse_stat_start_time,
};

fn record(id: &str, pid: i32) -> SessionRecord {
    SessionRecord {
        id: id.to_owned(),
        command: format!("sleep {pid}"),
        pid,
        pgid: pid,
        start_time: Some(1000 + u64::try_from(pid).expect("positive pid")),
        task_id: "task".to_owned(),
        owner_task_id: "owner".to_owned(),
        session_key: "key".to_owned(),
        mode: Mode::Pty,
        notify: true,
        watch_patterns: vec!["ready".to_owned()],
        heartbeat_seconds: 60,
        completion_output_chars: 2000,
        persist_on_release: false,
        log_path: PathBuf::from(format!("/h/logs/sessions/{id}.log")),
        cwd: Some(PathBuf::from("/work")),
        started_at: 1_790_000_000.5 + f64::from(pid),
        shim: None,
        name: None,
        options: None,
        command_given: None,
        runs: None,
    }
}

fn home() -> (tempfile::TempDir, Home) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let home = Home::new(tmp.path());
    (tmp, home)
}

fn ids(loaded: &Loaded) -> Vec<(i32, String)> {
    loaded
        .entries
        .iter()
        .map(|e| (e.writer.pid, e.session.id.clone()))
        .collect()
}

fn dir_names(home: &Home) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(home.root())
        .expect("list home")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A checkpoint file entry exactly as the release before the store wrote it.
fn old_entry(writer: (i32, u64), r: &SessionRecord) -> serde_json::Value {
    let mut v = serde_json::to_value(r).expect("encode");
    v["writer"] = serde_json::json!({"pid": writer.0, "start_time": writer.1});
    v
}

#[test]
fn b27_round_trip_keeps_every_field_and_the_command_as_given() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let me = Writer::new(10, Some(77));
    let mut plain = record("proc_000000000001", 101);
    plain.start_time = None;
    plain.cwd = None;
    plain.mode = Mode::Pipe;
    let mut full = record("proc_000000000002", 102);
    full.command = "curl -H 'token: ***'".to_owned();
    full.command_given = Some("curl -H 'token: s3cret'".to_owned());
    full.options = Some(SpawnOptions {
        kill_leftovers: Some(true),
        memory_bytes: Some(64 << 20),
        cpu_millis: Some(1500),
        pids: Some(256),
        time_limit_seconds: Some(60),
        ..SpawnOptions::default()
    });
    let records = vec![plain, full];
    store.write_own(&me, &records, &[]).expect("write");
    let loaded = CheckpointStore::new(&home).load().expect("load");
    assert_eq!(loaded.moved_aside, None);
    let back: Vec<SessionRecord> = loaded.entries.iter().map(|e| e.session.clone()).collect();
    assert_eq!(back, records);
    assert!(loaded.entries.iter().all(|e| e.writer == me));
    assert!(loaded.entries.iter().all(|e| e.kill_intent.is_none()));
    let mode = fs::metadata(store.path())
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the store is private");
    assert!(
        dir_names(&home).iter().all(|n| !n.starts_with("processes")),
        "no checkpoint file is written: {:?}",
        dir_names(&home)
    );
}

#[test]
fn b27_writing_a_session_takes_it_over_and_finished_ones_go() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let old = Writer::new(100, Some(5));
    let me = Writer::new(200, Some(6));
    store
        .write_one(&old, &record("proc_a00000000001", 1))
        .expect("spawn 1");
    store
        .write_one(&old, &record("proc_a00000000002", 2))
        .expect("spawn 2");
    store
        .write_one(&me, &record("proc_b00000000003", 3))
        .expect("spawn 3");
    // The new writer re-adopts 1, and 3 finished.
    store
        .write_own(
            &me,
            &[record("proc_a00000000001", 1)],
            &["proc_b00000000003"],
        )
        .expect("write");
    let loaded = store.load().expect("load");
    assert_eq!(
        ids(&loaded),
        [
            (200, "proc_a00000000001".to_owned()),
            (100, "proc_a00000000002".to_owned()),
        ]
    );
    assert_eq!(
        store
            .remove(&["proc_a00000000002", "proc_x1"])
            .expect("remove"),
        1
    );
    assert_eq!(ids(&store.load().expect("load")).len(), 1);
}

#[test]
fn b27_a_finish_is_one_transaction_and_a_late_snapshot_does_not_bring_it_back() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let me = Writer::new(1, Some(1));
    let mut r = record("proc_000000000007", 7);
    // Recent, so the receipt is not pruned at once by the result TTL.
    r.started_at = unix_now() - 2.0;
    store.write_one(&me, &r).expect("spawn");
    let mut receipt = ResultReceipt::exited(&r.id, &r.command, 0, r.started_at + 1.0);
    receipt.task_id = "task".to_owned();
    receipt.owner_task_id = "owner".to_owned();
    receipt.output = "done\n".to_owned();
    ReceiptStore::new(&home).store(&receipt).expect("finish");
    assert!(
        store.load().expect("load").entries.is_empty(),
        "the receipt's commit ends the running row"
    );
    // A coalesced write that snapshotted the session while it still ran.
    store.write_own(&me, &[r], &[]).expect("late write");
    assert!(store.load().expect("load").entries.is_empty());
}

#[test]
fn b27_a_kill_intent_is_kept_until_the_session_goes() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let me = Writer::new(1, Some(1));
    let r = record("proc_000000000008", 8);
    store.write_one(&me, &r).expect("spawn");
    let intent = KillIntent {
        source: "process_kill".to_owned(),
        requested_at: 1_790_000_100.0,
    };
    assert_eq!(
        store
            .record_kill_intent(&[&r.id, "proc_000000000009"], &intent)
            .expect("intent"),
        1
    );
    // A refresh of the record keeps the intent.
    store
        .write_own(&me, std::slice::from_ref(&r), &[])
        .expect("refresh");
    let loaded = store.load().expect("load");
    assert_eq!(loaded.entries[0].kill_intent.as_ref(), Some(&intent));
    store.write_own(&me, &[], &[&r.id]).expect("finished");
    assert!(store.load().expect("load").entries.is_empty());
}

#[test]
fn b27_invalid_records_are_refused_before_touching_the_store() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let me = Writer::new(1, None);
    let twice = [
        record("proc_000000000001", 1),
        record("proc_000000000001", 2),
    ];
    let err = store.write_own(&me, &twice, &[]).unwrap_err();
    assert!(matches!(err, Error::InvalidRecord { .. }), "{err}");
    let mut nan = record("proc_000000000002", 2);
    nan.started_at = f64::NAN;
    let err = store.write_one(&me, &nan).unwrap_err();
    assert!(matches!(err, Error::InvalidRecord { .. }), "{err}");
    let err = store
        .write_one(&me, &record("../etc/passwd", 3))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidSessionId { .. }), "{err}");
    assert!(dir_names(&home).is_empty(), "{:?}", dir_names(&home));
}

#[test]
fn b27_checkpoint_files_of_the_release_before_are_imported_once_and_removed() {
    let (_tmp, home) = home();
    let a = record("proc_000000000011", 11);
    let b = record("proc_000000000012", 12);
    let mut c = record("proc_000000000013", 13);
    c.command = "pending one".to_owned();
    let file = serde_json::json!({"version": 1, "sessions": [old_entry((40, 4), &a), old_entry((40, 4), &b)]});
    fs::write(home.checkpoint_path(), file.to_string()).expect("processes.json");
    fs::write(home.root().join("processes.json.lock"), b"").expect("lock");
    let pending = home.checkpoint_pending_dir();
    fs::create_dir(&pending).expect("pending dir");
    // A pending entry listed in the full file too loses to it; one that is not is
    // imported; an unusable one is dropped.
    let mut stale_b = b.clone();
    stale_b.command = "stale".to_owned();
    for (r, name) in [(&stale_b, &b.id), (&c, &c.id)] {
        let entry = serde_json::json!({"version": 1, "entry": old_entry((41, 5), r)});
        fs::write(pending.join(format!("{name}.json")), entry.to_string()).expect("pending");
    }
    fs::write(
        pending.join("proc_000000000099.json"),
        b"{\"version\": 1, \"ent",
    )
    .expect("torn");

    let loaded = CheckpointStore::new(&home).load().expect("load");
    assert_eq!(loaded.moved_aside, None);
    assert_eq!(
        ids(&loaded),
        [(40, a.id.clone()), (40, b.id.clone()), (41, c.id.clone()),]
    );
    assert_eq!(loaded.entries[1].session, b);
    assert_eq!(loaded.entries[0].writer, Writer::new(40, Some(4)));
    assert!(
        dir_names(&home).iter().all(|n| n.starts_with("state.db")),
        "the files are gone once imported: {:?}",
        dir_names(&home)
    );
    // A second store (the next start) finds the rows and no files.
    assert_eq!(CheckpointStore::new(&home).load().expect("load"), loaded);
}

#[test]
fn b27_an_unusable_checkpoint_file_is_moved_aside_and_reported() {
    let (_tmp, home) = home();
    let garbage = b"{\"version\": 1, \"sessions\": [{\"id\": ";
    fs::write(home.checkpoint_path(), garbage).expect("plant garbage");
    let loaded = CheckpointStore::new(&home).load().expect("load");
    let moved = loaded.moved_aside.expect("reported");
    assert!(loaded.entries.is_empty());
    assert!(matches!(
        moved.problem,
        CheckpointProblem::Unreadable { .. }
    ));
    assert_eq!(moved.from, home.checkpoint_path());
    assert_eq!(fs::read(&moved.to).expect("kept"), garbage);
    assert!(moved.to_string().contains("moved to"), "{moved}");

    let future = br#"{"version": 2, "sessions": []}"#;
    fs::write(home.checkpoint_path(), future).expect("plant v2");
    let again = CheckpointStore::new(&home)
        .load()
        .expect("load")
        .moved_aside
        .expect("reported");
    assert_eq!(
        again.problem,
        CheckpointProblem::UnknownVersion {
            found: "2".to_owned()
        }
    );
    assert_ne!(again.to, moved.to);
    assert_eq!(fs::read(&again.to).expect("kept"), future);
}

#[test]
fn b29_missing_home_is_never_created_and_an_empty_one_stays_empty() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let home = Home::new(tmp.path().join("deleted-profile"));
    let store = CheckpointStore::new(&home);
    assert_eq!(store.load().expect("load"), Loaded::default());
    assert_eq!(store.remove(&["proc_000000000001"]).expect("remove"), 0);
    let err = store
        .write_one(&Writer::new(1, None), &record("proc_000000000001", 1))
        .unwrap_err();
    assert!(matches!(err, Error::HomeMissing { .. }), "{err}");
    assert!(!home.root().exists());

    let (_tmp, home) = self::home();
    assert_eq!(
        CheckpointStore::new(&home).load().expect("load"),
        Loaded::default()
    );
    assert!(dir_names(&home).is_empty(), "a load creates nothing");
}

#[test]
fn stat_start_time_survives_odd_command_names() {
    let stat = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                987654 1000000 100 18446744073709551615";
    assert_eq!(parse_stat_start_time(stat), Some(987_654));
    assert_eq!(parse_stat_start_time("12 (x) S 1 2"), None);
    assert_eq!(parse_stat_start_time("no paren"), None);
    let me = Writer::current();
    assert_eq!(me.pid, i32::try_from(std::process::id()).expect("pid"));
    assert!(
        me.start_time.is_some(),
        "/proc/self/stat is readable on Linux"
    );
}

fn arb_record() -> impl proptest::strategy::Strategy<Value = SessionRecord> {
    use proptest::prelude::*;
    (
        (
            "proc_[a-z0-9]{12}",
            any::<String>(),
            any::<i32>(),
            any::<Option<u64>>(),
        ),
        (any::<String>(), any::<String>(), any::<bool>()),
        (
            proptest::collection::vec(any::<String>(), 0..4),
            any::<u64>(),
            any::<bool>(),
        ),
        (
            "[^\u{0}]{0,40}",
            proptest::option::of("[^\u{0}]{0,40}"),
            0.0..4e9f64,
        ),
    )
        .prop_map(|(ids, owners, settings, paths)| {
            let (id, command, pid, start_time) = ids;
            let (task_id, key, pty) = owners;
            let (watch_patterns, heartbeat_seconds, notify) = settings;
            let (log, cwd, started_at) = paths;
            SessionRecord {
                id,
                command_given: (pid % 5 == 0).then(|| format!("{command} as given")),
                runs: None,
                command,
                pid,
                pgid: pid,
                start_time,
                owner_task_id: task_id.clone(),
                task_id,
                session_key: key,
                mode: if pty { Mode::Pty } else { Mode::Pipe },
                notify,
                watch_patterns,
                heartbeat_seconds,
                completion_output_chars: heartbeat_seconds / 2,
                persist_on_release: !notify,
                log_path: PathBuf::from(log),
                cwd: cwd.map(PathBuf::from),
                started_at,
                shim: (pid % 2 == 0).then_some(ShimRef {
                    pid: pid.wrapping_add(1),
                    start_time,
                    protocol: 1,
                }),
                name: (pid % 3 == 0).then(|| format!("job-{pid}")),
                options: None,
            }
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

    #[test]
    fn b27_any_records_round_trip(records in proptest::collection::vec(arb_record(), 0..6)) {
        let (_tmp, home) = home();
        let store = CheckpointStore::new(&home);
        let mut seen = HashSet::new();
        let records: Vec<SessionRecord> =
            records.into_iter().filter(|r| seen.insert(r.id.clone())).collect();
        store.write_own(&Writer::new(1, Some(2)), &records, &[]).expect("write");
        let loaded = store.load().expect("load");
        proptest::prop_assert_eq!(loaded.entries.len(), records.len());
        for want in &records {
            let entry = loaded.entries.iter().find(|e| e.session.id == want.id).expect("listed");
            let mut got = entry.session.clone();
            // JSON floats round-trip to within an ulp or so, not bit-exactly.
            proptest::prop_assert!((got.started_at - want.started_at).abs() <= 1e-6);
            got.started_at = want.started_at;
            proptest::prop_assert_eq!(&got, want);
        }
    }
}
