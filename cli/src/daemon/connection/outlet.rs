//! The one thing a streaming method writes into: its notes, then its answer, and
//! the news that its client has gone.
//!
//! A stream takes no input: anything the client sends, or its closing its end,
//! ends the stream ([`Outlet::left`]). Every note is one line as
//! `Response::notification` serialises it, and the answer carries the request's id,
//! so a method that streams never sees the socket, the line format or the id.
//!
//! A note another herd daemon wrote (the host link relays a far stream) can be
//! passed on as it came ([`Outlet::pass`]): a far `log` note goes out byte for
//! byte, without a parse, and the outlet checks that it is a note, so nothing but
//! notes and the one answer ever reaches the client.

use serde_json::Value;
use tokio::io::BufReader;
use tokio::net::unix::OwnedReadHalf;

use super::{Writer, client_gone, write};
use crate::protocol::{Response, RpcError};

/// How a note's line begins: `Response::notification` serialised, by this daemon
/// or a far one.
const NOTE_START: &[u8] = br#"{"jsonrpc":"2.0","id":null,"method":"#;

/// The client has gone: a note could not be written, so the stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gone;

/// A streaming request's side of its connection.
#[derive(Debug)]
pub(crate) struct Outlet<'c> {
    reader: &'c mut BufReader<OwnedReadHalf>,
    writer: &'c mut Writer,
    /// The id of the request that started the stream, which its answer carries.
    id: Value,
    /// Output goes out as `log.bytes` frames (capability `logs.raw`).
    raw: bool,
    /// Output goes out as binary frames after the answer (capability
    /// `logs.frames`, `crate::logframes`).
    frames: bool,
}

impl<'c> Outlet<'c> {
    pub(super) fn new(
        reader: &'c mut BufReader<OwnedReadHalf>,
        writer: &'c mut Writer,
        id: Value,
    ) -> Outlet<'c> {
        Outlet {
            reader,
            writer,
            id,
            raw: false,
            frames: false,
        }
    }

    /// This outlet with output as `log.bytes` frames when `raw` (capability
    /// `logs.raw`): a header line `{…"method":"log.bytes","params":{"len":N}}`
    /// and then the N bytes of output, unescaped.
    pub(crate) fn raw(mut self, raw: bool) -> Outlet<'c> {
        self.raw = raw;
        self
    }

    /// Answers `{"frames": 1}` at once: the output follows as binary frames, then
    /// the answer that ends the stream (capability `logs.frames`,
    /// `crate::logframes`).
    pub(crate) async fn open_frames(&mut self) -> Result<(), Gone> {
        write(self.writer, &self.frames_opened())
            .await
            .map_err(|_| Gone)?;
        self.frames_are_open();
        Ok(())
    }

    /// [`Outlet::open_frames`], the answer held back to go out with the next
    /// write, as [`Outlet::hold_note`] holds a note.
    pub(crate) fn hold_frames_open(&mut self) {
        self.writer.hold(&self.frames_opened().to_line());
        self.frames_are_open();
    }

    /// The answer `{"frames": 1}`.
    fn frames_opened(&self) -> Response {
        Response::ok(
            self.id.clone(),
            serde_json::to_value(herd_protocol::answers::FramesOpened { frames: 1 })
                .unwrap_or_default(),
        )
    }

    /// Output goes out as binary frames from now on.
    fn frames_are_open(&mut self) {
        self.frames = true;
        // Long runs of frames: a larger socket buffer lets each write (or send
        // from the log file) move more at once, with fewer wake-ups on both
        // sides. The kernel caps it (net.core.wmem_max); a refusal changes nothing.
        let wider = nix::sys::socket::setsockopt(
            self.writer.socket(),
            nix::sys::socket::sockopt::SndBuf,
            &FRAMES_SEND_BUFFER,
        );
        if let Err(error) = wider {
            tracing::debug!(%error, "the frames' socket buffer stays as it was");
        }
    }

    /// Whether output goes out as binary frames ([`Outlet::open_frames`]).
    pub(crate) fn is_framed(&self) -> bool {
        self.frames
    }

    /// Writes `bytes` of output as binary frames (after [`Outlet::open_frames`]).
    pub(crate) async fn frame(&mut self, bytes: &[u8]) -> Result<(), Gone> {
        for piece in bytes.chunks(crate::logframes::MAX_FRAME_BYTES) {
            let head = crate::logframes::header(piece.len());
            self.writer.write_all(&head).await.map_err(|_| Gone)?;
            self.writer.write_all(piece).await.map_err(|_| Gone)?;
        }
        Ok(())
    }

    /// Writes the `len` bytes of `file` from `offset` on as binary frames (after
    /// [`Outlet::open_frames`]), sent from the file (sendfile(2): the kernel hands
    /// the file's pages to the socket, with no copy through this process). Where
    /// the file gives fewer bytes (it shrank) or cannot be sent from, the rest goes
    /// out from `text` (those bytes, when read), else read from the file (a file
    /// that ends short ends the stream: a frame cannot be cut short).
    pub(crate) async fn frame_from_file(
        &mut self,
        file: &std::fs::File,
        offset: u64,
        len: u64,
        text: Option<&[u8]>,
    ) -> Result<(), Gone> {
        let max = crate::logframes::MAX_FRAME_BYTES as u64;
        let mut done = 0u64;
        while done < len {
            let piece = usize::try_from((len - done).min(max)).map_err(|_| Gone)?;
            let at = offset + done;
            let head = crate::logframes::header(piece);
            self.writer.write_all(&head).await.map_err(|_| Gone)?;
            let sent = send_from_file(self.writer.socket(), file, at, piece).await?;
            if sent < piece {
                let rest = match text {
                    Some(text) => {
                        let from = usize::try_from(done).map_err(|_| Gone)? + sent;
                        text.get(from..from + piece - sent).ok_or(Gone)?.to_vec()
                    }
                    None => {
                        use std::os::unix::fs::FileExt;
                        let mut rest = vec![0; piece - sent];
                        // A frame cannot be cut short: the client would wait for
                        // its rest.
                        file.read_exact_at(&mut rest, at + sent as u64)
                            .map_err(|_| Gone)?;
                        rest
                    }
                };
                self.writer.write_all(&rest).await.map_err(|_| Gone)?;
            }
            done += piece as u64;
        }
        Ok(())
    }

    /// Writes one note: `{"jsonrpc":"2.0","id":null,"method":…,"params":…}`.
    pub(crate) async fn note(&mut self, method: &str, params: Value) -> Result<(), Gone> {
        write(self.writer, &Response::notification(method, params))
            .await
            .map_err(|_| Gone)
    }

    /// Holds one note back to go out with the next write (or [`Outlet::flush`]):
    /// for a note the stream follows at once with more, unless it is about to
    /// wait, when it flushes first.
    pub(crate) fn hold_note(&mut self, method: &str, params: Value) {
        self.writer
            .hold(&Response::notification(method, params).to_line());
    }

    /// Writes what is held back ([`Outlet::hold_note`]), before the stream waits.
    pub(crate) async fn flush(&mut self) -> Result<(), Gone> {
        self.writer.flush().await.map_err(|_| Gone)
    }

    /// Writes one `log` note carrying `output`: the line [`Outlet::note`] writes
    /// for `{"output": output}`, made by the fast string encoder (log chunks are
    /// the long notes).
    /// With [`Outlet::raw`], a `log.bytes` frame instead: no escaping.
    pub(crate) async fn note_log(&mut self, output: &str) -> Result<(), Gone> {
        if self.frames {
            return self.frame(output.as_bytes()).await;
        }
        if self.raw {
            let head = crate::protocol::log_bytes_header(output.len());
            self.writer.write_all(&head).await.map_err(|_| Gone)?;
            return self
                .writer
                .write_all(output.as_bytes())
                .await
                .map_err(|_| Gone);
        }
        let line = crate::protocol::escape::log_note_line(output);
        self.writer.write_all(&line).await.map_err(|_| Gone)
    }

    /// Passes on `line`, one line another herd daemon wrote (read without its
    /// `\n`), as it is: no parse, no copy through a `Value` (far `log` notes are
    /// the long ones). Only a note is passed: `Ok(false)`, with nothing written,
    /// says `line` is something else (an answer), which the caller reads itself.
    /// The `\n` is appended to `line`, so the line goes out in one write.
    pub(crate) async fn pass(&mut self, line: &mut Vec<u8>) -> Result<bool, Gone> {
        if !is_note(line) {
            return Ok(false);
        }
        line.push(b'\n');
        self.writer.write_all(line).await.map_err(|_| Gone)?;
        Ok(true)
    }

    /// Answers the request, which ends the stream; a client that has gone is not
    /// told.
    pub(crate) async fn answer(self, answer: Result<Value, RpcError>) {
        let response = match answer {
            Ok(result) => Response::ok(self.id, result),
            Err(error) => Response::err(self.id, error),
        };
        let line = response.to_line();
        if !self.frames {
            let _ = self.writer.write_all(&line).await;
            return;
        }
        // The end of the frames, then the answer line, in one write.
        let mut end = crate::logframes::header(0).to_vec();
        end.extend_from_slice(&line);
        let _ = self.writer.write_all(&end).await;
    }

    /// Resolves when the client closes its end or sends anything. Cancel-safe: a
    /// line half read when it is dropped is finished by the next call.
    pub(crate) async fn left(&mut self) {
        client_gone(self.reader).await;
    }
}

/// The send buffer asked for a connection that carries binary frames.
const FRAMES_SEND_BUFFER: usize = 4 << 20;

/// Sends up to `len` bytes of `file` from `offset` into `socket`, waiting while the
/// socket is full; how many went. Short of `len` when the file ends first or
/// cannot be sent from (the caller writes the rest itself).
async fn send_from_file(
    socket: &tokio::net::UnixStream,
    file: &std::fs::File,
    offset: u64,
    len: usize,
) -> Result<usize, Gone> {
    use nix::errno::Errno;
    let mut sent = 0;
    while sent < len {
        let Ok(mut at) = i64::try_from(offset + sent as u64) else {
            return Ok(sent);
        };
        let result = socket.try_io(tokio::io::Interest::WRITABLE, || {
            nix::sys::sendfile::sendfile64(socket, file, Some(&mut at), len - sent)
                .map_err(std::io::Error::from)
        });
        match result {
            // The file ends here.
            Ok(0) => return Ok(sent),
            Ok(n) => sent += n,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                socket.writable().await.map_err(|_| Gone)?;
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err)
                if matches!(
                    err.raw_os_error().map(Errno::from_raw),
                    Some(Errno::EPIPE | Errno::ECONNRESET | Errno::ENOTCONN)
                ) =>
            {
                return Err(Gone);
            }
            // Not a file it can send from: the caller writes the bytes.
            Err(_) => return Ok(sent),
        }
    }
    Ok(sent)
}

/// Whether `line` is a note as a herd daemon writes it.
fn is_note(line: &[u8]) -> bool {
    line.starts_with(NOTE_START)
}

#[cfg(test)]
mod tests;
