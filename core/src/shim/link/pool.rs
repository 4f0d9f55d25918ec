//! The daemon's side of the pool of supervisors forked ahead of need: a socket
//! (`<home>/run/pool.sock`) the launcher's pool members connect to (`shim/launcher/
//! pool.rs`), and the connections of those waiting for a spec. A launch hands its
//! spec to one of them and reads the ready answer on the same connection: the
//! launcher is neither woken nor made to fork on the spawn's path.
//!
//! Only a member of this user connects (peer uid checked). A member whose
//! connection breaks before the spec is written started nothing, and the launch
//! goes on with the next member or the launcher; once the spec is written, a
//! failure is the launch's failure, handled as the launcher's (a late answer is
//! retired by the registry). Dropping the pool closes every waiting connection,
//! and its members exit.

use crate::lock_order::Mutex;
use crate::lock_order::rank;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

use super::START_TIMEOUT;
use crate::shim::wire::Framing;
use crate::shim::{Ready, Spec};

/// `HERD_SHIM_POOL`: the most supervisors forked ahead of need, `0..=16`
/// (default [`DEFAULT_CAP`]); 0 forks every supervisor when its spawn comes.
pub(crate) const POOL_ENV: &str = "HERD_SHIM_POOL";
/// The pool's cap when `HERD_SHIM_POOL` is not set.
pub(crate) const DEFAULT_CAP: usize = 4;

/// The pool's cap from `HERD_SHIM_POOL`; a value out of range is reported and the
/// default kept.
pub(crate) fn cap_from_env() -> usize {
    let Some(value) = std::env::var_os(POOL_ENV) else {
        return DEFAULT_CAP;
    };
    match value.to_str().and_then(|v| v.parse::<usize>().ok()) {
        Some(cap) if cap <= crate::shim::launcher::MAX_POOL => cap,
        _ => {
            tracing::warn!(
                value = %value.to_string_lossy(),
                "{POOL_ENV} must be a whole number from 0 to {}; using {DEFAULT_CAP}",
                crate::shim::launcher::MAX_POOL
            );
            DEFAULT_CAP
        }
    }
}

/// The members waiting for a spec, newest last.
type Idle = Mutex<Vec<UnixStream>, { rank::SHIM_POOL }>;

/// The pool socket and its waiting members.
#[derive(Debug)]
pub(crate) struct Pool {
    path: PathBuf,
    idle: Arc<Idle>,
    accepting: tokio::task::AbortHandle,
}

/// How a launch through the pool ended.
#[derive(Debug)]
pub(crate) enum Pooled {
    /// The member's ready answer, and the connection it came on when the member kept
    /// that as the daemon's connection to its session (`Spec::attach_here`).
    Ready(Ready, Option<super::StartConn>),
    /// No member took the spec (none waited, or the one tried was gone): nothing
    /// started.
    Unsent,
}

impl Pool {
    /// Binds the pool socket at `path` (a stale one is replaced) and accepts members.
    ///
    /// # Errors
    /// The socket could not be bound.
    pub(crate) fn bind(path: &Path) -> io::Result<Pool> {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path)?;
        let idle: Arc<Idle> = Arc::new(Mutex::new(Vec::new()));
        let members = Arc::clone(&idle);
        let uid = nix::unistd::getuid().as_raw();
        let accepting = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                if stream.peer_cred().is_ok_and(|c| c.uid() == uid) {
                    lock(&members).push(stream);
                }
            }
        })
        .abort_handle();
        Ok(Pool {
            path: path.to_owned(),
            idle,
            accepting,
        })
    }

    /// The socket's path, for the launcher's `--pool`.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Hands `spec` to a waiting member and returns its ready answer; `Unsent` when
    /// no member took it.
    ///
    /// # Errors
    /// The member took the spec but its answer broke off, was not one, or came late.
    pub(crate) async fn launch(&self, spec: &Spec) -> io::Result<Pooled> {
        let mut frame = Vec::new();
        Framing::Lengths
            .encode(spec, b"", &mut frame)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        loop {
            let Some(mut stream) = lock(&self.idle).pop() else {
                return Ok(Pooled::Unsent);
            };
            // A member that is gone refuses the write (its socket is closed): the
            // next one is tried. The socket's buffer takes a spec without waiting.
            if stream.write_all(&frame).await.is_err() {
                continue;
            }
            let (ready, rest) = answer(&mut stream).await?;
            let kept = matches!(ready, Ready::Running { attached: true, .. })
                .then_some(super::StartConn { stream, rest });
            return Ok(Pooled::Ready(ready, kept));
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.accepting.abort();
        lock(&self.idle).clear();
        let _ = std::fs::remove_file(&self.path);
    }
}

fn lock(idle: &Idle) -> crate::lock_order::MutexGuard<'_, Vec<UnixStream>> {
    idle.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The ready answer a member writes on its connection (one frame), and the bytes
/// read after it (the session's first frames, when the member kept the connection).
async fn answer(stream: &mut UnixStream) -> io::Result<(Ready, Vec<u8>)> {
    let mut frames = crate::shim::ready_reader();
    let mut buf = vec![0u8; 16 * 1024];
    let read = async {
        loop {
            if let Some(frame) = frames.next().map_err(io::Error::other)? {
                return serde_json::from_slice::<crate::shim::ReadyLine>(&frame.header)
                    .map(|l| (l.ready, std::mem::take(&mut frames).into_pending()))
                    .map_err(|e| {
                        io::Error::other(format!(
                            "the pre-forked session supervisor answered something else than its ready answer ({e}); check that herd-shim belongs to this herd"
                        ))
                    });
            }
            match stream.read(&mut buf).await? {
                0 => {
                    return Err(io::Error::other(
                        "the pre-forked session supervisor closed its connection without a ready answer",
                    ));
                }
                n => frames.feed(&buf[..n]),
            }
        }
    };
    match tokio::time::timeout(START_TIMEOUT, read).await {
        Ok(answer) => answer,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the session supervisor did not start within {} s",
                START_TIMEOUT.as_secs()
            ),
        )),
    }
}
