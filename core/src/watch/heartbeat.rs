//! Heartbeat bookkeeping: when a session's next beat is due and what it carries.
//!
//! A heartbeat tells an agent, every N seconds, what a long-running process printed
//! since the previous beat. [`Heartbeat`] is the per-session part of that, driven by an
//! explicit clock: the registry's single heartbeat timer calls [`Heartbeat::tick`] with
//! `now` and the session's monotonic `total_ingested` counter, and gets a [`Beat`] only
//! when the interval has elapsed *and* there is new output. A tick with nothing new
//! is skipped and restarts the interval, so beats stay on the session's period and an
//! idle process costs its agent nothing.
//!
//! The caller still owns liveness: it re-checks that the session is running right
//! before queueing a beat, and drops the `Heartbeat` at exit, so no beat follows the
//! completion.

use std::time::{Duration, Instant};

#[cfg(test)]
mod tests;

/// Shortest interval production accepts; smaller positive values are raised to it.
pub(crate) const HEARTBEAT_FLOOR: Duration = Duration::from_secs(60);

/// Characters of new output one beat carries; earlier ones are omitted and counted.
pub(crate) const HEARTBEAT_MAX_CHARS: usize = 2_000;

/// A `heartbeat` value that is not a whole number of seconds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid heartbeat {given}: give a whole number of seconds; 0 turns heartbeats off \
     and positive values below {floor_seconds} are raised to {floor_seconds}"
)]
pub(crate) struct InvalidHeartbeat {
    /// The value as given, in JSON.
    pub given: String,
    /// The floor in force.
    pub floor_seconds: u64,
}

/// Validates a user-supplied heartbeat and returns the interval to use.
///
/// `null` and `0` mean off (`Ok(None)`). A positive whole number of seconds is
/// raised to `floor` if below it. A whole-valued float such as `90.0` is accepted.
///
/// # Errors
/// [`InvalidHeartbeat`] for negative, fractional, boolean, string, array or object
/// values; its message says that 0 disables and positive values are clamped.
pub(crate) fn validate_heartbeat(
    value: &serde_json::Value,
    floor: Duration,
) -> Result<Option<Duration>, InvalidHeartbeat> {
    let invalid = || InvalidHeartbeat {
        given: value.to_string(),
        floor_seconds: floor.as_secs(),
    };
    let seconds = match value {
        serde_json::Value::Null => return Ok(None),
        serde_json::Value::Number(n) => match (n.as_u64(), n.as_f64()) {
            (Some(whole), _) => whole,
            (None, Some(float)) if float >= 0.0 && float.fract() == 0.0 && float <= 1e15 => {
                // Whole and in range, checked just above.
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "a non-negative whole float below 1e15 fits u64 exactly"
                )]
                let whole = float as u64;
                whole
            }
            _ => return Err(invalid()),
        },
        serde_json::Value::Bool(_)
        | serde_json::Value::String(_)
        | serde_json::Value::Array(_)
        | serde_json::Value::Object(_) => return Err(invalid()),
    };
    if seconds == 0 {
        return Ok(None);
    }
    Ok(Some(Duration::from_secs(seconds).max(floor)))
}

/// One beat to deliver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Beat {
    /// 1 for the first delivered beat, then 2, 3, …; skipped ticks do not count.
    pub seq: u64,
    /// `total_ingested` at the previous beat (0 for the first): where the new output
    /// starts.
    pub from_total: u64,
    /// `total_ingested` now: where the new output ends.
    pub to_total: u64,
    /// The session's interval, for "next in …".
    pub interval: Duration,
}

impl Beat {
    /// Bytes of output produced since the previous beat.
    pub(crate) fn n_new_bytes(&self) -> u64 {
        self.to_total - self.from_total
    }

    /// Sizes the new output for delivery: at most [`HEARTBEAT_MAX_CHARS`]
    /// characters, keeping the tail.
    ///
    /// `new_output` is the text of `from_total..to_total` as far as the caller
    /// still holds it; `n_omitted_chars` counts only what this cut dropped.
    pub(crate) fn output(&self, new_output: &str) -> BeatOutput {
        let n_chars = new_output.chars().count();
        if n_chars <= HEARTBEAT_MAX_CHARS {
            return BeatOutput {
                text: new_output.to_owned(),
                n_omitted_chars: 0,
            };
        }
        let n_omitted_chars = n_chars - HEARTBEAT_MAX_CHARS;
        let start_idx = new_output
            .char_indices()
            .nth(n_omitted_chars)
            .map_or(new_output.len(), |(idx, _)| idx);
        BeatOutput {
            text: new_output[start_idx..].to_owned(),
            n_omitted_chars,
        }
    }
}

/// The new output of a beat, sized for delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BeatOutput {
    /// The last [`HEARTBEAT_MAX_CHARS`] characters at most.
    pub text: String,
    /// Characters of earlier output that were left out.
    pub n_omitted_chars: usize,
}

/// Per-session heartbeat schedule and position.
#[derive(Debug, Clone)]
pub(crate) struct Heartbeat {
    interval: Duration,
    /// Start of the current interval: arming, the last beat or the last skipped tick.
    last_tick: Instant,
    /// `total_ingested` at the last beat.
    baseline: u64,
    /// Beats delivered.
    seq: u64,
}

impl Heartbeat {
    /// Arms a heartbeat at `now`. The output baseline is 0, so output written before
    /// arming goes into the first beat.
    pub(crate) fn new(now: Instant, interval: Duration) -> Self {
        Heartbeat {
            interval,
            last_tick: now,
            baseline: 0,
            seq: 0,
        }
    }

    /// The interval.
    pub(crate) fn interval(&self) -> Duration {
        self.interval
    }

    /// `total_ingested` at the last beat: where the next beat's output starts.
    pub(crate) fn baseline(&self) -> u64 {
        self.baseline
    }

    /// Beats delivered so far.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// When the next tick is due; the shared timer sleeps until the earliest of these.
    pub(crate) fn next_due(&self) -> Instant {
        self.last_tick + self.interval
    }

    /// Decides whether a beat is due at `now` with `total_ingested` bytes read so far.
    ///
    /// Before the interval has elapsed: `None`, nothing changes. After it: the
    /// interval restarts, and a [`Beat`] is returned if output arrived since the
    /// previous beat (the baseline then moves to `total_ingested`); an empty tick is
    /// skipped and does not count in `seq`.
    pub(crate) fn tick(&mut self, now: Instant, total_ingested: u64) -> Option<Beat> {
        if now < self.next_due() {
            return None;
        }
        self.last_tick = now;
        if total_ingested <= self.baseline {
            return None;
        }
        self.seq += 1;
        let beat = Beat {
            seq: self.seq,
            from_total: self.baseline,
            to_total: total_ingested,
            interval: self.interval,
        };
        self.baseline = total_ingested;
        Some(beat)
    }
}
