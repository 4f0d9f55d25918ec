//! `logs.dump`: a session's log as it is now, from a byte offset to its current
//! end, streamed as `log` notes (`herd logs` of a far job's long log).
//!
//! The chunks are exactly the ones a client's `log_chunk` loop would fetch
//! (`Registry::log_chunk`, each redacted with the log around it, B30), so the
//! output is byte for byte the same; what changes is that nobody waits for a
//! round trip between two chunks. The next chunk is read and redacted on the
//! blocking pool while the one before is written; for a finished session's log
//! (which no longer grows) one chunk per core is made at once, their starts found
//! without redacting (`Registry::log_chunk_end`). The socket's
//! back-pressure bounds how far ahead the far side gets (one chunk in hand, up to
//! one per core being made).
//! Over a host's door this is what lets the far herd, the door and the local
//! daemon all work at once: the local daemon passes the notes on as the far side
//! wrote them (they name no session).
//!
//! The stream ends with the answer `{"next_byte"}`: where a later dump or
//! `log_chunk` goes on (after the last whole line of a running session's log).
//! A running session is not followed: that is `logs.follow`.

use std::collections::VecDeque;

use herd_protocol::params::DumpParams;
use serde_json::Value;

use super::query::CHUNK_BYTES;
use super::wire::{core_error, lookup_error, parse, stream_end};
use super::{Reply, State, Stream};
use crate::daemon::connection::Outlet;
use crate::protocol::{INTERNAL_ERROR, RpcError};

impl State {
    /// `logs.dump {"id", "from_byte"?, "raw"?}`: the session is looked up before
    /// the stream starts, so an unknown id is a plain error.
    pub(super) fn logs_dump(&self, params: Value, raw: bool, frames: bool) -> Reply {
        match parse::<DumpParams>(params) {
            Ok(p) => match self.registry.lookup(&p.id) {
                Ok(id) => Reply::Stream(Stream::Dump {
                    id: id.to_string(),
                    from_byte: p.from_byte,
                    raw,
                    frames,
                }),
                Err(err) => Reply::Error(lookup_error(err)),
            },
            Err(err) => Reply::Error(err),
        }
    }
}

/// One chunk read on the blocking pool.
type Pending = tokio::task::JoinHandle<Result<herd_core::LogChunk, herd_core::Error>>;

fn read_ahead(state: &State, session: &str, from_byte: u64) -> Pending {
    let registry = state.registry.clone();
    let session = session.to_owned();
    tokio::task::spawn_blocking(move || registry.log_chunk(&session, from_byte, CHUNK_BYTES))
}

/// How many chunks of a finished session's log are read and redacted at once: one
/// per core, up to 4 (redaction is the cost; each chunk is independent).
fn depth() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 4))
}

/// Chunks being made, in order, each with the offset it starts at.
struct Ahead<'s> {
    state: &'s State,
    session: &'s str,
    queue: VecDeque<(u64, Pending)>,
    /// Where the next chunk to queue starts; `None` when it is not known yet (a
    /// running session's, whose chunks are made one at a time).
    next: Option<u64>,
    depth: usize,
}

impl Ahead<'_> {
    /// Queues chunks up to the depth, as far as their starts can be found without
    /// redacting (`Registry::log_chunk_end`, a finished session's log only).
    async fn fill(&mut self) {
        while self.queue.len() < self.depth {
            let Some(from) = self.next else { return };
            self.queue
                .push_back((from, read_ahead(self.state, self.session, from)));
            let registry = self.state.registry.clone();
            let session = self.session.to_owned();
            let end = tokio::task::spawn_blocking(move || {
                registry.log_chunk_end(&session, from, CHUNK_BYTES)
            })
            .await;
            self.next = match end {
                Ok(Ok(Some(end))) if end > from => Some(end),
                _ => None,
            };
        }
    }

    /// Starts again at `from`: what was queued is dropped (it started elsewhere).
    fn restart(&mut self, from: u64) {
        for (_, pending) in self.queue.drain(..) {
            pending.abort();
        }
        self.next = Some(from);
    }
}

/// Streams the log from `from_byte` to its current end, then answers with the
/// offset reached. The chunks of a finished session's log are read and redacted on
/// several cores at once and written in order; each one's own `next_byte` is
/// checked against where the next queued one starts, so the bytes out are exactly
/// those of the chunk-by-chunk loop.
pub(super) async fn dump(state: &State, session: &str, from_byte: u64, mut outlet: Outlet<'_>) {
    // A framed stream reads the log out at memory speed first.
    let mut from =
        match super::readout::read_out_first(state, session, from_byte, false, &mut outlet).await {
            Ok(reached) => reached,
            Err(None) => return,
            Err(Some(err)) => return outlet.answer(Err(err)).await,
        };
    let mut ahead = Ahead {
        state,
        session,
        queue: VecDeque::new(),
        next: Some(from),
        depth: depth(),
    };
    ahead.fill().await;
    loop {
        let Some((_, mut next)) = ahead.queue.pop_front() else {
            return outlet.answer(stream_end(from, None)).await;
        };
        let chunk = match (&mut next).await {
            Ok(Ok(chunk)) => chunk,
            Ok(Err(err)) => return outlet.answer(Err(core_error(err))).await,
            Err(err) => {
                let message = format!("the log reader failed: {err}");
                return outlet
                    .answer(Err(RpcError::new(INTERNAL_ERROR, message)))
                    .await;
            }
        };
        let more = chunk.next_byte > from;
        if more
            && ahead
                .queue
                .front()
                .is_some_and(|(at, _)| *at != chunk.next_byte)
        {
            ahead.restart(chunk.next_byte);
        }
        if more {
            // The next chunks are made while this one is written.
            if ahead.queue.is_empty() {
                ahead.next = Some(chunk.next_byte);
            }
            ahead.fill().await;
        }
        if !chunk.output.is_empty() && outlet.note_log(chunk.output.as_str()).await.is_err() {
            return;
        }
        if !more {
            return outlet.answer(stream_end(from, None)).await;
        }
        from = chunk.next_byte;
    }
}
