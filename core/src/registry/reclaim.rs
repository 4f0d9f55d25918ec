//! What restore and the shim follower share for sessions that are not this
//! process's children: waiting for a pid to go (a pidfd, else polling `/proc` every
//! [`EXIT_POLL`]), and tails seeded from a session's log file.
//!
//! Owns nothing and takes no lock but a session's tail.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

use crate::output::Tail;
use crate::session::Session;
use crate::shim::wire::Progress;
use crate::sys;

/// How often the exit of a detached session is checked where no pidfd is available.
pub(super) const EXIT_POLL: Duration = Duration::from_millis(500);

/// Waits until `pid` with `start_time` is gone (or a zombie): through a pidfd, else
/// by polling `/proc` every [`EXIT_POLL`]. Returns at once when it is gone already.
pub(super) async fn wait_gone(pid: i32, start_time: u64) {
    if let Ok(mut handle) = sys::ProcHandle::open(pid, start_time, true) {
        if handle.watch_exit() {
            std::future::poll_fn(|cx| handle.poll_exit(cx)).await;
        } else {
            poll_exit(pid, start_time).await;
        }
    }
}

/// Polls `/proc` until `pid` with `start_time` is gone or a zombie.
async fn poll_exit(pid: i32, start_time: u64) {
    let mut tick = tokio::time::interval(EXIT_POLL);
    loop {
        tick.tick().await;
        match sys::proc_info(pid) {
            Some(p) if p.start_time == start_time && p.is_alive() => {}
            _ => return,
        }
    }
}

/// A tail that ends where `progress` says the log ends: the last bytes before that
/// point, with every earlier byte and those past the log's cap counted.
pub(super) fn tail_at(path: &Path, bound: usize, progress: &Progress) -> Tail {
    let mut tail = Tail::new(bound);
    let end = progress.log_bytes;
    let want = (bound as u64).saturating_add(1).min(end);
    let mut bytes = Vec::new();
    if let Ok(mut file) = File::open(path)
        && file.seek(SeekFrom::Start(end - want)).is_ok()
    {
        let _ = file.take(want).read_to_end(&mut bytes);
    }
    tail.skip(end - bytes.len() as u64);
    tail.push(&bytes, 0);
    tail.count_not_kept(progress.bytes_not_kept);
    tail
}

/// Replaces a session's tail with the end of its log as `progress` says it is.
pub(super) fn reseed_tail(s: &Session, bound: usize, progress: &Progress) {
    *s.tail() = tail_at(&s.log_path, bound, progress);
}

/// Seeds a tail with the end of a log file; one byte more than the bound is read, so a
/// log longer than the tail reads as cut (never a silent truncation).
pub(super) fn seed_tail(tail: &mut Tail, path: &Path, bound: usize) {
    let Ok(mut file) = File::open(path) else {
        return;
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let want = (bound as u64).saturating_add(1).min(len);
    if file.seek(SeekFrom::Start(len - want)).is_err() {
        return;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
    if file.take(want).read_to_end(&mut bytes).is_ok() && !bytes.is_empty() {
        tail.push(&bytes, 0);
    }
}
