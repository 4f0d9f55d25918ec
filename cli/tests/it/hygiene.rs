//! A clean daemon: nothing of the client that autostarted the daemon
//! (extra descriptors, ignored signals) reaches the daemon, its launcher, the shims or
//! the jobs.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::time::Duration;

use crate::support::{Env, alive, wait_until};

/// The descriptors `pid` holds open.
fn open_fds(pid: i32) -> Vec<i32> {
    let mut fds: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the process's descriptors are listable")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    fds.sort_unstable();
    fds
}

/// A field of `/proc/PID/status` (`SigIgn`, `SigBlk`) as a bit mask.
fn signal_mask(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    u64::from_str_radix(line.trim(), 16).expect("a hex mask")
}

/// Whether the pipe's read end reports end-of-file (every write end closed).
fn at_eof(read: &OwnedFd) -> bool {
    let mut buf = [0u8; 16];
    matches!(nix::unistd::read(read, &mut buf), Ok(0))
}

/// The bit of `signal` in a `/proc` signal mask.
fn bit(signal: i32) -> u64 {
    1 << (signal - 1)
}

#[test]
fn b36_an_autostarting_clients_extra_descriptor_and_ignored_signals_reach_no_daemon_and_no_job() {
    let env = Env::new();
    // fd 7 of the first client is a pipe's write end; the test keeps the read end
    // (non-blocking, so "not at end-of-file yet" is an EAGAIN, not a hang).
    let (read, write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
            .expect("a pipe");
    let write_fd = write.as_raw_fd();
    let mut cmd = env.cmd(&["run", "--json", "--", "sleep 60"]);
    // SAFETY: dup2 and signal are async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 clears close-on-exec on fd 7: the client inherits it, as a
            // shell's `7>&1` would give it.
            if libc::dup2(write_fd, 7) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = cmd.output().expect("herd runs");
    drop(write);
    assert!(
        out.status.success(),
        "herd run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let job = i32::try_from(info["pid"].as_i64().expect("pid")).expect("a pid fits i32");
    // The client is gone; the daemon, its launcher, the shim and the job live on, and
    // none of them holds fd 7: the pipe is at end-of-file.
    wait_until(Duration::from_secs(10), || at_eof(&read))
        .expect("the pipe reached end-of-file: nothing herd started kept the client's fd 7");
    let daemon = env.daemon_pid().expect("the daemon wrote its pid file");
    assert!(alive(daemon) && alive(job), "the daemon and the job run on");
    // Read once the job's exec is done: between fork and exec the child still holds
    // its parent's close-on-exec descriptors (seen once on a loaded machine), which the
    // exec closes; a descriptor the job really inherited stays and fails the wait.
    let stdio_only = wait_until(Duration::from_secs(10), || open_fds(job) == vec![0, 1, 2]);
    assert!(
        stdio_only.is_ok(),
        "the job holds only its stdio, not {:?}",
        open_fds(job)
    );
    // Ignored signals of the client are not inherited either: neither the daemon
    // nor the job ignores SIGHUP or SIGINT, and the job blocks nothing (its shim
    // blocks SIGCHLD). (glibc's posix_spawn itself leaves its two reserved real-time
    // signals, 32 and 33, ignored in what it starts; those are not the client's.)
    let client_ignored = bit(libc::SIGHUP) | bit(libc::SIGINT);
    for (who, pid) in [("daemon", daemon), ("job", job)] {
        let ignored = signal_mask(pid, "SigIgn");
        assert_eq!(
            ignored & client_ignored,
            0,
            "the {who} still ignores the client's SIGHUP or SIGINT (SigIgn {ignored:#x})"
        );
    }
    assert_eq!(signal_mask(job, "SigBlk"), 0, "the job blocks no signal");
    // And the pipe stays at end-of-file from a plain command later.
    env.ok(&["ps"]);
    assert!(at_eof(&read));
}
