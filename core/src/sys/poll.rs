//! Waiting on descriptors with a precise deadline, for the single-threaded loops
//! (the shim's): `ppoll`, whose nanosecond timeout does not round a short pause down
//! to a busy spin as `poll`'s milliseconds would. The signals those loops wait for
//! come through a descriptor of their own ([`super::signals::SignalWatch`]), so no
//! mask is swapped for the wait.

use std::time::Duration;

use nix::poll::{PollFd, ppoll};
use nix::sys::time::TimeSpec;

/// Waits until one of `fds` is ready or `timeout` passed (`None`: no deadline); the
/// number of ready descriptors. With no descriptors it is a precise sleep.
///
/// # Errors
/// The OS error: `EINTR` when a signal handler ran, which callers treat as a wake.
pub(crate) fn wait_ready(fds: &mut [PollFd<'_>], timeout: Option<Duration>) -> nix::Result<i32> {
    ppoll(fds, timeout.map(TimeSpec::from_duration), None)
}
