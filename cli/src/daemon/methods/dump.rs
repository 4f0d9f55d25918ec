//! `logs.dump`: a session's log as it is now, from a byte offset to its current
//! end, streamed as `log` notes (issue 15: `herd logs` of a far job's long log).
//!
//! The chunks are exactly the ones a client's `log_chunk` loop would fetch
//! (`Registry::log_chunk`, each redacted with the log around it, B30), so the
//! output is byte for byte the same; what changes is that nobody waits for a
//! round trip between two chunks. The next chunk is read and redacted on the
//! blocking pool while the one before is written, and the socket's back-pressure
//! bounds how far ahead the far side gets (one chunk in hand, one being made).
//! Over a host's door this is what lets the far herd, the door and the local
//! daemon all work at once: the local daemon passes the notes on as the far side
//! wrote them (they name no session).
//!
//! The stream ends with the answer `{"next_byte"}`: where a later dump or
//! `log_chunk` goes on (after the last whole line of a running session's log).
//! A running session is not followed: that is `logs.follow`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::query::CHUNK_BYTES;
use super::wire::{core_error, lookup_error, parse};
use super::{Reply, State, Stream};
use crate::daemon::connection::Outlet;
use crate::protocol::{INTERNAL_ERROR, RpcError};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DumpParams {
    id: String,
    #[serde(default)]
    from_byte: u64,
}

impl State {
    /// `logs.dump {"id", "from_byte"?, "raw"?}`: the session is looked up before
    /// the stream starts, so an unknown id is a plain error.
    pub(super) fn logs_dump(&self, params: Value, raw: bool) -> Reply {
        match parse::<DumpParams>(params) {
            Ok(p) => match self.registry.lookup(&p.id) {
                Ok(id) => Reply::Stream(Stream::Dump {
                    id: id.to_string(),
                    from_byte: p.from_byte,
                    raw,
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

/// Streams the log from `from_byte` to its current end, then answers with the
/// offset reached.
pub(super) async fn dump(state: &State, session: &str, from_byte: u64, mut outlet: Outlet<'_>) {
    let mut from = from_byte;
    let mut next = read_ahead(state, session, from);
    loop {
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
        if more {
            // The next chunk is made while this one is written.
            next = read_ahead(state, session, chunk.next_byte);
        }
        if !chunk.output.is_empty() && outlet.note_log(chunk.output.as_str()).await.is_err() {
            return;
        }
        if !more {
            return outlet.answer(Ok(json!({"next_byte": from}))).await;
        }
        from = chunk.next_byte;
    }
}
