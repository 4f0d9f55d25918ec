//! The supervised room's own state and calls: the launcher that forks shims, the
//! home's shim directories and the settings a shim starts with. It starts a job
//! under a new shim ([`Shims::start`]), stops what a failed start left, keeps a
//! finished session's shim directory while its shim holds leftovers, and stops a
//! shim nobody owns. It holds no lock and never looks at the table: the flows
//! that cross rooms (following a shim, re-attaching, settling a session) stay in
//! `supervised`, `lingering` and `held`, which call it.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use herd_persistence::{Home, ShimDir, ShimRef};

use crate::config::RegistryConfig;
use crate::id::SessionId;
use crate::kill;
use crate::lock_order::{Mutex, rank};
use crate::session::Session;
use crate::shim::Ready;
use crate::shim::link::{self, Launcher};
use crate::spawn::Launch;

/// The supervised room: what starting and retiring shims needs.
#[derive(Debug)]
pub(crate) struct Shims {
    home: Home,
    /// Forks the shims of sessions that are not wrapped by a dispatcher.
    launcher: Option<Launcher>,
    runtime: tokio::runtime::Handle,
    log_cap_bytes: u64,
    /// How far before its log's end a shim keeps the key mark a follower takes
    /// (`link::mark_lag`).
    mark_lag: u64,
    idle_drain: Duration,
    kill_grace: Duration,
    /// Directories of finished sessions kept for the next sessions (see
    /// `herd_persistence::ShimDir::retire_as_spare`), at most [`SPARE_DIRS`].
    spares: Mutex<Vec<PathBuf>, { rank::SHIM_SPARES }>,
}

/// The most spare shim directories kept: enough for the sessions that finish while
/// as many start (a burst of clients), a few KiB of disk each.
const SPARE_DIRS: usize = 64;

impl Shims {
    /// The room for `home` with `config`'s shim program and settings.
    pub(super) fn new(
        home: &Home,
        config: &RegistryConfig,
        runtime: tokio::runtime::Handle,
    ) -> Shims {
        let pool_socket = home.run_dir().join("pool.sock");
        let shims = Shims {
            home: home.clone(),
            launcher: config
                .shim
                .clone()
                .map(|program| Launcher::new(program, pool_socket)),
            runtime,
            log_cap_bytes: config.log_cap_bytes,
            mark_lag: link::mark_lag(config.buffer_bytes),
            idle_drain: config.idle_drain,
            kill_grace: config.kill_grace,
            spares: Mutex::new(Vec::new()),
        };
        shims.adopt_spare_dirs();
        shims
    }

    /// Takes the spare directories an earlier registry of the home left (and removes
    /// those over [`SPARE_DIRS`]); once, at construction.
    fn adopt_spare_dirs(&self) {
        let mut found = herd_persistence::spare_shim_dirs(&self.home);
        for extra in found.split_off(found.len().min(SPARE_DIRS)) {
            let _ = ShimDir::at(extra).remove();
        }
        self.spares.acquire().extend(found);
    }

    /// Makes session `dir`'s directory, from a spare when there is one.
    fn make_dir(&self, dir: &ShimDir) -> Result<(), herd_persistence::Error> {
        loop {
            let Some(spare) = self.spares.acquire().pop() else {
                return dir.create(&self.home);
            };
            if dir.create_from_spare(&spare) {
                return Ok(());
            }
        }
    }

    /// Retires the directory of a finished session whose shim is done with it: kept
    /// as a spare while fewer than [`SPARE_DIRS`] are, removed otherwise.
    pub(super) fn retire_dir(&self, dir: &ShimDir) -> Result<(), herd_persistence::Error> {
        if self.spares.acquire().len() >= SPARE_DIRS {
            return dir.remove();
        }
        if let Some(spare) = dir.retire_as_spare()? {
            self.spares.acquire().push(spare);
        }
        Ok(())
    }

    /// The shim directory of session `id` (not created).
    pub(super) fn dir(&self, id: &str) -> Result<ShimDir, herd_persistence::Error> {
        ShimDir::new(&self.home, id)
    }

    /// The cgroup a supervised session's shim recorded, if any (reads its info
    /// record: call it off every lock).
    pub(super) fn session_cgroup(&self, s: &Session) -> Option<std::path::PathBuf> {
        s.shim?;
        let dir = self.dir(s.id.as_str()).ok()?;
        dir.read_info().ok().flatten().and_then(|info| info.cgroup)
    }

    /// The ids of every shim directory of the home.
    pub(super) fn session_ids(&self) -> Vec<String> {
        herd_persistence::shim_session_ids(&self.home)
    }

    /// Keeps the directory of a finished session's shim that still holds leftovers
    /// (a restart finds them through it) and removes it once the shim has exited;
    /// false when the session holds nothing.
    pub(super) fn keep_dir_while_held(&self, s: &Session, dir: &ShimDir) -> bool {
        let Some(shim) = s.shim else { return false };
        if super::held::held_leftovers(s).is_empty() {
            return false;
        }
        self.remove_dir_when_gone(s.id.clone(), shim, dir.clone(), || {});
        true
    }

    /// Removes `dir` once `shim` has exited, then calls `then`.
    pub(super) fn remove_dir_when_gone(
        &self,
        id: SessionId,
        shim: ShimRef,
        dir: ShimDir,
        then: impl FnOnce() + Send + 'static,
    ) {
        drop(self.runtime.spawn(async move {
            super::lingering::wait_shim_gone(shim).await;
            if let Err(error) = dir.remove() {
                tracing::warn!(session_id = %id, %error, "supervisor directory not removed");
            }
            then();
        }));
    }

    /// Stops the job of an orphaned shim directory whose shim still answers:
    /// nobody was told it runs.
    pub(super) async fn stop_orphan(&self, raw: &str, info: &herd_persistence::ShimInfo) {
        tracing::warn!(session_id = %raw, "a supervised job nobody was told about is stopped");
        let target = kill::KillTarget {
            pid: info.pid,
            pgid: info.pgid,
            start_time: info.start_time,
            session_tag: raw.to_owned(),
        };
        kill::kill_tree(&target, self.kill_grace).await;
    }
}

impl Shims {
    /// Starts `launch` under a new shim and attaches to it. The shim is forked by the
    /// launcher, or, with `direct` (a dispatcher's wrapper around the shim program),
    /// started by running that argv.
    pub(super) async fn start(
        &self,
        id: &SessionId,
        direct: Option<&[String]>,
        launch: &Launch<'_>,
        pty: Option<(u16, u16)>,
        log_path: &std::path::Path,
        ending: ShimEnding,
    ) -> Result<Box<ShimStarted>, ShimStartError> {
        let io_err = |e: herd_persistence::Error| ShimStartError::Io(io::Error::other(e));
        let dir = ShimDir::new(&self.home, id.as_str()).map_err(io_err)?;
        socket_fits(&dir)?;
        self.make_dir(&dir).map_err(io_err)?;
        let mut spec = self.spec(id, &dir, launch, pty, log_path, ending);
        // The shim itself carries neither the session tag (a tree kill's escapee scan
        // would take it for part of the job) nor the supervised-child marker.
        let mut shim_env = launch.env.clone();
        shim_env.remove(std::ffi::OsStr::new(crate::spawn::SESSION_TAG_ENV));
        shim_env.remove(std::ffi::OsStr::new(herd_guards::SUPERVISED_CHILD_ENV));
        // Every descriptor the daemon needs once the job runs is taken now: out of
        // descriptors, the spawn is refused before anything starts.
        let socket = match link::AttachSocket::new() {
            Ok(socket) => socket,
            Err(error) => {
                let _ = dir.remove();
                return Err(ShimStartError::Io(error));
            }
        };
        let launched = match (direct, &self.launcher) {
            (Some(argv), _) => link::launch(argv, &shim_env, &spec)
                .await
                .map(|ready| (ready, None)),
            (None, Some(launcher)) => launcher.launch(&mut spec).await,
            (None, None) => Err(io::Error::other("no session supervisor is configured")),
        };
        let (ready, kept) = match launched {
            Ok(launched) => launched,
            Err(error) => {
                // A shim that answered too late may have started the job all the same.
                self.retire_unanswered(id, &dir).await;
                return Err(ShimStartError::Io(error));
            }
        };
        match ready {
            Ready::Running {
                protocol,
                shim_pid,
                shim_start_time,
                pid,
                start_time,
                cgroup,
                ..
            } => match link::attach_started(
                &dir,
                pid,
                protocol,
                kept.map_or(link::Reach::Socket(socket), link::Reach::Kept),
            )
            .await
            {
                Ok(attached) => Ok(Box::new(ShimStarted {
                    pid,
                    start_time,
                    pty: pty.is_some(),
                    shim: ShimRef {
                        pid: shim_pid,
                        start_time: shim_start_time,
                        protocol,
                    },
                    // An older shim's answer does not say: its record does.
                    containment: cgroup.map_or_else(|| containment_of(&dir), held_by),
                    attached,
                    dir,
                })),
                Err(error) => {
                    let started = Unclaimed {
                        pid,
                        start_time,
                        shim_pid,
                        shim_start_time,
                    };
                    self.stop_unclaimed(id, &started).await;
                    let _ = dir.remove();
                    Err(ShimStartError::Io(io::Error::other(format!(
                        "the session supervisor started the job but could not be attached ({error}); the job was stopped"
                    ))))
                }
            },
            Ready::PtyUnavailable { message } => {
                let _ = dir.remove();
                Err(ShimStartError::PtyUnavailable(message))
            }
            Ready::Failed { message } => {
                let _ = dir.remove();
                Err(ShimStartError::Io(io::Error::other(message)))
            }
        }
    }

    /// The launch spec of session `id`'s shim.
    fn spec(
        &self,
        id: &SessionId,
        dir: &ShimDir,
        launch: &Launch<'_>,
        pty: Option<(u16, u16)>,
        log_path: &std::path::Path,
        ending: ShimEnding,
    ) -> crate::shim::Spec {
        let mut spec = link::spec(
            id.as_str(),
            dir,
            launch.argv.clone(),
            launch.env,
            launch.cwd.to_path_buf(),
            pty,
            log_path.to_path_buf(),
            self.log_cap_bytes,
            self.idle_drain,
        );
        // The shim holds the deadline too: it kills the tree at the deadline while no
        // daemon runs.
        spec.deadline_unix_ms = ending.time_limit.map(|t| t.deadline_unix_ms());
        spec.kill_grace_ms = u64::try_from(self.kill_grace.as_millis()).unwrap_or(u64::MAX);
        spec.kill_leftovers = ending.kill_leftovers;
        spec.limits = ending.limits;
        spec.mark_lag = Some(self.mark_lag);
        spec.force_subreaper =
            std::env::var(crate::sys::cgroup::CONTAINMENT_ENV).is_ok_and(|v| v == "subreaper");
        spec.force_freeze = crate::sys::cgroup::freeze_forced();
        spec
    }
}

/// A job a shim started that no session took: the spawn failed after its start.
#[derive(Debug, Clone, Copy)]
struct Unclaimed {
    pid: i32,
    start_time: Option<u64>,
    shim_pid: i32,
    shim_start_time: Option<u64>,
}

impl Shims {
    /// Stops a job whose spawn failed after it started, so that a refused spawn
    /// leaves nothing running. The first step needs no descriptor (the failure may be
    /// that the daemon has none left): SIGKILL to the job's group and SIGTERM to its
    /// shim, which then kills the rest of the tree itself (`cgroup.kill`, or its
    /// subreaper sweep) and exits. Each is signalled by number only when its `/proc`
    /// row confirms the start time, or cannot be opened at all: the job started
    /// milliseconds ago and its group keeps its pgid taken while any member lives, so
    /// the number still names it. Then the usual tree kill, for what is visible.
    async fn stop_unclaimed(&self, id: &SessionId, job: &Unclaimed) {
        use crate::sys::{Identity, identity};
        use nix::sys::signal::Signal;
        if identity(job.pid, job.start_time) != Identity::Other {
            let _ = crate::sys::signal_group(job.pid, Signal::SIGKILL);
        }
        if identity(job.shim_pid, job.shim_start_time) != Identity::Other {
            let _ = crate::sys::signal_pid(job.shim_pid, Signal::SIGTERM);
        }
        tracing::warn!(session_id = %id, pid = job.pid, shim_pid = job.shim_pid, "a job whose spawn failed after it started is stopped");
        let target = kill::KillTarget {
            pid: job.pid,
            pgid: job.pid,
            start_time: job.start_time,
            session_tag: id.as_str().to_owned(),
        };
        kill::kill_tree(&target, self.kill_grace).await;
    }

    /// Removes the shim directory of a launch that failed without a ready answer. A
    /// shim may still be starting (a launcher that answered too late): the directory
    /// is first renamed away, so such a shim can no longer record its job (it then
    /// stops the job itself), and a job it recorded before is found and stopped.
    async fn retire_unanswered(&self, id: &SessionId, dir: &ShimDir) {
        let retired =
            dir.path()
                .with_file_name(format!(".refused-{}-{}", id.as_str(), fastrand::u32(..)));
        if std::fs::rename(dir.path(), &retired).is_err() {
            let _ = dir.remove();
            return;
        }
        let retired = ShimDir::at(retired);
        if let Ok(Some(info)) = retired.read_info() {
            let job = Unclaimed {
                pid: info.pid,
                start_time: info.start_time,
                shim_pid: info.shim_pid,
                shim_start_time: info.shim_start_time,
            };
            self.stop_unclaimed(id, &job).await;
        }
        if let Err(error) = retired.remove() {
            tracing::warn!(session_id = %id, %error, "a refused spawn's supervisor directory was not removed");
        }
    }
}

/// A job started under its own shim, attached.
pub(super) struct ShimStarted {
    pub(super) pid: i32,
    pub(super) start_time: Option<u64>,
    pub(super) pty: bool,
    pub(super) shim: herd_persistence::ShimRef,
    pub(super) attached: crate::shim::link::Attached,
    pub(super) dir: herd_persistence::ShimDir,
    pub(super) containment: crate::answers::Containment,
}

/// What the shim itself ends: the time limit, and the leftovers when asked.
#[derive(Debug, Clone, Copy)]
pub(super) struct ShimEnding {
    pub(super) time_limit: Option<crate::session::TimeLimit>,
    pub(super) kill_leftovers: bool,
    /// Not an ending: the bounds the shim sets on the tree before it starts.
    pub(super) limits: crate::Limits,
}

/// What holds a supervised session's tree, as its shim's info record says.
pub(super) fn containment_of(dir: &ShimDir) -> crate::answers::Containment {
    held_by(matches!(dir.read_info(), Ok(Some(info)) if info.cgroup.is_some()))
}

/// What holds a supervised session's tree: its cgroup, else its shim as subreaper.
fn held_by(cgroup: bool) -> crate::answers::Containment {
    if cgroup {
        crate::answers::Containment::Cgroup
    } else {
        crate::answers::Containment::Subreaper
    }
}

/// Why a shim did not start a job.
#[derive(Debug)]
pub(super) enum ShimStartError {
    /// No PTY could be opened; nothing ran.
    PtyUnavailable(String),
    /// A path under the home the session needs cannot serve (what is wrong and
    /// what to do); nothing was made.
    Unusable {
        path: std::path::PathBuf,
        why: String,
    },
    /// Anything else.
    Io(std::io::Error),
}

/// The supervisor of `dir` binds its socket there once the daemon's connection
/// closes: a path it can never be bound at is refused before anything runs.
fn socket_fits(dir: &ShimDir) -> Result<(), ShimStartError> {
    let socket = dir.socket_path();
    if crate::shim::fits_a_socket_address(&socket) {
        return Ok(());
    }
    Err(ShimStartError::Unusable {
        path: socket,
        why: format!(
            "the session supervisor's socket path is longer than the {} bytes a Unix socket path may have; use a home with a shorter path (HERD_HOME)",
            crate::shim::MAX_SOCKET_PATH_BYTES
        ),
    })
}

impl ShimStartError {
    pub(super) fn into_io(self) -> std::io::Error {
        match self {
            ShimStartError::PtyUnavailable(message) => std::io::Error::other(message),
            ShimStartError::Unusable { path, why } => {
                std::io::Error::other(format!("{}: {why}", path.display()))
            }
            ShimStartError::Io(error) => error,
        }
    }
}
