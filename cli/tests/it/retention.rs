//! What leaves the store, and what a receipt keeps (B5, B38): `herd clean`
//! reaches finished sessions only the store knows (across a daemon restart), an idle
//! daemon evicts expired results and their logs on its own schedule, and output a log
//! did not keep is still said to be cut after a restart. Real daemons, real jobs.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::support::{Env, finished_job, stderr, stdout, wait_until};

fn log_path(env: &Env, id: &str) -> PathBuf {
    env.home()
        .join("logs")
        .join("sessions")
        .join(format!("{id}.log"))
}

/// Whether `id`'s completion waits undelivered in the home's ledger, read beside
/// the daemon.
fn unclaimed(env: &Env, id: &str) -> bool {
    rusqlite::Connection::open(env.home().join("state.db"))
        .and_then(|c| {
            c.query_row(
                "SELECT count(*) FROM completions WHERE session_id = ?1 AND delivered_at IS NULL",
                [id],
                |r| r.get::<_, i64>(0),
            )
        })
        .expect("the ledger can be read")
        > 0
}

/// Whether `id` still has a receipt row in the home's store, read beside the daemon.
fn stored(env: &Env, id: &str) -> bool {
    rusqlite::Connection::open(env.home().join("state.db"))
        .and_then(|c| {
            c.query_row(
                "SELECT count(*) FROM results WHERE session_id = ?1",
                [id],
                |r| r.get::<_, i64>(0),
            )
        })
        .expect("the store can be read")
        > 0
}

/// `herd poll ID` says "no session" (exit 2) and not "expired": it was forgotten.
fn assert_forgotten(env: &Env, id: &str) {
    let out = env.run(&["poll", id]);
    assert_eq!(out.status.code(), Some(2), "{id}: {}", stdout(&out));
    assert!(!stderr(&out).contains("expired"), "{}", stderr(&out));
    assert!(!stored(env, id), "{id} still has a receipt");
    assert!(!log_path(env, id).exists(), "{id} still has a log");
}

#[test]
fn b38_clean_forgets_finished_sessions_only_the_store_knows_after_a_restart() {
    let env = Env::new();
    let alice_old = finished_job(&env, "alice", "alice-before");
    let bob_old = finished_job(&env, "bob", "bob-before");
    // After a crash the finished sessions are the store's alone.
    env.crash_daemon();
    assert!(
        env.ps_row(&["--all", "--owner", "alice"], &alice_old)
            .is_some()
    );
    let alice_new = finished_job(&env, "alice", "alice-after");
    // Too young for the filter: nothing goes.
    let none = env.json(&["clean", "--owner", "alice", "--older-than", "1h", "--json"]);
    assert_eq!(none["forgotten"], 0, "{none}");
    // Alice's, from the store and from memory alike; bob's stays.
    let cleaned = env.json(&["clean", "--owner", "alice", "--json"]);
    let mut ids: Vec<&str> = cleaned["session_ids"]
        .as_array()
        .expect("ids")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    ids.sort_unstable();
    let mut want = vec![alice_old.as_str(), alice_new.as_str()];
    want.sort_unstable();
    assert_eq!(ids, want, "{cleaned}");
    assert_forgotten(&env, &alice_old);
    assert_forgotten(&env, &alice_new);
    assert!(env.ps_row(&["--all"], &alice_old).is_none());
    assert_eq!(env.poll_json("bob-before")["exit_code"], 3);
    // Once more after a clean shutdown: every owner's.
    env.ok(&["shutdown", "--keep-jobs"]);
    let all = env.json(&["clean", "--every-owner", "--json"]);
    assert_eq!(all["forgotten"], 1, "{all}");
    assert_forgotten(&env, &bob_old);
    let out = env.run(&["poll", "bob-before"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
}

#[test]
fn b38_an_idle_daemon_evicts_expired_results_and_their_logs_on_schedule() {
    let env = Env::new();
    // Long enough that the result is still there when first looked at on a loaded
    // machine (a 2 s one could expire before).
    std::fs::write(env.home().join("config.toml"), "result_ttl_seconds = 10\n")
        .expect("write the config");
    let id = finished_job(&env, "cli", "idle");
    assert!(stored(&env, &id) && log_path(&env, &id).exists());
    // Nothing more is asked of the daemon: its own timer evicts the result.
    let evicted = wait_until(Duration::from_secs(60), || {
        !log_path(&env, &id).exists() && !stored(&env, &id)
    });
    assert!(
        evicted.is_ok(),
        "an idle daemon kept an expired result: log {}, row {}",
        log_path(&env, &id).exists(),
        stored(&env, &id)
    );
    for args in [["poll", id.as_str()], ["poll", "idle"]] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("expired on"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn b5_b38_output_a_capped_log_did_not_keep_is_flagged_after_a_restart() {
    let env = Env::new();
    std::fs::write(env.home().join("config.toml"), "log_cap_bytes = 1000\n")
        .expect("write the config");
    let id = env.start_json(&["--", "head -c 5000 /dev/zero | tr '\\0' y; echo; exit 0"]);
    let out = env.run(&["wait", "--json", &id, "--timeout", "20"]);
    let waited: Value = serde_json::from_slice(&out.stdout).expect("wait answers JSON");
    let n = waited["bytes_not_kept"].as_u64().unwrap_or(0);
    assert!(n > 0, "the cap cut the log: {waited}");
    // The answer came after the receipt's commit.
    assert!(stored(&env, &id), "answered before the receipt was stored");
    env.crash_daemon();
    // The next daemon answers from the receipt and still says so.
    let polled = env.poll_json(&id);
    assert!(
        polled["note"]
            .as_str()
            .is_some_and(|n| n.contains("receipt")),
        "{polled}"
    );
    assert_eq!(polled["bytes_not_kept"].as_u64(), Some(n), "{polled}");
    let out = env.run(&["wait", "--json", &id, "--timeout", "5"]);
    let waited: Value = serde_json::from_slice(&out.stdout).expect("wait answers JSON");
    assert_eq!(waited["bytes_not_kept"].as_u64(), Some(n), "{waited}");
    let logs = env.json(&["logs", "--json", &id]);
    assert_eq!(logs["bytes_not_kept"].as_u64(), Some(n), "{logs}");
    for args in [
        ["wait", id.as_str()],
        ["poll", id.as_str()],
        ["logs", id.as_str()],
    ] {
        let out = env.run(&args);
        assert!(
            stderr(&out).contains("output incomplete"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// A page by line number is served from the log file after a restart whenever the
/// file holds the whole output: a log that filled its cap exactly lost nothing, and
/// a cap lowered since cuts no log written before. Only output the cap really cut
/// (counted when it was ingested) sends a page to the receipt's tail.
#[test]
fn b5_b38_a_log_that_filled_its_cap_exactly_pages_from_its_file_after_a_restart() {
    let env = Env::new();
    let config = env.home().join("config.toml");
    std::fs::write(&config, "log_cap_bytes = 6000\n").expect("write the config");
    let exact = env.start_json(&["--", "seq 1 2000 | head -c 6000"]);
    let under = env.start_json(&["--", "seq 1 1000"]);
    let over = env.start_json(&["--", "seq 1 2000"]);
    for id in [&exact, &under, &over] {
        let waited = env.json(&["wait", "--json", id, "--timeout", "20"]);
        assert_eq!(waited["exit_code"], 0, "{waited}");
    }
    assert_eq!(
        std::fs::metadata(log_path(&env, &exact))
            .map(|m| m.len())
            .ok(),
        Some(6000)
    );
    env.crash_daemon();
    // The next daemon runs with a lower cap than the logs were written under.
    std::fs::write(&config, "log_cap_bytes = 1000\n").expect("write the config");
    for id in [&exact, &under] {
        let page = env.json(&["logs", "--json", id, "--offset", "100", "--limit", "2"]);
        assert_eq!(page["output"], "101\n102", "{page}");
        assert!(
            page["note"]
                .as_str()
                .is_some_and(|n| n.contains("answered from the session's log file")),
            "{page}"
        );
    }
    // The cap did cut this one: its page comes from the receipt's tail, and says why.
    let page = env.json(&["logs", "--json", &over, "--offset", "0", "--limit", "1"]);
    let note = page["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("holds only the first 6000 bytes")
            && note.contains("later bytes were not kept"),
        "{page}"
    );
}

/// An answer never precedes the commit of what it reports: a daemon
/// SIGKILLed right after a `wait`, `poll` or `kill` answer about a finished session
/// has its receipt in the store already (the shim's exit record aside).
#[test]
fn b38_a_daemon_killed_right_after_a_wait_poll_or_kill_answer_kept_the_receipt() {
    let env = Env::new();
    for round in 0..3 {
        // wait
        let id = env.start_json(&["--", "echo waited; exit 3"]);
        let out = env.run(&["wait", &id, "--timeout", "20"]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "round {round}: {}",
            stderr(&out)
        );
        env.crash_daemon();
        assert!(
            stored(&env, &id),
            "round {round}: wait answered before the receipt"
        );
        // poll: the first answer that says finished
        let id = env.start_json(&["--", "echo polled; exit 4"]);
        wait_until(Duration::from_secs(20), || {
            env.poll_json(&id)["status"] != "running"
        })
        .expect("the job ends");
        env.crash_daemon();
        assert!(
            stored(&env, &id),
            "round {round}: poll answered before the receipt"
        );
        // kill
        let id = env.start_json(&["--", "sleep 60"]);
        let killed = env.json(&["kill", "--json", &id]);
        assert_eq!(killed["status"], "killed", "round {round}: {killed}");
        env.crash_daemon();
        assert!(
            stored(&env, &id),
            "round {round}: kill answered before the receipt"
        );
        // The next daemon answers from the receipt.
        assert_eq!(env.poll_json(&id)["completion_reason"], "killed");
    }
}

/// A completion nobody drains leaves the ledger after `result_ttl` on the retention
/// timer's schedule, with no consumer and no restart (B29).
#[test]
fn b29_b38_an_unclaimed_completion_expires_on_schedule() {
    let env = Env::new();
    // Long enough that the completion is still there when first looked at on a
    // loaded machine (a 2 s one could expire before).
    std::fs::write(env.home().join("config.toml"), "result_ttl_seconds = 10\n")
        .expect("write the config");
    let id = env.start_json(&["--notify", "--owner", "nobody-drains", "--", "exit 0"]);
    let out = env.run(&["wait", &id, "--timeout", "20"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        unclaimed(&env, &id),
        "the completion was committed undelivered"
    );
    let gone = wait_until(Duration::from_secs(60), || !unclaimed(&env, &id));
    assert!(gone.is_ok(), "an unclaimed completion outlived result_ttl");
}

/// A finished session whose shim still holds a leftover is held again by the next
/// daemon, and output its capped log did not keep is still said to be cut (B5): its `poll` carries the receipt's `bytes_not_kept`.
#[test]
fn b5_a_lingering_session_held_after_a_restart_still_says_its_log_was_cut() {
    let mut env = Env::new();
    env.vars
        .push(("HERD_CONTAINMENT".to_owned(), "subreaper".to_owned()));
    std::fs::write(env.home().join("config.toml"), "log_cap_bytes = 1000\n")
        .expect("write the config");
    let id = env.start_json(&[
        "--",
        "head -c 5000 /dev/zero | tr '\\0' y; echo; sleep 3791 & exit 0",
    ]);
    let waited = env.json(&["wait", "--json", &id, "--timeout", "20"]);
    let n = waited["bytes_not_kept"].as_u64().unwrap_or(0);
    assert!(n > 0, "the cap cut the log: {waited}");
    env.crash_daemon();
    let polled = env.poll_json(&id);
    let held = polled["leftovers"].as_array().map_or(0, Vec::len);
    // End the leftover before any assertion can leave it behind.
    let killed = env.json(&["kill", "--json", &id]);
    assert_eq!(held, 1, "the leftover is held again: {polled}");
    assert_eq!(killed["status"], "killed", "{killed}");
    assert_eq!(polled["bytes_not_kept"].as_u64(), Some(n), "{polled}");
}

// B38: a finished session that printed nothing has an empty log after a restart
// (it never made a log file): every log route answers it, none fails.
#[test]
fn b38_the_log_of_a_silent_finished_session_reads_empty_after_a_restart() {
    let env = Env::new();
    let id = env.start_json(&["--", "true"]);
    let out = env.run(&["wait", &id, "--timeout", "20"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    env.ok(&["shutdown", "--keep-jobs"]);
    let out = env.run(&["logs", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    let answer: Value =
        serde_json::from_str(&env.ok(&["logs", "--json", &id])).expect("logs --json is JSON");
    assert_eq!(answer["output"], "", "{answer}");
    assert_eq!(answer["next_byte"], 0, "{answer}");
    for args in [
        &["logs", "-f", id.as_str()][..],
        &["logs", "--offset", "0", "--limit", "5", id.as_str()],
    ] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    }
}
