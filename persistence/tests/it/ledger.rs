//! Ledger exactly-once under SIGKILL, and the checked-in v1 ledger fixture.
//!
//! A child process commits completions and delivers them (list undelivered,
//! mark delivered) in a loop, printing a line after each step returns, and is
//! SIGKILLed after a random number of lines, so the kill lands anywhere: mid
//! commit, between a commit and its line, mid delivery. The next child replays
//! what the last one left undelivered. At the end the parent replays the rest
//! and checks, from the children's lines and the ledger itself, that every
//! completion whose commit returned was delivered, that `mark_delivered`
//! returned `true` at most once per completion, and that nothing acknowledged
//! was ever offered again.
//!
//! `HERD_SOAK_CYCLES` raises the number of kill cycles (default 20); `cargo
//! xtask soak` runs it with 100+.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use herd_persistence::{CompletionRecord, Home, Ledger};

use crate::support::{self, ChildTest};

const DEADLINE: Duration = Duration::from_secs(30);

fn completion(id: &str) -> CompletionRecord {
    CompletionRecord {
        completion_id: id.to_owned(),
        session_id: format!("proc_{id}"),
        owner_task_id: "owner".to_owned(),
        task_id: "task".to_owned(),
        session_key: String::new(),
        event: serde_json::json!({"type": "completion", "session_id": format!("proc_{id}")}),
        created_at: 1_790_000_000.0,
    }
}

/// Offers every undelivered completion and acknowledges it, saying so.
fn deliver_all(ledger: &Ledger, say: &mut dyn FnMut(String)) {
    for record in ledger.undelivered().expect("list undelivered") {
        let id = record.completion_id;
        say(format!("deliver {id}"));
        if ledger.mark_delivered(&id).expect("mark delivered") {
            say(format!("acked {id}"));
        }
    }
}

/// Child entry: replays, then commits and delivers until it is killed.
#[test]
fn child_ledger_worker() {
    if support::role().as_deref() != Some("ledger-worker") {
        return;
    }
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is set"));
    let home = Home::new(var("HERD_IT_HOME"));
    let cycle = var("HERD_IT_CYCLE");
    let seed: u64 = var("HERD_IT_SEED").parse().expect("numeric seed");
    let mut say = |line: String| support::say(&line);
    let ledger = Ledger::create(&home).expect("child opens the ledger");
    say("open".to_owned());
    deliver_all(&ledger, &mut say);
    if let Ok(id) = std::env::var("HERD_IT_RECOMMIT") {
        let new = ledger.commit(&completion(&id)).expect("recommit");
        say(format!("recommitted {id} {new}"));
    }
    let mut rng = fastrand::Rng::with_seed(seed);
    for n in 0.. {
        let id = format!("c{cycle}-{n}");
        say(format!("committing {id}"));
        ledger.commit(&completion(&id)).expect("commit");
        say(format!("committed {id}"));
        if rng.u8(..3) == 0 {
            deliver_all(&ledger, &mut say);
        }
    }
}

fn cycles() -> usize {
    std::env::var("HERD_SOAK_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

#[test]
fn b29_ledger_exactly_once_across_sigkills() {
    let (_tmp, home) = support::temp_home();
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(7, |d| d.as_secs());
    let mut rng = fastrand::Rng::with_seed(seed);
    let n_cycles = cycles();
    let mut lines: Vec<String> = Vec::new();
    let mut recommit: Option<String> = None;
    for cycle in 0..n_cycles {
        let mut env = HashMap::from([
            ("HERD_IT_HOME", home.root().display().to_string()),
            ("HERD_IT_CYCLE", cycle.to_string()),
            ("HERD_IT_SEED", rng.u64(..).to_string()),
        ]);
        if let Some(id) = &recommit {
            env.insert("HERD_IT_RECOMMIT", id.clone());
        }
        let mut child = ChildTest::spawn("ledger::child_ledger_worker", "ledger-worker", &env);
        child.expect_line("open", DEADLINE);
        for _ in 0..rng.usize(1..=30) {
            if child.next_line(DEADLINE, "a worker step").is_none() {
                break;
            }
        }
        support::random_delay(&mut rng, Duration::from_millis(5));
        let said = child.kill_and_drain(DEADLINE);
        recommit = said
            .iter()
            .rev()
            .find_map(|l| l.strip_prefix("committing "))
            .map(str::to_owned);
        lines.extend(said);
    }

    // The restart after the last kill: the parent replays what is left.
    let ledger = Ledger::open(&home)
        .expect("open the ledger")
        .expect("the children created it");
    deliver_all(&ledger, &mut |line| lines.push(line));

    let context = format!("seed {seed}, {n_cycles} cycles");
    let mut attempted = Vec::new();
    let mut committed = HashSet::new();
    let mut acks: HashMap<String, usize> = HashMap::new();
    for line in &lines {
        let (verb, id) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        let id = id.split(' ').next().unwrap_or_default().to_owned();
        match verb {
            "committing" => attempted.push(id),
            "committed" => {
                committed.insert(id);
            }
            "acked" => *acks.entry(id).or_default() += 1,
            "deliver" => assert!(
                !acks.contains_key(&id),
                "{id} was offered again after it was acknowledged ({context})"
            ),
            _ => {}
        }
    }
    assert!(
        committed.len() >= n_cycles,
        "the workers made progress ({context})"
    );
    for (id, n) in &acks {
        assert_eq!(*n, 1, "{id} was acknowledged {n} times ({context})");
    }
    let mut silent = 0;
    for id in &attempted {
        match ledger.is_delivered(id).expect("look up") {
            Some(true) => {
                if !acks.contains_key(id) {
                    // Killed between `mark_delivered` returning and the line.
                    silent += 1;
                }
            }
            Some(false) => panic!("{id} is still undelivered after the final replay ({context})"),
            None => assert!(
                !committed.contains(id),
                "{id} was committed but the ledger lost it ({context})"
            ),
        }
    }
    assert!(
        silent <= n_cycles,
        "{silent} deliveries without an acknowledgement line in {n_cycles} kills ({context})"
    );
    assert!(ledger.undelivered().expect("list").is_empty());
}

#[test]
fn b29_fixture_v1_ledger_keeps_opening() {
    let (_tmp, home) = support::temp_home();
    let sql =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1_ledger.sql"))
            .expect("read the v1 ledger fixture");
    {
        let conn = rusqlite::Connection::open(home.ledger_path()).expect("build the fixture db");
        conn.execute_batch(&sql).expect("load the fixture sql");
    }
    let ledger = Ledger::open(&home).expect("open v1").expect("exists");
    let pending = ledger.undelivered().expect("list");
    let ids: Vec<&str> = pending.iter().map(|r| r.completion_id.as_str()).collect();
    assert_eq!(ids, ["cmp_0002", "cmp_0003"]);
    let first = &pending[0];
    assert_eq!(first.session_id, "proc_00000000000b");
    assert_eq!(first.owner_task_id, "sa-child-1");
    assert_eq!(first.event["exit_code"], 1);
    assert_eq!(first.event["output"], "boom\n");
    assert!((first.created_at - 1_790_000_100.5).abs() < 1e-6);
    assert_eq!(
        ledger.is_delivered("cmp_0001").expect("look up"),
        Some(true)
    );
    assert!(ledger.mark_delivered("cmp_0002").expect("mark"));
    assert!(ledger.commit(&completion("cmp_0004")).expect("commit"));
    let ids: Vec<String> = ledger
        .undelivered()
        .expect("list")
        .into_iter()
        .map(|r| r.completion_id)
        .collect();
    assert_eq!(ids, ["cmp_0003", "cmp_0004"]);
}

#[test]
fn b29_b38_v1_ledger_is_migrated_with_its_rows_and_gains_the_result_store() {
    let (_tmp, home) = support::temp_home();
    let sql =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1_ledger.sql"))
            .expect("read the v1 ledger fixture");
    {
        let conn = rusqlite::Connection::open(home.ledger_path()).expect("build the fixture db");
        conn.execute_batch(&sql).expect("load the fixture sql");
    }
    // The writer migrates; the completions are kept as they were.
    let ledger = Ledger::create(&home).expect("create migrates v1");
    let ids: Vec<String> = ledger
        .undelivered()
        .expect("list")
        .into_iter()
        .map(|r| r.completion_id)
        .collect();
    assert_eq!(ids, ["cmp_0002", "cmp_0003"]);
    drop(ledger);
    let version: i64 = rusqlite::Connection::open(home.ledger_path())
        .expect("open raw")
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    assert_eq!(version, herd_persistence::LEDGER_VERSION);
    let store = herd_persistence::ReceiptStore::new(&home);
    assert_eq!(store.load("proc_00000000000b").expect("load"), None);
    assert!(store.ids_with_prefix("proc_").expect("prefix").is_empty());
}

#[test]
fn b38_fixture_v1_result_receipt_file_is_imported_into_the_store() {
    let (_tmp, home) = support::temp_home();
    let text = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1_result_receipt.json"),
    )
    .expect("read the v1 receipt fixture");
    fs::create_dir_all(home.results_dir()).expect("results dir");
    let file = home.results_dir().join("proc_00000000c0de.json");
    fs::write(&file, text).expect("plant the fixture");
    // The fixture finished in 2026: a TTL of ten years keeps it.
    let store = herd_persistence::ReceiptStore::new(&home)
        .with_ttl(std::time::Duration::from_secs(10 * 365 * 86_400));
    let r = store
        .load("proc_00000000c0de")
        .expect("load")
        .expect("imported");
    assert_eq!(r.exit_code, Some(3));
    assert_eq!(r.owner_task_id, "agent-7");
    assert_eq!(r.command, "cargo test --token=***");
    assert!(r.output.ends_with("1 failed\n"), "{}", r.output);
    assert_eq!(r.name, None);
    assert!(!file.exists(), "the imported file is removed");
    assert!(!home.results_dir().exists(), "and the emptied directory");
    // An imported receipt kept no restart spec: restart says so.
    assert_eq!(store.restart_spec("proc_00000000c0de").expect("spec"), None);
}
