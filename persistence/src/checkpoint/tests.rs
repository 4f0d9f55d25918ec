//! Tests for the checkpoint: real files in a temp home.

use std::os::unix::fs::PermissionsExt;

use super::*;

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
        started_at: 1_790_000_000.5,
        shim: None,
        name: None,
        options: None,
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

#[test]
fn b27_round_trip_keeps_every_field() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let me = Writer::new(10, Some(77));
    let mut plain = record("proc_000000000001", 101);
    plain.start_time = None;
    plain.cwd = None;
    plain.mode = Mode::Pipe;
    let records = vec![record("proc_000000000002", 102), plain];
    assert_eq!(store.write_own(&me, &records).expect("write"), None);
    let loaded = store.load().expect("load");
    assert_eq!(loaded.moved_aside, None);
    let back: Vec<SessionRecord> = loaded.entries.iter().map(|e| e.session.clone()).collect();
    assert_eq!(back, records);
    assert!(loaded.entries.iter().all(|e| e.writer == me));
    let text = fs::read_to_string(store.path()).expect("read file");
    assert!(text.starts_with(r#"{"version":1,"sessions":["#), "{text}");
}

#[test]
fn b27_files_are_private_and_no_temp_files_remain() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    store
        .write_own(&Writer::new(1, None), &[record("proc_000000000001", 5)])
        .expect("write");
    for name in ["processes.json", "processes.json.lock"] {
        let mode = fs::metadata(home.root().join(name))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name}");
    }
    assert_eq!(dir_names(&home), ["processes.json", "processes.json.lock"]);
}

#[test]
fn b27_each_writer_replaces_only_its_own_entries() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let a = Writer::new(100, Some(5));
    let b = Writer::new(200, Some(6));
    // Same pid as `a` but a different start time: a reused pid is another writer.
    let a_reused = Writer::new(100, Some(9));
    store
        .write_own(
            &a,
            &[
                record("proc_a00000000001", 1),
                record("proc_a00000000002", 2),
            ],
        )
        .expect("a writes");
    store
        .write_own(&b, &[record("proc_b00000000001", 3)])
        .expect("b writes");
    store
        .write_own(&a_reused, &[record("proc_c00000000001", 4)])
        .expect("reused pid writes");
    store
        .write_own(&a, &[record("proc_a00000000003", 5)])
        .expect("a rewrites");
    let loaded = store.load().expect("load");
    assert_eq!(
        ids(&loaded),
        [
            (200, "proc_b00000000001".to_owned()),
            (100, "proc_c00000000001".to_owned()),
            (100, "proc_a00000000003".to_owned()),
        ]
    );
    // An empty write removes only that writer's entries.
    store.write_own(&b, &[]).expect("b shuts down");
    let loaded = store.load().expect("load");
    assert_eq!(loaded.entries.len(), 2);
    assert!(loaded.entries.iter().all(|e| e.writer != b));
}

#[test]
fn b27_writing_a_session_takes_it_over_from_another_writer() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let old = Writer::new(300, Some(1));
    let new = Writer::new(301, Some(2));
    store
        .write_own(
            &old,
            &[
                record("proc_000000000001", 1),
                record("proc_000000000002", 2),
            ],
        )
        .expect("old writes");
    store
        .write_own(&new, &[record("proc_000000000001", 1)])
        .expect("new adopts one");
    assert_eq!(store.remove(&["proc_000000000002"]).expect("remove"), 1);
    assert_eq!(
        store.remove(&["proc_000000000009"]).expect("remove none"),
        0
    );
    let loaded = store.load().expect("load");
    assert_eq!(ids(&loaded), [(301, "proc_000000000001".to_owned())]);
}

#[test]
fn b27_invalid_records_are_refused_before_touching_the_file() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let w = Writer::new(1, None);
    store
        .write_own(&w, &[record("proc_000000000001", 1)])
        .expect("write");
    let before = fs::read(store.path()).expect("read");
    let dup = [
        record("proc_000000000002", 2),
        record("proc_000000000002", 3),
    ];
    let err = store.write_own(&w, &dup).unwrap_err();
    assert!(matches!(err, Error::InvalidRecord { .. }), "{err}");
    let mut nan = record("proc_000000000003", 3);
    nan.started_at = f64::NAN;
    let err = store.write_own(&w, &[nan]).unwrap_err();
    assert!(err.to_string().contains("started_at"), "{err}");
    assert_eq!(fs::read(store.path()).expect("read"), before);
}

#[test]
fn b27_corrupt_checkpoint_is_moved_aside_and_reported() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let garbage = b"{\"version\": 1, \"sessions\": [{\"id\": ";
    fs::write(store.path(), garbage).expect("plant garbage");
    let loaded = store.load().expect("load");
    let moved = loaded.moved_aside.expect("reported");
    assert!(loaded.entries.is_empty());
    assert!(matches!(
        moved.problem,
        CheckpointProblem::Unreadable { .. }
    ));
    assert_eq!(moved.from, store.path());
    let to_name = moved
        .to
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(to_name.starts_with("processes.json.corrupt-"), "{to_name}");
    assert_eq!(fs::read(&moved.to).expect("kept"), garbage);
    assert!(!store.path().exists());
    assert!(moved.to_string().contains("moved to"), "{moved}");
}

#[test]
fn b27_unknown_version_is_moved_aside_not_overwritten() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let future = br#"{"version": 2, "sessions": [], "shards": ["x"]}"#;
    fs::write(store.path(), future).expect("plant v2");
    // The writer meets it first: it moves it aside, reports it, then writes.
    let moved = store
        .write_own(&Writer::new(1, None), &[record("proc_000000000001", 1)])
        .expect("write")
        .expect("reported");
    assert_eq!(
        moved.problem,
        CheckpointProblem::UnknownVersion {
            found: "2".to_owned()
        }
    );
    assert_eq!(fs::read(&moved.to).expect("kept"), future);
    assert_eq!(store.load().expect("load").entries.len(), 1);

    // A second bad file in the same second gets its own name.
    fs::write(store.path(), b"[]").expect("plant a bare list");
    let again = store.load().expect("load").moved_aside.expect("reported");
    assert_ne!(again.to, moved.to);
    assert_eq!(fs::read(&moved.to).expect("first kept"), future);
    assert_eq!(fs::read(&again.to).expect("second kept"), b"[]");
}

#[test]
fn b27_stale_temp_files_are_swept() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let stale = home.root().join("processes.json.tmp-999999-0");
    fs::write(&stale, b"half a checkp").expect("plant temp");
    let unrelated = home.root().join("state.db.tmp-1-0");
    fs::write(&unrelated, b"x").expect("plant unrelated");
    store
        .write_own(&Writer::new(1, None), &[record("proc_000000000001", 1)])
        .expect("write");
    assert!(!stale.exists());
    assert!(
        unrelated.exists(),
        "only the checkpoint's temp files are swept"
    );
}

#[test]
fn b29_missing_home_is_never_created() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let home = Home::new(tmp.path().join("deleted-profile"));
    let store = CheckpointStore::new(&home);
    assert_eq!(store.load().expect("load"), Loaded::default());
    assert_eq!(store.remove(&["proc_000000000001"]).expect("remove"), 0);
    let err = store
        .write_own(&Writer::new(1, None), &[record("proc_000000000001", 1)])
        .unwrap_err();
    assert!(matches!(err, Error::HomeMissing { .. }), "{err}");
    assert!(!home.root().exists());
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
            any::<String>(),
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
                    pid: pid + 1,
                    start_time,
                    protocol: 1,
                }),
                name: (pid % 3 == 0).then(|| format!("job-{pid}")),
                options: None,
            }
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    #[test]
    fn b27_any_records_round_trip(records in proptest::collection::vec(arb_record(), 0..6)) {
        let (_tmp, home) = home();
        let store = CheckpointStore::new(&home);
        let mut seen = HashSet::new();
        let records: Vec<SessionRecord> =
            records.into_iter().filter(|r| seen.insert(r.id.clone())).collect();
        store.write_own(&Writer::new(1, Some(2)), &records).expect("write");
        let loaded = store.load().expect("load");
        proptest::prop_assert_eq!(loaded.moved_aside, None);
        proptest::prop_assert_eq!(loaded.entries.len(), records.len());
        for (entry, want) in loaded.entries.iter().zip(&records) {
            let mut got = entry.session.clone();
            // JSON floats round-trip to within an ulp or so, not bit-exactly.
            proptest::prop_assert!((got.started_at - want.started_at).abs() <= 1e-6);
            got.started_at = want.started_at;
            proptest::prop_assert_eq!(&got, want);
        }
    }
}

fn pending_names(home: &Home) -> Vec<String> {
    let mut names: Vec<String> = match fs::read_dir(home.checkpoint_pending_dir()) {
        Ok(listing) => listing
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

#[test]
fn b27_a_pending_entry_loads_until_a_full_write_covers_it() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let me = Writer::new(10, Some(77));
    let a = record("proc_00000000000a", 101);
    let b = record("proc_00000000000b", 102);
    store.write_pending(&me, &a).expect("pending a");
    store.write_pending(&me, &b).expect("pending b");
    let loaded = store.load().expect("load");
    assert_eq!(
        ids(&loaded),
        [(10, a.id.clone()), (10, b.id.clone())],
        "pending entries load without any full checkpoint"
    );
    assert_eq!(loaded.entries[0].session, a, "every field survives");
    let mode = fs::metadata(store.pending_path(&a.id).expect("path"))
        .expect("pending file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // A full write listing `a` supersedes its pending file; `b` (finished
    // meanwhile) is removed by its writer once a write covered it.
    store
        .write_own(&me, std::slice::from_ref(&a))
        .expect("full write");
    assert_eq!(pending_names(&home), [format!("{}.json", b.id)]);
    assert_eq!(store.remove_pending(&[b.id.as_str()]), 1);
    assert_eq!(ids(&store.load().expect("load")), [(10, a.id.clone())]);
    assert!(pending_names(&home).is_empty());
}

#[test]
fn b27_the_full_entry_wins_over_a_pending_one_and_remove_takes_both() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let old = Writer::new(10, Some(77));
    let new = Writer::new(11, Some(78));
    let mut handed = record("proc_00000000000a", 101);
    store.write_pending(&old, &handed).expect("pending");
    handed.owner_task_id = "parent".to_owned();
    // Another writer lists it in full (a take-over); the full entry is the one loaded.
    store
        .write_own(&new, std::slice::from_ref(&handed))
        .expect("full");
    store
        .write_pending(&old, &record("proc_00000000000a", 101))
        .expect("stale pending");
    let loaded = store.load().expect("load");
    assert_eq!(ids(&loaded), [(11, handed.id.clone())]);
    assert_eq!(loaded.entries[0].session.owner_task_id, "parent");

    assert_eq!(store.remove(&[handed.id.as_str()]).expect("remove"), 1);
    assert!(store.load().expect("load").entries.is_empty());
    assert!(
        pending_names(&home).is_empty(),
        "remove takes the pending file too"
    );
}

#[test]
fn b27_an_unusable_pending_entry_is_removed_and_the_rest_still_load() {
    let (_tmp, home) = home();
    let store = CheckpointStore::new(&home);
    let me = Writer::new(10, Some(77));
    let good = record("proc_00000000000a", 101);
    store.write_pending(&me, &good).expect("pending");
    let dir = home.checkpoint_pending_dir();
    // What a machine crash can leave: an empty file, and one for another id.
    fs::write(dir.join("proc_00000000000b.json"), b"").expect("torn file");
    let other = fs::read(store.pending_path(&good.id).expect("path")).expect("read");
    fs::write(dir.join("proc_00000000000c.json"), &other).expect("misnamed file");
    let loaded = store
        .load()
        .expect("an unusable pending file is not an error");
    assert_eq!(ids(&loaded), [(10, good.id.clone())]);
    assert_eq!(pending_names(&home), [format!("{}.json", good.id)]);
}

#[test]
fn b27_pending_writes_never_create_a_home() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let home = Home::new(tmp.path().join("gone"));
    let store = CheckpointStore::new(&home);
    let err = store
        .write_pending(&Writer::new(10, None), &record("proc_00000000000a", 101))
        .expect_err("no home");
    assert!(matches!(err, Error::HomeMissing { .. }), "{err}");
    assert!(!home.root().exists());
    let err = store
        .write_pending(&Writer::new(10, None), &record("../escape", 101))
        .expect_err("bad id");
    assert!(matches!(err, Error::InvalidSessionId { .. }), "{err}");
}
