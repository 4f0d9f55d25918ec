//! Wake-ups for agents: watch matches, heartbeats and their delivery.
//!
//! The limits themselves are the clock-driven state machines of `crate::watch`; this
//! module wires them to live sessions:
//!
//! - at spawn, [`Inner::plan_notifications`] settles what a request gets: `notify` and
//!   `watch` combine (a match wakes, the exit still wakes once), a heartbeat implies
//!   notify, and a child agent gets none of
//!   them (its completion could only arrive after it is gone);
//! - watch matching runs in the session's reader, per complete line, through a
//!   [`WatchObserver`] that owns the session's [`WatchState`]; deliveries go through the
//!   registry-wide [`WatchBreaker`];
//! - heartbeats are one [`BeatSchedule`] ordered by due time, served by ONE timer task
//!   for the whole registry (not one per session). The same task announces the
//!   breaker's release, so it is told even when no further match arrives;
//! - every event leaves through the outbox (`delivery::Outbox::publish`): the notification policy decides
//!   whether it is queued for the owner's `drain`; `subscribe` sees it regardless.
//!
//! Invariant: no watch or heartbeat event is queued after the session's completion.
//! Both are queued under the table lock only while the session is still in the running
//! table, and the choke point removes it from that table and publishes the completion
//! in one critical section of the same lock.
//!
//! Locking: table lock → session state → notifier state → session tail. The timer
//! never holds the notifier state while it takes the table lock.

use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use crate::watch::HEARTBEAT_MAX_CHARS;
use herd_hooks::{KeyLines, Route, Window};

use super::Inner;
use crate::config::SpawnRequest;
use crate::event::Event;
use crate::reader::Observer;
use crate::session::Session;
use crate::text;
use crate::watch::{BreakerEvent, WatchDelivery, WatchState};
use crate::{Registry, SpawnError};

mod notifier;
#[cfg(test)]
use notifier::BeatSchedule;
use notifier::DueBeat;
pub(crate) use notifier::Notifier;

/// The longest the timer waits before it re-reads the clock (an injected test clock
/// moves without waking anybody).
const TIMER_MAX_WAIT: Duration = Duration::from_secs(1);

/// A line longer than this without a newline is matched as it stands.
const WATCH_MAX_LINE_BYTES: usize = 64 * 1024;

/// The note a child agent's notify, watch or heartbeat request gets.
pub(crate) const CHILD_NOTIFY_NOTE: &str = "notify_on_complete is off because you are a child agent: \
     a completion would arrive after you finished. Wait on the process, kill it, or hand it \
     off to your parent before you finish";

/// What a spawn request gets in notifications, settled before the child starts.
#[derive(Debug, Clone, Default)]
pub(crate) struct NotifyPlan {
    /// Queue a completion for the owner.
    pub(crate) notify: bool,
    /// Watch patterns in force.
    pub(crate) watch: Vec<String>,
    /// The heartbeat interval in force.
    pub(crate) heartbeat: Option<Duration>,
    /// What the caller should know about the above.
    pub(crate) notes: Vec<String>,
}

impl Inner {
    /// Settles notify, watch and heartbeat for `req` ([`NotifyPlan::settle`] with
    /// this registry's heartbeat floor and whether the owner is a child agent).
    pub(crate) fn plan_notifications(&self, req: &SpawnRequest) -> NotifyPlan {
        let owner = req.owner_task_id.as_deref().unwrap_or(&req.task_id);
        NotifyPlan::settle(
            req,
            self.config.heartbeat_floor,
            self.agents.is_child(owner),
        )
    }

    /// Arms the heartbeat of a freshly registered session and returns the watch
    /// observer its reader runs, if it watches.
    pub(crate) fn arm_notifications(
        self: &Arc<Self>,
        s: &Arc<Session>,
        plan: &NotifyPlan,
    ) -> Option<Box<dyn Observer>> {
        if let Some(interval) = plan.heartbeat {
            self.notifier.arm_beat(s, interval);
            self.notifier
                .start_timer(&self.runtime, Arc::downgrade(self));
        }
        if plan.watch.is_empty() {
            return None;
        }
        Some(Box::new(WatchObserver {
            inner: Arc::downgrade(self),
            session: Arc::clone(s),
            state: WatchState::new(plan.watch.clone()),
            partial: Vec::new(),
            keys: KeyLines::new(),
        }))
    }

    /// The timer's work: announce a released breaker, deliver due heartbeats.
    fn tick_notifications(&self) {
        let notifier::Tick { released, beats } = self.notifier.tick(self.notifier.now());
        if let Some((event, owners)) = released {
            self.table.with_queues(|queues| {
                self.outbox.publish(
                    queues,
                    owners.iter().map(String::as_str),
                    breaker_event(event),
                );
            });
        }
        for (s, due) in beats {
            self.deliver_beat(&s, due);
        }
    }

    /// Queues one heartbeat after re-checking, under the table lock, that the session
    /// still runs and its completion can be delivered.
    fn deliver_beat(&self, s: &Session, due: DueBeat) {
        // The beat's new output, with the output before it as context only (a
        // private-key block the new output starts inside, a line it starts in).
        let context = text::strip_ansi(&text::decode_tail(&due.context, due.context_cut, false));
        let decoded = text::strip_ansi(&text::decode_tail(&due.bytes, due.n_missing > 0, false));
        let n_omitted =
            decoded.chars().count().saturating_sub(HEARTBEAT_MAX_CHARS) as u64 + due.n_missing;
        // Whether a private-key block is open where the context starts, however far
        // back its BEGIN lies: the rule every route asks (read before any lock).
        let key_open = s.key_open_at(&context, due.context_cut, due.context_from);
        let mut source = context;
        let from = source.len();
        source.push_str(&decoded);
        let window =
            Window::last_chars_after(&source, from, HEARTBEAT_MAX_CHARS).after_open_key(key_open);
        let omitted_note = if n_omitted > 0 {
            format!("...({n_omitted} earlier characters omitted)\n")
        } else {
            String::new()
        };
        // The hooks run before the table lock: nothing slow or foreign under it.
        let output = self
            .show(s, Route::Heartbeat, window)
            .framed(&omitted_note, "");
        let command = self.shown_command(s);
        let queued = self.table.while_running(&s.id, |_, queues| {
            if !s.is_notify() {
                return false;
            }
            let st = s.state();
            let owner = st.owner_task_id.clone();
            let event = Event::Heartbeat {
                session_id: s.id.clone(),
                task_id: st.task_id.clone(),
                owner_task_id: owner.clone(),
                session_key: st.session_key.clone(),
                command,
                seq: due.beat.seq,
                interval: due.beat.interval.as_secs(),
                elapsed: s.uptime_seconds(),
                output,
                started_at: text::rfc3339(s.started_at),
            };
            drop(st);
            self.outbox.publish(queues, [owner.as_str()], event);
            true
        });
        if queued != Some(true) {
            tracing::debug!(session_id = %s.id, "heartbeat dropped: the session finished");
            return;
        }
        tracing::debug!(session_id = %s.id, seq = due.beat.seq, "heartbeat queued");
    }

    /// Delivers what one batch of lines produced: breaker events, the match if
    /// admitted, then the disabled notice (which turns notify-on-complete on).
    fn deliver_watch(self: &Arc<Self>, s: &Session, delivery: WatchDelivery) {
        let now = self.notifier.now();
        // The hooks run before the table lock (nothing slow or foreign under it),
        // even for a match the breaker may then hold back.
        let shown_match = delivery.matched.as_ref().map(|matched| {
            let output = self.show(s, Route::Watch, Window::all(&matched.output));
            if matched.output_cut {
                output.framed("", "\n...(truncated)")
            } else {
                output
            }
        });
        let command = self.shown_command(s);
        self.table.while_running(&s.id, |_, queues| {
            let (owner, task_id, session_key) = {
                let st = s.state();
                (
                    st.owner_task_id.clone(),
                    st.task_id.clone(),
                    st.session_key.clone(),
                )
            };
            if let (Some(matched), Some(output)) = (delivery.matched, shown_match) {
                let admission = self.notifier.admit(now, &owner);
                for event in admission.events {
                    let owners: Vec<String> = match event {
                        BreakerEvent::Tripped { .. } => {
                            self.notifier
                                .start_timer(&self.runtime, Arc::downgrade(self));
                            self.notifier.wake();
                            vec![owner.clone()]
                        }
                        // This owner's match is admitted after the release, so it was
                        // not paused now; it learns of the release only if it was.
                        BreakerEvent::Released { .. } => {
                            self.notifier.release_paused(&owner, admission.is_admitted)
                        }
                    };
                    self.outbox.publish(
                        queues,
                        owners.iter().map(String::as_str),
                        breaker_event(event),
                    );
                }
                if admission.is_admitted {
                    let event = Event::WatchMatch {
                        session_id: s.id.clone(),
                        task_id: task_id.clone(),
                        owner_task_id: owner.clone(),
                        session_key: session_key.clone(),
                        command: command.clone(),
                        pattern: matched.pattern,
                        output,
                        suppressed: matched.suppressed,
                        matched_at: crate::text::rfc3339(SystemTime::now()),
                    };
                    self.outbox.publish(queues, [owner.as_str()], event);
                }
            }
            if let Some(disabled) = delivery.disabled {
                s.set_notify(true);
                self.request_checkpoint();
                let event = Event::WatchDisabled {
                    session_id: s.id.clone(),
                    task_id,
                    owner_task_id: owner.clone(),
                    session_key,
                    command,
                    suppressed: disabled.suppressed,
                    message: format!(
                        "Watch patterns disabled for process {}: {}",
                        s.id,
                        disabled.reason.message()
                    ),
                };
                self.outbox.publish(queues, [owner.as_str()], event);
            }
        });
    }
}

impl NotifyPlan {
    /// Settles notify, watch and heartbeat for `req`, with the configured heartbeat
    /// `floor`, for an owner that `is_child` agent or not.
    /// `heartbeat_seconds` is a whole number by type; JSON callers validate with
    /// [`Registry::heartbeat_from_json`] first.
    pub(crate) fn settle(req: &SpawnRequest, floor: Duration, is_child: bool) -> NotifyPlan {
        let mut notes = Vec::new();
        let heartbeat = match req.heartbeat_seconds {
            None | Some(0) => None,
            Some(n) => {
                let asked = Duration::from_secs(n);
                if asked < floor {
                    notes.push(format!(
                        "heartbeat of {n}s raised to the minimum of {}s",
                        floor.as_secs()
                    ));
                }
                Some(asked.max(floor))
            }
        };
        let mut notify = req.notify;
        if heartbeat.is_some() && !notify {
            notify = true;
            notes.push(
                "heartbeat turns notify_on_complete on: beats and the completion reach you the same way"
                    .to_owned(),
            );
        }
        // Watch and notify combine (B20): matches wake within the watch limits, and
        // the exit still sends its one completion.
        let watch = req.watch.clone();
        if is_child && (notify || !watch.is_empty()) {
            notes.push(CHILD_NOTIFY_NOTE.to_owned());
            return NotifyPlan {
                notify: false,
                watch: Vec::new(),
                heartbeat: None,
                notes,
            };
        }
        NotifyPlan {
            notify,
            watch,
            heartbeat,
            notes,
        }
    }
}

/// The public event for a breaker event.
fn breaker_event(event: BreakerEvent) -> Event {
    match event {
        BreakerEvent::Tripped { .. } => Event::WatchOverflowTripped {
            message: event.message(),
        },
        BreakerEvent::Released { suppressed } => Event::WatchOverflowReleased {
            suppressed,
            message: event.message(),
        },
    }
}

/// Watch matching in the reader: splits ingested bytes into lines and feeds complete
/// ones to the session's [`WatchState`].
struct WatchObserver {
    inner: Weak<Inner>,
    session: Arc<Session>,
    state: WatchState,
    /// The current line so far.
    partial: Vec<u8>,
    /// Private-key blocks across lines: a matched line inside one is masked.
    keys: KeyLines,
}

impl WatchObserver {
    fn feed(&mut self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let now = inner.notifier.now();
        if let Some(delivery) = self.state.on_lines(now, lines.iter().map(String::as_str)) {
            inner.deliver_watch(&self.session, delivery);
        }
    }
}

/// One line of output as text: `\r` and ANSI sequences removed.
fn line_text(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    text::strip_ansi(&String::from_utf8_lossy(bytes))
}

impl Observer for WatchObserver {
    fn output(&mut self, bytes: &[u8]) {
        if !self.state.is_active() {
            return;
        }
        self.partial.extend_from_slice(bytes);
        let mut lines = Vec::new();
        if let Some(end) = memchr::memrchr(b'\n', &self.partial) {
            for line in self.partial[..end].split(|b| *b == b'\n') {
                lines.push(self.keys.line(&line_text(line)).into_owned());
            }
            self.partial.drain(..=end);
        }
        if self.partial.len() > WATCH_MAX_LINE_BYTES {
            let line = line_text(&std::mem::take(&mut self.partial));
            lines.push(self.keys.line(&line).into_owned());
        }
        self.feed(&lines);
    }

    fn end(&mut self) {
        if self.state.is_active() && !self.partial.is_empty() {
            let last = line_text(&std::mem::take(&mut self.partial));
            let last = self.keys.line(&last).into_owned();
            self.feed(&[last]);
        }
        self.state.on_exit();
    }
}

impl Registry {
    /// Validates a JSON `heartbeat` value for [`SpawnRequest::heartbeat_seconds`],
    /// as the MCP and socket layers receive it: `null` and 0 are off (`None`), positive
    /// whole seconds are raised to the configured floor.
    ///
    /// # Errors
    /// [`SpawnError::InvalidRequest`] for negative, fractional, boolean, string, array
    /// or object values, with a message naming the accepted range (0 disables;
    /// positive values are clamped).
    pub fn heartbeat_from_json(
        &self,
        value: &serde_json::Value,
    ) -> Result<Option<u64>, SpawnError> {
        crate::watch::validate_heartbeat(value, self.inner.config.heartbeat_floor)
            .map(|d| d.map(|d| d.as_secs()))
            .map_err(|e| SpawnError::InvalidRequest {
                field: "heartbeat_seconds",
                message: e.to_string(),
            })
    }

    /// Heartbeats currently scheduled on the registry's one timer (a test hook:
    /// only with the `bench-support` feature, which herd-core's tests enable).
    #[cfg(feature = "bench-support")]
    #[doc(hidden)]
    pub fn n_heartbeats(&self) -> usize {
        self.inner.notifier.n_heartbeats()
    }
}

/// Heartbeat bookkeeping at scale, for the notify benchmark (only with the
/// `bench-support` feature, which the benches enable).
#[cfg(feature = "bench-support")]
#[doc(hidden)]
pub mod bench_support {
    use std::collections::VecDeque;
    use std::time::{Duration, Instant};

    use herd_hooks::{OutputContext, Pipeline, Route};

    use super::TIMER_MAX_WAIT;
    use super::notifier::BeatSchedule;
    use crate::output::Tail;
    use crate::text;
    use crate::watch::Heartbeat;

    /// What a run of the timer over synthetic sessions did.
    #[derive(Debug, Clone, Copy)]
    pub struct HeartbeatLoad {
        /// Beats delivered.
        pub n_beats: u64,
        /// Timer wake-ups.
        pub n_wakes: u64,
    }

    /// Runs the registry's heartbeat schedule over `n_sessions` in-memory tails for
    /// `wall` of real time on ONE timer task, the way the registry's timer does: wait
    /// until the earliest due beat (at most a second), tick what is due, and deliver
    /// each beat (decode, size, redact through the pipeline, queue). Each session
    /// prints one line per interval. What is not exercised: spawning, the reader, the
    /// registry's table lock. The caller measures CPU around it.
    pub async fn heartbeat_load(
        n_sessions: usize,
        interval: Duration,
        wall: Duration,
    ) -> HeartbeatLoad {
        let start = Instant::now();
        let pipeline = Pipeline::redaction_only();
        let mut schedule: BeatSchedule<
            usize,
            crate::lock_order::Mutex<Tail, { crate::lock_order::rank::TAIL }>,
        > = BeatSchedule::default();
        for idx in 0..n_sessions {
            // Spread the sessions over one interval, as spawns would be, and start in
            // the steady state: the first beats fall due right away.
            let offset = interval.mul_f64(idx as f64 / n_sessions.max(1) as f64);
            let armed = start.checked_sub(interval).unwrap_or(start) + offset;
            schedule.arm(
                idx,
                crate::lock_order::Mutex::new(Tail::new(4096)),
                Heartbeat::new(armed, interval),
            );
        }
        let mut load = HeartbeatLoad {
            n_beats: 0,
            n_wakes: 0,
        };
        let mut queue: VecDeque<herd_hooks::Shown> = VecDeque::new();
        let line = b"progress: step done, 42 of 100 files\n";
        while start.elapsed() < wall {
            let next = schedule.next_due().unwrap_or(start + wall);
            let wait = next
                .saturating_duration_since(Instant::now())
                .min(TIMER_MAX_WAIT);
            let _ = tokio::time::timeout(wait, std::future::pending::<()>()).await;
            load.n_wakes += 1;
            let now = Instant::now();
            let mut due = Vec::new();
            schedule.run_due(now, |idx, heartbeat, tail| {
                let mut tail = tail
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                // The session printed a line since its last beat.
                tail.push(line, 0);
                let (held, _) = tail.since(heartbeat.baseline());
                let end = heartbeat.baseline() + held.len() as u64;
                let bytes = held.to_vec();
                if let Some(beat) = heartbeat.tick(now, end) {
                    due.push((*idx, beat, bytes));
                }
            });
            for (idx, beat, bytes) in due {
                let decoded = text::strip_ansi(&text::decode_tail(&bytes, false, false));
                let sized = beat.output(&decoded);
                let session_id = format!("proc_{idx:012x}");
                let ctx = OutputContext {
                    route: Route::Heartbeat,
                    command: "make test",
                    return_code: None,
                    owner_task_id: "bench",
                    session_id: &session_id,
                    backend: "local",
                    partial: false,
                };
                let window = herd_hooks::Window::last_chars(&decoded, sized.text.chars().count());
                queue.push_back(pipeline.show(&ctx, window));
                load.n_beats += 1;
            }
            // The owner drains now and then.
            if queue.len() > 10_000 {
                queue.clear();
            }
        }
        load
    }
}

#[cfg(test)]
mod tests;
