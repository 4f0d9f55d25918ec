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

use herd_hooks::{Pipeline, ShownBlocks};

use super::Registry;
use crate::answers::SessionStatus;
use crate::error::Error;

/// The longest run without a line end the read-out holds while it looks for the
/// end of its block; a longer one is left to the chunked route.
pub(crate) const MAX_LINE_BYTES: usize = 64 << 20;

/// A read-out of one session's log from a line start (see the module docs).
#[derive(Debug)]
pub struct LogReadout {
    pipeline: Arc<Pipeline>,
    command: String,
    path: PathBuf,
    file: File,
    /// The file offset after the bytes read so far (`carry` included).
    read_to: u64,
    /// Where reading ends: the log's length when the read-out started.
    end: u64,
    /// The session had finished then: the bytes after its last line end are
    /// shown too.
    finished: bool,
    /// Read but not yet shown: an unfinished block, shown with what follows it.
    carry: String,
    /// A private-key block is open where `carry` starts.
    key_open: bool,
    threads: usize,
    /// Buffers handed back for the next reads.
    spare: Vec<String>,
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
        let pipeline = Arc::clone(&self.inner.config.pipeline);
        if !pipeline.shows_log_blocks(&s.command) {
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
            pipeline,
            command: s.command.clone(),
            path: s.log_path.clone(),
            file,
            read_to: from_byte,
            end,
            finished,
            carry: String::new(),
            key_open,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            spare: Vec::new(),
            stopped: false,
        }))
    }
}

impl LogReadout {
    /// The log offset the read-out has shown up to: where the chunked route goes
    /// on once [`LogReadout::next`] has answered `None`.
    pub fn next_byte(&self) -> u64 {
        self.read_to - self.carry.len() as u64
    }

    /// Whether it stopped short of the log's end as it was (bytes that are not
    /// text, a line too long): the chunked route shows the rest.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// A buffer of shown blocks the caller is done with, kept for a later read.
    pub fn give_back(&mut self, blocks: ShownBlocks) {
        if self.spare.len() < 2 {
            let mut text = blocks.into_text();
            text.clear();
            self.spare.push(text);
        }
    }

    /// The next blocks, shown, reading about `max_bytes` of the log; `None` when
    /// it is done (at the end it started with, or stopped).
    ///
    /// # Errors
    /// [`Error::Io`] when the log cannot be read.
    pub fn next(&mut self, max_bytes: usize) -> Result<Option<ShownBlocks>, Error> {
        loop {
            if self.stopped {
                return Ok(None);
            }
            let want = (self.end - self.read_to).min(max_bytes.max(1) as u64);
            if want == 0 && (self.carry.is_empty() || !self.finished) {
                // The end; a running session's unfinished block is the chunked
                // route's (it ends where a line does).
                self.unread_carry();
                return Ok(None);
            }
            let mut buf = self.spare.pop().unwrap_or_default().into_bytes();
            buf.clear();
            buf.extend_from_slice(self.carry.as_bytes());
            let kept = buf.len() as u64;
            self.carry.clear();
            buf.reserve(usize::try_from(want).unwrap_or(0));
            let got = self.read_into(&mut buf, want)?;
            self.read_to += got as u64;
            if got == 0 {
                // The file shrank: it ends here.
                self.end = self.read_to;
            }
            let at_end = self.finished && self.read_to >= self.end;
            let Ok(text) = String::from_utf8(buf) else {
                // Not text: the chunked route decodes it as it always did.
                self.read_to -= got as u64 + kept;
                self.stopped = true;
                return Ok(None);
            };
            let Some(shown) = self.pipeline.show_log_blocks(
                &self.command,
                text,
                self.key_open,
                at_end,
                self.threads,
            ) else {
                return Ok(None);
            };
            self.key_open = shown.key_open_after();
            if shown.consumed() > 0 {
                self.carry = shown.unconsumed().to_owned();
                return Ok(Some(shown));
            }
            // No whole block yet: read on, up to the longest line held.
            self.carry = shown.into_text();
            if self.carry.len() > MAX_LINE_BYTES {
                self.unread_carry();
                self.stopped = true;
                return Ok(None);
            }
        }
    }

    /// Gives the bytes read but not shown back to the log.
    fn unread_carry(&mut self) {
        self.read_to -= self.carry.len() as u64;
        self.carry.clear();
    }

    /// Reads up to `want` bytes at `read_to` onto the end of `buf`, straight into
    /// its spare capacity.
    fn read_into(&self, buf: &mut Vec<u8>, want: u64) -> Result<usize, Error> {
        use std::io::{Seek, SeekFrom};
        let before = buf.len();
        let mut reader = &self.file;
        let io_err = |source| Error::Io {
            path: self.path.clone(),
            source,
        };
        reader.seek(SeekFrom::Start(self.read_to)).map_err(io_err)?;
        reader.take(want).read_to_end(buf).map_err(io_err)?;
        Ok(buf.len() - before)
    }
}
