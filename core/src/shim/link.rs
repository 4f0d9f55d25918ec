//! The daemon's side of a shim: starting one, attaching to it, and following its
//! session until the job is done (or the daemon detaches).
//!
//! One task per session runs [`follow`]: it asks the shim for the next growth of the
//! log (`want`), reads the new bytes from the log file into the tail and the watch
//! observer, and finishes with the shim's exit record. Other tasks reach the shim
//! through the session's [`Link`] (stdin, close, resize, kill), whose frames one writer
//! task sends in order.
//!
//! A shim whose socket closes without an exit record died (SIGKILL, OOM): the follower
//! says so at once, and the registry kills what it left and closes the session as
//! lost. Nothing here waits long on a shim: connecting and the hello answer are
//! bounded by [`ATTACH_TIMEOUT`], so a restore over many dead shims fails fast.

use crate::lock_order::{Mutex, MutexGuard, rank};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herd_persistence::{ExitRecord, ShimDir};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::wire::{self, FrameReader, Framing, FromShim, KeyMark, Progress, ToShim};
use super::{OLDEST_FULL_ATTACH, PROTOCOL, Spec};
use crate::reader::{Finish, Observer};
use crate::session::{ExitInfo, Session};

mod attach_socket;
#[cfg(test)]
mod compat_tests;
mod launch;
#[cfg(test)]
mod live_tests;
#[cfg(test)]
mod pending_tests;
mod pool;
pub(crate) use attach_socket::AttachSocket;
pub(crate) use launch::{Launcher, launch};

/// The longest a shim may take to start its job and print its ready answer.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest connecting to a shim and getting its hello may take.
pub(crate) const ATTACH_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest read of the log file in one go.
const READ_CHUNK_BYTES: usize = 1 << 20;
/// A catch-up that brought more than this, with nothing watching the bytes, paces the
/// next one by [`CHATTY_PACE`]: a chatty job then costs the daemon a few reads of its
/// tail a second instead of a read of every byte (the log has them all).
const CHATTY_BYTES: u64 = 64 * 1024;
/// See [`CHATTY_BYTES`].
const CHATTY_PACE: Duration = Duration::from_millis(20);

/// What a shim's hello says.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hello {
    pub(crate) protocol: u32,
    pub(crate) pid: i32,
    pub(crate) progress: Progress,
    /// How frames after the hellos are delimited.
    pub(crate) framing: Framing,
}

/// A connection to a shim that answered hello.
#[derive(Debug)]
pub(crate) struct Attached {
    pub(crate) hello: Hello,
    pub(crate) link: Arc<Link>,
    pub(crate) incoming: Incoming,
}

/// Why a shim could not be attached.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AttachError {
    /// Nothing listens on the socket (the shim is gone) or it did not answer in time.
    #[error("the session supervisor does not answer: {0}")]
    Unreachable(#[source] io::Error),
    /// It answered with a protocol this daemon does not attach to.
    #[error(
        "the session supervisor speaks shim protocol {shim} and this herd attaches to protocols {OLDEST_FULL_ATTACH} to {PROTOCOL}; it is followed by its exit record only (no live output, stdin or resize) until it ends"
    )]
    Version { shim: u32 },
}

/// Connects to the shim in `dir` and exchanges hellos.
///
/// # Errors
/// [`AttachError`].
pub(crate) async fn attach(dir: &ShimDir) -> Result<Attached, AttachError> {
    let unreachable = AttachError::Unreachable;
    let exchange = async {
        let stream = UnixStream::connect(dir.socket_path()).await?;
        let (read, mut write) = stream.into_split();
        write.write_all(&hello_line()).await?;
        let mut incoming = Incoming::new(read, false);
        loop {
            match incoming.next().await? {
                Some(FromShim::Hello {
                    protocol,
                    pid,
                    progress,
                    capabilities,
                    ..
                }) => {
                    let hello = Hello {
                        protocol,
                        pid,
                        progress,
                        framing: framing_of(&capabilities),
                    };
                    incoming.frames.set_framing(hello.framing);
                    return io::Result::Ok((hello, write, incoming));
                }
                Some(_) => {}
                None => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            }
        }
    };
    let (hello, write, incoming) = match tokio::time::timeout(ATTACH_TIMEOUT, exchange).await {
        Ok(Ok(parts)) => parts,
        Ok(Err(error)) => return Err(unreachable(error)),
        Err(_) => return Err(unreachable(io::Error::from(io::ErrorKind::TimedOut))),
    };
    if !(OLDEST_FULL_ATTACH..=PROTOCOL).contains(&hello.protocol) {
        return Err(AttachError::Version {
            shim: hello.protocol,
        });
    }
    Ok(Attached {
        hello,
        link: Link::start(write, hello.framing),
        incoming,
    })
}

/// [`attach`] to a shim that `alive` says runs. A shim whose first daemon kept the
/// connection its spec came on (`Spec::attach_here`) binds its socket only once that
/// connection closes, so a daemon started right after the last one died may find no
/// socket there yet: it is waited for, at most [`ATTACH_TIMEOUT`], while the shim
/// lives and has written no exit record.
///
/// # Errors
/// [`AttachError`], as [`attach`].
pub(crate) async fn attach_live(
    dir: &ShimDir,
    alive: impl Fn() -> bool,
) -> Result<Attached, AttachError> {
    let deadline = tokio::time::Instant::now() + ATTACH_TIMEOUT;
    let mut retry = tokio::time::interval(Duration::from_millis(5));
    loop {
        match attach(dir).await {
            Err(AttachError::Unreachable(error))
                if matches!(
                    error.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
                ) && tokio::time::Instant::now() < deadline
                    && matches!(dir.read_exit(), Ok(None))
                    && alive() =>
            {
                retry.tick().await;
            }
            attached => return attached,
        }
    }
}

/// The daemon's hello, a protocol-1 frame (a line) as every hello is.
fn hello_line() -> Vec<u8> {
    let mut hello = Vec::new();
    wire::encode(
        Framing::Lines,
        &ToShim::Hello {
            protocol: PROTOCOL,
            daemon: env!("CARGO_PKG_VERSION").to_owned(),
            capabilities: wire::capabilities(),
        },
        b"",
        &mut hello,
    );
    hello
}

/// The framing after the hellos, given the shim's capabilities.
fn framing_of(capabilities: &[String]) -> Framing {
    if wire::frames_agreed(capabilities) {
        Framing::Lengths
    } else {
        Framing::Lines
    }
}

/// The connection a supervisor forked ahead of need kept as the daemon's when its
/// spec asked (`Spec::attach_here`), and the bytes read on it after the ready answer.
#[derive(Debug)]
pub(crate) struct StartConn {
    pub(super) stream: UnixStream,
    pub(super) rest: Vec<u8>,
}

/// How the daemon reaches a shim it has just started.
#[derive(Debug)]
pub(crate) enum Reach {
    /// Connect to its socket through this descriptor, made before the launch.
    Socket(AttachSocket),
    /// The shim kept the connection its spec came on.
    Kept(StartConn),
}

/// Attaches to a shim this registry has just started (its ready answer named its pid
/// and protocol), connecting to its socket or on the connection it kept, and sends
/// hello without waiting for the answer, which the follower skips: a spawn then
/// costs no round trip to the shim.
///
/// # Errors
/// [`AttachError::Unreachable`] when the socket does not take the connection.
pub(crate) async fn attach_started(
    dir: &ShimDir,
    pid: i32,
    protocol: u32,
    reach: Reach,
) -> Result<Attached, AttachError> {
    let (stream, rest) = match reach {
        Reach::Socket(socket) => (
            socket
                .connect(&dir.socket_path(), ATTACH_TIMEOUT)
                .await
                .map_err(AttachError::Unreachable)?,
            Vec::new(),
        ),
        Reach::Kept(kept) => (kept.stream, kept.rest),
    };
    let (read, write) = stream.into_split();
    // A shim of this protocol answers the hello in kind and switches to length-prefixed
    // frames after it; the frames sent meanwhile already are.
    let framing = if protocol >= 2 {
        Framing::Lengths
    } else {
        Framing::Lines
    };
    let link = Link::start(write, framing);
    link.send_bytes(hello_line());
    let mut incoming = Incoming::new(read, framing == Framing::Lengths);
    incoming.frames.feed(&rest);
    Ok(Attached {
        hello: Hello {
            protocol,
            pid,
            progress: Progress::default(),
            framing,
        },
        link,
        incoming,
    })
}

/// The read side of a shim connection, parsed into messages.
#[derive(Debug)]
pub(crate) struct Incoming {
    read: OwnedReadHalf,
    frames: FrameReader,
    /// Switch to length-prefixed frames after the shim's hello (a line).
    frames_after_hello: bool,
}

impl Incoming {
    fn new(read: OwnedReadHalf, frames_after_hello: bool) -> Incoming {
        Incoming {
            read,
            frames: FrameReader::default(),
            frames_after_hello,
        }
    }

    /// The next message; `Ok(None)` when the shim closed the connection.
    async fn next(&mut self) -> io::Result<Option<FromShim>> {
        loop {
            match self.frames.next() {
                Ok(Some(frame)) => match serde_json::from_slice::<FromShim>(&frame.header) {
                    Ok(message) => {
                        if self.frames_after_hello && matches!(message, FromShim::Hello { .. }) {
                            self.frames_after_hello = false;
                            self.frames.set_framing(Framing::Lengths);
                        }
                        return Ok(Some(message));
                    }
                    Err(error) => {
                        tracing::debug!(%error, "shim frame not understood; skipped");
                        continue;
                    }
                },
                Ok(None) => {}
                Err(error) => return Err(io::Error::other(error)),
            }
            // The buffer lives only between readiness and the read, never across an
            // await: an idle session's follower then holds no read buffer (8 KiB of
            // daemon memory per running session otherwise).
            self.read.readable().await?;
            let mut buf = [0u8; 8 * 1024];
            match self.read.try_read(&mut buf) {
                Ok(0) => return Ok(None),
                Ok(n) => self.frames.feed(&buf[..n]),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return Err(error),
            }
        }
    }
}

/// What a request to a shim whose session is over is told.
const FINISHED: &str = "the process has already finished";

/// The sending side of a shim connection, shared by the session's callers.
#[derive(Debug)]
pub(crate) struct Link {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    /// How this link's frames after the hello are delimited.
    framing: Framing,
    pending: Mutex<Pending, { rank::SHIM_PENDING }>,
    next_id: AtomicU64,
}

/// The requests waiting for the shim's `done`, and whether anyone still reads them.
#[derive(Debug, Default)]
struct Pending {
    waiting: HashMap<u64, oneshot::Sender<Option<String>>>,
    /// Set once the follower stopped reading the shim: nobody will answer a request
    /// sent from then on, so it fails at once instead of at its deadline.
    closed: bool,
}

impl Link {
    fn start(mut write: tokio::net::unix::OwnedWriteHalf, framing: Framing) -> Arc<Link> {
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        drop(tokio::spawn(async move {
            while let Some(frame) = rx.recv().await {
                if write.write_all(&frame).await.is_err() {
                    return;
                }
            }
        }));
        Arc::new(Link {
            tx,
            framing,
            pending: Mutex::new(Pending::default()),
            next_id: AtomicU64::new(1),
        })
    }

    pub(crate) fn send(&self, message: &ToShim, body: &[u8]) -> bool {
        let mut frame = Vec::with_capacity(64 + body.len());
        match self.framing.encode(message, body, &mut frame) {
            Ok(()) => self.send_bytes(frame),
            Err(error) => {
                tracing::error!(%error, "frame to the session's supervisor not encoded");
                false
            }
        }
    }

    /// Sends bytes already framed.
    fn send_bytes(&self, frame: Vec<u8>) -> bool {
        self.tx.send(frame).is_ok()
    }

    /// Sends a request the shim answers with `done`, and waits for the answer at most
    /// `timeout`. `Ok(())` when it succeeded.
    ///
    /// # Errors
    /// The shim's reason, or why no answer came.
    pub(crate) async fn request(
        &self,
        make: impl FnOnce(u64) -> (ToShim, Vec<u8>),
        timeout: Duration,
    ) -> Result<(), String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (done_tx, done_rx) = oneshot::channel();
        {
            let mut pending = self.pending_map();
            if pending.closed {
                return Err(FINISHED.to_owned());
            }
            pending.waiting.insert(id, done_tx);
        }
        let (message, body) = make(id);
        if !self.send(&message, &body) {
            self.pending_map().waiting.remove(&id);
            return Err("the session's supervisor is not connected".to_owned());
        }
        match tokio::time::timeout(timeout, done_rx).await {
            Ok(Ok(None)) => Ok(()),
            Ok(Ok(Some(error))) => Err(error),
            Ok(Err(_)) => Err(FINISHED.to_owned()),
            Err(_) => {
                self.pending_map().waiting.remove(&id);
                Err("the process is not reading its input; nothing more was written".to_owned())
            }
        }
    }

    fn complete(&self, id: u64, error: Option<String>) {
        if let Some(tx) = self.pending_map().waiting.remove(&id) {
            let _ = tx.send(error);
        }
    }

    /// Fails every request still waiting, and every one sent from now on (the
    /// follower no longer reads the shim's answers).
    fn fail_pending(&self) {
        let mut pending = self.pending_map();
        pending.closed = true;
        pending.waiting.clear();
    }

    fn pending_map(&self) -> MutexGuard<'_, Pending> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How following a shim ended.
#[derive(Debug)]
pub(crate) enum Followed {
    /// The job is done; its exit record was taken.
    Finished(Finish),
    /// The daemon detaches: the shim and its job run on.
    Detached,
    /// The shim died without an exit record; the text says what was seen.
    SupervisorDied(String),
}

/// Where the follower is in the log.
#[derive(Debug)]
pub(crate) struct Cursor {
    /// Bytes of the log read into the tail so far.
    pub(crate) log_bytes: u64,
    /// The shim's ingest counters as last taken.
    pub(crate) progress: Progress,
}

/// Follows a supervised session until its job is done, its shim dies or `detach`
/// fires.
#[expect(clippy::too_many_arguments, reason = "one call site per start path")]
pub(crate) async fn follow(
    session: Arc<Session>,
    mut incoming: Incoming,
    link: Arc<Link>,
    mut cursor: Cursor,
    mut observer: Option<Box<dyn Observer>>,
    dir: ShimDir,
    shim_pid: i32,
    detach: CancellationToken,
) -> Followed {
    let mut kill_rx = session.kill_requested.subscribe();
    let mut log: Option<File> = None;
    want(&link, &session, &cursor);
    if *kill_rx.borrow_and_update() {
        link.send(&kill_message(&session), b"");
    }
    // When set, the next `want` waits until then (a chatty job without watchers).
    let mut paced: Option<tokio::time::Instant> = None;
    let outcome = loop {
        let message = tokio::select! {
            m = incoming.next() => m,
            () = async {
                match paced {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {
                paced = None;
                want(&link, &session, &cursor);
                continue;
            }
            changed = kill_rx.changed() => {
                if changed.is_ok() && *kill_rx.borrow_and_update() {
                    link.send(&kill_message(&session), b"");
                }
                continue;
            }
            () = detach.cancelled() => break Followed::Detached,
        };
        match message {
            Ok(Some(FromShim::Grew { progress, mark })) => {
                let before = cursor.progress.total_ingested;
                let grew = Grew { progress, mark };
                catch_up(&session, &mut log, &mut cursor, grew, &mut observer).await;
                if observer.is_none() && cursor.progress.total_ingested - before > CHATTY_BYTES {
                    paced = Some(tokio::time::Instant::now() + CHATTY_PACE);
                } else {
                    want(&link, &session, &cursor);
                }
            }
            Ok(Some(FromShim::Done { id, error })) => link.complete(id, error),
            Ok(Some(FromShim::Exit {
                record,
                progress,
                mark,
            })) => {
                let grew = Grew { progress, mark };
                catch_up(&session, &mut log, &mut cursor, grew, &mut observer).await;
                break Followed::Finished(finish_of(record));
            }
            Ok(Some(FromShim::Error { message })) => {
                tracing::debug!(%message, "shim reported a protocol error");
            }
            Ok(Some(FromShim::Hello { .. })) => {}
            Ok(None) | Err(_) => {
                // The connection ended without an exit frame: the record on disk
                // decides whether the shim finished or died.
                break match dir.read_exit() {
                    Ok(Some(record)) => {
                        let grew = Grew {
                            progress: progress_of(&record),
                            mark: None,
                        };
                        catch_up(&session, &mut log, &mut cursor, grew, &mut observer).await;
                        Followed::Finished(finish_of(record))
                    }
                    Ok(None) => Followed::SupervisorDied(format!(
                        "its supervisor (herd-shim, pid {shim_pid}) died before the job ended"
                    )),
                    Err(error) => Followed::SupervisorDied(format!(
                        "its supervisor (herd-shim, pid {shim_pid}) left an unreadable exit record: {error}"
                    )),
                };
            }
        }
    };
    link.fail_pending();
    if !matches!(outcome, Followed::Detached)
        && let Some(observer) = observer.as_mut()
    {
        observer.end();
    }
    outcome
}

/// Asks the shim for one `grew` once its log passes the cursor, with the key mark
/// a tail's size before its end (see [`catch_up`]).
fn want(link: &Link, session: &Session, cursor: &Cursor) {
    link.send(
        &ToShim::Want {
            after: cursor.progress.total_ingested,
            mark_lag: Some(mark_lag(session.tail().bound())),
        },
        b"",
    );
}

/// How far before its log's end a follower wants the shim's key mark, for a tail
/// of `tail_bytes`: the tail and the context a route reads before it
/// ([`catch_up`]).
pub(crate) fn mark_lag(tail_bytes: usize) -> u64 {
    tail_bytes.saturating_add(herd_hooks::KEY_LOOKBACK_BYTES) as u64
}

/// What a shim said its log holds: its counters, and the key mark it had.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grew {
    pub(crate) progress: Progress,
    pub(crate) mark: Option<KeyMark>,
}

/// The kill request for the shim, naming the kill's source (the shim finishes the
/// kill, daemon or no daemon, and records the source).
fn kill_message(session: &Session) -> ToShim {
    ToShim::Kill {
        source: session
            .state()
            .kill_source
            .map(|source| source.as_str().to_owned()),
    }
}

/// The counters an exit record implies (the log holds what was kept).
pub(crate) fn progress_of(record: &ExitRecord) -> Progress {
    Progress {
        log_bytes: record.total_ingested.saturating_sub(record.bytes_not_kept),
        total_ingested: record.total_ingested,
        bytes_not_kept: record.bytes_not_kept,
    }
}

/// The choke point's view of an exit record.
pub(crate) fn finish_of(record: ExitRecord) -> Finish {
    Finish {
        exit: Ok(ExitInfo {
            code: record.code,
            signal: record.signal,
        }),
        descendants_alive: record.descendants_alive,
        leftovers: record.leftovers,
        killed_by: record
            .killed_by
            .as_deref()
            .and_then(crate::config::KillSource::from_name),
    }
}

/// Reads the log from the cursor up to `grew`'s counters into the tail and the
/// observer.
///
/// Without an observer only the last tail's worth of a large backlog is held: the
/// rest is in the log file and counted, never kept in memory. The session's key
/// index reads it (see [`pass_over`]), from the shim's key mark on when the shim
/// gave one after the cursor (its own index read the bytes before as it wrote
/// them): then only the context a route reads before the tail is read back.
pub(crate) async fn catch_up(
    session: &Session,
    log: &mut Option<File>,
    cursor: &mut Cursor,
    grew: Grew,
    observer: &mut Option<Box<dyn Observer>>,
) {
    let progress = grew.progress;
    let target = progress.log_bytes;
    if target > cursor.log_bytes {
        if log.is_none() {
            *log = File::open(&session.log_path).ok();
        }
        if observer.is_none() {
            let bound = session.tail().bound() as u64;
            let backlog = target - cursor.log_bytes;
            if backlog > 2 * bound {
                let skip_to = target - bound;
                let in_reach = |m: &KeyMark| m.at >= cursor.log_bytes && m.at <= skip_to;
                if let Some(mark) = grew.mark.filter(in_reach) {
                    tracing::debug!(
                        target: "herd::follow",
                        session_id = %session.id,
                        skipped = mark.at - cursor.log_bytes,
                        key_open = mark.open,
                        "went on from the shim's key mark"
                    );
                    session
                        .tail()
                        .skip_known(mark.at - cursor.log_bytes, mark.open);
                    cursor.log_bytes = mark.at;
                }
                pass_over(session, log.as_ref(), cursor, skip_to - cursor.log_bytes).await;
            }
        }
        let mut buf = Vec::new();
        while cursor.log_bytes < target {
            let Some(file) = log.as_mut() else {
                // No log to read (it could not be created): the bytes are counted.
                session.tail().count_not_kept(target - cursor.log_bytes);
                cursor.log_bytes = target;
                break;
            };
            let want = usize::try_from(target - cursor.log_bytes)
                .unwrap_or(usize::MAX)
                .min(READ_CHUNK_BYTES);
            buf.resize(want, 0);
            let n = match read_at(file, cursor.log_bytes, &mut buf) {
                Ok(0) | Err(_) => {
                    session.tail().count_not_kept(target - cursor.log_bytes);
                    cursor.log_bytes = target;
                    break;
                }
                Ok(n) => n,
            };
            let chunk = &buf[..n];
            session.tail().push(chunk, 0);
            if let Some(observer) = observer.as_mut() {
                observer.output(chunk);
            }
            cursor.log_bytes += n as u64;
            if cursor.log_bytes < target {
                tokio::task::yield_now().await;
            }
        }
    }
    let not_kept = progress
        .bytes_not_kept
        .saturating_sub(cursor.progress.bytes_not_kept);
    if not_kept > 0 {
        session.tail().count_not_kept(not_kept);
    }
    cursor.progress = progress;
}

/// How much of a backlog [`pass_over`] reads at a time: small enough to stay in
/// the cache while the key index's passes read it.
const PASS_CHUNK_BYTES: usize = 128 * 1024;

/// Moves the cursor `n` bytes on without holding them in the tail: they are
/// counted, and the key index reads them from the log (a vectorised search for what
/// could open a key while none is open), so the key state after a chatty job's
/// skipped backlog stays known and no route reads the whole log back to learn it
/// (a tail whose lines could all be key body, `yes` output, would otherwise send
/// every look-back to the log's start). What the log cannot give goes by unseen
/// (the index starts again after it).
async fn pass_over(session: &Session, log: Option<&File>, cursor: &mut Cursor, n: u64) {
    use std::os::unix::fs::FileExt;
    let end = cursor.log_bytes + n;
    if let Some(file) = log {
        let mut buf = vec![0; PASS_CHUNK_BYTES];
        while cursor.log_bytes < end {
            let want = usize::try_from(end - cursor.log_bytes)
                .unwrap_or(usize::MAX)
                .min(buf.len());
            let got = match file.read_at(&mut buf[..want], cursor.log_bytes) {
                Ok(0) => break,
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            session.tail().pass(&buf[..got]);
            cursor.log_bytes += got as u64;
            tokio::task::yield_now().await;
        }
    }
    session.tail().skip(end - cursor.log_bytes);
    cursor.log_bytes = end;
}

fn read_at(file: &mut File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    file.seek(SeekFrom::Start(offset))?;
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The argv that starts the shim program.
pub(crate) fn shim_argv(program: &Path) -> Vec<String> {
    vec![program.to_string_lossy().into_owned()]
}

/// Builds the launch spec for a session.
#[expect(
    clippy::too_many_arguments,
    reason = "a plain record of the spawn's parts"
)]
pub(crate) fn spec(
    session_id: &str,
    dir: &ShimDir,
    argv: Vec<String>,
    env: &BTreeMap<OsString, OsString>,
    cwd: PathBuf,
    pty: Option<(u16, u16)>,
    log_path: PathBuf,
    log_cap_bytes: u64,
    idle_drain: Duration,
) -> Spec {
    Spec {
        protocol: PROTOCOL,
        request: 0,
        session_id: session_id.to_owned(),
        dir: dir.path().to_path_buf(),
        argv,
        env: env
            .iter()
            .map(|(k, v)| (super::EnvText::of(k), super::EnvText::of(v)))
            .collect(),
        cwd,
        pty,
        log_path,
        log_cap_bytes,
        idle_drain_ms: u64::try_from(idle_drain.as_millis()).unwrap_or(u64::MAX),
        deadline_unix_ms: None,
        kill_grace_ms: 0,
        force_subreaper: false,
        force_freeze: false,
        kill_leftovers: false,
        limits: crate::Limits::default(),
        mark_lag: None,
        attach_here: false,
        claim: None,
    }
}
