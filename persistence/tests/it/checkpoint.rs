//! Checkpoint tests that need more than one process or a checked-in file.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use herd_persistence::{CheckpointStore, Home, Mode, SessionRecord, Writer};

use crate::support::{self, ChildTest};

const DEADLINE: Duration = Duration::from_secs(30);

fn record(id: String) -> SessionRecord {
    SessionRecord {
        log_path: PathBuf::from(format!("/h/logs/sessions/{id}.log")),
        id,
        command: "sleep 1000".to_owned(),
        pid: 4242,
        pgid: 4242,
        start_time: Some(1),
        task_id: String::new(),
        owner_task_id: String::new(),
        session_key: String::new(),
        mode: Mode::Pipe,
        notify: false,
        watch_patterns: Vec::new(),
        heartbeat_seconds: 0,
        completion_output_chars: 0,
        persist_on_release: false,
        cwd: None,
        started_at: 1.0,
        shim: None,
        name: None,
        options: None,
        command_given: None,
        runs: None,
    }
}

/// The sessions a writer tagged `tag` lists in round `k`: 1 to 5 of them, so
/// a torn or lost update shows up as a set that matches no round.
fn round(tag: &str, k: usize) -> BTreeSet<String> {
    (0..=k % 5).map(|j| format!("proc_{tag}_{k}_{j}")).collect()
}

const ROUNDS: usize = 40;

#[test]
fn b27_fixture_v1_checkpoint_keeps_loading() {
    let (_tmp, home) = support::temp_home();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1_checkpoint.json");
    fs::copy(&fixture, home.checkpoint_path()).expect("copy the fixture into the home");
    let loaded = CheckpointStore::new(&home)
        .load()
        .expect("load the v1 fixture");
    assert_eq!(loaded.moved_aside, None);
    assert_eq!(loaded.entries.len(), 2);
    let first = &loaded.entries[0];
    assert_eq!(first.writer, Writer::new(4100, Some(88123)));
    let s = &first.session;
    assert_eq!(s.id, "proc_0123456789ab");
    assert_eq!((s.pid, s.pgid, s.start_time), (4242, 4242, Some(99001)));
    assert_eq!(s.owner_task_id, "sa-child-7");
    assert_eq!(s.mode, Mode::Pipe);
    assert!(s.notify && s.persist_on_release);
    assert_eq!(s.watch_patterns, ["Compiled successfully", "ERROR"]);
    assert_eq!(
        (s.heartbeat_seconds, s.completion_output_chars),
        (120, 4000)
    );
    assert_eq!(s.cwd.as_deref(), Some(Path::new("/home/u/app")));
    assert!((s.started_at - 1_790_000_000.25).abs() < 1e-6);
    // The second entry omits every optional field: defaults fill them.
    let second = &loaded.entries[1];
    assert_eq!(second.writer, Writer::new(5100, None));
    assert_eq!(second.session.mode, Mode::Pty);
    assert_eq!(second.session.start_time, None);
    assert!(second.session.watch_patterns.is_empty() && second.session.cwd.is_none());
    // The file is imported into the store and removed; the rows load again.
    assert!(!home.checkpoint_path().exists());
    assert_eq!(
        CheckpointStore::new(&home).load().expect("load again"),
        loaded
    );
}

#[test]
fn b27_fixture_v1_pending_entry_keeps_loading_beside_the_checkpoint() {
    let (_tmp, home) = support::temp_home();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    fs::copy(data.join("v1_checkpoint.json"), home.checkpoint_path())
        .expect("copy the checkpoint fixture into the home");
    let pending_dir = home.checkpoint_pending_dir();
    fs::create_dir(&pending_dir).expect("the pending directory");
    let pending = pending_dir.join("proc_00aa11bb22cc.json");
    fs::copy(data.join("v1_pending_entry.json"), &pending)
        .expect("copy the pending fixture into the home");
    let loaded = CheckpointStore::new(&home)
        .load()
        .expect("load the v1 fixtures");
    let ids: Vec<&str> = loaded
        .entries
        .iter()
        .map(|e| e.session.id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "proc_0123456789ab",
            "proc_ba9876543210",
            "proc_00aa11bb22cc"
        ],
        "the imported entries, oldest first"
    );
    let entry = &loaded.entries[2];
    assert_eq!(entry.writer, Writer::new(4100, Some(88123)));
    assert_eq!(
        (entry.session.pid, entry.session.start_time),
        (4300, Some(99050))
    );
    assert_eq!(entry.session.owner_task_id, "main");
    assert!(entry.session.notify);
    assert_eq!(entry.session.cwd.as_deref(), Some(Path::new("/home/u/api")));
    // Imported into the store, the files are gone.
    assert!(!pending.exists() && !pending_dir.exists());
}

/// Child entry: writes `ROUNDS` rounds of its own sessions once told to go.
#[test]
fn child_checkpoint_writer() {
    if support::role().as_deref() != Some("checkpoint-writer") {
        return;
    }
    let home = Home::new(std::env::var("HERD_IT_HOME").expect("HERD_IT_HOME"));
    let tag = std::env::var("HERD_IT_TAG").expect("HERD_IT_TAG");
    let store = CheckpointStore::new(&home);
    let me = Writer::current();
    support::say("ready");
    let mut go = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut go)
        .expect("wait for go");
    let mut previous = BTreeSet::new();
    for k in 0..ROUNDS {
        let now = round(&tag, k);
        let records: Vec<SessionRecord> = now.iter().cloned().map(record).collect();
        // The sessions of the last round that this one does not list finished.
        let finished: Vec<&str> = previous.difference(&now).map(String::as_str).collect();
        store
            .write_own(&me, &records, &finished)
            .expect("child checkpoint write");
        previous = now;
    }
    support::say("done");
}

#[test]
fn b27_two_writer_processes_never_interleave_or_lose_entries() {
    let (_tmp, home) = support::temp_home();
    let spawn = |tag: &str| {
        let env = HashMap::from([
            ("HERD_IT_HOME", home.root().display().to_string()),
            ("HERD_IT_TAG", tag.to_owned()),
        ]);
        ChildTest::spawn(
            "checkpoint::child_checkpoint_writer",
            "checkpoint-writer",
            &env,
        )
    };
    let mut a = spawn("a");
    let mut b = spawn("b");
    a.expect_line("ready", DEADLINE);
    b.expect_line("ready", DEADLINE);
    let tags = HashMap::from([(a.pid(), "a"), (b.pid(), "b")]);
    a.send("go");
    b.send("go");

    // While both write, every snapshot a third process reads is whole and
    // lists, per writer, exactly one of that writer's rounds.
    let store = CheckpointStore::new(&home);
    let until = Instant::now() + DEADLINE;
    let mut snapshots = 0;
    let mut finals = 0;
    while finals < 2 {
        assert!(
            Instant::now() < until,
            "writers did not finish within {DEADLINE:?}"
        );
        let loaded = store.load().expect("load while writers run");
        assert_eq!(loaded.moved_aside, None, "a reader saw a torn checkpoint");
        let mut per_writer: HashMap<u32, BTreeSet<String>> = HashMap::new();
        for e in &loaded.entries {
            let pid = u32::try_from(e.writer.pid).expect("positive pid");
            per_writer
                .entry(pid)
                .or_default()
                .insert(e.session.id.clone());
        }
        finals = 0;
        for (pid, ids) in &per_writer {
            let tag = tags.get(pid).expect("only the two children write");
            let k = (0..ROUNDS).find(|&k| round(tag, k) == *ids);
            assert!(
                k.is_some(),
                "writer {tag} has a set matching no round: {ids:?}"
            );
            if k == Some(ROUNDS - 1) {
                finals += 1;
            }
        }
        snapshots += 1;
    }
    assert!(a.finish(DEADLINE).contains(&"done".to_owned()));
    assert!(b.finish(DEADLINE).contains(&"done".to_owned()));
    assert!(snapshots > 0);

    let loaded = store.load().expect("final load");
    let ids: BTreeSet<String> = loaded
        .entries
        .iter()
        .map(|e| e.session.id.clone())
        .collect();
    let expected: BTreeSet<String> = round("a", ROUNDS - 1)
        .into_iter()
        .chain(round("b", ROUNDS - 1))
        .collect();
    assert_eq!(ids, expected);
    assert_eq!(
        loaded.entries.len(),
        expected.len(),
        "no session listed twice"
    );
    let names = support::dir_names(home.root());
    assert!(
        names.iter().all(|n| n.starts_with("state.db")),
        "only the store: {names:?}"
    );
}

/// Sessions per round in the kill test: big enough (about 110 KB) that a kill
/// often lands inside a write.
const BIG_ROUND: usize = 200;

fn big_round(k: usize) -> Vec<SessionRecord> {
    (0..BIG_ROUND)
        .map(|j| record(format!("proc_r{k}_{j}")))
        .collect()
}

/// Child entry: rewrites its whole checkpoint in a loop until killed, saying
/// the round after each write returns.
#[test]
fn child_checkpoint_rewriter() {
    if support::role().as_deref() != Some("checkpoint-rewriter") {
        return;
    }
    let home = Home::new(std::env::var("HERD_IT_HOME").expect("HERD_IT_HOME"));
    let first: usize = std::env::var("HERD_IT_FIRST_ROUND")
        .expect("HERD_IT_FIRST_ROUND")
        .parse()
        .expect("numeric round");
    let store = CheckpointStore::new(&home);
    // Every child plays the same writer, as if one process were restarted
    // with its identity intact, so each write replaces the last round.
    let me = Writer::new(7, Some(7));
    support::say("ready");
    for k in first.. {
        let gone: Vec<String> = match k.checked_sub(1) {
            Some(last) => big_round(last).into_iter().map(|r| r.id).collect(),
            None => Vec::new(),
        };
        let gone: Vec<&str> = gone.iter().map(String::as_str).collect();
        store.write_own(&me, &big_round(k), &gone).expect("rewrite");
        support::say(&format!("wrote {k}"));
    }
}

#[test]
fn b27_checkpoint_is_whole_after_sigkill_mid_write() {
    let (_tmp, home) = support::temp_home();
    let store = CheckpointStore::new(&home);
    let mut rng = fastrand::Rng::with_seed(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(3, |d| d.as_secs()),
    );
    let mut first = 0;
    for _ in 0..10 {
        let env = HashMap::from([
            ("HERD_IT_HOME", home.root().display().to_string()),
            ("HERD_IT_FIRST_ROUND", first.to_string()),
        ]);
        let mut child = ChildTest::spawn(
            "checkpoint::child_checkpoint_rewriter",
            "checkpoint-rewriter",
            &env,
        );
        child.expect_line("ready", DEADLINE);
        for _ in 0..rng.usize(0..4) {
            child.next_line(DEADLINE, "a rewrite");
        }
        support::random_delay(&mut rng, Duration::from_millis(20));
        let said = child.kill_and_drain(DEADLINE);
        let last_said = said
            .iter()
            .rev()
            .find_map(|l| l.strip_prefix("wrote "))
            .map(|k| k.parse::<usize>().expect("numeric round"));

        // Whatever the kill interrupted, the file is one whole round: the
        // last one reported, or the next one if the kill came after the
        // rename but before the line.
        let loaded = store.load().expect("load after the kill");
        assert_eq!(loaded.moved_aside, None, "the kill tore the checkpoint");
        let ids: BTreeSet<String> = loaded
            .entries
            .iter()
            .map(|e| e.session.id.clone())
            .collect();
        let round_of = |id: &str| -> usize {
            let rest = id.strip_prefix("proc_r").expect("a rewriter id");
            rest.split('_')
                .next()
                .expect("round")
                .parse()
                .expect("numeric round")
        };
        let Some(any) = ids.first() else {
            // Killed before the very first rename: still no checkpoint.
            assert!(
                first == 0 && last_said.is_none(),
                "a reported round was lost"
            );
            continue;
        };
        let k = round_of(any);
        let rounds: BTreeSet<usize> = ids.iter().map(|id| round_of(id)).collect();
        assert_eq!(rounds, BTreeSet::from([k]), "the checkpoint mixes rounds");
        assert_eq!(ids.len(), BIG_ROUND, "round {k} is not whole");
        match last_said {
            // The last reported round, or the next one if the kill came after
            // the rename but before the line.
            Some(said) => assert!(k == said || k == said + 1, "round {k} after {said}"),
            // Killed before this child's first line: the previous child's last
            // round, or this child's first one.
            None => assert!(k + 1 == first || k == first, "round {k}, first {first}"),
        }
        first = k + 1;
    }
    let names = support::dir_names(home.root());
    assert!(
        names.iter().all(|n| n.starts_with("state.db")),
        "only the store: {names:?}"
    );
}
