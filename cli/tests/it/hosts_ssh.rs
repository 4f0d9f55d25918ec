//! Proofs over the real loopback sshd (`sshd.rs`), where the other
//! tests of them use local doors: two host names of one far home, `attach` to a
//! far PTY job, `logs -f` while every ssh door is SIGKILLed, and a host whose
//! sshd falls silent (SIGSTOPped: connections hang, nothing is refused) under
//! `ps --all-hosts`, its jobs shown as last known, marked stale.

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::hosts::{
    completions_of, completions_stay_with_their_names, descendants, events_of, sigkill, ssh_doors,
    start_far_echoer,
};
use crate::sshd::{Sshd, far_proxy, toml_array};
use crate::support::{Env, HERD, wait_until};

/// Generous: CI runs on two busy cores.
const DEADLINE: Duration = Duration::from_secs(60);

/// Writes host tables `names` into `near`'s config, each the ssh door to `far`.
fn over_ssh(sshd: &Sshd, near: &Env, far: &Env, names: &[&str]) {
    let mut argv = sshd.ssh();
    argv.extend(far_proxy(far, HERD));
    let mut text = String::new();
    for name in names {
        text.push_str(&format!(
            "[hosts.{name}]\ncommand = {}\n",
            toml_array(&argv)
        ));
    }
    std::fs::write(near.home().join("config.toml"), text).expect("the home is writable");
}

#[test]
fn over_real_ssh_two_host_names_keep_their_completions_apart() {
    // Two host names whose ssh doors reach one far home: each
    // completion arrives once, under the name its job was started with.
    let Some(sshd) = Sshd::start() else { return };
    let far = Env::new();
    let near = Env::new();
    over_ssh(&sshd, &near, &far, &["far1", "far2"]);
    completions_stay_with_their_names(&near, &["far1", "far2"], 3, "sleep 0.1");
}

#[test]
fn over_real_ssh_attach_to_a_far_pty_job_and_logs_f_through_killed_ssh() {
    // `herd attach far:ID` of a far PTY job over ssh shows its screen
    // and takes typed lines; `logs -f` of another far job goes on while every
    // ssh door is SIGKILLed under it: every line once, and the job's real end.
    use herd_test_support::tmux::Tmux;
    use std::io::Read;
    let Some(sshd) = Sshd::start() else { return };
    let far = Env::new();
    let near = Env::new();
    over_ssh(&sshd, &near, &far, &["far"]);
    let pty = start_far_echoer(&near, &far);
    let tmux = Tmux::start(
        near.scratch().join("tmux.sock"),
        "far",
        near.home(),
        (100, 30),
        &[],
    )
    .joined();
    tmux.type_line(&format!("clear; {HERD} attach {pty}; echo ended=$?"));
    tmux.wait_for("the far job's screen", |s| s.contains("far-ready"));
    tmux.type_line("hello over ssh");
    tmux.wait_for("the far job's answer", |s| s.contains("got:hello over ssh"));
    tmux.type_line("quit");
    let screen = tmux.wait_for("attach to end with the job", |s| {
        s.lines().any(|l| l.contains("ended="))
    });
    assert!(screen.contains(&format!("{pty} exited 3")), "{screen}");

    let go = far.scratch().join("go");
    let id = near
        .ok(&[
            "run",
            "--host",
            "far",
            "--",
            &format!(
                "for i in $(seq 1 10); do echo line $i; done; while [ ! -e {} ]; do sleep 0.05; done; \
                 for i in $(seq 11 20); do echo line $i; done; exit 5",
                go.display()
            ),
        ])
        .trim()
        .to_owned();
    let mut follower = near
        .cmd(&["logs", "-f", &id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("herd logs -f starts");
    let mut out = follower.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
            let _ = tx.send(String::from_utf8_lossy(&all).into_owned());
        }
        String::from_utf8_lossy(&all).into_owned()
    });
    let mut seen = String::new();
    let first = wait_until(DEADLINE, || {
        while let Ok(text) = rx.try_recv() {
            seen = text;
        }
        seen.contains("line 10\n")
    });
    assert!(first.is_ok(), "no first lines: {seen}");
    let doors = ssh_doors(&far);
    assert!(!doors.is_empty(), "the ssh doors are open");
    for pid in doors {
        sigkill(pid);
    }
    std::fs::write(&go, b"").expect("the scratch dir is writable");
    let mut status = None;
    let ended = wait_until(DEADLINE, || {
        status = follower.try_wait().ok().flatten();
        status.is_some()
    });
    if ended.is_err() {
        let _ = follower.kill();
    }
    let text = reader.join().unwrap_or_default();
    let mut err = String::new();
    if let Some(mut e) = follower.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert!(ended.is_ok(), "logs -f never ended: {text}\n{err}");
    let wanted: Vec<String> = (1..=20).map(|i| format!("line {i}")).collect();
    assert_eq!(text.lines().collect::<Vec<_>>(), wanted, "stderr: {err}");
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{err}");
    assert!(err.contains("exited 5"), "{err}");
}

/// SIGSTOPs (or SIGCONTs) the server and every session process under it.
fn signal_all(sshd: &Sshd, signal: Signal) {
    let mut pids = vec![sshd.pid()];
    pids.extend(descendants(sshd.pid()));
    for pid in pids {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// Continues the stopped server when dropped, so no test leaves it stopped.
struct Continue<'a>(&'a Sshd);

impl Drop for Continue<'_> {
    fn drop(&mut self) {
        signal_all(self.0, Signal::SIGCONT);
    }
}

#[test]
fn over_real_ssh_a_silent_sshd_neither_holds_up_ps_all_hosts_nor_shows_a_wrong_state() {
    // The far sshd falls silent (SIGSTOP: its open sessions and new
    // connections hang, nothing is refused): `ps --all-hosts` still answers in
    // seconds, says the host did not answer in time, and shows its jobs as last
    // known, marked stale: running ones running with their pid, a killed one
    // killed, an exited one with its code. Continued, the host answers again.
    let Some(sshd) = Sshd::start() else { return };
    let far = Env::new();
    let near = Env::new();
    over_ssh(&sshd, &near, &far, &["far"]);
    let running = near
        .ok(&["run", "--host", "far", "--", "sleep 60"])
        .trim()
        .to_owned();
    let killed = near
        .ok(&["run", "--host", "far", "--", "sleep 60"])
        .trim()
        .to_owned();
    let exited = near
        .ok(&["run", "--host", "far", "--notify", "--", "exit 4"])
        .trim()
        .to_owned();
    near.ok(&["kill", &killed]);
    let mut all = Vec::new();
    let found = wait_until(DEADLINE, || {
        all.extend(events_of(&near));
        !completions_of(&all, &exited).is_empty()
    });
    assert!(found.is_ok(), "{all:?}");
    // Seen by a listing while the host answers.
    let fresh = near.json(&["ps", "--all-hosts", "--all", "--json"]);
    let far_state = |answer: &Value| {
        answer["hosts"]
            .as_array()
            .and_then(|h| h.iter().find(|h| h["name"] == "far").cloned())
            .unwrap_or(Value::Null)
    };
    assert_eq!(far_state(&fresh)["answered"], true, "{fresh}");

    signal_all(&sshd, Signal::SIGSTOP);
    let _continue = Continue(&sshd);
    for _ in 0..2 {
        let began = std::time::Instant::now();
        let ps = near.json(&["ps", "--all-hosts", "--all", "--json"]);
        let took = began.elapsed();
        assert!(took < Duration::from_secs(7), "took {took:?}: {ps}");
        assert_eq!(far_state(&ps)["answered"], false, "{ps}");
        let rows = ps["processes"].as_array().expect("rows");
        let row = |id: &str| {
            rows.iter()
                .find(|r| r["session_id"] == id)
                .unwrap_or_else(|| panic!("{id} is not shown: {ps}"))
                .clone()
        };
        for id in [&running, &killed, &exited] {
            assert_eq!(row(id)["stale"], true, "{ps}");
        }
        assert_eq!(row(&running)["status"], "running", "{ps}");
        assert!(row(&running)["pid"].as_u64().is_some_and(|p| p > 0), "{ps}");
        assert_eq!(row(&killed)["status"], "exited", "{ps}");
        assert_eq!(row(&killed)["completion_reason"], "killed", "{ps}");
        assert_eq!(row(&exited)["exit_code"], 4, "{ps}");
    }
    drop(_continue);
    let answered = wait_until(DEADLINE, || {
        let ps = near.json(&["ps", "--all-hosts", "--all", "--json"]);
        far_state(&ps)["answered"] == true
    });
    assert!(answered.is_ok(), "the host never answered again");
    near.ok(&["kill", &running]);
}
