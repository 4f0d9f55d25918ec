//! Frames moved to standard output without passing through this process: when
//! stdout is not a terminal, a frame's bytes go from the daemon's socket to
//! stdout by splice(2) (straight into stdout when it is a pipe, else through a
//! pipe of our own), so a long log costs the client no copy. The frames carry
//! the log's text as the daemon showed it, which `herd logs` prints unchanged on
//! anything but a terminal (where the terminal's queries are filtered out), so
//! the bytes out are the ones the text route prints.
//!
//! Where splice does not work (stdout opened for appending, a file system
//! without it) the bytes already moved into our pipe are read back and written,
//! and every later frame is read and written as usual.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, SpliceFFlags, fcntl, splice};
use tokio::io::Interest;
use tokio::net::UnixStream;

/// The most one splice moves: a pipe's buffer as raised.
const PIPE_BYTES: usize = 1 << 20;

/// Standard output, written by moving frames into it.
#[derive(Debug)]
pub(crate) struct StdoutSink {
    /// Our own pipe (read end, write end), between the socket and stdout; `None`
    /// when stdout is a pipe (frames are spliced into it directly).
    between: Option<(OwnedFd, OwnedFd)>,
    /// Splicing failed once: bytes go through memory from then on.
    copying: bool,
    buf: Vec<u8>,
}

impl StdoutSink {
    /// A sink for stdout, or `None` when stdout is a terminal (the text route
    /// filters what reaches one).
    pub(crate) fn new() -> Option<StdoutSink> {
        let stdout = std::io::stdout();
        if std::io::IsTerminal::is_terminal(&stdout) {
            return None;
        }
        // Anything the text route left in stdout's buffer goes first.
        stdout.lock().flush().ok()?;
        // A non-blocking stdout would make a full pipe look like an empty socket.
        let flags = fcntl(stdout.as_fd(), FcntlArg::F_GETFL).ok()?;
        if flags & libc::O_NONBLOCK != 0 {
            return None;
        }
        let direct = nix::sys::stat::fstat(stdout.as_fd())
            .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO);
        let between = if direct {
            None
        } else {
            match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
                Ok((read, write)) => {
                    // A larger pipe moves more per call; the default size works too.
                    crate::sys::raise_pipe_buffer(write.as_fd(), PIPE_BYTES);
                    Some((read, write))
                }
                Err(_) => return None,
            }
        };
        Some(StdoutSink {
            between,
            copying: false,
            buf: Vec::new(),
        })
    }

    /// Writes `bytes` to stdout (a frame's bytes the connection had already read).
    pub(crate) fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        out.write_all(bytes)?;
        out.flush()
    }

    /// Moves the next `len` bytes of `socket` to stdout.
    ///
    /// # Errors
    /// Reading the socket (it closed inside the frame) or writing stdout failed.
    pub(crate) async fn move_from(
        &mut self,
        socket: &UnixStream,
        mut len: usize,
    ) -> std::io::Result<()> {
        let stdout = std::io::stdout();
        while len > 0 {
            if self.copying {
                return self.copy_from(socket, len).await;
            }
            let target: BorrowedFd<'_> = match &self.between {
                Some((_, write)) => write.as_fd(),
                None => stdout.as_fd(),
            };
            // No SPLICE_F_NONBLOCK: a full pipe is waited for, as a write to it
            // would be, so `WouldBlock` is the socket's alone.
            let moved = socket.try_io(Interest::READABLE, || {
                splice(
                    socket,
                    None,
                    target,
                    None,
                    len.min(PIPE_BYTES),
                    SpliceFFlags::SPLICE_F_MOVE,
                )
                .map_err(std::io::Error::from)
            });
            match moved {
                Ok(0) => return Err(cut_short()),
                Ok(n) => {
                    len -= n;
                    self.drain_between(n)?;
                }
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    socket.readable().await?;
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) if err.raw_os_error() == Some(Errno::EPIPE as i32) => return Err(err),
                // This stdout takes no splice: copy from now on.
                Err(_) => self.copying = true,
            }
        }
        Ok(())
    }

    /// Moves the `n` bytes in our pipe on to stdout; read back and written where
    /// stdout takes no splice.
    fn drain_between(&mut self, mut n: usize) -> std::io::Result<()> {
        let Some((read, _)) = &self.between else {
            return Ok(());
        };
        let stdout = std::io::stdout();
        while n > 0 && !self.copying {
            match splice(
                read,
                None,
                stdout.as_fd(),
                None,
                n,
                SpliceFFlags::SPLICE_F_MOVE,
            ) {
                Ok(0) => break,
                Ok(moved) => n -= moved,
                Err(Errno::EINTR) => {}
                Err(Errno::EPIPE) => return Err(Errno::EPIPE.into()),
                Err(_) => self.copying = true,
            }
        }
        while n > 0 {
            self.buf.resize(n.min(PIPE_BYTES), 0);
            let got = nix::unistd::read(read, &mut self.buf)?;
            if got == 0 {
                break;
            }
            n -= got;
            let mut out = stdout.lock();
            out.write_all(&self.buf[..got])?;
            out.flush()?;
        }
        Ok(())
    }

    /// Reads the next `len` bytes of `socket` and writes them to stdout.
    async fn copy_from(&mut self, socket: &UnixStream, mut len: usize) -> std::io::Result<()> {
        while len > 0 {
            self.buf.resize(len.min(PIPE_BYTES), 0);
            let got = match socket.try_read(&mut self.buf) {
                Ok(0) => return Err(cut_short()),
                Ok(got) => got,
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    socket.readable().await?;
                    continue;
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            len -= got;
            let mut out = std::io::stdout().lock();
            out.write_all(&self.buf[..got])?;
            out.flush()?;
        }
        Ok(())
    }
}

/// Moves the next binary frame of `reader`'s connection to `sink`; `false` at the
/// frames' end. Only the header is read (from what `reader` holds, then exactly
/// the rest): the frame's bytes stay in the socket, to be spliced, but for any
/// `reader` already held. `watch` ends the wait for the header with its reason
/// (the daemon was seen stopped).
///
/// # Errors
/// A read or write error, an oversized frame, or the daemon stopped.
pub(crate) async fn move_frame(
    reader: &mut tokio::io::BufReader<tokio::net::unix::OwnedReadHalf>,
    watch: impl std::future::Future<Output = String>,
    sink: &mut StdoutSink,
) -> std::io::Result<bool> {
    use tokio::io::AsyncBufReadExt;
    let mut head = [0u8; 4];
    let buffered = reader.buffer().len().min(4);
    head[..buffered].copy_from_slice(&reader.buffer()[..buffered]);
    reader.consume(buffered);
    let socket: &UnixStream = reader.get_ref().as_ref();
    tokio::select! {
        read = read_exactly(socket, &mut head[buffered..]) => read?,
        why = watch => {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, why));
        }
    }
    let len = super::length(head);
    if len == 0 {
        return Ok(false);
    }
    if len > super::MAX_FRAME_BYTES {
        return Err(std::io::Error::other("the daemon sent an oversized frame"));
    }
    let buffered = reader.buffer().len().min(len);
    sink.write(&reader.buffer()[..buffered])?;
    reader.consume(buffered);
    sink.move_from(reader.get_ref().as_ref(), len - buffered)
        .await?;
    Ok(true)
}

/// Fills `buf` from `socket`, reading no more than it holds.
async fn read_exactly(socket: &UnixStream, buf: &mut [u8]) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        match socket.try_read(&mut buf[filled..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => socket.readable().await?,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// The connection closed inside a frame.
fn cut_short() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        "the daemon closed the connection inside a frame",
    )
}
