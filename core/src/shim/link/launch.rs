//! Starting shims: a standalone one (a dispatcher wraps it) handed one launch spec,
//! or the daemon's launcher, which forks a supervisor per spec. Specs go out and ready
//! answers come back as frames of the one framing every shim link uses
//! (`wire::Framing::Lengths`).

use crate::lock_order::{AsyncMutex, Mutex, MutexGuard, rank};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::START_TIMEOUT;
use crate::shim::wire::Framing;
use crate::shim::{Ready, Spec};

/// Starts a shim with `argv` (the shim program, possibly wrapped by a dispatcher)
/// and `env`, hands it `spec` (one frame), and returns its ready answer.
///
/// # Errors
/// The spawn's OS error, a shim that printed nothing in time, or an unreadable line.
pub(crate) async fn launch(
    argv: &[String],
    env: &BTreeMap<OsString, OsString>,
    spec: &Spec,
) -> io::Result<Ready> {
    let mut child = crate::spawn::spawn_shim(argv, env)?;
    let mut spec_bytes = Vec::new();
    Framing::Lengths
        .encode(spec, b"", &mut spec_bytes)
        .map_err(io::Error::other)?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| io::Error::other("the shim has no stdin"))?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| io::Error::other("the shim has no stdout"))?;
    let exchange = async {
        stdin.write_all(&spec_bytes).await?;
        drop(stdin);
        let mut line = Vec::new();
        stdout.read_to_end(&mut line).await?;
        io::Result::Ok(line)
    };
    let line = match tokio::time::timeout(START_TIMEOUT, exchange).await {
        Ok(Ok(line)) => line,
        Ok(Err(error)) => {
            let _ = child.start_kill();
            return Err(error);
        }
        Err(_) => {
            let _ = child.start_kill();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the session supervisor did not start within {} s",
                    START_TIMEOUT.as_secs()
                ),
            ));
        }
    };
    // The first process exits as soon as it has forked the shim proper.
    drop(tokio::spawn(async move { child.wait().await }));
    let mut frames = crate::shim::ready_reader();
    frames.feed(&line);
    let program = argv.first().map_or("", String::as_str);
    match frames.next() {
        Ok(Some(frame)) => parse_ready(&frame.header, program).map(|l| l.ready),
        _ => Err(not_ready(&line, program, "not one frame")),
    }
}

fn parse_ready(header: &[u8], program: &str) -> io::Result<crate::shim::ReadyLine> {
    serde_json::from_slice(header).map_err(|e| not_ready(header, program, &e.to_string()))
}

/// The error for a shim that answered something else than its ready answer.
fn not_ready(answer: &[u8], program: &str, why: &str) -> io::Error {
    let answer = String::from_utf8_lossy(&answer[..answer.len().min(200)]);
    io::Error::other(format!(
        "the session supervisor {program} answered {answer:?} instead of its ready answer ({why}); check that herd-shim belongs to this herd"
    ))
}

/// The daemon's shim launcher (`herd-shim --launcher`): started on first use,
/// started again after it died. Each launch is one spec written to it and one ready
/// line read back, matched by request id, so launches may overlap.
#[derive(Debug)]
pub(crate) struct Launcher {
    program: PathBuf,
    conn: AsyncMutex<Option<Arc<LauncherConn>>, { rank::LAUNCHER_CONN }>,
    /// Where the pool of supervisors forked ahead of need listens, and
    /// its cap (0: no pool).
    pool_at: (PathBuf, usize),
    /// The pool, bound when the first launcher starts.
    pool: std::sync::OnceLock<super::pool::Pool>,
}

/// One running launcher.
#[derive(Debug)]
struct LauncherConn {
    /// Written by the launching task itself (no hop through a writer task); dropping
    /// it closes the launcher's stdin, and the launcher exits.
    stdin: AsyncMutex<tokio::process::ChildStdin, { rank::LAUNCHER_STDIN }>,
    /// Shared with the task reading the ready answers, which must not keep `stdin`
    /// alive (the launcher would then outlive its registry).
    replies: Arc<Replies>,
    next: AtomicU64,
}

/// The launches waiting for their ready answer.
#[derive(Debug, Default)]
struct Replies {
    pending: Mutex<HashMap<u64, oneshot::Sender<Ready>>, { rank::SHIM_PENDING }>,
    /// Fires when the launcher's stdout closed: it died (or was never started right).
    gone: CancellationToken,
}

impl LauncherConn {
    fn pending_map(&self) -> MutexGuard<'_, HashMap<u64, oneshot::Sender<Ready>>> {
        self.replies.pending_map()
    }
}

impl Replies {
    fn pending_map(&self) -> MutexGuard<'_, HashMap<u64, oneshot::Sender<Ready>>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Launcher {
    /// A launcher for `program` whose pool of supervisors forked ahead of need
    /// listens at `pool_socket` (its cap from `HERD_SHIM_POOL`); nothing is started
    /// yet.
    pub(crate) fn new(program: PathBuf, pool_socket: PathBuf) -> Launcher {
        Launcher {
            program,
            conn: AsyncMutex::new(None),
            pool_at: (pool_socket, super::pool::cap_from_env()),
            pool: std::sync::OnceLock::new(),
        }
    }

    /// Hands `spec` to a supervisor forked ahead of need, if one waits, asking it to
    /// keep the connection as the daemon's to the session.
    async fn launch_pooled(
        &self,
        spec: &mut Spec,
    ) -> io::Result<Option<(Ready, Option<super::StartConn>)>> {
        let conn = self.connection().await?;
        let Some(pool) = self.pool.get() else {
            return Ok(None);
        };
        spec.request = conn.next.fetch_add(1, Ordering::Relaxed);
        spec.attach_here = true;
        let launched = pool.launch(spec).await;
        // A supervisor the launcher forks answers on the launcher's stdout, which
        // stays the launcher's.
        spec.attach_here = false;
        Ok(match launched? {
            super::pool::Pooled::Ready(ready, kept) => Some((ready, kept)),
            super::pool::Pooled::Unsent => None,
        })
    }

    /// Has a supervisor forked for `spec` and returns its ready answer, with the
    /// connection it came on when the supervisor kept it as the daemon's.
    ///
    /// # Errors
    /// The launcher could not be started, died before answering twice in a row, or
    /// did not answer in time.
    pub(crate) async fn launch(
        &self,
        spec: &mut Spec,
    ) -> io::Result<(Ready, Option<super::StartConn>)> {
        if let Some(launched) = self.launch_pooled(spec).await? {
            return Ok(launched);
        }
        let mut last_error = None;
        for _ in 0..2 {
            let conn = self.connection().await?;
            let id = conn.next.fetch_add(1, Ordering::Relaxed);
            spec.request = id;
            // The supervisor forked for it connects to the daemon's claim socket, and
            // that connection is the daemon's to it (no socket bound on this path).
            let mut claimed = None;
            if let Some((claim, receiver)) = self.pool.get().and_then(super::pool::Pool::claim) {
                spec.claim = Some(claim);
                claimed = Some(receiver);
            }
            let mut frame = Vec::new();
            let encoded = Framing::Lengths
                .encode(&*spec, b"", &mut frame)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e));
            spec.claim = None;
            encoded?;
            let (done_tx, done_rx) = oneshot::channel();
            conn.pending_map().insert(id, done_tx);
            // Bounded: a launcher that stopped reading fails the spawn, not hangs it.
            let write = async { conn.stdin.lock().await.write_all(&frame).await };
            let written = match tokio::time::timeout(START_TIMEOUT, write).await {
                Ok(written) => written,
                Err(_) => {
                    conn.pending_map().remove(&id);
                    conn.replies.gone.cancel();
                    let secs = START_TIMEOUT.as_secs();
                    let msg = format!(
                        "the shim launcher did not take the launch within {secs} s; it was dropped and the next spawn starts a new one"
                    );
                    return Err(io::Error::new(io::ErrorKind::TimedOut, msg));
                }
            };
            if written.is_err() {
                conn.pending_map().remove(&id);
                conn.replies.gone.cancel();
                last_error = Some(io::Error::other("the shim launcher is gone"));
                continue;
            }
            match tokio::time::timeout(START_TIMEOUT, done_rx).await {
                Ok(Ok(ready)) => {
                    let kept = match (&ready, claimed.as_mut()) {
                        (Ready::Running { attached: true, .. }, Some(claimed)) => {
                            Some(claimed.conn(super::ATTACH_TIMEOUT).await?)
                        }
                        _ => None,
                    };
                    return Ok((ready, kept));
                }
                Ok(Err(_)) => {
                    // Its stdout closed before this launch was answered: nothing was
                    // forked for it, so it is tried once more on a new launcher.
                    last_error = Some(io::Error::other(
                        "the shim launcher died before it answered (a herd-shim of another herd release cannot read this herd's launch frames; install matching herd and herd-shim binaries)",
                    ));
                }
                Err(_) => {
                    conn.pending_map().remove(&id);
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "the session supervisor did not start within {} s",
                            START_TIMEOUT.as_secs()
                        ),
                    ));
                }
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("the shim launcher is gone")))
    }

    /// The pool, bound now if it is not yet; `None` without one (cap 0, or a socket
    /// that cannot be bound: every supervisor is then forked when its spawn comes).
    fn pool(&self) -> Option<&super::pool::Pool> {
        let (path, cap) = &self.pool_at;
        if *cap == 0 {
            return None;
        }
        if self.pool.get().is_none() {
            match super::pool::Pool::bind(path) {
                Ok(pool) => {
                    let _ = self.pool.set(pool);
                }
                Err(error) => {
                    tracing::info!(%error, path = %path.display(), "no pool of supervisors forked ahead of need");
                    return None;
                }
            }
        }
        self.pool.get()
    }

    /// The running launcher, started now when there is none (or it died).
    async fn connection(&self) -> io::Result<Arc<LauncherConn>> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref().filter(|c| !c.replies.gone.is_cancelled()) {
            return Ok(Arc::clone(conn));
        }
        let mut argv = vec![
            self.program.to_string_lossy().into_owned(),
            "--launcher".to_owned(),
        ];
        if let Some(pool) = self.pool() {
            argv.extend([
                "--pool".to_owned(),
                pool.path().to_string_lossy().into_owned(),
                "--pool-cap".to_owned(),
                self.pool_at.1.to_string(),
            ]);
        }
        let mut child = crate::spawn::spawn_shim(&argv, &BTreeMap::new())?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("the shim launcher has no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("the shim launcher has no stdout"))?;
        // The first process exits as soon as it has forked the launcher proper.
        drop(tokio::spawn(async move { child.wait().await }));
        let conn = Arc::new(LauncherConn {
            stdin: AsyncMutex::new(stdin),
            replies: Arc::new(Replies::default()),
            next: AtomicU64::new(1),
        });
        let reader = Arc::clone(&conn.replies);
        let program = self.program.display().to_string();
        drop(tokio::spawn(async move {
            let mut stdout = stdout;
            let mut frames = crate::shim::ready_reader();
            let mut buf = vec![0u8; 16 * 1024];
            'read: while let Ok(n) = stdout.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                frames.feed(&buf[..n]);
                loop {
                    match frames.next() {
                        Ok(Some(frame)) => match parse_ready(&frame.header, &program) {
                            Ok(ready) => {
                                if let Some(tx) = reader.pending_map().remove(&ready.request) {
                                    let _ = tx.send(ready.ready);
                                }
                            }
                            Err(error) => {
                                tracing::warn!(%error, "shim launcher answer not understood");
                            }
                        },
                        Ok(None) => break,
                        Err(error) => {
                            tracing::warn!(%error, "shim launcher output is not frames");
                            break 'read;
                        }
                    }
                }
            }
            reader.gone.cancel();
            reader.pending_map().clear();
        }));
        *slot = Some(Arc::clone(&conn));
        Ok(conn)
    }
}
