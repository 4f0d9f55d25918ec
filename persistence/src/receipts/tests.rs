//! Tests for result receipts: real files in a temp home, aged with real mtimes.

use std::fs::File;
use std::os::unix::fs::PermissionsExt;

use super::*;

fn home() -> (tempfile::TempDir, Home) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let home = Home::new(tmp.path());
    (tmp, home)
}

fn receipt(id: &str) -> ResultReceipt {
    ResultReceipt {
        id: id.to_owned(),
        command: "make test".to_owned(),
        cwd: Some(PathBuf::from("/work")),
        task_id: "task".to_owned(),
        owner_task_id: "owner".to_owned(),
        session_key: "key".to_owned(),
        started_at: 1_790_000_000.0,
        finished_at: 1_790_000_060.5,
        exit_code: Some(2),
        reason: "exited".to_owned(),
        source: String::new(),
        notify: true,
        output: "FAILED 3 tests\n".to_owned(),
        output_cut: false,
        leftovers: Vec::new(),
    }
}

fn set_age(path: &Path, age: Duration) {
    let file = File::options()
        .write(true)
        .open(path)
        .expect("open receipt");
    file.set_modified(SystemTime::now() - age)
        .expect("set mtime");
}

#[test]
fn b38_receipt_round_trips_privately() {
    let (_tmp, home) = home();
    let store = ReceiptStore::new(&home);
    let r = receipt("proc_0123456789ab");
    store.store(&r).expect("store");
    assert_eq!(store.load(&r.id).expect("load"), Some(r.clone()));
    assert_eq!(store.load("proc_000000000000").expect("load"), None);
    let dir_mode = fs::metadata(home.results_dir())
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    let path = store.path(&r.id).expect("path");
    let file_mode = fs::metadata(&path).expect("stat").permissions().mode();
    assert_eq!(file_mode & 0o777, 0o600);
    let text = fs::read_to_string(&path).expect("read");
    assert!(text.contains(r#""version":1"#), "{text}");
    let names: Vec<_> = fs::read_dir(home.results_dir())
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["proc_0123456789ab.json"], "no temp files remain");
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
    assert!(back.output_cut);
    assert_eq!(back.output.chars().count(), MAX_RECEIPT_OUTPUT_CHARS);
    assert!(back.output.starts_with("éx"));
    assert_eq!(tail_start("abc", 0), Some(3));
    assert_eq!(tail_start("abc", 3), None);
    assert_eq!(tail_start("aéc", 2), Some(1));
}

#[test]
fn b38_ids_cannot_escape_the_results_dir() {
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
    assert!(!home.results_dir().exists());
}

#[test]
fn b38_unreadable_or_mismatched_receipts_are_errors() {
    let (_tmp, home) = home();
    let store = ReceiptStore::new(&home);
    store.store(&receipt("proc_00000000000b")).expect("store");
    let path = store.path("proc_00000000000b").expect("path");
    fs::write(&path, b"{\"version\":1,").expect("truncate");
    let err = store.load("proc_00000000000b").unwrap_err();
    assert!(matches!(err, Error::ReceiptCorrupt { .. }), "{err}");
    let other = serde_json::to_vec(&FileV1 {
        version: 1,
        receipt: receipt("proc_00000000000c"),
    })
    .expect("encode");
    fs::write(&path, other).expect("plant");
    let err = store.load("proc_00000000000b").unwrap_err();
    assert!(matches!(err, Error::ReceiptCorrupt { .. }), "{err}");
    let future = serde_json::to_vec(&FileV1 {
        version: 9,
        receipt: receipt("proc_00000000000b"),
    })
    .expect("encode");
    fs::write(&path, future).expect("plant");
    let err = store.load("proc_00000000000b").unwrap_err();
    assert!(matches!(err, Error::ReceiptCorrupt { .. }), "{err}");
}

#[test]
fn b38_pruning_keeps_seven_days_and_the_newest_64() {
    let (_tmp, home) = home();
    let store = ReceiptStore::new(&home);
    // Write all first (store prunes as it goes), then age them: 70 receipts
    // aged 0..70 hours, plus 3 older than a week.
    let ids: Vec<String> = (0..73u64).map(|n| format!("proc_{n:012x}")).collect();
    for id in &ids {
        store.store(&receipt(id)).expect("store");
    }
    let age_of = |n: usize| {
        let n = u64::try_from(n).expect("small");
        if n < 70 {
            Duration::from_secs(3600 * n)
        } else {
            RECEIPT_RETENTION + Duration::from_secs(60 * n)
        }
    };
    let n_present = ids
        .iter()
        .filter(|id| store.path(id).expect("path").exists())
        .count();
    assert_eq!(
        n_present, MAX_RECEIPTS,
        "store prunes to the cap as it writes"
    );
    // Recreate the ones the cap already removed so all 73 exist, then age.
    for id in &ids {
        if !store.path(id).expect("path").exists() {
            let bytes = serde_json::to_vec(&FileV1 {
                version: 1,
                receipt: receipt(id),
            })
            .expect("encode");
            fs::write(store.path(id).expect("path"), bytes).expect("plant");
        }
    }
    for (n, id) in ids.iter().enumerate() {
        set_age(&store.path(id).expect("path"), age_of(n));
    }
    let stale_temp = home.results_dir().join("proc_000000000001.json.tmp-1-1");
    fs::write(&stale_temp, b"{").expect("plant temp");
    set_age(&stale_temp, Duration::from_secs(7200));
    let fresh_temp = home.results_dir().join("proc_000000000002.json.tmp-2-2");
    fs::write(&fresh_temp, b"{").expect("plant temp");

    let report = store.prune().expect("prune");
    assert_eq!(
        report,
        PruneReport {
            n_expired: 3,
            n_over_cap: 6,
            n_logs: 0,
        }
    );
    for (n, id) in ids.iter().enumerate() {
        let kept = store.load(id).expect("load").is_some();
        assert_eq!(kept, n < 64, "{id}");
    }
    assert!(!stale_temp.exists(), "an old temp file is swept");
    assert!(
        fresh_temp.exists(),
        "a young temp file may be a write in progress"
    );
    assert_eq!(store.prune().expect("prune again"), PruneReport::default());
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

/// Writes a session log of `bytes` bytes for `id`, `age` old.
fn log_of(home: &Home, id: &str, bytes: usize, age: Duration) -> std::path::PathBuf {
    let path = home.session_log_path(id);
    fs::create_dir_all(home.session_logs_dir()).expect("the logs dir");
    fs::write(&path, vec![b'x'; bytes]).expect("a log");
    set_age(&path, age);
    path
}

#[test]
fn session_logs_go_with_their_receipts_and_oldest_past_the_budget_never_a_running_ones() {
    let (_tmp, home) = home();
    let hour = Duration::from_secs(3600);
    let store = ReceiptStore::new(&home).with_log_budget(3_100);
    // A receipt past the retention takes its log with it.
    store.store(&receipt("proc_old")).expect("stored");
    set_age(
        &store.path("proc_old").expect("a path"),
        RECEIPT_RETENTION + hour,
    );
    let old_log = log_of(&home, "proc_old", 10, hour);
    // A log with no receipt is a running session's, however long it has been
    // quiet: it stays, even past the budget.
    let quiet = log_of(&home, "proc_quiet", 10, RECEIPT_RETENTION + hour);
    let running = log_of(&home, "proc_running", 2_000, Duration::ZERO);
    // Three finished sessions of 1,000 bytes each: with the running log, 5,000
    // bytes (and 10 quiet ones) against a 3,100-byte budget: the two oldest finished go.
    let mut finished = Vec::new();
    for (n, age) in [(1, 3 * hour), (2, 2 * hour), (3, hour)] {
        let id = format!("proc_done{n}");
        store.store(&receipt(&id)).expect("stored");
        finished.push(log_of(&home, &id, 1_000, age));
    }
    let report = store.prune().expect("pruned");
    assert!(!old_log.exists());
    assert!(
        quiet.exists() && running.exists(),
        "a running session's log was removed"
    );
    assert!(
        !finished[0].exists() && !finished[1].exists(),
        "the oldest finished logs stay"
    );
    assert!(finished[2].exists(), "the newest finished log went");
    // Each store prunes too; this last prune removed the second-oldest finished log.
    assert_eq!(report.n_logs, 1, "{report:?}");
}
