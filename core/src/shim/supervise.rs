//! The shim process's own loop: one thread, one wait (`sys::poll`) over the job's
//! output, a descriptor for SIGCHLD (`sys::signals`), the listening socket, the
//! daemon's connection and the job's input.
//!
//! Output passes the same stages as the in-process reader (PTY responder, shell-noise
//! filter) and goes to the log file, which is the only place it is kept: the daemon
//! reads it back by offset. What goes into the log also goes through the shim's key
//! index (`marks`), whose marks spare a daemon reading a chatty job's whole log back
//! for the key state. Only while a daemon that asks for no marks (an older build)
//! is attached, and once the noise filter passes every byte, is a pipe job's output
//! spliced from its pipe into the log inside the kernel instead (one copy per byte
//! instead of a read and a write); a PTY's output is always read (the query
//! responder scans it). The shim is a child subreaper, so descendants that lose
//! their parent are re-parented to it and reaped here instead of piling up as zombies
//! under init.
//!
//! When the session ends, when the time limit fires and how a kill proceeds are the
//! session machine's rules (`crate::machine`), shared with the in-process reader: this
//! loop feeds it what it observed (output, end-of-file, the job's exit, kill requests,
//! the tree's state when asked) and carries out what it answers. Once it finishes the
//! session, the exit record is written, the log closed, an attached daemon told, and
//! the process lingers over leftovers (`ending`) until the machine releases the tree.

use std::collections::HashSet;
use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

mod conclude;
mod conn;
mod ending;
mod hold;
mod marks;
mod start;

use super::Spec;
use super::wire::{FrameReader, Framing, Progress};
use crate::config::KillSource;
use crate::machine::{Event, Machine, Now};
use crate::noise::NoiseFilter;
use crate::output::{LogWriter, Spliced};
use crate::spawn::{self, MasterFd};
use crate::sys::cgroup::Placement;
use crate::sys::poll::wait_ready;
use crate::sys::signals::SignalWatch;

/// The read buffer a job's output is first read into: one page, so a job that writes
/// little (most of them) costs its shim no more (a zeroed 64 KiB buffer was 16 page
/// faults and a memset in every shim, about 90 us of CPU); doubled while reads fill
/// it.
const FIRST_READ_BYTES: usize = 4 * 1024;
/// The read buffer a quiet job keeps; a larger one is given back.
const MIN_READ_BYTES: usize = 64 * 1024;
/// The largest read buffer.
const MAX_READ_BYTES: usize = 128 * 1024;
/// The most bytes one splice moves from a pipe job's output into the log (the
/// raised pipe buffer's size).
const SPLICE_BYTES: usize = 1 << 20;
/// Reads per wake before the other descriptors get a turn.
const READS_PER_TURN: usize = 32;
/// A burst of at least this many bytes pauses reading a pipe for [`OUTPUT_PACE`].
const PACE_AFTER_BYTES: u64 = 64 * 1024;
/// How long a chatty pipe fills before the next read: 1 MiB of pipe buffer holds four
/// times what a writer at 1 GB/s writes meanwhile, so the writer does not block on it.
const OUTPUT_PACE: Duration = Duration::from_micros(250);
/// Input bytes queued for a job that is not reading before writes are refused.
const MAX_QUEUED_INPUT: usize = 4 << 20;
/// Bytes queued for a daemon that is not reading before its connection is dropped.
const MAX_QUEUED_OUT: usize = 4 << 20;
/// How long a job that ended before its daemon first attached waits for it: the
/// daemon that started the shim attaches right after the ready answer, so this only
/// runs out when that daemon died in between (the exit record is on disk anyway).
const FIRST_ATTACH_WAIT: Duration = Duration::from_secs(10);
/// How long the final `exit` frame may take to reach an attached daemon.
const EXIT_SEND_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a socket that could not be bound when the daemon's connection closed
/// is tried again.
const BIND_RETRY: Duration = Duration::from_secs(1);

/// The job's side of the session.
enum Job {
    Pipe {
        output: OwnedFd,
        stdin: Option<OwnedFd>,
    },
    Pty {
        master: MasterFd,
        scanner: herd_pty::Scanner,
    },
}

impl Job {
    fn output(&self) -> BorrowedFd<'_> {
        match self {
            Job::Pipe { output, .. } => output.as_fd(),
            Job::Pty { master, .. } => master.as_fd(),
        }
    }

    fn input(&self) -> Option<BorrowedFd<'_>> {
        match self {
            Job::Pipe { stdin, .. } => stdin.as_ref().map(AsFd::as_fd),
            Job::Pty { master, .. } => Some(master.as_fd()),
        }
    }
}

/// One queued input operation.
enum Input {
    Write {
        id: u64,
        bytes: Vec<u8>,
        done: usize,
    },
    Close {
        id: u64,
    },
}

/// The daemon's connection.
struct Conn {
    stream: UnixStream,
    frames: FrameReader,
    /// How frames go out: lines until both hellos agreed on length prefixes.
    framing: Framing,
    out: Vec<u8>,
}

/// Everything the loop owns.
struct Shim {
    job: Job,
    pid: i32,
    pgid: i32,
    /// `None` once closed, at the end.
    log: Option<LogWriter>,
    noise: NoiseFilter,
    progress: Progress,
    /// The key state at line starts of the log, for a daemon that skips a backlog.
    marks: marks::Marks,
    buf: Vec<u8>,
    /// The output reached end-of-file (or broke): it is read no more.
    eof: bool,
    /// The job's exit, once reaped.
    exit: Option<WaitStatus>,
    /// What was observed since the machine was last told.
    seen: Seen,
    /// The session's rules: when it ends, the time limit, the kill's course.
    machine: Machine<WaitStatus>,
    want: Option<u64>,
    input: VecDeque<Input>,
    queued_input: usize,
    conn: Option<Conn>,
    /// A daemon connected at least once (its `exit` frame then goes over that
    /// connection, or the daemon is gone and a later one reads the exit record).
    greeted: bool,
    /// The pipe's buffer size in bytes, once known.
    pipe_bytes: usize,
    /// The job's output is not read before then (see [`OUTPUT_PACE`]).
    output_paused_until: Option<Instant>,
    /// The socket a daemon connects to; `None` while the daemon that started this
    /// shim holds the connection the spec came on (bound when it closes).
    listener: Option<UnixListener>,
    /// Where that socket is bound.
    socket: std::path::PathBuf,
    /// When to try binding it again, after a bind failed.
    bind_retry_at: Option<Instant>,
    uid: u32,
    /// The job's start time, its identity for a tree kill.
    start_time: Option<u64>,
    session_id: String,
    /// Why the shim killed the job itself, for the exit record (from the machine's
    /// finish).
    killed_by: Option<KillSource>,
    /// What holds the job's tree: its cgroup or the shim as subreaper.
    hold: hold::Hold,
    /// Members of the tree that had SIGTERM in the kill under way.
    term_sent: HashSet<(i32, u64)>,
    /// The v1 cgroups that carry the session's limits, removed at the end.
    limits: crate::sys::limits::Applied,
}

/// What the loop observed and has not told the machine yet (it is told at the top of
/// the next turn, never while it is carrying out the machine's actions).
#[derive(Debug, Default)]
struct Seen {
    output: bool,
    eof: bool,
    exit: Option<WaitStatus>,
}

/// Starts the job described by `spec` and supervises it; returns the exit code.
/// `placement` is where session cgroups go as found before the spec came (a
/// supervisor forked ahead of need looks while it waits); `None` looks now.
/// `attached` is the connection the spec came on, kept as the daemon's when it asked
/// (`Spec::attach_here`).
pub(super) fn run(
    spec: Spec,
    detach: bool,
    placement: Option<Placement>,
    attached: Option<UnixStream>,
) -> i32 {
    let (mut shim, signals, dir) = match start::start(&spec, detach, placement, attached) {
        Ok(started) => started,
        Err(code) => return code,
    };
    shim.reap();
    shim.serve(&signals);
    let code = shim.conclude(&dir);
    shim.linger(&signals);
    code
}

impl Shim {
    /// The poll loop, until the job has exited and its output is done.
    fn serve(&mut self, signals: &SignalWatch) {
        loop {
            // Every turn may have changed the tree (a SIGCHLD): a kill under way looks.
            self.drive(Event::Woken);
            if self.machine.finished() {
                return;
            }
            // A chatty pipe job's output is taken in batches: after a large burst the
            // pipe (raised to 1 MiB) fills for up to `OUTPUT_PACE` before the next
            // read, so a fast writer costs a few large moves instead of many small ones.
            let now = Now::read();
            let paused = self.output_paused_until.filter(|at| *at > now.at);
            let mut wait: Option<Duration> = paused.map(|at| at - now.at);
            if let Some(at) = self.machine.poll_timeout(now) {
                let left = at.saturating_duration_since(now.at);
                wait = Some(wait.map_or(left, |w| w.min(left)));
            }
            if let Some(at) = self.bind_retry_at {
                if at <= now.at {
                    self.bind_when_unbound();
                }
                if let Some(at) = self.bind_retry_at {
                    let left = at.saturating_duration_since(now.at);
                    wait = Some(wait.map_or(left, |w| w.min(left)));
                }
            }
            let ready = {
                let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(5);
                let mut slots = [usize::MAX; 5];
                if self.machine.reading() && !self.eof && paused.is_none() {
                    slots[0] = fds.len();
                    fds.push(PollFd::new(self.job.output(), PollFlags::POLLIN));
                }
                slots[1] = fds.len();
                fds.push(PollFd::new(signals.as_fd(), PollFlags::POLLIN));
                if let Some(listener) = &self.listener {
                    slots[2] = fds.len();
                    fds.push(PollFd::new(listener.as_fd(), PollFlags::POLLIN));
                }
                if let Some(conn) = &self.conn {
                    let mut flags = PollFlags::POLLIN;
                    if !conn.out.is_empty() {
                        flags |= PollFlags::POLLOUT;
                    }
                    slots[3] = fds.len();
                    fds.push(PollFd::new(conn.stream.as_fd(), flags));
                }
                if !self.input.is_empty()
                    && let Some(fd) = self.job.input()
                {
                    slots[4] = fds.len();
                    fds.push(PollFd::new(fd, PollFlags::POLLOUT));
                }
                match wait_ready(&mut fds, wait) {
                    Ok(_) => {}
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(error) => {
                        tracing::error!(%error, "poll failed; the supervisor stops");
                        return;
                    }
                }
                let mut ready = [false; 5];
                for (idx, slot) in slots.iter().enumerate() {
                    if let Some(fd) = fds.get(*slot) {
                        ready[idx] = fd.revents().is_some_and(|r| !r.is_empty());
                    }
                }
                ready
            };
            if ready[1] && self.read_signals(signals) {
                // SIGTERM to the shim: an operator's stop of the whole session.
                self.drive(Event::Kill(Some(KillSource::OperatorStop)));
            }
            if ready[0] {
                self.take_output();
            }
            if ready[2] {
                self.accept();
            }
            if ready[3] {
                self.service_conn();
            }
            if ready[4] || !self.input.is_empty() {
                self.write_input();
            }
            self.maybe_grew();
            self.flush_conn();
        }
    }

    /// Reaps every child that has exited; the job's status is kept.
    fn reap(&mut self) {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(status) => {
                    if status.pid().map(Pid::as_raw) == Some(self.pid) && self.exit.is_none() {
                        self.exit = Some(status);
                        self.seen.exit = Some(status);
                    }
                }
            }
        }
    }

    /// Takes what the job wrote, and pauses reading a pipe after a large burst when
    /// its buffer can hold what a fast writer writes meanwhile.
    fn take_output(&mut self) {
        let before = self.progress.total_ingested;
        self.read_burst();
        let moved = self.progress.total_ingested - before;
        self.output_paused_until = (moved >= PACE_AFTER_BYTES && self.pipe_bytes >= 1 << 20)
            .then(|| Instant::now() + OUTPUT_PACE);
    }

    /// Reads until the output would block, or a turn's worth.
    fn read_burst(&mut self) {
        if self.splice_burst() {
            return;
        }
        let mut filled = 0;
        for _ in 0..READS_PER_TURN {
            if self.buf.is_empty() {
                self.buf.resize(FIRST_READ_BYTES, 0);
            }
            if filled == self.buf.len() {
                if self.buf.len() < MAX_READ_BYTES {
                    let grown = self.buf.len() * 2;
                    self.buf.resize(grown, 0);
                    // A job that fills more than the buffer a quiet one keeps is a
                    // chatty one: its pipe is raised once.
                    if grown > MIN_READ_BYTES
                        && let Job::Pipe { output, .. } = &self.job
                    {
                        self.pipe_bytes = spawn::raise_pipe_buffer(output.as_fd());
                    }
                } else {
                    self.process(filled);
                    filled = 0;
                }
            }
            match nix::unistd::read(self.job.output(), &mut self.buf[filled..]) {
                Ok(0) => {
                    self.eof = true;
                    self.seen.eof = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(nix::errno::Errno::EINTR) => {}
                // A PTY master reads EIO once every slave is closed: end-of-file.
                Err(_) => {
                    self.eof = true;
                    self.seen.eof = true;
                    break;
                }
            }
        }
        if filled > 0 {
            self.seen.output = true;
            self.process(filled);
        }
        // A job that went quiet gives its grown read buffer back.
        if !self.eof && filled < MIN_READ_BYTES / 4 && self.buf.len() > MIN_READ_BYTES {
            self.buf = Vec::new();
        }
    }

    /// Moves a pipe job's output into the log inside the kernel until the pipe would
    /// block, or a turn's worth; `false` when it cannot (see the module docs), then
    /// the output is read.
    fn splice_burst(&mut self) -> bool {
        let (Job::Pipe { output, .. }, Some(log)) = (&self.job, self.log.as_mut()) else {
            return false;
        };
        // Not before a daemon said whether it wants key marks (see `marks`).
        if !self.noise.passes_all() || !self.greeted || self.marks.wanted() {
            return false;
        }
        let mut moved = 0;
        for _ in 0..READS_PER_TURN {
            match log.splice_from(output.as_fd(), SPLICE_BYTES) {
                Spliced::Moved(n) => {
                    moved += n;
                    // A pipe that filled its default buffer is chatty: raise it, as
                    // the read path does when a read fills its buffer.
                    if n >= MIN_READ_BYTES && self.pipe_bytes == 0 {
                        self.pipe_bytes = spawn::raise_pipe_buffer(output.as_fd());
                    }
                }
                Spliced::Empty => break,
                Spliced::Eof => {
                    self.eof = true;
                    self.seen.eof = true;
                    break;
                }
                Spliced::Unavailable if moved == 0 => return false,
                Spliced::Unavailable => break,
            }
        }
        if moved > 0 {
            self.seen.output = true;
            self.marks.unseen(moved as u64);
            self.progress.total_ingested += moved as u64;
            self.progress.log_bytes += moved as u64;
        }
        true
    }

    /// Reads what is already buffered, up to 16 MiB, without waiting.
    fn drain_now(&mut self) {
        let before = self.progress.total_ingested;
        for _ in 0..16 {
            if self.eof {
                return;
            }
            let start = self.progress.total_ingested;
            self.read_burst();
            if self.progress.total_ingested == start
                || self.progress.total_ingested - before > 16 << 20
            {
                return;
            }
        }
    }

    /// Passes `buf[..filled]` through the responder and the noise filter into the
    /// log, borrowing the bytes all the way (no copy of a passing chunk).
    fn process(&mut self, filled: usize) {
        let chunk = &self.buf[..filled];
        let (log, progress, marks) = (&mut self.log, &mut self.progress, &mut self.marks);
        match &mut self.job {
            Job::Pipe { .. } => ingest_into(log, progress, marks, &self.noise.feed(chunk)),
            Job::Pty { master, scanner } => {
                let scan = scanner.feed(chunk);
                if !scan.replies.is_empty() {
                    write_all_nonblocking(master.as_fd(), &scan.replies);
                }
                ingest_into(log, progress, marks, &self.noise.feed(&scan.output));
            }
        }
    }

    fn ingest(&mut self, bytes: &[u8]) {
        ingest_into(&mut self.log, &mut self.progress, &mut self.marks, bytes);
    }
}

/// Appends kept bytes to the log and counts them.
fn ingest_into(
    log: &mut Option<LogWriter>,
    progress: &mut Progress,
    marks: &mut marks::Marks,
    bytes: &[u8],
) {
    if bytes.is_empty() {
        return;
    }
    let not_kept = match log.as_mut() {
        Some(log) => log.write(bytes),
        None => bytes.len() as u64,
    };
    // The log keeps a prefix of what it is given (its cap cuts the rest).
    let kept = bytes.len()
        - usize::try_from(not_kept)
            .unwrap_or(bytes.len())
            .min(bytes.len());
    marks.logged(&bytes[..kept]);
    progress.total_ingested += bytes.len() as u64;
    progress.bytes_not_kept += not_kept;
    progress.log_bytes += bytes.len() as u64 - not_kept;
}

/// Writes `bytes` without waiting; what does not fit is dropped (terminal replies and
/// a ^D are a few bytes, and a terminal whose input queue is full belongs to a
/// program that is not reading).
fn write_all_nonblocking(fd: BorrowedFd<'_>, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match nix::unistd::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return,
        }
    }
}
