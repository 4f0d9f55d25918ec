//! The socket the daemon attaches to a shim it starts through, made before the
//! launch (a daemon out of descriptors refuses a spawn before anything runs).

use std::io;
use std::path::Path;
use std::time::Duration;

use tokio::net::UnixStream;

/// The descriptor [`super::attach_started`] connects through, made before the shim is
/// launched: a daemon out of descriptors then refuses the spawn before anything
/// runs, instead of after the job started (a stop needs no descriptor then either,
/// but nothing is cleaner than nothing started).
#[derive(Debug)]
pub(crate) struct AttachSocket(tokio::net::UnixSocket);

impl AttachSocket {
    /// An unconnected Unix stream socket.
    ///
    /// # Errors
    /// The OS error (`EMFILE`, `ENFILE` when the descriptor tables are full).
    pub(crate) fn new() -> io::Result<AttachSocket> {
        tokio::net::UnixSocket::new_stream().map(AttachSocket)
    }

    /// Connects to `path` within `timeout`.
    pub(super) async fn connect(self, path: &Path, timeout: Duration) -> io::Result<UnixStream> {
        match tokio::time::timeout(timeout, self.0.connect(path)).await {
            Ok(connected) => connected,
            Err(_) => Err(io::Error::from(io::ErrorKind::TimedOut)),
        }
    }
}
