//! Acknowledged delivery: events leave an owner's queue for good only when the
//! consumer says it has them.
//!
//! [`Registry::take`] moves the owner's queued events into a [`Drained`] lease.
//! While the lease is held, no other drain sees them, so two concurrent drains never
//! deliver one event twice. [`Drained::acknowledge`] marks the completions delivered
//! in the ledger; dropping the lease unacknowledged puts the events back at the
//! front of the queue, in order, for the next drain. A consumer whose response was
//! lost therefore gets the events again, and a crash of the whole host leaves them
//! undelivered in the ledger, replayed after the restart.

use crate::lock_order::{Mutex, rank};
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, PoisonError};

use herd_hooks::Shown;
use tokio::sync::broadcast;

use crate::answers::CompletionReason;
use crate::config::NotificationPolicy;
use crate::event::Event;
use crate::registry::table::Queues;
use crate::registry::{Inner, Registry};
use crate::session::Session;

/// The delivery room: the broadcast every event goes out on, the notification
/// policy that decides which are queued for their owners, and the ids
/// acknowledged lately. Events are queued in the owners' queues of the table,
/// which the table room hands to a critical section.
#[derive(Debug)]
pub(crate) struct Outbox {
    events: broadcast::Sender<Event>,
    policy: NotificationPolicy,
    /// Event ids acknowledged by id lately, which a dropped lease does not requeue.
    acked: Acknowledged,
}

impl Outbox {
    /// An outbox queuing what `policy` allows, broadcasting to up to `capacity`
    /// events behind per receiver.
    pub(super) fn new(policy: NotificationPolicy, capacity: usize) -> Outbox {
        Outbox {
            events: broadcast::channel(capacity).0,
            policy,
            acked: Acknowledged::default(),
        }
    }

    /// A receiver of every event from now on, whatever the policy.
    pub(super) fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Sends `event` to the subscribers (queued elsewhere, or not at all).
    pub(super) fn broadcast(&self, event: Event) {
        let _ = self.events.send(event);
    }

    /// Whether the notification policy queues `event` for its owners.
    pub(crate) fn allows(&self, event: &Event) -> bool {
        match self.policy {
            NotificationPolicy::All => true,
            NotificationPolicy::Result => matches!(event, Event::Completion { .. }),
            NotificationPolicy::Error => matches!(
                event,
                Event::Completion { exit_code, completion_reason, .. }
                    if !(*exit_code == Some(0) && *completion_reason == CompletionReason::Exited)
            ),
            NotificationPolicy::Off => false,
        }
    }

    /// Queues `event` for each of `owners` when the policy allows and broadcasts
    /// it once. Called in a critical section of the table room, which hands out
    /// the queues.
    pub(crate) fn publish<'o>(
        &self,
        queues: &mut Queues,
        owners: impl IntoIterator<Item = &'o str>,
        event: Event,
    ) {
        if self.allows(&event) {
            for owner in owners {
                queues.enqueue(owner, event.clone());
            }
        }
        self.broadcast(event);
    }

    /// Publishes `notice` of `s` (its `command` as it leaves herd) with the
    /// session's identity as its state says now, queued for its owner when `s`
    /// notifies. Called in a critical section of the table room.
    pub(super) fn publish_notice(
        &self,
        queues: &mut Queues,
        s: &Session,
        command: Shown,
        notice: Notice,
    ) {
        let (task_id, owner_task_id, session_key) = {
            let st = s.state();
            (
                st.task_id.clone(),
                st.owner_task_id.clone(),
                st.session_key.clone(),
            )
        };
        let owner = owner_task_id.clone();
        let session_id = s.id.clone();
        let event = match notice {
            Notice::Ready {
                by,
                detail,
                ready_at,
            } => Event::Ready {
                session_id,
                task_id,
                owner_task_id,
                session_key,
                command,
                by,
                detail,
                ready_at,
            },
            Notice::Retry {
                run,
                max_runs,
                previous,
            } => Event::Retry {
                session_id,
                task_id,
                owner_task_id,
                session_key,
                command,
                run,
                max_runs,
                previous,
            },
        };
        let owners = s.is_notify().then_some(owner.as_str());
        self.publish(queues, owners, event);
    }
}

/// What a running session tells its owner besides output: it became ready, or a
/// run of it began ([`Outbox::publish_notice`]).
#[derive(Debug)]
pub(super) enum Notice {
    /// [`Event::Ready`]'s own fields.
    Ready {
        by: String,
        detail: Shown,
        ready_at: String,
    },
    /// [`Event::Retry`]'s own fields.
    Retry {
        run: u32,
        max_runs: u32,
        previous: String,
    },
}

/// Events taken from one owner's queue and not yet acknowledged.
#[derive(Debug)]
#[must_use = "a lease dropped without `acknowledge` puts its events back in the queue"]
#[non_exhaustive]
pub struct Drained {
    inner: Arc<Inner>,
    owner: String,
    events: Vec<Event>,
}

impl Drained {
    /// The events, oldest first.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The owner they were queued for.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Acknowledges now, and takes out of the lease, the events `answered` picks:
    /// ones the consumer got another way (a wait that answered the exit carries the
    /// completion). Returns them.
    pub fn acknowledge_where(&mut self, answered: impl Fn(&Event) -> bool) -> Vec<Event> {
        let (taken, kept): (Vec<Event>, Vec<Event>) = std::mem::take(&mut self.events)
            .into_iter()
            .partition(|e| answered(e));
        self.events = kept;
        self.inner.mark_delivered(&taken);
        taken
    }

    /// Takes out of the lease, without marking anything, the events `acknowledged`
    /// picks: ones the caller acknowledges by id ([`Registry::acknowledge_ids`]) in
    /// one batch with others. Returns how many.
    pub fn settle_where(&mut self, acknowledged: impl Fn(&Event) -> bool) -> usize {
        let before = self.events.len();
        self.events.retain(|e| !acknowledged(e));
        before - self.events.len()
    }

    /// The consumer has them: completions are marked delivered in the ledger and the
    /// events are gone from the queue for good. Returns them.
    pub fn acknowledge(mut self) -> Vec<Event> {
        let events = std::mem::take(&mut self.events);
        self.inner.mark_delivered(&events);
        self.inner.arm_recommits();
        events
    }
}

impl Drop for Drained {
    /// Unacknowledged: back to the front of the owner's queue, before anything
    /// queued since, so the order of delivery stays the order of events.
    fn drop(&mut self) {
        // An event acknowledged by id meanwhile (a consumer that reconnected) stays
        // delivered.
        let mut events = std::mem::take(&mut self.events);
        self.inner.outbox.acked.retain_unacknowledged(&mut events);
        self.events = events;
        if self.events.is_empty() {
            return;
        }
        let n_returned = self.events.len();
        {
            let events = std::mem::take(&mut self.events);
            self.inner
                .table
                .requeue_front(std::mem::take(&mut self.owner), events);
        }
        tracing::debug!(n_returned, "unacknowledged events returned to their queue");
    }
}

/// The ids of events acknowledged by id recently (the newest [`KEPT_ACKS`]), so a
/// lease dropped after its events were acknowledged elsewhere (the consumer's
/// connection closed, it reconnected and acknowledged by id) does not queue them again.
#[derive(Debug, Default)]
pub(crate) struct Acknowledged {
    ids: Mutex<(HashSet<String>, VecDeque<String>), { rank::ACKED }>,
}

/// How many acknowledged ids [`Acknowledged`] remembers.
const KEPT_ACKS: usize = 4_096;

impl Acknowledged {
    fn note(&self, ids: &[String]) {
        let mut guard = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        let (set, order) = &mut *guard;
        for id in ids {
            if set.insert(id.clone()) {
                order.push_back(id.clone());
            }
        }
        while order.len() > KEPT_ACKS {
            if let Some(old) = order.pop_front() {
                set.remove(&old);
            }
        }
    }

    fn retain_unacknowledged(&self, events: &mut Vec<Event>) {
        let guard = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        if !guard.0.is_empty() {
            events.retain(|e| !guard.0.contains(&e.event_id()));
        }
    }
}

/// What [`Registry::acknowledge_ids`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Acknowledgement {
    /// Events taken out of the owner's queue (replayed or given back meanwhile).
    pub n_dequeued: usize,
    /// Completion ids among the ids (each marked delivered in the ledger).
    pub n_completions: usize,
    /// Whether the ledger took the write; `false` leaves the completions
    /// undelivered there until a retry writes the mark (a restart before it would
    /// replay them).
    pub committed: bool,
}

impl Registry {
    /// Acknowledges events by their ids ([`Event::event_id`]) for `owner`: the
    /// consumer has handed them on. Completions among them are marked delivered in
    /// the ledger in one transaction, whichever process committed them (an earlier
    /// daemon's lease that died with it included); the events are taken out of the
    /// owner's queue, where a replay or a dropped lease may have put them back; and a
    /// lease still holding them does not give them back. Ids of events this registry
    /// never saw are acknowledged all the same (they are idempotent). Does file IO:
    /// call it off the async runtime.
    pub fn acknowledge_ids(&self, owner: &str, ids: &[String]) -> Acknowledgement {
        // Whatever an earlier process left undelivered is queued first, so that the
        // removal below sees it and no later replay brings it back.
        self.inner.replay_once();
        let completions: Vec<&str> = ids
            .iter()
            .filter_map(|id| crate::completion_of(id))
            .collect();
        let committed = self
            .inner
            .mark_completions_delivered(Some(owner), &completions);
        if !committed {
            self.inner.arm_recommits();
        }
        self.inner.outbox.acked.note(ids);
        let wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let n_dequeued = self
            .inner
            .table
            .dequeue_where(owner, |e| wanted.contains(e.event_id().as_str()));
        Acknowledgement {
            n_dequeued,
            n_completions: completions.len(),
            committed,
        }
    }

    /// Takes the events queued for `owner` as a lease: they are delivered once the
    /// lease is acknowledged, and queued again if it is dropped (see the module
    /// docs). [`Registry::drain`] is `take` acknowledged at once.
    pub fn take(&self, owner: &str) -> Drained {
        self.inner.replay_once();
        // What a full queue folded comes first.
        let events = self.inner.table.take_queue(owner);
        Drained {
            inner: Arc::clone(&self.inner),
            owner: owner.to_owned(),
            events,
        }
    }

    /// How many events wait for `owner` (a fold notice counts as one), without
    /// taking them: for a front end that tells its client there is something to
    /// collect.
    pub fn pending(&self, owner: &str) -> usize {
        self.inner.table.pending(owner)
    }
}
