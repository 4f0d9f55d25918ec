//! What holds a job's tree: the session's own cgroup, or, where none can
//! be had, the shim itself as child subreaper.
//!
//! In a cgroup the tree is exactly the cgroup's members: `setsid`, double forks, a
//! cleared environment and new process groups do not change membership, and an
//! unprivileged job cannot leave it. Under the subreaper fallback the tree is every
//! descendant of the shim by parentage (an orphan is re-parented to the shim, so no
//! process of the job can leave the shim's subtree), plus processes carrying the
//! session's tag (`HERD_SESSION`) as today's tree kill finds them.
//!
//! Invariant: the shim itself is never a member (it stays outside the cgroup, and a
//! walk of its descendants starts below it), so no kill of the tree reaches it.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use herd_persistence::Leftover;
use nix::sys::signal::Signal;

use crate::shim::Spec;
use crate::sys::cgroup::{Placement, SessionCgroup};
use crate::sys::{self, ProcHandle};

/// The tree's holder.
#[derive(Debug)]
pub(super) enum Hold {
    /// The session's cgroup.
    Cgroup(SessionCgroup),
    /// The shim as subreaper; the text says why no cgroup.
    Subreaper(String),
}

impl Hold {
    /// Makes the session's cgroup, or says why the subreaper holds the tree.
    /// `found` is the placement found before the spec came; a cgroup it does not
    /// let make is tried once more where the placement says now.
    pub(super) fn make(spec: &Spec, found: Option<Placement>) -> Hold {
        if spec.force_subreaper {
            return Hold::Subreaper("forced by HERD_CONTAINMENT=subreaper".to_owned());
        }
        if let Some(Placement::Cgroup { mount, parent }) = &found
            && let Ok(cgroup) = SessionCgroup::create(mount, parent, &spec.session_id)
        {
            return Hold::Cgroup(cgroup.with_freeze_kill(spec.force_freeze));
        }
        match crate::sys::cgroup::placement() {
            Placement::Cgroup { mount, parent } => {
                match SessionCgroup::create(&mount, &parent, &spec.session_id) {
                    Ok(cgroup) => Hold::Cgroup(cgroup.with_freeze_kill(spec.force_freeze)),
                    Err(error) => Hold::Subreaper(format!(
                        "the session cgroup could not be made under {}: {error}",
                        parent.display()
                    )),
                }
            }
            Placement::Subreaper(why) => Hold::Subreaper(why),
        }
    }

    /// The cgroup, when there is one.
    pub(super) fn cgroup(&self) -> Option<&SessionCgroup> {
        match self {
            Hold::Cgroup(cgroup) => Some(cgroup),
            Hold::Subreaper(_) => None,
        }
    }

    /// The cgroup's path for the info record.
    pub(super) fn cgroup_path(&self) -> Option<PathBuf> {
        self.cgroup().map(|c| c.path().to_path_buf())
    }

    /// Whether no process of the tree is alive.
    pub(super) fn is_empty(&self, tag: &str, floor: u64) -> bool {
        match self {
            Hold::Cgroup(cgroup) => cgroup.populated() != Some(true),
            Hold::Subreaper(_) => members(tag, floor, false).is_empty(),
        }
    }

    /// The processes of the tree alive now, with their start times.
    pub(super) fn members(&self, tag: &str, floor: u64, with_tags: bool) -> Vec<(i32, u64)> {
        match self {
            Hold::Cgroup(cgroup) => cgroup
                .pids()
                .into_iter()
                .filter_map(|pid| sys::proc_info(pid).filter(sys::ProcInfo::is_alive))
                .map(|row| (row.pid, row.start_time))
                .collect(),
            Hold::Subreaper(_) => members(tag, floor, with_tags),
        }
    }

    /// What is alive of the tree, as the exit record lists it. Without the tag scan
    /// (which reads every environment of the uid): under the subreaper every process
    /// of the tree is a descendant of the shim.
    pub(super) fn leftovers(&self, tag: &str, floor: u64) -> Vec<Leftover> {
        // An empty cgroup (the usual end) has no members to walk for.
        if let Hold::Cgroup(cgroup) = self
            && cgroup.populated() == Some(false)
        {
            return Vec::new();
        }
        self.members(tag, floor, false)
            .into_iter()
            .map(|(pid, _)| Leftover {
                pid,
                command: sys::cmdline(pid),
            })
            .collect()
    }

    /// SIGTERM (then SIGCONT, so a stopped process acts on it) to every member that
    /// has not had it yet; `sent` remembers who had.
    pub(super) fn terminate(
        &self,
        tag: &str,
        floor: u64,
        with_tags: bool,
        sent: &mut HashSet<(i32, u64)>,
    ) {
        for (pid, start) in self.members(tag, floor, with_tags) {
            if !sent.insert((pid, start)) {
                continue;
            }
            // The handle pins (pid, start time): a pid reused since the listing is
            // not this member and is not signalled.
            if let Ok(handle) = ProcHandle::open(pid, start, true)
                && handle.signal(Signal::SIGTERM).is_ok()
            {
                let _ = handle.signal(Signal::SIGCONT);
            }
        }
    }

    /// SIGKILL to the whole tree: `cgroup.kill` (or freeze and SIGKILL), or each
    /// member found by parentage and tag.
    pub(super) fn kill(&self, tag: &str, floor: u64, with_tags: bool) {
        match self {
            Hold::Cgroup(cgroup) => {
                if let Err(error) = cgroup.kill() {
                    tracing::warn!(%error, "the session cgroup could not be killed; killing its members one by one");
                    cgroup.signal_members(Signal::SIGKILL);
                }
            }
            Hold::Subreaper(_) => {
                for (pid, start) in members(tag, floor, with_tags) {
                    if let Ok(handle) = ProcHandle::open(pid, start, true) {
                        let _ = handle.signal(Signal::SIGKILL);
                    }
                }
            }
        }
    }
}

/// The shim's live descendants by parentage, plus (with `with_tags`) live processes
/// of this uid started no earlier than `floor` whose environment carries `tag`.
fn members(tag: &str, floor: u64, with_tags: bool) -> Vec<(i32, u64)> {
    let own = sys::own_pid();
    let table = sys::process_table();
    let mut children: HashMap<i32, Vec<usize>> = HashMap::new();
    for (idx, row) in table.iter().enumerate() {
        children.entry(row.ppid).or_default().push(idx);
    }
    let mut found: HashSet<i32> = HashSet::new();
    let mut out = Vec::new();
    let mut queue = vec![own];
    while let Some(pid) = queue.pop() {
        for &idx in children.get(&pid).map_or(&[][..], Vec::as_slice) {
            let row = &table[idx];
            if row.pid > 1 && found.insert(row.pid) {
                queue.push(row.pid);
                if row.is_alive() {
                    out.push((row.pid, row.start_time));
                }
            }
        }
    }
    if with_tags && !tag.is_empty() {
        let uid = sys::current_uid();
        for row in &table {
            if row.pid <= 1
                || row.pid == own
                || row.start_time < floor
                || !row.is_alive()
                || found.contains(&row.pid)
            {
                continue;
            }
            if sys::owner_uid(row.pid) == Some(uid)
                && sys::environ_value(row.pid, crate::kill::SESSION_TAG_ENV).as_deref() == Some(tag)
            {
                found.insert(row.pid);
                out.push((row.pid, row.start_time));
            }
        }
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::time::Duration;

    use herd_persistence::ShimDir;

    use super::Hold;
    use crate::sys::cgroup::Placement;

    fn spec(session_id: &str, dir: &tempfile::TempDir) -> crate::shim::Spec {
        crate::shim::link::spec(
            session_id,
            &ShimDir::at(dir.path().to_path_buf()),
            vec!["true".to_owned()],
            &BTreeMap::new(),
            dir.path().to_path_buf(),
            None,
            dir.path().join("log"),
            1 << 20,
            Duration::from_millis(10),
        )
    }

    fn kind(hold: &Hold) -> &'static str {
        match hold {
            Hold::Cgroup(cgroup) => {
                let _ = cgroup.remove();
                "cgroup"
            }
            Hold::Subreaper(_) => "subreaper",
        }
    }

    #[test]
    fn a_placement_found_earlier_that_no_longer_holds_is_looked_up_again() {
        let dir = tempfile::tempdir().expect("temp dir");
        // Names of this process only: cgroups are the machine's, not the test's.
        let name = |what: &str| format!("hold_{what}_{}", std::process::id());
        let now = kind(&Hold::make(&spec(&name("fresh"), &dir), None));
        // A parent that is gone since the launcher looked: the session's cgroup goes
        // where a look now says, as without the earlier look.
        let gone = dir.path().join("no-cgroup-mount");
        let stale = Placement::Cgroup {
            mount: gone.clone(),
            parent: gone.join("herd-0"),
        };
        let again = kind(&Hold::make(&spec(&name("stale"), &dir), Some(stale)));
        assert_eq!(again, now);
        // A placement that still holds is used as found.
        if let Placement::Cgroup { mount, parent } = crate::sys::cgroup::placement() {
            let found = Placement::Cgroup {
                mount,
                parent: parent.clone(),
            };
            let hold = Hold::make(&spec(&name("found"), &dir), Some(found));
            let under: Option<PathBuf> = hold.cgroup_path();
            assert_eq!(under, Some(parent.join(name("found"))));
            kind(&hold);
        }
    }
}
