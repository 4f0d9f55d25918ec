//! The session machine: the rules that decide when a session ends, when its time limit
//! fires and how a kill proceeds, written once, without I/O.
//!
//! Two loops supervise a job: the in-process reader (`reader`, async, for sessions the
//! daemon holds itself) and the shim's poll loop (`shim/supervise`, one thread, for
//! sessions that outlive the daemon). Both feed this machine what they observe
//! ([`Event`]: output seen, end of output, the child's exit, a kill request, the state
//! of the tree when asked, or only that time passed) together with the time now
//! ([`Now`]), carry out the [`Action`]s it answers (signal the tree, look at the tree,
//! read what is buffered, finish the session), and sleep until [`Machine::poll_timeout`].
//! The machine never reads a clock, a descriptor or the process table, so its rules
//! are tested by feeding it events in any order, as `herd-pty`'s
//! scanner is tested by feeding it bytes.
//!
//! The rules (the end of a session, the tree kill and the time limit):
//! - the session finishes only once the direct child has exited *and* its output is
//!   done: end-of-file, or the output stayed idle for the idle drain after the exit, or
//!   at once after a kill (after reading what is already buffered, [`Action::DrainNow`]);
//! - a kill the machine carries out itself ([`Rules::kill`], the shim) is SIGTERM to
//!   the whole tree, the grace (newcomers get SIGTERM too), SIGKILL, then up to
//!   [`SURVIVOR_PROBE`] for the tree to be empty; a zero grace sends SIGKILL at once.
//!   A kill under way keeps its course and its source; the session does not finish
//!   while it is under way;
//! - the time limit is a wall-clock deadline: it kills the tree as `time_limit` while
//!   the child runs and while the finished session holds leftovers (a machine that
//!   carries no kills asks for that kill, [`Action::RequestKill`]);
//! - with `kill_leftovers`, what is left of the tree when the session would finish gets
//!   a kill (with no source) first;
//! - once finished, a machine that carries kills lingers: it looks at the tree every
//!   [`Rules::linger_recheck`] and releases it once empty, or once a kill (a request,
//!   the time limit) is done.
//!
//! Where kills are carried out by someone else ([`Rules::kill`] `None`: the registry's
//! tree kill of an in-process session, which follows the same [`KillCourse`]), a kill
//! request only makes the session finish right after the exit, and no `killed_by` is
//! reported (the registry knows its own). The time limit is still this machine's rule
//! there: at the deadline it answers [`Action::RequestKill`] once, and the kill the
//! driver has carried out comes back as [`Event::Kill`] like any other. So the in-process
//! reader and the shim's loop keep one time limit, with one wall-clock recheck.

use std::time::{Duration, Instant, SystemTime};

use crate::config::KillSource;

mod course;
#[cfg(test)]
mod tests;

pub(crate) use course::{KillCourse, ZeroGrace};

/// How long after SIGKILL the tree may take to be empty before what is left counts as
/// survivors.
pub(crate) const SURVIVOR_PROBE: Duration = Duration::from_secs(1);

/// The longest the machine lets its driver sleep before it reads the wall clock
/// against the time limit again (a suspended machine or a clock step is noticed).
pub(crate) const DEADLINE_RECHECK: Duration = Duration::from_secs(60);

/// The time now, on both clocks: the monotonic one for every interval, the wall clock
/// for the time limit (a deadline fixed at spawn, kept across daemon restarts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Now {
    pub(crate) at: Instant,
    pub(crate) wall: SystemTime,
}

impl Now {
    /// Reads both clocks.
    pub(crate) fn read() -> Now {
        Now {
            at: Instant::now(),
            wall: SystemTime::now(),
        }
    }
}

/// How the machine's kills proceed, when it carries them out itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KillRules {
    /// The SIGTERM-to-SIGKILL grace.
    pub(crate) grace: Duration,
    /// How often a kill looks at the tree again (newcomers get SIGTERM; an empty tree
    /// ends the kill).
    pub(crate) recheck: Duration,
}

/// The session's rules, fixed at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rules {
    /// How long output may stay idle after the exit before the session ends.
    pub(crate) idle_drain: Duration,
    /// The time limit's wall-clock deadline.
    pub(crate) deadline: Option<SystemTime>,
    /// `Some` when this machine carries out kills (and lingers over leftovers).
    pub(crate) kill: Option<KillRules>,
    /// Kill what is left of the tree once the main process is done.
    pub(crate) kill_leftovers: bool,
    /// How often a finished session looks at its leftovers (their exits wake the
    /// driver earlier; this is the backstop).
    pub(crate) linger_recheck: Duration,
}

/// What the driver observed.
#[derive(Debug)]
pub(crate) enum Event<S> {
    /// Nothing but time passed.
    Tick,
    /// The driver was woken by something that may have changed the tree (a child's
    /// exit): a kill under way, or a finished session holding leftovers, looks at the
    /// tree now instead of at its next recheck.
    Woken,
    /// The job wrote output.
    Output,
    /// The output is done: end-of-file (`eof`), or it broke and is read no more.
    OutputEnded { eof: bool },
    /// The direct child exited with this status (later reports are ignored).
    Exited(S),
    /// A kill was requested; `source` goes to `killed_by` if this machine carries it.
    Kill(Option<KillSource>),
    /// The answer to [`Action::LookAtTree`].
    Tree { empty: bool },
}

/// What the driver is to do, in order.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Action<S> {
    /// SIGTERM (and SIGCONT) to the tree: every member when `first`, else only the
    /// members that have not had it.
    Terminate { first: bool },
    /// SIGKILL to the tree (`cgroup.kill` in a cgroup); `first` marks the escalation,
    /// later ones reach what was forked meanwhile.
    Escalate { first: bool },
    /// Look whether the tree is empty and answer with [`Event::Tree`].
    LookAtTree,
    /// Read what is already buffered, without waiting.
    DrainNow,
    /// The session is done: conclude it with this exit and source. `eof` says whether
    /// the output reached end-of-file (else descendants may hold it).
    Finish {
        exit: Option<S>,
        killed_by: Option<KillSource>,
        eof: bool,
    },
    /// Processes survived SIGKILL through the probe.
    Survivors,
    /// The finished session's tree is empty or killed: release what holds it.
    Release,
    /// Have the tree killed as `source` by whoever carries this session's kills (given
    /// only by a machine without [`Rules::kill`]: the time limit of an in-process
    /// session, whose kill is the registry's tree kill). The kill's request comes back
    /// as [`Event::Kill`].
    RequestKill { source: KillSource },
}

/// Why the machine asked to look at the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Kill,
    Leftovers,
    Linger,
}

/// Where the session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Running,
    /// Finished; the tree is looked at again at `next_look`.
    Lingering {
        next_look: Instant,
    },
    Released,
}

/// The session machine; `S` is the driver's exit status type.
#[derive(Debug)]
pub(crate) struct Machine<S> {
    rules: Rules,
    exit: Option<S>,
    exited: bool,
    output_done: bool,
    eof: bool,
    last_activity: Instant,
    kill_requested: bool,
    killed_by: Option<KillSource>,
    /// The kill under way or done.
    killing: Option<KillCourse>,
    leftovers_looked: bool,
    asked: Option<Asked>,
    stage: Stage,
}

impl<S> Machine<S> {
    pub(crate) fn new(rules: Rules, now: Now) -> Machine<S> {
        Machine {
            rules,
            exit: None,
            exited: false,
            output_done: false,
            eof: false,
            last_activity: now.at,
            kill_requested: false,
            killed_by: None,
            killing: None,
            leftovers_looked: false,
            asked: None,
            stage: Stage::Running,
        }
    }

    /// Whether the driver should still read the job's output.
    pub(crate) fn reading(&self) -> bool {
        !self.output_done && self.stage == Stage::Running
    }

    /// Whether the direct child's exit was reported.
    pub(crate) fn exited(&self) -> bool {
        self.exited
    }

    /// Whether the session finished ([`Action::Finish`] was given).
    pub(crate) fn finished(&self) -> bool {
        self.stage != Stage::Running
    }

    /// Whether the finished session's tree was released ([`Action::Release`] was given).
    pub(crate) fn released(&self) -> bool {
        self.stage == Stage::Released
    }

    /// Takes one event at `now` and returns what to do.
    pub(crate) fn handle(&mut self, now: Now, event: Event<S>) -> Vec<Action<S>> {
        let mut actions = Vec::new();
        match event {
            Event::Tick => {}
            Event::Woken => {
                if let Some(course) = self.killing.as_mut() {
                    course.woken(now.at);
                }
                if let Stage::Lingering { .. } = self.stage {
                    self.stage = Stage::Lingering { next_look: now.at };
                }
            }
            Event::Output => self.last_activity = now.at,
            Event::OutputEnded { eof } => {
                self.output_done = true;
                self.eof = eof;
            }
            Event::Exited(status) => {
                if !self.exited {
                    self.exited = true;
                    self.exit = Some(status);
                    self.last_activity = now.at;
                    // The tree changed: a kill under way looks at it now.
                    if let Some(course) = self.killing.as_mut() {
                        course.woken(now.at);
                    }
                }
            }
            Event::Kill(source) => self.begin_kill(now, source, &mut actions),
            Event::Tree { empty } => self.looked(now, empty, &mut actions),
        }
        self.advance(now, &mut actions);
        actions
    }

    /// When the driver must call [`Machine::handle`] again (with [`Event::Tick`]) if
    /// nothing else happens first; `None` is never.
    pub(crate) fn poll_timeout(&self, now: Now) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut at = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        if let Some(look) = self.killing.and_then(|course| course.next_look()) {
            at(look);
        }
        match self.stage {
            Stage::Running => {
                if self.exited && !self.output_done && !self.kill_requested {
                    at(self.last_activity + self.rules.idle_drain);
                }
            }
            Stage::Lingering { next_look } if self.killing.is_none() => at(next_look),
            Stage::Lingering { .. } | Stage::Released => {}
        }
        if self.deadline_applies()
            && let Some(deadline) = self.rules.deadline
        {
            let left = deadline.duration_since(now.wall).unwrap_or_default();
            at(now.at + left.min(DEADLINE_RECHECK));
        }
        next
    }

    /// Whether the time limit can still fire: the child runs, or the finished session
    /// holds leftovers.
    fn deadline_applies(&self) -> bool {
        match self.stage {
            Stage::Running => !self.exited,
            Stage::Lingering { .. } => self.killing.is_none(),
            Stage::Released => false,
        }
    }

    fn begin_kill(&mut self, now: Now, source: Option<KillSource>, actions: &mut Vec<Action<S>>) {
        self.kill_requested = true;
        let Some(kill) = self.rules.kill else {
            return;
        };
        if self.killing.is_some() || self.stage == Stage::Released {
            return;
        }
        if self.killed_by.is_none() {
            self.killed_by = source;
        }
        self.killing = Some(KillCourse::start(
            now.at,
            kill.grace,
            ZeroGrace::Escalate,
            kill.recheck,
            actions,
        ));
    }

    fn looked(&mut self, now: Now, empty: bool, actions: &mut Vec<Action<S>>) {
        match self.asked.take() {
            None => {}
            Some(Asked::Kill) => {
                if let Some(course) = self.killing.as_mut() {
                    course.looked(now.at, empty, actions);
                }
            }
            Some(Asked::Leftovers) => {
                self.leftovers_looked = true;
                if !empty {
                    self.begin_kill(now, None, actions);
                }
            }
            Some(Asked::Linger) => {
                if empty {
                    self.stage = Stage::Released;
                    actions.push(Action::Release);
                } else if let Some(recheck) = self.linger_recheck() {
                    self.stage = Stage::Lingering {
                        next_look: now.at + recheck,
                    };
                }
            }
        }
    }

    fn linger_recheck(&self) -> Option<Duration> {
        self.rules.kill.map(|_| self.rules.linger_recheck)
    }

    fn kill_under_way(&self) -> bool {
        self.killing.is_some_and(|course| course.under_way())
    }

    /// Applies the rules after an event: asks to look at the tree, finishes, releases.
    fn advance(&mut self, now: Now, actions: &mut Vec<Action<S>>) {
        if self.asked.is_some() {
            return;
        }
        if self.deadline_applies()
            && let Some(deadline) = self.rules.deadline
            && now.wall >= deadline
        {
            self.rules.deadline = None;
            if self.rules.kill.is_some() {
                self.begin_kill(now, Some(KillSource::TimeLimit), actions);
            } else {
                actions.push(Action::RequestKill {
                    source: KillSource::TimeLimit,
                });
            }
        }
        if self.killing.is_some_and(|course| course.due(now.at)) {
            self.asked = Some(Asked::Kill);
            actions.push(Action::LookAtTree);
            return;
        }
        match self.stage {
            Stage::Running => self.maybe_finish(now, actions),
            Stage::Lingering { next_look } => {
                if self.killing.is_some() {
                    if !self.kill_under_way() {
                        self.stage = Stage::Released;
                        actions.push(Action::Release);
                    }
                } else if now.at >= next_look {
                    self.asked = Some(Asked::Linger);
                    actions.push(Action::LookAtTree);
                }
            }
            Stage::Released => {}
        }
    }

    /// The end-of-session rule: after the exit, once the output is done or idle, or at once
    /// after a kill.
    fn maybe_finish(&mut self, now: Now, actions: &mut Vec<Action<S>>) {
        if !self.exited || self.kill_under_way() {
            return;
        }
        if self.kill_requested {
            if !self.output_done {
                actions.push(Action::DrainNow);
            }
        } else {
            if !self.output_done && now.at < self.last_activity + self.rules.idle_drain {
                return;
            }
            if self.rules.kill_leftovers && self.rules.kill.is_some() && !self.leftovers_looked {
                self.asked = Some(Asked::Leftovers);
                actions.push(Action::LookAtTree);
                return;
            }
        }
        actions.push(Action::Finish {
            exit: self.exit.take(),
            killed_by: self.killed_by,
            eof: self.eof,
        });
        self.stage = match self.rules.kill {
            Some(_) => Stage::Lingering { next_look: now.at },
            None => Stage::Released,
        };
        if self.stage == Stage::Released {
            return;
        }
        // A finished session looks at its leftovers at once.
        self.advance(now, actions);
    }
}
