//! The job queue: groups with a parallel limit, jobs queued in them, and
//! dependencies between jobs, in a room of its own.
//!
//! A queued job has its session id from its submission; until it starts it is an
//! entry here with a placeholder session (never in the session table, no process),
//! which `poll`, `list`, `log`, `wait` and `kill` answer from with status `queued`.
//! It starts, through the ordinary spawn path under that id (the guard, redaction,
//! the leftovers rule and the time limit apply then; the guard and the request's
//! checks also at submission, so a refused command never waits in a queue), when
//! every `after` dependency ended with exit 0, every `after_ready` dependency is
//! ready, and fewer than the group's `parallel` jobs of its group run. A job that
//! can never run (a dependency failed, it was killed while queued, it could not
//! start) ends through [`Inner::finish_unstarted`]: one completion, a receipt, no
//! process.
//!
//! Event driven: one task per registry waits on a [`Notify`] that a submission, a
//! finish (the choke point calls [`Inner::queue_finished`]), a group change, a
//! readiness mark and a queued kill wake; it decides under the queue's lock and
//! starts jobs outside it. No polling loop.
//!
//! Durable: every queued job and group is a row of the queue store (`state.db`'s
//! `queued` and `queue_groups`), written on the blocking pool before a submission or
//! a group change answers, never under a lock. A job's row is marked `starting`
//! before its spawn and removed once its session finished (or it ended without
//! running); `restore_queue` counts a row whose session is running in its group's
//! slots, drops one whose session finished, ends a `starting` one whose session is
//! neither as never run (it may have begun: it never runs twice), and queues the
//! rest again.
//!
//! Lock order: the queue's lock is a leaf; no other lock is taken under it, and it
//! is never taken under the table lock.

use crate::lock_order::{Mutex, MutexGuard, rank};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use herd_persistence::{QueueStore, QueuedRow};
use serde::Serialize;
use tokio::sync::{Notify, watch};

use super::Inner;
use crate::answers::SpawnInfo;
use crate::config::{KillSource, SpawnRequest};
use crate::error::SpawnError;
use crate::id::SessionId;
use crate::session::Session;

mod gate;
mod groups;
mod record;
mod restore;

pub use groups::{GroupError, GroupRow, MAX_GROUPS, PARALLEL_RANGE, check_group_name};
use record::QueuedRecord;

/// The group a job without `--group` is in: no limit, it starts at once.
pub const DEFAULT_GROUP: &str = "default";
/// The most dependencies one job may name (`after` and `after_ready` together).
pub const MAX_DEPENDENCIES: usize = 64;

/// Where and after what a submitted job runs.
#[derive(Debug, Clone, Default)]
pub struct QueueRequest {
    /// The group (`None` or `default`: no limit).
    pub group: Option<String>,
    /// Ids or names of sessions that must end with exit 0 first.
    pub after: Vec<String>,
    /// Ids or names of sessions that must be ready first.
    pub after_ready: Vec<String>,
}

impl QueueRequest {
    /// Whether the job is queued at all (a group with a limit or a dependency).
    pub fn queues(&self) -> bool {
        self.group.as_deref().is_some_and(|g| g != DEFAULT_GROUP)
            || !self.after.is_empty()
            || !self.after_ready.is_empty()
    }
}

/// The queue room, inside `Inner`.
#[derive(Debug)]
pub(super) struct Scheduler {
    state: Mutex<QueueState, { rank::QUEUE }>,
    wake: Arc<Notify>,
    store: Arc<dyn QueueStore>,
    /// Bumped whenever a job leaves the queue (started or ended).
    left: watch::Sender<u64>,
    seq: AtomicU64,
    /// When a slot freed last, for the scheduling-latency figure (`queue.latency`).
    freed_at: Mutex<Option<Instant>, { rank::QUEUE_LATENCY }>,
    latencies: Mutex<Vec<Duration>, { rank::QUEUE_LATENCY }>,
}

#[derive(Debug, Default)]
struct QueueState {
    groups: BTreeMap<String, u32>,
    /// Waiting jobs, in submission order.
    waiting: Vec<Entry>,
    /// Jobs started from the queue and not finished yet, with their group.
    started: HashMap<SessionId, String>,
}

#[derive(Debug, Clone)]
struct Entry {
    id: SessionId,
    seq: u64,
    record: QueuedRecord,
    after: Vec<SessionId>,
    after_ready: Vec<SessionId>,
    placeholder: Arc<Session>,
    /// Its start has begun: no longer a candidate.
    starting: bool,
}

fn lock<T, const R: u8>(m: &Mutex<T, R>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Scheduler {
    pub(super) fn new(
        home: &herd_persistence::Home,
        config: &crate::config::RegistryConfig,
    ) -> Self {
        let store = config
            .queue_store
            .clone()
            .unwrap_or_else(|| default_store(home));
        let (left, _) = watch::channel(0);
        Scheduler {
            state: Mutex::new(QueueState::default()),
            wake: Arc::new(Notify::new()),
            store,
            left,
            seq: AtomicU64::new(1),
            freed_at: Mutex::new(None),
            latencies: Mutex::new(Vec::new()),
        }
    }

    fn state(&self) -> MutexGuard<'_, QueueState> {
        lock(&self.state)
    }

    fn left(&self) {
        self.left.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Whether a waiting job has an `after_ready` dependency.
    pub(super) fn waits_for_readiness(&self) -> bool {
        self.state()
            .waiting
            .iter()
            .any(|e| !e.starting && !e.after_ready.is_empty())
    }

    /// Wakes the scheduler (a permit is kept when it is busy, so no wake is lost).
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Refuses a name one of the owner's queued jobs has already.
    fn check_name_not_queued(&self, req: &SpawnRequest, name: &str) -> Result<(), SpawnError> {
        let owner = req.owner_task_id.as_deref().unwrap_or(&req.task_id);
        let st = self.state();
        let taken = st.waiting.iter().find(|e| {
            e.record.name.as_deref() == Some(name)
                && e.record
                    .owner_task_id
                    .as_deref()
                    .unwrap_or(&e.record.task_id)
                    == owner
        });
        match taken {
            Some(e) => Err(SpawnError::InvalidRequest {
                field: "name",
                message: format!(
                    "{name} is already the name of your queued job {}; pick another, or kill that one",
                    e.id
                ),
            }),
            None => Ok(()),
        }
    }

    /// The placeholder session of a queued job, found by id, unique prefix or name.
    pub(super) fn placeholder_of(&self, id_or_name: &str) -> Option<Arc<Session>> {
        let wanted = crate::id::normalise_prefix(id_or_name);
        let st = self.state();
        let exact = st.waiting.iter().find(|e| e.id.as_str() == wanted);
        if let Some(e) = exact {
            return Some(Arc::clone(&e.placeholder));
        }
        let named: Vec<&Entry> = st
            .waiting
            .iter()
            .filter(|e| e.record.name.as_deref() == Some(id_or_name))
            .collect();
        if let [one] = named.as_slice() {
            return Some(Arc::clone(&one.placeholder));
        }
        if wanted.len() < crate::id::ID_PREFIX.len() + crate::id::MIN_PREFIX_CHARS {
            return None;
        }
        let by_prefix: Vec<&Entry> = st
            .waiting
            .iter()
            .filter(|e| e.id.as_str().starts_with(&wanted))
            .collect();
        match by_prefix.as_slice() {
            [one] => Some(Arc::clone(&one.placeholder)),
            _ => None,
        }
    }

    /// Whether `id` waits in the queue (its placeholder answers for it).
    pub(super) fn is_queued(&self, id: &SessionId) -> bool {
        self.state().waiting.iter().any(|e| &e.id == id)
    }

    /// Placeholders of every queued job, in submission order.
    pub(super) fn placeholders(&self) -> Vec<Arc<Session>> {
        self.state()
            .waiting
            .iter()
            .map(|e| Arc::clone(&e.placeholder))
            .collect()
    }

    /// A receiver bumped whenever a job leaves the queue.
    pub(super) fn on_leave(&self) -> watch::Receiver<u64> {
        self.left.subscribe()
    }

    /// Scheduling latency so far (a slot freed to the next queued job's process
    /// started, before its running row's commit):
    /// `(count, p50, p99)`.
    pub(super) fn latency(&self) -> (usize, Duration, Duration) {
        let mut l = lock(&self.latencies).clone();
        l.sort();
        let at = |q: f64| {
            l.get(((l.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or_default()
        };
        (l.len(), at(0.5), at(0.99))
    }

    /// Writes (or rewrites) a queued job's row, on the blocking pool.
    async fn store_queued(&self, id: &SessionId, seq: u64, record: &QueuedRecord) {
        let bytes = match serde_json::to_vec(record) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::error!(session_id = %id, %error, "queued job not encodable; it will not survive a restart");
                return;
            }
        };
        let row = QueuedRow {
            session_id: id.as_str().to_owned(),
            seq,
            record: bytes,
        };
        let store = Arc::clone(&self.store);
        match tokio::task::spawn_blocking(move || store.put(&row)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(session_id = %id, %error, "queued job not stored; it will not survive a restart");
            }
            Err(error) => {
                tracing::warn!(session_id = %id, %error, "queued job not stored; it will not survive a restart");
            }
        }
    }

    async fn forget_queued(&self, id: &SessionId) {
        let store = Arc::clone(&self.store);
        let raw = id.as_str().to_owned();
        match tokio::task::spawn_blocking(move || store.remove(&raw)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(session_id = %id, %error, "queued job's row not removed");
            }
            Err(error) => tracing::warn!(session_id = %id, %error, "queued job's row not removed"),
        }
    }
}

#[cfg(feature = "sqlite")]
fn default_store(home: &herd_persistence::Home) -> Arc<dyn QueueStore> {
    Arc::new(herd_persistence::QueueDb::new(home))
}

#[cfg(not(feature = "sqlite"))]
fn default_store(_home: &herd_persistence::Home) -> Arc<dyn QueueStore> {
    Arc::new(herd_persistence::MemoryQueueStore::default())
}

/// What a queued job waits for, said in its spawn answer.
fn queued_note(entry: &Entry) -> String {
    let mut parts = vec![format!("queued in group {}", entry.record.group)];
    if !entry.after.is_empty() {
        let ids: Vec<&str> = entry.after.iter().map(SessionId::as_str).collect();
        parts.push(format!("starts after {} ends with exit 0", ids.join(", ")));
    }
    if !entry.after_ready.is_empty() {
        let ids: Vec<&str> = entry.after_ready.iter().map(SessionId::as_str).collect();
        parts.push(format!("starts once {} is ready", ids.join(", ")));
    }
    parts.join("; ")
}

/// What the scheduler decided in one pass.
struct Pass {
    start: Vec<Entry>,
    fail: Vec<(Entry, String)>,
}

impl Inner {
    /// Starts the scheduler's task; it ends when the registry detaches or is gone.
    pub(super) fn arm_queue(self: &Arc<Self>) {
        let wake = Arc::clone(&self.queue.wake);
        let stop = self.detach.clone();
        let weak = Arc::downgrade(self);
        // A readiness mark bumps `changes`: a pass follows when a job waits for one.
        let mut changes = self.changes.subscribe();
        self.runtime.spawn(async move {
            loop {
                let mut woken = true;
                tokio::select! {
                    () = wake.notified() => {}
                    r = changes.changed() => {
                        if r.is_err() {
                            return;
                        }
                        woken = false;
                    }
                    () = stop.cancelled() => return,
                }
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                if woken || inner.queue.waits_for_readiness() {
                    inner.schedule().await;
                }
            }
        });
    }

    /// The finish choke point's call, after its lock: a slot may have freed, a
    /// dependency may have ended.
    pub(super) fn queue_finished(&self, id: &SessionId) {
        let (ours, wake) = {
            let mut st = self.queue.state();
            let ours = st.started.remove(id).is_some();
            (ours, ours || !st.waiting.is_empty())
        };
        if ours {
            let store = Arc::clone(&self.queue.store);
            let raw = id.as_str().to_owned();
            drop(self.runtime.spawn_blocking(move || {
                if let Err(error) = store.remove(&raw) {
                    tracing::warn!(session_id = raw, %error, "finished queued job's row not removed; a restart drops it");
                }
            }));
        }
        if ours {
            *lock(&self.queue.freed_at) = Some(Instant::now());
        }
        if wake {
            self.queue.wake();
        }
    }

    /// Queues `req` in `group` after its dependencies (see the module docs).
    pub(super) async fn submit(
        self: &Arc<Self>,
        mut req: SpawnRequest,
        q: QueueRequest,
    ) -> Result<SpawnInfo, SpawnError> {
        let group = q.group.clone().unwrap_or_else(|| DEFAULT_GROUP.to_owned());
        self.queue.check_group_known(&group)?;
        if q.after.len() + q.after_ready.len() > MAX_DEPENDENCIES {
            return Err(SpawnError::InvalidRequest {
                field: "after",
                message: format!(
                    "{} dependencies given; at most {MAX_DEPENDENCIES} are allowed",
                    q.after.len() + q.after_ready.len()
                ),
            });
        }
        req.limits = req.limits.or(self.config.default_limits);
        let time_limit = self.check_request(&req)?;
        if let Some(name) = &req.name {
            self.queue.check_name_not_queued(&req, name)?;
        }
        let cwd = self.working_dir(&req)?;
        self.judge(&req, &cwd).await?;
        let after = self.resolve_dependencies(&q.after, "after")?;
        let after_ready = self.resolve_dependencies(&q.after_ready, "after_ready")?;
        let id = self.fresh_queued_id();
        let record = QueuedRecord::of(&req, cwd, &group, &after, &after_ready);
        let placeholder = self.placeholder(&id, &req, &record, time_limit);
        let seq = self.queue.seq.fetch_add(1, Ordering::SeqCst);
        self.queue.store_queued(&id, seq, &record).await;
        let entry = Entry {
            id: id.clone(),
            seq,
            record,
            after,
            after_ready,
            placeholder,
            starting: false,
        };
        let note = queued_note(&entry);
        self.queue.state().waiting.push(entry);
        self.queue.wake();
        self.changed();
        tracing::info!(session_id = %id, group = %group, "job queued");
        Ok(SpawnInfo {
            name: req.name.clone(),
            session_id: id,
            pid: 0,
            command: self.hooks.show_command(&req.command),
            mode: match req.mode {
                crate::config::Mode::Pty { .. } => crate::answers::ModeName::Pty,
                crate::config::Mode::Pipe => crate::answers::ModeName::Pipe,
            },
            notify_on_complete: req.notify,
            watch_patterns: req.watch.clone(),
            heartbeat_seconds: req.heartbeat_seconds.filter(|&n| n > 0),
            persist_on_release: req.persist_on_release,
            pty_note: None,
            dispatch: crate::DispatchKind::InProcess,
            note: Some(note),
            time_limit_seconds: time_limit.map(|t| t.limit.as_secs()),
            replaces: None,
            queued: true,
        })
    }

    /// A fresh id, in neither the table nor the queue.
    fn fresh_queued_id(&self) -> SessionId {
        loop {
            let id = self.table.fresh_id();
            if !self.queue.state().waiting.iter().any(|e| e.id == id) {
                return id;
            }
        }
    }

    /// One pass: end what can never run, start what may, within each group's limit.
    async fn schedule(self: &Arc<Self>) {
        let gates = self.gates().await;
        let pass = {
            let mut st = self.queue.state();
            let st = &mut *st;
            let mut running: HashMap<String, usize> = HashMap::new();
            for group in st.started.values() {
                *running.entry(group.clone()).or_default() += 1;
            }
            let mut pass = Pass {
                start: Vec::new(),
                fail: Vec::new(),
            };
            for entry in st.waiting.iter_mut().filter(|e| !e.starting) {
                match gates.get(&entry.id) {
                    Some(gate::Gate::Failed(why)) => {
                        entry.starting = true;
                        pass.fail.push((entry.clone(), why.clone()));
                        continue;
                    }
                    Some(gate::Gate::Wait) => continue,
                    Some(gate::Gate::Open) | None => {}
                }
                let group = &entry.record.group;
                let limit = st.groups.get(group).copied();
                let n = running.entry(group.clone()).or_default();
                if limit.is_some_and(|limit| *n >= limit as usize) {
                    continue;
                }
                *n += 1;
                entry.starting = true;
                st.started.insert(entry.id.clone(), group.clone());
                pass.start.push(entry.clone());
            }
            pass
        };
        // The first start after a slot freed carries when it freed (the latency figure).
        let mut freed = if pass.start.is_empty() {
            None
        } else {
            lock(&self.queue.freed_at).take()
        };
        for (entry, why) in pass.fail {
            self.end_unstarted(&entry, None, why).await;
        }
        for entry in pass.start {
            let inner = Arc::clone(self);
            let freed = freed.take();
            self.runtime
                .spawn(async move { inner.start_queued(entry, freed).await });
        }
    }

    /// Starts one job under its id; a start that fails ends it unstarted.
    async fn start_queued(self: Arc<Self>, entry: Entry, freed: Option<Instant>) {
        let mut record = entry.record.clone();
        record.starting = true;
        self.queue.store_queued(&entry.id, entry.seq, &record).await;
        match self
            .spawn_as(entry.record.request(), Some(entry.id.clone()))
            .await
        {
            Ok(info) => {
                // The row stays (marked starting) until the session finishes, so a
                // restart knows which running sessions fill the group's slots.
                if let Some(freed) = freed {
                    let mut l = lock(&self.queue.latencies);
                    if l.len() < 100_000 {
                        l.push(freed.elapsed());
                    }
                }
                self.spawned(&info).await;
                self.queue.state().waiting.retain(|e| e.id != entry.id);
                self.queue.left();
            }
            Err(error) => {
                self.queue.state().started.remove(&entry.id);
                self.end_unstarted(&entry, None, format!("it could not start: {error}"))
                    .await;
                self.queue.wake();
            }
        }
    }

    /// Ends a job that never ran: one completion saying `why` (killed by `source`,
    /// else `failed_start`), a receipt, its row removed; dependants are woken.
    async fn end_unstarted(
        self: &Arc<Self>,
        entry: &Entry,
        source: Option<KillSource>,
        why: String,
    ) {
        let s = &entry.placeholder;
        s.tail().push(format!("herd: {why}\n").as_bytes(), 0);
        tracing::info!(session_id = %entry.id, why = %why, "queued job ended without running");
        self.finish_unstarted_off_runtime(s, source).await;
        self.queue.state().waiting.retain(|e| e.id != entry.id);
        self.queue.left();
        self.durable.receipt_attempted(&entry.id).await;
        self.queue.forget_queued(&entry.id).await;
        self.queue.wake();
    }

    /// Kills a queued job: it ends without running, with one completion saying so.
    /// `None` when `id` is not queued; a job whose start has begun is waited for and
    /// then killed as any running session.
    pub(super) async fn kill_queued(
        self: &Arc<Self>,
        id: &str,
        source: KillSource,
    ) -> Option<crate::answers::KillAnswer> {
        let s = self.queue.placeholder_of(id)?;
        let entry = {
            let st = self.queue.state();
            st.waiting.iter().find(|e| e.id == s.id).cloned()
        }?;
        if entry.starting {
            let mut left = self.queue.on_leave();
            while self.queue.is_queued(&entry.id) {
                if left.changed().await.is_err() {
                    break;
                }
            }
            let s = self.lookup(entry.id.as_str()).ok()?;
            return Some(self.kill_session(&s, source).await);
        }
        {
            let mut st = self.queue.state();
            match st.waiting.iter_mut().find(|e| e.id == entry.id) {
                Some(e) if !e.starting => e.starting = true,
                _ => return None,
            }
        }
        self.end_unstarted(
            &entry,
            Some(source),
            format!("killed while queued ({}); it never ran", source.as_str()),
        )
        .await;
        Some(self.kill_answer(
            &entry.placeholder,
            source,
            crate::answers::KillStatus::Killed,
            Vec::new(),
            None,
        ))
    }

    /// A kill-all's reach into the queue: `owner`'s queued jobs (every owner's when
    /// empty) but `exclude` end unrun, killed by `source`; lifecycle sources spare
    /// `persist_on_release` jobs, and a daemon shutdown leaves the queue to the next
    /// daemon. Returns how many.
    pub(super) async fn kill_queued_of(
        self: &Arc<Self>,
        owner: &str,
        exclude: &[SessionId],
        source: KillSource,
    ) -> usize {
        if source == KillSource::HostShutdown {
            return 0;
        }
        let targets: Vec<Entry> = {
            let mut st = self.queue.state();
            let mut targets = Vec::new();
            for e in st.waiting.iter_mut().filter(|e| !e.starting) {
                let job_owner = e.record.owner_task_id.as_deref();
                let mine = owner.is_empty() || job_owner.unwrap_or(&e.record.task_id) == owner;
                let spared = source.spares_persistent() && e.record.persist_on_release;
                if mine && !spared && !exclude.contains(&e.id) {
                    e.starting = true;
                    targets.push(e.clone());
                }
            }
            targets
        };
        for entry in &targets {
            let why = format!("killed while queued ({}); it never ran", source.as_str());
            self.end_unstarted(entry, Some(source), why).await;
        }
        targets.len()
    }
}

/// Scheduling latency figures of a registry's queue (`queue.latency`).
#[derive(Debug, Clone, Serialize)]
pub struct QueueLatency {
    /// How many starts were measured.
    pub n: usize,
    /// Median microseconds from a slot freeing to the next job's start.
    pub p50_us: u64,
    /// 99th percentile, microseconds.
    pub p99_us: u64,
}

/// Ids in the queue's waiting list and started set, for the gate.
fn known_ids(st: &QueueState) -> HashSet<SessionId> {
    st.waiting
        .iter()
        .map(|e| e.id.clone())
        .chain(st.started.keys().cloned())
        .collect()
}

impl super::Registry {
    /// Returns once `id` is not a queued job: at once for a running or finished
    /// session or an unknown id, otherwise when the job starts or leaves the queue
    /// without running. A follow of a queued job's log waits here before it opens
    /// the log, so it prints the run instead of ending on the placeholder.
    pub async fn until_dequeued(&self, id: &str) {
        let inner = &self.inner;
        if inner.lookup(id).is_ok() {
            return;
        }
        let Some(s) = inner.queue.placeholder_of(id) else {
            return;
        };
        let mut left = inner.queue.on_leave();
        while inner.queue.is_queued(&s.id) {
            if left.changed().await.is_err() {
                return;
            }
        }
    }
}

/// What a wait on a queued job found.
pub(super) enum QueuedWait {
    /// The id is not queued: an ordinary wait.
    NotQueued,
    /// The answer: still queued when the window ran out or the wait was interrupted,
    /// or the job left the queue and only its receipt knows it now.
    Answer(Result<crate::answers::WaitAnswer, crate::error::Error>),
    /// It left the queue after this long; the wait goes on on its session.
    Left(Arc<Session>, Duration),
}

impl Inner {
    /// Resolves `id` among the table's sessions, then the queue's placeholders.
    pub(super) fn lookup_or_queued(
        &self,
        id: &str,
    ) -> Result<Arc<Session>, crate::error::LookupError> {
        match self.lookup(id) {
            Ok(s) => Ok(s),
            Err(miss @ crate::error::LookupError::NotFound { .. }) => {
                self.queue.placeholder_of(id).ok_or(miss)
            }
            Err(miss) => Err(miss),
        }
    }

    /// A wait on `id` while it is queued (see [`QueuedWait`]), at most `limit`.
    pub(super) async fn wait_queued(
        &self,
        id: &str,
        limit: Duration,
        interrupt: Option<tokio_util::sync::CancellationToken>,
    ) -> QueuedWait {
        if self.lookup(id).is_ok() {
            return QueuedWait::NotQueued;
        }
        let Some(s) = self.queue.placeholder_of(id) else {
            return QueuedWait::NotQueued;
        };
        let began = Instant::now();
        let mut left = self.queue.on_leave();
        let interrupt = interrupt.unwrap_or_default();
        let gone = tokio::select! {
            r = tokio::time::timeout(limit, async {
                while self.queue.is_queued(&s.id) {
                    if left.changed().await.is_err() {
                        break;
                    }
                }
            }) => r.is_ok(),
            () = interrupt.cancelled() => false,
        };
        if gone {
            return match self.lookup(s.id.as_str()) {
                Ok(live) => QueuedWait::Left(live, began.elapsed()),
                Err(miss) => QueuedWait::Answer(self.wait_from_receipt(s.id.as_str(), miss)),
            };
        }
        let status = if interrupt.is_cancelled() {
            crate::answers::WaitStatus::Interrupted
        } else {
            crate::answers::WaitStatus::Timeout
        };
        let (subject, output) = self.sized_subject(&s, herd_hooks::Route::Wait);
        let note = format!(
            "the job is still queued after {}s (it has not started; its group is full or a dependency has not ended); wait again, or poll it",
            began.elapsed().as_secs()
        );
        QueuedWait::Answer(Ok(self.wait_answer(
            subject,
            status,
            output,
            true,
            Some(note),
        )))
    }
}
