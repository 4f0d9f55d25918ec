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
//!
//! The pool also binds the claim socket (`<home>/run/claim.sock`): a supervisor the
//! launcher forks (no member waited) connects there and sends its launch's token,
//! and that connection is handed to the launch, so no spawn binds or connects to a
//! socket of its own. A connection whose token no launch waits for is closed; its
//! supervisor then binds its socket, as when its daemon dies.

use crate::lock_order::Mutex;
use crate::lock_order::rank;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::oneshot;

use super::{START_TIMEOUT, StartConn};
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

/// The launches whose supervisor the launcher forks, waiting for its claim, by token.
type Claims = Mutex<HashMap<u64, oneshot::Sender<StartConn>>, { rank::SHIM_CLAIMS }>;

/// How long a supervisor that connected to the claim socket may take to send its
/// token.
const CLAIM_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// The pool socket and its waiting members, and the claim socket
/// (`<home>/run/claim.sock`) a supervisor the launcher forks connects to: its
/// connection is then the daemon's connection to it, as a member's is.
#[derive(Debug)]
pub(crate) struct Pool {
    path: BoundFile,
    idle: Arc<Idle>,
    accepting: tokio::task::AbortHandle,
    claim_path: BoundFile,
    claims: Arc<Claims>,
    claiming: Option<tokio::task::AbortHandle>,
}

/// A launch's claim on the connection of the supervisor the launcher forks for it;
/// dropping it withdraws the claim.
#[derive(Debug)]
pub(crate) struct Claimed {
    token: u64,
    claims: Arc<Claims>,
    conn: oneshot::Receiver<StartConn>,
}

impl Claimed {
    /// The supervisor's connection, once it claimed it (at most `timeout`).
    pub(crate) async fn conn(&mut self, timeout: Duration) -> io::Result<StartConn> {
        match tokio::time::timeout(timeout, &mut self.conn).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(_)) => Err(io::Error::other(
                "the claim of the session supervisor's connection was dropped",
            )),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the session supervisor did not connect to the daemon's claim socket",
            )),
        }
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        lock_claims(&self.claims).remove(&self.token);
    }
}

/// How a launch through the pool ended.
#[derive(Debug)]
pub(crate) enum Pooled {
    /// The member's ready answer, and the connection it came on when the member kept
    /// that as the daemon's connection to its session (`Spec::attach_here`).
    Ready(Ready, Option<StartConn>),
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
        let listener = bind_fresh(path)?;
        let idle: Arc<Idle> = Arc::new(Mutex::new(Vec::new()));
        let members = Arc::clone(&idle);
        let uid = nix::unistd::getuid().as_raw();
        let accepting = tokio::spawn(async move {
            loop {
                let stream = accept_next(&listener).await;
                if stream.peer_cred().is_ok_and(|c| c.uid() == uid) {
                    lock(&members).push(stream);
                }
            }
        })
        .abort_handle();
        let claim_path = path.with_file_name("claim.sock");
        let claims: Arc<Claims> = Arc::new(Mutex::new(HashMap::new()));
        let claiming = accept_claims(&claim_path, uid, &claims);
        Ok(Pool {
            path: BoundFile::of(path.to_owned()),
            idle,
            accepting,
            claim_path: BoundFile::of(claim_path),
            claims,
            claiming,
        })
    }

    /// A claim for a supervisor the launcher forks: the spec's `claim` and the
    /// receiver of its connection; `None` without a claim socket.
    pub(crate) fn claim(&self) -> Option<((PathBuf, u64), Claimed)> {
        self.claiming.as_ref()?;
        let mut claims = lock_claims(&self.claims);
        let token = loop {
            let token = fastrand::u64(..);
            if !claims.contains_key(&token) {
                break token;
            }
        };
        let (tx, rx) = oneshot::channel();
        claims.insert(token, tx);
        drop(claims);
        Some((
            (self.claim_path.path.clone(), token),
            Claimed {
                token,
                claims: Arc::clone(&self.claims),
                conn: rx,
            },
        ))
    }

    /// The socket's path, for the launcher's `--pool`.
    pub(crate) fn path(&self) -> &Path {
        &self.path.path
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
                .then_some(StartConn { stream, rest });
            return Ok(Pooled::Ready(ready, kept));
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.accepting.abort();
        lock(&self.idle).clear();
        self.path.remove();
        if let Some(claiming) = &self.claiming {
            claiming.abort();
            self.claim_path.remove();
        }
    }
}

/// A socket file this pool bound, known by its inode: a daemon that ends after the
/// next one started (its runtime torn down once the home's lock is free) removes
/// only its own files, never the sockets the next daemon bound at the same paths.
#[derive(Debug)]
struct BoundFile {
    path: PathBuf,
    id: Option<(u64, u64)>,
}

impl BoundFile {
    fn of(path: PathBuf) -> BoundFile {
        let id = file_id(&path);
        BoundFile { path, id }
    }

    fn remove(&self) {
        if self.id.is_some() && file_id(&self.path) == self.id {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The device and inode of the file at `path` (not following a link).
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Binds the claim socket at `path` (a stale one is replaced) and hands each
/// connection of this user whose token is claimed to its launch; `None` when it
/// cannot be bound (every supervisor the launcher forks binds its own socket then).
fn accept_claims(path: &Path, uid: u32, claims: &Arc<Claims>) -> Option<tokio::task::AbortHandle> {
    let listener = match bind_fresh(path) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::info!(%error, path = %path.display(), "no claim socket; supervisors the launcher forks bind their own");
            return None;
        }
    };
    let claims = Arc::clone(claims);
    let task = tokio::spawn(async move {
        loop {
            let stream = accept_next(&listener).await;
            if !stream.peer_cred().is_ok_and(|c| c.uid() == uid) {
                continue;
            }
            let claims = Arc::clone(&claims);
            // A supervisor that connected but says nothing delays no other claim.
            drop(tokio::spawn(async move {
                if let Ok(Ok((token, conn))) =
                    tokio::time::timeout(CLAIM_READ_TIMEOUT, read_claim(stream)).await
                    && let Some(launch) = lock_claims(&claims).remove(&token)
                {
                    // A launch that gave up has dropped its receiver: the connection
                    // closes, and the supervisor binds its socket.
                    let _ = launch.send(conn);
                }
            }));
        }
    });
    Some(task.abort_handle())
}

/// A listener bound at `path`, a stale socket there replaced (the home's lock
/// says no other daemon serves it), mode 0600 like the daemon's own socket (its
/// directory is 0700 and each peer's uid is checked too).
fn bind_fresh(path: &Path) -> io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// The pause after a failed accept before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// The next connection on `listener`. A failed accept (the daemon out of
/// descriptors) ends no loop: the socket keeps its queue, and the accept is tried
/// again after [`ACCEPT_BACKOFF`] (at once it would spin while the error lasts).
async fn accept_next(listener: &UnixListener) -> UnixStream {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => return stream,
            Err(error) => {
                tracing::debug!(%error, "a supervisor's connection not accepted yet");
                back_off().await;
            }
        }
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "a back-off after a failed accept (out of descriptors), not a synchronisation"
)]
async fn back_off() {
    tokio::time::sleep(ACCEPT_BACKOFF).await;
}

/// The token a supervisor sends first on the claim socket, and its connection with
/// the bytes read after the token.
async fn read_claim(mut stream: UnixStream) -> io::Result<(u64, StartConn)> {
    let (header, rest) = first_frame(&mut stream)
        .await?
        .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
    let claim: crate::shim::Claim = serde_json::from_slice(&header).map_err(io::Error::other)?;
    Ok((claim.token, StartConn { stream, rest }))
}

/// The header of the first frame a supervisor writes on a fresh connection, and
/// the bytes read after that frame (its next frames); `None` when it closes first.
async fn first_frame(stream: &mut UnixStream) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut frames = crate::shim::ready_reader();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if let Some(frame) = frames.next().map_err(io::Error::other)? {
            return Ok(Some((frame.header, frames.into_pending())));
        }
        match stream.read(&mut buf).await? {
            0 => return Ok(None),
            n => frames.feed(&buf[..n]),
        }
    }
}

fn lock_claims(
    claims: &Claims,
) -> crate::lock_order::MutexGuard<'_, HashMap<u64, oneshot::Sender<StartConn>>> {
    claims
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock(idle: &Idle) -> crate::lock_order::MutexGuard<'_, Vec<UnixStream>> {
    idle.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The ready answer a member writes on its connection (one frame), and the bytes
/// read after it (the session's first frames, when the member kept the connection).
async fn answer(stream: &mut UnixStream) -> io::Result<(Ready, Vec<u8>)> {
    let read = async {
        let Some((header, rest)) = first_frame(stream).await? else {
            return Err(io::Error::other(
                "the pre-forked session supervisor closed its connection without a ready answer",
            ));
        };
        serde_json::from_slice::<crate::shim::ReadyLine>(&header)
            .map(|l| (l.ready, rest))
            .map_err(|e| {
                io::Error::other(format!(
                    "the pre-forked session supervisor answered something else than its ready answer ({e}); check that herd-shim belongs to this herd"
                ))
            })
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

#[cfg(test)]
mod tests {
    use super::Pool;

    #[tokio::test]
    async fn a_pool_dropped_after_the_next_daemon_bound_leaves_the_next_daemons_sockets() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let path = tmp.path().join("pool.sock");
        let first = Pool::bind(&path).expect("the first daemon's pool");
        let claim = tmp.path().join("claim.sock");
        assert!(
            claim.exists(),
            "the claim socket is bound beside the pool's"
        );
        for socket in [&path, &claim] {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(socket)
                .expect("the socket")
                .permissions()
                .mode();
            assert_eq!(
                mode & 0o777,
                0o600,
                "{} is the owner's only",
                socket.display()
            );
        }
        // The next daemon replaces both sockets while the first is still tearing down.
        let second = Pool::bind(&path).expect("the next daemon's pool");
        drop(first);
        assert!(path.exists(), "the next daemon's pool socket is left");
        assert!(claim.exists(), "the next daemon's claim socket is left");
        drop(second);
        assert!(!path.exists(), "a pool removes its own socket");
        assert!(!claim.exists(), "a pool removes its own claim socket");
    }
}
