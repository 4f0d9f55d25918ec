//! Reading a log out at memory speed (`Registry::log_readout`): large reads of
//! the log file straight into the buffer the redactor reads, its whole-line blocks
//! redacted on every core at once ([`herd_hooks::Pipeline::show_log_blocks`]), and
//! the blocks it changed nothing in handed out as the bytes read.
//!
//! It serves what it can and says where it stopped; the chunked route
//! (`log_chunk`, a follower) goes on from there. It does not start where the
//! pipeline runs hooks or configured patterns, for an environment dump, for a
//! session no longer in the table, or at an offset inside a line; it stops at
//! bytes that are not UTF-8 and at a line longer than [`MAX_LINE_BYTES`].

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use herd_hooks::ShownBlocks;

use super::Registry;
use super::hooks_room::Hooks;
use crate::answers::SessionStatus;
use crate::error::Error;

/// The longest run without a line end the read-out holds while it looks for the
/// end of its block; a longer one is left to the chunked route.
pub(crate) const MAX_LINE_BYTES: usize = 64 << 20;

/// One batch a [`LogReadout`] shows: whole-line blocks of the log, and where in
/// the log their text starts.
#[derive(Debug)]
pub struct ReadoutBatch {
    blocks: ShownBlocks,
    log_at: u64,
}

impl ReadoutBatch {
    /// The shown blocks.
    pub fn blocks(&self) -> &ShownBlocks {
        &self.blocks
    }

    /// The log offset of the blocks' text: a [`herd_hooks::Piece::Read`] at `at`
    /// is the log's bytes from `log_at() + at`.
    pub fn log_at(&self) -> u64 {
        self.log_at
    }
}

/// A read-out of one session's log from a line start (see the module docs).
///
/// Each batch starts at a block edge (everything before it shown) and is read
/// while the one before is redacted: the read of the next batch runs on a thread
/// of its own as soon as the current one's blocks are cut, so reading the file
/// and redacting overlap. The unfinished block at a batch's end is read again at
/// the start of the next.
#[derive(Debug)]
pub struct LogReadout {
    hooks: Hooks,
    session: String,
    command: String,
    path: PathBuf,
    file: Arc<File>,
    /// The log offset the next batch starts at: everything before it is shown.
    next_at: u64,
    /// Where reading ends: the log's length when the read-out started.
    end: u64,
    /// The session had finished then: the bytes after its last line end are
    /// shown too.
    finished: bool,
    /// A private-key block is open at `next_at`.
    key_open: bool,
    threads: usize,
    /// Buffers handed back for the next reads.
    spare: Vec<Vec<u8>>,
    /// The next batch's read, under way: where it starts, and its thread.
    ahead: Option<(u64, std::thread::JoinHandle<std::io::Result<Vec<u8>>>)>,
    /// It stopped: bytes that are not text, or a line too long.
    stopped: bool,
}

impl Registry {
    /// A read-out of session `id`'s log from `from_byte` to its current end;
    /// `None` when this route does not serve it (see the module docs): the
    /// chunked route does.
    ///
    /// # Errors
    /// [`Error::Io`] when the log cannot be read.
    pub fn log_readout(&self, id: &str, from_byte: u64) -> Result<Option<LogReadout>, Error> {
        let Ok(s) = self.inner.lookup(id) else {
            return Ok(None);
        };
        let hooks = self.inner.hooks.clone();
        if !hooks.shows_log_blocks(&s.command) {
            return Ok(None);
        }
        let finished = s.status() != SessionStatus::Running;
        let io_err = |source| Error::Io {
            path: s.log_path.clone(),
            source,
        };
        let file = match File::open(&s.log_path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(e)),
        };
        let end = file.metadata().map_err(io_err)?.len();
        if from_byte > end {
            return Ok(None);
        }
        // At the log's start or a line's; and the key state there, by the rule
        // every route asks (the session's key index, else the log).
        let key_open = if from_byte > 0 {
            let mut head =
                vec![0; usize::try_from(end - from_byte + 1).map_or(4097, |n| n.min(4097))];
            crate::output::read_fully(&file, &mut head, from_byte - 1).map_err(io_err)?;
            if head.first() != Some(&b'\n') {
                return Ok(None);
            }
            let after = String::from_utf8_lossy(&head[1..]);
            crate::output::key_open_at(&s.key_lookup(), Some(&file), from_byte, &after)
        } else {
            false
        };
        Ok(Some(LogReadout {
            hooks,
            session: id.to_owned(),
            command: s.command.clone(),
            path: s.log_path.clone(),
            file: Arc::new(file),
            next_at: from_byte,
            end,
            finished,
            key_open,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            spare: Vec::new(),
            ahead: None,
            stopped: false,
        }))
    }
}

impl Registry {
    /// Moves the end of a read-out that has answered `None` (not stopped) to its
    /// log's end now, when the log grew by at least `min_bytes` since, or the
    /// session has finished since (its last unfinished block is then shown): a
    /// follower of a fast-growing log keeps reading it out on every core rather
    /// than by the chunked route. Whether it moved; it goes on where it was, its
    /// key state and unshown rest kept.
    ///
    /// # Errors
    /// [`Error::Io`] when the log cannot be read.
    pub fn log_readout_grow(
        &self,
        readout: &mut LogReadout,
        min_bytes: u64,
    ) -> Result<bool, Error> {
        if readout.stopped || readout.finished {
            return Ok(false);
        }
        // The status before the length: a finished session's log is whole.
        let finished = match self.inner.lookup(&readout.session) {
            Ok(s) => s.status() != SessionStatus::Running,
            Err(_) => return Ok(false),
        };
        let len = readout
            .file
            .metadata()
            .map_err(|source| Error::Io {
                path: readout.path.clone(),
                source,
            })?
            .len();
        if len < readout.end || (!finished && len - readout.end < min_bytes.max(1)) {
            return Ok(false);
        }
        readout.end = len;
        readout.finished = finished;
        Ok(true)
    }
}

impl LogReadout {
    /// The log offset the read-out has shown up to: where the chunked route goes
    /// on once [`LogReadout::next`] has answered `None`.
    pub fn next_byte(&self) -> u64 {
        self.next_at
    }

    /// Whether it stopped short of the log's end as it was (bytes that are not
    /// text, a line too long): the chunked route shows the rest.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// The log file read, open for reading (pieces of the log shown as read may
    /// be sent from it, by offset).
    pub fn log_file(&self) -> Arc<File> {
        Arc::clone(&self.file)
    }

    /// A batch the caller is done with: its buffer is kept for a later read.
    pub fn give_back(&mut self, batch: ReadoutBatch) {
        if self.spare.len() < 2 {
            let mut text = batch.blocks.into_text();
            text.clear();
            self.spare.push(text);
        }
    }

    /// The next blocks, shown, reading about `max_bytes` of the log; `None` when
    /// it is done (at the end it started with, or stopped).
    ///
    /// # Errors
    /// [`Error::Io`] when the log cannot be read.
    pub fn next(&mut self, max_bytes: usize) -> Result<Option<ReadoutBatch>, Error> {
        let max_bytes = max_bytes.max(1);
        if self.stopped {
            return Ok(None);
        }
        let log_at = self.next_at;
        let mut buf = self.take_read(max_bytes)?;
        let consumed = loop {
            let read_end = log_at + buf.len() as u64;
            let at_end = self.finished && read_end >= self.end;
            let consumed = herd_hooks::blocks_end(&buf, at_end);
            if consumed > 0 || buf.is_empty() {
                break consumed;
            }
            // No whole block yet: read on, up to the longest line held; at the
            // end, a running session's unfinished block is the chunked route's
            // (it ends where a line does).
            if read_end >= self.end {
                self.give_back_buf(buf);
                return Ok(None);
            }
            if buf.len() > MAX_LINE_BYTES {
                self.stopped = true;
                self.give_back_buf(buf);
                return Ok(None);
            }
            let want = (self.end - read_end).min(max_bytes as u64);
            let before = buf.len();
            read_range(&self.file, read_end, want, &mut buf).map_err(|e| self.io_err(e))?;
            if buf.len() == before {
                // The file shrank: it ends here.
                self.end = read_end;
            }
        };
        if buf.is_empty() {
            return Ok(None);
        }
        // The next batch is read while this one is redacted.
        self.read_ahead(log_at + consumed as u64, max_bytes);
        let at_end = self.finished && log_at + buf.len() as u64 >= self.end;
        let Some(shown) =
            self.hooks
                .show_log_blocks(&self.command, buf, self.key_open, at_end, self.threads)
        else {
            self.stop();
            return Ok(None);
        };
        self.key_open = shown.key_open_after();
        self.next_at = log_at + shown.consumed() as u64;
        if shown.not_text() {
            // Not text from a block on: the chunked route decodes it from there
            // as it always did.
            self.stop();
        }
        Ok((shown.consumed() > 0).then_some(ReadoutBatch {
            blocks: shown,
            log_at,
        }))
    }

    /// Stops: what is read ahead is dropped.
    fn stop(&mut self) {
        self.stopped = true;
        if let Some((_, ahead)) = self.ahead.take() {
            let _ = ahead.join();
        }
    }

    fn give_back_buf(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < 2 {
            buf.clear();
            self.spare.push(buf);
        }
    }

    fn io_err(&self, source: std::io::Error) -> Error {
        Error::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Starts reading up to `max_bytes` from `at` on a thread of its own.
    fn read_ahead(&mut self, at: u64, max_bytes: usize) {
        if at >= self.end {
            return;
        }
        let want = (self.end - at).min(max_bytes as u64);
        let file = Arc::clone(&self.file);
        let mut buf = self.spare.pop().unwrap_or_default();
        let reader = std::thread::Builder::new()
            .name("herd-log-read".to_owned())
            .spawn(move || {
                buf.clear();
                read_range(&file, at, want, &mut buf).map(|()| buf)
            });
        // A thread that cannot start: the next batch is read when it is due.
        if let Ok(reader) = reader {
            self.ahead = Some((at, reader));
        }
    }

    /// The bytes from `next_at` on, up to `max_bytes`: the read ahead, or read now.
    fn take_read(&mut self, max_bytes: usize) -> Result<Vec<u8>, Error> {
        if let Some((at, ahead)) = self.ahead.take() {
            let read = ahead
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the log reader panicked")));
            let buf = read.map_err(|e| self.io_err(e))?;
            if at == self.next_at && !buf.is_empty() {
                return Ok(buf);
            }
            self.give_back_buf(buf);
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        let want = self.end.saturating_sub(self.next_at).min(max_bytes as u64);
        if want > 0 {
            read_range(&self.file, self.next_at, want, &mut buf).map_err(|e| self.io_err(e))?;
            if buf.is_empty() {
                // The file shrank: it ends here.
                self.end = self.next_at;
            }
        }
        Ok(buf)
    }
}

/// Reads up to `want` bytes of `file` at `at` onto the end of `buf`, straight
/// into its spare capacity. The file's position is this read's: one read at a
/// time uses it (the read ahead is joined before the next read).
fn read_range(file: &File, at: u64, want: u64, buf: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut reader: &File = file;
    reader.seek(SeekFrom::Start(at))?;
    buf.reserve(usize::try_from(want).unwrap_or(0));
    reader.take(want).read_to_end(buf)?;
    Ok(())
}
