//! The end of a session: the held bytes flushed, the exit record written before the log
//! closes, and an attached daemon told.
//!
//! Invariant: the exit record is on disk before the log closes and before the socket is
//! removed, so a daemon that comes later reads the record instead of waiting.

use std::io::Write;
use std::time::{Duration, Instant, SystemTime};

use herd_persistence::{ExitRecord, SHIM_RECORD_VERSION, ShimDir};
use nix::sys::wait::WaitStatus;

use super::{EXIT_SEND_TIMEOUT, Job, Shim};
use crate::shim::wire::{self, FromShim};

impl Shim {
    /// Ends the session: flushes held bytes, writes the exit record, closes the log,
    /// tells an attached daemon. Returns the process's exit code.
    pub(super) fn conclude(&mut self, dir: &ShimDir) -> i32 {
        let mut rest = Vec::new();
        if let Job::Pty { scanner, .. } = &mut self.job {
            let held = scanner.flush();
            rest.extend_from_slice(&self.noise.feed(&held));
        }
        rest.extend(self.noise.flush());
        self.ingest(&rest);
        let descendants_alive = if self.eof {
            Vec::new()
        } else {
            crate::reader::group_members(self.pgid)
        };
        let (code, signal) = match self.exit {
            Some(WaitStatus::Exited(_, code)) => (Some(code), None),
            Some(WaitStatus::Signaled(_, sig, _)) => (None, Some(sig as i32)),
            _ => (None, None),
        };
        let record = ExitRecord {
            version: SHIM_RECORD_VERSION,
            code,
            signal,
            finished_at_ms: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            total_ingested: self.progress.total_ingested,
            bytes_not_kept: self.progress.bytes_not_kept,
            descendants_alive,
            killed_by: self.killed_by.map(|source| source.as_str().to_owned()),
            // What of the tree outlived the main process (or survived a kill): the
            // shim holds it from here on (see `linger`).
            leftovers: self
                .hold
                .leftovers(&self.session_id, self.start_time.unwrap_or(0)),
        };
        let written = dir.write_exit(&record);
        // The record is on disk before the log closes (the daemon trusts the record's
        // byte counts once it sees it).
        self.log = None;
        if let Err(error) = &written {
            tracing::error!(%error, "exit record not written");
        }
        if !self.greeted {
            self.await_first_attach();
        }
        // Nobody new can connect from here on: a daemon that comes later reads the
        // exit record instead of waiting on a socket that is gone. A shim whose
        // daemon held the connection its launch made never bound one.
        if self.listener.take().is_some() {
            let _ = std::fs::remove_file(dir.socket_path());
        }
        let progress = self.progress;
        let mark = self.marks.before(progress.log_bytes);
        let kept = written.is_err().then(|| record.clone());
        if let Some(mut conn) = self.conn.take() {
            wire::encode(
                conn.framing,
                &FromShim::Exit {
                    record,
                    progress,
                    mark,
                },
                b"",
                &mut conn.out,
            );
            let _ = conn.stream.set_nonblocking(false);
            let _ = conn.stream.set_write_timeout(Some(EXIT_SEND_TIMEOUT));
            let _ = conn.stream.write_all(&conn.out);
        }
        match kept {
            None => 0,
            Some(record) => i32::from(!write_exit_when_possible(dir, &record)),
        }
    }
}

/// How long a shim whose exit record could not be written (a full disk) keeps
/// trying before it gives up.
const EXIT_RETRY_FOR: Duration = Duration::from_secs(24 * 3600);

/// The longest pause between two tries.
const EXIT_RETRY_MAX_PAUSE: Duration = Duration::from_secs(5);

/// Writes the exit record again and again: the job's real ending must
/// not become `lost` because the disk was full when it ended. The shim lives on
/// meanwhile, so a daemon that restarts finds it alive and waits for the record
/// rather than declaring it dead. Returns whether the record was written.
fn write_exit_when_possible(dir: &ShimDir, record: &ExitRecord) -> bool {
    let deadline = Instant::now() + EXIT_RETRY_FOR;
    let mut pause = Duration::from_millis(100);
    while Instant::now() < deadline {
        pause_before_retry(pause);
        pause = (pause * 2).min(EXIT_RETRY_MAX_PAUSE);
        if !dir.path().is_dir() {
            // The home was removed (or unmounted): no daemon can ever read the record,
            // so the supervisor stops waiting instead of lingering for a day.
            tracing::warn!("exit record not written: the supervisor's directory is gone");
            return false;
        }
        match dir.write_exit(record) {
            Ok(()) => {
                tracing::info!("exit record written after a retry");
                return true;
            }
            Err(error) => tracing::debug!(%error, "exit record still not written"),
        }
    }
    tracing::error!("exit record not written; giving up");
    false
}

#[expect(
    clippy::disallowed_methods,
    reason = "a back-off between writes of a record, not a synchronisation"
)]
fn pause_before_retry(pause: Duration) {
    std::thread::sleep(pause);
}
