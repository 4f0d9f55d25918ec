//! The spawn path, called once per spawn by [`crate::Registry::spawn`]: checks the
//! request, judges the command (the self-kill guard), prepares the child's
//! environment and argv, asks the dispatcher for a scope, starts the job under
//! a shim or in this process (a PTY that cannot be opened falls back to pipes),
//! builds the session, enters it in the table and starts its reader.
//!
//! Touches the table only through `table` (a name check and the insert), never
//! under its lock does it start anything.

use crate::lock_order::Mutex;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use herd_hooks::Shown;
use tokio::sync::watch;
use tracing::Instrument;

use super::Inner;
use super::notify::NotifyPlan;
use super::shims::{ShimEnding, ShimStartError, ShimStarted};
use super::table::check_name;
use crate::answers::{ModeName, SpawnInfo};
use crate::config::{Mode, SpawnRequest};
use crate::dispatch::Dispatch;
use crate::error::SpawnError;
use crate::id::SessionId;
use crate::output::{LogWriter, Tail};
use crate::reader::{self, Source, Waiter};
use crate::session::TimeLimit;
use crate::session::{Scope, Session, State, Stdin};
use crate::spawn::{self, EnvPlan, Launch, PtyFailure};

mod exhausted;
mod pty_fallback;
mod space;

use pty_fallback::pipe_fallback;

/// How long a scoped worker may take to show up in its unit before it is no longer watched.
const SCOPE_ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// A checked request's time limit, or why it is refused.
type Checked = Result<Option<TimeLimit>, SpawnError>;

impl Inner {
    /// The spawn path, called once per [`Registry::spawn`]: checks the request,
    /// judges the command, prepares the child's environment and argv, starts it
    /// (under a shim or in process), enters it in the table and starts its reader;
    /// under `given` (a queued job's id), else a fresh id.
    pub(super) async fn spawn_as(
        self: &Arc<Self>,
        mut req: SpawnRequest,
        given: Option<SessionId>,
    ) -> Result<SpawnInfo, SpawnError> {
        req.limits = req.limits.or(self.config.default_limits);
        let time_limit = self.check_request(&req)?;
        let (time_limit, per_run) = super::restarts::per_run(&req, time_limit);
        let cwd = self.working_dir(&req)?;
        self.judge(&req, &cwd).await?;
        let wakes = self.plan_notifications(&req);
        let id = given.unwrap_or_else(|| self.table.fresh_id());
        let (scratch, log_path) = self.prepare_dirs(&id)?;
        let mut env = self.job_env(&req, &id, &scratch);
        let argv = self.job_argv(&req, &mut env, &cwd);
        let argv = self.restart_argv(&req, argv, per_run);
        // A supervised session's shim is what a dispatcher wraps (B34): the shim and
        // its job then live in the scope together and outlive a service restart.
        let (argv, shim_argv, dispatch, scope) = match &self.config.shim {
            Some(program) => {
                let (wrapped, dispatch, scope) = self
                    .dispatch(crate::shim::link::shim_argv(program), &mut env, &req, &id)
                    .await?;
                // A shim in a scope of its own is started by the wrapper; any other
                // is forked by the launcher (`None`).
                let direct = matches!(dispatch, Dispatch::Scoped { .. }).then_some(wrapped);
                (argv, Some(direct), dispatch, scope)
            }
            None => {
                let (argv, dispatch, scope) = self.dispatch(argv, &mut env, &req, &id).await?;
                (argv, None, dispatch, scope)
            }
        };
        let launch = Launch {
            argv,
            env: &env,
            cwd: &cwd,
        };
        let shown_command = self.hooks.show_command(&req.command);
        let job = Job {
            id: &id,
            req: &req,
            launch: &launch,
            log_path: &log_path,
            time_limit,
            shown_command: &shown_command,
            pty_unavailable: self.config.pty_unavailable,
        };
        let (started, pty_note) = match shim_argv {
            Some(shim_argv) => self.start_supervised(&job, shim_argv.as_deref()).await?,
            None => start_in_process(&job)?,
        };
        let (parts, runner) = started.into_parts();
        let mode = parts.mode;
        let pid = parts.pid;
        let session = self.new_session(&job, parts, cwd.clone(), &wakes, scope);
        // Made now, off every lock: a listing of thousands reads it as it is.
        drop(self.command_head(&session));
        self.enter(&session, runner, &wakes);
        tracing::info!(session_id = %id, pid, pgid = pid, mode = ?mode, dispatch = %dispatch.kind(), "session spawned");
        let mut notes = wakes.notes.clone();
        notes.extend(dispatch.note());
        Ok(SpawnInfo {
            name: req.name.clone(),
            session_id: id,
            pid,
            command: shown_command,
            mode,
            notify_on_complete: wakes.notify,
            watch_patterns: wakes.watch,
            heartbeat_seconds: wakes.heartbeat.map(|d| d.as_secs()),
            persist_on_release: req.persist_on_release,
            pty_note,
            dispatch: dispatch.kind(),
            note: (!notes.is_empty()).then(|| notes.join("; ")),
            time_limit_seconds: req.time_limit.map(|t| t.as_secs()),
            replaces: req.replaces.clone(),
            queued: false,
        })
    }

    /// Refuses a request the registry cannot take (closing, an empty command, a
    /// taken name, limits out of range, no shell); returns its time limit.
    pub(super) fn check_request(&self, req: &SpawnRequest) -> Checked {
        if self.closing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(SpawnError::ShuttingDown);
        }
        if req.command.trim().is_empty() {
            return Err(SpawnError::InvalidRequest {
                field: "command",
                message: "the command is empty; pass a shell command line".to_owned(),
            });
        }
        if let Some(name) = &req.name {
            self.check_name_free(req, name)?;
        }
        if let Some(n) = req.heartbeat_seconds.filter(|&n| n > 0) {
            crate::config::limits::check(
                "heartbeat_seconds",
                n,
                &crate::config::limits::HEARTBEAT_SECONDS,
            )
            .map_err(|message| SpawnError::InvalidRequest {
                field: "heartbeat_seconds",
                message: format!("{message}; 0 turns it off"),
            })?;
        }
        if let Some(n) = req.completion_output_chars {
            crate::config::limits::check(
                "completion_output_chars",
                n,
                &crate::config::limits::COMPLETION_OUTPUT_CHARS,
            )
            .map_err(|message| SpawnError::InvalidRequest {
                field: "completion_output_chars",
                message,
            })?;
        }
        let time_limit = req.time_limit.map(time_limit).transpose()?;
        super::readiness::check_request(req)?;
        super::restarts::check_request(req, self.config.shim.is_some())?;
        if let Some((field, message)) = req.limits.problem(self.config.shim.is_some()) {
            return Err(SpawnError::InvalidRequest { field, message });
        }
        if self.config.shell.is_empty() {
            return Err(SpawnError::InvalidRequest {
                field: "shell",
                message: "the configured shell argv is empty; set it to e.g. [\"bash\", \"-c\"]"
                    .to_owned(),
            });
        }
        Ok(time_limit)
    }

    /// Refuses `name` when it is not a valid name or one of the owner's running
    /// sessions has it.
    fn check_name_free(&self, req: &SpawnRequest, name: &str) -> Result<(), SpawnError> {
        check_name(name)?;
        let owner = req.owner_task_id.as_deref().unwrap_or(&req.task_id);
        let taken = self.table.running_named(name, owner);
        match taken {
            Some(id) => Err(SpawnError::InvalidRequest {
                field: "name",
                message: format!(
                    "{name} is already the name of your running session {id}; pick another, or kill or restart that one"
                ),
            }),
            None => Ok(()),
        }
    }

    /// The job's working directory, made absolute and checked to be a directory.
    pub(super) fn working_dir(&self, req: &SpawnRequest) -> Result<PathBuf, SpawnError> {
        let cwd = match &req.cwd {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().map_err(|source| SpawnError::Spawn {
                command: self.hooks.redact_command(&req.command).into_owned(),
                source,
            })?,
        };
        // Checked here, where the job starts, in every mode: a PTY spawn would
        // otherwise fall back to the home directory without a word.
        let cwd = std::path::absolute(&cwd).unwrap_or(cwd);
        match std::fs::metadata(&cwd) {
            Ok(meta) if meta.is_dir() => Ok(cwd),
            Ok(_) => Err(SpawnError::InvalidRequest {
                field: "cwd",
                message: format!("{} is not a directory", cwd.display()),
            }),
            Err(err) => Err(SpawnError::InvalidRequest {
                field: "cwd",
                message: format!(
                    "{} cannot be used as the working directory: {err}",
                    cwd.display()
                ),
            }),
        }
    }

    /// The self-kill guard's verdict, when one is configured: a refused command
    /// starts nothing.
    pub(super) async fn judge(&self, req: &SpawnRequest, cwd: &Path) -> Result<(), SpawnError> {
        let Some(host) = &self.config.guard else {
            return Ok(());
        };
        let verdict =
            spawn::judge(host, &req.command, cwd)
                .await
                .map_err(|err| SpawnError::Spawn {
                    command: self.hooks.redact_command(&req.command).into_owned(),
                    source: std::io::Error::other(format!("the guard's worker failed: {err}")),
                })?;
        if let herd_guards::Verdict::Block(block) = verdict {
            tracing::info!(rule = %block.rule, "spawn refused by the self-kill guard");
            return Err(SpawnError::Guarded(block));
        }
        Ok(())
    }

    /// The scratch dir and the session's log path. One stat each when the
    /// directories exist (the common case); they are created on demand, under the
    /// home only, when they do not.
    fn prepare_dirs(&self, id: &SessionId) -> Result<(PathBuf, PathBuf), SpawnError> {
        let scratch = self.home.scratch_dir();
        let logs = self.home.session_logs_dir();
        for dir in [&scratch, &logs] {
            if !dir.is_dir() {
                self.home.ensure_dir(dir).map_err(|e| SpawnError::Prepare {
                    path: dir.clone(),
                    source: e.into(),
                })?;
            }
        }
        space::check_free_space(&logs)?;
        Ok((scratch, self.home.session_log_path(id.as_str())))
    }

    /// The child's sanitised environment.
    fn job_env(&self, req: &SpawnRequest, id: &SessionId, scratch: &std::path::Path) -> Env {
        let plan = EnvPlan {
            deny: &self.config.env_deny,
            forward: &req.forward_env,
            overrides: &req.env,
            scratch,
            session_id: id.as_str(),
            pty: matches!(req.mode, Mode::Pty { .. }),
        };
        match &req.caller_env {
            Some(vars) => spawn::child_env(
                &plan,
                vars.iter()
                    .map(|(name, value)| (OsString::from(name), OsString::from(value))),
            ),
            None => spawn::child_env(&plan, std::env::vars_os()),
        }
    }

    /// The job's argv: the command exec-ed directly when it is simple enough and
    /// the config allows (setting `PWD` as the shell would), else the shell's.
    fn job_argv(&self, req: &SpawnRequest, env: &mut Env, cwd: &std::path::Path) -> Vec<String> {
        let direct = self
            .config
            .direct_exec
            .then(|| spawn::direct_argv(&self.config.shell, &req.command, env, cwd))
            .flatten();
        match direct {
            Some(argv) => {
                // What the shell would have set before exec-ing the command.
                if cwd.is_absolute() {
                    env.insert("PWD".into(), cwd.as_os_str().to_owned());
                } else {
                    env.remove(std::ffi::OsStr::new("PWD"));
                }
                argv
            }
            None => {
                let mut argv = self.config.shell.clone();
                argv.push(spawn::rewrite_compound_background(&req.command).into_owned());
                argv
            }
        }
    }

    /// Starts the job under a shim; a PTY the shim cannot open falls back to pipes
    /// (the note says so).
    async fn start_supervised(
        &self,
        job: &Job<'_>,
        direct: Option<&[String]>,
    ) -> Result<(Started, Option<String>), SpawnError> {
        let pty = match job.req.mode {
            Mode::Pty { rows, cols } => Some((rows, cols)),
            Mode::Pipe => None,
        };
        let attempt = if pty.is_some() && self.config.pty_unavailable {
            Err(ShimStartError::PtyUnavailable(
                "PTY support disabled by configuration".to_owned(),
            ))
        } else {
            self.shims
                .start(
                    job.id,
                    direct,
                    job.launch,
                    pty,
                    job.log_path,
                    job.ending(self.config.kill_leftovers),
                )
                .await
        };
        match attempt {
            Ok(started) => Ok((Started::Shim(started), None)),
            Err(ShimStartError::PtyUnavailable(error)) => {
                let (note, env) = pipe_fallback(&error, job.launch.env, &job.req.env);
                let launch = Launch {
                    argv: job.launch.argv.clone(),
                    env: &env,
                    cwd: job.launch.cwd,
                };
                let started = self
                    .shims
                    .start(
                        job.id,
                        direct,
                        &launch,
                        None,
                        job.log_path,
                        job.ending(self.config.kill_leftovers),
                    )
                    .await
                    .map_err(|e| shim_error(job, e))?;
                Ok((Started::Shim(started), Some(note)))
            }
            Err(error) => Err(shim_error(job, error)),
        }
    }

    /// The session of a started job, not yet in the table.
    fn new_session(
        &self,
        job: &Job<'_>,
        parts: StartedParts,
        cwd: PathBuf,
        wakes: &NotifyPlan,
        scope: Option<Scope>,
    ) -> Arc<Session> {
        let req = job.req;
        let owner = req
            .owner_task_id
            .clone()
            .unwrap_or_else(|| req.task_id.clone());
        let (done, _) = watch::channel(false);
        let (kill_requested, _) = watch::channel(false);
        Arc::new(Session {
            id: job.id.clone(),
            command: req.command.clone(),
            cwd,
            pid: parts.pid,
            pgid: parts.pid,
            start_time: parts.start_time,
            mode: parts.mode,
            started_at: SystemTime::now(),
            started: Instant::now(),
            log_path: job.log_path.to_path_buf(),
            notify: std::sync::atomic::AtomicBool::new(wakes.notify),
            read: std::sync::atomic::AtomicBool::new(false),
            persist_on_release: req.persist_on_release,
            scope,
            shim: parts.shim,
            completion_chars: req
                .completion_output_chars
                .unwrap_or(self.config.completion_output_chars),
            name: req.name.clone(),
            time_limit: job.time_limit,
            origin: crate::session::Origin::of(req),
            tail: Mutex::new(Tail::new(self.config.buffer_bytes)),
            state: Mutex::new(State {
                task_id: req.task_id.clone(),
                owner_task_id: owner,
                session_key: req.session_key.clone(),
                handoff_note: None,
                exit: None,
                finished: None,
                kill_source: None,
                stdin: Some(parts.stdin),
                containment: parts.containment,
                leftovers: Vec::new(),
                ready_at: None,
                runs: u32::from(req.restart.is_some()),
                reaching: false,
            }),
            done,
            kill_requested,
            terminals: Mutex::new(0),
            usage: Default::default(),
            command_head: std::sync::OnceLock::new(),
        })
    }

    /// Enters `session` in the running table, arms its notifications, and starts what
    /// reads its output and exit (which holds its time limit: the in-process reader's
    /// session machine, or the shim's).
    fn enter(self: &Arc<Self>, session: &Arc<Session>, runner: Runner, wakes: &NotifyPlan) {
        self.insert_running(session);
        self.changed();
        let observer = self.arm_notifications(session, wakes);
        let observer = self.arm_readiness(session, observer);
        let observer = self.arm_restarts(session, observer);
        let span = tracing::info_span!("session", id = %session.id);
        let inner = Arc::clone(self);
        let task_session = Arc::clone(session);
        match runner {
            Runner::InProcess(source, waiter) => {
                let log = LogWriter::new(session.log_path.clone(), self.config.log_cap_bytes);
                let supervision = self.supervision(session);
                drop(
                    self.runtime.spawn(
                        async move {
                            let finish = reader::run(
                                Arc::clone(&task_session),
                                Some(source),
                                waiter,
                                log,
                                observer,
                                supervision,
                            )
                            .await;
                            inner.finish(&task_session, finish).await;
                        }
                        .instrument(span),
                    ),
                );
            }
            Runner::Shim {
                attached,
                dir,
                shim_pid,
            } => {
                let cursor = crate::shim::link::Cursor {
                    log_bytes: 0,
                    progress: crate::shim::wire::Progress::default(),
                };
                self.follow_shim(
                    task_session,
                    attached,
                    cursor,
                    observer,
                    dir,
                    shim_pid,
                    span,
                );
            }
        }
        self.watch_scope_ack(session);
    }

    /// Watches a scoped worker enter its unit. One that exits first goes to the
    /// dispatcher, which re-checks the user bus: a vanished bus is logged as an
    /// infrastructure failure and flips the cached verdict, so the next dispatch
    /// degrades (or fails typed) instead of feeding another job to a dead wrapper.
    pub(super) fn watch_scope_ack(&self, session: &Arc<Session>) {
        let (Some(scope), Some(dispatcher)) =
            (session.scope.clone(), self.config.dispatcher.clone())
        else {
            return;
        };
        let s = Arc::clone(session);
        drop(self.runtime.spawn(async move {
            if crate::dispatch::wait_for_scope_ack(s.pid, &scope.unit, SCOPE_ACK_TIMEOUT).await
                != crate::dispatch::ScopeAck::Exited
            {
                return;
            }
            // The bus is re-checked now, while the cause is fresh; the exit status is
            // the reader's to collect and may not be known yet (it only colours the
            // message of a worker that failed with the bus still there).
            let exit_code = s.state().exit.and_then(|e| e.code);
            let error = dispatcher.on_early_exit(&scope.env, &scope.unit, exit_code);
            if error.is_infrastructure() {
                tracing::warn!(session_id = %s.id, infrastructure = true, %error, "scoped worker lost its user bus");
            } else {
                tracing::debug!(session_id = %s.id, %error, "scoped worker exited before it was seen in its scope");
            }
        }));
    }

    /// Restart-safe dispatch: a `persist_on_release` session asks the configured
    /// dispatcher; a scoped one runs the wrapped argv with the bus environment added.
    /// Returns the argv to run, the decision and the scope to record.
    pub(super) async fn dispatch(
        &self,
        argv: Vec<String>,
        env: &mut std::collections::BTreeMap<OsString, OsString>,
        req: &SpawnRequest,
        id: &SessionId,
    ) -> Result<(Vec<String>, Dispatch, Option<Scope>), SpawnError> {
        let Some(dispatcher) = self
            .config
            .dispatcher
            .as_ref()
            .filter(|_| req.persist_on_release)
        else {
            return Ok((argv, Dispatch::InProcess, None));
        };
        // What herd itself runs (systemd-run, later systemctl) and the user bus it
        // talks to are found through the daemon's own environment, the one `herd
        // doctor` judges, never the job's caller's: a caller without PATH or
        // XDG_RUNTIME_DIR must not turn a scope into a direct subprocess.
        let own_env: HashMap<String, String> = self
            .config
            .tools_env
            .clone()
            .unwrap_or_else(crate::spawn::utf8_environment);
        let decision = dispatcher
            .dispatch(
                &argv,
                &own_env,
                true,
                self.config.require_restart_safe_scope,
                id.as_str(),
            )
            .await?;
        match decision {
            Dispatch::Scoped {
                argv: wrapped,
                unit,
                env: bus,
            } => {
                let mut scope_env = own_env;
                for (k, v) in &bus {
                    env.insert(OsString::from(k), OsString::from(v));
                    scope_env.insert(k.clone(), v.clone());
                }
                let scope = Scope {
                    unit: unit.clone(),
                    env: scope_env,
                };
                Ok((
                    wrapped,
                    Dispatch::Scoped {
                        argv: Vec::new(),
                        unit,
                        env: bus,
                    },
                    Some(scope),
                ))
            }
            other => Ok((argv, other, None)),
        }
    }
}

/// What a spawn started.
#[cfg_attr(
    not(feature = "pty"),
    expect(
        clippy::large_enum_variant,
        reason = "without the pty feature the PTY child is a stub; one value per spawn"
    )
)]
enum Started {
    Pipe(spawn::PipeChild),
    Pty(spawn::PtyChild, u16, u16),
    Shim(Box<ShimStarted>),
}

/// What runs a session's output and exit.
enum Runner {
    InProcess(Source, Waiter),
    Shim {
        attached: crate::shim::link::Attached,
        dir: herd_persistence::ShimDir,
        shim_pid: i32,
    },
}

/// A child's environment.
type Env = std::collections::BTreeMap<OsString, OsString>;

/// What one spawn starts, as the start steps need it.
struct Job<'a> {
    id: &'a SessionId,
    req: &'a SpawnRequest,
    launch: &'a Launch<'a>,
    log_path: &'a std::path::Path,
    time_limit: Option<TimeLimit>,
    shown_command: &'a Shown,
    pty_unavailable: bool,
}

impl Job<'_> {
    /// What the shim ends itself: the time limit, and the leftovers when the request
    /// (or else the config, `default_kill`) asks.
    fn ending(&self, default_kill: bool) -> ShimEnding {
        ShimEnding {
            time_limit: self.time_limit,
            kill_leftovers: self.req.kill_leftovers.unwrap_or(default_kill),
            limits: self.req.limits,
        }
    }

    /// The spawn error of an OS refusal, naming the shown command.
    /// A refusal for want of processes or descriptors names that limit instead.
    fn spawn_err(&self, source: std::io::Error) -> SpawnError {
        exhausted::spawn_error(self.shown_command.to_string(), source)
    }
}

/// The time limit of a request, checked against its range.
fn time_limit(limit: Duration) -> Result<TimeLimit, SpawnError> {
    let range = &crate::config::limits::TIME_LIMIT_SECONDS;
    if limit < Duration::from_secs(*range.start()) || limit > Duration::from_secs(*range.end()) {
        return Err(SpawnError::InvalidRequest {
            field: "time_limit_seconds",
            message: format!(
                "the time limit must be from {} s to {} s (ten years); got {} s",
                range.start(),
                range.end(),
                limit.as_secs_f64()
            ),
        });
    }
    Ok(TimeLimit {
        limit,
        deadline: SystemTime::now() + limit,
    })
}

/// Starts the job in this process, on a PTY or pipes; a PTY that cannot be opened
/// falls back to pipes (the note says so).
fn start_in_process(job: &Job<'_>) -> Result<(Started, Option<String>), SpawnError> {
    let launch = job.launch;
    match job.req.mode {
        Mode::Pty { rows, cols } => {
            match spawn::spawn_pty(launch, rows, cols, job.pty_unavailable) {
                Ok(child) => Ok((Started::Pty(child, rows, cols), None)),
                Err(PtyFailure::Open(error)) => {
                    let (note, env) = pipe_fallback(&error, launch.env, &job.req.env);
                    let launch = Launch {
                        argv: launch.argv.clone(),
                        env: &env,
                        cwd: launch.cwd,
                    };
                    let child = spawn::spawn_pipe(&launch).map_err(|e| job.spawn_err(e))?;
                    Ok((Started::Pipe(child), Some(note)))
                }
                Err(PtyFailure::Spawn(error)) => Err(job.spawn_err(std::io::Error::other(error))),
            }
        }
        Mode::Pipe => Ok((
            Started::Pipe(spawn::spawn_pipe(launch).map_err(|e| job.spawn_err(e))?),
            None,
        )),
    }
}

/// What the session record takes from a started job.
struct StartedParts {
    pid: i32,
    start_time: Option<u64>,
    mode: ModeName,
    stdin: Stdin,
    shim: Option<herd_persistence::ShimRef>,
    containment: crate::answers::Containment,
}

impl Started {
    /// The session's parts and what runs its output and exit.
    fn into_parts(self) -> (StartedParts, Runner) {
        match self {
            Started::Pipe(child) => (
                StartedParts {
                    pid: child.pid,
                    start_time: crate::sys::start_time(child.pid),
                    mode: ModeName::Pipe,
                    stdin: Stdin::Pipe(Arc::new(child.stdin)),
                    shim: None,
                    containment: crate::answers::Containment::Group,
                },
                Runner::InProcess(
                    Source::Pipe {
                        rx: child.output,
                        raised: false,
                    },
                    Waiter::Tokio(child.child),
                ),
            ),
            Started::Pty(child, rows, cols) => {
                let master = Arc::new(child.master);
                let mut std_child = child.child;
                let handle = tokio::task::spawn_blocking(move || std_child.wait());
                (
                    StartedParts {
                        pid: child.pid,
                        start_time: crate::sys::start_time(child.pid),
                        mode: ModeName::Pty,
                        stdin: Stdin::Pty(Arc::clone(&master)),
                        shim: None,
                        containment: crate::answers::Containment::Group,
                    },
                    Runner::InProcess(
                        Source::Pty {
                            master,
                            scanner: herd_pty::Scanner::new(rows, cols),
                        },
                        Waiter::Blocking(handle),
                    ),
                )
            }
            Started::Shim(started) => {
                let ShimStarted {
                    pid,
                    start_time,
                    pty,
                    shim,
                    attached,
                    dir,
                    containment,
                } = *started;
                let shim_pid = shim.pid;
                (
                    StartedParts {
                        pid,
                        start_time,
                        mode: if pty { ModeName::Pty } else { ModeName::Pipe },
                        stdin: super::stdin::shim_stdin(&attached.link),
                        shim: Some(shim),
                        containment,
                    },
                    Runner::Shim {
                        attached,
                        dir,
                        shim_pid,
                    },
                )
            }
        }
    }
}

/// The spawn error of a supervisor that did not start: a path of the home it cannot
/// use is the home's problem ([`SpawnError::Prepare`]); the rest is the job's start.
fn shim_error(job: &Job<'_>, error: ShimStartError) -> SpawnError {
    match error {
        ShimStartError::Unusable { path, why } => SpawnError::Prepare {
            path,
            source: why.into(),
        },
        other => job.spawn_err(other.into_io()),
    }
}
