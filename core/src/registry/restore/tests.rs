//! Unit tests of restore's classification and tail seeding, against real processes
//! and real files.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::*;

#[expect(clippy::disallowed_methods, reason = "test drives a raw child")]
fn raw(program: &str, args: &[&str]) -> Child {
    Command::new(program)
        .args(args)
        .spawn()
        .expect("the program starts")
}

#[test]
fn a_live_pid_is_running_only_with_its_own_start_time() {
    let mut child = raw("sleep", &["30"]);
    let pid = i32::try_from(child.id()).expect("pids fit");
    let start = sys::start_time(pid).expect("a live child has a start time");
    assert_eq!(fate(pid, Some(start)), Fate::Running { start_time: start });
    assert_eq!(fate(pid, None), Fate::Running { start_time: start });
    assert_eq!(fate(pid, Some(start + 1)), Fate::Reused);
    child.kill().expect("the child is ours");
    child.wait().expect("the child is reaped");
    assert_eq!(fate(pid, Some(start)), Fate::Gone);
}

#[test]
fn init_and_this_process_are_never_adoptable() {
    assert_eq!(fate(1, None), Fate::Reused);
    assert_eq!(fate(sys::own_pid(), None), Fate::Reused);
}

#[test]
fn a_zombie_is_gone() {
    let mut child = raw("true", &[]);
    let pid = i32::try_from(child.id()).expect("pids fit");
    let deadline = Instant::now() + Duration::from_secs(10);
    while sys::proc_info(pid).is_some_and(|p| p.is_alive()) {
        assert!(Instant::now() < deadline, "true did not exit within 10 s");
        std::thread::yield_now();
    }
    assert_eq!(fate(pid, None), Fate::Gone);
    child.wait().expect("the child is reaped");
}

#[test]
fn a_seeded_tail_longer_than_its_bound_reads_as_cut() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("s.log");
    std::fs::write(&path, b"0123456789").expect("write the log");
    let mut tail = Tail::new(4);
    seed_tail(&mut tail, &path, 4);
    assert_eq!(tail.view(), (&b"6789"[..], true));
    let mut whole = Tail::new(64);
    seed_tail(&mut whole, &path, 64);
    assert_eq!(whole.view(), (&b"0123456789"[..], false));
    let mut missing = Tail::new(4);
    seed_tail(&mut missing, &dir.path().join("none.log"), 4);
    assert_eq!(missing.view(), (&b""[..], false));
}
