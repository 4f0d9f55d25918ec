//! Reading a session's log as a stream for the chunked routes (`log_chunk`, full
//! dumps, `logs --follow`), redacted with the log around each chunk (B30).
//!
//! A stateless chunk (`log_chunk(from_byte)`) is a window over the bytes it hands
//! out plus context read around them: up to [`KEY_LOOKBACK_BYTES`] before (a
//! private-key block the chunk starts inside) and the rest of a line the chunk
//! cuts. A follower keeps one [`ShownStream`] for its whole life instead, so a key
//! printed line by line is masked as it arrives and nothing is read twice.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use herd_hooks::{LINE_CONTEXT_BYTES, OutputContext, Pipeline, Route, Shown, ShownStream, Window};

use super::Inner;
use crate::SessionId;
use crate::answers::SessionStatus;
use crate::error::Error;
use crate::text;

/// The bytes one chunk hands out, with their context, decoded.
#[derive(Debug)]
pub(crate) struct ChunkRead {
    /// Context before, the chunk, context after.
    source: String,
    /// The chunk's text in `source`.
    range: std::ops::Range<usize>,
    /// The file offset after the chunk.
    pub(crate) next_byte: u64,
}

impl ChunkRead {
    /// The chunk as a window over its source.
    pub(crate) fn window(&self) -> Window<'_> {
        Window::range(&self.source, self.range.clone())
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

/// Reads the chunk of the log at `path` from `from_byte` (at most `max_bytes`) with
/// its context. `Ok(None)` when there is no log yet.
pub(crate) fn read_chunk(
    path: &Path,
    from_byte: u64,
    max_bytes: usize,
    is_running: bool,
) -> Result<Option<ChunkRead>, Error> {
    let io_err = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let file = match File::open(path) {
        Ok(file) => file,
        // The log is created with the first byte of output.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(e)),
    };
    let len = file.metadata().map_err(io_err)?.len();
    let from_byte = from_byte.min(len);
    let max_bytes = max_bytes.max(1);
    let mut bytes =
        vec![0; usize::try_from((len - from_byte).min(max_bytes as u64)).unwrap_or(max_bytes)];
    crate::output::read_fully(&file, &mut bytes, from_byte).map_err(io_err)?;
    let at_end = from_byte + bytes.len() as u64 >= len;
    let keep = chunk_end(&bytes, max_bytes, is_running, at_end);
    // An offset inside a character: its first bytes belong to the context, so the
    // character (a zero-width space inside a token) decodes whole there.
    let lead = if from_byte > 0 {
        bytes[..keep.min(3)]
            .iter()
            .take_while(|b| (**b & 0xC0) == 0x80)
            .count()
    } else {
        0
    };
    let before = crate::output::text_before(&file, from_byte + lead as u64).map_err(io_err)?;
    // The rest of a line the chunk cuts (a line longer than the chunk).
    let after = if keep > 0 && !matches!(bytes[keep - 1], b'\n' | b'\r') {
        let mut after = bytes[keep..].to_vec();
        let want = LINE_CONTEXT_BYTES.saturating_sub(after.len());
        let mut more = vec![0; want];
        let n = file
            .read_at(&mut more, from_byte + bytes.len() as u64)
            .map_err(io_err)?;
        after.extend_from_slice(&more[..n]);
        after
    } else {
        Vec::new()
    };
    let chunk = String::from_utf8_lossy(&bytes[lead..keep]);
    let after = text::decode_tail(&after, true, true);
    let mut source = String::with_capacity(before.len() + chunk.len() + after.len());
    source.push_str(&before);
    source.push_str(&chunk);
    source.push_str(&after);
    Ok(Some(ChunkRead {
        range: before.len()..before.len() + chunk.len(),
        source,
        next_byte: from_byte + keep as u64,
    }))
}

/// What one read of a follower produced.
#[derive(Debug)]
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
}

impl LogFollower {
    pub(super) fn open(
        inner: Arc<Inner>,
        session_id: SessionId,
        path: PathBuf,
        command: &str,
        owner: &str,
        from_byte: u64,
    ) -> Result<LogFollower, Error> {
        let pipeline: &Arc<Pipeline> = &inner.config.pipeline;
        let ctx = OutputContext {
            route: Route::Log,
            command,
            return_code: None,
            owner_task_id: owner,
            session_id: session_id.as_str(),
            backend: "local",
        };
        let mut stream = Pipeline::show_stream(pipeline, &ctx);
        if from_byte > 0
            && let Ok(file) = File::open(&path)
        {
            let before =
                crate::output::text_before(&file, from_byte).map_err(|source| Error::Io {
                    path: path.clone(),
                    source,
                })?;
            stream = stream.after(&before);
        }
        Ok(LogFollower {
            inner,
            session_id,
            path,
            stream,
            next_byte: from_byte,
            partial: Vec::new(),
        })
    }

    /// The file offset of the next byte the follower reads.
    pub fn next_byte(&self) -> u64 {
        self.next_byte
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
        match File::open(&self.path) {
            Ok(file) => {
                let len = file.metadata().map_err(io_err)?.len();
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
        let mut output = self.stream.push(&String::from_utf8_lossy(&pending));
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
        })
    }

    /// The stream went idle: what it held that cannot still become a secret.
    pub fn release_idle(&mut self) -> Shown {
        self.stream.release_idle()
    }
}
