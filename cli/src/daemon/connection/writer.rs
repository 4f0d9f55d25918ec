//! A connection's sending side, which can hold bytes back to go out with the
//! next write: a short exchange (`run --wait`: hello, the spawn's `spawned` note,
//! its answer) then reaches the client in fewer writes, each of which wakes it.
//!
//! Held bytes are only ever a message that is complete and already due (an
//! answer, a note), held for as long as the caller vouches is short: they go out
//! first, in the same write, with whatever is written next, or alone at
//! [`Writer::flush`]. Nothing is reordered.

use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;

/// The write half of a client connection, with the bytes held back.
#[derive(Debug)]
pub(crate) struct Writer {
    half: OwnedWriteHalf,
    held: Vec<u8>,
}

impl Writer {
    pub(super) fn new(half: OwnedWriteHalf) -> Writer {
        Writer {
            half,
            held: Vec::new(),
        }
    }

    /// Holds `bytes` back until the next write or [`Writer::flush`].
    pub(super) fn hold(&mut self, bytes: &[u8]) {
        self.held.extend_from_slice(bytes);
    }

    /// Writes what is held, then `bytes`, in one write.
    ///
    /// # Errors
    /// The socket's write error (the client has gone).
    pub(crate) async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.held.is_empty() {
            return self.half.write_all(bytes).await;
        }
        let mut out = std::mem::take(&mut self.held);
        out.extend_from_slice(bytes);
        self.half.write_all(&out).await
    }

    /// Writes what is held, if anything.
    ///
    /// # Errors
    /// The socket's write error (the client has gone).
    pub(crate) async fn flush(&mut self) -> std::io::Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let out = std::mem::take(&mut self.held);
        self.half.write_all(&out).await
    }

    /// The socket (for a socket option, or `sendfile` after a write).
    pub(crate) fn socket(&self) -> &tokio::net::UnixStream {
        self.half.as_ref()
    }
}
