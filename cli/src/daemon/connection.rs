//! The protocol's framing: one client connection from peer check to EOF, knowing
//! nothing of what the methods do.
//!
//! It owns lines (one JSON-RPC message per line, at most `MAX_REQUEST_BYTES`), ids
//! (an answer carries its request's id; a notification, without one, is neither
//! run nor answered), errors (a malformed line gets a JSON-RPC error and the
//! connection goes on; an oversized one is discarded by the reader and answered with
//! an error naming the limit), the handshake gate (the first request must be a
//! successful `hello`, within [`HANDSHAKE_TIMEOUT`]), the connection limit (`slots`:
//! at `max_connections`, the connection idle the longest is closed for a new one) and
//! streaming: a method that
//! streams gets an [`Outlet`], the one thing it writes notes and its answer into,
//! and keeps the connection until it ends.
//!
//! The methods are behind [`Service`] (`methods.rs` implements it): params in, a
//! [`Reply`] out, per-connection state (the drain leases) kept here between
//! requests and dropped with the connection. Requests on one connection are
//! answered in order.

mod outlet;
mod slots;
mod writer;

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;

pub(crate) use outlet::Outlet;
pub(crate) use slots::{Connections, Slot};
use writer::Writer;

use crate::protocol::{
    self, HANDSHAKE_REQUIRED, INVALID_REQUEST, Line, MAX_REQUEST_BYTES, PARSE_ERROR, Request,
    Response, RpcError, TOO_LARGE, TOO_MANY_CONNECTIONS,
};

/// What the framing serves: the methods.
pub(crate) trait Service: Send + Sync + 'static {
    /// What one connection keeps between its requests; dropped when it closes.
    type Connection: Default + Send;
    /// A streaming method's work, run once it has the connection.
    type Stream: Send;

    /// Answers the handshake; the connection serves other methods once one
    /// succeeds.
    fn hello(&self, params: &Value) -> Result<Value, RpcError>;

    /// Answers one request (never `hello`).
    fn call(
        &self,
        connection: &mut Self::Connection,
        method: &str,
        params: Value,
    ) -> impl Future<Output = Reply<Self::Stream>> + Send;

    /// Whether a call of `method` is abandoned when its client leaves before the
    /// answer (nobody would read it, and it may never end on its own).
    fn ends_with_client(&self, method: &str) -> bool;

    /// Runs a stream on the connection until it ends or the client leaves.
    fn stream(&self, stream: Self::Stream, outlet: Outlet<'_>) -> impl Future<Output = ()> + Send;

    /// An answer of at least [`LARGE_ANSWER`] bytes was written and freed.
    fn large_answer_sent(&self) {}
}

/// The size from which an answer's buffers are worth giving back to the system
/// once it is written (a listing of thousands of sessions).
const LARGE_ANSWER: usize = 1 << 20;

/// What a method answers.
#[derive(Debug)]
pub(crate) enum Reply<S> {
    /// One result.
    Value(Value),
    /// One result, already serialised (a long answer written in one pass, with no
    /// `Value` of it built first).
    Json(Vec<u8>),
    /// One error.
    Error(RpcError),
    /// The connection becomes a stream.
    Stream(S),
}

/// How long a new connection may take to send its `hello`.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Repeated accept-loop warnings, logged at most once a second with a count of
/// the ones held back (at the descriptor limit they come in a tight loop).
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    last: Option<std::time::Instant>,
    held_back: u64,
}

impl Refusals {
    pub(crate) fn note(&mut self, what: &str) {
        let now = std::time::Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < std::time::Duration::from_secs(1))
        {
            self.held_back += 1;
            return;
        }
        tracing::warn!(held_back = self.held_back, "{what}");
        self.last = Some(now);
        self.held_back = 0;
    }
}

/// Answers a connection over the limit with the error naming it, then closes it.
pub(crate) async fn refuse_busy(mut stream: UnixStream, limit: usize) {
    let error = RpcError::new(
        TOO_MANY_CONNECTIONS,
        format!(
            "the daemon is serving {limit} connections, its max_connections, each with a \
             request in flight; close some (waits, followers) or raise max_connections in \
             config.toml"
        ),
    );
    let _ = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        stream.write_all(&Response::err(Value::Null, error).to_line()),
    )
    .await;
}

/// Ends when the client has closed its side with no request pending; a client
/// that sent more requests is not watched (they are read after this one).
async fn closed(reader: &mut BufReader<OwnedReadHalf>) {
    match reader.fill_buf().await {
        Ok([]) | Err(_) => {}
        Ok(_) => std::future::pending().await,
    }
}

/// Resolves when the client closes its end (or sends anything: streams take no input).
async fn client_gone(reader: &mut BufReader<OwnedReadHalf>) {
    let mut buf = Vec::new();
    let _ = protocol::read_line(reader, &mut buf, 1024).await;
}

/// What one line came to.
enum Step {
    /// Write this answer, then read the next line.
    Answer(Box<Response>),
    /// `hello`'s successful answer: written as [`Step::Answer`]'s, or held for the
    /// next write when the next request is already here.
    Greeted(Box<Response>),
    /// Write this line (an answer serialised already), then read the next line.
    Line(Vec<u8>),
    /// Nothing to write (a notification): read the next line.
    Skip,
    /// The connection is done: a stream ended, or the client left a wait.
    End,
}

/// Serves one connection to its end.
pub(crate) async fn serve<S: Service>(
    service: Arc<S>,
    stream: UnixStream,
    daemon_uid: u32,
    slot: Slot,
) {
    let Some((read, writer)) = admit(stream, daemon_uid).await else {
        return;
    };
    let mut writer = Writer::new(writer);
    let mut reader = BufReader::new(read);
    let mut buf = Vec::new();
    let mut greeted = false;
    let mut connection = S::Connection::default();
    loop {
        // Nothing is held while the client may be waiting for it.
        if !has_line(&reader) && writer.flush().await.is_err() {
            return;
        }
        let read = protocol::read_line(&mut reader, &mut buf, MAX_REQUEST_BYTES);
        // A connection that never says hello is let go, so idle half-open clients
        // cannot hold the daemon's slots; an idle one is closed when a new client
        // needs its slot (`slots`).
        let read = async {
            if greeted {
                Some(read.await)
            } else {
                tokio::time::timeout(HANDSHAKE_TIMEOUT, read).await.ok()
            }
        };
        let read = tokio::select! {
            read = read => match read {
                Some(read) => read,
                None => {
                    tracing::debug!("no hello within the handshake timeout; connection closed");
                    return;
                }
            },
            () = slot.evicted() => {
                tracing::debug!("idle at max_connections; connection closed for a new one");
                return;
            }
        };
        if !slot.busy() {
            return;
        }
        let line = match read {
            Ok(line) => line,
            Err(err) => {
                tracing::debug!(error = %err, "connection read failed");
                return;
            }
        };
        let step = match line {
            Line::Eof => return,
            Line::TooLong => Step::Answer(Box::new(Response::err(
                Value::Null,
                RpcError::new(
                    TOO_LARGE,
                    format!("request too large: the limit is {MAX_REQUEST_BYTES} bytes per line"),
                ),
            ))),
            Line::Complete => match parse(&buf) {
                Err(response) => Step::Answer(response),
                Ok(request) => {
                    let mut exchange = Exchange {
                        service: &*service,
                        connection: &mut connection,
                        greeted: &mut greeted,
                        reader: &mut reader,
                        writer: &mut writer,
                    };
                    exchange.request(request).await
                }
            },
        };
        // Idle from before its answer is written: a client that has read its answer
        // is counted idle already, so the connections idle the longest are the ones
        // whose answers went out first, as their clients saw them. Eviction is acted
        // on only at the next read, so the answer still goes out whole.
        if !matches!(step, Step::End) {
            slot.idle();
        }
        let large = matches!(&step, Step::Line(line) if line.len() >= LARGE_ANSWER);
        if !put(&mut writer, &reader, step).await {
            return;
        }
        if large {
            service.large_answer_sent();
        }
    }
}

/// Puts a step's output on the connection; false when the connection is done (the
/// step ended it, or the write failed).
async fn put(writer: &mut Writer, reader: &BufReader<OwnedReadHalf>, step: Step) -> bool {
    match step {
        // A client that wrote its next request behind `hello` (`run --wait`: hello
        // and the spawn in one write) reads hello's answer with that request's first
        // message: one write, one wake-up of the client.
        Step::Greeted(response) if has_line(reader) => {
            writer.hold(&response.to_line());
            true
        }
        Step::Answer(response) | Step::Greeted(response) => write(writer, &response).await.is_ok(),
        Step::Line(line) => writer.write_all(&line).await.is_ok(),
        Step::Skip => true,
        Step::End => false,
    }
}

/// Checks the peer's uid; the connection's halves when it is the daemon's own user.
async fn admit(
    stream: UnixStream,
    daemon_uid: u32,
) -> Option<(OwnedReadHalf, tokio::net::unix::OwnedWriteHalf)> {
    let peer_uid = match stream.peer_cred() {
        Ok(cred) => cred.uid(),
        Err(err) => {
            tracing::warn!(error = %err, "cannot read the peer's credentials; connection refused");
            return None;
        }
    };
    let (read, mut writer) = stream.into_split();
    if peer_uid != daemon_uid {
        tracing::warn!(peer_uid, daemon_uid, "connection from another user refused");
        let error = RpcError::new(
            protocol::PEER_REFUSED,
            format!(
                "connection refused: this daemon serves uid {daemon_uid} only (you are uid {peer_uid})"
            ),
        );
        let _ = writer
            .write_all(&Response::err(Value::Null, error).to_line())
            .await;
        return None;
    }
    Some((read, writer))
}

/// One request's view of its connection.
struct Exchange<'a, S: Service> {
    service: &'a S,
    connection: &'a mut S::Connection,
    greeted: &'a mut bool,
    reader: &'a mut BufReader<OwnedReadHalf>,
    writer: &'a mut Writer,
}

impl<S: Service> Exchange<'_, S> {
    /// Runs one parsed request: the handshake gate, then the service.
    async fn request(&mut self, request: Request) -> Step {
        // A notification (no `id`) is neither run nor answered: herd's protocol
        // defines none, and `shutdown` sent as one must not stop the daemon.
        let Some(id) = request.id.clone() else {
            tracing::debug!(method = %request.method, "notification ignored");
            return Step::Skip;
        };
        // Every request, by method: a test counts the requests a command made.
        tracing::debug!(target: "herd::requests", method = %request.method, "request");
        if !*self.greeted && request.method != "hello" {
            return Step::Answer(Box::new(Response::err(
                id,
                RpcError::new(
                    HANDSHAKE_REQUIRED,
                    "the first request on a connection must be `hello`",
                ),
            )));
        }
        if request.method == "hello" {
            let answer = self.service.hello(&request.params);
            *self.greeted = answer.is_ok();
            return match answer {
                Ok(result) => Step::Greeted(Box::new(Response::ok(id, result))),
                Err(error) => Step::Answer(Box::new(Response::err(id, error))),
            };
        }
        // A held `hello` answer waits for this request's first message only when
        // that comes promptly: a spawn's answer (or its `spawned` note) does; any
        // other method may wait long (a `wait`), so the answer goes now.
        if request.method != "spawn" && self.writer.flush().await.is_err() {
            return Step::End;
        }
        let ends_with_client = self.service.ends_with_client(&request.method);
        let call = self
            .service
            .call(self.connection, &request.method, request.params);
        // A wait ends when its client leaves: a dev server never exits, and nobody
        // would read the answer.
        let reply = if ends_with_client {
            tokio::select! {
                reply = call => reply,
                () = closed(self.reader) => {
                    tracing::debug!("the client left; its wait ends");
                    return Step::End;
                }
            }
        } else {
            call.await
        };
        match reply {
            Reply::Value(result) => Step::Answer(Box::new(Response::ok(id, result))),
            Reply::Json(result) => Step::Line(answer_line(&id, &result)),
            Reply::Error(error) => Step::Answer(Box::new(Response::err(id, error))),
            Reply::Stream(stream) => {
                let outlet = Outlet::new(self.reader, self.writer, id);
                self.service.stream(stream, outlet).await;
                Step::End
            }
        }
    }
}

/// Parses a request line, or the error response for it.
fn parse(line: &[u8]) -> Result<Request, Box<Response>> {
    let value: Value = serde_json::from_slice(line).map_err(|err| {
        Box::new(Response::err(
            Value::Null,
            RpcError::new(PARSE_ERROR, format!("parse error: {err}")),
        ))
    })?;
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let request: Request = serde_json::from_value(value).map_err(|err| {
        Box::new(Response::err(
            id.clone(),
            RpcError::new(INVALID_REQUEST, format!("invalid request: {err}")),
        ))
    })?;
    if request.jsonrpc != "2.0" {
        return Err(Box::new(Response::err(
            id,
            RpcError::new(
                INVALID_REQUEST,
                "invalid request: `jsonrpc` must be \"2.0\"",
            ),
        )));
    }
    Ok(request)
}

/// The line of a success answer to `id` whose result is `result`, serialised
/// already: the bytes [`Response::ok`] would write for the same result.
fn answer_line(id: &Value, result: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(result.len() + 64);
    line.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    // An id is a number, a string or null: serialising it cannot fail.
    let _ = serde_json::to_writer(&mut line, id);
    line.extend_from_slice(br#","result":"#);
    line.extend_from_slice(result);
    line.extend_from_slice(b"}\n");
    line
}

/// Writes one message.
async fn write(writer: &mut Writer, response: &Response) -> std::io::Result<()> {
    writer.write_all(&response.to_line()).await
}

/// Whether the client's next request is already read in whole (it was written
/// behind the last one).
fn has_line(reader: &BufReader<OwnedReadHalf>) -> bool {
    reader.buffer().contains(&b'\n')
}

#[cfg(test)]
mod tests {
    use super::{Response, Value, answer_line};

    #[test]
    fn a_serialised_answer_is_the_line_of_its_value() {
        let result =
            serde_json::json!({"processes": [{"session_id": "proc_1", "pid": 7}], "older": 2});
        let bytes = serde_json::to_vec(&result).expect("serialised");
        for id in [Value::from(3), Value::from("a\"b"), Value::Null] {
            let expected = Response::ok(id.clone(), result.clone()).to_line();
            assert_eq!(answer_line(&id, &bytes), expected);
        }
    }
}
