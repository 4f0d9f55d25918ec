//! The one thing a streaming method writes into: its notes, then its answer, and
//! the news that its client has gone.
//!
//! A stream takes no input: anything the client sends, or its closing its end,
//! ends the stream ([`Outlet::left`]). Every note is one line as
//! `Response::notification` serialises it, and the answer carries the request's id,
//! so a method that streams never sees the socket, the line format or the id.

use std::future::Future;

use serde_json::Value;
use tokio::io::BufReader;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::{client_gone, write};
use crate::protocol::{Response, RpcError};

/// The client has gone: a note could not be written, so the stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gone;

/// A streaming request's side of its connection.
#[derive(Debug)]
pub(crate) struct Outlet<'c> {
    reader: &'c mut BufReader<OwnedReadHalf>,
    writer: &'c mut OwnedWriteHalf,
    /// The id of the request that started the stream, which its answer carries.
    id: Value,
}

impl<'c> Outlet<'c> {
    pub(super) fn new(
        reader: &'c mut BufReader<OwnedReadHalf>,
        writer: &'c mut OwnedWriteHalf,
        id: Value,
    ) -> Outlet<'c> {
        Outlet { reader, writer, id }
    }

    /// Writes one note: `{"jsonrpc":"2.0","id":null,"method":…,"params":…}`.
    pub(crate) async fn note(&mut self, method: &str, params: Value) -> Result<(), Gone> {
        write(self.writer, &Response::notification(method, params))
            .await
            .map_err(|_| Gone)
    }

    /// Writes one `log` note carrying `output`: the line [`Outlet::note`] writes
    /// for `{"output": output}`, made by the fast string encoder (log chunks are
    /// the long notes).
    pub(crate) async fn note_log(&mut self, output: &str) -> Result<(), Gone> {
        use tokio::io::AsyncWriteExt;
        let line = crate::protocol::escape::log_note_line(output);
        self.writer.write_all(&line).await.map_err(|_| Gone)
    }

    /// Answers the request, which ends the stream; a client that has gone is not
    /// told.
    pub(crate) async fn answer(self, answer: Result<Value, RpcError>) {
        let response = match answer {
            Ok(result) => Response::ok(self.id, result),
            Err(error) => Response::err(self.id, error),
        };
        let _ = write(self.writer, &response).await;
    }

    /// Resolves when the client closes its end or sends anything. Cancel-safe: a
    /// line half read when it is dropped is finished by the next call.
    pub(crate) async fn left(&mut self) {
        client_gone(self.reader).await;
    }

    /// Hands the connection's halves and the request's id to `relay`: the host
    /// link's far stream (`hosts.rs`, `RemoteStream::run`), which passes a far
    /// daemon's lines through as written, still drives the socket itself.
    pub(crate) fn relay<F, R>(self, relay: R) -> F
    where
        R: FnOnce(&'c mut BufReader<OwnedReadHalf>, &'c mut OwnedWriteHalf, Value) -> F,
        F: Future<Output = ()>,
    {
        relay(self.reader, self.writer, self.id)
    }
}
