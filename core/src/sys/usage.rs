//! CPU and memory of a session's whole tree as its cgroups count them:
//! v2 `cpu.stat` `usage_usec` (present without any controller), v2
//! `memory.current` where the memory controller is enabled, else the v1 memory
//! cgroup a session with limits has on a hybrid host
//! (`<v1 mount>/<own cgroup>/herd-<uid>/<id>`, as `limits` makes it).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crate::answers::TreeUsage;
use crate::lock_order::{Mutex, rank};

/// The usage of session `name` whose v2 cgroup is `v2`; `None` when no file says
/// anything.
pub(crate) fn tree_usage(v2: Option<&Path>, v1: &V1Base, name: &str) -> Option<TreeUsage> {
    let cpu_usec = v2.and_then(|dir| {
        let text = fs::read_to_string(dir.join("cpu.stat")).ok()?;
        text.lines().find_map(|line| {
            line.strip_prefix("usage_usec ")
                .and_then(|n| n.trim().parse().ok())
        })
    });
    let memory_bytes = v2
        .and_then(|dir| read_number(&dir.join("memory.current")))
        .or_else(|| read_number(&v1.get()?.join(name).join("memory.usage_in_bytes")));
    (cpu_usec.is_some() || memory_bytes.is_some()).then_some(TreeUsage {
        cpu_usec,
        memory_bytes,
    })
}

/// How long the v1 memory directory found is used before it is looked up again.
const V1_BASE_TTL: Duration = Duration::from_secs(10);

/// When the v1 memory directory was looked up, and what was found.
type Found = (Instant, Option<PathBuf>);

/// The v1 memory cgroup directory of this uid's sessions
/// (`<v1 mount>/<own cgroup>/herd-<uid>`), looked up at most every
/// [`V1_BASE_TTL`]: a list of thousands of sessions must not parse
/// `/proc/self/mountinfo` once per row (it was most of `ps`'s cost). A registry
/// holds one.
#[derive(Debug, Default)]
pub(crate) struct V1Base {
    cache: Mutex<Option<Found>, { rank::USAGE_V1_BASE }>,
}

impl V1Base {
    /// The directory, from the cache while it is fresh.
    fn get(&self) -> Option<PathBuf> {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, base)) = cache.as_ref()
            && at.elapsed() < V1_BASE_TTL
        {
            return base.clone();
        }
        let uid = nix::unistd::getuid().as_raw();
        let base = super::limits::v1_hierarchy("memory").map(|(mount, own)| {
            mount
                .join(own.trim_start_matches('/'))
                .join(format!("herd-{uid}"))
        });
        *cache = Some((Instant::now(), base.clone()));
        base
    }
}

fn read_number(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// How old a usage sample a `list` row shows may be: a list within this long of
/// the last read of a session's usage shows that sample instead of reading its
/// cgroup files again (with 10,000 sessions that is 20,000 file reads a list).
/// `poll` always reads afresh.
pub(crate) const LIST_USAGE_MAX_AGE: Duration = Duration::from_secs(1);

/// A session's usage source, kept once, and its last sample: what `list` needs so
/// that a row costs no read of the shim's info record and at most two cgroup
/// files a [`LIST_USAGE_MAX_AGE`]. A session holds one.
#[derive(Debug, Default)]
pub(crate) struct UsageCache {
    /// The session's v2 cgroup, from its shim's info record (set once it was read).
    cgroup: OnceLock<PathBuf>,
    /// When the last sample was read, and what it said.
    sample: Mutex<Option<(Instant, Option<TreeUsage>)>, { rank::USAGE_SAMPLE }>,
}

impl UsageCache {
    /// The session's v2 cgroup: `read` (the shim's info record) the first time it
    /// names one, the kept path after. A miss is not kept (the next call reads again).
    pub(crate) fn cgroup(&self, read: impl FnOnce() -> Option<PathBuf>) -> Option<&Path> {
        if let Some(path) = self.cgroup.get() {
            return Some(path);
        }
        let path = read()?;
        Some(self.cgroup.get_or_init(|| path))
    }

    /// The last sample while it is at most `max_age` old, else `read` afresh (and
    /// kept). A zero `max_age` always reads.
    pub(crate) fn sampled(
        &self,
        max_age: Duration,
        read: impl FnOnce() -> Option<TreeUsage>,
    ) -> Option<TreeUsage> {
        if !max_age.is_zero() {
            let sample = self.sample.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((at, usage)) = *sample
                && at.elapsed() <= max_age
            {
                return usage;
            }
        }
        let usage = read();
        *self.sample.lock().unwrap_or_else(PoisonError::into_inner) = Some((Instant::now(), usage));
        usage
    }
}
