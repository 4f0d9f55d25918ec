//! The streaming methods: `events.follow` (the owner's notifications, or with
//! `peek` their count), `logs.follow` (a session's output until it exits, then its
//! offset and, with `result`, how it ended), `sessions.follow` (`sessions.rs`) and
//! `logs.dump` (`dump.rs`);
//! a far host's `logs.follow` and `logs.dump` are relayed by the host link
//! (`hosts/stream.rs`), into the same [`Outlet`].
//!
//! Each writes into its [`Outlet`] and ends when the client leaves; none sees the
//! socket.

use std::time::Duration;

use futures::FutureExt;

use herd_protocol::events::Pending;
use herd_protocol::methods::Spawn;
use herd_protocol::params::{EventsParams, FollowParams};
use serde_json::Value;

use super::query::CHUNK_BYTES;
use super::wire::{core_error, lookup_error, parse, stream_end, to_value};
use super::{NoParams, Reply, State};
use crate::daemon::connection::Outlet;
use crate::protocol::{INTERNAL_ERROR, RpcError};

/// A streaming method.
#[derive(Debug)]
pub(crate) enum Stream {
    /// `events.follow`: the owner's notifications, drained as they come.
    Events {
        /// The owner whose events are delivered.
        owner: String,
        /// Only say how many are pending, never take them (capability
        /// `events.pending`).
        peek: bool,
    },
    /// `logs.follow`: a session's output until it exits.
    Logs {
        /// The session.
        id: String,
        /// Where to start, in bytes of the log.
        from_byte: u64,
        /// End with the session's result, as `wait` answers it (capability
        /// `logs.follow.result`): a follower needs no second request.
        result: bool,
        /// A real terminal shows it (capability `logs.follow.terminal`): the
        /// session's PTY queries go to it while the stream lasts.
        terminal: bool,
        /// Output as `log.bytes` frames (capability `logs.raw`).
        raw: bool,
        /// Output as binary frames after the answer (capability `logs.frames`).
        frames: bool,
    },
    /// `sessions.follow`: a note whenever the home's sessions change (`sessions.rs`).
    Sessions,
    /// `logs.dump`: a session's log to its current end (`dump.rs`).
    Dump {
        /// The session.
        id: String,
        /// Where to start, in bytes of the log.
        from_byte: u64,
        /// Output as `log.bytes` frames (capability `logs.raw`).
        raw: bool,
        /// Output as binary frames after the answer (capability `logs.frames`).
        frames: bool,
    },
    /// A far host's stream (`logs.follow` of `NAME:proc_…`), on a door of its own.
    Remote(crate::daemon::hosts::RemoteStream),
    /// `spawn {"follow": true}` (capability `spawn.follow`): the spawn's answer as
    /// a `spawned` note, then the session's `logs.follow` from byte 0 with its
    /// result: `run --wait` in one request, pipelined behind its `hello`.
    Spawned {
        /// The spawn's answer, as `spawn` answers it.
        info: Value,
        /// The session.
        id: String,
        /// Output as `log.bytes` frames (capability `logs.raw`).
        raw: bool,
        /// Output as binary frames after the answer (capability `spawn.frames`).
        frames: bool,
    },
}

impl Stream {
    /// Runs the stream until it ends or the client leaves.
    pub(super) async fn run(self, state: &State, outlet: Outlet<'_>) {
        match self {
            Stream::Events { owner, peek } => events(state, &owner, peek, outlet).await,
            Stream::Logs {
                id,
                from_byte,
                result,
                terminal,
                raw,
                frames,
            } => {
                // Counted while the stream runs, whichever way it ends.
                let _terminal = terminal
                    .then(|| state.registry.attach_terminal(&id).ok().flatten())
                    .flatten();
                let Some(outlet) = framed(outlet.raw(raw), frames).await else {
                    return;
                };
                logs(state, &id, (from_byte, true), result, outlet).await;
            }
            Stream::Sessions => super::sessions::follow(state, outlet).await,
            Stream::Dump {
                id,
                from_byte,
                raw,
                frames,
            } => {
                if let Some(outlet) = framed(outlet.raw(raw), frames).await {
                    super::dump::dump(state, &id, from_byte, outlet).await;
                }
            }
            Stream::Remote(remote) => remote.run(outlet).await,
            Stream::Spawned {
                info,
                id,
                raw,
                frames,
            } => {
                // Held for the stream's first write: a job that is over by its
                // first read (`run --wait -- true`) reaches its client as one
                // write of the note, any output and the answer. `logs` writes
                // it before it waits for anything. So is the answer that opens
                // the frames, which follows the note.
                let mut outlet = outlet.raw(raw);
                outlet.hold_note("spawned", info);
                if frames {
                    outlet.hold_frames_open();
                }
                // Its log has barely begun: it is read out once its follow falls
                // behind, with no read-out (a thread hop) before the first read.
                logs(state, &id, (0, false), true, outlet).await;
            }
        }
    }
}

impl State {
    /// `events.follow {"owner", "peek"?}`.
    pub(super) fn events_follow(params: Value) -> Reply {
        match parse::<EventsParams>(params) {
            Ok(p) => Reply::Stream(Stream::Events {
                owner: p.owner,
                peek: p.peek,
            }),
            Err(err) => Reply::Error(err),
        }
    }

    /// `sessions.follow {}`.
    pub(super) fn sessions_follow(params: Value) -> Reply {
        match parse::<NoParams>(params) {
            Ok(NoParams {}) => Reply::Stream(Stream::Sessions),
            Err(err) => Reply::Error(err),
        }
    }

    /// `logs.follow {"id", "from_byte"?, "result"?, "raw"?}`: the session is looked
    /// up before the stream starts, so an unknown id is a plain error.
    pub(super) fn logs_follow(&self, params: Value, raw: bool, frames: bool) -> Reply {
        match parse::<FollowParams>(params) {
            Ok(p) => match self.registry.lookup(&p.id) {
                Ok(id) => Reply::Stream(Stream::Logs {
                    id: id.to_string(),
                    from_byte: p.from_byte,
                    result: p.result,
                    terminal: p.terminal,
                    raw,
                    frames,
                }),
                Err(err) => Reply::Error(lookup_error(err)),
            },
            Err(err) => Reply::Error(err),
        }
    }
}

/// Streams the owner's events: drain now, then again whenever anything is
/// published. Each batch is a lease acknowledged once written, so events a
/// client never received go back to the queue. With `peek`, only a `pending`
/// notification with the count is sent, whenever it grows.
async fn events(state: &State, owner: &str, peek: bool, mut outlet: Outlet<'_>) {
    // Subscribe before the first drain, so an event published in between wakes us.
    let mut published = state.registry.subscribe();
    // With `peek`: told at the start when something waits, then after every
    // event published for this owner while something waits (a read that emptied
    // the queue in between publishes nothing, so counts alone would miss the next).
    let mut for_owner = true;
    loop {
        if peek {
            let pending = state.registry.pending(owner);
            if pending > 0
                && for_owner
                && outlet.note("pending", pending_note(pending)).await.is_err()
            {
                return;
            }
        } else {
            let lease = state.registry.take(owner);
            for event in lease.events() {
                let params = event.to_json();
                if outlet.note("event", params).await.is_err() {
                    return;
                }
            }
            lease.acknowledge();
        }
        tokio::select! {
            received = published.recv() => match received {
                Ok(event) => for_owner = event.owner_task_id().is_none_or(|o| o == owner),
                // Lagged: something may be for this owner.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => for_owner = true,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            },
            () = outlet.left() => return,
        }
    }
}

/// `outlet` with its frames opened when the client asked for them (capability
/// `logs.frames`); `None` when the client has gone.
async fn framed(mut outlet: Outlet<'_>, frames: bool) -> Option<Outlet<'_>> {
    if frames && outlet.open_frames().await.is_err() {
        return None;
    }
    Some(outlet)
}

/// Streams a session's log from `from_byte` until the session has exited and
/// everything is sent, then answers the request with the final offset. A framed
/// stream reads the log out first when `read_out` (and again whenever its follow
/// falls behind).
///
/// Each read (the file, then hooks and redaction) runs on the blocking pool, and
/// while a read that found output is being written the next one is already made:
/// a long log is read, redacted and sent at once, as `logs.dump` does (over a
/// host's door the far herd, the door and the local daemon then all work at once).
async fn logs(
    state: &State,
    session: &str,
    (from_byte, read_out): (u64, bool),
    with_result: bool,
    mut outlet: Outlet<'_>,
) {
    if !until_started(state, session, &mut outlet).await {
        return;
    }
    // A framed stream reads the log as it is now out at memory speed first.
    let from_byte = if read_out {
        match super::readout::read_out_first(state, session, from_byte, true, &mut outlet).await {
            Ok(reached) => reached,
            Err(None) => return,
            Err(Some(err)) => return outlet.answer(Err(err)).await,
        }
    } else {
        from_byte
    };
    let follower = match state.registry.log_follower(session, from_byte) {
        Ok(follower) => follower,
        Err(err) => return outlet.answer(Err(core_error(err))).await,
    };
    let mut published = state.registry.subscribe();
    // New output is not an event, so the log is also re-read on a short tick.
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    // A framed stream that falls behind a growing log hands over to the read-out
    // again (every core, sendfile) until the read-out declines it once.
    let mut may_read_out = outlet.is_framed();
    let mut next = read_ahead(follower);
    loop {
        let (mut follower, read) = match (&mut next).await {
            Ok((follower, Ok(read))) => (follower, read),
            Ok((_, Err(err))) => return outlet.answer(Err(core_error(err))).await,
            Err(err) => {
                let message = format!("the log reader failed: {err}");
                return outlet
                    .answer(Err(RpcError::new(INTERNAL_ERROR, message)))
                    .await;
            }
        };
        if read.progressed {
            let hand_over = (may_read_out && read.unread >= super::readout::GROW_BYTES)
                .then(|| follower.hand_over_at())
                .flatten();
            if let Some(at) = hand_over {
                // What the follower showed ends at `at`, a line's start.
                if !read.output.is_empty() && outlet.note_log(read.output.as_str()).await.is_err() {
                    return;
                }
                match read_out_from(state, session, at, read.unread, &mut outlet).await {
                    Ok((after, again)) => {
                        may_read_out = again;
                        next = read_ahead(after);
                    }
                    Err(None) => return,
                    Err(Some(err)) => return outlet.answer(Err(err)).await,
                }
                continue;
            }
            // There may be more already: it is read while this is written.
            next = read_ahead(follower);
            if !read.output.is_empty() && outlet.note_log(read.output.as_str()).await.is_err() {
                return;
            }
            continue;
        }
        // Nothing new since the last read: the stream is idle, so the unfinished
        // line it holds goes out unless it can still become a secret (a prompt, an
        // echoed keystroke, a progress bar show within one tick).
        let output = if read.is_done {
            read.output
        } else {
            herd_hooks::Shown::join([read.output, follower.release_idle()], "")
        };
        if !output.is_empty() && outlet.note_log(output.as_str()).await.is_err() {
            return;
        }
        if read.is_done {
            let result = if with_result {
                Some(session_result(state, session).await)
            } else {
                None
            };
            return outlet
                .answer(stream_end(follower.next_byte(), result))
                .await;
        }
        if outlet.flush().await.is_err() {
            return;
        }
        tokio::select! {
            _ = published.recv() => {}
            _ = tick.tick() => {}
            () = outlet.left() => return,
        }
        next = read_ahead(follower);
    }
}

/// A queued job has no run to follow yet: waits for it to start (what the outlet
/// holds goes first); `false` when the client left meanwhile.
async fn until_started(state: &State, session: &str, outlet: &mut Outlet<'_>) -> bool {
    let dequeued = state.registry.until_dequeued(session);
    tokio::pin!(dequeued);
    if (&mut dequeued).now_or_never().is_some() {
        return true;
    }
    if outlet.flush().await.is_err() {
        return false;
    }
    tokio::select! {
        () = &mut dequeued => true,
        () = outlet.left() => false,
    }
}

/// A framed stream whose follow fell `unread` bytes behind a growing log: the
/// read-out shows the log on from `at` (a line's start the follow showed up to;
/// the line it held is read again) on every core; the follower that goes on
/// where it stopped, and whether the read-out may be asked again (it read
/// something). `Err(None)`: the client has gone; `Err(Some)`: the stream's answer.
async fn read_out_from(
    state: &State,
    session: &str,
    at: u64,
    unread: u64,
    outlet: &mut Outlet<'_>,
) -> Result<(herd_core::LogFollower, bool), Option<RpcError>> {
    tracing::debug!(target: "herd::readout", session, at, unread, "a follow behind its log hands over to the read-out");
    let reached = super::readout::read_out_first(state, session, at, true, outlet).await?;
    let follower = state
        .registry
        .log_follower(session, reached)
        .map_err(|err| Some(core_error(err)))?;
    Ok((follower, reached > at))
}

/// Takes `raw` (capability `logs.raw`) off a log stream's params, and a spawn's
/// (with `follow`, capability `spawn.follow`): whether the client asked for
/// `log.bytes` frames. Other methods' params pass unchanged.
pub(super) fn take_raw(method: &str, params: Value) -> (Value, bool) {
    if !matches!(method, "logs.follow" | "logs.dump" | "spawn") {
        return (params, false);
    }
    take_flag(params, "raw")
}

/// Takes `frames` (capability `logs.frames`) off a log stream's params, and a
/// spawn's (with `follow`, capability `spawn.frames`): whether the client asked for
/// binary frames. Other methods' params pass unchanged.
pub(super) fn take_frames(method: &str, params: Value) -> (Value, bool) {
    if !matches!(method, "logs.follow" | "logs.dump" | "spawn") {
        return (params, false);
    }
    take_flag(params, crate::logframes::PARAM)
}

/// Takes the boolean `name` off `params`: whether it was `true`.
pub(super) fn take_flag(mut params: Value, name: &str) -> (Value, bool) {
    let set = params
        .as_object_mut()
        .and_then(|o| o.remove(name))
        .is_some_and(|v| v.as_bool() == Some(true));
    (params, set)
}

impl State {
    /// `spawn {…, "follow": true}` (capability `spawn.follow`): the spawn, then,
    /// when it started a session of this host, the [`Stream::Spawned`] that
    /// follows it to its end. A far spawn (`host`) answers as a plain spawn.
    pub(super) async fn spawn_follow(&self, params: Value, raw: bool, frames: bool) -> Reply {
        match self.spawn(params).await {
            Ok(info) => match crate::client::read_answer::<Spawn>(&info) {
                Ok(spawned) if !spawned.session_id.contains(':') => {
                    Reply::Stream(Stream::Spawned {
                        info,
                        id: spawned.session_id,
                        raw,
                        frames,
                    })
                }
                _ => Reply::Value(info),
            },
            Err(error) => Reply::Error(error),
        }
    }
}

/// One read of `follower` on the blocking pool; the follower comes back with it.
type Ahead = tokio::task::JoinHandle<(
    herd_core::LogFollower,
    Result<herd_core::FollowRead, herd_core::Error>,
)>;

fn read_ahead(mut follower: herd_core::LogFollower) -> Ahead {
    tokio::task::spawn_blocking(move || {
        let read = follower.read(CHUNK_BYTES);
        (follower, read)
    })
}

/// The `pending` note: how many events wait for the owner.
fn pending_note(count: usize) -> Value {
    let count = u64::try_from(count).unwrap_or(u64::MAX);
    serde_json::to_value(Pending { count }).unwrap_or(Value::Null)
}

/// How an ended session ended, as `wait` answers it; `{"error"}` if that fails.
async fn session_result(state: &State, session: &str) -> Value {
    // The session has ended, so this wait answers at once (its timeout only has
    // to be positive).
    let ended = state
        .registry
        .wait(session, Duration::from_secs(1), None)
        .await;
    match ended.map_err(core_error).and_then(to_value) {
        Ok(value) => value,
        Err(err) => Value::from_iter([("error".to_owned(), Value::from(err.message))]),
    }
}
