//! Tree kill: end a session's whole process tree, and never signal a stranger.
//!
//! [`kill_tree`] ends one session; [`kill_trees`] ends several in one sweep
//! (kill-all, host shutdown) and shares every read of the process table between
//! them. These are the entry points the registry calls. A session's tree is
//! everything that is provably ours:
//!
//! - the leader (the shell we spawned), if its start time still matches the one
//!   recorded at spawn;
//! - the members of its process group, while the group id is provably ours (the
//!   verified leader, a tagged process or an already discovered member is in it);
//! - every process of our uid whose environment carries
//!   `HERD_SESSION=<session id>` ([`SESSION_TAG_ENV`]): this finds daemons that
//!   double-forked and called `setsid`, which were reparented to init and left both
//!   the group and the parent links behind;
//! - every descendant of the above, found by walking parent links in the process
//!   table (this finds `setsid` children that scrubbed their environment, as long as
//!   their parent is still alive);
//! - groups that a discovered member created itself (`pgrp` equal to a member's pid).
//!
//! The sequence is SIGTERM (each followed by SIGCONT, so a stopped process can act
//! on it) to all of it, then the grace window, during which the table is rescanned
//! and anything new is sent SIGTERM too; the wait ends early as
//! soon as the tree is empty (not when the leader exits: a leader that honours
//! SIGTERM while its children ignore it must not cancel their SIGKILL). When the
//! grace runs out the table is scanned once more *before* any SIGKILL, while the
//! shell is still alive and its children still hang below it, and everything alive
//! gets SIGKILL. SIGKILL is asynchronous, so the tree is then re-probed for up to
//! [`SURVIVOR_PROBE`]; whatever is still alive after that is a survivor.
//!
//! The course itself (when to look, when to escalate, when what is left survived) is
//! the session machine's `KillCourse`, which the shims' own kills follow too; this
//! module carries it out over the process table and pidfds.
//!
//! Invariant: nothing is signalled that is not in the tree as defined above; this
//! process, its process group and its children (other sessions) never are, even
//! for a corrupt record that names them.
//!
//! Invariant: a single pid is only ever signalled through a `sys::ProcHandle`,
//! which pins the (pid, start time) pair seen when the process was discovered, so a
//! pid that was reused meanwhile is never signalled. A process group is only
//! signalled while the scan that preceded the signal proved the group is ours.
//!
//! Waiting is event driven where the kernel allows it: every member's pidfd (up to
//! [`MAX_PIDFDS`] per kill) is registered with the tokio reactor and an exit wakes
//! the wait at once. The table
//! is also rescanned every [`RESCAN_INTERVAL`] to notice processes started during
//! the grace window. A zombie counts as gone: it is dead, and its parent (for the
//! leader, the registry's child handle) reaps it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::time::Instant;
use tracing::debug;

use crate::machine::{Action, KillCourse, ZeroGrace};
use crate::sys::{self, OpenError, ProcHandle, ProcInfo};

#[cfg(test)]
mod tests;

/// Name of the environment variable every session child carries, valued with the
/// session id, so that kill can find processes that left the tree.
pub(crate) const SESSION_TAG_ENV: &str = "HERD_SESSION";

/// Start time of `pid` (`/proc/<pid>/stat` field 22), to record at spawn as
/// [`KillTarget::start_time`].
#[cfg(feature = "bench-support")]
pub(crate) use crate::sys::start_time;

/// SIGKILLs process group `pgid` at once, without grace, probing or identity
/// checks: only for a child the caller has just spawned and still holds unreaped
/// (for example when setting up its pipes failed), whose group is certainly ours.
/// Refuses this process's own group. Failures are logged at debug level only: the
/// caller reaps the child either way.
#[allow(
    dead_code,
    reason = "called by the registry's spawn path (branch core)"
)]
pub(crate) fn kill_group_now(pgid: i32) {
    if let Err(errno) = sys::signal_group(pgid, Signal::SIGKILL) {
        debug!(pgid, %errno, "immediate group kill not delivered");
    }
}

/// How long after SIGKILL the tree is re-probed before anything counts as a
/// survivor.
pub(crate) const SURVIVOR_PROBE: Duration = crate::machine::SURVIVOR_PROBE;

/// How often the process table is rescanned while waiting, to find processes that
/// were started after the previous scan. Exits of known members wake the wait
/// immediately through their pidfds and do not depend on this interval, and the
/// scan right before SIGKILL finds every latecomer anyway, so the interval only
/// decides how soon a latecomer gets its courtesy SIGTERM. It is kept long because
/// a kill-all of many sessions runs one such loop per session.
const RESCAN_INTERVAL: Duration = Duration::from_millis(100);

/// Most pidfds one kill holds at once. Each member of a tree gets one (it pins the
/// identity and reports the exit), so a kill-all of many sessions could otherwise
/// exhaust the daemon's descriptors; members beyond this fall back to a start-time
/// check before each signal and to the rescan interval for their exit.
const MAX_PIDFDS: usize = 256;

/// What to kill: one session's process tree as the registry recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KillTarget {
    /// Pid of the session's direct child (the shell).
    pub pid: i32,
    /// Process group of the session (equal to `pid`: spawn starts a new group).
    pub pgid: i32,
    /// Start time of `pid` recorded at spawn (`sys::start_time`); `None` means the
    /// caller vouches for `pid` itself (for example it still holds the unreaped child).
    pub start_time: Option<u64>,
    /// Value of [`SESSION_TAG_ENV`] in the session's children (the session id).
    /// An empty tag disables the escapee scan.
    pub session_tag: String,
}

/// What a kill achieved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KillOutcome {
    /// The whole tree (group, descendants, tagged escapees) is gone; zombies count
    /// as gone.
    pub gone: bool,
    /// Pids still alive at the end (after SIGKILL, or SIGTERM alone for a zero
    /// grace, and the re-probe), ascending; empty when `gone`.
    pub survivors: Vec<i32>,
    /// Number of SIGTERM and SIGKILL deliveries (a group signal counts once; the
    /// SIGCONT that follows each SIGTERM is not counted).
    pub signalled: usize,
    /// The recorded start time of `pid` did not match: the pid now belongs to a
    /// stranger, and neither it nor the group with its id was signalled. Tagged
    /// escapees of the session were still swept.
    pub identity_mismatch: bool,
}

/// Kills the process tree of `target` and reports whether anything survived.
///
/// SIGTERM goes to the whole tree first. With `grace` zero, nothing stronger is sent:
/// the tree is then given [`SURVIVOR_PROBE`] to exit and whatever ignored SIGTERM is
/// reported as a survivor. Otherwise the tree gets up to `grace` to exit, then
/// SIGKILL, then [`SURVIVOR_PROBE`].
///
/// # Caveats
/// A process that left the tree *and* scrubbed `HERD_SESSION` from its environment
/// *and* lost its parent link before the kill started is not found. Reads of `/proc`
/// run inline on the calling task: they touch kernel memory only.
pub(crate) async fn kill_tree(target: &KillTarget, grace: Duration) -> KillOutcome {
    kill_tree_probed(target, grace, ProcInfo::is_alive).await
}

/// Kills the process trees of several sessions together (kill-all, host shutdown).
///
/// Same sequence and guarantees as [`kill_tree`] for every target, with one grace
/// window for all. The process table is read once per step for all trees, and each
/// candidate's environment is read once for all session tags, so ending many
/// sessions costs about as much as ending one large one. Outcomes come in the
/// order of `targets`.
pub(crate) async fn kill_trees(targets: &[KillTarget], grace: Duration) -> Vec<KillOutcome> {
    kill_trees_probed(targets, grace, ProcInfo::is_alive).await
}

/// [`kill_tree`] with the liveness test as a parameter.
///
/// This is the seam for the survivor path: no process on a test machine survives
/// SIGKILL (uninterruptible sleep cannot be produced on demand), so the test passes
/// a probe that keeps counting one real, killed process as alive.
pub(crate) async fn kill_tree_probed<P>(
    target: &KillTarget,
    grace: Duration,
    is_alive: P,
) -> KillOutcome
where
    P: Fn(&ProcInfo) -> bool + Sync,
{
    kill_trees_probed(std::slice::from_ref(target), grace, is_alive)
        .await
        .pop()
        .expect("kill_trees_probed returns one outcome per target")
}

/// [`kill_trees`] with the liveness test as a parameter (see [`kill_tree_probed`]).
pub(crate) async fn kill_trees_probed<P>(
    targets: &[KillTarget],
    grace: Duration,
    is_alive: P,
) -> Vec<KillOutcome>
where
    P: Fn(&ProcInfo) -> bool + Sync,
{
    kill_trees_limited(targets, grace, is_alive, MAX_PIDFDS, read_tag).await
}

/// Reads a process's session tag from its environment.
fn read_tag(pid: i32) -> sys::EnvRead {
    sys::environ_read(pid, SESSION_TAG_ENV)
}

/// The sweep itself, with the pidfd budget as a parameter (a test passes 0 to run
/// the path a kernel without pidfds, or a spent budget, takes) and the tag reader
/// (a test makes a read come back empty, as one does between the halves of an
/// exec).
async fn kill_trees_limited<P, R>(
    targets: &[KillTarget],
    grace: Duration,
    is_alive: P,
    max_pidfds: usize,
    read_tag: R,
) -> Vec<KillOutcome>
where
    P: Fn(&ProcInfo) -> bool + Sync,
    R: Fn(i32) -> sys::EnvRead + Sync,
{
    let mut sweep = Sweep::new(targets, is_alive, max_pidfds, read_tag);
    debug!(
        n_targets = targets.len(),
        grace_ms = grace.as_millis(),
        "tree kill started"
    );
    // The course (SIGTERM, the grace, SIGKILL, the probe) is the session machine's,
    // which the shims' kills follow too; a zero grace is SIGTERM only here (B15).
    let mut actions: Vec<Action<()>> = Vec::new();
    let mut course = KillCourse::start(
        std::time::Instant::now(),
        grace,
        ZeroGrace::TermOnly,
        RESCAN_INTERVAL,
        &mut actions,
    );
    let mut escalated = false;
    // The last scan is recent enough for the next look (it followed the first SIGTERM).
    let mut fresh = false;
    loop {
        for action in actions.drain(..) {
            match action {
                Action::Terminate { first: true } => {
                    sweep.scan(false);
                    sweep.signal_live(Signal::SIGTERM);
                    sweep.scan(true);
                    sweep.signal_live(Signal::SIGTERM);
                    fresh = true;
                }
                Action::Terminate { first: false } => sweep.signal_live(Signal::SIGTERM),
                // The look just before the escalation re-scanned, while the shells are
                // still alive and everything they started during the grace still hangs
                // below them.
                Action::Escalate { .. } => {
                    sweep.signal_live(Signal::SIGKILL);
                    escalated = true;
                }
                _ => {}
            }
        }
        if course.due(std::time::Instant::now()) {
            if !fresh || sweep.unsure {
                sweep.scan(true);
            }
            fresh = false;
            // The time after the scan (reading the table takes time of its own): the
            // next look is a full interval after what it saw. A candidate whose
            // environment could not be read yet keeps the sweep looking.
            let empty = !sweep.has_live() && !sweep.unsure;
            course.looked(std::time::Instant::now(), empty, &mut actions);
            continue;
        }
        let Some(look) = course.next_look() else {
            break;
        };
        sweep.wait_for_exit(Instant::from_std(look)).await;
        course.woken(std::time::Instant::now());
    }
    let outcomes = sweep.into_outcomes();
    for (target, outcome) in targets.iter().zip(&outcomes) {
        debug!(
            pid = target.pid,
            gone = outcome.gone,
            escalated,
            signalled = outcome.signalled,
            n_survivors = outcome.survivors.len(),
            identity_mismatch = outcome.identity_mismatch,
            "tree kill finished"
        );
    }
    outcomes
}

/// One read of the process table, indexed for the walks.
#[derive(Debug)]
struct Table {
    rows: HashMap<i32, ProcInfo>,
    /// Parent pid → child pids.
    children: HashMap<i32, Vec<i32>>,
}

impl Table {
    fn read() -> Self {
        let rows: HashMap<i32, ProcInfo> = sys::process_table()
            .into_iter()
            .map(|row| (row.pid, row))
            .collect();
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for row in rows.values() {
            children.entry(row.ppid).or_default().push(row.pid);
        }
        Table { rows, children }
    }
}

/// One kill of one or more trees: the trees and what is shared between them.
struct Sweep<'t, P, R> {
    trees: Vec<Tree<'t>>,
    is_alive: P,
    read_tag: R,
    uid: u32,
    /// Most pidfds held at once, over all trees.
    max_pidfds: usize,
    /// For each (pid, start time) whose environment was read: the index of the tree
    /// whose tag it carries, or `None`. Each environment is read once per sweep.
    tag_owner: HashMap<(i32, u64), Option<usize>>,
    /// For each live (pid, start time) whose environment read empty: when it first
    /// did. A process between the two halves of an exec reads empty for a moment,
    /// so it is read again at the next look; only one still unreadable a rescan
    /// interval later is taken as untagged (its environment is empty for good).
    unreadable: HashMap<(i32, u64), std::time::Instant>,
    /// The last tagged scan left a candidate unread: the sweep looks again before
    /// it calls a tree gone.
    unsure: bool,
}

impl<P, R> std::fmt::Debug for Sweep<'_, P, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sweep")
            .field("trees", &self.trees)
            .finish_non_exhaustive()
    }
}

impl<'t, P, R> Sweep<'t, P, R>
where
    P: Fn(&ProcInfo) -> bool + Sync,
    R: Fn(i32) -> sys::EnvRead + Sync,
{
    fn new(targets: &'t [KillTarget], is_alive: P, max_pidfds: usize, read_tag: R) -> Self {
        Sweep {
            trees: targets.iter().map(Tree::new).collect(),
            is_alive,
            read_tag,
            uid: sys::current_uid(),
            max_pidfds,
            tag_owner: HashMap::new(),
            unreadable: HashMap::new(),
            unsure: false,
        }
    }

    /// Reads the process table once and updates every tree from it.
    ///
    /// With `with_tags` it also reads the environment of candidate processes to
    /// find tagged escapees. That is the expensive part of a scan, so the very
    /// first scan skips it: the groups and their descendants get SIGTERM first, and
    /// escapees, which have no parent link to lose, are looked up right after.
    fn scan(&mut self, with_tags: bool) {
        let table = Table::read();
        let tagged = if with_tags {
            self.find_tagged(&table)
        } else {
            vec![Vec::new(); self.trees.len()]
        };
        let n_pidfds: usize = self
            .trees
            .iter()
            .flat_map(|tree| tree.members.values())
            .filter(|m| m.handle.has_pidfd())
            .count();
        let mut pidfd_budget = self.max_pidfds.saturating_sub(n_pidfds);
        for (tree, tagged) in self.trees.iter_mut().zip(tagged) {
            tree.scan(&table, &tagged, &self.is_alive, &mut pidfd_budget);
        }
    }

    /// Pids carrying each tree's session tag, per tree.
    ///
    /// Only processes of our uid started no earlier than the tree's leader are
    /// candidates: nothing older can have inherited the tag.
    fn find_tagged(&mut self, table: &Table) -> Vec<Vec<i32>> {
        let mut found: Vec<Vec<i32>> = vec![Vec::new(); self.trees.len()];
        let by_tag: HashMap<&str, usize> = self
            .trees
            .iter()
            .enumerate()
            .filter(|(_, tree)| !tree.target.session_tag.is_empty())
            .map(|(idx, tree)| (tree.target.session_tag.as_str(), idx))
            .collect();
        let Some(floor) = by_tag.values().map(|&idx| self.trees[idx].tag_floor).min() else {
            return found;
        };
        let own_pid = sys::own_pid();
        let uid = self.uid;
        let now = std::time::Instant::now();
        self.unsure = false;
        for row in table.rows.values() {
            // Kernel threads (children of kthreadd, pid 2) have no environment.
            if row.pid <= 2 || row.ppid == 2 || row.pid == own_pid || row.start_time < floor {
                continue;
            }
            let key = (row.pid, row.start_time);
            let owner = match self.tag_owner.get(&key) {
                Some(owner) => *owner,
                None => {
                    let read = if sys::owner_uid(row.pid) == Some(uid) {
                        (self.read_tag)(row.pid)
                    } else {
                        sys::EnvRead::Unset
                    };
                    let known = match read {
                        sys::EnvRead::Set(value) => Some(by_tag.get(value.as_str()).copied()),
                        sys::EnvRead::Unset => Some(None),
                        // A dead process needs no signal, whatever its tag.
                        sys::EnvRead::Unreadable if !(self.is_alive)(row) => None,
                        sys::EnvRead::Unreadable => {
                            let first = *self.unreadable.entry(key).or_insert(now);
                            if now.duration_since(first) >= RESCAN_INTERVAL {
                                Some(None)
                            } else {
                                self.unsure = true;
                                None
                            }
                        }
                    };
                    if let Some(owner) = known {
                        self.tag_owner.insert(key, owner);
                    }
                    known.flatten()
                }
            };
            if let Some(idx) = owner
                && row.start_time >= self.trees[idx].tag_floor
            {
                found[idx].push(row.pid);
            }
        }
        found
    }

    fn signal_live(&mut self, sig: Signal) {
        for tree in &mut self.trees {
            tree.signal_live(sig);
        }
    }

    fn has_live(&self) -> bool {
        self.trees.iter().any(Tree::has_live)
    }

    /// Waits until a live member's pidfd reports its exit, or `deadline` (the kill's
    /// next look) passes, whichever comes first.
    async fn wait_for_exit(&mut self, deadline: Instant) {
        let trees = &mut self.trees;
        let any_exit = poll_fn(|cx| {
            let mut fired = false;
            let watched = trees
                .iter_mut()
                .flat_map(|tree| tree.members.values_mut())
                .filter(|m| m.is_alive && m.handle.is_watched());
            for member in watched {
                // A fired handle stops watching, so a member the probe still
                // counts as alive cannot spin this loop.
                if member.handle.poll_exit(cx).is_ready() {
                    fired = true;
                }
            }
            if fired {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        });
        let _exited_or_rescan = tokio::time::timeout_at(deadline, any_exit).await;
    }

    fn into_outcomes(self) -> Vec<KillOutcome> {
        self.trees.into_iter().map(Tree::into_outcome).collect()
    }
}

/// One discovered process of the tree.
#[derive(Debug)]
struct Member {
    /// Pins the process identity; every signal to it goes through here.
    handle: ProcHandle,
    /// Start time seen at discovery.
    start_time: u64,
    /// Process group at the last scan.
    pgrp: i32,
    /// Alive (per the probe) at the last scan.
    is_alive: bool,
    /// Strongest signal already delivered individually or through the group.
    sent: Option<Signal>,
}

/// One session's tree within a sweep: what has been discovered and what was sent.
#[derive(Debug)]
struct Tree<'t> {
    target: &'t KillTarget,
    /// Start time that identifies the leader, or `None` once it is known not to
    /// be ours (gone or reused).
    leader_start: Option<u64>,
    /// Start time of the session's leader: no process started earlier can carry
    /// the session tag (0 when unknown).
    tag_floor: u64,
    /// The group id was proven ours by the last scan.
    is_group_ours: bool,
    /// Strongest signal sent to the whole group so far.
    group_sent: Option<Signal>,
    members: HashMap<i32, Member>,
    outcome: KillOutcome,
}

impl<'t> Tree<'t> {
    fn new(target: &'t KillTarget) -> Self {
        let current = sys::start_time(target.pid);
        let mut outcome = KillOutcome::default();
        let leader_start = match (target.start_time, current) {
            (Some(recorded), Some(now)) if recorded != now => {
                debug!(
                    pid = target.pid,
                    recorded, now, "leader pid was reused, not signalling it"
                );
                outcome.identity_mismatch = true;
                None
            }
            (Some(recorded), _) => Some(recorded),
            // The caller vouches for the pid: whatever holds it now is ours.
            (None, now) => now,
        };
        Tree {
            target,
            leader_start,
            tag_floor: target.start_time.or(current).unwrap_or(0),
            is_group_ours: false,
            group_sent: None,
            members: HashMap::new(),
            outcome,
        }
    }

    /// Updates the members from a fresh table: forgets the ones that are gone,
    /// adds everything newly reachable from the leader, the members and the
    /// `tagged` pids, and refreshes liveness and groups. New members get a pidfd
    /// while `pidfd_budget` lasts.
    fn scan<P>(&mut self, table: &Table, tagged: &[i32], is_alive: &P, pidfd_budget: &mut usize)
    where
        P: Fn(&ProcInfo) -> bool,
    {
        let rows = &table.rows;
        let own_pid = sys::own_pid();
        let own_pgrp = sys::own_pgrp();

        // A member whose pid vanished or now has another start time has exited.
        self.members
            .retain(|pid, m| rows.get(pid).is_some_and(|r| r.start_time == m.start_time));

        let pgid = self.target.pgid;
        let leader_row = self
            .leader_start
            .and_then(|start| rows.get(&self.target.pid).filter(|r| r.start_time == start));
        if leader_row.is_none() && !rows.contains_key(&self.target.pid) {
            // Reaped: the pid may be handed to a stranger from now on.
            self.leader_start = None;
        }

        let mut roots: Vec<i32> = self.members.keys().copied().collect();
        if let Some(row) = leader_row.filter(|row| row.pid != own_pid) {
            roots.push(row.pid);
        }
        roots.extend(
            tagged
                .iter()
                .copied()
                .filter(|&pid| pid > 1 && pid != own_pid),
        );

        // The group is ours while a proven member of the tree is in it, and never
        // when it is the daemon's own group (a corrupt record must not reach it).
        self.is_group_ours = pgid != own_pgrp
            && roots
                .iter()
                .any(|pid| rows.get(pid).is_some_and(|r| r.pgrp == pgid));
        let root_set: HashSet<i32> = roots.iter().copied().collect();
        for row in rows.values() {
            if row.pid <= 1 || row.pid == own_pid || row.pgrp == own_pgrp {
                continue;
            }
            let joins_our_group = self.is_group_ours && row.pgrp == pgid;
            // A group whose id is the pid of a member was created by that member.
            let joins_member_group = row.pgrp != row.pid && root_set.contains(&row.pgrp);
            if joins_our_group || joins_member_group {
                roots.push(row.pid);
            }
        }

        // Walk parent links down from every root.
        let mut seen: HashSet<i32> = HashSet::new();
        let mut queue: VecDeque<i32> = roots.into_iter().collect();
        while let Some(pid) = queue.pop_front() {
            if pid <= 1 || pid == own_pid || !seen.insert(pid) {
                continue;
            }
            if let Some(kids) = table.children.get(&pid) {
                queue.extend(kids.iter().copied());
            }
        }

        for pid in seen {
            let Some(row) = rows.get(&pid) else { continue };
            if let Some(member) = self.members.get_mut(&pid) {
                member.pgrp = row.pgrp;
                member.is_alive = is_alive(row);
                continue;
            }
            let use_pidfd = *pidfd_budget > 0;
            match ProcHandle::open(pid, row.start_time, use_pidfd) {
                Ok(mut handle) => {
                    if handle.has_pidfd() {
                        *pidfd_budget -= 1;
                        handle.watch_exit();
                    }
                    self.members.insert(
                        pid,
                        Member {
                            handle,
                            start_time: row.start_time,
                            pgrp: row.pgrp,
                            is_alive: is_alive(row),
                            sent: None,
                        },
                    );
                }
                Err(OpenError::Gone | OpenError::Reused) => {}
            }
        }
    }

    /// Whether a member was alive at the last scan.
    fn has_live(&self) -> bool {
        self.members.values().any(|m| m.is_alive)
    }

    /// Pids of members alive at the last scan, ascending.
    fn live_pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .members
            .iter()
            .filter(|(_, m)| m.is_alive)
            .map(|(pid, _)| *pid)
            .collect();
        pids.sort_unstable();
        pids
    }

    /// Sends `sig` to every live member that has not had it yet: to the group
    /// (when it is ours and has such a member), then to each member it did not cover.
    ///
    /// SIGTERM goes to the group once; members that join it later get their own
    /// SIGTERM, so a process that treats a second SIGTERM as "stop now" is not
    /// hurried. SIGKILL is repeated on every call: it is idempotent, and the group
    /// signal is atomic with respect to `fork`, so a child forked in the meantime
    /// cannot slip through.
    fn signal_live(&mut self, sig: Signal) {
        let pgid = self.target.pgid;
        let group_has_due = self
            .members
            .values()
            .any(|m| m.is_alive && m.pgrp == pgid && m.sent != Some(sig));
        let group_due = self.group_sent != Some(sig) || sig == Signal::SIGKILL;
        if self.is_group_ours && group_has_due && group_due {
            match sys::signal_group(pgid, sig) {
                Ok(()) => {
                    self.outcome.signalled += 1;
                    self.group_sent = Some(sig);
                    if sig == Signal::SIGTERM {
                        // A stopped process only acts on SIGTERM once continued.
                        let _best_effort = sys::signal_group(pgid, Signal::SIGCONT);
                    }
                    for member in self.members.values_mut().filter(|m| m.pgrp == pgid) {
                        member.sent = Some(sig);
                    }
                }
                Err(errno) => debug!(pgid, ?sig, %errno, "group signal not delivered"),
            }
        }
        for member in self.members.values_mut() {
            // SIGKILL is repeated on every scan: it is idempotent, and a member
            // that left the group between a scan and the group signal needs it.
            let is_due = member.sent != Some(sig) || sig == Signal::SIGKILL;
            let is_covered = self.is_group_ours && member.pgrp == pgid && member.sent == Some(sig);
            if !member.is_alive || !is_due || is_covered {
                continue;
            }
            match member.handle.signal(sig) {
                Ok(()) => {
                    self.outcome.signalled += 1;
                    member.sent = Some(sig);
                    if sig == Signal::SIGTERM {
                        let _best_effort = member.handle.signal(Signal::SIGCONT);
                    }
                }
                Err(errno) => {
                    debug!(pid = member.handle.pid(), ?sig, %errno, "signal not delivered")
                }
            }
        }
    }

    fn into_outcome(self) -> KillOutcome {
        let survivors = self.live_pids();
        KillOutcome {
            gone: survivors.is_empty(),
            survivors,
            ..self.outcome
        }
    }
}

/// Entry points for the kill-latency bench; not part of herd-core's API (only with
/// the `bench-support` feature, which the benches enable).
///
/// A bench is a separate crate and can only reach `pub` items, while tree kill is
/// internal to herd-core (the registry is its only caller, and nothing outside the
/// crate may signal processes). This module exposes the minimum the kill-latency
/// bench needs and is hidden from the docs.
#[cfg(feature = "bench-support")]
#[doc(hidden)]
pub mod bench_support {
    use std::time::Duration;

    /// Name of the session-tag environment variable (`HERD_SESSION`).
    pub const SESSION_TAG_ENV: &str = super::SESSION_TAG_ENV;

    /// Start time of `pid` (`/proc/<pid>/stat` field 22).
    pub fn start_time(pid: i32) -> Option<u64> {
        super::start_time(pid)
    }

    /// Kills the tree led by `pid` (its own process group) tagged `session_tag`;
    /// returns whether the whole tree is gone.
    pub async fn kill_tree(
        pid: i32,
        start_time: Option<u64>,
        session_tag: &str,
        grace: Duration,
    ) -> bool {
        let target = super::KillTarget {
            pid,
            pgid: pid,
            start_time,
            session_tag: session_tag.to_owned(),
        };
        super::kill_tree(&target, grace).await.gone
    }

    /// Kills several trees in one sweep, each `(leader pid, start time, tag)` in
    /// its own process group; returns whether every tree is gone.
    pub async fn kill_trees(trees: &[(i32, Option<u64>, String)], grace: Duration) -> bool {
        let targets: Vec<super::KillTarget> = trees
            .iter()
            .map(|(pid, start_time, tag)| super::KillTarget {
                pid: *pid,
                pgid: *pid,
                start_time: *start_time,
                session_tag: tag.clone(),
            })
            .collect();
        super::kill_trees(&targets, grace)
            .await
            .iter()
            .all(|outcome| outcome.gone)
    }
}
