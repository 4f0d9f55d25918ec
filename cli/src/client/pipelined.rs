//! `hello` and a first request in one write: a short command such as
//! `run --wait` spends no round trip on the handshake.
//!
//! The daemon reads a connection's lines in order and answers `hello` before it
//! reads the next one, so a request written behind it is run only once the
//! handshake succeeded (after a refused `hello` it is refused too, as sent before
//! one). The request is built before the daemon's capabilities are known: it must
//! be one that a daemon lacking what it uses refuses rather than half-serves (an
//! unknown field of `spawn` is refused), and the caller reads `hello`'s answer in
//! [`Client::hello`] before the request's, to tell a refusal for want of a
//! capability from any other.
//!
//! When no daemon answers, or the connection breaks before `hello`'s answer (a
//! daemon exiting right now: it never read the request behind it), nothing was
//! sent: the caller gets an ordinary connected client ([`Client::connect`], which
//! starts a daemon when none runs) and sends the request itself.

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

use super::{Client, check_socket_path, handshake_failure, hello_params, liveness};
use crate::protocol::Request;

/// What [`Client::connect_pipelined`] came to.
#[derive(Debug)]
pub(crate) enum Pipelined {
    /// The request went behind `hello`, which the daemon answered: its messages
    /// are next on the connection.
    Sent {
        /// The connection, its handshake done.
        client: Client,
        /// The request's id.
        request: u64,
    },
    /// Nothing was sent: a connection with its handshake done, for the caller to
    /// send the request on.
    Connected(Client),
}

impl Client {
    /// Connects to the home's daemon and writes `hello` and `method` in one write,
    /// then reads `hello`'s answer.
    ///
    /// # Errors
    /// As [`Client::connect`]'s: a refused handshake (the request behind it was
    /// refused too), a daemon that could not be started.
    pub(crate) async fn connect_pipelined(
        home: &herd_persistence::Home,
        method: &str,
        params: Value,
    ) -> anyhow::Result<Pipelined> {
        let socket = home.socket_path();
        check_socket_path(&socket)?;
        let Ok(stream) = UnixStream::connect(&socket).await else {
            // No daemon (or none that takes connections): the ordinary way says
            // why, or starts one.
            return Ok(Pipelined::Connected(Client::connect(home).await?));
        };
        let watched = liveness::Watched {
            pid: liveness::pid_from_file(home),
            socket: Some(socket),
        };
        let mut client = Client::admitted(stream, watched)?;
        let mut lines = Vec::new();
        let hello = client.line("hello", hello_params(), &mut lines)?;
        let request = client.line(method, params, &mut lines)?;
        if client.writer.write_all(&lines).await.is_err() {
            return Ok(Pipelined::Connected(Client::connect(home).await?));
        }
        // A daemon may send hello's answer with the request's first message (one
        // write): it is waited for as that request's, under its deadline.
        match client.answer_to(hello, method).await {
            Ok(answer) => {
                client.greeted(answer)?;
                Ok(Pipelined::Sent { client, request })
            }
            Err(err) => {
                handshake_failure(err)?;
                Ok(Pipelined::Connected(Client::connect(home).await?))
            }
        }
    }

    /// Appends request `method` to `lines`; its id.
    fn line(&mut self, method: &str, params: Value, lines: &mut Vec<u8>) -> anyhow::Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let request = Request {
            jsonrpc: "2.0".into(),
            id: Some(Value::from(id)),
            method: method.to_owned(),
            params,
        };
        serde_json::to_writer(&mut *lines, &request)?;
        lines.push(b'\n');
        Ok(id)
    }

    /// The answer to request `id` (sent already), watched as a call of `method`.
    async fn answer_to(&mut self, id: u64, method: &str) -> Result<Value, super::CallError> {
        use super::CallError;
        loop {
            let message = self.next_note(method).await.map_err(CallError::Io)?;
            let Some(message) = message else {
                return Err(CallError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the daemon closed the connection",
                )));
            };
            let ours = message.id == id || (message.id.is_null() && message.error.is_some());
            if message.method.is_some() || !ours {
                continue;
            }
            if let Some(error) = message.error {
                return Err(CallError::Rpc(error));
            }
            return Ok(message.result.unwrap_or(Value::Null));
        }
    }
}
