//! One client connection: peer check, handshake, then requests until EOF.
//!
//! Requests on one connection are answered in order. A malformed line gets a
//! JSON-RPC error and the connection goes on; an oversized line is discarded by
//! the reader and answered with an error naming the limit. The two streaming
//! methods take the connection over until they end. Leased drains live on the
//! connection that took them (`leases.rs`).

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;

use super::leases::Leases;
use super::methods::{Reply, State};
use crate::protocol::{
    self, HANDSHAKE_REQUIRED, INVALID_REQUEST, Line, MAX_REQUEST_BYTES, PARSE_ERROR,
    PROTOCOL_VERSION, Request, Response, RpcError, TOO_LARGE, VERSION_MISMATCH,
};

/// Additions to protocol 1 this daemon serves: leased drains (`drain` with
/// `lease`, `drain.ack`, `drain.release`), `adopt`, and `list`'s `state`,
/// `since_seconds` and `limit`, and `spawn`'s `caller_env`.
pub(crate) const CAPABILITIES: [&str; 4] =
    ["drain.lease", "adopt", "list.filter", "spawn.caller_env"];

/// Serves one connection to its end.
pub(crate) async fn serve(state: Arc<State>, stream: UnixStream, daemon_uid: u32) {
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
        let line = match protocol::read_line(&mut reader, &mut buf, MAX_REQUEST_BYTES).await {
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
                    } else if let Some(answer) =
                        leases.handle(&state, &request.method, &request.params)
                    {
                        match answer {
                            Ok(result) => Response::ok(id, result),
                            Err(error) => Response::err(id, error),
                        }
                    } else {
                        match state.handle(&request.method, request.params).await {
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
