//! Who is at the other end of a Unix socket: the peer's credentials as the kernel
//! recorded them when it connected (`SO_PEERCRED`, Linux). A supervisor accepts a
//! connection only from its own uid with it. On macOS and FreeBSD the same answer
//! comes from `getpeereid` (`LOCAL_PEERCRED`), see `docs/porting.md`.

use std::os::fd::AsFd;

/// The uid of the process that connected `stream`.
///
/// # Errors
/// The `getsockopt` errno (not a Unix socket, a closed descriptor).
pub(crate) fn peer_uid(stream: &impl AsFd) -> nix::Result<u32> {
    nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
        .map(|credentials| credentials.uid())
}
