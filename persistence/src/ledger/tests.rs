//! Tests for the completion ledger: real SQLite files in a temp home.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::UNCLAIMED_RETENTION;

fn home() -> (tempfile::TempDir, Home) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let home = Home::new(tmp.path());
    (tmp, home)
}

fn completion(n: u32) -> CompletionRecord {
    CompletionRecord {
        completion_id: format!("cmp_{n}"),
        session_id: format!("proc_{n:012x}"),
        owner_task_id: "owner".to_owned(),
        task_id: "task".to_owned(),
        session_key: "key".to_owned(),
        event: serde_json::json!({"type": "completion", "exit_code": n, "output": "ok\n"}),
        created_at: 1_790_000_000.0 + f64::from(n),
    }
}

fn ids(records: &[CompletionRecord]) -> Vec<String> {
    records.iter().map(|r| r.completion_id.clone()).collect()
}

/// A ledger with ten completions, closed, so its bytes are all in the main file.
fn ledger_with_rows(home: &Home) {
    let ledger = Ledger::create(home).expect("create");
    for n in 0..10 {
        ledger.commit(&completion(n)).expect("commit");
    }
    drop(ledger);
    assert!(
        !home.root().join("state.db-wal").exists(),
        "closing checkpoints the WAL"
    );
}

#[test]
fn b29_commit_then_deliver_once() {
    let (_tmp, home) = home();
    let ledger = Ledger::create(&home).expect("create");
    assert!(ledger.commit(&completion(1)).expect("commit"));
    assert!(ledger.commit(&completion(2)).expect("commit"));
    assert_eq!(
        ledger.undelivered().expect("list"),
        [completion(1), completion(2)]
    );
    assert!(ledger.mark_delivered("cmp_1").expect("mark"));
    assert!(!ledger.mark_delivered("cmp_1").expect("mark again"));
    assert_eq!(ledger.is_delivered("cmp_1").expect("look up"), Some(true));
    assert_eq!(ledger.is_delivered("cmp_2").expect("look up"), Some(false));
    assert_eq!(ledger.is_delivered("cmp_9").expect("look up"), None);
    assert_eq!(ids(&ledger.undelivered().expect("list")), ["cmp_2"]);
    let err = ledger.mark_delivered("cmp_9").unwrap_err();
    assert!(
        matches!(err, Error::LedgerUnknownCompletion { .. }),
        "{err}"
    );
}

#[test]
fn b29_commit_of_the_same_id_is_idempotent() {
    let (_tmp, home) = home();
    let ledger = Ledger::create(&home).expect("create");
    assert!(ledger.commit(&completion(1)).expect("commit"));
    let mut changed = completion(1);
    changed.event = serde_json::json!({"type": "completion", "exit_code": 99});
    assert!(!ledger.commit(&changed).expect("recommit"));
    assert_eq!(ledger.undelivered().expect("list"), [completion(1)]);
    ledger.mark_delivered("cmp_1").expect("mark");
    // Committing again after delivery does not make it undelivered.
    assert!(!ledger.commit(&completion(1)).expect("recommit"));
    assert!(ledger.undelivered().expect("list").is_empty());
}

#[test]
fn b29_survives_reopen_in_wal_mode_with_private_files() {
    let (_tmp, home) = home();
    {
        let ledger = Ledger::create(&home).expect("create");
        ledger.commit(&completion(1)).expect("commit");
        ledger.commit(&completion(2)).expect("commit");
        ledger.mark_delivered("cmp_2").expect("mark");
        let mode: String = ledger
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .expect("journal mode");
        assert_eq!(mode, "wal");
        let sync: i64 = ledger
            .conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .expect("synchronous");
        assert_eq!(sync, 1, "NORMAL: durable against a crash of the process");
        for name in ["state.db", "state.db-wal", "state.db-shm"] {
            let mode = fs::metadata(home.root().join(name))
                .expect("stat")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name}");
        }
    }
    let ledger = Ledger::open(&home).expect("open").expect("exists");
    assert_eq!(ledger.undelivered().expect("list"), [completion(1)]);
}

#[test]
fn b29_missing_ledger_replays_nothing_and_creates_nothing() {
    let (_tmp, home) = home();
    assert!(Ledger::open(&home).expect("open").is_none());
    assert_eq!(fs::read_dir(home.root()).expect("list").count(), 0);
    let gone = Home::new(home.root().join("deleted-profile"));
    assert!(Ledger::open(&gone).expect("open").is_none());
    let err = Ledger::create(&gone).unwrap_err();
    assert!(matches!(err, Error::HomeMissing { .. }), "{err}");
    assert!(!gone.root().exists());
}

#[test]
fn b29_empty_file_from_a_crashed_create_counts_as_missing() {
    let (_tmp, home) = home();
    fs::write(home.ledger_path(), b"").expect("plant an empty file");
    assert!(Ledger::open(&home).expect("open").is_none());
    assert_eq!(fs::metadata(home.ledger_path()).expect("stat").len(), 0);
    let ledger = Ledger::create(&home).expect("create initialises it");
    assert!(ledger.commit(&completion(1)).expect("commit"));
}

fn assert_corrupt_and_untouched(home: &Home, bytes: &[u8]) {
    fs::write(home.ledger_path(), bytes).expect("plant damaged ledger");
    let err = Ledger::open(home).unwrap_err();
    assert!(matches!(err, Error::LedgerCorrupt { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("damaged") && msg.contains("state.db"), "{msg}");
    let err = Ledger::create(home).unwrap_err();
    assert!(matches!(err, Error::LedgerCorrupt { .. }), "{err}");
    assert_eq!(fs::read(home.ledger_path()).expect("read back"), bytes);
}

#[test]
fn b29_truncated_ledger_is_reported_and_not_overwritten() {
    let (_tmp, home) = home();
    ledger_with_rows(&home);
    let full = fs::read(home.ledger_path()).expect("read");
    assert!(full.len() > 4096, "the ledger spans several pages");
    // Cut inside the second page: the header promises pages that are gone.
    assert_corrupt_and_untouched(&home, &full[..4096 + 100]);
    // Cut inside the header itself.
    assert_corrupt_and_untouched(&home, &full[..60]);
}

#[test]
fn b29_garbage_and_foreign_databases_are_reported() {
    let (_tmp, home) = home();
    assert_corrupt_and_untouched(&home, &[0x5a; 8192]);
    let other = home.root().join("other.db");
    {
        let conn = Connection::open(&other).expect("foreign db");
        conn.execute_batch("CREATE TABLE notes (x TEXT);")
            .expect("foreign schema");
    }
    let foreign = fs::read(&other).expect("read foreign");
    assert_corrupt_and_untouched(&home, &foreign);
}

#[test]
fn b29_newer_ledger_version_is_refused() {
    let (_tmp, home) = home();
    ledger_with_rows(&home);
    {
        let conn = Connection::open(home.ledger_path()).expect("open raw");
        conn.pragma_update(None, "user_version", LEDGER_VERSION + 1)
            .expect("bump version");
    }
    let err = Ledger::open(&home).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LedgerVersion {
                found,
                supported: LEDGER_VERSION,
                ..
            } if found == LEDGER_VERSION + 1
        ),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade herd"), "{err}");
}

#[test]
fn prune_keeps_undelivered_and_recent() {
    let (_tmp, home) = home();
    let ledger = Ledger::create(&home).expect("create");
    for n in 0..3 {
        ledger.commit(&completion(n)).expect("commit");
    }
    ledger.mark_delivered("cmp_0").expect("mark");
    ledger.mark_delivered("cmp_1").expect("mark");
    ledger
        .conn
        .execute(
            "UPDATE completions SET delivered_at = delivered_at - 8 * 86400 WHERE completion_id = 'cmp_0'",
            [],
        )
        .expect("age one delivery");
    assert_eq!(
        ledger.prune_delivered(DELIVERED_RETENTION).expect("prune"),
        1
    );
    assert_eq!(ledger.is_delivered("cmp_0").expect("look up"), None);
    assert_eq!(ledger.is_delivered("cmp_1").expect("look up"), Some(true));
    assert_eq!(ids(&ledger.undelivered().expect("list")), ["cmp_2"]);
}

#[test]
fn b29_concurrent_creators_share_one_ledger() {
    let (_tmp, home) = home();
    let barrier = std::sync::Barrier::new(4);
    std::thread::scope(|scope| {
        for n in 0..4 {
            let (home, barrier) = (&home, &barrier);
            scope.spawn(move || {
                barrier.wait();
                let ledger = Ledger::create(home).expect("concurrent create");
                assert!(ledger.commit(&completion(n)).expect("commit"));
            });
        }
    });
    let ledger = Ledger::open(&home).expect("open").expect("exists");
    let mut got = ids(&ledger.undelivered().expect("list"));
    got.sort();
    assert_eq!(got, ["cmp_0", "cmp_1", "cmp_2", "cmp_3"]);
}

#[test]
fn b29_unclaimed_completions_expire_after_the_retention_whatever_their_count() {
    let (_tmp, home) = home();
    let ledger = Ledger::create(&home).expect("create");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    for n in 0..6 {
        let mut record = completion(n);
        // cmp_0 is eight days old; the others are fresh.
        record.created_at = if n == 0 { now - 8.0 * 86_400.0 } else { now };
        ledger.commit(&record).expect("commit");
    }
    ledger.mark_delivered("cmp_5").expect("mark");
    // Only cmp_0 is too old; no count cap drops the others.
    assert_eq!(
        ledger
            .expire_unclaimed(UNCLAIMED_RETENTION)
            .expect("expire"),
        1
    );
    assert_eq!(
        ids(&ledger.undelivered().expect("list")),
        ["cmp_1", "cmp_2", "cmp_3", "cmp_4"]
    );
    // Delivered rows are not this rule's.
    assert_eq!(ledger.is_delivered("cmp_5").expect("look up"), Some(true));
    assert_eq!(
        ledger
            .expire_unclaimed(UNCLAIMED_RETENTION)
            .expect("expire"),
        0
    );
}

#[test]
fn b29_a_changed_undelivered_completion_is_replaced_and_a_delivered_one_kept() {
    let (_tmp, home) = home();
    let ledger = Ledger::create(&home).expect("create");
    ledger.commit(&completion(1)).expect("commit");
    let mut changed = completion(1);
    changed.owner_task_id = "parent".to_owned();
    changed.event = serde_json::json!({"type": "completion", "completion_reason": "killed"});
    assert!(ledger.commit_replacing(&changed).expect("replace"));
    let stored = ledger.undelivered().expect("list");
    assert_eq!(stored[0].owner_task_id, "parent");
    assert_eq!(stored[0].event["completion_reason"], "killed");
    ledger.mark_delivered("cmp_1").expect("mark");
    let mut late = completion(1);
    late.owner_task_id = "someone".to_owned();
    assert!(
        !ledger.commit_replacing(&late).expect("replace"),
        "a delivered row changed"
    );
    assert!(ledger.undelivered().expect("list").is_empty());
}

#[test]
fn b29_a_batch_of_acknowledgements_delivers_each_once_and_skips_unknown_ids() {
    let (_tmp, home) = home();
    let ledger = Ledger::create(&home).expect("create");
    for n in 0..5 {
        ledger.commit(&completion(n)).expect("commit");
    }
    assert!(ledger.mark_delivered("cmp_0").expect("mark"));
    let n = ledger
        .mark_delivered_many(None, &["cmp_0", "cmp_1", "cmp_2", "cmp_404", "cmp_3"])
        .expect("batch");
    assert_eq!(n, 3, "cmp_0 was delivered before and cmp_404 never existed");
    assert_eq!(ids(&ledger.undelivered().expect("list")), ["cmp_4"]);
    assert_eq!(
        ledger.mark_delivered_many(None, &["cmp_1"]).expect("again"),
        0
    );
    assert_eq!(ledger.mark_delivered_many(None, &[]).expect("none"), 0);
    assert_eq!(
        ledger
            .mark_delivered_many(Some("someone else"), &["cmp_4"])
            .expect("another owner's"),
        0,
        "an owner acknowledges only its own completions"
    );
    assert_eq!(
        ledger
            .mark_delivered_many(Some("owner"), &["cmp_4"])
            .expect("own"),
        1
    );
}

#[test]
fn b29_a_busy_connection_retries_soon_then_backs_off_until_the_timeout() {
    let waits: Vec<Duration> = (0..).map_while(busy_step).collect();
    assert!(
        waits[0] <= Duration::from_micros(50),
        "the first retry comes within microseconds, not SQLite's 1 ms: {:?}",
        waits[0]
    );
    assert!(
        waits.windows(2).all(|w| w[0] <= w[1]),
        "the waits never shrink"
    );
    assert_eq!(waits.iter().max(), Some(&BUSY_STEP_MAX));
    let total: Duration = waits.iter().sum();
    assert!(
        total >= BUSY_TIMEOUT - BUSY_STEP_MAX && total < BUSY_TIMEOUT + BUSY_STEP_MAX,
        "gives up once the waits add up to the timeout: {total:?}"
    );
    assert_eq!(
        busy_step(-1),
        busy_step(0),
        "a count SQLite never gives is the first"
    );
    assert_eq!(busy_step(i32::MAX), None);
}

#[test]
fn b29_a_writer_meeting_another_connection_s_write_lock_waits_for_it() {
    let (_tmp, home) = home();
    let ledger = Ledger::create(&home).expect("create");
    let holder = connect(ledger.path()).expect("a second connection");
    holder
        .execute_batch("BEGIN IMMEDIATE")
        .expect("take the write lock");
    let (busy, waits) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        ON_BUSY.with(|hook| *hook.borrow_mut() = Some(busy));
        ledger
            .commit(&completion(7))
            .expect("commits once the lock is free")
    });
    // Released only once the writer is seen waiting in the busy handler, so the
    // commit below really met the lock.
    let first = waits.recv_timeout(Duration::from_secs(30));
    holder.execute_batch("COMMIT").expect("release the lock");
    assert_eq!(
        first,
        Ok(0),
        "the writer waits in the busy handler for the lock"
    );
    assert!(writer.join().expect("the writer ran"), "a new completion");
}

thread_local! {
    /// Told each busy wait of this thread's connections (see `busy_wait`).
    pub(super) static ON_BUSY: std::cell::RefCell<Option<std::sync::mpsc::Sender<i32>>> =
        const { std::cell::RefCell::new(None) };
}
