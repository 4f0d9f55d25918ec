//! A session's captured output: the bounded in-memory tail, the counters, and the
//! complete log file.
//!
//! The tail is raw bytes and grows as output arrives (nothing is allocated up front).
//! It is compacted only when it reaches twice its bound, so appending costs one copy
//! per byte amortised. The log file is written by the session's reader alone; answers
//! read the tail or the file (`log_chunk`, and `log` pages through [`page`]), never
//! the pipe, so releasing the handles loses nothing.
//!
//! Invariant: `total_ingested` only grows, and equals the bytes kept in the log plus
//! `bytes_not_kept` once the log cap is reached or the log failed.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

pub(crate) mod page;

/// The log's text just before byte `at` (at most `herd_hooks::KEY_LOOKBACK_BYTES`),
/// decoded: the context a window, chunk or receipt that starts at `at` is redacted
/// with, so a private key whose BEGIN lies before it, or a line it starts inside,
/// is still recognised.
///
/// # Errors
/// When the file cannot be read.
pub(crate) fn text_before(file: &File, at: u64) -> std::io::Result<String> {
    let from = context_start(at);
    let mut buf = vec![0; usize::try_from(at - from).unwrap_or(0)];
    read_fully(file, &mut buf, from)?;
    Ok(crate::text::decode_tail(&buf, from > 0, true))
}

/// [`text_before`], and whether a private-key block is open where that text
/// starts (read further back only when it matters, see
/// [`herd_hooks::key_open_in_log`]).
///
/// # Errors
/// When the file cannot be read.
pub(crate) fn context_before(
    file: &File,
    at: u64,
    known: KeyLookup<'_>,
) -> std::io::Result<(String, bool)> {
    let text = text_before(file, at)?;
    let open = key_open_at(known, Some(file), context_start(at), &text);
    Ok((text, open))
}

/// Where the context [`text_before`] reads for byte `at` starts: the offset whose
/// key state [`context_before`] asks.
pub(crate) fn context_start(at: u64) -> u64 {
    at.saturating_sub(herd_hooks::KEY_LOOKBACK_BYTES as u64)
}

/// The session's key index as a route asks it: whether a private-key block is open
/// at an offset of the output, `None` when the index did not see what decides it
/// (see [`Tail::key_open_at`]); `&|_| None` where no session is at hand (a receipt).
pub(crate) type KeyLookup<'a> = &'a dyn Fn(u64) -> Option<bool>;

/// Whether a private-key block is open at byte `at` of a session's output, where
/// `after` is what is shown from there: asked of the session's key index (a lookup)
/// and, only when the index did not see what decides it, of the log by the one
/// look-back rule ([`herd_hooks::key_open_in_log`]). Nothing is asked when `after`'s
/// first line cannot be key body.
pub(crate) fn key_open_at(known: KeyLookup<'_>, log: Option<&File>, at: u64, after: &str) -> bool {
    if at == 0 || !herd_hooks::key_state_matters(after) {
        return false;
    }
    known(at).unwrap_or_else(|| herd_hooks::key_open_in_log(log, at, after))
}

/// The last `chars` characters of a session's tail `text`: `growing` while it runs
/// (its unfinished line may still become a secret), starting inside a private-key
/// block when `key_open`.
pub(crate) fn live_tail(
    text: &str,
    chars: usize,
    growing: bool,
    key_open: bool,
) -> herd_hooks::Window<'_> {
    herd_hooks::Window::last_chars(text, chars)
        .growing(growing)
        .after_open_key(key_open)
}

/// `buf.len()` bytes of `file` at `at`, or fewer at its end (then `buf` is cut).
///
/// # Errors
/// When the file cannot be read.
pub(crate) fn read_fully(file: &File, buf: &mut Vec<u8>, at: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], at + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(())
}

/// [`context_before`] of the log at `path`, ANSI-stripped like the tail; empty when
/// the log cannot be read (then there is no context to add). `open_at_start` is
/// what the session's key index answered for the context's start
/// ([`context_start`]) while the session was at hand; the log is read back only
/// when it did not know.
pub(crate) fn log_text_before(
    path: &std::path::Path,
    at: u64,
    open_at_start: Option<bool>,
) -> (String, bool) {
    let from = context_start(at);
    let known = |asked: u64| if asked == from { open_at_start } else { None };
    match File::open(path).and_then(|file| context_before(&file, at, &known)) {
        Ok((text, open)) => (crate::text::strip_ansi(&text), open),
        Err(error) => {
            tracing::debug!(path = %path.display(), %error, "no log context for a receipt");
            (String::new(), false)
        }
    }
}

/// The in-memory side of a session's output, shared behind the session's lock.
#[derive(Debug)]
pub(crate) struct Tail {
    /// The last bytes the session produced (at most twice `bound`, answers use `bound`).
    bytes: Vec<u8>,
    /// The tail answers are served from, in bytes.
    bound: usize,
    /// Every byte ever ingested (after PTY-query and noise stripping).
    total_ingested: u64,
    /// Bytes that did not make it into the log (cap reached or write failed).
    bytes_not_kept: u64,
    /// The private-key blocks of everything ingested, kept as it arrives: routes
    /// look the key state at an offset up here instead of reading the log before it.
    keys: herd_hooks::KeyIndex,
}

impl Tail {
    /// An empty tail bounded to `bound` bytes.
    pub(crate) fn new(bound: usize) -> Tail {
        Tail {
            bytes: Vec::new(),
            bound: bound.max(1),
            total_ingested: 0,
            bytes_not_kept: 0,
            keys: herd_hooks::KeyIndex::new(),
        }
    }

    /// Appends one chunk, of which `not_kept` bytes missed the log.
    pub(crate) fn push(&mut self, chunk: &[u8], not_kept: u64) {
        self.total_ingested += chunk.len() as u64;
        self.bytes_not_kept += not_kept;
        self.keys.push(chunk);
        let chunk = if chunk.len() > self.bound {
            self.bytes.clear();
            &chunk[chunk.len() - self.bound..]
        } else {
            chunk
        };
        if self.bytes.len() + chunk.len() > 2 * self.bound {
            let keep_from = self.bytes.len() + chunk.len() - self.bound;
            self.bytes.drain(..keep_from.min(self.bytes.len()));
        }
        self.bytes.extend_from_slice(chunk);
    }

    /// Counts bytes that went by without being held (a supervised session's
    /// backlog of which only the last tail's worth is kept): the held tail is
    /// dropped, because the next bytes no longer follow it, but the key index still
    /// reads them, so the key state after them stays known (while no block is open
    /// that is a vectorised search for what could open one).
    pub(crate) fn pass(&mut self, chunk: &[u8]) {
        if !chunk.is_empty() {
            self.total_ingested += chunk.len() as u64;
            self.bytes.clear();
            self.keys.push(chunk);
        }
    }

    /// Counts `n` bytes that went by unseen whose key state after them is known:
    /// they end at a line's start, inside a block or not (`open`), as the shim's
    /// key index found when it wrote them. The held tail is dropped, as in
    /// [`Self::pass`], and the key index goes on from there.
    pub(crate) fn skip_known(&mut self, n: u64, open: bool) {
        if n > 0 {
            self.total_ingested += n;
            self.bytes.clear();
            self.keys.skip_known(n, open);
        }
    }

    /// Counts `n` bytes that went by unseen (a backlog the log could not give back
    /// when read); the held tail is dropped, because the next bytes no longer follow
    /// it, and the key index starts again after them.
    pub(crate) fn skip(&mut self, n: u64) {
        if n > 0 {
            self.total_ingested += n;
            self.bytes.clear();
            self.keys.skip(n);
        }
    }

    /// Counts `n` bytes that were ingested but are not in the log (its cap).
    pub(crate) fn count_not_kept(&mut self, n: u64) {
        self.total_ingested += n;
        self.bytes_not_kept += n;
        self.keys.skip(n);
    }

    /// The last `bound` bytes, and whether earlier output exists that they omit.
    pub(crate) fn view(&self) -> (&[u8], bool) {
        let start = self.bytes.len().saturating_sub(self.bound);
        let shown = &self.bytes[start..];
        (shown, (shown.len() as u64) < self.total_ingested)
    }

    /// The bytes from absolute position `from_total` (a past `total_ingested`) to the
    /// end, as far as they are still held, and how many bytes before them are not.
    pub(crate) fn since(&self, from_total: u64) -> (&[u8], u64) {
        let held_from = self.total_ingested - self.bytes.len() as u64;
        if from_total >= held_from {
            let start = usize::try_from(from_total - held_from)
                .unwrap_or(usize::MAX)
                .min(self.bytes.len());
            (&self.bytes[start..], 0)
        } else {
            (&self.bytes[..], held_from - from_total)
        }
    }

    /// The tail's bound in bytes.
    pub(crate) fn bound(&self) -> usize {
        self.bound
    }

    /// Every byte ever ingested.
    pub(crate) fn total_ingested(&self) -> u64 {
        self.total_ingested
    }

    /// Bytes that are not in the log file.
    pub(crate) fn bytes_not_kept(&self) -> u64 {
        self.bytes_not_kept
    }

    /// Whether a private-key block is open at output offset `at`, as the key index
    /// kept at ingest says; `None` when it did not see what decides it (output from
    /// before a restart or never read into memory: ask the log).
    pub(crate) fn key_open_at(&self, at: u64) -> Option<bool> {
        self.keys.open_at(at)
    }

    /// Drops the memory of a session nobody can ask about any more.
    pub(crate) fn release(&mut self) {
        self.bytes = Vec::new();
        self.keys = herd_hooks::KeyIndex::default();
    }
}

/// The session's log file, owned by its reader. The file is created (mode 0600) with
/// the first byte of output, so a silent session costs no file.
#[derive(Debug)]
pub(crate) struct LogWriter {
    path: PathBuf,
    /// `None` before the first write, or after a failure (then `failed` is set).
    file: Option<File>,
    failed: bool,
    written: u64,
    cap: u64,
    warned: bool,
    /// A splice into the file failed once: bytes come through [`LogWriter::write`]
    /// from then on.
    splice_failed: bool,
}

/// What one [`LogWriter::splice_from`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spliced {
    /// This many bytes went from the pipe into the log.
    Moved(usize),
    /// The pipe is empty and still open for writing.
    Empty,
    /// The pipe reached end-of-file.
    Eof,
    /// Nothing was moved and the log cannot take a splice (not created yet, failed,
    /// at its cap, or on a filesystem that refused one): read the pipe and
    /// [`LogWriter::write`] instead, which sees the pipe's own state.
    Unavailable,
}

impl LogWriter {
    /// A log at `path` capped at `cap` bytes; nothing is created yet.
    pub(crate) fn new(path: PathBuf, cap: u64) -> LogWriter {
        LogWriter {
            path,
            file: None,
            failed: false,
            written: 0,
            cap,
            warned: false,
            splice_failed: false,
        }
    }

    /// A log continuing in `file`, already open for appending (a re-adopted
    /// session's log after a restart); `cap` is what may still be written.
    pub(crate) fn with_file(path: PathBuf, file: File, cap: u64) -> LogWriter {
        LogWriter {
            file: Some(file),
            ..LogWriter::new(path, cap)
        }
    }

    /// Moves up to `max` bytes from the job's output pipe into the log inside the
    /// kernel (one copy instead of a read and a write), for a reader that has no use
    /// for the bytes in memory. Only what fits under the cap is moved; bytes the file
    /// did not take stay in the pipe, so nothing is lost when it refuses.
    pub(crate) fn splice_from(&mut self, pipe: std::os::fd::BorrowedFd<'_>, max: usize) -> Spliced {
        use std::os::fd::AsFd;
        if self.splice_failed {
            return Spliced::Unavailable;
        }
        let Some(file) = self.file.as_ref() else {
            return Spliced::Unavailable;
        };
        let room = self.cap.saturating_sub(self.written);
        let len = usize::try_from(room).unwrap_or(usize::MAX).min(max);
        if len == 0 {
            return Spliced::Unavailable;
        }
        loop {
            return match crate::sys::descriptors::splice_to_file(pipe, file.as_fd(), len) {
                Ok(0) => Spliced::Eof,
                Ok(n) => {
                    self.written += n as u64;
                    Spliced::Moved(n)
                }
                Err(nix::errno::Errno::EAGAIN) => Spliced::Empty,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(error) => {
                    tracing::debug!(path = %self.path.display(), %error, "session log takes no splice; output is read and written");
                    self.splice_failed = true;
                    Spliced::Unavailable
                }
            };
        }
    }

    /// Writes what fits under the cap; returns how many bytes were not kept.
    ///
    /// The write is a plain blocking write into the page cache, done on the reader's
    /// task: it costs microseconds per chunk, far less than a hop to a blocking pool.
    pub(crate) fn write(&mut self, chunk: &[u8]) -> u64 {
        if self.file.is_none() && !self.failed {
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&self.path)
            {
                Ok(file) => self.file = Some(file),
                Err(error) => {
                    tracing::error!(path = %self.path.display(), %error, "session log could not be created; output is kept in memory only");
                    self.failed = true;
                }
            }
        }
        let Some(file) = self.file.as_mut() else {
            return chunk.len() as u64;
        };
        let room = self.cap.saturating_sub(self.written);
        let n = usize::try_from(room).unwrap_or(usize::MAX).min(chunk.len());
        if n > 0 {
            if let Err(error) = file.write_all(&chunk[..n]) {
                tracing::error!(path = %self.path.display(), %error, "session log write failed; later output is kept in memory only");
                self.file = None;
                self.failed = true;
                return chunk.len() as u64;
            }
            self.written += n as u64;
        }
        if n < chunk.len() && !self.warned {
            tracing::warn!(path = %self.path.display(), cap_bytes = self.cap, "session log reached its cap; later output is counted but not kept");
            self.warned = true;
        }
        (chunk.len() - n) as u64
    }
}

#[cfg(test)]
mod tests;
