//! Parent and child agents: handing a running session to the parent, and the
//! accounting when a child finishes.
//!
//! A host that delegates work to a child agent registers the child with
//! [`Registry::register_child`], naming the parent's identity. From then on the
//! child's spawns get no wake-ups (a completion would arrive after the child is gone;
//! see `notify::CHILD_NOTIFY_NOTE`), and the child may hand up to
//! [`MAX_HANDOFFS_PER_CHILD`] running sessions to its parent with a purpose sentence.
//! [`Registry::finish_child`] ends the child: it kills what the child still runs
//! (as [`KillSource::AgentClose`], so `persist_on_release` sessions are spared) and lists
//! what was handed off, what was killed and which results nobody read.
//!
//! Invariant: a handoff flips `owner_task_id`, `task_id` and the session key together
//! under the table lock, and only while the session is in the running table. The choke
//! point reads the owner under the same lock, so the completion goes to exactly one
//! owner: the child before the flip, the parent (with `handoff_note`) after.

use std::collections::HashMap;
use std::sync::Arc;

use crate::lock_order::{Mutex, rank};

use herd_hooks::{Route, Shown};
use serde::Serialize;

use super::Inner;
use crate::answers::{CompletionReason, KillStatus};
use crate::error::LookupError;
use crate::foreground::Adoption;
use crate::session::Session;
use crate::{KillSource, Registry, SessionId};

/// Sessions one child may hand to its parent.
pub const MAX_HANDOFFS_PER_CHILD: usize = 3;

/// Who an agent is, as the registry records ownership.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentIdentity {
    /// The turn or agent id sessions are owned by.
    pub owner_task_id: String,
    /// The container key its sessions run under.
    pub task_id: String,
    /// The host's session key, if any.
    pub session_key: Option<String>,
}

/// A handoff was refused. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandoffError {
    /// The caller is not a registered child agent.
    #[error(
        "handoff is only available to a running child agent with a live parent; {agent} is not one"
    )]
    NotAChild {
        /// The caller.
        agent: String,
    },
    /// The target is not the caller's parent.
    #[error("{to} is not the parent of {child}; a child hands off to its own parent only")]
    NotTheParent {
        /// The caller.
        child: String,
        /// The target asked for.
        to: String,
    },
    /// The child used up its handoffs.
    #[error(
        "handoff cap reached ({MAX_HANDOFFS_PER_CHILD} per child agent); wait on or kill the rest yourself"
    )]
    CapReached {
        /// The caller.
        child: String,
    },
    /// No purpose was given.
    #[error(
        "handoff needs a purpose: one sentence saying what the process is for and what the parent should do with its result"
    )]
    MissingPurpose,
    /// The session has exited, or another agent owns it.
    #[error(
        "cannot hand off {id}: not a running process you own (already exited? read its result with poll or log and report it instead)"
    )]
    NotRunningOwned {
        /// The session.
        id: SessionId,
    },
    /// The id did not resolve.
    #[error(transparent)]
    Lookup(#[from] LookupError),
}

/// The answer to a successful handoff.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct HandoffAnswer {
    /// Always `"handed_off"`.
    pub status: &'static str,
    /// The session.
    pub session_id: SessionId,
    /// Its command line (secrets masked).
    pub command: Shown,
    /// What the child should know.
    pub note: String,
}

/// A session a child handed to its parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct HandedOff {
    /// The session.
    pub session_id: SessionId,
    /// Its command line (secrets masked).
    pub command: Shown,
    /// The child's purpose sentence.
    pub purpose: String,
}

/// A session the child still ran when it finished; it was killed.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct OrphanKill {
    /// The session.
    pub session_id: SessionId,
    /// Its command line (secrets masked).
    pub command: Shown,
    /// What the kill did.
    pub status: KillStatus,
}

/// A result of the child's that nobody read (no wait, poll, log or kill saw it exit).
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct UnreadCompletion {
    /// The session.
    pub session_id: SessionId,
    /// Its command line (secrets masked).
    pub command: Shown,
    /// The exit code, if it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Why it finished.
    pub completion_reason: Option<CompletionReason>,
    /// The output tail, through the output pipeline.
    pub output: Shown,
    /// Earlier output is only in the log.
    pub output_cut: bool,
}

/// What a child left behind, for the parent's view.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ChildTeardown {
    /// The child.
    pub child: String,
    /// Sessions handed to the parent.
    pub handed_off: Vec<HandedOff>,
    /// Sessions still running at teardown, killed as `agent_close`.
    pub orphaned: Vec<OrphanKill>,
    /// Finished sessions whose result nobody read.
    pub unread_completions: Vec<UnreadCompletion>,
}

/// The agents room: the registered children behind the agents lock (taken after
/// the table lock, never before it), entered through one-step calls.
#[derive(Debug, Default)]
pub(crate) struct Agents {
    children: Mutex<HashMap<String, Child>, { rank::AGENTS }>,
}

#[derive(Debug)]
struct Child {
    parent: AgentIdentity,
    handed_off: Vec<HandedOff>,
    /// A subagent whose own wake-ups are not delivered; `false` for an owner
    /// that only hands sessions over (a person at the CLI).
    is_subagent: bool,
}

impl Agents {
    /// Whether `owner` is a registered child agent (a subagent).
    pub(crate) fn is_child(&self, owner: &str) -> bool {
        self.children
            .acquire()
            .get(owner)
            .is_some_and(|c| c.is_subagent)
    }

    /// Registers `child_owner` under `parent`; registering again replaces the
    /// parent, keeps the handoffs, and keeps a subagent one.
    fn register(&self, child_owner: &str, parent: AgentIdentity, is_subagent: bool) {
        let mut children = self.children.acquire();
        match children.get_mut(child_owner) {
            Some(child) => {
                child.parent = parent;
                child.is_subagent |= is_subagent;
            }
            None => {
                children.insert(
                    child_owner.to_owned(),
                    Child {
                        parent,
                        handed_off: Vec::new(),
                        is_subagent,
                    },
                );
            }
        }
    }

    /// The parent `from_child` may hand a session to, when that is `to_parent`.
    fn parent_of(&self, from_child: &str, to_parent: &str) -> Result<AgentIdentity, HandoffError> {
        let children = self.children.acquire();
        let child = children
            .get(from_child)
            .ok_or_else(|| HandoffError::NotAChild {
                agent: from_child.to_owned(),
            })?;
        if child.parent.owner_task_id != to_parent {
            return Err(HandoffError::NotTheParent {
                child: from_child.to_owned(),
                to: to_parent.to_owned(),
            });
        }
        Ok(child.parent.clone())
    }

    /// Records one handoff of `from_child`'s, when it is still a child under its
    /// cap: `hand` moves the session (under the agents lock, so two handoffs of
    /// one child never pass the cap together) and says what was handed.
    fn hand_off(
        &self,
        from_child: &str,
        hand: impl FnOnce() -> Result<HandedOff, HandoffError>,
    ) -> Result<HandedOff, HandoffError> {
        let mut children = self.children.acquire();
        let child = children
            .get_mut(from_child)
            .ok_or_else(|| HandoffError::NotAChild {
                agent: from_child.to_owned(),
            })?;
        if child.handed_off.len() >= MAX_HANDOFFS_PER_CHILD {
            return Err(HandoffError::CapReached {
                child: from_child.to_owned(),
            });
        }
        let handed = hand()?;
        child.handed_off.push(handed.clone());
        Ok(handed)
    }

    /// Forgets `child_owner`; what it had handed off.
    fn remove(&self, child_owner: &str) -> Vec<HandedOff> {
        self.children
            .acquire()
            .remove(child_owner)
            .map(|c| c.handed_off)
            .unwrap_or_default()
    }
}

impl Inner {
    /// Turns notify on for `s` under the table lock, and only while it is in the
    /// running table: either its completion will be queued, or it has finished and
    /// the caller reads the exit itself. Never neither, never both.
    pub(crate) fn adopt_foreground(self: &Arc<Self>, s: &Session) -> Adoption {
        let adopted = self.table.while_running(&s.id, |_, _| {
            // The owner is read first: the agents lock ranks before a session's state.
            let owner = s.state().owner_task_id.clone();
            if self.agents.is_child(&owner) {
                return Adoption::ChildNotNotified;
            }
            s.set_notify(true);
            Adoption::Notified
        });
        let Some(adopted) = adopted else {
            return Adoption::Finished;
        };
        if adopted == Adoption::Notified {
            // The stored row says notify too, so a restore keeps the completion (B27).
            self.request_checkpoint();
        }
        adopted
    }
}

impl Registry {
    /// Registers `child_owner` as a child agent of `parent`. Registering
    /// again replaces the parent and keeps the handoff count.
    pub fn register_child(&self, child_owner: &str, parent: AgentIdentity) {
        self.inner.agents.register(child_owner, parent, true);
    }

    /// Lets `owner` hand sessions to `to` under the same rules as a child (the cap,
    /// running sessions it owns, a purpose), without making it a subagent: its own
    /// later `notify`, watch and heartbeat spawns still wake it. This is what a person
    /// handing a job to another owner through the CLI is.
    pub fn register_handoff_source(&self, owner: &str, to: AgentIdentity) {
        self.inner.agents.register(owner, to, false);
    }

    /// Hands the running session `id` from child `from_child` to its parent
    /// `to_parent`, with `purpose` riding the completion as `handoff_note`.
    ///
    /// # Errors
    /// [`HandoffError::NotAChild`], [`HandoffError::NotTheParent`],
    /// [`HandoffError::MissingPurpose`], [`HandoffError::Lookup`],
    /// [`HandoffError::CapReached`] after three handoffs, and
    /// [`HandoffError::NotRunningOwned`] for an exited or foreign session.
    pub fn handoff(
        &self,
        id: &str,
        from_child: &str,
        to_parent: &str,
        purpose: &str,
    ) -> Result<HandoffAnswer, HandoffError> {
        let parent = self.inner.agents.parent_of(from_child, to_parent)?;
        let purpose = purpose.trim();
        if purpose.is_empty() {
            return Err(HandoffError::MissingPurpose);
        }
        let s = self.inner.lookup(id)?;
        let handed = self.inner.table.as_running(&s.id, |runs| {
            self.inner.agents.hand_off(from_child, || {
                let not_owned = || HandoffError::NotRunningOwned { id: s.id.clone() };
                if !runs {
                    return Err(not_owned());
                }
                {
                    let mut st = s.state();
                    if st.owner_task_id != from_child {
                        return Err(not_owned());
                    }
                    st.owner_task_id = parent.owner_task_id.clone();
                    st.task_id = parent.task_id.clone();
                    st.session_key = parent.session_key.clone();
                    st.handoff_note = Some(purpose.to_owned());
                }
                s.set_notify(true);
                Ok(HandedOff {
                    session_id: s.id.clone(),
                    command: self.inner.shown_command(&s),
                    purpose: purpose.to_owned(),
                })
            })
        })?;
        self.inner.changed();
        // The new owners are checkpointed, so a restore keeps the handoff (B27).
        self.inner.request_checkpoint();
        tracing::info!(session_id = %s.id, "session handed off to the parent agent");
        Ok(HandoffAnswer {
            status: "handed_off",
            session_id: s.id.clone(),
            command: handed.command,
            note: "Your parent now owns this process and will receive its completion; you will not. Mention the handoff in your final answer."
                .to_owned(),
        })
    }

    /// Ends child agent `child_owner`: kills the sessions it still runs as
    /// [`KillSource::AgentClose`] (persistent ones are spared and stay its own), drops
    /// its queued events, and reports handoffs, kills and unread results.
    pub async fn finish_child(&self, child_owner: &str) -> ChildTeardown {
        let handed_off = self.inner.agents.remove(child_owner);
        let (dropped, running, finished): (
            Vec<crate::Event>,
            Vec<Arc<Session>>,
            Vec<Arc<Session>>,
        ) = self
            .inner
            .table
            .release_owner(child_owner, |s| !s.persist_on_release);
        // The child is gone and its queue with it: marked delivered (outside the
        // table lock), or a restart would replay its completions to nobody.
        self.inner.mark_delivered(&dropped);
        let mut orphaned = Vec::new();
        for s in running {
            let answer = self.inner.kill_session(&s, KillSource::AgentClose).await;
            orphaned.push(OrphanKill {
                session_id: s.id.clone(),
                command: self.inner.shown_command(&s),
                status: answer.status,
            });
        }
        // Their output goes through the completion hooks, which may be slow: on
        // the blocking pool, never on a runtime worker.
        let inner = Arc::clone(&self.inner);
        let mut unread_completions = match tokio::task::spawn_blocking(move || {
            unread_completions(&inner, &finished)
        })
        .await
        {
            Ok(unread) => unread,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(error) => {
                tracing::warn!(%error, "unread completions not gathered: the runtime is shutting down");
                Vec::new()
            }
        };
        unread_completions.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        orphaned.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        ChildTeardown {
            child: child_owner.to_owned(),
            handed_off,
            orphaned,
            unread_completions,
        }
    }
}

/// The completions of `finished` nobody read yet, as they leave by the
/// completion route (marked read). Blocking: the completion hooks run.
fn unread_completions(inner: &Inner, finished: &[Arc<Session>]) -> Vec<UnreadCompletion> {
    finished
        .iter()
        .filter(|s| !s.is_read())
        .map(|s| {
            let sized = inner.sized(s, Route::Completion);
            s.mark_read();
            UnreadCompletion {
                session_id: s.id.clone(),
                command: inner.shown_command(s),
                exit_code: sized.exit.and_then(|e| e.code),
                signal: sized.exit.and_then(|e| e.signal),
                completion_reason: sized.reason,
                output: sized.output,
                output_cut: sized.cut,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
