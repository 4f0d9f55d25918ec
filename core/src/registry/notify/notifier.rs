//! The notify room: the watch breaker, the owners it paused and the heartbeat
//! schedule behind the notifier lock, and the one timer that serves them.
//!
//! Its narrow API: [`Notifier::arm_beat`] and [`Notifier::forget`] for a session's
//! heartbeat, [`Notifier::tick`] for the timer's round (the released breaker and
//! the beats due, each taken out under the lock and delivered after it),
//! [`Notifier::admit`] and [`Notifier::release_paused`] for a watch match, and
//! [`Notifier::start_timer`]. The notifier lock is a leaf of the session state
//! (rank `NOTIFIER`); nothing is delivered under it, and the timer never holds it
//! while it takes the table lock.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::super::Inner;
use super::TIMER_MAX_WAIT;
use crate::Clock;
use crate::id::SessionId;
use crate::lock_order::{Mutex, rank};
use crate::session::Session;
use crate::text;
use crate::watch::{Admission, BreakerEvent, Heartbeat, WatchBreaker};

/// New output without a newline that a heartbeat still carries once it is this long
/// (a progress bar that never ends its line).
const HEARTBEAT_PARTIAL_LINE_BYTES: u64 = 8 * 1024;

/// Heartbeats by due time. Generic so the benchmark can drive the exact schedule the
/// registry's timer uses over synthetic sources.
#[derive(Debug)]
pub(crate) struct BeatSchedule<K, S> {
    due: BTreeSet<(Instant, K)>,
    entries: HashMap<K, (Heartbeat, S)>,
}

impl<K: Ord + Hash + Clone, S> Default for BeatSchedule<K, S> {
    fn default() -> Self {
        BeatSchedule {
            due: BTreeSet::new(),
            entries: HashMap::new(),
        }
    }
}

impl<K: Ord + Hash + Clone, S> BeatSchedule<K, S> {
    /// Schedules `heartbeat` for `key`, replacing an earlier one.
    pub(crate) fn arm(&mut self, key: K, source: S, heartbeat: Heartbeat) {
        self.forget(&key);
        self.due.insert((heartbeat.next_due(), key.clone()));
        self.entries.insert(key, (heartbeat, source));
    }

    /// Drops `key`'s heartbeat; nothing more is due for it.
    pub(crate) fn forget(&mut self, key: &K) {
        if let Some((heartbeat, _)) = self.entries.remove(key) {
            self.due.remove(&(heartbeat.next_due(), key.clone()));
        }
    }

    /// Heartbeats scheduled.
    #[cfg(any(test, feature = "bench-support"))]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// When the earliest heartbeat is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.due.first().map(|(at, _)| *at)
    }

    /// Calls `tick` for every heartbeat due at `now`, then reschedules each one at its
    /// new due time. `tick` must call [`Heartbeat::tick`], which restarts the interval.
    pub(crate) fn run_due(&mut self, now: Instant, mut tick: impl FnMut(&K, &mut Heartbeat, &S)) {
        let mut again = Vec::new();
        while let Some((at, _)) = self.due.first() {
            if *at > now {
                break;
            }
            let Some((_, key)) = self.due.pop_first() else {
                break;
            };
            if let Some((heartbeat, source)) = self.entries.get_mut(&key) {
                tick(&key, heartbeat, source);
                // A tick always restarts the interval; the guard keeps a misbehaving
                // caller from spinning this loop.
                let next = heartbeat.next_due().max(now + Duration::from_millis(1));
                again.push((next, key));
            }
        }
        self.due.extend(again);
    }
}

/// The registry's notification state: the watch breaker and the heartbeat schedule.
#[derive(Debug)]
pub(crate) struct Notifier {
    clock: Arc<dyn Clock>,
    state: Mutex<NotifyState, { rank::NOTIFIER }>,
    wake: Arc<Notify>,
    is_timer_started: AtomicBool,
}

#[derive(Debug, Default)]
struct NotifyState {
    breaker: WatchBreaker,
    /// Owners whose matches the tripped breaker dropped (or who tripped it): they are
    /// told when it releases.
    paused_owners: BTreeSet<String>,
    beats: BeatSchedule<SessionId, Arc<Session>>,
}

/// What one round of the timer took out of the room, to deliver after the lock.
#[derive(Debug)]
pub(super) struct Tick {
    /// The breaker released, with the owners it had paused.
    pub(super) released: Option<(BreakerEvent, BTreeSet<String>)>,
    /// The heartbeats due, with the output each carries.
    pub(super) beats: Vec<(Arc<Session>, DueBeat)>,
}

impl Notifier {
    /// An idle notifier reading `clock`; its timer starts with the first heartbeat or
    /// breaker trip.
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Notifier {
        Notifier {
            clock,
            state: Mutex::new(NotifyState::default()),
            wake: Arc::new(Notify::new()),
            is_timer_started: AtomicBool::new(false),
        }
    }

    fn state(&self) -> crate::lock_order::Ordered<'_, NotifyState> {
        self.state.acquire()
    }

    /// The notifier's clock, now.
    pub(super) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Schedules `s`'s heartbeat every `interval` from now and tells the timer.
    pub(super) fn arm_beat(&self, s: &Arc<Session>, interval: Duration) {
        let now = self.clock.now();
        self.state()
            .beats
            .arm(s.id.clone(), Arc::clone(s), Heartbeat::new(now, interval));
        self.wake.notify_one();
    }

    /// The session finished: its heartbeat stops.
    pub(crate) fn forget(&self, id: &SessionId) {
        self.state().beats.forget(id);
    }

    /// The timer's round at `now`: the breaker's release, if due, with the owners
    /// it paused (no longer paused), and every heartbeat due, ticked.
    pub(super) fn tick(&self, now: Instant) -> Tick {
        let mut n = self.state();
        let released = n
            .breaker
            .tick(now)
            .map(|event| (event, std::mem::take(&mut n.paused_owners)));
        let mut beats = Vec::new();
        n.beats.run_due(now, |_, heartbeat, s| {
            if let Some(due) = due_beat(heartbeat, s, now) {
                beats.push((Arc::clone(s), due));
            }
        });
        Tick { released, beats }
    }

    /// Asks the breaker to admit one match of `owner`'s at `now`; an owner whose
    /// match is held back is paused, and told when the breaker releases.
    pub(super) fn admit(&self, now: Instant, owner: &str) -> Admission {
        let mut n = self.state();
        let admission = n.breaker.admit(now);
        if !admission.is_admitted {
            n.paused_owners.insert(owner.to_owned());
        }
        admission
    }

    /// The breaker released while admitting `owner`'s match: the owners it had
    /// paused, to be told. When that match was held back all the same, `owner`
    /// stays paused and is not among them.
    pub(super) fn release_paused(&self, owner: &str, is_admitted: bool) -> Vec<String> {
        let mut n = self.state();
        let mut owners = std::mem::take(&mut n.paused_owners);
        if !is_admitted {
            n.paused_owners.insert(owner.to_owned());
            owners.remove(owner);
        }
        owners.into_iter().collect()
    }

    /// Wakes the timer so it reads the schedule again.
    pub(super) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Starts the one notification timer of the registry, once: it waits for the
    /// earliest deadline (at most [`TIMER_MAX_WAIT`], an injected clock moves without
    /// waking anybody) and runs `Inner::tick_notifications` on the blocking pool. It
    /// ends when the registry is gone.
    pub(super) fn start_timer(&self, runtime: &tokio::runtime::Handle, weak: Weak<Inner>) {
        if self.is_timer_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let wake = Arc::clone(&self.wake);
        let clock = Arc::clone(&self.clock);
        drop(runtime.spawn(async move {
            loop {
                let next = match weak.upgrade() {
                    Some(inner) => inner.notifier.state().next_deadline(),
                    None => return,
                };
                let wait = next.map_or(TIMER_MAX_WAIT, |at| {
                    at.saturating_duration_since(clock.now())
                        .min(TIMER_MAX_WAIT)
                });
                let _ = tokio::time::timeout(wait, wake.notified()).await;
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                // A beat reads the log (its key look-back) and runs the hooks, which
                // may wait on a plugin still starting: off the runtime's workers.
                if let Err(error) =
                    tokio::task::spawn_blocking(move || inner.tick_notifications()).await
                {
                    tracing::warn!(%error, "the notification timer's tick failed");
                }
            }
        }));
    }

    /// Heartbeats currently scheduled.
    #[cfg(feature = "bench-support")]
    pub(crate) fn n_heartbeats(&self) -> usize {
        self.state().beats.len()
    }
}

impl NotifyState {
    /// When the timer must look again: the earliest heartbeat or the breaker release.
    fn next_deadline(&self) -> Option<Instant> {
        let beat = self.beats.next_due();
        let release = self.breaker.release_at();
        match (beat, release) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A beat the timer decided on, with the bytes it carries.
#[derive(Debug)]
pub(super) struct DueBeat {
    pub(super) beat: crate::watch::Beat,
    pub(super) bytes: Vec<u8>,
    /// Output just before `bytes` (up to the key lookback), context for redaction.
    pub(super) context: Vec<u8>,
    /// `context` does not start at the first byte the session wrote.
    pub(super) context_cut: bool,
    /// Where `context` starts in the session's output.
    pub(super) context_from: u64,
    /// Bytes of the beat's range that the tail no longer holds.
    pub(super) n_missing: u64,
}

/// Ticks one heartbeat at `now`. The beat ends at the last complete line, so a line is
/// never split between two beats; a partial line goes into a later beat, or the
/// completion.
fn due_beat(heartbeat: &mut Heartbeat, s: &Session, now: Instant) -> Option<DueBeat> {
    let tail = s.tail();
    let total = tail.total_ingested();
    let baseline = heartbeat.baseline();
    let (held, n_missing) = tail.since(baseline);
    let end = match memchr::memrchr(b'\n', held) {
        Some(idx) => baseline + n_missing + idx as u64 + 1,
        None if total - baseline >= HEARTBEAT_PARTIAL_LINE_BYTES => {
            total - (held.len() - text::complete_prefix_len(held)) as u64
        }
        None => baseline,
    };
    let beat = heartbeat.tick(now, end)?;
    let len = usize::try_from(beat.to_total - baseline - n_missing).unwrap_or(held.len());
    let bytes = held[..len.min(held.len())].to_vec();
    let context_from = baseline.saturating_sub(herd_hooks::KEY_LOOKBACK_BYTES as u64);
    let (before, n_before_missing) = tail.since(context_from);
    let n_context =
        usize::try_from((baseline + n_missing).saturating_sub(context_from + n_before_missing))
            .unwrap_or(0)
            .min(before.len());
    Some(DueBeat {
        beat,
        bytes,
        context: before[..n_context].to_vec(),
        context_cut: context_from + n_before_missing > 0,
        context_from: context_from + n_before_missing,
        n_missing,
    })
}
