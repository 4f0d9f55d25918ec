//! A per-job failure breaker that tells a job's own failures from the host's refusals.
//!
//! A scheduled job that fails N times in a row is parked: retrying it is pointless until
//! someone looks. But when the host refused to start it (no restart-safe scope, the user
//! bus gone), nothing about the job ran, and parking it would silently stop a nightly
//! backup because of a host condition. So an infrastructure failure leaves the count
//! alone and only sets a cooldown: the job is retried, spaced, instead of every tick.
//!
//! Pure: no clock of its own (callers pass `now`), no I/O.

use std::time::{Duration, Instant};

/// What a job's breaker allows right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerGate {
    /// The job may run.
    Ready,
    /// The host refused last time; retry at `retry_after`.
    Cooldown {
        /// When the job may be tried again.
        retry_after: Instant,
    },
    /// The job failed `n_consecutive` times in a row on its own; it stays parked until a
    /// success or a reset.
    Tripped {
        /// Consecutive job failures.
        n_consecutive: u32,
    },
}

/// Consecutive-failure breaker for one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureBreaker {
    /// Invariant: at least 1.
    limit: u32,
    cooldown: Duration,
    n_consecutive: u32,
    retry_after: Option<Instant>,
}

impl FailureBreaker {
    /// A breaker that trips after `limit` consecutive job failures (a `limit` of 0 counts
    /// as 1) and holds an infrastructure failure back for `cooldown`.
    pub fn new(limit: u32, cooldown: Duration) -> FailureBreaker {
        FailureBreaker {
            limit: limit.max(1),
            cooldown,
            n_consecutive: 0,
            retry_after: None,
        }
    }

    /// Consecutive job failures so far (infrastructure failures never count).
    pub fn n_consecutive(&self) -> u32 {
        self.n_consecutive
    }

    /// The job ran and succeeded: clears the count and any cooldown.
    pub fn record_success(&mut self) {
        self.n_consecutive = 0;
        self.retry_after = None;
    }

    /// The job failed at `now`. An `infrastructure` failure (the host refused; see
    /// `DispatchError::is_infrastructure`) sets the cooldown and leaves the count alone; a
    /// job failure counts and clears any cooldown (the host let it run). Returns the gate
    /// after recording.
    pub fn record_failure(&mut self, infrastructure: bool, now: Instant) -> BreakerGate {
        if infrastructure {
            self.retry_after = Some(now + self.cooldown);
        } else {
            self.n_consecutive = self.n_consecutive.saturating_add(1);
            self.retry_after = None;
        }
        self.gate(now)
    }

    /// Clears a tripped breaker (an operator re-enabled the job).
    pub fn reset(&mut self) {
        self.record_success();
    }

    /// What the breaker allows at `now`.
    pub fn gate(&self, now: Instant) -> BreakerGate {
        if self.n_consecutive >= self.limit {
            return BreakerGate::Tripped {
                n_consecutive: self.n_consecutive,
            };
        }
        match self.retry_after {
            Some(retry_after) if now < retry_after => BreakerGate::Cooldown { retry_after },
            _ => BreakerGate::Ready,
        }
    }
}
