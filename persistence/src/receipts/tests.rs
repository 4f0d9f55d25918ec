//! Tests for the result store: a real `state.db` in a temp home.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::{Mode, SpawnOptions};

fn home() -> (tempfile::TempDir, Home) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let home = Home::new(tmp.path());
    (tmp, home)
}

fn receipt(id: &str) -> ResultReceipt {
    // Whole seconds: serde_json's float text round-trips only to a few ulps.
    let mut r = ResultReceipt::exited(id, "make test", 2, unix_now().floor());
    r.started_at = r.finished_at - 60.0;
    r.cwd = Some(PathBuf::from("/work"));
    r.task_id = "task".to_owned();
    r.owner_task_id = "owner".to_owned();
    r.session_key = "key".to_owned();
    r.notify = true;
    r.output = "FAILED 3 tests\n".to_owned();
    r
}

fn finished_ago(id: &str, ago: Duration) -> ResultReceipt {
    let mut r = receipt(id);
    r.finished_at = (unix_now() - ago.as_secs_f64()).floor();
    r.started_at = r.finished_at - 1.0;
    r
}

fn spec(command: &str) -> RestartSpec {
    RestartSpec {
        command: command.to_owned(),
        mode: Mode::Pipe,
        watch_patterns: Vec::new(),
        heartbeat_seconds: None,
        completion_output_chars: None,
        options: SpawnOptions::default(),
    }
}

#[test]
fn b38_receipt_round_trips_in_the_state_database_privately() {
    let (_tmp, home) = home();
    let store = ReceiptStore::new(&home);
    let r = receipt("proc_0123456789ab");
    store
        .store_all(&[Stored {
            receipt: r.clone(),
            spawn: Some(spec("make test TOKEN=hunter2")),
        }])
        .expect("store");
    assert_eq!(store.load(&r.id).expect("load"), Some(r.clone()));
    assert_eq!(store.load("proc_000000000000").expect("load"), None);
    // The command as given is only in the restart spec.
    assert_eq!(
        store.restart_spec(&r.id).expect("spec").map(|s| s.command),
        Some("make test TOKEN=hunter2".to_owned())
    );
    let mode = fs::metadata(home.ledger_path())
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(!home.results_dir().exists(), "no receipt files");
    // Another store on the same home (a restarted daemon) reads it.
    let again = ReceiptStore::new(&home);
    assert_eq!(again.load(&r.id).expect("load"), Some(r));
}

#[test]
fn b38_output_keeps_the_last_200000_chars() {
    let (_tmp, home) = home();
    let store = ReceiptStore::new(&home);
    let mut r = receipt("proc_00000000000a");
    // Multi-byte characters: the cut must land on a character boundary.
    r.output = format!(
        "{}{}",
        "é".repeat(10),
        "x".repeat(MAX_RECEIPT_OUTPUT_CHARS - 1)
    );
    store.store(&r).expect("store");
    let back = store.load(&r.id).expect("load").expect("stored");
    assert_eq!(back.output.chars().count(), MAX_RECEIPT_OUTPUT_CHARS);
    assert!(back.output.starts_with('é'));
    assert!(back.output_cut);
    assert_eq!(tail_start("aéc", 2), Some(1));
}

#[test]
fn b38_ids_must_be_session_ids() {
    let (_tmp, home) = home();
    let store = ReceiptStore::new(&home);
    for bad in [
        "../proc_x",
        "proc_",
        "proc_a/b",
        "proc_a.json",
        "x_0123",
        "",
    ] {
        let err = store.load(bad).unwrap_err();
        assert!(
            matches!(err, Error::InvalidSessionId { .. }),
            "{bad}: {err}"
        );
        let err = store.store(&receipt(bad)).unwrap_err();
        assert!(
            matches!(err, Error::InvalidSessionId { .. }),
            "{bad}: {err}"
        );
    }
    assert!(
        !home.ledger_path().exists(),
        "a refused store creates nothing"
    );
}

#[test]
fn b38_lookups_by_prefix_name_and_window() {
    let (_tmp, home) = home();
    let store = ReceiptStore::new(&home);
    let day = Duration::from_secs(24 * 3600);
    let mut old = finished_ago("proc_aaaa00000001", 2 * day);
    old.name = Some("build".to_owned());
    let mut new = finished_ago("proc_aaaa00000002", Duration::from_secs(60));
    new.name = Some("build".to_owned());
    let mut other = finished_ago("proc_bbbb00000003", Duration::from_secs(30));
    other.owner_task_id = "someone-else".to_owned();
    for r in [&old, &new, &other] {
        store.store(r).expect("store");
    }
    assert_eq!(
        store.ids_with_prefix("proc_aaaa").expect("prefix"),
        ["proc_aaaa00000001", "proc_aaaa00000002"]
    );
    assert_eq!(
        store.ids_with_prefix("proc_bbbb").expect("prefix"),
        ["proc_bbbb00000003"]
    );
    assert_eq!(
        store.newest_named("build").expect("name").map(|r| r.id),
        Some(new.id.clone())
    );
    assert_eq!(store.newest_named("nothing").expect("name"), None);
    let since = unix_now() - day.as_secs_f64();
    let listed = store.list(Some("owner"), Some(since), 4).expect("list");
    let ids: Vec<&str> = listed.receipts.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, [new.id.as_str()]);
    assert_eq!(listed.n_older, 1);
    assert_eq!(listed.receipts[0].output, "sts\n", "the last 4 characters");
    assert!(listed.receipts[0].output_cut);
    let all = store.list(None, None, 100).expect("list");
    assert_eq!(all.receipts.len(), 3);
    assert_eq!(all.n_older, 0);
}

#[test]
fn b38_past_the_ttl_a_session_leaves_a_tombstone_and_its_log_goes() {
    let (_tmp, home) = home();
    let hour = Duration::from_secs(3600);
    let store = ReceiptStore::new(&home).with_ttl(hour);
    fs::create_dir_all(home.session_logs_dir()).expect("logs dir");
    let mut old = finished_ago("proc_000000000001", 2 * hour);
    old.name = Some("nightly".to_owned());
    fs::write(home.session_log_path(&old.id), b"old\n").expect("log");
    // A log with no receipt is a running session's: never removed.
    fs::write(home.session_log_path("proc_running0001"), b"running\n").expect("log");
    store.store(&old).expect("store");
    store.store(&receipt("proc_000000000002")).expect("store");
    assert_eq!(store.load(&old.id).expect("load"), None);
    assert!(!home.session_log_path(&old.id).exists());
    assert!(home.session_log_path("proc_running0001").exists());
    let stone = store.tombstone(&old.id).expect("tombstone").expect("one");
    assert_eq!(stone.name.as_deref(), Some("nightly"));
    assert!((unix_now() - stone.expired_at).abs() < 60.0, "{stone:?}");
    assert_eq!(
        store.tombstone("nightly").expect("by name").map(|t| t.id),
        Some(old.id.clone())
    );
    assert_eq!(store.tombstone("proc_000000000002").expect("live"), None);
    // Storing it again (a late writer) brings it back.
    store
        .store(&finished_ago(&old.id, Duration::ZERO))
        .expect("again");
    assert_eq!(store.tombstone(&old.id).expect("tombstone"), None);
}

#[test]
fn b38_past_the_budget_the_oldest_finished_go_first_whatever_their_count() {
    let (_tmp, home) = home();
    let store = ReceiptStore::new(&home).with_log_budget(2_500);
    fs::create_dir_all(home.session_logs_dir()).expect("logs dir");
    // 300 small sessions fit: no count cap.
    for n in 0..300 {
        store
            .store(&finished_ago(
                &format!("proc_small{n:04}"),
                Duration::from_secs(1000),
            ))
            .expect("store");
    }
    for n in 0..3u64 {
        let id = format!("proc_big{n}");
        fs::write(home.session_log_path(&id), vec![b'x'; 1_000]).expect("log");
        store
            .store(&finished_ago(&id, Duration::from_secs(300 - n * 100)))
            .expect("store");
    }
    // 3,000 log bytes + outputs against 2,500: the oldest go (the small ones first,
    // then the oldest big one).
    assert_eq!(store.load("proc_big0").expect("load"), None);
    assert!(!home.session_log_path("proc_big0").exists());
    assert!(store.load("proc_big1").expect("load").is_some());
    assert!(store.load("proc_big2").expect("load").is_some());
    assert!(store.tombstone("proc_big0").expect("stone").is_some());
}

#[test]
fn b38_receipt_files_of_earlier_releases_are_imported_once_and_removed() {
    let (_tmp, home) = home();
    fs::create_dir_all(home.results_dir()).expect("results dir");
    let r = receipt("proc_0000000000ff");
    let mut file = serde_json::to_value(&r).expect("json");
    file["version"] = serde_json::json!(1);
    fs::write(
        home.results_dir().join("proc_0000000000ff.json"),
        file.to_string(),
    )
    .expect("write");
    fs::write(home.results_dir().join("proc_0000000000fe.json"), b"{").expect("write");
    let store = ReceiptStore::new(&home);
    assert_eq!(store.load(&r.id).expect("load"), Some(r));
    assert!(!home.results_dir().join("proc_0000000000ff.json").exists());
    assert!(
        home.results_dir().join("proc_0000000000fe.json").exists(),
        "an unreadable file stays"
    );
}

#[test]
fn b38_store_never_creates_a_missing_home() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let home = Home::new(tmp.path().join("gone"));
    let store = ReceiptStore::new(&home);
    let err = store.store(&receipt("proc_00000000000d")).unwrap_err();
    assert!(matches!(err, Error::HomeMissing { .. }), "{err}");
    assert!(!home.root().exists());
    assert_eq!(store.load("proc_00000000000d").expect("load"), None);
    assert_eq!(store.prune().expect("prune"), PruneReport::default());
}

#[test]
fn request_keys_answer_within_their_window() {
    let (_tmp, home) = home();
    let store = ReceiptStore::new(&home);
    let window = Duration::from_secs(600);
    store
        .put_request_key("k1", "{\"id\":1}", window)
        .expect("put");
    let again = ReceiptStore::new(&home);
    assert_eq!(
        again.request_key("k1", window).expect("get").as_deref(),
        Some("{\"id\":1}")
    );
    assert_eq!(again.request_key("k1", Duration::ZERO).expect("get"), None);
    assert_eq!(again.request_key("k2", window).expect("get"), None);
}

#[test]
fn b38_a_bounded_prune_evicts_the_oldest_first_and_says_more_is_due() {
    let (_tmp, home) = home();
    fs::create_dir_all(home.session_logs_dir()).expect("logs dir");
    let hour = Duration::from_secs(3600);
    // Opened first: opening prunes, and everything, not a bounded round.
    let pruner = ReceiptStore::new(&home).with_ttl(hour);
    pruner.open().expect("open");
    let keeper = ReceiptStore::new(&home);
    for n in 0..5u64 {
        let id = format!("proc_old{n}");
        fs::write(home.session_log_path(&id), b"old\n").expect("log");
        keeper
            .store(&finished_ago(
                &id,
                hour * u32::try_from(10 - n).expect("small"),
            ))
            .expect("store");
    }
    keeper.store(&receipt("proc_new0")).expect("store");
    let first = pruner.prune_at_most(2).expect("prune");
    assert_eq!(first.evicted, ["proc_old0", "proc_old1"]);
    assert_eq!((first.n_expired, first.n_logs, first.more), (2, 2, true));
    assert!(!home.session_log_path("proc_old0").exists());
    assert!(home.session_log_path("proc_old2").exists());
    let rest = pruner.prune_at_most(10).expect("prune");
    assert_eq!(rest.evicted, ["proc_old2", "proc_old3", "proc_old4"]);
    assert!(!rest.more);
    assert!(pruner.load("proc_new0").expect("load").is_some());
    assert!(pruner.tombstone("proc_old4").expect("stone").is_some());
    assert_eq!(
        pruner.prune_at_most(10).expect("prune"),
        PruneReport::default()
    );
}

#[test]
fn clean_forgets_stored_sessions_by_owner_and_age_with_their_logs() {
    let (_tmp, home) = home();
    fs::create_dir_all(home.session_logs_dir()).expect("logs dir");
    let store = ReceiptStore::new(&home);
    let minute = Duration::from_secs(60);
    for (id, owner, ago) in [
        ("proc_alice0", "alice", 10 * minute),
        ("proc_alice1", "alice", Duration::ZERO),
        ("proc_bob0", "bob", 10 * minute),
    ] {
        let mut r = finished_ago(id, ago);
        r.owner_task_id = owner.to_owned();
        fs::write(home.session_log_path(id), b"out\n").expect("log");
        store.store(&r).expect("store");
    }
    let five_ago = unix_now() - 300.0;
    assert_eq!(
        store.finished_ids(Some("alice"), five_ago).expect("ids"),
        ["proc_alice0"]
    );
    assert_eq!(
        store.finished_ids(None, five_ago).expect("ids"),
        ["proc_alice0", "proc_bob0"]
    );
    let gone = store
        .forget_all(&["proc_alice0".to_owned(), "proc_nothere1".to_owned()])
        .expect("forget");
    assert_eq!(gone, ["proc_alice0"]);
    assert_eq!(store.load("proc_alice0").expect("load"), None);
    assert!(!home.session_log_path("proc_alice0").exists());
    // Forgotten, not expired: no tombstone answers for it.
    assert_eq!(store.tombstone("proc_alice0").expect("stone"), None);
    assert!(store.load("proc_alice1").expect("load").is_some());
    assert!(home.session_log_path("proc_bob0").exists());
    assert!(matches!(
        store.forget_all(&["../x".to_owned()]),
        Err(Error::InvalidSessionId { .. })
    ));
}

#[test]
fn a_receipt_keeps_the_bytes_its_log_did_not() {
    let (_tmp, home) = home();
    let store = ReceiptStore::new(&home);
    let mut r = receipt("proc_cut0");
    r.bytes_not_kept = 4096;
    store.store(&r).expect("store");
    let back = store.load("proc_cut0").expect("load").expect("stored");
    assert_eq!(back.bytes_not_kept, 4096);
    // Receipts of earlier releases have none.
    let old: ResultReceipt =
        serde_json::from_str(&serde_json::to_string(&receipt("proc_old0")).expect("json"))
            .expect("parse");
    assert_eq!(old.bytes_not_kept, 0);
}

proptest::proptest! {
    #[test]
    fn b38_tail_keeps_exactly_the_last_chars(text in "\\PC{0,60}", max in 0usize..70) {
        let kept = match tail_start(&text, max) {
            Some(start) => &text[start..],
            None => text.as_str(),
        };
        let n_chars = text.chars().count();
        proptest::prop_assert_eq!(kept.chars().count(), n_chars.min(max));
        proptest::prop_assert!(text.ends_with(kept));
    }
}
