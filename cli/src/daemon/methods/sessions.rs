//! `sessions.follow` (capability `sessions.follow`): a stream that says when the
//! home's sessions changed, so a live view (`herd top`) lists again only then.
//!
//! The stream sends a `sessions` notification at once and then after every change
//! the registry counts (a session started, finished, changed owner or was
//! forgotten), with the counter as `generation`. Changes that come together are
//! one notification: the registry's counter is a `watch`, and a notification is
//! written only once the previous one has gone out. It says that something
//! changed, not what: the client asks `list` on another connection, so a slow
//! client never holds rows the daemon built for nobody. New output is not a change
//! (it would be one per chunk); a view follows output with `logs.follow`.
//!
//! The stream takes no input and ends when the client closes its end.

use herd_protocol::events::SessionsChanged;

use super::State;
use crate::daemon::connection::Outlet;

/// Streams `sessions` notifications until the client leaves.
pub(super) async fn follow(state: &State, mut outlet: Outlet<'_>) {
    let mut changes = state.registry().changes();
    loop {
        let generation = *changes.borrow_and_update();
        // A struct of one number always serialises.
        let note = serde_json::to_value(SessionsChanged { generation }).unwrap_or_default();
        if outlet.note("sessions", note).await.is_err() {
            return;
        }
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    // The registry is gone: the daemon is ending.
                    return;
                }
            }
            () = outlet.left() => return,
        }
    }
}
