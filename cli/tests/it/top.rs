//! `herd top` for real: the real daemon on a temp home, real sessions,
//! and `herd top` on a real terminal, tmux's, of a fixed size. Keys go in with
//! `send-keys`; what a person would see comes out of `capture-pane`, polled with
//! a deadline until it shows. Each test has its own tmux server on a private
//! socket, killed when the test ends, failed or not ([`Tmux`]'s `Drop`).

use std::time::Duration;

use herd_test_support::procs::children;
use herd_test_support::tmux::Tmux;

use crate::support::{Env, HERD, wait_until};

/// How long anything on screen may take to show (CI runs on 2 busy cores).
const DEADLINE: Duration = Duration::from_secs(30);

/// A tmux pane of `cols` x `rows` running `/bin/sh` with the home's
/// `HERD_HOME` and `extra` in its environment (herd-test-support's [`Tmux`]).
pub(crate) fn pane(env: &Env, cols: u16, rows: u16, extra: &[(&str, &str)]) -> Tmux {
    Tmux::start(
        env.scratch().join("tmux.sock"),
        "top",
        env.home(),
        (cols, rows),
        extra,
    )
}

/// What these tests do on the pane beyond typing and reading it.
pub(crate) trait TopPane {
    /// Whether the pane shows the alternate screen (a full-screen program).
    fn alternate_on(&self) -> bool;
    /// Starts `herd top` in the pane and waits for its table.
    fn start_top(&self) -> String;
    /// Waits until the terminal is the shell's again: no alternate screen, and
    /// a typed command echoes and runs (raw mode is off).
    fn wait_restored(&self, marker: &str) -> String;
}

impl TopPane for Tmux {
    fn alternate_on(&self) -> bool {
        self.format("#{alternate_on}") == "1"
    }

    fn start_top(&self) -> String {
        self.type_line(&format!("{HERD} top"));
        self.wait_for("herd top's table", |s| {
            s.contains("herd top") && s.contains("STATE") && s.contains("LAST LINE")
        })
    }

    fn wait_restored(&self, marker: &str) -> String {
        if wait_until(DEADLINE, || !self.alternate_on()).is_err() {
            panic!(
                "the terminal stayed in the alternate screen; it shows:\n{}",
                self.screen()
            );
        }
        // Keys typed before `herd top` has gone would be read by it, not the shell.
        let shell = self.shell_pid();
        if wait_until(DEADLINE, || children(shell).is_empty()).is_err() {
            panic!("herd top is still running under the shell {shell}");
        }
        self.type_line(&format!("echo {marker}=$?"));
        let expect = format!("{marker}=");
        // The echo's output, not the typed command (`=$?`); on a busy machine the
        // typed line can be echoed before the shell's prompt, which then leads
        // the output's line.
        self.wait_for("the shell to run a command again", |s| {
            s.lines().any(|l| {
                l.split(expect.as_str())
                    .nth(1)
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            })
        })
    }
}

/// Starts a session and returns its id.
fn spawn(env: &Env, args: &[&str]) -> String {
    let mut all = vec!["run", "--json"];
    all.extend_from_slice(args);
    let answer = env.json(&all);
    answer["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("run answered no session_id: {answer}"))
        .to_owned()
}

/// The session's row as `ps --all --json` lists it.
fn row(env: &Env, id: &str) -> serde_json::Value {
    let list = env.json(&["ps", "--all", "--json"]);
    list["processes"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["session_id"] == id).cloned())
        .unwrap_or_else(|| panic!("{id} is not listed: {list}"))
}

/// The screen line that shows `needle`.
fn line_with<'s>(screen: &'s str, needle: &str) -> &'s str {
    screen
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line shows {needle:?}:\n{screen}"))
}

// `herd top` lists the home's sessions (ids, names, states, exits),
// follows the selected PTY session in the pane as a terminal shows it (colour
// kept, a `\r` progress bar at its last state), and `q` gives the terminal back.
#[test]
fn top_shows_rows_follows_a_pty_and_quits_on_q() {
    let env = Env::new();
    let bar = spawn(
        &env,
        &[
            "--pty",
            "--name",
            "bar",
            "--",
            "sh",
            "-c",
            r#"printf '\033[31mRED-ALERT\033[0m\n'; for p in 25 50 75; do printf '\rprogress %s%%' $p; done; printf '\rprogress done!\n'; exec sleep 300"#,
        ],
    );
    let web = spawn(
        &env,
        &[
            "--name",
            "web",
            "--",
            "sh",
            "-c",
            "echo serving on 8080; exec sleep 300",
        ],
    );
    let failed = spawn(
        &env,
        &[
            "--name",
            "broken",
            "--",
            "sh",
            "-c",
            "echo about to fail; exit 3",
        ],
    );
    // `wait` exits 1: the job failed, as it should.
    let waited = env.run(&["wait", &failed]);
    assert_eq!(waited.status.code(), Some(1), "{waited:?}");

    let tmux = pane(&env, 120, 40, &[]);
    tmux.start_top();
    // The newest running session, web, is selected first and its output shows.
    // Web's last line too: its job may print after top first lists it.
    let screen = tmux.wait_for("the three sessions", |s| {
        s.contains(&web)
            && s.contains(&bar)
            && s.contains(&failed)
            && s.contains(&format!("{web} web · pipe"))
            && s.lines()
                .any(|l| l.contains(&web) && l.contains("serving on 8080"))
    });
    for (id, name, state) in [
        (&web, "web", "running"),
        (&bar, "bar", "running"),
        (&failed, "broken", "failed"),
    ] {
        let line = line_with(&screen, id);
        assert!(
            line.contains(name) && line.contains(state),
            "row of {id}: {line:?}"
        );
    }
    let broken = line_with(&screen, &failed);
    assert!(
        broken.contains(" 3 "),
        "the failed row shows exit 3: {broken:?}"
    );
    assert!(
        line_with(&screen, &web).contains("serving on 8080"),
        "last line of web"
    );
    assert!(
        screen.contains("3 sessions, 2 running"),
        "title counts:\n{screen}"
    );

    // Select `bar` through the filter: the pane follows its terminal.
    tmux.keys(&["/"]);
    tmux.run(&["send-keys", "-t", "top", "-l", "bar"]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("bar's output in the pane", |s| {
        s.contains("filter \"bar\" (1 shown)")
            && s.contains(&format!("{bar} bar · pty"))
            && s.contains("RED-ALERT")
            && s.contains("progress done!")
    });
    assert!(
        !screen.contains("progress 75%"),
        "the progress bar shows its last state only:\n{screen}"
    );
    assert!(screen.contains("filter \"bar\" (1 shown)"), "{screen}");
    let coloured = tmux.screen_with_colours();
    let red = line_with(&coloured, "RED-ALERT");
    let before = &red[..red.find("RED-ALERT").unwrap_or(0)];
    assert!(
        before.contains("\u{1b}[31m") || before.contains("38;5;1m"),
        "RED-ALERT is drawn red: {red:?}"
    );

    tmux.keys(&["q"]);
    let screen = tmux.wait_restored("top-exit");
    assert!(
        screen.contains("top-exit=0"),
        "herd top exited 0:\n{screen}"
    );
}

// `k` then `y` kills the selected job's tree, as the daemon reports it;
// Ctrl-C quits and gives the terminal back.
#[test]
fn top_kill_key_ends_the_job_and_ctrl_c_quits() {
    let env = Env::new();
    let keep = spawn(&env, &["--name", "keeper", "--", "sleep", "300"]);
    let victim = spawn(
        &env,
        &[
            "--name",
            "victim",
            "--",
            "sh",
            "-c",
            "echo doomed; exec sleep 300",
        ],
    );
    let tmux = pane(&env, 120, 40, &[]);
    tmux.start_top();
    tmux.wait_for("both sessions", |s| {
        s.contains(&keep) && s.contains(&victim)
    });
    tmux.keys(&["/"]);
    tmux.run(&["send-keys", "-t", "top", "-l", "victim"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("only the victim shown", |s| {
        s.contains("(1 shown)") && !s.contains(&keep)
    });
    tmux.keys(&["k"]);
    tmux.wait_for("the kill question", |s| {
        s.contains(&format!("kill {victim} and its whole process tree? [y/N]"))
    });
    tmux.keys(&["y"]);
    if wait_until(DEADLINE, || row(&env, &victim)["status"] == "exited").is_err() {
        panic!("the daemon still runs {victim}: {}", row(&env, &victim));
    }
    let killed = row(&env, &victim);
    assert_eq!(killed["completion_reason"], "killed", "{killed}");
    assert_eq!(
        row(&env, &keep)["status"],
        "running",
        "only the selected job is killed"
    );
    tmux.wait_for("the row says killed", |s| {
        line_with(s, &victim).contains("killed")
    });

    tmux.keys(&["C-c"]);
    let screen = tmux.wait_restored("after-ctrl-c");
    assert!(screen.contains("after-ctrl-c=0"), "{screen}");
}

// At 80 columns every row is one line: long commands and output are
// cut at the edge, never wrapped.
#[test]
fn top_at_80_columns_cuts_rows_never_wraps() {
    let env = Env::new();
    let long = spawn(
        &env,
        &[
            "--name",
            "long",
            "--",
            "sh",
            "-c",
            "echo START-OF-LONG-LINE-$(printf 'x%.0s' $(seq 1 150))-END-OF-LONG-LINE; exec sleep 300",
        ],
    );
    let short = spawn(&env, &["--name", "short", "--", "sleep", "300"]);
    let tmux = pane(&env, 80, 24, &[]);
    tmux.start_top();
    let screen = tmux.wait_for("both rows and the long line", |s| {
        s.contains("START-OF-LONG") && s.contains(&long[..12]) && s.contains(&short[..12])
    });
    let header = line_with(&screen, "STATE");
    for column in [
        "ID", "NAME", "OWNER", "STATE", "EXIT", "AGE", "CPU%", "MEM", "LAST",
    ] {
        assert!(header.contains(column), "header {header:?} lacks {column}");
    }
    for id in [&long, &short] {
        let line = line_with(&screen, &id[..12]);
        assert!(
            line.contains("running"),
            "the row of {id} is one line: {line:?}"
        );
    }
    assert!(
        !screen.contains("END-OF-LONG-LINE"),
        "a long line is cut, not wrapped:\n{screen}"
    );
    assert!(
        screen.lines().all(|l| l.chars().count() <= 80),
        "no line is wider than the terminal:\n{screen}"
    );
    tmux.keys(&["q"]);
    tmux.wait_restored("done80");
}

// `h` asks for the new owner in an input line and hands the selected
// session over (the daemon lists the new owner).
#[test]
fn top_handoff_key_gives_the_session_to_the_owner_typed() {
    let env = Env::new();
    let id = spawn(
        &env,
        &["--owner", "kid", "--name", "task", "--", "sleep", "300"],
    );
    let tmux = pane(&env, 120, 40, &[]);
    tmux.start_top();
    tmux.wait_for("the session", |s| {
        line_with_opt(s, &id).is_some_and(|l| l.contains("kid"))
    });
    tmux.keys(&["h"]);
    tmux.wait_for("the owner prompt", |s| {
        s.contains(&format!("hand off {id} (owner kid) to owner:"))
    });
    tmux.run(&["send-keys", "-t", "top", "-l", "boss"]);
    tmux.keys(&["Enter"]);
    if wait_until(DEADLINE, || row(&env, &id)["owner_task_id"] == "boss").is_err() {
        panic!(
            "the owner did not change: {}\nscreen:\n{}",
            row(&env, &id),
            tmux.screen()
        );
    }
    tmux.wait_for("the new owner in the row", |s| {
        line_with_opt(s, &id).is_some_and(|l| l.contains("boss"))
    });
    tmux.keys(&["q"]);
    tmux.wait_restored("handed");
}

fn line_with_opt<'s>(screen: &'s str, needle: &str) -> Option<&'s str> {
    screen.lines().find(|l| l.contains(needle))
}

// `l` leaves the screen for $PAGER with the session's whole log piped
// in, and comes back to the table when the pager ends.
#[test]
fn top_log_key_runs_the_pager_and_comes_back() {
    let env = Env::new();
    let id = spawn(
        &env,
        &[
            "--name",
            "chatty",
            "--",
            "sh",
            "-c",
            "for i in 1 2 3; do echo log-line-$i; done; exec sleep 300",
        ],
    );
    // The pager prints what it was given and waits for Enter on the terminal.
    let pager = "cat; echo PAGER-DONE; read answer </dev/tty";
    let tmux = pane(&env, 120, 40, &[("PAGER", pager)]);
    tmux.start_top();
    tmux.wait_for("the session", |s| {
        s.contains(&id) && s.contains("log-line-3")
    });
    tmux.keys(&["l"]);
    let screen = tmux.wait_for("the pager's screen", |s| s.contains("PAGER-DONE"));
    assert!(!tmux.alternate_on(), "the pager runs on the normal screen");
    for n in 1..=3 {
        assert!(
            screen.contains(&format!("log-line-{n}")),
            "the whole log is piped:\n{screen}"
        );
    }
    tmux.keys(&["Enter"]);
    tmux.wait_for("the table again", |s| {
        s.contains("LAST LINE") && s.contains(&id)
    });
    assert!(tmux.alternate_on(), "top took the alternate screen back");
    tmux.keys(&["q"]);
    tmux.wait_restored("paged");
}

// SIGTERM ends `herd top` with the terminal given back.
#[test]
fn top_restores_the_terminal_on_sigterm() {
    let env = Env::new();
    spawn(&env, &["--name", "bystander", "--", "sleep", "300"]);
    let tmux = pane(&env, 100, 30, &[]);
    tmux.start_top();
    let shell = tmux.shell_pid();
    let mut top = None;
    if wait_until(DEADLINE, || {
        top = children(shell).into_iter().next();
        top.is_some()
    })
    .is_err()
    {
        panic!("no herd top process under the shell {shell}");
    }
    let top = top.expect("found above");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(top),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("herd top can be signalled");
    let screen = tmux.wait_restored("after-term");
    assert!(screen.contains("after-term="), "{screen}");
}

// A panic inside `herd top` gives the terminal back before the report
// (debug builds panic on `!` when HERD_TOP_TEST_PANIC is set, for this test).
#[test]
fn top_restores_the_terminal_on_a_panic() {
    let env = Env::new();
    let tmux = pane(&env, 100, 30, &[("HERD_TOP_TEST_PANIC", "1")]);
    tmux.start_top();
    tmux.keys(&["!"]);
    let screen = tmux.wait_restored("after-panic");
    assert!(
        screen.contains("after-panic=101"),
        "a panic exits 101:\n{screen}"
    );
    assert!(
        screen.contains("HERD_TOP_TEST_PANIC"),
        "the report is printed:\n{screen}"
    );
}

// `r` restarts the selected session (`herd restart`'s path): a new
// session with the same name replaces it.
#[test]
fn top_restart_key_starts_the_session_again() {
    let env = Env::new();
    let old = spawn(
        &env,
        &[
            "--name",
            "again",
            "--",
            "sh",
            "-c",
            "echo round; exec sleep 300",
        ],
    );
    let tmux = pane(&env, 120, 40, &[]);
    tmux.start_top();
    tmux.wait_for("the session", |s| s.contains(&old));
    tmux.keys(&["r"]);
    let mut new = None;
    if wait_until(DEADLINE, || {
        let list = env.json(&["ps", "--all", "--json"]);
        new = list["processes"].as_array().and_then(|rows| {
            rows.iter()
                .find(|r| r["replaces"] == old.as_str() && r["status"] == "running")
                .and_then(|r| r["session_id"].as_str().map(str::to_owned))
        });
        new.is_some()
    })
    .is_err()
    {
        panic!(
            "no session replaced {old}; the screen shows:\n{}",
            tmux.screen()
        );
    }
    let new = new.expect("found above");
    assert_eq!(row(&env, &new)["name"], "again", "the name is kept");
    tmux.wait_for("the status line and the new row", |s| {
        s.contains(&format!("restarted {old} as {new}")) && s.contains(&new)
    });
    tmux.keys(&["q"]);
    tmux.wait_restored("restarted");
}

// The daemon's `sessions.follow` (capability) notes each change of
// the sessions with a growing generation, so `top` lists only then.
#[test]
fn sessions_follow_notes_a_spawn_and_a_finish() {
    use std::io::{BufRead, BufReader, Write};
    let env = Env::new();
    env.ok(&["ps"]);
    let stream = std::os::unix::net::UnixStream::connect(env.socket()).expect("the daemon listens");
    stream
        .set_read_timeout(Some(DEADLINE))
        .expect("a read deadline");
    let mut writer = stream.try_clone().expect("the socket clones");
    let mut reader = BufReader::new(stream);
    let mut next = || -> serde_json::Value {
        let mut line = String::new();
        reader
            .read_line(&mut line)
            .expect("the daemon answers within the deadline");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    };
    writeln!(
        writer,
        r#"{{"jsonrpc":"2.0","id":1,"method":"hello","params":{{"protocol":1}}}}"#
    )
    .expect("sent");
    let hello = next();
    assert!(
        hello["result"]["capabilities"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c == "sessions.follow")),
        "{hello}"
    );
    writeln!(
        writer,
        r#"{{"jsonrpc":"2.0","id":2,"method":"sessions.follow","params":{{}}}}"#
    )
    .expect("sent");
    let first = next();
    assert_eq!(first["method"], "sessions", "{first}");
    let g0 = first["params"]["generation"]
        .as_u64()
        .expect("a generation");
    let id = spawn(&env, &["--", "sh", "-c", "exit 0"]);
    let mut g = g0;
    // A spawn and a finish: the generation grows past both (changes that come
    // together may be one note).
    if wait_until(DEADLINE, || {
        if row(&env, &id)["status"] == "exited" && g >= g0 + 2 {
            return true;
        }
        let note = next();
        g = note["params"]["generation"].as_u64().unwrap_or(g);
        false
    })
    .is_err()
    {
        panic!("the generation went from {g0} to {g} only");
    }
    assert!(g >= g0 + 2, "spawned and finished: {g0} -> {g}");
}

// The pane follows a session selected before it printed anything (its
// log not yet created) and shows what it prints afterwards; then top stays up,
// counting right, while 100 sessions start and finish under it (a listing that
// shrinks or grows never sends an index past the rows), and `q` exits 0.
#[test]
fn top_pane_before_the_first_byte_and_a_hundred_sessions_finishing() {
    let env = Env::new();
    let gate = env.scratch().join("gate");
    let script = format!(
        "while [ ! -e {} ]; do sleep 0.05; done; echo pane-first; echo pane-last; exec sleep 300",
        gate.display()
    );
    let quiet = spawn(&env, &["--name", "quiet", "--", "sh", "-c", &script]);
    let tmux = pane(&env, 120, 40, &[]);
    tmux.start_top();
    tmux.wait_for("the quiet session selected", |s| {
        s.contains(&format!("{quiet} quiet · pipe"))
    });
    std::fs::write(&gate, "").expect("the scratch dir is writable");
    // The table's LAST LINE column shows pane-last only: pane-first is the pane's.
    tmux.wait_for("the late output in the pane", |s| s.contains("pane-first"));

    for _ in 0..100 {
        env.ok(&["run", "--", "sleep", "1"]);
    }
    let screen = tmux.wait_for("every session finished", |s| {
        s.contains("101 sessions, 1 running")
    });
    assert!(tmux.alternate_on(), "top is still up:\n{screen}");
    tmux.keys(&["q"]);
    let screen = tmux.wait_restored("top-exit");
    assert!(
        screen.contains("top-exit=0"),
        "herd top exited 0:\n{screen}"
    );
}

// Top rides through a daemon SIGKILL: it connects again (starting
// the next daemon) and lists what happens after, and `q` still exits 0.
#[test]
fn top_rides_through_a_daemon_sigkill() {
    let env = Env::new();
    let before = spawn(&env, &["--name", "before", "--", "sleep", "300"]);
    let tmux = pane(&env, 120, 40, &[]);
    tmux.start_top();
    tmux.wait_for("the first session", |s| s.contains(&before));
    let daemon = env.daemon_pid().expect("the daemon's pid file");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the daemon");
    let after = spawn(&env, &["--name", "after", "--", "sleep", "300"]);
    tmux.wait_for("the session started after the restart", |s| {
        s.contains(&after) && s.contains(&before)
    });
    assert!(tmux.alternate_on(), "top is still up");
    tmux.keys(&["q"]);
    let screen = tmux.wait_restored("top-exit");
    assert!(screen.contains("top-exit=0"), "{screen}");
}

// The pane resumes after a daemon SIGKILL without the selection
// moving: the follower connects again and shows what the job prints after the
// restart (the first of two lines: the table's LAST LINE column shows only the
// second).
#[test]
fn top_pane_resumes_after_a_daemon_sigkill() {
    let env = Env::new();
    let gate = env.scratch().join("gate");
    let script = format!(
        "echo pane-before; while [ ! -e {0} ]; do sleep 0.05; done; echo pane-resumed-1; echo pane-resumed-2; exec sleep 300",
        gate.display()
    );
    let id = spawn(&env, &["--name", "resumer", "--", "sh", "-c", &script]);
    let tmux = pane(&env, 120, 40, &[]);
    tmux.start_top();
    tmux.wait_for("the session selected and its output in the pane", |s| {
        s.contains(&format!("{id} resumer · pipe")) && s.contains("pane-before")
    });
    let daemon = env.daemon_pid().expect("the daemon's pid file");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the daemon");
    wait_until(DEADLINE, || {
        env.daemon_pid()
            .is_some_and(|pid| pid != daemon && crate::support::alive(pid))
    })
    .unwrap_or_else(|()| panic!("no daemon came back:\n{}", tmux.screen()));
    std::fs::write(&gate, "").expect("the scratch dir is writable");
    tmux.wait_for("the output after the restart in the pane", |s| {
        s.contains("pane-resumed-1")
    });
    assert!(tmux.alternate_on(), "top is still up");
    tmux.keys(&["q"]);
    let screen = tmux.wait_restored("top-exit");
    assert!(screen.contains("top-exit=0"), "{screen}");
}
