//! Leftovers: processes of a session's tree that outlived its main process.
//! The session completed, its shim holds them (in the session's cgroup, or as
//! subreaper) until they are gone, and a kill of the session (`herd kill`, a kill-all,
//! shutdown) ends them through the shim: SIGTERM to the shim, which kills its tree
//! (SIGTERM, the grace, SIGKILL) and exits once the tree is empty.
//!
//! Invariant: the shim is signalled only through a handle pinned by its recorded
//! start time, and only the shim is: it owns the tree and its ending.

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use herd_persistence::{Leftover, ShimRef};
use nix::sys::signal::Signal;

use super::Inner;
use crate::answers::{KillAnswer, KillStatus};
use crate::config::KillSource;
use crate::session::Session;
use crate::sys::ProcHandle;

/// What a finished session still holds: its leftovers while its shim lives.
pub(super) fn held_leftovers(s: &Session) -> Vec<Leftover> {
    let leftovers = {
        let st = s.state();
        if st.finished.is_none() || st.leftovers.is_empty() {
            return Vec::new();
        }
        st.leftovers.clone()
    };
    match &s.shim {
        Some(shim) if shim_alive(shim) => leftovers,
        _ => Vec::new(),
    }
}

/// Kills what is left in the cgroup of a session whose shim died and removes the
/// cgroup; returns the pids that survived.
pub(super) async fn reclaim_cgroup(dir: &herd_persistence::ShimDir) -> Vec<i32> {
    let Some(cgroup) = dir
        .read_info()
        .ok()
        .flatten()
        .and_then(|info| info.cgroup)
        .and_then(|path| crate::sys::cgroup::SessionCgroup::existing(&path))
    else {
        return Vec::new();
    };
    if cgroup.populated() == Some(true) {
        if let Err(error) = cgroup.kill() {
            tracing::warn!(%error, path = %cgroup.path().display(), "a dead shim's cgroup could not be killed");
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        while cgroup.populated() == Some(true) && tokio::time::Instant::now() < deadline {
            tick.tick().await;
        }
    }
    if let Err(error) = cgroup.remove() {
        tracing::warn!(%error, path = %cgroup.path().display(), "a dead shim's cgroup was not removed");
        return cgroup.pids();
    }
    Vec::new()
}

/// Tells the shim of a finished session that still holds leftovers to kill them,
/// without waiting (`herd clean` forgets the session at once).
pub(super) fn end_leftovers(s: &Session) {
    if held_leftovers(s).is_empty() {
        return;
    }
    let Some(shim) = &s.shim else { return };
    let Some(start) = shim.start_time.or_else(|| crate::sys::start_time(shim.pid)) else {
        return;
    };
    if let Ok(handle) = ProcHandle::open(shim.pid, start, true)
        && let Err(errno) = handle.signal(Signal::SIGTERM)
    {
        tracing::debug!(session_id = %s.id, %errno, "the shim holding leftovers is gone");
    }
}

impl Inner {
    /// CPU and memory of a supervised session's tree from its cgroup, while it runs
    /// or holds leftovers; `None` without a cgroup. A sample at most `max_age` old
    /// is reused (zero reads afresh); the cgroup's path is read from the shim's info
    /// record once. Reads files: never call it under the table's lock.
    pub(super) fn tree_usage(
        &self,
        s: &Session,
        containment: crate::answers::Containment,
        holds: bool,
        max_age: Duration,
    ) -> Option<crate::answers::TreeUsage> {
        if containment != crate::answers::Containment::Cgroup || s.shim.is_none() {
            return None;
        }
        if s.status() != crate::answers::SessionStatus::Running && !holds {
            return None;
        }
        s.usage.sampled(max_age, || {
            let v2 = s.usage.cgroup(|| {
                let dir = herd_persistence::ShimDir::new(&self.home, s.id.as_str()).ok()?;
                dir.read_info().ok().flatten().and_then(|info| info.cgroup)
            });
            crate::sys::usage::tree_usage(v2, &self.v1_base, s.id.as_str())
        })
    }
}

fn shim_alive(shim: &ShimRef) -> bool {
    crate::sys::proc_info(shim.pid)
        .is_some_and(|row| row.is_alive() && shim.start_time.is_none_or(|t| t == row.start_time))
}

impl Inner {
    /// Ends the leftovers a finished session holds; `None` when it holds none.
    pub(super) async fn kill_leftovers(
        &self,
        s: &Arc<Session>,
        source: KillSource,
    ) -> Option<KillAnswer> {
        let leftovers = held_leftovers(s);
        let shim = s.shim.as_ref()?;
        if leftovers.is_empty() {
            return None;
        }
        let start = shim
            .start_time
            .or_else(|| crate::sys::start_time(shim.pid))?;
        let Ok(mut handle) = ProcHandle::open(shim.pid, start, true) else {
            return None;
        };
        handle.watch_exit();
        if let Err(errno) = handle.signal(Signal::SIGTERM) {
            tracing::debug!(session_id = %s.id, %errno, "the shim holding leftovers is gone");
            return None;
        }
        tracing::info!(session_id = %s.id, n = leftovers.len(), source = source.as_str(), "killing a finished session's leftovers");
        // The shim's kill: the grace, SIGKILL, then up to a second for the tree to be
        // empty; a little more for the shim's own exit.
        let limit = self.config.kill_grace + Duration::from_secs(3);
        let exited = if handle.is_watched() {
            tokio::time::timeout(limit, poll_fn(|cx| handle.poll_exit(cx)))
                .await
                .is_ok()
        } else {
            let shim = *shim;
            let deadline = tokio::time::Instant::now() + limit;
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            loop {
                tick.tick().await;
                if !shim_alive(&shim) {
                    break true;
                }
                if tokio::time::Instant::now() >= deadline {
                    break false;
                }
            }
        };
        let (status, survivors, error) = if exited {
            (KillStatus::Killed, Vec::new(), None)
        } else {
            let pids: Vec<i32> = leftovers.iter().map(|l| l.pid).collect();
            (
                KillStatus::KillIncomplete,
                pids,
                Some(format!(
                    "kill incomplete: the leftovers of {} were not gone after {} s",
                    s.id,
                    limit.as_secs()
                )),
            )
        };
        Some(self.kill_answer(s, source, status, survivors, error))
    }
}
