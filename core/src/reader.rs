//! The per-session reader: one task that ingests the child's output and waits for its
//! exit, then hands the session to the registry's choke point.
//!
//! Pipeline per chunk: PTY query responder (PTY mode; replies written back) → shell
//! noise filter → log file → in-memory tail → the optional [`Observer`] (watch
//! matching; it sees exactly the bytes the tail got, after they were stored). The component knows nothing of the
//! registry beyond the `Finish` it returns, so it can later move into a per-session
//! shim process.
//!
//! Ordering: the direct child's exit is recorded as soon as it is collected, but
//! the session finishes only when the reader is done: at end-of-file, or once the pipe
//! has stayed idle for `idle_drain` after the exit (a descendant holds it open), or at
//! once after a kill (only what is already buffered is drained). These are the session
//! machine's rules (`crate::machine`), which the shim's loop follows too. Nobody closes
//! the pipe under the reader; it owns its end.
//!
//! The time limit is the machine's too: the reader gives it the session's deadline,
//! sleeps until its timeout (which rereads the wall clock at least every
//! `machine::DEADLINE_RECHECK`), and when it answers `RequestKill` hands the kill to
//! [`Supervision::killer`], the registry's tree kill (TERM, the grace, KILL, as
//! `machine::KillCourse` runs it), whose request then comes back to the machine as any
//! kill's does. There is no other timer for it.

use std::io;
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;
use tokio::task::JoinHandle;

use crate::config::KillSource;
use crate::machine::{Action, Event, Machine, Now, Rules};
use crate::noise::NoiseFilter;
use crate::output::LogWriter;
use crate::session::{ExitInfo, Session};
use crate::spawn::{self, MasterFd};

/// The smallest read buffer; grown when reads fill it.
const MIN_READ_BYTES: usize = 64 * 1024;
/// The largest read buffer.
const MAX_READ_BYTES: usize = 1024 * 1024;
/// Reads per readiness wake before yielding back to the runtime.
const READS_PER_TURN: usize = 32;

/// Where the output comes from.
#[derive(Debug)]
pub(crate) enum Source {
    Pipe {
        rx: pipe::Receiver,
        raised: bool,
    },
    Pty {
        master: Arc<AsyncFd<MasterFd>>,
        scanner: herd_pty::Scanner,
    },
    /// No output to read (the reader was started without a source).
    Closed,
}

impl Source {
    async fn ready(&self) -> io::Result<()> {
        match self {
            Source::Pipe { rx, .. } => rx.readable().await,
            Source::Pty { master, .. } => master.readable().await.map(|mut g| g.retain_ready()),
            Source::Closed => std::future::pending().await,
        }
    }

    /// One non-blocking read; `Ok(0)` is end-of-file (EIO on a PTY master counts).
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Source::Pipe { rx, raised } => {
                let n = rx.try_read(buf)?;
                if !*raised && n >= MIN_READ_BYTES {
                    spawn::raise_pipe_buffer(rx.as_fd());
                    *raised = true;
                }
                Ok(n)
            }
            Source::Pty { master, .. } => {
                match master.try_io(Interest::READABLE, |fd| {
                    nix::unistd::read(fd.as_fd(), buf).map_err(io::Error::from)
                }) {
                    Err(e) if e.raw_os_error() == Some(libc::EIO) => Ok(0),
                    other => other,
                }
            }
            Source::Closed => Ok(0),
        }
    }
}

/// How the direct child's exit is collected.
#[derive(Debug)]
pub(crate) enum Waiter {
    Tokio(tokio::process::Child),
    Blocking(JoinHandle<io::Result<std::process::ExitStatus>>),
}

impl Waiter {
    /// Cancel-safe: may be polled again after being dropped mid-wait.
    async fn wait(&mut self) -> io::Result<ExitInfo> {
        let status = match self {
            Waiter::Tokio(child) => child.wait().await?,
            Waiter::Blocking(handle) => handle.await.map_err(io::Error::other)??,
        };
        Ok(ExitInfo {
            code: status.code(),
            signal: status.signal(),
        })
    }
}

/// Sees every ingested chunk after it reached the log and the tail, and the end of the
/// stream; watch matching runs here.
pub(crate) trait Observer: Send {
    /// One ingested chunk.
    fn output(&mut self, bytes: &[u8]);
    /// The stream ended; a held partial line is complete now.
    fn end(&mut self);
}

/// Two observers, each seeing everything (watch matching beside readiness or run
/// counting).
pub(crate) struct Both(pub(crate) Box<dyn Observer>, pub(crate) Box<dyn Observer>);

impl Observer for Both {
    fn output(&mut self, bytes: &[u8]) {
        self.0.output(bytes);
        self.1.output(bytes);
    }

    fn end(&mut self) {
        self.0.end();
        self.1.end();
    }
}

/// Where ingested bytes go: the log file, then the tail, then the observer.
struct Sink {
    log: LogWriter,
    observer: Option<Box<dyn Observer>>,
}

/// How an in-process session is supervised: the rules the registry fixes at spawn, and
/// who carries out the kill the session machine decides (the time limit).
pub(crate) struct Supervision {
    /// How long output may stay idle after the exit before the session ends.
    pub(crate) idle_drain: Duration,
    /// The time limit's wall-clock deadline.
    pub(crate) deadline: Option<SystemTime>,
    /// Starts the registry's tree kill of the session with this source; it must not
    /// wait for it (the reader is what lets a killed session finish).
    pub(crate) killer: Box<dyn Fn(KillSource) + Send>,
}

impl std::fmt::Debug for Supervision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervision")
            .field("idle_drain", &self.idle_drain)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// What the reader hands the choke point.
#[derive(Debug)]
pub(crate) struct Finish {
    /// The exit status, or the error collecting it.
    pub(crate) exit: Result<ExitInfo, io::Error>,
    /// Members of the session's process group still alive when the reader stopped
    /// without end-of-file.
    pub(crate) descendants_alive: Vec<i32>,
    /// Who killed the job when the registry did not: a shim that enforced the time
    /// limit itself says so in its exit record.
    pub(crate) killed_by: Option<crate::KillSource>,
    /// Processes of the tree alive when the main process was done, held by the
    /// session's shim.
    pub(crate) leftovers: Vec<herd_persistence::Leftover>,
}

/// Runs the reader until the session is done with output and exit.
///
/// When it is done is the session machine's rule (`crate::machine`, shared with the
/// shim): this loop tells it about output, end-of-file, the exit and kill requests, and
/// sleeps until its timeout (the idle drain, the time limit). Kills are carried out by
/// the registry's tree kill, not here; the time limit's is asked of it through
/// [`Supervision::killer`].
///
/// With no `source` (a re-adopted session whose output could not be reopened) the
/// output counts as ended at end-of-file from the start, and the reader only waits for
/// the exit and the time limit.
pub(crate) async fn run(
    session: Arc<Session>,
    source: Option<Source>,
    mut waiter: Waiter,
    log: LogWriter,
    observer: Option<Box<dyn Observer>>,
    supervision: Supervision,
) -> Finish {
    let mut sink = Sink { log, observer };
    let log = &mut sink;
    let mut noise = NoiseFilter::default();
    let mut buf: Vec<u8> = Vec::new();
    let start = Now::read();
    let mut machine: Machine<io::Result<ExitInfo>> = Machine::new(rules(&supervision), start);
    let mut kill_rx = session.kill_requested.subscribe();
    let mut kill_open = true;
    let mut exit = None;
    // Without a source the output is over before it began.
    let (mut eof, mut output_ended) = (source.is_none(), source.is_none());
    if output_ended {
        for action in machine.handle(start, Event::OutputEnded { eof: true }) {
            act_without_output(action, &mut exit, &supervision);
        }
    }
    let mut source = source.unwrap_or(Source::Closed);
    let mut event = if *kill_rx.borrow_and_update() {
        Event::Kill(None)
    } else {
        Event::Tick
    };
    loop {
        let now = Now::read();
        for action in machine.handle(now, event) {
            match action {
                // After a kill only what is already buffered is read.
                Action::DrainNow => drain_now(&mut source, &mut buf, &session, log, &mut noise),
                other => act_without_output(other, &mut exit, &supervision),
            }
        }
        if !machine.reading() && !output_ended {
            output_ended = true;
            end_output(&mut source, &session, log, &mut noise);
        }
        if machine.finished() {
            break;
        }
        let wake = machine.poll_timeout(now).unwrap_or(now.at);
        event = tokio::select! {
            ready = source.ready(), if machine.reading() => {
                match ready.and_then(|()| read_burst(&mut source, &mut buf, &session, log, &mut noise)) {
                    Ok(Burst::Eof) => {
                        eof = true;
                        Event::OutputEnded { eof: true }
                    }
                    Ok(Burst::Drained | Burst::More) => Event::Output,
                    Err(error) => {
                        tracing::warn!(%error, "session output unreadable; finishing");
                        Event::OutputEnded { eof: false }
                    }
                }
            }
            status = waiter.wait(), if !machine.exited() => {
                if let Ok(info) = &status {
                    session.state().exit = Some(*info);
                }
                Event::Exited(status)
            }
            changed = kill_rx.changed(), if kill_open => match changed {
                Ok(()) if *kill_rx.borrow_and_update() => Event::Kill(None),
                Ok(()) => Event::Tick,
                Err(_) => {
                    kill_open = false;
                    Event::Tick
                }
            },
            () = tokio::time::sleep_until(tokio::time::Instant::from_std(wake)),
                if machine.poll_timeout(now).is_some() => Event::Tick,
        };
    }
    if !output_ended {
        end_output(&mut source, &session, log, &mut noise);
    }
    drop(source);
    let exit = match exit {
        Some(e) => e,
        None => waiter.wait().await,
    };
    let descendants_alive = if eof {
        Vec::new()
    } else {
        group_members(session.pgid)
    };
    Finish {
        exit,
        descendants_alive,
        killed_by: None,
        leftovers: Vec::new(),
    }
}

/// The session machine's rules for an in-process session: its time limit, and no kills
/// of its own (the registry's tree kill carries them out, the time limit's included).
fn rules(supervision: &Supervision) -> Rules {
    Rules {
        idle_drain: supervision.idle_drain,
        deadline: supervision.deadline,
        kill: None,
        kill_leftovers: false,
        linger_recheck: Duration::ZERO,
    }
}

/// Carries out an action of the machine that does not read the output.
fn act_without_output(
    action: Action<io::Result<ExitInfo>>,
    exit: &mut Option<io::Result<ExitInfo>>,
    supervision: &Supervision,
) {
    match action {
        Action::Finish { exit: status, .. } => *exit = status,
        Action::RequestKill { source } => {
            tracing::debug!(
                source = source.as_str(),
                "the session machine asks for a kill"
            );
            (supervision.killer)(source);
        }
        // Nothing is buffered where there is no output.
        Action::DrainNow => {}
        // The reader carries out no kills itself and holds no tree (no kill rules:
        // the machine gives none of these).
        Action::Terminate { .. }
        | Action::Escalate { .. }
        | Action::LookAtTree
        | Action::Survivors
        | Action::Release => {}
    }
}

/// The output is done: held bytes are flushed and the observer told.
fn end_output(source: &mut Source, session: &Session, log: &mut Sink, noise: &mut NoiseFilter) {
    let rest = flush(source, noise);
    ingest(session, log, &rest);
    if let Some(observer) = log.observer.as_mut() {
        observer.end();
    }
}

/// How a burst of reads ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Burst {
    /// End of file.
    Eof,
    /// Nothing more to read right now.
    Drained,
    /// A turn's worth was read; more may be waiting.
    More,
}

/// Reads until the source would block, or a turn's worth.
fn read_burst(
    source: &mut Source,
    buf: &mut Vec<u8>,
    session: &Session,
    log: &mut Sink,
    noise: &mut NoiseFilter,
) -> io::Result<Burst> {
    // Reads are batched into one buffer and processed together, so a PTY's small
    // reads cost one log write and one tail update per burst, not per read.
    let mut filled = 0;
    let mut outcome = Burst::More;
    for _ in 0..READS_PER_TURN {
        if buf.is_empty() {
            buf.resize(MIN_READ_BYTES, 0);
        }
        if filled == buf.len() {
            if buf.len() < MAX_READ_BYTES {
                buf.resize(buf.len() * 2, 0);
            } else {
                process(source, &buf[..filled], session, log, noise);
                filled = 0;
            }
        }
        match source.try_read(&mut buf[filled..]) {
            Ok(0) => {
                outcome = Burst::Eof;
                break;
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                outcome = Burst::Drained;
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                process(source, &buf[..filled], session, log, noise);
                return Err(e);
            }
        }
    }
    if filled > 0 {
        process(source, &buf[..filled], session, log, noise);
    }
    // A session that went quiet gives its grown read buffer back.
    if outcome == Burst::Drained && buf.len() > MIN_READ_BYTES && filled < buf.len() / 4 {
        *buf = Vec::new();
    }
    Ok(outcome)
}

/// Reads what is already buffered, up to 16 MiB, without waiting.
fn drain_now(
    source: &mut Source,
    buf: &mut Vec<u8>,
    session: &Session,
    log: &mut Sink,
    noise: &mut NoiseFilter,
) {
    for _ in 0..16 {
        if read_burst(source, buf, session, log, noise).ok() != Some(Burst::More) {
            return;
        }
    }
}

/// Passes one chunk through the responder and the noise filter into the sinks.
fn process(
    source: &mut Source,
    chunk: &[u8],
    session: &Session,
    log: &mut Sink,
    noise: &mut NoiseFilter,
) {
    match source {
        Source::Pipe { .. } | Source::Closed => {
            let kept = noise.feed(chunk);
            ingest(session, log, &kept);
        }
        Source::Pty { master, scanner } => {
            let attached = *session
                .terminals
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                > 0;
            scanner.set_passthrough(attached);
            let scan = scanner.feed(chunk);
            if !scan.replies.is_empty() {
                write_replies(master, &scan.replies);
            }
            let kept = noise.feed(&scan.output);
            ingest(session, log, &kept);
        }
    }
}

/// Writes terminal replies back to the PTY without waiting; replies are a few bytes
/// and the terminal's input queue has room for them unless the program stopped
/// reading, in which case it is not waiting for the answer either.
fn write_replies(master: &AsyncFd<MasterFd>, mut replies: &[u8]) {
    while !replies.is_empty() {
        let written = master.try_io(Interest::WRITABLE, |fd| {
            nix::unistd::write(fd.as_fd(), replies).map_err(io::Error::from)
        });
        match written {
            Ok(n) => replies = &replies[n..],
            Err(error) => {
                tracing::debug!(%error, "pty reply not written");
                return;
            }
        }
    }
}

/// Flushes held bytes at end of stream: a partial escape, a held partial line.
fn flush(source: &mut Source, noise: &mut NoiseFilter) -> Vec<u8> {
    let mut out = Vec::new();
    if let Source::Pty { scanner, .. } = source {
        let held = scanner.flush();
        out.extend_from_slice(&noise.feed(&held));
    }
    out.extend(noise.flush());
    out
}

/// Appends kept bytes to the log and the tail.
fn ingest(session: &Session, sink: &mut Sink, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    let not_kept = sink.log.write(bytes);
    session.tail().push(bytes, not_kept);
    if let Some(observer) = sink.observer.as_mut() {
        observer.output(bytes);
    }
    tracing::trace!(n_bytes = bytes.len(), "output ingested");
}

/// Live members of process group `pgid` (zombies are dead and do not count).
pub(crate) fn group_members(pgid: i32) -> Vec<i32> {
    let mut pids: Vec<i32> = crate::sys::process_table()
        .into_iter()
        .filter(|p| p.pgrp == pgid && p.is_alive())
        .map(|p| p.pid)
        .collect();
    pids.sort_unstable();
    pids
}
