//! The daemon (`herd serve`): owns the registry of one home and serves it on a
//! private Unix socket.
//!
//! Start-up order matters. The daemon first takes an exclusive `flock` on
//! `<home>/run/herd.lock`, so two autostarting clients can never run two daemons
//! for one home (the loser exits 0 and its client connects to the winner). Holding
//! the lock proves any socket file left behind is stale, so it is removed. The
//! socket is then bound under a 0177 umask, which creates it 0600 from the start
//! (no window in which it is world-connectable), inside a 0700 `run/` directory.
//! Only then is the registry built, the sessions of the checkpoint restored
//! (re-adopted or closed, B28), and the accept loop started; clients that
//! connect early wait in the listen backlog.
//!
//! Before anything else it closes every descriptor it inherited above 2 and resets
//! signal dispositions and the mask (`herd_core::hygiene`): a job gets exactly its
//! stdin, stdout and stderr, whoever autostarted the daemon.
//!
//! Every connection's peer uid is checked (SO_PEERCRED) before a byte is read.
//!
//! How it ends: SIGTERM and SIGINT (a `systemctl stop` or `restart`, an upgrade, a
//! Ctrl-C of `herd serve`) detach: supervised jobs keep running under their shims and
//! the next daemon re-attaches them. The `shutdown` method kills every session as
//! `host_shutdown` (B17), unless it asks `keep_jobs`, which detaches too. Either way
//! the daemon stops accepting, writes the checkpoint, removes the socket and pid
//! file, and exits 0.

mod connection;
mod give_back;
mod hosts;
mod methods;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use anyhow::Context;
use herd_persistence::Home;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::stat::Mode;
use tokio::net::UnixListener;
use tokio::sync::Notify;

use crate::client::check_socket_path;
use crate::config::{Config, Private, create_home, open_private};
use crate::exit::{Code, Failure};
pub(crate) use methods::{Ending, State};

/// Runs the daemon for `home` until it is told to stop.
///
/// # Errors
/// A bad config, an unusable home or socket path, or a registry that fails to start.
pub(crate) fn serve(home: &Home, detached: bool) -> anyhow::Result<()> {
    // Nothing of whoever started us (extra descriptors, ignored or blocked signals)
    // may reach the launcher, the shims or a job. First, while no thread runs.
    herd_core::hygiene::clean_start()
        .context("failed to close inherited descriptors and reset signals")?;
    if detached {
        // Autostart spawned us as a plain child of the client; a new session
        // detaches us from its terminal and process group. We are not a group
        // leader (the client did not make us one), so setsid cannot fail with EPERM.
        nix::unistd::setsid().context("failed to detach the daemon into its own session")?;
        // From here the log is written (and rotated) by the daemon itself.
        crate::daemon_log::global().to_file(&home.daemon_log_path(), true);
    }
    let config = Config::load(home)?;
    raise_descriptor_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("herd-daemon")
        .build()
        .context("failed to start the async runtime")?;
    // The daemon's lifetime (and with it the accept loop) runs as a task on a
    // worker, not in `block_on` on this thread: the worker that sees the listener
    // readable accepts and starts the connection's task itself, where from this
    // thread every connection cost two thread wake-ups (worker → this thread →
    // a worker) before its first byte was read.
    runtime.block_on(async {
        match tokio::spawn(run(home.clone(), config, detached)).await {
            Ok(ran) => ran,
            Err(err) => Err(anyhow::anyhow!("the daemon's main task failed: {err}")),
        }
    })
}

/// The daemon's lifetime.
async fn run(home: Home, config: Config, detached: bool) -> anyhow::Result<()> {
    create_home(&home)?;
    let run_dir = home.ensure_dir(&home.run_dir())?;
    home.secure_dir(&run_dir)?;
    let socket = home.socket_path();
    check_socket_path(&socket)?;
    let Some(_lock) = lock_home(&home, &run_dir, detached)? else {
        return Ok(());
    };
    // Under systemd from a login shell: one delegated scope for the daemon, before
    // the registry starts the launcher (its shims make the session cgroups there).
    let tools_env = herd_core::utf8_environment();
    let settled = herd_core::delegate::settle(&tools_env).await;
    tracing::info!(cgroup = %settled, "daemon cgroup settled");
    let listener = bind_fresh(&socket)?;
    let pid_path = run_dir.join("herd.pid");
    {
        use std::io::Write;
        // Only informative (the lock is what keeps one daemon per home): a full disk
        // must not keep the daemon from serving. Anything else (a planted link among
        // them) still stops it.
        match open_private(&pid_path, Private::Truncate)
            .and_then(|mut file| writeln!(file, "{}", std::process::id()))
        {
            Ok(()) => {}
            Err(error) if matches!(error.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) => {
                tracing::warn!(path = %pid_path.display(), %error, "the pid file was not written: the disk is full");
            }
            Err(error) => {
                return Err(error).with_context(|| {
                    format!("failed to write the pid file {}", pid_path.display())
                });
            }
        }
    }
    let stop = Arc::new(Notify::new());
    let state = Arc::new(start_state(&home, &config, Arc::clone(&stop)).await?);
    crate::mcp::sweep_owners_hourly(state.registry().clone());
    tracing::info!(
        pid = std::process::id(),
        home = %home.root().display(),
        version = env!("CARGO_PKG_VERSION"),
        "daemon started"
    );
    let ending = serve_until_stopped(&listener, &state, &config, &stop).await?;
    drop(listener);
    let _ = std::fs::remove_file(&socket);
    state.end(ending).await;
    let _ = std::fs::remove_file(&pid_path);
    tracing::info!("daemon stopped");
    Ok(())
}

/// Takes the home's daemon lock. `None` when another daemon holds it and this one
/// was autostarted (its client connects to the winner); an error naming the running
/// daemon when a person ran `herd serve` by hand.
fn lock_home(
    home: &Home,
    run_dir: &std::path::Path,
    detached: bool,
) -> anyhow::Result<Option<Flock<std::fs::File>>> {
    let lock_path = run_dir.join("herd.lock");
    let lock_file = open_private(&lock_path, Private::Keep)
        .with_context(|| format!("failed to open the lock file {}", lock_path.display()))?;
    match Flock::lock(lock_file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            tracing::info!(home = %home.root().display(), "another daemon already serves this home");
            if detached {
                return Ok(None);
            }
            let pid = std::fs::read_to_string(run_dir.join("herd.pid")).unwrap_or_default();
            Err(Failure::new(
                Code::Usage,
                format!(
                    "a daemon (pid {}) already serves {}; stop it with `herd shutdown` first",
                    pid.trim(),
                    home.root().display()
                ),
            )
            .into())
        }
        Err((_, errno)) => Err(anyhow::anyhow!(
            "failed to lock {}: {errno}",
            lock_path.display()
        )),
    }
}

/// Binds the socket, removing a stale one first: the caller holds the lock, so no
/// live daemon owns a socket there.
fn bind_fresh(socket: &std::path::Path) -> anyhow::Result<UnixListener> {
    match std::fs::remove_file(socket) {
        Ok(()) => tracing::info!(path = %socket.display(), "removed a stale socket"),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => {
            return Err(err).with_context(|| {
                format!("failed to remove the stale socket {}", socket.display())
            });
        }
    }
    bind_private(socket)
}

/// Loads the plugins and builds the daemon's state.
async fn start_state(home: &Home, config: &Config, stop: Arc<Notify>) -> anyhow::Result<State> {
    // Each plugin's library is opened and its init run on a thread of its own,
    // with a deadline (herd-hooks' `start_plugins`): the start never waits on a
    // plugin. Failures are rows in the report, never a failed start. Loaded code:
    // the plugins directory and what it holds pass the safe-path check, and it is
    // used by its real path (no link left in it to swap).
    let plugins_dir = crate::config::checked_plugins_dir(home)?;
    let enabled = config.plugins.enabled.clone();
    let (chain, reports) = tokio::task::spawn_blocking(move || {
        herd_hooks::start_plugins(&plugins_dir, &enabled, herd_hooks::INIT_DEADLINE)
    })
    .await
    .context("the plugin loader panicked")?;
    for report in &reports {
        tracing::info!(
            plugin = %report.name,
            status = report.status.as_str(),
            reason = report.reason.as_deref().unwrap_or(""),
            "plugin"
        );
    }
    let pipeline = herd_hooks::Pipeline::new(chain, &config.redactor_config())
        .context("invalid redact_extra_patterns in the config")?;
    let state = State::new(home.clone(), config, Arc::new(pipeline), stop).await?;
    Ok(state.with_plugins(crate::plugins::Started::new(reports, config)))
}

/// Accepts connections until a signal or a shutdown request; says how to end.
async fn serve_until_stopped(
    listener: &UnixListener,
    state: &Arc<State>,
    config: &Config,
    stop: &Notify,
) -> anyhow::Result<Ending> {
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("failed to install the SIGTERM handler")?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("failed to install the SIGINT handler")?;
    let uid = nix::unistd::getuid().as_raw();
    let mut refusals = connection::Refusals::default();
    let ending = loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => match state.connections.enter(config.max_connections) {
                    Some(slot) => {
                        let state = Arc::clone(state);
                        tokio::spawn(connection::serve(state, stream, uid, slot));
                    }
                    None => {
                        refusals.note("connection refused: at max_connections");
                        tokio::spawn(connection::refuse_busy(stream, config.max_connections));
                    }
                },
                Err(err) => {
                    // Out of descriptors (EMFILE) the listener stays readable: back
                    // off instead of spinning, and say so once a second at most.
                    refusals.note(&format!("accept failed: {err}"));
                    accept_backoff().await;
                }
            },
            _ = sigterm.recv() => { tracing::info!("SIGTERM received; detaching"); break Ending::Detach; }
            _ = sigint.recv() => { tracing::info!("SIGINT received; detaching"); break Ending::Detach; }
            () = stop.notified() => {
                tracing::info!("shutdown requested");
                break if state.keeps_jobs() { Ending::Detach } else { Ending::KillJobs };
            }
        }
    };
    Ok(ending)
}

/// Raises the soft limit on open descriptors to the hard one: every supervised
/// session holds a socket to its shim (and, once it printed, its log file), so a
/// soft limit of 1,024 would cap the daemon near a thousand sessions. The limits
/// are logged; when the raise fails the daemon runs under the soft limit and a
/// spawn past it fails with the descriptor-exhaustion error.
fn raise_descriptor_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        tracing::warn!("descriptor limit unknown (getrlimit failed); sessions are capped near it");
        return;
    };
    // An unlimited hard limit: the kernel's default per-process ceiling.
    let wanted = if hard == nix::sys::resource::RLIM_INFINITY {
        1 << 20
    } else {
        hard
    };
    if soft >= wanted {
        tracing::info!(soft, hard, "descriptor limit already at the hard limit");
        return;
    }
    match setrlimit(Resource::RLIMIT_NOFILE, wanted, hard) {
        Ok(()) => tracing::info!(
            from = soft,
            to = wanted,
            "descriptor limit raised to the hard limit"
        ),
        Err(error) => {
            tracing::warn!(%error, soft, hard, "descriptor limit not raised; sessions are capped near the soft limit");
        }
    }
}

/// Binds `socket` so that it is created mode 0600.
fn bind_private(socket: &std::path::Path) -> anyhow::Result<UnixListener> {
    // The umask is process-wide; nothing else runs yet (the registry is built
    // after this), so no other file is created under the narrowed mask.
    let previous = nix::sys::stat::umask(Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(socket);
    nix::sys::stat::umask(previous);
    let listener =
        bound.with_context(|| format!("failed to bind the socket {}", socket.display()))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("failed to set the mode of {}", socket.display()))?;
    Ok(listener)
}

/// The pause after a failed `accept` (EMFILE keeps the listener readable, so
/// retrying at once would spin).
#[expect(
    clippy::disallowed_methods,
    reason = "a back-off between retries, not a synchronisation"
)]
async fn accept_backoff() {
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
}
