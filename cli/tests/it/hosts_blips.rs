//! Far jobs through door blips for the commands that wait on them
//! (`herd wait HOST:ID`), and the doors a host keeps open (the events door rides
//! the mux door), over local doors to a second home (`env HERD_HOME=<far> herd
//! proxy`), faults being real SIGKILLs.

use std::process::Stdio;
use std::time::Duration;

use crate::hosts::{completions_of, kill_far_daemon_and_doors, proxy_doors as far_doors, sigkill};
use crate::hosts_whole::aliases;
use crate::remote::connections;
use crate::support::{Env, wait_until};

/// Generous: CI runs on two busy cores.
const DEADLINE: Duration = Duration::from_secs(60);

#[test]
fn far_wait_rides_through_killed_doors_and_a_far_daemon_restart() {
    // A plain `herd wait far:ID` goes on through its doors killed and
    // the far daemon SIGKILLed (the next door starts another) and ends with the
    // job's real end, not exit 3.
    use std::io::Read;
    let local = Env::new();
    let far = Env::new();
    aliases(&local, &far, &["far"]);
    let go = |n: u32| far.scratch().join(format!("go{n}"));
    let script = format!(
        "echo up; while [ ! -e {g1} ]; do sleep 0.05; done; \
         while [ ! -e {g2} ]; do sleep 0.05; done; echo done; exit 7",
        g1 = go(1).display(),
        g2 = go(2).display()
    );
    let id = local
        .ok(&["run", "--host", "far", "--", &script])
        .trim()
        .to_owned();
    assert!(wait_until(DEADLINE, || local.ok(&["logs", &id]).contains("up")).is_ok());
    let before = connections(&far);
    let mut waiter = local
        .cmd(&["wait", &id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("herd wait starts");
    // The wait is under way: the far daemon serves one more connection.
    assert!(
        wait_until(DEADLINE, || connections(&far) > before).is_ok(),
        "the wait never reached the far daemon"
    );
    // 1. Every door dies.
    for pid in far_doors(&far) {
        sigkill(pid);
    }
    std::fs::write(go(1), b"").expect("the scratch dir is writable");
    assert!(
        waiter.try_wait().ok().flatten().is_none(),
        "wait ended at a door blip"
    );
    // 2. The far daemon dies; the next door starts another.
    kill_far_daemon_and_doors(&far, far_doors);
    std::fs::write(go(2), b"").expect("the scratch dir is writable");
    let mut status = None;
    let ended = wait_until(DEADLINE, || {
        status = waiter.try_wait().ok().flatten();
        status.is_some()
    });
    if ended.is_err() {
        let _ = waiter.kill();
    }
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(mut o) = waiter.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = waiter.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert!(ended.is_ok(), "wait never ended: {out}\n{err}");
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(1),
        "the job's failure, not exit 3: {out}\n{err}"
    );
    assert!(out.contains("exited 7"), "{out}\n{err}");
}

#[test]
fn the_events_door_rides_the_hosts_mux_door() {
    // A notified far job's events (`events.follow` and its drains)
    // take no door of their own: once its completion arrived, the host has its
    // control door and its mux door only (over ssh, two connections, not three),
    // and the completion arrives once.
    let local = Env::new();
    let far = Env::new();
    aliases(&local, &far, &["far"]);
    let out = local.ok(&["run", "--host", "far", "--wait", "--", "echo warm"]);
    assert!(out.contains("warm"), "{out}");
    let id = local
        .ok(&["run", "--host", "far", "--notify", "--", "echo notified"])
        .trim()
        .to_owned();
    let mut seen = Vec::new();
    let arrived = wait_until(DEADLINE, || {
        seen.extend(
            local
                .ok(&["events", "--json"])
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON lines")),
        );
        !completions_of(&seen, &id).is_empty()
    });
    assert!(arrived.is_ok(), "no completion: {seen:?}");
    assert_eq!(completions_of(&seen, &id).len(), 1, "{seen:?}");
    let doors = far_doors(&far);
    assert_eq!(
        doors.len(),
        2,
        "the control door and the mux door: {doors:?}"
    );
}
