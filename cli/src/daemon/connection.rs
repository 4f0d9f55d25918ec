//! One client connection: peer check, handshake, then requests until EOF.
//!
//! Requests on one connection are answered in order. A malformed line gets a
//! JSON-RPC error and the connection goes on; an oversized line is discarded by
//! the reader and answered with an error naming the limit. The two streaming
//! methods take the connection over until they end. Leased drains live on the
//! connection that took them (`leases.rs`).

use std::sync::Arc;

use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::leases::Leases;
use super::methods::{Reply, State};
use crate::protocol::{
    self, HANDSHAKE_REQUIRED, INVALID_REQUEST, Line, MAX_REQUEST_BYTES, PARSE_ERROR,
    PROTOCOL_VERSION, Request, Response, RpcError, TOO_LARGE, TOO_MANY_CONNECTIONS,
    VERSION_MISMATCH,
};

/// Additions to protocol 1 this daemon serves: leased drains (`drain` with
/// `lease`, `drain.ack`, `drain.release`), `adopt`, and `list`'s `state`,
/// `since_seconds` and `limit`, `spawn`'s `caller_env`, `events.follow`'s
/// `peek` (`pending` counts instead of events), `clean`, `spawn`'s
/// `time_limit_seconds`, `restart`, and `sessions.follow` (a note whenever the
/// home's sessions change, for `herd top`), and `hosts`: other hosts' jobs by
/// qualified id (`NAME:proc_…`), `spawn`'s `host`, `list`'s `host` and
/// `all_hosts`, the `hosts` method and the `HOST_UNREACHABLE` error (`hosts.rs`).
pub(crate) const CAPABILITIES: &[&str] = &[
    "clean",
    "drain.lease",
    "adopt",
    "list.filter",
    "spawn.caller_env",
    "events.pending",
    "logs.follow.result",
    "sessions.follow",
    "spawn.time_limit",
    "restart",
    "hosts",
];

/// How long a new connection may take to send its `hello`.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The connections being served, counted so there are never more than the limit.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    open: Arc<AtomicUsize>,
}

/// One served connection's place in [`Connections`], given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    open: Arc<AtomicUsize>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Connections {
    /// A slot, unless `limit` connections are open already.
    pub(crate) fn enter(&self, limit: usize) -> Option<Slot> {
        self.open
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot {
                open: Arc::clone(&self.open),
            })
    }

    /// How many are open.
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

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
            "the daemon is serving {limit} connections, its max_connections; close some \
             (idle clients, followers) or raise max_connections in config.toml"
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

/// Serves one connection to its end.
pub(crate) async fn serve(state: Arc<State>, stream: UnixStream, daemon_uid: u32, _slot: Slot) {
    let peer_uid = match stream.peer_cred() {
        Ok(cred) => cred.uid(),
        Err(err) => {
            tracing::warn!(error = %err, "cannot read the peer's credentials; connection refused");
            return;
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
        return;
    }
    let mut reader = BufReader::new(read);
    let mut buf = Vec::new();
    let mut greeted = false;
    let mut leases = Leases::default();
    loop {
        let read = protocol::read_line(&mut reader, &mut buf, MAX_REQUEST_BYTES);
        // A connection that never says hello is let go, so idle half-open clients
        // cannot hold the daemon's slots.
        let read = if greeted {
            read.await
        } else {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, read).await {
                Ok(read) => read,
                Err(_) => {
                    tracing::debug!("no hello within the handshake timeout; connection closed");
                    return;
                }
            }
        };
        let line = match read {
            Ok(line) => line,
            Err(err) => {
                tracing::debug!(error = %err, "connection read failed");
                return;
            }
        };
        let response = match line {
            Line::Eof => return,
            Line::TooLong => Response::err(
                Value::Null,
                RpcError::new(
                    TOO_LARGE,
                    format!("request too large: the limit is {MAX_REQUEST_BYTES} bytes per line"),
                ),
            ),
            Line::Complete => match parse(&buf) {
                Err(response) => *response,
                // A notification (no `id`) is neither run nor answered: herd's
                // protocol defines none, and `shutdown` sent as one must not stop
                // the daemon.
                Ok(request) if request.id.is_none() => {
                    tracing::debug!(method = %request.method, "notification ignored");
                    continue;
                }
                Ok(request) => {
                    let id = request.id.clone().unwrap_or(Value::Null);
                    if !greeted && request.method != "hello" {
                        Response::err(
                            id,
                            RpcError::new(
                                HANDSHAKE_REQUIRED,
                                "the first request on a connection must be `hello`",
                            ),
                        )
                    } else if request.method == "hello" {
                        let answer = hello(&state, &request.params);
                        greeted = answer.is_ok();
                        match answer {
                            Ok(result) => Response::ok(id, result),
                            Err(error) => Response::err(id, error),
                        }
                    } else if let Some(answer) = leases
                        .handle(&state, &request.method, &request.params)
                        .await
                    {
                        match answer {
                            Ok(result) => Response::ok(id, result),
                            Err(error) => Response::err(id, error),
                        }
                    } else {
                        // A wait ends when its client leaves: a dev server never
                        // exits, and nobody would read the answer.
                        let handled = state.handle(&request.method, request.params);
                        let reply = if request.method == "wait" {
                            tokio::select! {
                                reply = handled => reply,
                                () = closed(&mut reader) => {
                                    tracing::debug!("the client left; its wait ends");
                                    return;
                                }
                            }
                        } else {
                            handled.await
                        };
                        match reply {
                            Reply::Value(result) => Response::ok(id, result),
                            Reply::Error(error) => Response::err(id, error),
                            Reply::Stream(stream) => {
                                stream.run(&state, &mut reader, &mut writer, id).await;
                                return;
                            }
                        }
                    }
                }
            },
        };
        if write(&mut writer, &response).await.is_err() {
            return;
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

/// Answers the handshake.
fn hello(state: &State, params: &Value) -> Result<Value, RpcError> {
    let client_version = params
        .get("client")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    match params.get("protocol").and_then(Value::as_u64) {
        Some(version) if version == u64::from(PROTOCOL_VERSION) => Ok(json!({
            "protocol": PROTOCOL_VERSION,
            "daemon": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "home": state.home().root().display().to_string(),
            // What this daemon serves beyond protocol 1's methods; a client checks
            // before using one and falls back without it.
            "capabilities": CAPABILITIES,
        })),
        Some(version) => Err(RpcError::new(
            VERSION_MISMATCH,
            format!(
                "protocol version mismatch: the client (herd {client_version}) speaks protocol {version}, \
                 the daemon (herd {}) speaks protocol {PROTOCOL_VERSION}; run `herd shutdown` with the \
                 daemon's binary, then retry (the new daemon starts automatically)",
                env!("CARGO_PKG_VERSION")
            ),
        )),
        None => Err(RpcError::new(
            protocol::INVALID_PARAMS,
            "hello needs `protocol`, the client's protocol version number",
        )),
    }
}

/// Writes one message.
pub(crate) async fn write(writer: &mut OwnedWriteHalf, response: &Response) -> std::io::Result<()> {
    writer.write_all(&response.to_line()).await
}
