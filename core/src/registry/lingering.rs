//! Leftovers across a daemon restart: a session that finished while its
//! shim still holds leftovers is no longer in the checkpoint (it finished) and only
//! its receipt knows it. Its shim directory does too: `exit.json` is written and the
//! shim, pinned by the pid and start time its `info.json` records, still lives.
//!
//! At restore such a session is put back in the table as a *finished* session with
//! its shim and its receipt's leftovers, so every path that reaches a live
//! registry's held leftovers reaches these too: `herd kill ID`, kill-all and
//! shutdown (SIGTERM to the shim, which kills its tree), `herd clean` (the same,
//! without waiting), and `ps`/`poll`/`top` (`exited 0, 2 left`). The time limit is
//! the shim's own and runs on without any daemon. A task watches the shim and
//! removes its directory once it has exited.
//!
//! Invariant: nothing is signalled here; the shim is reached only later, through a
//! handle pinned by its recorded start time.

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use herd_persistence::{ResultReceipt, ShimDir, ShimInfo, ShimRef};

use super::Inner;
use super::durable::{from_unix_seconds, reason_from_name};
use super::rebuilt::Rebuilt;
use super::reclaim::seed_tail;
use crate::answers::Containment;
use crate::config::KillSource;
use crate::id::SessionId;
use crate::output::Tail;
use crate::session::{Finished, Session};
use crate::sys::ProcHandle;

/// How often a shim without a pidfd is checked for its exit.
const GONE_POLL: Duration = Duration::from_millis(200);

/// The shim of `info`, when it still lives as recorded.
pub(super) fn live_shim(info: &ShimInfo) -> Option<ShimRef> {
    let row = crate::sys::proc_info(info.shim_pid)?;
    let same = info.shim_start_time.is_none_or(|t| t == row.start_time);
    (row.is_alive() && same).then_some(ShimRef {
        pid: info.shim_pid,
        start_time: Some(row.start_time),
        protocol: info.protocol,
    })
}

impl Inner {
    /// Puts a finished session whose shim still holds leftovers back in the table;
    /// false when `dir` is not such a session's (its shim is gone, it holds nothing,
    /// or no receipt knows it), and the caller removes the directory.
    pub(super) fn hold_lingering(self: &Arc<Self>, id: &SessionId, dir: &ShimDir) -> bool {
        let Ok(Some(record)) = dir.read_exit() else {
            return false;
        };
        let Ok(Some(info)) = dir.read_info() else {
            return false;
        };
        let Some(shim) = live_shim(&info) else {
            return false;
        };
        let Ok(Some(receipt)) = self.durable.receipts().load(id.as_str()) else {
            return false;
        };
        if receipt.leftovers.is_empty() {
            return false;
        }
        let s = self.lingering_session(id.clone(), &receipt, &info, shim, record.signal);
        if !self.table.add_finished_if_new(&s) {
            return true;
        }
        self.changed();
        tracing::info!(session_id = %id, shim_pid = shim.pid, n = receipt.leftovers.len(), "a finished session's shim still holds leftovers; held again");
        let inner = Arc::clone(self);
        self.shims
            .remove_dir_when_gone(s.id.clone(), shim, dir.clone(), move || inner.changed());
        true
    }

    /// A finished session record for `receipt`, held by `shim`.
    fn lingering_session(
        &self,
        id: SessionId,
        r: &ResultReceipt,
        info: &ShimInfo,
        shim: ShimRef,
        signal: Option<i32>,
    ) -> Arc<Session> {
        let log_path = self.home.session_log_path(id.as_str());
        let mut tail = Tail::new(self.config.buffer_bytes);
        seed_tail(&mut tail, &log_path, self.config.buffer_bytes);
        // Output the log did not keep (its cap, a full disk) is still said to be cut.
        tail.count_not_kept(r.bytes_not_kept);
        let exit =
            (r.exit_code.is_some() || signal.is_some()).then_some(crate::session::ExitInfo {
                code: r.exit_code,
                signal,
            });
        Rebuilt {
            id,
            command: r.command.clone(),
            cwd: r.cwd.clone().unwrap_or_default(),
            pid: info.pid,
            pgid: info.pgid,
            start_time: info.start_time,
            mode: info.mode,
            started_at: r.started_at,
            task_id: r.task_id.clone(),
            owner_task_id: r.owner_task_id.clone(),
            session_key: r.session_key.clone(),
            notify: r.notify,
            log_path,
            tail,
            persist_on_release: false,
            scope: None,
            shim: Some(shim),
            completion_chars: self.config.completion_output_chars,
            name: None,
            time_limit: None,
            origin: crate::session::Origin::default(),
            finished: Some(Finished {
                at: from_unix_seconds(r.finished_at),
                reason: reason_from_name(&r.reason),
                source: KillSource::from_name(&r.source),
                exit,
            }),
            kill_source: None,
            containment: if info.cgroup.is_some() {
                Containment::Cgroup
            } else {
                Containment::Subreaper
            },
            leftovers: r.leftovers.clone(),
            ready_at: r.ready_at,
            runs: r.runs.unwrap_or(0),
        }
        .into_session()
    }
}

/// Returns once `shim` has exited (or can no longer be pinned).
pub(super) async fn wait_shim_gone(shim: ShimRef) {
    let Some(start) = shim.start_time.or_else(|| crate::sys::start_time(shim.pid)) else {
        return;
    };
    let Ok(mut handle) = ProcHandle::open(shim.pid, start, true) else {
        return;
    };
    if handle.watch_exit() {
        poll_fn(|cx| handle.poll_exit(cx)).await;
        return;
    }
    let mut tick = tokio::time::interval(GONE_POLL);
    loop {
        tick.tick().await;
        let alive = crate::sys::proc_info(shim.pid)
            .is_some_and(|row| row.is_alive() && row.start_time == start);
        if !alive {
            return;
        }
    }
}
