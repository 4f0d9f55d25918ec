//! Durability across restarts: checkpoint (B27), restore (B28, B18), ledger (B29) and
//! result receipts (B38), against real processes, real files and a real SQLite ledger.
//!
//! The crash test re-runs this test binary as a child (`HERD_IT_ROLE=crash-child`,
//! selecting `restore::crash_child`) that embeds a registry, starts sessions, prints
//! a readiness line and is SIGKILLed; the parent then restores a registry on the same
//! home. Without the role the child entry does nothing, so a plain run executes it
//! once as a no-op.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use herd_core::{
    CompletionReason, Event, Home, KillSource, KillStatus, ListFilter, LookupError, Registry,
    RegistryConfig, SessionId, SessionStatus, SpawnRequest, WaitStatus,
};
use herd_persistence::{
    CheckpointStore, Ledger, Mode, ReceiptStore, ResultReceipt, SessionRecord, Writer,
};

use crate::support::{Fixture, group_members, wait_until};

/// The environment variable that turns the child entry into the crashing registry.
const ROLE: &str = "HERD_IT_ROLE";
/// The home the child works in.
const HOME_VAR: &str = "HERD_IT_HOME";
/// Prefix of the lines the child reports on.
const SAY: &str = "herd-child: ";
/// Long sessions the child starts.
const N_LONG: usize = 16;
/// Long sessions the test kills while no registry runs.
const N_KILLED_WHILE_DOWN: usize = 4;
/// A GitHub-token-shaped secret and its masked form.
const GHP: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
const GHP_MASKED: &str = "ghp_ab...6789";

/// The one raw `Command` of this module: this test binary as a child, or a stranger.
#[expect(clippy::disallowed_methods, reason = "test drives a raw child")]
fn raw(program: impl AsRef<std::ffi::OsStr>) -> Command {
    Command::new(program)
}

/// A raw child killed and reaped when dropped.
struct Jod(Child);

impl Drop for Jod {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Jod {
    fn sleep() -> Jod {
        Jod(raw("sleep")
            .arg("120")
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep starts"))
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.0.id()).expect("pids fit in i32")
    }

    fn is_running(&mut self) -> bool {
        self.0.try_wait().expect("the child is ours").is_none()
            && proc_state(self.pid()).is_some_and(|s| s != 'Z' && s != 'T')
    }
}

/// Field 3 of `/proc/<pid>/stat`.
fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    herd_persistence::parse_stat_start_time(&stat)
}

/// A writer identity that no live process has: a reaped child's pid.
fn dead_writer() -> Writer {
    let mut child = raw("true").spawn().expect("true starts");
    let pid = i32::try_from(child.id()).expect("pids fit in i32");
    child.wait().expect("true is reaped");
    Writer::new(pid, Some(1))
}

fn record(home: &Home, id: &str, pid: i32, start_time: Option<u64>) -> SessionRecord {
    SessionRecord {
        id: id.to_owned(),
        command: "sleep 120".to_owned(),
        pid,
        pgid: pid,
        start_time,
        task_id: "t".to_owned(),
        owner_task_id: "t".to_owned(),
        session_key: String::new(),
        mode: Mode::Pipe,
        notify: true,
        watch_patterns: Vec::new(),
        heartbeat_seconds: 0,
        completion_output_chars: 0,
        persist_on_release: false,
        log_path: home.session_log_path(id),
        cwd: None,
        started_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after the epoch")
            .as_secs_f64(),
        shim: None,
        name: None,
        options: None,
        command_given: None,
        runs: None,
    }
}

fn completion_ids(events: &[Event]) -> Vec<String> {
    let mut ids: Vec<String> = events
        .iter()
        .filter(|e| matches!(e, Event::Completion { .. }))
        .filter_map(|e| e.session_id().map(|id| id.as_str().to_owned()))
        .collect();
    ids.sort();
    ids
}

/// The home a child host runs on when this test binary runs as `role`, or `None`
/// when it runs as an ordinary test.
fn child_home(role: &str) -> Option<String> {
    (std::env::var(ROLE).ok().as_deref() == Some(role))
        .then(|| std::env::var(HOME_VAR).expect("the parent sets the home"))
}

/// The runtime a child host runs its registry on.
fn child_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime starts")
}

/// The crashing registry: runs only as the child of
/// `b28_sigkilled_host_restarts_readopting_live_sessions_and_closing_dead_ones`.
#[test]
fn crash_child() {
    let Some(home) = child_home("crash-child") else {
        return;
    };
    let runtime = child_runtime();
    runtime.block_on(crash_child_main(home));
}

async fn crash_child_main(home: String) {
    let registry =
        Registry::new(Home::new(&home), RegistryConfig::default()).expect("inside a runtime");
    let go = Path::new(&home).join("go");
    let mut long = Vec::new();
    for i in 0..N_LONG {
        let info = registry
            .spawn(SpawnRequest {
                command: format!(
                    "echo start-{i}; while [ ! -e '{}' ]; do sleep 0.05; done; echo after-{i}; exec sleep 300",
                    go.display()
                ),
                task_id: format!("t{}", i % 2),
                owner_task_id: Some("o-long".to_owned()),
                notify: i % 3 == 0,
                persist_on_release: i % 4 == 1,
                // One watcher among the survivors: its pattern matches after the restart.
                watch: if i == N_KILLED_WHILE_DOWN + 1 {
                    vec![format!("after-{i}")]
                } else {
                    Vec::new()
                },
                ..SpawnRequest::default()
            })
            .await
            .expect("spawn succeeds");
        long.push(info);
    }
    let mut short = Vec::new();
    for i in 0..4 {
        let info = registry
            .spawn(SpawnRequest {
                command: format!("echo short-{i}"),
                task_id: "t0".to_owned(),
                owner_task_id: Some(if i == 0 { "o-drained" } else { "o-short" }.to_owned()),
                notify: true,
                ..SpawnRequest::default()
            })
            .await
            .expect("spawn succeeds");
        short.push(info);
    }
    for info in &short {
        let answer = registry
            .wait(info.session_id.as_str(), Duration::from_secs(30), None)
            .await
            .expect("the short session exists");
        assert_eq!(answer.status, WaitStatus::Exited);
    }
    for (i, info) in long.iter().enumerate() {
        wait_until(
            Duration::from_secs(20),
            &format!("start-{i} in the output"),
            || {
                registry
                    .poll(info.session_id.as_str())
                    .is_ok_and(|p| p.output_preview.contains(&format!("start-{i}")))
            },
        )
        .await;
    }
    let drained = registry.drain("o-drained");
    assert_eq!(completion_ids(&drained).len(), 1);
    registry.sync_durable().await.expect("the home is writable");
    let report = serde_json::json!({
        "long": long.iter().map(|i| (i.session_id.as_str(), i.pid)).collect::<Vec<_>>(),
        "short": short[1..].iter().map(|i| i.session_id.as_str()).collect::<Vec<_>>(),
        "drained": short[0].session_id.as_str(),
    });
    say(&format!("ready {report}"));
    // Wait for the SIGKILL.
    std::future::pending::<()>().await;
}

/// Runs this test binary's `test` entry as a child with `ROLE=role` on `home`; the
/// receiver gets the child's report lines (prefix stripped).
fn start_child(test: &str, role: &str, home: &Path) -> (Jod, mpsc::Receiver<String>) {
    let exe = std::env::current_exe().expect("path of this test binary");
    let mut child = raw(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1", "-q"])
        .env(ROLE, role)
        .env(HOME_VAR, home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the test binary re-runs as a child");
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix(SAY)
                && tx.send(rest.to_owned()).is_err()
            {
                break;
            }
        }
    });
    (Jod(child), rx)
}

/// Writes one report line to stdout at once, so a SIGKILL right after loses nothing
/// that was written.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{SAY}{line}").expect("the parent reads stdout");
    out.flush().expect("the parent reads stdout");
}

/// Runs the crash child on `home` and returns it with its readiness report.
fn start_crash_child(home: &Path) -> (Jod, serde_json::Value) {
    let (child, rx) = start_child("restore::crash_child", "crash-child", home);
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the crash child reports readiness within 60 s");
    let json = line
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("unexpected child line {line:?}"));
    (
        child,
        serde_json::from_str(json).expect("the report is JSON"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b28_sigkilled_host_restarts_readopting_live_sessions_and_closing_dead_ones() {
    let fx = Fixture::new();
    let home = fx.home();
    let (mut child, ready) = start_crash_child(home.root());
    let long: Vec<(String, i32)> =
        serde_json::from_value(ready["long"].clone()).expect("long sessions listed");
    let short: Vec<String> =
        serde_json::from_value(ready["short"].clone()).expect("short sessions listed");
    let drained_before = ready["drained"].as_str().expect("drained id").to_owned();
    assert_eq!(long.len(), N_LONG);

    // The host dies hard.
    child.0.kill().expect("SIGKILL the crash child");
    child.0.wait().expect("reap the crash child");
    // Some sessions die while no registry runs.
    let (killed, survivors) = long.split_at(N_KILLED_WHILE_DOWN);
    for (_, pid) in killed {
        Fixture::kill_group(*pid);
    }
    for (_, pid) in killed {
        wait_until(
            Duration::from_secs(10),
            &format!("killed group {pid} to be gone"),
            || group_members(*pid).is_empty(),
        )
        .await;
    }

    let report = fx.registry.restore().await.expect("the checkpoint loads");
    let ids = |v: &[SessionId]| -> HashSet<String> {
        v.iter().map(|id| id.as_str().to_owned()).collect()
    };
    let want_adopted: HashSet<String> = survivors.iter().map(|(id, _)| id.clone()).collect();
    let want_closed: HashSet<String> = killed.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(ids(&report.adopted), want_adopted, "{report:#?}");
    assert_eq!(ids(&report.closed_lost), want_closed, "{report:#?}");
    assert!(report.closed_reused.is_empty(), "{report:#?}");
    assert!(report.skipped_live_writer.is_empty(), "{report:#?}");
    assert!(report.moved_aside.is_none(), "{report:#?}");

    // A second restore finds everything tracked already and changes nothing.
    let again = fx.registry.restore().await.expect("the checkpoint loads");
    assert_eq!(ids(&again.already_tracked), want_adopted, "{again:#?}");
    assert!(
        again.adopted.is_empty() && again.closed_lost.is_empty(),
        "{again:#?}"
    );

    // Re-adopted sessions run, with the output from before the crash.
    for (i, (id, pid)) in long.iter().enumerate().skip(N_KILLED_WHILE_DOWN) {
        let poll = fx.registry.poll(id).expect("a re-adopted session answers");
        assert_eq!(poll.status, SessionStatus::Running, "{poll:?}");
        assert_eq!(poll.pid, *pid);
        assert!(
            poll.note.as_deref().is_some_and(|n| n.contains("log file")),
            "{poll:?}"
        );
        let log = fx.registry.log(id, None, None).expect("the log answers");
        assert!(log.output.contains(&format!("start-{i}")), "{log:?}");
    }
    // Closed ones read lost.
    for (id, _) in killed {
        let poll = fx.registry.poll(id).expect("a closed session answers");
        assert_eq!(poll.status, SessionStatus::Exited);
        assert_eq!(poll.completion_reason, Some(CompletionReason::Lost));
    }
    // Every session appears once.
    let rows = fx.registry.list(&ListFilter {
        include_finished: true,
        ..ListFilter::default()
    });
    let mut counts: HashMap<String, usize> = HashMap::new();
    for row in &rows {
        *counts
            .entry(row.session_id.as_str().to_owned())
            .or_default() += 1;
    }
    for (id, _) in &long {
        assert_eq!(counts.get(id), Some(&1), "{id} in {rows:#?}");
    }
    // The closed ones are listed too, from the store.
    assert!(counts.values().all(|n| *n == 1), "{counts:?}");
    assert!(rows.len() >= N_LONG, "{rows:#?}");

    // Output continues: the sessions print again once told to, into the reattached pipe.
    std::fs::write(home.root().join("go"), b"").expect("write the go file");
    for (i, (id, _)) in long.iter().enumerate().skip(N_KILLED_WHILE_DOWN) {
        wait_until(
            Duration::from_secs(20),
            &format!("after-{i} in the log of {id}"),
            || {
                fx.registry
                    .log(id, None, None)
                    .is_ok_and(|l| l.output.contains(&format!("after-{i}")))
            },
        )
        .await;
        let log_file =
            std::fs::read_to_string(home.session_log_path(id)).expect("the log file reads");
        assert!(
            log_file.contains(&format!("start-{i}")) && log_file.contains(&format!("after-{i}")),
            "{log_file:?}"
        );
    }

    // Completions: the undelivered ones of the crashed host, exactly once.
    let mut replayed = fx.registry.drain("o-short");
    replayed.extend(fx.registry.drain("o-drained"));
    let mut want_short = short.clone();
    want_short.sort();
    assert_eq!(completion_ids(&replayed), want_short);
    assert!(!completion_ids(&replayed).contains(&drained_before));
    assert!(fx.registry.drain("o-short").is_empty());
    // The re-adopted watcher's pattern still wakes its owner; nothing else does.
    let watcher = &long[N_KILLED_WHILE_DOWN + 1].0;
    let mut woken = Vec::new();
    wait_until(
        Duration::from_secs(10),
        &format!("a watch match of {watcher}"),
        || {
            woken.extend(fx.registry.drain("o-long"));
            !woken.is_empty()
        },
    )
    .await;
    assert!(
        matches!(
            woken.as_slice(),
            [Event::WatchMatch { session_id, .. }] if session_id.as_str() == watcher
        ),
        "{woken:#?}"
    );

    // A re-adopted session is killed like any other, and publishes no completion.
    let mut events = fx.registry.subscribe();
    let (first_id, first_pid) = &survivors[0];
    let answer = fx
        .registry
        .kill(first_id, KillSource::ProcessKill)
        .await
        .expect("the session exists");
    assert_eq!(answer.status, KillStatus::Killed, "{answer:?}");
    assert!(group_members(*first_pid).is_empty());
    fx.registry.shutdown().await;
    for (id, pid) in survivors {
        wait_until(
            Duration::from_secs(10),
            &format!("group {pid} of {id} to be gone after shutdown"),
            || group_members(*pid).is_empty(),
        )
        .await;
    }
    let leftover = tokio::time::timeout(Duration::from_millis(200), events.recv()).await;
    assert!(
        leftover.is_err(),
        "a detached session published {leftover:?}"
    );
    let loaded = CheckpointStore::new(&home)
        .load()
        .expect("the checkpoint loads");
    assert!(loaded.entries.is_empty(), "{:#?}", loaded.entries);

    // Another restart delivers nothing again.
    let again = Registry::new(home.clone(), RegistryConfig::default()).expect("inside a runtime");
    assert!(again.drain("o-short").is_empty());
    assert!(again.drain("o-drained").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b18_a_reused_pid_is_never_signalled_and_its_entry_is_closed() {
    let fx = Fixture::new();
    let home = fx.home();
    let mut stranger = Jod::sleep();
    let mut other_daemon = Jod::sleep();
    let stranger_start = start_time(stranger.pid()).expect("the stranger is alive");
    let store = CheckpointStore::new(&home);
    let reused = "proc_00000000aaaa";
    let foreign = "proc_00000000bbbb";
    store
        .write_own(
            &dead_writer(),
            &[record(
                &home,
                reused,
                stranger.pid(),
                Some(stranger_start + 1000),
            )],
            &[],
        )
        .expect("the checkpoint is written");
    let live_writer = Writer::new(other_daemon.pid(), start_time(other_daemon.pid()));
    store
        .write_own(
            &live_writer,
            &[record(&home, foreign, stranger.pid(), Some(stranger_start))],
            &[],
        )
        .expect("the checkpoint is written");

    let report = fx.registry.restore().await.expect("the checkpoint loads");
    assert_eq!(report.closed_reused.len(), 1, "{report:#?}");
    assert_eq!(report.closed_reused[0].as_str(), reused);
    assert_eq!(report.skipped_live_writer.len(), 1, "{report:#?}");
    assert_eq!(report.skipped_live_writer[0].as_str(), foreign);
    assert!(report.adopted.is_empty(), "{report:#?}");

    let poll = fx
        .registry
        .poll(reused)
        .expect("the closed session answers");
    assert_eq!(poll.status, SessionStatus::Exited);
    assert_eq!(poll.completion_reason, Some(CompletionReason::Lost));
    assert!(
        poll.note
            .as_deref()
            .is_some_and(|n| n.contains("not signalled")),
        "{poll:?}"
    );
    let kill = fx
        .registry
        .kill(reused, KillSource::OperatorStop)
        .await
        .expect("the closed session answers");
    assert_eq!(kill.status, KillStatus::AlreadyExited);
    fx.registry.shutdown().await;
    assert!(stranger.is_running(), "the stranger was signalled");
    assert!(other_daemon.is_running());
    // The other daemon's entry is untouched; the closed one is gone.
    let loaded = store.load().expect("the checkpoint loads");
    let left: Vec<&str> = loaded
        .entries
        .iter()
        .map(|e| e.session.id.as_str())
        .collect();
    assert_eq!(left, [foreign]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b27_corrupt_checkpoint_is_reported_and_restore_continues() {
    let fx = Fixture::new();
    let home = fx.home();
    std::fs::write(
        home.checkpoint_path(),
        b"{\"version\": 1, \"sessions\": [tru",
    )
    .expect("write a torn checkpoint");
    let report = fx.registry.restore().await.expect("restore goes on");
    let moved = report.moved_aside.expect("the corrupt file is reported");
    assert!(moved.contains("moved"), "{moved}");
    let names: Vec<String> = std::fs::read_dir(home.root())
        .expect("list the home")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("processes.json.corrupt-")),
        "{names:?}"
    );
    // The registry works and checkpoints afresh.
    let info = fx.run("sleep 120").await;
    let loaded = CheckpointStore::new(&home)
        .load()
        .expect("the checkpoint loads");
    assert_eq!(loaded.entries.len(), 1);
    assert_eq!(loaded.entries[0].session.id, info.session_id.as_str());
    fx.registry.shutdown().await;
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b27_a_spawn_is_checkpointed_redacted_before_it_answers_and_shutdown_empties_it() {
    let fx = Fixture::new();
    let home = fx.home();
    let store = CheckpointStore::new(&home);
    let info = fx
        .spawn(SpawnRequest {
            command: format!("echo {GHP} >/dev/null; sleep 120"),
            task_id: "t".to_owned(),
            owner_task_id: Some("o".to_owned()),
            session_key: Some("k".to_owned()),
            notify: true,
            persist_on_release: true,
            watch: Vec::new(),
            ..SpawnRequest::default()
        })
        .await;
    let loaded = store.load().expect("the checkpoint loads");
    let entry = loaded
        .entries
        .iter()
        .find(|e| e.session.id == info.session_id.as_str())
        .expect("the spawn was checkpointed before it answered");
    assert_eq!(entry.session.pid, info.pid);
    assert_eq!(entry.session.pgid, info.pid);
    assert_eq!(entry.session.start_time, start_time(info.pid));
    assert_eq!(entry.session.owner_task_id, "o");
    assert_eq!(entry.session.session_key, "k");
    assert!(entry.session.notify && entry.session.persist_on_release);
    assert!(
        !entry.session.command.contains(GHP),
        "{:?}",
        entry.session.command
    );
    assert!(entry.session.command.contains("sleep 120"));
    assert_eq!(
        i64::from(entry.writer.pid),
        i64::from(std::process::id()),
        "written by this process"
    );
    // The command as given is kept privately beside the redacted one, for a
    // restart to repeat exactly (answers show the redacted one).
    assert_eq!(
        entry.session.command_given.as_deref(),
        Some(format!("echo {GHP} >/dev/null; sleep 120").as_str())
    );

    // A finished session leaves the checkpoint.
    fx.registry
        .kill(info.session_id.as_str(), KillSource::ProcessKill)
        .await
        .expect("the session exists");
    fx.registry
        .sync_durable()
        .await
        .expect("the home is writable");
    assert!(
        store
            .load()
            .expect("the checkpoint loads")
            .entries
            .is_empty()
    );

    // Clean shutdown leaves nothing to restore.
    let second = fx.run("sleep 120").await;
    assert_eq!(store.load().expect("the checkpoint loads").entries.len(), 1);
    fx.registry.shutdown().await;
    assert!(
        store
            .load()
            .expect("the checkpoint loads")
            .entries
            .is_empty()
    );
    let _ = second;
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b38_receipts_answer_after_pruning_and_after_a_restart() {
    let fx = Fixture::with(|c: &mut RegistryConfig| c.finished_cap = 1);
    let home = fx.home();
    let first = fx
        .run(&format!("echo token {GHP} ready; echo line-two; exit 3"))
        .await;
    fx.done(&first.session_id).await;
    // A finished session stays in memory until its receipt is written; once it is,
    // the next finishes prune it (cap 1).
    fx.registry
        .sync_durable()
        .await
        .expect("the home is writable");
    for _ in 0..2 {
        let info = fx.run("true").await;
        fx.done(&info.session_id).await;
    }
    let id = first.session_id.as_str();
    // Memory keeps one finished session (cap 1): the last `true`, not the first.
    assert_eq!(
        fx.registry.counts().1,
        1,
        "the first session was pruned from memory"
    );
    // `list` still shows it: finished sessions come from the store too (B38).
    let listed = fx.registry.list(&ListFilter {
        include_finished: true,
        ..ListFilter::default()
    });
    assert_eq!(
        listed
            .iter()
            .filter(|r| r.session_id == first.session_id)
            .count(),
        1,
        "the first session is listed once, from the store"
    );
    fx.registry
        .sync_durable()
        .await
        .expect("the home is writable");
    let on_disk = ReceiptStore::new(&home)
        .load(id)
        .expect("the store reads")
        .map(|r| format!("{} {}", r.command, r.output))
        .expect("the receipt is in the store");
    assert!(!on_disk.contains(GHP), "{on_disk}");
    assert!(on_disk.contains(GHP_MASKED), "{on_disk}");

    let check = |registry: &Registry| {
        let poll = registry.poll(id).expect("the receipt answers poll");
        assert_eq!(poll.status, SessionStatus::Exited);
        assert_eq!(poll.exit_code, Some(3));
        assert_eq!(poll.completion_reason, Some(CompletionReason::Exited));
        assert!(poll.output_preview.contains(GHP_MASKED), "{poll:?}");
        assert!(!poll.output_preview.contains(GHP));
        assert!(
            poll.note.as_deref().is_some_and(|n| n.contains("receipt")),
            "{poll:?}"
        );
        let log = registry
            .log(id, Some(1), Some(5))
            .expect("the receipt answers log");
        assert_eq!(log.output, "line-two");
        assert_eq!(log.total_lines, 2);
        let prefix = &id[..9];
        assert_eq!(
            registry.lookup(prefix).expect("a unique prefix resolves"),
            first.session_id
        );
        let chunk = registry
            .log_chunk(id, 0, 1 << 16)
            .expect("the log file answers");
        assert!(chunk.output.contains("line-two") && !chunk.output.contains(GHP));
    };
    check(&fx.registry);
    let wait = fx
        .registry
        .wait(id, Duration::from_secs(1), None)
        .await
        .expect("the receipt answers wait");
    assert_eq!(wait.status, WaitStatus::Exited);
    assert_eq!(wait.exit_code, Some(3));
    let kill = fx
        .registry
        .kill(id, KillSource::ProcessKill)
        .await
        .expect("the receipt answers kill");
    assert_eq!(kill.status, KillStatus::AlreadyExited);

    // After a restart (a new registry on the same home) the receipt still answers.
    let restarted =
        Registry::new(home.clone(), RegistryConfig::default()).expect("inside a runtime");
    check(&restarted);
    assert!(restarted.poll("proc_ffffffffffff").is_err());

    // B37 across memory and receipts: a prefix naming a live session and another
    // session's receipt is ambiguous; the full id still resolves.
    let live = fx.run("sleep 120").await;
    let prefix = &live.session_id.as_str()[..9];
    let twin = [format!("{prefix}00000000"), format!("{prefix}11111111")]
        .into_iter()
        .find(|t| t != live.session_id.as_str())
        .expect("one of two differs");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    ReceiptStore::new(&home)
        .store(&{
            // Now: a receipt past the result TTL is evicted as it is stored.
            let mut r = ResultReceipt::exited(&twin, "true", 0, now);
            r.task_id = "t".to_owned();
            r.owner_task_id = "t".to_owned();
            r
        })
        .expect("the receipt is stored");
    match fx.registry.lookup(prefix) {
        Err(LookupError::Ambiguous { matches, .. }) => {
            let matches: Vec<&str> = matches.iter().map(SessionId::as_str).collect();
            assert!(
                matches.contains(&twin.as_str()) && matches.contains(&live.session_id.as_str()),
                "{matches:?}"
            );
        }
        other => panic!("expected an ambiguous prefix, got {other:?}"),
    }
    assert_eq!(
        fx.registry
            .lookup(live.session_id.as_str())
            .expect("the full id resolves"),
        live.session_id
    );
    fx.registry.shutdown().await;
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b29_ledger_replays_undelivered_completions_once_on_first_consume() {
    let fx = Fixture::new();
    let home = fx.home();
    let mut by_owner: HashMap<&str, Vec<String>> = HashMap::new();
    for owner in ["o1", "o1", "o2"] {
        let info = fx
            .spawn(SpawnRequest {
                command: "echo done".to_owned(),
                task_id: "t".to_owned(),
                owner_task_id: Some(owner.to_owned()),
                notify: true,
                ..SpawnRequest::default()
            })
            .await;
        fx.done(&info.session_id).await;
        by_owner
            .entry(owner)
            .or_default()
            .push(info.session_id.as_str().to_owned());
    }
    for ids in by_owner.values_mut() {
        ids.sort();
    }
    // o1 consumes its completions; o2 never does before the "crash".
    assert_eq!(completion_ids(&fx.registry.drain("o1")), by_owner["o1"]);

    let restarted =
        Registry::new(home.clone(), RegistryConfig::default()).expect("inside a runtime");
    // Not at construction: the ledger still holds o2's completion as undelivered.
    let ledger = Ledger::open(&home)
        .expect("the ledger opens")
        .expect("the ledger exists");
    let pending: Vec<String> = ledger
        .undelivered()
        .expect("the ledger reads")
        .into_iter()
        .map(|r| r.completion_id)
        .collect();
    assert_eq!(pending, by_owner["o2"]);
    // The first consume replays it, once.
    assert!(restarted.drain("o1").is_empty());
    assert_eq!(completion_ids(&restarted.drain("o2")), by_owner["o2"]);
    assert!(restarted.drain("o2").is_empty());
    assert!(ledger.undelivered().expect("the ledger reads").is_empty());
    let third = Registry::new(home, RegistryConfig::default()).expect("inside a runtime");
    assert!(third.drain("o1").is_empty() && third.drain("o2").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b29_a_missing_ledger_replays_nothing_and_creates_nothing() {
    let fx = Fixture::new();
    let home = fx.home();
    let _events = fx.registry.subscribe();
    assert!(fx.registry.drain("t").is_empty());
    // A session that queues nothing commits nothing either.
    let info = fx.run("echo quiet").await;
    fx.done(&info.session_id).await;
    assert!(fx.registry.drain("t").is_empty());
    // The state database holds the session's result receipt, but no completion.
    if let Some(ledger) = herd_persistence::Ledger::open(&home).expect("the ledger reads") {
        assert!(
            ledger.undelivered().expect("the ledger reads").is_empty(),
            "a completion was committed"
        );
    }
    fx.assert_groups_gone().await;
}

/// Crash cycles of the ledger test.
const LEDGER_CYCLES: usize = 15;

/// A host that consumes completions in a loop: drain (printing what it got), spawn one
/// notify session, wait for it; runs only as the child of
/// `b29_completions_survive_sigkill_cycles_and_are_never_delivered_twice`.
#[test]
fn ledger_child() {
    let Some(home) = child_home("ledger-child") else {
        return;
    };
    let runtime = child_runtime();
    runtime.block_on(async move {
        let registry =
            Registry::new(Home::new(&home), RegistryConfig::default()).expect("inside a runtime");
        loop {
            for id in completion_ids(&registry.drain("o")) {
                say(&format!("got {id}"));
            }
            let info = registry
                .spawn(SpawnRequest {
                    command: "echo x".to_owned(),
                    task_id: "t".to_owned(),
                    owner_task_id: Some("o".to_owned()),
                    notify: true,
                    ..SpawnRequest::default()
                })
                .await
                .expect("spawn succeeds");
            say(&format!("spawned {}", info.session_id));
            registry
                .wait(info.session_id.as_str(), Duration::from_secs(30), None)
                .await
                .expect("the session exists");
        }
    });
}

/// Lets the child run a random while so the SIGKILL lands at a random point of its
/// loop; it synchronises nothing (the parent already saw the child working).
#[expect(
    clippy::disallowed_methods,
    reason = "a random delay places a SIGKILL at a random point; it synchronises nothing"
)]
fn random_delay(rng: &mut fastrand::Rng) {
    std::thread::sleep(Duration::from_millis(rng.u64(0..150)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b29_completions_survive_sigkill_cycles_and_are_never_delivered_twice() {
    let fx = Fixture::new();
    let home = fx.home();
    let mut rng = fastrand::Rng::with_seed(0x05ee_db29);
    let mut spawned: Vec<String> = Vec::new();
    let mut got: Vec<String> = Vec::new();
    let record = |line: String, spawned: &mut Vec<String>, got: &mut Vec<String>| {
        if let Some(id) = line.strip_prefix("spawned ") {
            spawned.push(id.to_owned());
        } else if let Some(id) = line.strip_prefix("got ") {
            got.push(id.to_owned());
        }
    };
    for cycle in 0..LEDGER_CYCLES {
        let (mut child, rx) = start_child("restore::ledger_child", "ledger-child", home.root());
        // Kill only a child that is working: it spawned at least once this cycle.
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("cycle {cycle}: the child spawned nothing within 30 s"));
            let is_spawn = line.starts_with("spawned ");
            record(line, &mut spawned, &mut got);
            if is_spawn {
                break;
            }
        }
        random_delay(&mut rng);
        child.0.kill().expect("SIGKILL the child");
        child.0.wait().expect("reap the child");
        // Everything it wrote before dying.
        while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
            record(line, &mut spawned, &mut got);
        }
    }
    // A last, clean consumer takes what is left.
    got.extend(completion_ids(&fx.registry.drain("o")));

    let mut seen = HashSet::new();
    for id in &got {
        assert!(seen.insert(id.clone()), "{id} was delivered twice: {got:?}");
    }
    let ledger = Ledger::open(&home)
        .expect("the ledger opens")
        .expect("completions were committed");
    assert!(ledger.undelivered().expect("the ledger reads").is_empty());
    let mut n_committed = 0;
    let mut unseen = Vec::new();
    for id in &spawned {
        match ledger.is_delivered(id).expect("the ledger reads") {
            // Killed before it finished: never committed, never owed.
            None => {}
            Some(delivered) => {
                n_committed += 1;
                assert!(delivered, "{id} is committed but was never delivered");
                if !seen.contains(id) {
                    unseen.push(id.clone());
                }
            }
        }
    }
    // (A delivered id may lack its "spawned" line: the kill can land between the
    // spawn's answer and the print, after the session already finished.)
    for id in &got {
        assert_eq!(
            ledger.is_delivered(id).expect("the ledger reads"),
            Some(true),
            "{id} was handed out but is not delivered in the ledger"
        );
    }
    // The only way to miss one: the kill landed between a drain (the acknowledgement)
    // and the child printing what it drained, at most once per cycle.
    assert!(
        unseen.len() <= LEDGER_CYCLES,
        "{} of {n_committed} committed completions were never seen: {unseen:?}",
        unseen.len()
    );
    assert!(
        n_committed >= LEDGER_CYCLES,
        "only {n_committed} completions committed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b27_finished_sessions_leave_the_checkpoint_without_being_asked() {
    let fx = Fixture::new();
    let store = CheckpointStore::new(&fx.home());
    let long = fx.run("sleep 120").await;
    let mut short = Vec::new();
    for i in 0..20 {
        short.push(fx.run(&format!("echo {i}")).await);
    }
    for info in &short {
        fx.done(&info.session_id).await;
    }
    // No spawn follows the last finishes: their removal is written on its own.
    let listed = || -> Vec<String> {
        store
            .load()
            .expect("the checkpoint loads")
            .entries
            .into_iter()
            .map(|e| e.session.id)
            .collect()
    };
    wait_until(
        Duration::from_secs(10),
        "the checkpoint to list only the running session",
        || listed() == [long.session_id.as_str().to_owned()],
    )
    .await;
    fx.registry.shutdown().await;
    fx.assert_groups_gone().await;
}

/// Cycles of `b28_every_answered_spawn_survives_a_sigkill_at_a_random_moment`:
/// `HERD_SOAK_SPAWN_CYCLES`, else 3 (`cargo xtask soak` runs 100).
fn spawn_cycles() -> usize {
    std::env::var("HERD_SOAK_SPAWN_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// The most sessions one spawning child starts.
const SPAWNS_PER_CHILD: usize = 40;

/// A host that spawns long sessions one after another, reporting each answer; runs
/// only as the child of the two tests below.
#[test]
fn spawn_child() {
    let Some(home) = child_home("spawn-child") else {
        return;
    };
    child_runtime().block_on(async {
        let registry =
            Registry::new(Home::new(&home), RegistryConfig::default()).expect("inside a runtime");
        for _ in 0..SPAWNS_PER_CHILD {
            let info = registry
                .spawn(SpawnRequest {
                    command: "exec sleep 300".to_owned(),
                    owner_task_id: Some("o-spawn".to_owned()),
                    ..SpawnRequest::default()
                })
                .await
                .expect("spawn succeeds");
            say(&format!("spawned {} {}", info.session_id, info.pid));
        }
        std::future::pending::<()>().await;
    });
}

/// Runs a spawning host on `home`, SIGKILLs it once it answered a spawn and
/// `before_kill` returned, and gives every spawn it answered: (id, pid).
fn crash_a_spawning_host(home: &Path, before_kill: impl FnOnce()) -> Vec<(String, i32)> {
    let (mut child, rx) = start_child("restore::spawn_child", "spawn-child", home);
    let parse = |line: String| -> (String, i32) {
        let mut words = line
            .strip_prefix("spawned ")
            .unwrap_or_else(|| panic!("unexpected child line {line:?}"))
            .split(' ');
        let id = words.next().expect("an id").to_owned();
        let pid = words.next().and_then(|p| p.parse().ok()).expect("a pid");
        (id, pid)
    };
    let first = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the host answers a spawn within 30 s");
    let mut answered = vec![parse(first)];
    before_kill();
    child.0.kill().expect("SIGKILL the host");
    child.0.wait().expect("reap the host");
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
        answered.push(parse(line));
    }
    answered
}

/// Restores, asserts every answered spawn was re-adopted once and none closed, then
/// kills them all and waits for their groups to be gone.
async fn assert_every_answered_spawn_adopted(fx: &Fixture, answered: &[(String, i32)]) {
    let report = fx.registry.restore().await.expect("the checkpoint loads");
    let adopted: HashSet<&str> = report.adopted.iter().map(SessionId::as_str).collect();
    assert_eq!(
        adopted.len(),
        report.adopted.len(),
        "a session adopted twice: {report:?}"
    );
    for (id, pid) in answered {
        assert!(
            adopted.contains(id.as_str()),
            "answered spawn {id} was not re-adopted: {report:?}"
        );
        let poll = fx.registry.poll(id).expect("the adopted session answers");
        assert_eq!((poll.status, poll.pid), (SessionStatus::Running, *pid));
    }
    assert!(
        report.closed_lost.is_empty() && report.closed_reused.is_empty(),
        "every session was alive: {report:?}"
    );
    let n_killed = fx
        .registry
        .kill_all("o-spawn", &[], KillSource::ProcessKill)
        .await;
    assert_eq!(n_killed, report.adopted.len());
    for (_, pid) in answered {
        wait_until(
            Duration::from_secs(10),
            &format!("group {pid} to be gone"),
            || group_members(*pid).is_empty(),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b28_every_answered_spawn_survives_a_sigkill_at_a_random_moment() {
    let fx = Fixture::new();
    let home = fx.home();
    let mut rng = fastrand::Rng::with_seed(0x05ee_db28);
    for _ in 0..spawn_cycles() {
        let answered = crash_a_spawning_host(home.root(), || random_delay(&mut rng));
        assert_every_answered_spawn_adopted(&fx, &answered).await;
    }
}

/// A host that keeps running sessions in memory (`RegistryConfig::running_store`):
/// restore reads them from there, a spawn's row lands there before it answers, a
/// finish takes it out, and the home's `state.db` holds no running row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b27_b28_the_registry_runs_over_the_in_memory_running_store() {
    use herd_persistence::{MemoryRunningStore, RunningStore};
    use std::sync::Arc;
    let memory = Arc::new(MemoryRunningStore::new());
    let shared: Arc<dyn RunningStore> = memory.clone();
    let fx = Fixture::with(|c| c.running_store = Some(shared));
    let home = fx.home();
    let gone = dead_writer();
    memory
        .write_one(
            &dead_writer(),
            &record(&home, "proc_00000000dead", gone.pid, Some(1)),
        )
        .expect("the memory store takes a row");
    let report = fx.registry.restore().await.expect("restore reads memory");
    assert_eq!(report.closed_lost.len(), 1, "{report:#?}");
    assert!(memory.load().expect("loads").entries.is_empty());

    let info = fx.run(&format!("echo {GHP} >/dev/null; sleep 120")).await;
    let rows = memory.load().expect("loads").entries;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].session.id, info.session_id.as_str());
    assert!(!rows[0].session.command.contains(GHP));
    assert!(
        rows[0]
            .session
            .command_given
            .as_deref()
            .is_some_and(|c| c.contains(GHP))
    );
    assert!(
        CheckpointStore::new(&home)
            .load()
            .expect("the store loads")
            .entries
            .is_empty(),
        "no running row in state.db"
    );
    fx.registry
        .kill(info.session_id.as_str(), KillSource::ProcessKill)
        .await
        .expect("the session exists");
    wait_until(
        Duration::from_secs(10),
        "the finished session to leave the memory store",
        || memory.load().is_ok_and(|l| l.entries.is_empty()),
    )
    .await;
    fx.registry.shutdown().await;
    fx.assert_groups_gone().await;
}
