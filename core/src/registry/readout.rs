//! Reading a log out at memory speed (`Registry::log_readout`): large reads of
//! the log file straight into the buffer the redactor reads, its whole-line blocks
//! redacted on every core at once ([`herd_hooks::Pipeline::show_log_blocks`]), and
//! the blocks it changed nothing in handed out as the bytes read.
//!
//! It serves a session in the table and one that finished before the daemon
//! started (from its receipt), says where it stopped, and the chunked route
//! (`log_chunk`, a follower) goes on from there. It does not start where the
//! pipeline runs hooks or configured patterns, for an environment dump, or at an
//! offset inside a line; it stops at bytes that are not UTF-8 and at a line longer
//! than [`MAX_LINE_BYTES`].
//!
//! Where the host guarded maps (`herd_core::guard_mapped_reads`, the daemon at
//! start), a batch is the log's pages mapped (`sys::mapped`), not a copy: the
//! redactor reads the file's pages and the unchanged blocks go out by sendfile,
//! so the log's bytes are never copied into the daemon. A log cut short under a
//! map reads as zeros past its new end and marks the map: that batch is dropped
//! and the read-out stops there, which the chunked route continues from.
//!
//! A read-out of a finished session's log leaves a memo of what it showed
//! (`memo`): the next read-out of that log from the same offset sends the extents
//! found unchanged straight from the file, unread, and redacts only the blocks
//! that were changed, each again from the key state at its start.

use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use herd_hooks::ShownBlocks;

use super::Registry;
use super::hooks_room::Hooks;
use crate::answers::SessionStatus;
use crate::error::Error;
use crate::sys::mapped::Mapped;
use herd_hooks::LogText;
pub(crate) use memo::Memos;
use memo::{Extent, FileId, Memo, Recording};

/// The longest run without a line end the read-out holds while it looks for the
/// end of its block; a longer one is left to the chunked route.
pub(crate) const MAX_LINE_BYTES: usize = 64 << 20;

mod memo;
mod replay;

/// One batch a [`LogReadout`] shows, in order: pieces of the log shown as they
/// are, and shown text.
#[derive(Debug)]
pub struct ReadoutBatch {
    body: Body,
    log_at: u64,
}

#[derive(Debug)]
enum Body {
    /// Whole-line blocks read and shown; their text starts at `log_at`.
    Shown(ShownBlocks<ReadText>),
    /// Extents of a memo: the log's bytes as they are, or a block shown again.
    Replayed(Vec<Replayed>),
}

/// The log's bytes a batch read: copied into a buffer, or the file's pages
/// mapped (`sys::mapped`, where the daemon guards maps: no copy).
#[derive(Debug)]
enum ReadText {
    Buf(Vec<u8>),
    Mapped(Mapped),
}

impl AsRef<[u8]> for ReadText {
    fn as_ref(&self) -> &[u8] {
        match self {
            ReadText::Buf(buf) => buf,
            ReadText::Mapped(map) => map.as_ref(),
        }
    }
}

impl LogText for ReadText {
    fn may_change(&self) -> bool {
        matches!(self, ReadText::Mapped(_))
    }
}

impl ReadText {
    /// Whether the log (`file`, this text read from `at`) lost bytes of a map
    /// while they were read: a page the map met gone (zeros were read), or a cut
    /// inside the map's last page (zeros with no fault: the log's length tells).
    fn cut_short(&self, file: &File, at: u64) -> bool {
        match self {
            ReadText::Buf(_) => false,
            ReadText::Mapped(map) => {
                map.shrank()
                    || file
                        .metadata()
                        .is_ok_and(|meta| meta.len() < at + map.as_ref().len() as u64)
            }
        }
    }
}

#[derive(Debug)]
enum Replayed {
    File(Range<u64>),
    Shown(String),
}

/// One piece of a [`ReadoutBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadoutPiece<'a> {
    /// The log's bytes from `at`, `len` of them, shown as they are (so they may
    /// be sent straight from the log file); `text` holds them when they were
    /// read.
    File {
        /// The log offset.
        at: u64,
        /// How many bytes.
        len: u64,
        /// The bytes, when read.
        text: Option<&'a [u8]>,
    },
    /// Shown text (a block the redactor changed).
    Shown(&'a [u8]),
}

impl ReadoutBatch {
    /// The shown pieces, in order.
    pub fn pieces(&self) -> Vec<ReadoutPiece<'_>> {
        match &self.body {
            Body::Shown(blocks) => {
                // Bytes of a map are not handed out: one the log lost since would
                // read as zeros, so a short send reads the file again.
                let copied = matches!(blocks.text(), ReadText::Buf(_));
                blocks
                    .pieces()
                    .map(|piece| match piece {
                        herd_hooks::Piece::Read { at, bytes } => ReadoutPiece::File {
                            at: self.log_at + at as u64,
                            len: bytes.len() as u64,
                            text: copied.then_some(bytes),
                        },
                        herd_hooks::Piece::Redacted(bytes) => ReadoutPiece::Shown(bytes),
                    })
                    .collect()
            }
            Body::Replayed(pieces) => pieces
                .iter()
                .map(|piece| match piece {
                    Replayed::File(range) => ReadoutPiece::File {
                        at: range.start,
                        len: range.end - range.start,
                        text: None,
                    },
                    Replayed::Shown(text) => ReadoutPiece::Shown(text.as_bytes()),
                })
                .collect(),
        }
    }

    /// The log offset the batch starts at.
    pub fn log_at(&self) -> u64 {
        self.log_at
    }

    /// Where the pieces that can only be sent from the log file end (pieces of
    /// the log whose bytes the batch does not hold: a map's, a memo's); `None`
    /// when it holds every byte it shows. A log shorter than that now was cut
    /// short since the batch was made: the batch cannot be sent whole.
    pub fn file_end(&self) -> Option<u64> {
        match &self.body {
            // A map's blocks end where the blocks consumed do (a changed last
            // block is held, so this may ask a little more of the file).
            Body::Shown(blocks) => match blocks.text() {
                ReadText::Mapped(_) => Some(self.log_at + blocks.consumed() as u64),
                ReadText::Buf(_) => None,
            },
            Body::Replayed(pieces) => pieces
                .iter()
                .filter_map(|piece| match piece {
                    Replayed::File(range) => Some(range.end),
                    Replayed::Shown(_) => None,
                })
                .max(),
        }
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
    ahead: Option<(u64, std::thread::JoinHandle<std::io::Result<ReadText>>)>,
    /// It stopped: bytes that are not text, or a line too long.
    stopped: bool,
    /// The memo this read-out is making (of a finished session's log), and
    /// where it goes when done.
    recording: Option<(Recording, Arc<Memos>)>,
    /// The memo this read-out shows, and the next of its extents.
    replay: Option<(Arc<Memo>, usize)>,
}

impl Registry {
    /// A read-out of session `id`'s log from `from_byte` to its current end;
    /// `None` when this route does not serve it (see the module docs): the
    /// chunked route does.
    ///
    /// # Errors
    /// [`Error::Io`] when the log cannot be read.
    pub fn log_readout(&self, id: &str, from_byte: u64) -> Result<Option<LogReadout>, Error> {
        // A session in the table, or one that finished before this daemon started
        // (its receipt): its log reads out the same way.
        let Ok(source) = self.inner.log_source(id, self.inner.lookup(id)) else {
            return Ok(None);
        };
        let hooks = self.inner.hooks.clone();
        if !hooks.shows_log_blocks(&source.command) {
            return Ok(None);
        }
        let finished = !source.is_running();
        let log_path = source.path.clone();
        let io_err = |source| Error::Io {
            path: log_path.clone(),
            source,
        };
        let file = match File::open(&log_path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(e)),
        };
        let file_id = FileId::of(&file).map_err(io_err)?;
        let end = file.metadata().map_err(io_err)?.len();
        if from_byte > end {
            return Ok(None);
        }
        let memos = &self.inner.readouts;
        let session = source.id.to_string();
        let replay = if finished {
            memos
                .get(&session, from_byte, file_id)
                .map(|memo| (memo, 0))
        } else {
            None
        };
        if replay.is_some() {
            tracing::debug!(target: "herd::readout", session, from_byte, "read out from its memo");
        }
        let recording = (finished && replay.is_none())
            .then(|| (Recording::new(file_id, from_byte), Arc::clone(memos)));
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
            let known = |at: u64| source.key_known(at);
            crate::output::key_open_at(&known, Some(&file), from_byte, &after)
        } else {
            false
        };
        Ok(Some(LogReadout {
            hooks,
            session,
            command: source.command,
            path: log_path,
            file: Arc::new(file),
            next_at: from_byte,
            end,
            finished,
            key_open,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            spare: Vec::new(),
            ahead: None,
            stopped: false,
            recording,
            replay,
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
        if let Body::Shown(blocks) = batch.body {
            self.give_back_text(blocks.into_text());
        }
    }

    /// The next blocks, shown, reading about `max_bytes` of the log (or showing
    /// as much of a memo); `None` when it is done (at the end it started with, or
    /// stopped).
    ///
    /// # Errors
    /// [`Error::Io`] when the log cannot be read.
    pub fn next(&mut self, max_bytes: usize) -> Result<Option<ReadoutBatch>, Error> {
        if self.replay.is_some() {
            return self.next_replayed(max_bytes.max(1));
        }
        let batch = self.next_read(max_bytes)?;
        match &batch {
            Some(ReadoutBatch {
                body: Body::Shown(blocks),
                log_at,
            }) => {
                if let Some((recording, _)) = &mut self.recording
                    && !recording.add(*log_at, blocks.extents())
                {
                    self.recording = None;
                }
            }
            Some(_) => {}
            None => self.keep_memo(),
        }
        Ok(batch)
    }

    /// Keeps the memo this read-out made, now it is done, while the log is the
    /// file it read.
    fn keep_memo(&mut self) {
        let Some((recording, memos)) = self.recording.take() else {
            return;
        };
        if FileId::of(&self.file).is_ok_and(|now| now == recording.file())
            && self.next_at > recording.from()
        {
            memos.put(&self.session, recording.done(self.next_at, self.stopped));
        }
    }

    /// [`LogReadout::next`] by reading the log.
    fn next_read(&mut self, max_bytes: usize) -> Result<Option<ReadoutBatch>, Error> {
        let max_bytes = max_bytes.max(1);
        if self.stopped {
            return Ok(None);
        }
        let log_at = self.next_at;
        let mut text = self.take_read(max_bytes)?;
        let consumed = loop {
            let read = text.as_ref().len();
            let read_end = log_at + read as u64;
            let at_end = self.finished && read_end >= self.end;
            let consumed = herd_hooks::blocks_end(text.as_ref(), at_end);
            if consumed > 0 || read == 0 {
                break consumed;
            }
            // No whole block yet: read on, up to the longest line held; at the
            // end, a running session's unfinished block is the chunked route's
            // (it ends where a line does).
            if read_end >= self.end {
                self.give_back_text(text);
                return Ok(None);
            }
            if read > MAX_LINE_BYTES {
                self.stopped = true;
                self.give_back_text(text);
                return Ok(None);
            }
            let Some(mut buf) = self.copied(text) else {
                self.stop();
                return Ok(None);
            };
            let want = (self.end - read_end).min(max_bytes as u64);
            read_range(&self.file, read_end, want, &mut buf).map_err(|e| self.io_err(e))?;
            if buf.len() == read {
                // The file shrank: it ends here.
                self.end = read_end;
            }
            text = ReadText::Buf(buf);
        };
        if text.as_ref().is_empty() {
            return Ok(None);
        }
        // The next batch is read while this one is redacted.
        self.read_ahead(log_at + consumed as u64, max_bytes);
        let at_end = self.finished && log_at + text.as_ref().len() as u64 >= self.end;
        let Some(shown) =
            self.hooks
                .show_log_blocks(&self.command, text, self.key_open, at_end, self.threads)
        else {
            self.stop();
            return Ok(None);
        };
        if shown.text().cut_short(&self.file, log_at) {
            // The log shrank under the map: what was redacted is not the log. The
            // chunked route goes on from here and meets the log as it is now.
            tracing::info!(
                target: "herd::readout",
                session = %self.session,
                at = log_at,
                "the log shrank under its map while it was read out: the chunked route shows it from here"
            );
            self.stop();
            return Ok(None);
        }
        self.key_open = shown.key_open_after();
        self.next_at = log_at + shown.consumed() as u64;
        if shown.not_text() {
            // Not text from a block on: the chunked route decodes it from there
            // as it always did.
            self.stop();
        }
        Ok((shown.consumed() > 0).then_some(ReadoutBatch {
            body: Body::Shown(shown),
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

    /// Text a batch is done with: a buffer is kept for a later read, a map
    /// unmapped.
    fn give_back_text(&mut self, text: ReadText) {
        if let ReadText::Buf(buf) = text {
            self.give_back_buf(buf);
        }
    }

    /// `text` as a buffer that can be read on to: a map's bytes copied into one;
    /// `None` when the log shrank under the map.
    fn copied(&mut self, text: ReadText) -> Option<Vec<u8>> {
        match text {
            ReadText::Buf(buf) => Some(buf),
            ReadText::Mapped(map) => {
                let mut buf = self.spare.pop().unwrap_or_default();
                buf.clear();
                buf.extend_from_slice(map.as_ref());
                // Checked after the copy: a page lost during it reads as zeros.
                (!map.shrank()).then_some(buf)
            }
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

    /// Starts reading (or mapping) up to `max_bytes` from `at` on a thread of its
    /// own.
    fn read_ahead(&mut self, at: u64, max_bytes: usize) {
        if at >= self.end {
            return;
        }
        let want = (self.end - at).min(max_bytes as u64);
        let file = Arc::clone(&self.file);
        let buf = self.spare.pop().unwrap_or_default();
        let reader = std::thread::Builder::new()
            .name("herd-log-read".to_owned())
            .spawn(move || read_text(&file, at, want, buf));
        // A thread that cannot start: the next batch is read when it is due.
        if let Ok(reader) = reader {
            self.ahead = Some((at, reader));
        }
    }

    /// The bytes from `next_at` on, up to `max_bytes`: the read ahead, or read now.
    fn take_read(&mut self, max_bytes: usize) -> Result<ReadText, Error> {
        if let Some((at, ahead)) = self.ahead.take() {
            let read = ahead
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the log reader panicked")));
            let text = read.map_err(|e| self.io_err(e))?;
            if at == self.next_at && !text.as_ref().is_empty() {
                return Ok(text);
            }
            self.give_back_text(text);
        }
        let buf = self.spare.pop().unwrap_or_default();
        let want = self.end.saturating_sub(self.next_at).min(max_bytes as u64);
        let text = read_text(&self.file, self.next_at, want, buf).map_err(|e| self.io_err(e))?;
        if want > 0 && text.as_ref().is_empty() {
            // The file shrank: it ends here.
            self.end = self.next_at;
        }
        Ok(text)
    }
}

/// `want` bytes of `file` from `at`: mapped where maps are guarded
/// (`sys::mapped`: the redactor reads the file's pages, no copy), else read into
/// `buf`.
fn read_text(file: &File, at: u64, want: u64, mut buf: Vec<u8>) -> std::io::Result<ReadText> {
    if let Some(map) = usize::try_from(want)
        .ok()
        .and_then(|len| Mapped::new(file, at, len))
    {
        return Ok(ReadText::Mapped(map));
    }
    buf.clear();
    read_range(file, at, want, &mut buf)?;
    Ok(ReadText::Buf(buf))
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
