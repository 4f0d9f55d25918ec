//! The queue after a restart, and the placeholder session a queued job answers
//! from. A restart re-queues every stored job whose session is neither running nor
//! finished; a job whose start had begun (`starting`) and left no session is ended
//! as never run rather than started again, so no job runs twice.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use tokio::sync::watch;

use super::record::{QueuedRecord, RECORD_VERSION};
use super::{Entry, Inner};
use crate::answers::ModeName;
use crate::config::SpawnRequest;
use crate::error::LookupError;
use crate::id::SessionId;
use crate::output::Tail;
use crate::session::{Origin, Session, State, TimeLimit};

impl Inner {
    /// A queued job's placeholder: its id, command and owner, no process.
    pub(super) fn placeholder(
        &self,
        id: &SessionId,
        req: &SpawnRequest,
        record: &QueuedRecord,
        time_limit: Option<TimeLimit>,
    ) -> Arc<Session> {
        let (done, _) = watch::channel(false);
        let (kill_requested, _) = watch::channel(false);
        let owner = req
            .owner_task_id
            .clone()
            .unwrap_or_else(|| req.task_id.clone());
        let started_at = super::super::durable::from_unix_seconds(record.submitted_at);
        let age = SystemTime::now()
            .duration_since(started_at)
            .unwrap_or_default();
        Arc::new(Session {
            id: id.clone(),
            command: req.command.clone(),
            cwd: record.cwd.clone(),
            pid: 0,
            pgid: 0,
            start_time: None,
            mode: if record.pty.is_some() {
                ModeName::Pty
            } else {
                ModeName::Pipe
            },
            started_at,
            started: Instant::now().checked_sub(age).unwrap_or_else(Instant::now),
            log_path: self.home.session_log_path(id.as_str()),
            notify: req.notify.into(),
            read: false.into(),
            persist_on_release: req.persist_on_release,
            scope: None,
            shim: None,
            completion_chars: req
                .completion_output_chars
                .unwrap_or(self.config.completion_output_chars),
            name: req.name.clone(),
            time_limit,
            origin: Origin::of(req),
            tail: crate::lock_order::Mutex::new(Tail::new(self.config.buffer_bytes)),
            state: crate::lock_order::Mutex::new(State {
                task_id: req.task_id.clone(),
                owner_task_id: owner,
                session_key: req.session_key.clone(),
                handoff_note: None,
                exit: None,
                finished: None,
                kill_source: None,
                stdin: None,
                containment: crate::answers::Containment::default(),
                leftovers: Vec::new(),
                ready_at: None,
                runs: 0,
                reaching: false,
            }),
            done,
            kill_requested,
            terminals: crate::lock_order::Mutex::new(0),
            usage: Default::default(),
            command_head: std::sync::OnceLock::new(),
        })
    }

    /// Loads the groups and re-queues the stored jobs (see the module docs); called
    /// at the end of `Registry::restore`, once running sessions are back.
    pub(in crate::registry) async fn restore_queue(self: &Arc<Self>) {
        let store = Arc::clone(&self.queue.store);
        let loaded = match tokio::task::spawn_blocking(move || store.load()).await {
            Ok(Ok(loaded)) => loaded,
            Ok(Err(error)) => {
                tracing::error!(%error, "the job queue could not be read; queued jobs are not restored");
                return;
            }
            Err(error) => {
                tracing::error!(%error, "the job queue could not be read; queued jobs are not restored");
                return;
            }
        };
        let (rows, groups) = loaded;
        self.queue.state().groups.extend(groups);
        let (mut n_queued, mut n_done, mut n_lost, mut n_running) = (0, 0, 0, 0);
        for row in rows {
            let record: QueuedRecord = match serde_json::from_slice::<QueuedRecord>(&row.record) {
                Ok(r) if r.version <= RECORD_VERSION => r,
                Ok(_) | Err(_) => {
                    tracing::warn!(session_id = %row.session_id, "queued job's record unreadable; left in the store");
                    continue;
                }
            };
            let Some(id) = SessionId::parse(&row.session_id) else {
                continue;
            };
            self.queue.seq.fetch_max(
                row.seq.saturating_add(1),
                std::sync::atomic::Ordering::SeqCst,
            );
            let running = self
                .lookup(id.as_str())
                .is_ok_and(|s| s.state().finished.is_none());
            if running {
                n_running += 1;
                self.queue.state().started.insert(id, record.group.clone());
                continue;
            }
            let known = self.lookup(id.as_str()).is_ok()
                || self
                    .durable
                    .receipt_lookup(
                        id.as_str(),
                        LookupError::NotFound {
                            id: id.as_str().to_owned(),
                        },
                    )
                    .is_ok();
            let req = record.request();
            let time_limit = req.time_limit.and_then(|d| {
                SystemTime::now()
                    .checked_add(d)
                    .map(|deadline| TimeLimit { limit: d, deadline })
            });
            let entry = Entry {
                id: id.clone(),
                seq: row.seq,
                after: QueuedRecord::dependencies(&record.after),
                after_ready: QueuedRecord::dependencies(&record.after_ready),
                placeholder: self.placeholder(&id, &req, &record, time_limit),
                starting: record.starting,
                record,
            };
            if known {
                n_done += 1;
                self.queue.forget_queued(&id).await;
            } else if entry.starting {
                n_lost += 1;
                self.queue.state().waiting.push(entry.clone());
                self.end_unstarted(
                    &entry,
                    None,
                    "herd stopped while this job was starting; it is not started again (it may have begun)".to_owned(),
                )
                .await;
            } else {
                n_queued += 1;
                self.queue.state().waiting.push(entry);
            }
        }
        if n_queued + n_done + n_lost + n_running > 0 {
            tracing::info!(n_queued, n_done, n_lost, n_running, "job queue restored");
        }
        self.queue.wake();
        self.changed();
    }
}
