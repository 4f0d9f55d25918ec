//! Tree-kill tests against real process trees (B15, B16, B18).
//!
//! Every test starts a real `bash -c` script in its own process group, tagged with
//! a unique `HERD_SESSION` value, waits for the readiness lines the script prints,
//! kills it and checks what is left in the process table. A background thread reaps
//! the direct child the way the registry's child handle would; orphans are reaped
//! by this machine's init, so "group gone" is awaited with a deadline.

use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::*;

/// Short grace so the tests stay fast.
const GRACE: Duration = Duration::from_millis(300);

/// Failure deadline for anything awaited (readiness lines, reaping by init).
const DEADLINE: Duration = Duration::from_secs(15);

/// A test tree: the direct child, its output lines and its reaper.
#[derive(Debug)]
struct Spawned {
    pid: i32,
    tag: String,
    lines: Receiver<String>,
    seen: Vec<String>,
    exit: Receiver<ExitStatus>,
    /// Sending on it lets the reaper call `wait()`; dropped or sent at once unless
    /// the test needs the leader to stay a zombie.
    reap_gate: Option<Sender<()>>,
}

fn unique_tag() -> String {
    format!("proc_{:012x}", fastrand::u64(..) & 0xffff_ffff_ffff)
}

/// Starts `script` under bash in a new process group with `HERD_SESSION=<tag>`.
/// With `reap_now` false the direct child is only reaped after `release_reaper`.
#[expect(clippy::disallowed_methods, reason = "test drives a raw child")]
fn spawn_tree(script: &str, reap_now: bool) -> Spawned {
    let tag = unique_tag();
    let mut child = Command::new("/bin/bash")
        .arg("-c")
        .arg(script)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env(SESSION_TAG_ENV, &tag)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("bash is installed on every test machine");
    let pid = i32::try_from(child.id()).expect("pids fit in i32");
    let stdout = child.stdout.take().expect("stdout was piped");
    let (line_tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let (exit_tx, exit) = mpsc::channel();
    std::thread::spawn(move || {
        // Either a release or a dropped sender opens the gate.
        let _opened = gate_rx.recv();
        if let Ok(status) = child.wait() {
            let _receiver_gone = exit_tx.send(status);
        }
    });
    let mut spawned = Spawned {
        pid,
        tag,
        lines,
        seen: Vec::new(),
        exit,
        reap_gate: Some(gate_tx),
    };
    if reap_now {
        spawned.release_reaper();
    }
    spawned
}

impl Spawned {
    fn target(&self) -> KillTarget {
        KillTarget {
            pid: self.pid,
            pgid: self.pid,
            start_time: sys::start_time(self.pid),
            session_tag: self.tag.clone(),
        }
    }

    fn release_reaper(&mut self) {
        if let Some(gate) = self.reap_gate.take() {
            let _reaper_gone = gate.send(());
        }
    }

    /// Waits for a line starting with `prefix` and returns the rest of it.
    fn line(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return rest.trim().to_owned();
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => panic!(
                    "no line starting with {prefix:?} from pid {}; output so far: {:?}",
                    self.pid, self.seen
                ),
            }
        }
    }

    /// Every line the tree printed, up to the end of its output (all writers gone).
    fn all_lines(&mut self) -> Vec<String> {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Disconnected) => return self.seen.clone(),
                Err(RecvTimeoutError::Timeout) => panic!(
                    "output of pid {} never ended; so far: {:?}",
                    self.pid, self.seen
                ),
            }
        }
    }

    fn pid_line(&mut self, prefix: &str) -> i32 {
        let text = self.line(prefix);
        text.parse()
            .unwrap_or_else(|_| panic!("{prefix:?} line carries a pid, got {text:?}"))
    }

    /// The exit status of the direct child, awaited with the deadline.
    fn exit_status(&self) -> ExitStatus {
        self.exit
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|_| panic!("pid {} was not reaped", self.pid))
    }

    /// Asserts the session's process group is gone: `kill(-pgid, 0)` fails with
    /// ESRCH once every member has exited and been reaped.
    fn assert_group_gone(&self) {
        wait_until(&format!("process group {} to be gone", self.pid), || {
            !sys::group_exists(self.pid)
        });
    }
}

/// Polls `cond` until it holds; panics naming `what` at the deadline.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::park_timeout(Duration::from_millis(10));
    }
}

fn is_running(pid: i32) -> bool {
    sys::proc_info(pid).is_some_and(|info| info.is_alive())
}

fn assert_all_dead(pids: &[i32]) {
    for &pid in pids {
        assert!(
            !is_running(pid),
            "pid {pid} is still running: {:?}",
            sys::proc_info(pid)
        );
    }
}

#[test]
fn parse_stat_handles_spaces_and_parens_in_the_command_name() {
    let line = b"4242 (a) b (c) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
    let info = sys::parse_stat(4242, line).expect("a well-formed stat line");
    assert_eq!(
        (info.ppid, info.pgrp, info.state, info.start_time),
        (17, 4242, b'S', 987_654)
    );
    assert!(info.is_alive());
    assert_eq!(sys::parse_stat(1, b"1 (init S 0"), None);
    assert_eq!(sys::parse_stat(1, b"1 (x) Z 0 1"), None);
}

#[test]
fn environ_lookup_matches_whole_names_only() {
    let block =
        b"PATH=/bin\0XHERD_SESSION=proc_x\0HERD_SESSION=proc_abc\0HERD_SESSION=proc_2nd\0E=\0";
    assert_eq!(
        sys::environ_lookup(block, SESSION_TAG_ENV),
        Some(&b"proc_abc"[..])
    );
    assert_eq!(sys::environ_lookup(block, "E"), Some(&b""[..]));
    assert_eq!(sys::environ_lookup(block, "HERD"), None);
    assert_eq!(sys::environ_lookup(b"", SESSION_TAG_ENV), None);
}

#[test]
fn start_time_of_this_process_is_stable_and_missing_for_a_free_pid() {
    let me = sys::own_pid();
    let first = sys::start_time(me).expect("our own stat is readable");
    assert_eq!(sys::start_time(me), Some(first));
    assert_eq!(sys::start_time(-5), None);
    assert_eq!(sys::start_time(i32::MAX), None);
}

// B15: a shell that survives SIGTERM and answers it by starting three children,
// i.e. during the grace window; all of them must die.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_children_started_during_grace_leave_no_survivors() {
    let mut tree = spawn_tree(
        "trap 'for i in 1 2 3; do sleep 3600 & echo child $!; done' TERM; \
         sleep 600 & echo ready; while :; do wait; done",
        true,
    );
    tree.line("ready");
    // The children start on the SIGTERM (a timer in the job could outlast the
    // grace on a loaded machine); the grace leaves the shell 3 s to start them.
    let outcome = kill_tree(&tree.target(), Duration::from_secs(3)).await;
    assert!(
        outcome.gone,
        "survivors after kill: {:?}",
        outcome.survivors
    );
    assert!(outcome.survivors.is_empty());
    let children = [
        tree.pid_line("child"),
        tree.pid_line("child"),
        tree.pid_line("child"),
    ];
    assert_all_dead(&children);
    assert_eq!(tree.exit_status().signal(), Some(libc::SIGKILL));
    tree.assert_group_gone();
}

/// A shell whose background job called `setsid` and left its group and its parent
/// (the subshell that started it exited): the shell and the escapee's pid, once it
/// has left both.
fn with_setsid_escapee() -> (Spawned, i32) {
    let mut tree = spawn_tree(
        "(setsid sleep 600 & echo escapee $!); echo ready; sleep 600",
        true,
    );
    let escapee = tree.pid_line("escapee");
    tree.line("ready");
    wait_until("the escapee to leave the group and the shell", || {
        sys::proc_info(escapee).is_some_and(|i| i.pgrp != tree.pid && i.ppid != tree.pid)
    });
    (tree, escapee)
}

// B15: a daemon that double-forked into its own session is found by its tag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_setsid_escapee_is_found_by_its_session_tag() {
    let (tree, escapee) = with_setsid_escapee();
    let outcome = kill_tree(&tree.target(), GRACE).await;
    assert!(outcome.gone, "survivors: {:?}", outcome.survivors);
    assert_all_dead(&[escapee]);
    assert_eq!(tree.exit_status().signal(), Some(libc::SIGTERM));
    tree.assert_group_gone();
    wait_until("the escapee to be reaped", || {
        sys::proc_info(escapee).is_none()
    });
}

// B15: an escapee whose environment reads empty when the kill first looks (as it
// does between the two halves of an exec: the new image has no environment yet) is
// read again at the next look and killed, not taken as untagged for the rest of the
// kill. The first read of the escapee is made to come back empty here, because the
// exec's window is too short to hit on demand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_an_escapee_read_mid_exec_is_read_again_and_killed() {
    let (tree, escapee) = with_setsid_escapee();
    let empty_reads = std::sync::atomic::AtomicUsize::new(0);
    let reader = |pid: i32| {
        if pid == escapee && empty_reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            return sys::EnvRead::Unreadable;
        }
        read_tag(pid)
    };
    let outcomes = kill_trees_limited(
        &[tree.target()],
        GRACE,
        ProcInfo::is_alive,
        MAX_PIDFDS,
        reader,
    )
    .await;
    assert!(
        empty_reads.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "the escapee's environment was read again after the empty read"
    );
    assert!(outcomes[0].gone, "survivors: {:?}", outcomes[0].survivors);
    assert_all_dead(&[escapee]);
    tree.assert_group_gone();
    wait_until("the escapee to be reaped", || {
        sys::proc_info(escapee).is_none()
    });
}

// B15: a process whose environment stays unreadable (empty for good) is taken as
// untagged a rescan interval after its first read: it never holds the kill open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_an_environment_empty_for_good_does_not_hold_the_kill_open() {
    let mut tree = spawn_tree("echo ready; sleep 600", true);
    tree.line("ready");
    let mut bystander = spawn_tree("echo ready; exec sleep 600", true);
    bystander.line("ready");
    let stranger = bystander.pid;
    let reader = |pid: i32| {
        if pid == stranger {
            return sys::EnvRead::Unreadable;
        }
        read_tag(pid)
    };
    // A long grace: a kill held open by the unreadable environment would last it out.
    let grace = Duration::from_secs(5);
    let started = Instant::now();
    let outcomes = kill_trees_limited(
        &[tree.target()],
        grace,
        ProcInfo::is_alive,
        MAX_PIDFDS,
        reader,
    )
    .await;
    assert!(outcomes[0].gone, "survivors: {:?}", outcomes[0].survivors);
    assert!(
        started.elapsed() < grace,
        "the kill ended once the tree was gone, not at its grace: {:?}",
        started.elapsed()
    );
    assert!(
        is_running(stranger),
        "a process that is not the tree's is left alone"
    );
    tree.assert_group_gone();
}

// B15: a TERM-ignoring parent with two TERM-ignoring children dies by SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_term_ignoring_tree_dies_by_sigkill_after_grace() {
    let mut tree = spawn_tree(
        "trap '' TERM; sleep 600 & echo child $!; sleep 600 & echo child $!; echo ready; wait",
        true,
    );
    let children = [tree.pid_line("child"), tree.pid_line("child")];
    tree.line("ready");
    // Run on a spawned task, as the registry does: this also pins that the kill
    // future is `Send`.
    let target = tree.target();
    let outcome = tokio::spawn(async move { kill_tree(&target, GRACE).await })
        .await
        .expect("the kill task does not panic");
    assert!(outcome.gone, "survivors: {:?}", outcome.survivors);
    assert!(!outcome.identity_mismatch);
    // One SIGTERM and one SIGKILL to the group.
    assert_eq!(outcome.signalled, 2);
    assert_all_dead(&children);
    assert_eq!(tree.exit_status().signal(), Some(libc::SIGKILL));
    tree.assert_group_gone();
}

// B15: a grandchild that called setsid (and scrubbed its tag) is found through
// its parent link while the shell is alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_setsid_grandchild_is_found_and_killed() {
    let mut tree = spawn_tree(
        "env -u HERD_SESSION setsid sleep 600 & echo grandchild $!; echo ready; wait",
        true,
    );
    let grandchild = tree.pid_line("grandchild");
    tree.line("ready");
    wait_until("the grandchild to run setsid", || {
        sys::proc_info(grandchild).is_some_and(|i| i.pgrp == grandchild)
    });
    assert_eq!(sys::environ_value(grandchild, SESSION_TAG_ENV), None);
    let outcome = kill_tree(&tree.target(), GRACE).await;
    assert!(outcome.gone, "survivors: {:?}", outcome.survivors);
    assert_all_dead(&[grandchild]);
    tree.assert_group_gone();
}

// B15: the leader honours SIGTERM and exits at once; the rest of the group ignores
// it. Tracking the group, not the leader, means the rest still gets SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_leader_exiting_early_does_not_cancel_sigkill_of_the_rest() {
    let mut tree = spawn_tree(
        "(trap '' TERM; sleep 600) & echo child $!; (trap '' TERM; sleep 600) & echo child $!; echo ready; wait",
        true,
    );
    let children = [tree.pid_line("child"), tree.pid_line("child")];
    tree.line("ready");
    let outcome = kill_tree(&tree.target(), GRACE).await;
    assert!(outcome.gone, "survivors: {:?}", outcome.survivors);
    assert_eq!(tree.exit_status().signal(), Some(libc::SIGTERM));
    assert_all_dead(&children);
    tree.assert_group_gone();
}

// B15: SIGTERM reaches the group once. The leader counts the SIGTERMs it receives
// and answers the first by starting a child during the grace window (so no timing
// is involved); that latecomer gets its own signals, the leader sees one SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_sigterm_reaches_the_group_once_and_latecomers_individually() {
    let mut tree = spawn_tree(
        "trap 'echo got-term; (trap \"\" TERM; exec sleep 600) & echo late $!' TERM; \
         sleep 600 & echo ready; while :; do wait; done",
        true,
    );
    tree.line("ready");
    let outcome = kill_tree(&tree.target(), Duration::from_millis(1200)).await;
    assert!(outcome.gone, "survivors: {:?}", outcome.survivors);
    let late = tree.pid_line("late");
    assert_all_dead(&[late]);
    let lines = tree.all_lines();
    let n_terms = lines.iter().filter(|l| l.as_str() == "got-term").count();
    assert_eq!(n_terms, 1, "output: {lines:?}");
    assert_eq!(tree.exit_status().signal(), Some(libc::SIGKILL));
    tree.assert_group_gone();
}

// B15: a stopped process cannot act on SIGTERM; the SIGCONT that follows it lets
// the child die within the grace, so its TERM-ignoring parent reports the status
// and exits by itself, without any SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_stopped_child_is_continued_after_sigterm() {
    // The child is forked before the trap (so SIGTERM kills it) and stops itself.
    let mut tree = spawn_tree(
        "(kill -STOP $BASHPID; exec sleep 600) & pid=$!; echo child $pid; \
         trap '' TERM; echo ready; wait $pid; echo child-status $?",
        true,
    );
    let child = tree.pid_line("child");
    tree.line("ready");
    wait_until("the child to stop itself", || {
        sys::proc_info(child).is_some_and(|i| i.state == b'T')
    });
    let outcome = kill_tree(&tree.target(), Duration::from_secs(10)).await;
    assert!(outcome.gone, "survivors: {:?}", outcome.survivors);
    assert_eq!(tree.line("child-status"), "143", "128 + SIGTERM");
    assert_eq!(
        tree.exit_status().code(),
        Some(0),
        "no escalation was needed"
    );
    tree.assert_group_gone();
}

// B18: a recorded pid whose start time differs belongs to a stranger now; it is
// never signalled. The "stranger" is a live process of ours with another tag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b18_reused_pid_is_never_signalled() {
    let mut stranger = spawn_tree("echo ready; exec sleep 600", true);
    stranger.line("ready");
    let real_start = sys::start_time(stranger.pid).expect("the stranger is running");
    let stale = KillTarget {
        pid: stranger.pid,
        pgid: stranger.pid,
        start_time: Some(real_start + 1),
        session_tag: unique_tag(),
    };
    let outcome = kill_tree(&stale, GRACE).await;
    assert!(outcome.identity_mismatch);
    assert_eq!(outcome.signalled, 0);
    assert!(outcome.gone, "nothing of the stale session was alive");
    assert!(is_running(stranger.pid));
    assert_eq!(sys::start_time(stranger.pid), Some(real_start));
    assert!(matches!(
        stranger.exit.try_recv(),
        Err(mpsc::TryRecvError::Empty)
    ));

    // With the right identity the same pid is ours to kill.
    let outcome = kill_tree(&stranger.target(), GRACE).await;
    assert!(outcome.gone && !outcome.identity_mismatch);
    assert_eq!(stranger.exit_status().signal(), Some(libc::SIGTERM));
    stranger.assert_group_gone();
}

// B15: grace zero means SIGTERM only; a TERM-ignoring process is reported as a
// survivor and is left running, a TERM-honouring one is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_zero_grace_sends_sigterm_only() {
    let mut stubborn = spawn_tree("trap '' TERM; echo ready; exec sleep 600", true);
    stubborn.line("ready");
    let outcome = kill_tree(&stubborn.target(), Duration::ZERO).await;
    assert!(!outcome.gone);
    assert_eq!(outcome.survivors, vec![stubborn.pid]);
    assert_eq!(outcome.signalled, 1);
    assert!(is_running(stubborn.pid), "SIGKILL was sent despite grace 0");

    let outcome = kill_tree(&stubborn.target(), GRACE).await;
    assert!(outcome.gone, "survivors: {:?}", outcome.survivors);
    assert_eq!(stubborn.exit_status().signal(), Some(libc::SIGKILL));
    stubborn.assert_group_gone();

    let mut polite = spawn_tree("echo ready; exec sleep 600", true);
    polite.line("ready");
    let outcome = kill_tree(&polite.target(), Duration::ZERO).await;
    assert!(outcome.gone, "survivors: {:?}", outcome.survivors);
    assert_eq!(polite.exit_status().signal(), Some(libc::SIGTERM));
    polite.assert_group_gone();
}

// B16: the survivor path. No process on a test machine survives SIGKILL (that
// takes uninterruptible sleep, which cannot be produced on demand), so this test
// uses the liveness-probe seam: the real leader is really SIGKILLed, and the
// probe keeps counting its zombie as alive. The kill must re-probe, then report
// it as a survivor instead of "gone".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b16_survivor_after_sigkill_is_reported_through_the_probe_seam() {
    let mut tree = spawn_tree("trap '' TERM; echo ready; exec sleep 600", false);
    tree.line("ready");
    let leader = tree.pid;
    let started = Instant::now();
    let outcome = kill_tree_probed(&tree.target(), GRACE, |row: &ProcInfo| {
        row.pid == leader || row.is_alive()
    })
    .await;
    let elapsed = started.elapsed();
    assert!(!outcome.gone);
    assert_eq!(outcome.survivors, vec![leader]);
    // The survivor was only declared after the full re-probe window.
    assert!(
        elapsed >= GRACE + SURVIVOR_PROBE,
        "declared after {elapsed:?}"
    );
    tree.release_reaper();
    assert_eq!(tree.exit_status().signal(), Some(libc::SIGKILL));
    tree.assert_group_gone();
}

// Kill-all: several sessions in one sweep, each with its own way of resisting,
// all end; the outcomes come back in the order of the targets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_kill_trees_ends_several_sessions_in_one_sweep() {
    let mut daemonised = spawn_tree(
        "(setsid sleep 600 & echo escapee $!); echo ready; sleep 600",
        true,
    );
    let mut stubborn = spawn_tree(
        "trap '' TERM; sleep 600 & echo child $!; echo ready; wait",
        true,
    );
    let mut polite = spawn_tree("echo ready; exec sleep 600", true);
    let escapee = daemonised.pid_line("escapee");
    daemonised.line("ready");
    let child = stubborn.pid_line("child");
    stubborn.line("ready");
    polite.line("ready");
    wait_until("the escapee to leave the group", || {
        sys::proc_info(escapee).is_some_and(|i| i.pgrp != daemonised.pid)
    });
    let targets = [daemonised.target(), stubborn.target(), polite.target()];
    let outcomes = kill_trees(&targets, GRACE).await;
    assert_eq!(outcomes.len(), 3);
    for outcome in &outcomes {
        assert!(outcome.gone, "survivors: {outcomes:?}");
    }
    // Group SIGTERM plus the escapee's own SIGTERM.
    assert_eq!(outcomes[0].signalled, 2);
    // Group SIGTERM, then group SIGKILL.
    assert_eq!(outcomes[1].signalled, 2);
    assert_eq!(outcomes[2].signalled, 1);
    assert_all_dead(&[escapee, child]);
    assert_eq!(daemonised.exit_status().signal(), Some(libc::SIGTERM));
    assert_eq!(stubborn.exit_status().signal(), Some(libc::SIGKILL));
    assert_eq!(polite.exit_status().signal(), Some(libc::SIGTERM));
    for tree in [&daemonised, &stubborn, &polite] {
        tree.assert_group_gone();
    }
}

// Without pidfds (a spent descriptor budget, or a kernel before 5.3) every signal
// re-checks the start time right before kill(2) and exits are noticed by rescans;
// the outcome is the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_kill_without_pidfds_still_ends_the_tree() {
    let mut tree = spawn_tree(
        "trap '' TERM; sleep 600 & echo child $!; \
         env -u HERD_SESSION setsid sleep 600 & echo grandchild $!; echo ready; wait",
        true,
    );
    let kids = [tree.pid_line("child"), tree.pid_line("grandchild")];
    tree.line("ready");
    wait_until("the grandchild to run setsid", || {
        sys::proc_info(kids[1]).is_some_and(|i| i.pgrp == kids[1])
    });
    let outcomes =
        kill_trees_limited(&[tree.target()], GRACE, ProcInfo::is_alive, 0, read_tag).await;
    assert!(outcomes[0].gone, "survivors: {:?}", outcomes[0].survivors);
    // SIGTERM to the group and to the grandchild (which inherited the ignored
    // SIGTERM, like everything the shell starts), then SIGKILL to both.
    assert_eq!(outcomes[0].signalled, 4);
    assert_all_dead(&kids);
    assert_eq!(tree.exit_status().signal(), Some(libc::SIGKILL));
    tree.assert_group_gone();
}

// A corrupt record naming the daemon itself (its pid and its process group) must
// not signal the daemon, its group or its children (other sessions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_never_signals_its_own_process_or_group() {
    let mut bystander = spawn_tree("echo ready; exec sleep 600", true);
    bystander.line("ready");
    let me = sys::own_pid();
    let target = KillTarget {
        pid: me,
        pgid: sys::own_pgrp(),
        start_time: sys::start_time(me),
        session_tag: String::new(),
    };
    let outcome = kill_tree(&target, Duration::ZERO).await;
    assert_eq!(outcome.signalled, 0);
    assert!(
        outcome.gone,
        "nothing of ours counted as alive: {outcome:?}"
    );
    // Our child (another "session") was not reached through us either.
    assert!(is_running(bystander.pid));
    let outcome = kill_tree(&bystander.target(), GRACE).await;
    assert!(outcome.gone);
    bystander.assert_group_gone();
}

// The spawn path's emergency stop: the whole group dies at once, SIGTERM or not.
#[test]
fn kill_group_now_sigkills_the_whole_group() {
    let mut tree = spawn_tree(
        "trap '' TERM; sleep 600 & echo child $!; echo ready; wait",
        true,
    );
    let child = tree.pid_line("child");
    tree.line("ready");
    kill_group_now(tree.pid);
    assert_eq!(tree.exit_status().signal(), Some(libc::SIGKILL));
    wait_until("the child to die", || !is_running(child));
    tree.assert_group_gone();
    // Our own group is refused, so this returns and the test goes on.
    kill_group_now(sys::own_pgrp());
}

// B16/B18: killing a session whose process already exited and was reaped sends
// nothing and reads gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_of_an_exited_session_signals_nothing() {
    let mut tree = spawn_tree("echo ready", true);
    tree.line("ready");
    assert!(tree.exit_status().success());
    tree.assert_group_gone();
    let target = KillTarget {
        pid: tree.pid,
        pgid: tree.pid,
        start_time: Some(12_345),
        session_tag: tree.tag.clone(),
    };
    let outcome = kill_tree(&target, GRACE).await;
    assert!(outcome.gone);
    assert_eq!(outcome.signalled, 0);
    assert!(!outcome.identity_mismatch);
}

/// The identity check a refused spawn's fd-free stop relies on (B18): a live
/// process with its recorded start time is the same one, a wrong start time or a
/// missing pid is another, and no record trusts whoever holds the pid.
#[test]
fn b18_identity_is_same_only_with_the_recorded_start_time() {
    let own = sys::own_pid();
    let start = sys::start_time(own).expect("this process has a start time");
    assert_eq!(sys::identity(own, Some(start)), sys::Identity::Same);
    assert_eq!(sys::identity(own, Some(start + 1)), sys::Identity::Other);
    assert_eq!(sys::identity(own, None), sys::Identity::Same);
    assert_eq!(sys::identity(i32::MAX, None), sys::Identity::Other);
    assert_eq!(sys::identity(0, None), sys::Identity::Other);
}
