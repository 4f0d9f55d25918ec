//! The daemon's own log: a tracing writer that never fails and never
//! grows without bound.
//!
//! A detached daemon writes `<home>/logs/daemon.log` itself, rotated by size: past
//! [`MAX_LOG_BYTES`] the file becomes `daemon.log.1` (the older `.1` becomes `.2`,
//! and so on up to [`GENERATIONS`] files in all, the oldest dropped), and a new
//! `daemon.log` is opened; the daemon's stdout and stderr follow it (`dup2`), so a
//! panic message lands in the current file too. A daemon in the foreground writes
//! to its stderr.
//!
//! A write that fails (a full disk, a read-only home) is never an error to tracing
//! and never a panic: the line is tried on stderr and kept in a bounded in-memory
//! ring ([`RING_LINES`] lines, each at most [`RING_LINE_BYTES`]), with a count and
//! the last error, which the `status` method reports and `herd doctor` shows. The
//! next write tries the file again, so logging resumes once space is freed.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use herd_core::lock_order::{Mutex, MutexGuard, rank};
use herd_protocol::daemon::DaemonLogReport;

/// The size past which `daemon.log` is rotated.
pub(crate) const MAX_LOG_BYTES: u64 = 10 * 1024 * 1024;

/// How many files the log keeps: `daemon.log` and `daemon.log.1` … `.{N-1}`.
pub(crate) const GENERATIONS: usize = 3;

/// How many failed lines the in-memory ring keeps (the newest).
pub(crate) const RING_LINES: usize = 64;

/// The most bytes of one failed line the ring keeps.
pub(crate) const RING_LINE_BYTES: usize = 1024;

/// The daemon's log writer; one per process ([`global`]).
#[derive(Debug)]
pub(crate) struct DaemonLog {
    /// Ranked last of all (`rank::DAEMON_LOG`): a tracing event may come from code
    /// holding any other lock, and the writer takes none under this one.
    state: Mutex<LogState, { rank::DAEMON_LOG }>,
}

#[derive(Debug)]
struct LogState {
    /// `None`: stderr (a daemon in the foreground, or before the home is known).
    file: Option<LogFile>,
    max_bytes: u64,
    generations: usize,
    ring: VecDeque<String>,
    n_failed: u64,
    last_error: Option<String>,
    /// Whether a line that failed is tried on stderr (off in tests).
    echo: bool,
}

#[derive(Debug)]
struct LogFile {
    path: PathBuf,
    /// `None` after an open failed; tried again on the next write.
    file: Option<File>,
    size: u64,
    /// Point the process's stdout and stderr at each file opened.
    redirect_stdio: bool,
}

/// The process's daemon log.
pub(crate) fn global() -> &'static DaemonLog {
    static LOG: OnceLock<DaemonLog> = OnceLock::new();
    LOG.get_or_init(|| DaemonLog::new(MAX_LOG_BYTES, GENERATIONS))
}

impl DaemonLog {
    /// A log writing to stderr until [`DaemonLog::to_file`] is called.
    pub(crate) fn new(max_bytes: u64, generations: usize) -> DaemonLog {
        DaemonLog {
            state: Mutex::new(LogState {
                file: None,
                max_bytes: max_bytes.max(1),
                generations: generations.max(1),
                ring: VecDeque::new(),
                n_failed: 0,
                last_error: None,
                echo: true,
            }),
        }
    }

    /// Writes to `path` from now on (rotated by size), pointing stdout and stderr at
    /// it when `redirect_stdio`. A file that cannot be opened now is tried again on
    /// each write.
    pub(crate) fn to_file(&self, path: &Path, redirect_stdio: bool) {
        let mut state = self.lock();
        state.file = Some(LogFile {
            path: path.to_path_buf(),
            file: None,
            size: 0,
            redirect_stdio,
        });
        if let Err(err) = state.open() {
            state.failed(&format!("cannot open {}: {err}", path.display()), b"");
        }
    }

    /// Writes one formatted event; never fails.
    pub(crate) fn write_line(&self, bytes: &[u8]) {
        let mut state = self.lock();
        if let Err(err) = state.write(bytes) {
            state.failed(&err, bytes);
        }
    }

    /// What failed, for `status` and `herd doctor`: `{"path", "failed_writes",
    /// "last_error", "recent_failed_lines"}`.
    pub(crate) fn report(&self) -> DaemonLogReport {
        let state = self.lock();
        DaemonLogReport {
            path: state.file.as_ref().map(|f| f.path.display().to_string()),
            max_bytes: state.max_bytes,
            generations: state.generations as u64,
            failed_writes: state.n_failed,
            last_error: state.last_error.clone(),
            recent_failed_lines: state.ring.iter().cloned().collect(),
        }
    }

    /// No copy of a failed line on stderr (a test's output stays readable).
    #[cfg(test)]
    fn quiet(self) -> DaemonLog {
        self.lock().echo = false;
        self
    }

    fn lock(&self) -> MutexGuard<'_, LogState> {
        self.state.acquire()
    }
}

impl LogState {
    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        let Some(log) = self.file.as_mut() else {
            return std::io::stderr()
                .write_all(bytes)
                .map_err(|e| format!("cannot write to stderr: {e}"));
        };
        if log.size > 0 && log.size + bytes.len() as u64 > self.max_bytes {
            rotate(&log.path, self.generations)
                .map_err(|e| format!("cannot rotate {}: {e}", log.path.display()))?;
            log.file = None;
        }
        if log.file.is_none() {
            let path = log.path.display().to_string();
            self.open()
                .map_err(|e| format!("cannot open {path}: {e}"))?;
        }
        let log = self.file.as_mut().expect("the file was set above");
        let file = log.file.as_mut().expect("the file was opened above");
        match file.write_all(bytes) {
            Ok(()) => {
                log.size += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                // A short write may have landed in part: count what the file holds.
                log.size = file.metadata().map_or(log.size, |m| m.len());
                Err(format!("cannot write {}: {e}", log.path.display()))
            }
        }
    }

    /// Opens the current file for appending (0600) and notes its size.
    fn open(&mut self) -> std::io::Result<()> {
        let Some(log) = self.file.as_mut() else {
            return Ok(());
        };
        let file = crate::config::open_private(&log.path, crate::config::Private::Append)?;
        log.size = file.metadata()?.len();
        if log.redirect_stdio {
            redirect_stdio(&file);
        }
        log.file = Some(file);
        Ok(())
    }

    /// Keeps a line whose write failed, tries it on stderr, and counts it.
    fn failed(&mut self, error: &str, bytes: &[u8]) {
        self.n_failed += 1;
        self.last_error = Some(error.to_owned());
        // In a detached daemon stderr is the log file itself: not tried there.
        if self.echo && self.file.as_ref().is_some_and(|f| !f.redirect_stdio) {
            let _ = std::io::stderr().write_all(bytes);
        }
        let mut line = String::from_utf8_lossy(bytes).trim_end().to_owned();
        if line.len() > RING_LINE_BYTES {
            let mut cut = RING_LINE_BYTES;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
        }
        if !line.is_empty() {
            self.ring.push_back(line);
        }
        while self.ring.len() > RING_LINES {
            self.ring.pop_front();
        }
    }
}

/// Shifts `path.{n}` to `path.{n+1}` (dropping the oldest) and `path` to `path.1`.
fn rotate(path: &Path, generations: usize) -> std::io::Result<()> {
    let numbered = |n: usize| {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    };
    if generations <= 1 {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    for n in (1..generations - 1).rev() {
        match std::fs::rename(numbered(n), numbered(n + 1)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    std::fs::rename(path, numbered(1))
}

/// Points fds 1 and 2 at `file`, so whatever the process prints lands in the
/// current log file.
fn redirect_stdio(file: &File) {
    use std::os::fd::AsFd;
    let _ = nix::unistd::dup2_stdout(file.as_fd());
    let _ = nix::unistd::dup2_stderr(file.as_fd());
}

/// The tracing writer: every event is one [`DaemonLog::write_line`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Writer;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Writer {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> LineWriter {
        LineWriter
    }
}

/// One event's writer.
#[derive(Debug)]
pub(crate) struct LineWriter;

impl Write for LineWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        global().write_line(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
