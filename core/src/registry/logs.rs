//! Reading a session's log as a stream for the chunked routes (`log_chunk`, full
//! dumps, `logs --follow`), redacted with the log around each chunk.
//!
//! A stateless chunk (`log_chunk(from_byte)`) is a window over the bytes it hands
//! out plus context read around them: up to [`KEY_LOOKBACK_BYTES`] before (a
//! private-key block the chunk starts inside; the log is read further back, to the
//! block's start, when every line of that context could be key body) and the rest
//! of a line the chunk cuts. A follower keeps one [`ShownStream`] for its whole life instead, so a key
//! printed line by line is masked as it arrives and nothing is read twice.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use herd_hooks::{
    KEY_LOOKBACK_BYTES, LINE_CONTEXT_BYTES, OutputContext, Route, Shown, ShownStream, Window,
};

use super::Inner;
use crate::SessionId;
use crate::answers::SessionStatus;
use crate::error::{Error, LookupError};
use crate::session::Session;
use crate::text;

/// Whose log a stream reads: a session in the table, or one that only its receipt
/// knows (it finished before this daemon started, or left memory), which has no
/// key index to ask.
pub(super) struct LogSource {
    pub(super) id: SessionId,
    pub(super) path: PathBuf,
    pub(super) command: String,
    pub(super) owner: String,
    pub(super) session: Option<Arc<Session>>,
}

impl LogSource {
    /// Whether a private-key block is open at `at`, as the session's key index
    /// says; `None` when it does not know (or only a receipt is at hand): the log's
    /// look-back decides then.
    pub(super) fn key_known(&self, at: u64) -> Option<bool> {
        self.session.as_ref().and_then(|s| s.key_lookup()(at))
    }

    /// Whether the session still runs (its log may grow).
    pub(super) fn is_running(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| s.status() == SessionStatus::Running)
    }
}

impl Inner {
    /// The log source for `id`, given what the table answered for it (`found`):
    /// the session, or on a miss its receipt.
    ///
    /// # Errors
    /// The miss, when no receipt answers either.
    pub(super) fn log_source(
        &self,
        id: &str,
        found: Result<Arc<Session>, LookupError>,
    ) -> Result<LogSource, LookupError> {
        Ok(match found {
            Ok(s) => {
                let owner = s.state().owner_task_id.clone();
                LogSource {
                    id: s.id.clone(),
                    path: s.log_path.clone(),
                    command: s.command.clone(),
                    owner,
                    session: Some(s),
                }
            }
            Err(miss) => {
                let (id, r) = self.durable.receipt_lookup(id, miss)?;
                LogSource {
                    path: self.home.session_log_path(id.as_str()),
                    id,
                    command: r.command,
                    owner: r.owner_task_id,
                    session: None,
                }
            }
        })
    }
}

/// The bytes one chunk hands out, with their context, decoded.
#[derive(Debug)]
pub(crate) struct ChunkRead {
    /// Context before, the chunk, context after.
    source: String,
    /// The chunk's text in `source`.
    range: std::ops::Range<usize>,
    /// The file offset after the chunk.
    pub(crate) next_byte: u64,
    /// A private-key block is open where `source` starts.
    key_open: bool,
}

impl ChunkRead {
    /// The chunk as a window over its source.
    pub(crate) fn window(&self) -> Window<'_> {
        Window::range(&self.source, self.range.clone()).after_open_key(self.key_open)
    }
}

/// Where a chunk of `bytes` (read from the log, `at_end` when they reach its end)
/// ends: after its last line end; all of it at the end of a finished session's log,
/// or when there is no line end in a full chunk; never inside a character.
fn chunk_end(bytes: &[u8], max_bytes: usize, is_running: bool, at_end: bool) -> usize {
    let complete = text::complete_prefix_len(bytes);
    if !is_running && at_end {
        return bytes.len();
    }
    match memchr::memrchr2(b'\n', b'\r', &bytes[..complete]) {
        Some(idx) => idx + 1,
        None if bytes.len() >= max_bytes => complete.max(1).min(bytes.len()),
        None => 0,
    }
}

/// The log at `path` and its length; `None` when there is no log yet (it is
/// created with the first byte of output).
fn open_log(path: &Path) -> Result<Option<(File, u64)>, Error> {
    let io_err = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(e)),
    };
    let len = file.metadata().map_err(io_err)?.len();
    Ok(Some((file, len)))
}

/// How many bytes at the chunk's start continue a character begun before it: an
/// offset inside a character gives its first bytes to the context, so the
/// character (a zero-width space inside a token) decodes whole there.
fn continuation_lead(bytes: &[u8], keep: usize, from_byte: u64) -> usize {
    if from_byte == 0 {
        return 0;
    }
    bytes[..keep.min(3)]
        .iter()
        .take_while(|b| (**b & 0xC0) == 0x80)
        .count()
}

/// Reads the chunk of the log at `path` from `from_byte` (at most `max_bytes`) with
/// its context. `Ok(None)` when there is no log yet.
///
/// One read brings the context before (up to [`KEY_LOOKBACK_BYTES`]), the chunk
/// and the context after it (up to [`LINE_CONTEXT_BYTES`]). When those bytes are
/// valid UTF-8 where the parts meet (the common case: text cut at line ends), the
/// buffer becomes the source as it is, with no copy and one validation pass;
/// otherwise each part is decoded on its own, lossily, as it always was.
pub(crate) fn read_chunk(
    path: &Path,
    from_byte: u64,
    max_bytes: usize,
    is_running: bool,
    known: crate::output::KeyLookup<'_>,
) -> Result<Option<ChunkRead>, Error> {
    let io_err = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let Some((file, len)) = open_log(path)? else {
        return Ok(None);
    };
    let from_byte = from_byte.min(len);
    let max_bytes = max_bytes.max(1);
    let n_chunk = (len - from_byte).min(max_bytes as u64);
    let read_from = from_byte.saturating_sub(KEY_LOOKBACK_BYTES as u64);
    let read_to = (from_byte + n_chunk + LINE_CONTEXT_BYTES as u64).min(len);
    let mut buf = read_span(&file, read_from, read_to).map_err(io_err)?;
    // Where the chunk starts in `buf`, and its bytes (fewer if the file shrank).
    let at = usize::try_from(from_byte - read_from)
        .unwrap_or(usize::MAX)
        .min(buf.len());
    let chunk_len = usize::try_from(n_chunk)
        .unwrap_or(usize::MAX)
        .min(buf.len() - at);
    let bytes = &buf[at..at + chunk_len];
    let at_end = from_byte + bytes.len() as u64 >= len;
    let keep = chunk_end(bytes, max_bytes, is_running, at_end);
    let lead = continuation_lead(bytes, keep, from_byte);
    // The context before: the `KEY_LOOKBACK_BYTES` before the chunk's first
    // character (`text_before`).
    let before_abs = (from_byte + lead as u64).saturating_sub(KEY_LOOKBACK_BYTES as u64);
    let before_start = usize::try_from(before_abs - read_from).unwrap_or(0);
    let chunk_start = at + lead;
    let chunk_stop = at + keep;
    // The rest of a line the chunk cuts (a line longer than the chunk).
    let after_stop = if keep > 0 && !matches!(bytes[keep - 1], b'\n' | b'\r') {
        (at + chunk_len + LINE_CONTEXT_BYTES.saturating_sub(chunk_len - keep)).min(buf.len())
    } else {
        chunk_stop
    };
    let next_byte = from_byte + keep as u64;
    let cut = before_abs > 0;
    // Whether a private-key block is open where the context starts: asked of the
    // log further back only when the context's first line could be key body.
    let head = String::from_utf8_lossy(&buf[before_start..chunk_start.min(before_start + 4096)]);
    let key_open = cut && crate::output::key_open_at(known, Some(&file), before_abs, &head);
    if let Some((start, end)) =
        one_text(&buf, before_start, cut, chunk_start, chunk_stop, after_stop)
    {
        // Validated once, as the source itself; on a failure the parts are put
        // back for the part-by-part decoding.
        let rest = buf.split_off(end);
        let head: Vec<u8> = buf.drain(..start).collect();
        match String::from_utf8(buf) {
            Ok(source) => {
                return Ok(Some(ChunkRead {
                    range: chunk_start - start..chunk_stop - start,
                    source,
                    next_byte,
                    key_open,
                }));
            }
            Err(err) => {
                buf = head;
                buf.extend_from_slice(&err.into_bytes());
                buf.extend_from_slice(&rest);
            }
        }
    }
    let before = text::decode_tail(&buf[before_start..chunk_start], cut, true);
    let chunk = String::from_utf8_lossy(&buf[chunk_start..chunk_stop]);
    let after = text::decode_tail(&buf[chunk_stop..after_stop], true, true);
    let mut source = String::with_capacity(before.len() + chunk.len() + after.len());
    source.push_str(&before);
    source.push_str(&chunk);
    source.push_str(&after);
    Ok(Some(ChunkRead {
        range: before.len()..before.len() + chunk.len(),
        source,
        next_byte,
        key_open,
    }))
}

/// Where the chunk [`read_chunk`] makes from `from_byte` of a finished session's
/// log at `path` ends (its `next_byte`), without the context, decoding or
/// redaction: `None` when there is no log. A reader of many chunks uses it to start
/// the next chunk's redaction before this one's is done.
pub(crate) fn chunk_next_byte(
    path: &Path,
    from_byte: u64,
    max_bytes: usize,
) -> Result<Option<u64>, Error> {
    let io_err = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let Some((file, len)) = open_log(path)? else {
        return Ok(None);
    };
    let from_byte = from_byte.min(len);
    let max_bytes = max_bytes.max(1);
    let n_chunk = (len - from_byte).min(max_bytes as u64);
    let bytes = read_span(&file, from_byte, from_byte + n_chunk).map_err(io_err)?;
    let at_end = from_byte + bytes.len() as u64 >= len;
    Ok(Some(
        from_byte + chunk_end(&bytes, max_bytes, false, at_end) as u64,
    ))
}

/// The bytes of `file` from `from` to `to` (fewer at its end), read without
/// zeroing the buffer first.
fn read_span(file: &File, from: u64, to: u64) -> io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let want = to.saturating_sub(from);
    let mut buf = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
    let mut reader = file;
    reader.seek(SeekFrom::Start(from))?;
    reader.take(want).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Where the context before (`buf[before_start..chunk_start]`, `cut` when the log
/// goes on before it), the chunk (`..chunk_stop`) and the context after
/// (`..after_stop`) would decode as one text exactly as they decode part by part,
/// if the bytes there are valid UTF-8: the start after the continuation bytes
/// `decode_tail` skips, the end before the incomplete character it holds back.
/// `None` when a part starts inside a character (then the part-by-part decoding
/// differs: the caller does that).
fn one_text(
    buf: &[u8],
    before_start: usize,
    cut: bool,
    chunk_start: usize,
    chunk_stop: usize,
    after_stop: usize,
) -> Option<(usize, usize)> {
    let mut start = before_start;
    if cut {
        while start < chunk_start.min(before_start + 3) && (buf[start] & 0xC0) == 0x80 {
            start += 1;
        }
    }
    let inside_char = |at: usize, stop: usize| at < stop && (buf[at] & 0xC0) == 0x80;
    if inside_char(start, chunk_start)
        || inside_char(chunk_start, chunk_stop)
        || inside_char(chunk_stop, after_stop)
    {
        return None;
    }
    // The context before ends where the chunk's first character starts, so it
    // holds back nothing; the context after may end inside a character.
    let end = chunk_stop + text::complete_prefix_len(&buf[chunk_stop..after_stop]);
    Some((start, end))
}

/// What one read of a follower produced.
#[derive(Debug)]
#[non_exhaustive]
pub struct FollowRead {
    /// The new output, redacted (possibly empty).
    pub output: Shown,
    /// The read consumed new bytes of the log.
    pub progressed: bool,
    /// The session still runs (or is not known to have finished).
    pub is_running: bool,
    /// The follower reached the end of a finished session's log and released
    /// everything: the stream is over.
    pub is_done: bool,
    /// Bytes of the log past what this read took (the log had grown further).
    pub unread: u64,
}

/// A follower of one session's log (`logs --follow`, see [`Registry::log_follower`]).
///
/// [`Registry::log_follower`]: crate::Registry::log_follower
#[derive(Debug)]
pub struct LogFollower {
    inner: Arc<Inner>,
    session_id: SessionId,
    path: PathBuf,
    stream: ShownStream,
    /// The file offset of the next byte to read.
    next_byte: u64,
    /// A partial character at the end of the last read, carried to the next.
    partial: Vec<u8>,
    /// A read held bytes that are not UTF-8 (shown as U+FFFD): the held text's
    /// length no longer counts the log's bytes.
    lossy: bool,
}

impl LogFollower {
    pub(super) fn open(
        inner: Arc<Inner>,
        session_id: SessionId,
        path: PathBuf,
        (command, owner): (&str, &str),
        from_byte: u64,
        known: crate::output::KeyLookup<'_>,
    ) -> Result<LogFollower, Error> {
        let ctx = OutputContext {
            route: Route::Log,
            command,
            return_code: None,
            owner_task_id: owner,
            session_id: session_id.as_str(),
            backend: "local",
            partial: false,
        };
        let mut stream = inner.hooks.show_stream(&ctx);
        if from_byte > 0
            && let Ok(file) = File::open(&path)
        {
            let (before, open) =
                crate::output::context_before(&file, from_byte, known).map_err(|source| {
                    Error::Io {
                        path: path.clone(),
                        source,
                    }
                })?;
            stream = stream.after_state(&before, open);
        }
        Ok(LogFollower {
            inner,
            session_id,
            path,
            stream,
            next_byte: from_byte,
            partial: Vec::new(),
            lossy: false,
        })
    }

    /// The file offset of the next byte the follower reads.
    pub fn next_byte(&self) -> u64 {
        self.next_byte
    }

    /// Where another route (the read-out) can show the log on from, seamlessly:
    /// the offset of the line start where what this follower showed ends, when it
    /// holds the rest of that line unshown (not even partly released on idle) and
    /// every byte it read was UTF-8. `None` otherwise.
    pub fn hand_over_at(&self) -> Option<u64> {
        if self.lossy {
            return None;
        }
        let held = self.stream.held_from_line_start()? + self.partial.len();
        self.next_byte.checked_sub(held as u64)
    }

    /// Reads up to `max_bytes` of new output.
    ///
    /// # Errors
    /// [`Error::Io`] when the log cannot be read.
    pub fn read(&mut self, max_bytes: usize) -> Result<FollowRead, Error> {
        let is_running = match self.inner.lookup(self.session_id.as_str()) {
            Ok(s) => s.status() == SessionStatus::Running,
            Err(_) => false,
        };
        let io_err = |source| Error::Io {
            path: self.path.clone(),
            source,
        };
        let mut bytes = Vec::new();
        let mut len = 0;
        match File::open(&self.path) {
            Ok(file) => {
                len = file.metadata().map_err(io_err)?.len();
                let want = len
                    .saturating_sub(self.next_byte)
                    .min(max_bytes.max(1) as u64);
                bytes.resize(usize::try_from(want).unwrap_or(max_bytes), 0);
                crate::output::read_fully(&file, &mut bytes, self.next_byte).map_err(io_err)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(e)),
        }
        let progressed = !bytes.is_empty();
        self.next_byte += bytes.len() as u64;
        let mut pending = std::mem::take(&mut self.partial);
        pending.extend_from_slice(&bytes);
        let complete = text::complete_prefix_len(&pending);
        let rest = pending.split_off(complete);
        let text = String::from_utf8_lossy(&pending);
        self.lossy |= matches!(text, std::borrow::Cow::Owned(_));
        let mut output = self.stream.push(&text);
        let is_done = !is_running && !progressed;
        if is_done {
            let tail = String::from_utf8_lossy(&rest).into_owned();
            let pushed = self.stream.push(&tail);
            let finished = self.stream.finish();
            output = Shown::join([output, pushed, finished], "");
        } else {
            self.partial = rest;
        }
        Ok(FollowRead {
            output,
            progressed,
            is_running,
            is_done,
            unread: len.saturating_sub(self.next_byte),
        })
    }

    /// The stream went idle: what it held that cannot still become a secret.
    pub fn release_idle(&mut self) -> Shown {
        self.stream.release_idle()
    }
}

#[cfg(test)]
mod tests;
