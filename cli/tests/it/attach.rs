//! `herd attach` for real: the real daemon on a temp home, real PTY
//! and pipe sessions, and `herd attach` on a real terminal, a tmux pane of a
//! fixed size. Keys go in with `send-keys` (control bytes with `-H`, as a
//! terminal sends them); what a person would see comes out of `capture-pane`,
//! polled with a deadline. Each test has its own tmux server on a private
//! socket, killed when the test ends, failed or not ([`Tmux`]'s `Drop`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use herd_test_support::procs::children;
use herd_test_support::tmux::Tmux;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::support::{Env, HERD, stderr, wait_until};

/// How long anything on screen may take to show (CI runs on 2 busy cores).
const DEADLINE: Duration = Duration::from_secs(30);

/// A job that reads lines on its terminal and answers each in colour: `size`
/// prints what `stty size` says, `quit` exits 3, and Ctrl-C (its SIGINT) is
/// caught and said. It starts by printing `ready` and a GitHub-shaped token.
const ECHO_JOB: &str = r#"printf '\033[1;34mready\033[0m token %s%s\n' ghp_A1b2C3d4E5f6G7h8 I9j0K1l2M3n4O5p6Q7r8
trap 'printf "\033[33mINT-caught\033[0m\n"' INT
while :; do
  IFS= read -r line; rc=$?
  if [ $rc -eq 0 ]; then
    case "$line" in
      size) echo "size=$(stty size)";;
      quit) exit 3;;
      *) printf '\033[32mgot:%s\033[0m\n' "$line";;
    esac
  elif [ $rc -le 128 ]; then exit 0; fi
done
"#;

/// The token [`ECHO_JOB`] prints, whole.
const TOKEN: &str = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";

/// A tmux pane of `cols` x `rows` running `/bin/sh` with the home's
/// `HERD_HOME`, its screen read joined (herd-test-support's [`Tmux`]).
fn pane(env: &Env, cols: u16, rows: u16) -> Tmux {
    Tmux::start(
        env.scratch().join("tmux.sock"),
        "att",
        env.home(),
        (cols, rows),
        &[],
    )
    .joined()
}

/// What these tests do on the pane beyond typing and reading it.
trait AttachPane {
    /// The pane's size as `stty size` prints it: `rows cols`.
    fn pane_size(&self) -> String;
    /// Runs `herd attach ARGS` in the pane on a cleared screen, and waits until
    /// it is the pane's program (so the screen is no longer the one before).
    fn attach(&self, args: &str);
    /// The pids of the `herd` processes under the pane's shell.
    fn herd_pids(&self) -> Vec<i32>;
    /// Waits until `herd` is the pane's foreground program.
    fn wait_running(&self);
    /// Waits until the terminal is the shell's again: no alternate screen, no
    /// `herd attach` under the shell, and a typed command echoes and runs (the
    /// terminal is out of raw mode); the screen then, whose last `MARKER=` line
    /// holds the exit status of what ran before.
    fn wait_restored(&self, marker: &str) -> String;
}

impl AttachPane for Tmux {
    fn pane_size(&self) -> String {
        self.format("#{pane_height} #{pane_width}")
    }

    fn attach(&self, args: &str) {
        self.type_line(&format!("clear; {HERD} attach {args}"));
        self.wait_running();
    }

    fn herd_pids(&self) -> Vec<i32> {
        let shell = self.shell_pid();
        children(shell)
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim() == "herd")
            })
            .collect()
    }

    fn wait_running(&self) {
        if wait_until(DEADLINE, || {
            self.format("#{pane_current_command}") == "herd"
        })
        .is_err()
        {
            panic!("herd attach did not start:\n{}", self.screen());
        }
    }

    fn wait_restored(&self, marker: &str) -> String {
        if wait_until(DEADLINE, || self.format("#{alternate_on}") == "0").is_err() {
            panic!(
                "the terminal stayed in the alternate screen:\n{}",
                self.screen()
            );
        }
        let shell = self.shell_pid();
        if wait_until(DEADLINE, || children(shell).is_empty()).is_err() {
            panic!(
                "herd attach is still running under the shell:\n{}",
                self.screen()
            );
        }
        self.type_line(&format!("echo {marker}=$?"));
        let expect = format!("{marker}=");
        self.wait_for("the shell to run a command again", |s| {
            s.lines().any(|l| unprompted(l).starts_with(&expect))
        })
    }
}

/// Starts a session running `script` (written to a file) with `args`; its id.
fn spawn(env: &Env, script: &str, args: &[&str]) -> String {
    static N_JOBS: AtomicUsize = AtomicUsize::new(0);
    let n = N_JOBS.fetch_add(1, Ordering::Relaxed);
    let path = env.scratch().join(format!("job{n}.sh"));
    std::fs::write(&path, script).expect("the scratch dir is writable");
    let mut all = vec!["run", "--json"];
    all.extend_from_slice(args);
    let path = path.to_string_lossy().into_owned();
    all.extend_from_slice(&["--", "bash", &path]);
    let answer = env.json(&all);
    answer["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("run answered no session_id: {answer}"))
        .to_owned()
}

/// The session's status as `ps --all --json` lists it.
fn status(env: &Env, id: &str) -> String {
    let list = env.json(&["ps", "--all", "--json"]);
    list["processes"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["session_id"] == id))
        .and_then(|r| r["status"].as_str())
        .unwrap_or_else(|| panic!("{id} is not listed: {list}"))
        .to_owned()
}

/// The line of the screen that starts with `start`.
fn line_starting<'s>(screen: &'s str, start: &str) -> Option<&'s str> {
    screen
        .lines()
        .map(unprompted)
        .find(|l| l.starts_with(start))
}

/// A screen line without the shell's prompt before it: a command typed while
/// the previous one still ran is read ahead, so its output follows the prompt.
fn unprompted(line: &str) -> &str {
    line.strip_prefix("$ ")
        .or_else(|| line.strip_prefix("# "))
        .unwrap_or(line)
}

// `herd attach` puts a PTY session on the terminal: the screen it had
// (redacted, in colour), typed lines echoed by the job, Ctrl-C reaching the job
// (not herd), the pane's size as the job's and a resize passed on; Ctrl-\
// detaches with the terminal restored and the job still running; attaching again
// shows the screen, and the job's end says how it ended and exits 1 for exit 3.
#[test]
fn attach_pty_keys_ctrl_c_window_size_detach_and_reattach() {
    let env = Env::new();
    let id = spawn(&env, ECHO_JOB, &["--pty", "--name", "echoer"]);
    wait_until(DEADLINE, || env.ok(&["logs", &id]).contains("ready"))
        .unwrap_or_else(|()| panic!("the job never printed ready"));
    let tmux = pane(&env, 100, 30);
    tmux.attach("echoer");

    // The screen the job drew before the attach, its token masked.
    let screen = tmux.wait_for("the job's screen", |s| s.contains("ready token"));
    assert!(!screen.contains(TOKEN), "the token shows whole:\n{screen}");
    assert!(
        screen.contains("ghp_A1"),
        "the token's mask is missing:\n{screen}"
    );
    assert!(
        tmux.screen_with_colours().contains("\x1b[1m\x1b[34mready")
            || tmux.screen_with_colours().contains("\x1b[1;34mready"),
        "ready is not bold blue:\n{}",
        tmux.screen_with_colours()
    );

    // A typed line: echoed by the job's terminal, answered by the job in green.
    tmux.type_line("hello there");
    tmux.wait_for("the job's answer", |s| s.contains("got:hello there"));
    let coloured = tmux.screen_with_colours();
    assert!(
        coloured.contains("\x1b[32mgot:hello there"),
        "the answer is not green:\n{coloured}"
    );

    // Ctrl-C is a byte for the job's terminal, which makes it the job's SIGINT.
    tmux.control(0x03);
    tmux.wait_for("the job to catch its SIGINT", |s| s.contains("INT-caught"));
    assert_eq!(status(&env, &id), "running", "Ctrl-C ended the job");

    // The job's terminal has the pane's size, and follows a resize.
    let before = tmux.pane_size();
    tmux.type_line("size");
    tmux.wait_for("the job's size", |s| s.contains(&format!("size={before}")));
    tmux.run(&["resize-window", "-t", "att", "-x", "90", "-y", "20"]);
    let after = tmux.pane_size();
    assert_ne!(before, after, "tmux did not resize the window");
    // The resize reaches the job after a round trip (SIGWINCH to herd, `resize`
    // to the daemon): a question typed before it lands gets the old size, so ask
    // again until the answer is the new one.
    let new_size = format!("size={after}");
    let resized = (0..15).any(|_| {
        tmux.type_line("size");
        wait_until(Duration::from_secs(2), || tmux.screen().contains(&new_size)).is_ok()
    });
    assert!(resized, "the job never saw {after}:\n{}", tmux.screen());

    // Ctrl-\ detaches: the shell's terminal back, the job still running.
    tmux.control(0x1c);
    let screen = tmux.wait_restored("detached");
    assert!(
        screen.contains("herd: detached from") && screen.contains("still running"),
        "no detach message:\n{screen}"
    );
    assert!(
        screen.contains(&format!("herd attach {id}")),
        "the message does not say how to attach again:\n{screen}"
    );
    assert_eq!(
        line_starting(&screen, "detached="),
        Some("detached=0"),
        "{screen}"
    );
    assert_eq!(status(&env, &id), "running", "detaching ended the job");

    // Attaching again shows the screen as it was, then the job's end.
    tmux.attach(&id);
    tmux.wait_for("the screen again", |s| {
        s.contains("got:hello there") && s.contains("INT-caught")
    });
    tmux.type_line("quit");
    let screen = tmux.wait_restored("ended");
    assert!(
        screen.contains(&format!("{id} exited 3")),
        "the ending is not said:\n{screen}"
    );
    assert_eq!(
        line_starting(&screen, "ended="),
        Some("ended=1"),
        "{screen}"
    );
}

// A full-screen program's screen is rebuilt on attach (the alternate
// screen, text at its place), `--detach-key ^X` detaches and gives the main
// screen back, as SIGTERM and SIGHUP do, and a job that exits 0 while attached
// makes attach exit 0.
#[test]
fn attach_rebuilds_a_full_screen_program_and_detaches_on_a_chosen_key() {
    let env = Env::new();
    // It says it has drawn by a file: its last line has no end, so the log's
    // line-based readers (`herd logs`) do not show it before it goes idle.
    let full = r#"printf '\033[?1049h\033[2J\033[5;10Hfull screen here\033[8;20Hrow eight'
: > "$(dirname "$0")/drawn"
IFS= read -r _
exit 0
"#;
    let id = spawn(&env, full, &["--pty"]);
    let drawn = env.scratch().join("drawn");
    wait_until(DEADLINE, || drawn.exists())
        .unwrap_or_else(|()| panic!("the job never drew its screen"));
    let tmux = pane(&env, 80, 24);
    tmux.type_line(&format!(
        "clear; echo main-screen-text; {HERD} attach --detach-key ^X {id}"
    ));
    tmux.wait_running();
    let screen = tmux.wait_for("the full-screen program", |s| s.contains("row eight"));
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(
        lines.get(4).map(|l| l.trim_end()),
        Some("         full screen here"),
        "not at row 5, column 10:\n{screen}"
    );
    assert_eq!(
        lines.get(7).map(|l| l.trim_end()),
        Some("                   row eight"),
        "not at row 8, column 20:\n{screen}"
    );
    assert_eq!(
        tmux.format("#{alternate_on}"),
        "1",
        "not on the alternate screen"
    );

    // Ctrl-\ is now a key for the job, Ctrl-X the one that detaches.
    tmux.control(0x18);
    let screen = tmux.wait_restored("back");
    assert!(
        screen.contains("main-screen-text"),
        "the main screen is lost:\n{screen}"
    );
    assert!(
        !screen.contains("row eight"),
        "the job's screen stayed:\n{screen}"
    );
    assert!(
        screen.contains(&format!("herd attach --detach-key '^X' {id}")),
        "the re-attach hint lost the key:\n{screen}"
    );
    assert_eq!(status(&env, &id), "running");

    // SIGTERM and SIGHUP detach too, with the terminal given back.
    for (signal, marker) in [(Signal::SIGTERM, "term"), (Signal::SIGHUP, "hup")] {
        tmux.attach(&id);
        tmux.wait_for("the program again", |s| s.contains("full screen here"));
        assert_eq!(tmux.format("#{alternate_on}"), "1");
        for herd in tmux.herd_pids() {
            nix::sys::signal::kill(Pid::from_raw(herd), signal).expect("herd attach is ours");
        }
        let screen = tmux.wait_restored(marker);
        assert!(screen.contains(&format!("({signal})")), "{screen}");
        assert!(
            !screen.contains("row eight"),
            "the job's screen stayed:\n{screen}"
        );
        assert_eq!(status(&env, &id), "running", "{signal} reached the job");
    }

    tmux.attach(&format!("--detach-key ^x {id}"));
    tmux.wait_for("the program again", |s| s.contains("full screen here"));
    tmux.run(&["send-keys", "-t", "att", "Enter"]);
    let screen = tmux.wait_restored("ok");
    assert!(screen.contains(&format!("{id} exited 0")), "{screen}");
    assert_eq!(line_starting(&screen, "ok="), Some("ok=0"), "{screen}");
}

// A panic while attached gives the terminal back (the alternate
// screen left, raw mode off) before the report, exits 101, and leaves the job
// running. Debug builds panic on Ctrl-G when HERD_ATTACH_TEST_PANIC is set.
#[test]
fn attach_restores_the_terminal_on_a_panic() {
    let env = Env::new();
    let full = "printf '\\033[?1049h\\033[2J\\033[3;3Hpanic target '\nIFS= read -r _\n";
    let id = spawn(&env, full, &["--pty"]);
    let tmux = pane(&env, 100, 30);
    tmux.type_line(&format!(
        "clear; HERD_ATTACH_TEST_PANIC=1 {HERD} attach {id}"
    ));
    tmux.wait_running();
    tmux.wait_for("the program", |s| s.contains("panic target"));
    assert_eq!(tmux.format("#{alternate_on}"), "1");
    tmux.control(0x07);
    let screen = tmux.wait_restored("after-panic");
    assert_eq!(
        line_starting(&screen, "after-panic="),
        Some("after-panic=101"),
        "{screen}"
    );
    assert!(
        screen.contains("HERD_ATTACH_TEST_PANIC"),
        "no report:\n{screen}"
    );
    assert_eq!(status(&env, &id), "running");
}

// A pipe session attaches read-only for output, says so, and sends
// each typed line to the job's stdin; Ctrl-D and Ctrl-C detach, the job running.
#[test]
fn attach_pipe_session_shows_output_and_submits_lines() {
    let env = Env::new();
    let job = "echo before-attach\nwhile IFS= read -r l; do echo \"pipe-got:$l\"; done\n";
    let id = spawn(&env, job, &[]);
    wait_until(DEADLINE, || {
        env.ok(&["logs", &id]).contains("before-attach")
    })
    .unwrap_or_else(|()| panic!("the job never printed"));
    let tmux = pane(&env, 120, 30);
    tmux.attach(&id);
    let screen = tmux.wait_for("the notice and the output so far", |s| {
        s.contains("a pipe session") && s.contains("before-attach")
    });
    assert!(screen.contains("read-only"), "{screen}");
    tmux.type_line("a typed line");
    tmux.wait_for("the job's answer", |s| s.contains("pipe-got:a typed line"));

    tmux.control(0x04);
    let screen = tmux.wait_restored("eof");
    assert!(screen.contains("herd: detached from"), "{screen}");
    assert_eq!(line_starting(&screen, "eof="), Some("eof=0"), "{screen}");
    assert_eq!(status(&env, &id), "running");

    tmux.attach(&id);
    tmux.wait_for("attached again", |s| s.contains("a pipe session"));
    tmux.control(0x03);
    let screen = tmux.wait_restored("int");
    assert!(screen.contains("(SIGINT)"), "{screen}");
    assert_eq!(status(&env, &id), "running");
}

// Attach refuses clearly: stdin or stdout not a terminal (exit 2,
// naming which and what to use instead), a finished session (exit 2, how it
// ended, pointing at `herd logs`), an unknown id, a detach key that is none.
#[test]
fn attach_refuses_no_terminal_finished_sessions_and_bad_keys() {
    let env = Env::new();
    let id = spawn(&env, "read -r _\n", &["--pty"]);
    let out = env.run(&["attach", &id]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("stdin is not a terminal") && stderr(&out).contains("herd submit"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["attach", "--detach-key", "x", &id]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("caret notation"), "{}", stderr(&out));

    let done = spawn(&env, "exit 4\n", &[]);
    wait_until(DEADLINE, || status(&env, &done) != "running")
        .unwrap_or_else(|()| panic!("{done} never finished"));
    let tmux = pane(&env, 120, 30);
    tmux.type_line(&format!(
        "{HERD} attach {id} > {}/out",
        env.scratch().display()
    ));
    let screen = tmux.wait_restored("piped");
    assert!(screen.contains("stdout is not a terminal"), "{screen}");
    assert_eq!(
        line_starting(&screen, "piped="),
        Some("piped=2"),
        "{screen}"
    );

    // Refused at once: no waiting for it to run.
    tmux.type_line(&format!("clear; {HERD} attach {done}"));
    let screen = tmux.wait_restored("finished");
    assert!(
        screen.contains("has finished") && screen.contains("exited 4"),
        "{screen}"
    );
    assert!(screen.contains(&format!("herd logs {done}")), "{screen}");
    assert_eq!(
        line_starting(&screen, "finished="),
        Some("finished=2"),
        "{screen}"
    );

    tmux.type_line(&format!("clear; {HERD} attach nosuchname"));
    let screen = tmux.wait_restored("unknown");
    assert_eq!(
        line_starting(&screen, "unknown="),
        Some("unknown=2"),
        "{screen}"
    );
    assert_eq!(status(&env, &id), "running");
}

// Attaching before the job printed anything (its log not even
// created) still shows what it prints afterwards, PTY and pipe alike. The job
// prints nothing until it reads a line, and keys reach it only once attach
// follows its log, so the first byte comes after the attach looked at the log.
#[test]
fn attach_before_the_first_byte_shows_what_comes_after() {
    let env = Env::new();
    let tmux = pane(&env, 100, 30);
    let pty = spawn(
        &env,
        "stty -echo\nIFS= read -r l\necho \"late-pty:$l\"\nIFS= read -r _\n",
        &["--pty"],
    );
    tmux.attach(&pty);
    tmux.type_line("first");
    tmux.wait_for("the PTY job's first output", |s| {
        s.contains("late-pty:first")
    });
    tmux.control(0x1c);
    let screen = tmux.wait_restored("pty");
    assert!(screen.contains("herd: detached from"), "{screen}");

    let pipe = spawn(
        &env,
        "IFS= read -r l\necho \"late-pipe:$l\"\nIFS= read -r _\n",
        &[],
    );
    tmux.attach(&pipe);
    tmux.wait_for("the pipe notice", |s| s.contains("a pipe session"));
    tmux.type_line("second");
    tmux.wait_for("the pipe job's first output", |s| {
        s.contains("late-pipe:second")
    });
    tmux.control(0x04);
    tmux.wait_restored("pipe");
}

// Attach rides through a daemon SIGKILL: the next daemon (started by
// the attach's reconnect) is asked for the screen again, and typed lines keep
// reaching the job, which ran on under its shim.
#[test]
fn attach_rides_through_a_daemon_sigkill() {
    let env = Env::new();
    let id = spawn(
        &env,
        "while IFS= read -r l; do echo \"got:$l\"; done\n",
        &["--pty"],
    );
    let tmux = pane(&env, 100, 30);
    tmux.attach(&id);
    tmux.type_line("one");
    tmux.wait_for("the first answer", |s| s.contains("got:one"));
    let daemon = env.daemon_pid().expect("the daemon's pid file");
    nix::sys::signal::kill(Pid::from_raw(daemon), Signal::SIGKILL).expect("SIGKILL the daemon");
    wait_until(DEADLINE, || {
        env.daemon_pid()
            .is_some_and(|pid| pid != daemon && crate::support::alive(pid))
    })
    .unwrap_or_else(|()| panic!("no daemon came back:\n{}", tmux.screen()));
    tmux.wait_running();
    // Keys typed while it re-attaches wait in the terminal for the next reader.
    tmux.type_line("two");
    tmux.wait_for("the answer after the restart", |s| s.contains("got:two"));
    tmux.control(0x1c);
    let screen = tmux.wait_restored("after");
    assert!(screen.contains("herd: detached from"), "{screen}");
    assert_eq!(status(&env, &id), "running");
}

/// A job that, in raw mode, asks its terminal where the cursor is each time it
/// reads `q` (after moving it to row 7, column 13), and writes the reply it got,
/// in hex, to `reply<n>` in `$REPLIES`; `x` ends it.
const QUERY_JOB: &str = r#"printf 'query-ready\n'
stty raw -echo
n=0
while IFS= read -r -n 1 k; do
  case "$k" in
    q) printf '\033[7;13H\033[6n'
       IFS= read -r -t 20 -d R reply
       n=$((n+1))
       printf '%sR' "$reply" | od -An -tx1 | tr -d ' \n' > "$REPLIES/reply$n.tmp"
       mv "$REPLIES/reply$n.tmp" "$REPLIES/reply$n"
       printf '\r\nanswered-%s\r\n' "$n";;
    x) exit 0;;
  esac
done
"#;

// B7: attached, the job's cursor-position query goes to the real
// terminal (a tmux pane, with the cursor at 7;13) and that terminal's reply
// reaches the job as its input, exactly, never shown as typed text; detached,
// herd answers the next query itself (1;1), so the job never hangs.
#[test]
fn b7_attached_terminal_answers_the_jobs_cursor_query() {
    let env = Env::new();
    let replies = env.scratch().join("replies");
    std::fs::create_dir(&replies).expect("the scratch dir is writable");
    let script = QUERY_JOB.replace("$REPLIES", &replies.to_string_lossy());
    let id = spawn(&env, &script, &["--pty"]);
    let tmux = pane(&env, 100, 30);
    tmux.attach(&id);
    tmux.wait_for("the job's first line", |s| s.contains("query-ready"));
    tmux.keys(&["q"]);
    let first = replies.join("reply1");
    wait_until(DEADLINE, || first.exists())
        .unwrap_or_else(|()| panic!("the job got no reply:\n{}", tmux.screen()));
    let got = std::fs::read_to_string(&first).expect("the reply file is readable");
    // ESC [ 7 ; 1 3 R: the terminal's own answer, not herd's 1;1.
    assert_eq!(got, "1b5b373b313352", "the job's reply, in hex");
    let screen = tmux.wait_for("the job's answer line", |s| s.contains("answered-1"));
    assert!(
        !screen.contains("7;13R"),
        "the reply shows as text:\n{screen}"
    );
    assert!(!screen.contains("1;1R"), "herd answered too:\n{screen}");
    tmux.control(0x1c);
    tmux.wait_restored("query");

    // The query is in the log now: `herd logs` on this terminal leaves it out, so
    // the terminal types no answer into the shell that reads next: bash's `read`
    // right after it (the terminal put in cbreak mode by `-n`, so a reply without
    // a newline is read too) gets nothing; the line bash computes (on a cleared
    // screen: the log moves the cursor) proves the read ran.
    tmux.type_line(&format!(
        "{HERD} logs {id}; bash -c 'read -r -s -t 2 -n 12 x; n=${{#x}}; clear; echo \"logs-done-$n-$((1+1))\"'"
    ));
    let screen = tmux.wait_for("the shell's read after herd logs", |s| {
        s.lines()
            .any(|l| unprompted(l).starts_with("logs-done-") && !l.contains('$'))
    });
    assert!(
        screen.lines().any(|l| unprompted(l) == "logs-done-0-2"),
        "the terminal answered a query herd logs printed:\n{screen}"
    );
    tmux.type_line("echo after-$((40+2))");
    tmux.wait_for("the next command to run as typed", |s| {
        s.lines().any(|l| unprompted(l) == "after-42")
    });

    // Nobody attached: herd answers, at 1;1.
    env.ok(&["send", &id, "q"]);
    let second = replies.join("reply2");
    wait_until(DEADLINE, || second.exists())
        .unwrap_or_else(|()| panic!("herd did not answer the detached job's query"));
    let got = std::fs::read_to_string(&second).expect("the reply file is readable");
    assert_eq!(got, "1b5b313b3152", "herd's reply, in hex");
    env.ok(&["send", &id, "x"]);
}
