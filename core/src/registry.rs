//! The registry: the table of sessions and every operation on them, in rooms.
//!
//! [`Registry`] is the public handle; `Inner` is only the composition of the rooms
//! below, its fields private to this module and its rooms. Each room owns its state
//! behind private fields and is entered through `Inner` methods:
//!
//! - `table`, `table_room`: the session table (running, finished, owners' queues)
//!   behind the table lock, which only the table room (`table_room::Table`) takes:
//!   one-step named operations, and named critical sections whose closures see
//!   the owners' queues only; lookup, fresh ids, pruning;
//! - `spawning`: the spawn path, called once per [`Registry::spawn`];
//! - `query`, `stdin`, `killing`: the query API, input, kills and their conclusion;
//! - `finish`: the one choke point, which moves a session from running to
//!   finished, stamps it, releases its handles and publishes its completion inside a
//!   single critical section of the table lock, so a waiter always sees the session
//!   either running or with its completion published;
//! - `view`: the one builder of answers, live or from a receipt; every route by which
//!   output leaves passes `Inner::show_subject`, the hooks room with the route and
//!   the session owner's identity, and every `command` field `Hooks::show_command`;
//! - `hooks_room` (`hooks_room::Hooks`): the output pipeline (hooks, then the
//!   redactor) behind a private field, with the config as given; no other room
//!   reads the pipeline: they read `settings::Settings`, the config without it.
//!   Hooks run with no lock held, and on the completion route off the runtime;
//! - `durable` (`checkpoint`, `ledger`, `receipts`), `restore`, `reclaim`,
//!   `supervised`: what is kept on disk and what comes back from it; `shims`
//!   (`shims::Shims`): the launcher and shim directories, starting a job under a
//!   shim and retiring what a failed start left;
//! - `notify`, `agents`: notifications and parent and child agents;
//!   `lifecycle`, `delivery`, `external`, `logs`: time limits and restart,
//!   drains, far hosts' events, log chunks and followers; `retention`: `clean` and
//!   the timer that evicts expired results, with `retention_policy::Retention` owning the
//!   decisions (no lock); `readiness`: a session's durable ready
//!   mark.
//!
//! Lock order: every mutex's rank is in its type and checked in debug builds by
//! the `lock_order` module (table lock → agents → session state → notifier →
//! session tail → the rooms' leaf locks). Nothing slow (fsync, plugins, `/proc` scans, file IO) runs under
//! the table lock.

use std::sync::Arc;

use herd_persistence::Home;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::answers::SpawnInfo;
use crate::config::{KillSource, RegistryConfig, SpawnRequest};
use crate::error::{Error, SpawnError};
use crate::event::Event;
use crate::session::Session;

mod agents;
mod delivery;
mod durable;
mod external;
mod finish;
mod held;
mod hooks_room;
mod in_place;
mod killing;
mod lifecycle;
mod lingering;
mod notify;
mod query;
mod queue;
mod readiness;
mod recommit;
mod restarts;
mod retention;
mod retention_policy;
mod settings;
mod spawning;
mod stdin;
mod table;
mod table_room;
mod view;
pub use external::External;
mod logs;
mod readout;
pub use delivery::{Acknowledgement, Drained};
pub use logs::{FollowRead, LogFollower};
pub use readout::{LogReadout, ReadoutBatch, ReadoutPiece};
pub use stdin::TerminalGuard;
mod rebuilt;
mod reclaim;
mod restore;
mod shims;
mod supervised;

use agents::Agents;
pub use agents::{
    AgentIdentity, ChildTeardown, HandedOff, HandoffAnswer, HandoffError, MAX_HANDOFFS_PER_CHILD,
    OrphanKill, UnreadCompletion,
};
use notify::Notifier;
#[cfg(feature = "bench-support")]
#[doc(hidden)]
pub use notify::bench_support as notify_bench_support;
pub use queue::{
    DEFAULT_GROUP, GroupError, GroupRow, MAX_DEPENDENCIES, MAX_GROUPS, PARALLEL_RANGE,
    QueueLatency, QueueRequest, check_group_name,
};
pub use readiness::Readiness;
pub use restore::RestoreReport;
pub(crate) use table::Tables;
use view::LOG_PAGE_MAX_BYTES;

/// Characters in a poll preview.
const POLL_PREVIEW_CHARS: usize = 1_000;
/// Characters in a list row preview.
const LIST_PREVIEW_CHARS: usize = 200;
/// Characters of the command in a list row.
const LIST_COMMAND_CHARS: usize = 200;
/// Default lines of a log page.
const LOG_DEFAULT_LINES: usize = 200;
/// Capacity of the broadcast channel behind `subscribe`.
const BROADCAST_CAPACITY: usize = 4096;

/// The registry of background sessions. Cheap to clone; every clone is the same
/// registry.
#[derive(Debug, Clone)]
pub struct Registry {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    home: Home,
    /// The settings the rooms read: the config without its pipeline.
    config: settings::Settings,
    /// The output pipeline (hooks, then the redactor) and the config as given.
    hooks: hooks_room::Hooks,
    /// The session table behind the table lock, which only this room takes.
    table: table_room::Table,
    /// The retention rules (what the table's cache keeps, when the timer ticks).
    retention: retention_policy::Retention,
    /// The broadcast of events, the notification policy and the ids acknowledged
    /// lately.
    outbox: delivery::Outbox,
    /// Bumped after every finish; waiters for pending completions watch it.
    finishes: watch::Sender<u64>,
    /// Bumped whenever a session starts, finishes, changes owner or is forgotten;
    /// `changes` hands out receivers (a live view redraws on it, `herd top`).
    changes: watch::Sender<u64>,
    runtime: tokio::runtime::Handle,
    /// Watch breaker and heartbeat schedule, served by one timer task.
    notifier: Notifier,
    /// Parent and child agents and their handoffs.
    agents: Agents,
    /// Checkpoint, ledger and receipts.
    durable: durable::Durable,
    /// Fires when the host detaches: followers of supervised sessions stop, their
    /// shims and jobs run on.
    detach: CancellationToken,
    /// The supervised room: the launcher that forks shims, their directories.
    shims: shims::Shims,
    /// Set when shutdown or detach begins: spawns are refused from then on.
    closing: std::sync::atomic::AtomicBool,
    /// Completions whose ledger commit failed, committed again later.
    recommits: recommit::Recommits,
    /// Groups, queued jobs and their dependencies.
    queue: queue::Scheduler,
    /// Where usage reads find the v1 memory cgroups, looked up now and then.
    v1_base: crate::sys::usage::V1Base,
    /// Bounds the finish choke points on the blocking pool at once.
    finishing: finish::FinishGate,
    /// What the last log read-outs of finished sessions showed.
    readouts: Arc<readout::Memos>,
}

impl Registry {
    /// A registry whose every path derives from `home`.
    ///
    /// Must be called inside a tokio runtime; creates nothing on disk until the first
    /// spawn, and nothing outside `home`. It does not read the checkpoint: a host that
    /// restarts calls [`Registry::restore`] right after `new`.
    ///
    /// # Errors
    /// [`Error::NoRuntime`] outside a tokio runtime; [`Error::HomeMissing`] when the
    /// home's root is not an existing directory (it is never created here).
    pub fn new(home: Home, config: RegistryConfig) -> Result<Registry, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        if !std::fs::metadata(home.root()).is_ok_and(|m| m.is_dir()) {
            return Err(Error::HomeMissing {
                path: home.root().to_owned(),
            });
        }
        config
            .validate()
            .map_err(|message| Error::InvalidArgument { message })?;
        let notifier = Notifier::new(Arc::clone(&config.clock));
        let (finishes, _) = watch::channel(0);
        let (changes, _) = watch::channel(0);
        let queue_cap = config.queue_cap;
        let registry = Registry {
            inner: Arc::new(Inner {
                outbox: delivery::Outbox::new(config.notifications, BROADCAST_CAPACITY),
                durable: durable::Durable::new(&home, &config),
                queue: queue::Scheduler::new(&home, &config),
                retention: retention_policy::Retention::new(&config),
                shims: shims::Shims::new(&home, &config, runtime.clone()),
                v1_base: crate::sys::usage::V1Base::default(),
                finishing: finish::FinishGate::new(finish::FINISHES_AT_ONCE),
                readouts: Arc::default(),
                home,
                config: settings::Settings::of(&config),
                hooks: hooks_room::Hooks::new(config),
                table: table_room::Table::new(queue_cap),
                finishes,
                changes,
                runtime,
                notifier,
                agents: Agents::default(),
                detach: CancellationToken::new(),
                closing: std::sync::atomic::AtomicBool::new(false),
                recommits: recommit::Recommits::default(),
            }),
        };
        registry.inner.arm_retention();
        registry.inner.arm_queue();
        Ok(registry)
    }

    /// The home this registry works under.
    pub fn home(&self) -> &Home {
        &self.inner.home
    }

    /// Starts a session.
    ///
    /// The guard (when configured) judges the command first; a refused command starts
    /// nothing. The child gets its own process group, the sanitised environment and
    /// the home's scratch dir as TMPDIR. A PTY that cannot be opened falls back to a
    /// pipe, said in `pty_note`; the command never runs twice.
    ///
    /// The answer comes once a checkpoint write covering the new session finished
    /// (concurrent spawns share writes), so a session whose spawn was answered is
    /// restored after a crash of the host. A failed checkpoint write is logged and
    /// does not fail the spawn.
    ///
    /// # Errors
    /// [`SpawnError::Guarded`], [`SpawnError::InvalidRequest`] for an empty command,
    /// [`SpawnError::Prepare`] when the home's directories or the log cannot be
    /// created, [`SpawnError::Spawn`] when the OS refuses (nothing is left running),
    /// [`SpawnError::Dispatch`] when a `persist_on_release` session needs a restart-safe
    /// scope the host cannot give and the config requires one.
    pub async fn spawn(&self, req: SpawnRequest) -> Result<SpawnInfo, SpawnError> {
        let info = self.inner.spawn_as(req, None).await?;
        self.inner.spawned(&info).await;
        Ok(info)
    }

    /// Starts a session, or queues it when `queue` names a group with a limit or
    /// dependencies: the answer then has `queued` set and pid 0, and the
    /// session is `queued` until its group has room and its dependencies allow it.
    /// The guard and the request's checks run now, so a refused command never waits;
    /// dependencies resolve to ids now (an unknown or expired one is refused).
    ///
    /// # Errors
    /// As [`Registry::spawn`]; [`SpawnError::InvalidRequest`] for an unknown group
    /// or dependency, or more than [`MAX_DEPENDENCIES`].
    pub async fn spawn_queued(
        &self,
        req: SpawnRequest,
        queue: QueueRequest,
    ) -> Result<SpawnInfo, SpawnError> {
        if queue.queues() {
            return self.inner.submit(req, queue).await;
        }
        self.spawn(req).await
    }

    /// The queue's scheduling latency so far: from a slot freeing (a job of a
    /// group finishing) to the next queued job's start beginning.
    pub fn queue_latency(&self) -> QueueLatency {
        let (n, p50, p99) = self.inner.queue.latency();
        let us = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        QueueLatency {
            n,
            p50_us: us(p50),
            p99_us: us(p99),
        }
    }

    /// How many sessions run and how many finished ones are kept, cheaply (no
    /// rows, no output through the pipeline).
    pub fn counts(&self) -> (usize, usize) {
        self.inner.table.counts()
    }

    /// Every event as it is published, whatever the notification policy.
    ///
    /// The first `subscribe` or `drain` of a registry re-queues the completions earlier
    /// processes committed to the home's ledger but never delivered; a receiver
    /// taken by that first call sees them.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        let rx = self.inner.outbox.subscribe();
        self.inner.replay_once();
        rx
    }

    /// A counter bumped whenever a session starts, finishes, changes owner or is
    /// forgotten: a view of the sessions waits on it (`changed()`) and lists again,
    /// instead of polling. It counts changes, it does not say which; bumps that
    /// come together are seen as one.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// Takes the events queued for `owner`; each is delivered once. Drained
    /// completions are marked delivered in the ledger, so they are not replayed after
    /// a restart.
    pub fn drain(&self, owner: &str) -> Vec<Event> {
        self.take(owner).acknowledge()
    }

    /// Lets go of every session without stopping it: supervised sessions (those
    /// under a shim) keep running and the next registry on this home re-attaches them
    /// in [`Registry::restore`]; in-process sessions cannot outlive this process and
    /// are killed as [`KillSource::HostShutdown`]. The checkpoint is written durably
    /// before this returns. The registry answers nothing useful afterwards: call it
    /// last.
    pub async fn detach(&self) {
        self.inner
            .closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let in_process: Vec<Arc<Session>> = self
            .inner
            .table
            .running()
            .into_iter()
            .filter(|s| s.shim.is_none())
            .collect();
        let n_killed = self
            .inner
            .kill_sessions(&in_process, KillSource::HostShutdown)
            .await
            .len();
        self.inner.detach.cancel();
        self.commit_pending_completions().await;
        if let Err(error) = self.inner.sync_durable().await {
            tracing::warn!(%error, "checkpoint not written at detach");
        }
        let n_detached = self.inner.table.counts().0;
        tracing::info!(
            n_detached,
            n_killed,
            "registry detached; supervised sessions run on"
        );
    }

    /// Kills everything, as [`KillSource::HostShutdown`] (persistent sessions too),
    /// then writes the checkpoint (empty unless a kill was incomplete, so a later
    /// restore has nothing to re-adopt) and waits for pending receipts.
    pub async fn shutdown(&self) {
        // No spawn starts from here on; one already past that check when the
        // first sweep took its snapshot is caught by the next.
        self.inner
            .closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let mut n = self.kill_all("", &[], KillSource::HostShutdown).await;
        for _ in 0..3 {
            if self.inner.table.counts().0 == 0 {
                break;
            }
            let more = self.kill_all("", &[], KillSource::HostShutdown).await;
            if more == 0 {
                break;
            }
            n += more;
        }
        self.commit_pending_completions().await;
        if let Err(error) = self.inner.sync_durable().await {
            tracing::warn!(%error, "checkpoint not written at shutdown");
        }
        tracing::info!(n_killed = n, "registry shut down");
    }
}

impl Registry {
    /// Tries once more to commit the completions whose commit failed, on
    /// the blocking pool; what still fails is logged.
    async fn commit_pending_completions(&self) {
        if self.inner.recommits.n_pending() == 0 {
            return;
        }
        let inner = Arc::clone(&self.inner);
        let n_left = tokio::task::spawn_blocking(move || inner.flush_recommits())
            .await
            .unwrap_or(0);
        if n_left > 0 {
            tracing::error!(
                n_left,
                "completions still not committed to the ledger; a restart finds them only in their supervisors' exit records"
            );
        }
    }
}

impl Inner {
    /// Session `id`, running or kept finished.
    pub(crate) fn session(&self, id: &crate::id::SessionId) -> Option<Arc<Session>> {
        self.table.get(id)
    }

    /// Tells the `changes` receivers that the sessions changed. Called after the
    /// table lock is released (a watch send takes the watch's own lock only).
    pub(crate) fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }
}

#[cfg(test)]
mod tests;
