//! The course of one kill, without I/O: SIGTERM to the tree, the grace (newcomers get
//! SIGTERM too), SIGKILL, then up to [`SURVIVOR_PROBE`] for the tree to be empty.
//!
//! The session machine runs one for the kills the shim carries out, and the daemon's
//! tree kill (`crate::kill`) runs one per sweep, so both follow the same course: the
//! driver carries out [`Action::Terminate`] and [`Action::Escalate`], answers
//! [`Action::LookAtTree`] with whether the tree is empty, and wakes the course at
//! [`KillCourse::next_look`] or when a member's exit may have emptied the tree.

use std::time::{Duration, Instant};

use super::{Action, SURVIVOR_PROBE};

/// What a zero grace means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ZeroGrace {
    /// SIGKILL at once (the shim's kills).
    Escalate,
    /// SIGTERM only: what ignores it survives (the daemon's tree kill).
    TermOnly,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// SIGTERM (and for a zero grace that escalates, SIGKILL) is being sent; the grace
    /// (or the probe) runs from the first look, right after it: sending to a large
    /// tree takes time of its own, which must not eat the grace.
    Starting { grace: Duration, zero: ZeroGrace },
    /// SIGTERM sent; SIGKILL at `until` unless the tree is empty before.
    Grace { until: Instant },
    /// The last signal sent (SIGKILL when `killed`); what is alive at `until` survived.
    Probe { until: Instant, killed: bool },
    /// The tree is empty, or the probe ran out.
    Done,
}

/// One kill's course.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KillCourse {
    phase: Phase,
    /// When the tree is looked at next.
    look: Instant,
    recheck: Duration,
}

impl KillCourse {
    /// Starts a kill at `now`: SIGTERM to every member (and SIGKILL at once for a zero
    /// grace that escalates). The tree is to be looked at right away: an empty one ends
    /// the kill at once.
    pub(crate) fn start<S>(
        now: Instant,
        grace: Duration,
        zero: ZeroGrace,
        recheck: Duration,
        actions: &mut Vec<Action<S>>,
    ) -> KillCourse {
        actions.push(Action::Terminate { first: true });
        if grace.is_zero() && zero == ZeroGrace::Escalate {
            actions.push(Action::Escalate { first: true });
        }
        KillCourse {
            phase: Phase::Starting { grace, zero },
            look: now,
            recheck,
        }
    }

    /// Whether the kill is still under way (not done).
    pub(crate) fn under_way(&self) -> bool {
        self.phase != Phase::Done
    }

    /// When the tree is to be looked at next; `None` once the kill is done.
    pub(crate) fn next_look(&self) -> Option<Instant> {
        self.under_way().then_some(self.look)
    }

    /// Whether a look at the tree is due at `now`.
    pub(crate) fn due(&self, now: Instant) -> bool {
        self.under_way() && now >= self.look
    }

    /// Something may have emptied the tree (a member's exit): look now.
    pub(crate) fn woken(&mut self, now: Instant) {
        if self.under_way() {
            self.look = self.look.min(now);
        }
    }

    /// The kill's next step, the tree being `empty` or not at `now`.
    pub(crate) fn looked<S>(&mut self, now: Instant, empty: bool, actions: &mut Vec<Action<S>>) {
        self.phase = if empty {
            Phase::Done
        } else {
            let phase = match self.phase {
                Phase::Starting { grace, .. } if !grace.is_zero() => {
                    Phase::Grace { until: now + grace }
                }
                Phase::Starting { zero, .. } => Phase::Probe {
                    until: now + SURVIVOR_PROBE,
                    killed: zero == ZeroGrace::Escalate,
                },
                other => other,
            };
            match phase {
                Phase::Grace { until } if now >= until => {
                    actions.push(Action::Escalate { first: true });
                    Phase::Probe {
                        until: now + SURVIVOR_PROBE,
                        killed: true,
                    }
                }
                Phase::Grace { until } => {
                    actions.push(Action::Terminate { first: false });
                    Phase::Grace { until }
                }
                Phase::Probe { until, .. } if now >= until => {
                    actions.push(Action::Survivors);
                    Phase::Done
                }
                Phase::Probe { until, killed } => {
                    // Idempotent, and reaches what was forked meanwhile.
                    actions.push(if killed {
                        Action::Escalate { first: false }
                    } else {
                        Action::Terminate { first: false }
                    });
                    Phase::Probe { until, killed }
                }
                Phase::Starting { .. } | Phase::Done => phase,
            }
        };
        self.look = match self.phase {
            Phase::Grace { until } | Phase::Probe { until, .. } => until.min(now + self.recheck),
            Phase::Starting { .. } | Phase::Done => now,
        };
    }
}
