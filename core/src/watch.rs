//! Watch-pattern limits and heartbeat bookkeeping, as clock-driven state machines.
//!
//! A session spawned with `watch = [pattern, …]` wakes its agent when a line of output
//! contains one of the patterns. Unlimited, that turns a chatty log into a flood of
//! wake-ups, so every watch limit lives here:
//!
//! - per session ([`WatchState`]): at most one delivery per [`WATCH_SPACING`]; matches in
//!   between are counted and reported as `suppressed` with the next delivery; a spacing
//!   window that saw suppressed matches is a *strike*, and [`WATCH_MAX_STRIKES`]
//!   consecutive strikes disable watching; the [`WATCH_LIFETIME_CAP`]th delivery is the
//!   last. A disabled session falls back to notify-on-complete, and says so with exactly
//!   one [`WatchDisabled`];
//! - across sessions ([`WatchBreaker`]): more than [`BREAKER_MAX_MATCHES`] admitted
//!   matches within [`BREAKER_WINDOW`] trip a breaker for [`BREAKER_TRIP`], announced by
//!   one [`BreakerEvent::Tripped`] and closed by one [`BreakerEvent::Released`] that
//!   counts what was dropped;
//! - per delivery: at most [`WATCH_MAX_LINES`] matching lines and [`WATCH_MAX_CHARS`]
//!   characters.
//!
//! Nothing here reads the clock, spawns a task or touches a session: the caller passes
//! `now` in and queues what comes out. That keeps every limit testable to the
//! millisecond without sleeping, and keeps the matcher movable into the per-session
//! reader shim the design plans.
//!
//! The caller's order for one batch of lines is: [`WatchState::on_lines`]; for a
//! returned match, [`WatchBreaker::admit`] (queue the breaker's events, then the match
//! only if admitted); then queue the `disabled` part, which the breaker never drops.
//! A delivery the breaker drops still counts toward the session's lifetime cap.
//!
//! `crate::registry::notify` wires these into the reader and the registry's one timer.

// A few accessors and wire names serve the unit tests and diagnostics only.
#![allow(dead_code, reason = "accessors the unit tests use")]

use std::time::{Duration, Instant};

mod heartbeat;

pub(crate) use heartbeat::{Beat, HEARTBEAT_MAX_CHARS, Heartbeat, validate_heartbeat};

#[cfg(test)]
mod tests;

/// Minimum spacing between two deliveries of one session.
pub(crate) const WATCH_SPACING: Duration = Duration::from_secs(15);
/// Consecutive rate-limited spacing windows that disable watching.
pub(crate) const WATCH_MAX_STRIKES: u32 = 3;
/// Deliveries after which watching is disabled (the last one is still delivered).
pub(crate) const WATCH_LIFETIME_CAP: u32 = 8;
/// Matching lines carried by one delivery.
pub(crate) const WATCH_MAX_LINES: usize = 20;
/// Characters carried by one delivery.
pub(crate) const WATCH_MAX_CHARS: usize = 2_000;
/// Length of the global breaker's counting window.
pub(crate) const BREAKER_WINDOW: Duration = Duration::from_secs(10);
/// Matches admitted per window; the next one trips the breaker.
pub(crate) const BREAKER_MAX_MATCHES: u32 = 15;
/// How long a tripped breaker drops matches.
pub(crate) const BREAKER_TRIP: Duration = Duration::from_secs(30);

/// Why watching was switched off for a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DisableReason {
    /// [`WATCH_MAX_STRIKES`] consecutive spacing windows had suppressed matches.
    RateLimited,
    /// The [`WATCH_LIFETIME_CAP`]th match was delivered.
    LifetimeCap,
}

impl DisableReason {
    /// Snake-case name for the wire.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DisableReason::RateLimited => "rate_limited",
            DisableReason::LifetimeCap => "lifetime_cap",
        }
    }

    /// One sentence an agent reads: what happened and what comes instead.
    pub(crate) fn message(self) -> String {
        let why = match self {
            DisableReason::RateLimited => format!(
                "matches kept arriving faster than one per {}s for {WATCH_MAX_STRIKES} windows in a row",
                WATCH_SPACING.as_secs()
            ),
            DisableReason::LifetimeCap => {
                format!(
                    "{WATCH_LIFETIME_CAP} matches were delivered, the most one process may send"
                )
            }
        };
        format!(
            "watch patterns are now off for this process: {why}; you will get one notification when it exits instead"
        )
    }
}

/// A match to deliver to the session's owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WatchMatch {
    /// The first pattern found in the first matching line.
    pub pattern: String,
    /// The matching lines (at most [`WATCH_MAX_LINES`]) joined by `\n`, trailing
    /// whitespace removed, at most [`WATCH_MAX_CHARS`] characters.
    pub output: String,
    /// `output` was cut (more lines or characters matched than one delivery carries).
    pub output_cut: bool,
    /// Matching lines dropped by the spacing limit since the previous delivery.
    pub suppressed: u64,
}

/// Watching was switched off; sent once per session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WatchDisabled {
    /// Why.
    pub reason: DisableReason,
    /// Matching lines suppressed and never delivered.
    pub suppressed: u64,
}

/// What one batch of lines produced for a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WatchDelivery {
    /// A match to deliver (subject to the global breaker); `None` when this batch
    /// only disabled watching.
    pub matched: Option<WatchMatch>,
    /// Watching just became disabled: the caller turns notify-on-complete on and
    /// queues this after the match, whatever the breaker decided.
    pub disabled: Option<WatchDisabled>,
}

/// Where a session's watching stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Active,
    Disabled(DisableReason),
    /// The process exited: late output never produces an event.
    Exited,
}

/// Per-session watch state: patterns, spacing, strikes and the lifetime cap.
#[derive(Debug, Clone)]
pub(crate) struct WatchState {
    patterns: Vec<String>,
    phase: Phase,
    /// End of the current spacing window; `None` before the first delivery.
    cooldown_until: Option<Instant>,
    /// The current window saw a suppressed match.
    is_window_struck: bool,
    n_consecutive_strikes: u32,
    n_delivered: u32,
    /// Matching lines suppressed since the last delivery.
    suppressed: u64,
}

impl WatchState {
    /// Starts watching for `patterns` (plain substrings; empty patterns are ignored).
    pub(crate) fn new(patterns: Vec<String>) -> Self {
        let patterns: Vec<String> = patterns.into_iter().filter(|p| !p.is_empty()).collect();
        let phase = if patterns.is_empty() {
            Phase::Exited
        } else {
            Phase::Active
        };
        WatchState {
            patterns,
            phase,
            cooldown_until: None,
            is_window_struck: false,
            n_consecutive_strikes: 0,
            n_delivered: 0,
            suppressed: 0,
        }
    }

    /// The patterns watched for.
    pub(crate) fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether lines are still matched.
    pub(crate) fn is_active(&self) -> bool {
        self.phase == Phase::Active
    }

    /// Why watching was disabled, if it was.
    pub(crate) fn disabled_reason(&self) -> Option<DisableReason> {
        match self.phase {
            Phase::Disabled(reason) => Some(reason),
            Phase::Active | Phase::Exited => None,
        }
    }

    /// Matches delivered so far (including ones the global breaker dropped).
    pub(crate) fn n_delivered(&self) -> u32 {
        self.n_delivered
    }

    /// Matching lines suppressed since the last delivery.
    pub(crate) fn suppressed(&self) -> u64 {
        self.suppressed
    }

    /// The process exited: nothing is delivered from now on.
    pub(crate) fn on_exit(&mut self) {
        if self.phase == Phase::Active {
            self.phase = Phase::Exited;
        }
    }

    /// Matches one line of output at `now`. See [`WatchState::on_lines`].
    pub(crate) fn on_line(&mut self, now: Instant, line: &str) -> Option<WatchDelivery> {
        self.on_lines(now, [line])
    }

    /// Matches a batch of complete lines read together at `now`; all matching
    /// lines of the batch form at most one delivery.
    pub(crate) fn on_lines<'a>(
        &mut self,
        now: Instant,
        lines: impl IntoIterator<Item = &'a str>,
    ) -> Option<WatchDelivery> {
        if !self.is_active() {
            return None;
        }
        let mut pattern: Option<&str> = None;
        let mut kept: Vec<&str> = Vec::new();
        let mut n_matched: u64 = 0;
        for line in lines {
            let Some(found) = self.patterns.iter().find(|p| line.contains(p.as_str())) else {
                continue;
            };
            n_matched += 1;
            pattern.get_or_insert(found.as_str());
            if kept.len() < WATCH_MAX_LINES {
                kept.push(line);
            }
        }
        let pattern = pattern?.to_owned();

        if self.cooldown_until.is_some_and(|until| now < until) {
            self.suppressed += n_matched;
            if !self.is_window_struck {
                self.is_window_struck = true;
                self.n_consecutive_strikes += 1;
            }
            if self.n_consecutive_strikes >= WATCH_MAX_STRIKES {
                return Some(self.disable(DisableReason::RateLimited, None));
            }
            return None;
        }

        // A new window opens. The strike run continues only if the window that
        // just ended was struck too.
        if self.cooldown_until.is_some() && !self.is_window_struck {
            self.n_consecutive_strikes = 0;
        }
        self.is_window_struck = false;
        self.cooldown_until = Some(now + WATCH_SPACING);
        self.n_delivered += 1;
        let (output, output_cut) = clip_lines(&kept, n_matched);
        let matched = WatchMatch {
            pattern,
            output,
            output_cut,
            suppressed: std::mem::take(&mut self.suppressed),
        };
        if self.n_delivered >= WATCH_LIFETIME_CAP {
            return Some(self.disable(DisableReason::LifetimeCap, Some(matched)));
        }
        Some(WatchDelivery {
            matched: Some(matched),
            disabled: None,
        })
    }

    fn disable(&mut self, reason: DisableReason, matched: Option<WatchMatch>) -> WatchDelivery {
        self.phase = Phase::Disabled(reason);
        WatchDelivery {
            matched,
            disabled: Some(WatchDisabled {
                reason,
                suppressed: std::mem::take(&mut self.suppressed),
            }),
        }
    }
}

/// Joins the kept lines and cuts the text to [`WATCH_MAX_CHARS`] characters.
fn clip_lines(kept: &[&str], n_matched: u64) -> (String, bool) {
    let joined = kept.join("\n");
    let joined = joined.trim_end();
    let mut is_cut = n_matched > kept.len() as u64;
    let text = match joined.char_indices().nth(WATCH_MAX_CHARS) {
        Some((cut_idx, _)) => {
            is_cut = true;
            joined[..cut_idx].to_owned()
        }
        None => joined.to_owned(),
    };
    (text, is_cut)
}

/// An event of the global breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BreakerEvent {
    /// Too many matches across all sessions: matches are dropped until `until`.
    Tripped {
        /// When the breaker releases at the earliest.
        until: Instant,
    },
    /// The breaker released; `suppressed` matches were dropped while it was tripped
    /// (the one that tripped it included).
    Released {
        /// Matches dropped during the trip.
        suppressed: u64,
    },
}

impl BreakerEvent {
    /// Snake-case event type for the wire.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            BreakerEvent::Tripped { .. } => "watch_overflow_tripped",
            BreakerEvent::Released { .. } => "watch_overflow_released",
        }
    }

    /// One sentence an agent reads.
    pub(crate) fn message(&self) -> String {
        match self {
            BreakerEvent::Tripped { .. } => format!(
                "more than {BREAKER_MAX_MATCHES} watch matches arrived within {}s across all processes; \
                 watch notifications are paused for {}s",
                BREAKER_WINDOW.as_secs(),
                BREAKER_TRIP.as_secs()
            ),
            BreakerEvent::Released { suppressed } => format!(
                "watch notifications are back on; {suppressed} match(es) were dropped while they were paused"
            ),
        }
    }
}

/// The breaker's answer for one match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Admission {
    /// Deliver the match.
    pub is_admitted: bool,
    /// Breaker events to queue, in order, before the match (a release) or instead
    /// of it (a trip).
    pub events: Vec<BreakerEvent>,
}

/// The global watch breaker: one per registry, shared by all sessions.
#[derive(Debug, Clone, Default)]
pub(crate) struct WatchBreaker {
    window_start: Option<Instant>,
    n_in_window: u32,
    tripped_until: Option<Instant>,
    /// Matches dropped during the current trip.
    suppressed: u64,
}

impl WatchBreaker {
    /// A closed breaker with an empty window.
    pub(crate) fn new() -> Self {
        WatchBreaker::default()
    }

    /// Whether matches are being dropped at `now`.
    pub(crate) fn is_tripped(&self, now: Instant) -> bool {
        self.tripped_until.is_some_and(|until| now < until)
    }

    /// When a trip ends, if the breaker is tripped; the timer wakes then to announce
    /// the release.
    pub(crate) fn release_at(&self) -> Option<Instant> {
        self.tripped_until
    }

    /// Releases an expired trip; call it from a timer so the release is announced
    /// even when no further match arrives.
    pub(crate) fn tick(&mut self, now: Instant) -> Option<BreakerEvent> {
        let until = self.tripped_until?;
        if now < until {
            return None;
        }
        self.tripped_until = None;
        self.window_start = None;
        self.n_in_window = 0;
        let suppressed = std::mem::take(&mut self.suppressed);
        (suppressed > 0).then_some(BreakerEvent::Released { suppressed })
    }

    /// Decides whether a match at `now` may be delivered.
    pub(crate) fn admit(&mut self, now: Instant) -> Admission {
        let mut events: Vec<BreakerEvent> = self.tick(now).into_iter().collect();
        if self.is_tripped(now) {
            self.suppressed += 1;
            return Admission {
                is_admitted: false,
                events,
            };
        }
        let is_window_over = self
            .window_start
            .is_none_or(|start| now.duration_since(start) >= BREAKER_WINDOW);
        if is_window_over {
            self.window_start = Some(now);
            self.n_in_window = 0;
        }
        if self.n_in_window < BREAKER_MAX_MATCHES {
            self.n_in_window += 1;
            return Admission {
                is_admitted: true,
                events,
            };
        }
        let until = now + BREAKER_TRIP;
        self.tripped_until = Some(until);
        self.suppressed = 1;
        events.push(BreakerEvent::Tripped { until });
        Admission {
            is_admitted: false,
            events,
        }
    }
}
