//! Job groups: a name and a parallel limit, durable in the queue store. The
//! `default` group is implicit, has no limit and cannot be changed or removed.

use std::sync::Arc;

use serde::Serialize;

use super::{DEFAULT_GROUP, Scheduler};
use crate::Registry;
use crate::error::SpawnError;

/// The smallest and largest `parallel` a group may have.
pub const PARALLEL_RANGE: std::ops::RangeInclusive<u32> = 1..=1_024;
/// The most groups a home may have (besides `default`).
pub const MAX_GROUPS: usize = 256;

/// One group as `group list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct GroupRow {
    /// Its name.
    pub name: String,
    /// Its parallel limit; `None` for `default` (no limit).
    pub parallel: Option<u32>,
    /// Jobs of the group started from the queue and running.
    pub running: usize,
    /// Jobs waiting in it.
    pub queued: usize,
}

/// Why a group operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// The name is not a valid group name.
    #[error(
        "invalid group name {name:?}: use 1 to 32 of a-z, 0-9, '_' and '-', starting with a letter or digit"
    )]
    InvalidName {
        /// What was given.
        name: String,
    },
    /// `parallel` is out of range.
    #[error("invalid --parallel {given}: give a number from 1 to 1024")]
    InvalidParallel {
        /// What was given.
        given: u64,
    },
    /// The default group cannot be changed.
    #[error(
        "the default group has no limit and cannot be changed or removed; add a group of your own (herd group add NAME --parallel N)"
    )]
    Default,
    /// `add` of a group that exists.
    #[error(
        "group {name} exists already; change its limit with herd group set {name} --parallel N"
    )]
    Exists {
        /// Its name.
        name: String,
    },
    /// A group that does not exist.
    #[error(
        "no group {name}; add it with herd group add {name} --parallel N (herd group list shows the groups)"
    )]
    Unknown {
        /// What was asked for.
        name: String,
    },
    /// Too many groups.
    #[error("{MAX_GROUPS} groups exist already; remove one first (herd group rm NAME)")]
    TooMany,
    /// `rm` of a group with queued jobs.
    #[error("group {name} has {n} queued job(s); kill them first, then remove it")]
    NotEmpty {
        /// Its name.
        name: String,
        /// Queued jobs in it.
        n: usize,
    },
    /// The store refused the change; nothing changed.
    #[error("the group could not be stored: {message}; check the home's disk and permissions")]
    Store {
        /// The store's error.
        message: String,
    },
}

/// Checks a group name's shape.
pub fn check_group_name(name: &str) -> Result<(), GroupError> {
    let ok = (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(GroupError::InvalidName {
            name: name.to_owned(),
        })
    }
}

fn check_parallel(parallel: u64) -> Result<u32, GroupError> {
    u32::try_from(parallel)
        .ok()
        .filter(|p| PARALLEL_RANGE.contains(p))
        .ok_or(GroupError::InvalidParallel { given: parallel })
}

impl Registry {
    /// Adds a group whose jobs run at most `parallel` at once (1 to 1,024).
    ///
    /// # Errors
    /// [`GroupError`]: a bad name or limit, `default`, a group that exists, too many
    /// groups, a store that refused the write.
    pub async fn group_add(&self, name: &str, parallel: u64) -> Result<GroupRow, GroupError> {
        self.inner.queue.group_put(name, parallel, false).await
    }

    /// Changes a group's limit; a higher limit starts waiting jobs at once.
    ///
    /// # Errors
    /// As [`Registry::group_add`], and [`GroupError::Unknown`].
    pub async fn group_set(&self, name: &str, parallel: u64) -> Result<GroupRow, GroupError> {
        self.inner.queue.group_put(name, parallel, true).await
    }

    /// Every group, `default` first.
    pub fn group_list(&self) -> Vec<GroupRow> {
        let st = self.inner.queue.state();
        let count = |name: &str| {
            (
                st.started.values().filter(|g| *g == name).count(),
                st.waiting.iter().filter(|e| e.record.group == name).count(),
            )
        };
        let (running, queued) = count(DEFAULT_GROUP);
        let mut rows = vec![GroupRow {
            name: DEFAULT_GROUP.to_owned(),
            parallel: None,
            running,
            queued,
        }];
        for (name, parallel) in &st.groups {
            let (running, queued) = count(name);
            rows.push(GroupRow {
                name: name.clone(),
                parallel: Some(*parallel),
                running,
                queued,
            });
        }
        rows
    }

    /// Removes a group that has no queued job (running ones finish as they are).
    ///
    /// # Errors
    /// [`GroupError::Unknown`], [`GroupError::Default`], [`GroupError::NotEmpty`],
    /// [`GroupError::Store`].
    pub async fn group_rm(&self, name: &str) -> Result<(), GroupError> {
        let inner = &self.inner;
        if name == DEFAULT_GROUP {
            return Err(GroupError::Default);
        }
        {
            let st = inner.queue.state();
            if !st.groups.contains_key(name) {
                return Err(GroupError::Unknown {
                    name: name.to_owned(),
                });
            }
            let n = st.waiting.iter().filter(|e| e.record.group == name).count();
            if n > 0 {
                return Err(GroupError::NotEmpty {
                    name: name.to_owned(),
                    n,
                });
            }
        }
        let store = Arc::clone(&inner.queue.store);
        let owned = name.to_owned();
        store_result(tokio::task::spawn_blocking(move || store.remove_group(&owned)).await)?;
        inner.queue.state().groups.remove(name);
        Ok(())
    }
}

fn store_result(
    r: Result<Result<(), herd_persistence::Error>, tokio::task::JoinError>,
) -> Result<(), GroupError> {
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(GroupError::Store {
            message: e.to_string(),
        }),
        Err(e) => Err(GroupError::Store {
            message: e.to_string(),
        }),
    }
}

impl Scheduler {
    async fn group_put(
        &self,
        name: &str,
        parallel: u64,
        set: bool,
    ) -> Result<GroupRow, GroupError> {
        if name == DEFAULT_GROUP {
            return Err(GroupError::Default);
        }
        check_group_name(name)?;
        let parallel = check_parallel(parallel)?;
        {
            let st = self.state();
            let exists = st.groups.contains_key(name);
            if set && !exists {
                return Err(GroupError::Unknown {
                    name: name.to_owned(),
                });
            }
            if !set && exists {
                return Err(GroupError::Exists {
                    name: name.to_owned(),
                });
            }
            if !exists && st.groups.len() >= MAX_GROUPS {
                return Err(GroupError::TooMany);
            }
        }
        let store = Arc::clone(&self.store);
        let owned = name.to_owned();
        store_result(tokio::task::spawn_blocking(move || store.put_group(&owned, parallel)).await)?;
        self.state().groups.insert(name.to_owned(), parallel);
        self.wake();
        Ok(GroupRow {
            name: name.to_owned(),
            parallel: Some(parallel),
            running: 0,
            queued: 0,
        })
    }
}

impl super::Scheduler {
    /// Refuses a job for a group that does not exist.
    pub(super) fn check_group_known(&self, group: &str) -> Result<(), SpawnError> {
        if group == DEFAULT_GROUP || self.state().groups.contains_key(group) {
            return Ok(());
        }
        let message = match check_group_name(group) {
            Err(e) => e.to_string(),
            Ok(()) => GroupError::Unknown {
                name: group.to_owned(),
            }
            .to_string(),
        };
        Err(SpawnError::InvalidRequest {
            field: "group",
            message,
        })
    }
}
